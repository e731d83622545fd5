"""Persistent matmuls (``kernels.persistent_matmul``): fewer programs than tiles, each running
its tiles' k steps back to back in one pipelined loop that stores a tile after its last step,
so the next tile's copies are in flight during the epilogue. Run in the PTX emulator against
PyTorch, with its out-of-bounds and shared-memory race checks on.

What the loop needs of the compiler: copies whose offsets come from scalars the loop carries
(the tile's position and k offset), pipelined by carrying those scalars ``num_stages - 1``
iterations ahead; a store through another view in a pipelined loop; and an accumulator that
restarts from zeros in the branch that stores it, not through a select of every register.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from test_kernels import assert_close, assert_wgmma_stays_async, matmul_bound
from tileopt import kernels
from tileopt.builder import KernelBuilder, Scalar, View
from tileopt.compiler import compile

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}

# (target, num_warps, num_stages, tile, options)
CONFIGS = [
    ("sm_80", 4, 1, (64, 64, 32), {}),
    ("sm_80", 4, 3, (64, 64, 32), {}),
    ("sm_80", 8, 3, (128, 128, 64), {}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": False}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": True}),
    ("sm_90a", 8, 4, (128, 128, 64), {"tma": True}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": True, "warp_specialize": True}),
    ("sm_90a", 8, 4, (128, 128, 64), {"tma": True, "warp_specialize": True}),
]


def _compile(target: str, warps: int, stages: int, tile: tuple[int, int, int],
             dtype: str = "f16", **options: Any) -> Any:
    kb = kernels.persistent_matmul(dtype, *tile, **options.pop("kernel", {}))
    return compile(kb, target, num_warps=warps, num_stages=stages, **PROMISES, **options)


@pytest.mark.parametrize(("target", "warps", "stages", "tile", "options"), CONFIGS,
                         ids=lambda v: "-".join(f"{k}" for k in v) if isinstance(v, dict) else None)
def test_persistent_matmul_matches_torch(target: str, warps: int, stages: int,
                                         tile: tuple[int, int, int],
                                         options: dict[str, bool]) -> None:
    kern = _compile(target, warps, stages, tile, **options)
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    bm, bn, bk = tile
    torch.manual_seed(0)
    # Programs fewer than the tiles (several tiles each, some one more than others), as many,
    # and more (the grid takes the tiles' count); K below a step, several rings' worth, none.
    for m, k, n, programs in [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4), (200, 304, 144, 3),
                              (70, 16, 48, 1), (bm, bk, bn, 7), (70, 0, 48, 2), (0, 32, 48, 2)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = torch.full((m, n), float("nan"))
        grid = kernels.persistent_matmul_grid(a.shape, b.shape, programs, bm, bn)
        assert grid == (min(programs, max(-(-m // bm), 1) * -(-n // bn)),)
        kern.launch(grid, a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(("target", "warps", "stages", "tile", "options"), [
    ("sm_90a", 8, 3, (192, 192, 64), {"tma": True}),
    ("sm_90a", 8, 3, (128, 192, 64), {"tma": False}),
    ("sm_90a", 8, 3, (192, 192, 64), {"tma": True, "warp_specialize": True}),
    ("sm_80", 4, 3, (96, 192, 32), {}),
], ids=str)
def test_persistent_split_blocks(target: str, warps: int, stages: int,
                                 tile: tuple[int, int, int], options: dict[str, bool]) -> None:
    """Blocks of three times a power of two are parts, as kernels.matmul's (192: 128 and
    64), a dot per pair of parts; on sm_90a those dots keep running into the next k step
    (each waits until as many groups as the dots are left) and the branch that stores a
    finished tile waits for all of them at once, and ptxas keeps the wgmma asynchronous."""
    kern = _compile(target, warps, stages, tile, **options)
    ptx = str(kern.asm["ptx"])
    bm, bn, bk = tile
    dots = (2 if bm % 3 == 0 else 1) * (2 if bn % 3 == 0 else 1)
    if target == "sm_90a":
        waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
        assert sorted(set(waits)) == ["0", str(dots)] and waits.count(str(dots)) == dots
        assert_wgmma_stays_async(ptx, target)
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(0)
    for m, k, n, programs in [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4), (200, 304, 144, 3),
                              (70, 0, 48, 2)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.persistent_matmul_grid(a.shape, b.shape, programs, bm, bn),
                    a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_persistent_matmul_epilogue_and_rounding(dtype: str, target: str) -> None:
    """``bias_relu`` and a 16-bit result, rounded from the f32 accumulator as torch does."""
    kern = _compile(target, 4, 3, (64, 64, 32), dtype,
                    kernel={"epilogue": "bias_relu", "out_dtype": dtype})
    td = DTYPES[dtype]
    torch.manual_seed(1)
    a, b = torch.randn(150, 96).to(td), torch.randn(96, 144).to(td)
    bias = torch.randn(144)
    c = torch.zeros(150, 144, dtype=td)
    kern.launch(kernels.persistent_matmul_grid(a.shape, b.shape, 3, 64, 64), a, b, bias, c)
    ref = torch.relu(a.double() @ b.double() + bias.double())
    # One rounding to dtype on top of the f32 accumulation.
    eps = torch.finfo(td).eps
    assert_close(c, ref, atol=matmul_bound(a, b) + eps * ref.abs())


@pytest.mark.parametrize(("target", "copy", "per_step", "ahead"),
                         [("sm_80", "cp.async.cg.shared.global", 4, 2),
                          ("sm_90a", "cp.async.bulk.tensor", 2, 1)])
def test_one_pipelined_loop_runs_every_tile(target: str, copy: str, per_step: int,
                                            ahead: int) -> None:
    """The prologue copies the first k steps and the loop refills its ring once a step,
    ``ahead`` steps ahead (the next tile's first ones during a tile's last), next to its dots
    and the branch that stores the tile. On sm_80 two ahead: the loop waits for its own
    step's copies only (wait_group 1) and drains the ring (wait_group 0) once, after it. On
    sm_90a one ahead, as the wgmma keeps running into the next step (wgmma.wait_group 1) and
    its slot with it; the branch that stores the tile waits for it first, and so does the
    code after the loop."""
    ptx = str(_compile(target, 4, 3, (64, 64, 32)).asm["ptx"])
    assert ptx.count(copy) == (ahead + 1) * per_step
    if target == "sm_80":
        assert sorted(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == ["0", "1"]
    else:
        waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+);", ptx)
        assert waits == ["1", "0", "0"]


def test_restarting_accumulator_dies_at_the_store() -> None:
    """The accumulator's restart from zeros stays in the branch that stores the tile
    (canonicalization makes it a select after the branch, which would keep every register
    of it live through the epilogue): the persistent kernel needs about the registers of
    the one-tile kernel."""
    persistent = _compile("sm_90a", 8, 4, (128, 128, 64), tma=True)
    plain = compile(kernels.matmul("f16", 128, 128, 64), "sm_90a", num_warps=8, num_stages=4,
                    tma=True, **PROMISES)
    if persistent.metadata.registers is None:
        pytest.skip("ptxas is not available to count registers")
    ptx = str(persistent.asm["ptx"])
    assert "selp.f32" not in ptx
    # 104 against 90 on ptxas 13.0 (without the restart in the branch: 122).
    assert persistent.metadata.registers <= plain.metadata.registers + 16


def test_grid_checks_its_programs() -> None:
    with pytest.raises(ValueError, match="programs must be a positive integer, got 0"):
        kernels.persistent_matmul_grid((64, 64), (64, 64), 0)
    assert kernels.persistent_matmul_grid((1000, 64), (64, 1000), 132) == (64,)
    assert kernels.persistent_matmul_grid((1000, 64), (64, 1000), 16, 64, 64) == (16,)


def test_branch_with_carried_values_runs_in_the_emulator() -> None:
    """``k.if_``: each program stores its row only where its flag is set, and doubles a
    carried tile and scalar there; elsewhere they keep their values."""
    kb = KernelBuilder("flagged", x=View("f32", 2), flags=View("i32", 1), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, 32])
        flag = k.load(k.args.flags, [row], [1])
        scale = k.constant(1.0, "f32")
        with k.if_(k.sum(flag, axis=0) != 0, carried=[x, scale]) as set_:
            set_.yield_(x + x, scale * 3.0)
        doubled, tripled = set_.results
        k.store(doubled * tripled, k.args.y, [row, 0])
    kern = compile(kb, "sm_80", num_warps=1)
    x = torch.randn(6, 32)
    flags = torch.tensor([1, 0, 0, 1, 1, 0], dtype=torch.int32)
    y = torch.zeros(6, 32)
    kern.launch((6,), x, flags, y)
    expected = torch.where(flags[:, None] != 0, x * 6.0, x)
    assert torch.equal(y, expected)


def test_branch_in_a_pipelined_loop_that_restarts_its_accumulator_by_a_scalar() -> None:
    """A dot whose accumulator restarts through a select on a scalar (``where(first, 0,
    acc)``, the other way to write a persistent loop) takes wgmma's scale-d predicate on
    sm_90a instead of selecting every register."""
    kb = KernelBuilder("restart", a=View("f16", 2), b=View("f16", 2), c=View("f32", 2),
                       steps=Scalar("i32"))
    with kb as k:
        zeros = k.full([64, 64], 0.0, "f32")
        size_k = k.size(k.args.a, 1)
        # Two products one after another: c[:, :64] = a @ b[:, :64], then c[:, 64:].
        with k.loop(0, 2 * size_k, 32, carried=[zeros]) as loop:
            (acc,) = loop.carried
            half = loop.iv / size_k
            kk = loop.iv - half * size_k
            a = k.load(k.args.a, [0, kk], [64, 32])
            b = k.load(k.args.b, [kk, half * 64], [32, 64])
            acc = k.dot(a, b, k.where(kk == 0, zeros, acc))
            with k.if_(kk + 32 == size_k):
                k.store(acc, k.args.c, [0, half * 64])
            loop.yield_(acc)
    kern = compile(kb, "sm_90a", num_warps=4, num_stages=3, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert re.search(r"setp\.eq\.b32 keepD, %r\d+, 0;\s*wgmma\.mma_async[^;]*keepD, 1, 1", ptx)
    assert "selp.f32" not in ptx
    torch.manual_seed(2)
    a, b = torch.randn(64, 96).half(), torch.randn(96, 128).half()
    c = torch.full((64, 128), float("nan"))
    kern.launch((1,), a, b, c, 0)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def _advancing_in_a_branch(own_branch: bool) -> KernelBuilder:
    """A persistent 64 x 64 matmul whose next tile comes from a branch: the one that stores
    the last tile, or, with ``own_branch``, a branch of its own that only computes it (on
    another condition, which canonicalization does not merge into the storing branch)."""
    kb = KernelBuilder("advance_in_branch", a=View("f16", 2, contiguous=True),
                       b=View("f16", 2, contiguous=True), c=View("f32", 2, contiguous=True))
    with kb as k:
        program, programs = k.cast(k.program_id(0), "i32"), k.cast(k.num_programs(0), "i32")
        grid_m = k.cast(k.maximum((k.size(k.args.a, 0) + 63) / 64, 1), "i32")
        grid_n = k.cast(k.maximum((k.size(k.args.b, 1) + 63) / 64, 1), "i32")
        k_end = k.maximum((k.size(k.args.a, 1) + 31) / 32, 1) * 32
        tiles = (grid_m * grid_n - program + (programs - 1)) / programs
        zeros = k.full([64, 64], 0.0, "f32")
        with k.loop(0, k.cast(tiles, "index") * (k_end / 32),
                    carried=[program, k.index(0), zeros]) as loop:
            tile, kk, acc = loop.carried
            m = k.cast(tile % grid_m, "index") * 64
            n = k.cast(tile / grid_m, "index") * 64
            acc = k.dot(k.load(k.args.a, [m, kk], [64, 32]),
                        k.load(k.args.b, [kk, n], [32, 64]), acc)
            kk = kk + 32
            last = kk == k_end
            with k.if_(last, carried=[acc, tile]) as done:
                k.store(acc, k.args.c, [m, n])
                done.yield_(zeros, tile if own_branch else tile + programs)
            acc, tile = done.results
            if own_branch:
                with k.if_(kk >= k_end, carried=[tile]) as advance:
                    advance.yield_(tile + programs)
                (tile,) = advance.results
            loop.yield_(tile, k.where(last, k.index(0), kk), acc)
    return kb


@pytest.mark.parametrize("own_branch", [False, True])
@pytest.mark.parametrize(("target", "options"), [("sm_80", {}), ("sm_90a", {"tma": True})])
def test_next_tile_from_a_branch_is_pipelined(own_branch: bool, target: str,
                                              options: dict[str, bool]) -> None:
    """The copies of the next iterations compute the tile position that a branch yields, as
    they do the select of ``kernels.persistent_matmul``'s: the loop is pipelined, not left to
    wait for each step's copies."""
    kern = compile(_advancing_in_a_branch(own_branch), target, num_warps=4, num_stages=3,
                   **PROMISES, **options)
    ptx = str(kern.asm["ptx"])
    if options.get("tma"):
        assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx
    else:
        assert set(re.findall(r"cp\.async\.wait_group\s+(\d+);", ptx)) == {"1", "0"}
    torch.manual_seed(3)
    for m, k, n, programs in [(200, 304, 144, 5), (70, 16, 48, 2), (64, 96, 64, 3)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = torch.full((m, n), float("nan"))
        kern.launch((programs,), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))
