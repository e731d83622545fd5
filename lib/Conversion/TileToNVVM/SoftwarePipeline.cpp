//===- SoftwarePipeline.cpp - software pipelining of loops feeding dots ---===//
//
// A loop whose body copies the operands of a tensor-core dot straight into
// shared memory with cp.async (planAsyncCopies) keeps the copies of its next
// `stages - 1` iterations in flight while the dot of the current one runs,
// as Triton's multi-buffered cp.async pipeline does: the dot's staging area
// becomes a ring of slots, and
//
//   prologue: for i in [0, stages - 1): copy iteration i into slot i; commit
//   loop:     wait until iteration k's copies landed (wait_group stages - 2);
//             barrier (every warp is done with slot k - 1);
//             copy iteration k + stages - 1 into slot k - 1; commit;
//             dot on slot k
//   after:    wait_group 0
//
// with `stages` slots. mma.sync dots read their slot into registers
// (ldmatrix) while they run, so with them the refill moves behind the dots
// and into their own slot, and the ring keeps `stages - 1` slots, as
// Triton's sm_80 pipeline does:
//
//   loop:     wait_group stages - 2; barrier; dot on slot k;
//             barrier (every warp is done with slot k);
//             copy iteration k + stages - 1 into slot k; commit
//
// On sm_90a wgmma dots that only accumulate into the loop's values (one
// each) do not wait for their own MMAs (wgmma.wait_group 1 for a lone dot,
// as Triton's pipelined wgmma; N for N dots): they run while the next
// iteration waits, refills and issues. The slot they read is then free
// only after the next iteration's barrier, so the copies run `stages - 2`
// iterations ahead (wait_group stages - 3, refill slot k - 2), and after
// the loop a wgmma.wait_group 0 takes the accumulators
// (waitForWgmmaResults).
//
// With warp specialisation (warpSpecializeLoop), a TMA pipeline's copies
// come from a producer warp instead, in a warpgroup after the kernel's warps:
//
//   producer: for k: wait until slot k's "empty" mbarrier says the
//             consumers left it; copy iteration k into slot k
//   consumers: for k: wait for slot k's "full" mbarrier; dots on slot k;
//             arrive on the "empty" mbarrier of the slot the dots left
//
// so the consumers' loop passes no barrier and issues no copy.
//
// Copies of iterations past the loop's end are predicated off (cp.async of
// zero bytes). This runs on tile IR before the conversion: the copies of
// future iterations are clones of the loop body's loads and of the index
// arithmetic they need, with the induction variable shifted; the conversion
// lowers them (LoadLowering) into the slot that AsyncCopy names, and the
// body's own loads, whose data the prefetches brought, to nothing.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

