"""Emulator engine: parsing, load-time errors, control flow, barriers, calls (hand-written PTX)."""

from __future__ import annotations

import numpy as np
import pytest
import tileopt.emulator as emu

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def test_parser_accepts_directives_comments_and_debug_sections() -> None:
    ptx = (
        HEAD
        + """
// a comment
/* a block
   comment */
.file 1 "k.cu"
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .f32 scale = 0f40000000;
.visible .entry k(.param .u64 .ptr .global .align 4 k_param_0)
.maxntid 128, 1, 1
.minnctapersm 1
{
  .reg .b32 %r<5>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<6>;
  .loc 1 4 2
  ld.param.u64 %rd1, [k_param_0];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 3;
  mul.wide.u32 %rd3, %r2, 4;
  mov.u64 %rd4, table;
  add.s64 %rd4, %rd4, %rd3;
  ld.global.u32 %r3, [%rd4];          // table[tid & 3]
  {                                   // cuda_fp16.h's inline asm glues .reg and its type
  .reg.b16 lo, hi;
  mov.b32 {lo, hi}, %r3;
  mov.b32 %r4, {hi, lo};
  shr.u32 %r3, %r4, 16;
  }
  ld.const.f32 %f1, [scale];
  cvt.rn.f32.u32 %f2, %r3;
  mul.f32 %f2, %f2, %f1;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd5, %rd2, %rd5;
  st.global.f32 [%rd5+0], %f2;
  .pragma "nounroll";
  ret;
}
.section .debug_info { .b32 12 .b8 1, 2, 3 }
"""
    )
    mod = emu.load_ptx(ptx)
    assert mod.kernels == ["k"]
    out = np.zeros(8, np.float32)
    mod.launch("k", grid=1, block=8, args=[out])
    np.testing.assert_array_equal(out, [20, 40, 60, 80] * 2)
    with pytest.raises(emu.LaunchError, match="maxntid"):
        mod.launch("k", grid=1, block=256, args=[out])
    with pytest.raises(emu.LaunchError, match="takes 1 arguments"):
        mod.launch("k", grid=1, block=8, args=[])


def test_unsupported_instruction_fails_at_load_with_line() -> None:
    ptx = (
        HEAD
        + """.visible .entry k()
{
  .reg .b32 %r<3>;
  mov.u32 %r1, 1;
  tex.1d.v4.f32.s32 {%r1, %r1, %r1, %r1}, [tex, {%r1}];
  ret;
}
"""
    )
    with pytest.raises(
        emu.UnsupportedInstructionError, match=r"line 8: unsupported instruction `tex\.1d"
    ):
        emu.load_ptx(ptx)
    bad_mod = (
        HEAD + ".visible .entry k()\n{\n .reg .b32 %r<3>;\n add.bogus.s32 %r1, %r1, 1;\n ret;\n}\n"
    )
    with pytest.raises(emu.UnsupportedInstructionError, match=r"line 7:.*modifier \.bogus"):
        emu.load_ptx(bad_mod)
    with pytest.raises(emu.PTXLoadError, match="undeclared register %r9"):
        emu.load_ptx(
            HEAD + ".visible .entry k()\n{\n .reg .b32 %r<3>;\n mov.u32 %r9, 1;\n ret;\n}\n"
        )
    assert issubclass(emu.UnsupportedInstructionError, emu.EmulatorError)


@pytest.mark.parametrize(
    ("ptx", "message"),
    [
        (".version\n.target sm_90\n.address_size 64\n", r"line 1: \.version needs a value"),
        (".version 8.0\n.target sm_90\n.address_size sixty\n",
         r"line 3: \.address_size takes a number"),
        (HEAD + ".visible .entry k()\n{\n .reg .pred %p<2>;\n .reg .b32 %r<3>;\n"
         " setp.lt.s32 %p1, %r1;\n ret;\n}\n", r"wrong number of operands"),
        (HEAD + ".visible .entry k()\n{\n .reg .pred %p<2>;\n .reg .b32 %r<3>;\n"
         " setp.lt.and.s32 %p1, %r1, %r2;\n ret;\n}\n", r"needs a predicate operand c"),
        # PTX integer literals are 64-bit (these were silently truncated)
        (HEAD + ".visible .entry k()\n{\n .reg .b32 %r<3>;\n"
         " mov.u32 %r1, 0x1FFFFFFFFFFFFFFFFFFFF;\n ret;\n}\n",
         r"line 7: integer literal '0x1FFFFFFFFFFFFFFFFFFFF' does not fit in 64 bits"),
        (HEAD + ".visible .entry k()\n{\n .reg .b32 %r<3>;\n .reg .b64 %rd<3>;\n"
         " ld.global.u32 %r1, [%rd1+18446744073709551616];\n ret;\n}\n",
         r"line 8: integer literal '18446744073709551616' does not fit in 64 bits"),
    ],
)
def test_malformed_ptx_is_a_load_error(ptx: str, message: str) -> None:
    """Malformed directives and operand lists (found by mutating compiled PTX) are load
    errors that name the line, not raw IndexError/ValueError."""
    with pytest.raises(emu.PTXLoadError, match=message):
        emu.load_ptx(ptx)


