// Round trip of every tile op, in the pretty and in the generic form.
// RUN: tileopt-opt %s | tileopt-opt | FileCheck %s
// RUN: tileopt-opt %s --mlir-print-op-generic | tileopt-opt | FileCheck %s

// Layout aliases (@mma_layouts).
// CHECK-DAG: #[[MMA:.*]] = #tile.mma<warpsPerCTA = [2, 2]>
// CHECK-DAG: #[[WIDE:.*]] = #tile.mma<warpsPerCTA = [4, 2], blockN = 64>
// Layout aliases (@slice_of_wide_rows).
// CHECK-DAG: #[[ROWS512:.*]] = #tile.blocked<sizePerThread = [1, 512], threadsPerWarp = [32, 1], warpsPerCTA = [1, 1], order = [1, 0]>
// CHECK-DAG: #[[ROWSUMS:.*]] = #tile.slice<dim = 1, parent = #[[ROWS512]]>

// CHECK-LABEL: tile.kernel @grid
tile.kernel @grid(%n: i32) {
  // CHECK: tile.program_id {dim = 0 : i64}
  %0 = tile.program_id {dim = 0}
  // CHECK: tile.program_id {dim = 2 : i64}
  %1 = tile.program_id {dim = 2}
  // CHECK: tile.num_programs {dim = 1 : i64}
  %2 = tile.num_programs {dim = 1}
  // CHECK: tile.return
  tile.return
}

// CHECK-LABEL: tile.kernel @memory
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32, strided<[?, ?], offset: ?>>, %[[Y:.*]]: memref<128x64xf16>, %[[B:.*]]: memref<?xi8, strided<[1], offset: ?>>, %{{.*}}: f32, %{{.*}}: index)
tile.kernel @memory(%x: memref<?x?xf32, strided<[?, ?], offset: ?>>,
                    %y: memref<128x64xf16>, %b: memref<?xi8, strided<[1], offset: ?>>,
                    %eps: f32, %n: index) {
  %c0 = arith.constant 0 : index
  // CHECK: %[[T:.*]] = tile.load %[[X]][%{{.*}}, %{{.*}}] : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<64x128xf32>
  %t = tile.load %x[%c0, %n] : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<64x128xf32>
  // CHECK: tile.load %[[X]][%{{.*}}, %{{.*}}] {padding = 0xFF800000 : f32} : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<1x1024xf32>
  %m = tile.load %x[%n, %c0] {padding = 0xFF800000 : f32} : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<1x1024xf32>
  // CHECK: tile.load %[[Y]][%{{.*}}, %{{.*}}] {padding = 1.000000e+00 : f16} : memref<128x64xf16> -> tensor<16x16xf16>
  %h = tile.load %y[%c0, %c0] {padding = 1.0 : f16} : memref<128x64xf16> -> tensor<16x16xf16>
  // CHECK: tile.load %[[B]][%{{.*}}] {padding = -1 : i8} : memref<?xi8, strided<[1], offset: ?>> -> tensor<256xi8>
  %i = tile.load %b[%n] {padding = -1 : i8} : memref<?xi8, strided<[1], offset: ?>> -> tensor<256xi8>
  // CHECK: tile.store %[[T]], %[[X]][%{{.*}}, %{{.*}}] : tensor<64x128xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  tile.store %t, %x[%c0, %n] : tensor<64x128xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  // CHECK: tile.store %{{.*}}, %[[B]][%{{.*}}] : tensor<256xi8>, memref<?xi8, strided<[1], offset: ?>>
  tile.store %i, %b[%n] : tensor<256xi8>, memref<?xi8, strided<[1], offset: ?>>
  // CHECK: tile.store %[[T]], %[[X]][%{{.*}}, %{{.*}}] {add} : tensor<64x128xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  tile.store %t, %x[%c0, %n] {add} : tensor<64x128xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  tile.return
}

