// Multi-stage cp.async pipelines from CUDA C.
//  * pipelined_matmul: C = A B (f32) with a 3-stage pipeline of the __pipeline_* primitives
//    (cp.async + commit_group + wait_group STAGES-2), CUTLASS-style: the next tile is issued
//    into the stage consumed one iteration earlier; ragged edges are zero-filled (zfill).
//  * memcpy_async_barrier: cuda::memcpy_async completing on a cuda::barrier, double buffered
//    (sm_80: cp.async + cp.async.mbarrier.arrive; sm_90: cp.async.bulk + expect_tx).
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda_pipeline.h>

#define BM 32
#define BN 32
#define BK 16
#define STAGES 3

// Requires K % 4 == 0 and N % 4 == 0 (16-byte chunks are wholly inside or outside).
__device__ void load_tile(float (*As)[BK], float (*Bs)[BN], const float* A, const float* B,
                          int M, int N, int K, int row0, int col0, int k0) {
  int t = threadIdx.x;
  if (t < 128) {  // A: 32 rows x 4 chunks of 4 floats
    int r = t / 4, c = (t % 4) * 4;
    bool in = row0 + r < M && k0 + c < K;
    const float* src = in ? A + (size_t)(row0 + r) * K + k0 + c : A;
    __pipeline_memcpy_async(&As[r][c], src, 16, in ? 0 : 16);
  } else {  // B: 16 rows x 8 chunks
    int u = t - 128, r = u / 8, c = (u % 8) * 4;
    bool in = k0 + r < K && col0 + c < N;
    const float* src = in ? B + (size_t)(k0 + r) * N + col0 + c : B;
    __pipeline_memcpy_async(&Bs[r][c], src, 16, in ? 0 : 16);
  }
}

extern "C" __global__ void pipelined_matmul(const float* A, const float* B, float* C, int M,
                                            int N, int K) {
  __shared__ alignas(16) float As[STAGES][BM][BK];
  __shared__ alignas(16) float Bs[STAGES][BK][BN];
  int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  int ntiles = (K + BK - 1) / BK;
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ntiles) load_tile(As[s], Bs[s], A, B, M, N, K, row0, col0, s * BK);
    __pipeline_commit();
  }
  int r = threadIdx.x / 8, c = (threadIdx.x % 8) * 4;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int t = 0; t < ntiles; ++t) {
    __pipeline_wait_prior(STAGES - 2);
    __syncthreads();
    int nt = t + STAGES - 1;
    if (nt < ntiles)
      load_tile(As[nt % STAGES], Bs[nt % STAGES], A, B, M, N, K, row0, col0, nt * BK);
    __pipeline_commit();
    int s = t % STAGES;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a = As[s][r][k];
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] += a * Bs[s][k][c + j];
    }
  }
  for (int j = 0; j < 4; ++j)
    if (row0 + r < M && col0 + c + j < N) C[(size_t)(row0 + r) * N + col0 + c + j] = acc[j];
}

namespace cg = cooperative_groups;
using block_barrier = cuda::barrier<cuda::thread_scope_block>;

// out[t][i] = in[t][255 - i] + 1 for ntiles tiles of 256 floats, two buffers in flight.
extern "C" __global__ void memcpy_async_barrier(const float* in, float* out, int ntiles) {
  __shared__ alignas(16) float buf[2][256];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ block_barrier bar[2];
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) {
    init(&bar[0], block.size());
    init(&bar[1], block.size());
  }
  block.sync();
  const float* src = in + (size_t)blockIdx.x * ntiles * 256;
  float* dst = out + (size_t)blockIdx.x * ntiles * 256;
  cuda::memcpy_async(block, buf[0], src, cuda::aligned_size_t<16>(sizeof(buf[0])), bar[0]);
  for (int t = 0; t < ntiles; t++) {
    if (t + 1 < ntiles)
      cuda::memcpy_async(block, buf[(t + 1) % 2], src + (t + 1) * 256,
                         cuda::aligned_size_t<16>(sizeof(buf[0])), bar[(t + 1) % 2]);
    bar[t % 2].arrive_and_wait();
    dst[t * 256 + threadIdx.x] = buf[t % 2][255 - threadIdx.x] + 1.0f;
    block.sync();
  }
}
