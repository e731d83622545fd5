//===- TileLayouts.cpp - distributed layouts of tiles ---------------------===//

#include "tileopt/Dialect/Tile/IR/Layouts.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tileopt::tile;

/// Where layout arithmetic saturates: far above any limit a layout has, and
/// no overflow however many huge entries it multiplies.
static constexpr int64_t kSaturated = int64_t(1) << 40;

static int64_t saturatingMul(int64_t a, int64_t b) {
  return b && a > kSaturated / b ? kSaturated : a * b;
}

/// The product of `values`, saturated at kSaturated.
static int64_t product(ArrayRef<unsigned> values) {
  int64_t result = 1;
  for (unsigned v : values)
    result = saturatingMul(result, v);
  return result;
}

LogicalResult BlockedLayoutAttr::verify(
    function_ref<InFlightDiagnostic()> emitError,
    ArrayRef<unsigned> sizePerThread, ArrayRef<unsigned> threadsPerWarp,
    ArrayRef<unsigned> warpsPerCTA, ArrayRef<unsigned> order) {
  size_t rank = order.size();
  if (sizePerThread.size() != rank || threadsPerWarp.size() != rank ||
      warpsPerCTA.size() != rank)
    return emitError() << "expected sizePerThread, threadsPerWarp, "
                          "warpsPerCTA and order of one rank, got "
                       << sizePerThread.size() << ", " << threadsPerWarp.size()
                       << ", " << warpsPerCTA.size() << " and " << rank;
  for (ArrayRef<unsigned> values : {sizePerThread, threadsPerWarp, warpsPerCTA})
    for (unsigned v : values)
      if (v == 0 || !llvm::isPowerOf2_32(v))
        return emitError() << "expected powers of two in a blocked layout, got "
                           << v;
  if (product(threadsPerWarp) != kWarpSize)
    return emitError() << "expected threadsPerWarp to multiply to " << kWarpSize
                       << ", got " << product(threadsPerWarp);
  if (product(warpsPerCTA) > kMaxLayoutWarps)
    return emitError() << "expected warpsPerCTA to multiply to at most "
                       << kMaxLayoutWarps << ", got " << product(warpsPerCTA);
  if (product(sizePerThread) > kMaxElementsPerThread)
    return emitError() << "expected sizePerThread to multiply to at most "
                       << kMaxElementsPerThread << ", got "
                       << product(sizePerThread);
  llvm::SmallVector<bool> seen(rank, false);
  for (unsigned d : order) {
    if (d >= rank || seen[d])
      return emitError() << "expected order to be a permutation of [0, " << rank
                         << ")";
    seen[d] = true;
  }
  return success();
}

/// The check every layout makes of the tile it encodes: one rank.
static LogicalResult
verifyLayoutRank(Attribute layout, ArrayRef<int64_t> shape,
                 function_ref<InFlightDiagnostic()> emitError) {
  if (getLayoutRank(layout) == shape.size())
    return success();
  InFlightDiagnostic diag = emitError();
  diag << "expected a layout of rank " << shape.size()
       << " for a tile of shape [";
  llvm::interleaveComma(shape, diag);
  return diag << "], got a layout of rank " << getLayoutRank(layout) << ": "
              << layout;
}

LogicalResult BlockedLayoutAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  return verifyLayoutRank(*this, shape, emitError);
}

LogicalResult MmaLayoutAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyLayoutRank(*this, shape, emitError)))
    return failure();
  if (llvm::all_of(shape.drop_back(2), [](int64_t size) { return size == 1; }))
    return success();
  InFlightDiagnostic diag = emitError();
  diag << "expected size 1 in the leading dimensions of a tile with an mma "
          "layout, got a tile of shape [";
  llvm::interleaveComma(shape, diag);
  return diag << "]";
}

LogicalResult SliceLayoutAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  return verifyLayoutRank(*this, shape, emitError);
}

unsigned BlockedLayoutAttr::getNumWarps() const {
  return product(getWarpsPerCTA());
}

LogicalResult
SliceLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        unsigned dim, Attribute parent) {
  if (!isLayout(parent))
    return emitError() << "expected a layout as the parent of a slice, got "
                       << parent;
  if (dim >= getLayoutRank(parent))
    return emitError() << "expected slice dim " << dim
                       << " < rank of the parent (" << getLayoutRank(parent)
                       << ")";
  return success();
}

Attribute tileopt::tile::getLayout(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getEncoding();
  return {};
}

