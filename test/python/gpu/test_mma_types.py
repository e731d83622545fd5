"""Tensor cores for the dots that are not f16/bf16 -> f32: f16 accumulators (mma.sync
m16n8k16 .f16 and wgmma .f16) and f32 inputs with ``input_precision = tf32`` (mma.sync
m16n8k8 .tf32, which rounds the inputs to nearest first; on sm_90a wgmma m64nNk8 .tf32,
which truncates them, as Triton's: B staged transposed, K-major, by 4-byte cp.async), i8
with i32 accumulators, and fp8 (f8E4M3FN, f8E5M2, either on either side) with f32 ones:
mma.sync m16n8k32 from sm_89, wgmma m64nNk32 on sm_90a, CUDA cores before sm_89; with
fp8's conversions, by cvt from sm_89 and in software before, against torch's bit for bit.

Each kernel runs in the PTX emulator against float64 PyTorch on odd shapes, plain and with
the promises that give cp.async copies and a software pipeline.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_kernels import EPS32, assert_close
from tileopt import kernels
from tileopt.builder import KernelBuilder, View
from tileopt.compiler import compile

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}
EPS16 = 2.0**-10
SHAPES = [(70, 100, 90), (33, 48, 129)]
PROMISED_SHAPES = [(96, 160, 80), (64, 64, 64)]


def _matmul(dtype: str, acc: str, tf32: bool, bm: int, bn: int, bk: int) -> KernelBuilder:
    """``c = a @ b`` in tiles with a ``acc`` accumulator, stored as ``acc``."""
    kb = KernelBuilder(
        "matmul", a=View(dtype, 2, contiguous=True), b=View(dtype, 2, contiguous=True),
        c=View(acc, 2, contiguous=True),
    )
    with kb as k:
        m, n = k.program_id(0) * bm, k.program_id(1) * bn
        with k.loop(0, k.size(k.args.a, 1), bk, carried=[k.full([bm, bn], 0.0, acc)]) as loop:
            (c,) = loop.carried
            a = k.load(k.args.a, [m, loop.iv], [bm, bk])
            b = k.load(k.args.b, [loop.iv, n], [bk, bn])
            loop.yield_(k.dot(a, b, c, tf32=tf32))
        k.store(loop.results[0], k.args.c, [m, n])
    return kb


def _run(kern: Any, a: torch.Tensor, b: torch.Tensor, out: torch.dtype, bm: int,
         bn: int) -> torch.Tensor:
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=out)
    kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
    return c


def tf32_round(x: torch.Tensor) -> torch.Tensor:
    """f32 rounded to tf32 (10 mantissa bits) to nearest, ties away from zero (cvt.rna)."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF
    return rounded.view(torch.float32)


