"""Numeric helpers: PTX types, rounding modes and the f16/bf16/tf32 conversions."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# PTX fundamental types -> (bit width, kind).  kind: u, s, b (bits), f (float), p (predicate)
TYPES: dict[str, tuple[int, str]] = {
    "pred": (1, "p"),
    "b8": (8, "b"),
    "b16": (16, "b"),
    "b32": (32, "b"),
    "b64": (64, "b"),
    "b128": (128, "b"),
    "u8": (8, "u"),
    "u16": (16, "u"),
    "u32": (32, "u"),
    "u64": (64, "u"),
    "s8": (8, "s"),
    "s16": (16, "s"),
    "s32": (32, "s"),
    "s64": (64, "s"),
    "f16": (16, "f"),
    "bf16": (16, "f"),
    "f32": (32, "f"),
    "f64": (64, "f"),
    "tf32": (32, "f"),
    "f16x2": (32, "f"),
    "bf16x2": (32, "f"),
    "e4m3": (8, "f"),
    "e5m2": (8, "f"),
    "e4m3x2": (16, "f"),
    "e5m2x2": (16, "f"),
}

UINT = {
    8: np.dtype(np.uint8),
    16: np.dtype(np.uint16),
    32: np.dtype(np.uint32),
    64: np.dtype(np.uint64),
}
SINT = {
    8: np.dtype(np.int8),
    16: np.dtype(np.int16),
    32: np.dtype(np.int32),
    64: np.dtype(np.int64),
}
FLOAT = {"f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}


def type_width(t: str) -> int:
    """Bit width of a PTX type name (``pred`` is 1)."""
    return TYPES[t][0]


def np_dtype(t: str) -> np.dtype:
    """The numpy dtype that holds values of PTX type *t* (bf16 and packed types as raw bits)."""
    w, k = TYPES[t]
    if k == "p":
        return np.dtype(np.bool_)
    if k == "s":
        return SINT[w]
    if t in FLOAT:
        return FLOAT[t]
    return UINT[w]


# ---------------------------------------------------------------- rounding


def _nextafter_dir(y: np.ndarray, err: np.ndarray, mode: str) -> np.ndarray:
    """Fix a round-to-nearest result *y* whose exact value is ``y + err`` for a directed mode:
    only the sign of *err* counts (NaN: exact)."""
    if mode == "rz":
        bad = ((err < 0) & (y > 0)) | ((err > 0) & (y < 0))
        tgt = np.zeros((), y.dtype)
    elif mode == "rm":
        bad = err < 0
        tgt = np.array(-np.inf, y.dtype)
    elif mode == "rp":
        bad = err > 0
        tgt = np.array(np.inf, y.dtype)
    else:
        return y
    if np.count_nonzero(bad):
        with np.errstate(over="ignore"):  # (the largest finite value steps to inf)
            y = np.where(bad, np.nextafter(y, tgt), y)
    return y


def _round_to(x: np.ndarray, dtype: type, mode: str) -> np.ndarray:
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # (overflow; inf - inf: exact)
        y = x.astype(dtype)
        if mode in ("rn", ""):
            return y
        return _nextafter_dir(y, x - y.astype(np.float64), mode)


def round_to_f32(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float64 values to float32 with a PTX rounding mode (rn, rz, rm, rp, rna)."""
    return _round_to(x, np.float32, mode)


def round_to_f16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float64 values to float16 with a PTX rounding mode."""
    return _round_to(x, np.float16, mode)


def f32_bits_to_bf16(b: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float32 bit patterns (uint32) to bfloat16 bit patterns (uint16)."""
    b = np.asarray(b, np.uint32)
    mag = b & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    sign = b >> np.uint32(31)
    if mode in ("rn", ""):
        r = (
            b.astype(np.uint64) + np.uint64(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))
        ) >> np.uint64(16)
        r = r.astype(np.uint32)
    else:
        r = b >> np.uint32(16)
        low = (b & np.uint32(0xFFFF)) != 0
        if mode == "rp":
            r = r + (low & (sign == 0)).astype(np.uint32)
        elif mode == "rm":
            r = r + (low & (sign == 1)).astype(np.uint32)
    r = np.where(nan, np.uint32(0x7FFF), r)
    return r.astype(np.uint16)


