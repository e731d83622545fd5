//===- TileConversionPasses.td - lowering tile IR ----------*- tablegen -*-===//

#ifndef TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD
#define TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD

include "mlir/Pass/PassBase.td"

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
    tiles in shared memory, whose size is the kernel's `tile.shared_bytes`.
    f16/bf16 dots with an mma accumulator use ldmatrix + mma.sync, or on
    sm_90a (whose PTX has them) wgmma.mma_async on swizzled shared-memory
    operands, copied there with cp.async where the loads allow it. Index
    loops with 32-bit bounds count in i32.
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
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

#endif // TILEOPT_DIALECT_TILE_TILECONVERSIONPASSES_TD
