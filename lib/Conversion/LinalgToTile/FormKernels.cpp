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
#include "mlir/Dialect/Math/IR/Math.h"
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

bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// An op of a generic's body that rounds its f16/bf16 result (exact ones,
/// such as negf, absf or floor, do not count).
bool roundsHalf(Operation &op) {
  if (op.getNumResults() != 1 || !isHalf(op.getResult(0).getType()))
    return false;
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
          arith::RemFOp>(op))
    return true;
  return isa<math::MathDialect>(op.getDialect()) &&
         !isa<math::AbsFOp, math::CopySignOp, math::FloorOp, math::CeilOp,
              math::RoundOp, math::RoundEvenOp, math::TruncOp>(op);
}

/// An arith or math op of a generic's body that computes on f16/bf16 values
/// and could as well on f32 ones: its float operands and results are all
/// f16/bf16 (conversions, bitcasts and constants are not).
bool widensToF32(Operation &op) {
  if (!isa<arith::ArithDialect, math::MathDialect>(op.getDialect()) ||
      isa<arith::ExtFOp, arith::TruncFOp, arith::BitcastOp, arith::ConstantOp,
          arith::SIToFPOp, arith::UIToFPOp, arith::FPToSIOp, arith::FPToUIOp>(
          op))
    return false;
  auto types =
      llvm::concat<const Type>(op.getOperandTypes(), op.getResultTypes());
  return llvm::all_of(types,
                      [](Type t) { return !isa<FloatType>(t) || isHalf(t); }) &&
         llvm::any_of(types, isHalf);
}

/// Computes an elementwise generic's f16/bf16 arithmetic in f32, rounding
/// once where its results leave the body: PyTorch computes an op on half
/// tensors in f32 and rounds its result once, but torch-mlir lowers a
/// composite op (sigmoid, gelu) to one generic of half results that rounds
/// every step (f16 sigmoid(-12.6) was 0: exp overflowed). Bodies with fewer
/// than two rounding steps stay as they are (one rounding in f32 or in the
/// half type gives the same result). Before fusion: a generic is still one
/// op.
void computeHalfBodyInF32(GenericOp op) {
  Block &body = *op.getBody();
  if (!llvm::all_of(op.getIteratorTypesArray(), linalg::isParallelIterator) ||
      !llvm::all_of(body.getTerminator()->getOperandTypes(), isHalf) ||
      llvm::count_if(body.without_terminator(), roundsHalf) < 2)
    return;
  OpBuilder b(op.getContext());
  Type f32 = b.getF32Type();
  DenseMap<Value, Value> wide; // an f16/bf16 value -> its f32 value
  SmallVector<Operation *> roundings;
  auto widen = [&](Value v) -> Value {
    if (!isHalf(v.getType()))
      return v;
    if (Value w = wide.lookup(v))
      return w;
    OpBuilder::InsertionGuard guard(b);
    if (isa<BlockArgument>(v))
      b.setInsertionPointToStart(&body);
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    FloatAttr constant;
    Value w = matchPattern(v, m_Constant(&constant))
                  ? Value(arith::ConstantOp::create(
                        b, v.getLoc(),
                        b.getF32FloatAttr(constant.getValueAsDouble())))
                  : Value(arith::ExtFOp::create(b, v.getLoc(), f32, v));
    return wide[v] = w;
  };
  for (Operation &inner :
       llvm::make_early_inc_range(body.without_terminator())) {
    if (!widensToF32(inner))
      continue;
    b.setInsertionPoint(&inner);
    SmallVector<Value> operands =
        llvm::map_to_vector(inner.getOperands(), widen);
    SmallVector<Type> types = llvm::map_to_vector(
        inner.getResultTypes(), [&](Type t) { return isHalf(t) ? f32 : t; });
    OperationState state(inner.getLoc(), inner.getName(), operands, types,
                         inner.getAttrs());
    Operation *widened = b.create(state);
    for (auto [old, result] :
         llvm::zip_equal(inner.getResults(), widened->getResults())) {
      Value replacement = result;
      if (isHalf(old.getType())) {
        replacement =
            arith::TruncFOp::create(b, inner.getLoc(), old.getType(), result);
        wide[replacement] = result;
        roundings.push_back(replacement.getDefiningOp());
      }
      old.replaceAllUsesWith(replacement);
    }
    inner.erase();
  }
  for (Operation *rounding : roundings)
    if (rounding->use_empty())
      rounding->erase();
}

bool isViewGeneric(GenericOp op) {
  std::string why;
  FailureOr<GenericKind> kind = classify(op, why);
  return succeeded(kind) && *kind == GenericKind::View;
}

/// The map through which a reader that reads `view`'s result by `read`
/// reads the view's input.
AffineMap readThroughView(GenericOp view, AffineMap read) {
  AffineMap in = view.getMatchingIndexingMap(view.getDpsInputOperand(0));
  AffineMap out = view.getMatchingIndexingMap(view.getDpsInitOperand(0));
  return in.compose(inversePermutation(out)).compose(read);
}

/// Reads through View-kind generics: the consumer reads their input with
/// the composed indexing map, so a transpose or broadcast costs nothing.
/// Not a broadcast along a loop that nothing else of the consumer's spans (a
/// sum over a broadcast dimension): its extent would be lost.
void foldViewProducers(GenericOp consumer) {
  SmallVector<AffineMap> maps = consumer.getIndexingMapsArray();
  bool changed = false;
  for (OpOperand *in : consumer.getDpsInputOperands()) {
    while (auto view = in->get().getDefiningOp<GenericOp>()) {
      if (!isViewGeneric(view))
        break;
      unsigned i = in->getOperandNumber();
      AffineMap read = maps[i];
      maps[i] = readThroughView(view, read);
      if (!inversePermutation(concatAffineMaps(maps, consumer.getContext()))) {
        maps[i] = read;
        break;
      }
      in->set(view.getDpsInputOperand(0)->get());
      changed = true;
    }
  }
  if (changed)
    consumer.setIndexingMapsAttr(Builder(consumer).getAffineMapArrayAttr(maps));
}

