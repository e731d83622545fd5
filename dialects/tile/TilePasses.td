//===- TilePasses.td - passes on tile IR -------------------*- tablegen -*-===//

#ifndef TILEOPT_DIALECT_TILE_TILEPASSES_TD
#define TILEOPT_DIALECT_TILE_TILEPASSES_TD

include "mlir/Pass/PassBase.td"

def TileAssignLayouts : Pass<"tile-assign-layouts", "::mlir::ModuleOp"> {
  let summary = "give every tile in a kernel a distributed layout";
  let description = [{
    Encodes on every tile tensor type of every `tile.kernel` which thread owns
    which element (`#tile.blocked`, `#tile.slice`). Loads and stores anchor
    the layouts: each thread moves 16 contiguous bytes along the view's
    fastest dimension. Other values take the layout of their operands
    (reductions the slice of theirs, expand_dims the parent, permute the
    permuted layout); where two layouts meet, a `tile.convert_layout` goes
    in. `tile-remove-layout-conversions` then removes the conversions that
    are not needed. f16/bf16 dots on sm_80 and newer accumulate in
    `#tile.mma` (warps split as Triton's mma.sync does; on sm_90a along the
    rows only, a warpgroup per 64 rows, where wgmma fits; chained dots, as
    attention's two, put all warps on the rows). Reductions of an mma tile
    stay in its layout, a dot's lhs already in its accumulator's layout
    stays in registers, and `scf.for` carries a tile in the layout its body
    yields where the body would convert it back anyway. A 32-bit tile in an
    mma layout is stored from it (its fragments' pairs are 8-byte vectors
    that fill 32-byte sectors); a store that adds keeps its value's layout
    (`red.global.add` moves one element, in any layout), except f32 on
    sm_90 and newer from other layouts, which adds 16-byte vectors.
  }];
  let options = [
    Option<"numWarps", "num-warps", "unsigned", /*default=*/"4",
           "warps per program (a power of two)">,
    Option<"target", "target", "std::string", /*default=*/"\"sm_90\"",
           "the target chip, e.g. sm_80, sm_90 or sm_90a (wgmma)">,
  ];
  let dependentDialects = ["::tileopt::tile::TileDialect"];
}

def TileRemoveLayoutConversions
    : Pass<"tile-remove-layout-conversions", "::mlir::ModuleOp"> {
  let summary = "remove layout conversions that are not needed";
  let description = [{
    Folds conversions to the same layout and chains of conversions, and
    rematerializes cheap producers (splat, iota, constants, broadcast and
    elementwise ops of those) directly in the layout that their users
    want, so that no data moves through shared memory for them. A
    conversion moves up through single-use broadcasts, expand_dims,
    reshapes that keep the registers in place, loads and elementwise ops,
    but not past one that narrows its elements (a truncation) unless it
    then vanishes into a load or a cheap producer: a matmul's f16 epilogue
    converts the f16 result, not the f32 accumulator.
  }];
  let dependentDialects = ["::tileopt::tile::TileDialect"];
}

def TileNarrowIntegerTiles
    : Pass<"tile-narrow-integer-tiles", "::mlir::ModuleOp"> {
  let summary = "compute i64 tiles in i32 where their values fit";
  let description = [{
    Kernel formation computes index expressions (masks from iotas, aranges)
    on i64 tiles, as torch types them: two registers and two instructions
    per element. This runs upstream integer range analysis over each
    `tile.kernel` and upstream's narrowing patterns on the arith ops of
    integer tiles, then moves the truncations those leave through splats,
    broadcasts, reshapes, expand_dims and permutes to where they cancel the
    extensions. Besides the ranges that ops declare (`tile.iota`,
    `tile.program_id` within CUDA's grid limits, shape ops passing their
    source's), the analysis takes a kernel's promises: a view with
    `tile.index_bitwidth = 32` has sizes, and an integer or index argument
    with it has a value, in [0, 2^31) (launchers check both), and a loop
    from a constant lower bound by a constant step visits only the values
    the step reaches. A signed op (division, remainder, shift, min, max,
    signed compare) narrows only where its values fit i32 read signed, an
    unsigned one only where they fit read unsigned: upstream's patterns take
    either reading, and -2 % 7 unsigned is 0 in i64 but 2 in i32.
    Scalar index arithmetic keeps its width (the GPU
    lowering reads divisors and bounds from it), but its signed divisions
    and remainders of values that cannot be negative become unsigned
    (upstream's unsigned-when-equivalent patterns): `size floordiv 64`
    is then a shift, not a sign fix-up.

    ```mlir
    // Before: a causal mask on positions below 2^31.
    %d = arith.subi %keys, %rows : tensor<64x64xi64>
    %keep = arith.cmpi sle, %d, %zeros : tensor<64x64xi64>
    // After: the positions, their difference and the compare in i32.
    %d = arith.subi %keys32, %rows32 : tensor<64x64xi32>
    %keep = arith.cmpi sle, %d, %zeros32 : tensor<64x64xi32>
    ```
  }];
  let dependentDialects = ["::tileopt::tile::TileDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TILEOPT_DIALECT_TILE_TILEPASSES_TD
