// A hand-written kernel at stage "llvm" that needs libdevice: y = exp(x) * alpha over rank-1
// f32 views (math.exp becomes a call of __nv_expf, which the ptx stage links from libdevice).
//   tile.kernel @exp_scale(%x: memref<?xf32, strided<[?], offset: ?>>, %y: ..., %alpha: f32)
module attributes {gpu.container_module} {
  gpu.module @tileopt_kernels {
    gpu.func @exp_scale(%xp: !llvm.ptr<1>, %xn: i64, %xs: i64,
                        %yp: !llvm.ptr<1>, %yn: i64, %ys: i64, %alpha: f32) kernel {
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
      %xa = llvm.getelementptr %xp[%xi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %xv = llvm.load %xa : !llvm.ptr<1> -> f32
      %e = math.exp %xv : f32
      %v = arith.mulf %e, %alpha : f32
      %yi = arith.muli %i, %ys : i64
      %ya = llvm.getelementptr %yp[%yi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %v, %ya : f32, !llvm.ptr<1>
      cf.br ^exit
    ^exit:
      gpu.return
    }
  }
}
