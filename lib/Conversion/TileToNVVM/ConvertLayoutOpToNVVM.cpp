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

/// rowVectorElems for a tile staged as `staging`: a vector stays within a
/// swizzled group (runs are aligned to their size).
unsigned rowVectorElems(Type element, ArrayRef<int64_t> shape,
                        const StagingLayout &staging) {
  unsigned elems = rowVectorElems(element, shape, staging.pad);
  return staging.swizzled() ? std::min<int64_t>(elems, staging.vec) : elems;
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

/// The bank wavefronts of one warp's shared-memory access of `width` bytes
/// per lane at byte `addresses` (the lanes that take part): 16-byte accesses
/// go a quarter warp at a time, 8-byte ones a half, and within each, a bank
/// serves one 32-bit word per wavefront (lanes reading the same word share
/// it).
int64_t bankWavefronts(ArrayRef<int64_t> addresses, int64_t width) {
  constexpr int64_t kBanks = 32;
  size_t phaseLanes = width >= 16 ? 8 : width == 8 ? 16 : kWarpSize;
  int64_t total = 0;
  for (size_t first = 0; first < addresses.size(); first += phaseLanes) {
    SmallVector<SmallVector<int64_t, 4>> words(kBanks);
    int64_t most = 0;
    for (int64_t address :
         addresses.slice(first, std::min(phaseLanes, addresses.size() - first)))
      for (int64_t word = address / 4; word <= (address + width - 1) / 4;
           ++word) {
        SmallVector<int64_t, 4> &bank = words[word % kBanks];
        if (!llvm::is_contained(bank, word))
          bank.push_back(word);
        most = std::max<int64_t>(most, bank.size());
      }
    total += most;
  }
  return total;
}

/// What restaging 2-D `from` into `to` through `staging` costs each warp,
/// summed over the warps: bank wavefronts and shared-memory instructions (an
/// XOR more for each swizzled one). The first slice of restageSlicing stands
/// for each. And the bytes it stages at once (restageBytes).
struct RestageCost {
  int64_t wavefronts = 0, instructions = 0, bytes = 0;
};

RestageCost restageCost(RankedTensorType from, RankedTensorType to,
                        const StagingLayout &staging) {
  auto [dim, slices] = restageSlicing(from, to, staging);
  SmallVector<int64_t> shape(from.getShape());
  shape[dim] /= slices;
  unsigned maxElems = rowVectorElems(from.getElementType(), shape, staging);
  int64_t bytes = storageBits(from.getElementType()) / 8;
  RestageCost cost;
  cost.bytes = staging.elements(shape) * bytes;
  auto side = [&](RankedTensorType t, bool store) {
    SmallVector<SmallVector<int64_t>> offsets =
        getRegisterOffsets(t.getEncoding(), t.getShape());
    int64_t threads = getNumWarps(t.getEncoding()) * kWarpSize;
    SmallVector<SmallVector<int64_t>> bases;
    for (int64_t tid = 0; tid < threads; ++tid)
      bases.push_back(threadBase(t.getEncoding(), tid));
    WriteOnce once(offsets, t.getShape());
    SmallVector<int64_t> coord(2), addresses(kWarpSize);
    for (Run run : contiguousRuns(offsets, t.getShape(), 1, maxElems)) {
      ArrayRef<int64_t> offset = offsets[run.first];
      if ((slices > 1 && offset[dim] >= shape[dim]) ||
          (store && !once.claim(run)))
        continue;
      for (int64_t warp = 0; warp < threads; warp += kWarpSize) {
        for (int64_t lane = 0; lane < kWarpSize; ++lane) {
          for (int64_t d = 0; d < 2; ++d)
            coord[d] = (bases[warp + lane][d] + offset[d]) % t.getDimSize(d);
          addresses[lane] = staging.index(coord, shape) * bytes;
        }
        cost.wavefronts += bankWavefronts(addresses, run.count * bytes);
        cost.instructions += staging.swizzled() ? 2 : 1;
      }
    }
  };
  side(from, /*store=*/true);
  side(to, /*store=*/false);
  cost.wavefronts *= slices;
  cost.instructions *= slices;
  return cost;
}

} // namespace

