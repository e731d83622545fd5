"""Compute-bound matmuls: software pipelining (``num_stages``), large tiles in dynamic shared
memory, and the epilogue's layout conversion in slices, run in the PTX emulator against PyTorch.

The emulator raises on any out-of-bounds access and on shared-memory races between warps
(``shared_checks="raise"``, its default), so every run here also checks that the pipeline's
waits and barriers keep each ring slot's copies and reads apart.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import torch
from test_kernels import ROUND, assert_close, assert_wgmma_stays_async, matmul_bound
from tileopt import kernels
from tileopt.builder import KernelBuilder, View
from tileopt.compiler import compile
from tileopt.errors import CompilationError, OptionError

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}


def _matmul(target: str, bm: int, bn: int, bk: int, warps: int, stages: int,
            out_dtype: str = "f32") -> Any:
    """The pipelined matmul on cp.async copies (sm_90a's TMA pipelines: test_tma.py)."""
    kb = kernels.matmul("f16", block_m=bm, block_n=bn, block_k=bk, out_dtype=out_dtype)
    return compile(kb, target, num_warps=warps, num_stages=stages, tma=False, **PROMISES)


def _check(kern: Any, bm: int, bn: int, m: int, k: int, n: int,
           dtype: torch.dtype = torch.float32) -> None:
    a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
    c = torch.full((m, n), float("nan"), dtype=dtype)
    kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
    want = a.double() @ b.double()
    rounding = 0 if dtype == torch.float32 else want.abs() * torch.finfo(dtype).eps
    assert_close(c, want, atol=matmul_bound(a, b) + rounding)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
def test_pipelined_matmul_matches_torch(target: str, stages: int) -> None:
    kern = _matmul(target, 64, 64, 32, 4, stages)
    ptx = str(kern.asm["ptx"])
    waits = set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx))
    # A running wgmma (sm_90a, 3 stages or more) holds one slot: its copies run one fewer ahead.
    ahead = stages - 1 - (target == "sm_90a" and stages >= 3)
    if stages == 1:  # each iteration waits for its own copies
        assert waits == {"0"}
    else:  # `ahead` iterations in flight, drained after the loop
        assert waits == {str(ahead - 1), "0"}
        # A ring slot holds the 64x32 and 32x64 f16 operands (swizzled, 8 KB); one slot per
        # stage for wgmma, one fewer for mma.sync, which is done with its slot when it
        # refills it (as Triton's sm_80 pipeline). The f32 result needs no more: it is
        # stored straight from the mma layout (test_f32_epilogue_stores_from_the_mma_layout).
        rings = (stages if target == "sm_90a" else stages - 1) * 8192
        assert kern.metadata.shared_bytes == rings
    # K from below one block (every prefetch past the end) to several rings' worth;
    # M and N not multiples of the tile.
    for m, k, n in [(200, 304, 144), (70, 16, 48), (64, 96, 64)]:
        _check(kern, 64, 64, m, k, n)


