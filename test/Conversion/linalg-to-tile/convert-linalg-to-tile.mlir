// RUN: tileopt-opt %s -split-input-file --tileopt-linalg-to-tile | FileCheck %s
// RUN: tileopt-opt %s -split-input-file --tileopt-linalg-to-tile="allow-tf32=true" | FileCheck %s --check-prefix=TF32

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// An elementwise chain is one kernel: the broadcast operand is a view with
// stride 0, the arguments are views over the 2-D space, the program covers
// a block of 4 x 64 elements (masked at 37), and the host allocates the
// result and launches one program.
// The views' static layouts become promises the launcher checks: a unit
// innermost stride (in the type), 16-byte alignment where the strides keep
// it (not for rows of 37 floats), 32-bit indexing, and each size's
// power-of-two divisor up to 16 (4 rows; 37 columns: none).
// CHECK-LABEL: tile.kernel @k0_pointwise
// CHECK-SAME: (%arg0: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32 : i64, tile.size_divisibility = array<i64: 4, 1>}, %arg1: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.index_bitwidth = 32 : i64}
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
#row = affine_map<(d0, d1) -> (d0)>

// A product over an empty dimension: its one-element block is padding, which
// takes the combiner's identity (1) too.
// CHECK-LABEL: tile.kernel @k0_reduce
// CHECK: %[[ONES:.*]] = arith.constant dense<1.000000e+00> : tensor<4x1xf32>
// CHECK: tile.load {{.*}} -> tensor<4x1xf32>
// CHECK: arith.cmpi slt
// CHECK: %[[PADDED:.*]] = arith.select %{{.*}}, %{{.*}}, %[[ONES]]
// CHECK: tile.reduce %[[PADDED]]
// CHECK: arith.mulf
func.func @empty_product(%x: tensor<4x0xf32>) -> tensor<4xf32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x0xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A linear layer: the transposed weight is a strided view (strides [1, 64]),
// whose unit stride along K the kernel's type keeps (so its tiles load and
// stage K-major), the matmul loops over k with tile.dot on 64 x 64 output
// tiles, and the bias is added to the accumulator in the same kernel. The
// epilogue leaves out the reduced dimension: its tiles keep the dot's rank
// (no reshape, which would move the accumulator through shared memory). The
// k loop runs to the input view's last size, which its 32-bit promise lets
// the GPU lowering count in 32 bits.
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: (%arg0: index {tile.index_bitwidth = 32 : i64}, %arg1: index {tile.index_bitwidth = 32 : i64}, %[[X:arg[0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK-SAME: %arg{{[0-9]+}}: memref<?x?xf32, strided<[1, ?], offset: ?>> {tile.divisibility = 16 : i64, tile.index_bitwidth = 32 : i64, tile.size_divisibility = array<i64: 16, 16>}
// CHECK-SAME: tile.fused = "matmul, addf"
// CHECK: %[[K:.*]] = memref.dim %[[X]], %c1
// CHECK: scf.for %{{.*}} = %c0 to %[[K]] step %c32
// CHECK: tile.load %[[X]]{{.*}} -> tensor<64x32xf32>
// CHECK: tile.load {{.*}} -> tensor<32x64xf32>
// CHECK: tile.dot
// CHECK-NOT: input_precision
// CHECK: scf.yield
// CHECK-NOT: tile.reshape
// CHECK: tile.load {{.*}} -> tensor<1x64xf32>
// CHECK: tile.broadcast {{.*}} : tensor<1x64xf32> -> tensor<64x64xf32>
// CHECK: arith.addf {{.*}} : tensor<64x64xf32>
// CHECK: tile.store {{.*}} : tensor<64x64xf32>, memref<?x?xf32
// With allow-tf32 (torch's fp32_precision "tf32") the f32 dot may round its
// inputs to tf32, on tensor cores: one program, halved to 64 x 64, takes all
// of k (64) in one step.
// TF32-LABEL: tile.kernel @k0_matmul
// TF32: tile.dot {{.*}} input_precision = tf32 : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
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

// A (32, 1) column's rows lie one element apart: no 16-byte promise for it
// (its tiles of 16 columns would copy each row from an unaligned address),
// nor for the (64, 1) result; the row-major lhs keeps it.
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: (%arg0: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64,
// CHECK-SAME: %arg1: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32 : i64, tile.size_divisibility = array<i64: 16, 1>},
// CHECK-SAME: %arg2: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32 : i64, tile.size_divisibility = array<i64: 16, 1>})
func.func @column(%a: tensor<64x32xf16>, %b: tensor<32x1xf16>) -> tensor<64x1xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x1xf32>) -> tensor<64x1xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<64x32xf16>, tensor<32x1xf16>) outs(%f : tensor<64x1xf32>) -> tensor<64x1xf32>
  return %0 : tensor<64x1xf32>
}

// -----

// i8 operands summed in i32 (torch._int_mm) are tile.dot's integer form: an
// i32 accumulator from zeros, k steps of 128 bytes (128 elements); the
// result's rounding to int8 joins the kernel. An i32 x i32 product (no
// tile.dot takes it) stays a reduction.
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK: arith.constant dense<0> : tensor<128x128xi32>
// CHECK: tile.load {{.*}} -> tensor<128x128xi8>
// CHECK: tile.load {{.*}} -> tensor<128x128xi8>
// CHECK: tile.dot {{.*}} : tensor<128x128xi8>, tensor<128x128xi8> -> tensor<128x128xi32>
// CHECK: arith.trunci {{.*}} : tensor<128x128xi32> to tensor<128x128xi8>
// CHECK-LABEL: func.func @int8_matmul
// CHECK-LABEL: tile.kernel @k0_reduce
// CHECK-NOT: tile.dot
// CHECK-LABEL: func.func @int32_matmul
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @int8_matmul(%x: tensor<1024x512xi8>, %w: tensor<512x1024xi8>) -> tensor<1024x1024xi8> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<1024x1024xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<1024x1024xi32>) -> tensor<1024x1024xi32>
  %mm = linalg.matmul ins(%x, %w : tensor<1024x512xi8>, tensor<512x1024xi8>) outs(%f : tensor<1024x1024xi32>) -> tensor<1024x1024xi32>
  %e8 = tensor.empty() : tensor<1024x1024xi8>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<1024x1024xi32>) outs(%e8 : tensor<1024x1024xi8>) {
  ^bb0(%a: i32, %o: i8):
    %t = arith.trunci %a : i32 to i8
    linalg.yield %t : i8
  } -> tensor<1024x1024xi8>
  return %y : tensor<1024x1024xi8>
}
func.func @int32_matmul(%x: tensor<64x32xi32>, %w: tensor<32x64xi32>) -> tensor<64x64xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<64x64xi32>) -> tensor<64x64xi32>
  %mm = linalg.matmul ins(%x, %w : tensor<64x32xi32>, tensor<32x64xi32>) outs(%f : tensor<64x64xi32>) -> tensor<64x64xi32>
  return %mm : tensor<64x64xi32>
}

