// RUN: tileopt-opt %s -split-input-file --tile-narrow-integer-tiles --canonicalize | FileCheck %s

// A causal mask as kernel formation writes it: i64 positions (an iota plus a
// program's row offset, or plus a key loop's induction variable), their
// difference and a compare. The view's and the extent's 32-bit promises
// bound the offsets below 2^31 - 64 (the loop from 0 by 64 ends below the
// view's size, the row block below the extent), so every position fits in
// i32, and so does their difference: all of it is computed in i32.
// CHECK-LABEL: tile.kernel @causal_mask
// CHECK-NOT: i64>
// CHECK: %[[ROWS:.*]] = arith.addi %{{.*}}, %{{.*}} : tensor<64xi32>
// CHECK: scf.for
// CHECK: %[[KEYS:.*]] = arith.addi %{{.*}}, %{{.*}} : tensor<64xi32>
// CHECK: %[[D:.*]] = arith.subi %{{.*}}, %{{.*}} : tensor<64x64xi32>
// CHECK: arith.cmpi sle, %[[D]], %{{.*}} : tensor<64x64xi32>
// CHECK-NOT: i64>
// CHECK: tile.return
tile.kernel @causal_mask(%n: index {tile.index_bitwidth = 32},
                         %k: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32},
                         %y: memref<?x?xi8, strided<[?, 1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0> : tensor<64x64xi64>
  %pid = tile.program_id {dim = 0}
  %blocks = arith.addi %n, %c63 : index
  %nblocks = arith.divui %blocks, %c64 : index
  %block = arith.remui %pid, %nblocks : index
  %row0 = arith.muli %block, %c64 : index
  %iota = tile.iota : tensor<64xi32>
  %wide = arith.extsi %iota : tensor<64xi32> to tensor<64xi64>
  %r = arith.index_cast %row0 : index to i64
  %rs = tile.splat %r : i64 -> tensor<64xi64>
  %rows = arith.addi %wide, %rs : tensor<64xi64>
  %rows2 = tile.expand_dims %rows {axis = 1} : tensor<64xi64> -> tensor<64x1xi64>
  %rowsb = tile.broadcast %rows2 : tensor<64x1xi64> -> tensor<64x64xi64>
  %keys_n = memref.dim %k, %c1 : memref<?x?xf32, strided<[?, 1], offset: ?>>
  scf.for %kk = %c0 to %keys_n step %c64 {
    %kv = arith.index_cast %kk : index to i64
    %ks = tile.splat %kv : i64 -> tensor<64xi64>
    %keys = arith.addi %wide, %ks : tensor<64xi64>
    %keys2 = tile.expand_dims %keys {axis = 0} : tensor<64xi64> -> tensor<1x64xi64>
    %keysb = tile.broadcast %keys2 : tensor<1x64xi64> -> tensor<64x64xi64>
    %d = arith.subi %keysb, %rowsb : tensor<64x64xi64>
    %seen = arith.cmpi sle, %d, %zero : tensor<64x64xi64>
    %b = arith.extui %seen : tensor<64x64xi1> to tensor<64x64xi8>
    tile.store %b, %y[%row0, %kk] : tensor<64x64xi8>, memref<?x?xi8, strided<[?, 1], offset: ?>>
  }
  tile.return
}

// -----

