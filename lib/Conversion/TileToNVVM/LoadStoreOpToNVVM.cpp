//===- LoadStoreOpToNVVM.cpp - loads, stores and their analysis -----------===//
//
// tile.load, tile.store and tile.gather as predicated PTX: vector accesses
// where the view is aligned (proven before conversion or checked at run
// time), scalar ones at the view's end; the analysis before conversion
// that proves alignment, bounds and 32-bit indices. Also memref.dim,
// memref.load, memref.store and memref.atomic_rmw of views in kernels.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/BitVector.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

//===----------------------------------------------------------------------===//
// Global memory access with predicated PTX
//===----------------------------------------------------------------------===//

namespace {

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
  return emitAsm(b, loc, SmallVector<Type>(count, wordType), operands, asmText,
                 constraints, /*sideEffects=*/true);
}

void emitPredicatedStore(OpBuilder &b, Location loc, Value ptr, Value pred,
                         unsigned bits, ArrayRef<Value> words) {
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
  emitAsm(b, loc, {}, operands, asmText, constraints, /*sideEffects=*/true);
}

/// Adds each of `elements` (f32 or i32) atomically to the element at its
/// place after `ptr`, where `pred` holds: red.global.add, one an element, or
/// with `vector` (sm_90 and PTX 8.1; `ptr` aligned to the run) 2 or 4 f32 in
/// one `red.global.add.v2/.v4.f32`.
void emitPredicatedAdd(OpBuilder &b, Location loc, Value ptr, Value pred,
                       ArrayRef<Value> elements, bool vector) {
  bool isFloat = elements.front().getType().isF32();
  unsigned count = elements.size();
  std::string asmText, constraints;
  llvm::raw_string_ostream os(asmText), cs(constraints);
  cs << "l,b";
  for (unsigned i = 0; i < count; ++i)
    cs << "," << (isFloat ? "f" : "r");
  if (vector && isFloat && (count == 2 || count == 4)) {
    os << "@$1 red.global.add.v" << count << ".f32 [$0], {";
    for (unsigned i = 0; i < count; ++i)
      os << (i ? ", " : "") << "$" << 2 + i;
    os << "};";
  } else {
    for (unsigned i = 0; i < count; ++i)
      os << (i ? "\n\t" : "") << "@$1 red.global.add."
         << (isFloat ? "f32" : "s32") << " [$0+" << 4 * i << "], $" << 2 + i
         << ";";
  }
  SmallVector<Value> operands{ptr, pred};
  operands.append(elements.begin(), elements.end());
  emitAsm(b, loc, {}, operands, asmText, constraints, /*sideEffects=*/true);
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
  if (!element.isInteger() && !isFp8Type(element))
    return arith::BitcastOp::create(b, loc, element, word);
  return word;
}

} // namespace

SmallVector<Run> contiguousRuns(ArrayRef<SmallVector<int64_t>> offsets,
                                ArrayRef<int64_t> shape, int64_t dim,
                                unsigned maxElems, unsigned stride) {
  SmallVector<Run> runs;
  unsigned n = offsets.size();
  llvm::BitVector taken(n);
  for (unsigned i = 0; i < n; ++i) {
    if (taken.test(i))
      continue;
    unsigned count = 1;
    for (unsigned r = i + stride; r < n && count < maxElems && !taken.test(r);
         r += stride) {
      SmallVector<int64_t> expect(offsets[i]);
      expect[dim] += count;
      if (wrap(offsets[r], shape) != wrap(expect, shape) ||
          expect[dim] >= shape[dim])
        break;
      ++count;
    }
    // Vector accesses must be aligned to their size within the tile too.
    while (count > 1 && (!llvm::isPowerOf2_32(count) ||
                         (offsets[i][dim] % shape[dim]) % count != 0))
      count /= 2;
    Run run{i, count, stride};
    for (unsigned e = 0; e < count; ++e)
      taken.set(run.reg(e));
    runs.push_back(run);
  }
  return runs;
}

