"""tileopt as a ``torch.compile`` backend (``tileopt.dynamo``) and partial compilation with
eager fallback (``tileopt.compiler.fallback``): models run with tileopt's kernels in the PTX
emulator, compared with eager PyTorch; what tileopt cannot compile must still give PyTorch's
result, and the reports must name it."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
pytest.importorskip("torch_mlir", reason="the frontend needs torch-mlir (requirements.txt)")
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import tileopt  # noqa: E402
import tileopt.dynamo  # noqa: E402
from tileopt.compiler import fallback  # noqa: E402
from tileopt.testing.models import GPTBlock, LlamaBlock  # noqa: E402

OPTIONS = {"device": "emulator"}
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Spy:
    """tileopt's backend, keeping the PartitionedGraph it returns for each graph."""

    def __init__(self) -> None:
        self.graphs: list[fallback.PartitionedGraph] = []

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        graph = tileopt.dynamo.backend(gm, example_inputs, **kwargs)
        self.graphs.append(graph)
        return graph

    @property
    def reports(self) -> list[fallback.GraphReport]:
        return [r for g in self.graphs for r in g.report.graphs]


def close(got: Any, want: Any) -> None:
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)


def randn(*shape: int) -> Any:
    return torch.randn(*shape)


# ---------------------------------------------------------------------------------------------
# models


def mlp() -> Any:
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))


class NormSoftmax(nn.Module):
    """LayerNorm, a scaled softmax over the last dimension, a residual."""

    def __init__(self, dim: int = 24) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: Any) -> Any:
        return x + torch.softmax(self.norm(x) * 2.0, dim=-1)


class WithUnsupported(nn.Module):
    """Two supported regions around an operator tileopt does not lower: ``torch.sort`` (not
    among the operators tileopt tries) or ``torch.linalg.svd`` (no lowering in torch-mlir)."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op
        self.fc1 = nn.Linear(16, 24)
        self.fc2 = nn.Linear(24, 8)

    def forward(self, x: Any) -> Any:
        h = F.gelu(self.fc1(x))
        if self.op == "sort":
            h = torch.sort(h, dim=-1).values
        else:
            h = h / torch.linalg.svd(h).S.amax()
        return torch.softmax(self.fc2(h), dim=-1)


MODELS: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "mlp": (mlp, (5, 16)),
    "norm_softmax": (NormSoftmax, (3, 5, 24)),
}


def _line(model: type, text: str) -> str:
    """``test_dynamo.py:<line>``: where ``text`` is in ``model``'s source."""
    lines, first = inspect.getsourcelines(model)
    [index] = [i for i, line in enumerate(lines) if text in line]
    return f"{Path(__file__).name}:{first + index}"


def _entry_point_installed() -> bool:
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    return any(ep.name == "tileopt" and ep.value == "tileopt.dynamo:backend" for ep in eps)


# ---------------------------------------------------------------------------------------------
# supported models


@pytest.mark.parametrize("name", list(MODELS))
def test_backend_function(name: str) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    spy = Spy()
    compiled = torch.compile(model, backend=spy, options=OPTIONS)
    with torch.no_grad():
        for x in (randn(*shape), randn(*shape)):
            close(compiled(x), model(x))
    [report] = spy.reports  # one graph, compiled once
    assert report.reason is None and not report.eager, str(report)
    assert report.compiled and report.kernels >= 1


@pytest.mark.skipif(not _entry_point_installed(),
                    reason="the entry point torch_dynamo_backends:tileopt is not installed yet "
                           "(reinstall tileopt, e.g. `make build`, to register it)")
@pytest.mark.parametrize("name", list(MODELS))
def test_backend_by_name(name: str, caplog: Any) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    compiled = torch.compile(model, backend="tileopt", options=OPTIONS)
    x = randn(*shape)
    with caplog.at_level(logging.DEBUG, logger="tileopt"), torch.no_grad():
        close(compiled(x), model(x))
    assert any("tileopt_0:" in r.getMessage() for r in caplog.records)  # compiled by tileopt


def test_entry_point_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    value = project["entry-points"]["torch_dynamo_backends"]["tileopt"]
    module, _, attr = value.partition(":")
    assert getattr(importlib.import_module(module), attr) is tileopt.dynamo.backend


