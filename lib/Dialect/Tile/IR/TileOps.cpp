//===- TileOps.cpp - tile dialect operations ------------------------------===//

#include "tileopt/Dialect/Tile/IR/Layouts.h"
#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tileopt::tile;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Prints a shape as `64x128` (or `scalar` for rank 0), for diagnostics.
static std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string str;
  llvm::raw_string_ostream os(str);
  llvm::interleave(shape, os, "x");
  return str;
}

static RankedTensorType tileType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Folds an op whose result is its source reshaped when the source is a splat
/// constant: the result is the same splat with the result type.
static OpFoldResult foldSplatConstant(Attribute source, Type resultType) {
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(source))
    return SplatElementsAttr::get(cast<ShapedType>(resultType),
                                  splat.getSplatValue<Attribute>());
  return {};
}

DenseI64ArrayAttr tileopt::tile::composePermutations(OpBuilder &builder,
                                                     DenseI64ArrayAttr inner,
                                                     DenseI64ArrayAttr outer) {
  // result[i] = outer[i] of (inner): dim i of the result is dim outer[i] of
  // the inner result, which is dim inner[outer[i]] of the source.
  SmallVector<int64_t> composed;
  for (int64_t dim : outer.asArrayRef())
    composed.push_back(inner.asArrayRef()[dim]);
  return builder.getDenseI64ArrayAttr(composed);
}

#include "tileopt/Dialect/Tile/IR/TileCanonicalization.inc"

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

void KernelOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                     FunctionType type) {
  state.addAttribute(SymbolTable::getSymbolAttrName(),
                     builder.getStringAttr(name));
  state.addAttribute(getFunctionTypeAttrName(state.name), TypeAttr::get(type));
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Type argType : type.getInputs())
    block->addArgument(argType, state.location);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(block);
  ReturnOp::create(builder, state.location);
}

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildType = [](Builder &builder, ArrayRef<Type> argTypes,
                      ArrayRef<Type> results,
                      function_interface_impl::VariadicFlag, std::string &) {
    return builder.getFunctionType(argTypes, results);
  };
  if (function_interface_impl::parseFunctionOp(
          parser, result, /*allowVariadic=*/false,
          getFunctionTypeAttrName(result.name), buildType,
          getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name)))
    return failure();
  Region &body = *result.regions.front();
  if (body.empty())
    return parser.emitError(parser.getCurrentLocation(),
                            "expected a body for tile.kernel");
  OpBuilder builder(parser.getContext());
  ensureTerminator(body, builder, result.location);
  return success();
}

void KernelOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(
      p, *this, /*isVariadic=*/false, getFunctionTypeAttrName(),
      getArgAttrsAttrName(), getResAttrsAttrName());
}

