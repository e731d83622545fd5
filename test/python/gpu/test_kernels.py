"""The reference kernels of ``tileopt.kernels``, compiled for sm_80 and sm_90 and run in the
PTX emulator against PyTorch, plus issue 4's quality checks on them.

Correctness: several shapes per kernel, most of them not multiples of the tile; integer
results and copies must be exact, float results within the rounding of the operation
(sums and dot products: a bound that grows with the number of terms). The emulator raises
on any out-of-bounds access, so a passing run also means zero out-of-bounds accesses.

Quality: ptxas accepts every kernel with zero spills; contiguous f32 tiles move through
128-bit accesses; the memory-bound kernels touch at most 1.1x the minimum number of 32-byte
global sectors (the bytes the operation must read and write, / 32).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from tileopt import kernels
from tileopt.compiler.tools import find_ptxas, run_ptxas
from tileopt.runtime.abi import ArgumentError

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
EPS32 = torch.finfo(torch.float32).eps
# One rounding of an f32 result to the type: half an ulp, relative.
ROUND = {"f32": EPS32 / 2, "f16": 2.0**-11, "bf16": 2.0**-8}

# Every reference kernel: test id -> (function in tileopt.kernels, parameters).
KERNELS: dict[str, tuple[str, dict[str, Any]]] = {
    "vector_add_f32": ("vector_add", {"dtype": "f32"}),
    "vector_add_f16": ("vector_add", {"dtype": "f16"}),
    "vector_add_bf16": ("vector_add", {"dtype": "bf16"}),
    "bias_gelu_f32": ("bias_gelu", {"dtype": "f32"}),
    "bias_gelu_f16": ("bias_gelu", {"dtype": "f16"}),
    "bias_gelu_bf16": ("bias_gelu", {"dtype": "bf16"}),
    "softmax": ("softmax", {}),
    "softmax_online": ("softmax_online", {}),
    "softmax_online_256": ("softmax_online", {"block": 256}),
    "layer_norm": ("layer_norm", {}),
    "row_sum": ("row_sum", {}),
    "col_sum": ("col_sum", {}),
    "argmax": ("argmax", {}),
    "transpose_f32": ("transpose", {"dtype": "f32"}),
    "transpose_f16": ("transpose", {"dtype": "f16"}),
    "matmul_f32": ("matmul", {"dtype": "f32"}),
    "matmul_f16": ("matmul", {"dtype": "f16"}),
    "matmul_bf16": ("matmul", {"dtype": "bf16"}),
    "matmul_bias_relu": ("matmul", {"dtype": "f16", "epilogue": "bias_relu"}),
    "batched_matmul_f16": ("batched_matmul", {"dtype": "f16"}),
    "batched_matmul_bf16": ("batched_matmul", {"dtype": "bf16"}),
    "attention_f16": ("attention", {"dtype": "f16"}),
    "attention_causal_bf16": ("attention", {"dtype": "bf16", "causal": True}),
}


def kernel(compiled: Any, kid: str, target: str) -> Any:
    name, params = KERNELS[kid]
    return compiled(name, target, **params)


def assert_close(out: torch.Tensor, ref: torch.Tensor, atol: Any, rtol: float = 0.0) -> None:
    """``|out - ref| <= atol + rtol * |ref|`` elementwise (``atol`` may be a tensor); a NaN
    passes only where the reference is NaN too, an infinity only where it is the same one."""
    assert out.shape == ref.shape, (out.shape, ref.shape)
    out64, ref64 = out.double(), ref.double()
    err = (out64 - ref64).abs()
    bound = torch.as_tensor(atol, dtype=torch.float64) + rtol * ref64.abs()
    bad = ~((err <= bound) | (out64 == ref64) | (out64.isnan() & ref64.isnan()))
    if bad.any():
        i = tuple(int(v) for v in bad.nonzero()[0])
        raise AssertionError(
            f"{int(bad.sum())} of {bad.numel()} elements differ; first at {i}: "
            f"got {out64[i].item()!r}, expected {ref64[i].item()!r}, "
            f"bound {bound.expand_as(err)[i].item():.3g}; max error {err.max().item():.3g}"
        )


def sum_bound(x: torch.Tensor, dim: int, block: int) -> torch.Tensor:
    """Error bound of an f32 sum along ``dim``: a sequential loop over blocks of ``block``
    then a tree over the block, i.e. at most ``cdiv(n, block) + log2(block)`` roundings
    deep, each at most ``eps/2 * sum |x|`` (first order), plus one for the result."""
    n = x.shape[dim]
    depth = kernels.cdiv(n, block) + math.ceil(math.log2(block)) + 1
    return depth * (EPS32 / 2) * x.double().abs().sum(dim) + 1e-30


# ---------------------------------------------------------------------------------------------
# correctness


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 1000, 4097])
def test_vector_add(compiled: Any, target: str, dtype: str, n: int) -> None:
    td = TORCH_DTYPES[dtype]
    x, y = torch.randn(n, dtype=td), torch.randn(n, dtype=td)
    out = torch.full_like(x, float("nan"))
    compiled("vector_add", target, dtype=dtype).launch(kernels.vector_add_grid(n), x, y, out)
    assert torch.equal(out, x + y)  # one correctly rounded add, like torch's


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("shape", [(33, 70), (64, 256), (5, 1000)])
def test_bias_gelu(compiled: Any, target: str, dtype: str, shape: tuple[int, int]) -> None:
    td = TORCH_DTYPES[dtype]
    x = (torch.randn(shape) * 3).to(td)
    bias = torch.randn(shape[1]).to(td)
    out = torch.full_like(x, float("nan"))
    k = compiled("bias_gelu", target, dtype=dtype)
    k.launch(kernels.bias_gelu_grid(shape), x, bias, out)
    # The kernel computes in f32 and rounds once; torch's gelu is the exact (erf) one.
    ref = F.gelu(x.double() + bias.double())
    assert_close(out, ref, atol=1e-6, rtol=ROUND[dtype] + 8 * EPS32)


@pytest.mark.parametrize("shape", [(7, 1000), (3, 1024), (4, 37), (1, 1)])
def test_softmax(compiled: Any, target: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape) * 4
    y = torch.full_like(x, float("nan"))
    compiled("softmax", target).launch(kernels.softmax_grid(shape), x, y)
    assert_close(y, torch.softmax(x.double(), dim=1), atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize(
    ("block", "shape"),
    [(256, (5, 1000)), (256, (3, 4097)), (256, (4, 70)), (256, (2, 256)), (256, (2, 1)),
     (1024, (3, 4097)), (1024, (2, 1000))],
)
def test_softmax_online(
    compiled: Any, target: str, block: int, shape: tuple[int, int]
) -> None:
    # Rows whose maximum sits in a late block make the running sum rescale.
    x = torch.randn(shape) * 8 + torch.linspace(-20, 20, shape[1])
    y = torch.full_like(x, float("nan"))
    compiled("softmax_online", target, block=block).launch(kernels.softmax_grid(shape), x, y)
    assert_close(y, torch.softmax(x.double(), dim=1), atol=1e-7, rtol=2e-5)


@pytest.mark.parametrize("shape", [(37, 1000), (5, 70), (16, 1024), (1, 1)])
def test_layer_norm(compiled: Any, target: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape) * 2 + 1
    weight, bias = torch.randn(shape[1]), torch.randn(shape[1])
    y = torch.full_like(x, float("nan"))
    compiled("layer_norm", target).launch(
        kernels.layer_norm_grid(shape), x, weight, bias, y, 1e-5
    )
    ref = F.layer_norm(x.double(), shape[1:], weight.double(), bias.double(), 1e-5)
    assert_close(y, ref, atol=2e-5, rtol=1e-5)


def test_fp_fusion_is_the_default_and_can_be_turned_off() -> None:
    """Multiplies and adds fuse into fma like nvcc's and Triton's defaults; fp_fusion=False
    keeps each one rounded on its own. Both are correct."""
    from tileopt.compiler import compile

    shape = (5, 300)
    x = torch.randn(shape) * 2 + 1
    weight, bias = torch.randn(shape[1]), torch.randn(shape[1])
    ref = F.layer_norm(x.double(), shape[1:], weight.double(), bias.double(), 1e-5)
    for fusion in (True, False):
        k = compile(kernels.layer_norm(), "sm_80", fp_fusion=fusion)
        ptx = str(k.asm["ptx"])
        assert ("fma.rn.f32" in ptx) == fusion
        assert fusion or "mul.rn.f32" in ptx
        y = torch.full_like(x, float("nan"))
        k.launch(kernels.layer_norm_grid(shape), x, weight, bias, y, 1e-5)
        assert_close(y, ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(33, 700), (1, 4097), (64, 64), (5, 1)])
def test_row_sum(compiled: Any, target: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape)
    out = torch.full((shape[0],), float("nan"))
    compiled("row_sum", target).launch(kernels.row_sum_grid(shape), x, out)
    assert_close(out, x.double().sum(1), atol=sum_bound(x, 1, 256))


def test_cross_warp_partials_are_vectors() -> None:
    """A thread's partial sums of several rows sit in consecutive shared-memory slots, so it
    writes and reads them as vectors (as Triton does): row_sum's 4 rows on 2 x 2 warps give
    each thread 2 rows."""
    from tileopt.compiler import compile

    kern = compile(kernels.row_sum(block_m=4, block_n=256), "sm_90", aligned=True,
                   divisible_sizes=["x"], int32_indexing=True)
    ptx = str(kern.asm["ptx"])
    assert "st.shared.v2.b32" in ptx and "ld.shared.v2.b32" in ptx
    for shape in [(37, 320), (4, 256), (130, 16)]:
        x = torch.randn(shape)
        out = torch.full((shape[0],), float("nan"))
        kern.launch(kernels.row_sum_grid(shape, 4), x, out)
        assert_close(out, x.double().sum(1), atol=sum_bound(x, 1, 256))


@pytest.mark.parametrize("shape", [(33, 700), (4097, 3), (64, 128), (1, 5)])
def test_col_sum(compiled: Any, target: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape)
    out = torch.full((shape[1],), float("nan"))
    compiled("col_sum", target).launch(kernels.col_sum_grid(shape), x, out)
    assert_close(out, x.double().sum(0), atol=sum_bound(x, 0, 32))


@pytest.mark.parametrize("shape", [(33, 700), (5, 1024), (16, 1), (3, 70)])
def test_argmax(compiled: Any, target: str, shape: tuple[int, int]) -> None:
    # Few distinct values: most rows have ties, where the first index must win.
    x = torch.randint(-4, 5, shape).float()
    x[0] = -float("inf")  # a row of -inf: index 0, not a padding column
    out = torch.full((shape[0],), -1, dtype=torch.int32)
    compiled("argmax", target).launch(kernels.argmax_grid(shape), x, out)
    assert torch.equal(out, x.argmax(dim=1).int())


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [(33, 70), (64, 128), (1, 100), (100, 1)])
def test_transpose(compiled: Any, target: str, dtype: str, shape: tuple[int, int]) -> None:
    x = torch.randn(shape).to(TORCH_DTYPES[dtype])
    y = torch.zeros(shape[::-1], dtype=x.dtype)
    compiled("transpose", target, dtype=dtype).launch(kernels.transpose_grid(shape), x, y)
    assert torch.equal(y, x.t())


def matmul_bound(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Error bound of an f32-accumulated ``a @ b`` (exact products of the inputs), against an
    exact reference: ``K`` roundings of at most ``eps/2 * (|a| @ |b|)`` each (first order)."""
    k = a.shape[-1]
    return (k + 1) * (EPS32 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30


def assert_wgmma_stays_async(ptx: str, target: str) -> None:
    """ptxas (where installed) gives no performance notice for ``ptx``: no C7515, "wgmma.mma_async
    instructions are serialized", which it gives where something other than a wgmma writes the
    accumulators of a wgmma still running."""
    if find_ptxas() is not None:
        _, log = run_ptxas(ptx, target, cubin=False)
        assert "Potential Performance Loss" not in log, log


MATMUL_SHAPES = [(70, 100, 90), (64, 64, 64), (33, 17, 129), (1, 300, 1)]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize(("m", "k", "n"), MATMUL_SHAPES)
def test_matmul(compiled: Any, target: str, dtype: str, m: int, k: int, n: int) -> None:
    td = TORCH_DTYPES[dtype]
    a, b = torch.randn(m, k).to(td), torch.randn(k, n).to(td)
    c = torch.full((m, n), float("nan"))
    compiled("matmul", target, dtype=dtype).launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    # Against the f32 torch matmul of the same inputs: both are within the bound of the
    # exact product, so within twice the bound of each other.
    ref = a.float() @ b.float()
    assert_close(c, ref, atol=2 * matmul_bound(a, b))
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize(("m", "k", "n"), MATMUL_SHAPES)
def test_int8_matmul(compiled: Any, target: str, m: int, k: int, n: int) -> None:
    """``matmul("i8", out_dtype="i32")`` is ``torch._int_mm``: exact int32 sums on tensor
    cores (mma.sync m16n8k32, wgmma m64n64k32 on sm_90a)."""
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8)
    c = torch.full((m, n), -1, dtype=torch.int32)
    kern = compiled("matmul", target, dtype="i8", out_dtype="i32", block_k=32)
    assert (".s32.s8.s8" in str(kern.asm["ptx"])) and "satfinite" not in str(kern.asm["ptx"])
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    assert torch.equal(c, torch._int_mm(a, b))


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90a"])
@pytest.mark.parametrize("dtype", ["f8E4M3FN", "f8E5M2"])
def test_fp8_matmul(compiled: Any, target: str, dtype: str) -> None:
    """``matmul(fp8)``: exact fp8 products summed in f32, on tensor cores from sm_89
    (mma.sync m16n8k32 .e4m3/.e5m2, wgmma m64n64k32 on sm_90a), on CUDA cores before."""
    tdt = {"f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}[dtype]
    gen = torch.Generator().manual_seed(3)
    a = (torch.randn(70, 100, generator=gen) * 4).to(tdt)
    b = (torch.randn(100, 90, generator=gen) * 4).to(tdt)
    c = torch.full((70, 90), float("nan"))
    kern = compiled("matmul", target, dtype=dtype, block_k=32)
    name = "e4m3" if dtype == "f8E4M3FN" else "e5m2"
    assert (f".f32.{name}.{name}" in str(kern.asm["ptx"])) == (target != "sm_80")
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    bound = 100 * 2.0**-14 * (a.double().abs() @ b.double().abs())
    assert_close(c, a.double() @ b.double(), atol=bound)


@pytest.mark.parametrize(("options", "message"), [
    ({}, "an i8 matmul takes out_dtype='i32' and no epilogue"),
    ({"out_dtype": "i32", "epilogue": "bias_relu"}, "no epilogue"),
    ({"out_dtype": "i32", "block_k": 16}, r"i8 matmul needs block_k >= 32"),
    ({"out_dtype": "i32", "block_k": 8}, r"i8 matmul needs block_k >= 32"),
])
def test_int8_matmul_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kernels.matmul("i8", **options)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(("m", "k", "n"), [(70, 100, 90), (33, 17, 129)])
def test_matmul_rounds_to_out_dtype(compiled: Any, target: str, dtype: str, m: int, k: int,
                                    n: int) -> None:
    """``out_dtype`` = the inputs' (as torch.matmul returns): the f32 accumulator rounded once
    to f16/bf16 (mma.sync on sm_80, wgmma on sm_90a)."""
    td = TORCH_DTYPES[dtype]
    a, b = torch.randn(m, k).to(td), torch.randn(k, n).to(td)
    c = torch.full((m, n), float("nan"), dtype=td)
    kern = compiled("matmul", target, dtype=dtype, out_dtype=dtype)
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    exact = a.double() @ b.double()
    bound = matmul_bound(a, b)
    assert_close(c, exact, atol=bound + ROUND[dtype] * (exact.abs() + bound), rtol=0)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_batched_matmul_rounds_to_out_dtype(compiled: Any, target: str, dtype: str) -> None:
    """As torch.bmm returns: each matrix's f32 accumulator rounded once to f16/bf16."""
    td = TORCH_DTYPES[dtype]
    a, b = torch.randn(3, 70, 100).to(td), torch.randn(3, 100, 90).to(td)
    c = torch.full((3, 70, 90), float("nan"), dtype=td)
    kern = compiled("batched_matmul", target, dtype=dtype, out_dtype=dtype)
    kern.launch(kernels.batched_matmul_grid(a.shape, b.shape), a, b, c)
    exact = a.double() @ b.double()
    bound = matmul_bound(a, b)
    assert_close(c, exact, atol=bound + ROUND[dtype] * (exact.abs() + bound), rtol=0)


def test_matmul_out_dtype_is_checked() -> None:
    with pytest.raises(ValueError, match="out_dtype must be one of"):
        kernels.matmul("f16", out_dtype="f8")
    with pytest.raises(ValueError, match="out_dtype must be one of"):
        kernels.batched_matmul("f16", out_dtype="i8")
    with pytest.raises(ValueError, match="group_m must be a positive integer"):
        kernels.matmul("f16", group_m=0)


@pytest.mark.parametrize(("group_m", "m", "n"), [(3, 200, 330), (8, 33, 500), (8, 300, 40)])
def test_grouped_matmul_covers_every_tile_once(compiled: Any, target: str, group_m: int, m: int,
                                               n: int) -> None:
    """Grouped ordering: every tile of c is computed (by one program), also where the last
    group has fewer rows of tiles than ``group_m``."""
    a, b = torch.randn(m, 48).half(), torch.randn(48, n).half()
    c = torch.full((m, n), float("nan"))
    kern = compiled("matmul", target, dtype="f16", group_m=group_m)
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(("m", "k", "n"), [(70, 100, 90), (33, 17, 129)])
def test_matmul_bias_relu(compiled: Any, target: str, m: int, k: int, n: int) -> None:
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    bias = torch.randn(n)
    c = torch.full((m, n), float("nan"))
    kern = compiled("matmul", target, dtype="f16", epilogue="bias_relu")
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, bias, c)
    ref = torch.relu(a.float() @ b.float() + bias)
    assert_close(c, ref, atol=2 * matmul_bound(a, b) + EPS32 * bias.abs())
    assert (c >= 0).all()


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [(3, 70, 100, 90), (2, 64, 32, 64), (4, 1, 40, 9)])
def test_batched_matmul(
    compiled: Any, target: str, dtype: str, shape: tuple[int, int, int, int]
) -> None:
    batch, m, k, n = shape
    td = TORCH_DTYPES[dtype]
    a, b = torch.randn(batch, m, k).to(td), torch.randn(batch, k, n).to(td)
    c = torch.full((batch, m, n), float("nan"))
    kern = compiled("batched_matmul", target, dtype=dtype)
    kern.launch(kernels.batched_matmul_grid(a.shape, b.shape), a, b, c)
    assert_close(c, a.float() @ b.float(), atol=2 * matmul_bound(a, b))


