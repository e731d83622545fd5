"""Emulator engine: floating-point rounding and special values as the PTX ISA defines them.

Every expected value comes from an independent reference: exact rationals (fractions.Fraction)
rounded by :func:`round_exact`, integers, or the IEEE 754 / PTX rule written out in the test.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import tileopt.emulator as emu
from test_engine_alu import elementwise

MODES = ("rn", "rz", "rm", "rp")
# precision (significand bits), minimum and maximum exponent of each format
FORMATS = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "f16": (11, -14, 15),
           "bf16": (8, -126, 127)}
RAW = {"f64": ("b64", np.uint64), "f32": ("b32", np.uint32), "f16": ("b16", np.uint16),
       "bf16": ("b16", np.uint16)}


# ------------------------------------------------------------------ exact reference


def round_exact(q: Fraction, fmt: str, mode: str) -> float:
    """The nonzero rational *q* rounded to *fmt* in a PTX mode (IEEE 754 4.3): the value as a
    Python float (signed zero when it underflows to zero), +-inf where rounding overflows."""
    p, emin, emax = FORMATS[fmt]
    negative = q < 0
    a = -q if negative else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e += (Fraction(2) ** (e + 1) <= a) - (Fraction(2) ** e > a)  # floor(log2(a))
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    n, r = divmod(a, quantum)
    half = Fraction(quantum, 2)
    up = {"rn": r > half or (r == half and n % 2 == 1), "rz": False,
          "rm": r > 0 and negative, "rp": r > 0 and not negative}[mode]
    v = (n + up) * quantum
    largest = (2**p - 1) * Fraction(2) ** (emax - p + 1)
    if v > largest:  # overflow: to inf unless the mode rounds toward zero there
        if not (mode == "rz" or (mode == "rm" and not negative) or (mode == "rp" and negative)):
            return -math.inf if negative else math.inf
        v = largest
    return -float(v) if negative else float(v)


def to_bits(x: float, fmt: str) -> int:
    """The encoding of a value exactly representable in *fmt*."""
    if fmt == "f64":
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    if fmt == "f16":
        return int(np.array(x, np.float16).view(np.uint16))
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return b >> 16 if fmt == "bf16" else b


def from_bits(b: int, fmt: str) -> float:
    if fmt == "f64":
        return struct.unpack("<d", struct.pack("<Q", b))[0]
    if fmt == "f16":
        return float(np.array(b, np.uint16).view(np.float16))
    return struct.unpack("<f", struct.pack("<I", b << 16 if fmt == "bf16" else b))[0]


def zero_sum(sign_p: bool, sign_z: bool, mode: str) -> float:
    """IEEE 754 6.3: an exact zero sum is -0 if both addends are negative (under
    roundTowardNegative: if either is), +0 otherwise."""
    return -0.0 if ((sign_p or sign_z) if mode == "rm" else (sign_p and sign_z)) else 0.0


def neg(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def ref_fma(a: float, b: float, c: float, fmt: str, mode: str) -> float:
    """fma/mad: a*b + c rounded once (IEEE 754 5.4.1), specials by IEEE's rules."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan  # inf * 0
        p = math.inf if neg(a) == neg(b) else -math.inf
        return math.nan if math.isinf(c) and c != p else p
    if math.isinf(c):
        return c
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        return zero_sum(neg(a) != neg(b), neg(c), mode)
    return round_exact(q, fmt, mode)


def ref_add(a: float, b: float, fmt: str, mode: str) -> float:
    if math.isinf(a) and math.isinf(b) and a != b or math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        return a if math.isinf(a) else b
    q = Fraction(a) + Fraction(b)
    return zero_sum(neg(a), neg(b), mode) if q == 0 else round_exact(q, fmt, mode)


def ref_mul(a: float, b: float, fmt: str, mode: str) -> float:
    if math.isnan(a) or math.isnan(b) or (math.isinf(a) or math.isinf(b)) and (a == 0 or b == 0):
        return math.nan
    sign = -1.0 if neg(a) != neg(b) else 1.0
    if math.isinf(a) or math.isinf(b):
        return sign * math.inf
    if a == 0 or b == 0:
        return math.copysign(0.0, sign)
    return math.copysign(round_exact(Fraction(a) * Fraction(b), fmt, mode), sign)