def test_parameterized_register_declarations_are_resolved_lazily() -> None:
    # `%r<N>` declares %r0..%r{N-1} for any N; expanding the names eagerly hung the loader
    # (and ended in a MemoryError) for N = 10^11. %rd1<3> declares %rd10..%rd12.
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<99999999999>;
  .reg .b64 %rd<2>;
  .reg .b64 %rd1<3>;
  mov.u32 %r99999999998, 7;
  mov.u64 %rd12, 5;
  cvt.u64.u32 %rd10, %r99999999998;
  add.s64 %rd10, %rd10, %rd12;
  ld.param.u64 %rd1, [out];
  st.global.u64 [%rd1], %rd10;
  ret;
}
"""
    )
    out = np.zeros(1, np.uint64)
    emu.load_ptx(ptx).launch("k", grid=1, block=1, args=[out])
    assert out[0] == 12
    for undeclared in ("%r99999999999", "%r01", "%rd13"):
        with pytest.raises(emu.PTXLoadError, match=f"undeclared register {undeclared}"):
            emu.load_ptx(ptx.replace("mov.u64 %rd12, 5", f"mov.u32 {undeclared}, 5"))


def test_a_register_keeps_its_name_beside_a_range_that_starts_with_it() -> None:
    # Triton 3.9's fp8e4nv -> bf16 (sm_89, sm_90a) declares `a` and then `a<2>`: the range
    # dropped every name that starts with "a" (`a`, `aa`), not only a0 and a1.
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 x, .param .u64 out)
{
  .reg .b16 %rs<2>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [out];
  ld.global.b16 %rs1, [%rd1];
  {
  .reg .b32 a;
  .reg .b32 aa;
  .reg .f16 a<2>;
  .reg .b16 b<2>;
  cvt.rn.f16x2.e4m3x2 a, %rs1;
  mov.b32 aa, a;
  mov.b32 {a0, a1}, aa;
  cvt.bf16.f16 b0, a0;
  cvt.bf16.f16 b1, a1;
  mov.b32 %r1, {b0, b1};
  }
  st.global.b32 [%rd2], %r1;
  ret;
}
"""
    ).replace(".target sm_80", ".target sm_90a")
    x = np.array([0x38, 0xC0], np.uint8).view(np.uint16)  # e4m3: 1.0 (low byte), -2.0
    out = np.zeros(1, np.uint32)
    emu.load_ptx(ptx).launch("k", grid=1, block=1, args=[x, out])
    assert out[0] == 0xC0003F80  # bf16 {1.0, -2.0}


def test_divergent_loop_reconverges_before_shuffle() -> None:
    # each thread loops tid % 7 times, then the warp reduces with shfl: requires reconvergence
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, 7;
  mov.u32 %r3, 0;
  mov.u32 %r4, 0;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra DONE;
LOOP:
  add.u32 %r4, %r4, %r3;
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p2, %r3, %r2;
  @%p2 bra LOOP;
DONE:
  shfl.sync.bfly.b32 %r5, %r4, 16, 31, -1;
  add.u32 %r4, %r4, %r5;
  shfl.sync.bfly.b32 %r5, %r4, 8, 31, -1;
  add.u32 %r4, %r4, %r5;
  shfl.sync.bfly.b32 %r5, %r4, 4, 31, -1;
  add.u32 %r4, %r4, %r5;
  shfl.sync.bfly.b32 %r5, %r4, 2, 31, -1;
  add.u32 %r4, %r4, %r5;
  shfl.sync.bfly.b32 %r5, %r4, 1, 31, -1;
  add.u32 %r4, %r4, %r5;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r4;
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    out = np.zeros(96, np.uint32)
    stats = mod.launch("k", grid=1, block=96, args=[out])
    per = np.array([sum(range(t % 7)) for t in range(96)])
    exp = np.repeat(per.reshape(3, 32).sum(1), 32)
    np.testing.assert_array_equal(out, exp)
    assert stats.instructions_by_class["shfl"] == 5 * 3


