//===- AssignLayouts.cpp - give every tile a distributed layout -----------===//
//
// Loads and stores anchor layouts (16 contiguous bytes per thread along the
// view's fastest dimension); every other value takes the layout its operands
// suggest, in program order, and a tile.convert_layout goes in where two
// layouts meet. tile-remove-layout-conversions cleans up afterwards.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Dialect/Tile/IR/Layouts.h"
#include "tileopt/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

namespace tileopt::tile {
#define GEN_PASS_DEF_TILEASSIGNLAYOUTS
#include "tileopt/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace tileopt::tile

using namespace mlir;
using namespace tileopt::tile;

namespace {

bool isTile(Value value) { return isa<RankedTensorType>(value.getType()); }

/// Tiles made from nothing (splat, iota, constants) and reshaped, converted
/// or combined without memory: any layout is free for them (they are
/// rematerialized where they are needed), so the layouts of other operands
/// win over theirs (a mask from iota yields to loaded data). A loop-carried
/// tile that starts as one is free too: the loop carries it in the layout
/// its body yields (assignFor).
bool isCheapProducer(Value value, unsigned depth = 0) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto forOp = dyn_cast_if_present<scf::ForOp>(arg.getOwner()->getParentOp());
    if (!forOp || depth > 8 || arg.getArgNumber() == 0)
      return false;
    return isCheapProducer(forOp.getInitArgs()[arg.getArgNumber() - 1],
                           depth + 1);
  }
  // Deep enough for a causal mask: iota, offset, expansion, reshape,
  // broadcast, difference, compare, negation, and the conversions between.
  Operation *op = value.getDefiningOp();
  if (!op || depth > 12)
    return false;
  if (isa<SplatOp, IotaOp, arith::ConstantOp>(op))
    return true;
  if (!isa<BroadcastOp, ExpandDimsOp, ReshapeOp, ConvertLayoutOp>(op) &&
      !op->hasTrait<OpTrait::Elementwise>())
    return false;
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return !isa<RankedTensorType>(operand.getType()) ||
           isCheapProducer(operand, depth + 1);
  });
}

class LayoutAssigner {
public:
  LayoutAssigner(MLIRContext *context, unsigned numWarps, unsigned smVersion,
                 bool wgmma)
      : context(context), numWarps(numWarps), smVersion(smVersion),
        wgmma(wgmma) {}

  LogicalResult run(KernelOp kernel) {
    return assignBlock(kernel.getBody().front());
  }

private:
  /// The default layout for a tile of `type` (rank 0 included): 16 bytes
  /// per thread along the last dimension.
  Attribute defaultLayout(RankedTensorType type,
                          ArrayRef<unsigned> order = {}) {
    unsigned bits = std::max(8u, type.getElementTypeBitWidth());
    unsigned vector = std::max(1u, 128 / bits);
    return getDefaultLayout(context, type.getShape(), vector, numWarps, order);
  }

  /// defaultLayout of a tile of rank 1 or more.
  BlockedLayoutAttr defaultBlockedLayout(RankedTensorType type) {
    return cast<BlockedLayoutAttr>(defaultLayout(type));
  }

  /// The layout that moves 16 contiguous bytes per thread along the view's
  /// dimension of stride 1 (the last dimension when strides are dynamic).
  Attribute accessLayout(RankedTensorType tile, MemRefType view) {
    if (tile.getRank() == 0)
      return defaultLayout(tile);
    auto [strides, offset] = view.getStridesAndOffset();
    unsigned rank = tile.getRank();
    unsigned fastest = rank - 1;
    for (unsigned d = 0; d < rank; ++d)
      if (strides[d] == 1)
        fastest = d;
    SmallVector<unsigned> order{fastest};
    for (int d = rank - 1; d >= 0; --d)
      if (unsigned(d) != fastest)
        order.push_back(d);
    return defaultLayout(tile, order);
  }

  /// Whether `dot` runs on tensor cores (getMmaK): sm_80 and newer, the tile
  /// in whole blocks of them.
  bool onTensorCores(DotOp dot) {
    RankedTensorType lhs = dot.getLhs().getType();
    int64_t m = lhs.getDimSize(0), k = lhs.getDimSize(1),
            n = dot.getAcc().getType().getDimSize(1);
    int64_t mmaK = getMmaK(dot);
    return mmaK && smVersion >= getMmaMinSmVersion(dot) && m % kMmaM == 0 &&
           n % kMmaN == 0 && k % mmaK == 0;
  }