// -----

// fp8 operands of either format (a matmul widening them in its body, as
// formation leaves torch's _scaled_mm) are tile.dot's fp8 form: each loaded
// as it is, an f32 accumulator. An fp8 value converted to an integer goes
// through f32 (no op but the conversions and the dot reads fp8); a bool's
// conversion to fp8 did too, until canonicalization folded the exact f32
// step away: the GPU lowering converts integers to fp8 through f32 itself.
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK: tile.load {{.*}} -> tensor<{{.*}}xf8E4M3FN>
// CHECK: tile.load {{.*}} -> tensor<{{.*}}xf8E5M2>
// CHECK: tile.dot {{.*}} : tensor<{{.*}}xf8E4M3FN>, tensor<{{.*}}xf8E5M2> -> tensor<{{.*}}xf32>
// CHECK-LABEL: func.func @fp8_matmul
// CHECK-LABEL: tile.kernel @k0_pointwise
// CHECK: arith.extf {{.*}}xf8E4M3FN{{.*}} to tensor<{{.*}}xf32>
// CHECK-NEXT: arith.fptosi {{.*}}xf32{{.*}} to tensor<{{.*}}xi32>
// CHECK: arith.uitofp {{.*}}xi1{{.*}} to tensor<{{.*}}xf8E5M2>
// CHECK-LABEL: func.func @fp8_integers
func.func @fp8_matmul(%x: tensor<64x256xf8E4M3FN>, %w: tensor<256x128xf8E5M2>) -> tensor<64x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<64x256xf8E4M3FN>, tensor<256x128xf8E5M2>) outs(%f : tensor<64x128xf32>) -> tensor<64x128xf32>
  return %mm : tensor<64x128xf32>
}
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @fp8_integers(%x: tensor<16x32xf8E4M3FN>, %m: tensor<16x32xi1>) -> (tensor<16x32xi32>, tensor<16x32xf8E5M2>) {
  %ei = tensor.empty() : tensor<16x32xi32>
  %ef = tensor.empty() : tensor<16x32xf8E5M2>
  %i, %b = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<16x32xf8E4M3FN>, tensor<16x32xi1>) outs(%ei, %ef : tensor<16x32xi32>, tensor<16x32xf8E5M2>) {
  ^bb0(%a: f8E4M3FN, %c: i1, %o: i32, %p: f8E5M2):
    %t = arith.fptosi %a : f8E4M3FN to i32
    %u = arith.uitofp %c : i1 to f8E5M2
    linalg.yield %t, %u : i32, f8E5M2
  } -> (tensor<16x32xi32>, tensor<16x32xf8E5M2>)
  return %i, %b : tensor<16x32xi32>, tensor<16x32xf8E5M2>
}

// -----

// f16 operands run on tensor cores, with a tile chosen by the launch's size in
// waves of 128 programs. Two waves or more of 128 x 256 blocks: those, on 8
// warps, 4 stages, k by 64 (Triton's Hopper tile; 512 programs here).
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.num_stages = 4
// CHECK-SAME: tile.num_warps = 8
// CHECK: tile.load {{.*}} -> tensor<128x64xf16>
// CHECK: tile.load {{.*}} -> tensor<64x256xf16>
// CHECK: tile.dot {{.*}} : tensor<128x64xf16>, tensor<64x256xf16> -> tensor<128x256xf32>
// CHECK-LABEL: func.func @large_f16_matmul
// CHECK: tile.launch @k0_matmul grid(%c512, %c1, %c1)
func.func @large_f16_matmul(%x: tensor<4096x1024xf16>, %w: tensor<1024x4096xf16>) -> tensor<4096x4096xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4096x4096xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4096x1024xf16>, tensor<1024x4096xf16>) outs(%f : tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  return %mm : tensor<4096x4096xf32>
}

// -----