#: Operators of vision and loss code, several to a graph, that Dynamo records by their torch,
#: functional or method names: each must be among those tileopt takes and compile.
LISTED: dict[str, tuple[Callable[[Any], Any], tuple[int, ...]]] = {
    "convolutions": (lambda x: F.conv2d(x, torch.ones(3, 4, 3, 3), padding=1)
                     + F.conv_transpose2d(x[:, :, ::2, ::2], torch.ones(4, 3, 2, 2), stride=2),
                     (2, 4, 8, 8)),
    "pooling": (lambda x: F.max_pool2d(x, 3, 2, 1) + F.avg_pool2d(x, 2)
                + F.adaptive_avg_pool2d(x, 4) + F.adaptive_max_pool2d(x[..., :7, :7], 4)
                + F.max_pool2d(x, 2, return_indices=True)[1].float(), (2, 3, 8, 8)),
    "pooling_1d": (lambda x: F.max_pool1d(x, 2) + F.avg_pool1d(x, 2)
                   + F.adaptive_avg_pool1d(x, 8) + F.adaptive_max_pool1d(x, 8), (2, 3, 16)),
    "resampling": (lambda x: F.interpolate(F.pad(x, (1, 1, 1, 1)), scale_factor=2,
                                           mode="bilinear")[..., :8, :8]
                   + F.pixel_shuffle(F.pixel_unshuffle(x, 2), 2), (2, 4, 8, 8)),
    "normalisation": (lambda x: F.instance_norm(x) + F.glu(torch.cat([x, x], 1), 1)
                      + F.prelu(x, torch.full((4,), 0.25)), (2, 4, 8, 8)),
    "losses": (lambda x: F.kl_div(F.log_softmax(x, -1), F.softmax(2 * x, -1),
                                  reduction="batchmean")
               + F.smooth_l1_loss(x, x / 2) + F.l1_loss(x, -x) + F.huber_loss(x, x * 3)
               + F.binary_cross_entropy(x.sigmoid(), (x > 0).float())
               + F.cosine_similarity(x, x.flip(-1), -1).sum()
               + torch.cdist(x, x, p=1).sum(), (4, 16)),
    "indices": (lambda x: F.one_hot(x.argmax(-1), 16).float() + x.argmin(0)
                + torch.take_along_dim(x, x.argmax(-1, keepdim=True), -1)
                + torch.diff(x, dim=-1, append=x[:, :1]) + x.repeat_interleave(2, -1)[:, ::2]
                + torch.topk(x, 2, -1).values.sum(-1, keepdim=True)
                + torch.zeros_like(x).scatter(-1, x.argmax(-1, keepdim=True), 1.0),
                (4, 16)),
    # a & b and a | b are operator.and_ and or_ (not in place); normalize draws no numbers
    "masks_normalize": (lambda x: ((x > 0) & (x < 1) | (x < -1)).float()
                        + F.normalize(x, dim=-1), (4, 16)),
    "elementwise": (lambda x: torch.atan2(x, x + 2) + torch.logaddexp(x, -x) + torch.sinh(x)
                    + torch.asinh(x) + torch.logit(x.sigmoid()) + F.softshrink(x)
                    + F.hardshrink(x) + F.celu(x) + F.softsign(x) + torch.addcdiv(x, x, x + 9)
                    + torch.outer(x[0], x[1])[:4] + torch.aminmax(x, dim=0).max, (4, 16)),
}


def report_of(f: Callable[..., Any], *args: Any) -> fallback.GraphReport:
    """``f`` under torch.compile with tileopt, checked against eager (without grad); the
    report of its one graph."""
    spy = Spy()
    compiled = torch.compile(f, backend=spy, options=OPTIONS)
    with torch.no_grad():
        close(compiled(*args), f(*args))
    [report] = spy.reports
    return report


@pytest.mark.parametrize("name", list(LISTED))
def test_listed_operators_compile(name: str) -> None:
    f, shape = LISTED[name]
    torch.manual_seed(0)
    report = report_of(f, randn(*shape))
    assert report.compiled and not report.eager, str(report)


def test_dynamically_quantized_linear_compiles_whole() -> None:
    """A linear layer quantized to int8 on the fly (per-row scales, ``torch._int_mm`` with
    the weight's transpose, as torchao's dynamic quantization): one partition, nothing in
    PyTorch, eager's numbers."""
    torch.manual_seed(0)
    w = torch.randint(-128, 128, (48, 96), dtype=torch.int8)
    scale = torch.rand(48) / 100

    def layer(x: Any) -> Any:
        s = x.abs().amax(-1, keepdim=True) / 127
        q = (x / s).round().clamp(-128, 127).to(torch.int8)
        return torch._int_mm(q, w.t()).float() * s * scale

    report = report_of(layer, randn(33, 96))
    assert len(report.compiled) == 1 and not report.eager, str(report)


