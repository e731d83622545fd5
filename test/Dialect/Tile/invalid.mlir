// Every verifier of the tile dialect rejects bad IR with a message that names
// the operand and the shapes.
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'tile.kernel' op expected no results, kernel @k returns 1 value(s) of type(s) ('i32')}}
tile.kernel @k() -> i32 {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #1 has type 'tensor<4xf32>', expected a view (a strided memref of a tile element type) or a scalar (integer, index or float)}}
tile.kernel @k(%a: i32, %t: tensor<4xf32>) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0 has type 'memref<?xcomplex<f32>>'}}
tile.kernel @k(%a: memref<?xcomplex<f32>>) {
  tile.return
}

// -----

tile.kernel @k(%a: i32) {
  // expected-error @+1 {{'func.return' op expects parent op 'func.func'}}
  func.return
}

// -----

tile.kernel @k() {
  // expected-error @+1 {{'tile.program_id' op attribute 'dim' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 0 whose maximum value is 2}}
  %0 = tile.program_id {dim = 3}
  tile.return
}

// -----

tile.kernel @k() {
  // expected-error @+1 {{'tile.num_programs' op attribute 'dim' failed to satisfy constraint}}
  %0 = tile.num_programs {dim = -1}
  tile.return
}

// -----

func.func @f() {
  // expected-error @+1 {{'tile.return' op expects parent op 'tile.kernel'}}
  tile.return
}

// -----

tile.kernel @k(%x: memref<?x?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op expected 2 offset(s) for the view of rank 2 ('memref<?x?xf32>'), got 1}}
  %t = tile.load %x[%i] : memref<?x?xf32> -> tensor<64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?x?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op expected result tile of rank 2 like the view ('memref<?x?xf32>'), got 'tensor<64xf32>'}}
  %t = tile.load %x[%i, %i] : memref<?x?xf32> -> tensor<64xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op expected result tile element type 'f16' to equal the view's element type 'f32'}}
  %t = tile.load %x[%i] : memref<?xf32> -> tensor<64xf16>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op expected padding of the element type 'f32', got 0.000000e+00 : f64}}
  %t = tile.load %x[%i] {padding = 0.0 : f64} : memref<?xf32> -> tensor<64xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op expected padding to be an integer or float constant, got dense<0.000000e+00> : tensor<2xf32>}}
  %t = tile.load %x[%i] {padding = dense<0.0> : tensor<2xf32>} : memref<?xf32> -> tensor<64xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op result #0 must be tile (a static tensor with power-of-two dims of i1, i8, i16, i32, i64, f16, bf16, f32, f64, f8E4M3FN or f8E5M2), but got 'tensor<100xf32>'}}
  %t = tile.load %x[%i] : memref<?xf32> -> tensor<100xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %i: index) {
  // expected-error @+1 {{'tile.load' op result #0 must be tile}}
  %t = tile.load %x[%i] : memref<?xf32> -> tensor<?xf32>
  tile.return
}

// -----

tile.kernel @k(%x: i32, %i: index) {
  // expected-error @+1 {{'tile.load' op operand #0 must be view (a strided memref of i1, i8, i16, i32, i64, f16, bf16, f32, f64, f8E4M3FN or f8E5M2), but got 'i32'}}
  %t = "tile.load"(%x, %i) : (i32, index) -> tensor<64xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?x?xf32>, %t: f32, %i: index) {
  %v = tile.splat %t : f32 -> tensor<16x16xf32>
  // expected-error @+1 {{'tile.store' op expected 2 offset(s) for the view of rank 2 ('memref<?x?xf32>'), got 3}}
  tile.store %v, %x[%i, %i, %i] : tensor<16x16xf32>, memref<?x?xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?x?xf16>, %t: f32, %i: index) {
  %v = tile.splat %t : f32 -> tensor<16x16xf32>
  // expected-error @+1 {{'tile.store' op expected stored tile element type 'f32' to equal the view's element type 'f16'}}
  tile.store %v, %x[%i, %i] : tensor<16x16xf32>, memref<?x?xf16>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf16>, %t: f16, %i: index) {
  %v = tile.splat %t : f16 -> tensor<16xf16>
  // expected-error @+1 {{'tile.store' op adds only f32 and i32 tiles atomically, got 'f16'}}
  tile.store %v, %x[%i] {add} : tensor<16xf16>, memref<?xf16>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  // expected-error @+1 {{'tile.splat' op failed to verify that value is the element type of the result}}
  %v = "tile.splat"(%t) : (f32) -> tensor<16xf16>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  // expected-error @+1 {{'tile.splat' op result #0 must be tile}}
  %v = tile.splat %t : f32 -> tensor<3x16xf32>
  tile.return
}