// Fewer: 128 x 128 blocks on 4 warps, 4 stages (128 programs here)...
// Programs take blocks in groups of 8 rows of blocks, down the columns within
// a group (Triton's grouped order; M's size is the first launch argument).
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.num_stages = 4
// CHECK-SAME: tile.num_warps = 4
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[PID:.*]] = tile.program_id
// CHECK: %[[ROWS:.*]] = arith.divui {{.*}} : index
// CHECK: %[[COLS:.*]] = arith.divui {{.*}} : index
// CHECK: %[[TILES:.*]] = arith.muli %[[ROWS]], %[[COLS]]
// CHECK: %[[P:.*]] = arith.remui %[[PID]], %[[TILES]]
// CHECK: %[[PER:.*]] = arith.muli %[[COLS]], %[[C8]]
// CHECK: %[[G:.*]] = arith.divui %[[P]], %[[PER]]
// CHECK: %[[START:.*]] = arith.muli %[[G]], %[[C8]]
// CHECK: %[[LEFT:.*]] = arith.subi %[[ROWS]], %[[START]]
// CHECK: %[[N:.*]] = arith.minui %[[LEFT]], %[[C8]]
// CHECK: %[[IN:.*]] = arith.remui %[[P]], %[[PER]]
// CHECK: %[[R:.*]] = arith.remui %[[IN]], %[[N]]
// CHECK: %[[I:.*]] = arith.addi %[[START]], %[[R]]
// CHECK: %[[J:.*]] = arith.divui %[[IN]], %[[N]]
// i and j clamped below the block counts, a bound that integer range analysis
// cannot see through the grouping:
// CHECK: %[[R1:.*]] = arith.maxui %[[ROWS]], %[[C1:.*]] : index
// CHECK: %[[LASTROW:.*]] = arith.subi %[[R1]], %[[C1]]
// CHECK: %[[IC:.*]] = arith.minui %[[I]], %[[LASTROW]]
// CHECK: %[[C1S:.*]] = arith.maxui %[[COLS]], %[[C1]] : index
// CHECK: %[[LASTCOL:.*]] = arith.subi %[[C1S]], %[[C1]]
// CHECK: %[[JC:.*]] = arith.minui %[[J]], %[[LASTCOL]]
// CHECK: %[[ROW:.*]] = arith.muli %[[IC]],
// CHECK: %[[COL:.*]] = arith.muli %[[JC]],
// CHECK: tile.load %arg2[%[[ROW]], %{{.*}}]
// CHECK: tile.load %arg3[%{{.*}}, %[[COL]]]
// CHECK: tile.dot {{.*}} : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
// CHECK-LABEL: func.func @mid_f16_matmul
// CHECK: tile.launch @k0_matmul grid(%c128, %c1, %c1) (%c2048, %c1024,
func.func @mid_f16_matmul(%x: tensor<2048x1024xf16>, %w: tensor<1024x1024xf16>) -> tensor<2048x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2048x1024xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2048x1024xf32>) -> tensor<2048x1024xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<2048x1024xf16>, tensor<1024x1024xf16>) outs(%f : tensor<2048x1024xf32>) -> tensor<2048x1024xf32>
  return %mm : tensor<2048x1024xf32>
}

// -----

// ... with k by 32 where more than two waves of them share the SMs (288
// programs of GPT-2's QKV projection at 2048 tokens; n = 2304 is too few
// 256-column blocks)...
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.num_stages = 4
// CHECK-SAME: tile.num_warps = 4
// CHECK: tile.dot {{.*}} : tensor<128x32xf16>, tensor<32x128xf16> -> tensor<128x128xf32>
// CHECK-LABEL: func.func @many_f16_matmul
// CHECK: tile.launch @k0_matmul grid(%c288, %c1, %c1)
func.func @many_f16_matmul(%x: tensor<2048x768xf16>, %w: tensor<768x2304xf16>) -> tensor<2048x2304xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2048x2304xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2048x2304xf32>) -> tensor<2048x2304xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<2048x768xf16>, tensor<768x2304xf16>) outs(%f : tensor<2048x2304xf32>) -> tensor<2048x2304xf32>
  return %mm : tensor<2048x2304xf32>
}

// -----

// ... and a launch of less than half a wave halves the larger block until it
// has 64 programs, down to 64 x 64, with 3 stages of 64 KiB (24 programs of
// 128 x 128 here, 96 of 64 x 64 x 256).
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.num_stages = 3
// CHECK-SAME: tile.num_warps = 4
// CHECK: tile.dot {{.*}} : tensor<64x256xf16>, tensor<256x64xf16> -> tensor<64x64xf32>
// CHECK-LABEL: func.func @small_f16_matmul
// CHECK: tile.launch @k0_matmul grid(%c96, %c1, %c1)
func.func @small_f16_matmul(%x: tensor<512x3072xf16>, %w: tensor<3072x768xf16>) -> tensor<512x768xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x768xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<512x768xf32>) -> tensor<512x768xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<512x3072xf16>, tensor<3072x768xf16>) outs(%f : tensor<512x768xf32>) -> tensor<512x768xf32>
  return %mm : tensor<512x768xf32>
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
// argument however many loops read it. The sizes are index arguments: the
// number of rows (for the programs) and the row's length.
// CHECK-LABEL: tile.kernel @k0_reduce(
// CHECK-SAME: %arg0: index {tile.index_bitwidth = 32 : i64}, %[[N:arg1]]: index {tile.index_bitwidth = 32 : i64}, %arg2: {{[^%]*}}, %arg3: {{[^%]*}}) attributes
// CHECK-SAME: tile.num_warps = 16
// CHECK: %[[MAX:.*]] = scf.for %[[I:.*]] = %c0 to %[[N]] step %c4096 iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<1x1xf32>)
// CHECK:   tile.load %arg2[%{{.*}}, %[[I]]] {{.*}} -> tensor<1x4096xf32>
// CHECK:   %[[LEN:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK:   arith.index_cast %[[I]] : index to i32
// CHECK:   arith.subi %[[LEN]]
// CHECK:   arith.select
// CHECK:   tile.reduce
// CHECK:   arith.maximumf %{{.*}}, %[[ACC]] : tensor<1x1xf32>
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} iter_args({{.*}}) -> (tensor<1x1xf32>)
// CHECK:   tile.load %arg2
// CHECK:   tile.broadcast %[[MAX]]
// CHECK:   math.exp
// CHECK:   tile.reduce
// CHECK: scf.for
// CHECK:   tile.load %arg2
// CHECK:   math.exp
// CHECK:   tile.broadcast %[[SUM]]
// CHECK:   arith.divf
// CHECK:   tile.store {{.*}}, %arg3
// CHECK-NOT: scf.for
// CHECK: tile.return
// CHECK-LABEL: func.func @long_softmax
// CHECK: tile.launch @k0_reduce grid(%c2, %c1, %c1) (%c2, %c20000,
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

// -----

