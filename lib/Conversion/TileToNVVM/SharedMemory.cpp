//===- SharedMemory.cpp - shared memory sizing and cp.async ---------------===//
//
// How much shared memory each op stages its tiles in, where in the kernel's
// shared memory it goes (planSharedMemory), and which loads feeding
// tensor-core dots copy into it with cp.async.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

int64_t scratchBytes(Operation *op, const LoweringState &state) {
  auto bytesOf = [](RankedTensorType t, int64_t pad) {
    return paddedElements(t.getShape(), pad) * storageBits(t.getElementType()) /
           8;
  };
  if (isa<ConvertLayoutOp, ReshapeOp>(op)) {
    auto from = cast<RankedTensorType>(op->getOperand(0).getType());
    if (isSingleElement(from) ||
        registersInPlace(from,
                         cast<RankedTensorType>(op->getResult(0).getType())))
      return 0;
  }
  if (auto convert = dyn_cast<ConvertLayoutOp>(op)) {
    RankedTensorType t = convert.getSource().getType();
    return restageBytes(t, convert.getResult().getType(),
                        stagingLayout(convert, state));
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    // A copied load's reshape moves nothing: the dot reads the copy.
    if (state.asyncCopies.contains(reshape.getSource().getDefiningOp()))
      return 0;
    return bytesOf(reshape.getSource().getType(), 0);
  }
  // The scalar fallback of a load or store (see scalarFallbackTile); none
  // for a load that copies into a dot's staging area.
  if (state.asyncCopies.contains(op))
    return 0;
  if (auto it = state.accesses.find(op);
      it != state.accesses.end() && it->second.fallback)
    return it->second.scalarAddStaging
               ? scalarAddStagingBytes(cast<StoreOp>(op), it->second)
               : fallbackStagingBytes(it->second.fallback);
  if (auto dot = dyn_cast<DotOp>(op)) {
    RankedTensorType l = dot.getLhs().getType(), r = dot.getRhs().getType();
    // A borrowed rhs lies in its owner's area: this one ends at its own.
    bool ownRhs = !(borrowedOperands(dot) & 2);
    if (usesWgmma(dot, state)) {
      StagedOperand b = stagedOperand(dot, 1, /*wgmma=*/true);
      return wgmmaOperandOffset(dot, 1) +
             (ownRhs ? wgmmaOperandBytes(b.rows, b.rowBytes) : 0);
    }
    if (isa<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return mmaOperandOffset(dot, 1) + (ownRhs ? bytesOf(r, 0) : 0);
    int64_t pad = smemPad(l.getElementType());
    return llvm::alignTo(bytesOf(l, pad), 16) + bytesOf(r, pad);
  }
  // The old value, from the thread that adds to every thread.
  if (isa<memref::AtomicRMWOp>(op) && op->getParentOfType<KernelOp>())
    return 4;
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    auto in = cast<RankedTensorType>(reduce.getOperands()[0].getType());
    if (!isa_and_present<BlockedLayoutAttr, MmaLayoutAttr>(in.getEncoding()))
      return 0;
    int64_t axis = reduce.getAxis();
    int64_t warps = warpsAlong(in.getEncoding(), axis).count;
    if (warps == 1)
      return 0;
    int64_t resultElems = in.getNumElements() / in.getDimSize(axis);
    int64_t bytes = 0;
    for (Value operand : reduce.getOperands())
      bytes += llvm::alignTo(
          warps * resultElems *
              storageBits(
                  cast<RankedTensorType>(operand.getType()).getElementType()) /
              8,
          16);
    return bytes;
  }
  return 0;
}

bool hasZeroPadding(LoadOp load) {
  Attribute padding = load.getPaddingOrZero();
  return matchPattern(padding, m_Zero()) ||
         matchPattern(padding, m_AnyZeroFloat());
}

