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

#include <numeric>

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

void storeRunsToShared(
    OpBuilder &b, Location loc, KernelState &ks, RankedTensorType type,
    Value vector, unsigned maxElems,
    function_ref<Value(ArrayRef<Value>, ArrayRef<int64_t>)> pointerOf,
    function_ref<bool(ArrayRef<int64_t>)> keep, int64_t dim, unsigned stride) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  SmallVector<Value> values = unpack(b, loc, vector);
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  WriteOnce once(coords.offsets, type.getShape());
  // Row-major shared memory: vectors run along the last dimension.
  if (dim < 0)
    dim = std::max<int64_t>(type.getRank() - 1, 0);
  for (Run run :
       contiguousRuns(coords.offsets, type.getShape(), dim, maxElems, stride)) {
    if ((keep && !keep(coords.offsets[run.first])) || !once.claim(run))
      continue;
    Value ptr = pointerOf(coords.coords[run.first], coords.offsets[run.first]);
    if (run.count == 1) {
      LLVM::StoreOp::create(b, loc, toStorage(b, loc, values[run.first]), ptr);
      continue;
    }
    SmallVector<Value> parts;
    for (unsigned e = 0; e < run.count; ++e)
      parts.push_back(toStorage(b, loc, values[run.reg(e)]));
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
  storeRunsToShared(b, loc, ks, type, vector, maxElems,
                    [&](ArrayRef<Value> coord, ArrayRef<int64_t>) {
                      Value index =
                          linearIndex(b, loc, coord, logicalShape, pad);
                      return sharedPtr(b, loc, ks, stored, index, byteOffset);
                    });
}

