"""Stores that add (``k.store(..., add=True)``: ``red.global.add`` of every element), a
program's atomic add (``k.atomic_add``) and the stream-K matmul built on them
(``kernels.stream_k_matmul``): every program runs an equal share of all tiles' k steps, stores
the tiles it ran whole and adds its part of the others into a ``c`` of zeros, or with a
workspace leaves its parts there for the last program of each tile to sum. Run in the PTX
emulator against PyTorch, with its out-of-bounds and shared-memory race checks on.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_kernels import assert_close, matmul_bound
from tileopt import kernels
from tileopt.builder import BuilderError, KernelBuilder, View
from tileopt.compiler import compile

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}


def _column_sums(dtype: str) -> KernelBuilder:
    """out[j] += x[p, j] for the 128 columns from 0, program p adding its row: every
    program adds into the same elements, and those past the view's end are dropped."""
    kb = KernelBuilder("column_sums", x=View(dtype, 2), out=View(dtype, 1))
    with kb as k:
        row = k.load(k.args.x, [k.program_id(0), 0], [1, 128])
        k.store(k.reshape(row, [128]), k.args.out, [0], add=True)
    return kb


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize(("dtype", "torch_dtype"), [("f32", torch.float32),
                                                     ("i32", torch.int32)])
def test_programs_add_into_the_same_elements(target: str, dtype: str,
                                             torch_dtype: torch.dtype) -> None:
    kern = compile(_column_sums(dtype), target)
    assert "red.global.add." + ("f32" if dtype == "f32" else "s32") in str(kern.asm["ptx"])
    torch.manual_seed(0)
    for rows, cols in [(37, 100), (1, 128), (5, 3)]:
        x = (torch.randn(rows, cols) * 100).to(torch_dtype)
        base = (torch.randn(cols) * 100).to(torch_dtype)
        out = base.clone()
        kern.launch((rows,), x, out)
        expected = base.double() + x.double().sum(0)
        if dtype == "i32":
            assert torch.equal(out, expected.to(torch.int32))
        else:
            assert_close(out, expected, atol=1e-3 * rows)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("warps", [4, 8])
def test_a_small_dot_adds_once_from_warps_that_repeat_it(target: str, warps: int) -> None:
    """A 16 x 16 dot's mma layout covers fewer warps than the kernel has; the others hold
    the same elements, and only the first add them (found by the fuzzer: each element was
    added once a warp)."""
    kb = KernelBuilder("small_dot", a=View("f16", 2), out=View("f32", 2))
    with kb as k:
        a = k.load(k.args.a, [0, 0], [16, 16])
        k.store(k.dot(a, a, k.full([16, 16], 0.0, "f32")), k.args.out, [0, -1], add=True)
    kern = compile(kb, target, num_warps=warps)
    torch.manual_seed(0)
    a = torch.randn(16, 16).half()
    base = torch.randn(37, 5)
    out = base.clone()
    kern.launch((1,), a, out)
    expected, bound = base.double(), torch.zeros(37, 5, dtype=torch.float64)
    expected[:16] += (a.double() @ a.double())[:, 1:6]
    # the dot's rounding, then the add's
    bound[:16] = matmul_bound(a, a)[:, 1:6] + expected[:16].abs() * 2.0**-24
    assert_close(out, expected, atol=bound)


def test_only_32_bit_tiles_add() -> None:
    kb = KernelBuilder("halves", x=View("f16", 1))
    with kb as k, pytest.raises(BuilderError,
                                match="adds only f32 and i32 tiles atomically, got 'f16'"):
        k.store(k.full([64], 1.0, "f16"), k.args.x, [0], add=True)


def test_add_must_be_a_bool() -> None:
    kb = KernelBuilder("flag", x=View("f32", 1))
    with kb as k, pytest.raises(BuilderError, match="add must be True or False"):
        k.store(k.full([64], 1.0, "f32"), k.args.x, [0], add=1)  # type: ignore[arg-type]


# (target, num_warps, num_stages, tile, options)
CONFIGS = [
    ("sm_80", 4, 1, (64, 64, 32), {}),
    ("sm_80", 4, 3, (64, 64, 32), {}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": False}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": True}),
    ("sm_90a", 8, 4, (128, 128, 64), {"tma": True}),
    ("sm_90a", 4, 3, (64, 64, 32), {"tma": True, "warp_specialize": True}),
]


@pytest.mark.parametrize(("target", "warps", "stages", "tile", "options"), CONFIGS,
                         ids=lambda v: "-".join(f"{k}" for k in v) if isinstance(v, dict) else None)
