//===- Formation.h - what kernel formation knows about linalg ops -*- C++
//-*-===//
//
// Shared by tile-form-kernels (which groups linalg ops into kernels) and
// convert-linalg-to-tile (which writes the kernels): the classification of a
// linalg.generic on tensors, its reduction combiners, and the attributes
// through which the first pass tells the second what it decided.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_LIB_CONVERSION_LINALGTOTILE_FORMATION_H
#define TILEOPT_LIB_CONVERSION_LINALGTOTILE_FORMATION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>
#include <string>

namespace tileopt::formation {

/// `tile.group = N`: the kernel (fusion group) an op belongs to.
inline constexpr llvm::StringLiteral kGroupAttr = "tile.group";
/// `tile.space = array<i64: ...>`: for each loop of the op, the dimension of
/// its group's iteration space it runs over (-1: a loop of size 1).
inline constexpr llvm::StringLiteral kSpaceAttr = "tile.space";

/// `tile.copy`: a copy generic that kernel formation inserted to make a
/// buffer contiguous; a kernel, not a view.
inline constexpr llvm::StringLiteral kCopyAttr = "tile.copy";

/// `tile.attention = "..."`: the role of an op in a group that kernel
/// formation recognised as attention, `softmax(f(q k^T)) v`, and that the
/// conversion writes as one flash-attention loop over key blocks:
/// kScores (q k^T), kRowMax and kRowSum (the softmax's reductions),
/// kNormalize (the division by the row sum, applied to the output instead),
/// kOutput (the product with v) and the two below.
inline constexpr llvm::StringLiteral kAttentionAttr = "tile.attention";
inline constexpr llvm::StringLiteral kScores = "scores";
inline constexpr llvm::StringLiteral kRowMax = "row_max";
inline constexpr llvm::StringLiteral kRowSum = "row_sum";
inline constexpr llvm::StringLiteral kNormalize = "normalize";
inline constexpr llvm::StringLiteral kOutput = "output";
/// torch's safe softmax: where(all(x == -inf), 0, p) (kZeroMaskedRows), whose
/// all(x == -inf) (kMaskedRows) the conversion reads as a row sum of 0.
inline constexpr llvm::StringLiteral kZeroMaskedRows = "zero_masked_rows";
inline constexpr llvm::StringLiteral kMaskedRows = "masked_rows";
/// p rounded to v's type before the product (which the conversion does to
/// the unnormalised probabilities instead).
inline constexpr llvm::StringLiteral kProbsCast = "probs_cast";

/// The most elements a program reduces in registers at once (one row of a
/// softmax or a norm, rounded up to a power of two). Longer rows loop over
/// chunks of kRowChunkElements, reading their inputs once per reduction.
/// Both keep a layout conversion of an f32 tile within 48 KiB of static
/// shared memory (a tile of 8192 elements needs 64.5 KiB).
inline constexpr int64_t kPersistentRowElements = 4096;
inline constexpr int64_t kRowChunkElements = 4096;

/// The most elements a program takes so that operands broadcast along its
/// rows (a norm's weight) are read again by fewer programs.
inline constexpr int64_t kMaxReuseElements = 4096;

enum class GenericKind {
  /// Reads one input through a projected permutation and yields it: a
  /// transpose, broadcast or copy, which is a strided view, not a kernel.
  View,
  /// No tensor inputs; yields a scalar defined outside the body or a
  /// constant: a `linalg.fill`, read by consumers as a splat.
  Fill,
  /// Every loop parallel.
  Elementwise,
  /// Some loops are reductions; every output is `combine(value, out)`.
  Reduction,
  /// A matmul-like reduction (`out + a * b` over one k loop), lowered to
  /// `tile.dot`.
  Contraction,
};

/// The loops of a contraction as tile.dot runs it: upstream's
/// inferContractionDims, but with one M and one N loop, the largest (the
/// innermost in the result among equals), and the other M and N loops as
/// batch loops that the operand without them broadcasts: grouped-query
/// attention reads one key head for several query heads.
llvm::FailureOr<mlir::linalg::ContractionDimensions>
getContractionDims(mlir::linalg::GenericOp op);

/// What the generic computes, or an explanation starting "unsupported:" of
/// why tileopt cannot form a kernel of it.
llvm::FailureOr<GenericKind> classify(mlir::linalg::GenericOp op,
                                      std::string &why);

/// For output `i` of a reduction, the op of the body that yields
/// `combine(value, out_i)`; null if the output has no such combiner.
mlir::Operation *getCombiner(mlir::linalg::GenericOp op, unsigned i);

/// The identity of a combiner (`arith.addf` -> 0, `arith.maximumf` -> -inf,
/// ...) for the element type, or null if the op is no known combiner.
mlir::TypedAttr getCombinerIdentity(mlir::Operation *combiner);

/// Whether a combiner keeps the greater of its operands (arith.maximumf,
/// maxnumf, maxsi, maxui), or the lesser (keepsLesser).
bool keepsGreater(mlir::Operation *combiner);
bool keepsLesser(mlir::Operation *combiner);

/// An output of a reduction that carries the index of another output's
/// extremum (torch-mlir's argmax and argmin, max and min with indices):
/// output #index yields select(compare(x, acc), position, its own
/// accumulator), where acc is the accumulator of output #value, which a max
/// or a min combines with x from the combiner's identity, compare is
/// strictly greater (a max) or less in the combiner's order, and the position
/// an integer that grows with the iteration order (linalg.index, its
/// linearization, or a constant along a loop of size 1). Kernels keep
/// PyTorch's order: the least position among equal extrema, and a NaN as the
/// extremum (of arith.maximumf and arith.minimumf; the NaN-ignoring ones
/// never take it).
struct ArgReduction {
  unsigned value, index;
  mlir::Operation *compare, *select;
};
std::optional<ArgReduction> getArgReduction(mlir::linalg::GenericOp op,
                                            unsigned index);

/// The scalar a Fill-kind generic yields (a constant or a value defined
/// outside the body), or null.
mlir::Value getFillValue(mlir::linalg::GenericOp op);

/// The scalar a tensor holds in every element when it is a splat constant or
/// a Fill generic outside any group (through reshapes): kernels read it as a
/// scalar. Null otherwise.
mlir::Value getScalarSource(mlir::Value v);

/// True when `tensor` holds float zeros (getScalarSource of a constant 0).
bool isZeroTensor(mlir::Value tensor);

/// The `tile.space` kernel formation wrote on a generic of a group.
inline llvm::ArrayRef<int64_t> getSpace(mlir::linalg::GenericOp op) {
  return op->getAttrOfType<mlir::DenseI64ArrayAttr>(kSpaceAttr).asArrayRef();
}

/// A strided view of a buffer: element offset, sizes and strides (static).
struct StridedLayout {
  int64_t offset = 0;
  llvm::SmallVector<int64_t> sizes;
  llvm::SmallVector<int64_t> strides;