namespace {

/// Loads the registers of `type` that `keep` accepts (all without it) from
/// shared memory, `pointerOf` their coordinates and static offsets, runs of
/// up to `maxElems` along the last dimension as one vector each; the others
/// stay null.
SmallVector<Value> loadRunsFromShared(
    OpBuilder &b, Location loc, KernelState &ks, RankedTensorType type,
    unsigned maxElems,
    function_ref<Value(ArrayRef<Value>, ArrayRef<int64_t>)> pointerOf,
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
    Value ptr = pointerOf(coords.coords[run.first], coords.offsets[run.first]);
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

/// Restaging through ldmatrix (StagingLayout::fragments), for tiles of
/// 16-bit elements where both layouts give every element to one thread and
/// hold it in 32-bit words: two neighbours along the last dimension in
/// consecutive registers. Call q of a warp's `ldmatrix` (x4; x2 or x1 for
/// fewer words) hands lane l its words n*q + m (m < n) from row l / 4, word
/// l % 4 of matrix m; so the staging area holds, per slice, a region per warp
/// and call (region w * calls + q) of n matrices of 8 rows of 16 bytes.
/// ldmatrix reads a matrix's 8 rows at once, which take a wavefront whatever
/// their order, so the rows of each matrix are XOR-swizzled by a phase (3
/// bits) chosen against the old layout's bank conflicts: XOR-linear in the
/// bits of m and of the region, column by column (`rowSwizzle` packs them,
/// 3 bits each, m's two first). The old layout stores each word at its place.
/// Both sides' addresses are a base that XORs constants per thread-id bit and
/// a constant per word or call, checked for every thread.
struct FragmentPlan {
  /// One store of the words whose first registers are `registers`, at byte
  /// `offset` from the thread's base, in slice `slice`.
  struct Store {
    SmallVector<unsigned, 4> registers;
    int64_t offset, slice;
  };
  unsigned matrices = 4; // per ldmatrix
  int64_t calls = 0;     // ldmatrix per thread and slice
  int64_t slices = 1, bytes = 0;
  SmallVector<int64_t> storeBits, loadBits; // per thread-id bit
  SmallVector<Store> stores;
  SmallVector<int64_t> loadOffsets; // per call of a slice
  int64_t wavefronts = 0, instructions = 0;
};

/// A thread's registers as 32-bit words: (r, r + 1) for even r, neighbours
/// along the last dimension (of even size); the number of threads where
/// every element has one owner.
std::optional<int64_t> wordThreads(RankedTensorType t,
                                   ArrayRef<SmallVector<int64_t>> offsets) {
  Attribute layout = t.getEncoding();
  if (!isLayout(layout) || t.getRank() == 0 || t.getShape().back() % 2 ||
      storageBits(t.getElementType()) != 16 || offsets.size() % 2)
    return std::nullopt;
  int64_t threads = getNumWarps(layout) * kWarpSize;
  if (int64_t(offsets.size()) * threads != t.getNumElements())
    return std::nullopt;
  for (size_t r = 0; r < offsets.size(); r += 2) {
    SmallVector<int64_t> first = wrap(offsets[r], t.getShape());
    SmallVector<int64_t> next = wrap(offsets[r + 1], t.getShape());
    if (first.back() % 2)
      return std::nullopt;
    ++first.back();
    if (next != first)
      return std::nullopt;
  }
  return threads;
}

/// The XOR-linear form of `addresses` (per thread, per item): per thread-id
/// bit, what it XORs into item 0's address; none unless every address is
/// that base XOR the item's address in thread 0.
std::optional<SmallVector<int64_t>>
xorLinear(ArrayRef<SmallVector<int64_t>> addresses) {
  int64_t threads = addresses.size();
  SmallVector<int64_t> bits;
  for (int64_t bit = 1; bit < threads; bit *= 2)
    bits.push_back(addresses[bit][0] ^ addresses[0][0]);
  for (int64_t tid = 0; tid < threads; ++tid) {
    int64_t base = 0;
    for (auto [i, contribution] : llvm::enumerate(bits))
      if (tid >> i & 1)
        base ^= contribution;
    for (auto [item, address] : llvm::enumerate(addresses[tid]))
      if (address != (base ^ addresses[0][item]))
        return std::nullopt;
  }
  return bits;
}

/// What a FragmentPlan's swizzle does not change: which new word each old
/// word becomes.
struct FragmentRoutes {
  int64_t threads = 0, matrices = 4, calls = 0, slices = 1, bytes = 0;
  /// Per thread and old word: the new layout's thread and word.
  SmallVector<SmallVector<std::pair<int64_t, int64_t>>> to;
  /// Per old word, its slice (the same in every thread).
  SmallVector<int64_t> slice;
  /// Bits of a region's index.
  unsigned regionBits = 0;
};

std::optional<FragmentRoutes>
routeFragments(RankedTensorType from, RankedTensorType to, int64_t slices) {
  if (from.getNumElements() != to.getNumElements())
    return std::nullopt;
  SmallVector<SmallVector<int64_t>> fromOffsets =
      getRegisterOffsets(from.getEncoding(), from.getShape());
  SmallVector<SmallVector<int64_t>> toOffsets =
      getRegisterOffsets(to.getEncoding(), to.getShape());
  std::optional<int64_t> threads = wordThreads(to, toOffsets);
  if (!threads || wordThreads(from, fromOffsets) != threads ||
      !llvm::isPowerOf2_64(*threads))
    return std::nullopt;
  FragmentRoutes routes;
  routes.threads = *threads;
  int64_t words = toOffsets.size() / 2;
  routes.matrices = words % 4 == 0 ? 4 : words % 2 == 0 ? 2 : 1;
  int64_t calls = words / routes.matrices;
  if (calls % slices || !llvm::isPowerOf2_64(calls))
    return std::nullopt;
  routes.slices = slices;
  routes.calls = calls / slices;
  routes.bytes = from.getNumElements() * 2 / slices;
  routes.regionBits = llvm::Log2_64(*threads / kWarpSize * routes.calls);
  // Every element's owner in the new layout: (thread, register).
  SmallVector<std::pair<int64_t, int64_t>> owner(
      from.getNumElements(), std::make_pair(int64_t(-1), int64_t(0)));
  for (int64_t tid = 0; tid < *threads; ++tid) {
    SmallVector<int64_t> base = threadBase(to.getEncoding(), tid);
    for (auto [r, offset] : llvm::enumerate(toOffsets)) {
      auto &entry = owner[wrappedLinear(base, offset, to.getShape())];
      if (entry.first >= 0)
        return std::nullopt;
      entry = {tid, int64_t(r)};
    }
  }
  int64_t fromWords = fromOffsets.size() / 2;
  routes.to.resize(*threads);
  routes.slice.assign(fromWords, -1);
  for (int64_t tid = 0; tid < *threads; ++tid) {
    SmallVector<int64_t> base = threadBase(from.getEncoding(), tid);
    for (int64_t w = 0; w < fromWords; ++w) {
      auto [dest, r] =
          owner[wrappedLinear(base, fromOffsets[2 * w], from.getShape())];
      int64_t word = r / 2, slice = word / routes.matrices / routes.calls;
      if (routes.slice[w] >= 0 && routes.slice[w] != slice)
        return std::nullopt;
      routes.slice[w] = slice;
      routes.to[tid].push_back({dest, word});
    }
  }
  return routes;
}

std::optional<FragmentPlan> planFragments(const FragmentRoutes &routes,
                                          uint64_t rowSwizzle) {
  FragmentPlan plan;
  plan.matrices = routes.matrices;
  plan.calls = routes.calls;
  plan.slices = routes.slices;
  plan.bytes = routes.bytes;
  int64_t callBytes = plan.matrices * 128;
  // The byte of row `row` of matrix `matrix` in region `region`.
  auto rowAt = [&](int64_t region, int64_t matrix, int64_t row) {
    uint64_t bits = uint64_t(matrix) | uint64_t(region) << 2, phase = 0;
    for (unsigned b = 0; bits >> b; ++b)
      if (bits >> b & 1)
        phase ^= rowSwizzle >> (3 * b) & 7;
    return region * callBytes + matrix * 128 + (row ^ int64_t(phase)) * 16;
  };
  // Where word `word` of thread `tid` of the new layout sits.
  auto slot = [&](int64_t tid, int64_t word) {
    int64_t lane = tid % kWarpSize;
    int64_t region =
        tid / kWarpSize * plan.calls + word / plan.matrices % plan.calls;
    return rowAt(region, word % plan.matrices, lane / 4) + lane % 4 * 4;
  };
  int64_t fromWords = routes.slice.size();
  SmallVector<SmallVector<int64_t>> storeAt(routes.threads);
  for (int64_t tid = 0; tid < routes.threads; ++tid)
    for (auto [dest, word] : routes.to[tid])
      storeAt[tid].push_back(slot(dest, word));
  std::optional<SmallVector<int64_t>> storeBits = xorLinear(storeAt);
  // Lane l points at row l % 8 of matrix l / 8 (lanes past the matrices
  // repeat the first ones).
  SmallVector<SmallVector<int64_t>> loadAt(routes.threads);
  for (int64_t tid = 0; tid < routes.threads; ++tid) {
    int64_t lane = tid % kWarpSize;
    for (int64_t call = 0; call < plan.calls; ++call)
      loadAt[tid].push_back(rowAt(tid / kWarpSize * plan.calls + call,
                                  lane / 8 % plan.matrices, lane % 8));
  }
  std::optional<SmallVector<int64_t>> loadBits = xorLinear(loadAt);
  if (!storeBits || !loadBits)
    return std::nullopt;
  plan.storeBits = std::move(*storeBits);
  plan.loadBits = std::move(*loadBits);
  plan.loadOffsets.assign(loadAt[0].begin(), loadAt[0].end());
  int64_t baseSpan = 0;
  for (int64_t bits : plan.storeBits)
    baseSpan |= bits;
  // Stores: words at consecutive addresses in every thread (whichever their
  // registers), up to 16 bytes aligned to their size, in slice and address
  // order (the slices reuse the addresses).
  SmallVector<int64_t> order(fromWords);
  std::iota(order.begin(), order.end(), 0);
  llvm::sort(order, [&](int64_t a, int64_t b) {
    return std::make_pair(routes.slice[a], storeAt[0][a]) <
           std::make_pair(routes.slice[b], storeAt[0][b]);
  });
  auto follows = [&](int64_t w, int64_t next) {
    return routes.slice[next] == routes.slice[w] &&
           llvm::all_of(storeAt, [&](ArrayRef<int64_t> at) {
             return at[next] == at[w] + 4;
           });
  };
  for (size_t i = 0; i < order.size();) {
    size_t count = 1;
    while (i + count < order.size() && count < 4 &&
           follows(order[i + count - 1], order[i + count]))
      ++count;
    while (count > 1 && (!llvm::isPowerOf2_64(count) ||
                         llvm::any_of(storeAt, [&](ArrayRef<int64_t> at) {
                           return at[order[i]] % (4 * count) != 0;
                         })))
      count /= 2;
    FragmentPlan::Store store{{}, storeAt[0][order[i]], routes.slice[order[i]]};
    for (size_t k = 0; k < count; ++k)
      store.registers.push_back(unsigned(2 * order[i + k]));
    plan.stores.push_back(std::move(store));
    i += count;
  }
  // Cost, summed over warps: the stores' wavefronts, ldmatrix's one per
  // matrix; the instructions, an XOR and an add for each part of the
  // offsets that the base cannot add, and the barriers of further slices.
  SmallVector<int64_t> addresses(kWarpSize);
  llvm::SmallDenseSet<int64_t> xorParts;
  for (const FragmentPlan::Store &store : plan.stores) {
    if (store.offset & baseSpan)
      xorParts.insert(store.offset & baseSpan);
    int64_t w = store.registers.front() / 2;
    for (int64_t warp = 0; warp < routes.threads; warp += kWarpSize) {
      for (int64_t lane = 0; lane < kWarpSize; ++lane)
        addresses[lane] = storeAt[warp + lane][w];
      plan.wavefronts +=
          bankWavefronts(addresses, 4 * int64_t(store.registers.size()));
      ++plan.instructions;
    }
  }
  int64_t warps = routes.threads / kWarpSize;
  int64_t calls = plan.calls * plan.slices;
  plan.wavefronts += warps * calls * plan.matrices;
  plan.instructions +=
      warps * (calls + 2 * int64_t(xorParts.size()) + 2 * (plan.slices - 1));
  return plan;
}

/// The row swizzle of `routes` whose plan costs least (bank wavefronts,
/// then instructions): column by column, each phase of 8 against the others
/// fixed, twice over, or until it has no bank conflicts. None if no plan
/// can cost less than `beat`.
std::optional<uint64_t> searchRowSwizzle(const FragmentRoutes &routes,
                                         std::pair<int64_t, int64_t> beat) {
  auto cost =
      [&](uint64_t swizzle) -> std::optional<std::pair<int64_t, int64_t>> {
    if (std::optional<FragmentPlan> plan = planFragments(routes, swizzle))
      return std::make_pair(plan->wavefronts, plan->instructions);
    return std::nullopt;
  };
  uint64_t best = 0;
  std::optional<std::pair<int64_t, int64_t>> bestCost = cost(best);
  if (!bestCost)
    return std::nullopt;
  // No bank conflicts: a warp's store of n words takes n wavefronts (4n
  // bytes a lane), an ldmatrix one per matrix.
  int64_t words = routes.slice.size(), warps = routes.threads / kWarpSize;
  int64_t conflictFree =
      warps * (words + routes.calls * routes.slices * routes.matrices);
  // Which words a store moves does not depend on the swizzle (a store stays
  // in a 16-byte row), nor do the instructions but the XORs.
  std::optional<FragmentPlan> unswizzled = planFragments(routes, 0);
  if (!unswizzled ||
      std::make_pair(conflictFree, warps * (int64_t(unswizzled->stores.size()) +
                                            routes.calls * routes.slices)) >=
          beat)
    return std::nullopt;
  unsigned columns = std::min(2 + routes.regionBits, 21u);
  for (int pass = 0; pass < 2 && bestCost->first > conflictFree; ++pass)
    for (unsigned column = 0; column < columns; ++column)
      for (uint64_t phase = 0; phase < 8 && bestCost->first > conflictFree;
           ++phase) {
        uint64_t swizzle =
            (best & ~(uint64_t(7) << (3 * column))) | phase << (3 * column);
        if (swizzle == best)
          continue;
        if (auto c = cost(swizzle); c && *c < *bestCost)
          best = swizzle, bestCost = c;
      }
  return best;
}

/// The cheapest StagingLayout::fragments of each number of slices, of
/// those that can cost less than `beat` (bank wavefronts, instructions).
SmallVector<StagingLayout>
fragmentCandidates(RankedTensorType from, RankedTensorType to,
                   int64_t maxSlices,
                   std::pair<int64_t, int64_t> beat = {INT64_MAX, INT64_MAX}) {
  SmallVector<StagingLayout> candidates;
  for (int64_t slices = 1; slices <= maxSlices; slices *= 2) {
    std::optional<FragmentRoutes> routes = routeFragments(from, to, slices);
    if (!routes)
      break;
    if (std::optional<uint64_t> swizzle = searchRowSwizzle(*routes, beat))
      candidates.push_back(StagingLayout::fragmentOrder(*swizzle, slices));
  }
  return candidates;
}

/// A thread's base address of a FragmentPlan side: per thread-id bit, its
/// XOR contribution; runs of bits that move together as one shifted field.
Value emitXorBase(OpBuilder &b, Location loc, Value tid,
                  ArrayRef<int64_t> bits) {
  Value base;
  for (size_t i = 0; i < bits.size();) {
    if (!bits[i]) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (llvm::isPowerOf2_64(bits[i]))
      while (end < bits.size() && bits[end] == 2 * bits[end - 1])
        ++end;
    Value field = arith::AndIOp::create(
        b, loc, tid,
        i32Const(b, loc, ((int64_t(1) << end) - 1) & ~((int64_t(1) << i) - 1)));
    if (!llvm::isPowerOf2_64(bits[i])) {
      Value set = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, field,
                                        i32Const(b, loc, 0));
      field = arith::SelectOp::create(b, loc, set, i32Const(b, loc, bits[i]),
                                      i32Const(b, loc, 0));
    } else if (int64_t shift = llvm::Log2_64(bits[i]) - int64_t(i); shift > 0) {
      field = arith::ShLIOp::create(b, loc, field, i32Const(b, loc, shift));
    } else if (shift < 0) {
      field = arith::ShRUIOp::create(b, loc, field, i32Const(b, loc, -shift));
    }
    base = base ? arith::XOrIOp::create(b, loc, base, field) : field;
    i = end;
  }
  return base ? base : i32Const(b, loc, 0);
}

/// A FragmentPlan side's base XOR constant offsets: the offset's bits that
/// the base may have are XORed in (once for each such part), the others
/// added, which LLVM folds into the address.
class XorAddresses {
public:
  XorAddresses(OpBuilder &b, Location loc, KernelState &ks,
               ArrayRef<int64_t> bits)
      : base(emitXorBase(b, loc, ks.tid, bits)) {
    for (int64_t bit : bits)
      span |= bit;
  }

