"""Hopper warpgroup MMA with tf32 inputs (cuda/wgmma_tf32.cu: ``wgmma.mma_async ... .m64nNk8
.f32.tf32.tf32`` through inline PTX, sm_90a) vs numpy.

Each kernel stages A (64 x K per CTA) and B (K x N) in shared memory K-major (no swizzle, or
32/64/128-byte swizzle, 32-bit elements) or takes A from registers, builds the matrix
descriptors and runs fence / mma_async / commit_group / wait_group over k8 steps. The inputs are
f32 words of which the tensor cores read only the tf32 part (the low 13 mantissa bits
ignored), so the reference is a float64 matmul of the inputs truncated to tf32 with numpy's
own bit mask; products of tf32 values are exact and only the f32 accumulation rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
ARCH = "sm_90a"
F32_EPS = float(np.finfo(np.float32).eps)


class Spec(NamedTuple):
    """What a kernel of cuda/wgmma_tf32.cu computes: C = scale_ab * A @ B + (Cin if scale_d)."""

    n: int
    scale_ab: float = 1.0  # imm-scale-a * imm-scale-b


KERNELS: dict[str, Spec] = {
    "wgt_n8_ss_sw0": Spec(8),
    "wgt_n8_ss_sw128": Spec(8),
    "wgt_n64_ss_sw0": Spec(64),
    "wgt_n64_ss_sw32": Spec(64),
    "wgt_n64_ss_sw64": Spec(64),
    "wgt_n64_ss_sw128": Spec(64),
    "wgt_n128_ss_sw0": Spec(128),
    "wgt_n128_ss_sw128": Spec(128),
    "wgt_n8_rs_sw128": Spec(8),
    "wgt_n64_rs_sw0": Spec(64),
    "wgt_n128_rs_sw128": Spec(128),
    "wgt_n64_ss_sw128_nega": Spec(64, scale_ab=-1.0),
    "wgt_n64_rs_sw32_negb": Spec(64, scale_ab=-1.0),
}


def truncate_to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> float64 with the low 13 mantissa bits cleared (round toward zero to tf32)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32).astype(np.float64)


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> float64 rounded to nearest tf32, ties away (finite inputs only)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


class Result(NamedTuple):
    c: np.ndarray  # the kernel's output, as float64
    ref: np.ndarray  # scale_ab * tf32(A) @ tf32(B) + Cin, in float64
    bound: np.ndarray  # the f32 accumulation error bound, elementwise
    a: np.ndarray  # the f32 inputs
    b: np.ndarray
    c_in: np.ndarray  # Cin as float64 (zeros where scale_d = 0)


def _run(mod: LoadedPTX, name: str, k: int, ctas: int, scale_d: int) -> Result:
    """Launch kernel *name* on random f32 operands (full 23-bit mantissas)."""
    spec = KERNELS[name]
    m = 64 * ctas
    rng = np.random.default_rng(sum(map(ord, name)) + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, spec.n)).astype(np.float32)
    cin = rng.standard_normal((m, spec.n)).astype(np.float32)
    if not scale_d:
        cin[:] = np.nan  # must be ignored
    out = np.full((m, spec.n), np.nan, np.float32)
    stats = mod.module.launch(
        name, grid=(ctas, 1, 1), block=(128, 1, 1), args=[a, b, cin, out, k, scale_d]
    )
    # one wgmma per k8 step and warp; fence/commit/wait are counted as "sync"
    assert stats.instructions_by_class["mma"] == (k // 8) * 4 * ctas
    a64, b64 = truncate_to_tf32(a), truncate_to_tf32(b)
    c_in = cin.astype(np.float64) if scale_d else np.zeros((m, spec.n))
    ref = spec.scale_ab * (a64 @ b64) + c_in
    bound = (k + 1) * F32_EPS * (np.abs(a64) @ np.abs(b64) + np.abs(c_in)) + 1e-30
    return Result(out.astype(np.float64), ref, bound, a, b, c_in)


def _check(c: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> None:
    err = np.abs(c - ref)
    assert np.all(err <= bound), (
        f"max excess {np.nanmax(err - bound)}; worst at "
        f"{np.unravel_index(np.nanargmax(err - bound), err.shape)}"
    )


@pytest.fixture(scope="module")
def wgmma_tf32(load_kernels: Loader) -> LoadedPTX:
    mod = load_kernels("wgmma_tf32.cu", ARCH)
    mod.require(
        ".target sm_90a",
        "wgmma.fence.sync.aligned;",
        "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;",
        "fence.proxy.async.shared::cta;",
        "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32",
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32",
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32",
        "p, -1, 1;",  # imm-scale-a
        "p, 1, -1;",  # imm-scale-b
    )
    assert ", {%r" in mod.ptx, "no wgmma takes A from registers"
    return mod


@pytest.mark.parametrize("name", list(KERNELS))
def test_wgmma_tf32_layouts(wgmma_tf32: LoadedPTX, name: str) -> None:
    res = _run(wgmma_tf32, name, k=64, ctas=1, scale_d=1)
    _check(res.c, res.ref, res.bound)


@pytest.mark.parametrize("name", ["wgt_n64_ss_sw128", "wgt_n64_rs_sw0"])
def test_wgmma_tf32_inputs_are_truncated(wgmma_tf32: LoadedPTX, name: str) -> None:
    """The bound above tells truncation to tf32 apart: against the full f32 inputs, or inputs
    rounded to nearest tf32, most results miss it (A from shared memory and from registers)."""
    res = _run(wgmma_tf32, name, k=32, ctas=2, scale_d=1)
    _check(res.c, res.ref, res.bound)
    for conv in (lambda x: x.astype(np.float64), round_to_tf32):
        other = conv(res.a) @ conv(res.b) + res.c_in
        assert np.mean(np.abs(res.c - other) > res.bound) > 0.5


@pytest.mark.parametrize("name", ["wgt_n8_ss_sw0", "wgt_n128_ss_sw128", "wgt_n64_rs_sw0"])
def test_wgmma_tf32_scale_d_zero_ignores_the_accumulator(wgmma_tf32: LoadedPTX, name: str) -> None:
    res = _run(wgmma_tf32, name, k=32, ctas=1, scale_d=0)
    assert np.isfinite(res.c).all()
    _check(res.c, res.ref, res.bound)