  /// The row-major layout of a new buffer of `shape`.
  static StridedLayout contiguous(llvm::ArrayRef<int64_t> shape);
};

/// The layout of the result of a view op (`tensor.expand_shape`,
/// `collapse_shape`, `extract_slice`, `cast`, or a View-kind generic) whose
/// source has layout `source`; nullopt if the result is no strided view of
/// the source's buffer (a collapse of dimensions that are not contiguous).
std::optional<StridedLayout> getViewLayout(mlir::Operation *view,
                                           const StridedLayout &source);

/// True for the ops getViewLayout takes (View-kind generics included).
bool isViewOp(mlir::Operation *op);

inline bool isParallel(mlir::utils::IteratorType t) {
  return t == mlir::utils::IteratorType::parallel;
}

/// Tensors a generic's body reads with `tensor.extract` (gathers), defined
/// outside it: operands in all but name.
llvm::SmallVector<mlir::Value> getCapturedTensors(mlir::linalg::GenericOp op);

/// Loop sizes of the op (all static after classification).
llvm::SmallVector<int64_t> getLoopSizes(mlir::linalg::GenericOp op);

/// The smallest power of two >= n (1 for n <= 1).
int64_t nextPowerOf2(int64_t n);

} // namespace tileopt::formation

#endif // TILEOPT_LIB_CONVERSION_LINALGTOTILE_FORMATION_H
