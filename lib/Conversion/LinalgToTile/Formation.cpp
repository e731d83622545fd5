//===- Formation.cpp - classifying linalg ops for kernel formation --------===//

#include "Formation.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::linalg;

namespace tileopt::formation {

int64_t nextPowerOf2(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

SmallVector<Value> getCapturedTensors(GenericOp op) {
  SmallVector<Value> captured;
  op.getBody()->walk([&](tensor::ExtractOp extract) {
    if (!llvm::is_contained(captured, extract.getTensor()))
      captured.push_back(extract.getTensor());
  });
  return captured;
}

SmallVector<int64_t> getLoopSizes(GenericOp op) {
  return op.getStaticLoopRanges();
}

/// True if `v`, a value of `op`'s body, depends on an output block argument.
static bool dependsOnOutputs(Value v, GenericOp op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op.getBody() &&
           arg.getArgNumber() >= op.getNumDpsInputs();
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != op.getBody())
    return false;
  return llvm::any_of(def->getOperands(),
                      [&](Value o) { return dependsOnOutputs(o, op); });
}

Operation *getCombiner(GenericOp op, unsigned i) {
  BlockArgument out = op.getRegionOutputArgs()[i];
  auto yield = cast<YieldOp>(op.getBody()->getTerminator());
  Operation *c = yield.getOperand(i).getDefiningOp();
  if (!c || c->getBlock() != op.getBody() || c->getNumOperands() != 2 ||
      c->getNumResults() != 1 || !getCombinerIdentity(c))
    return nullptr;
  Value other;
  if (c->getOperand(0) == out)
    other = c->getOperand(1);
  else if (c->getOperand(1) == out)
    other = c->getOperand(0);
  else
    return nullptr;
  if (dependsOnOutputs(other, op))
    return nullptr;
  return c;
}

TypedAttr getCombinerIdentity(Operation *c) {
  if (c->getNumResults() != 1)
    return nullptr;
  Type t = c->getResult(0).getType();
  if (auto ft = dyn_cast<FloatType>(t)) {
    const llvm::fltSemantics &sem = ft.getFloatSemantics();
    if (isa<arith::AddFOp>(c))
      return FloatAttr::get(ft, llvm::APFloat::getZero(sem));
    if (isa<arith::MulFOp>(c))
      return FloatAttr::get(ft, llvm::APFloat::getOne(sem));
    if (isa<arith::MaximumFOp, arith::MaxNumFOp>(c))
      return FloatAttr::get(ft, llvm::APFloat::getInf(sem, /*Negative=*/true));
    if (isa<arith::MinimumFOp, arith::MinNumFOp>(c))
      return FloatAttr::get(ft, llvm::APFloat::getInf(sem));
    return nullptr;
  }
  auto it = dyn_cast<IntegerType>(t);
  if (!it)
    return nullptr;
  unsigned w = it.getWidth();
  if (isa<arith::AddIOp, arith::OrIOp, arith::XOrIOp, arith::MaxUIOp>(c))
    return IntegerAttr::get(it, llvm::APInt::getZero(w));
  if (isa<arith::MulIOp>(c))
    return IntegerAttr::get(it, llvm::APInt(w, 1));
  if (isa<arith::AndIOp, arith::MinUIOp>(c))
    return IntegerAttr::get(it, llvm::APInt::getAllOnes(w));
  if (isa<arith::MaxSIOp>(c))
    return IntegerAttr::get(it, llvm::APInt::getSignedMinValue(w));
  if (isa<arith::MinSIOp>(c))
    return IntegerAttr::get(it, llvm::APInt::getSignedMaxValue(w));
  return nullptr;
}

Value getFillValue(GenericOp op) {
  if (op.getNumLoops() != op.getNumParallelLoops() || op.getNumDpsInits() != 1)
    return nullptr;
  for (OpOperand *in : op.getDpsInputOperands())
    if (isa<ShapedType>(in->get().getType()))
      return nullptr;
  auto yield = cast<YieldOp>(op.getBody()->getTerminator());
  Value v = yield.getOperand(0);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != op.getBody() ||
        arg.getArgNumber() >= op.getNumDpsInputs())
      return nullptr;
    return op.getDpsInputOperand(arg.getArgNumber())->get();
  }
  Operation *def = v.getDefiningOp();
  if (def->getBlock() != op.getBody())
    return v;
  if (matchPattern(v, m_Constant()))
    return v;
  return nullptr;
}

