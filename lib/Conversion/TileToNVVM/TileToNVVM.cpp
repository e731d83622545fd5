//===- TileToNVVM.cpp - lower tile kernels to per-thread GPU code ---------===//
//
// Every tile.kernel becomes a gpu.func in `gpu.module @tileopt_kernels`.
// A tile with a layout becomes, in each thread, a vector of the elements the
// thread owns (tileopt::tile::getRegisterOffsets gives their order). Views
// become the kernel ABI's parameters: a global pointer to the first element,
// then the sizes and the strides as i64 (docs/kernel-abi.md). Loads and stores are
// predicated PTX (vectorized when the view is aligned, checked at run time);
// reductions go through registers, warp shuffles and shared memory; layout
// conversions, reshapes and dots stage data in shared memory.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Conversion/Passes.h"
#include "tileopt/Dialect/Tile/IR/Layouts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/TargetParser/Triple.h"

extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTargetMC();

namespace tileopt {
#define GEN_PASS_DEF_CONVERTTILETONVVM
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;
using namespace tileopt::tile;

namespace {

constexpr StringLiteral kGpuModuleName = "tileopt_kernels";

//===----------------------------------------------------------------------===//
// Per-kernel state shared by the patterns
//===----------------------------------------------------------------------===//

/// The values every pattern of one kernel needs: the thread's lane and warp
/// (i32) and the kernel's shared memory.
struct KernelState {
  Value lane, warp;
  LLVM::GlobalOp sharedMemory;
  /// Alignment of sharedMemory: 16, or 1024 for wgmma's swizzled operands.
  int64_t sharedAlignment = 16;
  /// The kernel's parameters, per tile.kernel argument.
  SmallVector<ValueRange> arguments;
};

/// The widest vector a load or store may move: `elems` elements along `dim`.
struct VectorPlan {
  int64_t dim = 0;
  unsigned elems = 1;
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
  SmallVector<bool> inBounds;
  /// Dimensions whose tile offset is provably non-negative (knownNonNegative).
  SmallVector<bool> nonNegativeStarts;
  /// The kernel argument whose shape the view has (tile.same_shape_as).
  std::optional<unsigned> sameShapeAs;
  /// The tile type of the scalar fallback (scalarFallbackTile), or null.
  RankedTensorType fallback;
};

/// A tile.load lowered to cp.async into the staging area of the dot that
/// uses it (planAsyncCopies).
struct AsyncCopy {
  DotOp dot;
  unsigned operand;
  /// The first async copy before its dot: waits for every warp to be done
  /// with the shared memory it overwrites.
  bool barrier;
};

struct LoweringState {
  llvm::DenseMap<Operation *, KernelState> kernels;
  /// Warps per program of each kernel, by name (KernelOp::getNumWarps).
  llvm::StringMap<unsigned> numWarps;
  /// The chip has wgmma (hasWgmma: sm_90a).
  bool wgmma = false;
  /// Loads that copy straight into their dot's shared-memory staging area
  /// with cp.async (planAsyncCopies), and per dot which operands (bit 0: lhs,
  /// bit 1: rhs) arrive that way.
  llvm::DenseMap<Operation *, AsyncCopy> asyncCopies;
  llvm::DenseMap<Operation *, unsigned> asyncOperands;
  /// What the analysis before conversion proved about each load and store.
  llvm::DenseMap<Operation *, AccessFacts> accesses;
  /// Tile compares whose results are equal over runs of this many
  /// consecutive elements (see uniformCompareRun).
  llvm::DenseMap<Operation *, int64_t> compareRuns;

  KernelState &get(Operation *op) {
    auto func = op->getParentOfType<gpu::GPUFuncOp>();
    assert(func && "op outside a converted kernel");
    return kernels[func];
  }
};

//===----------------------------------------------------------------------===//
// Small builders
//===----------------------------------------------------------------------===//

/// Tile coordinates are small and non-negative: their arithmetic never wraps,
/// which lets LLVM fold a register's offset out of its address.
const arith::IntegerOverflowFlags kNoWrap =
    arith::IntegerOverflowFlags::nsw | arith::IntegerOverflowFlags::nuw;

Value i32Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}
Value i64Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}
Value intConst(OpBuilder &b, Location loc, Type type, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, type, v);
}

/// The scalar element bit width as stored in memory (i1 is a byte).
unsigned storageBits(Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  return bits < 8 ? 8 : bits;
}

/// Shared memory (of `state`'s kernel) as an i8 pointer.
Value sharedBase(OpBuilder &b, Location loc, KernelState &state) {
  return LLVM::AddressOfOp::create(b, loc, state.sharedMemory);
}

Value sharedPtr(OpBuilder &b, Location loc, KernelState &state, Type element,
                Value index /*i32*/, int64_t byteOffset = 0) {
  Value base = sharedBase(b, loc, state);
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 3);
  if (byteOffset)
    base = LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{int32_t(byteOffset)});
  return LLVM::GEPOp::create(b, loc, ptrType, element, base, ValueRange{index});
}

/// Values in shared memory are stored as their storage type (i1 as i8).
Value toStorage(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isInteger(1))
    return arith::ExtUIOp::create(b, loc, b.getI8Type(), v);
  return v;
}
Value fromStorage(OpBuilder &b, Location loc, Value v, Type element) {
  if (element.isInteger(1))
    return arith::TruncIOp::create(b, loc, element, v);
  return v;
}
Type storageType(OpBuilder &b, Type element) {
  return element.isInteger(1) ? b.getI8Type() : element;
}

void barrier(OpBuilder &b, Location loc) { NVVM::Barrier0Op::create(b, loc); }

/// The elements of a per-thread vector.
SmallVector<Value> unpack(OpBuilder &b, Location loc, Value vector) {
  auto type = cast<VectorType>(vector.getType());
  SmallVector<Value> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i)
    values.push_back(vector::ExtractOp::create(b, loc, vector, i));
  return values;
}

Value pack(OpBuilder &b, Location loc, VectorType type, ArrayRef<Value> values) {
  return vector::FromElementsOp::create(b, loc, type, values);
}

//===----------------------------------------------------------------------===//
// Coordinates
//===----------------------------------------------------------------------===//

/// The per-thread base coordinate (i32, before wrapping) of each dimension.
SmallVector<Value> emitThreadBase(OpBuilder &b, Location loc, Attribute layout,
                                  KernelState &state) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    SmallVector<Value> base = emitThreadBase(b, loc, slice.getParent(), state);
    base.erase(base.begin() + slice.getDim());
    return base;
  }
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    // Lane l: row l / 4, column 2 * (l % 4); warps tile rows fastest.
    unsigned wm = mma.getWarpsPerCTA()[0], wn = mma.getWarpsPerCTA()[1];
    Value row = arith::ShRUIOp::create(b, loc, state.lane, i32Const(b, loc, 2));
    Value col = arith::MulIOp::create(
        b, loc, arith::AndIOp::create(b, loc, state.lane, i32Const(b, loc, 3)),
        i32Const(b, loc, 2));
    Value warpM = arith::AndIOp::create(b, loc, state.warp, i32Const(b, loc, wm - 1));
    Value warpN = arith::AndIOp::create(
        b, loc,
        arith::ShRUIOp::create(b, loc, state.warp,
                               i32Const(b, loc, llvm::Log2_32(wm))),
        i32Const(b, loc, wn - 1));
    row = arith::AddIOp::create(
        b, loc, row, arith::MulIOp::create(b, loc, warpM, i32Const(b, loc, kMmaM)));
    col = arith::AddIOp::create(
        b, loc, col, arith::MulIOp::create(b, loc, warpN, i32Const(b, loc, kMmaN)));
    return {row, col};
  }
  auto blocked = cast<BlockedLayoutAttr>(layout);
  SmallVector<Value> base(blocked.getRank());
  unsigned laneShift = 0, warpShift = 0;
  for (unsigned d : blocked.getOrder()) {
    unsigned tpw = blocked.getThreadsPerWarp()[d];
    unsigned wpc = blocked.getWarpsPerCTA()[d];
    unsigned spt = blocked.getSizePerThread()[d];
    auto bits = [&](Value id, unsigned shift, unsigned count) -> Value {
      if (count == 1)
        return i32Const(b, loc, 0);
      Value v = id;
      if (shift)
        v = arith::ShRUIOp::create(b, loc, v, i32Const(b, loc, shift));
      return arith::AndIOp::create(b, loc, v, i32Const(b, loc, count - 1));
    };
    Value laneD = bits(state.lane, laneShift, tpw);
    Value warpD = bits(state.warp, warpShift, wpc);
    Value lanePart =
        arith::MulIOp::create(b, loc, laneD, i32Const(b, loc, spt), kNoWrap);
    Value warpPart = arith::MulIOp::create(b, loc, warpD,
                                           i32Const(b, loc, spt * tpw), kNoWrap);
    base[d] = arith::AddIOp::create(b, loc, lanePart, warpPart, kNoWrap);
    laneShift += llvm::Log2_32(tpw);
    warpShift += llvm::Log2_32(wpc);
  }
  return base;
}

/// The largest thread base of each dimension over all threads.
SmallVector<int64_t> maxThreadBase(Attribute layout) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    SmallVector<int64_t> base = maxThreadBase(slice.getParent());
    base.erase(base.begin() + slice.getDim());
    return base;
  }
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout))
    return {7 + (int64_t(mma.getWarpsPerCTA()[0]) - 1) * kMmaM,
            6 + (int64_t(mma.getWarpsPerCTA()[1]) - 1) * kMmaN};
  auto blocked = cast<BlockedLayoutAttr>(layout);
  SmallVector<int64_t> base;
  for (unsigned d = 0; d < blocked.getRank(); ++d) {
    int64_t spt = blocked.getSizePerThread()[d];
    int64_t tpw = blocked.getThreadsPerWarp()[d];
    base.push_back((tpw - 1) * spt +
                   (int64_t(blocked.getWarpsPerCTA()[d]) - 1) * spt * tpw);
  }
  return base;
}

/// The coordinates (i32) of every element a thread holds of a tile.
struct TileCoords {
  SmallVector<SmallVector<int64_t>> offsets;  // static, per register
  SmallVector<SmallVector<Value>> coords;     // per register, per dim
};

TileCoords emitCoords(OpBuilder &b, Location loc, RankedTensorType type,
                      KernelState &state) {
  TileCoords result;
  Attribute layout = type.getEncoding();
  ArrayRef<int64_t> shape = type.getShape();
  result.offsets = getRegisterOffsets(layout, shape);
  SmallVector<Value> base = emitThreadBase(b, loc, layout, state);
  SmallVector<int64_t> baseMax = maxThreadBase(layout);
  for (const SmallVector<int64_t> &offset : result.offsets) {
    SmallVector<Value> coord;
    for (auto [d, size] : llvm::enumerate(shape)) {
      Value c = base[d];
      if (offset[d] != 0)
        c = arith::AddIOp::create(b, loc, c, i32Const(b, loc, offset[d]),
                                  kNoWrap);
      // Layouts larger than the tile replicate it: wrap around.
      if (baseMax[d] + offset[d] >= size)
        c = arith::AndIOp::create(b, loc, c, i32Const(b, loc, size - 1));
      coord.push_back(c);
    }
    result.coords.push_back(coord);
  }
  return result;
}

/// Whether this thread is the first owner of its elements: where a layout is
/// larger than the tile, several threads hold the same elements and only
/// one of them should store them. Null when every thread is.
Value emitOwnerPredicate(OpBuilder &b, Location loc, Attribute layout,
                         ArrayRef<int64_t> shape, KernelState &state) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    // Threads that differ only along the sliced dim hold the same elements.
    SmallVector<int64_t> parentShape(shape);
    parentShape.insert(parentShape.begin() + slice.getDim(), 1);
    return emitOwnerPredicate(b, loc, slice.getParent(), parentShape, state);
  }
  SmallVector<int64_t> maxBase = maxThreadBase(layout);
  SmallVector<Value> base;
  Value owner;
  for (auto [d, size] : llvm::enumerate(shape)) {
    if (maxBase[d] < size)
      continue;
    if (base.empty())
      base = emitThreadBase(b, loc, layout, state);
    Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, base[d],
                                     i32Const(b, loc, size));
    owner = owner ? arith::AndIOp::create(b, loc, owner, ok) : ok;
  }
  return owner;
}

/// Wrapped static offsets, for matching registers between layouts.
SmallVector<int64_t> wrap(ArrayRef<int64_t> offset, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> r;
  for (auto [o, s] : llvm::zip(offset, shape))
    r.push_back(o % s);
  return r;
}

/// Index of the register of `offsets` (wrapped by `shape`) equal to `want`.
std::optional<unsigned> findRegister(ArrayRef<SmallVector<int64_t>> offsets,
                                     ArrayRef<int64_t> shape,
                                     ArrayRef<int64_t> want) {
  for (auto [i, offset] : llvm::enumerate(offsets))
    if (wrap(offset, shape) == ArrayRef<int64_t>(want))
      return i;
  return std::nullopt;
}

/// Row-major linear index (i32) of `coord` in `shape`, with the innermost
/// dimension padded by `pad` elements (against shared-memory bank conflicts).
Value linearIndex(OpBuilder &b, Location loc, ArrayRef<Value> coord,
                  ArrayRef<int64_t> shape, int64_t pad = 0) {
  Value index = i32Const(b, loc, 0);
  int64_t stride = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    Value term = arith::MulIOp::create(b, loc, coord[d], i32Const(b, loc, stride));
    index = arith::AddIOp::create(b, loc, index, term);
    stride *= shape[d] + (d == int(shape.size()) - 1 && shape.size() > 1 ? pad : 0);
  }
  return index;
}

int64_t paddedElements(ArrayRef<int64_t> shape, int64_t pad) {
  int64_t n = 1;
  for (auto [d, size] : llvm::enumerate(shape))
    n *= size + (d == shape.size() - 1 && shape.size() > 1 ? pad : 0);
  return n;
}

/// Padding of the innermost dimension for a tile staged in shared memory:
/// one 32-bit word, so column accesses hit different banks.
int64_t smemPad(Type element) {
  return std::max<int64_t>(1, 32 / storageBits(element));
}

//===----------------------------------------------------------------------===//
// Views: the kernel ABI
//===----------------------------------------------------------------------===//

/// A view in the kernel: the pointer to its first element (the memref's
/// offset is folded into it by whoever launches the kernel), its sizes and
/// strides as `indexType` (i64, or i32 where the view promises 32-bit
/// indices: bounds checks and element offsets are then 32-bit, and offsets
/// are widened only at the address).
struct View {
  Value ptr;
  SmallVector<Value> sizes, strides;
  Type indexType;
  /// Dimensions whose indices need no bounds check (empty: all need one).
  SmallVector<bool> inBounds;
  /// Dimensions whose tile offset is provably non-negative (empty: none);
  /// elsewhere an index may be negative (out of bounds) and its arithmetic
  /// may wrap unsigned.
  SmallVector<bool> nonNegativeStarts;
  int64_t rank() const { return sizes.size(); }
};

/// The view's values; what the memref type fixes statically (sizes, strides)
/// becomes a constant so that address arithmetic folds. With `narrow`, sizes
/// and strides are truncated to i32. `sizeValues` (the sizes of a view of the
/// same shape) replace the view's own size parameters.
View unpackView(OpBuilder &b, Location loc, ValueRange values, MemRefType type,
                bool narrow = false, ValueRange sizeValues = {}) {
  View view;
  view.ptr = values[0];
  view.indexType = narrow ? b.getI32Type() : b.getI64Type();
  SmallVector<int64_t> strides = type.getStridesAndOffset().first;
  int64_t rank = type.getRank();
  if (sizeValues.empty())
    sizeValues = values.slice(1, rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = type.getDimSize(d);
    Value sizeValue = sizeValues[d];
    if (!ShapedType::isDynamic(size))
      sizeValue = intConst(b, loc, view.indexType, size);
    else if (narrow)
      sizeValue = arith::TruncIOp::create(b, loc, view.indexType, sizeValue);
    view.sizes.push_back(sizeValue);
    Value stride = values[1 + rank + d];
    if (!ShapedType::isDynamic(strides[d]))
      stride = intConst(b, loc, view.indexType, strides[d]);
    else if (narrow)
      stride = arith::TruncIOp::create(b, loc, view.indexType, stride);
    view.strides.push_back(stride);
  }
  return view;
}

