"""tileopt's PTX beside Triton's for the same tile kernels, measured in the PTX emulator.

Every kernel exists twice with the same algorithm, block sizes and ``num_warps``: tileopt's from
:mod:`tileopt.kernels` (the one source of those kernels) and a Triton version written here. Both
are compiled ahead of time for the same target without a GPU, both PTX modules run in tileopt's
PTX emulator (:mod:`tileopt.emulator`) on the same inputs, and both outputs are checked against
PyTorch before any number is printed (a wrong kernel makes the script fail). Per kernel and metric
it prints tileopt's value, Triton's and the ratio tileopt / Triton (lower is better for tileopt
on every row; "loses" marks the rows above 1.05):

- ``registers``: registers per thread from ``ptxas -v`` (the same ptxas, the pip wheel's
  ``nvidia/cu13/bin/ptxas`` that tileopt finds, for both PTX modules, each for the ``.target``
  that its PTX declares: Triton writes ``sm_90a`` for capability 90).
- ``static instrs``: instruction statements in the kernel's ``.entry`` body (directives, labels
  and comments excluded; each line of Triton's inline asm that is an instruction counts).
- ``warp-instrs``: warp-instructions the emulator executed over the whole launch (predicated-off
  instructions included).
- ``global sectors``: 32-byte global-memory sectors of all load and store requests (emulator).
  The ``(min sectors)`` line under it is the least possible, every input byte read once and
  every output byte written once (for the matmul: the floor of its tiling, each block of ``a``
  read once per program column and each block of ``b`` once per program row), and tileopt's
  sectors over it.
- ``compile ms``: wall time of one compilation from the kernel's source to cubin, the median of
  ``--repeat`` runs after a warm-up (so imports and one-time initialisation are excluded).
  tileopt: ``tileopt.compile(kernel_builder, target, num_warps)`` (tile IR -> PTX -> cubin;
  building the KernelBuilder in Python is not in it, it is the ``builder`` stage below the table).
  tileopt's compile cache is not read (``TILEOPT_ALWAYS_COMPILE=1``; its write is included, as
  Triton's is).
  Triton: ``triton.compile(ASTSource(...), target=GPUTarget(...))`` (Python AST -> TTIR -> TTGIR
  -> LLIR -> PTX -> cubin) with its cache disabled (``TRITON_ALWAYS_COMPILE=1``) and
  ``TRITON_PTXAS_PATH`` set to the same ptxas that tileopt uses; this does include Triton's
  Python frontend (its ``ast`` stage) and its cache write (``cache``). Below the table, the
  time of each stage of the last compilation on both sides (Triton's from its compilation
  listener, tileopt's from ``Kernel.times``).

Specialisation (what each compiler may assume about the arguments). Triton's JIT specialises
each launch on its arguments: a pointer whose address is a multiple of 16 and an integer that is
a multiple of 16 get ``tt.divisibility = 16`` (which is what lets Triton vectorise), and an
integer equal to 1 becomes a constant. This script gives ``triton.compile`` exactly the
attributes the JIT would give for the benchmark's tensors: ``tt.divisibility=16`` on every
pointer (torch's allocations are 16-byte aligned) and on every integer argument (sizes and row
strides) whose value here is a multiple of 16; innermost strides are 1 in the Triton source
itself, as in tileopt's views (``strided<[?, 1]>``). tileopt gets the same promise:
``tileopt.compile(..., aligned=True)`` puts ``tile.divisibility = 16`` on every view (the first
element's address and the strides other than 1 are multiples of 16 bytes; the launcher checks
it), so where the tile offsets are provably multiples of the vector width it emits 16-byte
accesses with no run-time check and no unaligned fallback; and
``tileopt.compile(..., divisible_sizes=[...])`` promises, for the views whose innermost size is
a multiple of 16 here, what ``tt.divisibility`` on that size tells Triton (so a 16-byte vector
is all in bounds or all out: one predicate, no scalar tail); and
``tileopt.compile(..., int32_indexing=True)`` promises that every view's sizes and element
offsets fit in 32 bits, which Triton assumes of its ``i32`` size and stride arguments (its
offsets are 32-bit), so both index in 32-bit arithmetic; and
``tileopt.compile(..., same_shapes=[...])`` groups the views that the Triton kernel masks with
the same size arguments (vector add's ``x``, ``y``, ``out`` all use ``n``), so their bounds
checks share one size, as Triton's do. Sizes themselves are not known to either compiler:
both mask loads and stores with them (tileopt from the views' bounds in every dimension,
Triton with explicit masks wherever a tile can leave the tensor).

Target: sm_90 (Triton writes ``.target sm_90a``). The matmul is measured three times: on sm_80,
``mma.sync`` on both sides; on sm_90, tileopt's ``mma.sync`` (what it emits for plain sm_90)
against Triton's ``mma.sync`` (Triton's own switch ``DISABLE_MMA_V3=1``, set only while it
compiles that case); on sm_90a, Hopper's ``wgmma`` on both sides (Triton's default on
capability 90; tileopt's with ``target="sm_90a"``). Triton keeps its default ``num_stages=3``
software pipelining with ``cp.async`` in all three, part of what Triton does. ``--classes``
adds the emulated warp-instructions by class (alu, fp, ld.global, shfl, ...) of both sides,
which shows where tileopt's extra instructions are.

Triton is an optional dependency of this benchmark only (not in requirements.txt):

    .venv/bin/pip install triton==3.5.1
    .venv/bin/python benchmarks/ptx_vs_triton.py [--quick] [--repeat 5] [--only softmax,matmul_f16]

Without Triton the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tileopt
import tileopt.emulator as emu
import torch
from tileopt import kernels
from tileopt.compiler.tools import find_ptxas, parse_ptxas_info, run_ptxas

TRITON_VERSION = "3.5.1"
LOSS_THRESHOLD = 1.05  # a ratio above this is reported as a loss for tileopt


def _import_triton() -> Any | None:
    """Imports Triton with its cache off and tileopt's ptxas; None when it is not installed."""
    ptxas = find_ptxas()
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    os.environ["TILEOPT_ALWAYS_COMPILE"] = "1"  # both compile every time
    for variable in ("TRITON_CACHE_DIR", "TILEOPT_CACHE_DIR"):
        if variable not in os.environ:  # a throw-away cache: it is never read anyway
            cache = tempfile.mkdtemp(prefix="ptx-vs-triton-cache-")
            atexit.register(shutil.rmtree, cache, ignore_errors=True)
            os.environ[variable] = cache
    if ptxas is not None:
        os.environ["TRITON_PTXAS_PATH"] = str(ptxas)
    try:
        import triton
    except ImportError:
        return None
    return triton


