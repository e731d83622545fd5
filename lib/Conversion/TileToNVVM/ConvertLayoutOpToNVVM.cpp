//===- ConvertLayoutOpToNVVM.cpp - layout changes via shared memory -------===//
//
// tile.convert_layout and tile.reshape move a tile between layouts through
// shared memory: every thread stores its registers at their row-major
// positions, then loads the ones the new layout gives it. The same staging
// serves the dots' operands and the loads' and stores' scalar fallback.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

void storeRunsToShared(OpBuilder &b, Location loc, KernelState &ks,
                       RankedTensorType type, Value vector, unsigned maxElems,
                       function_ref<Value(ArrayRef<Value>)> pointerOf) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  SmallVector<Value> values = unpack(b, loc, vector);
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  WriteOnce once(coords.offsets, type.getShape());
  int64_t dim = contiguity(type.getEncoding()).first;
  for (Run run :
       contiguousRuns(coords.offsets, type.getShape(), dim, maxElems)) {
    if (!once.claim(run))
      continue;
    Value ptr = pointerOf(coords.coords[run.first]);
    if (run.count == 1) {
      LLVM::StoreOp::create(b, loc, toStorage(b, loc, values[run.first]), ptr);
      continue;
    }
    SmallVector<Value> parts;
    for (unsigned e = 0; e < run.count; ++e)
      parts.push_back(toStorage(b, loc, values[run.first + e]));
    Value vec = vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(run.count)}, stored), parts);
    LLVM::StoreOp::create(b, loc, vec, ptr, /*alignment=*/run.count * bytes);
  }
}

void storeTileToShared(OpBuilder &b, Location loc, KernelState &ks,
                       RankedTensorType type, Value vector,
                       ArrayRef<int64_t> logicalShape, int64_t pad,
                       int64_t byteOffset) {
  // Registers contiguous along the row go out as one vector store when rows
  // (with their padding) keep 16-byte alignment; else one store each.
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  int64_t rank = logicalShape.size();
  auto [dim, contiguous] = contiguity(type.getEncoding());
  unsigned maxElems = 1;
  if (rank > 0 && dim == rank - 1 &&
      (logicalShape.back() + (rank > 1 ? pad : 0)) * bytes % 16 == 0 &&
      byteOffset % 16 == 0 && logicalShape == type.getShape())
    maxElems = std::min<unsigned>(contiguous, 16 / bytes);
  storeRunsToShared(
      b, loc, ks, type, vector, maxElems, [&](ArrayRef<Value> coord) {
        Value index = linearIndex(b, loc, coord, logicalShape, pad);
        return sharedPtr(b, loc, ks, stored, index, byteOffset);
      });
}

namespace {

SmallVector<Value> loadTileFromShared(OpBuilder &b, Location loc,
                                      KernelState &ks, RankedTensorType type,
                                      ArrayRef<int64_t> logicalShape,
                                      int64_t pad, int64_t byteOffset = 0) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  Type element = type.getElementType();
  SmallVector<Value> values;
  for (const SmallVector<Value> &coord : coords.coords) {
    Value index = linearIndex(b, loc, coord, logicalShape, pad);
    Value ptr =
        sharedPtr(b, loc, ks, storageType(b, element), index, byteOffset);
    Value v = LLVM::LoadOp::create(b, loc, storageType(b, element), ptr);
    values.push_back(fromStorage(b, loc, v, element));
  }
  return values;
}

} // namespace

SmallVector<Value> restageThroughShared(OpBuilder &b, Location loc,
                                        KernelState &ks, RankedTensorType from,
                                        Value vector, RankedTensorType to,
                                        int64_t pad) {
  barrier(b, loc);
  storeTileToShared(b, loc, ks, from, vector, from.getShape(), pad);
  barrier(b, loc);
  return loadTileFromShared(b, loc, ks, to, to.getShape(), pad);
}

namespace {

/// convert_layout and reshape: through shared memory.
template <typename Op> struct StageThroughShared : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = this->state.get(op);
    auto srcType = cast<RankedTensorType>(op.getSource().getType());
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    // A reshape keeps the row-major order: stage it unpadded and flat.
    bool reshape = std::is_same_v<Op, ReshapeOp>;
    int64_t pad = reshape ? 0 : smemPad(srcType.getElementType());
    SmallVector<Value> values = restageThroughShared(
        rewriter, loc, ks, srcType, adaptor.getSource(), resType, pad);
    rewriter.replaceOp(op,
                       pack(rewriter, loc, this->vectorType(resType), values));
    return success();
  }
};

} // namespace

void populateConvertLayoutOpToNVVMPatterns(TileTypeConverter &converter,
                                           RewritePatternSet &patterns,
                                           LoweringState &state) {
  patterns
      .add<StageThroughShared<ConvertLayoutOp>, StageThroughShared<ReshapeOp>>(
          converter, patterns.getContext(), state);
}

} // namespace tileopt::nvvm
