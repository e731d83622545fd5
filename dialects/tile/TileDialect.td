//===- TileDialect.td - the tile dialect -------------------*- tablegen -*-===//
//
// The tile dialect: kernels that compute whole tiles over a grid of programs.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_DIALECT_TILE_TILEDIALECT_TD
#define TILEOPT_DIALECT_TILE_TILEDIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

def Tile_Dialect : Dialect {
  let name = "tile";
  let cppNamespace = "::tileopt::tile";
  let summary = "Tile-level kernels: whole-tile operations over a grid of programs";
  let description = [{
    A `tile.kernel` runs once per program of a 1-D to 3-D grid. Each program
    computes whole tiles with whole-tile operations; threads, warps and shared
    memory never appear in tile IR: the target lowering chooses them.

    * A *tile* is a builtin ranked tensor with a static shape whose dimensions
      are powers of two, e.g. `tensor<64x128xf32>`; element types are i1, i8,
      i16, i32, i64, f16, bf16, f32 and f64, and at most 2^20 elements (as
      Triton's limit; kernels verify it). `arith` and `math` ops apply to
      tiles elementwise and `scf.for` carries tiles through loops. A rank-0
      tile (`tensor<f32>`) holds one element.
    * Global memory is seen through *views*: kernel arguments of memref type,
      usually with dynamic sizes and strides
      (`memref<?x?xf32, strided<[?, ?], offset: ?>>`). A view's sizes are the
      bounds that make loads and stores masked automatically.
    * Scalars (sizes, epsilon, ...) are plain integer, index or float kernel
      arguments.

    Host functions (`func.func`) run kernels with `tile.launch`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let hasConstantMaterializer = 1;
  let hasCanonicalizer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Tile_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tile_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Tile_InputPrecision : I32EnumAttr<"InputPrecision",
    "precision of the inputs of a tile.dot", [
      I32EnumAttrCase<"ieee", 0>,
      I32EnumAttrCase<"tf32", 1>
    ]> {
  let cppNamespace = "::tileopt::tile";
  let genSpecializedAttr = 0;
}

def Tile_InputPrecisionAttr : EnumAttr<Tile_Dialect, Tile_InputPrecision,
                                       "input_precision"> {
  let assemblyFormat = "$value";
}

//===----------------------------------------------------------------------===//
// Layouts: which thread of a program owns which element of a tile (the GPU
// lowering's encoding on tile tensor types, following Triton's layouts).
//===----------------------------------------------------------------------===//

def Tile_BlockedLayoutAttr : AttrDef<Tile_Dialect, "BlockedLayout",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "blocked";
  let summary = "a blocked distributed layout";
  let description = [{
    Distributes a tile over the threads of a program as Triton's blocked
    layout does. Per dimension `d`, each thread holds `sizePerThread[d]`
    contiguous elements, `threadsPerWarp[d]` threads of a warp and
    `warpsPerCTA[d]` warps tile the dimension, and the resulting pattern of
    `sizePerThread[d] * threadsPerWarp[d] * warpsPerCTA[d]` elements repeats
    to cover larger tiles (smaller tiles replicate it). `order` lists the
    dimensions from fastest to slowest varying: it orders lanes within a
    warp, warps, and the elements of a thread's registers. The products of
    `threadsPerWarp` and `warpsPerCTA` are 32 and the number of warps. The
    layout's rank is that of the tiles it encodes (tensor types verify it);
    a rank-0 tile takes a `#tile.slice` of a 1-D layout.

    ```mlir
    #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8],
                  warpsPerCTA = [4, 1], order = [1, 0]>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$sizePerThread,
                        ArrayRefParameter<"unsigned">:$threadsPerWarp,
                        ArrayRefParameter<"unsigned">:$warpsPerCTA,
                        ArrayRefParameter<"unsigned">:$order);
  let assemblyFormat = [{
    `<` `sizePerThread` `=` `[` $sizePerThread `]` `,`
        `threadsPerWarp` `=` `[` $threadsPerWarp `]` `,`
        `warpsPerCTA` `=` `[` $warpsPerCTA `]` `,`
        `order` `=` `[` $order `]` `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return getOrder().size(); }
    unsigned getNumWarps() const;
  }];
}

def Tile_MmaLayoutAttr : AttrDef<Tile_Dialect, "MmaLayout",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "mma";
  let summary = "the accumulator layout of tensor-core mma.sync";
  let description = [{
    The layout of a `tile.dot` accumulator computed with `mma.sync`
    (m16n8k16 on sm_80 and newer). Warps tile the result as `warpsPerCTA`
    (rows, columns); each warp computes 16x8 blocks, repeated to cover the
    tile. Within a block, lane `l` holds rows `l / 4` and `l / 4 + 8`, columns
    `2 * (l % 4)` and `2 * (l % 4) + 1`, as the PTX ISA lays out the C
    fragment.

    `blockN` (default 8, mma.sync's) is the columns a warp computes before
    the next warp column's: a warp owns blocks of 16 x `blockN`, made of
    8-column groups laid out as above. wgmma with warpgroups split across
    columns takes `blockN = n / warpsN`, so that each warpgroup computes a
    contiguous range of columns (Triton's `instrShape`) and its B operand is
    one slice of the staged tile.

    The rows and columns are the last two dimensions. Leading dimensions,
    each of size 1 in the tile and with 1 warp, are those that a reshape
    added to a dot's result (one matrix of a batch, as Triton's rank-3 mma
    layouts): its registers stay where the dot left them.

    ```mlir
    #tile.mma<warpsPerCTA = [2, 2]>
    #tile.mma<warpsPerCTA = [1, 2, 2]>  // tensor<1x128x128xf32, #mma3>
    #tile.mma<warpsPerCTA = [4, 2], blockN = 64>  // wgmma, 64x128 on 8 warps
    ```
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$warpsPerCTA,
                        DefaultValuedParameter<"unsigned", "8">:$blockN);
  let assemblyFormat = [{
    `<` `warpsPerCTA` `=` `[` $warpsPerCTA `]` (`,` `blockN` `=` $blockN^)? `>`
  }];
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<unsigned>":$warpsPerCTA), [{
      return $_get($_ctxt, warpsPerCTA, 8);
    }]>
  ];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return getWarpsPerCTA().size(); }
    /// Warps along the rows (the second-to-last dimension) and the columns.
    unsigned getWarpsM() const { return getWarpsPerCTA()[getRank() - 2]; }
    unsigned getWarpsN() const { return getWarpsPerCTA().back(); }
    unsigned getNumWarps() const { return getWarpsM() * getWarpsN(); }
  }];
}

