"""``CompiledGraph``: specialisations, live parameters, input checks, stages and statistics.

Most tests replace the frontend and kernel formation with a fake that hands over a
hand-written tile module (with the kernels of test_hostcode.py, imported from there), so they
run without torch.export, torch-mlir or the ``tileopt-linalg-to-tile`` pass. The end-to-end
tests at the bottom use the real frontend and pass and skip, saying which is missing, until
both exist.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from test_hostcode import ADD2, SCALE1, TYPES
from tileopt.compiler import graph as graph_mod
from tileopt.compiler.graph import CompiledGraph, compile_graph, form_kernels
from tileopt.errors import ArgumentError, CompilationError, DeviceError, OptionError

torch = pytest.importorskip("torch")
nn = torch.nn

# The kernels of test_hostcode.py; kernel formation would give scale1 a note as well.
SCALE1_FUSED = SCALE1.replace(
    "%k: f32) {", '%k: f32) attributes {tile.fused = "generic x1: mul"} {'
)
assert SCALE1_FUSED != SCALE1

# The same kernel under other names: kernel formation may emit one kernel per launch.
ADD2_AGAIN = ADD2.replace("@add2", "@add2_again").replace("generic x1: add", "again")


def broadcast(name: str, n: int, m: int) -> str:
    """Host ops that view the 1-D argument ``%name`` (n elements) as m x n rows."""
    v = f"memref<{n}xf32, strided<[?], offset: ?>>"
    return f"""
    %{name}_base, %{name}_off, %{name}_size, %{name}_stride = memref.extract_strided_metadata
        %{name} : {v} -> memref<f32>, index, index, index
    %{name}_rows = memref.reinterpret_cast %{name}_base to offset: [%{name}_off],
        sizes: [{m}, {n}], strides: [0, %{name}_stride]
        : memref<f32> to memref<{m}x{n}xf32, strided<[0, ?], offset: ?>>"""


def bias_model_tile(m: int, n: int) -> str:
    """What kernel formation would make of BiasModel for x of shape (m, n)."""
    x = f"memref<{m}x{n}xf32, strided<[?, ?], offset: ?>>"
    v = f"memref<{n}xf32, strided<[?], offset: ?>>"
    rows = f"memref<{m}x{n}xf32, strided<[0, ?], offset: ?>>"
    buf = f"memref<{m}x{n}xf32>"
    return f"""{TYPES}module {{
{ADD2}{ADD2_AGAIN}{SCALE1_FUSED}
  func.func @forward(%x: {x}, %b: {v}, %o: {v}, %c: {v}) -> ({buf}, memref<{m * n}xf32>) {{
    %c1 = arith.constant 1 : index
    %cm = arith.constant {m} : index
    %cmn = arith.constant {m * n} : index
    %c256 = arith.constant 256 : index
    %two = arith.constant 2.0 : f32
    {broadcast("b", n, m)}{broadcast("o", n, m)}{broadcast("c", n, m)}
    %t0 = memref.alloc() : {buf}
    tile.launch @add2 grid(%cm, %c1, %c1) (%x, %b_rows, %t0) : {x}, {rows}, {buf}
    %t1 = memref.alloc() : {buf}
    tile.launch @add2_again grid(%cm, %c1, %c1) (%t0, %o_rows, %t1) : {buf}, {rows}, {buf}
    %t2 = memref.alloc() : {buf}
    tile.launch @add2 grid(%cm, %c1, %c1) (%t1, %c_rows, %t2) : {buf}, {rows}, {buf}
    %flat = memref.collapse_shape %t2 [[0, 1]] : {buf} into memref<{m * n}xf32>
    %out = memref.alloc() : memref<{m * n}xf32>
    %g = arith.ceildivsi %cmn, %c256 : index
    tile.launch @scale1 grid(%g) (%flat, %out, %two)
        : memref<{m * n}xf32>, memref<{m * n}xf32>, f32
    return %t2, %out : {buf}, memref<{m * n}xf32>
  }}
}}
"""


N = 37
CONSTANT = torch.linspace(-1, 1, N)


class BiasModel(nn.Module):
    """y = x + inner.bias + offset + CONSTANT; returns {"y": y, "z": 2 * y.flatten()}."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Module()
        self.inner.bias = nn.Parameter(torch.randn(N))
        self.register_buffer("offset", torch.randn(N))

    def forward(self, x: Any) -> dict[str, Any]:
        y = x + self.inner.bias + self.offset + CONSTANT.to(x.device)
        return {"y": y, "z": 2 * y.reshape(-1)}


@dataclass(frozen=True)
class FakeInput:
    """A GraphInput as tileopt.frontend describes one."""

    name: str
    kind: str
    target: Any
    dtype: Any
    shape: tuple[int, ...]
    value: Any = None


