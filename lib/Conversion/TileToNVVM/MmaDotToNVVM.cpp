//===- MmaDotToNVVM.cpp - tile.dot on mma.sync ----------------------------===//
//
// Tensor-core dots of sm_80 and later: operands staged in shared memory in
// XOR-swizzled rows (mmaOffset), fragments loaded with ldmatrix, one mma.sync
// per 16x8 block and k step: m16n8k16 for f16/bf16 inputs (f32 or f16
// accumulators), m16n8k8 for tf32, m16n8k32 for i8 (s32 accumulators).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

Value mmaOffset(OpBuilder &b, Location loc, Value row, Value col,
                int64_t rowBytes, int64_t elemBytes) {
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  Value byte = arith::MulIOp::create(b, loc, col, c(elemBytes), kNoWrap);
  Value rowBase = arith::MulIOp::create(b, loc, row, c(rowBytes), kNoWrap);
  // 8 chunks (128 bytes) of consecutive rows take 8 phases: a row of C < 8
  // chunks keeps its phase for 8 / C rows and XORs only its own chunks.
  int64_t chunks = rowBytes / 16;
  if (chunks > 1) {
    int64_t perPhase = std::max<int64_t>(1, 8 / chunks);
    int64_t phases = std::min<int64_t>(chunks, 8);
    Value phase = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, row, c(llvm::Log2_64(perPhase))),
        c(phases - 1));
    byte = arith::XOrIOp::create(b, loc, byte,
                                 arith::ShLIOp::create(b, loc, phase, c(4)));
  }
  return arith::AddIOp::create(b, loc, rowBase, byte, kNoWrap);
}

int64_t mmaOperandOffset(DotOp dot, unsigned operand) {
  if (operand == 0 || lhsInRegisters(dot) || lhsHoisted(dot) ||
      (borrowedOperands(dot) & 1))
    return 0;
  RankedTensorType lhs = dot.getLhs().getType();
  return llvm::alignTo(
      lhs.getNumElements() * storageBits(lhs.getElementType()) / 8, 128);
}

namespace {

/// One mma.sync of `shape` (m16n8k16, m16n8k8, m16n8k32) on `aType` and
/// `bType` inputs (f16, bf16, tf32, s8, e4m3, e5m2; one type but for fp8) in
/// b32 registers `a` and `bFrag`, accumulating into
/// `c`: f32 or s32 registers, or f16 pairs in b32 ones (.f16x2). Integer sums
/// wrap (no .satfinite), as torch's.
SmallVector<Value> emitMma(OpBuilder &b, Location loc, StringRef shape,
                           StringRef aType, StringRef bType, ArrayRef<Value> a,
                           ArrayRef<Value> bFrag, ArrayRef<Value> c) {
  Type cType = c.front().getType();
  unsigned nc = c.size(), na = a.size(), nb = bFrag.size();
  std::string text =
      llvm::formatv("mma.sync.aligned.{0}.row.col.{1}.{2}.{7}.{1} {3}, {4}, "
                    "{5}, {6};",
                    shape,
                    cType.isF32()   ? "f32"
                    : aType == "s8" ? "s32"
                                    : "f16",
                    aType, asmRegisterList(0, nc), asmRegisterList(nc, na),
                    asmRegisterList(nc + na, nb),
                    asmRegisterList(nc + na + nb, nc), bType)
          .str();
  std::string constraints;
  for (unsigned i = 0; i < nc; ++i)
    constraints += cType.isF32() ? "=f," : "=r,";
  for (unsigned i = 0; i < na + nb; ++i)
    constraints += "r,";
  for (unsigned i = 0; i < nc; ++i)
    constraints += std::to_string(i) + (i + 1 < nc ? "," : "");
  SmallVector<Value> operands(a);
  operands.append(bFrag.begin(), bFrag.end());
  operands.append(c.begin(), c.end());
  return emitAsm(b, loc, SmallVector<Type>(nc, cType), operands, text,
                 constraints, /*sideEffects=*/false);
}

/// An f32 in a b32 register rounded to tf32 (nearest, ties away from zero,
/// as cvt.rna does): mma.sync would truncate it.
Value roundToTf32(OpBuilder &b, Location loc, Value word) {
  return emitAsm(b, loc, b.getI32Type(), word, "cvt.rna.tf32.f32 $0, $1;",
                 "=r,r", /*sideEffects=*/false)
      .front();
}

} // namespace

