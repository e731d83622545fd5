//===- ReduceOpToNVVM.cpp - tile.reduce -----------------------------------===//
//
// A reduction combines in registers first, then across the lanes that hold
// other elements of the axis (shfl.sync.bfly), then across warps through
// shared memory. The combiner region is cloned for each combine.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

namespace {

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
    Value word = type.isInteger()
                     ? v
                     : arith::BitcastOp::create(b, loc, b.getI64Type(), v);
    Value lo = arith::TruncIOp::create(b, loc, b.getI32Type(), word);
    Value hi = arith::TruncIOp::create(
        b, loc, b.getI32Type(),
        arith::ShRUIOp::create(b, loc, word, i64Const(b, loc, 32)));
    lo = arith::ExtUIOp::create(b, loc, b.getI64Type(), shfl32(lo));
    hi = arith::ExtUIOp::create(b, loc, b.getI64Type(), shfl32(hi));
    Value joined = arith::OrIOp::create(
        b, loc, lo, arith::ShLIOp::create(b, loc, hi, i64Const(b, loc, 32)));
    return type.isInteger()
               ? joined
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
    useScratch(rewriter, op.getLoc(), ks, state, op);
    auto inType = cast<RankedTensorType>(op.getOperands()[0].getType());
    Attribute layout = inType.getEncoding();
    if (!isa_and_present<BlockedLayoutAttr, MmaLayoutAttr>(layout))
      return op.emitOpError("lowering a reduction of a sliced layout is not "
                            "supported yet; convert the operand to a blocked "
                            "or mma layout first");
    auto blocked = dyn_cast<BlockedLayoutAttr>(layout);
    int64_t axis = op.getAxis();
    ArrayRef<int64_t> shape = inType.getShape();
    size_t numOperands = op.getOperands().size();
    SmallVector<SmallVector<Value>> inputs;
    for (ValueRange v : adaptor.getOperands())
      inputs.push_back(unpack(rewriter, loc, v.front()));
    SmallVector<SmallVector<int64_t>> offsets =
        getRegisterOffsets(layout, shape);