namespace {

/// The values that `op` reads: its operands and those that ops in its
/// regions read from outside it.
SmallVector<Value> inputsOf(Operation *op) {
  SmallVector<Value> inputs(op->getOperands());
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  llvm::append_range(inputs, captured);
  return inputs;
}

/// Whether `op` can run again for another iteration: it has no memory
/// effects, and neither it nor an op in its regions (an scf.if that picks a
/// scalar, say) yields a tile.
bool isRecomputable(Operation *op) {
  return isMemoryEffectFree(op) &&
         !op->walk([](Operation *inner) {
              return llvm::any_of(inner->getResultTypes(),
                                  llvm::IsaPred<ShapedType>)
                         ? WalkResult::interrupt()
                         : WalkResult::advance();
            }).wasInterrupted();
}

/// The ops of `block` that the values of `worklist` depend on through ops
/// of `block`, in block order; failure when one of them cannot be computed
/// again (isRecomputable), or `refuse` says so of a block argument they
/// reach.
FailureOr<SmallVector<Operation *>>
recomputableSlice(Block *block, SmallVector<Value> worklist,
                  function_ref<bool(BlockArgument)> refuse) {
  llvm::SetVector<Operation *> slice;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      if (refuse(arg))
        return failure();
      continue;
    }
    Operation *def = value.getDefiningOp();
    if (def->getBlock() != block || slice.contains(def))
      continue;
    if (!isRecomputable(def))
      return failure();
    slice.insert(def);
    llvm::append_range(worklist, inputsOf(def));
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Moves each scalar that an scf.if of `loop`'s body yields, where the
/// branch cannot run again (it stores, say) but the ops that compute the
/// scalar in each of its blocks can, into an scf.if of its own before it.
/// Canonicalization merges the branches on one condition, so a persistent
/// kernel that moves to its next tile where it stores the last one yields
/// its next position from the storing branch; the copies of the next
/// iterations can then compute it.
void splitBranchScalars(scf::ForOp loop) {
  IRRewriter b(loop.getContext());
  auto noArgument = [](BlockArgument) { return false; };
  for (auto branch :
       llvm::make_early_inc_range(loop.getBody()->getOps<scf::IfOp>())) {
    if (isRecomputable(branch))
      continue;
    for (OpResult result : branch->getResults()) {
      if (isa<ShapedType>(result.getType()) || result.use_empty())
        continue;
      unsigned i = result.getResultNumber();
      Value thenValue = branch.thenYield().getOperand(i);
      Value elseValue = branch.elseYield().getOperand(i);
      FailureOr<SmallVector<Operation *>> thenOps =
          recomputableSlice(branch.thenBlock(), {thenValue}, noArgument);
      FailureOr<SmallVector<Operation *>> elseOps =
          recomputableSlice(branch.elseBlock(), {elseValue}, noArgument);
      if (failed(thenOps) || failed(elseOps))
        continue;
      b.setInsertionPoint(branch);
      auto scalar = scf::IfOp::create(b, branch.getLoc(), result.getType(),
                                      branch.getCondition(),
                                      /*withElseRegion=*/true);
      auto fill = [&](Block *block, ArrayRef<Operation *> ops, Value value) {
        b.setInsertionPointToEnd(block);
        IRMapping map;
        for (Operation *op : ops)
          b.clone(*op, map);
        scf::YieldOp::create(b, branch.getLoc(), map.lookupOrDefault(value));
      };
      fill(scalar.thenBlock(), *thenOps, thenValue);
      fill(scalar.elseBlock(), *elseOps, elseValue);
      result.replaceAllUsesWith(scalar.getResult(0));
    }
  }
}

/// What the copies of a pipelined loop's iteration need: the ops of its
/// body that their offsets depend on, in body order, and the loop-carried
/// scalars that those ops read besides the induction variable (a persistent
/// kernel's tile position and k offset, say), whose next values the slice
/// computes too. A copy of another iteration runs the ops on that
/// iteration's induction variable and carried scalars.
struct AddressSlice {
  SmallVector<Operation *> ops;
  SmallVector<unsigned> carried; // iteration argument numbers, ascending
};

/// The address slice of `loop`'s `loads`; failure when an op of it cannot
/// be recomputed for another iteration (isRecomputable) or it depends on a
/// loop-carried tile.
FailureOr<AddressSlice> addressSlice(scf::ForOp loop, ArrayRef<LoadOp> loads) {
  Block *body = loop.getBody();
  Operation *yield = body->getTerminator();
  llvm::SmallSetVector<unsigned, 4> carried;
  // The carried scalars that the offsets read, then those their next values
  // read, until no new one comes.
  for (size_t known = SIZE_MAX; known != carried.size();) {
    known = carried.size();
    SmallVector<Value> operands;
    for (LoadOp load : loads)
      llvm::append_range(operands, load->getOperands());
    for (unsigned i : carried)
      operands.push_back(yield->getOperand(i));
    FailureOr<SmallVector<Operation *>> ops =
        recomputableSlice(body, operands, [&](BlockArgument arg) {
          if (arg.getOwner() != body || arg == loop.getInductionVar())
            return false;
          carried.insert(arg.getArgNumber() - 1);
          return isa<ShapedType>(arg.getType());
        });
    if (failed(ops))
      return failure();
    if (known == carried.size()) {
      SmallVector<unsigned> sorted(carried.begin(), carried.end());
      llvm::sort(sorted);
      return AddressSlice{std::move(*ops), std::move(sorted)};
    }
  }
  llvm_unreachable("the loop above returns");
}

/// Clones `slice` of `loop` at `b` for the iteration whose induction
/// variable is `iv` and whose carried scalars are `scalars`, into `map`;
/// returns the carried scalars of the iteration after it.
SmallVector<Value> cloneForIteration(OpBuilder &b, scf::ForOp loop,
                                     const AddressSlice &slice, Value iv,
                                     ValueRange scalars, IRMapping &map) {
  map.map(loop.getInductionVar(), iv);
  for (auto [i, value] : llvm::zip_equal(slice.carried, scalars))
    map.map(loop.getRegionIterArgs()[i], value);
  for (Operation *op : slice.ops)
    b.clone(*op, map);
  Operation *yield = loop.getBody()->getTerminator();
  return llvm::map_to_vector(slice.carried, [&](unsigned i) {
    return map.lookupOrDefault(yield->getOperand(i));
  });
}

/// The initial values of `slice`'s carried scalars.
SmallVector<Value> initialState(scf::ForOp loop, const AddressSlice &slice) {
  return llvm::map_to_vector(slice.carried,
                             [&](unsigned i) { return loop.getInitArgs()[i]; });
}

/// Whether `loop`'s body may write memory that `loads` read: a prefetched
/// load would then read it before the iterations that write it ran. Stores
/// and atomic adds through other view arguments are not ordered against the
/// loads (docs/kernel-abi.md), as a persistent matmul's of its output tiles
/// or a stream-K matmul's of its parts and counters.
bool writesLoadedMemory(scf::ForOp loop, ArrayRef<LoadOp> loads) {
  auto argument = [](Value view) -> Value {
    auto arg = dyn_cast<BlockArgument>(viewRoot(view));
    return arg && isa_and_present<KernelOp>(arg.getOwner()->getParentOp())
               ? arg
               : Value();
  };
  auto readByLoads = [&](Value view) {
    Value root = argument(view);
    return !root || llvm::any_of(loads, [&](LoadOp load) {
      Value loaded = argument(load.getView());
      return !loaded || loaded == root;
    });
  };
  return loop.getBody()
      ->walk([&](Operation *op) {
        // Ops with regions are judged by the ops inside.
        if (isa<scf::YieldOp>(op) ||
            op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
            !mightHaveEffect<MemoryEffects::Write>(op))
          return WalkResult::advance();
        Value written;
        if (auto store = dyn_cast<StoreOp>(op))
          written = store.getView();
        else if (auto element = dyn_cast<memref::StoreOp>(op))
          written = element.getMemref();
        else if (auto atomic = dyn_cast<memref::AtomicRMWOp>(op))
          written = atomic.getMemref();
        return written && !readByLoads(written) ? WalkResult::advance()
                                                : WalkResult::interrupt();
      })
      .wasInterrupted();
}

/// The index of `loop`'s result that `dot` alone accumulates into (its acc
/// is that iteration argument, read by nothing else), if its accumulator is
/// f32 or i32 (in place: not f16 pairs repacked between MMAs): its result is
/// yielded there, or goes there through a branch of the
/// body (which may store it and restart it from zeros, as a persistent
/// kernel's, and reads it only inside). Then nothing but the next dot and
/// the branch, which waits first (waitForWgmmaResults), reads the registers
/// a still running wgmma writes.
std::optional<unsigned> accumulatedResult(scf::ForOp loop, DotOp dot) {
  auto arg = dyn_cast<BlockArgument>(dot.getAcc());
  Type acc = dot.getAcc().getType().getElementType();
  if (!(acc.isF32() || acc.isInteger(32)) || !arg ||
      arg.getOwner() != loop.getBody() || arg == loop.getInductionVar() ||
      !arg.hasOneUse())
    return std::nullopt;
  unsigned index = arg.getArgNumber() - 1;
  Value next = loop.getBody()->getTerminator()->getOperand(index);
  if (next == dot.getResult())
    return dot->hasOneUse() ? std::optional(index) : std::nullopt;
  auto branch = next.getDefiningOp<scf::IfOp>();
  if (!branch || branch->getBlock() != loop.getBody() ||
      llvm::any_of(dot->getUsers(), [&](Operation *user) {
        return !branch->isProperAncestor(user);
      }))
    return std::nullopt;
  return index;
}

/// The most wgmma dots of one loop that keep running into its next
/// iteration: wgmma.wait_group's count is at most 7 in SASS (ptxas makes a
/// larger one 7, a longer wait than asked for).
constexpr size_t kMaxPendingDots = 7;

/// The results of `p.loop` that its wgmma dots only accumulate into, one
/// each, if those dots may keep running into the next iteration: each waits
/// only until as many groups as the dots are left (wgmma.wait_group
/// p.dots.size()), which are this iteration's, so the slot the previous one
/// read is free at the next iteration's barrier. Not where a dot reads its
/// lhs from registers: they would be reused early.
std::optional<SmallVector<int64_t>> pendingResults(const LoopPipeline &p,
                                                   const LoweringState &state) {
  if (p.dots.size() > kMaxPendingDots)
    return std::nullopt;
  SmallVector<int64_t> results;
  for (DotOp dot : p.dots) {
    if (!usesWgmma(dot, state) || lhsInRegisters(dot))
      return std::nullopt;
    std::optional<unsigned> result = accumulatedResult(p.loop, dot);
    if (!result || llvm::is_contained(results, *result))
      return std::nullopt;
    results.push_back(*result);
  }
  return results;
}

/// The index of the tensor map (one per view and box) that TMA copies of
/// `load` read, added to its kernel's maps if new.
int tensorMapIndex(LoadOp load, LoweringState &state) {
  SmallVector<TensorMapParam> &maps =
      state.tensorMaps[load->getParentOfType<KernelOp>().getSymName()];
  TensorMapParam param = tensorMapParam(load, state.asyncCopies.lookup(load));
  auto *it = llvm::find(maps, param);
  if (it != maps.end())
    return it - maps.begin();
  maps.push_back(param);
  return maps.size() - 1;
}

/// Records `clone`, a copy of the pipelined `load` for another iteration,
/// as the async copy `copy`. The shifted offsets keep what made the copy a
/// 16-byte cp.async (their divisors only grow). Other facts are the
/// clone's own, but what the loop's bounds proved in bounds for `load`
/// holds for it too: where its iteration exists it reads what `load` reads
/// there, and where not it copies nothing (`copy.enabled`).
void addClonedCopy(LoadOp load, LoadOp clone, const AsyncCopy &copy,
                   LoweringState &state) {
  state.asyncCopies[clone] = copy;
  const AccessFacts &original = state.accesses[load];
  AccessFacts facts = analyzeAccess(*accessOperands(clone));
  facts.plan = original.plan;
  facts.aligned = original.aligned;
  facts.wholeRuns = original.wholeRuns;
  facts.fallback = original.fallback;
  if (!original.inBounds.empty()) {
    facts.inBounds.resize(original.inBounds.size());
    for (auto [own, proven] : llvm::zip(facts.inBounds, original.inBounds))
      own = own || proven;
  }
  state.accesses[clone] = facts;
}

/// `loop` carrying `inits` after its own values, with the values that
/// `yields` gives for their next iteration, and its attributes. The old
/// loop is gone, its body moved into the new one.
scf::ForOp carryMore(IRRewriter &b, scf::ForOp loop, ValueRange inits,
                     const NewYieldValuesFn &yields) {
  b.setInsertionPoint(loop);
  DictionaryAttr attrs = loop->getDiscardableAttrDictionary();
  bool unsignedCmp = loop.getUnsignedCmp();
  auto grown = cast<scf::ForOp>(*loop.replaceWithAdditionalYields(
      b, inits, /*replaceInitOperandUsesInLoop=*/false, yields));
  grown->setDiscardableAttrs(attrs);
  grown.setUnsignedCmp(unsignedCmp);
  return grown;
}

/// `loop` carrying, after its own values, the ring slot (i32) of its
/// iteration and, with `phase`, the parity of that slot's mbarrier phase,
/// which flips at each wrap of the `slots` slots.
scf::ForOp carryRingSlot(IRRewriter &b, scf::ForOp loop, unsigned slots,
                         bool phase) {
  Location loc = loop.getLoc();
  b.setInsertionPoint(loop);
  auto slotConst = [&](int64_t v) { return i32Const(b, loc, v); };
  SmallVector<Value> inits = {slotConst(0)};
  if (phase)
    inits.push_back(slotConst(0));
  return carryMore(
      b, loop, inits,
      [&](OpBuilder &yb, Location yloc, ArrayRef<BlockArgument> args) {
        Value next = arith::AddIOp::create(yb, yloc, args[0], slotConst(1));
        Value wrap = arith::CmpIOp::create(yb, yloc, arith::CmpIPredicate::eq,
                                           next, slotConst(slots));
        SmallVector<Value> yields = {
            arith::SelectOp::create(yb, yloc, wrap, slotConst(0), next)};
        if (phase)
          yields.push_back(arith::SelectOp::create(
              yb, yloc, wrap,
              arith::XOrIOp::create(yb, yloc, args[1], slotConst(1)), args[1]));
        return yields;
      });
}

/// The ops of `p.loop`'s block, before it, that its bounds, its copies'
/// offsets and the initial values of the scalars they carry depend on, in
/// block order; failure when one of them cannot be computed again.
FailureOr<SmallVector<Operation *>> producerSlice(const LoopPipeline &p) {
  scf::ForOp loop = p.loop;
  FailureOr<AddressSlice> inLoop = addressSlice(loop, p.loads);
  if (failed(inLoop))
    return failure();
  SmallVector<Value> operands = {loop.getLowerBound(), loop.getUpperBound(),
                                 loop.getStep()};
  llvm::append_range(operands, initialState(loop, *inLoop));
  for (Operation *op : inLoop->ops)
    llvm::append_range(operands, inputsOf(op));
  for (LoadOp load : p.loads)
    llvm::append_range(operands, load->getOperands());
  return recomputableSlice(loop->getBlock(), operands,
                           [](BlockArgument) { return false; });
}

} // namespace