// Attention in f16 with an f32 softmax (the form-kernels test's): one
// flash-attention kernel. q is loaded once; a loop over blocks of 64 keys
// computes the scores with tile.dot, masks the causal and the padded keys,
// keeps the running row maximum (0 in place of -inf) and sum, and adds
// exp(x - m) rounded to f16 times v to the rescaled output. The softmax is in
// base 2 as flash attention's: with k = scale * log2(e), the maximum is
// max(s) and the exponentials 2^((s - m) k) (not s k - m k, which overflows for
// a finite mask of -3.4e38; `afn`: results below 2^-126 may flush to zero,
// less than the rounding of a sum whose largest term is 1); the
// output is multiplied by the inverse row sums after the loop (one division a
// row), transposed to the space's order (the head dimension before the rows:
// the loop's scores and row statistics then have only leading unit dimensions)
// and stored with the head dimension innermost in memory. One program per batch
// element and 64 rows. The loop runs to k's size (its view's last dimension:
// k^T's keys), which its 32-bit promise lets the GPU lowering count in 32 bits,
// or to the last key that the causal mask shows the program's last row (j <= i:
// the keys before 64, the first row 0 plus 64 rows), whichever comes first. The
// mask is exactly that bound, so this loop starts at the blocks that the first
// row does not see whole (here all of them) and a copy without the mask (see
// the causal test below) covers the blocks before.
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK-SAME: (%arg0: index {tile.index_bitwidth = 32 : i64}, %arg1: {{[^%]*}}, %arg2: {{[^%]*}}, %arg3: {{[^%]*}}, %arg4: {{[^%]*}}) attributes
// CHECK-SAME: tile.fused = "matmul, cmpi+mulf+select, reduce(maximumf), subf+exp, reduce(addf), divf, truncf, matmul"
// CHECK-DAG: %[[KROW:.*]] = arith.constant dense<0.255034864> : tensor<1x1x1x64x1xf32>
// CHECK-DAG: %[[K:.*]] = arith.constant dense<0.255034864> : tensor<1x1x1x64x64xf32>
// CHECK: %[[DIM:.*]] = memref.dim %arg2, %c2
// CHECK: %[[Q:.*]] = tile.load %arg1{{.*}} -> tensor<1x64x32xf16>
// CHECK: %[[Q2:.*]] = tile.reshape %[[Q]] : tensor<1x64x32xf16> -> tensor<64x32xf16>
// CHECK: %[[KEYS:.*]] = arith.minsi %[[DIM]], %c64 : index
// CHECK: %[[WHOLE:.*]] = arith.minsi %[[KEYS]], %c0 : index
// CHECK: scf.for %[[KEY:.*]] = %[[WHOLE]] to %[[KEYS]] step %c64 iter_args(%[[ACC:.*]] = %{{.*}}, %[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}) -> (tensor<64x32xf32>, tensor<1x1x1x64x1xf32>, tensor<1x1x1x64x1xf32>)
// CHECK: tile.load %arg2[%{{.*}}, %c0, %[[KEY]]] {{.*}} -> tensor<1x32x64xf16>
// CHECK: %[[S:.*]] = tile.dot %[[Q2]], %{{.*}} : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf32>
// CHECK: %[[S5:.*]] = tile.reshape %[[S]]
// CHECK: %[[MASKED:.*]] = arith.select %{{.*}}, %[[S5]], %[[NINF:.*]] : tensor<1x1x1x64x64xi1>, tensor<1x1x1x64x64xf32>
// CHECK: %[[PADDED:.*]] = arith.select %{{.*}}, %[[MASKED]], %[[NINF]]
// CHECK: %[[BMAX:.*]] = tile.reduce %[[PADDED]]
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: %[[BMAX5:.*]] = tile.expand_dims %[[BMAX]]
// CHECK: %[[MNEW:.*]] = arith.maximumf %[[M]], %[[BMAX5]] : tensor<1x1x1x64x1xf32>
// CHECK: arith.cmpf oeq, %[[MNEW]]
// CHECK: %[[SAFE:.*]] = arith.select
// CHECK: %[[DM:.*]] = arith.subf %[[M]], %[[SAFE]]
// CHECK: %[[DMK:.*]] = arith.mulf %[[DM]], %[[KROW]]
// CHECK: %[[ALPHA:.*]] = math.exp2 %[[DMK]] fastmath<afn>
// CHECK: %[[SAFEB:.*]] = tile.broadcast %[[SAFE]]
// CHECK: %[[D:.*]] = arith.subf %[[MASKED]], %[[SAFEB]]
// CHECK: %[[DK:.*]] = arith.mulf %[[D]], %[[K]]
// CHECK: math.exp2 %[[DK]] fastmath<afn>
// CHECK: tile.reduce
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: arith.mulf %[[L]], %[[ALPHA]]
// CHECK: arith.truncf %{{.*}} : tensor<1x1x1x64x64xf32> to tensor<1x1x1x64x64xf16>
// CHECK: tile.load %arg3[%{{.*}}, %[[KEY]], %c0] {{.*}} -> tensor<1x64x32xf16>
// CHECK: arith.mulf %[[ACC]], %{{.*}} : tensor<64x32xf32>
// CHECK: %[[PV:.*]] = tile.dot %{{.*}} : tensor<64x64xf16>, tensor<64x32xf16> -> tensor<64x32xf32>
// CHECK: scf.yield %[[PV]], %[[MNEW]], %{{.*}}
// CHECK: %[[LSUM:.*]] = tile.reshape %{{.*}}#2 : tensor<1x1x1x64x1xf32> -> tensor<64x1xf32>
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[LSUM]] : tensor<64x1xf32>
// CHECK: %[[INVB:.*]] = tile.broadcast %[[INV]] : tensor<64x1xf32> -> tensor<64x32xf32>
// CHECK: arith.mulf %{{.*}}#0, %[[INVB]] : tensor<64x32xf32>
// CHECK: tile.permute %{{.*}} {permutation = array<i64: 1, 0>} : tensor<64x32xf32> -> tensor<32x64xf32>
// CHECK: tile.store {{.*}} : tensor<1x1x32x64x1xf32>, memref<?x?x?x?x?xf32, strided<[?, ?, 1, ?, ?], offset: ?>>
// CHECK-LABEL: func.func @attention
// CHECK: tile.launch @k2_attention grid(%c4, %c1, %c1) (%c4, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}}) :
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @attention(%q: tensor<4x40x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> tensor<4x40x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.17677669 : f32
  %es = tensor.empty() : tensor<4x40x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x40x32xf16>, tensor<4x100x32xf16>) outs(%s0 : tensor<4x40x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  // The scale and a causal mask.
  %x = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x40x100xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %seen = arith.cmpi ule, %j, %i : index
    %t = arith.mulf %a, %scale : f32
    %r = arith.select %seen, %t, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %er = tensor.empty() : tensor<4x40xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x40x100xf32>) outs(%m0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x40x100xf32>) outs(%l0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %eh = tensor.empty() : tensor<4x40x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x40x100xf32>) outs(%eh : tensor<4x40x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x40x100xf16>
  %eo = tensor.empty() : tensor<4x40x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x40x100xf16>, tensor<4x100x32xf16>) outs(%o0 : tensor<4x40x32xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x32xf32>
  return %o : tensor<4x40x32xf32>
}

