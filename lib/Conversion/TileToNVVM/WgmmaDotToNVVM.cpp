//===- WgmmaDotToNVVM.cpp - tile.dot on wgmma -----------------------------===//
//
// Hopper's warpgroup MMA (sm_90a): operands staged in shared memory in
// wgmma's swizzled layout, described by 64-bit descriptors, multiplied by
// wgmma.mma_async with the accumulators in place.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

bool usesWgmma(DotOp dot, const LoweringState &state) {
  RankedTensorType acc = dot.getAcc().getType();
  auto mma = dyn_cast_if_present<MmaLayoutAttr>(getLayout(acc));
  // Split columns need a warpgroup's to be contiguous (blockN).
  int64_t n = acc.getDimSize(1);
  return state.wgmma && mma &&
         isWgmmaDot(acc.getDimSize(0), n, mma.getWarpsPerCTA(), dot) &&
         (mma.getWarpsN() == 1 || mma.getBlockN() * mma.getWarpsN() == n);
}

namespace {

/// wgmma's descriptor code of a swizzle width (PTX ISA: 1 = 128B, 2 = 64B,
/// 3 = 32B, 0 = none: 16-byte atoms).
int64_t wgmmaSwizzleMode(int64_t swizzle) {
  return swizzle == 128 ? 1 : swizzle == 64 ? 2 : swizzle == 32 ? 3 : 0;
}

} // namespace

namespace {

/// The wait until at most `pending` wgmma commit groups are still running.
std::string wgmmaWait(int64_t pending) {
  return llvm::formatv("wgmma.wait_group.sync.aligned {0};", pending).str();
}

} // namespace

int64_t wgmmaOperandBytes(int64_t rows, int64_t rowBytes) {
  return llvm::alignTo(rows, 8) * rowBytes;
}

Value wgmmaOffset(OpBuilder &b, Location loc, Value row, Value col,
                  int64_t rows, int64_t swizzle, int64_t elemBytes) {
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  Value byte = arith::MulIOp::create(b, loc, col, c(elemBytes), kNoWrap);
  Value atom = arith::ShRUIOp::create(b, loc, byte, c(llvm::Log2_64(swizzle)));
  Value within = arith::AndIOp::create(b, loc, byte, c(swizzle - 1));
  Value phase =
      arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, row, c(7)),
                             c(llvm::Log2_64(128 / swizzle)));
  Value swizzled = arith::XOrIOp::create(
      b, loc, within, arith::ShLIOp::create(b, loc, phase, c(4)));
  Value atomBase =
      arith::MulIOp::create(b, loc, atom, c(rows * swizzle), kNoWrap);
  Value rowBase = arith::MulIOp::create(b, loc, row, c(swizzle), kNoWrap);
  return arith::AddIOp::create(
      b, loc, arith::AddIOp::create(b, loc, atomBase, rowBase, kNoWrap),
      swizzled, kNoWrap);
}

int64_t wgmmaOperandOffset(DotOp dot, unsigned operand) {
  if (operand == 0 || lhsInRegisters(dot) || lhsHoisted(dot) ||
      (borrowedOperands(dot) & 1))
    return 0;
  StagedOperand a = stagedOperand(dot, 0, /*wgmma=*/true);
  return llvm::alignTo(wgmmaOperandBytes(a.rows, a.rowBytes), 1024);
}

namespace {

/// A dot's accumulator that restarts from zeros where a scalar condition
/// holds: select(splat(c), zeros, kept) or select(splat(c), kept, zeros),
/// as a persistent kernel's first k step of each tile.
struct RestartedAccumulator {
  Value kept;
  Value condition;
  bool restartWhen; // the condition's value at which the zeros are taken
};

bool isZeroTile(Value value) {
  return matchPattern(value, m_Zero()) || matchPattern(value, m_PosZeroFloat());
}

std::optional<RestartedAccumulator> restartedAccumulator(DotOp dot) {
  auto select = dot.getAcc().getDefiningOp<arith::SelectOp>();
  auto splat =
      select ? select.getCondition().getDefiningOp<SplatOp>() : SplatOp();
  if (!splat)
    return std::nullopt;
  if (isZeroTile(select.getTrueValue()))
    return RestartedAccumulator{select.getFalseValue(), splat.getValue(), true};
  if (isZeroTile(select.getFalseValue()))
    return RestartedAccumulator{select.getTrueValue(), splat.getValue(), false};
  return std::nullopt;
}

} // namespace

