// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --linalg-generalize-named-ops --tile-form-kernels | FileCheck %s
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --linalg-generalize-named-ops --tile-form-kernels="max-head-dim=16" | FileCheck %s --check-prefix=NARROW

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// A chain of elementwise ops with a broadcast operand is one group; the
// unused values need no output.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic {{.*}}ins(%arg0, %arg1 {{.*}}tile.group = 0 : i64, tile.space = array<i64: 0, 1>}
// CHECK: linalg.generic {{.*}}tile.group = 0 : i64, tile.space = array<i64: 0, 1>}
// CHECK: math.exp
// CHECK-NOT: tile.group = 1
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
#rowk = affine_map<(d0, d1) -> (d0, 0)>

// Softmax as torch-mlir writes it: a max with an unused argmax (dropped),
// a reshape to keepdim (propagated into the max), then exp, sum and
// divide: one group, whose reduced dimension is the row.
// CHECK-LABEL: func.func @softmax
// CHECK-COUNT-4: tile.group = 0 : i64, tile.space
// CHECK-NOT: tile.group = 1
func.func @softmax(%x: tensor<4x1000xf32>) -> tensor<4x1000xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : i64
  %ei = tensor.empty() : tensor<4xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %em = tensor.empty() : tensor<4xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<4xf32>) -> tensor<4xf32>
  %m:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x1000xf32>) outs(%fm, %fi : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %i = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i64
    %mx = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %sel = arith.select %gt, %ii, %oi : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  %mk = tensor.expand_shape %m#0 [[0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
  %e = tensor.empty() : tensor<4x1000xf32>
  %ex = linalg.generic {indexing_maps = [#id, #rowk, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mk : tensor<4x1000xf32>, tensor<4x1xf32>) outs(%e : tensor<4x1000xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<4x1000xf32>
  %es = tensor.empty() : tensor<4x1xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #rowk], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x1000xf32>) outs(%fs : tensor<4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #rowk, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %s : tensor<4x1000xf32>, tensor<4x1xf32>) outs(%e : tensor<4x1000xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.divf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<4x1000xf32>
  return %y : tensor<4x1000xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A linear layer: the weight's transpose is folded into the matmul's map
// (no copy), the bias and GELU join the contraction as its epilogue, and the
// zero fill stays a splat.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NOT: permutation
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<37x32xf32>, tensor<64x32xf32>) {{.*}}tile.group = 0 : i64, tile.space = array<i64: 0, 1, 2>}
// CHECK: tile.group = 0 : i64, tile.space = array<i64: 0, 1>}
// CHECK: tile.group = 0 : i64, tile.space = array<i64: 0, 1>}
// CHECK-NOT: tile.group = 1
func.func @linear_gelu(%x: tensor<37x32xf32>, %w: tensor<64x32xf32>, %b: tensor<64xf32>) -> tensor<37x64xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %et = tensor.empty() : tensor<32x64xf32>
  %wt = linalg.transpose ins(%w : tensor<64x32xf32>) outs(%et : tensor<32x64xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<37x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<37x64xf32>) -> tensor<37x64xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<37x32xf32>, tensor<32x64xf32>) outs(%f : tensor<37x64xf32>) -> tensor<37x64xf32>
  %h = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<37x64xf32>, tensor<64xf32>) outs(%e : tensor<37x64xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<37x64xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<37x64xf32>) outs(%e : tensor<37x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    %s = arith.mulf %t, %half : f32
    linalg.yield %s : f32
  } -> tensor<37x64xf32>
  return %g : tensor<37x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A half-precision linear layer as torch decomposes it: operands and bias