//===----------------------------------------------------------------------===//
// Global memory access with predicated PTX
//===----------------------------------------------------------------------===//

/// The PTX register constraint and width of a memory word of `bits`.
StringRef constraintFor(unsigned bits) {
  switch (bits) {
  case 8:
  case 16:
    return "h";
  case 32:
    return "r";
  default:
    return "l";
  }
}

/// Loads `count` words of `bits` at `ptr` when `pred`, else `padding` words.
SmallVector<Value> emitPredicatedLoad(OpBuilder &b, Location loc, Value ptr,
                                      Value pred, unsigned bits, unsigned count,
                                      ArrayRef<Value> padding) {
  MLIRContext *ctx = b.getContext();
  Type wordType = IntegerType::get(ctx, bits == 8 ? 16 : bits);
  std::string asmText, constraints;
  llvm::raw_string_ostream os(asmText), cs(constraints);
  for (unsigned i = 0; i < count; ++i)
    cs << "=" << constraintFor(bits) << ",";
  cs << "l,b";
  for (unsigned i = 0; i < count; ++i)
    cs << "," << constraintFor(bits);
  // Operands: $count = ptr, $count+1 = pred, then the paddings.
  for (unsigned i = 0; i < count; ++i)
    os << "mov.b" << (bits == 8 ? 16 : bits) << " $" << i << ", $"
       << count + 2 + i << ";\n\t";
  os << "@$" << count + 1 << " ld.global";
  if (count > 1)
    os << ".v" << count;
  os << ".b" << bits << " ";
  if (count > 1) {
    os << "{";
    for (unsigned i = 0; i < count; ++i)
      os << (i ? ", " : "") << "$" << i;
    os << "}";
  } else {
    os << "$0";
  }
  os << ", [$" << count << "];";
  SmallVector<Value> operands{ptr, pred};
  for (Value p : padding)
    operands.push_back(p);
  Type resultType = wordType;
  if (count > 1)
    resultType = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(count, wordType));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, resultType, operands, asmText, constraints,
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  if (count == 1)
    return {asmOp.getResult(0)};
  SmallVector<Value> words;
  for (unsigned i = 0; i < count; ++i)
    words.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return words;
}

void emitPredicatedStore(OpBuilder &b, Location loc, Value ptr, Value pred,
                         unsigned bits, ArrayRef<Value> words) {
  MLIRContext *ctx = b.getContext();
  unsigned count = words.size();
  std::string asmText, constraints;
  llvm::raw_string_ostream os(asmText), cs(constraints);
  cs << "l,b";
  for (unsigned i = 0; i < count; ++i)
    cs << "," << constraintFor(bits);
  os << "@$1 st.global";
  if (count > 1)
    os << ".v" << count;
  os << ".b" << bits << " [$0], ";
  if (count > 1) {
    os << "{";
    for (unsigned i = 0; i < count; ++i)
      os << (i ? ", " : "") << "$" << 2 + i;
    os << "}";
  } else {
    os << "$2";
  }
  os << ";";
  SmallVector<Value> operands{ptr, pred};
  operands.append(words.begin(), words.end());
  LLVM::InlineAsmOp::create(
      b, loc, TypeRange{}, operands, asmText, constraints,
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
}

/// Bitcasts an element to/from the integer word that PTX moves.
Value elementToWord(OpBuilder &b, Location loc, Value v, unsigned bits) {
  Type t = v.getType();
  Value word = v;
  if (t.isInteger(1))
    word = arith::ExtUIOp::create(b, loc, b.getI8Type(), v);
  else if (!t.isInteger())
    word = arith::BitcastOp::create(b, loc, b.getIntegerType(bits), v);
  if (bits == 8) // PTX has no 8-bit registers: b8 moves through b16.
    word = arith::ExtUIOp::create(b, loc, b.getI16Type(), word);
  return word;
}

Value wordToElement(OpBuilder &b, Location loc, Value word, Type element,
                    unsigned bits) {
  if (bits == 8)
    word = arith::TruncIOp::create(b, loc, b.getI8Type(), word);
  if (element.isInteger(1))
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, word,
                                 arith::ConstantIntOp::create(b, loc, 0, 8));
  if (!element.isInteger())
    return arith::BitcastOp::create(b, loc, element, word);
  return word;
}

/// A group of registers that one vector access moves: `count` contiguous
/// elements of the fastest dimension starting at register `first`.
struct Run {
  unsigned first, count;
};

/// Splits a thread's registers into runs of at most `maxElems` contiguous
/// elements along `dim` (registers are contiguous along order[0]).
SmallVector<Run> contiguousRuns(ArrayRef<SmallVector<int64_t>> offsets,
                                ArrayRef<int64_t> shape, int64_t dim,
                                unsigned maxElems) {
  SmallVector<Run> runs;
  unsigned i = 0, n = offsets.size();
  while (i < n) {
    unsigned count = 1;
    while (i + count < n && count < maxElems) {
      SmallVector<int64_t> expect(offsets[i]);
      expect[dim] += count;
      if (wrap(offsets[i + count], shape) != wrap(expect, shape) ||
          expect[dim] >= shape[dim])
        break;
      ++count;
    }
    // Vector accesses must be aligned to their size within the tile too.
    while (count > 1 && (!llvm::isPowerOf2_32(count) ||
                         (offsets[i][dim] % shape[dim]) % count != 0))
      count /= 2;
    runs.push_back({i, count});
    i += count;
  }
  return runs;
}

/// The static stride of `view`'s dim, if known.
std::optional<int64_t> staticStride(MemRefType type, int64_t dim) {
  auto [strides, offset] = type.getStridesAndOffset();
  if (ShapedType::isDynamic(strides[dim]))
    return std::nullopt;
  return strides[dim];
}

//===----------------------------------------------------------------------===//
// wgmma operands in shared memory
//===----------------------------------------------------------------------===//

/// Whether `dot` runs on wgmma: the chip has it and its mma accumulator
/// fits (isWgmmaDot).
bool usesWgmma(DotOp dot, const LoweringState &state) {
  RankedTensorType acc = dot.getAcc().getType();
  auto mma = dyn_cast_if_present<MmaLayoutAttr>(getLayout(acc));
  return state.wgmma && mma &&
         isWgmmaDot(acc.getDimSize(0), acc.getDimSize(1), mma.getWarpsPerCTA());
}

/// Swizzle width in bytes (128, 64 or 32) of a wgmma operand in shared
/// memory whose contiguous rows are `rowBytes` long (a power of two >= 32):
/// rows wider than 128 bytes span several 128-byte atoms.
int64_t wgmmaSwizzle(int64_t rowBytes) { return std::min<int64_t>(rowBytes, 128); }

/// wgmma's descriptor code of a swizzle width (PTX ISA: 1 = 128B, 2 = 64B,
/// 3 = 32B).
int64_t wgmmaSwizzleMode(int64_t swizzle) {
  return swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
}

/// Bytes of a `rows` x `rowBytes` wgmma operand in shared memory: the
/// layout of wgmmaOffset, whole 8-row swizzle atoms.
int64_t wgmmaOperandBytes(int64_t rows, int64_t rowBytes) {
  return llvm::alignTo(rows, 8) * rowBytes;
}

/// Byte offset of element (row, col) (b16) of an operand with `rows` rows of
/// `rowBytes` in wgmma's canonical swizzled layout (the one Triton and
/// CUTLASS use): columns split into atoms `swizzle` bytes wide, each atom
/// holds every row (`swizzle` bytes apart), and inside an 8-row group the
/// 16-byte chunk c of row r sits at c ^ ((r % 8) / (128 / swizzle)).
Value wgmmaOffset(OpBuilder &b, Location loc, Value row, Value col, int64_t rows,
                  int64_t rowBytes) {
  int64_t swizzle = wgmmaSwizzle(rowBytes);
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  Value byte = arith::ShLIOp::create(b, loc, col, c(1));
  Value atom = arith::ShRUIOp::create(b, loc, byte, c(llvm::Log2_64(swizzle)));
  Value within = arith::AndIOp::create(b, loc, byte, c(swizzle - 1));
  Value phase = arith::ShRUIOp::create(
      b, loc, arith::AndIOp::create(b, loc, row, c(7)),
      c(llvm::Log2_64(128 / swizzle)));
  Value swizzled = arith::XOrIOp::create(
      b, loc, within, arith::ShLIOp::create(b, loc, phase, c(4)));
  Value atomBase = arith::MulIOp::create(b, loc, atom, c(rows * swizzle), kNoWrap);
  Value rowBase = arith::MulIOp::create(b, loc, row, c(swizzle), kNoWrap);
  return arith::AddIOp::create(
      b, loc, arith::AddIOp::create(b, loc, atomBase, rowBase, kNoWrap),
      swizzled, kNoWrap);
}

/// Byte offset of operand `operand` (0: lhs, 1: rhs) of a wgmma dot in its
/// shared-memory staging area.
int64_t wgmmaOperandOffset(DotOp dot, unsigned operand) {
  if (operand == 0)
    return 0;
  RankedTensorType lhs = dot.getLhs().getType();
  return llvm::alignTo(
      wgmmaOperandBytes(lhs.getDimSize(0), lhs.getDimSize(1) * 2), 1024);
}

/// Shared-memory padding (elements) of f16/bf16 dot operands: rows stay
/// 16-byte aligned for ldmatrix and hit different banks.
constexpr int64_t kMmaSmemPad = 8;

/// Byte offset of the lhs (operand 0, m x k) or rhs (1, k x n) of an
/// mma.sync dot in its staging area: row-major rows padded by kMmaSmemPad.
int64_t mmaOperandOffset(DotOp dot, unsigned operand) {
  RankedTensorType lhs = dot.getLhs().getType();
  return operand == 0
             ? 0
             : llvm::alignTo(lhs.getDimSize(0) * (lhs.getDimSize(1) + kMmaSmemPad) * 2,
                             16);
}

/// Where element (row, col) of operand `operand` of a tensor-core dot goes in
/// its staging area (a byte offset into shared memory): wgmma's swizzled
/// layout or mma.sync's padded rows.
Value stagedOperandOffset(OpBuilder &b, Location loc, DotOp dot, unsigned operand,
                          bool wgmma, Value row, Value col) {
  auto type = cast<RankedTensorType>(dot->getOperand(operand).getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  if (wgmma)
    return arith::AddIOp::create(
        b, loc, wgmmaOffset(b, loc, row, col, rows, cols * 2),
        i32Const(b, loc, wgmmaOperandOffset(dot, operand)));
  Value index = linearIndex(b, loc, {row, col}, {rows, cols}, kMmaSmemPad);
  return arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, index, i32Const(b, loc, 2)),
      i32Const(b, loc, mmaOperandOffset(dot, operand)));
}

/// The addresses and in-bounds predicates of a tile's registers for a load
/// or store. The per-thread parts are emitted up front; a register's own
/// address and predicate only when asked, so that a vector access computes
/// them for the first and last register of its run alone and the scalar
/// tail of a run straddling the view's end computes the rest in its branch.
class Access {
public:
  Access(OpBuilder &b, Location loc, RankedTensorType tile, const View &view,
         ValueRange tileOffsets, Type element, KernelState &state,
         bool ownersOnly)
      : loc(loc), view(view), shape(tile.getShape()),
        element(storageType(b, element)), home(b.getInsertionBlock()) {
    Attribute layout = tile.getEncoding();
    offsets = getRegisterOffsets(layout, shape);
    if (ownersOnly)
      owner = emitOwnerPredicate(b, loc, layout, shape, state);
    base = emitThreadBase(b, loc, layout, state);
    SmallVector<int64_t> baseMax = maxThreadBase(layout);
    Type indexType = view.indexType;
    int64_t rank = view.rank();
    // Per dim: the thread's first index (tile offset + thread base) and
    // whether the layout wraps around the tile there. Where it does not, a
    // register's index is the first index plus a constant and its address the
    // thread's base address plus a constant times the stride, which LLVM
    // folds into the instruction's immediate offset.
    first.resize(rank);
    wraps.assign(rank, false);
    Value baseLinear = intConst(b, loc, indexType, 0);
    for (int64_t d = 0; d < rank; ++d) {
      for (const SmallVector<int64_t> &offset : offsets)
        wraps[d] = wraps[d] || baseMax[d] + offset[d] >= shape[d];
      starts.push_back(
          arith::IndexCastOp::create(b, loc, indexType, tileOffsets[d]));
      Value threadBase = base[d];
      if (indexType != threadBase.getType())
        threadBase = arith::ExtUIOp::create(b, loc, indexType, threadBase);
      first[d] = arith::AddIOp::create(b, loc, starts[d], threadBase, startFlags(d));
      if (!wraps[d])
        baseLinear = arith::AddIOp::create(
            b, loc, baseLinear,
            arith::MulIOp::create(b, loc, first[d], view.strides[d], linearFlags()),
            linearFlags());
    }
    basePtr = LLVM::GEPOp::create(b, loc, ptrType(b), this->element, view.ptr,
                                  ValueRange{baseLinear});
  }

  /// The static offsets of the registers (register order).
  SmallVector<SmallVector<int64_t>> offsets;

  /// Whether register `r` lies inside the view (and, for stores of
  /// replicated layouts, this thread owns it).
  Value inBounds(OpBuilder &b, unsigned r) {
    return cached(b, r, okCache, [&] { return emitInBounds(b, r); });
  }

  /// The global address of register `r`.
  Value pointer(OpBuilder &b, unsigned r) {
    return cached(b, r, ptrCache, [&] { return emitPointer(b, r); });
  }

private:
  static Type ptrType(OpBuilder &b) {
    return LLVM::LLVMPointerType::get(b.getContext(), 1);
  }

  /// Values emitted in the block the access was created in are reused;
  /// those emitted in a nested branch stay there.
  Value cached(OpBuilder &b, unsigned r, llvm::DenseMap<unsigned, Value> &cache,
               function_ref<Value()> emit) {
    if (Value v = cache.lookup(r))
      return v;
    Value v = emit();
    if (b.getInsertionBlock() == home)
      cache[r] = v;
    return v;
  }

  /// 32-bit element offsets of in-bounds elements do not overflow (the
  /// view's promise), which lets LLVM widen them to 64-bit addresses once.
  arith::IntegerOverflowFlags linearFlags() const {
    return view.indexType.isInteger(32) ? arith::IntegerOverflowFlags::nsw
                                        : arith::IntegerOverflowFlags::none;
  }

  /// Tile offset + thread coordinate along `d` never wraps signed; unsigned
  /// only when the offset is non-negative (a negative one reads padding).
  arith::IntegerOverflowFlags startFlags(int64_t d) const {
    bool nonNegative = !view.nonNegativeStarts.empty() && view.nonNegativeStarts[d];
    return nonNegative ? kNoWrap : arith::IntegerOverflowFlags::nsw;
  }

  /// The index of register `r` along `d` (the view's index type).
  Value index(OpBuilder &b, unsigned r, int64_t d) {
    int64_t offset = offsets[r][d];
    if (wraps[d]) {
      // Layouts larger than the tile replicate it: wrap the coordinate.
      Value c = arith::AddIOp::create(b, loc, base[d], i32Const(b, loc, offset),
                                      kNoWrap);
      c = arith::AndIOp::create(b, loc, c, i32Const(b, loc, shape[d] - 1));
      if (view.indexType != c.getType())
        c = arith::ExtUIOp::create(b, loc, view.indexType, c);
      return arith::AddIOp::create(b, loc, starts[d], c, startFlags(d));
    }
    if (!offset)
      return first[d];
    return arith::AddIOp::create(b, loc, first[d],
                                 intConst(b, loc, view.indexType, offset));
  }

