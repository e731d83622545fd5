// Hopper TMA through libcu++ (cuda::ptx, cuda::barrier), tensor maps passed by value as
// `const __grid_constant__ CUtensorMap` (a .param .align 64 .b8 [128] in PTX).
#include <cuda.h>
#include <cuda/barrier>
#include <cuda/ptx>

namespace ptx = cuda::ptx;
using block_barrier = cuda::barrier<cuda::thread_scope_block>;

#define TILE 32

// out = in * scale, one TILE x TILE box per CTA: TMA load completing on a cuda::barrier,
// the scaling in shared memory, a TMA store (bulk group). Boxes past the edge are clipped.
extern "C" __global__ void tma_scale(const __grid_constant__ CUtensorMap in_map,
                                     const __grid_constant__ CUtensorMap out_map, float scale) {
  __shared__ alignas(128) float tile[TILE][TILE];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ block_barrier bar;
  int32_t coords[2] = {int32_t(blockIdx.x * TILE), int32_t(blockIdx.y * TILE)};
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
    ptx::fence_proxy_async(ptx::space_shared);
  }
  __syncthreads();
  block_barrier::arrival_token token;
  if (threadIdx.x == 0) {
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, &tile, &in_map, coords,
                              cuda::device::barrier_native_handle(bar));
    token = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));
  } else {
    token = bar.arrive();
  }
  bar.wait(std::move(token));
  for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) tile[i / TILE][i % TILE] *= scale;
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &out_map, coords, &tile);
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>());
  }
}

// The raw shared-memory bytes of one box (the map's swizzle applied) copied to out, with a
// raw mbarrier (cuda::ptx::mbarrier_*): what the TMA unit leaves in shared memory.
template <int RANK>
__device__ void dump_box(const CUtensorMap* map, const int32_t (&coords)[RANK],
                         unsigned char* out, int nbytes) {
  __shared__ alignas(1024) unsigned char box[16384];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar,
                                   nbytes);
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, box, map, coords, &bar);
  }
  while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
  for (int i = threadIdx.x * 16; i < nbytes; i += blockDim.x * 16)
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(box + i);
}

extern "C" __global__ void tma_box2d(const __grid_constant__ CUtensorMap map, int c0, int c1,
                                     unsigned char* out, int nbytes) {
  int32_t coords[2] = {c0, c1};
  dump_box<2>(&map, coords, out, nbytes);
}

extern "C" __global__ void tma_box3d(const __grid_constant__ CUtensorMap map, int c0, int c1,
                                     int c2, unsigned char* out, int nbytes) {
  int32_t coords[3] = {c0, c1, c2};
  dump_box<3>(&map, coords, out, nbytes);
}
