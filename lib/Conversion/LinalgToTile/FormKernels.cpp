//===- FormKernels.cpp - group linalg ops on tensors into kernels ---------===//
//
// Decides which linalg ops become one kernel (a fusion group), and over
// which iteration space. Views (transposes, broadcasts, reshapes, slices)
// are folded into the indexing maps of the ops that read them; reshapes that
// are no strided view get a copy. Then, in program order, each generic joins
// the group of an operand it reads in registers when the loops line up (a
// value of the group read through the same dimensions), or starts a group.
// The decisions are written as attributes for convert-linalg-to-tile:
// `tile.group = N` and `tile.space = array<i64: ...>` (per loop, the group's
// dimension it runs over; -1 for loops of size 1).
//
//===----------------------------------------------------------------------===//

#include "Formation.h"
#include "tileopt/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

namespace tileopt {
#define GEN_PASS_DEF_TILEFORMKERNELS
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;
using namespace mlir::linalg;
using namespace tileopt::formation;

namespace {

bool isViewGeneric(GenericOp op) {
  std::string why;
  FailureOr<GenericKind> kind = classify(op, why);
  return succeeded(kind) && *kind == GenericKind::View;
}

/// Reads through View-kind generics: the consumer reads their input with
/// the composed indexing map, so a transpose or broadcast costs nothing.
void foldViewProducers(GenericOp consumer) {
  SmallVector<AffineMap> maps = consumer.getIndexingMapsArray();
  bool changed = false;
  for (OpOperand *in : consumer.getDpsInputOperands()) {
    while (auto view = in->get().getDefiningOp<GenericOp>()) {
      if (!isViewGeneric(view))
        break;
      AffineMap vin = view.getMatchingIndexingMap(view.getDpsInputOperand(0));
      AffineMap vout = view.getMatchingIndexingMap(view.getDpsInitOperand(0));
      unsigned i = in->getOperandNumber();
      maps[i] = vin.compose(inversePermutation(vout)).compose(maps[i]);
      in->set(view.getDpsInputOperand(0)->get());
      changed = true;
    }
  }
  if (changed)
    consumer.setIndexingMapsAttr(Builder(consumer).getAffineMapArrayAttr(maps));
}

/// Whether a generic reading the expand_shape `fused` may collapse its
/// loops to read the expand's source instead: when that source is a
/// contraction's result, directly or through its epilogue, so that the
/// consumer (GELU after a linear layer over [batch, tokens]) lines up with
/// the contraction's 2-D output and joins its kernel.
bool followsContraction(Value v) {
  for (int hops = 0; hops < 4; ++hops) {
    while (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
        v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    auto producer = v.getDefiningOp<GenericOp>();
    std::string ignored;
    FailureOr<GenericKind> kind =
        producer ? classify(producer, ignored) : FailureOr<GenericKind>();
    if (failed(kind))
      return false;
    if (*kind == GenericKind::Contraction)
      return true;
    if (*kind != GenericKind::Elementwise)
      return false;
    auto next = llvm::find_if(producer.getDpsInputs(), [](Value in) {
      return isa_and_nonnull<GenericOp>(in.getDefiningOp());
    });
    if (next == producer.getDpsInputs().end())
      return false;
    v = *next;
  }
  return false;
}

bool mayCollapseLoops(OpOperand *fused) {
  auto expand = fused->get().getDefiningOp<tensor::ExpandShapeOp>();
  return expand && isa<GenericOp>(fused->getOwner()) &&
         followsContraction(expand.getSrc());
}

/// Whether upstream's reshape propagation may expand the loops of the
/// generic at one end of `fused` (a generic reading a collapse_shape, or an
/// expand_shape of a generic's result). It may, except a contraction's M, N
/// or K: a contraction keeps one of each (tile.dot's rows, columns and
/// steps), while its batch loops may split (a bmm over batch x heads).
bool mayExpandLoops(OpOperand *fused) {
  GenericOp g;
  AffineMap map;
  SmallVector<ReassociationIndices> groups;
  ArrayRef<int64_t> expanded;
  if (auto consumer = dyn_cast<GenericOp>(fused->getOwner())) {
    auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse)
      return false;
    g = consumer;
    map = g.getMatchingIndexingMap(fused);
    groups = collapse.getReassociationIndices();
    expanded = collapse.getSrcType().getShape();
  } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(fused->getOwner())) {
    g = fused->get().getDefiningOp<GenericOp>();
    if (!g)
      return false;
    map = g.getIndexingMapMatchingResult(cast<OpResult>(fused->get()));
    groups = expand.getReassociationIndices();
    expanded = expand.getResultType().getShape();
  } else {
    return false;
  }
  // A reshape that only adds or drops unit dimensions splits no loop that
  // matters (kernel formation ignores unit loops); expanding a reduction
  // through it makes the patterns add and fold unit loops without end.
  if (g.getNumReductionLoops() > 0 &&
      llvm::all_of(groups, [&](const ReassociationIndices &group) {
        return llvm::count_if(group, [&](int64_t i) {
                 return expanded[i] != 1;
               }) <= 1;
      }))
    return false;
  std::string why;
  FailureOr<GenericKind> kind = classify(g, why);
  if (failed(kind) || *kind == GenericKind::View || *kind == GenericKind::Fill)
    return false;
  if (*kind != GenericKind::Contraction) {
    // An epilogue keeps the shape of the contraction it follows, and takes
    // it where it reads the contraction's result through a collapse (the
    // scale of attention scores over batch x heads).
    auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
    auto source =
        collapse ? collapse.getSrc().getDefiningOp<GenericOp>() : GenericOp();
    std::string ignored;
    FailureOr<GenericKind> sourceKind =
        source ? classify(source, ignored) : FailureOr<GenericKind>();
    if (isa<GenericOp>(fused->getOwner()) && succeeded(sourceKind) &&
        *sourceKind == GenericKind::Contraction)
      return true;
    return llvm::none_of(g.getDpsInputs(), followsContraction);
  }
  ContractionDimensions dims = *inferContractionDims(g);
  for (auto [j, group] : llvm::enumerate(groups)) {
    if (group.size() == 1)
      continue;
    auto d = dyn_cast<AffineDimExpr>(map.getResult(j));
    if (!d || !llvm::is_contained(dims.batch, d.getPosition()))
      return false;
  }
  return true;
}

/// tensor.concat as a generic over the result that gathers each element
/// from the input holding it (the others' reads fall out of bounds and are
/// not made), so a concatenation fuses into the kernel that reads it (a
/// rotary embedding's rotate_half).
void rewriteConcat(tensor::ConcatOp concat) {
  OpBuilder b(concat);
  Location loc = concat.getLoc();
  RankedTensorType type = concat.getResultType();
  if (!type.hasStaticShape())
    return; // reported as unsupported by kernel formation
  int64_t dim = concat.getDim(), rank = type.getRank();
  // The inputs with static shapes: torch-mlir's roll casts its slices to a
  // dynamic size, which would misplace every input after the first.
  SmallVector<Value> inputs;
  for (Value in : concat.getInputs()) {
    while (auto c = in.getDefiningOp<tensor::CastOp>())
      in = c.getSource();
    if (!cast<RankedTensorType>(in.getType()).hasStaticShape())
      return; // reported as unsupported by kernel formation
    inputs.push_back(in);
  }
  SmallVector<int64_t> starts;
  int64_t start = 0;
  for (Value in : inputs) {
    starts.push_back(start);
    start += cast<RankedTensorType>(in.getType()).getDimSize(dim);
  }
  if (start != type.getDimSize(dim))
    return;
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(rank);
  auto generic = GenericOp::create(
      b, loc, type, ValueRange{}, ValueRange{empty}, ArrayRef<AffineMap>{id},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange) {
        SmallVector<Value> index;
        for (int64_t d = 0; d < rank; ++d)
          index.push_back(IndexOp::create(nb, l, d));
        Value result;
        for (int64_t i = inputs.size() - 1; i >= 0; --i) {
          SmallVector<Value> at = index;
          at[dim] = arith::SubIOp::create(
              nb, l, index[dim],
              arith::ConstantIndexOp::create(nb, l, starts[i]));
          Value v = tensor::ExtractOp::create(nb, l, inputs[i], at);
          if (!result) {
            result = v;
            continue;
          }
          int64_t end = i + 1 < (int64_t)starts.size() ? starts[i + 1] : start;
          Value inside = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::ult, index[dim],
              arith::ConstantIndexOp::create(nb, l, end));
          result = arith::SelectOp::create(nb, l, inside, v, result);
        }
        YieldOp::create(nb, l, result);
      });
  concat.replaceAllUsesWith(generic.getResult(0));
  concat.erase();
}