  /// The layout of an i8 tile that only tensor-core dots read as their rhs,
  /// from a view contiguous along N: the dot stages it K-major (8-bit
  /// fragments hold 4 elements along K), so each thread loads 4 rows of up to
  /// 16 bytes along N and stores each column's 4 bytes as one word (byte
  /// stores of 16-byte rows before: a quarter of the stores). Null for any
  /// other load.
  Attribute byteBlockLayout(LoadOp load) {
    RankedTensorType type = load.getResult().getType();
    auto [strides, offset] = load.getView().getType().getStridesAndOffset();
    if (type.getRank() != 2 || type.getElementTypeBitWidth() != 8 ||
        strides.back() != 1 || type.getDimSize(0) % 4 != 0 ||
        load.getResult().use_empty() ||
        llvm::any_of(load.getResult().getUses(), [&](OpOperand &use) {
          auto dot = dyn_cast<DotOp>(use.getOwner());
          return !dot || use.getOperandNumber() != 1 || !onTensorCores(dot);
        }))
      return nullptr;
    // The default layout of a tile a quarter as tall (up to 16 bytes a
    // thread along N), each thread's rows then 4 times as many.
    BlockedLayoutAttr quarter = getDefaultBlockedLayout(
        context, {type.getDimSize(0) / 4, type.getDimSize(1)}, 16, numWarps,
        {1, 0});
    SmallVector<unsigned> spt(quarter.getSizePerThread());
    spt[0] *= 4;
    return BlockedLayoutAttr::get(context, spt, quarter.getThreadsPerWarp(),
                                  quarter.getWarpsPerCTA(), quarter.getOrder());
  }

  /// Whether a plain store writes a 32-bit tile straight from its mma layout:
  /// a thread's pair of adjacent elements is an 8-byte vector, and the four
  /// lanes of a row fill a 32-byte sector, so the warp writes whole sectors
  /// as a 16-byte layout does, with no staging through shared memory (which
  /// a persistent matmul's epilogue needs beside its pipeline's ring). Not
  /// above 64 elements a thread: a conversion in slices keeps fewer of their
  /// addresses and checks live (128x128 on 4 warps, sm_80: 214 registers
  /// against 255 for the direct store).
  bool storesFromMma(RankedTensorType tile, MemRefType view) {
    if (!isa_and_present<MmaLayoutAttr>(getLayout(tile)) ||
        tile.getElementTypeBitWidth() != 32 ||
        tile.getNumElements() > 64 * kWarpSize * int64_t(numWarps))
      return false;
    auto [strides, offset] = view.getStridesAndOffset();
    return !strides.empty() && strides.back() == 1;
  }

  /// The layout a store that adds takes, or null to keep the value's own.
  /// sm_90 adds f32 vectors: an mma fragment's pairs (red.global.add.v2.f32,
  /// storesFromMma), else 16 bytes in accessLayout (.v4). Elsewhere
  /// red.global.add moves one element, in any layout: a coalesced one would
  /// halve the sectors that a stream-K matmul's partial tile adds from its
  /// MMA registers, but its conversion and its rows' 64-bit addresses cost
  /// 44 more registers on sm_80 (64x64x32, 4 warps).
  Attribute addLayout(RankedTensorType tile, MemRefType view) {
    if (smVersion >= 90 && tile.getElementType().isF32() &&
        !storesFromMma(tile, view))
      return accessLayout(tile, view);
    return getLayout(tile);
  }

