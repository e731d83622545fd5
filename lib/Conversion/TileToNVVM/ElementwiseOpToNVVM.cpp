//===- ElementwiseOpToNVVM.cpp - elementwise ops and register remaps ------===//
//
// arith and math ops on tiles become the same ops on each thread's vector
// (math element by element, approximate f32 division and exp as PTX's
// fast forms, mask compares once per run of equal results). Splat, iota
// and constant tiles build the vector; broadcast, expand_dims and permute
// only pick registers of their source.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include <map>

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

bool isApproxDivision(Operation *op) {
  auto div = dyn_cast<arith::DivFOp>(op);
  return div && getElementTypeOrSelf(div.getType()).isF32() &&
         arith::bitEnumContainsAll(div.getFastmath(),
                                   arith::FastMathFlags::afn) &&
         (op->getParentOfType<KernelOp>() ||
          op->getParentOfType<gpu::GPUFuncOp>());
}

namespace {

struct ApproxDivisionLowering : OpConversionPattern<arith::DivFOp> {
  ApproxDivisionLowering(const TypeConverter &converter, MLIRContext *ctx)
      : OpConversionPattern(converter, ctx, /*benefit=*/2) {}
  LogicalResult
  matchAndRewrite(arith::DivFOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isApproxDivision(op))
      return failure();
    Location loc = op.getLoc();
    auto divFull = [&](Value a, Value b) -> Value {
      return LLVM::CallIntrinsicOp::create(
                 rewriter, loc, rewriter.getF32Type(),
                 rewriter.getStringAttr("llvm.nvvm.div.full"), ValueRange{a, b})
          .getResult(0);
    };
    auto vt = dyn_cast<VectorType>(adaptor.getLhs().getType());
    if (!vt) {
      rewriter.replaceOp(op, divFull(adaptor.getLhs(), adaptor.getRhs()));
      return success();
    }
    SmallVector<Value> lhs = unpack(rewriter, loc, adaptor.getLhs());
    SmallVector<Value> rhs = unpack(rewriter, loc, adaptor.getRhs());
    SmallVector<Value> results;
    for (auto [a, b] : llvm::zip(lhs, rhs))
      results.push_back(divFull(a, b));
    rewriter.replaceOp(op, pack(rewriter, loc, vt, results));
    return success();
  }
};

/// The predicate with the operands exchanged (`a < b` is `b > a`).
arith::CmpIPredicate swapped(arith::CmpIPredicate pred) {
  using P = arith::CmpIPredicate;
  switch (pred) {
  case P::slt:
    return P::sgt;
  case P::sgt:
    return P::slt;
  case P::sle:
    return P::sge;
  case P::sge:
    return P::sle;
  case P::ult:
    return P::ugt;
  case P::ugt:
    return P::ult;
  case P::ule:
    return P::uge;
  case P::uge:
    return P::ule;
  default:
    return pred;
  }
}

} // namespace