// widened to f32 first. The widenings fuse into the contraction, which then
// reads the f16 input and the f16 weight (through its transpose, folded
// into the map) and widens them itself: an f16 dot with an f32 accumulator,
// no f32 copies. The bias's goes into the epilogue that adds it. A widening
// that something else reads stays.
// CHECK-LABEL: func.func @half_linear
// CHECK: %[[WIDE:.*]] = linalg.generic {{.*}}ins(%arg0 : tensor<37x32xf16>) outs({{.*}}tile.group = 0
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.extf
// CHECK-NOT: tensor<32x64xf32>
// CHECK: %[[MM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<37x32xf16>, tensor<64x32xf16>) {{.*}}tile.group = 1
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.mulf
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}}ins(%[[MM]], %arg2 : tensor<37x64xf32>, tensor<64xf16>) {{.*}}tile.group = 1
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.extf
// CHECK-NEXT: arith.addf
// CHECK: return %[[OUT]], %[[WIDE]]
func.func @half_linear(%x: tensor<37x32xf16>, %w: tensor<64x32xf16>, %bias: tensor<64xf16>) -> (tensor<37x64xf32>, tensor<37x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<37x32xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<37x32xf16>) outs(%ex : tensor<37x32xf32>) {
  ^bb0(%a: f16, %o: f32):
    %t = arith.extf %a : f16 to f32
    linalg.yield %t : f32
  } -> tensor<37x32xf32>
  %et = tensor.empty() : tensor<32x64xf16>
  %wt = linalg.transpose ins(%w : tensor<64x32xf16>) outs(%et : tensor<32x64xf16>) permutation = [1, 0]
  %ew = tensor.empty() : tensor<32x64xf32>
  %w32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wt : tensor<32x64xf16>) outs(%ew : tensor<32x64xf32>) {
  ^bb0(%a: f16, %o: f32):
    %t = arith.extf %a : f16 to f32
    linalg.yield %t : f32
  } -> tensor<32x64xf32>
  %e = tensor.empty() : tensor<37x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<37x64xf32>) -> tensor<37x64xf32>
  %mm = linalg.matmul ins(%x32, %w32 : tensor<37x32xf32>, tensor<32x64xf32>) outs(%f : tensor<37x64xf32>) -> tensor<37x64xf32>
  %eb = tensor.empty() : tensor<64xf32>
  %b32 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%bias : tensor<64xf16>) outs(%eb : tensor<64xf32>) {
  ^bb0(%a: f16, %o: f32):
    %t = arith.extf %a : f16 to f32
    linalg.yield %t : f32
  } -> tensor<64xf32>
  %out = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b32 : tensor<37x64xf32>, tensor<64xf32>) outs(%e : tensor<37x64xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<37x64xf32>
  return %out, %x32 : tensor<37x64xf32>, tensor<37x32xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// fp8 operands widened to f32 (torch's _scaled_mm as tileopt decomposes it)
// fuse into the contraction as f16 ones do: it reads e4m3 and e5m2 and
// widens them itself, so that its dot takes them as they are.
// CHECK-LABEL: func.func @fp8_matmul
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<32x64xf8E4M3FN>, tensor<64x16xf8E5M2>) {{.*}}tile.group = 0
// CHECK-NEXT: ^bb0
// CHECK-DAG: arith.extf {{.*}} : f8E4M3FN to f32
// CHECK-DAG: arith.extf {{.*}} : f8E5M2 to f32
// CHECK: arith.mulf
func.func @fp8_matmul(%x: tensor<32x64xf8E4M3FN>, %w: tensor<64x16xf8E5M2>) -> tensor<32x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<32x64xf32>
  %x32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<32x64xf8E4M3FN>) outs(%ex : tensor<32x64xf32>) {
  ^bb0(%a: f8E4M3FN, %o: f32):
    %t = arith.extf %a : f8E4M3FN to f32
    linalg.yield %t : f32
  } -> tensor<32x64xf32>
  %ew = tensor.empty() : tensor<64x16xf32>
  %w32 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<64x16xf8E5M2>) outs(%ew : tensor<64x16xf32>) {
  ^bb0(%a: f8E5M2, %o: f32):
    %t = arith.extf %a : f8E5M2 to f32
    linalg.yield %t : f32
  } -> tensor<64x16xf32>
  %e = tensor.empty() : tensor<32x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x16xf32>) -> tensor<32x16xf32>
  %mm = linalg.matmul ins(%x32, %w32 : tensor<32x64xf32>, tensor<64x16xf32>) outs(%f : tensor<32x16xf32>) -> tensor<32x16xf32>
  return %mm : tensor<32x16xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sw = affine_map<(d0, d1, d2) -> (d1, d0, d2)>

