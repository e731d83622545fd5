"""Hopper warpgroup MMA (cuda/wgmma.cu: wgmma.mma_async through inline PTX, sm_90a) vs numpy.

Each kernel stages A (64 x K per warpgroup) and B (K x N) in shared memory in one of the
canonical wgmma layouts (no swizzle, 32/64/128-byte swizzle; K-major or MN-major with
imm-trans = 1), builds the matrix descriptors, and runs fence / mma_async / commit_group /
wait_group; variants take A from registers, negate A and/or B (imm-scale = -1), accumulate in
f16, use two warpgroups per CTA or tiles that do not start on a 1024-byte boundary (non-zero
descriptor base offset). ``scale_d`` = 0 must ignore the initial accumulator (NaN here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pytest
from test_nvcc_mma import random_operands

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
ARCH = "sm_90a"
F32_EPS = float(np.finfo(np.float32).eps)
F16_EPS = float(np.finfo(np.float16).eps)


class Spec(NamedTuple):
    """What a kernel of cuda/wgmma.cu computes: C = sa*sb * A @ B + (Cin if scale_d)."""

    dtype: str  # "f16" or "bf16" (A and B)
    n: int
    warpgroups: int = 1
    scale_ab: float = 1.0  # imm-scale-a * imm-scale-b
    acc16: bool = False  # f16 accumulators (output as f16)


KERNELS: dict[str, Spec] = {
    "wg_f16_n64_kk_sw0": Spec("f16", 64),
    "wg_f16_n64_kk_sw32": Spec("f16", 64),
    "wg_f16_n64_kk_sw64": Spec("f16", 64),
    "wg_f16_n64_kk_sw128": Spec("f16", 64),
    "wg_f16_n64_kn_sw0": Spec("f16", 64),
    "wg_f16_n64_kn_sw32": Spec("f16", 64),
    "wg_f16_n64_kn_sw64": Spec("f16", 64),
    "wg_f16_n64_kn_sw128": Spec("f16", 64),
    "wg_f16_n64_mk_sw0": Spec("f16", 64),
    "wg_f16_n64_mk_sw128": Spec("f16", 64),
    "wg_bf16_n64_mn_sw64": Spec("bf16", 64),
    "wg_bf16_n64_kk_sw128": Spec("bf16", 64),
    "wg_f16_n8_kk_sw32": Spec("f16", 8),
    "wg_f16_n256_kk_sw64": Spec("f16", 256),
    "wg_bf16_n256_kn_sw128": Spec("bf16", 256),
    "wg_f16_n64_rk_sw64": Spec("f16", 64),
    "wg_bf16_n256_rn_sw32": Spec("bf16", 256),
    "wg_f16_n64_kk_sw128_nega": Spec("f16", 64, scale_ab=-1.0),
    "wg_bf16_n64_rk_sw128_negab": Spec("bf16", 64, scale_ab=1.0),
    "wg_bf16_n64_kn_sw0_negb": Spec("bf16", 64, scale_ab=-1.0),
    "wg_f16acc_n64_kk_sw128": Spec("f16", 64, acc16=True),
    "wg_f16_n64_kk_sw128_wg2": Spec("f16", 64, warpgroups=2),
    "wg_bf16_n64_kn_sw32_wg2": Spec("bf16", 64, warpgroups=2),
    "wg_f16_n64_kk_sw128_shift": Spec("f16", 64),
    "wg_f16_n64_kn_sw64_shift": Spec("f16", 64),
}


def _run(
    mod: LoadedPTX, name: str, k: int, ctas: int, scale_d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launch kernel *name* on random operands; returns (C as float64, the float64 reference,
    the error bound)."""
    spec = KERNELS[name]
    m = 64 * spec.warpgroups * ctas
    seed = sum(map(ord, name)) + k
    a_bits, a64 = random_operands(spec.dtype, (m, k), seed)
    b_bits, b64 = random_operands(spec.dtype, (k, spec.n), seed + 1)
    rng = np.random.default_rng(seed + 2)
    cin = rng.standard_normal((m, spec.n)).astype(np.float32)
    if spec.acc16:
        cin = cin.astype(np.float16).astype(np.float32)  # representable in the f16 accumulator
    if not scale_d:
        cin[:] = np.nan  # must be ignored
    out = np.full((m, spec.n), np.nan, np.float16 if spec.acc16 else np.float32)
    stats = mod.module.launch(
        name,
        grid=(ctas, 1, 1),
        block=(128 * spec.warpgroups, 1, 1),
        args=[a_bits, b_bits, cin, out, k, scale_d],
    )
    # one wgmma per k16 step and warp; fence/commit/wait are counted as "sync"
    assert stats.instructions_by_class["mma"] == (k // 16) * 4 * spec.warpgroups * ctas
    c_in = cin.astype(np.float64) if scale_d else np.zeros_like(a64 @ b64)
    ref = spec.scale_ab * (a64 @ b64) + c_in
    mag = np.abs(a64) @ np.abs(b64) + np.abs(c_in)
    if spec.acc16:  # rounded to f16 after each k16 step
        bound = (k // 16 + 1) * F16_EPS * mag
    else:  # f16/bf16 products are exact; the f32 accumulation rounds
        bound = (k + 1) * F32_EPS * mag
    return out.astype(np.float64), ref, bound + 1e-30


def _check(c: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> None:
    err = np.abs(c - ref)
    assert np.all(err <= bound), (
        f"max excess {np.nanmax(err - bound)}; worst at "
        f"{np.unravel_index(np.nanargmax(err - bound), err.shape)}"
    )


@pytest.fixture(scope="module")
def wgmma(load_kernels: Loader) -> LoadedPTX:
    mod = load_kernels("wgmma.cu", ARCH)
    mod.require(
        ".target sm_90a",
        "wgmma.fence.sync.aligned;",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
        "fence.proxy.async.shared::cta;",
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16",
        "p, 1, 1, 0, 1;",  # imm-trans-b
        "p, 1, 1, 1, 0;",  # imm-trans-a
        "p, -1, 1, 0, 0;",  # imm-scale-a
        "p, 1, -1, 0, 1;",  # imm-scale-b
        "p, -1, -1, 0;",  # A from registers, both negated
    )
    return mod


@pytest.mark.parametrize("name", list(KERNELS))
def test_wgmma_layouts(wgmma: LoadedPTX, name: str) -> None:
    _check(*_run(wgmma, name, k=128, ctas=2, scale_d=1))


@pytest.mark.parametrize(
    "name",
    [
        "wg_f16_n64_kk_sw0",
        "wg_bf16_n256_kn_sw128",
        "wg_f16_n64_rk_sw64",
        "wg_f16acc_n64_kk_sw128",
        "wg_bf16_n64_kn_sw32_wg2",
    ],
)
def test_wgmma_scale_d_zero_ignores_the_accumulator(wgmma: LoadedPTX, name: str) -> None:
    c, ref, bound = _run(wgmma, name, k=64, ctas=1, scale_d=0)
    assert np.isfinite(c).all()
    _check(c, ref, bound)
