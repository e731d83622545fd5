"""TFLOP/s of ``F.scaled_dot_product_attention`` compiled by ``tileopt.compile`` beside torch's.

``benchmarks/attention.py`` counts bytes in the emulator; this times what a model gets on a
GPU: torch's SDPA (f16 or bf16, causal or not) through the frontend and kernel formation
(one flash-attention kernel), against torch's own (its flash-attention kernel), at the
attention shapes of GPT-2, LLaMA-7B, LLaMA-3-8B (grouped-query), Gemma-7B (head dimension
256) and a long sequence. Each compiled call's output is
checked against an f32 reference first; both sides are timed as in matmul_tflops (CUDA
events around a replayed CUDA graph of launches). FLOPs: 4 B H S^2 D, half of it causal.

A GPU machine needs no native build: ``--save DIR`` compiles the cases here (for
``--target``, default sm_90a) and writes each one's kernels and host function
(``index.json``); ``--load DIR`` runs them there with tileopt's pure-Python runtime. With
neither, it compiles in process. Without a CUDA GPU it prints ``skipped: <reason>`` and
exits 0. ``--static`` prints, without a GPU, what each case's kernels are: registers, spills,
shared memory and static PTX instructions.

    .venv/bin/python benchmarks/attention_tflops.py --save A --target sm_90a    # no GPU
    PYTHONPATH=python python3 benchmarks/attention_tflops.py --load A            # on the GPU
    .venv/bin/python benchmarks/attention_tflops.py --static                     # no GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from linear_tflops import (
    TORCH_DTYPES,
    add_save_load_arguments,
    compiled_on_gpu,
    parse_dtypes,
    print_preamble,
    print_static,
    report,
    save_program,
    saved_layer,
)
from matmul_tflops import correct, gpu_unavailable, time_launch


@dataclass(frozen=True)
class Case:
    """Attention over (batch, heads, seq, head_dim) q and (batch, kv_heads, seq, head_dim) k
    and v; grouped-query attention (``enable_gqa``) where kv_heads divides heads."""

    name: str
    batch: int
    heads: int
    seq: int
    head_dim: int
    causal: bool
    kv_heads: int = 0  # 0: as many as heads

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq, self.head_dim)

    @property
    def kv_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.kv_heads or self.heads, self.seq, self.head_dim)

    @property
    def gqa(self) -> bool:
        return self.kv_shape != self.shape

    def flops(self) -> float:
        full = 4 * self.batch * self.heads * self.seq**2 * self.head_dim
        return full / 2 if self.causal else full


CASES = [Case(f"{model}{' causal' if causal else ''}", *shape, causal, kv_heads)
         for model, shape, kv_heads in (
             ("gpt2", (1, 12, 1024, 64), 0), ("llama7b", (1, 32, 2048, 128), 0),
             ("long", (1, 16, 4096, 64), 0), ("llama3_8b", (1, 32, 2048, 128), 8),
             ("gemma7b", (1, 16, 2048, 256), 0))
         for causal in (False, True)]


def compile_case(dtype: str, case: Case, target: str) -> Any:
    """``tileopt.compile`` of SDPA on ``case``'s shape (a CompiledGraph)."""
    import tileopt
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Attention(nn.Module):
        def forward(self, q: Any, k: Any, v: Any) -> Any:
            return F.scaled_dot_product_attention(q, k, v, is_causal=case.causal,
                                                  enable_gqa=case.gqa)

    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    # Three tensors: one passed three times would be one graph input.
    q = torch.zeros(case.shape, dtype=torch_dtype)
    k, v = (torch.zeros(case.kv_shape, dtype=torch_dtype) for _ in range(2))
    return tileopt.compile(Attention(), (q, k, v), target=target)


