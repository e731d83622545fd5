"""The import half of the PyTorch frontend: ``tileopt.frontend.import_graph``.

A model goes through torch.export and torch-mlir to linalg-on-tensors text, which tileopt's
own MLIR must parse; parameters, buffers and lifted constants are arguments of @forward, f32
norms compute in f32, ops carry locations naming their aten op and the test's line, and what
cannot be imported raises an ExportError or UnsupportedOperatorError, never a crash.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tileopt.errors import (
    ArgumentError,
    CompilationError,
    ExportError,
    OptionError,
    UnsupportedOperatorError,
)

torch = pytest.importorskip("torch")
pytest.importorskip(
    "torch_mlir", reason="tileopt's frontend needs torch-mlir (pip install torch-mlir==20261001)"
)
ir = pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")

from tileopt.frontend import (  # noqa: E402
    GraphInput,
    ImportedGraph,
    describe_location,
    import_graph,
    unflatten_outputs,
)

F = torch.nn.functional
THIS_FILE = Path(__file__).name
_SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """``test_import.py:N``: the line of this file that ends with the comment ``marker``."""
    lines = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# {marker}")]
    assert len(lines) == 1, marker
    return f"{THIS_FILE}:{lines[0]}"


@dataclass(frozen=True)
class ParsedOp:
    """What the tests read of one op, copied out while its module is alive (an
    ``ir.Operation`` does not keep its module alive: it dangles once the module is freed)."""

    name: str
    location: str
    num_operands: int


def parse(graph: ImportedGraph) -> list[ParsedOp]:
    """Parse ``graph.linalg`` with tileopt's MLIR (and verify it); check @forward's
    signature against ``graph.inputs``; return every op of @forward, nested ones too."""
    with ir.Context():
        module = ir.Module.parse(graph.linalg)
        assert module.operation.verify()
        funcs = [op.operation for op in module.body.operations]
        assert [op.name for op in funcs] == ["func.func"]
        func = funcs[0]
        assert func.attributes["sym_name"].value == "forward"
        arg_types = [str(a.type) for a in func.regions[0].blocks[0].arguments]
        assert arg_types == [tensor_type(i.shape, i.dtype) for i in graph.inputs]
        ops: list[ParsedOp] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            ops.append(ParsedOp(op.name, str(op.location), len(op.operands)))
            return ir.WalkResult.ADVANCE

        func.walk(visit)
        return ops


_MLIR_TYPES = {
    "bool": "i1",
    "int32": "i32",
    "int64": "i64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
}


def tensor_type(shape: tuple[int, ...], dtype: torch.dtype) -> str:
    element = _MLIR_TYPES[str(dtype).removeprefix("torch.")]
    return f"tensor<{'x'.join(map(str, (*shape, element)))}>" if shape else f"tensor<{element}>"


def located(ops: list[ParsedOp], name: str) -> list[tuple[str | None, str | None]]:
    """describe_location of every op called ``name``."""
    return [describe_location(op.location) for op in ops if op.name == name]


# ---------------------------------------------------------------------------------------------
# Models


class MLP(torch.nn.Module):
    def __init__(self, d: int = 16, hidden: int = 48) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d, hidden)
        self.fc2 = torch.nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)  # @fc1
        h = F.gelu(h)  # @gelu
        return self.fc2(h)


class Scaled(torch.nn.Module):
    """A registered buffer, a non-persistent one and a plain tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.full((6,), 3.25))
        self.register_buffer("shift", torch.full((6,), 1.5), persistent=False)
        self.offset = torch.full((6,), 7.125)  # not registered: torch.export lifts it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.shift + self.offset


class Gather(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)  # @linear
        return torch.gather(y, 1, index)  # @gather


class Median(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        return torch.median(y, dim=-1).values  # @median


def several(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], int]:
    return a + b, [a * b, b.exp()], 3