LogicalResult lowerMmaDot(DotOp op, Value lhs, Value rhs, Value accVec,
                          MmaLayoutAttr mma, KernelState &ks,
                          ConversionPatternRewriter &rewriter,
                          VectorType accVecType, unsigned asyncOperands,
                          bool pipelined, const HoistedLhs &hoist,
                          ArrayRef<BorrowedOperand> borrowed) {
  Location loc = op.getLoc();
  RankedTensorType lhsType = op.getLhs().getType();
  RankedTensorType rhsType = op.getRhs().getType();
  int64_t m = lhsType.getDimSize(0), k = lhsType.getDimSize(1),
          n = rhsType.getDimSize(1);
  Type inElement = lhsType.getElementType();
  // tf32 (m16n8k8), f16/bf16 (m16n8k16) or i8 (m16n8k32); a 16-byte
  // ldmatrix row holds `chunk` elements.
  int64_t mmaK = getMmaK(op);
  bool tf32 = inElement.isF32();
  int64_t chunk = 128 / storageBits(inElement);
  bool hoisted = lhsHoisted(op);
  if (hoisted)
    stageHoistedLhs(rewriter, loc, ks, op, /*wgmma=*/false, lhs, hoist);
  if (stageDotOperands(rewriter, loc, ks, op, asyncOperands, pipelined,
                       [&](unsigned operand) {
                         storeDotOperand(rewriter, loc, ks, op, operand,
                                         /*wgmma=*/false, operand ? rhs : lhs);
                       }))
    barrier(rewriter, loc);
  // A lane's ldmatrix rows differ from its first one by whole swizzle
  // periods of rows and by chunks that XOR into its own swizzled chunk: each
  // address is the lane's byte offset (`laneOffset` of `operand` at (row,
  // col), from the start of shared memory) XOR the low 7 bits of
  // `xorBytes`, plus its other bits and `addBytes`. The scratch base and
  // the operand's offset are multiples of 128 and leave the XOR alone; they
  // also keep the offset loop-variant in a pipeline, so that the compiler
  // XORs where it loads rather than keeping every address in a register.
  // A hoisted lhs is outside the dot's staging area, and a borrowed operand
  // in its owner's (laid out as the owner's).
  Value scratch = ks.scratchBase ? ks.scratchBase : i32Const(rewriter, loc, 0);
  Value lhsScratch = hoisted ? i32Const(rewriter, loc, hoist.offset) : scratch;
  Value rhsScratch = scratch;
  if (borrowed[0].owner)
    lhsScratch = borrowed[0].scratch;
  if (borrowed[1].owner)
    rhsScratch = borrowed[1].scratch;
  auto laneOffset = [&](unsigned operand, Value row, Value col) -> Value {
    DotOp stager = borrowed[operand].owner ? borrowed[operand].owner : op;
    return arith::AddIOp::create(
        rewriter, loc, operand ? rhsScratch : lhsScratch,
        stagedOperandOffset(rewriter, loc, stager, operand, /*wgmma=*/false,
                            row, col),
        kNoWrap);
  };
  Value symbol = LLVM::AddressOfOp::create(rewriter, loc, ks.sharedMemory);
  // Shared-memory address of element (row, col) of the lhs or rhs.
  auto operandPtr = [&](unsigned operand, Value row, Value col) -> Value {
    return LLVM::GEPOp::create(rewriter, loc, symbol.getType(),
                               rewriter.getI8Type(), symbol,
                               ValueRange{laneOffset(operand, row, col)});
  };
  auto swizzledPtr = [&](Value offset, int64_t xorBytes, int64_t addBytes) {
    if (xorBytes & 127)
      offset = arith::XOrIOp::create(rewriter, loc, offset,
                                     i32Const(rewriter, loc, xorBytes & 127));
    if (int64_t add = (xorBytes & ~int64_t(127)) + addBytes)
      offset = arith::AddIOp::create(rewriter, loc, offset,
                                     i32Const(rewriter, loc, add), kNoWrap);
    return LLVM::GEPOp::create(rewriter, loc, symbol.getType(),
                               rewriter.getI8Type(), symbol,
                               ValueRange{offset});
  };
  int64_t elemBytes = storageBits(inElement) / 8;

  unsigned wm = mma.getWarpsM(), wn = mma.getWarpsN();
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
  // tf32 B fragments: lane l reads column l / 4, rows l % 4 and l % 4 + 4.
  Value group = arith::ShRUIOp::create(rewriter, loc, ks.lane,
                                       i32Const(rewriter, loc, 2));
  Value inGroup =
      arith::AndIOp::create(rewriter, loc, ks.lane, i32Const(rewriter, loc, 3));
  SmallVector<Value> acc = unpack(rewriter, loc, accVec);
  bool halfAcc = accVecType.getElementType().isF16();
  StringRef shape = tf32 ? "m16n8k8" : mmaK == 32 ? "m16n8k32" : "m16n8k16";
  StringRef aType = mmaTypeName(op.getLhs().getType().getElementType(), tf32);
  StringRef bType = mmaTypeName(op.getRhs().getType().getElementType(), tf32);
  // A: rows m0 + l%8 + 8*(matrix&1) (16-row steps keep the phase), columns
  // kk + chunk*(matrix>>1) (kk, a multiple of two chunks, XORs).
  Value aLane =
      laneOffset(0, plus(times(warpM, kMmaM), plus(row8, times(matLow, 8))),
                 times(matHigh, chunk));
  // B N-major (k rows of n), through ldmatrix .trans: rows kk + l%8 +
  // 8*(matrix&1), the column of block rn + (matrix>>1), rn even: block
  // rn * wn XORs into the lane's block warpN + (matrix>>1) * wn, which is
  // below 2 * wn. B K-major (n rows of k, transposed: stagedOperand),
  // through plain ldmatrix: row l%8 of block rn + (matrix>>1), columns
  // kk + chunk*(matrix&1), kk XORing in as for A; block rn * wn is a
  // multiple of 8 rows. (An 8-bit fragment register is 4 bytes along K, so
  // i8's B is always K-major.)
  StagedOperand bStaged = stagedOperand(op, 1, /*wgmma=*/false);
  bool bKMajor = bStaged.transposed;
  Value laneBlockCol = plus(times(warpN, kMmaN), times(matHigh, kMmaN * wn));
  Value bLane =
      bKMajor ? laneOffset(1, times(matLow, chunk), plus(laneBlockCol, row8))
              : laneOffset(1, plus(row8, times(matLow, 8)), laneBlockCol);
  int64_t bRowBytes = bStaged.rowBytes;
  // Where the accumulator takes half of a thread's registers or more, each
  // row of blocks loads its A fragments right before its MMAs. Loaded
  // together, ptxas keeps them all live with the next stage's copies (255
  // registers against Triton's 241 at 128x128x64 f16 on 4 warps, sm_80, 3
  // stages; 214 this way); below that, together is as good or better (122
  // against 128 at 8 warps).
  int64_t accRegisters = halfAcc ? acc.size() / 2 : acc.size();
  SmallVector<Value> aRegisters;
  if (lhsInRegisters(op))
    aRegisters = unpack(rewriter, loc, lhs);
  bool lazyA = accRegisters >= 128;
  for (int64_t kk = 0; kk < k; kk += mmaK) {
    SmallVector<SmallVector<Value>> aFrags(repsM);
    auto loadA = [&](int64_t rm) {
      if (!aRegisters.empty()) {
        aFrags[rm] = registerLhsFragment(rewriter, loc, aRegisters, k, rm, kk);
        return;
      }
      aFrags[rm] = emitLdMatrix(
          rewriter, loc,
          swizzledPtr(aLane, kk * elemBytes, rm * kMmaM * wm * k * elemBytes),
          4, /*trans=*/false);
      if (tf32)
        for (Value &reg : aFrags[rm])
          reg = roundToTf32(rewriter, loc, reg);
    };
    for (int64_t rm = 0; rm < repsM; ++rm)
      if (!lazyA || rm == 0)
        loadA(rm);
    SmallVector<SmallVector<Value>> bFrags;
    if (tf32) {
      // ldmatrix cannot transpose 32-bit elements: one load per register.
      for (int64_t rn = 0; rn < repsN; ++rn) {
        Value col = plus(
            plus(times(warpN, kMmaN), i32Const(rewriter, loc, rn * kMmaN * wn)),
            group);
        SmallVector<Value> regs;
        for (int64_t half = 0; half < 2; ++half) {
          Value row = plus(inGroup, i32Const(rewriter, loc, kk + 4 * half));
          regs.push_back(roundToTf32(
              rewriter, loc,
              LLVM::LoadOp::create(rewriter, loc, rewriter.getI32Type(),
                                   operandPtr(1, row, col))));
        }
        bFrags.push_back(regs);
      }
    } else {
      // One ldmatrix.x4 loads blocks rn and rn + 1 (x2: the lone block).
      for (int64_t rn = 0; rn < repsN; rn += 2) {
        bool pair = rn + 1 < repsN;
        Value ptr = bKMajor ? swizzledPtr(bLane, kk * elemBytes,
                                          rn * kMmaN * wn * bRowBytes)
                            : swizzledPtr(bLane, rn * kMmaN * wn * elemBytes,
                                          kk * bRowBytes);
        SmallVector<Value> regs =
            emitLdMatrix(rewriter, loc, ptr, pair ? 4 : 2, /*trans=*/!bKMajor);
        bFrags.push_back({regs[0], regs[1]});
        if (pair)
          bFrags.push_back({regs[2], regs[3]});
      }
    }
    for (int64_t rm = 0; rm < repsM; ++rm)
      for (int64_t rn = 0; rn < repsN; ++rn) {
        if (lazyA && rm > 0 && rn == 0)
          loadA(rm);
        MutableArrayRef<Value> c =
            MutableArrayRef<Value>(acc).slice((rm * repsN + rn) * 4, 4);
        SmallVector<Value> d;
        if (halfAcc)
          d = unpackHalfPairs(rewriter, loc,
                              emitMma(rewriter, loc, shape, aType, bType,
                                      aFrags[rm], bFrags[rn],
                                      packHalfPairs(rewriter, loc, c)));
        else
          d = emitMma(rewriter, loc, shape, aType, bType, aFrags[rm],
                      bFrags[rn], c);
        llvm::copy(d, c.begin());
      }
  }
  if (int64_t(acc.size()) != accVecType.getNumElements())
    return op.emitOpError("internal error: mma accumulator size mismatch");
  rewriter.replaceOp(op, pack(rewriter, loc, accVecType, acc));
  return success();
}

} // namespace tileopt::nvvm
