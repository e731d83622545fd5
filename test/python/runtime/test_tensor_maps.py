"""TMA tensor maps in the kernel ABI (docs/kernel-abi.md, "Tensor maps"): the parameters after
the arguments', the ``tile.tensor_maps`` attribute the driver reads, the checks of the PTX
against them, the maps both launchers build at every launch, and the compile cache.

The end-to-end kernel is hand-written at stage "llvm" (``compiler/kernels/tma_copy.mlir``), so
these tests do not depend on the tile lowering: it loads a box of ``x`` with
``cp.async.bulk.tensor`` through the map and copies the shared-memory bytes to ``y``, which is
compared with torch's slice of ``x``, zero padded, un-swizzled where the map swizzles.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tileopt.errors import ArgumentError, CompilationError, DeviceError, OptionError
from tileopt.runtime import abi, cuda
from tileopt.runtime.abi import KernelParam, TensorMapParam, check_tensor_maps, emulator_args
from tileopt.runtime.tma import L2Promotion, OOBFill, Swizzle, TensorMap

V = KernelParam.view
S = KernelParam.scalar
ROWS, COLS = 16, 64  # the box of tma_copy.mlir
SIG = [V("x", "f16", 2), V("y", "f16", 2), S("dr", "i32"), S("dc", "i32")]
MAP = TensorMapParam(0, (ROWS, COLS), 128)


def _tma_copy(handwritten: Any, swizzle: int = 128, **options: Any) -> Any:
    """tma_copy.mlir compiled for sm_90a with a map of ``swizzle`` bytes."""
    pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
    from tileopt.compiler import compile

    source = handwritten.source("tma_copy")
    if swizzle != 128:
        source = source.replace("swizzle = 128 : i64", f"swizzle = {swizzle} : i64")
    return compile(source, "sm_90a", start="llvm", signature=handwritten.signature("tma_copy"),
                   **options)


def _unswizzle(y: torch.Tensor) -> torch.Tensor:
    """``y`` with each box's rows un-swizzled (128-byte swizzle: 16-byte chunk c of row r of a
    box lies at chunk c ^ (r % 8))."""
    gy, gx = y.shape[0] // ROWS, y.shape[1] // COLS
    chunks = y.contiguous().view(torch.uint8).reshape(gy, ROWS, gx, 8, 16)
    rows = torch.arange(ROWS).reshape(1, ROWS, 1, 1)
    where = (torch.arange(8).reshape(1, 1, 1, 8) ^ (rows % 8)).expand(gy, ROWS, gx, 8)
    index = where.unsqueeze(-1).expand(gy, ROWS, gx, 8, 16)
    return torch.gather(chunks, 3, index).reshape(y.shape[0], -1).view(torch.float16)


def _reference(x: torch.Tensor, out_shape: tuple[int, int], dr: int, dc: int) -> torch.Tensor:
    """``y[r, c] = x[r + dr, c + dc]``, zeros outside ``x``."""
    padded = torch.zeros(out_shape[0] + 2 * abs(dr) + x.shape[0],
                         out_shape[1] + 2 * abs(dc) + x.shape[1], dtype=x.dtype)
    padded[abs(dr):abs(dr) + x.shape[0], abs(dc):abs(dc) + x.shape[1]] = x
    r0, c0 = abs(dr) + dr, abs(dc) + dc
    return padded[r0:r0 + out_shape[0], c0:c0 + out_shape[1]]


# ---------------------------------------------------------------------------------------------
# end to end in the emulator


@pytest.mark.parametrize("swizzle", [0, 128])
@pytest.mark.parametrize(
    "shape,dr,dc",
    [((40, 100), 0, 0), ((16, 64), 0, 0), ((33, 70), -5, 9), ((7, 200), 3, -60)],
    ids=["edges", "one-box", "shifted", "before-the-start"],
)
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_tma_copy_matches_torch(handwritten, swizzle: int, shape: tuple[int, int], dr: int,
                                dc: int, kind: str) -> None:
    """Boxes that stick out of x (or lie before its start) arrive zero filled, through a map
    over a strided view (a slice of a wider buffer: the map has the view's strides)."""
    k = _tma_copy(handwritten, swizzle)
    assert k.metadata.tensor_maps == (TensorMapParam(0, (ROWS, COLS), swizzle),)
    rows, cols = shape
    buf = torch.randn(rows + 3, 256, generator=torch.Generator().manual_seed(rows)).half()
    x = buf[2:2 + rows, 8:8 + cols]  # 16-byte aligned, row stride 512 bytes
    gy, gx = -(-rows // ROWS), -(-cols // COLS)
    y = torch.full((gy * ROWS, gx * COLS), float("nan"), dtype=torch.float16)
    before = buf.clone()
    if kind == "numpy":
        y_np = y.numpy()  # shares y's memory
        k.launch((gx, gy), x.numpy(), y_np, dr, dc)
    else:
        k.launch((gx, gy), x, y, dr, dc)
    got = _unswizzle(y) if swizzle else y
    torch.testing.assert_close(got, _reference(x, tuple(y.shape), dr, dc), rtol=0, atol=0)
    assert torch.equal(buf, before), "the map's tensor is read, not written"


def test_map_and_view_share_one_emulated_buffer(handwritten) -> None:
    """x passed as the view and, by the launcher, as the map's tensor is one allocation: the
    emulator sees one buffer (the launch's memory counters see x once)."""
    k = _tma_copy(handwritten, 0)
    x = np.arange(16 * 64, dtype=np.float16).reshape(16, 64)
    flat = emulator_args(k.metadata.abi, [x, np.zeros_like(x), 0, 0], "tma_copy",
                         k.metadata.tensor_maps)
    tmap = flat[-1]
    assert isinstance(tmap, TensorMap) and tmap.base is flat[0]
    assert (tmap.global_dims, tmap.global_strides, tmap.box_dims) == ((64, 16), (128,), (64, 16))
    assert (tmap.swizzle, tmap.l2_promotion, tmap.oob_fill) == (
        Swizzle.NONE, L2Promotion.B128, OOBFill.ZERO)
    y = np.zeros_like(x)
    k.launch(1, x, y, 0, 0)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda b: b[:40, :100].contiguous(), r"global_strides\[0\] = 200 bytes"),
        (lambda b: b[:40, 1:101], r"address 0x[0-9a-f]+ must be 16-byte aligned"),
        (lambda b: b[:64, :40].t(), r"contiguous innermost dimension \(stride 1\)"),
        (lambda b: b[:40, :64].numpy()[::-1], r"needs positive strides, got \(-256, 1\)"),
    ],
    ids=["row-stride", "misaligned", "transposed", "reversed"],
)
def test_a_map_that_cannot_be_built_is_an_argument_error(handwritten, make: Any,
                                                         reason: str) -> None:
    k = _tma_copy(handwritten)
    x = make(torch.zeros(64, 256, dtype=torch.float16))
    y = torch.zeros(64, 128, dtype=torch.float16)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: view<\?x\?xf16>\) has tensor "
                                            r"map 0 \(box \[16, 64\], swizzle 128\).*" + reason):
        k.launch(1, x, y, 0, 0)


