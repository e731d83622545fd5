//===- Utility.cpp - builders, coordinates, views of the lowering ---------===//
//
// The small pieces every family of tile.* lowerings uses: constants,
// shared-memory addresses, per-thread vectors, inline PTX, the threads'
// coordinates in a layout, the kernel ABI's views and the type converter.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

//===----------------------------------------------------------------------===//
// Small builders
//===----------------------------------------------------------------------===//

Value i32Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 32);
}
Value i64Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}
Value intConst(OpBuilder &b, Location loc, Type type, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, type, v);
}

unsigned storageBits(Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  return bits < 8 ? 8 : bits;
}

Value sharedBase(OpBuilder &b, Location loc, KernelState &state) {
  Value base = LLVM::AddressOfOp::create(b, loc, state.sharedMemory);
  if (!state.scratchBase)
    return base;
  return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                             ValueRange{state.scratchBase});
}

void useScratch(OpBuilder &b, Location loc, KernelState &ks,
                const LoweringState &state, Operation *op, Value slot,
                Operation *owner) {
  ks.usedBefore = !state.firstSharedUsers.contains(op);
  ks.scratchBase = Value();
  ScratchPlacement place = state.placements.lookup(owner ? owner : op);
  if (place.offset || slot)
    ks.scratchBase = scratchOffset(b, loc, place, slot);
}

Value scratchOffset(OpBuilder &b, Location loc, const ScratchPlacement &place,
                    Value slot) {
  Value base = i32Const(b, loc, place.offset);
  if (!slot)
    return base;
  // an i32 ring index (pipelineLoop)
  return arith::AddIOp::create(
      b, loc, base,
      arith::MulIOp::create(b, loc, slot, i32Const(b, loc, place.slotBytes),
                            kNoWrap),
      kNoWrap);
}

Value sharedPtr(OpBuilder &b, Location loc, KernelState &state, Type element,
                Value index /*i32*/, int64_t byteOffset) {
  Value base = sharedBase(b, loc, state);
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 3);
  if (byteOffset)
    base = LLVM::GEPOp::create(b, loc, ptrType, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{int32_t(byteOffset)});
  return LLVM::GEPOp::create(b, loc, ptrType, element, base, ValueRange{index});
}

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
  return element.isInteger(1) || isFp8Type(element) ? b.getI8Type() : element;
}
StringRef mmaTypeName(Type element, bool tf32) {
  if (tf32)
    return "tf32";
  if (element.isInteger())
    return "s8";
  if (isa<Float8E4M3FNType>(element))
    return "e4m3";
  if (isa<Float8E5M2Type>(element))
    return "e5m2";
  return element.isBF16() ? "bf16" : "f16";
}
TypedAttr registerAttr(TypedAttr attr) {
  auto fp8 = dyn_cast<FloatAttr>(attr);
  if (!fp8 || !isFp8Type(fp8.getType()))
    return attr;
  return IntegerAttr::get(IntegerType::get(attr.getContext(), 8),
                          fp8.getValue().bitcastToAPInt());
}

void leadingBarrier(OpBuilder &b, Location loc, KernelState &ks) {
  if (ks.usedBefore)
    barrier(b, loc);
}

void barrier(OpBuilder &b, Location loc) { NVVM::Barrier0Op::create(b, loc); }

SmallVector<Value> unpack(OpBuilder &b, Location loc, Value vector) {
  auto type = cast<VectorType>(vector.getType());
  SmallVector<Value> values;
  for (int64_t i = 0; i < type.getNumElements(); ++i)
    values.push_back(vector::ExtractOp::create(b, loc, vector, i));
  return values;
}

Value pack(OpBuilder &b, Location loc, VectorType type,
           ArrayRef<Value> values) {
  return vector::FromElementsOp::create(b, loc, type, values);
}

