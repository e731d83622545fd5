//===- TmaToNVVM.cpp - TMA copies of dot operands and their mbarriers -----===//
//
// On sm_90a a software pipeline feeding a wgmma dot moves its operand tiles
// with the Tensor Memory Accelerator, as Triton's TMA pipelines do: one
// thread issues cp.async.bulk.tensor per 2-D box of the tile, straight into
// wgmma's swizzled layout (the copy swizzles as the wgmma descriptor reads),
// on a tensor map that the launcher builds over the view (an extra kernel
// parameter, docs/kernel-abi.md). Each ring slot has an mbarrier that counts
// the slot's bytes (arrive.expect_tx); the iteration that reads the slot
// waits for its phase. Out-of-bounds box elements arrive as zeros, which is
// the zero padding of the tile.load it replaces.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

namespace {

/// TMA moves boxes of at most 256 elements along each dimension.
constexpr int64_t kMaxBox = 256;

/// The kernel argument a load reads, if its view is one.
BlockArgument kernelArgument(LoadOp load) {
  auto arg = dyn_cast<BlockArgument>(load.getView());
  if (!arg || !isa_and_present<KernelOp>(arg.getOwner()->getParentOp()))
    return {};
  return arg;
}

/// How `copy`'s tile lies in the wgmma staging area it fills.
StagedOperand stagedOf(const AsyncCopy &copy) {
  return stagedOperand(copy.dot, copy.operand, /*wgmma=*/true);
}

/// Whether the staging area holds the load's tile transposed: its rows run
/// along the tile's last dimension, its contiguous row bytes along the one
/// before (a K-major operand, unless a transpose between the load and the
/// dot already swapped them).
bool stagedTransposed(const AsyncCopy &copy) {
  return stagedOf(copy).transposed != copy.transposed;
}

} // namespace

bool isTmaCopyable(LoadOp load, AsyncCopy copy, const LoweringState &state) {
  // tf32 wgmma reads B K-major: TMA copies it only from K-major memory (a
  // linear layer's weight); a row-major B goes by cp.async element by
  // element.
  if (!state.tma || !usesWgmma(copy.dot, state) || !getMmaK(copy.dot))
    return false;
  StagedOperand staged = stagedOf(copy);
  BlockArgument arg = kernelArgument(load);
  if (!arg)
    return false;
  auto kernel = cast<KernelOp>(arg.getOwner()->getParentOp());
  if (state.hostLaunched.contains(kernel.getSymName()))
    return false;
  // The map's tensor: rows of unit stride whose start and stride are
  // 16-byte aligned (tile.divisibility, which the launchers check). Above
  // rank 2 the tile is one matrix of a batch (leading unit dimensions).
  auto view = cast<MemRefType>(arg.getType());
  auto [strides, offset] = view.getStridesAndOffset();
  auto divisibility = kernel.getArgAttrOfType<IntegerAttr>(
      arg.getArgNumber(), KernelOp::getDivisibilityAttrName());
  int64_t lead = view.getRank() - 2;
  ArrayRef<int64_t> shape = load.getResult().getType().getShape();
  if (lead < 0 ||
      llvm::any_of(
          shape.take_front(lead), [](int64_t s) { return s != 1; }) ||
      strides[lead + (stagedTransposed(copy) ? 0 : 1)] != 1 || !divisibility ||
      divisibility.getInt() % 16 != 0)
    return false;
  if (!hasZeroPadding(load))
    return false;
  return staged.rows <= kMaxBox || staged.rows % kMaxBox == 0;
}

namespace {

/// The boxes that copy `tile` into wgmma's layout (wgmmaOffset) as `staged`
/// (`transposed`: through the view's last two dimensions swapped): each
/// `swizzle`-byte column atom holds all rows, a box is one atom of at most
/// 256 rows, and one element of each leading (batch) dimension. Its view is
/// left 0.
TensorMapParam boxesOf(RankedTensorType tile, StagedOperand staged,
                       bool transposed) {
  int64_t elementBytes = storageBits(tile.getElementType()) / 8;
  int64_t swizzle = staged.swizzle;
  int64_t lead = tile.getRank() - 2;
  // 16-byte atoms (an n8 rhs) are unswizzled.
  TensorMapParam map = {0, SmallVector<int64_t>(lead, 1),
                        swizzle == 16 ? 0 : swizzle};
  map.box.append({std::min(staged.rows, kMaxBox), swizzle / elementBytes});
  if (transposed) {
    map.dims = llvm::to_vector(llvm::seq<int64_t>(0, tile.getRank()));
    std::swap(map.dims[lead], map.dims[lead + 1]);
  }
  return map;
}

} // namespace

