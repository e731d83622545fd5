"""Scalar math: f64 (f64_math.cu), integers (int_ops.cu), conversions (conversions.cu), f16/bf16.

References are exact: Python integers and fractions, rounded to the target format by
``_round`` below (an independent model of IEEE rounding, not numpy's or the engine's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

# (significand bits incl. the implicit one, exponent of the smallest subnormal, largest finite)
F32 = (24, -149, float(np.finfo(np.float32).max))
F16 = (11, -24, 65504.0)
BF16 = (8, -133, float(Fraction(0xFF, 0x80) * 2**127))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round(v: Fraction | float, fmt: tuple[int, int, float], mode: str = "rn") -> float:
    """Round an exact value to a binary floating-point format with an IEEE rounding mode."""
    bits, min_exp, max_finite = fmt
    if isinstance(v, float) and (not math.isfinite(v) or v == 0):
        return v  # infinities and signed zeros are exact in every format
    q = Fraction(v)
    if q == 0:
        return 0.0
    e = math.frexp(float(q))[1]  # |q| in [2^(e-1), 2^e), possibly off by one: fix below
    while abs(q) >= Fraction(2) ** e:
        e += 1
    while abs(q) < Fraction(2) ** (e - 1):
        e -= 1
    ulp_e = max(e - bits, min_exp)
    scaled = q / Fraction(2) ** ulp_e
    if mode == "rn":
        r = round(scaled)  # Fraction.__round__: half to even
    elif mode == "rz":
        r = math.trunc(scaled)
    elif mode == "rd":
        r = math.floor(scaled)
    elif mode == "ru":
        r = math.ceil(scaled)
    else:
        raise ValueError(mode)
    res = (
        float(Fraction(r) * Fraction(2) ** ulp_e) if abs(r) * 2.0**ulp_e <= max_finite else math.inf
    )
    if res == 0:
        return math.copysign(0.0, q)  # rounded to zero: keeps the sign of the exact value
    if abs(res) > max_finite:
        pos = q > 0
        if mode == "rn":
            res = math.inf
        elif mode == "rz":
            res = max_finite
        elif mode == "rd":
            res = max_finite if pos else math.inf
        else:
            res = math.inf if pos else max_finite
        res = res if pos else -res
    return res


def _bf16_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0]) >> 16


def _f16_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float16).view(np.uint16)[0])


def test_round_model_sanity() -> None:
    """The reference rounding model agrees with numpy where numpy is known to be exact (RN)."""
    rng = np.random.default_rng(0)
    xs = np.concatenate(
        [
            rng.standard_normal(500) * 1e3,
            rng.standard_normal(200) * 1e-6,
            [65519.0, 65520.0, -7e4],
        ]
    )
    for x in xs.astype(np.float64):
        with np.errstate(over="ignore"):
            assert _round(float(x), F16) == float(np.float16(x)), x
        assert _round(float(x), F32) == float(np.float32(x)), x


# ---------------------------------------------------------------------------------------- f64


@pytest.mark.parametrize("n", [64, 301])
def test_f64_arith(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("f64_math.cu", arch)
    k.require("div.rn.f64", "sqrt.rn.f64", "fma.rn.f64", "add.f64", "mul.rn.f64")
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n) * 10 ** rng.uniform(-5, 5, n)
    b = rng.standard_normal(n) * 10 ** rng.uniform(-5, 5, n)
    c = rng.standard_normal(n)
    b[:3] = a[:3]  # equal pairs for the comparison branch
    out = np.zeros((n, 10), dtype=np.float64)
    k.module.launch("f64_math", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[a, b, c, out, n])
    np.testing.assert_array_equal(out[:, 0], a + b)
    np.testing.assert_array_equal(out[:, 1], a - b)
    np.testing.assert_array_equal(out[:, 2], a * b)
    np.testing.assert_array_equal(out[:, 3], a / b)
    np.testing.assert_array_equal(out[:, 4], np.sqrt(np.abs(a)))
    fma = [
        float(Fraction(x) * Fraction(y) + Fraction(z))
        for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    ]
    np.testing.assert_array_equal(out[:, 5], np.array(fma))
    np.testing.assert_array_equal(out[:, 6], np.minimum(a, b))
    np.testing.assert_array_equal(out[:, 7], np.maximum(a, c))
    np.testing.assert_array_equal(out[:, 8], -np.abs(c))
    np.testing.assert_array_equal(out[:, 9], np.where(a < b, 1.0, np.where(a == b, 0.5, 0.0)))


@pytest.mark.parametrize("n", [100])
def test_f64_libm(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("f64_math.cu", arch)
    rng = np.random.default_rng(n)
    a = rng.uniform(-30, 30, n)
    out = np.zeros((n, 3), dtype=np.float64)
    k.module.launch("f64_libm", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[a, out, n])
    # CUDA's double-precision exp/log/rsqrt are within 2 ulp (2.2e-16 each).
    np.testing.assert_allclose(out[:, 0], np.exp(a), rtol=5e-16)
    np.testing.assert_allclose(out[:, 1], np.log(np.abs(a) + 1.0), rtol=5e-16)
    np.testing.assert_allclose(out[:, 2], 1.0 / np.sqrt(np.abs(a) + 0.25), rtol=5e-16)


# ------------------------------------------------------------------------------------ integers


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def _s64(v: int) -> int:
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def _tdiv(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _brev(v: int, width: int) -> int:
    return int(format(v, f"0{width}b")[::-1], 2)


def _clz(v: int, width: int) -> int:
    return width - v.bit_length()


def _byte_perm(x: int, y: int, s: int) -> int:
    src = (x & M32) | ((y & M32) << 32)
    return sum(((src >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))


def _int_ops_ref(x: int, y: int) -> list[int]:
    ux, uy = x & M32, y & M32
    ffs = (ux & -ux).bit_length()
    return [
        ux.bit_count(),
        _clz(ux, 32),
        _brev(ux, 32),
        _byte_perm(x, y, 0x5140),
        _byte_perm(x, y, y & 0x7777),
        (x >> (y & 31)) & M32,
        ux >> (uy & 31),
        (ux << (uy & 31)) & M32,
        _tdiv(x, y) & M32 if y else 0,
        (x - _tdiv(x, y) * y) & M32 if y else 0,
        ux // uy if uy else 0,
        ux % uy if uy else 0,
        ((x * y) >> 32) & M32,
        (ux * uy) >> 32,
        ffs,
        (((uy << 32) | ux) << 7 >> 32) & M32,
        (min(x, y) ^ max(x, y)) & M32,
        abs(x) & M32,
        (abs(x - y) + 3) & M32,
        (ux >> 5) & 0x3FF,
    ]


@pytest.mark.parametrize("n", [64, 500])
def test_int_ops(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("int_ops.cu", arch)
    k.require(
        "popc.b32",
        "clz.b32",
        "brev.b32",
        "prmt.b32",
        "div.s32",
        "rem.s32",
        "div.u32",
        "rem.u32",
    )
    k.require("mul.hi.s32", "mul.hi.u32", "shr.s32", "shr.u32", "shl.b32", "sad.s32", "shf.l")
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    special = [0, 1, -1, 2**31 - 1, -(2**31), 0x80, 7, -7, 0x00F0F000, 12345]
    a[: len(special)] = special
    b[: len(special)] = special[::-1]
    b[10:20] = rng.integers(-40, 40, size=10)  # small divisors and shift amounts
    b[np.logical_and(a == -(2**31), b == -1)] = 3  # INT_MIN / -1 is undefined in C
    out = np.zeros((n, 20), dtype=np.uint32)
    k.module.launch("int_ops", grid=(_cdiv(n, 128), 1, 1), block=(128, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        expect = _int_ops_ref(x, y)
        got = [int(v) for v in out[i]]
        bad = [(j, got[j], expect[j]) for j in range(20) if got[j] != expect[j]]
        assert not bad, f"x={x} y={y}: (output, got, expected) {bad}"


@pytest.mark.parametrize("n", [96])
def test_int64_ops(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("int_ops.cu", arch)
    k.require(
        "popc.b64",
        "clz.b64",
        "brev.b64",
        "div.s64",
        "rem.s64",
        "div.u64",
        "mul.lo.s64",
        "mul.hi.u64",
    )
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
    b = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
    b[:10] = rng.integers(-1000, 1000, size=10)
    b[10:20] = rng.integers(-(2**33), 2**33, size=10)
    a[20:23] = [0, -1, 2**63 - 1]
    b[np.logical_and(a == -(2**63), b == -1)] = 5
    out = np.zeros((n, 8), dtype=np.uint64)
    k.module.launch("int64_ops", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        ux, uy = x & M64, y & M64
        expect = [
            ux.bit_count(),
            _clz(ux, 64),
            _brev(ux, 64),
            _tdiv(x, y) & M64 if y else 0,
            (x - _tdiv(x, y) * y) & M64 if y else 0,
            ux // uy if uy else 0,
            (x * y) & M64,
            (ux * uy) >> 64,
        ]
        assert [int(v) for v in out[i]] == expect, (i, x, y)


@pytest.mark.parametrize("n", [64])
def test_int128_division(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("int_ops.cu", arch)
    k.require("sub.cc.u32", "subc.cc.u32", "addc")
    rng = np.random.default_rng(n)
    words = lambda: rng.integers(0, 2**64, size=(n, 2), dtype=np.uint64)  # noqa: E731
    a, b = words(), words()
    b[: n // 4, 1] = 0  # 64-bit divisors
    b[n // 4 : n // 2, 1] >>= np.uint64(40)  # divisors a few bits above 64
    b[n // 2 : n // 2 + 4] = [[3, 0], [1, 0], [2**64 - 1, 2**64 - 1], [0, 2**63]]  # -1, -2^127
    a[0] = [7, 1000]
    b[0] = [0, 3]  # (1000 * 2^64 + 7) / (3 * 2^64): 333
    out = np.zeros((n, 8), dtype=np.uint64)
    k.module.launch("int128_div", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[a, b, out, n])
    m128 = (1 << 128) - 1

    def signed(v: int) -> int:
        return v - (1 << 128) if v >> 127 else v

    for i in range(n):
        x = int(a[i, 0]) | int(a[i, 1]) << 64
        y = int(b[i, 0]) | int(b[i, 1]) << 64
        sx, sy = signed(x), signed(y)
        q = _tdiv(sx, sy)
        expect = [x // y, x % y, q & m128, (sx - q * sy) & m128]
        got = [int(out[i, 2 * j]) | int(out[i, 2 * j + 1]) << 64 for j in range(4)]
        assert got == expect, (i, x, y)


# --------------------------------------------------------------------------------- conversions


def _sat(v: float, lo: int, hi: int) -> int:
    if math.isinf(v):
        return hi if v > 0 else lo
    return int(min(max(v, lo), hi))


def _rint(v: float) -> float:
    return float(round(v)) if math.isfinite(v) else v  # half to even


@pytest.mark.parametrize("n", [200])
def test_float_to_int_rounding(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("conversions.cu", arch)
    k.require(
        "cvt.rni.s32.f32",
        "cvt.rzi.s32.f32",
        "cvt.rmi.s32.f32",
        "cvt.rpi.s32.f32",
        "cvt.rni.u32.f32",
    )
    rng = np.random.default_rng(n)
    f = (rng.standard_normal(n) * 1000).astype(np.float32)
    special = [
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        -2.5,
        0.49999997,
        -0.0,
        3e9,
        -3e9,
        5e9,
        np.inf,
        -np.inf,
        2147483520.0,
    ]
    f[: len(special)] = special
    f[20:40] = np.round(f[20:40]) + 0.5  # exact halves
    out = np.zeros((n, 12), dtype=np.int32)
    k.module.launch("float_to_int", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[f, out, n])
    lo, hi = -(2**31), 2**31 - 1
    for i in range(n):
        x = float(f[i])
        ax = abs(x)
        expect = [
            _sat(_rint(x), lo, hi),
            _sat(float(math.trunc(x)) if math.isfinite(x) else x, lo, hi),
            _sat(float(math.floor(x)) if math.isfinite(x) else x, lo, hi),
            _sat(float(math.ceil(x)) if math.isfinite(x) else x, lo, hi),
            _s32(_sat(_rint(ax), 0, M32)),
            _s32(_sat(float(math.trunc(ax)) if math.isfinite(ax) else ax, 0, M32)),
            _sat(float(math.trunc(x)) if math.isfinite(x) else x, lo, hi),
            _sat(_rint(x), lo, hi),
            _sat(float(math.floor(x)) if math.isfinite(x) else x, lo, hi),
            _sat(float(math.ceil(x)) if math.isfinite(x) else x, lo, hi),
            _sat(float(math.trunc(x * 0.5)) if math.isfinite(x) else x, lo, hi),
            _s32(
                _sat(
                    _rint(_round(Fraction(x) * 4096, F32) if math.isfinite(x) else x),
                    -(2**63),
                    2**63 - 1,
                )
                >> 8
            ),
        ]
        assert [int(v) for v in out[i]] == expect, (i, x)


@pytest.mark.parametrize("n", [128])
def test_int_to_float_rounding(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("conversions.cu", arch)
    k.require(
        "cvt.rn.f32.s32",
        "cvt.rz.f32.s32",
        "cvt.rm.f32.s32",
        "cvt.rp.f32.s32",
        "cvt.rn.f32.u32",
        "cvt.rz.f32.u32",
    )
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    u = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    a[:6] = [16777217, -16777217, 16777219, 2**31 - 1, -(2**31), 3]
    u[:3] = [2**32 - 1, 16777217, 0]
    out = np.zeros((n, 6), dtype=np.float32)
    k.module.launch(
        "int_to_float", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[a, u, out, n]
    )
    for i in range(n):
        x, ux = int(a[i]), int(u[i])
        expect = [_round(x, F32, m) for m in ("rn", "rz", "rd", "ru")] + [
            _round(ux, F32, "rn"),
            _round(ux, F32, "rz"),
        ]
        assert [float(v) for v in out[i]] == expect, (i, x, ux)


@pytest.mark.parametrize("n", [256])
def test_float_to_half_and_bf16(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("conversions.cu", arch)
    k.require(
        "cvt.rn.f16.f32",
        "cvt.rz.f16.f32",
        "cvt.rm.f16.f32",
        "cvt.rp.f16.f32",
        "cvt.rn.bf16.f32",
        "cvt.rz.bf16.f32",
    )
    k.require("cvt.rn.f16.f64", "cvt.f32.f16", "cvt.rn.f32.f64", "cvt.rz.f32.f64")
    rng = np.random.default_rng(n)
    f = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 6, n)).astype(np.float32)
    special = [
        65504.0,
        65519.0,
        65520.0,
        1e6,
        -1e6,
        6e-8,
        3e-8,
        1e-10,
        -0.0,
        1.0 + 2**-11,
        1.0 + 3 * 2**-11,
        3.4e38,
    ]
    f[: len(special)] = special
    d = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)
    d[:4] = [1.0 + 2**-24, 1.0 + 2**-11 + 2**-40, 1e300, 1.0 + 2**-8 + 2**-50]
    h = np.zeros((n, 8), dtype=np.uint16)
    back = np.zeros((n, 4), dtype=np.float32)
    k.module.launch(
        "float_to_half",
        grid=(_cdiv(n, 64), 1, 1),
        block=(64, 1, 1),
        args=[f, d, h, back, n],
    )
    for i in range(n):
        x, dx = float(f[i]), float(d[i])
        e16 = [_round(x, F16, m) for m in ("rn", "rz", "rd", "ru")]
        expect_bits = [_f16_bits(v) for v in e16] + [
            _bf16_bits(_round(x, BF16, "rn")),
            _bf16_bits(_round(x, BF16, "rz")),
            _f16_bits(_round(dx, F16, "rn")),
            _bf16_bits(_round(dx, BF16, "rn")),  # one rounding f64 -> bf16, no detour through f32
        ]
        assert [int(v) for v in h[i]] == expect_bits, (i, x, dx)
        expect_back = [
            e16[0],
            _round(x, BF16, "rn"),
            _round(dx, F32, "rn"),
            _round(dx, F32, "rz"),
        ]
        assert [float(v) for v in back[i]] == expect_back, (i, x, dx)


@pytest.mark.parametrize("n", [200])
def test_float_misc_rounding_modes(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("conversions.cu", arch)
    k.require(
        "div.approx.f32",
        "sqrt.rn.f32",
        "rcp.rn.f32",
        "add.rz.f32",
        "mul.rp.f32",
        "fma.rm.f32",
    )
    rng = np.random.default_rng(n)
    f = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float32)
    f[:5] = [0.0, 1.0, -1.0, 0.999, 1e-30]
    out = np.zeros((n, 8), dtype=np.float32)
    k.module.launch("float_misc", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[f, out, n])
    c01, c11, c03 = (Fraction(float(np.float32(v))) for v in (0.1, 1.1, 0.3))
    for i in range(n):
        x = float(f[i])
        fx = Fraction(x)
        o = [float(v) for v in out[i]]
        assert o[0] == min(max(x, 0.0), 1.0), (i, x)
        assert abs(o[1] - x / 3.0) <= 2 * float(np.spacing(np.float32(abs(x) / 3.0))) + 1e-38, (
            i,
            x,
        )
        assert o[2] == _round(math.sqrt(abs(x)), F32), (
            i,
            x,
        )  # f64 sqrt then f32: correctly rounded
        s = _round(fx + 1000, F32)
        assert o[3] == _round(1 / Fraction(s), F32), (i, x)
        assert o[4] == _round(fx + c01, F32, "rz"), (i, x)
        assert o[5] == _round(fx * c11, F32, "ru"), (i, x)
        assert o[6] == _round(fx * fx - c03, F32, "rd"), (i, x)
        assert o[7] == math.copysign(abs(x) * 2.0, -x), (i, x)


@pytest.mark.parametrize("n", [160])
def test_float_add_rounding_modes(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("conversions.cu", arch)
    k.require("add.rz.f32", "add.rm.f32", "add.rp.f32", "sub.rz.f32", "sub.rm.f32", "sub.rp.f32")
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    # exponents far apart, where the smaller operand lies below float64's ulp of the sum
    b = (a * rng.choice([1e-20, -1e-20, 1e-35, -1e-35, 0.5, -3.0], n)).astype(np.float32)
    a[:6] = [3e38, 1.0, 1.0, -1.0, 3.4028235e38, 1e-45]
    b[:6] = [10.0, -1e-30, 1e-30, 1e-30, 3.4028235e38, -1e-45]
    out = np.zeros((n, 8), dtype=np.float32)
    k.module.launch("float_add_rounding", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1),
                    args=[a, b, out, n])
    for i in range(n):
        x, y = Fraction(float(a[i])), Fraction(float(b[i]))
        expect = [_round(v, F32, mode) for v in (x + y, x - y) for mode in ("rn", "rz", "rd", "ru")]
        got = [float(v) for v in out[i]]
        assert got == expect, (i, float(a[i]), float(b[i]), got, expect)


# ------------------------------------------------------------------------ f16 / bf16 arithmetic


def _f16_inputs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, y, z = ((rng.standard_normal(n) * 4).astype(np.float16) for _ in range(3))
    x[:7] = [np.inf, -np.inf, np.nan, 1.5, 2.0, 3.0, 65504.0]
    y[:7] = [1.0, 2.0, 1.0, 0.25, -1.0, 3.0, 65504.0]
    z[3], z[4] = np.inf, x[4]
    return x, y, z


@pytest.mark.parametrize("n", [100, 333])
def test_half_scalar_ops(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("half_math.cu", arch)
    k.require(
        "add.f16", "sub.f16", "mul.f16", "fma.rn.f16", "min.f16", "max.f16", "neg.f16", "abs.f16"
    )
    k.require("fma.rn.relu.f16", "add.sat.f16", "setp.lt.f16", "setp.gtu.f16")
    x, y, z = _f16_inputs(n, n)
    out = np.zeros((n, 10), dtype=np.float16)
    cmp = np.zeros(n, dtype=np.int32)
    k.module.launch(
        "half_ops", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[x, y, z, out, cmp, n]
    )
    x64, y64, z64 = x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        fma = (x64 * y64 + z64).astype(np.float16)  # f16 products/sums are exact in f64
        add = (x64 + y64).astype(np.float16)
        expect = [
            add,
            (x64 - y64).astype(np.float16),
            (x64 * y64).astype(np.float16),
            fma,
            np.fmin(x, y),  # PTX min/max return the non-NaN operand
            np.fmax(x, y),
            -x,
            np.abs(x),
            np.where(np.isnan(fma), fma, np.maximum(fma, np.float16(0))),
            np.where(np.isnan(add), np.float16(0), np.clip(add, 0, 1)),  # .sat turns NaN into +0
        ]
    for j, e in enumerate(expect):
        np.testing.assert_array_equal(out[:, j], e.astype(np.float16), err_msg=f"output {j}")
    with np.errstate(invalid="ignore"):
        bits = (
            (x < y).astype(np.int32)
            | (x >= y) * 2
            | (x == z) * 4
            | np.isnan(x) * 8
            | ~(x <= y) * 16  # greater-than-or-unordered
            | np.isinf(z) * 32
        )
    np.testing.assert_array_equal(cmp, bits)


def _bf16_from_f32(v: np.ndarray) -> np.ndarray:
    return (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("n", [128, 301])
def test_bf16_scalar_ops(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("half_math.cu", arch)
    k.require("min.bf16", "max.bf16", "neg.bf16", "abs.bf16")
    k.require("fma.rn.bf16" if arch == "sm_80" else "add.bf16")
    rng = np.random.default_rng(n)
    # Exactly representable bf16 inputs: truncate random f32 to their top 16 bits.
    xb, yb, zb = (_bf16_from_f32(rng.standard_normal(n).astype(np.float32) * 8) for _ in range(3))
    zb[:3] = xb[:3]
    out = np.zeros((n, 8), dtype=np.uint16)
    cmp = np.zeros(n, dtype=np.int32)
    k.module.launch(
        "bf16_ops", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[xb, yb, zb, out, cmp, n]
    )
    xs, ys, zs = _bf16_value(xb), _bf16_value(yb), _bf16_value(zb)
    for i in range(n):
        x, y, z = Fraction(xs[i]), Fraction(ys[i]), Fraction(zs[i])
        expect = [_round(v, BF16) for v in (x + y, x - y, x * y, x * y + z)]
        expect += [min(xs[i], ys[i]), max(xs[i], ys[i]), -xs[i], abs(xs[i])]
        got = _bf16_value(out[i]).tolist()
        assert got == expect, (i, xs[i], ys[i], zs[i])
    bits = (xs < ys).astype(np.int32) | (xs >= ys) * 2 | (xs == zs) * 4
    np.testing.assert_array_equal(cmp, bits)


@pytest.mark.parametrize("n2", [64, 150])
def test_half2_packed_ops(load_kernels: Loader, arch: str, n2: int) -> None:
    k = load_kernels("half_math.cu", arch)
    k.require("add.f16x2", "mul.f16x2", "fma.rn.f16x2", "max.f16x2", "fma.rn.relu.f16x2")
    rng = np.random.default_rng(n2)
    x, y, z = ((rng.standard_normal(2 * n2) * 4).astype(np.float16) for _ in range(3))
    y[:8] = x[:8]  # some equal pairs for the comparison
    out = np.zeros((n2, 5, 2), dtype=np.float16)
    k.module.launch(
        "half2_ops", grid=(_cdiv(n2, 32), 1, 1), block=(32, 1, 1), args=[x, y, z, out, n2]
    )
    x64, y64, z64 = x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)
    fma = (x64 * y64 + z64).astype(np.float16)
    expect = [
        (x64 + y64).astype(np.float16),
        (x64 * y64).astype(np.float16),
        fma,
        np.fmax(x, y),
        np.maximum(fma, np.float16(0)),
    ]
    for j, e in enumerate(expect):
        np.testing.assert_array_equal(out[:, j, :].reshape(-1), e, err_msg=f"output {j}")


@pytest.mark.parametrize("n2", [64, 99])
def test_bf162_packed_ops(load_kernels: Loader, arch: str, n2: int) -> None:
    k = load_kernels("half_math.cu", arch)
    k.require("fma.rn.bf16x2", "min.bf16x2")
    rng = np.random.default_rng(n2)
    xb, yb, zb = (
        _bf16_from_f32(rng.standard_normal(2 * n2).astype(np.float32) * 3) for _ in range(3)
    )
    out = np.zeros((n2, 4, 2), dtype=np.uint16)
    k.module.launch(
        "bf162_ops", grid=(_cdiv(n2, 32), 1, 1), block=(32, 1, 1), args=[xb, yb, zb, out, n2]
    )
    xs, ys, zs = _bf16_value(xb), _bf16_value(yb), _bf16_value(zb)
    for i in range(2 * n2):
        x, y, z = Fraction(xs[i]), Fraction(ys[i]), Fraction(zs[i])
        expect = [_round(v, BF16) for v in (x + y, x * y, x * y + z)] + [min(xs[i], ys[i])]
        assert _bf16_value(out[i // 2, :, i % 2]).tolist() == expect, (i, xs[i], ys[i], zs[i])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_packed_comparisons(load_kernels: Loader, arch: str, dtype: str) -> None:
    """set.<cmp>.f16x2.f16x2 gives 1.0/0.0 per lane; set.<cmp>.u32.f16x2 gives 0xFFFF/0 per lane."""
    k = load_kernels("half_compare.cu", arch)
    k.require("set.lt.f16x2.f16x2", "set.le.u32.f16x2")
    n2 = 200
    rng = np.random.default_rng(5)
    xv = rng.integers(-4, 4, size=2 * n2).astype(np.float32)  # small integers: many ties
    yv = rng.integers(-4, 4, size=2 * n2).astype(np.float32)
    if dtype == "f16":
        xa, ya = xv.astype(np.float16).view(np.uint16), yv.astype(np.float16).view(np.uint16)
        one = 0x3C00
    else:
        xa, ya = _bf16_from_f32(xv), _bf16_from_f32(yv)
        one = 0x3F80
    out = np.zeros((n2, 2, 2), dtype=np.uint16)
    both = np.zeros(n2, dtype=np.int32)
    kernel = "half2_compare" if dtype == "f16" else "bf162_compare"
    k.module.launch(
        kernel, grid=(_cdiv(n2, 64), 1, 1), block=(64, 1, 1), args=[xa, ya, out, both, n2]
    )
    lt, ge = (xv < yv).reshape(n2, 2), (xv >= yv).reshape(n2, 2)
    np.testing.assert_array_equal(out[:, 0, :], np.where(lt, one, 0))
    np.testing.assert_array_equal(out[:, 1, :], np.where(ge, one, 0))
    le_all = (xv <= yv).reshape(n2, 2).all(axis=1)
    gt_all = (xv > yv).reshape(n2, 2).all(axis=1)
    np.testing.assert_array_equal(both, le_all.astype(np.int32) | gt_all * 2)


# ------------------------------------------------------------------ integer and fp8 conversions


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def test_integer_narrowing_and_saturation(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("int_cvt.cu", arch)
    k.require(
        "cvt.sat.s8.s32", "cvt.sat.u8.s32", "cvt.sat.s16.s64", "cvt.sat.u32.s64", "cvt.s64.s16"
    )
    rng = np.random.default_rng(4)
    n = 200
    x = rng.integers(-(2**40), 2**40, size=n, dtype=np.int64)
    x[:10] = [0, -1, 127, 128, -129, 255, 256, 2**31, -(2**33), 2**63 - 1]
    x[10:60] = rng.integers(-70000, 70000, size=50)
    out = np.zeros((n, 10), dtype=np.int32)
    k.module.launch("int_narrow", grid=(4, 1, 1), block=(64, 1, 1), args=[x, out, n])
    for i in range(n):
        v = int(x[i])
        w = _wrap(v, 32, True)
        expect = [
            _wrap(w, 8, True),
            _wrap(w, 8, False),
            _wrap(w, 16, True),
            _wrap(w, 16, False),
            min(max(w, -128), 127),
            min(max(w, 0), 255),
            min(max(v, -32768), 32767),
            _wrap(min(max(v, 0), 2**32 - 1), 32, True),
            min(v & (2**64 - 1), 2**31 - 1),
            _wrap(w, 16, True) >> 8,
        ]
        assert [int(o) for o in out[i]] == expect, (i, v)


def test_half_integer_conversions(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("int_cvt.cu", arch)
    k.require("cvt.rni.s32.f16", "cvt.rzi.s32.f16", "cvt.rmi.s16.f16", "cvt.rpi.u32.f16")
    k.require("cvt.rn.f16.s32", "cvt.rz.f16.s32", "cvt.rm.f16.u32")
    rng = np.random.default_rng(8)
    n = 256
    f = (rng.standard_normal(n) * 10.0 ** rng.integers(0, 5, n)).astype(np.float32)
    f = np.clip(f, -60000, 60000)
    f[:6] = [0.5, 1.5, 2.5, -2.5, 40000.0, -40000.0]
    x = rng.integers(-(2**20), 2**20, size=n, dtype=np.int64).astype(np.int32)
    x[:5] = [2049, 2051, 65519, 65520, -3]
    out = np.zeros((n, 4), dtype=np.int32)
    h = np.zeros((n, 4), dtype=np.uint16)
    k.module.launch("half_int_cvt", grid=(4, 1, 1), block=(64, 1, 1), args=[f, x, out, h, n])
    for i in range(n):
        hv = _round(float(f[i]), F16)
        expect = [
            round(hv),
            math.trunc(hv),
            min(max(math.floor(hv), -32768), 32767),
            math.ceil(abs(hv)),
        ]
        assert [int(o) for o in out[i]] == expect, (i, hv)
        xi, xu = int(x[i]), int(x[i]) & M32
        expect_bits = [
            _f16_bits(_round(xi, F16, "rn")),
            _f16_bits(_round(xi, F16, "rz")),
            _f16_bits(_round(xu, F16, "rd")),
            _bf16_bits(_round(xi, BF16, "rn")),
        ]
        assert [int(o) for o in h[i]] == expect_bits, (i, xi)


# fp8 formats as (significand bits, smallest subnormal exponent, largest finite value)
E4M3 = (4, -9, 448.0)
E5M2 = (3, -16, 57344.0)


def _fp8_bits(v: float, fmt: tuple[int, int, float], exp_bits: int) -> int:
    """Round-to-nearest-even with saturation to the largest finite value, then encode."""
    bits, min_exp, max_finite = fmt
    r = _round(v, fmt)
    if math.isinf(r):
        r = math.copysign(max_finite, r)  # satfinite
    sign = 0x80 if math.copysign(1.0, r) < 0 else 0
    a = abs(r)
    mbits = bits - 1
    bias = (1 << (exp_bits - 1)) - 1
    min_normal_exp = 1 - bias
    if a == 0:
        return sign
    e = math.frexp(a)[1] - 1
    if e < min_normal_exp:
        return sign | int(a / 2.0**min_exp)
    mant = int((a / 2.0**e - 1) * (1 << mbits))
    return sign | ((e + bias) << mbits) | mant


def test_fp8_conversions(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("fp8.cu", arch)
    if arch == "sm_90":
        k.require("cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.f16x2.e4m3x2")
    rng = np.random.default_rng(9)
    n = 256
    f = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(np.float32)
    f[:8] = [0.0, 448.0, 500.0, -1e6, 2.0**-9, 2.0**-10, 1.0625, 57344.0 * 2]
    q = np.zeros((n, 2), dtype=np.uint8)
    back = np.zeros((n, 2), dtype=np.float32)
    k.module.launch("fp8_cvt", grid=(4, 1, 1), block=(64, 1, 1), args=[f, q, back, n])
    for i in range(n):
        v = float(f[i])
        e4, e5 = _round(v, E4M3), _round(v, E5M2)
        e4 = math.copysign(448.0, e4) if math.isinf(e4) else e4
        e5 = math.copysign(57344.0, e5) if math.isinf(e5) else e5
        assert [int(q[i, 0]), int(q[i, 1])] == [_fp8_bits(v, E4M3, 4), _fp8_bits(v, E5M2, 5)], (
            i,
            v,
        )
        assert [float(back[i, 0]), float(back[i, 1])] == [e4, e5], (i, v)