@pytest.mark.parametrize(("dtype", "causal"), [("f16", False), ("bf16", True), ("f32", True)])
@pytest.mark.parametrize("shape", [(2, 77, 90, 40), (1, 64, 64, 64), (3, 5, 130, 16)])
def test_attention(
    compiled: Any, target: str, dtype: str, causal: bool, shape: tuple[int, int, int, int]
) -> None:
    batch, m, n, d = shape
    if causal:
        n = m
    td = TORCH_DTYPES[dtype]
    q = torch.randn(batch, m, d).to(td)
    k, v = torch.randn(batch, n, d).to(td), torch.randn(batch, n, d).to(td)
    o = torch.full((batch, m, d), float("nan")).to(td)
    kern = compiled("attention", target, dtype=dtype, causal=causal)
    kern.launch(kernels.attention_grid(q.shape), q, k, v, o, d**-0.5)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    # p is rounded to the inputs' type before the product, as in Triton's tutorial.
    assert_close(o, ref, atol=(4 * ROUND[dtype] + 1e-6) * ref.abs().max(), rtol=4 * ROUND[dtype])


def test_contiguous_views_reject_strided_tensors(compiled: Any) -> None:
    k = compiled("softmax", "sm_90")
    x = torch.randn(64, 48)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: view<\?x\?xf32, strides \[\?, 1\]"):
        k.launch(kernels.softmax_grid((48, 64)), x.t(), torch.empty(48, 64))
    # A column slice keeps a unit innermost stride (and a row stride of 48): accepted.
    y = torch.empty(64, 24)
    k.launch(kernels.softmax_grid(y.shape), x[:, 10:34], y)
    assert_close(y, torch.softmax(x[:, 10:34].double(), 1), atol=1e-7, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# quality


@pytest.mark.parametrize("kid", list(KERNELS))
def test_ptxas_accepts_without_spills(compiled: Any, target: str, kid: str) -> None:
    md = kernel(compiled, kid, target).metadata
    if md.registers is None:
        pytest.skip("neither ptxas nor nvJitLink is installed: no register/spill report")
    assert md.assembler in ("ptxas", "nvjitlink")
    assert md.spill_bytes == 0, f"{kid} on {target}: {md.spill_bytes} spill bytes"
    assert 0 < md.registers <= 255


@pytest.mark.parametrize("kid", [k for k in KERNELS if "matmul" in k])
def test_matmuls_use_tensor_cores_for_16bit_inputs(compiled: Any, target: str, kid: str) -> None:
    ptx = str(kernel(compiled, kid, target).asm["ptx"])
    if KERNELS[kid][1]["dtype"] == "f32":
        assert "mma.sync" not in ptx  # exact f32 on CUDA cores, no tf32
        assert "fma.rn.f32" in ptx
    else:
        assert "mma.sync.aligned.m16n8k16.row.col.f32" in ptx
        assert "ldmatrix" in ptx


# Kernels whose f32 (or 16-byte f16/bf16) tiles are contiguous in memory along the tile's
# innermost dim: (loads vectorised, stores vectorised).
VECTOR_ACCESSES = {
    "vector_add_f32": (True, True),
    "vector_add_f16": (True, True),
    "vector_add_bf16": (True, True),
    "bias_gelu_f32": (True, True),
    "softmax": (True, True),
    "softmax_online": (True, True),
    "layer_norm": (True, True),
    "row_sum": (True, False),  # stores a 1-D column of sums
    "col_sum": (True, False),  # 64 sums over 128 threads: one float each, no replication
}


def test_small_tiles_use_narrower_vectors_instead_of_replicating(
    compiled: Any, target: str
) -> None:
    # A 1x256 f32 row over 128 threads: 2 elements (8 bytes) per thread, so no two
    # warps load the same row (16-byte vectors would leave half the threads replicating).
    ptx = str(kernel(compiled, "softmax_online_256", target).asm["ptx"])
    assert "ld.global.v2.b32" in ptx and "st.global.v2.b32" in ptx
    assert "ld.global.v4.b32" not in ptx


@pytest.mark.parametrize("kid", list(VECTOR_ACCESSES))
def test_contiguous_tiles_use_128bit_accesses(compiled: Any, target: str, kid: str) -> None:
    ptx = str(kernel(compiled, kid, target).asm["ptx"])
    loads, stores = VECTOR_ACCESSES[kid]
    if loads:
        assert "ld.global.v4.b32" in ptx
    if stores:
        assert "st.global.v4.b32" in ptx


def _sectors(stats: Any) -> int:
    return stats.global_load_sectors + stats.global_store_sectors


def _run_memory_bound(compiled: Any, target: str, case: str) -> tuple[int, float]:
    """Runs one memory-bound case; returns (sectors touched, minimum sectors)."""
    if case.startswith("vector_add"):
        dtype, n = case.split("-")[1], 4097 * 3
        td = TORCH_DTYPES[dtype]
        x, y, out = torch.randn(n, dtype=td), torch.randn(n, dtype=td), torch.empty(n, dtype=td)
        stats = compiled("vector_add", target, dtype=dtype).launch(
            kernels.vector_add_grid(n), x, y, out
        )
        return _sectors(stats), 3 * n * x.element_size() / 32
    if case.startswith("bias_gelu"):
        m, n = (int(v) for v in case.split("-")[1].split("x"))
        x, bias, out = torch.randn(m, n), torch.randn(n), torch.empty(m, n)
        stats = compiled("bias_gelu", target, dtype="f32").launch(
            kernels.bias_gelu_grid((m, n)), x, bias, out
        )
        return _sectors(stats), (2 * m * n + n) * 4 / 32
    if case == "softmax":
        m, n = 7, 1000
        x, y = torch.randn(m, n), torch.empty(m, n)
        stats = compiled("softmax", target).launch(kernels.softmax_grid((m, n)), x, y)
        return _sectors(stats), 2 * m * n * 4 / 32
    if case == "softmax_online":
        # Reads x twice by design (statistics, then outputs): its minimum is 2 reads + 1 write.
        m, n = 3, 4000
        x, y = torch.randn(m, n), torch.empty(m, n)
        stats = compiled("softmax_online", target).launch(kernels.softmax_grid((m, n)), x, y)
        return _sectors(stats), 3 * m * n * 4 / 32
    assert case == "layer_norm"
    m, n = 37, 1000
    x, w, b, y = torch.randn(m, n), torch.randn(n), torch.randn(n), torch.empty(m, n)
    stats = compiled("layer_norm", target).launch(kernels.layer_norm_grid((m, n)), x, w, b, y,
                                                  1e-5)
    return _sectors(stats), (2 * m * n + 2 * n) * 4 / 32


# Shapes whose rows start on 16-byte boundaries (row lengths a multiple of 4 f32), none of
# them a multiple of the tile in every dimension.
MEMORY_BOUND = [
    "vector_add-f32", "vector_add-f16", "vector_add-bf16",
    "bias_gelu-64x256", "bias_gelu-100x1000",
    "softmax", "softmax_online", "layer_norm",
]


@pytest.mark.parametrize("case", MEMORY_BOUND)
def test_memory_bound_kernels_touch_few_sectors(compiled: Any, target: str, case: str) -> None:
    sectors, minimum = _run_memory_bound(compiled, target, case)
    assert sectors <= 1.1 * minimum, (
        f"{case} on {target}: {sectors} sectors, {sectors / minimum:.3f}x the minimum "
        f"{minimum:.0f}"
    )


@pytest.mark.parametrize("kid", ["softmax", "bias_gelu_f32", "layer_norm"])
def test_unaligned_rows_stay_coalesced(compiled: Any, target: str, kid: str) -> None:
    """Rows of 1001 f32 are not 16-byte aligned: the scalar fallback moves them with one
    element per thread (through shared memory into the tile's layout), so a warp's accesses
    are contiguous: about 1.25x the minimum sectors (an unaligned 128-byte request spans 5
    sectors; a tile's unaligned edges add a little), not the 4x of scalar accesses in a
    16-byte-per-thread layout."""
    m, n = 48, 1001
    x = torch.randn(m, n)
    y = torch.full_like(x, float("nan"))
    if kid == "softmax":
        stats = kernel(compiled, kid, target).launch(kernels.softmax_grid((m, n)), x, y)
        expected, extra = torch.softmax(x.double(), dim=1), 0
    elif kid == "layer_norm":
        w, b = torch.randn(n), torch.randn(n)
        stats = kernel(compiled, kid, target).launch(
            kernels.layer_norm_grid((m, n)), x, w, b, y, 1e-5)
        expected = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
        extra = 2 * n * 4 * kernels.layer_norm_grid((m, n))[0]
    else:
        bias = torch.randn(n)
        stats = kernel(compiled, kid, target).launch(kernels.bias_gelu_grid((m, n)), x, bias, y)
        expected = F.gelu(x.double() + bias.double())
        extra = n * 4 * kernels.bias_gelu_grid((m, n))[0]
    assert_close(y, expected, atol=2e-5, rtol=1e-5)
    minimum = (2 * m * n * 4 + extra) / 32
    assert _sectors(stats) <= 1.3 * minimum, _sectors(stats) / minimum


def test_aligned_kernels_need_no_fallback_staging() -> None:
    from tileopt.compiler import compile

    plain = compile(kernels.bias_gelu("f32"), "sm_90")
    aligned = compile(kernels.bias_gelu("f32"), "sm_90", aligned=True)
    assert plain.metadata.shared_bytes > 0 and aligned.metadata.shared_bytes == 0
