"""PyTorch models through ``tileopt.compile(model, inputs)``, run in the PTX emulator and
compared with eager PyTorch on the example inputs and on a second set of inputs (nothing is
baked into the compiled graph). The blocks and their parts are ``tileopt.testing.models``."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
pytest.importorskip("torch_mlir", reason="the frontend needs torch-mlir (requirements.txt)")
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import tileopt  # noqa: E402
from tileopt.compiler.graph import linalg_to_tile_pipeline  # noqa: E402
from tileopt.testing.models import (  # noqa: E402
    ConvNeXtBlock,
    GPTBlock,
    InvertedResidual,
    LlamaBlock,
    ResNetBlock,
    RMSNorm,
    TopTwoMoE,
    causal_attention,
    random_layer_norm,
)

TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _close(got: Any, want: Any, tol: float) -> None:
    if isinstance(want, tuple | list):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _close(g, w, tol)
        return
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if want.dtype == torch.bool or not want.is_floating_point():
        assert torch.equal(got, want)
        return
    # NaNs and infinities must be where eager has them; the finite values set the scale.
    finite = want.detach()[torch.isfinite(want)]
    scale = max(float(finite.abs().max()) if finite.numel() else 0.0, 1.0)
    torch.testing.assert_close(got.float(), want.float(), atol=tol * scale * 4, rtol=tol * 4,
                               equal_nan=True)


def check(
    model: Callable[..., Any],
    make_inputs: Callable[[], Sequence[Any]],
    *,
    tol: float | None = None,
    max_kernels: int | None = None,
) -> Any:
    """Compiles ``model`` for the inputs ``make_inputs()`` gives, runs it in the emulator on
    those and on a second set, compares with eager PyTorch; returns the CompiledGraph."""
    torch.manual_seed(0)
    inputs = tuple(make_inputs())
    graph = tileopt.compile(model, inputs)
    with torch.no_grad():
        for args in (inputs, tuple(make_inputs())):
            want = model(*args)
            got = graph(*args)
            dtype = next((a.dtype for a in args if a.is_floating_point()), torch.float32)
            _close(got, want, tol if tol is not None else TOL.get(dtype, 2e-5))
    if max_kernels is not None:
        assert len(graph.program.host.kernel_names) <= max_kernels, graph.summary()
    return graph


def randn(*shape: int, dtype: Any = torch.float32) -> Any:
    return torch.randn(*shape).to(dtype)


# ---------------------------------------------------------------------------------------------
# elementwise and broadcasting


ELEMENTWISE: dict[str, Callable[..., Any]] = {
    "arith": lambda x, y: (x + y) * (x - y) / (y.abs() + 1.0),
    "pow": lambda x, y: x.pow(2) + x.abs().pow(1.5) + torch.pow(y.abs() + 1, 0.5),
    "exp_log": lambda x, y: torch.exp(x) + torch.log(y.abs() + 1e-3),
    "sqrt_rsqrt": lambda x, y: torch.sqrt(x.abs()) + torch.rsqrt(y.abs() + 0.5),
    "tanh_sigmoid": lambda x, y: torch.tanh(x) * torch.sigmoid(y),
    "relu_silu": lambda x, y: F.relu(x) + F.silu(y),
    "gelu": lambda x, y: F.gelu(x) + F.gelu(y, approximate="tanh"),
    "where": lambda x, y: torch.where(x > y, x, y * 2),
    "masked_fill": lambda x, y: x.masked_fill(y < 0, -1e4),
    "compare": lambda x, y: (x >= y) | (x < -1.0),
    "casts": lambda x, y: (x * 10).to(torch.int32).to(torch.float32) + y.to(torch.float16).float(),
    # T5's relative position buckets take the abs of integers.
    "int_abs": lambda x, y: ((x - y) * 10).to(torch.int32).abs(),
}


@pytest.mark.parametrize("shape", [(37,), (4, 37), (3, 5, 1000)], ids=str)
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise(name: str, shape: tuple[int, ...]) -> None:
    f = ELEMENTWISE[name]
    graph = check(f, lambda: (randn(*shape), randn(*shape[-1:])), max_kernels=1)
    assert len(graph.kernels) == 1


def test_int8_by_python_integers() -> None:
    # torch-mlir's lowering of these forms on int8 crashed the process (_decompositions).
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x * 2, x - 1, x // 3, x % 3, x.sub(1, alpha=2), (x * 3).float()

    check(f, lambda: (torch.randint(-128, 128, (3, 37), dtype=torch.int8),))


def test_int8_with_0d_tensors_and_scalar_forms() -> None:
    # int8 with a 0-d int64 tensor crashed the process (torch-mlir), and the scalar forms of
    # |, ^ and fmod had no lowering (_decompositions).
    def f(x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * t, x & t, t - x, x % t, torch.maximum(x, t), x * torch.tensor(300),
                x | 3, x ^ 5, x.fmod(3), x.fmod(2.5), y.fmod(-1.5), (y > 0) | True)

    check(f, lambda: (torch.randint(-128, 128, (3, 37), dtype=torch.int8),
                      torch.randint(1, 100, ()), randn(4, 9) * 4))


def test_int8_products_and_extremes() -> None:
    # torch-mlir's lowering of int8 matrix products and whole-tensor max/min crashed the
    # process (_decompositions); they wrap as torch's do.
    def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
          w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (a @ b, torch.bmm(c, c.transpose(1, 2)), c @ b, torch.addmm(b[0], a, b),
                torch.einsum("ij,jk->ik", a, b), F.conv1d(c, w), a.max(), a.min())

    def inputs() -> tuple[torch.Tensor, ...]:
        def int8(*shape: int) -> torch.Tensor:
            return torch.randint(-128, 128, shape, dtype=torch.int8)

        return int8(33, 40), int8(40, 17), int8(2, 5, 40), int8(3, 5, 4)

    check(f, inputs)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_integer_negation_and_floor_division(dtype: torch.dtype) -> None:
    # torch-mlir computed both through floats: int32 past 2^24 and int64 past 2^53 lost
    # digits, -MIN and MIN // -1 saturated to MAX (torch wraps), int8 // int8 did not compile.
    info = torch.iinfo(dtype)

    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (-x, torch.neg(x[0]), x // y, torch.div(x, y, rounding_mode="floor"),
                torch.floor_divide(x, 3), x // -4, x // y[2])

    def inputs() -> tuple[torch.Tensor, ...]:
        x = torch.randint(info.min, info.max, (4, 33), dtype=dtype)
        x[0, :4] = torch.tensor([info.min, info.max, info.min + 1, -7])
        y = torch.randint(-9, 9, (4, 33), dtype=dtype)
        y[y == 0] = 1
        y[0, :4] = torch.tensor([-1, -1, 2, -2])
        y[0, 2] = 3
        return x, y

    check(f, inputs)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64], ids=str)
def test_integer_powers_float_clamps_and_isfinite(dtype: torch.dtype) -> None:
    # torch-mlir lowers none of these forms (x ** 2 of an integer tensor, clamp of one to
    # float bounds, isfinite).
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x ** 2, torch.square(x), x ** 0, x.pow(7), torch.clamp(x, -2.5, 3.5),
                x.clamp(min=0.5), x.abs() ** 0.5, torch.isfinite(x), torch.isfinite(y / x))

    check(f, lambda: (torch.randint(-20, 20, (3, 37), dtype=dtype), randn(3, 37)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_shifts_by_any_amount(dtype: torch.dtype) -> None:
    # Shift amounts past the width or negative give torch's 0 (left, and right when unsigned)
    # or sign (right); torch-mlir lowers them to arith shifts, whose result is poison there,
    # and int64 amounts of 2^32 and more shifted by their low 32 bits. x << s of tensors and
    # the scalar forms of bitwise_*_shift had no lowering (_decompositions).
    bits = torch.iinfo(dtype).bits

    def f(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x << s, x >> s, torch.bitwise_left_shift(x, s), torch.bitwise_right_shift(x, s),
                torch.bitwise_left_shift(x, 3), torch.bitwise_right_shift(x, bits + 1),
                torch.bitwise_left_shift(5, s), x << 2, x >> 1)

    def inputs() -> tuple[torch.Tensor, ...]:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (3, 37), dtype=dtype)
        amounts = [0, 1, bits - 1, bits, bits + 1, -1, 2 * bits + 3]
        if dtype == torch.int64:
            amounts += [2**32, 2**32 + 1, -(2**40)]
        pick = torch.randint(0, len(amounts), (3, 37))
        return x, torch.tensor(amounts, dtype=dtype)[pick]

    check(f, inputs)


@pytest.mark.parametrize(("target", "instruction", "copy"), [
    ("sm_90", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "cp.async.cg.shared.global"),
    ("sm_90a", "wgmma.mma_async.sync.aligned.m64n", "cp.async.bulk.tensor.2d"),
])
def test_int8_matmuls_run_on_tensor_cores(target: str, instruction: str, copy: str) -> None:
    """``torch._int_mm`` (int8 products summed in int32, a quantized linear layer's) and int8
    ``a @ b`` / ``addmm`` (through it, rounded back to int8) form one matmul kernel each,
    whose tile.dot of i8 runs on tensor cores; a K-major weight (``w.t()``) is copied as it
    is (cp.async, TMA on sm_90a), exact on odd shapes."""

    def int8(*shape: int) -> torch.Tensor:
        return torch.randint(-128, 128, shape, dtype=torch.int8)

    models: list[tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = [
        (lambda x, w: torch._int_mm(x, w.t()), lambda: (int8(70, 96), int8(48, 96))),
        (lambda x, w: torch._int_mm(x, w) * 3 - 5, lambda: (int8(33, 64), int8(64, 80))),
        (lambda a, b: a @ b, lambda: (int8(33, 40), int8(40, 17))),
        (lambda x, a, b: torch.addmm(x, a, b, beta=3, alpha=-2),
         lambda: (int8(65, 18), int8(65, 37), int8(37, 18))),
    ]
    for model, inputs in models:
        torch.manual_seed(0)
        args = inputs()
        graph = tileopt.compile(model, args, target=target)
        (kernel,) = [name for name in graph.program.host.kernel_names if "matmul" in name]
        ptx = graph.stages[f"ptx:{kernel}"]
        assert instruction in ptx and ".s8" in ptx
        if model is models[0][0]:
            assert copy in ptx
        for xs in (args, inputs()):
            assert torch.equal(graph(*xs), model(*xs))


@pytest.mark.parametrize(("target", "tensor_cores"), [
    ("sm_80", False), ("sm_89", True), ("sm_90a", True),
])
def test_fp8_matmuls_run_on_fp8_tensor_cores(target: str, tensor_cores: bool) -> None:
    """fp8 tensors (``float8_e4m3fn``, ``float8_e5m2``): ``torch._scaled_mm`` (torchao's
    float8 linear layer: per-tensor and row-wise scales, a bias, a bf16, f32 or fp8 result) and
    the product of fp8 values converted to f32 form one matmul kernel each whose tile.dot
    takes the fp8 operands as they are, on tensor cores from sm_89 (CUDA cores before);
    a weight-only fp8 layer (the weight dequantized into an f32 product) too."""
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2

    def fp8(dtype: torch.dtype, *shape: int) -> torch.Tensor:
        return (torch.randn(*shape) * 4).to(dtype)

    # Each model with its inputs and the fp8 types of its dot (None: an f32 one).
    models: list[tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]],
                       str | None]] = [
        (lambda a, b: a.float() @ b.float(), lambda: (fp8(e4, 70, 96), fp8(e5, 96, 48)),
         "e4m3.e5m2"),
        (lambda x, w, sa, sb: torch._scaled_mm(x, w.t(), sa, sb, out_dtype=torch.bfloat16),
         lambda: (fp8(e4, 33, 64), fp8(e4, 80, 64), torch.tensor(0.25), torch.tensor(3.0)),
         "e4m3.e4m3"),
        (lambda x, w, sa, sb, bias: torch._scaled_mm(x, w.t(), sa, sb, bias,
                                                      out_dtype=torch.float32),
         lambda: (fp8(e4, 48, 32), fp8(e4, 16, 32), torch.rand(48, 1), torch.rand(1, 16),
                  torch.randn(16)), "e4m3.e4m3"),
        (lambda x, w, sa, sb: torch._scaled_mm(x, w.t(), sa, sb),  # an e4m3 result
         lambda: (fp8(e4, 32, 64), fp8(e4, 32, 64), torch.tensor(0.5), torch.tensor(0.5)),
         "e4m3.e4m3"),
        (lambda x, w: torch.relu(x @ w.float().t() * 0.5),
         lambda: (torch.randn(8, 64), fp8(e4, 40, 64)), None),
    ]
    for model, inputs, types in models:
        torch.manual_seed(0)
        args = inputs()
        graph = tileopt.compile(model, args, target=target)
        names = graph.program.host.kernel_names
        (kernel,) = [name for name in names if "matmul" in name]
        # The fp8 products are one kernel: the widenings in the product, the scales and
        # the bias in its epilogue.
        assert types is None or len(names) == 1, names
        ptx = graph.stages[f"ptx:{kernel}"]
        assert ("mma" in ptx) == (tensor_cores and types is not None)
        if tensor_cores and types is not None:  # mma.sync or wgmma of the fp8 types
            assert f".f32.{types}" in ptx
        for xs in (args, inputs()):
            got, want = graph(*xs).float(), model(*xs).float()
            # The same exact products summed in f32 (torch's CPU kernel scales its operands
            # first), then one rounding to the result's type: at most a unit apart there.
            eps = torch.finfo(model(*xs).dtype).eps
            torch.testing.assert_close(got, want, atol=1e-5 * float(want.abs().max()), rtol=eps)


def _fp8_conversions() -> dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]]:
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    gen = torch.Generator().manual_seed(4)
    a = (torch.randn(16, 32, generator=gen) * 64).to(e4)
    b = (torch.randn(16, 32, generator=gen) * 64).to(e4)
    mask = torch.rand(16, 32, generator=gen) > 0.5
    return {
        "where": (lambda m, a, b: torch.where(m, a, b), (mask, a, b)),
        "cat": (lambda a, b: torch.cat([a, b.t().contiguous().t()], 0), (a, b)),
        "to_f16": (lambda a: a.to(torch.float16) * 2, (a,)),
        "to_bf16": (lambda a: a.to(torch.bfloat16), (a,)),
        "to_int": (lambda a: a.to(torch.int32), (a,)),
        "to_bool": (lambda a: a.to(torch.bool), (a,)),
        "from_int": (lambda x: x.to(e5), (torch.randint(-70000, 70000, (16, 32),
                                                        generator=gen),)),
        "from_bool": (lambda m: m.to(e4), (mask,)),
        "from_f64": (lambda x: x.to(e4), (torch.randn(16, 32, dtype=torch.float64,
                                                      generator=gen) * 300,)),
        "e4m3_to_e5m2": (lambda a: a.to(e5), (a,)),
        "e5m2_to_e4m3": (lambda x: (x * 8).to(e5).to(e4), (torch.randn(16, 32, generator=gen),)),
    }


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(_fp8_conversions()))
def test_fp8_tensors_move_and_convert_as_torch(target: str, case: str) -> None:
    """fp8 tensors are selected, concatenated, transposed and converted to and from other
    floats, integers and bools (through f32 where no instruction converts them) to torch's
    bits: in software on sm_80, by cvt on sm_90."""
    model, args = _fp8_conversions()[case]
    graph = tileopt.compile(model, args, target=target)
    got, want = graph(*args), model(*args)
    assert got.dtype == want.dtype
    if want.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------
# reductions


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize(("shape", "dim", "keepdim"), [
    ((37,), 0, False), ((4, 37), 1, True), ((4, 37), 0, False), ((3, 5, 1000), -1, False),
    ((3, 5, 7), (0, 2), True),
], ids=str)
def test_reductions(op: str, shape: tuple[int, ...], dim: Any, keepdim: bool) -> None:
    def f(x: Any) -> Any:
        return getattr(torch, op)(x * 2.0, dim=dim, keepdim=keepdim)

    check(f, lambda: (randn(*shape),), max_kernels=1)


def test_reductions_over_empty_dimensions() -> None:
    # The padding of an empty dimension was reduced as it was read (zeros): prod gave 0 and
    # all False (torch: 1 and True).
    def f(e: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (e.prod(1), e.prod(), e.all(1), e.all(), e.any(1), e.sum(1), e.mean(1),
                torch.logsumexp(e, 1), i.prod(1), i.sum(0))

    check(f, lambda: (torch.zeros(4, 0), torch.ones(3, 0, dtype=torch.int32)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_sums_accumulate_in_f32(dtype: torch.dtype) -> None:
    # As torch's kernels: one rounding at the end. Accumulated in f16, a row of 4,096 came
    # out up to 11 ulps from eager's.
    x = randn(8, 4096, dtype=dtype)
    for f in (lambda x: x.sum(-1), lambda x: x.mean(-1, keepdim=True), lambda x: x.sum()):
        got, want = tileopt.compile(f, (x,))(x), f(x)
        assert got.dtype == want.dtype
        ulp = torch.finfo(dtype).eps * want.double().abs()
        assert ((got.double() - want.double()).abs() <= ulp).all()


def test_python_floats_beside_float64_tensors_stay_exact() -> None:
    # torch-mlir rounded the scalar to f32 in these forms: 0.1 - 1.0 was -0.8999999985 and
    # trunc(1 / 0.1) 9.
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (0.1 - x, torch.div(x, 0.1, rounding_mode="trunc"), x - 0.1, x % 0.3,
                torch.remainder(x, 0.3), torch.fmod(x, 0.5), x.float() - 0.1)

    check(f, lambda: (torch.tensor([1.0, 3.0, 1e10, -2.5], dtype=torch.float64),), tol=0.0)


def _assert_same_values(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal bit for bit but for NaN payloads: the same NaNs, values and signs of zero."""
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = want.isnan() if want.is_floating_point() else torch.zeros_like(want, dtype=torch.bool)
    if want.is_floating_point():
        assert torch.equal(got.isnan(), nan)
        assert torch.equal(got[~nan].signbit(), want[~nan].signbit())
    assert torch.equal(got[~nan], want[~nan]), (got[~nan], want[~nan])


def _check_same_values(f: Callable[..., Any], args: Sequence[torch.Tensor]) -> None:
    """Compiles ``f`` for ``args`` and checks its outputs on them against eager's bit for
    bit (:func:`_assert_same_values`)."""
    for got, want in zip(tileopt.compile(f, args)(*args), f(*args), strict=True):
        _assert_same_values(got, want)


def _wide_floats(n: int, dtype: torch.dtype) -> torch.Tensor:
    """Values from 1e-3 to 1e7 in magnitude, with signed zeros, infinities and NaN."""
    x = torch.randn(n, dtype=torch.float64) * 10.0 ** torch.randint(-3, 8, (n,))
    x[::17], x[::19], x[::23], x[::29], x[::31] = 0.0, -0.0, math.inf, -math.inf, math.nan
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=str)
def test_float_fmod_remainder_and_floor_division_equal_eager(dtype: torch.dtype) -> None:
    # fmod was x - trunc(x / y) * y (fmod(1e10, 3.3) gave 323.7 for 0.296; NVPTX expands
    # frem the same way), x // y floor(x / y) (1.0 // 0.1 was 10 for 9, inf // 2 inf for
    # NaN); f16 and bf16 floor division rounds every step, but by one value in f32.
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.fmod(x, y), torch.remainder(x, y), x // y,
                torch.div(x, y, rounding_mode="floor"), torch.fmod(x, 0.1), x % -2.5,
                x // 0.1, 0.1 // y, x // y[3], torch.fmod(x, y[5]))

    torch.manual_seed(0)
    for _ in range(2):
        x, y = _wide_floats(700, dtype), _wide_floats(700, dtype)
        x[:4] = torch.tensor([1e10, 1.0, 5.3, -7.0]).to(dtype)
        y[:4] = torch.tensor([3.3, 0.1, 2.0, -2.5]).to(dtype)
        y[3], y[5] = 0.3, -2.7
        _check_same_values(f, (x, y))


