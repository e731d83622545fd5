//===- Lowering.h - shared core of the tile-to-NVVM lowering ----*- C++ -*-===//
//
// What the files of convert-tile-to-nvvm share: the per-kernel state the
// patterns read, the small builders, thread coordinates, views, the type
// converter, the pattern base, and one populate function per op family
// (TileToNVVM.cpp describes the lowering).
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_LIB_CONVERSION_TILETONVVM_LOWERING_H
#define TILEOPT_LIB_CONVERSION_TILETONVVM_LOWERING_H

#include "tileopt/Dialect/Tile/IR/Layouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <utility>

namespace tileopt::nvvm {

constexpr llvm::StringLiteral kGpuModuleName = "tileopt_kernels";

//===----------------------------------------------------------------------===//
// Per-kernel state shared by the patterns
//===----------------------------------------------------------------------===//

/// The values every pattern of one kernel needs: the thread's ids and the
/// kernel's shared memory.
struct KernelState {
  /// The thread's index in the block (tid.x), its lane (tid % 32) and warp
  /// (tid / 32), i32.
  mlir::Value tid, lane, warp;
  /// The warps that run the kernel's body (its num_warps; a warp-specialised
  /// kernel's producer warpgroup comes after them).
  unsigned numWarps = 0;
  mlir::LLVM::GlobalOp sharedMemory;
  /// Alignment of sharedMemory: 16, or 1024 for wgmma's swizzled operands.
  int64_t sharedAlignment = 16;
  /// Where the op being lowered keeps its shared memory: a byte offset (i32)
  /// into sharedMemory that sharedBase adds, null for the start (useScratch).
  mlir::Value scratchBase;
  /// Whether shared memory may have been used before the op being lowered:
  /// its first write must wait for every warp (leadingBarrier).
  bool usedBefore = true;
  /// The kernel's parameters, per tile.kernel argument.
  llvm::SmallVector<mlir::ValueRange> arguments;
  /// Its tensor-map parameters (LoweringState::tensorMaps), in order.
  llvm::SmallVector<mlir::Value> tensorMaps;
};

/// The widest vector a load or store may move: `elems` elements along `dim`.
struct VectorPlan {
  int64_t dim = 0;
  unsigned elems = 1;
};

/// How restageThroughShared lays a tile out in shared memory, so that the
/// accesses of a warp spread over the banks: row-major with the innermost
/// dimension padded by `pad` elements, or (2-D tiles, `vec` > 0) unpadded
/// with the groups of `vec` elements of row r XOR-swizzled: group g sits at
/// g ^ ((r / perPhase) % maxPhase) (Triton's swizzled shared layout). Or
/// (`fragments`) in the order that ldmatrix hands the new layout its words,
/// `slices` rounds of it, matrix rows XOR-swizzled by `rowSwizzle`
/// (ConvertLayoutOpToNVVM.cpp).
struct StagingLayout {
  int64_t pad = 0;
  int64_t vec = 0, perPhase = 1, maxPhase = 1;
  bool fragments = false;
  uint64_t rowSwizzle = 0;
  int64_t slices = 1;

