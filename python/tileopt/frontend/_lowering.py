"""torch-mlir's half of the import: an exported FX graph to linalg-on-tensors text.

Imports torch and torch-mlir (the frontend imports this module only when it imports a
model). Uses torch-mlir's lower-level API rather than ``torch_mlir.fx.export_and_import``:

- ``FxImporter.import_stateless_graph`` on the exported program's graph, in which
  parameters, buffers and lifted constants are placeholders, so they become arguments of
  the function (``export_and_import`` freezes them into ``dense_resource`` constants);
- a ``ContextCache`` whose node locations name the node's operator (see
  :mod:`tileopt.frontend.locations`); torch-mlir's own gives only the stack's files;
- the pass pipelines ``export_and_import`` runs, run here under a diagnostic handler, so a
  failure becomes a tileopt error that names the op rather than a repro file in /tmp.
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_importer import ContextCache, FxImporter, GraphNodeImporter
from torch_mlir.passmanager import PassManager

from tileopt.errors import CompilationError, ExportError, UnsupportedOperatorError
from tileopt.frontend.locations import describe_location, location_frames

# What torch_mlir.fx.export_and_import runs for output_type="linalg-on-tensors".
_PIPELINES = (
    "builtin.module(func.func(torch-match-quantized-custom-ops),"
    " torchdynamo-export-to-torch-backend-pipeline{ extra-library=})",
    "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline"
    "{allow-non-finites=true})",
)

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRONTEND_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_FRAME_RE = re.compile(r'File "([^"]+)", line ([0-9]+)')


def _inside(path: str, directory: str) -> bool:
    return path.startswith(directory) or os.path.realpath(path).startswith(directory)


def user_frames(node: torch.fx.Node) -> list[tuple[str, int]]:
    """The frames of ``node``'s stack trace, outermost first, without tileopt's frontend or
    FX's generated code and without the innermost frames inside torch (kept if they are all
    there is)."""
    trace = node.meta.get("stack_trace") or ""
    frames = [
        (f, int(line))
        for f, line in _FRAME_RE.findall(trace)
        if not f.startswith("<eval_with_key>") and not _inside(f, _FRONTEND_DIR)
    ]
    while len(frames) > 1 and _inside(frames[-1][0], _TORCH_DIR):
        frames.pop()
    return frames


def operator_name(node: torch.fx.Node) -> str | None:
    """``aten.gather`` for a call of ``torch.ops.aten.gather.default`` (``mylib.op`` for a
    custom op, ``higher_order.cond`` for a higher-order op); None for other nodes."""
    if node.op != "call_function":
        return None
    target = node.target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
        name = target.name()  # "aten::gather.default", "aten::gather" or "cond"
        if "::" not in name:
            return f"higher_order.{name}"
        return name.split(".")[0].replace("::", ".")
    return f"{getattr(target, '__module__', None) or 'python'}.{getattr(target, '__name__', '?')}"


def node_source(node: torch.fx.Node) -> str | None:
    """``file.py:12``: the node's innermost user frame, None without a stack trace."""
    frames = user_frames(node)
    if not frames:
        return None
    path, line = frames[-1]
    return f"{os.path.basename(path)}:{line}"


class _LocatingContextCache(ContextCache):
    """torch-mlir's ContextCache with locations ``loc("aten.op"(callsite(...)))``."""

    def get_node_location(self, node: torch.fx.Node) -> ir.Location:
        op = operator_name(node)
        if op is None:
            # Placeholders and the output: the function, its arguments and its return get
            # no operator's location (torch-mlir's would give them the first op's).
            return ir.Location.unknown(context=self._c)
        locs = [ir.Location.file(f, line, col=0, context=self._c) for f, line in user_frames(node)]
        if len(locs) > 1:
            child = ir.Location.callsite(locs[-1], locs[-2::-1], context=self._c)
        elif locs:
            child = locs[0]
        else:
            child = ir.Location.unknown(context=self._c)
        return ir.Location.name(op, childLoc=child, context=self._c)


#: How many of torch-mlir's diagnostics an import keeps.
_MAX_DIAGNOSTICS = 100