LogicalResult KernelOp::verify() {
  FunctionType type = getFunctionType();
  if (type.getNumResults() != 0)
    return emitOpError("expected no results, kernel @")
           << getSymName() << " returns " << type.getNumResults()
           << " value(s) of type(s) (" << type.getResults() << ")";
  if (Attribute warps = (*this)->getAttr(getNumWarpsAttrName())) {
    auto value = dyn_cast<IntegerAttr>(warps);
    if (!value || value.getInt() <= 0 || value.getInt() > 32 ||
        !llvm::isPowerOf2_64(value.getInt()))
      return emitOpError() << getNumWarpsAttrName()
                           << " must be a power of two in [1, 32], got "
                           << warps;
  }
  if (Attribute stages = (*this)->getAttr(getNumStagesAttrName())) {
    auto value = dyn_cast<IntegerAttr>(stages);
    if (!value || value.getInt() < 1 || value.getInt() > 8)
      return emitOpError() << getNumStagesAttrName()
                           << " must be an integer in [1, 8], got " << stages;
  }
  for (auto [index, argType] : llvm::enumerate(type.getInputs())) {
    bool isScalar = argType.isIntOrIndexOrFloat();
    if (!isScalar && !isViewType(argType))
      return emitOpError("argument #")
             << index << " has type " << argType
             << ", expected a view (a strided memref of a tile element type) "
                "or a scalar (integer, index or float)";
    if (Attribute divisibility = getArgAttr(index, getDivisibilityAttrName())) {
      auto value = dyn_cast<IntegerAttr>(divisibility);
      if (isScalar || !value || value.getInt() <= 0 ||
          !llvm::isPowerOf2_64(value.getInt()))
        return emitOpError("argument #")
               << index << ": " << getDivisibilityAttrName()
               << " must be a positive power of two (bytes) on a view, got "
               << divisibility;
    }
    if (Attribute bits = getArgAttr(index, getIndexBitwidthAttrName())) {
      auto value = dyn_cast<IntegerAttr>(bits);
      if (argType.isFloat() || !value ||
          (value.getInt() != 32 && value.getInt() != 64))
        return emitOpError("argument #")
               << index << ": " << getIndexBitwidthAttrName()
               << " must be 32 or 64 on a view or an integer argument, got "
               << bits;
    }
    if (Attribute other = getArgAttr(index, getSameShapeAsAttrName())) {
      auto value = dyn_cast<IntegerAttr>(other);
      int64_t k = value ? value.getInt() : -1;
      auto memref = dyn_cast<MemRefType>(argType);
      auto otherType = k >= 0 && k < int64_t(type.getNumInputs())
                           ? dyn_cast<MemRefType>(type.getInput(k))
                           : MemRefType();
      if (!memref || !otherType || k == int64_t(index) ||
          otherType.getRank() != memref.getRank() ||
          getArgAttr(k, getSameShapeAsAttrName()))
        return emitOpError("argument #")
               << index << ": " << getSameShapeAsAttrName()
               << " must name another view argument of the same rank that "
                  "has no such promise itself, got "
               << other;
    }
    if (Attribute sizes = getArgAttr(index, getSizeDivisibilityAttrName())) {
      auto values = dyn_cast<DenseI64ArrayAttr>(sizes);
      auto memref = dyn_cast<MemRefType>(argType);
      if (isScalar || !values || values.size() != memref.getRank() ||
          llvm::any_of(values.asArrayRef(), [](int64_t v) { return v <= 0; }))
        return emitOpError("argument #")
               << index << ": " << getSizeDivisibilityAttrName()
               << " must be an array<i64> of positive integers, one per "
                  "dimension of a view, got "
               << sizes;
    }
  }
  return success();
}

/// A constant index of a memref.dim must name a dimension of its memref.
static LogicalResult verifyDimIndex(memref::DimOp dim) {
  std::optional<int64_t> index = dim.getConstantIndex();
  auto source = dyn_cast<MemRefType>(dim.getSource().getType());
  if (!index || !source || (*index >= 0 && *index < source.getRank()))
    return success();
  return dim.emitOpError("index ")
         << *index << " is out of range for a memref of rank "
         << source.getRank();
}

/// Triton's limit on the elements of a tile (TRITON_MAX_TENSOR_NUMEL): larger
/// tiles take minutes to compile and never fit a program's registers.
static constexpr int64_t kMaxTileElements = int64_t(1) << 20;

std::optional<unsigned> KernelOp::getNumWarps() {
  if (auto warps = (*this)->getAttrOfType<IntegerAttr>(getNumWarpsAttrName()))
    return warps.getInt();
  std::optional<unsigned> most;
  walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (isLayout(getLayout(type)))
        most = std::max(most.value_or(0), tile::getNumWarps(getLayout(type)));
  });
  return most;
}

