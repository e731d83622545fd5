// The named pipelines run the whole GPU path from a file: tile IR to PTX,
// which ptxas accepts for sm_80 and sm_90 with no spills.
// REQUIRES: ptxas
// RUN: tileopt-opt %s --tile-to-nvvm="chip=sm_90" | FileCheck %s --check-prefix=NVVM
// RUN: tileopt-opt %s --tile-to-ptx="chip=sm_90" | FileCheck %s --check-prefix=PTX
// RUN: tileopt-opt %s --tile-to-ptx="chip=sm_80" --mlir-print-op-generic \
// RUN:   | sed -n 's/.*assembly = "\([^"]*\)".*/\1/p' | sed 's/\\0A/\n/g; s/\\09/\t/g' > %t.ptx
// RUN: %ptxas -v --gpu-name sm_80 %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// Newer chips get the PTX version they need; an explicit one too old for
// the chip, or a chip that is not a GPU name, is a diagnostic (LLVM would abort).
// RUN: tileopt-opt %s --tile-to-ptx="chip=sm_100" | FileCheck %s --check-prefix=SM100
// RUN: not tileopt-opt %s --tile-to-ptx="chip=sm_100 features=+ptx80" 2>&1 | FileCheck %s --check-prefix=OLD
// RUN: not tileopt-opt %s --tile-to-nvvm="chip=gfx90a" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not tileopt-opt %s --tile-assign-layouts --convert-tile-to-nvvm="chip=gfx90a" 2>&1 | FileCheck %s --check-prefix=CHIP2
// Chips and features LLVM does not know are diagnostics too (it would ignore
// them with a warning, or assert on a malformed feature).
// RUN: not tileopt-opt %s --tile-to-ptx="chip=sm_9000" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-CHIP
// RUN: not tileopt-opt %s --tile-to-ptx="chip=sm_90 features=garbage" 2>&1 | FileCheck %s --check-prefix=FEATURE
// RUN: not tileopt-opt %s --tile-to-ptx="chip=sm_90 features=+ptx999" 2>&1 | FileCheck %s --check-prefix=PTX999
// RUN: not tileopt-opt %s --tile-to-ptx="chip=sm_90 num-warps=3" 2>&1 | FileCheck %s --check-prefix=WARPS
// UNKNOWN-CHIP: error: convert-tile-to-nvvm: chip must be an NVIDIA GPU that LLVM knows, like sm_80 or sm_90a, got 'sm_9000'
// FEATURE: error: convert-tile-to-nvvm: 'garbage' in features 'garbage' is not an NVPTX feature like +ptx80 (PTX 8.0)
// PTX999: error: convert-tile-to-nvvm: '+ptx999' in features '+ptx999' is not an NVPTX feature
// WARPS: error: tile-assign-layouts: num-warps must be a power of two in [1, 32], got 3

// SM100: .version 8.6
// SM100: .target sm_100
// OLD: error: convert-tile-to-nvvm: PTX 8.0 (features '+ptx80') cannot target sm_100, which needs PTX 8.6 or newer
// CHIP: error: tile-assign-layouts: expected a target like sm_80 or sm_90a, got 'gfx90a'

// NVVM: llvm.func @bias_relu({{.*}}) attributes {gpu.kernel, nvvm.kernel, nvvm.reqntid = array<i32: 128>
// NVVM-NOT: {{[= ] tile\.}}
// PTX: .visible .entry bias_relu(
// PTX: .reqntid 128\0A{
// PTX: ld.global.v4.b32
// PTX: st.global.v4.b32
// PTXAS: 0 bytes spill stores, 0 bytes spill loads
tile.kernel @bias_relu(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>, %b: memref<?xf32, strided<[1], offset: ?>>, %y: memref<?x?xf32, strided<[?, 1], offset: ?>>) {
  %pm = tile.program_id {dim = 0}
  %pn = tile.program_id {dim = 1}
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %m = arith.muli %pm, %c32 : index
  %n = arith.muli %pn, %c64 : index
  %t = tile.load %x[%m, %n] : memref<?x?xf32, strided<[?, 1], offset: ?>> -> tensor<32x64xf32>
  %bias = tile.load %b[%n] : memref<?xf32, strided<[1], offset: ?>> -> tensor<64xf32>
  %be = tile.expand_dims %bias {axis = 0} : tensor<64xf32> -> tensor<1x64xf32>
  %bb = tile.broadcast %be : tensor<1x64xf32> -> tensor<32x64xf32>
  %s = arith.addf %t, %bb : tensor<32x64xf32>
  %zero = arith.constant dense<0.0> : tensor<32x64xf32>
  %r = arith.maximumf %s, %zero : tensor<32x64xf32>
  tile.store %r, %y[%m, %n] : tensor<32x64xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}
// CHIP2: error: convert-tile-to-nvvm: chip must be an NVIDIA GPU that LLVM knows, like sm_80 or sm_90a, got 'gfx90a'
