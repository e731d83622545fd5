"""Emulator engine: asynchronous cp.async (commit groups, wait_group, mbarrier arrivals) and
the races against copies still in flight (hand-written PTX)."""

from __future__ import annotations

import numpy as np
import pytest
import tileopt.emulator as emu

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# A 3-stage cp.async pipeline over tiles of 64 x 16 bytes (one 16-byte copy per thread and
# tile), as Triton and CUTLASS write it: two tiles in flight, `cp.async.wait_group 1` before
# a tile is used, one bar.sync, then the next copy goes into the stage read one iteration ago.
# Thread t reads the chunk of thread (t + 32) % 64, in the other warp. Copies past the last
# tile have src-size 0 (zero fill, nothing read).
PIPE3 = (
    HEAD
    + """.visible .entry pipe3(.param .u64 in, .param .u64 out, .param .u32 ntiles)
{
  .reg .pred %p<4>;
  .reg .b32 %r<32>;
  .reg .b64 %rd<16>;
  .shared .align 16 .b8 stage[3072];
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [ntiles];
  mov.u32 %r2, %tid.x;
  shl.b32 %r3, %r2, 4;
  mov.u32 %r4, stage;
  add.u32 %r5, %r4, %r3;
  cvt.u64.u32 %rd3, %r3;
  add.s64 %rd4, %rd1, %rd3;
  cp.async.cg.shared.global [%r5], [%rd4], 16;
  cp.async.commit_group;
  add.s64 %rd5, %rd4, 1024;
  cp.async.cg.shared.global [%r5+1024], [%rd5], 16;
  cp.async.commit_group;
  add.u32 %r7, %r2, 32;
  and.b32 %r7, %r7, 63;
  shl.b32 %r7, %r7, 4;
  mov.u32 %r6, 0;
LOOP:
  cp.async.wait_group WAITN;
  BARRIER
  rem.u32 %r8, %r6, 3;
  mul.lo.u32 %r9, %r8, 1024;
  add.u32 %r10, %r4, %r9;
  add.u32 %r10, %r10, %r7;
  ld.shared.v4.u32 {%r11, %r12, %r13, %r14}, [%r10];
  add.u32 %r15, %r11, %r12;
  add.u32 %r15, %r15, %r13;
  add.u32 %r15, %r15, %r14;
  mad.lo.u32 %r16, %r6, 64, %r2;
  mul.wide.u32 %rd6, %r16, 4;
  add.s64 %rd7, %rd2, %rd6;
  st.global.u32 [%rd7], %r15;
  add.u32 %r17, %r6, 2;
  setp.lt.u32 %p1, %r17, %r1;
  selp.u32 %r18, 16, 0, %p1;
  sub.u32 %r21, %r1, 1;
  min.u32 %r21, %r17, %r21;
  rem.u32 %r19, %r17, 3;
  mul.lo.u32 %r19, %r19, 1024;
  add.u32 %r20, %r5, %r19;
  mul.wide.u32 %rd8, %r21, 1024;
  add.s64 %rd9, %rd4, %rd8;
  cp.async.cg.shared.global [%r20], [%rd9], 16, %r18;
  cp.async.commit_group;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r1;
  @%p2 bra LOOP;
  cp.async.wait_all;
  ret;
}
"""
)


def _pipe3(wait_n: int = 1, barrier: bool = True) -> emu.Module:
    text = PIPE3.replace("WAITN", str(wait_n)).replace("BARRIER", "bar.sync 0;" if barrier else "")
    return emu.load_ptx(text)


def _pipe3_expect(x: np.ndarray) -> np.ndarray:
    chunks = x.reshape(-1, 64, 4).astype(np.uint64).sum(axis=2).astype(np.uint32)
    return chunks[:, (np.arange(64) + 32) % 64]


@pytest.mark.parametrize("ntiles,grid", [(2, 1), (5, 3), (9, 2)])
def test_cp_async_three_stage_pipeline(ntiles: int, grid: int) -> None:
    """Every CTA of the grid runs the same pipeline over the same tiles (in lockstep)."""
    rng = np.random.default_rng(ntiles)
    x = rng.integers(0, 1 << 20, ntiles * 256, dtype=np.uint32)
    out = np.zeros(ntiles * 64, np.uint32)
    stats = _pipe3().launch("pipe3", grid=grid, block=64, args=[x, out, ntiles])
    np.testing.assert_array_equal(out.reshape(ntiles, 64), _pipe3_expect(x))
    assert stats.shared_races == 0
    assert stats.shared_uninitialized_reads == 0