LogicalResult lowerWgmmaDot(DotOp op, Value lhs, Value rhs, Value accVec,
                            MmaLayoutAttr mma, KernelState &ks,
                            ConversionPatternRewriter &rewriter,
                            VectorType accVecType, unsigned asyncOperands,
                            bool pipelined, unsigned overlapped,
                            const HoistedLhs &hoist,
                            ArrayRef<BorrowedOperand> borrowed) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  RankedTensorType lhsType = op.getLhs().getType();
  RankedTensorType rhsType = op.getRhs().getType();
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
          n = rhsType.getDimSize(1);
  // B is staged K-major (transposed) for tf32 (k8), i8 (k32) and transposed
  // 16-bit inputs, else N-major (stagedOperand).
  bool tf32 = getMmaK(op) == 8, eightBit = getMmaK(op) == 32;
  bool integer = lhsType.getElementType().isInteger();
  StagedOperand bStaged = stagedOperand(op, 1, /*wgmma=*/true);
  bool bKMajor = bStaged.transposed;
  int64_t elemBytes = storageBits(lhsType.getElementType()) / 8;
  int64_t aSwizzle = stagedOperand(op, 0, /*wgmma=*/true).swizzle,
          bSwizzle = bStaged.swizzle;
  // Swizzle atoms repeat every 8 rows: 1024 bytes at most.
  int64_t bOffset =
      wgmmaOperandOffset(borrowed[1].owner ? borrowed[1].owner : op, 1);
  ks.sharedAlignment = std::max<int64_t>(ks.sharedAlignment, 1024);

  bool hoisted = lhsHoisted(op);
  if (hoisted)
    stageHoistedLhs(rewriter, loc, ks, op, /*wgmma=*/true, lhs, hoist);
  if (stageDotOperands(b, loc, ks, op, asyncOperands, pipelined,
                       [&](unsigned operand) {
                         storeDotOperand(b, loc, ks, op, operand,
                                         /*wgmma=*/true, operand ? rhs : lhs);
                       })) {
    // wgmma reads shared memory through the async proxy.
    emitPtx(b, loc, "fence.proxy.async.shared::cta;");
    barrier(b, loc);
  }

  auto c32 = [&](int64_t v) { return i32Const(b, loc, v); };
  Type i64 = b.getI64Type();
  Value base =
      LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), sharedBase(b, loc, ks));
  // A hoisted lhs is outside the dot's (ring slot's) staging area, and a
  // borrowed operand in its owner's.
  auto at = [&](Value offset) -> Value {
    return arith::AddIOp::create(
        b, loc,
        LLVM::PtrToIntOp::create(
            b, loc, b.getI32Type(),
            LLVM::AddressOfOp::create(b, loc, ks.sharedMemory)),
        offset);
  };
  Value lhsBase = base, rhsBase = base;
  if (hoisted)
    lhsBase = at(c32(hoist.offset));
  if (borrowed[0].owner)
    lhsBase = at(borrowed[0].scratch);
  if (borrowed[1].owner)
    rhsBase = at(borrowed[1].scratch);
  // Descriptor: start address >> 4 (14 bits), leading and stride byte
  // offsets >> 4, swizzle mode in bits 62-63.
  auto descriptor = [&](Value byteOffset, int64_t leading, int64_t stride,
                        int64_t swizzle, Value from) -> Value {
    Value addr = arith::AddIOp::create(b, loc, from, byteOffset);
    Value start = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, addr, c32(4)), c32(0x3FFF));
    uint64_t fixed = (uint64_t((leading >> 4) & 0x3FFF) << 16) |
                     (uint64_t((stride >> 4) & 0x3FFF) << 32) |
                     (uint64_t(wgmmaSwizzleMode(swizzle)) << 62);
    return arith::OrIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, i64, start),
        arith::ConstantIntOp::create(b, loc, i64, int64_t(fixed)));
  };

  unsigned wm = mma.getWarpsM(), wn = mma.getWarpsN();
  int64_t repsM = m / (kMmaM * wm);
  // Each warpgroup column computes `cols` contiguous columns (the layout's
  // blockN): its share of B starts at row groupCol * cols of K-major B, and
  // at byte groupCol * cols * elemBytes of N-major B's rows: in atom
  // (that / bSwizzle), (that % bSwizzle) bytes in (stagedOperand: only 16
  // bytes into a 32-byte atom, which descriptors allow as Triton's do).
  int64_t cols = n / wn;
  int64_t regsPerRep = cols / 2;
  // This warpgroup's first row: 64 per warpgroup, 16 * wm per repetition.
  Value groupRow = arith::MulIOp::create(
      b, loc,
      arith::AndIOp::create(b, loc,
                            arith::ShRUIOp::create(b, loc, ks.warp, c32(2)),
                            c32(wm / 4 - 1)),
      c32(64));
  // Warps past the layout's (a tile smaller than the block) repeat the
  // first ones' work, as with mma.sync.
  Value groupCol = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, ks.warp, c32(llvm::Log2_32(wm))),
      c32(wn - 1));
  int64_t groupBytes = cols * elemBytes;
  Value bColumnStart;
  if (bKMajor || groupBytes >= bSwizzle) {
    bColumnStart = arith::MulIOp::create(
        b, loc, groupCol,
        c32(bKMajor ? cols * bSwizzle : groupBytes / bSwizzle * k * bSwizzle));
  } else {
    int64_t perAtom = bSwizzle / groupBytes;
    Value atom =
        arith::ShRUIOp::create(b, loc, groupCol, c32(llvm::Log2_64(perAtom)));
    Value within = arith::AndIOp::create(b, loc, groupCol, c32(perAtom - 1));
    bColumnStart = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, atom, c32(k * bSwizzle)),
        arith::MulIOp::create(b, loc, within, c32(groupBytes)));
  }
  // A restarted accumulator is the kept one with scale-d 0 where it
  // restarts (Triton's OptimizeAccumulatorInit), not a select of each
  // register.
  std::optional<RestartedAccumulator> restart = restartedAccumulator(op);
  if (restart)
    accVec = rewriter.getRemappedValue(restart->kept);
  // f16 accumulators go two to a register (.f16x2), in the f32 order.
  SmallVector<Value> acc = unpack(b, loc, accVec);
  bool halfAcc = accVecType.getElementType().isF16();
  if (halfAcc) {
    acc = packHalfPairs(b, loc, acc);
    regsPerRep /= 2;
  }
  // Scales of D, A and B (integer inputs: D only), then (16-bit inputs
  // only) whether A and B are transposed (MN-major): B is when N-major.
  StringRef aType = mmaTypeName(lhsType.getElementType(), tf32);
  StringRef bType = mmaTypeName(rhsType.getElementType(), tf32);
  StringRef accType = halfAcc ? "f16" : integer ? "s32" : "f32";
  // A from registers (lhsInRegisters) takes no transpose flag: four b32
  // registers, a warp's 16 rows laid out as mma.sync's A fragment.
  bool aRegisters = lhsInRegisters(op);
  SmallVector<Value> aValues;
  if (aRegisters)
    aValues = unpack(b, loc, lhs);
  // The asm's operands: the accumulator, A (registers or a descriptor), B's
  // descriptor, then a restart's condition.
  int64_t bOperand = regsPerRep + (aRegisters ? 4 : 1);
  // scale-d 0 ignores the accumulator: a zero one (as of a dot that starts
  // from zeros) needs no registers set for the first k step.
  auto wgmmaText = [&](StringRef scaleD) {
    return llvm::formatv(
               "wgmma.mma_async.sync.aligned.m64n{0}k{1}.{2}.{3}.{10} {4}, "
               "{5}, ${6}, {8}{9}{7};",
               cols, getMmaK(op), accType, aType,
               asmRegisterList(0, regsPerRep),
               aRegisters ? asmRegisterList(regsPerRep, 4)
                          : "$" + std::to_string(regsPerRep),
               bOperand,
               tf32 || eightBit ? ""
               : aRegisters     ? (bKMajor ? ", 0" : ", 1")
               : bKMajor        ? ", 0, 0"
                                : ", 0, 1",
               scaleD, integer ? "" : ", 1, 1", bType)
        .str();
  };
  std::string text = wgmmaText("1");
  bool zeroAcc = isZeroTile(op.getAcc());
  if (zeroAcc)
    for (Value &reg : acc)
      reg = LLVM::PoisonOp::create(b, loc, reg.getType());
  // The first k step's scale-d: 0 for a zero accumulator, or a predicate
  // of the restart's condition (the asm's last input).
  std::string first = zeroAcc ? wgmmaText("0") : text;
  Value keepInput;
  if (restart) {
    first = std::string("{\n.reg .pred keepD;\nsetp.") +
            (restart->restartWhen ? "eq" : "ne") + ".b32 keepD, $" +
            std::to_string(bOperand + 1) + ", 0;\n" + wgmmaText("keepD") +
            "\n}";
    keepInput = arith::ExtUIOp::create(
        b, loc, b.getI32Type(), rewriter.getRemappedValue(restart->condition));
  }
  // A K-major operand of `rows` rows at k step kk: its bytes kk * elemBytes
  // in each row, in the atom they fall in.
  auto kMajorStart = [&](int64_t kk, int64_t rows, int64_t swizzle) {
    int64_t byte = kk * elemBytes;
    return byte / swizzle * rows * swizzle + byte % swizzle;
  };
  emitPtx(b, loc, "wgmma.fence.sync.aligned;");
  // A's registers, read until the wgmma is retired.
  SmallVector<Value> aFragments;
  for (int64_t kk = 0; kk < k; kk += getMmaK(op)) {
    Value bDesc =
        bKMajor
            ? descriptor(arith::AddIOp::create(
                             b, loc, bColumnStart,
                             c32(bOffset + kMajorStart(kk, n, bSwizzle))),
                         16, 8 * bSwizzle, bSwizzle, rhsBase)
            // N-major: the next atom of columns at the leading offset, the
            // next 8 rows at the stride; unswizzled (16-byte atoms), the
            // other way round.
            : descriptor(arith::AddIOp::create(b, loc, bColumnStart,
                                               c32(bOffset + kk * bSwizzle)),
                         bSwizzle == 16 ? 8 * bSwizzle : k * bSwizzle,
                         bSwizzle == 16 ? k * bSwizzle : 8 * bSwizzle, bSwizzle,
                         rhsBase);
    for (int64_t rm = 0; rm < repsM; ++rm) {
      SmallVector<Value> inputs;
      if (aRegisters) {
        inputs = registerLhsFragment(b, loc, aValues, k, rm, kk);
        aFragments.append(inputs);
      } else {
        Value row =
            arith::AddIOp::create(b, loc, groupRow, c32(rm * kMmaM * wm));
        Value aStart = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, row, c32(aSwizzle)),
            c32(kMajorStart(kk, m, aSwizzle)));
        inputs.push_back(
            descriptor(aStart, 16, 8 * aSwizzle, aSwizzle, lhsBase));
      }
      inputs.push_back(bDesc);
      MutableArrayRef<Value> regs =
          MutableArrayRef<Value>(acc).slice(rm * regsPerRep, regsPerRep);
      if (kk == 0 && keepInput)
        inputs.push_back(keepInput);
      SmallVector<Value> d =
          emitInPlaceAsm(b, loc, kk == 0 ? first : text, regs, inputs);
      llvm::copy(d, regs.begin());
    }
  }
  emitPtx(b, loc, "wgmma.commit_group.sync.aligned;");
  // The wait takes the accumulators in place, so nothing reads them early,
  // and A's registers, so that nothing reuses them while the wgmma reads
  // them (deferWgmmaWaits may move the wait past other code; ptxas would
  // serialize the wgmma, C7513). An overlapped dot leaves its own group
  // running (and those of the other dots of its iteration: `overlapped`
  // groups in all): only the next dot (in the next iteration) or the wait
  // after the loop reads its accumulators.
  acc = emitInPlaceAsm(b, loc, wgmmaWait(overlapped), acc, aFragments);
  if (halfAcc)
    acc = unpackHalfPairs(b, loc, acc);
  if (int64_t(acc.size()) != accVecType.getNumElements())
    return op.emitOpError("internal error: wgmma accumulator size mismatch");
  rewriter.replaceOp(op, pack(b, loc, accVecType, acc));
  return success();
}