Value getScalarSource(Value v) {
  while (isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
      v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  if (auto generic = v.getDefiningOp<GenericOp>()) {
    std::string why;
    FailureOr<GenericKind> kind = classify(generic, why);
    if (succeeded(kind) && *kind == GenericKind::Fill &&
        !generic->hasAttr(kGroupAttr))
      return getFillValue(generic);
    return nullptr;
  }
  DenseElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
    return v;
  return nullptr;
}

bool isZeroTensor(Value tensor) {
  Value v = getScalarSource(tensor);
  return v && (matchPattern(v, m_Zero()) || matchPattern(v, m_AnyZeroFloat()));
}

FailureOr<ContractionDimensions> getContractionDims(GenericOp op) {
  FailureOr<ContractionDimensions> dims = inferContractionDims(op);
  if (failed(dims) || dims->m.empty() || dims->n.empty())
    return dims;
  SmallVector<int64_t> sizes = op.getStaticLoopRanges();
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  MLIRContext *ctx = op.getContext();
  auto keepOne = [&](SmallVector<unsigned, 2> &loops) {
    auto innermost = [&](unsigned d) {
      return *out.getResultPosition(getAffineDimExpr(d, ctx));
    };
    unsigned kept = *llvm::max_element(loops, [&](unsigned a, unsigned b) {
      return std::make_pair(sizes[a], innermost(a)) <
             std::make_pair(sizes[b], innermost(b));
    });
    for (unsigned d : loops)
      if (d != kept)
        dims->batch.push_back(d);
    loops = {kept};
  };
  keepOne(dims->m);
  keepOne(dims->n);
  llvm::sort(dims->batch);
  return dims;
}

/// Each result is a loop dimension (at most once) or the constant 0.
static bool isProjectedPermutationWithZeros(AffineMap map) {
  llvm::SmallBitVector seen(map.getNumDims());
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (seen.test(d.getPosition()))
        return false;
      seen.set(d.getPosition());
      continue;
    }
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0)
      return false;
  }
  return true;
}

/// `v` is the block argument of a tensor input, possibly through a float
/// extension (f16 inputs of an f32 accumulation) or a sign extension (i8
/// inputs of an i32 one).
static std::optional<unsigned> inputArgThroughExt(Value v, GenericOp op) {
  if (auto ext = v.getDefiningOp<arith::ExtFOp>())
    v = ext.getIn();
  else if (auto sext = v.getDefiningOp<arith::ExtSIOp>())
    v = sext.getIn();
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != op.getBody() ||
      arg.getArgNumber() >= op.getNumDpsInputs())
    return std::nullopt;
  return arg.getArgNumber();
}

static bool isContraction(GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 1)
    return false;
  // A product with a constant tensor (a transposed convolution's weight of
  // ones) is a reduction: tile.dot reads its operands from memory.
  if (llvm::any_of(op.getDpsInputs(), getScalarSource))
    return false;
  // Float products (of fp8 too: exact in f32), or i8 ones summed in i32
  // (tile.dot's integer form).
  Operation *c = getCombiner(op, 0);
  Type out = getElementTypeOrSelf(op.getDpsInits()[0].getType());
  bool integer = out.isSignlessInteger(32);
  if (!c || !(integer ? isa<arith::AddIOp>(c) : isa<arith::AddFOp>(c)))
    return false;
  Value other = c->getOperand(0) == op.getRegionOutputArgs()[0]
                    ? c->getOperand(1)
                    : c->getOperand(0);
  Operation *mul = other.getDefiningOp();
  if (!mul || !(integer ? isa<arith::MulIOp>(mul) : isa<arith::MulFOp>(mul)))
    return false;
  std::optional<unsigned> a = inputArgThroughExt(mul->getOperand(0), op);
  std::optional<unsigned> b = inputArgThroughExt(mul->getOperand(1), op);
  if (!a || !b || *a == *b)
    return false;
  // Nothing else in the body: the mul, the combiner, up to two extensions.
  if (op.getBody()->getOperations().size() > 5)
    return false;
  for (OpOperand *in : op.getDpsInputOperands()) {
    Type e = cast<ShapedType>(in->get().getType()).getElementType();
    if (integer ? !e.isSignlessInteger(8)
                : !isa<Float16Type, BFloat16Type, Float32Type, Float8E4M3FNType,
                       Float8E5M2Type>(e))
      return false;
  }
  FailureOr<ContractionDimensions> dims = getContractionDims(op);
  return succeeded(dims) && dims->m.size() == 1 && dims->n.size() == 1 &&
         dims->k.size() == 1 && op.getStaticLoopRanges()[dims->k[0]] > 1;
}