def test_an_empty_view_gets_a_map_of_zeros() -> None:
    """TMA has no empty tensors; every element a box reads from an empty view is past its end
    (zero), and so is every element of a map over one row of 16 zero bytes."""
    x = torch.zeros(0, 64, dtype=torch.float16)
    tmap = emulator_args([V("x", "f16", 2)], [x], "k", [MAP])[-1]
    assert tmap.global_dims == (8, 1) and tmap.oob_fill == OOBFill.ZERO
    assert isinstance(tmap.base, np.ndarray) and not tmap.base.any() and tmap.base.nbytes == 16


def test_a_single_row_needs_no_valid_row_stride() -> None:
    """A dimension of one element has no stride TMA reads: one row of rows of 200 bytes."""
    x = torch.zeros(10, 100, dtype=torch.float16)[4:5]
    m = TensorMapParam(0, (1, 64), 0)
    tmap = emulator_args([V("x", "f16", 2)], [x], "k", [m])[-1]
    assert tmap.global_dims == (100, 1) and tmap.global_strides[0] % 16 == 0


def test_a_map_reorders_the_view_dimensions() -> None:
    """``dims=(1, 0)``: the map reads a transposed view (unit stride along its first
    dimension) with that dimension innermost: the untransposed tensor's rows. A view whose
    map-innermost dimension is not contiguous is an ArgumentError that names it."""
    w = torch.arange(48 * 64, dtype=torch.float16).reshape(48, 64)
    m = TensorMapParam(0, (48, 32), 64, dims=(1, 0))
    tmap = emulator_args([V("b", "f16", 2)], [w.t()], "k", [m])[-1]
    assert tmap.global_dims == (64, 48) and tmap.global_strides == (128,)
    assert tmap.box_dims == (32, 48)
    with pytest.raises(ArgumentError, match=r"contiguous innermost dimension"):
        emulator_args([V("b", "f16", 2)], [w], "k", [m])
    assert str(m) == "box [48, 32], swizzle 64, dims [1, 0]"