def Tile_SliceLayoutAttr : AttrDef<Tile_Dialect, "SliceLayout",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "slice";
  let summary = "a parent layout with one dimension removed";
  let description = [{
    The layout of a tile that lost dimension `dim` of a tile with layout
    `parent`, as a reduction along `dim` produces: each thread owns the
    elements whose other coordinates it owned in the parent.

    ```mlir
    #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 4],
                threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>>
    ```
  }];
  let parameters = (ins "unsigned":$dim, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Tile_ElementType : AnyTypeOf<[I1, I8, I16, I32, I64, F16, BF16, F32, F64,
                                  F8E4M3FN, F8E5M2]>;

def Tile_Tile : Type<
    CPred<"::tileopt::tile::isTileType($_self)">,
    "tile (a static tensor with power-of-two dims of i1, i8, i16, i32, i64, "
    "f16, bf16, f32, f64, f8E4M3FN or f8E5M2)",
    "::mlir::RankedTensorType">;

def Tile_View : Type<
    CPred<"::tileopt::tile::isViewType($_self)">,
    "view (a strided memref of i1, i8, i16, i32, i64, f16, bf16, f32, f64, "
    "f8E4M3FN or f8E5M2)",
    "::mlir::MemRefType">;

def Tile_TileOrScalar : AnyTypeOf<[Tile_Tile, Tile_ElementType]>;

#endif // TILEOPT_DIALECT_TILE_TILEDIALECT_TD
