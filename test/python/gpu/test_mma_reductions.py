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


def _kernel(shape: tuple[int, int], warps: tuple[int, int], axis: int, op: str) -> str:
    view = "memref<?x?xf32, strided<[?, 1]>>"
    tile = f"tensor<{shape[0]}x{shape[1]}xf32, #M>"
    out = f"tensor<{shape[1 - axis]}xf32, #tile.slice<dim = {axis}, parent = #M>>"
    return f"""
#M = #tile.mma<warpsPerCTA = [{warps[0]}, {warps[1]}]>
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
    (shape, warps, axis, op)
    for shape, warps in [
        ((64, 64), (4, 1)), ((64, 64), (2, 2)), ((64, 64), (1, 4)), ((128, 32), (8, 1)),
        ((32, 64), (2, 4)), ((16, 8), (2, 2)), ((16, 16), (1, 1)), ((64, 1), (4, 1)),
        ((8, 32), (1, 2)),
    ]
    for axis, op in itertools.product([0, 1], ["sum", "max"])
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-w{c[1]}-axis{c[2]}-{c[3]}")
def test_mma_reduction(case: tuple[tuple[int, int], tuple[int, int], int, str]) -> None:
    shape, warps, axis, op = case
    kernel = tileopt.compile(_kernel(shape, warps, axis, op), target="sm_80",
                             num_warps=warps[0] * warps[1], start="tilegpu")
    gen = torch.Generator().manual_seed(sum(shape) + axis)
    # Rows of 16-byte multiples (the view's divisibility).
    x = torch.randint(-50, 50, (shape[0], max(shape[1], 4)), generator=gen).float()
    x = x[:, :shape[1]]
    y = torch.full((shape[1 - axis],), float("nan"))
    kernel.launch((1, 1, 1), x, y, device="emulator")
    assert torch.equal(y, COMBINE[op][1](x, dim=axis)), f"{shape} {warps} axis {axis} {op}"