namespace {

/// Replaces the uses of `registers` (vectors) after `b`'s insertion point
/// for which `replace` holds by their values after one wgmma.wait_group 0.
void waitForRegisters(OpBuilder &b, Location loc, ValueRange registers,
                      function_ref<bool(OpOperand &)> replace) {
  SmallVector<Value> acc;
  SmallVector<size_t> sizes;
  for (Value vector : registers) {
    SmallVector<Value> elements = unpack(b, loc, vector);
    sizes.push_back(elements.size());
    acc.append(elements);
  }
  llvm::SmallPtrSet<Operation *, 32> reads;
  for (Value v : acc)
    reads.insert(v.getDefiningOp());
  acc = emitInPlaceAsm(b, loc, wgmmaWait(0), acc, {});
  ArrayRef<Value> waited = acc;
  for (auto [vector, size] : llvm::zip(registers, sizes)) {
    Value packed = pack(b, loc, cast<VectorType>(vector.getType()),
                        waited.take_front(size));
    waited = waited.drop_front(size);
    vector.replaceUsesWithIf(packed, [&](OpOperand &use) {
      return !reads.contains(use.getOwner()) && replace(use);
    });
  }
}

/// Moves `loop` into an scf.if on whether it runs at all, whose other branch
/// yields its inits, so that the code after it in the branch sees only its
/// iterations' results. LLVM's copies of the inits on the path that skips
/// the loop would otherwise join the wgmma results before the wait: ptxas
/// then serializes every wgmma of the loop (C7515, "non wgmma instructions
/// defining accumulator registers") once several dots are pending.
void guardTrips(scf::ForOp loop) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Value runs =
      arith::CmpIOp::create(b, loc,
                            loop.getUnsignedCmp() ? arith::CmpIPredicate::ult
                                                  : arith::CmpIPredicate::slt,
                            loop.getLowerBound(), loop.getUpperBound());
  auto branch = scf::IfOp::create(b, loc, loop.getResultTypes(), runs,
                                  /*withElseRegion=*/true);
  loop->replaceAllUsesWith(branch);
  b.setInsertionPointToStart(branch.thenBlock());
  scf::YieldOp::create(b, loc, loop.getResults());
  loop->moveBefore(branch.thenYield());
  b.setInsertionPointToStart(branch.elseBlock());
  scf::YieldOp::create(b, loc, loop.getInitArgs());
}

} // namespace

