"""Differential tests: randomly shaped kernels (block sizes, warps, dtypes, odd tensor sizes)
compiled for sm_80/sm_90 and run in the emulator against torch in float64.

The configurations come from fixed seeds, so every run checks the same cases; they cover the
layout corners (replicated small tiles, wide and narrow tiles, many or few warps) that the
hand-picked kernel tests do not, with 64-bit or 32-bit (``int32_indexing``) index
arithmetic. A dot whose columns were narrower than its warps once gave wrong results; this is
the test that found it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest
import tileopt
import torch
from tileopt.builder import KernelBuilder, View

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}
OPS = ("row_sum", "col_sum", "row_max", "row_bias", "col_scale", "transpose", "scale")


@dataclass(frozen=True)
class TileCase:
    dtype: str
    block: tuple[int, int]
    warps: int
    op: str
    contiguous: bool
    shape: tuple[int, int]
    target: str
    int32: bool


def tile_cases(seed: int, count: int) -> list[TileCase]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        bm, bn = rng.choice([1, 2, 4, 16, 64]), rng.choice([1, 4, 8, 32, 128, 256])
        cases.append(TileCase(
            rng.choice(["f32", "f16", "i32"]), (bm, bn), rng.choice([1, 2, 4, 8]),
            rng.choice(OPS), rng.choice([True, False]),
            (rng.randint(1, 3 * bm + 2), rng.randint(1, 3 * bn + 2)),
            rng.choice(["sm_80", "sm_90", "sm_90a"]), rng.choice([False, True]),
        ))
    return cases


def build(case: TileCase) -> KernelBuilder:
    bm, bn = case.block
    view = {"dtype": case.dtype, "contiguous": case.contiguous}
    kb = KernelBuilder("k", x=View(rank=2, **view), v=View(rank=1, **view),
                       y=View(rank=2, **view), r=View(rank=1, **view))
    with kb as k:
        m, n = k.program_id(0) * bm, k.program_id(1) * bn
        x = k.load(k.args.x, [m, n], [bm, bn])
        if case.op == "row_sum":
            k.store(k.sum(x, axis=1), k.args.r, [m])
        elif case.op == "col_sum":
            k.store(k.sum(x, axis=0), k.args.r, [n])
        elif case.op == "row_max":
            k.store(k.max(x, axis=1), k.args.r, [m])
        elif case.op == "row_bias":
            k.store(x + k.expand_dims(k.load(k.args.v, [n], [bn]), 0), k.args.y, [m, n])
        elif case.op == "col_scale":
            k.store(x * k.expand_dims(k.load(k.args.v, [m], [bm]), 1), k.args.y, [m, n])
        elif case.op == "transpose":
            k.store(k.trans(x), k.args.y, [n, m])
        else:
            k.store(x * 3, k.args.y, [m, n])
    return kb


def random_tensor(dtype: str, *shape: int) -> torch.Tensor:
    if dtype == "i32":
        return torch.randint(-50, 50, shape, dtype=torch.int32)
    return torch.randn(*shape).to(TORCH[dtype])


@pytest.mark.parametrize("case", tile_cases(seed=7, count=24), ids=str)
def test_random_tile_kernel(case: TileCase) -> None:
    torch.manual_seed(0)
    (bm, bn), (rows, cols) = case.block, case.shape
    options = {"target": case.target, "num_warps": case.warps, "int32_indexing": case.int32}
    if bm * bn > 255 * 32 * case.warps:  # over a register an element per thread
        with pytest.raises(tileopt.CompilationError, match="registers per thread"):
            tileopt.compile(build(case), **options)
        return
    kernel = tileopt.compile(build(case), **options)
    x = random_tensor(case.dtype, rows, cols)
    v = random_tensor(case.dtype, max(rows, cols))
    y = torch.zeros((cols, rows) if case.op == "transpose" else (rows, cols), dtype=x.dtype)
    r = torch.zeros(max(rows, cols), dtype=x.dtype)
    grid = {"row_sum": (-(-rows // bm), 1), "row_max": (-(-rows // bm), 1),
            "col_sum": (1, -(-cols // bn))}.get(case.op, (-(-rows // bm), -(-cols // bn)))
    kernel.launch(grid, x, v, y, r, device="emulator")

    xd = x.double()
    # Reductions cover one block of the other dimension; loads pad with zeros.
    padded = torch.zeros(max(rows, bm), max(cols, bn), dtype=torch.float64)
    padded[:rows, :cols] = xd
    expected, got = {
        "row_sum": lambda: (padded[:rows, :bn].sum(1), r[:rows]),
        "col_sum": lambda: (padded[:bm, :cols].sum(0), r[:cols]),
        "row_max": lambda: (padded[:rows, :bn].max(1).values, r[:rows]),
        "row_bias": lambda: (xd + v[:cols].double()[None, :], y),
        "col_scale": lambda: (xd * v[:rows].double()[:, None], y),
        "transpose": lambda: (xd.T, y),
        "scale": lambda: (xd * 3, y),
    }[case.op]()
    scale = max(1.0, expected.abs().max().item())
    tolerance = {"i32": 0.0, "f32": 1e-5, "f16": 1e-2}[case.dtype] * scale * max(bm, bn) ** 0.5
    assert (got.double() - expected).abs().max().item() <= tolerance


@dataclass(frozen=True)
class DotCase:
    dtype: str
    block: tuple[int, int, int]
    warps: int
    trans_b: bool
    shape: tuple[int, int, int]
    target: str
    int32: bool = False


def dot_cases(seed: int, count: int) -> list[DotCase]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        bm, bn, bk = rng.choice([16, 32, 64]), rng.choice([8, 16, 32, 64]), rng.choice([16, 32])
        cases.append(DotCase(
            rng.choice(["f32", "f16", "bf16"]), (bm, bn, bk), rng.choice([1, 2, 4, 8]),
            rng.choice([False, True]),
            (rng.randint(1, 2 * bm + 3), rng.randint(1, 2 * bn + 3), rng.randint(1, 3 * bk)),
            rng.choice(["sm_80", "sm_90", "sm_90a"]), rng.choice([False, True]),
        ))
    # The configuration that once went wrong: 8 columns, 8 warps.
    cases.append(DotCase("f16", (64, 8, 16), 8, True, (60, 12, 15), "sm_80"))
    return cases


def build_dot(case: DotCase) -> KernelBuilder:
    """c = a @ b (``b`` stored transposed with ``case.trans_b``), accumulated in f32 over
    ``case.block`` tiles, a program per tile of c."""
    bm, bn, bk = case.block
    kb = KernelBuilder("mm", a=View(case.dtype, 2, contiguous=True),
                       b=View(case.dtype, 2, contiguous=True), c=View("f32", 2, contiguous=True))
    with kb as k:
        row, col = k.program_id(0) * bm, k.program_id(1) * bn
        acc0 = k.full([bm, bn], 0.0, "f32")
        with k.loop(0, k.size(k.args.a, 1), bk, carried=[acc0]) as loop:
            (acc,) = loop.carried
            a = k.load(k.args.a, [row, loop.iv], [bm, bk])
            if case.trans_b:
                b = k.trans(k.load(k.args.b, [col, loop.iv], [bn, bk]))
            else:
                b = k.load(k.args.b, [loop.iv, col], [bk, bn])
            loop.yield_(k.dot(a, b, acc))
        k.store(loop.results[0], k.args.c, [row, col])
    return kb


@pytest.mark.parametrize("case", dot_cases(seed=11, count=12), ids=str)
def test_random_matmul(case: DotCase) -> None:
    torch.manual_seed(0)
    (bm, bn, _), (m, n, k_size) = case.block, case.shape
    kernel = tileopt.compile(build_dot(case), target=case.target, num_warps=case.warps,
                             int32_indexing=case.int32)
    a = torch.randn(m, k_size).to(TORCH[case.dtype])
    b = torch.randn(*((n, k_size) if case.trans_b else (k_size, n))).to(TORCH[case.dtype])
    c = torch.zeros(m, n)
    kernel.launch((-(-m // bm), -(-n // bn)), a, b, c, device="emulator")
    expected = a.double() @ (b.double().T if case.trans_b else b.double())
    # f32 products are exact in f64; 16-bit inputs are exact too, only the f32 sums round.
    tolerance = 1e-5 * max(1, k_size) ** 0.5 * max(1.0, expected.abs().max().item())
    assert (c.double() - expected).abs().max().item() <= tolerance


@dataclass(frozen=True)
class PipelinedCase:
    dtype: str
    block: tuple[int, int, int]
    warps: int
    trans_b: bool
    batched: bool
    stages: int
    shape: tuple[int, int, int]
    target: str


def pipelined_cases(seed: int, count: int) -> list[PipelinedCase]:
    """Operands that may copy with cp.async (aligned views, last dimensions multiples of 16)
    straight from the load, through a transpose (``trans_b``) and through the reshape of a
    batch's 1 x rows x cols tile (``batched``), in K loops of 1 to 4 stages."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        bm, bn, bk = rng.choice([16, 32, 64]), rng.choice([16, 32, 64]), rng.choice([16, 32])
        warps = rng.choice([1, 2, 4])
        if min(bm, bn) * bk < 8 * 32 * warps:  # each thread's share: whole 16-byte copies
            continue
        cases.append(PipelinedCase(
            rng.choice(["f16", "bf16"]), (bm, bn, bk), warps,
            rng.choice([False, True]), rng.choice([False, True]), rng.randint(1, 4),
            (rng.randint(1, 2 * bm + 3), 16 * rng.randint(1, 6), 16 * rng.randint(1, 8)),
            rng.choice(["sm_80", "sm_90a"]),
        ))
    return cases