@torch.library.custom_op("tileopt_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


# ---------------------------------------------------------------------------------------------
# What is handed on


def test_mlp() -> None:
    torch.manual_seed(0)
    graph = import_graph(MLP(), torch.randn(5, 16))
    assert [(i.name, i.kind, i.target, i.shape) for i in graph.inputs] == [
        ("fc1.weight", "parameter", "fc1.weight", (48, 16)),
        ("fc1.bias", "parameter", "fc1.bias", (48,)),
        ("fc2.weight", "parameter", "fc2.weight", (16, 48)),
        ("fc2.bias", "parameter", "fc2.bias", (16,)),
        ("x", "user", 0, (5, 16)),
    ]
    assert all(i.dtype == torch.float32 and i.value is None for i in graph.inputs)
    assert graph.num_user_inputs == 1
    ops = parse(graph)
    names = [op.name for op in ops]
    assert names.count("linalg.matmul") == 2
    assert "math.erf" in names  # exact GELU
    assert "f64" not in graph.linalg
    assert "aten.mm.default" in graph.fx_graph
    assert set(graph.times) == {"export", "torch-mlir"}
    assert all(t > 0 for t in graph.times.values())
    assert graph.output_spec.num_results == 1
    y = torch.ones(5, 16)
    assert unflatten_outputs(graph, [y]) is y


def test_parameters_are_arguments_not_constants() -> None:
    graph = import_graph(torch.nn.Linear(256, 256), torch.randn(3, 256))
    assert "dense_resource" not in graph.linalg
    assert len(graph.linalg) < 100_000
    weight = graph.inputs[0]
    assert (weight.name, weight.kind, weight.shape) == ("weight", "parameter", (256, 256))
    assert "%arg0: tensor<256x256xf32>" in graph.linalg
    parse(graph)


def test_buffers_and_lifted_constants_are_arguments() -> None:
    graph = import_graph(Scaled(), (torch.randn(2, 6),))
    kinds = [(i.name, i.kind, i.target) for i in graph.inputs]
    assert kinds == [
        ("scale", "buffer", "scale"),
        ("shift", "buffer", "shift"),
        ("offset", "constant", "offset"),
        ("x", "user", 0),
    ]
    constant = graph.inputs[2]
    assert constant.value is not None and torch.equal(constant.value, torch.full((6,), 7.125))
    assert graph.inputs[0].value is None
    # Their values appear nowhere in the IR.
    for value in ("3.25", "1.5", "7.125"):
        assert value not in graph.linalg
    assert "dense" not in graph.linalg
    parse(graph)


def test_plain_function_with_several_outputs() -> None:
    a, b = torch.randn(4), torch.randn(4)
    graph = import_graph(several, [a, b])
    assert [(i.name, i.kind, i.target) for i in graph.inputs] == [
        ("a", "user", 0),
        ("b", "user", 1),
    ]
    assert graph.num_user_inputs == 2
    assert graph.output_spec.num_results == 3  # the int is not a result
    ops = parse(graph)
    (ret,) = [op for op in ops if op.name == "func.return"]
    assert ret.num_operands == 3
    x, y, z = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    rebuilt = unflatten_outputs(graph, [x, y, z])
    assert isinstance(rebuilt, tuple) and isinstance(rebuilt[1], list)
    assert rebuilt[0] is x and rebuilt[1][0] is y and rebuilt[1][1] is z and rebuilt[2] == 3
    with pytest.raises(ArgumentError, match="returns 3 tensors; got 2"):
        unflatten_outputs(graph, [x, y])


def test_embedding() -> None:
    graph = import_graph(torch.nn.Embedding(50, 8), torch.tensor([[1, 2, 3], [4, 5, 49]]))
    assert [(i.name, i.kind, i.dtype) for i in graph.inputs] == [
        ("weight", "parameter", torch.float32),
        ("input", "user", torch.int64),
    ]
    ops = parse(graph)
    assert "tensor.extract" in [op.name for op in ops]  # a gather in a generic's body
    assert {op for op, _ in located(ops, "linalg.generic")} == {"aten.embedding"}


# ---------------------------------------------------------------------------------------------
# Precision


@pytest.mark.parametrize(
    "model",
    [
        torch.nn.LayerNorm(32),
        torch.nn.GroupNorm(2, 8),
        lambda x: torch.var(x, dim=-1),
        lambda x: torch.var_mean(x, dim=-1, keepdim=True),
        lambda x: torch.std(x),
    ],
    ids=["layer_norm", "group_norm", "var", "var_mean", "std"],
)
def test_f32_statistics_compute_in_f32(model: object) -> None:
    shape = (2, 8, 32)
    graph = import_graph(model, torch.randn(shape))
    parse(graph)
    assert "f64" not in graph.linalg


def test_f32_attention_has_no_f64() -> None:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    graph = import_graph(attention, (q, k, v))
    names = [op.name for op in parse(graph)]
    assert names.count("linalg.batch_matmul") == 2
    assert "f64" not in graph.linalg


@pytest.mark.parametrize(
    ("model", "upcast"),
    [
        (torch.nn.LayerNorm(32), True),
        (torch.nn.RMSNorm(32), True),
        (lambda x: torch.softmax(x, dim=-1), True),
        (lambda x: torch.relu(x) * 2, False),
    ],
    ids=["layer_norm", "rms_norm", "softmax", "relu"],
)
def test_f16_upcasts_where_torch_does(model: object, upcast: bool) -> None:
    if isinstance(model, torch.nn.Module):
        model = model.half()
    graph = import_graph(model, torch.randn(4, 32, dtype=torch.float16))
    names = [op.name for op in parse(graph)]
    assert ("arith.extf" in names) == upcast
    assert ("arith.truncf" in names) == upcast
    assert "f64" not in graph.linalg
    assert graph.linalg.count("tensor<4x32xf16>") >= 2  # the input and the result


def test_softmax_f32_stays_f32() -> None:
    graph = import_graph(lambda x: torch.softmax(x, dim=-1), torch.randn(4, 32))
    names = [op.name for op in parse(graph)]
    assert "math.exp" in names
    assert "arith.extf" not in names and "f16" not in graph.linalg and "f64" not in graph.linalg


@pytest.mark.parametrize(
    ("dtype", "element"),
    [
        (torch.bool, "i1"),
        (torch.int64, "i64"),
        (torch.float16, "f16"),
        (torch.bfloat16, "bf16"),
        (torch.float32, "f32"),
    ],
)
def test_input_dtypes(dtype: torch.dtype, element: str) -> None:
    x = (torch.arange(6).reshape(2, 3) % 2).to(dtype)
    graph = import_graph(lambda x: (x == 0, x.flip(0)), x)
    assert graph.inputs == (GraphInput("x", "user", 0, dtype, (2, 3)),)
    parse(graph)
    assert f"%arg0: tensor<2x3x{element}>" in graph.linalg


# ---------------------------------------------------------------------------------------------
# Locations


def test_locations_name_the_aten_op_and_the_source_line() -> None:
    x = torch.randn(4, 8)
    index = torch.tensor([[0, 7], [1, 1], [2, 3], [5, 5]])
    graph = import_graph(Gather(), (x, index))
    ops = parse(graph)
    assert set(located(ops, "linalg.matmul")) == {("aten.mm", line_of("@linear"))}
    gathers = [
        loc for loc in located(ops, "linalg.generic") if loc[0] == "aten.gather"
    ]
    assert gathers == [("aten.gather", line_of("@gather"))]
    # Every op of a generic's body carries its generic's location too.
    (body_extract,) = located(ops, "tensor.extract")
    assert body_extract == ("aten.gather", line_of("@gather"))


def test_locations_of_a_plain_function_name_its_lines() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)  # @tanh
        return torch.sigmoid(y)  # @sigmoid

    ops = parse(import_graph(f, torch.randn(3)))
    found = set(located(ops, "linalg.generic"))
    assert found == {("aten.tanh", line_of("@tanh")), ("aten.sigmoid", line_of("@sigmoid"))}


