"""Write tile kernels from Python.

A :class:`KernelBuilder` makes one ``tile.kernel``; inside ``with kb as k:``
the kernel's arguments and the values that ``k``'s methods return are
:class:`Value` objects with Python operators (``+ - * / < ...``) that broadcast
like Triton's: Python numbers and scalar values become splat tiles, and
size-1 dimensions expand. A row softmax::

    kb = KernelBuilder("softmax", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, 1024], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        k.store(e / k.sum(e, axis=1, keepdims=True), k.args.y, [row, 0])
    print(kb.module)

Loops are ``scf.for`` with loop-carried values, built with :meth:`KernelBuilder.loop`
(a sum over the column blocks of a row)::

    with k.loop(0, k.size(k.args.x, 1), 256, carried=[k.full([1, 256], 0.0, "f32")]) as loop:
        (acc,) = loop.carried
        loop.yield_(acc + k.load(k.args.x, [row, loop.iv], [1, 256]))
    (acc,) = loop.results

Views are dynamic in sizes and strides; ``View("f32", 2, contiguous=True)`` makes the
innermost stride statically 1 (``strided<[?, 1], offset: ?>``), which lets the GPU
lowering move 16 contiguous bytes per thread.

Every op carries the file, line and column of the call that made it as its MLIR
location (as Triton's ops do), and is verified at once: a mistake (a tile shape that
is not a power of two, an axis out of range, operands the op cannot take) raises
:class:`~tileopt.errors.BuilderError` at that call, naming the op and the shapes, and a
diagnostic of a later pass points at the user's line.

Everything built is ordinary MLIR (``tileopt.ir``): ``kb.module`` can be
printed, verified, canonicalized and compiled.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Self, TypeAlias, TypeVar

from tileopt import ir
from tileopt.dialects import arith, memref, scf, tile
from tileopt.dialects import math as math_d
from tileopt.errors import BuilderError

Number: TypeAlias = int | float | bool
Operand: TypeAlias = "Value | Number"

_ELEMENT_TYPES: dict[str, Callable[[], ir.Type]] = {
    "i1": lambda: ir.IntegerType.get_signless(1),
    "i8": lambda: ir.IntegerType.get_signless(8),
    "i16": lambda: ir.IntegerType.get_signless(16),
    "i32": lambda: ir.IntegerType.get_signless(32),
    "i64": lambda: ir.IntegerType.get_signless(64),
    "index": lambda: ir.IndexType.get(),
    "f16": lambda: ir.F16Type.get(),
    "bf16": lambda: ir.BF16Type.get(),
    "f32": lambda: ir.F32Type.get(),
    "f64": lambda: ir.F64Type.get(),
    "f8E4M3FN": lambda: ir.Float8E4M3FNType.get(),
    "f8E5M2": lambda: ir.Float8E5M2Type.get(),
}

#: Element types of tiles and views (``index`` is for scalars only).
TILE_ELEMENT_TYPES: tuple[str, ...] = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32",
                                       "f64", "f8E4M3FN", "f8E5M2")


def _check_dtype(name: object, allowed: Sequence[str], what: str = "element type") -> str:
    if not isinstance(name, str) or name not in allowed:
        raise BuilderError(f"unknown {what} {name!r}; expected one of {', '.join(allowed)}")
    return name


def element_type(name: str) -> ir.Type:
    """The MLIR type named ``name`` (``"f32"``, ``"i32"``, ``"index"``, ...); BuilderError
    for any other name."""
    return _ELEMENT_TYPES[_check_dtype(name, list(_ELEMENT_TYPES))]()


def _is_int(x: object) -> bool:
    """An integer that is not a bool (Python or numpy)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return isinstance(x, numbers.Real)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class View:
    """A kernel argument that views global memory: a strided memref.

    Sizes and strides are dynamic unless ``shape`` gives static sizes. With
    ``contiguous=True`` the innermost stride is statically 1
    (``memref<?x?xf32, strided<[?, 1], offset: ?>>``): the GPU lowering can then
    vectorise loads and stores along it, and a launch rejects tensors whose
    innermost stride is not 1. The default (all strides dynamic) accepts any
    strides. ``dtype`` is a tile element type (:data:`TILE_ELEMENT_TYPES`); ``rank`` may be 0.
    """

    dtype: str
    rank: int
    shape: tuple[int, ...] | None = None
    contiguous: bool = False

    def __post_init__(self) -> None:
        _check_dtype(self.dtype, TILE_ELEMENT_TYPES, "View element type")
        if not _is_int(self.rank) or self.rank < 0:
            raise BuilderError(f"View rank must be an int >= 0, got {self.rank!r}")
        if self.shape is not None and (
            isinstance(self.shape, str) or not isinstance(self.shape, Sequence)
            or len(self.shape) != self.rank or not all(_is_int(d) and d >= 0 for d in self.shape)
        ):
            raise BuilderError(
                f"View shape must be {self.rank} sizes >= 0 (one per dimension) or None, got "
                f"{self.shape!r}"
            )
        if not isinstance(self.contiguous, bool):
            raise BuilderError(f"View contiguous must be True or False, got {self.contiguous!r}")

    def mlir_type(self) -> ir.Type:
        """The memref type, e.g. ``memref<?x?xf32, strided<[?, ?], offset: ?>>``."""
        dyn = ir.ShapedType.get_dynamic_size()
        shape = [int(d) for d in self.shape] if self.shape is not None else [dyn] * self.rank
        stride = ir.ShapedType.get_dynamic_stride_or_offset()
        strides = [stride] * self.rank
        if self.contiguous and self.rank:
            strides[-1] = 1
        layout = ir.StridedLayoutAttr.get(stride, strides)
        return ir.MemRefType.get(shape, element_type(self.dtype), layout=layout)


@dataclass(frozen=True)
class Scalar:
    """A scalar kernel argument (sizes, epsilon, ...)."""

    dtype: str

    def __post_init__(self) -> None:
        _check_dtype(self.dtype, list(_ELEMENT_TYPES), "Scalar type")

    def mlir_type(self) -> ir.Type:
        """The scalar's MLIR type."""
        return element_type(self.dtype)


def _is_float(type_: ir.Type) -> bool:
    return isinstance(type_, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type, *_FP8_TYPES))


_FP8_TYPES = (ir.Float8E4M3FNType, ir.Float8E5M2Type)


def _is_bool(type_: ir.Type) -> bool:
    return isinstance(type_, ir.IntegerType) and type_.width == 1


def _is_fp8(type_: ir.Type) -> bool:
    return isinstance(type_, _FP8_TYPES)


