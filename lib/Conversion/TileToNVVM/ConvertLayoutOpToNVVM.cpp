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

namespace {

/// The widest run (elements of `element`, at most 16 bytes) along the last
/// dimension that one shared-memory vector may move when a tile is staged at
/// row-major positions in `shape` (rows padded by `pad`) `byteOffset` bytes
/// in: 1 unless rows stay 16-byte aligned.
unsigned rowVectorElems(Type element, ArrayRef<int64_t> shape, int64_t pad,
                        int64_t byteOffset = 0) {
  int64_t rank = shape.size();
  int64_t bytes = storageBits(element) / 8;
  if (rank == 0 || byteOffset % 16 != 0 ||
      (shape.back() + (rank > 1 ? pad : 0)) * bytes % 16 != 0)
    return 1;
  return std::min<int64_t>(16 / bytes, shape.back());
}

} // namespace

void storeRunsToShared(OpBuilder &b, Location loc, KernelState &ks,
                       RankedTensorType type, Value vector, unsigned maxElems,
                       function_ref<Value(ArrayRef<Value>)> pointerOf,
                       function_ref<bool(ArrayRef<int64_t>)> keep,
                       int64_t dim) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  SmallVector<Value> values = unpack(b, loc, vector);
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  WriteOnce once(coords.offsets, type.getShape());
  // Row-major shared memory: vectors run along the last dimension.
  if (dim < 0)
    dim = std::max<int64_t>(type.getRank() - 1, 0);
  for (Run run :
       contiguousRuns(coords.offsets, type.getShape(), dim, maxElems)) {
    if ((keep && !keep(coords.offsets[run.first])) || !once.claim(run))
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
  unsigned maxElems =
      logicalShape == type.getShape()
          ? rowVectorElems(type.getElementType(), logicalShape, pad, byteOffset)
          : 1;
  storeRunsToShared(
      b, loc, ks, type, vector, maxElems, [&](ArrayRef<Value> coord) {
        Value index = linearIndex(b, loc, coord, logicalShape, pad);
        return sharedPtr(b, loc, ks, stored, index, byteOffset);
      });
}

namespace {

/// Loads the registers of `type` that `keep` accepts (all without it) from
/// shared memory, `pointerOf` their coordinates, runs of up to `maxElems`
/// along the last dimension as one vector each; the others stay null.
SmallVector<Value>
loadRunsFromShared(OpBuilder &b, Location loc, KernelState &ks,
                   RankedTensorType type, unsigned maxElems,
                   function_ref<Value(ArrayRef<Value>)> pointerOf,
                   function_ref<bool(ArrayRef<int64_t>)> keep = {}) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  Type element = type.getElementType(), stored = storageType(b, element);
  int64_t bytes = storageBits(element) / 8;
  SmallVector<Value> values(coords.offsets.size());
  int64_t dim = std::max<int64_t>(type.getRank() - 1, 0);
  for (Run run :
       contiguousRuns(coords.offsets, type.getShape(), dim, maxElems)) {
    if (keep && !keep(coords.offsets[run.first]))
      continue;
    Value ptr = pointerOf(coords.coords[run.first]);
    if (run.count == 1) {
      values[run.first] = fromStorage(
          b, loc, LLVM::LoadOp::create(b, loc, stored, ptr), element);
      continue;
    }
    Value vec = LLVM::LoadOp::create(
        b, loc, VectorType::get({int64_t(run.count)}, stored), ptr,
        /*alignment=*/run.count * bytes);
    for (unsigned e = 0; e < run.count; ++e)
      values[run.first + e] = fromStorage(
          b, loc, vector::ExtractOp::create(b, loc, vec, e), element);
  }
  return values;
}

/// The longest run of a tile's registers along its last dimension that one
/// vector of at most 16 bytes can move.
unsigned longestRowRun(RankedTensorType t) {
  unsigned longest = 1;
  for (Run run : contiguousRuns(
           getRegisterOffsets(t.getEncoding(), t.getShape()), t.getShape(),
           t.getRank() - 1, 128 / storageBits(t.getElementType())))
    longest = std::max(longest, run.count);
  return longest;
}

} // namespace

int64_t restagePad(RankedTensorType from, RankedTensorType to) {
  int64_t pad = smemPad(from.getElementType());
  if (from.getRank() != 2 || to.getRank() != 2)
    return pad;
  // Both sides move row vectors: rows padded by a whole vector keep both
  // aligned. Where a side goes down the columns one element at a time, the
  // one-word pad spreads its accesses over the banks instead.
  int64_t in = longestRowRun(from), out = longestRowRun(to);
  int64_t vec = std::max(in, out);
  if (std::min(in, out) > 1 && from.getDimSize(1) % vec == 0)
    return vec;
  return pad;
}

