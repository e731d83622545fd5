"""Stores that add (``k.store(..., add=True)``) of tiles whose threads hold runs of
contiguous elements, on targets where each element is its own ``red.global.add`` (sm_80, and
i32 everywhere): run in the emulator against torch on odd shapes, each element added once,
and the adds coalesced (a warp's lanes add consecutive elements: every sector they touch is
touched once), as Triton's are."""

from __future__ import annotations

import random

import pytest
import tileopt
import torch
from tileopt.builder import KernelBuilder, View


def add_rows_kernel(dtype: str) -> KernelBuilder:
    """``y += x`` over 64 x 64 blocks of rows, one block a program, added atomically."""
    kb = KernelBuilder("add_rows", x=View(dtype, 2, contiguous=True),
                       y=View(dtype, 2, contiguous=True))
    with kb as k:
        row = k.program_id(0) * 64
        k.store(k.load(k.args.x, [row, 0], [64, 64]), k.args.y, [row, 0], add=True)
    return kb


@pytest.mark.parametrize(("target", "dtype"), [("sm_80", "f32"), ("sm_80", "i32"),
                                                ("sm_90", "i32")])
@pytest.mark.parametrize("cols", [64, 60, 37])
def test_adds_are_coalesced(target: str, dtype: str, cols: int) -> None:
    kernel = tileopt.compile(add_rows_kernel(dtype), target=target, aligned=True)
    ptx = str(kernel.asm["ptx"])
    assert "st.shared" in ptx and "red.global.add" in ptx
    rows = 130
    if dtype == "f32":
        x, y = torch.randn(rows, cols), torch.randn(rows, cols)
    else:
        x = torch.randint(-1000, 1000, (rows, cols), dtype=torch.int32)
        y = torch.randint(-1000, 1000, (rows, cols), dtype=torch.int32)
    pad = torch.zeros(rows, 64, dtype=y.dtype)  # rows 16-byte aligned for aligned=
    x_, y_ = pad.clone(), pad.clone()
    x_[:, :cols], y_[:, :cols] = x, y
    want = y_.clone()
    want[:, :cols] += x
    stats = kernel.launch(((rows + 63) // 64,), x_[:, :cols], y_[:, :cols], device="emulator")
    assert torch.equal(y_, want)  # each element once, nothing past the view
    assert stats.global_store_sectors == stats.global_store_unique_sectors


def _random_add_kernel(rng: random.Random) -> tuple[str, str, list[int], int, int]:
    """A 2-D add store of a random power-of-two tile in a random blocked layout (runs of 1 to
    8 along a random contiguous dimension), at tile offsets of program ids; (its text, its
    dtype, its tile shape, its warps, the views' unit-stride dimension)."""
    dtype = rng.choice(["f32", "i32"])
    warps = rng.choice([1, 2, 4])
    fast = rng.choice([0, 1])
    shape = [rng.choice([1, 2, 4, 8, 16, 32, 64]) for _ in range(2)]
    spt = [1, 1]
    spt[fast] = rng.choice([1, 2, 4, 8])
    lanes = [1, 1]
    lanes[fast] = rng.choice([1, 2, 4, 8, 16, 32])
    lanes[1 - fast] = 32 // lanes[fast]
    wpc = [1, 1]
    wpc[rng.choice([0, 1])] = warps
    order = [fast, 1 - fast]
    layout = (f"#tile.blocked<sizePerThread = {spt}, threadsPerWarp = {lanes}, "
              f"warpsPerCTA = {wpc}, order = {order}>")
    t = f"tensor<{shape[0]}x{shape[1]}x{dtype}, #l>"
    strides = "[?, 1]" if fast == 1 else "[1, ?]"
    view = f"memref<?x?x{dtype}, strided<{strides}>>"
    text = f"""#l = {layout}
tile.kernel @adds(%x: {view}, %y: {view}) attributes {{tile.num_warps = {warps} : i64}} {{
  %p0 = tile.program_id {{dim = 0}}
  %p1 = tile.program_id {{dim = 1}}
  %r = arith.constant {shape[0]} : index
  %c = arith.constant {shape[1]} : index
  %o0 = arith.muli %p0, %r : index
  %o1 = arith.muli %p1, %c : index
  %a = tile.load %x[%o0, %o1] : {view} -> {t}
  tile.store %a, %y[%o0, %o1] {{add}} : {t}, {view}
  tile.return
}}
"""
    return text, dtype, shape, warps, fast


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_random_layouts_add_each_element_once(seed: int, target: str) -> None:
    """Random layouts and shapes, column- or row-major views of odd sizes: every element of
    ``y`` gains its ``x`` once, nothing outside the view changes."""
    rng = random.Random(seed)
    text, dtype, shape, warps, fast = _random_add_kernel(rng)
    kernel = tileopt.compile(text, target=target, num_warps=warps)
    rows, cols = rng.randint(1, 3 * shape[0]), rng.randint(1, 3 * shape[1])
    torch_dtype = torch.float32 if dtype == "f32" else torch.int32
    make = (lambda *s: torch.randn(*s)) if dtype == "f32" else (
        lambda *s: torch.randint(-99, 99, s, dtype=torch.int32))
    big_x, big_y = make(rows + 2, cols + 2), make(rows + 2, cols + 2)
    if fast == 0:  # the views' unit stride is along rows
        big_x, big_y = big_x.t().contiguous().t(), big_y.t().contiguous().t()
    x, y = big_x[1:rows + 1, 1:cols + 1], big_y[1:rows + 1, 1:cols + 1]
    want = big_y.clone()
    want[1:rows + 1, 1:cols + 1] += x
    grid = (-(-rows // shape[0]), -(-cols // shape[1]))
    kernel.launch(grid, x, y, device="emulator")
    assert big_y.dtype == torch_dtype and torch.equal(big_y, want), text