def save(dtypes: Sequence[str], cases: Sequence[Case], target: str, out: Path) -> None:
    """Compiles every case into ``out``: its kernels and ``index.json`` (host functions)."""
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for dtype in dtypes:
        for case in cases:
            graph = compile_case(dtype, case, target)
            saved = save_program(graph, out, f"{dtype}-{case.name.replace(' ', '-')}")
            index.append({"dtype": dtype, "case": dataclasses.asdict(case), "target": target,
                          **saved})
            print(f"  {dtype} {case.name}: {', '.join(saved['kernels'])}", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="f16", help="comma-separated: f16,bf16")
    parser.add_argument("--cases", default="",
                        help="comma-separated substrings of case names (default: all of "
                             + ", ".join(c.name for c in CASES) + ")")
    parser.add_argument("--seq", type=int, default=None,
                        help="every case at this sequence length instead of its own")
    add_save_load_arguments(parser, "cases")
    opts = parser.parse_args(argv)
    dtypes = parse_dtypes(parser, opts.dtypes)
    wanted = [w for w in opts.cases.split(",") if w]
    cases = [c for c in CASES if not wanted or any(w in c.name for w in wanted)]
    if not cases:
        parser.error(f"no case matches {opts.cases!r}")
    if opts.seq is not None:
        if opts.seq < 1:
            parser.error(f"--seq takes a positive length, got {opts.seq}")
        cases = [dataclasses.replace(c, seq=opts.seq) for c in cases]
    if opts.save is not None:
        save(dtypes, cases, opts.target or "sm_90a", opts.save)
        return 0
    if opts.static:
        target = opts.target or "sm_90a"
        print_static(((d, c.name, compile_case(d, c, target)) for d in dtypes for c in cases),
                     target)
        return 0

    why = gpu_unavailable()
    if why is not None:
        print(f"attention_tflops: skipped: {why}")
        return 0
    import torch
    import torch.nn.functional as F
    from matmul_tflops import device_target

    if opts.load is not None:
        names = {c.name for c in cases}
        entries = [{**e, "case": Case(**e["case"])}
                   for e in json.loads((opts.load / "index.json").read_text())
                   if e["dtype"] in dtypes and e["case"]["name"] in names]
    else:
        target = opts.target or device_target()
        entries = [{"dtype": d, "case": c, "target": target,
                    "forward": compiled_on_gpu(compile_case(d, c, target))}
                   for d in dtypes for c in cases]
    print_preamble("its SDPA", f"kernels from {opts.load}" if opts.load else None,
                   f"{'dtype':<5} {'case':<16} {'B':>3} {'H':>3} {'S':>6} {'D':>4} "
                   f"{'torch':>7} {'tileopt':>7} {'ratio':>6}  target")
    gen = torch.Generator(device="cuda").manual_seed(0)
    ratios: list[float] = []
    failures: list[str] = []
    for entry in entries:
        case = entry["case"]
        torch_dtype = getattr(torch, TORCH_DTYPES[entry["dtype"]])
        q, k, v = (torch.randn(shape, device="cuda", generator=gen).to(torch_dtype)
                   for shape in (case.shape, case.kv_shape, case.kv_shape))
        forward = entry.get("forward") or saved_layer(entry, opts.load)
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                              is_causal=case.causal, enable_gqa=case.gqa)
        label = f"{entry['dtype']} {case.name}"
        if wrong := correct(forward(q, k, v)[0], want):
            failures.append(f"{label}: {wrong}")
            continue
        theirs = time_launch(lambda q=q, k=k, v=v, c=case:
                             F.scaled_dot_product_attention(q, k, v, is_causal=c.causal,
                                                            enable_gqa=c.gqa), 10, 20, 10)[0]
        ours = time_launch(lambda f=forward, q=q, k=k, v=v: f(q, k, v), 10, 20, 10)[0]
        ratios.append(theirs / ours)
        tflops = case.flops() / 1e9  # per ms
        print(f"{entry['dtype']:<5} {case.name:<16} {case.batch:>3} {case.heads:>3} "
              f"{case.seq:>6} {case.head_dim:>4} {tflops / theirs:7.1f} {tflops / ours:7.1f} "
              f"{ratios[-1]:6.2f}  {entry['target']}", flush=True)
        torch.cuda.empty_cache()
    return report(ratios, failures, "cases")


if __name__ == "__main__":
    sys.exit(main())