class FakeFrontend:
    """Imports BiasModel by writing its tile module; counts the imports."""

    def __init__(self) -> None:
        self.imports = 0

    def import_graph(self, model: Any, example_inputs: tuple[Any, ...]) -> Any:
        self.imports += 1
        (x,) = example_inputs
        m, n = x.shape
        return SimpleNamespace(
            fx_graph="graph():\n    %x : [num_users=1] = placeholder[target=x]\n",
            linalg=bias_model_tile(m, n),
            inputs=(
                FakeInput("x", "user", 0, torch.float32, (m, n)),
                FakeInput("p_inner_bias", "parameter", "inner.bias", torch.float32, (n,)),
                FakeInput("b_offset", "buffer", "offset", torch.float32, (n,)),
                FakeInput("c_lifted_tensor_0", "constant", "lifted_tensor_0", "f32", (n,),
                          CONSTANT),
            ),
            num_user_inputs=1,
            output_spec=("y", "z"),
            times={"export": 0.5, "torch-mlir": 0.25},
        )

    @staticmethod
    def unflatten_outputs(graph: Any, flat: list[Any]) -> dict[str, Any]:
        return dict(zip(graph.output_spec, flat, strict=True))

    @staticmethod
    def describe_location(loc: str) -> tuple[str | None, str | None]:
        return "aten.add.Tensor", "model.py:12"


def compiled(model: nn.Module, x: Any, **options: Any) -> tuple[CompiledGraph, FakeFrontend]:
    frontend = FakeFrontend()
    cg = CompiledGraph(model, (x,), frontend=frontend, formation=lambda linalg: linalg,
                       device="emulator", **options)
    return cg, frontend


def check(cg: CompiledGraph, model: nn.Module, x: Any) -> None:
    got = cg(x)
    want = model(x)
    assert set(got) == {"y", "z"}
    torch.testing.assert_close(got["y"], want["y"])
    torch.testing.assert_close(got["z"], want["z"])


@pytest.fixture(scope="module")
def bias_graph() -> tuple[CompiledGraph, FakeFrontend, BiasModel]:
    torch.manual_seed(0)
    model = BiasModel()
    cg, frontend = compiled(model, torch.randn(4, N))
    return cg, frontend, model


def test_outputs_match_the_model(bias_graph: Any) -> None:
    cg, _, model = bias_graph
    check(cg, model, torch.randn(4, N))
    check(cg, model, torch.randn(N, 4).t())  # any strides


def test_updating_weights_needs_no_recompile(bias_graph: Any) -> None:
    cg, frontend, model = bias_graph
    x = torch.randn(4, N)
    check(cg, model, x)
    imports = frontend.imports
    with torch.no_grad():
        model.inner.bias.add_(1.0)
    model.offset = torch.randn(2 * N)[::2]  # a new tensor, and not contiguous
    check(cg, model, x)
    assert frontend.imports == imports


def test_new_shapes_compile_a_specialisation_that_reuses_kernels(bias_graph: Any) -> None:
    cg, frontend, model = bias_graph
    check(cg, model, torch.randn(4, N))
    before, kernels = frontend.imports, cg.kernels
    check(cg, model, torch.randn(7, N))
    assert frontend.imports == before + 1
    assert (7, N) in [key[0] for key in cg.specialisations]
    assert "memref<7x37xf32" in cg.stages["tile"]
    # The kernels take any shapes: the new specialisation compiled none of them again.
    assert [id(k) for k in cg.kernels] == [id(k) for k in kernels]
    check(cg, model, torch.randn(4, N))
    assert frontend.imports == before + 1


def test_identical_kernels_are_compiled_once(bias_graph: Any) -> None:
    cg, _, _ = bias_graph
    assert list(cg.program.kernels) == ["add2", "add2_again", "scale1"]
    assert cg.program.kernels["add2"] is cg.program.kernels["add2_again"]
    assert [k.name for k in cg.kernels] == ["add2", "scale1"]


def test_stages_times_and_summary(bias_graph: Any) -> None:
    cg, _, _ = bias_graph
    cg(torch.randn(4, N))
    assert set(cg.stages) == {"fx", "linalg", "tile", "host", "ptx:add2", "ptx:add2_again",
                              "ptx:scale1"}
    assert cg.stages["host"] == cg.host_code
    assert 'launch("add2_again", (4, 1, 1), buf0, view1, buf1)' in cg.host_code
    assert "# arg1: parameter inner.bias float32[37]" in cg.host_code
    assert {"export", "torch-mlir", "formation", "codegen", "codegen:add2", "codegen:scale1",
            "host"} <= set(cg.times)
    summary = cg.summary()
    assert summary.splitlines()[0].startswith("CompiledGraph of BiasModel on emulator (sm_90)")
    assert re.search(r"add2 +registers +\d+ +PTX .*also launched as add2_again.*"
                     r"fused: generic x1: add", summary), summary
    assert "scale1" in summary and "fused: generic x1: mul" in summary
    assert repr(cg) == ("<CompiledGraph BiasModel device=emulator target=sm_90 "
                        "kernels=[add2, add2_again, scale1]>")