SmallVector<LoopPipeline> findPipelines(KernelOp kernel,
                                        const LoweringState &state) {
  SmallVector<LoopPipeline> pipelines;
  llvm::DenseMap<Operation *, unsigned> index;
  kernel.walk([&](LoadOp load) {
    auto copy = state.asyncCopies.find(load);
    auto loop = dyn_cast<scf::ForOp>(load->getParentOp());
    if (copy == state.asyncCopies.end() || !loop)
      return;
    auto [it, inserted] = index.try_emplace(loop, pipelines.size());
    if (inserted)
      pipelines.push_back({loop, {}, {}});
    LoopPipeline &p = pipelines[it->second];
    p.loads.push_back(load);
    // Its dot, and those that borrow the copy (kBorrowedOperandsAttr).
    SmallVector<DotOp> readers = {copy->second.dot};
    for (Operation *user : load->getUsers())
      if (auto dot = dyn_cast<DotOp>(user); dot && borrowedOperands(dot))
        readers.push_back(dot);
    for (DotOp dot : readers)
      if (!llvm::is_contained(p.dots, dot))
        p.dots.push_back(dot);
  });
  pipelines = llvm::filter_to_vector(pipelines, [](const LoopPipeline &p) {
    if (writesLoadedMemory(p.loop, p.loads))
      return false;
    if (succeeded(addressSlice(p.loop, p.loads)))
      return true;
    splitBranchScalars(p.loop);
    return succeeded(addressSlice(p.loop, p.loads));
  });
  for (LoopPipeline &p : pipelines) {
    Block *body = p.loop.getBody();
    llvm::sort(p.dots, [&](DotOp a, DotOp b) {
      return body->findAncestorOpInBlock(*a)->isBeforeInBlock(
          body->findAncestorOpInBlock(*b));
    });
    p.tma = llvm::all_of(p.dots,
                         [&](DotOp dot) { return dot->getBlock() == body; }) &&
            llvm::all_of(p.loads, [&](LoadOp load) {
              return isTmaCopyable(load, state.asyncCopies.lookup(load), state);
            });
    p.refillAfterDots = llvm::all_of(p.dots, [&](DotOp dot) {
      return !usesWgmma(dot, state) && dot->getBlock() == p.loop.getBody();
    });
  }
  return pipelines;
}