  static StagingLayout padded(int64_t pad) { return {pad}; }
  static StagingLayout fragmentOrder(uint64_t rowSwizzle, int64_t slices) {
    StagingLayout s;
    s.fragments = true;
    s.rowSwizzle = rowSwizzle;
    s.slices = slices;
    return s;
  }
  bool swizzled() const { return vec > 0; }
  /// The elements a tile of `shape` takes.
  int64_t elements(llvm::ArrayRef<int64_t> shape) const;
  /// The element index of `coord` in a tile of `shape`.
  int64_t index(llvm::ArrayRef<int64_t> coord,
                llvm::ArrayRef<int64_t> shape) const;
  mlir::Value emitIndex(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<mlir::Value> coord,
                        llvm::ArrayRef<int64_t> shape) const;
};

/// What the analysis before conversion (analyzeAccess) proved about one
/// tile.load or tile.store.
struct AccessFacts {
  VectorPlan plan;
  /// Vector accesses need no run-time alignment check (tile.divisibility on
  /// the view, a divisible tile offset).
  bool aligned = false;
  /// Vector runs never straddle the end of the view (a size along the vector
  /// dimension that is a multiple of the run): one predicate, no scalar tail.
  bool wholeRuns = false;
  /// The view promises 32-bit indices (tile.index_bitwidth = 32).
  bool narrow = false;
  /// Dimensions whose index is provably inside the view (provenInBounds): no
  /// bounds check there. Empty: every dimension is checked.
  llvm::SmallVector<bool> inBounds;
  /// Dimensions whose tile offset is provably non-negative (knownNonNegative).
  llvm::SmallVector<bool> nonNegativeStarts;
  /// Per dimension, a power of two that divides both the tile offset and the
  /// view's size: the indices of one aligned group of that many are in bounds
  /// together, so they share one bounds check (Triton's mask constancy).
  llvm::SmallVector<int64_t> boundsGroups;
  /// The kernel argument whose shape the view has (tile.same_shape_as).
  std::optional<unsigned> sameShapeAs;
  /// The tile type of the scalar fallback (scalarFallbackTile), or null.
  mlir::RankedTensorType fallback;
  /// An atomic add that goes element by element (planScalarAdds): always
  /// through `fallback`, staged in shared memory this way, with no vector
  /// version.
  std::optional<StagingLayout> scalarAddStaging;
  /// A barrier comes first: an earlier access of this program to the same
  /// view, one of the two a store, may touch elements other threads touch
  /// here (orderViewAccesses).
  bool barrierBefore = false;
};

/// A tile.load lowered to cp.async into the staging area of the dot that
/// uses it (planAsyncCopies), or into one slot of its ring (pipelineLoop).
struct AsyncCopy {
  tile::DotOp dot;
  unsigned operand;
  /// The first async copy before its dot: waits for every warp to be done
  /// with the shared memory it overwrites.
  bool barrier = false;
  /// In a software pipeline: the ring slot (i32) the copy fills, and
  /// whether its iteration exists (i1; the copy moves no bytes otherwise).
  mlir::Value slot, enabled;
  /// A loop body's load whose data an earlier iteration's copy brought into
  /// the ring: it emits nothing.
  bool prefetched = false;
  /// A TMA copy (sm_90a): the index of its kernel's tensor map
  /// (LoweringState::tensorMaps), else -1. The ring slot's mbarrier counts
  /// its bytes; `mbarriers` loads share it (its arrival count). The
  /// placement of `mbarrierDot`, the pipeline's first dot, holds them.
  int tensorMap = -1;
  unsigned mbarriers = 0;
  tile::DotOp mbarrierDot;
  /// Only TMA can make this copy (isTmaCopyable, not isAsyncCopyable).
  bool tmaOnly = false;
  /// Something between the load and its dot uses shared memory: the copy is
  /// right only in a software pipeline's ring, which keeps that apart.
  bool ringOnly = false;
  /// One 4-byte cp.async per element: the B operand of a tf32 wgmma dot,
  /// which its staging area holds transposed (K-major).
  bool elementWise = false;
  /// Leading unit dimensions of the load's tile that a reshape drops before
  /// the dot (one matrix of a batch), and whether a transpose comes between:
  /// its coordinates past them are the operand's, swapped if so.
  unsigned unitDims = 0;
  bool transposed = false;
  /// On the body's first prefetched TMA load: the phase parity (i32) of
  /// the slot's mbarrier that its iteration waits for.
  mlir::Value phase;
  /// Issued by the producer warp of a warp-specialised kernel
  /// (warpSpecializeLoop): by its first lane, with no barrier before it.
  bool producer = false;
  /// On the first copy of a producer's iteration: the parity (i32) of the
  /// phase of its slot's "empty" mbarrier to wait for before the copies.
  mlir::Value emptyPhase;
};

/// A consumer's release of a ring slot after its dot (warpSpecializeLoop):
/// every consumer thread arrives on the slot's (i32) "empty" mbarrier, where
/// `enabled` (i1, or null: always).
struct SlotRelease {
  mlir::Value slot, enabled;
  tile::DotOp mbarrierDot;
};

/// A tensor map a kernel takes as an extra parameter (docs/kernel-abi.md):
/// over kernel argument `view`, moving boxes of `box` elements (outermost
/// dimension first) into shared memory swizzled by `swizzle` bytes (0, 32,
/// 64 or 128). The map's dimensions are the view's in the order `dims`
/// (outermost first; empty: the view's own, row-major), so that a box of a
/// view with unit stride along its first dimension reads it innermost.
struct TensorMapParam {
  unsigned view;
  llvm::SmallVector<int64_t> box;
  int64_t swizzle;
  llvm::SmallVector<int64_t> dims = {};
  bool operator==(const TensorMapParam &other) const {
    return view == other.view && box == other.box && swizzle == other.swizzle &&
           dims == other.dims;
  }
};

/// Where an op's shared memory starts (planSharedMemory): `offset` bytes in,
/// plus `slot * slotBytes` for the staging area of a dot whose operands a
/// software pipeline keeps in a ring of slots.
struct ScratchPlacement {
  int64_t offset = 0;
  int64_t slotBytes = 0;
  /// For a ring that TMA fills: its number of slots, and where their
  /// mbarriers start (8 bytes each).
  unsigned slots = 0;
  int64_t mbarrierOffset = 0;
  /// For a dot whose lhs is staged once, before its loop (lhsHoisted): where,
  /// and whether no op before the loop reads shared memory (its staging then
  /// needs no barrier first).
  int64_t lhsOffset = 0;
  bool lhsUnread = false;
  /// Whether an earlier sibling loop's dot staged the same lhs there, and
  /// nothing between the loops wrote over it: no staging again.
  bool lhsStaged = false;
};

struct LoweringState {
  llvm::DenseMap<mlir::Operation *, KernelState> kernels;
  /// Warps per program of each kernel, by name (KernelOp::getNumWarps).
  llvm::StringMap<unsigned> numWarps;
  /// The chip's compute capability (getSmVersion: 80 for sm_80).
  unsigned smVersion = 0;
  /// The chip has wgmma (hasWgmma: sm_90a).
  bool wgmma = false;
  /// Pipelines feeding wgmma may copy with TMA (the pass's `tma` option).
  bool tma = false;
  /// Stores that add may add f32 vectors (`red.global.add.v4.f32`: sm_90 and
  /// PTX 8.1).
  bool vectorAdds = false;
  /// Loads that copy straight into their dot's shared-memory staging area
  /// with cp.async (planAsyncCopies), and per dot which operands (bit 0: lhs,
  /// bit 1: rhs) arrive that way.
  llvm::DenseMap<mlir::Operation *, AsyncCopy> asyncCopies;
  llvm::DenseMap<mlir::Operation *, unsigned> asyncOperands;
  /// What the analysis before conversion proved about each load and store.
  llvm::DenseMap<mlir::Operation *, AccessFacts> accesses;
  /// The ring slot (an index value of its loop) that each pipelined dot
  /// reads its operands from (pipelineLoop).
  llvm::DenseMap<mlir::Operation *, mlir::Value> dotSlots;
  /// Pipelined wgmma dots whose MMA keeps running into the next iteration,
  /// and the groups each leaves running (wgmma.wait_group N: its pipeline's
  /// dots; pipelineLoop).
  llvm::DenseMap<mlir::Operation *, unsigned> overlappedDots;
  /// Pipelined dots whose operands TMA copies (findPipelines), and each
  /// kernel's tensor maps, by kernel name.
  llvm::DenseSet<mlir::Operation *> tmaDots;
  llvm::StringMap<llvm::SmallVector<TensorMapParam>> tensorMaps;
  /// Pipelines may get a producer warp (the pass's `warp-specialize`
  /// option); the first dots of those that do, whose placement holds two
  /// mbarriers per slot ("full", then "empty"); the kernels that have one
  /// (a block of 32 x (num_warps + 4) threads); the consumers' releases.
  bool warpSpecialize = false;
  /// The pass's `max-registers` (each kernel's .maxnreg; 0: none).
  unsigned maxRegisters = 0;
  llvm::DenseSet<mlir::Operation *> specializedDots;
  llvm::StringSet<> specializedKernels;
  llvm::DenseMap<mlir::Operation *, SlotRelease> slotReleases;
  /// Kernels that host code launches (tile.launch): their parameters are
  /// the ABI's alone, so they take no tensor maps.
  llvm::StringSet<> hostLaunched;
  /// Where each op that uses shared memory keeps it, and the first users of
  /// each kernel (SharedMemoryPlan).
  llvm::DenseMap<mlir::Operation *, ScratchPlacement> placements;
  llvm::DenseSet<mlir::Operation *> firstSharedUsers;
  /// How each layout conversion lays its tile out in shared memory: the
  /// fewest bytes (restageLayout), then planStagingLayouts's.
  llvm::DenseMap<mlir::Operation *, StagingLayout> stagingLayouts;
  /// Tile compares whose registers share results (compareGroups).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<unsigned>> compareLeaders;