// -----

tile.kernel @k() {
  // expected-error @+1 {{'tile.iota' op expected a 1-D tile of i32, got 'tensor<4x4xi32>'}}
  %v = tile.iota : tensor<4x4xi32>
  tile.return
}

// -----

tile.kernel @k() {
  // expected-error @+1 {{'tile.iota' op expected a 1-D tile of i32, got 'tensor<4xf32>'}}
  %v = tile.iota : tensor<4xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.broadcast' op expected source rank 1 (16) to equal result rank 2 (16x16)}}
  %b = tile.broadcast %v : tensor<16xf32> -> tensor<16x16xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<2x16xf32>
  // expected-error @+1 {{'tile.broadcast' op cannot broadcast dim 0 of source 2x16 (size 2) to result 8x16 (size 8): only dims of size 1 expand}}
  %b = tile.broadcast %v : tensor<2x16xf32> -> tensor<8x16xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<1x16xf32>
  // expected-error @+1 {{'tile.broadcast' op expected result element type 'f16' to equal the source's 'f32'}}
  %b = tile.broadcast %v : tensor<1x16xf32> -> tensor<8x16xf16>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.expand_dims' op expected axis in [0, 1] for a source of rank 1, got 2}}
  %b = tile.expand_dims %v {axis = 2} : tensor<16xf32> -> tensor<16x1xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.expand_dims' op expected result shape 1x16 (source 16 with a 1 at axis 0), got 16x1}}
  %b = tile.expand_dims %v {axis = 0} : tensor<16xf32> -> tensor<16x1xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.reshape' op expected the same number of elements, source 16x4 has 64 and result 128 has 128}}
  %b = tile.reshape %v : tensor<16x4xf32> -> tensor<128xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.reshape' op expected result element type 'i32' to equal the source's 'f32'}}
  %b = tile.reshape %v : tensor<16x4xf32> -> tensor<64xi32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.permute' op expected permutation to be a permutation of [0, 2), got [0, 0]}}
  %b = tile.permute %v {permutation = array<i64: 0, 0>} : tensor<16x4xf32> -> tensor<16x4xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.permute' op expected a permutation of 2 dims for a source of rank 2, got 3}}
  %b = tile.permute %v {permutation = array<i64: 0, 1, 2>} : tensor<16x4xf32> -> tensor<16x4xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.permute' op expected result shape 4x16 (source 16x4 permuted by [1, 0]), got 16x4}}
  %b = tile.permute %v {permutation = array<i64: 1, 0>} : tensor<16x4xf32> -> tensor<16x4xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.reduce' op expected axis in [0, 2) for operands of shape 16x4, got 2}}
  %r = tile.reduce %v {axis = 2} : tensor<16x4xf32> -> tensor<16xf32> {
  ^bb0(%a: f32, %b: f32):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32, %i: i32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  %w = tile.splat %i : i32 -> tensor<16x8xi32>
  // expected-error @+1 {{'tile.reduce' op expected operands of one shape, operand #1 is 16x8 but operand #0 is 16x4}}
  %r:2 = tile.reduce %v, %w {axis = 1} : tensor<16x4xf32>, tensor<16x8xi32> -> tensor<16xf32>, tensor<16xi32> {
  ^bb0(%a: f32, %ai: i32, %b: f32, %bi: i32):
    tile.yield %a, %ai : f32, i32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16x4xf32>
  // expected-error @+1 {{'tile.reduce' op expected result #0 to be 'tensor<4xf32>' (operand shape 16x4 without axis 0), got 'tensor<16xf32>'}}
  %r = tile.reduce %v {axis = 0} : tensor<16x4xf32> -> tensor<16xf32> {
  ^bb0(%a: f32, %b: f32):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.reduce' op expected result #0 to be 'f32' (operand shape 16 without axis 0), got 'f16'}}
  %r = tile.reduce %v {axis = 0} : tensor<16xf32> -> f16 {
  ^bb0(%a: f32, %b: f32):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.reduce' op expected 1 result(s), one per operand, got 2}}
  %r:2 = tile.reduce %v {axis = 0} : tensor<16xf32> -> f32, f32 {
  ^bb0(%a: f32, %b: f32):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.reduce' op expected the combiner to take 2 scalar arguments (2 per operand), got 3}}
  %r = tile.reduce %v {axis = 0} : tensor<16xf32> -> f32 {
  ^bb0(%a: f32, %b: f32, %c: f32):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  // expected-error @+1 {{'tile.reduce' op expected combiner argument #1 to have type 'f32', got 'f16'}}
  %r = tile.reduce %v {axis = 0} : tensor<16xf32> -> f32 {
  ^bb0(%a: f32, %b: f16):
    tile.yield %a : f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  %r = tile.reduce %v {axis = 0} : tensor<16xf32> -> f32 {
  ^bb0(%a: f32, %b: f32):
    // expected-error @+1 {{'tile.yield' op expected 1 yielded value(s), one per operand, got 2}}
    tile.yield %a, %b : f32, f32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f32, %i: i32) {
  %v = tile.splat %t : f32 -> tensor<16xf32>
  %r = tile.reduce %v {axis = 0} : tensor<16xf32> -> f32 {
  ^bb0(%a: f32, %b: f32):
    // expected-error @+1 {{'tile.yield' op expected yielded value #0 to have type 'f32', got 'i32'}}
    tile.yield %i : i32
  }
  tile.return
}

// -----

tile.kernel @k(%t: f16) {
  %a = tile.splat %t : f16 -> tensor<64x32xf16>
  %b = tile.splat %t : f16 -> tensor<16x64xf16>
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  // expected-error @+1 {{'tile.dot' op expected K of lhs (32) to equal K of rhs (16)}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f16) {
  %a = tile.splat %t : f16 -> tensor<64x32xf16>
  %b = tile.splat %t : f16 -> tensor<32x64xf16>
  %c = arith.constant dense<0.0> : tensor<64x32xf32>
  // expected-error @+1 {{'tile.dot' op expected acc of shape 64x64 (M of lhs x N of rhs), got 64x32}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x32xf32>
  tile.return
}

// -----

tile.kernel @k(%t: f16, %s: bf16) {
  %a = tile.splat %t : f16 -> tensor<64x32xf16>
  %b = tile.splat %s : bf16 -> tensor<32x64xbf16>
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  // expected-error @+1 {{'tile.dot' op expected lhs and rhs of one element type, got 'f16' and 'bf16'}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x64xbf16> -> tensor<64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%t: i8) {
  %a = tile.splat %t : i8 -> tensor<64x32xi8>
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  %b = tile.splat %t : i8 -> tensor<32x64xi8>
  // expected-error @+1 {{'tile.dot' op expected an i32 accumulator with i8 inputs, got 'f32'}}
  %d = tile.dot %a, %b, %c : tensor<64x32xi8>, tensor<32x64xi8> -> tensor<64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%t: i16) {
  %a = tile.splat %t : i16 -> tensor<64x32xi16>
  %c = arith.constant dense<0> : tensor<64x64xi32>
  %b = tile.splat %t : i16 -> tensor<32x64xi16>
  // expected-error @+1 {{'tile.dot' op expected f16, bf16, f32, i8, f8E4M3FN or f8E5M2 inputs, got 'i16'}}
  %d = tile.dot %a, %b, %c : tensor<64x32xi16>, tensor<32x64xi16> -> tensor<64x64xi32>
  tile.return
}

// -----

tile.kernel @k(%s: bf16) {
  %a = tile.splat %s : bf16 -> tensor<64x64xbf16>
  %c = arith.constant dense<0.0> : tensor<64x64xf16>
  // expected-error @+1 {{'tile.dot' op expected an f32 accumulator (or f16 with f16 inputs), got 'f16' with 'bf16' inputs}}
  %d = tile.dot %a, %a, %c : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf16>
  tile.return
}

// -----

tile.kernel @k(%s: f16) {
  %a = tile.splat %s : f16 -> tensor<64x64xf16>
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  // expected-error @+1 {{'tile.dot' op input_precision = tf32 applies to f32 inputs, got 'f16'}}
  %d = tile.dot %a, %a, %c input_precision = tf32 : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  %a = tile.splat %s : f32 -> tensor<2x64x64xf32>
  %c = arith.constant dense<0.0> : tensor<2x64x64xf32>
  // expected-error @+1 {{'tile.dot' op expected lhs to be a 2-D tile, got 'tensor<2x64x64xf32>'}}
  %d = tile.dot %a, %a, %c : tensor<2x64x64xf32>, tensor<2x64x64xf32> -> tensor<2x64x64xf32>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  %a = tile.splat %s : f32 -> tensor<64x64xf32>
  %c = arith.constant dense<0.0> : tensor<64x64xf16>
  // expected-error @+1 {{'tile.dot' op failed to verify that all of {acc, result} have same type}}
  %d = "tile.dot"(%a, %a, %c) : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf16>) -> tensor<64x64xf32>
  tile.return
}

// -----

func.func @host(%g: index) {
  // expected-error @+1 {{'tile.launch' op '@missing' does not reference a tile.kernel}}
  tile.launch @missing grid(%g) ()
  return
}

// -----

func.func @other() {
  return
}
func.func @host(%g: index) {
  // expected-error @+1 {{'tile.launch' op '@other' does not reference a tile.kernel}}
  tile.launch @other grid(%g) ()
  return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %n: i32) {
  tile.return
}
func.func @host(%g: index, %x: memref<?xf32>) {
  // expected-error @+1 {{'tile.launch' op kernel @k takes 2 argument(s), launch passes 1}}
  tile.launch @k grid(%g) (%x) : memref<?xf32>
  return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %n: i32) {
  tile.return
}
func.func @host(%g: index, %x: memref<?xf16>, %n: i32) {
  // expected-error @+1 {{'tile.launch' op argument #0 has type 'memref<?xf16>' but kernel @k expects 'memref<?xf32>'}}
  tile.launch @k grid(%g) (%x, %n) : memref<?xf16>, i32
  return
}

// -----

tile.kernel @k(%n: i32) {
  tile.return
}
func.func @host(%g: index, %n: i64) {
  // expected-error @+1 {{'tile.launch' op argument #0 has type 'i64' but kernel @k expects 'i32'}}
  tile.launch @k grid(%g) (%n) : i64
  return
}

// -----

tile.kernel @k() {
  tile.return
}
func.func @host(%g: index) {
  // expected-error @+1 {{'tile.launch' op expected 1 to 3 grid sizes, got 4}}
  tile.launch @k grid(%g, %g, %g, %g) ()
  return
}

// -----

tile.kernel @k() {
  tile.return
}
func.func @host() {
  // expected-error @+1 {{'tile.launch' op expected 1 to 3 grid sizes, got 0}}
  tile.launch @k grid() ()
  return
}

// -----

tile.kernel @k(%g: index) {
  // expected-error @+1 {{'tile.launch' op launches a kernel from inside a tile.kernel; launches belong in host functions}}
  tile.launch @k grid(%g) (%g) : index
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.divisibility must be a positive power of two (bytes) on a view, got 12 : i64}}
tile.kernel @k(%x: memref<?xf32> {tile.divisibility = 12}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #1: tile.divisibility must be a positive power of two (bytes) on a view, got 16 : i64}}
tile.kernel @k(%x: memref<?xf32>, %n: i32 {tile.divisibility = 16}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.size_divisibility must be an array<i64> of positive integers, one per dimension of a view, got array<i64: 16>}}
tile.kernel @k(%x: memref<?x?xf32> {tile.size_divisibility = array<i64: 16>}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.size_divisibility must be an array<i64> of positive integers, one per dimension of a view, got array<i64: 0>}}
tile.kernel @k(%x: memref<?xf32> {tile.size_divisibility = array<i64: 0>}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.size_divisibility must be an array<i64> of positive integers, one per dimension of a view, got 16 : i64}}
tile.kernel @k(%n: index {tile.size_divisibility = 16}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.index_bitwidth must be 32 or 64 on a view or an integer argument, got 16 : i64}}
tile.kernel @k(%x: memref<?xf32> {tile.index_bitwidth = 16}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.index_bitwidth must be 32 or 64 on a view or an integer argument, got 32 : i64}}
tile.kernel @k(%x: f32 {tile.index_bitwidth = 32}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #1: tile.same_shape_as must name another view argument of the same rank that has no such promise itself, got 0 : i64}}
tile.kernel @k(%x: memref<?x?xf32>, %y: memref<?xf32> {tile.same_shape_as = 0}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.same_shape_as must name another view argument of the same rank that has no such promise itself, got 0 : i64}}
tile.kernel @k(%x: memref<?xf32> {tile.same_shape_as = 0}) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #1: tile.same_shape_as must name another view argument of the same rank that has no such promise itself, got 0 : i64}}
tile.kernel @k(%x: memref<?xf32> {tile.same_shape_as = 2}, %y: memref<?xf32> {tile.same_shape_as = 0}, %z: memref<?xf32>) {
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op argument #0: tile.same_shape_as must name another view argument of the same rank that has no such promise itself, got 3 : i64}}
tile.kernel @k(%x: memref<?xf32> {tile.same_shape_as = 3}, %n: index) {
  tile.return
}

// -----

// A layout must have the rank of the tile it encodes (every pass relies on it).
#b1 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
tile.kernel @k(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{expected a layout of rank 2 for a tile of shape [32, 32], got a layout of rank 1}}
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<32x32xf32, #b1>
  tile.return
}

// -----

#b2 = #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected a layout of rank 1 for a tile of shape [32], got a layout of rank 0: #tile.slice<dim = 0, parent = #tile.slice}}
  %t = tile.splat %s : f32 -> tensor<32xf32, #tile.slice<dim = 0, parent = #tile.slice<dim = 0, parent = #b2>>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected a layout of rank 1 for a tile of shape [64], got a layout of rank 2: #tile.mma<warpsPerCTA = [2, 2]>}}
  %t = tile.splat %s : f32 -> tensor<64xf32, #tile.mma<warpsPerCTA = [2, 2]>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected size 1 in the leading dimensions of a tile with an mma layout, got a tile of shape [2, 64, 64]}}
  %t = tile.splat %s : f32 -> tensor<2x64x64xf32, #tile.mma<warpsPerCTA = [1, 2, 2]>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected 1 warp along each leading dimension of an mma layout}}
  %t = tile.splat %s : f32 -> tensor<1x64x64xf32, #tile.mma<warpsPerCTA = [2, 2, 1]>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected a power of two in [8, 1048576] as blockN, got 24}}
  %t = tile.splat %s : f32 -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2], blockN = 24>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected a power of two in [8, 1048576] as blockN, got 4}}
  %t = tile.splat %s : f32 -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [2, 2], blockN = 4>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected warpsPerCTA to multiply to at most 32, got 64}}
  %t = tile.splat %s : f32 -> tensor<64x64xf32, #tile.mma<warpsPerCTA = [8, 8]>>
  tile.return
}