def lower_to_linalg(graph: torch.fx.Graph, func_name: str) -> str:
    """Import ``graph`` (a functional ATen graph whose placeholders are the function's
    arguments and whose output node returns tensors) and lower it to linalg-on-tensors;
    returns the module's text with locations. Raises UnsupportedOperatorError for an op
    torch-mlir cannot lower, ExportError when torch-mlir's importer rejects the graph and
    CompilationError for any other failure of its passes."""
    _check_higher_order_ops(graph)
    context = ir.Context()
    torch_d.register_dialect(context)
    try:
        importer = FxImporter(context=context)
        # FxImporter has no hook for locations; its cache is the one place they are made.
        importer._cc = _LocatingContextCache(context, py_attr_tracker=importer._py_attr_tracker)
        # The bodies of higher-order ops (while_loop) first, as import_frozen_program does.
        if graph.owning_module is not None:
            importer._import_all_child_modules(graph.owning_module, func_name)
        importer.import_stateless_graph(graph, func_name=func_name)
    except Exception as e:  # torch-mlir raises anything from NotImplementedError to KeyError
        raise ExportError(
            f"torch-mlir's importer rejected the exported graph: {type(e).__name__}: {e}"
        ) from e
    module = importer.module

    diagnostics: list[_Diagnostic] = []

    def keep(d: ir.Diagnostic) -> bool:
        # The first ones name the problem; a pattern that fails on every retry (torch-mlir's
        # softmax of a 0-d tensor) would otherwise fill the memory.
        if len(diagnostics) < _MAX_DIAGNOSTICS:
            diagnostics.append(_Diagnostic(d))
        return True

    with context:
        handler = context.attach_diagnostic_handler(keep)
        # A pass that reports an error without failing would otherwise hit an assertion.
        context.emit_error_diagnostics = True
        try:
            for pipeline in _PIPELINES:
                PassManager.parse(pipeline).run(module.operation)
        except Exception as e:
            raise _lowering_error(diagnostics, e) from None
        finally:
            handler.detach()
        _fold_f64_scalars(module)
        _check_linalg_dialects(module)
        return module.operation.get_asm(enable_debug_info=True)


#: Dialects of torch-mlir's output that tileopt's MLIR parses; an op of another
#: (tm_tensor.scan for cumsum, torch.* left unlowered) has no kernel formation.
_TILEOPT_DIALECTS = frozenset(
    {"builtin", "func", "linalg", "tensor", "arith", "math", "cf", "scf", "affine", "ml_program"}
)