LogicalResult tileopt::tile::verifyTileFitsRegisters(Operation *op, Type type,
                                                     unsigned numWarps,
                                                     const llvm::Twine &what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return success();
  // A lower bound: elements packed into 32-bit registers, two 16-bit ones a
  // register (as the lowering moves them in words and a dot takes them; f64
  // and i64 take two). Narrower ones count as 16 bits: bools and bytes are
  // not packed tighter.
  int64_t bits = std::max(tensor.getElementTypeBitWidth(), 16u);
  auto words = [&](int64_t elements) {
    return llvm::divideCeil(elements * bits, 32);
  };
  std::optional<InFlightDiagnostic> tooLarge =
      [&]() -> std::optional<InFlightDiagnostic> {
    // "result #0 is a tile of 256 'f32' elements (16x16)", every message's
    // start.
    auto tileError = [&] {
      return op->emitOpError()
             << what << " is a tile of " << tensor.getNumElements() << " "
             << tensor.getElementType() << " elements ("
             << shapeStr(tensor.getShape()) << ")";
    };
    Attribute layout = tensor.getEncoding();
    if (!isLayout(layout)) {
      int64_t threads = int64_t(kWarpSize) * numWarps;
      int64_t perThread =
          llvm::divideCeil(words(tensor.getNumElements()), threads);
      if (perThread <= kMaxRegistersPerThread)
        return std::nullopt;
      return tileError() << " that needs at least " << perThread
                         << " 32-bit registers per thread on " << numWarps
                         << " warp(s) (" << threads
                         << " threads), more than the "
                         << kMaxRegistersPerThread
                         << " a thread has; use smaller tiles or more warps";
    }
    // What the layout gives a thread, replicas included (a layout wider
    // than its tile repeats elements in every thread it spreads them to).
    // The bound is a few multiplications, exact for blocked layouts; for
    // the others the exact count enumerates registers, so only for layouts
    // that are not absurd.
    constexpr int64_t kMaxEnumerated = int64_t(1) << 14;
    int64_t elems = getElemsPerThreadBound(layout, tensor.getShape());
    if (words(elems) <= kMaxRegistersPerThread)
      return std::nullopt;
    bool exact = isa<BlockedLayoutAttr>(layout);
    if (!exact && elems > kMaxEnumerated)
      return tileError()
             << " whose layout " << layout << " enumerates " << elems
             << " registers per thread (before those that wrap onto the same "
                "element merge), more than the "
             << kMaxEnumerated << " the compiler enumerates; use a layout "
             << "that fits the tile";
    if (!exact) {
      elems = getElemsPerThread(layout, tensor.getShape());
      if (words(elems) <= kMaxRegistersPerThread)
        return std::nullopt;
    }
    return tileError()
           << " whose layout " << layout << " gives each thread " << elems
           << " of them (" << words(elems)
           << " 32-bit registers, replicas included), more than the "
           << kMaxRegistersPerThread
           << " registers a thread has; use smaller tiles, more warps or a "
              "layout that repeats the tile less";
  }();
  if (!tooLarge)
    return success();
  InFlightDiagnostic &diag = *tooLarge;
  // Constants that canonicalization merged have no location of their own:
  // point at the source line of a use.
  if (isa<UnknownLoc>(op->getLoc()))
    for (Operation *user : op->getUsers())
      if (!isa<UnknownLoc>(user->getLoc())) {
        diag.attachNote(user->getLoc()) << "used here";
        break;
      }
  return diag;
}