def ref_div(a: float, b: float, fmt: str, mode: str) -> float:
    if math.isnan(a) or math.isnan(b) or a == b == 0 or math.isinf(a) and math.isinf(b):
        return math.nan
    sign = -1.0 if neg(a) != neg(b) else 1.0
    if math.isinf(a) or b == 0:
        return sign * math.inf
    if math.isinf(b) or a == 0:
        return math.copysign(0.0, sign)
    return math.copysign(round_exact(Fraction(a) / Fraction(b), fmt, mode), sign)


def ref_sqrt(a: float, fmt: str, mode: str) -> float:
    """sqrt: the integer square root of a * 4^600 (at least 2^63, so no rounding boundary lies
    strictly between it and the next integer) stands for the exact root."""
    if math.isnan(a) or a < 0:
        return math.nan
    if a == 0 or math.isinf(a):
        return a
    n = Fraction(a) * Fraction(4) ** 600
    assert n.denominator == 1
    r = math.isqrt(n.numerator)
    root = Fraction(r) if r * r == n else Fraction(2 * r + 1, 2)
    return round_exact(root / Fraction(2) ** 600, fmt, mode)


def assert_bits(got, want: list[float], fmt: str, what: str, inputs) -> None:
    """Bit-exact comparison (any NaN matches a NaN)."""
    for i, (g, w) in enumerate(zip(np.asarray(got).tolist(), want, strict=True)):
        ok = math.isnan(from_bits(g, fmt)) if math.isnan(w) else g == to_bits(w, fmt)
        assert ok, (f"{what}: inputs {[hex(to_bits(x[i], fmt)) for x in inputs]} gave {g:#x}, "
                    f"want {w!r}")


def raw(xs: list[float], fmt: str) -> tuple[str, np.ndarray]:
    t, dt = RAW[fmt]
    return t, np.array([to_bits(x, fmt) for x in xs], dt)


# ------------------------------------------------------------------ f64 operands


def _f64s(rng: np.random.Generator, n: int) -> list[float]:
    """float64 values from every range: small exponents, subnormals, near overflow, specials,
    short significands (exact results and ties)."""
    out = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0, 3.0, 0.1]
    while len(out) < n:
        kind = rng.integers(5)
        e = [rng.integers(-40, 40), rng.integers(-1074, -990), rng.integers(960, 1024),
             rng.integers(-1074, 1024), rng.integers(-3, 3)][kind]
        m = int(rng.integers(1 << 52, 1 << 53))
        if rng.random() < 0.3:
            m &= ~((1 << int(rng.integers(1, 52))) - 1)
        x = math.ldexp(m, int(e) - 52)
        out.append(-x if rng.random() < 0.5 else x)
    return out


def _fma_hard_cases(rng: np.random.Generator, n: int) -> tuple[list, list, list]:
    """a, b, c with a*b + c within an ulp of c's rounding of a chosen target: a power of 2 (the
    binade boundary), a float, a midpoint between floats, or a tiny value (cancellation)."""
    a_s, b_s, c_s = [], [], []
    while len(a_s) < n:
        a = math.ldexp(int(rng.integers(1 << 52, 1 << 53)), int(rng.integers(-60, 10)))
        b = math.ldexp(int(rng.integers(1 << 52, 1 << 53)), int(rng.integers(-60, 10)))
        if rng.random() < 0.5:
            b = math.ldexp(int(rng.integers(1 << 26, 1 << 27)), int(rng.integers(-40, 10)))
        a, b = (-a if rng.random() < 0.5 else a), (-b if rng.random() < 0.5 else b)
        k = math.frexp(a * b)[1] + int(rng.integers(-110, 3))
        kind = rng.integers(3)
        if kind == 0:
            target = Fraction(2) ** k
        elif kind == 1:
            target = (int(rng.integers(1 << 52, 1 << 53)) + Fraction(int(rng.integers(-1, 2)), 2))
            target *= Fraction(2) ** (k - 52)
        else:
            target = Fraction(int(rng.integers(-1, 2))) * Fraction(2) ** (k - 60)
        c = float(target * (1 if rng.random() < 0.5 else -1) - Fraction(a) * Fraction(b))
        if rng.random() < 0.3:
            c = float(np.nextafter(c, math.inf if rng.random() < 0.5 else -math.inf))
        a_s.append(a)
        b_s.append(b)
        c_s.append(c)
    return a_s, b_s, c_s