// CHECK-LABEL: tile.kernel @shapes
tile.kernel @shapes(%s: f32, %k: i64) {
  // CHECK: tile.splat %{{.*}} : f32 -> tensor<64xf32>
  %v = tile.splat %s : f32 -> tensor<64xf32>
  // CHECK: tile.splat %{{.*}} : i64 -> tensor<2x4x8xi64>
  %w = tile.splat %k : i64 -> tensor<2x4x8xi64>
  // CHECK: tile.iota : tensor<128xi32>
  %i = tile.iota : tensor<128xi32>
  // CHECK: tile.expand_dims %{{.*}} {axis = 1 : i64} : tensor<64xf32> -> tensor<64x1xf32>
  %c = tile.expand_dims %v {axis = 1} : tensor<64xf32> -> tensor<64x1xf32>
  // CHECK: tile.broadcast %{{.*}} : tensor<64x1xf32> -> tensor<64x32xf32>
  %b = tile.broadcast %c : tensor<64x1xf32> -> tensor<64x32xf32>
  // CHECK: tile.reshape %{{.*}} : tensor<64x32xf32> -> tensor<2048xf32>
  %r = tile.reshape %b : tensor<64x32xf32> -> tensor<2048xf32>
  // CHECK: tile.permute %{{.*}} {permutation = array<i64: 2, 0, 1>} : tensor<2x4x8xi64> -> tensor<8x2x4xi64>
  %p = tile.permute %w {permutation = array<i64: 2, 0, 1>} : tensor<2x4x8xi64> -> tensor<8x2x4xi64>
  tile.return
}

// CHECK-LABEL: tile.kernel @reductions
tile.kernel @reductions(%x: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[?, ?], offset: ?>> -> tensor<4x128xf32>
  // CHECK: tile.reduce %{{.*}} {axis = 1 : i64} : tensor<4x128xf32> -> tensor<4xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
  // CHECK-NEXT: %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
  // CHECK-NEXT: tile.yield %[[S]] : f32
  %sum = tile.reduce %t {axis = 1} : tensor<4x128xf32> -> tensor<4xf32> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tile.yield %s : f32
  }
  // CHECK: tile.reduce %{{.*}} {axis = 0 : i64} : tensor<4xf32> -> f32
  %total = tile.reduce %sum {axis = 0} : tensor<4xf32> -> f32 {
  ^bb0(%a: f32, %b: f32):
    %s = arith.maximumf %a, %b : f32
    tile.yield %s : f32
  }
  // CHECK: tile.reduce %{{.*}} {axis = 0 : i64} : tensor<4xf32> -> tensor<f32>
  %total0d = tile.reduce %sum {axis = 0} : tensor<4xf32> -> tensor<f32> {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tile.yield %s : f32
  }
  %i = tile.iota : tensor<128xi32>
  %ie = tile.expand_dims %i {axis = 0} : tensor<128xi32> -> tensor<1x128xi32>
  %idx = tile.broadcast %ie : tensor<1x128xi32> -> tensor<4x128xi32>
  // CHECK: tile.reduce %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<4x128xf32>, tensor<4x128xi32> -> tensor<4xf32>, tensor<4xi32>
  // CHECK: tile.yield %{{.*}}, %{{.*}} : f32, i32
  %m, %am = tile.reduce %t, %idx {axis = 1} : tensor<4x128xf32>, tensor<4x128xi32> -> tensor<4xf32>, tensor<4xi32> {
  ^bb0(%a: f32, %ai: i32, %b: f32, %bi: i32):
    %gt = arith.cmpf ogt, %b, %a : f32
    %v = arith.select %gt, %b, %a : f32
    %vi = arith.select %gt, %bi, %ai : i32
    tile.yield %v, %vi : f32, i32
  }
  tile.return
}

// CHECK-LABEL: tile.kernel @dots
tile.kernel @dots(%x: memref<?x?xf16>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16>
  %acc = arith.constant dense<0.0> : tensor<64x64xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
  %c = tile.dot %a, %b, %acc : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
  %acc16 = arith.constant dense<0.0> : tensor<64x64xf16>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf16>
  %c16 = tile.dot %a, %b, %acc16 : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf16>
  %fa = tile.load %y[%c0, %c0] : memref<?x?xf32> -> tensor<16x16xf32>
  %facc = arith.constant dense<0.0> : tensor<16x16xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} input_precision = tf32 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %ft = tile.dot %fa, %fa, %facc input_precision = tf32 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %fi = tile.dot %fa, %fa, %facc input_precision = ieee : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %ia = arith.constant dense<3> : tensor<16x32xi8>
  %ib = arith.constant dense<-5> : tensor<32x16xi8>
  %iacc = arith.constant dense<0> : tensor<16x16xi32>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x32xi8>, tensor<32x16xi8> -> tensor<16x16xi32>
  %ii = tile.dot %ia, %ib, %iacc : tensor<16x32xi8>, tensor<32x16xi8> -> tensor<16x16xi32>
  // fp8 of either format on either side, f32 accumulators.
  %ea = arith.constant dense<1.5> : tensor<16x32xf8E4M3FN>
  %eb = arith.constant dense<-2.0> : tensor<32x16xf8E5M2>
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x32xf8E4M3FN>, tensor<32x16xf8E5M2> -> tensor<16x16xf32>
  %ee = tile.dot %ea, %eb, %facc : tensor<16x32xf8E4M3FN>, tensor<32x16xf8E5M2> -> tensor<16x16xf32>
  tile.return
}