namespace {

/// The static stride of `view`'s dim, if known.
std::optional<int64_t> staticStride(MemRefType type, int64_t dim) {
  auto [strides, offset] = type.getStridesAndOffset();
  if (ShapedType::isDynamic(strides[dim]))
    return std::nullopt;
  return strides[dim];
}

/// `v` cast to `type` right after its definition, once: the accesses at one
/// tile offset share the cast, where each of them sees it. (Casts in a loop's
/// preheader and after the loop, LLVM duplicates into the zero-trip path.)
Value castAtDefinition(OpBuilder &b, Location loc, Type type, Value v) {
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  Block::iterator next = b.getInsertionPoint();
  for (Operation *op = next == b.getBlock()->end() ? nullptr : &*next;
       op && isa<arith::IndexCastOp>(op) && op->getOperand(0) == v;
       op = op->getNextNode())
    if (op->getResult(0).getType() == type)
      return op->getResult(0);
  return arith::IndexCastOp::create(b, loc, type, v);
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
         bool ownersOnly, bool chainAddresses)
      : loc(loc), view(view), shape(tile.getShape()),
        element(storageType(b, element)), home(b.getInsertionBlock()),
        chainAddresses(chainAddresses) {
    Attribute layout = tile.getEncoding();
    offsets = getRegisterOffsets(layout, shape);
    if (ownersOnly)
      owner = emitOwnerPredicate(b, loc, layout, shape, state);
    base = emitThreadBase(b, loc, layout, state);
    baseMax = maxThreadBase(layout);
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
      starts.push_back(castAtDefinition(b, loc, indexType, tileOffsets[d]));
      Value threadBase = base[d];
      if (indexType != threadBase.getType())
        threadBase = arith::ExtUIOp::create(b, loc, indexType, threadBase);
      first[d] =
          arith::AddIOp::create(b, loc, starts[d], threadBase, startFlags(d));
      if (!wraps[d])
        baseLinear = arith::AddIOp::create(
            b, loc, baseLinear,
            arith::MulIOp::create(b, loc, first[d], view.strides[d],
                                  linearFlags()),
            linearFlags());
    }
    basePtr = LLVM::GEPOp::create(b, loc, ptrType(b), this->element, view.ptr,
                                  ValueRange{baseLinear});
    // Bounds of dims whose tile offset a loop leaves alone go first: their
    // conjunction is loop-invariant, and LLVM hoists it.
    LoopLikeOpInterface loop;
    for (Operation *op = home->getParentOp(); op && !loop;
         op = op->getParentOp())
      loop = dyn_cast<LoopLikeOpInterface>(op);
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t d = 0; d < rank; ++d)
        if ((!loop || loop.isDefinedOutsideOfLoop(tileOffsets[d])) == !pass)
          boundsOrder.push_back(d);
    for (int64_t d = 0; d < rank; ++d)
      sharedDims.push_back(sharesBounds(d));
  }

  /// The static offsets of the registers (register order).
  SmallVector<SmallVector<int64_t>> offsets;
  /// The order of the dims in a register's bounds check.
  SmallVector<int64_t> boundsOrder;

  /// Whether register `r` lies inside the view (and, for stores of
  /// replicated layouts, this thread owns it).
  Value inBounds(OpBuilder &b, unsigned r) {
    return cached(b, r, okCache, [&] { return emitInBounds(b, r); });
  }

  /// The registers' runs of up to `elems` contiguous elements along `dim`
  /// (contiguousRuns), for a vector access that checks only each run's first
  /// register, and its last unless every run is all in or all out (`whole`).
  /// The checks that registers share narrow to those registers: a dim is
  /// checked once where their indices agree, even if the registers inside a
  /// run differ there. Any other register (a straddling run's scalar tail)
  /// then checks every dim itself. Call before the first check.
  SmallVector<Run> checkedRuns(ArrayRef<int64_t> tileShape, int64_t dim,
                               unsigned elems, bool whole) {
    assert(okCache.empty() && ownOkCache.empty() && !sharedOk &&
           "checkedRuns after a bounds check was emitted");
    SmallVector<Run> runs = contiguousRuns(offsets, tileShape, dim, elems);
    checked.assign(offsets.size(), false);
    for (Run run : runs) {
      checked[run.first] = true;
      if (!whole)
        checked[run.first + run.count - 1] = true;
    }
    for (int64_t d = 0; d < view.rank(); ++d)
      sharedDims[d] = sharesBounds(d);
    return runs;
  }

  /// inBounds split in two: the dims whose check every register shares
  /// (null if none), and register `r`'s own (null if none), so that a value
  /// chosen by the shared part is computed once.
  Value sharedInBounds(OpBuilder &b) {
    if (sharedOk)
      return sharedOk;
    Value ok = emitDimsInBounds(b, 0, /*shared=*/true);
    if (b.getInsertionBlock() == home)
      sharedOk = ok;
    return ok;
  }
  Value ownInBounds(OpBuilder &b, unsigned r) {
    return cached(b, r, ownOkCache,
                  [&] { return emitDimsInBounds(b, r, /*shared=*/false); });
  }

  /// The global address of register `r`.
  Value pointer(OpBuilder &b, unsigned r) {
    return cached(b, r, ptrCache, [&] { return emitPointer(b, r); });
  }

  /// The elements of the run of `count` from register `r` along `d` that
  /// lie before the view's end there (i32): `count` unless the run straddles
  /// it. Only for a run whose first element is in bounds.
  Value inBoundsCount(OpBuilder &b, unsigned r, int64_t d, unsigned count) {
    Value left = arith::SubIOp::create(b, loc, view.sizes[d], index(b, r, d));
    left = arith::MinUIOp::create(b, loc, left,
                                  intConst(b, loc, view.indexType, count));
    if (left.getType() == b.getI32Type())
      return left;
    return arith::TruncIOp::create(b, loc, b.getI32Type(), left);
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
    bool nonNegative =
        !view.nonNegativeStarts.empty() && view.nonNegativeStarts[d];
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

  /// The index whose bounds check is register `r`'s along `d`: its own, or
  /// where the tile offset and the size are multiples of a group g and the
  /// thread's coordinate never crosses a group boundary that the register's
  /// constant offset does not, the start of its group (tile offset + the
  /// offset rounded down to g), which the thread's other registers of that
  /// group and every other thread share.
  Value boundsIndex(OpBuilder &b, unsigned r, int64_t d) {
    std::optional<int64_t> groupStart = boundsGroupStart(r, d);
    if (!groupStart)
      return index(b, r, d);
    if (!*groupStart)
      return starts[d];
    return arith::AddIOp::create(b, loc, starts[d],
                                 intConst(b, loc, view.indexType, *groupStart),
                                 startFlags(d));
  }

  /// boundsIndex's group start of register `r` along `d` (offset from the
  /// tile offset), if it checks one; none if it checks its own index.
  std::optional<int64_t> boundsGroupStart(unsigned r, int64_t d) const {
    int64_t group = view.boundsGroups.empty() ? 1 : view.boundsGroups[d];
    int64_t offset = offsets[r][d];
    bool sameGroup =
        wraps[d] ? shape[d] <= group : baseMax[d] + offset % group < group;
    if (group <= 1 || !sameGroup)
      return std::nullopt;
    return wraps[d] ? 0 : offset - offset % group;
  }

  /// Whether register `r`'s check is asked for with the shared part (all
  /// registers, unless checkedRuns narrowed them).
  bool isChecked(unsigned r) const { return checked.empty() || checked[r]; }

  /// Whether every checked register's bounds check along `d` is the same
  /// value: the same group start, or the same own index.
  bool sharesBounds(int64_t d) const {
    // (whether the register checks a group start, which start or offset)
    auto key = [&](unsigned r) {
      std::optional<int64_t> start = boundsGroupStart(r, d);
      return std::make_pair(start.has_value(), start.value_or(offsets[r][d]));
    };
    std::optional<std::pair<bool, int64_t>> first;
    for (unsigned r = 0; r < offsets.size(); ++r) {
      if (!isChecked(r))
        continue;
      if (!first)
        first = key(r);
      else if (key(r) != *first)
        return false;
    }
    return true;
  }

  /// Register `r`'s bounds check: the shared dims' (computed once), then its
  /// own dims' and ownership; every dim's where `r` is not a checked one.
  Value emitInBounds(OpBuilder &b, unsigned r) {
    if (!isChecked(r)) {
      Value ok = emitDimsInBounds(b, r, /*shared=*/false, /*allDims=*/true);
      return ok ? ok : arith::ConstantIntOp::create(b, loc, 1, 1);
    }
    Value shared = sharedInBounds(b), own = ownInBounds(b, r);
    if (shared && own)
      return arith::AndIOp::create(b, loc, shared, own);
    if (Value ok = shared ? shared : own)
      return ok;
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  }

  /// The checks of the dims that every register shares (`shared`), or of
  /// register `r`'s own dims (every dim with `allDims`) and ownership; null
  /// if none.
  Value emitDimsInBounds(OpBuilder &b, unsigned r, bool shared,
                         bool allDims = false) {
    Value ok;
    for (int64_t d : boundsOrder) {
      if ((!view.inBounds.empty() && view.inBounds[d]) ||
          (!allDims && sharedDims[d] != shared))
        continue;
      // Unsigned compare: negative indices are out of bounds too.
      Value inDim = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          boundsIndex(b, r, d), view.sizes[d]);
      ok = ok ? arith::AndIOp::create(b, loc, ok, inDim) : inDim;
    }
    if (owner && !shared)
      ok = ok ? arith::AndIOp::create(b, loc, ok, owner) : owner;
    return ok;
  }

  /// Register `r`'s address from the nearest earlier register's (already
  /// emitted in this block) whose offsets differ from r's along one dimension
  /// where the layout does not wrap: that address plus the difference times
  /// the stride: one step value for a thread's rows instead of a product per
  /// row (a 64-bit one where the stride is 32-bit: LLVM sign-extends it by a
  /// 64-bit multiply and shift). Null if none, or without chainAddresses.
  Value emitChainedPointer(OpBuilder &b, unsigned r) {
    if (!chainAddresses)
      return {};
    for (unsigned p = r; p-- > 0;) {
      Value prev = ptrCache.lookup(p);
      if (!prev)
        continue;
      std::optional<int64_t> dim;
      bool oneDim = true;
      for (int64_t d = 0; d < view.rank() && oneDim; ++d) {
        if (offsets[p][d] == offsets[r][d])
          continue;
        oneDim = !dim && !wraps[d];
        dim = d;
      }
      if (!oneDim || !dim)
        continue;
      Value delta = arith::MulIOp::create(
          b, loc,
          intConst(b, loc, view.indexType, offsets[r][*dim] - offsets[p][*dim]),
          view.strides[*dim], linearFlags());
      return LLVM::GEPOp::create(b, loc, ptrType(b), element, prev,
                                 ValueRange{delta});
    }
    return {};
  }

  Value emitPointer(OpBuilder &b, unsigned r) {
    if (Value chained = emitChainedPointer(b, r))
      return chained;
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
  bool chainAddresses;
  Value owner, basePtr;
  SmallVector<Value> base, starts, first;
  SmallVector<int64_t> baseMax;
  SmallVector<bool> wraps, sharedDims;
  /// checkedRuns's registers (empty: all).
  SmallVector<bool> checked;
  Value sharedOk;
  llvm::DenseMap<unsigned, Value> okCache, ownOkCache, ptrCache;
};

