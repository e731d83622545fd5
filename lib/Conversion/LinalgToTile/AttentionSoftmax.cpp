//===- AttentionSoftmax.cpp - an online softmax in base 2 -----------------===//
//
// The rewrite changes rounding only: the scores stay in f32 between the
// product and the softmax, as flash attention keeps them (torch's own
// attention kernels and Triton's tutorial do not round them to f16 either),
// and the row maxima stay in the units of the scores, `k` applied to their
// differences.
//
//===----------------------------------------------------------------------===//

#include "AttentionSoftmax.h"
#include "AttentionMask.h"

#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace tileopt;
using namespace tileopt::formation;

namespace {

/// One op of the scores' chain, and how it acts on the tile `y` that the
/// rewrite carries (the chain's value is `y * factor`).
struct Link {
  Operation *op;
  enum Kind { Cast, Scale, Select, Sum } kind;
  double factor = 1.0;  // Scale: the multiplier (1/c for a division)
  unsigned operand = 0; // the chain's operand of a Select or Sum
};

/// The link that `def` makes, if it is one.
std::optional<Link> linkOf(Operation *def) {
  if (isa<arith::ExtFOp, arith::TruncFOp>(def))
    return Link{def, Link::Cast};
  if (auto mul = dyn_cast<arith::MulFOp>(def)) {
    for (unsigned i : {0u, 1u})
      if (std::optional<double> c = positiveFactor(mul->getOperand(1 - i)))
        return Link{def, Link::Scale, *c, i};
    return std::nullopt;
  }
  if (auto div = dyn_cast<arith::DivFOp>(def)) {
    if (std::optional<double> c = positiveFactor(div.getRhs()))
      return Link{def, Link::Scale, 1.0 / *c, 0};
    return std::nullopt;
  }
  if (auto select = dyn_cast<arith::SelectOp>(def)) {
    if (splatFloat(select.getTrueValue()))
      return Link{def, Link::Select, 1.0, 2};
    if (splatFloat(select.getFalseValue()))
      return Link{def, Link::Select, 1.0, 1};
    return std::nullopt;
  }
  if (isa<arith::AddFOp, arith::SubFOp>(def))
    return Link{def, Link::Sum}; // its chain operand is chosen by the walk
  return std::nullopt;
}

bool isMaxCombiner(tile::ReduceOp reduce) {
  Block &body = reduce.getCombiner().front();
  return reduce->getNumOperands() == 1 && body.getOperations().size() == 2 &&
         isa<arith::MaximumFOp, arith::MaxNumFOp>(body.front());
}

Value splatLike(OpBuilder &b, Location loc, Value like, double v) {
  auto type = cast<RankedTensorType>(like.getType());
  return tile::SplatOp::create(
      b, loc, type,
      arith::ConstantOp::create(b, loc,
                                b.getFloatAttr(type.getElementType(), v)));
}

/// `v` (a float tile) in f32: extended, or rounded from a wider type.
Value toF32(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  Type f32 = b.getF32Type();
  if (type.getElementType() == f32)
    return v;
  if (type.getElementTypeBitWidth() > 32)
    return arith::TruncFOp::create(b, loc, type.clone(f32), v);
  return arith::ExtFOp::create(b, loc, type.clone(f32), v);
}

} // namespace

