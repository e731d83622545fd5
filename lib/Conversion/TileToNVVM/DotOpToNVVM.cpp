//===- DotOpToNVVM.cpp - tile.dot -----------------------------------------===//
//
// tile.dot with a blocked accumulator runs on CUDA cores: both operands
// staged in shared memory, then one fma per accumulator register and k.
// Dots with an mma accumulator go to tensor cores: mma.sync
// (MmaDotToNVVM.cpp) or, on sm_90a, wgmma (WgmmaDotToNVVM.cpp); both stage
// their operands as stagedOperandOffset says.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

StagedOperand stagedOperand(DotOp dot, unsigned operand, bool wgmma) {
  auto type = cast<RankedTensorType>(dot->getOperand(operand).getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  int64_t elemBytes = storageBits(type.getElementType()) / 8;
  int64_t mmaK = getMmaK(dot);
  auto [dim, contiguous] = contiguity(type.getEncoding());
  bool transposed =
      operand == 1 && ((wgmma && mmaK == 8) || mmaK == 32 ||
                       (mmaK == 16 && dim == 0 && contiguous > 1));
  if (transposed)
    return {cols, rows * elemBytes, true,
            std::min<int64_t>(rows * elemBytes, 128)};
  int64_t swizzle = std::min<int64_t>(cols * elemBytes, 128);
  if (auto mma = dyn_cast<MmaLayoutAttr>(getLayout(dot.getAcc().getType()));
      wgmma && operand == 1 && mma)
    swizzle = std::min<int64_t>(
        swizzle, std::max<int64_t>(cols / mma.getWarpsN() * elemBytes, 32));
  return {rows, cols * elemBytes, false, swizzle};
}

unsigned borrowedOperands(DotOp dot) {
  auto mask = dot->getAttrOfType<IntegerAttr>(kBorrowedOperandsAttr);
  return mask ? mask.getInt() : 0;
}

void setBorrowedOperands(DotOp dot, unsigned mask) {
  if (mask)
    dot->setAttr(
        kBorrowedOperandsAttr,
        IntegerAttr::get(IntegerType::get(dot.getContext(), 32), mask));
  else
    dot->removeAttr(kBorrowedOperandsAttr);
}

Value stagedOperandOffset(OpBuilder &b, Location loc, DotOp dot,
                          unsigned operand, bool wgmma, Value row, Value col) {
  auto type = cast<RankedTensorType>(dot->getOperand(operand).getType());
  int64_t elemBytes = storageBits(type.getElementType()) / 8;
  StagedOperand staged = stagedOperand(dot, operand, wgmma);
  if (staged.transposed) // its columns are the staged rows
    std::swap(row, col);
  if (wgmma)
    return arith::AddIOp::create(
        b, loc,
        wgmmaOffset(b, loc, row, col, staged.rows, staged.swizzle, elemBytes),
        i32Const(b, loc, wgmmaOperandOffset(dot, operand)));
  return arith::AddIOp::create(
      b, loc, mmaOffset(b, loc, row, col, staged.rowBytes, elemBytes),
      i32Const(b, loc, mmaOperandOffset(dot, operand)));
}

void storeDotOperand(OpBuilder &b, Location loc, KernelState &ks, DotOp dot,
                     unsigned operand, bool wgmma, Value vector) {
  auto type = cast<RankedTensorType>(dot->getOperand(operand).getType());
  auto [dim, contiguous] = contiguity(type.getEncoding());
  unsigned chunk = 128 / storageBits(type.getElementType());
  // Staged rows run along the tile's rows, or its columns where it is
  // transposed: vectors go along that dimension, from consecutive registers
  // or, in a blocked layout whose threads hold several elements along it too
  // (byteBlockLayout's 4 x 4 bytes of a transposed i8 rhs), from registers
  // that many of the faster dimension's apart.
  int64_t staged = stagedOperand(dot, operand, wgmma).transposed ? 0 : 1;
  unsigned maxElems = dim == staged ? std::min<unsigned>(contiguous, chunk) : 1;
  unsigned stride = 1;
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(type.getEncoding());
      blocked && dim != staged && blocked.getSizePerThread()[staged] > 1) {
    maxElems = std::min<unsigned>(blocked.getSizePerThread()[staged], chunk);
    stride = contiguous;
  }
  storeRunsToShared(
      b, loc, ks, type, vector, maxElems,
      [&](ArrayRef<Value> at, ArrayRef<int64_t>) {
        return sharedPtr(
            b, loc, ks, b.getI8Type(),
            stagedOperandOffset(b, loc, dot, operand, wgmma, at[0], at[1]));
      },
      {}, staged, stride);
}

bool lhsInRegisters(DotOp dot) {
  Attribute layout = getLayout(dot.getAcc().getType());
  return getLayout(dot.getLhs().getType()) == layout &&
         isRegisterLhs(dot, layout);
}