def test_locations_inside_torch_modules_name_the_user_line() -> None:
    ops = parse(import_graph(MLP(), torch.randn(2, 16)))
    fc1, _ = located(ops, "linalg.matmul")
    assert fc1 == ("aten.mm", line_of("@fc1"))  # not torch/nn/modules/linear.py
    assert ("aten.gelu", line_of("@gelu")) in located(ops, "linalg.generic")


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ('loc("aten.gather"("/a/b/test_x.py":12:0))', ("aten.gather", "test_x.py:12")),
        (
            'loc("aten.mm"(callsite("/u/model.py":40:0 at "/u/run.py":7:0)))',
            ("aten.mm", "model.py:40"),
        ),
        ('loc(fused["aten.add"("/m.py":3:0), "aten.mul"("/m.py":4:0)])', ("aten.add", "m.py:3")),
        ('loc("aten.relu")', ("aten.relu", None)),  # a node without a stack trace
        ('loc(fused["aten.add"("/m.py":3:0), "/n.py":4:0])', ("aten.add", "m.py:3")),
        ('loc("/m.py":9:4)', (None, "m.py:9")),
        ("loc(unknown)", (None, None)),
        ("loc(#loc3)", (None, None)),
    ],
)
def test_describe_location(location: str, expected: tuple[str | None, str | None]) -> None:
    assert describe_location(location) == expected


