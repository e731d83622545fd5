"""Shared-memory kernels (cuda/shared.cu): transposes, tiled matmul, histograms, atomics."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
SRC = "shared.cu"
F32_EPS = float(np.finfo(np.float32).eps)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize("kernel", ["transpose_padded", "transpose_unpadded"])
@pytest.mark.parametrize(
    "rows,cols", [(32, 32), (64, 96), (33, 65), (1, 100), (100, 7), (250, 130), (300, 500)]
)
def test_transpose(load_kernels: Loader, arch: str, kernel: str, rows: int, cols: int) -> None:
    k = load_kernels(SRC, arch)
    k.require("bar.sync", "st.shared.f32", "ld.shared.f32")
    rng = np.random.default_rng(rows * 1000 + cols)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.full((cols, rows), np.nan, dtype=np.float32)
    k.module.launch(
        kernel,
        grid=(_cdiv(cols, 32), _cdiv(rows, 32), 1),
        block=(32, 8, 1),
        args=[a, out, rows, cols],
    )
    np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize(
    "m,n,kk", [(16, 16, 16), (64, 48, 80), (37, 29, 53), (1, 70, 5), (128, 128, 128)]
)
def test_matmul_tiled(load_kernels: Loader, arch: str, m: int, n: int, kk: int) -> None:
    k = load_kernels(SRC, arch)
    rng = np.random.default_rng(m * n * kk)
    a = rng.standard_normal((m, kk)).astype(np.float32)
    b = rng.standard_normal((kk, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    k.module.launch(
        "matmul_tiled",
        grid=(_cdiv(n, 16), _cdiv(m, 16), 1),
        block=(16, 16, 1),
        args=[a, b, c, m, n, kk],
    )
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = (kk + 1) * F32_EPS * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(c - ref) <= bound), np.max(np.abs(c - ref) - bound)


@pytest.mark.parametrize("n,block", [(256, 64), (1000, 128), (77, 32)])
def test_reverse_dynamic_shared(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    x = np.arange(n, dtype=np.int32) * 3 + 1
    out = np.zeros(n, dtype=np.int32)
    grid = _cdiv(n, block)
    k.module.launch(
        "reverse_dynamic_smem",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[x, out, n],
        shared_bytes=block * 4,
    )
    padded = np.full(grid * block, -1, dtype=np.int32)
    padded[:n] = x
    expect = padded.reshape(grid, block)[:, ::-1].reshape(-1)[:n]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize(
    "n,nbins,grid,block", [(10_000, 7, 8, 128), (4096, 256, 4, 256), (999, 1, 3, 64)]
)
def test_histogram_global_atomics(
    load_kernels: Loader, arch: str, n: int, nbins: int, grid: int, block: int
) -> None:
    k = load_kernels(SRC, arch)
    k.require("atom.global.add.u32")
    rng = np.random.default_rng(n + nbins)
    data = rng.integers(0, 1 << 20, size=n, dtype=np.int32)
    bins = np.zeros(nbins, dtype=np.uint32)
    k.module.launch(
        "histogram_global",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[data, bins, n, nbins],
    )
    np.testing.assert_array_equal(bins, np.bincount(data % nbins, minlength=nbins))


@pytest.mark.parametrize(
    "n,nbins,grid,block",
    # the last case: 4000 CTAs, more than the emulator runs in one chunk
    [(10_000, 7, 8, 128), (5000, 300, 3, 256), (64, 2, 2, 32), (300_000, 37, 4000, 64)],
)
def test_histogram_shared_atomics(
    load_kernels: Loader, arch: str, n: int, nbins: int, grid: int, block: int
) -> None:
    k = load_kernels(SRC, arch)
    k.require("atom.shared.add.u32", "atom.global.add.u32")
    rng = np.random.default_rng(n * nbins)
    data = rng.integers(0, 1000, size=n, dtype=np.int32)
    bins = np.zeros(nbins, dtype=np.uint32)
    k.module.launch(
        "histogram_shared",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[data, bins, n, nbins],
        shared_bytes=nbins * 4,
    )
    np.testing.assert_array_equal(bins, np.bincount(data % nbins, minlength=nbins))


@pytest.mark.parametrize("n,block", [(100, 32), (500, 128), (257, 256)])
def test_atomics_misc(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    k.require(
        "atom.global.min.s32",
        "atom.global.max.s32",
        "atom.global.and.b32",
        "atom.global.or.b32",
        "atom.global.xor.b32",
        "atom.global.cas.b32",
        "atom.global.inc.u32",
        "atom.global.dec.u32",
        "atom.global.exch.b32",
        "atom.global.add.f32",
        "atom.global.add.u64",
        "atom.shared.add.f32",
        "atom.shared.max.s32",
    )
    rng = np.random.default_rng(n)
    data = rng.integers(-(2**31), 2**31 - 1, size=n, dtype=np.int64).astype(np.int32)
    ints = np.array([2**31 - 1, -(2**31), -1, 0, 0, 0, 0, 0], dtype=np.int32)
    uints = np.array([0, 0, 0], dtype=np.uint32)
    fsum = np.zeros(1, dtype=np.float32)
    u64 = np.array([5], dtype=np.uint64)
    grid = _cdiv(n, block)
    block_out = np.zeros(2 * grid, dtype=np.float32)
    k.module.launch(
        "atomics_misc",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[data, ints, uints, fsum, u64, block_out, n],
    )
    d = data.astype(np.int64)
    assert ints[0] == d.min()
    assert ints[1] == d.max()
    assert ints[2] == np.bitwise_and.reduce(data | np.int32(0x10))
    assert ints[3] == np.bitwise_or.reduce(data & np.int32(0xFF0))
    assert ints[4] == np.bitwise_xor.reduce(data)
    assert ints[5] == n  # CAS retry loop counted every thread exactly once
    assert uints[0] == n % 10  # atomicInc(limit 9) wraps to 0 after 9
    assert uints[1] == (-n) % 13  # atomicDec(limit 12) from 0: 12, 11, ..., 0, 12, ...
    assert uints[2] == 1234
    assert fsum[0] == float((data & 7).sum())  # small integers: exact in f32 in any order
    assert int(u64[0]) == (5 + int((d & 0xFFFFFFFF).sum())) % 2**64
    for b in range(grid):
        members = d[b * block : (b + 1) * block]
        assert block_out[2 * b] == 0.5 * len(members)
        assert block_out[2 * b + 1] == np.float32(members.max())


@pytest.mark.parametrize("n,block", [(400, 128), (77, 32)])
def test_wide_and_half_atomics(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels("atomics64.cu", arch)
    k.require("atom.global.max.u64", "atom.global.min.s64", "atom.global.add.f64")
    k.require("atom.global.cas.b64", "atom.global.exch.b64", "atom.add.noftz.f16x2")
    k.require("atom.add.noftz.f16", "red.global.add.u32", "atom.shared.cas.b32")
    rng = np.random.default_rng(n)
    v = rng.integers(-(2**62), 2**62, size=n, dtype=np.int64)
    u64 = np.array([0, 2**63 - 1, 0, 0], dtype=np.uint64)
    f64 = np.zeros(1)
    h2 = np.zeros(2, dtype=np.float16)
    h1 = np.zeros(1, dtype=np.float16)
    red = np.zeros(1, dtype=np.uint32)
    grid = _cdiv(n, block)
    out = np.zeros(grid, dtype=np.int32)
    k.module.launch(
        "atomics_wide",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[v, u64, f64, h2, h1, red, out, n],
    )
    vu = v.view(np.uint64)
    assert int(u64[0]) == int(vu.max())
    assert int(u64[1].view(np.int64)) == int(v.min())
    assert f64[0] == float(((v & 1023) * 0.25).sum())  # multiples of 1/4: exact in any order
    assert int(u64[2]) == int((v & 0xFF).sum())
    assert int(u64[3]) == 0xABCDEF0123456789
    np.testing.assert_array_equal(h2, np.array([n * 1.0, n * 0.5], dtype=np.float16))
    assert float(h1[0]) == n * 0.25
    assert int(red[0]) == int((v & 0xFFFF).sum()) % 2**32
    np.testing.assert_array_equal(out, [min(block, n - b * block) for b in range(grid)])