/// The contraction whose result `v` is, or that of the ops before it through
/// reshapes and the first input of each that a generic computes, up to
/// `maxHops` elementwise ops (and reductions, with `throughReductions`); null
/// if none.
GenericOp getContractionBefore(Value v, int maxHops, bool throughReductions) {
  for (int hops = 0; hops < maxHops; ++hops) {
    while (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
        v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    auto producer = v.getDefiningOp<GenericOp>();
    std::string ignored;
    FailureOr<GenericKind> kind =
        producer ? classify(producer, ignored) : FailureOr<GenericKind>();
    if (failed(kind))
      return nullptr;
    if (*kind == GenericKind::Contraction)
      return producer;
    if (*kind != GenericKind::Elementwise &&
        !(throughReductions && *kind == GenericKind::Reduction))
      return nullptr;
    // getDpsInputs() returns a vector by value: keep it while iterating.
    SmallVector<Value> inputs = producer.getDpsInputs();
    auto next = llvm::find_if(inputs, [](Value in) {
      return isa_and_nonnull<GenericOp>(in.getDefiningOp());
    });
    if (next == inputs.end())
      return nullptr;
    v = *next;
  }
  return nullptr;
}

/// Whether a generic reading the expand_shape `fused` may collapse its
/// loops to read the expand's source instead: when that source is a
/// contraction's result, directly or through its epilogue, so that the
/// consumer (GELU after a linear layer over [batch, tokens]) lines up with
/// the contraction's 2-D output and joins its kernel. (Up to 16 ops: tanh
/// GELU is 8 after the bias; at 4, its last two were kernels of their own.)
bool followsContraction(Value v) {
  return getContractionBefore(v, /*maxHops=*/16, /*throughReductions=*/false);
}

/// Whether a contraction reads an operand broadcast along one of its batch
/// loops (grouped-query attention's keys: one head for several query heads).
bool broadcastsBatch(GenericOp contraction) {
  ContractionDimensions dims = *getContractionDims(contraction);
  MLIRContext *ctx = contraction.getContext();
  // The maps through which the operands read their sources, through views
  // (foldViewProducers has not folded them yet).
  SmallVector<AffineMap> reads;
  for (OpOperand *o : contraction.getDpsInputOperands()) {
    AffineMap map = contraction.getMatchingIndexingMap(o);
    Value v = o->get();
    while (auto view = v.getDefiningOp<GenericOp>()) {
      if (!isViewGeneric(view))
        break;
      map = readThroughView(view, map);
      v = view.getDpsInputOperand(0)->get();
    }
    reads.push_back(map);
  }
  return llvm::any_of(dims.batch, [&](unsigned d) {
    return llvm::any_of(reads, [&](AffineMap map) {
      return !map.getResultPosition(getAffineDimExpr(d, ctx)).has_value();
    });
  });
}

/// Whether `v` is the result of a contraction that broadcasts an operand
/// along a batch loop (broadcastsBatch), or of the elementwise ops and
/// reductions after one (its epilogue, the softmax of its scores). Such a
/// contraction cannot collapse its batch loops, so the ops after it take its
/// loops instead.
bool followsBroadcastContraction(Value v) {
  GenericOp contraction =
      getContractionBefore(v, /*maxHops=*/32, /*throughReductions=*/true);
  return contraction && broadcastsBatch(contraction);
}

/// The input of `op` whose element the body value `v` is (a block argument
/// of an input); null for any other value.
Value getBodyInput(GenericOp op, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != op.getBody() ||
      arg.getArgNumber() >= op.getNumDpsInputs())
    return nullptr;
  return op.getDpsInputOperand(arg.getArgNumber())->get();
}

/// The input of a generic that only converts its one input to another float
/// type (extf, truncf); null for other generics.
Value getCastInput(GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      !llvm::hasSingleElement(op.getBody()->without_terminator()) ||
      !isa<arith::ExtFOp, arith::TruncFOp>(op.getBody()->front()) ||
      op.getBody()->getTerminator()->getOperand(0) !=
          op.getBody()->front().getResult(0) ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return nullptr;
  return getBodyInput(op, op.getBody()->front().getOperand(0));
}

/// Whether `producer` only widens f16, bf16 or fp8 to f32 (exactly) and goes
/// into the generic that reads it through `use`, which then reads the
/// narrow tensor and widens it itself: a contraction (it runs as an
/// f16/bf16/fp8 dot with an f32 accumulator, the same products and sums;
/// torch's decomposition of a half-precision addmm or linear upcasts its
/// operands first, as tileopt's of _scaled_mm does), or any generic where the
/// narrow tensor is the function's own (a bias, widened for a matmul's
/// epilogue; an fp8 weight dequantized: no kernel stores an f32 copy).
/// Widenings of computed values stay: the groups formed around them (an
/// attention's softmax) read them as they are.
bool fusesWidening(GenericOp producer, OpOperand *use) {
  Value input = getCastInput(producer);
  auto consumer = dyn_cast<GenericOp>(use->getOwner());
  if (!input || !consumer || !isa<arith::ExtFOp>(producer.getBody()->front()))
    return false;
  Type from = getElementTypeOrSelf(input.getType());
  Type to = getElementTypeOrSelf(producer->getResult(0).getType());
  if (!(from.isF16() || from.isBF16() || tile::isFp8Type(from)) || !to.isF32())
    return false;
  std::string ignored;
  FailureOr<GenericKind> kind = classify(consumer, ignored);
  return isa<BlockArgument>(input) ||
         (succeeded(kind) && *kind == GenericKind::Contraction);
}

/// The contraction whose result `op` only converts to another float type
/// over the same loops; null otherwise.
GenericOp getRoundedContraction(GenericOp op) {
  Value input = getCastInput(op);
  auto producer = input ? input.getDefiningOp<GenericOp>() : GenericOp();
  std::string ignored;
  FailureOr<GenericKind> kind =
      producer ? classify(producer, ignored) : FailureOr<GenericKind>();
  return succeeded(kind) && *kind == GenericKind::Contraction ? producer
                                                              : GenericOp();
}

/// Whether expanding a contraction's result by `groups` splits only its
/// batch loops.
bool splitsOnlyBatch(GenericOp contraction,
                     ArrayRef<ReassociationIndices> groups) {
  ContractionDimensions dims = *getContractionDims(contraction);
  AffineMap out =
      contraction.getMatchingIndexingMap(contraction.getDpsInitOperand(0));
  return llvm::all_of(llvm::enumerate(groups), [&](auto it) {
    auto d = dyn_cast<AffineDimExpr>(out.getResult(it.index()));
    return it.value().size() == 1 ||
           (d && llvm::is_contained(dims.batch, d.getPosition()));
  });
}

/// Whether a contraction reads through `operand` an expanded tensor whose
/// dimensions that `groups` split off are all batch loops of its.
bool readsSplitBatch(GenericOp contraction, OpOperand *operand,
                     ArrayRef<ReassociationIndices> groups) {
  ContractionDimensions dims = *getContractionDims(contraction);
  AffineMap map = contraction.getMatchingIndexingMap(operand);
  auto isBatch = [&](int64_t j) {
    auto d = dyn_cast<AffineDimExpr>(map.getResult(j));
    return d && llvm::is_contained(dims.batch, d.getPosition());
  };
  return llvm::all_of(groups, [&](const ReassociationIndices &group) {
    return group.size() == 1 || llvm::all_of(group, isBatch);
  });
}

