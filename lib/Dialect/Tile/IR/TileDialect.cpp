//===- TileDialect.cpp - the tile dialect ---------------------------------===//

#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tileopt::tile;

#include "tileopt/Dialect/Tile/IR/TileDialect.cpp.inc"
#include "tileopt/Dialect/Tile/IR/TileEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tileopt/Dialect/Tile/IR/TileAttrs.cpp.inc"

namespace {
/// Prints layouts as aliases (#blocked, #blocked1, #slice, ...) as Triton does.
struct TileOpAsmInterface : OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<BlockedLayoutAttr>(attr)) {
      os << "blocked";
      return AliasResult::FinalAlias;
    }
    if (isa<MmaLayoutAttr>(attr)) {
      os << "mma";
      return AliasResult::FinalAlias;
    }
    if (isa<SliceLayoutAttr>(attr)) {
      os << "slice";
      return AliasResult::FinalAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void TileDialect::initialize() {
  addInterfaces<TileOpAsmInterface>();
  addOperations<
#define GET_OP_LIST
#include "tileopt/Dialect/Tile/IR/TileOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tileopt/Dialect/Tile/IR/TileAttrs.cpp.inc"
      >();
}

Operation *TileDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}

bool tileopt::tile::isTileElementType(Type type) {
  if (auto intType = dyn_cast<IntegerType>(type))
    return intType.isSignless() &&
           llvm::is_contained({1u, 8u, 16u, 32u, 64u}, intType.getWidth());
  return type.isF16() || type.isBF16() || type.isF32() || type.isF64() ||
         isFp8Type(type);
}

bool tileopt::tile::isFp8Type(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

bool tileopt::tile::isTileType(Type type) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType || !tensorType.hasStaticShape() ||
      !isTileElementType(tensorType.getElementType()))
    return false;
  return llvm::all_of(tensorType.getShape(), [](int64_t size) {
    return size > 0 && llvm::isPowerOf2_64(size);
  });
}

bool tileopt::tile::isViewType(Type type) {
  auto memrefType = dyn_cast<MemRefType>(type);
  return memrefType && isTileElementType(memrefType.getElementType()) &&
         memrefType.isStrided();
}