SmallVector<Value> emitAsm(OpBuilder &b, Location loc, TypeRange results,
                           ValueRange operands, StringRef text,
                           StringRef constraints, bool sideEffects) {
  MLIRContext *ctx = b.getContext();
  Type result =
      results.size() == 1 ? results.front()
      : results.empty()
          ? Type()
          : LLVM::LLVMStructType::getLiteral(
                ctx, SmallVector<Type>(results.begin(), results.end()));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, result ? TypeRange(result) : TypeRange(), operands, text,
      constraints, sideEffects, /*is_align_stack=*/false,
      LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(ctx, LLVM::AsmDialect::AD_ATT), ArrayAttr());
  if (results.size() < 2)
    return SmallVector<Value>(asmOp->getResults());
  SmallVector<Value> out;
  for (size_t i = 0; i < results.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return out;
}

void emitPtx(OpBuilder &b, Location loc, StringRef text) {
  emitAsm(b, loc, {}, {}, text, "", /*sideEffects=*/true);
}

SmallVector<Value> emitInPlaceAsm(OpBuilder &b, Location loc, StringRef text,
                                  ArrayRef<Value> regs, ValueRange inputs) {
  Type regType = regs.empty() ? b.getF32Type() : regs.front().getType();
  std::string constraints;
  for (size_t i = 0; i < regs.size(); ++i)
    constraints += regType.isF32() ? (i ? ",=f" : "=f") : (i ? ",=r" : "=r");
  for (Value input : inputs)
    constraints += input.getType().isInteger(64) ? ",l" : ",r";
  for (size_t i = 0; i < regs.size(); ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Value> operands(inputs);
  operands.append(regs.begin(), regs.end());
  return emitAsm(b, loc, SmallVector<Type>(regs.size(), regType), operands,
                 text, constraints, /*sideEffects=*/true);
}

SmallVector<Value> packHalfPairs(OpBuilder &b, Location loc,
                                 ArrayRef<Value> halves) {
  auto pair = VectorType::get({2}, halves.front().getType());
  SmallVector<Value> words;
  for (size_t i = 0; i + 1 < halves.size(); i += 2)
    words.push_back(LLVM::BitcastOp::create(
        b, loc, b.getI32Type(),
        vector::FromElementsOp::create(b, loc, pair,
                                       ValueRange{halves[i], halves[i + 1]})));
  return words;
}

SmallVector<Value> unpackHalfPairs(OpBuilder &b, Location loc,
                                   ArrayRef<Value> words) {
  auto pair = VectorType::get({2}, b.getF16Type());
  SmallVector<Value> halves;
  for (Value word : words) {
    Value v = LLVM::BitcastOp::create(b, loc, pair, word);
    for (int64_t i = 0; i < 2; ++i)
      halves.push_back(vector::ExtractOp::create(b, loc, v, i));
  }
  return halves;
}

std::string asmRegisterList(unsigned first, unsigned count) {
  std::string text = "{";
  for (unsigned i = 0; i < count; ++i)
    text += (i ? ", $" : "$") + std::to_string(first + i);
  return text + "}";
}

//===----------------------------------------------------------------------===//
// Coordinates
//===----------------------------------------------------------------------===//

SmallVector<Value> emitThreadBase(OpBuilder &b, Location loc, Attribute layout,
                                  KernelState &state) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    SmallVector<Value> base = emitThreadBase(b, loc, slice.getParent(), state);
    base.erase(base.begin() + slice.getDim());
    return base;
  }
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    // Lane l: row l / 4, column 2 * (l % 4); warps tile rows fastest, then
    // columns blockN apart.
    unsigned wm = mma.getWarpsM(), wn = mma.getWarpsN();
    Value row = arith::ShRUIOp::create(b, loc, state.lane, i32Const(b, loc, 2));
    Value col = arith::MulIOp::create(
        b, loc, arith::AndIOp::create(b, loc, state.lane, i32Const(b, loc, 3)),
        i32Const(b, loc, 2));
    Value warpM =
        arith::AndIOp::create(b, loc, state.warp, i32Const(b, loc, wm - 1));
    Value warpN = arith::AndIOp::create(
        b, loc,
        arith::ShRUIOp::create(b, loc, state.warp,
                               i32Const(b, loc, llvm::Log2_32(wm))),
        i32Const(b, loc, wn - 1));
    row = arith::AddIOp::create(
        b, loc, row,
        arith::MulIOp::create(b, loc, warpM, i32Const(b, loc, kMmaM)));
    col = arith::AddIOp::create(
        b, loc, col,
        arith::MulIOp::create(b, loc, warpN,
                              i32Const(b, loc, mma.getBlockN())));
    SmallVector<Value> base(mma.getRank() - 2, i32Const(b, loc, 0));
    base.append({row, col});
    return base;
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
    if (tpw == 32 && wpc > 1 && warpShift == 0) {
      // A whole warp along d and the warp's low bits next: the index is bits
      // of the thread id (lane + 32 * warp), one mask instead of a mask, a
      // shift and an add (Triton's `(tid * spt) & mask`). Not for lanes split
      // between dimensions: there it cost the wgmma loop registers (58 -> 64).
      Value thread = bits(state.tid, 0, tpw * wpc);
      base[d] =
          arith::MulIOp::create(b, loc, thread, i32Const(b, loc, spt), kNoWrap);
    } else {
      Value laneD = bits(state.lane, laneShift, tpw);
      Value warpD = bits(state.warp, warpShift, wpc);
      Value lanePart =
          arith::MulIOp::create(b, loc, laneD, i32Const(b, loc, spt), kNoWrap);
      Value warpPart = arith::MulIOp::create(
          b, loc, warpD, i32Const(b, loc, spt * tpw), kNoWrap);
      base[d] = arith::AddIOp::create(b, loc, lanePart, warpPart, kNoWrap);
    }
    laneShift += llvm::Log2_32(tpw);
    warpShift += llvm::Log2_32(wpc);
  }
  return base;
}

