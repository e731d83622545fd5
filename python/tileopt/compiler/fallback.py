"""Partial compilation: the parts of a PyTorch graph that tileopt lowers run as its kernels,
the rest runs eagerly in PyTorch, so that a model that runs in eager PyTorch never fails.

What uses it:

- ``torch.compile(model, backend="tileopt")`` (:mod:`tileopt.dynamo`): Dynamo hands over each
  graph it captures (torch-level calls in an FX ``GraphModule``) and runs what
  a :class:`PartitionedGraph` makes of it;
- ``tileopt.compile(model, inputs, fallback="eager")`` (:func:`compile_with_fallback`): the
  model as one :class:`~tileopt.compiler.graph.CompiledGraph` when tileopt compiles all of it,
  else a :class:`FallbackGraph`, which runs it through Dynamo and this module;
- :func:`explain`: runs a model once and reports, per graph, what tileopt compiled and what
  ran eagerly and why (a :class:`FallbackReport`).

How a graph is split, once per set of input shapes (a *specialisation*):

1. Non-tensor inputs (Dynamo's SymInts when it makes a graph dynamic) are replaced by their
   values, and so are the numbers the graph reads from 0-d tensor inputs with ``.item()``
   (with ``dynamic=True`` Dynamo passes float attributes such as a LayerNorm's ``eps``, and
   float arguments, so; their values are part of the specialisation's key). The shapes are
   propagated with fake tensors, size arithmetic is folded, and unused results of pure
   operators are dropped: the graph is static, like one Dynamo makes with ``dynamic=False``.
   In-place ops on tensors the graph made (``F.relu(x, inplace=True)``, ``x += y``,
   ``x[:, 2:] = 0``) become out-of-place ones where nothing else sees the change: no input's
   memory, no older view of it read afterwards.
2. :class:`TileoptSupport` says which nodes tileopt may take: tensor operators from a list of
   those the frontend lowers (:data:`SUPPORTED_FUNCTIONS`, :data:`SUPPORTED_METHODS`), on
   tensors of the compiled device and of :data:`~tileopt.frontend.SUPPORTED_DTYPES`, without
   side effects. torch.fx's ``CapabilityBasedPartitioner`` groups them into partitions;
   a partition does not reach across a node with side effects (grad-mode changes, in-place
   ops, random numbers), so their order is kept.
3. Each partition is compiled with :func:`~tileopt.compiler.graph.compile_graph` (its inputs'
   shapes and dtypes from the graph's metadata). When that fails, the node the error names
   (an ``UnsupportedOperatorError``'s ``op`` and ``source``), or else the whole partition,
   is marked unsupported and the graph is partitioned again.
4. The compiled partitions replace their nodes in one ``GraphModule``; the other nodes stay
   PyTorch calls. A compiled partition that fails when called (or returns other shapes or
   dtypes than the graph says) runs eagerly from then on.

Graphs are compiled for inference: a call with grad mode on and an input that requires grad
(a parameter, during training) runs the whole graph eagerly. Every fallback is logged on the
``"tileopt"`` logger; ``TILEOPT_LOGS=fallback`` prints them on stderr.

This module imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import inspect
import logging
import math
import operator
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_as_graphmodule, topo_sort

from tileopt.compiler import cache, nvidia
from tileopt.compiler.graph import CompiledGraph, compile_graph
from tileopt.errors import (
    CompilationError,
    DeviceError,
    OptionError,
    TileoptError,
    UnsupportedOperatorError,
)
from tileopt.frontend import SUPPORTED_DTYPES
from tileopt.frontend.importer import memory_of

__all__ = [
    "BACKEND_OPTIONS",
    "FALLBACKS",
    "SUPPORTED_FUNCTIONS",
    "SUPPORTED_METHODS",
    "CompiledPartition",
    "EagerOp",
    "FallbackGraph",
    "FallbackReport",
    "GraphReport",
    "PartitionedGraph",
    "TileoptSupport",
    "check_backend_options",
    "compile_with_fallback",
    "explain",
]

#: What ``fallback=`` takes: ``"eager"`` (what tileopt cannot compile runs in PyTorch) or
#: ``"error"`` (it raises the error; None means the same).
FALLBACKS: tuple[str, ...] = ("eager", "error")

#: What ``$TILEOPT_LOGS`` takes, comma-separated.
LOG_CHANNELS: tuple[str, ...] = ("fallback",)

#: The target tileopt.compile compiles for by default.
DEFAULT_TARGET: str = inspect.signature(compile_graph).parameters["target"].default

logger = logging.getLogger("tileopt")

# ---------------------------------------------------------------------------------------------
# which operators tileopt takes

_ELEMENTWISE = (
    "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "asinh", "atan", "atan2", "atanh",
    "ceil", "celu", "clamp", "clamp_max", "clamp_min", "clip", "cos", "cosh", "div", "divide",
    "elu", "eq", "erf", "erfinv", "exp", "exp2", "expm1", "floor", "floor_divide", "frac", "ge",
    "gelu", "glu", "greater", "greater_equal", "gt", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "hypot", "isinf", "isnan", "le", "leaky_relu", "lerp", "less", "less_equal", "log",
    "log10", "log1p", "log2", "logaddexp", "logical_and", "logical_not", "logical_or",
    "logical_xor", "logit", "logsigmoid", "lt", "masked_fill", "maximum", "minimum", "mish", "mul",
    "multiply", "nan_to_num", "ne", "neg", "negative", "not_equal", "pow", "prelu", "reciprocal",
    "relu", "relu6", "remainder", "round", "rsqrt", "selu", "sigmoid", "sign", "silu", "sin",
    "sinh", "softplus", "softshrink", "softsign", "sqrt", "square", "sub", "subtract", "tan",
    "tanh", "tanhshrink", "threshold", "true_divide", "trunc", "where", "xlogy",
)
_REDUCTIONS = (
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "all", "amax", "amin", "aminmax", "any", "argmax",
    "argmin", "avg_pool1d", "avg_pool2d", "avg_pool3d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cdist", "cosine_similarity", "cross_entropy", "cummax",
    "cummin", "cumprod", "cumsum", "group_norm", "huber_loss", "instance_norm", "kl_div", "l1_loss",
    "layer_norm", "log_softmax", "logcumsumexp", "logsumexp", "max", "max_pool1d",
    "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices", "max_pool3d",
    "max_pool3d_with_indices", "mean", "min", "mse_loss", "nll_loss", "norm", "normalize", "prod",
    "rms_norm", "smooth_l1_loss", "soft_margin_loss", "softmax", "softmin", "std", "std_mean",
    "sum", "topk", "var", "var_mean", "vector_norm",
)
_CONTRACTIONS = (
    "_int_mm", "_scaled_mm", "addmm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "einsum", "linear", "matmul",
    "mm", "outer", "scaled_dot_product_attention",
)
_DATA_MOVEMENT = (
    "cat", "chunk", "clone", "concat", "concatenate", "contiguous", "diff", "dropout",
    "embedding", "expand", "expand_as", "flatten", "flip", "gather", "index_select",
    "interpolate", "narrow", "one_hot", "pad", "permute", "pixel_shuffle", "pixel_unshuffle",
    "repeat", "repeat_interleave", "reshape", "roll", "scatter", "scatter_add", "select",
    "split", "squeeze", "stack", "t", "take_along_dim", "transpose", "tril", "triu", "unbind",
    "unflatten", "unsqueeze", "upsample", "upsample_bilinear", "upsample_nearest", "view",
    "view_as",
)
_CASTS = ("bfloat16", "bool", "double", "float", "half", "int", "long", "to", "type", "type_as")
_FACTORIES = ("arange", "full", "full_like", "ones", "ones_like", "zeros", "zeros_like")
_OPERATORS = (
    "abs", "add", "and_", "eq", "floordiv", "ge", "getitem", "gt", "invert", "le", "lt",
    "matmul", "mod", "mul", "ne", "neg", "or_", "pos", "pow", "sub", "truediv", "xor",
)

#: Names of the torch functions tileopt lowers, looked up in ``torch``,
#: ``torch.nn.functional``, ``torch.special`` and ``torch.linalg`` (and their ``torch._C``
#: versions, which Dynamo records), and in :mod:`operator` (``x + y``, ``x[i]``). Each
#: compiled and checked against eager PyTorch; sorting is left out (tileopt lowers rows of up
#: to 16 only). ``cumsum``, ``cumprod`` and ``topk`` lower in some forms only (short scans; k up
#: to 16): the others fail to compile and are split off (step 3 below).
SUPPORTED_FUNCTIONS: frozenset[str] = frozenset(
    _ELEMENTWISE + _REDUCTIONS + _CONTRACTIONS + _DATA_MOVEMENT + _CASTS + _FACTORIES
)

#: Names of the tensor methods tileopt lowers (``x.softmax(-1)``, ``x.view(...)``).
SUPPORTED_METHODS: frozenset[str] = frozenset(
    _ELEMENTWISE + _REDUCTIONS + _CONTRACTIONS + _DATA_MOVEMENT + _CASTS
    + ("new_ones", "new_zeros", "new_full")
)

_OPERATOR_NAMES = frozenset(_OPERATORS)

# Ops on complex tensors that the frontend computes through their real and imaginary parts
# (tileopt.frontend._complex: rotary embeddings), by name. A partition may hold complex
# tensors that it makes and reads itself, never take or return one.
_COMPLEX_OPS = frozenset({
    "polar", "complex", "view_as_complex", "view_as_real", "mul", "multiply", "truediv",
    "div", "add", "sub", "subtract", "neg", "conj", "conj_physical", "resolve_conj", "real",
    "imag", "abs", "clone", "contiguous", "to", "type_as", "reshape", "view", "flatten",
    "expand", "expand_as", "unsqueeze", "getitem", "select", "squeeze", "permute",
    "transpose", "cat", "concat", "concatenate",
})

# Ops that only move or view data: a partition of these alone is not worth a compilation.
_VIEWS = frozenset(
    {"chunk", "contiguous", "expand", "expand_as", "flatten", "getitem", "narrow", "permute",
     "reshape", "select", "split", "squeeze", "t", "transpose", "unbind", "unflatten",
     "unsqueeze", "view", "view_as", "dropout", "clone", "getattr"}
)

# Ops that draw random numbers (their order must be kept) or change global state.
_RANDOM_NAMES = ("bernoulli", "multinomial", "normal", "poisson", "alpha_dropout",
                 "feature_alpha_dropout", "rrelu", "uniform", "exponential", "geometric",
                 "cauchy", "log_normal", "seed", "manual_seed")
_STATE_PREFIXES = ("_set_", "_enter_", "_exit_", "set_", "_record_function", "_profiler")
_AUTOCAST_NAMES = frozenset({"_enter_autocast", "_exit_autocast"})

# Size queries, whose values are folded into a static graph.
_SIZE_METHODS = frozenset({"size", "dim", "numel", "stride", "nelement", "ndimension",
                           "__len__", "storage_offset"})
_SIZE_ATTRS = frozenset({"shape", "ndim"})

_INPLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.imatmul,
    operator.ilshift, operator.irshift, operator.setitem, operator.delitem,
})


def _supported_callables() -> frozenset[Any]:
    """The function objects :data:`SUPPORTED_FUNCTIONS` names, as Dynamo records them."""
    return _callables(SUPPORTED_FUNCTIONS) | {getitem, setitem, fill}


@functools.cache
def _callables(names: frozenset[str]) -> frozenset[Any]:
    import torch.nn.functional as F  # noqa: N812

    namespaces: list[Any] = [torch, F, torch._C._nn, torch.special, torch.linalg, torch.Tensor]
    for name in ("_special", "_linalg", "_VariableFunctions"):
        if hasattr(torch._C, name):
            namespaces.append(getattr(torch._C, name))
    found: set[Any] = set()
    for name in names:
        for ns in namespaces:
            for attr in (name, f"linalg_{name}", f"special_{name}"):
                fn = getattr(ns, attr, None)
                if callable(fn) and not isinstance(fn, type):
                    found.add(fn)
    for name in _OPERATOR_NAMES:
        found.add(getattr(operator, name))
    return frozenset(found)


def _arg(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    """A call's argument by position or keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _argument_problem(node: torch.fx.Node, name: str) -> str | None:
    """Why this call's arguments keep it from tileopt, for ops that take only some."""
    if "out" in node.kwargs:
        return "writes into an out= tensor"
    first = 1 if node.op == "call_method" else 0  # a method's self is args[0]
    if name == "dropout" and _arg(node, first + 2, "training", True) is not False:
        return "draws random numbers (dropout in training mode)"
    if name == "batch_norm" and _arg(node, first + 5, "training", False) is not False:
        return "updates the running statistics in place (batch norm in training mode)"
    if name == "embedding" and _arg(node, first + 3, "max_norm") is not None:
        return "renormalises the embedding's weight in place (max_norm)"
    if name == "scaled_dot_product_attention" and _arg(node, 4, "dropout_p", 0.0) != 0.0:
        return "draws random numbers (attention dropout)"
    return None


