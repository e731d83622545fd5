// RUN: tileopt-opt %s -split-input-file --tileopt-linalg-to-tile | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// An elementwise chain is one kernel: the broadcast operand is a view with
// stride 0, the arguments are views over the 2-D space, the program covers
// a block of 4 x 64 elements (masked at 37), and the host allocates the
// result and launches one program.
// The views' static layouts become promises the launcher checks: a unit
// innermost stride (in the type), 16-byte alignment where the strides keep
// it (not for rows of 37 floats), 32-bit indexing.
// CHECK-LABEL: tile.kernel @k0_pointwise
// CHECK-SAME: (%arg0: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32 : i64}, %arg1: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.index_bitwidth = 32 : i64}
// CHECK-SAME: tile.fused = "addf, exp", tile.num_warps = 1 : i64
// CHECK: tile.load %arg0[{{.*}}] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<4x64xf32>
// CHECK: tile.load %arg1[{{.*}}] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<1x64xf32>
// CHECK: tile.broadcast {{.*}} : tensor<1x64xf32> -> tensor<4x64xf32>
// CHECK: arith.addf
// CHECK: math.exp
// CHECK: tile.store {{.*}} : tensor<4x64xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK-LABEL: func.func @chain(%arg0: memref<4x37xf32>, %arg1: memref<37xf32>) -> memref<4x37xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x37xf32>
// CHECK: %[[B:.*]] = memref.reinterpret_cast %arg1 to offset: [0], sizes: [1, 37], strides: [0, 1]
// CHECK: tile.launch @k0_pointwise grid(%c1, %c1, %c1) (%{{.*}}, %{{.*}}, %{{.*}})
// CHECK: return %[[OUT]]
func.func @chain(%x: tensor<4x37xf32>, %b: tensor<37xf32>) -> tensor<4x37xf32> {
  %e = tensor.empty() : tensor<4x37xf32>
  %0 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x37xf32>, tensor<37xf32>) outs(%e : tensor<4x37xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x37xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x37xf32>) outs(%e : tensor<4x37xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<4x37xf32>
  return %1 : tensor<4x37xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A row sum: the row (1000, padded to 1024) is reduced in registers, the
// padding takes the combiner's identity (0) through a select, and the
// result keeps a unit dimension to be stored through a [rows, 1] view.
// CHECK-LABEL: tile.kernel @k0_reduce
// CHECK: tile.load {{.*}} -> tensor<2x1024xf32>
// CHECK: tile.iota : tensor<1024xi32>
// CHECK: arith.cmpi slt
// CHECK: arith.select
// CHECK: tile.reduce {{.*}} {axis = 1 : i64} : tensor<2x1024xf32> -> tensor<2xf32>
// CHECK: arith.addf
// CHECK: tile.expand_dims {{.*}} {axis = 1 : i64} : tensor<2xf32> -> tensor<2x1xf32>
// CHECK: tile.store {{.*}} : tensor<2x1xf32>
// CHECK-LABEL: func.func @row_sum
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [3, 1], strides: [1, 0]
// CHECK: tile.launch @k0_reduce grid(%c2, %c1, %c1)
func.func @row_sum(%x: tensor<3x1000xf32>) -> tensor<3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<3x1000xf32>) outs(%f : tensor<3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<3xf32>
  return %s : tensor<3xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A linear layer: the transposed weight is a strided view (strides [1, 32]),
// the matmul loops over k with tile.dot on 64 x 64 output tiles, and the
// bias is added to the accumulator in the same kernel.
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.fused = "matmul, addf"
// CHECK: scf.for
// CHECK: tile.load {{.*}} -> tensor<64x32xf32>
// CHECK: tile.load {{.*}} -> tensor<32x64xf32>
// CHECK: tile.dot
// CHECK: scf.yield
// CHECK: tile.reshape {{.*}} : tensor<64x64xf32> -> tensor<64x64x1xf32>
// CHECK: arith.addf
// CHECK: tile.store
// CHECK-LABEL: func.func @linear
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [64, 80], strides: [1, 64]
// CHECK: tile.launch @k0_matmul grid(%c4, %c1, %c1)
func.func @linear(%x: tensor<100x64xf32>, %w: tensor<80x64xf32>, %b: tensor<80xf32>) -> tensor<100x80xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<64x80xf32>
  %wt = linalg.transpose ins(%w : tensor<80x64xf32>) outs(%et : tensor<64x80xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<100x80xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<100x80xf32>) -> tensor<100x80xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<100x64xf32>, tensor<64x80xf32>) outs(%f : tensor<100x80xf32>) -> tensor<100x80xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<100x80xf32>, tensor<80xf32>) outs(%e : tensor<100x80xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<100x80xf32>
  return %y : tensor<100x80xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sw = affine_map<(d0, d1, d2) -> (d1, d0, d2)>

// Reshapes are views of the buffers: a collapse of contiguous dimensions
// is a reinterpret_cast of the same buffer, with no kernel.
// CHECK-LABEL: func.func @reshape
// CHECK-NOT: tile.launch
// CHECK: %[[V:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [32, 16], strides: [16, 1]
// CHECK: return %[[V]]
func.func @reshape(%x: tensor<4x8x16xf32>) -> tensor<32x16xf32> {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<4x8x16xf32> into tensor<32x16xf32>
  return %c : tensor<32x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A row longer than kPersistentRowElements: one loop over 4096-element
// chunks per reduction (the max, then the sum of exponentials, which
// recomputes x - max), padding masked against the elements left in the row,
// and a last loop that stores the row-wide result. The input is one kernel
// argument however many loops read it.
// CHECK-LABEL: tile.kernel @k0_reduce(%arg0: {{[^%]*}}, %arg1: {{[^%]*}}) attributes
// CHECK-SAME: tile.num_warps = 16
// CHECK: %[[MAX:.*]] = scf.for %[[I:.*]] = %c0 to %c20000 step %c4096 iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<1x1xf32>)
// CHECK:   tile.load %arg0[%{{.*}}, %[[I]]] {{.*}} -> tensor<1x4096xf32>
// CHECK:   arith.index_cast %[[I]] : index to i32
// CHECK:   arith.subi %c20000_i32
// CHECK:   arith.select
// CHECK:   tile.reduce
// CHECK:   arith.maximumf %{{.*}}, %[[ACC]] : tensor<1x1xf32>
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} iter_args({{.*}}) -> (tensor<1x1xf32>)
// CHECK:   tile.load %arg0
// CHECK:   tile.broadcast %[[MAX]]
// CHECK:   math.exp
// CHECK:   tile.reduce
// CHECK: scf.for
// CHECK:   tile.load %arg0
// CHECK:   math.exp
// CHECK:   tile.broadcast %[[SUM]]
// CHECK:   arith.divf
// CHECK:   tile.store {{.*}}, %arg1
// CHECK-NOT: scf.for
// CHECK: tile.return
// CHECK-LABEL: func.func @long_softmax
// CHECK: tile.launch @k0_reduce grid(%c2, %c1, %c1)
func.func @long_softmax(%x: tensor<2x20000xf32>) -> tensor<2x20000xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<2xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2xf32>) -> tensor<2xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2x20000xf32>) outs(%fm : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<2xf32>
  %e = tensor.empty() : tensor<2x20000xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<2x20000xf32>, tensor<2xf32>) outs(%e : tensor<2x20000xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<2x20000xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%er : tensor<2xf32>) -> tensor<2xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<2x20000xf32>) outs(%fs : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<2xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %s : tensor<2x20000xf32>, tensor<2xf32>) outs(%e : tensor<2x20000xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.divf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<2x20000xf32>
  return %y : tensor<2x20000xf32>
}