def test_emulator_statistics_of_the_last_call(bias_graph: Any) -> None:
    cg, _, _ = bias_graph
    x = torch.randn(4, N)
    cg(x)
    assert [s.kernel for s in cg.last_stats] == ["add2", "add2", "add2", "scale1"]
    assert cg.last_global_bytes > 0 and cg.last_sector_bytes >= cg.last_global_bytes
    # Inputs: x and three vectors; outputs: y and z.
    assert cg.last_min_bytes == 4 * (4 * N + 3 * N + 2 * 4 * N)


# ---------------------------------------------------------------------------------------------
# input checks


@pytest.mark.parametrize(("inputs", "message"), [
    ((), r"takes 1 tensor input \(x\), got 0"),
    ((torch.randn(4, N), torch.randn(4, N)), r"takes 1 tensor input \(x\), got 2"),
    ((torch.randn(4, N, dtype=torch.float64),),
     r"input 0 \(x\) has dtype torch.float64, but the graph was compiled for torch.float32"),
    ((torch.randn(N),), r"input 0 \(x\) has rank 1 \(shape \(37,\)\).*rank 2"),
    ((torch.empty(4, N, device="meta"),), r"input 0 \(x\) is on meta, but the graph runs on "
                                          r"emulator"),
    ((1.5,), r"input 0 \(x\) must be a torch.Tensor, got float"),
])
def test_wrong_inputs_are_argument_errors(bias_graph: Any, inputs: tuple[Any, ...],
                                          message: str) -> None:
    cg, _, _ = bias_graph
    with pytest.raises(ArgumentError, match=message):
        cg(*inputs)


def test_a_parameter_of_another_dtype_is_an_argument_error() -> None:
    model = BiasModel()
    cg, _ = compiled(model, torch.randn(4, N))
    model.inner.bias = nn.Parameter(model.inner.bias.detach().double())
    with pytest.raises(ArgumentError, match=r"parameter 'inner.bias' is now torch.float64"):
        cg(torch.randn(4, N))
    del model.inner.bias
    with pytest.raises(ArgumentError, match=r"no parameter 'inner.bias' any more"):
        cg(torch.randn(4, N))


def test_options_are_checked() -> None:
    model = BiasModel()
    with pytest.raises(OptionError, match=r"unknown kernel option 'num_wraps'"):
        compiled(model, torch.randn(4, N), num_wraps=4)
    with pytest.raises(OptionError, match=r"device='cpu'"):
        CompiledGraph(model, (torch.randn(4, N),), device="cpu", frontend=FakeFrontend())


def test_kernel_options_reach_every_kernel() -> None:
    cg, _ = compiled(BiasModel(), torch.randn(4, N), num_warps=2, maxnreg=32)
    assert {k.metadata.num_warps for k in cg.kernels} == {2}
    assert all(".maxnreg 32" in str(k.asm["ptx"]) for k in cg.kernels)


def test_device_cuda_without_a_driver_is_a_device_error() -> None:
    from tileopt.runtime import cuda

    if cuda.driver_available()[0]:
        pytest.skip("a CUDA driver works here")
    with pytest.raises(DeviceError, match="device='cuda'"):
        CompiledGraph(BiasModel(), (torch.randn(4, N),), device="cuda", frontend=FakeFrontend())


def test_on_cuda() -> None:
    from tileopt.runtime import cuda

    if not (torch.cuda.is_available() and cuda.driver_available()[0]):
        pytest.skip("needs a CUDA GPU, its driver and a CUDA build of torch")
    model = BiasModel().cuda()
    x = torch.randn(4, N, device="cuda")
    cg = CompiledGraph(model, (x,), frontend=FakeFrontend(), formation=lambda linalg: linalg)
    assert cg.device == "cuda"
    check(cg, model, x)
    assert cg.last_stats == []
    with pytest.raises(ArgumentError, match=r"input 0 \(x\) is on cpu"):
        cg(x.cpu())


def test_the_default_device_is_the_emulator_for_cpu_inputs() -> None:
    frontend = FakeFrontend()
    cg = CompiledGraph(BiasModel(), (torch.randn(4, N),), frontend=frontend,
                       formation=lambda linalg: linalg)
    assert cg.device == "emulator"