SmallVector<Value> registerLhsFragment(OpBuilder &b, Location loc,
                                       ArrayRef<Value> values, int64_t k,
                                       int64_t rm, int64_t kk) {
  int64_t first = (rm * (k / kMmaN) + kk / kMmaN) * 4;
  return packHalfPairs(b, loc, values.slice(first, 8));
}

bool lhsHoisted(DotOp dot) {
  if (auto recorded = dot->getAttrOfType<BoolAttr>(kLhsHoistedAttr))
    return recorded.getValue();
  auto loop = dyn_cast<scf::ForOp>(dot->getParentOp());
  return loop && isa<MmaLayoutAttr>(getLayout(dot.getAcc().getType())) &&
         !lhsInRegisters(dot) && loop.isDefinedOutsideOfLoop(dot.getLhs());
}

void recordHoistedLhs(ModuleOp module) {
  module.walk([](DotOp dot) {
    dot->setAttr(kLhsHoistedAttr,
                 BoolAttr::get(dot->getContext(), lhsHoisted(dot)));
  });
}

int64_t hoistedLhsBytes(DotOp dot, bool wgmma) {
  StagedOperand a = stagedOperand(dot, 0, wgmma);
  return wgmma ? wgmmaOperandBytes(a.rows, a.rowBytes) : a.rows * a.rowBytes;
}

void stageHoistedLhs(ConversionPatternRewriter &rewriter, Location loc,
                     KernelState &ks, DotOp dot, bool wgmma, Value lhs,
                     const HoistedLhs &hoist) {
  if (hoist.staged)
    return;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(dot->getParentOp());
  Value slotBase = ks.scratchBase;
  ks.scratchBase = i32Const(rewriter, loc, hoist.offset);
  if (hoist.barrierBefore) // whatever read this shared memory before is done
    barrier(rewriter, loc);
  storeDotOperand(rewriter, loc, ks, dot, 0, wgmma, lhs);
  if (wgmma) // wgmma reads shared memory through the async proxy
    emitPtx(rewriter, loc, "fence.proxy.async.shared::cta;");
  if (hoist.barrierAfter)
    barrier(rewriter, loc);
  ks.scratchBase = slotBase;
}

bool stageDotOperands(OpBuilder &b, Location loc, KernelState &ks, DotOp dot,
                      unsigned asyncOperands, bool pipelined,
                      function_ref<void(unsigned)> store) {
  unsigned stored =
      ~asyncOperands & (lhsInRegisters(dot) || lhsHoisted(dot) ? 2u : 3u);
  // A ring slot was last read stages - 1 iterations ago, behind the barrier
  // the pipeline puts before its copies.
  if (stored && !pipelined)
    leadingBarrier(b, loc, ks);
  for (unsigned operand = 0; operand < 2; ++operand)
    if (stored & (1u << operand))
      store(operand);
  if (pipelined)
    return stored != 0;
  if (asyncOperands) {
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  }
  return true;
}