def build_pipelined_dot(case: PipelinedCase) -> KernelBuilder:
    """c[i] = a[i] @ b[i] over a batch (program_id(2)) with ``case.batched``, else c = a @ b;
    ``b`` stored transposed with ``case.trans_b``."""
    bm, bn, bk = case.block
    rank = 3 if case.batched else 2
    kb = KernelBuilder("mm", a=View(case.dtype, rank, contiguous=True),
                       b=View(case.dtype, rank, contiguous=True),
                       c=View("f32", rank, contiguous=True))
    with kb as k:
        row, col = k.program_id(0) * bm, k.program_id(1) * bn
        batch = [k.program_id(2)] if case.batched else []

        def load(view: Any, at: list[Any], rows: int, cols: int) -> Any:
            if not case.batched:
                return k.load(view, at, [rows, cols])
            return k.reshape(k.load(view, batch + at, [1, rows, cols]), [rows, cols])

        acc0 = k.full([bm, bn], 0.0, "f32")
        with k.loop(0, k.size(k.args.a, rank - 1), bk, carried=[acc0]) as loop:
            (acc,) = loop.carried
            a = load(k.args.a, [row, loop.iv], bm, bk)
            if case.trans_b:
                b = k.trans(load(k.args.b, [col, loop.iv], bn, bk))
            else:
                b = load(k.args.b, [loop.iv, col], bk, bn)
            loop.yield_(k.dot(a, b, acc))
        out = loop.results[0]
        if case.batched:
            out = k.reshape(out, [1, bm, bn])
        k.store(out, k.args.c, batch + [row, col])
    return kb


