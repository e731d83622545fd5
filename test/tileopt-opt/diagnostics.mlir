// Malformed input gives a located diagnostic and a non-zero exit, never a
// crash: `not` fails on a crash or abort.
// RUN: split-file %s %t
// RUN: not tileopt-opt %t/syntax.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not tileopt-opt %t/unknown-op.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not tileopt-opt %t/verifier.mlir 2>&1 | FileCheck %s --check-prefix=VERIFIER
// RUN: not tileopt-opt %t/verifier.mlir --canonicalize 2>&1 | FileCheck %s --check-prefix=VERIFIER
// RUN: not tileopt-opt %t/ok.mlir --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: not tileopt-opt %t/ok.mlir --pass-pipeline='builtin.module(func.func(canonicalize' 2>&1 | FileCheck %s --check-prefix=PIPELINE-SYNTAX
// RUN: not tileopt-opt %t/generic.mlir 2>&1 | FileCheck %s --check-prefix=GENERIC
// RUN: tileopt-opt %t/ok.mlir --canonicalize --cse | FileCheck %s --check-prefix=OK
// RUN: not tileopt-opt %t/ok.mlir --convert-tile-to-nvvm="max-registers=8" 2>&1 | FileCheck %s --check-prefix=MAX-REGISTERS
// RUN: not tileopt-opt %t/index-array.mlir 2>&1 | FileCheck %s --check-prefix=INDEX-ARRAY
// RUN: not tileopt-opt %t/missing.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not tileopt-opt %t/huge-vector.mlir 2>&1 | FileCheck %s --check-prefix=HUGE-VECTOR

//--- syntax.mlir
tile.kernel @k(%x: memref<?xf32>) {
  %t = tile.load %x[ : memref<?xf32> -> tensor<4xf32>
  tile.return
}
// SYNTAX: syntax.mlir:2:21: error:

//--- unknown-op.mlir
tile.kernel @k() {
  tile.frobnicate
  tile.return
}
// UNKNOWN: unknown-op.mlir:2:3: error: custom op 'tile.frobnicate' is unknown

//--- verifier.mlir
tile.kernel @k(%s: f32) {
  %a = tile.splat %s : f32 -> tensor<16x16xf32>
  %b = tile.permute %a {permutation = array<i64: 1, 1>} : tensor<16x16xf32> -> tensor<16x16xf32>
  tile.return
}
// VERIFIER: verifier.mlir:3:8: error: 'tile.permute' op expected permutation to be a permutation of [0, 2), got [1, 1]

//--- generic.mlir
"tile.kernel"() ({
^bb0(%a: f32):
  "tile.return"() : () -> ()
}) {function_type = (f32, f32) -> (), sym_name = "k"} : () -> ()
// GENERIC: generic.mlir:1:1: error: 'tile.kernel' op entry block must have 2 arguments to match function signature

//--- huge-vector.mlir
// The LLVM dialect counts an i1 vector's lanes in 32 bits (VectorType::get
// asserts on the 0 that 2^32 becomes): refused before parsing.
llvm.func @f(%a: vector<4294967296xf32>) {
  %c = llvm.fcmp "olt" %a, %a : vector<4294967296xf32>
  llvm.return
}
// HUGE-VECTOR: huge-vector.mlir:3:18: error: vectors of 2^32 or more lanes abort MLIR 22's LLVM dialect

//--- index-array.mlir
// MLIR 22's parser asserts on index-typed dense arrays: refused before parsing.
func.func @f() attributes {a = array<index: 1, 2>} {
  return
}
// INDEX-ARRAY: index-array.mlir:2:32: error: array<index: ...> attributes abort MLIR 22's parser; write array<i64: ...> instead

// MISSING: cannot open input file '{{.*}}missing.mlir'

//--- ok.mlir
tile.kernel @k(%x: memref<?xf32>) {
  tile.return
}
// PIPELINE: no-such-pass
// PIPELINE-SYNTAX: error
// OK: tile.kernel @k
// MAX-REGISTERS: error: max-registers must be 0 (ptxas's choice) or 24 to 255, got 8