/// Drops the outputs of a generic that nothing reads and that the other
/// outputs do not need (a max's argmax), which canonicalize keeps when the
/// body reads their accumulator.
void dropDeadResults(GenericOp op) {
  SmallVector<unsigned> kept;
  for (OpResult r : op->getResults())
    if (!r.use_empty())
      kept.push_back(r.getResultNumber());
  if (kept.empty() || kept.size() == op->getNumResults())
    return;
  // The body ops the kept outputs need.
  Block *body = op.getBody();
  auto yield = cast<YieldOp>(body->getTerminator());
  llvm::SmallPtrSet<Operation *, 16> live;
  SmallVector<Value> work;
  for (unsigned i : kept)
    work.push_back(yield.getOperand(i));
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      unsigned n = arg.getArgNumber();
      if (arg.getOwner() == body && n >= op.getNumDpsInputs() &&
          !llvm::is_contained(kept, n - op.getNumDpsInputs()))
        return; // a kept output reads a dropped one
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (def->getBlock() != body || !live.insert(def).second)
      continue;
    work.append(def->operand_begin(), def->operand_end());
  }
  SmallVector<Value> inits;
  SmallVector<Type> types;
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands())
    maps.push_back(op.getMatchingIndexingMap(in));
  for (unsigned i : kept) {
    OpOperand *init = op.getDpsInitOperand(i);
    inits.push_back(init->get());
    types.push_back(op->getResult(i).getType());
    maps.push_back(op.getMatchingIndexingMap(init));
  }
  OpBuilder b(op);
  auto replacement = GenericOp::create(
      b, op.getLoc(), types, op.getDpsInputs(), inits, maps,
      op.getIteratorTypesArray(),
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        IRMapping m;
        unsigned numInputs = op.getNumDpsInputs();
        for (unsigned i = 0; i < numInputs; ++i)
          m.map(body->getArgument(i), args[i]);
        for (auto [j, i] : llvm::enumerate(kept))
          m.map(body->getArgument(numInputs + i), args[numInputs + j]);
        for (Operation &inner : body->without_terminator())
          if (live.contains(&inner))
            nb.clone(inner, m);
        SmallVector<Value> yielded;
        for (unsigned i : kept)
          yielded.push_back(m.lookupOrDefault(yield.getOperand(i)));
        YieldOp::create(nb, loc, yielded);
      });
  for (auto [j, i] : llvm::enumerate(kept))
    op->getResult(i).replaceAllUsesWith(replacement->getResult(j));
  op->erase();
}