# ---------------------------------------------------------------------------------------------
# What cannot be imported


def test_data_dependent_control_flow_is_an_export_error() -> None:
    def branchy(x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x

    with pytest.raises(ExportError, match="torch.export could not capture") as info:
        import_graph(branchy, torch.randn(3))
    assert isinstance(info.value, CompilationError)
    assert "data-dependent" in str(info.value)  # torch's own reason


def test_unsupported_operator_names_op_and_line() -> None:
    with pytest.raises(UnsupportedOperatorError) as info:
        import_graph(Median(), torch.randn(3, 5))
    error = info.value
    assert isinstance(error, CompilationError)
    assert (error.op, error.source) == ("aten.median", line_of("@median"))
    message = str(error)
    assert "aten.median" in message and line_of("@median") in message
    assert str(Path(__file__)) in message  # the full path, as a traceback line


def test_higher_order_op_torch_mlir_cannot_import_is_unsupported() -> None:
    def branch(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,))  # @cond

    with pytest.raises(UnsupportedOperatorError) as info:
        import_graph(branch, torch.randn(3))
    assert (info.value.op, info.value.source) == ("higher_order.cond", line_of("@cond"))


def test_custom_op_is_unsupported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return twice(x) + 1  # @twice

    with pytest.raises(UnsupportedOperatorError) as info:
        import_graph(f, torch.randn(3))
    assert (info.value.op, info.value.source) == ("tileopt_test.twice", line_of("@twice"))


def test_complex_intermediate_is_unsupported() -> None:
    def spectrum(x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x).abs()  # @fft

    with pytest.raises(UnsupportedOperatorError, match="complex") as info:
        import_graph(spectrum, torch.randn(8))
    assert (info.value.op, info.value.source) == ("aten.fft_rfft", line_of("@fft"))


def test_unsigned_intermediate_is_unsupported() -> None:
    def pixels(x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.uint8).sum(-1)  # @to_uint8

    with pytest.raises(UnsupportedOperatorError, match="makes a torch.uint8 tensor") as info:
        import_graph(pixels, torch.randn(3, 4))
    assert info.value.source == line_of("@to_uint8")


def _positive(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0] * 2  # @bool_index


def _nonzero(x: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(x > 0)  # @nonzero


@pytest.mark.parametrize(
    ("f", "op", "tag"),
    [(_positive, "aten.index", "@bool_index"), (_nonzero, "aten.nonzero", "@nonzero")],
)
def test_data_dependent_shape_is_unsupported(f: Callable[..., object], op: str,
                                             tag: str) -> None:
    """Boolean indexing's result has as many elements as the mask has true ones: refused
    before torch-mlir, whose lowering of it did not finish (24 GB, then killed)."""
    with pytest.raises(UnsupportedOperatorError, match="depends on the values of its inputs") \
            as info:
        import_graph(f, torch.randn(9, 4))
    assert (info.value.op, info.value.source) == (op, line_of(tag))


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (torch.randn(3, dtype=torch.complex64), "example input 0 has dtype torch.complex64"),
        # torch-mlir lowers uint8 arithmetic as signed (a sum of 200 gave -56)
        (torch.tensor([0, 200], dtype=torch.uint8), "example input 0 has dtype torch.uint8"),
        ((torch.randn(3), 2.0), r"example input 1 is not a tensor but 2.0 \(float\)"),
        (((torch.randn(3),),), "example input 0 is not a tensor"),
        ({"x": torch.randn(3)}, "must be a tensor or a tuple or list of tensors; got dict"),
    ],
    ids=["complex", "uint8", "float", "nested", "dict"],
)
def test_bad_example_inputs(inputs: object, message: str) -> None:
    with pytest.raises(ExportError, match=message):
        import_graph(lambda *xs: xs[0] * 2, inputs)


