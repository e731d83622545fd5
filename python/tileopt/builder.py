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

Everything built is ordinary MLIR (``tileopt.ir``): ``kb.module`` can be
printed, verified, canonicalized and compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TypeAlias

from tileopt import ir
from tileopt.dialects import arith, memref, scf, tile
from tileopt.dialects import math as math_d

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
}


def element_type(name: str) -> ir.Type:
    """The MLIR type named ``name`` (``"f32"``, ``"i32"``, ``"index"``, ...)."""
    try:
        return _ELEMENT_TYPES[name]()
    except KeyError:
        raise ValueError(
            f"unknown element type {name!r}; expected one of {sorted(_ELEMENT_TYPES)}"
        ) from None


@dataclass(frozen=True)
class View:
    """A kernel argument that views global memory: a strided memref.

    Sizes and strides are dynamic unless ``shape`` gives static sizes. With
    ``contiguous=True`` the innermost stride is statically 1
    (``memref<?x?xf32, strided<[?, 1], offset: ?>>``): the GPU lowering can then
    vectorise loads and stores along it, and a launch rejects tensors whose
    innermost stride is not 1. The default (all strides dynamic) accepts any
    strides.
    """

    dtype: str
    rank: int
    shape: tuple[int, ...] | None = None
    contiguous: bool = False

    def mlir_type(self) -> ir.Type:
        """The memref type, e.g. ``memref<?x?xf32, strided<[?, ?], offset: ?>>``."""
        dyn = ir.ShapedType.get_dynamic_size()
        shape = list(self.shape) if self.shape is not None else [dyn] * self.rank
        if len(shape) != self.rank:
            raise ValueError(f"View shape {self.shape} does not have rank {self.rank}")
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

    def mlir_type(self) -> ir.Type:
        """The scalar's MLIR type."""
        return element_type(self.dtype)


def _is_float(type_: ir.Type) -> bool:
    return isinstance(type_, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type))


