"""Hopper's warpgroup MMA: matmuls compiled for sm_90a (wgmma.mma_async on swizzled
shared-memory operands) run in the PTX emulator against PyTorch.

The emulator's wgmma is checked on its own against nvcc-compiled kernels and Triton's sm_90
PTX (test/python/emulator); here tileopt's lowering is: its swizzled stores, its descriptors,
its cp.async and TMA copies (with the promises that allow them) and the accumulator fragment.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_kernels import EPS32, TORCH_DTYPES, assert_close, matmul_bound
from tileopt import kernels
from tileopt.compiler import compile

PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}


def _matmul(dtype: str, copies: str, **blocks: Any) -> Any:
    """With the promises the operands go global -> shared by cp.async or TMA (``copies``),
    without them through registers ("plain")."""
    options: dict[str, Any] = {} if copies == "plain" else dict(PROMISES, tma=copies == "tma")
    nw = blocks.pop("num_warps", 4)
    return compile(kernels.matmul(dtype, **blocks), "sm_90a", num_warps=nw, **options)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(
    "blocks",
    [
        {},  # 64 x 64 x 32
        {"block_m": 128, "block_n": 32, "block_k": 64},  # two 64-row blocks a warpgroup
        {"block_m": 64, "block_n": 16, "block_k": 128},  # 32-byte B rows, A over 2 atoms
        {"block_m": 128, "block_n": 64, "block_k": 16, "num_warps": 8},  # two warpgroups
        # two warpgroup columns: each computes 64 contiguous columns (the layout's blockN)
        {"block_m": 64, "block_n": 128, "block_k": 64, "num_warps": 8},
        # ... 32 or 16 columns: B staged in atoms of one warpgroup's columns (64- and
        # 32-byte swizzles), so each warpgroup's are whole atoms
        {"block_m": 64, "block_n": 64, "block_k": 64, "num_warps": 8},
        {"block_m": 64, "block_n": 32, "block_k": 32, "num_warps": 8},
        # ... 8 columns (m64n8): B in one 32-byte atom, the second warpgroup's half 16
        # bytes into it (as Triton's descriptors start)
        {"block_m": 64, "block_n": 16, "block_k": 64, "num_warps": 8},
        # 16-byte rows of B: wgmma's unswizzled layout (TMA boxes without a swizzle)
        {"block_m": 64, "block_n": 8, "block_k": 32},
    ],
    ids=["64x64x32", "128x32x64", "64x16x128", "128x64x16w8", "64x128x64w8", "64x64x64w8",
         "64x32x32w8", "64x16x64w8", "64x8x32"],
)
@pytest.mark.parametrize("copies", ["plain", "cp.async", "tma"])
def test_wgmma_matmul_matches_torch(dtype: str, blocks: dict[str, int], copies: str) -> None:
    kern = _matmul(dtype, copies, **blocks)
    ptx = str(kern.asm["ptx"])
    promises = copies != "plain"
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    tma = copies == "tma"
    assert ("cp.async.bulk.tensor" in ptx) == tma
    assert ("cp.async.cg.shared.global" in ptx) == (promises and not tma)
    td = TORCH_DTYPES[dtype]
    bm, bn = blocks.get("block_m", 64), blocks.get("block_n", 64)
    shapes = [(96, 160, 80), (64, 64, 64)] if promises else [(70, 100, 90), (33, 17, 129)]
    for m, k, n in shapes:
        a, b = torch.randn(m, k).to(td), torch.randn(k, n).to(td)
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


@pytest.mark.parametrize(
    ("bm", "bn", "bk", "warps", "layout", "instruction"),
    [
        # Four warpgroups: two along the rows and two along the columns, or one along the
        # rows and four along the columns (16 columns each: 32-byte atoms of B; 8 each:
        # two warpgroups to an atom).
        (128, 128, 64, 16, "[8, 2], blockN = 64", "m64n64k16"),
        (64, 256, 64, 16, "[4, 4], blockN = 64", "m64n64k16"),
        (64, 64, 64, 16, "[4, 4], blockN = 16", "m64n16k16"),
        (64, 32, 64, 16, "[4, 4]", "m64n8k16"),
    ],
)
@pytest.mark.parametrize("warp_specialize", [False, True], ids=["tma", "tma-ws"])
def test_warpgroups_split_rows_and_columns(bm: int, bn: int, bk: int, warps: int, layout: str,
                                           instruction: str, warp_specialize: bool) -> None:
    """Warpgroups split both ways: each computes its contiguous block of the tile, its B
    copied by TMA (a producer warp's, warp-specialised), on odd sizes."""
    kern = compile(kernels.matmul("bf16", block_m=bm, block_n=bn, block_k=bk), "sm_90a",
                   num_warps=warps, num_stages=3, warp_specialize=warp_specialize, **PROMISES)
    ptx = str(kern.asm["ptx"])
    assert f"#tile.mma<warpsPerCTA = {layout}>" in str(kern.asm["tilegpu"])
    assert f"wgmma.mma_async.sync.aligned.{instruction}.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor" in ptx and "mma.sync" not in ptx
    torch.manual_seed(0)
    a, b = torch.randn(150, 96).bfloat16(), torch.randn(96, 304).bfloat16()
    c = torch.full((150, 304), float("nan"))
    kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_wgmma_epilogue_and_batches() -> None:
    a, b = torch.randn(70, 100).half(), torch.randn(100, 90).half()
    bias = torch.randn(90)
    c = torch.full((70, 90), float("nan"))
    kern = compile(kernels.matmul("f16", epilogue="bias_relu"), "sm_90a")
    assert "wgmma.mma_async" in str(kern.asm["ptx"])
    kern.launch(kernels.matmul_grid(a.shape, b.shape), a, b, bias, c)
    assert_close(c, torch.relu(a.float() @ b.float() + bias),
                 atol=2 * matmul_bound(a, b) + EPS32 * bias.abs())

    a, b = torch.randn(3, 70, 100).to(torch.bfloat16), torch.randn(3, 100, 90).to(torch.bfloat16)
    c = torch.full((3, 70, 90), float("nan"))
    kern = compile(kernels.batched_matmul("bf16"), "sm_90a")
    assert "wgmma.mma_async" in str(kern.asm["ptx"])
    kern.launch(kernels.batched_matmul_grid(a.shape, b.shape), a, b, c)
    assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_wgmma_kernels_have_no_spills() -> None:
    for dtype in ("f16", "bf16"):
        for copies in ("plain", "cp.async", "tma"):
            md = _matmul(dtype, copies).metadata
            if md.registers is None:
                pytest.skip("neither ptxas nor nvJitLink is installed: no register report")
            assert md.spill_bytes == 0


def test_plain_sm_90_keeps_mma_sync() -> None:
    """wgmma needs the arch-specific target: plain sm_90 PTX stays portable mma.sync."""
    ptx = str(compile(kernels.matmul("f16"), "sm_90").asm["ptx"])
    assert ".target sm_90\n" in ptx or ".target sm_90 " in ptx
    assert "mma.sync.aligned.m16n8k16" in ptx and "wgmma" not in ptx


def test_opt_level_0_keeps_the_accumulators_until_the_wait() -> None:
    """At -O0 LLVM's register allocation copied wgmma's accumulators between its commit and
    its wait (reading them while the MMA wrote them: NaN in the emulator); sm_90a's back end
    runs at -O1 at least."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=gen).half()
    b = torch.randn(16, 16, generator=gen).half()
    kernel = compile(kernels.matmul("f16", 64, 16, 16), "sm_90a", opt_level=0)
    assert "wgmma.mma_async" in str(kernel.asm["ptx"])
    c = torch.zeros(16, 16)
    kernel.launch(kernels.matmul_grid(a.shape, b.shape, 64, 16), a, b, c, device="emulator")
    assert_close(c, a.float() @ b.float(), 1e-3)
