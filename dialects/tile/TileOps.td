//===- TileOps.td - tile dialect operations ----------------*- tablegen -*-===//
//
// The operations of the tile dialect. This file is the single source of the
// IR: C++ classes, Python builders and the dialect reference are generated
// from it.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_DIALECT_TILE_TILEOPS_TD
#define TILEOPT_DIALECT_TILE_TILEOPS_TD

include "tile/TileDialect.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/InferIntRangeInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Kernels and the grid
//===----------------------------------------------------------------------===//

def Tile_KernelOp : Tile_Op<"kernel", [
    FunctionOpInterface, IsolatedFromAbove, AutomaticAllocationScope,
    SingleBlockImplicitTerminator<"ReturnOp">]> {
  let summary = "a kernel: the body that every program of a grid runs";
  let description = [{
    A kernel is a symbol whose body runs once per program of the grid given
    by `tile.launch`. Its arguments are views (memrefs, usually with dynamic
    sizes and strides) and scalars (integers, index or floats); it returns
    nothing. The body is a single block ending in `tile.return`.

    A view argument may carry `{tile.divisibility = 16}`: the address of its
    first element and its strides other than 1 (in bytes) are multiples of
    16, so the GPU lowering moves 16-byte vectors without a run-time check.
    `{tile.size_divisibility = array<i64: 1, 16>}` (one entry per dimension)
    promises that each size is a multiple of its entry, so a vector access
    never straddles the view's end and needs no scalar tail. Launchers check
    both promises (Triton's JIT makes the same ones when it specializes a
    launch on divisibility by 16). `{tile.index_bitwidth = 32}` promises that
    the view's sizes and element offsets fit in 32-bit signed integers (and
    that tile offsets stay below 2^31), so its index arithmetic is 32-bit, as
    Triton's is for i32 arguments; on an integer or index argument it
    promises a value in [0, 2^31). `{tile.same_shape_as = 0}` promises that
    the view has the shape of view argument #0 (of the same rank, without such
    a promise of its own): its bounds checks use that view's sizes, so
    accesses to the two share them.

    Once layouts are assigned, the kernel attribute `tile.num_warps = N`
    gives the number of warps of a program: the GPU lowering makes the block
    32 * N threads, and no layout in the body may spread its tile over more
    warps (the verifier checks it; a layout over fewer warps is replicated by
    the others).

    `tile.num_stages = S` (1 to 8) sets the depth of the GPU lowering's
    software pipeline for this kernel's loops that feed tensor-core dots
    (the `num-stages` option of convert-tile-to-nvvm otherwise).

    Example:

    ```mlir
    tile.kernel @add(%x: memref<?xf32, strided<[?], offset: ?>>,
                     %y: memref<?xf32, strided<[?], offset: ?>>,
                     %out: memref<?xf32, strided<[?], offset: ?>>) {
      %pid = tile.program_id {dim = 0}
      %c1024 = arith.constant 1024 : index
      %off = arith.muli %pid, %c1024 : index
      %a = tile.load %x[%off] : memref<?xf32, strided<[?], offset: ?>> -> tensor<1024xf32>
      %b = tile.load %y[%off] : memref<?xf32, strided<[?], offset: ?>> -> tensor<1024xf32>
      %s = arith.addf %a, %b : tensor<1024xf32>
      tile.store %s, %out[%off] : tensor<1024xf32>, memref<?xf32, strided<[?], offset: ?>>
      tile.return
    }
    ```
  }];

  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<StrAttr>:$sym_visibility,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);

  let builders = [OpBuilder<(ins "::llvm::StringRef":$name,
                                 "::mlir::FunctionType":$type)>];

  let extraClassDeclaration = [{
    /// The argument attribute `tile.divisibility = D` on a view promises
    /// that the address of the view's first element and every stride other
    /// than 1 (in bytes) are multiples of D, so accesses may be vectorized
    /// without checking at run time (as Triton's divisibility hints).
    static ::llvm::StringRef getDivisibilityAttrName() {
      return "tile.divisibility";
    }

    /// The argument attribute `tile.size_divisibility = array<i64: ...>` on
    /// a view promises that its size along each dimension is a multiple of
    /// that dimension's entry (1: no promise).
    static ::llvm::StringRef getSizeDivisibilityAttrName() {
      return "tile.size_divisibility";
    }

    /// The argument attribute `tile.index_bitwidth = 32` on a view promises
    /// that its sizes and the offsets of its elements fit in i32 (64: the
    /// default, no promise).
    static ::llvm::StringRef getIndexBitwidthAttrName() {
      return "tile.index_bitwidth";
    }

    /// The argument attribute `tile.same_shape_as = K` on a view promises
    /// that its sizes equal those of view argument K.
    static ::llvm::StringRef getSameShapeAsAttrName() {
      return "tile.same_shape_as";
    }

    /// The kernel attribute `tile.num_warps = N` (set by
    /// tile-assign-layouts): the program is a block of 32 * N threads, and
    /// every layout in the body spreads its tile over at most N warps.
    static ::llvm::StringRef getNumWarpsAttrName() { return "tile.num_warps"; }

    /// The kernel attribute `tile.num_stages = S`: the software-pipelining
    /// depth of its loops that feed tensor-core dots (1 to 8).
    static ::llvm::StringRef getNumStagesAttrName() {
      return "tile.num_stages";
    }

    /// The number of warps of a program: the kernel's `tile.num_warps`, else
    /// the most of any layout in its body, else none (no layouts yet).
    std::optional<unsigned> getNumWarps();

    /// FunctionOpInterface: the body, or null for a declaration.
    ::mlir::Region *getCallableRegion() {
      return isExternal() ? nullptr : &getBody();
    }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
    bool isDeclaration() { return isExternal(); }
  }];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Tile_ReturnOp : Tile_Op<"return", [Pure, HasParent<"KernelOp">,
                                      ReturnLike, Terminator]> {
  let summary = "end of a kernel body";
  let description = [{
    Ends the program. Kernels return no values.

    ```mlir
    tile.return
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Tile_ProgramIdOp : Tile_Op<"program_id", [Pure,
    DeclareOpInterfaceMethods<InferIntRangeInterface, ["inferResultRanges"]>]> {
  let summary = "this program's index along one grid dimension";
  let description = [{
    Returns the index of the running program along grid dimension `dim`
    (0, 1 or 2), in `[0, tile.num_programs {dim})`.
    Launchers keep grids within CUDA's limits (below 2^31 programs along
    dimension 0, 65536 along the others), which integer range analysis
    assumes.

    ```mlir
    %pid = tile.program_id {dim = 0}
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<2>]>:$dim);
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict";
}

