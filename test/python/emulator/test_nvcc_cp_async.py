"""cp.async double buffering: inline PTX (cuda/cp_async.cu), pipeline primitives (pipeline.cu)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
SRC = "cp_async.cu"
F32_EPS = float(np.finfo(np.float32).eps)
CHUNK = 128


@pytest.mark.parametrize("nblocks,nchunks", [(1, 1), (1, 2), (3, 5), (8, 16)])
def test_cp_async_double_buffer(
    load_kernels: Loader, arch: str, nblocks: int, nchunks: int
) -> None:
    k = load_kernels(SRC, arch)
    k.require(
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group 1",
        "cp.async.wait_all",
    )
    rng = np.random.default_rng(nblocks * 100 + nchunks)
    x = rng.standard_normal((nblocks, nchunks * CHUNK)).astype(np.float32)
    w = rng.standard_normal(nchunks * CHUNK).astype(np.float32)
    out = np.full((nblocks, nchunks), np.nan, dtype=np.float32)
    k.module.launch(
        "cp_async_double_buffer",
        grid=(nblocks, 1, 1),
        block=(32, 1, 1),
        args=[x, w, out, nchunks],
    )
    prod = x.astype(np.float64).reshape(nblocks, nchunks, CHUNK) * w.astype(np.float64).reshape(
        1, nchunks, CHUNK
    )
    ref = prod.sum(axis=2)
    bound = (CHUNK + 1) * F32_EPS * np.abs(prod).sum(axis=2)
    assert np.all(np.abs(out - ref) <= bound), (out, ref)


@pytest.mark.parametrize("n", [256, 1000, 5, 513])
def test_cp_async_ca_4byte(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels(SRC, arch)
    k.require("cp.async.ca.shared.global", "cp.async.wait_group 0")
    x = (np.arange(n, dtype=np.int32) * 13) ^ 0x55
    out = np.zeros(n, dtype=np.int32)
    grid = -(-n // 256)
    k.module.launch("cp_async_ca4", grid=(grid, 1, 1), block=(256, 1, 1), args=[x, out, n])
    i = np.arange(n)
    base = (i // 256) * 256
    src = base + ((i - base + 1) & 255)
    expect = np.where(src < n, x[np.minimum(src, n - 1)] + 1, -7)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("n4,grid", [(64, 1), (640, 3), (4096, 8), (1000, 4)])
def test_pipeline_primitives(load_kernels: Loader, arch: str, n4: int, grid: int) -> None:
    """__pipeline_memcpy_async lowers to cp.async with an explicit src-size operand."""
    k = load_kernels("pipeline.cu", arch)
    k.require("cp.async.cg.shared.global", "cp.async.wait_group 1")
    rng = np.random.default_rng(n4)
    x = rng.standard_normal((n4, 4)).astype(np.float32)
    out = np.full((n4, 4), np.nan, dtype=np.float32)
    k.module.launch(
        "pipeline_primitives_copy",
        grid=(grid, 1, 1),
        block=(64, 1, 1),
        args=[x, out, n4],
    )
    i = np.arange(n4)
    src = (i // 64) * 64 + 63 - (i % 64)
    defined = src < n4  # in a ragged last chunk the reversed source may lie past the end
    assert defined.sum() > 0
    np.testing.assert_array_equal(out[defined], x[src[defined]][:, ::-1])


@pytest.mark.parametrize("n,grid", [(256, 1), (1000, 4), (37, 1), (513, 3)])
def test_cp_async_zero_fill_and_8_byte(load_kernels: Loader, arch: str, n: int, grid: int) -> None:
    """cp.async with src-size < cp-size fills the rest of the 16 bytes with zeros."""
    k = load_kernels("cp_async_zfill.cu", arch)
    k.require("cp.async.cg.shared.global", "cp.async.ca.shared.global", "16, %r")
    x = np.arange(1, n + 1, dtype=np.int32) * 3
    out = np.full(grid * 256 + grid * 128, 12345, dtype=np.int32)
    k.module.launch("cp_async_zfill", grid=(grid, 1, 1), block=(64, 1, 1), args=[x, out, n])
    i = np.arange(grid * 256)
    np.testing.assert_array_equal(out[: grid * 256], np.where(i < n, x[np.minimum(i, n - 1)], 0))
    j = np.arange(grid * 128)
    pair_ok = (j | 1) < n  # both elements of the 8-byte pair exist
    expect2 = np.where(pair_ok, x[np.minimum(j, n - 1)], -1)
    np.testing.assert_array_equal(out[grid * 256 :], expect2)