// -----

// A head dimension of 160 (256 in registers, over 128): blocks of 32 keys, so
// that the blocks of k and v take no more shared memory than q's.
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK: tile.load %arg1{{.*}} -> tensor<1x64x256xf16>
// CHECK: scf.for %[[KEY:.*]] = %{{.*}} to %{{.*}} step %c32
// CHECK: tile.load %arg2[%{{.*}}, %c0, %[[KEY]]] {{.*}} -> tensor<1x256x32xf16>
// CHECK: tile.dot %{{.*}} : tensor<64x256xf16>, tensor<256x32xf16> -> tensor<64x32xf32>
// CHECK: tile.load %arg3[%{{.*}}, %[[KEY]], %c0] {{.*}} -> tensor<1x32x256xf16>
// CHECK: tile.dot %{{.*}} : tensor<64x32xf16>, tensor<32x256xf16> -> tensor<64x256xf32>
// CHECK-LABEL: func.func @wide_attention
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @wide_attention(%q: tensor<4x40x160xf16>, %k: tensor<4x100x160xf16>, %v: tensor<4x100x160xf16>) -> tensor<4x40x160xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.17677669 : f32
  %es = tensor.empty() : tensor<4x40x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x40x160xf16>, tensor<4x100x160xf16>) outs(%s0 : tensor<4x40x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  // The scale and a causal mask.
  %x = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x40x100xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %seen = arith.cmpi ule, %j, %i : index
    %t = arith.mulf %a, %scale : f32
    %r = arith.select %seen, %t, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %er = tensor.empty() : tensor<4x40xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x40x100xf32>) outs(%m0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x40x100xf32>) outs(%l0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %eh = tensor.empty() : tensor<4x40x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x40x100xf32>) outs(%eh : tensor<4x40x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x40x100xf16>
  %eo = tensor.empty() : tensor<4x40x160xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x40x160xf32>) -> tensor<4x40x160xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x40x100xf16>, tensor<4x100x160xf16>) outs(%o0 : tensor<4x40x160xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x160xf32>
  return %o : tensor<4x40x160xf32>
}

// -----

// A causal mask shifted by 3 keys, or-ed with a padding mask (keys from 90
// hidden): row i keeps only keys j <= i + 3, so the loop ends at the
// program's first row plus 64 + 3 keys, or at k's size.
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK: %[[DIM:.*]] = memref.dim %{{.*}}, %c2
// CHECK: %[[END:.*]] = arith.addi %{{.*}}, %c67 : index
// CHECK: %[[KEYS:.*]] = arith.minsi %[[DIM]], %[[END]] : index
// CHECK: scf.for %{{.*}} = %c0 to %[[KEYS]] step %c64
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @shifted_causal_attention(%q: tensor<4x200x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> tensor<4x200x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.17677669 : f32
  %es = tensor.empty() : tensor<4x200x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x200x100xf32>) -> tensor<4x200x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x200x32xf16>, tensor<4x100x32xf16>) outs(%s0 : tensor<4x200x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  // The scale and a causal mask.
  %x = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x200x100xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %c3 = arith.constant 3 : i64
    %late = arith.cmpi sgt, %d, %c3 : i64
    %c90 = arith.constant 90 : i64
    %pad = arith.cmpi sge, %j64, %c90 : i64
    %hide = arith.ori %late, %pad : i1
    %t = arith.mulf %a, %scale : f32
    %r = arith.select %hide, %ninf, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %er = tensor.empty() : tensor<4x200xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x200xf32>) -> tensor<4x200xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x200x100xf32>) outs(%m0 : tensor<4x200xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x200xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x200x100xf32>, tensor<4x200xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x200xf32>) -> tensor<4x200xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x200x100xf32>) outs(%l0 : tensor<4x200xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x200xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x200x100xf32>, tensor<4x200xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %eh = tensor.empty() : tensor<4x200x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x200x100xf32>) outs(%eh : tensor<4x200x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x200x100xf16>
  %eo = tensor.empty() : tensor<4x200x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x200x32xf32>) -> tensor<4x200x32xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x200x100xf16>, tensor<4x100x32xf16>) outs(%o0 : tensor<4x200x32xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x32xf32>
  return %o : tensor<4x200x32xf32>
}

// -----

// A mask that keeps the keys after each row (j >= i) puts no end on them:
// the loop runs to k's size.
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK: %[[DIM:.*]] = memref.dim %{{.*}}, %c2
// CHECK-NOT: arith.minsi
// CHECK: scf.for %{{.*}} = %c0 to %[[DIM]] step %c64
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @later_keys_attention(%q: tensor<4x40x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> tensor<4x40x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.17677669 : f32
  %es = tensor.empty() : tensor<4x40x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x40x32xf16>, tensor<4x100x32xf16>) outs(%s0 : tensor<4x40x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  // The scale and a causal mask.
  %x = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x40x100xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %seen = arith.cmpi uge, %j, %i : index
    %t = arith.mulf %a, %scale : f32
    %r = arith.select %seen, %t, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %er = tensor.empty() : tensor<4x40xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x40x100xf32>) outs(%m0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x40x100xf32>) outs(%l0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %eh = tensor.empty() : tensor<4x40x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x40x100xf32>) outs(%eh : tensor<4x40x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x40x100xf16>
  %eo = tensor.empty() : tensor<4x40x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x40x100xf16>, tensor<4x100x32xf16>) outs(%o0 : tensor<4x40x32xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x32xf32>
  return %o : tensor<4x40x32xf32>
}

