// A hand-written kernel at stage "llvm" that follows the kernel ABI (docs/kernel-abi.md):
// y[r, c] = alpha * x[r, c] over rank-2 f32 views of any strides, one element per thread of a
// 1-D grid over the row-major index of y; then a scalar alpha.
//   tile.kernel @scale(%x: memref<?x?xf32, strided<[?, ?], offset: ?>>, %y: ..., %alpha: f32)
// Each rank-2 view is (pointer, size0, size1, stride0, stride1).
module attributes {gpu.container_module} {
  gpu.module @tileopt_kernels {
    gpu.func @scale(%xp: !llvm.ptr<1>, %xn0: i64, %xn1: i64, %xs0: i64, %xs1: i64,
                    %yp: !llvm.ptr<1>, %yn0: i64, %yn1: i64, %ys0: i64, %ys1: i64,
                    %alpha: f32) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %gid = arith.addi %base, %tid : index
      %i = arith.index_cast %gid : index to i64
      %n = arith.muli %yn0, %yn1 : i64
      %inside = arith.cmpi slt, %i, %n : i64
      cf.cond_br %inside, ^body, ^exit
    ^body:
      %r = arith.divui %i, %yn1 : i64
      %c = arith.remui %i, %yn1 : i64
      %xr = arith.muli %r, %xs0 : i64
      %xc = arith.muli %c, %xs1 : i64
      %xrc = arith.addi %xr, %xc : i64
      %xa = llvm.getelementptr %xp[%xrc] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %xv = llvm.load %xa : !llvm.ptr<1> -> f32
      %v = arith.mulf %xv, %alpha : f32
      %yr = arith.muli %r, %ys0 : i64
      %yc = arith.muli %c, %ys1 : i64
      %yrc = arith.addi %yr, %yc : i64
      %ya = llvm.getelementptr %yp[%yrc] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %v, %ya : f32, !llvm.ptr<1>
      cf.br ^exit
    ^exit:
      gpu.return
    }
  }
}