def _tight(rows: int, cols: int, dtype: torch.dtype, fill: float | None = None) -> torch.Tensor:
    """A ``rows x cols`` view whose rows start 16 bytes apart or a multiple of that (as
    ``aligned=True`` promises) and whose storage ends at its last element: a 16-byte copy of
    the last row's last run reads past the storage unless it stops at the view's end."""
    stride = -(-cols * dtype.itemsize // 16) * 16 // dtype.itemsize
    storage = torch.randn((rows - 1) * stride + cols).to(dtype)
    if fill is not None:
        storage.fill_(fill)
    return storage.as_strided((rows, cols), (stride, 1))


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_pipeline_copies_runs_that_straddle_the_end(target: str) -> None:
    """Without ``divisible_sizes`` a row's last 16-byte run may straddle the view's end: its
    cp.async copies the elements before the end and zero-fills the rest, so aligned views of
    any size still copy asynchronously and the K loop is still pipelined."""
    kb = kernels.matmul("f16", block_m=64, block_n=64, block_k=32)
    kern = compile(kb, target, num_warps=4, num_stages=3, tma=False, aligned=True,
                   int32_indexing=True)
    ptx = str(kern.asm["ptx"])
    ahead = 2 - (target == "sm_90a")
    assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == {str(ahead - 1), "0"}
    assert kern.metadata.shared_bytes == (3 if target == "sm_90a" else 2) * 8192
    # K and N from under one run to several blocks, none a multiple of 8.
    for m, k, n in [(70, 45, 33), (130, 203, 129), (64, 7, 65)]:
        a, b = _tight(m, k, torch.float16), _tight(k, n, torch.float16)
        c = _tight(m, n, torch.float32, fill=float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, 64, 64), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("stages", [1, 3])
def test_batched_matmul_copies_and_pipelines(target: str, stages: int) -> None:
    """A batch's matrices load as 1 x M x K tiles reshaped to M x K: they still copy with
    cp.async straight into the dot's staging area, and the K loop is pipelined."""
    kb = kernels.batched_matmul("f16", block_m=64, block_n=64, block_k=32)
    kern = compile(kb, target, num_warps=4, num_stages=stages, tma=False, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert "cp.async.cg.shared.global" in ptx
    ahead = stages - 1 - (target == "sm_90a" and stages >= 3)
    waits = set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx))
    assert waits == ({"0"} if stages == 1 else {str(ahead - 1), "0"})
    for batch, m, k, n in [(3, 130, 96, 80), (2, 64, 32, 64), (1, 70, 160, 208)]:
        a, b = torch.randn(batch, m, k).half(), torch.randn(batch, k, n).half()
        c = torch.full((batch, m, n), float("nan"))
        kern.launch(kernels.batched_matmul_grid(a.shape, b.shape, 64, 64), a, b, c)
        for i in range(batch):
            assert_close(c[i], a[i].double() @ b[i].double(), atol=matmul_bound(a[i], b[i]))