Value formation::softmaxInBase2(OpBuilder &b, SoftmaxStep &step) {
  Value x = step.scores;
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  if (!xType || !xType.getElementType().isF32() || !step.alpha || !step.max ||
      step.exps.empty())
    return nullptr;
  // x feeds one row maximum (maybe through a select of -inf, the padding
  // of keys past the end) and the exponentials' differences.
  tile::ReduceOp rowMax;
  OpOperand *maxInput = nullptr;
  SmallVector<arith::SubFOp> differences;
  for (OpOperand &use : x.getUses()) {
    Operation *user = use.getOwner();
    auto select = dyn_cast<arith::SelectOp>(user);
    if (select && use.getOperandNumber() != 0 && select->hasOneUse()) {
      std::optional<APFloat> other =
          splatFloat(user->getOperand(3 - use.getOperandNumber()));
      if (other && other->isNegInfinity())
        user = *select->user_begin();
    }
    if (auto reduce = dyn_cast<tile::ReduceOp>(user);
        reduce && !rowMax && isMaxCombiner(reduce)) {
      rowMax = reduce;
      maxInput = &use;
      continue;
    }
    auto sub = dyn_cast<arith::SubFOp>(user);
    if (!sub || use.getOperandNumber() != 0 || !sub->hasOneUse() ||
        !llvm::is_contained(step.exps, *sub->user_begin()))
      return nullptr;
    differences.push_back(sub);
  }
  if (!rowMax || differences.size() != step.exps.size())
    return nullptr;
  // The running maximum feeds only the differences, through shape ops.
  auto alphaDifference = step.alpha.getOperand().getDefiningOp<arith::SubFOp>();
  SmallVector<Value> worklist{step.max};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<tile::BroadcastOp, tile::ReshapeOp, tile::ExpandDimsOp>(user)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      auto sub = dyn_cast<arith::SubFOp>(user);
      if (!sub || use.getOperandNumber() != 1 ||
          (sub != alphaDifference && !llvm::is_contained(differences, sub)))
        return nullptr;
    }
  }
  // Up the chain to an f32 value, through ops whose only user is the next.
  SmallVector<Link> chain;
  Value root = x;
  while (Operation *def = root.getDefiningOp()) {
    if (def->getBlock() != rowMax->getBlock() ||
        (!chain.empty() && !def->hasOneUse()))
      break;
    std::optional<Link> link = linkOf(def);
    if (!link)
      break;
    if (link->kind == Link::Sum) {
      // Through the one operand that is itself a link of one use.
      auto isLink = [&](Value v) {
        Operation *d = v.getDefiningOp();
        return d && d->getBlock() == def->getBlock() && d->hasOneUse() &&
               linkOf(d);
      };
      bool lhs = isLink(def->getOperand(0)), rhs = isLink(def->getOperand(1));
      if (lhs == rhs || (rhs && isa<arith::SubFOp>(def)))
        break;
      link->operand = lhs ? 0 : 1;
    }
    chain.push_back(*link);
    root = def->getOperand(link->operand);
  }
  // The factor left after the last sum, times log2(e).
  double k = llvm::numbers::log2e;
  for (const Link &link : chain) {
    if (link.kind == Link::Sum)
      break;
    if (link.kind == Link::Scale)
      k *= link.factor;
  }
  if (!std::isnormal(static_cast<float>(k)))
    return nullptr;
  // Rebuild the chain in f32, from the root to x.
  Location loc = x.getLoc();
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = x.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(rowMax->getBlock());
  Value y = toF32(b, loc, root);
  double factor = 1.0;
  for (const Link &link : llvm::reverse(chain)) {
    Operation *op = link.op;
    switch (link.kind) {
    case Link::Cast:
      break;
    case Link::Scale:
      factor *= link.factor;
      break;
    case Link::Select: {
      auto select = cast<arith::SelectOp>(op);
      // The constant in units of y: c / factor (infinities stay; a finite one
      // stays finite: finfo.min after a scale of 1/8 would be -inf in y, and a
      // row masked whole would give NaN where torch averages it).
      double c =
          splatFloat(op->getOperand(3 - link.operand))->convertToDouble();
      const double most = std::numeric_limits<float>::max();
      if (std::isfinite(c))
        c = std::clamp(c / factor, -most, most);
      Value constant = splatLike(b, loc, y, c);
      Value cond = select.getCondition();
      if (link.operand == 1)
        y = arith::SelectOp::create(b, loc, cond, y, constant);
      else
        y = arith::SelectOp::create(b, loc, cond, constant, y);
      break;
    }
    case Link::Sum: {
      if (factor != 1.0)
        y = arith::MulFOp::create(b, loc, y, splatLike(b, loc, y, factor));
      factor = 1.0;
      Value other = toF32(b, loc, op->getOperand(1 - link.operand));
      if (isa<arith::AddFOp>(op))
        y = arith::AddFOp::create(b, loc, y, other);
      else
        y = arith::SubFOp::create(b, loc, y, other);
      break;
    }
    }
  }
  // The exponents are (y - max) k, not y k - max k: a large finite mask
  // (Hugging Face's finfo.min, -3.4e38) times k >= 1.44 would overflow to -inf,
  // and a row masked whole gave NaN (-inf - -inf) where torch averages it.
  maxInput->set(y);
  for (arith::SubFOp sub : differences)
    sub->setOperand(0, y);
  auto toExp2 = [&](math::ExpOp exp) {
    b.setInsertionPoint(exp);
    Value arg = exp.getOperand();
    Value scaled = arith::MulFOp::create(b, exp.getLoc(), arg,
                                         splatLike(b, exp.getLoc(), arg, k));
    Value exp2 =
        math::Exp2Op::create(b, exp.getLoc(), scaled, exp.getFastmathAttr());
    exp.replaceAllUsesWith(exp2);
    exp.erase();
  };
  for (math::ExpOp exp : step.exps)
    toExp2(exp);
  toExp2(step.alpha);
  step.exps.clear();
  step.alpha = nullptr;
  // The old chain, now unused, from x up.
  for (const Link &link : chain)
    if (link.op->use_empty())
      link.op->erase();
  return y;
}