/// A run-time check, uniform over the program, that vector accesses of
/// `vecElems` elements along `dim` are aligned. (A run that straddles the
/// end of the view falls back to scalar accesses on its own.)
Value emitVectorizable(OpBuilder &b, Location loc, const View &view,
                       ValueRange tileOffsets, int64_t dim, unsigned vecElems,
                       unsigned elemBytes) {
  auto divisible = [&](Value v) {
    Type type = v.getType();
    Value rem =
        arith::AndIOp::create(b, loc, v, intConst(b, loc, type, vecElems - 1));
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
      b, loc, VectorType::get({int64_t(parts.size())}, parts[0].getType()),
      parts);
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

} // namespace

//===----------------------------------------------------------------------===//
// What a load or store may assume
//===----------------------------------------------------------------------===//

namespace {

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

/// A layout order with `dim` fastest, then the others from the innermost.
static SmallVector<unsigned> orderFrom(int64_t dim, int64_t rank) {
  SmallVector<unsigned> order{unsigned(dim)};
  for (int64_t d = rank - 1; d >= 0; --d)
    if (d != dim)
      order.push_back(d);
  return order;
}

RankedTensorType scalarFallbackTile(RankedTensorType tile, MemRefType view,
                                    const VectorPlan &plan) {
  if (plan.elems <= 1 ||
      staticStride(view, plan.dim) != std::optional<int64_t>(1) ||
      fallbackStagingBytes(tile) > kMaxFallbackStagingBytes)
    return {};
  SmallVector<unsigned> order = orderFrom(plan.dim, tile.getRank());
  return withLayout(
      tile, getDefaultBlockedLayout(tile.getContext(), tile.getShape(), 1,
                                    getNumWarps(tile.getEncoding()), order));
}

/// The argument attribute `name` of the tile.kernel argument `view` is; null
/// when `view` is no kernel argument or has no such attribute.
template <typename AttrT> AttrT kernelArgAttr(Value view, StringRef name) {
  auto arg = dyn_cast<BlockArgument>(view);
  auto kernel =
      arg ? dyn_cast_if_present<KernelOp>(arg.getOwner()->getParentOp())
          : nullptr;
  return kernel ? kernel.getArgAttrOfType<AttrT>(arg.getArgNumber(), name)
                : AttrT();
}

/// The largest power of two known to divide `view`'s size along `dim`: a
/// static size or a kernel view's tile.size_divisibility.
int64_t viewSizeDivisor(Value view, int64_t dim) {
  auto type = dyn_cast<MemRefType>(view.getType());
  if (!type || dim < 0 || dim >= type.getRank())
    return 1;
  if (!type.isDynamicDim(dim))
    return powerOfTwoDivisor(type.getDimSize(dim));
  auto divisors = kernelArgAttr<DenseI64ArrayAttr>(
      view, KernelOp::getSizeDivisibilityAttrName());
  if (!divisors || dim >= int64_t(divisors.size()))
    return 1;
  return powerOfTwoDivisor(divisors[dim]);
}

/// The largest power of two known to divide the size `dim` reads.
int64_t sizeDivisor(memref::DimOp dim) {
  std::optional<int64_t> index = dim.getConstantIndex();
  return index ? viewSizeDivisor(dim.getSource(), *index) : 1;
}

/// Whether an index value is provably non-negative: constants, grid
/// indices, sizes, loop induction variables from non-negative bounds, sums,
/// products and minima of those, their unsigned quotients and remainders,
/// and maxima with one of those.
bool knownNonNegative(Value value, unsigned depth = 0) {
  if (depth > 16)
    return false;
  if (auto constant = getConstantIntValue(value))
    return *constant >= 0;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto loop = dyn_cast_if_present<scf::ForOp>(arg.getOwner()->getParentOp());
    return loop && arg == loop.getInductionVar() &&
           knownNonNegative(loop.getLowerBound(), depth + 1);
  }
  Operation *op = value.getDefiningOp();
  if (isa<ProgramIdOp, NumProgramsOp, memref::DimOp>(op))
    return true;
  // A cast to index widens (a narrowing cast could wrap to a negative value).
  if (isa<arith::IndexCastOp>(op) && !op->getResult(0).getType().isIndex())
    return false;
  // An unsigned quotient or remainder is at most its dividend.
  if (isa<arith::DivUIOp, arith::RemUIOp>(op))
    return knownNonNegative(op->getOperand(0), depth + 1);
  if (isa<arith::MaxSIOp>(op))
    return llvm::any_of(op->getOperands(), [&](Value operand) {
      return knownNonNegative(operand, depth + 1);
    });
  if (isa<arith::AddIOp, arith::MulIOp, arith::MinSIOp, arith::IndexCastOp>(op))
    return llvm::all_of(op->getOperands(), [&](Value operand) {
      return knownNonNegative(operand, depth + 1);
    });
  return false;
}

/// Whether `view` is a kernel argument with 32-bit indices
/// (tile.index_bitwidth = 32).
bool hasNarrowIndices(Value view) {
  auto bits =
      kernelArgAttr<IntegerAttr>(view, KernelOp::getIndexBitwidthAttrName());
  return bits && bits.getInt() == 32;
}

/// Whether an index value is provably in [0, 2^31): a constant, a size of a
/// view that promises 32-bit indices (its launcher checks that), or the
/// minimum of such a value and a non-negative one.
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