@pytest.mark.parametrize("mode", MODES)
def test_fma_f64_rounds_once(mode: str) -> None:
    """fma.f64 (PTX ISA: "computes the product of a and b to infinite precision and then adds c
    to this product, again in infinite precision", then rounds once in .rnd); mad.f64 is
    fma.f64. Includes a*b + c where rounding the product first rounds twice."""
    rng = np.random.default_rng(11 + MODES.index(mode))
    a, b, c = _fma_hard_cases(rng, 600)
    for xs in (a, b, c):
        xs += _f64s(rng, 400)
    a += [float.fromhex("0x1.0000000000001p0"), float.fromhex("-0x1.0000000000001p0")]
    b += [float.fromhex("0x1.0000000000002p0"), float.fromhex("-0x1.0000000000001p0")]
    c += [-1.0, float.fromhex("-0x1.0000000000001p0")]
    want = [ref_fma(x, y, z, "f64", mode) for x, y, z in zip(a, b, c, strict=True)]
    for op in ("fma", "mad"):
        got = elementwise(f"{op}.{mode}.f64 %o, %i0, %i1, %i2;",
                          [raw(a, "f64"), raw(b, "f64"), raw(c, "f64")], "b64")
        assert_bits(got, want, "f64", f"{op}.{mode}.f64", (a, b, c))


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_f64_directed_rounding(mode: str) -> None:
    """add/sub/mul/div/sqrt/rcp .rz/.rm/.rp on f64 round the exact result in their direction
    (IEEE 754 4.3.2), overflow to the largest finite value where the direction is toward zero,
    and keep IEEE's special values (signed zeros, inf, NaN)."""
    rng = np.random.default_rng(5)
    a, b = _f64s(rng, 700), _f64s(rng, 700)
    big = 1.7976931348623157e308
    a += [big, -big, 2.0**-1074, 1.0, 1.0, 3.0, 2.0**-537, 0.0, -0.0, 1.5]
    b += [big, -big, 0.5, 3.0, -3.0, 2.0**-1074, 2.0**-537, 0.0, -0.0, -1.5]
    ins = [raw(a, "f64"), raw(b, "f64")]
    cases = {
        "add": lambda x, y: ref_add(x, y, "f64", mode),
        "sub": lambda x, y: ref_add(x, -y, "f64", mode),
        "mul": lambda x, y: ref_mul(x, y, "f64", mode),
        "div": lambda x, y: ref_div(x, y, "f64", mode),
    }
    for op, ref in cases.items():
        got = elementwise(f"{op}.{mode}.f64 %o, %i0, %i1;", ins, "b64")
        assert_bits(got, [ref(x, y) for x, y in zip(a, b, strict=True)], "f64",
                    f"{op}.{mode}.f64", (a, b))
    got = elementwise(f"sqrt.{mode}.f64 %o, %i0;", ins[:1], "b64")
    assert_bits(got, [ref_sqrt(x, "f64", mode) for x in a], "f64", f"sqrt.{mode}.f64", (a,))
    got = elementwise(f"rcp.{mode}.f64 %o, %i0;", ins[:1], "b64")
    assert_bits(got, [ref_div(1.0, x, "f64", mode) for x in a], "f64", f"rcp.{mode}.f64", (a,))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source", ["s64", "u64"])
def test_cvt_f64_from_64_bit_integers(source: str, mode: str) -> None:
    """cvt.{rn,rz,rm,rp}.f64.{s64,u64} rounds the integer once in its mode (__ll2double_rz)."""
    rng = np.random.default_rng(3)
    signed = source == "s64"
    values = [2**53 + 1, 2**63 - 1, 2**54 + 3, 2**60 + 2**7, 2**53, 0, 1, 12345]
    values += [int(v) >> int(s) for v, s in zip(rng.integers(0, 2**63, 120, dtype=np.int64),
                                                rng.integers(0, 12, 120), strict=True)]
    if signed:
        values += [-v for v in values[:60]] + [-(2**63)]
    else:
        values += [2**64 - 1, 2**63 + 2**11 + 1, 2**64 - 2**11]
    x = np.array(values, np.int64 if signed else np.uint64)
    got = elementwise(f"cvt.{mode}.f64.{source} %o, %i0;", [(source, x)], "b64")
    want = [round_exact(Fraction(v), "f64", mode) if v else 0.0 for v in values]
    assert_bits(got, want, "f64", f"cvt.{mode}.f64.{source}", ([float(v) for v in values],))


