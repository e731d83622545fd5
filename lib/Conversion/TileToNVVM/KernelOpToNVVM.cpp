//===- KernelOpToNVVM.cpp - kernels, program ids and launches -------------===//
//
// tile.kernel becomes a gpu.func in the GPU module with the kernel ABI's
// parameters (docs/kernel-abi.md), its lane and warp ids and its shared
// memory; tile.launch on the host becomes gpu.launch_func.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace tileopt::tile;

namespace tileopt::nvvm {

namespace {

/// tile.kernel -> gpu.func with the ABI's parameters, lane and warp ids.
struct KernelLowering : TilePattern<KernelOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(KernelOp kernel, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *ctx = rewriter.getContext();
    Location loc = kernel.getLoc();
    auto module = kernel->getParentOfType<ModuleOp>();
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kGpuModuleName);
    TypeConverter::SignatureConversion signature(kernel.getNumArguments());
    if (failed(getTypeConverter()->convertSignatureArgs(
            kernel.getArgumentTypes(), signature)))
      return rewriter.notifyMatchFailure(kernel, "unsupported argument types");
    // TMA's tensor maps follow, 128 bytes each by value (a grid constant).
    SmallVector<TensorMapParam> maps =
        state.tensorMaps.lookup(kernel.getSymName());
    auto genericPtr = LLVM::LLVMPointerType::get(ctx);
    for (size_t i = 0; i < maps.size(); ++i)
      signature.addInputs(genericPtr);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToEnd(gpuModule.getBody());
    auto func = gpu::GPUFuncOp::create(
        rewriter, loc, kernel.getSymName(),
        FunctionType::get(ctx, signature.getConvertedTypes(), {}));
    func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  rewriter.getUnitAttr());
    if (!maps.empty()) {
      // Made by-value grid constants after the function is an llvm.func
      // (mark-tensor-map-params).
      SmallVector<Attribute> described;
      for (const TensorMapParam &map : maps) {
        SmallVector<NamedAttribute> fields = {
            rewriter.getNamedAttr("view", rewriter.getI64IntegerAttr(map.view)),
            rewriter.getNamedAttr("box",
                                  rewriter.getDenseI64ArrayAttr(map.box)),
            rewriter.getNamedAttr("swizzle",
                                  rewriter.getI64IntegerAttr(map.swizzle))};
        if (!map.dims.empty())
          fields.push_back(rewriter.getNamedAttr(
              "dims", rewriter.getDenseI64ArrayAttr(map.dims)));
        described.push_back(rewriter.getDictionaryAttr(fields));
      }
      func->setAttr("tile.tensor_maps", rewriter.getArrayAttr(described));
    }
    // A warp-specialised kernel has a producer warpgroup after the others.
    int32_t warps = state.numWarps.lookup(kernel.getSymName()) +
                    (state.specializedKernels.contains(kernel.getSymName())
                         ? kWarpgroupWarps
                         : 0);
    // Exactly this many threads: .reqntid, as Triton's kernels say.
    // gpu.known_block_size would give .maxntid, under which ptxas spills
    // attention at d = 128 on sm_80 (the driver's make_cubin falls back to
    // .maxntid where .reqntid spills and it does not).
    func->setAttr(NVVM::NVVMDialect::getReqntidAttrName(),
                  rewriter.getDenseI32ArrayAttr({int32_t(kWarpSize) * warps}));
    rewriter.eraseBlock(&func.getBody().front());
    rewriter.inlineRegionBefore(kernel.getBody(), func.getBody(),
                                func.getBody().end());
    Block *entry = rewriter.applySignatureConversion(
        &func.getBody().front(), signature, getTypeConverter());

