"""Emulator engine: wgmma on hand-written PTX (descriptor decoding, counting, refused variants,
errors). The numerics are checked against nvcc (test_nvcc_wgmma.py) and Triton
(test_triton_wgmma.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tileopt.emulator as emu
from tileopt.emulator.warpgroup import MatrixDescriptor, decode_descriptor, operand_addresses

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _desc(addr: int, lbo: int, sbo: int, mode: int = 0, base: int = 0) -> int:
    return (addr >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (base << 49) | (mode << 62)


def _kernel(mma: str, a_extra: str = "", fill: str = "0x3C003C00") -> str:
    """64x8 f32 accumulators of 1.0; shared memory (4 KiB) filled with the 32-bit word *fill*
    (two f16 1.0 by default) by 128 threads; `mma` runs with %rd1 / %rd2 the A / B descriptors
    from the parameters; out[tid*4+i] = d_i."""
    return (
        HEAD
        + f""".visible .entry k(.param .u64 out, .param .u64 adesc, .param .u64 bdesc)
{{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<8>;
  .shared .align 1024 .b8 smem[4096];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 5;
  mov.u32 %r3, smem;
  add.s32 %r2, %r2, %r3;
  mov.b32 %r4, {fill};
  st.shared.v4.b32 [%r2], {{%r4, %r4, %r4, %r4}};
  st.shared.v4.b32 [%r2+16], {{%r4, %r4, %r4, %r4}};
  bar.sync 0;
  ld.param.u64 %rd1, [adesc];
  ld.param.u64 %rd2, [bdesc];
  {a_extra}
  mov.f32 %f1, 0f3F800000;
  mov.f32 %f2, 0f3F800000;
  mov.f32 %f3, 0f3F800000;
  mov.f32 %f4, 0f3F800000;
  wgmma.fence.sync.aligned;
  {mma}
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ld.param.u64 %rd3, [out];
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd3, %rd3, %rd4;
  st.global.v4.f32 [%rd3], {{%f1, %f2, %f3, %f4}};
  ret;
}}
"""
    )


MMA = (
    "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%f1,%f2,%f3,%f4}}, %rd1, %rd2, "
    "{sd}, 1, {sb}, 0, 0;"
)
DESC_A = _desc(0, 128, 256)  # 64 x 16, K-major, no swizzle: 2 KiB
DESC_B = _desc(2048, 128, 256)


def _launch(ptx: str, adesc: int = DESC_A, bdesc: int = DESC_B, block: int = 128):
    out = np.full(block * 4, np.nan, np.float32)
    stats = emu.load_ptx(ptx).launch(
        "k", grid=1, block=block, args=[out, np.uint64(adesc), np.uint64(bdesc)]
    )
    return out, stats


@pytest.mark.parametrize("sd,sb,expect", [("1", "1", 17.0), ("0", "1", 16.0), ("1", "-1", -15.0)])
def test_wgmma_ones_scale_d_and_negation(sd: str, sb: str, expect: float) -> None:
    out, stats = _launch(_kernel(MMA.format(sd=sd, sb=sb)))
    np.testing.assert_array_equal(out, np.full(512, expect, np.float32))
    assert stats.instructions_by_class["mma"] == 4  # one per warp
    assert stats.instructions_by_class["sync"] >= 3 * 4  # fence, commit, wait (+ bar.sync)


def test_wgmma_scale_d_predicate_register() -> None:
    extra = "setp.ne.u32 %p1, %r1, 1000;"  # true for every thread
    out, _ = _launch(_kernel(MMA.format(sd="!%p1", sb="1"), extra))
    np.testing.assert_array_equal(out, np.full(512, 16.0, np.float32))


def test_wgmma_descriptor_out_of_shared_memory() -> None:
    with pytest.raises(emu.MemoryAccessError, match="wgmma.mma_async"):
        _launch(_kernel(MMA.format(sd="1", sb="1")), bdesc=_desc(4096, 128, 256))


def test_wgmma_descriptor_must_be_warp_uniform() -> None:
    extra = "and.b32 %r5, %r1, 1;\n  mul.wide.u32 %rd5, %r5, 1;\n  add.s64 %rd1, %rd1, %rd5;"
    with pytest.raises(emu.EmulatorError, match="A descriptor differs between the lanes"):
        _launch(_kernel(MMA.format(sd="1", sb="1"), extra))


def test_wgmma_needs_whole_warpgroups() -> None:
    with pytest.raises(emu.EmulatorError, match="whole warpgroups"):
        _launch(_kernel(MMA.format(sd="1", sb="1")), block=64)


@pytest.mark.parametrize(
    "mma,what",
    [
        (
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.tf32.tf32 "
            "{%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1;",
            "or .m64nNk8 with .tf32",
        ),
        (
            "wgmma.mma_async.sync.aligned.m64n8k8.f32.f16.f16 "
            "{%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
            "only .m64nNk16",
        ),
        (
            "wgmma.mma_async.sync.aligned.m64n8k8.f16.tf32.tf32 {%r1,%r2}, %rd1, %rd2, 1, 1, 1;",
            "accumulator .f16 with .tf32 inputs",
        ),
        (  # fp8 takes k32
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.e4m3.e4m3 "
            "{%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1;",
            "only .m64nNk16",
        ),
        (  # an integer A with an fp8 B
            "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.e4m3 {%r1,%r2,%r3,%r4}, %rd1, %rd2, 1;",
            "only .m64nNk16",
        ),
        (
            "wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.and.popc "
            "{%r1,%r2,%r3,%r4}, %rd1, %rd2, 1;",
            "only .m64nNk16",
        ),
        (
            "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 "
            "{%f1,%f2,%f3,%f4}, %rd1, %rd2, %r1, 0, 1, 1, 1, 0, 0;",
            "sparse",
        ),
    ],
)
def test_wgmma_unsupported_variants_are_refused_at_load(mma: str, what: str) -> None:
    with pytest.raises(emu.UnsupportedInstructionError) as info:
        emu.load_ptx(_kernel(mma))
    msg = str(info.value)
    assert "unsupported instruction `wgmma.mma_async" in msg and what in msg, msg


@pytest.mark.parametrize(
    "mma,what",
    [
        (MMA.format(sd="1", sb="2"), "imm-scale-b must be one of 1, -1"),
        (
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
            "{%f1,%f2,%f3}, %rd1, %rd2, 1, 1, 1, 0, 0;",
            "needs 4 accumulator registers",
        ),
        (
            "wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16 "
            "{%f1,%f2,%f3,%f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
            "invalid wgmma shape",
        ),
    ],
)
def test_wgmma_malformed_operands(mma: str, what: str) -> None:
    with pytest.raises(emu.PTXLoadError, match=what):
        emu.load_ptx(_kernel(mma))


def test_setmaxnreg_is_a_hint_the_kernel_runs_past() -> None:
    """setmaxnreg (Triton's and tileopt's warp-specialised kernels) changes no result."""
    out, _ = _launch(_kernel(MMA.format(sd="1", sb="1"),
                             a_extra="setmaxnreg.inc.sync.aligned.u32 232;"))
    assert np.all(out == 17.0)


@pytest.mark.parametrize(
    "ins,what",
    [
        ("setmaxnreg.inc.sync.aligned.u32 20;", "multiple of 8 from 24 to 256"),
        ("setmaxnreg.dec.sync.aligned.u32 100;", "multiple of 8 from 24 to 256"),
        ("setmaxnreg.inc.sync.aligned.u32 %r1;", "multiple of 8 from 24 to 256"),
        ("setmaxnreg.sync.aligned.u32 64;", "expects .inc or .dec"),
        ("setmaxnreg.inc.dec.sync.aligned.u32 64;", "expects .inc or .dec"),
    ],
)
def test_setmaxnreg_malformed(ins: str, what: str) -> None:
    with pytest.raises(emu.PTXLoadError, match=re.escape(what)):
        emu.load_ptx(_kernel(MMA.format(sd="1", sb="1"), a_extra=ins))


def test_decode_descriptor() -> None:
    # Triton's constant part of a 128-byte-swizzle descriptor (SBO 1024, LBO field 256)
    assert decode_descriptor(4611686293322072064) == MatrixDescriptor(0, 4096, 1024, 0, 128)
    assert decode_descriptor(_desc(0x3FFF0, 16, 2048, 3, 5)) == MatrixDescriptor(
        0x3FFF0, 16, 2048, 5, 32
    )


def test_operand_addresses_128b_swizzle_k_major() -> None:
    """Row r of a K-major 128B-swizzle atom holds 16-byte chunk c at chunk c ^ r (the TMA
    pattern); the descriptor start may point into the row (k offsets of 32 bytes)."""
    d = np.uint64(_desc(1024, 16, 1024, 1))
    mn = np.arange(16)[:, None]
    for k0 in (0, 16, 32, 48):
        k = k0 + np.arange(16)[None, :]
        d_k = np.uint64(int(d) + (k0 * 2 >> 4))
        got = operand_addresses(d_k, mn, k - k0, mn_major=False)
        want = 1024 + (mn // 8) * 1024 + (mn % 8) * 128 + (((k // 8) ^ (mn % 8)) * 16) + (k % 8) * 2
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- tf32 (.m64nNk8)

TF32_MMA = (  # {imms}: imm-scale-b (and whatever follows it)
    "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 "
    "{{%f1,%f2,%f3,%f4}}, {a}, %rd2, 1, 1, {imms};"
)
# 64 x 8 and 8 x 8 tf32, K-major, no swizzle: core matrices of 8 rows x 4 k, next 4 k at LBO
TF32_DESC_A = _desc(0, 128, 256)
TF32_DESC_B = _desc(2048, 128, 256)
# 1.0 and 2.0 with all 13 low mantissa bits set: truncated to tf32 they are 1.0 and 2.0, rounded
# to nearest they would be 1 + 2^-10 and 2 + 2^-9
ONE_LOW_BITS, TWO_LOW_BITS = "0x3F801FFF", "0x40001FFF"


@pytest.mark.parametrize(
    "a,extra,expect",
    [
        pytest.param("%rd1", "", 1.0 + 8 * 1.0, id="a_desc"),
        pytest.param(
            "{%r5,%r5,%r5,%r5}", f"mov.b32 %r5, {TWO_LOW_BITS};", 1.0 + 8 * 2.0, id="a_regs"
        ),
    ],
)
@pytest.mark.parametrize("sb,sign", [("1", 1.0), ("-1", -1.0)], ids=["b", "neg_b"])
def test_wgmma_tf32_truncates_the_inputs(
    a: str, extra: str, expect: float, sb: str, sign: float
) -> None:
    ptx = _kernel(TF32_MMA.format(a=a, imms=sb), extra, fill=ONE_LOW_BITS)
    out, stats = _launch(ptx, TF32_DESC_A, TF32_DESC_B)
    np.testing.assert_array_equal(out, np.full(512, 1.0 + sign * (expect - 1.0), np.float32))
    assert stats.instructions_by_class["mma"] == 4


@pytest.mark.parametrize(
    "a,trans,what",
    [
        ("%rd1", "1, 0", "MN-major (transposed, imm-trans-a/imm-trans-b = 1) .tf32 operand"),
        ("%rd1", "0, 1", "MN-major (transposed, imm-trans-a/imm-trans-b = 1) .tf32 operand"),
        ("{%r1,%r1,%r1,%r1}", "1", "MN-major (transposed, imm-trans-b = 1) .tf32 operand"),
        ("%rd1", "0, 0", "takes no imm-trans-a/imm-trans-b operands"),
        ("{%r1,%r1,%r1,%r1}", "0", "takes no imm-trans-b operands"),
    ],
)
def test_wgmma_tf32_transposed_operands_are_refused(a: str, trans: str, what: str) -> None:
    """The PTX ISA allows only K-major .tf32 operands; its syntax (and ptxas) has no imm-trans
    operands for .tf32."""
    with pytest.raises(emu.PTXLoadError) as info:
        emu.load_ptx(_kernel(TF32_MMA.format(a=a, imms=f"1, {trans}")))
    msg = str(info.value)
    assert what in msg and "K-major" in msg, msg


@pytest.mark.parametrize(
    "a,what",
    [
        ("{%r1,%r1,%r1}", "A in registers takes four .b32 (tf32) registers"),
        ("%rd1, %rd1", ".tf32 expects 6 operands"),
    ],
)
def test_wgmma_tf32_malformed_operands(a: str, what: str) -> None:
    with pytest.raises(emu.PTXLoadError, match=re.escape(what)):
        emu.load_ptx(_kernel(TF32_MMA.format(a=a, imms="1")))


def test_operand_addresses_128b_swizzle_k_major_tf32() -> None:
    """32-bit elements: 4 per 16-byte chunk, the same 128-byte swizzle of chunks; one k8 step is
    32 bytes, so the descriptor start advances by 32 bytes per step inside the atom row."""
    d = np.uint64(_desc(1024, 16, 1024, 1))
    mn = np.arange(16)[:, None]
    for k0 in (0, 8, 16, 24):
        k = k0 + np.arange(8)[None, :]
        d_k = np.uint64(int(d) + (k0 * 4 >> 4))
        got = operand_addresses(d_k, mn, k - k0, mn_major=False, esize=4)
        chunk = (k * 4 // 16) ^ (mn % 8)
        want = 1024 + (mn // 8) * 1024 + (mn % 8) * 128 + chunk * 16 + (k % 4) * 4
        np.testing.assert_array_equal(got, want)


def _two_groups(between: str, after: str) -> str:
    """Two wgmma commit groups (the second reads its B 1 KiB after the first's), ``between``
    after the second commit, then ``wgmma.wait_group 1`` (the first group retired), a barrier
    (every warp retired it) and ``after``, then the wait for both."""
    second = MMA.format(sd="1", sb="1").replace("%rd2,", "%rd5,")
    return _kernel(MMA.format(sd="1", sb="1")).replace(
        "wgmma.commit_group.sync.aligned;\n  wgmma.wait_group.sync.aligned 0;",
        "wgmma.commit_group.sync.aligned;\n  add.s64 %rd5, %rd2, 64;\n"
        f"  {second}\n  wgmma.commit_group.sync.aligned;\n  {between}\n"
        f"  wgmma.wait_group.sync.aligned 1;\n  bar.sync 0;\n  {after}\n"
        "  wgmma.wait_group.sync.aligned 0;",
    )


@pytest.mark.parametrize(
    ("between", "after", "race"),
    [
        ("st.shared.b32 [%r3+2048], %r4;", "", True),  # the first group's B, still read
        ("", "st.shared.b32 [%r3+2048], %r4;", False),  # ... retired by wait_group 1
        ("", "st.shared.b32 [%r3+3072], %r4;", True),  # the second group's B
        ("", "st.shared.b32 [%r3], %r4;", True),  # A, which the second group still reads
        ("", "st.shared.b32 [%r3+3584], %r4;", False),  # bytes no wgmma reads
    ],
)
def test_wgmma_operands_are_read_until_their_group_is_waited_for(
    between: str, after: str, race: bool
) -> None:
    """A wgmma reads its shared-memory operands until the wgmma.wait_group that retires its
    commit group: writing them before (by a store, or a copy that refills the slot) is a
    race, as on the GPU, even though the emulator computes the product at issue."""
    ptx = _two_groups(between, after)
    if race:
        with pytest.raises(emu.SharedRaceError, match="a wgmma's operands.*wgmma.mma_async"):
            _launch(ptx)
    else:
        out, _ = _launch(ptx)
        np.testing.assert_array_equal(out, np.full(512, 33.0, np.float32))


@pytest.mark.parametrize("early", [True, False])
def test_wgmma_accumulators_are_written_when_their_group_is_waited_for(early: bool) -> None:
    """A wgmma's accumulator registers are written at the wgmma.wait_group that retires it.
    Read before (after wait_group 1, the second wgmma still running) they hold NaN where a GPU
    guarantees nothing; the second wgmma, accumulating in place, reads what the first will
    write (1 + 16 + 16 = 33), and after wait_group 0 the registers hold it."""
    ptx = _two_groups("", "mov.f32 %f5, %f1;" if early else "")
    if not early:
        ptx = ptx.replace("wgmma.wait_group.sync.aligned 0;\n  ld.param.u64 %rd3",
                          "wgmma.wait_group.sync.aligned 0;\n  mov.f32 %f5, %f1;\n"
                          "  ld.param.u64 %rd3")
    ptx = ptx.replace("{%f1, %f2, %f3, %f4}", "{%f5, %f2, %f3, %f4}")
    out, _ = _launch(ptx)
    want = np.full(512, 33.0, np.float32)
    if early:
        want[0::4] = np.nan
    np.testing.assert_array_equal(out, want)