/// Reads through a gather (a `tensor.extract` in a body) into the
/// elementwise generic that produced the gathered tensor: its body is
/// recomputed for the gathered elements only, so a cross-entropy's target
/// log-probability x[i, t] - logsumexp[i] is read from x and the per-row
/// logsumexp instead of from a stored log-softmax.
bool inlineIntoGather(tensor::ExtractOp extract) {
  auto result = dyn_cast<OpResult>(extract.getTensor());
  auto producer = result ? dyn_cast<GenericOp>(result.getOwner()) : GenericOp();
  if (!producer || !isa<GenericOp>(extract->getParentOp()) ||
      producer.getNumLoops() != producer.getNumParallelLoops() ||
      !producer.hasPureTensorSemantics())
    return false;
  AffineMap out = producer.getIndexingMapMatchingResult(result);
  if (!out.isPermutation())
    return false;
  for (OpOperand &init : producer.getDpsInitsMutable())
    if (producer.payloadUsesValueFromOperand(&init))
      return false;
  OpBuilder b(extract);
  Location loc = extract.getLoc();
  SmallVector<Value> loops(producer.getNumLoops());
  for (auto [j, e] : llvm::enumerate(out.getResults()))
    loops[cast<AffineDimExpr>(e).getPosition()] = extract.getIndices()[j];
  IRMapping m;
  for (OpOperand *in : producer.getDpsInputOperands()) {
    BlockArgument arg = producer.getMatchingBlockArgument(in);
    if (arg.use_empty())
      continue;
    if (!isa<RankedTensorType>(in->get().getType())) {
      m.map(arg, in->get()); // a scalar operand
      continue;
    }
    AffineMap map = producer.getMatchingIndexingMap(in);
    SmallVector<Value> at;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        at.push_back(loops[d.getPosition()]);
      else if (auto c = dyn_cast<AffineConstantExpr>(e))
        at.push_back(arith::ConstantIndexOp::create(b, loc, c.getValue()));
      else
        at.push_back(affine::AffineApplyOp::create(
            b, loc, AffineMap::get(map.getNumDims(), 0, e), loops));
    }
    m.map(arg, tensor::ExtractOp::create(b, loc, in->get(), at));
  }
  Block *body = producer.getBody();
  for (Operation &inner : body->without_terminator()) {
    if (auto index = dyn_cast<IndexOp>(inner))
      m.map(index.getResult(), loops[index.getDim()]);
    else
      b.clone(inner, m);
  }
  extract.replaceAllUsesWith(m.lookupOrDefault(
      body->getTerminator()->getOperand(result.getResultNumber())));
  extract.erase();
  return true;
}