  Value emitInBounds(OpBuilder &b, unsigned r) {
    Value ok;
    for (int64_t d = 0; d < view.rank(); ++d) {
      if (!view.inBounds.empty() && view.inBounds[d])
        continue;
      // Unsigned compare: negative indices are out of bounds too.
      Value inDim = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          index(b, r, d), view.sizes[d]);
      ok = ok ? arith::AndIOp::create(b, loc, ok, inDim) : inDim;
    }
    if (!ok)
      ok = arith::ConstantIntOp::create(b, loc, 1, 1);
    if (owner)
      ok = arith::AndIOp::create(b, loc, ok, owner);
    return ok;
  }

  Value emitPointer(OpBuilder &b, unsigned r) {
    // basePtr holds the non-wrapping dims' first indices; delta the rest.
    Value delta = intConst(b, loc, view.indexType, 0);
    for (int64_t d = 0; d < view.rank(); ++d) {
      Value term;
      if (wraps[d])
        term = arith::MulIOp::create(b, loc, index(b, r, d), view.strides[d],
                                     linearFlags());
      else if (offsets[r][d])
        term = arith::MulIOp::create(
            b, loc, intConst(b, loc, view.indexType, offsets[r][d]),
            view.strides[d], linearFlags());
      if (term)
        delta = arith::AddIOp::create(b, loc, delta, term, linearFlags());
    }
    return LLVM::GEPOp::create(b, loc, ptrType(b), element, basePtr,
                               ValueRange{delta});
  }

  Location loc;
  View view;
  ArrayRef<int64_t> shape;
  Type element;
  Block *home;
  Value owner, basePtr;
  SmallVector<Value> base, starts, first;
  SmallVector<bool> wraps;
  llvm::DenseMap<unsigned, Value> okCache, ptrCache;
};

/// A run-time check, uniform over the program, that vector accesses of
/// `vecElems` elements along `dim` are aligned. (A run that straddles the
/// end of the view falls back to scalar accesses on its own.)
Value emitVectorizable(OpBuilder &b, Location loc, const View &view,
                       ValueRange tileOffsets, int64_t dim, unsigned vecElems,
                       unsigned elemBytes) {
  auto divisible = [&](Value v) {
    Type type = v.getType();
    Value rem = arith::AndIOp::create(b, loc, v,
                                      intConst(b, loc, type, vecElems - 1));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rem,
                                 intConst(b, loc, type, 0));
  };
  Value addr = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), view.ptr);
  Value alignMask = i64Const(b, loc, int64_t(vecElems) * elemBytes - 1);
  Value addrOk = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, addr, alignMask), i64Const(b, loc, 0));
  Value ok = addrOk;
  for (int64_t d = 0; d < view.rank(); ++d) {
    Value start =
        arith::IndexCastOp::create(b, loc, b.getI64Type(), tileOffsets[d]);
    if (d == dim) {
      ok = arith::AndIOp::create(b, loc, ok, divisible(start));
      Value unit = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::eq, view.strides[d],
          intConst(b, loc, view.strides[d].getType(), 1));
      ok = arith::AndIOp::create(b, loc, ok, unit);
    } else {
      ok = arith::AndIOp::create(b, loc, ok, divisible(view.strides[d]));
    }
  }
  return ok;
}

//===----------------------------------------------------------------------===//
// Type conversion
//===----------------------------------------------------------------------===//

class TileTypeConverter : public TypeConverter {
public:
  TileTypeConverter(MLIRContext *ctx) {
    addConversion([](Type type) { return type; });
    addConversion([](RankedTensorType type) -> std::optional<Type> {
      Attribute layout = type.getEncoding();
      if (!isLayout(layout))
        return std::nullopt;
      int64_t n = getElemsPerThread(layout, type.getShape());
      return VectorType::get({n}, type.getElementType());
    });
    addConversion([ctx](MemRefType type, SmallVectorImpl<Type> &results)
                      -> std::optional<LogicalResult> {
      results.push_back(LLVM::LLVMPointerType::get(ctx, 1));
      auto i64 = IntegerType::get(ctx, 64);
      results.append(2 * type.getRank(), i64);
      return success();
    });
    auto materialize = [](OpBuilder &b, Type type, ValueRange inputs,
                          Location loc) -> Value {
      return UnrealizedConversionCastOp::create(b, loc, type, inputs)
          .getResult(0);
    };
    addSourceMaterialization(materialize);
    addTargetMaterialization(materialize);
  }
};

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <typename Op>
struct TilePattern : OpConversionPattern<Op> {
  TilePattern(const TypeConverter &converter, MLIRContext *ctx,
              LoweringState &state)
      : OpConversionPattern<Op>(converter, ctx), state(state) {}
  LoweringState &state;

  VectorType vectorType(Type tensorType) const {
    return cast<VectorType>(this->getTypeConverter()->convertType(tensorType));
  }

  /// The view of a load or store as the kernel sees it (its converted
  /// `values`), shaped by what the analysis proved: 32-bit indices, sizes
  /// shared with another argument, dimensions without bounds checks.
  View accessView(OpBuilder &b, Location loc, ValueRange values, MemRefType type,
                  const AccessFacts &facts, const KernelState &ks) const {
    ValueRange sizes;
    if (facts.sameShapeAs) {
      ValueRange other = ks.arguments[*facts.sameShapeAs];
      sizes = other.slice(1, (other.size() - 1) / 2);
    }
    View view = unpackView(b, loc, values, type, facts.narrow, sizes);
    view.inBounds = facts.inBounds;
    view.nonNegativeStarts = facts.nonNegativeStarts;
    return view;
  }
};

/// tile.kernel -> gpu.func with the ABI's parameters, lane and warp ids.
struct KernelLowering : TilePattern<KernelOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(KernelOp kernel, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = rewriter.getContext();
    Location loc = kernel.getLoc();
    auto module = kernel->getParentOfType<ModuleOp>();
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kGpuModuleName);
    TypeConverter::SignatureConversion signature(kernel.getNumArguments());
    if (failed(getTypeConverter()->convertSignatureArgs(
            kernel.getArgumentTypes(), signature)))
      return rewriter.notifyMatchFailure(kernel, "unsupported argument types");
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(
        rewriter, loc, kernel.getSymName(),
        FunctionType::get(ctx, signature.getConvertedTypes(), {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  rewriter.getUnitAttr());
    func.setKnownBlockSizeAttr(rewriter.getDenseI32ArrayAttr(
        {int32_t(kWarpSize * state.numWarps.lookup(kernel.getSymName())), 1, 1}));
    rewriter.eraseBlock(&func.getBody().front());
    rewriter.inlineRegionBefore(kernel.getBody(), func.getBody(),
                                func.getBody().end());
    Block *entry = rewriter.applySignatureConversion(
        &func.getBody().front(), signature, getTypeConverter());

    // Thread ids and the kernel's shared memory (sized after conversion).
    rewriter.setInsertionPointToStart(entry);
    KernelState &ks = state.kernels[func];
    for (unsigned i = 0; i < kernel.getNumArguments(); ++i) {
      auto mapping = signature.getInputMapping(i);
      ks.arguments.push_back(
          entry->getArguments().slice(mapping->inputNo, mapping->size));
    }
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, rewriter.getI32Type());
    ks.lane = arith::AndIOp::create(rewriter, loc, tid, i32Const(rewriter, loc, 31));
    ks.warp = arith::ShRUIOp::create(rewriter, loc, tid, i32Const(rewriter, loc, 5));
    rewriter.setInsertionPointToStart(gpuModule.getBody());
    ks.sharedMemory = LLVM::GlobalOp::create(
        rewriter, loc, LLVM::LLVMArrayType::get(rewriter.getI8Type(), 0),
        /*isConstant=*/false, LLVM::Linkage::Internal,
        (kernel.getSymName() + "_smem").str(), Attribute(), /*alignment=*/16,
        /*addrSpace=*/3);
    rewriter.eraseOp(kernel);
    return success();
  }
};

struct ReturnLowering : TilePattern<ReturnOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(ReturnOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<gpu::ReturnOp>(op);
    return success();
  }
};

template <typename Op, typename GpuOp>
struct GridLowering : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                             gpu::Dimension::z};
    rewriter.replaceOpWithNewOp<GpuOp>(op, dims[op.getDim()]);
    return success();
  }
};

/// Host side: tile.launch -> gpu.launch_func with the ABI's arguments
/// (pointer to the first element, sizes and strides of each memref).
struct LaunchLowering : TilePattern<LaunchOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(LaunchOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> args;
    for (Value arg : op.getArgs()) {
      auto memref = dyn_cast<MemRefType>(arg.getType());
      if (!memref) {
        args.push_back(arg);
        continue;
      }
      auto metadata = memref::ExtractStridedMetadataOp::create(rewriter, loc, arg);
      auto toI64 = [&](Value v) {
        return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), v);
      };
      Value address = toI64(memref::ExtractAlignedPointerAsIndexOp::create(
          rewriter, loc, metadata.getBaseBuffer()));
      int64_t elementBytes = storageBits(memref.getElementType()) / 8;
      Value offsetBytes = arith::MulIOp::create(
          rewriter, loc, toI64(metadata.getOffset()),
          i64Const(rewriter, loc, elementBytes));
      address = arith::AddIOp::create(rewriter, loc, address, offsetBytes);
      args.push_back(LLVM::IntToPtrOp::create(
          rewriter, loc, LLVM::LLVMPointerType::get(rewriter.getContext(), 1), address));
      for (Value size : metadata.getSizes())
        args.push_back(toI64(size));
      for (Value stride : metadata.getStrides())
        args.push_back(toI64(stride));
    }
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> grid(op.getGrid());
    grid.resize(3, one);
    Value threads =
        arith::ConstantIndexOp::create(rewriter, loc,
                                       kWarpSize * state.numWarps.lookup(op.getKernel()));
    auto kernel = SymbolRefAttr::get(
        rewriter.getStringAttr(kGpuModuleName),
        {FlatSymbolRefAttr::get(rewriter.getStringAttr(op.getKernel()))});
    gpu::LaunchFuncOp::create(rewriter, loc, kernel,
                              gpu::KernelDim3{grid[0], grid[1], grid[2]},
                              gpu::KernelDim3{threads, one, one},
                              /*dynamicSharedMemorySize=*/Value(), args);
    rewriter.eraseOp(op);
    return success();
  }
};

struct DimLowering : TilePattern<memref::DimOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(memref::DimOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> dim = op.getConstantIndex();
    if (!dim) // runOnOperation reports it
      return rewriter.notifyMatchFailure(op, "dynamic dimension index");
    View view = unpackView(rewriter, op.getLoc(), adaptor.getSource(),
                           cast<MemRefType>(op.getSource().getType()));
    rewriter.replaceOpWithNewOp<arith::IndexCastOp>(
        op, rewriter.getIndexType(), view.sizes[*dim]);
    return success();
  }
};

/// memref.load and memref.store of one element of a view: its address from
/// the view's pointer and strides, with no bounds check (as upstream's
/// semantics: out of bounds is undefined). i1 is a byte in memory, as in
/// tile.load and tile.store (upstream's lowering asserts on i1).
template <typename Op>
struct ElementAccessLowering : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename TilePattern<Op>::OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getMemRefType();
    ValueRange values = adaptor.getMemref();
    if (!isViewType(type) || values.size() != size_t(1 + 2 * type.getRank()))
      return op.emitOpError("in a tile.kernel must access a view argument");
    View view = unpackView(rewriter, loc, values, type);
    Value offset = i64Const(rewriter, loc, 0);
    for (auto [index, stride] : llvm::zip(adaptor.getIndices(), view.strides)) {
      Value i = arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                           index.front());
      offset = arith::AddIOp::create(
          rewriter, loc, offset, arith::MulIOp::create(rewriter, loc, i, stride));
    }
    Type element = type.getElementType();
    Value ptr = LLVM::GEPOp::create(
        rewriter, loc, LLVM::LLVMPointerType::get(rewriter.getContext(), 1),
        storageType(rewriter, element), view.ptr, ValueRange{offset});
    if constexpr (std::is_same_v<Op, memref::LoadOp>) {
      Value loaded =
          LLVM::LoadOp::create(rewriter, loc, storageType(rewriter, element), ptr);
      rewriter.replaceOp(op, fromStorage(rewriter, loc, loaded, element));
    } else {
      LLVM::StoreOp::create(rewriter, loc,
                            toStorage(rewriter, loc, adaptor.getValue().front()), ptr);
      rewriter.eraseOp(op);
    }
    return success();
  }
};

/// The dimension along which a layout's registers are contiguous, and how
/// many elements a thread holds contiguously there (slices inherit it from
/// their blocked parent when the sliced dim is another one).
std::pair<int64_t, unsigned> contiguity(Attribute layout) {
  if (auto blocked = dyn_cast<BlockedLayoutAttr>(layout)) {
    unsigned d = blocked.getOrder()[0];
    return {d, blocked.getSizePerThread()[d]};
  }
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    auto [d, elems] = contiguity(slice.getParent());
    if (d == slice.getDim())
      return {0, 1};
    return {d > slice.getDim() ? d - 1 : d, elems};
  }
  return {0, 1};
}

VectorPlan planVector(RankedTensorType tile, MemRefType view) {
  VectorPlan plan;
  if (tile.getRank() == 0)
    return plan;
  auto [dim, elems] = contiguity(tile.getEncoding());
  plan.dim = dim;
  // A dynamic stride may turn out to be 1: the run-time check decides.
  std::optional<int64_t> stride = staticStride(view, plan.dim);
  if (stride && *stride != 1)
    return plan;
  unsigned bits = storageBits(tile.getElementType());
  plan.elems = std::min<unsigned>(128 / bits, elems);
  return plan;
}

/// The tile type whose layout the scalar fallback of a load or store moves
/// the tile in, or null to keep the tile's own. Where the view's fastest
/// stride is 1 but its alignment is only known at run time, a tile whose
/// threads hold several contiguous elements would make every warp access
/// span `elems` times the sectors it needs; the fallback instead gives each
/// thread one element along that dimension (a warp reads contiguous words)
/// and converts to the tile's layout through shared memory. Tiles whose
/// staging would take more than kMaxFallbackStagingBytes keep their layout:
/// the static shared memory is reserved even when the fallback never runs.
constexpr int64_t kMaxFallbackStagingBytes = 16 * 1024;

int64_t fallbackStagingBytes(RankedTensorType tile) {
  Type element = tile.getElementType();
  return paddedElements(tile.getShape(), smemPad(element)) * storageBits(element) / 8;
}

RankedTensorType scalarFallbackTile(RankedTensorType tile, MemRefType view,
                                    const VectorPlan &plan) {
  if (plan.elems <= 1 || staticStride(view, plan.dim) != std::optional<int64_t>(1) ||
      fallbackStagingBytes(tile) > kMaxFallbackStagingBytes)
    return {};
  SmallVector<unsigned> order{unsigned(plan.dim)};
  for (int64_t d = tile.getRank() - 1; d >= 0; --d)
    if (d != plan.dim)
      order.push_back(d);
  return withLayout(tile, getDefaultBlockedLayout(
                              tile.getContext(), tile.getShape(), 1,
                              getNumWarps(tile.getEncoding()), order));
}

/// What a tile.load or tile.store moves: its view, tile type and offsets.
struct AccessOperands {
  Value view;
  RankedTensorType tile;
  ValueRange offsets;
};

std::optional<AccessOperands> accessOperands(Operation *op) {
  if (auto load = dyn_cast<LoadOp>(op))
    return AccessOperands{load.getView(), load.getResult().getType(),
                          load.getOffsets()};
  if (auto store = dyn_cast<StoreOp>(op))
    return AccessOperands{store.getView(), store.getValue().getType(),
                          store.getOffsets()};
  return std::nullopt;
}

/// The values of 1:1-converted operands (tile offsets) in a 1:N adaptor.
SmallVector<Value> singleValues(ArrayRef<ValueRange> ranges) {
  SmallVector<Value> values;
  for (ValueRange range : ranges)
    values.push_back(range.front());
  return values;
}

/// The largest power of two (up to 2^30) dividing `v`.
int64_t powerOfTwoDivisor(int64_t v) {
  constexpr int64_t kMax = int64_t(1) << 30;
  if (v == 0)
    return kMax;
  return std::min<int64_t>(kMax, int64_t(1) << llvm::countr_zero(uint64_t(std::abs(v))));
}

