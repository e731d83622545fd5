"""Tensor-core matmuls (cuda/mma.cu: mma.sync + ldmatrix; cuda/wmma.cu: wmma) vs numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
F32_EPS = float(np.finfo(np.float32).eps)


def random_operands(
    dtype: str, shape: tuple[int, int], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Random matrix as (raw 16-bit patterns for the kernel, float64 values for the reference)."""
    rng = np.random.default_rng(seed)
    vals = rng.standard_normal(shape).astype(np.float32)
    if dtype == "f16":
        h = vals.astype(np.float16)
        return h.view(np.uint16).copy(), h.astype(np.float64)
    t = torch.from_numpy(vals).to(torch.bfloat16)
    return t.view(torch.int16).numpy().view(np.uint16).copy(), t.to(torch.float64).numpy()


def _check(c: np.ndarray, a64: np.ndarray, b64: np.ndarray) -> None:
    """f16/bf16 products are exact in f32; only the f32 accumulation rounds (~K eps |A||B|)."""
    ref = a64 @ b64
    bound = (a64.shape[1] + 1) * F32_EPS * (np.abs(a64) @ np.abs(b64)) + 1e-30
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= bound), (
        f"max excess {np.max(err - bound)}; "
        f"worst at {np.unravel_index(np.argmax(err - bound), err.shape)}"
    )


