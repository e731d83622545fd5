"""Less common PTX: bit-field/carry instructions (bits.cu), approximate math and classification
(fastmath.cu), special registers and 3-D launches (sregs.cu), cache operators, fences, generic
pointers, module variables and vector types (memory_misc.cu)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
import tileopt.emulator as emu

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _bit(v: int, i: int) -> int:
    return (v >> i) & 1


def _bfe(x: int, pos: int, length: int, width: int, signed: bool) -> int:
    """PTX ISA pseudo-code for bfe."""
    msb = width - 1
    pos &= 0xFF
    length &= 0xFF
    sbit = 0 if (not signed or length == 0) else _bit(x, min(pos + length - 1, msb))
    d = 0
    for i in range(width):
        b = _bit(x, pos + i) if (i < length and pos + i <= msb) else sbit
        d |= b << i
    return d


def _bfi(f: int, base: int, pos: int, length: int, width: int) -> int:
    """PTX ISA pseudo-code for bfi: insert the low bits of f into base."""
    msb = width - 1
    pos &= 0xFF
    length &= 0xFF
    d = base
    i = 0
    while i < length and pos + i <= msb:
        d = (d & ~(1 << (pos + i))) | (_bit(f, i) << (pos + i))
        i += 1
    return d


def _prmt(a: int, b: int, c: int) -> int:
    """prmt.b32 default mode; a selector nibble with its msb set replicates the byte's sign."""
    src = (b << 32) | a
    d = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF
        byte = (src >> (8 * (sel & 7))) & 0xFF
        if sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        d |= byte << (8 * i)
    return d


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v >> 31 else v


def _bfind_s32(x: int) -> int:
    v = _s32(x)
    if v < 0:
        v = ~v
    return v.bit_length() - 1 if v else M32


def test_bfe_bfi_model_examples() -> None:
    """The reference models agree with hand-worked PTX examples."""
    assert _bfe(0xF0, 4, 4, 32, False) == 0xF
    assert _bfe(0xF0, 4, 4, 32, True) == M32  # sign bit (bit 7) replicated
    assert _bfe(0x80000000, 31, 8, 32, True) == M32  # field runs past the msb: sign of bit 31
    assert _bfe(0x12345678, 40, 8, 32, False) == 0
    assert _bfi(0xF, 0, 28, 8, 32) == 0xF0000000  # bits past the msb are dropped
    assert _prmt(0x80402010, 0, 0xBBBB) == M32 and _prmt(0x80402010, 0, 0x3210) == 0x80402010