/// The argument attribute `name` of the tile.kernel argument `view` is; null
/// when `view` is no kernel argument or has no such attribute.
template <typename AttrT>
AttrT kernelArgAttr(Value view, StringRef name) {
  auto arg = dyn_cast<BlockArgument>(view);
  auto kernel = arg ? dyn_cast<KernelOp>(arg.getOwner()->getParentOp()) : nullptr;
  return kernel ? kernel.getArgAttrOfType<AttrT>(arg.getArgNumber(), name) : AttrT();
}

/// The largest power of two that divides the size `dim` reads: a static size
/// or a kernel view's tile.size_divisibility.
int64_t sizeDivisor(memref::DimOp dim) {
  std::optional<int64_t> index = dim.getConstantIndex();
  auto type = dyn_cast<MemRefType>(dim.getSource().getType());
  if (!index || !type || *index < 0 || *index >= type.getRank())
    return 1;
  if (!type.isDynamicDim(*index))
    return powerOfTwoDivisor(type.getDimSize(*index));
  auto divisors = kernelArgAttr<DenseI64ArrayAttr>(
      dim.getSource(), KernelOp::getSizeDivisibilityAttrName());
  if (!divisors || *index >= divisors.size())
    return 1;
  return powerOfTwoDivisor(divisors[*index]);
}

/// The largest power of two (up to 2^30) that provably divides an index
/// value: constants, products, sums, casts, loop induction variables and
/// view sizes.
int64_t knownDivisor(Value value, unsigned depth = 0) {
  constexpr int64_t kMax = int64_t(1) << 30;
  if (depth > 16)
    return 1;
  if (auto constant = getConstantIntValue(value))
    return powerOfTwoDivisor(*constant);
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp()))
      if (arg == loop.getInductionVar())
        return std::min(knownDivisor(loop.getLowerBound(), depth + 1),
                        knownDivisor(loop.getStep(), depth + 1));
    return 1;
  }
  Operation *op = value.getDefiningOp();
  if (isa<arith::MulIOp>(op))
    return std::min(kMax, knownDivisor(op->getOperand(0), depth + 1) *
                              knownDivisor(op->getOperand(1), depth + 1));
  if (isa<arith::AddIOp, arith::SubIOp>(op))
    return std::min(knownDivisor(op->getOperand(0), depth + 1),
                    knownDivisor(op->getOperand(1), depth + 1));
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op))
    return knownDivisor(op->getOperand(0), depth + 1);
  if (auto dim = dyn_cast<memref::DimOp>(op))
    return sizeDivisor(dim);
  if (isa<arith::ShLIOp>(op))
    if (auto shift = getConstantIntValue(op->getOperand(1)))
      return std::min(kMax, knownDivisor(op->getOperand(0), depth + 1)
                                << std::min<int64_t>(*shift, 30));
  return 1;
}

/// Whether an index value is provably non-negative: constants, grid
/// indices, sizes, loop induction variables from non-negative bounds, and
/// sums, products and min/max of those.
bool knownNonNegative(Value value, unsigned depth = 0) {
  if (depth > 16)
    return false;
  if (auto constant = getConstantIntValue(value))
    return *constant >= 0;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
    return loop && arg == loop.getInductionVar() &&
           knownNonNegative(loop.getLowerBound(), depth + 1);
  }
  Operation *op = value.getDefiningOp();
  if (isa<ProgramIdOp, NumProgramsOp, memref::DimOp>(op))
    return true;
  // A cast to index widens (a narrowing cast could wrap to a negative value).
  if (isa<arith::IndexCastOp>(op) && !op->getResult(0).getType().isIndex())
    return false;
  if (isa<arith::AddIOp, arith::MulIOp, arith::MinSIOp, arith::MaxSIOp,
          arith::IndexCastOp>(op))
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      return knownNonNegative(operand, depth + 1);
    });
  return false;
}

/// Marks a loop for narrowInductionVariable (removed by it).
constexpr StringLiteral kNarrowLoopAttr = "tile.narrow_loop";

/// Whether an index value is provably in [0, 2^31): a constant, a size of a
/// view that promises 32-bit indices (its launcher checks that), or the
/// minimum of such a value and a non-negative one.
/// Whether `view` is a kernel argument with 32-bit indices
/// (tile.index_bitwidth = 32).
bool hasNarrowIndices(Value view) {
  auto bits = kernelArgAttr<IntegerAttr>(view, KernelOp::getIndexBitwidthAttrName());
  return bits && bits.getInt() == 32;
}

bool isNarrowIndex(Value value, unsigned depth = 0) {
  if (depth > 8)
    return false;
  if (std::optional<int64_t> constant = getConstantIntValue(value))
    return *constant >= 0 && *constant <= std::numeric_limits<int32_t>::max();
  if (auto dim = value.getDefiningOp<memref::DimOp>())
    return hasNarrowIndices(dim.getSource());
  Operation *op = value.getDefiningOp();
  if (isa_and_nonnull<arith::MinSIOp, arith::MinUIOp>(op)) {
    Value a = op->getOperand(0), b = op->getOperand(1);
    return (isNarrowIndex(a, depth + 1) && knownNonNegative(b)) ||
           (isNarrowIndex(b, depth + 1) && knownNonNegative(a));
  }
  return false;
}

/// Marks the index loops of `kernel` whose induction variable fits in 32
/// bits: an upper bound in [0, 2^31), a non-negative lower bound and a
/// constant step in (0, 2^31), so that `iv + step` cannot wrap an unsigned
/// 32-bit compare. Marked loops count in i32 after the conversion
/// (narrowInductionVariable): one register for the counter and 32-bit
/// offsets from it, as Triton's loops. The attribute says whether the lower
/// bound needs clamping to the upper one to fit (`program_id * 16`).
void markNarrowLoops(KernelOp kernel) {
  kernel.walk([&](scf::ForOp loop) {
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (!loop.getInductionVar().getType().isIndex() || !step || *step <= 0 ||
        *step > std::numeric_limits<int32_t>::max() || loop.getUnsignedCmp() ||
        !isNarrowIndex(loop.getUpperBound()) ||
        !knownNonNegative(loop.getLowerBound()))
      return;
    bool clamp = !isNarrowIndex(loop.getLowerBound());
    loop->setAttr(kNarrowLoopAttr, BoolAttr::get(loop.getContext(), clamp));
  });
}

/// Rewrites a loop marked by markNarrowLoops to count in i32 with an
/// unsigned compare; its body sees the counter widened back to index. A
/// clamped lower bound min(lb, ub) runs the same iterations: none when
/// lb >= ub.
void narrowInductionVariable(scf::ForOp loop) {
  bool clamp = loop->getAttrOfType<BoolAttr>(kNarrowLoopAttr).getValue();
  loop->removeAttr(kNarrowLoopAttr);
  Location loc = loop.getLoc();
  OpBuilder b(loop.getBody(), loop.getBody()->begin());
  Value iv = loop.getInductionVar();
  auto wide = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), iv);
  iv.replaceAllUsesExcept(wide, wide);
  b.setInsertionPoint(loop);
  Type i32 = b.getI32Type();
  auto narrow = [&](Value v) -> Value {
    return arith::IndexCastUIOp::create(b, loc, i32, v);
  };
  Value lb = loop.getLowerBound();
  if (clamp)
    lb = arith::MinUIOp::create(b, loc, lb, loop.getUpperBound());
  loop.setLowerBound(narrow(lb));
  loop.setUpperBound(narrow(loop.getUpperBound()));
  loop.setStep(narrow(loop.getStep()));
  iv.setType(i32);
  loop.setUnsignedCmp(true);
}

/// Whether every index of a tile of extent 1 at `offset` along `dim` of
/// `view` is inside the view: `offset` is the induction variable of a loop
/// from a non-negative lower bound with a positive step up to (at most) the
/// view's size there, `for %i = %lb to min(..., dim(view, d), ...)`.
bool provenInBounds(Value offset, Value view, int64_t dim) {
  auto arg = dyn_cast<BlockArgument>(offset);
  auto loop = arg ? dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!loop || arg != loop.getInductionVar())
    return false;
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!step || *step <= 0 || !knownNonNegative(loop.getLowerBound()))
    return false;
  std::function<bool(Value, unsigned)> boundedBySize = [&](Value ub,
                                                           unsigned depth) {
    if (depth > 8)
      return false;
    if (auto dimOp = ub.getDefiningOp<memref::DimOp>())
      return dimOp.getSource() == view && dimOp.getConstantIndex() == dim;
    Operation *op = ub.getDefiningOp();
    if (isa_and_nonnull<arith::MinSIOp, arith::MinUIOp>(op))
      return boundedBySize(op->getOperand(0), depth + 1) ||
             boundedBySize(op->getOperand(1), depth + 1);
    return false;
  };
  return boundedBySize(loop.getUpperBound(), 0);
}

/// What a load or store may assume (see AccessFacts): from its tile offsets,
/// the loops around it and its view's kernel argument attributes.
AccessFacts analyzeAccess(const AccessOperands &access) {
  auto [view, tile, offsets] = access;
  auto viewType = cast<MemRefType>(view.getType());
  AccessFacts facts;
  facts.plan = planVector(tile, viewType);
  for (auto [d, extent] : llvm::enumerate(tile.getShape())) {
    facts.inBounds.push_back(extent == 1 && provenInBounds(offsets[d], view, d));
    facts.nonNegativeStarts.push_back(knownNonNegative(offsets[d]));
  }
  if (!llvm::is_contained(facts.inBounds, true))
    facts.inBounds.clear();
  auto arg = dyn_cast<BlockArgument>(view);
  if (arg && isa<KernelOp>(arg.getOwner()->getParentOp())) {
    if (auto shapeOf = kernelArgAttr<IntegerAttr>(view, KernelOp::getSameShapeAsAttrName()))
      facts.sameShapeAs = shapeOf.getInt();
    facts.narrow = hasNarrowIndices(view);
    const VectorPlan &plan = facts.plan;
    if (plan.elems > 1) {
      auto sizeDivisibility = kernelArgAttr<DenseI64ArrayAttr>(
          view, KernelOp::getSizeDivisibilityAttrName());
      int64_t size = viewType.getDimSize(plan.dim);
      if (ShapedType::isDynamic(size) && sizeDivisibility)
        size = sizeDivisibility[plan.dim];
      facts.wholeRuns = !ShapedType::isDynamic(size) && size % plan.elems == 0;
      auto divisibility =
          kernelArgAttr<IntegerAttr>(view, KernelOp::getDivisibilityAttrName());
      int64_t bytes = plan.elems * storageBits(tile.getElementType()) / 8;
      facts.aligned = divisibility && divisibility.getInt() % bytes == 0 &&
                      staticStride(viewType, plan.dim) == std::optional<int64_t>(1) &&
                      knownDivisor(offsets[plan.dim]) % plan.elems == 0;
    }
  }
  if (!facts.aligned)
    facts.fallback = scalarFallbackTile(tile, viewType, facts.plan);
  return facts;
}

/// In the vector branch the run-time check proved the fastest stride is 1.
View vectorView(OpBuilder &b, Location loc, const View &view,
                const VectorPlan &plan, unsigned vecElems) {
  View result = view;
  if (vecElems > 1)
    result.strides[plan.dim] = intConst(b, loc, view.indexType, 1);
  return result;
}

/// Hands out each wrapped coordinate of a tile once, run by run: a thread
/// whose layout wraps around the tile writes each element a single time.
class WriteOnce {
public:
  WriteOnce(ArrayRef<SmallVector<int64_t>> offsets, ArrayRef<int64_t> shape) {
    for (const SmallVector<int64_t> &offset : offsets)
      wrapped.push_back(wrap(offset, shape));
  }

  /// Whether `run` is still to be written (no earlier run wrote its first
  /// element); marks all its elements written.
  bool claim(Run run) {
    if (!written.insert(wrapped[run.first]).second)
      return false;
    for (unsigned e = 1; e < run.count; ++e)
      written.insert(wrapped[run.first + e]);
    return true;
  }

private:
  SmallVector<SmallVector<int64_t>> wrapped;
  llvm::DenseSet<ArrayRef<int64_t>> written;
};

/// How a run of `count` elements of `bits` moves as PTX words: narrow
/// elements pack into 32-bit words when the run fills them.
struct RunWords {
  RunWords(Run run, unsigned bits) {
    elemsPerWord = run.count > 1 && bits < 32 ? 32 / bits : 1;
    if (run.count % elemsPerWord)
      elemsPerWord = 1;
    wordBits = bits * elemsPerWord;
    words = run.count / elemsPerWord;
  }
  unsigned elemsPerWord, wordBits, words;
};

/// One word of `wordBits` holding `elements` (their storage bits, in order).
Value packWord(OpBuilder &b, Location loc, ArrayRef<Value> elements,
               unsigned wordBits) {
  if (elements.size() == 1)
    return elementToWord(b, loc, elements[0], wordBits);
  SmallVector<Value> parts;
  for (Value element : elements)
    parts.push_back(toStorage(b, loc, element));
  Value vec = vector::FromElementsOp::create(
      b, loc, VectorType::get({int64_t(parts.size())}, parts[0].getType()), parts);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getIntegerType(wordBits)), vec);
  return vector::ExtractOp::create(b, loc, word, 0);
}

/// The `count` elements of `element` type packed in `word`.
SmallVector<Value> unpackWord(OpBuilder &b, Location loc, Value word,
                              Type element, unsigned count, unsigned bits) {
  if (count == 1)
    return {wordToElement(b, loc, word, element, bits)};
  Value asVector = vector::BitCastOp::create(
      b, loc, VectorType::get({count}, storageType(b, element)),
      vector::BroadcastOp::create(b, loc, VectorType::get({1}, word.getType()),
                                  word));
  SmallVector<Value> elements;
  for (unsigned e = 0; e < count; ++e)
    elements.push_back(fromStorage(
        b, loc, vector::ExtractOp::create(b, loc, asVector, e), element));
  return elements;
}

/// The predicates of a run: `full` when all of it is in bounds (the vector
/// access), `partial` (null for one element, or when the view's size is a
/// multiple of the run: `whole`) when it straddles the end of the view and
/// its in-bounds part goes element by element.
struct RunBounds {
  RunBounds(OpBuilder &b, Location loc, Access &access, Run run, bool whole) {
    Value first = access.inBounds(b, run.first);
    // A run starts at a multiple of its length (the vector path checked the
    // tile offset): if the size is one too, the run is all in or all out.
    if (run.count == 1 || whole) {
      full = first;
      return;
    }
    Value last = access.inBounds(b, run.first + run.count - 1);
    full = arith::AndIOp::create(b, loc, first, last);
    partial = arith::XOrIOp::create(b, loc, first, last);
  }
  Value full, partial;
};

/// Emits an access with `emit(b, vectorElems)`: scalar when the view cannot
/// be vectorized, vector when the alignment is proven, else both behind the
/// uniform run-time check. Returns `emit`'s results.
SmallVector<Value>
emitVersioned(OpBuilder &b, Location loc, const View &view, ValueRange offsets,
              const VectorPlan &plan, unsigned bits, bool proven,
              function_ref<SmallVector<Value>(OpBuilder &, unsigned)> emit) {
  if (plan.elems <= 1)
    return emit(b, 1);
  if (proven)
    return emit(b, plan.elems);
  Value vectorizable =
      emitVectorizable(b, loc, view, offsets, plan.dim, plan.elems, bits / 8);
  auto ifOp = scf::IfOp::create(
      b, loc, vectorizable,
      [&](OpBuilder &tb, Location) {
        scf::YieldOp::create(tb, loc, emit(tb, plan.elems));
      },
      [&](OpBuilder &eb, Location) {
        scf::YieldOp::create(eb, loc, emit(eb, 1));
      });
  return SmallVector<Value>(ifOp.getResults());
}