TensorMapParam tensorMapParam(LoadOp load, const AsyncCopy &copy) {
  TensorMapParam map = boxesOf(load.getResult().getType(), stagedOf(copy),
                               stagedTransposed(copy));
  map.view = kernelArgument(load).getArgNumber();
  return map;
}

Value mbarrierPtr(OpBuilder &b, Location loc, KernelState &ks,
                  int64_t mbarrierOffset, Value slot) {
  Value byte = arith::AddIOp::create(
      b, loc, i32Const(b, loc, mbarrierOffset),
      arith::MulIOp::create(b, loc, slot, i32Const(b, loc, 8), kNoWrap),
      kNoWrap);
  Value base = LLVM::AddressOfOp::create(b, loc, ks.sharedMemory);
  return LLVM::GEPOp::create(b, loc, base.getType(), b.getI8Type(), base,
                             ValueRange{byte});
}

namespace {

/// A shared-memory address as the 32-bit register PTX's .shared::cta
/// operands take (half the registers of a 64-bit one).
Value sharedAddress(OpBuilder &b, Location loc, Value ptr) {
  return LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), ptr);
}

/// i32 1 in the program's first thread, which issues the copies.
Value isFirstThread(OpBuilder &b, Location loc, KernelState &ks) {
  Value both = arith::OrIOp::create(b, loc, ks.warp, ks.lane);
  return arith::ExtUIOp::create(
      b, loc, b.getI32Type(),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, both,
                            i32Const(b, loc, 0)));
}

/// A TMA coordinate (s32) of an index offset, saturated: an offset beyond
/// 32 bits lies past any tensor a map can describe and still reads zeros.
Value coordinate(OpBuilder &b, Location loc, Value offset) {
  Type i64 = b.getI64Type();
  Value wide = arith::IndexCastOp::create(b, loc, i64, offset);
  wide = arith::MaxSIOp::create(b, loc, wide,
                                i64Const(b, loc, int64_t(INT32_MIN)));
  wide = arith::MinSIOp::create(b, loc, wide,
                                i64Const(b, loc, int64_t(INT32_MAX)));
  return arith::TruncIOp::create(b, loc, b.getI32Type(), wide);
}

/// The first thread runs `statement` (a format of its operand's number) on
/// each of `count` mbarriers from byte `offset`, then `last`.
void onEachMbarrier(OpBuilder &b, Location loc, KernelState &ks, int64_t offset,
                    int64_t count, StringRef statement, StringRef last = "") {
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $0, 0;\n";
  SmallVector<Value> operands = {isFirstThread(b, loc, ks)};
  std::string constraints = "r";
  for (int64_t i = 0; i < count; ++i) {
    operands.push_back(sharedAddress(
        b, loc, mbarrierPtr(b, loc, ks, offset, i32Const(b, loc, i))));
    text += "@p " + llvm::formatv(statement.data(), i + 1).str() + "\n";
    constraints += ",r";
  }
  if (!last.empty())
    text += ("@p " + last + "\n").str();
  emitAsm(b, loc, {}, operands, text + "}", constraints, /*sideEffects=*/true);
}

} // namespace

void initMbarriers(OpBuilder &b, Location loc, KernelState &ks,
                   int64_t mbarrierOffset, unsigned count, unsigned arrivals) {
  // The copies complete on the barriers through the async proxy.
  onEachMbarrier(b, loc, ks, mbarrierOffset, count,
                 "mbarrier.init.shared::cta.b64 [${0}], " +
                     std::to_string(arrivals) + ";",
                 "fence.mbarrier_init.release.cluster;");
}

