"""tileopt's PTX beside Triton's for the same tile kernels, measured in the PTX emulator.

Every kernel exists twice with the same algorithm, block sizes and ``num_warps``: tileopt's from
:mod:`tileopt.kernels` (the one source of those kernels) and a Triton version written here. Both
are compiled ahead of time for the same target without a GPU, both PTX modules run in tileopt's
PTX emulator (:mod:`tileopt.emulator`) on the same inputs, and both outputs are checked against
PyTorch before any number is printed (a wrong kernel makes the script fail). Per kernel and metric
it prints tileopt's value, Triton's and the ratio tileopt / Triton (lower is better for tileopt
on every row; "loses" marks the rows above 1.00, compile time above 1.05; a kernel that tileopt
fails to compile prints the reason in its row instead):

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
- ``shared bytes``: shared memory per program, static plus dynamic (Triton's
  ``metadata.shared``, tileopt's ``Kernel.metadata.shared_bytes``); shown where either side
  uses some.
- ``compile ms``: wall time of one compilation from the kernel's source to cubin, the median of
  ``--repeat`` runs after a warm-up (so imports and one-time initialisation are excluded).
  tileopt: ``tileopt.compile(kernel_builder, target, num_warps)`` (tile IR -> PTX -> cubin;
  building the KernelBuilder in Python is not in it, it is the ``builder`` stage below the table).
  tileopt's compile cache is not read (``TILEOPT_ALWAYS_COMPILE=1``; its write is included, as
  Triton's is).
  Triton: ``triton.compile(ASTSource(...), target=GPUTarget(...), options=...)`` (Python AST ->
  TTIR -> TTGIR -> LLIR -> PTX -> cubin) with its cache disabled
  (``triton.knobs.compilation.always_compile``, i.e. ``TRITON_ALWAYS_COMPILE=1``) and its ptxas
  (``triton.knobs.nvidia.ptxas``, i.e. ``TRITON_PTXAS_PATH``) the same ptxas that tileopt uses;
  this does include Triton's Python frontend (its ``ast`` stage) and its cache write
  (``cache``). Both fuse multiplies and adds into ``fma`` (tileopt's default ``fp_fusion``;
  Triton 3.9 is given ``enable_fp_fusion=True``, its 3.9 default, which it warns will change in
  3.10). Below the table, the time of each stage of the last compilation on both sides
  (Triton's from ``triton.knobs.compilation.listener``, tileopt's from ``Kernel.times``).

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
``tileopt.compile(..., divisible_sizes={...})`` promises, for every size of a view that is a
multiple of 16 here, what ``tt.divisibility`` on that size tells Triton (so a 16-byte vector
is all in bounds or all out: one predicate, no scalar tail; a tile whose offset and size are
multiples of its extent checks its bounds there once); and
``tileopt.compile(..., int32_indexing=True)`` promises that every view's sizes and element
offsets fit in 32 bits, which Triton assumes of its ``i32`` size and stride arguments (its
offsets are 32-bit), so both index in 32-bit arithmetic; and
``tileopt.compile(..., same_shapes=[...])`` groups the views that the Triton kernel masks with
the same size arguments (vector add's ``x``, ``y``, ``out`` all use ``n``), so their bounds
checks share one size, as Triton's do. Sizes themselves are not known to either compiler:
both mask loads and stores with them (tileopt from the views' bounds in every dimension,
Triton with explicit masks wherever a tile can leave the tensor).

Target: sm_90 (Triton writes ``.target sm_90a``). The matmul is measured five times: on sm_80,
``mma.sync`` on both sides; on sm_90, tileopt's ``mma.sync`` (what it emits for plain sm_90)
against Triton's ``mma.sync`` (Triton's own switch ``DISABLE_MMA_V3=1``, an environment variable
its C++ reads while it compiles that case; Triton 3.9 has no knob for it); on sm_90a, Hopper's
``wgmma`` on both sides (Triton's default on capability 90; tileopt's with ``target="sm_90a"``),
once with the operands copied by ``cp.async`` (Triton's pointer loads, tileopt's ``tma=False``)
and once by TMA (Triton's loads through host-side tensor descriptors, whose maps the emulator
gets from the kernel's ``tensordesc_meta``; tileopt's default on sm_90a); and by TMA from
warp-specialised kernels (``tl.range(..., warp_specialize=True)``: Triton's load and MMA
partitions in 12 warps; ``warp_specialize=True``: tileopt's producer warp in a warpgroup after
the 4 consumer warps; both launched with their PTX's block). The int8 matmul
(``torch._int_mm``: int8 operands, int32 sums; 64 x 64 x 64 blocks) on sm_80 (``mma.sync``
m16n8k32) and on sm_90a (``wgmma`` m64n64k32, ``a`` by cp.async on both sides): its row-major
``b`` goes K-major into shared memory on both sides, tileopt's a word of 4 rows' bytes at a
time, Triton's by byte stores (sm_90a) or by 4-byte copies whose fragments it gathers byte by
byte (sm_80). On sm_90a tileopt's ``b`` takes a slot of the ring as ``a`` does (1.5x
Triton's shared memory), so that each wgmma runs on while the next iteration stores the next
``b``; Triton's one buffer waits for it. Attention on
sm_90a is measured twice the same way: keys and values by cp.async on both sides (tileopt's
``tma=False``), and with TMA allowed (tileopt's default, which keeps cp.async at these 3
stages: TMA's mbarriers would leave room for one block fewer per H100 SM, 5% slower there;
Triton's 3-D tensor descriptors, one 1 x 64 x 64 box a block), at head dimension 64 and at
128 (the ``d128`` rows, LLaMA's, where tileopt's TMA is on at 3 stages).

Software pipelining (``num_stages``). Both sides compile the matmul at the same ``num_stages``
(``--stages``, default 3, Triton's own default): ``triton.compile(..., options={"num_stages":
N})`` and ``tileopt.compile(..., num_stages=N)``. A tileopt whose ``compile`` has no
``num_stages`` parameter (found with ``inspect.signature``) compiles at its single stage (the
``cp.async`` copies of each iteration are waited for before its dot), and the row says so; so
does a side that waits for all copies right after committing each group at more stages (the
compiler left the loop unpipelined: Triton 3.9 does so with the stream-K loop), and a side
that loads some tiles with ``ld.global`` beside its ``cp.async`` copies (pipelined in part:
Triton 3.9's persistent matmul copies one operand ahead and loads the other in its step). Under
each matmul row, Triton's numbers at its default ``num_stages`` are printed too (the same row
when ``--stages`` is the default). The other kernels have no dot loop to pipeline and keep
Triton's default. The ``shared bytes`` row is static plus dynamic shared memory per program:
Triton's ``metadata.shared``, tileopt's ``Kernel.metadata.shared_bytes``; ``spill bytes`` is
``ptxas -v``'s spill stores plus spill loads (shown when either side spills).

Large tiles (``--large``, part of the default run, left out of ``--quick`` unless given): the
f16 matmul with 128x128x64 and 128x256x64 tiles at 4 and 8 warps (and 64x128x64 at 8, two
warpgroups splitting the columns on sm_90a), ``num_stages`` 3 and 4 (``--large-stages 1,2``
for the shallower ones Triton's autotuner also tries), on
sm_80 (``mma.sync``) and sm_90a (``wgmma``), the configurations Triton's matmul tutorial and
autotuner use on A100/H100. Per configuration both sides' registers, spill stores/loads, shared
memory and static instructions are printed, and whether it fits the chip's shared memory per
block (A100: 166912 bytes, H100: 232448 bytes with the opt-in; Triton compiles a configuration
that does not fit, it fails only at launch). The goal checked for each: where Triton compiles
without spills and fits, tileopt compiles without spills with registers and shared memory no
higher than Triton's. Where tileopt's registers are the higher, the miss also says how few each
side compiles into without spills (``-maxrregcount`` bisected: unconstrained, ptxas takes
registers for scheduling where the block's occupancy does not depend on them). A configuration
that tileopt fails to compile prints its reason in the row. They are emulated on a small
problem (256 x 256 x 256: a few programs of four or more K iterations) where that takes less
than ``--emulate-limit`` seconds per kernel (measured: after a slower run, the larger
configurations print static numbers only).

A row "loses" when tileopt / Triton is above 1.00 for registers, static instructions,
warp-instructions, global sectors and shared bytes (the issue's goal: no row worse than 1.00x),
above 1.05 for compile time (timing noise).

``--classes`` adds the emulated warp-instructions by class (alu, fp, ld.global, shfl, ...) of
both sides, which shows where tileopt's extra instructions are.

Triton is an optional dependency of this benchmark only (not in requirements.txt). The numbers
in benchmarks/README.md are for Triton 3.9.0; the ahead-of-time API used here (``ASTSource``,
``GPUTarget``, ``triton.knobs``) exists since 3.4, older or newer releases get a warning:

    .venv/bin/pip install triton==3.9.0
    .venv/bin/python benchmarks/ptx_vs_triton.py [--quick] [--repeat 5] [--only softmax,matmul_f16]
    .venv/bin/python benchmarks/ptx_vs_triton.py --only matmul_f16_large     # the large tiles
    .venv/bin/python benchmarks/ptx_vs_triton.py --only matmul_f16_large --large-stages 1,2

Without Triton the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import inspect
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
from tileopt.runtime.tma import DataType, Swizzle, TensorMap

TRITON_VERSION = "3.9.0"  # the release the README's numbers are for
LOSS_THRESHOLD = 1.00  # a ratio above this is a loss for tileopt (the goal) ...
TIME_LOSS_THRESHOLD = 1.05  # ... except compile time, which is noisy
#: Shared memory per block with the opt-in (cudaDevAttrMaxSharedMemoryPerBlockOptin) by
#: compute capability: what a configuration must fit to launch (Triton checks it at launch).
SHARED_LIMITS = {80: 166912, 86: 101376, 89: 101376, 90: 232448}
#: Whether this tileopt's compile takes num_stages (the software pipeline of dot loops); a
#: tileopt without it compiles every matmul at one stage.
TILEOPT_HAS_STAGES = "num_stages" in inspect.signature(tileopt.compile).parameters
TILEOPT_HAS_TMA = "tma" in inspect.signature(tileopt.compile).parameters
TILEOPT_HAS_WS = "warp_specialize" in inspect.signature(tileopt.compile).parameters


def _import_triton() -> Any | None:
    """Imports Triton with its cache off and tileopt's ptxas; None when it is not installed."""
    ptxas = find_ptxas()
    os.environ["TILEOPT_ALWAYS_COMPILE"] = "1"  # both compile every time
    caches = {}
    for variable in ("TRITON_CACHE_DIR", "TILEOPT_CACHE_DIR"):
        caches[variable] = os.environ.get(variable)
        if caches[variable] is None:  # a throw-away cache: it is never read anyway
            caches[variable] = tempfile.mkdtemp(prefix="ptx-vs-triton-cache-")
            atexit.register(shutil.rmtree, caches[variable], ignore_errors=True)
            os.environ[variable] = caches[variable]
    try:
        import triton
    except ImportError:
        return None
    # Triton's settings as triton.knobs (each also sets its environment variable).
    triton.knobs.compilation.always_compile = True  # TRITON_ALWAYS_COMPILE=1
    triton.knobs.cache.dir = caches["TRITON_CACHE_DIR"]  # TRITON_CACHE_DIR
    if ptxas is not None:
        triton.knobs.nvidia.ptxas = str(ptxas)  # TRITON_PTXAS_PATH
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