# ------------------------------------------------------------------ exact zeros under .rm


@pytest.mark.parametrize("fmt", ["f32", "f64"])
def test_exact_zero_sums_are_negative_under_rm(fmt: str) -> None:
    """IEEE 754 6.3: x - x, (+0) + (-0) and an fma whose exact result is 0 give -0 in
    roundTowardNegative and +0 in the other modes; +0 + +0 stays +0 and -0 + -0 stays -0."""
    a = [1.5, 0.0, 0.0, -0.0, -0.0, 2.0**-126, 7.0, 0.0]
    b = [1.5, -0.0, 0.0, -0.0, 0.0, 2.0**-126, 7.0, 5.0]
    fa, fb = [3.0, 0.0, -0.0, 3.0, 0.0, -2.0], [3.0, 5.0, 5.0, -3.0, -0.0, 0.0]
    fc = [-9.0, -0.0, -0.0, 9.0, 0.0, -0.0]
    for mode in MODES:
        got = elementwise(f"sub.{mode}.{fmt} %o, %i0, %i1;", [raw(a, fmt), raw(b, fmt)],
                          RAW[fmt][0])
        assert_bits(got, [ref_add(x, -y, fmt, mode) for x, y in zip(a, b, strict=True)], fmt,
                    f"sub.{mode}", (a, b))
        got = elementwise(f"add.{mode}.{fmt} %o, %i0, %i1;", [raw(a, fmt), raw(b, fmt)],
                          RAW[fmt][0])
        assert_bits(got, [ref_add(x, y, fmt, mode) for x, y in zip(a, b, strict=True)], fmt,
                    f"add.{mode}", (a, b))
        got = elementwise(f"fma.{mode}.{fmt} %o, %i0, %i1, %i2;",
                          [raw(fa, fmt), raw(fb, fmt), raw(fc, fmt)], RAW[fmt][0])
        want = [ref_fma(x, y, z, fmt, mode) for x, y, z in zip(fa, fb, fc, strict=True)]
        assert_bits(got, want, fmt, f"fma.{mode}", (fa, fb, fc))
    got = elementwise(f"sub.rm.{fmt} %o, %i0, %i0;", [raw([1.5], fmt)], RAW[fmt][0])
    assert from_bits(int(got[0]), fmt) == 0 and neg(from_bits(int(got[0]), fmt))


# ------------------------------------------------------------------ cvt


@pytest.mark.parametrize("source", ["f16", "bf16", "f32", "f64"])
def test_cvt_float_to_int_of_nan(source: str) -> None:
    """PTX ISA, cvt Integer Notes: NaN converts to 0 if the source is not .f64 and the
    destination is not 64-bit; otherwise to 1 << (width - 1) (MININT for signed types)."""
    nan = {"f16": 0x7E00, "bf16": 0x7FC1, "f32": 0x7FC00000, "f64": 0x7FF8000000000001}[source]
    t, dt = RAW[source]
    x = np.array([nan, nan | (1 << (8 * np.dtype(dt).itemsize - 1))], dt)
    for dest, width in (("u16", 16), ("s16", 16), ("u32", 32), ("s32", 32), ("u64", 64),
                        ("s64", 64)):
        for irnd in ("rni", "rzi", "rmi", "rpi"):
            got = elementwise(f"cvt.{irnd}.{dest}.{source} %o, %i0;", [(t, x)], f"b{width}")
            want = 0 if source != "f64" and width < 64 else 1 << (width - 1)
            assert got.tolist() == [want, want], (dest, source, irnd)


