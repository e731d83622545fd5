"""`make demo`: a transformer block in plain PyTorch, compiled by tileopt and run in the emulator.

The block is :class:`tileopt.testing.models.GPTBlock`: pre-norm LayerNorm, causal
self-attention, LayerNorm, GELU MLP, residuals.

1. `tileopt.compile(block, (x,))` exports the block (torch.export), lowers it to linalg
   (torch-mlir), forms fused kernels (tileopt-linalg-to-tile) and compiles each one to PTX
   for sm_90; prints the kernels, one line each, and the generated host code;
2. runs the graph in tileopt's PTX emulator and checks it against eager PyTorch;
3. (brief) a row softmax written by hand with tileopt.builder, compiled and checked the same way.

Exits 1 if any result differs from PyTorch.
"""

from __future__ import annotations

import sys
import time

import tileopt
import torch
from tileopt.builder import KernelBuilder, View
from tileopt.testing.models import GPTBlock


def check(name: str, got: torch.Tensor, want: torch.Tensor, tol: float) -> bool:
    error = (got - want).abs().max().item()
    ok = error <= tol
    print(f"  max |tileopt - {name}| = {error:.2e}  ({'matches' if ok else 'MISMATCH, over'} "
          f"{tol:.0e})")
    return ok


def transformer_block() -> bool:
    torch.manual_seed(0)
    block = GPTBlock(dim=64, heads=4).eval()
    x = torch.randn(2, 16, 64)

    start = time.perf_counter()
    graph = tileopt.compile(block, (x,), target="sm_90")
    seconds = time.perf_counter() - start
    t = graph.times
    print(f"---- 1. tileopt.compile(GPTBlock(dim=64, heads=4), x[2, 16, 64]): {seconds:.1f} s "
          f"(export {t['export']:.1f}, torch-mlir {t['torch-mlir']:.2f}, "
          f"formation {t['formation']:.2f}, codegen {t['codegen']:.1f}) ----")
    print(graph.summary())
    print("\n---- the generated host code (graph.host_code) ----")
    print(graph.host_code)

    with torch.no_grad():
        want = block(x)
        start = time.perf_counter()
        got = graph(x)
        seconds = time.perf_counter() - start
    launches = len(graph.last_stats)
    print(f"---- 2. run in the PTX emulator: {launches} launches, {seconds:.1f} s ----")
    print(f"  global memory: {graph.last_global_bytes / 1024:.0f} KiB requested, "
          f"{graph.last_sector_bytes / 1024:.0f} KiB in 32-byte sectors; every input, weight "
          f"and output once would be {graph.last_min_bytes / 1024:.0f} KiB")
    return check("eager PyTorch", got, want, 1e-4)


def row_softmax() -> bool:
    kb = KernelBuilder("softmax", x=View("f32", 2, contiguous=True),
                       y=View("f32", 2, contiguous=True))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, 1024], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        k.store(e / k.sum(e, axis=1, keepdims=True), k.args.y, [row, 0])
    kernel = tileopt.compile(kb, target="sm_90", num_warps=4)
    print("\n---- 3. a row softmax written with tileopt.builder ----")
    print(kernel.summary())
    x = torch.randn(64, 1000)
    y = torch.empty_like(x)
    kernel.launch((64,), x, y, device="emulator")
    return check("torch.softmax", y, torch.softmax(x, dim=1), 1e-6)


def main() -> int:
    ok = transformer_block()
    ok = row_softmax() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