SmallVector<int64_t> maxThreadBase(Attribute layout) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    SmallVector<int64_t> base = maxThreadBase(slice.getParent());
    base.erase(base.begin() + slice.getDim());
    return base;
  }
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    SmallVector<int64_t> base(mma.getRank() - 2, 0);
    base.append({7 + (int64_t(mma.getWarpsM()) - 1) * kMmaM,
                 6 + (int64_t(mma.getWarpsN()) - 1) * mma.getBlockN()});
    return base;
  }
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

SmallVector<int64_t> threadBase(Attribute layout, int64_t tid) {
  if (auto slice = dyn_cast<SliceLayoutAttr>(layout)) {
    SmallVector<int64_t> base = threadBase(slice.getParent(), tid);
    base.erase(base.begin() + slice.getDim());
    return base;
  }
  int64_t lane = tid % kWarpSize, warp = tid / kWarpSize;
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    int64_t wm = mma.getWarpsM(), wn = mma.getWarpsN();
    SmallVector<int64_t> base(mma.getRank() - 2, 0);
    base.append({lane / 4 + warp % wm * kMmaM,
                 lane % 4 * 2 + warp / wm % wn * mma.getBlockN()});
    return base;
  }
  auto blocked = cast<BlockedLayoutAttr>(layout);
  SmallVector<int64_t> base(blocked.getRank());
  for (unsigned d : blocked.getOrder()) {
    int64_t tpw = blocked.getThreadsPerWarp()[d];
    int64_t wpc = blocked.getWarpsPerCTA()[d];
    int64_t spt = blocked.getSizePerThread()[d];
    base[d] = (lane % tpw + warp % wpc * tpw) * spt;
    lane /= tpw;
    warp /= wpc;
  }
  return base;
}