RankedTensorType tileopt::tile::withLayout(RankedTensorType type,
                                           Attribute layout) {
  return RankedTensorType::get(type.getShape(), type.getElementType(), layout);
}

LogicalResult
MmaLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      ArrayRef<unsigned> warpsPerCTA, unsigned blockN) {
  if (warpsPerCTA.size() < 2)
    return emitError() << "expected at least 2 warpsPerCTA entries in an mma "
                          "layout, got "
                       << warpsPerCTA.size();
  if (llvm::any_of(warpsPerCTA.drop_back(2), [](unsigned w) { return w != 1; }))
    return emitError() << "expected 1 warp along each leading dimension of an "
                          "mma layout";
  for (unsigned w : warpsPerCTA)
    if (w == 0 || !llvm::isPowerOf2_32(w))
      return emitError() << "expected powers of two in warpsPerCTA, got " << w;
  if (product(warpsPerCTA) > kMaxLayoutWarps)
    return emitError() << "expected warpsPerCTA to multiply to at most "
                       << kMaxLayoutWarps << ", got " << product(warpsPerCTA);
  if (blockN < kMmaN || !llvm::isPowerOf2_32(blockN) ||
      blockN > kMaxElementsPerThread)
    return emitError() << "expected a power of two in [" << kMmaN << ", "
                       << kMaxElementsPerThread << "] as blockN, got "
                       << blockN;
  return success();
}

void tileopt::tile::setTileType(Value value, RankedTensorType type) {
  value.setType(type);
  if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    if (auto dense = dyn_cast<DenseElementsAttr>(constant.getValue()))
      constant.setValueAttr(dense.reshape(type));
}

bool tileopt::tile::isLayout(Attribute attr) {
  return isa_and_present<BlockedLayoutAttr, MmaLayoutAttr, SliceLayoutAttr>(
      attr);
}

unsigned tileopt::tile::getLayoutRank(Attribute layout) {
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout))
    return blocked.getRank();
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout))
    return mma.getRank();
  return getLayoutRank(cast<SliceLayoutAttr>(layout).getParent()) - 1;
}

Attribute tileopt::tile::getRootLayout(Attribute layout) {
  while (auto slice = dyn_cast<SliceLayoutAttr>(layout))
    layout = slice.getParent();
  return layout;
}

unsigned tileopt::tile::getNumWarps(Attribute layout) {
  Attribute root = getRootLayout(layout);
  if (auto mma = dyn_cast<MmaLayoutAttr>(root))
    return mma.getNumWarps();
  return cast<BlockedLayoutAttr>(root).getNumWarps();
}

/// Register offsets of an mma layout: per 16x8 block (rows of blocks, then
/// columns: the 8-column groups of a 16 x blockN block, then the blocks),
/// the C fragment's (0,0), (0,1), (8,0), (8,1). In a tile smaller than a
/// block (attention's 64 x 1 row statistics) offsets that wrap onto the same
/// element are one register, so nothing is computed twice. Leading (unit)
/// dimensions take offset 0.
static SmallVector<SmallVector<int64_t>>
getMmaOffsets(MmaLayoutAttr layout, ArrayRef<int64_t> shape) {
  int64_t wm = layout.getWarpsM(), wn = layout.getWarpsN();
  int64_t blockN = layout.getBlockN();
  int64_t rows = shape.drop_back().back(), cols = shape.back();
  size_t leading = shape.size() - 2;
  int64_t repsM = std::max<int64_t>(1, rows / (kMmaM * wm));
  int64_t groupsN =
      std::max<int64_t>(1, cols / (blockN * wn)) * (blockN / kMmaN);
  SmallVector<SmallVector<int64_t>> offsets;
  llvm::DenseSet<std::pair<int64_t, int64_t>> seen;
  for (int64_t m = 0; m < repsM; ++m)
    for (int64_t n = 0; n < groupsN; ++n)
      for (auto [i, j] :
           {std::pair<int64_t, int64_t>{0, 0}, {0, 1}, {8, 0}, {8, 1}}) {
        int64_t block = n * kMmaN / blockN, group = n * kMmaN % blockN;
        int64_t row = m * kMmaM * wm + i, col = block * blockN * wn + group + j;
        if (!seen.insert({row % rows, col % cols}).second)
          continue;
        SmallVector<int64_t> offset(leading, 0);
        offset.append({row, col});
        offsets.push_back(std::move(offset));
      }
  return offsets;
}

