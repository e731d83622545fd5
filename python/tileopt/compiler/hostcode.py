"""Host code: the ``func.func`` of a tile module translated into readable Python.

Kernel formation (``tileopt-linalg-to-tile``) leaves a tile module with ``tile.kernel`` ops and
one public host function that allocates buffers, makes views and launches the kernels. This
module translates that function into Python source, one line per op, like the output code of
TorchInductor, and compiles it::

    def forward(arg0, arg1):
        # arg0: x f32[4, 37]
        # arg1: bias f32[37]
        view0 = arg1.as_strided((4, 37), (0, arg1.stride(0)), arg1.storage_offset())
        buf0 = empty((4, 37), torch.float32)
        # k0_add: generic x1: add
        launch("k0_add", (4, 1, 1), arg0, view0, buf0)
        return (buf0,)

Memrefs are torch tensors (views share their base's storage), index values are Python ints,
and constants are folded into literals. The code calls two functions that the runtime provides
when the program is bound (:meth:`HostProgram.bind`): ``launch(kernel, grid, *args)`` and
``empty(shape, dtype)``, so the same code runs on every device. ``memref.global`` constants are
built once, as CPU tensors in :attr:`HostProgram.constants`, and moved to the device by ``bind``.

The ops a host function may hold, and their meaning in torch:

========================================  =====================================================
``arith.constant``                        a literal (index, integer, float)
``arith.addi``, ``subi``, ``muli``, ...   index arithmetic on Python ints (folded when constant)
``memref.alloc``                          ``empty(shape, dtype)``: a new contiguous tensor
``memref.extract_strided_metadata``       the tensor, ``storage_offset()``, sizes, ``stride(i)``
``memref.reinterpret_cast``               ``base.as_strided(sizes, strides, offset)``
``memref.subview``                        a slice ``t[1:3, 2]`` (rank-reducing: an index)
``memref.expand_shape``/``collapse_shape`` ``t.view(...)`` (``t.reshape(...)`` for inputs)
``memref.transpose``                      ``t.permute(...)``
``memref.cast``                           the same tensor
``memref.dim``                            a size
``memref.copy %a, %b``                    ``b.copy_(a)``
``memref.get_global``                     ``constants["name"]``
``memref.dealloc``                        nothing (torch frees buffers itself)
``tile.launch``                           ``launch("kernel", grid, *args)``
``func.return``                           ``return (...)``
========================================  =====================================================

Any other op is a :class:`~tileopt.errors.CompilationError` naming it.
"""

from __future__ import annotations

import hashlib
import linecache
import math
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tileopt import ir
from tileopt.errors import CompilationError
from tileopt.runtime.host import (
    bind_host_function,
    ceil_div,
    div_trunc,
    python_name,
    rem_trunc,
)

#: torch dtype names of the element types a host function's memrefs may have.
TORCH_DTYPES: dict[str, str] = {
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "index": "int64",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
}

# numpy dtypes of the same element types, for reading dense constants (bf16 as raw bits).
_NUMPY_DTYPES: dict[str, str] = {
    "f16": "float16", "bf16": "uint16", "f32": "float32", "f64": "float64", "i1": "bool",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "index": "int64",
}

_DYNAMIC = ir.ShapedType.get_dynamic_size()
_DYNAMIC_STRIDE = ir.ShapedType.get_dynamic_stride_or_offset()


# ---------------------------------------------------------------------------------------------
# the program (its run-time helpers are tileopt.runtime.host's)