SmallVector<unsigned> compareGroups(arith::CmpIOp cmp) {
  auto type = dyn_cast<RankedTensorType>(cmp.getLhs().getType());
  if (!type || type.getRank() == 0 || !isLayout(type.getEncoding()))
    return {};
  // What divides every element of a tile that holds one value (0: not such
  // a tile): a splat of a scalar or a splat constant, maybe broadcast.
  auto uniformDivisor = [](Value v) -> int64_t {
    while (isa_and_nonnull<BroadcastOp, ExpandDimsOp>(v.getDefiningOp()))
      v = v.getDefiningOp()->getOperand(0);
    if (auto splat = v.getDefiningOp<SplatOp>())
      return knownDivisor(splat.getValue());
    DenseIntElementsAttr dense;
    if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
      return powerOfTwoDivisor(dense.getSplatValue<APInt>().getSExtValue());
    return 0;
  };
  // An iota-based index (iota + uniform), maybe expanded and broadcast:
  // the alignment of its start, and the dimension of `type` it runs along.
  auto iotaIndex = [&](Value v) -> std::pair<int64_t, int64_t> {
    int64_t dim = 0;
    SmallVector<ExpandDimsOp> expands;
    while (isa_and_nonnull<BroadcastOp, ExpandDimsOp>(v.getDefiningOp())) {
      if (auto expand = v.getDefiningOp<ExpandDimsOp>())
        expands.push_back(expand);
      v = v.getDefiningOp()->getOperand(0);
    }
    for (ExpandDimsOp expand : llvm::reverse(expands))
      if (int64_t(expand.getAxis()) <= dim)
        ++dim;
    Operation *op = v.getDefiningOp();
    if (isa_and_nonnull<IotaOp>(op))
      return {int64_t(1) << 30, dim};
    if (isa_and_nonnull<arith::AddIOp>(op))
      for (int i = 0; i < 2; ++i)
        if (op->getOperand(i).getDefiningOp<IotaOp>())
          return {uniformDivisor(op->getOperand(1 - i)), dim};
    return {0, 0};
  };
  arith::CmpIPredicate pred = cmp.getPredicate();
  auto [alignment, dim] = iotaIndex(cmp.getLhs());
  int64_t bound = uniformDivisor(cmp.getRhs());
  if (!alignment || !bound) {
    // `bound > index` is `index < bound`.
    std::tie(alignment, dim) = iotaIndex(cmp.getRhs());
    bound = uniformDivisor(cmp.getLhs());
    pred = swapped(pred);
  }
  using P = arith::CmpIPredicate;
  // index < bound is (index & -g) < bound for a bound divisible by g: the
  // result is the same over aligned groups of g indices.
  int64_t group = std::min(alignment, bound);
  if (group <= 1 || !llvm::is_contained({P::slt, P::ult, P::sge, P::uge}, pred))
    return {};
  // Registers whose index falls in the same group in every thread share a
  // compare.
  Attribute layout = type.getEncoding();
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<SmallVector<int64_t>> offsets = getRegisterOffsets(layout, shape);
  int64_t threads = int64_t(getNumWarps(layout)) * kWarpSize;
  SmallVector<SmallVector<int64_t>> bases;
  for (int64_t tid = 0; tid < threads; ++tid)
    bases.push_back(threadBase(layout, tid));
  std::map<SmallVector<int64_t>, unsigned> leaderOf;
  SmallVector<unsigned> leaders;
  bool shared = false;
  for (auto [r, offset] : llvm::enumerate(offsets)) {
    SmallVector<int64_t> key;
    for (const SmallVector<int64_t> &base : bases)
      key.push_back(((base[dim] + offset[dim]) % shape[dim]) & -group);
    auto [it, inserted] = leaderOf.try_emplace(key, r);
    shared |= !inserted;
    leaders.push_back(it->second);
  }
  return shared ? leaders : SmallVector<unsigned>();
}