SHAPES = [(16, 8, 16), (32, 24, 64), (64, 64, 128), (48, 16, 272)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_mma_sync_m16n8k16_ldmatrix(
    load_kernels: Loader, arch: str, dtype: str, m: int, n: int, k: int
) -> None:
    mod = load_kernels("mma.cu", arch)
    mod.require(
        f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype}.{dtype}.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
    )
    a_bits, a64 = random_operands(dtype, (m, k), m + k)
    bt_bits, bt64 = random_operands(dtype, (n, k), n * k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        f"mma_ldmatrix_{dtype}",
        grid=(n // 8, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, bt_bits, c, m, n, k],
    )
    _check(c, a64, bt64.T)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_mma_sync_ldmatrix_trans(load_kernels: Loader, arch: str, m: int, n: int, k: int) -> None:
    mod = load_kernels("mma.cu", arch)
    mod.require("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16")
    a_bits, a64 = random_operands("f16", (m, k), 3 * m + k)
    b_bits, b64 = random_operands("f16", (k, n), 5 * n + k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        "mma_ldmatrix_trans_f16",
        grid=(n // 8, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, b_bits, c, m, n, k],
    )
    _check(c, a64, b64)


@pytest.mark.parametrize("m,n,k", [(16, 8, 8), (32, 16, 40), (64, 32, 64)])
def test_mma_sync_m16n8k8_direct_fragments(
    load_kernels: Loader, arch: str, m: int, n: int, k: int
) -> None:
    """Fragments assembled from global memory exactly as the PTX ISA lays them out (no ldmatrix)."""
    mod = load_kernels("mma.cu", arch)
    mod.require("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32")
    a_bits, a64 = random_operands("f16", (m, k), m * 7 + k)
    bt_bits, bt64 = random_operands("f16", (n, k), n * 11 + k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        "mma_m16n8k8_f16",
        grid=(n // 8, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, bt_bits, c, m, n, k],
    )
    _check(c, a64, bt64.T)


def test_mma_sync_single_tile_identity(load_kernels: Loader, arch: str) -> None:
    """A = I (16x16): C must equal B^T exactly, so a fragment mix-up shows as a permutation."""
    mod = load_kernels("mma.cu", arch)
    a = np.eye(16, dtype=np.float16)
    bt = (np.arange(8 * 16).reshape(8, 16) % 61 - 30).astype(np.float16)
    c = np.zeros((16, 8), dtype=np.float32)
    mod.module.launch(
        "mma_ldmatrix_f16",
        grid=(1, 1, 1),
        block=(32, 1, 1),
        args=[a.view(np.uint16).copy(), bt.view(np.uint16).copy(), c, 16, 8, 16],
    )
    np.testing.assert_array_equal(c, bt.T.astype(np.float32))


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (32, 48, 64), (64, 32, 160)])
def test_wmma_f16(load_kernels: Loader, arch: str, m: int, n: int, k: int) -> None:
    mod = load_kernels("wmma.cu", arch)
    mod.require("wmma.mma.sync.aligned", "wmma.load.a.sync.aligned", "wmma.store.d.sync.aligned")
    a_bits, a64 = random_operands("f16", (m, k), m + 2 * k)
    b_bits, b64 = random_operands("f16", (k, n), n + 3 * k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        "wmma_f16",
        grid=(n // 16, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, b_bits, c, m, n, k],
    )
    _check(c, a64, b64)


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (48, 32, 96)])
def test_wmma_bf16(load_kernels: Loader, arch: str, m: int, n: int, k: int) -> None:
    mod = load_kernels("wmma.cu", arch)
    a_bits, a64 = random_operands("bf16", (m, k), m + 5 * k)
    bt_bits, bt64 = random_operands("bf16", (n, k), n + 7 * k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        "wmma_bf16",
        grid=(n // 16, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, bt_bits, c, m, n, k],
    )
    _check(c, a64, bt64.T)


@pytest.mark.parametrize("seed", [0, 1])
def test_ldmatrix_fragment_layouts(load_kernels: Loader, arch: str, seed: int) -> None:
    """ldmatrix x1/x2/x4/.trans: lane l gives row l's address; registers follow the PTX ISA."""
    mod = load_kernels("ldmatrix.cu", arch)
    mod.require("ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.trans")
    src = np.arange(256, dtype=np.uint16)
    perm = np.random.default_rng(seed).permutation(32).astype(np.int32)
    out = np.zeros((32, 11), dtype=np.uint32)
    mod.module.launch("ldmatrix_probe", grid=(1, 1, 1), block=(32, 1, 1), args=[src, perm, out])

    def elem(m: int, r: int, c: int) -> int:
        return int(perm[8 * m + r]) * 8 + c

    for lane in range(32):
        row, col = lane // 4, 2 * (lane % 4)

        def frag(m: int, trans: bool, row: int = row, col: int = col) -> int:
            if trans:
                return elem(m, col, row) | elem(m, col + 1, row) << 16
            return elem(m, row, col) | elem(m, row, col + 1) << 16

        expect = [frag(0, False)] + [frag(m, False) for m in range(2)]
        expect += [frag(m, False) for m in range(4)] + [frag(m, True) for m in range(4)]
        assert [int(v) for v in out[lane]] == expect, lane


@pytest.mark.parametrize("m,n,k", [(16, 8, 8), (32, 16, 40)])
def test_mma_sync_m16n8k8_bf16(load_kernels: Loader, arch: str, m: int, n: int, k: int) -> None:
    mod = load_kernels("ldmatrix.cu", arch)
    mod.require("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32")
    a_bits, a64 = random_operands("bf16", (m, k), m * 3 + k)
    bt_bits, bt64 = random_operands("bf16", (n, k), n * 5 + k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    mod.module.launch(
        "mma_m16n8k8_bf16",
        grid=(n // 8, m // 16, 1),
        block=(32, 1, 1),
        args=[a_bits, bt_bits, c, m, n, k],
    )
    _check(c, a64, bt64.T)


@pytest.mark.parametrize("m,n,k", [(64, 64, 32), (128, 192, 96), (64, 128, 256)])
def test_gemm_sm80_pipeline(load_kernels: Loader, arch: str, m: int, n: int, k: int) -> None:
    """cp.async double buffering + ldmatrix + mma.sync in one realistic 4-warp GEMM."""
    mod = load_kernels("gemm_sm80.cu", arch)
    mod.require(
        "cp.async.cg.shared.global", "cp.async.wait_group 1", "ldmatrix.sync.aligned.m8n8.x4"
    )
    mod.require("ldmatrix.sync.aligned.m8n8.x2.trans", "mma.sync.aligned.m16n8k16.row.col.f32.f16")
    a_bits, a64 = random_operands("f16", (m, k), m + k)
    b_bits, b64 = random_operands("f16", (k, n), n + 2 * k)
    c = np.full((m, n), np.nan, dtype=np.float32)
    stats = mod.module.launch(
        "gemm_f16_sm80",
        grid=(n // 64, m // 64, 1),
        block=(128, 1, 1),
        args=[a_bits, b_bits, c, m, n, k],
    )
    _check(c, a64, b64)
    assert stats.barriers > 0


def test_stmatrix_sm90(load_kernels: Loader) -> None:
    """stmatrix x4 and x4.trans (sm_90 only): the inverse of ldmatrix's fragment layout."""
    mod = load_kernels("ldmatrix.cu", "sm_90")
    mod.require("stmatrix.sync.aligned.m8n8.x4.shared.b16", "stmatrix.sync.aligned.m8n8.x4.trans")
    perm = np.random.default_rng(3).permutation(32).astype(np.int32)
    out = np.zeros((2, 32, 8), dtype=np.uint16)
    mod.module.launch("stmatrix_probe", grid=(1, 1, 1), block=(32, 1, 1), args=[perm, out])
    for lane in range(32):
        m, r = lane // 8, lane % 8
        row = int(perm[lane])
        assert out[0, row].tolist() == [m * 64 + r * 8 + c for c in range(8)], lane
        assert out[1, row].tolist() == [m * 64 + c * 8 + r for c in range(8)], lane
