//===- NarrowIntegerTiles.cpp - i64 index tiles computed in i32 -----------===//
//
// Kernel formation computes index expressions (a causal mask's j - i <= 0,
// an arange) on i64 tiles, the type torch gives them; every element then
// takes two registers and two instructions. Upstream integer range analysis
// and its narrowing patterns compute them in i32 where every value provably
// fits. The tile ops declare their ranges (iota, program ids, shape ops);
// this pass adds what kernels promise: a 32-bit view's sizes, and an index
// argument with `tile.index_bitwidth = 32`, lie in [0, 2^31), which their
// launchers check, and a loop with a constant lower bound and step visits
// only the values that the step reaches. The same ranges turn scalar signed
// divisions of values that cannot be negative into unsigned ones.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlow/Utils.h"
#include "mlir/Analysis/DataFlowFramework.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tileopt::tile {
#define GEN_PASS_DEF_TILENARROWINTEGERTILES
#include "tileopt/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace tileopt::tile

using namespace mlir;
using namespace mlir::dataflow;
using namespace tileopt::tile;

namespace {

/// Whether kernel argument `arg` promises 32-bit indices.
bool promisesNarrowIndices(BlockArgument arg) {
  auto kernel = dyn_cast_if_present<KernelOp>(arg.getOwner()->getParentOp());
  if (!kernel || !arg.getOwner()->isEntryBlock())
    return false;
  auto bits = kernel.getArgAttrOfType<IntegerAttr>(
      arg.getArgNumber(), KernelOp::getIndexBitwidthAttrName());
  return bits && bits.getInt() == 32;
}

IntegerValueRange belowTwoTo31(Type type) {
  unsigned width = ConstantIntRanges::getStorageBitwidth(type);
  return IntegerValueRange(ConstantIntRanges::fromSigned(
      APInt(width, 0),
      APInt(width, std::numeric_limits<int32_t>::max(), /*isSigned=*/true)));
}

/// Upstream's integer range analysis with the promises of tile kernels.
class KernelRangeAnalysis : public IntegerRangeAnalysis {
public:
  using IntegerRangeAnalysis::IntegerRangeAnalysis;

  void setToEntryState(IntegerValueRangeLattice *lattice) override {
    auto arg = dyn_cast<BlockArgument>(lattice->getAnchor());
    if (arg && arg.getType().isIntOrIndex() && promisesNarrowIndices(arg))
      return propagateIfChanged(lattice,
                                lattice->join(belowTwoTo31(arg.getType())));
    IntegerRangeAnalysis::setToEntryState(lattice);
  }

  LogicalResult
  visitOperation(Operation *op,
                 ArrayRef<const IntegerValueRangeLattice *> operands,
                 ArrayRef<IntegerValueRangeLattice *> results) override {
    auto dim = dyn_cast<memref::DimOp>(op);
    auto view = dim ? dyn_cast<BlockArgument>(dim.getSource()) : nullptr;
    if (view && promisesNarrowIndices(view)) {
      propagateIfChanged(results[0], results[0]->join(belowTwoTo31(
                                         dim.getResult().getType())));
      return success();
    }
    return IntegerRangeAnalysis::visitOperation(op, operands, results);
  }

  /// `for %i = lb to ub step s` with constant lb and s > 0 reaches at most
  /// lb + s * floor((max(ub) - 1 - lb) / s), not max(ub) - 1.
  void
  visitNonControlFlowArguments(Operation *op, const RegionSuccessor &successor,
                               ArrayRef<IntegerValueRangeLattice *> argLattices,
                               unsigned firstIndex) override {
    auto loop = dyn_cast<scf::ForOp>(op);
    std::optional<int64_t> lb, step;
    if (loop) {
      lb = getConstantIntValue(loop.getLowerBound());
      step = getConstantIntValue(loop.getStep());
    }
    const IntegerValueRangeLattice *ub =
        loop ? getLatticeElementFor(getProgramPointBefore(loop.getBody()),
                                    loop.getUpperBound())
             : nullptr;
    if (!lb || !step || *step <= 0 || !ub || ub->getValue().isUninitialized())
      return IntegerRangeAnalysis::visitNonControlFlowArguments(
          op, successor, argLattices, firstIndex);
    Value iv = loop.getInductionVar();
    unsigned width = ConstantIntRanges::getStorageBitwidth(iv.getType());
    APInt last = ub->getValue().getValue().smax();
    APInt first(width, *lb, /*isSigned=*/true);
    if (last.sle(first))
      return; // no iteration
    // (last - 1 - first) / step * step + first, without overflow: last > first.
    APInt span =
        (last - 1 - first).udiv(APInt(width, *step)) * APInt(width, *step);
    IntegerValueRangeLattice *lattice = getLatticeElement(iv);
    propagateIfChanged(
        lattice, lattice->join(IntegerValueRange(
                     ConstantIntRanges::fromSigned(first, first + span))));
  }
};

/// Whether every value of `v` is the same number read in 32 bits, signed
/// (`isSigned`) or unsigned, as in its own width.
bool fits32(DataFlowSolver &solver, Value v, bool isSigned) {
  auto *lattice = solver.lookupState<IntegerValueRangeLattice>(v);
  if (!lattice || lattice->getValue().isUninitialized())
    return false;
  const ConstantIntRanges &range = lattice->getValue().getValue();
  unsigned width = range.smin().getBitWidth();
  if (width <= 32)
    return true;
  if (isSigned)
    return range.smin().getNumSignBits() > width - 32 &&
           range.smax().getNumSignBits() > width - 32;
  return range.umax().countLeadingZeros() >= width - 32;
}

/// Whether upstream's narrowing may compute `op` in 32 bits. It truncates the
/// operands of any op whose ranges fit either reading, but a signed op of
/// values that only fit unsigned (3e9 becomes negative), or an unsigned op of
/// values that only fit signed (-2 % 7 unsigned is 0 in i64 and 2 in i32),
/// computes another number; those must fit the reading the op makes.
bool narrowsSoundly(DataFlowSolver &solver, Operation *op) {
  std::optional<bool> isSigned;
  if (isa<arith::DivSIOp, arith::RemSIOp, arith::CeilDivSIOp,
          arith::FloorDivSIOp, arith::ShRSIOp, arith::MaxSIOp, arith::MinSIOp>(
          op))
    isSigned = true;
  else if (isa<arith::DivUIOp, arith::RemUIOp, arith::CeilDivUIOp,
               arith::ShRUIOp>(op))
    isSigned = false;
  else if (auto cmp = dyn_cast<arith::CmpIOp>(op))
    if (llvm::is_contained(
            {arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
             arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge},
            cmp.getPredicate()))
      isSigned = true;
  if (!isSigned)
    return true; // the same low bits, or the same order, either way
  auto fits = [&](Value v) { return fits32(solver, v, *isSigned); };
  return llvm::all_of(op->getOperands(), fits) &&
         llvm::all_of(op->getResults(), fits);
}

/// Forgets the ranges of erased values, whose storage new ones may reuse.
class ForgetErased : public RewriterBase::Listener {
public:
  explicit ForgetErased(DataFlowSolver &solver) : solver(solver) {}
  void notifyOperationErased(Operation *op) override {
    solver.eraseState(solver.getProgramPointAfter(op));
    for (Value result : op->getResults())
      solver.eraseState(result);
  }

private:
  DataFlowSolver &solver;
};

/// trunci(index_cast(x: index)) -> index_cast(x) to the narrow type (both
/// keep the low bits).
struct TruncateIndexCast : OpRewritePattern<arith::TruncIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncIOp trunc,
                                PatternRewriter &rewriter) const override {
    auto cast = trunc.getIn().getDefiningOp<arith::IndexCastOp>();
    if (!cast || !cast.getIn().getType().isIndex())
      return failure();
    rewriter.replaceOpWithNewOp<arith::IndexCastOp>(trunc, trunc.getType(),
                                                    cast.getIn());
    return success();
  }
};

