// Folds and canonicalization patterns of the tile dialect.
// RUN: tileopt-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: tile.kernel @broadcast_of_splat
// CHECK-SAME: (%[[S:.*]]: f32, %[[X:.*]]: memref<?x?xf32>)
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[T:.*]] = tile.splat %[[S]] : f32 -> tensor<16x32xf32>
// CHECK-NEXT: tile.store %[[T]], %[[X]]
tile.kernel @broadcast_of_splat(%s: f32, %x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %v = tile.splat %s : f32 -> tensor<1x32xf32>
  %b = tile.broadcast %v : tensor<1x32xf32> -> tensor<16x32xf32>
  tile.store %b, %x[%c0, %c0] : tensor<16x32xf32>, memref<?x?xf32>
  tile.return
}

// -----

// CHECK-LABEL: tile.kernel @reshape_permute_expand_of_splat
// CHECK-DAG: tile.splat %{{.*}} : f32 -> tensor<512xf32>
// CHECK-DAG: tile.splat %{{.*}} : f32 -> tensor<32x16xf32>
// CHECK-DAG: tile.splat %{{.*}} : f32 -> tensor<1x16x32xf32>
// CHECK-NOT: tile.reshape
// CHECK-NOT: tile.permute
// CHECK-NOT: tile.expand_dims
tile.kernel @reshape_permute_expand_of_splat(%s: f32, %x: memref<?xf32>, %y: memref<?x?xf32>, %z: memref<?x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %v = tile.splat %s : f32 -> tensor<16x32xf32>
  %r = tile.reshape %v : tensor<16x32xf32> -> tensor<512xf32>
  %p = tile.permute %v {permutation = array<i64: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
  %e = tile.expand_dims %v {axis = 0} : tensor<16x32xf32> -> tensor<1x16x32xf32>
  tile.store %r, %x[%c0] : tensor<512xf32>, memref<?xf32>
  tile.store %p, %y[%c0, %c0] : tensor<32x16xf32>, memref<?x?xf32>
  tile.store %e, %z[%c0, %c0, %c0] : tensor<1x16x32xf32>, memref<?x?x?xf32>
  tile.return
}

// -----

// CHECK-LABEL: tile.kernel @identities
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>)
// CHECK: %[[T:.*]] = tile.load
// CHECK-NEXT: tile.store %[[T]], %[[X]]
// CHECK-NEXT: tile.return
tile.kernel @identities(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<16x32xf32>
  %b = tile.broadcast %t : tensor<16x32xf32> -> tensor<16x32xf32>
  %r = tile.reshape %b : tensor<16x32xf32> -> tensor<16x32xf32>
  %p = tile.permute %r {permutation = array<i64: 0, 1>} : tensor<16x32xf32> -> tensor<16x32xf32>
  tile.store %p, %x[%c0, %c0] : tensor<16x32xf32>, memref<?x?xf32>
  tile.return
}

// -----

// Two transposes cancel; a reshape of a reshape is one reshape.
// CHECK-LABEL: tile.kernel @compose
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?xf32>, %[[Z:.*]]: memref<?x?x?xf32>)
// CHECK: %[[T:.*]] = tile.load %[[X]]
// CHECK-NEXT: tile.store %[[T]], %[[X]]
// CHECK-NEXT: %[[R:.*]] = tile.reshape %[[T]] : tensor<16x32xf32> -> tensor<512xf32>
// CHECK-NEXT: tile.store %[[R]], %[[Y]]
// CHECK: %[[P:.*]] = tile.permute %{{.*}} {permutation = array<i64: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
// CHECK-NEXT: tile.store %[[P]], %[[Z]]
tile.kernel @compose(%x: memref<?x?xf32>, %y: memref<?xf32>, %z: memref<?x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<16x32xf32>
  %p = tile.permute %t {permutation = array<i64: 1, 0>} : tensor<16x32xf32> -> tensor<32x16xf32>
  %q = tile.permute %p {permutation = array<i64: 1, 0>} : tensor<32x16xf32> -> tensor<16x32xf32>
  tile.store %q, %x[%c0, %c0] : tensor<16x32xf32>, memref<?x?xf32>
  %r1 = tile.reshape %t : tensor<16x32xf32> -> tensor<8x64xf32>
  %r2 = tile.reshape %r1 : tensor<8x64xf32> -> tensor<512xf32>
  tile.store %r2, %y[%c0] : tensor<512xf32>, memref<?xf32>
  %u = tile.load %z[%c0, %c0, %c0] : memref<?x?x?xf32> -> tensor<2x4x8xf32>
  // [1, 2, 0] then [1, 2, 0] is [2, 0, 1].
  %v = tile.permute %u {permutation = array<i64: 1, 2, 0>} : tensor<2x4x8xf32> -> tensor<4x8x2xf32>
  %w = tile.permute %v {permutation = array<i64: 1, 2, 0>} : tensor<4x8x2xf32> -> tensor<8x2x4xf32>
  tile.store %w, %z[%c0, %c0, %c0] : tensor<8x2x4xf32>, memref<?x?x?xf32>
  tile.return
}