BlockedLayoutAttr tileopt::tile::getDefaultBlockedLayout(
    MLIRContext *context, ArrayRef<int64_t> shape, unsigned vectorElems,
    unsigned numWarps, ArrayRef<unsigned> order) {
  unsigned rank = shape.size();
  SmallVector<unsigned> dims(order);
  if (dims.empty())
    for (unsigned d = 0; d < rank; ++d)
      dims.push_back(rank - 1 - d);
  assert(rank > 0 && "a blocked layout needs a rank; see getDefaultLayout");
  SmallVector<unsigned> spt(rank, 1), tpw(rank, 1), wpc(rank, 1);
  unsigned fastest = dims[0];
  // A tile too small for every thread to move a full vector moves smaller
  // ones rather than replicate data across threads.
  int64_t elements = 1;
  for (int64_t size : shape)
    elements *= size;
  int64_t perThread =
      std::max<int64_t>(1, elements / (int64_t(kWarpSize) * numWarps));
  spt[fastest] = std::max<int64_t>(
      1, std::min<int64_t>({int64_t(vectorElems), shape[fastest], perThread}));
  // Lanes, then warps, from the fastest dimension; what does not fit in the
  // tile replicates along the slowest dimension.
  unsigned lanes = kWarpSize, warps = numWarps;
  for (unsigned d : dims) {
    int64_t room = std::max<int64_t>(1, shape[d] / spt[d]);
    tpw[d] = std::min<int64_t>(lanes, room);
    lanes /= tpw[d];
  }
  tpw[dims.back()] *= lanes;
  for (unsigned d : dims) {
    int64_t room = std::max<int64_t>(1, shape[d] / (spt[d] * tpw[d]));
    wpc[d] = std::min<int64_t>(warps, room);
    warps /= wpc[d];
  }
  wpc[dims.back()] *= warps;
  return BlockedLayoutAttr::get(context, spt, tpw, wpc, dims);
}

Attribute tileopt::tile::getDefaultLayout(MLIRContext *context,
                                          ArrayRef<int64_t> shape,
                                          unsigned vectorElems,
                                          unsigned numWarps,
                                          ArrayRef<unsigned> order) {
  if (shape.empty())
    return SliceLayoutAttr::get(
        context, 0, getDefaultBlockedLayout(context, {1}, 1, numWarps));
  return getDefaultBlockedLayout(context, shape, vectorElems, numWarps, order);
}

/// Register offsets of a blocked layout: registers enumerate the elements of
/// sizePerThread then the repetitions, with `order[0]` fastest.
static SmallVector<SmallVector<int64_t>>
getBlockedOffsets(BlockedLayoutAttr layout, ArrayRef<int64_t> shape) {
  unsigned rank = layout.getRank();
  SmallVector<int64_t> perThread(rank), ctaTile(rank);
  for (unsigned d = 0; d < rank; ++d) {
    ctaTile[d] = int64_t(layout.getSizePerThread()[d]) *
                 layout.getThreadsPerWarp()[d] * layout.getWarpsPerCTA()[d];
    int64_t reps = std::max<int64_t>(1, llvm::divideCeil(shape[d], ctaTile[d]));
    perThread[d] = reps * layout.getSizePerThread()[d];
  }
  int64_t total = 1;
  for (int64_t n : perThread)
    total *= n;
  SmallVector<SmallVector<int64_t>> offsets;
  offsets.reserve(total);
  for (int64_t linear = 0; linear < total; ++linear) {
    SmallVector<int64_t> offset(rank);
    int64_t rest = linear;
    for (unsigned d : layout.getOrder()) {
      int64_t e = rest % perThread[d];
      rest /= perThread[d];
      int64_t spt = layout.getSizePerThread()[d];
      offset[d] = (e / spt) * ctaTile[d] + e % spt;
    }
    offsets.push_back(std::move(offset));
  }
  return offsets;
}