void issueTmaCopy(OpBuilder &b, Location loc, KernelState &ks, LoadOp load,
                  const AsyncCopy &copy, ArrayRef<Value> offsets,
                  Value mbarrier) {
  RankedTensorType tile = load.getResult().getType();
  // The staged rows and columns: the tile's, or its transpose's.
  bool transposed = stagedTransposed(copy);
  TensorMapParam map = boxesOf(tile, stagedOf(copy), transposed);
  int64_t rank = tile.getRank(), lead = rank - 2;
  int64_t rowDim = lead + (transposed ? 1 : 0);
  int64_t colDim = lead + (transposed ? 0 : 1);
  int64_t rows = tile.getDimSize(rowDim), cols = tile.getDimSize(colDim);
  int64_t elementBytes = storageBits(tile.getElementType()) / 8;
  int64_t boxRows = map.box[lead], boxCols = map.box[lead + 1];
  // A producer warp issues from its first lane.
  Value issue =
      copy.producer
          ? arith::ExtUIOp::create(
                b, loc, b.getI32Type(),
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ks.lane,
                                      i32Const(b, loc, 0)))
          : isFirstThread(b, loc, ks);
  if (copy.enabled)
    issue = arith::AndIOp::create(
        b, loc, issue,
        arith::ExtUIOp::create(b, loc, b.getI32Type(), copy.enabled));
  SmallVector<Value> operands = {issue, sharedAddress(b, loc, mbarrier),
                                 ks.tensorMaps[copy.tensorMap]};
  std::string constraints = "r,r,l";
  std::string text = llvm::formatv("{\n.reg .pred p;\nsetp.ne.b32 p, $0, 0;\n"
                                   "@p mbarrier.arrive.expect_tx.shared::cta."
                                   "b64 _, [$1], {0};\n",
                                   rows * cols * elementBytes)
                         .str();
  Value row = coordinate(b, loc, offsets[rowDim]);
  Value col = coordinate(b, loc, offsets[colDim]);
  // The batch coordinates, innermost first after the matrix's.
  std::string batch;
  for (int64_t d = lead - 1; d >= 0; --d) {
    batch += ", $" + std::to_string(operands.size());
    operands.push_back(coordinate(b, loc, offsets[d]));
    constraints += ",r";
  }
  Value operandBase = sharedPtr(b, loc, ks, b.getI8Type(), i32Const(b, loc, 0),
                                wgmmaOperandOffset(copy.dot, copy.operand));
  for (int64_t atom = 0; atom < cols / boxCols; ++atom)
    for (int64_t chunk = 0; chunk < rows / boxRows; ++chunk) {
      int64_t byte = (atom * rows + chunk * boxRows) * boxCols * elementBytes;
      unsigned first = operands.size();
      operands.push_back(sharedAddress(
          b, loc,
          LLVM::GEPOp::create(b, loc, operandBase.getType(), b.getI8Type(),
                              operandBase,
                              ArrayRef<LLVM::GEPArg>{int32_t(byte)})));
      operands.push_back(
          arith::AddIOp::create(b, loc, col, i32Const(b, loc, atom * boxCols)));
      operands.push_back(arith::AddIOp::create(
          b, loc, row, i32Const(b, loc, chunk * boxRows)));
      constraints += ",r,r,r";
      text += llvm::formatv("@p cp.async.bulk.tensor.{3}d.shared::cluster."
                            "global.tile.mbarrier::complete_tx::bytes "
                            "[${0}], [$2, {${1}, ${2}{4}}], [$1];\n",
                            first, first + 1, first + 2, rank, batch)
                  .str();
    }
  text += "}";
  emitAsm(b, loc, {}, operands, text, constraints, /*sideEffects=*/true);
}

void arriveMbarrier(OpBuilder &b, Location loc, Value mbarrier, Value enabled) {
  Value on = enabled ? arith::ExtUIOp::create(b, loc, b.getI32Type(), enabled)
                     : i32Const(b, loc, 1);
  emitAsm(b, loc, {}, {on, sharedAddress(b, loc, mbarrier)},
          "{\n.reg .pred p;\nsetp.ne.b32 p, $0, 0;\n"
          "@p mbarrier.arrive.shared::cta.b64 _, [$1];\n}",
          "r,r", /*sideEffects=*/true);
}

void waitMbarrier(OpBuilder &b, Location loc, Value mbarrier, Value phase) {
  emitAsm(b, loc, {}, {sharedAddress(b, loc, mbarrier), phase},
          "{\n.reg .pred p;\nwaitLoop${:uid}:\n"
          "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
          "@!p bra waitLoop${:uid};\n}",
          "r,r", /*sideEffects=*/true);
}

void bracketMbarriers(scf::ForOp loop, LoweringState &state) {
  auto attr = loop->getAttrOfType<DenseI64ArrayAttr>(kTmaMbarriersAttr);
  loop->removeAttr(kTmaMbarriersAttr);
  int64_t offset = attr[0], count = attr[1], initLoads = attr[2];
  OpBuilder b(loop->getContext());
  Location loc = loop.getLoc();
  KernelState &ks = state.get(loop);
  if (initLoads) {
    b.setInsertionPoint(loop);
    barrier(b, loc);
    initMbarriers(b, loc, ks, offset, count, initLoads);
  }
  b.setInsertionPointAfter(loop);
  // Every thread is done waiting before the memory is reused.
  barrier(b, loc);
  onEachMbarrier(b, loc, ks, offset, count,
                 "mbarrier.inval.shared::cta.b64 [${0}];");
}

} // namespace tileopt::nvvm
