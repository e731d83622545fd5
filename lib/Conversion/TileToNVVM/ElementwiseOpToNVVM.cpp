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

Value fromF32(OpBuilder &b, Location loc, Value v, Type to) {
  if (to.isF32())
    return v;
  if (to.getIntOrFloatBitWidth() > 32)
    return arith::ExtFOp::create(b, loc, to, v);
  return arith::TruncFOp::create(b, loc, to, v); // exact for fp8's values
}

/// An f16 (exact for fp8's values) as `to`.
Value fromF16(OpBuilder &b, Location loc, Value v, Type to) {
  if (to.isF16())
    return v;
  return fromF32(b, loc, arith::ExtFOp::create(b, loc, b.getF32Type(), v), to);
}

} // namespace

Value widenFp8(OpBuilder &b, Location loc, Type from, Value byte, Type to) {
  if (isa<Float8E5M2Type>(from)) {
    Type i16 = b.getI16Type();
    Value bits =
        arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i16, byte),
                              arith::ConstantIntOp::create(b, loc, i16, 8));
    return fromF16(b, loc,
                   arith::BitcastOp::create(b, loc, b.getF16Type(), bits), to);
  }
  // e4m3fn: exponent and mantissa in an f32's top bits, times 2^(127 - 7)
  // (exact, subnormals included); the sign apart; 0x7f is NaN.
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  Value bits = arith::ExtUIOp::create(b, loc, i32, byte);
  Value magnitude = arith::AndIOp::create(b, loc, bits, i32Const(b, loc, 0x7f));
  Value scaled = arith::MulFOp::create(
      b, loc,
      arith::BitcastOp::create(
          b, loc, f32,
          arith::ShLIOp::create(b, loc, magnitude, i32Const(b, loc, 20))),
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0x1p120f)));
  Value sign = arith::ShLIOp::create(
      b, loc, arith::AndIOp::create(b, loc, bits, i32Const(b, loc, 0x80)),
      i32Const(b, loc, 24));
  Value value = arith::BitcastOp::create(
      b, loc, f32,
      arith::OrIOp::create(
          b, loc, arith::BitcastOp::create(b, loc, i32, scaled), sign));
  Value nan = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, magnitude,
                                    i32Const(b, loc, 0x7f));
  value = arith::SelectOp::create(
      b, loc, nan,
      arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN())),
      value);
  return fromF32(b, loc, value, to);
}