@pytest.mark.parametrize("dest", ["f16", "bf16"])
def test_cvt_satfinite(dest: str) -> None:
    """.satfinite: an input above the destination's largest finite value (MAX_NORM) in
    magnitude, infinities included, gives MAX_NORM with its sign; NaN stays NaN. Otherwise the
    conversion rounds as without it."""
    p, _, emax = FORMATS[dest]
    largest = float((2**p - 1) * Fraction(2) ** (emax - p + 1))
    x = [1e6, -1e6, math.inf, -math.inf, math.nan, largest, -largest, 1.5, -2.0**-20,
         float(np.nextafter(np.float32(largest), np.float32(np.inf))) if dest == "f16" else 0.0,
         65519.0, 65520.0, float.fromhex("0x1.fffffep127"), 3.0e38]
    x32 = np.array(x, np.float32)
    x = [float(v) for v in x32]
    for mode in ("rn", "rz"):
        def want(v: float, mode: str = mode) -> float:
            if math.isnan(v) or v == 0:
                return v
            return max(-largest, min(largest, v if math.isinf(v)
                                     else round_exact(Fraction(v), dest, mode)))
        got = elementwise(f"cvt.{mode}.satfinite.{dest}.f32 %o, %i0;", [("f32", x32)], "b16")
        assert_bits(got, [want(v) for v in x], dest, f"cvt.{mode}.satfinite.{dest}", (x,))
        got = elementwise(f"cvt.{mode}.satfinite.{dest}x2.f32 %o, %i0, %i1;",
                          [("f32", x32), ("f32", x32[::-1].copy())], "b32")
        assert_bits(got >> np.uint32(16), [want(v) for v in x], dest, "upper half (a)", (x,))
        assert_bits(got & np.uint32(0xFFFF), [want(v) for v in x[::-1]], dest,
                    "lower half (b)", (x[::-1],))


def test_cvt_sat_int_to_f16() -> None:
    """cvt .sat on a floating-point destination clamps to [0.0, 1.0] (it applies to .f16, .f32
    and .f64): integers below 1 give 0, the others 1."""
    x = np.array([5, -3, 0, 1, 2**31 - 1, -(2**31), 65536 * 4], np.int32)
    for source, vals in (("s32", x), ("u32", x.view(np.uint32)), ("s64", x.astype(np.int64))):
        got = elementwise(f"cvt.rn.sat.f16.{source} %o, %i0;", [(source, vals)], "b16")
        want = [min(max(int(v), 0), 1) for v in vals]
        assert got.tolist() == [to_bits(float(v), "f16") for v in want], source


def test_relu_gives_the_canonical_nan() -> None:
    """.relu on an f16 or f16x2 result: negative -> 0, NaN -> the canonical NaN 0x7FFF (cvt
    and fma Notes); bf16 likewise."""
    x = np.array([0x7FC00000, 0xFFC12345, 0x7F800001, 0xBF800000, 0x3F800000], np.uint32)
    xf = [from_bits(int(v), "f32") for v in x]
    want16 = [0x7FFF if math.isnan(v) else to_bits(max(v, 0.0), "f16") for v in xf]
    got = elementwise("cvt.rn.relu.f16.f32 %o, %i0;", [("b32", x)], "b16")
    assert got.tolist() == want16
    got = elementwise("cvt.rn.relu.f16x2.f32 %o, %i0, %i1;", [("b32", x), ("b32", x[::-1].copy())],
                      "b32")
    assert (got >> np.uint32(16)).tolist() == want16
    assert (got & np.uint32(0xFFFF)).tolist() == want16[::-1]
    # fma: inf * 0 and -inf * 1 + inf are NaN, a NaN input too; -2 * 1 + 0 is negative
    for t in ("f16", "bf16"):
        inf, nan, one, m2 = {"f16": (0x7C00, 0x7E01, 0x3C00, 0xC000),
                             "bf16": (0x7F80, 0x7FC1, 0x3F80, 0xC000)}[t]
        a, b, c = (np.array(v, np.uint16) for v in ([inf, inf | 0x8000, m2, nan, one],
                                                    [0, one, one, one, one],
                                                    [0, inf, 0, 0, one]))
        want = [0x7FFF, 0x7FFF, 0x0000, 0x7FFF, to_bits(2.0, t)]
        got = elementwise(f"fma.rn.relu.{t} %o, %i0, %i1, %i2;",
                          [("b16", a), ("b16", b), ("b16", c)], "b16")
        assert got.tolist() == want, t
        pack = [("b32", v.astype(np.uint32) | (v[::-1].astype(np.uint32) << np.uint32(16)))
                for v in (a, b, c)]
        got = elementwise(f"fma.rn.relu.{t}x2 %o, %i0, %i1, %i2;", pack, "b32")
        assert (got & np.uint32(0xFFFF)).tolist() == want, t
        assert (got >> np.uint32(16)).tolist() == want[::-1], t