bool keepsGreater(Operation *combiner) {
  return isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp,
             arith::MaxUIOp>(combiner);
}

bool keepsLesser(Operation *combiner) {
  return isa<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp,
             arith::MinUIOp>(combiner);
}

/// Whether `v` is a position of the iteration: linalg.index, its
/// linearization (affine.apply, as reshapes that split a loop leave) and
/// casts of those, or a constant (along a loop of size 1).
static bool isPosition(Value v, GenericOp op) {
  if (matchPattern(v, m_Constant()))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != op.getBody())
    return false;
  if (isa<IndexOp>(def))
    return true;
  if (!isa<affine::AffineApplyOp, arith::IndexCastOp, arith::ExtSIOp,
           arith::ExtUIOp>(def))
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value o) { return isPosition(o, op); });
}

std::optional<ArgReduction> getArgReduction(GenericOp op, unsigned index) {
  auto yield = cast<YieldOp>(op.getBody()->getTerminator());
  auto select = yield.getOperand(index).getDefiningOp<arith::SelectOp>();
  if (!select || select->getBlock() != op.getBody() ||
      select.getFalseValue() != op.getRegionOutputArgs()[index])
    return std::nullopt;
  Value position = select.getTrueValue();
  if (!position.getType().isInteger() || !isPosition(position, op))
    return std::nullopt;
  // compare(x, acc) or compare(acc, x), by a strict order.
  Operation *compare = select.getCondition().getDefiningOp();
  if (!compare || compare->getBlock() != op.getBody())
    return std::nullopt;
  bool greater, isUnsigned = false;
  if (auto f = dyn_cast<arith::CmpFOp>(compare)) {
    using P = arith::CmpFPredicate;
    if (f.getPredicate() != P::OGT && f.getPredicate() != P::OLT)
      return std::nullopt;
    greater = f.getPredicate() == P::OGT;
  } else if (auto i = dyn_cast<arith::CmpIOp>(compare)) {
    using P = arith::CmpIPredicate;
    P p = i.getPredicate();
    if (!llvm::is_contained({P::sgt, P::slt, P::ugt, P::ult}, p))
      return std::nullopt;
    greater = p == P::sgt || p == P::ugt;
    isUnsigned = p == P::ugt || p == P::ult;
  } else {
    return std::nullopt;
  }
  for (unsigned value = 0, e = op.getNumDpsInits(); value < e; ++value) {
    BlockArgument acc = op.getRegionOutputArgs()[value];
    Operation *c = value == index ? nullptr : getCombiner(op, value);
    if (!c)
      continue;
    Value x = c->getOperand(0) == acc ? c->getOperand(1) : c->getOperand(0);
    bool accFirst;
    if (compare->getOperand(0) == x && compare->getOperand(1) == acc)
      accFirst = false;
    else if (compare->getOperand(0) == acc && compare->getOperand(1) == x)
      accFirst = true;
    else
      continue;
    // The order of the compare is the combiner's (signed or not).
    bool max = greater != accFirst;
    if (!(max ? keepsGreater(c) : keepsLesser(c)) ||
        isUnsigned != isa<arith::MaxUIOp, arith::MinUIOp>(c))
      continue;
    // From the identity, so that the first element always wins.
    Value init = getScalarSource(op.getDpsInitOperand(value)->get());
    Attribute attr;
    if (!init || !matchPattern(init, m_Constant(&attr)) ||
        attr != getCombinerIdentity(c))
      return std::nullopt;
    return ArgReduction{value, index, compare, select};
  }
  return std::nullopt;
}