// -----

// A causal mask alone (j - i <= 0) is exactly its bound: blocks before the
// program's first row are whole for every row. The loop over the diagonal's
// blocks (masked, from the first row rounded down to a block, to the
// bound) comes first; a copy without the mask continues from its running
// statistics over the whole blocks.
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK: %[[DIM:.*]] = memref.dim %{{.*}}, %c2
// CHECK: %[[ROW:.*]] = arith.muli %{{.*}}, %c64 : index
// CHECK: %[[END:.*]] = arith.addi %[[ROW]], %c64 : index
// CHECK: %[[KEYS:.*]] = arith.minsi %[[DIM]], %[[END]] : index
// CHECK: %[[FIRST:.*]] = arith.addi %[[ROW]], %c1 : index
// CHECK: %[[BLOCKS:.*]] = arith.divui %[[FIRST]], %c64 : index
// CHECK: %[[WHOLE:.*]] = arith.muli %[[BLOCKS]], %c64 : index
// CHECK: %[[WHOLE2:.*]] = arith.minsi %[[WHOLE]], %[[KEYS]] : index
// CHECK: %[[MASKED:.*]]:3 = scf.for %{{.*}} = %[[WHOLE2]] to %[[KEYS]] step %c64
// CHECK: arith.cmpi sle
// CHECK: scf.yield
// CHECK: scf.for %{{.*}} = %c0 to %[[WHOLE2]] step %c64 iter_args(%{{.*}} = %[[MASKED]]#0, %{{.*}} = %[[MASKED]]#1, %{{.*}} = %[[MASKED]]#2)
// CHECK-NOT: arith.cmpi sle
// CHECK: scf.yield
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @causal_attention(%q: tensor<4x200x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> tensor<4x200x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.17677669 : f32
  %es = tensor.empty() : tensor<4x200x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x200x100xf32>) -> tensor<4x200x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x200x32xf16>, tensor<4x100x32xf16>) outs(%s0 : tensor<4x200x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  // The scale and a causal mask.
  %x = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x200x100xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %c0 = arith.constant 0 : i64
    %seen = arith.cmpi sle, %d, %c0 : i64
    %t = arith.mulf %a, %scale : f32
    %r = arith.select %seen, %t, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %er = tensor.empty() : tensor<4x200xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x200xf32>) -> tensor<4x200xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x200x100xf32>) outs(%m0 : tensor<4x200xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x200xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x200x100xf32>, tensor<4x200xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x200xf32>) -> tensor<4x200xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x200x100xf32>) outs(%l0 : tensor<4x200xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x200xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x200x100xf32>, tensor<4x200xf32>) outs(%es : tensor<4x200x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x200x100xf32>
  %eh = tensor.empty() : tensor<4x200x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x200x100xf32>) outs(%eh : tensor<4x200x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x200x100xf16>
  %eo = tensor.empty() : tensor<4x200x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x200x32xf32>) -> tensor<4x200x32xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x200x100xf16>, tensor<4x100x32xf16>) outs(%o0 : tensor<4x200x32xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x200x32xf32>
  return %o : tensor<4x200x32xf32>
}

// -----

