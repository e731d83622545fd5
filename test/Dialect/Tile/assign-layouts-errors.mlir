// tile-assign-layouts refuses what no layout of num-warps warps can hold.
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --tile-assign-layouts=num-warps=1

tile.kernel @registers(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.load' op result #0 is a tile of 16384 'f32' elements (16384) that needs at least 512 32-bit registers per thread on 1 warp(s) (32 threads), more than the 255 a thread has; use smaller tiles or more warps}}
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<16384xf32>
  tile.store %t, %x[%c0] : tensor<16384xf32>, memref<?xf32>
  tile.return
}

// -----

// expected-error @+1 {{'tile.kernel' op is laid out for 4 warps, not the 1 of tile-assign-layouts}}
tile.kernel @relaid(%x: memref<?xf32>) attributes {tile.num_warps = 4 : i32} {
  tile.return
}

// -----

// Out of range anywhere in the module (upstream canonicalization patterns
// assert on it later in the pipeline).
tile.kernel @k(%x: memref<?xf32>) {
  tile.return
}
func.func @host(%x: memref<?xf32>) -> index {
  %c = arith.constant -1 : index
  // expected-error @+1 {{'memref.dim' op index -1 is out of range for a memref of rank 1}}
  %d = memref.dim %x, %c : memref<?xf32>
  return %d : index
}
