//===- TileToNVVM.cpp - lower tile kernels to per-thread GPU code ---------===//
//
// Every tile.kernel becomes a gpu.func in `gpu.module @tileopt_kernels`.
// A tile with a layout becomes, in each thread, a vector of the elements the
// thread owns (tileopt::tile::getRegisterOffsets gives their order). Views
// become the kernel ABI's parameters: a global pointer to the first element,
// then the sizes and the strides as i64 (docs/kernel-abi.md). Loads and stores
// are predicated PTX (vectorized when the view is aligned, checked at run
// time); reductions go through registers, warp shuffles and shared memory;
// layout conversions, reshapes and dots stage data in shared memory.
//
// The pass is here; the lowering of each op family has its own file:
// KernelOpToNVVM.cpp (kernels, launches), LoadStoreOpToNVVM.cpp (loads,
// stores and their analysis), ElementwiseOpToNVVM.cpp, ReduceOpToNVVM.cpp,
// ConvertLayoutOpToNVVM.cpp (shared-memory staging), DotOpToNVVM.cpp with
// MmaDotToNVVM.cpp and WgmmaDotToNVVM.cpp (tensor cores), SharedMemory.cpp
// (sizing, cp.async) and Utility.cpp; Lowering.h declares what they share.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "tileopt/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/TargetParser/Triple.h"

extern "C" void LLVMInitializeNVPTXTargetInfo();
extern "C" void LLVMInitializeNVPTXTargetMC();