FailureOr<GenericKind> classify(GenericOp op, std::string &why) {
  llvm::raw_string_ostream os(why);
  if (!op.hasPureTensorSemantics()) {
    os << "unsupported: a linalg.generic on buffers (tileopt forms kernels "
          "from ops on tensors)";
    return failure();
  }
  if (!op.getShapesToLoopsMap()) {
    os << "unsupported: a linalg.generic whose operands do not give the size "
          "of each of its loops";
    return failure();
  }
  for (int64_t size : op.getStaticLoopRanges())
    if (ShapedType::isDynamic(size)) {
      os << "unsupported: a linalg.generic with a dynamic loop size "
            "(shapes are specialized when the graph is compiled)";
      return failure();
    }
  for (OpOperand &operand : op->getOpOperands()) {
    Type t = operand.get().getType();
    Type e = getElementTypeOrSelf(t);
    if (!tile::isTileElementType(e)) {
      os << "unsupported: element type " << e
         << " (tiles hold i1, i8, i16, i32, i64, f16, bf16, f32, f64, f8E4M3FN "
            "and f8E5M2)";
      return failure();
    }
    if (isa<ShapedType>(t) &&
        !isProjectedPermutationWithZeros(op.getMatchingIndexingMap(&operand))) {
      os << "unsupported: indexing map " << op.getMatchingIndexingMap(&operand)
         << " (a window or convolution access, not a strided view of the "
            "iteration space)";
      return failure();
    }
  }
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(inner)) {
      Operation *def = extract.getTensor().getDefiningOp();
      if (!def ? cast<BlockArgument>(extract.getTensor()).getOwner() ==
                     op.getBody()
               : op->isAncestor(def)) {
        os << "unsupported: a tensor.extract from a tensor made inside the "
              "linalg.generic";
        return failure();
      }
      continue; // a gather
    }
    if (isa<cf::AssertOp>(inner))
      continue; // the gather's bounds check replaces torch-mlir's asserts
    bool elementwise =
        inner.hasTrait<OpTrait::Elementwise>() &&
        isa<arith::ArithDialect, math::MathDialect>(inner.getDialect());
    if (!elementwise &&
        !isa<arith::ConstantOp, IndexOp, affine::AffineApplyOp>(inner)) {
      os << "unsupported: '" << inner.getName()
         << "' inside a linalg.generic body";
      return failure();
    }
    for (Type t : inner.getResultTypes())
      if (!tile::isTileElementType(t) && !t.isIndex()) {
        os << "unsupported: element type " << t << " inside a linalg.generic";
        return failure();
      }
  }

  bool allParallel = op.getNumLoops() == op.getNumParallelLoops();
  if (allParallel) {
    if (getFillValue(op))
      return GenericKind::Fill;
    auto yield = cast<YieldOp>(op.getBody()->getTerminator());
    if (op.getNumDpsInputs() == 1 && op.getNumDpsInits() == 1 &&
        isa<ShapedType>(op.getDpsInputOperand(0)->get().getType()) &&
        yield.getOperand(0) == op.getBody()->getArgument(0) &&
        op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation() &&
        getElementTypeOrSelf(op.getDpsInputOperand(0)->get().getType()) ==
            getElementTypeOrSelf(op.getResult(0).getType()) &&
        !op->hasAttr(kCopyAttr))
      return GenericKind::View;
    for (OpOperand &init : op.getDpsInitsMutable())
      if (!op.getMatchingIndexingMap(&init).isPermutation()) {
        os << "unsupported: an output indexing map that is not a permutation";
        return failure();
      }
    return GenericKind::Elementwise;
  }

  // Each output is combined by one associative op, or is the index of
  // another's extremum; the accumulators feed only those.
  llvm::SmallPtrSet<Operation *, 4> readers;
  for (unsigned i = 0, e = op.getNumDpsInits(); i < e; ++i) {
    if (Operation *c = getCombiner(op, i)) {
      readers.insert(c);
    } else if (std::optional<ArgReduction> arg = getArgReduction(op, i)) {
      readers.insert(arg->compare);
      readers.insert(arg->select);
    } else {
      os << "unsupported: a reduction whose output #" << i
         << " is not combined with one associative op, nor the index of "
            "another output's maximum or minimum (from its identity, by a "
            "strict compare)";
      return failure();
    }
  }
  for (OpOperand &init : op.getDpsInitsMutable())
    for (AffineExpr e : op.getMatchingIndexingMap(&init).getResults())
      if (auto d = dyn_cast<AffineDimExpr>(e);
          d && !isParallel(op.getIteratorTypesArray()[d.getPosition()])) {
        os << "unsupported: a reduction whose output is indexed by a "
              "reduction loop";
        return failure();
      }
  for (BlockArgument out : op.getRegionOutputArgs())
    for (Operation *user : out.getUsers())
      if (!readers.contains(user)) {
        os << "unsupported: a reduction that reads its accumulator other than "
              "in its combiner";
        return failure();
      }
  return isContraction(op) ? GenericKind::Contraction : GenericKind::Reduction;
}

} // namespace tileopt::formation

