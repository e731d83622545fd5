//===- AttentionMask.cpp - the keys an attention mask can keep ------------===//
//
// A mask is read as affine forms `row * i + key * j + constant` of the
// positions i (a row) and j (a key) that each element of a tile stands for.
// Every value these forms follow is an i64 index expression of positions
// below 2^31 with small coefficients, so the kernel computes them exactly.
//
//===----------------------------------------------------------------------===//

#include "AttentionMask.h"

#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace tileopt;
using namespace tileopt::formation;

namespace {

/// `row * i + key * j + constant` at each element of a tile.
struct Form {
  int64_t row = 0, key = 0, constant = 0;
};

/// Kept small, so that the kernel's i64 arithmetic on positions below 2^31
/// cannot wrap where the form says it does not.
bool bounded(const Form &f) {
  return std::abs(f.row) <= (1 << 16) && std::abs(f.key) <= (1 << 16) &&
         std::abs(f.constant) <= (int64_t(1) << 40);
}

/// A reshape that only adds or drops unit dimensions: each element stays at
/// its position.
bool keepsPositions(tile::ReshapeOp op) {
  auto nonUnit = [](Type t) {
    SmallVector<int64_t> dims;
    for (int64_t d : cast<ShapedType>(t).getShape())
      if (d != 1)
        dims.push_back(d);
    return dims;
  };
  return nonUnit(op.getSource().getType()) == nonUnit(op.getType());
}

/// `v` without the ops that leave each element's value and position alone.
Value stripLayout(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto reshape = dyn_cast<tile::ReshapeOp>(def);
    if ((reshape && keepsPositions(reshape)) ||
        isa<tile::BroadcastOp, tile::ExpandDimsOp, tile::SplatOp>(def))
      v = def->getOperand(0);
    else
      break;
  }
  return v;
}

std::optional<Form> formOf(Value v, const DenseMap<Value, int64_t> &positions,
                           int64_t rows, int64_t keys) {
  // Down to a position tile, through ops that keep each element's integer.
  for (;;) {
    auto it = positions.find(v);
    if (it != positions.end()) {
      if (it->second == rows)
        return Form{1, 0, 0};
      if (it->second == keys)
        return Form{0, 1, 0};
      return std::nullopt;
    }
    Operation *def = v.getDefiningOp();
    auto reshape = dyn_cast_or_null<tile::ReshapeOp>(def);
    if ((reshape && keepsPositions(reshape)) ||
        isa_and_nonnull<tile::BroadcastOp, tile::ExpandDimsOp, tile::SplatOp,
                        arith::ExtSIOp, arith::IndexCastOp>(def))
      v = def->getOperand(0);
    else
      break;
  }
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c))) {
    if (c.getSignificantBits() > 41)
      return std::nullopt;
    return Form{0, 0, c.getSExtValue()};
  }
  // Sums, differences and products in 64 bits (or index), where bounded
  // forms of positions below 2^31 cannot wrap.
  Operation *def = v.getDefiningOp();
  Type element = getElementTypeOrSelf(v.getType());
  if (!isa_and_nonnull<arith::AddIOp, arith::SubIOp, arith::MulIOp>(def) ||
      !(element.isIndex() || element.isInteger(64)))
    return std::nullopt;
  std::optional<Form> l = formOf(def->getOperand(0), positions, rows, keys);
  std::optional<Form> r = formOf(def->getOperand(1), positions, rows, keys);
  if (!l || !r)
    return std::nullopt;
  Form f;
  if (isa<arith::AddIOp>(def)) {
    f = {l->row + r->row, l->key + r->key, l->constant + r->constant};
  } else if (isa<arith::SubIOp>(def)) {
    f = {l->row - r->row, l->key - r->key, l->constant - r->constant};
  } else {
    if (l->row || l->key)
      std::swap(l, r);
    if (l->row || l->key)
      return std::nullopt; // a product of positions
    int64_t k = l->constant;
    if (std::abs(k) > (1 << 16))
      return std::nullopt;
    f = {k * r->row, k * r->key, k * r->constant};
  }
  if (!bounded(f))
    return std::nullopt;
  return f;
}