bool mayCollapseLoops(OpOperand *fused) {
  auto expand = fused->get().getDefiningOp<tensor::ExpandShapeOp>();
  auto consumer = dyn_cast<GenericOp>(fused->getOwner());
  if (!expand || !consumer || !followsContraction(expand.getSrc()))
    return false;
  // A contraction reading the expand keeps the batch loops it splits
  // (mayExpandLoops splits them: the product of attention's probabilities
  // with v over batch x heads).
  std::string ignored;
  if (classify(consumer, ignored) == GenericKind::Contraction &&
      readsSplitBatch(consumer, fused, expand.getReassociationIndices()))
    return false;
  // A rounded contraction result expands instead (mayExpandLoops), as does
  // the rounding of a contraction's expanded result, and the contraction
  // with them.
  auto source = expand.getSrc().getDefiningOp<GenericOp>();
  GenericOp contraction = source ? getRoundedContraction(source) : nullptr;
  if (source && !contraction && getCastInput(consumer) == expand.getResult() &&
      classify(source, ignored) == GenericKind::Contraction)
    contraction = source;
  return !contraction ||
         !splitsOnlyBatch(contraction, expand.getReassociationIndices());
}

/// Whether upstream's reshape propagation may expand the loops of the
/// generic at one end of `fused` (a generic reading a collapse_shape, or an
/// expand_shape of a generic's result). It may, except a contraction's M, N
/// or K: a contraction keeps one of each (tile.dot's rows, columns and
/// steps), while its batch loops may split (a bmm over batch x heads).
/// `maxRank`: the rank of the function's deepest tensor before propagation.
bool mayExpandLoops(OpOperand *fused, int64_t maxRank) {
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
  // Expanding and folding back unit dimensions can go on without end (a
  // chain of 1-element index computations grew to 166 loops): no reshape
  // deeper than the function's deepest tensor is propagated.
  if (static_cast<int64_t>(expanded.size()) > maxRank)
    return false;
  // A reshape that only adds or drops unit dimensions splits no loop that
  // matters (kernel formation ignores unit loops); expanding a reduction
  // through it makes the patterns add and fold unit loops without end.
  if (g.getNumReductionLoops() > 0 &&
      llvm::all_of(groups, [&](const ReassociationIndices &group) {
        return llvm::count_if(group,
                              [&](int64_t i) { return expanded[i] != 1; }) <= 1;
      }))
    return false;
  std::string why;
  FailureOr<GenericKind> kind = classify(g, why);
  if (failed(kind) || *kind == GenericKind::Fill)
    return false;
  // A view (a transpose) of a collapse takes the collapsed loops apart, so
  // that its reader may too: the keys of grouped-query attention, a key
  // head broadcast to its query heads and transposed, stay a view.
  if (*kind == GenericKind::View)
    return isa<GenericOp>(fused->getOwner());
  if (*kind != GenericKind::Contraction) {
    // An epilogue keeps the shape of the contraction it follows, and takes
    // it where it reads the contraction's result through a collapse (the
    // scale of attention scores over batch x heads), or that of its
    // epilogue where the contraction broadcasts an operand (the softmax of
    // grouped-query attention, whose scores run over key heads x queries
    // per key head).
    auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
    auto source =
        collapse ? collapse.getSrc().getDefiningOp<GenericOp>() : GenericOp();
    std::string ignored;
    FailureOr<GenericKind> sourceKind =
        source ? classify(source, ignored) : FailureOr<GenericKind>();
    if (isa<GenericOp>(fused->getOwner()) && succeeded(sourceKind) &&
        (*sourceKind == GenericKind::Contraction ||
         followsBroadcastContraction(source->getResult(0))))
      return true;
    // A conversion of a contraction's result (f16 scores rounded from the
    // f32 accumulator) splits the loops the contraction may split, its
    // batch, so that the contraction expands after it.
    if (auto contraction = getRoundedContraction(g);
        contraction && isa<tensor::ExpandShapeOp>(fused->getOwner()))
      return splitsOnlyBatch(contraction, groups);
    return llvm::none_of(g.getDpsInputs(), followsContraction);
  }
  ContractionDimensions dims = *getContractionDims(g);
  for (auto [j, group] : llvm::enumerate(groups)) {
    if (group.size() == 1)
      continue;
    auto d = dyn_cast<AffineDimExpr>(map.getResult(j));
    if (!d || !llvm::is_contained(dims.batch, d.getPosition()))
      return false;
  }
  return true;
}

using UnitDrop = std::pair<SmallVector<ReassociationIndices>, AffineMap>;

/// The reassociation that drops the unit dimensions an indexing map reads
/// at the constant 0, and the map without them; nullopt for a projected
/// permutation or a map with other expressions.
std::optional<UnitDrop> getUnitDrop(AffineMap map, RankedTensorType type) {
  if (map.isProjectedPermutation())
    return std::nullopt;
  SmallVector<ReassociationIndices> groups;
  SmallVector<AffineExpr> kept;
  ReassociationIndices pending; // unit dimensions before the next kept one
  for (auto [j, e] : llvm::enumerate(map.getResults())) {
    pending.push_back(j);
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (c && c.getValue() == 0 && type.getDimSize(j) == 1)
      continue;
    if (!isa<AffineDimExpr>(e))
      return std::nullopt;
    groups.push_back(std::move(pending));
    pending.clear();
    kept.push_back(e);
  }
  if (!pending.empty() && !groups.empty())
    llvm::append_range(groups.back(), pending);
  return std::make_pair(
      groups, AffineMap::get(map.getNumDims(), 0, kept, map.getContext()));
}

