// RUN: tileopt-opt %s -split-input-file --tile-remove-layout-conversions | FileCheck %s
// CHECK-DAG: #[[SLICE0:.*]] = #tile.slice<dim = 0, parent = #{{.*}}>

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 4], order = [0, 1]>
#vec = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A conversion of a splat, an iota or a constant remakes it in place.
// CHECK-LABEL: tile.kernel @cheap_producers
// CHECK-NOT: tile.convert_layout
// CHECK-DAG: tile.splat %{{.*}} : f32 -> tensor<32x64xf32, #[[COL:.*]]>
// CHECK-DAG: arith.constant dense<2.000000e+00> : tensor<32x64xf32, #[[COL]]>
// CHECK-DAG: tile.iota : tensor<64xi32, #[[SLICE:.*]]>
tile.kernel @cheap_producers(%x: memref<?x?xf32>, %y: memref<?xi32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %a = tile.splat %s : f32 -> tensor<32x64xf32, #row>
  %b = arith.constant dense<2.0> : tensor<32x64xf32, #row>
  %i = tile.iota : tensor<64xi32, #vec>
  %ac = tile.convert_layout %a : tensor<32x64xf32, #row> -> tensor<32x64xf32, #col>
  %bc = tile.convert_layout %b : tensor<32x64xf32, #row> -> tensor<32x64xf32, #col>
  %ic = tile.convert_layout %i : tensor<64xi32, #vec> -> tensor<64xi32, #tile.slice<dim = 0, parent = #col>>
  %s2 = arith.addf %ac, %bc : tensor<32x64xf32, #col>
  tile.store %s2, %x[%c0, %c0] : tensor<32x64xf32, #col>, memref<?x?xf32>
  %ie = tile.expand_dims %ic {axis = 0} : tensor<64xi32, #tile.slice<dim = 0, parent = #col>> -> tensor<1x64xi32, #col>
  %ib = tile.broadcast %ie : tensor<1x64xi32, #col> -> tensor<32x64xi32, #col>
  %if = arith.sitofp %ib : tensor<32x64xi32, #col> to tensor<32x64xf32, #col>
  tile.store %if, %x[%c0, %c0] : tensor<32x64xf32, #col>, memref<?x?xf32>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#vec = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A conversion moves up through broadcast and expand_dims to the 1-D load,
// which then loads in the slice layout directly.
// CHECK-LABEL: tile.kernel @hoist_to_load
// CHECK-NOT: tile.convert_layout
// CHECK: tile.load %{{.*}} -> tensor<64xf32, #[[SLICE:.*]]>
// CHECK: tile.expand_dims {{.*}} : tensor<64xf32, #[[SLICE]]> -> tensor<1x64xf32, #[[ROW:.*]]>
// CHECK: tile.broadcast {{.*}} -> tensor<32x64xf32, #[[ROW]]>
tile.kernel @hoist_to_load(%x: memref<?x?xf32>, %b: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<32x64xf32, #row>
  %bias = tile.load %b[%c0] : memref<?xf32> -> tensor<64xf32, #vec>
  %be = tile.expand_dims %bias {axis = 0} : tensor<64xf32, #vec> -> tensor<1x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>>
  %bb = tile.broadcast %be : tensor<1x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>> -> tensor<32x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>>
  %bc = tile.convert_layout %bb : tensor<32x64xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>> -> tensor<32x64xf32, #row>
  %s = arith.addf %t, %bc : tensor<32x64xf32, #row>
  tile.store %s, %x[%c0, %c0] : tensor<32x64xf32, #row>, memref<?x?xf32>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 4], order = [0, 1]>

// A needed conversion (a real transpose) stays; a chain of two collapses.
// CHECK-LABEL: tile.kernel @needed
// CHECK: tile.permute
// CHECK-NEXT: tile.convert_layout %{{.*}} : tensor<64x32xf32, #[[COL:.*]]> -> tensor<64x32xf32, #[[ROW:.*]]>
// CHECK-NEXT: tile.store
tile.kernel @needed(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<32x64xf32, #row>
  %p = tile.permute %t {permutation = array<i64: 1, 0>} : tensor<32x64xf32, #row> -> tensor<64x32xf32, #col>
  %a = tile.convert_layout %p : tensor<64x32xf32, #col> -> tensor<64x32xf32, #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>>
  %b = tile.convert_layout %a : tensor<64x32xf32, #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>> -> tensor<64x32xf32, #row>
  tile.store %b, %y[%c0, %c0] : tensor<64x32xf32, #row>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#row = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// A matmul's epilogue: the conversion stays after the truncation to f16,
// where it moves half the bytes; one past a truncation of a load moves into
// the load.
// CHECK-LABEL: tile.kernel @not_past_truncation
// CHECK: %[[H:.*]] = arith.truncf %{{.*}} : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
// CHECK-NEXT: tile.convert_layout %[[H]] : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #[[ROW:.*]]>
// CHECK: tile.load %{{.*}} -> tensor<64x64xf32, #[[ROW]]>
// CHECK-NEXT: arith.truncf %{{.*}} : tensor<64x64xf32, #[[ROW]]> to tensor<64x64xf16, #[[ROW]]>
// CHECK-NOT: tile.convert_layout
tile.kernel @not_past_truncation(%x: memref<?x?xf32>, %y: memref<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #row>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #row>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %ah = arith.truncf %a : tensor<64x64xf32, #row> to tensor<64x64xf16, #row>
  %bh = arith.truncf %b : tensor<64x64xf32, #row> to tensor<64x64xf16, #row>
  %d = tile.dot %ah, %bh, %z : tensor<64x64xf16, #row>, tensor<64x64xf16, #row> -> tensor<64x64xf32, #mma>
  %h = arith.truncf %d : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
  %o = tile.convert_layout %h : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #row>
  tile.store %o, %y[%c0, %c0] : tensor<64x64xf16, #row>, memref<?x?xf16>
  %l = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %lh = arith.truncf %l : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
  %lo = tile.convert_layout %lh : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #row>
  tile.store %lo, %y[%c0, %c0] : tensor<64x64xf16, #row>, memref<?x?xf16>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#row = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#col = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>

// A transposed epilogue (attention's output, stored [d, rows]): the store's
// conversion goes back through the permute, where it meets the conversion
// that the permute's blocked source needed; one conversion is left, from
// the dot's layout straight to the permuted store layout.
// CHECK-LABEL: tile.kernel @transposed_epilogue
// CHECK: %[[H:.*]] = arith.truncf %{{.*}} : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
// CHECK-NEXT: %[[C:.*]] = tile.convert_layout %[[H]] : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #[[SRC:.*]]>
// CHECK-NEXT: %[[P:.*]] = tile.permute %[[C]] {{.*}} : tensor<64x64xf16, #[[SRC]]> -> tensor<64x64xf16, #[[ROW:.*]]>
// CHECK-NEXT: tile.store %[[P]], {{.*}} : tensor<64x64xf16, #[[ROW]]>
tile.kernel @transposed_epilogue(%x: memref<?x?xf16>, %y: memref<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16, #row>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %a, %z : tensor<64x64xf16, #row>, tensor<64x64xf16, #row> -> tensor<64x64xf32, #mma>
  %h = arith.truncf %d : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
  %b = tile.convert_layout %h : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #row>
  %p = tile.permute %b {permutation = array<i64: 1, 0>} : tensor<64x64xf16, #row> -> tensor<64x64xf16, #col>
  %o = tile.convert_layout %p : tensor<64x64xf16, #col> -> tensor<64x64xf16, #row>
  tile.store %o, %y[%c0, %c0] : tensor<64x64xf16, #row>, memref<?x?xf16>
  tile.return
}