class Value:
    """An SSA value (tile or scalar) with arithmetic operators."""

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

    # Arithmetic: float ops for float element types, signed integer ops else.
    def _binary(self, other: Operand, fop, iop, reverse: bool = False) -> Value:
        a, b = self.builder._promote(self, other)
        if reverse:
            a, b = b, a
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
        return self._binary(o, arith.divf, arith.floordivsi)

    def __mod__(self, o: Operand) -> Value:
        return self._binary(o, arith.remf, arith.remsi)

    def __neg__(self) -> Value:
        if _is_float(self.dtype):
            return self.builder._wrap(arith.negf(self.value))
        return self.builder._constant_like(0, self) - self

    def _compare(self, other: Operand, fpred: str, ipred: str) -> Value:
        a, b = self.builder._promote(self, other)
        if _is_float(a.dtype):
            pred = getattr(arith.CmpFPredicate, fpred)
            return self.builder._wrap(arith.cmpf(pred, a.value, b.value))
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
    arguments are ``k.args.<name>``.
    """

    def __init__(
        self,
        name: str,
        module: ir.Module | None = None,
        **arguments: View | Scalar | ir.Type,
    ) -> None:
        if module is None:
            self.context = ir.Context()
            with self.context, ir.Location.unknown():
                module = ir.Module.create()
        else:
            self.context = module.context
        self.module = module
        self.name = name
        with self.context, ir.Location.unknown():
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
        if isinstance(value, ir.OpView):
            value = value.result
        return Value(value, self)

    def constant(self, value: Number, dtype: str | ir.Type) -> Value:
        """A scalar constant of ``dtype``."""
        type_ = element_type(dtype) if isinstance(dtype, str) else dtype
        if _is_float(type_):
            attr = ir.FloatAttr.get(type_, float(value))
        else:
            attr = ir.IntegerAttr.get(type_, int(value))
        return self._wrap(arith.constant(type_, attr))

    def _constant_like(self, value: Number, like: Value) -> Value:
        scalar = self.constant(value, like.dtype)
        return self.splat(scalar, like.shape) if like.shape is not None else scalar

    def _as_value(self, x: Operand, like: Value) -> Value:
        if isinstance(x, Value):
            return x
        return self.constant(x, like.dtype)

    def _promote(self, a: Operand, b: Operand) -> tuple[Value, Value]:
        """Brings two operands to one type: constants, splats, broadcasts."""
        if not isinstance(a, Value):
            if not isinstance(b, Value):
                raise TypeError(
                    f"two Python numbers ({a!r}, {b!r}) have no tile type: make one of them a "
                    f"tile (KernelBuilder.full) or a constant (KernelBuilder.constant)"
                )
            b_, a_ = self._promote(b, a)
            return a_, b_
        b = self._as_value(b, a)
        if a.shape is None and b.shape is None:
            return a, b
        if a.shape is None:
            a = self.splat(a, b.shape)
        elif b.shape is None:
            b = self.splat(b, a.shape)
        if a.shape != b.shape:
            if len(a.shape) != len(b.shape):
                raise ValueError(f"cannot broadcast shapes {a.shape} and {b.shape}")
            shape = []
            for x, y in zip(a.shape, b.shape, strict=True):
                if x != y and 1 not in (x, y):
                    raise ValueError(f"cannot broadcast shapes {a.shape} and {b.shape}")
                shape.append(max(x, y))
            a, b = self.broadcast(a, shape), self.broadcast(b, shape)
        return a, b

    def _tile_type(self, shape: Sequence[int], dtype: ir.Type) -> ir.RankedTensorType:
        return ir.RankedTensorType.get(list(shape), dtype)

    # -- grid --------------------------------------------------------------

    def program_id(self, dim: int = 0) -> Value:
        """This program's index along grid dimension ``dim``."""
        return self._wrap(tile.program_id(dim))

    def num_programs(self, dim: int = 0) -> Value:
        """The grid's size along ``dim``."""
        return self._wrap(tile.num_programs(dim))

    def index(self, value: int) -> Value:
        """An ``index`` constant."""
        return self.constant(value, "index")

    def size(self, view: Value, axis: int) -> Value:
        """The size of ``view`` along ``axis`` (``memref.dim``), as ``index``."""
        rank = ir.MemRefType(view.type).rank
        if not 0 <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for a view of rank {rank}")
        return self._wrap(memref.dim(view.value, self.index(axis).value))

    def _as_index(self, x: Value | int) -> Value:
        if not isinstance(x, Value):
            return self.index(x)
        if isinstance(x.type, ir.IndexType):
            return x
        if isinstance(x.type, ir.IntegerType):
            return self.cast(x, "index")
        raise ValueError(f"expected an integer or index scalar, got a value of type {x.type}")

    # -- loops -------------------------------------------------------------

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
        return Loop(
            self,
            self._as_index(start),
            self._as_index(stop),
            self._as_index(step),
            list(carried),
        )

    # -- memory ------------------------------------------------------------

    def _offsets(self, offsets: Sequence[Value | int]) -> list[ir.Value]:
        return [(o if isinstance(o, Value) else self.index(o)).value for o in offsets]

    def load(
        self,
        view: Value,
        offsets: Sequence[Value | int],
        shape: Sequence[int],
        padding: Number | None = None,
    ) -> Value:
        """Reads a tile of ``shape`` at ``offsets``; out-of-bounds take ``padding``."""
        dtype = view.type.element_type
        pad = None
        if padding is not None:
            if _is_float(dtype):
                pad = ir.FloatAttr.get(dtype, float(padding))
            else:
                pad = ir.IntegerAttr.get(dtype, int(padding))
        result = self._tile_type(shape, dtype)
        return self._wrap(tile.load(result, view.value, self._offsets(offsets), padding=pad))

    def store(self, value: Value, view: Value, offsets: Sequence[Value | int]) -> None:
        """Writes ``value`` at ``offsets``; out-of-bounds elements are dropped."""
        tile.StoreOp(value.value, view.value, self._offsets(offsets))

    # -- making and reshaping tiles ----------------------------------------

    def splat(self, scalar: Operand, shape: Sequence[int], dtype: str | None = None) -> Value:
        """A tile of ``shape`` filled with ``scalar``."""
        if not isinstance(scalar, Value):
            scalar = self.constant(scalar, dtype or "f32")
        return self._wrap(tile.splat(self._tile_type(shape, scalar.type), scalar.value))

    def full(self, shape: Sequence[int], value: Number, dtype: str) -> Value:
        """A tile of ``shape`` and ``dtype`` filled with a constant."""
        return self.splat(self.constant(value, dtype), shape)

    def iota(self, n: int) -> Value:
        """The i32 tile ``0, 1, ..., n-1``."""
        return self._wrap(tile.iota(self._tile_type([n], element_type("i32"))))

    def broadcast(self, x: Value, shape: Sequence[int]) -> Value:
        """Expands the size-1 dims of ``x`` to ``shape``."""
        if x.shape == tuple(shape):
            return x
        return self._wrap(tile.broadcast(self._tile_type(shape, x.dtype), x.value))

    def expand_dims(self, x: Value, axis: int) -> Value:
        """Inserts a dim of size 1 at ``axis``."""
        shape = list(x.shape or ())
        shape.insert(axis, 1)
        return self._wrap(tile.expand_dims(self._tile_type(shape, x.dtype), x.value, axis))

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """The elements of ``x``, row-major, with ``shape``."""
        return self._wrap(tile.reshape(self._tile_type(shape, x.dtype), x.value))

    def permute(self, x: Value, permutation: Sequence[int]) -> Value:
        """Dim ``i`` of the result is dim ``permutation[i]`` of ``x``."""
        shape = [x.shape[d] for d in permutation]
        return self._wrap(tile.permute(self._tile_type(shape, x.dtype), x.value, list(permutation)))

    def trans(self, x: Value) -> Value:
        """Transposes a 2-D tile."""
        return self.permute(x, [1, 0])

    # -- elementwise -------------------------------------------------------

    def exp(self, x: Value) -> Value:
        """Elementwise e**x."""
        return self._wrap(math_d.exp(x.value))

    def sqrt(self, x: Value) -> Value:
        """Elementwise square root."""
        return self._wrap(math_d.sqrt(x.value))

    def rsqrt(self, x: Value) -> Value:
        """Elementwise 1/sqrt(x)."""
        return self._wrap(math_d.rsqrt(x.value))

    def tanh(self, x: Value) -> Value:
        """Elementwise tanh."""
        return self._wrap(math_d.tanh(x.value))

    def erf(self, x: Value) -> Value:
        """Elementwise error function."""
        return self._wrap(math_d.erf(x.value))

    def fdiv(self, a: Operand, b: Operand, ieee_rounding: bool = True) -> Value:
        """Elementwise float division ``a / b`` (what ``/`` does with the default).

        With ``ieee_rounding=False`` the result may be off by 2 ulp (``arith.divf`` with
        ``fastmath<afn>``; PTX ``div.full.f32`` for f32, as Triton's ``/`` and ``tl.fdiv``):
        far fewer instructions and registers than the correctly rounded division.
        """
        a, b = self._promote(a, b)
        if not _is_float(a.dtype):
            raise TypeError(f"fdiv divides floats, got {a.dtype}")
        fastmath = None if ieee_rounding else ir.Attribute.parse("#arith.fastmath<afn>")
        return self._wrap(arith.divf(a.value, b.value, fastmath=fastmath))

    def maximum(self, a: Operand, b: Operand) -> Value:
        """Elementwise max (NaN-propagating for floats)."""
        a, b = self._promote(a, b)
        op = arith.maximumf if _is_float(a.dtype) else arith.maxsi
        return self._wrap(op(a.value, b.value))

    def minimum(self, a: Operand, b: Operand) -> Value:
        """Elementwise min (NaN-propagating for floats)."""
        a, b = self._promote(a, b)
        op = arith.minimumf if _is_float(a.dtype) else arith.minsi
        return self._wrap(op(a.value, b.value))

    def where(self, cond: Value, a: Operand, b: Operand) -> Value:
        """``a`` where ``cond`` is true, else ``b``. With two Python numbers, the result has
        ``cond``'s shape and is f32 if either is a float, else i32."""
        if not isinstance(a, Value) and not isinstance(b, Value):
            dtype = "f32" if isinstance(a, float) or isinstance(b, float) else "i32"
            a = self.constant(a, dtype)
        a, b = self._promote(a, b)
        if a.shape is None and cond.shape is not None:
            a, b = self.splat(a, cond.shape), self.splat(b, cond.shape)
        if cond.shape != a.shape and a.shape is not None:
            cond = self.broadcast(cond, a.shape)
        return self._wrap(arith.select(cond.value, a.value, b.value))

    def cast(self, x: Value, dtype: str) -> Value:
        """Converts the element type of ``x`` (float/int widths and kinds)."""
        target = element_type(dtype)
        result = self._tile_type(x.shape, target) if x.shape is not None else target
        src = x.dtype
        if src == target:
            return x
        if _is_float(src) and _is_float(target):
            width = {ir.F16Type: 16, ir.BF16Type: 16, ir.F32Type: 32, ir.F64Type: 64}
            wide = width[type(target)] > width[type(src)]
            op = arith.extf if wide else arith.truncf
        elif _is_float(src):
            op = arith.fptosi
        elif _is_float(target):
            op = arith.sitofp
        elif isinstance(target, ir.IndexType) or isinstance(src, ir.IndexType):
            op = arith.index_cast
        else:
            wide = ir.IntegerType(target).width > ir.IntegerType(src).width
            op = arith.extsi if wide else arith.trunci
        return self._wrap(op(result, x.value))

    # -- reductions and dot ------------------------------------------------

    def reduce(
        self,
        operands: Sequence[Value],
        axis: int,
        combine: Callable[..., Sequence[Value]],
        keepdims: bool = False,
    ) -> list[Value]:
        """Reduces ``operands`` along ``axis`` with ``combine``.

        ``combine(acc_0, ..., acc_n-1, new_0, ..., new_n-1)`` gets scalar values
        and returns the n combined scalars.
        """
        shape = list(operands[0].shape)
        del shape[axis]
        result_types = [self._tile_type(shape, o.dtype) if shape else o.dtype for o in operands]
        op = tile.ReduceOp(result_types, [o.value for o in operands], axis)
        block = op.combiner.blocks.append(*([o.dtype for o in operands] * 2))
        with ir.InsertionPoint(block):
            combined = combine(*(Value(a, self) for a in block.arguments))
            tile.YieldOp([c.value for c in combined])
        results = [self._wrap(r) for r in op.results]
        if keepdims:
            results = [
                self.expand_dims(r, axis) if r.shape is not None else self.splat(r, [1])
                for r in results
            ]
        return results

    def sum(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Sum along ``axis``."""
        return self.reduce([x], axis, lambda a, b: [a + b], keepdims)[0]

    def max(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Maximum along ``axis`` (NaN-propagating for floats)."""
        return self.reduce([x], axis, lambda a, b: [self.maximum(a, b)], keepdims)[0]

    def min(self, x: Value, axis: int, keepdims: bool = False) -> Value:
        """Minimum along ``axis`` (NaN-propagating for floats)."""
        return self.reduce([x], axis, lambda a, b: [self.minimum(a, b)], keepdims)[0]

    def argmax(self, x: Value, axis: int) -> tuple[Value, Value]:
        """(max, first index of the max) along ``axis``, indices as i32."""
        n = x.shape[axis]
        idx = self.iota(n)
        for d in range(len(x.shape)):
            if d != axis:
                idx = self.expand_dims(idx, d)
        idx = self.broadcast(idx, x.shape)

        def combine(a: Value, ai: Value, b: Value, bi: Value) -> list[Value]:
            take_b = (b > a) | ((b == a) & (bi < ai))
            return [self.where(take_b, b, a), self.where(take_b, bi, ai)]

        m, i = self.reduce([x, idx], axis, combine)
        return m, i

    def dot(self, a: Value, b: Value, acc: Value | None = None, tf32: bool = False) -> Value:
        """``acc + a @ b``; ``acc`` defaults to f32 zeros."""
        if acc is None:
            acc = self.full([a.shape[0], b.shape[1]], 0.0, "f32")
        precision = tile.InputPrecision.tf32 if tf32 else None
        return self._wrap(tile.dot(a.value, b.value, acc.value, input_precision=precision))


class Loop:
    """An ``scf.for`` being built; see :meth:`KernelBuilder.loop`."""

    def __init__(
        self, builder: KernelBuilder, start: Value, stop: Value, step: Value,
        carried: list[Value],
    ) -> None:
        for i, c in enumerate(carried):
            if not isinstance(c, Value):
                raise TypeError(
                    f"carried value {i} must be a builder Value (make constants with "
                    f"k.full or k.constant), got {type(c).__name__}"
                )
        self.builder = builder
        self.op = scf.ForOp(start.value, stop.value, step.value, [c.value for c in carried])
        self.iv = Value(self.op.induction_variable, builder)
        self.carried = [Value(a, builder) for a in self.op.inner_iter_args]
        self._yielded = False
        self._ip: ir.InsertionPoint | None = None

    @property
    def results(self) -> list[Value]:
        """The carried values after the loop (its results)."""
        if self._ip is not None or not self._yielded:
            raise RuntimeError("loop.results are known once the loop's body is built")
        return [Value(r, self.builder) for r in self.op.results]

    def __enter__(self) -> Loop:
        if self._ip is not None or self._yielded:
            raise RuntimeError("a loop's body is built once")
        self._ip = ir.InsertionPoint(self.op.body)
        self._ip.__enter__()
        return self

    def yield_(self, *values: Value) -> None:
        """Ends the iteration with the next iteration's carried values."""
        if self._ip is None or self._yielded:
            raise RuntimeError("loop.yield_ is called once, inside the loop's `with` block")
        if len(values) != len(self.carried):
            raise ValueError(
                f"loop.yield_ takes {len(self.carried)} values (one per carried value), "
                f"got {len(values)}"
            )
        for i, (v, c) in enumerate(zip(values, self.carried, strict=True)):
            if not isinstance(v, Value) or v.type != c.type:
                got = v.type if isinstance(v, Value) else type(v).__name__
                raise ValueError(f"loop.yield_ value {i} has type {got}, expected {c.type}")
        scf.YieldOp([v.value for v in values])
        self._yielded = True

    def __exit__(self, exc_type: object, *exc: object) -> None:
        assert self._ip is not None
        self._ip.__exit__(exc_type, *exc)
        self._ip = None
        if exc_type is None and not self._yielded:
            if not self.carried:
                with ir.InsertionPoint(self.op.body):
                    scf.YieldOp([])
                self._yielded = True
                return
            self._erase()
            raise RuntimeError(
                f"the loop carries {len(self.carried)} values: end its body with "
                f"loop.yield_(...)"
            )
        if exc_type is not None:
            self._erase()

    def _erase(self) -> None:
        # A body that failed to build: drop the loop so that the kernel stays valid IR.
        self._yielded = False
        self.op.operation.erase()


def _logical(op_name: str) -> Callable[[Value, Operand], Value]:
    def method(self: Value, other: Operand) -> Value:
        a, b = self.builder._promote(self, other)
        return self.builder._wrap(getattr(arith, op_name)(a.value, b.value))

    return method


def _equality(fpred: str, ipred: str) -> Callable[[Value, object], Value]:
    def method(self: Value, other: object) -> Value:
        return self._compare(other, fpred, ipred)  # type: ignore[arg-type]

    return method


Value.__and__ = _logical("andi")  # type: ignore[assignment]
Value.__or__ = _logical("ori")  # type: ignore[assignment]
Value.__xor__ = _logical("xori")  # type: ignore[assignment]
Value.__eq__ = _equality("OEQ", "eq")  # type: ignore[assignment]
Value.__ne__ = _equality("UNE", "ne")  # type: ignore[assignment]
Value.__hash__ = object.__hash__  # type: ignore[assignment]

__all__ = ["KernelBuilder", "Loop", "Scalar", "Value", "View", "element_type"]