/// Whether kernel arguments `a` and `b` are one view or views of one shape
/// (tile.same_shape_as, which the launchers check).
bool sameShape(Value a, Value b) {
  if (a == b)
    return true;
  auto argA = dyn_cast<BlockArgument>(a), argB = dyn_cast<BlockArgument>(b);
  if (!argA || !argB || argA.getOwner() != argB.getOwner() ||
      !isa_and_present<KernelOp>(argA.getOwner()->getParentOp()))
    return false;
  auto shapeOf = [](BlockArgument arg) -> int64_t {
    auto attr =
        kernelArgAttr<IntegerAttr>(arg, KernelOp::getSameShapeAsAttrName());
    return attr ? attr.getInt() : arg.getArgNumber();
  };
  return shapeOf(argA) == shapeOf(argB);
}

/// Whether every index of a tile of `extent` at `offset` along `dim` of
/// `view` is inside the view: `offset` is the induction variable of a loop
/// from a non-negative lower bound with a positive step up to (at most) the
/// view's size there, `for %i = %lb to min(..., dim(view, d), ...)`; for an
/// extent above 1 the bounds and the step are multiples of it, so the last
/// index is below the upper bound too, which may round the size down
/// (`size / c * c`, `size & -c`, `size - size % c`).
bool provenInBounds(Value offset, Value view, int64_t dim, int64_t extent) {
  auto arg = dyn_cast<BlockArgument>(offset);
  auto loop =
      arg ? dyn_cast_if_present<scf::ForOp>(arg.getOwner()->getParentOp())
          : nullptr;
  if (!loop || arg != loop.getInductionVar())
    return false;
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!step || *step <= 0 || !knownNonNegative(loop.getLowerBound()))
    return false;
  if (extent > 1 &&
      (*step % extent || knownDivisor(loop.getLowerBound()) % extent ||
       knownDivisor(loop.getUpperBound()) % extent))
    return false;
  std::function<bool(Value, unsigned)> boundedBySize = [&](Value ub,
                                                           unsigned depth) {
    if (depth > 8)
      return false;
    if (auto dimOp = ub.getDefiningOp<memref::DimOp>())
      return sameShape(dimOp.getSource(), view) &&
             dimOp.getConstantIndex() == dim;
    Operation *op = ub.getDefiningOp();
    if (isa_and_nonnull<arith::MinSIOp, arith::MinUIOp>(op))
      return boundedBySize(op->getOperand(0), depth + 1) ||
             boundedBySize(op->getOperand(1), depth + 1);
    // A non-negative x rounded down: (x / c) * c, x & -c, x - x % c.
    auto constant = [&](Value v) { return getConstantIntValue(v).value_or(0); };
    if (auto mul = dyn_cast_if_present<arith::MulIOp>(op))
      if (auto div = mul.getLhs().getDefiningOp<arith::DivUIOp>())
        return constant(div.getRhs()) > 0 &&
               constant(div.getRhs()) == constant(mul.getRhs()) &&
               boundedBySize(div.getLhs(), depth + 1);
    if (auto mask = dyn_cast_if_present<arith::AndIOp>(op))
      return constant(mask.getRhs()) < 0 &&
             boundedBySize(mask.getLhs(), depth + 1);
    if (auto sub = dyn_cast_if_present<arith::SubIOp>(op))
      if (auto rem = sub.getRhs().getDefiningOp<arith::RemUIOp>())
        return rem.getLhs() == sub.getLhs() && constant(rem.getRhs()) > 0 &&
               boundedBySize(sub.getLhs(), depth + 1);
    return false;
  };
  return boundedBySize(loop.getUpperBound(), 0);
}

} // namespace

int64_t fallbackStagingBytes(RankedTensorType tile) {
  Type element = tile.getElementType();
  return paddedElements(tile.getShape(), smemPad(element)) *
         storageBits(element) / 8;
}

std::optional<AccessOperands> accessOperands(Operation *op) {
  if (auto load = dyn_cast<LoadOp>(op))
    return AccessOperands{load.getView(), load.getResult().getType(),
                          load.getOffsets()};
  if (auto store = dyn_cast<StoreOp>(op))
    return AccessOperands{store.getView(), store.getValue().getType(),
                          store.getOffsets()};
  return std::nullopt;
}

int64_t powerOfTwoDivisor(int64_t v) {
  constexpr int64_t kMax = int64_t(1) << 30;
  if (v == 0)
    return kMax;
  return std::min<int64_t>(
      kMax, int64_t(1) << llvm::countr_zero(uint64_t(std::abs(v))));
}

void proveCopiedTilesInBounds(LoweringState &state) {
  for (auto &[op, copy] : state.asyncCopies) {
    auto load = cast<LoadOp>(op);
    AccessFacts &facts = state.accesses[load];
    ArrayRef<int64_t> shape = load.getResult().getType().getShape();
    facts.inBounds.resize(shape.size());
    for (auto [d, extent] : llvm::enumerate(shape))
      if (extent > 1 &&
          provenInBounds(load.getOffsets()[d], load.getView(), d, extent))
        facts.inBounds[d] = true;
    if (!llvm::is_contained(facts.inBounds, true))
      facts.inBounds.clear();
  }
}

namespace {

/// knownDivisor, where the loop-carried values of `assumed` are taken to be
/// multiples of anything (whatever their initial and next values share).
int64_t divisorOf(Value value, unsigned depth,
                  llvm::SmallPtrSetImpl<Value> &assumed) {
  constexpr int64_t kMax = int64_t(1) << 30;
  if (depth > 16)
    return 1;
  auto of = [&](Value v) { return divisorOf(v, depth + 1, assumed); };
  if (auto constant = getConstantIntValue(value))
    return powerOfTwoDivisor(*constant);
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto loop = dyn_cast_if_present<scf::ForOp>(arg.getOwner()->getParentOp());
    if (!loop)
      return 1;
    if (arg == loop.getInductionVar())
      return std::min(of(loop.getLowerBound()), of(loop.getStep()));
    // A loop-carried value: what its initial value and its next value share,
    // the next one computed as if it were a multiple of anything. Every
    // op here only keeps or multiplies its operands' divisors, so if it is a
    // multiple of that, so is the next value.
    if (!assumed.insert(arg).second)
      return kMax;
    unsigned i = arg.getArgNumber() - 1;
    int64_t divisor =
        std::min(of(loop.getInitArgs()[i]),
                 of(loop.getBody()->getTerminator()->getOperand(i)));
    assumed.erase(arg);
    return divisor;
  }
  Operation *op = value.getDefiningOp();
  if (isa<arith::MulIOp>(op))
    return std::min(kMax, of(op->getOperand(0)) * of(op->getOperand(1)));
  // One of the operands (a minimum, a remainder by a multiple of the
  // divisor, a choice) or a combination of them.
  if (isa<arith::AddIOp, arith::SubIOp, arith::MinSIOp, arith::MaxSIOp,
          arith::MinUIOp, arith::MaxUIOp, arith::RemSIOp, arith::RemUIOp>(op))
    return std::min(of(op->getOperand(0)), of(op->getOperand(1)));
  if (auto select = dyn_cast<arith::SelectOp>(op))
    return std::min(of(select.getTrueValue()), of(select.getFalseValue()));
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op))
    return of(op->getOperand(0));
  if (auto dim = dyn_cast<memref::DimOp>(op))
    return sizeDivisor(dim);
  if (isa<arith::ShLIOp>(op))
    if (auto shift = getConstantIntValue(op->getOperand(1)))
      return std::min(kMax, of(op->getOperand(0))
                                << std::min<int64_t>(*shift, 30));
  return 1;
}

} // namespace