def _value(node: Any) -> Any:
    """What a node computes, as Dynamo (``example_value``) or fake propagation (``val``)
    recorded it; None when unknown."""
    if not isinstance(node, torch.fx.Node):
        return node
    meta = node.meta
    return meta["val"] if "val" in meta else meta.get("example_value")


def target_name(node: torch.fx.Node) -> str:
    """The short name of what a node calls: ``"linear"``, ``"softmax"``, ``"add"``."""
    target = node.target
    if isinstance(target, str):
        return target
    name = getattr(target, "__name__", None) or type(target).__name__
    for prefix in ("linalg_", "special_"):
        name = name.removeprefix(prefix)
    return name


def op_name(node: torch.fx.Node) -> str:
    """A readable name of what a node calls: ``torch.sort``, ``torch.nn.functional.linear``,
    ``Tensor.softmax``, ``operator.add``."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        return f"module {node.target}"
    target = node.target
    if isinstance(target, str):
        return target
    if target in (getitem, setitem):
        return f"operator.{target.__name__}"
    if target is fill:
        return "Tensor.fill_"
    module = getattr(target, "__module__", None) or ""
    raw = getattr(target, "__name__", None) or repr(target)
    module = {
        "torch._C._nn": "torch.nn.functional",
        "torch._C._linalg": "torch.linalg",
        "torch._C._special": "torch.special",
        "_operator": "operator",
        "torch._C._VariableFunctions": "torch",
    }.get(module, module)
    if module in ("torch.linalg", "torch.special"):
        raw = raw.removeprefix(module.split(".")[1] + "_")
    if not module and isinstance(target, type(torch.Tensor.add)):
        module = "Tensor"
    return f"{module}.{raw}" if module else raw


def _source(node: torch.fx.Node) -> str | None:
    """``model.py:12``: the user's line a node came from (as the frontend names it)."""
    try:
        from tileopt.frontend._lowering import node_source
    except ImportError:  # torch-mlir missing: nothing compiles anyway
        return None
    return node_source(node)


def _is_state_call(node: torch.fx.Node) -> bool:
    """A call that changes global state (grad mode, autocast, the profiler)."""
    name = target_name(node)
    return node.op == "call_function" and name.startswith(_STATE_PREFIXES)


_UNUSED = "is called for its side effects (its result is not used)"


def _draws_random_numbers(name: str) -> bool:
    """Whether a call of this name draws random numbers: rand*, dropout* and the random
    functions' names, alone or followed by ``_`` (``normal_``; ``normalize`` is pure)."""
    return name.startswith(("rand", "dropout")) or any(
        name == p or name.startswith(p + "_") for p in _RANDOM_NAMES)


def _asks_in_place(node: torch.fx.Node) -> bool:
    """Whether a call passes ``inplace=True`` (``F.silu(x, inplace=True)``, ``F.hardtanh(x,
    -1, 1, True)``), by keyword or by position."""
    if node.kwargs.get("inplace") is True:
        return True
    if node.op != "call_function" or not node.args:
        return False
    try:
        signature = inspect.signature(node.target)
        bound = signature.bind(*node.args, **node.kwargs)
    except (TypeError, ValueError):
        return False
    return bound.arguments.get("inplace") is True


def side_effect(node: torch.fx.Node) -> str | None:
    """What a node changes besides its result (an in-place op, random numbers, grad mode...),
    or that it is called for such a change; None for a pure node. Nodes must not move across
    one that has side effects."""
    if node.op not in ("call_function", "call_method", "call_module"):
        return None
    if node.op == "call_module":
        return "calls a module"
    name = target_name(node)
    target = node.target
    if "out" in node.kwargs:
        return "writes into an out= tensor"
    schema = getattr(target, "_schema", None)
    # operator.and_ and operator.or_ (a & b, a | b) end in "_" too, and are pure.
    in_place_name = (name.endswith("_") and not name.endswith("__")
                     and getattr(target, "__module__", None) not in ("operator", "_operator"))
    if (target in _INPLACE_OPERATORS or in_place_name or _asks_in_place(node)
            or (schema is not None and getattr(schema, "is_mutable", False))):
        return "changes a tensor in place"  # x.add_(1), x += 1, x[i] = y, inplace=True
    if name.startswith("dropout") and _argument_problem(node, "dropout") is None:
        return None  # dropout in eval mode: the identity
    if _draws_random_numbers(name):
        return "draws random numbers"
    if _is_state_call(node):
        return "changes global state"
    if not node.users:
        return _UNUSED
    return None


def has_side_effects(node: torch.fx.Node) -> bool:
    """Whether :func:`side_effect` names one."""
    return side_effect(node) is not None