def _float_width(type_: ir.Type) -> int:
    return 8 if _is_fp8(type_) else {ir.F16Type: 16, ir.BF16Type: 16, ir.F32Type: 32,
                                     ir.F64Type: 64}[type(type_)]


def _broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """The shape two tiles of one rank broadcast to (size-1 dims expand)."""
    if len(a) != len(b) or any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        raise BuilderError(f"cannot broadcast shapes {tuple(a)} and {tuple(b)}")
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


# -- source locations and errors ---------------------------------------------------------------

#: The builder's methods as a user writes them, for error messages.
_OPERATORS = {"__add__": "+", "__radd__": "+", "__sub__": "-", "__rsub__": "-", "__mul__": "*",
              "__rmul__": "*", "__truediv__": "/", "__rtruediv__": "/", "__floordiv__": "//",
              "__rfloordiv__": "//", "__mod__": "%", "__rmod__": "%", "__neg__": "unary -",
              "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__eq__": "==",
              "__ne__": "!=", "__and__": "&", "__rand__": "&", "__or__": "|", "__ror__": "|",
              "__xor__": "^", "__rxor__": "^"}


def _caller_location(context: ir.Context) -> ir.Location:
    """``file:line:column`` of the innermost frame outside this module: the user's call."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return ir.Location.unknown(context)
    line, column = frame.f_lineno, 0
    position = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None),
                    None)
    if position is not None and position[0] is not None:
        line, column = position[0], (position[2] or 0)
    return ir.Location.file(frame.f_code.co_filename, line, column + 1, context=context)


F = TypeVar("F", bound=Callable[..., Any])


def _located(method: F) -> F:
    """Makes a builder method create its ops at the user's source location (as Triton does),
    so that a diagnostic of a later pass names the user's line, and prefixes a BuilderError
    it raises with the call the user made (``KernelBuilder.dot``, ``operator +``)."""
    label = _OPERATORS.get(method.__name__)
    label = f"operator {label}" if label else method.__qualname__

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        builder: KernelBuilder = self if isinstance(self, KernelBuilder) else self.builder
        if not builder._scopes:
            raise BuilderError(
                f"{label}: ops are built inside `with kb as k:` of their KernelBuilder; this "
                f"call is outside it"
            )
        builder._depth += 1
        try:
            with _caller_location(builder.context):
                return method(self, *args, **kwargs)
        except BuilderError as e:
            if builder._depth == 1 and e.args and not getattr(e, "labelled", False):
                e.args = (f"{label}: {e.args[0]}", *e.args[1:])
                e.labelled = True  # type: ignore[attr-defined]
            raise
        finally:
            builder._depth -= 1

    return wrapper  # type: ignore[return-value]


def _verify(op: ir.OpView | ir.Operation) -> None:
    """Runs ``op``'s verifier now, at the call that made it: BuilderError with its messages
    (the op is erased again, so that the kernel stays valid)."""
    try:
        op.verify()
    except ir.MLIRError as e:
        messages = "; ".join(d.message for d in e.error_diagnostics) or str(e)
        op.operation.erase()
        raise BuilderError(messages) from None


class Value:
    """An SSA value (tile or scalar) with arithmetic operators.

    Operators follow torch's rules for Python numbers: an integer tile with a float number
    becomes f32, a boolean (i1) tile with an int becomes i32; two values must have one
    element type (cast one with :meth:`KernelBuilder.cast`). ``//`` and ``%`` round toward
    minus infinity like Python's and torch's; ``/`` of integers truncates (C's, Triton's
    ``//`` on ints)."""

    def __init__(self, value: ir.Value, builder: KernelBuilder) -> None:
        self.value = value
        self.builder = builder

    @property
    def type(self) -> ir.Type:
        """The MLIR type."""
        return self.value.type

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The tile's shape, or None for a scalar."""
        if isinstance(self.type, ir.RankedTensorType):
            return tuple(self.type.shape)
        return None

    @property
    def dtype(self) -> ir.Type:
        """The element type (the type itself for a scalar)."""
        if isinstance(self.type, ir.ShapedType):
            return self.type.element_type
        return self.type

    def __repr__(self) -> str:
        return f"Value({self.value})"

    def __bool__(self) -> bool:
        raise BuilderError(
            f"a Value ({self.type}) has no Python truth value while the kernel is built (`if`, "
            f"`and`, `or`, `not`, chained comparisons): use k.where(cond, a, b), & | ^, or a loop"
        )

    # Arithmetic: float ops for float element types, signed integer ops else.
    def _binary(self, other: Operand, fop: Callable, iop: Callable,
                reverse: bool = False) -> Value:
        a, b = self.builder._promote(self, other)
        if reverse:
            a, b = b, a
        if _is_bool(a.dtype):
            raise BuilderError(
                f"no arithmetic on booleans (i1): cast to an integer type first, or use & | ^ "
                f"(shapes {a.shape}, {b.shape})"
            )
        op = fop if _is_float(a.dtype) else iop
        return self.builder._wrap(op(a.value, b.value))

    def __add__(self, o: Operand) -> Value:
        return self._binary(o, arith.addf, arith.addi)

    def __radd__(self, o: Operand) -> Value:
        return self._binary(o, arith.addf, arith.addi, reverse=True)

    def __sub__(self, o: Operand) -> Value:
        return self._binary(o, arith.subf, arith.subi)

    def __rsub__(self, o: Operand) -> Value:
        return self._binary(o, arith.subf, arith.subi, reverse=True)

    def __mul__(self, o: Operand) -> Value:
        return self._binary(o, arith.mulf, arith.muli)

    def __rmul__(self, o: Operand) -> Value:
        return self._binary(o, arith.mulf, arith.muli, reverse=True)

    def __truediv__(self, o: Operand) -> Value:
        return self._binary(o, arith.divf, arith.divsi)

    def __rtruediv__(self, o: Operand) -> Value:
        return self._binary(o, arith.divf, arith.divsi, reverse=True)

    def __floordiv__(self, o: Operand) -> Value:
        return self._binary(o, self.builder._floordivf, arith.floordivsi)

    def __rfloordiv__(self, o: Operand) -> Value:
        return self._binary(o, self.builder._floordivf, arith.floordivsi, reverse=True)

    def __mod__(self, o: Operand) -> Value:
        return self._binary(o, self.builder._modf, self.builder._modi)

    def __rmod__(self, o: Operand) -> Value:
        return self._binary(o, self.builder._modf, self.builder._modi, reverse=True)

    def __neg__(self) -> Value:
        if _is_float(self.dtype):
            return self.builder._wrap(arith.negf(self.value))
        return self.builder._constant_like(0, self) - self

    def _compare(self, other: Operand, fpred: str, ipred: str) -> Value:
        a, b = self.builder._promote(self, other)
        if _is_float(a.dtype):
            pred = getattr(arith.CmpFPredicate, fpred)
            return self.builder._wrap(arith.cmpf(pred, a.value, b.value))
        if _is_bool(a.dtype) and ipred[0] == "s":
            ipred = "u" + ipred[1:]  # False < True, as torch orders booleans
        pred = getattr(arith.CmpIPredicate, ipred)
        return self.builder._wrap(arith.cmpi(pred, a.value, b.value))

    def __lt__(self, o: Operand) -> Value:
        return self._compare(o, "OLT", "slt")

    def __le__(self, o: Operand) -> Value:
        return self._compare(o, "OLE", "sle")

    def __gt__(self, o: Operand) -> Value:
        return self._compare(o, "OGT", "sgt")

    def __ge__(self, o: Operand) -> Value:
        return self._compare(o, "OGE", "sge")


class KernelBuilder:
    """Builds one ``tile.kernel`` named ``name`` with keyword arguments.

    Arguments are :class:`View` or :class:`Scalar` specs (or MLIR types), in
    keyword order. The kernel goes into ``module`` (a new module, with a new
    context, by default). Use ``with kb as k:`` to add ops; the kernel's
    arguments are ``k.args.<name>``. Each op carries the source location of the
    call that made it, and is verified there: a mistake raises
    :class:`~tileopt.errors.BuilderError` at that call, naming the op and shapes.
    """

    def __init__(
        self,
        name: str,
        module: ir.Module | None = None,
        **arguments: View | Scalar | ir.Type,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise BuilderError(f"KernelBuilder: the kernel's name must be an identifier, got "
                               f"{name!r}")
        if module is not None and not isinstance(module, ir.Module):
            raise BuilderError(f"KernelBuilder: module must be a tileopt.ir.Module or None, got "
                               f"{type(module).__name__}")
        for key, spec in arguments.items():
            if not isinstance(spec, View | Scalar | ir.Type):
                raise BuilderError(
                    f"KernelBuilder: argument {key!r} must be a View, a Scalar or an MLIR type, "
                    f"got {spec!r}"
                )
        if module is None:
            self.context = ir.Context()
            with self.context, ir.Location.unknown():
                module = ir.Module.create()
        else:
            self.context = module.context
        self.module = module
        self.name = name
        with self.context, _caller_location(self.context):
            types = [a if isinstance(a, ir.Type) else a.mlir_type() for a in arguments.values()]
            with ir.InsertionPoint(module.body):
                self.op = tile.KernelOp(name, ir.TypeAttr.get(ir.FunctionType.get(types, [])))
            self._block = self.op.body.blocks.append(*types)
            with ir.InsertionPoint(self._block):
                tile.ReturnOp()
        self.args = SimpleNamespace(
            **{
                key: Value(arg, self)
                for key, arg in zip(arguments, self._block.arguments, strict=True)
            }
        )
        self._scopes: list = []
        self._depth = 0

    def __enter__(self) -> KernelBuilder:
        scopes = [
            self.context,
            ir.Location.unknown(self.context),
            ir.InsertionPoint.at_block_terminator(self._block),
        ]
        for scope in scopes:
            scope.__enter__()
        self._scopes.append(scopes)
        return self

    def __exit__(self, *exc: object) -> None:
        for scope in reversed(self._scopes.pop()):
            scope.__exit__(*exc)

    # -- values ------------------------------------------------------------

    def _wrap(self, value: ir.Value | ir.OpView) -> Value:
        """A Value of ``value``; an op (OpView) is verified first (:func:`_verify`)."""
        if isinstance(value, ir.OpView):
            _verify(value)
            value = value.result
        elif isinstance(value.owner, ir.OpView | ir.Operation):
            _verify(value.owner)
        return Value(value, self)

    def _value(self, x: object, what: str, view: bool = False) -> Value:
        """``x`` if it is a tile or scalar (or with ``view``, any) Value of this kernel, else a
        BuilderError naming ``what``."""
        if not isinstance(x, Value):
            raise BuilderError(f"{what} must be a tile or scalar Value of this kernel, got {x!r}")
        if x.builder is not self:
            raise BuilderError(f"{what} is a Value of another KernelBuilder ({x.builder.name})")
        if not view and isinstance(x.type, ir.MemRefType):
            raise BuilderError(f"{what} is a view ({x.type}), not a tile: read a tile of it with "
                               f"k.load")
        return x

    def _tile(self, x: object, what: str) -> Value:
        """``x`` if it is a tile Value of this kernel."""
        x = self._value(x, what)
        if x.shape is None:
            raise BuilderError(f"{what} must be a tile, got a scalar of type {x.type}")
        return x

    def _view(self, x: object, what: str = "view") -> Value:
        """``x`` if it is a view (memref) argument of this kernel."""
        x = self._value(x, what, view=True)
        if not isinstance(x.type, ir.MemRefType):
            raise BuilderError(f"{what} must be a View argument (k.args.<name>), got {x.type}")
        return x

    def _shape(self, shape: object, what: str) -> list[int]:
        """``shape`` as a list if it is a tile shape: powers of two (rank 0 allowed)."""
        if (isinstance(shape, str) or not isinstance(shape, Sequence)
                or not all(_is_int(d) and _is_pow2(int(d)) for d in shape)):
            raise BuilderError(
                f"{what} shape must be a list of positive powers of two (e.g. [16, 64]), got "
                f"{shape!r}"
            )
        return [int(d) for d in shape]

    def _axis(self, axis: object, rank: int, what: str = "axis") -> int:
        """``axis`` in ``[-rank, rank)`` as an index in ``[0, rank)``."""
        if not _is_int(axis) or not -rank <= int(axis) < rank:  # type: ignore[operator]
            raise BuilderError(f"{what} {axis!r} is out of range for rank {rank}: expected an "
                               f"int in [{-rank}, {rank - 1}]")
        return int(axis) % rank  # type: ignore[call-overload]

    def _attr(self, value: object, type_: ir.Type, what: str) -> ir.Attribute:
        """The constant ``value`` as an attribute of ``type_``; BuilderError if it is not a
        number, or does not fit (an int out of range, a fraction, inf or NaN for an integer)."""
        if not _is_number(value):
            raise BuilderError(f"{what} must be a Python number, got {value!r}")
        if _is_float(type_):
            return ir.FloatAttr.get(type_, float(value))  # type: ignore[arg-type]
        if isinstance(type_, ir.IndexType):
            bits, name = 64, "index"
        else:
            bits, name = ir.IntegerType(type_).width, str(type_)
        if not isinstance(value, numbers.Integral):
            if not math.isfinite(value) or value != int(value):  # type: ignore[arg-type]
                raise BuilderError(f"{what} {value!r} is not an integer, so not a value of "
                                   f"{name}")
        number = int(value)  # type: ignore[arg-type]
        if not (0 if bits == 1 else -(1 << (bits - 1))) <= number < (1 << bits):
            raise BuilderError(f"{what} {value!r} does not fit in {name}")
        if bits == 1:
            return ir.BoolAttr.get(bool(number))
        return ir.IntegerAttr.get(type_, number)

    @_located
    def constant(self, value: Number, dtype: str | ir.Type) -> Value:
        """A scalar constant of ``dtype``."""
        type_ = element_type(dtype) if not isinstance(dtype, ir.Type) else dtype
        return self._wrap(arith.constant(type_, self._attr(value, type_, "constant")))

    def _constant_like(self, value: Number, like: Value) -> Value:
        scalar = self.constant(value, like.dtype)
        return self.splat(scalar, like.shape) if like.shape is not None else scalar

    def _promote(self, a: object, b: object) -> tuple[Value, Value]:
        """Brings two operands to one type: Python numbers become constants (an integer
        operand with a float number is cast to f32, an i1 one with an int to i32, as torch
        and Triton promote), scalars become splats, size-1 dims broadcast."""
        if not isinstance(a, Value):
            if not isinstance(b, Value):
                raise BuilderError(
                    f"two Python numbers ({a!r}, {b!r}) have no tile type: make one of them a "
                    f"tile (KernelBuilder.full) or a constant (KernelBuilder.constant)"
                )
            b_, a_ = self._promote(b, a)
            return a_, b_
        a = self._value(a, "operand")
        if isinstance(b, Value):
            b = self._value(b, "operand")
            if a.dtype != b.dtype:
                raise BuilderError(
                    f"operands of different element types ({a.dtype} {a.shape or 'scalar'} and "
                    f"{b.dtype} {b.shape or 'scalar'}): cast one with k.cast(x, dtype)"
                )
        elif not _is_number(b):
            raise BuilderError(f"operand must be a Value or a Python number, got {b!r}")
        else:
            if not _is_float(a.dtype) and not isinstance(b, numbers.Integral):
                a = self.cast(a, "f32")
            elif _is_bool(a.dtype) and not isinstance(b, bool):
                a = self.cast(a, "i32")
            b = self.constant(b, a.dtype)
        if a.shape is None and b.shape is None:
            return a, b
        if a.shape is None:
            a = self.splat(a, b.shape)
        elif b.shape is None:
            b = self.splat(b, a.shape)
        if a.shape != b.shape:
            shape = _broadcast_shape(a.shape, b.shape)  # type: ignore[arg-type]
            a, b = self.broadcast(a, shape), self.broadcast(b, shape)
        return a, b

    def _tile_type(self, shape: Sequence[int], dtype: ir.Type) -> ir.RankedTensorType:
        return ir.RankedTensorType.get(list(shape), dtype)

    # -- grid --------------------------------------------------------------

    @_located
    def program_id(self, dim: int = 0) -> Value:
        """This program's index along grid dimension ``dim`` (0, 1 or 2)."""
        return self._wrap(tile.program_id(self._axis(dim, 3, "dim")))

    @_located
    def num_programs(self, dim: int = 0) -> Value:
        """The grid's size along ``dim`` (0, 1 or 2)."""
        return self._wrap(tile.num_programs(self._axis(dim, 3, "dim")))

    @_located
    def index(self, value: int) -> Value:
        """An ``index`` constant."""
        return self.constant(value, "index")

    @_located
    def size(self, view: Value, axis: int) -> Value:
        """The size of ``view`` along ``axis`` (``memref.dim``), as ``index``."""
        view = self._view(view)
        rank = ir.MemRefType(view.type).rank
        if not _is_int(axis) or not 0 <= axis < rank:
            raise BuilderError(f"axis {axis!r} is out of range for a view of rank {rank}")
        return self._wrap(memref.dim(view.value, self.index(axis).value))

    def _as_index(self, x: object) -> Value:
        if not isinstance(x, Value):
            if not _is_int(x):
                raise BuilderError(f"expected an int or an integer scalar Value, got {x!r}")
            return self.index(x)  # type: ignore[arg-type]
        x = self._value(x, "index")
        if isinstance(x.type, ir.IndexType):
            return x
        if isinstance(x.type, ir.IntegerType):
            return self.cast(x, "index")
        raise BuilderError(f"expected an integer or index scalar, got a value of type {x.type}")

    # -- loops -------------------------------------------------------------

    @_located
    def loop(
        self,
        start: Value | int,
        stop: Value | int,
        step: Value | int = 1,
        carried: Sequence[Value] = (),
    ) -> Loop:
        """An ``scf.for`` from ``start`` to ``stop`` (exclusive) by ``step``, as a context.

        ``carried`` are the loop-carried values' initial values (tiles or
        scalars). Inside ``with k.loop(...) as loop:`` ops go into the loop's
        body; ``loop.iv`` is the induction variable (``index``),
        ``loop.carried`` the carried values of this iteration, and
        ``loop.yield_(*values)`` gives the next iteration's (same types; it
        may be left out when nothing is carried). After the block,
        ``loop.results`` are the carried values after the last iteration (the
        initial values when the loop runs zero times). Bounds are ``index``
        values, other integers (cast to ``index``) or Python ints. Loops nest.
        Use the loop only as a ``with`` context: the ``scf.for`` is created
        here, and a body that raises is removed again.
        """
        if isinstance(carried, Value) or not isinstance(carried, Sequence):
            raise BuilderError(f"carried must be a list of Values, got {carried!r}")
        return Loop(
            self,
            self._as_index(start),
            self._as_index(stop),
            self._as_index(step),
            list(carried),
        )

    @_located
    def if_(self, cond: Value, carried: Sequence[Value] = ()) -> Branch:
        """An ``scf.if`` on the scalar boolean ``cond``, as a context.

        Ops inside ``with k.if_(cond) as branch:`` run only where ``cond``
        holds (a store of the last k step's tile, say). With ``carried``
        (tiles or scalars), the body ends with ``branch.yield_(*values)``
        (same types), and after the block ``branch.results`` are those values
        where ``cond`` held and ``carried`` unchanged where it did not (or what
        :meth:`Branch.else_`'s body yields).
        """
        cond = self._value(cond, "condition")
        if cond.type != ir.IntegerType.get_signless(1):
            raise BuilderError(f"the condition must be a scalar boolean (i1), got {cond.type}")
        if isinstance(carried, Value) or not isinstance(carried, Sequence):
            raise BuilderError(f"carried must be a list of Values, got {carried!r}")
        return Branch(self, cond, list(carried))

    # -- memory ------------------------------------------------------------

    def _offsets(self, view: Value, offsets: object) -> list[ir.Value]:
        rank = ir.MemRefType(view.type).rank
        if isinstance(offsets, str) or not isinstance(offsets, Sequence) or len(offsets) != rank:
            raise BuilderError(
                f"offsets must be {rank} ints or integer scalars (one per dimension of the "
                f"view {view.type}), got {offsets!r}"
            )
        return [self._as_index(o).value for o in offsets]

    @_located
    def load(
        self,
        view: Value,
        offsets: Sequence[Value | int],
        shape: Sequence[int],
        padding: Number | None = None,
    ) -> Value:
        """Reads a tile of ``shape`` at ``offsets``; out-of-bounds take ``padding``."""
        view = self._view(view)
        dtype = view.type.element_type
        pad = None if padding is None else self._attr(padding, dtype, "padding")
        result = self._tile_type(self._shape(shape, "load"), dtype)
        return self._wrap(tile.load(result, view.value, self._offsets(view, offsets),
                                    padding=pad))

    @_located
    def store(self, value: Value, view: Value, offsets: Sequence[Value | int],
              add: bool = False) -> None:
        """Writes ``value`` at ``offsets``; out-of-bounds elements are dropped.

        With ``add``, each element is added atomically to the view's element instead (f32
        and i32 tiles), so that programs may add into the same elements in any order: a
        reduction split over programs into a view of zeros.
        """
        if not isinstance(add, bool):
            raise BuilderError(f"add must be True or False, got {add!r}")
        value, view = self._value(value, "stored value"), self._view(view)
        if value.shape is None:
            rank = ir.MemRefType(view.type).rank
            if rank:
                raise BuilderError(f"stored value is a scalar ({value.type}), the view has rank "
                                   f"{rank}: store a tile (k.splat(x, [1] * {rank}))")
            value = self.splat(value, [])
        _verify(tile.StoreOp(value.value, view.value, self._offsets(view, offsets), add=add))

    @_located
    def atomic_add(self, view: Value, offsets: Sequence[Value | int], value: Value | int) -> Value:
        """Adds ``value`` (i32) to the element of ``view`` (i32) at ``offsets``, once for the
        program and atomically, and returns the element's value before the add.

        It orders memory between programs as a lock does: what the program wrote before it
        is visible to a program whose later add to the element returns this one's result,
        in what that program reads after its add. So programs that share work can count
        their parts of it and the last to add can read the others' results
        (:func:`tileopt.kernels.stream_k_matmul`). ``memref.atomic_rmw addi`` in the IR; no
        bounds check (as ``memref.load``).
        """
        view = self._view(view)
        dtype = ir.MemRefType(view.type).element_type
        if dtype != element_type("i32"):
            raise BuilderError(f"atomic_add adds to i32 views only, got a view of {dtype}")
        if not isinstance(value, Value):
            if not _is_int(value):
                raise BuilderError(f"atomic_add value must be an i32 scalar or an int, got "
                                   f"{value!r}")
            value = self.constant(value, "i32")
        value = self._value(value, "atomic_add value")
        if value.shape is not None or value.dtype != dtype:
            raise BuilderError(f"atomic_add value must be an i32 scalar, got {value.type}")
        kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(arith.AtomicRMWKind.addi))
        return self._wrap(memref.atomic_rmw(kind, value.value, view.value,
                                            self._offsets(view, offsets)))

    # -- making and reshaping tiles ----------------------------------------

    @_located
    def splat(self, scalar: Operand, shape: Sequence[int], dtype: str | None = None) -> Value:
        """A tile of ``shape`` filled with ``scalar`` (a Python number becomes ``dtype``,
        f32 by default)."""
        if not isinstance(scalar, Value):
            scalar = self.constant(scalar, dtype or "f32")
        elif self._value(scalar, "splat value").shape is not None:
            raise BuilderError(f"splat takes a scalar, got a tile of shape {scalar.shape}: use "
                               f"k.broadcast")
        result = self._tile_type(self._shape(shape, "splat"), scalar.type)
        return self._wrap(tile.splat(result, scalar.value))

    @_located
    def full(self, shape: Sequence[int], value: Number, dtype: str) -> Value:
        """A tile of ``shape`` and ``dtype`` filled with a constant."""
        return self.splat(self.constant(value, dtype), shape)

    @_located
    def iota(self, n: int) -> Value:
        """The i32 tile ``0, 1, ..., n-1``."""
        shape = self._shape([n] if _is_int(n) else n, "iota")
        return self._wrap(tile.iota(self._tile_type(shape, element_type("i32"))))

    @_located
    def broadcast(self, x: Value, shape: Sequence[int]) -> Value:
        """Expands the size-1 dims of ``x`` to ``shape`` (a scalar is splat)."""
        x, shape = self._value(x, "broadcast operand"), self._shape(shape, "broadcast")
        if x.shape is None:
            return self.splat(x, shape)
        if x.shape == tuple(shape):
            return x
        return self._wrap(tile.broadcast(self._tile_type(shape, x.dtype), x.value))

    @_located
    def expand_dims(self, x: Value, axis: int) -> Value:
        """Inserts a dim of size 1 at ``axis`` (in ``[-rank - 1, rank]``)."""
        x = self._tile(x, "expand_dims operand")
        shape = list(x.shape)  # type: ignore[arg-type]
        axis = self._axis(axis, len(shape) + 1)
        shape.insert(axis, 1)
        return self._wrap(tile.expand_dims(self._tile_type(shape, x.dtype), x.value, axis))

    @_located
    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """The elements of ``x``, row-major, with ``shape`` (as many elements)."""
        x, shape = self._tile(x, "reshape operand"), self._shape(shape, "reshape")
        return self._wrap(tile.reshape(self._tile_type(shape, x.dtype), x.value))

    @_located
    def permute(self, x: Value, permutation: Sequence[int]) -> Value:
        """Dim ``i`` of the result is dim ``permutation[i]`` of ``x``."""
        x = self._tile(x, "permute operand")
        rank = len(x.shape)  # type: ignore[arg-type]
        if (isinstance(permutation, str) or not isinstance(permutation, Sequence)
                or not all(_is_int(d) for d in permutation)
                or sorted(int(d) for d in permutation) != list(range(rank))):
            raise BuilderError(f"permutation {permutation!r} is not a permutation of "
                               f"{list(range(rank))} (x has shape {x.shape})")
        perm = [int(d) for d in permutation]
        shape = [x.shape[d] for d in perm]  # type: ignore[index]
        return self._wrap(tile.permute(self._tile_type(shape, x.dtype), x.value, perm))

    @_located
    def trans(self, x: Value) -> Value:
        """Transposes a 2-D tile."""
        return self.permute(x, [1, 0])

    # -- elementwise -------------------------------------------------------

    def _math(self, op: Callable, x: object, what: str) -> Value:
        x = self._value(x, f"{what} operand")
        if not _is_float(x.dtype):
            raise BuilderError(f"{what} takes floats, got {x.dtype}: cast with k.cast(x, 'f32')")
        return self._wrap(op(x.value))

    @_located
    def exp(self, x: Value) -> Value:
        """Elementwise e**x."""
        return self._math(math_d.exp, x, "exp")

    @_located
    def exp2(self, x: Value, ftz: bool = False) -> Value:
        """Elementwise 2**x (f32: PTX ``ex2.approx``, relative error below 2**-22).

        With ``ftz=True`` results below 2**-126 may flush to +0 (``math.exp2`` with
        ``fastmath<afn>``; PTX ``ex2.approx.ftz.f32``, as Triton's ``tl.math.exp2``): one
        instruction, where keeping subnormal results takes four. For sums whose largest
        term is 1, as a softmax's, the flushed terms are below the f32 sum's rounding.
        """
        x = self._value(x, "exp2 operand")
        if not _is_float(x.dtype):
            raise BuilderError(f"exp2 takes floats, got {x.dtype}: cast with k.cast(x, 'f32')")
        fastmath = ir.Attribute.parse("#arith.fastmath<afn>") if ftz else None
        return self._wrap(math_d.exp2(x.value, fastmath=fastmath))

    @_located
    def sqrt(self, x: Value) -> Value:
        """Elementwise square root."""
        return self._math(math_d.sqrt, x, "sqrt")

    @_located
    def rsqrt(self, x: Value) -> Value:
        """Elementwise 1/sqrt(x)."""
        return self._math(math_d.rsqrt, x, "rsqrt")

    @_located
    def tanh(self, x: Value) -> Value:
        """Elementwise tanh."""
        return self._math(math_d.tanh, x, "tanh")

    @_located
    def erf(self, x: Value) -> Value:
        """Elementwise error function."""
        return self._math(math_d.erf, x, "erf")

    @_located
    def fdiv(self, a: Operand, b: Operand, ieee_rounding: bool = True) -> Value:
        """Elementwise float division ``a / b`` (what ``/`` does with the default).

        With ``ieee_rounding=False`` the result may be off by 2 ulp (``arith.divf`` with
        ``fastmath<afn>``; PTX ``div.full.f32`` for f32, as Triton's ``/`` and ``tl.fdiv``):
        far fewer instructions and registers than the correctly rounded division.
        """
        a, b = self._promote(a, b)
        if not _is_float(a.dtype):
            raise BuilderError(f"fdiv divides floats, got {a.dtype}")
        fastmath = None if ieee_rounding else ir.Attribute.parse("#arith.fastmath<afn>")
        return self._wrap(arith.divf(a.value, b.value, fastmath=fastmath))

    def _floordivf(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """``floor(a / b)`` for floats (``//``)."""
        return self._wrap(math_d.floor(self._wrap(arith.divf(a, b)).value)).value

    def _mod(self, r: Value, b: Value) -> ir.Value:
        """A truncated remainder ``r`` of ``a / b`` made Python's (the sign of ``b``)."""
        zero = self._constant_like(0, r)
        adjust = (r != zero) & ((r < zero) != (b < zero))
        return self._wrap(arith.select(adjust.value, (r + b).value, r.value)).value

    def _modi(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """Python's ``a % b`` for integers (the result has the sign of ``b``, as torch's)."""
        return self._mod(self._wrap(arith.remsi(a, b)), Value(b, self))

    def _modf(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """Python's ``a % b`` for floats (the result has the sign of ``b``, as torch's)."""
        return self._mod(self._wrap(arith.remf(a, b)), Value(b, self))

    def _extremum(self, a: Operand, b: Operand, fop: Callable, uop: Callable,
                  sop: Callable) -> Value:
        """``fop`` for floats, ``uop`` for booleans (False < True), else ``sop``."""
        a, b = self._promote(a, b)
        op = fop if _is_float(a.dtype) else uop if _is_bool(a.dtype) else sop
        return self._wrap(op(a.value, b.value))

    @_located
    def maximum(self, a: Operand, b: Operand) -> Value:
        """Elementwise max (NaN-propagating for floats)."""
        return self._extremum(a, b, arith.maximumf, arith.maxui, arith.maxsi)

    @_located
    def minimum(self, a: Operand, b: Operand) -> Value:
        """Elementwise min (NaN-propagating for floats)."""
        return self._extremum(a, b, arith.minimumf, arith.minui, arith.minsi)

    @_located
    def where(self, cond: Value, a: Operand, b: Operand) -> Value:
        """``a`` where ``cond`` (i1) is true, else ``b``; the three broadcast together, and a
        scalar ``cond`` picks whole tiles. With two Python numbers the result is i1 if both are
        bools, i32 if both are integers, else f32."""
        cond = self._value(cond, "where's condition")
        if not _is_bool(cond.dtype):
            raise BuilderError(f"the condition must be i1 (a comparison), got {cond.dtype}: "
                               f"compare it, e.g. x != 0")
        if not isinstance(a, Value) and not isinstance(b, Value):
            dtype = ("i1" if all(isinstance(v, bool) for v in (a, b)) else
                     "i32" if all(isinstance(v, numbers.Integral) for v in (a, b)) else "f32")
            a = self.constant(a, dtype)
        a, b = self._promote(a, b)
        if cond.shape is not None or a.shape is not None:
            if a.shape is None:
                shape = cond.shape
            elif cond.shape is None:
                shape = a.shape
            else:
                shape = _broadcast_shape(cond.shape, a.shape)
            cond, a, b = (self.broadcast(v, shape) for v in (cond, a, b))  # type: ignore[arg-type]
        return self._wrap(arith.select(cond.value, a.value, b.value))

    @_located
    def cast(self, x: Value, dtype: str) -> Value:
        """Converts the element type of ``x`` (float/int widths and kinds), as torch's ``to``:
        booleans (i1) become 0 or 1, a cast to i1 is ``x != 0``, floats to integers truncate
        toward zero."""
        x = self._value(x, "cast operand")
        target = element_type(dtype)
        src = x.dtype
        if src == target:
            return x
        if _is_bool(target):
            return x != self._constant_like(0, x)
        result = self._tile_type(x.shape, target) if x.shape is not None else target
        if (isinstance(src, ir.IndexType) and _is_float(target)) or (
                _is_float(src) and isinstance(target, ir.IndexType)):  # no index <-> float op
            return self.cast(self.cast(x, "i64"), dtype)
        if (_is_fp8(src) or _is_fp8(target)) and not (_is_float(src) and _is_float(target)):
            # fp8 converts to and from floats only: integers go through f32
            return self.cast(self.cast(x, "f32"), dtype)
        if _is_float(src) and _is_float(target):
            if _float_width(target) == _float_width(src):  # f16 <-> bf16: through f32
                return self.cast(self.cast(x, "f32"), dtype)
            op = arith.extf if _float_width(target) > _float_width(src) else arith.truncf
        elif _is_float(src):
            op = arith.fptosi
        elif _is_float(target):
            op = arith.uitofp if _is_bool(src) else arith.sitofp
        elif isinstance(target, ir.IndexType) or isinstance(src, ir.IndexType):
            op = arith.index_castui if _is_bool(src) else arith.index_cast
        else:
            wide = ir.IntegerType(target).width > ir.IntegerType(src).width
            op = (arith.extui if _is_bool(src) else arith.extsi) if wide else arith.trunci
        return self._wrap(op(result, x.value))

    # -- reductions and dot ------------------------------------------------

    @_located
    def reduce(
        self,
        operands: Sequence[Value],
        axis: int,
        combine: Callable[..., Sequence[Value]],
        keepdims: bool = False,
    ) -> list[Value]:
        """Reduces ``operands`` (tiles of one shape) along ``axis`` with ``combine``.

        ``combine(acc_0, ..., acc_n-1, new_0, ..., new_n-1)`` gets scalar values
        and returns the n combined scalars.
        """
        if isinstance(operands, Value) or not isinstance(operands, Sequence) or not operands:
            raise BuilderError(f"operands must be a non-empty list of tiles, got {operands!r}")
        operands = [self._tile(o, f"operand {i}") for i, o in enumerate(operands)]
        if not callable(combine):
            raise BuilderError(f"combine must be a function of scalars, got {combine!r}")
        shape = list(operands[0].shape)  # type: ignore[arg-type]
        axis = self._axis(axis, len(shape))
        del shape[axis]
        result_types = [self._tile_type(shape, o.dtype) if shape else o.dtype for o in operands]
        op = tile.ReduceOp(result_types, [o.value for o in operands], axis)
        try:
            block = op.combiner.blocks.append(*([o.dtype for o in operands] * 2))
            with ir.InsertionPoint(block):
                combined = combine(*(Value(a, self) for a in block.arguments))
                if isinstance(combined, Value) or not isinstance(combined, Sequence) or not all(
                        isinstance(c, Value) for c in combined):
                    raise BuilderError(
                        f"combine must return a list of {len(operands)} scalar Values, got "
                        f"{combined!r}"
                    )
                tile.YieldOp([c.value for c in combined])
        except BaseException:
            op.operation.erase()
            raise
        results = [self._wrap(r) for r in op.results]
        if keepdims:
            results = [
                self.expand_dims(r, axis) if r.shape is not None else self.splat(r, [1])
                for r in results
            ]
        return results

    @_located
    def sum(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Sum along ``axis``."""
        return self.reduce([x], axis, lambda a, b: [a + b], keepdims)[0]

    @_located
    def max(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Maximum along ``axis`` (NaN-propagating for floats)."""
        return self.reduce([x], axis, lambda a, b: [self.maximum(a, b)], keepdims)[0]

    @_located
    def min(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Minimum along ``axis`` (NaN-propagating for floats)."""
        return self.reduce([x], axis, lambda a, b: [self.minimum(a, b)], keepdims)[0]

    @_located
    def argmax(self, x: Value, axis: int) -> tuple[Value, Value]:
        """(max, first index of the max) along ``axis``, indices as i32."""
        x = self._tile(x, "argmax operand")
        axis = self._axis(axis, len(x.shape))  # type: ignore[arg-type]
        n = x.shape[axis]  # type: ignore[index]
        idx = self.iota(n)
        for d in range(len(x.shape)):  # type: ignore[arg-type]
            if d != axis:
                idx = self.expand_dims(idx, d)
        idx = self.broadcast(idx, x.shape)  # type: ignore[arg-type]

        def combine(a: Value, ai: Value, b: Value, bi: Value) -> list[Value]:
            take_b = (b > a) | ((b == a) & (bi < ai))
            return [self.where(take_b, b, a), self.where(take_b, bi, ai)]

        m, i = self.reduce([x, idx], axis, combine)
        return m, i

    @_located
    def dot(self, a: Value, b: Value, acc: Value | None = None, tf32: bool = False) -> Value:
        """``acc + a @ b`` of 2-D tiles (M x K, K x N); ``acc`` defaults to f32 zeros."""
        a, b = self._tile(a, "dot lhs"), self._tile(b, "dot rhs")
        if len(a.shape) != 2 or len(b.shape) != 2:  # type: ignore[arg-type]
            raise BuilderError(f"dot takes 2-D tiles, got lhs {a.shape} and rhs {b.shape}")
        if acc is None:
            acc = self.full([a.shape[0], b.shape[1]], 0.0, "f32")  # type: ignore[index]
        acc = self._tile(acc, "dot acc")
        precision = tile.InputPrecision.tf32 if tf32 else None
        return self._wrap(tile.dot(a.value, b.value, acc.value, input_precision=precision))


class _Body:
    """A region being built whose ops end in an ``scf.yield`` of ``carried``' types: the
    body of a :class:`Loop` or the then-branch of a :class:`Branch`."""

    _what = "body"

    def __init__(self, builder: KernelBuilder, carried: list[Value]) -> None:
        for i, c in enumerate(carried):
            if not isinstance(c, Value):
                raise BuilderError(
                    f"carried value {i} must be a builder Value (make constants with "
                    f"k.full or k.constant), got {type(c).__name__}"
                )
        self.builder = builder
        self._types = [c.type for c in carried]
        self._yielded = False
        self._ip: ir.InsertionPoint | None = None

    @property
    def _block(self) -> ir.Block:
        raise NotImplementedError

    @property
    def results(self) -> list[Value]:
        """The carried values after the region (its op's results)."""
        if self._ip is not None or not self._yielded:
            raise BuilderError(
                f"{self._what}.results are known once the {self._what}'s body is built"
            )
        return [Value(r, self.builder) for r in self.op.results]

    def __enter__(self) -> Self:
        if self._ip is not None or self._yielded:
            raise BuilderError(f"a {self._what}'s body is built once")
        self._ip = ir.InsertionPoint(self._block)
        self._ip.__enter__()
        return self

    @_located
    def yield_(self, *values: Value) -> None:
        """Ends the body with its carried values' new values."""
        if self._ip is None or self._yielded:
            raise BuilderError(
                f"{self._what}.yield_ is called once, inside the {self._what}'s `with` block"
            )
        if len(values) != len(self._types):
            raise BuilderError(
                f"{self._what}.yield_ takes {len(self._types)} values (one per carried "
                f"value), got {len(values)}"
            )
        for i, (v, t) in enumerate(zip(values, self._types, strict=True)):
            if not isinstance(v, Value) or v.type != t:
                got = v.type if isinstance(v, Value) else type(v).__name__
                raise BuilderError(f"{self._what}.yield_ value {i} has type {got}, expected {t}")
        scf.YieldOp([v.value for v in values])
        self._yielded = True

    def __exit__(self, exc_type: object, *exc: object) -> None:
        assert self._ip is not None
        self._ip.__exit__(exc_type, *exc)
        self._ip = None
        if exc_type is None and not self._yielded:
            if not self._types:
                with ir.InsertionPoint(self._block), _caller_location(self.builder.context):
                    scf.YieldOp([])
                self._yielded = True
                return
            self._erase()
            raise BuilderError(
                f"the {self._what} carries {len(self._types)} values: end its body with "
                f"{self._what}.yield_(...)"
            )
        if exc_type is not None:
            self._erase()

    def _erase(self) -> None:
        # A body that failed to build: drop the op so that the kernel stays valid IR.
        self._yielded = False
        self.op.operation.erase()


class Loop(_Body):
    """An ``scf.for`` being built; see :meth:`KernelBuilder.loop`."""

    _what = "loop"

    def __init__(
        self, builder: KernelBuilder, start: Value, stop: Value, step: Value,
        carried: list[Value],
    ) -> None:
        super().__init__(builder, carried)
        self.op = scf.ForOp(start.value, stop.value, step.value, [c.value for c in carried])
        self.iv = Value(self.op.induction_variable, builder)
        self.carried = [Value(a, builder) for a in self.op.inner_iter_args]

    @property
    def _block(self) -> ir.Block:
        return self.op.body


class Branch(_Body):
    """An ``scf.if`` being built; see :meth:`KernelBuilder.if_`."""

    _what = "branch"

    def __init__(self, builder: KernelBuilder, cond: Value, carried: list[Value]) -> None:
        super().__init__(builder, carried)
        self.op = scf.IfOp(cond.value, self._types, has_else=bool(carried))
        self._else: _Else | None = None
        if carried:  # the values stay as they were where the condition fails
            with ir.InsertionPoint(self.op.else_block):
                scf.YieldOp([c.value for c in carried])

    @property
    def _block(self) -> ir.Block:
        return self.op.then_block

    @property
    def results(self) -> list[Value]:
        if self._else is not None and (self._else._ip is not None or not self._else._yielded):
            raise BuilderError("branch.results are known once the branch's else body is built")
        return super().results

    def else_(self) -> _Else:
        """The branch's other side, as a context: ops inside ``with branch.else_() as other:``
        run only where the condition fails. Built after the branch's own body; with carried
        values it ends with ``other.yield_(...)``, whose values are then the branch's
        results where the condition fails (instead of the carried values)."""
        if self._ip is not None or not self._yielded:
            raise BuilderError("branch.else_() comes after the branch's own body is built")
        if self._else is not None:
            raise BuilderError("a branch has one else body")
        self._else = _Else(self)
        return self._else


class _Else(_Body):
    """The else body of a :class:`Branch`; see :meth:`Branch.else_`."""

    _what = "else"

    def __init__(self, branch: Branch) -> None:
        self.branch = branch
        self.builder = branch.builder
        self._types = branch._types
        self._yielded = False
        self._ip = None
        self.op = branch.op

    @property
    def _block(self) -> ir.Block:
        return self.op.else_block

    def __enter__(self) -> Self:
        if self._ip is None and not self._yielded:  # replaces the default else
            if self._types:  # which yields the carried values, unchanged
                for op in list(self.op.else_block.operations):
                    op.operation.erase()
            else:
                ir.Block.create_at_start(self.op.regions[1], [])
        return super().__enter__()

    @property
    def results(self) -> list[Value]:
        raise BuilderError("the branch's results are branch.results")

    def _erase(self) -> None:
        self._yielded = False
        self.branch._erase()


def _logical(op_name: str) -> Callable[[Value, Operand], Value]:
    def method(self: Value, other: Operand) -> Value:
        a, b = self.builder._promote(self, other)
        if _is_float(a.dtype):
            raise BuilderError(f"bitwise/logical operators take integers or booleans, got "
                               f"{a.dtype}")
        return self.builder._wrap(getattr(arith, op_name)(a.value, b.value))

    return method


def _equality(fpred: str, ipred: str) -> Callable[[Value, object], Value]:
    def method(self: Value, other: object) -> Value:
        return self._compare(other, fpred, ipred)  # type: ignore[arg-type]

    return method


Value.__and__ = _logical("andi")  # type: ignore[assignment]
Value.__or__ = _logical("ori")  # type: ignore[assignment]
Value.__xor__ = _logical("xori")  # type: ignore[assignment]
Value.__rand__ = Value.__and__  # type: ignore[assignment]
Value.__ror__ = Value.__or__  # type: ignore[assignment]
Value.__rxor__ = Value.__xor__  # type: ignore[assignment]
Value.__eq__ = _equality("OEQ", "eq")  # type: ignore[assignment]
Value.__ne__ = _equality("UNE", "ne")  # type: ignore[assignment]
Value.__hash__ = object.__hash__  # type: ignore[assignment]
for _name in _OPERATORS:
    # Every operator creates its ops at the user's line and reports mistakes there.
    if _name in vars(Value):
        _method = vars(Value)[_name]
        _method.__name__ = _name
        setattr(Value, _name, _located(_method))

__all__ = ["KernelBuilder", "Loop", "Scalar", "Value", "View", "element_type"]