int64_t knownDivisor(Value value, unsigned depth) {
  llvm::SmallPtrSet<Value, 4> assumed;
  return divisorOf(value, depth, assumed);
}

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

Value viewRoot(Value view) {
  while (auto viewLike = view.getDefiningOp<ViewLikeOpInterface>())
    view = viewLike.getViewSource();
  return view;
}

namespace {

/// Whether each thread touches the same elements in both accesses.
bool sameElementsPerThread(const AccessOperands &a, const AccessOperands &b) {
  return a.view == b.view && a.tile == b.tile &&
         llvm::equal(a.offsets, b.offsets);
}

/// Whether `offsets` (of a `shape` tile) reach disjoint elements in the
/// iterations of `loop`: each is loop-invariant, or one is the induction
/// variable (plus an invariant) and the constant step covers the tile there.
bool disjointIterations(scf::ForOp loop, ValueRange offsets,
                        ArrayRef<int64_t> shape) {
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  Value iv = loop.getInductionVar();
  bool invariant = true;
  for (auto [dim, offset] : llvm::enumerate(offsets)) {
    if (loop.isDefinedOutsideOfLoop(offset))
      continue;
    invariant = false;
    Value stripped = offset;
    if (auto cast = stripped.getDefiningOp<arith::IndexCastOp>())
      stripped = cast.getIn();
    if (auto add = stripped.getDefiningOp<arith::AddIOp>()) {
      if (loop.isDefinedOutsideOfLoop(add.getLhs()))
        stripped = add.getRhs();
      else if (loop.isDefinedOutsideOfLoop(add.getRhs()))
        stripped = add.getLhs();
    }
    if (stripped == iv && step && *step >= shape[dim])
      return true;
  }
  return invariant;
}

/// A tile.load or tile.store, its operands and the value its view is a view
/// of.
struct ViewAccess {
  Operation *op;
  AccessOperands operands;
  Value root;
};

/// Whether `earlier` (an access to the same view) may run before `later` in
/// one program and touch elements that other threads touch in `later`.
bool needsOrder(const ViewAccess &earlier, const ViewAccess &later) {
  const AccessOperands &b = later.operands;
  bool same = sameElementsPerThread(earlier.operands, b);
  // Before it in program order: in the block of one of later's ancestors.
  if (earlier.op != later.op && !same)
    for (Operation *at = later.op; at; at = at->getParentOp()) {
      if (isa<KernelOp>(at))
        break;
      if (Operation *ancestor =
              at->getBlock()->findAncestorOpInBlock(*earlier.op))
        if (ancestor != at && ancestor->isBeforeInBlock(at))
          return true;
    }
  // In an earlier iteration of a loop around both.
  for (Operation *loop = later.op->getParentOp(); loop && !isa<KernelOp>(loop);
       loop = loop->getParentOp()) {
    if (!isa<LoopLikeOpInterface>(loop) || !loop->isAncestor(earlier.op))
      continue;
    auto forOp = dyn_cast<scf::ForOp>(loop);
    if (!same || !forOp ||
        !disjointIterations(forOp, b.offsets, b.tile.getShape()))
      return true;
  }
  return false;
}

} // namespace

void orderViewAccesses(KernelOp kernel, LoweringState &state) {
  SmallVector<ViewAccess> accesses;
  kernel.walk([&](Operation *op) {
    if (std::optional<AccessOperands> operands = accessOperands(op))
      accesses.push_back({op, *operands, viewRoot(operands->view)});
  });
  for (const ViewAccess &later : accesses)
    for (const ViewAccess &earlier : accesses)
      if ((isa<StoreOp>(earlier.op) || isa<StoreOp>(later.op)) &&
          earlier.root == later.root && needsOrder(earlier, later)) {
        state.accesses[later.op].barrierBefore = true;
        break;
      }
}

/// A layout of `tile` for adds one element an instruction along `dim`: the
/// lanes of a warp cover one 32-byte sector of `dim` in each of several rows
/// (as many sectors as a warp's 128 bytes can fill), warps fill the other
/// dimensions first, so that a thread's elements along `dim` lie at constant
/// offsets from a few row addresses.
static RankedTensorType sectorRowsTile(RankedTensorType tile, int64_t dim) {
  ArrayRef<int64_t> shape = tile.getShape();
  int64_t rank = tile.getRank();
  SmallVector<unsigned> order = orderFrom(dim, rank);
  SmallVector<unsigned> spt(rank, 1), tpw(rank, 1), wpc(rank, 1);
  int64_t sectorElems =
      std::max<int64_t>(1, 256 / storageBits(tile.getElementType()));
  unsigned lanes = kWarpSize, warps = getNumWarps(tile.getEncoding());
  auto give = [](unsigned &left, unsigned &to, int64_t room) {
    unsigned n = llvm::bit_floor(uint64_t(std::clamp<int64_t>(room, 1, left)));
    to *= n;
    left /= n;
  };
  give(lanes, tpw[dim], std::min(sectorElems, shape[dim]));
  for (unsigned d : ArrayRef(order).drop_front())
    give(lanes, tpw[d], shape[d]);
  give(lanes, tpw[dim], shape[dim] / tpw[dim]); // a narrow tile: wider rows
  tpw[order.back()] *= lanes;                   // what is left replicates
  for (unsigned d : llvm::reverse(order))
    give(warps, wpc[d], shape[d] / tpw[d]);
  wpc[order.back()] *= warps;
  return withLayout(
      tile, BlockedLayoutAttr::get(tile.getContext(), spt, tpw, wpc, order));
}

void planScalarAdds(StoreOp store, bool vectorAdds, AccessFacts &facts) {
  RankedTensorType tile = store.getValue().getType();
  // A thread's run of `elems` along the contiguous dimension is `elems` red
  // instructions whose lanes lie `elems` elements apart, each touching
  // `elems` times the sectors it adds to. From runs of 4 (4x the sectors),
  // the adds go through shared memory into sector rows, as Triton's do
  // (measured on a 64x64 f32 add from sizePerThread [1, 4] on sm_80: 1,040
  // sectors, not 4,160; 48 registers, not 52). Not an mma accumulator's
  // pairs: in sm_80's stream-K matmul that halved the adds' sectors (303,104
  // in all, not 319,488) but took 111 registers, not 61, and 3% more warp
  // instructions.
  if (!store.getAdd() || (vectorAdds && tile.getElementType().isF32()) ||
      facts.plan.elems < 4 ||
      staticStride(cast<MemRefType>(store.getView().getType()),
                   facts.plan.dim) != std::optional<int64_t>(1))
    return;
  // They restage every time: the fewest instructions within a slice's bytes
  // (where that does not fit, the scalar fallback's tile, if any, stays).
  RankedTensorType rows = sectorRowsTile(tile, facts.plan.dim);
  StagingLayout staging = restageLayout(tile, rows, kRestageSliceBytes);
  if (restageBytes(tile, rows, staging) > kRestageSliceBytes)
    return;
  facts.fallback = rows;
  facts.scalarAddStaging = staging;
}

