//===- AttentionSoftmax.h - an online softmax in base 2 ---------*- C++ -*-===//
//
// Flash attention computes its softmax in base 2 with the scale folded into
// the exponent: `p = 2^((s - m) k)` with `k = scale * log2(e)` and `m` the
// row maximum of `s` (Triton's tutorial takes `s k - max(s k)` in one
// multiply-add, which overflows where `s` is a large finite mask). A model's
// graph says `exp(x - max(x))` of `x = scale * s`, usually rounded to f16 on
// the way (torch's decomposition rounds the product's result, then scales it
// in f16). This rewrites the step of an online softmax that the conversion
// wrote in the graph's terms into flash attention's.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONSOFTMAX_H
#define TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONSOFTMAX_H

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

namespace tileopt::formation {

/// The ops of one step of an online softmax over a block of `scores`.
struct SoftmaxStep {
  /// The scores whose row maximum the step takes.
  mlir::Value scores;
  /// The block's exponentials `exp(scores - m)`, m the running maximum.
  llvm::SmallVector<mlir::math::ExpOp> exps;
  /// The running sums' and outputs' rescaling, `exp(m_old - m)`.
  mlir::math::ExpOp alpha;
  /// The running maximum m that the exponentials subtract (0 for -inf).
  mlir::Value max;
};

/// Rewrites `step` into base 2: the scores' chain from an f32 value (casts,
/// multiplications and divisions by positive constants, selects of a
/// constant, sums with other tiles) is recomputed in f32 with its constant
/// factors and log2(e) gathered into one multiply `k` of the exponentials'
/// differences, which become `exp2`. `step`'s scores must feed only its row
/// maximum and its exponentials, and its maximum only its exponentials'
/// differences. Returns the new scores `y` (whose mask `keptKeyBound` reads
/// as before), or nullptr where the step is not of that form; then nothing
/// changed.
mlir::Value softmaxInBase2(mlir::OpBuilder &b, SoftmaxStep &step);

} // namespace tileopt::formation

#endif // TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONSOFTMAX_H