    // 1. In registers: group by the coordinates off the axis, then combine
    // each group's registers: one by one (a sum of products fuses into a
    // chain of fma), or for several operands (argmax) as a tree of
    // neighbours in axis order (the earlier element on the left), where a
    // combine of two computed indices costs more than of constant ones and
    // the tree has fewer of them.
    SmallVector<SmallVector<int64_t>> groupKeys;
    SmallVector<SmallVector<SmallVector<Value>>> members; // group, register
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
        members.push_back({values});
      } else {
        members[it - groupKeys.begin()].push_back(values);
      }
    }
    SmallVector<SmallVector<Value>> accs; // per group, per operand
    for (SmallVector<SmallVector<Value>> &level : members) {
      while (level.size() > 1) {
        SmallVector<SmallVector<Value>> next;
        if (numOperands == 1) {
          next.push_back(level[0]);
          for (size_t i = 1; i < level.size(); ++i)
            next[0] = combine(rewriter, op, next[0], level[i]);
          level = std::move(next);
          break;
        }
        for (size_t i = 0; i + 1 < level.size(); i += 2)
          next.push_back(combine(rewriter, op, level[i], level[i + 1]));
        if (level.size() % 2)
          next.push_back(level.back());
        level = std::move(next);
      }
      accs.push_back(level.front());
    }

    // 2. Across the lanes that hold distinct elements of the axis: a
    // butterfly over each lane bit that moves a thread along the axis only
    // (a bit that moves it nowhere, once wrapped, replicates).
    SmallVector<int64_t> origin = wrap(threadBase(layout, 0), shape);
    auto movesAlongAxis = [&](int64_t tid) {
      SmallVector<int64_t> moved = wrap(threadBase(layout, tid), shape);
      for (auto [d, c] : llvm::enumerate(moved))
        if ((c != origin[d]) != (int64_t(d) == axis))
          return false;
      return true;
    };
    for (int64_t bit = 1; bit < kWarpSize; bit *= 2) {
      if (!movesAlongAxis(bit))
        continue;
      for (SmallVector<Value> &acc : accs) {
        SmallVector<Value> other;
        for (Value v : acc)
          other.push_back(shuffleXor(rewriter, loc, v, bit));
        acc = combine(rewriter, op, acc, other);
      }
    }

    // 3. Across warps, through shared memory: the first `warps` warps along
    // the axis hold distinct elements, the others wrap onto them.
    auto [warpShift, wpc] = warpsAlong(layout, axis);
    int64_t warps = 1;
    while (warps < wpc && movesAlongAxis((warps << warpShift) * kWarpSize))
      warps *= 2;
    SmallVector<int64_t> resultShape(shape);
    resultShape.erase(resultShape.begin() + axis);
    if (warps > 1) {
      int64_t resultElems = 1;
      for (int64_t s : resultShape)
        resultElems *= s;
      // Group coordinates at run time: the thread base off the axis.
      SmallVector<Value> base = emitThreadBase(rewriter, loc, layout, ks);
      base.erase(base.begin() + axis);
      Value warpOnAxis = arith::AndIOp::create(
          rewriter, loc,
          arith::ShRUIOp::create(rewriter, loc, ks.warp,
                                 i32Const(rewriter, loc, warpShift)),
          i32Const(rewriter, loc, wpc - 1));
      // Each thread's groups get consecutive slots, so that its shared
      // accesses can be vectors: along a result dimension its `threads`
      // threads of `spt` elements cover without wrapping, element
      // base + rep * spt * threads + within goes to slot
      // base * reps + rep * spt + within. Elsewhere (and in mma layouts) the
      // slot is the element.
      SmallVector<Value> groupIndex;
      for (const SmallVector<int64_t> &key : groupKeys) {
        SmallVector<Value> coord;
        for (auto [d, size] : llvm::enumerate(resultShape)) {
          int64_t dim = int64_t(d) < axis ? d : d + 1;
          int64_t spt = 1, cover = 0;
          if (blocked) {
            spt = blocked.getSizePerThread()[dim];
            cover = spt * blocked.getThreadsPerWarp()[dim] *
                    blocked.getWarpsPerCTA()[dim];
          }
          if (blocked && cover <= size) {
            int64_t reps = size / cover;
            Value scaled =
                reps == 1
                    ? base[d]
                    : arith::MulIOp::create(rewriter, loc, base[d],
                                            i32Const(rewriter, loc, reps));
            coord.push_back(arith::AddIOp::create(
                rewriter, loc, scaled,
                i32Const(rewriter, loc, key[d] / cover * spt + key[d] % spt)));
            continue;
          }
          Value c = arith::AddIOp::create(rewriter, loc, base[d],
                                          i32Const(rewriter, loc, key[d]));
          coord.push_back(arith::AndIOp::create(
              rewriter, loc, c, i32Const(rewriter, loc, size - 1)));
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
      leadingBarrier(rewriter, loc, ks);
      for (auto [g, acc] : llvm::enumerate(accs))
        for (size_t k = 0; k < numOperands; ++k) {
          Value slot = arith::AddIOp::create(
              rewriter, loc,
              arith::MulIOp::create(rewriter, loc, warpOnAxis,
                                    i32Const(rewriter, loc, resultElems)),
              groupIndex[g]);
          Type t = acc[k].getType();
          Value ptr = sharedPtr(rewriter, loc, ks, storageType(rewriter, t),
                                slot, operandBase[k]);
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
            part.push_back(
                fromStorage(rewriter, loc,
                            LLVM::LoadOp::create(rewriter, loc,
                                                 storageType(rewriter, t), ptr),
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
          v = vector::BroadcastOp::create(rewriter, loc, vectorType(resultTile),
                                          v);
        results.push_back(v);
        continue;
      }
      Attribute expected = SliceLayoutAttr::get(op.getContext(), axis, layout);
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

} // namespace

void populateReduceOpToNVVMPatterns(TileTypeConverter &converter,
                                    RewritePatternSet &patterns,
                                    LoweringState &state) {
  patterns.add<ReduceLowering>(converter, patterns.getContext(), state);
}

} // namespace tileopt::nvvm