triton = _import_triton()
if triton is None:
    print(
        "ptx_vs_triton: Triton is not installed; it is an optional benchmark dependency:\n"
        f"    {sys.executable} -m pip install triton=={TRITON_VERSION}\n"
        "skipping the comparison."
    )
    sys.exit(0)

import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Triton kernels: the same algorithms and blocks as tileopt.kernels


@triton.jit
def tr_vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def tr_bias_gelu(
    x_ptr, bias_ptr, out_ptr, m, n, stride_x, stride_out,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask)
    bias = tl.load(bias_ptr + cols, mask=cols < n)
    s = x + bias[None, :]
    y = s * 0.5 * (tl.math.erf(s * 0.7071067811865476) + 1.0)
    tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], y, mask=mask)


@triton.jit
def tr_softmax(x_ptr, y_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=cols < n)


@triton.jit
def tr_layer_norm(
    x_ptr, w_ptr, b_ptr, y_ptr, m, n, stride_x, stride_y, eps,
    BLOCK: tl.constexpr, ROWS: tl.constexpr,
):
    cols = tl.arange(0, BLOCK)
    inside = cols < n
    w = tl.load(w_ptr + cols, mask=inside)
    b = tl.load(b_ptr + cols, mask=inside)
    first = tl.program_id(0) * ROWS
    last = tl.minimum(first + ROWS, m)
    for row in range(first, last):
        x = tl.load(x_ptr + row * stride_x + cols, mask=inside, other=0.0)
        mean = tl.sum(x, axis=0) / n
        xc = tl.where(inside, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / n
        rstd = tl.math.rsqrt(var + eps)
        tl.store(y_ptr + row * stride_y + cols, xc * rstd * w + b, mask=inside)


@triton.jit
def tr_row_sum(x_ptr, out_ptr, m, n, stride_x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < m) & (cols[None, :] < n)
        acc += tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=rows < m)