/// Checks what the body's ops can only get wrong together: every tile is
/// within kMaxTileElements, laid out for at most the kernel's
/// `tile.num_warps` (fewer replicate, as a dot narrower than the warps does)
/// and fits their registers, and every memref.dim of a constant index names
/// a dimension of its view (verifyDimIndices).
LogicalResult KernelOp::verifyRegions() {
  if (getBody().empty())
    return emitOpError("expected a body");
  auto declared = (*this)->getAttrOfType<IntegerAttr>(getNumWarpsAttrName());
  auto checkTile = [&](Operation *op, Type type,
                       const llvm::Twine &what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return success();
    if (tensor.getNumElements() > kMaxTileElements)
      return op->emitOpError()
             << what << " is a tile of " << tensor.getNumElements()
             << " elements (" << shapeStr(tensor.getShape())
             << "), more than the limit of " << kMaxTileElements
             << " (2^20) elements per tile; use smaller tiles";
    Attribute layout = tensor.getEncoding();
    if (!isLayout(layout))
      return success();
    unsigned layoutWarps = tile::getNumWarps(layout);
    if (failed(verifyTileFitsRegisters(op, type, layoutWarps, what)))
      return failure();
    if (declared && layoutWarps > declared.getInt())
      return op->emitOpError()
             << what << " has a layout for " << layoutWarps
             << " warps, more than the kernel's " << getNumWarpsAttrName()
             << " (" << declared.getInt() << ")";
    return success();
  };
  // fp8 values are stored, moved, converted and multiplied (tile.dot), not
  // computed on: no chip has fp8 arithmetic but the MMA.
  auto checkFp8 = [](Operation *op) -> LogicalResult {
    StringRef dialect = op->getDialect()->getNamespace();
    if ((dialect != "arith" && dialect != "math") ||
        isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp,
            arith::FPToSIOp, arith::FPToUIOp, arith::ConstantOp,
            arith::SelectOp, arith::BitcastOp>(op))
      return success();
    auto types =
        llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes());
    auto fp8 = llvm::find_if(
        types, [](Type type) { return isFp8Type(getElementTypeOrSelf(type)); });
    if (fp8 == types.end())
      return success();
    return op->emitOpError("computes on ")
           << getElementTypeOrSelf(*fp8)
           << " values, which support only loads, stores, moves, "
              "conversions (arith.extf, arith.truncf, to and from integers), "
              "arith.select and tile.dot; convert them to f16 or f32 first";
  };
  WalkResult result = walk([&](Operation *op) {
    if (failed(checkFp8(op)))
      return WalkResult::interrupt();
    for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
      if (failed(checkTile(op, type, "result #" + llvm::Twine(i))))
        return WalkResult::interrupt();
    if (auto dim = dyn_cast<memref::DimOp>(op);
        dim && failed(verifyDimIndex(dim)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult tileopt::tile::verifyDimIndices(Operation *root) {
  return failure(root->walk([](memref::DimOp dim) {
                       return failed(verifyDimIndex(dim))
                                  ? WalkResult::interrupt()
                                  : WalkResult::advance();
                     })
                     .wasInterrupted());
}

//===----------------------------------------------------------------------===//
// LoadOp / StoreOp
//===----------------------------------------------------------------------===//

/// Checks that a tile accessed at `offsets` of `view` fits the view.
static LogicalResult verifyAccess(Operation *op, StringRef tileName,
                                  RankedTensorType tile, MemRefType view,
                                  ValueRange offsets) {
  if (static_cast<int64_t>(offsets.size()) != view.getRank())
    return op->emitOpError("expected ")
           << view.getRank() << " offset(s) for the view of rank "
           << view.getRank() << " (" << view << "), got " << offsets.size();
  if (tile.getRank() != view.getRank())
    return op->emitOpError("expected ")
           << tileName << " of rank " << view.getRank() << " like the view ("
           << view << "), got " << tile;
  if (tile.getElementType() != view.getElementType())
    return op->emitOpError("expected ")
           << tileName << " element type " << tile.getElementType()
           << " to equal the view's element type " << view.getElementType();
  return success();
}

/// A load's or gather's padding: the attribute, or zero of the element type.
static TypedAttr paddingOrZero(std::optional<TypedAttr> padding,
                               RankedTensorType type) {
  if (padding)
    return *padding;
  return cast<TypedAttr>(
      OpBuilder(type.getContext()).getZeroAttr(type.getElementType()));
}

/// The padding attribute, if any, is an integer or float of the element type.
static LogicalResult verifyPadding(Operation *op,
                                   std::optional<TypedAttr> padding,
                                   RankedTensorType type) {
  if (!padding)
    return success();
  if (!isa<IntegerAttr, FloatAttr>(*padding))
    return op->emitOpError("expected padding to be an integer or float "
                           "constant, got ")
           << *padding;
  if (padding->getType() != type.getElementType())
    return op->emitOpError("expected padding of the element type ")
           << type.getElementType() << ", got " << *padding;
  return success();
}

TypedAttr LoadOp::getPaddingOrZero() {
  return paddingOrZero(getPadding(), getResult().getType());
}

LogicalResult LoadOp::verify() {
  RankedTensorType type = getResult().getType();
  if (failed(verifyAccess(*this, "result tile", type, getView().getType(),
                          getOffsets())))
    return failure();
  return verifyPadding(*this, getPadding(), type);
}

TypedAttr GatherOp::getPaddingOrZero() {
  return paddingOrZero(getPadding(), getResult().getType());
}

LogicalResult GatherOp::verify() {
  RankedTensorType type = getResult().getType();
  MemRefType view = getView().getType();
  if (view.getRank() == 0 || (int64_t)getIndices().size() != view.getRank())
    return emitOpError("expected one index tile per dimension of the view (")
           << view.getRank() << "), got " << getIndices().size();
  if (type.getElementType() != view.getElementType())
    return emitOpError("expected the result's element type to be the view's (")
           << view.getElementType() << "), got " << type.getElementType();
  for (auto [i, index] : llvm::enumerate(getIndices())) {
    auto indexType = cast<RankedTensorType>(index.getType());
    if (indexType.getShape() != type.getShape())
      return emitOpError("expected index tile #")
             << i << " of the result's shape " << shapeStr(type.getShape())
             << ", got " << shapeStr(indexType.getShape());
    if (!indexType.getElementType().isInteger(32) &&
        !indexType.getElementType().isInteger(64))
      return emitOpError("expected index tile #")
             << i << " of i32 or i64, got " << indexType.getElementType();
  }
  return verifyPadding(*this, getPadding(), type);
}

LogicalResult StoreOp::verify() {
  Type element = getValue().getType().getElementType();
  if (getAdd() && !element.isF32() && !element.isSignlessInteger(32))
    return emitOpError("adds only f32 and i32 tiles atomically, got ")
           << element;
  return verifyAccess(*this, "stored tile", getValue().getType(),
                      getView().getType(), getOffsets());
}

//===----------------------------------------------------------------------===//
// SplatOp / IotaOp
//===----------------------------------------------------------------------===//

OpFoldResult SplatOp::fold(FoldAdaptor adaptor) {
  if (!isa_and_present<IntegerAttr, FloatAttr>(adaptor.getValue()))
    return {};
  return SplatElementsAttr::get(getResult().getType(), adaptor.getValue());
}

LogicalResult IotaOp::verify() {
  RankedTensorType type = getResult().getType();
  if (type.getRank() != 1 || !type.getElementType().isInteger(32))
    return emitOpError("expected a 1-D tile of i32, got ") << type;
  return success();
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

static LogicalResult verifySameElementType(Operation *op,
                                           RankedTensorType source,
                                           RankedTensorType result) {
  if (source.getElementType() != result.getElementType())
    return op->emitOpError("expected result element type ")
           << result.getElementType() << " to equal the source's "
           << source.getElementType();
  return success();
}

LogicalResult BroadcastOp::verify() {
  RankedTensorType source = getSource().getType();
  RankedTensorType result = getResult().getType();
  if (failed(verifySameElementType(*this, source, result)))
    return failure();
  if (source.getRank() != result.getRank())
    return emitOpError("expected source rank ")
           << source.getRank() << " (" << shapeStr(source.getShape())
           << ") to equal result rank " << result.getRank() << " ("
           << shapeStr(result.getShape()) << ")";
  for (auto [dim, sizes] :
       llvm::enumerate(llvm::zip(source.getShape(), result.getShape()))) {
    auto [srcSize, resSize] = sizes;
    if (srcSize != 1 && srcSize != resSize)
      return emitOpError("cannot broadcast dim ")
             << dim << " of source " << shapeStr(source.getShape()) << " (size "
             << srcSize << ") to result " << shapeStr(result.getShape())
             << " (size " << resSize << "): only dims of size 1 expand";
  }
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getSource().getType() == getResult().getType())
    return getSource();
  return foldSplatConstant(adaptor.getSource(), getResult().getType());
}

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<BroadcastOfSplat, BroadcastOfBroadcast>(context);
}

//===----------------------------------------------------------------------===//
// ExpandDimsOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandDimsOp::verify() {
  RankedTensorType source = getSource().getType();
  RankedTensorType result = getResult().getType();
  if (failed(verifySameElementType(*this, source, result)))
    return failure();
  int64_t axis = getAxis();
  if (axis < 0 || axis > source.getRank())
    return emitOpError("expected axis in [0, ")
           << source.getRank() << "] for a source of rank " << source.getRank()
           << ", got " << axis;
  SmallVector<int64_t> expected(source.getShape());
  expected.insert(expected.begin() + axis, 1);
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << shapeStr(expected) << " (source " << shapeStr(source.getShape())
           << " with a 1 at axis " << axis << "), got "
           << shapeStr(result.getShape());
  return success();
}

OpFoldResult ExpandDimsOp::fold(FoldAdaptor adaptor) {
  return foldSplatConstant(adaptor.getSource(), getResult().getType());
}

void ExpandDimsOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<ExpandDimsOfSplat>(context);
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType source = getSource().getType();
  RankedTensorType result = getResult().getType();
  if (failed(verifySameElementType(*this, source, result)))
    return failure();
  if (source.getNumElements() != result.getNumElements())
    return emitOpError("expected the same number of elements, source ")
           << shapeStr(source.getShape()) << " has " << source.getNumElements()
           << " and result " << shapeStr(result.getShape()) << " has "
           << result.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getSource().getType() == getResult().getType())
    return getSource();
  return foldSplatConstant(adaptor.getSource(), getResult().getType());
}

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<ReshapeOfSplat, ReshapeOfReshape>(context);
}