def test_results_with_no_elements() -> None:
    # torch-mlir's lowering of a reshape with a zero dimension divided by zero (SIGFPE), a
    # result it folded to an empty tensor aborted kernel formation, and a slice starting at
    # the end of its dimension failed there.
    def f(x: torch.Tensor, e: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x[2:] * 2, x[:, 3:], x.narrow(1, 3, 0) + 1, F.pad(x, (-3, 0)) + 1,
                x.repeat(0, 2), x.repeat_interleave(0, dim=0), x[:, 3:].reshape(-1),
                e + 1, e.sum(0), e.sum(1), torch.softmax(e, 0), e.amax(0), r.reshape(-1),
                r.flatten(), x.sum() + e.sum())

    check(f, lambda: (randn(2, 3), randn(3, 0), randn(0, 6)))


def test_reductions_with_a_dtype_and_of_0d_tensors_equal_eager() -> None:
    # torch-mlir summed f32 as f16 in f16 (off by ulps), bools as 1-bit integers (their
    # parity), crashed the process on sum(dtype=int8) of another type, summed f16 squares
    # in f16 for a norm (inf), and never returned from a softmax of a 0-d tensor.
    def f(x: torch.Tensor, i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.sum(1, dtype=torch.float16), x.sum(dtype=torch.bfloat16),
                x.mean(1, dtype=torch.float16), i.sum(1, dtype=torch.int8),
                x.sum(0, dtype=torch.int8), i.prod(1, dtype=torch.int8),
                (x > 0).sum(1, dtype=torch.bool), x.sum(1, dtype=torch.bool),
                x.prod(0, dtype=torch.bool), torch.linalg.vector_norm(h, dim=1),
                torch.norm(h, 3.0, dim=1), F.normalize(h, dim=1), torch.softmax(x[0, 0], 0),
                torch.log_softmax(x[1, 1], -1), (x > 0) + True)

    def inputs() -> tuple[torch.Tensor, ...]:
        x = torch.randn(4, 256) * 100
        x[3, 7:] = 0.0
        return x, torch.randint(-2**40, 2**40, (4, 256)), (torch.randn(4, 256) * 100).half()

    torch.manual_seed(0)
    _check_same_values(f, inputs())


def test_maxima_over_a_dimension_of_size_0_are_an_error() -> None:
    # As in eager; the result was -inf (or index 0). Over other dimensions they compile.
    x = torch.randn(3, 0)
    for f in (lambda t: t.amax(1), lambda t: t.max(1), lambda t: t.argmin(1),
              lambda t: t.max(), lambda t: torch.argmax(t)):
        with pytest.raises((IndexError, RuntimeError)):
            f(x)
        with pytest.raises(tileopt.ExportError, match="reduc"):
            tileopt.compile(f, (x,))
    check(lambda t: (t.amax(0), t.min(0).values), lambda: (randn(3, 0),))


