//===- Passes.h - lowering tile IR ------------------------------*- C++ -*-===//

#ifndef TILEOPT_CONVERSION_PASSES_H
#define TILEOPT_CONVERSION_PASSES_H

// Only what the declarations need: each pass's file includes the dialects
// its definition registers (GEN_PASS_DEF), so a file that only builds a
// pipeline does not parse the linalg and vector headers (compile time of a
// clean build).
#include "mlir/Pass/Pass.h"

namespace tileopt {

#define GEN_PASS_DECL
#include "tileopt/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tileopt/Conversion/Passes.h.inc"

/// Registers the named pipelines `tile-to-nvvm` and `tile-to-ptx`.
void registerTileToNVVMPipelines();

/// Registers the named pipeline `tileopt-linalg-to-tile`: linalg on tensors
/// (as torch-mlir prints it) to a tile module of kernels and a host function.
void registerLinalgToTilePipeline();

} // namespace tileopt

#endif // TILEOPT_CONVERSION_PASSES_H