def test_stream_k_matmul_matches_torch(target: str, warps: int, stages: int,
                                       tile: tuple[int, int, int],
                                       options: dict[str, Any]) -> None:
    bm, bn, bk = tile
    kern = compile(kernels.stream_k_matmul("f16", bm, bn, bk), target, num_warps=warps,
                   num_stages=stages, **PROMISES, **options)
    ptx = str(kern.asm["ptx"])
    # sm_90 adds a fragment's pair of f32 at once, which takes PTX 8.1
    vector = target != "sm_80"
    assert ("red.global.add.v2.f32" in ptx) == vector
    assert ".version 8.1" in ptx if vector else "red.global.add.f32" in ptx
    if stages > 1:  # the copies of later k steps are in flight
        assert "cp.async.bulk.tensor" in ptx if options.get("tma") else "cp.async.cg" in ptx
    if kern.metadata.registers is not None:
        assert kern.metadata.spill_bytes == 0
    torch.manual_seed(0)
    # Programs that split tiles at their k steps (a share below one tile's steps, too), that
    # run whole tiles, more programs than k steps (the grid takes their count), one program;
    # K below a step, and none (zeros, stored whole).
    for m, k, n, programs in [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4),
                              (5 * bm, 3 * bk + 16, 2 * bn - 16, 3),
                              (200, 304, 144, 3), (bm, 7 * bk, bn, 5), (70, 16, 48, 1),
                              (bm, bk, bn, 7), (2 * bm, 4 * bk, bn, 2), (70, 0, 48, 2)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        c = torch.zeros(m, n)
        grid = kernels.stream_k_matmul_grid(a.shape, b.shape, programs, bm, bn, bk)
        assert grid[0] <= programs
        kern.launch(grid, a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_f32_adds_one_element_an_instruction_on_ptx_80() -> None:
    """An explicit PTX 8.0, which has no vector red, adds the same tile element by element."""
    bm, bn, bk = 64, 64, 32
    kern = compile(kernels.stream_k_matmul("f16", bm, bn, bk), "sm_90a", num_warps=4,
                   num_stages=3, ptx_version=80, tma=False, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert ".version 8.0" in ptx and "red.global.add.f32" in ptx
    assert "red.global.add.v" not in ptx
    torch.manual_seed(0)
    a, b = torch.randn(2 * bm + 3, 5 * bk + 16).half(), torch.randn(5 * bk + 16, bn + 16).half()
    c = torch.zeros(a.shape[0], b.shape[1])
    kern.launch(kernels.stream_k_matmul_grid(a.shape, b.shape, 4, bm, bn, bk), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(("target", "warps", "stages", "tile"), [
    ("sm_80", 4, 4, (128, 128, 64)),
    ("sm_80", 8, 4, (128, 128, 64)),
    ("sm_90a", 4, 4, (128, 128, 64)),
    ("sm_90a", 8, 3, (128, 256, 64)),
])
@pytest.mark.parametrize("workspace", [False, True])
def test_large_stream_k_tiles_compile_without_spills(target: str, warps: int, stages: int,
                                                     tile: tuple[int, int, int],
                                                     workspace: bool) -> None:
    """The tile's store and its add are the two sides of one condition, so the accumulator
    is not kept live through the store for an add after it (which spilled 52 bytes at 255
    registers when the add had a condition of its own). With a workspace the split tiles
    are summed after the loop (in it, 128 x 128 x 64 on 8 warps, sm_80, spilled 32
    bytes)."""
    kern = compile(kernels.stream_k_matmul("f16", *tile, out_dtype="f16" if workspace else
                                           "f32", workspace=workspace),
                   target, num_warps=warps, num_stages=stages, **PROMISES)
    if kern.metadata.registers is None:
        pytest.skip("ptxas is not available to count registers")
    assert kern.metadata.spill_bytes == 0


def test_stream_k_grid() -> None:
    # 2 x 3 tiles of 4 k steps: 24 steps, the most programs that get one.
    assert kernels.stream_k_matmul_grid((200, 256), (256, 300), 100, 128, 128, 64) == (24,)
    assert kernels.stream_k_matmul_grid((200, 256), (256, 300), 8, 128, 128, 64) == (8,)
    assert kernels.stream_k_matmul_grid((0, 0), (0, 0), 8) == (1,)
    with pytest.raises(ValueError, match="programs must be a positive integer"):
        kernels.stream_k_matmul_grid((64, 64), (64, 64), 0)


@pytest.mark.parametrize(("target", "out_dtype", "options"), [
    ("sm_80", "f16", {}),
    ("sm_80", "f32", {}),
    ("sm_90a", "bf16", {"tma": False}),
    ("sm_90a", "f16", {"tma": True}),
])
def test_stream_k_with_workspace_matches_torch(target: str, out_dtype: str,
                                               options: dict[str, Any]) -> None:
    """With a workspace, split tiles' parts go to their programs' slots and each program
    counts its k steps of the tile (k.atomic_add); the one that completes the count sums the
    parts in program order into c, in the same launch: any c dtype, c need not hold zeros
    (NaN here), the counts are zeros again after it, and the bits are the same whichever
    program finishes last (the emulator runs the programs all at once, or one after
    another)."""
    bm, bn, bk = 64, 64, 32
    kern = compile(kernels.stream_k_matmul("f16", bm, bn, bk, out_dtype, workspace=True),
                   target, num_warps=4, num_stages=3, **PROMISES, **options)
    ptx = str(kern.asm["ptx"])
    assert "red.global.add" not in ptx and "atom.global.add.u32" in ptx
    # The k loop is still a software pipeline.
    assert "cp.async.bulk.tensor" in ptx if options.get("tma") else "cp.async.cg" in ptx
    assert kern.metadata.registers is None or kern.metadata.spill_bytes == 0
    dtype = getattr(torch, {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}[out_dtype])
    bits = torch.int16 if dtype != torch.float32 else torch.int32
    torch.manual_seed(0)
    for m, k, n, programs in [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4),
                              (5 * bm, 3 * bk + 16, 2 * bn - 16, 3), (bm, 7 * bk, bn, 5),
                              (200, 304, 144, 3), (bm, 4 * bk, bn, 7), (70, 0, 48, 2)]:
        a, b = torch.randn(m, k).half(), torch.randn(k, n).half()
        grid = kernels.stream_k_matmul_grid(a.shape, b.shape, programs, bm, bn, bk)
        if programs == 7:  # more programs than the 4 steps: some between the parts run none
            grid = (programs,)
        counts = torch.zeros(kernels.stream_k_counts_shape((m, n), bm, bn), dtype=torch.int32)
        results = []
        for order in ({}, {"max_threads_per_chunk": 128}):
            c = torch.full((m, n), float("nan"), dtype=dtype)
            w = torch.full(kernels.stream_k_workspace_shape(grid[0], bm, bn), float("nan"))
            kern.launch(grid, a, b, c, w, counts, **order)
            assert not counts.any()
            results.append(c)
        want = a.double() @ b.double()
        bound = matmul_bound(a, b) + (0 if out_dtype == "f32" else
                                      want.abs() * torch.finfo(dtype).eps)
        assert_close(results[0], want, atol=bound)
        assert torch.equal(results[0].view(bits), results[1].view(bits))


def test_atomic_add_counts_once_a_program() -> None:
    """k.atomic_add adds once for the whole program (not once a thread) and every thread
    gets the value before its add: the programs' old values are 0, 3, 6, ... in some
    order."""
    kb = KernelBuilder("tickets", counter=View("i32", 1), out=View("i32", 1))
    with kb as k:
        before = k.atomic_add(k.args.counter, [1], 3)
        k.store(k.splat(before, [128]), k.args.out, [k.program_id(0) * 128])
    kern = compile(kb, "sm_80", num_warps=4)
    counter, out = torch.tensor([5, 7, 9], dtype=torch.int32), torch.zeros(9 * 128,
                                                                           dtype=torch.int32)
    kern.launch((9,), counter, out)
    assert counter.tolist() == [5, 7 + 27, 9]
    tickets = out.view(9, 128)
    assert (tickets == tickets[:, :1]).all()  # one value a program, in all its threads
    assert sorted(tickets[:, 0].tolist()) == [7 + 3 * i for i in range(9)]


def test_atomic_add_arguments_are_checked() -> None:
    kb = KernelBuilder("bad", f=View("f32", 1), i=View("i32", 2))
    with kb as k:
        with pytest.raises(BuilderError, match="adds to i32 views only"):
            k.atomic_add(k.args.f, [0], 1)
        with pytest.raises(BuilderError, match="offsets must be 2 ints"):
            k.atomic_add(k.args.i, [0], 1)
        with pytest.raises(BuilderError, match="must be an i32 scalar"):
            k.atomic_add(k.args.i, [0, 0], k.constant(1, "i64"))
        with pytest.raises(BuilderError, match="must be an i32 scalar or an int"):
            k.atomic_add(k.args.i, [0, 0], 1.5)  # type: ignore[arg-type]


def test_stream_k_options_are_checked() -> None:
    with pytest.raises(ValueError, match="out_dtype 'f16' needs workspace=True"):
        kernels.stream_k_matmul("f16", 64, 64, 32, "f16")
    with pytest.raises(ValueError, match="workspace must be True or False"):
        kernels.stream_k_matmul("f16", 64, 64, 32, workspace=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="programs must be a positive integer"):
        kernels.stream_k_workspace_shape(0)
    assert kernels.stream_k_workspace_shape(3, 64, 32) == (384, 32)
    assert kernels.stream_k_counts_shape((200, 100), 64, 64) == (16,)  # 4 x 2 tiles
    assert kernels.stream_k_counts_shape((2000, 100), 64, 64) == (64,)  # 32 x 2