def test_variance_of_integers_is_an_error() -> None:
    # As in eager (RuntimeError); the variance was a truncated integer.
    x = torch.randint(-9, 9, (4, 8))
    with pytest.raises(RuntimeError):
        torch.var(x, 1)
    for f in (lambda t: torch.var(t, 1), lambda t: torch.std(t), lambda t: torch.var_mean(t)):
        with pytest.raises(tileopt.ExportError, match="floating"):
            tileopt.compile(f, (x,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_tensor_times_a_float_rounds_once(dtype: torch.dtype) -> None:
    # torch multiplies and divides f16 and bf16 by a number in f32, rounding the product
    # once; torch-mlir rounded the number to the half type first (x * 1e5 was inf).
    def f(x: torch.Tensor, s: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x * 0.1, x / 3.3, 0.7978845608 * x, x * 1e5, x / 1e5, x * s, x / d, 2.5 / x,
                x * 3, x * 100000, x + 0.1)

    torch.manual_seed(0)
    _check_same_values(f, ((torch.randn(3, 300) * 10).to(dtype), torch.tensor(0.1),
                           torch.tensor(3.3, dtype=torch.float64)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_elu_powers_rounding_and_trunc_keep_eager_edges(dtype: torch.dtype) -> None:
    # torch-mlir's elu was max(0, x) + min(0, exp(x) - 1) (elu(-1e-10) was 0, elu(-0.0) 0),
    # its x ** 0.5 C's pow ((-0.0) ** 0.5 was 0, (-inf) ** 0.5 inf), its half round(x, 2)
    # scaled in the half type (f16 round(10000., 2) was inf), its trunc(-0.0) 0.
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (F.elu(x), F.selu(x), F.celu(x, 0.5), x ** 0.5, x ** -0.5, x ** 2, x ** 3,
                x ** -1, x ** -2, torch.round(x, decimals=2), torch.round(x.half(), decimals=2),
                torch.round(x, decimals=-1), torch.trunc(x), torch.frac(x))

    x = torch.tensor([-1e-10, -1e-7, -0.0, 0.0, -1.0, 2.205078125, -20.0, math.nan, math.inf,
                      -math.inf, 10000.0, 105.0625, -2.5, 1e-3, 7.0]).to(dtype)
    for got, want in zip(tileopt.compile(f, (x,))(x), f(x), strict=True):
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan) and torch.equal(got.signbit()[~nan],
                                                               want.signbit()[~nan])
        torch.testing.assert_close(got, want, rtol=4 * torch.finfo(want.dtype).eps, atol=0,
                                   equal_nan=True)


def test_comparisons_with_scalars_of_another_kind_equal_eager() -> None:
    # torch-mlir folded a constant compared with a scalar from the wrong bits
    # (scalar_tensor(2.0) == 2 was False, and it crashed the process), in double, and
    # without wrapping; it compared an integer tensor with a float exactly where torch
    # rounds the integer to float32; and it folded x == x to True where x is NaN.
    def f(x: torch.Tensor, i: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        two, tenth = torch.scalar_tensor(2.0), torch.scalar_tensor(0.1)
        return (x.ne(0) & (two == 2), x.ne(0) & (tenth < 0), x.ne(0) & (tenth >= 1),
                x.ne(0) & (torch.scalar_tensor(2**24) < 2**24 + 1),
                x.ne(0) & (torch.scalar_tensor(True) == 1), x.ne(0) & (two < 16777217),
                x == x, x != x, i < 0.5, i == 16777217.0, i.to(torch.int8) == 258,
                i.to(torch.int8) < 16777217, b == 1, b > 0.5, b < True, x.half() == 1e10,
                x.bfloat16() == 1.00390625, x < 16777217)

    x = torch.tensor([1.0, math.nan, 16777216.0, -0.1, 1.0e10, 2.0, 0.5])
    i = torch.tensor([16777217, 16777216, 0, -3, 2, 2**31 - 1, -(2**31)], dtype=torch.int32)
    _check_same_values(f, (x, i, i % 2 == 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_nan_propagates_through_maxima_and_clamps(dtype: torch.dtype) -> None:
    # torch-mlir's compare-and-select lost NaN: maximum(nan, 1) was 1, clamp(nan, -1, 1) -1,
    # relu6(nan) 0.
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.maximum(x, y), torch.minimum(x, y), torch.clamp(x, -1.0, 1.0),
                torch.clamp(x, min=y), torch.clamp(x, y, y + 1), x.clamp_max(0.5),
                torch.clamp(x, 2.0, -1.0), F.hardtanh(x), F.relu6(x), F.hardsigmoid(x),
                F.hardswish(x))

    def inputs() -> tuple[torch.Tensor, ...]:
        x, y = randn(4, 37, dtype=dtype) * 5, randn(4, 37, dtype=dtype) * 5
        x[0, :3], y[0, 1], y[2, :3] = float("nan"), float("nan"), float("nan")
        x[1, 1], x[1, 2] = float("inf"), -float("inf")
        return x, y

    torch.manual_seed(0)
    args = inputs()
    for got, want in zip(tileopt.compile(f, args)(*args), f(*args), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_tanh_gelu_takes_torchs_constants() -> None:
    # torch-mlir's lowering took sqrt(2 / pi) as 0.797724: f32 results 5.1e-5 from eager near
    # x = 1.3 (where eager is 4e-7 from f64). Now as close as tanh's own last bits allow
    # (1 + tanh cancels below x = -3: 1.5e-7 there).
    x = torch.linspace(-8, 8, 4001)
    f = functools.partial(F.gelu, approximate="tanh")
    torch.testing.assert_close(tileopt.compile(f, (x,))(x), f(x), rtol=4 * 2**-23, atol=4e-7)


def test_tanh_gelu_after_a_linear_layer_is_its_epilogue() -> None:
    # Over [batch, tokens], the GELU's ops read the linear layer's result through a reshape:
    # they joined its kernel only up to 4 ops after it, and tanh GELU's last two (1 + t,
    # then the product) were two kernels more (Starcoder2's, GPT-2's gelu_new).
    def f(x: Any, w: Any, b: Any, w2: Any) -> Any:
        h = F.linear(x, w, b)
        return F.linear(0.5 * h * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h ** 3))), w2)

    check(f, lambda: (randn(2, 16, 64), randn(128, 64), randn(128), randn(64, 128)),
          max_kernels=2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_activations_round_once(dtype: torch.dtype) -> None:
    # As torch's kernels: computed in f32, rounded once. Rounded at every step (torch-mlir's
    # lowering), f16 sigmoid(-12.6) was 0 (exp overflowed), gelu(-4) -0 (eager -1.27e-4)
    # and bf16 elu(-0.001) 0.
    x = torch.linspace(-14, 6, 4001).to(dtype)
    f: Callable[..., Any]
    for f in (torch.sigmoid, F.gelu, F.elu, F.selu, F.silu, lambda x: F.leaky_relu(x, 0.01),
              lambda x: F.gelu(x, approximate="tanh")):
        got, want = tileopt.compile(f, (x,))(x), f(x)
        torch.testing.assert_close(got, want, rtol=2 * torch.finfo(dtype).eps, atol=1e-6)


@pytest.mark.parametrize("op", ["sum", "amax"])
def test_reduction_over_a_broadcast_dimension(op: str) -> None:
    # Kernel formation folded the broadcast into the reduction, which then had no operand
    # spanning the reduced loop, and aborted the process.
    def f(x: Any) -> Any:
        return getattr(torch, op)(x.unsqueeze(0).expand(3, 6, 10), dim=0)

    check(f, lambda: (randn(6, 10),))


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "dim"), [((4, 37), -1), ((3, 1000), 1), ((6, 5, 7), 0)], ids=str)
def test_softmax(fn: str, shape: tuple[int, ...], dim: int) -> None:
    check(lambda x: getattr(torch, fn)(x, dim=dim), lambda: (randn(*shape),), max_kernels=1)


@pytest.mark.parametrize("shape", [(4, 37), (2, 3, 1000)], ids=str)
def test_norms(shape: tuple[int, ...]) -> None:
    check(random_layer_norm(shape[-1]), lambda: (randn(*shape),), max_kernels=1)
    check(RMSNorm(shape[-1]), lambda: (randn(*shape),), max_kernels=1)


@pytest.mark.parametrize(("groups", "shape"), [(4, (2, 16, 8, 8)), (1, (3, 8, 5)),
                                               (2, (1, 6, 7, 3, 2))], ids=str)
def test_group_norm(groups: int, shape: tuple[int, ...]) -> None:
    """PyTorch's decomposition gathers each channel's statistics with aten.index at
    constant indices (torch-mlir's dense_resource tensors): read from constant buffers."""
    norm = nn.GroupNorm(groups, shape[1])
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    check(norm, lambda: (randn(*shape),))


def _ties(*shape: int, dtype: Any = torch.float32) -> Any:
    """Values in -3..2: many equal maxima and minima, whose first index must win."""
    return torch.randint(-3, 3, shape).to(dtype)


def _with_nans() -> Any:
    x = torch.randn(5, 9)
    x[0, 3] = x[0, 6] = x[2, 8] = x[4, 0] = float("nan")
    x[1] = float("-inf")
    x[3] = float("inf")
    return x


ARG_REDUCTIONS: dict[str, tuple[Callable[..., Any], Callable[[], Sequence[Any]]]] = {
    "argmax_rows": (lambda x: torch.argmax(x, -1), lambda: (randn(6, 37),)),
    "argmin_columns": (lambda x: torch.argmin(x, 0), lambda: (randn(37, 5),)),
    "max_with_indices_ties": (lambda x: torch.max(x, -1), lambda: (_ties(6, 33),)),
    "min_keepdim_middle": (lambda x: torch.min(x, 1, keepdim=True), lambda: (_ties(3, 9, 4),)),
    # all elements: torch-mlir flattens them, kernel formation reduces two loops
    "argmax_flat": (lambda x: torch.argmax(x), lambda: (randn(4, 9),)),
    "argmax_unit_dim": (lambda x: torch.argmax(x, 1), lambda: (randn(4, 1, 3),)),
    # NaN is the extremum (its first index), as are -inf rows' first elements
    "argmax_nan": (lambda x: torch.max(x, -1), lambda: (_with_nans(),)),
    "argmin_nan": (lambda x: torch.argmin(x, -1), lambda: (_with_nans(),)),
    "argmax_int64": (lambda x: torch.max(x, 0), lambda: (torch.randint(-2**40, 2**40, (33, 3)),)),
    "argmin_int8": (lambda x: torch.argmin(x, -1),
                    lambda: (torch.randint(-128, 128, (4, 50), dtype=torch.int8),)),
    "argmax_bf16_ties": (lambda x: torch.max(x, -1),
                         lambda: (_ties(4, 100, dtype=torch.bfloat16),)),
    # a vocabulary longer than a program holds: chunks, their ties carried in order
    "greedy_decoding": (lambda h, w: torch.argmax(h @ w, -1),
                        lambda: (randn(3, 64), randn(64, 5000))),
    "vocab_ties": (lambda x: torch.max(x, -1), lambda: (_ties(2, 50257),)),
    # a mixture of experts' top-1 gate: softmax, then its maximum and expert
    "moe_gate": (lambda x: torch.softmax(x, -1).max(-1), lambda: (randn(10, 8),)),
}


@pytest.mark.parametrize("name", list(ARG_REDUCTIONS))
def test_arg_reductions(name: str) -> None:
    """argmax, argmin and max/min with indices: one tile.reduce of (value, index) pairs
    that keeps PyTorch's first index among equal extrema and NaN as the extremum."""
    f, make = ARG_REDUCTIONS[name]
    check(f, make, max_kernels=2)


def _moe_gate(x: Any) -> Any:
    """A mixture of experts' top-2 gate: the chosen experts and their softmax weights."""
    weights, experts = torch.topk(x, 2, dim=-1)
    return torch.softmax(weights, -1), experts


@pytest.mark.parametrize(("f", "make"), [
    (_moe_gate, lambda: (randn(6, 8),)),
    (lambda x: torch.topk(x, 5, dim=0), lambda: (randn(9, 7),)),
    (lambda x: torch.topk(x * 2, 3, dim=1, sorted=False), lambda: (randn(2, 300, 3),)),
    (lambda x: torch.topk(x, 4, largest=False), lambda: (randn(5, 33),)),
    (lambda x: torch.topk(x, 3), lambda: (torch.stack([torch.randperm(40) for _ in range(3)]),)),
], ids=["moe_gate", "dim0", "long_middle", "smallest", "int64"])
def test_topk(f: Callable[..., Any], make: Callable[[], Sequence[Any]]) -> None:
    """The k largest or smallest, one after another (distinct values: the indices are
    PyTorch's)."""
    check(f, make)


def _batched_experts(x: Any, router: Any, w_up: Any, w_down: Any) -> Any:
    """Hugging Face's "batched_mm" mixture of experts (Mixtral's, top 2): each token's
    experts' gated up and down projections gathered, then batched matmuls."""
    weights, experts = torch.topk(torch.softmax(x @ router.T, -1), 2, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    experts = experts.reshape(-1)
    gate, up = torch.bmm(w_up[experts], x.repeat_interleave(2, 0)[:, :, None])[..., 0].chunk(2, -1)
    y = torch.bmm(w_down[experts], (F.silu(gate) * up)[:, :, None])[..., 0]
    return (y * weights.reshape(-1, 1)).view(x.shape[0], 2, -1).sum(1)


def test_mixture_of_experts_gathers_each_weight_once() -> None:
    # The gathers of the up (256 x 64) and down (64 x 128) weights read the same expert
    # indices. Kernel formation joined both to the gate's kernel over the cross of their
    # dimensions, [tokens, 2, 256, 64, 128]: 16,384 programs gathered each weight 128 or
    # 256 times over (93.6M emulated warp-instructions; 1.8M now, a few per element).
    graph = check(_batched_experts, lambda: (
        randn(16, 64), randn(4, 64), randn(4, 256, 64) * 0.1, randn(4, 64, 128) * 0.1))
    gathered = 16 * 2 * (256 * 64 + 64 * 128)
    assert sum(s.instructions for s in graph.last_stats) < 4 * gathered, graph.summary()


@pytest.mark.parametrize(("f", "make"), [
    (lambda x: torch.sort(x, stable=True), lambda: (_pool_input(4, 13),)),
    (lambda x: torch.sort(x, stable=True, dim=0, descending=True), lambda: (_pool_input(9, 5),)),
    (lambda x: torch.argsort(x, stable=True), lambda: (torch.randint(-3, 3, (3, 16)),)),
], ids=["ascending_nan", "descending_dim0", "argsort_int"])
def test_small_sort(f: Callable[..., Any], make: Callable[[], Sequence[Any]]) -> None:
    """Rows of up to 16 elements: topk of them all, stable (equal elements keep their
    order: the indices are a stable sort's), NaN last (first when descending)."""
    check(f, make)


def test_topk_ties_and_nan() -> None:
    """Equal values, NaN (above all) and -inf: the values are PyTorch's; each index points
    at its value, and no position is taken twice (PyTorch leaves the order of ties open)."""
    x = _with_nans()
    x[:, :4] = float("-inf")
    x[1] = float("-inf")
    x[2, 5:] = 1.0
    graph = tileopt.compile(lambda t: torch.topk(t, 6, -1), (x,))
    values, indices = graph(x)
    want = torch.topk(x, 6, -1).values
    torch.testing.assert_close(values, want, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(torch.gather(x, -1, indices), values, equal_nan=True, rtol=0,
                               atol=0)
    assert all(len(set(row.tolist())) == 6 for row in indices)


def test_sort_and_topk_values_are_the_elements() -> None:
    # The values were the row's maxima: 0.0 where the element sorted there is -0.0.
    # A stable sort's order is PyTorch's too; topk leaves the order of ties open.
    x = torch.tensor([[0.0, -0.0, 1.0, -0.0, 0.0], [-0.0, 2.0, 0.0, -1.0, -0.0]])
    for f, stable in ((lambda t: torch.sort(t, -1), True),
                      (lambda t: torch.sort(t, -1, descending=True), True),
                      (lambda t: torch.topk(t, 3, -1), False),
                      (lambda t: torch.topk(t, 4, -1, largest=False), False)):
        values, indices = tileopt.compile(f, (x,))(x)
        _assert_same_values(values, torch.gather(x, -1, indices))
        if stable:
            _assert_same_values(values, f(x)[0])


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")], ids=str)
def test_cdist(p: float) -> None:
    """The p-norm of every pair of rows' difference (p = 2 with more than 25 rows reaches
    tileopt as PyTorch's matmul form)."""
    check(lambda a, b: torch.cdist(a, b, p=p), lambda: (randn(2, 7, 5), randn(2, 30, 5)))


def _set_rows(x: Any, rows: Any, values: Any) -> Any:
    y = x.clone()
    y[rows] = values  # a negative row counts from the end
    return y * 2


def _add_columns(x: Any, columns: Any, values: Any) -> Any:
    y = x.clone()
    y[:, columns] += values  # a gather, an add, an index_put: a repeated column takes its last
    return y


def _set_masked(x: Any, mask: Any) -> Any:
    y = x.clone()
    y[y < 0] = 0.5  # a mask over every dimension
    y[:, mask] = -1.0  # over the trailing ones
    return y


def _top2_weights(logits: Any) -> Any:
    """A mixture of experts' gate as a row per token: the top 2 softmax weights scattered
    into zeros."""
    weights, experts = torch.topk(logits, 2, -1)
    return torch.zeros_like(logits).scatter(-1, experts, torch.softmax(weights, -1))


@pytest.mark.parametrize(("f", "make"), [
    (_top2_weights, lambda: (randn(6, 8),)),
    (lambda x, i: x.scatter_add(0, i, torch.full(i.shape, 0.5)),  # repeated indices add up
     lambda: (randn(5, 4), torch.randint(0, 5, (3, 4)))),
    (lambda x, i: x.scatter(1, i, -1.0),
     lambda: (randn(4, 9), torch.argsort(torch.rand(4, 9), 1)[:, :3])),
    (_set_rows, lambda: (randn(6, 4), torch.tensor([4, -1, 0]), randn(3, 4))),
    (_add_columns, lambda: (randn(3, 7), torch.tensor([1, 1, 5]), randn(3, 3))),
    # A boolean mask and one value: a select where the mask holds (was tm_tensor.scan).
    (_set_masked, lambda: (randn(3, 4, 5), torch.rand(4, 5) > 0.5)),
    (lambda x: x.index_put((x > 0.5,), torch.tensor(2.0), accumulate=True),
     lambda: (randn(6, 10),)),
], ids=["moe_weights", "add_dim0", "value", "index_put_rows", "index_put_add_columns",
        "index_put_mask", "index_put_add_mask"])
def test_scatter(f: Callable[..., Any], make: Callable[[], Sequence[Any]]) -> None:
    """One select (or add) per column of the index (per position of ``x[idx] = v``'s
    index), at the positions it names."""
    check(f, make)


def test_scatter_unsupported() -> None:
    """An index narrower than the tensor in another dimension stays tm_tensor.scatter."""
    with pytest.raises(tileopt.UnsupportedOperatorError, match="aten.scatter"):
        tileopt.compile(lambda x, i: x.scatter(0, i, 1.0),
                        (randn(5, 4), torch.randint(0, 5, (2, 3))))


@pytest.mark.parametrize("f", [
    lambda x: torch.topk(x, 17),
    lambda x: torch.sort(x).values,
], ids=["large_k", "long_sort"])
def test_topk_unsupported(f: Callable[..., Any]) -> None:
    with pytest.raises(tileopt.UnsupportedOperatorError, match="aten.(topk|sort)"):
        tileopt.compile(f, (randn(4, 20),))


LONG_ROWS: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    # Rows longer than a program keeps in registers (4096): loops over 4096-element chunks,
    # one per reduction, with a ragged last chunk.
    "softmax": (lambda x: torch.softmax(x, -1), (2, 20000)),
    "softmax_5000": (lambda x: torch.softmax(x * 2, -1), (3, 5000)),
    # Reduced over a strided dimension: the tiles change layout through shared memory.
    "sum_dim1_of_3d": (lambda x: x - x.sum(1, keepdim=True), (3, 3, 2222)),
    "log_softmax_dim0": (lambda x: F.log_softmax(x, 0), (17000, 3)),
    "sum_and_amax": (lambda x: x.sum(-1) + x.amax(-1), (3, 70001)),
    "rmsnorm": (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (2, 16385)),
}


@pytest.mark.parametrize("name", list(LONG_ROWS))
def test_long_rows(name: str) -> None:
    f, shape = LONG_ROWS[name]
    check(f, lambda: (randn(*shape),), max_kernels=1)


def test_long_layer_norm() -> None:
    check(random_layer_norm(30000), lambda: (randn(2, 30000),), max_kernels=1)


# ---------------------------------------------------------------------------------------------
# contractions


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("m", "k", "n"), [(37, 32, 64), (16, 100, 1000), (1, 64, 37), (70, 104, 1)], ids=str
)
def test_matmul(dtype: Any, m: int, k: int, n: int) -> None:
    check(torch.matmul, lambda: (randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)),
          max_kernels=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_bmm(dtype: Any) -> None:
    check(torch.bmm, lambda: (randn(3, 37, 40, dtype=dtype), randn(3, 40, 24, dtype=dtype)),
          max_kernels=1)


@pytest.mark.parametrize(("f", "shapes"), [
    (lambda x: x @ x.t(), [(0, 5)]),  # an empty (0, 0) result: nothing to allocate
    (lambda x: x.t() @ x, [(0, 5)]),  # k = 0: zeros
    (torch.matmul, [(3, 0), (0, 4)]),
], ids=["empty_result", "empty_k", "empty_operands"])
def test_empty_matmuls(f: Callable[..., Any], shapes: list[tuple[int, ...]]) -> None:
    check(f, lambda: tuple(randn(*s) for s in shapes))


def test_mlp() -> None:
    mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16))
    graph = check(mlp, lambda: (randn(4, 37, 32),))
    assert len(graph.kernels) <= 3


