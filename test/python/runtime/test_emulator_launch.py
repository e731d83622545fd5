"""Compiled kernels launched in the PTX emulator through ``Kernel.launch``, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from tileopt.runtime.abi import ArgumentError

TARGETS = ("sm_80", "sm_90")
BLOCK = 128  # num_warps=4: the hand-written kernels do one element per thread


def _grid(n: int) -> int:
    return max(1, (n + BLOCK - 1) // BLOCK)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [1, 127, 128, 1000, 4099])
def test_vector_add_numpy(handwritten, target: str, n: int) -> None:
    k = handwritten.compiled("vector_add", target)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    z = np.full(n, np.nan, np.float32)
    stats = k.launch(_grid(n), x, y, z)
    np.testing.assert_array_equal(z, x + y)
    # Every element read twice and written once, no more (coalesced 4-byte accesses).
    assert stats.global_load_bytes == 8 * n and stats.global_store_bytes == 4 * n
    assert stats.block == (BLOCK, 1, 1) and stats.grid == (_grid(n), 1, 1)


@pytest.mark.parametrize("n", [5, 1000, 3 * BLOCK + 1])
def test_vector_add_torch_and_in_place(handwritten, n: int) -> None:
    torch = pytest.importorskip("torch")
    k = handwritten.compiled("vector_add", "sm_90")
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen)
    y = torch.randn(n, generator=gen)
    z = torch.empty(n)
    k.launch(_grid(n), x, y, z)
    torch.testing.assert_close(z, x + y, rtol=0, atol=0)
    # z aliases x: the emulator sees one buffer, as a GPU would.
    want = x + y
    k.launch(_grid(n), x, y, x)
    torch.testing.assert_close(x, want, rtol=0, atol=0)


def test_vector_add_strided_views(handwritten) -> None:
    k = handwritten.compiled("vector_add", "sm_80")
    base = np.arange(3000, dtype=np.float32)
    x = base[1::3]  # stride 3, offset 1
    y = base[::-1][:1000]  # negative stride
    out = np.zeros(2003, np.float32)
    z = out[3::2]  # stride 2, offset 3
    k.launch(_grid(1000), x, y, z)
    np.testing.assert_array_equal(z, x + y)
    untouched = np.ones(out.size, bool)
    untouched[3::2] = False
    assert not out[untouched].any(), "the kernel wrote outside the view"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 1), (37, 53), (64, 32), (3, 200)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "reversed"])
def test_scale_2d_any_strides(handwritten, target: str, shape, layout: str) -> None:
    k = handwritten.compiled("scale", target)
    rng = np.random.default_rng(sum(shape))
    rows, cols = shape
    if layout == "contiguous":
        x = rng.standard_normal(shape, dtype=np.float32)
        y = np.zeros(shape, np.float32)
    elif layout == "transposed":
        x = rng.standard_normal((cols, rows), dtype=np.float32).T
        y = np.zeros((cols, rows), np.float32).T
    elif layout == "sliced":
        x = rng.standard_normal((rows + 2, cols + 5), dtype=np.float32)[2:, 1:-4]
        y = np.zeros((rows + 1, 2 * cols), np.float32)[1:, ::2]
    else:
        x = rng.standard_normal(shape, dtype=np.float32)[::-1, ::-1]
        y = np.zeros(shape, np.float32)[:, ::-1]
    assert x.shape == y.shape == shape
    k.launch(_grid(rows * cols), x, y, -1.5)
    np.testing.assert_array_equal(y, np.float32(-1.5) * x)


def test_scale_torch_noncontiguous(handwritten) -> None:
    torch = pytest.importorskip("torch")
    k = handwritten.compiled("scale", "sm_90")
    x = torch.randn(40, 70).t()[::2]  # (35, 40), strides (2, 70)
    y = torch.zeros(50, 40)[5:40]
    k.launch(_grid(35 * 40), x, y, 3.0)
    torch.testing.assert_close(y, 3.0 * x, rtol=0, atol=0)


@pytest.mark.parametrize("n", [100, 1025])
def test_exp_with_libdevice(handwritten, n: int) -> None:
    k = handwritten.compiled("exp_scale", "sm_90")
    x = np.linspace(-10, 10, n, dtype=np.float32)
    y = np.empty_like(x)
    k.launch(_grid(n), x, y, 0.5)
    np.testing.assert_allclose(y, 0.5 * np.exp(x.astype(np.float64)), rtol=2e-6)


def test_launch_errors_name_the_argument(handwritten) -> None:
    k = handwritten.compiled("scale", "sm_90")
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ArgumentError, match=r"argument 1 \(y: view<\?x\?xf32>\) expects rank 2"):
        k.launch(1, x, np.zeros(16, np.float32), 1.0)
    with pytest.raises(ArgumentError, match=r"argument 2 \(alpha: f32\) expects a number"):
        k.launch(1, x, x, "two")
    with pytest.raises(ArgumentError, match="grid must be 1 to 3 positive integers"):
        k.launch((0,), x, x, 1.0)
    with pytest.raises(ArgumentError, match="unknown device 'tpu'"):
        k.launch(1, x, x, 1.0, device="tpu")


def test_out_of_bounds_is_caught(handwritten) -> None:
    """A kernel that overruns a view is stopped by the emulator's bounds checks."""
    from tileopt.compiler import compile
    from tileopt.errors import EmulatorError

    # Mask on x's size but write z: z shorter than x overruns z.
    k = compile(handwritten.source("vector_add").replace("%i, %zn", "%i, %xn"), "sm_90",
                start="llvm", signature=handwritten.signature("vector_add"))
    x = np.ones(300, np.float32)
    z = np.zeros(200, np.float32)
    with pytest.raises(EmulatorError, match="Out-of-bounds access in kernel 'vector_add'") as info:
        k.launch(_grid(300), x, x, z)
    # The PTX parameter the emulator names is mapped back to the kernel's argument.
    assert "PTX parameter 6 is the pointer of argument 2 (z: view<?xf32>)" in info.value.__notes__
    assert not z.any(), "a faulting launch writes nothing back"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [3, 1000])
def test_half_precision_scalar_and_views(handwritten, dtype: str, target: str, n: int) -> None:
    """A 16-bit float scalar parameter (PTX: 2 bytes) and f16/bf16 views."""
    torch = pytest.importorskip("torch")
    from tileopt.compiler import KernelParam, compile

    src = handwritten.source("scale_half").replace("f16", dtype)
    sig = [KernelParam.view("x", dtype, 1), KernelParam.view("y", dtype, 1),
           KernelParam.scalar("alpha", dtype)]
    k = compile(src, target, start="llvm", signature=sig)
    tdt = torch.float16 if dtype == "f16" else torch.bfloat16
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(tdt)
    y = torch.zeros(n, dtype=tdt)
    k.launch(_grid(n), x, y, 1.3)
    alpha = torch.tensor(1.3, dtype=tdt)  # the scalar is rounded to the type first
    torch.testing.assert_close(y, x * alpha, rtol=0, atol=0)