StagingLayout restageLayout(RankedTensorType from, RankedTensorType to,
                            int64_t maxBytes) {
  StagingLayout pad = StagingLayout::padded(smemPad(from.getElementType()));
  if (from.getRank() != 2 || to.getRank() != 2)
    return pad;
  SmallVector<StagingLayout> candidates = {pad, StagingLayout::padded(0)};
  int64_t rows = from.getDimSize(0), cols = from.getDimSize(1);
  SmallVector<int64_t, 2> vecs = {longestRowRun(from)};
  if (int64_t out = longestRowRun(to); out != vecs.front())
    vecs.push_back(out);
  for (int64_t vec : vecs) {
    candidates.push_back(StagingLayout::padded(vec));
    for (int64_t perPhase = 1; perPhase <= std::min<int64_t>(rows, 16);
         perPhase *= 2)
      for (int64_t maxPhase = 2; vec * maxPhase <= cols && maxPhase <= 32;
           maxPhase *= 2)
        if (cols % (vec * maxPhase) == 0)
          candidates.push_back({0, vec, perPhase, maxPhase});
  }
  // Lexicographic: wavefronts, then bytes and instructions in the order the
  // budget asks for. Over the budget counts as more wavefronts than any.
  auto key = [&](const StagingLayout &s) {
    RestageCost cost = restageCost(from, to, s);
    bool over = maxBytes && cost.bytes > maxBytes;
    return maxBytes ? std::make_tuple(over, cost.wavefronts, cost.instructions,
                                      cost.bytes)
                    : std::make_tuple(false, cost.wavefronts, cost.bytes,
                                      cost.instructions);
  };
  StagingLayout best = pad;
  auto bestKey = key(best);
  for (const StagingLayout &candidate : candidates)
    if (auto k = key(candidate); k < bestKey)
      best = candidate, bestKey = k;
  return best;
}

StagingLayout stagingLayout(ConvertLayoutOp op, const LoweringState &state) {
  return state.stagingLayouts.lookup(op);
}

void planStagingLayouts(KernelOp kernel, const SharedMemoryPlan &plan,
                        LoweringState &state) {
  kernel.walk([&](ConvertLayoutOp op) {
    if (isSingleElement(op.getSource().getType()))
      return;
    int64_t offset = plan.placements.lookup(op).offset;
    state.stagingLayouts[op] =
        restageLayout(op.getSource().getType(), op.getResult().getType(),
                      std::max<int64_t>(plan.bytes - offset, 1));
  });
}

namespace {

/// The bytes of one of `slices` slices along `dim` of a `type` tile staged
/// as `staging`.
int64_t sliceBytes(RankedTensorType type, const StagingLayout &staging,
                   int64_t dim, int64_t slices) {
  SmallVector<int64_t> shape(type.getShape());
  if (!shape.empty())
    shape[dim] /= slices;
  return staging.elements(shape) * storageBits(type.getElementType()) / 8;
}

} // namespace

RestageSlicing restageSlicing(RankedTensorType from, RankedTensorType to,
                              const StagingLayout &staging) {
  RestageSlicing best;
  if (from.getRank() != 2 || from.getShape() != to.getShape())
    return best;
  auto fits = [&](RestageSlicing s) {
    return sliceBytes(from, staging, s.dim, s.slices) <= kRestageSliceBytes;
  };
  for (int64_t dim = 0; dim < 2; ++dim) {
    int64_t extent = from.getDimSize(dim);
    // Slices `c` wide hold whole registers of `t` when no thread's index of
    // a register crosses into the next slice. (Then 2c do too.) A swizzle
    // needs whole groups of phases in a row.
    auto whole = [&](RankedTensorType t, int64_t c) {
      int64_t base = maxThreadBase(t.getEncoding())[dim];
      return llvm::all_of(getRegisterOffsets(t.getEncoding(), t.getShape()),
                          [&](ArrayRef<int64_t> o) {
                            return o[dim] < extent && o[dim] % c + base < c;
                          });
    };
    auto swizzles = [&](int64_t c) {
      return dim == 0 ||
             c % (std::max<int64_t>(staging.vec, 1) * staging.maxPhase) == 0;
    };
    RestageSlicing slicing{dim, 1};
    for (int64_t c = extent / 2; c >= 1 && !fits(slicing) && whole(from, c) &&
                                 whole(to, c) && swizzles(c);
         c /= 2)
      slicing.slices = extent / c;
    // The fewest slices within the aim, else the smallest slices.
    if (best.slices == 1 ||
        (fits(slicing) && (!fits(best) || slicing.slices < best.slices)) ||
        (!fits(slicing) && !fits(best) && slicing.slices > best.slices))
      best = slicing;
  }
  return best;
}