bool isAsyncCopyable(LoadOp load, const AccessFacts &facts, int64_t dim) {
  RankedTensorType tile = load.getResult().getType();
  return facts.aligned && !facts.fallback && facts.plan.dim == dim &&
         facts.plan.elems * storageBits(tile.getElementType()) == 128 &&
         hasZeroPadding(load);
}

namespace {

/// A load that may copy straight into a dot's operand staging area.
struct CopyCandidate {
  LoadOp load;
  unsigned operand;
  bool tmaOnly;
  bool ringOnly;
  /// What moves no data between: a transpose of the operand's dimensions,
  /// and a reshape that drops the load's leading unit dimensions.
  PermuteOp permute;
  ReshapeOp reshape;
};

/// Whether `op` has one use, in `block`.
bool usedOnceIn(Operation *op, Block *block) {
  return op->hasOneUse() && op->getBlock() == block;
}

/// The load that a dot's `operand` comes straight from, in the dot's block
/// and used only there: the operand's definition, or that through a
/// transpose (a K-major B, as attention's k^T), and through a reshape that
/// only drops leading unit dimensions (one matrix of a batch).
std::optional<CopyCandidate> operandLoad(DotOp dot, unsigned operand) {
  Block *block = dot->getBlock();
  Value value = dot->getOperand(operand);
  auto permute = value.getDefiningOp<PermuteOp>();
  if (permute) {
    if (!usedOnceIn(permute, block))
      return std::nullopt;
    value = permute.getSource();
  }
  auto reshape = value.getDefiningOp<ReshapeOp>();
  if (reshape) {
    ArrayRef<int64_t> from = reshape.getSource().getType().getShape();
    ArrayRef<int64_t> to = reshape.getResult().getType().getShape();
    if (!usedOnceIn(reshape, block) || from.size() < to.size() ||
        from.take_back(to.size()) != to ||
        llvm::any_of(from.drop_back(to.size()),
                     [](int64_t size) { return size != 1; }))
      return std::nullopt;
    value = reshape.getSource();
  }
  auto load = value.getDefiningOp<LoadOp>();
  if (!load || !usedOnceIn(load, block))
    return std::nullopt;
  return CopyCandidate{load, operand, false, false, permute, reshape};
}

/// The load that a dot's `operand` comes straight from where several dots
/// of a loop's body read it as that operand (and nothing else reads it),
/// each from a staging area laid out alike, and the first of those dots,
/// which owns its copy (kBorrowedOperandsAttr).
std::optional<std::pair<LoadOp, DotOp>>
sharedOperandLoad(DotOp dot, unsigned operand, const LoweringState &state) {
  auto load = dot->getOperand(operand).getDefiningOp<LoadOp>();
  if (!load || load->hasOneUse() || load->getBlock() != dot->getBlock() ||
      !isa<scf::ForOp>(load->getParentOp()))
    return std::nullopt;
  bool wgmma = usesWgmma(dot, state);
  StagedOperand staged = stagedOperand(dot, operand, wgmma);
  DotOp owner;
  for (OpOperand &use : load->getUses()) {
    auto user = dyn_cast<DotOp>(use.getOwner());
    if (!user || use.getOperandNumber() != operand ||
        user->getBlock() != dot->getBlock() ||
        !isa_and_present<MmaLayoutAttr>(getLayout(user.getAcc().getType())) ||
        usesWgmma(user, state) != wgmma ||
        (operand == 0 && (lhsInRegisters(user) || lhsHoisted(user))))
      return std::nullopt;
    if (!(stagedOperand(user, operand, wgmma) == staged))
      return std::nullopt;
    if (!owner || user->isBeforeInBlock(owner))
      owner = user;
  }
  return std::pair(load, owner);
}

} // namespace

