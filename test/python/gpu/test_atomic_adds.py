"""Stores that add (``k.store(..., add=True)``) of tiles whose threads hold runs of
contiguous elements, on targets where each element is its own ``red.global.add`` (sm_80, and
i32 everywhere): run in the emulator against torch on odd shapes, each element added once,
and the adds coalesced (a warp's lanes add consecutive elements: every sector they touch is
touched once), as Triton's are."""

from __future__ import annotations

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