struct TileNarrowIntegerTilesPass
    : tileopt::tile::impl::TileNarrowIntegerTilesBase<
          TileNarrowIntegerTilesPass> {
  void runOnOperation() override {
    for (KernelOp kernel : getOperation().getOps<KernelOp>())
      if (failed(narrow(kernel)))
        return signalPassFailure();
  }

  LogicalResult narrow(KernelOp kernel) {
    MLIRContext *ctx = &getContext();
    DataFlowSolver solver;
    loadBaselineAnalyses(solver);
    solver.load<KernelRangeAnalysis>();
    if (failed(solver.initializeAndRun(kernel)))
      return failure();
    // Only arith ops on integer tiles: scalar index arithmetic stays as the
    // GPU lowering reads it (divisors, bounds, 32-bit loops).
    SmallVector<Operation *> ops;
    kernel.walk([&](Operation *op) {
      auto integerTile = [](Type t) {
        auto tile = dyn_cast<RankedTensorType>(t);
        return tile && tile.getElementType().isInteger() &&
               !tile.getElementType().isInteger(1);
      };
      if (isa<arith::ArithDialect>(op->getDialect()) &&
          (llvm::any_of(op->getOperandTypes(), integerTile) ||
           llvm::any_of(op->getResultTypes(), integerTile)) &&
          narrowsSoundly(solver, op))
        ops.push_back(op);
    });
    RewritePatternSet narrowing(ctx);
    arith::populateIntRangeNarrowingPatterns(narrowing, solver, {32});
    // Bottom-up, as upstream's pass: a compare reads its operands' ranges.
    ForgetErased listener(solver);
    GreedyRewriteConfig config;
    config.setUseTopDownTraversal(false)
        .setStrictness(GreedyRewriteStrictness::ExistingOps)
        .setListener(&listener);
    if (failed(applyOpPatternsGreedily(ops, std::move(narrowing), config)))
      return failure();
    // Scalar signed divisions and remainders of values that cannot be
    // negative (a view's size over a block size) divide unsigned: LLVM then
    // shifts and masks by a power of two, where floordivsi needs a sign
    // fix-up of ten 64-bit instructions.
    SmallVector<Operation *> divisions;
    kernel.walk([&](Operation *op) {
      if (isa<arith::DivSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp,
              arith::RemSIOp>(op) &&
          op->getResult(0).getType().isIntOrIndex())
        divisions.push_back(op);
    });
    RewritePatternSet unsignedDivisions(ctx);
    arith::populateUnsignedWhenEquivalentPatterns(unsignedDivisions, solver);
    if (failed(applyOpPatternsGreedily(divisions, std::move(unsignedDivisions),
                                       config)))
      return failure();
    // The truncations the narrowing left meet the extensions they undo,
    // moved up through shape ops (the tile dialect's canonicalization).
    RewritePatternSet cleanup(ctx);
    cleanup.add<TruncateIndexCast>(ctx);
    ctx->getLoadedDialect<TileDialect>()->getCanonicalizationPatterns(cleanup);
    arith::TruncIOp::getCanonicalizationPatterns(cleanup, ctx);
    arith::ExtSIOp::getCanonicalizationPatterns(cleanup, ctx);
    return applyPatternsGreedily(kernel, std::move(cleanup));
  }
};

} // namespace
