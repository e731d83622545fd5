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

void tileopt::registerLinalgToTilePipeline() {
  PassPipelineRegistration<>(
      "tileopt-linalg-to-tile",
      "Form kernels from linalg on tensors: canonicalize (drops unused "
      "results such as a max's argmax), generalize named ops, "
      "tile-form-kernels, convert-linalg-to-tile, canonicalize, cse",
      [](OpPassManager &pm) {
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createLinalgGeneralizeNamedOpsPass());
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createCSEPass());
        pm.addPass(createTileFormKernels());
        pm.addPass(createConvertLinalgToTile());
        pm.addPass(createCanonicalizerPass());
        pm.addPass(createCSEPass());
      });
}