def f32_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float32 values to bfloat16 bits (uint16)."""
    return f32_bits_to_bf16(np.asarray(x, np.float32).view(np.uint32), mode)


def f64_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float64 values to bfloat16 bits, exactly (round-to-odd via float32)."""
    x = np.asarray(x, np.float64)
    t = round_to_f32(x, "rz")
    inexact = (t.astype(np.float64) != x) & np.isfinite(t)
    b = t.view(np.uint32) | inexact.astype(np.uint32)
    return f32_bits_to_bf16(b, mode)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = a + b`` rounded to nearest and its error, ``a + b == s + e``
    exactly unless an operation overflowed (then *e* is inf or NaN)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def add_to_odd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` in float64 rounded to odd: where inexact, the neighbour whose last bit is set.
    Rounding that once more to at most 51 significant bits, in any mode, rounds ``a + b`` once."""
    s, err = two_sum(a, b)
    inexact = (err != 0) & np.isfinite(s)
    if not np.count_nonzero(inexact):
        return s
    even = (np.asarray(s).view(np.uint64) & np.uint64(1)) == 0
    return np.where(inexact & even, np.nextafter(s, np.copysign(np.inf, err)), s)


def _int_halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit integer as two float64 of at most 32 significant bits each (both exact)."""
    low = np.array(0xFFFFFFFF, x.dtype)
    return (x & ~low).astype(np.float64), (x & low).astype(np.float64)


def int_to_f64_odd(x: np.ndarray) -> np.ndarray:
    """Integers as float64, rounded to odd where 64-bit ones are inexact (the last bit of the
    nearer-to-zero neighbour set), so that rounding the result once more to a format of at
    most 51 significant bits (f32, f16, bf16), in any mode, rounds the integer once."""
    x = np.asarray(x)
    if x.dtype.itemsize < 8:
        return x.astype(np.float64)
    return add_to_odd(*_int_halves(x))


def int_to_f64(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Integers as float64 rounded once in a PTX mode (rn, rz, rm, rp)."""
    x = np.asarray(x)
    if x.dtype.itemsize < 8 or mode in ("rn", ""):
        return x.astype(np.float64)
    return _nextafter_dir(*two_sum(*_int_halves(x)), mode)


# ---------------------------------------------------------------- exact float64 arithmetic
# numpy's float64 + - * / and sqrt round to nearest even. fma, and the directed modes of
# all of them, come from a round-to-nearest result and the sign of its exact error, given by
# error-free transforms (TwoSum, Dekker's TwoProduct) where they are exact: everywhere but
# where an intermediate overflows (its inf or NaN reaches the error) or a product's error
# underflows. Those rare elements are computed with fractions.Fraction.

_SPLIT = 2.0**27 + 1  # Veltkamp's splitter for 53-bit significands
_TINY = 2.0**-968  # |a*b| at least: the error of the product is a float (e_a + e_b >= -970)


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct with Veltkamp's split: ``p = a * b`` rounded to nearest and its
    error, ``a * b == p + e`` exactly unless *e* is not finite or :func:`_prod_underflow`."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    t = _SPLIT * b
    bh = t - (t - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _prod_underflow(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Where the error of the product ``p`` of nonzero *a* and *b* may not be a float."""
    tiny = np.abs(p) < _TINY
    if np.count_nonzero(tiny):
        tiny &= (a != 0) & (b != 0)
    return tiny


def zero_sum_sign(s: np.ndarray, p: np.ndarray, z: np.ndarray, mode: str,
                  zero: np.ndarray | None = None) -> np.ndarray:
    """IEEE 754 6.3: an exact zero sum ``p + z`` (where *zero*, by default ``s == 0``) is -0
    when both addends are negative, or under .rm when either is, and +0 otherwise."""
    if zero is None:
        zero = s == 0
    if not np.count_nonzero(zero):
        return s
    sp, sz = np.signbit(p), np.signbit(z)
    neg = (sp | sz) if mode == "rm" else (sp & sz)
    return np.where(zero, np.where(neg, -0.0, 0.0), s)


def _fallback(y, err, lanes, fn, *xs) -> tuple[np.ndarray, np.ndarray]:
    """*y* and *err* with, on *lanes*, the nearest float64 to the exact value ``fn(*xs)`` (in
    Fraction arithmetic) and the sign of its error."""
    shape = np.broadcast_shapes(np.shape(y), *(np.shape(x) for x in xs))
    y, err = (np.array(np.broadcast_to(v, shape), np.float64) for v in (y, err))
    xs = [np.broadcast_to(x, shape) for x in xs]
    for i in np.flatnonzero(np.broadcast_to(lanes, shape)):
        q = fn(*(Fraction(float(x.flat[i])) for x in xs))
        try:
            f = float(q)  # rounded to nearest even, subnormals included
        except OverflowError:
            f = math.inf if q > 0 else -math.inf
        y.flat[i] = f
        err.flat[i] = -f if math.isinf(f) else (q > f) - (q < f)
    return y, err


def _finite(*xs) -> np.ndarray:
    r = np.isfinite(xs[0])
    for x in xs[1:]:
        r = r & np.isfinite(x)
    return r


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str = "rn") -> np.ndarray:
    """``a * b + c`` rounded once to float64 (Boldo and Melquiond's emulation: with the exact
    product ``a * b == uh + ul`` and sum ``c + uh == th + tl``, ``th + RO(tl + ul)`` rounds as
    ``a * b + c`` does, in every mode; RO: :func:`add_to_odd`)."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        uh, ul = two_prod(a, b)
        th, tl = two_sum(c, uh)
        y, err = two_sum(th, add_to_odd(tl, ul))
        bad = ~np.isfinite(err) | _prod_underflow(a, b, uh)
        if np.count_nonzero(bad):
            special = ~_finite(a, b, c)  # IEEE's exact results (c = inf, a * b finite: c)
            y = np.where(special, np.where(_finite(a, b), c, a * b + c), y)
            err = np.where(special, 0.0, err)
            y, err = _fallback(y, err, bad & ~special, lambda a, b, c: a * b + c, a, b, c)
        zero = y == 0
        if np.count_nonzero(zero):
            y = zero_sum_sign(y, a * b, c, mode, zero & (err == 0))
    return _nextafter_dir(y, err, mode)


def add_f64(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """``a + b`` rounded to float64 in a PTX mode (rn, rz, rm, rp)."""
    a, b = (np.asarray(x, np.float64) for x in (a, b))
    with np.errstate(all="ignore"):
        y, err = two_sum(a, b)
        bad = ~np.isfinite(err)
        if np.count_nonzero(bad):
            special = ~_finite(a, b)
            err = np.where(special, 0.0, err)
            y, err = _fallback(y, err, bad & ~special, lambda a, b: a + b, a, b)
        y = zero_sum_sign(y, a, b, mode)
    return _nextafter_dir(y, err, mode)


def mul_f64(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """``a * b`` rounded to float64 in a PTX mode."""
    a, b = (np.asarray(x, np.float64) for x in (a, b))
    with np.errstate(all="ignore"):
        y, err = two_prod(a, b)
        bad = ~np.isfinite(err) | _prod_underflow(a, b, y)
        if np.count_nonzero(bad):
            special = ~_finite(a, b) | (a == 0) | (b == 0)
            err = np.where(special, 0.0, err)
            y, err = _fallback(y, err, bad & ~special, lambda a, b: a * b, a, b)
    return _nextafter_dir(y, err, mode)


def div_f64(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """``a / b`` rounded to float64 in a PTX mode: the error of ``q = a / b`` has the sign of
    ``(a - q * b) / b``, where ``a - ph`` is exact for ``q * b == ph + pl`` (Sterbenz) when q
    is normal."""
    a, b = (np.asarray(x, np.float64) for x in (a, b))
    with np.errstate(all="ignore"):
        y = a / b
        ph, pl = two_prod(y, b)
        d = a - ph
        err = np.where(b < 0, pl - d, d - pl)
        bad = ~np.isfinite(err) | (np.abs(y) < 2.0**-1022) | (np.abs(ph) < _TINY)
        if np.count_nonzero(bad):
            special = ~_finite(a, b) | (a == 0) | (b == 0)
            err = np.where(special, 0.0, err)
            y, err = _fallback(y, err, bad & ~special, lambda a, b: a / b, a, b)
    return _nextafter_dir(y, err, mode)


def sqrt_f64(a: np.ndarray, mode: str) -> np.ndarray:
    """``sqrt(a)`` rounded to float64 in a PTX mode: the error of ``s`` has the sign of
    ``a - s * s``, with *a* scaled by an even power of 2 so that ``s * s`` is exact (the root
    of a float64 is a normal number, so the scaling does not change its rounding)."""
    a = np.asarray(a, np.float64)
    k = np.where(a < 2.0**-900, 300, np.where(a > 2.0**900, -300, 0))
    with np.errstate(all="ignore"):
        a2 = np.ldexp(a, 2 * k)
        y = np.sqrt(a2)
        ph, pl = two_prod(y, y)
        err = np.where(_finite(a) & (a > 0), (a2 - ph) - pl, 0.0)
    return np.ldexp(_nextafter_dir(y, err, mode), -k)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen bfloat16 bit patterns (uint16) to float32 exactly."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_tf32(x: np.ndarray, mode: str = "rna") -> np.ndarray:
    """Round float32 to tf32 (10 mantissa bits) kept in a float32 container."""
    b = np.asarray(x, np.float32).view(np.uint32)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if mode == "rz":
        r = b & np.uint32(0xFFFFE000)
    elif mode == "rn":
        r = ((b.astype(np.uint64) + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    else:  # rna: ties away from zero
        r = ((b.astype(np.uint64) + 0x1000) & 0xFFFFE000).astype(np.uint32)
    r = np.where(nan, b, r)
    return r.view(np.float32)


def round_integral(x: np.ndarray, mode: str) -> np.ndarray:
    """Round to an integral value: rni (nearest even), rzi, rmi, rpi."""
    if mode == "rni":
        return np.rint(x)
    if mode == "rzi":
        return np.trunc(x)
    if mode == "rmi":
        return np.floor(x)
    if mode == "rpi":
        return np.ceil(x)
    raise ValueError(mode)


def ftz32(x: np.ndarray) -> np.ndarray:
    """Flush float32 subnormals to sign-preserving zero."""
    return _flush(x, np.float32(1.1754944e-38))


def ftz16(x: np.ndarray) -> np.ndarray:
    """Flush f16 subnormals (values held in any float dtype) to sign-preserving zero."""
    return _flush(x, 2.0**-14)


def ftz64(x: np.ndarray) -> np.ndarray:
    """Flush float64 subnormals to sign-preserving zero."""
    return _flush(x, 2.0**-1022)


def _flush(x: np.ndarray, tiny) -> np.ndarray:
    x = np.asarray(x)
    sub = np.abs(x) < tiny
    if np.count_nonzero(sub & (x != 0)):
        return np.where(sub, np.copysign(x.dtype.type(0), x), x)
    return x


# The canonical NaN of PTX (.NaN, .relu): bf16 rounding (f32_bits_to_bf16) already gives it.
_CANONICAL_NAN = {
    "f32": np.array(0x7FFFFFFF, np.uint32).view(np.float32),
    "f16": np.array(0x7FFF, np.uint16).view(np.float16),
}


def canonical_nan(v: np.ndarray, t: str) -> np.ndarray:
    """Register values of PTX float type *t* (f32, f16, f16x2; others as they are) with every
    NaN replaced by the canonical NaN (per lane for f16x2)."""
    if t == "f16x2":
        h = np.ascontiguousarray(np.atleast_1d(v)).view(np.float16)
        return canonical_nan(h, "f16").view(np.uint32).reshape(np.shape(v))
    nan = _CANONICAL_NAN.get(t)
    if nan is None:
        return v
    isnan = np.isnan(v)
    return np.where(isnan, nan, v) if np.any(isnan) else v


MAX_FINITE = {"f16": 65504.0, "bf16": float.fromhex("0x1.fep127"),
              "tf32": float.fromhex("0x1.ffcp127")}


def satfinite(x: np.ndarray, t: str) -> np.ndarray:
    """cvt's .satfinite: magnitudes above the largest finite value of *t* (infinities too)
    become it, with their sign; NaN stays NaN."""
    return np.clip(x, -MAX_FINITE[t], MAX_FINITE[t])


def sat01(x: np.ndarray) -> np.ndarray:
    """PTX .sat for floats: clamp to [0, 1], NaN -> 0."""
    return np.nan_to_num(np.clip(x, 0, 1), nan=0.0).astype(x.dtype, copy=False)


# float <-> float of a named PTX float type, through float64


def to_f64(v: np.ndarray, t: str) -> np.ndarray:
    """Interpret values of PTX float type *t* (as stored by the emulator) as float64."""
    if t == "bf16":
        return bf16_to_f32(v).astype(np.float64)
    return np.asarray(v).astype(np.float64)


def from_f64(x: np.ndarray, t: str, mode: str = "rn") -> np.ndarray:
    """Round float64 values to PTX float type *t* (bf16 as bits)."""
    if t == "f64":
        return np.asarray(x, np.float64)
    if t == "f32":
        return round_to_f32(x, mode)
    if t == "f16":
        return round_to_f16(x, mode)
    if t == "bf16":
        return f64_to_bf16(x, mode)
    if t == "tf32":
        return f32_to_tf32(
            round_to_f32(x, "rz" if mode == "rz" else "rn"), "rna" if mode == "rna" else mode
        )
    raise ValueError(t)


def select(cond, a, b):
    """``np.where(cond, a, b)`` for arrays, branch-free (np.where is slow on random masks)."""
    cond = np.asarray(cond)
    if cond.ndim == 0:
        return a if bool(cond) else b
    a = np.asarray(a)
    b = np.asarray(b)
    dt = np.result_type(a, b)
    if dt.itemsize not in (1, 2, 4, 8) or dt.kind not in "uifb":
        return np.where(cond, a, b)
    ut = np.dtype(f"u{dt.itemsize}")
    ua = np.ascontiguousarray(np.broadcast_to(a.astype(dt, copy=False), cond.shape)).view(ut)
    ub = np.ascontiguousarray(np.broadcast_to(b.astype(dt, copy=False), cond.shape)).view(ut)
    m = (-cond.astype(np.int8)).astype(ut) if ut.itemsize > 1 else (-cond.astype(np.int8)).view(ut)
    return (ub ^ ((ua ^ ub) & m)).view(dt)


# ---------------------------------------------------------------- fp8 (e4m3, e5m2)

_FP8_TABLES: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _fp8_tables(fmt: str):
    """(value of each code as float64, sorted finite non-negative values, their codes)."""
    t = _FP8_TABLES.get(fmt)
    if t is not None:
        return t
    ebits, mbits, bias = (4, 3, 7) if fmt == "e4m3" else (5, 2, 15)
    vals = np.zeros(256)
    for code in range(256):
        s, e, m = code >> 7, (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
        if fmt == "e4m3" and e == 15 and m == 7:
            v = np.nan
        elif fmt == "e5m2" and e == 31:
            v = np.inf if m == 0 else np.nan
        elif e == 0:
            v = m * 2.0 ** (1 - bias - mbits)
        else:
            v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        vals[code] = -v if s else v
    pos_codes = np.array([c for c in range(128) if np.isfinite(vals[c])])
    t = (vals, vals[pos_codes], pos_codes.astype(np.uint8))
    _FP8_TABLES[fmt] = t
    return t


def to_fp8(x: np.ndarray, fmt: str, relu: bool = False) -> np.ndarray:
    """Round to nearest even into fp8 codes (uint8) with .satfinite (overflow -> max finite)."""
    _, values, codes = _fp8_tables(fmt)
    x = np.asarray(x, np.float64)
    if relu:
        x = np.where(x < 0, 0.0, x)
    a = np.abs(x)
    k = np.clip(np.searchsorted(values, a), 1, values.size - 1)
    lo, hi = values[k - 1], values[k]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & ((codes[k] & 1) == 0))
    c = np.where(pick_hi, codes[k], codes[k - 1])
    c = np.where(a >= values[-1], codes[-1], c)  # saturate (inf included)
    c = c | np.where(np.signbit(x), np.uint8(0x80), np.uint8(0)).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), c).astype(np.uint8)


def from_fp8(codes: np.ndarray, fmt: str) -> np.ndarray:
    """fp8 codes (uint8) -> float64 values."""
    return _fp8_tables(fmt)[0][np.asarray(codes, np.uint8)]