//===----------------------------------------------------------------------===//
// PermuteOp
//===----------------------------------------------------------------------===//

LogicalResult PermuteOp::verify() {
  RankedTensorType source = getSource().getType();
  RankedTensorType result = getResult().getType();
  if (failed(verifySameElementType(*this, source, result)))
    return failure();
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != source.getRank())
    return emitOpError("expected a permutation of ")
           << source.getRank() << " dims for a source of rank "
           << source.getRank() << ", got " << perm.size();
  llvm::SmallBitVector seen(perm.size());
  for (int64_t dim : perm) {
    if (dim < 0 || dim >= source.getRank() || seen.test(dim))
      return emitOpError("expected permutation to be a permutation of [0, ")
             << source.getRank() << "), got [" << perm << "]";
    seen.set(dim);
  }
  SmallVector<int64_t> expected;
  for (int64_t dim : perm)
    expected.push_back(source.getDimSize(dim));
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << shapeStr(expected) << " (source " << shapeStr(source.getShape())
           << " permuted by [" << perm << "]), got "
           << shapeStr(result.getShape());
  return success();
}

OpFoldResult PermuteOp::fold(FoldAdaptor adaptor) {
  if (llvm::equal(getPermutation(),
                  llvm::seq<int64_t>(0, getPermutation().size())))
    return getSource();
  return foldSplatConstant(adaptor.getSource(), getResult().getType());
}

void PermuteOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<PermuteOfSplat, PermuteOfPermute>(context);
}

//===----------------------------------------------------------------------===//
// Narrowing casts before shape ops
//===----------------------------------------------------------------------===//

namespace {
/// trunc(shape_op(x)) -> shape_op(trunc(x)), for a shape op whose only user
/// is the truncation: the shape op then moves narrower elements (a layout
/// conversion that a permute or reshape needs moves half the bytes of an f32
/// accumulator), a broadcast's source is truncated instead of its result,
/// and integer truncations meet the extensions they undo. An index source
/// is cast (index_cast keeps the low bits, as trunci does).
template <typename CastOp, typename ShapeOp>
struct NarrowBeforeShapeOp : OpRewritePattern<CastOp> {
  using OpRewritePattern<CastOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp cast,
                                PatternRewriter &rewriter) const override {
    auto shape = cast.getIn().template getDefiningOp<ShapeOp>();
    if (!shape || !shape->hasOneUse())
      return failure();
    Value source = shape->getOperand(0);
    Type narrow = getElementTypeOrSelf(cast.getType());
    Type sourceType = narrow;
    if (auto shaped = dyn_cast<ShapedType>(source.getType()))
      sourceType = shaped.clone(narrow);
    Value narrowed;
    if (isa<IndexType>(getElementTypeOrSelf(source.getType())))
      narrowed = arith::IndexCastOp::create(rewriter, cast.getLoc(), sourceType,
                                            source);
    else
      narrowed = CastOp::create(rewriter, cast.getLoc(), sourceType, source,
                                cast->getAttrs());
    Operation *moved = rewriter.clone(*shape);
    moved->setOperand(0, narrowed);
    moved->getResult(0).setType(cast.getType());
    rewriter.replaceOp(cast, moved->getResults());
    return success();
  }
};

template <typename CastOp>
void addNarrowBeforeShapeOps(RewritePatternSet &results) {
  results.add<NarrowBeforeShapeOp<CastOp, SplatOp>,
              NarrowBeforeShapeOp<CastOp, BroadcastOp>,
              NarrowBeforeShapeOp<CastOp, ReshapeOp>,
              NarrowBeforeShapeOp<CastOp, ExpandDimsOp>,
              NarrowBeforeShapeOp<CastOp, PermuteOp>>(results.getContext());
}
} // namespace

void TileDialect::getCanonicalizationPatterns(
    RewritePatternSet &results) const {
  addNarrowBeforeShapeOps<arith::TruncIOp>(results);
  addNarrowBeforeShapeOps<arith::TruncFOp>(results);
}

//===----------------------------------------------------------------------===//
// ConvertLayoutOp
//===----------------------------------------------------------------------===//

LogicalResult ConvertLayoutOp::verify() {
  RankedTensorType source = getSource().getType();
  RankedTensorType result = getResult().getType();
  if (source.getShape() != result.getShape() ||
      source.getElementType() != result.getElementType())
    return emitOpError("expected source and result of one shape and element "
                       "type, got ")
           << source << " and " << result;
  return success();
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor adaptor) {
  if (getSource().getType() == getResult().getType())
    return getSource();
  return foldSplatConstant(adaptor.getSource(), getResult().getType());
}

namespace {
/// convert_layout(convert_layout(x)) -> convert_layout(x)
struct FoldConvertOfConvert : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getSource().getDefiningOp<ConvertLayoutOp>();
    if (!inner)
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.getSourceMutable().assign(inner.getSource()); });
    return success();
  }
};
} // namespace

void ConvertLayoutOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                  MLIRContext *context) {
  results.add<FoldConvertOfConvert>(context);
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

ParseResult ReduceOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Type> operandTypes, resultTypes;
  SMLoc operandsLoc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseTypeList(operandTypes) || parser.parseArrow() ||
      parser.parseTypeList(resultTypes))
    return failure();
  // The region before the operands: resolving an operand first would make a
  // forward reference that a name defined in the region replaces.
  Region *combiner = result.addRegion();
  if (parser.parseRegion(*combiner))
    return failure();
  ensureTerminator(*combiner, parser.getBuilder(), result.location);
  result.addTypes(resultTypes);
  return parser.resolveOperands(operands, operandTypes, operandsLoc,
                                result.operands);
}