def test_in_place_buffer_update_is_an_export_error() -> None:
    norm = torch.nn.BatchNorm1d(4)  # training mode: updates its running statistics
    with pytest.raises(ExportError, match="buffer 'running_mean' in place.*model.eval"):
        import_graph(norm, torch.randn(3, 4))
    parse(import_graph(norm.eval(), torch.randn(3, 4)))


def test_func_name() -> None:
    graph = import_graph(torch.nn.ReLU(), torch.randn(3), func_name="main")
    assert "func.func @main(" in graph.linalg
    with pytest.raises(OptionError, match="func_name must be an MLIR symbol name"):
        import_graph(torch.nn.ReLU(), torch.randn(3), func_name="my func")


def test_importing_tileopt_imports_neither_torch_nor_torch_mlir() -> None:
    code = (
        "import sys, tileopt, tileopt.frontend\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_mlir')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_readable_fx_graph_has_source_lines() -> None:
    graph = import_graph(Gather(), (torch.randn(4, 8), torch.zeros(4, 2, dtype=torch.int64)))
    assert "torch.ops.aten.gather.default" in graph.fx_graph
    assert re.search(r"# File: .*test_import\.py:\d+", graph.fx_graph)


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=False)[0]


_DECOMPOSED: dict[str, tuple[Callable[..., object], Callable[[], tuple[torch.Tensor, ...]]]] = {
    # aten.linear (a CompositeImplicit op in the graph) reaches aten.matmul, whose decomposition
    # is torch-mlir's: leaving linear's own kernel unwrapped bypassed it.
    "multihead_attention": (_Attention().eval(), lambda: (torch.randn(2, 5, 16),)),
    "gru": (torch.nn.GRU(4, 8, batch_first=True).eval(), lambda: (torch.randn(2, 3, 4),)),
    # p = 2 with more than 25 rows: cdist -> _euclidean_dist -> matmul, nested
    "cdist": (lambda a, b: torch.cdist(a, b), lambda: (torch.randn(30, 3), torch.randn(27, 3))),
    "sdpa_and_norms": (
        lambda q, w: F.rms_norm(F.scaled_dot_product_attention(q, q, q, is_causal=True), (8,))
        + F.layer_norm(q, (8,)) + F.group_norm(q, 1) + torch.einsum("bhtd,de->bhte", q, w),
        lambda: (torch.randn(1, 2, 6, 8), torch.randn(8, 8))),
    # ops torch-mlir's table keeps whole
    "kept_whole": (
        lambda x, i: (F.interpolate(x, scale_factor=2.0), F.one_hot(i, 5), x.isfinite(),
                      torch.linalg.norm(x)),
        lambda: (torch.randn(1, 2, 3, 3), torch.tensor([0, 4, 2]))),
}


@pytest.mark.parametrize("name", list(_DECOMPOSED))
def test_decompositions_match_torchs_run_decompositions(name: str) -> None:
    """The frontend's decomposition (``run_decompositions`` without overriding the ops whose
    override is their own kernel) gives torch's graph and signature exactly."""
    from tileopt.frontend._decompositions import decomposition_table
    from tileopt.frontend.importer import _as_module, _decompose

    model, make_inputs = _DECOMPOSED[name]
    inputs = make_inputs()
    module, _ = _as_module(model, len(inputs))
    program = torch.export.export(module, inputs, strict=False)
    want = program.run_decompositions(decomposition_table())
    got = _decompose(program, decomposition_table())
    assert got.graph_module.code == want.graph_module.code
    assert str(got.graph_signature) == str(want.graph_signature)
