//===- Tile.h - the tile dialect --------------------------------*- C++ -*-===//
//
// The tile dialect's C++ interface: the dialect, its attributes and ops.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_DIALECT_TILE_IR_TILE_H
#define TILEOPT_DIALECT_TILE_IR_TILE_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TensorEncoding.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferIntRangeInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tileopt/Dialect/Tile/IR/TileDialect.h.inc"
#include "tileopt/Dialect/Tile/IR/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tileopt/Dialect/Tile/IR/TileAttrs.h.inc"

namespace tileopt::tile {

/// True for the element types a tile may hold: i1, i8, i16, i32, i64, f16,
/// bf16, f32, f64, f8E4M3FN, f8E5M2.
bool isTileElementType(mlir::Type type);

/// f8E4M3FN or f8E5M2: tile elements that are only stored, moved, converted
/// and multiplied (tile.dot).
bool isFp8Type(mlir::Type type);

/// True for a tile: a ranked tensor with a static shape whose dims are powers
/// of two and whose element type is a tile element type.
bool isTileType(mlir::Type type);

/// True for a view: a memref with a strided layout (or the identity layout) of
/// a tile element type.
bool isViewType(mlir::Type type);

/// The permutation `inner` followed by `outer`, as one permutation attribute.
mlir::DenseI64ArrayAttr composePermutations(mlir::OpBuilder &builder,
                                            mlir::DenseI64ArrayAttr inner,
                                            mlir::DenseI64ArrayAttr outer);

/// The registers a thread has (PTX allows 255 per thread).
constexpr int64_t kMaxRegistersPerThread = 255;

/// Fails with a diagnostic on `op` when a tile of `type` (its `what`, e.g.
/// "result #0") cannot fit a thread's registers, one or more an element: as
/// its layout gives them to each thread (replicas included) or, before
/// layouts, even spread evenly over `numWarps` warps. Its compilation would
/// only spill, for minutes.
llvm::LogicalResult verifyTileFitsRegisters(mlir::Operation *op,
                                            mlir::Type type, unsigned numWarps,
                                            const llvm::Twine &what);

/// Fails with a diagnostic on the first memref.dim under `root` whose
/// constant index is negative or not below its memref's rank: valid upstream
/// IR (undefined behaviour) that upstream patterns assert on. tile.kernel
/// verifies its body with it; tileopt's pipelines check whole modules first.
llvm::LogicalResult verifyDimIndices(mlir::Operation *root);

} // namespace tileopt::tile

#define GET_OP_CLASSES
#include "tileopt/Dialect/Tile/IR/TileOps.h.inc"

#endif // TILEOPT_DIALECT_TILE_IR_TILE_H
