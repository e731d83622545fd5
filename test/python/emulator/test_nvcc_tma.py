"""nvcc's multi-stage cp.async pipelines (cuda/pipeline_matmul.cu, sm_80 and sm_90) and
Hopper TMA through libcu++ (cuda/tma.cu, sm_90a, CUtensorMap parameters by value) in the
emulator, against numpy and against the numpy model of the TMA box in test_engine_tma."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
from test_engine_tma import model_load
from tileopt.runtime.tma import OOBFill, Swizzle, TensorMap

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
F32_EPS = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("mnk", [(50, 44, 36), (32, 32, 16), (70, 100, 132)])
def test_nvcc_three_stage_cp_async_matmul(load_kernels: Loader, arch: str, mnk) -> None:
    k = load_kernels("pipeline_matmul.cu", arch)
    k.require("cp.async.cg.shared.global", "cp.async.wait_group 1", "cp.async.commit_group")
    m, n, kk = mnk
    rng = np.random.default_rng(m + n + kk)
    a = rng.standard_normal((m, kk)).astype(np.float32)
    b = rng.standard_normal((kk, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    stats = k.module.launch(
        "pipelined_matmul", grid=(-(-n // 32), -(-m // 32)), block=256, args=[a, b, c, m, n, kk]
    )
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = (kk + 1) * F32_EPS * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(c - ref) <= bound + 1e-30)
    assert stats.shared_races == 0


def test_nvcc_memcpy_async_on_a_barrier(load_kernels: Loader, arch: str) -> None:
    """sm_80: cp.async + cp.async.mbarrier.arrive; sm_90: cp.async.bulk + expect_tx."""
    k = load_kernels("pipeline_matmul.cu", arch)
    k.require("cp.async.mbarrier.arrive" if arch == "sm_80" else "cp.async.bulk.shared::cta")
    ntiles, grid = 5, 3
    x = np.random.default_rng(1).standard_normal((grid, ntiles, 256)).astype(np.float32)
    y = np.zeros_like(x)
    stats = k.module.launch("memcpy_async_barrier", grid=grid, block=256, args=[x, y, ntiles])
    np.testing.assert_array_equal(y, x[:, :, ::-1] + np.float32(1))
    assert stats.shared_races == 0


@pytest.mark.parametrize("shape", [(70, 100), (32, 64), (45, 36)])
def test_nvcc_tma_load_scale_store(load_kernels: Loader, shape) -> None:
    k = load_kernels("tma.cu", "sm_90a")
    k.require(
        ".b8 tma_scale_param_0[128]",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
        "cp.async.bulk.wait_group.read 0",
    )
    x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
    y = np.full(shape, -7.0, np.float32)
    grid = (-(-shape[1] // 32), -(-shape[0] // 32))
    stats = k.module.launch(
        "tma_scale",
        grid=grid,
        block=128,
        args=[TensorMap.from_tensor(x, (32, 32)), TensorMap.from_tensor(y, (32, 32)), 2.5],
    )
    np.testing.assert_array_equal(y, x * np.float32(2.5))
    assert stats.shared_races == 0


BOXES = [
    ((40, 64), np.float16, (16, 32), Swizzle.B64, OOBFill.ZERO, (32, 30)),
    ((40, 64), np.float16, (32, 64), Swizzle.B128, OOBFill.NAN, (16, -8)),
    ((33, 24), np.float32, (16, 8), Swizzle.B32, OOBFill.ZERO, (20, 25)),
    ((6, 20, 16), np.float32, (3, 8, 16), Swizzle.NONE, OOBFill.NAN, (0, 16, 4)),
]


@pytest.mark.parametrize(
    "shape,dtype,box,swizzle,fill,coords",
    BOXES,
    ids=[f"{len(s)}d-{w.name}-{f.name}" for s, _, _, w, f, _ in BOXES],
)
def test_nvcc_tma_box_bytes(load_kernels: Loader, shape, dtype, box, swizzle, fill, coords) -> None:
    """The raw bytes a TMA load leaves in shared memory (cuda::ptx mbarrier + copy)."""
    k = load_kernels("tma.cu", "sm_90a")
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    tm = TensorMap.from_tensor(a, box, swizzle=swizzle, oob_fill=fill)
    out = np.zeros(tm.box_bytes, np.uint8)
    name = f"tma_box{len(shape)}d"
    stats = k.module.launch(name, grid=1, block=128, args=[tm, *coords, out, tm.box_bytes])
    np.testing.assert_array_equal(out, model_load(tm, coords))
    assert stats.shared_races == 0
