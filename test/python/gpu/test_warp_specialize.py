"""sm_90a's warp-specialised TMA pipelines (``warp_specialize=True``): a producer warp, in a
warpgroup after the kernel's ``num_warps``, issues the copies of each K step once the
consumers left its ring slot; the consumers wait for the copies and run the dots, with no
barrier across the block in their loop. Run in the PTX emulator against PyTorch.

The emulator runs the producer and the consumers as the GPU would let them (a warp spinning
on an mbarrier yields to the others), lands each copy at the latest moment it may, and
raises on shared-memory races and on waits that can never succeed, so every run also
checks the "full" and "empty" mbarriers' counts and phases.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import torch
from test_kernels import assert_close, assert_wgmma_stays_async, matmul_bound
from tileopt import kernels
from tileopt.compiler import compile
from tileopt.errors import OptionError

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def _matmul(bm: int, bn: int, bk: int, warps: int, stages: int, dtype: str = "f16",
            **options: Any) -> Any:
    kb = kernels.matmul(dtype, block_m=bm, block_n=bn, block_k=bk)
    return compile(kb, "sm_90a", num_warps=warps, num_stages=stages, **PROMISES, **options)


def _consumer_loop(ptx: str) -> str:
    """The consumers' K loop: from its wait for a slot's copies to its release of a slot."""
    start = ptx.index("mbarrier.try_wait.parity")
    return ptx[start:ptx.index("mbarrier.arrive.shared::cta.b64 _", start)]


@pytest.mark.parametrize(
    ("bm", "bn", "bk", "warps", "stages", "dtype"),
    [
        (64, 64, 32, 4, 2, "f16"),  # two slots: each is refilled as soon as it is left
        (64, 64, 32, 4, 3, "bf16"),
        (128, 128, 64, 4, 3, "f16"),
        (128, 128, 64, 8, 4, "f16"),  # two consumer warpgroups
        (64, 128, 64, 8, 3, "f16"),  # two consumer warpgroups, 64 columns each
        (128, 256, 64, 8, 3, "f16"),
    ],
)
def test_producer_warp_matches_torch(bm: int, bn: int, bk: int, warps: int, stages: int,
                                     dtype: str) -> None:
    kern = _matmul(bm, bn, bk, warps, stages, dtype, warp_specialize=True)
    plain = _matmul(bm, bn, bk, warps, stages, dtype)
    md, ptx = kern.metadata, str(kern.asm["ptx"])
    # The block: the consumers' warps and the producer's warpgroup.
    assert md.num_warps == warps + 4 and md.block == (32 * (warps + 4), 1, 1)
    assert f".reqntid {32 * (warps + 4)}\n" in ptx
    assert md.tensor_maps == plain.metadata.tensor_maps
    # A "full" and an "empty" mbarrier per slot (8 bytes each, after the rings, which the
    # epilogue's conversion may outgrow): the full ones expect the two copies, the empty
    # ones every consumer thread.
    assert md.shared_bytes - plain.metadata.shared_bytes in (0, 8 * stages)
    assert ptx.count("mbarrier.init.shared::cta.b64") == 2 * stages
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 2;", ptx)) == stages
    assert len(re.findall(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {32 * warps};",
                          ptx)) == stages
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 2 * stages
    # Two consumer warpgroups take the producer warpgroup's registers: 168 a thread at
    # launch (the register file over 384 threads), 40 for the producer, 232 for them. One
    # consumer warpgroup can have 255 a thread without it.
    rebalanced = [".maxnreg 168", "setmaxnreg.dec.sync.aligned.u32 40;",
                  "setmaxnreg.inc.sync.aligned.u32 232;"]
    assert [line in ptx for line in rebalanced] == [warps == 8] * 3
    if warps == 4:
        assert "setmaxnreg" not in ptx
    # One barrier of the whole block (after the mbarriers' set-up); the consumers' own are
    # barrier 1 of their threads, and none is in their loop, which issues no copy.
    assert len(re.findall(r"bar\.sync\s+0;", ptx)) == 1
    assert re.search(rf"bar\.sync\s+1, {32 * warps};", ptx)
    loop = _consumer_loop(ptx)
    assert "bar.sync" not in loop and "cp.async.bulk" not in loop and "wgmma.mma_async" in loop
    if md.registers is not None:
        assert md.spill_bytes == 0
    torch.manual_seed(0)
    td = DTYPES[dtype]
    # K below one block, several rings' worth, and none at all (no copy, zeros); M and N not
    # multiples of the tile.
    for m, k, n in [(200, 304, 144), (70, 16, 48), (bm + 3, 2 * bk + 16, bn + 16), (70, 0, 48)]:
        a, b = torch.randn(m, k).to(td), torch.randn(k, n).to(td)
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_maxnreg_caps_every_warpgroup() -> None:
    """With ``maxnreg`` the kernel declares it and its warpgroups keep it: the producer gives
    none of its registers to the consumers (no setmaxnreg), which ptxas fits in the cap."""
    kern = _matmul(128, 128, 64, 8, 3, warp_specialize=True, maxnreg=200)
    ptx = str(kern.asm["ptx"])
    assert ".maxnreg 200" in ptx and "setmaxnreg" not in ptx
    if kern.metadata.registers is not None:
        assert kern.metadata.registers <= 200
    torch.manual_seed(3)
    a, b = torch.randn(200, 304).half(), torch.randn(304, 144).half()
    c = torch.full((200, 144), float("nan"))
    kern.launch(kernels.matmul_grid(a.shape, b.shape, 128, 128), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(("bm", "bn", "warps", "stages"),
                         [(192, 192, 8, 3), (128, 192, 8, 3), (64, 192, 4, 4)])
def test_split_blocks_keep_their_dots_running(bm: int, bn: int, warps: int,
                                              stages: int) -> None:
    """A block of 192 is two tiles a dimension and a dot per pair of parts (kernels.matmul).
    The consumers' dots all keep running into the next iteration, as without a producer
    warp: each waits until as many groups as the dots are left, one wait_group 0 after the
    loop takes their results, and ptxas keeps every wgmma asynchronous (no C7515)."""
    kern = _matmul(bm, bn, 64, warps, stages, warp_specialize=True)
    ptx = str(kern.asm["ptx"])
    dots = (2 if bm % 3 == 0 else 1) * (2 if bn % 3 == 0 else 1)
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx) == [str(dots)] * dots + ["0"]
    assert_wgmma_stays_async(ptx, "sm_90a")
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(0)
    for m, k, n in [(200, 304, 208), (bm + 3, 2 * 64 + 16, bn + 16), (70, 0, 48)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_ptx_of_a_warp_specialised_kernel_compiles_again() -> None:
    """Its PTX, compiled from start="ptx" (the signature, tensor maps and dynamic shared
    memory given, the warps read from the PTX's block), makes the same launch: 8 consumer
    warps and the producer's 4."""
    kern = _matmul(128, 128, 64, 8, 3, warp_specialize=True)
    md = kern.metadata
    again = compile(str(kern.asm["ptx"]), "sm_90a", start="ptx", signature=md.abi,
                    tensor_maps=md.tensor_maps, dynamic_shared_bytes=md.dynamic_shared_bytes)
    assert again.metadata.num_warps == md.num_warps == 12
    a, b = torch.randn(130, 208).half(), torch.randn(208, 144).half()
    c = torch.full((130, 144), float("nan"))
    again.launch(kernels.matmul_grid(a.shape, b.shape, 128, 128), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(
    ("what", "error"),
    [
        # they run ahead, and invalidate the mbarriers the producer still uses
        ("the consumers' wait for a slot's copies", "the barrier is not initialised"),
        # it expects a slot's bytes again before the consumers took the last ones
        ("the producer's wait for an empty slot", "more arrivals than the phase expects"),
        ("the consumers' release of a slot", "can never succeed"),
    ],
)
def test_a_broken_handshake_is_caught(what: str, error: str) -> None:
    """The emulator catches each part of the handshake missing from the PTX (two slots, ten
    K steps), as an error that names it."""
    import tileopt.emulator as emu

    kern = _matmul(64, 64, 32, 4, 2, warp_specialize=True)
    md, ptx = kern.metadata, str(kern.asm["ptx"])
    consumer_wait, producer_wait = re.findall(r"@!p bra (waitLoop\d+);", ptx)
    mutated = {
        "the consumers' wait for a slot's copies": ptx.replace(f"@!p bra {consumer_wait};", ""),
        "the producer's wait for an empty slot": ptx.replace(f"@!p bra {producer_wait};", ""),
        "the consumers' release of a slot": re.sub(
            r"@p mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];", "", ptx),
    }[what]
    assert mutated != ptx
    broken = compile(mutated, "sm_90a", start="ptx", signature=md.abi,
                     tensor_maps=md.tensor_maps)
    a, b = torch.randn(64, 320).half(), torch.randn(320, 64).half()
    c = torch.zeros(64, 64)
    with pytest.raises(emu.EmulatorError, match=error):
        broken.launch((1, 1), a, b, c)


def test_tf32_and_f16_accumulator_dots_get_a_producer() -> None:
    """The other wgmma dots TMA feeds: tf32 with a K-major b (an f32 linear layer's weight),
    each k step waited for, and f16 accumulators, repacked between MMAs."""
    from test_mma_types import EPS16, EPS32, linear_tf32_ir, tf32_truncate
    from test_mma_types import _matmul as typed_matmul

    kern = compile(linear_tf32_ir("memref<?x?xf32, strided<[1, ?], offset: ?>>"), "sm_90a",
                   num_stages=3, warp_specialize=True)
    assert kern.metadata.num_warps == 8 and len(kern.metadata.tensor_maps) == 2
    torch.manual_seed(4)
    a, w = torch.randn(130, 208), torch.randn(80, 208)
    c = torch.full((130, 80), float("nan"))
    kern.launch(kernels.matmul_grid((130, 208), (208, 80), 64, 64), a, w.t(), c)
    bound = 209 * (EPS32 / 2) * (a.double().abs() @ w.double().abs().t()) + 1e-30
    assert_close(c, tf32_truncate(a).double() @ tf32_truncate(w).double().t(), atol=bound)

    kern = compile(typed_matmul("f16", "f16", False, 64, 64, 32), "sm_90a",
                   warp_specialize=True, **PROMISES)
    assert kern.metadata.num_warps == 8
    a, b = torch.randn(130, 208).half(), torch.randn(208, 144).half()
    c = torch.full((130, 144), float("nan")).half()
    kern.launch(kernels.matmul_grid(a.shape, b.shape, 64, 64), a, b, c)
    bound = 209 * (EPS16 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
    assert_close(c, a.double() @ b.double(), atol=bound)


def test_batched_matmul_gets_a_producer() -> None:
    """3-D boxes (one matrix of the batch) come from the producer too."""
    kb = kernels.batched_matmul("f16", block_m=64, block_n=64, block_k=32)
    kern = compile(kb, "sm_90a", num_warps=4, num_stages=3, warp_specialize=True, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert kern.metadata.num_warps == 8 and "cp.async.bulk.tensor.3d" in ptx
    assert "bar.sync" not in _consumer_loop(ptx)
    torch.manual_seed(1)
    for batch, m, k, n in [(3, 70, 48, 80), (2, 67, 80, 80)]:
        a = torch.randn(2 * batch, m, k).half()[::2]
        b = torch.randn(batch, k, n).half()
        c = torch.full((batch, m, n), float("nan"))
        kern.launch(kernels.batched_matmul_grid(a.shape, b.shape, 64, 64), a, b, c)
        for i in range(batch):
            assert_close(c[i], a[i].double() @ b[i].double(), atol=matmul_bound(a[i], b[i]))


def test_linear_layer_gets_a_producer() -> None:
    """A model's linear layer (the weight K-major, a bias epilogue) compiled with
    ``warp_specialize=True``: its matmul kernel has a producer warpgroup, and the layer
    computes what torch does."""
    import tileopt

    layer = torch.nn.Linear(144, 200).to(torch.float16)
    x = torch.randn(130, 144).half()
    graph = tileopt.compile(layer, (x,), target="sm_90a", warp_specialize=True)
    (kernel,) = graph.program.host.kernel_names
    ptx = graph.stages[f"ptx:{kernel}"]
    assert "cp.async.bulk.tensor" in ptx and "bar.sync" not in _consumer_loop(ptx)
    with torch.no_grad():
        want = torch.nn.functional.linear(x.float(), layer.weight.float(), layer.bias.float())
        assert_close(graph(x).float(), want, atol=2e-2, rtol=1e-2)


def test_kernels_it_does_not_apply_to_are_unchanged() -> None:
    """Only a kernel's one TMA pipeline gets a producer: attention's two loops, cp.async
    pipelines (tma=False, sm_80) and kernels without a dot compile as without the option."""
    cases = [
        (kernels.attention("f16", block_m=64, block_n=64, head_dim=64), "sm_90a", {}),
        (kernels.matmul("f16", block_m=64, block_n=64, block_k=32), "sm_90a", {"tma": False}),
        (kernels.matmul("f16", block_m=64, block_n=64, block_k=32), "sm_80", {}),
        (kernels.softmax(1024), "sm_90a", {}),
    ]
    for kb, target, options in cases:
        ws = compile(kb, target, warp_specialize=True, **PROMISES, **options)
        plain = compile(kb, target, **PROMISES, **options)
        assert str(ws.asm["ptx"]) == str(plain.asm["ptx"])
        assert ws.metadata.num_warps == plain.metadata.num_warps == 4


def test_warp_specialize_must_be_a_bool() -> None:
    kb = kernels.matmul("f16", block_m=64, block_n=64, block_k=32)
    with pytest.raises(OptionError, match="warp_specialize must be True or False"):
        compile(kb, "sm_90a", warp_specialize=1)


def random_cases(seed: int, count: int) -> list[Any]:
    """Random warp-specialised matmuls: blocks, warps (one or two consumer warpgroups),
    stages, f16/bf16, a K-major (transposed) b, a batch of 3-D boxes, odd shapes."""
    from test_random_kernels import PipelinedCase

    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        warps = rng.choice([4, 8])
        bm = 128 if warps == 8 else rng.choice([64, 128])  # B unsplit between warpgroups
        bn, bk = rng.choice([16, 32, 64, 128]), rng.choice([16, 32, 64])
        cases.append(PipelinedCase(
            rng.choice(["f16", "bf16"]), (bm, bn, bk), warps, rng.choice([False, True]),
            rng.choice([False, True]), rng.randint(2, 4),
            (rng.randint(1, 2 * bm + 3), 16 * rng.randint(1, 12), 16 * rng.randint(1, 16)),
            "sm_90a",
        ))
    return cases


@pytest.mark.parametrize("case", random_cases(seed=11, count=10), ids=str)
def test_random_warp_specialized_matmul(case: Any) -> None:
    from test_random_kernels import build_pipelined_dot

    torch.manual_seed(0)
    (bm, bn, _), (m, n, k_size) = case.block, case.shape
    kernel = compile(build_pipelined_dot(case), target=case.target, num_warps=case.warps,
                     num_stages=case.stages, warp_specialize=True, **PROMISES)
    # The producer's warpgroup, where TMA copies both operands (a b left for registers or
    # cp.async keeps the kernel as it is).
    md = kernel.metadata
    assert (md.num_warps == case.warps + 4) == (len(md.tensor_maps) == 2)
    batch = (2,) if case.batched else ()
    td = DTYPES[case.dtype]
    a = torch.randn(*batch, m, k_size).to(td)
    b = torch.randn(*batch, *((n, k_size) if case.trans_b else (k_size, n))).to(td)
    c = torch.full((*batch, m, n), float("nan"))
    kernel.launch((-(-m // bm), -(-n // bn), *batch), a, b, c, device="emulator")
    want = a.double() @ (b.double().transpose(-1, -2) if case.trans_b else b.double())
    assert_close(c, want, atol=matmul_bound(a, b.transpose(-1, -2) if case.trans_b else b))
