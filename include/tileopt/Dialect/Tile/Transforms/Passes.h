//===- Passes.h - passes on tile IR -----------------------------*- C++ -*-===//

#ifndef TILEOPT_DIALECT_TILE_TRANSFORMS_PASSES_H
#define TILEOPT_DIALECT_TILE_TRANSFORMS_PASSES_H

#include "tileopt/Dialect/Tile/IR/Tile.h"

#include "mlir/Pass/Pass.h"

namespace tileopt::tile {

#define GEN_PASS_DECL
#include "tileopt/Dialect/Tile/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tileopt/Dialect/Tile/Transforms/Passes.h.inc"

} // namespace tileopt::tile

#endif // TILEOPT_DIALECT_TILE_TRANSFORMS_PASSES_H
