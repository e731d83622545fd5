//===- LinalgToTile.cpp - kernels and a host function from linalg ---------===//
//
// Turns each fusion group that tile-form-kernels marked (`tile.group`,
// `tile.space`) into a `tile.kernel`, and the function into a host function
// on memrefs: allocations for the values that leave a kernel, strided views
// (`memref.reinterpret_cast`) for the operands of each launch, and
// `tile.launch` ops in an order that respects the kernels' dependences.
//
// Inside a kernel, every value is a tile over the group's iteration space
// (one dimension per space dimension, of the block size where the value
// spans it, else 1), so the scalar ops of linalg bodies apply to whole tiles
// after broadcasts. A program owns one block of the parallel dimensions and
// the whole extent of the reduced ones; contractions loop over k with
// `tile.dot`.
//
//===----------------------------------------------------------------------===//

#include "AttentionMask.h"
#include "AttentionSoftmax.h"
#include "Formation.h"
#include "tileopt/Conversion/Passes.h"
#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

namespace tileopt {
#define GEN_PASS_DEF_CONVERTLINALGTOTILE
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;
using namespace mlir::linalg;
using namespace tileopt;
using namespace tileopt::formation;

namespace {

/// Where a tensor value lives on the host: a buffer and a view of it.
struct Buffer {
  Value root; // a memref with the identity layout (argument, alloc, global)
  StridedLayout layout;
};

/// A value in a kernel: a tile of rank S (the space's rank) spanning some
/// space dimensions, or a scalar (spans nothing, `scalar` set).
struct TileValue {
  Value value;
  llvm::SmallBitVector spans;
  bool scalar = false;
};

/// A key naming a view of a buffer.
std::string viewKey(Value root, const StridedLayout &layout) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << root.getAsOpaquePointer() << ":" << layout.offset;
  for (auto [size, stride] : llvm::zip(layout.sizes, layout.strides))
    os << "," << size << "x" << stride;
  return key;
}

/// `layout` without the dimensions in `dropped` (each of size 1).
StridedLayout dropDims(const StridedLayout &layout,
                       const llvm::SmallBitVector &dropped) {
  StridedLayout kept;
  kept.offset = layout.offset;
  for (unsigned s = 0; s < layout.sizes.size(); ++s) {
    if (dropped.test(s))
      continue;
    kept.sizes.push_back(layout.sizes[s]);
    kept.strides.push_back(layout.strides[s]);
  }
  return kept;
}

Type kernelElementType(Type t) {
  return t.isIndex() ? IntegerType::get(t.getContext(), 64) : t;
}

std::string describe(GenericOp op, GenericKind kind) {
  std::string body;
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (isa<arith::ConstantOp, IndexOp>(inner))
      continue;
    StringRef name = inner.getName().stripDialect();
    if (!body.empty())
      body += "+";
    body += name.str();
  }
  switch (kind) {
  case GenericKind::Contraction:
    return "matmul";
  case GenericKind::Reduction:
    return "reduce(" + body + ")";
  case GenericKind::Fill:
    return "fill";
  default:
    return body.empty() ? "copy" : body;
  }
}

/// Blocks along a contraction's m that a group of programs takes
/// (writeProgramOffsets).
constexpr int64_t kGroupBlocks = 8;

/// The group's schedule: block sizes, warps and programs.
struct Tiling {
  SmallVector<int64_t> block;
  int64_t numWarps = 4;
  /// The software-pipelining depth of a contraction's loop over k
  /// (tile.num_stages; 0: the lowering's num-stages option).
  int64_t numStages = 0;
  /// The space dimension whose blocks consecutive programs take (-1: the
  /// innermost), and one that groups of kGroupBlocks of its blocks take
  /// with it (-1: none).
  int64_t fastest = -1, grouped = -1;
  int64_t programs = 1;
  SmallVector<int64_t> counts; // programs along each space dimension
  /// Reduced dimensions longer than their block: programs loop over them.
  llvm::SmallBitVector chunked;
};

/// A contraction's operands as the kernel reads them: views `[batch...,
/// rows, cols]` (`aArg` is null for an lhs computed in the kernel) and the
/// space dimensions of its m, n and k.
struct MatmulOperands {
  OpOperand *lhs = nullptr, *rhs = nullptr;
  Value aArg, bArg;
  Type aElt, bElt, dotElt;
  SmallVector<Value> batchOffsets;
  SmallVector<int64_t> batchSpans;
  int64_t sm = -1, sn = -1, sk = -1;
};

/// A value that leaves its kernel, stored through `hostView`.
struct PendingStore {
  Value result;
  Value hostView;
};

class Converter {
public:
  Converter(ModuleOp module, func::FuncOp func, bool allowTf32)
      : module(module), func(func), builder(func), allowTf32(allowTf32) {}
  LogicalResult run();

private:
  // Host.
  ModuleOp module;
  func::FuncOp func;
  OpBuilder builder;
  func::FuncOp host;
  DenseMap<Value, Buffer> buffers;
  int numGlobals = 0;
  bool allowTf32;

  // The groups, in the order of their first op.
  /// The groups' ops (generics, and reshapes of their values in registers)
  /// in program order, by group.
  llvm::MapVector<int64_t, SmallVector<Operation *>> groups;

  LogicalResult emitGroup(int64_t id, ArrayRef<Operation *> members);
  void promiseLayout(BlockArgument arg, Value hostView);
  DenseMap<Value, SmallVector<NamedAttribute>> promises;
  Value viewOf(const Buffer &buffer, const StridedLayout &layout);
  llvm::StringMap<Value> views; // by buffer and layout
  Buffer &bufferFor(Value v);
  bool isVirtual(Value v) const;
  bool ready(Operation *op) const;
};

bool Converter::isVirtual(Value v) const {
  return static_cast<bool>(getScalarSource(v)) ||
         v.getDefiningOp<tensor::EmptyOp>();
}

/// The buffer of `v`, a global for a constant that has none yet.
Buffer &Converter::bufferFor(Value v) {
  auto it = buffers.find(v);
  if (it != buffers.end())
    return it->second;
  // A constant (dense, or torch-mlir's dense_resource blob of a non-splat
  // tensor such as the indices of an aten.index), or a splat read by
  // something other than a kernel.
  ElementsAttr dense;
  auto type = cast<RankedTensorType>(v.getType());
  auto memType = MemRefType::get(type.getShape(), type.getElementType());
  if (v.getDefiningOp<tensor::EmptyOp>()) {
    // Read as a value (a result of the function): its contents are undefined,
    // so any buffer (the frontend returns tensors with no elements this way).
    Value alloc = memref::AllocOp::create(builder, v.getLoc(), memType,
                                          builder.getI64IntegerAttr(64));
    return buffers[v] = {alloc, StridedLayout::contiguous(type.getShape())};
  }
  if (!matchPattern(v, m_Constant(&dense))) {
    Value scalar = getScalarSource(v);
    Attribute attr;
    if (scalar && matchPattern(scalar, m_Constant(&attr)))
      dense = DenseElementsAttr::get(type, attr);
  }
  if (!dense) { // never for ops tile-form-kernels accepted
    static Buffer none;
    return none;
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  std::string name = "__constant_" + std::to_string(numGlobals++);
  memref::GlobalOp::create(b, v.getLoc(), name, b.getStringAttr("private"),
                           memType, dense, /*constant=*/true,
                           /*alignment=*/b.getI64IntegerAttr(64));
  Value root = memref::GetGlobalOp::create(builder, v.getLoc(), memType, name);
  return buffers[v] = {root, StridedLayout::contiguous(type.getShape())};
}

Value Converter::viewOf(const Buffer &buffer, const StridedLayout &layout) {
  // One view per buffer and layout, so a kernel that reads it in several
  // loops takes it as one argument.
  Value &cached = views[viewKey(buffer.root, layout)];
  if (cached)
    return cached;
  // Roots have the identity layout (offset 0), so views are static.
  Location loc = buffer.root.getLoc();
  auto rootType = cast<MemRefType>(buffer.root.getType());
  auto type =
      MemRefType::get(layout.sizes, rootType.getElementType(),
                      StridedLayoutAttr::get(builder.getContext(),
                                             layout.offset, layout.strides));
  SmallVector<OpFoldResult> sizes, strides;
  for (int64_t n : layout.sizes)
    sizes.push_back(builder.getIndexAttr(n));
  for (int64_t n : layout.strides)
    strides.push_back(builder.getIndexAttr(n));
  return cached = memref::ReinterpretCastOp::create(
             builder, loc, type, buffer.root,
             builder.getIndexAttr(layout.offset), sizes, strides);
}

bool Converter::ready(Operation *op) const {
  for (Value v : op->getOperands())
    if (isa<RankedTensorType>(v.getType()) && !buffers.count(v) &&
        !isVirtual(v) && !matchPattern(v, m_Constant()))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Kernel bodies
//===----------------------------------------------------------------------===//

class KernelWriter {
public:
  KernelWriter(tile::KernelOp kernel, ArrayRef<int64_t> space,
               const Tiling &tiling, llvm::SmallBitVector squeezed)
      : kernel(kernel), space(space), tiling(tiling),
        squeezed(std::move(squeezed)),
        b(OpBuilder::atBlockBegin(&kernel.getBody().front())) {}

  /// Host values passed to each kernel argument, in order.
  SmallVector<Value> launchArgs;
  /// f32 dots may round their inputs to tf32 (ConvertLinalgToTile's option).
  bool allowTf32 = false;
  /// Makes a host `index` constant (for launch arguments).
  std::function<Value(int64_t)> hostIndex;
  /// The tiles of the group's values.
  DenseMap<Value, TileValue> values;

  void writeProgramOffsets();
  LogicalResult writeOp(GenericOp op, GenericKind kind,
                        std::function<Value(Value, const StridedLayout &)> view,
                        std::function<const Buffer *(Value)> bufferOf);
  void store(Value result, Value hostView);
  LogicalResult
  writeChunked(ArrayRef<Operation *> members,
               function_ref<GenericKind(GenericOp)> kindOf,
               ArrayRef<PendingStore> stores,
               std::function<Value(Value, const StridedLayout &)> view,
               std::function<const Buffer *(Value)> bufferOf);
  LogicalResult
  writeAttention(ArrayRef<Operation *> members,
                 function_ref<GenericKind(GenericOp)> kindOf,
                 ArrayRef<PendingStore> stores,
                 std::function<Value(Value, const StridedLayout &)> view,
                 std::function<const Buffer *(Value)> bufferOf);

  /// The input precision of a dot on `lhs`: tf32 for f32 inputs if allowed.
  tile::InputPrecisionAttr dotPrecision(Value lhs) {
    if (!allowTf32 || !getElementTypeOrSelf(lhs.getType()).isF32())
      return nullptr;
    return tile::InputPrecisionAttr::get(b.getContext(),
                                         tile::InputPrecision::tf32);
  }

  RankedTensorType tileType(const llvm::SmallBitVector &spans, Type element) {
    SmallVector<int64_t> shape;
    for (unsigned s = 0; s < space.size(); ++s)
      if (!squeezed.test(s))
        shape.push_back(spans.test(s) ? tiling.block[s] : 1);
    return RankedTensorType::get(shape, kernelElementType(element));
  }

private:
  tile::KernelOp kernel;
  ArrayRef<int64_t> space;
  const Tiling &tiling;
  /// Space dimensions that tiles and views leave out (squeezedDims).
  llvm::SmallBitVector squeezed;
  OpBuilder b;
  SmallVector<Value> offsets;       // per space dimension, index
  IRMapping captured;               // scalars cloned from the host function
  llvm::StringMap<TileValue> loads; // operand tiles by value and view
  /// A host view of a value's buffer with the given layout.
  std::function<Value(Value, const StridedLayout &)> viewFor;
  /// Set while writing one chunk of a row: reductions yield the chunk's
  /// partial result, without their initial value.
  bool partialReductions = false;

  Value index(int64_t v) {
    return arith::ConstantIndexOp::create(b, kernel.getLoc(), v);
  }
  /// The offsets of a tile of `spans` in a view of the space.
  SmallVector<Value> tileOffsets(const llvm::SmallBitVector &spans) {
    SmallVector<Value> at;
    for (unsigned s = 0; s < space.size(); ++s)
      if (!squeezed.test(s))
        at.push_back(spans.test(s) ? offsets[s] : index(0));
    return at;
  }
  Value addArgument(Value hostView);
  Value extent(int64_t s);
  Value viewExtent(int64_t s, Value view);
  DenseMap<int64_t, Value> extents; // by space dimension
  /// The space dimension of each position tile that indexTile made.
  DenseMap<Value, int64_t> positions;
  TileValue load(Value hostView, const llvm::SmallBitVector &spans, Type elt);
  TileValue broadcastTo(TileValue v, const llvm::SmallBitVector &spans,
                        Location loc);
  Value materialize(TileValue v, const llvm::SmallBitVector &spans,
                    Location loc);
  FailureOr<TileValue> scalarFromHost(Value v, Location loc);
  TileValue indexTile(int64_t spaceDim, Location loc);
  FailureOr<TileValue>
  operandTile(GenericOp op, OpOperand &operand, ArrayRef<int64_t> opSpace,
              std::function<Value(Value, const StridedLayout &)> view,
              std::function<const Buffer *(Value)> bufferOf);
  FailureOr<TileValue> applyElementwise(Operation &inner,
                                        ArrayRef<TileValue> operands);
  FailureOr<TileValue> applyAffine(AffineExpr e, ArrayRef<TileValue> operands,
                                   unsigned numDims, Location loc);
  FailureOr<TileValue> gather(tensor::ExtractOp extract,
                              function_ref<FailureOr<TileValue>(Value)> lookup,
                              std::function<const Buffer *(Value)> bufferOf);
  Value padWithIdentity(Value t, const llvm::SmallBitVector &full,
                        const llvm::SmallBitVector &dims, TypedAttr identity,
                        Location loc);
  SmallVector<Value> reduceAlong(
      SmallVector<Value> tiles, llvm::SmallBitVector &spans,
      const llvm::SmallBitVector &dims,
      function_ref<SmallVector<Value>(OpBuilder &, ValueRange, ValueRange)>
          combine,
      Location loc);
  TileValue reduce(TileValue v, Operation *combiner,
                   const llvm::SmallBitVector &dims, Location loc);
  std::pair<TileValue, TileValue> reduceArg(TileValue v, TileValue index,
                                            Operation *combiner,
                                            const llvm::SmallBitVector &dims,
                                            Location loc);
  FailureOr<TileValue>
  combineInit(GenericOp op, OpOperand &init, TileValue result,
              ArrayRef<int64_t> opSpace,
              std::function<Value(Value, const StridedLayout &)> view,
              std::function<const Buffer *(Value)> bufferOf);
  llvm::SmallBitVector resultSpans(GenericOp op, OpOperand &init,
                                   ArrayRef<int64_t> opSpace);
  LogicalResult
  writeChunkLoop(ArrayRef<Operation *> members,
                 function_ref<GenericKind(GenericOp)> kindOf,
                 const llvm::SmallDenseSet<Operation *> &rowWide,
                 ArrayRef<GenericOp> reductions, ArrayRef<PendingStore> stores,
                 std::function<Value(Value, const StridedLayout &)> view,
                 std::function<const Buffer *(Value)> bufferOf);
  FailureOr<MatmulOperands>
  matmulOperands(GenericOp op, ArrayRef<int64_t> opSpace, bool lhsInRegisters,
                 std::function<Value(Value, const StridedLayout &)> view,
                 std::function<const Buffer *(Value)> bufferOf);
  Value loadMatmulOperand(const MatmulOperands &mm, bool lhs, Value row,
                          Value col, int64_t rows, int64_t cols, Location loc);
  FailureOr<TileValue>
  matmulResult(GenericOp op, ArrayRef<int64_t> opSpace,
               const MatmulOperands &mm, Value acc,
               std::function<Value(Value, const StridedLayout &)> view,
               std::function<const Buffer *(Value)> bufferOf);
  LogicalResult
  writeContraction(GenericOp op, ArrayRef<int64_t> opSpace,
                   std::function<Value(Value, const StridedLayout &)> view,
                   std::function<const Buffer *(Value)> bufferOf);
};

void KernelWriter::writeProgramOffsets() {
  Location loc = kernel.getLoc();
  Value pid = tile::ProgramIdOp::create(b, loc, 0);
  offsets.assign(space.size(), Value());
  // ceil(size / block) programs along s, from the size at run time.
  auto count = [&](int64_t s) -> Value {
    return arith::DivUIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, extent(s), index(tiling.block[s] - 1)),
        index(tiling.block[s]));
  };
  int64_t first = tiling.fastest, second = tiling.grouped;
  if (first >= 0 && second >= 0 && tiling.counts[first] > 1 &&
      tiling.counts[second] > 1) {
    // Groups of kGroupBlocks blocks along `first`, each group's programs
    // down its columns first (Triton's grouped order): a wave's programs
    // share rows of one operand and columns of the other.
    Value along = count(first), across = count(second);
    Value tiles = arith::MulIOp::create(b, loc, along, across);
    Value p = arith::RemUIOp::create(b, loc, pid, tiles);
    pid = arith::DivUIOp::create(b, loc, pid, tiles);
    Value group = index(kGroupBlocks);
    Value perGroup = arith::MulIOp::create(b, loc, across, group);
    Value start = arith::MulIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, p, perGroup), group);
    Value rows = arith::MinUIOp::create(
        b, loc, arith::SubIOp::create(b, loc, along, start), group);
    Value inGroup = arith::RemUIOp::create(b, loc, p, perGroup);
    Value i = arith::AddIOp::create(
        b, loc, start, arith::RemUIOp::create(b, loc, inGroup, rows));
    Value j = arith::DivUIOp::create(b, loc, inGroup, rows);
    // i < along and j < across, which integer range analysis cannot see
    // through the grouping: clamped to that, index tiles built from the
    // offsets (a causal mask's j - i) narrow to i32 as they do without
    // grouping (tile-narrow-integer-tiles). (A launch has programs only
    // where there are blocks: along and across are at least 1.)
    auto below = [&](Value v, Value n) {
      Value last = arith::SubIOp::create(
          b, loc, arith::MaxUIOp::create(b, loc, n, index(1)), index(1));
      return arith::MinUIOp::create(b, loc, v, last);
    };
    i = below(i, along);
    j = below(j, across);
    offsets[first] =
        arith::MulIOp::create(b, loc, i, index(tiling.block[first]));
    offsets[second] =
        arith::MulIOp::create(b, loc, j, index(tiling.block[second]));
  }
  SmallVector<int64_t> order;
  if (first >= 0)
    order.push_back(first);
  for (int64_t s = (int64_t)space.size() - 1; s >= 0; --s)
    if (s != first)
      order.push_back(s);
  for (int64_t s : order) {
    if (offsets[s])
      continue;
    if (tiling.counts[s] == 1) {
      offsets[s] = index(0);
      continue;
    }
    Value n = count(s);
    Value i = arith::RemUIOp::create(b, loc, pid, n);
    pid = arith::DivUIOp::create(b, loc, pid, n);
    offsets[s] = arith::MulIOp::create(b, loc, i, index(tiling.block[s]));
  }
}