def test_early_exit_then_barrier_and_shared_broadcast() -> None:
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 buf[512];
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [n];
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 exit;
  shl.b32 %r3, %r1, 2;
  mov.u32 %r4, buf;
  add.u32 %r5, %r4, %r3;
  mul.lo.u32 %r6, %r1, %r1;
  st.shared.u32 [%r5], %r6;
  bar.sync 0;
  sub.u32 %r7, %r2, 1;
  sub.u32 %r7, %r7, %r1;
  shl.b32 %r7, %r7, 2;
  add.u32 %r8, %r4, %r7;
  ld.shared.u32 %r9, [%r8];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    out = np.full((4, 128), 7, np.uint32)
    for n in (128, 100, 33, 1):
        o = np.full(128, 7, np.uint32)
        st = mod.launch("k", grid=1, block=128, args=[o, n])
        assert st.barriers == 1
        np.testing.assert_array_equal(o[:n], (n - 1 - np.arange(n)) ** 2)
        assert (o[n:] == 7).all()
    del out


def test_bar_red_popc_and_vote_after_divergence() -> None:
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 1;
  setp.eq.u32 %p1, %r2, 1;
  bar.red.popc.u32 %r3, 0, %p1;
  setp.lt.u32 %p2, %r1, 40;
  bar.red.and.pred %p3, 0, %p2;
  selp.u32 %r4, 1000, 0, %p3;
  add.u32 %r3, %r3, %r4;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    out = np.zeros(64, np.uint32)
    mod.launch("k", grid=1, block=64, args=[out])
    assert (out == 32).all()
    out = np.zeros(40, np.uint32)
    mod.launch("k", grid=1, block=40, args=[out])
    assert (out == 1020).all()