def test_map_parameters_are_described() -> None:
    """What an emulator error about a map's PTX parameter is annotated with."""
    assert abi.describe_ptx_param(SIG, 12, [MAP]) == (
        "PTX parameter 12 is tensor map 0 (box [16, 64], swizzle 128) of argument 0 "
        "(x: view<?x?xf16>)")
    assert "not part of the kernel ABI (13 parameters)" in abi.describe_ptx_param(SIG, 13, [MAP])


# ---------------------------------------------------------------------------------------------
# the driver: attribute, PTX checks, start="ptx", summary, cache


def test_recorded_tensor_maps_reads_the_attribute() -> None:
    pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
    from tileopt.compiler import nvidia

    line = ("llvm.func @k(%arg0: !llvm.ptr<1>) attributes {gpu.kernel, nvvm.kernel, "
            "tile.dynamic_shared_bytes = 1024 : i64, tile.tensor_maps = [{box = array<i64: 128, "
            "64>, swizzle = 128 : i64, view = 0 : i64}, {box = array<i64: 64, 32>, swizzle = 64 "
            ": i64, view = 3 : i64}]} {\n  llvm.func @other() attributes {nvvm.kernel} {")
    assert nvidia.recorded_tensor_maps(line, "k") == (
        TensorMapParam(0, (128, 64), 128), TensorMapParam(3, (64, 32), 64))
    transposed = ("llvm.func @t() attributes {tile.tensor_maps = [{box = array<i64: 64, 32>, "
                  "dims = array<i64: 1, 0>, swizzle = 64 : i64, view = 1 : i64}]} {")
    assert nvidia.recorded_tensor_maps(transposed, "t") == (
        TensorMapParam(1, (64, 32), 64, dims=(1, 0)),)
    assert nvidia.recorded_dynamic_shared_bytes(line, "k") == 1024
    assert nvidia.recorded_tensor_maps(line, "other") == ()
    for bad, message in [
        ("{box = array<i64: 8>, swizzle = 0 : i64, view = 0 : i64, oob = 1 : i64}",
         "cannot read tensor map 0"),
        ("{box = array<i64: 8>, swizzle = 0 : i64}", "cannot read tensor map 0"),
        ("{box = array<i64: 8>, swizzle = 48 : i64, view = 0 : i64}", "swizzle must be one of"),
        ("3", "not an array of dictionaries"),
    ]:
        with pytest.raises(CompilationError, match=message):
            nvidia.recorded_tensor_maps(f"llvm.func @k() attributes {{tile.tensor_maps = "
                                        f"[{bad}]}} {{", "k")


