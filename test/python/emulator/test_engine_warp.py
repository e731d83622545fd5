"""Emulator engine: warp-level instructions (shfl, vote, match, redux, ldmatrix, stmatrix, mma)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tileopt.emulator as emu
from tileopt.errors import TileoptError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def lanes_kernel(body: str, n: int = 64, extra: str = "", target: str = "sm_80") -> np.ndarray:
    """Run `body` with %r1 = tid.x, %r2 = a per-thread value (tid*7+3); returns %r9 per thread."""
    ptx = (
        HEAD.replace("sm_80", target)
        + f""".visible .entry w(.param .u64 out)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<4>;
  {extra}
  mov.u32 %r1, %tid.x;
  mad.lo.u32 %r2, %r1, 7, 3;
  mov.u32 %r9, 0;
  {body}
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}}
"""
    )
    out = np.zeros(n, np.uint32)
    emu.load_ptx(ptx).launch("w", grid=1, block=n, args=[out])
    return out


VAL = np.arange(64) * 7 + 3


def _shfl_ref(mode: str, b: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(64) % 32
    seg = lane // width * width
    if mode == "up":
        src = lane - b
        ok = src >= seg
    elif mode == "down":
        src = lane + b
        ok = src < seg + width
    elif mode == "bfly":
        src = lane ^ b
        ok = src < seg + width
    else:
        src = seg + (b % width)
        ok = np.ones(64, bool)
    src = np.where(ok, src, lane)
    return VAL[(np.arange(64) // 32) * 32 + src], ok


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
@pytest.mark.parametrize("width", [32, 8])
def test_shfl_modes_with_segments(mode: str, width: int) -> None:
    b = 3
    c = ((32 - width) << 8) | (0 if mode == "up" else 0x1F)
    body = f"""shfl.sync.{mode}.b32 %r3|%p1, %r2, {b}, {c}, -1;
  selp.u32 %r4, 0x10000, 0, %p1;
  add.u32 %r9, %r3, %r4;"""
    got = lanes_kernel(body)
    val, ok = _shfl_ref(mode, b, width)
    np.testing.assert_array_equal(got & 0xFFFF, val)
    np.testing.assert_array_equal(got >> 16, ok.astype(np.uint32))


def test_vote_ballot_any_all_uni_and_activemask_in_branch() -> None:
    body = """and.b32 %r3, %r1, 3;
  setp.eq.u32 %p1, %r3, 0;
  vote.sync.ballot.b32 %r4, %p1, -1;
  setp.lt.u32 %p2, %r1, 48;
  @!%p2 bra SKIP;
  activemask.b32 %r5;
  vote.sync.all.pred %p3, %p2, -1;
  vote.sync.any.pred %p4, %p1, -1;
  vote.sync.uni.pred %p5, %p1, -1;
  selp.u32 %r6, 1, 0, %p3;
  selp.u32 %r7, 2, 0, %p4;
  selp.u32 %r8, 4, 0, %p5;
  add.u32 %r9, %r6, %r7;
  add.u32 %r9, %r9, %r8;
  xor.b32 %r9, %r9, %r5;
SKIP:
  xor.b32 %r9, %r9, %r4;"""
    got = lanes_kernel(body)
    ballot = 0x11111111
    for t in range(64):
        if t < 48:
            active = 0xFFFFFFFF if t < 32 else 0xFFFF
            exp = (1 | 2) ^ active ^ ballot
        else:
            exp = ballot
        assert got[t] == exp, t


def test_match_any_and_redux() -> None:
    body = """shr.u32 %r3, %r1, 3;
  and.b32 %r3, %r3, 1;
  match.any.sync.b32 %r9, %r3, -1;"""
    got = lanes_kernel(body)
    lane = np.arange(64) % 32
    exp = np.where((lane >> 3) & 1, 0xFF00FF00, 0x00FF00FF)
    np.testing.assert_array_equal(got, exp)
    got = lanes_kernel("redux.sync.add.u32 %r9, %r2, -1;")
    np.testing.assert_array_equal(got, np.repeat(VAL.reshape(2, 32).sum(1), 32))
    got = lanes_kernel("redux.sync.max.s32 %r9, %r2, -1;")
    np.testing.assert_array_equal(got, np.repeat(VAL.reshape(2, 32).max(1), 32))


# Each lane names its own 8-lane group as the membermask (%r4), in a converged warp: what
# cooperative groups' tiled_partition<8> and labeled partitions emit.
_GROUP_MASK = """and.b32 %r3, %r1, 24;
  mov.u32 %r4, 255;
  shl.b32 %r4, %r4, %r3;"""


def _group_ref(values: np.ndarray, reduce) -> np.ndarray:
    """``reduce`` of each 8-lane group's ``values``, for every lane."""
    return np.repeat([reduce(g) for g in values.reshape(-1, 8)], 8)