// -----

// A splat of a constant, and reshapes of it, fold to dense constants.
// CHECK-LABEL: tile.kernel @constants
// CHECK: arith.constant dense<2.500000e+00> : tensor<4x8xf32>
// CHECK-NOT: tile.splat
// CHECK-NOT: tile.broadcast
tile.kernel @constants(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %s = arith.constant 2.5 : f32
  %v = tile.splat %s : f32 -> tensor<1x8xf32>
  %b = tile.broadcast %v : tensor<1x8xf32> -> tensor<4x8xf32>
  tile.store %b, %x[%c0, %c0] : tensor<4x8xf32>, memref<?x?xf32>
  tile.return
}

// -----

// A broadcast of a broadcast is one broadcast.
// CHECK-LABEL: tile.kernel @broadcast_of_broadcast
// CHECK: tile.broadcast %{{.*}} : tensor<1x1xf32> -> tensor<8x16xf32>
// CHECK-NOT: tile.broadcast
tile.kernel @broadcast_of_broadcast(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<1x1xf32>
  %a = tile.broadcast %t : tensor<1x1xf32> -> tensor<1x16xf32>
  %b = tile.broadcast %a : tensor<1x16xf32> -> tensor<8x16xf32>
  tile.store %b, %x[%c0, %c0] : tensor<8x16xf32>, memref<?x?xf32>
  tile.return
}

// -----

// Truncations move above the shape ops that only they use: the permute and
// reshape then move f16 elements, the broadcast's source is truncated once
// per element of its source. A shape op with another user stays first.
// CHECK-LABEL: tile.kernel @narrow_before_shape_ops
// CHECK: %[[T:.*]] = tile.load %{{.*}} -> tensor<32x64xf32>
// CHECK: %[[N:.*]] = arith.truncf %[[T]] : tensor<32x64xf32> to tensor<32x64xf16>
// CHECK: %[[P:.*]] = tile.permute %[[N]] {{.*}} : tensor<32x64xf16> -> tensor<64x32xf16>
// CHECK: tile.reshape %[[P]] : tensor<64x32xf16> -> tensor<1x64x32xf16>
// CHECK: %[[R:.*]] = tile.load %{{.*}} -> tensor<1x64xf32>
// CHECK: %[[RN:.*]] = arith.truncf %[[R]] : tensor<1x64xf32> to tensor<1x64xf16>
// CHECK: tile.broadcast %[[RN]] : tensor<1x64xf16> -> tensor<32x64xf16>
// CHECK: %[[I:.*]] = tile.load %{{.*}} -> tensor<64xi64>
// CHECK: %[[E:.*]] = tile.expand_dims %[[I]]
// CHECK: arith.trunci %[[E]] : tensor<1x64xi64> to tensor<1x64xi32>
tile.kernel @narrow_before_shape_ops(%x: memref<?x?xf32>, %y: memref<?x?x?xf16>, %z: memref<?x?xf16>, %v: memref<?xi64>, %w: memref<?x?xi64>, %u: memref<?x?xi32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<32x64xf32>
  %p = tile.permute %t {permutation = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %r = tile.reshape %p : tensor<64x32xf32> -> tensor<1x64x32xf32>
  %h = arith.truncf %r : tensor<1x64x32xf32> to tensor<1x64x32xf16>
  tile.store %h, %y[%c0, %c0, %c0] : tensor<1x64x32xf16>, memref<?x?x?xf16>
  %row = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<1x64xf32>
  %b = tile.broadcast %row : tensor<1x64xf32> -> tensor<32x64xf32>
  %bh = arith.truncf %b : tensor<32x64xf32> to tensor<32x64xf16>
  tile.store %bh, %z[%c0, %c0] : tensor<32x64xf16>, memref<?x?xf16>
  %i = tile.load %v[%c0] : memref<?xi64> -> tensor<64xi64>
  %e = tile.expand_dims %i {axis = 0} : tensor<64xi64> -> tensor<1x64xi64>
  %n = arith.trunci %e : tensor<1x64xi64> to tensor<1x64xi32>
  tile.store %e, %w[%c0, %c0] : tensor<1x64xi64>, memref<?x?xi64>
  tile.store %n, %u[%c0, %c0] : tensor<1x64xi32>, memref<?x?xi32>
  tile.return
}