def test_cp_async_reading_a_copy_in_flight_is_a_race() -> None:
    """wait_group 2 leaves the tile being read in flight: the read races with the copy."""
    mod = _pipe3(wait_n=2)
    x = np.arange(4 * 256, dtype=np.uint32)
    out = np.zeros(4 * 64, np.uint32)
    with pytest.raises(
        emu.SharedRaceError,
        match=r"while an asynchronous copy into it \(PTX "
        r"line \d+: `cp\.async\.cg",
    ):
        mod.launch("pipe3", grid=1, block=64, args=[x, out, 4])
    stats = mod.launch("pipe3", grid=1, block=64, args=[x, out, 4], shared_checks="count")
    assert stats.shared_races > 0


def test_cp_async_completes_for_the_waiting_thread_only() -> None:
    """Without the bar.sync, the other warp reads bytes that landed for this warp: a race."""
    mod = _pipe3(barrier=False)
    x = np.arange(3 * 256, dtype=np.uint32)
    with pytest.raises(emu.SharedRaceError, match="written by warp"):
        mod.launch("pipe3", grid=1, block=64, args=[x, np.zeros(3 * 64, np.uint32), 3])


def test_cp_async_left_in_flight_at_exit_races_with_later_reads() -> None:
    """Warp 0 issues copies and exits without waiting: bar.sync does not wait for them, so
    warp 1 reading the destination races with the copies."""
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 in, .param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 buf[512];
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  shl.b32 %r3, %r2, 4;
  mov.u32 %r4, buf;
  add.u32 %r5, %r4, %r3;
  setp.ge.u32 %p1, %r1, 32;
  @%p1 bra READER;
  cvt.u64.u32 %rd3, %r3;
  add.s64 %rd4, %rd1, %rd3;
  cp.async.cg.shared.global [%r5], [%rd4], 16;
  cp.async.commit_group;
  ret;
READER:
  bar.sync 0;
  ld.shared.u32 %r6, [%r5];
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r6;
  ret;
}
"""
    )
    x = np.arange(128, dtype=np.uint32)
    with pytest.raises(emu.SharedRaceError, match="still in flight"):
        emu.load_ptx(ptx).launch("k", grid=1, block=64, args=[x, np.zeros(32, np.uint32)])


@pytest.mark.parametrize("noinc", [True, False])
def test_cp_async_mbarrier_arrive(noinc: bool) -> None:
    """cp.async.mbarrier.arrive{.noinc}: the arrival comes when the thread's copies land.
    Without .noinc the pending count is raised first, so each thread also arrives itself."""
    arrive = (
        "cp.async.mbarrier.arrive.noinc.shared.b64 [%r6];"
        if noinc
        else "cp.async.mbarrier.arrive.shared.b64 [%r6];\n  mbarrier.arrive.shared.b64 %rd9, [%r6];"
    )
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 in, .param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  .shared .align 16 .b8 buf[1024];
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r6, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra SYNC;
  mbarrier.init.shared.b64 [%r6], 64;
SYNC:
  bar.sync 0;
  shl.b32 %r3, %r1, 4;
  mov.u32 %r4, buf;
  add.u32 %r5, %r4, %r3;
  cvt.u64.u32 %rd3, %r3;
  add.s64 %rd4, %rd1, %rd3;
  cp.async.cg.shared.global [%r5], [%rd4], 16;
  ARRIVE
WAIT:
  mbarrier.test_wait.parity.shared.b64 %p2, [%r6], 0;
  @!%p2 bra WAIT;
  add.u32 %r7, %r1, 32;
  and.b32 %r7, %r7, 63;
  shl.b32 %r7, %r7, 4;
  add.u32 %r8, %r4, %r7;
  ld.shared.u32 %r9, [%r8+12];
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r9;
  ret;
}
""".replace("ARRIVE", arrive)
    )
    x = np.arange(256, dtype=np.uint32) * 3
    out = np.zeros(64, np.uint32)
    stats = emu.load_ptx(ptx).launch("k", grid=2, block=64, args=[x, out])
    np.testing.assert_array_equal(out, x.reshape(64, 4)[(np.arange(64) + 32) % 64, 3])
    assert stats.shared_races == 0