/// Reads and writes each operand that a generic indexes at a constant 0 (a
/// unit dimension torch-mlir keeps for broadcasting, such as a softmax's
/// row maximum [rows, 1]) through reshapes that drop those dimensions, so
/// that its indexing maps are projected permutations, which upstream's
/// reshape propagation needs to expand the generic. Only for ops after a
/// contraction that broadcasts an operand along a batch loop (the softmax
/// of grouped-query attention), which take its loops.
struct DropUnitDims : OpRewritePattern<GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GenericOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<std::optional<UnitDrop>> drops;
    for (OpOperand &o : op->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(o.get().getType());
      drops.push_back(type ? getUnitDrop(maps[o.getOperandNumber()], type)
                           : std::nullopt);
    }
    if (llvm::none_of(drops, [](auto &d) { return d.has_value(); }) ||
        llvm::none_of(op.getDpsInputs(), followsBroadcastContraction))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value> operands = op->getOperands();
    for (auto [i, drop] : llvm::enumerate(drops))
      if (drop) {
        operands[i] = tensor::CollapseShapeOp::create(rewriter, loc,
                                                      operands[i], drop->first);
        maps[i] = drop->second;
      }
    unsigned inputs = op.getNumDpsInputs();
    auto generic = GenericOp::create(
        rewriter, loc, ValueRange(operands).drop_front(inputs).getTypes(),
        ValueRange(operands).take_front(inputs),
        ValueRange(operands).drop_front(inputs), maps,
        op.getIteratorTypesArray());
    generic->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.inlineRegionBefore(op.getRegion(), generic.getRegion(),
                                generic.getRegion().end());
    SmallVector<Value> results;
    for (auto [i, result] : llvm::enumerate(generic->getResults())) {
      auto &drop = drops[inputs + i];
      results.push_back(drop ? Value(tensor::ExpandShapeOp::create(
                                   rewriter, loc, op->getResult(i).getType(),
                                   result, drop->first))
                             : Value(result));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

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

/// Gives each reader of an index-only generic (an arange, which the
/// elementwise fusion below recomputes where it is read) its own copy, so that
/// each copy folds into its reader through that reader's reshape (an arange
/// that CSE shared between a causal mask's rows and keys).
void copyIndexOnlyPerReader(GenericOp op) {
  if (op->getNumResults() != 1 ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      llvm::any_of(op.getDpsInputs(),
                   [](Value v) { return isa<ShapedType>(v.getType()); }) ||
      !getCapturedTensors(op).empty() ||
      op.getBody()->getOps<IndexOp>().empty())
    return;
  SmallVector<OpOperand *> uses = llvm::map_to_vector(
      op->getResult(0).getUses(), [](OpOperand &use) { return &use; });
  if (uses.size() < 2)
    return;
  OpBuilder b(op);
  for (OpOperand *use : llvm::drop_begin(uses))
    use->set(b.clone(*op)->getResult(0));
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

/// For a reshape that only adds or drops unit dimensions, the dimension of
/// its wide side (a collapse's source, an expand's result) that each
/// reassociation group's index lands on: the group's one dimension that is not
/// unit, or its last where all are; nullopt for any other op.
std::optional<SmallVector<int64_t>> unitReshapeDims(Operation *op) {
  ArrayRef<int64_t> wide;
  SmallVector<ReassociationIndices> groups;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    wide = collapse.getSrcType().getShape();
    groups = collapse.getReassociationIndices();
  } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    wide = expand.getResultType().getShape();
    groups = expand.getReassociationIndices();
  } else {
    return std::nullopt;
  }
  SmallVector<int64_t> dims;
  for (const ReassociationIndices &group : groups) {
    if (llvm::count_if(group, [&](int64_t d) { return wide[d] != 1; }) > 1)
      return std::nullopt;
    int64_t kept = group.back();
    for (int64_t d : group)
      if (wide[d] != 1)
        kept = d;
    dims.push_back(kept);
  }
  return dims;
}

/// Whether element indices of `view`'s result map to its source's with index
/// arithmetic alone: a slice with static offsets and strides and no dropped
/// dimensions, or a reshape that only adds or drops unit dimensions.
bool mapsIndicesToSource(Operation *view) {
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(view))
    return slice.getSourceType().getRank() == slice.getResultType().getRank() &&
           !ShapedType::isDynamicShape(slice.getStaticOffsets()) &&
           !ShapedType::isDynamicShape(slice.getStaticStrides());
  return unitReshapeDims(view).has_value();
}

/// The indices into `view`'s source of the element at `indices` of its result
/// (`view` satisfies mapsIndicesToSource).
SmallVector<Value> sourceIndices(OpBuilder &b, Location loc, Operation *view,
                                 ArrayRef<Value> indices) {
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(view)) {
    SmallVector<Value> at(indices);
    for (auto [i, offset, stride] :
         llvm::enumerate(slice.getStaticOffsets(), slice.getStaticStrides())) {
      if (stride != 1)
        at[i] = arith::MulIOp::create(
            b, loc, at[i], arith::ConstantIndexOp::create(b, loc, stride));
      if (offset != 0)
        at[i] = arith::AddIOp::create(
            b, loc, at[i], arith::ConstantIndexOp::create(b, loc, offset));
    }
    return at;
  }
  SmallVector<int64_t> dims = *unitReshapeDims(view);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(view)) {
    // The source's unit dimensions are at 0.
    SmallVector<Value> at(collapse.getSrcType().getRank(),
                          arith::ConstantIndexOp::create(b, loc, 0));
    for (auto [g, d] : llvm::enumerate(dims))
      at[d] = indices[g];
    return at;
  }
  return llvm::map_to_vector(dims, [&](int64_t d) { return indices[d]; });
}

/// The most operations of a producer that a gather recomputes, and the most
/// that a generic's body takes from the producers inlined into its gathers:
/// past them, storing the producer's result costs less than recomputing it.
constexpr size_t kMaxInlinedProducer = 64;
constexpr size_t kMaxGatherBody = 400;