namespace tileopt::formation {

StridedLayout StridedLayout::contiguous(ArrayRef<int64_t> shape) {
  StridedLayout l;
  l.sizes.assign(shape.begin(), shape.end());
  l.strides.assign(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; --i)
    l.strides[i] = l.strides[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return l;
}

bool isViewOp(Operation *op) {
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(op))
    return true;
  if (isa<tensor::ExtractSliceOp>(op))
    return true;
  if (auto generic = dyn_cast<GenericOp>(op)) {
    std::string why;
    FailureOr<GenericKind> kind = classify(generic, why);
    return succeeded(kind) && *kind == GenericKind::View;
  }
  return false;
}

std::optional<StridedLayout> getViewLayout(Operation *view,
                                           const StridedLayout &src) {
  StridedLayout out;
  out.offset = src.offset;
  auto sourceType = dyn_cast<RankedTensorType>(view->getOperand(0).getType());
  if (!sourceType || sourceType.getRank() != (int64_t)src.sizes.size() ||
      src.strides.size() != src.sizes.size())
    return std::nullopt;
  if (isa<tensor::CastOp>(view))
    return src;
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(view)) {
    ArrayRef<int64_t> shape = expand.getResultType().getShape();
    out.sizes.assign(shape.begin(), shape.end());
    out.strides.assign(shape.size(), 0);
    for (auto [i, group] : llvm::enumerate(expand.getReassociationIndices())) {
      int64_t stride = src.strides[i];
      for (int64_t d : llvm::reverse(group)) {
        out.strides[d] = stride;
        stride *= shape[d];
      }
    }
    return out;
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(view)) {
    for (ReassociationIndices group : collapse.getReassociationIndices()) {
      int64_t size = 1, stride = 1;
      std::optional<int64_t> inner; // the stride the next outer dim needs
      for (int64_t d : llvm::reverse(group)) {
        size *= src.sizes[d];
        if (src.sizes[d] == 1)
          continue;
        if (!inner)
          stride = src.strides[d];
        else if (src.strides[d] != *inner)
          return std::nullopt;
        inner = src.strides[d] * src.sizes[d];
      }
      out.sizes.push_back(size);
      out.strides.push_back(stride);
    }
    return out;
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(view)) {
    if (slice.getSourceType().getRank() != (int64_t)src.sizes.size())
      return std::nullopt;
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    ArrayRef<int64_t> sizes = slice.getStaticSizes();
    ArrayRef<int64_t> steps = slice.getStaticStrides();
    if (llvm::any_of(offsets, ShapedType::isDynamic) ||
        llvm::any_of(sizes, ShapedType::isDynamic) ||
        llvm::any_of(steps, ShapedType::isDynamic))
      return std::nullopt;
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    for (unsigned d = 0; d < sizes.size(); ++d) {
      out.offset += offsets[d] * src.strides[d];
      if (dropped.test(d))
        continue;
      out.sizes.push_back(sizes[d]);
      out.strides.push_back(src.strides[d] * steps[d]);
    }
    return out;
  }
  auto generic = dyn_cast<GenericOp>(view);
  if (!generic)
    return std::nullopt;
  AffineMap in = generic.getMatchingIndexingMap(generic.getDpsInputOperand(0));
  AffineMap outMap =
      generic.getMatchingIndexingMap(generic.getDpsInitOperand(0));
  SmallVector<int64_t> loops = generic.getStaticLoopRanges();
  // The stride of each loop in the source buffer (0: broadcast).
  SmallVector<int64_t> loopStride(loops.size(), 0);
  for (auto [k, e] : llvm::enumerate(in.getResults()))
    if (auto d = dyn_cast<AffineDimExpr>(e))
      loopStride[d.getPosition()] = src.strides[k];
  for (AffineExpr e : outMap.getResults()) {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    out.sizes.push_back(loops[d]);
    out.strides.push_back(loops[d] == 1 ? 0 : loopStride[d]);
  }
  return out;
}

} // namespace tileopt::formation