unsigned fitStages(KernelOp kernel, ArrayRef<LoopPipeline> pipelines,
                   unsigned stages, int64_t limit, const LoweringState &state) {
  if (pipelines.empty())
    return 1;
  for (; stages > 1; --stages) {
    DenseMap<Operation *, unsigned> ringSlots;
    for (const LoopPipeline &p : pipelines)
      for (DotOp dot : p.dots)
        ringSlots[dot] = p.slots(stages);
    if (planSharedMemory(kernel, ringSlots, state).bytes <= limit)
      break;
  }
  return stages;
}

void keepOccupancyWithoutTma(KernelOp kernel,
                             MutableArrayRef<LoopPipeline> pipelines,
                             unsigned stages, int64_t limit,
                             LoweringState &state) {
  DenseMap<Operation *, unsigned> ringSlots;
  for (const LoopPipeline &p : pipelines)
    for (DotOp dot : p.dots)
      ringSlots[dot] = p.slots(stages);
  auto blocksPerSM = [&] {
    int64_t bytes = planSharedMemory(kernel, ringSlots, state).bytes;
    return (limit + 1024) / (bytes + 1024);
  };
  SmallVector<LoopPipeline *> optional;
  for (LoopPipeline &p : pipelines)
    if (p.tma && llvm::all_of(p.loads, [&](LoadOp load) {
          const AsyncCopy &copy = state.asyncCopies.find(load)->second;
          return !copy.tmaOnly && !copy.elementWise;
        }))
      optional.push_back(&p);
  if (optional.empty())
    return;
  int64_t withTma = blocksPerSM();
  for (LoopPipeline *p : optional)
    for (DotOp dot : p->dots)
      state.tmaDots.erase(dot);
  if (blocksPerSM() > withTma) {
    for (LoopPipeline *p : optional)
      p->tma = false;
    return;
  }
  for (LoopPipeline *p : optional)
    state.tmaDots.insert(p->dots.begin(), p->dots.end());
}