SmallVector<SmallVector<int64_t>>
tileopt::tile::getRegisterOffsets(Attribute layout, ArrayRef<int64_t> shape) {
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout))
    return getBlockedOffsets(blocked, shape);
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout))
    return getMmaOffsets(mma, shape);
  auto slice = cast<SliceLayoutAttr>(layout);
  SmallVector<int64_t> parentShape(shape);
  parentShape.insert(parentShape.begin() + slice.getDim(), 1);
  SmallVector<SmallVector<int64_t>> result;
  llvm::DenseSet<ArrayRef<int64_t>> seen;
  SmallVector<SmallVector<int64_t>> parent =
      getRegisterOffsets(slice.getParent(), parentShape);
  for (SmallVector<int64_t> &offset : parent) {
    offset.erase(offset.begin() + slice.getDim());
    // Offsets wrap modulo the shape; keep the first register of each element.
    for (auto [d, size] : llvm::enumerate(shape))
      offset[d] %= size;
    result.push_back(offset);
  }
  SmallVector<SmallVector<int64_t>> unique;
  for (SmallVector<int64_t> &offset : result)
    if (seen.insert(offset).second)
      unique.push_back(offset);
  return unique;
}

int64_t tileopt::tile::getElemsPerThread(Attribute layout,
                                         ArrayRef<int64_t> shape) {
  return getRegisterOffsets(layout, shape).size();
}

int64_t tileopt::tile::getElemsPerThreadBound(Attribute layout,
                                              ArrayRef<int64_t> shape) {
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout)) {
    int64_t total = 1;
    for (unsigned d = 0; d < blocked.getRank(); ++d) {
      int64_t spt = blocked.getSizePerThread()[d];
      int64_t ctaTile =
          saturatingMul(saturatingMul(spt, blocked.getThreadsPerWarp()[d]),
                        blocked.getWarpsPerCTA()[d]);
      int64_t reps = std::max<int64_t>(1, llvm::divideCeil(shape[d], ctaTile));
      total = saturatingMul(total, saturatingMul(reps, spt));
    }
    return total;
  }
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    // getMmaOffsets before merging the offsets that wrap.
    int64_t rows = shape.drop_back().back(), cols = shape.back();
    int64_t repsM = std::max<int64_t>(1, rows / (kMmaM * mma.getWarpsM()));
    int64_t blocksN = std::max<int64_t>(
        1, cols / saturatingMul(mma.getBlockN(), mma.getWarpsN()));
    return saturatingMul(
        saturatingMul(repsM, blocksN),
        saturatingMul(4, llvm::divideCeil(mma.getBlockN(), kMmaN)));
  }
  auto slice = cast<SliceLayoutAttr>(layout);
  SmallVector<int64_t> parentShape(shape);
  parentShape.insert(parentShape.begin() + slice.getDim(), 1);
  return getElemsPerThreadBound(slice.getParent(), parentShape);
}

Attribute tileopt::tile::permuteLayout(Attribute layout,
                                       ArrayRef<int64_t> permutation) {
  auto blocked = dyn_cast<BlockedLayoutAttr>(layout);
  if (!blocked)
    return {};
  unsigned rank = blocked.getRank();
  SmallVector<unsigned> spt(rank), tpw(rank), wpc(rank), order;
  SmallVector<unsigned> inverse(rank);
  for (unsigned i = 0; i < rank; ++i) {
    spt[i] = blocked.getSizePerThread()[permutation[i]];
    tpw[i] = blocked.getThreadsPerWarp()[permutation[i]];
    wpc[i] = blocked.getWarpsPerCTA()[permutation[i]];
    inverse[permutation[i]] = i;
  }
  for (unsigned d : blocked.getOrder())
    order.push_back(inverse[d]);
  return BlockedLayoutAttr::get(layout.getContext(), spt, tpw, wpc, order);
}

