"""sm_90a's TMA pipelines: loops feeding wgmma copy their operand tiles with
``cp.async.bulk.tensor`` on tensor maps that the launcher builds, completing on one mbarrier
per ring slot, run in the PTX emulator against PyTorch.

The emulator delivers each bulk copy at the latest moment it may (when a thread waits on its
mbarrier), raises on out-of-bounds accesses and on shared-memory races between warps, and
checks the mbarriers' arrival and transaction counts, so every run here also checks the
pipeline's phases, its slot reuse and the boxes' zero fill past the tensors' ends.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from test_kernels import assert_close, matmul_bound
from tileopt import kernels
from tileopt.builder import KernelBuilder, View
from tileopt.compiler import TensorMapParam, compile

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}


def _matmul(bm: int, bn: int, bk: int, warps: int, stages: int, dtype: str = "f16",
            tma: bool = True) -> Any:
    kb = kernels.matmul(dtype, block_m=bm, block_n=bn, block_k=bk)
    return compile(kb, "sm_90a", num_warps=warps, num_stages=stages, tma=tma, **PROMISES)


def _run(kern: Any, bm: int, bn: int, m: int, k: int, n: int,
         dtype: torch.dtype = torch.float16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    c = torch.full((m, n), float("nan"))
    kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
    return a, b, c


# K from below one block (every prefetch but the first past the end) to several rings' worth,
# not a multiple of the block (the last boxes stick out along K); M and N not multiples of
# the tile (boxes stick out along the rows and columns).
SHAPES = [(200, 304, 144), (70, 16, 48), (64, 96, 64), (130, 80, 208)]


@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_tma_pipeline_matches_torch(stages: int) -> None:
    kern = _matmul(64, 64, 32, 4, stages)
    md = kern.metadata
    ptx = str(kern.asm["ptx"])
    # One map per operand: A's 64x32 boxes in 64-byte swizzle atoms, B's 32x64 in 128-byte.
    assert md.tensor_maps == (TensorMapParam(0, (64, 32), 64), TensorMapParam(1, (32, 64), 128))
    assert len(re.findall(r"\.param \.align 64 \.b8 matmul_param_\d+\[128\]", ptx)) == 2
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    # A ring slot holds both 4 KiB operands and its mbarrier (8 bytes) expects both copies;
    # the f32 epilogue stores from the wgmma layout, 8-byte pairs, staging nothing. One stage
    # is a ring of one slot: each iteration copies, waits and multiplies.
    assert md.shared_bytes == stages * 8192 + stages * 8
    assert "st.shared" not in ptx and ptx.count("st.global.v2.b32") == 16
    assert ptx.count("mbarrier.init.shared::cta.b64") == stages
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r" in ptx
    assert ptx.count("mbarrier.try_wait.parity") == 1
    assert ptx.count("mbarrier.inval.shared::cta.b64") == stages
    # From 3 stages on the MMA keeps running into the next iteration, as with cp.async.
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
    assert waits == (["0"] if stages <= 2 else ["1", "0"])
    for m, k, n in SHAPES:
        a, b, c = _run(kern, 64, 64, m, k, n)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(
    ("bm", "bn", "bk", "warps", "stages", "dtype"),
    [
        (128, 128, 64, 4, 4, "f16"),
        (128, 128, 64, 8, 3, "bf16"),
        (128, 256, 64, 8, 3, "f16"),
        (64, 16, 128, 4, 3, "bf16"),  # A: two 128-byte atoms, two boxes; B: 32-byte rows
        (128, 32, 32, 4, 2, "f16"),  # 64-byte rows: 64-byte swizzle, two stages
        (128, 256, 64, 8, 1, "bf16"),  # one stage: the whole accumulator through 128 KiB
    ],
)
def test_tma_tiles_match_torch(bm: int, bn: int, bk: int, warps: int, stages: int,
                               dtype: str) -> None:
    """Large tiles (the ones Triton compiles without spills) and narrow ones, whose rows
    span several swizzle atoms or fewer bytes than 128."""
    kern = _matmul(bm, bn, bk, warps, stages, dtype)
    md = kern.metadata
    assert [m.view for m in md.tensor_maps] == [0, 1]
    assert md.tensor_maps[0].box == (bm, min(bk, 64))
    assert md.tensor_maps[1].box == (bk, min(bn, 64))
    if md.registers is not None:
        assert md.spill_bytes == 0
    torch.manual_seed(0)
    td = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    for m, k, n in [(200, 304, 144), (bm + 3, 2 * bk + 16, bn + 16)]:
        a, b, c = _run(kern, bm, bn, m, k, n, td)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_tma_needs_no_size_promise() -> None:
    """A box reads past the tensor's end as zeros, so TMA needs only the aligned rows: without
    divisible_sizes= the operands still come by TMA (and by cp.async with tma=False, whose
    runs that straddle the end copy the bytes before it: test_pipelining.py)."""
    options = {"aligned": True, "int32_indexing": True}
    kb = kernels.matmul("f16", block_m=64, block_n=64, block_k=32)
    kern = compile(kb, "sm_90a", **options)
    ptx = str(kern.asm["ptx"])
    assert len(kern.metadata.tensor_maps) == 2 and "cp.async.bulk.tensor" in ptx
    plain = str(compile(kb, "sm_90a", tma=False, **options).asm["ptx"])
    assert "cp.async.cg.shared.global" in plain and "cp.async.bulk" not in plain
    # K and N multiples of 8 (16-byte rows) but not of 16; K below one block.
    for m, k, n in [(200, 200, 40), (70, 8, 24), (130, 72, 136)]:
        a, b, c = _run(kern, 64, 64, m, k, n)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_empty_operands_read_as_zeros() -> None:
    """K = 0: the launchers give an empty view a map over zeros; no copy runs and the
    product is zeros."""
    kern = _matmul(64, 64, 32, 4, 3)
    a, b, c = _run(kern, 64, 64, 70, 0, 48)
    assert torch.equal(c, torch.zeros(70, 48))


def _check_two_products(kern: Any, m: int, k1: int, k2: int, n: int) -> None:
    """Launches ``kern(a, b, d, e, c)`` (64 x 64 blocks) on random f16 ``a`` (m x k1), ``b``
    (k1 x n), ``d`` (m x k2), ``e`` (k2 x n) and checks ``c = a @ b + d @ e``."""
    a, b = torch.randn(m, k1).half(), torch.randn(k1, n).half()
    d, e = torch.randn(m, k2).half(), torch.randn(k2, n).half()
    c = torch.full((m, n), float("nan"))
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, d, e, c)
    want = a.double() @ b.double() + d.double() @ e.double()
    assert_close(c, want, atol=matmul_bound(a, b) + matmul_bound(d, e))


def test_two_tma_pipelines_in_one_kernel() -> None:
    """c = a @ b + d @ e in two K loops: four tensor maps, each loop its own mbarriers
    (initialised before it, invalidated after it, their memory reused by the next ring)."""
    f16 = View("f16", 2, contiguous=True)
    kb = KernelBuilder("two_matmuls", a=f16, b=f16, d=f16, e=f16,
                       c=View("f32", 2, contiguous=True))
    with kb as k:
        m, n = k.program_id(0) * 64, k.program_id(1) * 64
        acc = k.full([64, 64], 0.0, "f32")
        for x, y in ((k.args.a, k.args.b), (k.args.d, k.args.e)):
            with k.loop(0, k.size(x, 1), 32, carried=[acc]) as loop:
                (carried,) = loop.carried
                tx = k.load(x, [m, loop.iv], [64, 32])
                ty = k.load(y, [loop.iv, n], [32, 64])
                loop.yield_(k.dot(tx, ty, carried))
            (acc,) = loop.results
        k.store(acc, k.args.c, [m, n])
    kern = compile(kb, "sm_90a", num_stages=3, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert [m.view for m in kern.metadata.tensor_maps] == [0, 1, 2, 3]
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 6
    torch.manual_seed(2)
    _check_two_products(kern, 130, 96, 48, 80)


def two_dots_kernel() -> KernelBuilder:
    """``c = a @ b + d @ e`` (f16, 64 x 64 blocks, k by 32) in one K loop of two dots."""
    f16 = View("f16", 2, contiguous=True)
    kb = KernelBuilder("two_dots", a=f16, b=f16, d=f16, e=f16,
                       c=View("f32", 2, contiguous=True))
    with kb as k:
        m, n = k.program_id(0) * 64, k.program_id(1) * 64
        zero = k.full([64, 64], 0.0, "f32")
        with k.loop(0, k.size(k.args.a, 1), 32, carried=[zero, zero]) as loop:
            s, t = loop.carried
            s = k.dot(k.load(k.args.a, [m, loop.iv], [64, 32]),
                      k.load(k.args.b, [loop.iv, n], [32, 64]), s)
            t = k.dot(k.load(k.args.d, [m, loop.iv], [64, 32]),
                      k.load(k.args.e, [loop.iv, n], [32, 64]), t)
            loop.yield_(s, t)
        s, t = loop.results
        k.store(s + t, k.args.c, [m, n])
    return kb


def test_two_dots_in_one_tma_pipeline() -> None:
    """c = a @ b + d @ e in one K loop: four tensor maps, each dot its own ring, and one
    mbarrier per slot for all four copies of an iteration (3 stages: 3 mbarriers, each
    expecting 4 arrivals)."""
    kb = two_dots_kernel()
    kern = compile(kb, "sm_90a", num_stages=3, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert [m.view for m in kern.metadata.tensor_maps] == [0, 1, 2, 3]
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 4;", ptx)) == 3
    assert ptx.count("mbarrier.try_wait.parity") == 1 and "cp.async.cg" not in ptx
    # Two rings of 3 slots of 8 KiB, and the mbarriers.
    assert kern.metadata.shared_bytes == 2 * 3 * 8192 + 3 * 8
    torch.manual_seed(5)
    for m, kk, n in [(130, 96, 80), (64, 16, 64)]:
        _check_two_products(kern, m, kk, kk, n)


def test_tma_and_cp_async_compute_the_same() -> None:
    """The same data in the same swizzled layout feeds the same MMAs: TMA's results are
    cp.async's, bit for bit."""
    torch.manual_seed(1)
    a, b = torch.randn(130, 208).half(), torch.randn(208, 80).half()
    results = []
    for tma in (True, False):
        kern = _matmul(64, 64, 64, 4, 3, tma=tma)
        assert ("cp.async.bulk.tensor" in str(kern.asm["ptx"])) == tma
        c = torch.full((130, 80), float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, 64, 64), a, b, c)
        results.append(c)
    assert torch.equal(results[0], results[1])


