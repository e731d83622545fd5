"""The kernel ABI in Python: argument checks and the flat parameter lists (no native build)."""

from __future__ import annotations

import numpy as np
import pytest
from tileopt.errors import TileoptError
from tileopt.runtime.abi import (
    ArgumentError,
    KernelParam,
    cuda_args,
    emulator_args,
    f32_to_bf16_bits,
    scalar_param,
)

V = KernelParam.view
S = KernelParam.scalar


def test_ptx_parameter_widths() -> None:
    assert V("x", "f16", 3).ptx_param_bits() == [64] * 7
    assert V("x", "f32", 0).ptx_param_bits() == [64]
    assert [S("n", d).ptx_param_bits() for d in ("i32", "i64", "index", "f32", "f64")] == [
        [32], [64], [64], [32], [64]]
    assert S("a", "bf16").ptx_param_bits() == [16] and S("b", "i1").ptx_param_bits() == [8]
    assert str(V("x", "f32", 2)) == "x: view<?x?xf32>" and str(S("n", "i32")) == "n: i32"


def test_bad_params() -> None:
    with pytest.raises(ArgumentError, match="unknown ABI type 'f8'"):
        V("x", "f8", 1)
    with pytest.raises(ArgumentError, match="a scalar has no rank, shape or strides"):
        KernelParam("n", "scalar", "i32", 2)


def _split(flat, rank):
    """(buffer, first element's index in it, sizes, strides) of the first view in a flat list:
    the pointer is the buffer, or an emulator Pointer into it."""
    from tileopt.emulator import Pointer

    pointer = flat[0]
    buffer, first = pointer, 0
    if isinstance(pointer, Pointer):
        buffer = pointer.buffer
        first, rem = divmod(pointer.byte_offset, buffer.itemsize)
        assert rem == 0
    return buffer, first, [int(v) for v in flat[1:1 + rank]], [
        int(v) for v in flat[1 + rank:1 + 2 * rank]]


