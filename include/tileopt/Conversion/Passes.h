//===- Passes.h - lowering tile IR ------------------------------*- C++ -*-===//

#ifndef TILEOPT_CONVERSION_PASSES_H
#define TILEOPT_CONVERSION_PASSES_H

#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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
