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
        HEAD90  # try_wait
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


# ---------------------------------------------------------------- phases and transaction counts

HEAD90 = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _record(k: int, pred: str = "%p2") -> str:
    """PTX that stores predicate *pred* (0/1) to out[k] (out in %rd1)."""
    return f"  selp.u32 %r10, 1, 0, {pred};\n  st.global.u32 [%rd1+{4 * k}], %r10;\n"


def _single_thread(body: str) -> str:
    return (
        HEAD90
        + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<8>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  .shared .align 8 .b64 bar;
  .shared .align 8 .b64 bar2;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra END;
  ld.param.u64 %rd1, [out];
  mov.u32 %r2, bar;
"""
        + body
        + "END:\n  ret;\n}\n"
    )


def test_mbarrier_phases_arrivals_and_transaction_counts() -> None:
    """A phase completes when its pending arrivals and its transaction count are both zero;
    tokens carry the phase of the arrival; arrive_drop lowers later phases' counts."""
    body = (
        "  mbarrier.init.shared::cta.b64 [%r2], 3;\n"
        "  mbarrier.arrive.shared::cta.b64 %rd2, [%r2];\n"
        "  mbarrier.arrive.shared::cta.b64 %rd3, [%r2], 1;\n"
        "  mbarrier.test_wait.shared::cta.b64 %p2, [%r2], %rd2;\n"
        + _record(0)  # 2 of 3 arrivals: incomplete
        + "  mbarrier.arrive.shared::cta.b64 %rd4, [%r2];\n"
        "  mbarrier.test_wait.shared::cta.b64 %p2, [%r2], %rd2;\n"
        + _record(1)  # phase 0 complete
        + "  mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n"
        + _record(2)
        + "  mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r2], 1;\n"
        + _record(3)
        # phase 1: all arrivals at once, 64 transaction bytes outstanding
        + "  mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r2], 64, 3;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 1;\n"
        + _record(4)
        + "  mbarrier.complete_tx.shared::cta.b64 [%r2], 32;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 1, 1000;\n"
        + _record(5)
        + "  mbarrier.complete_tx.shared::cta.b64 [%r2], 32;\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 1;\n"
        + _record(6)
        # phase 2: expect_tx alone, then the arrivals
        + "  mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r2], 16;\n"
        "  mbarrier.arrive.shared::cta.b64 _, [%r2], 3;\n"
        "  mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n"
        + _record(7)
        + "  mbarrier.complete_tx.shared::cta.b64 [%r2], 16;\n"
        "  mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n"
        + _record(8)
        # phase 3: arrive_drop, so that phase 4 expects 2 arrivals
        + "  mbarrier.arrive_drop.shared::cta.b64 _, [%r2];\n"
        "  mbarrier.arrive.shared::cta.b64 _, [%r2], 2;\n"
        "  mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r2], 1;\n"
        + _record(9)
        + "  mbarrier.arrive.shared::cta.b64 %rd6, [%r2];\n"
        "  mbarrier.test_wait.shared::cta.b64 %p2, [%r2], %rd6;\n"
        + _record(10)
        + "  mbarrier.arrive.shared::cta.b64 _, [%r2];\n"
        "  mbarrier.test_wait.shared::cta.b64 %p2, [%r2], %rd6;\n"
        + _record(11)
        + "  cvt.u32.u64 %r11, %rd2;\n  st.global.u32 [%rd1+48], %r11;\n"
        "  cvt.u32.u64 %r11, %rd5;\n  st.global.u32 [%rd1+52], %r11;\n"
        "  cvt.u32.u64 %r11, %rd6;\n  st.global.u32 [%rd1+56], %r11;\n"
        "  mbarrier.inval.shared::cta.b64 [%r2];\n"
    )
    out = np.full(15, 7, np.uint32)
    emu.load_ptx(_single_thread(body)).launch("k", grid=2, block=32, args=[out])
    np.testing.assert_array_equal(out[:12], [0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1])
    np.testing.assert_array_equal(out[12:], [0, 1, 4])  # phases of the arrivals


def test_mbarrier_address_forms() -> None:
    """32- and 64-bit shared addresses, a symbol, a generic address, .shared::cluster."""
    body = (
        "  cvt.u64.u32 %rd2, %r2;\n"
        "  cvta.shared.u64 %rd3, %rd2;\n"
        "  mbarrier.init.shared.b64 [%rd2], 5;\n"
        "  mbarrier.arrive.shared.b64 %rd4, [%r2];\n"
        "  mbarrier.arrive.shared::cta.b64 %rd4, [%rd2];\n"
        "  mbarrier.arrive.b64 %rd4, [%rd3];\n"
        "  mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r2];\n"
        "  mbarrier.test_wait.parity.b64 %p2, [%rd3], 0;\n"
        + _record(0)
        + "  mbarrier.arrive.release.cta.shared::cta.b64 _, [bar];\n"
        "  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [bar], 0;\n"
        + _record(1)
        + "  mbarrier.try_wait.acquire.cluster.shared::cta.b64 %p2, [%r2], %rd4, 100;\n"
        + _record(2)
    )
    out = np.zeros(3, np.uint32)
    emu.load_ptx(_single_thread(body)).launch("k", grid=1, block=32, args=[out])
    np.testing.assert_array_equal(out, [0, 1, 1])


@pytest.mark.parametrize(
    "body,message",
    [
        ("  mbarrier.arrive.shared::cta.b64 _, [%r2];\n", "not initialised"),
        ("  mbarrier.init.shared::cta.b64 [%r2], 0;\n", r"count 0 not in \[1, 1048575\]"),
        (
            "  mbarrier.init.shared::cta.b64 [%r2], 1;\n"
            "  mbarrier.expect_tx.shared::cta.b64 [%r2], 128;\n"
            "  mbarrier.arrive.shared::cta.b64 _, [%r2], 2;\n",
            "1 more arrivals than the phase expects",
        ),
        (
            "  mbarrier.init.shared::cta.b64 [%r2], 1;\n"
            "  mbarrier.inval.shared::cta.b64 [%r2];\n"
            "  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n",
            "not initialised",
        ),
    ],
    ids=["uninitialised", "zero-count", "too-many-arrivals", "invalidated"],
)
def test_mbarrier_misuse_is_an_error(body: str, message: str) -> None:
    mod = emu.load_ptx(_single_thread(body))
    with pytest.raises(emu.EmulatorError, match=message):
        mod.launch("k", grid=1, block=32, args=[np.zeros(4, np.uint32)])


# ---------------------------------------------------------------- deadlocks

_DEADLOCK = (
    HEAD90
    + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra SYNC;
  mbarrier.init.shared::cta.b64 [%r2], 2;
  mbarrier.arrive.shared::cta.b64 _, [%r2];
SYNC:
  bar.sync 0;
  setp.ge.u32 %p3, %r1, SPLIT;
  @%p3 bra OTHER;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  bar.sync 1, 64;
  ret;
OTHER:
  bar.sync 1, 64;
  ret;
}
"""
)


@pytest.mark.parametrize("split", [64, 32], ids=["all-threads-wait", "with-bar-sync"])
def test_mbarrier_deadlock_raises_instead_of_hanging(split: int) -> None:
    """Every thread waits for an arrival that never comes (one of two): the emulator stops
    with an error naming the wait's line, also when other threads wait at a bar.sync."""
    import time

    mod = emu.load_ptx(_DEADLOCK.replace("SPLIT", str(split)))
    t0 = time.perf_counter()
    deadlock = r"deadlocked.*PTX line 19 `mbarrier\.try_wait"
    with pytest.raises(emu.EmulatorError, match=deadlock) as e:
        mod.launch("k", grid=3, block=64, args=[np.zeros(1, np.uint32)])
    assert time.perf_counter() - t0 < 10
    assert "1 of 2 arrivals pending" in str(e.value)
    if split == 32:
        assert "bar.sync 1, 64" in str(e.value)


def test_two_spinning_warps_do_not_starve_the_producer() -> None:
    """Warps 0 and 1 spin on two mbarriers that warp 2, further down the code, completes:
    spinning warps yield round robin, so warp 2 runs (not only the two spinners in turn)."""
    ptx = (
        HEAD90
        + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;
  .shared .align 8 .b64 bars[2];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bars;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra SYNC;
  mbarrier.init.shared::cta.b64 [%r2], 1;
  mbarrier.init.shared::cta.b64 [%r2+8], 1;
SYNC:
  bar.sync 0;
  shr.u32 %r3, %r1, 5;
  setp.eq.u32 %p2, %r3, 0;
  @%p2 bra WAIT_A;
  setp.eq.u32 %p2, %r3, 1;
  @%p2 bra WAIT_B;
  bra.uni PRODUCER;
WAIT_A:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2], 0;
  @!%p3 bra WAIT_A;
  bra.uni DONE;
WAIT_B:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r2+8], 0;
  @!%p3 bra WAIT_B;
  bra.uni DONE;