/// Reads through a gather (a `tensor.extract` in a body) into the
/// elementwise generic that produced the gathered tensor: its body is
/// recomputed for the gathered elements only, so a cross-entropy's target
/// log-probability x[i, t] - logsumexp[i] is read from x and the per-row
/// logsumexp instead of from a stored log-softmax. Slices and unit-dimension
/// reshapes between them are read through (a slice assigned to and then read
/// back, as a slice assignment's select does).
bool inlineIntoGather(tensor::ExtractOp extract) {
  Value gathered = extract.getTensor();
  SmallVector<Operation *> views;
  while (Operation *view = gathered.getDefiningOp()) {
    if (!mapsIndicesToSource(view))
      break;
    views.push_back(view);
    gathered = view->getOperand(0);
  }
  auto result = dyn_cast<OpResult>(gathered);
  auto producer = result ? dyn_cast<GenericOp>(result.getOwner()) : GenericOp();
  auto consumer = dyn_cast<GenericOp>(extract->getParentOp());
  if (!producer || !consumer ||
      producer.getNumLoops() != producer.getNumParallelLoops() ||
      !producer.hasPureTensorSemantics())
    return false;
  // Each inlining copies the producer's body: the bounds keep a chain of
  // producers that each read the one before twice (slices assigned to in
  // turn) from growing the body exponentially.
  size_t producerOps = producer.getBody()->getOperations().size();
  if (producerOps > kMaxInlinedProducer ||
      consumer.getBody()->getOperations().size() + producerOps > kMaxGatherBody)
    return false;
  AffineMap out = producer.getIndexingMapMatchingResult(result);
  if (!out.isPermutation())
    return false;
  for (OpOperand &init : producer.getDpsInitsMutable())
    if (producer.payloadUsesValueFromOperand(&init))
      return false;
  OpBuilder b(extract);
  Location loc = extract.getLoc();
  SmallVector<Value> indices(extract.getIndices());
  for (Operation *view : views)
    indices = sourceIndices(b, loc, view, indices);
  SmallVector<Value> loops(producer.getNumLoops());
  for (auto [j, e] : llvm::enumerate(out.getResults()))
    loops[cast<AffineDimExpr>(e).getPosition()] = indices[j];
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
/// the generics and views nothing reads any more.
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
    if (op->use_empty() &&
        (isa<tensor::ExtractSliceOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp>(op) ||
         (isa<GenericOp>(op) && cast<GenericOp>(op).hasPureTensorSemantics())))
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
  explicit Former(int64_t maxHeadDim) : maxHeadDim(maxHeadDim) {}
  LogicalResult run(func::FuncOp func);

private:
  int64_t maxHeadDim; // the pass's max-head-dim
  SmallVector<Group> groups;
  DenseMap<Value, Held> held;
  DenseMap<Value, llvm::SmallDenseSet<int>> producers;
  /// Groups joined into another (attention), by id.
  DenseMap<int64_t, int64_t> joinedInto;

  bool dependsOn(const llvm::SmallDenseSet<int> &from, int target) const;
  bool tryJoin(GenericOp op, GenericKind kind, Group &g,
               SmallVector<int64_t> &space, bool sibling) const;
  void add(GenericOp op, Group &g, ArrayRef<int64_t> space);
  void anchor(GenericOp op, GenericKind kind);
  bool tryAttention(Group &out);

public:
  /// Joins the three groups of each attention (scores, softmax, output)
  /// into one.
  void formAttention();
  /// Writes each group's decisions on its ops.
  void finish(func::FuncOp func);
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
  // An op that spans new dimensions but not all of the group's parallel
  // ones would cross them: every program would compute the op once per
  // block of the group's dimensions it lacks, and the group's earlier values
  // once per block of the new ones (a mixture of experts' gathers of the
  // up and down projections' weights, [tokens, 256, 64] and [tokens, 64,
  // 128], crossed into [tokens, 256, 64, 128]: 128x the work).
  bool lacksParallel =
      llvm::any_of(llvm::seq<int64_t>(g.space.size()), [&](int64_t t) {
        return g.space[t] > 1 && !used.test(t) && !g.reduced[t];
      });
  if (next > (int64_t)g.space.size() && lacksParallel)
    return false;
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
    ContractionDimensions dims = *getContractionDims(op);
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

/// `v` without the reshapes of unit dimensions it was read through (those
/// kernel formation keeps in registers: tagged with their group).
Value skipReshapes(Value v) {
  while (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
             v.getDefiningOp()) &&
         v.getDefiningOp()->hasAttr(kGroupAttr))
    v = v.getDefiningOp()->getOperand(0);
  return v;
}

/// The generic whose body is one op of type OpT on two inputs, yielded:
/// those inputs (in the op's operand order); nullopt otherwise.
template <typename OpT>
std::optional<std::pair<Value, Value>> matchBinary(GenericOp op) {
  if (!op || op.getNumDpsInits() != 1 || op.getNumDpsInputs() != 2)
    return std::nullopt;
  Block *body = op.getBody();
  if (!llvm::hasSingleElement(body->without_terminator()))
    return std::nullopt;
  auto inner = dyn_cast<OpT>(body->front());
  if (!inner || body->getTerminator()->getOperand(0) != inner->getResult(0))
    return std::nullopt;
  Value a = getBodyInput(op, inner->getOperand(0));
  Value b = getBodyInput(op, inner->getOperand(1));
  if (!a || !b)
    return std::nullopt;
  return std::make_pair(a, b);
}

/// A reduction with one output, combiner `CombinerT`, an initial value that
/// is the combiner's identity and input `input`.
template <typename... CombinerT>
bool isRowReduction(GenericOp op, Value input) {
  std::string why;
  FailureOr<GenericKind> kind = classify(op, why);
  if (failed(kind) || *kind != GenericKind::Reduction ||
      op.getNumDpsInits() != 1 || op.getNumDpsInputs() != 1 ||
      skipReshapes(op.getDpsInputOperand(0)->get()) != skipReshapes(input))
    return false;
  Operation *c = getCombiner(op, 0);
  if (!c || !isa<CombinerT...>(c))
    return false;
  Value init = getScalarSource(op.getDpsInitOperand(0)->get());
  Attribute attr;
  return init && matchPattern(init, m_Constant(&attr)) &&
         attr == getCombinerIdentity(c);
}

/// where(rows, 0, p): a generic selecting a zero constant where its first
/// (boolean) input holds, else its second.
bool matchZeroRows(GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !llvm::hasSingleElement(op.getBody()->without_terminator()))
    return false;
  auto select = dyn_cast<arith::SelectOp>(op.getBody()->front());
  FloatAttr zero;
  return select && op.getBody()->getTerminator()->getOperand(0) == select &&
         select.getCondition() == op.getBody()->getArgument(0) &&
         select.getFalseValue() == op.getBody()->getArgument(1) &&
         matchPattern(select.getTrueValue(), m_Constant(&zero)) &&
         zero.getValue().isZero();
}