# ------------------------------------------------------------------ f16 .ftz


def _f16_operands(rng: np.random.Generator, n: int) -> list[float]:
    """f16 values, a third of them subnormal."""
    bits = rng.integers(0, 1 << 16, n).astype(np.uint16)
    sub = rng.random(n) < 0.35
    bits[sub] &= np.uint16(0x83FF)
    vals = [from_bits(int(v), "f16") for v in bits]
    return [v for v in vals if not math.isnan(v)]


def flush16(x: float) -> float:
    """PTX .ftz on f16: a subnormal becomes a zero of its sign."""
    return math.copysign(0.0, x) if x != 0 and abs(x) < 2.0**-14 else x


@pytest.mark.parametrize("packed", [False, True])
def test_f16_ftz_flushes_inputs_and_results(packed: bool) -> None:
    """add/sub/mul/fma/min/max .ftz.{f16,f16x2}: "flushes subnormal inputs and results to
    sign-preserving zero": the inputs are flushed, the operation rounds (to nearest even),
    then a subnormal result is flushed."""
    rng = np.random.default_rng(17)
    n = 512
    a, b, c = (_f16_operands(rng, n) for _ in range(3))
    m = min(len(a), len(b), len(c)) & ~1
    a, b, c = a[:m], b[:m], c[:m]
    fa, fb, fc = ([flush16(v) for v in xs] for xs in (a, b, c))

    def ref_min(x: float, y: float, is_min: bool) -> float:  # -0 < +0
        if x == y == 0:
            negative = (neg(x) or neg(y)) if is_min else (neg(x) and neg(y))
            return -0.0 if negative else 0.0
        return min(x, y) if is_min else max(x, y)

    cases = {
        "add.rn.ftz": lambda i: ref_add(fa[i], fb[i], "f16", "rn"),
        "sub.rn.ftz": lambda i: ref_add(fa[i], -fb[i], "f16", "rn"),
        "mul.rn.ftz": lambda i: ref_mul(fa[i], fb[i], "f16", "rn"),
        "fma.rn.ftz": lambda i: ref_fma(fa[i], fb[i], fc[i], "f16", "rn"),
        "min.ftz": lambda i: ref_min(fa[i], fb[i], True),
        "max.ftz": lambda i: ref_min(fa[i], fb[i], False),
    }
    for op, ref in cases.items():
        nargs = 3 if op.startswith("fma") else 2
        want = [flush16(ref(i)) for i in range(m)]
        operands = (a, b, c)[:nargs]
        args = ", ".join(f"%i{k}" for k in range(nargs))
        if packed:
            ins = [("b32", raw(xs, "f16")[1].view(np.uint32)) for xs in operands]
            got = elementwise(f"{op}.f16x2 %o, {args};", ins, "b32")
            got = np.ascontiguousarray(got).view(np.uint16)
        else:
            got = elementwise(f"{op}.f16 %o, {args};", [raw(xs, "f16") for xs in operands], "b16")
        assert_bits(got, want, "f16", f"{op}.f16{'x2' if packed else ''}", operands)


def test_f16_ftz_comparisons_and_sign_ops() -> None:
    """setp.ftz.{f16,f16x2} flushes subnormal inputs (a positive subnormal equals -0);
    abs.ftz/neg.ftz flush the input and result."""
    a = [2.0**-24, -(2.0**-20), 2.0**-14, -(2.0**-15), 1.0, -0.0]
    b = [0.0, -0.0, 0.0, 0.0, 1.0, 2.0**-24]
    ins = [raw(a, "f16"), raw(b, "f16")]
    for cmp, f in (("eq", lambda x, y: x == y), ("lt", lambda x, y: x < y),
                   ("gt", lambda x, y: x > y)):
        want = [int(f(flush16(x), flush16(y))) for x, y in zip(a, b, strict=True)]
        got = elementwise(f"setp.{cmp}.ftz.f16 %p1, %i0, %i1;\n selp.u32 %o, 1, 0, %p1;", ins,
                          "u32")
        assert got.tolist() == want, cmp
        packed = [("b32", v[1].view(np.uint32)) for v in ins]
        got = elementwise(f"setp.{cmp}.ftz.f16x2 %p1|%p2, %i0, %i1;\n selp.u32 %r1, 1, 0, %p1;\n"
                          " selp.u32 %r2, 2, 0, %p2;\n or.b32 %o, %r1, %r2;", packed, "u32")
        assert got.tolist() == [want[k] | 2 * want[k + 1] for k in range(0, len(a), 2)], cmp
    for op, f in (("abs", abs), ("neg", lambda x: -x)):
        want = [flush16(f(flush16(x))) for x in a]
        got = elementwise(f"{op}.ftz.f16 %o, %i0;", ins[:1], "b16")
        assert_bits(got, want, "f16", f"{op}.ftz.f16", (a,))
        got = elementwise(f"{op}.ftz.f16x2 %o, %i0;", [("b32", ins[0][1].view(np.uint32))], "b32")
        assert_bits(np.ascontiguousarray(got).view(np.uint16), want, "f16", f"{op}.ftz.f16x2",
                    (a,))