def _check_attention(kern: Any, batch: int, m: int, n: int, d: int = 64,
                     causal: bool = False) -> None:
    """kernels.attention (64-row blocks) on random f16 q, k, v against torch."""
    q, k, v = (torch.randn(batch, rows, d).half() for rows in (m, n, n))
    o = torch.full((batch, m, d), float("nan")).half()
    kern.launch(kernels.attention_grid(q.shape, 64), q, k, v, o, 0.125)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), scale=0.125, is_causal=causal)
    # As test_kernels.test_attention: p is rounded to f16 before its product.
    assert_close(o, want, atol=(4 * ROUND["f16"] + 1e-6) * want.abs().max(),
                 rtol=4 * ROUND["f16"])


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("stages", [1, 3])
def test_attention_prefetches_keys_and_values(target: str, stages: int) -> None:
    """Attention's k^T (a 1 x N x D load, reshaped and transposed) copies with cp.async into
    the scores dot's K-major staging area, and v into the second dot's (p, its lhs, stays in
    registers: nothing else uses shared memory between v's load and its dot). With 3 stages
    each of its two loops (the masked blocks, then the whole ones) prefetches keys and values
    two blocks ahead."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64)
    kern = compile(kb, target, num_warps=4, num_stages=stages, tma=False, **PROMISES)
    ptx = str(kern.asm["ptx"])
    # 4 copies of 16 bytes per thread move a 64 x 64 f16 block: keys and values, for one
    # block with 1 stage; for two blocks in the prologue and one per iteration with 3; in
    # each of the two loops.
    copies = 2 * (2 * 4 if stages == 1 else 3 * 2 * 4)
    assert ptx.count("cp.async.cg.shared.global") == copies
    waits = {"0"} if stages == 1 else {"1", "0"}
    assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == waits
    for batch, m, n in [(2, 130, 96), (1, 64, 200)]:
        _check_attention(kern, batch, m, n)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("target", "tma"), [("sm_90a", True), ("sm_90a", False),
                                             ("sm_80", False)])
def test_attention_overlaps_the_softmax_with_the_values_product(
    target: str, tma: bool, causal: bool
) -> None:
    """``kernels.attention(overlap=True)``: the loop over the whole blocks issues block j's
    scores, then block j-1's p v. On sm_90a the wait for the scores moves below p v's commit
    (``wgmma.wait_group 1``: p v keeps running) with the softmax that reads them, and p v's
    wait (``wait_group 0``) comes after the softmax's exponentials; ptxas keeps every wgmma
    asynchronous (the wait holds p's registers, which the wgmma reads). The emulator, which
    gives a wgmma's accumulators only at the wait that retires it, runs it against torch on
    every target, with the first and last blocks outside the loop (one block of keys, none
    whole, many)."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64, causal=causal,
                           overlap=True)
    kern = compile(kb, target, num_warps=4, num_stages=2, tma=tma, **PROMISES)
    ptx = str(kern.asm["ptx"])
    if target == "sm_90a":
        assert ptx.count("wgmma.wait_group.sync.aligned 1;") == 1
        after = ptx.split("wgmma.wait_group.sync.aligned 1;")[1]
        softmax = after[:after.index("wgmma.wait_group.sync.aligned 0;")]
        # 64 x 64 scores over 128 threads: 32 exponentials a thread, and alpha's.
        assert softmax.count("ex2.approx.ftz.f32") >= 32
        assert_wgmma_stays_async(ptx, target)
    torch.manual_seed(7)
    shapes = ([(2, 130, 130), (1, 64, 64), (1, 200, 200), (1, 16, 16)] if causal else
              [(2, 130, 200), (1, 64, 64), (1, 70, 16), (1, 200, 130)])
    for batch, m, n in shapes:
        _check_attention(kern, batch, m, n, causal=causal)