/// `softmax(x) v` over the groups of `values` (the product with v), the
/// softmax's and the scores' (x, through elementwise ops of q k^T): joins
/// them into `values` when the softmax is the one torch-mlir writes
/// (`e = exp(x - max(x)); e / sum(e)`, over the keys that the product
/// with v reduces) and nothing but the product reads the scores or the
/// softmax.
bool Former::tryAttention(Group &out) {
  GenericOp pv = out.members.front().first;
  auto dims = getContractionDims(pv);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || !isZeroTensor(pv.getDpsInitOperand(0)->get()))
    return false;
  MLIRContext *ctx = pv.getContext();
  // The probabilities p: the input that runs over m and k, held by a group.
  OpOperand *probs = nullptr;
  for (OpOperand *o : pv.getDpsInputOperands())
    if (pv.getMatchingIndexingMap(o)
            .getResultPosition(getAffineDimExpr(dims->m[0], ctx))
            .has_value())
      probs = o;
  if (!probs)
    return false;
  auto heldProbs = held.find(probs->get());
  if (heldProbs == held.end() || heldProbs->second.group == out.id)
    return false;
  Group &softmax = groups[heldProbs->second.group];
  if (softmax.contraction)
    return false;
  // The keys: the softmax's dimension that the product reduces.
  std::optional<unsigned> kPos =
      pv.getMatchingIndexingMap(probs).getResultPosition(
          getAffineDimExpr(dims->k[0], ctx));
  if (!kPos)
    return false;
  int64_t keys = heldProbs->second.dims[*kPos];
  if (keys < 0)
    return false;
  auto spaceOf = [&](Group &g, GenericOp op) -> ArrayRef<int64_t> {
    for (auto &[member, space] : g.members)
      if (member == op)
        return space;
    return {};
  };
  auto inGroup = [&](Group &g, Value v) {
    auto op = skipReshapes(v).getDefiningOp<GenericOp>();
    return op && !spaceOf(g, op).empty();
  };
  // Reduces exactly the keys.
  auto reducesKeys = [&](GenericOp op) {
    ArrayRef<int64_t> space = spaceOf(softmax, op);
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
      if (!isParallel(it) && space[d] != keys)
        return false;
    return llvm::count_if(op.getIteratorTypesArray(),
                          [](auto it) { return !isParallel(it); }) == 1;
  };
  // p = e / sum(e), or torch's safe softmax: p with 0 for the rows whose
  // every score is -inf, where(all(x == -inf), 0, p); either rounded to v's
  // type (f16 attention whose softmax runs in f32; an f32 mask makes the
  // safe softmax's select f32, rounded after it).
  Value p = skipReshapes(probs->get());
  GenericOp zeroRows, allMasked, isMasked, probsCast;
  auto matchCast = [&] {
    if (auto cast = p.getDefiningOp<GenericOp>();
        cast && inGroup(softmax, p) && getCastInput(cast)) {
      probsCast = cast;
      p = skipReshapes(getCastInput(cast));
    }
  };
  matchCast();
  bool castLast = probsCast != nullptr;
  if (auto select = p.getDefiningOp<GenericOp>();
      select && inGroup(softmax, p) && matchZeroRows(select)) {
    zeroRows = select;
    allMasked = skipReshapes(select.getDpsInputOperand(0)->get())
                    .getDefiningOp<GenericOp>();
    p = skipReshapes(select.getDpsInputOperand(1)->get());
  }
  if (!probsCast)
    matchCast();
  auto normalize = p.getDefiningOp<GenericOp>();
  auto division = matchBinary<arith::DivFOp>(normalize);
  if (!division || !inGroup(softmax, p))
    return false;
  Value e = skipReshapes(division->first);
  auto rowSum = skipReshapes(division->second).getDefiningOp<GenericOp>();
  if (!rowSum || !inGroup(softmax, rowSum->getResult(0)) ||
      !isRowReduction<arith::AddFOp>(rowSum, e) || !reducesKeys(rowSum))
    return false;
  // e = exp(x - max(x)), in one generic or two.
  auto expOp = e.getDefiningOp<GenericOp>();
  if (!expOp || !inGroup(softmax, e) || expOp.getNumDpsInits() != 1)
    return false;
  SmallVector<GenericOp> chain = {expOp};
  std::optional<std::pair<Value, Value>> diff;
  {
    Block *body = expOp.getBody();
    auto exp = dyn_cast_or_null<math::ExpOp>(
        body->getTerminator()->getOperand(0).getDefiningOp());
    if (!exp)
      return false;
    Value arg = exp.getOperand();
    if (auto sub = arg.getDefiningOp<arith::SubFOp>()) {
      if (sub->getBlock() != body ||
          !llvm::hasSingleElement(llvm::make_range(
              body->begin(), Block::iterator(exp.getOperation()))) ||
          expOp.getNumDpsInputs() != 2)
        return false;
      Value lhs = getBodyInput(expOp, sub.getLhs());
      Value rhs = getBodyInput(expOp, sub.getRhs());
      if (!lhs || !rhs)
        return false;
      diff = std::make_pair(lhs, rhs);
    } else {
      Value in = getBodyInput(expOp, arg);
      if (!in || expOp.getNumDpsInputs() != 1 ||
          !llvm::hasSingleElement(body->without_terminator()))
        return false;
      auto subOp = skipReshapes(in).getDefiningOp<GenericOp>();
      diff = matchBinary<arith::SubFOp>(subOp);
      if (!diff || !inGroup(softmax, subOp.getResult(0)))
        return false;
      chain.push_back(subOp);
    }
  }
  Value x = skipReshapes(diff->first);
  auto rowMax = skipReshapes(diff->second).getDefiningOp<GenericOp>();
  if (!rowMax || !inGroup(softmax, rowMax->getResult(0)) ||
      !isRowReduction<arith::MaximumFOp, arith::MaxNumFOp>(rowMax, x) ||
      !reducesKeys(rowMax))
    return false;
  if (zeroRows) {
    // all(x == -inf) over the keys.
    if (!allMasked || allMasked.getNumDpsInputs() != 1 ||
        !inGroup(softmax, allMasked->getResult(0)) ||
        !isRowReduction<arith::AndIOp>(allMasked,
                                       allMasked.getDpsInputs().front()) ||
        !reducesKeys(allMasked))
      return false;
    isMasked = skipReshapes(allMasked.getDpsInputs().front())
                   .getDefiningOp<GenericOp>();
    if (!isMasked || isMasked.getNumDpsInputs() != 1 ||
        !llvm::hasSingleElement(isMasked.getBody()->without_terminator()))
      return false;
    Value xSource = x;
    if (auto widen = x.getDefiningOp<GenericOp>(); widen && getCastInput(widen))
      xSource = skipReshapes(getCastInput(widen));
    Value masked = skipReshapes(isMasked.getDpsInputs().front());
    if (masked != x && masked != xSource)
      return false;
    auto cmp = dyn_cast<arith::CmpFOp>(isMasked.getBody()->front());
    FloatAttr limit;
    if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::OEQ ||
        cmp.getLhs() != isMasked.getBody()->getArgument(0) ||
        !matchPattern(cmp.getRhs(), m_Constant(&limit)) ||
        !limit.getValue().isInfinity() || !limit.getValue().isNegative() ||
        isMasked.getBody()->getTerminator()->getOperand(0) != cmp)
      return false;
  }
  // The scores group: the contraction group whose result the softmax reads.
  int scoresId = -1;
  for (auto &[member, space] : softmax.members)
    for (Value v : member->getOperands()) {
      auto h = held.find(v);
      if (h == held.end() || h->second.group == softmax.id)
        continue;
      if (!groups[h->second.group].contraction ||
          (scoresId >= 0 && scoresId != h->second.group))
        return false;
      scoresId = h->second.group;
    }
  auto heldX = held.find(x);
  if (scoresId < 0 && heldX != held.end() &&
      groups[heldX->second.group].contraction)
    scoresId = heldX->second.group;
  if (scoresId < 0 || scoresId == out.id)
    return false;
  Group &scores = groups[scoresId];
  GenericOp qk = scores.members.front().first;
  if (qk->hasAttr(kAttentionAttr))
    return false; // already the output of another attention
  auto qkDims = getContractionDims(qk);
  if (failed(qkDims) || qkDims->m.size() != 1 || qkDims->n.size() != 1 ||
      qkDims->k.size() != 1)
    return false;
  SmallVector<int64_t> qkLoops = getLoopSizes(qk), pvLoops = getLoopSizes(pv);
  if (nextPowerOf2(qkLoops[qkDims->k[0]]) > maxHeadDim ||
      nextPowerOf2(pvLoops[dims->n[0]]) > maxHeadDim)
    return false;
  // Nothing outside the three groups reads the scores or the softmax; the
  // softmax's special values are read only along the chain.
  llvm::SmallDenseSet<Operation *> special = {normalize, rowSum, rowMax};
  special.insert(chain.begin(), chain.end());
  if (probsCast)
    special.insert(probsCast);
  if (zeroRows) {
    if (!inGroup(scores, isMasked->getResult(0)) &&
        !inGroup(softmax, isMasked->getResult(0)))
      return false;
    special.insert(zeroRows);
    special.insert(allMasked);
    special.insert(isMasked);
  }
  // The chain from the division to the product.
  SmallVector<Operation *> tail = {normalize};
  if (probsCast && !castLast)
    tail.push_back(probsCast);
  if (zeroRows)
    tail.push_back(zeroRows);
  if (probsCast && castLast)
    tail.push_back(probsCast);
  Operation *last = tail.back();
  std::function<bool(Value, function_ref<bool(Operation *)>)> usersOk =
      [&](Value v, function_ref<bool(Operation *)> ok) {
        return llvm::all_of(v.getUsers(), [&](Operation *u) {
          if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(u))
            return usersOk(u->getResult(0), ok);
          return ok(u);
        });
      };
  auto memberOf = [&](Group &g, Operation *u) {
    auto op = dyn_cast<GenericOp>(u);
    return op && !spaceOf(g, op).empty();
  };
  for (Group *g : {&scores, &softmax})
    for (auto &[member, space] : g->members) {
      if (member == last)
        continue;
      auto ok = [&](Operation *u) {
        if (special.contains(member))
          return special.contains(u) && u != member;
        return memberOf(scores, u) || memberOf(softmax, u);
      };
      for (Value result : member->getResults())
        if (!usersOk(result, ok))
          return false;
    }
  // The chain, one user each.
  for (auto [from, to] : llvm::zip(tail, llvm::drop_begin(tail)))
    if (!usersOk(from->getResult(0), [&](Operation *u) { return u == to; }))
      return false;
  if (!usersOk(last->getResult(0),
               [&](Operation *u) { return u == pv.getOperation(); }))
    return false;
  // The joined space: the softmax's, plus the scores' k and the output's n.
  // Each scores dimension that the softmax reads the scores over.
  auto mapInto = [&](Value v, GenericOp reader, ArrayRef<int64_t> readerSpace,
                     SmallVector<int64_t> &map) -> bool {
    auto h = held.find(v);
    if (h == held.end())
      return false;
    for (OpOperand &o : reader->getOpOperands()) {
      if (o.get() != v)
        continue;
      for (auto [j, e] :
           llvm::enumerate(reader.getMatchingIndexingMap(&o).getResults())) {
        auto d = dyn_cast<AffineDimExpr>(e);
        int64_t fromDim = h->second.dims[j];
        if (!d || fromDim < 0 || readerSpace[d.getPosition()] < 0)
          continue;
        if (map[fromDim] >= 0 && map[fromDim] != readerSpace[d.getPosition()])
          return false;
        map[fromDim] = readerSpace[d.getPosition()];
      }
    }
    return true;
  };
  SmallVector<int64_t> scoresMap(scores.space.size(), -1);
  bool read = false;
  for (auto &[member, space] : softmax.members)
    for (Value v : member->getOperands())
      if (auto h = held.find(v);
          h != held.end() && h->second.group == scoresId) {
        if (!mapInto(v, member, space, scoresMap))
          return false;
        read = true;
      }
  if (!read)
    return false;
  // The queries and keys are dimensions of the softmax, but for a single
  // query (decoding), which the softmax runs without.
  ArrayRef<int64_t> qkSpace = scores.members.front().second;
  ArrayRef<int64_t> pvSpace = out.members.front().second;
  if (qkSpace[qkDims->m[0]] < 0 || qkSpace[qkDims->n[0]] < 0 ||
      qkSpace[qkDims->k[0]] < 0 || pvSpace[dims->n[0]] < 0 ||
      pvSpace[dims->k[0]] < 0 ||
      (scoresMap[qkSpace[qkDims->m[0]]] < 0 && qkLoops[qkDims->m[0]] != 1) ||
      scoresMap[qkSpace[qkDims->n[0]]] < 0)
    return false;
  SmallVector<int64_t> outMap(out.space.size(), -1);
  {
    // The product's loops over the softmax's space, through p's dims.
    AffineMap map = pv.getMatchingIndexingMap(probs);
    for (auto [j, e] : llvm::enumerate(map.getResults())) {
      auto d = dyn_cast<AffineDimExpr>(e);
      int64_t to = heldProbs->second.dims[j];
      if (!d || pvSpace[d.getPosition()] < 0 || to < 0)
        continue;
      outMap[pvSpace[d.getPosition()]] = to;
    }
  }
  Group joined = softmax;
  auto extend = [&](Group &from, SmallVector<int64_t> &map) {
    for (auto [s, to] : llvm::enumerate(map))
      if (to < 0) {
        to = joined.space.size();
        joined.space.push_back(from.space[s]);
        joined.reduced.resize(joined.space.size());
        if (from.reduced[s])
          joined.reduced.set(to);
      } else if (joined.space[to] != from.space[s]) {
        return false;
      }
    return true;
  };
  if (!extend(scores, scoresMap) || !extend(out, outMap))
    return false;
  auto remap = [](ArrayRef<int64_t> space, ArrayRef<int64_t> map) {
    return llvm::map_to_vector(space,
                               [&](int64_t s) { return s < 0 ? s : map[s]; });
  };
  SmallVector<std::pair<GenericOp, SmallVector<int64_t>>> members;
  for (auto &[op, space] : scores.members)
    members.push_back({op, remap(space, scoresMap)});
  llvm::append_range(members, softmax.members);
  for (auto &[op, space] : out.members)
    members.push_back({op, remap(space, outMap)});
  joined.members = std::move(members);
  joined.id = out.id;
  joined.contraction = true;
  joined.deps = out.deps;
  joined.deps.insert(scores.deps.begin(), scores.deps.end());
  joined.deps.insert(softmax.deps.begin(), softmax.deps.end());
  joined.deps.erase(scores.id);
  joined.deps.erase(softmax.id);
  joinedInto[scores.id] = joinedInto[softmax.id] = out.id;
  Builder b(ctx);
  qk->setAttr(kAttentionAttr, b.getStringAttr(kScores));
  rowMax->setAttr(kAttentionAttr, b.getStringAttr(kRowMax));
  rowSum->setAttr(kAttentionAttr, b.getStringAttr(kRowSum));
  normalize->setAttr(kAttentionAttr, b.getStringAttr(kNormalize));
  pv->setAttr(kAttentionAttr, b.getStringAttr(kOutput));
  if (probsCast)
    probsCast->setAttr(kAttentionAttr, b.getStringAttr(kProbsCast));
  if (zeroRows) {
    zeroRows->setAttr(kAttentionAttr, b.getStringAttr(kZeroMaskedRows));
    allMasked->setAttr(kAttentionAttr, b.getStringAttr(kMaskedRows));
    isMasked->setAttr(kAttentionAttr, b.getStringAttr(kMaskedRows));
  }
  // The values the three groups held in registers are now the joined one's.
  for (auto &[v, h] : held) {
    if (h.group == scores.id)
      h = {out.id, remap(h.dims, scoresMap)};
    else if (h.group == softmax.id)
      h.group = out.id;
    else if (h.group == out.id)
      h.dims = remap(h.dims, outMap);
  }
  out = std::move(joined);
  scores.members.clear();
  softmax.members.clear();
  for (Group &g : groups)
    if (g.deps.erase(scores.id) + g.deps.erase(softmax.id))
      g.deps.insert(out.id);
  return true;
}

