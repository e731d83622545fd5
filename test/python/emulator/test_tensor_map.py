"""tileopt.runtime.tma.TensorMap: the fields of cuTensorMapEncodeTiled, the driver's rules,
the emulator's encoding of a map."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tileopt.emulator.tma import decode_map
from tileopt.errors import DeviceError
from tileopt.runtime.tma import DataType, Interleave, OOBFill, Swizzle, TensorMap


def test_from_tensor_reverses_to_innermost_first() -> None:
    t = torch.zeros(6, 50, 40, dtype=torch.bfloat16)
    tm = TensorMap.from_tensor(t, (2, 16, 32), swizzle=Swizzle.B64, element_strides=(1, 2, 1))
    assert tm.dtype == DataType.BFLOAT16
    assert tm.global_dims == (40, 50, 6)
    assert tm.global_strides == (80, 4000)
    assert tm.box_dims == (32, 16, 2)
    assert tm.element_strides == (1, 2, 1)
    assert tm.box_elements == (32, 8, 2)
    assert tm.box_bytes == 32 * 8 * 2 * 2
    a = np.zeros((10, 8), np.float32)
    tm = TensorMap.from_tensor(a, (4, 8), oob_fill=OOBFill.NAN)
    assert (tm.dtype, tm.global_dims, tm.global_strides) == (DataType.FLOAT32, (8, 10), (32,))
    assert "FLOAT32" in repr(tm) and "ndarray(10, 8)" in repr(tm)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(global_dims=(), global_strides=(), box_dims=()), "rank must be 1..5"),
        (
            dict(global_dims=(8,) * 6, global_strides=(16,) * 5, box_dims=(8,) * 6),
            "rank must be 1..5",
        ),
        (dict(global_strides=(40,)), r"global_strides\[0\] = 40 bytes .* multiple of 16"),
        (dict(box_dims=(8, 300)), r"box_dims\[1\] = 300 must be in 1..256"),
        (dict(box_dims=(6, 8)), "inner dimension is 12 bytes"),
        (dict(box_dims=(32, 8), swizzle=Swizzle.B32), "exceeds the swizzle span"),
        (dict(element_strides=(1, 9)), r"element_strides\[1\] = 9 must be in 1..8"),
        (dict(box_dims=(8,)), "box_dims needs 2 values"),
        (dict(dtype=DataType.INT32, oob_fill=OOBFill.NAN), "NaN out-of-bounds fill"),
        (dict(interleave=Interleave.B32), "needs rank >= 3"),
        (dict(base=0x1008), "must be 16-byte aligned"),
    ],
    ids=[
        "rank0",
        "rank6",
        "stride",
        "box",
        "inner16",
        "swizzle",
        "estride",
        "count",
        "nan",
        "interleave",
        "address",
    ],
)
def test_driver_rules(kwargs, message: str) -> None:
    fields = dict(
        base=0x10000,
        dtype=DataType.FLOAT16,
        global_dims=(64, 32),
        global_strides=(128,),
        box_dims=(16, 8),
    )
    fields.update(kwargs)
    with pytest.raises(ValueError, match=message):
        TensorMap(**fields)


def test_from_tensor_rules() -> None:
    a = np.zeros((16, 17), np.float32)
    with pytest.raises(ValueError, match=r"global_strides\[0\] = 68"):
        TensorMap.from_tensor(a, (8, 8))
    with pytest.raises(ValueError, match="must be contiguous"):
        TensorMap.from_tensor(np.zeros((16, 16), np.float32).T, (8, 8))
    with pytest.raises(ValueError, match="has rank 1"):
        TensorMap.from_tensor(np.zeros((16, 16), np.float32), (8,))
    with pytest.raises(ValueError, match="must be 16-byte aligned"):
        TensorMap.from_tensor(np.zeros(40, np.float32)[1:33], (8,))


def test_the_emulator_encoding_round_trips() -> None:
    a = np.zeros((12, 20, 32), np.float16)
    tm = TensorMap.from_tensor(
        a, (3, 8, 32), swizzle=Swizzle.B64, oob_fill=OOBFill.NAN, element_strides=(2, 1, 1)
    )
    from tileopt.emulator.module import _encode_map

    info = decode_map(_encode_map(tm, 0x7F00_0000_1000))
    assert (info.address, info.rank, info.elemtype, info.esize) == (0x7F00_0000_1000, 3, "f16", 2)
    assert info.dims == (32, 20, 12) and info.strides == (2, 64, 1280)
    assert info.box == (32, 8, 3) and info.estrides == (1, 1, 2)
    assert info.counts == (32, 8, 2) and info.nbytes == tm.box_bytes
    assert (info.swizzle, info.fill_nan) == (64, True)
    with pytest.raises(ValueError, match="not a tensor map"):
        decode_map(bytes(128))


def test_encode_cuda_needs_a_driver() -> None:
    a = torch.zeros(64, 64, dtype=torch.float16)
    tm = TensorMap.from_tensor(a, (64, 64), swizzle=Swizzle.B128)
    try:
        raw = tm.encode_cuda()
    except DeviceError as e:  # no GPU here: the error says what is missing
        assert "cuTensorMapEncodeTiled" in str(e) or "cuda-python" in str(e)
    else:  # pragma: no cover - with a CUDA driver
        assert len(raw) == 128