namespace {

/// arith and math ops on tiles: the same op on the per-thread vectors. Math
/// ops run per element so that they map to libdevice calls.
struct ElementwiseLowering : ConversionPattern {
  ElementwiseLowering(const TypeConverter &converter, MLIRContext *ctx,
                      LoweringState &state)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        state(state) {}
  LoweringState &state;
  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        isa<arith::ConstantOp>(op) || op->getNumRegions() != 0)
      return failure();
    if (llvm::none_of(op->getResultTypes(),
                      [](Type t) { return isa<RankedTensorType>(t); }))
      return failure();
    SmallVector<Type> resultTypes;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(),
                                                resultTypes)))
      return failure();
    Location loc = op->getLoc();
    auto cmp = dyn_cast<arith::CmpIOp>(op);
    if (auto it = state.compareLeaders.find(op);
        cmp && it != state.compareLeaders.end()) {
      // One compare per group of equal results.
      SmallVector<Value> lhs = unpack(rewriter, loc, operands[0]);
      SmallVector<Value> rhs = unpack(rewriter, loc, operands[1]);
      SmallVector<Value> results;
      for (auto [r, leader] : llvm::enumerate(it->second))
        results.push_back(
            r == leader ? arith::CmpIOp::create(
                              rewriter, loc, cmp.getPredicate(), lhs[r], rhs[r])
                        : results[leader]);
      rewriter.replaceOp(
          op, pack(rewriter, loc, cast<VectorType>(resultTypes[0]), results));
      return success();
    }
    if (isa<math::MathDialect>(op->getDialect())) {
      auto vt = cast<VectorType>(resultTypes.front());
      SmallVector<SmallVector<Value>> elems;
      for (Value operand : operands)
        elems.push_back(unpack(rewriter, loc, operand));
      SmallVector<Value> results;
      for (int64_t i = 0; i < vt.getNumElements(); ++i) {
        SmallVector<Value> scalars;
        for (auto &e : elems)
          scalars.push_back(e[i]);
        if (isa<math::ExpOp, math::Exp2Op>(op) && vt.getElementType().isF32()) {
          // e^x = 2^(x log2 e): one multiply and ex2.approx, as Triton and
          // CUDA's __expf do, instead of libdevice's exact expf.
          Value x = scalars[0];
          if (isa<math::ExpOp>(op)) {
            Value log2e = arith::ConstantOp::create(
                rewriter, loc, rewriter.getF32FloatAttr(1.4426950408889634f));
            x = arith::MulFOp::create(rewriter, loc, x, log2e);
          }
          // With `afn`, results below 2^-126 may flush to zero: ex2.approx's
          // .ftz form is one instruction, the subnormal-preserving one four
          // (a compare and two multiplies around it).
          auto fastmath = cast<arith::ArithFastMathInterface>(op);
          if (arith::bitEnumContainsAll(
                  fastmath.getFastMathFlagsAttr().getValue(),
                  arith::FastMathFlags::afn))
            results.push_back(
                LLVM::CallIntrinsicOp::create(
                    rewriter, loc, rewriter.getF32Type(),
                    rewriter.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
                    ValueRange{x})
                    .getResult(0));
          else
            results.push_back(math::Exp2Op::create(rewriter, loc, x));
          continue;
        }
        OperationState state(loc, op->getName(), scalars, vt.getElementType(),
                             op->getAttrs());
        results.push_back(rewriter.create(state)->getResult(0));
      }
      rewriter.replaceOp(op, pack(rewriter, loc, vt, results));
      return success();
    }
    OperationState state(loc, op->getName(), operands, resultTypes,
                         op->getAttrs());
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
    return success();
  }
};

struct SplatLowering : TilePattern<SplatOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<vector::BroadcastOp>(
        op, vectorType(op.getResult().getType()), adaptor.getValue());
    return success();
  }
};

struct IotaLowering : TilePattern<IotaOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(IotaOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    TileCoords coords =
        emitCoords(rewriter, loc, op.getResult().getType(), state.get(op));
    SmallVector<Value> values;
    for (const SmallVector<Value> &c : coords.coords)
      values.push_back(c[0]);
    rewriter.replaceOp(
        op, pack(rewriter, loc, vectorType(op.getResult().getType()), values));
    return success();
  }
};

struct ConstantLowering : TilePattern<arith::ConstantOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    if (!type)
      return failure();
    VectorType vt = vectorType(type);
    if (auto splat = dyn_cast<SplatElementsAttr>(op.getValue())) {
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, vt, SplatElementsAttr::get(vt, splat.getSplatValue<Attribute>()));
      return success();
    }
    // Any other constant tile lives in constant memory; each thread reads
    // the elements it owns.
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    Type element = type.getElementType();
    if (!dense || element.isInteger(1))
      return op.emitOpError("cannot lower this constant tile to the GPU (only "
                            "dense constants of non-i1 element types)");
    Location loc = op.getLoc();
    auto func = op->getParentOfType<gpu::GPUFuncOp>();
    auto gpuModule = func->getParentOfType<gpu::GPUModuleOp>();
    int64_t count = type.getNumElements();
    auto flatType = RankedTensorType::get({count}, element);
    auto arrayType = LLVM::LLVMArrayType::get(element, count);
    std::string name;
    for (unsigned i = 0;; ++i) {
      name = (func.getName() + "_cst" + Twine(i)).str();
      if (!gpuModule.lookupSymbol(name))
        break;
    }
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(gpuModule.getBody());
      LLVM::GlobalOp::create(rewriter, loc, arrayType, /*isConstant=*/true,
                             LLVM::Linkage::Internal, name,
                             dense.reshape(flatType), /*alignment=*/16,
                             /*addrSpace=*/4);
    }
    auto ptrType = LLVM::LLVMPointerType::get(rewriter.getContext(), 4);
    Value base = LLVM::AddressOfOp::create(rewriter, loc, ptrType, name);
    TileCoords coords = emitCoords(rewriter, loc, type, state.get(op));
    SmallVector<Value> values;
    for (const SmallVector<Value> &coord : coords.coords) {
      Value index = linearIndex(rewriter, loc, coord, type.getShape());
      Value ptr = LLVM::GEPOp::create(rewriter, loc, ptrType, element, base,
                                      ValueRange{index});
      values.push_back(LLVM::LoadOp::create(rewriter, loc, element, ptr));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, vt, values));
    return success();
  }
};