# ------------------------------------------------------------------ min/max .NaN


def test_min_max_nan_give_the_canonical_nan() -> None:
    """min/max .NaN: "the result is canonical NaN if either of the inputs is NaN" (0x7FFFFFFF
    for f32, 0x7FFF for f16, per lane for f16x2, bf16 alike), with .xorsign.abs too; otherwise
    the minimum/maximum (-0 < +0)."""
    f32 = [0x7FC00001, 0x3F800000, 0xFFC00003, 0x7F800001, 0x40000000]
    g32 = [0x3F800000, 0xFFC00003, 0x7FC00005, 0xBF800000, 0xC0400000]
    for fmt, a, b, canon in (("f32", f32, g32, 0x7FFFFFFF),
                             ("f16", [0x7E01, 0x3C00, 0xFE03, 0x7C01, 0x4000],
                              [0x3C00, 0xFE03, 0x7E05, 0xBC00, 0xC200], 0x7FFF),
                             ("bf16", [0x7FC1, 0x3F80, 0xFFC3, 0x7F81, 0x4000],
                              [0x3F80, 0xFFC3, 0x7FC5, 0xBF80, 0xC040], 0x7FFF)):
        xa, xb = ([from_bits(v, fmt) for v in s] for s in (a, b))
        t, dt = RAW[fmt]
        ins = [(t, np.array(a, dt)), (t, np.array(b, dt))]
        for op, f in (("min", min), ("max", max)):
            for mods, g in (("", lambda x, y, f=f: f(x, y)),
                            (".xorsign.abs", lambda x, y, f=f: math.copysign(
                                f(abs(x), abs(y)), -1.0 if neg(x) != neg(y) else 1.0))):
                want = [canon if math.isnan(x) or math.isnan(y) else to_bits(g(x, y), fmt)
                        for x, y in zip(xa, xb, strict=True)]
                got = elementwise(f"{op}.NaN{mods}.{fmt} %o, %i0, %i1;", ins, t)
                assert got.tolist() == want, (op, mods, fmt)
                if fmt != "f32":
                    lo, hi = (np.array(s, np.uint32) for s in (a, b))
                    pk = [("b32", lo | (hi << np.uint32(16))), ("b32", hi | (lo << np.uint32(16)))]
                    got = elementwise(f"{op}.NaN{mods}.{fmt}x2 %o, %i0, %i1;", pk, "b32")
                    assert (got & np.uint32(0xFFFF)).tolist() == want, (op, mods, fmt)


@pytest.mark.parametrize("mods", [".NaN", ".xorsign.abs"])
def test_min_max_f64_has_no_nan_or_xorsign(mods: str) -> None:
    """The PTX ISA's only f64 form is `min.f64 d, a, b` (likewise max): no .NaN, .xorsign."""
    with pytest.raises(emu.PTXLoadError, match="f64"):
        elementwise(f"min{mods}.f64 %o, %i0, %i1;", [raw([1.0], "f64")] * 2, "b64")


# ------------------------------------------------------------------ approximations