namespace {

/// tile.dot on CUDA cores: both operands staged in shared memory, then a
/// loop over K of outer products into the accumulator registers.
struct DotLowering : TilePattern<DotOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(DotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = state.get(op);
    Value slot = state.dotSlots.lookup(op);
    useScratch(rewriter, loc, ks, state, op,
               slot ? rewriter.getRemappedValue(slot) : Value());
    if (auto mma = dyn_cast<MmaLayoutAttr>(getLayout(op.getAcc().getType()))) {
      // A cp.async pipeline's iterations start with a barrier; TMA's wait
      // on mbarriers instead.
      ScratchPlacement place = state.placements.lookup(op);
      HoistedLhs hoist{place.lhsOffset, !place.lhsUnread,
                       !slot || state.tmaDots.contains(op), place.lhsStaged};
      // Operands that another dot's copy staged: in its slot of the ring.
      SmallVector<BorrowedOperand, 2> borrowed(2);
      for (unsigned operand = 0; operand < 2; ++operand) {
        if (!(borrowedOperands(op) & (1u << operand)))
          continue;
        auto load = op->getOperand(operand).getDefiningOp<LoadOp>();
        DotOp owner = state.asyncCopies.lookup(load).dot;
        Value ownerSlot = state.dotSlots.lookup(owner);
        if (!slot || !ownerSlot)
          return op.emitOpError("internal error: a borrowed operand outside "
                                "a software pipeline");
        borrowed[operand] = {
            owner, scratchOffset(rewriter, loc, state.placements.lookup(owner),
                                 rewriter.getRemappedValue(ownerSlot))};
      }
      if (usesWgmma(op, state)) {
        if (failed(lowerWgmmaDot(
                op, adaptor.getLhs(), adaptor.getRhs(), adaptor.getAcc(), mma,
                ks, rewriter, vectorType(op.getAcc().getType()),
                state.asyncOperands.lookup(op), bool(slot),
                state.overlappedDots.lookup(op), hoist, borrowed)))
          return failure();
        // A warp-specialised consumer tells the producer which slot its
        // finished dots left.
        if (auto release = state.slotReleases.find(op);
            release != state.slotReleases.end()) {
          const SlotRelease &r = release->second;
          ScratchPlacement barriers = state.placements.lookup(r.mbarrierDot);
          arriveMbarrier(
              rewriter, loc,
              mbarrierPtr(rewriter, loc, ks,
                          barriers.mbarrierOffset + 8 * barriers.slots,
                          rewriter.getRemappedValue(r.slot)),
              r.enabled ? rewriter.getRemappedValue(r.enabled) : Value());
        }
        return success();
      }
      return lowerMmaDot(
          op, adaptor.getLhs(), adaptor.getRhs(), adaptor.getAcc(), mma, ks,
          rewriter, vectorType(op.getAcc().getType()),
          state.asyncOperands.lookup(op), bool(slot), hoist, borrowed);
    }
    RankedTensorType lhsType = op.getLhs().getType();
    RankedTensorType rhsType = op.getRhs().getType();
    RankedTensorType accType = op.getAcc().getType();
    int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
            n = rhsType.getDimSize(1);
    Type inElement = lhsType.getElementType();
    Type accElement = accType.getElementType();
    int64_t pad = smemPad(inElement);
    int64_t lhsBytes =
        llvm::alignTo(m * (k + pad) * storageBits(inElement) / 8, 16);
    leadingBarrier(rewriter, loc, ks);
    storeTileToShared(rewriter, loc, ks, lhsType, adaptor.getLhs(), {m, k},
                      pad);
    storeTileToShared(rewriter, loc, ks, rhsType, adaptor.getRhs(), {k, n}, pad,
                      lhsBytes);
    barrier(rewriter, loc);

    TileCoords coords = emitCoords(rewriter, loc, accType, ks);
    SmallVector<Value> acc = unpack(rewriter, loc, adaptor.getAcc());
    // Distinct rows and columns of this thread's accumulator registers.
    SmallVector<int64_t> rows, cols;
    SmallVector<unsigned> rowOf, colOf;
    for (const SmallVector<int64_t> &o : coords.offsets) {
      SmallVector<int64_t> w = wrap(o, accType.getShape());
      auto r = llvm::find(rows, w[0]);
      if (r == rows.end())
        rows.push_back(w[0]), r = rows.end() - 1;
      auto c = llvm::find(cols, w[1]);
      if (c == cols.end())
        cols.push_back(w[1]), c = cols.end() - 1;
      rowOf.push_back(r - rows.begin());
      colOf.push_back(c - cols.begin());
    }
    SmallVector<Value> rowCoord(rows.size()), colCoord(cols.size());
    for (auto [i, o] : llvm::enumerate(coords.offsets)) {
      rowCoord[rowOf[i]] = coords.coords[i][0];
      colCoord[colOf[i]] = coords.coords[i][1];
    }
    Value lb = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, k);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, step, acc,
        [&](OpBuilder &b, Location, Value kk, ValueRange iter) {
          Value k32 = arith::IndexCastOp::create(b, loc, b.getI32Type(), kk);
          // fp8 (either format on either side) is widened in software.
          auto read = [&](Value row, Value col, int64_t cols, int64_t base,
                          Type element) {
            Type stored = storageType(b, element);
            Value index = arith::AddIOp::create(
                b, loc,
                arith::MulIOp::create(b, loc, row,
                                      i32Const(b, loc, cols + pad)),
                col);
            Value ptr = sharedPtr(b, loc, ks, stored, index, base);
            Value v = LLVM::LoadOp::create(b, loc, stored, ptr);
            if (isFp8Type(element))
              return widenFp8(b, loc, element, v, accElement);
            if (v.getType() == accElement)
              return v;
            if (isa<IntegerType>(accElement))
              return Value(arith::ExtSIOp::create(b, loc, accElement, v));
            return Value(arith::ExtFOp::create(b, loc, accElement, v));
          };
          SmallVector<Value> a, bv;
          for (Value r : rowCoord)
            a.push_back(read(r, k32, k, 0, inElement));
          for (Value c : colCoord)
            bv.push_back(read(k32, c, n, lhsBytes, rhsType.getElementType()));
          SmallVector<Value> next;
          for (auto [i, v] : llvm::enumerate(iter)) {
            Value x = a[rowOf[i]], y = bv[colOf[i]];
            if (isa<IntegerType>(accElement)) // i32 sums wrap, as torch's
              next.push_back(arith::AddIOp::create(
                  b, loc, arith::MulIOp::create(b, loc, x, y), v));
            else
              next.push_back(math::FmaOp::create(b, loc, x, y, v));
          }
          scf::YieldOp::create(b, loc, next);
        });
    rewriter.replaceOp(op, pack(rewriter, loc, vectorType(accType),
                                SmallVector<Value>(loop.getResults())));
    return success();
  }
};

} // namespace

void populateDotOpToNVVMPatterns(TileTypeConverter &converter,
                                 RewritePatternSet &patterns,
                                 LoweringState &state) {
  patterns.add<DotLowering>(converter, patterns.getContext(), state);
}

} // namespace tileopt::nvvm