@pytest.mark.parametrize("n", [64, 300])
def test_bit_ops(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("bits.cu", arch)
    k.require("bfe.u32", "bfe.s32", "bfi.b32", "slct.s32.s32", "mul24.hi.u32", "bfind.s32")
    k.require("shf.r.clamp.b32", "cnot.b32", "mad.hi.u32")
    rng = np.random.default_rng(n)
    a = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    b[:32] = (
        (b[:32] & ~np.uint32(0xFFFF)) | (np.arange(32, dtype=np.uint32) * 8) | (np.uint32(9) << 8)
    )
    a[:4] = [0, M32, 0x80000000, 1]
    out = np.zeros((n, 16), dtype=np.uint32)
    k.module.launch("bit_ops", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        pos, length = y & 0xFF, (y >> 8) & 0xFF
        p24 = (x & 0xFFFFFF) * (y & 0xFFFFFF)
        r = min(y & 63, 32)
        lsh = min(x & 63, 32)
        expect = [
            _bfe(x, pos, length, 32, False),
            _bfe(x, pos, length, 32, True),
            _bfi(y, x, pos, length, 32),
            _prmt(x, y, y >> 16),
            x if _s32(x ^ y) >= 0 else y,
            p24 & M32,
            (p24 >> 16) & M32,
            (x >> 8) & 0xFFF,
            (((x * y) >> 32) + y) & M32,
            (x >> (y & 31)).bit_length() - 1 if x >> (y & 31) else M32,
            _bfind_s32(x),
            (((y << 32) | x) >> r) & M32,
            1 if (x & y & 0x11) == 0 else 0,
            min(x, y),
            max(_s32(x), _s32(y)) & M32,
            ((((y << 32) | x) << lsh) >> 32) & M32,
        ]
        got = [int(v) for v in out[i]]
        bad = [(j, hex(got[j]), hex(expect[j])) for j in range(16) if got[j] != expect[j]]
        assert not bad, f"x={x:#x} y={y:#x}: (output, got, expected) {bad}"


@pytest.mark.parametrize("n", [100])
def test_carry_chain_96bit(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("bits.cu", arch)
    k.require("add.cc.u32", "addc.cc.u32", "addc.u32", "sub.cc.u32", "subc.cc.u32", "subc.u32")
    rng = np.random.default_rng(n)
    a = rng.integers(0, 2**32, size=(n, 3), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, size=(n, 3), dtype=np.uint64).astype(np.uint32)
    a[0], b[0] = [M32, M32, 0], [1, 0, 0]  # carry ripples through two words
    a[1], b[1] = [0, 0, 0], [1, 0, 0]  # borrow ripples through everything
    out = np.zeros((n, 6), dtype=np.uint32)
    k.module.launch("carry_chain", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x = sum(int(a[i, w]) << (32 * w) for w in range(3))
        y = sum(int(b[i, w]) << (32 * w) for w in range(3))
        s, d = (x + y) % 2**96, (x - y) % 2**96
        expect = [(s >> (32 * w)) & M32 for w in range(3)] + [
            (d >> (32 * w)) & M32 for w in range(3)
        ]
        assert [int(v) for v in out[i]] == expect, i


@pytest.mark.parametrize("n", [64])
def test_bits64(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("bits64.cu", arch)
    k.require("bfe.u64", "bfe.s64", "mad.wide.u32")
    rng = np.random.default_rng(n)
    a = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    b = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    out = np.zeros((n, 4), dtype=np.uint64)
    k.module.launch("bits64", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        pos, length = y & 0x7F, (y >> 8) & 0x7F
        expect = [
            _bfe(x, pos, length, 64, False),
            _bfe(x, pos, length, 64, True),
            0,
            ((x & M32) * (x >> 32) + y) & M64,
        ]
        assert [int(v) for v in out[i]] == expect, (i, hex(x), hex(y))


def test_bfi64(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("bfi64.cu", arch)
    k.require("bfi.b64")
    n = 64
    rng = np.random.default_rng(n)
    a = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    b = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    out = np.zeros(n, dtype=np.uint64)
    k.module.launch("bfi64", grid=(2, 1, 1), block=(32, 1, 1), args=[a, b, out, n])
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        assert int(out[i]) == _bfi(y, x, y & 0x7F, (y >> 8) & 0x7F, 64), (i, hex(x), hex(y))


def _ulp32(v: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(v).astype(np.float32)).astype(np.float64)


def test_approx_math(load_kernels: Loader, arch: str) -> None:
    """.approx instructions within the accuracy the PTX ISA documents for them."""
    k = load_kernels("fastmath.cu", arch)
    n = 400
    rng = np.random.default_rng(1)
    x = rng.uniform(-3.1, 3.1, n).astype(np.float32)
    x[np.abs(x) < 1e-3] = 0.5
    out = np.zeros((n, 9), dtype=np.float32)
    k.module.launch("approx_ops", grid=(_cdiv(n, 128), 1, 1), block=(128, 1, 1), args=[x, out, n])
    v = x.astype(np.float64)
    av = np.abs(v)

    def rel(j: int, ref: np.ndarray, tol: float) -> None:
        err = np.abs(out[:, j] - ref) / np.abs(ref)
        assert np.all(err <= tol), (j, float(err.max()), tol)

    rel(0, 1 / v, 2.0**-21)
    rel(1, np.sqrt(av), 2.0**-21)
    rel(2, 1 / np.sqrt(av), 2.0**-21)
    rel(3, np.exp2(v), 2.0**-21)
    assert np.all(np.abs(out[:, 4] - np.log2(av)) <= 2.0**-21), "lg2.approx"
    assert np.all(np.abs(out[:, 5] - np.sin(v)) <= 2.0**-20), "sin.approx on [-pi, pi]"
    assert np.all(np.abs(out[:, 6] - np.cos(v)) <= 2.0**-20), "cos.approx on [-pi, pi]"
    rel(7, np.tanh(v), 2.0**-10.9)
    assert np.all(np.abs(out[:, 8] - v / 3.0) <= 2 * _ulp32(v / 3.0)), "div.full: 2 ulp"


def test_classification_and_nan_semantics(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("fastmath.cu", arch)
    k.require("testp.normal.f32", "testp.subnormal.f32", "setp.neu.f32", "setp.ltu.f32")
    xs = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40, -1e-41, 3e38, 1.17549435e-38, 7.0]
    ys = [1.0, 1.0, np.nan, -3.0, np.inf, 5.0, 2.0, 1e-40, 1.0, np.nan, 2.0, 7.0]
    x = np.array(xs, dtype=np.float32)
    y = np.array(ys, dtype=np.float32)
    n = len(x)
    cls = np.zeros(n, dtype=np.int32)
    mm = np.zeros((n, 2), dtype=np.float32)
    k.module.launch("classify", grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, cls, mm, n])
    for i in range(n):
        v, w = float(x[i]), float(y[i])
        sub = v != 0 and abs(v) < 1.17549435e-38
        normal = math.isfinite(v) and v != 0 and not sub
        bits = (
            int(math.isnan(v))
            | int(math.isinf(v)) << 1
            | int(math.isfinite(v)) << 2
            | int(math.copysign(1.0, v) < 0) << 3
            | int(v < w) << 4
            | int(v != w) << 5
            | int(not v >= w) << 6
            | int(sub) << 7
            | int(normal) << 8
            | int(sub) << 9
        )
        assert int(cls[i]) == bits, (i, v, w, bin(int(cls[i])), bin(bits))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(mm[:, 0], np.fmin(x, y))
        np.testing.assert_array_equal(mm[:, 1], np.fmax(x, y))


@pytest.mark.parametrize(
    "grid,block", [((2, 3, 2), (8, 4, 2)), ((1, 1, 1), (32, 1, 1)), ((3, 1, 2), (5, 3, 4))]
)
def test_special_registers_3d(
    load_kernels: Loader, arch: str, grid: tuple[int, int, int], block: tuple[int, int, int]
) -> None:
    k = load_kernels("sregs.cu", arch)
    k.require(
        "%laneid", "%warpid", "%lanemask_lt", "%smid", "%nsmid", "%clock", "%ctaid.z", "%tid.z"
    )
    nthreads = block[0] * block[1] * block[2]
    nctas = grid[0] * grid[1] * grid[2]
    out = np.zeros((nctas * nthreads, 16), dtype=np.uint32)
    k.module.launch("index3d", grid=grid, block=block, args=[out])
    row = 0
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            t = (tz * block[1] + ty) * block[0] + tx
                            lane = t % 32
                            o = [int(v) for v in out[row]]
                            expect = [tx, ty, tz, bx, by, bz]
                            expect += [block[0] * 10000 + block[1] * 100 + block[2]]
                            expect += [grid[0] * 10000 + grid[1] * 100 + grid[2]]
                            expect += [lane, t // 32, (1 << lane) - 1, 1 << lane]
                            expect += [M32 & ~((1 << lane) - 1), 1]
                            assert o[:14] == expect, (bx, by, bz, tx, ty, tz, o)
                            assert o[14] < 1 << 20, "%clock must not run backwards"
                            assert o[15] == t
                            row += 1


def test_cache_operators_fences_module_variables(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("memory_misc.cu", arch)
    k.require("ld.global.cg", "ld.global.cs", "ld.global.lu", "ld.global.cv", "ld.global.ca")
    k.require("ld.global.L1::no_allocate", "st.global.cg", "st.global.cs", "st.global.wt")
    k.require("prefetch.global.L2", "membar.gl", "ld.const", ".const .align 4 .b8 c_table[32] =")
    n = 200
    x = np.arange(n, dtype=np.int32) * 7 - 300
    out = np.zeros((n, 4), dtype=np.int32)
    k.module.launch("cache_ops", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[x, out, n])
    c_table = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    g_table = np.array([0x10, 0x200, 0x3000, 0x40000])
    i = np.arange(n)
    np.testing.assert_array_equal(out[:, 0], 2 * x)
    np.testing.assert_array_equal(out[:, 1], x * x)
    np.testing.assert_array_equal(out[:, 2], 0)
    np.testing.assert_array_equal(out[:, 3], c_table[i & 7] + g_table[i & 3])


def test_module_variables_persist_across_launches(load_kernels: Loader, arch: str) -> None:
    """A __device__ variable lives as long as the module (as with a CUmodule): launches add up."""
    ptx = load_kernels("memory_misc.cu", arch).ptx
    mod = emu.load_ptx(ptx)  # a fresh module: the session-cached one is shared by other tests
    n = 100
    x = np.arange(n, dtype=np.int32)
    out = np.zeros((n, 4), dtype=np.int32)
    counter = np.zeros(1, dtype=np.uint32)
    mod.launch("read_counter", grid=(1, 1, 1), block=(1, 1, 1), args=[counter])
    assert counter[0] == 0
    for launches in (1, 2):
        mod.launch("cache_ops", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[x, out, n])
        mod.launch("read_counter", grid=(1, 1, 1), block=(1, 1, 1), args=[counter])
        assert counter[0] == launches * n


def test_generic_pointers_into_shared_and_global(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("memory_misc.cu", arch)
    k.require("isspacep.shared", "isspacep.global", "cvta.shared.u64", "ld.u32", "st.u32")
    g = np.arange(64, dtype=np.int32) * 5 + 1
    g0 = g.copy()
    out = np.zeros((64, 3), dtype=np.int32)
    k.module.launch("generic_pointers", grid=(1, 1, 1), block=(64, 1, 1), args=[g, out])
    t = np.arange(64)
    np.testing.assert_array_equal(out[:, 0], 3 * ((t + 1) & 63) * 2 + 1)  # shared: flag 1
    np.testing.assert_array_equal(out[:, 1], g0 * 2 + 4)  # global: flag 4
    np.testing.assert_array_equal(out[:, 2], 3 * t + 1000)
    np.testing.assert_array_equal(g, g0 + 7)


@pytest.mark.parametrize("n", [33, 256])
def test_vector_types(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("memory_misc.cu", arch)
    k.require("ld.global.v2.f64", "ld.global.v2.u64", "ld.global.v4.u8", "ld.global.v4.u16")
    rng = np.random.default_rng(n)
    d = rng.standard_normal((n, 2))
    ll = rng.integers(-(2**62), 2**62, size=(n, 2), dtype=np.int64)
    c = rng.integers(-128, 128, size=(n, 4), dtype=np.int64).astype(np.int8)
    s = rng.integers(-(2**15), 2**15, size=(n, 4), dtype=np.int64).astype(np.int16)
    p = rng.integers(-(2**31), 2**31, size=(n, 2), dtype=np.int64).astype(np.int32)
    od = np.zeros(n)
    ol = np.zeros(n, dtype=np.int64)
    oi = np.zeros((n, 3), dtype=np.int32)
    k.module.launch(
        "vector_types",
        grid=(_cdiv(n, 64), 1, 1),
        block=(64, 1, 1),
        args=[d, ll, c, s, p, od, ol, oi, n],
    )
    np.testing.assert_array_equal(od, d[:, 0] * 2.0 - d[:, 1])
    np.testing.assert_array_equal(ol, ll[:, 0] ^ (ll[:, 1] << 1))
    c64, s64, p64 = c.astype(np.int64), s.astype(np.int64), p.astype(np.int64)
    np.testing.assert_array_equal(oi[:, 0], c64 @ np.array([1, 2, 3, 4]))
    np.testing.assert_array_equal(oi[:, 1], s64 @ np.array([1, -1, 1, -1]))
    prod = (p64[:, 0] * p64[:, 1]) & M32
    np.testing.assert_array_equal(oi[:, 2].view(np.uint32), prod.astype(np.uint32))


def test_scalar_params_every_width(load_kernels: Loader, arch: str) -> None:
    """Scalar parameters typed by their .param declarations (u8/u16/u32/u64/f32/f64/b8[2])."""
    k = load_kernels("params.cu", arch)
    k.require(".param .u8", ".param .u16", ".param .f64", ".param .align 2 .b8")
    out = np.zeros(12, dtype=np.int64)
    args = [
        np.int8(-5),
        np.uint8(250),
        np.int16(-30000),
        np.uint16(65000),
        -2_000_000_000,
        4_000_000_000,
        -(2**62) - 12345,
        np.uint64(2**64 - 2),
        -1.75,
        3.25,
        np.float16(-2.5),
        True,
        out,
    ]
    k.module.launch("scalar_params", grid=(1, 1, 1), block=(1, 1, 1), args=args)
    expect = [-5, 250, -30000, 65000, -2_000_000_000, 4_000_000_000, -(2**62) - 12345]
    expect += [(2**64 - 2) >> 1, -1792, 3407872, -160, 7]
    assert out.tolist() == expect


def test_struct_param_indexed_at_runtime(load_kernels: Loader, arch: str) -> None:
    """An 80-byte struct passed by value (.param .b8[80]), passed as its bytes."""
    k = load_kernels("params.cu", arch)
    k.require(".param .align 8 .b8 struct_param_offsets_param_0[80]")
    sizes = [3, 4, 5, 1, 1, 1]
    strides = [1, 3, 12, 0, 0, 0]  # a column-major 3x4x5 view
    shape = np.zeros(
        1, dtype=[("ndim", "<i4"), ("sizes", "<i4", 6), ("pad", "<i4"), ("strides", "<i8", 6)]
    )
    shape["ndim"], shape["sizes"], shape["strides"] = 3, sizes, strides
    assert shape.dtype.itemsize == 80
    n = 60
    out = np.zeros(n, dtype=np.int64)
    k.module.launch(
        "struct_param_offsets", grid=(1, 1, 1), block=(64, 1, 1), args=[shape.tobytes(), out, n]
    )
    idx = np.arange(n)
    i0, i1, i2 = idx // 20, (idx // 5) % 4, idx % 5  # row-major linear index over sizes[0..2]
    np.testing.assert_array_equal(out, i0 * 1 + i1 * 3 + i2 * 12)


def test_struct_by_value_to_device_function(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("params.cu", arch)
    n = 50
    rng = np.random.default_rng(2)
    a = rng.integers(-8, 8, size=(n, 3)).astype(np.float32)  # small integers: exact products
    b = rng.integers(-8, 8, size=(n, 3)).astype(np.float32)
    out = np.zeros((n, 3), dtype=np.float32)
    k.module.launch("struct_calls", grid=(1, 1, 1), block=(64, 1, 1), args=[a, b, out, n])
    np.testing.assert_array_equal(out, np.cross(a, b))


def _flush(v: np.ndarray) -> np.ndarray:
    """Flush f32 subnormals to sign-preserving zero."""
    tiny = np.abs(v) < np.float32(1.17549435e-38)
    return np.where(tiny, np.copysign(np.float32(0), v), v).astype(np.float32)


def test_fast_math_ftz(load_kernels: Loader, arch: str) -> None:
    """--use_fast_math: .ftz flushes subnormal inputs and results to zero."""
    k = load_kernels("ftz.cu", arch, ("--use_fast_math",))
    k.require("add.ftz.f32", "mul.ftz.f32", "max.ftz.f32")
    x = np.array([1e-39, -3e-39, 1e-20, 2.0, 1e-38, 5e-39, 1.0, -2e-38], dtype=np.float32)
    y = np.array([1e-39, 1.0, 1e-20, 3e-39, 1e-38, -5e-39, 1e-38, 1.0], dtype=np.float32)
    n = len(x)
    out = np.zeros((n, 4), dtype=np.float32)
    k.module.launch("ftz_probe", grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, out, n])
    fx, fy = _flush(x).astype(np.float64), _flush(y).astype(np.float64)
    np.testing.assert_array_equal(out[:, 0], _flush((fx + fy).astype(np.float32)))
    np.testing.assert_array_equal(out[:, 1], _flush((fx * fy).astype(np.float32)))
    np.testing.assert_array_equal(out[:, 2], _flush(np.maximum(fx, fy).astype(np.float32)))
    np.testing.assert_array_equal(out[:, 3], _flush((fx * 0.5).astype(np.float32)))


def test_generic_local_pointers_and_generic_atomics(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("memory_misc.cu", arch)
    k.require("cvta.local", "atom.add.u32")
    block = 64
    g = np.array([5, 7], dtype=np.int32)
    out = np.zeros(block + 4, dtype=np.int32)
    k.module.launch("generic_local_and_atomics", grid=(1, 1, 1), block=(block, 1, 1), args=[g, out])
    t = np.arange(block)
    sq = (t[:, None] + np.arange(8)[None, :]) ** 2
    np.testing.assert_array_equal(out[:block], sq.sum(axis=1))  # the permutation keeps the sum
    np.testing.assert_array_equal(out[block:], [block // 4] * 4)
    np.testing.assert_array_equal(g, [5 + t[t % 2 == 0].sum(), 7 + t[t % 2 == 1].sum()])