// A reshape of a transposed value is no strided view: it reads a copy,
// which reads the transpose through its indexing map.
// CHECK-LABEL: func.func @reshape_after_transpose
// CHECK: %[[COPY:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4x8x16xf32>) outs(%{{.*}} : tensor<8x4x16xf32>) attrs =  {tile.copy, tile.group = 0 : i64
// CHECK: tensor.collapse_shape %[[COPY]]
func.func @reshape_after_transpose(%x: tensor<4x8x16xf32>) -> tensor<8x64xf32> {
  %e = tensor.empty() : tensor<8x4x16xf32>
  %t = linalg.generic {indexing_maps = [#sw, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x8x16xf32>) outs(%e : tensor<8x4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<8x4x16xf32>
  %c = tensor.collapse_shape %t [[0], [1, 2]] : tensor<8x4x16xf32> into tensor<8x64xf32>
  return %c : tensor<8x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Two reductions of one input over the same rows share a kernel (siblings).
// CHECK-LABEL: func.func @siblings
// CHECK: tile.group = 0
// CHECK: tile.group = 0
// CHECK-NOT: tile.group = 1
func.func @siblings(%x: tensor<8x64xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x64xf32>) outs(%f0 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x64xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %s, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0) -> (d0)>

// A gather (an embedding lookup) is a kernel reading the table it extracts
// from (torch-mlir's bounds asserts are left to tile.gather's bounds check).
// CHECK-LABEL: func.func @gather
// CHECK: tile.group = 0 : i64, tile.space = array<i64: 0, 1>
// CHECK: tensor.extract %arg1
func.func @gather(%ids: tensor<8xi64>, %table: tensor<100x16xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<8xi64>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%i: i64, %o: f32):
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : i64 to index
    %v = tensor.extract %table[%ii, %j] : tensor<100x16xf32>
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row1 = affine_map<(d0, d1) -> (d0, 0)>

// A gather from an elementwise result (cross-entropy's pick of the target's
// log-probability) reads the elementwise op's inputs at the gathered index
// and recomputes its body there; the [8, 37] log-probabilities are not
// formed into a kernel at all.
// CHECK-LABEL: func.func @gather_through_elementwise
// CHECK-NOT: arith.subf {{.*}} : f32
// CHECK: %[[IDS:.*]] = linalg.generic {{.*}}ins(%arg2 {{.*}}tile.group
// CHECK: %[[X:.*]] = tensor.extract %arg0[%{{.*}}, %[[T:.*]]] : tensor<8x37xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: %[[L:.*]] = tensor.extract %arg1[%{{.*}}, %[[ZERO]]] : tensor<8x1xf32>
// CHECK: arith.subf %[[X]], %[[L]] : f32
// CHECK-NOT: linalg.generic
func.func @gather_through_elementwise(%x: tensor<8x37xf32>, %lse: tensor<8x1xf32>, %t: tensor<8xi64>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8x37xf32>
  %logp = linalg.generic {indexing_maps = [#id, #row1, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %lse : tensor<8x37xf32>, tensor<8x1xf32>) outs(%e : tensor<8x37xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<8x37xf32>
  %er = tensor.empty() : tensor<8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%t : tensor<8xi64>) outs(%er : tensor<8xf32>) {
  ^bb0(%i: i64, %o: f32):
    %r = linalg.index 0 : index
    %ii = arith.index_cast %i : i64 to index
    %v = tensor.extract %logp[%r, %ii] : tensor<8x37xf32>
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %g : tensor<8xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// A gather through a strided slice and a unit-dimension reshape of an
// elementwise result (a slice assigned to, then read back): the element
// (i, k) of the reshaped slice is (i + 2, 2 * k + 4) of the result, where the
// gather recomputes it from %arg0; the result itself is not formed.
// CHECK-LABEL: func.func @gather_through_slices
// CHECK-NOT: tensor.extract_slice
// CHECK: linalg.generic {{.*}}ins(%arg1 {{.*}}tile.group = 0
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[K:.*]] = arith.index_cast
// CHECK: %[[ROW:.*]] = arith.addi %[[I]], %c2
// CHECK: %[[TWICE:.*]] = arith.muli %[[K]], %c2
// CHECK: %[[COL:.*]] = arith.addi %[[TWICE]], %c4
// CHECK: %[[X:.*]] = tensor.extract %arg0[%[[ROW]], %[[COL]]] : tensor<8x16xf32>
// CHECK: arith.mulf %[[X]], %[[X]] : f32
// CHECK-NOT: linalg.generic
func.func @gather_through_slices(%x: tensor<8x16xf32>, %t: tensor<4xi64>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<8x16xf32>
  %s = tensor.extract_slice %sq[2, 4] [4, 4] [1, 2] : tensor<8x16xf32> to tensor<4x4xf32>
  %u = tensor.expand_shape %s [[0], [1, 2]] output_shape [4, 1, 4] : tensor<4x4xf32> into tensor<4x1x4xf32>
  %er = tensor.empty() : tensor<4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%t : tensor<4xi64>) outs(%er : tensor<4xf32>) {
  ^bb0(%i: i64, %o: f32):
    %r = linalg.index 0 : index
    %k = arith.index_cast %i : i64 to index
    %c0 = arith.constant 0 : index
    %v = tensor.extract %u[%r, %c0, %k] : tensor<4x1x4xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A gather through a reshape that drops a unit dimension: the element (i, k)
// of the collapsed result is (i, 0, k) of the elementwise result, which the
// gather recomputes from %arg0.
// CHECK-LABEL: func.func @gather_through_unit_collapse
// CHECK-NOT: tensor.collapse_shape
// CHECK: linalg.generic {{.*}}ins(%arg1 {{.*}}tile.group = 0
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[K:.*]] = arith.index_cast
// CHECK: %[[X:.*]] = tensor.extract %arg0[%[[I]], %c0, %[[K]]] : tensor<4x1x6xf32>
// CHECK: arith.addf %[[X]], %[[X]] : f32
// CHECK-NOT: linalg.generic
func.func @gather_through_unit_collapse(%x: tensor<4x1x6xf32>, %t: tensor<4xi64>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4x1x6xf32>
  %d = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x1x6xf32>) outs(%e : tensor<4x1x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x1x6xf32>
  %c = tensor.collapse_shape %d [[0], [1, 2]] : tensor<4x1x6xf32> into tensor<4x6xf32>
  %er = tensor.empty() : tensor<4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%t : tensor<4xi64>) outs(%er : tensor<4xf32>) {
  ^bb0(%i: i64, %o: f32):
    %r = linalg.index 0 : index
    %k = arith.index_cast %i : i64 to index
    %v = tensor.extract %c[%r, %k] : tensor<4x6xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// A concatenation of slices cast to a dynamic size (torch-mlir's roll):
// each input's place comes from its static source, and the gathers read the
// sources.
// CHECK-LABEL: func.func @concat_of_casts
// CHECK: %[[B:.*]] = tensor.extract_slice %arg0[0, 0] [2, 11]
// CHECK: linalg.generic
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[K:.*]] = arith.subi %[[J]], %c1
// CHECK: tensor.extract %[[B]][%{{.*}}, %[[K]]] : tensor<2x11xf32>
// CHECK-NOT: tensor.cast
func.func @concat_of_casts(%x: tensor<2x12xf32>) -> tensor<2x12xf32> {
  %a = tensor.extract_slice %x[0, 11] [2, 1] [1, 1] : tensor<2x12xf32> to tensor<2x1xf32>
  %ca = tensor.cast %a : tensor<2x1xf32> to tensor<2x?xf32>
  %b = tensor.extract_slice %x[0, 0] [2, 11] [1, 1] : tensor<2x12xf32> to tensor<2x11xf32>
  %cb = tensor.cast %b : tensor<2x11xf32> to tensor<2x?xf32>
  %r = tensor.concat dim(1) %ca, %cb : (tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// -----

// A softmax over a unit dimension, with its max's argmax and an expand of its
// result (from a random model): reshape propagation stops (it used to add and
// fold unit loops without end), and the ops form groups.
// CHECK-LABEL: func.func @unit_reduction_terminates
// CHECK: tile.group = 0
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d2)>
#map2 = affine_map<(d0, d1) -> ()>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
#map4 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map5 = affine_map<(d0, d1, d2) -> ()>
#map6 = affine_map<(d0, d1, d2) -> (0, d1, d2)>
func.func @unit_reduction_terminates(%arg0: tensor<1x5000x2xf32>, %arg1: tensor<2xf32>) -> tensor<1x5000x2xf32> {
  %cst = arith.constant 1.000000e+00 : f32
  %c0_i64 = arith.constant 0 : i64
  %cst_0 = arith.constant 0xFF800000 : f32
  %cst_1 = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<1x5000x2xf32>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %15 = arith.negf %in : f32
    %16 = math.exp %15 : f32
    %17 = arith.addf %16, %cst : f32
    %18 = arith.divf %cst, %17 : f32
    linalg.yield %18 : f32
  } -> tensor<1x5000x2xf32>
  %2 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1, %arg1 : tensor<1x5000x2xf32>, tensor<2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %15 = arith.mulf %in, %in_2 : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %3 = tensor.empty() : tensor<5000x2xi64>
  %4 = linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel"]} ins(%c0_i64 : i64) outs(%3 : tensor<5000x2xi64>) {
  ^bb0(%in: i64, %out: i64):
    linalg.yield %in : i64
  } -> tensor<5000x2xi64>
  %5 = tensor.empty() : tensor<5000x2xf32>
  %6 = linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel"]} ins(%cst_0 : f32) outs(%5 : tensor<5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<5000x2xf32>
  %7:2 = linalg.generic {indexing_maps = [#map, #map4, #map4], iterator_types = ["reduction", "parallel", "parallel"]} ins(%2 : tensor<1x5000x2xf32>) outs(%6, %4 : tensor<5000x2xf32>, tensor<5000x2xi64>) {
  ^bb0(%in: f32, %out: f32, %out_2: i64):
    %15 = arith.maximumf %in, %out : f32
    %16 = arith.cmpf ogt, %in, %out : f32
    %17 = arith.select %16, %c0_i64, %out_2 : i64
    linalg.yield %15, %17 : f32, i64
  } -> (tensor<5000x2xf32>, tensor<5000x2xi64>)
  %expanded = tensor.expand_shape %7#0 [[0, 1], [2]] output_shape [1, 5000, 2] : tensor<5000x2xf32> into tensor<1x5000x2xf32>
  %8 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%2, %expanded : tensor<1x5000x2xf32>, tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %15 = arith.subf %in, %in_2 : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %9 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8 : tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %15 = math.exp %in : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %10 = linalg.generic {indexing_maps = [#map5, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_1 : f32) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x5000x2xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map6], iterator_types = ["reduction", "parallel", "parallel"]} ins(%9 : tensor<1x5000x2xf32>) outs(%10 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %15 = arith.addf %in, %out : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %12 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9, %11 : tensor<1x5000x2xf32>, tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %in_2: f32, %out: f32):
    %15 = arith.divf %in, %in_2 : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%12 : tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %15 = math.exp %in : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13 : tensor<1x5000x2xf32>) outs(%0 : tensor<1x5000x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %15 = arith.negf %in : f32
    linalg.yield %15 : f32
  } -> tensor<1x5000x2xf32>
  return %14 : tensor<1x5000x2xf32>
}

// -----

// An index carried beside a maximum from a running value other than the
// identity (-inf) may never be replaced: no arg reduction.
func.func @arg_reduction_from_a_value(%x: tensor<4x8xf32>, %m: tensor<4xf32>) -> tensor<4xi64> {
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4xi64>
  %i = linalg.fill ins(%c0 : i64) outs(%e : tensor<4xi64>) -> tensor<4xi64>
  // expected-error @+1 {{nor the index of another output's maximum or minimum}}
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%m, %i : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %acc: f32, %idx: i64):
    %j = linalg.index 1 : index
    %k = arith.index_cast %j : index to i64
    %max = arith.maximumf %in, %acc : f32
    %gt = arith.cmpf ogt, %in, %acc : f32
    %sel = arith.select %gt, %k, %idx : i64
    linalg.yield %max, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#1 : tensor<4xi64>
}

// -----

// A window (a convolution's d0 + d1) is no strided view of the iteration
// space: reported, not formed.
func.func @window(%x: tensor<10xf32>, %k: tensor<3xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  // expected-error @+1 {{unsupported: indexing map}}
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0 + d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%x, %k : tensor<10xf32>, tensor<3xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

// Attention, softmax(mask(q k^T * scale)) v in f16 with an f32 softmax: the
// scores, the softmax and the product with v join one group, with roles
// for the conversion's flash-attention loop. The space numbers the product's
// loops last, the head dimension before the rows and the keys: the scores
// and the row statistics have only leading unit dimensions besides them.
// CHECK-LABEL: func.func @attention
// CHECK: tile.attention = "scores", tile.group = [[G:[0-9]+]] : i64, tile.space = array<i64: 1, 3, 4, 0>
// CHECK: tile.group = [[G]] : i64, tile.space = array<i64: 1, 3, 4>
// CHECK: tile.attention = "row_max", tile.group = [[G]] : i64
// CHECK: tile.group = [[G]] : i64, tile.space = array<i64: 1, 3, 4>
// CHECK: tile.attention = "row_sum", tile.group = [[G]] : i64
// CHECK: tile.attention = "normalize", tile.group = [[G]] : i64
// CHECK: tile.attention = "probs_cast", tile.group = [[G]] : i64
// CHECK: tile.attention = "output", tile.group = [[G]] : i64, tile.space = array<i64: 1, 3, 2, 4>
// A head dimension over max-head-dim: three groups.
// NARROW-LABEL: func.func @attention
// NARROW-NOT: tile.attention
// NARROW-LABEL: func.func @safe_softmax_attention
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

// Attention whose safe softmax selects 0 for the rows masked whole in f32
// and rounds to v's type after the select (SDPA with an f32 mask beside f16
// tensors): one group, the select and the rounding in either order.
// CHECK-LABEL: func.func @safe_softmax_attention
// CHECK: tile.attention = "scores", tile.group = [[G:[0-9]+]] : i64
// CHECK-DAG: tile.attention = "masked_rows", tile.group = [[G]] : i64
// CHECK-DAG: tile.attention = "zero_masked_rows", tile.group = [[G]] : i64
// CHECK-DAG: tile.attention = "probs_cast", tile.group = [[G]] : i64
// CHECK: tile.attention = "output", tile.group = [[G]] : i64
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @safe_softmax_attention(%q: tensor<4x40x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> tensor<4x40x32xf32> {
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
  // torch's safe softmax: where(all(x == -inf), 0, p), in f32, then rounded.
  %eb = tensor.empty() : tensor<4x40x100xi1>
  %inf = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x40x100xf32>) outs(%eb : tensor<4x40x100xi1>) {
  ^bb0(%a: f32, %o: i1):
    %r = arith.cmpf oeq, %a, %ninf : f32
    linalg.yield %r : i1
  } -> tensor<4x40x100xi1>
  %true = arith.constant true
  %ea = tensor.empty() : tensor<4x40xi1>
  %a0 = linalg.fill ins(%true : i1) outs(%ea : tensor<4x40xi1>) -> tensor<4x40xi1>
  %all = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%inf : tensor<4x40x100xi1>) outs(%a0 : tensor<4x40xi1>) {
  ^bb0(%a: i1, %o: i1):
    %r = arith.andi %a, %o : i1
    linalg.yield %r : i1
  } -> tensor<4x40xi1>
  %z = linalg.generic {indexing_maps = [#row3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%all, %p : tensor<4x40xi1>, tensor<4x40x100xf32>) outs(%es : tensor<4x40x100xf32>) {
  ^bb0(%c: i1, %a: f32, %o: f32):
    %r = arith.select %c, %zero, %a : f32
    linalg.yield %r : f32
  } -> tensor<4x40x100xf32>
  %eh = tensor.empty() : tensor<4x40x100xf16>
  %p16 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%z : tensor<4x40x100xf32>) outs(%eh : tensor<4x40x100xf16>) {
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

// The probabilities also leave the function: no attention kernel (the
// scores, the softmax and the product stay three groups).
// CHECK-LABEL: func.func @attention_probs_returned
// CHECK-NOT: tile.attention
// CHECK: tile.group = 2
// CHECK-NOT: tile.attention
#qk_q = affine_map<(b, m, n, k) -> (b, m, k)>
#qk_k = affine_map<(b, m, n, k) -> (b, n, k)>
#qk_s = affine_map<(b, m, n, k) -> (b, m, n)>
#id3 = affine_map<(b, m, n) -> (b, m, n)>
#row3 = affine_map<(b, m, n) -> (b, m)>
#pv_p = affine_map<(b, m, d, n) -> (b, m, n)>
#pv_v = affine_map<(b, m, d, n) -> (b, n, d)>
#pv_o = affine_map<(b, m, d, n) -> (b, m, d)>

func.func @attention_probs_returned(%q: tensor<4x40x32xf16>, %k: tensor<4x100x32xf16>, %v: tensor<4x100x32xf16>) -> (tensor<4x40x32xf32>, tensor<4x40x100xf32>) {
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
  return %o, %p : tensor<4x40x32xf32>, tensor<4x40x100xf32>
}

// -----

#r1 = affine_map<(d0) -> (d0)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// An arange that CSE shared between a mask's rows and its columns (a causal
// mask): each reader gets its own copy, which folds into it through that
// reader's reshape, so the mask is computed where it is used: one group.
// CHECK-LABEL: func.func @shared_arange
// CHECK-NOT: tensor.expand_shape
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<8x8xf32>) attrs =  {tile.group = 0 : i64
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.cmpi sle
// CHECK: arith.select
// CHECK-NOT: tile.group = 1
func.func @shared_arange(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xi64>
  %a = linalg.generic {indexing_maps = [#r1], iterator_types = ["parallel"]} outs(%e : tensor<8xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i64
    linalg.yield %c : i64
  } -> tensor<8xi64>
  %r = tensor.expand_shape %a [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %k = tensor.expand_shape %a [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %eb = tensor.empty() : tensor<8x8xi1>
  %m = linalg.generic {indexing_maps = [#col, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%k, %r : tensor<1x8xi64>, tensor<8x1xi64>) outs(%eb : tensor<8x8xi1>) {
  ^bb0(%j: i64, %i: i64, %o: i1):
    %le = arith.cmpi sle, %j, %i : i64
    linalg.yield %le : i1
  } -> tensor<8x8xi1>
  %ey = tensor.empty() : tensor<8x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %x : tensor<8x8xi1>, tensor<8x8xf32>) outs(%ey : tensor<8x8xf32>) {
  ^bb0(%b: i1, %v: f32, %o: f32):
    %s = arith.select %b, %v, %zero : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// The positions of a pooling window, one element each (arange(1) + offset),
// read along two dimensions and compared with a window length reshaped to
// 1 x 1: expanding such generics through unit reshapes and folding them back
// went on until the rewrite bound (93 unit loops). No reshape deeper than the
// function's deepest tensor is propagated.
// CHECK-LABEL: func.func @one_element_positions
// CHECK-NOT: tensor<1x1x1
// CHECK: return
#oe = affine_map<(d0) -> (d0)>
#oe1 = affine_map<(d0, d1) -> (d1)>
#oe2 = affine_map<(d0, d1) -> (d0, d1)>
#oe3 = affine_map<(d0, d1) -> (d0)>
func.func @one_element_positions(%arg0: tensor<2x2xf32>) -> tensor<1x1xf32> {
  %c2_i64 = arith.constant 2 : i64
  %c0_i64 = arith.constant 0 : i64
  %c1_i64 = arith.constant 1 : i64
  %c0 = arith.constant 0 : index
  %0 = tensor.empty() : tensor<1xi64>
  %1 = linalg.generic {indexing_maps = [#oe], iterator_types = ["parallel"]} outs(%0 : tensor<1xi64>) {
  ^bb0(%out: i64):
    linalg.yield %c0_i64 : i64
  } -> tensor<1xi64>
  %2 = linalg.generic {indexing_maps = [#oe, #oe], iterator_types = ["parallel"]} ins(%1 : tensor<1xi64>) outs(%0 : tensor<1xi64>) {
  ^bb0(%in: i64, %out: i64):
    %21 = arith.addi %in, %c2_i64 : i64
    linalg.yield %21 : i64
  } -> tensor<1xi64>
  %3 = tensor.empty() : tensor<2x1xf32>
  %4 = linalg.generic {indexing_maps = [#oe1, #oe2], iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<1xi64>) outs(%3 : tensor<2x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %21 = arith.index_cast %in : i64 to index
    %22 = linalg.index 0 : index
    %extracted = tensor.extract %arg0[%22, %21] : tensor<2x2xf32>
    linalg.yield %extracted : f32
  } -> tensor<2x1xf32>
  %5 = linalg.generic {indexing_maps = [#oe, #oe], iterator_types = ["parallel"]} ins(%1 : tensor<1xi64>) outs(%0 : tensor<1xi64>) {
  ^bb0(%in: i64, %out: i64):
    %21 = arith.addi %in, %c1_i64 : i64
    linalg.yield %21 : i64
  } -> tensor<1xi64>
  %6 = linalg.generic {indexing_maps = [#oe1, #oe2], iterator_types = ["parallel", "parallel"]} ins(%5 : tensor<1xi64>) outs(%3 : tensor<2x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %21 = arith.index_cast %in : i64 to index
    %22 = linalg.index 0 : index
    %extracted = tensor.extract %arg0[%22, %21] : tensor<2x2xf32>
    linalg.yield %extracted : f32
  } -> tensor<2x1xf32>
  %7 = tensor.empty() : tensor<2x1xi1>
  %8 = linalg.generic {indexing_maps = [#oe2, #oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%6, %4 : tensor<2x1xf32>, tensor<2x1xf32>) outs(%7 : tensor<2x1xi1>) {
  ^bb0(%in: f32, %in_0: f32, %out: i1):
    %21 = arith.cmpf ogt, %in, %in_0 : f32
    linalg.yield %21 : i1
  } -> tensor<2x1xi1>
  %9 = tensor.empty() : tensor<1xi1>
  %10 = linalg.generic {indexing_maps = [#oe, #oe], iterator_types = ["parallel"]} ins(%2 : tensor<1xi64>) outs(%9 : tensor<1xi1>) {
  ^bb0(%in: i64, %out: i1):
    %21 = arith.cmpi sgt, %in, %c1_i64 : i64
    linalg.yield %21 : i1
  } -> tensor<1xi1>
  %11 = linalg.generic {indexing_maps = [#oe2, #oe1, #oe2], iterator_types = ["parallel", "parallel"]} ins(%8, %10 : tensor<2x1xi1>, tensor<1xi1>) outs(%7 : tensor<2x1xi1>) {
  ^bb0(%in: i1, %in_0: i1, %out: i1):
    %21 = arith.andi %in, %in_0 : i1
    linalg.yield %21 : i1
  } -> tensor<2x1xi1>
  %12 = linalg.generic {indexing_maps = [#oe2, #oe2, #oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%11, %6, %4 : tensor<2x1xi1>, tensor<2x1xf32>, tensor<2x1xf32>) outs(%3 : tensor<2x1xf32>) {
  ^bb0(%in: i1, %in_0: f32, %in_1: f32, %out: f32):
    %21 = arith.select %in, %in_0, %in_1 : f32
    linalg.yield %21 : f32
  } -> tensor<2x1xf32>
  %13 = tensor.empty() : tensor<1x1xf32>
  %14 = linalg.generic {indexing_maps = [#oe3, #oe2], iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<1xi64>) outs(%13 : tensor<1x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %21 = arith.index_cast %in : i64 to index
    %extracted = tensor.extract %12[%21, %c0] : tensor<2x1xf32>
    linalg.yield %extracted : f32
  } -> tensor<1x1xf32>
  %15 = linalg.generic {indexing_maps = [#oe3, #oe2], iterator_types = ["parallel", "parallel"]} ins(%5 : tensor<1xi64>) outs(%13 : tensor<1x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %21 = arith.index_cast %in : i64 to index
    %extracted = tensor.extract %12[%21, %c0] : tensor<2x1xf32>
    linalg.yield %extracted : f32
  } -> tensor<1x1xf32>
  %16 = tensor.empty() : tensor<1x1xi1>
  %17 = linalg.generic {indexing_maps = [#oe2, #oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%15, %14 : tensor<1x1xf32>, tensor<1x1xf32>) outs(%16 : tensor<1x1xi1>) {
  ^bb0(%in: f32, %in_0: f32, %out: i1):
    %21 = arith.cmpf ogt, %in, %in_0 : f32
    linalg.yield %21 : i1
  } -> tensor<1x1xi1>
  %expanded = tensor.expand_shape %2 [[0, 1]] output_shape [1, 1] : tensor<1xi64> into tensor<1x1xi64>
  %18 = linalg.generic {indexing_maps = [#oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%expanded : tensor<1x1xi64>) outs(%16 : tensor<1x1xi1>) {
  ^bb0(%in: i64, %out: i1):
    %21 = arith.cmpi sgt, %in, %c1_i64 : i64
    linalg.yield %21 : i1
  } -> tensor<1x1xi1>
  %19 = linalg.generic {indexing_maps = [#oe2, #oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%17, %18 : tensor<1x1xi1>, tensor<1x1xi1>) outs(%16 : tensor<1x1xi1>) {
  ^bb0(%in: i1, %in_0: i1, %out: i1):
    %21 = arith.andi %in, %in_0 : i1
    linalg.yield %21 : i1
  } -> tensor<1x1xi1>
  %20 = linalg.generic {indexing_maps = [#oe2, #oe2, #oe2, #oe2], iterator_types = ["parallel", "parallel"]} ins(%19, %15, %14 : tensor<1x1xi1>, tensor<1x1xf32>, tensor<1x1xf32>) outs(%13 : tensor<1x1xf32>) {
  ^bb0(%in: i1, %in_0: f32, %in_1: f32, %out: f32):
    %21 = arith.select %in, %in_0, %in_1 : f32
    linalg.yield %21 : f32
  } -> tensor<1x1xf32>
  return %20 : tensor<1x1xf32>
}

// -----

// A sum over a broadcast dimension (x.expand(3, 6, 10).sum(0)) keeps reading
// the broadcast: folded into the sum, no operand would span the summed loop
// (it used to abort on the loops' sizes).
// CHECK-LABEL: func.func @sum_over_broadcast
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<6x10xf32>) outs(%{{.*}} : tensor<3x6x10xf32>)
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel", "parallel"]} ins(%[[B]] : tensor<3x6x10xf32>) {{.*}}tile.group
#bc = affine_map<(d0, d1, d2) -> (d1, d2)>
#bc3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @sum_over_broadcast(%arg0: tensor<6x10xf32>) -> tensor<6x10xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<3x6x10xf32>
  %1 = linalg.generic {indexing_maps = [#bc, #bc3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<6x10xf32>) outs(%0 : tensor<3x6x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<3x6x10xf32>
  %2 = tensor.empty() : tensor<6x10xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<6x10xf32>) -> tensor<6x10xf32>
  %4 = linalg.generic {indexing_maps = [#bc3, #bc], iterator_types = ["reduction", "parallel", "parallel"]} ins(%1 : tensor<3x6x10xf32>) outs(%3 : tensor<6x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    %5 = arith.addf %in, %out : f32
    linalg.yield %5 : f32
  } -> tensor<6x10xf32>
  return %4 : tensor<6x10xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// A generic of half results with two or more rounding steps (torch-mlir's
// sigmoid) computes in f32 and rounds once, where its result leaves the
// body; one with a single rounding step stays in f16.
// CHECK-LABEL: func.func @half_bodies
// CHECK: ^bb0(%[[X:.*]]: f16, %{{.*}}: f16):
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[W]] : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %[[N]] : f32
// CHECK-NEXT: %[[A:.*]] = arith.addf %[[E]], %{{.*}} : f32
// CHECK-NEXT: %[[D:.*]] = arith.divf %{{.*}}, %[[A]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.truncf %[[D]] : f32 to f16
// CHECK-NEXT: linalg.yield %[[R]] : f16
// CHECK: arith.addf %{{.*}}, %{{.*}} : f16
func.func @half_bodies(%x: tensor<37xf16>) -> (tensor<37xf16>, tensor<37xf16>) {
  %one = arith.constant 1.0 : f16
  %e = tensor.empty() : tensor<37xf16>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<37xf16>) outs(%e : tensor<37xf16>) {
  ^bb0(%a: f16, %o: f16):
    %n = arith.negf %a : f16
    %x1 = math.exp %n : f16
    %s = arith.addf %x1, %one : f16
    %r = arith.divf %one, %s : f16
    linalg.yield %r : f16
  } -> tensor<37xf16>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<37xf16>) outs(%e : tensor<37xf16>) {
  ^bb0(%a: f16, %o: f16):
    %s = arith.addf %a, %a : f16
    linalg.yield %s : f16
  } -> tensor<37xf16>
  return %0, %1 : tensor<37xf16>, tensor<37xf16>
}

// -----

// Grouped-query attention as torch-mlir writes it: each key and value head
// broadcast to its two query heads (a copy over heads x copies, collapsed),
// the keys transposed, batch matmuls over the collapsed heads, and a softmax
// whose row statistics are [rows, 1]. The ops take heads x copies apart, the
// products read k and v broadcast along the copies (no copy kernel), and the
// whole attention is one group.
// CHECK-LABEL: func.func @grouped_query_attention
// CHECK-NOT: tile.copy
// CHECK: tensor<2x2x40x100xf32>) attrs = {tile.attention = "scores", tile.group = [[G:[0-9]+]] : i64, tile.space = array<i64: 1, 2, 4, 5, 0>}
// CHECK: tensor<2x2x40x32xf32>) attrs = {tile.attention = "output", tile.group = [[G]] : i64, tile.space = array<i64: 1, 2, 4, 3, 5>}
// CHECK-NOT: tile.group = {{[0-9]+}} : i64, tile.space
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

// An op reading a group's value may add dimensions to the group (the value is
// broadcast along them), but not while it lacks some of the group's parallel
// dimensions: [8, 32] and [8, 16] crossed would compute each once per block
// of the other's. The [8, 16] op forms its own group, and the [8] value the
// two share is stored.
#v = affine_map<(d0) -> (d0)>
#outer = affine_map<(d0, d1) -> (d0, d1)>
#rowOf = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @no_crossed_dimensions
// CHECK: tile.group = 0 : i64, tile.space = array<i64: 0>}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK: tile.group = 0 : i64, tile.space = array<i64: 0, 1>}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK: tile.group = 1 : i64, tile.space = array<i64: 0, 1>}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
func.func @no_crossed_dimensions(%x: tensor<8xf32>, %a: tensor<8x32xf32>, %b: tensor<8x16xf32>) -> (tensor<8x32xf32>, tensor<8x16xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %r = math.exp %i : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %ea = tensor.empty() : tensor<8x32xf32>
  %ya = linalg.generic {indexing_maps = [#outer, #rowOf, #outer], iterator_types = ["parallel", "parallel"]}
      ins(%a, %s : tensor<8x32xf32>, tensor<8xf32>) outs(%ea : tensor<8x32xf32>) {
  ^bb0(%i: f32, %k: f32, %o: f32):
    %r = arith.mulf %i, %k : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  %eb = tensor.empty() : tensor<8x16xf32>
  %yb = linalg.generic {indexing_maps = [#outer, #rowOf, #outer], iterator_types = ["parallel", "parallel"]}
      ins(%b, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%eb : tensor<8x16xf32>) {
  ^bb0(%i: f32, %k: f32, %o: f32):
    %r = arith.addf %i, %k : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %ya, %yb : tensor<8x32xf32>, tensor<8x16xf32>
}