  Value at(OpBuilder &b, Location loc, KernelState &ks, int64_t offset) {
    Value &xored = bases[offset & span];
    if (!xored)
      xored = (offset & span)
                  ? arith::XOrIOp::create(b, loc, base,
                                          i32Const(b, loc, offset & span))
                  : base;
    Value byte = xored;
    if (int64_t added = offset & ~span)
      byte = arith::AddIOp::create(b, loc, xored, i32Const(b, loc, added),
                                   kNoWrap);
    return LLVM::GEPOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), b.getI8Type(),
        sharedBase(b, loc, ks), ValueRange{byte});
  }

private:
  Value base;
  int64_t span = 0;
  llvm::SmallDenseMap<int64_t, Value> bases;
};

SmallVector<Value> restageFragments(OpBuilder &b, Location loc, KernelState &ks,
                                    RankedTensorType from, Value vector,
                                    RankedTensorType to,
                                    const FragmentPlan &plan) {
  Type stored = storageType(b, from.getElementType());
  auto pair = VectorType::get({2}, stored);
  XorAddresses storeAt(b, loc, ks, plan.storeBits);
  XorAddresses loadAt(b, loc, ks, plan.loadBits);
  SmallVector<Value> held = unpack(b, loc, vector);
  SmallVector<Value> values(getElemsPerThread(to.getEncoding(), to.getShape()));
  for (int64_t s = 0; s < plan.slices; ++s) {
    if (s)
      barrier(b, loc);
    else
      leadingBarrier(b, loc, ks);
    for (const FragmentPlan::Store &store : plan.stores) {
      if (store.slice != s)
        continue;
      SmallVector<Value> words;
      for (unsigned r : store.registers) {
        Value halves = vector::FromElementsOp::create(
            b, loc, pair, ValueRange{held[r], held[r + 1]});
        words.push_back(
            LLVM::BitcastOp::create(b, loc, b.getI32Type(), halves));
      }
      Value value = words.front();
      if (words.size() > 1)
        value = vector::FromElementsOp::create(
            b, loc, VectorType::get({int64_t(words.size())}, b.getI32Type()),
            words);
      LLVM::StoreOp::create(b, loc, value, storeAt.at(b, loc, ks, store.offset),
                            /*alignment=*/4 * words.size());
    }
    barrier(b, loc);
    for (int64_t call = 0; call < plan.calls; ++call) {
      SmallVector<Value> regs =
          emitLdMatrix(b, loc, loadAt.at(b, loc, ks, plan.loadOffsets[call]),
                       plan.matrices, /*trans=*/false);
      for (auto [m, reg] : llvm::enumerate(regs)) {
        int64_t word = (s * plan.calls + call) * plan.matrices + m;
        Value halves = LLVM::BitcastOp::create(b, loc, pair, reg);
        for (int64_t e = 0; e < 2; ++e)
          values[2 * word + e] = vector::ExtractOp::create(b, loc, halves, e);
      }
    }
  }
  return values;
}