  /// Tensor cores (getMmaK) on sm_80 and newer when the tile divides into
  /// their blocks; else a blocked layout (CUDA cores). Chained dots
  /// (isChainedDot) give all warps to the rows, as Triton does: the row
  /// reductions between them stay in a warp, and the first product's
  /// registers are the second's operand.
  Attribute dotLayout(DotOp dot) {
    RankedTensorType lhs = dot.getLhs().getType();
    RankedTensorType acc = dot.getAcc().getType();
    int64_t m = lhs.getDimSize(0), n = acc.getDimSize(1);
    if (!onTensorCores(dot))
      return defaultLayout(acc);
    // Each doubling goes to the dimension with more mma blocks per warp (as
    // Triton does), so a warp's tile stays square-ish and the operand
    // fragments it loads from shared memory are few; never past the tile:
    // warps left over (a small tile) repeat the work of the first ones.
    // On sm_90a the warps tile rows, or warpgroups of four split the columns
    // too, when that fits wgmma (isWgmmaDot), each over a contiguous range
    // of columns (blockN).
    for (unsigned wm = numWarps; wgmma && wm >= 4; wm /= 2)
      if (unsigned wn = numWarps / wm; isWgmmaDot(m, n, {wm, wn}, dot))
        return MmaLayoutAttr::get(context, {wm, wn}, wn == 1 ? kMmaN : n / wn);
    if (m >= kMmaM * numWarps && isChainedDot(dot))
      return MmaLayoutAttr::get(context, {numWarps, 1});
    unsigned wm = 1, wn = 1;
    while (wm * wn < numWarps) {
      bool growM = (wm * 2) * kMmaM <= m, growN = (wn * 2) * kMmaN <= n;
      if (!growM && !growN)
        break;
      if (growM && (!growN || m / (kMmaM * wm) >= n / (kMmaN * wn)))
        wm *= 2;
      else
        wn *= 2;
    }
    return MmaLayoutAttr::get(context, {wm, wn});
  }

  /// Whether `dot`'s result reaches another dot's operand in its block, or
  /// its operands come from another dot there (attention's two products).
  static bool isChainedDot(DotOp dot) {
    Block *block = dot->getBlock();
    auto inBlock = [&](Operation *op) { return op->getBlock() == block; };
    ForwardSliceOptions forward;
    forward.filter = inBlock;
    SetVector<Operation *> users;
    getForwardSlice(dot.getResult(), &users, forward);
    for (Operation *user : users)
      if (auto other = dyn_cast<DotOp>(user))
        for (Value operand : {other.getLhs(), other.getRhs()})
          if (operand == dot.getResult() ||
              users.contains(operand.getDefiningOp()))
            return true;
    BackwardSliceOptions backward;
    backward.filter = inBlock;
    backward.omitBlockArguments = true;
    for (Value operand : {dot.getLhs(), dot.getRhs()}) {
      SetVector<Operation *> producers;
      if (Operation *def = operand.getDefiningOp(); def && inBlock(def)) {
        (void)getBackwardSlice(def, &producers, backward);
        producers.insert(def);
      }
      if (llvm::any_of(producers, [](Operation *op) { return isa<DotOp>(op); }))
        return true;
    }
    return false;
  }

  void setLayout(Value value, Attribute layout) {
    setTileType(value,
                withLayout(cast<RankedTensorType>(value.getType()), layout));
  }

