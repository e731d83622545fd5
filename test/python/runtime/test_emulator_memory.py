"""Kernel.launch on the emulator with arguments that share memory, views at unaligned offsets,
arguments the ABI must refuse, and i8/i16 tiles (packed 16-bit SIMD on sm_90), against numpy
and torch."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from tileopt.errors import ArgumentError

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")

from tileopt.builder import KernelBuilder, View  # noqa: E402
from tileopt.compiler import compile  # noqa: E402

ROWS = 4  # rows per program
WIDTH = 16


def _split_kernel(target: str = "sm_90") -> Any:
    """q = 2 * x and k = x + 1 for (rows, 16) views: a fused qkv-style epilogue that writes two
    outputs."""
    kb = KernelBuilder("split", x=View("f32", 2), q=View("f32", 2), k=View("f32", 2))
    with kb as b:
        row = b.program_id(0) * ROWS
        x = b.load(b.args.x, [row, 0], [ROWS, WIDTH])
        b.store(x * 2.0, b.args.q, [row, 0])
        b.store(x + 1.0, b.args.k, [row, 0])
    return compile(kb, target)


def _add_kernel(block: int = 512, **options: Any) -> Any:
    kb = KernelBuilder("vadd", x=View("f32", 1), y=View("f32", 1), z=View("f32", 1))
    with kb as b:
        off = b.program_id(0) * block
        x = b.load(b.args.x, [off], [block])
        b.store(x + b.load(b.args.y, [off], [block]), b.args.z, [off])
    return compile(kb, "sm_90", **options)


def _grid(rows: int) -> int:
    return max(1, -(-rows // ROWS))


@pytest.mark.parametrize("rows", [1, 5, 37])
def test_numpy_column_halves_of_one_buffer(rows: int) -> None:
    """q and k are the two column halves of one (rows, 32) buffer: both sets of writes land."""
    k = _split_kernel()
    x = np.random.default_rng(rows).standard_normal((rows, WIDTH), dtype=np.float32)
    out = np.full((rows, 2 * WIDTH), np.nan, np.float32)
    k.launch(_grid(rows), x, out[:, :WIDTH], out[:, WIDTH:])
    np.testing.assert_array_equal(out[:, :WIDTH], 2 * x)
    np.testing.assert_array_equal(out[:, WIDTH:], x + 1)
    # The other order of the two views in memory.
    out[:] = np.nan
    k.launch(_grid(rows), x, out[:, WIDTH:], out[:, :WIDTH])
    np.testing.assert_array_equal(out[:, WIDTH:], 2 * x)
    np.testing.assert_array_equal(out[:, :WIDTH], x + 1)


@pytest.mark.parametrize("rows", [3, 37])
def test_torch_views_of_a_fused_qkv_output(rows: int) -> None:
    torch = pytest.importorskip("torch")
    k = _split_kernel()
    x = torch.randn(rows, WIDTH, generator=torch.Generator().manual_seed(rows))
    qkv = torch.full((rows, 3 * WIDTH), float("nan"))
    q, kk, v = qkv.split(WIDTH, dim=1)
    k.launch(_grid(rows), x, q, kk)
    torch.testing.assert_close(q, 2 * x, rtol=0, atol=0)
    torch.testing.assert_close(kk, x + 1, rtol=0, atol=0)
    assert v.isnan().all(), "the kernel wrote outside its views"
    # Reading one view of a storage and writing another: x is the v third of qkv.
    v.copy_(x)
    k.launch(_grid(rows), v, q, kk)
    torch.testing.assert_close(q, 2 * x, rtol=0, atol=0)
    torch.testing.assert_close(kk, x + 1, rtol=0, atol=0)
    torch.testing.assert_close(v, x, rtol=0, atol=0)


def test_numpy_read_one_view_write_another() -> None:
    rows = 9
    k = _split_kernel("sm_80")
    buf = np.random.default_rng(0).standard_normal((rows, 3 * WIDTH), dtype=np.float32)
    x = buf[:, 2 * WIDTH :].copy()
    k.launch(_grid(rows), buf[:, 2 * WIDTH :], buf[:, :WIDTH], buf[:, WIDTH : 2 * WIDTH])
    np.testing.assert_array_equal(buf[:, :WIDTH], 2 * x)
    np.testing.assert_array_equal(buf[:, WIDTH : 2 * WIDTH], x + 1)
    np.testing.assert_array_equal(buf[:, 2 * WIDTH :], x)


@pytest.mark.parametrize("n", [1000, 4099])
@pytest.mark.parametrize("shift", [1, 3])
def test_offset_tensors_take_the_unaligned_path(n: int, shift: int) -> None:
    """Without aligned= the kernel checks alignment at run time: views at a 4-byte offset get
    the scalar path (more load requests), and the result is right either way."""
    torch = pytest.importorskip("torch")
    k = _add_kernel()
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n + shift, generator=gen)
    y = torch.randn(n + shift, generator=gen)
    z = torch.zeros(n + shift)
    grid = -(-n // 512)
    aligned = k.launch(grid, x[:n], y[:n], z[:n])
    torch.testing.assert_close(z[:n], x[:n] + y[:n], rtol=0, atol=0)
    z.zero_()
    offset = k.launch(grid, x[shift:], y[shift:], z[shift:])
    torch.testing.assert_close(z[shift:], x[shift:] + y[shift:], rtol=0, atol=0)
    assert z[:shift].eq(0).all()
    assert offset.global_load_bytes == aligned.global_load_bytes == 8 * n
    assert offset.global_load_requests > aligned.global_load_requests
    # numpy slices too.
    xs, ys = x.numpy(), y.numpy()
    zs = np.zeros(n + shift, np.float32)
    again = k.launch(grid, xs[shift:], ys[shift:], zs[shift:])
    np.testing.assert_array_equal(zs[shift:], xs[shift:] + ys[shift:])
    assert again.global_load_requests == offset.global_load_requests


def test_aligned_promise_still_checked_on_offset_views() -> None:
    k = _add_kernel(aligned=True, contiguous=True)
    x = np.zeros(1025, np.float32)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*16-byte aligned"):
        k.launch(2, x[1:], x[1:], x[1:])


def test_big_endian_arrays_are_refused() -> None:
    k = _add_kernel()
    x = np.arange(10, dtype=">f4")
    y = np.zeros(10, np.float32)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*byte order.*astype\('<f4'\)"):
        k.launch(1, x, y, y)
    k.launch(1, x.astype("<f4"), y, y)
    np.testing.assert_array_equal(y, np.arange(10, dtype=np.float32))


def test_sparse_complex_and_masked_arguments_are_refused() -> None:
    torch = pytest.importorskip("torch")
    k = _add_kernel()
    y = torch.zeros(8)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*sparse_coo tensor.*to_dense"):
        k.launch(1, torch.ones(8).to_sparse(), y, y)
    with pytest.raises(ArgumentError, match=r"argument 1 \(y: .*got complex64"):
        k.launch(1, y, torch.zeros(8, dtype=torch.complex64), y)
    with pytest.raises(ArgumentError, match=r"argument 2 \(z: .*got complex128"):
        k.launch(1, y.numpy(), y.numpy(), np.zeros(8, complex))
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*masked array"):
        k.launch(1, np.ma.masked_array(np.ones(8, np.float32)), y, y)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*neg bit.*resolve_neg"):
        k.launch(1, torch._neg_view(torch.ones(8)), y, y)


def test_complex_and_array_scalars_are_refused(handwritten) -> None:
    k = handwritten.compiled("scale", "sm_90")
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ArgumentError, match=r"argument 2 \(alpha: f32\) expects a number, got "
                                            r"complex"):
        k.launch(1, x, x, 1 + 2j)
    with pytest.raises(ArgumentError, match=r"argument 2 \(alpha: f32\) is a scalar: pass a "
                                            r"number.*shape \(2,\)"):
        k.launch(1, x, x, np.ones(2, np.float32))


def test_unknown_and_bad_emulator_options_are_refused() -> None:
    k = _add_kernel()
    x = np.zeros(8, np.float32)
    for bad in ({"foo": 1}, {"block": 3, "shared_bytes": 0}):
        with pytest.raises(ArgumentError) as info:
            k.launch(1, x, x, x, **bad)
        message = str(info.value)
        assert "max_threads_per_chunk, max_steps, shared_checks" in message, message
        assert all(name in message for name in bad), message
    with pytest.raises(ArgumentError, match=r"max_steps must be a positive integer, got 'a'"):
        k.launch(1, x, x, x, max_steps="a")
    with pytest.raises(ArgumentError, match=r"shared_checks must be"):
        k.launch(1, x, x, x, shared_checks="loud")
    stats = k.launch(1, x, x, x, max_threads_per_chunk=64, shared_checks="count")
    assert stats.instructions > 0


def _int_kernel(dtype: str, op: str, block: int = 256) -> Any:
    kb = KernelBuilder(f"{op}_{dtype}", x=View(dtype, 1), y=View(dtype, 1), z=View(dtype, 1))
    with kb as b:
        off = b.program_id(0) * block
        x = b.load(b.args.x, [off], [block])
        y = b.load(b.args.y, [off], [block])
        r = {
            "add": lambda: x + y,
            "sub": lambda: x - y,
            "mul": lambda: x * y,
            "max": lambda: b.maximum(x, y),
            "min": lambda: b.minimum(x, y),
            "relu": lambda: b.maximum(b.maximum(x, y), 0),
        }[op]()
        b.store(r, b.args.z, [off])
    return kb


def _int_ref(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    wide = {
        "add": lambda: x.astype(np.int64) + y,
        "sub": lambda: x.astype(np.int64) - y,
        "mul": lambda: x.astype(np.int64) * y,
        "max": lambda: np.maximum(x, y),
        "min": lambda: np.minimum(x, y),
        "relu": lambda: np.maximum(np.maximum(x, y), 0),
    }[op]()
    return np.asarray(wide).astype(x.dtype)  # wraps around, as two's complement does


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["i8", "i16"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min", "relu"])
def test_small_integer_tiles(target: str, dtype: str, op: str) -> None:
    """i8/i16 elementwise tiles; on sm_90 LLVM packs them into .s16x2 SIMD instructions."""
    k = compile(_int_kernel(dtype, op), target)
    ptx = str(k.asm["ptx"])
    if target == "sm_90" and op in ("add", "max", "min", "relu"):
        want = {"add": "add.s16x2", "max": "max.s16x2", "min": "min.s16x2",
                "relu": "max.relu.s16x2"}[op]
        assert re.search(rf"\b{re.escape(want)}\b", ptx), f"PTX lacks {want}"
    npdt = np.int8 if dtype == "i8" else np.int16
    info = np.iinfo(npdt)
    n = 1000
    rng = np.random.default_rng(n)
    x = rng.integers(info.min, info.max, n, endpoint=True).astype(npdt)
    y = rng.integers(info.min, info.max, n, endpoint=True).astype(npdt)
    x[:4] = [info.max, info.min, info.max, -1]
    y[:4] = [1, -1, info.max, info.min]
    z = np.zeros(n, npdt)
    k.launch(-(-n // 256), x, y, z)
    np.testing.assert_array_equal(z, _int_ref(op, x, y))


def test_runtime_launcher_refuses_unknown_options() -> None:
    """runtime.emulator.launch checks its options itself (names and values)."""
    from tileopt.runtime import emulator

    k = _add_kernel()
    md = k.metadata
    module = emulator.load(str(k.asm["ptx"]))
    x = np.zeros(8, np.float32)
    with pytest.raises(ArgumentError, match=r"unknown emulator options 'block', 'foo'; the "
                                            r"emulator takes max_threads_per_chunk"):
        emulator.launch(module, md.name, md.abi, (1, 1, 1), md.block, [x, x, x], foo=1, block=2)
    with pytest.raises(ArgumentError, match=r"max_threads_per_chunk must be a positive integer"):
        emulator.launch(module, md.name, md.abi, (1, 1, 1), md.block, [x, x, x],
                        max_threads_per_chunk=0)
