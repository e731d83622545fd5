"""Emulator engine: arithmetic, logic, comparison and conversion instructions (hand-written PTX)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tileopt.emulator as emu

REGS = """
  .reg .pred %p<8>;
  .reg .b16 %h<8>;
  .reg .b32 %r<32>;
  .reg .f32 %f<16>;
  .reg .b64 %rd<16>;
  .reg .f64 %fd<8>;
"""

_SIZES = {
    "b16": 2,
    "u16": 2,
    "s16": 2,
    "f16": 2,
    "b32": 4,
    "u32": 4,
    "s32": 4,
    "f32": 4,
    "b64": 8,
    "u64": 8,
    "s64": 8,
    "f64": 8,
}
_REG = {2: "%h", 4: "%r", 8: "%rd"}


def elementwise(
    body: str,
    ins: list[tuple[str, np.ndarray]],
    out_type: str,
    n: int | None = None,
    extra_regs: str = "",
) -> np.ndarray:
    """Run `body` per thread: inputs are loaded into %i0, %i1.. (typed), result taken from %o."""
    n = n if n is not None else len(ins[0][1])
    params = ", ".join([".param .u64 out"] + [f".param .u64 in{k}" for k in range(len(ins))])
    lines = [
        "mov.u32 %r30, %tid.x;",
        "mov.u32 %r31, %ctaid.x;",
        "mad.lo.u32 %r29, %r31, 128, %r30;",
        f"setp.ge.u32 %p7, %r29, {n};",
        "@%p7 bra DONE;",
    ]
    decl = [REGS, extra_regs]
    for k, (t, _) in enumerate(ins):
        sz = _SIZES[t]
        decl.append(f"  .reg .{t} %i{k};")
        lines += [
            f"ld.param.u64 %rd10, [in{k}];",
            f"mul.wide.u32 %rd11, %r29, {sz};",
            "add.s64 %rd12, %rd10, %rd11;",
            f"ld.global.{t} %i{k}, [%rd12];",
        ]
    decl.append(f"  .reg .{out_type} %o;")
    lines.append(body)
    sz = _SIZES[out_type]
    lines += [
        "ld.param.u64 %rd10, [out];",
        f"mul.wide.u32 %rd11, %r29, {sz};",
        "add.s64 %rd12, %rd10, %rd11;",
        f"st.global.{out_type} [%rd12], %o;",
        "DONE:",
        "ret;",
    ]
    ptx = (  # sm_90: every ALU form (bf16 add, xorsign) is allowed
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        f".visible .entry k({params})\n{{\n" + "\n".join(decl) + "\n" + "\n  ".join(lines) + "\n}\n"
    )
    mod = emu.load_ptx(ptx)
    out = np.zeros(
        n,
        {"f32": np.float32, "f64": np.float64, "f16": np.float16}.get(
            out_type, {2: np.uint16, 4: np.uint32, 8: np.uint64}[sz]
        ),
    )
    mod.launch(
        "k",
        grid=(n + 127) // 128,
        block=128,
        args=[out] + [np.ascontiguousarray(a) for _, a in ins],
    )
    return out


RNG = np.random.default_rng(1)
I32 = np.concatenate(
    [
        np.array([0, 1, -1, 2**31 - 1, -(2**31), 7, -7, 100], np.int32),
        RNG.integers(-(2**31), 2**31, 120, dtype=np.int64).astype(np.int32),
    ]
)
J32 = np.concatenate(
    [
        np.array([1, -1, 3, -1, -1, 2, 2, -3], np.int32),
        RNG.integers(-1000, 1000, 120, dtype=np.int64).astype(np.int32),
    ]
)
J32[J32 == 0] = 5


def test_signed_div_rem_truncate_toward_zero() -> None:
    q = elementwise("div.s32 %o, %i0, %i1;", [("s32", I32), ("s32", J32)], "s32").view(np.int32)
    r = elementwise("rem.s32 %o, %i0, %i1;", [("s32", I32), ("s32", J32)], "s32").view(np.int32)
    for a, b, qq, rr in zip(I32.tolist(), J32.tolist(), q.tolist(), r.tolist(), strict=True):
        if a == -(2**31) and b == -1:
            assert qq == a and rr == 0
            continue
        eq = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        assert (qq, rr) == (eq, a - eq * b), (a, b)


def test_mul_hi_wide_and_mad() -> None:
    a, b = I32, J32 * 12345
    hi = elementwise("mul.hi.s32 %o, %i0, %i1;", [("s32", a), ("s32", b)], "s32").view(np.int32)
    assert np.array_equal(hi, ((a.astype(np.int64) * b) >> 32).astype(np.int32))
    wide = elementwise("mul.wide.s32 %o, %i0, %i1;", [("s32", a), ("s32", b)], "s64").view(np.int64)
    assert np.array_equal(wide, a.astype(np.int64) * b)
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    uhi = elementwise("mul.hi.u32 %o, %i0, %i1;", [("u32", ua), ("u32", ub)], "u32")
    assert np.array_equal(uhi, ((ua.astype(np.uint64) * ub) >> 32).astype(np.uint32))
    x64 = RNG.integers(0, 2**63, 128, dtype=np.int64).astype(np.uint64) * 3
    y64 = RNG.integers(0, 2**63, 128, dtype=np.int64).astype(np.uint64)
    h64 = elementwise("mul.hi.u64 %o, %i0, %i1;", [("u64", x64), ("u64", y64)], "u64")
    assert [int(v) for v in h64] == [(int(p) * int(q)) >> 64 for p, q in zip(x64, y64, strict=True)]
    s64a, s64b = x64.view(np.int64), (y64 - np.uint64(2**62)).view(np.int64)
    hs = elementwise("mul.hi.s64 %o, %i0, %i1;", [("s64", s64a), ("s64", s64b)], "s64").view(
        np.int64
    )
    assert [int(v) for v in hs] == [
        (int(p) * int(q)) >> 64 for p, q in zip(s64a, s64b, strict=True)
    ]
    m = elementwise("mad.lo.s32 %o, %i0, %i1, 5;", [("s32", a), ("s32", b)], "s32").view(np.int32)
    assert np.array_equal(
        m, (a.astype(np.int64) * b + 5).astype(np.uint64).astype(np.uint32).view(np.int32)
    )


def test_add_carry_chain_64bit() -> None:
    x = RNG.integers(0, 2**63, 128, dtype=np.int64).astype(np.uint64) * 2 + 1
    y = RNG.integers(0, 2**63, 128, dtype=np.int64).astype(np.uint64) * 2
    body = """mov.b64 {%r1, %r2}, %i0;
    mov.b64 {%r3, %r4}, %i1;
    add.cc.u32 %r5, %r1, %r3;
    addc.u32 %r6, %r2, %r4;
    mov.b64 %o, {%r5, %r6};"""
    out = elementwise(body, [("u64", x), ("u64", y)], "u64")
    assert np.array_equal(out, x + y)
    body = body.replace("add.cc", "sub.cc").replace("addc", "subc")
    assert np.array_equal(elementwise(body, [("u64", x), ("u64", y)], "u64"), x - y)


def test_carry_flag_is_the_carry_of_a_plus_not_b_after_a_subtraction() -> None:
    # As on the hardware (and as nvcc's 128-bit division reads it): sub.cc leaves CF = 1 where
    # nothing was borrowed, and subc subtracts 1 - CF; after add.cc, CF is the carry.
    x = np.array([5, 3, 7, 0, 2**32 - 1, 0] * 4, np.uint32)
    y = np.array([3, 5, 7, 1, 2**32 - 1, 0] * 4, np.uint32)
    flag = elementwise("sub.cc.u32 %r1, %i0, %i1;\n    addc.u32 %o, 0, 0;",
                       [("u32", x), ("u32", y)], "u32")
    np.testing.assert_array_equal(flag, (x >= y).astype(np.uint32))
    after_add = elementwise("add.cc.u32 %r1, %i0, %i1;\n    subc.u32 %o, 5, 0;",
                            [("u32", x), ("u32", y)], "u32")
    carry = (x.astype(np.uint64) + y) >> np.uint64(32)
    np.testing.assert_array_equal(after_add, (4 + carry).astype(np.uint32))


def test_shifts_clamp() -> None:
    x = np.array([0x80000001, 0xFFFFFFFF, 12345, 7] * 8, np.uint32)
    s = np.array([0, 1, 31, 32, 33, 100, 4, 16] * 4, np.uint32)
    shl = elementwise("shl.b32 %o, %i0, %i1;", [("b32", x), ("u32", s)], "b32")
    shr = elementwise("shr.u32 %o, %i0, %i1;", [("u32", x), ("u32", s)], "u32")
    sar = elementwise("shr.s32 %o, %i0, %i1;", [("s32", x.view(np.int32)), ("u32", s)], "s32").view(
        np.int32
    )
    for i in range(32):
        a, n = int(x[i]), int(s[i])
        assert shl[i] == ((a << n) & 0xFFFFFFFF if n < 32 else 0)
        assert shr[i] == (a >> n if n < 32 else 0)
        sa = a - (1 << 32) if a >= 2**31 else a
        assert sar[i] == sa >> min(n, 31)


def test_bit_ops() -> None:
    x = np.concatenate(
        [
            np.array([0, 1, 0x80000000, 0xFFFFFFFF, 0x00F0F000], np.uint32),
            RNG.integers(0, 2**32, 59, dtype=np.int64).astype(np.uint32),
        ]
    )
    n = len(x)
    assert np.array_equal(
        elementwise("popc.b32 %o, %i0;", [("b32", x)], "u32"), [bin(int(v)).count("1") for v in x]
    )
    assert np.array_equal(
        elementwise("clz.b32 %o, %i0;", [("b32", x)], "u32"), [32 - int(v).bit_length() for v in x]
    )
    assert np.array_equal(
        elementwise("brev.b32 %o, %i0;", [("b32", x)], "b32"),
        [int(f"{int(v):032b}"[::-1], 2) for v in x],
    )
    assert [int(v) for v in elementwise("bfind.u32 %o, %i0;", [("u32", x)], "u32")] == [
        int(v).bit_length() - 1 if v else 0xFFFFFFFF for v in x
    ]
    sx = x.view(np.int32)
    got = elementwise("bfind.s32 %o, %i0;", [("s32", sx)], "u32")
    exp = [(int(v) if v >= 0 else ~int(v)).bit_length() - 1 for v in sx]
    assert [int(g) for g in got] == [e if e >= 0 else 0xFFFFFFFF for e in exp]
    # bfe: unsigned and signed
    got = elementwise("bfe.u32 %o, %i0, 4, 8;", [("u32", x)], "u32")
    assert np.array_equal(got, (x >> 4) & 0xFF)
    got = elementwise("bfe.s32 %o, %i0, 4, 8;", [("s32", sx)], "s32").view(np.int32)
    assert np.array_equal(got, ((((x >> 4) & 0xFF).astype(np.int32) << 24) >> 24))
    got = elementwise("bfi.b32 %o, %i0, %i1, 8, 12;", [("b32", x), ("b32", x[::-1].copy())], "b32")
    mask = np.uint32(0xFFF << 8)
    assert np.array_equal(got, (x[::-1] & ~mask) | ((x << 8) & mask))
    # lop3 0x96 = a ^ b ^ c ; 0xE8 = majority
    y, z = x[::-1].copy(), np.roll(x, 3)
    got = elementwise(
        "lop3.b32 %o, %i0, %i1, %i2, 0x96;", [("b32", x), ("b32", y), ("b32", z)], "b32"
    )
    assert np.array_equal(got, x ^ y ^ z)
    got = elementwise(
        "lop3.b32 %o, %i0, %i1, %i2, 0xE8;", [("b32", x), ("b32", y), ("b32", z)], "b32"
    )
    assert np.array_equal(got, (x & y) | (x & z) | (y & z))
    del n


def _prmt_ref(a: int, b: int, c: int) -> int:
    src = a | (b << 32)
    out = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        v = (src >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            v = 0xFF if v & 0x80 else 0
        out |= v << (8 * i)
    return out


def test_prmt_default_and_modes() -> None:
    a = RNG.integers(0, 2**32, 64, dtype=np.int64).astype(np.uint32)
    b = RNG.integers(0, 2**32, 64, dtype=np.int64).astype(np.uint32)
    c = RNG.integers(0, 2**16, 64, dtype=np.int64).astype(np.uint32)
    got = elementwise("prmt.b32 %o, %i0, %i1, %i2;", [("b32", a), ("b32", b), ("b32", c)], "b32")
    assert [int(g) for g in got] == [
        _prmt_ref(int(x), int(y), int(z)) for x, y, z in zip(a, b, c, strict=True)
    ]
    # f4e with selector 1: bytes 1,2,3,4
    got = elementwise("prmt.b32.f4e %o, %i0, %i1, 1;", [("b32", a), ("b32", b)], "b32")
    assert [int(g) for g in got] == [
        ((int(x) | int(y) << 32) >> 8) & 0xFFFFFFFF for x, y in zip(a, b, strict=True)
    ]


def test_float_min_max_nan() -> None:
    nan = np.float32(np.nan)
    a = np.array([1, nan, nan, -0.0, 0.0, 3, -np.inf, 2] * 4, np.float32)
    b = np.array([nan, 2, nan, 0.0, -0.0, -3, 1, 2] * 4, np.float32)
    mn = elementwise("min.f32 %o, %i0, %i1;", [("f32", a), ("f32", b)], "f32")
    mx = elementwise("max.f32 %o, %i0, %i1;", [("f32", a), ("f32", b)], "f32")
    np.testing.assert_array_equal(mn, np.fmin(a, b))
    np.testing.assert_array_equal(mx, np.fmax(a, b))
    assert (
        np.signbit(mn[3]) and np.signbit(mn[4]) and not np.signbit(mx[3]) and not np.signbit(mx[4])
    )
    mnn = elementwise("min.NaN.f32 %o, %i0, %i1;", [("f32", a), ("f32", b)], "f32")
    assert np.isnan(mnn[0]) and np.isnan(mnn[1]) and mnn[5] == -3


def test_float_min_max_xorsign_abs() -> None:
    """.xorsign.abs (Triton's symmetric tl.clamp on sm_90): the min/max of the magnitudes with
    the XOR of the signs, NaN left as it is; f32, f16x2 and bf16."""
    nan = np.float32(np.nan)
    a = np.array([5, 5, -5, -5, 1, -0.0, nan, 2, nan, -np.inf] * 4, np.float32)
    b = np.array([3, -3, 3, -3, -7, 2, -4, nan, nan, 2.5] * 4, np.float32)

    def want(f, nan_wins: bool) -> np.ndarray:
        r = f(np.abs(a), np.abs(b))
        if nan_wins:
            r = np.where(np.isnan(a) | np.isnan(b), np.nan, r)
        return np.where(np.isnan(r), r, np.copysign(r, np.where(np.signbit(a) ^ np.signbit(b),
                                                                 -1.0, 1.0))).astype(np.float32)

    for op, f in (("min", np.fmin), ("max", np.fmax)):
        for nan_mod in ("", ".NaN"):
            got = elementwise(f"{op}{nan_mod}.xorsign.abs.f32 %o, %i0, %i1;",
                              [("f32", a), ("f32", b)], "f32")
            np.testing.assert_array_equal(got, want(f, bool(nan_mod)))
    ha, hb = a.astype(np.float16), b.astype(np.float16)
    got = elementwise("min.xorsign.abs.f16x2 %o, %i0, %i1;",
                      [("b32", ha.view(np.uint32)), ("b32", hb.view(np.uint32))], "b32")
    np.testing.assert_array_equal(got.view(np.float16), want(np.fmin, False).astype(np.float16))
    torch = pytest.importorskip("torch")
    ta, tb = (torch.from_numpy(v).to(torch.bfloat16) for v in (a, b))
    bits = [t.view(torch.int16).numpy().view(np.uint16) for t in (ta, tb)]
    got = elementwise("max.xorsign.abs.bf16 %o, %i0, %i1;", [("b16", bits[0]), ("b16", bits[1])],
                      "b16")
    a, b = ta.float().numpy(), tb.float().numpy()
    got = torch.from_numpy(got.view(np.int16)).view(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, want(np.fmax, False))  # (NaNs of any payload equal)


@pytest.mark.parametrize(
    "cmp,fn",
    [
        ("lt", lambda a, b: a < b),
        ("ge", lambda a, b: a >= b),
        ("ne", lambda a, b: a != b),
        ("equ", lambda a, b: (a == b) | np.isnan(a) | np.isnan(b)),
        ("ltu", lambda a, b: (a < b) | np.isnan(a) | np.isnan(b)),
        ("neu", lambda a, b: (a != b) | np.isnan(a) | np.isnan(b)),
        ("num", lambda a, b: ~np.isnan(a) & ~np.isnan(b)),
        ("nan", lambda a, b: np.isnan(a) | np.isnan(b)),
    ],
)
def test_setp_float_comparisons(cmp: str, fn) -> None:
    nan = np.float32(np.nan)
    a = np.array([1, nan, 2, 3, nan, -1, 0, 5] * 4, np.float32)
    b = np.array([1, 1, nan, 2, nan, 0, -0.0, 6] * 4, np.float32)
    body = f"setp.{cmp}.f32 %p1, %i0, %i1;\n selp.u32 %o, 1, 0, %p1;"
    got = elementwise(body, [("f32", a), ("f32", b)], "u32")
    with np.errstate(invalid="ignore"):
        exp = fn(a, b).astype(np.uint32)
    if cmp == "ne":
        exp &= (~np.isnan(a) & ~np.isnan(b)).astype(np.uint32)
    np.testing.assert_array_equal(got, exp)


def test_setp_unsigned_compare_on_signed_type_and_bool_combination() -> None:
    a = np.array([-1, 1, 0, 5] * 8, np.int32)
    b = np.array([1, -1, 0, 3] * 8, np.int32)
    got = elementwise(
        "setp.lo.s32 %p1, %i0, %i1;\n selp.u32 %o, 1, 0, %p1;", [("s32", a), ("s32", b)], "u32"
    )
    np.testing.assert_array_equal(got, (a.view(np.uint32) < b.view(np.uint32)).astype(np.uint32))
    body = """setp.gt.s32 %p2, %i0, 0;
    setp.lt.and.s32 %p1|%p3, %i0, %i1, %p2;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 2, 0, %p3;
    add.u32 %o, %r1, %r2;"""
    got = elementwise(body, [("s32", a), ("s32", b)], "u32")
    np.testing.assert_array_equal(got, ((a < b) & (a > 0)) * 1 + ((a >= b) & (a > 0)) * 2)


def test_set_and_slct() -> None:
    a = np.array([1.0, 2.0, -1.0, np.nan] * 8, np.float32)
    got = elementwise("set.gt.u32.f32 %o, %i0, 0f3F800000;", [("f32", a)], "u32")
    np.testing.assert_array_equal(got, np.where(a > 1, 0xFFFFFFFF, 0).astype(np.uint32))
    got = elementwise("set.lt.f32.f32 %o, %i0, 0f40000000;", [("f32", a)], "f32")
    np.testing.assert_array_equal(got, np.where(a < 2, 1.0, 0.0).astype(np.float32))
    c = np.array([0, -1, 5, -7] * 8, np.int32)
    got = elementwise("slct.f32.s32 %o, %i0, 0f00000000, %i1;", [("f32", a), ("s32", c)], "f32")
    np.testing.assert_array_equal(got, np.where(c >= 0, a, 0).astype(np.float32))


# ---------------------------------------------------------------- conversions


def _f16_exact(x: np.ndarray, mode: str) -> np.ndarray:
    """Reference f32 -> f16 with directed rounding via float64 neighbours."""
    x64 = x.astype(np.float64)
    y = x64.astype(np.float16)
    y64 = y.astype(np.float64)
    if mode == "rz":
        fix = np.abs(y64) > np.abs(x64)
        y = np.where(fix, np.nextafter(y, np.float16(0)), y)
    elif mode == "rm":
        y = np.where(y64 > x64, np.nextafter(y, np.float16(-np.inf)), y)
    elif mode == "rp":
        y = np.where(y64 < x64, np.nextafter(y, np.float16(np.inf)), y)
    return y.astype(np.float16)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_f32_to_f16_rounding(mode: str) -> None:
    x = np.concatenate(
        [
            np.array(
                [
                    1 + 2**-11,
                    1 + 3 * 2**-11,
                    -(1 + 2**-11),
                    65504,
                    65519,
                    65520,
                    1e6,
                    -1e6,
                    6e-8,
                    3e-8,
                    -3e-8,
                    0.0,
                    -0.0,
                    np.inf,
                    -np.inf,
                ],
                np.float32,
            ),
            (RNG.standard_normal(113) * 10.0 ** RNG.integers(-8, 6, 113)).astype(np.float32),
        ]
    )
    got = elementwise(f"cvt.{mode}.f16.f32 %o, %i0;", [("f32", x)], "b16")
    with np.errstate(over="ignore"):
        exp = _f16_exact(x, mode)
    np.testing.assert_array_equal(got, exp.view(np.uint16))


def test_cvt_bf16_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    x = np.concatenate(
        [
            np.array(
                [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.4e38, 1e-40, 0.0, -0.0], np.float32
            ),
            (RNG.standard_normal(121) * 10.0 ** RNG.integers(-30, 30, 121)).astype(np.float32),
        ]
    )
    got = elementwise("cvt.rn.bf16.f32 %o, %i0;", [("f32", x)], "b16")
    exp = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(got, exp)
    back = elementwise("cvt.f32.bf16 %o, %i0;", [("b16", got)], "f32")
    np.testing.assert_array_equal(
        back, torch.from_numpy(got.view(np.int16)).view(torch.bfloat16).float().numpy()
    )


def test_cvt_float_to_int_saturates() -> None:
    x = np.array(
        [1.5, 2.5, -1.5, -2.5, 3e9, -3e9, np.nan, np.inf, -np.inf, 0.49999997, -0.0, 7.9] * 4,
        np.float32,
    )
    rni = elementwise("cvt.rni.s32.f32 %o, %i0;", [("f32", x)], "s32").view(np.int32)
    rzi = elementwise("cvt.rzi.s32.f32 %o, %i0;", [("f32", x)], "s32").view(np.int32)
    rmi = elementwise("cvt.rmi.u32.f32 %o, %i0;", [("f32", x)], "u32")

    def ref(v, f, lo, hi):
        if np.isnan(v):
            return 0
        return int(min(max(f(float(v)), lo), hi))

    assert list(rni) == [ref(v, lambda t: np.rint(t), -(2**31), 2**31 - 1) for v in x]
    assert list(rzi) == [ref(v, lambda t: np.trunc(t), -(2**31), 2**31 - 1) for v in x]
    assert list(rmi) == [ref(v, lambda t: np.floor(t), 0, 2**32 - 1) for v in x]


def test_cvt_int_to_float_rounding() -> None:
    x = np.array([2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1, 16777217, 3, -5, 0] * 4, np.int32)
    rn = elementwise("cvt.rn.f32.s32 %o, %i0;", [("s32", x)], "f32")
    rz = elementwise("cvt.rz.f32.s32 %o, %i0;", [("s32", x)], "f32")
    rp = elementwise("cvt.rp.f32.s32 %o, %i0;", [("s32", x)], "f32")
    np.testing.assert_array_equal(rn, x.astype(np.float32))
    for i, v in enumerate(x.tolist()):
        assert abs(float(rz[i])) <= abs(v) and float(rp[i]) >= v
        assert (
            abs(float(np.nextafter(rz[i], np.float32(np.copysign(np.inf, v))))) > abs(v) or v == 0
        )
        assert float(np.nextafter(rp[i], np.float32(-np.inf))) < v


def _rounded(v: int, bits: int, mode: str) -> int:
    """The integer v rounded to `bits` significant bits in a PTX rounding mode."""
    m = abs(v)
    drop = max(m.bit_length() - bits, 0)
    q, r = divmod(m, 1 << drop)
    half = (1 << drop) >> 1
    up = {"rn": drop > 0 and (r > half or (r == half and q & 1 == 1)), "rz": False,
          "rp": r > 0 and v > 0, "rm": r > 0 and v < 0}[mode]
    return (q + up) << drop if v >= 0 else -((q + up) << drop)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("source", ["s64", "u64"])
def test_cvt_64_bit_integers_round_once(source: str, mode: str) -> None:
    # 64-bit integers have more bits than float64 holds: converting through it rounded twice
    # (2^62 + 2^54 + 1 to bf16 gave 2^62, not 2^62 + 2^55).
    values = [2**62 + 2**54 + 1, 2**53 + 2**45 + 1, 2**63 - 1, 2**40 + 2**16 + 1,
              2**60 + 2**36 + 2**8, 2**55 + 2**31 + 1, 2**24 + 1, 7, 0, 2**62 + 2**38 + 2**37]
    values += [-v for v in values[:6]] if source == "s64" else [2**64 - 1, 2**63 + 2**39 + 1]
    x = np.array(values, np.int64 if source == "s64" else np.uint64)
    bf16 = elementwise(f"cvt.{mode}.bf16.{source} %o, %i0;", [(source, x)], "b16")
    f32 = elementwise(f"cvt.{mode}.f32.{source} %o, %i0;", [(source, x)], "f32")
    as_f32 = (bf16.astype(np.uint32) << np.uint32(16)).view(np.float32)
    for i, v in enumerate(values):
        assert int(as_f32[i]) == _rounded(v, 8, mode), (v, mode)
        assert int(f32[i]) == _rounded(v, 24, mode), (v, mode)


def test_cvt_integer_narrowing_sign_extension_and_sat() -> None:
    x = np.array([300, -300, 127, -128, 255, 65535, -1, 70000] * 4, np.int32)
    got = elementwise("cvt.s8.s32 %r1, %i0;\n cvt.s32.s8 %o, %r1;", [("s32", x)], "s32").view(
        np.int32
    )
    np.testing.assert_array_equal(got, x.astype(np.int8).astype(np.int32))
    got = elementwise("cvt.sat.u8.s32 %r1, %i0;\n and.b32 %o, %r1, 0xFFFF;", [("s32", x)], "u32")
    np.testing.assert_array_equal(got, np.clip(x, 0, 255))
    got = elementwise("cvt.sat.s16.s32 %h1, %i0;\n cvt.s32.s16 %o, %h1;", [("s32", x)], "s32").view(
        np.int32
    )
    np.testing.assert_array_equal(got, np.clip(x, -32768, 32767))


def test_cvt_round_to_integral_and_sat_float() -> None:
    x = np.array([1.5, 2.5, -1.5, -0.3, 0.7, 2.2, np.nan, 9.9] * 4, np.float32)
    np.testing.assert_array_equal(
        elementwise("cvt.rni.f32.f32 %o, %i0;", [("f32", x)], "f32"), np.rint(x)
    )
    np.testing.assert_array_equal(
        elementwise("cvt.rmi.f32.f32 %o, %i0;", [("f32", x)], "f32"), np.floor(x)
    )
    got = elementwise("cvt.sat.f32.f32 %o, %i0;", [("f32", x)], "f32")
    np.testing.assert_array_equal(got, np.nan_to_num(np.clip(x, 0, 1), nan=0.0))


def test_packed_half2_arithmetic() -> None:
    a = (RNG.standard_normal(64) * 4).astype(np.float16)
    b = (RNG.standard_normal(64) * 4).astype(np.float16)
    c = (RNG.standard_normal(64) * 4).astype(np.float16)
    pa, pb, pc = (v.view(np.uint32) for v in (a, b, c))
    got = elementwise("add.rn.f16x2 %o, %i0, %i1;", [("b32", pa), ("b32", pb)], "b32").view(
        np.float16
    )
    np.testing.assert_array_equal(got, (a.astype(np.float32) + b).astype(np.float16))
    got = elementwise(
        "fma.rn.f16x2 %o, %i0, %i1, %i2;", [("b32", pa), ("b32", pb), ("b32", pc)], "b32"
    )
    np.testing.assert_array_equal(
        got.view(np.float16), (a.astype(np.float64) * b + c).astype(np.float16)
    )
    got = elementwise("neg.f16x2 %o, %i0;", [("b32", pa)], "b32").view(np.float16)
    np.testing.assert_array_equal(got, -a)
    got = elementwise("max.f16x2 %o, %i0, %i1;", [("b32", pa), ("b32", pb)], "b32").view(np.float16)
    np.testing.assert_array_equal(got, np.fmax(a, b))
    # cvt.rn.f16x2.f32 puts the first source in the upper half
    fa = RNG.standard_normal(32).astype(np.float32)
    fb = RNG.standard_normal(32).astype(np.float32)
    got = elementwise("cvt.rn.f16x2.f32 %o, %i0, %i1;", [("f32", fa), ("f32", fb)], "b32")
    np.testing.assert_array_equal(
        (got >> 16).astype(np.uint16), fa.astype(np.float16).view(np.uint16)
    )
    np.testing.assert_array_equal(
        (got & 0xFFFF).astype(np.uint16), fb.astype(np.float16).view(np.uint16)
    )


def test_bf16x2_fma() -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(64).to(torch.bfloat16)
    b = torch.randn(64).to(torch.bfloat16)
    c = torch.randn(64).to(torch.bfloat16)
    pa, pb, pc = (t.view(torch.int16).numpy().view(np.uint16).view(np.uint32) for t in (a, b, c))
    got = elementwise(
        "fma.rn.bf16x2 %o, %i0, %i1, %i2;", [("b32", pa), ("b32", pb), ("b32", pc)], "b32"
    )
    exp = (a.double() * b.double() + c.double()).to(torch.bfloat16)
    np.testing.assert_array_equal(
        got.view(np.uint16), exp.view(torch.int16).numpy().view(np.uint16)
    )


def test_mov_pack_unpack() -> None:
    x = RNG.integers(0, 2**32, 32, dtype=np.int64).astype(np.uint32)
    body = "mov.b32 {%h1, %h2}, %i0;\n mov.b32 %o, {%h2, %h1};"
    got = elementwise(body, [("b32", x)], "b32")
    np.testing.assert_array_equal(got, (x >> 16) | (x << 16))
    got = elementwise("mov.b64 %o, {%i0, 7};", [("b32", x)], "b64")
    np.testing.assert_array_equal(got, x.astype(np.uint64) | (np.uint64(7) << np.uint64(32)))


def test_float_special_functions_and_rounding_modes() -> None:
    x = np.abs(RNG.standard_normal(64).astype(np.float32)) + np.float32(0.1)
    got = elementwise("sqrt.rn.f32 %o, %i0;", [("f32", x)], "f32")
    np.testing.assert_array_equal(got, np.sqrt(x))
    got = elementwise("rcp.rn.f32 %o, %i0;", [("f32", x)], "f32")
    np.testing.assert_array_equal(got, np.float32(1) / x)
    got = elementwise("ex2.approx.ftz.f32 %o, %i0;", [("f32", x)], "f32")
    np.testing.assert_allclose(got, np.exp2(x), rtol=1e-6)
    got = elementwise("lg2.approx.f32 %o, %i0;", [("f32", x)], "f32")
    np.testing.assert_allclose(got, np.log2(x), rtol=1e-6, atol=1e-7)
    y = x * np.float32(3.3)
    rz = elementwise("add.rz.f32 %o, %i0, %i1;", [("f32", x), ("f32", y)], "f32")
    rp = elementwise("add.rp.f32 %o, %i0, %i1;", [("f32", x), ("f32", y)], "f32")
    exact = x.astype(np.float64) + y
    assert np.all(rz.astype(np.float64) <= exact) and np.all(rp.astype(np.float64) >= exact)
    assert np.all(np.nextafter(rz, np.float32(np.inf)).astype(np.float64) > exact)
    got = elementwise("fma.rn.f32 %o, %i0, %i1, 0fBF800000;", [("f32", x), ("f32", y)], "f32")
    np.testing.assert_array_equal(got, (x.astype(np.float64) * y - 1).astype(np.float32))
    got = elementwise("add.sat.f32 %o, %i0, 0fBF000000;", [("f32", x)], "f32")
    np.testing.assert_array_equal(got, np.clip(x - np.float32(0.5), 0, 1))
    tiny = np.array([1e-39, -1e-39, 1.0, 2e-38] * 8, np.float32)
    got = elementwise("mul.ftz.f32 %o, %i0, 0f3F800000;", [("f32", tiny)], "f32")
    np.testing.assert_array_equal(
        got, np.where(np.abs(tiny) < 1.1754944e-38, 0, tiny).astype(np.float32)
    )
    assert np.signbit(got[1])


def test_testp_and_copysign() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, 1e-40, 0.0, -2.0, 3.0] * 4, np.float32)
    got = elementwise("testp.finite.f32 %p1, %i0;\n selp.u32 %o, 1, 0, %p1;", [("f32", x)], "u32")
    np.testing.assert_array_equal(got, np.isfinite(x))
    got = elementwise(
        "testp.subnormal.f32 %p1, %i0;\n selp.u32 %o, 1, 0, %p1;", [("f32", x)], "u32"
    )
    np.testing.assert_array_equal(got, (x != 0) & (np.abs(x) < 1.1754944e-38))
    got = elementwise("copysign.f32 %o, %i0, 0f40000000;", [("f32", x)], "f32")
    np.testing.assert_array_equal(got, np.copysign(np.float32(2), x))


def test_fma_f32_is_fused_exactly() -> None:
    # cases where rounding x*y+z through float64 first would double-round
    x = np.array([1 + 2**-23, 1 + 2**-12, 3.0, 1 + 2**-23] * 8, np.float32)
    y = np.array([1 + 2**-23, 1 + 2**-12, 1 / 3, 1 - 2**-24] * 8, np.float32)
    z = np.array([2**-60, -(2**-50), 2**-40, -1.0] * 8, np.float32)
    got = elementwise("fma.rn.f32 %o, %i0, %i1, %i2;", [("f32", x), ("f32", y), ("f32", z)], "f32")
    from fractions import Fraction

    for i in range(4):
        exact = Fraction(float(x[i])) * Fraction(float(y[i])) + Fraction(float(z[i]))
        cand = np.float32(float(exact))  # nearest f32 candidates around the exact value
        best = min(
            (np.nextafter(cand, np.float32(-np.inf)), cand, np.nextafter(cand, np.float32(np.inf))),
            key=lambda c: (abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.uint32)) & 1),
        )
        assert got[i] == best, (i, got[i], best)


def test_bmsk_and_szext() -> None:
    a = np.array([0, 4, 31, 32, 40, 3, 0, 16] * 4, np.uint32)
    b = np.array([5, 8, 4, 3, 2, 0, 32, 40] * 4, np.uint32)
    got = elementwise("bmsk.clamp.b32 %o, %i0, %i1;", [("b32", a), ("b32", b)], "b32")
    for i in range(32):
        p, w = min(int(a[i]), 32), min(int(b[i]), 32)
        assert got[i] == (0 if p >= 32 else (((1 << w) - 1) << p) & 0xFFFFFFFF), i
    x = np.array([0xFF, 0x80, 0x7F, 0x12345678, 0xFFFFFFFF, 5, 6, 7] * 4, np.uint32)
    n = np.array([8, 8, 8, 16, 0, 3, 40, 32] * 4, np.uint32)
    got = elementwise("szext.clamp.s32 %o, %i0, %i1;", [("b32", x), ("u32", n)], "s32").view(
        np.int32
    )
    for i in range(8):
        v, k = int(x[i]), min(int(n[i]), 32)
        if k == 0:
            exp = 0
        elif k >= 32:
            exp = v - (1 << 32) if v >= 2**31 else v
        else:
            low = v & ((1 << k) - 1)
            exp = low - (1 << k) if low >> (k - 1) else low
        assert got[i] == exp, (i, got[i], exp)


@pytest.mark.parametrize("ins", ["mul.wide.u64 %rd1, %rd2, %rd3;", "mul.wide.s64 %rd1, %rd2, %rd3;",
                                 "mad.wide.u64 %rd1, %rd2, %rd3, %rd4;"])
def test_wide_multiply_of_64_bit_integers_is_a_load_error(ins: str) -> None:
    # PTX has .wide for 16- and 32-bit types only (there are no 128-bit registers); was a raw
    # KeyError('u128').
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n" + REGS
           + f"  {ins}\n  ret;\n}}\n")
    with pytest.raises(emu.PTXLoadError, match=r"line 13: \.wide needs a 16- or 32-bit"):
        emu.load_ptx(ptx)


@pytest.mark.parametrize(("ins", "message"), [
    # was 0x100000000 for %r1 = -1: the 32-bit register zero-extended
    ("add.s64 %rd1, %r1, 1;", "register %r1 is 32-bit, the .s64 operand needs 64 bits"),
    ("add.u32 %r1, %rd1, 1;", "register %rd1 is 64-bit, the .u32 operand needs 32 bits"),
    ("setp.eq.u64 %p1, %r1, %r2;", "register %r1 is 32-bit, the .u64 operand needs 64 bits"),
    ("bfind.u32 %rd1, %r1;", "register %rd1 is 64-bit, the .u32 operand needs 32 bits"),
    ("add.u64 %rd1, %f1, %rd2;", "register %f1 is 32-bit, the .u64 operand needs 64 bits"),
    # ld, st and cvt take wider registers only
    ("ld.global.u32 %h1, [%rd1];",
     "register %h1 is 16-bit, the .u32 operand needs 32 bits or more"),
])
def test_register_size_must_match_the_operand_type(ins: str, message: str) -> None:
    # PTX ISA: no automatic conversion between operand types; only ld, st and cvt take
    # registers wider than the instruction type (ptxas: "Arguments mismatch").
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n" + REGS
           + f"  {ins}\n  ret;\n}}\n")
    with pytest.raises(emu.PTXLoadError, match=rf"line 13: {re.escape(message)}"):
        emu.load_ptx(ptx)


def test_cvt_takes_wider_registers() -> None:
    # The ISA's relaxed rule for cvt (and ld, st): the low bits of a wider source; a wider
    # destination sign-extended for .s types, zero-extended otherwise.
    src = np.array([0x180, 0x7F, 0xFFFFFF01, 0x12345680], np.uint32)
    body = """cvt.s16.s8 %r1, %i0;
  cvt.u16.u8 %rd1, %i0;
  shl.b64 %rd1, %rd1, 32;
  cvt.u64.u32 %rd2, %r1;
  or.b64 %o, %rd1, %rd2;"""
    got = elementwise(body, [("u32", src)], "u64")
    low = (src & 0xFF).astype(np.uint8)
    ref = (low.astype(np.uint64) << 32) | low.view(np.int8).astype(np.int32).view(np.uint32)
    np.testing.assert_array_equal(got, ref)
