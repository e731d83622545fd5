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

void tileopt::registerAllDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<tile::TileDialect>();
}

void tileopt::registerAllPasses() {
  mlir::registerAllPasses();
  tile::registerTilePasses();
  registerTileConversionPasses();
  registerTileToNVVMPipelines();
}
