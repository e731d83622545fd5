"""A dot whose rhs is a transposed matrix (``x @ w.T``, a linear layer's weight): its view has
unit stride along K (``strided<[1, ?]>``), its tiles load in runs along K, and the staging
area holds them K-major (n rows of k), as they are. mma.sync reads them with ``ldmatrix``
without ``.trans``, wgmma with a K-major descriptor and no ``imm-trans-b``; with the
alignment promises the runs go global -> shared by cp.async (on sm_90a by TMA boxes of the
transposed tensor) and the loop is pipelined.

Each kernel runs in the PTX emulator against float64 PyTorch on odd shapes.
"""

from __future__ import annotations

import re

import pytest
import torch
from test_kernels import assert_close, matmul_bound
from tileopt import kernels
from tileopt.compiler import compile

A = "memref<?x?xf16, strided<[?, 1], offset: ?>>"
B = "memref<?x?xf16, strided<[1, ?], offset: ?>>"
C = "memref<?x?xf32, strided<[?, 1], offset: ?>>"
PROMISES = "{tile.divisibility = 16 : i64, tile.index_bitwidth = 32 : i64, "


def _matmul(bm: int, bn: int, bk: int, promises: bool) -> str:
    """``c = a @ b`` over a K loop, with ``b`` viewed K-contiguous."""
    a_attrs = PROMISES + "tile.size_divisibility = array<i64: 1, 16>}" if promises else ""
    b_attrs = PROMISES + "tile.size_divisibility = array<i64: 16, 1>}" if promises else ""
    return f"""
tile.kernel @matmul(%a: {A} {a_attrs}, %b: {B} {b_attrs}, %c: {C}) {{
  %z = arith.constant dense<0.0> : tensor<{bm}x{bn}xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bm = arith.constant {bm} : index
  %bn = arith.constant {bn} : index
  %bk = arith.constant {bk} : index
  %p0 = tile.program_id {{dim = 0 : i64}}
  %m = arith.muli %p0, %bm : index
  %p1 = tile.program_id {{dim = 1 : i64}}
  %n = arith.muli %p1, %bn : index
  %k = memref.dim %a, %c1 : {A}
  %r = scf.for %i = %c0 to %k step %bk iter_args(%acc = %z) -> (tensor<{bm}x{bn}xf32>) {{
    %x = tile.load %a[%m, %i] : {A} -> tensor<{bm}x{bk}xf16>
    %y = tile.load %b[%i, %n] : {B} -> tensor<{bk}x{bn}xf16>
    %d = tile.dot %x, %y, %acc
        : tensor<{bm}x{bk}xf16>, tensor<{bk}x{bn}xf16> -> tensor<{bm}x{bn}xf32>
    scf.yield %d : tensor<{bm}x{bn}xf32>
  }}
  tile.store %r, %c[%m, %n] : tensor<{bm}x{bn}xf32>, {C}
  tile.return
}}
"""


@pytest.mark.parametrize(
    ("target", "warps", "blocks", "instruction"),
    [
        ("sm_80", 4, (64, 64, 32), "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        ("sm_80", 4, (64, 32, 16), "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        ("sm_90a", 4, (64, 64, 32), "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"),
        # Two warpgroups splitting the columns: each reads its n rows of the K-major rhs.
        ("sm_90a", 8, (64, 128, 64), "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"),
    ],
    ids=["sm_80", "sm_80-narrow", "sm_90a", "sm_90a-w8-split"],
)
@pytest.mark.parametrize("promises", [False, True], ids=["plain", "promised"])
def test_transposed_rhs(target: str, warps: int, blocks: tuple[int, int, int],
                        instruction: str, promises: bool) -> None:
    bm, bn, bk = blocks
    kern = compile(_matmul(bm, bn, bk, promises), target, num_warps=warps)
    ptx = str(kern.asm["ptx"])
    assert instruction in ptx
    # K-major: no transposing loads, and wgmma's B is not transposed (imm-trans-b 0).
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in ptx
    assert "ldmatrix.sync.aligned.m8n8.x2.trans" not in ptx
    if target == "sm_90a":
        assert re.search(r"wgmma\.mma_async[^;]*, 1, 1, 1, 0, 0;", ptx)
    else:
        assert "ldmatrix.sync.aligned.m8n8" in ptx
    # The promises give a pipeline: on sm_90a TMA boxes over the transposed tensor (its K
    # innermost: tensor map dims (1, 0)), split columns too (each warpgroup's are a
    # contiguous range of B), else 16-byte cp.async runs along K.
    tma = promises and target == "sm_90a"
    assert ("cp.async.bulk.tensor" in ptx) == tma
    assert ("cp.async.cg.shared.global" in ptx) == (promises and not tma)
    if tma:
        assert kern.metadata.tensor_maps[1].dims == (1, 0)
        assert kern.metadata.tensor_maps[1].box == (bn, bk)
    torch.manual_seed(0)
    shapes = [(96, 160, 80), (64, 64, 144)] if promises else [(70, 100, 90), (33, 24, 130)]
    for m, k, n in shapes:
        a = torch.randn(m, k).half()
        b = torch.randn(n, k).half().t()  # strides (1, k)
        c = torch.full((m, n), float("nan"))
        kern.launch(kernels.matmul_grid(a.shape, b.shape, bm, bn), a, b, c)
        assert_close(c, a.double() @ b.double(), atol=matmul_bound(a, b))


def test_rhs_with_the_wrong_strides_is_rejected() -> None:
    """The view promises unit stride along K: a row-major rhs is an ArgumentError, not a
    wrong answer."""
    from tileopt.errors import ArgumentError

    kern = compile(_matmul(64, 64, 32, False), "sm_80")
    a, b = torch.randn(64, 32).half(), torch.randn(32, 64).half()
    c = torch.empty(64, 64)
    with pytest.raises(ArgumentError, match="stride"):
        kern.launch((1, 1, 1), a, b, c)