void waitForWgmmaResults(scf::ForOp loop) {
  auto pending = loop->getAttrOfType<DenseI64ArrayAttr>(kWgmmaPendingAttr);
  loop->removeAttr(kWgmmaPendingAttr);
  Location loc = loop.getLoc();
  Operation *yield = loop.getBody()->getTerminator();
  OpBuilder b(loop->getContext());
  guardTrips(loop);
  // After the loop, before anything reads its results.
  b.setInsertionPointAfter(loop);
  SmallVector<Value> results;
  for (int64_t index : pending.asArrayRef())
    results.push_back(loop.getResult(index));
  waitForRegisters(b, loc, results, [](OpOperand &) { return true; });
  // In a branch that reads a dot's result on its way to the next iteration
  // (a persistent kernel's store of its tile): first in each of its regions
  // that reads them other than to yield them.
  llvm::MapVector<Region *, llvm::SetVector<Value>> readsInRegion;
  for (int64_t index : pending.asArrayRef()) {
    auto branch = yield->getOperand(index).getDefiningOp<scf::IfOp>();
    if (!branch)
      continue;
    unsigned at = cast<OpResult>(yield->getOperand(index)).getResultNumber();
    // The values that its regions yield there from before it (the dot's
    // result, not the restart's zeros made in the branch).
    SmallVector<Value> outside;
    for (Region &from : branch->getRegions())
      if (!from.empty())
        if (Value v = from.front().getTerminator()->getOperand(at);
            !branch->isAncestor(v.getParentBlock()->getParentOp()))
          outside.push_back(v);
    for (Region &region : branch->getRegions()) {
      if (region.empty())
        continue;
      Operation *terminator = region.front().getTerminator();
      for (Value dot : outside)
        if (llvm::any_of(dot.getUses(), [&](OpOperand &use) {
              return use.getOwner() != terminator &&
                     region.isAncestor(use.getOwner()->getParentRegion());
            }))
          readsInRegion[&region].insert(dot);
    }
  }
  for (auto &[region, dots] : readsInRegion) {
    b.setInsertionPointToStart(&region->front());
    waitForRegisters(b, loc, dots.getArrayRef(), [&](OpOperand &use) {
      return region->isAncestor(use.getOwner()->getParentRegion());
    });
  }
}