namespace {

/// arith and math ops on tiles: the same op on the per-thread vectors. Math
/// ops and arith.remf run per element so that they map to libdevice calls
/// (NVPTX expands a vector frem as x - trunc(x / y) * y, which is not fmod:
/// fmod(1e10f, 3.3f) gave 323.7 for 0.296; __nv_fmodf is exact).
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
    if (isa<math::MathDialect>(op->getDialect()) || isa<arith::RemFOp>(op)) {
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

/// arith.extf from fp8 and arith.truncf to fp8 (and the conversions between
/// fp8 and integers, through f32), on tiles and scalars, whose fp8 values are
/// bytes (TileTypeConverter). sm_89 and newer convert pairs (PTX 8.1):
/// cvt.rn.f16x2.{e4m3,e5m2}x2 and cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (the
/// e4m3 range saturates, as torch's; e5m2 overflows to infinity, as
/// torch's, where satfinite would clamp). Older chips convert in software:
/// e5m2 is the top byte of an f16, e4m3's bits shifted into an f32 scaled by
/// 2^120 (widenFp8); narrowing rounds an f32's bits (narrow).
struct Fp8ConversionLowering : ConversionPattern {
  Fp8ConversionLowering(const TypeConverter &converter, MLIRContext *ctx,
                        LoweringState &state)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/2, ctx),
        state(state) {}
  LoweringState &state;

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp,
             arith::FPToSIOp, arith::FPToUIOp>(op))
      return failure();
    Type from = getElementTypeOrSelf(op->getOperand(0).getType());
    Type to = getElementTypeOrSelf(op->getResult(0).getType());
    if (!isFp8Type(from) && !isFp8Type(to))
      return failure();
    Location loc = op->getLoc();
    Type resultType =
        getTypeConverter()->convertType(op->getResult(0).getType());
    bool isVector = isa<VectorType>(operands[0].getType());
    SmallVector<Value> in = isVector ? unpack(rewriter, loc, operands[0])
                                     : SmallVector<Value>{operands[0]};
    SmallVector<Value> out;
    Type f32Type = rewriter.getF32Type();
    if (isFp8Type(from)) {
      // To an integer: through f32, which holds every fp8 value.
      Type wide = isa<arith::FPToSIOp, arith::FPToUIOp>(op) ? f32Type : to;
      out = convert(
          in,
          [&](Value lo, Value hi) -> std::pair<Value, Value> {
            auto [l, h] = widenPair(rewriter, loc, from, lo, hi);
            return {fromF16(rewriter, loc, l, wide),
                    fromF16(rewriter, loc, h, wide)};
          },
          [&](Value v) { return widenFp8(rewriter, loc, from, v, wide); });
      for (Value &v : out)
        if (isa<arith::FPToSIOp>(op))
          v = arith::FPToSIOp::create(rewriter, loc, to, v);
        else if (isa<arith::FPToUIOp>(op))
          v = arith::FPToUIOp::create(rewriter, loc, to, v);
    } else {
      // From an integer: its f32 value (rounded once: an fp8's precision is
      // far below f32's), then narrowed.
      SmallVector<Value> f32;
      for (Value v : in)
        f32.push_back(
            isa<arith::SIToFPOp>(op)
                ? Value(arith::SIToFPOp::create(rewriter, loc, f32Type, v))
            : isa<arith::UIToFPOp>(op)
                ? Value(arith::UIToFPOp::create(rewriter, loc, f32Type, v))
                : toF32(rewriter, loc, v));
      out = convert(
          f32,
          [&](Value lo, Value hi) {
            return narrowPair(rewriter, loc, to, lo, hi);
          },
          [&](Value v) { return narrow(rewriter, loc, to, v); });
    }
    rewriter.replaceOp(
        op, isVector ? pack(rewriter, loc, cast<VectorType>(resultType), out)
                     : out.front());
    return success();
  }

  /// `in` converted two at a time by `pair` from sm_89 (an odd last one
  /// paired with itself), one at a time by `single` before.
  SmallVector<Value>
  convert(ArrayRef<Value> in,
          function_ref<std::pair<Value, Value>(Value, Value)> pair,
          function_ref<Value(Value)> single) const {
    SmallVector<Value> out;
    if (state.smVersion < 89) {
      for (Value v : in)
        out.push_back(single(v));
      return out;
    }
    for (size_t i = 0; i < in.size(); i += 2) {
      auto [lo, hi] = pair(in[i], in[std::min(i + 1, in.size() - 1)]);
      out.push_back(lo);
      if (i + 1 < in.size())
        out.push_back(hi);
    }
    return out;
  }

  static StringRef fp8Name(Type type) {
    return isa<Float8E4M3FNType>(type) ? "e4m3" : "e5m2";
  }

  /// Two fp8 bytes to two f16 (cvt.rn.f16x2.*x2: the low byte to the low half).
  static std::pair<Value, Value> widenPair(OpBuilder &b, Location loc,
                                           Type from, Value lo, Value hi) {
    Type i16 = b.getI16Type();
    Value word = arith::OrIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, i16, lo),
        arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i16, hi),
                              arith::ConstantIntOp::create(b, loc, i16, 8)));
    Value pair = emitAsm(b, loc, {b.getI32Type()}, {word},
                         ("cvt.rn.f16x2." + fp8Name(from) + "x2 $0, $1;").str(),
                         "=r,h", /*sideEffects=*/false)[0];
    Value halves = LLVM::BitcastOp::create(
        b, loc, VectorType::get({2}, b.getF16Type()), pair);
    return {vector::ExtractOp::create(b, loc, halves, 0),
            vector::ExtractOp::create(b, loc, halves, 1)};
  }

  static Value toF32(OpBuilder &b, Location loc, Value v) {
    Type f32 = b.getF32Type();
    if (v.getType().isF32())
      return v;
    if (v.getType().getIntOrFloatBitWidth() > 32)
      return arith::TruncFOp::create(b, loc, f32, v);
    return arith::ExtFOp::create(b, loc, f32, v);
  }

  /// One f32 to an fp8 byte in software, as the cvt pair rounds it (to
  /// nearest even; e4m3 saturates, e5m2 overflows to infinity): normal
  /// results round the f32's bits at the fp8 mantissa (torch's c10 method),
  /// subnormal ones by an f32 add whose unit in the last place is fp8's
  /// smallest subnormal.
  static Value narrow(OpBuilder &b, Location loc, Type to, Value x) {
    bool e4m3 = isa<Float8E4M3FNType>(to);
    int bias = e4m3 ? 7 : 15, mantissa = e4m3 ? 3 : 2;
    int shift = 23 - mantissa;
    Type i32 = b.getI32Type(), i8 = b.getI8Type(), f32 = b.getF32Type();
    auto c = [&](int64_t v) { return i32Const(b, loc, v); };
    Value bits = arith::BitcastOp::create(b, loc, i32, x);
    Value sign = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, bits, c(24)), c(0x80));
    Value abs = arith::AndIOp::create(b, loc, bits, c(0x7fffffff));
    auto at = [&](arith::CmpIPredicate pred, int64_t v) -> Value {
      return arith::CmpIOp::create(b, loc, pred, abs, c(v));
    };
    // Below 2^(1 - bias) the result is subnormal: adding 2^(24 - bias -
    // mantissa), whose unit in the last place is the smallest fp8 subnormal,
    // rounds to a multiple of it, and the sum's low bits count them.
    int64_t magic = int64_t(151 - bias - mantissa) << 23;
    Value sum = arith::AddFOp::create(
        b, loc, arith::BitcastOp::create(b, loc, f32, abs),
        arith::BitcastOp::create(b, loc, f32, c(magic)));
    Value subnormal = arith::SubIOp::create(
        b, loc, arith::BitcastOp::create(b, loc, i32, sum), c(magic));
    Value odd = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, abs, c(shift)), c(1));
    Value rounded = arith::AddIOp::create(
        b, loc, abs,
        arith::AddIOp::create(
            b, loc, c((int64_t(bias - 127) << 23) + (1 << (shift - 1)) - 1),
            odd));
    Value normal = arith::ShRUIOp::create(b, loc, rounded, c(shift));
    Value result = arith::SelectOp::create(
        b, loc, at(arith::CmpIPredicate::ult, int64_t(128 - bias) << 23),
        subnormal, normal);
    // Past the largest finite value (e4m3: from 448 on, which rounds to at
    // least 448; e5m2: from 61440, which rounds to 2^16), then NaN.
    result = arith::SelectOp::create(
        b, loc, at(arith::CmpIPredicate::uge, e4m3 ? 0x43e00000 : 0x47700000),
        c(e4m3 ? 0x7e : 0x7c), result);
    result = arith::SelectOp::create(
        b, loc, at(arith::CmpIPredicate::ugt, 0x7f800000), c(0x7f), result);
    return arith::TruncIOp::create(b, loc, i8,
                                   arith::OrIOp::create(b, loc, result, sign));
  }

  /// Two f32 to two fp8 bytes: cvt.rn.satfinite.*x2.f32 puts its first source
  /// in the high byte. e5m2 overflows to infinity instead (torch's): at and
  /// above 61440, half way from its largest finite value to 2^16.
  static std::pair<Value, Value> narrowPair(OpBuilder &b, Location loc, Type to,
                                            Value lo, Value hi) {
    Type i16 = b.getI16Type(), i8 = b.getI8Type();
    Value word = emitAsm(
        b, loc, {i16}, {hi, lo},
        ("cvt.rn.satfinite." + fp8Name(to) + "x2.f32 $0, $1, $2;").str(),
        "=h,f,f", /*sideEffects=*/false)[0];
    Value low = arith::TruncIOp::create(b, loc, i8, word);
    Value high = arith::TruncIOp::create(
        b, loc, i8,
        arith::ShRUIOp::create(b, loc, word,
                               arith::ConstantIntOp::create(b, loc, i16, 8)));
    if (isa<Float8E4M3FNType>(to))
      return {low, high};
    auto overflow = [&](Value x, Value byte) -> Value {
      Value big = arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OGE, math::AbsFOp::create(b, loc, x),
          arith::ConstantOp::create(b, loc, b.getF32FloatAttr(61440.0f)));
      Value inf = arith::SelectOp::create(
          b, loc,
          arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OLT, x,
              arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f))),
          arith::ConstantIntOp::create(b, loc, i8, 0xfc),
          arith::ConstantIntOp::create(b, loc, i8, 0x7c));
      return arith::SelectOp::create(b, loc, big, inf, byte);
    };
    return {overflow(lo, low), overflow(hi, high)};
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
    if (!type) {
      if (!isFp8Type(op.getType()))
        return failure();
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, registerAttr(cast<TypedAttr>(op.getValue())));
      return success();
    }
    VectorType vt = vectorType(type);
    if (auto splat = dyn_cast<SplatElementsAttr>(op.getValue())) {
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, vt,
          SplatElementsAttr::get(
              vt, registerAttr(splat.getSplatValue<TypedAttr>())));
      return success();
    }
    // Any other constant tile lives in constant memory; each thread reads
    // the elements it owns (fp8 as their bytes).
    auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
    Type element = type.getElementType();
    if (dense && isFp8Type(element)) {
      element = rewriter.getI8Type();
      dense = dense.bitcast(element);
    }
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
  patterns.add<ElementwiseLowering, Fp8ConversionLowering>(converter, ctx,
                                                           state);
  patterns.add<ApproxDivisionLowering>(converter, ctx);
}

} // namespace tileopt::nvvm