@triton.jit
def tr_col_sum(x_ptr, out_ptr, m, n, stride_x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, m, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < m) & (cols[None, :] < n)
        acc += tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n)


@triton.jit
def tr_argmax(x_ptr, out_ptr, m, n, stride_x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    tl.store(out_ptr + rows, tl.argmax(x, axis=1, tie_break_left=True), mask=rows < m)


@triton.jit
def tr_transpose(
    x_ptr, y_ptr, m, n, stride_x, stride_y, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    t = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask)
    tl.store(y_ptr + cols[:, None] * stride_y + rows[None, :], tl.trans(t), mask=tl.trans(mask))


@triton.jit
def tr_matmul(
    a_ptr, b_ptr, c_ptr, m, n, k, stride_a, stride_b, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, k, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + rows[:, None] * stride_a + ks[None, :],
            mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_b + cols[None, :],
            mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0,
        )
        acc = tl.dot(a, b, acc)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    tl.store(c_ptr + rows[:, None] * stride_c + cols[None, :], acc, mask=mask)


# ---------------------------------------------------------------------------------------------
# the cases


Arg = str | int | float  # a tensor's name in Case.tensors, or a scalar


@dataclass
class Case:
    """One kernel on both sides, its inputs and its expected outputs."""

    name: str
    tileopt_kernel: Callable[[], Any]  # -> tileopt.builder.KernelBuilder
    tileopt_grid: tuple[int, ...]
    tileopt_args: list[Arg]
    triton_fn: Any  # a triton.JITFunction
    triton_args: dict[str, Arg]  # the non-constexpr parameters, in order
    triton_constexprs: dict[str, int]
    triton_grid: tuple[int, ...]
    tensors: dict[str, torch.Tensor]  # inputs and (zero-filled) outputs
    expected: dict[str, torch.Tensor]  # output name -> torch's result
    outputs_min_bytes: int = 0  # bytes written at least once
    inputs_min_bytes: int = 0  # bytes read at least once
    target: str = "sm_90"
    num_warps: int = 4
    atol: float = 1e-5
    rtol: float = 1e-5
    emulate: bool = True  # False: static metrics only (registers, PTX, compile time)
    notes: list[str] = field(default_factory=list)
    # tileopt views of one shape, where the Triton kernel masks them with the same sizes
    same_shapes: list[tuple[str, ...]] = field(default_factory=list)
    variant: str = ""  # tells apart cases of one kernel and target
    triton_env: dict[str, str] = field(default_factory=dict)  # set while Triton compiles

    @property
    def label(self) -> str:
        return f"{self.name} ({self.target}{', ' + self.variant if self.variant else ''})"

    @property
    def min_sectors(self) -> int:
        return math.ceil(self.inputs_min_bytes / 32) + math.ceil(self.outputs_min_bytes / 32)


def _nbytes(*ts: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def make_cases(quick: bool, gen: torch.Generator) -> list[Case]:
    """The benchmark's kernels with their shapes (smaller ones with ``quick``)."""

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dtype)

    cases: list[Case] = []

    # vector add: 1M f32 elements
    n = 1 << (16 if quick else 20)
    x, y = randn(n), randn(n)
    cases.append(Case(
        "vector_add", lambda: kernels.vector_add("f32", block=1024),
        kernels.vector_add_grid(n, 1024), ["x", "y", "out"],
        tr_vector_add, {"x_ptr": "x", "y_ptr": "y", "out_ptr": "out", "n": n},
        {"BLOCK": 1024}, (kernels.cdiv(n, 1024), 1, 1),
        {"x": x, "y": y, "out": torch.zeros(n)}, {"out": x + y},
        inputs_min_bytes=_nbytes(x, y), outputs_min_bytes=_nbytes(x),
        same_shapes=[("x", "y", "out")],
    ))

    # bias + GELU: M x N f32, 32 x 64 tiles
    m, n = (128, 512) if quick else (1024, 1024)
    x, bias = randn(m, n), randn(n)
    cases.append(Case(
        "bias_gelu", lambda: kernels.bias_gelu("f32", block_m=32, block_n=64),
        kernels.bias_gelu_grid((m, n), 32, 64), ["x", "bias", "out"],
        tr_bias_gelu,
        {"x_ptr": "x", "bias_ptr": "bias", "out_ptr": "out", "m": m, "n": n,
         "stride_x": n, "stride_out": n},
        {"BLOCK_M": 32, "BLOCK_N": 64}, (*kernels.bias_gelu_grid((m, n), 32, 64), 1),
        {"x": x, "bias": bias, "out": torch.zeros(m, n)},
        {"out": torch.nn.functional.gelu(x + bias)},
        inputs_min_bytes=_nbytes(x, bias), outputs_min_bytes=_nbytes(x),
        same_shapes=[("x", "out")],
    ))

    # row softmax: one 1024-wide tile per row
    m, n = (128, 1024) if quick else (1024, 1024)
    x = randn(m, n)
    cases.append(Case(
        "softmax", lambda: kernels.softmax(block=1024),
        kernels.softmax_grid((m, n)), ["x", "y"],
        tr_softmax, {"x_ptr": "x", "y_ptr": "y", "n": n, "stride_x": n, "stride_y": n},
        {"BLOCK": 1024}, (m, 1, 1),
        {"x": x, "y": torch.zeros(m, n)}, {"y": torch.softmax(x, dim=1)},
        inputs_min_bytes=_nbytes(x), outputs_min_bytes=_nbytes(x),
        same_shapes=[("x", "y")],
    ))

    # layer norm forward: 16 rows a program, weight and bias loaded once
    m, n, rows, eps = (128, 1024, 16, 1e-5) if quick else (1024, 1024, 16, 1e-5)
    x, w, b = randn(m, n), randn(n), randn(n)
    cases.append(Case(
        "layer_norm", lambda: kernels.layer_norm(block=1024, rows_per_program=rows),
        kernels.layer_norm_grid((m, n), rows), ["x", "w", "b", "y", eps],
        tr_layer_norm,
        {"x_ptr": "x", "w_ptr": "w", "b_ptr": "b", "y_ptr": "y", "m": m, "n": n,
         "stride_x": n, "stride_y": n, "eps": eps},
        {"BLOCK": 1024, "ROWS": rows}, (*kernels.layer_norm_grid((m, n), rows), 1, 1),
        {"x": x, "w": w, "b": b, "y": torch.zeros(m, n)},
        {"y": torch.nn.functional.layer_norm(x, (n,), w, b, eps)},
        inputs_min_bytes=_nbytes(x, w, b), outputs_min_bytes=_nbytes(x), atol=1e-4, rtol=1e-4,
        same_shapes=[("x", "y"), ("weight", "bias")],
    ))

    # row sum: 4 x 256 tiles, a loop over the columns
    m, n = (128, 1024) if quick else (1024, 1024)
    x = randn(m, n)
    cases.append(Case(
        "row_sum", lambda: kernels.row_sum(block_m=4, block_n=256),
        kernels.row_sum_grid((m, n), 4), ["x", "out"],
        tr_row_sum, {"x_ptr": "x", "out_ptr": "out", "m": m, "n": n, "stride_x": n},
        {"BLOCK_M": 4, "BLOCK_N": 256}, (*kernels.row_sum_grid((m, n), 4), 1, 1),
        {"x": x, "out": torch.zeros(m)}, {"out": x.sum(dim=1)},
        inputs_min_bytes=_nbytes(x), outputs_min_bytes=m * 4, atol=1e-3, rtol=1e-4,
    ))

    # column sum: 32 x 128 tiles, a loop over the rows
    m, n = (256, 512) if quick else (1024, 1024)
    x = randn(m, n)
    cases.append(Case(
        "col_sum", lambda: kernels.col_sum(block_m=32, block_n=128),
        kernels.col_sum_grid((m, n), 128), ["x", "out"],
        tr_col_sum, {"x_ptr": "x", "out_ptr": "out", "m": m, "n": n, "stride_x": n},
        {"BLOCK_M": 32, "BLOCK_N": 128}, (*kernels.col_sum_grid((m, n), 128), 1, 1),
        {"x": x, "out": torch.zeros(n)}, {"out": x.sum(dim=0)},
        inputs_min_bytes=_nbytes(x), outputs_min_bytes=n * 4, atol=1e-3, rtol=1e-4,
    ))

    # row argmax: one 1024-wide row a program, a two-operand reduce
    m, n = (128, 1024) if quick else (1024, 1024)
    x = randn(m, n)
    cases.append(Case(
        "argmax", lambda: kernels.argmax(block_m=1, block_n=1024),
        kernels.argmax_grid((m, n), 1), ["x", "out"],
        tr_argmax, {"x_ptr": "x", "out_ptr": "out", "m": m, "n": n, "stride_x": n},
        {"BLOCK_M": 1, "BLOCK_N": 1024}, (*kernels.argmax_grid((m, n), 1), 1, 1),
        {"x": x, "out": torch.zeros(m, dtype=torch.int32)},
        {"out": x.argmax(dim=1).to(torch.int32)},
        inputs_min_bytes=_nbytes(x), outputs_min_bytes=m * 4, atol=0, rtol=0,
    ))

    # transpose: 32 x 32 f32 tiles
    m, n = (256, 512) if quick else (1024, 1024)
    x = randn(m, n)
    cases.append(Case(
        "transpose", lambda: kernels.transpose("f32", block_m=32, block_n=32),
        kernels.transpose_grid((m, n), 32, 32), ["x", "y"],
        tr_transpose, {"x_ptr": "x", "y_ptr": "y", "m": m, "n": n, "stride_x": n, "stride_y": m},
        {"BLOCK_M": 32, "BLOCK_N": 32}, (*kernels.transpose_grid((m, n), 32, 32), 1),
        {"x": x, "y": torch.zeros(n, m)}, {"y": x.t().contiguous()},
        inputs_min_bytes=_nbytes(x), outputs_min_bytes=_nbytes(x), atol=0, rtol=0,
    ))

    # matmul f16 x f16 -> f32 on tensor cores: 64 x 64 x 32 blocks
    size = 128 if quick else 512
    a, b = randn(size, size, dtype=torch.float16), randn(size, size, dtype=torch.float16)
    grid = kernels.matmul_grid((size, size), (size, size), 64, 64)
    # sm_80: mma.sync on both sides. sm_90: tileopt's mma.sync against Triton's (its switch
    # DISABLE_MMA_V3=1). sm_90a: wgmma on both sides (Triton's default on capability 90).
    for target, variant, env in (
        ("sm_80", "", {}),
        ("sm_90", "mma.sync", {"DISABLE_MMA_V3": "1"}),
        ("sm_90a", "wgmma", {}),
    ):
        cases.append(Case(
            "matmul_f16", lambda: kernels.matmul("f16", block_m=64, block_n=64, block_k=32),
            grid, ["a", "b", "c"],
            tr_matmul,
            {"a_ptr": "a", "b_ptr": "b", "c_ptr": "c", "m": size, "n": size, "k": size,
             "stride_a": size, "stride_b": size, "stride_c": size},
            {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, (*grid, 1),
            {"a": a, "b": b, "c": torch.zeros(size, size)}, {"c": a.float() @ b.float()},
            # this tiling's floor: a row block of a is read once per program column, ...
            inputs_min_bytes=_nbytes(a) * grid[1] + _nbytes(b) * grid[0],
            outputs_min_bytes=size * size * 4,
            target=target, atol=2e-2, rtol=1e-3, variant=variant, triton_env=env,
        ))
    return cases


# ---------------------------------------------------------------------------------------------
# measuring


@dataclass
class Measured:
    """One compiler's numbers for one case (None: not emulated)."""

    registers: int
    static_instructions: int
    warp_instructions: int | None
    sectors: int | None
    compile_ms: float
    spill_bytes: int
    stages_ms: dict[str, float] = field(default_factory=dict)  # the last compilation's
    by_class: dict[str, int] = field(default_factory=dict)  # warp-instructions by class


_ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")
_TARGET = re.compile(r"^\s*\.target\s+(\w+)", re.M)


def entry_body(ptx: str, name: str) -> str:
    """The text between the braces of ``.entry name`` (nested braces included)."""
    for m in _ENTRY.finditer(ptx):
        if m.group(1) != name:
            continue
        close = ptx.index(")", m.end())
        start = ptx.index("{", close)
        depth = 0
        for i in range(start, len(ptx)):
            if ptx[i] == "{":
                depth += 1
            elif ptx[i] == "}":
                depth -= 1
                if depth == 0:
                    return ptx[start + 1:i]
        raise ValueError(f".entry {name}: unbalanced braces")
    raise ValueError(f"no .entry {name} in the PTX")


def entry_params(ptx: str, name: str) -> list[str]:
    """The ``.param`` declarations of ``.entry name``, in order."""
    for m in _ENTRY.finditer(ptx):
        if m.group(1) == name:
            decl = ptx[m.end():ptx.index(")", m.end())]
            return [p.strip() for p in decl.split(",") if p.strip()]
    raise ValueError(f"no .entry {name} in the PTX")


_LABEL = re.compile(r"^[\w$]+:\s*")


def static_instructions(ptx: str, name: str) -> int:
    """Instruction statements in the body of ``.entry name``.

    Comments, directives (``.reg``, ``.loc``, ``.pragma``, ...), labels and scope braces are not
    instructions; several statements on one line (inline asm) count one each. Braces inside a
    statement (vector operands ``{%r1, %r2}``) belong to it.
    """
    body = re.sub(r"/\*.*?\*/", "", entry_body(ptx, name), flags=re.S)
    count = 0
    for line in body.splitlines():
        for piece in line.split("//", 1)[0].split(";"):
            s = piece.strip()
            while s[:1] in ("{", "}"):  # a scope opened or closed before the statement
                s = s[1:].strip()
            s = _LABEL.sub("", s)
            if s and not s.startswith("."):
                count += 1
    return count


def ptxas_info(ptx: str, name: str) -> tuple[int, int]:
    """(registers, spill bytes) from ``ptxas -v`` for the PTX's own ``.target``."""
    target = _TARGET.search(ptx)
    if target is None:
        raise ValueError("the PTX has no .target")
    _, log = run_ptxas(ptx, target.group(1), cubin=False)
    info = parse_ptxas_info(log)[name]
    return info.registers, info.spill_store_bytes + info.spill_load_bytes


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """(the last result, the median wall time in ms of ``repeat`` calls after a warm-up)."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return result, statistics.median(times)


def check(case: Case, side: str, tensors: dict[str, torch.Tensor]) -> None:
    """Raises AssertionError when an output differs from torch's."""
    for out, want in case.expected.items():
        got = tensors[out]
        if not torch.allclose(got, want, atol=case.atol, rtol=case.rtol):
            err = (got.double() - want.double()).abs().max().item()
            raise AssertionError(f"{case.name}: {side}'s {out} differs from torch (max {err:g})")


def fresh(case: Case) -> dict[str, torch.Tensor]:
    """Copies of the case's tensors (outputs zeroed anew for each side)."""
    return {k: v.clone() for k, v in case.tensors.items()}


def run_tileopt(case: Case, repeat: int) -> Measured:
    kb, build_ms = timed(case.tileopt_kernel, repeat)
    # The views whose innermost size is a multiple of 16: what Triton's JIT would see.
    names = list(vars(kb.args))
    divisible = [names[i] for i, a in enumerate(case.tileopt_args)
                 if isinstance(a, str) and case.tensors[a].shape[-1] % 16 == 0]
    kernel, ms = timed(
        lambda: tileopt.compile(kb, target=case.target, num_warps=case.num_warps, aligned=True,
                                divisible_sizes=divisible, int32_indexing=True,
                                same_shapes=case.same_shapes),
        repeat,
    )
    ptx = str(kernel.asm["ptx"])
    name = kernel.metadata.name
    regs, spills = ptxas_info(ptx, name)
    measured = Measured(
        regs, static_instructions(ptx, name), None, None, ms, spills,
        {"builder": build_ms, **{stage: s * 1e3 for stage, s in kernel.times.items()}},
    )
    if case.emulate:
        tensors = fresh(case)
        args = [tensors[a] if isinstance(a, str) else a for a in case.tileopt_args]
        stats = kernel.launch(case.tileopt_grid, *args, device="emulator")
        check(case, "tileopt", tensors)
        emulated(measured, stats)
    return measured


def emulated(measured: Measured, stats: emu.LaunchStats) -> None:
    """Fills in the emulator's counters."""
    measured.warp_instructions = stats.instructions
    measured.sectors = stats.global_load_sectors + stats.global_store_sectors
    measured.by_class = dict(stats.instructions_by_class)


_TRITON_DTYPES = {
    torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
    torch.int32: "*i32", torch.int64: "*i64",
}


def triton_source(case: Case) -> Any:
    """The ASTSource with the signature and the divisibility attributes Triton's JIT would give.

    Attributes are keyed by the argument's index among all the function's parameters
    (constexprs included), as ``triton.compile`` expects them.
    """
    fn = case.triton_fn
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for name, value in case.triton_args.items():
        index = fn.arg_names.index(name)
        if isinstance(value, str):
            t = case.tensors[value]
            signature[name] = _TRITON_DTYPES[t.dtype]
            aligned = t.data_ptr() % 16 == 0
        elif isinstance(value, float):
            signature[name] = "fp32"
            aligned = False
        else:
            if value == 1:
                raise ValueError(f"{case.name}: {name} == 1 would be a constexpr in Triton's JIT")
            signature[name] = "i32"
            aligned = value % 16 == 0
        if aligned:
            attrs[(index,)] = [["tt.divisibility", 16]]
    for name in case.triton_constexprs:
        signature[name] = "constexpr"
    ordered = {p: signature[p] for p in fn.arg_names}
    return triton.compiler.ASTSource(
        fn=fn, signature=ordered, constexprs=case.triton_constexprs, attrs=attrs
    )


_triton_times: list[Any] = []  # CompileTimes of the last triton.compile (its listener's)


def _listen(**kwargs: Any) -> None:
    _triton_times[:] = [kwargs["times"]]


def run_triton(case: Case, repeat: int) -> Measured:
    triton.knobs.compilation.listener = _listen
    src = triton_source(case)
    # Triton picks sm_90a itself for capability 90.
    target = GPUTarget("cuda", int(case.target.removeprefix("sm_").rstrip("a")), 32)
    saved = {key: os.environ.get(key) for key in case.triton_env}
    os.environ.update(case.triton_env)
    try:
        compiled, ms = timed(
            lambda: triton.compile(src, target=target, options={"num_warps": case.num_warps}),
            repeat,
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    ptx = compiled.asm["ptx"]
    name = compiled.metadata.name
    regs, spills = ptxas_info(ptx, name)
    stages: dict[str, float] = {}
    if _triton_times:
        times = _triton_times[0]
        stages["ast"] = times.ir_initialization / 1e3
        stages.update({stage: us / 1e3 for stage, us in times.lowering_stages})
        stages["cache"] = times.store_results / 1e3
    measured = Measured(regs, static_instructions(ptx, name), None, None, ms, spills, stages)
    if not case.emulate:
        return measured
    tensors = fresh(case)
    args: list[Any] = [tensors[a] if isinstance(a, str) else a for a in case.triton_args.values()]
    # Triton >= 3.3 appends scratch pointers (global, profile) to every kernel's parameters.
    grid = case.triton_grid
    programs = grid[0] * grid[1] * grid[2]
    extra = len(entry_params(ptx, name)) - len(args)
    scratch_sizes = [
        getattr(compiled.metadata, "global_scratch_size", 0),
        getattr(compiled.metadata, "profile_scratch_size", 0),
    ]
    for i in range(extra):
        size = scratch_sizes[i] if i < len(scratch_sizes) else 0
        args.append(np.zeros(max(size * programs, 16), dtype=np.uint8))
    module = emu.load_ptx(ptx)
    stats = module.launch(
        name, grid=grid, block=(32 * case.num_warps, 1, 1), args=args,
        shared_bytes=compiled.metadata.shared,
    )
    check(case, "Triton", tensors)
    emulated(measured, stats)
    return measured


# ---------------------------------------------------------------------------------------------
# report

METRICS: list[tuple[str, str, str]] = [
    ("registers", "registers", "d"),
    ("static instrs", "static_instructions", "d"),
    ("warp-instrs", "warp_instructions", "d"),
    ("global sectors", "sectors", "d"),
    ("compile ms", "compile_ms", ".1f"),
]


def table(results: Sequence[tuple[Case, Measured, Measured]]) -> tuple[str, list[str]]:
    """The printed table and one line per row that tileopt loses."""
    header = f"{'kernel':<34} {'metric':<15} {'tileopt':>12} {'Triton':>12} {'ratio':>7}"
    lines = [header, "-" * len(header)]
    losses: list[str] = []
    for case, ours, theirs in results:
        label = case.label
        for title, attr, fmt in METRICS:
            a, b = getattr(ours, attr), getattr(theirs, attr)
            if a is None or b is None:
                lines.append(f"{label:<34} {title:<15} {'n/a':>12} {'n/a':>12} {'':>7}")
                label = ""
                continue
            ratio = a / b if b else float("inf")
            mark = "  loses" if ratio > LOSS_THRESHOLD else ""
            lines.append(f"{label:<34} {title:<15} {a:>12{fmt}} {b:>12{fmt}} {ratio:>7.2f}{mark}")
            if mark:
                losses.append(
                    f"{case.label}: {title} {a:{fmt}} vs {b:{fmt}} ({ratio:.2f}x)"
                )
            label = ""
        if ours.sectors is not None:
            lines.append(
                f"{'':<34} {'(min sectors)':<15} {case.min_sectors:>12d} "
                f"{'':>12} {ours.sectors / case.min_sectors:>7.2f}  tileopt / min"
            )
        if ours.spill_bytes or theirs.spill_bytes:
            lines.append(f"{'':<34} spill bytes: tileopt {ours.spill_bytes}, "
                         f"Triton {theirs.spill_bytes}")
    return "\n".join(lines), losses


def stage_table(results: Sequence[tuple[Case, Measured, Measured]]) -> str:
    """Where the compile time goes: ms per stage of each compiler's last compilation."""
    lines = ["compile time by stage, ms (the last compilation of each kernel):"]
    for case, ours, theirs in results:
        for who, m in (("tileopt", ours), ("Triton", theirs)):
            parts = ", ".join(f"{k} {v:.1f}" for k, v in m.stages_ms.items())
            lines.append(f"  {case.label:<32} {who:<8} {parts}")
    return "\n".join(lines)


def class_table(results: Sequence[tuple[Case, Measured, Measured]]) -> str:
    """Emulated warp-instructions by class (alu, fp, ld.global, shfl, ...), both sides."""
    lines = ["emulated warp-instructions by class (tileopt / Triton):"]
    for case, ours, theirs in results:
        if not case.emulate:
            continue
        classes = sorted(set(ours.by_class) | set(theirs.by_class))
        parts = [f"{c} {ours.by_class.get(c, 0)}/{theirs.by_class.get(c, 0)}" for c in classes]
        lines.append(f"  {case.label:<32} " + ", ".join(parts))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke test)")
    parser.add_argument("--repeat", type=int, default=5, help="timed compilations per kernel")
    parser.add_argument("--only", default="", help="comma-separated kernel names")
    parser.add_argument(
        "--classes", action="store_true", help="also print warp-instructions by class"
    )
    opts = parser.parse_args(argv)

    t_start = time.perf_counter()
    gen = torch.Generator().manual_seed(0)
    cases = make_cases(opts.quick, gen)
    if opts.only:
        wanted = set(opts.only.split(","))
        unknown = wanted - {c.name for c in cases}
        if unknown:
            parser.error(f"unknown kernels: {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.name in wanted]
    print(
        f"tileopt {tileopt.__version__} vs Triton {triton.__version__}; ptxas {find_ptxas()}; "
        f"num_warps 4; compile time: median of {opts.repeat} after a warm-up"
    )
    results: list[tuple[Case, Measured, Measured]] = []
    for case in cases:
        t0 = time.perf_counter()
        ours = run_tileopt(case, opts.repeat)
        theirs = run_triton(case, opts.repeat)
        results.append((case, ours, theirs))
        seconds = time.perf_counter() - t0
        what = "outputs match torch on both sides" if case.emulate else "compiled (not run)"
        print(f"  {case.label}: {what} ({seconds:.1f} s)", flush=True)
        for note in case.notes:
            print(f"    note: {note}")
    text, losses = table(results)
    print()
    print(text)
    print()
    print(stage_table(results))
    print()
    if opts.classes:
        print(class_table(results))
        print()
    if losses:
        print(f"tileopt loses {len(losses)} rows (ratio > {LOSS_THRESHOLD}):")
        for line in losses:
            print(f"  {line}")
    else:
        print("tileopt is no worse than Triton on any row")
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