#: A device function returning a struct, called from a kernel.
CALL_PTX = HEAD + """
.func (.param .align 8 .b8 func_retval0[8]) pair(.param .b32 pair_param_0, .param .b32 pair_param_1)
{
  .reg .b32 %r<5>;
  ld.param.b32 %r1, [pair_param_0];
  ld.param.b32 %r2, [pair_param_1];
  add.s32 %r3, %r1, %r2;
  mul.lo.s32 %r4, %r1, %r2;
  st.param.v2.b32 [func_retval0+0], {%r3, %r4};
  ret;
}
.visible .entry k(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r5, 0;
  mov.u32 %r6, 0;
  setp.lt.u32 %p1, %r1, 5;
  @%p1 bra SKIP;
  {
  .param .b32 param0;
  st.param.b32 [param0+0], %r1;
  .param .b32 param1;
  st.param.b32 [param1+0], 3;
  .param .align 8 .b8 retval0[8];
  call.uni (retval0), pair, (param0, param1);
  ld.param.v2.b32 {%r5, %r6}, [retval0+0];
  }
SKIP:
  add.s32 %r7, %r5, %r6;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""


def test_device_function_call_with_struct_return() -> None:
    mod = emu.load_ptx(CALL_PTX)
    out = np.zeros(40, np.int32)
    mod.launch("k", grid=1, block=40, args=[out])
    t = np.arange(40)
    np.testing.assert_array_equal(out, np.where(t < 5, 0, (t + 3) + 3 * t))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("call.uni (retval0), pair, (param0, param1);",
          "call.uni (retval0), pair, (param0, param7);"), "call argument param7 is not declared"),
        ((".param .align 8 .b8 retval0[8];", ".shared .align;"), r"\.align needs a number"),
    ],
)
def test_malformed_calls_are_load_errors(edit: tuple[str, str], message: str) -> None:
    """A call with an undeclared .param argument, and a bare .align (found by mutating
    nvcc's PTX), are load errors, not KeyError/IndexError."""
    assert edit[0] in CALL_PTX
    with pytest.raises(emu.PTXLoadError, match=message):
        emu.load_ptx(CALL_PTX.replace(*edit))


def test_brx_idx_jump_table() -> None:
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, 3;
  ts: .branchtargets L0, L1, L2;
  brx.idx %r2, ts;
L0:
  mov.u32 %r3, 100;
  bra.uni END;
L1:
  mov.u32 %r3, 200;
  bra.uni END;
L2:
  mov.u32 %r3, 300;
END:
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    out = np.zeros(32, np.uint32)
    mod.launch("k", grid=1, block=32, args=[out])
    np.testing.assert_array_equal(out, 100 * (np.arange(32) % 3 + 1))


def test_special_registers_multi_dim() -> None:
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %tid.z;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, %ctaid.y;
  mov.u32 %r6, %laneid;
  mov.u32 %r7, %warpid;
  mov.u32 %r8, %ntid.y;
  mov.u32 %r9, %nctaid.x;
  mov.u32 %r10, %lanemask_lt;
  // linear index = ((ctaid.y * nctaid.x + ctaid.x) * 60) + tid.x + 5*(tid.y + 3*tid.z)
  mad.lo.u32 %r11, %r5, %r9, %r4;
  mul.lo.u32 %r11, %r11, 60;
  mad.lo.u32 %r12, %r3, %r8, %r2;
  mad.lo.u32 %r12, %r12, 5, %r1;
  add.u32 %r11, %r11, %r12;
  mul.wide.u32 %rd2, %r11, 16;
  ld.param.u64 %rd1, [out];
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.u32 [%rd3], {%r12, %r6, %r7, %r10};
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    out = np.zeros((2 * 3 * 60, 4), np.uint32)
    mod.launch("k", grid=(3, 2), block=(5, 3, 4), args=[out])
    lin = np.tile(np.arange(60), 6)
    np.testing.assert_array_equal(out[:, 0], lin)
    np.testing.assert_array_equal(out[:, 1], lin % 32)
    np.testing.assert_array_equal(out[:, 2], lin // 32)
    np.testing.assert_array_equal(out[:, 3], (1 << (lin % 32)) - 1)


def test_trap_raises() -> None:
    ptx = (
        HEAD
        + ".visible .entry k()\n{\n .reg .pred %p<2>;\n .reg .b32 %r<2>;\n mov.u32 %r1, %tid.x;\n"
        " setp.eq.u32 %p1, %r1, 5;\n @%p1 trap;\n ret;\n}\n"
    )
    mod = emu.load_ptx(ptx)
    with pytest.raises(emu.EmulatorError, match=r"trap.*thread \(5, 0, 0\)"):
        mod.launch("k", grid=1, block=32, args=[])
    mod.launch("k", grid=1, block=4, args=[])


RACE = (
    HEAD
    + """.visible .entry race(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[256];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, s;
  add.u32 %r4, %r3, %r2;
  st.shared.u32 [%r4], %r1;
  BAR
  xor.b32 %r5, %r2, 128;
  add.u32 %r6, %r3, %r5;
  ld.shared.u32 %r7, [%r6];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""
)


def test_missing_barrier_is_reported_as_a_shared_race() -> None:
    out = np.zeros(64, np.uint32)
    st = emu.load_ptx(RACE.replace("BAR", "bar.sync 0;")).launch("race", 1, 64, [out])
    np.testing.assert_array_equal(out, np.arange(64) ^ 32)
    assert st.shared_races == 0 and st.shared_uninitialized_reads == 0
    mod = emu.load_ptx(RACE.replace("BAR", ""))
    with pytest.raises(
        emu.SharedRaceError,
        match=r"line 17.*\n.*warp 0\) reads shared address 0x80, "
        r"written by warp 1",
    ):
        mod.launch("race", 1, 64, [out])
    st = mod.launch("race", 1, 64, [out], shared_checks="count")
    assert st.shared_races == 64
    # reading before anyone wrote: uninitialised reads are counted
    st = emu.load_ptx(RACE.replace("st.shared.u32 [%r4], %r1;", "").replace("BAR", "")).launch(
        "race", 1, 64, [out], shared_checks="count"
    )
    assert st.shared_uninitialized_reads == 64


BYTES = (
    HEAD
    + """.visible .entry bytes(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[64];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.eq.u32 %p1, %r2, 0;
  and.b32 %r3, %r1, 31;
  shl.b32 %r4, %r3, 1;
  mov.u32 %r5, s;
  add.u32 %r6, %r5, %r4;
  add.u32 %r7, %r6, %r2;
  STORE st.shared.u8 [%r7], %r1;
  BAR
  add.u32 %r8, %r6, LOAD;
  ld.shared.u8 %r9, [%r8];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}
"""
)


def _bytes(store: str, bar: str, load: str) -> str:
    """Lane l of warp w stores byte 2l + w (guarded by *store*), then loads byte 2l + (*load*):
    warps 0 and 1 write different bytes of each 4-byte word."""
    return BYTES.replace("STORE", store).replace("BAR", bar).replace("LOAD", load)


def test_warps_writing_other_bytes_of_a_word_do_not_race() -> None:
    """Shared-memory checks per byte: two warps' byte stores into one word (an 8-bit tile's
    st.shared.b8) are not counted as two warps writing one location."""
    out = np.zeros(64, np.uint32)
    # one store instruction for both warps, and one each (warp 0's, then warp 1's)
    for store in ("", "@%p1 st.shared.u8 [%r7], %r1;\n  @!%p1"):
        st = emu.load_ptx(_bytes(store, "bar.sync 0;", "%r2")).launch("bytes", 1, 64, [out])
        np.testing.assert_array_equal(out, np.arange(64))
        assert st.shared_races == 0


def test_a_byte_another_warp_wrote_is_a_race() -> None:
    """Only warp 0 stores; without a barrier, warp 1 reading warp 0's byte is a race, and
    reading the byte next to it (which nobody wrote) is not."""
    out = np.zeros(64, np.uint32)
    mod = emu.load_ptx(_bytes("@%p1", "", "0"))
    with pytest.raises(emu.SharedRaceError, match=r"warp 1\) reads .* written by warp 0"):
        mod.launch("bytes", 1, 64, [out])
    st = emu.load_ptx(_bytes("@%p1", "", "1")).launch("bytes", 1, 64, [out])
    assert st.shared_races == 0


# Each thread stores its id to out[tid], then to out[tid ^ 32] (STORE2: another warp's word)
# or loads out[tid ^ 32] (LOAD2), with BAR between.
GLOBAL_RACE = (
    HEAD
    + """.visible .entry grace(.param .u64 out, .param .u64 seen)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], VALUE;
  BAR
  xor.b32 %r2, %r1, 32;
  mul.wide.u32 %rd4, %r2, 4;
  add.s64 %rd5, %rd1, %rd4;
  SECOND
  ld.param.u64 %rd6, [seen];
  add.s64 %rd7, %rd6, %rd2;
  st.global.u32 [%rd7], %r3;
  ret;
}
"""
)
STORE2 = "add.u32 %r3, %r1, 1000;\n  st.global.u32 [%rd5], %r3;"
LOAD2 = "ld.global.u32 %r3, [%rd5];"


def _global_race(value: str, bar: str, second: str) -> str:
    return GLOBAL_RACE.replace("VALUE", value).replace("BAR", bar).replace("SECOND", second)


@pytest.mark.parametrize(
    ("second", "verb"), [(STORE2, "changes"), (LOAD2, "reads")], ids=["store", "load"]
)
def test_missing_barrier_is_reported_as_a_global_race(second: str, verb: str) -> None:
    """Warps are not ordered without a barrier: a load of another warp's store, or a store
    over it with another value, is a race (an H100 kept the first of two such stores)."""
    out, seen = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    st = emu.load_ptx(_global_race("%r1", "bar.sync 0;", second)).launch(
        "grace", 1, 64, [out, seen])
    assert st.global_races == 0
    if second == LOAD2:
        np.testing.assert_array_equal(seen, np.arange(64) ^ 32)
    mod = emu.load_ptx(_global_race("%r1", "", second))
    with pytest.raises(
        emu.GlobalRaceError,
        match=rf"line 1[78].*\n.*warp 0\) {verb} global address 0x[0-9a-f]+, stored by warp 1",
    ):
        mod.launch("grace", 1, 64, [out, seen])
    assert mod.launch("grace", 1, 64, [out, seen], global_checks="count").global_races == 64
    assert mod.launch("grace", 1, 64, [out, seen], global_checks="off").global_races == 0
    # One warp alone is ordered; another CTA is not compared (CTAs order with atomics).
    assert mod.launch("grace", 2, 32, [out, seen]).global_races == 0


def test_same_value_and_other_bytes_are_not_global_races() -> None:
    """Replicated stores of one value (broadcast layouts) and stores to other bytes of a word
    (rows of f16 that end mid-word) are not races."""
    out, seen = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    same = _global_race("7", "", "mov.u32 %r3, 7;\n  st.global.u32 [%rd5], %r3;")
    assert emu.load_ptx(same).launch("grace", 1, 64, [out, seen]).global_races == 0
    halves = (
        HEAD
        + """.visible .entry halves(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b16 %h<2>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [out];
  xor.b32 %r2, %r1, 32;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  cvt.u16.u32 %h1, %r1;
  st.global.u16 [%rd3], %h1;
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u16 [%rd3+2], %h1;
  ret;
}
"""
    )
    half = np.zeros(64, np.uint32)
    assert emu.load_ptx(halves).launch("halves", 1, 64, [half]).global_races == 0
    np.testing.assert_array_equal(half, np.arange(64) | ((np.arange(64) ^ 32) << 16))


def test_barrier_in_both_branches_and_warp_sync_waits_for_lanes() -> None:
    # threads reach bar.sync through two different instructions (if/else): they still meet,
    # and a shfl.sync after a divergent region waits for all lanes of its membermask
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[512];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, s;
  add.u32 %r4, %r3, %r2;
  and.b32 %r5, %r1, 1;
  setp.eq.u32 %p1, %r5, 0;
  @%p1 bra EVEN;
  mul.lo.u32 %r6, %r1, 3;
  st.shared.u32 [%r4], %r6;
  bar.sync 0;
  bra.uni JOIN;
EVEN:
  st.shared.u32 [%r4], %r1;
  bar.sync 0;
JOIN:
  xor.b32 %r7, %r2, 256;
  add.u32 %r8, %r3, %r7;
  ld.shared.u32 %r9, [%r8];
  shfl.sync.idx.b32 %r10, %r9, 0, 31, -1;
  add.u32 %r9, %r9, %r10;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}
"""
    )
    out = np.zeros(128, np.uint32)
    st = emu.load_ptx(ptx).launch("k", grid=2, block=128, args=[out])
    t = np.arange(128)
    val = np.where(t % 2 == 0, t, 3 * t)
    other = val[t ^ 64]
    np.testing.assert_array_equal(out, other + other[(t // 32) * 32])
    assert st.barriers == 2


def test_spin_wait_on_a_flag_set_by_another_warp_makes_progress() -> None:
    ptx = (
        HEAD
        + """.visible .entry pc(.param .u64 flag, .param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [flag];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra PRODUCER;
  setp.ne.u32 %p2, %r1, 32;
  @%p2 bra END;
SPIN:
  ld.volatile.global.u32 %r2, [%rd1];
  setp.eq.u32 %p3, %r2, 0;
  @%p3 bra SPIN;
  add.u32 %r2, %r2, 1;
  st.global.u32 [%rd2], %r2;
  bra.uni END;
PRODUCER:
  st.volatile.global.u32 [%rd1], 41;
END:
  ret;
}
"""
    )
    flag = np.zeros(1, np.uint32)
    out = np.zeros(1, np.uint32)
    emu.load_ptx(ptx).launch("pc", grid=1, block=64, args=[flag, out])
    assert out[0] == 42


def test_barrier_deadlock_is_reported() -> None:
    # warp 1 waits at a barrier that warp 0 never reaches (it spins on a flag set after it)
    ptx = (
        HEAD
        + """.visible .entry dl(.param .u64 flag)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [flag];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 32;
  @%p1 bra WAIT;
  bar.sync 0;
  st.volatile.global.u32 [%rd1], 1;
  ret;
WAIT:
  bar.sync 1;
  ret;
}
"""
    )
    with pytest.raises(emu.EmulatorError, match="deadlocked"):
        emu.load_ptx(ptx).launch("dl", grid=1, block=64, args=[np.zeros(1, np.uint32)])


def test_named_barrier_producer_arrive_consumer_sync() -> None:
    # warp 0 produces into shared memory and arrives at barrier 1 (count 64); warp 1 waits there
    ptx = (
        HEAD
        + """.visible .entry nb(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[128];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  shl.b32 %r3, %r2, 2;
  mov.u32 %r4, s;
  add.u32 %r4, %r4, %r3;
  setp.ge.u32 %p1, %r1, 32;
  @%p1 bra CONSUMER;
  mul.lo.u32 %r5, %r2, 10;
  st.shared.u32 [%r4], %r5;
  bar.arrive 1, 64;
  ret;
CONSUMER:
  bar.sync 1, 64;
  ld.shared.u32 %r6, [%r4];
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
}
"""
    )
    out = np.zeros(32, np.uint32)
    emu.load_ptx(ptx).launch("nb", grid=2, block=64, args=[out])
    np.testing.assert_array_equal(out, 10 * np.arange(32))