namespace tileopt {
#define GEN_PASS_DEF_CONVERTTILETONVVM
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;
using namespace tileopt::tile;
using namespace tileopt::nvvm;

namespace {

/// The oldest PTX ISA version (x10) that supports `chip` (sm_XX[a|f]), at
/// least 8.0; std::nullopt for a name that is not sm_<number>.
std::optional<unsigned> minimumPtxVersion(StringRef chip) {
  unsigned sm = getSmVersion(chip);
  if (!sm)
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

/// The PTX version (x10) that fp8 instructions on sm_89 and newer need: 8.4
/// for mma.sync of fp8 (the module's fp8 dots), 8.1 for the cvt pairs (its
/// conversions to and from fp8), else 0.
unsigned fp8PtxVersion(ModuleOp module) {
  unsigned version = 0;
  module.walk([&](Operation *op) {
    if (auto dot = dyn_cast<DotOp>(op);
        dot && isFp8Type(dot.getLhs().getType().getElementType()))
      version = 84;
    else if (isa<arith::ExtFOp, arith::TruncFOp>(op) &&
             (isFp8Type(getElementTypeOrSelf(op->getOperand(0))) ||
              isFp8Type(getElementTypeOrSelf(op->getResult(0)))))
      version = std::max(version, 81u);
  });
  return version;
}

/// The PTX version (x10) that `features` name (`+ptxNN`), or 0.
unsigned ptxVersion(StringRef features) {
  unsigned version = 0;
  size_t at = features.find("+ptx");
  if (at == StringRef::npos || features.drop_front(at + 4)
                                   .take_while(llvm::isDigit)
                                   .getAsInteger(10, version))
    return 0;
  return version;
}

/// Whether the module adds f32 tiles into memory (tile.store {add}), which
/// sm_90 does in vectors from PTX 8.1 on (`red.global.add.v4.f32`).
bool addsFloatTiles(ModuleOp module) {
  return module
      .walk([](StoreOp store) {
        return store.getAdd() &&
                       store.getValue().getType().getElementType().isF32()
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The most bytes of PTX parameters an entry takes before PTX 8.1 (up to
/// 32,764 from 8.1 on, on sm_70 and newer).
constexpr int64_t kParamBytesBefore81 = 4352;

/// Whether a kernel of the module takes more parameter bytes than PTX before
/// 8.1 allows (a kernel reading 49 strided views of one input, a
/// concatenation of many tensors): docs/kernel-abi.md's parameters, each
/// scalar counted as 8 bytes (TMA's tensor maps, 128 bytes each, come with
/// a few operand views and are not counted).
bool needsLargeParamSpace(ModuleOp module) {
  return llvm::any_of(module.getOps<KernelOp>(), [](KernelOp kernel) {
    int64_t bytes = 0;
    for (Type type : kernel.getArgumentTypes())
      bytes +=
          isa<MemRefType>(type) ? 8 + 16 * cast<MemRefType>(type).getRank() : 8;
    return bytes > kParamBytesBefore81;
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

/// A constant of `type` (a scalar type or a tile) holding `value`.
Value constantLike(OpBuilder &b, Location loc, Type type, TypedAttr value) {
  if (auto tile = dyn_cast<RankedTensorType>(type))
    value = SplatElementsAttr::get(tile, value);
  return arith::ConstantOp::create(b, loc, value);
}

/// LLVM 22's NVPTX back end converts sitofp from i1 to bf16 on sm_90 and
/// newer as if unsigned (cvt.rn.bf16.s32 of a select of 1, not -1;
/// llvm-project#187000, fixed in LLVM 23): a select of -1.0 and 0.0
/// instead, on every chip.
void selectBoolToBf16Casts(KernelOp kernel) {
  kernel.walk([](arith::SIToFPOp op) {
    Type type = op.getType();
    Type elem = getElementTypeOrSelf(type);
    if (!getElementTypeOrSelf(op.getIn().getType()).isInteger(1) ||
        !elem.isBF16())
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    op.replaceAllUsesWith(
        arith::SelectOp::create(
            b, loc, op.getIn(),
            constantLike(b, loc, type, b.getFloatAttr(elem, -1.0)),
            constantLike(b, loc, type, b.getFloatAttr(elem, 0.0)))
            .getResult());
    op.erase();
  });
}

/// Shifts by an amount outside [0, bits) (poison in arith) shift as
/// torch's do: shli and shrui give 0, shrsi the sign. The shift itself takes
/// the amount clamped to bits - 1, which also keeps LLVM 22's NVPTX back end
/// from making select(s < 64, x << s, 0) a shl.b64 by the low 32 bits of s
/// (llvm-project#201165). shli drops nsw: the back end makes
/// sext(shl nsw x, N - 1) a mul.wide by -2^(N-1) (llvm-project#200924).
void defineOutOfRangeShifts(KernelOp kernel) {
  SmallVector<Operation *> shifts;
  kernel.walk([&](Operation *op) {
    if (isa<arith::ShLIOp, arith::ShRUIOp, arith::ShRSIOp>(op))
      shifts.push_back(op);
  });
  for (Operation *op : shifts) {
    if (auto shl = dyn_cast<arith::ShLIOp>(op))
      shl.setOverflowFlags(shl.getOverflowFlags() &
                           ~arith::IntegerOverflowFlags::nsw);
    Value amount = op->getOperand(1);
    Type type = amount.getType();
    auto elem = cast<IntegerType>(getElementTypeOrSelf(type));
    unsigned bits = elem.getWidth();
    APInt known;
    if (matchPattern(amount, m_ConstantInt(&known)) && known.ult(bits))
      continue;
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto constant = [&](int64_t value) {
      return constantLike(b, loc, type, b.getIntegerAttr(elem, value));
    };
    op->setOperand(1,
                   arith::MinUIOp::create(b, loc, amount, constant(bits - 1)));
    if (isa<arith::ShRSIOp>(op))
      continue;
    b.setInsertionPointAfter(op);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          amount, constant(bits));
    auto select =
        arith::SelectOp::create(b, loc, inRange, op->getResult(0), constant(0));
    op->getResult(0).replaceAllUsesExcept(select, select);
  }
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
    op.replaceAllUsesWith(
        arith::MaxSIOp::create(b, loc, x, negated).getResult());
    op.erase();
  });
}

/// Moves each tile select(c, constant, x) (c a scalar or its splat) into an
/// scf.if on c in its block, as a result of it (the constant where c holds,
/// x where not), undoing upstream's ConvertTrivialIfToSelect for tiles. The
/// select reads x after the branch, keeping its registers live through it
/// (a persistent matmul's accumulator through the epilogue that stores it,
/// before it restarts from zeros), and selects every register on every
/// iteration; in the branch x dies where the branch last reads it, and the
/// constant costs the taken branch alone (opaqueBranchConstants keeps LLVM
/// from making it a select again).
void sinkSelectsIntoBranches(KernelOp kernel) {
  SmallVector<arith::SelectOp> selects;
  kernel.walk([&](arith::SelectOp select) {
    if (isa<RankedTensorType>(select.getType()))
      selects.push_back(select);
  });
  for (arith::SelectOp select : selects) {
    Value cond = select.getCondition();
    if (auto splat = cond.getDefiningOp<SplatOp>())
      cond = splat.getValue();
    bool constantWhenTrue = matchPattern(select.getTrueValue(), m_Constant());
    Value constant =
        constantWhenTrue ? select.getTrueValue() : select.getFalseValue();
    Value x = constantWhenTrue ? select.getFalseValue() : select.getTrueValue();
    if (!matchPattern(constant, m_Constant()))
      continue;
    // The branch: on c, in the select's block, after x and before the
    // select's users.
    Block *block = select->getBlock();
    auto branches = llvm::filter_to_vector(
        block->getOps<scf::IfOp>(),
        [&](scf::IfOp branch) { return branch.getCondition() == cond; });
    if (branches.size() != 1)
      continue;
    scf::IfOp branch = branches.front();
    Operation *def = x.getDefiningOp();
    if ((def && def->getBlock() == block && !def->isBeforeInBlock(branch)) ||
        llvm::any_of(select->getUsers(), [&](Operation *user) {
          Operation *at = block->findAncestorOpInBlock(*user);
          return !at || !branch->isBeforeInBlock(at);
        }))
      continue;
    OpBuilder b(branch);
    SmallVector<Type> types(branch.getResultTypes());
    types.push_back(select.getType());
    auto grown = scf::IfOp::create(b, branch.getLoc(), types, cond,
                                   /*withElseRegion=*/false);
    grown.getThenRegion().takeBody(branch.getThenRegion());
    if (branch.elseBlock()) {
      grown.getElseRegion().takeBody(branch.getElseRegion());
    } else {
      grown.getElseRegion().emplaceBlock();
      OpBuilder eb = OpBuilder::atBlockEnd(grown.elseBlock());
      scf::YieldOp::create(eb, branch.getLoc());
    }
    auto addYield = [&](Block *block, Value value) {
      Operation *yield = block->getTerminator();
      OpBuilder yb(yield);
      if (value == constant)
        value = yb.clone(*constant.getDefiningOp())->getResult(0);
      yield->insertOperands(yield->getNumOperands(), value);
    };
    addYield(grown.thenBlock(), constantWhenTrue ? constant : x);
    addYield(grown.elseBlock(), constantWhenTrue ? x : constant);
    branch.replaceAllUsesWith(grown.getResults().drop_back());
    branch.erase();
    select.replaceAllUsesWith(grown.getResults().back());
    select.erase();
  }
}

/// Marks the kernel's own branches inside loops that run wgmma dots (not
/// the branches the lowering makes, such as a copy's partial-tile tail) for
/// recomputeInBranch. The registers of a wgmma's accumulator are held
/// through the whole loop, and what LLVM hoists out of it comes on top; on
/// mma.sync, ptxas fits the hoisted values into the registers of the loop's
/// fragments, and recomputing them would only cost instructions (measured on
/// persistent matmuls from 64x64x32 to 128x256x64).
constexpr llvm::StringLiteral kRecomputeAttr = "tile.recompute_in_branch";

void markBranchesInWgmmaLoops(KernelOp kernel, const LoweringState &state) {
  kernel.walk([&](scf::IfOp branch) {
    auto loop = branch->getParentOfType<scf::ForOp>();
    if (loop && loop->walk([&](DotOp dot) {
                      return usesWgmma(dot, state) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
                    })
                    .wasInterrupted())
      branch->setAttr(kRecomputeAttr, UnitAttr::get(branch.getContext()));
  });
}

/// Gives each region of a branch in a loop its own inline-asm copy of every
/// integer scalar it reads from outside the loop (thread ids, kernel
/// arguments), so that what the region computes from them stays in it. LLVM
/// would hoist those computations out of the loop, and their results would
/// hold registers through every iteration: a persistent matmul's epilogue
/// would precompute its shared staging addresses and its rows' 64-bit global
/// offsets before the loop. Recomputed once per tile instead, 64x64x32 on
/// sm_90a takes 82 registers instead of 90, 128x128x64 92 instead of 104 and
/// 128x256x64 173 instead of 202. The copies cost nothing in SASS.
void recomputeInBranch(scf::IfOp branch) {
  if (!branch->removeAttr(kRecomputeAttr))
    return;
  // A pipeline's prologue, before its loop, may hold a copy of the branch
  // (one that computes a scalar its copies' offsets read).
  auto loop = branch->getParentOfType<scf::ForOp>();
  if (!loop)
    return;
  for (Region &region : branch->getRegions()) {
    if (region.empty())
      continue;
    // A narrowed copy holds fewer registers: the 32-bit sizes and strides
    // that index arithmetic reads from 64-bit kernel arguments.
    SmallVector<arith::TruncIOp> truncs;
    region.walk([&](arith::TruncIOp trunc) {
      if (loop.isDefinedOutsideOfLoop(trunc.getIn()))
        truncs.push_back(trunc);
    });
    for (arith::TruncIOp trunc : truncs)
      trunc->moveBefore(loop);
    SmallVector<OpOperand *> uses;
    region.walk([&](Operation *op) {
      for (OpOperand &use : op->getOpOperands()) {
        auto type = dyn_cast<IntegerType>(use.get().getType());
        if (type && (type.getWidth() == 32 || type.getWidth() == 64) &&
            loop.isDefinedOutsideOfLoop(use.get()) &&
            !matchPattern(use.get(), m_Constant()))
          uses.push_back(&use);
      }
    });
    OpBuilder b = OpBuilder::atBlockBegin(&region.front());
    DenseMap<Value, Value> copies;
    for (OpOperand *use : uses) {
      Value &copy = copies[use->get()];
      if (!copy) {
        bool wide = use->get().getType().getIntOrFloatBitWidth() == 64;
        copy = emitAsm(b, branch.getLoc(), use->get().getType(), use->get(),
                       wide ? "mov.b64 $0, $1;" : "mov.b32 $0, $1;",
                       wide ? "=l,l" : "=r,r", /*sideEffects=*/true)
                   .front();
      }
      use->set(copy);
    }
  }
}

/// Yields each 32-bit splat constant of registers that `branch` yields
/// where its other side yields a variable as an inline-asm copy of the
/// splat value: LLVM would make the phi of a constant a select on the
/// branch's condition after it, which reads the variable there and keeps it
/// live through the branch (sinkSelectsIntoBranches).
void opaqueBranchConstants(scf::IfOp branch) {
  if (!branch.elseBlock())
    return;
  Operation *yields[] = {branch.thenYield(), branch.elseYield()};
  for (unsigned i = 0; i < branch.getNumResults(); ++i) {
    auto type = dyn_cast<VectorType>(branch.getResult(i).getType());
    if (!type || type.getRank() != 1 || !type.getElementType().isIntOrFloat() ||
        type.getElementType().getIntOrFloatBitWidth() != 32)
      continue;
    for (auto [side, yield] : llvm::enumerate(yields)) {
      DenseElementsAttr constant;
      if (!matchPattern(yield->getOperand(i), m_Constant(&constant)) ||
          !constant.isSplat() ||
          matchPattern(yields[1 - side]->getOperand(i), m_Constant()))
        continue;
      OpBuilder b(yield);
      Location loc = branch.getLoc();
      Type element = type.getElementType();
      Value splat = arith::ConstantOp::create(
          b, loc, cast<TypedAttr>(constant.getSplatValue<Attribute>()));
      StringRef constraints = element.isF32() ? "=f,f" : "=r,r";
      Value copy = emitAsm(b, loc, element, splat, "mov.b32 $0, $1;",
                           constraints, /*sideEffects=*/true)
                       .front();
      yield->setOperand(i, vector::BroadcastOp::create(b, loc, type, copy));
    }
  }
}

/// Carries each vector value of `loop` (a tile's registers) as one scalar per
/// element: LLVM then sees scalar phis, whose folds it does across the loop
/// (as it does for Triton's): a reduction after a loop that may run zero
/// times moves into the loop's exit, and the path around the loop carries
/// its result, not every register.
void scalarizeLoopCarriedVectors(scf::ForOp loop) {
  // A tile's registers are a 1-D vector (TileTypeConverter).
  auto registers = [](Type type) {
    auto vector = dyn_cast<VectorType>(type);
    return vector && vector.getRank() == 1 ? vector : VectorType();
  };
  if (llvm::none_of(loop.getResultTypes(), registers))
    return;
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto split = [&](Value v) {
    SmallVector<Value> parts;
    VectorType type = registers(v.getType());
    if (!type)
      return SmallVector<Value>{v};
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      parts.push_back(vector::ExtractOp::create(b, loc, v, i));
    return parts;
  };
  auto join = [&](Type type, ValueRange parts) -> Value {
    if (!registers(type))
      return parts.front();
    return vector::FromElementsOp::create(b, loc, registers(type), parts);
  };
  auto width = [&](Type type) -> int64_t {
    VectorType vector = registers(type);
    return vector ? vector.getNumElements() : 1;
  };
  SmallVector<Value> inits;
  for (Value init : loop.getInitArgs())
    llvm::append_range(inits, split(init));
  auto scalar = scf::ForOp::create(
      b, loc, loop.getLowerBound(), loop.getUpperBound(), loop.getStep(), inits,
      /*bodyBuilder=*/nullptr, loop.getUnsignedCmp());
  scalar->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  Block *body = scalar.getBody();
  b.setInsertionPointToStart(body);
  SmallVector<Value> args{scalar.getInductionVar()};
  unsigned at = 0;
  for (BlockArgument arg : loop.getRegionIterArgs()) {
    int64_t n = width(arg.getType());
    args.push_back(
        join(arg.getType(), scalar.getRegionIterArgs().slice(at, n)));
    at += n;
  }
  body->getOperations().splice(body->end(), loop.getBody()->getOperations());
  for (auto [from, to] : llvm::zip(loop.getBody()->getArguments(), args))
    from.replaceAllUsesWith(to);
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  b.setInsertionPoint(yield);
  SmallVector<Value> yielded;
  for (Value v : yield.getOperands())
    llvm::append_range(yielded, split(v));
  yield->setOperands(yielded);
  b.setInsertionPointAfter(scalar);
  at = 0;
  for (Value result : loop.getResults()) {
    int64_t n = width(result.getType());
    result.replaceAllUsesWith(
        join(result.getType(), scalar.getResults().slice(at, n)));
    at += n;
  }
  loop.erase();
}

/// LLVM's description of the NVPTX target (its chips and features), or
/// null if the back end is not linked in.
std::unique_ptr<llvm::MCSubtargetInfo> nvptxSubtargetInfo() {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  return std::unique_ptr<llvm::MCSubtargetInfo>(
      target->createMCSubtargetInfo(triple, "", ""));
}

/// Shared memory every chip gives a block without opting in: the most a
/// kernel declares statically.
constexpr int64_t kMaxStaticShared = 48 * 1024;

/// The most shared memory a block of `chip` (sm_XX[a|f]) may have, opted in
/// (CUDA's sharedMemPerBlockOptin).
int64_t maxSharedBytes(StringRef chip) {
  unsigned sm = getSmVersion(chip); // 0 for another name: the static limit
  switch (sm) {
  case 70:
  case 72:
    return 96 * 1024;
  case 75:
    return 64 * 1024;
  case 80:
  case 87:
    return 163 * 1024;
  case 86:
  case 88:
  case 89:
  case 120:
  case 121:
    return 99 * 1024;
  default:
    return sm >= 90 ? 227 * 1024 : kMaxStaticShared;
  }
}

struct ConvertTileToNVVM
    : tileopt::impl::ConvertTileToNVVMBase<ConvertTileToNVVM> {
  using Base::Base;

  /// The PTX features to target: the option, or the chip's minimum version
  /// (at least `wanted`, a version whose instructions the module would use).
  /// The chip and every feature must be ones LLVM's NVPTX back end knows (it
  /// ignores unknown ones with a warning, or asserts on malformed ones).
  FailureOr<std::string> ptxFeatures(ModuleOp module, unsigned wanted) {
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
      bool known =
          nvptx && llvm::any_of(nvptx->getAllProcessorFeatures(),
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
      return "+ptx" + std::to_string(std::max(*minimum, wanted));
    // LLVM aborts on a PTX version too old for the chip: say it instead.
    unsigned version = ptxVersion(features);
    if (version && version < *minimum) {
      module.emitError("convert-tile-to-nvvm: PTX ")
          << version / 10 << "." << version % 10 << " (features '" << features
          << "') cannot target " << chip << ", which needs PTX "
          << *minimum / 10 << "." << *minimum % 10 << " or newer";
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

    // Every tile must have a layout; sizes are read from constant dimensions;
    // a program's atomic adds to an i32 (AtomicLowering).
    WalkResult missing = module.walk([&](Operation *op) -> WalkResult {
      if (auto dim = dyn_cast<memref::DimOp>(op);
          dim && !dim.getConstantIndex() && op->getParentOfType<KernelOp>()) {
        op->emitOpError("needs a constant dimension index in a tile.kernel");
        return WalkResult::interrupt();
      }
      if (auto atomic = dyn_cast<memref::AtomicRMWOp>(op);
          atomic && op->getParentOfType<KernelOp>() &&
          (atomic.getKind() != arith::AtomicRMWKind::addi ||
           !atomic.getValue().getType().isInteger(32))) {
        op->emitOpError(
            "in a tile.kernel adds to i32 elements only (addi), got ")
            << arith::stringifyAtomicRMWKind(atomic.getKind()) << " of "
            << atomic.getValue().getType();
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
    bool vectorAdds = getSmVersion(chip) >= 90 && addsFloatTiles(module);
    FailureOr<std::string> ptx = ptxFeatures(
        module,
        std::max(getSmVersion(chip) >= 89 ? fp8PtxVersion(module) : 0,
                 vectorAdds || needsLargeParamSpace(module) ? 81u : 0u));
    if (failed(ptx))
      return signalPassFailure();
    auto nvvmTarget = NVVM::NVVMTargetAttr::get(
        ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip, *ptx);
    // The kernels go into this module (KernelLowering finds it by name).
    gpu::GPUModuleOp::create(builder, module.getLoc(), kGpuModuleName,
                             builder.getArrayAttr({nvvmTarget}));
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());

    LoweringState state;
    state.smVersion = getSmVersion(chip);
    state.wgmma = hasWgmma(chip);
    state.tma = tma;
    // Features that name an older PTX version (or none, which LLVM picks)
    // add one element an instruction.
    state.vectorAdds = vectorAdds && ptxVersion(*ptx) >= 81;
    state.warpSpecialize = warpSpecialize;
    // ptxas takes 24 to 255 registers a thread (it raises fewer to 24 and
    // ignores more).
    if (maxRegisters && (maxRegisters < 24 || maxRegisters > 255)) {
      module.emitError("max-registers must be 0 (ptxas's choice) or 24 to "
                       "255, got ")
          << maxRegisters.getValue();
      return signalPassFailure();
    }
    state.maxRegisters = maxRegisters;
    for (KernelOp kernel : kernels)
      state.numWarps[kernel.getSymName()] = kernel.getNumWarps().value_or(4);

    // An mma accumulator (a layout given with the IR) needs a dot that
    // tensor cores compute: 16-bit, tf32, i8 or fp8 (sm_89) inputs in whole
    // m16 n8 k blocks.
    // mma.sync interleaves warp columns 8 apart: contiguous ones (blockN)
    // are wgmma's.
    WalkResult unfit = module.walk([&](DotOp dot) -> WalkResult {
      auto mma = dyn_cast<MmaLayoutAttr>(getLayout(dot.getAcc().getType()));
      if (!mma)
        return WalkResult::advance();
      int64_t mmaK = getMmaK(dot);
      int64_t m = dot.getLhs().getType().getDimSize(0);
      int64_t k = dot.getLhs().getType().getDimSize(1);
      int64_t n = dot.getRhs().getType().getDimSize(1);
      if (getSmVersion(chip) < getMmaMinSmVersion(dot) || !mmaK || m % kMmaM ||
          n % kMmaN || k % mmaK) {
        dot.emitOpError("has an mma accumulator layout, but ")
            << chip << " has no tensor-core dot of " << m << "x" << k << " by "
            << k << "x" << n << " " << dot.getLhs().getType().getElementType()
            << " (it needs sm_80 or newer, f16/bf16 inputs, f32 with "
               "input_precision = tf32, i8 with an i32 accumulator or, from "
               "sm_89, fp8 with an f32 one, and M, N, K multiples of "
            << kMmaM << ", " << kMmaN << ", " << (mmaK ? mmaK : 16)
            << "); give the accumulator a blocked layout";
        return WalkResult::interrupt();
      }
      unsigned wm = mma.getWarpsM(), wn = mma.getWarpsN();
      if (m % (kMmaM * wm) || n % (kMmaN * wn)) {
        dot.emitOpError("has an mma accumulator layout of ")
            << wm << "x" << wn << " warps, whose " << kMmaM * wm << "x"
            << kMmaN * wn << " blocks do not tile its " << m << "x" << n
            << " accumulator; give it fewer warps along the short side";
        return WalkResult::interrupt();
      }
      if (wn == 1 || mma.getBlockN() == kMmaN || usesWgmma(dot, state))
        return WalkResult::advance();
      dot.emitOpError("has an accumulator layout with blockN = ")
          << mma.getBlockN() << " that " << chip
          << " cannot compute with wgmma (which needs warpgroups of "
             "blockN * warpsN = the tile's columns); mma.sync needs blockN = "
          << kMmaN;
      return WalkResult::interrupt();
    });
    if (unfit.wasInterrupted())
      return signalPassFailure();

    for (KernelOp kernel : kernels) {
      widenFloatToBoolCasts(kernel);
      selectBoolToBf16Casts(kernel);
      defineOutOfRangeShifts(kernel);
      expandIntegerAbs(kernel);
      sinkSelectsIntoBranches(kernel);
      markBranchesInWgmmaLoops(kernel, state);
    }

    // Masks compared once per group of equal elements.
    for (KernelOp kernel : kernels)
      kernel.walk([&](arith::CmpIOp cmp) {
        if (SmallVector<unsigned> leaders = compareGroups(cmp);
            !leaders.empty())
          state.compareLeaders[cmp] = std::move(leaders);
      });

    for (KernelOp kernel : kernels)
      markNarrowLoops(kernel);

    // What each load and store may assume.
    for (KernelOp kernel : kernels)
      kernel.walk([&](Operation *op) {
        std::optional<AccessOperands> access = accessOperands(op);
        if (!access)
          return;
        AccessFacts &facts = state.accesses[op] = analyzeAccess(*access);
        if (auto store = dyn_cast<StoreOp>(op))
          planScalarAdds(store, state.vectorAdds, facts);
      });
    for (KernelOp kernel : kernels)
      orderViewAccesses(kernel, state);
    module.walk([&](LaunchOp launch) {
      state.hostLaunched.insert(launch.getKernel());
    });

    // Each layout conversion's staging layout, the fewest bytes until
    // planStagingLayouts knows what the kernel's shared memory allows.
    for (KernelOp kernel : kernels)
      kernel.walk([&](ConvertLayoutOp op) {
        state.stagingLayouts[op] =
            restageLayout(op.getSource().getType(), op.getResult().getType());
      });
    for (KernelOp kernel : kernels)
      planAsyncCopies(kernel, state);
    proveCopiedTilesInBounds(state);

    // Software pipelines, then each kernel's shared memory: static up to
    // 48 KiB, dynamic beyond, up to what the chip gives a block.
    int64_t limit = maxSharedBytes(chip);
    llvm::StringMap<int64_t> sharedBytes;
    for (KernelOp kernel : kernels) {
      unsigned stages = numStages;
      if (auto attr = kernel->getAttrOfType<IntegerAttr>(
              KernelOp::getNumStagesAttrName()))
        stages = attr.getInt();
      if (stages < 1 || stages > 8) {
        kernel.emitOpError("num-stages must be in [1, 8], got ") << stages;
        return signalPassFailure();
      }
      SmallVector<LoopPipeline> pipelines = findPipelines(kernel, state);
      for (LoopPipeline &p : pipelines) {
        if (p.tma)
          state.tmaDots.insert(p.dots.begin(), p.dots.end());
        p.warpSpecialized =
            canWarpSpecialize(kernel, p, pipelines.size(), state);
        if (p.warpSpecialized)
          state.specializedDots.insert(p.dots.front());
      }
      // The deepest pipeline whose rings fit.
      stages = fitStages(kernel, pipelines, stages, limit, state);
      keepOccupancyWithoutTma(kernel, pipelines, stages, limit, state);
      // At one stage only TMA pipelines remain, of one slot: each iteration
      // copies its boxes, waits for their mbarrier and runs its dots (one
      // TMA instruction a box instead of a cp.async every 16 bytes a thread).
      if (stages == 1)
        llvm::erase_if(pipelines, [&](const LoopPipeline &p) {
          if (p.tma && !p.refillAfterDots)
            return false;
          for (DotOp dot : p.dots)
            state.tmaDots.erase(dot);
          state.specializedDots.erase(p.dots.front());
          return true;
        });
      for (LoopPipeline &p : pipelines)
        if (p.warpSpecialized && (!p.tma || stages == 1)) {
          p.warpSpecialized = false;
          state.specializedDots.erase(p.dots.front());
        }
      // Copies only TMA can make need a TMA pipeline; copies right only in
      // a ring, any pipeline.
      DenseSet<Operation *> tmaLoads, pipelinedLoads;
      for (const LoopPipeline &p : pipelines) {
        pipelinedLoads.insert(p.loads.begin(), p.loads.end());
        if (p.tma)
          tmaLoads.insert(p.loads.begin(), p.loads.end());
      }
      demotePipelineOnlyCopies(kernel, tmaLoads, pipelinedLoads, state);
      DenseMap<Operation *, unsigned> ringSlots;
      // (loop, its first dot, the producer's loads with warp specialisation,
      // the loads whose mbarriers it initialises before it: one stage's)
      SmallVector<std::tuple<scf::ForOp, DotOp, size_t, size_t>> tmaLoops;
      for (LoopPipeline &p : pipelines) {
        llvm::erase_if(p.loads, [&](LoadOp load) {
          return !state.asyncCopies.contains(load);
        });
        if (p.loads.empty()) {
          for (DotOp dot : p.dots)
            state.tmaDots.erase(dot);
          continue;
        }
        if (p.warpSpecialized && p.loads.size() != p.dots.size() * 2) {
          // A load left for registers: no producer for part of the ring.
          p.warpSpecialized = false;
          state.specializedDots.erase(p.dots.front());
        }
        scf::ForOp loop = p.warpSpecialized
                              ? warpSpecializeLoop(p, stages, state)
                              : pipelineLoop(p, stages, state);
        for (DotOp dot : p.dots)
          ringSlots[dot] = p.slots(stages);
        if (p.tma)
          tmaLoops.push_back({loop, p.dots.front(),
                              p.warpSpecialized ? p.loads.size() : 0,
                              stages == 1 ? p.loads.size() : 0});
      }
      SharedMemoryPlan plan = planSharedMemory(kernel, ringSlots, state);
      // Conversions trade bytes for instructions where that costs nothing.
      planStagingLayouts(kernel, plan, state);
      plan = planSharedMemory(kernel, ringSlots, state);
      for (auto [loop, dot, specializedLoads, initLoads] : tmaLoops) {
        ScratchPlacement place = plan.placements.lookup(dot);
        int64_t slots = place.slots;
        loop->setAttr(
            kTmaMbarriersAttr,
            builder.getDenseI64ArrayAttr({place.mbarrierOffset,
                                          specializedLoads ? 2 * slots : slots,
                                          int64_t(initLoads)}));
        if (specializedLoads)
          loop->getParentOp()->setAttr(
              kWarpSpecializedAttr,
              builder.getDenseI64ArrayAttr(
                  {place.mbarrierOffset, slots, int64_t(specializedLoads)}));
      }
      int64_t bytes = plan.bytes;
      if (bytes > limit) {
        Operation *largest = kernel;
        int64_t need = 0;
        kernel.walk([&](Operation *op) {
          if (int64_t opBytes = scratchBytes(op, state); opBytes > need)
            largest = op, need = opBytes;
        });
        largest->emitOpError("needs ")
            << need << " bytes of shared memory to stage its tiles (kernel @"
            << kernel.getSymName() << ": " << bytes << "), more than the "
            << limit << " a block can have on " << chip
            << "; use smaller tiles";
        return signalPassFailure();
      }
      state.placements.insert(plan.placements.begin(), plan.placements.end());
      if (plan.firstUser)
        state.firstSharedUsers.insert(plan.firstUser);
      sharedBytes[kernel.getSymName()] = bytes;
    }

    TileTypeConverter converter(ctx);
    ConversionTarget target(*ctx);
    target
        .addLegalDialect<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect,
                         vector::VectorDialect, scf::SCFDialect,
                         arith::ArithDialect, math::MathDialect>();
    target.addIllegalDialect<TileDialect>();
    target.addLegalDialect<memref::MemRefDialect>();
    target.addIllegalOp<memref::DimOp>();
    target.addDynamicallyLegalOp<memref::LoadOp, memref::StoreOp,
                                 memref::AtomicRMWOp>([](Operation *op) {
      return !op->getParentOfType<KernelOp>() &&
             !op->getParentOfType<gpu::GPUFuncOp>();
    });
    auto legalTypes = [&](Operation *op) {
      return converter.isLegal(op) && !isApproxDivision(op);
    };
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
        legalTypes);
    RewritePatternSet patterns(ctx);
    populateKernelOpToNVVMPatterns(converter, patterns, state);
    populateLoadStoreOpToNVVMPatterns(converter, patterns, state);
    populateElementwiseOpToNVVMPatterns(converter, patterns, state);
    populateConvertLayoutOpToNVVMPatterns(converter, patterns, state);
    populateReduceOpToNVVMPatterns(converter, patterns, state);
    populateDotOpToNVVMPatterns(converter, patterns, state);
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    recordHoistedLhs(module);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    SmallVector<scf::ForOp> loops;
    module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops) {
      if (loop->hasAttr(kNarrowLoopAttr))
        narrowInductionVariable(loop);
      // Before the wait, which moves the loop into a branch: the mbarriers
      // are invalidated whether it runs or not.
      if (loop->hasAttr(kTmaMbarriersAttr))
        bracketMbarriers(loop, state);
      if (loop->hasAttr(kWgmmaPendingAttr))
        waitForWgmmaResults(loop);
    }
    SmallVector<scf::IfOp> splits;
    module.walk([&](scf::IfOp split) {
      if (split->hasAttr(kWarpSpecializedAttr))
        splits.push_back(split);
    });
    for (scf::IfOp split : splits)
      finishWarpSpecialization(split, state);
    deferWgmmaWaits(module);
    module.walk([&](scf::IfOp branch) {
      opaqueBranchConstants(branch);
      recomputeInBranch(branch);
    });
    loops.clear();
    module.walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      scalarizeLoopCarriedVectors(loop);

    // Size each kernel's shared memory now that its users exist: above the
    // static limit it is the launch's dynamic shared memory (an external
    // array in PTX), whose size the launcher reads from
    // tile.dynamic_shared_bytes.
    for (auto &[func, ks] : state.kernels) {
      auto gpuFunc = cast<gpu::GPUFuncOp>(func);
      if (state.maxRegisters)
        gpuFunc->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                         builder.getI32IntegerAttr(state.maxRegisters));
      int64_t bytes = sharedBytes.lookup(gpuFunc.getName());
      gpuFunc->setAttr("tile.shared_bytes", builder.getI64IntegerAttr(bytes));
      if (bytes == 0) {
        ks.sharedMemory.erase();
        continue;
      }
      ks.sharedMemory.setAlignment(ks.sharedAlignment);
      if (bytes > kMaxStaticShared) {
        ks.sharedMemory.setLinkage(LLVM::Linkage::External);
        gpuFunc->setAttr("tile.dynamic_shared_bytes",
                         builder.getI64IntegerAttr(bytes));
        continue;
      }
      ks.sharedMemory.setGlobalTypeAttr(TypeAttr::get(
          LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), bytes)));
    }
  }
};

} // namespace