/// Stores a tile's registers to shared memory, each replicated register
/// once, as runs of at most `maxElems` registers contiguous along the
/// layout's fastest dimension: one (vector) store per run at
/// `pointerOf(coordinates of the run's first register)`.
void storeRunsToShared(OpBuilder &b, Location loc, KernelState &ks,
                       RankedTensorType type, Value vector, unsigned maxElems,
                       function_ref<Value(ArrayRef<Value>)> pointerOf) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  SmallVector<Value> values = unpack(b, loc, vector);
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  WriteOnce once(coords.offsets, type.getShape());
  int64_t dim = contiguity(type.getEncoding()).first;
  for (Run run : contiguousRuns(coords.offsets, type.getShape(), dim, maxElems)) {
    if (!once.claim(run))
      continue;
    Value ptr = pointerOf(coords.coords[run.first]);
    if (run.count == 1) {
      LLVM::StoreOp::create(b, loc, toStorage(b, loc, values[run.first]), ptr);
      continue;
    }
    SmallVector<Value> parts;
    for (unsigned e = 0; e < run.count; ++e)
      parts.push_back(toStorage(b, loc, values[run.first + e]));
    Value vec = vector::FromElementsOp::create(
        b, loc, VectorType::get({int64_t(run.count)}, stored), parts);
    LLVM::StoreOp::create(b, loc, vec, ptr, /*alignment=*/run.count * bytes);
  }
}

/// Writes a tile's registers into shared memory at their (padded) row-major
/// positions; returns nothing. Callers put barriers around.
void storeTileToShared(OpBuilder &b, Location loc, KernelState &ks,
                       RankedTensorType type, Value vector,
                       ArrayRef<int64_t> logicalShape, int64_t pad,
                       int64_t byteOffset = 0) {
  // Registers contiguous along the row go out as one vector store when rows
  // (with their padding) keep 16-byte alignment; else one store each.
  Type stored = storageType(b, type.getElementType());
  int64_t bytes = storageBits(type.getElementType()) / 8;
  int64_t rank = logicalShape.size();
  auto [dim, contiguous] = contiguity(type.getEncoding());
  unsigned maxElems = 1;
  if (rank > 0 && dim == rank - 1 &&
      (logicalShape.back() + (rank > 1 ? pad : 0)) * bytes % 16 == 0 &&
      byteOffset % 16 == 0 && logicalShape == type.getShape())
    maxElems = std::min<unsigned>(contiguous, 16 / bytes);
  storeRunsToShared(b, loc, ks, type, vector, maxElems, [&](ArrayRef<Value> coord) {
    Value index = linearIndex(b, loc, coord, logicalShape, pad);
    return sharedPtr(b, loc, ks, stored, index, byteOffset);
  });
}

SmallVector<Value> loadTileFromShared(OpBuilder &b, Location loc,
                                      KernelState &ks, RankedTensorType type,
                                      ArrayRef<int64_t> logicalShape,
                                      int64_t pad, int64_t byteOffset = 0) {
  TileCoords coords = emitCoords(b, loc, type, ks);
  Type element = type.getElementType();
  SmallVector<Value> values;
  for (const SmallVector<Value> &coord : coords.coords) {
    Value index = linearIndex(b, loc, coord, logicalShape, pad);
    Value ptr = sharedPtr(b, loc, ks, storageType(b, element), index, byteOffset);
    Value v = LLVM::LoadOp::create(b, loc, storageType(b, element), ptr);
    values.push_back(fromStorage(b, loc, v, element));
  }
  return values;
}

/// A tile of type `from` (registers `vector`) in the layout of `to`, through
/// shared memory at row-major positions (rows padded by `pad` elements),
/// between barriers.
SmallVector<Value> restageThroughShared(OpBuilder &b, Location loc,
                                        KernelState &ks, RankedTensorType from,
                                        Value vector, RankedTensorType to,
                                        int64_t pad) {
  barrier(b, loc);
  storeTileToShared(b, loc, ks, from, vector, from.getShape(), pad);
  barrier(b, loc);
  return loadTileFromShared(b, loc, ks, to, to.getShape(), pad);
}

struct LoadLowering : TilePattern<LoadOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(LoadOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = state.get(op);
    RankedTensorType tile = op.getResult().getType();
    Type element = tile.getElementType();
    unsigned bits = storageBits(element);
    const AccessFacts &facts = state.accesses[op];
    const VectorPlan &plan = facts.plan;
    View view = accessView(rewriter, loc, adaptor.getView(), op.getView().getType(),
                           facts, ks);
    SmallVector<Value> offsets = singleValues(adaptor.getOffsets());
    TypedAttr padAttr = op.getPaddingOrZero();
    Value padding = arith::ConstantOp::create(rewriter, loc, padAttr);
    VectorType resultType = vectorType(tile);
    if (auto copy = state.asyncCopies.find(op); copy != state.asyncCopies.end()) {
      // Straight into the dot's staging area; the dot reads it from there.
      if (copy->second.barrier)
        barrier(rewriter, loc);
      Access access(rewriter, loc, tile,
                    vectorView(rewriter, loc, view, plan, plan.elems), offsets,
                    element, ks, /*ownersOnly=*/false);
      TileCoords coords = emitCoords(rewriter, loc, tile, ks);
      const AsyncCopy &to = copy->second;
      for (Run run : contiguousRuns(access.offsets, tile.getShape(), plan.dim,
                                    plan.elems)) {
        if (run.count * bits != 128)
          return op.emitOpError("internal error: cp.async run is not 16 bytes");
        ArrayRef<Value> at = coords.coords[run.first];
        Value dst = sharedPtr(rewriter, loc, ks, rewriter.getI8Type(),
                              stagedOperandOffset(rewriter, loc, to.dot, to.operand,
                                                  usesWgmma(to.dot, state), at[0], at[1]));
        RunBounds bounds(rewriter, loc, access, run, /*whole=*/true);
        Value size = bounds.full
                         ? arith::SelectOp::create(rewriter, loc, bounds.full,
                                                   i32Const(rewriter, loc, 16),
                                                   i32Const(rewriter, loc, 0))
                         : i32Const(rewriter, loc, 16);
        NVVM::CpAsyncOp::create(rewriter, loc, dst, access.pointer(rewriter, run.first),
                                16, NVVM::LoadCacheModifierKind::CG, size);
      }
      rewriter.replaceOp(op, LLVM::PoisonOp::create(rewriter, loc, resultType));
      return success();
    }

    // Addresses are computed in each branch: the vector one needs few.
    auto emit = [&](OpBuilder &b, unsigned vecElems) -> SmallVector<Value> {
      RankedTensorType accessTile =
          vecElems == 1 && facts.fallback ? facts.fallback : tile;
      Access access(b, loc, accessTile, vectorView(b, loc, view, plan, vecElems),
                    offsets, element, ks, /*ownersOnly=*/false);
      SmallVector<Value> values(access.offsets.size());
      for (Run run : contiguousRuns(access.offsets, tile.getShape(), plan.dim,
                                    vecElems)) {
        RunWords words(run, bits);
        Value pad = packWord(b, loc, SmallVector<Value>(words.elemsPerWord, padding),
                             words.wordBits);
        RunBounds bounds(b, loc, access, run, facts.wholeRuns);
        SmallVector<Value> loaded = emitPredicatedLoad(
            b, loc, access.pointer(b, run.first), bounds.full, words.wordBits,
            words.words, SmallVector<Value>(words.words, pad));
        for (unsigned w = 0; w < words.words; ++w)
          llvm::copy(unpackWord(b, loc, loaded[w], element, words.elemsPerWord, bits),
                     values.begin() + run.first + w * words.elemsPerWord);
        if (!bounds.partial)
          continue;
        // A run across the end of the view: its in-bounds part, one by one.
        auto tail = scf::IfOp::create(
            b, loc, bounds.partial,
            [&](OpBuilder &tb, Location) {
              SmallVector<Value> scalars;
              for (unsigned r = run.first; r < run.first + run.count; ++r) {
                Value word = emitPredicatedLoad(
                    tb, loc, access.pointer(tb, r), access.inBounds(tb, r), bits, 1,
                    {elementToWord(tb, loc, values[r], bits)})[0];
                scalars.push_back(wordToElement(tb, loc, word, element, bits));
              }
              scf::YieldOp::create(tb, loc, scalars);
            },
            [&](OpBuilder &eb, Location) {
              scf::YieldOp::create(
                  eb, loc, ArrayRef<Value>(values).slice(run.first, run.count));
            });
        llvm::copy(tail.getResults(), values.begin() + run.first);
      }
      if (accessTile != tile) // coalesced scalar loads, then the tile's layout
        values = restageThroughShared(b, loc, ks, accessTile,
                                      pack(b, loc, vectorType(accessTile), values),
                                      tile, smemPad(element));
      return {pack(b, loc, resultType, values)};
    };
    rewriter.replaceOp(op, emitVersioned(rewriter, loc, view, offsets, plan, bits,
                                         facts.aligned, emit));
    return success();
  }
};

/// tile.gather: each element a bounds-checked scalar load at the address
/// its indices give (unsigned compares reject negative indices too).
struct GatherLowering : TilePattern<GatherOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getView().getType();
    ValueRange values = adaptor.getView();
    if (!isViewType(type) || values.size() != size_t(1 + 2 * type.getRank()))
      return op.emitOpError("in a tile.kernel must gather from a view argument");
    View view = unpackView(rewriter, loc, values, type);
    RankedTensorType tile = op.getResult().getType();
    Type element = tile.getElementType();
    unsigned bits = storageBits(element);
    Type i64 = rewriter.getI64Type();
    SmallVector<SmallVector<Value>> indices;
    for (ValueRange index : adaptor.getIndices())
      indices.push_back(unpack(rewriter, loc, index.front()));
    Value padding = elementToWord(
        rewriter, loc,
        arith::ConstantOp::create(rewriter, loc, op.getPaddingOrZero()), bits);
    auto ptrType = LLVM::LLVMPointerType::get(rewriter.getContext(), 1);
    SmallVector<Value> results;
    for (size_t e = 0, n = indices.front().size(); e < n; ++e) {
      Value offset = i64Const(rewriter, loc, 0);
      Value inBounds;
      for (auto [k, index] : llvm::enumerate(indices)) {
        Value i = index[e];
        if (i.getType() != i64)
          i = arith::ExtSIOp::create(rewriter, loc, i64, i);
        Value in = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                         i, view.sizes[k]);
        inBounds = inBounds ? arith::AndIOp::create(rewriter, loc, inBounds, in)
                            : in;
        offset = arith::AddIOp::create(
            rewriter, loc, offset,
            arith::MulIOp::create(rewriter, loc, i, view.strides[k]));
      }
      Value ptr = LLVM::GEPOp::create(rewriter, loc, ptrType,
                                      storageType(rewriter, element), view.ptr,
                                      ValueRange{offset});
      Value word =
          emitPredicatedLoad(rewriter, loc, ptr, inBounds, bits, 1, {padding})[0];
      results.push_back(wordToElement(rewriter, loc, word, element, bits));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, vectorType(tile), results));
    return success();
  }
};

struct StoreLowering : TilePattern<StoreOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(StoreOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = state.get(op);
    RankedTensorType tile = op.getValue().getType();
    Type element = tile.getElementType();
    unsigned bits = storageBits(element);
    const AccessFacts &facts = state.accesses[op];
    const VectorPlan &plan = facts.plan;
    View view = accessView(rewriter, loc, adaptor.getView(), op.getView().getType(),
                           facts, ks);
    SmallVector<Value> offsets = singleValues(adaptor.getOffsets());
    Value value = adaptor.getValue().front();
    SmallVector<Value> tileElements = unpack(rewriter, loc, value);

    auto emit = [&](OpBuilder &b, unsigned vecElems) -> SmallVector<Value> {
      RankedTensorType accessTile = tile;
      SmallVector<Value> elements = tileElements;
      if (vecElems == 1 && facts.fallback) {
        // Into a layout whose scalar stores are coalesced first.
        accessTile = facts.fallback;
        elements = restageThroughShared(b, loc, ks, tile, value, accessTile,
                                        smemPad(element));
      }
      // Replicated elements are stored by one thread only, once each.
      Access access(b, loc, accessTile, vectorView(b, loc, view, plan, vecElems),
                    offsets, element, ks, /*ownersOnly=*/true);
      WriteOnce once(access.offsets, tile.getShape());
      for (Run run : contiguousRuns(access.offsets, tile.getShape(), plan.dim,
                                    vecElems)) {
        if (!once.claim(run))
          continue;
        RunWords words(run, bits);
        SmallVector<Value> packed;
        for (unsigned w = 0; w < words.words; ++w)
          packed.push_back(packWord(
              b, loc,
              ArrayRef<Value>(elements).slice(run.first + w * words.elemsPerWord,
                                              words.elemsPerWord),
              words.wordBits));
        RunBounds bounds(b, loc, access, run, facts.wholeRuns);
        emitPredicatedStore(b, loc, access.pointer(b, run.first), bounds.full,
                            words.wordBits, packed);
        if (!bounds.partial)
          continue;
        // A run across the end of the view: its in-bounds part, one by one.
        scf::IfOp::create(b, loc, bounds.partial, [&](OpBuilder &tb, Location) {
          for (unsigned r = run.first; r < run.first + run.count; ++r)
            emitPredicatedStore(tb, loc, access.pointer(tb, r), access.inBounds(tb, r),
                                bits, {elementToWord(tb, loc, elements[r], bits)});
          scf::YieldOp::create(tb, loc);
        });
      }
      return {};
    };
    emitVersioned(rewriter, loc, view, offsets, plan, bits, facts.aligned, emit);
    rewriter.eraseOp(op);
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
    rewriter.replaceOp(op, pack(rewriter, loc, vectorType(op.getResult().getType()),
                                values));
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
    if (getLayout(op.getSource().getType()) != getLayout(op.getResult().getType()))
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

/// convert_layout and reshape: through shared memory.
template <typename Op>
struct StageThroughShared : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = this->state.get(op);
    auto srcType = cast<RankedTensorType>(op.getSource().getType());
    auto resType = cast<RankedTensorType>(op.getResult().getType());
    // A reshape keeps the row-major order: stage it unpadded and flat.
    bool reshape = std::is_same_v<Op, ReshapeOp>;
    int64_t pad = reshape ? 0 : smemPad(srcType.getElementType());
    SmallVector<Value> values = restageThroughShared(
        rewriter, loc, ks, srcType, adaptor.getSource(), resType, pad);
    rewriter.replaceOp(op, pack(rewriter, loc, this->vectorType(resType), values));
    return success();
  }
};

/// Applies a reduce's combiner to scalars by cloning its body.
SmallVector<Value> combine(OpBuilder &b, ReduceOp op, ValueRange acc,
                           ValueRange next) {
  Block &body = op.getCombiner().front();
  IRMapping mapping;
  for (auto [i, v] : llvm::enumerate(acc))
    mapping.map(body.getArgument(i), v);
  for (auto [i, v] : llvm::enumerate(next))
    mapping.map(body.getArgument(acc.size() + i), v);
  for (Operation &inner : body.without_terminator())
    b.clone(inner, mapping);
  SmallVector<Value> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(mapping.lookupOrDefault(v));
  return results;
}

/// A value moved across lanes by shfl.sync.bfly (any scalar up to 64 bits).
Value shuffleXor(OpBuilder &b, Location loc, Value v, unsigned mask) {
  Type type = v.getType();
  unsigned bits = type.getIntOrFloatBitWidth();
  Value allLanes = i32Const(b, loc, -1);
  Value offset = i32Const(b, loc, mask);
  Value clamp = i32Const(b, loc, 0x1f);
  auto shfl32 = [&](Value word) -> Value {
    return NVVM::ShflOp::create(b, loc, b.getI32Type(), allLanes, word, offset,
                                clamp, NVVM::ShflKind::bfly, UnitAttr());
  };
  if (bits == 64) {
    Value word = type.isInteger() ? v
                                  : arith::BitcastOp::create(b, loc, b.getI64Type(), v);
    Value lo = arith::TruncIOp::create(b, loc, b.getI32Type(), word);
    Value hi = arith::TruncIOp::create(
        b, loc, b.getI32Type(),
        arith::ShRUIOp::create(b, loc, word, i64Const(b, loc, 32)));
    lo = arith::ExtUIOp::create(b, loc, b.getI64Type(), shfl32(lo));
    hi = arith::ExtUIOp::create(b, loc, b.getI64Type(), shfl32(hi));
    Value joined = arith::OrIOp::create(
        b, loc, lo, arith::ShLIOp::create(b, loc, hi, i64Const(b, loc, 32)));
    return type.isInteger() ? joined
                            : Value(arith::BitcastOp::create(b, loc, type, joined));
  }
  Value word = v;
  if (!type.isInteger())
    word = arith::BitcastOp::create(b, loc, b.getIntegerType(bits), v);
  if (bits < 32)
    word = arith::ExtUIOp::create(b, loc, b.getI32Type(), word);
  Value result = shfl32(word);
  if (bits < 32)
    result = arith::TruncIOp::create(b, loc, b.getIntegerType(bits), result);
  if (!type.isInteger())
    result = arith::BitcastOp::create(b, loc, type, result);
  return result;
}