void planAsyncCopies(KernelOp kernel, LoweringState &state) {
  kernel.walk([&](DotOp dot) {
    if (!isa_and_present<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return;
    bool wgmma = usesWgmma(dot, state);
    // tf32 wgmma's B is staged transposed: one element per copy.
    bool elementWiseB = getMmaK(dot) == 8 && wgmma;
    // The operands' loads that may copy: with cp.async, or only with TMA
    // (in a TMA pipeline, else demotePipelineOnlyCopies takes them back).
    SmallVector<CopyCandidate> candidates;
    unsigned borrowed = 0;
    for (unsigned operand = 0; operand < 2; ++operand) {
      std::optional<CopyCandidate> candidate = operandLoad(dot, operand);
      // A load that several dots read: the first copies it (by cp.async,
      // so that it stays a copy wherever the loop is pipelined), the others
      // borrow what it copied.
      bool shared = false;
      if (auto load = sharedOperandLoad(dot, operand, state)) {
        if (load->second != dot) {
          auto copy = state.asyncCopies.find(load->first);
          if (copy != state.asyncCopies.end() &&
              copy->second.dot == load->second)
            borrowed |= 1u << operand;
          continue;
        }
        shared = true;
        candidate = CopyCandidate{load->first, operand, false, true, {}, {}};
      }
      if (!candidate)
        continue;
      LoadOp load = candidate->load;
      if (state.accesses[load].barrierBefore)
        continue; // waits for stores to its view: not ahead of time
      if (operand == 1 && elementWiseB) {
        if (hasZeroPadding(load))
          candidates.push_back(*candidate);
        continue;
      }
      // Runs along the staged rows: a transposed rhs's go along K (the
      // load's other dimension if a transpose comes between).
      int64_t dim = stagedOperand(dot, operand, wgmma).transposed ? 0 : 1;
      if (candidate->permute)
        dim = 1 - dim;
      int64_t unitDims = load.getResult().getType().getRank() - 2;
      if (isAsyncCopyable(load, state.accesses[load], dim + unitDims))
        candidates.push_back(*candidate);
      else if (!shared && !candidate->permute && !candidate->reshape &&
               isTmaCopyable(load, AsyncCopy{dot, operand}, state))
        candidates.push_back({load, operand, true, false, {}, {}});
    }
    SmallVector<CopyCandidate> copies;
    for (const CopyCandidate &c : candidates) {
      bool clobbered = false;
      for (Operation *op = c.load->getNextNode(); op != dot && !clobbered;
           op = op->getNextNode())
        clobbered =
            op->walk([&](Operation *nested) {
                bool candidate =
                    llvm::any_of(candidates, [&](const CopyCandidate &other) {
                      return other.load == nested || other.permute == nested ||
                             other.reshape == nested;
                    });
                return !candidate && scratchBytes(nested, state) > 0
                           ? WalkResult::interrupt()
                           : WalkResult::advance();
              }).wasInterrupted();
      // In a loop, a software pipeline may yet keep the copy apart from
      // what uses shared memory between (demotePipelineOnlyCopies).
      if (clobbered && !isa<scf::ForOp>(c.load->getParentOp()))
        continue;
      copies.push_back(c);
      copies.back().ringOnly |= clobbered;
    }
    if (borrowed) {
      setBorrowedOperands(dot, borrowed);
      state.asyncOperands[dot] |= borrowed;
    }
    if (copies.empty())
      return;
    llvm::sort(copies, [](const CopyCandidate &a, const CopyCandidate &b) {
      return a.load->isBeforeInBlock(b.load);
    });
    unsigned mask = 0;
    for (auto [i, copy] : llvm::enumerate(copies)) {
      AsyncCopy &async = state.asyncCopies[copy.load];
      async.dot = dot;
      async.operand = copy.operand;
      async.tmaOnly = copy.tmaOnly;
      async.ringOnly = copy.ringOnly;
      async.elementWise = elementWiseB && async.operand == 1;
      async.unitDims = copy.load.getResult().getType().getRank() - 2;
      async.transposed = bool(copy.permute);
      async.barrier = i == 0;
      mask |= 1u << async.operand;
    }
    state.asyncOperands[dot] |= mask;
  });
}

void demotePipelineOnlyCopies(KernelOp kernel,
                              const DenseSet<Operation *> &tmaLoads,
                              const DenseSet<Operation *> &pipelinedLoads,
                              LoweringState &state) {
  DenseSet<Operation *> dots;
  kernel.walk([&](LoadOp load) {
    auto it = state.asyncCopies.find(load);
    if (it == state.asyncCopies.end() ||
        !((it->second.tmaOnly && !tmaLoads.contains(load)) ||
          (it->second.ringOnly && !pipelinedLoads.contains(load))))
      return;
    unsigned bit = 1u << it->second.operand;
    state.asyncOperands[it->second.dot] &= ~bit;
    dots.insert(it->second.dot);
    state.asyncCopies.erase(it);
    // The dots that borrowed the copy stage the operand themselves.
    for (Operation *user : load->getUsers())
      if (auto dot = dyn_cast<DotOp>(user);
          dot && (borrowedOperands(dot) & bit)) {
        setBorrowedOperands(dot, borrowedOperands(dot) & ~bit);
        state.asyncOperands[dot] &= ~bit;
        dots.insert(dot);
      }
  });
  // The first copy left before each dot waits for the shared memory.
  for (Operation *dot : dots) {
    LoadOp first;
    for (Value operand : dot->getOperands().take_front(2))
      if (auto load = operand.getDefiningOp<LoadOp>();
          load && state.asyncCopies.contains(load) &&
          (!first || load->isBeforeInBlock(first)))
        first = load;
    if (first)
      state.asyncCopies[first].barrier = true;
  }
}

SharedMemoryPlan
planSharedMemory(KernelOp kernel,
                 const llvm::DenseMap<Operation *, unsigned> &ringSlots,
                 const LoweringState &state) {
  // Each op's scratch, and the ops that use shared memory in program order.
  SmallVector<std::pair<Operation *, int64_t>> users;
  bool wgmma = false;
  kernel.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto dot = dyn_cast<DotOp>(op))
      wgmma |= usesWgmma(dot, state);
    int64_t bytes = scratchBytes(op, state);
    auto copy = state.asyncCopies.find(op);
    if (bytes || (copy != state.asyncCopies.end() && !copy->second.prefetched))
      users.push_back({op, bytes});
  });
  // wgmma's swizzled operands want 1024-byte alignment; 128 keeps the others'
  // vectors and rows aligned.
  int64_t align = wgmma ? 1024 : 128;
  SharedMemoryPlan plan;
  // The first user of shared memory, outside loops, needs no barrier first.
  if (!users.empty() &&
      !users.front().first->getParentOfType<LoopLikeOpInterface>())
    plan.firstUser = users.front().first;

  // The rings first, outer loops before inner ones: each dot's slot is its
  // staging area, `ringSlots[dot]` of them after the rings of the loops
  // around.
  llvm::DenseMap<Operation *, int64_t> ringBytes; // per pipelined loop
  auto reservedAround = [&](Operation *op) {
    int64_t bytes = 0;
    for (Operation *p = op->getParentOp(); p && p != kernel;
         p = p->getParentOp())
      bytes += ringBytes.lookup(p);
    return bytes;
  };
  llvm::DenseMap<Operation *, int64_t> scratch(users.begin(), users.end());
  kernel.walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
    int64_t start = reservedAround(loop), at = start;
    DotOp mbarrierDot; // the first TMA dot: one mbarrier per slot, last (so
                       // that nothing aligned loses bytes to them)
    for (auto dot : loop.getBody()->getOps<DotOp>()) {
      unsigned slots = ringSlots.lookup(dot);
      if (!slots)
        continue;
      int64_t slotBytes = llvm::alignTo(scratch.lookup(dot), align);
      at = llvm::alignTo(at, align);
      plan.placements[dot] = {at, slotBytes};
      at += slots * slotBytes;
      if (state.tmaDots.contains(dot) && !mbarrierDot)
        mbarrierDot = dot;
    }
    // Loop-invariant lhs staged once, before the loop (lhsHoisted).
    for (auto dot : loop.getBody()->getOps<DotOp>()) {
      if (!lhsHoisted(dot))
        continue;
      at = llvm::alignTo(at, align);
      plan.placements[dot].lhsOffset = at;
      at += hoistedLhsBytes(dot, usesWgmma(dot, state));
    }
    if (mbarrierDot) {
      ScratchPlacement &place = plan.placements[mbarrierDot];
      place.slots = ringSlots.lookup(mbarrierDot);
      place.mbarrierOffset = at;
      // A producer warp's ring has an "empty" mbarrier per slot too.
      at +=
          place.slots * (state.specializedDots.contains(mbarrierDot) ? 16 : 8);
    }
    ringBytes[loop] = at - start;
    plan.bytes = std::max(plan.bytes, at);
  });
  // A hoisted lhs that no earlier op read shared memory before: only async
  // copies (which write rings of their own) came before its loop, and no
  // loop around it runs the loop again after its dot read.
  bool readBefore = false;
  DenseSet<Operation *> entered;
  for (auto [op, bytes] : users) {
    for (Operation *p = op->getParentOp(); p != kernel; p = p->getParentOp())
      if (auto loop = dyn_cast<scf::ForOp>(p);
          loop && entered.insert(loop).second && !readBefore &&
          !loop->getParentOfType<LoopLikeOpInterface>())
        for (DotOp dot : loop.getBody()->getOps<DotOp>())
          if (lhsHoisted(dot))
            plan.placements[dot].lhsUnread = true;
    readBefore |= !state.asyncCopies.contains(op);
  }
  // A hoisted lhs that an earlier sibling loop staged at the same place
  // (attention's loops over masked and over whole blocks read one q) stays
  // there if nothing between the loops uses shared memory but copies into
  // this loop's rings (which lie below it).
  DenseSet<Operation *> usesShared; // the users and the ops around them
  for (auto [op, bytes] : users)
    for (Operation *p = op; p != kernel; p = p->getParentOp())
      usesShared.insert(p);
  kernel.walk([&](scf::ForOp loop) {
    for (DotOp dot : loop.getBody()->getOps<DotOp>()) {
      if (!lhsHoisted(dot))
        continue;
      ScratchPlacement &place = plan.placements[dot];
      auto sameStaging = [&](DotOp other) {
        return lhsHoisted(other) && other.getLhs() == dot.getLhs() &&
               plan.placements.lookup(other).lhsOffset == place.lhsOffset &&
               usesWgmma(other, state) == usesWgmma(dot, state);
      };
      for (Operation *prev = loop->getPrevNode(); prev;
           prev = prev->getPrevNode()) {
        if (auto earlier = dyn_cast<scf::ForOp>(prev);
            earlier &&
            llvm::any_of(earlier.getBody()->getOps<DotOp>(), sameStaging)) {
          place.lhsStaged = true;
          break;
        }
        auto copy = state.asyncCopies.find(prev);
        if (usesShared.contains(prev) &&
            !(copy != state.asyncCopies.end() &&
              copy->second.dot->getParentOp() == loop))
          break;
      }
    }
  });
  // Everything else is live only while it runs: after the rings around it
  // (128-byte aligned but a wgmma dot's staging).
  for (auto [op, bytes] : users) {
    if (!bytes || ringSlots.contains(op))
      continue;
    int64_t at =
        llvm::alignTo(reservedAround(op), isa<DotOp>(op) ? align : 128);
    if (at)
      plan.placements[op].offset = at;
    plan.bytes = std::max(plan.bytes, at + bytes);
  }
  return plan;
}

} // namespace tileopt::nvvm