/// The FragmentPlan of `staging`, which must have one.
FragmentPlan fragmentPlan(RankedTensorType from, RankedTensorType to,
                          const StagingLayout &staging) {
  std::optional<FragmentRoutes> routes =
      routeFragments(from, to, staging.slices);
  assert(routes && "a fragment staging layout for tiles that cannot take it");
  std::optional<FragmentPlan> plan = planFragments(*routes, staging.rowSwizzle);
  assert(plan && "a fragment staging layout for tiles that cannot take it");
  return *plan;
}

} // namespace

std::optional<StagingLayout> fragmentLayout(RankedTensorType from,
                                            RankedTensorType to) {
  SmallVector<StagingLayout> candidates =
      fragmentCandidates(from, to, /*maxSlices=*/1);
  if (candidates.empty())
    return std::nullopt;
  return candidates.front();
}

namespace {

/// `from` and `to` (one shape) without the leading unit dimensions above
/// rank 2 when both layouts keep their registers in place without them
/// (reshapeInPlaceLayout): one matrix of a batch restages as a matrix, with
/// the swizzles, slices and ldmatrix plans of 2-D tiles. The registers keep
/// their order, so the same vectors move.
std::pair<RankedTensorType, RankedTensorType>
withoutBatchDims(RankedTensorType from, RankedTensorType to) {
  ArrayRef<int64_t> shape = from.getShape();
  int64_t leading = 0;
  while (shape.size() - leading > 2 && shape[leading] == 1)
    ++leading;
  if (!leading || shape != to.getShape())
    return {from, to};
  ArrayRef<int64_t> matrix = shape.drop_front(leading);
  Attribute fromLayout =
      reshapeInPlaceLayout(from.getEncoding(), shape, matrix);
  Attribute toLayout = reshapeInPlaceLayout(to.getEncoding(), shape, matrix);
  if (!fromLayout || !toLayout)
    return {from, to};
  return {RankedTensorType::get(matrix, from.getElementType(), fromLayout),
          RankedTensorType::get(matrix, to.getElementType(), toLayout)};
}

} // namespace