def test_float8_linear_compiles_whole() -> None:
    """A float8 linear layer as torchao's dynamic scaling makes it (the input scaled and
    cast to e4m3 by its amax, ``torch._scaled_mm`` with the e4m3 weight's transpose and
    per-tensor scales, a bf16 result): one partition, nothing in PyTorch, eager's numbers."""
    torch.manual_seed(0)
    w = (torch.randn(48, 96) * 8).to(torch.float8_e4m3fn)
    w_scale = torch.tensor(0.05)

    def layer(x: Any) -> Any:
        scale = x.abs().amax() / 448
        q = (x / scale).to(torch.float8_e4m3fn)
        return torch._scaled_mm(q, w.t(), scale, w_scale, out_dtype=torch.bfloat16)

    report = report_of(layer, randn(33, 96))
    assert len(report.compiled) == 1 and not report.eager, str(report)


# ---------------------------------------------------------------------------------------------
# what tileopt cannot compile


def run_with_unsupported(op: str) -> fallback.GraphReport:
    """WithUnsupported(op) under torch.compile with tileopt, checked against eager; the
    report of its one graph."""
    torch.manual_seed(0)
    return report_of(WithUnsupported(op), randn(4, 16))


def test_unsupported_op_in_the_middle() -> None:
    report = run_with_unsupported("sort")
    assert [op.op for op in report.eager] == ["torch.sort"], str(report)
    assert report.eager[0].source == _line(WithUnsupported, "torch.sort(")
    assert len(report.compiled) == 2  # fc1 + gelu, fc2 + softmax
    assert "torch.sort" in str(report) and "tileopt_1" in str(report)


def test_unsigned_tensors_run_eagerly() -> None:
    # torch-mlir lowers uint8 arithmetic as signed: 200 + 200 came back as -112 (int8).
    def f(a: Any) -> Any:
        return a + a, a.sum(-1), a.float() * 2.0

    spy = Spy()
    compiled = torch.compile(f, backend=spy, options=OPTIONS)
    a = torch.tensor([[0, 1, 127, 128, 200, 255]], dtype=torch.uint8)
    got, want = compiled(a), f(a)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    close(got, want)
    [report] = spy.reports
    assert {"add", "sum"} <= {op.op.split(".")[-1] for op in report.eager}, str(report)
    assert "uint8" in str(report)


def test_failing_op_is_split_off(monkeypatch: Any) -> None:
    # With svd among the operators tried, its partition fails to compile (torch-mlir has no
    # lowering): the error names aten._linalg_svd, that node runs eagerly, the rest compiles.
    monkeypatch.setattr(fallback, "SUPPORTED_FUNCTIONS", fallback.SUPPORTED_FUNCTIONS | {"svd"})
    report = run_with_unsupported("svd")
    [eager] = report.eager
    assert eager.op == "torch.linalg.svd" and "aten._linalg_svd" in eager.reason, str(report)
    assert eager.source == _line(WithUnsupported, "torch.linalg.svd(")
    assert len(report.compiled) == 2, str(report)


def test_partition_failing_at_run_time(monkeypatch: Any, caplog: Any) -> None:
    def broken(self: Any, *inputs: Any) -> Any:
        raise tileopt.EmulatorError("the emulator broke")

    torch.manual_seed(0)
    model = NormSoftmax()
    compiled = torch.compile(model, backend=tileopt.dynamo.backend, options=OPTIONS)
    monkeypatch.setattr(tileopt.CompiledGraph, "__call__", broken)
    x = randn(2, 24)
    with caplog.at_level(logging.INFO, logger="tileopt"), torch.no_grad():
        for _ in range(2):
            close(compiled(x), model(x))
    lines = [r.getMessage() for r in caplog.records if "the emulator broke" in r.getMessage()]
    assert len(lines) == 1 and "runs eagerly from now on" in lines[0]


def test_fallback_error_raises() -> None:
    compiled = torch.compile(WithUnsupported("svd"), backend=tileopt.dynamo.backend,
                             options={**OPTIONS, "fallback": "error"})
    with pytest.raises(tileopt.UnsupportedOperatorError) as info, torch.no_grad():
        compiled(randn(4, 16))
    assert info.value.op == "aten._linalg_svd"