scf::ForOp pipelineLoop(const LoopPipeline &p, unsigned stages,
                        LoweringState &state) {
  scf::ForOp loop = p.loop;
  Location loc = loop.getLoc();
  AddressSlice slice = *addressSlice(loop, p.loads);
  bool wgmma =
      llvm::any_of(p.dots, [&](DotOp dot) { return usesWgmma(dot, state); });
  // wgmma dots that only accumulate keep running while the next iteration
  // starts (pendingResults): the slot they read is free one iteration later,
  // so the copies run `lead` = stages - 2 iterations ahead.
  std::optional<SmallVector<int64_t>> pending;
  if (stages >= 3)
    pending = pendingResults(p, state);
  unsigned lead = stages - 1 - (pending ? 1 : 0);
  unsigned slots = p.slots(stages);
  IRRewriter b(loop.getContext());
  // Slots and phase parities are i32, as the shared-memory offsets that
  // they index.
  auto slotConst = [&](int64_t v) { return i32Const(b, loc, v); };
  // Induction variables may be any integer type, not only index.
  Type ivType = loop.getInductionVar().getType();
  auto ivConst = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(ivType, v));
  };

  // Copies of the iteration at `iv`, whose carried scalars are `scalars`, into
  // ring slot `slot`, if it exists; returns the next iteration's scalars.
  // The first one waits for every warp to be done with the shared memory
  // before the loop.
  bool first = lead > 0; // else the body's barrier comes first
  auto prefetch = [&](Value iv, Value slot, ValueRange scalars) {
    Value enabled =
        arith::CmpIOp::create(b, loc,
                              loop.getUnsignedCmp() ? arith::CmpIPredicate::ult
                                                    : arith::CmpIPredicate::slt,
                              iv, loop.getUpperBound());
    IRMapping map;
    SmallVector<Value> next =
        cloneForIteration(b, loop, slice, iv, scalars, map);
    for (LoadOp load : p.loads) {
      auto clone = cast<LoadOp>(b.clone(*load, map));
      AsyncCopy copy = state.asyncCopies.lookup(load);
      copy.barrier = std::exchange(first, false);
      copy.slot = slot;
      copy.enabled = enabled;
      if (p.tma) {
        copy.tensorMap = tensorMapIndex(load, state);
        copy.mbarriers = p.loads.size();
        copy.mbarrierDot = p.dots.front();
      }
      addClonedCopy(load, clone, copy, state);
    }
    if (!p.tma)
      NVVM::CpAsyncCommitGroupOp::create(b, loc);
    return next;
  };

  // Prologue: iterations 0 .. lead - 1 into slots 0 .. lead - 1.
  b.setInsertionPoint(loop);
  Value step = loop.getStep();
  SmallVector<Value> scalars = initialState(loop, slice);
  for (unsigned i = 0; i < lead; ++i) {
    Value iv = loop.getLowerBound();
    if (i)
      iv = arith::AddIOp::create(
          b, loc, iv, arith::MulIOp::create(b, loc, step, ivConst(i)));
    scalars = prefetch(iv, slotConst(i), scalars);
  }

  // The loop carries the scalars of the iteration `lead` ahead (what its
  // refill yields replaces these placeholders), the slot of its
  // iteration's dot and, with TMA, the parity of the slot's mbarrier phase.
  unsigned aheadAt = loop.getNumRegionIterArgs();
  if (!scalars.empty())
    loop = carryMore(b, loop, scalars,
                     [](OpBuilder &, Location, ArrayRef<BlockArgument> args) {
                       return SmallVector<Value>(args.begin(), args.end());
                     });
  scf::ForOp grown = carryRingSlot(b, loop, slots, p.tma);
  loop = grown; // the prefetches below clone the new loop's body
  if (pending) {
    grown->setAttr(kWgmmaPendingAttr, b.getDenseI64ArrayAttr(*pending));
    for (DotOp dot : p.dots)
      state.overlappedDots[dot] = p.dots.size();
  }
  Value slot =
      grown.getRegionIterArgs()[grown.getNumRegionIterArgs() - (p.tma ? 2 : 1)];

  // In the body, before its first load: wait for this iteration's copies.
  // Then refill the slot that no dot reads any more with the iteration
  // `lead` ahead: the previous iteration's slot (or the one before it with
  // a running wgmma) right there, or, with mma.sync dots, this iteration's
  // own slot once they read it.
  LoadOp earliest = p.loads.front();
  for (LoadOp load : p.loads)
    if (load->isBeforeInBlock(earliest))
      earliest = load;
  b.setInsertionPoint(earliest);
  if (!p.tma) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, lead - 1);
    if (wgmma) // the dot reads the copies through the async proxy
      emitPtx(b, loc, "fence.proxy.async.shared::cta;");
  }
  NVVM::Barrier0Op::create(b, loc);
  Value free = slot;
  if (p.refillAfterDots) {
    Operation *last = p.dots.front();
    for (DotOp dot : p.dots)
      if (last->isBeforeInBlock(dot))
        last = dot;
    b.setInsertionPointAfter(last);
    NVVM::Barrier0Op::create(b, loc);
  } else {
    Value sum = arith::AddIOp::create(b, loc, slot, slotConst(lead));
    free = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, sum,
                              slotConst(slots)),
        arith::SubIOp::create(b, loc, sum, slotConst(slots)), sum);
  }
  Value ahead = arith::AddIOp::create(
      b, loc, grown.getInductionVar(),
      arith::MulIOp::create(b, loc, grown.getStep(), ivConst(lead)));
  SmallVector<Value> next = prefetch(
      ahead, free, grown.getRegionIterArgs().slice(aheadAt, scalars.size()));
  Operation *yield = grown.getBody()->getTerminator();
  for (auto [i, value] : llvm::enumerate(next))
    yield->setOperand(aheadAt + i, value);

  for (LoadOp load : p.loads)
    state.asyncCopies[load].prefetched = true;
  for (DotOp dot : p.dots)
    state.dotSlots[dot] = slot;
  // With TMA the first load waits for the slot's mbarrier, after the refill
  // was issued.
  if (p.tma) {
    AsyncCopy &waiter = state.asyncCopies[earliest];
    waiter.slot = slot;
    waiter.phase = grown.getRegionIterArgs().back();
    waiter.mbarrierDot = p.dots.front();
    return grown;
  }

  // Nothing may land in shared memory after the loop: its space is reused.
  b.setInsertionPointAfter(grown);
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  return grown;
}