// Without the extent's promise the row offset may pass 2^31: the positions
// and their difference stay i64.
// CHECK-LABEL: tile.kernel @unpromised_extent
// CHECK: arith.addi %{{.*}}, %{{.*}} : tensor<64xi64>
// CHECK: arith.subi %{{.*}}, %{{.*}} : tensor<64x64xi64>
tile.kernel @unpromised_extent(%n: index, %y: memref<?x?xi8, strided<[?, 1], offset: ?>>) {
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0> : tensor<64x64xi64>
  %pid = tile.program_id {dim = 0}
  %blocks = arith.addi %n, %c63 : index
  %nblocks = arith.divui %blocks, %c64 : index
  %block = arith.remui %pid, %nblocks : index
  %row0 = arith.muli %block, %c64 : index
  %iota = tile.iota : tensor<64xi32>
  %wide = arith.extsi %iota : tensor<64xi32> to tensor<64xi64>
  %r = arith.index_cast %row0 : index to i64
  %rs = tile.splat %r : i64 -> tensor<64xi64>
  %rows = arith.addi %wide, %rs : tensor<64xi64>
  %rows2 = tile.expand_dims %rows {axis = 1} : tensor<64xi64> -> tensor<64x1xi64>
  %rowsb = tile.broadcast %rows2 : tensor<64x1xi64> -> tensor<64x64xi64>
  %keys2 = tile.expand_dims %wide {axis = 0} : tensor<64xi64> -> tensor<1x64xi64>
  %keysb = tile.broadcast %keys2 : tensor<1x64xi64> -> tensor<64x64xi64>
  %d = arith.subi %keysb, %rowsb : tensor<64x64xi64>
  %seen = arith.cmpi sle, %d, %zero : tensor<64x64xi64>
  %b = arith.extui %seen : tensor<64x64xi1> to tensor<64x64xi8>
  tile.store %b, %y[%row0, %row0] : tensor<64x64xi8>, memref<?x?xi8, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

// Values past 2^31 stay i64 even from promised positions: a position times
// 2^20 (a flattened index).
// CHECK-LABEL: tile.kernel @too_wide
// CHECK: arith.muli %{{.*}}, %{{.*}} : tensor<64xi64>
tile.kernel @too_wide(%n: index {tile.index_bitwidth = 32}, %y: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %big = arith.constant dense<1048576> : tensor<64xi64>
  %iota = tile.iota : tensor<64xi32>
  %wide = arith.extsi %iota : tensor<64xi32> to tensor<64xi64>
  %nn = arith.index_cast %n : index to i64
  %ns = tile.splat %nn : i64 -> tensor<64xi64>
  %pos = arith.addi %wide, %ns : tensor<64xi64>
  %flat = arith.muli %pos, %big : tensor<64xi64>
  tile.store %flat, %y[%c0] : tensor<64xi64>, memref<?xi64>
  tile.return
}

// -----

// Scalar index arithmetic keeps its width, but signed divisions and
// remainders of a view's size (in [0, 2^31) by its promise) divide unsigned;
// those of an unpromised argument stay signed.
// CHECK-LABEL: tile.kernel @unsigned_divisions
// CHECK: %[[DIM:.*]] = memref.dim %arg0
// CHECK: arith.divui %[[DIM]], %c64 : index
// CHECK: arith.remui %[[DIM]], %c64 : index
// CHECK: arith.ceildivui %[[DIM]], %c64 : index
// CHECK: arith.floordivsi %arg1, %c64 : index
tile.kernel @unsigned_divisions(%k: memref<?x?xf32> {tile.index_bitwidth = 32},
                                %m: index, %y: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %k, %c1 : memref<?x?xf32>
  %a = arith.floordivsi %n, %c64 : index
  %b = arith.remsi %n, %c64 : index
  %c = arith.ceildivsi %n, %c64 : index
  %d = arith.floordivsi %m, %c64 : index
  %ai = arith.index_cast %a : index to i64
  %s = tile.splat %ai : i64 -> tensor<4xi64>
  tile.store %s, %y[%c0] : tensor<4xi64>, memref<?xi64>
  %bi = arith.index_cast %b : index to i64
  %t = tile.splat %bi : i64 -> tensor<4xi64>
  tile.store %t, %y[%c1] : tensor<4xi64>, memref<?xi64>
  %ci = arith.index_cast %c : index to i64
  %u = tile.splat %ci : i64 -> tensor<4xi64>
  tile.store %u, %y[%c2] : tensor<4xi64>, memref<?xi64>
  %di = arith.index_cast %d : index to i64
  %v = tile.splat %di : i64 -> tensor<4xi64>
  tile.store %v, %y[%c3] : tensor<4xi64>, memref<?xi64>
  tile.return
}

// -----

// Signed and unsigned ops narrow only where their operands read as the same
// numbers in 32 bits as in 64 the way the op reads them: -4..3 fits signed,
// so its signed remainder narrows, but its unsigned one does not (-2 % 7 is 0
// unsigned in i64 and 2 in i32); 0..2^32-1 fits unsigned only, so its
// unsigned quotient narrows and its signed one does not.
// CHECK-LABEL: tile.kernel @signedness
// CHECK-DAG: arith.remsi %{{.*}}, %{{.*}} : tensor<16xi32>
// CHECK-DAG: arith.remui %{{.*}}, %{{.*}} : tensor<16xi64>
// CHECK-DAG: arith.divui %{{.*}}, %{{.*}} : tensor<16xi32>
// CHECK-DAG: arith.divsi %{{.*}}, %{{.*}} : tensor<16xi64>
tile.kernel @signedness(%x: memref<?xi64, strided<[1], offset: ?>>,
                        %y: memref<?xi64, strided<[1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c48 = arith.constant 48 : index
  %seven = arith.constant dense<7> : tensor<16xi64>
  %four = arith.constant dense<4> : tensor<16xi64>
  %three = arith.constant dense<3> : tensor<16xi64>
  %low = arith.constant dense<4294967295> : tensor<16xi64>
  %v = tile.load %x[%c0] : memref<?xi64, strided<[1], offset: ?>> -> tensor<16xi64>
  %a = arith.andi %v, %seven : tensor<16xi64>
  %neg = arith.subi %a, %four : tensor<16xi64>
  %s = arith.remsi %neg, %three : tensor<16xi64>
  %u = arith.remui %neg, %seven : tensor<16xi64>
  %b = arith.andi %v, %low : tensor<16xi64>
  %q = arith.divui %b, %seven : tensor<16xi64>
  %p = arith.divsi %b, %seven : tensor<16xi64>
  tile.store %s, %y[%c0] : tensor<16xi64>, memref<?xi64, strided<[1], offset: ?>>
  tile.store %u, %y[%c16] : tensor<16xi64>, memref<?xi64, strided<[1], offset: ?>>
  tile.store %q, %y[%c32] : tensor<16xi64>, memref<?xi64, strided<[1], offset: ?>>
  tile.store %p, %y[%c48] : tensor<16xi64>, memref<?xi64, strided<[1], offset: ?>>
  tile.return
}