/// The kernel argument of `hostView`: a view of its rank and element type
/// with dynamic sizes and strides (the launch passes the host's).
Value KernelWriter::addArgument(Value hostView) {
  auto hostType = cast<MemRefType>(hostView.getType());
  SmallVector<int64_t> dyn(hostType.getRank(), ShapedType::kDynamic);
  auto type = MemRefType::get(
      dyn, hostType.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, dyn));
  Block &body = kernel.getBody().front();
  for (auto [i, v] : llvm::enumerate(launchArgs))
    if (v == hostView)
      return body.getArgument(i);
  launchArgs.push_back(hostView);
  return body.addArgument(type, hostView.getLoc());
}

/// The size of space dimension `s` at run time: an `index` argument of the
/// kernel, so that a kernel is the same for every size its tiling takes
/// (the sizes are not constants in it; its grid and masks follow them).
Value KernelWriter::extent(int64_t s) {
  auto it = extents.find(s);
  if (it != extents.end())
    return it->second;
  launchArgs.push_back(hostIndex(space[s]));
  Value arg =
      kernel.getBody().front().addArgument(b.getIndexType(), kernel.getLoc());
  extents[s] = arg;
  return arg;
}

/// extent(s) as the last size of `view`, a kernel argument whose last
/// dimension is space dimension `s` (a loop over it then counts in 32 bits
/// where the view promises 32-bit indices), unless extent(s) exists already.
Value KernelWriter::viewExtent(int64_t s, Value view) {
  auto type = cast<MemRefType>(view.getType());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(view);
  auto [it, inserted] = extents.try_emplace(s, Value());
  if (inserted)
    it->second =
        memref::DimOp::create(b, view.getLoc(), view, type.getRank() - 1);
  return it->second;
}

TileValue KernelWriter::load(Value hostView, const llvm::SmallBitVector &spans,
                             Type elt) {
  Location loc = hostView.getLoc();
  Value arg = addArgument(hostView);
  Value t = tile::LoadOp::create(b, loc, tileType(spans, elt), arg,
                                 tileOffsets(spans), /*padding=*/nullptr);
  return {t, spans};
}

TileValue KernelWriter::broadcastTo(TileValue v,
                                    const llvm::SmallBitVector &spans,
                                    Location loc) {
  if (v.scalar)
    return v;
  if (v.spans == spans)
    return v;
  Type elt = cast<RankedTensorType>(v.value.getType()).getElementType();
  if (tileType(spans, elt) == v.value.getType())
    return {v.value, spans}; // only dimensions with blocks of 1 differ
  Value t = tile::BroadcastOp::create(b, loc, tileType(spans, elt), v.value);
  return {t, spans};
}

/// A tile of `spans` holding `v` (a splat for a scalar).
Value KernelWriter::materialize(TileValue v, const llvm::SmallBitVector &spans,
                                Location loc) {
  if (v.scalar)
    return tile::SplatOp::create(b, loc, tileType(spans, v.value.getType()),
                                 v.value);
  return broadcastTo(v, spans, loc).value;
}

/// A scalar of the host function used in a body: cloned into the kernel.
FailureOr<TileValue> KernelWriter::scalarFromHost(Value v, Location loc) {
  if (Value mapped = captured.lookupOrNull(v))
    return TileValue{mapped, llvm::SmallBitVector(space.size()), true};
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return emitError(loc) << "unsupported: a scalar that is not a constant "
                             "(a value read from a tensor on the host)";
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&kernel.getBody().front());
  Type type = kernelElementType(getElementTypeOrSelf(v.getType()));
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) // a splat tensor
    attr = dense.getSplatValue<Attribute>();
  if (v.getType().isIndex())
    attr = b.getI64IntegerAttr(cast<IntegerAttr>(attr).getInt());
  Value c = arith::ConstantOp::create(b, loc, type, cast<TypedAttr>(attr));
  captured.map(v, c);
  return TileValue{c, llvm::SmallBitVector(space.size()), true};
}

TileValue KernelWriter::indexTile(int64_t s, Location loc) {
  llvm::SmallBitVector spans(space.size());
  if (s < 0) {
    Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
    return {zero, spans, true};
  }
  spans.set(s);
  int64_t n = tiling.block[s];
  Value iota =
      tile::IotaOp::create(b, loc, RankedTensorType::get({n}, b.getI32Type()));
  Value wide = arith::ExtSIOp::create(
      b, loc, RankedTensorType::get({n}, b.getI64Type()), iota);
  Value off = arith::IndexCastOp::create(b, loc, b.getI64Type(), offsets[s]);
  Value offTile = tile::SplatOp::create(
      b, loc, RankedTensorType::get({n}, b.getI64Type()), off);
  Value t = arith::AddIOp::create(b, loc, wide, offTile);
  // Along one of the tile's last two dimensions, through the matrix [1, n]
  // or [n, 1]: a tensor-core layout of scores then holds the positions in
  // place (a mask needs no conversion of the scores).
  RankedTensorType type = tileType(spans, b.getI64Type());
  int64_t rank = type.getRank(), at = 0; // s's dimension of the tile
  for (int64_t d = 0; d < s; ++d)
    at += squeezed.test(d) ? 0 : 1;
  if (rank >= 2 && at >= rank - 2) {
    int64_t axis = at == rank - 1 ? 0 : 1;
    SmallVector<int64_t> matrix = {1, 1};
    matrix[1 - axis] = n;
    t = tile::ExpandDimsOp::create(
        b, loc, RankedTensorType::get(matrix, b.getI64Type()), t,
        b.getI64IntegerAttr(axis));
  }
  if (t.getType() != type)
    t = tile::ReshapeOp::create(b, loc, type, t);
  positions[t] = s;
  return {t, spans};
}

FailureOr<TileValue> KernelWriter::operandTile(
    GenericOp op, OpOperand &operand, ArrayRef<int64_t> opSpace,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  Value v = operand.get();
  Location loc = op.getLoc();
  if (!isa<RankedTensorType>(v.getType()))
    return scalarFromHost(v, loc);
  auto it = values.find(v);
  if (it != values.end())
    return it->second;
  if (Value scalar = getScalarSource(v))
    return scalarFromHost(scalar, loc);
  const Buffer *buffer = bufferOf(v);
  if (!buffer)
    return emitError(loc) << "unsupported: a linalg.generic that reads an "
                             "uninitialized tensor (tensor.empty)";
  // The operand's buffer seen over the space: its dimensions where the
  // indexing map puts them, size 1 and stride 0 elsewhere.
  StridedLayout layout;
  layout.offset = buffer->layout.offset;
  layout.sizes.assign(space.size(), 1);
  layout.strides.assign(space.size(), 0);
  llvm::SmallBitVector spans(space.size());
  AffineMap map = op.getMatchingIndexingMap(&operand);
  for (auto [j, e] : llvm::enumerate(map.getResults())) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d || opSpace[d.getPosition()] < 0)
      continue;
    int64_t s = opSpace[d.getPosition()];
    layout.sizes[s] = buffer->layout.sizes[j];
    layout.strides[s] = buffer->layout.strides[j];
    spans.set(s);
  }
  layout = dropDims(layout, squeezed);
  // One load per buffer and view: a value read twice, or through two
  // reshapes of one buffer (softmax's input), is read once.
  std::string key = viewKey(buffer->root, layout);
  auto cached = loads.find(key);
  if (cached != loads.end())
    return cached->second;
  Value hostView = view(v, layout);
  return loads[key] = load(hostView, spans, getElementTypeOrSelf(v.getType()));
}

FailureOr<TileValue>
KernelWriter::applyElementwise(Operation &inner, ArrayRef<TileValue> operands) {
  Location loc = inner.getLoc();
  llvm::SmallBitVector spans(space.size());
  bool allScalar = true;
  for (const TileValue &v : operands) {
    spans |= v.spans;
    allScalar &= v.scalar;
  }
  SmallVector<Value> newOperands;
  for (const TileValue &v : operands)
    newOperands.push_back(allScalar ? v.value : materialize(v, spans, loc));
  auto cast = dyn_cast<arith::IndexCastOp>(inner);
  auto castUI = dyn_cast<arith::IndexCastUIOp>(inner);
  if (cast || castUI) {
    // Index values are i64 in kernels: an index cast is an integer cast.
    Type to = kernelElementType(inner.getResult(0).getType());
    Value in = newOperands[0];
    Type from = getElementTypeOrSelf(in.getType());
    Type resultType = allScalar ? to : Type(tileType(spans, to));
    unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
    Value out = in;
    if (tw < fw)
      out = arith::TruncIOp::create(b, loc, resultType, in);
    else if (tw > fw && cast)
      out = arith::ExtSIOp::create(b, loc, resultType, in);
    else if (tw > fw)
      out = arith::ExtUIOp::create(b, loc, resultType, in);
    return TileValue{out, spans, allScalar};
  }
  if (auto powi = dyn_cast<math::FPowIOp>(inner)) {
    // x ** n: multiplies for small constant n (x.pow(2)), else powf.
    APInt n;
    Value x = newOperands[0];
    if (matchPattern(powi.getRhs(), m_ConstantInt(&n)) &&
        n.getSExtValue() >= 1 && n.getSExtValue() <= 4) {
      Value r = x;
      for (int64_t i = 1; i < n.getSExtValue(); ++i)
        r = arith::MulFOp::create(b, loc, r, x);
      return TileValue{r, spans, allScalar};
    }
    Value e = arith::SIToFPOp::create(b, loc, x.getType(), newOperands[1]);
    return TileValue{math::PowFOp::create(b, loc, x, e), spans, allScalar};
  }
  // fp8 values are only converted and multiplied (tile.dot): any other op
  // on them (a cast to or from an integer, a compare with zero) runs on
  // their f32 values, exactly, and an fp8 result is rounded once.
  auto isFp8 = [](Type t) { return tile::isFp8Type(getElementTypeOrSelf(t)); };
  bool viaF32 =
      !isa<arith::ExtFOp, arith::TruncFOp, arith::SelectOp, arith::BitcastOp>(
          inner) &&
      (llvm::any_of(inner.getOperandTypes(), isFp8) ||
       llvm::any_of(inner.getResultTypes(), isFp8));
  auto withElement = [&](Type elt) -> Type {
    return allScalar ? elt : Type(tileType(spans, elt));
  };
  if (viaF32)
    for (Value &v : newOperands)
      if (isFp8(v.getType()))
        v = arith::ExtFOp::create(b, loc, withElement(b.getF32Type()), v);
  OperationState state(loc, inner.getName());
  state.addOperands(newOperands);
  state.addAttributes(inner.getAttrs());
  for (Type t : inner.getResultTypes()) {
    Type elt = kernelElementType(t);
    state.addTypes(withElement(viaF32 && isFp8(elt) ? b.getF32Type() : elt));
  }
  Operation *created = b.create(state);
  Value result = created->getResult(0);
  if (Type elt = kernelElementType(inner.getResult(0).getType());
      viaF32 && isFp8(elt))
    result = arith::TruncFOp::create(b, loc, withElement(elt), result);
  return TileValue{result, spans, allScalar};
}