bool canWarpSpecialize(KernelOp kernel, const LoopPipeline &p, size_t count,
                       const LoweringState &state) {
  // Consumers are whole warpgroups, as wgmma needs.
  if (!state.warpSpecialize || !p.tma || count != 1 ||
      p.loop->getParentOp() != kernel ||
      state.numWarps.lookup(kernel.getSymName()) % kWarpgroupWarps)
    return false;
  // The mbarriers are set up at the kernel's start: nothing before the loop
  // may use their shared memory.
  Operation *loop = p.loop;
  for (Operation &op : kernel.getBody().front()) {
    if (&op == loop)
      break;
    WalkResult shared = op.walk([&](Operation *inner) {
      return scratchBytes(inner, state) || state.asyncCopies.contains(inner)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    if (shared.wasInterrupted())
      return false;
  }
  return succeeded(producerSlice(p));
}

scf::ForOp warpSpecializeLoop(const LoopPipeline &p, unsigned stages,
                              LoweringState &state) {
  scf::ForOp loop = p.loop;
  auto kernel = loop->getParentOfType<KernelOp>();
  Location loc = loop.getLoc();
  SmallVector<Operation *> outside = *producerSlice(p);
  AddressSlice slice = *addressSlice(loop, p.loads);
  unsigned slots = p.slots(stages);
  unsigned consumers = kWarpSize * state.numWarps.lookup(kernel.getSymName());
  state.specializedKernels.insert(kernel.getSymName());
  IRRewriter b(loop.getContext());
  auto slotConst = [&](int64_t v) { return i32Const(b, loc, v); };

  // The consumers (the kernel's warps) run its body; the first warp of the
  // warpgroup after them produces (whole warpgroups, as wgmma's CTAs have).
  Block &body = kernel.getBody().front();
  b.setInsertionPointToStart(&body);
  Value tid = NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  auto split =
      scf::IfOp::create(b, loc,
                        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                              tid, slotConst(consumers)),
                        /*withElseRegion=*/true);
  Block *consumer = split.thenBlock();
  consumer->getOperations().splice(
      consumer->getTerminator()->getIterator(), body.getOperations(),
      std::next(split->getIterator()), body.getTerminator()->getIterator());

  // The producer computes the loop's bounds and offsets again and copies
  // each iteration into its slot once the consumers left it: the "empty"
  // mbarrier's phase before the current one completed (a fresh mbarrier
  // passes that wait at once, as the ring starts empty).
  b.setInsertionPoint(split.elseBlock()->getTerminator());
  auto producerWarp = scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid,
                            slotConst(consumers + kWarpSize)),
      /*withElseRegion=*/false);
  b.setInsertionPoint(producerWarp.thenBlock()->getTerminator());
  IRMapping map;
  for (Operation *op : outside)
    b.clone(*op, map);
  SmallVector<Value> inits =
      llvm::map_to_vector(initialState(loop, slice), [&](Value init) {
        return map.lookupOrDefault(init);
      });
  SmallVector<LoadOp> copies;
  auto producer = scf::ForOp::create(
      b, loc, map.lookupOrDefault(loop.getLowerBound()),
      map.lookupOrDefault(loop.getUpperBound()),
      map.lookupOrDefault(loop.getStep()), inits,
      [&](OpBuilder &pb, Location ploc, Value iv, ValueRange scalars) {
        SmallVector<Value> next =
            cloneForIteration(pb, loop, slice, iv, scalars, map);
        for (LoadOp load : p.loads)
          copies.push_back(cast<LoadOp>(pb.clone(*load, map)));
        scf::YieldOp::create(pb, ploc, next);
      },
      loop.getUnsignedCmp());
  producer->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  producer = carryRingSlot(b, producer, slots, /*phase=*/true);
  b.setInsertionPointToStart(producer.getBody());
  Value producerSlot = producer.getRegionIterArgs()[inits.size()];
  Value emptyParity = arith::XOrIOp::create(
      b, loc, producer.getRegionIterArgs()[inits.size() + 1], slotConst(1));
  for (auto [load, clone] : llvm::zip(p.loads, copies)) {
    AsyncCopy copy = state.asyncCopies.lookup(load);
    copy.barrier = false;
    copy.producer = true;
    copy.slot = producerSlot;
    copy.tensorMap = tensorMapIndex(load, state);
    copy.mbarriers = p.loads.size();
    copy.mbarrierDot = p.dots.front();
    // The first copy waits until the slot is empty.
    if (clone == copies.front())
      copy.emptyPhase = emptyParity;
    addClonedCopy(load, clone, copy, state);
  }

  // The consumers' loop waits for its slot's copies ("full" mbarrier) and,
  // after its dots, arrives on the slot's "empty" one; wgmma dots that keep
  // running into the next iteration (pendingResults) leave their slot one
  // iteration later.
  std::optional<SmallVector<int64_t>> pending = pendingResults(p, state);
  b.setInsertionPoint(loop);
  scf::ForOp grown = carryRingSlot(b, loop, slots, /*phase=*/true);
  Value slot = grown.getRegionIterArgs()[grown.getNumRegionIterArgs() - 2];
  Value phase = grown.getRegionIterArgs().back();
  LoadOp earliest = p.loads.front();
  for (LoadOp load : p.loads) {
    state.asyncCopies[load].prefetched = true;
    if (load->isBeforeInBlock(earliest))
      earliest = load;
  }
  AsyncCopy &waiter = state.asyncCopies[earliest];
  waiter.slot = slot;
  waiter.phase = phase;
  waiter.mbarrierDot = p.dots.front();
  for (DotOp dot : p.dots)
    state.dotSlots[dot] = slot;
  DotOp last = p.dots.back();
  SlotRelease release = {slot, Value(), p.dots.front()};
  if (pending) {
    grown->setAttr(kWgmmaPendingAttr, b.getDenseI64ArrayAttr(*pending));
    for (DotOp dot : p.dots)
      state.overlappedDots[dot] = p.dots.size();
    b.setInsertionPoint(last);
    Value previous = arith::SubIOp::create(b, loc, slot, slotConst(1));
    release.slot = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, slot,
                              slotConst(0)),
        slotConst(slots - 1), previous);
    release.enabled =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                              grown.getInductionVar(), grown.getLowerBound());
  }
  state.slotReleases[last] = release;
  return grown;
}