// -----

// Huge entries saturate the product instead of wrapping it to 0 (a division
// by zero later).
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected warpsPerCTA to multiply to at most 32, got 1099511627776}}
  %t = tile.splat %s : f32 -> tensor<4x256xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [2147483648, 2147483648], order = [1, 0]>>
  tile.return
}

// -----

tile.kernel @k(%s: f32) {
  // expected-error @+1 {{expected sizePerThread to multiply to at most 1048576, got 2147483648}}
  %t = tile.splat %s : f32 -> tensor<256xf32, #tile.blocked<sizePerThread = [2147483648], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>>
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op tile.num_warps must be a power of two in [1, 32], got 3 : i32}}
tile.kernel @k() attributes {tile.num_warps = 3 : i32} {
  tile.return
}

// -----

// Layouts for more warps than the program has would leave part of the tile
// without an owner.
#w8 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [8], order = [0]>
tile.kernel @k(%s: f32) attributes {tile.num_warps = 4 : i32} {
  // expected-error @+1 {{'tile.splat' op result #0 has a layout for 8 warps, more than the kernel's tile.num_warps (4)}}
  %t = tile.splat %s : f32 -> tensor<256xf32, #w8>
  tile.return
}

// -----

// Tiles hold at most 2^20 elements (Triton's limit).
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 2097152 elements (2048x1024), more than the limit of 1048576 (2^20) elements per tile; use smaller tiles}}
  %t = tile.splat %s : f32 -> tensor<2048x1024xf32>
  tile.return
}

