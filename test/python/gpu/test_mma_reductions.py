"""Differential tests: `tile.reduce` of tiles in the mma accumulator layout, in the emulator.

A dot's result is reduced where it is (attention's row maximum and row sum): in registers,
then a butterfly over the lanes along the axis, then across the warps along it through shared
memory. Each case loads a tile in an mma layout of a random warp split, reduces it along one
axis and stores the result from the slice layout; it must equal torch's reduction. Values are
small integers, so f32 sums are exact whatever the order. Tiles smaller than the layout (which
then replicates them over lanes and warps) are included.
"""

from __future__ import annotations

import itertools

import pytest
import tileopt
import torch

COMBINE = {"sum": ("arith.addf", torch.sum), "max": ("arith.maximumf", torch.amax)}


def _kernel(shape: tuple[int, int], warps: tuple[int, int], block_n: int, axis: int,
            op: str) -> str:
    view = "memref<?x?xf32, strided<[?, 1]>>"
    tile = f"tensor<{shape[0]}x{shape[1]}xf32, #M>"
    out = f"tensor<{shape[1 - axis]}xf32, #tile.slice<dim = {axis}, parent = #M>>"
    return f"""
#M = #tile.mma<warpsPerCTA = [{warps[0]}, {warps[1]}], blockN = {block_n}>
tile.kernel @reduce(%x: {view} {{tile.divisibility = 16}}, %y: memref<?xf32, strided<[1]>>) {{
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : {view} -> {tile}
  %r = tile.reduce %t {{axis = {axis} : i64}} : {tile} -> {out} {{
  ^bb0(%a: f32, %b: f32):
    %s = {COMBINE[op][0]} %a, %b : f32
    tile.yield %s : f32
  }}
  tile.store %r, %y[%c0] : {out}, memref<?xf32, strided<[1]>>
  tile.return
}}
"""


CASES = [
    (shape, warps, block_n, axis, op)
    for shape, warps, block_n in [
        ((64, 64), (4, 1), 8), ((64, 64), (2, 2), 8), ((64, 64), (1, 4), 8),
        ((128, 32), (8, 1), 8), ((32, 64), (2, 4), 8), ((16, 8), (2, 2), 8),
        ((16, 16), (1, 1), 8), ((64, 1), (4, 1), 8), ((8, 32), (1, 2), 8),
        # Warp columns blockN apart (wgmma's split warpgroups), also over narrower tiles.
        ((64, 128), (4, 2), 64), ((32, 64), (2, 2), 16), ((64, 1), (4, 2), 64),
        ((16, 32), (1, 2), 32),
    ]
    for axis, op in itertools.product([0, 1], ["sum", "max"])
]


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"{c[0]}-w{c[1]}-n{c[2]}-axis{c[3]}-{c[4]}")
def test_mma_reduction(case: tuple[tuple[int, int], tuple[int, int], int, int, str]) -> None:
    shape, warps, block_n, axis, op = case
    kernel = tileopt.compile(_kernel(shape, warps, block_n, axis, op), target="sm_80",
                             num_warps=warps[0] * warps[1], start="tilegpu")
    gen = torch.Generator().manual_seed(sum(shape) + axis)
    # Rows of 16-byte multiples (the view's divisibility).
    x = torch.randint(-50, 50, (shape[0], max(shape[1], 4)), generator=gen).float()
    x = x[:, :shape[1]]
    y = torch.full((shape[1 - axis],), float("nan"))
    kernel.launch((1, 1, 1), x, y, device="emulator")
    assert torch.equal(y, COMBINE[op][1](x, dim=axis)), f"{shape} {warps} axis {axis} {op}"


def test_mma_layout_of_one_matrix_of_a_batch() -> None:
    """A rank-3 mma layout (a dot's result reshaped to 1 x M x N) loads, reduces along its
    rows, expands, broadcasts and stores like the 2-D one, and a reduction along its unit
    dimension returns the tile."""
    m3 = "#tile.mma<warpsPerCTA = [1, 2, 2]>"
    view3 = "memref<?x?x?xf32>"
    rows = f"tensor<1x64xf32, #tile.slice<dim = 2, parent = {m3}>>"
    text = f"""
tile.kernel @batch_matrix(%x: {view3}, %y: memref<?x?xf32>, %z: {view3}) {{
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0, %c0] : {view3} -> tensor<1x64x64xf32, {m3}>
  %r = tile.reduce %t {{axis = 2}} : tensor<1x64x64xf32, {m3}> -> {rows} {{
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    tile.yield %s : f32
  }}
  %u = tile.reduce %t {{axis = 0}} : tensor<1x64x64xf32, {m3}>
      -> tensor<64x64xf32, #tile.slice<dim = 0, parent = {m3}>> {{
  ^bb0(%a: f32, %b: f32):
    %s = arith.maximumf %a, %b : f32
    tile.yield %s : f32
  }}
  %e = tile.expand_dims %r {{axis = 2}} : {rows} -> tensor<1x64x1xf32, {m3}>
  %b = tile.broadcast %e : tensor<1x64x1xf32, {m3}> -> tensor<1x64x64xf32, {m3}>
  %d = arith.subf %t, %b : tensor<1x64x64xf32, {m3}>
  tile.store %d, %z[%c0, %c0, %c0] : tensor<1x64x64xf32, {m3}>, {view3}
  tile.store %u, %y[%c0, %c0] : tensor<64x64xf32, #tile.slice<dim = 0, parent = {m3}>>,
      memref<?x?xf32>
  tile.return
}}
"""
    kern = tileopt.compile(text, target="sm_90a")
    torch.manual_seed(0)
    x = torch.randint(-8, 8, (1, 64, 64)).float()
    y, z = torch.zeros(64, 64), torch.zeros(1, 64, 64)
    kern.launch((1,), x, y, z)
    assert torch.equal(z, x - x.sum(2, keepdim=True))
    assert torch.equal(y, x[0])