@pytest.mark.parametrize("case", pipelined_cases(seed=5, count=12), ids=str)
def test_random_pipelined_matmul(case: PipelinedCase) -> None:
    torch.manual_seed(0)
    (bm, bn, _), (m, n, k_size) = case.block, case.shape
    kernel = tileopt.compile(build_pipelined_dot(case), target=case.target,
                             num_warps=case.warps, num_stages=case.stages, aligned=True,
                             divisible_sizes=True, int32_indexing=True)
    assert "cp.async" in str(kernel.asm["ptx"])  # cp.async, or TMA's cp.async.bulk
    batch = (2,) if case.batched else ()
    a = torch.randn(*batch, m, k_size).to(TORCH[case.dtype])
    b_shape = (n, k_size) if case.trans_b else (k_size, n)
    b = torch.randn(*batch, *b_shape).to(TORCH[case.dtype])
    c = torch.zeros(*batch, m, n)
    kernel.launch((-(-m // bm), -(-n // bn), *batch), a, b, c, device="emulator")
    expected = a.double() @ (b.double().transpose(-1, -2) if case.trans_b else b.double())
    tolerance = 1e-5 * k_size ** 0.5 * max(1.0, expected.abs().max().item())
    assert (c.double() - expected).abs().max().item() <= tolerance
