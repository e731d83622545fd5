// fp8 (f8E4M3FN, f8E5M2) tiles: bytes in registers and memory, converted in
// pairs by cvt from sm_89 (PTX 8.1; in software before), multiplied by mma.sync
// m16n8k32 from sm_89 (PTX 8.4) and by wgmma m64nNk32 on sm_90a, on CUDA
// cores before sm_89.
// RUN: not tileopt-opt %s -split-input-file --convert-tile-to-nvvm="chip=sm_80" 2>/dev/null | FileCheck %s --check-prefix=SM80
// RUN: not tileopt-opt %s -split-input-file --convert-tile-to-nvvm="chip=sm_80" 2>&1 >/dev/null | FileCheck %s --check-prefix=SM80-ERROR
// RUN: tileopt-opt %s -split-input-file --convert-tile-to-nvvm="chip=sm_89" | FileCheck %s --check-prefix=SM89
// RUN: tileopt-opt %s -split-input-file --convert-tile-to-nvvm="chip=sm_90a tma=false" | FileCheck %s --check-prefix=WGMMA

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Widening: e4m3 pairs by cvt.rn.f16x2.e4m3x2 (the low byte to the low
// half); before sm_89 the exponent and mantissa shift into an f32 that a
// multiply by 2^120 rescales, 0x7f being NaN. Narrowing: f32 pairs by
// cvt.rn.satfinite.e5m2x2.f32, whose first source is the high byte, then
// magnitudes from 61440 on overflow to infinity (0x7c, as torch's); before
// sm_89 the f32's bits round to nearest even.
// SM89: features = "+ptx81"
// SM89-LABEL: gpu.func @convert
// SM89-COUNT-2: cvt.rn.f16x2.e4m3x2 $0, $1;
// SM89-COUNT-2: cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;
// SM89: arith.constant 6.144000e+04 : f32
// SM89: arith.constant 124 : i8
// SM80-LABEL: gpu.func @convert
// SM80-NOT: cvt.rn
// SM80: arith.constant 1.329228E+36 : f32
// SM80: llvm.inline_asm has_side_effects
tile.kernel @convert(%x: memref<?xf8E4M3FN>, %y: memref<?xf8E5M2>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf8E4M3FN> -> tensor<512xf8E4M3FN, #row>
  %f = arith.extf %a : tensor<512xf8E4M3FN, #row> to tensor<512xf32, #row>
  %b = arith.truncf %f : tensor<512xf32, #row> to tensor<512xf8E5M2, #row>
  tile.store %b, %y[%c0] : tensor<512xf8E5M2, #row>, memref<?xf8E5M2>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Integers to and from fp8 through f32 (which canonicalization may fold
// into one op): sitofp to f32, then the f32 pairs narrowed; fp8 widened to
// f16 pairs, to f32, then fptosi.
// SM89-LABEL: gpu.func @integers
// SM89: arith.sitofp {{.*}} : i32 to f32
// SM89: cvt.rn.satfinite.e4m3x2.f32
// SM89: cvt.rn.f16x2.e4m3x2
// SM89: arith.fptosi {{.*}} : f32 to i32
tile.kernel @integers(%x: memref<?xi32>, %y: memref<?xf8E4M3FN>) {
  %c0 = arith.constant 0 : index
  %i = tile.load %x[%c0] : memref<?xi32> -> tensor<512xi32, #row>
  %f = arith.sitofp %i : tensor<512xi32, #row> to tensor<512xf8E4M3FN, #row>
  tile.store %f, %y[%c0] : tensor<512xf8E4M3FN, #row>, memref<?xf8E4M3FN>
  %g = tile.load %y[%c0] : memref<?xf8E4M3FN> -> tensor<512xf8E4M3FN, #row>
  %j = arith.fptosi %g : tensor<512xf8E4M3FN, #row> to tensor<512xi32, #row>
  tile.store %j, %x[%c0] : tensor<512xi32, #row>, memref<?xi32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#acc = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>

// Before sm_89 an fp8 dot runs on CUDA cores: f32 fmas of operands widened
// in software, either format on either side.
// SM80-LABEL: gpu.func @cuda_core_dot
// SM80-NOT: mma
// SM80: arith.constant 1.329228E+36 : f32
// SM80: math.fma
tile.kernel @cuda_core_dot(%x: memref<?x?xf8E4M3FN>, %w: memref<?x?xf8E5M2>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf8E4M3FN> -> tensor<64x32xf8E4M3FN, #a>
  %b = tile.load %w[%c0, %c0] : memref<?x?xf8E5M2> -> tensor<32x64xf8E5M2, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #acc>
  %d = tile.dot %a, %b, %z : tensor<64x32xf8E4M3FN, #a>, tensor<32x64xf8E5M2, #b> -> tensor<64x64xf32, #acc>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #acc>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [2, 2]>

// An e4m3 x e5m2 dot on tensor cores: fragments as i8's (B staged K-major),
// the types named per operand; the module asks for PTX 8.4. sm_80 has no
// fp8 MMA for the given mma layout.
// SM80-ERROR: error: 'tile.dot' op has an mma accumulator layout, but sm_80 has no tensor-core dot of 64x32 by 32x64 'f8E4M3FN' ({{.*}}from sm_89, fp8 with an f32 one{{.*}})
// SM89: features = "+ptx84"
// SM89-LABEL: gpu.func @dot
// SM89-COUNT-8: mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32
tile.kernel @dot(%x: memref<?x?xf8E4M3FN>, %w: memref<?x?xf8E5M2>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf8E4M3FN> -> tensor<64x32xf8E4M3FN, #a>
  %b = tile.load %w[%c0, %c0] : memref<?x?xf8E5M2> -> tensor<32x64xf8E5M2, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf8E4M3FN, #a>, tensor<32x64xf8E5M2, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// On a warpgroup: wgmma m64n64k32 (scale-d 0: a zero accumulator) with the
// scales of A and B but no transpose flags (both operands K-major); sm_80
// refuses it, as above.
// SM80-ERROR: error: 'tile.dot' op has an mma accumulator layout, but sm_80
// WGMMA-LABEL: gpu.func @wgmma_dot
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3 {{.*}}, $32, $33, 0, 1, 1;
tile.kernel @wgmma_dot(%x: memref<?x?xf8E5M2>, %w: memref<?x?xf8E4M3FN>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf8E5M2> -> tensor<64x32xf8E5M2, #a>
  %b = tile.load %w[%c0, %c0] : memref<?x?xf8E4M3FN> -> tensor<32x64xf8E4M3FN, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf8E5M2, #a>, tensor<32x64xf8E4M3FN, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}