WarpBits warpsAlong(Attribute layout, unsigned dim) {
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout)) {
    unsigned lead = mma.getRank() - 2, wm = mma.getWarpsM();
    if (dim < lead) // a unit dimension: no warps along it
      return {0, 1};
    return dim == lead ? WarpBits{0, wm}
                       : WarpBits{llvm::Log2_32(wm), mma.getWarpsN()};
  }
  auto blocked = cast<BlockedLayoutAttr>(layout);
  unsigned shift = 0;
  for (unsigned d : blocked.getOrder()) {
    if (d == dim)
      break;
    shift += llvm::Log2_32(blocked.getWarpsPerCTA()[d]);
  }
  return {shift, blocked.getWarpsPerCTA()[dim]};
}

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
  // A layout of fewer warps than the kernel's (an mma tile smaller than the
  // warps' blocks) repeats in the warps after them.
  if (unsigned warps = getNumWarps(layout); warps < state.numWarps)
    owner = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, state.warp,
                                  i32Const(b, loc, warps));
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

SmallVector<int64_t> wrap(ArrayRef<int64_t> offset, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> r;
  for (auto [o, s] : llvm::zip(offset, shape))
    r.push_back(o % s);
  return r;
}

std::optional<unsigned> findRegister(ArrayRef<SmallVector<int64_t>> offsets,
                                     ArrayRef<int64_t> shape,
                                     ArrayRef<int64_t> want) {
  for (auto [i, offset] : llvm::enumerate(offsets))
    if (wrap(offset, shape) == ArrayRef<int64_t>(want))
      return i;
  return std::nullopt;
}

int64_t wrappedLinear(ArrayRef<int64_t> base, ArrayRef<int64_t> offset,
                      ArrayRef<int64_t> shape) {
  int64_t index = 0;
  for (auto [b, o, size] : llvm::zip(base, offset, shape))
    index = index * size + (b + o) % size;
  return index;
}

std::optional<SmallVector<unsigned>> registersInPlace(RankedTensorType from,
                                                      RankedTensorType to) {
  Attribute fromLayout = from.getEncoding(), toLayout = to.getEncoding();
  if (!isLayout(fromLayout) || !isLayout(toLayout) ||
      from.getNumElements() != to.getNumElements() ||
      getNumWarps(fromLayout) != getNumWarps(toLayout))
    return std::nullopt;
  SmallVector<SmallVector<int64_t>> fromOffsets =
      getRegisterOffsets(fromLayout, from.getShape());
  SmallVector<SmallVector<int64_t>> toOffsets =
      getRegisterOffsets(toLayout, to.getShape());
  std::optional<SmallVector<unsigned>> sources;
  llvm::SmallDenseMap<int64_t, unsigned, 64> held;
  for (int64_t tid = 0, e = getNumWarps(toLayout) * kWarpSize; tid < e; ++tid) {
    SmallVector<int64_t> fromBase = threadBase(fromLayout, tid);
    SmallVector<int64_t> toBase = threadBase(toLayout, tid);
    held.clear();
    for (auto [r, offset] : llvm::enumerate(fromOffsets))
      held.try_emplace(wrappedLinear(fromBase, offset, from.getShape()), r);
    SmallVector<unsigned> threadSources;
    for (const SmallVector<int64_t> &offset : toOffsets) {
      auto it = held.find(wrappedLinear(toBase, offset, to.getShape()));
      if (it == held.end())
        return std::nullopt;
      threadSources.push_back(it->second);
    }
    // The code is the same for every thread: so must the registers be.
    if (sources && *sources != threadSources)
      return std::nullopt;
    sources = std::move(threadSources);
  }
  return sources;
}

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

Value linearIndex(OpBuilder &b, Location loc, ArrayRef<Value> coord,
                  ArrayRef<int64_t> shape, int64_t pad) {
  Value index = i32Const(b, loc, 0);
  int64_t stride = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    Value term =
        arith::MulIOp::create(b, loc, coord[d], i32Const(b, loc, stride));
    index = arith::AddIOp::create(b, loc, index, term);
    stride *=
        shape[d] + (d == int(shape.size()) - 1 && shape.size() > 1 ? pad : 0);
  }
  return index;
}