namespace {

/// The producer warpgroup's registers per thread after setmaxnreg.dec: its
/// copy loop carries a few offsets and the ring's slot and phase (Triton's
/// and CUTLASS's producers take 40 too).
constexpr int64_t kProducerRegisters = 40;

/// Moves registers from the producer warpgroup to the consumers, as Triton
/// and CUTLASS do: the launch gives every thread the same count, the
/// kernel's `.maxnreg` (the register file over the block's threads), then the
/// producer gives back all but kProducerRegisters (setmaxnreg.dec) and the
/// consumers take them (setmaxnreg.inc), which ptxas allocates in the code
/// after it. 8 consumer warps: 168 at launch, 232 after. With one consumer
/// warpgroup each thread can have the most (255) already.
void rebalanceRegisters(gpu::GPUFuncOp func, scf::IfOp split,
                        int64_t consumers) {
  constexpr int64_t registerFile = 64 * 1024, warpgroup = 128;
  int64_t threads = consumers + warpgroup;
  int64_t atLaunch = std::min<int64_t>(registerFile / threads / 8 * 8, 256);
  int64_t given = (atLaunch - kProducerRegisters) * warpgroup;
  int64_t consumerRegisters =
      std::min<int64_t>((atLaunch + given / consumers) / 8 * 8, 256);
  if (atLaunch >= 256 || consumerRegisters <= atLaunch)
    return;
  func->setAttr(
      NVVM::NVVMDialect::getMaxnregAttrName(),
      IntegerAttr::get(IntegerType::get(func.getContext(), 32), atLaunch));
  auto adjust = [&](Block *block, StringRef action, int64_t registers) {
    OpBuilder b = OpBuilder::atBlockBegin(block);
    emitPtx(b, split.getLoc(),
            (llvm::Twine("setmaxnreg.") + action + ".sync.aligned.u32 " +
             llvm::Twine(registers) + ";")
                .str());
  };
  adjust(split.elseBlock(), "dec", kProducerRegisters);
  adjust(split.thenBlock(), "inc", consumerRegisters);
}

} // namespace