@pytest.mark.parametrize(("body", "expected"), [
    # ballot of lanes 1 mod 3: each group's bits only
    ("rem.u32 %r5, %r1, 3;\n  setp.eq.u32 %p1, %r5, 1;\n"
     "  vote.sync.ballot.b32 %r9, %p1, %r4;",
     _group_ref(np.arange(64), lambda g: sum(1 << (t % 32) for t in g if t % 3 == 1))),
    # all / any / uni of "lane < 12": group 1 is mixed, group 0 all, the others none
    ("setp.lt.u32 %p1, %r1, 12;\n  vote.sync.all.pred %p2, %p1, %r4;\n"
     "  vote.sync.any.pred %p3, %p1, %r4;\n  vote.sync.uni.pred %p4, %p1, %r4;\n"
     "  selp.u32 %r6, 1, 0, %p2;\n  selp.u32 %r7, 2, 0, %p3;\n  selp.u32 %r8, 4, 0, %p4;\n"
     "  add.u32 %r9, %r6, %r7;\n  add.u32 %r9, %r9, %r8;",
     _group_ref(np.arange(64), lambda g: (1 | 2 | 4) if g[0] == 0
                else 2 if g[0] == 8 else 4)),
    ("redux.sync.add.u32 %r9, %r2, %r4;", _group_ref(VAL, sum)),
    ("redux.sync.min.u32 %r9, %r2, %r4;", _group_ref(VAL, min)),
    # match.any of lane % 4: 8 lanes of the warp, of which each group has 2
    ("and.b32 %r5, %r1, 3;\n  match.any.sync.b32 %r9, %r5, %r4;",
     np.array([(1 << (t % 32)) | (1 << (t % 32 ^ 4)) for t in range(64)])),
    # match.all of lane / 8 (equal within each group): the whole group
    ("shr.u32 %r5, %r1, 3;\n  match.all.sync.b32 %r9|%p1, %r5, %r4;",
     np.array([0xFF << (t % 32 // 8 * 8) for t in range(64)])),
], ids=["ballot", "all-any-uni", "redux-add", "redux-min", "match-any", "match-all"])
def test_collectives_combine_the_lanes_of_each_membermask(body: str,
                                                          expected: np.ndarray) -> None:
    np.testing.assert_array_equal(lanes_kernel(_GROUP_MASK + "\n  " + body), expected)


def test_elect_sync_elects_the_lowest_lane_of_each_membermask() -> None:
    # A tiled partition of 16: lanes 0-15 name 0x0000FFFF, lanes 16-31 0xFFFF0000, so each
    # half elects its own leader (PTX ISA elect.sync: the lowest lane of the membermask).
    got = lanes_kernel("""and.b32 %r3, %r1, 16;
  mov.u32 %r4, 0xFFFF;
  shl.b32 %r4, %r4, %r3;
  elect.sync %r5|%p1, %r4;
  selp.u32 %r6, 0x100, 0, %p1;
  or.b32 %r9, %r5, %r6;""", target="sm_90")
    lane = np.arange(64) % 32
    leader = lane // 16 * 16
    np.testing.assert_array_equal(got, leader | np.where(lane == leader, 0x100, 0))


@pytest.mark.parametrize(("body", "message"), [
    ("match.any.sync.b32 %r9;", "expected 3 operands"),
    ("match.any.sync.b32 %r9, %r2;", "expected 3 operands"),  # the membermask is mandatory
    ("match.sync.b32 %r9, %r2, -1;", "exactly one of .any and .all"),
    ("redux.sync.add.u32 %r9;", "expected 3 operands"),
    ("redux.sync.add.u32 %r9, %r2;", "expected 3 operands"),
    ("activemask.b32;", "expected 1 operands"),
    ("elect.sync;", "expected 2 operands"),
    ("elect.sync %r9|%p1;", "expected 2 operands"),
])
def test_malformed_warp_collectives_are_load_errors(body: str, message: str) -> None:
    # Were raw IndexErrors (missing operands), or ran with a guessed mode or membermask.
    with pytest.raises(emu.PTXLoadError, match=re.escape(message)):
        lanes_kernel(body, n=32, target="sm_90")  # elect is sm_90's


LDM = (
    HEAD
    + """.visible .entry ldm(.param .u64 out, .param .u64 inp)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 m[2048];
  mov.u32 %r1, %tid.x;
  // copy 32 x 16 bytes (4 matrices of 8x8 b16) to shared, row r at r*16 (+ 8*16 padding per matrix)
  ld.param.u64 %rd1, [inp];
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd3];
  mov.u32 %r6, m;
  shl.b32 %r7, %r1, 5;
  add.u32 %r8, %r6, %r7;   // row addresses 32 bytes apart
  st.shared.v4.u32 [%r8], {%r2, %r3, %r4, %r5};
  bar.warp.sync -1;
  ldmatrix.sync.aligned.m8n8.x4TRANS.shared.b16 {%r10, %r11, %r12, %r13}, [%r8];
  ld.param.u64 %rd4, [out];
  add.s64 %rd5, %rd4, %rd2;
  st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
  ret;
}
"""
)


@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_x4_layout(trans: bool) -> None:
    mod = emu.load_ptx(LDM.replace("TRANS", ".trans" if trans else ""))
    mats = np.arange(4 * 64, dtype=np.uint16).reshape(4, 8, 8)
    out = np.zeros((32, 4), np.uint32)
    st = mod.launch("ldm", grid=1, block=32, args=[out, mats.reshape(32, 8).copy()])
    for t in range(32):
        g, q = t // 4, t % 4
        for i in range(4):
            m = mats[i].T if trans else mats[i]
            assert out[t, i] == int(m[g, 2 * q]) | (int(m[g, 2 * q + 1]) << 16), (t, i)
    assert st.shared_bank_conflicts > 0  # rows 32 bytes apart: two rows per bank group


@pytest.mark.parametrize("operands", ["{%r10, %r11, %r12, %r13}",
                                      "{%r10, %r11, %r12, %r13}, [%r8], %r9"])
def test_ldmatrix_with_a_wrong_operand_count_is_an_error(operands: str) -> None:
    # A mutant with three operands unpacked into two (ValueError, found by ptxmutate seed 44).
    text = LDM.replace("TRANS", "").replace("{%r10, %r11, %r12, %r13}, [%r8];", operands + ";")
    with pytest.raises(TileoptError, match="expected 2 operands"):
        emu.load_ptx(text).launch("ldm", grid=1, block=32,
                                  args=[np.zeros((32, 4), np.uint32), np.zeros((32, 8), np.uint16)])


STM = (
    HEAD.replace("sm_80", "sm_90")  # stmatrix is sm_90's
    + """.visible .entry stm(.param .u64 out, .param .u64 inp)
{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 m[512];
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [inp];
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.v2.u32 {%r2, %r3}, [%rd3];
  mov.u32 %r6, m;
  shl.b32 %r7, %r1, 4;
  add.u32 %r8, %r6, %r7;
  stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r8], {%r2, %r3};
  bar.warp.sync -1;
  ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r8];
  ld.param.u64 %rd4, [out];
  mul.wide.u32 %rd5, %r1, 16;
  add.s64 %rd5, %rd4, %rd5;
  st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
  ret;
}
"""
)


def test_stmatrix_x2_layout() -> None:
    mod = emu.load_ptx(STM)
    frags = np.arange(32 * 4, dtype=np.uint16).reshape(
        32, 4
    )  # thread t: reg0 = (f0, f1), reg1 = (f2, f3)
    out = np.zeros((32, 8), np.uint16)
    mod.launch("stm", grid=1, block=32, args=[out, frags.copy()])
    for t in range(32):
        g, q = t // 4, t % 4
        for i in range(2):
            row = out[8 * i + g]
            assert row[2 * q] == frags[t, 2 * i] and row[2 * q + 1] == frags[t, 2 * i + 1]


MMA = (
    HEAD
    + """.visible .entry mma(.param .u64 d, .param .u64 a, .param .u64 b, .param .u64 c)
{
  .reg .b32 %r<16>;
  .reg .f32 %f<12>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [a];
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd3];
  ld.param.u64 %rd4, [b];
  mul.wide.u32 %rd5, %r1, 8;
  add.s64 %rd6, %rd4, %rd5;
  ld.global.v2.u32 {%r6, %r7}, [%rd6];
  ld.param.u64 %rd7, [c];
  add.s64 %rd8, %rd7, %rd2;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd8];
  mma.sync.aligned.m16n8k16.row.col.f32.TY.TY.f32 {%f5, %f6, %f7, %f8},
    {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};
  ld.param.u64 %rd9, [d];
  add.s64 %rd10, %rd9, %rd2;
  st.global.v4.f32 [%rd10], {%f5, %f6, %f7, %f8};
  ret;
}
"""
)


@pytest.mark.parametrize("ty", ["f16", "bf16"])
def test_mma_m16n8k16_fragment_layout(ty: str) -> None:
    """Fragments built from the PTX ISA tables (groupID = lane/4, tig = lane%4), result vs numpy."""
    rng = np.random.default_rng(3)
    A = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    B = rng.integers(-4, 5, (16, 8)).astype(np.float32)
    C = rng.integers(-4, 5, (16, 8)).astype(np.float32)
    if ty == "f16":
        enc = lambda x: np.asarray(x, np.float16).view(np.uint16)  # noqa: E731
    else:
        enc = lambda x: (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
    a = np.zeros((32, 8), np.uint16)
    b = np.zeros((32, 4), np.uint16)
    c = np.zeros((32, 4), np.float32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            row = g + 8 * ((i // 2) % 2)
            col = t * 2 + (i % 2) + 8 * (i // 4)
            a[lane, i] = enc(A[row, col])
        for i in range(4):
            b[lane, i] = enc(B[t * 2 + (i % 2) + 8 * (i // 2), g])
        for i in range(4):
            c[lane, i] = C[g + 8 * (i // 2), t * 2 + (i % 2)]
    d = np.zeros((32, 4), np.float32)
    mod = emu.load_ptx(MMA.replace("TY", ty))
    st = mod.launch("mma", grid=1, block=32, args=[d, a, b, c])
    D = A @ B + C
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            assert d[lane, i] == D[g + 8 * (i // 2), t * 2 + (i % 2)]
    assert st.instructions_by_class["mma"] == 1


def test_mma_m16n8k16_f16_accumulator() -> None:
    ptx = MMA.replace("TY", "f16").replace(".f32.f16.f16.f32", ".f16.f16.f16.f16")
    ptx = ptx.replace(
        "ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd8];", "ld.global.v2.u32 {%r8, %r9}, [%rd8];"
    )
    ptx = ptx.replace(
        "{%f5, %f6, %f7, %f8},\n    {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};",
        "{%r10, %r11},\n    {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r8, %r9};",
    )
    ptx = ptx.replace(
        "st.global.v4.f32 [%rd10], {%f5, %f6, %f7, %f8};", "st.global.v2.u32 [%rd10], {%r10, %r11};"
    )
    ptx = ptx.replace("add.s64 %rd8, %rd7, %rd2;", "add.s64 %rd8, %rd7, %rd5;")
    ptx = ptx.replace("add.s64 %rd10, %rd9, %rd2;", "add.s64 %rd10, %rd9, %rd5;")
    rng = np.random.default_rng(4)
    A = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    B = rng.integers(-3, 4, (16, 8)).astype(np.float16)
    C = rng.integers(-3, 4, (16, 8)).astype(np.float16)
    a = np.zeros((32, 8), np.float16)
    b = np.zeros((32, 4), np.float16)
    c = np.zeros((32, 4), np.float16)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            a[lane, i] = A[g + 8 * ((i // 2) % 2), t * 2 + (i % 2) + 8 * (i // 4)]
        for i in range(4):
            b[lane, i] = B[t * 2 + (i % 2) + 8 * (i // 2), g]
            c[lane, i] = C[g + 8 * (i // 2), t * 2 + (i % 2)]
    d = np.zeros((32, 4), np.float16)
    emu.load_ptx(ptx).launch("mma", grid=1, block=32, args=[d, a, b, c])
    D = A.astype(np.float32) @ B.astype(np.float32) + C
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            assert d[lane, i] == D[g + 8 * (i // 2), t * 2 + (i % 2)]


def _mma_s8_ptx(satfinite: bool) -> str:
    """MMA with .s8 inputs (16 and 8 bytes a lane, as the f16 fragments' words) and s32 C/D."""
    sat = ".satfinite" if satfinite else ""
    ptx = MMA.replace(
        "ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd8];",
        "ld.global.v4.s32 {%r8, %r9, %r10, %r11}, [%rd8];",
    )
    ptx = ptx.replace(
        "mma.sync.aligned.m16n8k16.row.col.f32.TY.TY.f32 {%f5, %f6, %f7, %f8},\n"
        "    {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};",
        f"mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.s8.s32 {{%r12, %r13, %r14, %r15}},\n"
        "    {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r8, %r9, %r10, %r11};",
    )
    return ptx.replace(
        "st.global.v4.f32 [%rd10], {%f5, %f6, %f7, %f8};",
        "st.global.v4.s32 [%rd10], {%r12, %r13, %r14, %r15};",
    )


def _mma_s8(A: np.ndarray, B: np.ndarray, C: np.ndarray, satfinite: bool) -> np.ndarray:
    """D of mma.sync m16n8k32 .s8 for A (16x32), B (32x8), C (16x8), fragments laid out by the
    PTX ISA's tables: a_i in row g (i % 8 < 4) or g + 8, column 4t + i % 4 (+16 for i >= 8);
    b_i in row 4t + i % 4 (+16 for i >= 4), column g; c_i at (g + 8 (i // 2), 2t + i % 2)."""
    a = np.zeros((32, 16), np.int8)
    b = np.zeros((32, 8), np.int8)
    c = np.zeros((32, 4), np.int32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(16):
            a[lane, i] = A[g + 8 * ((i // 4) % 2), 4 * t + i % 4 + 16 * (i // 8)]
        for i in range(8):
            b[lane, i] = B[4 * t + i % 4 + 16 * (i // 4), g]
        for i in range(4):
            c[lane, i] = C[g + 8 * (i // 2), 2 * t + i % 2]
    d = np.zeros((32, 4), np.int32)
    st = emu.load_ptx(_mma_s8_ptx(satfinite)).launch("mma", grid=1, block=32, args=[d, a, b, c])
    assert st.instructions_by_class["mma"] == 1
    D = np.zeros((16, 8), np.int32)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(4):
            D[g + 8 * (i // 2), 2 * t + i % 2] = d[lane, i]
    return D


def test_mma_m16n8k32_s8_fragment_layout() -> None:
    rng = np.random.default_rng(5)
    A = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    B = rng.integers(-128, 128, (32, 8)).astype(np.int8)
    C = rng.integers(-(2**20), 2**20, (16, 8)).astype(np.int32)
    want = A.astype(np.int64) @ B.astype(np.int64) + C
    assert np.array_equal(_mma_s8(A, B, C, satfinite=False), want)


@pytest.mark.parametrize("satfinite", [False, True])
def test_mma_s8_overflow_wraps_or_saturates(satfinite: bool) -> None:
    """Sums past the s32 range wrap modulo 2^32, or clamp to it with .satfinite."""
    A = np.full((16, 32), -128, np.int8)
    B = np.full((32, 8), -128, np.int8)  # every product +16384, the row sum +524288
    C = np.full((16, 8), 2**31 - 100, np.int32)
    C[8:] = -(2**31) + 100
    B[:, 4:] = 127  # columns 4..7: products -16256, sums -520192
    got = _mma_s8(A, B, C, satfinite)
    exact = A.astype(np.int64) @ B.astype(np.int64) + C
    if satfinite:
        want = np.clip(exact, -(2**31), 2**31 - 1)
    else:
        want = (exact.astype(np.uint64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    assert np.array_equal(got, want)
    assert (exact > 2**31 - 1).any() and (exact < -(2**31)).any()


def test_movmatrix_transposes() -> None:
    body = """mad.lo.u32 %r3, %r1, 2, 0;
  and.b32 %r3, %r3, 63;
  add.u32 %r4, %r3, 1;
  shl.b32 %r4, %r4, 16;
  or.b32 %r5, %r3, %r4;
  movmatrix.sync.aligned.m8n8.trans.b16 %r9, %r5;"""
    got = lanes_kernel(body, n=32)
    m = np.arange(64).reshape(8, 8)  # thread t holds row t/4, cols 2(t%4), 2(t%4)+1
    for t in range(32):
        g, q = t // 4, t % 4
        assert got[t] == m.T[g, 2 * q] | (m.T[g, 2 * q + 1] << 16)
