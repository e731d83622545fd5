//===- TileCanonicalization.td - tile rewrite patterns -----*- tablegen -*-===//
//
// Declarative canonicalization patterns of the tile dialect. Folds that need
// no new ops (identities, constants) live in the ops' fold methods.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_DIALECT_TILE_TILECANONICALIZATION_TD
#define TILEOPT_DIALECT_TILE_TILECANONICALIZATION_TD

include "mlir/IR/PatternBase.td"
include "tile/TileOps.td"

// Reshaping a splat gives a splat of the new shape.
def BroadcastOfSplat : Pat<(Tile_BroadcastOp (Tile_SplatOp $x)),
                           (Tile_SplatOp $x)>;
def ReshapeOfSplat : Pat<(Tile_ReshapeOp (Tile_SplatOp $x)),
                         (Tile_SplatOp $x)>;
def PermuteOfSplat : Pat<(Tile_PermuteOp (Tile_SplatOp $x), $perm),
                         (Tile_SplatOp $x)>;
def ExpandDimsOfSplat : Pat<(Tile_ExpandDimsOp (Tile_SplatOp $x), $axis),
                            (Tile_SplatOp $x)>;

// reshape(reshape(x)) -> reshape(x)
def ReshapeOfReshape : Pat<(Tile_ReshapeOp (Tile_ReshapeOp $x)),
                           (Tile_ReshapeOp $x)>;

// broadcast(broadcast(x)) -> broadcast(x)
def BroadcastOfBroadcast : Pat<(Tile_BroadcastOp (Tile_BroadcastOp $x)),
                               (Tile_BroadcastOp $x)>;

// permute(permute(x, p), q) -> permute(x, p o q)
def ComposePermutations : NativeCodeCall<
    "::tileopt::tile::composePermutations($_builder, $0, $1)">;
def PermuteOfPermute : Pat<(Tile_PermuteOp (Tile_PermuteOp $x, $inner), $outer),
                           (Tile_PermuteOp $x, (ComposePermutations $inner, $outer))>;

#endif // TILEOPT_DIALECT_TILE_TILECANONICALIZATION_TD