def _reach(buffer, offset, sizes, strides) -> np.ndarray:
    """The view's elements read back from a 1-D buffer through offset/sizes/strides."""
    idx = np.full(sizes, offset, dtype=np.int64)
    for d, (n, st) in enumerate(zip(sizes, strides, strict=True)):
        shape = [1] * len(sizes)
        shape[d] = n
        idx = idx + (np.arange(n) * st).reshape(shape)
    return np.asarray(buffer)[idx]


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a,
        lambda a: a.T,
        lambda a: a[1:, 2:],
        lambda a: a[::2, ::3],
        lambda a: a[::-1],
        lambda a: a[:, ::-2],
        lambda a: a[3:4, :],
    ],
    ids=["contiguous", "transposed", "offset", "stepped", "reversed", "neg-stepped", "one-row"],
)
def test_numpy_views_keep_their_strides(make) -> None:
    base = np.arange(7 * 9, dtype=np.float32).reshape(7, 9)
    a = make(base)
    flat = emulator_args([V("a", "f32", 2)], [a], "k")
    assert len(flat) == 5
    buffer, offset, sizes, strides = _split(flat, 2)
    # Only negative strides put the first element past the buffer's start.
    assert (offset != 0) == any(st < 0 for st in a.strides)
    assert sizes == list(a.shape)
    assert strides == [s // 4 for s in a.strides]
    assert buffer.ndim == 1 and buffer.dtype == np.float32
    # The buffer spans exactly the reachable elements of the view, no more.
    assert buffer.size == 1 + sum((n - 1) * abs(st) for n, st in zip(sizes, strides, strict=True))
    np.testing.assert_array_equal(_reach(buffer, offset, sizes, strides), a)
    # and it aliases the caller's memory (results are written back in place).
    assert np.shares_memory(buffer, base)


def test_torch_views_keep_their_strides() -> None:
    torch = pytest.importorskip("torch")
    base = torch.arange(6 * 10, dtype=torch.float32).reshape(6, 10)
    for a in (base, base.t(), base[2:, 3:7], base[::2, 1::3], base.expand(2, 6, 10)[1]):
        flat = emulator_args([V("a", "f32", 2)], [a], "k")
        buffer, offset, sizes, strides = _split(flat, 2)
        assert offset == 0 and sizes == list(a.shape) and strides == list(a.stride())
        assert buffer.data_ptr() == a.data_ptr()
        np.testing.assert_array_equal(_reach(buffer.numpy(), 0, sizes, strides), a.numpy())


def test_scalars_are_typed_like_their_ptx_parameters() -> None:
    assert scalar_param(0, S("n", "i32"), -1) == np.uint32(0xFFFF_FFFF)
    assert scalar_param(0, S("n", "i64"), np.int64(5)) == np.uint64(5)
    assert scalar_param(0, S("a", "f32"), 2) == np.float32(2.0)
    assert isinstance(scalar_param(0, S("a", "f32"), 2), np.float32)
    assert scalar_param(0, S("a", "f64"), 0.1) == np.float64(0.1)
    assert scalar_param(0, S("a", "f16"), 1.5) == np.float16(1.5).view(np.uint16)
    assert scalar_param(0, S("a", "bf16"), 1.0) == np.uint16(0x3F80)
    assert scalar_param(0, S("a", "f32"), np.array(3.0)) == np.float32(3.0)  # 0-d arrays


def test_bf16_rounding_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    values = [0.0, -0.0, 1.0, 3.140625, 1 / 3, -2.7182818, 1e-40, 3.4e38, float("inf"), 65504.0,
              1.00390625, 1.01171875]  # the last two are ties: round to even
    for v in values:
        want = int(torch.tensor(v, dtype=torch.float32).to(torch.bfloat16).view(torch.int16))
        assert f32_to_bf16_bits(v) == want & 0xFFFF, v
    nan_bits = f32_to_bf16_bits(float("nan"))
    assert nan_bits & 0x7F80 == 0x7F80 and nan_bits & 0x7F


PARAMS = [V("x", "f32", 1), V("y", "f32", 2), S("n", "i32")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros(4, np.float32), np.zeros((2, 2), np.float32)), "takes 3 arguments .* got 2"),
        ((np.zeros(4, np.float64), np.zeros((2, 2), np.float32), 1),
         r"argument 0 \(x: view<\?xf32>\) expects elements of f32 \(float32\), got float64"),
        ((np.zeros(4, np.float32), np.zeros(4, np.float32), 1),
         r"argument 1 \(y: view<\?x\?xf32>\) expects rank 2, got shape \(4,\) \(rank 1\)"),
        ((np.zeros(4, np.float32), [[0.0]], 1),
         r"argument 1 \(y: view<\?x\?xf32>\) is a view: pass a numpy array or torch tensor, "
         r"got list"),
        ((np.zeros(4, np.float32), np.zeros((2, 2), np.float32), 1.5),
         r"argument 2 \(n: i32\) expects an integer, got float"),
        ((np.zeros(4, np.float32), np.zeros((2, 2), np.float32), 1 << 40),
         r"argument 2 \(n: i32\): 1099511627776 does not fit in 32 bits"),
        ((np.zeros(4, np.float32), np.zeros((2, 2), np.float32), np.zeros(3)),
         r"argument 2 \(n: i32\) is a scalar: pass a number or a 0-d array, got ndarray of "
         r"shape \(3,\)"),
    ],
)
def test_mismatches_name_the_argument(args, message) -> None:
    with pytest.raises(ArgumentError, match=message) as info:
        emulator_args(PARAMS, list(args), "k")
    assert isinstance(info.value, TileoptError)


def test_signless_integers_and_bf16() -> None:
    emulator_args([V("a", "i32", 1)], [np.zeros(3, np.uint32)], "k")
    with pytest.raises(ArgumentError, match="numpy has no bfloat16: pass a torch tensor"):
        emulator_args([V("a", "bf16", 1)], [np.zeros(3, np.float16)], "k")
    torch = pytest.importorskip("torch")
    emulator_args([V("a", "bf16", 1)], [torch.zeros(3, dtype=torch.bfloat16)], "k")


def test_cuda_args_need_cuda_tensors() -> None:
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: view<\?xf32>\) is a numpy array"):
        cuda_args([V("x", "f32", 1)], [np.zeros(3, np.float32)], "k")
    torch = pytest.importorskip("torch")
    with pytest.raises(ArgumentError, match="is on cpu: device='cuda' needs CUDA torch tensors"):
        cuda_args([V("x", "f32", 1)], [torch.zeros(3)], "k")


def test_ptx_parameters_map_back_to_arguments() -> None:
    from tileopt.runtime.abi import describe_ptx_param

    params = [V("x", "f32", 2), S("n", "i32"), V("y", "f16", 1)]
    got = [describe_ptx_param(params, i) for i in range(9)]
    assert got[0] == "PTX parameter 0 is the pointer of argument 0 (x: view<?x?xf32>)"
    assert got[1].startswith("PTX parameter 1 is the size 0 of argument 0")
    assert got[2].startswith("PTX parameter 2 is the size 1 of argument 0")
    assert got[4].startswith("PTX parameter 4 is the stride 1 of argument 0")
    assert got[5] == "PTX parameter 5 is the value of argument 1 (n: i32)"
    assert got[8] == "PTX parameter 8 is the stride 0 of argument 2 (y: view<?xf16>)"
    assert "not part of the kernel ABI (9 parameters)" in describe_ptx_param(params, 9)