  /// Makes `operand` of `op` have `layout`, inserting a conversion.
  void convertOperand(OpOperand &operand, Attribute layout) {
    Value value = operand.get();
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getEncoding() == layout)
      return;
    OpBuilder builder(operand.getOwner());
    auto convert = ConvertLayoutOp::create(builder, value.getLoc(),
                                           withLayout(type, layout), value);
    operand.set(convert);
  }

  /// The layout for an op whose tile operands should all share one: the
  /// layout of the first operand that is not made from nothing.
  Attribute pickOperandLayout(Operation *op) {
    Attribute chosen;
    for (Value operand : op->getOperands()) {
      if (!isTile(operand))
        continue;
      Attribute layout = getLayout(operand.getType());
      if (!chosen || !isCheapProducer(operand)) {
        chosen = layout;
        if (!isCheapProducer(operand))
          break;
      }
    }
    return chosen;
  }

  LogicalResult assignBlock(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block))
      if (failed(assignOp(&op)))
        return failure();
    return success();
  }

  LogicalResult assignOp(Operation *op) {
    // Ops without tiles need nothing, but their regions may hold tiles.
    bool hasTiles = llvm::any_of(op->getOperands(), isTile) ||
                    llvm::any_of(op->getResults(), isTile);
    // Terminators of loops and branches are handled with their parent.
    if (isa<scf::YieldOp, scf::ConditionOp>(op))
      return success();
    if (auto whileOp = dyn_cast<scf::WhileOp>(op))
      return assignWhile(whileOp);
    if (auto forOp = dyn_cast<scf::ForOp>(op))
      return assignFor(forOp);
    if (auto ifOp = dyn_cast<scf::IfOp>(op))
      return assignIf(ifOp);
    if (!hasTiles) {
      for (Region &region : op->getRegions())
        for (Block &block : region)
          if (failed(assignBlock(block)))
            return failure();
      return success();
    }
    for (Value result : op->getResults())
      if (isTile(result) && getLayout(result.getType()))
        return success(); // Already assigned (e.g. a conversion we made).

    if (auto load = dyn_cast<LoadOp>(op)) {
      RankedTensorType type = load.getResult().getType();
      Attribute layout = byteBlockLayout(load);
      setLayout(load.getResult(),
                layout ? layout : accessLayout(type, load.getView().getType()));
      return success();
    }
    if (auto store = dyn_cast<StoreOp>(op)) {
      RankedTensorType value = store.getValue().getType();
      MemRefType view = store.getView().getType();
      Attribute layout = store.getAdd() ? addLayout(value, view) : nullptr;
      if (!layout && storesFromMma(value, view))
        return success();
      convertOperand(store.getValueMutable(),
                     layout ? layout : accessLayout(value, view));
      return success();
    }
    if (isa<SplatOp, IotaOp, arith::ConstantOp>(op)) {
      Value result = op->getResult(0);
      setLayout(result,
                defaultLayout(cast<RankedTensorType>(result.getType())));
      return success();
    }
    if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
      // In place: the source's layout, unless that spreads the threads over
      // the broadcast dimensions so that each holds more of the result than
      // the default layout gives it (a 1x1 tile laid out down a unit
      // column, broadcast along a row of 4096: 4096 registers a thread).
      RankedTensorType result = broadcast.getResult().getType();
      Attribute layout = getLayout(broadcast.getSource().getType());
      Attribute fallback = defaultLayout(result);
      if (getElemsPerThread(layout, result.getShape()) >
          getElemsPerThread(fallback, result.getShape())) {
        convertOperand(broadcast.getSourceMutable(), fallback);
        layout = fallback;
      }
      setLayout(broadcast.getResult(), layout);
      return success();
    }
    if (auto expand = dyn_cast<ExpandDimsOp>(op)) {
      RankedTensorType resultType = expand.getResult().getType();
      Attribute source = getLayout(expand.getSource().getType());
      auto slice = dyn_cast<SliceLayoutAttr>(source);
      if (slice && slice.getDim() == expand.getAxis()) {
        setLayout(expand.getResult(), slice.getParent());
        return success();
      }
      BlockedLayoutAttr parent = defaultBlockedLayout(resultType);
      convertOperand(expand.getSourceMutable(),
                     SliceLayoutAttr::get(context, expand.getAxis(), parent));
      setLayout(expand.getResult(), parent);
      return success();
    }
    if (auto permute = dyn_cast<PermuteOp>(op)) {
      Attribute source = getLayout(permute.getSource().getType());
      if (permute.getSource().getType().getRank() == 0) {
        setLayout(permute.getResult(), source);
        return success();
      }
      if (!isa<BlockedLayoutAttr>(source)) {
        source = defaultBlockedLayout(permute.getSource().getType());
        convertOperand(permute.getSourceMutable(), source);
      }
      setLayout(permute.getResult(),
                permuteLayout(source, permute.getPermutation()));
      return success();
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      // Inserting or dropping unit dimensions keeps the registers in place
      // (a dot's accumulator as one matrix of a batch); any other reshape
      // moves the tile through shared memory.
      RankedTensorType from = reshape.getSource().getType();
      RankedTensorType to = reshape.getResult().getType();
      Attribute inPlace =
          reshapeInPlaceLayout(getLayout(from), from.getShape(), to.getShape());
      setLayout(reshape.getResult(), inPlace ? inPlace : defaultLayout(to));
      return success();
    }
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      // Reductions run on blocked and mma layouts (a dot's result is reduced
      // where it is).
      Attribute layout = pickOperandLayout(op);
      if (!isa<BlockedLayoutAttr, MmaLayoutAttr>(layout))
        layout = defaultBlockedLayout(
            cast<RankedTensorType>(op->getOperand(0).getType()));
      for (OpOperand &operand : reduce->getOpOperands())
        convertOperand(operand, layout);
      for (Value result : reduce.getResults())
        if (isTile(result))
          setLayout(result,
                    SliceLayoutAttr::get(context, reduce.getAxis(), layout));
      return success();
    }
    if (auto dot = dyn_cast<DotOp>(op)) {
      // Operands keep their layouts (the lowering stages them through shared
      // memory); the accumulator takes the tensor-core layout when it can.
      // An lhs already in that layout stays in registers (isRegisterLhs).
      Attribute layout = dotLayout(dot);
      for (OpOperand *operand : {&dot.getLhsMutable(), &dot.getRhsMutable()}) {
        Attribute have = getLayout(operand->get().getType());
        if (!isa<BlockedLayoutAttr>(have) &&
            !(operand == &dot.getLhsMutable() && have == layout &&
              isRegisterLhs(dot, layout)))
          convertOperand(*operand, defaultBlockedLayout(cast<RankedTensorType>(
                                       operand->get().getType())));
      }
      convertOperand(dot.getAccMutable(), layout);
      setLayout(dot.getResult(), layout);
      return success();
    }
    if (auto gather = dyn_cast<GatherOp>(op)) {
      // Index tiles are made from iotas and broadcasts (whose layouts may
      // replicate them over threads): the result's default layout spreads
      // the per-element loads over the block.
      Attribute layout = defaultLayout(gather.getResult().getType());
      for (OpOperand &index : gather.getIndicesMutable())
        convertOperand(index, layout);
      setLayout(gather.getResult(), layout);
      return success();
    }
    if (op->hasTrait<OpTrait::Elementwise>() || isa<arith::SelectOp>(op)) {
      Attribute layout = pickOperandLayout(op);
      for (OpOperand &operand : op->getOpOperands())
        if (isTile(operand.get()))
          convertOperand(operand, layout);
      for (Value result : op->getResults())
        setLayout(result, layout);
      return success();
    }
    return op->emitOpError("cannot assign a layout to the tiles of this op");
  }

  LogicalResult assignFor(scf::ForOp forOp) {
    Block &body = *forOp.getBody();
    auto yield = cast<scf::YieldOp>(body.getTerminator());
    for (auto [index, init, arg, result] :
         llvm::enumerate(forOp.getInitArgs(), forOp.getRegionIterArgs(),
                         forOp.getResults())) {
      if (!isTile(init))
        continue;
      // An accumulator that a dot updates stays in the dot's layout across
      // iterations, also where the body restarts it (from zeros at a
      // persistent kernel's next tile: a select between it and another
      // value) or rescales it (attention's acc * alpha) on its way to the
      // dot: then a conversion is of the other operand, as a row of scales
      // before its broadcast. Other loop-carried tiles keep their initial
      // layout.
      Attribute layout = getLayout(init.getType());
      auto accumulates = [&](Value acc) {
        Operation *def = acc.getDefiningOp();
        return acc == arg || (def &&
                              (def->hasTrait<OpTrait::Elementwise>() ||
                               isa<arith::SelectOp>(def)) &&
                              llvm::is_contained(def->getOperands(), arg));
      };
      if (auto dot = yield.getOperand(index).getDefiningOp<DotOp>())
        if (accumulates(dot.getAcc())) {
          layout = dotLayout(dot);
          convertOperand(forOp.getInitArgsMutable()[index], layout);
        }
      setLayout(arg, layout);
      setLayout(result, layout);
    }
    if (failed(assignBlock(body)))
      return failure();
    for (auto [index, arg] : llvm::enumerate(forOp.getRegionIterArgs()))
      if (isTile(arg))
        carryAsYielded(forOp, index);
    for (OpOperand &operand : yield->getOpOperands())
      if (isTile(operand.get()))
        convertOperand(
            operand,
            getLayout(forOp.getResult(operand.getOperandNumber()).getType()));
    return success();
  }

  /// Carries loop-carried tile `index` in the layout the body yields it in
  /// when the body converts it to that layout anyway: the conversion at the
  /// yield and the one in the body cancel (tile-remove-layout-conversions
  /// folds them), and the init is converted once, before the loop. The
  /// result's users come later in program order: they take it as it is.
  void carryAsYielded(scf::ForOp forOp, unsigned index) {
    BlockArgument arg = forOp.getRegionIterArgs()[index];
    Value yielded = forOp.getBody()->getTerminator()->getOperand(index);
    Attribute want = getLayout(yielded.getType());
    Attribute have = getLayout(arg.getType());
    if (want == have || !llvm::any_of(arg.getUsers(), [&](Operation *user) {
          auto convert = dyn_cast<ConvertLayoutOp>(user);
          return convert && getLayout(convert.getType()) == want;
        }))
      return;
    setLayout(arg, want);
    setLayout(forOp.getResult(index), want);
    OpBuilder builder = OpBuilder::atBlockBegin(forOp.getBody());
    auto inBody = ConvertLayoutOp::create(
        builder, arg.getLoc(),
        withLayout(cast<RankedTensorType>(arg.getType()), have), arg);
    arg.replaceAllUsesExcept(inBody, inBody);
    convertOperand(forOp.getInitArgsMutable()[index], want);
  }

  /// scf.while carries tiles in the layout of their initial values; what
  /// the condition forwards keeps its layout into the body and the results.
  LogicalResult assignWhile(scf::WhileOp whileOp) {
    Block &before = whileOp.getBefore().front();
    for (auto [init, arg] :
         llvm::zip(whileOp.getInits(), before.getArguments()))
      if (isTile(init))
        setLayout(arg, getLayout(init.getType()));
    if (failed(assignBlock(before)))
      return failure();
    scf::ConditionOp condition = whileOp.getConditionOp();
    Block &after = whileOp.getAfter().front();
    for (auto [forwarded, arg, result] : llvm::zip(
             condition.getArgs(), after.getArguments(), whileOp.getResults()))
      if (isTile(forwarded)) {
        setLayout(arg, getLayout(forwarded.getType()));
        setLayout(result, getLayout(forwarded.getType()));
      }
    if (failed(assignBlock(after)))
      return failure();
    Operation *yield = after.getTerminator();
    for (OpOperand &operand : yield->getOpOperands())
      if (isTile(operand.get()))
        convertOperand(
            operand,
            getLayout(
                before.getArgument(operand.getOperandNumber()).getType()));
    return success();
  }

  LogicalResult assignIf(scf::IfOp ifOp) {
    if (failed(assignBlock(*ifOp.thenBlock())))
      return failure();
    if (ifOp.elseBlock() && failed(assignBlock(*ifOp.elseBlock())))
      return failure();
    for (Value result : ifOp.getResults()) {
      if (!isTile(result))
        continue;
      unsigned index = cast<OpResult>(result).getResultNumber();
      Attribute layout =
          getLayout(ifOp.thenYield().getOperand(index).getType());
      setLayout(result, layout);
      if (ifOp.elseBlock())
        convertOperand(ifOp.elseYield()->getOpOperand(index), layout);
    }
    return success();
  }

  MLIRContext *context;
  unsigned numWarps;
  unsigned smVersion;
  bool wgmma; // the chip hasWgmma
};