PRODUCER:
  and.b32 %r4, %r1, 31;
  setp.eq.u32 %p2, %r4, 0;
  @%p2 mbarrier.arrive.shared::cta.b64 _, [%r2];
  @%p2 mbarrier.arrive.shared::cta.b64 _, [%r2+8];
DONE:
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""
    )
    out = np.full(96, 9, np.uint32)
    emu.load_ptx(ptx).launch("k", grid=2, block=96, args=[out], max_steps=100_000)
    np.testing.assert_array_equal(out, np.arange(96) // 32)


def test_labels_are_local_to_their_block() -> None:
    """Triton emits each mbarrier wait as `{ .reg .pred complete; waitLoop: ... bra waitLoop; }`:
    the same label in several blocks, each branch going to its own block's label."""
    wait = """{
  .reg .pred complete;
waitLoop:
  mbarrier.try_wait.parity.shared::cta.b64 complete, [%r2+OFF], 0;
  @!complete bra.uni waitLoop;
}
"""
    body = (
        "  mbarrier.init.shared::cta.b64 [%r2], 1;\n"
        "  mbarrier.init.shared::cta.b64 [%r2+8], 1;\n"
        "  mbarrier.arrive.shared::cta.b64 _, [%r2];\n"
        "  mbarrier.arrive.shared::cta.b64 _, [%r2+8];\n"
        + wait.replace("OFF", "0")
        + wait.replace("OFF", "8")
        + "  mov.u32 %r3, 5;\n  st.global.u32 [%rd1], %r3;\n"
    )
    ptx = _single_thread(body).replace(
        ".shared .align 8 .b64 bar;", ".shared .align 8 .b64 bar[2];"
    )
    out = np.zeros(1, np.uint32)
    emu.load_ptx(ptx).launch("k", grid=1, block=32, args=[out])
    assert out[0] == 5
    twice = _single_thread("{\nL:\n  bra.uni L;\nL:\n  bra.uni L;\n}\n")
    with pytest.raises(emu.PTXLoadError, match="label L defined twice in a block"):
        emu.load_ptx(twice)