void ReduceOp::print(OpAsmPrinter &p) {
  p << ' ' << getOperands();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getOperands().getTypes() << " -> " << getResultTypes() << ' ';
  p.printRegion(getCombiner());
}

LogicalResult ReduceOp::verify() {
  if (getOperands().empty())
    return emitOpError("expected at least one operand");
  RankedTensorType first = tileType(getOperands()[0]);
  for (auto [index, operand] : llvm::enumerate(getOperands())) {
    RankedTensorType type = tileType(operand);
    if (type.getShape() != first.getShape())
      return emitOpError("expected operands of one shape, operand #")
             << index << " is " << shapeStr(type.getShape())
             << " but operand #0 is " << shapeStr(first.getShape());
  }
  int64_t axis = getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOpError("expected axis in [0, ")
           << first.getRank() << ") for operands of shape "
           << shapeStr(first.getShape()) << ", got " << axis;
  if (getNumResults() != getOperands().size())
    return emitOpError("expected ")
           << getOperands().size() << " result(s), one per operand, got "
           << getNumResults();
  SmallVector<int64_t> reduced(first.getShape());
  reduced.erase(reduced.begin() + axis);
  for (auto [index, operand, result] :
       llvm::enumerate(getOperands(), getResults())) {
    Type elementType = tileType(operand).getElementType();
    Type resultType = result.getType();
    // Layouts (encodings) are checked by the passes that assign them.
    auto resultTile = dyn_cast<RankedTensorType>(resultType);
    bool ok = resultTile
                  ? resultTile.getShape() == ArrayRef<int64_t>(reduced) &&
                        resultTile.getElementType() == elementType
                  : reduced.empty() && resultType == elementType;
    if (!ok)
      return emitOpError("expected result #")
             << index << " to be "
             << (reduced.empty()
                     ? Type(elementType)
                     : Type(RankedTensorType::get(reduced, elementType)))
             << " (operand shape " << shapeStr(first.getShape())
             << " without axis " << axis << "), got " << resultType;
  }
  return success();
}

LogicalResult ReduceOp::verifyRegions() {
  Block &block = getCombiner().front();
  size_t numOperands = getOperands().size();
  if (block.getNumArguments() != 2 * numOperands)
    return emitOpError("expected the combiner to take ")
           << 2 * numOperands << " scalar arguments (2 per operand), got "
           << block.getNumArguments();
  for (auto [index, operand] : llvm::enumerate(getOperands())) {
    Type elementType = tileType(operand).getElementType();
    for (size_t argIndex : {index, index + numOperands}) {
      Type argType = block.getArgument(argIndex).getType();
      if (argType != elementType)
        return emitOpError("expected combiner argument #")
               << argIndex << " to have type " << elementType << ", got "
               << argType;
    }
  }
  auto yield =
      dyn_cast_if_present<YieldOp>(block.empty() ? nullptr : &block.back());
  if (!yield)
    return emitOpError("expected the combiner to end in tile.yield");
  if (yield.getValues().size() != numOperands)
    return yield.emitOpError("expected ")
           << numOperands << " yielded value(s), one per operand, got "
           << yield.getValues().size();
  for (auto [index, operand, value] :
       llvm::enumerate(getOperands(), yield.getValues())) {
    Type elementType = tileType(operand).getElementType();
    if (value.getType() != elementType)
      return yield.emitOpError("expected yielded value #")
             << index << " to have type " << elementType << ", got "
             << value.getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DotOp
//===----------------------------------------------------------------------===//

LogicalResult DotOp::verify() {
  RankedTensorType lhs = getLhs().getType();
  RankedTensorType rhs = getRhs().getType();
  RankedTensorType acc = getAcc().getType();
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"lhs", lhs},
                            {"rhs", rhs},
                            {"acc", acc}})
    if (type.getRank() != 2)
      return emitOpError("expected ")
             << name << " to be a 2-D tile, got " << type;
  if (lhs.getDimSize(1) != rhs.getDimSize(0))
    return emitOpError("expected K of lhs (")
           << lhs.getDimSize(1) << ") to equal K of rhs (" << rhs.getDimSize(0)
           << ")";
  if (acc.getDimSize(0) != lhs.getDimSize(0) ||
      acc.getDimSize(1) != rhs.getDimSize(1))
    return emitOpError("expected acc of shape ")
           << lhs.getDimSize(0) << "x" << rhs.getDimSize(1)
           << " (M of lhs x N of rhs), got " << shapeStr(acc.getShape());
  Type inType = lhs.getElementType();
  // fp8 MMAs take either format on either side (e4m3 x e5m2).
  bool fp8 = isFp8Type(inType) && isFp8Type(rhs.getElementType());
  if (inType != rhs.getElementType() && !fp8)
    return emitOpError("expected lhs and rhs of one element type, got ")
           << inType << " and " << rhs.getElementType();
  Type accType = acc.getElementType();
  if (fp8) {
    if (!accType.isF32())
      return emitOpError("expected an f32 accumulator with fp8 inputs, got ")
             << accType;
  } else if (inType.isSignlessInteger(8)) {
    if (!accType.isSignlessInteger(32))
      return emitOpError("expected an i32 accumulator with i8 inputs, got ")
             << accType;
  } else if (!inType.isF16() && !inType.isBF16() && !inType.isF32()) {
    return emitOpError("expected f16, bf16, f32, i8, f8E4M3FN or f8E5M2 "
                       "inputs, got ")
           << inType;
  } else if (!accType.isF32() && !(accType.isF16() && inType.isF16())) {
    return emitOpError("expected an f32 accumulator (or f16 with f16 "
                       "inputs), got ")
           << accType << " with " << inType << " inputs";
  }
  if (getInputPrecision() == InputPrecision::tf32 && !inType.isF32())
    return emitOpError("input_precision = tf32 applies to f32 inputs, got ")
           << inType;
  return success();
}