def _check_linalg_dialects(module: ir.Module) -> None:
    """UnsupportedOperatorError naming the aten op and source line of the first op in a
    dialect tileopt does not take (its MLIR would not even parse it)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.split(".")[0] not in _TILEOPT_DIALECTS:
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if not found:
        return
    op_name, source = describe_location(str(found[0].location))
    where = f" at {source}" if source else ""
    raise UnsupportedOperatorError(
        f"tileopt cannot compile {op_name or found[0].name}{where}: torch-mlir lowers it to "
        f"'{found[0].name}', which tileopt's kernel formation does not take.\n"
        f"Replace the operator, or run this part of the model outside tileopt.",
        op=op_name,
        source=source,
    )


def _check_higher_order_ops(graph: torch.fx.Graph) -> None:
    """UnsupportedOperatorError for a higher-order op (``torch.cond``) that torch-mlir's
    importer has no handler for."""
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.HigherOrderOperator):
            continue
        if hasattr(GraphNodeImporter, f"_import_hop_{target.name()}"):
            continue
        op = operator_name(node)
        source = node_source(node)
        where = f" at {source}" if source else ""
        raise UnsupportedOperatorError(
            f"tileopt cannot compile {op}{where}: torch-mlir cannot import this higher-order "
            f"op. Rewrite it without it (torch.where for a torch.cond of tensors), or run "
            f"this part of the model outside tileopt.",
            op=op,
            source=source,
        )


class _Diagnostic:
    """A diagnostic copied out of MLIR (the native one dies with the handler's call)."""

    def __init__(self, d: Any) -> None:
        self.severity = str(d.severity)
        self.location = str(d.location)
        self.message = str(d.message)
        self.notes = [str(n.message) for n in d.notes]

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


_ILLEGAL_RE = re.compile(
    r"failed to legalize operation '(?:torch\.operator|torch\.(?P<op>[\w.]+))'"
    r"(?:.*?name = \"torch\.(?P<custom>[\w.]+)\")?",
    re.S,
)


def _lowering_error(diagnostics: list[_Diagnostic], exc: Exception) -> CompilationError:
    """The tileopt error for a failed torch-mlir pipeline: UnsupportedOperatorError naming
    the op (from the failing op's location, else from the message) and its source line."""
    errors = [d for d in diagnostics if "ERROR" in d.severity] or diagnostics
    for d in errors:
        op, source = describe_location(d.location)
        m = _ILLEGAL_RE.search(d.message)
        if m is not None and op is None:
            name = m.group("custom") or m.group("op")
            op = ".".join(name.split(".")[:2]) if name else None  # drop the overload
        if op is None:
            continue
        _, frames = location_frames(d.location)
        where = f" at {source}" if source else ""
        trace = "".join(f'\n  File "{path}", line {line}' for path, line in frames)
        what = "torch-mlir has no lowering to linalg for it" if m else "its lowering failed"
        message = d.message.split("\n")[0]
        if len(message) > 400:
            message = message[:400] + " ..."
        return UnsupportedOperatorError(
            f"tileopt cannot compile {op}{where}: {what} ({message}).{trace}\n"
            f"Replace the operator, or run this part of the model outside tileopt.",
            op=op,
            source=source,
        )
    detail = "\n".join(str(d) for d in errors) or str(exc)
    return CompilationError(f"torch-mlir could not lower the model to linalg:\n{detail}")


def _fold_f64_scalars(module: ir.Module) -> None:
    """Remove the f64 scalars that torch-mlir leaves in f32 (and f16/bf16) code.

    torch-mlir makes a Python float operand (``x + 1e-5``, ``x == -inf``) an f64 constant and
    converts it at its use: ``arith.truncf %c : f64 to f32``, which canonicalization keeps
    when the value is inexact, or ``arith.cmpf`` on ``arith.extf %x : f32 to f64``. This
    rewrites ``truncf(constant)`` to the constant rounded as truncf rounds (to nearest even),
    and ``cmpf(extf(x), c)`` to ``cmpf(x, c)`` where ``c`` is exact in ``x``'s type (extf is
    exact, so the comparison is the same); then erases the conversions and constants left
    unused.
    """
    found: dict[str, list[ir.Operation]] = {"arith.truncf": [], "arith.cmpf": []}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in found:
            found[op.name].append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    replaced: list[ir.Operation] = []
    for op in found["arith.truncf"]:
        value = _scalar_constant(op.operands[0])
        if value is None or "roundingmode" in op.attributes:  # only the default rounding
            continue
        with ir.InsertionPoint(op), op.location:
            const = _constant(ir.FloatAttr.get(op.results[0].type, value))
        op.results[0].replace_all_uses_with(const)
        replaced.append(op)
    for op in found["arith.cmpf"]:
        for i in (0, 1):
            ext, other = op.operands[i], op.operands[1 - i]
            value = _scalar_constant(other)
            if value is None or not _is_op(ext.owner, "arith.extf"):
                continue
            narrow = ext.owner.operands[0]
            with ir.InsertionPoint(op), op.location:
                attr = ir.FloatAttr.get(narrow.type, value)
                if attr.value != value:  # not exact in the narrow type (or NaN)
                    continue
                const = _constant(attr)
                new = ir.Operation.create(
                    "arith.cmpf",
                    results=[op.results[0].type],
                    operands=[narrow, const] if i == 0 else [const, narrow],
                    attributes={name: op.attributes[name] for name in op.attributes},
                )
            op.results[0].replace_all_uses_with(new.results[0])
            replaced.append(op)
            break
    for op in replaced:
        op.erase()
    # The conversions and f64 constants left without uses (erasing an extf can free its
    # operand's constant, hence the loop).
    while dead := _dead_f64_ops(module):
        for op in dead:
            op.erase()


def _dead_f64_ops(module: ir.Module) -> list[ir.Operation]:
    dead: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        if _is_dead_f64(op):
            dead.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    return dead


def _is_dead_f64(op: ir.Operation) -> bool:
    """An ``arith.extf``, or an f64 ``arith.constant``, without uses."""
    f64_constant = op.name == "arith.constant" and isinstance(op.results[0].type, ir.F64Type)
    return (op.name == "arith.extf" or f64_constant) and not _has_uses(op)


def _is_op(owner: object, name: str) -> bool:
    return isinstance(owner, ir.OpView) and owner.operation.name == name


def _has_uses(op: ir.Operation | ir.OpView) -> bool:
    return any(True for r in op.results for _ in r.uses)


def _scalar_constant(value: ir.Value) -> float | None:
    """The value of an ``arith.constant`` scalar float, else None."""
    if not _is_op(value.owner, "arith.constant"):
        return None
    attr = value.owner.operation.attributes["value"]
    return attr.value if isinstance(attr, ir.FloatAttr) else None


def _constant(attr: ir.Attribute) -> ir.Value:
    return ir.Operation.create(
        "arith.constant", results=[attr.type], attributes={"value": attr}
    ).results[0]