def test_views_a_box_cannot_read_keep_cp_async() -> None:
    """A tensor map needs 16-byte aligned rows (the aligned= promise, which the launchers
    check): without it the operands go through registers, and launches of an unaligned
    tensor are refused before a TMA kernel could read it wrong."""
    kb = kernels.matmul("f16")
    plain = compile(kb, "sm_90a", divisible_sizes=True)
    assert plain.metadata.tensor_maps == () and "cp.async" not in str(plain.asm["ptx"])
    kern = _matmul(64, 64, 32, 4, 3)
    a = torch.randn(64, 33).half()[:, 1:]  # rows 66 bytes apart
    b, c = torch.randn(32, 64).half(), torch.zeros(64, 64)
    with pytest.raises(Exception, match="16-byte aligned|aligned="):
        kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)


@pytest.mark.parametrize(("bm", "bn", "bk", "warps", "stages"),
                         [(64, 64, 32, 4, 3), (128, 128, 64, 4, 4)])
def test_batched_matmul_boxes_one_matrix_of_the_batch(bm: int, bn: int, bk: int, warps: int,
                                                      stages: int) -> None:
    """A batch's operand tiles (1 x rows x cols of 3-D views) come by 3-D TMA boxes, one
    element deep along the batch, and the accumulator reshaped to 1 x bm x bn keeps its
    registers: the kernel needs the shared memory of the 2-D matmul, and its registers but
    for the batch coordinate. The batch
    stride need not be the matrices' size (every other matrix of a larger batch)."""
    kb = kernels.batched_matmul("f16", block_m=bm, block_n=bn, block_k=bk)
    kern = compile(kb, "sm_90a", num_warps=warps, num_stages=stages, **PROMISES)
    flat = _matmul(bm, bn, bk, warps, stages)
    ptx = str(kern.asm["ptx"])
    assert [m.box for m in kern.metadata.tensor_maps] == [
        (1,) + m.box for m in flat.metadata.tensor_maps]
    assert "cp.async.bulk.tensor.3d" in ptx and "cp.async.cg" not in ptx
    assert kern.metadata.shared_bytes == flat.metadata.shared_bytes
    # The accumulator goes through shared memory no more than the 2-D matmul's does.
    shared_accesses = re.compile(r"\b(?:st|ld)\.shared|\b(?:st|ld)matrix")
    assert (len(shared_accesses.findall(ptx))
            == len(shared_accesses.findall(str(flat.asm["ptx"]))))
    if kern.metadata.registers is not None:
        # The loop keeps one more coordinate of its boxes (the batch) than the 2-D matmul's:
        # a few registers where the loop is where the most are live, not the accumulator's
        # bm * bn / (32 * warps) of a copy.
        assert kern.metadata.registers <= flat.metadata.registers + 4
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(3)
    for batch, m, k, n in [(3, 70, 48, 80), (2, bm + 3, 2 * bk + 16, bn + 16)]:
        a = torch.randn(2 * batch, m, k).half()[::2]
        b = torch.randn(batch, k, n).half()
        c = torch.full((batch, m, n), float("nan"))
        kern.launch(kernels.batched_matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        for i in range(batch):
            assert_close(c[i], a[i].double() @ b[i].double(), atol=matmul_bound(a[i], b[i]))
