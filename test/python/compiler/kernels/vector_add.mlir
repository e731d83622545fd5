// A hand-written kernel at stage "llvm" that follows the kernel ABI (docs/kernel-abi.md):
// z = x + y over rank-1 f32 views, one element per thread, masked by z's size.
//   tile.kernel @vector_add(%x: memref<?xf32, strided<[?], offset: ?>>, %y: ..., %z: ...)
// Each view is (pointer, size0, stride0).
module attributes {gpu.container_module} {
  gpu.module @tileopt_kernels {
    gpu.func @vector_add(%xp: !llvm.ptr<1>, %xn: i64, %xs: i64,
                         %yp: !llvm.ptr<1>, %yn: i64, %ys: i64,
                         %zp: !llvm.ptr<1>, %zn: i64, %zs: i64) kernel {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %gid = arith.addi %base, %tid : index
      %i = arith.index_cast %gid : index to i64
      %inside = arith.cmpi slt, %i, %zn : i64
      cf.cond_br %inside, ^body, ^exit
    ^body:
      %xi = arith.muli %i, %xs : i64
      %xa = llvm.getelementptr %xp[%xi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %xv = llvm.load %xa : !llvm.ptr<1> -> f32
      %yi = arith.muli %i, %ys : i64
      %ya = llvm.getelementptr %yp[%yi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %yv = llvm.load %ya : !llvm.ptr<1> -> f32
      %sum = arith.addf %xv, %yv : f32
      %zi = arith.muli %i, %zs : i64
      %za = llvm.getelementptr %zp[%zi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %sum, %za : f32, !llvm.ptr<1>
      cf.br ^exit
    ^exit:
      gpu.return
    }
  }
}