def _is_complex(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype.is_complex


def _tensor_problem(value: Any, device_type: str, inside: bool = False) -> str | None:
    """Why a value cannot be a tensor of a compiled partition (``inside``: one that the
    partition makes and reads itself, which may be complex); None if it can."""
    if not isinstance(value, torch.Tensor):
        if value is None:
            return "has no shape information"
        return f"computes a {type(value).__name__}, not a tensor"
    dtype = str(value.dtype).removeprefix("torch.")
    if dtype not in SUPPORTED_DTYPES and not (inside and value.dtype.is_complex):
        return f"makes a {dtype} tensor (tileopt compiles {', '.join(SUPPORTED_DTYPES)})"
    if value.layout != torch.strided:
        return f"makes a {value.layout} tensor (tileopt compiles dense tensors)"
    if value.device.type != device_type:
        return (f"works on {value.device.type} tensors; tileopt runs on {device_type} tensors "
                f"here")
    if any(not isinstance(d, int) for d in (*value.shape, *value.stride())):
        return "has a symbolic shape"
    return None


class TileoptSupport(OperatorSupportBase):
    """Which nodes of a static FX graph tileopt may compile (torch.fx's operator support).

    A node is supported when it calls one of :data:`SUPPORTED_FUNCTIONS` (or a method of
    :data:`SUPPORTED_METHODS`, or an :mod:`operator` function) with arguments it takes, its
    result and its tensor inputs are tensors of :data:`~tileopt.frontend.SUPPORTED_DTYPES`
    on ``device_type`` with static shapes, and it is not in ``unsupported`` (nodes that
    failed to compile, with the reason). :meth:`reason` says why a node is not supported.
    """

    def __init__(self, device_type: str, unsupported: Mapping[torch.fx.Node, str]) -> None:
        self.device_type = device_type
        self.unsupported = unsupported
        self._reasons: dict[torch.fx.Node, str | None] = {}
        self._complex: set[torch.fx.Node] | None = None

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        """Whether tileopt may compile ``node`` (see the class)."""
        return self.reason(node) is None

    def reason(self, node: torch.fx.Node) -> str | None:
        """Why tileopt does not compile ``node``; None when it may."""
        if node not in self._reasons:
            self._reasons[node] = self._reason(node)
        return self._reasons[node]

    def _reason(self, node: torch.fx.Node) -> str | None:
        if node in self.unsupported:
            return self.unsupported[node]
        if node.op not in ("call_function", "call_method"):
            return f"a {node.op} node"
        effect = side_effect(node)
        if effect is not None:
            return effect
        name = target_name(node)
        if node.op == "call_function" and node.target is operator.getitem:
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and isinstance(_value(source), tuple | list):
                # One result of a split, chunk, max...: with its producer or not at all.
                if self.reason(source) is not None:
                    return f"takes a result of {op_name(source)}, which runs eagerly"
                return _tensor_problem(_value(node), self.device_type)
        elif node.op == "call_method":
            if name not in SUPPORTED_METHODS:
                return "not among the operators tileopt compiles"
        elif node.target is getattr:
            # Transposes (x.T) and a complex tensor's parts, not x.dtype...
            if node.args[1:] not in (("T",), ("mT",)) and not (
                    node.args[1:] in (("real",), ("imag",))
                    and node.args[0] in self._inside(node.graph)):
                return "not among the operators tileopt compiles"
        elif node.target not in _supported_callables() | self._COMPLEX_CALLABLES or (
                node.target in self._COMPLEX_CALLABLES
                and node not in self._reads_complex(node.graph)):
            return "not among the operators tileopt compiles"
        problem = _argument_problem(node, name)
        if problem is not None:
            return problem
        value = _value(node)
        values = value if isinstance(value, tuple | list) else (value,)
        for v in values:
            problem = _tensor_problem(v, self.device_type, node in self._inside(node.graph))
            if problem is not None:
                return problem
        for inp in node.all_input_nodes:
            problem = _tensor_problem(_value(inp), self.device_type,
                                      inp in self._inside(node.graph))
            if problem is not None:
                return f"takes {inp.name}, which {problem}"
        return None

    _COMPLEX_CALLABLES = frozenset({torch.polar, torch.complex, torch.view_as_complex,
                                    torch.view_as_real, torch.real, torch.imag})

    def _takes_complex(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` is a call on complex tensors that the frontend computes."""
        if node.op not in ("call_function", "call_method") or node in self.unsupported:
            return False
        if node.op == "call_function" and node.target is getattr:
            return node.args[1:] in (("real",), ("imag",))
        return target_name(node) in _COMPLEX_OPS and side_effect(node) is None

    def _inside(self, graph: torch.fx.Graph) -> set[torch.fx.Node]:
        """The complex tensors of ``graph`` a partition may hold: made by ops the frontend
        computes through their parts, from complex tensors made so, and read only by such
        ops."""
        if self._complex is None:
            made = {n for n in graph.nodes if _is_complex(_value(n))}
            inside = {n for n in made if self._takes_complex(n)}
            changed = True
            while changed:
                changed = False
                for n in list(inside):
                    if not all(p in inside for p in n.all_input_nodes if p in made) or not all(
                            u in inside if u in made else self._takes_complex(u)
                            for u in n.users):
                        inside.discard(n)
                        changed = True
            self._complex = inside
        return self._complex

    def _reads_complex(self, graph: torch.fx.Graph) -> set[torch.fx.Node]:
        """The calls whose inputs or result are complex tensors a partition may hold."""
        inside = self._inside(graph)
        return inside | {u for n in inside for u in n.users}


# ---------------------------------------------------------------------------------------------
# reports


@dataclass(frozen=True)
class CompiledPartition:
    """A part of a graph that tileopt compiled.

    Attributes:
        name: the submodule's name in the split graph (``"tileopt_0"``).
        ops: the operators it holds, in order (readable names, see :func:`op_name`).
        sources: the user's lines they came from (``"model.py:12"``), in order, without
            repeats.
        kernels: the number of distinct kernels tileopt made for it.
        graph: the :class:`~tileopt.compiler.graph.CompiledGraph`.
    """

    name: str
    ops: tuple[str, ...]
    sources: tuple[str, ...]
    kernels: int
    graph: CompiledGraph = field(repr=False, compare=False)

    def __str__(self) -> str:
        counts: dict[str, int] = {}
        for op in self.ops:
            short = op.rsplit(".", 1)[-1]
            counts[short] = counts.get(short, 0) + 1
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
        where = f" ({_line_range(self.sources)})" if self.sources else ""
        return (f"{self.name}: {self.kernels} kernel{'s' * (self.kernels != 1)} for "
                f"{len(self.ops)} op{'s' * (len(self.ops) != 1)}{where}: {ops}")


def _line_range(sources: Sequence[str]) -> str:
    files: dict[str, list[str]] = {}
    for s in sources:
        path, _, line = s.rpartition(":")
        files.setdefault(path, []).append(line)
    parts = []
    for path, lines in files.items():
        numbers = sorted({int(n) for n in lines if n.isdigit()})
        if len(numbers) > 1:
            parts.append(f"{path}:{numbers[0]}-{numbers[-1]}")
        else:
            parts.append(f"{path}:{lines[0]}")
    return ", ".join(parts)


@dataclass(frozen=True)
class EagerOp:
    """An operator of a graph that ran in PyTorch rather than in tileopt's kernels.

    Attributes:
        op: what it calls (``"torch.sort"``, ``"Tensor.cumsum"``).
        node: the node's name in the FX graph.
        source: the user's line it came from (``"model.py:12"``); None if unknown.
        reason: why: the error tileopt raised when compiling it, or why it was not tried.
    """

    op: str
    node: str
    source: str | None
    reason: str

    def __str__(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return f"{self.op}{where}: {self.reason}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


@dataclass(frozen=True)
class GraphReport:
    """What happened to one graph, for one set of input shapes (a *specialisation*).

    Attributes:
        name: the graph's name: Dynamo's compile id (``"graph 0/0"``), or the model's.
        inputs: the inputs' types, ``"f32[4, 8]"`` (``"int 3"`` for a number, ``"f64[] 1e-05"``
            for a tensor the graph reads as a number).
        compiled: the partitions tileopt compiled.
        eager: the tensor operators that ran in PyTorch, with the reason.
        reason: why the whole graph ran in PyTorch; None if it was split.
        specialisation: its number among the graph's specialisations (0 for the first
            set of input shapes, 1 for the second, ...).
        kernels_compiled: the distinct kernels compiled for this specialisation (those the
            compile cache did not have; attempts that failed included).
        kernels_reused: the distinct kernels the compile cache had already (in memory or on
            disk: compiled for another specialisation, graph or process).
    """

    name: str
    inputs: tuple[str, ...]
    compiled: tuple[CompiledPartition, ...] = ()
    eager: tuple[EagerOp, ...] = ()
    reason: str | None = None
    specialisation: int = 0
    kernels_compiled: int = 0
    kernels_reused: int = 0

    @property
    def kernels(self) -> int:
        """The kernels of all compiled partitions."""
        return sum(p.kernels for p in self.compiled)

    @property
    def title(self) -> str:
        """``"graph 0/0"``, ``"graph 0/0 (specialisation 1)"``: the name in logs."""
        if self.specialisation == 0:
            return self.name
        return f"{self.name} (specialisation {self.specialisation})"

    def _inputs(self) -> str:
        if len(self.inputs) <= 6:
            return ", ".join(self.inputs)
        return ", ".join(self.inputs[:6]) + f", ... ({len(self.inputs)} inputs)"

    def summary(self) -> str:
        """One line: ``specialisation 1 (f32[7, 16], ...): kernels: 1 compiled, 2 from the
        cache``, with the operators that ran in PyTorch, or why the graph ran eagerly."""
        head = f"specialisation {self.specialisation} ({self._inputs()}): "
        if self.reason is not None:
            return head + f"ran eagerly in PyTorch: {self.reason}"
        text = (f"{_plural(len(self.compiled), 'partition')}, kernels: {self.kernels_compiled} "
                f"compiled, {self.kernels_reused} from the cache")
        if self.eager:
            text += f"; {_plural(len(self.eager), 'op')} in PyTorch"
        return head + text

    def details(self) -> list[str]:
        """The lines under the summary: the compiled partitions and the operators that ran
        in PyTorch (with why), indented by two spaces."""
        if self.reason is not None:
            return [f"  ran eagerly in PyTorch: {self.reason}"]
        lines = [f"  compiled by tileopt: {_plural(len(self.compiled), 'partition')}, "
                 f"{_plural(self.kernels, 'kernel')}"]
        lines.extend(f"    {p}" for p in self.compiled)
        if self.eager:
            lines.append(f"  ran eagerly in PyTorch: {_plural(len(self.eager), 'op')}")
            lines.extend(f"    {op}" for op in self.eager)
        else:
            lines.append("  ran eagerly in PyTorch: nothing")
        return lines

    def __str__(self) -> str:
        lines = [f"{self.title} ({self._inputs()}):"]
        if self.reason is None:
            lines.append(f"  kernels: {self.kernels_compiled} compiled, {self.kernels_reused} "
                         f"from the cache")
        return "\n".join(lines + self.details())


@dataclass(repr=False)
class FallbackReport:
    """What tileopt compiled and what ran in PyTorch, per graph and set of input shapes, in
    the order they were compiled; ``str(report)`` (and its repr, for a REPL) is the readable
    report: per graph, one line per specialisation (its inputs, its kernels compiled and
    taken from the compile cache), then what was compiled and what ran in PyTorch (per
    specialisation where they differ).

    Attributes:
        graphs: one :class:`GraphReport` per graph and specialisation.
        notes: anything else worth knowing (why a model was not compiled as one graph).
    """

    graphs: list[GraphReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def eager_ops(self) -> list[EagerOp]:
        """Every operator that ran eagerly, over all graphs."""
        return [op for g in self.graphs for op in g.eager]

    @property
    def compiled(self) -> list[CompiledPartition]:
        """Every partition tileopt compiled, over all graphs."""
        return [p for g in self.graphs for p in g.compiled]

    def specialisations(self) -> dict[str, list[GraphReport]]:
        """The reports by graph name, each graph's in the order of their specialisations."""
        result: dict[str, list[GraphReport]] = {}
        for g in self.graphs:
            result.setdefault(g.name, []).append(g)
        return result

    def __str__(self) -> str:
        graphs = self.specialisations()
        head = f"tileopt: {_plural(len(graphs), 'graph')}"
        if not graphs and not self.notes:
            head += (" (Dynamo captured none: the model ran in PyTorch; "
                     "TORCH_LOGS=graph_breaks says why)")
        elif len(self.graphs) != len(graphs):
            head += f", {_plural(len(self.graphs), 'specialisation')}"
        lines = [head, *self.notes]
        for name, specs in graphs.items():
            lines.append(f"{name}: {_plural(len(specs), 'specialisation')}")
            lines.extend(f"  {g.summary()}" for g in specs)
            blocks: dict[tuple[str, ...], list[int]] = {}
            for g in specs:
                if g.reason is None:  # an eager one says why in its summary
                    blocks.setdefault(tuple(g.details()), []).append(g.specialisation)
            for block, numbers in blocks.items():
                if len(blocks) > 1:
                    which = ", ".join(map(str, numbers))
                    lines.append(f"  specialisation{'s' * (len(numbers) > 1)} {which}:")
                    block = tuple(f"  {line}" for line in block)
                lines.extend(block)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


# ---------------------------------------------------------------------------------------------
# logging


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr`` (also when a test replaced it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_handler: _StderrHandler | None = None


def log_channels() -> frozenset[str]:
    """The channels ``$TILEOPT_LOGS`` turns on (comma-separated); OptionError for a name
    outside :data:`LOG_CHANNELS`. With ``fallback`` on, the ``"tileopt"`` logger prints
    every fallback on stderr."""
    global _handler
    text = os.environ.get("TILEOPT_LOGS", "")
    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(names - set(LOG_CHANNELS))
    if unknown:
        raise OptionError(
            f"TILEOPT_LOGS={text!r} names {', '.join(map(repr, unknown))}; it takes a "
            f"comma-separated list of {', '.join(LOG_CHANNELS)}"
        )
    if "fallback" in names:
        if _handler is None:
            _handler = _StderrHandler()
        if _handler not in logger.handlers:
            logger.addHandler(_handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
    return names


def _log_fallback(message: str) -> None:
    try:
        log_channels()
    except OptionError:  # reported where compilation starts; never while a model runs
        pass
    logger.info("%s", message)


# ---------------------------------------------------------------------------------------------
# a graph made static


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A GraphModule with a copy of ``gm``'s graph (node metadata copied, shallowly)."""
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {}, return_output_node=False)
    graph.output(out)
    return torch.fx.GraphModule(gm, graph, gm.__class__.__name__)


def _is_constant(value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return True
    return isinstance(value, tuple | list) and all(isinstance(v, bool | int | float)
                                                    for v in value)


def _is_size_query(node: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _SIZE_METHODS
    if node.op != "call_function":
        return False
    if node.target is getattr:
        return len(node.args) > 1 and node.args[1] in _SIZE_ATTRS
    name = target_name(node)
    return name.startswith(("sym_size", "sym_stride", "sym_numel", "sym_storage_offset"))


def _replace_uses(node: torch.fx.Node, value: Any) -> None:
    for user in list(node.users):
        user.args = torch.fx.node.map_arg(user.args, lambda n: value if n is node else n)
        user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: value if n is node else n)


def _is_scalar_read(node: torch.fx.Node) -> bool:
    """``t.item()`` (or ``aten._local_scalar_dense(t)``) of a graph input ``t``."""
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    if node.args[0].op != "placeholder":
        return False
    if node.op == "call_method":
        return node.target == "item"
    if node.op == "call_function":
        return node.target is torch.Tensor.item or "_local_scalar_dense" in str(node.target)
    return False


def scalar_inputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """The positions of the inputs of ``gm`` that it reads as numbers (``t.item()``).

    With ``dynamic=True`` Dynamo passes float attributes of modules (a LayerNorm's ``eps``)
    and float arguments as 0-d tensor inputs that the graph reads with ``.item()``: a
    specialisation takes their values as constants, and their values are part of its key.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    read = {n.args[0] for n in gm.graph.nodes if _is_scalar_read(n)}
    return tuple(i for i, n in enumerate(placeholders) if n in read)


def _scalar_value(arg: Any) -> Any:
    """The number a 0-d (or one-element) tensor input holds; None for anything else."""
    if isinstance(arg, torch.Tensor) and arg.numel() == 1:
        return arg.detach().item()
    return None


def _specialise_graph(gm: torch.fx.GraphModule, args: Sequence[Any]) -> torch.fx.GraphModule:
    """A copy of ``gm`` for these arguments: numbers in place of the non-tensor inputs and of
    the inputs read as numbers (:func:`scalar_inputs`), shapes propagated with fake tensors,
    size arithmetic folded."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    g = _copy(gm)
    placeholders = [n for n in g.graph.nodes if n.op == "placeholder"]
    position = {n: i for i, n in enumerate(placeholders)}
    for node in g.graph.nodes:
        node.meta.pop("example_value", None)
        node.meta.pop("val", None)
    for node, arg in zip(placeholders, args, strict=True):
        if not isinstance(arg, torch.Tensor):
            _replace_uses(node, arg)
    for node in list(g.graph.nodes):
        if _is_scalar_read(node):
            value = _scalar_value(args[position[node.args[0]]])
            if value is not None:  # else FakeTensorProp says what is wrong
                _replace_uses(node, value)
                g.graph.erase_node(node)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a
             for a in args]
    with torch.set_grad_enabled(torch.is_grad_enabled()):
        FakeTensorProp(g, mode).propagate_dont_convert_inputs(*fakes)
    for node in list(g.graph.nodes):
        if node.op not in ("call_function", "call_method"):
            continue
        value = node.meta.get("val")
        if not _is_constant(value) or has_side_effects(node):
            continue
        if _is_size_query(node) or not node.all_input_nodes:
            _replace_uses(node, value)
            g.graph.erase_node(node)
    g.recompile()
    return g


# Calls that change nothing a graph reads, which tileopt does not compile: a tensor of Python
# data (Hugging Face's caches make and drop some), and torch's API-usage logging (Dynamo
# records it for some modules). Unused, they are dropped rather than kept in order.
_DROPPABLE = frozenset({torch.tensor, torch.as_tensor, torch._C._log_api_usage_once})


def _drop_unused(g: torch.fx.GraphModule) -> None:
    """Deletes the calls of operators tileopt lowers (pure ones: no in-place op, no random
    numbers) and of :data:`_DROPPABLE` whose results nothing uses, such as the
    ``torch.arange`` Hugging Face's masks make and drop: they would run eagerly for nothing,
    and each would split the graph's partitions in two. Other calls are kept (their side
    effects may be the point)."""
    changed = False
    for node in reversed(list(g.graph.nodes)):
        if node.users or node.op not in ("call_function", "call_method"):
            continue
        known = (node.target in _supported_callables() | _DROPPABLE
                 if node.op == "call_function" else node.target in SUPPORTED_METHODS)
        if known and side_effect(node) == _UNUSED:
            g.graph.erase_node(node)
            changed = True
    if changed:
        g.recompile()


def _is_static(gm: torch.fx.GraphModule, args: Sequence[Any]) -> bool:
    """Whether ``gm``'s recorded metadata already describes these (tensor) arguments."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        return False
    for node, arg in zip(placeholders, args, strict=True):
        value = _value(node)
        if not isinstance(arg, torch.Tensor) or not isinstance(value, torch.Tensor):
            return False
        if any(not isinstance(d, int) for d in (*value.shape, *value.stride())):
            return False
        if (tuple(value.shape) != tuple(arg.shape) or value.dtype != arg.dtype
                or tuple(value.stride()) != tuple(arg.stride())):
            return False
    return True


def _describe_arg(arg: Any, read: bool = False) -> str:
    """``"f32[4, 8]"`` for a tensor (``"f64[] 1e-05"`` for one the graph reads as a number
    (``read``), ``"int 3"`` for a number."""
    if isinstance(arg, torch.Tensor):
        short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
                 "int64": "i64", "int32": "i32", "bool": "i1"}
        dtype = str(arg.dtype).removeprefix("torch.")
        device = "" if arg.device.type == "cpu" else f" on {arg.device}"
        value = f" {_scalar_value(arg)!r}" if read else ""
        return f"{short.get(dtype, dtype)}[{', '.join(map(str, arg.shape))}]{device}{value}"
    return f"{type(arg).__name__} {arg!r}"[:40]


# ---------------------------------------------------------------------------------------------
# partitions


def getitem(x: torch.Tensor, index: Any) -> Any:
    """``x[index]`` of a tensor, which the graphs that tileopt splits call instead of
    ``operator.getitem`` (:func:`_rename_tensor_getitems`)."""
    return x[index]


def _rename_tensor_getitems(g: torch.fx.GraphModule) -> None:
    """Indexing of tensors calls :func:`getitem`: torch.fx's partitioner takes every
    ``operator.getitem`` for an item of a tuple and moves it into its producer's partition,
    and an index that is a tensor too (``w[experts]``, a mixture of experts' weights) is a
    second producer: the partitioner moved the node between the two forever. (The graph's
    code is regenerated once it is split.)"""
    for node in g.graph.nodes:
        if (node.op == "call_function" and node.target is operator.getitem
                and isinstance(_value(node.args[0]), torch.Tensor)):
            node.target = getitem


def setitem(x: torch.Tensor, index: Any, value: Any) -> torch.Tensor:
    """A copy of ``x`` with ``[index] = value`` done to it: what the graphs that tileopt
    splits call for ``x[index] = value`` on a tensor the graph made (:func:`_functionalize`)."""
    out = x.clone()
    out[index] = value
    return out


def fill(x: torch.Tensor, value: Any, *_: Any) -> torch.Tensor:
    """A tensor like ``x`` holding ``value`` (a number, or a tensor broadcast to ``x``'s
    shape): ``x.copy_(value)``, ``x.fill_(value)`` and ``x.zero_()`` as new tensors
    (:func:`_functionalize`)."""
    return torch.as_tensor(value, dtype=x.dtype, device=x.device).expand_as(x).clone()


# In-place methods that are :func:`fill`.
_FILLS = {"copy_": (), "fill_": (), "zero_": (0,)}

# In-place operators on tensors and their out-of-place twins (x += y is x.__iadd__(y)).
_OUT_OF_PLACE_OPERATORS = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
    operator.ior: operator.or_, operator.ixor: operator.xor,
    operator.imatmul: operator.matmul, operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift, operator.setitem: setitem,
}

# Methods named like an in-place op whose name without the "_" is not its twin.
_NO_TWIN = frozenset({"resize", "resize_as", "set", "share_memory", "requires_grad",
                      "retain_grad", "record_stream", "as_strided", "map", "apply", "copy",
                      "fill_diagonal", "put", "index_put", "random"})


def _out_of_place(node: torch.fx.Node) -> tuple[str, Any, tuple[Any, ...], dict[str, Any]] | None:
    """The out-of-place call (op, target, args, kwargs) that computes what the in-place
    ``node`` leaves in its first argument, or None where tileopt does not know one."""
    args, kwargs = node.args, dict(node.kwargs)
    name = target_name(node)
    if node.op == "call_function" and node.target in _OUT_OF_PLACE_OPERATORS:
        return "call_function", _OUT_OF_PLACE_OPERATORS[node.target], args, kwargs
    if node.op == "call_method" and name in _FILLS:
        return "call_function", fill, (*args, *_FILLS[name]), kwargs
    if _asks_in_place(node):
        if "inplace" in kwargs:
            return node.op, node.target, args, {**kwargs, "inplace": False}
        bound = inspect.signature(node.target).bind(*args, **kwargs)
        bound.arguments["inplace"] = False
        return node.op, node.target, tuple(bound.args), dict(bound.kwargs)
    twin = name[:-1]
    if (not name.endswith("_") or name.endswith("__") or name.startswith("_")
            or twin in _NO_TWIN or _draws_random_numbers(twin)):
        return None
    if node.op == "call_method" and callable(getattr(torch.Tensor, twin, None)):
        return "call_method", twin, args, kwargs
    if node.op == "call_function":
        for namespace in (torch, torch.Tensor, torch.nn.functional, torch._C._nn):
            if getattr(namespace, name, None) is node.target:
                found = getattr(namespace, twin, None)
                if callable(found):
                    return "call_function", found, args, kwargs
    return None


def _fake_call(node: torch.fx.Node) -> Any:
    """What ``node`` computes, on the fake values its inputs recorded."""
    from torch._subclasses.fake_tensor import FakeTensor

    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), _value)
    fakes = [v for v in torch.utils._pytree.tree_leaves((args, kwargs))
             if isinstance(v, FakeTensor)]
    if not fakes:
        raise ValueError("no fake tensor among the arguments")
    with fakes[0].fake_mode:
        if node.op == "call_method":
            return getattr(args[0], node.target)(*args[1:], **kwargs)
        return node.target(*args, **kwargs)


def _functionalize(g: torch.fx.GraphModule) -> None:
    """Replaces in-place ops on tensors that the graph made (``F.relu(x, inplace=True)``,
    ``x += 1``, ``x[:, 2:] = y``, ``x.clamp_(0)``) by their out-of-place twins, which
    tileopt may compile and fuse: an in-place op keeps its order among the graph's side
    effects and runs eagerly. Only where no one else sees the change: the tensor is not an
    input's, parameter's or buffer's memory, and no view of its memory made before the op is
    read at or after it, but the tensor an indexed view was taken of (``x[..., :d].copy_(y)``),
    which becomes ``x`` with the view's new value assigned. The twin's result takes the
    tensor's dtype (``x += y`` keeps x's)."""
    graph = g.graph
    # Which memory each node's value is in. The nodes after a replaced op that were in the
    # changed tensor's memory are in the new tensor's: they are views of it now (any view
    # made before the op and read after it keeps the op).
    memory = {n: memory_of(_value(n)) for n in graph.nodes}
    outside = {memory[n] for n in graph.nodes if n.op in ("placeholder", "get_attr")}
    changed = False
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method") or (
                side_effect(node) != "changes a tensor in place"):
            continue
        twin = _out_of_place(node)
        changed_tensor = node.args[0] if node.args else None
        value = _value(changed_tensor)
        if (twin is None or not isinstance(changed_tensor, torch.fx.Node)
                or not isinstance(value, torch.Tensor)):
            continue
        storage = memory[changed_tensor]
        if storage is None or storage in outside:
            continue
        nodes = list(graph.nodes)
        position = {n: i for i, n in enumerate(nodes)}
        here = position[node]

        def read_later(known: tuple[torch.fx.Node, ...], storage: Any = storage,
                       nodes: list[torch.fx.Node] = nodes, here: int = here,
                       position: dict[torch.fx.Node, int] = position) -> bool:
            """Whether a view of the memory other than ``known`` is read at or after
            the op."""
            return any(memory[other] == storage and other not in known
                       and any(position[user] >= here for user in other.users)
                       for other in nodes[:here])

        base = None
        if read_later((changed_tensor,)):
            view_of = changed_tensor.args[0] if changed_tensor.target is operator.getitem else None
            if view_of is None or memory.get(view_of) != storage or read_later(
                    (changed_tensor, view_of)):
                continue
            base = view_of
        new: list[torch.fx.Node] = []
        try:
            new += _add_after(node, node, *twin)
            if new[-1].meta["val"].dtype != value.dtype:
                new += _add_after(new[-1], node, "call_method", "to", (new[-1], value.dtype), {})
            result = new[-1]
            if base is not None:
                index = changed_tensor.args[1]
                new += _add_after(result, node, "call_function", setitem,
                                  (base, index, result), {})
                new_base = new[-1]
                new += _add_after(new_base, node, "call_function", operator.getitem,
                                  (new_base, index), {})
        except Exception:  # no fake value: leave the op as it is
            for n in reversed(new):
                graph.erase_node(n)
            continue

        def after(user: torch.fx.Node, position: dict[torch.fx.Node, int] = position,
                  here: int = here) -> bool:
            """A use after the op (the new nodes, not in `position`, come right after)."""
            return position.get(user, -1) > here

        node.replace_all_uses_with(new[-1])
        changed_tensor.replace_all_uses_with(new[-1], delete_user_cb=after)
        if base is not None:
            base.replace_all_uses_with(new_base, delete_user_cb=after)
        graph.erase_node(node)
        for n in new:
            memory[n] = memory_of(_value(n))
        moved = memory[new_base] if base is not None else memory[result]
        for other, i in position.items():
            if i > here and memory[other] == storage:
                memory[other] = moved
        changed = True
    if changed:
        g.recompile()


def _empty_as_zeros(g: torch.fx.GraphModule) -> None:
    """``torch.empty``, ``torch.empty_like`` and ``Tensor.new_empty`` become ``zeros``,
    ``zeros_like`` and ``new_zeros``, which tileopt compiles (any value is one that empty
    memory may hold): a tensor that :func:`_functionalize` fills no longer splits the
    graph where it is made."""
    functions = {torch.empty: torch.zeros, torch.empty_like: torch.zeros_like}
    changed = False
    for node in g.graph.nodes:
        if node.op == "call_function" and node.target in functions and (
                node.target is torch.empty_like or "memory_format" not in node.kwargs):
            node.target = functions[node.target]
            changed = True
        elif node.op == "call_method" and node.target == "new_empty":
            node.target = "new_zeros"
            changed = True
    if changed:
        g.recompile()


def _add_after(anchor: torch.fx.Node, origin: torch.fx.Node, op: str, target: Any,
               args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.fx.Node]:
    """A new node after ``anchor`` with ``origin``'s metadata (its source line) and its own
    fake value, in a list; raises (leaving no node) where the fake call fails."""
    with anchor.graph.inserting_after(anchor):
        node = anchor.graph.create_node(op, target, args, kwargs)
    try:
        fake = _fake_call(node)
    except Exception:
        anchor.graph.erase_node(node)
        raise
    node.meta = {k: v for k, v in origin.meta.items() if k not in ("val", "example_value")}
    node.meta["val"] = fake
    return [node]


def _segments(graph: torch.fx.Graph) -> dict[torch.fx.Node, int]:
    """Numbers the stretches between nodes with side effects: a node with side effects has
    a number of its own, nodes between two of them share one."""
    result: dict[torch.fx.Node, int] = {}
    segment = 0
    for node in graph.nodes:
        if has_side_effects(node):
            segment += 1
            result[node] = segment
            segment += 1
        else:
            result[node] = segment
    return result


def _propose(
    g: torch.fx.GraphModule, support: TileoptSupport, segments: Mapping[torch.fx.Node, int]
) -> list[list[torch.fx.Node]]:
    """The partitions of supported nodes, each within one segment and holding a compute op,
    as node lists in topological order."""
    partitioner = CapabilityBasedPartitioner(g, support, allows_single_node_partition=True)
    result = []
    for p in partitioner.propose_partitions():
        by_segment: dict[int, list[torch.fx.Node]] = {}
        for node in p.nodes:
            by_segment.setdefault(segments[node], []).append(node)
        for nodes in by_segment.values():
            if all(target_name(n) in _VIEWS for n in nodes):
                continue  # views alone: nothing to compute
            result.append(topo_sort(nodes))
    order = {n: i for i, n in enumerate(g.graph.nodes)}
    result.sort(key=lambda nodes: order[nodes[0]])
    return result


def _aliasing_outputs(
    inputs: Sequence[torch.fx.Node], outputs: Sequence[torch.fx.Node]
) -> list[torch.fx.Node]:
    """Outputs that are views of an input or of another output: compiled, they would be new
    tensors, and a later in-place change of one would not show in the other."""
    seen = {memory_of(_value(n)) for n in inputs} - {None}
    result = []
    for node in outputs:
        storage = memory_of(_value(node))
        if storage is not None and storage in seen:
            result.append(node)
        seen.add(storage)
    return result


def _example(node: torch.fx.Node, g: torch.fx.GraphModule, device_type: str) -> torch.Tensor:
    """A tensor like the one ``node`` computes (zeros), to compile a partition with."""
    if node.op == "get_attr":
        value = g
        for part in str(node.target).split("."):
            value = getattr(value, part)
        return value.detach()
    v = _value(node)
    shape, stride = tuple(v.shape), tuple(v.stride())
    size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    storage = torch.zeros(size, dtype=v.dtype, device=device_type)
    return torch.as_strided(storage, shape, stride)


def _culprits(error: Exception, nodes: Sequence[torch.fx.Node]) -> list[torch.fx.Node]:
    """The nodes of a partition that ``error`` (from compiling it) is about; all of them
    when it does not say."""
    op = getattr(error, "op", None)
    source = getattr(error, "source", None)
    calls = [n for n in nodes if n.op in ("call_function", "call_method")]
    if not isinstance(error, UnsupportedOperatorError) or not (op or source):
        return calls

    def norm(name: str) -> str:
        return name.strip("_").removeprefix("linalg_").removeprefix("special_").replace("_", "")

    def same(want: str, name: str) -> bool:
        # aten.max for x.max(-1); aten.native_layer_norm for F.layer_norm
        return bool(want) and (want == name or want in name or (len(name) >= 4 and name in want))

    named: list[torch.fx.Node] = []
    if op:
        want = norm(op.rsplit(".", 1)[-1])
        named = [n for n in calls if same(want, norm(target_name(n)))]
    located = [n for n in calls if source and _source(n) == source]
    both = [n for n in named if n in located]
    return both or named or located or calls


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    if not isinstance(error, TileoptError):
        line = f"{type(error).__name__}: {line}"
    return line if len(line) <= 400 else line[:397] + "..."


class _Partition(torch.nn.Module):
    """A compiled partition in the split graph: the CompiledGraph, and the partition's
    eager GraphModule for when it fails; its outputs take eager's strides (None: any)."""

    def __init__(
        self,
        name: str,
        compiled: CompiledGraph,
        eager: torch.fx.GraphModule,
        expected: Sequence[tuple[tuple[int, ...], torch.dtype]],
        graph_name: str,
        strides: Sequence[tuple[int, ...] | None],
    ) -> None:
        super().__init__()
        self.name = name
        self.compiled: CompiledGraph | None = compiled
        self.eager = eager
        self.expected = list(expected)
        self.graph_name = graph_name
        self.strides = list(strides)
        self.checked = False

    def forward(self, *args: Any) -> Any:
        if self.compiled is not None:
            try:
                outputs = self.compiled(*args)
                if not self.checked:
                    self._check(outputs)
                    self.checked = True
                return tuple(map(_with_strides, outputs, self.strides))
            except Exception as e:
                _log_fallback(f"{self.graph_name}: {self.name} failed in tileopt and runs "
                              f"eagerly from now on: {_first_line(e)}")
                self.compiled = None
        return self.eager(*args)

    def _check(self, outputs: Any) -> None:
        got = [(tuple(t.shape), t.dtype) for t in outputs]
        if got != self.expected:
            raise CompilationError(
                f"the compiled partition returned {got}, but the graph expects "
                f"{self.expected}"
            )


def _with_strides(t: torch.Tensor, stride: tuple[int, ...] | None) -> torch.Tensor:
    """``t`` laid out with ``stride``, eager's (a copy where its own differ): code after a
    compiled partition may take views that only eager's layout allows (``y.t().view(-1)``
    of a transposed input's ``exp``), and users see eager's strides."""
    if stride is None or all(a == b or n < 2 for a, b, n in zip(t.stride(), stride, t.shape,
                                                                 strict=True)):
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _stable_order(
    g: torch.fx.GraphModule, keys: Mapping[torch.fx.Node, tuple[float, ...]]
) -> None:
    """Sorts ``g``'s nodes topologically, by ``keys`` where free to choose (a segment's nodes
    before the next segment's)."""
    nodes = list(g.graph.nodes)
    pending = {n: len(set(n.all_input_nodes)) for n in nodes}
    ready = [(keys[n], i, n) for i, n in enumerate(nodes) if pending[n] == 0]
    heapq.heapify(ready)
    index = {n: i for i, n in enumerate(nodes)}
    order = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        for user in node.users:
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, (keys[user], index[user], user))
    if len(order) != len(nodes):
        # Not expected (partitions are checked for cycles); the graph then runs eagerly.
        raise CompilationError("the split graph has a cycle")
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in order:
        env[node] = graph.node_copy(node, lambda n: env[n])
    g.graph = graph


@dataclass
class _Specialisation:
    run: Callable[..., Any]
    report: GraphReport


class PartitionedGraph:
    """An FX graph (Dynamo's) run with what tileopt compiles of it; call it like the graph.

    Each new set of input shapes (and values of non-tensor inputs and of the inputs read as
    numbers) is split and compiled once (see the module's docstring); a call with grad mode
    on and an input that requires grad runs the graph eagerly.

    Attributes:
        gm: the graph as given.
        name: its name in reports and logs.
        report: the :class:`FallbackReport` each specialisation adds its
            :class:`GraphReport` to.
        specialisations: the split graphs (or eager fallbacks) by input signature.
        scalar_inputs: the positions of the inputs ``gm`` reads as numbers
            (:func:`scalar_inputs`), whose values are part of the signature.
    """

    #: The most specialisations kept; more shapes run eagerly.
    MAX_SPECIALISATIONS = 16
    #: The most failed compilations per specialisation before the rest runs eagerly.
    MAX_FAILURES = 16

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        *,
        target: str = DEFAULT_TARGET,
        device: str | None = None,
        fallback: str | None = "eager",
        name: str = "graph",
        report: FallbackReport | None = None,
        **kernel_options: Any,
    ) -> None:
        _check_fallback(fallback)
        self.gm = gm
        self.target = target
        self.device = device
        self.strict = fallback != "eager"
        self.kernel_options = kernel_options
        self.name = name
        self.report = report if report is not None else FallbackReport()
        self.specialisations: dict[tuple[Any, ...], _Specialisation] = {}
        self.scalar_inputs = scalar_inputs(gm)
        # torch.enable_grad() inside (or the end of a no_grad block): what runs under it may
        # need autograd, which kernels lack.
        self.enables_grad = any(
            n.op == "call_function" and n.target is torch._C._set_grad_enabled
            and n.args and n.args[0] is True for n in gm.graph.nodes)
        self.sets_requires_grad = any(target_name(n) == "requires_grad_"
                                      for n in gm.graph.nodes)
        self._logged: set[str] = set()

    # -- calls

    def __call__(self, *args: Any) -> Any:
        """Runs the graph: its compiled partitions in tileopt, the rest in PyTorch."""
        reason = self._eager_call_reason(args)
        if reason is not None:
            if self.strict:
                raise CompilationError(f"{self.name}: {reason}")
            self._log_once(f"{self.name} runs eagerly: {reason}")
            return self.gm(*args)
        key = self._key(args)
        spec = self.specialisations.get(key)
        if spec is None:
            if len(self.specialisations) >= self.MAX_SPECIALISATIONS:
                reason = (f"{self.name} compiled {len(self.specialisations)} sets of input "
                          f"shapes and numbers already (each number is compiled in); new "
                          f"ones run eagerly")
                if self.strict:
                    raise CompilationError(reason)
                self._log_once(reason)
                return self.gm(*args)
            spec = self._specialise(args, key)
        return spec.run(*args)

    def _key(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """What a specialisation is for: the tensors' shapes, strides, dtypes and devices,
        the numbers, and the values of the inputs read as numbers (:func:`scalar_inputs`)."""
        def exactly(v: Any) -> Any:  # -0.0 is not 0.0 (x / -0.0), and NaN is one key
            return v.hex() if isinstance(v, float) else v

        key: list[Any] = [
            ("tensor", tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type)
            if isinstance(a, torch.Tensor) else (type(a).__name__, exactly(a))
            for a in args
        ]
        for i in self.scalar_inputs:
            key[i] = (*key[i], exactly(_scalar_value(args[i])))
        return tuple(key)

    def _log_once(self, message: str) -> None:
        """Logs ``message`` (fallback channel) and notes it in the report, once."""
        if message not in self._logged:
            self._logged.add(message)
            self.report.notes.append(message)
            _log_fallback(message)

    def _eager_call_reason(self, args: Sequence[Any]) -> str | None:
        if self.enables_grad and (self.sets_requires_grad or any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args)):
            return ("it turns grad mode on (torch.enable_grad()) and a tensor requires grad; "
                    "tileopt compiles for inference")
        for arg in args:
            if not isinstance(arg, torch.Tensor | bool | int | float):
                return (f"an input is a {type(arg).__name__}; tileopt compiles graphs of "
                        f"tensors and numbers")
        if torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in args
        ):
            return ("grad mode is on and an input requires grad; tileopt compiles for "
                    "inference (run under torch.no_grad() or torch.inference_mode())")
        for device in ("cpu", "cuda"):
            try:
                if torch.is_autocast_enabled(device):
                    return f"autocast is on for {device}; tileopt compiles without autocast"
            except (TypeError, RuntimeError):
                pass
        return None

    # -- compilation

    def _specialise(self, args: Sequence[Any], key: tuple[Any, ...]) -> _Specialisation:
        inputs = tuple(_describe_arg(a, i in self.scalar_inputs) for i, a in enumerate(args))
        number = len(self.specialisations)
        title = GraphReport(self.name, inputs, specialisation=number).title
        events: list[tuple[str, str, str]] = []
        try:
            with cache.recording() as events:
                spec = self._build(args, title, inputs)
        except (OptionError, DeviceError):
            raise
        except Exception as e:
            if self.strict:
                raise
            spec = _Specialisation(self.gm, GraphReport(self.name, inputs, reason=_first_line(e)))
        compiled = {key for kind, event, key in events if kind == "kernel" and event == "misses"}
        reused = {key for kind, event, key in events
                  if kind == "kernel" and event in ("memory_hits", "disk_hits")} - compiled
        spec.report = dataclasses.replace(spec.report, name=self.name, specialisation=number,
                                          kernels_compiled=len(compiled),
                                          kernels_reused=len(reused))
        self.specialisations[key] = spec
        self.report.graphs.append(spec.report)
        self._log(spec.report)
        return spec

    def _log(self, report: GraphReport) -> None:
        if report.reason is not None:
            _log_fallback(f"{report.title} runs eagerly: {report.reason}")
            return
        for op in report.eager:
            _log_fallback(f"{report.title}: {op} (runs eagerly)")
        for p in report.compiled:
            logger.debug("%s: %s", report.title, p)

    def _device(self, args: Sequence[Any]) -> str:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return CompiledGraph._choose_device(self.device, tensors)

    def _build(self, args: Sequence[Any], name: str, inputs: tuple[str, ...]) -> _Specialisation:
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and target_name(node) in _AUTOCAST_NAMES:
                raise CompilationError("the graph uses torch.autocast, which tileopt does "
                                       "not compile")
        device = self._device(args)
        device_type = "cpu" if device == "emulator" else "cuda"
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if devices and device_type not in devices:
            raise CompilationError(
                f"the graph's inputs are {' and '.join(sorted(devices))} tensors, but tileopt "
                f"runs on {device} ({device_type} tensors) here"
            )
        static = _is_static(self.gm, args) and not self.scalar_inputs
        g = _copy(self.gm) if static else _specialise_graph(self.gm, args)
        _functionalize(g)
        _empty_as_zeros(g)
        _drop_unused(g)
        if self.strict:
            return self._build_whole(g, args, name, inputs, device)
        return self._build_split(g, name, inputs, device, device_type)

    def _compile(
        self, module: torch.nn.Module, examples: Sequence[torch.Tensor], device: str
    ) -> CompiledGraph:
        return compile_graph(module, tuple(examples), target=self.target, device=device,
                             **self.kernel_options)

    def _build_whole(
        self, g: torch.fx.GraphModule, args: Sequence[Any], name: str,
        inputs: tuple[str, ...], device: str,
    ) -> _Specialisation:
        """fallback="error": the graph as one CompiledGraph; its errors are raised."""
        placeholders = [n for n in g.graph.nodes if n.op == "placeholder"]
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                   and (i not in self.scalar_inputs or placeholders[i].users)]
        for i, node in enumerate(placeholders):
            if i not in tensors:
                g.graph.erase_node(node)  # a number, already in the graph as a constant
        g.recompile()
        compiled = self._compile(g, [args[i].detach() for i in tensors], device)
        part = CompiledPartition("tileopt_0", tuple(op_name(n) for n in g.graph.nodes
                                                    if n.op.startswith("call_")),
                                 (), len(compiled.kernels), compiled)

        def run(*call_args: Any) -> Any:
            return compiled(*(call_args[i] for i in tensors))

        return _Specialisation(run, GraphReport(name, inputs, compiled=(part,)))

    def _build_split(
        self, g: torch.fx.GraphModule, name: str, inputs: tuple[str, ...], device: str,
        device_type: str,
    ) -> _Specialisation:
        """fallback="eager": the graph split into compiled partitions and PyTorch calls."""
        _rename_tensor_getitems(g)
        segments = _segments(g.graph)
        unsupported: dict[torch.fx.Node, str] = {}
        compiled: dict[frozenset[torch.fx.Node], CompiledGraph] = {}
        failures = 0
        while True:
            partitions = _propose(g, TileoptSupport(device_type, unsupported), segments)
            pending = [p for p in partitions if frozenset(p) not in compiled]
            if not pending:
                break
            if failures == self.MAX_FAILURES:
                for nodes in pending:
                    for node in nodes:
                        unsupported[node] = (f"not compiled: tileopt gave up on this graph "
                                             f"after {failures} failed compilations")
                partitions = [p for p in partitions if frozenset(p) in compiled]
                break
            for nodes in pending:
                # Each failure marks nodes of a proposed (so supported) partition unsupported:
                # the loop ends.
                failed = self._try_compile(g, nodes, compiled, device)
                if failed:
                    unsupported.update(failed)
                    failures += 1
                    break
        support = TileoptSupport(device_type, unsupported)
        eager = tuple(
            EagerOp(op_name(n), n.name, _source(n), support.reason(n) or "")
            for n in g.graph.nodes
            if n.op in ("call_function", "call_method", "call_module")
            and support.reason(n) is not None and not _is_bookkeeping(n)
        )
        parts = self._fuse(g, partitions, compiled, segments, name)
        return _Specialisation(g, GraphReport(name, inputs, tuple(parts), eager))

    def _try_compile(
        self,
        g: torch.fx.GraphModule,
        nodes: list[torch.fx.Node],
        compiled: dict[frozenset[torch.fx.Node], CompiledGraph],
        device: str,
    ) -> dict[torch.fx.Node, str]:
        """Compiles one partition into ``compiled``; returns the nodes to run eagerly
        instead (with the reason) when that fails."""
        try:
            sub, ins, outs = fuse_as_graphmodule(g, nodes, "partition",
                                                 always_return_tuple=True)
        except Exception as e:  # not expected: partitions are checked for cycles
            return dict.fromkeys(nodes, f"could not be cut out of the graph: {_first_line(e)}")
        failures = {
            node: "its result is a tuple used outside tileopt's partition"
            for node in outs if not isinstance(_value(node), torch.Tensor)
        }
        for node in _aliasing_outputs(ins, outs):
            failures[node] = ("returns a view of a tensor the graph also uses (PyTorch keeps "
                              "the view)")
        # Complex tensors stay inside (the split put a complex op's reader elsewhere).
        for node in outs:
            if _is_complex(_value(node)):
                failures[node] = "makes a complex tensor that another partition reads"
        for node in ins:
            if _is_complex(_value(node)):
                for user in node.users:
                    if user in nodes:
                        failures[user] = "takes a complex tensor from outside its partition"
        for node in list(failures):
            # The partitioner keeps a getitem with the op whose tuple it takes (unbind,
            # split): that op runs eagerly too, or the same partition comes back.
            source = node.args[0] if node.target is operator.getitem else None
            if source in nodes:
                failures.setdefault(source, f"one of its results {failures[node]}")
        if failures or not outs:
            return failures or dict.fromkeys(nodes, "computes nothing the graph uses")
        try:
            device_type = "cpu" if device == "emulator" else "cuda"
            examples = [_example(n, g, device_type) for n in ins]
            compiled[frozenset(nodes)] = self._compile(sub, examples, device)
        except (OptionError, DeviceError):
            raise
        except Exception as e:
            return dict.fromkeys(_culprits(e, nodes), _first_line(e))
        return {}

    def _fuse(
        self,
        g: torch.fx.GraphModule,
        partitions: Sequence[list[torch.fx.Node]],
        compiled: Mapping[frozenset[torch.fx.Node], CompiledGraph],
        segments: Mapping[torch.fx.Node, int],
        name: str,
    ) -> list[CompiledPartition]:
        """Replaces each compiled partition's nodes in ``g`` by a call of a _Partition."""
        order = {n: i for i, n in enumerate(g.graph.nodes)}
        keys: dict[torch.fx.Node, tuple[float, ...]] = {
            n: (segments[n], order[n], 0) for n in g.graph.nodes
        }
        parts = []
        for i, nodes in enumerate(partitions):
            graph = compiled.get(frozenset(nodes))
            if graph is None:
                continue
            sub, ins, outs = fuse_as_graphmodule(g, nodes, f"tileopt_{i}",
                                                 always_return_tuple=True)
            expected = [(tuple(_value(o).shape), _value(o).dtype) for o in outs]
            # Eager's strides where known numbers (symbolic ones: any layout).
            strides = [s if all(isinstance(d, int) for d in s) else None
                       for s in (tuple(_value(o).stride()) for o in outs)]
            sources = tuple(dict.fromkeys(s for s in map(_source, nodes) if s))
            ops = tuple(op_name(n) for n in nodes if not _is_bookkeeping(n))
            part_name = f"tileopt_{len(parts)}"
            module = _Partition(part_name, graph, sub, expected, name, strides)
            g.add_submodule(part_name, module)
            last = nodes[-1]
            key = (segments[last], order[last])
            with g.graph.inserting_after(last):
                call = g.graph.call_module(part_name, args=tuple(ins))
            keys[call] = (*key, 1)
            previous = call
            for j, out in enumerate(outs):
                with g.graph.inserting_after(previous):
                    item = g.graph.call_function(operator.getitem, (call, j))
                item.meta = dict(out.meta)
                keys[item] = (*key, 2 + j)
                out.replace_all_uses_with(item)
                previous = item
            for node in reversed(nodes):
                g.graph.erase_node(node)
            parts.append(CompiledPartition(part_name, ops, sources, len(graph.kernels), graph))
        output = next(n for n in g.graph.nodes if n.op == "output")
        keys[output] = (math.inf, math.inf, 0)
        _stable_order(g, keys)
        g.graph.lint()
        g.recompile()
        return parts


def _is_bookkeeping(node: torch.fx.Node) -> bool:
    """Nodes a report does not list: a result taken out of a tuple, grad-mode changes."""
    if node.op == "call_function" and node.target is operator.getitem:
        return isinstance(_value(node.args[0]), tuple | list)
    return _is_state_call(node)


def _check_fallback(fallback: Any) -> None:
    if fallback is not None and fallback not in FALLBACKS:
        raise OptionError(
            f"fallback={fallback!r}; it takes 'eager' (what tileopt cannot compile runs in "
            f"PyTorch), 'error' or None (raise the error)"
        )


# ---------------------------------------------------------------------------------------------
# whole models


def _dynamo_backend(
    report: FallbackReport, fallback: str | None, target: str, device: str | None,
    kernel_options: Mapping[str, Any],
) -> Callable[..., Any]:
    """A Dynamo backend that makes each graph a :class:`PartitionedGraph`."""

    def backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **_: Any) -> Any:
        return PartitionedGraph(gm, target=target, device=device, fallback=fallback,
                                name=graph_name(), report=report, **kernel_options)

    return backend


def graph_name() -> str:
    """``"graph 0/1"``: Dynamo's id of the graph it is compiling (frame 0, recompilation
    1); ``"graph"`` outside a compilation."""
    try:
        from torch._guards import CompileContext

        compile_id = CompileContext.current_compile_id()
    except Exception:  # a private API: the name is only for reports
        compile_id = None
    return f"graph {compile_id}" if compile_id is not None else "graph"


class FallbackGraph:
    """A model that tileopt could not compile as one graph, run through ``torch.compile``
    with tileopt's backend: what tileopt compiles runs as its kernels, the rest in PyTorch.
    Call it like the model (outputs without autograd, like a CompiledGraph's).

    Each new set of input shapes is captured by Dynamo and compiled on its first call.

    Attributes:
        model: the model.
        error: why it did not compile as one graph.
        report: what tileopt compiled and what ran eagerly, per graph (filled by calls).
        target, device: as given to ``tileopt.compile``.
    """

    def __init__(
        self,
        model: Any,
        error: BaseException,
        *,
        target: str = DEFAULT_TARGET,
        device: str | None = None,
        **kernel_options: Any,
    ) -> None:
        self.model = model
        self.error = error
        self.target = target
        self.device = device
        self.report = FallbackReport(notes=[
            f"{_model_name(model)} does not compile as one graph ({_first_line(error)}); "
            f"its parts run through torch.compile"
        ])
        backend = _dynamo_backend(self.report, "eager", target, device, kernel_options)
        self._compiled = torch.compile(model, backend=backend, dynamic=False)

    def __call__(self, *inputs: Any) -> Any:
        """Runs the model (under ``torch.no_grad()``: tileopt compiles for inference)."""
        with torch.no_grad():
            return self._compiled(*inputs)

    def summary(self) -> str:
        """The report: what tileopt compiled and what ran eagerly, per graph."""
        return str(self.report)

    def __repr__(self) -> str:
        return (f"<FallbackGraph {_model_name(self.model)} target={self.target} "
                f"graphs={len(self.report.graphs)}>")


def _model_name(model: Any) -> str:
    return getattr(model, "__name__", None) or type(model).__name__


def compile_with_fallback(
    model: Any,
    example_inputs: Any,
    *,
    target: str = DEFAULT_TARGET,
    device: str | None = None,
    **kernel_options: Any,
) -> CompiledGraph | FallbackGraph:
    """``tileopt.compile(model, inputs, fallback="eager")``: the model as one
    :class:`~tileopt.compiler.graph.CompiledGraph` if tileopt compiles all of it, else a
    :class:`FallbackGraph` (the failure logged). Raises only OptionError and DeviceError
    (wrong options or device)."""
    log_channels()
    try:
        return compile_graph(model, example_inputs, target=target, device=device,
                             **kernel_options)
    except (OptionError, DeviceError):
        raise
    except Exception as e:
        _log_fallback(f"{_model_name(model)} does not compile as one graph, so its parts "
                      f"run through torch.compile: {_first_line(e)}")
        return FallbackGraph(model, e, target=target, device=device, **kernel_options)


#: The options of tileopt's Dynamo backend (``torch.compile(..., options={...})``) and
#: their defaults. ``report``: a :class:`FallbackReport` that every graph adds its
#: specialisations to (None: each graph keeps its own).
BACKEND_OPTIONS: dict[str, Any] = {"target": DEFAULT_TARGET, "device": None,
                                   "fallback": "eager", "report": None}

#: ``tileopt.compile``'s kernel options that the backend also takes and passes to every
#: kernel it compiles (unset: ``tileopt.compile``'s defaults).
BACKEND_KERNEL_OPTIONS = ("num_warps", "num_stages", "tma", "warp_specialize", "opt_level",
                          "fp_fusion", "maxnreg")


def check_backend_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The backend's settings: :data:`BACKEND_OPTIONS` updated with ``options``.

    Raises:
        OptionError: an unknown key (the message lists the known ones) or a wrong value;
            a wrong ``$TILEOPT_LOGS``.
    """
    log_channels()
    unknown = sorted(set(options) - set(BACKEND_OPTIONS) - set(BACKEND_KERNEL_OPTIONS))
    if unknown:
        raise OptionError(
            f"unknown option{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} of "
            f"tileopt's torch.compile backend; it takes "
            f"{', '.join((*BACKEND_OPTIONS, *BACKEND_KERNEL_OPTIONS))}"
        )
    settings = {**BACKEND_OPTIONS, **options}
    if not isinstance(settings["target"], str):
        raise OptionError(f"target= takes a GPU name such as 'sm_90', got "
                          f"{settings['target']!r}")
    if settings["device"] not in (None, "emulator", "cuda"):
        raise OptionError(f"device={settings['device']!r}; it takes 'emulator', 'cuda' or "
                          f"None (cuda for CUDA tensors where a driver works, else emulator)")
    _check_fallback(settings["fallback"])
    if settings["report"] is not None and not isinstance(settings["report"], FallbackReport):
        raise OptionError(f"report= takes a tileopt.compiler.fallback.FallbackReport (or None), "
                          f"got a {type(settings['report']).__name__}")
    # Wrong kernel options fail here, not at each kernel's compilation.
    nvidia.Options(settings["target"], **{
        name: options[name] for name in BACKEND_KERNEL_OPTIONS if name in options})
    return settings


def explain(model: Any, *inputs: Any, **options: Any) -> FallbackReport:
    """Runs ``model(*inputs)`` once through ``torch.compile`` with tileopt's backend (under
    ``torch.no_grad()``) and reports, per graph Dynamo captured, the partitions tileopt
    compiled (with their kernel counts) and the operators that ran in PyTorch and why.

    ``print(tileopt.explain(model, x))`` shows the report. ``options`` are the backend's
    (``target``, ``device``; see :data:`BACKEND_OPTIONS`); ``fallback`` is always "eager"; a
    ``report`` given gets the graphs too.

    Raises:
        OptionError: an unknown option or a wrong value.
    """
    settings = check_backend_options(options)
    report = settings["report"] if settings["report"] is not None else FallbackReport()
    backend = _dynamo_backend(report, "eager", settings["target"], settings["device"], {})
    with torch.no_grad():
        torch.compile(model, backend=backend)(*inputs)
    return report