def Tile_NumProgramsOp : Tile_Op<"num_programs", [Pure,
    DeclareOpInterfaceMethods<InferIntRangeInterface, ["inferResultRanges"]>]> {
  let summary = "the number of programs along one grid dimension";
  let description = [{
    Returns the size of the grid along dimension `dim` (0, 1 or 2), as given
    to `tile.launch`.

    ```mlir
    %n = tile.num_programs {dim = 1}
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<2>]>:$dim);
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def Tile_LoadOp : Tile_Op<"load"> {
  let summary = "read a tile from a view, padding out-of-bounds elements";
  let description = [{
    Reads the tile whose first element sits at the element offsets `offsets`
    of `view` (one `index` per dimension); the tile has the view's rank and
    element type. Element `i` of the tile comes from `view[offsets + i]`;
    where that position lies outside the view's sizes (past the end, or
    before the start when an offset is negative) the element takes the
    `padding` value instead and memory is not touched. `padding` defaults to
    zero of the element type and must have the element type.

    ```mlir
    // Row r of a matrix; columns past the end read -inf.
    %row = tile.load %x[%r, %c0] {padding = 0xFF800000 : f32}
        : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<1x1024xf32>
    ```
  }];
  let arguments = (ins Arg<Tile_View, "the view to read", [MemRead]>:$view,
                       Variadic<Index>:$offsets,
                       OptionalAttr<TypedAttrInterface>:$padding);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $view `[` $offsets `]` attr-dict `:` type($view) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The padding value: the attribute, or zero of the element type.
    ::mlir::TypedAttr getPaddingOrZero();
  }];
  let hasVerifier = 1;
}

def Tile_StoreOp : Tile_Op<"store"> {
  let summary = "write a tile into a view, skipping out-of-bounds elements";
  let description = [{
    Writes `value` so that its first element lands at the element offsets
    `offsets` of `view`. Elements whose position lies outside the view's
    sizes are not written. The tile must have the view's rank and element
    type.

    With `add`, each element is added to the view's element instead, as one
    atomic read-modify-write of that element (relaxed, device scope: PTX
    `red.global.add`; 16 bytes of f32 in one `red.global.add.v4.f32` on
    sm_90 and newer, which needs PTX 8.1), so that several programs may add into the same
    elements, in any order (a split or stream-K reduction over K into a
    view of zeros, say). Only f32 and i32 tiles add: a 16-bit element would
    round every partial sum.

    ```mlir
    tile.store %t, %out[%r, %c0]
        : tensor<1x1024xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
    tile.store %partial, %out[%m, %n] {add}
        : tensor<64x64xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
    ```
  }];
  let arguments = (ins Tile_Tile:$value,
                       Arg<Tile_View, "the view to write", [MemRead, MemWrite]>:$view,
                       Variadic<Index>:$offsets,
                       UnitAttr:$add);
  let assemblyFormat = [{
    $value `,` $view `[` $offsets `]` attr-dict `:` type($value) `,` type($view)
  }];
  let hasVerifier = 1;
}

def Tile_GatherOp : Tile_Op<"gather"> {
  let summary = "read a tile from data-dependent positions of a view";
  let description = [{
    Element `e` of the result is `view[indices#0[e], ..., indices#(r-1)[e]]`:
    one integer index tile per dimension of the view (i32 or i64), each of
    the result's shape. An element whose indices lie outside the view's sizes
    (negative or past the end) takes `padding` (default zero of the element
    type) and memory is not touched, so a gather never reads out of bounds.
    Embedding lookups, cross-entropy's target and concatenations read with
    it; unlike `tile.load`, each element computes its own address (no
    vector accesses).
    ```mlir
    // Rows `ids` of an embedding table, columns 0..63.
    %rows = tile.gather %table[%ids, %cols]
        : memref<?x?xf32, strided<[?, ?], offset: ?>>, tensor<16x64xi64>,
          tensor<16x64xi64> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Arg<Tile_View, "the view to read", [MemRead]>:$view,
                       Variadic<Tile_Tile>:$indices,
                       OptionalAttr<TypedAttrInterface>:$padding);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $view `[` $indices `]` attr-dict `:` type($view) `,` type($indices) `->`
    type($result)
  }];
  let extraClassDeclaration = [{
    /// The padding value: the attribute, or zero of the element type.
    ::mlir::TypedAttr getPaddingOrZero();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Making and reshaping tiles
//===----------------------------------------------------------------------===//

// Ops whose result holds only values of their first operand (a splat's
// scalar, or elements the op moves): an integer result lies in the operand's
// range, as upstream's integer range analysis asks.
class Tile_MovingOp<string mnemonic, list<Trait> traits = []>
    : Tile_Op<mnemonic, traits # [Pure,
        DeclareOpInterfaceMethods<InferIntRangeInterface, ["inferResultRanges"]>]> {
  let extraClassDefinition = [{
    void $cppClass::inferResultRanges(
        ::llvm::ArrayRef<::mlir::ConstantIntRanges> argRanges,
        ::mlir::SetIntRangeFn setResultRange) {
      setResultRange(getResult(), argRanges[0]);
    }
  }];
}

def Tile_SplatOp : Tile_MovingOp<"splat", [
    TypesMatchWith<"value is the element type of the result", "result", "value",
                   "::mlir::cast<::mlir::ShapedType>($_self).getElementType()">]> {
  let summary = "a tile with every element equal to a scalar";
  let description = [{
    ```mlir
    %zeros = tile.splat %c0 : f32 -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Tile_ElementType:$value);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$value attr-dict `:` type($value) `->` type($result)";
  let hasFolder = 1;
}

def Tile_IotaOp : Tile_Op<"iota", [Pure,
    DeclareOpInterfaceMethods<InferIntRangeInterface, ["inferResultRanges"]>]> {
  let summary = "the 1-D tile 0, 1, ..., N-1";
  let description = [{
    Returns a 1-D `i32` tile whose element `i` is `i`. Together with
    `tile.expand_dims` and `tile.broadcast` it builds index tiles for
    argmax-style reductions and masks.

    ```mlir
    %i = tile.iota : tensor<128xi32>
    ```
  }];
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tile_BroadcastOp : Tile_MovingOp<"broadcast"> {
  let summary = "expand size-1 dimensions of a tile";
  let description = [{
    Returns a tile of the result shape whose dimensions of size 1 in the
    source are repeated; all other dimensions must match. Source and result
    have the same rank.

    ```mlir
    %b = tile.broadcast %bias : tensor<1x128xf32> -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$source);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_ExpandDimsOp : Tile_MovingOp<"expand_dims"> {
  let summary = "insert a dimension of size 1";
  let description = [{
    Returns the source with a new dimension of size 1 at position `axis`
    (0 <= axis <= rank of the source).

    ```mlir
    %col = tile.expand_dims %v {axis = 1} : tensor<64xf32> -> tensor<64x1xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$source, I64Attr:$axis);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_ReshapeOp : Tile_MovingOp<"reshape"> {
  let summary = "reinterpret a tile with another shape, row-major";
  let description = [{
    Returns the elements of the source, in row-major order, with the result
    shape. Source and result hold the same number of elements and the same
    element type.

    ```mlir
    %flat = tile.reshape %t : tensor<4x16xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$source);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_PermuteOp : Tile_MovingOp<"permute"> {
  let summary = "permute the dimensions of a tile";
  let description = [{
    Dimension `i` of the result is dimension `permutation[i]` of the source,
    so `permutation = array<i64: 1, 0>` transposes a 2-D tile.

    ```mlir
    %t = tile.permute %x {permutation = array<i64: 1, 0>}
        : tensor<32x64xf32> -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Tile_Tile:$source, DenseI64ArrayAttr:$permutation);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tile_ConvertLayoutOp : Tile_Op<"convert_layout", [Pure]> {
  let summary = "move a tile into another layout";
  let description = [{
    Returns the same tile (shape, element type, values) in the layout of the
    result type. Layout assignment inserts it where two layouts meet; the
    GPU lowering moves the data through shared memory.

    ```mlir
    %b = tile.convert_layout %a : tensor<64x64xf32, #tile.blocked<...>>
                               -> tensor<64x64xf32, #tile.blocked<...>>
    ```
  }];
  let arguments = (ins Tile_Tile:$source);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and contractions
//===----------------------------------------------------------------------===//

def Tile_ReduceOp : Tile_Op<"reduce", [Pure,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "reduce tiles along one axis with a combiner region";
  let description = [{
    Reduces N tiles of the same shape along `axis` with the combiner region,
    whose block takes 2N scalars (the N accumulated values, then the N new
    values) and yields N scalars with `tile.yield`. Result `i` has the
    element type of operand `i` and its shape with `axis` dropped; reducing a
    1-D tile gives a scalar (written either as the element type or as a 0-d
    tensor). The combiner must be associative and commutative: the order of
    combination is up to the target. Two operands give argmax:

    ```mlir
    %m, %i = tile.reduce %v, %idx {axis = 1}
        : tensor<4x128xf32>, tensor<4x128xi32> -> tensor<4xf32>, tensor<4xi32> {
    ^bb0(%a: f32, %ai: i32, %b: f32, %bi: i32):
      %gt = arith.cmpf ogt, %b, %a : f32
      %v2 = arith.select %gt, %b, %a : f32
      %i2 = arith.select %gt, %bi, %ai : i32
      tile.yield %v2, %i2 : f32, i32
    }
    ```
  }];
  let arguments = (ins Variadic<Tile_Tile>:$operands, I64Attr:$axis);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$combiner);
  // `$operands attr-dict : type($operands) -> type($results) $combiner`,
  // parsed by hand: the generated parser keeps the region in a local that a
  // failed parse destroys while a forward reference still uses its values
  // (MLIR 22 aborts); ReduceOp::parse adds it to the OperationState first.
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Tile_YieldOp : Tile_Op<"yield", [Pure, HasParent<"ReduceOp">, ReturnLike,
                                    Terminator]> {
  let summary = "the values combined by a tile.reduce combiner";
  let description = [{
    ```mlir
    tile.yield %sum : f32
    ```
  }];
  let arguments = (ins Variadic<Tile_ElementType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, ::mlir::ValueRange());
  }]>];
}

def Tile_DotOp : Tile_Op<"dot", [Pure, AllTypesMatch<["acc", "result"]>]> {
  let summary = "matrix product of two tiles plus an accumulator";
  let description = [{
    Returns `acc + lhs @ rhs` for an MxK `lhs`, a KxN `rhs` and an MxN `acc`.
    Inputs are f16, bf16 or f32 (both the same); the accumulator is f32, or
    f16 with f16 inputs. With `input_precision = tf32`, f32 inputs may be
    rounded to tf32 by the target (tensor cores); the default `ieee` keeps
    full f32 products. i8 inputs take an i32 accumulator: exact products,
    sums that wrap modulo 2^32 (as torch's int8 matrix products).

    ```mlir
    %c = tile.dot %a, %b, %acc
        : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
    %d = tile.dot %x, %y, %z input_precision = tf32
        : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
    %e = tile.dot %p, %q, %r
        : tensor<64x32xi8>, tensor<32x64xi8> -> tensor<64x64xi32>
    ```
  }];
  let arguments = (ins Tile_Tile:$lhs, Tile_Tile:$rhs, Tile_Tile:$acc,
                       DefaultValuedAttr<Tile_InputPrecisionAttr,
                           "::tileopt::tile::InputPrecision::ieee">:$input_precision);
  let results = (outs Tile_Tile:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $acc (`input_precision` `=` `` $input_precision^)? attr-dict
    `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

def Tile_LaunchOp : Tile_Op<"launch", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "run a kernel over a grid of programs";
  let description = [{
    Host-side operation (in a `func.func`, never in a kernel): runs kernel
    `kernel` once for every program of the grid `grid` (one to three `index`
    sizes; missing dimensions are 1) with arguments `args`, which must match
    the kernel's signature (a memref argument may be any memref that casts to
    the kernel's view type).

    ```mlir
    tile.launch @add grid(%n, %c1, %c1) (%x, %y, %out)
        : memref<?xf32, strided<[?], offset: ?>>,
          memref<?xf32, strided<[?], offset: ?>>,
          memref<?xf32, strided<[?], offset: ?>>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<Index>:$grid,
                       Variadic<AnyType>:$args);
  let assemblyFormat = [{
    $kernel `grid` `(` $grid `)` `(` $args `)` attr-dict (`:` type($args)^)?
  }];
  let hasVerifier = 1;
}

#endif // TILEOPT_DIALECT_TILE_TILEOPS_TD