def test_a_host_function_with_other_arguments_than_the_graph_is_an_error() -> None:
    frontend = FakeFrontend()

    def formation(linalg: str) -> str:
        return re.sub(r", %c: memref<37xf32, strided<\[\?\], offset: \?>>", "", linalg, count=1)

    with pytest.raises(CompilationError):
        CompiledGraph(BiasModel(), (torch.randn(4, N),), frontend=frontend, formation=formation)


def test_kernel_formation_errors() -> None:
    from tileopt import ir
    from tileopt.compiler.kernel import _contexts

    with _contexts.get(), ir.Location.unknown():
        with pytest.raises(CompilationError, match=r"no-such-pass"):
            form_kernels("module {}", pipeline="builtin.module(no-such-pass)")
        with pytest.raises(CompilationError, match=r"does not parse"):
            form_kernels("module { this is not IR }")


def test_unsupported_operator_errors_carry_the_op_and_source() -> None:
    err = graph_mod._unsupported_error("cannot", "aten.cumsum", "model.py:3")
    assert isinstance(err, CompilationError)
    assert (err.op, err.source) == ("aten.cumsum", "model.py:3")


# ---------------------------------------------------------------------------------------------
# end to end: the real frontend and kernel formation


def _pass_registered() -> bool:
    from tileopt import ir
    from tileopt.passmanager import PassManager

    with ir.Context():
        try:
            PassManager.parse(graph_mod.LINALG_TO_TILE_PIPELINE)
        except ValueError:
            return False
    return True


def needs_frontend_and_pass() -> None:
    if importlib.util.find_spec("tileopt.frontend") is None:
        pytest.skip("tileopt.frontend (torch.export + torch-mlir import) is not there yet")
    if not _pass_registered():
        pytest.skip("the tileopt-linalg-to-tile pass is not registered in this build yet")


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(37, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))


def test_end_to_end_mlp_weights_and_shapes() -> None:
    needs_frontend_and_pass()
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(5, 37)
    cg = compile_graph(model, (x,), device="emulator")
    torch.testing.assert_close(cg(x), model(x), rtol=1e-4, atol=1e-4)
    assert cg.kernels and "ptx:" + cg.program.host.kernel_names[0] in cg.stages
    with torch.no_grad():
        model.fc1.weight.mul_(0.5)
    torch.testing.assert_close(cg(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(cg.specialisations) == 1
    x2 = torch.randn(3, 37)
    torch.testing.assert_close(cg(x2), model(x2), rtol=1e-4, atol=1e-4)
    assert len(cg.specialisations) == 2
    with pytest.raises(ArgumentError, match=r"input 0"):
        cg(x.double())


def test_end_to_end_softmax_and_structured_outputs() -> None:
    needs_frontend_and_pass()

    def f(x: Any, y: Any) -> Any:
        s = torch.softmax(x, dim=-1)
        return {"softmax": s, "sum": (s + y, y.t())}

    x, y = torch.randn(6, 37), torch.randn(6, 37)
    cg = compile_graph(f, (x, y))
    got, want = cg(x, y), f(x, y)
    torch.testing.assert_close(got["softmax"], want["softmax"])
    torch.testing.assert_close(got["sum"][0], want["sum"][0])
    torch.testing.assert_close(got["sum"][1], want["sum"][1])
    assert cg.last_stats and cg.last_global_bytes > 0
    assert "launch(" in cg.host_code
    assert {"formation", "codegen", "host"} <= set(cg.times)


def test_outputs_share_memory_where_eager_outputs_do() -> None:
    # x.clone() and x * 1.0 fold to x: the host code returned x itself, so a later in-place
    # change of the input changed the "copy" too (and the other way round).
    needs_frontend_and_pass()

    def f(x: Any) -> Any:
        y = x.exp()
        return x.clone(), x * 1.0, x.view(-1), x, y, y.clone(), y.t()

    x = torch.randn(4, 6)
    got = compile_graph(f, (x,))(x)
    memory = [t.untyped_storage().data_ptr() for t in (x, *got)]
    assert memory[1:4] == [memory[1], memory[2], memory[0]] and len(set(memory[:3])) == 3
    assert memory[4] == memory[0] and memory[7] == memory[5] != memory[6]
    for a, b in zip(got, f(x), strict=True):
        torch.testing.assert_close(a, b)


def test_end_to_end_unsupported_operator() -> None:
    needs_frontend_and_pass()
    from tileopt.errors import UnsupportedOperatorError  # type: ignore[attr-defined]

    def f(x: Any) -> Any:
        return torch.cumsum(x, dim=0)  # longer than the masked-sum decomposition takes

    with pytest.raises(UnsupportedOperatorError, match=r"cumsum"):
        compile_graph(f, (torch.randn(5000),))