try:  # the num_stages Triton's JIT compiles with when it is given none (3 since 2.x)
    from triton.backends.nvidia.compiler import CUDAOptions  # noqa: E402

    TRITON_DEFAULT_STAGES = int(CUDAOptions.num_stages)
except (ImportError, AttributeError):
    TRITON_DEFAULT_STAGES = 3

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
def tr_matmul_tile(
    a_ptr, b_ptr, c_ptr, rows, cols, m, n, k, stride_a, stride_b, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """The tile of c at ``rows`` x ``cols``, its K loop of pointer loads (int8 operands sum
    in int32, as ``torch._int_mm``)."""
    if a_ptr.dtype.element_ty == tl.int8:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
    else:
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


@triton.jit
def tr_matmul(
    a_ptr, b_ptr, c_ptr, m, n, k, stride_a, stride_b, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    tr_matmul_tile(a_ptr, b_ptr, c_ptr, rows, cols, m, n, k, stride_a, stride_b, stride_c,
                   BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def tr_matmul_persistent(
    a_ptr, b_ptr, c_ptr, m, n, k, stride_a, stride_b, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """tr_matmul as a persistent kernel (Triton's tutorial's): the programs take the tiles in
    turn, down the columns, the tile loop and its K loop flattened into one."""
    grid_m = tl.cdiv(m, BLOCK_M)
    tiles = grid_m * tl.cdiv(n, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        rows = (tile % grid_m) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = (tile // grid_m) * BLOCK_N + tl.arange(0, BLOCK_N)
        tr_matmul_tile(a_ptr, b_ptr, c_ptr, rows, cols, m, n, k, stride_a, stride_b,
                       stride_c, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def tr_matmul_stream_k(
    a_ptr, b_ptr, c_ptr, m, n, k, stride_a, stride_b, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """tr_matmul's tiles with the k steps of all of them shared evenly between the programs
    (stream-K, as tileopt's kernels.stream_k_matmul): one loop over this program's steps that
    carries the tile's position and k offset, stores a tile it ran whole and adds its part
    of the others into a ``c`` of zeros (``tl.atomic_add``, relaxed)."""
    grid_m = tl.maximum(tl.cdiv(m, BLOCK_M), 1)
    k_steps = tl.maximum(tl.cdiv(k, BLOCK_K), 1)
    k_end = k_steps * BLOCK_K
    steps = grid_m * tl.maximum(tl.cdiv(n, BLOCK_N), 1) * k_steps
    first = tl.program_id(0) * steps // tl.num_programs(0)
    last = (tl.program_id(0) + 1) * steps // tl.num_programs(0)
    tile = first // k_steps
    tile_m = tile % grid_m
    tile_n = tile // grid_m
    kk = (first - tile * k_steps) * BLOCK_K
    began = kk
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for step in range(first, last):
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = kk + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * stride_a + ks[None, :],
                    mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_b + cols[None, :],
                    mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)
        acc = tl.dot(a, b, acc)
        kk += BLOCK_K
        if (kk == k_end) | (step == last - 1):
            mask = (rows[:, None] < m) & (cols[None, :] < n)
            ptrs = c_ptr + rows[:, None] * stride_c + cols[None, :]
            if (kk == k_end) & (began == 0):
                tl.store(ptrs, acc, mask=mask)
            else:
                tl.atomic_add(ptrs, acc, mask=mask, sem="relaxed")
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if kk == k_end:
            tile_m += 1
            if tile_m == grid_m:
                tile_m = 0
                tile_n += 1
            kk = 0
            began = 0


@triton.jit
def tr_matmul_tma(
    a_desc, b_desc, c_ptr, m, n, k, stride_c,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """tr_matmul with its operands loaded through host-side tensor descriptors (TMA), its K
    loop warp-specialised (a load and an MMA partition) with WARP_SPECIALIZE."""
    row0 = tl.program_id(0) * BLOCK_M
    col0 = tl.program_id(1) * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in tl.range(0, k, BLOCK_K, warp_specialize=WARP_SPECIALIZE):
        a = a_desc.load([row0, start])
        b = b_desc.load([start, col0])
        acc = tl.dot(a, b, acc)
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    tl.store(c_ptr + rows[:, None] * stride_c + cols[None, :], acc, mask=mask)


@triton.jit
def tr_attention_step(q, kt, v, acc, m_i, l_i, qk_scale, keys, n, MASKED: tl.constexpr):
    """One block of keys of the online softmax; MASKED: the keys past n score -inf."""
    s = tl.dot(q, kt) * qk_scale
    if MASKED:
        s = tl.where(keys[None, :] < n, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
    return acc, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def tr_attention(
    q_ptr, k_ptr, v_ptr, o_ptr, scale, m, n, stride_b,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
):
    """Flash attention over (B, M, D) q and (B, N, D) k and v, as Triton's tutorial and
    tileopt's kernels.attention: an online softmax in base 2 (scale * log2(e) folded into the
    scale, tl.math.exp2: ex2.approx.ftz), the keys' mask only on the last block (the
    whole blocks first, in a loop of their own), p rounded to f16 before its product."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    batch = tl.program_id(1) * stride_b
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + batch + rows[:, None] * D + dims[None, :], mask=rows[:, None] < m,
                other=0.0)
    qk_scale = scale * 1.4426950408889634  # log2(e)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    whole = n // BLOCK_N * BLOCK_N
    for start in range(0, whole, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + batch + keys[None, :] * D + dims[:, None])
        v = tl.load(v_ptr + batch + keys[:, None] * D + dims[None, :])
        acc, m_i, l_i = tr_attention_step(q, kt, v, acc, m_i, l_i, qk_scale, keys, n, False)
    for start in range(whole, n, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + batch + keys[None, :] * D + dims[:, None], mask=keys[None, :] < n,
                     other=0.0)
        v = tl.load(v_ptr + batch + keys[:, None] * D + dims[None, :], mask=keys[:, None] < n,
                    other=0.0)
        acc, m_i, l_i = tr_attention_step(q, kt, v, acc, m_i, l_i, qk_scale, keys, n, True)
    out = (acc / l_i[:, None]).to(tl.float16)
    tl.store(o_ptr + batch + rows[:, None] * D + dims[None, :], out, mask=rows[:, None] < m)


@triton.jit
def tr_attention_tma(
    q_ptr, k_desc, v_desc, o_ptr, scale, m, n, stride_b,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
):
    """tr_attention with its keys and values loaded through host-side tensor descriptors
    (TMA) over the (B, N, D) tensors, one 1 x BLOCK_N x D box a block."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    b = tl.program_id(1)
    batch = b * stride_b
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + batch + rows[:, None] * D + dims[None, :], mask=rows[:, None] < m,
                other=0.0)
    qk_scale = scale * 1.4426950408889634  # log2(e)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    whole = n // BLOCK_N * BLOCK_N
    for start in range(0, whole, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        kt = k_desc.load([b, start, 0]).reshape(BLOCK_N, D).T
        v = v_desc.load([b, start, 0]).reshape(BLOCK_N, D)
        acc, m_i, l_i = tr_attention_step(q, kt, v, acc, m_i, l_i, qk_scale, keys, n, False)
    for start in range(whole, n, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        kt = k_desc.load([b, start, 0]).reshape(BLOCK_N, D).T
        v = v_desc.load([b, start, 0]).reshape(BLOCK_N, D)
        acc, m_i, l_i = tr_attention_step(q, kt, v, acc, m_i, l_i, qk_scale, keys, n, True)
    out = (acc / l_i[:, None]).to(tl.float16)
    tl.store(o_ptr + batch + rows[:, None] * D + dims[None, :], out, mask=rows[:, None] < m)


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
    # the software pipeline's depth both sides compile with; None: neither is given one
    num_stages: int | None = None
    tile: str = ""  # the matmul's block_m x block_n x block_k
    large: bool = False  # one of the large-tile matmul configurations (their own table)
    tileopt_extra: dict[str, Any] = field(default_factory=dict)  # more compile options
    # Triton arguments that are host-side tensor descriptors: name -> block shape
    triton_descriptors: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        parts = [self.target]
        if self.variant:
            parts.append(self.variant)
        if self.tile:
            parts.append(f"{self.tile} w{self.num_warps} s{self.num_stages}")
        return f"{self.name} ({', '.join(parts)})"

    @property
    def config(self) -> str:
        """The large-tile table's name of the configuration."""
        return f"{self.tile} w{self.num_warps} s{self.num_stages} {self.target}"

    @property
    def min_sectors(self) -> int:
        return math.ceil(self.inputs_min_bytes / 32) + math.ceil(self.outputs_min_bytes / 32)


def _nbytes(*ts: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def matmul_case(
    randn: Callable[..., torch.Tensor],
    m: int,
    n: int,
    k: int,
    block: tuple[int, int, int],
    num_warps: int,
    num_stages: int,
    target: str,
    variant: str,
    env: dict[str, str],
    name: str = "matmul_f16",
    tma: bool | None = None,
    warp_specialize: bool = False,
    programs: int | None = None,
    stream_k: bool = False,
    dtype: str = "f16",
) -> Case:
    """The f16 matmul (f32 result) of ``m x k`` by ``k x n`` with one tiling on one target;
    on sm_90a with ``tma`` its operands come through TMA on both sides (Triton: host-side
    tensor descriptors), without it through cp.async (tileopt: ``tma=False``); with
    ``warp_specialize`` too, from a producer warp (both sides' ``warp_specialize``). With
    ``programs``, both sides' persistent matmul on that many programs (pointer loads), or
    with ``stream_k`` their stream-K matmul. ``dtype="i8"``: int8 operands summed in int32
    (``torch._int_mm``), exact; ``dtype="f8E4M3FN"``: e4m3 operands summed in f32."""
    bm, bn, bk = block
    a, b = randn(m, k, dtype=torch.float16), randn(k, n, dtype=torch.float16)
    c, want = torch.zeros(m, n), a.float() @ b.float()
    grid = tiles = kernels.matmul_grid((m, k), (k, n), bm, bn)
    make = functools.partial(kernels.matmul, "f16")
    fn, args = tr_matmul, {"a_ptr": "a", "b_ptr": "b", "c_ptr": "c", "m": m, "n": n, "k": k,
                           "stride_a": k, "stride_b": n, "stride_c": n}
    if dtype == "i8":
        gen = torch.Generator().manual_seed(m + n + k)
        a, b = (torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)
                for shape in ((m, k), (k, n)))
        c, want = torch.zeros(m, n, dtype=torch.int32), torch._int_mm(a, b)
        make = functools.partial(kernels.matmul, "i8", out_dtype="i32")
    if dtype == "f8E4M3FN":
        a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        want = a.float() @ b.float()
        make = functools.partial(kernels.matmul, dtype)
    if programs is not None and stream_k:
        make, fn = functools.partial(kernels.stream_k_matmul, "f16"), tr_matmul_stream_k
        grid = kernels.stream_k_matmul_grid((m, k), (k, n), programs, bm, bn, bk)
    elif programs is not None:
        make, fn = functools.partial(kernels.persistent_matmul, "f16"), tr_matmul_persistent
        grid = kernels.persistent_matmul_grid((m, k), (k, n), programs, bm, bn)
    descriptors: dict[str, tuple[int, ...]] = {}
    extra: dict[str, Any] = {} if tma is None or not TILEOPT_HAS_TMA else {"tma": tma}
    constexprs = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    if tma:
        fn, args = tr_matmul_tma, {"a_desc": "a", "b_desc": "b", "c_ptr": "c", "m": m, "n": n,
                                   "k": k, "stride_c": n}
        descriptors = {"a_desc": (bm, bk), "b_desc": (bk, bn)}
        constexprs["WARP_SPECIALIZE"] = warp_specialize
        if warp_specialize and TILEOPT_HAS_WS:
            extra["warp_specialize"] = True
    return Case(
        name, lambda: make(block_m=bm, block_n=bn, block_k=bk),
        grid, ["a", "b", "c"],
        fn, args, constexprs, (*grid, 1, 1)[:3],
        {"a": a, "b": b, "c": c}, {"c": want},
        # this tiling's floor: a row block of a is read once per program column, ...
        inputs_min_bytes=_nbytes(a) * tiles[1] + _nbytes(b) * tiles[0],
        outputs_min_bytes=m * n * 4,
        target=target, num_warps=num_warps, atol=0 if dtype == "i8" else 2e-2,
        rtol=0 if dtype == "i8" else 1e-3, variant=variant,
        triton_env=env, num_stages=num_stages, tile=f"{bm}x{bn}x{bk}",
        large=name.endswith("_large"),
        tileopt_extra=extra,
        triton_descriptors=descriptors,
    )


def make_cases(quick: bool, gen: torch.Generator, stages: int = 3,
               large: bool = False, large_stages: Sequence[int] = (3, 4)) -> list[Case]:
    """The benchmark's kernels with their shapes (smaller ones with ``quick``); the matmul at
    ``stages``, and with ``large`` its large-tile configurations too, at each of
    ``large_stages``."""

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

    # attention: 64 x 64 blocks of f16 q, k and v, head dimension 64 (and 128, the "d128"
    # rows: LLaMA's), both products on tensor cores (sm_80 mma.sync, sm_90a wgmma), the loop
    # over keys pipelined on both sides
    for d, (batch, m) in ((64, (2, 128) if quick else (4, 512)),
                          (128, (1, 128) if quick else (2, 256))):
        q, k, v = (randn(batch, m, d, dtype=torch.float16) for _ in range(3))
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
        # sm_90a: keys and values by cp.async on both sides (tileopt's tma=False, Triton's
        # pointer loads), and with TMA allowed (tileopt's default, Triton's tensor descriptors).
        for target, variant, tma in (("sm_80", "", None), ("sm_90a", "cp.async", False),
                                     ("sm_90a", "TMA", True)):
            fn, args = tr_attention, {"q_ptr": "q", "k_ptr": "k", "v_ptr": "v", "o_ptr": "o",
                                      "scale": d**-0.5, "m": m, "n": m, "stride_b": m * d}
            descriptors: dict[str, tuple[int, ...]] = {}
            if tma:
                fn, args = tr_attention_tma, {"q_ptr": "q", "k_desc": "k", "v_desc": "v",
                                              "o_ptr": "o", "scale": d**-0.5, "m": m, "n": m,
                                              "stride_b": m * d}
                descriptors = {"k_desc": (1, 64, d), "v_desc": (1, 64, d)}
            if d != 64:
                variant = ", ".join(filter(None, (variant, f"d{d}")))
            cases.append(Case(
                "attention",
                lambda d=d: kernels.attention("f16", head_dim=d, block_m=64, block_n=64),
                kernels.attention_grid(q.shape, 64), ["q", "k", "v", "o", d**-0.5],
                fn, args,
                {"BLOCK_M": 64, "BLOCK_N": 64, "D": d}, (*kernels.attention_grid(q.shape, 64), 1),
                {"q": q, "k": k, "v": v, "o": torch.zeros_like(q)}, {"o": want.half()},
                inputs_min_bytes=_nbytes(q, k, v), outputs_min_bytes=_nbytes(q),
                target=target, atol=2e-3, rtol=1e-2, num_stages=stages, variant=variant,
                same_shapes=[("q", "o"), ("k", "v")],  # masked with m and with n
                tileopt_extra={} if tma is None or not TILEOPT_HAS_TMA else {"tma": tma},
                triton_descriptors=descriptors,
            ))

    # matmul f16 x f16 -> f32 on tensor cores: 64 x 64 x 32 blocks
    size = 128 if quick else 512
    # sm_80: mma.sync on both sides. sm_90: tileopt's mma.sync against Triton's (its switch
    # DISABLE_MMA_V3=1). sm_90a: wgmma on both sides (Triton's default on capability 90).
    # sm_90a with TMA: tileopt's default there, Triton's with tensor descriptors.
    # sm_90a warp-specialised: TMA from a producer on both sides.
    for target, variant, env, tma in (
        ("sm_80", "", {}, None),
        ("sm_90", "mma.sync", {"DISABLE_MMA_V3": "1"}, None),
        ("sm_90a", "wgmma", {}, False),
        ("sm_90a", "wgmma+TMA", {}, True),
        ("sm_90a", "wgmma+TMA+WS", {}, True),
    ):
        cases.append(matmul_case(randn, size, size, size, (64, 64, 32), 4, stages, target,
                                 variant, env, tma=tma, warp_specialize=variant.endswith("WS")))
    # int8 (torch._int_mm): mma.sync m16n8k32 on sm_80, wgmma m64n64k32 on sm_90a; both sides
    # copy a by cp.async and stage the row-major b transposed (8-bit fragments hold K).
    for target, variant, tma in (("sm_80", "", None), ("sm_90a", "wgmma", False)):
        cases.append(matmul_case(randn, size, size, size, (64, 64, 64), 4, stages, target,
                                 variant, {}, name="matmul_i8", tma=tma, dtype="i8"))
    # fp8 (e4m3 into f32): mma.sync m16n8k32 .e4m3 from sm_89, wgmma m64n64k32 on sm_90a;
    # b row-major, staged transposed as int8's.
    for target, variant, tma in (("sm_89", "", None), ("sm_90a", "wgmma", False)):
        cases.append(matmul_case(randn, size, size, size, (64, 64, 64), 4, stages, target,
                                 variant, {}, name="matmul_f8", tma=tma, dtype="f8E4M3FN"))
    # Persistent: a quarter as many programs as tiles, each running its tiles' K steps in one
    # loop (tileopt's persistent_matmul, Triton's flattened tl.range), pointer loads.
    for target, variant, tma in (("sm_80", "persistent", None),
                                 ("sm_90a", "wgmma persistent", False)):
        cases.append(matmul_case(randn, size, size, size, (64, 64, 32), 4, stages, target,
                                 variant, {}, tma=tma, programs=(size // 64) ** 2 // 4))
    # Stream-K: 3/8 as many programs as tiles, so that programs split tiles.
    for target, variant, tma in (("sm_80", "stream-K", None),
                                 ("sm_90a", "wgmma stream-K", False)):
        cases.append(matmul_case(randn, size, size, size, (64, 64, 32), 4, stages, target,
                                 variant, {}, tma=tma,
                                 programs=max(3, (size // 64) ** 2 * 3 // 8), stream_k=True))
    if large:
        # Triton's tutorial/autotuner tiles for A100 and H100, at 4 and 8 warps, 3 and 4
        # stages: enough programs of several K iterations to run in the emulator. On sm_90a
        # both sides copy with TMA (Triton through tensor descriptors). 64 x 128 on 8 warps:
        # on sm_90a two warpgroups split the columns.
        for target in ("sm_80", "sm_90a"):
            for block, warp_counts in (((128, 128, 64), (4, 8)), ((128, 256, 64), (4, 8)),
                                       ((64, 128, 64), (8,))):
                for warps in warp_counts:
                    for num_stages in large_stages:
                        cases.append(matmul_case(
                            randn, 256, 256, 256, block, warps, num_stages, target, "", {},
                            name="matmul_f16_large", tma=True if target == "sm_90a" else None,
                        ))
    return cases


# ---------------------------------------------------------------------------------------------
# measuring


@dataclass
class Measured:
    """One compiler's numbers for one case (None: not measured, or not emulated)."""

    registers: int | None = None
    static_instructions: int | None = None
    warp_instructions: int | None = None
    sectors: int | None = None
    compile_ms: float | None = None
    spill_stores: int | None = None  # bytes, ptxas -v
    spill_loads: int | None = None
    shared_bytes: int | None = None  # static + dynamic, per program
    num_stages: int | None = None  # the pipeline depth it was compiled with (None: not a dot)
    overlaps_copies: bool | None = None  # overlaps_copies() of its PTX
    loads_beside_copies: bool = False  # ld.global beside cp.async in a loop (pipelined in part)
    stages_ms: dict[str, float] = field(default_factory=dict)  # the last compilation's
    by_class: dict[str, int] = field(default_factory=dict)  # warp-instructions by class
    ptx: str = ""  # the kernel's PTX and name (large tiles: registers_needed)
    name: str = ""
    error: str | None = None  # why it did not compile
    emulation_s: float | None = None  # wall time of the emulated launch
    note: str = ""  # why it was not emulated

    @property
    def spill_bytes(self) -> int | None:
        if self.spill_stores is None or self.spill_loads is None:
            return None
        return self.spill_stores + self.spill_loads


_LOCATION = re.compile(r'^error:\s*(?:"[^"]*":\d+:\d+:\s*)?')


def reason(e: BaseException, width: int = 360) -> str:
    """An exception as one line: its type and MLIR's first ``error:`` (without the source
    location), else the first lines of its message."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    errors = [_LOCATION.sub("", line) for line in lines if line.startswith("error:")]
    short = [line if len(line) <= 110 else line[:107] + "..." for line in lines[:3]]
    text = errors[0] if errors else " | ".join(short) or "(no message)"
    if len(text) > width:
        text = text[:width - 3] + "..."
    return f"{type(e).__name__}: {text}"


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


def statements(ptx: str, name: str, labels: dict[str, int] | None = None) -> list[str]:
    """The instruction statements in the body of ``.entry name``, in order; ``labels`` gets
    the index of the statement after each label.

    Comments, directives (``.reg``, ``.loc``, ``.pragma``, ...), labels and scope braces are not
    instructions; several statements on one line (inline asm) count one each. Braces inside a
    statement (vector operands ``{%r1, %r2}``) belong to it.
    """
    body = re.sub(r"/\*.*?\*/", "", entry_body(ptx, name), flags=re.S)
    found: list[str] = []
    for line in body.splitlines():
        for piece in line.split("//", 1)[0].split(";"):
            s = piece.strip()
            while s[:1] in ("{", "}"):  # a scope opened or closed before the statement
                s = s[1:].strip()
            if (label := _LABEL.match(s)) and labels is not None:
                labels[label.group(0).strip().rstrip(":")] = len(found)
            s = _LABEL.sub("", s)
            if s and not s.startswith("."):
                found.append(s)
    return found


def opcode(statement: str) -> str:
    """A statement's opcode (``ld.global.v4.b32``), past its predicate (``@%p1``)."""
    words = statement.split()
    return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def loop_opcodes(found: Sequence[str], labels: dict[str, int]) -> set[str]:
    """The opcodes of the :func:`statements` ``found`` (``labels`` theirs) that lie in loops
    (from a label to a branch back to it)."""
    inside: set[str] = set()
    for i, s in enumerate(found):
        if opcode(s).startswith("bra") and (start := labels.get(s.split()[-1])) is not None:
            inside.update(opcode(t) for t in found[start:i + 1])  # empty if forward
    return inside


def overlaps_copies(found: Sequence[str]) -> bool | None:
    """Whether, in the :func:`statements` ``found``, some ``cp.async`` copies stay in flight
    past the instruction after their commit (a software pipeline); False where every
    ``cp.async.commit_group`` is followed at once by ``cp.async.wait_group 0``; None without
    cp.async commits."""
    commits = [i for i, s in enumerate(found) if s.startswith("cp.async.commit_group")]
    if not commits:
        return None
    return any(i + 1 == len(found) or found[i + 1].split() != ["cp.async.wait_group", "0"]
               for i in commits)


def ptxas_info(ptx: str, name: str, options: Sequence[str] = ()) -> tuple[int, int, int]:
    """(registers, spill store bytes, spill load bytes) from ``ptxas -v`` (with ``options``)
    for the PTX's own ``.target``."""
    target = _TARGET.search(ptx)
    if target is None:
        raise ValueError("the PTX has no .target")
    _, log = run_ptxas(ptx, target.group(1), cubin=False, options=options)
    info = parse_ptxas_info(log)[name]
    return info.registers, info.spill_store_bytes, info.spill_load_bytes


_BLOCK_SIZE = re.compile(r"^\s*\.(?:maxntid|reqntid)\b.*$", re.M)


def registers_needed(ptx: str, name: str, registers: int) -> int:
    """The fewest registers ptxas compiles the PTX's kernel ``name`` into without spills:
    ``-maxrregcount`` bisected below ``registers`` (what it takes unconstrained, without
    spills), with the block-size directive dropped (ptxas ignores the option beside it).
    Unconstrained, ptxas may take registers it does not need (for scheduling) where the
    block's occupancy does not depend on them."""
    free = _BLOCK_SIZE.sub("", ptx)
    low, high = 16, registers  # high compiles without spills
    while low < high:
        cap = (low + high) // 2
        try:
            used, spill_stores, spill_loads = ptxas_info(free, name,
                                                         ["-maxrregcount", str(cap)])
        except tileopt.errors.PTXAssemblyError as e:
            # Below the operands of one instruction (a wgmma's accumulator): ptxas refuses
            # the cap ("Insufficient registers"), as good as a spill.
            if "Insufficient registers" not in str(e):
                raise
            low = cap + 1
            continue
        if spill_stores or spill_loads:
            low = cap + 1
        else:
            high = used
    return high


def static_numbers(measured: Measured, ptx: str, name: str) -> None:
    """Fills in what the PTX alone tells: registers, spills, static instructions."""
    measured.ptx, measured.name = ptx, name
    measured.registers, measured.spill_stores, measured.spill_loads = ptxas_info(ptx, name)
    labels: dict[str, int] = {}
    found = statements(ptx, name, labels)
    measured.static_instructions = len(found)
    measured.overlaps_copies = overlaps_copies(found)
    in_loops = loop_opcodes(found, labels)
    measured.loads_beside_copies = (any(op.startswith("cp.async.c") for op in in_loops)
                                    and any(op.startswith("ld.global") for op in in_loops))




def timed(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """(the last result, the median wall time in ms of ``repeat`` calls after a warm-up)."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return result, statistics.median(times) if times else float("nan")


def check(case: Case, side: str, tensors: dict[str, torch.Tensor]) -> None:
    """Raises AssertionError when an output differs from torch's."""
    for out, want in case.expected.items():
        got = tensors[out]
        if not torch.allclose(got, want, atol=case.atol, rtol=case.rtol):
            err = (got.double() - want.double()).abs().max().item()
            raise AssertionError(f"{case.label}: {side}'s {out} differs from torch (max {err:g})")


def fresh(case: Case) -> dict[str, torch.Tensor]:
    """Copies of the case's tensors (outputs zeroed anew for each side)."""
    return {k: v.clone() for k, v in case.tensors.items()}


def tileopt_options(case: Case, names: Sequence[str]) -> dict[str, Any]:
    """``tileopt.compile``'s keyword arguments for ``case`` (the views are ``names``)."""
    # The sizes that are multiples of 16: what Triton's JIT would see.
    divisible = {
        names[i]: tuple(16 if size % 16 == 0 else 1 for size in case.tensors[a].shape)
        for i, a in enumerate(case.tileopt_args) if isinstance(a, str)
    }
    options: dict[str, Any] = {
        "target": case.target, "num_warps": case.num_warps, "aligned": True,
        "divisible_sizes": divisible, "int32_indexing": True, "same_shapes": case.same_shapes,
    }
    if case.num_stages is not None and TILEOPT_HAS_STAGES:
        options["num_stages"] = case.num_stages
    return {**options, **case.tileopt_extra}


def run_tileopt(case: Case, repeat: int, emulate: bool) -> Measured:
    """tileopt's numbers for ``case``; a compilation that fails gives ``error``, not an
    exception (a wrong result in the emulator still raises)."""
    measured = Measured()
    if case.num_stages is not None:
        measured.num_stages = case.num_stages if TILEOPT_HAS_STAGES else 1
    try:
        kb, build_ms = timed(case.tileopt_kernel, repeat)
        options = tileopt_options(case, list(vars(kb.args)))
        kernel, measured.compile_ms = timed(lambda: tileopt.compile(kb, **options), repeat)
        ptx = str(kernel.asm["ptx"])
        name = kernel.metadata.name
        static_numbers(measured, ptx, name)
    except Exception as e:  # a failure is a result here: print it in the row
        measured.error = reason(e)
        return measured
    # static + dynamic shared memory (a tileopt before dynamic shared memory has only static)
    measured.shared_bytes = kernel.metadata.shared_bytes
    measured.stages_ms = {
        "builder": build_ms, **{stage: s * 1e3 for stage, s in kernel.times.items()}
    }
    if emulate:
        tensors = fresh(case)
        args = [tensors[a] if isinstance(a, str) else a for a in case.tileopt_args]
        t0 = time.perf_counter()
        try:
            stats = kernel.launch(case.tileopt_grid, *args, device="emulator")
        except tileopt.errors.EmulatorError as e:
            measured.note = f"not emulated: {reason(e)}"
            return measured
        measured.emulation_s = time.perf_counter() - t0
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
    torch.int8: "*i8", torch.int32: "*i32", torch.int64: "*i64",
    torch.float8_e4m3fn: "*fp8e4nv",
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
        if name in case.triton_descriptors:
            t = case.tensors[value]
            block = ", ".join(map(str, case.triton_descriptors[name]))
            signature[name] = f"tensordesc<{_TRITON_DTYPES[t.dtype][1:]}[{block}]>"
            continue
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


def compile_triton(case: Case, src: Any, num_stages: int | None, repeat: int) -> tuple[Any, float]:
    """``triton.compile`` of ``src`` for the case's target with ``case.triton_env`` set while
    it runs; (the CompiledKernel, the median ms of ``repeat`` compilations)."""
    # Triton picks sm_90a itself for capability 90.
    target = GPUTarget("cuda", int(case.target.removeprefix("sm_").rstrip("a")), 32)
    options: dict[str, Any] = {"num_warps": case.num_warps, "enable_fp_fusion": True}
    if num_stages is not None:
        options["num_stages"] = num_stages
    saved = {key: os.environ.get(key) for key in case.triton_env}
    os.environ.update(case.triton_env)
    try:
        return timed(lambda: triton.compile(src, target=target, options=options), repeat)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_TRITON_MAP_TYPES = {6: DataType.FLOAT16, 7: DataType.FLOAT32, 10: DataType.BFLOAT16}


def triton_launch_args(case: Case, compiled: Any, tensors: dict[str, torch.Tensor]) -> list[Any]:
    """Triton's kernel arguments: a host-side descriptor is its tensor map (made from the
    compiled kernel's ``tensordesc_meta``: block, swizzle, element type), shape and strides."""
    metas = iter(getattr(compiled.metadata, "tensordesc_meta", None) or ())
    args: list[Any] = []
    for name, value in case.triton_args.items():
        if name in case.triton_descriptors:
            t, meta = tensors[value], next(metas)
            tmap = TensorMap.from_tensor(t, tuple(meta["block_size"]),
                                         swizzle=Swizzle(meta["swizzle"]),
                                         dtype=_TRITON_MAP_TYPES[meta["elem_type"]])
            args += [tmap, *t.shape, *t.stride()]
        else:
            args.append(tensors[value] if isinstance(value, str) else value)
    return args


def run_triton(
    case: Case, repeat: int, emulate: bool, num_stages: int | None = None, default: bool = False
) -> Measured:
    """Triton's numbers for ``case`` at the case's ``num_stages`` (``default``: at Triton's
    default, static numbers only); a compilation that fails gives ``error``."""
    triton.knobs.compilation.listener = _listen
    stages = None if default else case.num_stages
    measured = Measured(num_stages=TRITON_DEFAULT_STAGES if stages is None else stages)
    if case.num_stages is None:
        measured.num_stages = None
    try:
        src = triton_source(case)
        compiled, measured.compile_ms = compile_triton(case, src, stages, repeat)
        ptx = compiled.asm["ptx"]
        name = compiled.metadata.name
        static_numbers(measured, ptx, name)
    except Exception as e:  # a failure is a result here: print it in the row
        measured.error = reason(e)
        return measured
    measured.shared_bytes = compiled.metadata.shared  # Triton's shared memory is all dynamic
    if _triton_times:
        times = _triton_times[0]
        measured.stages_ms["ast"] = times.ir_initialization / 1e3
        measured.stages_ms.update({stage: us / 1e3 for stage, us in times.lowering_stages})
        measured.stages_ms["cache"] = times.store_results / 1e3
    if not emulate or default:
        return measured
    tensors = fresh(case)
    args = triton_launch_args(case, compiled, tensors)
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
    t0 = time.perf_counter()
    try:
        module = emu.load_ptx(ptx)
        stats = module.launch(
            name, grid=grid, block=(32 * compiled.metadata.num_warps, 1, 1), args=args,
            shared_bytes=compiled.metadata.shared,
        )
    except tileopt.errors.EmulatorError as e:
        measured.note = f"not emulated: {reason(e)}"
        return measured
    measured.emulation_s = time.perf_counter() - t0
    check(case, "Triton", tensors)
    emulated(measured, stats)
    return measured
# ---------------------------------------------------------------------------------------------
# report


@dataclass
class Result:
    """Both sides' numbers for one case."""

    case: Case
    ours: Measured
    theirs: Measured
    triton_default: Measured | None = None  # Triton at its default num_stages, where different


# (title, Measured attribute, format, loss threshold)
METRICS: list[tuple[str, str, str, float]] = [
    ("registers", "registers", "d", LOSS_THRESHOLD),
    ("static instrs", "static_instructions", "d", LOSS_THRESHOLD),
    ("warp-instrs", "warp_instructions", "d", LOSS_THRESHOLD),
    ("global sectors", "sectors", "d", LOSS_THRESHOLD),
    ("shared bytes", "shared_bytes", "d", LOSS_THRESHOLD),
    ("compile ms", "compile_ms", ".1f", TIME_LOSS_THRESHOLD),
]
LABEL = 44  # width of the kernel column


def _stages_text(m: Measured, side: str) -> str:
    if m.num_stages is None:
        return f"{side} -"
    if side == "tileopt" and not TILEOPT_HAS_STAGES:
        return f"tileopt {m.num_stages} (its compile has no num_stages)"
    if m.num_stages > 1 and m.overlaps_copies is False:
        # the compiler did not pipeline this loop (Triton's stream-K): as at one stage
        return f"{side} {m.num_stages} (not pipelined: each step's copies are waited for)"
    if m.num_stages > 1 and m.loads_beside_copies:
        # Triton 3.9's persistent matmul: one operand is copied ahead, the other loaded in
        # the step that uses it (so fewer buffers and registers)
        return f"{side} {m.num_stages} (pipelined in part: some tiles are loaded by ld.global)"
    return f"{side} {m.num_stages}"


def table(results: Sequence[Result]) -> tuple[str, list[str]]:
    """The printed table and one line per row that tileopt loses."""
    header = f"{'kernel':<{LABEL}} {'metric':<15} {'tileopt':>12} {'Triton':>12} {'ratio':>7}"
    lines = [header, "-" * len(header)]
    losses: list[str] = []
    for r in results:
        case, ours, theirs = r.case, r.ours, r.theirs
        label = case.label
        for who, m in (("tileopt", ours), ("Triton", theirs)):
            if m.error:
                lines.append(f"{label:<{LABEL}} {who} failed to compile: {m.error}")
                label = ""
        if ours.error:
            losses.append(f"{case.label}: tileopt fails to compile ({ours.error})")
        for title, attr, fmt, threshold in METRICS:
            a, b = getattr(ours, attr), getattr(theirs, attr)
            if attr == "shared_bytes" and not (a or b):
                continue  # neither uses shared memory
            if a is None or b is None:
                if ours.error or theirs.error:
                    continue
                why = ours.note or theirs.note
                lines.append(f"{label:<{LABEL}} {title:<15} {'n/a':>12} {'n/a':>12} {'':>7}"
                             + (f"  {why}" if why and attr == "warp_instructions" else ""))
                label = ""
                continue
            ratio = a / b if b else (1.0 if a == b else float("inf"))
            mark = "  loses" if ratio > threshold else ""
            lines.append(
                f"{label:<{LABEL}} {title:<15} {a:>12{fmt}} {b:>12{fmt}} {ratio:>7.2f}{mark}"
            )
            if mark:
                losses.append(f"{case.label}: {title} {a:{fmt}} vs {b:{fmt}} ({ratio:.2f}x)")
            label = ""
        pad = " " * LABEL
        if ours.sectors is not None:
            lines.append(
                f"{pad} {'(min sectors)':<15} {case.min_sectors:>12d} "
                f"{'':>12} {ours.sectors / case.min_sectors:>7.2f}  tileopt / min"
            )
        if ours.spill_bytes or theirs.spill_bytes:
            lines.append(f"{pad} spill bytes (stores + loads): tileopt {ours.spill_bytes}, "
                         f"Triton {theirs.spill_bytes}")
            if (ours.spill_bytes or 0) > (theirs.spill_bytes or 0):
                losses.append(f"{case.label}: spills {ours.spill_bytes} vs {theirs.spill_bytes}")
        if case.num_stages is not None:
            lines.append(f"{pad} num_stages: {_stages_text(ours, 'tileopt')}, "
                         f"{_stages_text(theirs, 'Triton')}")
            d = r.triton_default
            if d is None:
                lines.append(f"{pad} Triton at its default num_stages ({TRITON_DEFAULT_STAGES}):"
                             f" the Triton column")
            elif d.error:
                lines.append(f"{pad} Triton at its default num_stages ({TRITON_DEFAULT_STAGES}):"
                             f" failed to compile: {d.error}")
            else:
                lines.append(
                    f"{pad} Triton at its default num_stages ({TRITON_DEFAULT_STAGES}): "
                    f"registers {d.registers}, static instrs {d.static_instructions}, shared "
                    f"bytes {d.shared_bytes}, spill bytes {d.spill_bytes}"
                )
    return "\n".join(lines), losses


def _limit(target: str) -> int | None:
    return SHARED_LIMITS.get(int(target.removeprefix("sm_").rstrip("af")))


def _cell(m: Measured, attr: str) -> str:
    value = getattr(m, attr)
    return "-" if value is None else str(value)


def verdict(case: Case, ours: Measured, theirs: Measured) -> tuple[str, bool]:
    """The goal for a large-tile configuration: (the words, whether tileopt misses it). In
    scope where Triton compiles it without spills into the chip's shared memory; then tileopt
    must compile it without spills, with registers and shared memory no higher than Triton's."""
    limit = _limit(case.target)
    if theirs.error:
        return "out of scope: Triton fails to compile it", False
    out = []
    if theirs.spill_bytes:
        out.append(f"Triton spills {theirs.spill_bytes} bytes")
    if limit is not None and (theirs.shared_bytes or 0) > limit:
        out.append(f"Triton's {theirs.shared_bytes} bytes of shared memory exceed the "
                   f"{case.target} limit ({limit})")
    if out:
        return "out of scope: " + "; ".join(out), False
    if ours.error:
        return "MISSED: tileopt fails to compile", True
    misses = []
    if ours.spill_bytes:
        misses.append(f"tileopt spills {ours.spill_stores}/{ours.spill_loads} bytes "
                      f"(stores/loads)")
    if ours.registers is not None and theirs.registers is not None and \
            ours.registers > theirs.registers:
        # What each needs, where ptxas took more than that unconstrained.
        need = [registers_needed(m.ptx, m.name, m.registers) for m in (ours, theirs)]
        misses.append(f"registers {ours.registers} > {theirs.registers} (without spills "
                      f"under -maxrregcount: {need[0]} against {need[1]})")
    if ours.shared_bytes is not None and theirs.shared_bytes is not None and \
            ours.shared_bytes > theirs.shared_bytes:
        misses.append(f"shared {ours.shared_bytes} > {theirs.shared_bytes}")
    if misses:
        return "MISSED: " + "; ".join(misses), True
    stages = "" if TILEOPT_HAS_STAGES else " (tileopt at 1 stage)"
    return "met" + stages, False


def large_table(results: Sequence[Result]) -> tuple[str, list[str]]:
    """The large-tile matmul configurations: registers, spills, shared memory, instructions of
    both sides and the goal's verdict; and one line per configuration that misses the goal."""
    limits = ", ".join(f"sm_{cc}: {b}" for cc, b in SHARED_LIMITS.items() if cc in (80, 90))
    lines = [
        "large-tile matmul f16 x f16 -> f32, 256 x 256 x 256 (shared: static + dynamic bytes "
        f"per program; the chips' limits {limits})",
        f"{'configuration':<26} {'side':<8} {'regs':>5} {'spill st/ld':>12} {'shared':>7} "
        f"{'static':>7} {'warp-instrs':>12} {'emul s':>7}",
    ]
    lines.append("-" * len(lines[-1]))
    misses: list[str] = []
    for r in results:
        label = r.case.config
        for who, m in (("tileopt", r.ours), ("Triton", r.theirs)):
            if m.error:
                lines.append(f"{label:<26} {who:<8} failed: {m.error}")
            else:
                spills = f"{_cell(m, 'spill_stores')}/{_cell(m, 'spill_loads')}"
                emul = "-" if m.emulation_s is None else f"{m.emulation_s:.1f}"
                lines.append(
                    f"{label:<26} {who:<8} {_cell(m, 'registers'):>5} {spills:>12} "
                    f"{_cell(m, 'shared_bytes'):>7} {_cell(m, 'static_instructions'):>7} "
                    f"{_cell(m, 'warp_instructions'):>12} {emul:>7}"
                    + (f"  {m.note}" if m.note else "")
                )
            label = ""
        words, missed = verdict(r.case, r.ours, r.theirs)
        lines.append(f"{'':<26} goal: {words}")
        if missed:
            why = f": {r.ours.error}" if r.ours.error else ""
            misses.append(f"{r.case.label}: {words}{why}")
    return "\n".join(lines), misses


def stage_table(results: Sequence[Result]) -> str:
    """Where the compile time goes: ms per stage of each compiler's last compilation."""
    lines = ["compile time by stage, ms (the last compilation of each kernel):"]
    for r in results:
        for who, m in (("tileopt", r.ours), ("Triton", r.theirs)):
            if m.stages_ms:
                parts = ", ".join(f"{k} {v:.1f}" for k, v in m.stages_ms.items())
                lines.append(f"  {r.case.label:<{LABEL}} {who:<8} {parts}")
    return "\n".join(lines)


def class_table(results: Sequence[Result]) -> str:
    """Emulated warp-instructions by class (alu, fp, ld.global, shfl, ...), both sides."""
    lines = ["emulated warp-instructions by class (tileopt / Triton):"]
    for r in results:
        ours, theirs = r.ours.by_class, r.theirs.by_class
        if not (ours and theirs):
            continue
        classes = sorted(set(ours) | set(theirs))
        parts = [f"{c} {ours.get(c, 0)}/{theirs.get(c, 0)}" for c in classes]
        lines.append(f"  {r.case.label:<{LABEL}} " + ", ".join(parts))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small shapes and no large tiles (a smoke test)")
    parser.add_argument("--repeat", type=int, default=5, help="timed compilations per kernel")
    parser.add_argument("--only", default="", help="comma-separated kernel names")
    parser.add_argument(
        "--classes", action="store_true", help="also print warp-instructions by class"
    )
    parser.add_argument("--stages", type=int, default=TRITON_DEFAULT_STAGES,
                        help="num_stages of both sides' matmul (default: Triton's, %(default)s)")
    parser.add_argument("--large", action="store_true",
                        help="the large-tile matmul configurations even with --quick")
    parser.add_argument("--large-stages", default="3,4",
                        help="comma-separated num_stages of the large-tile configurations "
                             "(default %(default)s, the issue's; Triton's autotuner also "
                             "tries 1 and 2)")
    parser.add_argument("--emulate-limit", type=float, default=60.0,
                        help="seconds an emulated large-tile kernel may take before larger "
                             "ones are measured statically only (default %(default)s)")
    opts = parser.parse_args(argv)
    if not 1 <= opts.stages <= 8:
        parser.error("--stages takes 1 to 8")
    try:
        large_stages = [int(n) for n in opts.large_stages.split(",")]
    except ValueError:
        large_stages = []
    if not large_stages or not all(1 <= n <= 8 for n in large_stages):
        parser.error(f"--large-stages takes numbers 1 to 8, got {opts.large_stages!r}")

    t_start = time.perf_counter()
    if triton.__version__ != TRITON_VERSION:
        print(f"note: Triton {triton.__version__} is installed; the README's numbers are for "
              f"{TRITON_VERSION} ({sys.executable} -m pip install triton=={TRITON_VERSION})")
    gen = torch.Generator().manual_seed(0)
    cases = make_cases(opts.quick, gen, opts.stages, opts.large or not opts.quick,
                       large_stages)
    if opts.only:
        wanted = set(opts.only.split(","))
        unknown = wanted - {c.name for c in cases}
        if unknown:
            parser.error(f"unknown kernels: {', '.join(sorted(unknown))}")
        cases = [c for c in cases if c.name in wanted]
    stages = (f"num_stages {opts.stages} on both sides" if TILEOPT_HAS_STAGES else
              f"num_stages {opts.stages} for Triton, 1 for tileopt (its compile has no "
              f"num_stages)")
    print(
        f"tileopt {tileopt.__version__} vs Triton {triton.__version__}; ptxas {find_ptxas()}; "
        f"num_warps 4 unless named; matmul {stages}; compile time: median of {opts.repeat} "
        f"after a warm-up (large tiles: 1)"
    )
    results: list[Result] = []
    slow_area: int | None = None  # large tiles this big (or bigger) are not emulated
    for case in cases:
        t0 = time.perf_counter()
        emulate = case.emulate
        area = 0
        if case.large:
            bm, bn, _ = (int(x) for x in case.tile.split("x"))
            area = bm * bn
            emulate = emulate and (slow_area is None or area < slow_area)
        repeat = min(opts.repeat, 1) if case.large else opts.repeat
        ours = run_tileopt(case, repeat, emulate)
        theirs = run_triton(case, repeat, emulate)
        default = None
        if case.num_stages is not None and case.num_stages != TRITON_DEFAULT_STAGES \
                and not case.large:
            default = run_triton(case, 0, False, default=True)
        results.append(Result(case, ours, theirs, default))
        if case.large and emulate:
            slowest = max(m.emulation_s or 0.0 for m in (ours, theirs))
            if slowest > opts.emulate_limit:
                slow_area = area if slow_area is None else min(slow_area, area)
        elif case.large and case.emulate:
            for m in (ours, theirs):
                m.note = m.note or (f"not emulated: a {case.tile} tile took more than "
                                    f"{opts.emulate_limit:g} s")
        seconds = time.perf_counter() - t0
        failed = [who for who, m in (("tileopt", ours), ("Triton", theirs)) if m.error]
        if failed:
            what = f"{' and '.join(failed)} failed to compile"
        elif ours.warp_instructions is not None and theirs.warp_instructions is not None:
            what = "outputs match torch on both sides"
        else:
            what = "compiled (not run)"
        print(f"  {case.label}: {what} ({seconds:.1f} s)", flush=True)
        for note in case.notes:
            print(f"    note: {note}")
    small = [r for r in results if not r.case.large]
    large = [r for r in results if r.case.large]
    losses: list[str] = []
    if small:
        text, losses = table(small)
        print()
        print(text)
    if large:
        text, misses = large_table(large)
        losses += misses
        print()
        print(text)
    print()
    print(stage_table(results))
    print()
    if opts.classes:
        print(class_table(results))
        print()
    if losses:
        print(f"tileopt loses {len(losses)} rows (ratio > {LOSS_THRESHOLD:.2f}, compile time > "
              f"{TIME_LOSS_THRESHOLD:.2f}; large tiles: the goal missed):")
        for line in losses:
            print(f"  {line}")
    else:
        print("tileopt is no worse than Triton on any row")
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