/// Inlines gathered elementwise producers (inlineIntoGather), then erases
/// the generics nothing reads any more.
void inlineIntoGathers(func::FuncOp func) {
  for (int round = 0; round < 8; ++round) {
    SmallVector<tensor::ExtractOp> extracts;
    func.walk([&](tensor::ExtractOp op) { extracts.push_back(op); });
    bool changed = false;
    for (tensor::ExtractOp op : extracts)
      changed |= inlineIntoGather(op);
    if (!changed)
      break;
  }
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isa<GenericOp>(op) && op->use_empty() &&
        cast<GenericOp>(op).hasPureTensorSemantics())
      op->erase();
}

/// A copy of `source` into a new contiguous tensor (a kernel).
Value makeCopy(OpBuilder &b, Location loc, Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  auto copy =
      GenericOp::create(b, loc, type, ValueRange{source}, ValueRange{empty},
                        ArrayRef<AffineMap>{id, id},
                        SmallVector<utils::IteratorType>(
                            type.getRank(), utils::IteratorType::parallel),
                        [](OpBuilder &nb, Location nloc, ValueRange args) {
                          YieldOp::create(nb, nloc, args[0]);
                        });
  copy->setAttr(kCopyAttr, b.getUnitAttr());
  foldViewProducers(copy);
  return copy.getResult(0);
}

/// Gives every reshape a source it is a strided view of: a collapse of
/// dimensions that are not contiguous in memory reads a contiguous copy.
void copyNonViewableSources(func::FuncOp func) {
  DenseMap<Value, StridedLayout> layouts;
  auto layoutOf = [&](Value v) -> StridedLayout {
    auto it = layouts.find(v);
    if (it != layouts.end())
      return it->second;
    return StridedLayout::contiguous(
        cast<RankedTensorType>(v.getType()).getShape());
  };
  for (Operation &op : func.getBody().front()) {
    if (!isViewOp(&op)) {
      continue; // results are new contiguous buffers (or no tensors)
    }
    Value source = op.getOperand(0);
    std::optional<StridedLayout> layout = getViewLayout(&op, layoutOf(source));
    if (!layout) {
      OpBuilder b(&op);
      op.setOperand(0, makeCopy(b, op.getLoc(), source));
      layout = getViewLayout(&op, layoutOf(op.getOperand(0)));
    }
    if (layout)
      layouts[op.getResult(0)] = *layout;
  }
}

struct Group {
  int id;
  bool contraction = false;
  SmallVector<int64_t> space;
  llvm::SmallBitVector reduced;
  llvm::SmallDenseSet<int> deps; // groups whose outputs this one reads
  /// The generics, and for each its loops' dimensions of the space.
  SmallVector<std::pair<GenericOp, SmallVector<int64_t>>> members;
};