int64_t restageBytes(RankedTensorType from, RankedTensorType to,
                     const StagingLayout &staging) {
  RestageSlicing slicing = restageSlicing(from, to, staging);
  return sliceBytes(from, staging, slicing.dim, slicing.slices);
}

SmallVector<Value> restageThroughShared(OpBuilder &b, Location loc,
                                        KernelState &ks, RankedTensorType from,
                                        Value vector, RankedTensorType to,
                                        const StagingLayout &staging) {
  // Slice by slice: each thread moves its registers in the slice, at their
  // place in a tile of the slice's shape. Vectors are aligned to their size
  // (contiguousRuns), so none crosses into the next slice.
  auto [dim, slices] = restageSlicing(from, to, staging);
  Type stored = storageType(b, from.getElementType());
  // A reshape stores in one shape and loads in the other.
  SmallVector<int64_t> fromShape(from.getShape()), toShape(to.getShape());
  if (slices > 1) {
    fromShape[dim] /= slices;
    toShape = fromShape;
  }
  unsigned storeElems =
      rowVectorElems(from.getElementType(), fromShape, staging);
  unsigned loadElems = rowVectorElems(to.getElementType(), toShape, staging);
  SmallVector<Value> values(getElemsPerThread(to.getEncoding(), to.getShape()));
  for (int64_t s = 0; s < slices; ++s) {
    int64_t first = slices > 1 ? s * fromShape[dim] : 0;
    auto inSlice = [&](ArrayRef<int64_t> o) {
      return slices == 1 ||
             (o[dim] >= first && o[dim] < first + fromShape[dim]);
    };
    auto pointerOf = [&](ArrayRef<int64_t> shape) {
      return [&, shape](ArrayRef<Value> coord) {
        SmallVector<Value> local(coord);
        if (first)
          local[dim] = arith::SubIOp::create(b, loc, coord[dim],
                                             i32Const(b, loc, first), kNoWrap);
        return sharedPtr(b, loc, ks, stored,
                         staging.emitIndex(b, loc, local, shape));
      };
    };
    if (s)
      barrier(b, loc);
    else
      leadingBarrier(b, loc, ks);
    storeRunsToShared(b, loc, ks, from, vector, storeElems,
                      pointerOf(fromShape), inSlice);
    barrier(b, loc);
    SmallVector<Value> loaded = loadRunsFromShared(b, loc, ks, to, loadElems,
                                                   pointerOf(toShape), inSlice);
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
    auto srcType = cast<RankedTensorType>(op.getSource().getType());
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    // A load copied into a dot's staging area: the dot reads it there.
    if (this->state.asyncCopies.contains(op.getSource().getDefiningOp())) {
      rewriter.replaceOpWithNewOp<LLVM::PoisonOp>(op,
                                                  this->vectorType(resType));
      return success();
    }
    KernelState &ks = this->state.get(op);
    useScratch(rewriter, loc, ks, this->state, op);
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
    StagingLayout staging = StagingLayout::padded(0);
    if constexpr (std::is_same_v<Op, ConvertLayoutOp>)
      staging = stagingLayout(op, this->state);
    SmallVector<Value> values = restageThroughShared(
        rewriter, loc, ks, srcType, adaptor.getSource(), resType, staging);
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