Attribute tileopt::tile::reshapeInPlaceLayout(Attribute layout,
                                              ArrayRef<int64_t> from,
                                              ArrayRef<int64_t> to) {
  if (!layout || to.empty())
    return {};
  auto isUnit = [](int64_t size) { return size == 1; };
  auto nonUnit = [&](ArrayRef<int64_t> shape) {
    SmallVector<unsigned> dims;
    for (auto [d, size] : llvm::enumerate(shape))
      if (!isUnit(size))
        dims.push_back(d);
    return dims;
  };
  SmallVector<unsigned> fromDims = nonUnit(from), toDims = nonUnit(to);
  if (fromDims.size() != toDims.size() ||
      llvm::any_of(llvm::zip(fromDims, toDims), [&](auto pair) {
        return from[std::get<0>(pair)] != to[std::get<1>(pair)];
      }))
    return {};
  MLIRContext *context = layout.getContext();
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    if (to.size() < 2 || from.take_back(2) != to.take_back(2) ||
        !llvm::all_of(to.drop_back(2), isUnit))
      return {};
    SmallVector<unsigned> warps(to.size() - 2, 1);
    warps.append({mma.getWarpsM(), mma.getWarpsN()});
    return MmaLayoutAttr::get(context, warps, mma.getBlockN());
  }
  auto blocked = dyn_cast<BlockedLayoutAttr>(layout);
  if (!blocked)
    return {};
  // A dropped unit dimension must hold nothing but the one element.
  for (auto [d, size] : llvm::enumerate(from))
    if (isUnit(size) && (blocked.getSizePerThread()[d] != 1 ||
                         blocked.getThreadsPerWarp()[d] != 1 ||
                         blocked.getWarpsPerCTA()[d] != 1))
      return {};
  // Kept dimensions keep their parameters and order; unit ones come last.
  unsigned rank = to.size();
  SmallVector<unsigned> spt(rank, 1), tpw(rank, 1), wpc(rank, 1), order;
  SmallVector<int> toOf(from.size(), -1);
  for (auto [f, t] : llvm::zip(fromDims, toDims)) {
    toOf[f] = t;
    spt[t] = blocked.getSizePerThread()[f];
    tpw[t] = blocked.getThreadsPerWarp()[f];
    wpc[t] = blocked.getWarpsPerCTA()[f];
  }
  for (unsigned f : blocked.getOrder())
    if (toOf[f] >= 0)
      order.push_back(toOf[f]);
  for (unsigned t = 0; t < rank; ++t)
    if (isUnit(to[t]))
      order.push_back(t);
  return BlockedLayoutAttr::get(context, spt, tpw, wpc, order);
}

int64_t tileopt::tile::getMmaK(DotOp dot) {
  mlir::Type in = dot.getLhs().getType().getElementType();
  mlir::Type acc = dot.getAcc().getType().getElementType();
  if ((in.isF16() || in.isBF16()) && acc.isF32())
    return 16;
  if (in.isF16() && acc.isF16())
    return 16;
  if (in.isF32() && acc.isF32() &&
      dot.getInputPrecision() == InputPrecision::tf32)
    return 8;
  if (in.isSignlessInteger(8) && acc.isSignlessInteger(32))
    return 32;
  if (isFp8Type(in) && acc.isF32())
    return 32;
  return 0;
}

unsigned tileopt::tile::getMmaMinSmVersion(DotOp dot) {
  return isFp8Type(dot.getLhs().getType().getElementType()) ? 89 : 80;
}

bool tileopt::tile::isRegisterLhs(DotOp dot, Attribute layout) {
  auto mma = dyn_cast_if_present<MmaLayoutAttr>(layout);
  RankedTensorType lhs = dot.getLhs().getType();
  return mma && mma.getWarpsN() == 1 && getMmaK(dot) == 16 &&
         getElemsPerThread(mma, lhs.getShape()) <= 64;
}

bool tileopt::tile::hasWgmma(llvm::StringRef chip) { return chip == "sm_90a"; }

unsigned tileopt::tile::getSmVersion(llvm::StringRef chip) {
  unsigned sm = 0;
  if (!chip.consume_front("sm_") ||
      chip.take_while(llvm::isDigit).getAsInteger(10, sm))
    return 0;
  return sm;
}

bool tileopt::tile::isWgmmaDot(int64_t m, int64_t n,
                               llvm::ArrayRef<unsigned> warpsPerCTA,
                               DotOp dot) {
  int64_t mmaK = getMmaK(dot);
  bool integer = dot.getLhs().getType().getElementType().isInteger();
  if (warpsPerCTA.size() != 2 || warpsPerCTA[0] % 4 != 0 ||
      m % (kMmaM * warpsPerCTA[0]) != 0 || n % warpsPerCTA[1] != 0)
    return false;
  // Each warpgroup column computes n / warpsPerCTA[1] columns, N of
  // m64nNk*: a multiple of 8 up to 256 (for i8 inputs past 24, a multiple
  // of 16: ptxas refuses m64n40k32.s32). (16-bit B is staged N-major in
  // atoms that hold whole warpgroups' columns or halves of one atom, tf32
  // and i8 B K-major in 8-row groups: stagedOperand.)
  int64_t cols = n / warpsPerCTA[1];
  if (cols % 8 != 0 || cols < 8 || cols > 256)
    return false;
  return mmaK == 8 || mmaK == 16 ||
         (mmaK == 32 && (!integer || cols <= 24 || cols % 16 == 0));
}