/// A value a group holds in registers: for each of its dimensions, the
/// group's dimension it spans (-1: size 1).
struct Held {
  int group;
  SmallVector<int64_t> dims;
};

/// The dimensions over a group's space of the result of a reshape that only
/// adds or drops dimensions of size 1, given the source's; nullopt for any
/// other op.
std::optional<SmallVector<int64_t>>
getReshapedDims(Operation *op, ArrayRef<int64_t> sourceDims) {
  SmallVector<int64_t> dims;
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    ArrayRef<int64_t> shape = expand.getResultType().getShape();
    dims.assign(shape.size(), -1);
    for (auto [i, group] : llvm::enumerate(expand.getReassociationIndices())) {
      SmallVector<int64_t> nonUnit;
      for (int64_t d : group)
        if (shape[d] != 1)
          nonUnit.push_back(d);
      if (nonUnit.size() > 1)
        return std::nullopt;
      int64_t d = nonUnit.empty() ? group.front() : nonUnit.front();
      dims[d] = sourceDims[i];
    }
    return dims;
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    ArrayRef<int64_t> shape = collapse.getSrcType().getShape();
    for (ReassociationIndices group : collapse.getReassociationIndices()) {
      int64_t s = -1;
      for (int64_t d : group) {
        if (shape[d] == 1 && sourceDims[d] < 0)
          continue;
        if (s >= 0)
          return std::nullopt;
        s = sourceDims[d];
      }
      dims.push_back(s);
    }
    return dims;
  }
  return std::nullopt;
}

class Former {
public:
  LogicalResult run(func::FuncOp func);

private:
  SmallVector<Group> groups;
  DenseMap<Value, Held> held;
  DenseMap<Value, llvm::SmallDenseSet<int>> producers;

  bool dependsOn(const llvm::SmallDenseSet<int> &from, int target) const;
  bool tryJoin(GenericOp op, GenericKind kind, Group &g,
               SmallVector<int64_t> &space, bool sibling) const;
  void add(GenericOp op, Group &g, ArrayRef<int64_t> space);
  void anchor(GenericOp op, GenericKind kind);

public:
  /// Writes each group's decisions on its ops.
  void finish();
};

int64_t rowElements(const Group &g, const llvm::SmallBitVector &reduced) {
  int64_t n = 1;
  for (int s : reduced.set_bits())
    n *= nextPowerOf2(g.space[s]);
  return n;
}

bool Former::dependsOn(const llvm::SmallDenseSet<int> &from, int target) const {
  SmallVector<int> stack(from.begin(), from.end());
  llvm::SmallDenseSet<int> seen;
  while (!stack.empty()) {
    int g = stack.pop_back_val();
    if (g == target)
      return true;
    if (!seen.insert(g).second)
      continue;
    stack.append(groups[g].deps.begin(), groups[g].deps.end());
  }
  return false;
}

