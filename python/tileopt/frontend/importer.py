"""``import_graph``: a PyTorch model to linalg-on-tensors text, its inputs and its outputs.

Two steps, each timed in :attr:`ImportedGraph.times`:

1. ``"export"``: ``torch.export.export`` (non-strict) captures the model as an ATen graph,
   and ``run_decompositions`` decomposes it with torch-mlir's table, changed so that f32
   norms compute in f32 (:mod:`tileopt.frontend._decompositions`).
2. ``"torch-mlir"``: torch-mlir imports the graph and lowers it to linalg-on-tensors
   (:mod:`tileopt.frontend._lowering`); the result is handed on as text with locations,
   which tileopt's own MLIR parses (torch-mlir's MLIR is newer; its bytecode does not load).

Parameters, buffers and the tensor constants torch.export lifts are arguments of the
function, in front of the user's inputs, never constants in the IR: :attr:`ImportedGraph.inputs`
says where each argument's tensor comes from.

torch and torch-mlir are imported on the first call, not with this module.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tileopt.errors import ArgumentError, ExportError, OptionError, UnsupportedOperatorError

if TYPE_CHECKING:
    import torch
    from torch.utils._pytree import TreeSpec

__all__ = ["GraphInput", "ImportedGraph", "OutputSpec", "import_graph", "unflatten_outputs"]

#: The dtypes of the tensors a model may take, as ``torch.dtype`` names. No unsigned ones:
#: torch-mlir lowers uint8 arithmetic as signed (a sum sign-extends 200 to -56).
SUPPORTED_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
)


@dataclass(frozen=True)
class GraphInput:
    """One argument of the imported function and where its tensor comes from.

    Attributes:
        name: a readable name: the attribute path of a parameter, buffer or constant
            (``"fc.weight"``), the name of a user input (``"x"``, from the signature of
            ``forward`` or of the function; ``"input0"`` where there is none).
        kind: ``"parameter"``, ``"buffer"`` or ``"constant"`` (a tensor the model holds,
            passed at every call), or ``"user"`` (one of the call's inputs).
        target: for ``"parameter"`` and ``"buffer"`` the attribute path on the model (as in
            ``state_dict``); for ``"constant"`` torch.export's name of the lifted constant
            (the attribute path for a tensor attribute, ``"lifted_tensor_0"`` for a tensor
            made inside ``forward``); for ``"user"`` the position of the input in
            ``example_inputs``.
        dtype: the tensor's dtype.
        shape: the tensor's shape.
        value: for ``"constant"`` only, the tensor to pass (torch.export's copy of it).
    """

    name: str
    kind: Literal["parameter", "buffer", "constant", "user"]
    target: str | int
    dtype: torch.dtype
    shape: tuple[int, ...]
    value: torch.Tensor | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class OutputSpec:
    """How the flat results of the imported function make the model's output.

    Attributes:
        tree: the structure of the model's output (``torch.utils._pytree``'s TreeSpec of
            ``torch.export``): a tensor, tuple, list, dict... with one leaf per output.
        constants: ``(leaf index, value)`` for the leaves that are not tensors (a model
            returning ``(y, 3)``); the function returns the tensor leaves, in order.
    """

    tree: TreeSpec
    constants: tuple[tuple[int, Any], ...] = ()
    #: Per result of the function, the memory eager PyTorch returns it in: ``("input", k)``,
    #: the function's argument k (``x.view(-1)``, ``x`` itself), ``("result", j)``, an
    #: earlier result's (``(y, y.t())``), or None, memory of its own (``x.clone()``).
    memory: tuple[tuple[str, int] | None, ...] = ()

    @property
    def num_results(self) -> int:
        """The number of results of the imported function."""
        return self.tree.num_leaves - len(self.constants)

    def unflatten(self, flat: Sequence[Any]) -> Any:
        """The model's output from the function's results (see :func:`unflatten_outputs`)."""
        from torch.utils._pytree import tree_unflatten

        if len(flat) != self.num_results:
            raise ArgumentError(
                f"the imported function returns {self.num_results} tensors; got {len(flat)} "
                f"to rebuild the model's output from"
            )
        constants = dict(self.constants)
        results = iter(flat)
        leaves = [
            constants[i] if i in constants else next(results)
            for i in range(self.tree.num_leaves)
        ]
        return tree_unflatten(leaves, self.tree)


@dataclass(frozen=True)
class ImportedGraph:
    """A model imported by :func:`import_graph`.

    Attributes:
        fx_graph: the exported (and decomposed) ATen graph, readable, with each node's
            source line as a comment.
        linalg: the MLIR module, as text with locations, holding ``func.func @forward`` (or
            the ``func_name`` given) in linalg-on-tensors: one argument per :attr:`inputs`
            entry, one result per tensor of the model's output. An op's location names
            its aten op and user source line (see :func:`describe_location`).
        inputs: one per argument of the function, in order: parameters, buffers and
            constants first (in torch.export's order), then the user's inputs.
        num_user_inputs: how many of :attr:`inputs` are the user's (the last ones).
        output_spec: an :class:`OutputSpec`, which rebuilds the model's output structure
            from the function's results (:func:`unflatten_outputs`).
        times: seconds spent: ``"export"`` (torch.export and the decompositions) and
            ``"torch-mlir"`` (torch-mlir's import and lowering to linalg).
    """

    fx_graph: str
    linalg: str
    inputs: tuple[GraphInput, ...]
    num_user_inputs: int
    output_spec: OutputSpec
    times: dict[str, float]


def unflatten_outputs(graph: ImportedGraph, flat: Sequence[torch.Tensor]) -> Any:
    """The model's output (a tensor, tuple, list, dict... as the model returns it) from the
    flat results of ``graph``'s function, in order; ArgumentError if their number differs."""
    return graph.output_spec.unflatten(flat)


def _views_as_reshapes(program: Any) -> None:
    """Turns ``aten.view`` nodes into ``aten.reshape``: the same result wherever the view
    was valid at export, and still valid where a decomposition lays its result out with other
    strides than the eager kernel did (torch-mlir's scaled_dot_product_attention returns
    [batch, heads, seq, dim] where CPU's flash kernel returns [batch, seq, heads, dim], so a
    Hugging Face model's ``view`` after ``transpose(1, 2)`` would fail while retracing)."""
    import torch

    graph = program.graph_module.graph
    changed = False
    for node in graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        program.graph_module.recompile()


def _empty_results_as_constants(program: Any) -> None:
    """Replaces each op whose result has no elements (``x[2:]`` of two rows, ``x.repeat(0,
    2)``, a reshape of an empty input; static shapes only) by ``aten.empty`` of that shape:
    its value is known.
    torch-mlir's lowering of a reshape with a zero dimension divides by zero (SIGFPE: the
    process died), and a slice starting at the end of its dimension left an offset that
    kernel formation could not place."""
    import torch

    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        value = node.meta.get("val")
        if (node.op != "call_function" or not isinstance(value, torch.Tensor)
                or not all(isinstance(d, int) for d in value.shape) or value.numel() != 0
                or node.target is torch.ops.aten.empty.memory_format):
            continue
        with graph.inserting_before(node):
            empty = graph.call_function(
                torch.ops.aten.empty.memory_format, (list(value.shape),),
                {"dtype": value.dtype, "device": value.device})
        empty.meta = dict(node.meta)
        node.replace_all_uses_with(empty)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        program.graph_module.recompile()


def _decompose(program: Any, table: dict[Any, Callable[..., Any]]) -> Any:
    """``program.run_decompositions(table)``, without most of its fixed cost.

    ``run_decompositions`` overrides the CompositeImplicitAutograd kernel of every such op
    torch knows (513 in torch 2.13) for the retrace, and finds them first: about 0.15 s a
    call whatever the graph, most of a small model's import. Of those overrides, the ones
    that run the op's own CompositeImplicitAutograd kernel (torch-mlir's table holds 450
    such) do what the op does without one, so they are left out: only the ops to keep whole,
    those with another decomposition, and those the graph calls itself are overridden (an op
    of the graph left to its own kernel would call the ops inside it, aten.linear's
    aten.matmul, past their overrides). Which ops those are is worked out once while the ops
    registered stay the same. Where torch lacks the internals this needs, the plain call.
    """
    try:
        from torch.export.exported_program import (
            _decompose_exported_program,
            _disable_prexisiting_fake_mode,
        )
    except ImportError:
        return program.run_decompositions(table)
    overrides, python_table, cia = _decomposition_split(table)
    in_graph = {node.target: cia[node.target] for node in program.graph.nodes
                if node.target in cia}
    return _disable_prexisiting_fake_mode(_decompose_exported_program)(
        program,
        cia_to_decomp={**overrides, **in_graph},
        python_decomp_table=dict(python_table),
        joint_loss_index=None,
        decompose_custom_triton_ops=False,
    )


def _decomposition_split(table: dict[Any, Callable[..., Any]]) -> tuple[dict, dict, dict]:
    """(the overrides :func:`_decompose` always makes, the table of the other ops, every
    CompositeImplicitAutograd op torch may override with its decomposition), made again only
    when the ops registered change."""
    import torch
    from torch.export.exported_program import _split_decomp_table_to_cia_and_python_decomp

    registered = (
        id(table),
        tuple(torch.ops._dir),
        tuple(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")),
    )
    split = _DECOMPOSITION_SPLITS.get(registered)
    if split is None:
        cia, python_table = _split_decomp_table_to_cia_and_python_decomp(dict(table))
        overrides = {op: f for op, f in cia.items() if not _is_own_kernel(op, f)}
        split = overrides, python_table, cia
        _DECOMPOSITION_SPLITS.clear()
        _DECOMPOSITION_SPLITS[registered] = split
    return split


def _is_own_kernel(op: Any, decomposition: Callable[..., Any]) -> bool:
    """Whether ``decomposition`` is torch's wrapper that runs ``op``'s own
    CompositeImplicitAutograd kernel (``_get_decomp_for_cia``)."""
    return (
        isinstance(decomposition, functools.partial)
        and decomposition.func.__name__ == "_special_op_to_decompose_cia"
        and decomposition.keywords.get("kernel") is op
    )


#: :func:`_decompose`'s split of the table, for the ops registered when it was made.
_DECOMPOSITION_SPLITS: dict[Any, tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]] = {}


def import_graph(
    model: torch.nn.Module | Callable[..., Any],
    example_inputs: torch.Tensor | Sequence[torch.Tensor],
    *,
    func_name: str = "forward",
) -> ImportedGraph:
    """Export ``model`` called on ``example_inputs`` and lower it to linalg-on-tensors.

    ``model`` is an ``nn.Module`` or a function of tensors; ``example_inputs`` a tensor or a
    sequence of tensors (shapes and dtypes are fixed by them). Raises:

    - ExportError: an example input is not a tensor or has a dtype outside
      :data:`SUPPORTED_DTYPES`; torch.export rejects the model (the message holds torch's
      reason); the model mutates a buffer or an input in place; torch-mlir's importer
      rejects the graph.
    - UnsupportedOperatorError: an operator torch-mlir cannot lower to linalg, or one that
      makes a tensor of a dtype outside :data:`SUPPORTED_DTYPES`; it names the op and the
      user's source line.
    - CompilationError: any other failure of torch-mlir's lowering (its diagnostics).
    """
    if not re.fullmatch(r"[A-Za-z_][\w$.]*", func_name):
        raise OptionError(
            f"func_name must be an MLIR symbol name (a letter or _, then letters, digits, "
            f"_, $ or .); got {func_name!r}"
        )
    try:
        import torch

        from tileopt.frontend import _complex, _lowering
        from tileopt.frontend._decompositions import decomposition_table
    except ImportError as e:
        raise ImportError(
            f"tileopt's frontend needs torch and torch-mlir ({e}); install them with "
            f"`pip install -r requirements.txt`"
        ) from e
    inputs = _check_example_inputs(example_inputs)

    module, user_names = _as_module(model, len(inputs))
    start = time.perf_counter()
    with warnings.catch_warnings():
        # torch's own deprecation, raised by copying an ExportedProgram's TreeSpecs.
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
        try:
            program = torch.export.export(module, inputs, strict=False)
        except Exception as e:
            raise ExportError(
                f"torch.export could not capture {_describe(model)} as one graph: "
                f"{type(e).__name__}: {e}\n"
                f"tileopt compiles what torch.export captures: remove what it names (Python "
                f"control flow on tensor values can often become torch.where), or compile a "
                f"smaller part of the model."
            ) from e
        _views_as_reshapes(program)
        try:
            program = _decompose(program, decomposition_table())
        except Exception as e:
            raise ExportError(
                f"torch's decompositions failed on {_describe(model)}: "
                f"{type(e).__name__}: {e}"
            ) from e
        _empty_results_as_constants(program)
        not_real = _complex.complex_as_real(program)
    exported = time.perf_counter()

    fx_graph = program.graph_module.print_readable(print_output=False)
    graph_inputs = _graph_inputs(program, user_names)
    output_spec = _take_tensor_outputs(program)
    if not_real is not None:
        raise _unsupported(_lowering, not_real, _complex.UNSUPPORTED)
    _check_dtypes(program.graph, _lowering)
    _check_shapes_are_static(program.graph, _lowering)
    linalg = _lowering.lower_to_linalg(program.graph, func_name)
    lowered = time.perf_counter()
    return ImportedGraph(
        fx_graph=fx_graph,
        linalg=linalg,
        inputs=graph_inputs,
        num_user_inputs=len(inputs),
        output_spec=output_spec,
        times={"export": exported - start, "torch-mlir": lowered - exported},
    )


def _describe(model: object) -> str:
    name = getattr(model, "__qualname__", None) or type(model).__qualname__
    return f"{type(model).__name__} {name!r}" if inspect.isfunction(model) else name


def _check_example_inputs(example_inputs: object) -> tuple[torch.Tensor, ...]:
    """``example_inputs`` as a tuple of tensors; ExportError naming any other input."""
    import torch

    if isinstance(example_inputs, torch.Tensor):
        inputs: tuple[Any, ...] = (example_inputs,)
    elif isinstance(example_inputs, (tuple, list)):
        inputs = tuple(example_inputs)
    else:
        raise ExportError(
            f"example_inputs must be a tensor or a tuple or list of tensors; got "
            f"{type(example_inputs).__name__}"
        )
    supported = {getattr(torch, name) for name in SUPPORTED_DTYPES}
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ExportError(
                f"example input {i} is not a tensor but {_short_repr(x)} "
                f"({type(x).__name__}): tileopt imports models whose inputs are tensors; "
                f"pass it as a tensor, or bind it (functools.partial, a module attribute) "
                f"before importing"
            )
        if x.dtype not in supported:
            raise ExportError(
                f"example input {i} has dtype {x.dtype}, which tileopt does not compile; "
                f"inputs may be {_dtype_list()}"
            )
        if x.layout != torch.strided:
            raise ExportError(
                f"example input {i} has layout {x.layout}; tileopt imports dense "
                f"(torch.strided) tensors only"
            )
    return inputs


def _short_repr(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _dtype_list() -> str:
    return ", ".join(SUPPORTED_DTYPES)


def _as_module(model: object, num_inputs: int) -> tuple[torch.nn.Module, list[str] | None]:
    """``model`` as an ``nn.Module`` for torch.export, and the names of its inputs when they
    come from a function's signature (None: torch.export's placeholder names)."""
    import torch

    if isinstance(model, torch.nn.Module):
        return model, None
    if not callable(model):
        raise ExportError(
            f"tileopt imports an nn.Module or a function of tensors; got a "
            f"{type(model).__name__}"
        )
    # torch.export records only the frames of `forward` methods in a node's stack trace;
    # registering the function as an anchor keeps its frames, so that locations name the
    # user's line rather than the wrapper's. (A private hook: without it, locations fall
    # back to the wrapper, which the importer drops.)
    from torch.fx import proxy

    register = getattr(proxy, "_register_stack_trace_anchor", None)
    fn = model.func if isinstance(model, functools.partial) else model
    if not hasattr(fn, "__code__"):  # a callable object: its class's __call__
        fn = vars(type(fn)).get("__call__", fn)
    if register is not None:
        register(fn)  # a no-op for callables without Python code
    return _function_module_class()(model), _parameter_names(model, num_inputs)


def _function_module_class() -> type:
    import torch

    global _FunctionModule
    if _FunctionModule is None:

        class FunctionModule(torch.nn.Module):
            """A function of tensors as a module, for torch.export."""

            def __init__(self, fn: Callable[..., Any]) -> None:
                super().__init__()
                self.fn = fn

            def forward(self, *args: Any) -> Any:
                return self.fn(*args)

        _FunctionModule = FunctionModule
    return _FunctionModule


_FunctionModule: type | None = None


def _parameter_names(fn: Callable[..., Any], count: int) -> list[str] | None:
    """The names of the first ``count`` positional parameters of ``fn``; None if its
    signature does not name them all."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in parameters if p.kind in positional]
    return names[:count] if len(names) >= count else None


def _graph_inputs(program: Any, user_names: list[str] | None) -> tuple[GraphInput, ...]:
    """One GraphInput per placeholder of the program's graph, in order."""
    from torch.export.graph_signature import InputKind

    specs = {spec.arg.name: spec for spec in program.graph_signature.input_specs}
    kinds = {
        InputKind.PARAMETER: "parameter",
        InputKind.BUFFER: "buffer",
        InputKind.CONSTANT_TENSOR: "constant",
        InputKind.USER_INPUT: "user",
    }
    result: list[GraphInput] = []
    position = 0
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs[node.name]
        kind = kinds.get(spec.kind)
        val = node.meta.get("val")
        if kind is None or not hasattr(val, "dtype"):
            raise ExportError(
                f"the exported program takes {node.name!r} as a {spec.kind.name.lower()} input "
                f"({type(val).__name__}); tileopt imports tensor inputs only"
            )
        if kind == "user":
            name = user_names[position] if user_names else node.name
            target: str | int = position
            position += 1
        else:
            name = target = spec.target
        if str(val.dtype).removeprefix("torch.") not in SUPPORTED_DTYPES:
            raise ExportError(
                f"the model's {kind} {name!r} has dtype {val.dtype}, which tileopt does not "
                f"compile; tensors may be {_dtype_list()}"
            )
        value = program.constants.get(spec.target) if kind == "constant" else None
        result.append(
            GraphInput(
                name=name,
                kind=kind,
                target=target,
                dtype=val.dtype,
                shape=tuple(int(d) for d in val.shape),
                value=value,
            )
        )
    return tuple(result)


def _take_tensor_outputs(program: Any) -> OutputSpec:
    """The program's OutputSpec; leaves only the tensor outputs in its graph's output node.

    ExportError if the program mutates a buffer, parameter or input (it would return the
    new values beside the model's outputs)."""
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

    user_inputs = [
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind == InputKind.USER_INPUT
    ]
    output_node = next(n for n in program.graph.nodes if n.op == "output")
    values = list(output_node.args[0])
    specs = program.graph_signature.output_specs
    tensors = []
    constants = []
    for i, (spec, value) in enumerate(zip(specs, values, strict=True)):
        if spec.kind != OutputKind.USER_OUTPUT:
            nouns = {
                OutputKind.BUFFER_MUTATION: "buffer",
                OutputKind.PARAMETER_MUTATION: "parameter",
                OutputKind.USER_INPUT_MUTATION: "input",
            }
            if spec.kind not in nouns:
                raise ExportError(
                    f"the exported program has a {spec.kind.name} output; tileopt imports "
                    f"inference graphs, whose outputs are the model's"
                )
            if spec.kind == OutputKind.USER_INPUT_MUTATION:
                what = f"input {user_inputs.index(spec.target)}"
                fix = "copy the input first (x = x.clone()) or use the out-of-place op"
            else:
                what = f"{nouns[spec.kind]} {spec.target!r}"
                fix = (
                    "call model.eval() if it is a norm's running statistics, or return the "
                    "new value instead of assigning it"
                )
            raise ExportError(
                f"the model assigns to its {what} in place; tileopt compiles functions "
                f"without side effects: {fix}"
            )
        if isinstance(spec.arg, TensorArgument):
            tensors.append(value)
        else:
            constants.append((i, getattr(spec.arg, "value", value)))
    output_node.args = (tuple(tensors),)
    return OutputSpec(tree=program.call_spec.out_spec, constants=tuple(constants),
                      memory=_result_memory(program.graph, tensors))


def memory_of(value: Any) -> int | None:
    """Which memory a tensor (real or fake) is in, the same for all its views; None for
    anything else, or a tensor without storage."""
    import torch

    if not isinstance(value, torch.Tensor):
        return None
    try:
        return value.untyped_storage()._cdata
    except Exception:  # a tensor without storage
        return None


def _result_memory(graph: Any, results: Sequence[Any]) -> tuple[tuple[str, int] | None, ...]:
    """:attr:`OutputSpec.memory` of ``results`` (nodes of ``graph``), from the storages of
    torch.export's fake values."""
    def storage(node: Any) -> int | None:
        return memory_of(node.meta.get("val")) if hasattr(node, "meta") else None

    owner: dict[Any, tuple[str, int]] = {}
    for k, node in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        owner.setdefault(storage(node), ("input", k))
    memory = []
    for j, node in enumerate(results):
        key = storage(node)
        memory.append(None if key is None else owner.get(key))
        owner.setdefault(key, ("result", j))
    return tuple(memory)


def _tensor_results(graph: Any) -> Iterator[tuple[Any, Any]]:
    """(node, tensor) for each tensor that an operator node of ``graph`` makes."""
    import torch

    for node in graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else (val,):
            if isinstance(v, torch.Tensor):
                yield node, v


def _check_shapes_are_static(graph: Any, lowering: Any) -> None:
    """UnsupportedOperatorError naming the first node whose result's shape depends on tensor
    values (an unbacked size of torch.export's, as boolean indexing and ``nonzero`` make):
    tileopt compiles shapes that are known when it compiles, and torch-mlir's lowering of
    such a graph does not finish."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for node, v in _tensor_results(graph):
        if free_unbacked_symbols(v):
            raise _unsupported(
                lowering, node,
                f"the shape of its result, {tuple(v.shape)}, depends on the values of its "
                f"inputs, and tileopt compiles shapes known when it compiles. Keep the shape "
                f"fixed (torch.where instead of boolean indexing, say)")


def _check_dtypes(graph: Any, lowering: Any) -> None:
    """UnsupportedOperatorError naming the first node that makes a tensor of a dtype
    outside :data:`SUPPORTED_DTYPES` (complex, unsigned, the other 8-bit floats)."""
    for node, v in _tensor_results(graph):
        if str(v.dtype).removeprefix("torch.") in SUPPORTED_DTYPES:
            continue
        why = ("tileopt neither takes nor returns complex tensors (it computes with them "
               "inside a graph only). Pass and return real tensors (the real and imaginary "
               "parts, torch.view_as_real)" if v.dtype.is_complex else
               f"tileopt compiles tensors of {_dtype_list()}. Compute in one of them")
        raise _unsupported(lowering, node, f"it makes a {v.dtype} tensor, and {why}")


def _unsupported(lowering: Any, node: Any, reason: str) -> UnsupportedOperatorError:
    """The error for an operator node that tileopt does not compile, for ``reason``."""
    op = lowering.operator_name(node)
    source = lowering.node_source(node)
    where = f" at {source}" if source else ""
    return UnsupportedOperatorError(
        f"tileopt cannot compile {op}{where}: {reason}, or run this part of the model outside "
        f"tileopt.",
        op=op,
        source=source,
    )
