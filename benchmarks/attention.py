"""Attention as one flash-attention kernel against the unfused path, in tileopt's PTX emulator.

Each case is ``F.scaled_dot_product_attention`` (or a GPT block) compiled for sm_90 twice:
with kernel formation as it is (``tile-form-kernels`` joins the scores, the softmax and the
product with v into one ``*_attention`` kernel) and with ``fuse-attention=false`` (three
kernels: the scores and the probabilities go through global memory). Both run once on the
same inputs and are compared with eager PyTorch before any number is printed. Columns:

- ``kernels``: launches per call;
- ``requested``: global bytes the launches loaded and stored (``last_global_bytes``);
- ``dram``: distinct 32-byte sectors each launch touched, summed over the launches
  (``last_unique_bytes``, the DRAM traffic when L2 holds a launch's working set);
- ``min``: every input read once and the output written once (``last_min_bytes``);
- ``unfused/fused``: the unfused path's ``dram`` over the fused one's, the same run.

The S x S scores of a sequence of 512 are 1 MiB per head in f32: the unfused path writes and
reads them (and the probabilities) through memory, the fused kernel never does.

    .venv/bin/python benchmarks/attention.py [--seq 512]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TILEOPT_CACHE_DIR", tempfile.mkdtemp(prefix="tileopt-bench-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tileopt.compiler.graph import CompiledGraph, form_kernels  # noqa: E402
from tileopt.testing.models import GPTBlock  # noqa: E402

UNFUSED = ("builtin.module(canonicalize, linalg-generalize-named-ops, canonicalize, cse, "
           "tile-form-kernels{fuse-attention=false}, convert-linalg-to-tile, canonicalize, cse)")


def unfused(linalg: str) -> Any:
    """Kernel formation without attention fusion."""
    return form_kernels(linalg, pipeline=UNFUSED)


def cases(seq: int) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    torch.manual_seed(0)

    def qkv(dtype: torch.dtype, heads: int = 4, dim: int = 64) -> tuple[Any, ...]:
        return tuple(torch.randn(1, heads, seq, dim).to(dtype) for _ in range(3))

    def causal(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def grouped(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    q8 = torch.randn(1, 8, seq, 64).to(torch.float16)
    return {
        f"sdpa causal f16, seq {seq}": (causal, qkv(torch.float16)),
        f"sdpa causal f32, seq {seq}": (causal, qkv(torch.float32)),
        f"gqa 8q/2kv causal f16, {seq}": (grouped, (q8, *qkv(torch.float16, heads=2)[1:])),
        f"d 256 causal f16, {seq}": (causal, qkv(torch.float16, heads=2, dim=256)),
        "gpt block, seq 64": (GPTBlock().eval(), (torch.randn(2, 64, 64),)),
    }


def run(fn: Any, inputs: tuple[Any, ...], formation: Any) -> tuple[CompiledGraph, float]:
    t0 = time.perf_counter()
    graph = CompiledGraph(fn, inputs, target="sm_90", device="emulator", formation=formation)
    out = graph(*inputs)
    with torch.no_grad():
        want = fn(*inputs)
    err = float((out.float() - want.float()).abs().max() / max(1.0, want.abs().max()))
    tol = 2e-5 if out.dtype == torch.float32 else 4e-3
    if not err <= tol:
        sys.exit(f"wrong answer: max error {err:.3g} > {tol}")
    return graph, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=512)
    args = parser.parse_args()
    header = (f"{'case':28s} {'path':8s} {'kernels':>7s} {'requested':>11s} {'dram':>11s} "
              f"{'min':>9s} {'dram/min':>8s} {'seconds':>7s}")
    print(header)
    print("-" * len(header))
    for name, (fn, inputs) in cases(args.seq).items():
        dram = {}
        for path, formation in (("fused", None), ("unfused", unfused)):
            graph, seconds = run(fn, inputs, formation)
            dram[path] = graph.last_unique_bytes
            print(f"{name:28s} {path:8s} {len(graph.last_stats):7d} "
                  f"{graph.last_global_bytes:11,d} {graph.last_unique_bytes:11,d} "
                  f"{graph.last_min_bytes:9,d} "
                  f"{graph.last_unique_bytes / graph.last_min_bytes:7.2f}x {seconds:7.1f}")
        print(f"{'':28s} unfused/fused dram: {dram['unfused'] / dram['fused']:.2f}x")


if __name__ == "__main__":
    main()