struct TileAssignLayouts
    : tileopt::tile::impl::TileAssignLayoutsBase<TileAssignLayouts> {
  using Base::Base;

  void runOnOperation() override {
    if (numWarps == 0 || !llvm::isPowerOf2_32(numWarps) || numWarps > 32) {
      getOperation().emitError("tile-assign-layouts: num-warps must be a power "
                               "of two in [1, 32], got ")
          << unsigned(numWarps);
      return signalPassFailure();
    }
    unsigned sm = getSmVersion(target);
    if (!sm) {
      getOperation().emitError("tile-assign-layouts: expected a target like "
                               "sm_80 or sm_90a, got '")
          << target << "'";
      return signalPassFailure();
    }
    if (failed(verifyDimIndices(getOperation())))
      return signalPassFailure();
    LayoutAssigner assigner(&getContext(), numWarps, sm, hasWgmma(target));
    for (auto kernel : getOperation().getOps<KernelOp>()) {
      if (auto given = kernel->getAttrOfType<IntegerAttr>(
              KernelOp::getNumWarpsAttrName());
          given && given.getInt() != numWarps) {
        kernel.emitOpError("is laid out for ")
            << given.getInt() << " warps, not the " << unsigned(numWarps)
            << " of tile-assign-layouts";
        return signalPassFailure();
      }
      WalkResult tooLarge = kernel.walk([&](Operation *op) {
        for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
          if (failed(verifyTileFitsRegisters(op, type, numWarps,
                                             "result #" + llvm::Twine(i))))
            return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (tooLarge.wasInterrupted() || failed(assigner.run(kernel)))
        return signalPassFailure();
      kernel->setAttr(
          KernelOp::getNumWarpsAttrName(),
          IntegerAttr::get(IntegerType::get(&getContext(), 32), numWarps));
    }
  }
};

} // namespace