class _FakeCudaTensor:
    """Just enough of a CUDA torch tensor for cuda_args (no GPU here)."""

    __module__ = "torch.fake"

    def __init__(self, ptr: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self._ptr, self.shape, self._stride = ptr, shape, stride
        self.ndim = len(shape)
        self.dtype = "torch.float32"
        self.device = type("device", (), {"type": "cuda", "index": 0})()

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, ...]:
        return self._stride


def test_cuda_args_pack_into_cuda_core_kernel_parameters() -> None:
    """The flat list cuda.core receives holds exactly the ABI's values and widths."""
    import ctypes

    handler = pytest.importorskip("cuda.core.cu13._kernel_arg_handler",
                                  reason="cuda-core is not installed")
    params = [V("x", "f32", 2), S("n", "i32"), S("eps", "f32"), S("h", "bf16"), S("m", "i64")]
    x = _FakeCudaTensor(0x7F00_0000_1000, (3, 5), (10, 2))
    flat = cuda_args(params, [x, -7, 0.25, 1.0, 1 << 40], "k")
    types = (ctypes.c_uint64, *(ctypes.c_int64,) * 4, ctypes.c_int32, ctypes.c_float,
             ctypes.c_uint16, ctypes.c_int64)
    assert len(flat) == len(types) == sum(len(p.ptx_param_bits()) for p in params)
    holder = handler.ParamHolder(flat)
    slots = (ctypes.c_void_p * len(flat)).from_address(holder.ptr)
    got = [t.from_address(slots[i]).value for i, t in enumerate(types)]
    assert got == [0x7F00_0000_1000, 3, 5, 10, 2, -7, 0.25, 0x3F80, 1 << 40]


def test_params_parse_what_they_print() -> None:
    static = V("x", "f32", 2, shape=(128, None), strides=(None, 1))
    assert str(static) == "x: view<128x?xf32, strides [?, 1]>"
    assert str(V("in_0", "bf16", 0)) == "in_0: view<bf16>"
    for p in (V("x", "f32", 2), V("in_0", "bf16", 0), S("n", "i32"), S("eps", "f64"), static,
              V("y", "f16", 1, strides=(1,)), S("m", "index", index_bitwidth=32)):
        assert KernelParam.parse(str(p)) == p
    assert KernelParam.parse("x:view<?x?x?xi8>") == V("x", "i8", 3)
    # All-dynamic static info is the same parameter as none.
    assert V("x", "f32", 2, shape=(None, None), strides=(None, None)) == V("x", "f32", 2)
    with pytest.raises(ArgumentError, match="cannot read a kernel parameter from 'x view'"):
        KernelParam.parse("x view")
    with pytest.raises(ArgumentError, match="unknown ABI type 'f7'"):
        KernelParam.parse("x: f7")



def test_integer_scalars_promised_below_2_31_are_checked() -> None:
    # A formed kernel's extents: index arguments with tile.index_bitwidth = 32, on which its
    # index arithmetic narrows to 32 bits.
    p = [S("n", "index", index_bitwidth=32), S("m", "i64")]
    assert str(p[0]) == "n: index<index_bitwidth 32>"
    emulator_args(p, [2**31 - 1, 2**40], "k")
    for bad in (2**31, -1):
        with pytest.raises(ArgumentError, match=rf"argument 0 \(n: index<index_bitwidth 32>\) "
                                                rf"was compiled with 32-bit indices .* got {bad}"):
            emulator_args(p, [bad, 0], "k")
    with pytest.raises(ArgumentError, match="index_bitwidth is a promise of views and integers"):
        S("eps", "f32", index_bitwidth=32)


def test_static_sizes_and_strides_are_checked() -> None:
    p = [V("x", "f32", 2, shape=(4, None), strides=(None, 1))]
    base = np.zeros((4, 10), np.float32)
    emulator_args(p, [base], "k")
    emulator_args(p, [base[:, 2:5]], "k")  # stride (10, 1): fine
    emulator_args(p, [base[:, :1][:, ::-1]], "k")  # a size-1 dimension's stride is irrelevant
    with pytest.raises(ArgumentError, match=r"static size 4 in dimension 0, got shape \(3, 10\)"):
        emulator_args(p, [base[:3]], "k")
    transposed = np.zeros((10, 4), np.float32).T
    with pytest.raises(ArgumentError, match=r"static stride 1 in dimension 1, got strides \(1, 4"):
        emulator_args(p, [transposed], "k")
    # A memref's offset is not part of the ABI: any first element is fine.
    emulator_args([V("x", "f32", 1)], [np.arange(5, dtype=np.float32)[::-1]], "k")