//===----------------------------------------------------------------------===//
// LaunchOp
//===----------------------------------------------------------------------===//

LogicalResult LaunchOp::verify() {
  if (getGrid().empty() || getGrid().size() > 3)
    return emitOpError("expected 1 to 3 grid sizes, got ") << getGrid().size();
  if ((*this)->getParentOfType<KernelOp>())
    return emitOpError("launches a kernel from inside a tile.kernel; "
                       "launches belong in host functions");
  return success();
}

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto kernel =
      symbolTable.lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel)
    return emitOpError("'")
           << getKernelAttr() << "' does not reference a tile.kernel";
  ArrayRef<Type> params = kernel.getArgumentTypes();
  if (params.size() != getArgs().size())
    return emitOpError("kernel @")
           << getKernel() << " takes " << params.size()
           << " argument(s), launch passes " << getArgs().size();
  for (auto [index, param, arg] : llvm::enumerate(params, getArgs())) {
    Type argType = arg.getType();
    if (argType == param)
      continue;
    if (isa<MemRefType>(argType) && isa<MemRefType>(param) &&
        memref::CastOp::areCastCompatible(argType, param))
      continue;
    return emitOpError("argument #")
           << index << " has type " << argType << " but kernel @" << getKernel()
           << " expects " << param;
  }
  return success();
}

#define GET_OP_CLASSES
#include "tileopt/Dialect/Tile/IR/TileOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Integer ranges
//===----------------------------------------------------------------------===//

/// The most programs a launch has along grid dimension `dim` (CUDA's limits,
/// which launchers check).
static int64_t maxPrograms(int64_t dim) {
  return dim == 0 ? std::numeric_limits<int32_t>::max() : 65535;
}

static ConstantIntRanges indexRange(int64_t lo, int64_t hi) {
  unsigned width = IndexType::kInternalStorageBitWidth;
  return ConstantIntRanges::fromSigned(APInt(width, lo), APInt(width, hi));
}

void ProgramIdOp::inferResultRanges(ArrayRef<ConstantIntRanges>,
                                    SetIntRangeFn setResultRange) {
  setResultRange(getResult(), indexRange(0, maxPrograms(getDim()) - 1));
}

void NumProgramsOp::inferResultRanges(ArrayRef<ConstantIntRanges>,
                                      SetIntRangeFn setResultRange) {
  setResultRange(getResult(), indexRange(1, maxPrograms(getDim())));
}

void IotaOp::inferResultRanges(ArrayRef<ConstantIntRanges>,
                               SetIntRangeFn setResultRange) {
  RankedTensorType type = tileType(getResult());
  unsigned width = type.getElementTypeBitWidth();
  setResultRange(getResult(),
                 ConstantIntRanges::fromSigned(
                     APInt(width, 0), APInt(width, type.getNumElements() - 1)));
}