namespace {

bool isAsm(Operation *op, StringRef prefix) {
  auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op);
  return inlineAsm && inlineAsm.getAsmString().starts_with(prefix);
}

/// An op that only computes registers from registers: pure arithmetic, a
/// shuffle, asm without side effects, or the math intrinsics the lowering
/// calls (ex2.approx, div.full).
bool registersOnly(Operation *op) {
  if (op->getNumRegions() != 0)
    return false;
  if (auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op))
    return !inlineAsm.getHasSideEffects();
  if (auto intrinsic = dyn_cast<LLVM::CallIntrinsicOp>(op))
    return intrinsic.getIntrin().starts_with("llvm.nvvm.ex2.approx") ||
           intrinsic.getIntrin().starts_with("llvm.nvvm.div.full");
  return isMemoryEffectFree(op) || isa<NVVM::ShflOp>(op);
}

/// An op a wait and its readers may move below: one that only computes
/// registers, or another dot's wgmma issue.
bool waitMayPass(Operation *op) {
  return registersOnly(op) || isAsm(op, "wgmma.fence") ||
         isAsm(op, "wgmma.mma_async") || isAsm(op, "wgmma.commit_group");
}

/// Moves `wait` (the `wgmma.wait_group 0` right after a dot's commit) and the
/// movable ops that read it, directly or not, below the ops after it that it
/// may pass, up to the first one that must come after it; its N becomes the
/// number of commit groups it passed. It never passes a wgmma.fence whose
/// wgmma reads what the wait gives (registers written before a wgmma's fence
/// must stay there).
void deferWait(LLVM::InlineAsmOp wait) {
  llvm::SetVector<Operation *> group;
  group.insert(wait);
  auto readsGroup = [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getDefiningOp() && group.contains(v.getDefiningOp());
    });
  };
  // Where the last wgmma.fence passed was: the op before it (the wait when
  // none), the groups committed and the readers found by then.
  Operation *after = nullptr, *beforeFence = nullptr;
  unsigned commits = 0, commitsBeforeFence = 0;
  size_t groupBeforeFence = 0;
  for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
    if (readsGroup(op)) {
      if (registersOnly(op)) {
        group.insert(op);
        continue;
      }
      // Back above the fence; the readers found past it stay where they are.
      if (isAsm(op, "wgmma.mma_async") && beforeFence) {
        after = beforeFence == wait ? nullptr : beforeFence;
        commits = commitsBeforeFence;
        group.set_subtract(SmallVector<Operation *>(
            group.begin() + groupBeforeFence, group.end()));
      }
      break;
    }
    if (!waitMayPass(op))
      break;
    if (isAsm(op, "wgmma.fence")) {
      beforeFence = after ? after : wait.getOperation();
      commitsBeforeFence = commits;
      groupBeforeFence = group.size();
    }
    if (isAsm(op, "wgmma.commit_group"))
      ++commits;
    after = op;
  }
  if (!after)
    return;
  Operation *at = after;
  for (Operation *op : group) {
    op->moveAfter(at);
    at = op;
  }
  wait.setAsmString(wgmmaWait(commits));
}

} // namespace

void deferWgmmaWaits(Operation *root) {
  SmallVector<LLVM::InlineAsmOp> waits;
  std::string waitAll = wgmmaWait(0);
  root->walk([&](LLVM::InlineAsmOp op) {
    Operation *previous = op->getPrevNode();
    if (op.getAsmString() == waitAll && previous &&
        isAsm(previous, "wgmma.commit_group"))
      waits.push_back(op);
  });
  // Last first: a later dot's wait moves out of the way of an earlier one's.
  for (LLVM::InlineAsmOp wait : llvm::reverse(waits))
    deferWait(wait);
}

} // namespace tileopt::nvvm
