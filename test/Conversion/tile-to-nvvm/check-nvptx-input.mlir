// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --check-nvptx-input | FileCheck %s

// What tileopt's lowering emits passes unchanged: pointers in NVPTX's state
// spaces, small vectors, bitcasts of one size, inline asm within its operands.
// CHECK-LABEL: llvm.func @fits
// CHECK: llvm.inline_asm
llvm.mlir.global internal @smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<64 x i8>
llvm.func @fits(%p: !llvm.ptr<1>, %v: vector<8xf16>) -> i32 {
  %s = llvm.mlir.addressof @smem : !llvm.ptr<3>
  %b = llvm.bitcast %v : vector<8xf16> to vector<4xi32>
  %r = llvm.inline_asm has_side_effects asm_dialect = att "ld.global.b32 $0, [$1]; // $$ ${1}", "=r,l,~{memory}" %p : (!llvm.ptr<1>) -> i32
  llvm.return %r : i32
}

// -----

llvm.func @operand_past_the_constraints(%p: !llvm.ptr<1>) -> i32 {
  // expected-error @+1 {{'llvm.inline_asm' op names operand $3 in its text, but its constraints "=r,l" declare 2}}
  %v = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $3;", "=r,l" %p : (!llvm.ptr<1>) -> i32
  llvm.return %v : i32
}

// -----

llvm.func @bitcast_of_another_size(%c: vector<1024xbf16>) -> vector<1xi32> {
  // expected-error @+1 {{'llvm.bitcast' op casts 'vector<1024xbf16>' (16384 bits) to 'vector<1xi32>' (32 bits): a bitcast keeps the size}}
  %b = llvm.bitcast %c : vector<1024xbf16> to vector<1xi32>
  llvm.return %b : vector<1xi32>
}

// -----

llvm.func @no_state_space(%p: !llvm.ptr<1>) -> i32 {
  // expected-error @+1 {{'llvm.addrspacecast' op has a pointer in address space 4294967295, which NVPTX has no state space for}}
  %q = llvm.addrspacecast %p : !llvm.ptr<1> to !llvm.ptr<4294967295>
  %x = llvm.load %q : !llvm.ptr<4294967295> -> i32
  llvm.return %x : i32
}

// -----

// expected-error @+1 {{'llvm.mlir.global' op has address space 2, which holds no NVPTX module variable (0, 1, 3, 4, 5)}}
llvm.mlir.global internal @two() {addr_space = 2 : i32, alignment = 16 : i64} : !llvm.array<64 x i8>

// -----

// Shared::cluster pointers exist (mapa's), variables there do not.
// expected-error @+1 {{'llvm.mlir.global' op has address space 7, which holds no NVPTX module variable}}
llvm.mlir.global external @seven() {addr_space = 7 : i32} : i32

// -----

llvm.func @huge_vector(%x: i8, %z: i64) -> i8 {
  // expected-error @+1 {{'llvm.mlir.poison' op has a vector of 2147483648 lanes, more than the 4096 NVPTX code generation takes}}
  %u = llvm.mlir.poison : vector<2147483648xi8>
  %w = llvm.insertelement %x, %u[%z : i64] : vector<2147483648xi8>
  %e = llvm.extractelement %w[%z : i64] : vector<2147483648xi8>
  llvm.return %e : i8
}
