//===- AttentionMask.h - the keys an attention mask can keep ----*- C++ -*-===//
//
// A flash-attention loop need not visit key blocks that its mask hides from
// every row of the program (a causal mask's blocks past the diagonal): their
// scores are all -inf, so they add nothing to a row's maximum, sum or
// output; where the mask is exactly such a bound, the blocks before it need
// no mask either. This reads, from the tile IR that the conversion wrote for
// the scores, the bound that the mask puts on the keys a row keeps.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONMASK_H
#define TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONMASK_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace tileopt::formation {

/// Row `i` keeps (scores other than -inf) only keys `j <= row * i + constant`
/// (and, where `exact`, all of them).
struct KeyBound {
  int64_t row = 0;
  int64_t constant = 0;
  bool exact = false;
  /// The select that masks the scores, and its operand that it keeps.
  mlir::Operation *select = nullptr;
  mlir::Value unmasked;
};

/// The float that `v` is at every element: a constant (scalar or splat
/// tensor) or a tile.splat of one. std::nullopt otherwise.
std::optional<llvm::APFloat> splatFloat(mlir::Value v);

/// splatFloat of `v` where it is finite and above 0 (a scale that keeps the
/// order of scores and their -inf), as a double.
std::optional<double> positiveFactor(mlir::Value v);

/// The bound on the keys that `scores` keeps, where `scores` is a tile of
/// masked scores: `select(mask, -inf, x)` (or `select(mask, x, -inf)`), then
/// maybe extended, truncated or scaled by a positive constant, whose mask
/// compares affine expressions of positions with coefficients -1, 0 or 1.
/// `positions` maps each position tile (an iota plus a program's offset) to
/// its space dimension; `rows` and `keys` are the rows' and keys' dimensions.
/// std::nullopt when no such bound follows.
std::optional<KeyBound>
keptKeyBound(mlir::Value scores,
             const llvm::DenseMap<mlir::Value, int64_t> &positions,
             int64_t rows, int64_t keys);

} // namespace tileopt::formation

#endif // TILEOPT_LIB_CONVERSION_LINALGTOTILE_ATTENTIONMASK_H
