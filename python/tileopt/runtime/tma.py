"""Tensor maps for Hopper's Tensor Memory Accelerator (TMA), on the host.

A TMA copy (``cp.async.bulk.tensor``) names a *tensor map*: a 128-byte opaque object
(``CUtensorMap``) that the CUDA driver encodes from a description of a tensor in global memory
and of the box one copy moves (``cuTensorMapEncodeTiled``). :class:`TensorMap` is that
description, checked against the driver's rules when it is made:

    from tileopt.runtime.tma import TensorMap, Swizzle
    a = torch.randn(200, 104, dtype=torch.float16)
    amap = TensorMap.from_tensor(a, box=(64, 32), swizzle=Swizzle.B64)   # row-major shapes
    raw = amap.encode_cuda()            # the driver's 128 bytes (needs a CUDA driver)

Its fields follow ``cuTensorMapEncodeTiled``: dimensions innermost (contiguous) first, global
strides in bytes for dimensions 1..rank-1. Kernels take a map by value (a ``.param .align 64
.b8 map[128]`` parameter, ``const __grid_constant__ CUtensorMap`` in CUDA C; what Triton's
host-side ``TensorDescriptor`` becomes) or through a pointer to global memory. The PTX
emulator (:mod:`tileopt.emulator`) takes a :class:`TensorMap` as the argument of either kind
of parameter and writes its own encoding of the map (the driver's is undocumented), with
:attr:`TensorMap.base` placed in emulated global memory like a buffer argument.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tileopt.errors import DeviceError

MAP_BYTES = 128
MAX_RANK = 5
MAX_BOX = 256


class DataType(enum.IntEnum):
    """``CUtensorMapDataType``: the element type."""

    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    INT32 = 3
    UINT64 = 4
    INT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT32_FTZ = 10
    TFLOAT32 = 11
    TFLOAT32_FTZ = 12

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self >= DataType.FLOAT16


_ITEMSIZE = {
    DataType.UINT8: 1,
    DataType.UINT16: 2,
    DataType.UINT32: 4,
    DataType.INT32: 4,
    DataType.UINT64: 8,
    DataType.INT64: 8,
    DataType.FLOAT16: 2,
    DataType.FLOAT32: 4,
    DataType.FLOAT64: 8,
    DataType.BFLOAT16: 2,
    DataType.FLOAT32_FTZ: 4,
    DataType.TFLOAT32: 4,
    DataType.TFLOAT32_FTZ: 4,
}


class Interleave(enum.IntEnum):
    """``CUtensorMapInterleave``."""

    NONE = 0
    B16 = 1
    B32 = 2


class Swizzle(enum.IntEnum):
    """``CUtensorMapSwizzle``: how a box is permuted across shared-memory banks."""

    NONE = 0
    B32 = 1
    B64 = 2
    B128 = 3

    @property
    def span(self) -> int:
        """Bytes of one swizzled row (0: no swizzle)."""
        return (0, 32, 64, 128)[self]


class L2Promotion(enum.IntEnum):
    """``CUtensorMapL2promotion``."""

    NONE = 0
    B64 = 1
    B128 = 2
    B256 = 3


class OOBFill(enum.IntEnum):
    """``CUtensorMapFloatOOBfill``: what a load puts in box elements outside the tensor."""

    ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros
    NAN = 1  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA: a NaN (float types only)


# torch / numpy dtype names -> DataType
_DTYPES = {
    "uint8": DataType.UINT8,
    "int8": DataType.UINT8,
    "uint16": DataType.UINT16,
    "int16": DataType.UINT16,
    "uint32": DataType.UINT32,
    "int32": DataType.INT32,
    "uint64": DataType.UINT64,
    "int64": DataType.INT64,
    "float16": DataType.FLOAT16,
    "float32": DataType.FLOAT32,
    "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.UINT8,
    "float8_e5m2": DataType.UINT8,
}


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _address(base) -> int:
    if isinstance(base, int):
        return base
    if hasattr(base, "data_ptr"):
        return int(base.data_ptr())
    return int(base.__array_interface__["data"][0])


@dataclass(frozen=True)
class TensorMap:
    """A tiled tensor map: the arguments of ``cuTensorMapEncodeTiled``.

    Attributes:
        base: the tensor: a numpy array or torch tensor whose first element is the map's
            global address, or an int device address (:meth:`encode_cuda` only).
        dtype: the element type.
        global_dims: elements per dimension, innermost (contiguous) dimension first.
        global_strides: bytes between consecutive indices of dimensions 1..rank-1 (rank-1
            values; dimension 0 is contiguous).
        box_dims: elements per dimension that one copy moves (its box), innermost first.
        element_strides: traversal step per dimension (1..8); the box then holds
            ``ceil(box_dims[i] / element_strides[i])`` elements along dimension i (the stride
            of dimension 0 is ignored, as the driver does, when there is no interleave).
        interleave, swizzle, l2_promotion, oob_fill: the driver's enums.

    Raises:
        ValueError: on making a map the driver would reject (the message names the rule).
    """

    base: object
    dtype: DataType
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...] = field(default=())
    interleave: Interleave = Interleave.NONE
    swizzle: Swizzle = Swizzle.NONE
    l2_promotion: L2Promotion = L2Promotion.B128
    oob_fill: OOBFill = OOBFill.ZERO

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "dtype", DataType(self.dtype))
        set_(self, "global_dims", tuple(int(d) for d in self.global_dims))
        set_(self, "global_strides", tuple(int(s) for s in self.global_strides))
        set_(self, "box_dims", tuple(int(b) for b in self.box_dims))
        es = self.element_strides or (1,) * len(self.global_dims)
        set_(self, "element_strides", tuple(int(e) for e in es))
        set_(self, "interleave", Interleave(self.interleave))
        set_(self, "swizzle", Swizzle(self.swizzle))
        set_(self, "l2_promotion", L2Promotion(self.l2_promotion))
        set_(self, "oob_fill", OOBFill(self.oob_fill))
        self.validate()

    # ------------------------------------------------------------ construction

    @classmethod
    def from_tensor(
        cls,
        tensor,
        box: tuple[int, ...],
        *,
        swizzle: Swizzle = Swizzle.NONE,
        oob_fill: OOBFill = OOBFill.ZERO,
        dtype: DataType | None = None,
        element_strides: tuple[int, ...] | None = None,
        l2_promotion: L2Promotion = L2Promotion.B128,
    ) -> TensorMap:
        """A map over a whole numpy array / torch tensor, shapes given row-major (outermost
        first, as ``tensor.shape`` and Triton's ``block_shape``); the last dimension must be
        contiguous. *element_strides* is row-major too."""
        shape = tuple(int(n) for n in tensor.shape)
        if not shape:
            raise ValueError("a tensor map needs a tensor of rank 1..5, got a scalar")
        if hasattr(tensor, "stride") and callable(tensor.stride):
            item = tensor.element_size()
            strides = tuple(int(s) * item for s in tensor.stride())
        else:
            item = tensor.itemsize
            strides = tuple(int(s) for s in tensor.strides)
        if len(box) != len(shape):
            raise ValueError(f"box {tuple(box)} has rank {len(box)}, the tensor {len(shape)}")
        if shape[-1] > 1 and strides[-1] != item:
            raise ValueError(
                f"the last dimension must be contiguous (stride {strides[-1]} bytes, element "
                f"{item} bytes)"
            )
        if dtype is None:
            name = _dtype_name(tensor)
            if name not in _DTYPES:
                raise ValueError(f"no tensor-map element type for dtype {name}; pass dtype=")
            dtype = _DTYPES[name]
        return cls(
            tensor,
            dtype,
            shape[::-1],
            strides[::-1][1:],
            tuple(box)[::-1],
            tuple(element_strides)[::-1] if element_strides else (),
            Interleave.NONE,
            swizzle,
            l2_promotion,
            oob_fill,
        )

    # ------------------------------------------------------------ properties

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def box_elements(self) -> tuple[int, ...]:
        """Elements of the box per dimension (innermost first), element strides applied."""
        first = (
            self.box_dims[0]
            if self.interleave == Interleave.NONE
            else -(-self.box_dims[0] // self.element_strides[0])
        )
        return (first,) + tuple(
            -(-b // e) for b, e in zip(self.box_dims[1:], self.element_strides[1:], strict=True)
        )

    @property
    def box_bytes(self) -> int:
        """Bytes one copy moves into shared memory (the ``expect_tx`` count of a load)."""
        n = 1
        for b in self.box_elements:
            n *= b
        return n * self.element_size

    @property
    def address(self) -> int:
        """The map's global address (``data_ptr()`` of a tensor)."""
        return _address(self.base)

    # ------------------------------------------------------------ checks

    def validate(self) -> None:
        """Raise ValueError unless ``cuTensorMapEncodeTiled`` would accept the map."""
        r = self.rank
        if not 1 <= r <= MAX_RANK:
            raise ValueError(f"tensor map rank must be 1..{MAX_RANK}, got {r}")
        if self.interleave != Interleave.NONE and r < 3:
            raise ValueError("an interleaved tensor map needs rank >= 3")
        for what, seq, n in (
            ("global_strides", self.global_strides, r - 1),
            ("box_dims", self.box_dims, r),
            ("element_strides", self.element_strides, r),
        ):
            if len(seq) != n:
                raise ValueError(f"{what} needs {n} values for rank {r}, got {len(seq)}")
        align = 32 if self.interleave == Interleave.B32 else 16
        if not isinstance(self.base, int) and self.base is not None:
            addr = self.address
            if addr % align:
                raise ValueError(f"the tensor's address 0x{addr:x} must be {align}-byte aligned")
        elif isinstance(self.base, int) and self.base % align:
            raise ValueError(f"the address 0x{self.base:x} must be {align}-byte aligned")
        for i, d in enumerate(self.global_dims):
            if not 1 <= d <= 1 << 32:
                raise ValueError(f"global_dims[{i}] = {d} must be in 1..2^32")
        for i, s in enumerate(self.global_strides):
            if s % align or not 0 < s < 1 << 40:
                raise ValueError(
                    f"global_strides[{i}] = {s} bytes (dimension {i + 1}) must be a positive "
                    f"multiple of {align} below 2^40"
                )
        for i, b in enumerate(self.box_dims):
            if not 1 <= b <= MAX_BOX:
                raise ValueError(f"box_dims[{i}] = {b} must be in 1..{MAX_BOX}")
        for i, e in enumerate(self.element_strides):
            if not 1 <= e <= 8:
                raise ValueError(f"element_strides[{i}] = {e} must be in 1..8")
        inner = self.box_dims[0] * self.element_size
        if self.interleave == Interleave.NONE:
            if inner % 16:
                raise ValueError(
                    f"the box's inner dimension is {inner} bytes (box_dims[0] = "
                    f"{self.box_dims[0]} x {self.element_size}); it must be a multiple of 16"
                )
            span = self.swizzle.span
            if span and inner > span:
                raise ValueError(
                    f"the box's inner dimension ({inner} bytes) exceeds the swizzle span "
                    f"({span} bytes, {self.swizzle.name}): use a smaller box or a wider swizzle"
                )
        if self.interleave == Interleave.B32 and self.swizzle != Swizzle.B32:
            raise ValueError("INTERLEAVE_32B requires SWIZZLE_32B")
        if self.oob_fill == OOBFill.NAN and not self.dtype.is_float:
            raise ValueError(
                f"NaN out-of-bounds fill needs a floating-point type, not {self.dtype.name}"
            )

    # ------------------------------------------------------------ encoding

    def encode_cuda(self) -> bytes:
        """The driver's 128-byte ``CUtensorMap`` (``cuTensorMapEncodeTiled`` through
        cuda-python's ``cuda.bindings.driver``).

        Raises:
            DeviceError: cuda-python or the CUDA driver is missing, or the driver refused.
        """
        try:
            from cuda.bindings import driver
        except ImportError as e:
            raise DeviceError(
                "TensorMap.encode_cuda needs cuda-python (pip install cuda-python) and a CUDA "
                f"driver: {e}"
            ) from e
        try:
            u32, u64 = driver.cuuint32_t, driver.cuuint64_t
            err, tmap = driver.cuTensorMapEncodeTiled(
                driver.CUtensorMapDataType(int(self.dtype)),
                self.rank,
                self.address,
                [u64(d) for d in self.global_dims],
                [u64(s) for s in self.global_strides],
                [u32(b) for b in self.box_dims],
                [u32(e) for e in self.element_strides],
                driver.CUtensorMapInterleave(int(self.interleave)),
                driver.CUtensorMapSwizzle(int(self.swizzle)),
                driver.CUtensorMapL2promotion(int(self.l2_promotion)),
                driver.CUtensorMapFloatOOBfill(int(self.oob_fill)),
            )
        except (RuntimeError, OSError) as e:  # no libcuda.so
            raise DeviceError(
                f"cuTensorMapEncodeTiled is unavailable (no CUDA driver?): {e}"
            ) from e
        if err != driver.CUresult.CUDA_SUCCESS:
            raise DeviceError(f"cuTensorMapEncodeTiled failed: {err!r} for {self!r}")
        words = list(tmap.opaque)
        return b"".join(int(w).to_bytes(8, "little") for w in words)

    def __repr__(self) -> str:
        base = (
            f"0x{self.base:x}"
            if isinstance(self.base, int)
            else f"{type(self.base).__name__}{tuple(getattr(self.base, 'shape', ()))}"
        )
        return (
            f"TensorMap({base}, {self.dtype.name}, dims={self.global_dims}, "
            f"strides={self.global_strides}, box={self.box_dims}, "
            f"element_strides={self.element_strides}, swizzle={self.swizzle.name}, "
            f"oob_fill={self.oob_fill.name})"
        )


__all__ = [
    "DataType",
    "Interleave",
    "L2Promotion",
    "OOBFill",
    "Swizzle",
    "TensorMap",
]
