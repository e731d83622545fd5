// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_80" | FileCheck %s
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_80 fp-fusion=false" | FileCheck %s --check-prefix=NOFUSE
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_90a tma=false" | FileCheck %s --check-prefix=WGMMA
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefix=TMA
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_90a warp-specialize=true" | FileCheck %s --check-prefix=WS
// RUN: tileopt-opt %s -split-input-file -verify-diagnostics --convert-tile-to-nvvm="chip=sm_90a max-registers=96" | FileCheck %s --check-prefix=MAXREG

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// The kernel ABI: a view is a global pointer to its first element, then
// sizes and strides (i64); 4 warps make a 128-thread block. Loads are 16-byte predicated PTX
// when the view is aligned (a uniform run-time check), else scalar; a run
// across the end of the view falls back to scalar accesses.
// CHECK-LABEL: gpu.module @tileopt_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// CHECK: gpu.func @add(%[[X:.*]]: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr<1>, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32) kernel attributes {nvvm.reqntid = array<i32: 128>
// CHECK: nvvm.read.ptx.sreg.tid.x
// CHECK: gpu.block_id {{ *}}x
// CHECK: scf.if %{{.*}} -> (vector<8xf32>)
// CHECK: llvm.inline_asm has_side_effects {{.*}}@$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];
// CHECK: scf.if
// CHECK: @$2 ld.global.b32 $0, [$1];
// CHECK: } else {
// CHECK: @$2 ld.global.b32 $0, [$1];
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: "@$1 st.global.v4.b32 [$0], {$2, $3, $4, $5};"
// CHECK: gpu.return
gpu.module @unused {}
tile.kernel @add(%x: memref<?xf32, strided<[1], offset: ?>>, %y: memref<?xf32, strided<[1], offset: ?>>, %s: f32) {
  %pid = tile.program_id {dim = 0}
  %c1024 = arith.constant 1024 : index
  %off = arith.muli %pid, %c1024 : index
  %a = tile.load %x[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<1024xf32, #row>
  %v = tile.splat %s : f32 -> tensor<1024xf32, #row>
  %r = arith.mulf %a, %v : tensor<1024xf32, #row>
  tile.store %r, %y[%off] : tensor<1024xf32, #row>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>
#s = #tile.slice<dim = 1, parent = #b>

// A row reduction: registers, then five butterfly shuffles, then shared
// memory across the four warps. (Aligned views: no scalar fallback, whose
// staging would need shared memory too.)
// CHECK-LABEL: gpu.module @tileopt_kernels
// CHECK: llvm.mlir.global internal @rowmax_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<16 x i8>
// CHECK: gpu.func @rowmax({{.*}}tile.shared_bytes = 16 : i64
// The first user of shared memory needs no barrier before its stores.
// CHECK-COUNT-5: nvvm.shfl.sync bfly
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
tile.kernel @rowmax(%x: memref<?x?xf32> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<1x512xf32, #b>
  %m = tile.reduce %t {axis = 1} : tensor<1x512xf32, #b> -> tensor<1xf32, #s> {
  ^bb0(%l: f32, %r: f32):
    %q = arith.maximumf %l, %r : f32
    tile.yield %q : f32
  }
  %e = tile.expand_dims %m {axis = 1} : tensor<1xf32, #s> -> tensor<1x1xf32, #b>
  %bb = tile.broadcast %e : tensor<1x1xf32, #b> -> tensor<1x512xf32, #b>
  tile.store %bb, %y[%c0, %c0] : tensor<1x512xf32, #b>, memref<?x?xf32>
  tile.return
}

// -----

#r = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#c = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [16, 2], warpsPerCTA = [1, 4], order = [0, 1]>

// A layout conversion goes through padded shared memory (32 x 33 floats).
// CHECK-LABEL: gpu.module @tileopt_kernels
// CHECK: llvm.mlir.global internal @convert_smem() {{.*}} : !llvm.array<4224 x i8>
// CHECK: gpu.func @convert
// CHECK: nvvm.barrier0
// CHECK-COUNT-8: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-8: llvm.load {{.*}} !llvm.ptr<3>
tile.kernel @convert(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<32x32xf32, #r>
  %u = tile.convert_layout %t : tensor<32x32xf32, #r> -> tensor<32x32xf32, #c>
  tile.store %u, %x[%c0, %c0] : tensor<32x32xf32, #c>, memref<?x?xf32>
  tile.return
}

// -----

#r = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#c = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>

// restageLayout: #c stores down the columns one float at a time, #r loads
// 16-byte row vectors. An XOR swizzle of 4-float groups keeps both free of
// bank conflicts without padding (32 x 32 floats, not 32 x 33, which would
// also cost #r its vectors): eight scalar stores, one barrier (nothing used
// shared memory before), two vector loads, each at an XOR-ed column.
// CHECK-LABEL: gpu.module @tileopt_kernels
// CHECK: llvm.mlir.global internal @swizzled_convert_smem() {{.*}} : !llvm.array<4096 x i8>
// CHECK: gpu.func @swizzled_convert
// CHECK: arith.xori {{.*}} : i32
// CHECK-COUNT-8: llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK-NEXT: nvvm.barrier0
// CHECK: arith.xori {{.*}} : i32
// CHECK: llvm.load {{.*}} -> vector<4xf32>
// CHECK: arith.xori {{.*}} : i32
// CHECK: llvm.load {{.*}} -> vector<4xf32>
// CHECK-NOT: llvm.load {{.*}}!llvm.ptr<3>
tile.kernel @swizzled_convert(%x: memref<?x?xf32, strided<[1, ?]>> {tile.divisibility = 16}, %z: memref<?x?xf32, strided<[?, 1]>> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[1, ?]>> -> tensor<32x32xf32, #c>
  %u = tile.convert_layout %t : tensor<32x32xf32, #c> -> tensor<32x32xf32, #r>
  tile.store %u, %z[%c0, %c0] : tensor<32x32xf32, #r>, memref<?x?xf32, strided<[?, 1]>>
  tile.return
}

// -----

#r = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#c = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>
#flat = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// planStagingLayouts: where a larger staging area (the reshape's 16 KiB)
// sets the kernel's shared memory, the conversion pads its rows by a vector
// (32 x 36 floats) instead of swizzling: no XOR per access, and no more
// shared memory.
// CHECK-LABEL: gpu.func @padding_within_peak
// CHECK-SAME: tile.shared_bytes = 16384 : i64
// CHECK-NOT: arith.xori {{.*}} : i32
// CHECK: gpu.return
tile.kernel @padding_within_peak(%x: memref<?x?xf32, strided<[1, ?]>> {tile.divisibility = 16}, %z: memref<?x?xf32, strided<[?, 1]>> {tile.divisibility = 16}, %y: memref<?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[1, ?]>> -> tensor<32x32xf32, #c>
  %u = tile.convert_layout %t : tensor<32x32xf32, #c> -> tensor<32x32xf32, #r>
  tile.store %u, %z[%c0, %c0] : tensor<32x32xf32, #r>, memref<?x?xf32, strided<[?, 1]>>
  %big = tile.load %z[%c0, %c0] : memref<?x?xf32, strided<[?, 1]>> -> tensor<64x64xf32, #r>
  %v = tile.reshape %big : tensor<64x64xf32, #r> -> tensor<4096xf32, #flat>
  tile.store %v, %y[%c0] : tensor<4096xf32, #flat>, memref<?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#r = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>

// restageThroughShared: a swizzle (4-float groups, four phases) XORs one
// phase into the columns of all registers whose offsets agree modulo its
// period, so those are one address plus constants: the mma tile's 32 pairs
// (rows 8 apart, columns 8 apart) take two XORs (columns mod 16: 0 and 8),
// #r's 16 row vectors (rows 4 apart) one, not one each.
// CHECK-LABEL: gpu.func @swizzle_classes
// CHECK: arith.xori {{.*}} : i32
// CHECK: llvm.store {{.*}} : vector<2xf32>, !llvm.ptr<3>
// CHECK: arith.xori {{.*}} : i32
// CHECK-NOT: arith.xori {{.*}} : i32
// CHECK: nvvm.barrier0
// CHECK: arith.xori {{.*}} : i32
// CHECK-NOT: arith.xori {{.*}} : i32
// CHECK-COUNT-16: llvm.load {{.*}} -> vector<4xf32>
// CHECK-NOT: arith.xori {{.*}} : i32
// CHECK: llvm.getelementptr %arg{{[0-9]+}}[{{.*}}] : (!llvm.ptr<1>, i64)
tile.kernel @swizzle_classes(%x: memref<?x?xf32, strided<[?, 1]>> {tile.divisibility = 16}, %z: memref<?x?xf32, strided<[?, 1]>> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[?, 1]>> -> tensor<64x128xf32, #mma>
  %u = tile.convert_layout %t : tensor<64x128xf32, #mma> -> tensor<64x128xf32, #r>
  tile.store %u, %z[%c0, %c0] : tensor<64x128xf32, #r>, memref<?x?xf32, strided<[?, 1]>>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// restageLayout: 16-bit elements from the mma layout to rows of 8 go through
// ldmatrix (StagingLayout::fragments): each thread stores its 16 words as
// four 16-byte vectors where ldmatrix hands them to their new owners, and
// loads its 32 elements with four ldmatrix.x4; no bank conflicts either way
// (8 KiB, no padding).
// CHECK-LABEL: gpu.module @tileopt_kernels
// CHECK: llvm.mlir.global internal @fragments_smem() {{.*}} : !llvm.array<8192 x i8>
// CHECK: gpu.func @fragments
// CHECK-COUNT-4: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK-NEXT: nvvm.barrier0
// CHECK-COUNT-4: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK-NOT: llvm.{{load|store}} {{.*}}!llvm.ptr<3>
// CHECK: gpu.return
tile.kernel @fragments(%x: memref<?x?xf32> {tile.divisibility = 16}, %y: memref<?x?xf16> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %h = arith.truncf %t : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
  %u = tile.convert_layout %h : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #b>
  tile.store %u, %y[%c0, %c0] : tensor<64x64xf16, #b>, memref<?x?xf16>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#b3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 4, 8], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// registersInPlace: a reshape that only adds a unit dimension to a layout
// that spreads the elements the same way moves nothing (attention's q); one
// from the mma layout (attention's output) goes through ldmatrix like a
// layout conversion.
// CHECK-LABEL: gpu.func @reshapes
// CHECK-NOT: llvm.{{load|store}} {{.*}}!llvm.ptr<3>
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK: nvvm.ldmatrix
tile.kernel @reshapes(%x: memref<?x?x?xf16> {tile.divisibility = 16}, %y: memref<?x?xf16> {tile.divisibility = 16}, %z: memref<?x?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %q3 = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16> -> tensor<1x64x64xf16, #b3>
  %q = tile.reshape %q3 : tensor<1x64x64xf16, #b3> -> tensor<64x64xf16, #b>
  tile.store %q, %y[%c0, %c0] : tensor<64x64xf16, #b>, memref<?x?xf16>
  %t = tile.load %z[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %h = arith.truncf %t : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
  %o = tile.reshape %h : tensor<64x64xf16, #mma> -> tensor<1x64x64xf16, #b3>
  tile.store %o, %x[%c0, %c0, %c0] : tensor<1x64x64xf16, #b3>, memref<?x?x?xf16>
  tile.return
}

// -----

tile.kernel @no_layout(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tile.load' op has a tile without a layout ('tensor<16xf32>'); run tile-assign-layouts first}}
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<16xf32>
  tile.return
}

// -----

// Host side: tile.launch becomes gpu.launch_func with the ABI's arguments:
// the memref's offset is folded into the pointer (4 bytes an element).
// CHECK-LABEL: func.func @host
// CHECK: %[[BASE:.*]], %[[OFF:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %{{.*}} : memref<128x64xf32>
// CHECK: %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[BASE]]
// CHECK-DAG: %[[ADDR64:.*]] = arith.index_cast %[[ADDR]] : index to i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[OFF64:.*]] = arith.index_cast %[[OFF]] : index to i64
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFF64]], %[[C4]] : i64
// CHECK: %[[FIRST:.*]] = arith.addi %[[ADDR64]], %[[BYTES]] : i64
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[FIRST]] : i64 to !llvm.ptr<1>
// CHECK: gpu.launch_func @tileopt_kernels::@k blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%[[PTR]] : !llvm.ptr<1>, %{{.*}} : i64, %{{.*}} : i64, %{{.*}} : i64, %{{.*}} : i64, %{{.*}} : f32)
func.func @host(%g: index, %x: memref<128x64xf32>, %s: f32) {
  tile.launch @k grid(%g) (%x, %s) : memref<128x64xf32>, f32
  return
}
tile.kernel @k(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %s: f32) {
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [2, 2]>

// An f16 dot with an mma accumulator: operands staged in shared memory,
// fragments through ldmatrix (B transposed, two 8-column blocks per x4),
// one mma.sync per 16x8 block and k16 step: 2 x 4 blocks per warp, 2 steps.
// CHECK-LABEL: gpu.func @mma_dot
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK-COUNT-2: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK-COUNT-2: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32
// CHECK-NOT: nvvm.ldmatrix
// CHECK-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-COUNT-4: nvvm.ldmatrix
// CHECK-NOT: nvvm.ldmatrix
// CHECK-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NOT: mma.sync
tile.kernel @mma_dot(%x: memref<?x?xf16>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// On sm_90a an f16 dot whose warps tile rows runs on wgmma: A (64x32,
// 64-byte rows) and B (32x64, 128-byte rows) are stored 16 bytes at a time
// in the swizzled layout (chunk XOR row bits), fenced for the async proxy,
// and each k16 step is one m64n64k16 on descriptors (A: 64B swizzle, stride
// 512, leading unused (16); B: 128B swizzle, transposed, stride 1024,
// leading 4096: Triton's), all waited for with the accumulators in place.
// On sm_80 it is mma.sync.
// CHECK-LABEL: gpu.func @wgmma_dot
// CHECK: mma.sync.aligned.m16n8k16
// WGMMA: llvm.mlir.global internal @wgmma_dot_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// WGMMA-LABEL: gpu.func @wgmma_dot
// WGMMA: nvvm.barrier0
// WGMMA: arith.xori
// WGMMA: llvm.store {{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// WGMMA: llvm.store {{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// WGMMA: fence.proxy.async.shared::cta;
// WGMMA-NEXT: nvvm.barrier0
// A zero accumulator is ignored (scale-d 0) in the first k step, set in none
// of its registers (poison); the second step accumulates.
// WGMMA: llvm.mlir.poison : f32
// WGMMA: wgmma.fence.sync.aligned;
// WGMMA: arith.constant 4611686293322072064 : i64
// WGMMA: arith.constant -9223371899415756800 : i64
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, $32, $33, 0, 1, 1, 0, 1;
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, $32, $33, 1, 1, 1, 0, 1;
// WGMMA: wgmma.commit_group.sync.aligned;
// WGMMA: wgmma.wait_group.sync.aligned 0;
// WGMMA-NOT: mma.sync
// With max-registers, every kernel declares it (.maxnreg in PTX).
// MAXREG-LABEL: gpu.func @wgmma_dot
// MAXREG-SAME: nvvm.maxnreg = 96 : i32
tile.kernel @wgmma_dot(%x: memref<?x?xf16>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#r = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [16, 2], warpsPerCTA = [1, 4], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// Operands loaded from views promised aligned with sizes divisible by 16
// go global -> shared with cp.async (zero-filled where out of bounds; no
// barrier first: nothing used shared memory before), and the dot waits for
// them instead of storing them:
// into wgmma's swizzled layout on sm_90a, mma.sync's swizzled rows on sm_80.
// A load with a shared-memory user between it and the dot (a reduction
// across warps)
// keeps the register path (A below); B, loaded after it, is copied.
// CHECK-LABEL: gpu.func @dot_async_copies
// CHECK-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// CHECK-NOT: llvm.store
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvvm.barrier0
// CHECK: nvvm.ldmatrix
// WGMMA-LABEL: gpu.func @dot_async_copies
// WGMMA-NOT: nvvm.barrier0
// WGMMA: arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// WGMMA: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// WGMMA-NOT: llvm.store
// WGMMA: nvvm.cp.async.commit.group
// WGMMA-NEXT: nvvm.cp.async.wait.group 0
// WGMMA: fence.proxy.async.shared::cta;
// WGMMA-COUNT-2: wgmma.mma_async
// WGMMA-LABEL: gpu.func @dot_async_copy_clobbered
// WGMMA: nvvm.shfl.sync
// WGMMA-COUNT-2: nvvm.cp.async.shared.global
// WGMMA-NOT: nvvm.cp.async.shared.global
// WGMMA: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// WGMMA-NOT: nvvm.cp.async.shared.global
// WGMMA: wgmma.mma_async
tile.kernel @dot_async_copies(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}
tile.kernel @dot_async_copy_clobbered(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 16>}, %y: memref<?x?xf32>, %s: memref<?xf16, strided<[1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
  %o = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #r>
  %r = tile.reduce %o {axis = 1 : i64} : tensor<64x32xf16, #r> -> tensor<64xf16, #tile.slice<dim = 1, parent = #r>> {
  ^bb0(%p: f16, %q: f16):
    %t = arith.addf %p, %q : f16
    tile.yield %t : f16
  }
  tile.store %r, %s[%c0] : tensor<64xf16, #tile.slice<dim = 1, parent = #r>>, memref<?xf16, strided<[1], offset: ?>>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 8, 4], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#b3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 4, 8], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// One matrix of a batch: a 1 x M x K load reshaped to M x K still copies
// with cp.async (at the coordinates past the unit dimension), and the
// reshape moves nothing through shared memory.
// CHECK-LABEL: gpu.func @batch_matrix_copies
// CHECK-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// CHECK-NOT: llvm.store
// CHECK: nvvm.cp.async.wait.group 0
// CHECK-NEXT: nvvm.barrier0
// CHECK: nvvm.ldmatrix
tile.kernel @batch_matrix_copies(%x: memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 1, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a3 = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> -> tensor<1x64x32xf16, #a3>
  %b3 = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> -> tensor<1x32x64xf16, #b3>
  %a = tile.reshape %a3 : tensor<1x64x32xf16, #a3> -> tensor<64x32xf16, #a>
  %b = tile.reshape %b3 : tensor<1x32x64xf16, #b3> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#k3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 8, 4], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#k = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#kt = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 4], order = [0, 1]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// B = k^T (attention's scores): a 1 x N x K load, reshaped, then
// transposed, copies with cp.async into B's K-major staging area (the
// load's rows are its rows); neither the reshape nor the transpose moves
// data.
// CHECK-LABEL: gpu.func @transposed_copies
// CHECK-COUNT-4: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// CHECK-NOT: llvm.store
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.ldmatrix
tile.kernel @transposed_copies(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 16>}, %kv: memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 1, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
  %k3 = tile.load %kv[%c0, %c0, %c0] : memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> -> tensor<1x64x32xf16, #k3>
  %k = tile.reshape %k3 : tensor<1x64x32xf16, #k3> -> tensor<64x32xf16, #k>
  %kt = tile.permute %k {permutation = array<i64: 1, 0>} : tensor<64x32xf16, #k> -> tensor<32x64xf16, #kt>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %kt, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #kt> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// One 8-column block of B per warp: its fragment is an ldmatrix.x2. On
// sm_90a it is one m64n8k16, B in wgmma's unswizzled layout (16-byte rows:
// swizzle mode 0, the next 8 rows at the leading offset 128 = 8 << 4, the
// stride (the next 16 bytes of N) 256 = 16 << 32; Triton's), A 32-byte
// swizzled.
// WGMMA-LABEL: gpu.func @mma_dot_one_column_block
// WGMMA: arith.constant 68720001024 : i64
// WGMMA: arith.constant -4611685949707845632 : i64
// WGMMA: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, $2, $3}, $4, $5, 0, 1, 1, 0, 1;
// WGMMA-NOT: mma.sync
// WGMMA: gpu.return
// CHECK-LABEL: gpu.func @mma_dot_one_column_block
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK-NEXT: llvm.extractvalue
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 2 : i32
// CHECK-COUNT-1: mma.sync.aligned.m16n8k16
// CHECK-NOT: mma.sync
// CHECK: gpu.return
tile.kernel @mma_dot_one_column_block(%x: memref<?x?xf16>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x16xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<16x8xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x8xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x16xf16, #a>, tensor<16x8xf16, #b> -> tensor<64x8xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x8xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [8, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 2]>

// Two warpgroup columns of 8: each an m64n8k16 on half of B's one 32-byte
// atom, the second's descriptor starting 16 bytes into it (bit 2 of the warp,
// its warpgroup column, times 16: Triton's start). Both read the atom's
// leading offset 512 (a whole k16 of 32-byte rows) and stride 256.
// WGMMA-LABEL: gpu.func @wgmma_half_atom_columns
// WGMMA: fence.proxy.async.shared::cta
// WGMMA: %[[GROUP:.*]] = arith.andi %{{.*}}, %c1_i32{{[_0-9]*}} :
// WGMMA: %[[HALF:.*]] = arith.andi %[[GROUP]], %c1_i32{{[_0-9]*}} :
// WGMMA: arith.muli %[[HALF]], %c16_i32{{[_0-9]*}} :
// WGMMA: arith.constant -4611685949705814016 : i64
// WGMMA: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, $2, $3}, $4, $5, 0, 1, 1, 0, 1;
// WGMMA-NOT: mma.sync
// WGMMA: gpu.return
// TMA-LABEL: gpu.func @wgmma_half_atom_columns
// TMA: wgmma.mma_async.sync.aligned.m64n8k16
tile.kernel @wgmma_half_atom_columns(%x: memref<?x?xf16>, %y: memref<?x?xf32>) attributes {tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x16xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<16x16xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x16xf32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x16xf16, #a>, tensor<16x16xf16, #b> -> tensor<64x16xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x16xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#v = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A constant tile that is not a splat lives in constant memory; each thread
// reads the elements it owns.
// CHECK-LABEL: llvm.mlir.global internal constant @table_cst0(dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<4xf32>) {addr_space = 4 : i32, alignment = 16 : i64} : !llvm.array<4 x f32>
// CHECK: gpu.func @table
// CHECK: %[[BASE:.*]] = llvm.mlir.addressof @table_cst0 : !llvm.ptr<4>
// CHECK: llvm.getelementptr %[[BASE]][%{{.*}}] : (!llvm.ptr<4>, i32) -> !llvm.ptr<4>, f32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<4> -> f32
tile.kernel @table(%y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = arith.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32, #v>
  tile.store %t, %y[%c0] : tensor<4xf32, #v>, memref<?xf32>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// With tile.divisibility on the views and a tile offset that is a multiple
// of the vector (program_id * 512), accesses are 16-byte vectors with no
// run-time check and no scalar copy of the code.
// CHECK-LABEL: gpu.func @aligned
// CHECK-NOT: scf.if {{.*}} -> (vector<4xf32>)
// CHECK: ld.global.v4.b32
// CHECK-NOT: scf.if {{.*}} -> (vector<4xf32>)
// CHECK: st.global.v4.b32
// CHECK-NOT: ld.global
// CHECK: gpu.return
tile.kernel @aligned(%x: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16}, %y: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16}) {
  %pid = tile.program_id {dim = 0}
  %c512 = arith.constant 512 : index
  %off = arith.muli %pid, %c512 : index
  %a = tile.load %x[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  tile.store %a, %y[%off] : tensor<512xf32, #row4>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#rows4 = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// tile.divisibility covers the strides the kernel does not know; a static
// row stride of 1 (rows one element apart) breaks 16-byte rows, so the
// vector path keeps its run-time check and the scalar copy.
// CHECK-LABEL: gpu.func @aligned_static_rows
// CHECK: scf.if {{.*}} -> (vector<4xf32>)
// CHECK: ld.global.v4.b32
// CHECK: ld.global.b32
tile.kernel @aligned_static_rows(%x: memref<?x?xf32, strided<[1, 1], offset: ?>> {tile.divisibility = 16}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf32, strided<[1, 1], offset: ?>> -> tensor<16x32xf32, #rows4>
  tile.store %a, %y[%c0, %c0] : tensor<16x32xf32, #rows4>, memref<?x?xf32>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// With tile.size_divisibility (and with a static size) that is a multiple of
// the vector, a vector run is all in bounds or all out: one predicate per
// run (the first element's) and no scalar tail.
// CHECK-LABEL: gpu.func @whole_runs
// CHECK-NOT: ld.global.b32
// CHECK: ld.global.v4.b32
// CHECK-NOT: ld.global.b32
// CHECK: st.global.v4.b32
// CHECK-NOT: st.global.b32
// CHECK: gpu.return
tile.kernel @whole_runs(%x: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16>}, %y: memref<4096xf32, strided<[1], offset: ?>> {tile.divisibility = 16}) {
  %pid = tile.program_id {dim = 0}
  %c512 = arith.constant 512 : index
  %off = arith.muli %pid, %c512 : index
  %a = tile.load %x[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  tile.store %a, %y[%off] : tensor<512xf32, #row4>, memref<4096xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A size divisible by 2 only: runs of 4 may straddle the end, so the scalar
// tail stays.
// CHECK-LABEL: gpu.func @partial_runs
// CHECK: ld.global.v4.b32
// CHECK: scf.if
// CHECK: ld.global.b32
tile.kernel @partial_runs(%x: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 2>}, %y: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16}) {
  %pid = tile.program_id {dim = 0}
  %c512 = arith.constant 512 : index
  %off = arith.muli %pid, %c512 : index
  %a = tile.load %x[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  tile.store %a, %y[%off] : tensor<512xf32, #row4>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#rows = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [2, 2], order = [1, 0]>

// Rows 4 * pid .. 4 * pid + 3 of a view whose row count is a multiple of 16:
// all in bounds or all out, so each thread's two rows check the tile offset
// alone, with one compare that both share (Access::sharedInBounds). The
// second row's address is the first's plus two strides.
// CHECK-LABEL: gpu.func @row_groups
// CHECK: arith.muli %{{.*}}, %c4 : index
// CHECK-NEXT: %[[ROW:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK: arith.cmpi ult, %[[ROW]], %{{.*}} : i32
// CHECK: %[[P0:[0-9]+]] = llvm.getelementptr
// CHECK: ld.global.v4.b32 {{.*}} %[[P0]],
// CHECK-NOT: arith.cmpi ult, %[[ROW]], %{{.*}} : i32
// CHECK: %[[STEP:[0-9]+]] = arith.muli %c2_i32{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK: %[[P1:[0-9]+]] = llvm.getelementptr %[[P0]][%[[STEP]]]
// CHECK: ld.global.v4.b32 {{.*}} %[[P1]],
// The store at the same offset shares the load's cast of it.
// CHECK: arith.cmpi ult, %[[ROW]], %{{.*}} : i32
// CHECK: st.global.v4.b32
tile.kernel @row_groups(%x: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.index_bitwidth = 32, tile.size_divisibility = array<i64: 16, 16>}) {
  %pid = tile.program_id {dim = 0}
  %c4 = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %off = arith.muli %pid, %c4 : index
  %a = tile.load %x[%off, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<4x256xf32, #rows>
  tile.store %a, %x[%off, %c0] : tensor<4x256xf32, #rows>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#rows = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [2, 2], order = [1, 0]>

// Without the promise on the rows, each row checks its own index.
// CHECK-LABEL: gpu.func @row_groups_unknown_size
// CHECK: arith.muli %{{.*}}, %c4 : index
// CHECK-NEXT: %[[ROW:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NOT: arith.cmpi ult, %[[ROW]], %{{.*}} : i32
// CHECK: gpu.return
tile.kernel @row_groups_unknown_size(%x: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.index_bitwidth = 32, tile.size_divisibility = array<i64: 1, 16>}) {
  %pid = tile.program_id {dim = 0}
  %c4 = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %off = arith.muli %pid, %c4 : index
  %a = tile.load %x[%off, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<4x256xf32, #rows>
  tile.store %a, %x[%off, %c0] : tensor<4x256xf32, #rows>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#rows3 = #tile.blocked<sizePerThread = [1, 1, 4], threadsPerWarp = [1, 2, 16], warpsPerCTA = [1, 2, 1], order = [2, 1, 0]>

// Only each vector run's first register is checked (its run is all in or
// all out): the batch and the column agree on those registers, though not
// inside a run, so they are compared once and each row adds its own compare.
// CHECK-LABEL: gpu.func @batch_and_columns_once
// CHECK: %[[B:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[C:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[SHARED:.*]] = arith.andi %[[B]], %[[C]] : i1
// CHECK-NEXT: %[[R0:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: arith.andi %[[SHARED]], %[[R0]] : i1
// CHECK: ld.global.v4.b32
// CHECK-NOT: arith.cmpi
// CHECK: %[[R1:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: arith.andi %[[SHARED]], %[[R1]] : i1
// CHECK: ld.global.v4.b32
tile.kernel @batch_and_columns_once(%x: memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>> {tile.divisibility = 16, tile.index_bitwidth = 32, tile.size_divisibility = array<i64: 1, 1, 16>}) attributes {tile.num_warps = 2 : i32} {
  %pid = tile.program_id {dim = 0}
  %batch = tile.program_id {dim = 1}
  %c8 = arith.constant 8 : index
  %c0 = arith.constant 0 : index
  %off = arith.muli %pid, %c8 : index
  %a = tile.load %x[%batch, %off, %c0] : memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>> -> tensor<1x8x64xf32, #rows3>
  tile.store %a, %x[%batch, %off, %c0] : tensor<1x8x64xf32, #rows3>, memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// An f32 division that may be approximate (fastmath<afn>) is PTX's
// div.full.f32, per element and for scalars in kernels; without the flag it
// stays the IEEE division, and host code keeps LLVM's own lowering.
// CHECK-LABEL: gpu.func @approx_division
// CHECK: llvm.call_intrinsic "llvm.nvvm.div.full"(%{{.*}}, %{{.*}}) : (f32, f32) -> f32
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.nvvm.div.full"
// CHECK-NOT: llvm.nvvm.div.full
// CHECK: arith.divf %{{.*}}, %{{.*}} : vector<4xf32>
tile.kernel @approx_division(%x: memref<?xf32, strided<[1], offset: ?>>, %s: f32, %t: f32) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  %q = arith.divf %s, %t fastmath<afn> : f32
  %b = tile.splat %q : f32 -> tensor<512xf32, #row4>
  %c = arith.divf %a, %b fastmath<afn> : tensor<512xf32, #row4>
  %d = arith.divf %c, %b : tensor<512xf32, #row4>
  tile.store %d, %x[%c0] : tensor<512xf32, #row4>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

// CHECK-LABEL: func.func @approx_division_host
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<afn> : f32
func.func @approx_division_host(%a: f32, %b: f32) -> f32 {
  %q = arith.divf %a, %b fastmath<afn> : f32
  return %q : f32
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Float multiplies and adds in kernels get the `contract` flag (LLVM fuses
// them into fma), unless fp-fusion=false; other flags stay.
// CHECK-LABEL: gpu.func @fusion
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : vector<4xf32>
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<nnan,contract> : vector<4xf32>
// NOFUSE-LABEL: gpu.func @fusion
// NOFUSE: arith.mulf %{{.*}}, %{{.*}} : vector<4xf32>
// NOFUSE: arith.addf %{{.*}}, %{{.*}} fastmath<nnan> : vector<4xf32>
tile.kernel @fusion(%x: memref<?xf32, strided<[1], offset: ?>>, %s: f32, %t: f32) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  %b = tile.splat %s : f32 -> tensor<512xf32, #row4>
  %c = tile.splat %t : f32 -> tensor<512xf32, #row4>
  %m = arith.mulf %a, %b : tensor<512xf32, #row4>
  %d = arith.addf %m, %c fastmath<nnan> : tensor<512xf32, #row4>
  tile.store %d, %x[%c0] : tensor<512xf32, #row4>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#blocked = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>

// tile.index_bitwidth = 32: the view's sizes and strides are truncated to
// i32 once, bounds checks compare i32 and addresses add sign-extended i32
// offsets (nsw); the other view keeps i64.
// CHECK-LABEL: gpu.func @narrow
// CHECK-SAME: (%[[XP:arg[0-9]+]]: !llvm.ptr<1>, %[[XN0:arg[0-9]+]]: i64, %{{arg[0-9]+}}: i64, %[[XS0:arg[0-9]+]]: i64, %{{arg[0-9]+}}: i64, %{{arg[0-9]+}}: !llvm.ptr<1>, %[[YN0:arg[0-9]+]]: i64,
// CHECK-DAG: arith.trunci %[[XN0]] : i64 to i32
// CHECK-DAG: arith.trunci %[[XS0]] : i64 to i32
// CHECK: arith.muli %{{.*}}, %{{.*}} overflow<nsw> : i32
// CHECK: llvm.getelementptr %[[XP]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: ld.global.v4.b32
// CHECK: arith.cmpi ult, %{{.*}}, %[[YN0]] : i64
// CHECK: st.global
tile.kernel @narrow(%x: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32, tile.divisibility = 16}, %y: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
  %pid = tile.program_id {dim = 0}
  %c32 = arith.constant 32 : index
  %c0 = arith.constant 0 : index
  %off = arith.muli %pid, %c32 : index
  %a = tile.load %x[%off, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<32x128xf32, #blocked>
  tile.store %a, %y[%off, %c0] : tensor<32x128xf32, #blocked>, memref<?x?xf32, strided<[?, ?], offset: ?>>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Loops whose bounds are below 2^31 (constants, sizes of 32-bit views and
// their minimum) count in i32 with an unsigned compare: iv + step cannot
// wrap. A bound from an index argument, a 64-bit view's size, or a step
// that is not a positive constant keeps the index loop. Loops carry a
// tile's registers as scalars (LLVM folds scalar phis across the loop).
// CHECK-LABEL: gpu.func @narrow_loops
// CHECK: scf.for unsigned %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (f32, f32, f32, f32) : i32 {
// CHECK-NEXT: vector.from_elements
// CHECK-NEXT: arith.index_castui %[[I]] : i32 to index
// CHECK: scf.for unsigned %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
tile.kernel @narrow_loops(%x: memref<?xf32, strided<[1], offset: ?>> {tile.index_bitwidth = 32}, %w: memref<?xf32, strided<[1], offset: ?>>, %n: index, %s: index) {
  %c0 = arith.constant 0 : index
  %c512 = arith.constant 512 : index
  %c4096 = arith.constant 4096 : index
  %zero = arith.constant dense<0.0> : tensor<512xf32, #row>
  %dim = memref.dim %x, %c0 : memref<?xf32, strided<[1], offset: ?>>
  %ub = arith.minsi %dim, %c4096 : index
  %a = scf.for %i = %c0 to %ub step %c512 iter_args(%acc = %zero) -> (tensor<512xf32, #row>) {
    %t = tile.load %x[%i] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row>
    %r = arith.addf %acc, %t : tensor<512xf32, #row>
    scf.yield %r : tensor<512xf32, #row>
  }
  scf.for %i = %c0 to %c4096 step %c512 {
    tile.store %a, %x[%i] : tensor<512xf32, #row>, memref<?xf32, strided<[1], offset: ?>>
  }
  %b = scf.for %i = %c0 to %n step %c512 iter_args(%acc = %a) -> (tensor<512xf32, #row>) {
    %t = tile.load %x[%i] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row>
    %r = arith.addf %acc, %t : tensor<512xf32, #row>
    scf.yield %r : tensor<512xf32, #row>
  }
  %wdim = memref.dim %w, %c0 : memref<?xf32, strided<[1], offset: ?>>
  %c = scf.for %i = %c0 to %wdim step %c512 iter_args(%acc = %b) -> (tensor<512xf32, #row>) {
    %t = tile.load %w[%i] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row>
    %r = arith.addf %acc, %t : tensor<512xf32, #row>
    scf.yield %r : tensor<512xf32, #row>
  }
  %d = scf.for %i = %c0 to %dim step %s iter_args(%acc = %c) -> (tensor<512xf32, #row>) {
    %t = tile.load %x[%i] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row>
    %r = arith.addf %acc, %t : tensor<512xf32, #row>
    scf.yield %r : tensor<512xf32, #row>
  }
  tile.store %d, %w[%c0] : tensor<512xf32, #row>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A row loop `for r = pid * 16 to min(pid * 16 + 16, size)`: the upper
// bound is below 2^31, the lower one only non-negative, so it is clamped
// to the upper one (no iterations when it is past it) and the loop counts
// in i32.
// CHECK-LABEL: gpu.func @narrow_loop_clamped
// CHECK: %[[UB:.*]] = arith.minsi
// CHECK: %[[LB:.*]] = arith.minui %{{.*}}, %[[UB]] : index
// CHECK: %[[LB32:.*]] = arith.index_castui %[[LB]] : index to i32
// CHECK: %[[UB32:.*]] = arith.index_castui %[[UB]] : index to i32
// CHECK: scf.for unsigned %{{.*}} = %[[LB32]] to %[[UB32]] step %{{.*}} : i32 {
tile.kernel @narrow_loop_clamped(%x: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.index_bitwidth = 32}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %pid = tile.program_id {dim = 0}
  %lb = arith.muli %pid, %c16 : index
  %end = arith.addi %lb, %c16 : index
  %dim = memref.dim %x, %c0 : memref<?x?xf32, strided<[?, 1], offset: ?>>
  %ub = arith.minsi %end, %dim : index
  %z = arith.constant dense<0.0> : tensor<1x512xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>>
  scf.for %r = %lb to %ub step %c1 {
    tile.store %z, %x[%r, %c0] : tensor<1x512xf32, #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  }
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// A mask `program_id * 512 + iota < bound` is constant over a thread's 4
// contiguous elements when the bound is a multiple of 4 (a constant, or a
// size that tile.size_divisibility promises): one compare serves them. A
// bound that is only even needs two; an odd one, a compare per element.
// CHECK-LABEL: gpu.func @uniform_masks
// CHECK-COUNT-1: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK: vector.from_elements
// CHECK-COUNT-2: arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK: vector.from_elements %[[B0:.*]], %[[B0]], %[[B1:.*]], %[[B1]] : vector<4xi1>
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK-COUNT-1: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: gpu.return
tile.kernel @uniform_masks(%x: memref<?xi8, strided<[1], offset: ?>>, %v: memref<?xf32, strided<[1], offset: ?>> {tile.size_divisibility = array<i64: 16>}) {
  %pid = tile.program_id {dim = 0}
  %c512 = arith.constant 512 : index
  %off = arith.muli %pid, %c512 : index
  %off32 = arith.index_cast %off : index to i32
  %base = tile.splat %off32 : i32 -> tensor<512xi32, #row4>
  %iota = tile.iota : tensor<512xi32, #row4>
  %idx = arith.addi %iota, %base : tensor<512xi32, #row4>
  %c100 = arith.constant dense<100> : tensor<512xi32, #row4>
  %c102 = arith.constant 102 : i32
  %c101 = arith.constant 101 : i32
  %s102 = tile.splat %c102 : i32 -> tensor<512xi32, #row4>
  %s101 = tile.splat %c101 : i32 -> tensor<512xi32, #row4>
  %c0 = arith.constant 0 : index
  %n = memref.dim %v, %c0 : memref<?xf32, strided<[1], offset: ?>>
  %n32 = arith.index_cast %n : index to i32
  %sn = tile.splat %n32 : i32 -> tensor<512xi32, #row4>
  %a = arith.cmpi slt, %idx, %c100 : tensor<512xi32, #row4>
  %b = arith.cmpi sgt, %s102, %idx : tensor<512xi32, #row4>
  %c = arith.cmpi sge, %idx, %s101 : tensor<512xi32, #row4>
  %d = arith.cmpi ult, %idx, %sn : tensor<512xi32, #row4>
  %ab = arith.andi %a, %b : tensor<512xi1, #row4>
  %cd = arith.andi %c, %d : tensor<512xi1, #row4>
  %m = arith.andi %ab, %cd : tensor<512xi1, #row4>
  %e = arith.extui %m : tensor<512xi1, #row4> to tensor<512xi8, #row4>
  tile.store %e, %x[%off] : tensor<512xi8, #row4>, memref<?xi8, strided<[1], offset: ?>>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// The offset added to the iota may be a minimum or a remainder of aligned
// values (attention's masked blocks start at min(n - n % 64, ...)): still
// one compare per thread's 4 elements. An offset of unknown alignment (the
// view's size itself, not promised) needs a compare per element.
// CHECK-LABEL: gpu.func @aligned_offsets
// CHECK-COUNT-1: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: gpu.return
tile.kernel @aligned_offsets(%x: memref<?xi8, strided<[1], offset: ?>>, %v: memref<?xf32, strided<[1], offset: ?>> {tile.size_divisibility = array<i64: 16>}, %w: memref<?xf32, strided<[1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %n = memref.dim %v, %c0 : memref<?xf32, strided<[1], offset: ?>>
  %rem = arith.remsi %n, %c64 : index
  %whole = arith.subi %n, %rem : index
  %pid = tile.program_id {dim = 0}
  %first = arith.muli %pid, %c64 : index
  %start = arith.minsi %whole, %first : index
  %start32 = arith.index_cast %start : index to i32
  %base = tile.splat %start32 : i32 -> tensor<512xi32, #row4>
  %iota = tile.iota : tensor<512xi32, #row4>
  %idx = arith.addi %iota, %base : tensor<512xi32, #row4>
  %n32 = arith.index_cast %n : index to i32
  %sn = tile.splat %n32 : i32 -> tensor<512xi32, #row4>
  %a = arith.cmpi slt, %idx, %sn : tensor<512xi32, #row4>
  %wn = memref.dim %w, %c0 : memref<?xf32, strided<[1], offset: ?>>
  %wn32 = arith.index_cast %wn : index to i32
  %wbase = tile.splat %wn32 : i32 -> tensor<512xi32, #row4>
  %widx = arith.addi %iota, %wbase : tensor<512xi32, #row4>
  %b = arith.cmpi slt, %widx, %sn : tensor<512xi32, #row4>
  %m = arith.andi %a, %b : tensor<512xi1, #row4>
  %e = arith.extui %m : tensor<512xi1, #row4> to tensor<512xi8, #row4>
  tile.store %e, %x[%c0] : tensor<512xi8, #row4>, memref<?xi8, strided<[1], offset: ?>>
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>

// A row loop up to (at most) the view's row count needs no row check on a
// one-row tile of that view; the columns are still checked.
// CHECK-LABEL: gpu.func @row_loop
// CHECK-SAME: (%{{arg[0-9]+}}: !llvm.ptr<1>, %[[ROWS:arg[0-9]+]]: i64, %[[COLS:arg[0-9]+]]: i64,
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[ROWS]] : i64
// CHECK: arith.cmpi ult, %{{.*}}, %[[COLS]] : i64
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[ROWS]] : i64
// CHECK: gpu.return
tile.kernel @row_loop(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %y: memref<?x?xf32, strided<[?, 1], offset: ?>>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = memref.dim %x, %c0 : memref<?x?xf32, strided<[?, 1], offset: ?>>
  %last = arith.minsi %end, %rows : index
  scf.for %r = %c0 to %last step %c1 {
    %t = tile.load %x[%r, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<1x512xf32, #row>
    tile.store %t, %x[%r, %c0] : tensor<1x512xf32, #row>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  }
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>

// Without the view's size in the bound, rows are checked.
// CHECK-LABEL: gpu.func @unbounded_row_loop
// CHECK-SAME: (%{{arg[0-9]+}}: !llvm.ptr<1>, %[[ROWS:arg[0-9]+]]: i64,
// CHECK: arith.cmpi ult, %{{.*}}, %[[ROWS]] : i64
tile.kernel @unbounded_row_loop(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %r = %c0 to %end step %c1 {
    %t = tile.load %x[%r, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<1x512xf32, #row>
    tile.store %t, %x[%r, %c0] : tensor<1x512xf32, #row>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  }
  tile.return
}

// -----

#row = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]>

// A contiguous view whose alignment is known only at run time: the vector
// branch moves 16 bytes a thread; the scalar branch moves one element a
// thread (contiguous across the warp) and converts through shared memory
// (513 padded words) into the tile's layout, and back for the store.
// CHECK-LABEL: gpu.func @scalar_fallback
// CHECK-SAME: tile.shared_bytes = 2052 : i64
// CHECK: scf.if
// CHECK: ld.global.v4.b32
// CHECK: } else {
// CHECK: ld.global.b32
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
// CHECK: scf.if
// CHECK: st.global.v4.b32
// CHECK: } else {
// CHECK: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: st.global.b32
tile.kernel @scalar_fallback(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %pid = tile.program_id {dim = 0}
  %t = tile.load %x[%pid, %c0] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<1x512xf32, #row>
  tile.store %t, %x[%pid, %c0] : tensor<1x512xf32, #row>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [4, 1], threadsPerWarp = [32, 1], warpsPerCTA = [1, 4], order = [0, 1]>

// Staging beyond the 48 KiB of static shared memory is the launch's
// dynamic shared memory: an external array, its size on the kernel. (A
// transpose: #a's threads span all columns, #b's all rows, so no slices;
// swizzled, not padded.)
// CHECK: llvm.mlir.global external @more_shared_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-LABEL: gpu.func @more_shared
// CHECK-SAME: tile.dynamic_shared_bytes = 65536 : i64
// CHECK-SAME: tile.shared_bytes = 65536 : i64
tile.kernel @more_shared(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<128x128xf32, #a>
  %u = tile.convert_layout %t : tensor<128x128xf32, #a> -> tensor<128x128xf32, #b>
  tile.store %u, %y[%c0, %c0] : tensor<128x128xf32, #b>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [32, 1], warpsPerCTA = [1, 4], order = [0, 1]>

// A large conversion goes in slices of rows that both layouts hold whole,
// one after the other: here four of 32 rows (16384 bytes, not 65536), two
// barriers each but the first (nothing used shared memory before).
// CHECK-LABEL: gpu.func @sliced_conversion
// CHECK-SAME: tile.shared_bytes = 16384 : i64
// CHECK-COUNT-7: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: gpu.return
tile.kernel @sliced_conversion(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<128x128xf32, #a>
  %u = tile.convert_layout %t : tensor<128x128xf32, #a> -> tensor<128x128xf32, #b>
  tile.store %u, %y[%c0, %c0] : tensor<128x128xf32, #b>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [1, 32], warpsPerCTA = [32, 1], order = [1, 0]>
#flat = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [32], order = [0]>

// Staging beyond what the chip gives a block is a diagnostic, not a ptxas
// error.
tile.kernel @too_much_shared(%x: memref<?x?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<256x256xf32, #a>
  // expected-error @+1 {{'tile.reshape' op needs 262144 bytes of shared memory to stage its tiles (kernel @too_much_shared: 262144), more than the}}
  %u = tile.reshape %t : tensor<256x256xf32, #a> -> tensor<65536xf32, #flat>
  tile.store %u, %y[%c0] : tensor<65536xf32, #flat>, memref<?xf32>
  tile.return
}

// -----

#ab = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]>
#wide = #tile.mma<warpsPerCTA = [4, 2], blockN = 32>

// Warp columns 32 apart: no mma.sync computes them, and no wgmma either (its
// warpgroups compute all 128 columns, 64 each).
tile.kernel @unfit_block_n(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %c: memref<?x?xf32>) attributes {tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : index
  %ta = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<64x64xf16, #ab>
  %tb = tile.load %b[%c0, %c0] : memref<?x?xf16> -> tensor<64x128xf16, #ab>
  %z = arith.constant dense<0.0> : tensor<64x128xf32, #wide>
  // expected-error @+1 {{'tile.dot' op has an accumulator layout with blockN = 32 that}}
  %d = tile.dot %ta, %tb, %z : tensor<64x64xf16, #ab>, tensor<64x128xf16, #ab> -> tensor<64x128xf32, #wide>
  tile.store %d, %c[%c0, %c0] : tensor<64x128xf32, #wide>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [1, 1]>

// An mma accumulator that given IR puts on a dot no tensor core computes:
// an N of 1, f32 inputs without tf32 (their k would be 0).
tile.kernel @mma_accumulator_of_one_column(%a: memref<?x?xf32>, %b: memref<?x?xf32>) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %y = tile.load %b[%c0, %c0] : memref<?x?xf32> -> tensor<64x1xf32, #mma>
  // expected-error @+1 {{'tile.dot' op has an mma accumulator layout, but}}
  %d = tile.dot %x, %y, %y : tensor<64x64xf32, #mma>, tensor<64x1xf32, #mma> -> tensor<64x1xf32, #mma>
  tile.store %d, %b[%c0, %c0] : tensor<64x1xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// Warps past the tile: 4 warps of 16 rows for a 16-row accumulator.
tile.kernel @mma_warps_past_the_tile(%a: memref<?x?xf16>, %c: memref<?x?xf32>) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<16x16xf16, #b>
  %y = tile.load %a[%c0, %c0] : memref<?x?xf16> -> tensor<16x8xf16, #b>
  %z = arith.constant dense<0.0> : tensor<16x8xf32, #mma>
  // expected-error @+1 {{'tile.dot' op has an mma accumulator layout of 4x1 warps, whose 64x8 blocks do not tile its 16x8 accumulator}}
  %d = tile.dot %x, %y, %z : tensor<16x16xf16, #b>, tensor<16x8xf16, #b> -> tensor<16x8xf32, #mma>
  tile.store %d, %c[%c0, %c0] : tensor<16x8xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#row4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Views promised to have the shape of argument #0 check their bounds with
// its size: one size for all three accesses.
// CHECK-LABEL: gpu.func @same_shapes
// CHECK-SAME: (%{{arg[0-9]+}}: !llvm.ptr<1>, %[[N:arg[0-9]+]]: i64, %{{arg[0-9]+}}: i64, %{{arg[0-9]+}}: !llvm.ptr<1>, %[[NY:arg[0-9]+]]: i64, %{{arg[0-9]+}}: i64, %{{arg[0-9]+}}: !llvm.ptr<1>, %[[NZ:arg[0-9]+]]: i64,
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[NY]] : i64
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[NZ]] : i64
// CHECK: arith.cmpi ult, %{{.*}}, %[[N]] : i64
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[NY]] : i64
// CHECK-NOT: arith.cmpi ult, %{{.*}}, %[[NZ]] : i64
// CHECK: gpu.return
tile.kernel @same_shapes(%x: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16}, %y: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16, tile.same_shape_as = 0}, %z: memref<?xf32, strided<[1], offset: ?>> {tile.divisibility = 16, tile.same_shape_as = 0}) {
  %pid = tile.program_id {dim = 0}
  %c512 = arith.constant 512 : index
  %off = arith.muli %pid, %c512 : index
  %a = tile.load %x[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  %b = tile.load %y[%off] : memref<?xf32, strided<[1], offset: ?>> -> tensor<512xf32, #row4>
  %s = arith.addf %a, %b : tensor<512xf32, #row4>
  tile.store %s, %z[%off] : tensor<512xf32, #row4>, memref<?xf32, strided<[1], offset: ?>>
  tile.return
}

// -----

#one = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#scalar = #tile.slice<dim = 0, parent = #one>
#row128 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Rank-0 tiles: a full reduction to tensor<f32> reshaped to one element,
// and a rank-0 view loaded and stored whole.
// CHECK-LABEL: gpu.func @scalar_tiles
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.barrier0
// CHECK: gpu.return
tile.kernel @scalar_tiles(%x: memref<?xf32>, %y: memref<?xf32>, %s: memref<f32>, %t: memref<f32>) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %v = tile.load %x[%c0] : memref<?xf32> -> tensor<128xf32, #row128>
  %sum = tile.reduce %v {axis = 0} : tensor<128xf32, #row128> -> tensor<f32, #scalar> {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %b : f32
    tile.yield %r : f32
  }
  %one = tile.reshape %sum : tensor<f32, #scalar> -> tensor<1xf32, #one>
  tile.store %one, %y[%c0] : tensor<1xf32, #one>, memref<?xf32>
  %e = tile.load %s[] : memref<f32> -> tensor<f32, #scalar>
  tile.store %e, %t[] : tensor<f32, #scalar>, memref<f32>
  tile.return
}

// -----

// memref.load and memref.store of a view element address it through the
// view's strides; i1 is a byte in memory (upstream's lowering asserts on i1).
// CHECK-LABEL: gpu.func @element_access
// CHECK: %[[B:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i8
// CHECK: %[[I1:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK: %[[I8:.*]] = arith.extui %[[I1]] : i1 to i8
// CHECK: llvm.store %[[I8]], %{{.*}} : i8, !llvm.ptr<1>
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
tile.kernel @element_access(%x: memref<?xi1, strided<[?], offset: ?>>, %y: memref<?x?xi1, strided<[?, ?], offset: ?>>, %f: memref<?xf32>, %i: index) attributes {tile.num_warps = 4 : i32} {
  %c1 = arith.constant 1 : index
  %v = memref.load %x[%i] : memref<?xi1, strided<[?], offset: ?>>
  memref.store %v, %y[%i, %c1] : memref<?x?xi1, strided<[?, ?], offset: ?>>
  %g = memref.load %f[%i] : memref<?xf32>
  memref.store %g, %f[%c1] : memref<?xf32>
  tile.return
}

// -----

// memref.atomic_rmw addi: the program adds once. A barrier, then the first
// thread adds between two device-scope fences and leaves the old value in
// shared memory, which every thread reads after a second barrier.
// CHECK-LABEL: gpu.func @program_atomic
// CHECK-SAME: tile.shared_bytes = 4 : i64
// CHECK: %[[OLD:.*]] = llvm.getelementptr %{{.*}} : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
// CHECK: nvvm.barrier0
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0_i32
// CHECK: scf.if %[[FIRST]] {
// CHECK: %[[ADDED:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "membar.gl;\0A\09atom.global.add.u32 $0, [$1], $2;\0A\09membar.gl;", "=r,l,r"
// CHECK: llvm.store %[[ADDED]], %[[OLD]] : i32, !llvm.ptr<3>
// CHECK: }
// CHECK: nvvm.barrier0
// CHECK: llvm.load %[[OLD]] : !llvm.ptr<3> -> i32
tile.kernel @program_atomic(%x: memref<?xi32, strided<[?], offset: ?>>, %y: memref<?xi32, strided<[?], offset: ?>>, %i: index) attributes {tile.num_warps = 4 : i32} {
  %one = arith.constant 1 : i32
  %old = memref.atomic_rmw addi %one, %x[%i] : (i32, memref<?xi32, strided<[?], offset: ?>>) -> i32
  memref.store %old, %y[%i] : memref<?xi32, strided<[?], offset: ?>>
  tile.return
}

// -----

tile.kernel @program_atomic_max(%x: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1 : i32
  // expected-error @+1 {{'memref.atomic_rmw' op in a tile.kernel adds to i32 elements only (addi), got maxs of 'i32'}}
  %old = memref.atomic_rmw maxs %one, %x[%c0] : (i32, memref<?xi32>) -> i32
  tile.return
}

// -----

tile.kernel @dynamic_dim(%x: memref<?x?xf32>, %d: index) {
  // expected-error @+1 {{'memref.dim' op needs a constant dimension index in a tile.kernel}}
  %n = memref.dim %x, %d : memref<?x?xf32>
  tile.return
}

// -----

#w2 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [2], order = [0]>
#w8 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [8], order = [0]>

// Each kernel's block is its own tile.num_warps (or its widest layout's).
// CHECK-LABEL: gpu.func @two_warps
// CHECK-SAME: nvvm.reqntid = array<i32: 64>
// CHECK-LABEL: gpu.func @eight_warps
// CHECK-SAME: nvvm.reqntid = array<i32: 256>
tile.kernel @two_warps(%x: memref<?xf32>) attributes {tile.num_warps = 2 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<64xf32, #w2>
  tile.store %t, %x[%c0] : tensor<64xf32, #w2>, memref<?xf32>
  tile.return
}
tile.kernel @eight_warps(%x: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<256xf32, #w8>
  tile.store %t, %x[%c0] : tensor<256xf32, #w8>, memref<?xf32>
  tile.return
}

// -----

#warp = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// A tile offset that may be negative (a tile partly before the view) adds
// the thread's coordinate without `nuw`: the index may wrap unsigned, and the
// unsigned bounds check must see it (nuw let LLVM fold the check to false).
// A non-negative offset keeps nuw.
// CHECK-LABEL: gpu.func @negative_offset
// CHECK: %[[FIRST:.*]] = arith.addi %{{.*}}, %{{.*}} overflow<nsw> : i64
// CHECK: arith.cmpi ult, %[[FIRST]], %{{.*}} : i64
// CHECK: %[[STORE:.*]] = arith.addi %{{.*}}, %{{.*}} overflow<nsw, nuw> : i64
// CHECK: arith.cmpi ult, %[[STORE]], %{{.*}} : i64
tile.kernel @negative_offset(%x: memref<?xf32>, %y: memref<?xf32>) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %cm1 = arith.constant -1 : index
  %t = tile.load %x[%cm1] : memref<?xf32> -> tensor<32xf32, #warp>
  tile.store %t, %y[%c0] : tensor<32xf32, #warp>, memref<?xf32>
  tile.return
}

// -----

#cast = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// Float -> i1 goes through i32 (NVPTX miscompiles fptoui/fptosi to i1).
// CHECK-LABEL: gpu.func @float_to_bool
// CHECK-NOT: arith.fptoui {{.*}} to i1
// CHECK: %[[U:.*]] = arith.fptoui %{{.*}} : vector<1xf32> to vector<1xi32>
// CHECK: arith.trunci %[[U]] : vector<1xi32> to vector<1xi1>
// CHECK: %[[S:.*]] = arith.fptosi %{{.*}} : f32 to i32
// CHECK: arith.trunci %[[S]] : i32 to i1
tile.kernel @float_to_bool(%x: memref<?xf32>, %y: memref<?xi1>, %f: f32) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<32xf32, #cast>
  %b = arith.fptoui %t : tensor<32xf32, #cast> to tensor<32xi1, #cast>
  tile.store %b, %y[%c0] : tensor<32xi1, #cast>, memref<?xi1>
  %s = arith.fptosi %f : f32 to i1
  memref.store %s, %y[%c0] : memref<?xi1>
  tile.return
}

// -----

#tobf16 = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// i1 -> bf16 sitofp is a select of -1.0 and 0.0 (NVPTX converts it as
// unsigned on sm_90), tiles and scalars.
// CHECK-LABEL: gpu.func @bool_to_bf16
// CHECK-NOT: arith.sitofp
// CHECK-DAG: %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<1xbf16>
// CHECK-DAG: %[[M:.*]] = arith.constant dense<-1.000000e+00> : vector<1xbf16>
// CHECK: arith.select %{{.*}}, %[[M]], %[[Z]] : vector<1xi1>, vector<1xbf16>
// CHECK-DAG: %[[SZ:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK-DAG: %[[SM:.*]] = arith.constant -1.000000e+00 : bf16
// CHECK: arith.select %{{.*}}, %[[SM]], %[[SZ]] : bf16
tile.kernel @bool_to_bf16(%x: memref<?xi1>, %y: memref<?xbf16>, %b: i1) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xi1> -> tensor<32xi1, #tobf16>
  %f = arith.sitofp %t : tensor<32xi1, #tobf16> to tensor<32xbf16, #tobf16>
  tile.store %f, %y[%c0] : tensor<32xbf16, #tobf16>, memref<?xbf16>
  %s = arith.sitofp %b : i1 to bf16
  memref.store %s, %y[%c0] : memref<?xbf16>
  tile.return
}

// -----

#shifts = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// Shifts by amounts that may be out of range shift by the amount clamped to
// bits - 1; shli and shrui then select 0 where it was out of range (torch's
// results), shrsi keeps the sign. shli drops nsw. A constant amount in range
// stays as it is.
// CHECK-LABEL: gpu.func @shifts
// CHECK: %[[TOP:.*]] = arith.constant dense<63> : vector<1xi64>
// CHECK: %[[A:.*]] = arith.minui %[[S:.*]], %[[TOP]] : vector<1xi64>
// CHECK: %[[L:.*]] = arith.shli %[[S]], %[[A]] : vector<1xi64>
// CHECK: %[[W:.*]] = arith.constant dense<64> : vector<1xi64>
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[S]], %[[W]] : vector<1xi64>
// CHECK: %[[Z:.*]] = arith.constant dense<0> : vector<1xi64>
// CHECK: %[[G:.*]] = arith.select %[[IN]], %[[L]], %[[Z]]
// CHECK: %[[A2:.*]] = arith.minui %[[S]], %{{.*}} : vector<1xi64>
// CHECK-NEXT: arith.shrsi %[[G]], %[[A2]] : vector<1xi64>
// CHECK-NOT: arith.select
// CHECK: %[[N:.*]] = arith.shli %{{.*}}, %c3_i32 : i32
// CHECK: %[[K:.*]] = arith.minui %[[AMT:.*]], %c31{{.*}} : i32
// CHECK: %[[U:.*]] = arith.shrui %[[N]], %[[K]] : i32
// CHECK: %[[IN2:.*]] = arith.cmpi ult, %[[AMT]], %c32{{.*}} : i32
// CHECK: arith.select %[[IN2]], %[[U]], %c0{{.*}} : i32
tile.kernel @shifts(%x: memref<?xi64>, %y: memref<?xi64>, %n: i32, %k: i32) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xi64> -> tensor<32xi64, #shifts>
  %l = arith.shli %t, %t : tensor<32xi64, #shifts>
  %r = arith.shrsi %l, %t : tensor<32xi64, #shifts>
  tile.store %r, %y[%c0] : tensor<32xi64, #shifts>, memref<?xi64>
  %c3 = arith.constant 3 : i32
  %s = arith.shli %n, %c3 overflow<nsw> : i32
  %u = arith.shrui %s, %k : i32
  %i = arith.index_cast %u : i32 to index
  %v = memref.load %x[%i] : memref<?xi64>
  memref.store %v, %y[%c0] : memref<?xi64>
  tile.return
}

// -----

#abs = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// Integer abs is max(x, 0 - x): the NVVM path has no lowering of math.absi.
// CHECK-LABEL: gpu.func @integer_abs
// CHECK-NOT: math.absi
// CHECK: %[[N:.*]] = arith.subi %{{.*}}, %[[X:.*]] : vector<1xi32>
// CHECK: arith.maxsi %[[X]], %[[N]] : vector<1xi32>
tile.kernel @integer_abs(%x: memref<?xi32>, %y: memref<?xi32>) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xi32> -> tensor<32xi32, #abs>
  %a = math.absi %t : tensor<32xi32, #abs>
  tile.store %a, %y[%c0] : tensor<32xi32, #abs>, memref<?xi32>
  tile.return
}

// -----

#rem = #tile.blocked<sizePerThread = [2], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// arith.remf runs per element, which convert-gpu-to-nvvm makes libdevice's
// exact fmod: NVPTX expands a vector frem as x - trunc(x / y) * y.
// CHECK-LABEL: gpu.func @float_remainder
// CHECK-COUNT-2: arith.remf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.remf
// CHECK: gpu.return
tile.kernel @float_remainder(%x: memref<?xf32>, %y: memref<?xf32>) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<64xf32, #rem>
  %r = arith.remf %t, %t : tensor<64xf32, #rem>
  tile.store %r, %y[%c0] : tensor<64xf32, #rem>, memref<?xf32>
  tile.return
}

// -----

#g = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]>

// A gather loads each element at the address its indices give, predicated
// on every index lying in the view (unsigned: a negative index too).
// CHECK-LABEL: gpu.func @gather
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i64
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i64
// CHECK: arith.andi
// CHECK: llvm.getelementptr
// CHECK: llvm.inline_asm has_side_effects {{.*}}"mov.b32 $0, $3;\0A\09@$2 ld.global.b32 $0, [$1];"
tile.kernel @gather(%x: memref<?x?xf32>, %y: memref<?xf32>, %r: memref<?xi32>) attributes {tile.num_warps = 1 : i32} {
  %c0 = arith.constant 0 : index
  %rows = tile.load %r[%c0] : memref<?xi32> -> tensor<32xi32, #g>
  %cols = tile.iota : tensor<32xi32, #g>
  %t = tile.gather %x[%rows, %cols] : memref<?x?xf32>, tensor<32xi32, #g>, tensor<32xi32, #g> -> tensor<32xf32, #g>
  tile.store %t, %y[%c0] : tensor<32xf32, #g>, memref<?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A K loop whose operands arrive by cp.async is pipelined num-stages (3)
// deep: the prologue copies iterations 0 and 1 (a commit group each) into
// the ring's two slots (mma.sync reads a slot into registers, so the ring
// has one slot fewer than stages); each iteration waits for its own group
// (wait_group 1), passes a barrier, runs the dot on its slot, which the
// loop carries, reading its swizzled rows (XOR) with ldmatrix, passes a
// barrier again and refills that slot with iteration k + 2 (zero bytes
// past the end); the ring drains after the loop.
// On sm_90a the wgmma keeps running into the next iteration (wait_group 1):
// its slot is refilled one iteration later, so the prologue copies one
// iteration, each iteration waits for all its copies (wait_group 0) and
// refills the slot two behind; after the loop wait_group 0 takes the
// accumulators before the store reads them.
// CHECK-LABEL: gpu.func @pipelined_k_loop
// CHECK-SAME: tile.shared_bytes = 16384 : i64
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for {{.*}} iter_args({{.*}}, %[[SLOT:.*]] = %{{.*}}) -> ({{(f32, )+}}i32)
// CHECK: nvvm.cp.async.wait.group 1
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT: nvvm.cp.async
// CHECK: arith.xori
// CHECK: nvvm.ldmatrix
// CHECK: arith.xori %{{.*}}, %c32_i32
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: nvvm.ldmatrix
// CHECK-NOT: nvvm.cp.async
// CHECK: nvvm.barrier0
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.cp.async.wait.group
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// WGMMA-LABEL: gpu.func @pipelined_k_loop
// WGMMA-SAME: tile.shared_bytes = 24576 : i64
// WGMMA: nvvm.cp.async.commit.group
// WGMMA-NOT: nvvm.cp.async.commit.group
// WGMMA: scf.for
// WGMMA: nvvm.cp.async.wait.group 0
// WGMMA-NEXT: fence.proxy.async.shared::cta;
// WGMMA-NEXT: nvvm.barrier0
// WGMMA-NOT: nvvm.barrier0
// WGMMA: nvvm.cp.async.commit.group
// WGMMA: wgmma.mma_async
// WGMMA: wgmma.wait_group.sync.aligned 1;
// WGMMA: scf.yield
// WGMMA: %[[WAITED:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;"
// WGMMA-NEXT: llvm.extractvalue %[[WAITED]][0]
// WGMMA: nvvm.cp.async.wait.group 0
// WGMMA: st.global
// With TMA (the default on sm_90a) the kernel takes one tensor map per view
// and box, last; the first thread initialises one mbarrier per ring slot
// (two copies arrive on each) and issues every copy, a box per swizzle atom
// into wgmma's layout, with the slot's byte count; each iteration refills
// the free slot, then waits for its own slot's phase (the parity flips at
// each wrap). After the loop (in the branch taken where it runs, which the
// wait for the wgmma dot is in) the mbarriers are invalidated for reuse,
// whether it ran or not.
// TMA-LABEL: gpu.func @pipelined_k_loop(
// TMA-SAME: %[[AMAP:[a-z0-9]+]]: !llvm.ptr, %[[BMAP:[a-z0-9]+]]: !llvm.ptr) kernel
// TMA-SAME: tile.shared_bytes = 24600 : i64, tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 0 : i64}]
// TMA-NOT: nvvm.cp.async
// TMA: @p mbarrier.init.shared::cta.b64 [$1], 2;\0A@p mbarrier.init.shared::cta.b64 [$2], 2;\0A@p mbarrier.init.shared::cta.b64 [$3], 2;\0A@p fence.mbarrier_init.release.cluster;
// TMA: "{\0A.reg .pred p;\0Asetp.ne.b32 p, $0, 0;\0A@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], 4096;\0A@p cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$3], [$2, {$4, $5}], [$1];\0A}", "r,r,l,r,r,r" %{{.*}}, %{{.*}}, %[[AMAP]],
// TMA: cp.async.bulk.tensor{{.*}} %[[BMAP]],
// TMA-NOT: cp.async.bulk.tensor
// TMA: scf.for {{.*}} -> ({{(f32, )+}}i32, i32)
// TMA: nvvm.barrier0
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;
// TMA: wgmma.mma_async
// TMA: wgmma.wait_group.sync.aligned 1;
// TMA: scf.yield
// TMA: wgmma.wait_group.sync.aligned 0;
// TMA: } else {
// TMA: nvvm.barrier0
// TMA: @p mbarrier.inval.shared::cta.b64 [$1];\0A@p mbarrier.inval.shared::cta.b64 [$2];\0A@p mbarrier.inval.shared::cta.b64 [$3];
tile.kernel @pipelined_k_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// One stage on sm_90a: a TMA ring of one slot, whose mbarrier (two copies
// arrive on it) is initialised before the loop, after a barrier, as no
// prologue does; each iteration passes a barrier (every warp is done with
// the slot), copies both boxes, waits for them and runs its wgmma to the end.
// TMA-LABEL: gpu.func @one_stage_tma_loop
// TMA-SAME: tile.shared_bytes = 8200 : i64
// TMA-NOT: nvvm.cp.async
// TMA: nvvm.barrier0
// TMA: @p mbarrier.init.shared::cta.b64 [$1], 2;\0A@p fence.mbarrier_init.release.cluster;
// TMA-NOT: cp.async.bulk.tensor
// TMA: scf.for
// TMA: nvvm.barrier0
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;
// TMA: wgmma.mma_async
// TMA: wgmma.wait_group.sync.aligned 0;
// TMA: scf.yield
// TMA: @p mbarrier.inval.shared::cta.b64 [$1];
tile.kernel @one_stage_tma_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>) attributes {tile.num_stages = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// A load that two dots read as their lhs (the parts of a 64 x 128 block) is
// copied once a stage, into the first dot's staging area, where the second
// reads it (tile.borrowed_operands): a slot holds a, b0 (the first dot's)
// and b1 (the second's), 3 x 4096 bytes, not 4 x 4096. mma.sync's ring has
// two slots: 2 x (8192 + 4096). Each stage copies the three loads, and
// nothing in the loop stages an operand from registers.
// CHECK-LABEL: gpu.func @shared_lhs_k_loop
// CHECK-SAME: tile.shared_bytes = 24576 : i64
// CHECK-COUNT-6: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK-COUNT-6: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT: llvm.store
// CHECK: nvvm.barrier0
// CHECK-COUNT-6: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.yield
// On sm_90a each slot's areas are 1024-byte aligned (three slots of 8192 +
// 4096), and the two wgmma dots keep running into the next iteration: each
// waits until two groups are left (this iteration's). After the loop one
// wait_group 0 takes both accumulators, in a branch taken only where the
// loop runs: the other yields the zeros (guardTrips).
// WGMMA-LABEL: gpu.func @shared_lhs_k_loop
// WGMMA-SAME: tile.shared_bytes = 36864 : i64
// WGMMA: scf.for
// WGMMA-NOT: llvm.store
// WGMMA: wgmma.wait_group.sync.aligned 2;
// WGMMA-NOT: llvm.store
// WGMMA: wgmma.wait_group.sync.aligned 2;
// WGMMA: scf.yield
// WGMMA: wgmma.wait_group.sync.aligned 0;
// WGMMA-NOT: wgmma.wait_group
// WGMMA: } else {
// WGMMA-NOT: wgmma.wait_group
// WGMMA: gpu.return
// With TMA, one box a load (b0 and b1 share a map), three copies arriving on
// each slot's mbarrier.
// TMA-LABEL: gpu.func @shared_lhs_k_loop(
// TMA-SAME: tile.shared_bytes = 36888 : i64, tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 0 : i64}]
// TMA: mbarrier.init.shared::cta.b64 [$1], 3;
// TMA: scf.for
// TMA-COUNT-3: cp.async.bulk.tensor
// TMA-NOT: cp.async.bulk.tensor
// TMA: scf.yield
tile.kernel @shared_lhs_k_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r:2 = scf.for %i = %c0 to %k step %c32 iter_args(%acc0 = %z, %acc1 = %z) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b0 = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %b1 = tile.load %x[%i, %c64] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d0 = tile.dot %a, %b0, %acc0 : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %d1 = tile.dot %a, %b1, %acc1 : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d0, %d1 : tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>
  }
  tile.store %r#0, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.store %r#1, %y[%c0, %c64] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// Without whole 16-byte runs (no tile.size_divisibility) a run may straddle
// the view's end: its cp.async copies the elements before the end (at most
// the run's 8, 2 bytes each) and zero-fills the rest, so the loop is still
// pipelined. TMA's boxes read past the end as zeros.
// CHECK-LABEL: gpu.func @straddling_k_loop
// CHECK: %[[LEFT:.*]] = arith.subi %arg2, %{{.*}} : i64
// CHECK: %[[INSIDE:.*]] = arith.minui %[[LEFT]], %c8_i64{{.*}} : i64
// CHECK: %[[ELEMS:.*]] = arith.trunci %[[INSIDE]] : i64 to i32
// CHECK: %[[BYTES:.*]] = arith.muli %[[ELEMS]], %c2_i32{{.*}} : i32
// CHECK: %[[SIZE:.*]] = arith.select %{{.*}}, %[[BYTES]], %c0_i32{{.*}} : i32
// CHECK: %[[OWN:.*]] = arith.select %{{.*}}, %[[SIZE]], %c0_i32{{.*}} : i32
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %[[OWN]]
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// WGMMA-LABEL: gpu.func @straddling_k_loop
// WGMMA-NOT: tile.tensor_maps
// WGMMA: arith.minui %{{.*}}, %c8_i64{{.*}} : i64
// WGMMA: nvvm.cp.async.shared.global
// WGMMA: scf.for
// WGMMA: nvvm.cp.async.wait.group 0
// TMA-LABEL: gpu.func @straddling_k_loop
// TMA-SAME: tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 0 : i64}]
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: scf.for
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: mbarrier.try_wait.parity
tile.kernel @straddling_k_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// A reduction between A's load and the dot uses shared memory, which would
// overwrite A's staging area: A still copies when the loop pipelines, since
// its ring slot lies apart from the reduction's scratch (placed after the
// ring); with one stage it goes through registers and only B copies.
// CHECK-LABEL: gpu.func @ring_only_copy
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.ldmatrix
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK-LABEL: gpu.func @ring_only_copy_one_stage
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK-NOT: nvvm.cp.async.shared.global
// CHECK: gpu.return
tile.kernel @ring_only_copy(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>, %s: memref<?xf16, strided<[1], offset: ?>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %z1 = arith.constant dense<0.0> : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
  %r:2 = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z, %sum = %z1) -> (tensor<64x64xf32, #mma>, tensor<32xf16, #tile.slice<dim = 0, parent = #a>>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %o = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %m = tile.reduce %o {axis = 0 : i64} : tensor<64x32xf16, #a> -> tensor<32xf16, #tile.slice<dim = 0, parent = #a>> {
    ^bb0(%p: f16, %q: f16):
      %t = arith.addf %p, %q : f16
      tile.yield %t : f16
    }
    %sum2 = arith.addf %sum, %m : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d, %sum2 : tensor<64x64xf32, #mma>, tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
  }
  tile.store %r#0, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.store %r#1, %s[%c0] : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>, memref<?xf16, strided<[1], offset: ?>>
  tile.return
}
tile.kernel @ring_only_copy_one_stage(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>, %s: memref<?xf16, strided<[1], offset: ?>>) attributes {tile.num_stages = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %z1 = arith.constant dense<0.0> : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
  %r:2 = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z, %sum = %z1) -> (tensor<64x64xf32, #mma>, tensor<32xf16, #tile.slice<dim = 0, parent = #a>>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %o = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %m = tile.reduce %o {axis = 0 : i64} : tensor<64x32xf16, #a> -> tensor<32xf16, #tile.slice<dim = 0, parent = #a>> {
    ^bb0(%p: f16, %q: f16):
      %t = arith.addf %p, %q : f16
      tile.yield %t : f16
    }
    %sum2 = arith.addf %sum, %m : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d, %sum2 : tensor<64x64xf32, #mma>, tensor<32xf16, #tile.slice<dim = 0, parent = #a>>
  }
  tile.store %r#0, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.store %r#1, %s[%c0] : tensor<32xf16, #tile.slice<dim = 0, parent = #a>>, memref<?xf16, strided<[1], offset: ?>>
  tile.return
}


// A loop whose copies' offsets come from a scalar it carries (a persistent
// kernel's k offset, which restarts at each tile) is pipelined too: each
// prologue copy computes the scalar's next value (the select), and the loop
// carries it two iterations ahead (index) before its ring slot; with TMA as
// well, and a producer warp carries its own. The loop's store, through
// another view, does not stop it (views are not ordered against each
// other). The accumulator's restart from zeros, which canonicalization made
// a select after the branch that stores it, moves back into the branch,
// whose zeros are an opaque copy (LLVM would make a select of constants
// again): the accumulator dies at the store. With wgmma, the branch copies
// the thread's lane and warp and the view's sizes and strides at its start,
// so that LLVM does not hoist the store's addresses out of the loop, where
// they would hold registers beside the wgmma's accumulator; with mma.sync it
// does not.
// CHECK-LABEL: gpu.func @persistent_k_loop
// CHECK: arith.select %{{.*}}, %c0, %{{.*}} : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: %[[AHEAD:.*]] = arith.select %{{.*}}, %c0, %{{.*}} : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %c0, %{{.*}} = %[[AHEAD]], %{{.*}} = %{{.*}}) -> ({{(f32, )+}}index, index, i32)
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: arith.select %{{.*}}, %c0, %{{.*}} : index
// CHECK-COUNT-4: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.if %{{.*}} -> (vector<32xf32>) {
// CHECK-NOT: "mov.b{{32|64}} $0, $1;"
// CHECK: st.global.v2.b32
// CHECK: %[[ZERO:.*]] = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, $1;", "=f,f"
// CHECK-NEXT: %[[ZEROS:.*]] = vector.broadcast %[[ZERO]] : f32 to vector<32xf32>
// CHECK-NEXT: scf.yield %[[ZEROS]]
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %{{.*}} : vector<32xf32>
// CHECK: nvvm.cp.async.wait.group 0
// WGMMA-LABEL: gpu.func @persistent_k_loop
// WGMMA: scf.if %{{.*}} -> (vector<32xf32>) {
// WGMMA-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "mov.b{{32|64}} $0, $1;"
// WGMMA-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "mov.b{{32|64}} $0, $1;"
// WGMMA-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "mov.b{{32|64}} $0, $1;"
// WGMMA: wgmma.wait_group.sync.aligned 0
// WGMMA: st.global
// TMA-LABEL: gpu.func @persistent_k_loop
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: scf.for {{.*}} -> ({{(f32, )+}}index, index, i32, i32)
// TMA-COUNT-2: cp.async.bulk.tensor
// TMA: mbarrier.try_wait.parity
// WS-LABEL: gpu.func @persistent_k_loop
// WS: scf.for {{.*}} -> ({{(f32, )+}}index, i32, i32)
// WS: scf.for {{.*}} iter_args(%{{.*}} = %c0, %{{.*}} = %c0_i32{{.*}}, %{{.*}} = %c0_i32{{.*}}) -> (index, i32, i32)
// WS: mbarrier.try_wait.parity
// WS-COUNT-2: cp.async.bulk.tensor
tile.kernel @persistent_k_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z, %kk = %c0) -> (tensor<64x64xf32, #mma>, index) {
    %a = tile.load %x[%c0, %kk] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%kk, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %next = arith.addi %kk, %c32 : index
    %last = arith.cmpi sge, %next, %k : index
    %restart = arith.select %last, %z, %d : tensor<64x64xf32, #mma>
    scf.if %last {
      tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
    }
    %kk2 = arith.select %last, %c0, %next : index
    scf.yield %restart, %kk2 : tensor<64x64xf32, #mma>, index
  }
  tile.return
}

// The same loop with its k offset yielded by the branch that stores (as
// canonicalization merges branches on one condition) is pipelined too: the
// offset moves into a branch of its own, which runs before the storing one
// and, computing no tile, again for each prefetch; and so with a branch that
// only computes the offset (on a condition of its own).
// CHECK-LABEL: gpu.func @k_offset_from_branches
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK: scf.if %{{.*}} -> (index, vector<32xf32>) {
// CHECK: st.global
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: scf.if %{{.*}} -> (index) {
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 0
// TMA-LABEL: gpu.func @k_offset_from_branches
// TMA: scf.for
// TMA: mbarrier.try_wait.parity
// TMA: scf.for
// TMA: mbarrier.try_wait.parity
tile.kernel @k_offset_from_branches(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z, %kk = %c0) -> (tensor<64x64xf32, #mma>, index) {
    %a = tile.load %x[%c0, %kk] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%kk, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %next = arith.addi %kk, %c32 : index
    %last = arith.cmpi sge, %next, %k : index
    %restart = arith.select %last, %z, %d : tensor<64x64xf32, #mma>
    %kk2 = scf.if %last -> (index) {
      tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
      scf.yield %c0 : index
    } else {
      scf.yield %next : index
    }
    scf.yield %restart, %kk2 : tensor<64x64xf32, #mma>, index
  }
  %s:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z, %kk = %c0) -> (tensor<64x64xf32, #mma>, index) {
    %a = tile.load %x[%c0, %kk] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%kk, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %next = arith.addi %kk, %c32 : index
    %more = arith.cmpi slt, %next, %k : index
    %kk2 = scf.if %more -> (index) {
      %again = arith.addi %kk, %c32 : index
      scf.yield %again : index
    } else {
      scf.yield %c0 : index
    }
    scf.yield %d, %kk2 : tensor<64x64xf32, #mma>, index
  }
  tile.store %s#0, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// A store that adds (f32 or i32) adds each element atomically where a store
// would write it, one red.global.add an element with its bound check as the
// predicate. A thread's 4 contiguous elements would be 4 adds whose lanes lie
// 16 bytes apart (4x the sectors): they go through shared memory (vectors in,
// one element a lane out, no vector version) so that a warp's lanes add
// consecutive elements.
// CHECK-LABEL: gpu.func @store_add
// CHECK-NOT: red.global
// CHECK: llvm.store {{.*}} : vector<4xf32>, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-4: llvm.load {{.*}} : !llvm.ptr<3> -> f32
// CHECK-COUNT-4: "@$1 red.global.add.f32 [$0+0], $2;", "l,b,f"
// CHECK-NOT: red.global.add.f32
// CHECK: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// CHECK-COUNT-4: "@$1 red.global.add.s32 [$0+0], $2;", "l,b,r"
// CHECK-NOT: st.global
// CHECK-NOT: red.global
// CHECK: gpu.return
// sm_90 adds the aligned run of f32 in one vector (and a run across the
// view's end element by element); i32 has no vector add and is restaged.
// WGMMA-LABEL: gpu.func @store_add
// WGMMA: "@$1 red.global.add.v4.f32 [$0], {$2, $3, $4, $5};", "l,b,f,f,f,f"
// WGMMA: "@$1 red.global.add.f32 [$0+0], $2;", "l,b,f"
// WGMMA: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// WGMMA-COUNT-4: "@$1 red.global.add.s32 [$0+0], $2;", "l,b,r"
#vec4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
tile.kernel @store_add(%y: memref<?xf32>, %z: memref<?xi32>, %s: f32, %i: i32) {
  %c0 = arith.constant 0 : index
  %t = tile.splat %s : f32 -> tensor<512xf32, #vec4>
  tile.store %t, %y[%c0] {add} : tensor<512xf32, #vec4>, memref<?xf32>
  %u = tile.splat %i : i32 -> tensor<512xi32, #vec4>
  tile.store %u, %z[%c0] {add} : tensor<512xi32, #vec4>, memref<?xi32>
  tile.return
}

// An mma layout of fewer warps than the kernel's (a 16x16 tile: 2 of 4
// warps) repeats in the warps after it; a store (and an add, which would
// count every repeat) is made by the layout's own warps alone.
// It adds a fragment's pairs of f32, on sm_90 two in an instruction.
// CHECK-LABEL: gpu.func @store_from_repeating_warps
// CHECK: %[[WARP:.*]] = arith.shrui %{{.*}}, %c5_i32
// CHECK: %[[OWNER:.*]] = arith.cmpi ult, %[[WARP]], %c2_i32
// CHECK: arith.andi %{{.*}}, %[[OWNER]]
// CHECK: "@$1 red.global.add.f32 [$0+0], $2;\0A\09@$1 red.global.add.f32 [$0+4], $3;"
// WGMMA-LABEL: gpu.func @store_from_repeating_warps
// WGMMA-COUNT-2: "@$1 red.global.add.v2.f32 [$0], {$2, $3};"
#mma16 = #tile.mma<warpsPerCTA = [1, 2]>
tile.kernel @store_from_repeating_warps(%y: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %s: f32) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %t = tile.splat %s : f32 -> tensor<16x16xf32, #mma16>
  tile.store %t, %y[%c0, %c0] {add} : tensor<16x16xf32, #mma16>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// A branch outside loops computes its addresses where LLVM puts them.
// WGMMA-LABEL: gpu.func @branch_outside_loops
// WGMMA: scf.if
// WGMMA-NOT: "mov.b{{32|64}} $0, $1;"
// WGMMA: st.global
#vec = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
tile.kernel @branch_outside_loops(%y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %p = tile.program_id {dim = 0}
  %first = arith.cmpi eq, %p, %c0 : index
  scf.if %first {
    %z = arith.constant dense<1.0> : tensor<512xf32, #vec>
    tile.store %z, %y[%c0] : tensor<512xf32, #vec>, memref<?xf32>
  }
  tile.return
}

// A loop that stores through the view its copies read is not pipelined:
// the copies of later iterations would read before the store.
// CHECK-LABEL: gpu.func @k_loop_storing_its_operand
// CHECK-NOT: nvvm.cp.async
// CHECK: gpu.return
// TMA-LABEL: gpu.func @k_loop_storing_its_operand
// TMA-NOT: cp.async.bulk.tensor
// TMA: gpu.return
tile.kernel @k_loop_storing_its_operand(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %n: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %h = arith.truncf %d : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    tile.store %h, %x[%c0, %i] : tensor<64x64xf16, #mma>, memref<?x?xf16, strided<[?, 1], offset: ?>>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.return
}
// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// An unsigned i32 loop pipelines too: its shifted induction variables are
// i32, compared with its bound unsigned, and it stays unsigned.
// CHECK-LABEL: gpu.func @pipelined_i32_loop
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
// CHECK: scf.for unsigned {{.*}} : i32
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: arith.cmpi ult, %{{.*}}, %{{.*}} : i32
tile.kernel @pipelined_i32_loop(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>, %k: i32) {
  %c0 = arith.constant 0 : index
  %c0_i32 = arith.constant 0 : i32
  %c32_i32 = arith.constant 32 : i32
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for unsigned %i = %c0_i32 to %k step %c32_i32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) : i32 {
    %o = arith.index_cast %i : i32 to index
    %a = tile.load %x[%c0, %o] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %x[%o, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// An f16 accumulator goes two to a b32 register (f16x2) into mma.sync's
// .f16 form (16 rows and 64 columns per warp: 8 blocks, 2 k16 steps), and
// on sm_90a into wgmma's (m64n64: 16 registers instead of 32).
// CHECK-LABEL: gpu.func @mma_dot_f16_acc
// CHECK-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {$0, $1}, {$2, $3, $4, $5}, {$6, $7}, {$8, $9};
// CHECK-NOT: mma.sync
// WGMMA-LABEL: gpu.func @mma_dot_f16_acc
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, $16, $17, 0, 1, 1, 0, 1;
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, $16, $17, 1, 1, 1, 0, 1;
// WGMMA: wgmma.wait_group.sync.aligned 0;
// WGMMA-NOT: mma.sync
tile.kernel @mma_dot_f16_acc(%x: memref<?x?xf16>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf16, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf16, #mma>
  tile.store %d, %x[%c0, %c0] : tensor<64x64xf16, #mma>, memref<?x?xf16>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [2, 2]>

// tf32: m16n8k8 on f32 operands staged in swizzled 16-byte chunks. A
// comes through ldmatrix (a 16-byte row holds 4 elements), B one b32 load
// per register (ldmatrix cannot transpose 32-bit elements), and every
// fragment register is rounded to tf32 first (mma.sync would truncate):
// 2 x 4 blocks per warp, 2 k8 steps, on sm_80 and sm_90a alike.
// CHECK-LABEL: gpu.func @mma_dot_tf32
// CHECK-COUNT-2: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK-COUNT-8: cvt.rna.tf32.f32 $0, $1;
// CHECK-COUNT-8: llvm.load {{.*}} : !llvm.ptr<3> -> i32
// CHECK-COUNT-8: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};
// WGMMA-LABEL: gpu.func @mma_dot_tf32
// WGMMA-COUNT-16: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// WGMMA-NOT: wgmma
// WGMMA: gpu.return
tile.kernel @mma_dot_tf32(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x16xf32, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<16x64xf32, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z input_precision = tf32 : tensor<64x16xf32, #a>, tensor<16x64xf32, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %x[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// tf32 on a warpgroup: mma.sync's m16n8k8 on sm_80 (inputs rounded), wgmma
// m64n64k8 .tf32 on sm_90a, which reads both operands K-major and truncates
// them (no rounding, no transpose flags). B is staged transposed: each
// element goes by its own 4-byte cp.async (.ca) to its row n, column k,
// while A, without alignment promises, goes through registers.
// CHECK-LABEL: gpu.func @wgmma_dot_tf32
// CHECK: cvt.rna.tf32.f32
// CHECK: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// WGMMA-LABEL: gpu.func @wgmma_dot_tf32
// WGMMA-COUNT-2: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 4, cache = ca, %{{.*}}
// WGMMA-NOT: cvt.rna
// WGMMA: llvm.store {{.*}} : vector<4xf32>, !llvm.ptr<3>
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {{.*}}, $32, $33, 1, 1, 1;
// WGMMA-NOT: mma.sync
// WGMMA: gpu.return
// TMA-LABEL: gpu.func @wgmma_dot_tf32
// TMA-NOT: cp.async.bulk
// TMA: wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32
tile.kernel @wgmma_dot_tf32(%x: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x16xf32, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<16x64xf32, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %a, %b, %z input_precision = tf32 : tensor<64x16xf32, #a>, tensor<16x64xf32, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %x[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [2, 2]>

// i8: m16n8k32 with s32 accumulators that wrap (no .satfinite). A comes
// through ldmatrix as 16-bit data (a 16-byte row holds 16 elements, and an
// 8-bit fragment register is 4 of them along K); B, whose fragment register
// is also 4 elements along K, is staged K-major (byte stores, transposed)
// and comes through ldmatrix without .trans: 2 x 4 blocks per warp, one k32
// step; 2 x 2 warps are no warpgroup, so sm_90a runs mma.sync too.
// CHECK-LABEL: gpu.func @mma_dot_i8
// CHECK: llvm.store {{.*}} : i8, !llvm.ptr<3>
// CHECK: nvvm.barrier
// CHECK-NOT: mma_layout<col>
// CHECK-COUNT-4: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32
// CHECK-NOT: mma_layout<col>
// CHECK-COUNT-8: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};
// WGMMA-LABEL: gpu.func @mma_dot_i8
// WGMMA-COUNT-8: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// WGMMA-NOT: wgmma
// WGMMA: gpu.return
tile.kernel @mma_dot_i8(%x: memref<?x?xi8>, %y: memref<?x?xi32>) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xi8> -> tensor<64x32xi8, #a>
  %b = tile.load %x[%c0, %c0] : memref<?x?xi8> -> tensor<32x64xi8, #b>
  %z = arith.constant dense<0> : tensor<64x64xi32, #mma>
  %d = tile.dot %a, %b, %z : tensor<64x32xi8, #a>, tensor<32x64xi8, #b> -> tensor<64x64xi32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xi32, #mma>, memref<?x?xi32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 16], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#bt = #tile.blocked<sizePerThread = [16, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 4], order = [0, 1]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// i8 on a warpgroup, B K-major in memory (a linear layer's weight): wgmma
// m64n64k32 .s32.s8.s8, which takes no scales of A and B and no transpose
// flags (both operands K-major), two k32 steps a k step of the loop. Both
// operands are copied as they are: by cp.async 16 bytes
// at a time (sm_80, where mma.sync reads them), by TMA boxes (sm_90a), B's
// over the view's dimensions (1, 0).
// CHECK-LABEL: gpu.func @kmajor_rhs_i8
// CHECK-COUNT-2: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg
// CHECK: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// WGMMA-LABEL: gpu.func @kmajor_rhs_i8
// WGMMA-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {{.*}}, $32, $33, 1;
// TMA-LABEL: gpu.func @kmajor_rhs_i8
// TMA-SAME: tile.tensor_maps = [{box = array<i64: 64, 64>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 64, 64>, dims = array<i64: 1, 0>, swizzle = 64 : i64, view = 1 : i64}]
// TMA: cp.async.bulk.tensor
// TMA: wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8
tile.kernel @kmajor_rhs_i8(%x: memref<?x?xi8, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %w: memref<?x?xi8, strided<[1, ?], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %k = memref.dim %x, %c1 : memref<?x?xi8, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0> : tensor<64x64xi32, #mma>
  %r = scf.for %i = %c0 to %k step %c64 iter_args(%acc = %z) -> (tensor<64x64xi32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xi8, strided<[?, 1], offset: ?>> -> tensor<64x64xi8, #a>
    %b = tile.load %w[%i, %c0] : memref<?x?xi8, strided<[1, ?], offset: ?>> -> tensor<64x64xi8, #bt>
    %d = tile.dot %a, %b, %acc : tensor<64x64xi8, #a>, tensor<64x64xi8, #bt> -> tensor<64x64xi32, #mma>
    scf.yield %d : tensor<64x64xi32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xi32, #mma>, memref<?x?xi32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#bt = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 4], order = [0, 1]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A transposed rhs (unit stride along K, loaded in runs along K) is staged
// K-major: on sm_80 copied along K by cp.async and read by ldmatrix without
// .trans; on sm_90a read by wgmma without imm-trans-b, and copied by TMA
// boxes over the view's dimensions in the order (1, 0), K innermost.
// CHECK-LABEL: gpu.func @kmajor_rhs
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: mma_layout<col>
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>
// CHECK-NOT: mma_layout<col>
// CHECK: gpu.return
// WGMMA-LABEL: gpu.func @kmajor_rhs
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1, 0, 0;
// TMA-LABEL: gpu.func @kmajor_rhs
// TMA-SAME: tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 64, 32>, dims = array<i64: 1, 0>, swizzle = 64 : i64, view = 1 : i64}]
// TMA: cp.async.bulk.tensor
// TMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1, 0, 0;
tile.kernel @kmajor_rhs(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %w: memref<?x?xf16, strided<[1, ?], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %w[%i, %c0] : memref<?x?xf16, strided<[1, ?], offset: ?>> -> tensor<32x64xf16, #bt>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #bt> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#row4w = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
#split = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// A whole warp along a dimension with the warps next to it: the thread's
// index is the thread id masked (tid % 128), not a lane part plus a warp part.
// Lanes split between dimensions keep the lane and warp parts.
// CHECK-LABEL: gpu.func @thread_index
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: %[[LANE:.*]] = arith.andi %[[TID]], %c31_i32 : i32
// CHECK: %[[WARP:.*]] = arith.shrui %[[TID]], %c5_i32 : i32
// CHECK: %[[T:.*]] = arith.andi %[[TID]], %c127_i32 : i32
// CHECK: arith.muli %[[T]], %c4_i32 overflow<nsw, nuw> : i32
// CHECK: arith.andi %[[LANE]], %c7_i32 : i32
// CHECK: arith.shrui %[[LANE]], %c3_i32 : i32
// CHECK: arith.andi %[[WARP]], %c3_i32{{.*}} : i32
tile.kernel @thread_index(%x: memref<?xf32> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0] : memref<?xf32> -> tensor<512xf32, #row4w>
  tile.store %a, %x[%c0] : tensor<512xf32, #row4w>, memref<?xf32>
  %b = tile.load %y[%c0, %c0] : memref<?x?xf32> -> tensor<16x32xf32, #split>
  tile.store %b, %y[%c0, %c0] : tensor<16x32xf32, #split>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#mma22 = #tile.mma<warpsPerCTA = [2, 2]>

// Row reductions of a dot's result stay in the mma layout. With all warps on
// the rows, a row's 16 columns of a thread meet the other three threads of
// its quad by two butterflies (lane masks 1 and 2), with no shared memory.
// CHECK-LABEL: gpu.func @mma_row_max
// CHECK-NOT: llvm.store
// CHECK-COUNT-2: nvvm.shfl.sync bfly %{{.*}}, %{{.*}}, %c1_i32{{[_0-9]*}},
// CHECK-COUNT-2: nvvm.shfl.sync bfly %{{.*}}, %{{.*}}, %c2_i32{{[_0-9]*}},
// CHECK-NOT: nvvm.shfl.sync
// CHECK-NOT: nvvm.barrier0
// CHECK: gpu.return
// With two warp columns, the columns' partial maxima meet in shared memory.
// CHECK-LABEL: gpu.func @mma_row_max_two_warp_columns
// CHECK-COUNT-4: nvvm.shfl.sync bfly
// CHECK: llvm.store %{{.*}}, %{{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f32
tile.kernel @mma_row_max(%x: memref<?x?xf32> {tile.divisibility = 16}, %y: memref<?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %m = tile.reduce %t {axis = 1} : tensor<64x64xf32, #mma> -> tensor<64xf32, #tile.slice<dim = 1, parent = #mma>> {
  ^bb0(%l: f32, %r: f32):
    %q = arith.maximumf %l, %r : f32
    tile.yield %q : f32
  }
  tile.store %m, %y[%c0] : tensor<64xf32, #tile.slice<dim = 1, parent = #mma>>, memref<?xf32>
  tile.return
}
tile.kernel @mma_row_max_two_warp_columns(%x: memref<?x?xf32> {tile.divisibility = 16}, %y: memref<?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32, #mma22>
  %m = tile.reduce %t {axis = 1} : tensor<64x64xf32, #mma22> -> tensor<64xf32, #tile.slice<dim = 1, parent = #mma22>> {
  ^bb0(%l: f32, %r: f32):
    %q = arith.maximumf %l, %r : f32
    tile.yield %q : f32
  }
  tile.store %m, %y[%c0] : tensor<64xf32, #tile.slice<dim = 1, parent = #mma22>>, memref<?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>

// An lhs in the accumulator's layout (all warps on the rows, 16-bit) is the
// A fragment already: two 16x8 blocks a fragment, packed in pairs, with no
// staging in shared memory. Only B is staged and loaded with ldmatrix (two
// k steps of four x4 loads). On sm_90a, wgmma takes A's four registers.
// CHECK-LABEL: gpu.func @dot_lhs_in_registers
// CHECK-NOT: #nvvm.mma_layout<row>
// CHECK-COUNT-4: nvvm.ldmatrix {{.*}} layout = #nvvm.mma_layout<col>
// CHECK-NOT: #nvvm.mma_layout<row>
// CHECK-COUNT-8: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-COUNT-4: nvvm.ldmatrix {{.*}} layout = #nvvm.mma_layout<col>
// CHECK-NOT: nvvm.ldmatrix
// CHECK: gpu.return
// WGMMA-LABEL: gpu.func @dot_lhs_in_registers
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, {$32, $33, $34, $35}, $36, 1, 1, 1, 1;
tile.kernel @dot_lhs_in_registers(%x: memref<?x?xf32> {tile.divisibility = 16}, %w: memref<?x?xf16> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %s = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x32xf32, #mma>
  %p = arith.truncf %s : tensor<64x32xf32, #mma> to tensor<64x32xf16, #mma>
  %v = tile.load %w[%c0, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %d = tile.dot %p, %v, %z : tensor<64x32xf16, #mma>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>
#cols = #tile.slice<dim = 0, parent = #mma>

// A key mask over an mma layout's columns (attention's `start + iota <
// keys`, expanded to a row and broadcast), the start a multiple of 64 and
// keys of 16: a thread's 16 columns (two in each 8-column block) fall into
// four aligned groups of 16, one compare each.
// CHECK-LABEL: gpu.func @mma_column_mask
// CHECK-COUNT-4: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT: arith.cmpi slt
// CHECK: gpu.return
tile.kernel @mma_column_mask(%x: memref<?x?xf32> {tile.divisibility = 16, tile.size_divisibility = array<i64: 1, 16>}, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %start = arith.muli %k, %c64 : index
  %s32 = arith.index_cast %start : index to i32
  %iota = tile.iota : tensor<64xi32, #cols>
  %base = tile.splat %s32 : i32 -> tensor<64xi32, #cols>
  %idx = arith.addi %iota, %base : tensor<64xi32, #cols>
  %row = tile.expand_dims %idx {axis = 0} : tensor<64xi32, #cols> -> tensor<1x64xi32, #mma>
  %n = memref.dim %x, %c1 : memref<?x?xf32>
  %n32 = arith.index_cast %n : index to i32
  %sn = tile.splat %n32 : i32 -> tensor<1x64xi32, #mma>
  %m = arith.cmpi slt, %row, %sn : tensor<1x64xi32, #mma>
  %mb = tile.broadcast %m : tensor<1x64xi1, #mma> -> tensor<64x64xi1, #mma>
  %t = tile.load %x[%c0, %start] : memref<?x?xf32> -> tensor<64x64xf32, #mma>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %s = arith.select %mb, %t, %z : tensor<64x64xi1, #mma>, tensor<64x64xf32, #mma>
  tile.store %s, %x[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A dot in a loop whose lhs comes from before the loop stages it once, before
// the loop, into shared memory the loop keeps (4 KiB, after which B's ring of
// two 4 KiB slots goes): the iterations store nothing, B comes by cp.async.
// Nothing read shared memory before, so no barrier comes first (HoistedLhs);
// the loop's first barrier orders the staging before the dots. wgmma fences
// the async proxy after the staging.
// CHECK: llvm.mlir.global internal @dot_hoisted_lhs_smem() {{.*}} : !llvm.array<12288 x i8>
// CHECK-LABEL: gpu.func @dot_hoisted_lhs
// CHECK-NOT: nvvm.barrier0
// CHECK-COUNT-2: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// CHECK-NOT: nvvm.barrier0
// CHECK: scf.for
// CHECK: nvvm.barrier0
// CHECK-NOT: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: nvvm.ldmatrix {{.*}} layout = #nvvm.mma_layout<row>
// CHECK-NOT: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: nvvm.cp.async.shared.global
// CHECK-NOT: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: scf.yield
// WGMMA-LABEL: gpu.func @dot_hoisted_lhs
// WGMMA-COUNT-2: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// WGMMA-NEXT: fence.proxy.async.shared::cta;
// WGMMA: scf.for
// WGMMA: nvvm.barrier0
// WGMMA-NOT: llvm.store {{.*}} !llvm.ptr<3>
// WGMMA: wgmma.mma_async
// WGMMA-NOT: llvm.store {{.*}} !llvm.ptr<3>
// WGMMA: scf.yield
tile.kernel @dot_hoisted_lhs(%x: memref<?x?xf16> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}, %n: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16, #a>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %b = tile.load %x[%i, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// Two sibling loops whose dots read one hoisted lhs (attention's loops over
// the masked and the whole blocks read one q): the first loop's staging
// stays where the second would put it, so the lhs is stored once (B comes
// by cp.async). A store to shared memory between two such loops (the
// third) makes the next one stage its lhs again.
// CHECK-LABEL: gpu.func @sibling_loops_share_hoisted_lhs
// CHECK-COUNT-2: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// CHECK: scf.for {{.*}} -> (f32,
// CHECK: scf.yield {{.*}} : f32, f32,
// CHECK-NOT: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: scf.for {{.*}} -> (f32,
// CHECK: scf.yield {{.*}} : f32, f32,
// CHECK: llvm.store {{.*}} : {{.*}}f32{{.*}}, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-2: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// CHECK: scf.for {{.*}} -> (f32,
// WGMMA-LABEL: gpu.func @sibling_loops_share_hoisted_lhs
// WGMMA-COUNT-2: llvm.store {{.*}} : vector<8xf16>, !llvm.ptr<3>
// WGMMA-NEXT: fence.proxy.async.shared::cta;
// WGMMA: scf.for {{.*}} -> (f32,
// WGMMA: scf.yield {{.*}} : f32, f32,
// WGMMA-NOT: fence.proxy.async.shared::cta;
// WGMMA: scf.for {{.*}} -> (f32,
// WGMMA: scf.yield {{.*}} : f32, f32,
// WGMMA: fence.proxy.async.shared::cta;
// WGMMA: scf.for {{.*}} -> (f32,
tile.kernel @sibling_loops_share_hoisted_lhs(%x: memref<?x?xf16> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}, %n: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf16> -> tensor<64x32xf16, #a>
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %b = tile.load %x[%i, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  %s = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %r) -> (tensor<64x64xf32, #mma>) {
    %b = tile.load %x[%i, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  %t = tile.convert_layout %s : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
  tile.store %t, %y[%c0, %c0] : tensor<64x64xf32, #b>, memref<?x?xf32>
  %u = scf.for %i = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<64x64xf32, #mma>) {
    %b = tile.load %x[%i, %c0] : memref<?x?xf16> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %u, %y[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A 64 x 1 tile in the mma layout (attention's row statistics) wraps each
// 16x8 block's two columns onto one: a thread holds its rows g and g + 8
// once each, so an elementwise op runs twice, not four times.
// CHECK-LABEL: gpu.func @mma_column_tile
// CHECK-COUNT-2: math.exp2 {{.*}} : f32
// CHECK-NOT: math.exp2
// CHECK: gpu.return
tile.kernel @mma_column_tile(%x: memref<?x?xf32> {tile.divisibility = 16}, %y: memref<?x?xf32> {tile.divisibility = 16}) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<64x1xf32, #mma>
  %e = math.exp %t : tensor<64x1xf32, #mma>
  tile.store %e, %y[%c0, %c0] : tensor<64x1xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// e^x is 2^(x log2 e); with `afn` on exp or exp2, ex2.approx.ftz (results
// below 2^-126 flush to zero: one instruction, where LLVM's exp2 keeps
// subnormals with three more).
// CHECK-LABEL: gpu.func @exponentials
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %cst{{.*}} : f32
// CHECK: math.exp2 %[[X]] : f32
// CHECK: %[[Y:.*]] = arith.mulf %{{.*}}, %cst{{.*}} : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[Y]]) : (f32) -> f32
// CHECK: math.exp2 %{{.*}} : f32
// CHECK-NOT: arith.mulf
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: gpu.return
tile.kernel @exponentials(%x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<128xf32, #b>
  %e = math.exp %t : tensor<128xf32, #b>
  %f = math.exp %e fastmath<afn> : tensor<128xf32, #b>
  %g = math.exp2 %f : tensor<128xf32, #b>
  %h = math.exp2 %g fastmath<afn> : tensor<128xf32, #b>
  tile.store %h, %y[%c0] : tensor<128xf32, #b>, memref<?xf32>
  tile.return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// Accesses to one view keep program order: a store, then an access of other
// elements per thread (other offsets), waits at a barrier for every thread's
// store. An access of the same elements in the same layout needs none.
// CHECK-LABEL: gpu.func @view_order
// CHECK: st.global.b32
// CHECK-NOT: nvvm.barrier0
// CHECK: st.global.b32
// CHECK: nvvm.barrier0
// CHECK: st.global.b32
// CHECK: nvvm.barrier0
// CHECK: ld.global.b32
// CHECK-NOT: nvvm.barrier0
// CHECK: gpu.return
tile.kernel @view_order(%x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<128xf32, #b>
  tile.store %t, %y[%c0] : tensor<128xf32, #b>, memref<?xf32>
  tile.store %t, %y[%c0] : tensor<128xf32, #b>, memref<?xf32>
  tile.store %t, %y[%c1] : tensor<128xf32, #b>, memref<?xf32>
  %u = tile.load %y[%c0] : memref<?xf32> -> tensor<128xf32, #b>
  tile.store %u, %x[%c0] : tensor<128xf32, #b>, memref<?xf32>
  tile.return
}

// -----

#b = #tile.blocked<sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>

// In a loop, an in-place update of one tile per iteration (step >= the tile)
// touches disjoint elements in each iteration: no barrier. A step shorter than
// the tile re-reads elements other threads wrote an iteration before.
// CHECK-LABEL: gpu.func @loop_order
// CHECK: scf.for
// CHECK-NOT: nvvm.barrier0
// CHECK: st.global.b32
// CHECK: scf.for
// CHECK: nvvm.barrier0
// CHECK: ld.global.b32
// CHECK: nvvm.barrier0
// CHECK: st.global.b32
// CHECK: gpu.return
tile.kernel @loop_order(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  scf.for %i = %c0 to %n step %c128 {
    %t = tile.load %x[%i] : memref<?xf32> -> tensor<128xf32, #b>
    %u = arith.addf %t, %t : tensor<128xf32, #b>
    tile.store %u, %x[%i] : tensor<128xf32, #b>, memref<?xf32>
  }
  scf.for %i = %c0 to %n step %c64 {
    %t = tile.load %x[%i] : memref<?xf32> -> tensor<128xf32, #b>
    %u = arith.addf %t, %t : tensor<128xf32, #b>
    tile.store %u, %x[%i] : tensor<128xf32, #b>, memref<?xf32>
  }
  tile.return
}

// -----

#cst = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#a3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 8, 4], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#bt3 = #tile.blocked<sizePerThread = [1, 8, 1], threadsPerWarp = [1, 4, 8], warpsPerCTA = [1, 1, 4], order = [1, 2, 0]>
#bt = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 4], order = [0, 1]>
#out3 = #tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 4, 8], warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>
#mma3 = #tile.mma<warpsPerCTA = [1, 4, 1]>

// One matrix of a batch (tile-assign-layouts' layouts): the operands' unit
// batch dimension is one element of a 3-D TMA box whose coordinate is the
// batch ($3), the K-major rhs's map swaps the last two dimensions, and the
// accumulator reshaped to 1x64x64 keeps its registers (#mma3): its
// conversion for the store restages it as the 2-D kernel's does, in 16-byte
// vectors within the pipeline's shared memory (24600 bytes, as @wgmma_tma).
// TMA-LABEL: gpu.func @batched_kmajor
// TMA-SAME: tile.shared_bytes = 24600 : i64, tile.tensor_maps = [{box = array<i64: 1, 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 1, 64, 32>, dims = array<i64: 0, 2, 1>, swizzle = 64 : i64, view = 1 : i64}]
// TMA: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$4], [$2, {$5, $6, $3}], [$1];
// TMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1, 0, 0;
// TMA: wgmma.wait_group.sync.aligned 0;
// TMA-NOT: llvm.store {{.*}}, !llvm.ptr<3>
// TMA-COUNT-4: llvm.store {{.*}} : vector<4xi32>, !llvm.ptr<3>
// TMA-NOT: llvm.store {{.*}}, !llvm.ptr<3>
// TMA: gpu.return
tile.kernel @batched_kmajor(%x: memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 1, 16, 16>}, %w: memref<?x?x?xf16, strided<[?, 1, ?], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 1, 16, 16>}, %y: memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 1, 16, 16>}) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %batch = tile.program_id {dim = 2 : i64}
  %k = memref.dim %x, %c2 : memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>>
  %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #cst>
  %z = tile.convert_layout %cst : tensor<64x64xf32, #cst> -> tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a3 = tile.load %x[%batch, %c0, %i] : memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>> -> tensor<1x64x32xf16, #a3>
    %a = tile.reshape %a3 : tensor<1x64x32xf16, #a3> -> tensor<64x32xf16, #a>
    %b3 = tile.load %w[%batch, %i, %c0] : memref<?x?x?xf16, strided<[?, 1, ?], offset: ?>> -> tensor<1x32x64xf16, #bt3>
    %b = tile.reshape %b3 : tensor<1x32x64xf16, #bt3> -> tensor<32x64xf16, #bt>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #bt> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  %r3 = tile.reshape %r : tensor<64x64xf32, #mma> -> tensor<1x64x64xf32, #mma3>
  %h = arith.truncf %r3 : tensor<1x64x64xf32, #mma3> to tensor<1x64x64xf16, #mma3>
  %s = tile.convert_layout %h : tensor<1x64x64xf16, #mma3> -> tensor<1x64x64xf16, #out3>
  tile.store %s, %y[%batch, %c0, %c0] : tensor<1x64x64xf16, #out3>, memref<?x?x?xf16, strided<[?, ?, 1], offset: ?>>
  tile.return
}

// -----

#cst = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// Two wgmma dots in one pipelined loop: all four operands come by TMA, into
// each dot's ring of 3 slots, and one mbarrier per slot, after both rings,
// counts the four copies of an iteration (arrival count 4): the iteration
// waits once, for all of them. Both dots keep running into the next
// iteration (wgmma.wait_group 2), so the prologue copies one iteration.
// TMA-LABEL: gpu.func @two_dot_tma
// TMA-SAME: tile.shared_bytes = 49176 : i64, tile.tensor_maps = [{box = array<i64: 64, 32>, swizzle = 64 : i64, view = 0 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 1 : i64}, {box = array<i64: 64, 32>, swizzle = 64 : i64, view = 1 : i64}, {box = array<i64: 32, 64>, swizzle = 128 : i64, view = 0 : i64}]
// TMA: mbarrier.init.shared::cta.b64 [$1], 4;\0A@p mbarrier.init.shared::cta.b64 [$2], 4;\0A@p mbarrier.init.shared::cta.b64 [$3], 4;
// TMA-COUNT-4: cp.async.bulk.tensor.2d
// TMA-NOT: cp.async.bulk.tensor.2d
// TMA: scf.for
// TMA: nvvm.barrier0
// TMA-COUNT-4: cp.async.bulk.tensor.2d
// TMA: mbarrier.try_wait.parity
// TMA-NOT: mbarrier.try_wait.parity
// TMA: wgmma.wait_group.sync.aligned 2;
// TMA: wgmma.wait_group.sync.aligned 2;
// TMA: scf.yield
// TMA: mbarrier.inval
tile.kernel @two_dot_tma(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %y: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %c: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #cst>
  %z = tile.convert_layout %cst : tensor<64x64xf32, #cst> -> tensor<64x64xf32, #mma>
  %r:2 = scf.for %i = %c0 to %k step %c32 iter_args(%s = %z, %t = %z) -> (tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>) {
    %xa = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %yb = tile.load %y[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %xa, %yb, %s : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    %ya = tile.load %y[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %xb = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %e = tile.dot %ya, %xb, %t : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d, %e : tensor<64x64xf32, #mma>, tensor<64x64xf32, #mma>
  }
  %sum = arith.addf %r#0, %r#1 : tensor<64x64xf32, #mma>
  %out = tile.convert_layout %sum : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #cst>
  tile.store %out, %c[%c0, %c0] : tensor<64x64xf32, #cst>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#cst = #tile.blocked<sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]>
#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// Rings of 2 slots of 16 KiB (64 x 64 by 64 x 64) and 12 KiB (128 x 32 by
// 32 x 64) fill 57,344 bytes: four blocks per SM (sm_90a's SMs have 228 KiB
// and keep 1 KiB per block). TMA's 16 bytes of mbarriers would leave room
// for three, so the loop keeps cp.async (which the sizes' divisibility lets
// copy every tile).
// TMA-LABEL: gpu.func @tma_costing_a_block
// TMA-SAME: tile.shared_bytes = 57344 : i64
// TMA-NOT: tile.tensor_maps
// TMA: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// TMA-NOT: mbarrier
// TMA: gpu.return
tile.kernel @tma_costing_a_block(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 16, 16>}, %y: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 16, 16>}, %c: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}) attributes {tile.num_warps = 4 : i32, tile.num_stages = 2 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #cst>
  %z = tile.convert_layout %cst : tensor<64x64xf32, #cst> -> tensor<64x64xf32, #mma>
  %cst2 = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #cst>
  %z2 = tile.convert_layout %cst2 : tensor<128x64xf32, #cst> -> tensor<128x64xf32, #mma>
  %r:2 = scf.for %i = %c0 to %k step %c64 iter_args(%s = %z, %t = %z2) -> (tensor<64x64xf32, #mma>, tensor<128x64xf32, #mma>) {
    %xa = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %yb = tile.load %y[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #b>
    %d = tile.dot %xa, %yb, %s : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
    %ya = tile.load %y[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<128x32xf16, #a>
    %xb = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %e = tile.dot %ya, %xb, %t : tensor<128x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d, %e : tensor<64x64xf32, #mma>, tensor<128x64xf32, #mma>
  }
  %o1 = tile.convert_layout %r#0 : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #cst>
  tile.store %o1, %c[%c0, %c0] : tensor<64x64xf32, #cst>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  %o2 = tile.convert_layout %r#1 : tensor<128x64xf32, #mma> -> tensor<128x64xf32, #cst>
  tile.store %o2, %c[%c64, %c0] : tensor<128x64xf32, #cst>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// warp-specialize: the 4 consumer warps run the kernel's body; warp 4, the
// first of a warpgroup after them, runs the loop again as a producer. The
// first thread sets up a "full" mbarrier per slot (the two copies) and an
// "empty" one (the 128 consumer threads) before the split, which every
// thread waits for. The consumers' loop waits for its slot, issues the
// wgmma, leaves it running (wait_group 1) and releases the previous
// iteration's slot (not in the first iteration); it passes no barrier and
// issues no copy. Their barriers after it are barrier 1 of 128 threads. The
// producer waits for the slot's release (the parity before the current one:
// a fresh mbarrier passes at once) and copies from its first lane.
// WS-LABEL: gpu.func @warp_specialized
// WS-SAME: nvvm.reqntid = array<i32: 256>
// WS-NOT: maxnreg
// WS-SAME: tile.shared_bytes = 24624 : i64
// WS: %[[CONSUMER:.*]] = arith.cmpi ult, %[[TID:.*]], %c128_i32 : i32
// WS: mbarrier.init.shared::cta.b64 [$1], 2;\0A@p mbarrier.init.shared::cta.b64 [$2], 2;\0A@p mbarrier.init.shared::cta.b64 [$3], 2;
// WS: mbarrier.init.shared::cta.b64 [$1], 128;\0A@p mbarrier.init.shared::cta.b64 [$2], 128;\0A@p mbarrier.init.shared::cta.b64 [$3], 128;
// WS-NEXT: nvvm.barrier0
// WS-NEXT: scf.if %[[CONSUMER]] {
// WS: scf.for
// WS-NOT: nvvm.barrier
// WS-NOT: cp.async.bulk
// WS: mbarrier.try_wait.parity
// WS-NOT: nvvm.barrier
// WS: wgmma.mma_async
// WS-NOT: nvvm.barrier
// WS: wgmma.wait_group.sync.aligned 1;
// WS-NOT: nvvm.barrier
// WS: @p mbarrier.arrive.shared::cta.b64 _, [$1];
// WS-NOT: nvvm.barrier
// WS: scf.yield
// WS: wgmma.wait_group.sync.aligned 0;
// WS: } else {
// WS: nvvm.barrier id = %c1_i32{{.*}} number_of_threads = %c128_i32
// WS: mbarrier.inval
// WS-NOT: nvvm.barrier0
// WS: } else {
// WS: arith.cmpi ult, %[[TID]], %c160_i32 : i32
// WS: scf.for
// WS: mbarrier.try_wait.parity
// WS: setp.ne.b32 p, $0, 0;\0A@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], 4096;\0A@p cp.async.bulk.tensor.2d
// WS: mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], 4096;\0A@p cp.async.bulk.tensor.2d
// WS-NOT: nvvm.barrier
// WS: gpu.return
tile.kernel @warp_specialized(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %y: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %c: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}) attributes {tile.num_warps = 4 : i32} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %pid = tile.program_id {dim = 0 : i64}
  %row = arith.muli %pid, %c64 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%row, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %y[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  %s = tile.convert_layout %r : tensor<64x64xf32, #mma> -> tensor<64x64xf32, #b>
  tile.store %s, %c[%row, %c0] : tensor<64x64xf32, #b>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [8, 1]>

// With two consumer warpgroups the producer's warpgroup gives its registers
// to them: 168 a thread at launch (.maxnreg, the register file over 384
// threads), 40 for the producer (setmaxnreg.dec by its whole warpgroup, at
// the start of its side), 232 for the consumers (setmaxnreg.inc).
// WS-LABEL: gpu.func @warp_specialized_two_warpgroups
// WS-SAME: nvvm.maxnreg = 168 : i32
// WS-SAME: nvvm.reqntid = array<i32: 384>
// WS: scf.if %{{.*}} {
// WS-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "setmaxnreg.inc.sync.aligned.u32 232;"
// WS: wgmma.wait_group.sync.aligned 0;
// WS: } else {
// WS: } else {
// WS-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "setmaxnreg.dec.sync.aligned.u32 40;"
// WS: scf.for
// WS: gpu.return
tile.kernel @warp_specialized_two_warpgroups(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %y: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}, %c: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}) attributes {tile.num_warps = 8 : i32} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %pid = tile.program_id {dim = 0 : i64}
  %row = arith.muli %pid, %c128 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %z = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<128x64xf32, #mma>) {
    %a = tile.load %x[%row, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<128x32xf16, #a>
    %b = tile.load %y[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<128x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<128x64xf32, #mma>
    scf.yield %d : tensor<128x64xf32, #mma>
  }
  %s = tile.convert_layout %r : tensor<128x64xf32, #mma> -> tensor<128x64xf32, #b>
  tile.store %s, %c[%row, %c0] : tensor<128x64xf32, #b>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]>
#b = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A copied tile at a loop's induction variable, whose bounds and step are
// multiples of the tile and whose upper bound is the view's size rounded
// down (a loop over whole blocks, as attention's unmasked keys), lies inside
// the view: x's copies check no column against its K (%arg2). y's rows go by
// x's K, not y's own size (%arg6): checked.
// CHECK-LABEL: gpu.func @whole_blocks
// CHECK: scf.for
// CHECK-NOT: %arg2 : i64
// CHECK: arith.cmpi ult, %{{.*}}, %arg6 : i64
// CHECK-NOT: %arg2 : i64
// CHECK: scf.yield
tile.kernel @whole_blocks(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 1, 16>}, %y: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64, tile.size_divisibility = array<i64: 1, 16>}, %c: memref<?x?xf32, strided<[?, 1], offset: ?>> {tile.divisibility = 16 : i64}) attributes {tile.num_warps = 4 : i32, tile.num_stages = 1 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %k = memref.dim %x, %c1 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %q = arith.divui %k, %c32 : index
  %whole = arith.muli %q, %c32 : index
  %z = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
  %r = scf.for %i = %c0 to %whole step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %a = tile.load %x[%c0, %i] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x32xf16, #a>
    %b = tile.load %y[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<32x64xf16, #b>
    %d = tile.dot %a, %b, %acc : tensor<64x32xf16, #a>, tensor<32x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %d : tensor<64x64xf32, #mma>
  }
  tile.store %r, %c[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}

// -----

// Vector adds of f32 need PTX 8.1: a module that adds f32 tiles targets it on
// sm_90 and newer, a chip's oldest PTX otherwise.
// CHECK: #nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">
// WGMMA: #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx81">
#v4 = #tile.blocked<sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]>
tile.kernel @adds_need_ptx81(%y: memref<?xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %t = tile.splat %s : f32 -> tensor<512xf32, #v4>
  tile.store %t, %y[%c0] {add} : tensor<512xf32, #v4>, memref<?xf32>
  tile.return
}

// -----

// More parameter bytes than PTX before 8.1 allows (4,352; a kernel reading many
// views, 62 of rank 4 here: 4,464) need PTX 8.1 on every chip.
// CHECK: #nvvm.target<O = 3, chip = "sm_80", features = "+ptx81">
// WGMMA: #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx81">
tile.kernel @many_views_need_ptx81(%v0: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v1: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v2: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v3: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v4: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v5: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v6: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v7: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v8: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v9: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v10: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v11: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v12: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v13: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v14: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v15: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v16: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v17: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v18: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v19: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v20: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v21: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v22: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v23: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v24: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v25: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v26: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v27: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v28: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v29: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v30: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v31: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v32: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v33: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v34: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v35: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v36: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v37: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v38: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v39: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v40: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v41: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v42: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v43: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v44: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v45: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v46: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v47: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v48: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v49: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v50: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v51: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v52: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v53: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v54: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v55: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v56: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v57: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v58: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v59: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v60: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %v61: memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>) {
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#t = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// Flash attention's two products one block apart: an iteration issues
// q k_i^T, then p_{i-1} v_{i-1} (p carried in the scores' layout, wgmma's A
// from registers). The wait for the scores moves below the second product's
// commit (wait_group 1: that product keeps running) and takes with it what
// reads the scores (the softmax's exponentials); the second product's wait
// goes last, before the yield that carries its result. The wait holds A's
// registers too, so that nothing reuses them while the wgmma reads them.
// On sm_80 (mma.sync) nothing waits.
// CHECK-LABEL: gpu.func @dots_wait_where_used
// CHECK-NOT: wgmma
// WGMMA-LABEL: gpu.func @dots_wait_where_used
// WGMMA: scf.for
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, $32, $33, 0, 1, 1, 0, 0;
// WGMMA: wgmma.commit_group.sync.aligned;
// WGMMA-NOT: wgmma.wait_group
// WGMMA: wgmma.fence.sync.aligned;
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {$32, $33, $34, $35}, $36, 1, 1, 1, 1;
// WGMMA: wgmma.commit_group.sync.aligned;
// WGMMA-NOT: wgmma
// WGMMA: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 1;", "=f,{{.*}},=f,0,1,
// WGMMA: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// WGMMA: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;", "=f,{{.*}},=f,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,0,1,
// WGMMA-NOT: llvm.call_intrinsic
// WGMMA: scf.yield
tile.kernel @dots_wait_where_used(%q: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %k: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %o: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %p0 = arith.constant dense<0.0> : tensor<64x64xf16, #mma>
  %n = memref.dim %k, %c0 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %a = tile.load %q[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
  %r:2 = scf.for %i = %c64 to %n step %c64 iter_args(%acc = %z, %p = %p0) -> (tensor<64x64xf32, #mma>, tensor<64x64xf16, #mma>) {
    %key = tile.load %k[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %kt = tile.permute %key {permutation = array<i64: 1, 0>} : tensor<64x64xf16, #a> -> tensor<64x64xf16, #t>
    %s = tile.dot %a, %kt, %z : tensor<64x64xf16, #a>, tensor<64x64xf16, #t> -> tensor<64x64xf32, #mma>
    %j = arith.subi %i, %c64 : index
    %v = tile.load %k[%j, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %pv = tile.dot %p, %v, %acc : tensor<64x64xf16, #mma>, tensor<64x64xf16, #a> -> tensor<64x64xf32, #mma>
    %e = math.exp2 %s fastmath<afn> : tensor<64x64xf32, #mma>
    %pn = arith.truncf %e : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    scf.yield %pv, %pn : tensor<64x64xf32, #mma>, tensor<64x64xf16, #mma>
  }
  tile.store %r#0, %o[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A dot whose lhs is the loop's carried tile, staged from registers each
// iteration. The conversion replaces the loop body's arguments before the
// dot: whether its lhs is loop-invariant (staged once, before the loop) was
// recorded before (it crashed the conversion).
// CHECK-LABEL: gpu.func @dot_of_carried_lhs
// CHECK: scf.for
// CHECK: llvm.store
// CHECK: nvvm.barrier0
// CHECK: mma.sync
// WGMMA-LABEL: gpu.func @dot_of_carried_lhs
// WGMMA: scf.for
// WGMMA: llvm.store
// WGMMA: wgmma.mma_async
tile.kernel @dot_of_carried_lhs(%x: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %o: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %h0 = arith.constant dense<0.0> : tensor<64x64xf16, #a>
  %n = memref.dim %x, %c0 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %r:2 = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %z, %h = %h0) -> (tensor<64x64xf32, #mma>, tensor<64x64xf16, #a>) {
    %b = tile.load %x[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %d = tile.dot %h, %b, %acc : tensor<64x64xf16, #a>, tensor<64x64xf16, #a> -> tensor<64x64xf32, #mma>
    scf.yield %d, %b : tensor<64x64xf32, #mma>, tensor<64x64xf16, #a>
  }
  tile.store %r#0, %o[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}

// -----

#a = #tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]>
#t = #tile.blocked<sizePerThread = [8, 1], threadsPerWarp = [8, 4], warpsPerCTA = [1, 4], order = [0, 1]>
#mma = #tile.mma<warpsPerCTA = [4, 1]>

// A product of the scores' softmax (p in registers, wgmma's A): the scores'
// wait cannot move below the second product's wgmma.fence, since registers
// that a wgmma reads are written before its fence; it stays a wait 0, and
// the softmax runs between it and the fence.
// WGMMA-LABEL: gpu.func @dot_of_dot_waits_before_its_fence
// WGMMA: scf.for
// WGMMA: wgmma.commit_group.sync.aligned;
// WGMMA-NOT: wgmma.fence
// WGMMA: "wgmma.wait_group.sync.aligned 0;"
// WGMMA: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// WGMMA: arith.truncf
// WGMMA: wgmma.fence.sync.aligned;
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {$32, $33, $34, $35}, $36,
tile.kernel @dot_of_dot_waits_before_its_fence(%q: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %k: memref<?x?xf16, strided<[?, 1], offset: ?>> {tile.divisibility = 16, tile.size_divisibility = array<i64: 16, 16>}, %o: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %z = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
  %n = memref.dim %k, %c0 : memref<?x?xf16, strided<[?, 1], offset: ?>>
  %a = tile.load %q[%c0, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
  %r = scf.for %i = %c0 to %n step %c64 iter_args(%acc = %z) -> (tensor<64x64xf32, #mma>) {
    %key = tile.load %k[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %kt = tile.permute %key {permutation = array<i64: 1, 0>} : tensor<64x64xf16, #a> -> tensor<64x64xf16, #t>
    %s = tile.dot %a, %kt, %z : tensor<64x64xf16, #a>, tensor<64x64xf16, #t> -> tensor<64x64xf32, #mma>
    %e = math.exp2 %s fastmath<afn> : tensor<64x64xf32, #mma>
    %p = arith.truncf %e : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    %v = tile.load %k[%i, %c0] : memref<?x?xf16, strided<[?, 1], offset: ?>> -> tensor<64x64xf16, #a>
    %pv = tile.dot %p, %v, %acc : tensor<64x64xf16, #mma>, tensor<64x64xf16, #a> -> tensor<64x64xf32, #mma>
    scf.yield %pv : tensor<64x64xf32, #mma>
  }
  tile.store %r, %o[%c0, %c0] : tensor<64x64xf32, #mma>, memref<?x?xf32>
  tile.return
}
