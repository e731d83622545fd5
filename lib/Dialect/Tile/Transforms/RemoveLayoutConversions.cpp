//===- RemoveLayoutConversions.cpp - drop layout conversions --------------===//
//
// A tile.convert_layout moves data through shared memory. Most of them can
// go: cheap producers (splat, iota, constants) are remade in the wanted
// layout, and a conversion of a single-use broadcast, expand_dims, reshape
// (in place), permute, load or elementwise result moves up to that op's
// operands, where the data is smaller (a 1-D bias instead of its 2-D
// broadcast) or free to remake; not past a truncation, unless into a load or
// a cheap producer.
// Through a permute, the conversion's layout is permuted back where it meets
// another: a transposed store's and the one that the permute's source needed.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Dialect/Tile/IR/Layouts.h"
#include "tileopt/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tileopt::tile {
#define GEN_PASS_DEF_TILEREMOVELAYOUTCONVERSIONS
#include "tileopt/Dialect/Tile/Transforms/Passes.h.inc"
} // namespace tileopt::tile

using namespace mlir;
using namespace tileopt::tile;

namespace {

RankedTensorType tileType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

Value convertTo(PatternRewriter &rewriter, Location loc, Value value,
                Attribute layout) {
  RankedTensorType type = tileType(value);
  if (type.getEncoding() == layout)
    return value;
  return ConvertLayoutOp::create(rewriter, loc, withLayout(type, layout),
                                 value);
}

/// convert(splat | iota | constant) -> the producer remade in the new layout.
struct RematerializeCheapProducer : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op,
                                PatternRewriter &rewriter) const override {
    Operation *producer = op.getSource().getDefiningOp();
    if (!producer || !isa<SplatOp, IotaOp, arith::ConstantOp>(producer))
      return failure();
    if (auto constant = dyn_cast<arith::ConstantOp>(producer);
        constant && !isa<SplatElementsAttr>(constant.getValue()))
      return failure();
    Operation *clone = rewriter.clone(*producer);
    setTileType(clone->getResult(0), op.getResult().getType());
    rewriter.replaceOp(op, clone->getResults());
    return success();
  }
};

/// Whether `op` (elementwise) is a cast to narrower elements whose operand
/// a conversion would not vanish into: converting before a truncation moves
/// more bytes (the f32 accumulator before the f16 result). Comparisons are
/// not casts: their conversions go up to the iotas and splats they compare.
bool narrowsCostly(Operation *op) {
  if (op->getNumOperands() != 1)
    return false;
  auto bits = [](Value v) -> unsigned {
    Type element = tileType(v).getElementType();
    return element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 0;
  };
  Value operand = op->getOperand(0);
  return bits(operand) > bits(op->getResult(0)) &&
         !isa_and_present<LoadOp, SplatOp, IotaOp, arith::ConstantOp>(
             operand.getDefiningOp());
}

/// Moves a conversion of a single-use op's result to its operands.
struct HoistConversion : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op,
                                PatternRewriter &rewriter) const override {
    Value source = op.getSource();
    Operation *producer = source.getDefiningOp();
    if (!producer || !source.hasOneUse() || producer->getNumResults() != 1)
      return failure();
    Attribute layout = getLayout(op.getResult().getType());
    Location loc = op.getLoc();
    // The new ops go where the producer is (not where the conversion is,
    // maybe inside a loop): its operands are defined there already.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(producer);
    // A shape op remade on its source converted to `sourceLayout`.
    auto hoistThrough = [&](Operation *shapeOp, Attribute sourceLayout) {
      Value input =
          convertTo(rewriter, loc, shapeOp->getOperand(0), sourceLayout);
      Operation *clone = rewriter.clone(*shapeOp);
      clone->setOperand(0, input);
      clone->getResult(0).setType(op.getResult().getType());
      rewriter.replaceOp(op, clone->getResults());
      rewriter.eraseOp(shapeOp);
      return success();
    };
    if (isa<BroadcastOp>(producer))
      return hoistThrough(producer, layout);
    if (auto expand = dyn_cast<ExpandDimsOp>(producer))
      return hoistThrough(
          expand, SliceLayoutAttr::get(getContext(), expand.getAxis(), layout));
    if (auto reshape = dyn_cast<ReshapeOp>(producer)) {
      // Only where the registers stay in place (unit dimensions inserted or
      // dropped): a position tile's iota, expanded to the matrix that an mma
      // layout needs, then to the kernel's rank.
      ArrayRef<int64_t> from = reshape.getSource().getType().getShape();
      ArrayRef<int64_t> to = op.getResult().getType().getShape();
      Attribute inPlace = reshapeInPlaceLayout(layout, to, from);
      if (!inPlace || reshapeInPlaceLayout(inPlace, from, to) != layout)
        return failure();
      return hoistThrough(reshape, inPlace);
    }
    if (auto permute = dyn_cast<PermuteOp>(producer)) {
      // The source in the layout that the permutation takes to `layout`,
      // where the source is a conversion (the two become one) or free to
      // remake; elsewhere the conversion stays as needed as it was.
      if (!isa_and_present<ConvertLayoutOp, SplatOp, IotaOp, arith::ConstantOp>(
              permute.getSource().getDefiningOp()))
        return failure();
      ArrayRef<int64_t> perm = permute.getPermutation();
      Attribute source = permuteLayout(layout, invertPermutationVector(perm));
      if (!source || permuteLayout(source, perm) != layout)
        return failure();
      return hoistThrough(permute, source);
    }
    if (auto load = dyn_cast<LoadOp>(producer);
        load && isa<BlockedLayoutAttr, SliceLayoutAttr>(layout)) {
      // The anchor moves: a load in the wanted layout replaces load+convert.
      auto newLoad = cast<LoadOp>(rewriter.clone(*load));
      newLoad.getResult().setType(op.getResult().getType());
      rewriter.replaceOp(op, newLoad.getResult());
      rewriter.eraseOp(load);
      return success();
    }
    if (producer->hasTrait<OpTrait::Elementwise>() &&
        producer->getNumRegions() == 0 &&
        llvm::all_of(
            producer->getOperands(),
            [](Value v) { return isa<RankedTensorType>(v.getType()); }) &&
        !narrowsCostly(producer)) {
      SmallVector<Value> operands;
      for (Value operand : producer->getOperands())
        operands.push_back(convertTo(rewriter, loc, operand, layout));
      Operation *clone = rewriter.clone(*producer);
      clone->setOperands(operands);
      clone->getResult(0).setType(op.getResult().getType());
      rewriter.replaceOp(op, clone->getResults());
      rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

struct TileRemoveLayoutConversions
    : tileopt::tile::impl::TileRemoveLayoutConversionsBase<
          TileRemoveLayoutConversions> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<RematerializeCheapProducer, HoistConversion>(context);
    ConvertLayoutOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
