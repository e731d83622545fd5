//===- Layouts.h - distributed layouts of tiles -----------------*- C++ -*-===//
//
// Which thread of a program owns which element of a tile. A layout maps each
// thread's registers to tile coordinates: coordinate = (thread base +
// register offset) mod shape, where the register offsets are the same for
// every thread (static) and the thread base depends on the lane and warp.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_DIALECT_TILE_IR_LAYOUTS_H
#define TILEOPT_DIALECT_TILE_IR_LAYOUTS_H

#include "tileopt/Dialect/Tile/IR/Tile.h"

namespace tileopt::tile {

constexpr unsigned kWarpSize = 32;
/// The most warps a layout spreads a tile over (a CTA's 1024 threads).
constexpr int64_t kMaxLayoutWarps = 32;
/// The most elements a layout gives one thread in one repetition (Triton's
/// limit on a tile's elements): beyond it, register lists only exhaust memory.
constexpr int64_t kMaxElementsPerThread = int64_t(1) << 20;

/// The layout (encoding) of a tile type, or null.
mlir::Attribute getLayout(mlir::Type type);

/// `type` with `layout` as its encoding.
mlir::RankedTensorType withLayout(mlir::RankedTensorType type,
                                  mlir::Attribute layout);

/// Gives `value` the tile type `type` (same shape, another layout); a
/// constant's value attribute follows.
void setTileType(mlir::Value value, mlir::RankedTensorType type);

/// True for the layouts tileopt knows (blocked, mma, slice).
bool isLayout(mlir::Attribute attr);

/// The rank of the tiles a layout applies to.
unsigned getLayoutRank(mlir::Attribute layout);

/// A blocked layout for `shape` (rank 1 or more) where each thread holds
/// `vectorElems` contiguous elements of the fastest dimension (`order[0]`),
/// lanes then warps fill the dimensions from the fastest, and what is left
/// replicates.
BlockedLayoutAttr getDefaultBlockedLayout(mlir::MLIRContext *context,
                                          llvm::ArrayRef<int64_t> shape,
                                          unsigned vectorElems,
                                          unsigned numWarps,
                                          llvm::ArrayRef<unsigned> order = {});

/// The default layout of a tile of any rank: getDefaultBlockedLayout, and
/// for a rank-0 tile a slice of a one-element 1-D layout (every thread holds
/// the element, as after a full reduction).
mlir::Attribute getDefaultLayout(mlir::MLIRContext *context,
                                 llvm::ArrayRef<int64_t> shape,
                                 unsigned vectorElems, unsigned numWarps,
                                 llvm::ArrayRef<unsigned> order = {});

/// The register offsets of every thread's elements for a tile of `shape`:
/// element i of a thread sits at (threadBase + offsets[i]) mod shape.
llvm::SmallVector<llvm::SmallVector<int64_t>>
getRegisterOffsets(mlir::Attribute layout, llvm::ArrayRef<int64_t> shape);

/// The number of elements each thread holds.
int64_t getElemsPerThread(mlir::Attribute layout,
                          llvm::ArrayRef<int64_t> shape);

/// An upper bound on getElemsPerThread in a few multiplications (saturating
/// at 2^40): the registers before the ones that wrap onto the same element
/// merge. Exact for blocked layouts, which keep replicated registers.
int64_t getElemsPerThreadBound(mlir::Attribute layout,
                               llvm::ArrayRef<int64_t> shape);

/// The layout at the root of a chain of slices (blocked or mma).
mlir::Attribute getRootLayout(mlir::Attribute layout);

/// The number of warps a layout spreads a tile over.
unsigned getNumWarps(mlir::Attribute layout);

/// The rows and columns of one mma.sync m16n8 block.
constexpr int64_t kMmaM = 16, kMmaN = 8;

/// The k of the tensor-core MMA that `dot` runs on (sm_80 and newer): 16 for
/// f16/bf16 inputs with f32 accumulators and for f16 inputs with f16 ones, 8
/// for f32 inputs and accumulators where the dot allows tf32
/// (input_precision = tf32), 32 for i8 inputs with i32 accumulators and for
/// fp8 (f8E4M3FN, f8E5M2) inputs with f32 ones; 0 when it runs on CUDA cores.
int64_t getMmaK(DotOp dot);

/// The oldest chip whose tensor cores run `dot` (getMmaK): 89 for fp8
/// inputs (mma.sync .e4m3/.e5m2), else 80.
unsigned getMmaMinSmVersion(DotOp dot);

/// Whether `chip` has Hopper's warpgroup MMA (wgmma.mma_async): sm_90a, the
/// arch-specific target that PTX requires for it (plain sm_90 gets mma.sync).
bool hasWgmma(llvm::StringRef chip);

/// The number of `chip` (90 for sm_90a), or 0 for a name not sm_<number>.
unsigned getSmVersion(llvm::StringRef chip);

/// Whether tensor-core `dot` with an `m` x `n` accumulator in an mma layout
/// of `warpsPerCTA` runs on wgmma.mma_async (on a chip that hasWgmma):
/// m64nNk16 for 16-bit inputs, m64nNk8 for tf32, m64nNk32 for i8 and fp8.
/// Each warpgroup (4 warps along the rows) owns whole 64-row blocks, and the
/// warpsPerCTA[1] warpgroup columns split the `n` columns (N = n /
/// warpsPerCTA[1], a multiple of 8 up to 256, as Triton's instrShape N; for
/// i8, 8, 16, 24 or a multiple of 16).
bool isWgmmaDot(int64_t m, int64_t n, llvm::ArrayRef<unsigned> warpsPerCTA,
                DotOp dot);

/// Whether `dot`, with its accumulator in `layout`, can take an lhs in that
/// same layout from registers: an mma layout with all warps on the rows,
/// 16-bit inputs (the A fragment of an m16n8k16 MMA is two 16x8 blocks of
/// that layout, and wgmma's is a warp's 16 rows of them) and at most 64 lhs
/// elements a thread.
bool isRegisterLhs(DotOp dot, mlir::Attribute layout);

/// The layout of `layout` with its dimensions permuted (dim i of the result
/// is dim permutation[i] of the source), or null for slices.
mlir::Attribute permuteLayout(mlir::Attribute layout,
                              llvm::ArrayRef<int64_t> permutation);

/// The layout of a reshape's result (shape `to`) that keeps every register
/// of the source (shape `from`, `layout`) in place: where the reshape only
/// inserts or drops dimensions of size 1 (for an mma layout, leading ones),
/// and every dropped one is spread over no lanes or warps. Null otherwise.
mlir::Attribute reshapeInPlaceLayout(mlir::Attribute layout,
                                     llvm::ArrayRef<int64_t> from,
                                     llvm::ArrayRef<int64_t> to);

} // namespace tileopt::tile

#endif // TILEOPT_DIALECT_TILE_IR_LAYOUTS_H