StagingLayout fallbackStaging(RankedTensorType tile, const AccessFacts &facts) {
  // The scalar fallback's area is reserved even where it never runs: the
  // fewest bytes.
  return facts.scalarAddStaging.value_or(
      StagingLayout::padded(smemPad(tile.getElementType())));
}

int64_t scalarAddStagingBytes(StoreOp store, const AccessFacts &facts) {
  return restageBytes(store.getValue().getType(), facts.fallback,
                      *facts.scalarAddStaging);
}

AccessFacts analyzeAccess(const AccessOperands &access) {
  auto [view, tile, offsets] = access;
  auto viewType = cast<MemRefType>(view.getType());
  AccessFacts facts;
  facts.plan = planVector(tile, viewType);
  for (auto [d, extent] : llvm::enumerate(tile.getShape())) {
    facts.inBounds.push_back(extent == 1 &&
                             provenInBounds(offsets[d], view, d, extent));
    facts.nonNegativeStarts.push_back(knownNonNegative(offsets[d]));
    facts.boundsGroups.push_back(
        std::min(viewSizeDivisor(view, d), knownDivisor(offsets[d])));
  }
  if (!llvm::is_contained(facts.inBounds, true))
    facts.inBounds.clear();
  auto arg = dyn_cast<BlockArgument>(view);
  if (arg && isa_and_present<KernelOp>(arg.getOwner()->getParentOp())) {
    if (auto shapeOf = kernelArgAttr<IntegerAttr>(
            view, KernelOp::getSameShapeAsAttrName()))
      facts.sameShapeAs = shapeOf.getInt();
    facts.narrow = hasNarrowIndices(view);
    const VectorPlan &plan = facts.plan;
    if (plan.elems > 1) {
      // Runs are powers of two (contiguousRuns).
      facts.wholeRuns = viewSizeDivisor(view, plan.dim) % plan.elems == 0;
      auto divisibility =
          kernelArgAttr<IntegerAttr>(view, KernelOp::getDivisibilityAttrName());
      int64_t bytes = plan.elems * storageBits(tile.getElementType()) / 8;
      // The promise covers the dynamic strides; a static one beside the
      // vector dimension must keep it too.
      auto keepsRuns = [&](int64_t d) {
        std::optional<int64_t> stride = staticStride(viewType, d);
        return d == plan.dim || viewType.getDimSize(d) == 1 || !stride ||
               *stride % plan.elems == 0;
      };
      facts.aligned =
          divisibility && divisibility.getInt() % bytes == 0 &&
          staticStride(viewType, plan.dim) == std::optional<int64_t>(1) &&
          knownDivisor(offsets[plan.dim]) % plan.elems == 0 &&
          llvm::all_of(llvm::seq<int64_t>(viewType.getRank()), keepsRuns);
    }
  }
  if (!facts.aligned)
    facts.fallback = scalarFallbackTile(tile, viewType, facts.plan);
  return facts;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// The values of 1:1-converted operands (tile offsets) in a 1:N adaptor.
SmallVector<Value> singleValues(ArrayRef<ValueRange> ranges) {
  SmallVector<Value> values;
  for (ValueRange range : ranges)
    values.push_back(range.front());
  return values;
}

/// In the vector branch the run-time check proved the fastest stride is 1.
View vectorView(OpBuilder &b, Location loc, const View &view,
                const VectorPlan &plan, unsigned vecElems) {
  View result = view;
  if (vecElems > 1)
    result.strides[plan.dim] = intConst(b, loc, view.indexType, 1);
  return result;
}

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
    rewriter.replaceOpWithNewOp<arith::IndexCastOp>(op, rewriter.getIndexType(),
                                                    view.sizes[*dim]);
    return success();
  }
};

/// The address of element `indices` of a view (its converted `values`)
/// from its pointer and strides, with no bounds check (as upstream's
/// semantics: out of bounds is undefined); failure unless the memref is a
/// view argument.
FailureOr<Value> elementPtr(Operation *op, OpBuilder &b, ValueRange values,
                            MemRefType type, ArrayRef<ValueRange> indices) {
  Location loc = op->getLoc();
  if (!isViewType(type) || values.size() != size_t(1 + 2 * type.getRank()))
    return op->emitOpError("in a tile.kernel must access a view argument");
  View view = unpackView(b, loc, values, type);
  Value offset = i64Const(b, loc, 0);
  for (auto [index, stride] : llvm::zip(indices, view.strides)) {
    Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(), index.front());
    offset = arith::AddIOp::create(b, loc, offset,
                                   arith::MulIOp::create(b, loc, i, stride));
  }
  return LLVM::GEPOp::create(b, loc,
                             LLVM::LLVMPointerType::get(b.getContext(), 1),
                             storageType(b, type.getElementType()), view.ptr,
                             ValueRange{offset})
      .getResult();
}

/// memref.load and memref.store of one element of a view (elementPtr). i1
/// is a byte in memory, as in tile.load and tile.store (upstream's lowering
/// asserts on i1).
template <typename Op> struct ElementAccessLowering : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename TilePattern<Op>::OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MemRefType type = op.getMemRefType();
    FailureOr<Value> ptr = elementPtr(op, rewriter, adaptor.getMemref(), type,
                                      adaptor.getIndices());
    if (failed(ptr))
      return failure();
    Type element = type.getElementType();
    if constexpr (std::is_same_v<Op, memref::LoadOp>) {
      Value loaded = LLVM::LoadOp::create(rewriter, loc,
                                          storageType(rewriter, element), *ptr);
      rewriter.replaceOp(op, fromStorage(rewriter, loc, loaded, element));
    } else {
      LLVM::StoreOp::create(
          rewriter, loc, toStorage(rewriter, loc, adaptor.getValue().front()),
          *ptr);
      rewriter.eraseOp(op);
    }
    return success();
  }
};