def test_div_approx_with_a_divisor_beyond_2_to_126() -> None:
    """div.approx.f32 (and .ftz): "For 2^126 < |b| < 2^128, if a is infinity, div.approx.f32
    returns NaN, otherwise it returns a sign-preserving zero" (the sign of a / b)."""
    a = [1.0, -1.0, 3.0, math.inf, -math.inf, 0.0, 5.0, 1e30]
    b = [2.0**127, 2.0**127, -(1.5 * 2.0**126), 2.0**127, -(2.0**127), -(2.0**127),
         float(np.nextafter(np.float32(2.0**126), np.float32(np.inf))), 3.4e38]
    ins = [("f32", np.array(a, np.float32)), ("f32", np.array(b, np.float32))]
    for op in ("div.approx.f32", "div.approx.ftz.f32"):
        got = elementwise(f"{op} %o, %i0, %i1;", ins, "b32")
        want = [math.nan if math.isinf(x) else -0.0 if neg(x) != neg(y) else 0.0
                for x, y in zip(a, b, strict=True)]
        assert_bits(got, want, "f32", op, (a, b))
    # |b| = 2^126 is in the ordinary range: a * (1/b), within 2 ulp
    got = elementwise("div.approx.f32 %o, %i0, %i1;",
                      [("f32", np.array([3.0], np.float32)),
                       ("f32", np.array([2.0**126], np.float32))], "f32")
    assert got[0] == np.float32(3.0 * 2.0**-126)


def test_slct_ftz_flushes_c() -> None:
    """slct.ftz.dtype.f32: a subnormal c is flushed to a zero of its sign, and a is selected
    (-0 >= 0); without .ftz a negative subnormal selects b; NaN selects b."""
    c = [-1e-40, 1e-40, -0.0, -1.0, math.nan, 2.0]
    cs = ("f32", np.array(c, np.float32))
    for mods, flush in ((".ftz", True), ("", False)):
        for t in ("u32", "s32", "f32"):
            ab = "0f3F800000, 0f40000000" if t == "f32" else "1, 2"
            got = elementwise(f"slct{mods}.{t}.f32 %o, {ab}, %i0;", [cs], "b32")
            cf = [math.copysign(0.0, v) if flush and v != 0 and abs(v) < 2.0**-126 else v
                  for v in (float(np.float32(v)) for v in c)]
            sel = [v >= 0 for v in cf]  # NaN compares false
            one, two = (1, 2) if t != "f32" else (to_bits(1.0, "f32"), to_bits(2.0, "f32"))
            assert got.tolist() == [one if s else two for s in sel], (mods, t)


@pytest.mark.parametrize("op", ["rcp", "rsqrt"])
def test_rcp_rsqrt_approx_ftz_f64(op: str) -> None:
    """rcp.approx.ftz.f64 / rsqrt.approx.ftz.f64: computed from the upper word of a (its low
    32 bits ignored), the low 32 bits of d zero, subnormal inputs and results flushed to a
    zero of their sign (so +-subnormal -> +-inf), NaN -> 0x7FFFFFFF00000000, and the ISA's
    table for -inf, +-0 and +inf."""
    f = (lambda x: 1 / x) if op == "rcp" else (lambda x: 1 / math.sqrt(x))
    normal = [3.0, 0.1, 7.5e10, 2.0**-1000, 1.0 + 2.0**-30]
    if op == "rcp":
        normal += [-3.0, 1e308, -(2.0**1023)]  # 1/1e308 is subnormal: flushed
    x = normal + [math.inf, -0.0, 0.0, 1e-310, -1e-310, math.nan, -math.inf]
    bits = raw(x, "f64")[1]
    bits[0] |= np.uint64(0xFFFFFFFF)  # ignored
    got = elementwise(f"{op}.approx.ftz.f64 %o, %i0;", [("b64", bits)], "b64").tolist()
    assert all(g & 0xFFFFFFFF == 0 for g in got)
    for g, v in zip(got[:len(normal)], normal, strict=True):
        want = f(v)
        if abs(want) < 2.0**-1022:
            assert g == to_bits(math.copysign(0.0, want), "f64"), v
        else:
            assert abs(from_bits(g, "f64") - want) <= abs(want) * 2.0**-19, v
    # (None: the canonical NaN; nan: a NaN)
    specials = {"rcp": [0.0, -math.inf, math.inf, math.inf, -math.inf, None, -0.0],
                "rsqrt": [0.0, -math.inf, math.inf, math.inf, -math.inf, None, math.nan]}[op]
    for g, w, v in zip(got[len(normal):], specials, x[len(normal):], strict=True):
        if w is None:
            assert g == 0x7FFFFFFF00000000, v
        else:
            assert math.isnan(from_bits(g, "f64")) if math.isnan(w) else g == to_bits(w, "f64"), v
