//===- TileConversionPasses.td - lowering tile IR ----------*- tablegen -*-===//

#ifndef TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD
#define TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD

include "mlir/Pass/PassBase.td"

def TileFormKernels : Pass<"tile-form-kernels", "::mlir::ModuleOp"> {
  let summary = "group linalg ops on tensors into kernels (fusion groups)";
  let description = [{
    Decides which ops of each function on tensors become one kernel, and
    over which iteration space, for `convert-linalg-to-tile`:

    - First, an elementwise generic of f16/bf16 results whose body rounds to
      the half type more than once (torch-mlir's sigmoid, gelu) computes in
      f32 and rounds once where its results leave the body, as PyTorch
      computes an op on half tensors.
    - Views cost nothing: a `linalg.generic` that only reads its input
      through a projected permutation (a transpose, broadcast or copy) is
      folded into the indexing maps of the generics that read it; one that
      is read by a reshape or returned stays a strided view of its input's
      buffer. A `tensor.collapse_shape` of dimensions that are not contiguous
      (a reshape after a head transpose) reads a copy instead.
    - A fill (`linalg.fill`, generalized) read only by generics is a splat
      in their kernels, not a kernel of its own.
    - In program order, each generic joins the fusion group of an operand it
      reads in registers when its loops line up with the group's iteration
      space (a value of the group read through the same dimensions; loops no
      such operand decides run over an unused dimension of their size), or
      starts a group. Chains of elementwise ops, reductions over the same
      row with their producers and consumers (softmax, layer norm), and a
      contraction with its elementwise epilogue become one kernel each. A
      contraction never takes producers (that would recompute them for every
      output tile), and an op joins no group whose outputs it also reads
      through another kernel (that would be a cycle). Reductions over rows
      of up to 4096 elements (rounded up to powers of two) keep them in
      registers; longer rows loop over chunks in `convert-linalg-to-tile`,
      so a group with a long row holds only reductions over that row.
    - A gather (`tensor.extract` in a body) from the result of an
      elementwise generic reads that generic's inputs and recomputes its
      body for the gathered elements, so the gathered tensor need not be
      stored (cross-entropy's log-softmax).

    - Attention, `softmax(f(q k^T)) v` with the softmax as torch-mlir
      writes it (`e = exp(x - max(x)); e / sum(e)`, optionally torch's safe
      softmax, which gives 0 for rows whose every score is -inf, and a
      rounding of the probabilities to v's type), where `f` is any chain of
      elementwise ops (a scale, a causal or padding mask) and nothing else
      reads the scores or the probabilities, becomes one group from its
      three (the scores with `f`, the softmax, the product with v): its ops
      get `tile.attention` roles, and `convert-linalg-to-tile` writes one
      flash-attention kernel (`fuse-attention`). Head dimensions up to
      `max-head-dim` (rounded up to powers of two; 256 by default, as flash
      attention's): the kernel holds a block of q and of the output in
      registers, and larger ones stay three kernels whose scores go through
      memory in f32.

    Each generic of a group gets `tile.group = N` and `tile.space =
    array<i64: ...>`: for each of its loops, the dimension of the group's
    space it runs over (-1 for a loop of size 1). Ops tileopt cannot form
    kernels of (gathers, windows, control flow, ...) are reported as errors
    that start with "unsupported:", at the op's location.
  }];
  let options = [
    Option<"fuseAttention", "fuse-attention", "bool", /*default=*/"true",
           "form one kernel of each attention (else three: the scores, the "
           "softmax, the product with v)">,
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"256",
           "the largest head dimension (rounded up to a power of two) of an "
           "attention kernel: 128 where a block has less than 96 KiB of "
           "shared memory (sm_75), which q, a block of keys and one of "
           "values of 256 take">,
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
  ];
}

def ConvertLinalgToTile : Pass<"convert-linalg-to-tile", "::mlir::ModuleOp"> {
  let summary = "write the kernels that tile-form-kernels chose, and a host "
                "function that launches them";
  let description = [{
    Each fusion group (`tile.group`) becomes a `tile.kernel` whose arguments
    are strided views; each function on tensors becomes a host function on
    memrefs (arguments with the identity layout): `memref.alloc` for every
    value that leaves a kernel, `memref.reinterpret_cast` views of the
    buffers for each launch operand (stride 0 for broadcast dimensions, the
    buffer's strides permuted for transposes), reshapes and slices as views,
    non-splat constants as `memref.global`s, and a `tile.launch` per kernel,
    in an order that respects the kernels' dependences.

    In a kernel, a value is a tile over the group's space: the block size
    along the dimensions it spans, 1 elsewhere; linalg bodies' scalar ops
    apply to whole tiles after `tile.broadcast`s. A program owns one block
    of the parallel dimensions (the grid is one-dimensional; the kernel
    splits the program id) and the whole of the reduced ones, whose padding
    takes the combiner's identity. Contractions loop over k with `tile.dot`
    (f32 accumulation; `input_precision = tf32` on f32 inputs with
    `allow-tf32`) and apply their epilogue to the accumulator tile; the
    epilogue's tiles and views leave out the reduced dimensions, so they
    keep the dot's rank and its accumulator layout. The programs of a
    contraction take its output blocks in Triton's grouped order: groups
    of 8 rows of blocks, each down its columns.
    Block sizes follow Inductor's heuristics: up to 1024 elements for an
    elementwise kernel, whole rows and up to 2048 elements for reductions
    (`tile.num_warps` gives about 8 elements a thread). Contractions on
    tensor cores (f16/bf16 operands, or f32 with `allow-tf32`) choose their
    tile by the launch's size in waves of 128 programs (about one wave of
    an A100's or H100's SMs), as measured on an H100: 128 x 256 output
    blocks on 8 warps where that makes two waves or more (n above 128),
    else 128 x 128 on 4 warps, both with 4 pipeline stages
    (`tile.num_stages`) and k steps of 128 bytes of an operand row (64 for
    f16/bf16), 64 bytes where more than two waves of 128 x 128 programs
    share the SMs; the larger block halves, down to 64 x 64, while the
    launch has fewer than 64 programs, and then takes 3 stages of 64 KiB
    of operands (64 x 64 x 256 for f16). Exact f32 contractions
    take 64 x 64 x 32 on 4 warps. No block exceeds its dimension's next
    power of two (nor goes below 16). `tile.fused` lists
    what each kernel computes. The sizes a kernel's grid, loops and masks
    depend on are `index` arguments of the kernel (the launch passes them),
    not constants in it: a kernel is the same for every size with the same
    tiling, and its compiled code is reused for a new shape.

    A group with `tile.attention` roles is written as flash attention: a
    program takes up to 64 query rows (32 for f32, 1 for a single query) of
    one batch element and the whole head dimension, loads q once and loops
    over blocks of keys:
    the block's scores by `tile.dot`, the ops between the scores and the
    softmax, an online softmax (running row maximum and sum, the output
    rescaled by `exp(m_old - m_new)`; rows with no unmasked score so far
    add nothing), and the product with v by `tile.dot` on v's type; the
    output is divided by the row sums once, then the product's epilogue
    runs.
  }];
  let options = [
    Option<"allowTf32", "allow-tf32", "bool", /*default=*/"false",
           "f32 contractions (matmuls, attention) may round their inputs to "
           "tf32 (`input_precision = tf32`: tensor cores), as "
           "torch.backends.cuda.matmul.allow_tf32 allows">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::tileopt::tile::TileDialect",
  ];
}

def ConvertTileToNVVM : Pass<"convert-tile-to-nvvm", "::mlir::ModuleOp"> {
  let summary = "lower tile kernels with layouts to per-thread GPU code";
  let description = [{
    Turns every `tile.kernel` (whose tiles carry layouts, see
    `tile-assign-layouts`) into a `gpu.func` kernel of
    `gpu.module @tileopt_kernels`, targeting `#nvvm.target<chip = ...>`.
    Parameters follow tileopt's kernel ABI (docs/kernel-abi.md): a view
    becomes a global pointer to its first element (the memref's offset is
    folded into it by the launcher), its sizes and strides (i64); scalars
    stay. The block has 32 x num_warps threads. Each thread keeps the
    elements it owns of a tile in a vector; loads and stores are predicated
    PTX, 16 bytes wide when the view is aligned (checked at run time);
    reductions combine in registers, then with warp shuffles, then through
    shared memory; layout conversions, reshapes and (CUDA-core) dots stage
    tiles in shared memory, whose size is the kernel's `tile.shared_bytes`
    (static up to 48 KiB, else the launch's dynamic shared memory,
    `tile.dynamic_shared_bytes`). Loops that feed tensor-core dots from
    cp.async copies are software-pipelined `num-stages` deep: the copies of
    the next iterations land in a ring of staging slots while a dot runs.
    f16/bf16 dots with an mma accumulator use ldmatrix + mma.sync, or on
    sm_90a (whose PTX has them) wgmma.mma_async on swizzled shared-memory
    operands, copied there with cp.async where the loads allow it, or in a
    pipelined loop with TMA (`cp.async.bulk.tensor` completing on one
    mbarrier per ring slot) from 16-byte aligned 2-D views; the kernel then
    takes the tensor maps as extra parameters (`tile.tensor_maps`, see
    `mark-tensor-map-params`). With `warp-specialize`, such a pipeline's
    copies come from a producer warp in a warpgroup after the kernel's
    others (the consumers), as Triton's and CUTLASS's warp-specialised kernels: the
    consumers' loop waits for copies and runs the dots, with no barrier
    across the block and no copies to issue. Index
    loops with 32-bit bounds count in i32. Shifts by an amount outside
    [0, bits), poison in `arith`, give torch's results (0 for shli and
    shrui, the sign for shrsi).
    Host functions' `tile.launch` ops become `gpu.launch_func` with the same
    expanded arguments (from `memref.extract_strided_metadata`). The output
    holds gpu, nvvm, llvm, vector, scf, arith, math and memref ops for the
    upstream `convert-gpu-to-nvvm` and friends.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "the target chip, e.g. sm_80, sm_90 or sm_90a (wgmma)">,
    Option<"features", "features", "std::string", /*default=*/"\"\"",
           "PTX features, e.g. +ptx86 (default: the oldest PTX version that "
           "supports the chip, at least 8.0)">,
    Option<"fpFusion", "fp-fusion", "bool", /*default=*/"true",
           "let float multiplies and adds in kernels fuse into fma (the "
           "`contract` fastmath flag), as nvcc's --fmad=true and Triton's "
           "enable_fp_fusion do by default">,
    Option<"numStages", "num-stages", "unsigned", /*default=*/"3",
           "software-pipelining depth of loops that feed tensor-core dots "
           "(1: no pipelining; a kernel's tile.num_stages takes precedence), "
           "as Triton's num_stages">,
    Option<"tma", "tma", "bool", /*default=*/"true",
           "on sm_90a, copy the operands of pipelined wgmma dots with TMA "
           "(cp.async.bulk.tensor on tensor maps the launcher builds) where "
           "the views allow it; false keeps cp.async">,
    Option<"warpSpecialize", "warp-specialize", "bool", /*default=*/"false",
           "on sm_90a, give a kernel's TMA pipeline a producer warp of its "
           "own (in one more warpgroup): it issues the copies, waiting on an "
           "mbarrier per ring slot that the consumer warps arrive on once "
           "their dots are done with it; the block has 32 x (num_warps + 4) "
           "threads">,
    Option<"maxRegisters", "max-registers", "unsigned", /*default=*/"0",
           "registers per thread that ptxas may give each kernel (its "
           "`.maxnreg`, as Triton's maxnreg; 0: ptxas's choice, up to 255); "
           "a warp-specialised kernel then keeps that count in every "
           "warpgroup (no setmaxnreg)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def MarkTensorMapParams : Pass<"mark-tensor-map-params", "::mlir::ModuleOp"> {
  let summary = "make kernels' TMA tensor-map parameters by-value grid constants";
  let description = [{
    A kernel whose copies use TMA (`convert-tile-to-nvvm` on sm_90a) takes
    its tensor maps as its last parameters, one per entry of the
    `tile.tensor_maps` attribute of its function (docs/kernel-abi.md). After
    `convert-gpu-to-nvvm` has made the kernel an `llvm.func`, this pass gives
    each of them the attributes that make it a 128-byte `CUtensorMap` passed
    by value and read in place (`.param .align 64 .b8 p[128]`, a
    `__grid_constant__` in CUDA): `llvm.byval = !llvm.array<128 x i8>`,
    `llvm.align = 64` and `nvvm.grid_constant`. `gpu.func` cannot carry
    them: NVVM accepts grid constants only on `llvm.func` kernels, and the
    upstream conversion drops `llvm.byval`. A function whose parameters are
    fewer than its tensor maps, or not pointers, is an error.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
  ];
}

def CheckNVPTXInput : Pass<"check-nvptx-input", "::mlir::ModuleOp"> {
  let summary = "reject LLVM-dialect IR that LLVM's NVPTX back end aborts or "
                "hangs on";
  let description = [{
    The last check before `gpu-module-to-binary` translates a `gpu.module` to
    LLVM IR and runs the NVPTX back end in-process, where malformed input that
    the LLVM dialect's verifiers accept ends in an assertion, a fatal error or
    a code generator that never finishes. This pass names the op instead:

    - a pointer in an address space NVPTX has no state space for (it knows
      0 generic, 1 global, 3 shared, 4 constant, 5 local, 7 shared::cluster
      and 101 kernel parameters), or a variable in one that holds none (7,
      101);
    - a vector of more than 4096 lanes (no per-thread value is that large;
      NVPTX's legalization of one takes hours);
    - an `llvm.bitcast` between types of different sizes;
    - an `llvm.inline_asm` whose text names an operand (`$N`) past its
      constraints' outputs and inputs.

    IR that tileopt's own lowering emits passes it unchanged; it guards the
    `start="llvm"` entry point and hand-written modules (whose code generation
    `tileopt.compile` also runs in a child process, for what this pass does
    not know).
  }];
}

#endif // TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD
