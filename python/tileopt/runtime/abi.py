"""The kernel ABI: how a tile kernel's views and scalars become PTX kernel parameters.

The ABI is written down in ``docs/kernel-abi.md``; in short, for each kernel argument in order:

* a view (memref) of rank ``r`` and element type ``T`` is ``1 + 2r`` parameters of ``.u64``:
  the global pointer to the view's first element (the memref's offset is folded into it), the
  ``r`` sizes and the ``r`` strides in elements;
* a scalar is one parameter of its own type (``i32`` -> ``.u32``/``.s32``, ``i64``/``index`` ->
  ``.u64``, ``f32`` -> ``.f32``, ``f64`` -> ``.f64``, ``f16``/``bf16`` -> ``.b16``).

After them, a kernel that copies with Hopper's TMA has one ``.param .align 64 .b8 p[128]`` per
tensor map (:class:`TensorMapParam`): a by-value ``CUtensorMap`` over one of its views, which
the launchers build at every launch.

This module describes a kernel's parameters (:class:`KernelParam`), checks the arguments of a
launch against them (:class:`ArgumentError` names the argument on a mismatch) and expands them
into the flat parameter lists that the emulator and the CUDA launcher take. Pure Python and
numpy; torch is used only when tensors are passed.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tileopt.errors import ArgumentError
from tileopt.runtime.tma import DataType, L2Promotion, OOBFill, Swizzle, TensorMap

ParamKind = Literal["view", "scalar"]


@dataclass(frozen=True)
class DType:
    """An element or scalar type of the ABI: its name, width, and numpy/torch spellings."""

    name: str
    bits: int
    kind: Literal["int", "float", "bool"]
    numpy: tuple[str, ...]
    torch: tuple[str, ...]

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (``i1`` is stored as one byte)."""
        return max(self.bits // 8, 1)


# MLIR integer types are signless: a view of i32 accepts int32 and uint32 tensors alike.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("i1", 1, "bool", ("bool",), ("bool",)),
        DType("i8", 8, "int", ("int8", "uint8"), ("int8", "uint8")),
        DType("i16", 16, "int", ("int16", "uint16"), ("int16", "uint16")),
        DType("i32", 32, "int", ("int32", "uint32"), ("int32", "uint32")),
        DType("i64", 64, "int", ("int64", "uint64"), ("int64", "uint64")),
        DType("index", 64, "int", ("int64", "uint64"), ("int64", "uint64")),
        DType("f16", 16, "float", ("float16",), ("float16",)),
        DType("bf16", 16, "float", (), ("bfloat16",)),
        DType("f32", 32, "float", ("float32",), ("float32",)),
        DType("f64", 64, "float", ("float64",), ("float64",)),
        DType("f8E4M3FN", 8, "float", (), ("float8_e4m3fn",)),
        DType("f8E5M2", 8, "float", (), ("float8_e5m2",)),
    )
}


def dtype(name: str) -> DType:
    """The ABI type called ``name`` (``"f32"``, ``"i32"``, ``"index"``, ...)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ArgumentError(
            f"unknown ABI type {name!r}; expected one of {', '.join(DTYPES)}"
        ) from None


Dims = tuple[int | None, ...]


def _dims(values: Dims) -> str:
    return ", ".join("?" if v is None else str(v) for v in values)


@dataclass(frozen=True)
class KernelParam:
    """One kernel argument as the ABI sees it.

    Written like MLIR types: ``x: view<?x?xf32>`` (a rank-2 view, all sizes and strides
    dynamic), ``x: view<128x?xf32, strides [?, 1]>`` (static parts known to the kernel, checked
    at launch), ``n: i32`` (a scalar). A memref's offset is not part of the ABI: the pointer
    is the address of the first element.

    Attributes:
        name: the argument's name (from the builder, or ``arg<i>``); used in error messages.
        kind: ``"view"`` (a strided memref: pointer, sizes, strides) or ``"scalar"``.
        dtype: the element type of a view, or the scalar's type (a key of :data:`DTYPES`).
        rank: the view's rank; 0 for scalars.
        shape: static sizes of the memref type, None for a dynamic size; None if all dynamic.
        strides: static strides (elements), None for a dynamic stride; None if all dynamic.
        divisibility: for views compiled with ``tile.divisibility`` (``aligned=``): the
            address of the first element and, beside a static stride of 1, every dynamic
            stride of a dimension longer than 1, in bytes, are multiples of it; checked at
            launch. None: no promise.
        size_divisibility: for views compiled with ``tile.size_divisibility``
            (``divisible_sizes=``): per dimension, a number the size is a multiple of (1: no
            promise); checked at launch. None: no promise.
        index_bitwidth: 32 for views compiled with ``tile.index_bitwidth = 32``
            (``int32_indexing=``): every size and element offset is below 2**31; for an
            integer scalar with it (a formed kernel's extent), its value is in [0, 2**31).
            Checked at launch. None: 64-bit indices.
        same_shape_as: for views compiled with ``tile.same_shape_as`` (``same_shapes=``): the
            index of the argument whose shape this view has; checked at launch.
    """

    name: str
    kind: ParamKind
    dtype: str
    rank: int = 0
    shape: Dims | None = None
    strides: Dims | None = None
    divisibility: int | None = None
    size_divisibility: tuple[int, ...] | None = None
    index_bitwidth: int | None = None
    same_shape_as: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("view", "scalar"):
            raise ArgumentError(f"parameter {self.name}: kind must be 'view' or 'scalar'")
        dtype(self.dtype)
        if self.kind == "scalar" and (
            self.rank, self.shape, self.strides, self.divisibility, self.size_divisibility,
            self.same_shape_as,
        ) != (0, None, None, None, None, None):
            raise ArgumentError(f"parameter {self.name}: a scalar has no rank, shape or strides")
        if self.kind == "scalar" and self.index_bitwidth is not None and \
                dtype(self.dtype).kind == "float":
            raise ArgumentError(
                f"parameter {self.name}: index_bitwidth is a promise of views and integers, "
                f"not of {self.dtype}"
            )
        if self.rank < 0:
            raise ArgumentError(f"parameter {self.name}: negative rank {self.rank}")
        for what in ("shape", "strides"):
            dims = getattr(self, what)
            if dims is not None and len(dims) != self.rank:
                raise ArgumentError(
                    f"parameter {self.name}: {what} {dims} does not have rank {self.rank}"
                )
            if dims is not None and all(d is None for d in dims):
                object.__setattr__(self, what, None)  # all dynamic: the canonical spelling
        sizes = self.size_divisibility
        if sizes is not None:
            if len(sizes) != self.rank or any(d < 1 for d in sizes):
                raise ArgumentError(
                    f"parameter {self.name}: size_divisibility {sizes} must be {self.rank} "
                    f"positive integers"
                )
            if all(d == 1 for d in sizes):
                object.__setattr__(self, "size_divisibility", None)  # no promise
        if self.index_bitwidth == 64:
            object.__setattr__(self, "index_bitwidth", None)  # the default
        if self.index_bitwidth not in (None, 32):
            raise ArgumentError(
                f"parameter {self.name}: index_bitwidth must be 32 or 64, got "
                f"{self.index_bitwidth}"
            )

    @classmethod
    def view(
        cls,
        name: str,
        dtype: str,
        rank: int,
        *,
        shape: Dims | None = None,
        strides: Dims | None = None,
        divisibility: int | None = None,
        size_divisibility: tuple[int, ...] | None = None,
        index_bitwidth: int | None = None,
        same_shape_as: int | None = None,
    ) -> KernelParam:
        """A view argument: ``memref<?x...xT, strided<[?, ...], offset: ?>>`` of ``rank``,
        with static sizes or strides where given, and the promises of ``tile.divisibility``,
        ``tile.size_divisibility``, ``tile.index_bitwidth`` and ``tile.same_shape_as``."""
        return cls(name, "view", dtype, rank, shape, strides, divisibility, size_divisibility,
                   index_bitwidth, same_shape_as)

    @classmethod
    def scalar(cls, name: str, dtype: str, *, index_bitwidth: int | None = None) -> KernelParam:
        """A scalar argument of type ``dtype`` (``index_bitwidth=32``: promised in
        [0, 2**31))."""
        return cls(name, "scalar", dtype, index_bitwidth=index_bitwidth)

    @classmethod
    def parse(cls, text: str) -> KernelParam:
        """The inverse of ``str()``: ``"x: view<?x?xf32>"``, ``"n: i32"``, or with static
        parts ``"x: view<128x?xf32, strides [?, 1]>"`` and promises
        ``"x: view<?x?xf32, divisibility 16, size_divisibility [1, 16]>"`` (spaces optional)."""
        m = re.fullmatch(
            r"\s*([\w$.]+)\s*:\s*(?:view<((?:(?:\d+|\?)x)*)(\w+)"
            r"(?:\s*,\s*strides\s*\[([^\]]*)\])?"
            r"(?:\s*,\s*divisibility\s*(\d+))?"
            r"(?:\s*,\s*size_divisibility\s*\[([\d\s,]*)\])?"
            r"(?:\s*,\s*index_bitwidth\s*(\d+))?"
            r"(?:\s*,\s*same_shape_as\s*(\d+))?\s*>|(\w+)(?:\s*<\s*index_bitwidth\s*(\d+)\s*>)?)"
            r"\s*",
            text,
        )
        if m is None:
            raise ArgumentError(
                f"cannot read a kernel parameter from {text!r}: expected 'name: view<?x...xTYPE>' "
                f"or 'name: TYPE', e.g. 'x: view<?x?xf32>' or 'n: i32'"
            )
        if m.group(9) is not None:
            return cls.scalar(m.group(1), m.group(9),
                              index_bitwidth=int(m.group(10)) if m.group(10) else None)

        def dims(items: list[str]) -> Dims:
            return tuple(None if d.strip() == "?" else int(d) for d in items)

        shape = dims([d for d in m.group(2).split("x") if d])
        strides = dims(m.group(4).split(",")) if m.group(4) else None
        divisibility = int(m.group(5)) if m.group(5) else None
        sizes = tuple(int(d) for d in m.group(6).split(",")) if m.group(6) else None
        bits = int(m.group(7)) if m.group(7) else None
        same = int(m.group(8)) if m.group(8) else None
        return cls.view(m.group(1), m.group(3), len(shape), shape=shape, strides=strides,
                        divisibility=divisibility, size_divisibility=sizes, index_bitwidth=bits,
                        same_shape_as=same)

    def ptx_param_bits(self) -> list[int]:
        """Bit widths of the PTX parameters this argument becomes, in order."""
        if self.kind == "view":
            return [64] * (1 + 2 * self.rank)
        return [max(dtype(self.dtype).bits, 8)]

    def __str__(self) -> str:
        if self.kind == "scalar":
            promise = "" if self.index_bitwidth is None else \
                f"<index_bitwidth {self.index_bitwidth}>"
            return f"{self.name}: {self.dtype}{promise}"
        shape = self.shape or (None,) * self.rank
        text = "".join(f"{'?' if d is None else d}x" for d in shape) + self.dtype
        if self.strides is not None:
            text += f", strides [{_dims(self.strides)}]"
        if self.divisibility is not None:
            text += f", divisibility {self.divisibility}"
        if self.size_divisibility is not None:
            text += f", size_divisibility [{_dims(self.size_divisibility)}]"
        if self.index_bitwidth is not None:
            text += f", index_bitwidth {self.index_bitwidth}"
        if self.same_shape_as is not None:
            text += f", same_shape_as {self.same_shape_as}"
        return f"{self.name}: view<{text}>"


# ---------------------------------------------------------------------------------------------
# tensor maps (sm_90a TMA)

#: Bits of a tensor-map parameter: a by-value ``CUtensorMap``, ``.param .align 64 .b8 p[128]``.
TENSOR_MAP_BITS = 128 * 8

#: The swizzles a tensor map may have, in bytes (``Swizzle.NONE``, ``B32``, ``B64``, ``B128``).
SWIZZLES: tuple[int, ...] = (0, 32, 64, 128)

#: The tensor-map element type of each ABI type (integers are signless: only the width counts).
TMA_DTYPES: dict[str, DataType] = {
    "i1": DataType.UINT8, "i8": DataType.UINT8, "i16": DataType.UINT16,
    "i32": DataType.INT32, "i64": DataType.INT64, "index": DataType.INT64,
    "f16": DataType.FLOAT16, "bf16": DataType.BFLOAT16, "f32": DataType.FLOAT32,
    "f64": DataType.FLOAT64, "f8E4M3FN": DataType.UINT8, "f8E5M2": DataType.UINT8,
}


@dataclass(frozen=True)
class TensorMapParam:
    """A tensor-map parameter of a kernel that copies with Hopper's TMA (sm_90a).

    The kernel takes it after the parameters of all its arguments, one
    ``.param .align 64 .b8 p[128]`` (a ``CUtensorMap`` by value) per map, in order. The map's
    tensor is the whole view ``view`` as passed to the launch (its address, sizes and
    strides, its element type), out-of-bounds elements read as zeros, no interleave, element
    strides 1, 128-byte L2 promotion. The lowering records the maps as the
    ``tile.tensor_maps`` attribute of the kernel's ``llvm.func``.

    Attributes:
        view: the index of the kernel argument (a view) the map is over.
        box: elements one copy moves per dimension of the map, outermost first.
        swizzle: bytes of the shared-memory swizzle: 0 (none), 32, 64 or 128
            (``tileopt.runtime.tma.Swizzle.NONE``, ``B32``, ``B64``, ``B128``).
        dims: the view's dimensions in the map's order, outermost first (``(1, 0)``: the
            map reads a view whose unit stride is along its first dimension, a transposed
            matrix, with that dimension innermost); None: the view's own order.
    """

    view: int
    box: tuple[int, ...]
    swizzle: int = 0
    dims: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        def whole(v: object) -> bool:
            return isinstance(v, int | np.integer) and not isinstance(v, bool)

        box = tuple(self.box) if isinstance(self.box, Sequence) else None
        if not whole(self.view) or int(self.view) < 0:
            raise ArgumentError(f"tensor map: view must be an argument index, got {self.view!r}")
        if not box or not all(whole(b) and b > 0 for b in box):
            raise ArgumentError(f"tensor map: box must be positive integers, got {self.box!r}")
        if not whole(self.swizzle) or self.swizzle not in SWIZZLES:
            raise ArgumentError(
                f"tensor map: swizzle must be one of {', '.join(map(str, SWIZZLES))} (bytes), "
                f"got {self.swizzle!r}"
            )
        if self.dims is not None:
            dims = tuple(self.dims) if isinstance(self.dims, Sequence) else None
            if dims is None or not all(whole(d) for d in dims) or sorted(
                    int(d) for d in dims) != list(range(len(box))):
                raise ArgumentError(
                    f"tensor map: dims must order the box's {len(box)} dimensions (a "
                    f"permutation of 0..{len(box) - 1}), got {self.dims!r}"
                )
            object.__setattr__(self, "dims", tuple(int(d) for d in dims))
        object.__setattr__(self, "view", int(self.view))
        object.__setattr__(self, "box", tuple(int(b) for b in box))
        object.__setattr__(self, "swizzle", int(self.swizzle))

    @property
    def swizzle_mode(self) -> Swizzle:
        """The swizzle as ``CUtensorMapSwizzle``."""
        return Swizzle(SWIZZLES.index(self.swizzle))

    def order(self, rank: int) -> tuple[int, ...]:
        """The view's dimensions in the map's order, outermost first."""
        return self.dims if self.dims is not None else tuple(range(rank))

    def __str__(self) -> str:
        dims = f", dims [{_dims(self.dims)}]" if self.dims is not None else ""
        return f"box [{_dims(self.box)}], swizzle {self.swizzle}{dims}"


def check_tensor_maps(params: Sequence[KernelParam], maps: Sequence[TensorMapParam]) -> None:
    """Raises :class:`ArgumentError` unless every map is over a view of ``params`` whose rank
    its box has, and the box and swizzle follow ``cuTensorMapEncodeTiled``'s rules."""
    for k, m in enumerate(maps):
        what = f"tensor map {k} ({m})"
        if m.view >= len(params) or params[m.view].kind != "view":
            shown = params[m.view] if m.view < len(params) else "none"
            raise ArgumentError(f"{what} is over argument {m.view} ({shown}), not a view")
        p = params[m.view]
        if len(m.box) != p.rank:
            raise ArgumentError(
                f"{what} has a box of rank {len(m.box)} over {_describe(m.view, p)} of rank "
                f"{p.rank}"
            )
        try:  # the box's rules, on a stand-in tensor
            TensorMap(None, TMA_DTYPES[p.dtype], m.box[::-1], (16,) * (p.rank - 1),
                      m.box[::-1], swizzle=m.swizzle_mode)
        except ValueError as e:
            raise ArgumentError(f"{what} over {_describe(m.view, p)}: {e}") from None


def _tensor_map(k: int, m: TensorMapParam, p: KernelParam, a: Any, base: object,
                zeros: Callable[[], object]) -> TensorMap:
    """Tensor map ``k`` over view argument ``a`` (already checked against ``p``), its tensor
    at ``base`` (the address of ``a``'s first element, or an emulator buffer that starts
    there); ArgumentError naming the argument when TMA cannot describe the array. An empty
    array gets a map over ``zeros()``, 16 zero bytes."""
    # The view's sizes and strides in the map's order.
    order = m.order(a.ndim)
    sizes = tuple(int(a.shape[d]) for d in order)
    strides = _element_strides(a)
    if strides is not None:
        strides = tuple(strides[d] for d in order)
    what = f"{_describe(m.view, p)} has tensor map {k} ({m})"
    hint = ("pass a copy whose address and row strides are multiples of 16 bytes with "
            "contiguous rows (tensor.contiguous(), with the rows padded where needed)")
    if not all(sizes):
        # Every element a box reads lies past an empty view's end: zeros, the loads'
        # padding. TMA has no empty tensors; one row of 16 zero bytes reads the same.
        return TensorMap(zeros(), TMA_DTYPES[p.dtype], (16 // dtype(p.dtype).itemsize,)
                         + (1,) * (len(sizes) - 1), (16,) * (len(sizes) - 1), m.box[::-1],
                         swizzle=m.swizzle_mode, oob_fill=OOBFill.ZERO)
    if strides is None or any(s < 0 for s, n in zip(strides, sizes, strict=True) if n > 1):
        raise ArgumentError(f"{what}, which needs positive strides, got "
                            f"{strides if strides is not None else a.strides}; {hint}")
    if sizes[-1] > 1 and strides[-1] != 1:
        raise ArgumentError(f"{what}, which needs a contiguous innermost dimension (stride 1), "
                            f"got strides {strides}; {hint}")
    item = dtype(p.dtype).itemsize
    row_strides = []
    for d in range(len(sizes) - 1):
        stride = strides[d] * item
        if sizes[d] == 1 and (stride <= 0 or stride % 16):
            # One index: the stride is never used, any valid one describes the same elements.
            reach = item * (1 + sum((n - 1) * abs(s) for n, s in
                                    zip(sizes[d + 1:], strides[d + 1:], strict=True)))
            stride = -(-reach // 16) * 16
        row_strides.append(stride)
    try:
        return TensorMap(base, TMA_DTYPES[p.dtype], sizes[::-1], tuple(row_strides[::-1]),
                         m.box[::-1], swizzle=m.swizzle_mode, l2_promotion=L2Promotion.B128,
                         oob_fill=OOBFill.ZERO)
    except ValueError as e:
        raise ArgumentError(
            f"{what}, which TMA cannot make for shape {sizes}, strides {strides}: {e}; {hint}"
        ) from None


# ---------------------------------------------------------------------------------------------
# argument checking


def is_torch(a: object) -> bool:
    """Whether ``a`` is a torch tensor (without importing torch)."""
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def _dtype_name_of(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return a.dtype.name
    return str(a.dtype).removeprefix("torch.")


def _describe(i: int, p: KernelParam) -> str:
    return f"argument {i} ({p})"


def check_view(i: int, p: KernelParam, a: Any) -> None:
    """Raises :class:`ArgumentError` unless ``a`` is an array/tensor matching view ``p``."""
    if not (isinstance(a, np.ndarray) or is_torch(a)):
        raise ArgumentError(
            f"{_describe(i, p)} is a view: pass a numpy array or torch tensor, "
            f"got {type(a).__name__}"
        )
    _check_memory_format(i, p, a)
    dt = dtype(p.dtype)
    name = _dtype_name_of(a)
    accepted = dt.numpy if isinstance(a, np.ndarray) else dt.torch
    if name not in accepted:
        hint = (f" (numpy has no {dt.torch[0]}: pass a torch tensor)"
                if isinstance(a, np.ndarray) and not dt.numpy else "")
        accepted_text = " or ".join(accepted or (f"torch.{dt.torch[0]}",))
        raise ArgumentError(
            f"{_describe(i, p)} expects elements of {p.dtype} ({accepted_text}), got {name}{hint}"
        )
    if a.ndim != p.rank:
        raise ArgumentError(
            f"{_describe(i, p)} expects rank {p.rank}, got shape {tuple(a.shape)} (rank {a.ndim})"
        )
    shape = tuple(int(s) for s in a.shape)
    for d, want in enumerate(p.shape or ()):
        if want is not None and shape[d] != want:
            raise ArgumentError(
                f"{_describe(i, p)} has static size {want} in dimension {d}, got shape {shape}"
            )
    if p.strides is not None:
        got = _element_strides(a)
        for d, want in enumerate(p.strides):
            # A stride only matters where the dimension has more than one element.
            if want is not None and shape[d] > 1 and (got is None or got[d] != want):
                raise ArgumentError(
                    f"{_describe(i, p)} has static stride {want} in dimension {d}, got strides "
                    f"{got if got is not None else a.strides} (pass a contiguous copy)"
                )
    _check_divisibility(i, p, a)
    for d, div in enumerate(p.size_divisibility or ()):
        if shape[d] % div:
            raise ArgumentError(
                f"{_describe(i, p)} was compiled for sizes that are multiples of "
                f"{list(p.size_divisibility or ())} (divisible_sizes=), got shape {shape}; "
                f"compile without divisible_sizes= for this shape"
            )
    if p.index_bitwidth == 32:
        _check_int32_indices(i, p, shape, _element_strides(a))


def _check_memory_format(i: int, p: KernelParam, a: Any) -> None:
    """Raises unless the elements of ``a`` lie in memory as the kernel reads them: dense,
    native byte order, aligned to their size, no pending torch conjugate/negative bit."""
    if isinstance(a, np.ma.MaskedArray):
        raise ArgumentError(
            f"{_describe(i, p)} is a masked array; kernels see no mask: pass a.filled(value)"
        )
    if isinstance(a, np.ndarray):
        if not a.dtype.isnative:
            native = a.dtype.newbyteorder("=")
            raise ArgumentError(
                f"{_describe(i, p)} has elements in non-native byte order ({a.dtype.str}); "
                f"kernels read {sys.byteorder}-endian values: pass a.astype({native.str!r})"
            )
        if not a.flags.aligned:
            raise ArgumentError(
                f"{_describe(i, p)} is not aligned to its {a.itemsize}-byte elements (address "
                f"0x{a.ctypes.data:x}, strides {a.strides}); pass an aligned copy (a.copy())"
            )
        return
    layout = str(getattr(a, "layout", "torch.strided")).removeprefix("torch.")
    if layout != "strided":
        raise ArgumentError(
            f"{_describe(i, p)} is a {layout} tensor; views are dense strided memory: pass "
            f"tensor.to_dense()"
        )
    for bit in ("conj", "neg"):
        pending = getattr(a, f"is_{bit}", None)
        if pending is not None and pending():
            raise ArgumentError(
                f"{_describe(i, p)} has a pending {bit} bit (its memory does not hold its "
                f"values): pass tensor.resolve_{bit}()"
            )


def _check_int32_indices(
    i: int, p: KernelParam, shape: tuple[int, ...], strides: tuple[int, ...] | None
) -> None:
    """Raises unless every size and element offset of the array fits the kernel's 32-bit
    indices (``int32_indexing=``)."""
    limit = 2**31
    reach = None if strides is None else sum(
        (n - 1) * abs(s) for n, s in zip(shape, strides, strict=True) if n > 0
    )
    if reach is None or reach >= limit or any(n >= limit for n in shape):
        raise ArgumentError(
            f"{_describe(i, p)} was compiled with 32-bit indices (int32_indexing=): its sizes "
            f"and element offsets must stay below 2**31, got shape {shape} and strides "
            f"{strides}; compile without int32_indexing= for this array"
        )


def _check_divisibility(i: int, p: KernelParam, a: Any) -> None:
    """Raises unless ``a`` keeps the promise of ``tile.divisibility`` (``aligned=``)."""
    div = p.divisibility
    if div is None or 0 in a.shape:  # an empty array: no element is read
        return
    address = a.ctypes.data if isinstance(a, np.ndarray) else a.data_ptr()
    itemsize = a.itemsize if isinstance(a, np.ndarray) else a.element_size()
    strides = _element_strides(a)
    known = p.strides or (None,) * p.rank
    # The lowering takes the strides it does not know as multiples only beside one it knows
    # to be 1 (the dimension it moves in vectors): a dynamic stride of 1 there (a (K, 1)
    # operand) would misalign every row but the first. A dimension of one element steps
    # nowhere; the static strides were checked against the array before.
    bad_strides = strides is None or (1 in known and any(
        k is None and n > 1 and (s * itemsize) % div
        for s, n, k in zip(strides, a.shape, known, strict=True)
    ))
    if address % div or bad_strides:
        raise ArgumentError(
            f"{_describe(i, p)} was compiled as {div}-byte aligned (aligned=): its first "
            f"element's address 0x{address:x} and the strides the kernel does not know "
            f"({strides if strides is not None else a.strides}, in elements, of sizes "
            f"{tuple(a.shape)}) must be multiples of {div} bytes; pass an aligned copy or "
            f"compile without aligned="
        )


def _element_strides(a: Any) -> tuple[int, ...] | None:
    """Strides in elements (None for numpy byte strides that are not whole elements)."""
    if isinstance(a, np.ndarray):
        if any(st % a.itemsize for st in a.strides):
            return None
        return tuple(st // a.itemsize for st in a.strides)
    return tuple(int(s) for s in a.stride())


def _scalar_value(i: int, p: KernelParam, v: Any) -> int | float:
    if isinstance(v, np.ndarray) or is_torch(v):
        if v.ndim != 0:
            raise ArgumentError(
                f"{_describe(i, p)} is a scalar: pass a number or a 0-d array, got "
                f"{type(v).__name__} of shape {tuple(v.shape)}"
            )
        v = v.item()
    if isinstance(v, np.generic):
        v = v.item()
    dt = dtype(p.dtype)
    if dt.kind == "float":
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ArgumentError(f"{_describe(i, p)} expects a number, got {type(v).__name__}")
        return float(v)
    if isinstance(v, float) or not isinstance(v, int):
        raise ArgumentError(
            f"{_describe(i, p)} expects an integer, got {type(v).__name__} {v!r}"
        )
    iv = int(v)
    bits = dt.bits
    if dt.kind == "bool":
        if iv not in (0, 1):
            raise ArgumentError(f"{_describe(i, p)} expects a bool, got {iv}")
    elif not -(1 << (bits - 1)) <= iv < (1 << bits):
        raise ArgumentError(f"{_describe(i, p)}: {iv} does not fit in {bits} bits")
    if p.index_bitwidth == 32 and not 0 <= iv < 2**31:
        raise ArgumentError(
            f"{_describe(i, p)} was compiled with 32-bit indices (a size below 2**31), got {iv}"
        )
    return iv


def check_args(params: Sequence[KernelParam], args: Sequence[Any], kernel: str) -> None:
    """Raises :class:`ArgumentError` unless ``args`` match ``params``: number, kind, dtype, rank."""
    if len(args) != len(params):
        raise ArgumentError(
            f"kernel {kernel} takes {len(params)} arguments ({', '.join(map(str, params))}), "
            f"got {len(args)}"
        )
    for i, (p, a) in enumerate(zip(params, args, strict=True)):
        if p.kind == "view":
            check_view(i, p, a)
        else:
            _scalar_value(i, p, a)
    for i, (p, a) in enumerate(zip(params, args, strict=True)):
        k = p.same_shape_as
        if k is not None and tuple(a.shape) != tuple(args[k].shape):
            raise ArgumentError(
                f"{_describe(i, p)} was compiled with the shape of argument {k} "
                f"({params[k].name}) (same_shapes=): got shapes {tuple(a.shape)} and "
                f"{tuple(args[k].shape)}; compile without same_shapes= for these arrays"
            )


def describe_ptx_param(
    params: Sequence[KernelParam], index: int, tensor_maps: Sequence[TensorMapParam] = ()
) -> str:
    """Which kernel argument PTX parameter ``index`` belongs to, e.g.
    ``"PTX parameter 5 is the size 0 of argument 1 (y: view<?x?xf32>)"``; the parameters
    after the arguments' are the ``tensor_maps``."""
    at = 0
    for i, p in enumerate(params):
        n = len(p.ptx_param_bits())
        if index < at + n:
            k = index - at
            if p.kind == "scalar":
                part = "the value"
            elif k == 0:
                part = "the pointer"
            elif k < 1 + p.rank:
                part = f"the size {k - 1}"
            else:
                part = f"the stride {k - 1 - p.rank}"
            return f"PTX parameter {index} is {part} of argument {i} ({p})"
        at += n
    if at <= index < at + len(tensor_maps):
        m = tensor_maps[index - at]
        view = params[m.view] if 0 <= m.view < len(params) else "?"
        return (f"PTX parameter {index} is tensor map {index - at} ({m}) of argument {m.view} "
                f"({view})")
    at += len(tensor_maps)
    return f"PTX parameter {index} is not part of the kernel ABI ({at} parameters)"


# ---------------------------------------------------------------------------------------------
# scalars


def f32_to_bf16_bits(x: float) -> int:
    """The bfloat16 bit pattern nearest to ``x`` (round to nearest even; NaN stays NaN)."""
    bits = int(np.array(x, np.float32).view(np.uint32))
    if math.isnan(x):
        return ((bits >> 16) | 0x40) & 0xFFFF
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


def scalar_param(i: int, p: KernelParam, v: Any) -> np.generic:
    """The value of scalar argument ``v`` typed as its PTX parameter (f16/bf16 as raw bits)."""
    x = _scalar_value(i, p, v)
    d = p.dtype
    if d == "f32":
        return np.float32(x)
    if d == "f64":
        return np.float64(x)
    if d == "f16":
        return np.float16(x).view(np.uint16)
    if d == "bf16":
        return np.uint16(f32_to_bf16_bits(float(x)))
    if d.startswith("f8"):  # torch's rounding: numpy has no fp8
        import torch

        fp8 = torch.tensor([float(x)]).to(getattr(torch, dtype(d).torch[0]))
        return np.uint8(int(fp8.view(torch.uint8)[0]))
    bits = dtype(d).bits
    if bits <= 8:
        return np.uint8(int(x) & 0xFF)
    if bits == 16:
        return np.uint16(int(x) & 0xFFFF)
    if bits == 32:
        return np.uint32(int(x) & 0xFFFF_FFFF)
    return np.uint64(int(x) & 0xFFFF_FFFF_FFFF_FFFF)


# ---------------------------------------------------------------------------------------------
# views


def _view_params(pointer: Any, sizes: Sequence[int], strides: Sequence[int]) -> list[Any]:
    """A view's ``1 + 2r`` parameters: ``[pointer, *sizes, *strides]``, integers as int64."""
    return [pointer, *(np.int64(x) for x in (*sizes, *strides))]


def _flat_args(
    params: Sequence[KernelParam], args: Sequence[Any], kernel: str,
    view: Callable[[int, KernelParam, Any], list[Any]],
    tensor_maps: Sequence[TensorMapParam] = (),
    tensor_map: Callable[[int, TensorMapParam, Any], Any] | None = None,
) -> list[Any]:
    """The flat parameter list of a launch (checks ``args`` first): ``view(i, p, a)`` expands
    the views, scalars are typed like their PTX parameters; then ``tensor_map(k, m,
    pointer)`` makes the parameter of each map from the pointer parameter of its view."""
    check_args(params, args, kernel)
    check_tensor_maps(params, tensor_maps)
    flat: list[Any] = []
    pointers: dict[int, Any] = {}
    for i, (p, a) in enumerate(zip(params, args, strict=True)):
        if p.kind == "view":
            pointers[i] = len(flat)
            flat.extend(view(i, p, a))
        else:
            flat.append(scalar_param(i, p, a))
    if tensor_maps:
        assert tensor_map is not None
        flat.extend(tensor_map(k, m, flat[pointers[m.view]]) for k, m in enumerate(tensor_maps))
    return flat


def _numpy_view(i: int, p: KernelParam, a: np.ndarray) -> list[Any]:
    item = a.itemsize
    if any(st % item for st in a.strides):
        raise ArgumentError(
            f"{_describe(i, p)} has byte strides {a.strides} that are not multiples of its "
            f"element size {item}; pass a copy (np.ascontiguousarray)"
        )
    strides = tuple(st // item for st in a.strides)
    sizes = tuple(int(s) for s in a.shape)
    if a.size == 0:
        return _view_params(a.reshape(-1)[:0], sizes, strides)
    lo = sum((s - 1) * st for s, st in zip(sizes, strides, strict=True) if st < 0)
    hi = sum((s - 1) * st for s, st in zip(sizes, strides, strict=True) if st > 0)
    # A 1-element view whose data pointer is the lowest address the view reaches.
    first = a[tuple(slice(s - 1, s) if st < 0 else slice(0, 1) for s, st in zip(sizes, strides,
                                                                              strict=True))]
    span = np.lib.stride_tricks.as_strided(first.reshape(-1), shape=(hi - lo + 1,),
                                           strides=(item,), writeable=a.flags.writeable)
    if lo == 0:
        return _view_params(span, sizes, strides)
    from tileopt.emulator import Pointer

    # Negative strides: the first element lies -lo elements into the span.
    return _view_params(Pointer(span, -lo * item), sizes, strides)


def _torch_view(i: int, p: KernelParam, t: Any) -> list[Any]:
    if t.device.type != "cpu":
        raise ArgumentError(
            f"{_describe(i, p)} is on device {t.device}; the emulator runs on CPU tensors "
            f"(pass tensor.cpu())"
        )
    sizes = tuple(int(s) for s in t.shape)
    strides = tuple(int(s) for s in t.stride())
    if t.numel() == 0:
        return _view_params(t.reshape(-1)[:0], sizes, strides)
    span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
    return _view_params(t.detach().as_strided((span,), (1,)), sizes, strides)


def _emulator_view(i: int, p: KernelParam, a: Any) -> list[Any]:
    return _numpy_view(i, p, a) if isinstance(a, np.ndarray) else _torch_view(i, p, a)


def emulator_args(
    params: Sequence[KernelParam], args: Sequence[Any], kernel: str,
    tensor_maps: Sequence[TensorMapParam] = (),
) -> list[Any]:
    """The emulator's flat argument list for a launch of ``kernel`` (checks ``args`` first).

    A view becomes a 1-D array/tensor that spans exactly the elements the view can reach
    (so the emulator bounds-checks against the view's own memory and writes results back
    into it; an :class:`~tileopt.emulator.Pointer` into it where the first element is not the
    lowest address), then sizes and strides. Non-contiguous views, transposes, slices and,
    for numpy, negative strides keep their real strides: the kernel sees the same addresses
    it would see on a GPU. Scalars are typed like their PTX parameters (``f16``/``bf16`` as
    raw 16-bit patterns). Each of ``tensor_maps`` is a
    :class:`~tileopt.runtime.tma.TensorMap` over that same 1-D array, so the map and the
    view are one emulated buffer.
    """
    def tensor_map(k: int, m: TensorMapParam, pointer: Any) -> TensorMap:
        return _tensor_map(k, m, params[m.view], args[m.view], pointer,
                           lambda: np.zeros(16, np.uint8))

    return _flat_args(params, args, kernel, _emulator_view, tensor_maps, tensor_map)


def _cuda_view(i: int, p: KernelParam, a: Any) -> list[Any]:
    if not is_torch(a) or a.device.type != "cuda":
        where = "a numpy array" if isinstance(a, np.ndarray) else f"on {a.device}"
        raise ArgumentError(
            f"{_describe(i, p)} is {where}: device='cuda' needs CUDA torch tensors "
            f"(tensor.cuda())"
        )
    return _view_params(np.uint64(a.data_ptr()), a.shape, a.stride())


_DEVICE_ZEROS: dict[Any, Any] = {}


def _device_zeros(device: Any) -> int:
    """The address of 16 zero bytes on ``device``, kept for the process (the tensor of the
    maps of empty views)."""
    import torch

    if device not in _DEVICE_ZEROS:
        _DEVICE_ZEROS[device] = torch.zeros(16, dtype=torch.uint8, device=device)
    return int(_DEVICE_ZEROS[device].data_ptr())


@functools.lru_cache(maxsize=256)
def encode_tensor_map(tensor_map: TensorMap) -> bytes:
    """The driver's 128-byte encoding of a map over a device address, cached: encoding is a
    driver call, and a map is the same for the same address, shape, strides, box and
    swizzle."""
    return tensor_map.encode_cuda()


def cuda_args(
    params: Sequence[KernelParam], args: Sequence[Any], kernel: str,
    tensor_maps: Sequence[TensorMapParam] = (),
) -> list[Any]:
    """The CUDA launcher's flat argument list: device pointers and typed numpy scalars, then
    each of ``tensor_maps`` as the driver's 128 bytes (:func:`encode_tensor_map`).

    Views must be CUDA torch tensors; the pointer is ``data_ptr()`` (the first element's
    address: torch includes the storage offset).
    """
    def tensor_map(k: int, m: TensorMapParam, pointer: Any) -> bytes:
        a = args[m.view]
        return encode_tensor_map(_tensor_map(k, m, params[m.view], a, int(pointer),
                                             lambda: _device_zeros(a.device)))

    return _flat_args(params, args, kernel, _cuda_view, tensor_maps, tensor_map)