void Former::formAttention() {
  for (Group &g : groups)
    if (g.contraction && !g.members.empty() &&
        !g.members.front().first->hasAttr(kAttentionAttr))
      (void)tryAttention(g);
}

void Former::finish(func::FuncOp func) {
  // Reshapes of registers (tagged by run) follow their group.
  func.walk([&](Operation *op) {
    auto id = op->getAttrOfType<IntegerAttr>(kGroupAttr);
    if (id && joinedInto.count(id.getInt()))
      op->setAttr(kGroupAttr,
                  Builder(op).getI64IntegerAttr(joinedInto[id.getInt()]));
  });
  for (Group &g : groups) {
    if (g.members.empty())
      continue; // joined into another group
    // Number the space's dimensions in the loop order of the op with the
    // most of them (the one whose tiles are largest), so that the innermost
    // dimension of its operands is the innermost of the tiles.
    auto largest = llvm::max_element(g.members, [](auto &a, auto &b) {
      return llvm::count_if(a.second, [](int64_t s) { return s >= 0; }) <
             llvm::count_if(b.second, [](int64_t s) { return s >= 0; });
    });
    SmallVector<int64_t> inner = llvm::to_vector(largest->second);
    // An attention's output (the product with v) orders it, its head
    // dimension just before its rows and keys: the scores are (rows, keys)
    // tiles and the row statistics (rows, 1) tiles whose other dimensions
    // are all leading units, which the dots' layouts keep in registers.
    auto output = llvm::find_if(g.members, [](auto &m) {
      auto role = m.first->template getAttrOfType<StringAttr>(kAttentionAttr);
      return role && role.getValue() == kOutput;
    });
    if (output != g.members.end()) {
      ContractionDimensions dims = *getContractionDims(output->first);
      int64_t rows = output->second[dims.m[0]];
      int64_t keys = output->second[dims.k[0]];
      int64_t head = output->second[dims.n[0]];
      inner.clear();
      for (int64_t s : output->second) {
        if (s == rows)
          inner.append({head, rows, keys});
        else if (s != head && s != keys)
          inner.push_back(s);
      }
    }
    SmallVector<int64_t> order;
    for (size_t s = 0; s < g.space.size(); ++s)
      if (!llvm::is_contained(inner, (int64_t)s))
        order.push_back(s);
    for (int64_t s : inner)
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
        if (p != producers.end()) {
          // Copied first: inserting may move the map's entries.
          llvm::SmallDenseSet<int> from = p->second;
          producers[generic.getResult(0)] = std::move(from);
        }
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
      if (p != producers.end()) {
        llvm::SmallDenseSet<int> from = p->second;
        producers[result] = std::move(from);
      }
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
  using TileFormKernelsBase::TileFormKernelsBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("unsupported: a function with control flow");
        return signalPassFailure();
      }
      func.walk([](GenericOp op) { computeHalfBodyInF32(op); });
      // Fold views into their readers first, so that copies inserted for
      // reshapes read the original buffers.
      func.walk([](tensor::ConcatOp op) { rewriteConcat(op); });
      func.walk([](GenericOp op) { dropDeadResults(op); });
      for (auto op : llvm::to_vector(func.getOps<GenericOp>()))
        copyIndexOnlyPerReader(op);
      int64_t maxRank = 0;
      func.walk([&](Operation *op) {
        for (Type type : op->getResultTypes())
          if (auto tensor = dyn_cast<RankedTensorType>(type))
            maxRank = std::max(maxRank, tensor.getRank());
      });
      for (Type type : func.getArgumentTypes())
        if (auto tensor = dyn_cast<RankedTensorType>(type))
          maxRank = std::max(maxRank, tensor.getRank());
      // Move reshapes out of the way where they split loops, so that a bmm
      // over collapsed batch x heads reads its 4-D operands (transposed
      // views, no copies) and its consumers line up with it.
      RewritePatternSet patterns(&getContext());
      linalg::populateFoldReshapeOpsByExpansionPatterns(
          patterns, [maxRank](OpOperand *fused) {
            return mayExpandLoops(fused, maxRank);
          });
      patterns.add<DropUnitDims>(&getContext());
      // Index-only values (a causal mask from iotas) are recomputed where
      // they are read rather than stored; gathers (a concatenation) are not:
      // they would turn a contraction reading them into a reduction of
      // gathered elements. Some widenings of f16/bf16 go where they are read
      // (fusesWidening).
      linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *o) {
        auto producer = o->get().getDefiningOp<GenericOp>();
        if (producer && fusesWidening(producer, o))
          return true;
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
      Former former(maxHeadDim);
      if (failed(former.run(func)))
        return signalPassFailure();
      if (fuseAttention)
        former.formAttention();
      former.finish(func);
    }
  }
};

} // namespace