// -----

// A tile whose layout gives a thread more elements than it has registers.
#one = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 16384 'f32' elements (16384) whose layout #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]> gives each thread 512 of them (512 32-bit registers, replicas included), more than the 255 registers a thread has; use smaller tiles, more warps or a layout that repeats the tile less}}
  %t = tile.splat %s : f32 -> tensor<16384xf32, #one>
  tile.return
}

// -----

// 16-bit elements count two a register (the lowering moves them in words):
// 512 halves a thread need 256 registers; 256 (128 registers) would fit.
// Bools and bytes count as 16 bits, not packed tighter.
#one = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>
tile.kernel @k(%s: f16) {
  %fits = tile.splat %s : f16 -> tensor<8192xf16, #one>
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 16384 'f16' elements (16384) whose layout #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]> gives each thread 512 of them (256 32-bit registers, replicas included)}}
  %t = tile.splat %s : f16 -> tensor<16384xf16, #one>
  tile.return
}

// -----

#one = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>
tile.kernel @k(%b: i1) {
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 16384 'i1' elements (16384) whose layout #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]> gives each thread 512 of them (256 32-bit registers, replicas included)}}
  %t = tile.splat %b : i1 -> tensor<16384xi1, #one>
  tile.return
}

// -----

// Replicas count: 16 rows of lanes on a one-row tile repeat it 16 times, so
// each thread holds 2048 of its 4096 elements, not 4096 / 32 (compiling it
// took minutes).
#rows16 = #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 1], order = [1, 0]>
tile.kernel @k(%s: f16) {
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 4096 'f16' elements (1x4096) whose layout #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 1], order = [1, 0]> gives each thread 2048 of them}}
  %t = tile.splat %s : f16 -> tensor<1x4096xf16, #rows16>
  tile.return
}