def test_unknown_option() -> None:
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(tileopt.OptionError,
                       match=r"'num_wraps'.*target, device, fallback, report, num_warps, "
                             r"num_stages, tma, warp_specialize, opt_level, fp_fusion"):
        tileopt.dynamo.backend(gm, [randn(3)], options={"num_wraps": 4})
    with pytest.raises(tileopt.OptionError, match=r"device='gpu'"):
        tileopt.dynamo.backend(gm, [randn(3)], device="gpu")
    with pytest.raises(tileopt.OptionError, match=r"report= takes a .*FallbackReport"):
        tileopt.dynamo.backend(gm, [randn(3)], report=[])
    compiled = torch.compile(gm, backend=tileopt.dynamo.backend, options={"num_wraps": 4})
    with pytest.raises(Exception) as info:
        compiled(randn(3))
    causes = [info.value, info.value.__cause__, getattr(info.value, "inner_exception", None)]
    assert any(isinstance(e, tileopt.OptionError) for e in causes), info.value


def test_kernel_options_reach_every_kernel(monkeypatch: Any) -> None:
    """tileopt.compile's kernel options, given to the backend, are checked when it is called
    and passed to the compilation of every partition."""
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    with pytest.raises(tileopt.OptionError, match=r"num_stages must be in 1\.\.8, got 9"):
        tileopt.dynamo.backend(gm, [randn(3)], num_stages=9)
    with pytest.raises(tileopt.OptionError, match="warp_specialize must be True or False"):
        tileopt.dynamo.backend(gm, [randn(3)], warp_specialize="yes")
    with pytest.raises(tileopt.OptionError, match=r"maxnreg must be 24\.\.255"):
        tileopt.dynamo.backend(gm, [randn(3)], maxnreg=300)
    seen: list[dict[str, Any]] = []
    real = fallback.compile_graph

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append({name: kwargs.get(name) for name in ("num_stages", "warp_specialize")})
        return real(*args, **kwargs)

    monkeypatch.setattr(fallback, "compile_graph", spy)
    torch.manual_seed(0)
    model = mlp().eval()
    compiled = torch.compile(model, backend=tileopt.dynamo.backend,
                             options={**OPTIONS, "num_stages": 1, "warp_specialize": True})
    x = randn(4, 16)
    with torch.no_grad():
        close(compiled(x), model(x))
    assert seen and all(s == {"num_stages": 1, "warp_specialize": True} for s in seen), seen


# ---------------------------------------------------------------------------------------------
# shapes, autograd, side effects


def test_new_shapes_recompile() -> None:
    torch.manual_seed(0)
    model = mlp()
    spy = Spy()
    compiled = torch.compile(model, backend=spy, options=OPTIONS)
    with torch.no_grad():
        for rows in (4, 7, 3):  # the second makes Dynamo's graph dynamic; each is specialised
            x = randn(rows, 16)
            close(compiled(x), model(x))
    reports = spy.reports
    assert len(reports) == 3, [str(r) for r in reports]
    assert all(r.reason is None and r.compiled and not r.eager for r in reports)
    for report, rows in zip(reports, (4, 7, 3), strict=True):
        assert f"f32[{rows}, 16]" in report.inputs, report.inputs


# Small blocks (the emulator runs them): GPT with LayerNorm (whose eps Dynamo passes as a 0-d
# tensor with dynamic=True), LLaMA with RMSNorm, rotary tables sliced to the sequence length.
BLOCKS: dict[str, Callable[[], Any]] = {
    "gpt": lambda: GPTBlock(32, heads=2),
    "llama": lambda: LlamaBlock(32, heads=2, seq=16, hidden=64),
}