def test_check_ptx_abi_counts_the_maps(handwritten) -> None:
    from tileopt.compiler import nvidia

    ptx = _tma_copy(handwritten).asm["ptx"]
    assert ".param .align 64 .b8 tma_copy_param_12[128]" in ptx
    assert nvidia.ptx_entries(ptx)["tma_copy"][0][-1] == abi.TENSOR_MAP_BITS
    nvidia.check_ptx_abi(ptx, "tma_copy", SIG, [MAP])
    with pytest.raises(CompilationError, match=r"its PTX has 1 tensor-map parameters \(.b8 "
                                               r"\[128\]\) after the 12 of its arguments, but 0"):
        nvidia.check_ptx_abi(ptx, "tma_copy", SIG)
    with pytest.raises(CompilationError, match=r"has 1 tensor-map parameters .* but 2 tensor"):
        nvidia.check_ptx_abi(ptx, "tma_copy", SIG, [MAP, MAP])
    unaligned = ptx.replace(".align 64 .b8 tma_copy_param_12", ".b8 tma_copy_param_12")
    with pytest.raises(CompilationError, match=r"PTX parameter 12, tensor map 0, is declared "
                                               r"'.param .b8 tma_copy_param_12\[128\]'; a "
                                               r"CUtensorMap parameter needs .align 64"):
        nvidia.check_ptx_abi(unaligned, "tma_copy", SIG, [MAP])
    # A 128-byte parameter is not a view's or a scalar's.
    with pytest.raises(CompilationError, match="do not follow the kernel ABI"):
        nvidia.check_ptx_abi(ptx, "tma_copy", [*SIG, S("n", "i64")])


def test_a_kernel_without_the_attribute_does_not_compile(handwritten) -> None:
    pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
    from tileopt.compiler import compile

    source = handwritten.source("tma_copy").replace(
        "tile.tensor_maps = [{box = array<i64: 16, 64>, swizzle = 128 : i64, view = 0 : i64}]",
        "tile.other = 1")
    with pytest.raises(CompilationError, match="but 0 tensor maps are known"):
        compile(source, "sm_90a", start="llvm", signature=handwritten.signature("tma_copy"))
    # A map over a scalar is refused; so is a second map that has no parameter (the
    # kernel's last parameter before its one map is an i32).
    for wrong, message in [("view = 2", r"over argument 2 \(dr: i32\), not a view"),
                           ("view = 1 : i64}, {box = array<i64: 16>, swizzle = 0 : i64, view = 1",
                            "tensor-map parameter 11 is not a pointer: 'i32'")]:
        with pytest.raises(CompilationError, match=message):
            compile(handwritten.source("tma_copy").replace("view = 0", wrong), "sm_90a",
                    start="llvm", signature=handwritten.signature("tma_copy"))


def test_ptx_input_takes_its_maps_from_the_option(handwritten) -> None:
    from tileopt.compiler import compile

    ptx = _tma_copy(handwritten).asm["ptx"]
    with pytest.raises(CompilationError, match=r"compile\(\.\.\., tensor_maps=\)"):
        compile(ptx, "sm_90a", start="ptx", signature=SIG)
    with pytest.raises(OptionError, match="tensor_maps= is for start='ptx'"):
        _tma_copy(handwritten, tensor_maps=[MAP])
    with pytest.raises(OptionError, match="tensor_maps= takes a list of TensorMapParam"):
        compile(ptx, "sm_90a", start="ptx", signature=SIG, tensor_maps=[(0, (16, 64), 128)])
    k = compile(ptx, "sm_90a", start="ptx", signature=SIG, tensor_maps=[MAP])
    assert k.metadata.tensor_maps == (MAP,)
    assert "tensor map 0: box [16, 64], swizzle 128 over argument 0 (x)" in k.summary()
    x = torch.randn(20, 64).half()
    y = torch.zeros(32, 64, dtype=torch.float16)
    k.launch((1, 2), x, y, 0, 0)
    torch.testing.assert_close(_unswizzle(y), _reference(x, (32, 64), 0, 0), rtol=0, atol=0)