@pytest.mark.parametrize(("rows", "cols", "block", "warps", "stages"), [
    (4096, 2048, "128x64x256", 8, 4),  # 32 x 8 programs of 128 x 256: two waves
    (2048, 1024, "128x64x128", 4, 4),  # 128 programs of 128 x 128
    (2048, 2304, "128x32x128", 4, 4),  # 288 programs of 128 x 128 share the SMs
    (512, 768, "64x128x64", 4, 3),  # 24 of 128 x 128: 96 of 64 x 64, k by all 128 of K
    (512, 1024, "64x128x128", 4, 3),  # 32 of 128 x 128: 64 of 64 x 128, k by 128
])
def test_half_matmul_tiles_follow_the_launch_size(
    rows: int, cols: int, block: str, warps: int, stages: int
) -> None:
    """Kernel formation tiles a half-precision linear layer by its launch's size in waves of
    128 programs (the tiles and pipeline depths that were fastest on an H100)."""
    layer = nn.Linear(128, cols).to(torch.float16)
    graph = tileopt.compile(layer, (randn(rows, 128, dtype=torch.float16),))
    tile = graph.stages["tile"]
    m, k, n = block.split("x")
    assert f"tensor<{m}x{k}xf16>, tensor<{k}x{n}xf16> -> tensor<{m}x{n}xf32>" in tile, tile
    assert f"tile.num_stages = {stages}" in tile and f"tile.num_warps = {warps}" in tile, tile


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_matmul_in_large_tiles_matches_eager(dtype: Any) -> None:
    """128 x 128 blocks on 4 warps, 4 stages (2048 x 1024 outputs: 128 programs) compute what
    eager PyTorch does."""
    layer = nn.Sequential(nn.Linear(16, 1024), nn.GELU()).to(dtype)
    graph = check(layer, lambda: (randn(2048, 16, dtype=dtype),), max_kernels=1)
    assert "-> tensor<128x128xf32>" in graph.stages["tile"]