@pytest.mark.parametrize("mode", ["dynamic", "mark_dynamic"])
@pytest.mark.parametrize("name", list(BLOCKS))
def test_dynamic_shapes_compile(name: str, mode: str) -> None:
    # One Dynamo graph with symbolic sizes; tileopt compiles it per sequence length, all of
    # it (nothing eager), and a length seen before runs its specialisation again.
    torch.manual_seed(0)
    model = BLOCKS[name]().eval()
    spy = Spy()
    compiled = torch.compile(model, backend=spy, options=OPTIONS,
                             dynamic=True if mode == "dynamic" else None)
    with torch.no_grad():
        for t in (5, 12, 5):
            x = randn(1, t, 32)
            if mode == "mark_dynamic":
                torch._dynamo.mark_dynamic(x, 1)
            close(compiled(x), model(x))
    [graph] = spy.graphs
    reports = graph.report.graphs
    text = str(graph.report)
    assert [r.specialisation for r in reports] == [0, 1], text
    for report, t in zip(reports, (5, 12), strict=True):
        assert report.reason is None and not report.eager and report.kernels > 0, text
        assert f"f32[1, {t}, 32]" in report.inputs, report.inputs
    if mode == "dynamic":  # eps, read with .item(): a constant of the specialisation
        eps = "f64[] 1e-05" if name == "gpt" else "f64[] 1e-06"
        assert eps in reports[0].inputs, reports[0].inputs


@pytest.mark.parametrize("mode", ["eager", "error"])
def test_numbers_read_from_tensors_are_part_of_the_key(mode: str) -> None:
    # With dynamic=True Dynamo passes a float argument as a 0-d tensor that the graph reads
    # with .item(), without a guard on its value: each value is a specialisation of its own.
    # fallback="error" compiles the graph whole, without the tensor that is now unused.
    torch.manual_seed(0)
    norm = NormSoftmax(8).eval()

    def f(x: Any, scale: float) -> Any:
        return norm(x) * scale

    spy = Spy()
    compiled = torch.compile(f, backend=spy, options={**OPTIONS, "fallback": mode},
                             dynamic=True)
    x = randn(3, 8)
    with torch.no_grad():
        for scale in (0.5, -2.0, 0.5):
            close(compiled(x, scale), f(x, scale))
    [graph] = spy.graphs
    reports = graph.report.graphs
    assert [r.inputs[-1] for r in reports] == ["f64[] 0.5", "f64[] -2.0"], str(graph.report)
    assert all(r.reason is None and not r.eager for r in reports), str(graph.report)


def test_report_counts_specialisations_and_cached_kernels(fresh_cache: Any) -> None:
    torch.manual_seed(0)
    model = mlp().eval()

    def run(rows: tuple[int, ...]) -> fallback.FallbackReport:
        torch._dynamo.reset()
        report = fallback.FallbackReport()  # the backend's option: every graph adds to it
        compiled = torch.compile(model, backend=tileopt.dynamo.backend, dynamic=True,
                                 options={**OPTIONS, "report": report})
        with torch.no_grad():
            for n in rows:
                x = randn(n, 16)
                close(compiled(x), model(x))
        return report

    first = run((4, 7, 4))  # 4 again: no new specialisation
    a, b = first.graphs
    assert (a.specialisation, b.specialisation) == (0, 1)
    assert a.kernels_compiled == a.kernels > 0 and a.kernels_reused == 0, str(first)
    assert b.kernels_compiled + b.kernels_reused == b.kernels, str(first)
    lines = str(first).splitlines()
    assert lines[:2] == ["tileopt: 1 graph, 2 specialisations", f"{a.name}: 2 specialisations"]
    assert re.fullmatch(rf"  specialisation 0 \(.*int 4, f32\[4, 16\].*\): 1 partition, "
                        rf"kernels: {a.kernels} compiled, 0 from the cache", lines[2]), lines
    assert re.fullmatch(rf"  specialisation 1 \(.*int 7, f32\[7, 16\].*\): 1 partition, "
                        rf"kernels: {b.kernels_compiled} compiled, {b.kernels_reused} from the "
                        rf"cache", lines[3]), lines
    assert lines[4].startswith("  compiled by tileopt: 1 partition")  # the same for both
    again = run((7,))  # a new graph: its kernels are in the cache
    [c] = again.graphs
    assert (c.kernels_compiled, c.kernels_reused) == (0, c.kernels), str(again)


def test_training_runs_eagerly(caplog: Any) -> None:
    torch.manual_seed(0)
    model = mlp()
    reference = mlp()
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend=tileopt.dynamo.backend, options=OPTIONS)
    x = randn(4, 16)
    with caplog.at_level(logging.INFO, logger="tileopt"):
        y = compiled(x)
    assert y.requires_grad  # PyTorch's autograd, not tileopt's kernels
    y.sum().backward()
    reference(x).sum().backward()
    close(y, reference(x))
    close(model[0].weight.grad, reference[0].weight.grad)
    [line] = [r.getMessage() for r in caplog.records if r.name == "tileopt"]
    assert "requires grad" in line


