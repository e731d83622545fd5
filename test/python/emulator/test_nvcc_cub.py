"""CUB block/warp collectives compiled by nvcc (cuda/cub_block.cu, cuda/cub_sort.cu) vs numpy.

Library code is the realistic case: inline-asm shuffles with predicate outputs in nested scopes,
registers named without '%', redux.sync, bmsk, raking scans through shared memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]


@pytest.mark.parametrize("n", [384, 300, 45])
def test_cub_reduce_and_scan(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("cub_block.cu", arch)
    k.require("shfl.sync.up.b32", "bar.sync")
    grid = -(-n // 128)
    rng = np.random.default_rng(n)
    x = rng.integers(-1000, 1000, size=n, dtype=np.int32)
    f = rng.standard_normal(n).astype(np.float32)
    isum = np.zeros(grid, dtype=np.int32)
    fmax = np.zeros(grid, dtype=np.float32)
    excl, incl_max, warp_incl = (np.full(n, -7, dtype=np.int32) for _ in range(3))
    warp_sum = np.full(-(-n // 32), -7, dtype=np.int32)
    k.module.launch(
        "cub_reduce_scan",
        grid=(grid, 1, 1),
        block=(128, 1, 1),
        args=[x, f, isum, fmax, excl, incl_max, warp_sum, warp_incl, n],
    )
    xp = np.zeros(grid * 128, dtype=np.int64)
    xp[:n] = x
    fp = np.full(grid * 128, -1e30, dtype=np.float32)
    fp[:n] = f
    blocks = xp.reshape(grid, 128)
    np.testing.assert_array_equal(isum, blocks.sum(axis=1))
    np.testing.assert_array_equal(fmax, fp.reshape(grid, 128).max(axis=1))
    np.testing.assert_array_equal(excl, (np.cumsum(blocks, axis=1) - blocks).reshape(-1)[:n])
    np.testing.assert_array_equal(incl_max, np.maximum.accumulate(blocks, axis=1).reshape(-1)[:n])
    warps = xp.reshape(-1, 32)
    np.testing.assert_array_equal(warp_incl, np.cumsum(warps, axis=1).reshape(-1)[:n])
    np.testing.assert_array_equal(warp_sum, warps.sum(axis=1)[: len(warp_sum)])


@pytest.mark.parametrize("grid", [1, 3])
def test_cub_block_radix_sort(load_kernels: Loader, arch: str, grid: int) -> None:
    k = load_kernels("cub_sort.cu", arch)
    rng = np.random.default_rng(grid)
    x = rng.integers(-(2**31), 2**31, size=grid * 512, dtype=np.int64).astype(np.int32)
    x[:20] = x[20:40]  # duplicates
    out = np.zeros_like(x)
    k.module.launch("cub_radix_sort", grid=(grid, 1, 1), block=(128, 1, 1), args=[x, out])
    np.testing.assert_array_equal(out.reshape(grid, 512), np.sort(x.reshape(grid, 512), axis=1))