@dataclass(frozen=True)
class HostProgram:
    """A host function translated into Python and compiled.

    Attributes:
        source: the generated Python source (one ``def``), for reading and dumping.
        function: the name of the host function, also the name of the ``def``.
        kernel_names: the kernels it launches, in the order of their first launch.
        num_inputs: the number of arguments of the function.
        num_outputs: the number of values it returns (always returned as a tuple).
        constants: the ``memref.global`` constants it reads, by symbol name, as CPU tensors.
        code: the compiled module code object that defines the function.
    """

    source: str
    function: str
    kernel_names: tuple[str, ...]
    num_inputs: int
    num_outputs: int
    constants: Mapping[str, Any] = field(repr=False)
    code: types.CodeType = field(repr=False)

    def bind(
        self,
        launch: Callable[..., Any],
        empty: Callable[[tuple[int, ...], Any], Any],
        device: Any = "cpu",
    ) -> Callable[..., tuple[Any, ...]]:
        """The host function as a Python callable, running on a device.

        Args:
            launch: ``launch(kernel_name, grid, *args)``, called for every ``tile.launch``
                with a grid of three ints and the arguments (tensors and Python numbers).
            empty: ``empty(shape, dtype)``: a new contiguous tensor of a tuple of ints and a
                ``torch.dtype``, on the device.
            device: where the constants live (they are moved there once, here).

        Returns:
            ``function(*inputs) -> tuple`` of the host function's results.
        """
        return bind_host_function(self.code, self.function, launch, empty,
                                  self.constants, device)


# ---------------------------------------------------------------------------------------------
# translation


@dataclass(frozen=True)
class _Value:
    """What an SSA value is in the generated code.

    ``text`` is a Python expression: a variable, a literal, or a pure expression of a variable
    (``arg1.stride(0)``); ``const`` the value when it is known while generating; ``root`` for
    memrefs, what the storage is: ``"input"`` (an argument of any strides, only read) or
    ``"owned"`` (an allocation, a constant or an argument made contiguous), whose layout is
    the one its memref type says.
    """

    text: str
    const: int | float | bool | None = None
    root: str = ""


def _literal(v: int | float | bool) -> _Value:
    if isinstance(v, bool):
        return _Value(repr(v), v)
    if isinstance(v, float):
        if math.isnan(v):
            return _Value('float("nan")', v)
        if math.isinf(v):
            return _Value('float("inf")' if v > 0 else 'float("-inf")', v)
        return _Value(repr(v), v)
    return _Value(str(int(v)), int(v))


def _tuple(items: Sequence[str]) -> str:
    """A Python tuple display: ``()``, ``(a,)``, ``(a, b)``."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _string(text: str) -> str:
    """A Python string literal in double quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# Index arithmetic: op name -> (python operator or helper, folding function).