def test_report_says_why_a_graph_ran_eagerly() -> None:
    report = fallback.FallbackReport()
    compiled = torch.compile(mlp(), backend="tileopt", options={**OPTIONS, "report": report})
    compiled(randn(3, 16))  # grad mode, parameters that require grad
    assert "grad mode is on" in str(report) and "captured none" not in str(report), str(report)


def test_a_view_out_of_a_tuple_runs_eagerly_with_its_producer() -> None:
    # The partitioner keeps a getitem with unbind: both run eagerly, the rest compiles (the
    # same partition failed 16 times, then the whole graph ran eagerly).
    def f(x: Any) -> Any:
        return x.exp() * 2, x.unbind(1)[1]

    report = report_of(f, randn(3, 7))
    assert [op.op for op in report.eager] == ["Tensor.unbind"], str(report)
    assert "returns a view" in report.eager[0].reason
    assert len(report.compiled) == 1, str(report)


def test_a_tensor_indexed_by_a_computed_tensor_compiles() -> None:
    # w[experts] (a mixture of experts' weights): torch.fx's partitioner took the getitem for
    # a tuple's item and moved it between the partition of `experts` and none (w's) forever.
    def f(w: Any, x: Any) -> Any:
        experts = x.argmax(-1)
        return w[experts] * 2.0, x[:, :2] + 1.0

    report = report_of(f, randn(4, 8, 8), randn(5, 4))
    assert not report.eager and len(report.compiled) == 1, str(report)


def test_side_effects_keep_their_order() -> None:
    def f(x: Any, y: Any) -> Any:
        a = x * 2.0
        x.add_(1.0)  # in place: `a` reads x before, `b` after
        b = x * 3.0 + a
        with torch.no_grad():  # grad-mode changes in the graph
            c = torch.tanh(b)
        y.mul_(2.0)
        return b + c, y * 2.0, x.t()

    spy = Spy()
    compiled = torch.compile(f, backend=spy, options=OPTIONS)
    x, y = randn(4, 6), randn(4, 6)
    x1, y1, x2, y2 = x.clone(), y.clone(), x.clone(), y.clone()
    want = f(x1, y1)
    got = compiled(x2, y2)
    close(got, want)
    close((x2, y2), (x1, y1))
    assert got[2].untyped_storage().data_ptr() == x2.untyped_storage().data_ptr()  # a view
    [report] = spy.reports
    assert len(report.compiled) >= 2, str(report)
    assert {"Tensor.add_", "Tensor.mul_"} <= {op.op for op in report.eager}


def test_in_place_ops_on_the_graphs_tensors_compile() -> None:
    # In-place ops on tensors the graph made ran eagerly and split the graph: ResNet's
    # ReLU(inplace=True) kept every convolution from its activation.
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(16, 16)
            self.relu = torch.nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            y = self.relu(self.linear(x))
            y[:, 2:5] = 0.0
            y += 1.0
            z = y.clone()
            z.mul_(2.0).clamp_(min=2.5)
            h = y.half()
            h += x  # f32 + f16, kept in f16
            return z, h, F.silu(z, inplace=True)

    model = M().eval()
    report = report_of(model, randn(4, 16))
    assert not report.eager and len(report.compiled) == 1, str(report)
    ops = report.compiled[0].ops
    assert "operator.setitem" in ops and not any(op.endswith("_") for op in ops), ops

    def fills(x: Any, y: Any) -> Any:
        a = x * 2.0
        b = (x - 1.0).copy_(a[:, :1])
        c = (x + 1.0).fill_(3.0)
        d = (x * 3.0).zero_()
        return b + c + d + y.type(torch.float32) + x.T.T + x.mT.mT

    report = report_of(fills, randn(4, 6), randn(4, 6).double())
    assert not report.eager and len(report.compiled) == 1, str(report)


def test_an_indexed_view_changed_in_place_changes_its_tensor() -> None:
    # DeepSeek-V2 fills new_empty's halves through views: x[..., :d].copy_(a) changes x.
    def f(k: Any, a: Any, b: Any) -> Any:
        q = k.new_empty(2, 3, 8)
        q[..., :5].copy_(a)
        q[..., 5:] = b
        row = q[0]
        row.mul_(2.0)  # q[0] doubles too
        return q + 1.0, row

    report = report_of(f, randn(2, 3, 8), randn(2, 3, 5), randn(2, 3, 3))
    assert not report.eager and len(report.compiled) == 1, str(report)