def test_grouped_program_order_covers_every_block() -> None:
    """The programs of a formed matmul take its blocks in groups of 8 rows of blocks, the
    last group partial (18 rows of 64 x 128 blocks here): every block once, as eager."""
    layer = nn.Linear(16, 512).to(torch.float16)
    graph = check(layer, lambda: (randn(1152, 16, dtype=torch.float16),), max_kernels=1)
    assert "-> tensor<64x128xf32>" in graph.stages["tile"] and "arith.minui" in graph.stages["tile"]


def test_grouped_program_order_with_batches() -> None:
    """A batched matmul's programs take the groups of each batch element in turn."""
    check(torch.bmm, lambda: (randn(3, 300, 16, dtype=torch.float16),
                              randn(3, 16, 200, dtype=torch.float16)), max_kernels=1)


def test_batched_kmajor_matmul_on_sm90a_copies_3d_boxes() -> None:
    """A batched matmul with a K-major right operand (``b.transpose(1, 2)``) and an epilogue,
    on sm_90a: one kernel whose operands come by 3-D TMA boxes (the batch coordinate one
    element deep; the K-major map swaps the matrix's dimensions) and whose accumulator stays
    in registers through the reshape to the batch's rank: its shared-memory stores are those
    of the same layer on one matrix."""

    def model(a: Any, w: Any, bias: Any) -> Any:
        return torch.relu(torch.bmm(a, w.transpose(1, 2)) + bias)

    def shared_stores(graph: Any) -> list[str]:
        (kernel,) = graph.program.host.kernel_names
        return re.findall(r"st\.shared\S*", graph.stages[f"ptx:{kernel}"])

    torch.manual_seed(0)
    for batch, m, k, n in [(3, 70, 48, 80), (2, 130, 144, 208)]:
        a, w = randn(batch, m, k, dtype=torch.float16), randn(batch, n, k, dtype=torch.float16)
        bias = randn(n, dtype=torch.float16)
        graph = tileopt.compile(model, (a, w, bias), target="sm_90a")
        (kernel,) = graph.program.host.kernel_names
        ptx = graph.stages[f"ptx:{kernel}"]
        assert "cp.async.bulk.tensor.3d" in ptx and "cp.async.cg" not in ptx
        layer = tileopt.compile(lambda a, w, bias: torch.relu(a @ w.t() + bias),
                                (a[0], w[0], bias), target="sm_90a")
        assert shared_stores(graph) == shared_stores(layer)
        with torch.no_grad():
            _close(graph(a, w, bias), model(a.float(), w.float(), bias.float()).half(),
                   TOL[torch.float16])


def test_num_stages_overrides_kernel_formation() -> None:
    """A ``num_stages`` given to ``compile`` is the depth of every pipeline, also where kernel
    formation chose another (3 for this small launch: ``cp.async.wait_group 1``; 4 waits
    for 2)."""
    layer = nn.Linear(256, 128).to(torch.float16)
    x = randn(128, 256, dtype=torch.float16)

    def waits(graph: Any) -> set[str]:
        (matmul,) = graph.program.host.kernel_names
        return set(re.findall(r"cp\.async\.wait_group\s+(\d+);", graph.stages[f"ptx:{matmul}"]))

    assert waits(tileopt.compile(layer, (x,))) == {"1", "0"}
    asked = tileopt.compile(layer, (x,), num_stages=4)
    assert waits(asked) == {"2", "0"}
    with torch.no_grad():
        _close(asked(x), layer(x), TOL[torch.float16])


@pytest.mark.parametrize(("dtype", "mma"), [(torch.float16, "f16"), (torch.bfloat16, "bf16")],
                         ids=["f16", "bf16"])
def test_half_linear_runs_on_half_tensor_cores(dtype: Any, mma: str) -> None:
    """torch decomposes a half-precision linear into f32 copies of the input, the weight and
    the bias and an f32 matmul; kernel formation fuses the widenings into the matmul and its
    epilogue, which read the half-precision tensors (the weight through its transpose, K-major)
    and run as one f16/bf16 dot with an f32 accumulator: one kernel, tensor cores, and with
    the promises of the specialization's layouts (K = 64) a cp.async pipeline."""
    layer = nn.Sequential(nn.Linear(64, 48), nn.ReLU()).to(dtype)
    graph = check(layer, lambda: (randn(37, 64, dtype=dtype),), max_kernels=1)
    (matmul,) = graph.program.host.kernel_names
    ptx = graph.stages[f"ptx:{matmul}"]
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{mma}.{mma}.f32" in ptx
    assert "cp.async.cg.shared.global" in ptx and "ldmatrix.sync.aligned.m8n8.x4.trans" not in ptx


def _tf32(x: Any) -> Any:
    """f32 rounded to tf32 to nearest, ties away from zero (cvt.rna.tf32.f32)."""
    bits = x.float().contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


@pytest.fixture
def fp32_precision() -> Any:
    """Sets ``torch.backends.cuda.matmul.fp32_precision`` for a test and restores it."""
    matmul = torch.backends.cuda.matmul
    saved = matmul.fp32_precision

    def set_precision(value: str) -> None:
        matmul.fp32_precision = value

    yield set_precision
    matmul.fp32_precision = saved


def test_f32_matmuls_use_tf32_where_torch_allows_it(fp32_precision: Any) -> None:
    """As Inductor does: with ``fp32_precision = "tf32"`` (``allow_tf32 = True``) f32 matmuls
    and attention get ``input_precision = tf32`` (mma.sync m16n8k8, inputs rounded to tf32);
    with the default they stay exact f32. Changing the setting recompiles."""
    torch.manual_seed(0)
    a, b = randn(70, 48), randn(48, 40)
    q, k, v = (randn(1, 2, 37, 16) for _ in range(3))

    def model(a: Any, b: Any, q: Any, k: Any, v: Any) -> Any:
        return a @ b, F.scaled_dot_product_attention(q, k, v)

    fp32_precision("tf32")
    graph = tileopt.compile(model, (a, b, q, k, v), target="sm_80")
    assert graph.stages["tile"].count("input_precision = tf32") == 3  # a @ b, q k^T, p v
    ptx = "".join(text for name, text in graph.stages.items() if name.startswith("ptx:"))
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx
    with torch.no_grad():
        mm, attn = graph(a, b, q, k, v)
        want = _tf32(a).double() @ _tf32(b).double()
        bound = 49 * 2.0**-24 * (a.double().abs() @ b.double().abs()) + 1e-30
        assert ((mm.double() - want).abs() <= bound).all()
        assert not torch.allclose(mm, a @ b, rtol=0, atol=1e-6)  # rounded inputs
        _close(attn, F.scaled_dot_product_attention(q, k, v), 2e-3)

        fp32_precision("ieee")
        mm, _ = graph(a, b, q, k, v)
        assert "input_precision" not in graph.stages["tile"]
        _close(mm, a @ b, 2e-5)


# ---------------------------------------------------------------------------------------------
# attention and blocks


@pytest.mark.parametrize("t", [16, 37])
def test_attention(t: int) -> None:
    def inputs() -> tuple[Any, ...]:
        return tuple(randn(2, 4, t, 16) for _ in range(3))

    check(causal_attention, inputs)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), inputs)


def _padding_mask_attention(q: Any, k: Any, v: Any, keep: Any) -> Any:
    # A Hugging Face-style padding mask, broadcast over heads and queries.
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(keep[:, None, None, :] == 0, float("-inf"))
    return scores.softmax(-1) @ v


def _float_mask(t: int, s: int) -> Any:
    return torch.randn(t, s)


def _bool_mask(b: int, t: int, s: int) -> Any:
    keep = torch.rand(b, 1, t, s) > 0.4
    keep[:, :, : t // 3, :] = False  # whole rows masked: safe softmax gives 0 there
    return keep


def _bottom_right_causal(q: Any, k: Any, v: Any) -> Any:
    # The last t of s positions (a KV cache): query i sees the keys j <= i + s - t, by a mask
    # built from aranges, as models build it.
    t, s = q.shape[-2], k.shape[-2]
    keep = torch.arange(s)[None, :] <= torch.arange(t)[:, None] + (s - t)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def _repeat_kv_attention(q: Any, k: Any, v: Any) -> Any:
    # Llama's repeat_kv: each key and value head copied for its query heads, then SDPA.
    def repeat(x: Any, n: int) -> Any:
        b, h, s, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)

    n = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, repeat(k, n), repeat(v, n))


