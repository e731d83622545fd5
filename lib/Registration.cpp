//===- Registration.cpp - register everything tileopt uses ----------------===//

#include "tileopt/Registration.h"

#include "tileopt/Conversion/Passes.h"
#include "tileopt/Dialect/Tile/IR/Tile.h"
#include "tileopt/Dialect/Tile/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/Support/CommandLine.h"

void tileopt::registerAllDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<tile::TileDialect>();
}

/// Shared memory addresses in 32-bit registers, as Triton and nvcc emit them:
/// the NVPTX back end reads this option when gpu-module-to-binary builds its
/// target machine. 64-bit shared addresses cost a register pair and a widening
/// multiply per address.
static void useShortSharedPointers() {
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("nvptx-short-ptr");
  if (it != options.end())
    static_cast<llvm::cl::opt<bool> *>(it->second)->setValue(true);
}

void tileopt::registerAllPasses() {
  useShortSharedPointers();
  mlir::registerAllPasses();
  tile::registerTilePasses();
  registerTileConversionPasses();
  registerTileToNVVMPipelines();
  registerLinalgToTilePipeline();
}
