"""Emulator engine: mbarrier-based synchronisation (cuda::barrier, cuda::pipeline) from nvcc."""

from __future__ import annotations

import numpy as np
import pytest
import tileopt.emulator as emu

SOURCE = r"""
#include <cuda/barrier>
#include <cooperative_groups.h>
#include <cuda/pipeline>
namespace cg = cooperative_groups;
extern "C" __global__ void bar_kernel(const int* in, int* out, int n) {
  #pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ int s[256];
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  for (int round = 0; round < 3; round++) {
    s[threadIdx.x] = in[(blockIdx.x * blockDim.x + threadIdx.x + round) % n] * (round + 1);
    bar.arrive_and_wait();
    out[(blockIdx.x * blockDim.x + threadIdx.x) * 3 + round] = s[(threadIdx.x + 1) % blockDim.x];
    bar.arrive_and_wait();
  }
}
extern "C" __global__ void pipe_kernel(const float* in, float* out, int n) {
  __shared__ float s[2][128];
  auto block = cg::this_thread_block();
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> state;
  auto pipe = cuda::make_pipeline(block, &state);
  int nt = n / 128;
  for (int t = 0; t < nt + 1; t++) {
    if (t < nt) {
      pipe.producer_acquire();
      cuda::memcpy_async(block, s[t % 2], in + t * 128, sizeof(float) * 128, pipe);
      pipe.producer_commit();
    }
    if (t >= 1) {
      pipe.consumer_wait();
      out[(t - 1) * 128 + threadIdx.x] = s[(t - 1) % 2][127 - threadIdx.x] * 2.f;
      pipe.consumer_release();
    }
  }
}
"""


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def module(request, compile_cuda) -> emu.Module:
    return emu.load_ptx(compile_cuda(SOURCE, request.param))


def test_cuda_barrier_arrive_and_wait(module: emu.Module) -> None:
    n = 512
    inp = np.arange(n, dtype=np.int32) * 7
    out = np.zeros((n, 3), np.int32)
    module.launch("bar_kernel", grid=2, block=256, args=[inp, out, n])
    b = np.arange(n) // 256
    u = (np.arange(n) % 256 + 1) % 256
    for r in range(3):
        np.testing.assert_array_equal(out[:, r], inp[(b * 256 + u + r) % n] * (r + 1))


def test_cuda_pipeline_memcpy_async(module: emu.Module) -> None:
    x = np.arange(1024, dtype=np.float32)
    y = np.zeros(1024, np.float32)
    module.launch("pipe_kernel", grid=1, block=128, args=[x, y, 1024])
    np.testing.assert_array_equal(y, (x.reshape(8, 128)[:, ::-1] * 2).reshape(-1))


HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def test_warp_specialised_producer_consumer_with_mbarrier() -> None:
    # warp 1 (consumer) waits on an mbarrier that warp 0 (producer, further in the code) completes
    ptx = (
        HEAD
        + """.visible .entry pc(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .b8 data[128];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INIT_DONE;
  mbarrier.init.shared.b64 [%r2], 32;
INIT_DONE:
  bar.sync 0;
  setp.lt.u32 %p2, %r1, 32;
  @%p2 bra PRODUCER;
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [%r2], 0;
  @!%p3 bra WAIT;
  and.b32 %r3, %r1, 31;
  shl.b32 %r4, %r3, 2;
  mov.u32 %r5, data;
  add.u32 %r5, %r5, %r4;
  ld.shared.u32 %r6, [%r5];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
PRODUCER:
  shl.b32 %r4, %r1, 2;
  mov.u32 %r5, data;
  add.u32 %r5, %r5, %r4;
  mul.lo.u32 %r7, %r1, %r1;
  st.shared.u32 [%r5], %r7;
  mbarrier.arrive.shared.b64 %rd4, [%r2];
  ret;
}
"""
    )
    out = np.zeros(32, np.uint32)
    emu.load_ptx(ptx).launch("pc", grid=3, block=64, args=[out])
    np.testing.assert_array_equal(out, np.arange(32) ** 2)