void finishWarpSpecialization(scf::IfOp split, LoweringState &state) {
  auto attr = split->getAttrOfType<DenseI64ArrayAttr>(kWarpSpecializedAttr);
  split->removeAttr(kWarpSpecializedAttr);
  int64_t offset = attr[0], slots = attr[1], loads = attr[2];
  auto func = split->getParentOfType<gpu::GPUFuncOp>();
  int64_t consumers = kWarpSize * state.numWarps.lookup(func.getName());
  KernelState &ks = state.get(split);
  Location loc = split.getLoc();
  OpBuilder b(split);
  // "full": the producer's copies; "empty": every consumer thread.
  initMbarriers(b, loc, ks, offset, slots, loads);
  initMbarriers(b, loc, ks, offset + 8 * slots, slots, consumers);
  barrier(b, loc);
  // The producer passes no barrier of the consumers (id 0 would wait for
  // it): theirs is barrier 1, of their threads alone.
  split.getThenRegion().walk([&](NVVM::Barrier0Op op) {
    OpBuilder nb(op);
    NVVM::BarrierOp::create(nb, op.getLoc(), Type(),
                            i32Const(nb, op.getLoc(), 1),
                            i32Const(nb, op.getLoc(), consumers),
                            NVVM::BarrierReductionAttr(), Value());
    op.erase();
  });
  if (!state.maxRegisters) // a cap the user chose holds for every warp
    rebalanceRegisters(func, split, consumers);
}

} // namespace tileopt::nvvm
