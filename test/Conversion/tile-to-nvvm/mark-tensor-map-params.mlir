// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --mark-tensor-map-params | FileCheck %s

// The last parameters, one per tensor map, become 128-byte by-value grid
// constants; the others keep their attributes.
// CHECK-LABEL: llvm.func @two_maps(
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr<1> {llvm.noalias},
// CHECK-SAME: %{{[a-z0-9]+}}: i64,
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
llvm.func @two_maps(%x: !llvm.ptr<1> {llvm.noalias}, %n: i64, %a: !llvm.ptr, %b: !llvm.ptr) attributes {nvvm.kernel, tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 0 : i64}]} {
  llvm.return
}

// A function without tensor maps is left alone.
// CHECK-LABEL: llvm.func @no_maps(
// CHECK-SAME: %{{[a-z0-9]+}}: !llvm.ptr) attributes
llvm.func @no_maps(%a: !llvm.ptr) attributes {nvvm.kernel} {
  llvm.return
}

// -----

// expected-error @below {{'llvm.func' op has 2 tensor maps (tile.tensor_maps) but only 1 parameters}}
llvm.func @too_few(%a: !llvm.ptr) attributes {nvvm.kernel, tile.tensor_maps = [{box = array<i64: 8>, swizzle = 0 : i64, view = 0 : i64}, {box = array<i64: 8>, swizzle = 0 : i64, view = 0 : i64}]} {
  llvm.return
}

// -----

// expected-error @below {{'llvm.func' op tensor-map parameter 1 is not a pointer: 'i64'}}
llvm.func @not_a_pointer(%a: !llvm.ptr, %n: i64) attributes {nvvm.kernel, tile.tensor_maps = [{box = array<i64: 8>, swizzle = 0 : i64, view = 0 : i64}]} {
  llvm.return
}