/// Joins `op` to group `g` when an operand it reads is held by the group in
/// registers with matching dimensions, or, for a `sibling`, when its loops
/// are the group's space in order (ops over the same rows that read the
/// same inputs, such as a norm's mean and variance).
bool Former::tryJoin(GenericOp op, GenericKind kind, Group &g,
                     SmallVector<int64_t> &space, bool sibling) const {
  if (kind != GenericKind::Elementwise && kind != GenericKind::Reduction)
    return false;
  if (g.contraction && kind != GenericKind::Elementwise)
    return false;
  SmallVector<int64_t> loops = getLoopSizes(op);
  space.assign(loops.size(), -2);
  for (auto [d, size] : llvm::enumerate(loops))
    if (size == 1)
      space[d] = -1;
  bool inRegisters = false;
  for (OpOperand &operand : op->getOpOperands()) {
    Value v = operand.get();
    if (!isa<RankedTensorType>(v.getType()))
      continue;
    if (op.isDpsInit(&operand) && !op.payloadUsesValueFromOperand(&operand))
      continue;
    auto it = held.find(v);
    if (it == held.end() || it->second.group != g.id) {
      auto p = producers.find(v);
      if (p != producers.end() && dependsOn(p->second, g.id))
        return false; // it needs this group's outputs: a cycle
      continue;
    }
    inRegisters = true;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    for (auto [j, e] : llvm::enumerate(map.getResults())) {
      int64_t want = it->second.dims[j];
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        int64_t &s = space[d.getPosition()];
        // A loop of size 1 may run over a dimension of size 1 (the unit M
        // of a contraction's output).
        if (s == -1 && want >= 0 && g.space[want] == 1)
          s = want;
        if (s == -2)
          s = want;
        else if (s != want)
          return false;
      } else if (want != -1) {
        return false;
      }
    }
  }
  for (Value v : getCapturedTensors(op)) {
    // A gather reads memory: from a buffer another kernel made.
    auto it = held.find(v);
    if (it != held.end() && it->second.group == g.id)
      return false;
    auto p = producers.find(v);
    if (p != producers.end() && dependsOn(p->second, g.id))
      return false;
  }
  if (!inRegisters) {
    if (!sibling || g.contraction)
      return false;
    // Loops aligned with the space from the innermost, as broadcasting
    // aligns shapes.
    SmallVector<int64_t> nonUnit;
    for (auto [d, size] : llvm::enumerate(loops))
      if (size != 1)
        nonUnit.push_back(d);
    if (nonUnit.size() > g.space.size())
      return false;
    int64_t t = g.space.size() - nonUnit.size();
    for (int64_t d : nonUnit) {
      if (loops[d] != g.space[t] || (g.contraction && g.reduced[t]))
        return false;
      space[d] = t++;
    }
  }
  llvm::SmallBitVector used(g.space.size());
  for (int64_t s : space) {
    if (s < 0)
      continue;
    if (used.test(s))
      return false;
    used.set(s);
  }
  // Loops no operand in registers decides: an unused dimension of their
  // size, else a new dimension (the group's earlier values are broadcast
  // along it, as a bias is along the rows it is added to).
  int64_t next = g.space.size();
  for (auto [d, s] : llvm::enumerate(space)) {
    if (s != -2)
      continue;
    for (auto [t, size] : llvm::enumerate(g.space)) {
      if (!used.test(t) && size == loops[d] &&
          !(g.contraction && g.reduced[t])) {
        s = t;
        used.set(t);
        break;
      }
    }
    if (s == -2) {
      if (g.contraction)
        return false;
      s = next++;
    }
  }
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  Group grown = g;
  for (auto [d, s] : llvm::enumerate(space))
    if (s >= (int64_t)grown.space.size()) {
      grown.space.resize(s + 1);
      grown.space[s] = loops[d];
    }
  llvm::SmallBitVector before = g.reduced, reduced = g.reduced;
  before.resize(grown.space.size());
  reduced.resize(grown.space.size());
  llvm::SmallBitVector own(grown.space.size());
  for (auto [d, s] : llvm::enumerate(space)) {
    if (s < 0)
      continue;
    if (g.contraction && g.reduced[s])
      return false; // an epilogue runs over the output tile only
    if (!isParallel(iters[d])) {
      reduced.set(s);
      own.set(s);
    }
  }
  if (rowElements(grown, reduced) <= kPersistentRowElements)
    return true;
  // Longer rows loop over chunks, one loop per reduction: every reduction
  // of the group reduces the same dimensions.
  return (before.none() || before == reduced) && (own.none() || own == reduced);
}

void Former::add(GenericOp op, Group &g, ArrayRef<int64_t> space) {
  g.members.push_back({op, SmallVector<int64_t>(space)});
  SmallVector<int64_t> loops = getLoopSizes(op);
  for (auto [d, s] : llvm::enumerate(space))
    if (s >= (int64_t)g.space.size()) {
      g.space.resize(s + 1);
      g.space[s] = loops[d];
    }
  g.reduced.resize(g.space.size());
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (auto [d, s] : llvm::enumerate(space))
    if (s >= 0 && !isParallel(iters[d]))
      g.reduced.set(s);
  for (OpOperand &operand : op->getOpOperands()) {
    Value v = operand.get();
    auto it = held.find(v);
    if (it != held.end() && it->second.group == g.id)
      continue;
    auto p = producers.find(v);
    if (p != producers.end())
      g.deps.insert(p->second.begin(), p->second.end());
  }
  for (Value v : getCapturedTensors(op)) {
    auto p = producers.find(v);
    if (p != producers.end())
      g.deps.insert(p->second.begin(), p->second.end());
  }
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Held h{g.id, {}};
    for (AffineExpr e : op.getMatchingIndexingMap(&init).getResults()) {
      auto d = dyn_cast<AffineDimExpr>(e);
      h.dims.push_back(d ? space[d.getPosition()] : -1);
    }
    Value result = op.getTiedOpResult(&init);
    held[result] = h;
    producers[result] = {g.id};
  }
}

