// A hand-written kernel at stage "llvm" that follows the kernel ABI (docs/kernel-abi.md) with a
// 16-bit float scalar: y = x * alpha over rank-1 f16 views, computed in f16. The tests also
// compile it with every f16 replaced by bf16.
//   tile.kernel @scale_half(%x: memref<?xf16, strided<[?], offset: ?>>, %y: ..., %alpha: f16)
module attributes {gpu.container_module} {
  gpu.module @tileopt_kernels {
    gpu.func @scale_half(%xp: !llvm.ptr<1>, %xn: i64, %xs: i64,
                         %yp: !llvm.ptr<1>, %yn: i64, %ys: i64, %alpha: f16) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %gid = arith.addi %base, %tid : index
      %i = arith.index_cast %gid : index to i64
      %inside = arith.cmpi slt, %i, %yn : i64
      cf.cond_br %inside, ^body, ^exit
    ^body:
      %xi = arith.muli %i, %xs : i64
      %xa = llvm.getelementptr %xp[%xi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f16
      %xv = llvm.load %xa : !llvm.ptr<1> -> f16
      %v = arith.mulf %xv, %alpha : f16
      %yi = arith.muli %i, %ys : i64
      %ya = llvm.getelementptr %yp[%yi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f16
      llvm.store %v, %ya : f16, !llvm.ptr<1>
      cf.br ^exit
    ^exit:
      gpu.return
    }
  }
}