// Scores that torch's decomposition rounds to f16 and scales in f16, plus an
// additive f16 bias: the loop keeps them in f32 (the f16 bias extended), as
// flash attention does, with the scale applied before the bias and log2(e)
// to the exponents: y = s 0.125 + bias, 2^((y - max(y)) log2(e)).
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK-DAG: %[[SCALE:.*]] = arith.constant dense<1.250000e-01> : tensor<1x1x1x64x64xf32>
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant dense<1.44269502> : tensor<1x1x1x64x64xf32>
// CHECK: scf.for
// CHECK: %[[S:.*]] = tile.dot
// CHECK: %[[S5:.*]] = tile.reshape %[[S]]
// CHECK: %[[BIAS:.*]] = tile.load %arg4
// CHECK-NOT: arith.truncf
// CHECK: %[[SCALED:.*]] = arith.mulf %[[S5]], %[[SCALE]]
// CHECK: %[[BIAS32:.*]] = arith.extf %[[BIAS]]
// CHECK: %[[Y:.*]] = arith.addf %[[SCALED]], %[[BIAS32]]
// CHECK: %[[PADDED:.*]] = arith.select %{{.*}}, %[[Y]], %{{.*}}
// CHECK: %[[BMAX:.*]] = tile.reduce %[[PADDED]]
// CHECK: math.exp2
// CHECK: %[[D:.*]] = arith.subf %[[Y]], %{{.*}}
// CHECK: arith.mulf %[[D]], %[[LOG2E]]
// CHECK: math.exp2
// CHECK-NOT: math.exp
// CHECK: scf.yield
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @biased_attention(%q: tensor<4x40x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>, %bias: tensor<4x40x100xf16>) -> tensor<4x40x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale16 = arith.constant 0.125 : f16
  %es = tensor.empty() : tensor<4x40x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x40x32xf16>, tensor<4x100x32xf16>) outs(%s0 : tensor<4x40x100xf32>) {
  ^bb0(%a: f16, %b: f16, %o: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  // torch's decomposition: the product rounded to f16, scaled in f16, an
  // additive f16 bias, then the softmax's f32.
  %x = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %bias : tensor<4x40x100xf32>, tensor<4x40x100xf16>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %c: f16, %o: f32):
    %h = arith.truncf %a : f32 to f16
    %t = arith.mulf %h, %scale16 : f16
    %u = arith.addf %t, %c : f16
    %r = arith.extf %u : f16 to f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %er = tensor.empty() : tensor<4x40xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x40x100xf32>) outs(%m0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x40x100xf32>) outs(%l0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x40x100xf32>, tensor<4x40xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %eh = tensor.empty() : tensor<4x40x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<4x40x100xf32>) outs(%eh : tensor<4x40x100xf16>) {
  ^bb0(%a: f32, %o: f16):
    %r = arith.truncf %a : f32 to f16
    linalg.yield %r : f16
  } -> tensor<4x40x100xf16>
  %eo = tensor.empty() : tensor<4x40x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p16, %v : tensor<4x40x100xf16>, tensor<4x100x32xf16>) outs(%o0 : tensor<4x40x32xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %t = arith.mulf %a32, %b32 : f32
    %r = arith.addf %acc, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x32xf32>
  return %o : tensor<4x40x32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// torch.max(x, -1) as torch-mlir writes it: the index of the row maximum
// beside it. One tile.reduce of (value, position) pairs keeps PyTorch's
// order: a greater value, a NaN before a number, of equal values (or two
// NaNs) the lesser position; the padding is -inf at positions past the row.
// CHECK-LABEL: tile.kernel @k0_reduce
// CHECK: %[[POS:.*]] = tile.broadcast {{.*}} : tensor<1x8xi64> -> tensor<8x8xi64>
// CHECK: tile.reduce %{{.*}}, %[[POS]] {axis = 1 : i64} : tensor<8x8xf32>, tensor<8x8xi64> -> tensor<8xf32>, tensor<8xi64> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[AI:.*]]: i64, %[[B:.*]]: f32, %[[BI:.*]]: i64):
// CHECK-NEXT: %[[BNAN:.*]] = arith.cmpf uno, %[[B]], %[[B]]
// CHECK-NEXT: %[[AORD:.*]] = arith.cmpf ord, %[[A]], %[[A]]
// CHECK-NEXT: %[[NANWINS:.*]] = arith.andi %[[BNAN]], %[[AORD]]
// CHECK-NEXT: %[[GT:.*]] = arith.cmpf ogt, %[[B]], %[[A]]
// CHECK-NEXT: %[[WINS:.*]] = arith.ori %[[GT]], %[[NANWINS]]
// CHECK: %[[EQ:.*]] = arith.cmpf oeq, %[[B]], %[[A]]
// CHECK: %[[EARLIER:.*]] = arith.cmpi slt, %[[BI]], %[[AI]]
// CHECK: %[[TAKE:.*]] = arith.ori %[[WINS]], %{{.*}}
// CHECK: arith.select %[[TAKE]], %[[B]], %[[A]] : f32
// CHECK: arith.select %[[TAKE]], %[[BI]], %[[AI]] : i64
// CHECK: tile.store {{.*}} : tensor<8x1xf32>
// CHECK: tile.store {{.*}} : tensor<8x1xi64>
// CHECK-LABEL: func.func @max_with_index
func.func @max_with_index(%x: tensor<5x7xf32>) -> (tensor<5xf32>, tensor<5xi64>) {
  %c0 = arith.constant 0 : i64
  %ninf = arith.constant 0xFF800000 : f32
  %ei = tensor.empty() : tensor<5xi64>
  %i = linalg.fill ins(%c0 : i64) outs(%ei : tensor<5xi64>) -> tensor<5xi64>
  %ev = tensor.empty() : tensor<5xf32>
  %v = linalg.fill ins(%ninf : f32) outs(%ev : tensor<5xf32>) -> tensor<5xf32>
  %r:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<5x7xf32>) outs(%v, %i : tensor<5xf32>, tensor<5xi64>) {
  ^bb0(%in: f32, %acc: f32, %idx: i64):
    %j = linalg.index 1 : index
    %k = arith.index_cast %j : index to i64
    %max = arith.maximumf %in, %acc : f32
    %gt = arith.cmpf ogt, %in, %acc : f32
    %sel = arith.select %gt, %k, %idx : i64
    linalg.yield %max, %sel : f32, i64
  } -> (tensor<5xf32>, tensor<5xi64>)
  return %r#0, %r#1 : tensor<5xf32>, tensor<5xi64>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A non-splat constant comes from torch-mlir as a dense_resource blob (the
// indices of an aten.index, as GroupNorm's decomposition gathers each
// channel's statistics with): a view of it reads a global that holds the
// blob.
// CHECK: memref.global "private" constant @__constant_0 : memref<6xi64> = dense_resource<indices>
// CHECK-LABEL: tile.kernel @k0_pointwise
// CHECK: tile.gather
// CHECK-LABEL: func.func @resource_indices
// CHECK: %[[IDX:.*]] = memref.get_global @__constant_0 : memref<6xi64>
// CHECK: memref.reinterpret_cast %[[IDX]] to offset: [0], sizes: [2, 3], strides: [3, 1]
// CHECK: tile.launch @k0_pointwise
func.func @resource_indices(%x: tensor<4xf32>) -> tensor<2x3xf32> {
  %idx = arith.constant dense_resource<indices> : tensor<6xi64>
  %i = tensor.expand_shape %idx [[0, 1]] output_shape [2, 3] : tensor<6xi64> into tensor<2x3xi64>
  %e = tensor.empty() : tensor<2x3xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i : tensor<2x3xi64>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%j: i64, %o: f32):
    %k = arith.index_cast %j : i64 to index
    %v = tensor.extract %x[%k] : tensor<4xf32>
    linalg.yield %v : f32
  } -> tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}

