//===- MmaDotToNVVM.cpp - tile.dot on mma.sync ----------------------------===//
//
// Tensor-core dots of sm_80 and later: operands staged in shared memory in
// padded rows, fragments loaded with ldmatrix, one mma.sync.m16n8k16 per
// 16x8 block and k16 step.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

int64_t mmaOperandOffset(DotOp dot, unsigned operand) {
  RankedTensorType lhs = dot.getLhs().getType();
  return operand == 0 ? 0
                      : llvm::alignTo(lhs.getDimSize(0) *
                                          (lhs.getDimSize(1) + kMmaSmemPad) * 2,
                                      16);
}

namespace {

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

} // namespace

LogicalResult lowerMmaDot(DotOp op, Value lhs, Value rhs, Value accVec,
                          MmaLayoutAttr mma, KernelState &ks,
                          ConversionPatternRewriter &rewriter,
                          VectorType accVecType, unsigned asyncOperands,
                          bool pipelined) {
  Location loc = op.getLoc();
  RankedTensorType lhsType = op.getLhs().getType();
  RankedTensorType rhsType = op.getRhs().getType();
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
          n = rhsType.getDimSize(1);
  Type inElement = lhsType.getElementType();
  int64_t lhsBytes = mmaOperandOffset(op, 1);
  if (stageDotOperands(rewriter, loc, ks, asyncOperands, pipelined,
                       [&](unsigned operand) {
                         if (operand == 0)
                           storeTileToShared(rewriter, loc, ks, lhsType, lhs,
                                             {m, k}, kMmaSmemPad);
                         else
                           storeTileToShared(rewriter, loc, ks, rhsType, rhs,
                                             {k, n}, kMmaSmemPad, lhsBytes);
                       }))
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
  Value row8 =
      arith::AndIOp::create(rewriter, loc, ks.lane, i32Const(rewriter, loc, 7));
  Value matrix = arith::ShRUIOp::create(rewriter, loc, ks.lane,
                                        i32Const(rewriter, loc, 3));
  Value matLow =
      arith::AndIOp::create(rewriter, loc, matrix, i32Const(rewriter, loc, 1));
  Value matHigh =
      arith::ShRUIOp::create(rewriter, loc, matrix, i32Const(rewriter, loc, 1));
  auto times = [&](Value v, int64_t c) {
    return arith::MulIOp::create(rewriter, loc, v, i32Const(rewriter, loc, c));
  };
  auto plus = [&](Value a, Value b) {
    return arith::AddIOp::create(rewriter, loc, a, b);
  };
  SmallVector<Value> acc = unpack(rewriter, loc, accVec);
  bool bf16 = inElement.isBF16();
  for (int64_t kk = 0; kk < k; kk += kMmaK) {
    // A: rows m0 + l%8 + 8*(matrix&1), columns kk + 8*(matrix>>1).
    SmallVector<SmallVector<Value>> aFrags;
    for (int64_t rm = 0; rm < repsM; ++rm) {
      Value row = plus(
          plus(times(warpM, kMmaM), i32Const(rewriter, loc, rm * kMmaM * wm)),
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
    Value bRow =
        plus(i32Const(rewriter, loc, kk), plus(row8, times(matLow, 8)));
    for (int64_t rn = 0; rn < repsN; rn += 2) {
      bool pair = rn + 1 < repsN;
      Value col =
          plus(times(warpN, kMmaN), i32Const(rewriter, loc, rn * kMmaN * wn));
      if (pair)
        col = plus(col, times(matHigh, kMmaN * wn));
      Value index = plus(times(bRow, n + kMmaSmemPad), col);
      SmallVector<Value> regs =
          emitLdMatrix(rewriter, loc,
                       sharedPtr(rewriter, loc, ks, inElement, index, lhsBytes),
                       pair ? 4 : 2, /*trans=*/true);
      bFrags.push_back({regs[0], regs[1]});
      if (pair)
        bFrags.push_back({regs[2], regs[3]});
    }
    for (int64_t rm = 0; rm < repsM; ++rm)
      for (int64_t rn = 0; rn < repsN; ++rn) {
        unsigned base = (rm * repsN + rn) * 4;
        SmallVector<Value> d =
            emitMma(rewriter, loc, bf16, aFrags[rm], bFrags[rn],
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

} // namespace tileopt::nvvm