// -----

// A thread's elements wider than the tile repeat it (the lowering would
// enumerate 2^20 registers).
#wide = #tile.blocked<sizePerThread = [1048576], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{gives each thread 1048576 of them (1048576 32-bit registers, replicas included)}}
  %t = tile.splat %s : f32 -> tensor<512xf32, #wide>
  tile.return
}

// -----

// An mma layout's blocks far wider than the tile: its registers wrap onto
// few elements, but the compiler would enumerate them all first.
#m = #tile.mma<warpsPerCTA = [2, 2], blockN = 1048576>
tile.kernel @k(%s: f32) {
  // expected-error @+1 {{'tile.splat' op result #0 is a tile of 8192 'f32' elements (2x4096) whose layout #tile.mma<warpsPerCTA = [2, 2], blockN = 1048576> enumerates 524288 registers per thread (before those that wrap onto the same element merge), more than the 16384 the compiler enumerates; use a layout that fits the tile}}
  %t = tile.splat %s : f32 -> tensor<2x4096xf32, #m>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'memref.dim' op index 1 is out of range for a memref of rank 1}}
  %d = memref.dim %x, %c1 : memref<?xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>) {
  %cm1 = arith.constant -1 : index
  // expected-error @+1 {{'memref.dim' op index -1 is out of range for a memref of rank 1}}
  %d = memref.dim %x, %cm1 : memref<?xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?x?xf32>, %s: i64) {
  %i = tile.splat %s : i64 -> tensor<8xi64>
  // expected-error @+1 {{'tile.gather' op expected one index tile per dimension of the view (2), got 1}}
  %t = tile.gather %x[%i] : memref<?x?xf32>, tensor<8xi64> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %s: i64) {
  %i = tile.splat %s : i64 -> tensor<4xi64>
  // expected-error @+1 {{'tile.gather' op expected index tile #0 of the result's shape 8, got 4}}
  %t = tile.gather %x[%i] : memref<?xf32>, tensor<4xi64> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %s: f32) {
  %i = tile.splat %s : f32 -> tensor<8xf32>
  // expected-error @+1 {{'tile.gather' op expected index tile #0 of i32 or i64, got 'f32'}}
  %t = tile.gather %x[%i] : memref<?xf32>, tensor<8xf32> -> tensor<8xf32>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf32>, %s: i32) {
  %i = tile.splat %s : i32 -> tensor<8xi32>
  // expected-error @+1 {{'tile.gather' op expected the result's element type to be the view's ('f32'), got 'f16'}}
  %t = tile.gather %x[%i] : memref<?xf32>, tensor<8xi32> -> tensor<8xf16>
  tile.return
}

