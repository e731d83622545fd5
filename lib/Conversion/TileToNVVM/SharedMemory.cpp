//===- SharedMemory.cpp - shared memory sizing and cp.async ---------------===//
//
// How much shared memory each op stages its tiles in (a kernel reserves the
// most any of its ops needs), and which loads feeding tensor-core dots copy
// into it with cp.async.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

int64_t scratchBytes(Operation *op, const LoweringState &state) {
  auto bytesOf = [](RankedTensorType t, int64_t pad) {
    return paddedElements(t.getShape(), pad) * storageBits(t.getElementType()) /
           8;
  };
  if (auto convert = dyn_cast<ConvertLayoutOp>(op)) {
    RankedTensorType t = convert.getSource().getType();
    return bytesOf(t, smemPad(t.getElementType()));
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return bytesOf(reshape.getSource().getType(), 0);
  // The scalar fallback of a load or store (see scalarFallbackTile).
  if (auto it = state.accesses.find(op);
      it != state.accesses.end() && it->second.fallback)
    return fallbackStagingBytes(it->second.fallback);
  if (auto dot = dyn_cast<DotOp>(op)) {
    RankedTensorType l = dot.getLhs().getType(), r = dot.getRhs().getType();
    if (usesWgmma(dot, state))
      return wgmmaOperandOffset(dot, 1) +
             wgmmaOperandBytes(r.getDimSize(0), r.getDimSize(1) * 2);
    if (isa<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return mmaOperandOffset(dot, 1) + bytesOf(r, kMmaSmemPad);
    int64_t pad = smemPad(l.getElementType());
    return llvm::alignTo(bytesOf(l, pad), 16) + bytesOf(r, pad);
  }
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    auto in = cast<RankedTensorType>(reduce.getOperands()[0].getType());
    auto blocked = dyn_cast_if_present<BlockedLayoutAttr>(in.getEncoding());
    if (!blocked)
      return 0;
    int64_t axis = reduce.getAxis();
    int64_t resultElems = in.getNumElements() / in.getDimSize(axis);
    int64_t bytes = 0;
    for (Value operand : reduce.getOperands())
      bytes += llvm::alignTo(
          blocked.getWarpsPerCTA()[axis] * resultElems *
              storageBits(
                  cast<RankedTensorType>(operand.getType()).getElementType()) /
              8,
          16);
    return bytes;
  }
  return 0;
}

void planAsyncCopies(KernelOp kernel, LoweringState &state) {
  kernel.walk([&](DotOp dot) {
    if (!isa_and_present<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return;
    SmallVector<std::pair<LoadOp, unsigned>> copies;
    for (unsigned operand = 0; operand < 2; ++operand) {
      auto load = dot->getOperand(operand).getDefiningOp<LoadOp>();
      if (!load || !load->hasOneUse() || load->getBlock() != dot->getBlock())
        continue;
      const AccessFacts &facts = state.accesses[load];
      RankedTensorType tile = load.getResult().getType();
      auto padding = dyn_cast<FloatAttr>(load.getPaddingOrZero());
      if (!facts.aligned || !facts.wholeRuns || facts.fallback ||
          facts.plan.dim != 1 ||
          facts.plan.elems * storageBits(tile.getElementType()) != 128 ||
          !padding || !padding.getValue().isZero())
        continue;
      bool clobbered = false;
      for (Operation *op = load->getNextNode(); op != dot && !clobbered;
           op = op->getNextNode())
        clobbered = op->walk([&](Operation *nested) {
                        return scratchBytes(nested, state) > 0
                                   ? WalkResult::interrupt()
                                   : WalkResult::advance();
                      }).wasInterrupted();
      if (!clobbered)
        copies.push_back({load, operand});
    }
    if (copies.empty())
      return;
    llvm::sort(copies, [](auto &a, auto &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    unsigned mask = 0;
    for (auto [i, copy] : llvm::enumerate(copies)) {
      state.asyncCopies[copy.first] = {dot, copy.second, /*barrier=*/i == 0};
      mask |= 1u << copy.second;
    }
    state.asyncOperands[dot] = mask;
  });
}

} // namespace tileopt::nvvm