struct ReduceLowering : TilePattern<ReduceOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(ReduceOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = state.get(op);
    auto inType = cast<RankedTensorType>(op.getOperands()[0].getType());
    auto blocked = dyn_cast<BlockedLayoutAttr>(inType.getEncoding());
    if (!blocked)
      return op.emitOpError("lowering a reduction of a sliced layout is not "
                            "supported yet; convert the operand to a blocked "
                            "layout first");
    int64_t axis = op.getAxis();
    ArrayRef<int64_t> shape = inType.getShape();
    size_t numOperands = op.getOperands().size();
    SmallVector<SmallVector<Value>> inputs;
    for (ValueRange v : adaptor.getOperands())
      inputs.push_back(unpack(rewriter, loc, v.front()));
    SmallVector<SmallVector<int64_t>> offsets =
        getRegisterOffsets(blocked, shape);

    // 1. In registers: group by the coordinates off the axis.
    SmallVector<SmallVector<int64_t>> groupKeys;
    SmallVector<SmallVector<Value>> accs; // per group, per operand
    llvm::DenseSet<ArrayRef<int64_t>> seenFull;
    SmallVector<SmallVector<int64_t>> wrapped;
    for (const SmallVector<int64_t> &o : offsets)
      wrapped.push_back(wrap(o, shape));
    for (auto [r, full] : llvm::enumerate(wrapped)) {
      if (!seenFull.insert(full).second)
        continue; // a replicated register: count it once
      SmallVector<int64_t> key(full);
      key.erase(key.begin() + axis);
      auto it = llvm::find(groupKeys, key);
      SmallVector<Value> values;
      for (size_t k = 0; k < numOperands; ++k)
        values.push_back(inputs[k][r]);
      if (it == groupKeys.end()) {
        groupKeys.push_back(key);
        accs.push_back(values);
      } else {
        size_t g = it - groupKeys.begin();
        accs[g] = combine(rewriter, op, accs[g], values);
      }
    }

    // 2. Across the lanes that hold distinct elements of the axis.
    unsigned laneStride = 1, warpStride = 1;
    for (unsigned d : blocked.getOrder()) {
      if (d == axis)
        break;
      laneStride *= blocked.getThreadsPerWarp()[d];
      warpStride *= blocked.getWarpsPerCTA()[d];
    }
    int64_t spt = blocked.getSizePerThread()[axis];
    int64_t tpw = blocked.getThreadsPerWarp()[axis];
    int64_t wpc = blocked.getWarpsPerCTA()[axis];
    int64_t lanes = std::min<int64_t>(tpw, llvm::divideCeil(shape[axis], spt));
    for (int64_t k = 1; k < lanes; k *= 2)
      for (SmallVector<Value> &acc : accs) {
        SmallVector<Value> other;
        for (Value v : acc)
          other.push_back(shuffleXor(rewriter, loc, v, laneStride * k));
        acc = combine(rewriter, op, acc, other);
      }

    // 3. Across warps, through shared memory.
    int64_t warps =
        std::min<int64_t>(wpc, llvm::divideCeil(shape[axis], spt * tpw));
    SmallVector<int64_t> resultShape(shape);
    resultShape.erase(resultShape.begin() + axis);
    if (warps > 1) {
      int64_t resultElems = 1;
      for (int64_t s : resultShape)
        resultElems *= s;
      // Group coordinates at run time: the thread base off the axis.
      SmallVector<Value> base = emitThreadBase(rewriter, loc, blocked, ks);
      base.erase(base.begin() + axis);
      Value warpOnAxis = arith::AndIOp::create(
          rewriter, loc,
          arith::ShRUIOp::create(rewriter, loc, ks.warp,
                                 i32Const(rewriter, loc, llvm::Log2_64(warpStride))),
          i32Const(rewriter, loc, wpc - 1));
      SmallVector<Value> groupIndex;
      for (const SmallVector<int64_t> &key : groupKeys) {
        SmallVector<Value> coord;
        for (auto [d, size] : llvm::enumerate(resultShape)) {
          Value c = arith::AddIOp::create(rewriter, loc, base[d],
                                          i32Const(rewriter, loc, key[d]));
          coord.push_back(arith::AndIOp::create(rewriter, loc, c,
                                                i32Const(rewriter, loc, size - 1)));
        }
        groupIndex.push_back(linearIndex(rewriter, loc, coord, resultShape));
      }
      // Operand k's partials live at [k][warp][element].
      SmallVector<int64_t> operandBase;
      int64_t bytes = 0;
      for (size_t k = 0; k < numOperands; ++k) {
        operandBase.push_back(bytes);
        Type t = inType.getElementType();
        if (auto tt = dyn_cast<RankedTensorType>(op.getOperands()[k].getType()))
          t = tt.getElementType();
        bytes += llvm::alignTo(wpc * resultElems * storageBits(t) / 8, 16);
      }
      barrier(rewriter, loc);
      for (auto [g, acc] : llvm::enumerate(accs))
        for (size_t k = 0; k < numOperands; ++k) {
          Value slot = arith::AddIOp::create(
              rewriter, loc,
              arith::MulIOp::create(rewriter, loc, warpOnAxis,
                                    i32Const(rewriter, loc, resultElems)),
              groupIndex[g]);
          Type t = acc[k].getType();
          Value ptr = sharedPtr(rewriter, loc, ks, storageType(rewriter, t), slot,
                                operandBase[k]);
          LLVM::StoreOp::create(rewriter, loc, toStorage(rewriter, loc, acc[k]),
                                ptr);
        }
      barrier(rewriter, loc);
      for (auto [g, acc] : llvm::enumerate(accs)) {
        SmallVector<Value> total;
        for (int64_t w = 0; w < warps; ++w) {
          SmallVector<Value> part;
          for (size_t k = 0; k < numOperands; ++k) {
            Value slot = arith::AddIOp::create(
                rewriter, loc, i32Const(rewriter, loc, w * resultElems),
                groupIndex[g]);
            Type t = acc[k].getType();
            Value ptr = sharedPtr(rewriter, loc, ks, storageType(rewriter, t),
                                  slot, operandBase[k]);
            part.push_back(fromStorage(
                rewriter, loc,
                LLVM::LoadOp::create(rewriter, loc, storageType(rewriter, t), ptr),
                t));
          }
          total = w == 0 ? part : combine(rewriter, op, total, part);
        }
        acc = total;
      }
    }

    // Results: scalars for a 1-D operand, else per-thread vectors in the
    // slice layout (whose register order is the groups' order).
    SmallVector<Value> results;
    for (auto [k, result] : llvm::enumerate(op.getResults())) {
      auto resultTile = dyn_cast<RankedTensorType>(result.getType());
      if (!resultTile || resultTile.getRank() == 0) {
        Value v = accs.front()[k];
        if (resultTile)
          v = vector::BroadcastOp::create(rewriter, loc, vectorType(resultTile), v);
        results.push_back(v);
        continue;
      }
      Attribute expected = SliceLayoutAttr::get(op.getContext(), axis, blocked);
      if (resultTile.getEncoding() != expected)
        return op.emitOpError("expected results in the slice layout of the "
                              "operands along the axis");
      SmallVector<SmallVector<int64_t>> resOffsets =
          getRegisterOffsets(expected, resultTile.getShape());
      SmallVector<Value> values;
      for (const SmallVector<int64_t> &o : resOffsets) {
        auto it = llvm::find(groupKeys, wrap(o, resultTile.getShape()));
        if (it == groupKeys.end())
          return op.emitOpError("internal error: reduction group not found");
        values.push_back(accs[it - groupKeys.begin()][k]);
      }
      results.push_back(pack(rewriter, loc, vectorType(resultTile), values));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// `ldmatrix` of `count` 8x8 b16 matrices; lane l supplies the row address of
/// matrix l / 8. Returns the b32 registers.
SmallVector<Value> emitLdMatrix(OpBuilder &b, Location loc, Value rowPtr,
                                unsigned count, bool trans) {
  MLIRContext *ctx = b.getContext();
  Type result = count == 1 ? Type(b.getI32Type())
                           : LLVM::LLVMStructType::getLiteral(
                                 ctx, SmallVector<Type>(count, b.getI32Type()));
  auto op = NVVM::LdMatrixOp::create(
      b, loc, result, rowPtr, count,
      NVVM::MMALayout(trans ? NVVM::MMALayout::col : NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8), NVVM::LdStMatrixEltType::B16);
  if (count == 1)
    return {op.getResult()};
  SmallVector<Value> regs;
  for (unsigned i = 0; i < count; ++i)
    regs.push_back(LLVM::ExtractValueOp::create(b, loc, op.getResult(), i));
  return regs;
}

/// One mma.sync.m16n8k16 (f16/bf16 inputs, f32 accumulator).
SmallVector<Value> emitMma(OpBuilder &b, Location loc, bool bf16,
                           ArrayRef<Value> a, ArrayRef<Value> bFrag,
                           ArrayRef<Value> c) {
  MLIRContext *ctx = b.getContext();
  std::string text = llvm::formatv(
      "mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {{$0, $1, $2, $3}, "
      "{{$4, $5, $6, $7}, {{$8, $9}, {{$10, $11, $12, $13};",
      bf16 ? "bf16" : "f16");
  std::string constraints = "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3";
  SmallVector<Value> operands(a);
  operands.append(bFrag.begin(), bFrag.end());
  operands.append(c.begin(), c.end());
  Type f32 = b.getF32Type();
  auto result = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, result, operands, text, constraints,
      /*has_side_effects=*/false, /*is_align_stack=*/false,
      LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
  SmallVector<Value> d;
  for (unsigned i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return d;
}

/// Stores operand `operand` (registers `vector`) of a wgmma dot into its
/// staging area (stagedOperandOffset), 16 bytes at a time where the layout
/// holds 8 contiguous elements along the rows (a 16-byte swizzle chunk).
void storeWgmmaOperand(OpBuilder &b, Location loc, KernelState &ks, DotOp dot,
                       unsigned operand, Value vector) {
  auto type = cast<RankedTensorType>(dot->getOperand(operand).getType());
  auto [dim, contiguous] = contiguity(type.getEncoding());
  unsigned maxElems = dim == 1 ? std::min<unsigned>(contiguous, 8) : 1;
  storeRunsToShared(b, loc, ks, type, vector, maxElems, [&](ArrayRef<Value> at) {
    return sharedPtr(b, loc, ks, b.getI8Type(),
                     stagedOperandOffset(b, loc, dot, operand, /*wgmma=*/true,
                                         at[0], at[1]));
  });
}

/// Puts both operands of a tensor-core dot into its staging area: those
/// that planAsyncCopies did not send there with cp.async (bit i of
/// `asyncOperands` for operand i) with `store(i)` after a barrier, then waits
/// for this thread's copies. The caller's barrier follows.
void stageDotOperands(OpBuilder &b, Location loc, unsigned asyncOperands,
                      function_ref<void(unsigned)> store) {
  if (asyncOperands != 3)
    barrier(b, loc);
  for (unsigned operand = 0; operand < 2; ++operand)
    if (!(asyncOperands & (1u << operand)))
      store(operand);
  if (!asyncOperands)
    return;
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
}

/// A PTX statement with no operands and no results, kept in place.
void emitPtx(OpBuilder &b, Location loc, StringRef text) {
  MLIRContext *ctx = b.getContext();
  LLVM::InlineAsmOp::create(
      b, loc, TypeRange(), ValueRange(), text, "", /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
}

/// An inline-asm statement whose f32 registers `regs` are read and written
/// in place ("+f"), after the other inputs `inputs` ("l" each); kept in
/// order with the other side-effecting statements.
SmallVector<Value> emitInPlaceAsm(OpBuilder &b, Location loc, StringRef text,
                                  ArrayRef<Value> regs, ValueRange inputs) {
  MLIRContext *ctx = b.getContext();
  std::string constraints;
  for (size_t i = 0; i < regs.size(); ++i)
    constraints += (i ? ",=f" : "=f");
  for (size_t i = 0; i < inputs.size(); ++i)
    constraints += ",l";
  for (size_t i = 0; i < regs.size(); ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Value> operands(inputs);
  operands.append(regs.begin(), regs.end());
  auto result = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(regs.size(), b.getF32Type()));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, result, operands, text, constraints, /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
  SmallVector<Value> out;
  for (size_t i = 0; i < regs.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return out;
}

/// "{$first, ..., $(first + count - 1)}".
std::string asmRegisterList(unsigned first, unsigned count) {
  std::string text = "{";
  for (unsigned i = 0; i < count; ++i)
    text += (i ? ", $" : "$") + std::to_string(first + i);
  return text + "}";
}

/// tile.dot on Hopper's warpgroup MMA (isWgmmaDot): A (K-major) and B
/// (MN-major, imm-trans-b) are staged in shared memory in wgmma's swizzled
/// layout, then each warpgroup issues one wgmma.mma_async m64nNk16 per 64-row
/// block and k16 step on descriptors of them, and waits for all. The
/// accumulator fragment of m64nN is the mma layout's (each warp 16 rows,
/// 8-column blocks in order), so the registers stay where they are.
LogicalResult lowerWgmmaDot(DotOp op, Value lhs, Value rhs, Value accVec,
                            MmaLayoutAttr mma, KernelState &ks,
                            ConversionPatternRewriter &rewriter,
                            VectorType accVecType, unsigned asyncOperands) {
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  RankedTensorType lhsType = op.getLhs().getType();
  RankedTensorType rhsType = op.getRhs().getType();
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
          n = rhsType.getDimSize(1);
  int64_t aRowBytes = k * 2, bRowBytes = n * 2;
  int64_t aSwizzle = wgmmaSwizzle(aRowBytes), bSwizzle = wgmmaSwizzle(bRowBytes);
  // Swizzle atoms repeat every 8 rows: 1024 bytes at most.
  int64_t bOffset = wgmmaOperandOffset(op, 1);
  ks.sharedAlignment = std::max<int64_t>(ks.sharedAlignment, 1024);

  stageDotOperands(b, loc, asyncOperands, [&](unsigned operand) {
    storeWgmmaOperand(b, loc, ks, op, operand, operand ? rhs : lhs);
  });
  // wgmma reads shared memory through the async proxy.
  emitPtx(b, loc, "fence.proxy.async.shared::cta;");
  barrier(b, loc);

  auto c32 = [&](int64_t v) { return i32Const(b, loc, v); };
  Type i64 = b.getI64Type();
  Value base = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(),
                                        sharedBase(b, loc, ks));
  // Descriptor: start address >> 4 (14 bits), leading and stride byte
  // offsets >> 4, swizzle mode in bits 62-63.
  auto descriptor = [&](Value byteOffset, int64_t leading, int64_t stride,
                        int64_t swizzle) -> Value {
    Value addr = arith::AddIOp::create(b, loc, base, byteOffset);
    Value start = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, addr, c32(4)), c32(0x3FFF));
    uint64_t fixed = (uint64_t((leading >> 4) & 0x3FFF) << 16) |
                     (uint64_t((stride >> 4) & 0x3FFF) << 32) |
                     (uint64_t(wgmmaSwizzleMode(swizzle)) << 62);
    return arith::OrIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, i64, start),
        arith::ConstantIntOp::create(b, loc, i64, int64_t(fixed)));
  };

  unsigned wm = mma.getWarpsPerCTA()[0];
  int64_t repsM = m / (kMmaM * wm);
  int64_t regsPerRep = n / 2;
  // This warpgroup's first row: 64 per warpgroup, 16 * wm per repetition.
  Value groupRow = arith::MulIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, ks.warp, c32(2)), c32(64));
  SmallVector<Value> acc = unpack(b, loc, accVec);
  StringRef type = lhsType.getElementType().isBF16() ? "bf16" : "f16";
  std::string text =
      llvm::formatv("wgmma.mma_async.sync.aligned.m64n{0}k16.f32.{1}.{1} {2}, "
                    "${3}, ${4}, 1, 1, 1, 0, 1;",
                    n, type, asmRegisterList(0, regsPerRep), regsPerRep,
                    regsPerRep + 1)
          .str();
  emitPtx(b, loc, "wgmma.fence.sync.aligned;");
  for (int64_t kk = 0; kk < k; kk += kMmaK) {
    int64_t aByte = kk * 2;
    Value bDesc = descriptor(c32(bOffset + kk * bSwizzle), k * bSwizzle,
                             8 * bSwizzle, bSwizzle);
    for (int64_t rm = 0; rm < repsM; ++rm) {
      Value row = arith::AddIOp::create(b, loc, groupRow, c32(rm * kMmaM * wm));
      Value aStart = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, row, c32(aSwizzle)),
          c32(aByte / aSwizzle * m * aSwizzle + aByte % aSwizzle));
      Value aDesc = descriptor(aStart, 16, 8 * aSwizzle, aSwizzle);
      MutableArrayRef<Value> regs =
          MutableArrayRef<Value>(acc).slice(rm * regsPerRep, regsPerRep);
      SmallVector<Value> d = emitInPlaceAsm(b, loc, text, regs, {aDesc, bDesc});
      llvm::copy(d, regs.begin());
    }
  }
  emitPtx(b, loc, "wgmma.commit_group.sync.aligned;");
  // The wait takes the accumulators in place, so nothing reads them early.
  acc = emitInPlaceAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", acc, {});
  if (int64_t(acc.size()) != accVecType.getNumElements())
    return op.emitOpError("internal error: wgmma accumulator size mismatch");
  rewriter.replaceOp(op, pack(b, loc, accVecType, acc));
  return success();
}