FailureOr<TileValue> KernelWriter::applyAffine(AffineExpr e,
                                               ArrayRef<TileValue> operands,
                                               unsigned numDims, Location loc) {
  llvm::SmallBitVector none(space.size());
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return operands[d.getPosition()];
  if (auto sym = dyn_cast<AffineSymbolExpr>(e))
    return operands[numDims + sym.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return TileValue{
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(c.getValue())),
        none, true};
  auto bin = cast<AffineBinaryOpExpr>(e);
  FailureOr<TileValue> l = applyAffine(bin.getLHS(), operands, numDims, loc);
  FailureOr<TileValue> r = applyAffine(bin.getRHS(), operands, numDims, loc);
  if (failed(l) || failed(r))
    return failure();
  llvm::SmallBitVector spans = l->spans;
  spans |= r->spans;
  bool scalar = l->scalar && r->scalar;
  Value x = scalar ? l->value : materialize(*l, spans, loc);
  Value y = scalar ? r->value : materialize(*r, spans, loc);
  Value v;
  switch (e.getKind()) {
  case AffineExprKind::Add:
    v = arith::AddIOp::create(b, loc, x, y);
    break;
  case AffineExprKind::Mul:
    v = arith::MulIOp::create(b, loc, x, y);
    break;
  case AffineExprKind::FloorDiv:
    v = arith::FloorDivSIOp::create(b, loc, x, y);
    break;
  case AffineExprKind::CeilDiv:
    v = arith::CeilDivSIOp::create(b, loc, x, y);
    break;
  case AffineExprKind::Mod:
    v = arith::RemSIOp::create(b, loc, x, y); // indices are non-negative
    break;
  default: {
    std::string text;
    llvm::raw_string_ostream(text) << e;
    return emitError(loc) << "unsupported: affine expression " << text;
  }
  }
  return TileValue{v, spans, scalar};
}

/// A tensor.extract in a body, at indices computed per element: a
/// tile.gather from the whole tensor's buffer (out-of-bounds elements read 0
/// rather than fail torch-mlir's assert).
FailureOr<TileValue>
KernelWriter::gather(tensor::ExtractOp extract,
                     function_ref<FailureOr<TileValue>(Value)> lookup,
                     std::function<const Buffer *(Value)> bufferOf) {
  Location loc = extract.getLoc();
  Value tensor = extract.getTensor();
  const Buffer *buffer = bufferOf(tensor);
  if (!buffer)
    return emitError(loc) << "unsupported: a gather from an uninitialized "
                             "tensor";
  SmallVector<TileValue> indices;
  llvm::SmallBitVector spans(space.size());
  for (Value i : extract.getIndices()) {
    FailureOr<TileValue> t = lookup(i);
    if (failed(t))
      return failure();
    indices.push_back(*t);
    spans |= t->spans;
  }
  auto type = cast<RankedTensorType>(tensor.getType());
  Type elt = type.getElementType();
  if (indices.empty()) { // a 0-d tensor: one element
    indices.push_back(
        {arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)), spans,
         true});
    StridedLayout one;
    one.offset = buffer->layout.offset;
    one.sizes = {1};
    one.strides = {1};
    Value arg = addArgument(viewFor(tensor, one));
    Value idx = materialize(indices[0], spans, loc);
    return TileValue{tile::GatherOp::create(b, loc, tileType(spans, elt), arg,
                                            ValueRange{idx}, nullptr),
                     spans};
  }
  Value arg = addArgument(viewFor(tensor, buffer->layout));
  SmallVector<Value> tiles;
  for (const TileValue &i : indices)
    tiles.push_back(materialize(i, spans, loc));
  return TileValue{
      tile::GatherOp::create(b, loc, tileType(spans, elt), arg, tiles, nullptr),
      spans};
}

/// `t` (over `full`) with the padding along the reduced `dims` replaced by
/// the combiner's `identity`.
Value KernelWriter::padWithIdentity(Value t, const llvm::SmallBitVector &full,
                                    const llvm::SmallBitVector &dims,
                                    TypedAttr identity, Location loc) {
  Value mask;
  for (int s : dims.set_bits()) {
    // Whole blocks have no padding; an empty dimension has nothing else.
    if (space[s] != 0 && space[s] % tiling.block[s] == 0)
      continue;
    llvm::SmallBitVector one(space.size());
    one.set(s);
    int64_t n = tiling.block[s];
    Value iota = tile::IotaOp::create(
        b, loc, RankedTensorType::get({n}, b.getI32Type()));
    // Elements left in the row from this block on.
    Value left = arith::IndexCastOp::create(b, loc, b.getI32Type(), extent(s));
    if (tiling.chunked.test(s))
      left = arith::SubIOp::create(
          b, loc, left,
          arith::IndexCastOp::create(b, loc, b.getI32Type(), offsets[s]));
    Value limit = tile::SplatOp::create(
        b, loc, RankedTensorType::get({n}, b.getI32Type()), left);
    Value in =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iota, limit);
    in = tile::ReshapeOp::create(b, loc, tileType(one, b.getI1Type()), in);
    in = tile::BroadcastOp::create(b, loc, tileType(full, b.getI1Type()), in);
    mask = mask ? arith::AndIOp::create(b, loc, mask, in).getResult() : in;
  }
  if (!mask)
    return t;
  Value splat =
      tile::SplatOp::create(b, loc, tileType(full, identity.getType()),
                            arith::ConstantOp::create(b, loc, identity));
  return arith::SelectOp::create(b, loc, mask, t, splat);
}

/// `tiles` (over `spans`, which loses them) reduced along each of `dims`: one
/// tile.reduce of all of them per dimension, whose combiner `combine` makes
/// from the accumulated scalars and the new ones.
SmallVector<Value> KernelWriter::reduceAlong(
    SmallVector<Value> tiles, llvm::SmallBitVector &spans,
    const llvm::SmallBitVector &dims,
    function_ref<SmallVector<Value>(OpBuilder &, ValueRange, ValueRange)>
        combine,
    Location loc) {
  SmallVector<Type> elts;
  for (Value t : tiles)
    elts.push_back(getElementTypeOrSelf(t.getType()));
  for (int s : dims.set_bits()) {
    spans.reset(s);
    auto shape = llvm::to_vector(
        cast<RankedTensorType>(tiles.front().getType()).getShape());
    shape.erase(shape.begin() + s);
    SmallVector<Type> reduced;
    for (Type elt : elts)
      reduced.push_back(RankedTensorType::get(shape, elt));
    auto r = tile::ReduceOp::create(b, loc, reduced, tiles, s);
    Block *block = new Block();
    r.getCombiner().push_back(block);
    SmallVector<Value> sofar, next;
    for (Type elt : elts)
      sofar.push_back(block->addArgument(elt, loc));
    for (Type elt : elts)
      next.push_back(block->addArgument(elt, loc));
    OpBuilder rb = OpBuilder::atBlockBegin(block);
    tile::YieldOp::create(rb, loc, combine(rb, sofar, next));
    for (auto [i, elt] : llvm::enumerate(elts))
      tiles[i] = tile::ExpandDimsOp::create(b, loc, tileType(spans, elt),
                                            r.getResult(i), s);
  }
  return tiles;
}

TileValue KernelWriter::reduce(TileValue v, Operation *combiner,
                               const llvm::SmallBitVector &dims, Location loc) {
  llvm::SmallBitVector spans = v.spans;
  spans |= dims;
  Value t = padWithIdentity(materialize(v, spans, loc), spans, dims,
                            getCombinerIdentity(combiner), loc);
  auto combine = [&](OpBuilder &rb, ValueRange sofar, ValueRange next) {
    IRMapping m;
    m.map(combiner->getOperand(0), sofar[0]);
    m.map(combiner->getOperand(1), next[0]);
    return SmallVector<Value>(rb.clone(*combiner, m)->getResults());
  };
  return {reduceAlong({t}, spans, dims, combine, loc).front(), spans};
}

/// The (value, index) pair of (a, ai) and (bv, bi) that an arg reduction
/// whose values `combiner` combines keeps, in PyTorch's order: the greater
/// value (a max) or the lesser, in the combiner's order (signed or not; a
/// NaN first for arith.maximumf and arith.minimumf, last for the NaN-ignoring
/// ones), and of equal values the first index. On scalars or tiles alike.
static std::pair<Value, Value> combineArg(OpBuilder &b, Location loc, Value a,
                                          Value ai, Value bv, Value bi,
                                          Operation *combiner) {
  bool max = keepsGreater(combiner);
  Value wins, tie;
  if (isa<FloatType>(getElementTypeOrSelf(a.getType()))) {
    using P = arith::CmpFPredicate;
    auto cmp = [&](P p, Value x, Value y) -> Value {
      return arith::CmpFOp::create(b, loc, p, x, y);
    };
    // Which NaN beats the other value: b's (propagating), or a's.
    bool propagates = isa<arith::MaximumFOp, arith::MinimumFOp>(combiner);
    Value nan = propagates ? cmp(P::UNO, bv, bv) : cmp(P::UNO, a, a);
    Value other = propagates ? cmp(P::ORD, a, a) : cmp(P::ORD, bv, bv);
    wins = arith::OrIOp::create(b, loc, cmp(max ? P::OGT : P::OLT, bv, a),
                                arith::AndIOp::create(b, loc, nan, other));
    tie = arith::OrIOp::create(
        b, loc, cmp(P::OEQ, bv, a),
        arith::AndIOp::create(b, loc, cmp(P::UNO, bv, bv), cmp(P::UNO, a, a)));
  } else {
    using P = arith::CmpIPredicate;
    bool isUnsigned = isa<arith::MaxUIOp, arith::MinUIOp>(combiner);
    P order =
        max ? (isUnsigned ? P::ugt : P::sgt) : (isUnsigned ? P::ult : P::slt);
    wins = arith::CmpIOp::create(b, loc, order, bv, a);
    tie = arith::CmpIOp::create(b, loc, P::eq, bv, a);
  }
  Value earlier =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, bi, ai);
  Value take = arith::OrIOp::create(
      b, loc, wins, arith::AndIOp::create(b, loc, tie, earlier));
  return {arith::SelectOp::create(b, loc, take, bv, a),
          arith::SelectOp::create(b, loc, take, bi, ai)};
}

/// An arg reduction (getArgReduction) of `v` and its `index` tile along
/// the space dimensions `dims`: a tile.reduce of both per dimension (the
/// positions order the ties across dimensions too).
std::pair<TileValue, TileValue>
KernelWriter::reduceArg(TileValue v, TileValue index, Operation *combiner,
                        const llvm::SmallBitVector &dims, Location loc) {
  llvm::SmallBitVector spans = v.spans;
  spans |= index.spans;
  spans |= dims;
  // Padding never wins: it is the identity, at positions past the row's.
  Value t = padWithIdentity(materialize(v, spans, loc), spans, dims,
                            getCombinerIdentity(combiner), loc);
  Value i = materialize(index, spans, loc);
  auto combine = [&](OpBuilder &rb, ValueRange sofar, ValueRange next) {
    auto [kept, keptIndex] =
        combineArg(rb, loc, sofar[0], sofar[1], next[0], next[1], combiner);
    return SmallVector<Value>{kept, keptIndex};
  };
  SmallVector<Value> r = reduceAlong({t, i}, spans, dims, combine, loc);
  return {{r[0], spans}, {r[1], spans}};
}