def test_complex_rotary_embedding_compiles() -> None:
    # Meta's reference Llama (and Llama 4, DeepSeek-V2): a partition computes the complex
    # tensors it makes and reads itself through their parts.
    def rope(x: Any, angles: Any) -> Any:
        cis = torch.polar(torch.ones_like(angles), angles)
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * cis).flatten(2).type_as(x) * 2.0 + x

    angles = torch.outer(torch.arange(8.0), 1.0 / 10000 ** (torch.arange(0, 16, 2) / 16))
    report = report_of(rope, randn(3, 8, 16), angles)
    assert not report.eager and len(report.compiled) == 1, str(report)

    def exp(angles: Any) -> Any:  # complex exp: the chain runs eagerly, as a whole
        return torch.view_as_real(torch.exp(torch.polar(angles, angles))) * 2.0

    report = report_of(exp, angles)
    assert {op.op for op in report.eager} == {"torch.polar", "torch.exp", "torch.view_as_real"}


def test_unused_tensors_and_usage_logging_do_not_split_the_graph() -> None:
    # Hugging Face's caches make and drop torch.tensor(...), and Dynamo records torch's API
    # usage logging: both ran eagerly in order, and Mistral's graph was three partitions.
    def f(x: Any) -> Any:
        y = x.exp()
        torch.tensor([], dtype=torch.float32)
        torch._C._log_api_usage_once("python.nn_module")
        return y * 2.0

    report = report_of(f, randn(4, 6))
    assert not report.eager and len(report.compiled) == 1, str(report)


def test_in_place_ops_another_view_sees_run_eagerly() -> None:
    # The change must show through views made before it, in the graph's inputs and in
    # tensors the graph returns.
    def f(x: Any, w: Any) -> Any:
        y = x * 2.0
        row = y[0]  # a view of y, read after y changes
        y.add_(1.0)
        flat = (x * 3.0).view(-1)
        base = flat.view(4, 6)
        flat.mul_(2.0)  # changes `base`, which is returned
        w.sub_(1.0)  # a graph input
        return row * 1.0, base, w + 0.0

    spy = Spy()
    compiled = torch.compile(f, backend=spy, options=OPTIONS)
    x, w = randn(4, 6), randn(3)
    w1, w2 = w.clone(), w.clone()
    with torch.no_grad():
        close(compiled(x, w2), f(x, w1))
    close(w2, w1)
    [report] = spy.reports
    assert {"Tensor.add_", "Tensor.mul_", "Tensor.sub_"} <= {op.op for op in report.eager}


def test_in_place_activations_change_their_input() -> None:
    # inplace=True made no name end in "_": the call, its result unused, was dropped as pure.
    def f(x: Any, y: Any) -> Any:
        F.silu(y, inplace=True)
        F.hardtanh(x, -0.5, 0.5, True)
        return x * 2.0 + y

    compiled = torch.compile(f, backend="tileopt", options=OPTIONS)
    x, y = randn(4, 6), randn(4, 6)
    x1, y1, x2, y2 = x.clone(), y.clone(), x.clone(), y.clone()
    with torch.no_grad():
        close(compiled(x2, y2), f(x1, y1))
    close((x2, y2), (x1, y1))


def test_outputs_take_eager_strides() -> None:
    # A compiled partition returned contiguous tensors: the eager view after it failed, and
    # a channels-last model's output was contiguous.
    def f(x: Any) -> Any:
        y = torch.exp(x)
        return torch.cumprod(y, 0), y.t().view(-1)  # cumprod runs eagerly

    x = randn(4, 5).t()
    c = randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    with torch.no_grad():
        close(torch.compile(f, backend="tileopt", options=OPTIONS)(x), f(x))
        got = torch.compile(lambda t: t * 2.0 + 1.0, backend="tileopt", options=OPTIONS)(c)
    assert got.stride() == (c * 2.0 + 1.0).stride()
    close(got, c * 2.0 + 1.0)