/// Ops whose result registers are source registers: broadcast, expand_dims,
/// permute. `sourceOffset` maps a result offset to the source offset.
template <typename Op>
LogicalResult remapRegisters(
    Op op, Value source, ConversionPatternRewriter &rewriter,
    const TypeConverter *converter,
    function_ref<SmallVector<int64_t>(ArrayRef<int64_t>)> sourceOffset) {
  auto srcType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto resType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<SmallVector<int64_t>> srcOffsets =
      getRegisterOffsets(srcType.getEncoding(), srcType.getShape());
  SmallVector<SmallVector<int64_t>> resOffsets =
      getRegisterOffsets(resType.getEncoding(), resType.getShape());
  Location loc = op.getLoc();
  SmallVector<Value> srcValues = unpack(rewriter, loc, source);
  SmallVector<Value> values;
  for (const SmallVector<int64_t> &r : resOffsets) {
    SmallVector<int64_t> want =
        wrap(sourceOffset(wrap(r, resType.getShape())), srcType.getShape());
    std::optional<unsigned> index =
        findRegister(srcOffsets, srcType.getShape(), want);
    if (!index)
      return op.emitOpError("source and result layouts do not match; run "
                            "tile-assign-layouts before lowering");
    values.push_back(srcValues[*index]);
  }
  rewriter.replaceOp(op, pack(rewriter, loc,
                              cast<VectorType>(converter->convertType(resType)),
                              values));
  return success();
}

struct BroadcastLowering : TilePattern<BroadcastOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (getLayout(op.getSource().getType()) !=
        getLayout(op.getResult().getType()))
      return op.emitOpError("expected source and result in one layout");
    ArrayRef<int64_t> srcShape = op.getSource().getType().getShape();
    return remapRegisters(op, adaptor.getSource(), rewriter, getTypeConverter(),
                          [&](ArrayRef<int64_t> r) {
                            SmallVector<int64_t> s(r);
                            for (auto [d, size] : llvm::enumerate(srcShape))
                              if (size == 1)
                                s[d] = 0;
                            return s;
                          });
  }
};

struct ExpandDimsLowering : TilePattern<ExpandDimsOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(ExpandDimsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto slice = dyn_cast<SliceLayoutAttr>(getLayout(op.getSource().getType()));
    if (!slice || slice.getDim() != op.getAxis() ||
        slice.getParent() != getLayout(op.getResult().getType()))
      return op.emitOpError("expected the source in the slice of the result's "
                            "layout along the axis");
    int64_t axis = op.getAxis();
    return remapRegisters(op, adaptor.getSource(), rewriter, getTypeConverter(),
                          [&](ArrayRef<int64_t> r) {
                            SmallVector<int64_t> s(r);
                            s.erase(s.begin() + axis);
                            return s;
                          });
  }
};

struct PermuteLowering : TilePattern<PermuteOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(PermuteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ArrayRef<int64_t> perm = op.getPermutation();
    if (permuteLayout(getLayout(op.getSource().getType()), perm) !=
        getLayout(op.getResult().getType()))
      return op.emitOpError("expected the result in the permuted layout of "
                            "the source");
    return remapRegisters(op, adaptor.getSource(), rewriter, getTypeConverter(),
                          [&](ArrayRef<int64_t> r) {
                            SmallVector<int64_t> s(r.size());
                            for (auto [i, p] : llvm::enumerate(perm))
                              s[p] = r[i];
                            return s;
                          });
  }
};

} // namespace

void populateElementwiseOpToNVVMPatterns(TileTypeConverter &converter,
                                         RewritePatternSet &patterns,
                                         LoweringState &state) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SplatLowering, IotaLowering, ConstantLowering, BroadcastLowering,
               ExpandDimsLowering, PermuteLowering>(converter, ctx, state);
  patterns.add<ElementwiseLowering>(converter, ctx, state);
  patterns.add<ApproxDivisionLowering>(converter, ctx);
}

} // namespace tileopt::nvvm