int64_t StagingLayout::elements(ArrayRef<int64_t> shape) const {
  return paddedElements(shape, pad);
}

int64_t StagingLayout::index(ArrayRef<int64_t> coord,
                             ArrayRef<int64_t> shape) const {
  if (!swizzled()) {
    int64_t index = 0;
    for (auto [d, c] : llvm::enumerate(coord))
      index = index * (shape[d] + (d + 1 == shape.size() && d ? pad : 0)) + c;
    return index;
  }
  int64_t phase = coord[0] / perPhase % maxPhase;
  return coord[0] * shape[1] + (coord[1] ^ (phase * vec));
}

Value StagingLayout::emitIndex(OpBuilder &b, Location loc,
                               ArrayRef<Value> coord,
                               ArrayRef<int64_t> shape) const {
  if (!swizzled())
    return linearIndex(b, loc, coord, shape, pad);
  // XOR the phase into the group bits of the column: ((c / vec) ^ phase) *
  // vec + c % vec, which stays in the row (vec * maxPhase divides it).
  Value phase = coord[0];
  if (perPhase > 1)
    phase = arith::ShRUIOp::create(b, loc, phase,
                                   i32Const(b, loc, llvm::Log2_64(perPhase)));
  phase = arith::AndIOp::create(b, loc, phase, i32Const(b, loc, maxPhase - 1));
  phase = arith::ShLIOp::create(b, loc, phase,
                                i32Const(b, loc, llvm::Log2_64(vec)), kNoWrap);
  Value column = arith::XOrIOp::create(b, loc, coord[1], phase);
  Value row = arith::MulIOp::create(b, loc, coord[0],
                                    i32Const(b, loc, shape[1]), kNoWrap);
  return arith::AddIOp::create(b, loc, row, column, kNoWrap);
}

int64_t paddedElements(ArrayRef<int64_t> shape, int64_t pad) {
  int64_t n = 1;
  for (auto [d, size] : llvm::enumerate(shape))
    n *= size + (d == shape.size() - 1 && shape.size() > 1 ? pad : 0);
  return n;
}

int64_t smemPad(Type element) {
  return std::max<int64_t>(1, 32 / storageBits(element));
}

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
  // An mma fragment's (r, c), (r, c + 1) pairs.
  if (auto mma = dyn_cast<MmaLayoutAttr>(layout))
    return {int64_t(mma.getRank()) - 1, 2};
  return {0, 1};
}

//===----------------------------------------------------------------------===//
// Views: the kernel ABI
//===----------------------------------------------------------------------===//

View unpackView(OpBuilder &b, Location loc, ValueRange values, MemRefType type,
                bool narrow, ValueRange sizeValues) {
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
// Type conversion
//===----------------------------------------------------------------------===//

TileTypeConverter::TileTypeConverter(MLIRContext *ctx) {
  addConversion([](Type type) { return type; });
  // fp8 values are their bytes (LLVM has no fp8 types): only conversions
  // (Fp8ConversionLowering) and dots read them as floats.
  addConversion([ctx](FloatType type) -> Type {
    return type.getWidth() == 8 ? Type(IntegerType::get(ctx, 8)) : type;
  });
  addConversion([this](RankedTensorType type) -> std::optional<Type> {
    Attribute layout = type.getEncoding();
    if (!isLayout(layout))
      return std::nullopt;
    int64_t n = getElemsPerThread(layout, type.getShape());
    return VectorType::get({n}, convertType(type.getElementType()));
  });
  addConversion(
      [ctx](MemRefType type,
            SmallVectorImpl<Type> &results) -> std::optional<LogicalResult> {
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

} // namespace tileopt::nvvm