/// memref.atomic_rmw addi of one i32 element of a view, which the program
/// does once, as a lock would (docs/tile-dialect.md): a barrier (every
/// thread's writes before it are done), then its first thread adds between
/// two device-scope fences (membar.gl: whatever the program wrote before is
/// visible to a program that sees the add, and what it reads after sees
/// what programs wrote before their adds) and leaves the old value in
/// shared memory, which every thread reads after a second barrier.
struct AtomicLowering : TilePattern<memref::AtomicRMWOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(memref::AtomicRMWOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (op.getKind() != arith::AtomicRMWKind::addi ||
        !op.getValue().getType().isInteger(32)) // runOnOperation reports it
      return rewriter.notifyMatchFailure(op, "not an i32 addi");
    FailureOr<Value> ptr = elementPtr(op, rewriter, adaptor.getMemref(),
                                      op.getMemRefType(), adaptor.getIndices());
    if (failed(ptr))
      return failure();
    KernelState &ks = state.get(op);
    useScratch(rewriter, loc, ks, state, op);
    Type i32 = rewriter.getI32Type();
    Value slot = sharedPtr(rewriter, loc, ks, i32, i32Const(rewriter, loc, 0));
    barrier(rewriter, loc);
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        ks.tid, i32Const(rewriter, loc, 0));
    scf::IfOp::create(rewriter, loc, first, [&](OpBuilder &b, Location) {
      Value old = emitAsm(b, loc, i32, {*ptr, adaptor.getValue().front()},
                          "membar.gl;\n\tatom.global.add.u32 $0, [$1], $2;\n\t"
                          "membar.gl;",
                          "=r,l,r", /*sideEffects=*/true)
                      .front();
      LLVM::StoreOp::create(b, loc, old, slot);
      scf::YieldOp::create(b, loc);
    });
    barrier(rewriter, loc);
    rewriter.replaceOpWithNewOp<LLVM::LoadOp>(op, i32, slot);
    return success();
  }
};

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
    if (facts.barrierBefore)
      barrier(rewriter, loc);
    View view = accessView(rewriter, loc, adaptor.getView(),
                           op.getView().getType(), facts, ks);
    SmallVector<Value> offsets = singleValues(adaptor.getOffsets());
    TypedAttr padAttr = registerAttr(op.getPaddingOrZero());
    Value padding = arith::ConstantOp::create(rewriter, loc, padAttr);
    VectorType resultType = vectorType(tile);
    if (auto copy = state.asyncCopies.find(op);
        copy != state.asyncCopies.end()) {
      // Straight into the dot's staging area (or a slot of its ring); the
      // dot reads it from there.
      const AsyncCopy &to = copy->second;
      Value slot = to.slot ? rewriter.getRemappedValue(to.slot) : Value();
      ScratchPlacement place = state.placements.lookup(to.dot);
      // A TMA ring's mbarriers (the pipeline's first dot's).
      ScratchPlacement barriers =
          to.mbarrierDot ? state.placements.lookup(to.mbarrierDot) : place;
      if (to.prefetched) {
        if (to.phase) // TMA brought this iteration's tiles
          waitMbarrier(
              rewriter, loc,
              mbarrierPtr(rewriter, loc, ks, barriers.mbarrierOffset, slot),
              rewriter.getRemappedValue(to.phase));
        rewriter.replaceOp(op,
                           LLVM::PoisonOp::create(rewriter, loc, resultType));
        return success();
      }
      useScratch(rewriter, loc, ks, state, op, slot, to.dot);
      if (to.barrier)
        leadingBarrier(rewriter, loc, ks);
      if (to.tensorMap >= 0) {
        if (to.barrier)
          initMbarriers(rewriter, loc, ks, barriers.mbarrierOffset,
                        barriers.slots, to.mbarriers);
        if (to.emptyPhase) // a producer: once the consumers left the slot
          waitMbarrier(rewriter, loc,
                       mbarrierPtr(rewriter, loc, ks,
                                   barriers.mbarrierOffset + 8 * barriers.slots,
                                   slot),
                       rewriter.getRemappedValue(to.emptyPhase));
        issueTmaCopy(
            rewriter, loc, ks, op, to, offsets,
            mbarrierPtr(rewriter, loc, ks, barriers.mbarrierOffset, slot));
        rewriter.replaceOp(op,
                           LLVM::PoisonOp::create(rewriter, loc, resultType));
        return success();
      }
      // 16-byte runs, or single elements (4 bytes) where the staging area
      // transposes the tile.
      unsigned elems = to.elementWise ? 1 : plan.elems;
      int64_t bytes = to.elementWise ? 4 : 16;
      Access access(rewriter, loc, tile,
                    vectorView(rewriter, loc, view, plan, elems), offsets,
                    element, ks, /*ownersOnly=*/false,
                    /*chainAddresses=*/false);
      TileCoords coords = emitCoords(rewriter, loc, tile, ks);
      SmallVector<Run> runs =
          access.checkedRuns(tile.getShape(), plan.dim, elems, /*whole=*/true);
      // The copy's size: 0 (zero fill) out of bounds. Where every run is all
      // in or all out (its start and the view's size are multiples of its
      // length), the checks that every run shares choose a size once and each
      // run's own then choose it or 0; elsewhere a run whose first element is
      // in bounds copies the elements before the view's end and zero-fills
      // the rest.
      bool whole = facts.wholeRuns || to.elementWise;
      Value shared = access.sharedInBounds(rewriter);
      if (to.enabled)
        shared = shared
                     ? arith::AndIOp::create(rewriter, loc, shared, to.enabled)
                     : to.enabled;
      auto orZero = [&](Value ok, Value size) {
        return ok ? arith::SelectOp::create(rewriter, loc, ok, size,
                                            i32Const(rewriter, loc, 0))
                  : size;
      };
      Value sharedSize =
          whole ? orZero(shared, i32Const(rewriter, loc, bytes)) : Value();
      for (Run run : runs) {
        if (run.count * bits != bytes * 8)
          return op.emitOpError("internal error: cp.async run is not ")
                 << bytes << " bytes";
        ArrayRef<Value> at =
            ArrayRef<Value>(coords.coords[run.first]).drop_front(to.unitDims);
        Value row = at[to.transposed], col = at[!to.transposed];
        Value dst =
            sharedPtr(rewriter, loc, ks, rewriter.getI8Type(),
                      stagedOperandOffset(rewriter, loc, to.dot, to.operand,
                                          usesWgmma(to.dot, state), row, col));
        Value size = sharedSize;
        if (!whole)
          size = orZero(shared, arith::MulIOp::create(
                                    rewriter, loc,
                                    access.inBoundsCount(rewriter, run.first,
                                                         plan.dim, elems),
                                    i32Const(rewriter, loc, bits / 8)));
        size = orZero(access.ownInBounds(rewriter, run.first), size);
        // .cg (L2 only) takes 16 bytes alone.
        NVVM::CpAsyncOp::create(rewriter, loc, dst,
                                access.pointer(rewriter, run.first), bytes,
                                bytes == 16 ? NVVM::LoadCacheModifierKind::CG
                                            : NVVM::LoadCacheModifierKind::CA,
                                size);
      }
      rewriter.replaceOp(op, LLVM::PoisonOp::create(rewriter, loc, resultType));
      return success();
    }
    useScratch(rewriter, loc, ks, state, op); // the scalar fallback's

    // Addresses are computed in each branch: the vector one needs few.
    // Outside loops, a thread's rows chain their addresses
    // (emitChainedPointer). Measured, ptxas gives more registers to chains in
    // loops (spills in attention on sm_90 and in a 128x128 sm_80 matmul) and
    // through a large tile's epilogue stores (168 against 154, 128x128 wgmma on
    // 4 warps), and fewer to a straight-line load's (48 against 53 for bias +
    // GELU).
    bool chain = !op->getParentOfType<scf::ForOp>();
    auto emit = [&](OpBuilder &b, unsigned vecElems) -> SmallVector<Value> {
      RankedTensorType accessTile =
          vecElems == 1 && facts.fallback ? facts.fallback : tile;
      Access access(b, loc, accessTile,
                    vectorView(b, loc, view, plan, vecElems), offsets, element,
                    ks, /*ownersOnly=*/false, chain);
      SmallVector<Value> values(access.offsets.size());
      SmallVector<Run> runs = access.checkedRuns(tile.getShape(), plan.dim,
                                                 vecElems, facts.wholeRuns);
      for (Run run : runs) {
        RunWords words(run, bits);
        Value pad =
            packWord(b, loc, SmallVector<Value>(words.elemsPerWord, padding),
                     words.wordBits);
        RunBounds bounds(b, loc, access, run, facts.wholeRuns);
        SmallVector<Value> loaded = emitPredicatedLoad(
            b, loc, access.pointer(b, run.first), bounds.full, words.wordBits,
            words.words, SmallVector<Value>(words.words, pad));
        for (unsigned w = 0; w < words.words; ++w)
          llvm::copy(
              unpackWord(b, loc, loaded[w], element, words.elemsPerWord, bits),
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
                    tb, loc, access.pointer(tb, r), access.inBounds(tb, r),
                    bits, 1, {elementToWord(tb, loc, values[r], bits)})[0];
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
        values =
            restageThroughShared(b, loc, ks, accessTile,
                                 pack(b, loc, vectorType(accessTile), values),
                                 tile, StagingLayout::padded(smemPad(element)));
      return {pack(b, loc, resultType, values)};
    };
    rewriter.replaceOp(op, emitVersioned(rewriter, loc, view, offsets, plan,
                                         bits, facts.aligned, emit));
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
      return op.emitOpError(
          "in a tile.kernel must gather from a view argument");
    View view = unpackView(rewriter, loc, values, type);
    RankedTensorType tile = op.getResult().getType();
    Type element = tile.getElementType();
    unsigned bits = storageBits(element);
    Type i64 = rewriter.getI64Type();
    SmallVector<SmallVector<Value>> indices;
    for (ValueRange index : adaptor.getIndices())
      indices.push_back(unpack(rewriter, loc, index.front()));
    Value padding =
        elementToWord(rewriter, loc,
                      arith::ConstantOp::create(
                          rewriter, loc, registerAttr(op.getPaddingOrZero())),
                      bits);
    auto ptrType = LLVM::LLVMPointerType::get(rewriter.getContext(), 1);
    SmallVector<Value> results;
    for (size_t e = 0, n = indices.front().size(); e < n; ++e) {
      Value offset = i64Const(rewriter, loc, 0);
      Value inBounds;
      for (auto [k, index] : llvm::enumerate(indices)) {
        Value i = index[e];
        if (i.getType() != i64)
          i = arith::ExtSIOp::create(rewriter, loc, i64, i);
        Value in = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::ult, i, view.sizes[k]);
        inBounds =
            inBounds ? arith::AndIOp::create(rewriter, loc, inBounds, in) : in;
        offset = arith::AddIOp::create(
            rewriter, loc, offset,
            arith::MulIOp::create(rewriter, loc, i, view.strides[k]));
      }
      Value ptr = LLVM::GEPOp::create(rewriter, loc, ptrType,
                                      storageType(rewriter, element), view.ptr,
                                      ValueRange{offset});
      Value word = emitPredicatedLoad(rewriter, loc, ptr, inBounds, bits, 1,
                                      {padding})[0];
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
    useScratch(rewriter, loc, ks, state, op); // the scalar fallback's
    RankedTensorType tile = op.getValue().getType();
    Type element = tile.getElementType();
    unsigned bits = storageBits(element);
    const AccessFacts &facts = state.accesses[op];
    const VectorPlan &plan = facts.plan;
    // Restaged adds pass a barrier before they touch the view.
    if (facts.barrierBefore && !facts.scalarAddStaging)
      barrier(rewriter, loc);
    View view = accessView(rewriter, loc, adaptor.getView(),
                           op.getView().getType(), facts, ks);
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
                                        fallbackStaging(tile, facts));
      }
      // Replicated elements are stored by one thread only, once each.
      Access access(b, loc, accessTile,
                    vectorView(b, loc, view, plan, vecElems), offsets, element,
                    ks, /*ownersOnly=*/true, /*chainAddresses=*/false);
      WriteOnce once(access.offsets, tile.getShape());
      SmallVector<Run> runs = access.checkedRuns(tile.getShape(), plan.dim,
                                                 vecElems, facts.wholeRuns);
      for (Run run : runs) {
        if (!once.claim(run))
          continue;
        RunBounds bounds(b, loc, access, run, facts.wholeRuns);
        if (op.getAdd()) {
          emitPredicatedAdd(
              b, loc, access.pointer(b, run.first), bounds.full,
              ArrayRef<Value>(elements).slice(run.first, run.count),
              state.vectorAdds);
        } else {
          RunWords words(run, bits);
          SmallVector<Value> packed;
          for (unsigned w = 0; w < words.words; ++w)
            packed.push_back(packWord(
                b, loc,
                ArrayRef<Value>(elements).slice(
                    run.first + w * words.elemsPerWord, words.elemsPerWord),
                words.wordBits));
          emitPredicatedStore(b, loc, access.pointer(b, run.first), bounds.full,
                              words.wordBits, packed);
        }
        if (!bounds.partial)
          continue;
        // A run across the end of the view: its in-bounds part, one by one.
        scf::IfOp::create(b, loc, bounds.partial, [&](OpBuilder &tb, Location) {
          for (unsigned r = run.first; r < run.first + run.count; ++r) {
            Value ptr = access.pointer(tb, r), pred = access.inBounds(tb, r);
            if (op.getAdd())
              emitPredicatedAdd(tb, loc, ptr, pred, elements[r],
                                /*vector=*/false);
            else
              emitPredicatedStore(tb, loc, ptr, pred, bits,
                                  {elementToWord(tb, loc, elements[r], bits)});
          }
          scf::YieldOp::create(tb, loc);
        });
      }
      return {};
    };
    if (facts.scalarAddStaging)
      emit(rewriter, 1);
    else
      emitVersioned(rewriter, loc, view, offsets, plan, bits, facts.aligned,
                    emit);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateLoadStoreOpToNVVMPatterns(TileTypeConverter &converter,
                                       RewritePatternSet &patterns,
                                       LoweringState &state) {
  patterns.add<DimLowering, ElementAccessLowering<memref::LoadOp>,
               ElementAccessLowering<memref::StoreOp>, AtomicLowering,
               LoadLowering, StoreLowering, GatherLowering>(
      converter, patterns.getContext(), state);
}

} // namespace tileopt::nvvm
