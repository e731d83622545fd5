"""Triton 3.9's ``num_ctas=2`` kernels (sm_90a) in the emulator, against torch: a program is a
cluster of two CTAs, and a reduction over its block combines the CTAs' partial sums through
distributed shared memory (``mapa.shared::cluster``, ``ld.shared::cluster``, barrier.cluster).
Triton is optional: without 3.9 these tests are skipped."""

from __future__ import annotations

import pytest
import tileopt.emulator as emu
import torch

triton = pytest.importorskip("triton", reason="Triton (optional) is not installed")
if not triton.__version__.startswith("3.9"):
    pytest.skip(f"these tests compile with Triton 3.9's API; found Triton {triton.__version__}",
                allow_module_level=True)
tl = pytest.importorskip("triton.language")
from triton.backends.compiler import GPUTarget  # noqa: E402


@triton.jit
def row_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, 0))


@pytest.mark.parametrize("n", [1000, 37])
def test_two_cta_reduction_through_distributed_shared_memory(n: int) -> None:
    src = triton.compiler.ASTSource(
        fn=row_sums, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_ctas": 2})
    ptx = compiled.asm["ptx"]
    assert "mapa.shared::cluster" in ptx and ".reqnctapercluster 2" in ptx
    rows = 3
    x = torch.randn(rows, n, generator=torch.Generator().manual_seed(n))
    out = torch.zeros(rows)
    scratch = [torch.zeros(16, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8)]
    emu.load_ptx(ptx).launch(compiled.metadata.name, grid=2 * rows,
                             block=32 * compiled.metadata.num_warps,
                             args=[x, out, n, *scratch], shared_bytes=compiled.metadata.shared)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)