void Former::anchor(GenericOp op, GenericKind kind) {
  Group &g = groups.emplace_back();
  g.id = groups.size() - 1;
  g.contraction = kind == GenericKind::Contraction;
  // A contraction's M and N get dimensions even of size 1: its tiles have
  // them.
  llvm::SmallDenseSet<unsigned> keep;
  if (g.contraction) {
    ContractionDimensions dims = *inferContractionDims(op);
    keep.insert(dims.m.begin(), dims.m.end());
    keep.insert(dims.n.begin(), dims.n.end());
  }
  SmallVector<int64_t> space;
  for (auto [d, size] : llvm::enumerate(getLoopSizes(op))) {
    if (size == 1 && !keep.contains(d)) {
      space.push_back(-1);
      continue;
    }
    space.push_back(g.space.size());
    g.space.push_back(size);
  }
  if (g.space.empty())
    g.space.push_back(1); // a kernel of one element
  g.reduced.resize(g.space.size());
  add(op, g, space);
}

void Former::finish() {
  for (Group &g : groups) {
    // Number the space's dimensions in the loop order of the op with the
    // most of them (the one whose tiles are largest), so that the innermost
    // dimension of its operands is the innermost of the tiles.
    auto largest = llvm::max_element(g.members, [](auto &a, auto &b) {
      return llvm::count_if(a.second, [](int64_t s) { return s >= 0; }) <
             llvm::count_if(b.second, [](int64_t s) { return s >= 0; });
    });
    SmallVector<int64_t> order;
    for (size_t s = 0; s < g.space.size(); ++s)
      if (!llvm::is_contained(largest->second, (int64_t)s))
        order.push_back(s);
    for (int64_t s : largest->second)
      if (s >= 0)
        order.push_back(s);
    SmallVector<int64_t> renumber(g.space.size());
    for (auto [i, s] : llvm::enumerate(order))
      renumber[s] = i;
    for (auto &[op, space] : g.members) {
      Builder b(op);
      op->setAttr(kGroupAttr, b.getI64IntegerAttr(g.id));
      op->setAttr(kSpaceAttr, b.getDenseI64ArrayAttr(
                                  llvm::map_to_vector(space, [&](int64_t s) {
                                    return s < 0 ? s : renumber[s];
                                  })));
    }
  }
}