FailureOr<MatmulOperands> KernelWriter::matmulOperands(
    GenericOp op, ArrayRef<int64_t> opSpace, bool lhsInRegisters,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  Location loc = op.getLoc();
  ContractionDimensions dims = *getContractionDims(op);
  MatmulOperands mm;
  unsigned m = dims.m[0], n = dims.n[0], k = dims.k[0];
  mm.sm = opSpace[m];
  mm.sn = opSpace[n];
  mm.sk = opSpace[k];
  // The operand with loop m is the lhs.
  mm.lhs = op.getDpsInputOperand(0);
  mm.rhs = op.getDpsInputOperand(1);
  auto usesLoop = [&](OpOperand *o, unsigned d) {
    return op.getMatchingIndexingMap(o)
        .getResultPosition(getAffineDimExpr(d, op.getContext()))
        .has_value();
  };
  if (!usesLoop(mm.lhs, m))
    std::swap(mm.lhs, mm.rhs);
  // Views [batch..., rows, cols] of the operands, in their own order.
  SmallVector<int64_t> loops = getLoopSizes(op);
  auto operandView = [&](OpOperand *o,
                         ArrayRef<unsigned> order) -> FailureOr<Value> {
    if (getScalarSource(o->get()) || values.count(o->get()))
      return emitError(loc) << "unsupported: a matmul operand computed in the "
                               "same kernel or a constant tensor";
    const Buffer *buffer = bufferOf(o->get());
    if (!buffer)
      return emitError(loc) << "unsupported: a matmul of an uninitialized "
                               "tensor";
    AffineMap map = op.getMatchingIndexingMap(o);
    StridedLayout layout;
    layout.offset = buffer->layout.offset;
    // A batch loop the operand does not have reads it broadcast: stride 0
    // over the loop's extent (grouped-query attention's key heads).
    for (unsigned d : order) {
      std::optional<unsigned> j =
          map.getResultPosition(getAffineDimExpr(d, op.getContext()));
      layout.sizes.push_back(j ? buffer->layout.sizes[*j] : loops[d]);
      layout.strides.push_back(j ? buffer->layout.strides[*j] : 0);
    }
    return view(o->get(), layout);
  };
  SmallVector<unsigned> aOrder(dims.batch.begin(), dims.batch.end());
  SmallVector<unsigned> bOrder = aOrder;
  aOrder.append({m, k});
  bOrder.append({k, n});
  mm.aElt = getElementTypeOrSelf(mm.lhs->get().getType());
  mm.bElt = getElementTypeOrSelf(mm.rhs->get().getType());
  if (!lhsInRegisters) {
    FailureOr<Value> aView = operandView(mm.lhs, aOrder);
    if (failed(aView))
      return failure();
    mm.aArg = addArgument(*aView);
  }
  FailureOr<Value> bView = operandView(mm.rhs, bOrder);
  if (failed(bView))
    return failure();
  mm.bArg = addArgument(*bView);
  for (unsigned d : dims.batch)
    mm.batchOffsets.push_back(opSpace[d] >= 0 ? offsets[opSpace[d]] : index(0));
  // fp8 dots take either format on either side: neither is widened.
  bool fp8 = tile::isFp8Type(mm.aElt) && tile::isFp8Type(mm.bElt);
  mm.dotElt = mm.aElt == mm.bElt || fp8 ? mm.aElt : b.getF32Type();
  for (unsigned d : dims.batch)
    if (opSpace[d] >= 0)
      mm.batchSpans.push_back(opSpace[d]);
  return mm;
}

/// A `rows x cols` tile of a matmul operand at (`row`, `col`), in the type
/// the dot takes.
Value KernelWriter::loadMatmulOperand(const MatmulOperands &mm, bool lhs,
                                      Value row, Value col, int64_t rows,
                                      int64_t cols, Location loc) {
  Value arg = lhs ? mm.aArg : mm.bArg;
  Type elt = lhs ? mm.aElt : mm.bElt;
  SmallVector<Value> at = mm.batchOffsets;
  at.append({row, col});
  SmallVector<int64_t> shape(mm.batchOffsets.size(), 1);
  shape.append({rows, cols});
  Value t = tile::LoadOp::create(b, loc, RankedTensorType::get(shape, elt), arg,
                                 at, nullptr);
  t = tile::ReshapeOp::create(b, loc, RankedTensorType::get({rows, cols}, elt),
                              t);
  if (elt != mm.dotElt && !(tile::isFp8Type(elt) && tile::isFp8Type(mm.dotElt)))
    t = arith::ExtFOp::create(
        b, loc, RankedTensorType::get({rows, cols}, mm.dotElt), t);
  return t;
}

/// The f32 (for i8 operands, i32) `rows x cols` result of a matmul as a tile
/// over the space, in the result's element type, plus the op's accumulator
/// when that is not zero.
FailureOr<TileValue> KernelWriter::matmulResult(
    GenericOp op, ArrayRef<int64_t> opSpace, const MatmulOperands &mm,
    Value acc, std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  Location loc = op.getLoc();
  auto shape = cast<RankedTensorType>(acc.getType()).getShape();
  Type outElt = getElementTypeOrSelf(op.getResult(0).getType());
  if (outElt != getElementTypeOrSelf(acc.getType())) // f16/bf16 from f32
    acc = arith::TruncFOp::create(b, loc, RankedTensorType::get(shape, outElt),
                                  acc);
  llvm::SmallBitVector spans(space.size());
  spans.set(mm.sm);
  spans.set(mm.sn);
  for (int64_t s : mm.batchSpans)
    spans.set(s); // blocks of 1: offsets for the stores
  if (mm.sn < mm.sm)
    acc = tile::PermuteOp::create(
        b, loc, RankedTensorType::get({shape[1], shape[0]}, outElt), acc,
        b.getDenseI64ArrayAttr({1, 0}));
  RankedTensorType type = tileType(spans, outElt);
  TileValue result{acc.getType() == type
                       ? acc
                       : tile::ReshapeOp::create(b, loc, type, acc).getResult(),
                   spans};
  // An accumulator that is not zero adds in.
  OpOperand *init = op.getDpsInitOperand(0);
  if (isZeroTensor(init->get()))
    return result;
  FailureOr<TileValue> initTile =
      operandTile(op, *init, opSpace, view, bufferOf);
  if (failed(initTile))
    return failure();
  return applyElementwise(*getCombiner(op, 0),
                          getCombiner(op, 0)->getOperand(0) ==
                                  op.getRegionOutputArgs()[0]
                              ? SmallVector<TileValue>{*initTile, result}
                              : SmallVector<TileValue>{result, *initTile});
}

LogicalResult KernelWriter::writeContraction(
    GenericOp op, ArrayRef<int64_t> opSpace,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  Location loc = op.getLoc();
  FailureOr<MatmulOperands> mm =
      matmulOperands(op, opSpace, /*lhsInRegisters=*/false, view, bufferOf);
  if (failed(mm))
    return failure();
  ContractionDimensions dims = *getContractionDims(op);
  int64_t bm = tiling.block[mm->sm], bn = tiling.block[mm->sn],
          bk = tiling.block[mm->sk];
  // An f32 accumulator, or i32 for i8 operands (tile.dot's two forms).
  Type accElt = mm->dotElt.isSignlessInteger(8) ? Type(b.getI32Type())
                                                : Type(b.getF32Type());
  auto acc0 = tile::SplatOp::create(
      b, loc, RankedTensorType::get({bm, bn}, accElt),
      arith::ConstantOp::create(b, loc, b.getZeroAttr(accElt)));
  Value k = mm->sk >= 0 ? viewExtent(mm->sk, mm->aArg) : index(1);
  auto loop =
      scf::ForOp::create(b, loc, index(0), k, index(bk), ValueRange{acc0});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kk = loop.getInductionVar();
    Value a = loadMatmulOperand(*mm, true, offsets[mm->sm], kk, bm, bk, loc);
    Value bt = loadMatmulOperand(*mm, false, kk, offsets[mm->sn], bk, bn, loc);
    Value acc = tile::DotOp::create(b, loc, a, bt, loop.getRegionIterArgs()[0],
                                    dotPrecision(a));
    scf::YieldOp::create(b, loc, acc);
  }
  FailureOr<TileValue> result =
      matmulResult(op, opSpace, *mm, loop.getResult(0), view, bufferOf);
  if (failed(result))
    return failure();
  values[op.getResult(0)] = *result;
  return success();
}

LogicalResult
KernelWriter::writeOp(GenericOp op, GenericKind kind,
                      std::function<Value(Value, const StridedLayout &)> view,
                      std::function<const Buffer *(Value)> bufferOf) {
  auto opSpace = getSpace(op);
  viewFor = view;
  if (kind == GenericKind::Contraction)
    return writeContraction(op, opSpace, view, bufferOf);
  Block *body = op.getBody();
  DenseMap<Value, TileValue> local;
  // Block arguments: the operands' tiles (outputs only where the body reads
  // them outside a combiner).
  llvm::SmallPtrSet<Operation *, 4> combiners;
  SmallVector<ArgReduction> args;
  if (kind == GenericKind::Reduction)
    for (unsigned i = 0; i < op.getNumDpsInits(); ++i) {
      if (Operation *c = getCombiner(op, i)) {
        combiners.insert(c);
      } else if (std::optional<ArgReduction> arg = getArgReduction(op, i)) {
        combiners.insert(arg->compare);
        combiners.insert(arg->select);
        args.push_back(*arg);
      }
    }
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    bool used = llvm::any_of(arg.getUsers(), [&](Operation *u) {
      return !op.isDpsInit(&operand) || !combiners.contains(u);
    });
    if (!used)
      continue;
    FailureOr<TileValue> t = operandTile(op, operand, opSpace, view, bufferOf);
    if (failed(t))
      return failure();
    local[arg] = *t;
  }
  auto lookup = [&](Value v) -> FailureOr<TileValue> {
    auto it = local.find(v);
    if (it != local.end())
      return it->second;
    return scalarFromHost(v, op.getLoc());
  };
  for (Operation &inner : body->without_terminator()) {
    if (combiners.contains(&inner))
      continue;
    if (auto c = dyn_cast<arith::ConstantOp>(inner)) {
      FailureOr<TileValue> t = scalarFromHost(c, inner.getLoc());
      if (failed(t))
        return failure();
      local[c] = *t;
      continue;
    }
    if (auto idx = dyn_cast<IndexOp>(inner)) {
      local[idx] = indexTile(opSpace[idx.getDim()], inner.getLoc());
      continue;
    }
    if (isa<cf::AssertOp>(inner))
      continue; // tile.gather checks its bounds
    if (auto extract = dyn_cast<tensor::ExtractOp>(inner)) {
      FailureOr<TileValue> t = gather(extract, lookup, bufferOf);
      if (failed(t))
        return failure();
      local[extract] = *t;
      continue;
    }
    if (auto apply = dyn_cast<affine::AffineApplyOp>(inner)) {
      // Index arithmetic (a loop split by reshape propagation), on i64.
      SmallVector<TileValue> operands;
      for (Value v : apply.getOperands()) {
        FailureOr<TileValue> t = lookup(v);
        if (failed(t))
          return failure();
        operands.push_back(*t);
      }
      FailureOr<TileValue> r =
          applyAffine(apply.getAffineMap().getResult(0), operands,
                      apply.getAffineMap().getNumDims(), inner.getLoc());
      if (failed(r))
        return failure();
      local[apply] = *r;
      continue;
    }
    SmallVector<TileValue> operands;
    for (Value v : inner.getOperands()) {
      FailureOr<TileValue> t = lookup(v);
      if (failed(t))
        return failure();
      operands.push_back(*t);
    }
    FailureOr<TileValue> r = applyElementwise(inner, operands);
    if (failed(r))
      return failure();
    local[inner.getResult(0)] = *r;
  }
  auto yield = cast<YieldOp>(body->getTerminator());
  // The space dimensions a reduction reduces.
  llvm::SmallBitVector dims(space.size());
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (!isParallel(it) && opSpace[d] >= 0)
      dims.set(opSpace[d]);
  // Arg reductions reduce their value and index outputs together (their
  // initial values are the identity and ignored).
  for (const ArgReduction &arg : args) {
    Operation *c = getCombiner(op, arg.value);
    BlockArgument out = op.getRegionOutputArgs()[arg.value];
    FailureOr<TileValue> v =
        lookup(c->getOperand(0) == out ? c->getOperand(1) : c->getOperand(0));
    FailureOr<TileValue> index =
        lookup(cast<arith::SelectOp>(arg.select).getTrueValue());
    if (failed(v) || failed(index))
      return failure();
    auto [value, position] = reduceArg(*v, *index, c, dims, op.getLoc());
    for (auto [i, t] : {std::pair(arg.value, value), {arg.index, position}}) {
      llvm::SmallBitVector spans =
          resultSpans(op, op.getDpsInitsMutable()[i], opSpace);
      values[op.getResult(i)] = {materialize(t, spans, op.getLoc()), spans};
    }
  }
  for (OpOperand &init : op.getDpsInitsMutable()) {
    unsigned i = init.getOperandNumber() - op.getNumDpsInputs();
    if (llvm::any_of(args, [&](const ArgReduction &arg) {
          return arg.value == i || arg.index == i;
        }))
      continue;
    llvm::SmallBitVector spans = resultSpans(op, init, opSpace);
    TileValue result;
    if (kind == GenericKind::Reduction) {
      Operation *c = getCombiner(op, i);
      BlockArgument out = op.getRegionOutputArgs()[i];
      Value other =
          c->getOperand(0) == out ? c->getOperand(1) : c->getOperand(0);
      FailureOr<TileValue> v = lookup(other);
      if (failed(v))
        return failure();
      result = reduce(*v, c, dims, op.getLoc());
      if (!partialReductions) {
        FailureOr<TileValue> r =
            combineInit(op, init, result, opSpace, view, bufferOf);
        if (failed(r))
          return failure();
        result = *r;
      }
    } else {
      FailureOr<TileValue> v = lookup(yield.getOperand(i));
      if (failed(v))
        return failure();
      result = *v;
    }
    result = {materialize(result, spans, op.getLoc()), spans};
    values[op.getResult(i)] = result;
  }
  return success();
}

void KernelWriter::store(Value result, Value hostView) {
  Location loc = result.getLoc();
  TileValue &t = values[result];
  Value arg = addArgument(hostView);
  tile::StoreOp::create(b, loc, t.value, arg, tileOffsets(t.spans));
}

/// The dimensions of the space that result `init` of `op` spans.
llvm::SmallBitVector KernelWriter::resultSpans(GenericOp op, OpOperand &init,
                                               ArrayRef<int64_t> opSpace) {
  llvm::SmallBitVector spans(space.size());
  for (AffineExpr e : op.getMatchingIndexingMap(&init).getResults())
    if (auto d = dyn_cast<AffineDimExpr>(e); d && opSpace[d.getPosition()] >= 0)
      spans.set(opSpace[d.getPosition()]);
  return spans;
}

/// A reduction's result combined with its initial value, unless that is the
/// combiner's identity.
FailureOr<TileValue> KernelWriter::combineInit(
    GenericOp op, OpOperand &init, TileValue result, ArrayRef<int64_t> opSpace,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  unsigned i = init.getOperandNumber() - op.getNumDpsInputs();
  Operation *c = getCombiner(op, i);
  Value scalar = getScalarSource(init.get());
  Attribute attr;
  if (scalar && matchPattern(scalar, m_Constant(&attr)) &&
      attr == getCombinerIdentity(c))
    return result;
  FailureOr<TileValue> initTile =
      operandTile(op, init, opSpace, view, bufferOf);
  if (failed(initTile))
    return failure();
  bool initFirst = c->getOperand(0) == op.getRegionOutputArgs()[i];
  return applyElementwise(*c, initFirst
                                  ? SmallVector<TileValue>{*initTile, result}
                                  : SmallVector<TileValue>{result, *initTile});
}