RestageSlicing restageSlicing(RankedTensorType from, RankedTensorType to,
                              int64_t pad) {
  RestageSlicing best;
  if (from.getRank() != 2 || from.getShape() != to.getShape())
    return best;
  int64_t bytes = paddedElements(from.getShape(), pad) *
                  storageBits(from.getElementType()) / 8;
  for (int64_t dim = 0; dim < 2; ++dim) {
    int64_t extent = from.getDimSize(dim);
    // Slices `c` wide hold whole registers of `t` when no thread's index of
    // a register crosses into the next slice. (Then 2c do too.)
    auto whole = [&](RankedTensorType t, int64_t c) {
      int64_t base = maxThreadBase(t.getEncoding())[dim];
      return llvm::all_of(getRegisterOffsets(t.getEncoding(), t.getShape()),
                          [&](ArrayRef<int64_t> o) {
                            return o[dim] < extent && o[dim] % c + base < c;
                          });
    };
    int64_t slices = 1;
    for (int64_t c = extent / 2;
         c >= 1 && bytes / slices > kRestageSliceBytes && whole(from, c) &&
         whole(to, c);
         c /= 2)
      slices = extent / c;
    // The fewest slices within the aim, else the smallest slices.
    bool fits = bytes / slices <= kRestageSliceBytes;
    bool bestFits = bytes / best.slices <= kRestageSliceBytes;
    if (best.slices == 1 || (fits && (!bestFits || slices < best.slices)) ||
        (!fits && !bestFits && slices > best.slices))
      best = {dim, slices};
  }
  return best;
}

int64_t restageBytes(RankedTensorType from, RankedTensorType to, int64_t pad) {
  return paddedElements(from.getShape(), pad) *
         storageBits(from.getElementType()) / 8 /
         restageSlicing(from, to, pad).slices;
}

SmallVector<Value> restageThroughShared(OpBuilder &b, Location loc,
                                        KernelState &ks, RankedTensorType from,
                                        Value vector, RankedTensorType to,
                                        int64_t pad) {
  auto [dim, slices] = restageSlicing(from, to, pad);
  Type stored = storageType(b, from.getElementType());
  if (slices == 1) {
    leadingBarrier(b, loc, ks);
    storeTileToShared(b, loc, ks, from, vector, from.getShape(), pad);
    barrier(b, loc);
    return loadRunsFromShared(
        b, loc, ks, to, rowVectorElems(to.getElementType(), to.getShape(), pad),
        [&](ArrayRef<Value> coord) {
          return sharedPtr(b, loc, ks, stored,
                           linearIndex(b, loc, coord, to.getShape(), pad));
        });
  }
  // Slice by slice: each thread moves its registers in the slice, at their
  // place in a tile of the slice's shape. Vectors are aligned to their size
  // (contiguousRuns), so none crosses into the next slice.
  SmallVector<int64_t> shape(from.getShape());
  shape[dim] /= slices;
  unsigned maxElems = rowVectorElems(from.getElementType(), shape, pad);
  SmallVector<Value> values(getElemsPerThread(to.getEncoding(), to.getShape()));
  for (int64_t s = 0; s < slices; ++s) {
    int64_t first = s * shape[dim];
    auto inSlice = [&](ArrayRef<int64_t> o) {
      return o[dim] >= first && o[dim] < first + shape[dim];
    };
    auto at = [&](ArrayRef<Value> coord) {
      SmallVector<Value> local(coord);
      local[dim] = arith::SubIOp::create(b, loc, coord[dim],
                                         i32Const(b, loc, first), kNoWrap);
      return linearIndex(b, loc, local, shape, pad);
    };
    if (s)
      barrier(b, loc);
    else
      leadingBarrier(b, loc, ks);
    auto pointerOf = [&](ArrayRef<Value> coord) {
      return sharedPtr(b, loc, ks, stored, at(coord));
    };
    storeRunsToShared(b, loc, ks, from, vector, maxElems, pointerOf, inSlice);
    barrier(b, loc);
    SmallVector<Value> loaded =
        loadRunsFromShared(b, loc, ks, to, maxElems, pointerOf, inSlice);
    for (auto [r, value] : llvm::enumerate(loaded))
      if (value)
        values[r] = value;
  }
  return values;
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
    useScratch(rewriter, loc, ks, this->state, op);
    auto srcType = cast<RankedTensorType>(op.getSource().getType());
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    // One element (a reduction's result): every thread holds it already.
    if (isSingleElement(srcType)) {
      VectorType type = this->vectorType(resType);
      Value element = unpack(rewriter, loc, adaptor.getSource()).front();
      rewriter.replaceOp(
          op, pack(rewriter, loc, type,
                   SmallVector<Value>(type.getNumElements(), element)));
      return success();
    }
    // A reshape keeps the row-major order: stage it unpadded and flat.
    bool reshape = std::is_same_v<Op, ReshapeOp>;
    int64_t pad = reshape ? 0 : restagePad(srcType, resType);
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