def tf32_truncate(x: torch.Tensor) -> torch.Tensor:
    """f32 truncated to tf32 (the low 13 mantissa bits dropped), as wgmma reads it."""
    bits = x.float().contiguous().view(torch.int32)
    return (bits & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize(
    ("target", "warps", "blocks", "instruction"),
    [
        ("sm_80", 4, (64, 64, 32), "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
        ("sm_90a", 4, (64, 64, 32), "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16"),
        ("sm_90a", 8, (64, 128, 64), "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16"),
        ("sm_90a", 8, (64, 64, 32), "wgmma.mma_async.sync.aligned.m64n32k16.f16.f16.f16"),
        ("sm_90a", 8, (64, 16, 32), "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16"),
    ],
    ids=["sm_80", "sm_90a", "sm_90a-w8-split", "sm_90a-w8-narrow", "sm_90a-w8-n8"],
)
@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_f16_accumulators_use_tensor_cores(target: str, warps: int, blocks: tuple[int, ...],
                                           instruction: str, promises: bool) -> None:
    bm, bn, bk = blocks
    kern = compile(_matmul("f16", "f16", False, bm, bn, bk), target, num_warps=warps,
                   **(PROMISES if promises else {}))
    ptx = str(kern.asm["ptx"])
    assert instruction in ptx
    assert "fma.rn.f16" not in ptx
    # With the promises the operands are copied global -> shared: by TMA on sm_90a (split
    # columns too: each warpgroup's are a contiguous range of B), else by cp.async.
    tma = promises and target == "sm_90a"
    assert ("cp.async.bulk.tensor" in ptx) == tma
    assert ("cp.async.cg.shared.global" in ptx) == (promises and not tma)
    # An f16 accumulator is repacked between MMAs: each wgmma is waited for.
    assert "wgmma.wait_group.sync.aligned 1;" not in ptx
    torch.manual_seed(0)
    for m, k, n in PROMISED_SHAPES if promises else SHAPES:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = _run(kern, a, b, torch.float16, bm, bn)
        # Each k step of an f16 accumulator rounds the sum to f16 at worst, then the
        # result is f16 already.
        bound = (k + 1) * (EPS16 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
        assert_close(c, a.double() @ b.double(), atol=bound)


@pytest.mark.parametrize(
    ("target", "warps", "blocks", "instruction"),
    [
        ("sm_80", 4, (64, 64, 32), "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("sm_80", 8, (128, 64, 16), "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("sm_90a", 4, (64, 64, 32), "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"),
        # Two warpgroups along the rows; two splitting the columns (each its 8-row groups
        # of transposed B); one k8 step of 32-byte rows (32-byte swizzle).
        ("sm_90a", 8, (128, 64, 16), "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"),
        ("sm_90a", 8, (64, 128, 32), "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"),
        ("sm_90a", 4, (64, 16, 8), "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32"),
        ("sm_90a", 8, (64, 16, 16), "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"),
    ],
    ids=["sm_80", "sm_80-w8", "sm_90a", "sm_90a-w8-rows", "sm_90a-w8-split", "sm_90a-k8",
         "sm_90a-w8-n8"],
)
@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_tf32_dots_use_tensor_cores(target: str, warps: int, blocks: tuple[int, ...],
                                    instruction: str, promises: bool) -> None:
    bm, bn, bk = blocks
    kern = compile(_matmul("f32", "f32", True, bm, bn, bk), target, num_warps=warps,
                   **(PROMISES if promises else {}))
    ptx = str(kern.asm["ptx"])
    assert instruction in ptx
    wgmma = target == "sm_90a"
    # mma.sync rounds its fragments to nearest; wgmma reads shared memory as it is.
    assert ("cvt.rna.tf32.f32" in ptx) == (not wgmma)
    assert ("mma.sync" in ptx) == (not wgmma)
    # A copies 16 bytes at a time with the promises; wgmma's B, transposed, copies each
    # element on its own, promises or not (no TMA: a box cannot transpose).
    assert ("cp.async.cg.shared.global" in ptx) == promises
    assert ("cp.async.ca.shared.global" in ptx) == wgmma
    assert "cp.async.bulk" not in ptx
    torch.manual_seed(1)
    to_tf32 = tf32_truncate if wgmma else tf32_round
    for m, k, n in PROMISED_SHAPES if promises else SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        c = _run(kern, a, b, torch.float32, bm, bn)
        # Exact products of the inputs made tf32, accumulated in f32.
        ref = to_tf32(a).double() @ to_tf32(b).double()
        bound = (k + 1) * (EPS32 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
        assert_close(c, ref, atol=bound)
        # And not the f32 product: the inputs were rounded.
        assert not torch.allclose(c.double(), a.double() @ b.double(), rtol=0, atol=1e-5)


A_VIEW = "memref<?x?xf32, strided<[?, 1], offset: ?>>"
_PROMISED = "{tile.divisibility = 16 : i64, tile.index_bitwidth = 32 : i64}"


def linear_tf32_ir(b_view: str) -> str:
    """``c = a @ b`` in tf32 on 64 x 64 blocks, k by 32, ``b`` of type ``b_view``: a K-major
    ``b`` (``strided<[1, ?]>``) is an f32 linear layer's ``x @ w.T``."""
    return f"""
tile.kernel @linear(%a: {A_VIEW} {_PROMISED}, %b: {b_view} {_PROMISED},
                    %c: memref<?x?xf32, strided<[?, 1], offset: ?>>) {{
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %p0 = tile.program_id {{dim = 0 : i64}}
  %m = arith.muli %p0, %c64 : index
  %p1 = tile.program_id {{dim = 1 : i64}}
  %n = arith.muli %p1, %c64 : index
  %k = memref.dim %a, %c1 : {A_VIEW}
  %r = scf.for %i = %c0 to %k step %c32 iter_args(%acc = %z) -> (tensor<64x64xf32>) {{
    %x = tile.load %a[%m, %i] : {A_VIEW} -> tensor<64x32xf32>
    %y = tile.load %b[%i, %n] : {b_view} -> tensor<32x64xf32>
    %d = tile.dot %x, %y, %acc input_precision = tf32
        : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }}
  tile.store %r, %c[%m, %n] : tensor<64x64xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>
  tile.return
}}
"""


def test_tf32_kmajor_rhs_comes_by_tma() -> None:
    """``x @ w.T`` in tf32 on sm_90a (an f32 linear layer): wgmma's transposed B is K-major
    in memory already, so TMA boxes copy both operands (B's map over the view's dimensions
    (1, 0)) and no thread copies an element; a row-major B keeps the element copies, and the
    pipeline its cp.async."""
    kern = compile(linear_tf32_ir("memref<?x?xf32, strided<[1, ?], offset: ?>>"), "sm_90a",
                   num_stages=3)
    ptx = str(kern.asm["ptx"])
    assert [(m.view, m.box, m.swizzle, m.dims) for m in kern.metadata.tensor_maps] == [
        (0, (64, 32), 128, None), (1, (64, 32), 128, (1, 0))]
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.ca" not in ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32" in ptx
    row_major = compile(linear_tf32_ir(A_VIEW), "sm_90a", num_stages=3)
    assert row_major.metadata.tensor_maps == ()
    assert "cp.async.ca.shared.global" in str(row_major.asm["ptx"])
    torch.manual_seed(2)
    for m, k, n in PROMISED_SHAPES + [(130, 208, 80)]:
        a, w = torch.randn(m, k), torch.randn(n, k)
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.matmul_grid((m, k), (k, n), 64, 64), a, w.t(), c)
        ref = tf32_truncate(a).double() @ tf32_truncate(w).double().t()
        bound = (k + 1) * (EPS32 / 2) * (a.double().abs() @ w.double().abs().t()) + 1e-30
        assert_close(c, ref, atol=bound)


def test_f32_dots_without_tf32_stay_exact_on_cuda_cores() -> None:
    ptx = str(compile(_matmul("f32", "f32", False, 64, 64, 32), "sm_80").asm["ptx"])
    assert "mma.sync" not in ptx and "fma.rn.f32" in ptx


@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_a_tile_smaller_than_the_block_repeats_its_wgmma(promises: bool) -> None:
    """A 64 x 8 tf32 tile is one warpgroup's; on 8 warps the second warpgroup repeats the
    first's wgmma (it read B past its end, in the next warpgroup column's place, until
    2026-11-28: the emulator's out-of-bounds check caught it in a fuzzed program)."""
    kern = compile(_matmul("f32", "f32", True, 64, 8, 8), "sm_90a", num_warps=8,
                   **(PROMISES if promises else {}))
    assert "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32" in str(kern.asm["ptx"])
    torch.manual_seed(2)
    for m, k, n in PROMISED_SHAPES if promises else SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        c = _run(kern, a, b, torch.float32, 64, 8)
        ref = tf32_truncate(a).double() @ tf32_truncate(b).double()
        bound = (k + 1) * (EPS32 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
        assert_close(c, ref, atol=bound)


INT32_MAX = 2**31 - 1
#: An int8 dot's first accumulator: products of a few dozen k steps make some sums wrap.
START = INT32_MAX - 20_000


def wrapped_i32(x: torch.Tensor) -> torch.Tensor:
    """Exact integers (int64) wrapped modulo 2^32 into int32, as i32 sums wrap."""
    return ((x + 2**31) % 2**32 - 2**31).int()


def _int8_matmul(bm: int, bn: int, bk: int, kmajor_b: bool, start: int) -> KernelBuilder:
    """``c = start + a @ b`` of int8 ``a`` and ``b`` in an i32 accumulator, stored as i32;
    with ``kmajor_b`` the kernel takes ``b`` transposed (N x K, a linear layer's weight)."""
    return _typed_matmul(("i8", "i8", "i32"), (bm, bn, bk), kmajor_b, start)


def _typed_matmul(types: tuple[str, str, str], blocks: tuple[int, ...], kmajor_b: bool,
                  start: int = 0) -> KernelBuilder:
    """``c = start + a @ b`` of ``a`` and ``b`` of ``types[:2]`` in a ``types[2]``
    accumulator, stored as it is; with ``kmajor_b`` the kernel takes ``b`` transposed (N x K,
    a linear layer's weight)."""
    bm, bn, bk = blocks
    kb = KernelBuilder(
        "matmul", a=View(types[0], 2, contiguous=True), b=View(types[1], 2, contiguous=True),
        c=View(types[2], 2, contiguous=True),
    )
    with kb as k:
        m, n = k.program_id(0) * bm, k.program_id(1) * bn
        with k.loop(0, k.size(k.args.a, 1), bk,
                    carried=[k.full([bm, bn], start, types[2])]) as loop:
            (c,) = loop.carried
            a = k.load(k.args.a, [m, loop.iv], [bm, bk])
            if kmajor_b:
                b = k.trans(k.load(k.args.b, [n, loop.iv], [bn, bk]))
            else:
                b = k.load(k.args.b, [loop.iv, n], [bk, bn])
            loop.yield_(k.dot(a, b, c))
        k.store(loop.results[0], k.args.c, [m, n])
    return kb


@pytest.mark.parametrize(
    ("target", "warps", "blocks", "instruction"),
    [
        ("sm_80", 4, (64, 64, 32), "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
        ("sm_80", 8, (128, 64, 64), "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
        ("sm_80", 1, (16, 8, 32), "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
        ("sm_90a", 4, (64, 64, 32), "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"),
        # two warpgroups splitting the columns; one 8 columns wide (n8)
        ("sm_90a", 8, (64, 128, 32), "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"),
        ("sm_90a", 4, (64, 8, 32), "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8"),
    ],
    ids=["sm_80", "sm_80-w8", "sm_80-w1", "sm_90a", "sm_90a-w8-split", "sm_90a-n8"],
)
@pytest.mark.parametrize("kmajor_b", [False, True], ids=["b", "bt"])
@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_int8_dots_use_tensor_cores(target: str, warps: int, blocks: tuple[int, ...],
                                    instruction: str, kmajor_b: bool, promises: bool) -> None:
    """i8 x i8 -> i32 dots run on mma.sync m16n8k32 (sm_80) and wgmma m64nNk32 (sm_90a),
    B K-major in shared memory (the only way an 8-bit fragment holds it): a row-major B is
    transposed on its way in (4 x 4 bytes a thread), a K-major one (``x @ w.T``) is copied,
    by cp.async or TMA with the promises. The sums wrap modulo 2^32 as torch's (no
    ``.satfinite``): an accumulator that starts near the int32 maximum wraps, exactly."""
    bm, bn, bk = blocks
    kern = compile(_int8_matmul(bm, bn, bk, kmajor_b, START), target,
                   num_warps=warps, num_stages=3, **(PROMISES if promises else {}))
    ptx = str(kern.asm["ptx"])
    assert instruction in ptx
    assert "satfinite" not in ptx
    tma = promises and target == "sm_90a"
    assert ("cp.async.bulk.tensor" in ptx) == tma
    assert ("cp.async.cg.shared.global" in ptx) == (promises and not tma)
    # A row-major B goes through registers, transposed: each thread holds 4 rows and
    # stores each column's 4 bytes along K as a word, no byte alone; a K-major one with
    # the promises is copied.
    if not kmajor_b:
        assert "st.shared.b32" in ptx
        assert ("st.shared.b8" in ptx) == (not promises)  # the unaligned loads' staging
    # Pipelined, the i32 accumulators stay in place: each wgmma runs on while the next
    # iteration starts, as f32 ones do.
    assert ("wgmma.wait_group.sync.aligned 1;" in ptx) == tma
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    gen = torch.Generator().manual_seed(3)
    for m, k, n in PROMISED_SHAPES if promises else SHAPES:
        a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        c = torch.full((m, n), -7, dtype=torch.int32)
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a,
                    b.t().contiguous() if kmajor_b else b, c)
        want = a.long() @ b.long() + START
        assert (want > INT32_MAX).any()  # some sums wrap
        assert torch.equal(c, wrapped_i32(want))


@pytest.mark.parametrize(("target", "blocks"), [("sm_75", (64, 64, 32)), ("sm_80", (16, 16, 16))],
                         ids=["sm_75", "k16"])
def test_int8_dots_without_tensor_cores_are_exact(target: str, blocks: tuple[int, ...]) -> None:
    """Where no tensor-core MMA fits (before sm_80, or a k step below mma.sync's 32) an
    i8 dot runs on CUDA cores: i32 multiply-adds that wrap as the tensor cores' do."""
    bm, bn, bk = blocks
    kern = compile(_int8_matmul(bm, bn, bk, False, START), target)
    ptx = str(kern.asm["ptx"])
    assert "mma" not in ptx
    gen = torch.Generator().manual_seed(4)
    for m, k, n in SHAPES:
        a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        c = torch.full((m, n), -7, dtype=torch.int32)
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        want = a.long() @ b.long() + START
        assert torch.equal(c, wrapped_i32(want))


@pytest.mark.parametrize(("blocks", "warps"), [((64, 64, 64), 4), ((128, 128, 64), 8)])
def test_int8_dots_from_a_producer_warpgroup(blocks: tuple[int, ...], warps: int) -> None:
    """``warp_specialize`` on an int8 matmul whose B is K-major (both operands by TMA): a
    producer warpgroup after the consumers fills the ring; exact on odd shapes, no race."""
    bm, bn, bk = blocks
    kern = compile(_int8_matmul(bm, bn, bk, True, START), "sm_90a", num_warps=warps,
                   num_stages=3, warp_specialize=True, **PROMISES)
    assert kern.metadata.block[0] == 32 * warps + 128  # the producer's warpgroup
    assert "wgmma.mma_async.sync.aligned.m64n" in str(kern.asm["ptx"])
    gen = torch.Generator().manual_seed(5)
    for m, k, n in PROMISED_SHAPES + [(130, 208, 80)]:
        a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        c = torch.full((m, n), -7, dtype=torch.int32)
        stats = kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a,
                            b.t().contiguous(), c)
        assert stats.shared_races == 0
        want = a.long() @ b.long() + START
        assert torch.equal(c, wrapped_i32(want))


FP8 = {"f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}


def _fp8_values(dtype: torch.dtype) -> torch.Tensor:
    """f32 values that probe a conversion to ``dtype``: random ones over its range and
    beyond, its values, the ties half way between neighbours, and the special ones."""
    gen = torch.Generator().manual_seed(2)
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    finite = values[values.isfinite()].unique()
    ties = (finite[1:] + finite[:-1]) / 2
    specials = torch.tensor([float("inf"), -float("inf"), float("nan"), 1e30, 61440.0,
                             61439.996, 57344.0, 464.0, 480.0, 2.0**-10, -2.0**-17])
    scaled = [torch.randn(4096, generator=gen) * s for s in (1e-4, 1e-2, 1.0, 1e2, 1e4, 1e5)]
    return torch.cat([*scaled, finite, ties, -ties, specials])


@pytest.mark.parametrize("target", ["sm_80", "sm_89"], ids=["software", "cvt"])
@pytest.mark.parametrize("dtype", list(FP8))
def test_fp8_conversions_match_torch(target: str, dtype: str) -> None:
    """``cast`` from fp8 to f32 (every byte) and from f32 to fp8 (ties, subnormals,
    overflow: e4m3 saturates, e5m2 overflows to infinity) give torch's bits exactly."""
    kb = KernelBuilder("convert", x=View(dtype, 1, contiguous=True),
                       wide=View("f32", 1, contiguous=True), y=View("f32", 1, contiguous=True),
                       narrow=View(dtype, 1, contiguous=True))
    with kb as k:
        i = k.program_id(0) * 256
        k.store(k.cast(k.load(k.args.x, [i], [256]), "f32"), k.args.wide, [i])
        k.store(k.cast(k.load(k.args.y, [i], [256]), dtype), k.args.narrow, [i])
    kern = compile(kb, target)
    assert ("cvt.rn.f16x2" in str(kern.asm["ptx"])) == (target == "sm_89")
    tdt = FP8[dtype]
    y = _fp8_values(tdt)
    n = y.numel()
    x = (torch.arange(n, dtype=torch.int32) % 256).to(torch.uint8).view(tdt)
    wide, narrow = torch.zeros(n), torch.zeros(n, dtype=tdt)
    kern.launch((kernels.cdiv(n, 256),), x, wide, y, narrow)
    assert_close(wide, x.float(), atol=0.0)
    want = y.to(tdt)
    same = narrow.view(torch.uint8) == want.view(torch.uint8)
    assert bool((same | (narrow.float().isnan() & want.float().isnan())).all())


@pytest.mark.parametrize(
    ("target", "warps", "blocks", "types", "kmajor_b", "instruction"),
    [
        ("sm_80", 4, (64, 64, 64), ("f8E4M3FN", "f8E4M3FN"), False, None),
        ("sm_89", 4, (64, 64, 64), ("f8E4M3FN", "f8E4M3FN"), False,
         "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
        ("sm_89", 4, (64, 64, 64), ("f8E5M2", "f8E4M3FN"), True,
         "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32"),
        ("sm_90", 8, (128, 64, 32), ("f8E4M3FN", "f8E5M2"), False,
         "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32"),
        ("sm_90a", 4, (64, 64, 64), ("f8E4M3FN", "f8E4M3FN"), True,
         "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"),
        ("sm_90a", 8, (128, 128, 64), ("f8E5M2", "f8E4M3FN"), True,
         "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3"),
        ("sm_90a", 8, (64, 128, 128), ("f8E5M2", "f8E5M2"), False,
         "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2"),
    ],
    ids=["sm_80-cuda-cores", "sm_89", "sm_89-kmajor-mixed", "sm_90-w8-mixed", "sm_90a-kmajor",
         "sm_90a-w8-kmajor-mixed", "sm_90a-w8-split"],
)
@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_fp8_dots_use_tensor_cores(target: str, warps: int, blocks: tuple[int, ...],
                                   types: tuple[str, str], kmajor_b: bool,
                                   instruction: str | None, promises: bool) -> None:
    """fp8 dots of either format on either side: on tensor cores from sm_89, on CUDA cores
    (operands widened in software) before; odd shapes against float64 torch."""
    bm, bn, bk = blocks
    kern = compile(_typed_matmul((*types, "f32"), blocks, kmajor_b), target, num_warps=warps,
                   **(PROMISES if promises else {}))
    ptx = str(kern.asm["ptx"])
    if instruction is None:
        assert "mma" not in ptx
    else:
        assert instruction in ptx
    gen = torch.Generator().manual_seed(6)
    for m, k, n in PROMISED_SHAPES if promises else SHAPES:
        a = (torch.randn(m, k, generator=gen) * 8).to(FP8[types[0]])
        b = (torch.randn(k, n, generator=gen) * 8).to(FP8[types[1]])
        c = torch.full((m, n), float("nan"))
        stats = kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a,
                            b.t().contiguous() if kmajor_b else b, c)
        assert stats.shared_races == 0
        # fp8 products are exact in f32; tensor cores sum them with 2^-14 relative
        # precision at worst (Hopper's fp8 accumulation), each of k steps.
        bound = k * 2.0**-14 * (a.double().abs() @ b.double().abs()) + 1e-30
        assert_close(c, a.double() @ b.double(), atol=bound)