  KernelState &get(mlir::Operation *op) {
    auto func = op->getParentOfType<mlir::gpu::GPUFuncOp>();
    assert(func && "op outside a converted kernel");
    return kernels[func];
  }
};

//===----------------------------------------------------------------------===//
// Small builders (Utility.cpp)
//===----------------------------------------------------------------------===//

/// Tile coordinates are small and non-negative: their arithmetic never wraps,
/// which lets LLVM fold a register's offset out of its address.
inline constexpr mlir::arith::IntegerOverflowFlags kNoWrap =
    mlir::arith::IntegerOverflowFlags::nsw |
    mlir::arith::IntegerOverflowFlags::nuw;

/// Integer constants: i32, i64, or of `type`.
mlir::Value i32Const(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value i64Const(mlir::OpBuilder &b, mlir::Location loc, int64_t v);
mlir::Value intConst(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                     int64_t v);

/// The scalar element bit width as stored in memory (i1 is a byte).
unsigned storageBits(mlir::Type type);

/// The shared memory of the op being lowered (`state.scratchBase` into the
/// kernel's) as an i8 pointer.
mlir::Value sharedBase(mlir::OpBuilder &b, mlir::Location loc,
                       KernelState &state);

/// Points `ks.scratchBase` at the shared memory that `op` keeps
/// (state.placements; `owner`'s instead when given: the dot whose staging
/// area a copy fills), for a ring the slot `slot` (a converted index
/// value), and notes whether `op` is the kernel's first user of shared
/// memory. Every pattern that touches shared memory calls it first.
void useScratch(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                const LoweringState &state, mlir::Operation *op,
                mlir::Value slot = {}, mlir::Operation *owner = nullptr);

/// Where `place` starts in shared memory (an i32 byte offset), in ring slot
/// `slot` (an i32) if given.
mlir::Value scratchOffset(mlir::OpBuilder &b, mlir::Location loc,
                          const ScratchPlacement &place, mlir::Value slot);

/// The barrier before an op's first write to shared memory (every warp must
/// be done reading what an earlier op left there); none for the kernel's
/// first user of shared memory.
void leadingBarrier(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks);

/// The address of `element` number `index` (i32) in shared memory,
/// `byteOffset` bytes into it.
mlir::Value sharedPtr(mlir::OpBuilder &b, mlir::Location loc,
                      KernelState &state, mlir::Type element,
                      mlir::Value index /*i32*/, int64_t byteOffset = 0);

/// Values in shared memory are stored as their storage type (i1 as i8).
mlir::Value toStorage(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
mlir::Value fromStorage(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                        mlir::Type element);
mlir::Type storageType(mlir::OpBuilder &b, mlir::Type element);
/// fp8 values (isFp8Type) are their bytes in registers and memory (i8, as
/// TileTypeConverter converts them): a constant of them becomes its byte.
mlir::TypedAttr registerAttr(mlir::TypedAttr attr);
/// fp8 `byte` of type `from` as a float of type `to`, widened in software
/// (any chip: the dots on CUDA cores, and conversions before sm_89).
mlir::Value widenFp8(mlir::OpBuilder &b, mlir::Location loc, mlir::Type from,
                     mlir::Value byte, mlir::Type to);
/// The PTX name of an MMA input type: f16, bf16, tf32 (f32 with `tf32`), s8,
/// e4m3, e5m2.
llvm::StringRef mmaTypeName(mlir::Type element, bool tf32);

/// bar.sync 0: every thread of the program waits for the others.
void barrier(mlir::OpBuilder &b, mlir::Location loc);

/// The elements of a per-thread vector.
llvm::SmallVector<mlir::Value> unpack(mlir::OpBuilder &b, mlir::Location loc,
                                      mlir::Value vector);

/// A per-thread vector of `values`.
mlir::Value pack(mlir::OpBuilder &b, mlir::Location loc, mlir::VectorType type,
                 llvm::ArrayRef<mlir::Value> values);

/// An inline-asm statement (AT&T dialect) with `results` outputs, returned
/// one by one (several are a struct that it takes apart).
llvm::SmallVector<mlir::Value>
emitAsm(mlir::OpBuilder &b, mlir::Location loc, mlir::TypeRange results,
        mlir::ValueRange operands, llvm::StringRef text,
        llvm::StringRef constraints, bool sideEffects);

/// A PTX statement with no operands and no results, kept in place.
void emitPtx(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef text);

/// An inline-asm statement whose registers `regs` (all f32, "+f", or all i32,
/// "+r") are read and written in place, after the other inputs `inputs`
/// ("l" for i64, else "r"); kept in order with the other side-effecting
/// statements.
llvm::SmallVector<mlir::Value>
emitInPlaceAsm(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef text,
               llvm::ArrayRef<mlir::Value> regs, mlir::ValueRange inputs);

/// 16-bit values two to a b32 register (.f16x2, .bf16x2: the first in the
/// low half), as tensor cores take f16 accumulators and A fragments; and back
/// (f16).
llvm::SmallVector<mlir::Value>
packHalfPairs(mlir::OpBuilder &b, mlir::Location loc,
              llvm::ArrayRef<mlir::Value> halves);
llvm::SmallVector<mlir::Value>
unpackHalfPairs(mlir::OpBuilder &b, mlir::Location loc,
                llvm::ArrayRef<mlir::Value> words);

/// "{$first, ..., $(first + count - 1)}".
std::string asmRegisterList(unsigned first, unsigned count);

//===----------------------------------------------------------------------===//
// Coordinates (Utility.cpp)
//===----------------------------------------------------------------------===//

/// The per-thread base coordinate (i32, before wrapping) of each dimension.
llvm::SmallVector<mlir::Value> emitThreadBase(mlir::OpBuilder &b,
                                              mlir::Location loc,
                                              mlir::Attribute layout,
                                              KernelState &state);

/// The largest thread base of each dimension over all threads.
llvm::SmallVector<int64_t> maxThreadBase(mlir::Attribute layout);

/// The thread base of thread `tid` (emitThreadBase, computed statically).
llvm::SmallVector<int64_t> threadBase(mlir::Attribute layout, int64_t tid);

/// The bits of the warp id that step along dimension `dim` of a blocked or
/// mma layout: that warp index is (warp >> shift) & (count - 1).
struct WarpBits {
  unsigned shift, count;
};
WarpBits warpsAlong(mlir::Attribute layout, unsigned dim);

/// The coordinates (i32) of every element a thread holds of a tile.
struct TileCoords {
  /// Static, per register.
  llvm::SmallVector<llvm::SmallVector<int64_t>> offsets;
  /// Per register, per dim.
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> coords;
};

TileCoords emitCoords(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::RankedTensorType type, KernelState &state);

/// Whether this thread is the first owner of its elements: where a layout is
/// larger than the tile, several threads hold the same elements and only
/// one of them should store them. Null when every thread is.
mlir::Value emitOwnerPredicate(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Attribute layout,
                               llvm::ArrayRef<int64_t> shape,
                               KernelState &state);

/// Wrapped static offsets, for matching registers between layouts.
llvm::SmallVector<int64_t> wrap(llvm::ArrayRef<int64_t> offset,
                                llvm::ArrayRef<int64_t> shape);

/// Index of the register of `offsets` (wrapped by `shape`) equal to `want`.
std::optional<unsigned>
findRegister(llvm::ArrayRef<llvm::SmallVector<int64_t>> offsets,
             llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> want);

/// The row-major index in `shape` of the element at `base` + `offset`
/// (wrapped): a reshape keeps it.
int64_t wrappedLinear(llvm::ArrayRef<int64_t> base,
                      llvm::ArrayRef<int64_t> offset,
                      llvm::ArrayRef<int64_t> shape);

/// For a layout conversion or reshape from `from` to `to`: where every thread
/// already holds the elements that `to` gives it, and in the same registers
/// whichever the thread (a reshape that adds or drops unit dimensions, two
/// spellings of one distribution), the register of `from` behind each
/// register of `to`. Such an op moves nothing.
std::optional<llvm::SmallVector<unsigned>>
registersInPlace(mlir::RankedTensorType from, mlir::RankedTensorType to);

/// `ldmatrix` of `count` 8x8 b16 matrices (.trans: transposed); lane l
/// supplies the row address of matrix l / 8 (row l % 8). Returns the b32
/// registers: register m holds row l / 4, word l % 4 of matrix m.
llvm::SmallVector<mlir::Value> emitLdMatrix(mlir::OpBuilder &b,
                                            mlir::Location loc,
                                            mlir::Value rowPtr, unsigned count,
                                            bool trans);

/// Row-major linear index (i32) of `coord` in `shape`, with the innermost
/// dimension padded by `pad` elements (against shared-memory bank conflicts).
mlir::Value linearIndex(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<mlir::Value> coord,
                        llvm::ArrayRef<int64_t> shape, int64_t pad = 0);

/// The number of elements of `shape` with the innermost dimension padded by
/// `pad` (as linearIndex lays them out).
int64_t paddedElements(llvm::ArrayRef<int64_t> shape, int64_t pad);

/// Padding of the innermost dimension for a tile staged in shared memory:
/// one 32-bit word, so column accesses hit different banks.
int64_t smemPad(mlir::Type element);

/// The dimension along which a layout's registers are contiguous, and how
/// many elements a thread holds contiguously there (slices inherit it from
/// their blocked parent when the sliced dim is another one; an mma layout's
/// fragments hold pairs along the last dim).
std::pair<int64_t, unsigned> contiguity(mlir::Attribute layout);

//===----------------------------------------------------------------------===//
// Views: the kernel ABI (Utility.cpp)
//===----------------------------------------------------------------------===//

/// A view in the kernel: the pointer to its first element (the memref's
/// offset is folded into it by whoever launches the kernel), its sizes and
/// strides as `indexType` (i64, or i32 where the view promises 32-bit
/// indices: bounds checks and element offsets are then 32-bit, and offsets
/// are widened only at the address).
struct View {
  mlir::Value ptr;
  llvm::SmallVector<mlir::Value> sizes, strides;
  mlir::Type indexType;
  /// Dimensions whose indices need no bounds check (empty: all need one).
  llvm::SmallVector<bool> inBounds;
  /// Dimensions whose tile offset is provably non-negative (empty: none);
  /// elsewhere an index may be negative (out of bounds) and its arithmetic
  /// may wrap unsigned.
  llvm::SmallVector<bool> nonNegativeStarts;
  /// AccessFacts::boundsGroups (empty: none).
  llvm::SmallVector<int64_t> boundsGroups;
  int64_t rank() const { return sizes.size(); }
};

/// The view's values; what the memref type fixes statically (sizes, strides)
/// becomes a constant so that address arithmetic folds. With `narrow`, sizes
/// and strides are truncated to i32. `sizeValues` (the sizes of a view of the
/// same shape) replace the view's own size parameters.
View unpackView(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange values,
                mlir::MemRefType type, bool narrow = false,
                mlir::ValueRange sizeValues = {});

//===----------------------------------------------------------------------===//
// Global memory access and its analysis (LoadStoreOpToNVVM.cpp)
//===----------------------------------------------------------------------===//

/// A group of registers that one vector access moves: `count` contiguous
/// elements of a dimension in registers `first`, `first + stride`, ... (the
/// fastest dimension's are consecutive registers).
struct Run {
  unsigned first, count, stride = 1;
  unsigned reg(unsigned e) const { return first + e * stride; }
};

/// Splits a thread's registers into runs of at most `maxElems` contiguous
/// elements along `dim` whose registers lie `stride` apart (1: along
/// order[0]; along another dimension of a blocked layout, the registers of
/// the faster dimensions' sizePerThread between).
llvm::SmallVector<Run>
contiguousRuns(llvm::ArrayRef<llvm::SmallVector<int64_t>> offsets,
               llvm::ArrayRef<int64_t> shape, int64_t dim, unsigned maxElems,
               unsigned stride = 1);

/// Hands out each wrapped coordinate of a tile once, run by run: a thread
/// whose layout wraps around the tile writes each element a single time.
class WriteOnce {
public:
  WriteOnce(llvm::ArrayRef<llvm::SmallVector<int64_t>> offsets,
            llvm::ArrayRef<int64_t> shape) {
    for (const llvm::SmallVector<int64_t> &offset : offsets)
      wrapped.push_back(wrap(offset, shape));
  }

  /// Whether `run` is still to be written (no earlier run wrote its first
  /// element); marks all its elements written.
  bool claim(Run run) {
    if (!written.insert(wrapped[run.first]).second)
      return false;
    for (unsigned e = 1; e < run.count; ++e)
      written.insert(wrapped[run.reg(e)]);
    return true;
  }

private:
  llvm::SmallVector<llvm::SmallVector<int64_t>> wrapped;
  llvm::DenseSet<llvm::ArrayRef<int64_t>> written;
};

/// The bytes of shared memory the scalar fallback of a load or store
/// (scalarFallbackTile) stages `tile` in.
int64_t fallbackStagingBytes(mlir::RankedTensorType tile);

/// What a tile.load or tile.store moves: its view, tile type and offsets.
struct AccessOperands {
  mlir::Value view;
  mlir::RankedTensorType tile;
  mlir::ValueRange offsets;
};

/// The operands of a tile.load or tile.store; std::nullopt for other ops.
std::optional<AccessOperands> accessOperands(mlir::Operation *op);

/// What a load or store may assume (see AccessFacts): from its tile offsets,
/// the loops around it and its view's kernel argument attributes.
AccessFacts analyzeAccess(const AccessOperands &access);

/// Marks a tile.store with `add` whose elements are added one an instruction
/// (integers; f32 without `vectorAdds`) to go through shared memory into a
/// layout whose lanes add consecutive elements (AccessFacts::scalarAddStaging).
void planScalarAdds(tile::StoreOp store, bool vectorAdds, AccessFacts &facts);

/// The shared memory the scalar adds of `facts` stage through at once.
int64_t scalarAddStagingBytes(tile::StoreOp store, const AccessFacts &facts);

/// How the fallback of a load or store of `tile` lays it out in shared
/// memory (AccessFacts::fallback).
StagingLayout fallbackStaging(mlir::RankedTensorType tile,
                              const AccessFacts &facts);

/// Sets AccessFacts::barrierBefore on the loads and stores of `kernel` that
/// must wait for other threads' earlier accesses to the same view: a tile's
/// elements belong to different threads in two accesses unless both have the
/// same offsets and tile type, and a store's writes reach other threads only
/// across a barrier. So a program's accesses to one view keep program order
/// (different view arguments are not ordered against each other).
void orderViewAccesses(tile::KernelOp kernel, LoweringState &state);

/// The largest power of two (up to 2^30) dividing `v`.
int64_t powerOfTwoDivisor(int64_t v);

/// The kernel argument (or other value) a view is a view of.
mlir::Value viewRoot(mlir::Value view);

/// The largest power of two (up to 2^30) that provably divides an index
/// value: constants, products, sums, minima, maxima, remainders, choices,
/// casts, loop induction variables and loop-carried values, and view sizes.
int64_t knownDivisor(mlir::Value value, unsigned depth = 0);

/// Marks a loop for narrowInductionVariable (removed by it).
constexpr llvm::StringLiteral kNarrowLoopAttr = "tile.narrow_loop";

/// Marks the index loops of `kernel` whose induction variable fits in 32
/// bits: an upper bound in [0, 2^31), a non-negative lower bound and a
/// constant step in (0, 2^31), so that `iv + step` cannot wrap an unsigned
/// 32-bit compare. Marked loops count in i32 after the conversion
/// (narrowInductionVariable): one register for the counter and 32-bit
/// offsets from it, as Triton's loops. The attribute says whether the lower
/// bound needs clamping to the upper one to fit (`program_id * 16`).
void markNarrowLoops(tile::KernelOp kernel);

/// Rewrites a loop marked by markNarrowLoops to count in i32 with an
/// unsigned compare; its body sees the counter widened back to index. A
/// clamped lower bound min(lb, ub) runs the same iterations: none when
/// lb >= ub.
void narrowInductionVariable(mlir::scf::ForOp loop);

//===----------------------------------------------------------------------===//
// Shared-memory staging (ConvertLayoutOpToNVVM.cpp)
//===----------------------------------------------------------------------===//

/// Stores a tile's registers to shared memory, each replicated register
/// once, as runs of at most `maxElems` registers contiguous along dimension
/// `dim` (the last one if negative), `stride` registers apart
/// (contiguousRuns): one (vector) store per run at `pointerOf(coordinates of
/// the run's first register, its static offsets)`; with `keep`, only the runs
/// whose first register's static offsets it accepts.
void storeRunsToShared(
    mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
    mlir::RankedTensorType type, mlir::Value vector, unsigned maxElems,
    llvm::function_ref<mlir::Value(llvm::ArrayRef<mlir::Value>,
                                   llvm::ArrayRef<int64_t>)>
        pointerOf,
    llvm::function_ref<bool(llvm::ArrayRef<int64_t>)> keep = {},
    int64_t dim = -1, unsigned stride = 1);

/// Writes a tile's registers into shared memory at their (padded) row-major
/// positions; returns nothing. Callers put barriers around.
void storeTileToShared(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                       mlir::RankedTensorType type, mlir::Value vector,
                       llvm::ArrayRef<int64_t> logicalShape, int64_t pad,
                       int64_t byteOffset = 0);

/// A tile of type `from` (registers `vector`) in the layout of `to`, through
/// shared memory laid out as `staging`, between barriers: in the slices
/// restageSlicing picks, one after the other, so that the staging area holds
/// one slice.
llvm::SmallVector<mlir::Value>
restageThroughShared(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                     mlir::RankedTensorType from, mlir::Value vector,
                     mlir::RankedTensorType to, const StagingLayout &staging);

/// How restageThroughShared moves a 2-D tile: in `slices` slices along
/// `dim`, the fewest that keep a slice within kRestageSliceBytes where both
/// layouts hold whole slices in static registers (each thread's index of a
/// register along `dim` falls in one slice whatever the thread); else one.
struct RestageSlicing {
  int64_t dim = 0;
  int64_t slices = 1;
};
RestageSlicing restageSlicing(mlir::RankedTensorType from,
                              mlir::RankedTensorType to,
                              const StagingLayout &staging);

/// Whether a tile has one element: each thread holds it in any layout, so
/// changing its layout or shape moves nothing.
inline bool isSingleElement(mlir::RankedTensorType type) {
  return type.getNumElements() == 1;
}

/// The shared memory a layout conversion through it aims to stay within.
constexpr int64_t kRestageSliceBytes = 16 * 1024;

/// The cheapest StagingLayout::fragments for restaging `from` as `to` (a
/// reshape: any ranks, the same row-major order) in one round, if they can
/// take one.
std::optional<StagingLayout> fragmentLayout(mlir::RankedTensorType from,
                                            mlir::RankedTensorType to);

/// The staging layout of a conversion from `from` to `to` through shared
/// memory: of the paddings and swizzles, one whose accesses take the fewest
/// bank wavefronts (counted for every warp). Without `maxBytes`, the fewest
/// bytes among those, then the fewest instructions; with it, the fewest
/// instructions within `maxBytes` (a swizzle costs an XOR per access, a
/// padding only bytes).
StagingLayout restageLayout(mlir::RankedTensorType from,
                            mlir::RankedTensorType to, int64_t maxBytes = 0);

/// The staging layout of `op` (LoweringState::stagingLayouts, which the pass
/// fills for every conversion before anything asks).
StagingLayout stagingLayout(tile::ConvertLayoutOp op,
                            const LoweringState &state);

struct SharedMemoryPlan;

/// Picks the staging layout of each layout conversion of `kernel`
/// (LoweringState::stagingLayouts): the fewest instructions within the
/// shared memory of `plan`, made with the fewest bytes, so that a conversion
/// never raises the kernel's shared memory to save instructions.
void planStagingLayouts(tile::KernelOp kernel, const SharedMemoryPlan &plan,
                        LoweringState &state);

/// The bytes restageThroughShared stages at once.
int64_t restageBytes(mlir::RankedTensorType from, mlir::RankedTensorType to,
                     const StagingLayout &staging);

//===----------------------------------------------------------------------===//
// Tensor-core dots (DotOpToNVVM.cpp, MmaDotToNVVM.cpp, WgmmaDotToNVVM.cpp)
//===----------------------------------------------------------------------===//

/// Whether `dot` runs on wgmma: the chip has it and its mma accumulator
/// fits (isWgmmaDot).
bool usesWgmma(tile::DotOp dot, const LoweringState &state);

/// Bytes of a `rows` x `rowBytes` wgmma operand in shared memory: the
/// layout of wgmmaOffset, whole 8-row swizzle atoms.
int64_t wgmmaOperandBytes(int64_t rows, int64_t rowBytes);

/// Byte offset of element (row, col) (of `elemBytes`) of an operand with
/// `rows` rows in wgmma's canonical swizzled layout (the one Triton and
/// CUTLASS use): columns split into atoms `swizzle` bytes wide (128, 64 or
/// 32), each atom holds every row (`swizzle` bytes apart), and inside an
/// 8-row group the 16-byte chunk c of row r sits at c ^ ((r % 8) / (128 /
/// swizzle)). A `swizzle` of 16 is one unswizzled 16-byte column of rows.
mlir::Value wgmmaOffset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                        mlir::Value col, int64_t rows, int64_t swizzle,
                        int64_t elemBytes);

/// Byte offset of operand `operand` (0: lhs, 1: rhs) of a wgmma dot in its
/// shared-memory staging area.
int64_t wgmmaOperandOffset(tile::DotOp dot, unsigned operand);

/// Byte offset of element (row, col) of an mma.sync operand whose rows are
/// `rowBytes` long (a power of two) and elements `elemBytes`: rows one after
/// the other, and the 16-byte chunk c of row r at c ^ phase(r), the XOR
/// swizzle Triton uses for these operands: the 8 rows an ldmatrix reads
/// (one chunk each) hit different banks without padding.
mlir::Value mmaOffset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row,
                      mlir::Value col, int64_t rowBytes, int64_t elemBytes);

/// How operand `operand` of a tensor-core dot lies in its staging area
/// (wgmmaOffset's or mmaOffset's layout): `rows` rows of `rowBytes`, the
/// tile's rows, or its columns where it is `transposed`. The lhs is always
/// K-major (m rows of k); the rhs is N-major (k rows of n) but for its
/// transpose (n rows of k, K-major): on wgmma for tf32 and always for i8
/// (the only major PTX allows; ldmatrix transposes only 16-bit elements),
/// and for 16-bit inputs whose rhs tile holds runs along K (a
/// transposed weight), which then copy into it as they are (mma.sync reads
/// them with ldmatrix without .trans, wgmma without imm-trans-b, TMA with
/// boxes over the view's dimensions (1, 0)). On wgmma, `swizzle` is the
/// width of its atoms (wgmmaOffset): the rows' bytes up to 128, or less for
/// an N-major rhs whose columns warpgroups split, so that each warpgroup's
/// columns are whole atoms, or half of a 32-byte one (N = 8: its start is
/// 16 bytes into the atom, as Triton's). 16 (an n8 rhs, rows of 16 bytes)
/// is wgmma's unswizzled layout: rows one after the other.
struct StagedOperand {
  int64_t rows, rowBytes;
  bool transposed;
  int64_t swizzle;
  bool operator==(const StagedOperand &other) const {
    return rows == other.rows && rowBytes == other.rowBytes &&
           transposed == other.transposed && swizzle == other.swizzle;
  }
};
StagedOperand stagedOperand(tile::DotOp dot, unsigned operand, bool wgmma);

/// Byte offset of the lhs (operand 0, m x k) or rhs (1, k x n) of an
/// mma.sync dot in its staging area (each in mmaOffset's layout).
int64_t mmaOperandOffset(tile::DotOp dot, unsigned operand);

/// A load that several dots of a loop body read as the same operand (the
/// parts of a 192-wide block share their rows of a and columns of b) is
/// copied once, into the staging area of the first of them, its owner
/// (AsyncCopy::dot): the others read it there and stage only the operands
/// they own. kBorrowedOperandsAttr on a dot is the mask of its operands so
/// read (bit 0: lhs, bit 1: rhs); only software pipelines do it, whose rings
/// are live for the whole loop (planAsyncCopies).
constexpr llvm::StringLiteral kBorrowedOperandsAttr = "tile.borrowed_operands";
unsigned borrowedOperands(tile::DotOp dot);
void setBorrowedOperands(tile::DotOp dot, unsigned mask);

/// Where a dot reads an operand it borrows: `owner`'s staging area, which
/// starts `scratch` (i32) bytes into shared memory. A null owner: its own.
struct BorrowedOperand {
  tile::DotOp owner;
  mlir::Value scratch;
};

/// Where element (row, col) of operand `operand` of a tensor-core dot goes in
/// its staging area (a byte offset into shared memory): wgmma's swizzled
/// layout or mma.sync's (mmaOffset).
mlir::Value stagedOperandOffset(mlir::OpBuilder &b, mlir::Location loc,
                                tile::DotOp dot, unsigned operand, bool wgmma,
                                mlir::Value row, mlir::Value col);

/// Stores operand `operand` (registers `vector`) of a tensor-core dot into
/// its staging area (stagedOperandOffset), a 16-byte chunk at a time where
/// the layout holds the elements contiguously along the rows.
void storeDotOperand(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                     tile::DotOp dot, unsigned operand, bool wgmma,
                     mlir::Value vector);

/// Puts the operands of a tensor-core dot into its staging area: those that
/// planAsyncCopies did not send there with cp.async (bit i of
/// `asyncOperands` for operand i) and that it does not read from registers
/// or a hoisted area (lhsInRegisters, lhsHoisted) with `store(i)` after a
/// barrier, then waits for this
/// thread's copies. In a software pipeline (`pipelined`) the copies were
/// waited for before (pipelineLoop). Returns whether the caller must put a
/// barrier (and for wgmma a proxy fence) before reading the area.
bool stageDotOperands(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                      tile::DotOp dot, unsigned asyncOperands, bool pipelined,
                      llvm::function_ref<void(unsigned)> store);

/// Whether a tensor-core dot reads its lhs from registers (isRegisterLhs):
/// it is in the accumulator's layout.
bool lhsInRegisters(tile::DotOp dot);

/// The A fragment (four b32 registers) of row block `rm` and k step `kk` of
/// an lhs in registers (`values`, in the accumulator layout's order, `k`
/// columns): 16x8 blocks kk / 8 and kk / 8 + 1, rows g and g + 8 of each.
llvm::SmallVector<mlir::Value>
registerLhsFragment(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::ArrayRef<mlir::Value> values, int64_t k, int64_t rm,
                    int64_t kk);

/// Whether a tensor-core dot in a loop stages its loop-invariant lhs once,
/// before the loop (stageHoistedLhs), in shared memory that the loop keeps
/// (planSharedMemory): its iterations only read it.
bool lhsHoisted(tile::DotOp dot);

/// lhsHoisted's answer, recorded on each dot before conversion
/// (recordHoistedLhs): the conversion replaces loop bodies' arguments before
/// the dots that read them, and a dot's lhs may be such an argument.
constexpr llvm::StringLiteral kLhsHoistedAttr = "tile.lhs_hoisted";
void recordHoistedLhs(mlir::ModuleOp module);

/// The bytes a hoisted lhs (lhsHoisted) takes.
int64_t hoistedLhsBytes(tile::DotOp dot, bool wgmma);

/// Where a dot's hoisted lhs (lhsHoisted) goes, and the barriers its staging
/// needs: before, unless nothing read shared memory earlier; after, unless
/// the loop starts with one (a cp.async pipeline's).
struct HoistedLhs {
  int64_t offset = 0;
  bool barrierBefore = true, barrierAfter = true;
  bool staged = false; // ScratchPlacement::lhsStaged
};

/// Stores a hoisted lhs (registers `lhs`) before the dot's loop (and for
/// wgmma with a proxy fence after), unless it is `staged` already.
void stageHoistedLhs(mlir::ConversionPatternRewriter &rewriter,
                     mlir::Location loc, KernelState &ks, tile::DotOp dot,
                     bool wgmma, mlir::Value lhs, const HoistedLhs &hoist);

/// tile.dot on Hopper's warpgroup MMA (isWgmmaDot): A (K-major) and B
/// (MN-major, imm-trans-b) are staged in shared memory in wgmma's swizzled
/// layout, then each warpgroup issues one wgmma.mma_async m64nNk16 per 64-row
/// block and k16 step on descriptors of them, and waits for all. The
/// accumulator fragment of m64nN is the mma layout's (each warp 16 rows,
/// 8-column blocks in order), so the registers stay where they are. A dot
/// that leaves `overlapped` groups running (LoweringState::overlappedDots)
/// waits only until that many are (wgmma.wait_group `overlapped`).
mlir::LogicalResult lowerWgmmaDot(tile::DotOp op, mlir::Value lhs,
                                  mlir::Value rhs, mlir::Value accVec,
                                  tile::MmaLayoutAttr mma, KernelState &ks,
                                  mlir::ConversionPatternRewriter &rewriter,
                                  mlir::VectorType accVecType,
                                  unsigned asyncOperands, bool pipelined,
                                  unsigned overlapped, const HoistedLhs &hoist,
                                  llvm::ArrayRef<BorrowedOperand> borrowed);

/// tile.dot on tensor cores: operands staged in shared memory, fragments
/// loaded with ldmatrix (B transposed), mma.sync per 16x8 block and k16
/// step. The accumulator registers are in the mma layout's order. A hoisted
/// lhs (lhsHoisted) goes where `hoist` says.
mlir::LogicalResult
lowerMmaDot(tile::DotOp op, mlir::Value lhs, mlir::Value rhs,
            mlir::Value accVec, tile::MmaLayoutAttr mma, KernelState &ks,
            mlir::ConversionPatternRewriter &rewriter,
            mlir::VectorType accVecType, unsigned asyncOperands, bool pipelined,
            const HoistedLhs &hoist, llvm::ArrayRef<BorrowedOperand> borrowed);

//===----------------------------------------------------------------------===//
// Elementwise ops (ElementwiseOpToNVVM.cpp)
//===----------------------------------------------------------------------===//

/// An f32 division that may be approximate (`fastmath<afn>`, Triton's `/`):
/// PTX's div.full.f32 (2 ulp over the full range) instead of the IEEE
/// div.rn.f32, whose slow path costs registers and a branch. Only in
/// kernels: host code keeps LLVM's own lowering.
bool isApproxDivision(mlir::Operation *op);

/// Which registers of `cmp`, an `iota (+ splat) < splat` comparison as in
/// masks (maybe expanded and broadcast), share their result: the start and
/// the bound are multiples of some g, so the result is constant over aligned
/// groups of g indices (Triton's axis analysis calls this constancy). Per
/// register, the first register of its group in every thread; empty when
/// none share.
llvm::SmallVector<unsigned> compareGroups(mlir::arith::CmpIOp cmp);

//===----------------------------------------------------------------------===//
// Shared memory size (SharedMemory.cpp)
//===----------------------------------------------------------------------===//

/// Bytes of shared memory an op needs while it runs (0 for most).
int64_t scratchBytes(mlir::Operation *op, const LoweringState &state);

/// Picks the tensor-core dot operands (mma.sync or wgmma) that a tile.load
/// copies from global memory straight into the dot's staging area with
/// cp.async (as Triton does): no registers hold them on the way and one
/// instruction moves 16 bytes. The load must be the operand's only producer
/// in the dot's block, proven aligned with 16-byte runs along the rows (no
/// fallback; a run across the view's end copies the bytes before it),
/// padded with zeros (cp.async zero-fills what it skips), and no op between
/// it and the dot may use shared memory (it
/// would overwrite the staging area) unless a software pipeline's ring keeps
/// the two apart (AsyncCopy::ringOnly).
void planAsyncCopies(tile::KernelOp kernel, LoweringState &state);

/// Marks the dimensions of the loads that planAsyncCopies copies along which
/// the whole tile provably lies in its view (a loop over whole blocks, see
/// provenInBounds): their copies need no bounds check there. Only for
/// copies: a register load whose rows are unchecked lets ptxas hoist it,
/// and the generic sm_80 attention kernel then spilled.
void proveCopiedTilesInBounds(LoweringState &state);

/// Takes back the copies that only a pipeline could make and that the
/// kernel's pipelines do not hold: those only TMA could make
/// (AsyncCopy::tmaOnly) outside `tmaLoads`, the loads of its TMA pipelines,
/// and those right only in a ring (AsyncCopy::ringOnly) outside
/// `pipelinedLoads`, the loads of all of them. Those loads go through
/// registers.
void demotePipelineOnlyCopies(
    tile::KernelOp kernel, const llvm::DenseSet<mlir::Operation *> &tmaLoads,
    const llvm::DenseSet<mlir::Operation *> &pipelinedLoads,
    LoweringState &state);

/// Whether `load` reads zeros past its view (what cp.async and TMA fill).
bool hasZeroPadding(tile::LoadOp load);

/// Whether a load with `facts` can copy its tile into a dot's staging area
/// with 16-byte cp.async: aligned 16-byte runs along dimension `dim` (the
/// one the staging area holds contiguously), zero padding.
bool isAsyncCopyable(tile::LoadOp load, const AccessFacts &facts,
                     int64_t dim = 1);

/// Where the ops of a kernel keep their shared memory (planSharedMemory).
struct SharedMemoryPlan {
  /// The kernel's shared memory.
  int64_t bytes = 0;
  /// Per op that uses shared memory; absent: at the start.
  llvm::DenseMap<mlir::Operation *, ScratchPlacement> placements;
  /// The op that uses shared memory first, if no loop is around it: nothing
  /// ran before it, so it needs no barrier before its first write.
  mlir::Operation *firstUser = nullptr;
};

/// Lays out `kernel`'s shared memory with a ring of `ringSlots[dot]` slots
/// for each dot of a pipelined loop (see pipelineLoop): a ring is
/// live through its loop, so the ops inside the loop keep their shared
/// memory after it; every other op's is live only while it runs, so all of
/// them start at the same place (or after the rings around them).
SharedMemoryPlan
planSharedMemory(tile::KernelOp kernel,
                 const llvm::DenseMap<mlir::Operation *, unsigned> &ringSlots,
                 const LoweringState &state);

//===----------------------------------------------------------------------===//
// Software pipelining (SoftwarePipeline.cpp)
//===----------------------------------------------------------------------===//

/// A loop whose body copies operands of its tensor-core dots with cp.async
/// (planAsyncCopies), and can prefetch them: nothing in it writes memory and
/// the copies' offsets depend only on the induction variable and values
/// from outside.
struct LoopPipeline {
  mlir::scf::ForOp loop;
  llvm::SmallVector<tile::LoadOp> loads;
  llvm::SmallVector<tile::DotOp> dots;
  /// Its copies are TMA's (isTmaCopyable): wgmma dots in the loop's body,
  /// every load a tensor map's box; one mbarrier per slot for all of them,
  /// held by the first dot's placement (`dots` are in body order).
  bool tma = false;
  /// Its dots are mma.sync's, in the loop's body: they read their slot
  /// into registers, so the slot is refilled right after them and the ring
  /// needs one slot fewer (as Triton's sm_80 pipeline).
  bool refillAfterDots = false;