LogicalResult Former::run(func::FuncOp func) {
  for (Operation &op : func.getBody().front()) {
    if (auto generic = dyn_cast<GenericOp>(op)) {
      std::string why;
      FailureOr<GenericKind> kind = classify(generic, why);
      if (failed(kind))
        return op.emitError(why);
      if (*kind == GenericKind::View) {
        auto p = producers.find(generic.getDpsInputOperand(0)->get());
        if (p != producers.end())
          producers[generic.getResult(0)] = p->second;
        continue;
      }
      std::function<bool(Value)> readByGenerics = [&](Value v) {
        return llvm::all_of(v.getUsers(), [&](Operation *u) {
          if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(u))
            return readByGenerics(u->getResult(0));
          return isa<GenericOp>(u);
        });
      };
      if (*kind == GenericKind::Fill && readByGenerics(generic.getResult(0)))
        continue; // read as a splat by the ops that use it
      // Join the group of an operand held in registers, latest first.
      bool joined = false;
      SmallVector<int64_t> space;
      SmallVector<int> candidates;
      for (OpOperand &operand : generic->getOpOperands()) {
        auto it = held.find(operand.get());
        if (it != held.end() &&
            !llvm::is_contained(candidates, it->second.group))
          candidates.push_back(it->second.group);
      }
      llvm::sort(candidates, std::greater<int>());
      for (int c : candidates) {
        if (tryJoin(generic, *kind, groups[c], space, /*sibling=*/false)) {
          add(generic, groups[c], space);
          joined = true;
          break;
        }
      }
      if (!joined && !groups.empty() &&
          tryJoin(generic, *kind, groups.back(), space, /*sibling=*/true)) {
        add(generic, groups.back(), space);
        joined = true;
      }
      if (!joined)
        anchor(generic, *kind);
      continue;
    }
    if (isViewOp(&op)) {
      Value source = op.getOperand(0), result = op.getResult(0);
      auto h = held.find(source);
      std::optional<SmallVector<int64_t>> dims;
      if (h != held.end())
        dims = getReshapedDims(&op, h->second.dims);
      if (dims) {
        // A reshape of unit dimensions: the same tile in registers.
        int g = h->second.group;
        held[result] = {g, *dims};
        producers[result] = {g};
        op.setAttr(kGroupAttr, Builder(&op).getI64IntegerAttr(g));
        continue;
      }
      auto p = producers.find(source);
      if (p != producers.end())
        producers[result] = p->second;
      continue;
    }
    if (isa<tensor::EmptyOp, func::ReturnOp>(op))
      continue;
    if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
      (void)cst;
      continue;
    }
    bool touchesTensors =
        llvm::any_of(op.getOperandTypes(),
                     [](Type t) { return isa<ShapedType>(t); }) ||
        llvm::any_of(op.getResultTypes(),
                     [](Type t) { return isa<ShapedType>(t); });
    if (touchesTensors || op.getNumRegions())
      return op.emitError() << "unsupported: '" << op.getName()
                            << "' has no lowering to tile kernels yet";
  }
  return success();
}

struct TileFormKernelsPass
    : tileopt::impl::TileFormKernelsBase<TileFormKernelsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("unsupported: a function with control flow");
        return signalPassFailure();
      }
      // Fold views into their readers first, so that copies inserted for
      // reshapes read the original buffers.
      func.walk([](tensor::ConcatOp op) { rewriteConcat(op); });
      func.walk([](GenericOp op) { dropDeadResults(op); });
      // Move reshapes out of the way where they split loops, so that a bmm
      // over collapsed batch x heads reads its 4-D operands (transposed
      // views, no copies) and its consumers line up with it.
      RewritePatternSet patterns(&getContext());
      linalg::populateFoldReshapeOpsByExpansionPatterns(patterns,
                                                        mayExpandLoops);
      // Index-only values (a causal mask from iotas) are recomputed where
      // they are read rather than stored; gathers (a concatenation) are not:
      // they would turn a contraction reading them into a reduction of
      // gathered elements.
      linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *o) {
        auto producer = o->get().getDefiningOp<GenericOp>();
        return producer &&
               producer.getNumLoops() == producer.getNumParallelLoops() &&
               llvm::none_of(
                   producer.getDpsInputs(),
                   [](Value v) { return isa<ShapedType>(v.getType()); }) &&
               getCapturedTensors(producer).empty();
      });
      tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
      tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns,
                                                           &getContext());
      tensor::populateFoldTensorEmptyPatterns(patterns);
      linalg::populateFoldReshapeOpsByCollapsingPatterns(patterns,
                                                         mayCollapseLoops);
      // Bounded, in proportion to the function (the IR is valid after any
      // number of rewrites): patterns that undo each other end soon.
      int64_t numOps = func.getBody().front().getOperations().size();
      (void)applyPatternsGreedily(
          func, std::move(patterns),
          GreedyRewriteConfig().setMaxIterations(8).setMaxNumRewrites(
              10 * numOps + 100));
      func.walk([](GenericOp op) { dropDeadResults(op); });
      inlineIntoGathers(func);
      func.walk([](GenericOp op) { foldViewProducers(op); });
      copyNonViewableSources(func);
      func.walk([](GenericOp op) {
        if (op->use_empty() && isViewGeneric(op))
          op->erase();
      });
      Former former;
      if (failed(former.run(func)))
        return signalPassFailure();
      former.finish();
    }
  }
};

} // namespace
