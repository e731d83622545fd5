// A hand-written sm_90a kernel at stage "llvm" that copies with TMA through a tensor map, as
// docs/kernel-abi.md ("Tensor maps") says: after the parameters of its arguments
//   x: view<?x?xf16>, y: view<?x?xf16>, dr: i32, dc: i32
// it takes one tensor map (a 128-byte CUtensorMap by value, a grid constant) over view 0 (x),
// described by the tile.tensor_maps attribute: boxes of 16 x 64 elements, 128-byte swizzle.
// Program (bx, by) loads the box of x at row 16*by + dr, column 64*bx + dc (elements outside x
// arrive as zeros) into shared memory, waits on an mbarrier, and copies the 2048 bytes as they
// lie in shared memory (swizzled) to y[16*by : 16*by + 16, 64*bx : 64*bx + 64]: 128 threads,
// one 16-byte chunk each; y must be row-contiguous and cover every program's box.
module attributes {gpu.container_module} {
  gpu.module @tileopt_kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global internal @tile() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<2048 x i8>
    llvm.mlir.global internal @bar() {addr_space = 3 : i32, alignment = 8 : i64} : i64
    llvm.func @tma_copy(%xp: !llvm.ptr<1>, %xn0: i64, %xn1: i64, %xs0: i64, %xs1: i64,
                        %yp: !llvm.ptr<1>, %yn0: i64, %yn1: i64, %ys0: i64, %ys1: i64,
                        %dr: i32, %dc: i32,
                        %map: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
        attributes {gpu.kernel, nvvm.kernel,
                    tile.tensor_maps = [{box = array<i64: 16, 64>, swizzle = 128 : i64, view = 0 : i64}]} {
      %c0 = llvm.mlir.constant(0 : i32) : i32
      %c3 = llvm.mlir.constant(3 : i32) : i32
      %c4 = llvm.mlir.constant(4 : i32) : i32
      %c7 = llvm.mlir.constant(7 : i32) : i32
      %c16 = llvm.mlir.constant(16 : i32) : i32
      %c64 = llvm.mlir.constant(64 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %bx = nvvm.read.ptx.sreg.ctaid.x : i32
      %by = nvvm.read.ptx.sreg.ctaid.y : i32
      %tile = llvm.mlir.addressof @tile : !llvm.ptr<3>
      %bar = llvm.mlir.addressof @bar : !llvm.ptr<3>
      %first = llvm.icmp "eq" %tid, %c0 : i32
      llvm.cond_br %first, ^init, ^sync
    ^init:
      llvm.inline_asm has_side_effects "mbarrier.init.shared::cta.b64 [$0], 1;\0Afence.mbarrier_init.release.cluster;", "l" %bar : (!llvm.ptr<3>) -> ()
      llvm.br ^sync
    ^sync:
      nvvm.barrier0
      llvm.cond_br %first, ^issue, ^wait
    ^issue:
      %row0 = llvm.mul %by, %c16 : i32
      %col0 = llvm.mul %bx, %c64 : i32
      %row = llvm.add %row0, %dr : i32
      %col = llvm.add %col0, %dc : i32
      // TMA coordinates are innermost first: {column, row}.
      llvm.inline_asm has_side_effects "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], 2048;\0Acp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$1], [$2, {$3, $4}], [$0];", "l,l,l,r,r" %bar, %tile, %map, %col, %row : (!llvm.ptr<3>, !llvm.ptr<3>, !llvm.ptr, i32, i32) -> ()
      llvm.br ^wait
    ^wait:
      llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0AwaitLoop:\0Ambarrier.try_wait.parity.shared::cta.b64 p, [$0], 0;\0A@!p bra waitLoop;\0A}", "l" %bar : (!llvm.ptr<3>) -> ()
      %r = llvm.lshr %tid, %c3 : i32
      %chunk = llvm.and %tid, %c7 : i32
      %yr0 = llvm.mul %by, %c16 : i32
      %yr = llvm.add %yr0, %r : i32
      %yc0 = llvm.mul %bx, %c64 : i32
      %yc1 = llvm.shl %chunk, %c3 : i32
      %yc = llvm.add %yc0, %yc1 : i32
      %yr64 = llvm.zext %yr : i32 to i64
      %yc64 = llvm.zext %yc : i32 to i64
      %yrs = llvm.mul %yr64, %ys0 : i64
      %yi = llvm.add %yrs, %yc64 : i64
      %ya = llvm.getelementptr %yp[%yi] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f16
      %si = llvm.shl %tid, %c4 : i32
      %sa = llvm.getelementptr %tile[%si] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %v = llvm.load %sa {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
      llvm.store %v, %ya {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
      llvm.return
    }
  }
}