  /// A producer warp issues its copies (canWarpSpecialize).
  bool warpSpecialized = false;

  /// The slots of its dots' rings with `stages` stages.
  unsigned slots(unsigned stages) const {
    return refillAfterDots ? stages - 1 : stages;
  }
};

/// The loops of `kernel` that pipelineLoop can pipeline. Where a branch of
/// one that stores also yields a scalar that its copies' offsets need, the
/// scalar moves into a branch of its own (splitBranchScalars).
llvm::SmallVector<LoopPipeline> findPipelines(tile::KernelOp kernel,
                                              const LoweringState &state);

/// The most stages, at most `stages`, with which the rings of `pipelines`
/// and the rest of `kernel`'s shared memory fit in `limit` bytes; 1 if none.
unsigned fitStages(tile::KernelOp kernel,
                   llvm::ArrayRef<LoopPipeline> pipelines, unsigned stages,
                   int64_t limit, const LoweringState &state);

/// Gives up TMA (keeps cp.async) in the `pipelines` of `kernel` whose copies
/// cp.async makes as well, where TMA's mbarriers would leave room for fewer
/// blocks per SM in the chip's shared memory (`limit` bytes a block, 1 KiB
/// more an SM, 1 KiB of it kept per block). Attention's 3-stage rings of
/// 64 x 64 f16 keys and values and its 64 x 64 queries need 57,344 bytes,
/// four blocks per H100 SM; 24 bytes of mbarriers more left three, 5%
/// slower.
void keepOccupancyWithoutTma(tile::KernelOp kernel,
                             llvm::MutableArrayRef<LoopPipeline> pipelines,
                             unsigned stages, int64_t limit,
                             LoweringState &state);

/// Keeps the copies of `stages - 1` iterations of `p.loop` in flight while
/// its dots run, with the dots' staging areas as rings of `p.slots(stages)`
/// slots (see SoftwarePipeline.cpp); a wgmma dot that only accumulates into
/// the loop's value keeps running into the next iteration, and the copies
/// are then `stages - 2` iterations ahead.
mlir::scf::ForOp pipelineLoop(const LoopPipeline &p, unsigned stages,
                              LoweringState &state);

/// Warps in a warpgroup (wgmma's unit; a producer's).
constexpr unsigned kWarpgroupWarps = 4;

/// Whether a producer warp can issue the copies of `p`, one of `kernel`'s
/// `count` pipelines (warp-specialize): the kernel's only one, a TMA
/// pipeline in its body, with no shared memory used before it, whose bounds
/// and copy offsets come from ops that the producer can compute again.
bool canWarpSpecialize(tile::KernelOp kernel, const LoopPipeline &p,
                       size_t count, const LoweringState &state);

/// Gives the kernel of `p` (canWarpSpecialize) a producer warp after its
/// `num_warps` consumer warps (see SoftwarePipeline.cpp): the kernel's body
/// runs in the consumers, while the producer computes the loop's bounds
/// again and copies each iteration into the ring of `stages` slots once the
/// consumers released the slot. Returns the consumers' loop.
mlir::scf::ForOp warpSpecializeLoop(const LoopPipeline &p, unsigned stages,
                                    LoweringState &state);

/// Marks the scf.if that splits a warp-specialised kernel into consumers
/// and producer: its mbarriers' offset, slots and loads per slot
/// (finishWarpSpecialization removes it).
constexpr llvm::StringLiteral kWarpSpecializedAttr = "tile.warp_specialized";

/// After conversion: the kernel's first thread initialises the split's
/// mbarriers before it, every thread waits for that, and the consumers'
/// barriers become a named barrier of the consumer threads alone.
void finishWarpSpecialization(mlir::scf::IfOp split, LoweringState &state);

/// Marks a loop whose results, listed by index, wgmma dots may still be
/// writing (pipelineLoop; waitForWgmmaResults removes it).
constexpr llvm::StringLiteral kWgmmaPendingAttr = "tile.wgmma_pending";

/// Waits (wgmma.wait_group 0) for the wgmma dots still writing `loop`'s
/// results listed in kWgmmaPendingAttr, before anything reads them.
void waitForWgmmaResults(mlir::scf::ForOp loop);

/// Moves each dot's `wgmma.wait_group 0` down its block to the first op that
/// must see the dot's results (with the pure ops that read them), past the
/// independent arithmetic and other dots' wgmma issues, counting the groups
/// those commit into the wait's N (Triton waits for a dot where its result
/// is first used too). Flash attention's softmax then runs while the next
/// product's wgmma does.
void deferWgmmaWaits(mlir::Operation *root);

//===----------------------------------------------------------------------===//
// TMA copies (TmaToNVVM.cpp)
//===----------------------------------------------------------------------===//

/// Whether TMA can copy `load`, the operand `copy.operand` of the wgmma dot
/// `copy.dot`, into its staging area: a 2-D kernel view with unit stride
/// along the staged rows (the inner dimension, or K for a K-major rhs) and
/// 16-byte divisibility (what a tensor map needs), zero padding, a box
/// layout that is wgmma's (no regrouped B columns), in a kernel that host
/// code does not launch.
bool isTmaCopyable(tile::LoadOp load, AsyncCopy copy,
                   const LoweringState &state);

/// The tensor map a TMA-copied load (into `copy`'s staging area) needs:
/// boxes of one swizzle atom's columns and up to 256 rows of the staged
/// operand (a K-major rhs's rows are its columns).
TensorMapParam tensorMapParam(tile::LoadOp load, const AsyncCopy &copy);

/// Marks a pipelined loop whose ring slots have TMA mbarriers: their byte
/// offset, count, and the loads that arrive on each where the loop, of one
/// stage, has no prologue whose first copy initialises them (else 0)
/// (bracketMbarriers removes it).
constexpr llvm::StringLiteral kTmaMbarriersAttr = "tile.tma_mbarriers";

/// The mbarrier of ring slot `slot` (an i32).
mlir::Value mbarrierPtr(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                        int64_t mbarrierOffset, mlir::Value slot);

/// The first thread initialises `count` mbarriers expecting `arrivals`
/// arrivals each.
void initMbarriers(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                   int64_t mbarrierOffset, unsigned count, unsigned arrivals);

/// The first thread (where `copy.enabled`) expects the tile's bytes on
/// `mbarrier` and copies `load`'s tile at `offsets` into the staging area
/// of `copy.dot` (ks.scratchBase) with TMA.
void issueTmaCopy(mlir::OpBuilder &b, mlir::Location loc, KernelState &ks,
                  tile::LoadOp load, const AsyncCopy &copy,
                  llvm::ArrayRef<mlir::Value> offsets, mlir::Value mbarrier);

/// Each thread (where `enabled`, an i1 or null) arrives on `mbarrier`.
void arriveMbarrier(mlir::OpBuilder &b, mlir::Location loc,
                    mlir::Value mbarrier, mlir::Value enabled);

/// Every thread waits until `mbarrier` completes the phase of parity
/// `phase` (an i32).
void waitMbarrier(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mbarrier,
                  mlir::Value phase);

/// Around a loop with kTmaMbarriersAttr: before it, where no prologue does,
/// the first thread initialises the mbarriers (after a barrier: the memory
/// may have held something else); after it, once every thread is done, it
/// invalidates them, so their memory can be reused.
void bracketMbarriers(mlir::scf::ForOp loop, LoweringState &state);

//===----------------------------------------------------------------------===//
// Type conversion and patterns
//===----------------------------------------------------------------------===//

/// Tiles with a layout become per-thread vectors of the elements each thread
/// owns; views become the kernel ABI's pointer, sizes and strides.
class TileTypeConverter : public mlir::TypeConverter {
public:
  TileTypeConverter(mlir::MLIRContext *ctx);
};

template <typename Op> struct TilePattern : mlir::OpConversionPattern<Op> {
  TilePattern(const mlir::TypeConverter &converter, mlir::MLIRContext *ctx,
              LoweringState &state)
      : mlir::OpConversionPattern<Op>(converter, ctx), state(state) {}
  LoweringState &state;

  mlir::VectorType vectorType(mlir::Type tensorType) const {
    return mlir::cast<mlir::VectorType>(
        this->getTypeConverter()->convertType(tensorType));
  }

  /// The view of a load or store as the kernel sees it (its converted
  /// `values`), shaped by what the analysis proved: 32-bit indices, sizes
  /// shared with another argument, dimensions without bounds checks.
  View accessView(mlir::OpBuilder &b, mlir::Location loc,
                  mlir::ValueRange values, mlir::MemRefType type,
                  const AccessFacts &facts, const KernelState &ks) const {
    mlir::ValueRange sizes;
    if (facts.sameShapeAs) {
      mlir::ValueRange other = ks.arguments[*facts.sameShapeAs];
      sizes = other.slice(1, (other.size() - 1) / 2);
    }
    View view = unpackView(b, loc, values, type, facts.narrow, sizes);
    view.inBounds = facts.inBounds;
    view.nonNegativeStarts = facts.nonNegativeStarts;
    view.boundsGroups = facts.boundsGroups;
    return view;
  }
};

/// tile.kernel, tile.return, program ids and the host's tile.launch.
void populateKernelOpToNVVMPatterns(TileTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns,
                                    LoweringState &state);

/// tile.load, tile.store, tile.gather, and memref.dim/load/store of views.
void populateLoadStoreOpToNVVMPatterns(TileTypeConverter &converter,
                                       mlir::RewritePatternSet &patterns,
                                       LoweringState &state);

/// arith and math ops on tiles, splat, iota, constant tiles, broadcast,
/// expand_dims and permute.
void populateElementwiseOpToNVVMPatterns(TileTypeConverter &converter,
                                         mlir::RewritePatternSet &patterns,
                                         LoweringState &state);

/// tile.convert_layout and tile.reshape, through shared memory.
void populateConvertLayoutOpToNVVMPatterns(TileTypeConverter &converter,
                                           mlir::RewritePatternSet &patterns,
                                           LoweringState &state);

/// tile.reduce.
void populateReduceOpToNVVMPatterns(TileTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns,
                                    LoweringState &state);

/// tile.dot: CUDA cores, mma.sync or wgmma.
void populateDotOpToNVVMPatterns(TileTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns,
                                 LoweringState &state);

} // namespace tileopt::nvvm

#endif // TILEOPT_LIB_CONVERSION_TILETONVVM_LOWERING_H