/// A group whose rows are longer than a program holds (`tiling.chunked`):
/// values over the chunked dimensions ("row-wide") exist one chunk at a
/// time inside loops over the row. Each reduction gets a loop that
/// recomputes its row-wide inputs from the loads and the per-row values
/// known before it (softmax: a loop for the max, one for the sum of
/// exponentials, one that writes the result); values over the other
/// dimensions are written once, between the loops. Reductions that do not
/// depend on each other share a loop; the row-wide values that leave the
/// kernel are stored by a last loop.
LogicalResult KernelWriter::writeChunked(
    ArrayRef<Operation *> members, function_ref<GenericKind(GenericOp)> kindOf,
    ArrayRef<PendingStore> stores,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  viewFor = view;
  llvm::SmallDenseSet<Operation *> memberSet(members.begin(), members.end());
  llvm::SmallDenseSet<Operation *> rowWide;
  SmallVector<GenericOp> pendingReductions;
  for (Operation *member : members) {
    auto op = dyn_cast<GenericOp>(member);
    if (!op) { // a reshape of unit dimensions: row-wide with its source
      if (Operation *def = member->getOperand(0).getDefiningOp();
          def && rowWide.contains(def))
        rowWide.insert(member);
      continue;
    }
    auto opSpace = getSpace(op);
    bool parallelChunked = false, reducedChunked = false;
    for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray())) {
      if (opSpace[d] < 0 || !tiling.chunked.test(opSpace[d]))
        continue;
      (isParallel(it) ? parallelChunked : reducedChunked) = true;
    }
    if (parallelChunked && reducedChunked)
      return op.emitError("unsupported: a reduction over one dimension of a "
                          "row that is reduced over another in chunks");
    if (parallelChunked)
      rowWide.insert(op);
    else if (reducedChunked)
      pendingReductions.push_back(op);
  }
  // Whether `v` is known outside the loops.
  auto known = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !def || !memberSet.contains(def) || values.count(v);
  };
  // The values outside the loops that the row-wide closure of `v` reads.
  std::function<bool(Value)> ready = [&](Value v) -> bool {
    Operation *def = v.getDefiningOp();
    if (!def || !rowWide.contains(def))
      return known(v);
    if (auto op = dyn_cast<GenericOp>(def))
      for (Value c : getCapturedTensors(op))
        if (!ready(c))
          return false;
    return llvm::all_of(def->getOperands(), ready);
  };
  llvm::SmallDenseSet<Operation *> written;
  while (true) {
    // Everything outside the loops that can be written now.
    for (bool progress = true; progress;) {
      progress = false;
      for (Operation *member : members) {
        if (written.contains(member) || rowWide.contains(member) ||
            llvm::is_contained(pendingReductions, member) ||
            !llvm::all_of(member->getOperands(), known))
          continue;
        if (auto op = dyn_cast<GenericOp>(member)) {
          if (!llvm::all_of(getCapturedTensors(op), known))
            continue;
          if (failed(writeOp(op, kindOf(op), view, bufferOf)))
            return failure();
        } else {
          values[member->getResult(0)] = values.lookup(member->getOperand(0));
        }
        written.insert(member);
        progress = true;
      }
    }
    SmallVector<GenericOp> batch;
    for (GenericOp op : pendingReductions)
      if (llvm::all_of(op->getOperands(), ready) &&
          llvm::all_of(getCapturedTensors(op), ready))
        batch.push_back(op);
    if (batch.empty())
      break;
    if (failed(writeChunkLoop(members, kindOf, rowWide, batch, {}, view,
                              bufferOf)))
      return failure();
    for (GenericOp op : batch) {
      llvm::erase(pendingReductions, op);
      written.insert(op);
    }
  }
  if (!pendingReductions.empty())
    return pendingReductions.front().emitError(
        "kernel formation left a reduction whose row-wide inputs need its own "
        "result");
  SmallVector<PendingStore> rowWideStores;
  for (const PendingStore &store : stores) {
    Operation *def = store.result.getDefiningOp();
    if (rowWide.contains(def))
      rowWideStores.push_back(store);
    else
      this->store(store.result, store.hostView);
  }
  if (rowWideStores.empty())
    return success();
  return writeChunkLoop(members, kindOf, rowWide, {}, rowWideStores, view,
                        bufferOf);
}

/// The op of `members` with attention role `role`.
GenericOp findRole(ArrayRef<Operation *> members, StringRef role) {
  for (Operation *member : members)
    if (auto attr = member->getAttrOfType<StringAttr>(kAttentionAttr);
        attr && attr.getValue() == role)
      return cast<GenericOp>(member);
  return nullptr;
}

/// Attention (`tile.attention` roles) as one loop over blocks of keys, the
/// online softmax of flash attention: each step computes a block of scores
/// s = q k^T (q loaded once), the ops between the scores and the softmax,
/// the block's row maximum m and the running one, e = exp(x - m) (the
/// softmax's own ops), the row sums l and the output o = e v on tile.dot;
/// the running o and l are rescaled by exp(m_old - m_new). Then the step
/// goes to base 2 (softmaxInBase2). After the loop, o is multiplied by 1 / l.
/// Rows whose every key so far is masked (-inf) keep m = -inf and use 0 in
/// its place, so they add nothing; a row masked entirely ends as
/// 0 * (1 / 0) = NaN, as softmax's 0 / 0, or as 0 * 0 where the softmax is
/// torch's safe softmax (kZeroMaskedRows).
LogicalResult KernelWriter::writeAttention(
    ArrayRef<Operation *> members, function_ref<GenericKind(GenericOp)> kindOf,
    ArrayRef<PendingStore> stores,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  viewFor = view;
  GenericOp qk = findRole(members, kScores),
            rowMax = findRole(members, kRowMax),
            rowSum = findRole(members, kRowSum),
            normalize = findRole(members, kNormalize),
            pv = findRole(members, kOutput);
  Location loc = pv.getLoc();
  FailureOr<MatmulOperands> qkOps = matmulOperands(
      qk, getSpace(qk), /*lhsInRegisters=*/false, view, bufferOf);
  if (failed(qkOps))
    return failure();
  FailureOr<MatmulOperands> pvOps =
      matmulOperands(pv, getSpace(pv), /*lhsInRegisters=*/true, view, bufferOf);
  if (failed(pvOps))
    return failure();
  int64_t sm = qkOps->sm, keys = qkOps->sn;
  int64_t bm = tiling.block[sm], bn = tiling.block[keys],
          bd = tiling.block[qkOps->sk], bv = tiling.block[pvOps->sn];
  Type f32 = b.getF32Type();
  auto f32Tile = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, f32);
  };
  auto splat = [&](Type type, double v) -> Value {
    Type elt = cast<RankedTensorType>(type).getElementType();
    return tile::SplatOp::create(
        b, loc, type,
        arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, v)));
  };
  auto convert = [&](Value t, Type elt) -> Value {
    auto type = cast<RankedTensorType>(t.getType());
    if (type.getElementType() == elt)
      return t;
    auto to = RankedTensorType::get(type.getShape(), elt);
    if (elt.getIntOrFloatBitWidth() > type.getElementTypeBitWidth())
      return arith::ExtFOp::create(b, loc, to, t);
    return arith::TruncFOp::create(b, loc, to, t);
  };
  // Per-row values span the output rows (and the batch, in blocks of 1), in
  // the softmax's type.
  OpOperand &maxInit = rowMax.getDpsInitsMutable()[0];
  llvm::SmallBitVector rowSpans =
      resultSpans(rowMax, maxInit, getSpace(rowMax));
  Type rowElt = getCombiner(rowMax, 0)->getResult(0).getType();
  RankedTensorType rowType = tileType(rowSpans, rowElt);
  // A per-row tile as an f32 [bm, cols] matrix.
  auto rowsBy = [&](Value row, int64_t cols) -> Value {
    Value column = tile::ReshapeOp::create(
        b, loc, RankedTensorType::get({bm, 1}, rowElt), row);
    column = convert(column, f32);
    if (cols == 1)
      return column;
    return tile::BroadcastOp::create(b, loc, f32Tile({bm, cols}), column);
  };
  Value q = loadMatmulOperand(*qkOps, true, offsets[sm], index(0), bm, bd, loc);
  Value acc0 = splat(f32Tile({bm, bv}), 0.0);
  Value max0 = splat(rowType, -std::numeric_limits<double>::infinity());
  Value sum0 = splat(rowType, 0.0);
  auto loop =
      scf::ForOp::create(b, loc, index(0), viewExtent(keys, qkOps->bArg),
                         index(bn), ValueRange{acc0, max0, sum0});
  DenseMap<Value, TileValue> savedValues = values;
  llvm::StringMap<TileValue> savedLoads = loads;
  Value keysOffset = offsets[keys];
  auto restore = [&]() {
    values = savedValues;
    loads = savedLoads;
    offsets[keys] = keysOffset;
    b.setInsertionPointAfter(loop);
  };
  if (loop.getBody()->mightHaveTerminator())
    loop.getBody()->getTerminator()->erase();
  b.setInsertionPointToEnd(loop.getBody());
  Value kk = loop.getInductionVar();
  offsets[keys] = kk;
  Value accIn = loop.getRegionIterArgs()[0],
        maxIn = loop.getRegionIterArgs()[1],
        sumIn = loop.getRegionIterArgs()[2];
  // This block's scores.
  Value kt = loadMatmulOperand(*qkOps, false, index(0), kk, bd, bn, loc);
  Value s = tile::DotOp::create(b, loc, q, kt, splat(f32Tile({bm, bn}), 0.0),
                                dotPrecision(q));
  FailureOr<TileValue> scores =
      matmulResult(qk, getSpace(qk), *qkOps, s, view, bufferOf);
  if (failed(scores)) {
    restore();
    return failure();
  }
  values[qk.getResult(0)] = *scores;
  Value maxNext, sumNext;
  math::ExpOp alpha; // exp(m_old - m_new)
  GenericOp zeroRows = findRole(members, kZeroMaskedRows);
  // The softmax's exponentials may flush results below 2^-126 to zero
  // (`afn`: ex2.approx.ftz, one instruction instead of four): each row's
  // largest term is 1, so a flushed term cannot move its sum or output.
  auto flushing =
      arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::afn);
  Operation *exponentials =
      normalize.getDpsInputOperand(0)->get().getDefiningOp();
  while (exponentials && !isa<GenericOp>(exponentials) &&
         exponentials->getNumOperands() == 1)
    exponentials = exponentials->getOperand(0).getDefiningOp();
  SmallVector<math::ExpOp> blockExps;
  Value safeMax; // the block's row maximum, 0 in place of -inf
  for (Operation *member : members) {
    auto role = member->getAttrOfType<StringAttr>(kAttentionAttr);
    if (member == qk || member == normalize || member == zeroRows ||
        (role &&
         (role.getValue() == kMaskedRows || role.getValue() == kProbsCast)))
      continue;
    if (member == pv)
      break;
    auto op = dyn_cast<GenericOp>(member);
    if (!op) { // a reshape of unit dimensions: the same tile
      values[member->getResult(0)] = values.lookup(member->getOperand(0));
      continue;
    }
    partialReductions = op == rowMax || op == rowSum;
    Operation *last = &loop.getBody()->back();
    LogicalResult written = writeOp(op, kindOf(op), view, bufferOf);
    partialReductions = false;
    if (failed(written)) {
      restore();
      return failure();
    }
    if (op == exponentials)
      for (Operation &created : llvm::make_range(std::next(last->getIterator()),
                                                 loop.getBody()->end()))
        if (auto exp = dyn_cast<math::ExpOp>(created)) {
          exp.setFastmathAttr(flushing);
          blockExps.push_back(exp);
        }
    if (op == rowMax) {
      Value blockMax = values[rowMax.getResult(0)].value;
      maxNext = arith::MaximumFOp::create(b, loc, maxIn, blockMax);
      Value none = arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OEQ, maxNext,
          splat(rowType, -std::numeric_limits<double>::infinity()));
      Value safe =
          arith::SelectOp::create(b, loc, none, splat(rowType, 0.0), maxNext);
      alpha = math::ExpOp::create(
          b, loc, arith::SubFOp::create(b, loc, maxIn, safe), flushing);
      values[rowMax.getResult(0)] = {safe, rowSpans};
      safeMax = safe;
    } else if (op == rowSum) {
      sumNext = arith::AddFOp::create(
          b, loc, arith::MulFOp::create(b, loc, sumIn, alpha),
          values[rowSum.getResult(0)].value);
    }
  }
  // e @ v: e over [bm, bn], zero for the keys past the end (whose scores
  // came from padding).
  Value e = normalize.getDpsInputOperand(0)->get();
  TileValue eTile = values.lookup(e);
  if (!eTile.value || !alpha || !sumNext) {
    restore();
    return pv.emitError("kernel formation made an attention whose softmax "
                        "the conversion cannot follow");
  }
  llvm::SmallBitVector eSpans = rowSpans;
  eSpans.set(keys);
  Value p = materialize(eTile, eSpans, loc);
  Type eElt = cast<RankedTensorType>(p.getType()).getElementType();
  if (space[keys] % bn != 0) {
    TileValue col = indexTile(keys, loc);
    Value limit = tile::SplatOp::create(
        b, loc, cast<RankedTensorType>(col.value.getType()),
        arith::IndexCastOp::create(b, loc, b.getI64Type(), extent(keys)));
    Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                         col.value, limit);
    inside = materialize({inside, col.spans}, eSpans, loc);
    p = arith::SelectOp::create(b, loc, inside, p,
                                splat(tileType(eSpans, eElt), 0.0));
  }
  if (sm < keys) {
    p = tile::ReshapeOp::create(b, loc, RankedTensorType::get({bm, bn}, eElt),
                                p);
  } else {
    p = tile::ReshapeOp::create(b, loc, RankedTensorType::get({bn, bm}, eElt),
                                p);
    p = tile::PermuteOp::create(b, loc, RankedTensorType::get({bm, bn}, eElt),
                                p, b.getDenseI64ArrayAttr({1, 0}));
  }
  // The product in v's type (tensor cores for f16/bf16), as Triton's
  // flash attention rounds p.
  p = convert(p, pvOps->bElt);
  pvOps->aElt = pvOps->dotElt = pvOps->bElt;
  Value v = loadMatmulOperand(*pvOps, false, kk, index(0), bn, bv, loc);
  Value scaled = arith::MulFOp::create(b, loc, accIn, rowsBy(alpha, bv));
  Value accNext = tile::DotOp::create(b, loc, p, v, scaled, dotPrecision(p));
  scf::YieldOp::create(b, loc, ValueRange{accNext, maxNext, sumNext});
  // Key blocks that the mask hides from every row of the program (a causal
  // mask's past the diagonal) add nothing: the loop ends before them. Their
  // scores are -inf in the row maximum and in the exponentials exp(x - m)
  // (zeros in the row sum and the output).
  Value scoresTile = values.lookup(rowMax.getDpsInputOperand(0)->get()).value;
  auto ofScores = [&](math::ExpOp exp) {
    auto sub = exp.getOperand().getDefiningOp<arith::SubFOp>();
    if (!sub || sub.getLhs() != scoresTile)
      return false;
    Value m = sub.getRhs();
    while (
        isa_and_nonnull<tile::BroadcastOp, tile::ReshapeOp>(m.getDefiningOp()))
      m = m.getDefiningOp()->getOperand(0);
    return m == safeMax;
  };
  std::optional<KeyBound> bound;
  if (!blockExps.empty() && llvm::all_of(blockExps, ofScores)) {
    SoftmaxStep step{scoresTile, blockExps, alpha, safeMax};
    if (Value inBase2 = softmaxInBase2(b, step))
      scoresTile = inBase2;
    bound = keptKeyBound(scoresTile, positions, sm, keys);
  }
  if (bound) {
    b.setInsertionPoint(loop);
    // One past the last key that row `i` keeps (not below 0), at the row
    // of the program where that is largest or smallest.
    Value firstRow = offsets[sm];
    Value lastRow = arith::AddIOp::create(b, loc, firstRow, index(bm - 1));
    auto pastBound = [&](bool largest) -> Value {
      Value i = (bound->row >= 0) == largest ? lastRow : firstRow;
      if (bound->row != 1)
        i = arith::MulIOp::create(b, loc, i, index(bound->row));
      Value past = arith::AddIOp::create(b, loc, i, index(bound->constant + 1));
      if (bound->row < 0 || bound->constant < -1)
        past = arith::MaxSIOp::create(b, loc, past, index(0));
      return past;
    };
    Value end = arith::MinSIOp::create(b, loc, loop.getUpperBound(),
                                       pastBound(/*largest=*/true));
    loop.setUpperBound(end);
    if (bound->exact) {
      // Where the mask is exactly that bound, the blocks that every row of
      // the program sees whole need no mask: those before the smallest
      // bound, in whole blocks. The masked blocks (the diagonal's) go
      // first, then a copy of the loop without the mask continues from
      // their statistics (in that order no build spills).
      Value whole = arith::MulIOp::create(
          b, loc,
          arith::DivUIOp::create(b, loc, pastBound(/*largest=*/false),
                                 index(bn)),
          index(bn));
      whole = arith::MinSIOp::create(b, loc, whole, end);
      b.setInsertionPointAfter(loop);
      IRMapping mapping;
      auto unmasked = cast<scf::ForOp>(b.clone(*loop, mapping));
      loop.setLowerBound(whole);
      unmasked.setUpperBound(whole);
      unmasked.getInitArgsMutable().assign(loop.getResults());
      Operation *select = mapping.lookup(bound->select);
      select->getResult(0).replaceAllUsesWith(
          mapping.lookupOrDefault(bound->unmasked));
      select->erase();
      loop = unmasked;
    }
  }
  restore();
  // The output: o (1 / l), then the product's epilogue. One division per
  // row, as flash attention's (l is 0, or at least 1: the row maximum's own
  // term). A row of -inf scores has o = 0: 0 * (1 / 0) = NaN, as softmax's
  // 0 / 0, or 0 * 0 where the softmax is torch's safe softmax.
  Value sum = rowsBy(loop.getResult(2), 1);
  Value inverse =
      arith::DivFOp::create(b, loc, splat(f32Tile({bm, 1}), 1.0), sum);
  if (zeroRows) {
    Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum,
                                       splat(f32Tile({bm, 1}), 0.0));
    inverse = arith::SelectOp::create(b, loc, none,
                                      splat(f32Tile({bm, 1}), 0.0), inverse);
  }
  Value out = arith::MulFOp::create(
      b, loc, loop.getResult(0),
      tile::BroadcastOp::create(b, loc, f32Tile({bm, bv}), inverse));
  MatmulOperands outDims = *pvOps;
  FailureOr<TileValue> result =
      matmulResult(pv, getSpace(pv), outDims, out, view, bufferOf);
  if (failed(result))
    return failure();
  values[pv.getResult(0)] = *result;
  bool after = false;
  for (Operation *member : members) {
    if (member == pv) {
      after = true;
      continue;
    }
    if (!after)
      continue;
    auto op = dyn_cast<GenericOp>(member);
    if (!op) {
      values[member->getResult(0)] = values.lookup(member->getOperand(0));
      continue;
    }
    if (failed(writeOp(op, kindOf(op), view, bufferOf)))
      return failure();
  }
  for (const PendingStore &store : stores) {
    if (!values.count(store.result))
      return pv.emitError("kernel formation made an attention whose scores "
                          "or softmax leave the kernel");
    this->store(store.result, store.hostView);
  }
  return success();
}