// -----

// A name used before a malformed combiner that defines it: the generated
// parser destroyed the region while the use remained (MLIR aborted).
tile.kernel @k(%x: memref<?xi32>) {
  tile.yield %r : i32
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xi32> -> tensor<4xi32>
  %s = tile.reduce %t {axis = 0} : tensor<4xi32> -> tensor<i32> {
    %r = arith.minsi %a, %b : i32
  ^bb0(%a: i32, %b: i32):
// expected-error @+1 {{expected operation name in quotes}}
}

// -----

tile.kernel @k(%x: memref<?xf8E4M3FN>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf8E4M3FN> -> tensor<128xf8E4M3FN>
  // expected-error @+1 {{'arith.addf' op computes on 'f8E4M3FN' values, which support only loads, stores, moves, conversions (arith.extf, arith.truncf, to and from integers), arith.select and tile.dot; convert them to f16 or f32 first}}
  %b = arith.addf %a, %a : tensor<128xf8E4M3FN>
  tile.store %b, %x[%c0] : tensor<128xf8E4M3FN>, memref<?xf8E4M3FN>
  tile.return
}

// -----

tile.kernel @k(%x: memref<?xf8E5M2>, %y: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf8E5M2> -> tensor<128xf8E5M2>
  // expected-error @+1 {{'arith.cmpf' op computes on 'f8E5M2' values}}
  %b = arith.cmpf olt, %a, %a : tensor<128xf8E5M2>
  tile.store %b, %y[%c0] : tensor<128xi1>, memref<?xi1>
  tile.return
}

// -----

tile.kernel @k(%t: f8E4M3FN) {
  %a = tile.splat %t : f8E4M3FN -> tensor<64x32xf8E4M3FN>
  %b = tile.splat %t : f8E4M3FN -> tensor<32x64xf8E4M3FN>
  %c = arith.constant dense<0.0> : tensor<64x64xf16>
  // expected-error @+1 {{'tile.dot' op expected an f32 accumulator with fp8 inputs, got 'f16'}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN> -> tensor<64x64xf16>
  tile.return
}

// -----

tile.kernel @k(%t: f8E4M3FN, %h: f16) {
  %a = tile.splat %t : f8E4M3FN -> tensor<64x32xf8E4M3FN>
  %b = tile.splat %h : f16 -> tensor<32x64xf16>
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  // expected-error @+1 {{'tile.dot' op expected lhs and rhs of one element type, got 'f8E4M3FN' and 'f16'}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf8E4M3FN>, tensor<32x64xf16> -> tensor<64x64xf32>
  tile.return
}
