//===- Pipelines.cpp - named pipelines from tile IR to NVVM and PTX -------===//
//
// `tileopt-opt k.mlir --tile-to-nvvm="chip=sm_90 num-warps=4"` runs the whole
// GPU path up to the LLVM/NVVM dialects; `--tile-to-ptx` continues to PTX
// (a gpu.binary holding the assembly). The Python driver runs the same passes
// stage by stage (python/tileopt/compiler/nvidia.py).
//
//===----------------------------------------------------------------------===//

#include "tileopt/Conversion/Passes.h"
#include "tileopt/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

struct TileToNVVMOptions : PassPipelineOptions<TileToNVVMOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("target chip"),
                           llvm::cl::init("sm_90")};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (default: the chip's minimum PTX version)"),
      llvm::cl::init("")};
  Option<bool> fpFusion{
      *this, "fp-fusion",
      llvm::cl::desc("let float multiplies and adds fuse into fma"),
      llvm::cl::init(true)};
  Option<unsigned> numWarps{*this, "num-warps",
                            llvm::cl::desc("warps per program"),
                            llvm::cl::init(4)};
  Option<std::string> libdevice{
      *this, "libdevice",
      llvm::cl::desc("libdevice.10.bc to link for math (tile-to-ptx)"),
      llvm::cl::init("")};
};

void buildTileToNVVM(OpPassManager &pm, const TileToNVVMOptions &options) {
  pm.addPass(tileopt::tile::createTileNarrowIntegerTiles());
  pm.addPass(createCanonicalizerPass());
  tileopt::tile::TileAssignLayoutsOptions layouts;
  layouts.numWarps = options.numWarps;
  layouts.target = options.chip;
  pm.addPass(tileopt::tile::createTileAssignLayouts(layouts));
  pm.addPass(tileopt::tile::createTileRemoveLayoutConversions());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  tileopt::ConvertTileToNVVMOptions lowering;
  lowering.chip = options.chip;
  lowering.features = options.features;
  lowering.fpFusion = options.fpFusion;
  pm.addPass(tileopt::createConvertTileToNVVM(lowering));
  pm.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(nvvm));
  pm.addPass(tileopt::createMarkTensorMapParams());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(tileopt::createCheckNVPTXInput());
}

void buildTileToPTX(OpPassManager &pm, const TileToNVVMOptions &options) {
  buildTileToNVVM(pm, options);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  if (!options.libdevice.empty())
    binary.linkFiles.push_back(options.libdevice);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

} // namespace

void tileopt::registerTileToNVVMPipelines() {
  PassPipelineRegistration<TileToNVVMOptions>(
      "tile-to-nvvm",
      "Lower tile kernels to the LLVM/NVVM dialects (layouts, per-thread "
      "code, gpu-to-nvvm)",
      buildTileToNVVM);
  PassPipelineRegistration<TileToNVVMOptions>(
      "tile-to-ptx",
      "Lower tile kernels to PTX: tile-to-nvvm, then gpu-module-to-binary "
      "(format=isa)",
      buildTileToPTX);
}