/// One loop over the chunks of the rows: the row-wide values that
/// `reductions` and `stores` need, each reduction's partial result combined
/// into its accumulator, and the stores.
LogicalResult KernelWriter::writeChunkLoop(
    ArrayRef<Operation *> members, function_ref<GenericKind(GenericOp)> kindOf,
    const llvm::SmallDenseSet<Operation *> &rowWide,
    ArrayRef<GenericOp> reductions, ArrayRef<PendingStore> stores,
    std::function<Value(Value, const StridedLayout &)> view,
    std::function<const Buffer *(Value)> bufferOf) {
  Location loc = kernel.getLoc();
  // The row-wide members needed, by the closure of the reductions' and
  // stores' operands.
  llvm::SmallDenseSet<Operation *> needed;
  SmallVector<Value> stack;
  for (GenericOp op : reductions) {
    llvm::append_range(stack, op->getOperands());
    llvm::append_range(stack, getCapturedTensors(op));
  }
  for (const PendingStore &store : stores)
    stack.push_back(store.result);
  while (!stack.empty()) {
    Operation *def = stack.pop_back_val().getDefiningOp();
    if (!def || !rowWide.contains(def) || !needed.insert(def).second)
      continue;
    llvm::append_range(stack, def->getOperands());
    if (auto op = dyn_cast<GenericOp>(def))
      llvm::append_range(stack, getCapturedTensors(op));
  }
  // Accumulators start at the combiners' identities (an arg reduction's
  // index at 0: any element beats the identity).
  SmallVector<Value> accs;
  SmallVector<std::pair<GenericOp, unsigned>> results;
  for (GenericOp op : reductions) {
    auto opSpace = getSpace(op);
    for (OpOperand &init : op.getDpsInitsMutable()) {
      unsigned i = init.getOperandNumber() - op.getNumDpsInputs();
      Type elt = getElementTypeOrSelf(op.getResult(i).getType());
      Operation *c = getCombiner(op, i);
      TypedAttr start =
          c ? getCombinerIdentity(c) : TypedAttr(b.getIntegerAttr(elt, 0));
      accs.push_back(tile::SplatOp::create(
          b, loc, tileType(resultSpans(op, init, opSpace), elt),
          arith::ConstantOp::create(b, loc, start)));
      results.push_back({op, i});
    }
  }
  // A loop nest over the chunked dimensions, outermost first.
  DenseMap<Value, TileValue> savedValues = values;
  llvm::StringMap<TileValue> savedLoads = loads;
  SmallVector<Value> savedOffsets = offsets;
  SmallVector<scf::ForOp> loops;
  ValueRange iterArgs = accs;
  for (int s : tiling.chunked.set_bits()) {
    auto loop = scf::ForOp::create(b, loc, index(0), extent(s),
                                   index(tiling.block[s]), iterArgs);
    Block *body = loop.getBody();
    if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
      body->back().erase();
    b.setInsertionPointToEnd(body);
    offsets[s] = loop.getInductionVar();
    iterArgs = loop.getRegionIterArgs();
    loops.push_back(loop);
  }
  auto fail = [&]() {
    values = std::move(savedValues);
    loads = std::move(savedLoads);
    offsets = savedOffsets;
    b.setInsertionPointAfter(loops.front());
    return failure();
  };
  for (Operation *member : members) {
    if (!needed.contains(member))
      continue;
    if (auto op = dyn_cast<GenericOp>(member)) {
      if (failed(writeOp(op, kindOf(op), view, bufferOf)))
        return fail();
    } else {
      values[member->getResult(0)] = values.lookup(member->getOperand(0));
    }
  }
  partialReductions = true;
  for (GenericOp op : reductions)
    if (failed(writeOp(op, kindOf(op), view, bufferOf))) {
      partialReductions = false;
      return fail();
    }
  partialReductions = false;
  SmallVector<Value> next;
  // An arg reduction's (value, index) accumulators keep the extremum of the
  // earlier chunks and this one (the earlier's on a tie).
  auto accOf = [&](GenericOp op, unsigned i) {
    return iterArgs[llvm::find(results, std::pair(op, i)) - results.begin()];
  };
  DenseMap<std::pair<Operation *, unsigned>, Value> merged;
  for (GenericOp op : reductions)
    for (unsigned k = 0, e = op.getNumDpsInits(); k < e; ++k)
      if (std::optional<ArgReduction> arg = getArgReduction(op, k)) {
        TileValue value = values.lookup(op.getResult(arg->value));
        TileValue index = values.lookup(op.getResult(arg->index));
        auto [v, i] = combineArg(
            b, loc, accOf(op, arg->value), accOf(op, arg->index),
            materialize(value, value.spans, loc),
            materialize(index, value.spans, loc), getCombiner(op, arg->value));
        merged[{op, arg->value}] = v;
        merged[{op, arg->index}] = i;
      }
  for (auto [acc, result] : llvm::zip(iterArgs, results)) {
    auto [op, i] = result;
    if (Value m = merged.lookup({op.getOperation(), i})) {
      next.push_back(m);
      continue;
    }
    Operation *c = getCombiner(op, i);
    TileValue partial = values.lookup(op.getResult(i));
    TileValue sofar{acc, partial.spans};
    bool accFirst = c->getOperand(0) == op.getRegionOutputArgs()[i];
    FailureOr<TileValue> sum =
        applyElementwise(*c, accFirst ? SmallVector<TileValue>{sofar, partial}
                                      : SmallVector<TileValue>{partial, sofar});
    if (failed(sum))
      return fail();
    next.push_back(sum->value);
  }
  for (const PendingStore &store : stores)
    this->store(store.result, store.hostView);
  // Close the nest: each loop yields the next inner loop's results.
  for (auto loop : llvm::reverse(loops)) {
    b.setInsertionPointToEnd(loop.getBody());
    scf::YieldOp::create(b, loc, next);
    next = SmallVector<Value>(loop.getResults());
  }
  b.setInsertionPointAfter(loops.front());
  values = std::move(savedValues);
  loads = std::move(savedLoads);
  offsets = savedOffsets;
  for (auto [value, result] : llvm::zip(next, results)) {
    auto [op, i] = result;
    auto opSpace = getSpace(op);
    OpOperand &init = op.getDpsInitsMutable()[i];
    TileValue total{value, resultSpans(op, init, opSpace)};
    if (!getCombiner(op, i)) { // an arg reduction's index
      values[op.getResult(i)] = total;
      continue;
    }
    FailureOr<TileValue> r =
        combineInit(op, init, total, opSpace, view, bufferOf);
    if (failed(r))
      return failure();
    values[op.getResult(i)] = {materialize(*r, total.spans, loc), total.spans};
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

/// A buffer a kernel reads or writes: the space dimensions it spans and
/// its element size.
struct Access {
  llvm::SmallBitVector spans;
  int64_t bytes;
};

/// The space dimensions that a kernel's tiles and views leave out: a
/// contraction's reduced ones, where every other op of the group is an
/// epilogue that does not index them (blocks of 1 there). The epilogue then
/// keeps the dot's rank, and the accumulator's tensor-core layout, instead of
/// a reshape to the space's rank that moves it through shared memory.
llvm::SmallBitVector squeezedDims(ArrayRef<GenericOp> ops,
                                  ArrayRef<GenericKind> kinds,
                                  ArrayRef<int64_t> space,
                                  const llvm::SmallBitVector &reduced,
                                  GenericOp attention, const Tiling &tiling) {
  llvm::SmallBitVector none(space.size());
  if (attention || tiling.chunked.any())
    return none;
  int contractions = 0;
  for (auto [constOp, kind] : llvm::zip(ops, kinds)) {
    GenericOp op = constOp;
    if (kind == GenericKind::Contraction) {
      ++contractions;
      continue;
    }
    if (llvm::any_of(op.getIteratorTypesArray(),
                     [](utils::IteratorType t) { return !isParallel(t); }))
      return none;
    for (int64_t s : getSpace(op))
      if (s >= 0 && reduced.test(s))
        return none;
  }
  return contractions == 1 ? reduced : none;
}

/// Programs that fill a GPU's SMs about once (an A100 has 108, an H100 132).
constexpr int64_t kFillPrograms = 128;

/// The operand bytes of one pipeline stage of a contraction halved below
/// half a wave (64 x 64 x 256 for f16).
constexpr int64_t kHalvedStageBytes = 64 * 1024;

/// A contraction's block sizes, warps and pipeline stages. Exact f32 runs on
/// CUDA cores: 64 x 64 x 32 on 4 warps. On tensor cores (16-bit operands, or
/// f32 ones rounded to tf32), by launch size, as measured on an H100
/// (benchmarks/matmul_tflops.py, GPT-2 and LLaMA-7B layers):
/// - two waves or more of 128 x 256 blocks (n above 128): those, on 8
///   warps, 4 stages (Triton's Hopper tile);
/// - else 128 x 128 on 4 warps, 4 stages, with k steps of 128 bytes of an
///   operand row (64 halves), or 64 bytes when more than two waves of
///   programs share the SMs: smaller stages let three programs fit on one;
/// - halved while the launch has fewer than half a wave of programs, down to
///   64 x 64, with 3 stages of 64 KiB of operands (64 x 64 x 256 for f16).
/// Each block is at most the next power of two of its dimension, at least 16.
void chooseContractionTiling(Tiling &t, ArrayRef<int64_t> space,
                             const llvm::SmallBitVector &reduced,
                             GenericOp contraction, bool allowTf32) {
  ContractionDimensions dims = *getContractionDims(contraction);
  auto opSpace = getSpace(contraction);
  auto clampPow2 = [](int64_t n, int64_t lo, int64_t hi) {
    return std::min(std::max<int64_t>(nextPowerOf2(n), lo), hi);
  };
  int64_t sm = opSpace[dims.m[0]], sn = opSpace[dims.n[0]],
          sk = opSpace[dims.k[0]];
  SmallVector<Value> inputs = contraction.getDpsInputs();
  Type a = getElementTypeOrSelf(inputs[0].getType());
  Type b = getElementTypeOrSelf(inputs[1].getType());
  bool halves = a == b && (a.isF16() || a.isBF16());
  bool tf32 = allowTf32 && a.isF32() && b.isF32();
  bool bytes = a == b && a.isSignlessInteger(8);
  // Programs take the output's blocks in groups of rows (writeProgramOffsets):
  // the programs of a wave share rows of a and columns of b. Along n first,
  // a wide matmul (LLaMA-7B's MLP) read b from memory again for each row of
  // blocks (0.55 of cuBLAS on an H100, 1.0 grouped).
  t.fastest = sm;
  t.grouped = sn;
  if (!halves && !tf32 && !bytes) {
    t.block[sm] = clampPow2(space[sm], 16, 64);
    t.block[sn] = clampPow2(space[sn], 16, 64);
    t.block[sk] = clampPow2(space[sk], 16, 32);
    t.numWarps = 4;
    return;
  }
  auto programs = [&](int64_t bm, int64_t bn) {
    int64_t n = 1;
    for (unsigned s = 0; s < space.size(); ++s)
      if (!reduced.test(s))
        n *= llvm::divideCeil(space[s], s == unsigned(sm)   ? bm
                                        : s == unsigned(sn) ? bn
                                                            : 1);
    return n;
  };
  int64_t bm = 128, bn = 128, rowBytes = 128;
  t.numWarps = 4;
  t.numStages = 4;
  if (space[sn] > 128 && programs(128, 256) >= 2 * kFillPrograms) {
    bn = 256;
    t.numWarps = 8;
  } else if (programs(bm, bn) > 2 * kFillPrograms) {
    rowBytes = 64;
  }
  while (programs(bm, bn) < kFillPrograms / 2 && std::max(bm, bn) > 64) {
    if (bm >= bn)
      bm /= 2;
    else
      bn /= 2;
    // Deeper k steps, stages of kHalvedStageBytes: fewer barriers and waits
    // per flop where the SMs have one small program each.
    rowBytes = llvm::bit_floor(uint64_t(kHalvedStageBytes / (bm + bn)));
    t.numStages = 3;
  }
  t.block[sm] = clampPow2(space[sm], 16, bm);
  t.block[sn] = clampPow2(space[sn], 16, bn);
  // k steps of rowBytes, at least one MMA's k (32 for i8).
  t.block[sk] = clampPow2(space[sk], bytes ? 32 : 16,
                          rowBytes / (halves  ? 2
                                      : bytes ? 1
                                              : 4));
}

/// Whether a group's ops compute 64-bit integers (a causal mask's j - i in
/// i64, which tile-narrow-integer-tiles cannot narrow where program offsets
/// have no bound it can prove): each element of such a tile takes two
/// registers.
bool computes64BitIntegers(ArrayRef<GenericOp> ops) {
  return llvm::any_of(ops, [](GenericOp op) {
    WalkResult found = op.getBody()->walk([](Operation *inner) {
      return llvm::any_of(inner->getResultTypes(),
                          [](Type t) { return t.isInteger(64); })
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    return found.wasInterrupted();
  });
}

/// A matmul block whose epilogue computes 64-bit integer tiles holds at most
/// 64 elements a thread (a 128 x 128 block on 4 warps needed 256 registers
/// for one such tile beside the accumulator's 128): more warps, up to 8,
/// then the block's longer side halves.
void fit64BitEpilogue(Tiling &t, const llvm::SmallBitVector &reduced) {
  int64_t elements = 1; // of the output block
  for (auto [s, b] : llvm::enumerate(t.block))
    if (!reduced.test(s))
      elements *= b;
  while (elements / (32 * t.numWarps) > 64) {
    if (t.numWarps < 8) {
      t.numWarps *= 2;
      continue;
    }
    int64_t *longest = nullptr;
    for (auto [s, b] : llvm::enumerate(t.block))
      if (!reduced.test(s) && (!longest || b > *longest))
        longest = &b;
    *longest /= 2;
    elements /= 2;
  }
}

/// Block sizes and warps (Inductor's heuristics, simplified): a program
/// covers up to 1024 elements of an elementwise kernel, whole rows of a
/// reduction up to kPersistentRowElements (several rows while they are
/// short; longer ones in chunks of kRowChunkElements), and a block of a
/// contraction's output (chooseContractionTiling).
///
/// Every program reads the operands broadcast along its blocks (a norm's
/// weight, a bias) again. Where those re-reads are more than 1/16 of what a
/// program moves, programs take more rows (up to kMaxReuseElements), as
/// multi-row norm kernels keep their weights in registers.
Tiling chooseTiling(ArrayRef<int64_t> space,
                    const llvm::SmallBitVector &reduced, GenericOp contraction,
                    ArrayRef<Access> accesses, bool allowTf32,
                    bool epilogue64) {
  Tiling t;
  t.block.assign(space.size(), 1);
  t.chunked.resize(space.size());
  if (contraction) {
    chooseContractionTiling(t, space, reduced, contraction, allowTf32);
    if (epilogue64)
      fit64BitEpilogue(t, reduced);
  } else {
    int64_t whole = 1;
    for (int s : reduced.set_bits())
      whole *= nextPowerOf2(space[s]);
    int64_t limit = whole > kPersistentRowElements ? kRowChunkElements : whole;
    // Reduced dimensions, innermost first, share the row's elements.
    int64_t row = 1;
    for (int s = (int)space.size() - 1; s >= 0; --s) {
      if (!reduced.test(s))
        continue;
      t.block[s] =
          std::min(nextPowerOf2(space[s]), std::max<int64_t>(limit / row, 1));
      row *= t.block[s];
      if (t.block[s] < space[s])
        t.chunked.set(s);
    }
    int64_t budget = std::max<int64_t>(row, reduced.any() ? 2048 : 1024);
    int64_t total = row;
    for (int s = (int)space.size() - 1; s >= 0; --s) {
      if (reduced.test(s))
        continue;
      t.block[s] = std::min(nextPowerOf2(space[s]), budget / total);
      total *= t.block[s];
    }
    auto bytes = [&](const Access &a) {
      int64_t n = a.bytes;
      for (int s : a.spans.set_bits())
        n *= t.block[s];
      return n;
    };
    // The innermost dimension split over programs that a broadcast operand
    // does not span.
    auto reusable = [&]() -> int {
      int64_t all = 0, again = 0;
      int dim = -1;
      for (const Access &a : accesses) {
        all += bytes(a);
        for (int s = (int)space.size() - 1; s >= 0; --s) {
          if (a.spans.test(s) || reduced.test(s) || t.block[s] >= space[s])
            continue;
          again += bytes(a);
          dim = std::max(dim, s);
          break;
        }
      }
      return 16 * again > all ? dim : -1;
    };
    for (int s; !t.chunked.any() && total < kMaxReuseElements &&
                (s = reusable()) >= 0;) {
      t.block[s] *= 2;
      total *= 2;
    }
    // About 8 elements a thread, up to 32 warps for the longest rows.
    t.numWarps = std::clamp<int64_t>(total / 256, 1, total > 2048 ? 32 : 8);
    t.numWarps = int64_t(1) << llvm::Log2_64(t.numWarps);
  }
  t.counts.assign(space.size(), 1);
  for (unsigned s = 0; s < space.size(); ++s) {
    if (reduced.test(s))
      continue;
    t.counts[s] = llvm::divideCeil(space[s], t.block[s]);
    t.programs *= t.counts[s];
  }
  return t;
}

/// An attention's schedule: a program takes 64 query rows (16..64, or 1) of one
/// batch element and loops over the keys in blocks of 64 (16..64), holding
/// the whole head dimension of q and of the output (tile-form-kernels'
/// max-head-dim). f32 attention, whose products run on CUDA cores, takes
/// blocks of 32; so do the keys of head dimensions over 128, whose blocks of
/// k and v then take as much shared memory as q's block (96 KiB in all at
/// 256, within sm_86's 99 KiB; with blocks of 64 keys, sm_89 spilled).
Tiling chooseAttentionTiling(ArrayRef<int64_t> space, GenericOp qk,
                             GenericOp pv) {
  Tiling t;
  t.block.assign(space.size(), 1);
  t.chunked.resize(space.size());
  ContractionDimensions qkDims = *getContractionDims(qk);
  ContractionDimensions pvDims = *getContractionDims(pv);
  int64_t sm = getSpace(qk)[qkDims.m[0]], keys = getSpace(qk)[qkDims.n[0]],
          sd = getSpace(qk)[qkDims.k[0]], sv = getSpace(pv)[pvDims.n[0]];
  bool f32 = llvm::any_of(pv.getDpsInputs(), [](Value v) {
    return getElementTypeOrSelf(v.getType()).isF32();
  });
  int64_t rows = f32 ? 32 : 64;
  auto clampPow2 = [](int64_t n, int64_t lo, int64_t hi) {
    return std::min(std::max(nextPowerOf2(n), lo), hi);
  };
  // One query (decoding): a row of one.
  t.block[sm] = space[sm] == 1 ? 1 : clampPow2(space[sm], 16, rows);
  bool wide = nextPowerOf2(std::max(space[sd], space[sv])) > 128;
  t.block[keys] = clampPow2(space[keys], 16, wide ? 32 : rows);
  t.block[sd] = std::max<int64_t>(nextPowerOf2(space[sd]), 16);
  t.block[sv] = std::max<int64_t>(nextPowerOf2(space[sv]), 16);
  t.chunked.set(keys);
  t.numWarps = 4;
  t.counts.assign(space.size(), 1);
  for (unsigned s = 0; s < space.size(); ++s) {
    if (s == (unsigned)keys || s == (unsigned)sd)
      continue;
    t.counts[s] = llvm::divideCeil(space[s], t.block[s]);
    t.programs *= t.counts[s];
  }
  return t;
}

/// What a view argument's static layout lets the kernel assume, as Triton's
/// JIT specializes a launch: a stride of 1 (in the type; the innermost
/// dimension's, else another's: a transposed weight's K), 16-byte
/// alignment of the first element and of the other strides
/// (`tile.divisibility`; buffers start 16-byte aligned: the host code makes
/// inputs contiguous with offset 0, allocations are aligned), the sizes'
/// divisibility (`tile.size_divisibility`: a specialization has static
/// shapes) and 32-bit indexing (`tile.index_bitwidth`, also on the extents
/// passed as `index` arguments). The launcher checks them on every call.
void Converter::promiseLayout(BlockArgument arg, Value hostView) {
  // An extent: an index below 2^31 (its 32-bit index arithmetic then
  // narrows, tile-narrow-integer-tiles).
  std::optional<int64_t> size = getConstantIntValue(hostView);
  if (arg.getType().isIndex() && size && *size >= 0 &&
      *size <= std::numeric_limits<int32_t>::max()) {
    Builder b(arg.getContext());
    promises[arg] = {b.getNamedAttr(tile::KernelOp::getIndexBitwidthAttrName(),
                                    b.getI64IntegerAttr(32))};
    return;
  }
  auto type = dyn_cast<MemRefType>(arg.getType());
  auto hostType = dyn_cast<MemRefType>(hostView.getType());
  if (!type || !hostType || type.getRank() == 0)
    return;
  auto [strides, offset] = hostType.getStridesAndOffset();
  auto cast = hostView.getDefiningOp<memref::ReinterpretCastOp>();
  std::optional<int64_t> staticOffset;
  if (cast && cast.getStaticOffsets().size() == 1 &&
      !ShapedType::isDynamic(cast.getStaticOffsets()[0]))
    staticOffset = cast.getStaticOffsets()[0];
  else if (!cast && !ShapedType::isDynamic(offset))
    staticOffset = offset;
  else if (!cast)
    staticOffset = 0; // an argument or allocation itself
  if (llvm::any_of(strides, ShapedType::isDynamic) ||
      !hostType.hasStaticShape())
    return;
  Builder b(arg.getContext());
  SmallVector<NamedAttribute> attrs;
  int64_t rank = type.getRank();
  // The unit stride of a dimension longer than 1 (size-1 dimensions may
  // have any stride), the innermost one's first.
  std::optional<int64_t> unit;
  for (int64_t d = rank - 1; d >= 0 && !unit; --d)
    if (strides[d] == 1 && (hostType.getDimSize(d) > 1 || d == rank - 1))
      unit = d;
  if (unit) {
    SmallVector<int64_t> dynamic(rank, ShapedType::kDynamic);
    SmallVector<int64_t> layout(rank, ShapedType::kDynamic);
    layout[*unit] = 1;
    arg.setType(MemRefType::get(
        dynamic, type.getElementType(),
        StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, layout)));
  }
  int64_t bytes =
      std::max<int64_t>(type.getElementType().getIntOrFloatBitWidth() / 8, 1);
  // Beside the unit stride, which the launcher holds to its promise in every
  // dimension longer than 1 (a (N, 1) buffer's rows lie 1 element apart).
  bool aligned = staticOffset && (*staticOffset * bytes) % 16 == 0 &&
                 llvm::all_of(llvm::seq<int64_t>(rank), [&](int64_t d) {
                   return d == unit || hostType.getDimSize(d) == 1 ||
                          (strides[d] * bytes) % 16 == 0;
                 });
  if (aligned)
    attrs.push_back(b.getNamedAttr(tile::KernelOp::getDivisibilityAttrName(),
                                   b.getI64IntegerAttr(16)));
  // Each size's power-of-two divisor up to 16 (whole 16-byte runs for
  // cp.async, no scalar tails).
  SmallVector<int64_t> divisors;
  for (int64_t size : hostType.getShape())
    divisors.push_back(
        size ? std::min<int64_t>(16, int64_t(1)
                                         << llvm::countr_zero(uint64_t(size)))
             : 16);
  if (llvm::any_of(divisors, [](int64_t d) { return d > 1; }))
    attrs.push_back(
        b.getNamedAttr(tile::KernelOp::getSizeDivisibilityAttrName(),
                       b.getDenseI64ArrayAttr(divisors)));
  int64_t extent = staticOffset.value_or(INT64_MAX / 4);
  for (auto [size, stride] : llvm::zip(hostType.getShape(), strides))
    extent += (size - 1) * std::abs(stride);
  if (extent < (int64_t(1) << 31) &&
      llvm::all_of(
          hostType.getShape(),
          [](int64_t n) { return n < (int64_t(1) << 31); }))
    attrs.push_back(b.getNamedAttr(tile::KernelOp::getIndexBitwidthAttrName(),
                                   b.getI64IntegerAttr(32)));
  promises[arg] = attrs;
}

LogicalResult Converter::emitGroup(int64_t id, ArrayRef<Operation *> members) {
  SmallVector<GenericOp> ops;
  for (Operation *op : members)
    if (auto generic = dyn_cast<GenericOp>(op))
      ops.push_back(generic);
  // The space: each dimension's size, from the ops' loops.
  SmallVector<int64_t> space;
  llvm::SmallBitVector reduced;
  GenericOp contraction;
  SmallVector<GenericKind> kinds;
  for (GenericOp op : ops) {
    std::string why;
    GenericKind kind = *classify(op, why);
    kinds.push_back(kind);
    if (kind == GenericKind::Contraction)
      contraction = op;
    auto opSpace = getSpace(op);
    SmallVector<int64_t> loops = getLoopSizes(op);
    for (auto [d, s] : llvm::enumerate(opSpace)) {
      if (s < 0)
        continue;
      if ((int64_t)space.size() <= s) {
        space.resize(s + 1, 1);
        reduced.resize(s + 1);
      }
      space[s] = loops[d];
      if (!isParallel(op.getIteratorTypesArray()[d]))
        reduced.set(s);
    }
  }
  if (space.empty()) {
    space.push_back(1);
    reduced.resize(1);
  }
  // Values used outside the group are stored to new buffers; reshapes of
  // them in the group are views of those.
  llvm::SmallPtrSet<Operation *, 8> memberSet(members.begin(), members.end());
  std::function<bool(Value)> escapes = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *u) {
      if (!memberSet.contains(u))
        return true;
      return !isa<GenericOp>(u) && escapes(u->getResult(0));
    });
  };

  // The buffers the kernel reads from outside the group, and writes.
  SmallVector<Access> accesses;
  for (GenericOp op : ops) {
    auto opSpace = getSpace(op);
    for (OpOperand &operand : op->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      Operation *def = operand.get().getDefiningOp();
      bool fromOutside = (op.isDpsInput(&operand) ||
                          op.payloadUsesValueFromOperand(&operand)) &&
                         !(def && memberSet.contains(def)) &&
                         !getScalarSource(operand.get());
      bool stored =
          op.isDpsInit(&operand) && escapes(op.getTiedOpResult(&operand));
      if (!type || (!fromOutside && !stored))
        continue;
      Access a{llvm::SmallBitVector(space.size()),
               std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1)};
      for (AffineExpr e : op.getMatchingIndexingMap(&operand).getResults())
        if (auto d = dyn_cast<AffineDimExpr>(e);
            d && opSpace[d.getPosition()] >= 0)
          a.spans.set(opSpace[d.getPosition()]);
      accesses.push_back(a);
    }
  }
  GenericOp attention = findRole(members, kOutput);
  Tiling tiling =
      attention
          ? chooseAttentionTiling(space, findRole(members, kScores), attention)
          : chooseTiling(space, reduced, contraction, accesses, allowTf32,
                         computes64BitIntegers(ops));

  // The kernel.
  std::string name = "k" + std::to_string(id) + "_" +
                     (attention       ? "attention"
                      : contraction   ? "matmul"
                      : reduced.any() ? "reduce"
                                      : "pointwise");
  std::string fused;
  for (auto [op, kind] : llvm::zip(ops, kinds))
    fused += (fused.empty() ? "" : ", ") + describe(op, kind);
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  mb.setInsertionPoint(host);
  auto kernel = tile::KernelOp::create(mb, ops.front()->getLoc(), name,
                                       mb.getFunctionType({}, {}));
  kernel->setAttr("tile.fused", mb.getStringAttr(fused));
  kernel->setAttr(tile::KernelOp::getNumWarpsAttrName(),
                  mb.getI64IntegerAttr(tiling.numWarps));
  if (tiling.numStages)
    kernel->setAttr(tile::KernelOp::getNumStagesAttrName(),
                    mb.getI64IntegerAttr(tiling.numStages));

  auto view = [&](Value v, const StridedLayout &layout) -> Value {
    return viewOf(bufferFor(v), layout);
  };
  auto bufferOf = [&](Value v) -> const Buffer * {
    const Buffer &buffer = bufferFor(v);
    return buffer.root ? &buffer : nullptr; // else an uninitialized tensor
  };
  auto kindOf = [&](GenericOp op) {
    return kinds[llvm::find(ops, op) - ops.begin()];
  };

  llvm::SmallBitVector squeezed =
      squeezedDims(ops, kinds, space, reduced, attention, tiling);
  SmallVector<PendingStore> stores;
  for (GenericOp op : ops) {
    auto opSpace = getSpace(op);
    for (OpOperand &init : op.getDpsInitsMutable()) {
      Value result = op.getTiedOpResult(&init);
      if (!escapes(result))
        continue;
      auto type = cast<RankedTensorType>(result.getType());
      Value alloc = memref::AllocOp::create(
          builder, op.getLoc(),
          MemRefType::get(type.getShape(), type.getElementType()),
          builder.getI64IntegerAttr(64));
      Buffer &buffer =
          buffers[result] = {alloc, StridedLayout::contiguous(type.getShape())};
      StridedLayout layout;
      layout.sizes.assign(space.size(), 1);
      layout.strides.assign(space.size(), 0);
      for (auto [j, e] :
           llvm::enumerate(op.getMatchingIndexingMap(&init).getResults())) {
        auto d = dyn_cast<AffineDimExpr>(e);
        int64_t s = d ? opSpace[d.getPosition()] : -1;
        if (s < 0)
          continue;
        layout.sizes[s] = buffer.layout.sizes[j];
        layout.strides[s] = buffer.layout.strides[j];
      }
      stores.push_back({result, viewOf(buffer, dropDims(layout, squeezed))});
    }
  }

  KernelWriter writer(kernel, space, tiling, squeezed);
  writer.allowTf32 = allowTf32;
  writer.hostIndex = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(builder, kernel.getLoc(), v);
  };
  writer.writeProgramOffsets();
  if (attention) {
    if (failed(writer.writeAttention(members, kindOf, stores, view, bufferOf)))
      return failure();
  } else if (tiling.chunked.any()) {
    if (failed(writer.writeChunked(members, kindOf, stores, view, bufferOf)))
      return failure();
  } else {
    for (Operation *member : members) {
      auto op = dyn_cast<GenericOp>(member);
      if (!op) { // a reshape of unit dimensions: the same tile
        writer.values[member->getResult(0)] =
            writer.values.lookup(member->getOperand(0));
        continue;
      }
      if (failed(writer.writeOp(op, kindOf(op), view, bufferOf)))
        return failure();
    }
    for (const PendingStore &store : stores)
      writer.store(store.result, store.hostView);
  }
  for (Operation *member : members)
    if (!isa<GenericOp>(member) && buffers.count(member->getOperand(0))) {
      Buffer source = buffers[member->getOperand(0)];
      buffers[member->getResult(0)] = {source.root,
                                       *getViewLayout(member, source.layout)};
    }
  SmallVector<Type> argTypes;
  for (BlockArgument arg : kernel.getBody().front().getArguments()) {
    promiseLayout(arg, writer.launchArgs[arg.getArgNumber()]);
    argTypes.push_back(arg.getType());
  }
  kernel.setFunctionType(mb.getFunctionType(argTypes, {}));
  for (BlockArgument arg : kernel.getBody().front().getArguments())
    for (NamedAttribute attr : promises.lookup(arg))
      kernel.setArgAttr(arg.getArgNumber(), attr.getName(), attr.getValue());
  promises.clear();

  Location loc = ops.front()->getLoc();
  Value programs =
      arith::ConstantIndexOp::create(builder, loc, tiling.programs);
  Value one = arith::ConstantIndexOp::create(builder, loc, 1);
  tile::LaunchOp::create(builder, loc, name, ValueRange{programs, one, one},
                         writer.launchArgs);
  return success();
}

