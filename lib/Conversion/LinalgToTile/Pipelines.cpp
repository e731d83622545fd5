//===- Pipelines.cpp - the named pipeline from linalg to tile IR ----------===//
//
// `tileopt-opt model.linalg.mlir --tileopt-linalg-to-tile` runs what the
// Python driver runs on a graph imported by torch-mlir: clean-up and
// generalization with upstream passes, kernel formation, then the kernels
// and host function.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

struct LinalgToTileOptions : PassPipelineOptions<LinalgToTileOptions> {
  Option<bool> allowTf32{
      *this, "allow-tf32",
      llvm::cl::desc("f32 contractions may round their inputs to tf32 "
                     "(convert-linalg-to-tile's allow-tf32)"),
      llvm::cl::init(false)};
  Option<int64_t> maxHeadDim{
      *this, "max-head-dim",
      llvm::cl::desc("the largest head dimension of an attention kernel "
                     "(tile-form-kernels' max-head-dim)"),
      llvm::cl::init(256)};
};

} // namespace

void tileopt::registerLinalgToTilePipeline() {
  PassPipelineRegistration<LinalgToTileOptions>(
      "tileopt-linalg-to-tile",
      "Form kernels from linalg on tensors: canonicalize (drops unused "
      "results such as a max's argmax), generalize named ops, "
      "tile-form-kernels, convert-linalg-to-tile, canonicalize, cse",
      [](OpPassManager &pm, const LinalgToTileOptions &options) {
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createLinalgGeneralizeNamedOpsPass());
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createCSEPass());
        TileFormKernelsOptions formation;
        formation.maxHeadDim = options.maxHeadDim;
        pm.addPass(createTileFormKernels(formation));
        pm.addPass(createConvertLinalgToTile({options.allowTf32}));
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createCSEPass());
      });
}