/// tile.dot on tensor cores: operands staged in shared memory, fragments
/// loaded with ldmatrix (B transposed), mma.sync per 16x8 block and k16
/// step. The accumulator registers are in the mma layout's order.
LogicalResult lowerMmaDot(DotOp op, Value lhs, Value rhs, Value accVec,
                          MmaLayoutAttr mma, KernelState &ks,
                          ConversionPatternRewriter &rewriter,
                          VectorType accVecType, unsigned asyncOperands) {
  Location loc = op.getLoc();
  RankedTensorType lhsType = op.getLhs().getType();
  RankedTensorType rhsType = op.getRhs().getType();
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
          n = rhsType.getDimSize(1);
  Type inElement = lhsType.getElementType();
  int64_t lhsBytes = mmaOperandOffset(op, 1);
  stageDotOperands(rewriter, loc, asyncOperands, [&](unsigned operand) {
    if (operand == 0)
      storeTileToShared(rewriter, loc, ks, lhsType, lhs, {m, k}, kMmaSmemPad);
    else
      storeTileToShared(rewriter, loc, ks, rhsType, rhs, {k, n}, kMmaSmemPad,
                        lhsBytes);
  });
  barrier(rewriter, loc);

  unsigned wm = mma.getWarpsPerCTA()[0], wn = mma.getWarpsPerCTA()[1];
  int64_t repsM = std::max<int64_t>(1, m / (kMmaM * wm));
  int64_t repsN = std::max<int64_t>(1, n / (kMmaN * wn));
  Value warpM = arith::AndIOp::create(rewriter, loc, ks.warp,
                                      i32Const(rewriter, loc, wm - 1));
  Value warpN = arith::AndIOp::create(
      rewriter, loc,
      arith::ShRUIOp::create(rewriter, loc, ks.warp,
                             i32Const(rewriter, loc, llvm::Log2_32(wm))),
      i32Const(rewriter, loc, wn - 1));
  // Lane l addresses row l % 8 of matrix l / 8 (0..3).
  Value row8 = arith::AndIOp::create(rewriter, loc, ks.lane, i32Const(rewriter, loc, 7));
  Value matrix = arith::ShRUIOp::create(rewriter, loc, ks.lane, i32Const(rewriter, loc, 3));
  Value matLow = arith::AndIOp::create(rewriter, loc, matrix, i32Const(rewriter, loc, 1));
  Value matHigh = arith::ShRUIOp::create(rewriter, loc, matrix, i32Const(rewriter, loc, 1));
  auto times = [&](Value v, int64_t c) {
    return arith::MulIOp::create(rewriter, loc, v, i32Const(rewriter, loc, c));
  };
  auto plus = [&](Value a, Value b) { return arith::AddIOp::create(rewriter, loc, a, b); };
  SmallVector<Value> acc = unpack(rewriter, loc, accVec);
  bool bf16 = inElement.isBF16();
  for (int64_t kk = 0; kk < k; kk += kMmaK) {
    // A: rows m0 + l%8 + 8*(matrix&1), columns kk + 8*(matrix>>1).
    SmallVector<SmallVector<Value>> aFrags;
    for (int64_t rm = 0; rm < repsM; ++rm) {
      Value row = plus(plus(times(warpM, kMmaM), i32Const(rewriter, loc, rm * kMmaM * wm)),
                       plus(row8, times(matLow, 8)));
      Value col = plus(i32Const(rewriter, loc, kk), times(matHigh, 8));
      Value index = plus(times(row, k + kMmaSmemPad), col);
      aFrags.push_back(emitLdMatrix(
          rewriter, loc, sharedPtr(rewriter, loc, ks, inElement, index), 4,
          /*trans=*/false));
    }
    // B (k x n row-major), transposed: rows kk + l%8 + 8*(matrix&1), the
    // column of block rn + (matrix>>1). One ldmatrix.x4 loads two blocks.
    SmallVector<SmallVector<Value>> bFrags;
    Value bRow = plus(i32Const(rewriter, loc, kk), plus(row8, times(matLow, 8)));
    for (int64_t rn = 0; rn < repsN; rn += 2) {
      bool pair = rn + 1 < repsN;
      Value col = plus(times(warpN, kMmaN), i32Const(rewriter, loc, rn * kMmaN * wn));
      if (pair)
        col = plus(col, times(matHigh, kMmaN * wn));
      Value index = plus(times(bRow, n + kMmaSmemPad), col);
      SmallVector<Value> regs = emitLdMatrix(
          rewriter, loc, sharedPtr(rewriter, loc, ks, inElement, index, lhsBytes),
          pair ? 4 : 2, /*trans=*/true);
      bFrags.push_back({regs[0], regs[1]});
      if (pair)
        bFrags.push_back({regs[2], regs[3]});
    }
    for (int64_t rm = 0; rm < repsM; ++rm)
      for (int64_t rn = 0; rn < repsN; ++rn) {
        unsigned base = (rm * repsN + rn) * 4;
        SmallVector<Value> d = emitMma(rewriter, loc, bf16, aFrags[rm], bFrags[rn],
                                       ArrayRef<Value>(acc).slice(base, 4));
        for (unsigned i = 0; i < 4; ++i)
          acc[base + i] = d[i];
      }
  }
  if (int64_t(acc.size()) != accVecType.getNumElements())
    return op.emitOpError("internal error: mma accumulator size mismatch");
  rewriter.replaceOp(op, pack(rewriter, loc, accVecType, acc));
  return success();
}

/// tile.dot on CUDA cores: both operands staged in shared memory, then a
/// loop over K of outer products into the accumulator registers.
struct DotLowering : TilePattern<DotOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(DotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    KernelState &ks = state.get(op);
    if (auto mma = dyn_cast<MmaLayoutAttr>(getLayout(op.getAcc().getType()))) {
      if (usesWgmma(op, state))
        return lowerWgmmaDot(op, adaptor.getLhs(), adaptor.getRhs(),
                             adaptor.getAcc(), mma, ks, rewriter,
                             vectorType(op.getAcc().getType()),
                             state.asyncOperands.lookup(op));
      return lowerMmaDot(op, adaptor.getLhs(), adaptor.getRhs(), adaptor.getAcc(),
                         mma, ks, rewriter, vectorType(op.getAcc().getType()),
                         state.asyncOperands.lookup(op));
    }
    RankedTensorType lhsType = op.getLhs().getType();
    RankedTensorType rhsType = op.getRhs().getType();
    RankedTensorType accType = op.getAcc().getType();
    int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
            n = rhsType.getDimSize(1);
    Type inElement = lhsType.getElementType();
    Type accElement = accType.getElementType();
    int64_t pad = smemPad(inElement);
    int64_t lhsBytes = llvm::alignTo(m * (k + pad) * storageBits(inElement) / 8, 16);
    barrier(rewriter, loc);
    storeTileToShared(rewriter, loc, ks, lhsType, adaptor.getLhs(), {m, k}, pad);
    storeTileToShared(rewriter, loc, ks, rhsType, adaptor.getRhs(), {k, n}, pad,
                      lhsBytes);
    barrier(rewriter, loc);

    TileCoords coords = emitCoords(rewriter, loc, accType, ks);
    SmallVector<Value> acc = unpack(rewriter, loc, adaptor.getAcc());
    // Distinct rows and columns of this thread's accumulator registers.
    SmallVector<int64_t> rows, cols;
    SmallVector<unsigned> rowOf, colOf;
    for (const SmallVector<int64_t> &o : coords.offsets) {
      SmallVector<int64_t> w = wrap(o, accType.getShape());
      auto r = llvm::find(rows, w[0]);
      if (r == rows.end())
        rows.push_back(w[0]), r = rows.end() - 1;
      auto c = llvm::find(cols, w[1]);
      if (c == cols.end())
        cols.push_back(w[1]), c = cols.end() - 1;
      rowOf.push_back(r - rows.begin());
      colOf.push_back(c - cols.begin());
    }
    SmallVector<Value> rowCoord(rows.size()), colCoord(cols.size());
    for (auto [i, o] : llvm::enumerate(coords.offsets)) {
      rowCoord[rowOf[i]] = coords.coords[i][0];
      colCoord[colOf[i]] = coords.coords[i][1];
    }
    Value lb = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, k);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, step, acc,
        [&](OpBuilder &b, Location, Value kk, ValueRange iter) {
          Value k32 = arith::IndexCastOp::create(b, loc, b.getI32Type(), kk);
          auto read = [&](Value row, Value col, int64_t cols, int64_t base) {
            Value index = arith::AddIOp::create(
                b, loc,
                arith::MulIOp::create(b, loc, row, i32Const(b, loc, cols + pad)),
                col);
            Value ptr = sharedPtr(b, loc, ks, inElement, index, base);
            Value v = LLVM::LoadOp::create(b, loc, inElement, ptr);
            if (v.getType() != accElement)
              v = arith::ExtFOp::create(b, loc, accElement, v);
            return v;
          };
          SmallVector<Value> a, bv;
          for (Value r : rowCoord)
            a.push_back(read(r, k32, k, 0));
          for (Value c : colCoord)
            bv.push_back(read(k32, c, n, lhsBytes));
          SmallVector<Value> next;
          for (auto [i, v] : llvm::enumerate(iter))
            next.push_back(math::FmaOp::create(b, loc, a[rowOf[i]], bv[colOf[i]], v));
          scf::YieldOp::create(b, loc, next);
        });
    rewriter.replaceOp(op, pack(rewriter, loc, vectorType(accType),
                                SmallVector<Value>(loop.getResults())));
    return success();
  }
};

/// An f32 division that may be approximate (`fastmath<afn>`, Triton's `/`):
/// PTX's div.full.f32 (2 ulp over the full range) instead of the IEEE
/// div.rn.f32, whose slow path costs registers and a branch. Only in
/// kernels: host code keeps LLVM's own lowering.
bool isApproxDivision(Operation *op) {
  auto div = dyn_cast<arith::DivFOp>(op);
  return div && getElementTypeOrSelf(div.getType()).isF32() &&
         arith::bitEnumContainsAll(div.getFastmath(), arith::FastMathFlags::afn) &&
         (op->getParentOfType<KernelOp>() || op->getParentOfType<gpu::GPUFuncOp>());
}

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
  case P::slt: return P::sgt;
  case P::sgt: return P::slt;
  case P::sle: return P::sge;
  case P::sge: return P::sle;
  case P::ult: return P::ugt;
  case P::ugt: return P::ult;
  case P::ule: return P::uge;
  case P::uge: return P::ule;
  default: return pred;
  }
}