LogicalResult Converter::run() {
  // The host function, on memrefs with the identity layout.
  SmallVector<Type> argTypes;
  for (Type t : func.getArgumentTypes()) {
    auto type = dyn_cast<RankedTensorType>(t);
    if (!type || !type.hasStaticShape())
      return func.emitError()
             << "unsupported: a function argument of type " << t
             << " (tensors of static shape are supported)";
    argTypes.push_back(MemRefType::get(type.getShape(), type.getElementType()));
  }
  OpBuilder mb(func);
  host = func::FuncOp::create(mb, func.getLoc(), func.getName(),
                              mb.getFunctionType(argTypes, {}));
  Block *entry = host.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [old, arg] :
       llvm::zip(func.getArguments(), entry->getArguments())) {
    auto type = cast<RankedTensorType>(old.getType());
    buffers[old] = {arg, StridedLayout::contiguous(type.getShape())};
  }

  // Work items in program order: groups (at their first op), views, return.
  SmallVector<Operation *> pending;
  for (Operation &op : func.getBody().front()) {
    if (auto group = op.getAttrOfType<IntegerAttr>(kGroupAttr)) {
      auto [it, inserted] = groups.try_emplace(group.getInt());
      it->second.push_back(&op);
      if (inserted)
        pending.push_back(&op);
      continue;
    }
    if (auto generic = dyn_cast<GenericOp>(op)) {
      if (isViewOp(generic)) // else a fill read as a scalar
        pending.push_back(&op);
      continue;
    }
    if (isa<tensor::EmptyOp, arith::ConstantOp>(op))
      continue;
    pending.push_back(&op);
  }

  auto groupReady = [&](ArrayRef<Operation *> ops) {
    llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
    for (Operation *op : ops)
      for (OpOperand &operand : op->getOpOperands()) {
        Value v = operand.get();
        if (auto generic = dyn_cast<GenericOp>(op);
            generic && generic.isDpsInit(&operand) &&
            !generic.payloadUsesValueFromOperand(&operand))
          continue; // only gives the result's shape
        Operation *def = v.getDefiningOp();
        if (def && members.contains(def))
          continue;
        if (isa<RankedTensorType>(v.getType()) && !buffers.count(v) &&
            !isVirtual(v) && !matchPattern(v, m_Constant()))
          return false;
      }
    for (Operation *op : ops)
      if (auto generic = dyn_cast<GenericOp>(op))
        for (Value v : getCapturedTensors(generic))
          if (!buffers.count(v) && !matchPattern(v, m_Constant()))
            return false;
    return true;
  };

  while (!pending.empty()) {
    auto it = llvm::find_if(pending, [&](Operation *op) {
      if (auto group = op->getAttrOfType<IntegerAttr>(kGroupAttr))
        return groupReady(groups[group.getInt()]);
      return ready(op);
    });
    if (it == pending.end())
      return func.emitError("kernel formation made a cycle of kernels");
    Operation *op = *it;
    pending.erase(it);
    if (auto group = op->getAttrOfType<IntegerAttr>(kGroupAttr)) {
      if (failed(emitGroup(group.getInt(), groups[group.getInt()])))
        return failure();
      continue;
    }
    if (isViewOp(op)) {
      if (getScalarSource(op->getResult(0)))
        continue; // a reshaped fill, read as a scalar
      Buffer source = bufferFor(op->getOperand(0));
      if (!source.root)
        continue; // a view of an uninitialized tensor: only an output's shape
      std::optional<StridedLayout> layout = getViewLayout(op, source.layout);
      if (!layout)
        return op->emitError("a reshape that is no strided view of its source "
                             "(tile-form-kernels should have copied it)");
      buffers[op->getResult(0)] = {source.root, *layout};
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<Value> results;
      for (Value v : ret.getOperands()) {
        Buffer &buffer = bufferFor(v);
        if (!buffer.root)
          return ret.emitError() << "unsupported: a result that no kernel "
                                    "computes, defined by "
                                 << v;
        auto type = cast<RankedTensorType>(v.getType());
        if (buffer.layout.offset == 0 &&
            buffer.layout.strides ==
                StridedLayout::contiguous(type.getShape()).strides &&
            cast<MemRefType>(buffer.root.getType()).getShape() ==
                type.getShape())
          results.push_back(buffer.root);
        else
          results.push_back(viewOf(buffer, buffer.layout));
      }
      func::ReturnOp::create(builder, ret.getLoc(), results);
      host.setFunctionType(
          builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
      continue;
    }
    return op->emitError() << "unsupported: '" << op->getName()
                           << "' has no lowering to tile kernels yet";
  }
  host.setFunctionType(builder.getFunctionType(
      argTypes, entry->getTerminator()->getOperandTypes()));
  func.erase();
  return success();
}

struct ConvertLinalgToTilePass
    : tileopt::impl::ConvertLinalgToTileBase<ConvertLinalgToTilePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          llvm::any_of(func.getArgumentTypes(),
                       [](Type t) { return isa<RankedTensorType>(t); }))
        funcs.push_back(func);
    for (func::FuncOp func : funcs)
      if (failed(Converter(module, func, allowTf32).run()))
        return signalPassFailure();
  }
};

} // namespace
