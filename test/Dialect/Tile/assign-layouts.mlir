// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts | FileCheck %s
// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts=num-warps=8 | FileCheck %s --check-prefix=WARPS8
// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts --tile-remove-layout-conversions | FileCheck %s --check-prefix=CLEAN
// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts=target=sm_90a | FileCheck %s --check-prefix=SM90A
// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts=target=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: tileopt-opt %s -split-input-file --tile-assign-layouts="target=sm_90a num-warps=8" | FileCheck %s --check-prefix=SM90A8

// Loads and stores anchor 16-byte-per-thread layouts along the stride-1 dim;
// elementwise ops inherit them; the broadcast 1-D bias meets the 2-D layout
// through a conversion, which tile-remove-layout-conversions then moves up
// to the bias load (CLEAN).
// CHECK-DAG: #[[B2:.*]] = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
// CHECK-LABEL: tile.kernel @bias_add
// CHECK: %[[X:.*]] = tile.load {{.*}} -> tensor<32x64xf32, #[[B2]]>
// CHECK: tile.load {{.*}} -> tensor<64xf32, #{{.*}}>
// CHECK: tile.expand_dims
// CHECK: %[[BB:.*]] = tile.broadcast
// CHECK: %[[C:.*]] = tile.convert_layout %[[BB]] : {{.*}} -> tensor<32x64xf32, #[[B2]]>
// CHECK: arith.addf %[[X]], %[[C]] : tensor<32x64xf32, #[[B2]]>
// CHECK: tile.store {{.*}} : tensor<32x64xf32, #[[B2]]>
// CLEAN-LABEL: tile.kernel @bias_add
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.load %{{.*}} -> tensor<64xf32, #[[S:.*]]>
// CLEAN: tile.expand_dims %{{.*}} : tensor<64xf32, #[[S]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.return
// WARPS8-LABEL: tile.kernel @bias_add
// WARPS8: warpsPerCTA = [8, 1]
tile.kernel @bias_add(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %b: memref<?xf32, strided<[1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<32x64xf32>
  %bias = tile.load %b[%c0] : memref<?xf32, strided<[1], offset: ?>> -> tensor<64xf32>
  %be = tile.expand_dims %bias {axis = 0} : tensor<64xf32> -> tensor<1x64xf32>
  %bb = tile.broadcast %be : tensor<1x64xf32> -> tensor<32x64xf32>
  %s = arith.addf %t, %bb : tensor<32x64xf32>
  tile.store %s, %x[%c0, %c0] : tensor<32x64xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

// f16 moves 8 elements per thread; a reduction gives the slice layout and
// expand_dims returns to the parent, so softmax needs no conversion.
// CHECK-DAG: #[[H:.*]] = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>
// CHECK-DAG: #[[HS:.*]] = #tile.slice<dim = 1, parent = #[[H]]>
// CHECK-LABEL: tile.kernel @softmax_f16
// CHECK-NOT: tile.convert_layout
// CHECK: tile.reduce {{.*}} : tensor<1x1024xf16, #[[H]]> -> tensor<1xf16, #[[HS]]>
// CHECK-NOT: tile.convert_layout
// CHECK: tile.expand_dims {{.*}} : tensor<1xf16, #[[HS]]> -> tensor<1x1xf16, #[[H]]>
// CHECK-NOT: tile.convert_layout
// CHECK: tile.return
tile.kernel @softmax_f16(%x: memref<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<1x1024xf16>
  %m = tile.reduce %t {axis = 1} : tensor<1x1024xf16> -> tensor<1xf16> {
  ^bb0(%a: f16, %b: f16):
    %r = arith.maximumf %a, %b : f16
    tile.yield %r : f16
  }
  %me = tile.expand_dims %m {axis = 1} : tensor<1xf16> -> tensor<1x1xf16>
  %mb = tile.broadcast %me : tensor<1x1xf16> -> tensor<1x1024xf16>
  %d = arith.subf %t, %mb : tensor<1x1024xf16>
  tile.store %d, %x[%c0, %c0] : tensor<1x1024xf16>, memref<?x?xf16>
  tile.return
}

// -----

// A transpose permutes the layout; the store converts it back to a
// coalesced one. Views with dynamic strides use the last dim as fastest.
// CHECK-DAG: #[[R:.*]] = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
// CHECK-DAG: #[[C:.*]] = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 4], order = [0, 1]>
// CHECK-LABEL: tile.kernel @transpose
// CHECK: tile.permute {{.*}} : tensor<32x64xf32, #[[R]]> -> tensor<64x32xf32, #[[C]]>
// CHECK: tile.convert_layout {{.*}} : tensor<64x32xf32, #[[C]]> -> tensor<64x32xf32, #{{.*}}>
tile.kernel @transpose(%x: memref<?x?xf32, strided<[?, ?], offset: ?>>, %y: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<32x64xf32>
  %p = tile.permute %t {permutation = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  tile.store %p, %y[%c0, %c0] : tensor<64x32xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  tile.return
}

// -----

// scf.for carries tiles in the layout of their initial value.
// CHECK-LABEL: tile.kernel @loop
// CHECK: %[[INIT:.*]] = tile.splat {{.*}} -> tensor<128xf32, #[[L:.*]]>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[INIT]]) -> (tensor<128xf32, #[[L]]>)
// CHECK: scf.yield {{.*}} : tensor<128xf32, #[[L]]>
tile.kernel @loop(%x: memref<?xf32>, %n: index, %s: f32) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %init = tile.splat %s : f32 -> tensor<128xf32>
  %acc = scf.for %i = %c0 to %n step %c128 iter_args(%a = %init) -> (tensor<128xf32>) {
    %t = tile.load %x[%i] : memref<?xf32> -> tensor<128xf32>
    %r = arith.addf %a, %t : tensor<128xf32>
    scf.yield %r : tensor<128xf32>
  }
  tile.store %acc, %x[%c0] : tensor<128xf32>, memref<?xf32>
  tile.return
}

// -----

// f16 dots use tensor cores on sm_80+: the accumulator (and the loop that
// carries it) takes the mma layout; f32 dots stay on CUDA cores. Warps go
// to the dimension with more mma blocks per warp (64 / 16 rows, 64 / 8
// columns): 2 x 2 for 4 warps, 2 x 4 for 8.
// CHECK-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// CHECK-LABEL: tile.kernel @dots
// CHECK: tile.splat
// CHECK-NEXT: tile.convert_layout {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// CHECK: scf.for {{.*}} -> (tensor<64x64xf32, #[[MMA]]>)
// CHECK: tile.dot {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// CHECK: tile.dot {{.*}} : tensor<16x16xf32, #{{.*}}>, tensor<16x16xf32, #{{.*}}> -> tensor<16x16xf32, #blocked
// WARPS8: #tile.mma<warpsPerCTA = [2, 4]>
// WARPS8-LABEL: tile.kernel @dots
// On sm_90a (wgmma) the warps tile the rows only, a warpgroup per 64 rows.
// SM90A: #tile.mma<warpsPerCTA = [4, 1]>
// SM90A-LABEL: tile.kernel @dots
tile.kernel @dots(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %f: memref<?x?xf32>, %k: index, %s: f32) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %init = tile.splat %s : f32 -> tensor<64x64xf32>
  %acc = scf.for %i = %c0 to %k step %c32 iter_args(%x = %init) -> (tensor<64x64xf32>) {
    %ta = tile.load %a[%c0, %i] : memref<?x?xf16> -> tensor<64x32xf16>
    %tb = tile.load %b[%i, %c0] : memref<?x?xf16> -> tensor<32x64xf16>
    %d = tile.dot %ta, %tb, %x : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  tile.store %acc, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  %fa = tile.load %f[%c0, %c0] : memref<?x?xf32> -> tensor<16x16xf32>
  %fz = tile.splat %s : f32 -> tensor<16x16xf32>
  %fd = tile.dot %fa, %fa, %fz : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  tile.store %fd, %f[%c0, %c0] : tensor<16x16xf32>, memref<?x?xf32>
  tile.return
}

// -----

// A 32-bit tile in an mma layout is stored from it: a thread's pairs are
// 8-byte vectors that fill whole sectors. So is an add, an element (or on
// sm_90 a pair) an instruction. A 16-bit store converts to 16-byte row
// accesses, as does an f32 add on sm_90 into a view whose columns are not
// contiguous (16-byte vectors along its rows); before sm_90 it adds from the
// mma layout, whatever the view.
// SM80-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// SM80-LABEL: tile.kernel @store_adds_from_its_layout
// SM80: %[[D:.*]] = tile.dot {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// SM80-NEXT: tile.store %[[D]], %{{.*}} {add} : tensor<64x64xf32, #[[MMA]]>
// SM80-NEXT: tile.store %[[D]], %{{.*}} : tensor<64x64xf32, #[[MMA]]>
// SM80: tile.store %{{.*}}, %{{.*}} {add} : tensor<64x64xi32, #[[MMA]]>
// SM80: %[[H:.*]] = tile.convert_layout %{{.*}} : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #blocked
// SM80-NEXT: tile.store %[[H]]
// SM80-NEXT: tile.store %[[D]], %{{.*}} {add} : tensor<64x64xf32, #[[MMA]]>, memref<?x?xf32, strided<[1, ?]>>
// CHECK-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// CHECK-LABEL: tile.kernel @store_adds_from_its_layout
// CHECK: %[[D:.*]] = tile.dot {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// CHECK-NEXT: tile.store %[[D]], %{{.*}} {add} : tensor<64x64xf32, #[[MMA]]>
// CHECK-NEXT: tile.store %[[D]], %{{.*}} : tensor<64x64xf32, #[[MMA]]>
// CHECK: tile.store %{{.*}}, %{{.*}} {add} : tensor<64x64xi32, #[[MMA]]>
// CHECK: %[[H:.*]] = tile.convert_layout %{{.*}} : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #blocked
// CHECK-NEXT: tile.store %[[H]]
// CHECK-NEXT: %[[T:.*]] = tile.convert_layout %[[D]] : tensor<64x64xf32, #[[MMA]]> -> tensor<64x64xf32, #blocked
// CHECK-NEXT: tile.store %[[T]], %{{.*}} {add} : tensor<64x64xf32, #blocked{{[0-9]*}}>, memref<?x?xf32, strided<[1, ?]>>
tile.kernel @store_adds_from_its_layout(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %f: memref<?x?xf32>, %g: memref<?x?xi32>, %h: memref<?x?xf16>, %t: memref<?x?xf32, strided<[1, ?]>>, %s: f32) {
  %c0 = arith.constant 0 : index
  %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16>
  %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16>
  %z = tile.splat %s : f32 -> tensor<64x64xf32>
  %d = tile.dot %ta, %tb, %z : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
  tile.store %d, %f[%c0, %c0] {add} : tensor<64x64xf32>, memref<?x?xf32>
  tile.store %d, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  %i = arith.fptosi %d : tensor<64x64xf32> to tensor<64x64xi32>
  tile.store %i, %g[%c0, %c0] {add} : tensor<64x64xi32>, memref<?x?xi32>
  %half = arith.truncf %d : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %half, %h[%c0, %c0] : tensor<64x64xf16>, memref<?x?xf16>
  tile.store %d, %t[%c0, %c0] {add} : tensor<64x64xf32>, memref<?x?xf32, strided<[1, ?]>>
  tile.return
}

// -----

// scf.while carries tiles in the layout of their initial values.
// CHECK-LABEL: tile.kernel @while_loop
// CHECK: %[[INIT:.*]] = arith.constant dense<0.000000e+00> : tensor<32xf32, #[[L:.*]]>
// CHECK: scf.while (%{{.*}} = %{{.*}}, %{{.*}} = %[[INIT]]) : (index, tensor<32xf32, #[[L]]>) -> (index, tensor<32xf32, #[[L]]>)
// CHECK: scf.condition(%{{.*}}) %{{.*}}, %{{.*}} : index, tensor<32xf32, #[[L]]>
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: tensor<32xf32, #[[L]]>):
// CHECK: scf.yield %{{.*}}, %{{.*}} : index, tensor<32xf32, #[[L]]>
tile.kernel @while_loop(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant dense<0.0> : tensor<32xf32>
  %r:2 = scf.while (%i = %c0, %acc = %init) : (index, tensor<32xf32>) -> (index, tensor<32xf32>) {
    %cond = arith.cmpi slt, %i, %n : index
    scf.condition(%cond) %i, %acc : index, tensor<32xf32>
  } do {
  ^bb0(%i: index, %acc: tensor<32xf32>):
    %t = tile.load %x[%i] : memref<?xf32> -> tensor<32xf32>
    %a2 = arith.addf %acc, %t : tensor<32xf32>
    %i2 = arith.addi %i, %c1 : index
    scf.yield %i2, %a2 : index, tensor<32xf32>
  }
  tile.store %r#1, %x[%c0] : tensor<32xf32>, memref<?xf32>
  tile.return
}

// -----

// A dot narrower than the warps' columns: warps never tile past the tile
// (8 columns take one warp column; the warps left over repeat the work).
// CHECK-DAG: #[[NARROW:.*]] = #tile.mma<warpsPerCTA = [4, 1]>
// CHECK-LABEL: tile.kernel @narrow_dot
// CHECK: tile.dot {{.*}} -> tensor<64x8xf32, #[[NARROW]]>
// WARPS8: #[[NARROW8:.*]] = #tile.mma<warpsPerCTA = [4, 1]>
// An 8-column accumulator is too narrow for wgmma: mma.sync's split.
// SM90A: #tile.mma<warpsPerCTA = [4, 1]>
// SM90A-LABEL: tile.kernel @narrow_dot
// WARPS8-LABEL: tile.kernel @narrow_dot
// WARPS8: tile.dot {{.*}} -> tensor<64x8xf32, #[[NARROW8]]>
tile.kernel @narrow_dot(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %c: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x16xf16>
  %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<16x8xf16>
  %z = arith.constant dense<0.0> : tensor<64x8xf32>
  %d = tile.dot %ta, %tb, %z : tensor<64x16xf16>, tensor<16x8xf16> -> tensor<64x8xf32>
  tile.store %d, %c[%c0, %c0] : tensor<64x8xf32>, memref<?x?xf32>
  tile.return
}

// -----

// A mask made from iota (an i1 tile, whose own default layout would hold 8
// elements a thread) and expanded through a conversion is still made from
// nothing: the select takes the loaded row's layout, and once the
// conversions are cleaned up no tile of the row moves through shared memory.
// CHECK-LABEL: tile.kernel @iota_mask
// CHECK: %[[X:.*]] = tile.load {{.*}} -> tensor<1x1024xf32, #[[ROW:blocked[0-9]*]]>
// CHECK: arith.select {{.*}} : tensor<1x1024xi1, #[[ROW]]>, tensor<1x1024xf32, #[[ROW]]>
// CLEAN-LABEL: tile.kernel @iota_mask
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.return
tile.kernel @iota_mask(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %y: memref<?x?xf32, strided<[?, 1], offset: ?>>, %n: i32) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant dense<0.0> : tensor<1x1024xf32>
  %iota = tile.iota : tensor<1024xi32>
  %bound = tile.splat %n : i32 -> tensor<1024xi32>
  %in = arith.cmpi slt, %iota, %bound : tensor<1024xi32>
  %mask = tile.expand_dims %in {axis = 0} : tensor<1024xi1> -> tensor<1x1024xi1>
  %row = tile.program_id {dim = 0}
  %t = tile.load %x[%row, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<1x1024xf32>
  %m = arith.select %mask, %t, %zero : tensor<1x1024xi1>, tensor<1x1024xf32>
  tile.store %m, %y[%row, %c0] : tensor<1x1024xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

// A causal mask on a dot's scores, a matrix of a rank-3 batch, before their
// row maximum: the positions (iotas expanded to [1, 64] and [64, 1], reshaped
// to rank 3, broadcast) are cheap producers, so the select and the reduction
// keep the scores' mma layout; once the conversions are cleaned up the
// positions are remade in slices of it: only the row maxima (for the store)
// move through shared memory.
// CHECK-LABEL: tile.kernel @mma_causal_mask
// CHECK: arith.select {{.*}} : tensor<1x64x64xi1, #[[MMA3:mma[0-9]*]]>, tensor<1x64x64xf32, #[[MMA3]]>
// CLEAN-LABEL: tile.kernel @mma_causal_mask
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.iota : tensor<64xi32, #[[KEYS:slice[0-9]*]]>
// CLEAN: tile.expand_dims {{.*}} : tensor<64xi32, #[[KEYS]]> -> tensor<1x64xi32, #[[MMA:mma[0-9]*]]>
// CLEAN: tile.reshape {{.*}} : tensor<1x64xi32, #[[MMA]]> -> tensor<1x1x64xi32, #[[MMA3:mma[0-9]*]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.reduce {{.*}} : tensor<1x64x64xf32, #[[MMA3]]>
// CLEAN: tile.convert_layout
// CLEAN-NEXT: tile.store
tile.kernel @mma_causal_mask(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16>
  %w = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %x, %w, %z : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
  %s = tile.reshape %d : tensor<64x64xf32> -> tensor<1x64x64xf32>
  %iota = tile.iota : tensor<64xi32>
  %k2 = tile.expand_dims %iota {axis = 0} : tensor<64xi32> -> tensor<1x64xi32>
  %k3 = tile.reshape %k2 : tensor<1x64xi32> -> tensor<1x1x64xi32>
  %keys = tile.broadcast %k3 : tensor<1x1x64xi32> -> tensor<1x64x64xi32>
  %r2 = tile.expand_dims %iota {axis = 1} : tensor<64xi32> -> tensor<64x1xi32>
  %r3 = tile.reshape %r2 : tensor<64x1xi32> -> tensor<1x64x1xi32>
  %rows = tile.broadcast %r3 : tensor<1x64x1xi32> -> tensor<1x64x64xi32>
  %seen = arith.cmpi sle, %keys, %rows : tensor<1x64x64xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<1x64x64xf32>
  %m = arith.select %seen, %s, %ninf : tensor<1x64x64xi1>, tensor<1x64x64xf32>
  %max = tile.reduce %m {axis = 2} : tensor<1x64x64xf32> -> tensor<1x64xf32> {
  ^bb0(%l: f32, %r: f32):
    %v = arith.maximumf %l, %r : f32
    tile.yield %v : f32
  }
  tile.store %max, %y[%c0, %c0] : tensor<1x64xf32>, memref<?x?xf32>
  tile.return
}

// -----

// A rank-0 tile takes a slice of a one-element 1-D layout; the kernel records
// its warp count.
// CHECK-DAG: #[[ONE:.*]] = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
// CHECK-DAG: #[[SCALAR:.*]] = #tile.slice<dim = 0, parent = #[[ONE]]>
// CHECK-LABEL: tile.kernel @scalar_tile
// CHECK-SAME: attributes {tile.num_warps = 4 : i32}
// CHECK: tile.load {{.*}} -> tensor<f32, #[[SCALAR]]>
// CHECK: tile.permute {{.*}} : tensor<f32, #[[SCALAR]]> -> tensor<f32, #[[SCALAR]]>
// CHECK: tile.reshape {{.*}} -> tensor<1xf32, #{{.*}}>
// WARPS8-LABEL: tile.kernel @scalar_tile
// WARPS8-SAME: attributes {tile.num_warps = 8 : i32}
tile.kernel @scalar_tile(%x: memref<f32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[] : memref<f32> -> tensor<f32>
  %p = tile.permute %t {permutation = array<i64>} : tensor<f32> -> tensor<f32>
  %r = tile.reshape %p : tensor<f32> -> tensor<1xf32>
  tile.store %r, %y[%c0] : tensor<1xf32>, memref<?xf32>
  tile.return
}

// -----

// Reshapes that only insert or drop unit dimensions keep every register in
// place: a batch's operand tiles drop their unit dimension with the same
// lanes and warps, and the dot's accumulator becomes one matrix of a batch in
// a rank-3 mma layout (no trip through shared memory). A unit dimension that
// lanes replicate (the 1x1x16 tile's first) cannot be dropped in place: that
// reshape takes the default layout.
// CHECK-DAG: #[[A3:.*]] = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 8, 4], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
// CHECK-DAG: #[[A:.*]] = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
// CHECK-DAG: #[[B3:.*]] = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 4, 8], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
// CHECK-DAG: #[[B:.*]] = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
// CHECK-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// CHECK-DAG: #[[MMA3:.*]] = #tile.mma<warpsPerCTA = [1, 2, 2]>
// CHECK-DAG: #[[ROW:.*]] = #tile.blocked<sizePerThread = [1, 1, 1], threadsPerWarp = [2, 1, 16], warpsPerCTA = [4, 1, 1], order = [2, 1, 0]>
// CHECK-DAG: #[[FLAT:.*]] = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
// CHECK-LABEL: tile.kernel @unit_dim_reshapes
// CHECK: tile.reshape {{.*}} : tensor<1x64x32xf16, #[[A3]]> -> tensor<64x32xf16, #[[A]]>
// CHECK: tile.reshape {{.*}} : tensor<1x32x64xf16, #[[B3]]> -> tensor<32x64xf16, #[[B]]>
// CHECK: tile.reshape {{.*}} : tensor<64x64xf32, #[[MMA]]> -> tensor<1x64x64xf32, #[[MMA3]]>
// CHECK-NEXT: arith.addf {{.*}} : tensor<1x64x64xf32, #[[MMA3]]>
// CHECK: tile.reshape {{.*}} : tensor<1x1x16xf32, #[[ROW]]> -> tensor<16xf32, #[[FLAT]]>
tile.kernel @unit_dim_reshapes(%x: memref<?x?x?xf16>, %y: memref<?x?x?xf32>, %r: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %a3 = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16> -> tensor<1x64x32xf16>
  %a = tile.reshape %a3 : tensor<1x64x32xf16> -> tensor<64x32xf16>
  %b3 = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16> -> tensor<1x32x64xf16>
  %b = tile.reshape %b3 : tensor<1x32x64xf16> -> tensor<32x64xf16>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
  %d3 = tile.reshape %d : tensor<64x64xf32> -> tensor<1x64x64xf32>
  %s = arith.addf %d3, %d3 : tensor<1x64x64xf32>
  tile.store %s, %y[%c0, %c0, %c0] : tensor<1x64x64xf32>, memref<?x?x?xf32>
  %row = tile.load %y[%c0, %c0, %c0] : memref<?x?x?xf32> -> tensor<1x1x16xf32>
  %flat = tile.reshape %row : tensor<1x1x16xf32> -> tensor<16xf32>
  tile.store %flat, %r[%c0] : tensor<16xf32>, memref<?xf32>
  tile.return
}

// -----

// On sm_90a, 8 warps and 64 rows: one warpgroup of rows, two of columns,
// each computing 64 contiguous columns of the 128 with wgmma.
// SM90A8: #[[SPLIT:.*]] = #tile.mma<warpsPerCTA = [4, 2], blockN = 64>
// SM90A8-LABEL: tile.kernel @wgmma_column_split
// SM90A8: tile.dot {{.*}} -> tensor<64x128xf32, #[[SPLIT]]>
tile.kernel @wgmma_column_split(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %f: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
  %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<64x128xf16>
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %d = tile.dot %ta, %tb, %z : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
  tile.store %d, %f[%c0, %c0] : tensor<64x128xf32>, memref<?x?xf32>
  tile.return
}

// -----

// 32 columns a warpgroup: B is staged in 64-byte swizzle atoms, one a
// warpgroup (as Triton's m64n32 instrShape).
// SM90A8: #[[NARROW:.*]] = #tile.mma<warpsPerCTA = [4, 2], blockN = 32>
// SM90A8-LABEL: tile.kernel @wgmma_narrow_column_split
// SM90A8: tile.dot {{.*}} -> tensor<64x64xf32, #[[NARROW]]>
tile.kernel @wgmma_narrow_column_split(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %f: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
  %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = tile.dot %ta, %tb, %z : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  tile.store %d, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  tile.return
}

// -----

// f16 accumulators and tf32 dots use tensor cores too (mma.sync m16n8k16
// .f16, m16n8k8 .tf32: K a multiple of 8 is enough for tf32). On sm_90a
// both get wgmma's warpgroup rows (m64nNk16 .f16, m64nNk8 .tf32), and a
// tf32 dot with K = 4 and an f32 dot without tf32 stay on CUDA cores.
// CHECK-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// CHECK-LABEL: tile.kernel @other_tensor_core_types
// CHECK: tile.dot {{.*}} -> tensor<64x64xf16, #[[MMA]]>
// CHECK: tile.dot {{.*}} input_precision = tf32 {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// CHECK: tile.dot {{.*}} input_precision = tf32 {{.*}} -> tensor<64x64xf32, #blocked
// CHECK: tile.dot {{.*}} : tensor<64x8xf32, #{{.*}}>, tensor<8x64xf32, #{{.*}}> -> tensor<64x64xf32, #blocked
// SM90A-DAG: #[[ROWS:.*]] = #tile.mma<warpsPerCTA = [4, 1]>
// SM90A-LABEL: tile.kernel @other_tensor_core_types
// SM90A: tile.dot {{.*}} -> tensor<64x64xf16, #[[ROWS]]>
// SM90A: tile.dot {{.*}} input_precision = tf32 {{.*}} -> tensor<64x64xf32, #[[ROWS]]>
// SM90A: tile.dot {{.*}} input_precision = tf32 {{.*}} -> tensor<64x64xf32, #blocked
tile.kernel @other_tensor_core_types(%a: memref<?x?xf16>, %f: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %ha = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16>
  %hb = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16>
  %hz = arith.constant dense<0.0> : tensor<64x64xf16>
  %h = tile.dot %ha, %hb, %hz : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf16>
  tile.store %h, %a[%c0, %c0] : tensor<64x64xf16>, memref<?x?xf16>
  %fa = tile.load %f[%c0, %c0] : memref<?x?xf32> -> tensor<64x8xf32>
  %fb = tile.load %f[%c0, %c0] : memref<?x?xf32> -> tensor<8x64xf32>
  %fz = arith.constant dense<0.0> : tensor<64x64xf32>
  %t = tile.dot %fa, %fb, %fz input_precision = tf32 : tensor<64x8xf32>, tensor<8x64xf32> -> tensor<64x64xf32>
  tile.store %t, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  %ga = tile.load %f[%c0, %c0] : memref<?x?xf32> -> tensor<64x4xf32>
  %gb = tile.load %f[%c0, %c0] : memref<?x?xf32> -> tensor<4x64xf32>
  %g = tile.dot %ga, %gb, %fz input_precision = tf32 : tensor<64x4xf32>, tensor<4x64xf32> -> tensor<64x64xf32>
  tile.store %g, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  %e = tile.dot %fa, %fb, %fz : tensor<64x8xf32>, tensor<8x64xf32> -> tensor<64x64xf32>
  tile.store %e, %f[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  tile.return
}

// -----

// Chained dots (attention: the first product, softmaxed, is the second's
// lhs) put all warps on the rows. The row maximum and sum reduce the mma
// layout where it is, the loop carries the accumulator and the row
// statistics (which start as constants) in the layouts the body yields, and
// the second dot takes its lhs from registers (the first one's lhs, loop-
// invariant, stays blocked: the lowering stages it once, before the loop).
// Nothing in the loop is converted.
// CLEAN-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [4, 1]>
// CLEAN-DAG: #[[ROWS:.*]] = #tile.slice<dim = 1, parent = #[[MMA]]>
// CLEAN-LABEL: tile.kernel @chained_dots
// CLEAN-NOT: tile.convert_layout
// CLEAN: scf.for {{.*}} -> (tensor<64x64xf32, #[[MMA]]>, tensor<64x1xf32, #[[MMA]]>)
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.dot {{.*}} : tensor<64x64xf16, #blocked{{[0-9]*}}>, tensor<64x64xf16, #{{.*}}> -> tensor<64x64xf32, #[[MMA]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.reduce {{.*}} : tensor<64x64xf32, #[[MMA]]> -> tensor<64xf32, #[[ROWS]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.dot {{.*}} : tensor<64x64xf16, #[[MMA]]>, tensor<64x64xf16, #{{.*}}> -> tensor<64x64xf32, #[[MMA]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: scf.yield
// Eight warps are more than 64 rows have mma blocks: the usual split.
// WARPS8-DAG: #tile.mma<warpsPerCTA = [2, 4]>
// WARPS8-LABEL: tile.kernel @chained_dots
tile.kernel @chained_dots(%q: memref<?x?xf16>, %k: memref<?x?xf16>, %v: memref<?x?xf16>, %o: memref<?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %qt = tile.load %q[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x1xf32>
  %r:2 = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %zero, %m = %ninf) -> (tensor<64x64xf32>, tensor<64x1xf32>) {
    %kt = tile.load %k[%i, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
    %ktt = tile.permute %kt {permutation = array<i64: 1, 0>} : tensor<64x64xf16> -> tensor<64x64xf16>
    %s = tile.dot %qt, %ktt, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %rowmax = tile.reduce %s {axis = 1} : tensor<64x64xf32> -> tensor<64xf32> {
    ^bb0(%a: f32, %b: f32):
      %x = arith.maximumf %a, %b : f32
      tile.yield %x : f32
    }
    %e = tile.expand_dims %rowmax {axis = 1} : tensor<64xf32> -> tensor<64x1xf32>
    %mn = arith.maximumf %m, %e : tensor<64x1xf32>
    %mb = tile.broadcast %mn : tensor<64x1xf32> -> tensor<64x64xf32>
    %p = arith.subf %s, %mb : tensor<64x64xf32>
    %ph = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %v[%i, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
    %acc2 = tile.dot %ph, %vt, %acc : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %acc2, %mn : tensor<64x64xf32>, tensor<64x1xf32>
  }
  tile.store %r#0, %o[%c0, %c0] : tensor<64x64xf32>, memref<?x?xf32>
  tile.return
}

// -----

// An accumulator that the loop rescales on its way to the dot (attention's
// acc * alpha) is carried in the dot's layout: the scales are what moves,
// as a row before its broadcast, and nothing is left to convert.
// CLEAN-LABEL: tile.kernel @rescaled_accumulator
// CLEAN: scf.for {{.*}} -> (tensor<64x128xf32, #[[ACC:mma[0-9]*]]>)
// CLEAN-NOT: tile.convert_layout
// CLEAN: arith.mulf {{.*}} : tensor<64x128xf32, #[[ACC]]>
// CLEAN-NOT: tile.convert_layout
// CLEAN: tile.return
// SM90A8: #[[WIDE:.*]] = #tile.mma<warpsPerCTA = [4, 2], blockN = 64>
// SM90A8-LABEL: tile.kernel @rescaled_accumulator
// SM90A8: scf.for {{.*}} -> (tensor<64x128xf32, #[[WIDE]]>)
tile.kernel @rescaled_accumulator(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %s: memref<?xf32>, %f: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant dense<0.0> : tensor<64x128xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %z) -> (tensor<64x128xf32>) {
    %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16>
    %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<64x128xf16>
    %row = tile.load %s[%i] : memref<?xf32> -> tensor<64xf32>
    %col = tile.expand_dims %row {axis = 1 : i64} : tensor<64xf32> -> tensor<64x1xf32>
    %scale = tile.broadcast %col : tensor<64x1xf32> -> tensor<64x128xf32>
    %scaled = arith.mulf %acc, %scale : tensor<64x128xf32>
    %d = tile.dot %ta, %tb, %scaled : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    scf.yield %d : tensor<64x128xf32>
  }
  tile.store %r, %f[%c0, %c0] : tensor<64x128xf32>, memref<?x?xf32>
  tile.return
}

// -----

// A 1x1 tile gathered at an index loaded from a view of dynamic strides
// (its layout puts the threads down the unit column), broadcast along a row
// of 4096: in its own layout each thread would hold the whole row. The
// broadcast takes the row's default layout instead, its source converted (a
// 1x1 tile: nothing moves).
// CHECK-DAG: #[[ROW:.*]] = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>
// CHECK-LABEL: tile.kernel @broadcast_down_a_unit_column
// CHECK: %[[S:.*]] = tile.convert_layout %{{.*}} : tensor<1x1xf32, #{{.*}}> -> tensor<1x1xf32, #[[ROW]]>
// CHECK: tile.broadcast %[[S]] : tensor<1x1xf32, #[[ROW]]> -> tensor<1x4096xf32, #[[ROW]]>
tile.kernel @broadcast_down_a_unit_column(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %i: memref<?x?xi64, strided<[?, ?], offset: ?>>, %y: memref<?x?xf32, strided<[?, 1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %idx = tile.load %i[%c0, %c0] : memref<?x?xi64, strided<[?, ?], offset: ?>> -> tensor<1x1xi64>
  %s = tile.gather %x[%idx, %idx] : memref<?x?xf32, strided<[?, 1], offset: ?>>, tensor<1x1xi64>, tensor<1x1xi64> -> tensor<1x1xf32>
  %b = tile.broadcast %s : tensor<1x1xf32> -> tensor<1x4096xf32>
  tile.store %b, %y[%c0, %c0] : tensor<1x4096xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

// An i8 rhs that only tensor-core dots read, from a view contiguous along N,
// is staged K-major (8-bit fragments hold 4 elements along K): its load
// gives each thread 4 rows of up to 16 bytes (here 8: 64 x 64 bytes on 128
// threads), so that each column's 4 bytes along K go to shared memory as a
// word. A K-major rhs, the lhs and an i8 tile that something else reads
// keep the 16-byte access layouts.
// SM80-DAG: #[[ROWS:.*]] = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
// SM80-DAG: #[[BLOCKS:.*]] = #tile.blocked<sizePerThread = [4, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
// SM80-DAG: #[[COLS:.*]] = #tile.blocked<sizePerThread = [16, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 4], order = [0, 1]>
// SM80-LABEL: tile.kernel @int8_rhs
// SM80: tile.load %arg0{{.*}} -> tensor<64x64xi8, #[[ROWS]]>
// SM80: tile.load %arg1{{.*}} -> tensor<64x64xi8, #[[BLOCKS]]>
// SM80: tile.load %arg2{{.*}} -> tensor<64x64xi8, #[[COLS]]>
// SM80: tile.load %arg1{{.*}} -> tensor<64x64xi8, #[[ROWS]]>
tile.kernel @int8_rhs(%a: memref<?x?xi8, strided<[?, 1]>>, %b: memref<?x?xi8, strided<[?, 1]>>, %w: memref<?x?xi8, strided<[1, ?]>>, %c: memref<?x?xi32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant dense<0> : tensor<64x64xi32>
  %x = tile.load %a[%c0, %c0] : memref<?x?xi8, strided<[?, 1]>> -> tensor<64x64xi8>
  %y = tile.load %b[%c0, %c0] : memref<?x?xi8, strided<[?, 1]>> -> tensor<64x64xi8>
  %d = tile.dot %x, %y, %z : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
  %t = tile.load %w[%c0, %c0] : memref<?x?xi8, strided<[1, ?]>> -> tensor<64x64xi8>
  %e = tile.dot %x, %t, %d : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
  %u = tile.load %b[%c0, %c0] : memref<?x?xi8, strided<[?, 1]>> -> tensor<64x64xi8>
  %f = tile.dot %x, %u, %e : tensor<64x64xi8>, tensor<64x64xi8> -> tensor<64x64xi32>
  tile.store %u, %b[%c0, %c0] : tensor<64x64xi8>, memref<?x?xi8, strided<[?, 1]>>
  tile.store %f, %c[%c0, %c0] : tensor<64x64xi32>, memref<?x?xi32>
  tile.return
}
