"""Other targets and compile modes: sm_86/89/90a/100a/120, and -G / -lineinfo debug PTX."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
EXTRA_ARCHS = ["sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _run_suite_sample(load_kernels: Loader, arch: str, flags: tuple[str, ...] = ()) -> None:
    """A few suite kernels, compiled with *arch* and *flags*, checked against numpy."""
    rng = np.random.default_rng(11)
    el = load_kernels("elementwise.cu", arch, flags)
    n = 1000
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, dtype=np.float32)
    el.module.launch("vec_add", grid=(_cdiv(n, 128), 1, 1), block=(128, 1, 1), args=[a, b, c, n])
    np.testing.assert_array_equal(c, a + b)

    red = load_kernels("reduction.cu", arch, flags)
    x = rng.integers(-1000, 1000, size=n, dtype=np.int32)
    out = np.zeros(_cdiv(n, 256), dtype=np.int32)
    total = np.zeros(1, dtype=np.int32)
    red.module.launch(
        "block_reduce_i32", grid=(len(out), 1, 1), block=(256, 1, 1), args=[x, out, total, n]
    )
    assert int(total[0]) == int(x.sum())

    sh = load_kernels("shared.cu", arch, flags)
    m = rng.standard_normal((40, 70)).astype(np.float32)
    mt = np.zeros((70, 40), dtype=np.float32)
    sh.module.launch("transpose_padded", grid=(3, 2, 1), block=(32, 8, 1), args=[m, mt, 40, 70])
    np.testing.assert_array_equal(mt, m.T)

    ctl = load_kernels("control.cu", arch, flags)
    ia = rng.integers(-100, 100, size=64, dtype=np.int32)
    ib = rng.integers(-100, 100, size=64, dtype=np.int32)
    f = np.zeros(64, dtype=np.float32)
    iout = np.zeros((64, 6), dtype=np.int32)
    fout = np.zeros(64, dtype=np.float32)
    ctl.module.launch("calls", grid=(1, 1, 1), block=(64, 1, 1), args=[ia, ib, f, iout, fout, 64])
    expect_poly = ia.astype(np.int64) ** 2 - 3 * ib.astype(np.int64) + 7
    np.testing.assert_array_equal(iout[:, 0], expect_poly)


@pytest.mark.parametrize("target", EXTRA_ARCHS)
def test_other_targets(load_kernels: Loader, target: str) -> None:
    ptx = load_kernels("elementwise.cu", target).ptx
    assert f".target {target}" in ptx
    _run_suite_sample(load_kernels, target)


@pytest.mark.parametrize("flags", [("-G",), ("-lineinfo",)])
def test_debug_ptx(load_kernels: Loader, flags: tuple[str, ...]) -> None:
    """-G PTX: unoptimised, .loc/.file directives and DWARF .section blocks everywhere."""
    k = load_kernels("reduction.cu", "sm_80", flags)
    assert ".loc" in k.ptx and ".file" in k.ptx
    if flags == ("-G",):
        assert ".section" in k.ptx
    _run_suite_sample(load_kernels, "sm_80", flags)


def test_mma_on_sm90a(load_kernels: Loader) -> None:
    k = load_kernels("mma.cu", "sm_90a")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    bt = rng.standard_normal((16, 32)).astype(np.float16)
    c = np.zeros((32, 16), dtype=np.float32)
    k.module.launch(
        "mma_ldmatrix_f16",
        grid=(2, 2, 1),
        block=(32, 1, 1),
        args=[a.view(np.uint16), bt.view(np.uint16), c, 32, 16, 32],
    )
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    bound = 33 * float(np.finfo(np.float32).eps) * (np.abs(a) @ np.abs(bt).T).astype(np.float64)
    assert np.all(np.abs(c - ref) <= bound)