def test_tensor_maps_round_trip_through_the_cache(handwritten, fresh_cache: Path,
                                                  monkeypatch) -> None:
    from tileopt.compiler import cache

    first = _tma_copy(handwritten)
    cache.clear()
    again = _tma_copy(handwritten)
    assert again is not first and set(again.times) == {"cache"}
    assert again.metadata == first.metadata and again.metadata.tensor_maps == (MAP,)
    # An entry whose maps are not maps is deleted and compiled again, never a crash.
    (path,) = sorted((fresh_cache / "kernel").iterdir())
    for broken in ([{"view": 0, "box": "wide", "swizzle": 128}], [{"view": 0}], None):
        payload = first.to_payload()
        payload["tensor_maps"] = broken
        path.write_bytes(cache.encode_file("kernel", path.name, payload))
        cache.clear()
        with pytest.warns(cache.CacheWarning, match="unusable"):
            assert _tma_copy(handwritten).metadata == first.metadata
    payload = first.to_payload()
    del payload["tensor_maps"]  # an entry written before tensor maps
    path.write_bytes(cache.encode_file("kernel", path.name, payload))
    cache.clear()
    with pytest.warns(cache.CacheWarning, match="unusable"):
        assert _tma_copy(handwritten).metadata == first.metadata


# ---------------------------------------------------------------------------------------------
# TensorMapParam


def test_tensor_map_params_are_checked() -> None:
    assert TensorMapParam(np.int64(1), [8, 64], 64) == TensorMapParam(1, (8, 64), 64)
    assert TensorMapParam(0, (8,), 32).swizzle_mode == Swizzle.B32
    for bad, message in [((-1, (8,), 0), "view must be an argument index"),
                         ((0, (), 0), "box must be positive integers"),
                         ((0, (8, 0), 0), "box must be positive integers"),
                         ((True, (8,), 0), "view must be an argument index"),
                         ((0, (8,), 16), "swizzle must be one of 0, 32, 64, 128"),
                         ((0, (8, 8), 0, (0, 0)), "dims must order the box's 2 dimensions"),
                         ((0, (8, 8), 0, (1,)), "dims must order the box's 2 dimensions")]:
        with pytest.raises(ArgumentError, match=message):
            TensorMapParam(*bad)
    params = [V("x", "f16", 2), S("n", "i32")]
    check_tensor_maps(params, [TensorMapParam(0, (256, 64), 128)])
    for m, message in [
        (TensorMapParam(1, (8,), 0), r"over argument 1 \(n: i32\), not a view"),
        (TensorMapParam(2, (8,), 0), "over argument 2 (none), not a view"),
        (TensorMapParam(0, (8, 64), 64), r"inner dimension \(128 bytes\) exceeds the swizzle"),
        (TensorMapParam(0, (8, 4), 0), r"inner dimension is 8 bytes"),
        (TensorMapParam(0, (512, 64), 0), r"box_dims\[1\] = 512 must be in 1..256"),
    ]:
        with pytest.raises(ArgumentError, match=message.replace("(none)", r"\(none\)")):
            check_tensor_maps(params, [m])


# ---------------------------------------------------------------------------------------------
# the CUDA launcher (no GPU here: the driver is replaced)