def _padding(b: int, s: int) -> Any:
    keep = torch.ones(b, s, dtype=torch.long)
    keep[0, s // 2 :] = 0
    return keep


# name -> (function, inputs(b, h, t, s, d, dtype)); t queries, s keys.
ATTENTION: dict[str, tuple[Callable[..., Any], Callable[..., tuple[Any, ...]]]] = {
    "causal_by_hand": (causal_attention, lambda b, h, t, s, d, dt: tuple(
        randn(b, h, t, d, dtype=dt) for _ in range(3))),
    "sdpa": (F.scaled_dot_product_attention, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt), randn(b, h, s, d, dtype=dt))),
    "sdpa_causal_scale": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        lambda b, h, t, s, d, dt: tuple(randn(b, h, t, d, dtype=dt) for _ in range(3))),
    "sdpa_float_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda b, h, t, s, d, dt: (randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt),
                                   randn(b, h, s, d, dtype=dt), _float_mask(t, s).to(dt))),
    "sdpa_bool_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda b, h, t, s, d, dt: (randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt),
                                   randn(b, h, s, d, dtype=dt), _bool_mask(b, t, s))),
    "sdpa_bottom_right_causal": (_bottom_right_causal, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt), randn(b, h, s, d, dtype=dt))),
    "padding_mask_by_hand": (_padding_mask_attention, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt), randn(b, h, s, d, dtype=dt),
        _padding(b, s))),
    "sdpa_gqa": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        lambda b, h, t, s, d, dt: (randn(b, h, t, d, dtype=dt), randn(b, h // 2, s, d, dtype=dt),
                                   randn(b, h // 2, s, d, dtype=dt))),
    "sdpa_gqa_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        lambda b, h, t, s, d, dt: (randn(b, h, t, d, dtype=dt), randn(b, h // 2, t, d, dtype=dt),
                                   randn(b, h // 2, t, d, dtype=dt))),
    "sdpa_mqa_bool_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
        lambda b, h, t, s, d, dt: (randn(b, h, t, d, dtype=dt), randn(b, 1, s, d, dtype=dt),
                                   randn(b, 1, s, d, dtype=dt), _bool_mask(b, t, s))),
    "repeat_kv": (_repeat_kv_attention, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(b, h // 2, s, d, dtype=dt),
        randn(b, h // 2, s, d, dtype=dt))),
    "sdpa_kv_broadcast_batch": (F.scaled_dot_product_attention, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(1, h, s, d, dtype=dt), randn(1, h, s, d, dtype=dt))),
    # v narrower than q and k (DeepSeek's multi-head latent attention: 192 and 128)
    "sdpa_narrow_v": (F.scaled_dot_product_attention, lambda b, h, t, s, d, dt: (
        randn(b, h, t, d, dtype=dt), randn(b, h, s, d, dtype=dt),
        randn(b, h, s, d * 2 // 3, dtype=dt))),
}


@pytest.mark.parametrize(("name", "shape", "dtype"), [
    ("causal_by_hand", (2, 2, 37, 37, 16), torch.float32),
    ("causal_by_hand", (1, 2, 130, 130, 64), torch.float16),
    ("sdpa", (2, 3, 50, 77, 40), torch.float32),
    ("sdpa", (1, 2, 70, 70, 128), torch.bfloat16),
    ("sdpa", (2, 2, 16, 16, 8), torch.float16),
    ("sdpa_causal_scale", (1, 2, 100, 100, 96), torch.float16),
    ("sdpa_float_mask", (2, 2, 37, 45, 32), torch.float32),
    ("sdpa_bool_mask", (2, 2, 37, 45, 32), torch.float32),
    ("sdpa_bool_mask", (1, 2, 65, 65, 64), torch.bfloat16),
    ("padding_mask_by_hand", (2, 2, 20, 20, 16), torch.float32),
    ("sdpa_bottom_right_causal", (1, 2, 70, 150, 32), torch.float16),
    ("sdpa_gqa", (2, 4, 30, 45, 32), torch.float32),
    ("sdpa_gqa", (1, 8, 70, 70, 64), torch.bfloat16),
    ("sdpa_gqa", (2, 8, 1, 100, 64), torch.float16),
    ("sdpa_gqa_causal", (1, 4, 100, 100, 64), torch.float16),
    ("sdpa_mqa_bool_mask", (2, 3, 37, 45, 32), torch.float32),
    ("repeat_kv", (1, 4, 40, 70, 128), torch.float16),
    ("sdpa_kv_broadcast_batch", (2, 2, 40, 70, 64), torch.float16),
    ("sdpa", (1, 2, 40, 70, 256), torch.float16),
    ("sdpa_gqa_causal", (1, 4, 70, 70, 160), torch.bfloat16),
    ("sdpa_bool_mask", (1, 2, 20, 30, 200), torch.float32),
    ("sdpa_narrow_v", (1, 2, 40, 70, 192), torch.bfloat16),
])
def test_attention_is_one_kernel(name: str, shape: tuple[int, ...], dtype: Any) -> None:
    # softmax(mask(q k^T * scale)) v as one flash-attention kernel: its scores never reach
    # memory. Queries and keys cross the 64-row blocks, head dimensions are not powers of
    # two (up to 256: Gemma's), rows whose every key is masked give 0 (torch's safe softmax
    # in SDPA).
    fn, make = ATTENTION[name]
    graph = check(fn, lambda: make(*shape, dtype))
    assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()


@pytest.mark.parametrize("name", ["causal_by_hand", "sdpa_bottom_right_causal"])
def test_causal_attention_reads_keys_up_to_the_diagonal(name: str) -> None:
    # A program's key loop ends at the last key that its last row sees: with n blocks of
    # rows and of keys, k and v are read for n (n + 1) / 2 of the n^2 blocks that attention
    # without a mask reads (at most 10 of 16: n >= 4 here).
    def kv_bytes(fn: Callable[..., Any]) -> int:
        graph = check(fn, lambda: ATTENTION["sdpa"][1](1, 2, 256, 256, 32, torch.float32))
        assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()
        return graph.last_global_bytes - 2 * 2 * 256 * 32 * 4  # less q and the output

    full, causal = kv_bytes(ATTENTION["sdpa"][0]), kv_bytes(ATTENTION[name][0])
    assert full / 2 < causal <= full * 10 / 16, (causal, full)


def test_attention_rows_masked_whole_are_nan_or_zero() -> None:
    # softmax over a row of -inf scores is 0 / 0 = NaN; SDPA's safe softmax gives 0 there.
    # The kernel multiplies by the inverse row sums: NaN and 0 land where eager puts them.
    keep = torch.ones(1, 1, 40, 70, dtype=torch.bool)
    keep[..., 5:9, :] = False

    def by_hand(q: Any, k: Any, v: Any) -> Any:
        scores = (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf"))
        return scores.softmax(-1) @ v

    def sdpa(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    torch.manual_seed(0)
    q, k, v = randn(1, 2, 40, 32), randn(1, 2, 70, 32), randn(1, 2, 70, 32)
    for fn in (by_hand, sdpa):
        graph = tileopt.compile(fn, (q, k, v))
        assert [n.name.endswith("_attention") for n in graph.kernels] == [True], graph.summary()
        with torch.no_grad():
            got, want = graph(q, k, v), fn(q, k, v)
        assert torch.equal(got.isnan(), want.isnan()), fn.__name__
        assert want[..., 5:9, :].isnan().all() == (fn is by_hand)
        torch.testing.assert_close(got.nan_to_num(), want.nan_to_num(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_rows_masked_whole_with_the_least_float_are_averages(dtype: Any) -> None:
    # Hugging Face masks with finfo.min, not -inf: a row masked whole is a softmax of equal
    # scores, the mean of v. The kernel took s k - max(s) k with k = scale log2(e) >= 1.44,
    # where -3.4e38 k overflowed to -inf (NaN, or 0 through SDPA's safe softmax), and made a
    # fill after a scale of 1/8 -inf in the scores' units.
    keep = torch.ones(24, 40, dtype=torch.bool).tril(16)
    keep[3] = False
    low = torch.finfo(dtype).min

    def sdpa(q: Any, k: Any, v: Any) -> Any:
        mask = torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, low)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def scale_then_fill(q: Any, k: Any, v: Any) -> Any:
        scores = (q @ k.transpose(-2, -1) / 8.0).masked_fill(~keep, low)
        return torch.softmax(scores.float(), -1).to(q.dtype) @ v

    def fill_then_scale(q: Any, k: Any, v: Any) -> Any:
        scores = (q @ k.transpose(-2, -1)).masked_fill(~keep, low) / 8.0
        return torch.softmax(scores.float(), -1).to(q.dtype) @ v

    torch.manual_seed(0)
    q, k, v = randn(1, 2, 24, 64, dtype=dtype), randn(1, 2, 40, 64, dtype=dtype), randn(
        1, 2, 40, 64, dtype=dtype)
    for fn in (sdpa, scale_then_fill, fill_then_scale):
        graph = tileopt.compile(fn, (q, k, v))  # (sdpa's mask is made by a kernel of its own)
        assert [n.name for n in graph.kernels][-1].endswith("_attention"), graph.summary()
        with torch.no_grad():
            got, want = graph(q, k, v), fn(q, k, v)
        assert not got.isnan().any(), fn.__name__
        _close(got, want, TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_attention_over_256_head_dims_keeps_scores_in_f32(dtype: Any) -> None:
    # Head dimensions over 256 do not fuse into one kernel: the scores go through memory in
    # f32, as torch's SDPA keeps them. Rounded to the half type, they were 0.03 (f16) and
    # 0.24 (bf16) from eager at amplitude 8 (head dimension 256, when that did not fuse),
    # where eager is 1e-3 and 8e-3 from f32.
    def inputs() -> tuple[Any, ...]:
        q, k, v = ATTENTION["sdpa"][1](1, 2, 40, 70, 512, torch.float32)
        return (q * 8).to(dtype), (k * 8).to(dtype), v.to(dtype)

    graph = check(F.scaled_dot_product_attention, inputs)
    assert len(graph.kernels) == 3, graph.summary()


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90a"])
def test_wide_attention_on_each_target(target: str) -> None:
    # Head dimension 200 (256 in registers, blocks of 32 keys): mma.sync with a cp.async
    # pipeline in 160 KiB (sm_80) and in 99 KiB (sm_89), wgmma with TMA (sm_90a).
    def f(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch.manual_seed(0)
    q, k, v = (randn(1, 2, 65, 200, dtype=torch.bfloat16) for _ in range(3))
    graph = tileopt.compile(f, (q, k, v), target=target)
    assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()
    _close(graph(q, k, v), f(q, k, v), TOL[torch.bfloat16])


def test_wide_attention_by_shared_memory() -> None:
    # Head dimension 256 fuses where a block holds 96 KiB of shared memory (q and a block of
    # keys and of values: sm_86's 99 KiB); sm_75's 64 KiB keep it three kernels, which
    # compile there (the fused kernel did not: 96 KiB).
    assert "max-head-dim" not in linalg_to_tile_pipeline(target="sm_86")
    assert linalg_to_tile_pipeline(True, "sm_75") == (
        "builtin.module(tileopt-linalg-to-tile{allow-tf32=true max-head-dim=128})")
    q, k, v = (torch.zeros(1, 2, 1024, 256, dtype=torch.bfloat16) for _ in range(3))
    for target, attention in (("sm_75", False), ("sm_86", True)):
        graph = tileopt.compile(F.scaled_dot_product_attention, (q, k, v), target=target)
        assert any(k.name.endswith("_attention") for k in graph.kernels) == attention, (
            target, graph.summary())


def test_unfused_causal_attention_with_large_blocks() -> None:
    # Head dimension 320 (no attention kernel) over 1,024 keys: the scores' matmul takes
    # 128 x 128 blocks and computes the causal mask's j - i on i64 tiles, two registers an
    # element (256 a thread on 4 warps). It failed to compile (at 160, which fuses now); it
    # takes 8 warps now, and its grouped program order clamps the block offsets, so j - i
    # narrows to i32. Told its block, ptxas spilled 20 bytes at 128 registers to fit two
    # blocks an SM (sm_90); told none, it takes 142 and spills nothing.
    graph = check(causal_attention, lambda: tuple(
        randn(1, 1, 1024, 320, dtype=torch.bfloat16) for _ in range(3)))
    assert len(graph.kernels) == 3, graph.summary()
    assert all(k.metadata.spill_bytes == 0 for k in graph.kernels), graph.summary()
    assert "xi64>" not in graph.kernels[0].asm["tile"], graph.kernels[0].asm["tile"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_float32_mask_beside_half_attention(dtype: Any) -> None:
    # An f32 mask makes the scores f32, and the safe softmax's select, which the rounding to
    # v's type follows: one kernel whose scores stay in f32. Split in three, the scores were
    # stored in the half type: 0.06 (f16) and 0.31 (bf16) from eager at amplitude 8, where
    # eager is 1e-3 and 7e-3 from f32. A row masked whole gives 0.
    def f(q: Any, k: Any, v: Any, mask: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def inputs() -> tuple[Any, ...]:
        mask = torch.randn(16, 24)
        mask[3] = float("-inf")
        return ((randn(1, 2, 16, 32) * 8).to(dtype), (randn(1, 2, 24, 32) * 8).to(dtype),
                randn(1, 2, 24, 32, dtype=dtype), mask)

    graph = check(f, inputs)
    assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["sdpa_gqa", "repeat_kv", "sdpa_kv_broadcast_batch"])
def test_grouped_query_attention_keeps_scores_in_f32(name: str, dtype: Any) -> None:
    # k and v read once per key head (enable_gqa, Llama's repeat_kv) or batch: one kernel
    # whose scores stay in f32, as eager's. Split into a matmul, softmax and matmul, the
    # scores (|s| up to ~40 here) were stored in the half type: 0.05 (f16) and 0.66 (bf16)
    # from eager, where eager is 2e-3 and 8e-3 from f32.
    fn, make = ATTENTION[name]

    def inputs() -> tuple[Any, ...]:
        q, k, v = make(2, 4, 40, 70, 128, torch.float32)
        return (q * 8).to(dtype), (k * 8).to(dtype), v.to(dtype)

    graph = check(fn, inputs)
    assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_for_one_query(dtype: Any) -> None:
    # Decoding: one query against 100 keys, programs of one row.
    fn, make = ATTENTION["sdpa"]
    graph = check(fn, lambda: make(1, 2, 1, 100, 64, dtype))
    assert [k.name.endswith("_attention") for k in graph.kernels] == [True], graph.summary()


def test_sdpa_output_viewed_after_transpose() -> None:
    # Hugging Face's GPT-2 views SDPA's output after transpose(1, 2) with no copy: eager's CPU
    # kernel lays the output out as [batch, seq, heads, dim], the decomposition does not.
    def attend(q: Any, k: Any, v: Any) -> Any:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        return y.reshape(2, 16, 64).view(-1, 64) * 2

    check(attend, lambda: tuple(randn(2, 4, 16, 16) for _ in range(3)))


def test_gpt_block() -> None:
    # Issue 11's goal: at most 7 kernels, attention in one.
    graph = check(GPTBlock(), lambda: (randn(2, 37, 64),), tol=1e-4, max_kernels=7)
    assert any(k.name.endswith("_attention") for k in graph.kernels), graph.summary()


@pytest.mark.parametrize(("f", "make", "kernels"), [
    (lambda x: torch.cumsum(x, -1), lambda: (randn(3, 37),), 1),
    (lambda x: torch.cumsum(x, 0), lambda: (randn(37, 5),), 1),
    # RoBERTa's and OPT's position ids from an attention mask (int64)
    (lambda m: torch.cumsum(m, 1) * m + 1, lambda: ((torch.rand(2, 16) > 0.3).long(),), 1),
    # The cast is a kernel of its own: the sum reads it broadcast along a new dimension.
    (lambda x: torch.cumsum(x, 1, dtype=torch.int32), lambda: (torch.randint(-3, 3, (2, 9)),), 2),
    # torch.cumprod: torch-mlir's tm_tensor.scan had no kernel formation.
    (lambda x: torch.cumprod(x, 1), lambda: (randn(4, 23) * 0.5 + 1,), 1),
    (lambda x: torch.cumprod(x, 0), lambda: (torch.randint(-3, 4, (9, 3)),), 1),
    # logcumsumexp, cummax and cummin: torch-mlir's tm_tensor.scan, or no lowering at all.
    # The extremes' positions read the extremes (a second row reduction).
    (lambda x: torch.logcumsumexp(x * 30, 1), lambda: (randn(4, 37),), 1),
    (lambda x: torch.cummax(x, 1), lambda: (randn(4, 37),), 2),
    (lambda x: torch.cummin(x, 0), lambda: (torch.randint(-3, 3, (23, 3)),), 2),
], ids=["last", "first", "position_ids", "int32", "cumprod", "cumprod_int", "logcumsumexp",
        "cummax", "cummin_int"])
def test_cumsum(f: Callable[..., Any], make: Callable[[], Sequence[Any]], kernels: int) -> None:
    check(f, make, max_kernels=kernels)


def test_scans_of_infinities_nans_and_ties() -> None:
    # torch's kernels: logcumsumexp is -inf until a finite element, inf or NaN from one on;
    # cummax/cummin keep a NaN from where it appears and index the last NaN, or the last
    # position holding the extreme (ties move the index).
    x = torch.tensor([[float("-inf"), -1.0, float("inf"), 2.0, float("nan"), 3.0, float("nan")],
                      [2.0, 2.0, 1.0, 2.0, 3.0, 3.0, 0.0]])
    for f in (lambda t: torch.logcumsumexp(t, 1), lambda t: torch.cummax(t, 1),
              lambda t: torch.cummin(t, 1), lambda t: torch.cummax(t.half(), 1)):
        got, want = tileopt.compile(f, (x,))(x), f(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


def test_hypot_neither_overflows_nor_underflows() -> None:
    # Magnitudes from 1e-40 to 3e38 (their squares leave f32), zeros, infinities beside NaNs.
    gen = torch.Generator().manual_seed(0)
    x, y = (torch.cat([torch.randn(500, generator=gen) * torch.exp(torch.randn(500, generator=gen)
                                                                  * 20), torch.tensor(t)])
            for t in ([0.0, float("inf"), float("nan"), 3e38, 1e-40, float("nan")],
                      [0.0, float("nan"), 1.0, 3e38, 1e-40, float("-inf")]))
    for dtype in (torch.float32, torch.float64):
        a, b = x.to(dtype), y.to(dtype)
        rtol = 2 * torch.finfo(dtype).eps
        torch.testing.assert_close(tileopt.compile(torch.hypot, (a, b))(a, b), torch.hypot(a, b),
                                   rtol=rtol, atol=0, equal_nan=True)


def test_erfinv_is_torchs() -> None:
    # torch's calc_erfinv: rational approximations and two Newton steps on erf. erfinv is
    # ill-conditioned near +-1 (a relative change of y of 6e-8 at 1 - 6e-8 moves x by 3%).
    y = torch.cat([torch.linspace(-0.999, 0.999, 4001),
                   torch.tensor([-1.0, 1.0, 1.5, -2.0, float("nan"), -0.0, 0.0, 1e-30])])
    tails = torch.tensor([0.9999999, -0.99999994, 0.99999, -0.999999])
    graph = tileopt.compile(torch.erfinv, (y,))
    got, want = graph(y), torch.erfinv(y)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)
    assert torch.signbit(got[-3]) and not torch.signbit(got[-2])  # -0.0 and 0.0 keep signs
    torch.testing.assert_close(graph(tails), torch.erfinv(tails), rtol=2e-5, atol=0)
    y64 = y.double()
    torch.testing.assert_close(tileopt.compile(torch.erfinv, (y64,))(y64), torch.erfinv(y64),
                               rtol=1e-12, atol=0, equal_nan=True)
    half = y.half()
    torch.testing.assert_close(tileopt.compile(torch.erfinv, (half,))(half), torch.erfinv(half),
                               rtol=1e-3, atol=0, equal_nan=True)


def test_long_cumsum_is_unsupported() -> None:
    with pytest.raises(tileopt.UnsupportedOperatorError, match="aten.cumsum"):
        tileopt.compile(lambda x: torch.cumsum(x, 0), (randn(5000),))


# ---------------------------------------------------------------------------------------------
# convolutions: a gather of the input's windows (im2col) and a matmul by the weight


@pytest.mark.parametrize(("conv", "shape", "kernels"), [
    (lambda: nn.Conv2d(4, 8, 3, padding=1), (2, 4, 9, 9), 2),
    (lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1), (2, 4, 9, 10), 2),
    (lambda: nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False), (1, 3, 19, 18), 2),
    (lambda: nn.Conv2d(4, 8, 3, padding="same", dilation=2), (2, 4, 9, 9), 2),
    (lambda: nn.Conv2d(8, 12, 3, padding=2, dilation=2, groups=2), (2, 8, 9, 9), 3),
    (lambda: nn.Conv2d(6, 6, 3, padding=1, groups=6), (2, 6, 9, 7), 2),  # depthwise
    (lambda: nn.Conv2d(4, 8, 3, padding=1, groups=4, bias=False), (2, 4, 9, 9), 2),
    (lambda: nn.Conv2d(4, 8, 3, padding=1, padding_mode="reflect"), (2, 4, 9, 9), 3),
    (lambda: nn.Conv1d(6, 5, 3, padding=1), (2, 6, 16), 2),
    (lambda: nn.Conv3d(3, 4, 3, stride=2, padding=1), (1, 3, 6, 7, 5), 2),
    (lambda: nn.Conv2d(3, 16, 8, stride=8), (2, 3, 32, 35), 2),  # ViT's patch embedding
    (lambda: nn.Conv2d(8, 12, 1), (2, 8, 5, 7), 1),  # the input as it is: no gather
    (lambda: nn.Conv1d(4, 6, 1, stride=2, bias=False), (2, 4, 9), 1),
    (lambda: nn.ConvTranspose2d(4, 3, 2, stride=2), (2, 4, 5, 5), 3),  # a U-Net's upsampling
    (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
     (2, 4, 5, 6), 4),
    (lambda: nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1), (2, 4, 7), 3),
    (lambda: nn.ConvTranspose3d(2, 3, 3, stride=(1, 2, 2), padding=(0, 1, 2), dilation=2),
     (1, 2, 3, 4, 5), 3),
], ids=["3x3", "strided", "resnet_stem", "same_dilated", "grouped", "depthwise",
        "depth_multiplier", "reflect", "1d", "3d", "patch8", "1x1", "1x1_strided",
        "transposed", "transposed_grouped", "transposed_1d", "transposed_3d"])
def test_convolution(conv: Callable[[], Any], shape: tuple[int, ...], kernels: int) -> None:
    """Every kind of convolution against PyTorch's: the windows' gather and the matmul (bias
    in its epilogue); a transposed one flips and reorders its weight in a kernel of its own;
    a grouped one whose groups are too small for a matmul reduces, the bias then added
    apart; reflection padding is a kernel of its own."""
    check(conv(), lambda: (randn(*shape),), max_kernels=kernels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_convolution(dtype: Any) -> None:
    check(nn.Conv2d(8, 16, 3, padding=1).to(dtype), lambda: (randn(2, 8, 9, 9, dtype=dtype),),
          max_kernels=2)


def test_small_resnet() -> None:
    """Stem, pooling, a residual block, global average pooling and a classifier (eval)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(3, 2, 1), ResNetBlock(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, 10)).eval()
    check(model, lambda: (randn(2, 3, 32, 30),))


@pytest.mark.parametrize(("make", "shape"), [
    (lambda: InvertedResidual(8), (2, 8, 12, 12)),
    (lambda: ConvNeXtBlock(16), (2, 16, 9, 9)),
    (lambda: TopTwoMoE(16, experts=4, hidden=32), (6, 16)),
], ids=["mobilenet_v2", "convnext", "top2_moe"])
def test_blocks(make: Callable[[], Any], shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    check(make().eval(), lambda: (randn(*shape),))


class _SelfAttention(nn.Module):
    """``nn.MultiheadAttention`` on one sequence, its output alone."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: Any) -> Any:
        return self.attention(x, x, x, need_weights=False)[0]


class _Activations(nn.Module):
    def forward(self, x: Any) -> Any:
        return F.softplus(x) + F.mish(x) + F.hardswish(x) + F.elu(x) + F.leaky_relu(x, 0.1)


@pytest.mark.parametrize(("make", "shape"), [
    (lambda: _SelfAttention(32, 4), (2, 7, 32)),
    (lambda: nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), (2, 9, 32)),
    (lambda: nn.GRU(8, 16, batch_first=True), (2, 5, 8)),
    (lambda: nn.InstanceNorm1d(4), (2, 4, 30)),
    (_Activations, (7, 13)),
], ids=["multihead_attention", "transformer_encoder_layer", "gru", "instance_norm",
        "activations"])
# torch.export's own warning on nn.GRU's weight list
@pytest.mark.filterwarnings("ignore:The tensor attributes self._flat_weights")
def test_torch_nn_layers(make: Callable[[], Any], shape: tuple[int, ...]) -> None:
    """torch.nn's own layers as models hold them (eval mode), against eager."""
    torch.manual_seed(0)
    check(make().eval(), lambda: (randn(*shape),))


@pytest.mark.parametrize(("f", "shapes"), [
    (lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5, beta=2.0),
     [(2, 5, 6), (2, 5, 7), (2, 7, 6)]),
    (lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c), [(5, 6), (6, 7), (7, 3)]),
    (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 5, 7), (2, 7, 6)]),
    # torch-mlir has no lowering for addmv: it decomposes (_decompositions)
    (lambda c, a, v: torch.addmv(c, a, v, beta=2.0, alpha=3.0), [(5,), (5, 7), (7,)]),
], ids=["baddbmm", "einsum_chain", "einsum_bmm", "addmv"])
def test_matmul_forms(f: Callable[..., Any], shapes: list[tuple[int, ...]]) -> None:
    check(f, lambda: [randn(*shape) for shape in shapes])


def test_index_select() -> None:
    check(lambda x, i: x.index_select(0, i) * 2,
          lambda: (randn(9, 4), torch.randint(0, 9, (5,))))


def test_indexing_with_int32_indices() -> None:
    # torch-mlir's aten.index compared int32 indices with int64 bounds and failed.
    check(lambda x, i: (x[i], x[:, i % 4], x[i, i % 4]),
          lambda: (randn(9, 4), torch.randint(-9, 9, (5,), dtype=torch.int32)))


def test_scatter_of_a_python_scalar_keeps_the_tensor_type() -> None:
    # The scalar was written as it is, promoting the result (int32 x, 1.5: a float32 1.5).
    def f(x: torch.Tensor, i: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.scatter(1, i, 1.5), x.long().scatter(1, i, -2.7), b.scatter(1, i, 2)

    check(f, lambda: (torch.randint(-5, 5, (2, 4), dtype=torch.int32),
                      torch.tensor([[0, 2], [1, 3]]), torch.rand(2, 4) > 0.5))


def _pool_input(*shape: int) -> Any:
    """Small integers (ties, whose first index wins), some NaN (whose last index wins, as in
    PyTorch's kernel) and -inf."""
    x = _ties(*shape)
    x[x == 2] = float("nan")
    x[x == -3] = float("-inf")
    return x


@pytest.mark.parametrize(("pool", "shape"), [
    (lambda: nn.MaxPool2d(2), (2, 3, 8, 9)),  # an odd width: its last column is dropped
    (lambda: nn.MaxPool2d(3, 2, 1, return_indices=True), (2, 4, 17, 16)),  # ResNet's stem
    (lambda: nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
     (1, 2, 11, 9)),
    (lambda: nn.MaxPool1d(3, 1, 1), (2, 3, 10)),
    (lambda: nn.MaxPool3d(3, 2, 1, return_indices=True), (1, 2, 5, 5, 4)),
], ids=["2x2", "resnet_stem", "dilated_ceil", "1d_overlapping", "3d_padded"])
def test_max_pooling(pool: Callable[[], Any], shape: tuple[int, ...]) -> None:
    """A running maximum over the window's offsets, each a strided view of the input padded
    with -inf: one elementwise kernel after the padding's."""
    check(pool(), lambda: (_pool_input(*shape),), max_kernels=2)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64], ids=str)
def test_max_pooling_of_integers(dtype: Any) -> None:
    # The padding and the first maximum were -inf converted to an integer: poison (zeros).
    check(nn.MaxPool2d(3, 2, 1, return_indices=True),
          lambda: (torch.randint(-100, 100, (1, 2, 7, 9), dtype=dtype),))


@pytest.mark.parametrize(("pool", "shape"), [
    (lambda: nn.AvgPool2d((2, 3)), (2, 3, 8, 9)),
    (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 9, 8)),
    (lambda: nn.AvgPool2d(3, 2, 1), (2, 3, 9, 8)),
    (lambda: nn.AvgPool2d(2, ceil_mode=True), (1, 3, 7, 7)),
    (lambda: nn.AvgPool1d(3), (2, 3, 10)),
    (lambda: nn.AvgPool3d(2, divisor_override=3), (1, 2, 4, 4, 4)),
], ids=["2x3", "padded_exclusive", "padded", "ceil", "1d", "3d_divisor"])
def test_average_pooling(pool: Callable[[], Any], shape: tuple[int, ...]) -> None:
    check(pool(), lambda: (randn(*shape),), max_kernels=2)


@pytest.mark.parametrize(("pool", "shape", "kernels"), [
    (lambda: nn.AdaptiveMaxPool2d((4, 3), return_indices=True), (2, 3, 9, 10), 2),
    (lambda: nn.AdaptiveMaxPool2d(1, return_indices=True), (2, 4, 28, 28), 2),  # global
    (lambda: nn.AdaptiveMaxPool1d(3), (2, 3, 10), 1),
    (lambda: nn.AdaptiveMaxPool3d((2, 3, 1), return_indices=True), (1, 2, 5, 7, 4), 3),
], ids=["uneven", "global", "1d", "3d"])
def test_adaptive_max_pooling(pool: Callable[[], Any], shape: tuple[int, ...],
                              kernels: int) -> None:
    """Windows of PyTorch's adaptive sizes, one dimension at a time (the innermost first, so
    that ties and NaN pick PyTorch's indices); uneven windows gather their positions, a
    whole dimension is a reduction."""
    check(pool(), lambda: (_pool_input(*shape),), max_kernels=kernels)


@pytest.mark.parametrize(("pool", "shape", "kernels"), [
    (lambda: nn.AdaptiveAvgPool2d((4, 3)), (2, 3, 9, 10), 2),
    (lambda: nn.AdaptiveAvgPool3d((2, 3, 1)), (1, 2, 5, 7, 4), 3),
    (lambda: nn.AdaptiveAvgPool3d(1), (2, 3, 4, 4, 4), 1),
], ids=["2d_uneven", "3d_uneven", "3d_global"])
def test_adaptive_average_pooling(pool: Callable[[], Any], shape: tuple[int, ...],
                                  kernels: int) -> None:
    check(pool(), lambda: (randn(*shape),), max_kernels=kernels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_average_pooling(dtype: Any) -> None:
    """Summed in f32, as PyTorch accumulates half-precision windows."""
    check(nn.AvgPool2d(3, 2, 1), lambda: (randn(2, 3, 16, 16, dtype=dtype),), max_kernels=2)


def test_constant_padding() -> None:
    """F.pad with a constant (and a negative pad, which crops): concatenations."""
    check(lambda x: F.pad(x, (1, 2, -1, 3), value=-1.0).relu() * 2, lambda: (randn(2, 3, 4, 5),),
          max_kernels=2)


# ---------------------------------------------------------------------------------------------
# modules, buffers, several outputs


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 37))
        self.bias = nn.Parameter(torch.randn(37))

    def forward(self, x: Any) -> tuple[Any, Any]:
        y = x * self.scale + self.bias
        return y, y.sum(-1)


def test_buffers_and_several_outputs() -> None:
    m = WithBuffer()
    graph = check(m, lambda: (randn(4, 37),))
    with torch.no_grad():  # a new weight needs no recompile
        m.bias.add_(1.0)
    x = randn(4, 37)
    _close(graph(x), m(x), 2e-5)
    assert len(graph.specialisations) == 1


# ---------------------------------------------------------------------------------------------
# gathers and concatenation


class Embed(nn.Module):
    """Token embedding + learned positions."""

    def __init__(self, vocab: int = 100, positions: int = 16, dim: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(positions, dim)

    def forward(self, ids: Any) -> Any:
        return self.tok(ids) + self.pos(torch.arange(ids.shape[1]))


def test_embedding() -> None:
    check(Embed(), lambda: (torch.randint(0, 100, (2, 16)),), max_kernels=1)


@pytest.mark.parametrize("vocab", [37, 1000, 50257])
def test_cross_entropy(vocab: int) -> None:
    # One kernel for the rows' logsumexp, one for the mean of the picked log-probabilities
    # (read from the logits: the log-softmax is never stored).
    check(F.cross_entropy, lambda: (randn(8, vocab), torch.randint(0, vocab, (8,))),
          max_kernels=2)


def test_concat() -> None:
    check(lambda a, b: torch.cat([a * 2, b], dim=1) + 1, lambda: (randn(4, 5), randn(4, 7)))


def test_circular_padding() -> None:
    # torch's decomposition wrote the wrapped parts with slice_scatter (unsupported).
    conv = nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="circular")

    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (F.pad(x, (1, 2, 3, 0), mode="circular"), F.pad(x[0], (6, 6), mode="circular"),
                conv(x))

    check(f, lambda: (randn(2, 3, 5, 6),))


def test_roll() -> None:
    # torch-mlir concatenates slices cast to dynamic sizes; it sliced by the shift itself (a
    # shift of the size or more rolled nothing, a negative one failed to compile) and took
    # no roll of the flattened tensor.
    check(lambda x: (torch.roll(x, 1, -1) + torch.roll(x, (2, -3), (0, 1)), torch.roll(x, 13, 1),
                     torch.roll(x, -5, 0), torch.roll(x, 12, 1), torch.roll(x, 7),
                     torch.roll(x, -61)),
          lambda: (randn(5, 12),))


def _complex_rope(x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Llama 4's and DeepSeek-V2's rotary embedding (complex products of x's pairs), and
    the other ops on complex tensors that tileopt computes through their parts."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, 8, 2, dtype=x.dtype) / 8))
    angles = positions.to(x.dtype)[:, None] * freqs
    cis = torch.polar(torch.ones_like(angles), angles) * 0.5
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    rotated = torch.view_as_real(z * cis[:, None, :]).flatten(2)
    t = z.transpose(0, 1)
    parts = torch.cat([t.conj(), t * 2.0 - t, torch.complex(t.imag, t.real) / 3], -1)[..., 1:]
    return rotated, torch.view_as_real(parts).sum(-1) + t.abs()[..., :1] + t.real[..., :1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_complex_rotary_embedding(dtype: torch.dtype) -> None:
    # torch-mlir has no complex lowering: the graph computes the real and imaginary parts.
    check(_complex_rope, lambda: (randn(5, 3, 8, dtype=dtype), torch.arange(5)))


class _ComplexBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cis", torch.polar(torch.ones(4), torch.arange(4.0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.view_as_complex(x) * self.cis)


def test_complex_tensors_unsupported() -> None:
    def as_complex(x: torch.Tensor) -> Any:
        return torch.view_as_complex(x)

    def complex_exp(x: torch.Tensor) -> Any:
        return torch.view_as_real(torch.exp(torch.view_as_complex(x)))

    with pytest.raises(tileopt.UnsupportedOperatorError, match="aten.exp at .*real and imag"):
        tileopt.compile(complex_exp, (randn(4, 2),))
    with pytest.raises(tileopt.UnsupportedOperatorError, match="neither takes nor returns"):
        tileopt.compile(as_complex, (randn(4, 2),))
    with pytest.raises(tileopt.errors.ExportError, match="buffer 'cis' has dtype torch.complex64"):
        tileopt.compile(_ComplexBuffer(), (randn(4, 2),))


def _assign_slices(x: torch.Tensor, y: torch.Tensor, cache: torch.Tensor) -> tuple[Any, ...]:
    z = x * 2
    z[:, 2:6] = y  # a unit step
    z[-1] = y[:, 0].sum()  # a select of a negative position, from a 0-d tensor
    z[:, 1::3] = -1.0  # a step of 3, from a filled slice
    z[1:, -2:] += 1  # read, modify and write back a slice from the end
    z[:, 9:100] *= 3  # an end past the size
    cache = cache.clone()
    cache[:, :, 3:5] = x[:2, :8].reshape(2, 2, 4, 1).transpose(1, 2)  # a cache's new positions
    return z, cache


def test_slice_assignment() -> None:
    # Assignments to slices reach the graph as aten.slice_scatter and aten.select_scatter,
    # which torch-mlir lowers to tensor.insert_slice (no kernel formation took it): selects
    # now.
    check(_assign_slices, lambda: (randn(5, 11), randn(5, 4), randn(2, 4, 6, 1)))

    def assign(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = x * 2
        z[:, 2:6] = y.exp()
        return z + 1

    # The select joins the kernel that computes the tensor.
    check(assign, lambda: (randn(5, 11), randn(5, 4)), max_kernels=1)


def test_mask_built_by_slices() -> None:
    # torchvision's Swin builds its shifted windows' mask by filling slices of zeros.
    def mask(x: torch.Tensor) -> torch.Tensor:
        m = torch.zeros(8, 8)
        count = 0
        for h in ((0, -4), (-4, -2), (-2, None)):
            for w in ((0, -4), (-4, -2), (-2, None)):
                m[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        return x + m

    # Each select gathers the slice it fills from the one before, through that slice:
    # recomputed there, 4 kernels (11 when each gather read a stored result).
    check(mask, lambda: (randn(8, 8),), max_kernels=4)


def test_llama_block() -> None:
    llama = LlamaBlock(hidden=128, fused_qkv=True, rotate_half=True)
    check(llama, lambda: (randn(2, 16, 64),), tol=1e-4)