/// How many consecutive elements (along the layout's contiguous dimension)
/// share the result of `cmp`, an `iota (+ splat) < splat` comparison as in
/// masks: each thread's contiguous elements start at a multiple of the run
/// and the bound is a multiple of it too, so one compare serves the run
/// (Triton's axis analysis calls this constancy). 1 when nothing is known.
int64_t uniformCompareRun(arith::CmpIOp cmp) {
  auto type = dyn_cast<RankedTensorType>(cmp.getLhs().getType());
  if (!type || type.getRank() != 1 || !isLayout(type.getEncoding()))
    return 1;
  // What divides every element of a tile that holds one value (0: not such
  // a tile): a splat of a scalar, or a splat constant.
  auto uniformDivisor = [](Value v) -> int64_t {
    if (auto splat = v.getDefiningOp<SplatOp>())
      return knownDivisor(splat.getValue());
    DenseIntElementsAttr dense;
    if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
      return powerOfTwoDivisor(dense.getSplatValue<APInt>().getSExtValue());
    return 0;
  };
  // The run along which an iota-based index is contiguous and aligned.
  auto iotaAlignment = [&](Value v) -> int64_t {
    Operation *op = v.getDefiningOp();
    if (isa_and_nonnull<IotaOp>(op))
      return int64_t(1) << 30;
    if (!isa_and_nonnull<arith::AddIOp>(op))
      return 0;
    for (int i = 0; i < 2; ++i)
      if (op->getOperand(i).getDefiningOp<IotaOp>())
        return uniformDivisor(op->getOperand(1 - i));
    return 0;
  };
  arith::CmpIPredicate pred = cmp.getPredicate();
  int64_t alignment = iotaAlignment(cmp.getLhs());
  int64_t bound = uniformDivisor(cmp.getRhs());
  if (!alignment || !bound) {
    // `bound > index` is `index < bound`.
    alignment = iotaAlignment(cmp.getRhs());
    bound = uniformDivisor(cmp.getLhs());
    pred = swapped(pred);
  }
  using P = arith::CmpIPredicate;
  if (!alignment || !bound ||
      !llvm::is_contained({P::slt, P::ult, P::sge, P::uge}, pred))
    return 1;
  auto [dim, elems] = contiguity(type.getEncoding());
  int64_t run = std::min({alignment, bound, int64_t(elems & -elems)});
  return type.getDimSize(0) % run == 0 ? run : 1;
}

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
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(), resultTypes)))
      return failure();
    Location loc = op->getLoc();
    auto cmp = dyn_cast<arith::CmpIOp>(op);
    if (int64_t run = state.compareRuns.lookup(op); cmp && run > 1) {
      // One compare per run of equal results.
      auto type = cast<RankedTensorType>(cmp.getLhs().getType());
      SmallVector<SmallVector<int64_t>> offsets =
          getRegisterOffsets(type.getEncoding(), type.getShape());
      SmallVector<Value> lhs = unpack(rewriter, loc, operands[0]);
      SmallVector<Value> rhs = unpack(rewriter, loc, operands[1]);
      llvm::DenseMap<int64_t, Value> byRun;
      SmallVector<Value> results;
      for (auto [r, offset] : llvm::enumerate(offsets)) {
        int64_t key = wrap(offset, type.getShape())[0] / run;
        Value &result = byRun[key];
        if (!result)
          result = arith::CmpIOp::create(rewriter, loc, cmp.getPredicate(),
                                         lhs[r], rhs[r]);
        results.push_back(result);
      }
      rewriter.replaceOp(op, pack(rewriter, loc, cast<VectorType>(resultTypes[0]),
                                  results));
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
        if (isa<math::ExpOp>(op) && vt.getElementType().isF32()) {
          // e^x = 2^(x log2 e): one multiply and ex2.approx, as Triton and
          // CUDA's __expf do, instead of libdevice's exact expf.
          Value log2e = arith::ConstantOp::create(
              rewriter, loc, rewriter.getF32FloatAttr(1.4426950408889634f));
          Value scaled = arith::MulFOp::create(rewriter, loc, scalars[0], log2e);
          results.push_back(math::Exp2Op::create(rewriter, loc, scaled));
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

//===----------------------------------------------------------------------===//
// Shared memory size
//===----------------------------------------------------------------------===//

/// Bytes of shared memory an op needs while it runs (0 for most).
int64_t scratchBytes(Operation *op, const LoweringState &state) {
  auto bytesOf = [](RankedTensorType t, int64_t pad) {
    return paddedElements(t.getShape(), pad) * storageBits(t.getElementType()) / 8;
  };
  if (auto convert = dyn_cast<ConvertLayoutOp>(op)) {
    RankedTensorType t = convert.getSource().getType();
    return bytesOf(t, smemPad(t.getElementType()));
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return bytesOf(reshape.getSource().getType(), 0);
  // The scalar fallback of a load or store (see scalarFallbackTile).
  if (auto it = state.accesses.find(op);
      it != state.accesses.end() && it->second.fallback)
    return fallbackStagingBytes(it->second.fallback);
  if (auto dot = dyn_cast<DotOp>(op)) {
    RankedTensorType l = dot.getLhs().getType(), r = dot.getRhs().getType();
    if (usesWgmma(dot, state))
      return wgmmaOperandOffset(dot, 1) +
             wgmmaOperandBytes(r.getDimSize(0), r.getDimSize(1) * 2);
    if (isa<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return mmaOperandOffset(dot, 1) + bytesOf(r, kMmaSmemPad);
    int64_t pad = smemPad(l.getElementType());
    return llvm::alignTo(bytesOf(l, pad), 16) + bytesOf(r, pad);
  }
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    auto in = cast<RankedTensorType>(reduce.getOperands()[0].getType());
    auto blocked = dyn_cast_if_present<BlockedLayoutAttr>(in.getEncoding());
    if (!blocked)
      return 0;
    int64_t axis = reduce.getAxis();
    int64_t resultElems = in.getNumElements() / in.getDimSize(axis);
    int64_t bytes = 0;
    for (Value operand : reduce.getOperands())
      bytes += llvm::alignTo(blocked.getWarpsPerCTA()[axis] * resultElems *
                                 storageBits(cast<RankedTensorType>(operand.getType())
                                                 .getElementType()) /
                                 8,
                             16);
    return bytes;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// The oldest PTX ISA version (x10) that supports `chip` (sm_XX[a|f]), at
/// least 8.0; std::nullopt for a name that is not sm_<number>.
std::optional<unsigned> minimumPtxVersion(StringRef chip) {
  unsigned sm = 0;
  if (!chip.consume_front("sm_") ||
      chip.take_while(llvm::isDigit).getAsInteger(10, sm))
    return std::nullopt;
  switch (sm) {
  case 100:
  case 101:
    return 86;
  case 120:
    return 87;
  case 103:
  case 121:
    return 88;
  case 110:
    return 90;
  default:
    return sm > 90 ? 88 : 80;
  }
}

/// Picks the tensor-core dot operands (mma.sync or wgmma) that a tile.load
/// copies from global memory straight into the dot's staging area with
/// cp.async (as Triton does): no
/// registers hold them on the way and one instruction moves 16 bytes. The
/// load must be the operand's only producer in the dot's block, proven
/// aligned with whole 16-byte runs along the rows (no scalar tail or
/// fallback), padded with zeros (cp.async zero-fills what it skips), and no
/// op between it and the dot may use shared memory (it would overwrite the
/// staging area).
void planAsyncCopies(KernelOp kernel, LoweringState &state) {
  kernel.walk([&](DotOp dot) {
    if (!isa_and_present<MmaLayoutAttr>(getLayout(dot.getAcc().getType())))
      return;
    SmallVector<std::pair<LoadOp, unsigned>> copies;
    for (unsigned operand = 0; operand < 2; ++operand) {
      auto load = dot->getOperand(operand).getDefiningOp<LoadOp>();
      if (!load || !load->hasOneUse() || load->getBlock() != dot->getBlock())
        continue;
      const AccessFacts &facts = state.accesses[load];
      RankedTensorType tile = load.getResult().getType();
      auto padding = dyn_cast<FloatAttr>(load.getPaddingOrZero());
      if (!facts.aligned || !facts.wholeRuns || facts.fallback ||
          facts.plan.dim != 1 ||
          facts.plan.elems * storageBits(tile.getElementType()) != 128 ||
          !padding || !padding.getValue().isZero())
        continue;
      bool clobbered = false;
      for (Operation *op = load->getNextNode(); op != dot && !clobbered;
           op = op->getNextNode())
        clobbered = op->walk([&](Operation *nested) {
                        return scratchBytes(nested, state) > 0
                                   ? WalkResult::interrupt()
                                   : WalkResult::advance();
                      }).wasInterrupted();
      if (!clobbered)
        copies.push_back({load, operand});
    }
    if (copies.empty())
      return;
    llvm::sort(copies, [](auto &a, auto &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    unsigned mask = 0;
    for (auto [i, copy] : llvm::enumerate(copies)) {
      state.asyncCopies[copy.first] = {dot, copy.second, /*barrier=*/i == 0};
      mask |= 1u << copy.second;
    }
    state.asyncOperands[dot] = mask;
  });
}

/// LLVM's NVPTX back end miscompiles fptoui/fptosi to i1 (it tests the
/// float's bits for zero, even at -O0): they convert to i32, then truncate.
void widenFloatToBoolCasts(KernelOp kernel) {
  kernel.walk([](Operation *op) {
    if (!isa<arith::FPToUIOp, arith::FPToSIOp>(op) ||
        !getElementTypeOrSelf(op->getResult(0).getType()).isInteger(1))
      return;
    OpBuilder b(op);
    Type boolType = op->getResult(0).getType();
    Type wideType = b.getI32Type();
    if (auto tile = dyn_cast<RankedTensorType>(boolType))
      wideType = tile.clone(wideType);
    OperationState state(op->getLoc(), op->getName(), op->getOperands(),
                         {wideType}, op->getAttrs());
    Value wide = b.create(state)->getResult(0);
    op->getResult(0).replaceAllUsesWith(
        arith::TruncIOp::create(b, op->getLoc(), boolType, wide));
    op->erase();
  });
}

/// math.absi has no lowering on the NVVM path (convert-gpu-to-nvvm maps
/// float math to libdevice only): max(x, 0 - x), which wraps at the most
/// negative value as torch.abs does.
void expandIntegerAbs(KernelOp kernel) {
  kernel.walk([](math::AbsIOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value x = op.getOperand();
    Value zero = arith::ConstantOp::create(
        b, loc, cast<TypedAttr>(b.getZeroAttr(x.getType())));
    Value negated = arith::SubIOp::create(b, loc, zero, x);
    op.replaceAllUsesWith(arith::MaxSIOp::create(b, loc, x, negated).getResult());
    op.erase();
  });
}

/// LLVM's description of the NVPTX target (its chips and features), or
/// null if the back end is not linked in.
std::unique_ptr<llvm::MCSubtargetInfo> nvptxSubtargetInfo() {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  return std::unique_ptr<llvm::MCSubtargetInfo>(
      target->createMCSubtargetInfo(triple, "", ""));
}

struct ConvertTileToNVVM
    : tileopt::impl::ConvertTileToNVVMBase<ConvertTileToNVVM> {
  using Base::Base;

  /// The PTX features to target: the option, or the chip's minimum version.
  /// The chip and every feature must be ones LLVM's NVPTX back end knows (it
  /// ignores unknown ones with a warning, or asserts on malformed ones).
  FailureOr<std::string> ptxFeatures(ModuleOp module) {
    std::optional<unsigned> minimum = minimumPtxVersion(chip);
    std::unique_ptr<llvm::MCSubtargetInfo> nvptx = nvptxSubtargetInfo();
    if (!minimum || (nvptx && !nvptx->isCPUStringValid(chip))) {
      module.emitError("convert-tile-to-nvvm: chip must be an NVIDIA GPU that "
                       "LLVM knows, like sm_80 or sm_90a, got '")
          << chip << "'";
      return failure();
    }
    for (StringRef feature : llvm::split(StringRef(features), ',')) {
      if (feature.empty())
        continue;
      StringRef name = feature.drop_front();
      bool known = nvptx && llvm::any_of(nvptx->getAllProcessorFeatures(),
                                         [&](const llvm::SubtargetFeatureKV &kv) {
                                           return name == kv.Key;
                                         });
      if ((feature.front() != '+' && feature.front() != '-') || !known) {
        module.emitError("convert-tile-to-nvvm: '")
            << feature << "' in features '" << features
            << "' is not an NVPTX feature like +ptx80 (PTX 8.0)";
        return failure();
      }
    }
    if (features.empty())
      return "+ptx" + std::to_string(*minimum);
    // LLVM aborts on a PTX version too old for the chip: say it instead.
    StringRef text = features;
    unsigned version = 0;
    size_t at = text.find("+ptx");
    if (at != StringRef::npos &&
        !text.drop_front(at + 4).take_while(llvm::isDigit).getAsInteger(10, version) &&
        version < *minimum) {
      module.emitError("convert-tile-to-nvvm: PTX ")
          << version / 10 << "." << version % 10 << " (features '" << features
          << "') cannot target " << chip << ", which needs PTX " << *minimum / 10
          << "." << *minimum % 10 << " or newer";
      return failure();
    }
    return std::string(features);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<KernelOp> kernels(module.getOps<KernelOp>());
    if (kernels.empty())
      return;
    if (failed(verifyDimIndices(module)))
      return signalPassFailure();

    // Every tile must have a layout; sizes are read from constant dimensions.
    WalkResult missing = module.walk([&](Operation *op) -> WalkResult {
      if (auto dim = dyn_cast<memref::DimOp>(op);
          dim && !dim.getConstantIndex() && op->getParentOfType<KernelOp>()) {
        op->emitOpError("needs a constant dimension index in a tile.kernel");
        return WalkResult::interrupt();
      }
      for (Type t : llvm::concat<const Type>(op->getOperandTypes(),
                                             op->getResultTypes()))
        if (auto tensor = dyn_cast<RankedTensorType>(t))
          if (!isLayout(tensor.getEncoding())) {
            op->emitOpError("has a tile without a layout (")
                << t << "); run tile-assign-layouts first";
            return WalkResult::interrupt();
          }
      return WalkResult::advance();
    });
    if (missing.wasInterrupted())
      return signalPassFailure();

    // Float multiplies and adds may fuse into fma (LLVM's NVPTX back end
    // fuses what carries `contract`).
    if (fpFusion)
      for (KernelOp kernel : kernels)
        kernel.walk([&](arith::ArithFastMathInterface op) {
          if (!isa<arith::AddFOp, arith::SubFOp, arith::MulFOp>(op))
            return;
          auto flags = op->getAttrOfType<arith::FastMathFlagsAttr>(
              op.getFastMathAttrName());
          arith::FastMathFlags value =
              flags ? flags.getValue() : arith::FastMathFlags::none;
          op->setAttr(op.getFastMathAttrName(),
                      arith::FastMathFlagsAttr::get(
                          ctx, value | arith::FastMathFlags::contract));
        });

    OpBuilder builder(ctx);
    builder.setInsertionPointToEnd(module.getBody());
    FailureOr<std::string> ptx = ptxFeatures(module);
    if (failed(ptx))
      return signalPassFailure();
    auto nvvmTarget = NVVM::NVVMTargetAttr::get(ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda",
                                            chip, *ptx);
    // The kernels go into this module (KernelLowering finds it by name).
    gpu::GPUModuleOp::create(builder, module.getLoc(), kGpuModuleName,
                             builder.getArrayAttr({nvvmTarget}));
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());

    LoweringState state;
    state.wgmma = hasWgmma(chip);
    for (KernelOp kernel : kernels)
      state.numWarps[kernel.getSymName()] = kernel.getNumWarps().value_or(4);

    for (KernelOp kernel : kernels) {
      widenFloatToBoolCasts(kernel);
      expandIntegerAbs(kernel);
    }

    // Masks compared once per run of equal elements.
    for (KernelOp kernel : kernels)
      kernel.walk([&](arith::CmpIOp cmp) {
        if (int64_t run = uniformCompareRun(cmp); run > 1)
          state.compareRuns[cmp] = run;
      });

    for (KernelOp kernel : kernels)
      markNarrowLoops(kernel);

    // What each load and store may assume.
    for (KernelOp kernel : kernels)
      kernel.walk([&](Operation *op) {
        if (std::optional<AccessOperands> access = accessOperands(op))
          state.accesses[op] = analyzeAccess(*access);
      });
    for (KernelOp kernel : kernels)
      planAsyncCopies(kernel, state);

    // Shared memory per kernel: the largest scratch any op needs. Static
    // shared memory is limited to 48 KiB on every chip.
    constexpr int64_t kMaxStaticShared = 48 * 1024;
    llvm::StringMap<int64_t> sharedBytes;
    for (KernelOp kernel : kernels) {
      int64_t bytes = 0;
      WalkResult tooLarge = kernel.walk([&](Operation *op) {
        int64_t need = scratchBytes(op, state);
        if (need > kMaxStaticShared) {
          op->emitOpError("needs ")
              << need << " bytes of shared memory to stage its tiles, more than "
              << "the " << kMaxStaticShared
              << " a kernel can have statically; use smaller tiles";
          return WalkResult::interrupt();
        }
        bytes = std::max(bytes, need);
        return WalkResult::advance();
      });
      if (tooLarge.wasInterrupted())
        return signalPassFailure();
      sharedBytes[kernel.getSymName()] = bytes;
    }

    TileTypeConverter converter(ctx);
    ConversionTarget target(*ctx);
    target.addLegalDialect<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect,
                           vector::VectorDialect, scf::SCFDialect,
                           arith::ArithDialect, math::MathDialect>();
    target.addIllegalDialect<TileDialect>();
    target.addLegalDialect<memref::MemRefDialect>();
    target.addIllegalOp<memref::DimOp>();
    target.addDynamicallyLegalOp<memref::LoadOp, memref::StoreOp>([](Operation *op) {
      return !op->getParentOfType<KernelOp>() && !op->getParentOfType<gpu::GPUFuncOp>();
    });
    auto legalTypes = [&](Operation *op) {
      return converter.isLegal(op) && !isApproxDivision(op);
    };
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
        legalTypes);
    RewritePatternSet patterns(ctx);
    patterns.add<KernelLowering, ReturnLowering,
                 GridLowering<ProgramIdOp, gpu::BlockIdOp>,
                 GridLowering<NumProgramsOp, gpu::GridDimOp>, DimLowering,
                 ElementAccessLowering<memref::LoadOp>,
                 ElementAccessLowering<memref::StoreOp>,
                 LoadLowering, StoreLowering, GatherLowering, SplatLowering,
                 IotaLowering,
                 ConstantLowering, BroadcastLowering, ExpandDimsLowering,
                 PermuteLowering, StageThroughShared<ConvertLayoutOp>,
                 StageThroughShared<ReshapeOp>, ReduceLowering, DotLowering,
                 LaunchLowering>(
        converter, ctx, state);
    patterns.add<ElementwiseLowering>(converter, ctx, state);
    patterns.add<ApproxDivisionLowering>(converter, ctx);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    module.walk([](scf::ForOp loop) {
      if (loop->hasAttr(kNarrowLoopAttr))
        narrowInductionVariable(loop);
    });

    // Size each kernel's shared memory now that its users exist.
    for (auto &[func, ks] : state.kernels) {
      auto gpuFunc = cast<gpu::GPUFuncOp>(func);
      int64_t bytes = sharedBytes.lookup(gpuFunc.getName());
      ks.sharedMemory.setGlobalTypeAttr(TypeAttr::get(
          LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), std::max<int64_t>(bytes, 0))));
      ks.sharedMemory.setAlignment(ks.sharedAlignment);
      gpuFunc->setAttr("tile.shared_bytes", builder.getI64IntegerAttr(bytes));
      if (bytes == 0)
        ks.sharedMemory.erase();
    }
  }
};

} // namespace