class _FakeCudaTensor:
    """Just enough of a CUDA torch tensor for cuda_args."""

    __module__ = "torch.fake"

    def __init__(self, ptr: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self._ptr, self.shape, self._stride = ptr, shape, stride
        self.ndim = len(shape)
        self.dtype = "torch.float16"
        self.device = type("device", (), {"type": "cuda", "index": 0})()
        self.layout = "torch.strided"

    def data_ptr(self) -> int:
        return self._ptr

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def stride(self) -> tuple[int, ...]:
        return self._stride

    def element_size(self) -> int:
        return 2


@pytest.fixture
def encoded(monkeypatch) -> Iterator[list[TensorMap]]:
    """Replaces the driver's encoding: a map becomes 128 bytes that name its address; returns
    the maps encoded."""
    seen: list[TensorMap] = []

    def encode(self: TensorMap) -> bytes:
        seen.append(self)
        return int(self.base).to_bytes(8, "little") * 16

    monkeypatch.setattr(TensorMap, "encode_cuda", encode)
    abi.encode_tensor_map.cache_clear()
    yield seen
    abi.encode_tensor_map.cache_clear()


def test_cuda_args_end_with_the_encoded_maps(encoded: list[TensorMap]) -> None:
    x = _FakeCudaTensor(0x7F00_0000_1000, (40, 100), (128, 1))
    y = _FakeCudaTensor(0x7F00_0002_0000, (48, 128), (128, 1))
    flat = abi.cuda_args(SIG, [x, y, -3, 5], "tma_copy", [MAP])
    assert len(flat) == 13 and flat[-1] == (0x7F00_0000_1000).to_bytes(8, "little") * 16
    (tmap,) = encoded
    assert tmap == TensorMap(0x7F00_0000_1000, tmap.dtype, (100, 40), (256,), (64, 16),
                             swizzle=Swizzle.B128, l2_promotion=L2Promotion.B128,
                             oob_fill=OOBFill.ZERO)
    assert tmap.dtype.name == "FLOAT16"
    abi.cuda_args(SIG, [x, y, 0, 0], "tma_copy", [MAP])
    assert len(encoded) == 1, "the same map is encoded once"
    moved = _FakeCudaTensor(0x7F00_0000_2000, (40, 100), (128, 1))
    abi.cuda_args(SIG, [moved, y, 0, 0], "tma_copy", [MAP])
    assert len(encoded) == 2
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: view<\?x\?xf16>\) has tensor map "
                                            r"0 .* address 0x7f0000001002 must be 16-byte"):
        abi.cuda_args(SIG, [_FakeCudaTensor(0x7F00_0000_1002, (40, 100), (128, 1)), y, 0, 0],
                      "tma_copy", [MAP])


def _read_params(address: int, sizes: list[int]) -> list[tuple[int, bytes]]:
    """(address, bytes) of each parameter behind a ``void**`` of ``len(sizes)`` pointers."""
    pointers = (ctypes.c_void_p * len(sizes)).from_address(address)
    return [(int(pointers[i]), ctypes.string_at(pointers[i], n)) for i, n in enumerate(sizes)]


def test_packed_params_hold_each_value_aligned() -> None:
    tmap = bytes(range(128))
    flat = [np.uint64(0x7F00_0000_1000), np.int64(-2), np.uint16(0x3C00), np.uint32(7), tmap,
            np.float32(0.5), tmap[::-1]]
    packed = cuda.PackedParams(flat)
    got = _read_params(packed.address, [8, 8, 2, 4, 128, 4, 128])
    assert [b for _, b in got] == [v if isinstance(v, bytes) else v.tobytes() for v in flat]
    assert all(a % min(len(b), 64) == 0 for a, b in got)  # a CUtensorMap: 64
    with pytest.raises(DeviceError, match="kernel parameter 0: cannot pass a int"):
        cuda.PackedParams([3])