{-#
  dialect_resources: {
    builtin: {
      indices: "0x08000000000000000000000003000000000000000100000000000000020000000000000003000000000000000000000000000000"
    }
  }
#-}

// -----

// A result that is an empty tensor (the frontend's result with no elements)
// gets a fresh buffer: its contents are undefined.
// CHECK-LABEL: func.func @returns_empty
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<0x3xf32>
// CHECK: return %[[A]] : memref<0x3xf32>
func.func @returns_empty(%x: tensor<2x3xf32>) -> tensor<0x3xf32> {
  %0 = tensor.empty() : tensor<0x3xf32>
  return %0 : tensor<0x3xf32>
}

// -----

// Grouped-query attention (form-kernels.mlir's @grouped_query_attention):
// one flash-attention kernel over key heads x copies x row blocks whose k and
// v views read each key head for both of its query heads (stride 0 along the
// copies, over their extent of 2, so that every copy's index is in bounds).
// CHECK-LABEL: tile.kernel @k2_attention
// CHECK-LABEL: func.func @grouped_query_attention
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [2, 2, 32, 100], strides: [3200, 0, 1, 32]
// CHECK: memref.reinterpret_cast %arg2 to offset: [0], sizes: [2, 2, 100, 32], strides: [3200, 0, 32, 1]
// CHECK: tile.launch @k2_attention grid(%c8, %c1, %c1)
// CHECK-NOT: tile.launch
#bc_in = affine_map<(h, c, n, d) -> (h, n, d)>
#bc_out = affine_map<(h, c, n, d) -> (h, c, n, d)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row1 = affine_map<(b, m, n) -> (b, m, 0)>
#row = affine_map<(b, m, n) -> (b, m)>
#scalar = affine_map<(b, m, n) -> ()>

func.func @grouped_query_attention(%q: tensor<4x40x32xf32>, %k: tensor<2x100x32xf32>, %v: tensor<2x100x32xf32>) -> tensor<4x40x32xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant dense<0.17677669> : tensor<f32>
  %eb = tensor.empty() : tensor<2x2x100x32xf32>
  %kb = linalg.generic {indexing_maps = [#bc_in, #bc_out], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<2x100x32xf32>) outs(%eb : tensor<2x2x100x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x2x100x32xf32>
  %kc = tensor.collapse_shape %kb [[0, 1], [2], [3]] : tensor<2x2x100x32xf32> into tensor<4x100x32xf32>
  %et = tensor.empty() : tensor<4x32x100xf32>
  %kt = linalg.transpose ins(%kc : tensor<4x100x32xf32>) outs(%et : tensor<4x32x100xf32>) permutation = [0, 2, 1]
  %es = tensor.empty() : tensor<4x40x100xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%es : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x40x32xf32>, tensor<4x32x100xf32>) outs(%s0 : tensor<4x40x100xf32>) -> tensor<4x40x100xf32>
  %x = linalg.generic {indexing_maps = [#id3, #scalar, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %scale : tensor<4x40x100xf32>, tensor<f32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %r = arith.mulf %a, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %er = tensor.empty() : tensor<4x40xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<4x40xf32>) -> tensor<4x40xf32>
  %m = linalg.generic {indexing_maps = [#id3, #row], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x40x100xf32>) outs(%m0 : tensor<4x40xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40xf32>
  %m1 = tensor.expand_shape %m [[0], [1, 2]] output_shape [4, 40, 1] : tensor<4x40xf32> into tensor<4x40x1xf32>
  %e = linalg.generic {indexing_maps = [#id3, #row1, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m1 : tensor<4x40x100xf32>, tensor<4x40x1xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.subf %a, %b : f32
    %r = math.exp %t : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %el = tensor.empty() : tensor<4x40x1xf32>
  %l0 = linalg.fill ins(%zero : f32) outs(%el : tensor<4x40x1xf32>) -> tensor<4x40x1xf32>
  %l = linalg.generic {indexing_maps = [#id3, #row1], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%e : tensor<4x40x100xf32>) outs(%l0 : tensor<4x40x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x40x1xf32>
  %p = linalg.generic {indexing_maps = [#id3, #row1, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%e, %l : tensor<4x40x100xf32>, tensor<4x40x1xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %vb = linalg.generic {indexing_maps = [#bc_in, #bc_out], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<2x100x32xf32>) outs(%eb : tensor<2x2x100x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x2x100x32xf32>
  %vc = tensor.collapse_shape %vb [[0, 1], [2], [3]] : tensor<2x2x100x32xf32> into tensor<4x100x32xf32>
  %eo = tensor.empty() : tensor<4x40x32xf32>
  %o0 = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  %o = linalg.batch_matmul ins(%p, %vc : tensor<4x40x100xf32>, tensor<4x100x32xf32>) outs(%o0 : tensor<4x40x32xf32>) -> tensor<4x40x32xf32>
  return %o : tensor<4x40x32xf32>
}

// -----

// A matmul whose epilogue computes a causal mask on i64 tiles (torch-mlir's
// j - i <= 0 from linalg.index), each element two registers: at most 64 a
// thread, so the 128 x 256 block a matmul this large takes is 128 x 128 on 8
// warps (an i64 tile of 128 x 256 needed 256 registers a thread on 8 warps).
// CHECK-LABEL: tile.kernel @k0_matmul
// CHECK-SAME: tile.num_warps = 8
// CHECK: tile.load {{.*}} -> tensor<1x64x128xf16>
// CHECK: arith.subi {{.*}} : tensor<1x128x128xi64>
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (b, k, n)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
#id = affine_map<(b, m, n) -> (b, m, n)>
func.func @masked_scores(%q: tensor<8x1024x64xf16>, %k: tensor<8x64x1024xf16>) -> tensor<8x1024x1024xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<8x1024x1024xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x1024x1024xf32>) -> tensor<8x1024x1024xf32>
  %s = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<8x1024x64xf16>, tensor<8x64x1024xf16>) outs(%s0 : tensor<8x1024x1024xf32>) {
  ^bb0(%x: f16, %y: f16, %o: f32):
    %x32 = arith.extf %x : f16 to f32
    %y32 = arith.extf %y : f16 to f32
    %t = arith.mulf %x32, %y32 : f32
    %r = arith.addf %o, %t : f32
    linalg.yield %r : f32
  } -> tensor<8x1024x1024xf32>
  %m = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<8x1024x1024xf32>) outs(%e : tensor<8x1024x1024xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %seen = arith.cmpi sle, %d, %c0 : i64
    %r = arith.select %seen, %x, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<8x1024x1024xf32>
  return %m : tensor<8x1024x1024xf32>
}