def test_maxnreg_gives_the_overlapped_attention_its_blocks_back() -> None:
    """The overlapped attention at d 64 (64 x 64 blocks, 4 warps, 3 stages on cp.async:
    57,344 bytes of shared memory, four blocks an H100 SM) takes 159 registers a thread,
    which leave room for three; ``maxnreg=128`` (the kernel's ``.maxnreg``) fits it in 128
    without spills, four blocks again, and it still matches torch."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64, overlap=True)
    free = compile(kb, "sm_90a", num_warps=4, num_stages=3, tma=False, **PROMISES)
    kern = compile(kb, "sm_90a", num_warps=4, num_stages=3, tma=False, maxnreg=128,
                   **PROMISES)
    assert ".maxnreg 128" in str(kern.asm["ptx"]) and ".maxnreg" not in str(free.asm["ptx"])
    assert kern.metadata.shared_bytes == free.metadata.shared_bytes == 57344
    if kern.metadata.registers is not None:
        assert free.metadata.registers > 128 >= kern.metadata.registers
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(9)
    _check_attention(kern, 2, 130, 200)


@pytest.mark.parametrize(("target", "tma"), [("sm_90a", True), ("sm_90a", False),
                                             ("sm_80", False)])
@pytest.mark.parametrize("stages", [1, 3])
def test_dot_of_the_loops_carried_lhs(target: str, tma: bool, stages: int) -> None:
    """A dot whose lhs is a tile the loop carries (the block it loaded in the iteration
    before) stages it each iteration. Its lowering asks whether that lhs is loop-invariant
    after the loop body's arguments were replaced (it crashed the compiler)."""
    kb = KernelBuilder("carried_lhs", x=View("f16", 2, contiguous=True),
                       o=View("f32", 2, contiguous=True))
    with kb as k:
        acc0 = k.full([64, 64], 0.0, "f32")
        with k.loop(0, k.size(k.args.x, 0), 64,
                    carried=[acc0, k.full([64, 64], 0.0, "f16")]) as loop:
            acc, previous = loop.carried
            block = k.load(k.args.x, [loop.iv, 0], [64, 64])
            loop.yield_(k.dot(previous, block, acc), block)
        k.store(loop.results[0], k.args.o, [0, 0])
    kern = compile(kb, target, num_warps=4, num_stages=stages, tma=tma, **PROMISES)
    torch.manual_seed(8)
    for n in (64, 256, 200):
        x, o = torch.randn(n, 64).half(), torch.full((64, 64), float("nan"))
        kern.launch((1,), x, o)
        # sum_i x_{i-1} x_i: one matmul of the blocks side by side and stacked.
        blocks = list(torch.nn.functional.pad(x, (0, 0, 0, -n % 64)).split(64))
        a = torch.cat([torch.zeros(64, 64).half(), *blocks[:-1]], dim=1)
        b = torch.cat(blocks, dim=0)
        assert_close(o, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize("causal", [False, True])
def test_attention_on_warpgroups_that_split_the_columns(causal: bool) -> None:
    """64-row blocks on 8 warps, d 128, on sm_90a: both dots' warpgroups split the columns
    (the scores 32 a warpgroup, the output 64), so their layouts differ in blockN alone. The
    loop carries the rescaled output in its dot's layout: only the 64 x 1 row statistics
    change layout (in place) and p goes to shared memory for the second dot, nothing 64 x 128
    moves through shared memory in the loop."""
    kb = kernels.attention("f16", head_dim=128, block_m=64, block_n=64, causal=causal)
    kern = compile(kb, "sm_90a", num_warps=8, num_stages=2, **PROMISES)
    tilegpu = str(kern.asm["tilegpu"])
    assert "#tile.mma<warpsPerCTA = [4, 2], blockN = 32>" in tilegpu
    assert "#tile.mma<warpsPerCTA = [4, 2], blockN = 64>" in tilegpu
    loops = tilegpu[tilegpu.index("scf.for"):tilegpu.rindex("scf.yield")]
    assert not re.search(r"tile\.convert_layout [^\n]*tensor<64x128xf32", loops)
    ptx = str(kern.asm["ptx"])
    assert "m64n32k16" in ptx and "m64n64k16" in ptx and "mma.sync" not in ptx
    torch.manual_seed(5)
    for batch, m, n in [(2, 100, 130), (1, 64, 64)]:
        _check_attention(kern, batch, m, n, d=128, causal=causal)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_pipeline_of_two_dots_by_tma(causal: bool) -> None:
    """On sm_90a (TMA's default) both dots' operands come by TMA: one 3-D box of 64 keys and
    one of 64 values per block (k^T's transpose swaps nothing in the map: the box reads k's
    rows as the K-major staging area wants them), both counted by one mbarrier per ring slot,
    which the iteration waits for once. No thread computes a copy's addresses: fewer
    instructions and registers than the cp.async pipeline, for 16 bytes of mbarriers."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64, causal=causal)
    kern = compile(kb, "sm_90a", num_warps=4, num_stages=2, **PROMISES)
    plain = compile(kb, "sm_90a", num_warps=4, num_stages=2, tma=False, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert [(m.view, m.box, m.dims) for m in kern.metadata.tensor_maps] == [
        (1, (1, 64, 64), None), (2, (1, 64, 64), None)]
    # One block of keys and values in the prologue, one per iteration; in each of the two
    # loops (the masked blocks, then the whole ones).
    assert ptx.count("cp.async.bulk.tensor.3d") == 2 * 2 * 2 and "cp.async.cg" not in ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 2 * 2
    assert ptx.count("mbarrier.try_wait.parity") == 2
    assert kern.metadata.shared_bytes <= plain.metadata.shared_bytes + 128
    assert ptx.count("\n") < str(plain.asm["ptx"]).count("\n")
    if kern.metadata.registers is not None:
        assert kern.metadata.registers <= plain.metadata.registers
    torch.manual_seed(4)
    for batch, m, n in [(2, 130, 96), (1, 64, 200), (1, 70, 16)]:
        _check_attention(kern, batch, m, n, causal=causal)


def test_tma_that_costs_a_block_per_sm_keeps_cp_async() -> None:
    """With 3 stages, attention's rings of 64 x 64 f16 keys and values and its 64 x 64 queries
    fill 57,344 bytes: four blocks per H100 SM (228 KiB, 1 KiB kept per block). TMA's 24 bytes
    of mbarriers would leave room for three (5% slower on an H100), so the loop keeps
    cp.async. With 128-row query blocks three blocks fit either way, and TMA stays."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64)
    kern = compile(kb, "sm_90a", num_warps=4, num_stages=3, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert kern.metadata.tensor_maps == () and "cp.async.bulk" not in ptx
    assert ptx.count("cp.async.cg.shared.global") == 2 * 3 * 2 * 4
    assert kern.metadata.shared_bytes == 57344
    wide = compile(kernels.attention("f16", head_dim=64, block_m=128, block_n=64), "sm_90a",
                   num_warps=8, num_stages=3, **PROMISES)
    assert len(wide.metadata.tensor_maps) == 2
    assert wide.metadata.shared_bytes == 3 * 2 * 8192 + 16384 + 3 * 8
    torch.manual_seed(6)
    _check_attention(kern, 2, 130, 96)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_attention_key_mask_in_groups(target: str) -> None:
    """With the key count promised a multiple of 16, the key mask (in the scores' mma layout)
    is one compare per aligned group of 16 columns: a thread's 16 columns take 4, not 16.
    Key counts that are multiples of 16 but not of the 64-key block still mask the last
    block's missing keys."""
    kb = kernels.attention("f16", head_dim=64, block_m=64, block_n=64)
    promises = {**PROMISES, "divisible_sizes": {"q": (1, 1, 16), "k": (1, 16, 16),
                                                "v": (1, 16, 16), "o": (1, 1, 16)}}
    grouped = compile(kb, target, num_warps=4, num_stages=3, **promises)
    plain = compile(kb, target, num_warps=4, num_stages=3, **PROMISES)

    def compares(kern: Any) -> int:
        return len(re.findall(r"setp\.lt\.s32", str(kern.asm["ptx"])))
    assert compares(plain) - compares(grouped) == 16 - 4
    for batch, m, n in [(2, 70, 80), (1, 64, 144)]:
        _check_attention(grouped, batch, m, n)


@pytest.mark.parametrize(
    ("target", "bm", "bn", "bk", "warps", "stages"),
    [
        ("sm_80", 128, 128, 64, 4, 3),
        ("sm_80", 128, 128, 64, 8, 4),
        ("sm_80", 128, 256, 64, 8, 3),
        ("sm_90a", 128, 128, 64, 4, 4),
        ("sm_90a", 128, 128, 64, 8, 3),
        ("sm_90a", 128, 256, 64, 8, 4),
        # a 128 x 256 f16 rhs on 4 warps: 256 halves a thread, 128 registers if it were
        # ever held (it is copied); the register check counted 256 and refused it
        ("sm_80", 16, 256, 128, 4, 3),
        ("sm_90a", 16, 256, 128, 4, 3),
    ],
)
def test_large_tiles_run_in_dynamic_shared_memory(
    target: str, bm: int, bn: int, bk: int, warps: int, stages: int
) -> None:
    """The tiles Triton compiles without spills compile without spills here too; above 48 KiB
    their shared memory is the launch's dynamic shared memory."""
    kern = _matmul(target, bm, bn, bk, warps, stages)
    md = kern.metadata
    ptx = str(kern.asm["ptx"])
    assert md.dynamic_shared_bytes == md.shared_bytes > 48 * 1024
    assert re.search(r"\.extern \.shared \.align \d+ \.b8 matmul_smem\[\];", ptx)
    ahead = stages - 1 - (target == "sm_90a")
    assert f"cp.async.wait_group \t{ahead - 1};" in ptx
    if md.registers is None:
        pytest.skip("neither ptxas nor nvJitLink is installed: no register report")
    assert md.spill_bytes == 0 and md.registers <= 255
    _check(kern, bm, bn, 200, 304, 272)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_wgmma_runs_into_the_next_iteration(stages: int) -> None:
    """With 3 stages or more the pipelined wgmma waits only for the previous iteration's MMA
    (wait_group 1), so each MMA runs while the next iteration waits for its copies and issues
    its own; the copies run stages - 2 iterations ahead (one slot is the running MMA's), and
    after the loop wait_group 0 takes the accumulators before the epilogue reads them."""
    kern = _matmul("sm_90a", 64, 64, 32, 4, stages)
    ptx = str(kern.asm["ptx"])
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
    loop = ptx.index("cp.async.wait_group")  # the first wait is the loop's
    prologue_commits = ptx[:loop].count("cp.async.commit_group")
    if stages == 2:  # no slot to spare: each MMA is waited for
        assert waits == ["0"] and prologue_commits == 1
    else:
        assert waits == ["1", "0"] and prologue_commits == stages - 2
        assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == {str(stages - 3), "0"}
    for m, k, n in [(200, 304, 144), (70, 16, 48), (64, 96, 64), (130, 64, 80)]:
        _check(kern, 64, 64, m, k, n)


def test_too_many_stages_for_the_chip_get_fewer() -> None:
    """Five 128x256x64 stages (four 48 KiB slots) do not fit an A100's 163 KiB: the pipeline
    keeps four."""
    kern = _matmul("sm_80", 128, 256, 64, 8, 5)
    assert "cp.async.wait_group \t2;" in str(kern.asm["ptx"])
    assert kern.metadata.shared_bytes <= 163 * 1024


def test_num_stages_is_checked() -> None:
    kb = kernels.matmul("f16")
    for bad in (0, 9, 2.0, True):
        with pytest.raises(OptionError, match="num_stages must be"):
            compile(kb, "sm_80", num_stages=bad)
    kb = kernels.matmul("f16")
    kb.module.body.operations[0].attributes["tile.num_stages"] = _i64(kb, 9)
    with pytest.raises(CompilationError, match=r"tile.num_stages must be an integer in \[1, 8\]"):
        compile(kb, "sm_80")


def _i64(kb: KernelBuilder, value: int) -> Any:
    from tileopt import ir

    with kb.module.context:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def test_kernel_attribute_sets_its_stages() -> None:
    kb = kernels.matmul("f16")
    kb.module.body.operations[0].attributes["tile.num_stages"] = _i64(kb, 2)
    ptx = str(compile(kb, "sm_80", num_stages=4, **PROMISES).asm["ptx"])
    assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == {"0"}  # 2 stages: 0 ahead


def test_dynamic_shared_memory_from_ptx_needs_its_size() -> None:
    """PTX does not record the size of its dynamic shared memory: compiling such PTX asks
    for it, and a launch passes what it was given."""
    kern = _matmul("sm_80", 128, 128, 64, 8, 3)
    ptx, size = str(kern.asm["ptx"]), kern.metadata.dynamic_shared_bytes
    signature = kern.metadata.abi
    with pytest.raises(CompilationError, match="pass compile\\(..., dynamic_shared_bytes=N\\)"):
        compile(ptx, "sm_80", 8, start="ptx", signature=signature)
    again = compile(ptx, "sm_80", 8, start="ptx", signature=signature, dynamic_shared_bytes=size)
    assert again.metadata.dynamic_shared_bytes == size
    _check(again, 128, 128, 130, 64, 144)
    with pytest.raises(OptionError, match="dynamic_shared_bytes= is for start='ptx'"):
        compile(kernels.matmul("f16"), "sm_80", dynamic_shared_bytes=1024)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_f32_epilogue_stores_from_the_mma_layout(target: str) -> None:
    """An f32 result goes to memory straight from the accumulator's registers: each pair of
    a fragment is an 8-byte vector and a row's four lanes fill a 32-byte sector, so the warp
    writes whole sectors with no staging through shared memory (32 st.global.v2 a thread at
    128x128 on 8 warps). Above 64 elements a thread (4 warps) the result converts in slices
    through shared memory, which keeps fewer addresses live."""
    kern = _matmul(target, 128, 128, 64, 8, 3)
    ptx = str(kern.asm["ptx"])
    assert ptx.count("st.global.v2.b32") == 32
    assert "st.shared" not in ptx and "st.global.b32" not in ptx
    _check(kern, 128, 128, 200, 80, 272)
    ptx = str(_matmul(target, 128, 128, 64, 4, 3).asm["ptx"])
    assert "st.shared" in ptx and "st.global.v4.b32" in ptx


def test_f16_epilogue_conversion_moves_vectors() -> None:
    """An f16 result's conversion to the store's layout moves vectors through shared memory:
    the mma layout's column pairs as 32-bit words, the store layout's 16-byte row pieces as
    ld.shared.v4 (rows padded by one 16-byte vector keep both aligned)."""
    kern = _matmul("sm_80", 128, 128, 64, 4, 3, "f16")
    ptx = str(kern.asm["ptx"])
    assert ptx.count("st.shared.b32") == 64 and ptx.count("ld.shared.v4.b32") == 16
    assert "ld.shared.b32" not in ptx and "st.shared.b16" not in ptx
    _check(kern, 128, 128, 200, 80, 272, torch.float16)


def test_epilogue_reuses_the_rings_and_converts_in_slices() -> None:
    """After the loop its rings are dead: the epilogue's conversion of the 128x128 f16
    result (34 KB with its padding) reuses their space (three 32 KB stages, as Triton's).
    Where both layouts hold whole slices of rows (mma.sync's 2x2 warps and the store's rows of
    warps) the conversion goes in four slices of 32 rows, so one unpipelined stage is all the
    kernel needs."""
    kern = _matmul("sm_90a", 128, 128, 64, 8, 3, "f16")
    assert kern.metadata.shared_bytes == 3 * 32768
    kern = _matmul("sm_80", 128, 128, 64, 4, 1, "f16")
    assert kern.metadata.shared_bytes == 128 * 64 * 2 + 64 * 128 * 2
    ptx = str(kern.asm["ptx"])
    assert ptx.count("bar.sync") >= 2 + 2 * 4  # the loop's two, two per slice
    _check(kern, 128, 128, 200, 80, 272, torch.float16)


@pytest.mark.parametrize(
    ("target", "bm", "bn", "bk", "warps", "stages", "tma"),
    [
        ("sm_80", 96, 192, 32, 4, 3, False),
        ("sm_80", 192, 64, 32, 8, 4, False),
        ("sm_90a", 192, 192, 64, 8, 3, True),
        ("sm_90a", 128, 192, 64, 8, 3, False),
        ("sm_90a", 64, 192, 64, 4, 4, True),
        ("sm_90a", 48, 96, 32, 4, 2, False),  # 32 and 16 rows: mma.sync
    ],
)
def test_split_blocks_copy_each_part_once(target: str, bm: int, bn: int, bk: int, warps: int,
                                          stages: int, tma: bool) -> None:
    """A block of three times a power of two is two tiles (192: 128 and 64) and a dot per pair
    of parts (kernels.matmul). Each part of a and b is copied once a stage, into the staging
    area of the first dot that reads it, where the other dots read it too: the rings hold
    each part once a stage, not once per dot, and the kernel is pipelined."""
    kb = kernels.matmul("f16", block_m=bm, block_n=bn, block_k=bk, out_dtype="f16")
    kern = compile(kb, target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert ("cp.async.bulk.tensor" if tma else "cp.async.cg") in ptx
    parts_m, parts_n = (2 if bm % 3 == 0 else 1), (2 if bn % 3 == 0 else 1)
    # Less than if each dot staged both of its parts.
    assert kern.metadata.shared_bytes < stages * (bm * parts_n + bn * parts_m) * bk * 2
    # The wgmma dots keep running into the next iteration: each waits until as many groups
    # as the dots are left (this iteration's), and after the loop one wait_group 0 takes
    # their results.
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
    if waits and stages >= 3:
        dots = parts_m * parts_n
        assert waits == [str(dots)] * dots + ["0"]
    if target == "sm_90a":
        # Nothing on the way to that wait writes the accumulators (the loop's zero-trip
        # path joins after it).
        assert_wgmma_stays_async(ptx, target)
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(0)
    for m, k, n in [(200, 304, 400), (bm + 3, 2 * bk + 16, bn + 16), (70, 16, 48)]:
        _check(kern, bm, bn, m, k, n, torch.float16)


def test_split_block_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="power of two or three times one"):
        kernels.matmul("f16", block_m=160)
    with pytest.raises(ValueError, match="power of two or three times one"):
        kernels.matmul("f16", block_n=24)
    with pytest.raises(ValueError, match="block_k must be a power of two"):
        kernels.matmul("f16", block_k=48)


def _random_split_cases(seed: int, count: int) -> list[tuple[Any, ...]]:
    """Blocks with a part of 192, 96 or 48 on either side, any target, warps, stages, copy,
    dtype, epilogue, result and program order."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        target = rng.choice(["sm_80", "sm_90a"])
        bm, bn = rng.choice([(192, 64), (96, 128), (64, 192), (192, 192), (48, 96),
                             (128, 96)])
        bk = rng.choice([32, 64])
        warps = rng.choice([4, 8])
        stages = rng.choice([2, 3, 4])
        if (bm + bn) * bk * 2 * stages > 160 * 1024:  # an A100's shared memory
            continue
        cases.append((target, bm, bn, bk, warps, stages, rng.random() < 0.5,
                      rng.choice(["f16", "bf16"]), rng.choice([None, "bias_relu"]),
                      rng.choice(["f32", "f16"]), rng.choice([None, 3])))
    return cases


@pytest.mark.parametrize("case", _random_split_cases(seed=5, count=8), ids=str)
def test_random_split_blocks(case: tuple[Any, ...]) -> None:
    target, bm, bn, bk, warps, stages, tma, dtype, epilogue, out_dtype, group_m = case
    kb = kernels.matmul(dtype, block_m=bm, block_n=bn, block_k=bk, epilogue=epilogue,
                        out_dtype=out_dtype, group_m=group_m)
    kern = compile(kb, target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
    torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    rng = torch.Generator().manual_seed(bm * bn + stages)
    for m, k, n in [(2 * bm + 5, 3 * bk + 16, bn + 48), (bm - 7, bk, 2 * bn)]:
        a = torch.randn(m, k, generator=rng).to(torch_dtype)
        b = torch.randn(k, n, generator=rng).to(torch_dtype)
        bias = torch.randn(n, generator=rng)
        out = torch.float32 if out_dtype == "f32" else torch.float16
        c = torch.full((m, n), float("nan"), dtype=out)
        args = [a, b, bias, c] if epilogue else [a, b, c]
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), *args)
        want = a.double() @ b.double()
        bound = matmul_bound(a, b)
        if epilogue:
            want = torch.relu(want + bias.double())
        if out != torch.float32:
            bound = bound + want.abs() * torch.finfo(out).eps
        assert_close(c, want, atol=bound)