StagingLayout restageLayout(RankedTensorType from, RankedTensorType to,
                            int64_t maxBytes) {
  std::tie(from, to) = withoutBatchDims(from, to);
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
    RestageCost cost;
    if (s.fragments) {
      FragmentPlan plan = fragmentPlan(from, to, s);
      cost = {plan.wavefronts, plan.instructions, plan.bytes};
    } else {
      cost = restageCost(from, to, s);
    }
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
  // Through ldmatrix where that can do better (searching its swizzle takes
  // a while).
  auto [over, wavefronts, second, third] = bestKey;
  std::pair<int64_t, int64_t> beat = {wavefronts, maxBytes ? second : third};
  if (over)
    beat = {INT64_MAX, INT64_MAX};
  for (const StagingLayout &candidate :
       fragmentCandidates(from, to, /*maxSlices=*/64, beat))
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
  std::tie(from, to) = withoutBatchDims(from, to);
  if (staging.fragments)
    return fragmentPlan(from, to, staging).bytes;
  RestageSlicing slicing = restageSlicing(from, to, staging);
  return sliceBytes(from, staging, slicing.dim, slicing.slices);
}

SmallVector<Value> restageThroughShared(OpBuilder &b, Location loc,
                                        KernelState &ks, RankedTensorType from,
                                        Value vector, RankedTensorType to,
                                        const StagingLayout &staging) {
  std::tie(from, to) = withoutBatchDims(from, to);
  if (staging.fragments)
    return restageFragments(b, loc, ks, from, vector, to,
                            fragmentPlan(from, to, staging));
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
    // A swizzle XORs the same phase into the columns of registers whose
    // offsets agree modulo its period (perPhase * maxPhase rows, vec *
    // maxPhase columns; where neither wraps around the tile): their addresses
    // are the first one's plus a constant, which folds into the instruction,
    // instead of an XOR each (at 128x256 wgmma on 8 warps, 32 column values
    // live through the stores: 179 registers, 154 without).
    using Representatives = DenseMap<std::pair<int64_t, int64_t>,
                                     std::pair<Value, SmallVector<int64_t>>>;
    auto pointerOf = [&](RankedTensorType type, ArrayRef<int64_t> shape,
                         Representatives &representatives) {
      SmallVector<int64_t> baseMax = maxThreadBase(type.getEncoding());
      return [&, type, shape, baseMax](ArrayRef<Value> coord,
                                       ArrayRef<int64_t> offset) {
        bool wraps =
            llvm::any_of(llvm::seq<int64_t>(type.getRank()), [&](int64_t d) {
              return baseMax[d] + offset[d] >= type.getDimSize(d);
            });
        std::pair<int64_t, int64_t> key;
        bool classed = staging.swizzled() && !wraps;
        if (classed) {
          key = {offset[0] % (staging.perPhase * staging.maxPhase),
                 offset[1] % (staging.vec * staging.maxPhase)};
          if (auto it = representatives.find(key);
              it != representatives.end()) {
            auto &[ptr, at] = it->second;
            int32_t delta = (offset[0] - at[0]) * shape[1] + offset[1] - at[1];
            return Value(LLVM::GEPOp::create(b, loc, ptr.getType(), stored, ptr,
                                             ArrayRef<LLVM::GEPArg>{delta}));
          }
        }
        SmallVector<Value> local(coord);
        if (first)
          local[dim] = arith::SubIOp::create(b, loc, coord[dim],
                                             i32Const(b, loc, first), kNoWrap);
        Value ptr = sharedPtr(b, loc, ks, stored,
                              staging.emitIndex(b, loc, local, shape));
        if (classed)
          representatives[key] = {ptr, SmallVector<int64_t>(offset)};
        return ptr;
      };
    };
    if (s)
      barrier(b, loc);
    else
      leadingBarrier(b, loc, ks);
    Representatives stores, loads;
    storeRunsToShared(b, loc, ks, from, vector, storeElems,
                      pointerOf(from, fromShape, stores), inSlice);
    barrier(b, loc);
    SmallVector<Value> loaded = loadRunsFromShared(
        b, loc, ks, to, loadElems, pointerOf(to, toShape, loads), inSlice);
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
    if (std::optional<SmallVector<unsigned>> sources =
            registersInPlace(srcType, resType)) {
      SmallVector<Value> held = unpack(rewriter, loc, adaptor.getSource());
      SmallVector<Value> values;
      for (unsigned r : *sources)
        values.push_back(held[r]);
      rewriter.replaceOp(
          op, pack(rewriter, loc, this->vectorType(resType), values));
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
    // A reshape keeps the row-major order: stage it in the order ldmatrix
    // hands out, else unpadded and flat.
    StagingLayout staging = StagingLayout::padded(0);
    if constexpr (std::is_same_v<Op, ConvertLayoutOp>)
      staging = stagingLayout(op, this->state);
    else
      staging = fragmentLayout(srcType, resType).value_or(staging);
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