def test_negative_zero_is_its_own_number() -> None:
    # Specialisations were keyed by ==, where -0.0 == 0.0: x / -0.0 reused x / 0.0's code.
    # (Dynamo itself bakes the first value it sees in the same way: 1.0 comes first here.)
    compiled = torch.compile(lambda x, b: x / b, backend="tileopt", options=OPTIONS)
    x = torch.tensor([1.0, -2.0])
    with torch.no_grad():
        compiled(x, 1.0)
        compiled(x, 0.0)
        assert compiled(x, -0.0).tolist() == (x / -0.0).tolist()


def test_enable_grad_inside_runs_eagerly() -> None:
    # Called under no_grad, a forward that turns grad on (forces from an energy) lost its
    # autograd history in tileopt's kernels.
    torch.manual_seed(0)
    net = mlp()

    def forces(x: Any) -> Any:
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(net(x).sum(), x)
        return -g

    x = randn(4, 16)
    with torch.no_grad():
        close(torch.compile(forces, backend="tileopt", options=OPTIONS)(x), forces(x))


def test_views_of_inputs_stay_views() -> None:
    def f(x: Any) -> Any:
        return x.view(-1), x.t(), (x * 2.0).view(-1), x.transpose(0, 1) * 2.0

    spy = Spy()
    compiled = torch.compile(f, backend=spy, options=OPTIONS)
    x = randn(4, 6)
    with torch.no_grad():
        got = compiled(x)
    close(got, f(x))
    for view in got[:2]:  # as in PyTorch, views of x: a change of x shows in them
        assert view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    [report] = spy.reports
    assert report.compiled and {"Tensor.view", "Tensor.t"} <= {op.op for op in report.eager}


# ---------------------------------------------------------------------------------------------
# tileopt.compile(fallback="eager"), tileopt.explain, TILEOPT_LOGS


def test_compile_with_fallback() -> None:
    torch.manual_seed(0)
    model = WithUnsupported("svd")
    x = randn(4, 16)
    with pytest.raises(tileopt.UnsupportedOperatorError) as info:
        tileopt.compile(model, (x,))
    assert info.value.op == "aten._linalg_svd"
    graph = tileopt.compile(model, (x,), fallback="eager")
    assert isinstance(graph, fallback.FallbackGraph) and graph.error.op == "aten._linalg_svd"
    with torch.no_grad():
        for args in ((x,), (randn(6, 16),)):
            close(graph(*args), model(*args))
    assert [op.op for op in graph.report.eager_ops] == ["torch.linalg.svd"] * 2
    assert len(graph.report.graphs) == 2 and all(g.compiled for g in graph.report.graphs)
    assert "aten._linalg_svd" in graph.summary()
    whole = tileopt.compile(lambda a: a * 2.0 + 1.0, (x,), fallback="eager")
    assert isinstance(whole, tileopt.CompiledGraph)  # compiled as one graph: as before
    with pytest.raises(tileopt.OptionError, match="fallback='later'"):
        tileopt.compile(model, (x,), fallback="later")


def test_explain() -> None:
    torch.manual_seed(0)
    model = WithUnsupported("sort")
    report = tileopt.explain(model, randn(4, 16), **OPTIONS)
    text = str(report)
    assert text.startswith("tileopt: 1 graph\n") and repr(report) == text, text
    assert "compiled by tileopt: 2 partitions" in text
    assert f"torch.sort at {_line(WithUnsupported, 'torch.sort(')}: not among" in text
    assert [p.kernels >= 1 for p in report.compiled] == [True, True]
    with pytest.raises(tileopt.OptionError):
        tileopt.explain(model, randn(4, 16), devices="emulator")


def test_fallback_logs(monkeypatch: Any, capsys: Any) -> None:
    def f(x: Any) -> Any:
        return torch.sort(x, dim=0).values

    monkeypatch.setenv("TILEOPT_LOGS", "fallback")
    handlers, level = list(fallback.logger.handlers), fallback.logger.level
    try:
        compiled = torch.compile(f, backend=tileopt.dynamo.backend, options=OPTIONS)
        x = randn(5, 3)
        close(compiled(x), f(x))
        err = capsys.readouterr().err
        assert re.search(r"^tileopt: graph \d+/\d+: torch\.sort at .*runs eagerly", err, re.M), err
    finally:
        fallback.logger.handlers[:] = handlers
        fallback.logger.setLevel(level)
    monkeypatch.setenv("TILEOPT_LOGS", "fallbacks")
    with pytest.raises(tileopt.OptionError, match="TILEOPT_LOGS"):
        tileopt.dynamo.backend(torch.fx.symbolic_trace(f), [x])