    // Thread ids and the kernel's shared memory (sized after conversion).
    rewriter.setInsertionPointToStart(entry);
    KernelState &ks = state.kernels[func];
    for (unsigned i = 0; i < kernel.getNumArguments(); ++i) {
      auto mapping = signature.getInputMapping(i);
      ks.arguments.push_back(
          entry->getArguments().slice(mapping->inputNo, mapping->size));
    }
    llvm::append_range(ks.tensorMaps,
                       entry->getArguments().take_back(maps.size()));
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, rewriter.getI32Type());
    ks.tid = tid;
    ks.lane =
        arith::AndIOp::create(rewriter, loc, tid, i32Const(rewriter, loc, 31));
    ks.warp =
        arith::ShRUIOp::create(rewriter, loc, tid, i32Const(rewriter, loc, 5));
    ks.numWarps = state.numWarps.lookup(kernel.getSymName());
    rewriter.setInsertionPointToStart(gpuModule.getBody());
    ks.sharedMemory = LLVM::GlobalOp::create(
        rewriter, loc, LLVM::LLVMArrayType::get(rewriter.getI8Type(), 0),
        /*isConstant=*/false, LLVM::Linkage::Internal,
        (kernel.getSymName() + "_smem").str(), Attribute(), /*alignment=*/16,
        /*addrSpace=*/3);
    rewriter.eraseOp(kernel);
    return success();
  }
};

struct ReturnLowering : TilePattern<ReturnOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(ReturnOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<gpu::ReturnOp>(op);
    return success();
  }
};

template <typename Op, typename GpuOp> struct GridLowering : TilePattern<Op> {
  using TilePattern<Op>::TilePattern;
  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    gpu::Dimension dims[] = {gpu::Dimension::x, gpu::Dimension::y,
                             gpu::Dimension::z};
    rewriter.replaceOpWithNewOp<GpuOp>(op, dims[op.getDim()]);
    return success();
  }
};

/// Host side: tile.launch -> gpu.launch_func with the ABI's arguments
/// (pointer to the first element, sizes and strides of each memref).
struct LaunchLowering : TilePattern<LaunchOp> {
  using TilePattern::TilePattern;
  LogicalResult
  matchAndRewrite(LaunchOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> args;
    for (Value arg : op.getArgs()) {
      auto memref = dyn_cast<MemRefType>(arg.getType());
      if (!memref) {
        args.push_back(arg);
        continue;
      }
      auto metadata =
          memref::ExtractStridedMetadataOp::create(rewriter, loc, arg);
      auto toI64 = [&](Value v) {
        return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(),
                                          v);
      };
      Value address = toI64(memref::ExtractAlignedPointerAsIndexOp::create(
          rewriter, loc, metadata.getBaseBuffer()));
      int64_t elementBytes = storageBits(memref.getElementType()) / 8;
      Value offsetBytes =
          arith::MulIOp::create(rewriter, loc, toI64(metadata.getOffset()),
                                i64Const(rewriter, loc, elementBytes));
      address = arith::AddIOp::create(rewriter, loc, address, offsetBytes);
      args.push_back(LLVM::IntToPtrOp::create(
          rewriter, loc, LLVM::LLVMPointerType::get(rewriter.getContext(), 1),
          address));
      for (Value size : metadata.getSizes())
        args.push_back(toI64(size));
      for (Value stride : metadata.getStrides())
        args.push_back(toI64(stride));
    }
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> grid(op.getGrid());
    grid.resize(3, one);
    Value threads = arith::ConstantIndexOp::create(
        rewriter, loc, kWarpSize * state.numWarps.lookup(op.getKernel()));
    auto kernel = SymbolRefAttr::get(
        rewriter.getStringAttr(kGpuModuleName),
        {FlatSymbolRefAttr::get(rewriter.getStringAttr(op.getKernel()))});
    gpu::LaunchFuncOp::create(rewriter, loc, kernel,
                              gpu::KernelDim3{grid[0], grid[1], grid[2]},
                              gpu::KernelDim3{threads, one, one},
                              /*dynamicSharedMemorySize=*/Value(), args);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateKernelOpToNVVMPatterns(TileTypeConverter &converter,
                                    RewritePatternSet &patterns,
                                    LoweringState &state) {
  patterns.add<KernelLowering, ReturnLowering,
               GridLowering<ProgramIdOp, gpu::BlockIdOp>,
               GridLowering<NumProgramsOp, gpu::GridDimOp>, LaunchLowering>(
      converter, patterns.getContext(), state);
}

} // namespace tileopt::nvvm