/// The bound on j where `cond` is `holds`.
std::optional<KeyBound> boundWhere(Value cond, bool holds,
                                   const DenseMap<Value, int64_t> &positions,
                                   int64_t rows, int64_t keys) {
  cond = stripLayout(cond);
  Operation *def = cond.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto recurse = [&](Value c, bool h) {
    return boundWhere(c, h, positions, rows, keys);
  };
  if (auto x = dyn_cast<arith::XOrIOp>(def)) {
    for (auto [a, other] :
         {std::pair(x.getLhs(), x.getRhs()), std::pair(x.getRhs(), x.getLhs())})
      if (matchPattern(stripLayout(other), m_One()))
        return recurse(a, !holds);
    return std::nullopt;
  }
  // (a and b) holding, or (a or b) failing, bounds j wherever either side
  // does; (a and b) failing, or (a or b) holding, where both sides do.
  if (isa<arith::AndIOp, arith::OrIOp>(def)) {
    std::optional<KeyBound> a = recurse(def->getOperand(0), holds);
    std::optional<KeyBound> b = recurse(def->getOperand(1), holds);
    std::optional<KeyBound> either = a ? a : b;
    if (either)
      either->exact = false; // the other side may hide more keys
    if (isa<arith::AndIOp>(def) == holds)
      return either;
    if (!a || !b || a->row != b->row)
      return std::nullopt;
    return KeyBound{a->row, std::max(a->constant, b->constant)};
  }
  auto cmp = dyn_cast<arith::CmpIOp>(def);
  if (!cmp)
    return std::nullopt;
  std::optional<Form> x = formOf(cmp.getLhs(), positions, rows, keys);
  std::optional<Form> y = formOf(cmp.getRhs(), positions, rows, keys);
  if (!x || !y)
    return std::nullopt;
  using P = arith::CmpIPredicate;
  P pred =
      holds ? cmp.getPredicate() : arith::invertPredicate(cmp.getPredicate());
  // Positions are not negative: on forms that cannot be either, an unsigned
  // comparison is the signed one.
  auto nonNegative = [](const Form &f) {
    return f.row >= 0 && f.key >= 0 && f.constant >= 0;
  };
  if (pred == P::ult || pred == P::ule || pred == P::ugt || pred == P::uge) {
    if (!nonNegative(*x) || !nonNegative(*y))
      return std::nullopt;
    pred = pred == P::ult   ? P::slt
           : pred == P::ule ? P::sle
           : pred == P::ugt ? P::sgt
                            : P::sge;
  }
  // d = x - y, then a form that is <= 0 wherever `cond` is `holds`.
  Form d{x->row - y->row, x->key - y->key, x->constant - y->constant};
  auto negate = [](Form f) { return Form{-f.row, -f.key, -f.constant}; };
  switch (pred) {
  case P::sle:
    break;
  case P::slt:
    d.constant += 1;
    break;
  case P::sge:
    d = negate(d);
    break;
  case P::sgt:
    d = negate(d);
    d.constant += 1;
    break;
  case P::eq:
    if (d.key < 0)
      d = negate(d);
    break;
  default:
    return std::nullopt;
  }
  // j + row * i + constant <= 0 (== 0 for eq).
  if (d.key != 1)
    return std::nullopt;
  return KeyBound{-d.row, -d.constant, /*exact=*/pred != P::eq};
}

/// Whether `v` is -inf at every element.
bool isNegativeInfinity(Value v) {
  std::optional<APFloat> f = splatFloat(v);
  return f && f->isNegInfinity();
}

} // namespace

std::optional<APFloat> formation::splatFloat(Value v) {
  if (auto splat = v.getDefiningOp<tile::SplatOp>())
    v = splat.getOperand();
  FloatAttr f;
  if (matchPattern(v, m_Constant(&f)))
    return f.getValue();
  DenseFPElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
    return dense.getSplatValue<APFloat>();
  return std::nullopt;
}

std::optional<double> formation::positiveFactor(Value v) {
  std::optional<APFloat> f = splatFloat(v);
  if (!f || !f->isFiniteNonZero() || f->isNegative())
    return std::nullopt;
  return f->convertToDouble();
}

std::optional<KeyBound>
formation::keptKeyBound(Value scores, const DenseMap<Value, int64_t> &positions,
                        int64_t rows, int64_t keys) {
  // Ops that keep -inf as -inf.
  for (;;) {
    scores = stripLayout(scores);
    Operation *def = scores.getDefiningOp();
    if (isa_and_nonnull<arith::ExtFOp, arith::TruncFOp>(def)) {
      scores = def->getOperand(0);
    } else if (isa_and_nonnull<arith::MulFOp>(def) &&
               positiveFactor(def->getOperand(1))) {
      scores = def->getOperand(0);
    } else if (isa_and_nonnull<arith::MulFOp>(def) &&
               positiveFactor(def->getOperand(0))) {
      scores = def->getOperand(1);
    } else if (isa_and_nonnull<arith::DivFOp>(def) &&
               positiveFactor(def->getOperand(1))) {
      scores = def->getOperand(0);
    } else {
      break;
    }
  }
  auto select = scores.getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  bool hidesIfTrue = isNegativeInfinity(select.getTrueValue());
  if (!hidesIfTrue && !isNegativeInfinity(select.getFalseValue()))
    return std::nullopt;
  std::optional<KeyBound> bound = boundWhere(
      select.getCondition(), /*holds=*/!hidesIfTrue, positions, rows, keys);
  if (bound) {
    bound->select = select;
    bound->unmasked =
        hidesIfTrue ? select.getFalseValue() : select.getTrueValue();
  }
  return bound;
}