def test_cuda_launch_passes_the_maps_by_value(encoded: list[TensorMap], monkeypatch) -> None:
    """With tensor maps, the launcher calls cuLaunchKernel on parameters it packs itself: the
    ABI's values, then the driver's 128 bytes of each map."""
    driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings not installed")
    launched: list[Any] = []

    def cu_launch_kernel(function: Any, *config: Any) -> tuple[Any]:
        *dims, shared, stream, params, extra = config
        launched.append((function, dims, shared, stream, extra,
                         _read_params(params, [8] * 10 + [4, 4, 128])))
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuLaunchKernel", cu_launch_kernel)
    monkeypatch.setattr(cuda, "_current_stream", lambda module: 7)
    packs: list[int] = []
    real_cuda_args = cuda.cuda_args

    def counted_cuda_args(*a: Any, **k: Any) -> Any:
        packs.append(1)
        return real_cuda_args(*a, **k)

    monkeypatch.setattr(cuda, "cuda_args", counted_cuda_args)

    class Module:
        device = type("d", (), {"set_current": lambda self: None})()

        def __init__(self) -> None:
            self.packed: dict[Any, Any] = {}

        def function(self, name: str) -> Any:
            return "function"

    x = _FakeCudaTensor(0x7F00_0000_1000, (40, 100), (128, 1))
    y = _FakeCudaTensor(0x7F00_0002_0000, (48, 128), (128, 1))
    module: Any = Module()
    cuda.launch(module, "tma_copy", SIG, (2, 3, 1), (128, 1, 1), [x, y, -3, 5],
                tensor_maps=[MAP])
    ((function, dims, shared, stream, extra, params),) = launched
    assert (function, dims, shared, stream, extra) == ("function", [2, 3, 1, 128, 1, 1], 0, 7, 0)
    values = [b for _, b in params]
    assert values[0] == (0x7F00_0000_1000).to_bytes(8, "little")
    assert [int.from_bytes(b, "little", signed=True) for b in values[1:12]] == [
        40, 100, 128, 1, 0x7F00_0002_0000, 48, 128, 128, 1, -3, 5]
    assert values[12] == (0x7F00_0000_1000).to_bytes(8, "little") * 16
    assert params[12][0] % 64 == 0, "a CUtensorMap is 64-byte aligned"
    # Launched again with the same tensors and numbers: the packed parameters are reused;
    # another scalar or another tensor address packs (and checks) them again.
    cuda.launch(module, "tma_copy", SIG, (2, 3, 1), (128, 1, 1), [x, y, -3, 5],
                tensor_maps=[MAP])
    assert len(packs) == 1 and launched[1][5] == launched[0][5]
    cuda.launch(module, "tma_copy", SIG, (2, 3, 1), (128, 1, 1), [x, y, -3, 6],
                tensor_maps=[MAP])
    moved = _FakeCudaTensor(0x7F00_0004_0000, (40, 100), (128, 1))
    cuda.launch(module, "tma_copy", SIG, (2, 3, 1), (128, 1, 1), [moved, y, -3, 6],
                tensor_maps=[MAP])
    assert len(packs) == 3
    assert launched[3][5][12][1] == (0x7F00_0004_0000).to_bytes(8, "little") * 16
    # A bad argument is refused whatever was launched before.
    with pytest.raises(ArgumentError):
        cuda.launch(module, "tma_copy", SIG, (2, 3, 1), (128, 1, 1), [x, y, -3, 2.5],
                    tensor_maps=[MAP])


def _hopper() -> tuple[bool, str]:
    ok, why = cuda.driver_available()
    if not ok:
        return False, why
    if not torch.cuda.is_available():
        return False, "torch has no CUDA (CPU build)"
    if torch.cuda.get_device_capability() != (9, 0):
        return False, f"sm_90a code runs on sm_90 only, got {torch.cuda.get_device_capability()}"
    return True, ""


HOPPER, NO_HOPPER = _hopper()


@pytest.mark.skipif(not HOPPER, reason=f"needs an NVIDIA Hopper GPU (sm_90): {NO_HOPPER}")
def test_tma_copy_on_a_gpu(handwritten) -> None:
    """The same copy on a Hopper GPU, through the driver's tensor map."""
    k = _tma_copy(handwritten)
    buf = torch.randn(43, 256, device="cuda").half()
    x = buf[2:42, 8:108]
    y = torch.full((48, 128), float("nan"), device="cuda", dtype=torch.float16)
    k.launch((2, 3), x, y, -5, 9, device="cuda")
    torch.cuda.synchronize()
    torch.testing.assert_close(_unswizzle(y.cpu()), _reference(x.cpu(), (48, 128), -5, 9),
                               rtol=0, atol=0)