_BINARY: dict[str, tuple[str, Callable[[int, int], int]]] = {
    "arith.addi": ("{} + {}", lambda a, b: a + b),
    "arith.subi": ("{} - {}", lambda a, b: a - b),
    "arith.muli": ("{} * {}", lambda a, b: a * b),
    "arith.divsi": ("div_trunc({}, {})", div_trunc),
    "arith.divui": ("{} // {}", lambda a, b: a // b),
    "arith.floordivsi": ("{} // {}", lambda a, b: a // b),
    "arith.remsi": ("rem_trunc({}, {})", rem_trunc),
    "arith.remui": ("{} % {}", lambda a, b: a % b),
    "arith.ceildivsi": ("ceil_div({}, {})", ceil_div),
    "arith.ceildivui": ("ceil_div({}, {})", ceil_div),
    "arith.minsi": ("min({}, {})", min),
    "arith.maxsi": ("max({}, {})", max),
    "arith.minui": ("min({}, {})", min),
    "arith.maxui": ("max({}, {})", max),
}
_CASTS = ("arith.index_cast", "arith.index_castui")


def _where(op: ir.Operation) -> str:
    loc = str(op.location)
    return "" if loc in ("loc(unknown)", "") else f" at {loc}"


def _mixed(static: Sequence[int], dynamic: Sequence[_Value], sentinel: int) -> list[_Value]:
    """The values of a static array attribute whose ``sentinel`` entries come from
    ``dynamic`` operands, in order (``static_sizes`` + ``sizes`` of a subview)."""
    it = iter(dynamic)
    return [next(it) if s == sentinel else _literal(int(s)) for s in static]


def _segments(op: ir.Operation) -> list[list[ir.Value]]:
    """The operands of ``op`` split by its ``operandSegmentSizes``."""
    sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    out, at = [], 0
    for n in sizes:
        out.append(operands[at:at + n])
        at += n
    return out


def _static(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _memref(value: ir.Value) -> ir.MemRefType:
    t = value.type
    if not isinstance(t, ir.MemRefType):
        raise CompilationError(f"expected a memref in host code, got a value of type {t}")
    return t


def _contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(list(shape)):
        strides.append(acc)
        acc = acc * d if d != _DYNAMIC and acc != _DYNAMIC else _DYNAMIC
    return strides[::-1]


def _is_contiguous_layout(t: ir.MemRefType) -> bool:
    """Whether ``t``'s layout is the identity: contiguous strides, offset 0 (any layout of an
    empty memref, whose identity layout MLIR gives dynamic strides: it holds no element)."""
    if 0 in t.shape:
        return True
    strides, offset = t.get_strides_and_offset()
    expected = _contiguous_strides(t.shape)
    return offset == 0 and all(
        s == e or d == 1 for s, e, d in zip(strides, expected, t.shape, strict=True)
    )


def _torch_dtype(t: ir.Type, where: str) -> str:
    name = str(t)
    if name not in TORCH_DTYPES:
        raise CompilationError(
            f"{where}: element type {name} has no torch dtype; host code handles "
            f"{', '.join(TORCH_DTYPES)}"
        )
    return f"torch.{TORCH_DTYPES[name]}"


class _Translator:
    """Walks one host function and writes its Python lines."""

    def __init__(self, module: ir.Module, func: ir.Operation, kernels: Mapping[str, ir.Operation],
                 globals_: Mapping[str, ir.Operation],
                 input_descriptions: Sequence[str] | None) -> None:
        self.module = module
        self.func = func
        self.name = ir.StringAttr(func.attributes["sym_name"]).value
        self.kernels = kernels
        self.globals = globals_
        self.input_descriptions = input_descriptions
        self.values: dict[ir.Value, _Value] = {}
        self.lines: list[str] = []
        self.counters: dict[str, int] = {}
        self.constants: dict[str, Any] = {}
        self.launched: list[str] = []
        self.num_outputs = 0
        self._module_text: str | None = None

    # -- helpers

    def fresh(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0)
        self.counters[prefix] = n + 1
        return f"{prefix}{n}"

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def get(self, value: ir.Value) -> _Value:
        try:
            return self.values[value]
        except KeyError:
            raise CompilationError(
                f"host function @{self.name}: a value is used before it is defined ({value})"
            ) from None

    def define(self, result: ir.Value, prefix: str, expr: str, root: str = "") -> _Value:
        name = self.fresh(prefix)
        self.emit(f"{name} = {expr}")
        v = _Value(name, None, root)
        self.values[result] = v
        return v

    def error(self, op: ir.Operation, what: str) -> CompilationError:
        return CompilationError(f"host function @{self.name}: '{op.name}'{_where(op)}: {what}")

    # -- the function

    def translate(self) -> str:
        body = self.func.regions[0]
        blocks = list(body.blocks)
        if len(blocks) != 1:
            raise CompilationError(
                f"host function @{self.name} has {len(blocks)} blocks; host code has no "
                f"control flow (one block of ops)"
            )
        block = blocks[0]
        params = []
        for i, arg in enumerate(block.arguments):
            name = f"arg{i}"
            params.append(name)
            self.values[arg] = _Value(name, None, "input")
        header = [f"def {python_name(self.name)}({', '.join(params)}):"]
        for i, arg in enumerate(block.arguments):
            desc = self._describe_arg(i, arg)
            if desc:
                self.emit(f"# arg{i}: {desc}")
        for i, arg in enumerate(block.arguments):
            if isinstance(arg.type, ir.MemRefType) and self._needs_contiguous(i, arg.type):
                self.emit(f"arg{i} = contiguous(arg{i})")
                self.values[arg] = _Value(f"arg{i}", None, "owned")
        for op in block.operations:
            self.op(op.operation)
        body_lines = [f"    {line}" for line in self.lines] or ["    pass"]
        return "\n".join(header + body_lines) + "\n"

    def _describe_arg(self, i: int, arg: ir.Value) -> str:
        given = self.input_descriptions
        if given is not None and i < len(given):
            return given[i]
        t = arg.type
        if isinstance(t, ir.MemRefType):
            dims = ", ".join("?" if d == _DYNAMIC else str(d) for d in t.shape)
            return f"{t.element_type}[{dims}]"
        return str(t)

    def _needs_contiguous(self, i: int, t: ir.MemRefType) -> bool:
        """Whether argument ``i`` of type ``t`` must be made contiguous: its type has a static
        layout, which the code may read (an identity layout, offset 0)."""
        strides, offset = t.get_strides_and_offset()
        if all(s == _DYNAMIC_STRIDE for s in strides) and offset == _DYNAMIC_STRIDE:
            return False
        expected = _contiguous_strides(t.shape)
        for s, e, d in zip(strides, expected, t.shape, strict=True):
            if s != _DYNAMIC_STRIDE and s != e and d != 1:
                raise CompilationError(
                    f"host function @{self.name}: argument {i} has type {t}, a static layout "
                    f"that is not contiguous; host arguments take any strides "
                    f"(strided<[?, ...], offset: ?>) or the identity layout"
                )
        if offset not in (_DYNAMIC_STRIDE, 0):
            raise CompilationError(
                f"host function @{self.name}: argument {i} has type {t} with a static offset "
                f"{offset}; host arguments take a dynamic offset or offset 0"
            )
        return True

    # -- ops

    def op(self, op: ir.Operation) -> None:
        name = op.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, op)
        elif name in _BINARY:
            self.binary(op)
        elif name in _CASTS:
            self.values[op.results[0]] = self.get(op.operands[0])
        else:
            supported = sorted({*_HANDLERS, *_BINARY, *_CASTS})
            raise self.error(
                op,
                f"this op is not supported in host code; a host function may hold "
                f"{', '.join(supported)}",
            )

    def constant(self, op: ir.Operation) -> None:
        attr = op.attributes["value"]
        t = op.results[0].type
        if isinstance(t, ir.IndexType | ir.IntegerType):
            v = ir.IntegerAttr(attr).value
            if isinstance(t, ir.IntegerType) and t.width == 1:
                self.values[op.results[0]] = _literal(bool(v))
            else:
                self.values[op.results[0]] = _literal(int(v))
        elif isinstance(t, ir.FloatType):
            self.values[op.results[0]] = _literal(float(ir.FloatAttr(attr).value))
        else:
            raise self.error(op, f"a constant of type {t}; host code folds index, integer and "
                                 f"float scalars only")

    def binary(self, op: ir.Operation) -> None:
        template, fold = _BINARY[op.name]
        a, b = (self.get(v) for v in op.operands)
        if isinstance(a.const, int) and isinstance(b.const, int):
            if op.name not in ("arith.addi", "arith.subi", "arith.muli", "arith.minsi",
                               "arith.maxsi", "arith.minui", "arith.maxui") and b.const == 0:
                raise self.error(op, "division by zero in constant index arithmetic")
            self.values[op.results[0]] = _literal(fold(a.const, b.const))
            return
        self.define(op.results[0], "s", template.format(a.text, b.text))

    def alloc(self, op: ir.Operation) -> None:
        t = _memref(op.results[0])
        if not _is_contiguous_layout(t):
            raise self.error(op, f"an allocation of type {t}: only the identity (contiguous) "
                                 f"layout is supported")
        dynamic = [self.get(v) for v in op.operands]
        sizes = _mixed(list(t.shape), dynamic, _DYNAMIC)
        dtype = _torch_dtype(t.element_type, f"host function @{self.name}")
        self.define(op.results[0], "buf", f"empty({_tuple([s.text for s in sizes])}, {dtype})",
                    "owned")

    def extract_strided_metadata(self, op: ir.Operation) -> None:
        src = self.get(op.operands[0])
        t = _memref(op.operands[0])
        strides, offset = t.get_strides_and_offset()
        results = list(op.results)
        rank = t.rank
        self.values[results[0]] = src  # the base buffer: the same storage
        self.values[results[1]] = (
            _literal(offset) if offset != _DYNAMIC_STRIDE and src.root == "owned"
            else _Value(f"{src.text}.storage_offset()", None)
        )
        for i in range(rank):
            d = t.shape[i]
            self.values[results[2 + i]] = (
                _literal(d) if d != _DYNAMIC else _Value(f"{src.text}.size({i})")
            )
            s = strides[i]
            self.values[results[2 + rank + i]] = (
                _literal(s) if s != _DYNAMIC_STRIDE and src.root == "owned"
                else _Value(f"{src.text}.stride({i})")
            )

    def reinterpret_cast(self, op: ir.Operation) -> None:
        source, offsets, sizes, strides = _segments(op)
        base = self.get(source[0])
        off = _mixed(_static(op, "static_offsets"), [self.get(v) for v in offsets],
                     _DYNAMIC_STRIDE)
        size = _mixed(_static(op, "static_sizes"), [self.get(v) for v in sizes], _DYNAMIC)
        stride = _mixed(_static(op, "static_strides"), [self.get(v) for v in strides],
                        _DYNAMIC_STRIDE)
        self.define(
            op.results[0], "view",
            f"{base.text}.as_strided({_tuple([s.text for s in size])}, "
            f"{_tuple([s.text for s in stride])}, {off[0].text})",
            base.root,
        )

    def subview(self, op: ir.Operation) -> None:
        source, offsets, sizes, strides = _segments(op)
        src = self.get(source[0])
        src_type = _memref(source[0])
        res_type = _memref(op.results[0])
        off = _mixed(_static(op, "static_offsets"), [self.get(v) for v in offsets],
                     _DYNAMIC_STRIDE)
        size = _mixed(_static(op, "static_sizes"), [self.get(v) for v in sizes], _DYNAMIC)
        step = _mixed(_static(op, "static_strides"), [self.get(v) for v in strides],
                      _DYNAMIC_STRIDE)
        dropped = self._dropped_dims(op, size, list(res_type.shape))
        if any(not isinstance(k.const, int) or k.const < 1 for k in step):
            # A dynamic or non-positive step: no Python slice; spell out the strided view.
            kept = [i for i in range(len(size)) if i not in dropped]
            offset = " + ".join(
                [f"{src.text}.storage_offset()"]
                + [f"{o.text} * {src.text}.stride({i})" for i, o in enumerate(off)
                   if o.const != 0]
            )
            new_strides = [f"{src.text}.stride({i}) * {step[i].text}" for i in kept]
            self.define(
                op.results[0], "view",
                f"{src.text}.as_strided({_tuple([size[i].text for i in kept])}, "
                f"{_tuple(new_strides)}, {offset})",
                src.root,
            )
            return
        items = []
        for i, (o, s, k) in enumerate(zip(off, size, step, strict=True)):
            if i in dropped:
                items.append(o.text)
                continue
            full = src_type.shape[i]
            if o.const == 0 and k.const == 1 and s.const is not None and s.const == full:
                items.append(":")
                continue
            start = "" if o.const == 0 else o.text
            if o.const is not None and s.const is not None and isinstance(k.const, int):
                stop = str(int(o.const) + (int(s.const) - 1) * k.const + 1)
            elif k.const == 1:
                stop = f"{o.text} + {s.text}"
            else:
                stop = f"{o.text} + ({s.text} - 1) * {k.text} + 1"
            items.append(f"{start}:{stop}" + ("" if k.const == 1 else f":{k.text}"))
        while items and items[-1] == ":":
            items.pop()
        if not items:
            self.values[op.results[0]] = src
            return
        self.define(op.results[0], "view", f"{src.text}[{', '.join(items)}]", src.root)

    def _dropped_dims(self, op: ir.Operation, sizes: Sequence[_Value],
                      result_shape: Sequence[int]) -> set[int]:
        """The unit dimensions a rank-reducing subview drops (greedily, left to right: a
        dimension is kept while it can match the result's next size)."""
        n, r = len(sizes), len(result_shape)
        if n == r:
            return set()
        dropped: set[int] = set()
        j = 0
        for i, s in enumerate(sizes):
            need_drop = (n - i) - (r - j)  # dims still to drop
            matches = j < r and (result_shape[j] == _DYNAMIC or s.const == result_shape[j])
            if matches and not (s.const == 1 and need_drop > 0 and result_shape[j] != 1):
                j += 1
            elif s.const == 1 and need_drop > 0:
                dropped.add(i)
            else:
                raise self.error(op, "cannot tell which unit dimensions this rank-reducing "
                                     "subview drops")
        if j != r:
            raise self.error(op, "cannot tell which unit dimensions this rank-reducing "
                                 "subview drops")
        return dropped

    def _reshape(self, op: ir.Operation, sizes: Sequence[_Value]) -> None:
        src = self.get(op.operands[0])
        # Views of allocations and constants are contiguous: .view always works. Inputs may
        # have any strides, and host code only reads them: .reshape copies where torch cannot
        # make a view.
        method = "view" if src.root == "owned" else "reshape"
        args = ", ".join(s.text for s in sizes) if sizes else "()"
        self.define(op.results[0], "view", f"{src.text}.{method}({args})", src.root)

    def expand_shape(self, op: ir.Operation) -> None:
        res = _memref(op.results[0])
        dynamic = [self.get(v) for v in list(op.operands)[1:]]
        static = _static(op, "static_output_shape") if "static_output_shape" in op.attributes \
            else list(res.shape)
        self._reshape(op, _mixed(static, dynamic, _DYNAMIC))

    def collapse_shape(self, op: ir.Operation) -> None:
        src = self.get(op.operands[0])
        src_type = _memref(op.operands[0])
        res = _memref(op.results[0])
        groups = [[ir.IntegerAttr(x).value for x in ir.ArrayAttr(g)]
                  for g in ir.ArrayAttr(op.attributes["reassociation"])]
        sizes = []
        for d, group in zip(res.shape, groups, strict=True):
            if d != _DYNAMIC:
                sizes.append(_literal(d))
            else:
                sizes.append(_Value(" * ".join(
                    f"{src.text}.size({i})" if src_type.shape[i] == _DYNAMIC
                    else str(src_type.shape[i]) for i in group)))
        self._reshape(op, sizes)

    def transpose(self, op: ir.Operation) -> None:
        src = self.get(op.operands[0])
        perm_map = ir.AffineMapAttr(op.attributes["permutation"]).value
        perm = [ir.AffineDimExpr(e).position for e in perm_map.results]
        if perm == list(range(len(perm))):
            self.values[op.results[0]] = src
            return
        self.define(op.results[0], "view",
                    f"{src.text}.permute({', '.join(map(str, perm))})", src.root)

    def cast(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.get(op.operands[0])

    def dim(self, op: ir.Operation) -> None:
        src = self.get(op.operands[0])
        t = _memref(op.operands[0])
        index = self.get(op.operands[1])
        if isinstance(index.const, int) and 0 <= index.const < t.rank \
                and t.shape[index.const] != _DYNAMIC:
            self.values[op.results[0]] = _literal(t.shape[index.const])
        else:
            self.values[op.results[0]] = _Value(f"{src.text}.size({index.text})")

    def copy(self, op: ir.Operation) -> None:
        src, dst = (self.get(v) for v in op.operands)
        self.emit(f"{dst.text}.copy_({src.text})")

    def dealloc(self, op: ir.Operation) -> None:
        pass  # torch frees a buffer when its last view goes

    def get_global(self, op: ir.Operation) -> None:
        name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
        if name not in self.constants:
            g = self.globals.get(name)
            if g is None:
                raise self.error(op, f"no memref.global @{name} in the module")
            self.constants[name] = self._global_value(g)
        self.define(op.results[0], "cst", f"constants[{_string(name)}]", "owned")

    def launch(self, op: ir.Operation) -> None:
        kernel = ir.FlatSymbolRefAttr(op.attributes["kernel"]).value
        grid_values, args = _segments(op)
        grid = [self.get(v).text for v in grid_values]
        grid += ["1"] * (3 - len(grid))
        comment = kernel
        k = self.kernels.get(kernel)
        if k is None:
            raise self.error(op, f"launches @{kernel}, which is not a tile.kernel of the module")
        if "tile.fused" in k.attributes:
            fused = " ".join(ir.StringAttr(k.attributes["tile.fused"]).value.split())
            comment += f": {fused}"
        self.emit(f"# {comment}")
        self.emit(f"launch({_string(kernel)}, {_tuple(grid)}"
                  + "".join(f", {self.get(a).text}" for a in args) + ")")
        if kernel not in self.launched:
            self.launched.append(kernel)

    def return_(self, op: ir.Operation) -> None:
        results = [self.get(v).text for v in op.operands]
        self.num_outputs = len(results)
        self.emit(f"return {_tuple(results)}" if results else "return ()")

    # -- constants

    def _global_value(self, g: ir.Operation) -> Any:
        """The value of a ``memref.global`` as a CPU torch tensor."""
        import torch

        t = ir.MemRefType(ir.TypeAttr(g.attributes["type"]).value)
        elem = str(t.element_type)
        shape = tuple(int(d) for d in t.shape)
        dtype = getattr(torch, TORCH_DTYPES[elem]) if elem in TORCH_DTYPES else None
        if dtype is None or _DYNAMIC in shape:
            raise CompilationError(
                f"memref.global {g.attributes['sym_name']} has type {t}; host code reads "
                f"statically shaped globals of {', '.join(TORCH_DTYPES)}"
            )
        init = g.attributes["initial_value"] if "initial_value" in g.attributes else None
        if init is None or isinstance(init, ir.UnitAttr):
            return torch.zeros(shape, dtype=dtype)
        array = self._dense(init, elem, shape)
        tensor = torch.from_numpy(np.ascontiguousarray(array).copy())
        if elem == "bf16":
            tensor = tensor.view(torch.int16).view(torch.bfloat16)
        return tensor.reshape(shape)

    def _dense(self, attr: ir.Attribute, elem: str, shape: tuple[int, ...]) -> np.ndarray:
        np_dtype = np.dtype(_NUMPY_DTYPES[elem])
        count = math.prod(shape)
        if isinstance(attr, ir.DenseElementsAttr) and elem != "bf16":
            if attr.is_splat:
                v = attr.get_splat_value()
                value: Any = (ir.FloatAttr(v).value if isinstance(v, ir.FloatAttr)
                              else bool(ir.BoolAttr(v).value) if isinstance(v, ir.BoolAttr)
                              else ir.IntegerAttr(v).value)
                return np.full(count, value, dtype=np_dtype)
            return np.array(attr).astype(np_dtype).reshape(-1)
        text = str(attr)
        m = re.fullmatch(r"dense_resource<([^>]*)>.*", text, re.S)
        if m:
            return self._resource(m.group(1), np_dtype, count)
        m = re.fullmatch(r"dense<(.*)>\s*:.*", text, re.S)
        if m is None:
            raise CompilationError(f"cannot read the constant {text[:200]}")
        body = m.group(1).strip()
        if body.startswith('"0x'):
            data = bytes.fromhex(body[3:-1])
            array = np.frombuffer(data, dtype=np_dtype)
            return np.full(count, array[0], np_dtype) if array.size == 1 else array
        tokens = re.findall(r"[^\[\],\s]+", body)
        bits = np.zeros(len(tokens), dtype=np.uint16 if elem == "bf16" else np_dtype)
        for i, tok in enumerate(tokens):
            if tok in ("true", "false"):
                bits[i] = tok == "true"
            elif tok.lower().startswith("0x") and elem in ("f16", "bf16", "f32", "f64"):
                raw = np.array(int(tok, 16), dtype=f"u{np_dtype.itemsize}")
                bits[i] = raw if elem == "bf16" else raw.view(np_dtype)
            elif elem == "bf16":
                from tileopt.runtime.abi import f32_to_bf16_bits

                bits[i] = f32_to_bf16_bits(float(tok))
            else:
                bits[i] = float(tok) if np_dtype.kind == "f" else int(tok)
        return np.full(count, bits[0], bits.dtype) if bits.size == 1 else bits

    def _resource(self, key: str, np_dtype: np.dtype, count: int) -> np.ndarray:
        """The elements of ``dense_resource<key>`` from the module's resource section (a hex
        blob whose first 4 bytes are its alignment)."""
        if self._module_text is None:
            self._module_text = self.module.operation.get_asm(large_elements_limit=None)
        m = re.search(r'(?:^|[\s{,])"?' + re.escape(key) + r'"?\s*:\s*"0x([0-9A-Fa-f]*)"',
                      self._module_text)
        if m is None:
            raise CompilationError(
                f"dense_resource<{key}>: the module holds no resource blob of that name"
            )
        data = bytes.fromhex(m.group(1))[4:]
        array = np.frombuffer(data, dtype=np_dtype)
        if array.size != count:
            raise CompilationError(
                f"dense_resource<{key}> holds {array.size} elements, its type {count}"
            )
        return array


_HANDLERS: dict[str, Callable[[_Translator, ir.Operation], None]] = {
    "arith.constant": _Translator.constant,
    "memref.alloc": _Translator.alloc,
    "memref.alloca": _Translator.alloc,
    "memref.extract_strided_metadata": _Translator.extract_strided_metadata,
    "memref.reinterpret_cast": _Translator.reinterpret_cast,
    "memref.subview": _Translator.subview,
    "memref.expand_shape": _Translator.expand_shape,
    "memref.collapse_shape": _Translator.collapse_shape,
    "memref.transpose": _Translator.transpose,
    "memref.cast": _Translator.cast,
    "memref.dim": _Translator.dim,
    "memref.copy": _Translator.copy,
    "memref.dealloc": _Translator.dealloc,
    "memref.get_global": _Translator.get_global,
    "tile.launch": _Translator.launch,
    "func.return": _Translator.return_,
}


def _host_function(module: ir.Module, function: str) -> ir.Operation:
    funcs = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
             for op in module.body.operations if op.operation.name == "func.func"}
    if function not in funcs:
        raise CompilationError(
            f"the tile module has no host function @{function}; its functions: "
            f"{', '.join('@' + f for f in funcs) or 'none'}"
        )
    return funcs[function]


def translate(
    module: ir.Module | str,
    function: str = "forward",
    *,
    input_descriptions: Sequence[str] | None = None,
) -> HostProgram:
    """Translates the host function of a tile module into Python and compiles it.

    Args:
        module: the tile module (``tile.kernel`` ops, ``memref.global`` constants and the host
            ``func.func``), a ``tileopt.ir.Module`` or its text (parsed in a context of its
            own).
        function: the host function's name.
        input_descriptions: one comment per argument (e.g. ``"x f32[4, 37]"``) for the
            generated source; by default the argument's type.

    Returns:
        A :class:`HostProgram`; :meth:`HostProgram.bind` makes it callable.

    Raises:
        CompilationError: the function is missing, holds an op host code does not handle
            (named in the message), control flow, or a type torch has no dtype for.
    """
    if isinstance(module, str):
        from tileopt.compiler.kernel import _contexts, _parse

        with _contexts.get(), ir.Location.unknown():
            return translate(_parse(module), function, input_descriptions=input_descriptions)
    func = _host_function(module, function)
    kernels = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
               for op in module.body.operations if op.operation.name == "tile.kernel"}
    globals_ = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                for op in module.body.operations if op.operation.name == "memref.global"}
    tr = _Translator(module, func, kernels, globals_, input_descriptions)
    source = tr.translate()
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    filename = f"<tileopt host code {python_name(function)} {digest}>"
    # Tracebacks through the generated code show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:  # a bug of the translator, not of the input
        raise CompilationError(f"generated host code does not compile ({e}):\n{source}") from e
    return HostProgram(
        source=source,
        function=function,
        kernel_names=tuple(tr.launched),
        num_inputs=len(list(func.regions[0].blocks[0].arguments)),
        num_outputs=tr.num_outputs,
        constants=tr.constants,
        code=code,
    )