// CHECK-LABEL: tile.kernel @fp8
// CHECK-SAME: memref<?xf8E4M3FN>
tile.kernel @fp8(%x: memref<?xf8E4M3FN>, %y: memref<?xf8E5M2>) {
  %c0 = arith.constant 0 : index
  // CHECK: tile.load %{{.*}}[%{{.*}}] : memref<?xf8E4M3FN> -> tensor<128xf8E4M3FN>
  %a = tile.load %x[%c0] : memref<?xf8E4M3FN> -> tensor<128xf8E4M3FN>
  %f = arith.extf %a : tensor<128xf8E4M3FN> to tensor<128xf32>
  %b = arith.truncf %f : tensor<128xf32> to tensor<128xf8E5M2>
  // CHECK: tile.store %{{.*}}, %{{.*}}[%{{.*}}] : tensor<128xf8E5M2>, memref<?xf8E5M2>
  tile.store %b, %y[%c0] : tensor<128xf8E5M2>, memref<?xf8E5M2>
  tile.return
}

tile.kernel @add(%x: memref<?xf32, strided<[?], offset: ?>>, %n: i32) {
  tile.return
}

// CHECK-LABEL: func.func @host
func.func @host(%x: memref<?xf32, strided<[?], offset: ?>>, %s: memref<128xf32>, %n: i32, %g: index) {
  %c1 = arith.constant 1 : index
  // CHECK: tile.launch @add grid(%{{.*}}, %{{.*}}, %{{.*}}) (%{{.*}}, %{{.*}}) : memref<?xf32, strided<[?], offset: ?>>, i32
  tile.launch @add grid(%g, %c1, %c1) (%x, %n) : memref<?xf32, strided<[?], offset: ?>>, i32
  // A static memref casts to the kernel's dynamic view.
  // CHECK: tile.launch @add grid(%{{.*}}) (%{{.*}}, %{{.*}}) : memref<128xf32>, i32
  tile.launch @add grid(%g) (%s, %n) : memref<128xf32>, i32
  return
}

// CHECK-LABEL: tile.kernel @gather
// CHECK: tile.gather %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32, strided<[?, ?], offset: ?>>, tensor<16x64xi64>, tensor<16x64xi32> -> tensor<16x64xf32>
// CHECK: tile.gather %{{.*}}[%{{.*}}] {padding = -1 : i8} : memref<?xi8>, tensor<8xi32> -> tensor<8xi8>
tile.kernel @gather(%table: memref<?x?xf32, strided<[?, ?], offset: ?>>, %b: memref<?xi8>,
                    %id: i64, %col: i32) {
  %ids = tile.splat %id : i64 -> tensor<16x64xi64>
  %cols = tile.splat %col : i32 -> tensor<16x64xi32>
  %at = tile.splat %col : i32 -> tensor<8xi32>
  %rows = tile.gather %table[%ids, %cols] : memref<?x?xf32, strided<[?, ?], offset: ?>>, tensor<16x64xi64>, tensor<16x64xi32> -> tensor<16x64xf32>
  %bytes = tile.gather %b[%at] {padding = -1 : i8} : memref<?xi8>, tensor<8xi32> -> tensor<8xi8>
  tile.return
}

// blockN prints where it is not mma.sync's 8 (the aliases: at the top).
// CHECK-LABEL: tile.kernel @mma_layouts
tile.kernel @mma_layouts(%s: f32) {
  // CHECK: tile.splat %{{.*}} : f32 -> tensor<64x64xf32, #[[MMA]]>
  %a = tile.splat %s : f32 -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2], blockN = 8>>
  // CHECK: tile.splat %{{.*}} : f32 -> tensor<64x128xf32, #[[WIDE]]>
  %b = tile.splat %s : f32 -> tensor<64x128xf32, #tile.mma<warpsPerCTA = [4, 2], blockN = 64>>
  tile.return
}

// A slice keeps one register per element its parent's registers wrap onto:
// 512 of the parent's per row, one of the slice's (the register check counts
// the slice's).
// CHECK-LABEL: tile.kernel @slice_of_wide_rows
tile.kernel @slice_of_wide_rows(%s: f32) {
  // CHECK: tile.splat %{{.*}} : f32 -> tensor<32xf32, #[[ROWSUMS]]>
  %a = tile.splat %s : f32 -> tensor<32xf32, #tile.slice<dim = 1, parent = #tile.blocked<sizePerThread = [1, 512], threadsPerWarp = [32, 1], warpsPerCTA = [1, 1], order = [1, 0]>>>
  tile.return
}
