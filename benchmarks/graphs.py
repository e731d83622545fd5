"""PyTorch graphs through ``tileopt.compile(model, inputs)``: kernels, bytes moved, compile time.

Each model below is compiled for sm_90 and run once in tileopt's PTX emulator on CPU tensors;
its output is compared with eager PyTorch on the same inputs before any number is printed. One
row per model:

- ``aten``: aten operators in the exported graph: the ``call_function`` nodes that call a
  ``torch.ops.*`` operator in ``graph.graph.fx_graph`` (torch.export's graph after tileopt's
  decomposition table, the graph torch-mlir imports; ``getitem`` nodes are not counted).
- ``kernels``: kernel launches per call (launches the emulator ran; distinct kernels in
  parentheses where a kernel is launched more than once).
- ``bytes/min``: global bytes the launches requested (``LaunchStats.global_load_bytes`` +
  ``global_store_bytes``, summed over the call: ``graph.last_global_bytes``) over the minimum
  (``graph.last_min_bytes``: every input, parameter and buffer read once, every new output
  written once). ``sect/min``: the same for 32-byte sectors (``graph.last_sector_bytes``:
  what the memory system moves when every request's sectors are fetched, with no cache
  between requests). ``dram/min``: the distinct 32-byte sectors each launch read and wrote,
  summed over the launches (``graph.last_unique_bytes``): the DRAM traffic of a GPU whose
  L2 cache holds one launch's working set (every shape here does: under 1 MiB against
  H100's 50 MB), with nothing kept between launches. The minimum is a DRAM quantity, so the
  bytes goal is judged on ``dram/min``: it counts every intermediate that goes through memory
  between kernels, and not the requests that L1/L2 serve within a launch (a norm's weight
  that every warp loads, ``sect/min``'s excess on layernorm).
- ``export``, ``mlir``, ``form``, ``codegen``: compile seconds by stage (``graph.times``):
  torch.export with the decompositions, torch-mlir's import and lowering to linalg, kernel
  formation (``tileopt-linalg-to-tile``), PTX for all kernels; ``slowest`` names the kernel
  whose code generation took longest.
- ``max err``: max |tileopt - eager| over the outputs, relative to max(1, max |eager|).

Goals (printed beside the table; a row that misses one is marked with the goal's letter):

- (a) every normalization, softmax and elementwise graph is one kernel;
- (b) memory-bound graphs move at most 1.1x the minimum bytes;
- (c) a GPT-style block takes at most 7 kernels (issue 11; attention is one of them).

A model that tileopt refuses at compile time with one of its errors (``UnsupportedOperatorError``,
``ExportError``, ...) is skipped with the reason printed. A wrong answer, an error while running
a compiled graph, any other exception, or a crash makes the script exit 1 after the table: the
models run in a worker process, and a model that kills it (an MLIR assertion aborts the
process) is reported as failed while a new worker goes on with the rest. Shapes are small (the
emulator runs PTX on numpy): the whole table takes about 40 seconds on 2 cores.

    .venv/bin/python benchmarks/graphs.py [--models softmax,gpt_block] [--markdown] [--summaries]

``--summaries`` prints every graph's kernels (``CompiledGraph.summary()``) below the table.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import tileopt
import torch
import torch.nn.functional as F
from tileopt.testing.models import (
    ConvNeXtBlock,
    GPTBlock,
    InvertedResidual,
    LlamaBlock,
    ResNetBlock,
    RMSNorm,
    TopTwoMoE,
    causal_attention,
    random_layer_norm,
)
from torch import nn

# ---------------------------------------------------------------------------------------------
# the models, in plain PyTorch (the blocks and their parts: tileopt.testing.models)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def elementwise_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.gelu(x * y + 1.0) * torch.sigmoid(x) - torch.tanh(y)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


@dataclass
class Model:
    name: str
    make: Callable[[], tuple[Callable[..., Any], tuple[torch.Tensor, ...]]]
    kind: str  # "fused" (goals a, b), "memory" (goal b), "compute", "block"
    max_kernels: int | None = None


MODELS: list[Model] = [
    Model("elementwise", lambda: (elementwise_chain, (randn(64, 512), randn(512))), "fused"),
    Model("softmax", lambda: (lambda x: torch.softmax(x, -1), (randn(64, 512),)), "fused"),
    Model("log_softmax", lambda: (lambda x: F.log_softmax(x, -1), (randn(64, 512),)), "fused"),
    Model("layernorm", lambda: (random_layer_norm(512), (randn(2, 32, 512),)), "fused"),
    Model("rmsnorm", lambda: (RMSNorm(512), (randn(2, 32, 512),)), "fused"),
    Model("mlp", lambda: (nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)),
                          (randn(2, 32, 64),)), "compute"),
    Model("matmul_f32", lambda: (torch.matmul, (randn(64, 128), randn(128, 96))), "compute"),
    Model("matmul_f16", lambda: (torch.matmul, (randn(64, 128, dtype=torch.float16),
                                                randn(128, 96, dtype=torch.float16))),
          "compute"),
    Model("bmm", lambda: (torch.bmm, (randn(4, 48, 64), randn(4, 64, 32))), "compute"),
    Model("attention", lambda: (causal_attention, tuple(randn(2, 4, 32, 16) for _ in range(3))),
          "compute"),
    Model("sdpa", lambda: (sdpa, tuple(randn(2, 4, 32, 16) for _ in range(3))), "compute"),
    Model("gpt_block", lambda: (GPTBlock(), (randn(2, 16, 64),)), "block", max_kernels=7),
    Model("llama_block", lambda: (LlamaBlock(), (randn(2, 16, 64),)), "block"),
    Model("resnet_block", lambda: (ResNetBlock(16).eval(), (randn(2, 16, 14, 14),)), "block"),
    Model("mobilenet_block",
          lambda: (InvertedResidual(16).eval(), (randn(2, 16, 14, 14),)), "block"),
    Model("convnext_block", lambda: (ConvNeXtBlock(16), (randn(2, 16, 14, 14),)), "block"),
    Model("moe_top2", lambda: (TopTwoMoE(32, experts=4, hidden=64), (randn(32, 32),)),
          "block"),
    Model("embedding", lambda: (nn.Embedding(1000, 64), (torch.randint(0, 1000, (2, 64)),)),
          "memory"),
    Model("cross_entropy",
          lambda: (F.cross_entropy, (randn(64, 500), torch.randint(0, 500, (64,)))), "memory"),
]

GOALS = {
    "a": "every normalization, softmax and elementwise graph is one kernel",
    "b": "memory-bound graphs move at most 1.1x the minimum bytes (DRAM sectors)",
    "c": "a GPT-style block takes at most 7 kernels",
}
BYTES_GOAL = 1.1
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}

# ---------------------------------------------------------------------------------------------
# measuring


@dataclass
class Row:
    name: str
    kind: str
    aten: int = 0
    launches: int = 0
    distinct: int = 0
    bytes_ratio: float = 0.0
    sector_ratio: float = 0.0
    dram_ratio: float = 0.0
    min_bytes: int = 0
    times: dict[str, float] = field(default_factory=dict)
    slowest: str = ""
    error: float = 0.0
    wall: float = 0.0
    misses: list[str] = field(default_factory=list)
    skipped: str = ""
    failed: str = ""
    summary: str = ""


_ATEN_CALL = re.compile(r"^\s*\w+(?::\s*\"[^\"]*\")?\s*=\s*torch\.ops\.", re.MULTILINE)


def count_aten_ops(fx_graph: str) -> int:
    """call_function nodes of ``graph.graph.fx_graph`` (``print_readable`` text) that call a
    ``torch.ops`` operator: ``name: "f32[4, 8]" = torch.ops.aten.add.Tensor(...)``."""
    return len(_ATEN_CALL.findall(fx_graph))


def _flat(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in _flat(o)]


def max_error(got: Any, want: Any) -> tuple[float, float]:
    """max |got - want| over the outputs relative to max(1, max |want|), and the tolerance."""
    error, tol = 0.0, 0.0
    for g, w in zip(_flat(got), _flat(want), strict=True):
        if g.shape != w.shape:
            return math.inf, 0.0
        if not w.is_floating_point():
            error = max(error, 0.0 if torch.equal(g, w) else math.inf)
            continue
        scale = max(1.0, float(w.abs().max()))
        error = max(error, float((g.float() - w.float()).abs().max()) / scale)
        tol = max(tol, TOLERANCE.get(w.dtype, 1e-4))
    return error, tol


def measure(model: Model) -> Row:
    row = Row(model.name, model.kind)
    start = time.perf_counter()
    torch.manual_seed(0)
    fn, inputs = model.make()
    stage = "compile"
    try:
        graph = tileopt.compile(fn, inputs, target="sm_90", device="emulator")
        stage = "run"
        with torch.no_grad():
            got = graph(*inputs)
            want = fn(*inputs)
    except tileopt.TileoptError as e:
        # The first line, without the location and the advice that follow it.
        reason = f"{type(e).__name__}: {str(e).splitlines()[0].split(' (location ')[0]}"
        if stage == "compile":  # tileopt refuses the model, as it should
            row.skipped = reason
        else:  # it compiled the model but cannot run it: a bug
            row.failed = f"at run: {reason}"
        row.wall = time.perf_counter() - start
        return row
    except Exception as e:  # a bug: report it, go on, fail at the end
        message = str(e).splitlines()[0] if str(e) else ""
        row.failed = f"at {stage}: {type(e).__name__}: {message}"
        traceback.print_exc(file=sys.stderr)
        row.wall = time.perf_counter() - start
        return row
    row.wall = time.perf_counter() - start
    row.aten = count_aten_ops(graph.graph.fx_graph)
    row.launches = len(graph.last_stats)
    row.distinct = len(graph.kernels)
    row.min_bytes = graph.last_min_bytes
    row.bytes_ratio = graph.last_global_bytes / max(1, graph.last_min_bytes)
    row.sector_ratio = graph.last_sector_bytes / max(1, graph.last_min_bytes)
    row.dram_ratio = graph.last_unique_bytes / max(1, graph.last_min_bytes)
    row.times = dict(graph.times)
    per_kernel = {k.removeprefix("codegen:"): v for k, v in row.times.items()
                  if k.startswith("codegen:")}
    if per_kernel:
        name = max(per_kernel, key=per_kernel.__getitem__)
        row.slowest = f"{name} {per_kernel[name]:.2f}"
    row.summary = graph.summary()
    row.error, tol = max_error(got, want)
    if not row.error <= tol:
        row.failed = f"max error {row.error:.1e} above {tol:.0e}"
    if model.kind == "fused" and row.launches != 1:
        row.misses.append("a")
    if model.kind in ("fused", "memory") and row.dram_ratio > BYTES_GOAL:
        row.misses.append("b")
    if model.max_kernels is not None and row.launches > model.max_kernels:
        row.misses.append("c")
    return row


# ---------------------------------------------------------------------------------------------
# printing

HEADER = ["model", "aten", "kernels", "bytes/min", "sect/min", "dram/min", "min KiB", "export",
          "mlir",
          "form", "codegen", "slowest kernel (s)", "max err", "goals"]


def cells(row: Row) -> list[str]:
    t = row.times
    kernels = str(row.launches) + (f" ({row.distinct})" if row.distinct != row.launches else "")
    return [
        row.name, str(row.aten), kernels, f"{row.bytes_ratio:.2f}x", f"{row.sector_ratio:.2f}x",
        f"{row.dram_ratio:.2f}x",
        f"{row.min_bytes / 1024:.0f}", f"{t.get('export', 0):.2f}", f"{t.get('torch-mlir', 0):.2f}",
        f"{t.get('formation', 0):.2f}", f"{t.get('codegen', 0):.2f}", row.slowest,
        f"{row.error:.1e}",
        ("MISSES " + ",".join(row.misses)) if row.misses else "ok",
    ]


def print_table(rows: list[Row], markdown: bool) -> None:
    done = [r for r in rows if not r.skipped and not r.failed]
    table = [HEADER, *(cells(r) for r in done)]
    if markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(HEADER))) + "|")
        for line in table[1:]:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
        for line in table:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    bullet = "- " if markdown else "  "
    for r in rows:
        if r.skipped:
            print(f"{bullet}{r.name}: skipped ({r.skipped})")
        if r.failed:
            print(f"{bullet}{r.name}: FAILED ({r.failed})")
    print()
    print("Goals:" if not markdown else "**Goals**")
    for key, text in GOALS.items():
        missed = [r.name for r in done if key in r.misses]
        verdict = f"missed by {', '.join(missed)}" if missed else "met"
        print(f"{bullet}({key}) {text}: {verdict}")


def worker(names: list[str], out: str) -> None:
    """Measures ``names`` in this process, appending one JSON line per model to ``out``
    (a ``start`` line before each, so that the parent knows which model killed a worker)."""
    import json

    import tileopt.frontend

    # torch.export's first call imports and initialises much of torch: not the first row's.
    tileopt.frontend.import_graph(lambda x: x + 1, (torch.ones(2),))
    by_name = {m.name: m for m in MODELS}
    with open(out, "a") as f:
        for name in names:
            f.write(json.dumps({"start": name}) + "\n")
            f.flush()
            row = measure(by_name[name])
            f.write(json.dumps(asdict(row)) + "\n")
            f.flush()
            status = ("skipped" if row.skipped else "FAILED" if row.failed
                      else f"{row.launches} kernels")
            print(f"[{row.wall:5.1f} s] {name}: {status}", file=sys.stderr, flush=True)


def run_isolated(names: list[str]) -> list[Row]:
    """Measures ``names`` in a worker process, starting another one after a model that
    aborts the process (an assertion in MLIR kills it, no exception to catch)."""
    import json
    import subprocess
    import tempfile

    rows: dict[str, Row] = {}
    todo = list(names)
    while todo:
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", out.name, "--models", ",".join(todo)],
                stderr=subprocess.PIPE, text=True, check=False,
            )
            sys.stderr.write(proc.stderr)
            started = None
            for line in out.read().splitlines():
                record = json.loads(line)
                if "start" in record:
                    started = record["start"]
                else:
                    rows[record["name"]] = Row(**record)
                    started = None
        if started is None:  # the worker ended without finishing a model: it failed to start
            if proc.returncode != 0:
                for name in todo:
                    rows.setdefault(name, Row(name, "", failed="the worker process failed"))
            break
        why = [line for line in proc.stderr.splitlines() if "Assertion" in line or "error" in line]
        reason = why[-1].strip() if why else ""
        if "Assertion" in reason:
            reason = "assertion " + reason[reason.index("Assertion") + 10:]
        code = proc.returncode
        if code < 0:
            code = signal.Signals(-code).name
        rows[started] = Row(started, "", failed=(
            f"the process died ({code})" + (f": {reason[:160]}" if reason else "")))
        todo = todo[todo.index(started) + 1:]
    return [rows[n] for n in names if n in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="",
                        help=f"comma-separated names: {', '.join(m.name for m in MODELS)}")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--summaries", action="store_true",
                        help="print each graph's kernels (CompiledGraph.summary()) too")
    parser.add_argument("--worker", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # Compile times are cold compiles: the compile cache is neither read nor kept.
    os.environ["TILEOPT_ALWAYS_COMPILE"] = "1"
    os.environ["TILEOPT_CACHE_DIR"] = cache_dir = tempfile.mkdtemp(prefix="tileopt-bench-")
    atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
    wanted = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = sorted(set(wanted) - {m.name for m in MODELS})
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; "
                     f"choose from {', '.join(m.name for m in MODELS)}")
    names = [m.name for m in MODELS if not wanted or m.name in wanted]
    if args.worker:
        worker(names, args.worker)
        return 0

    start = time.perf_counter()
    rows = run_isolated(names)
    print(f"tileopt.compile(model, inputs), sm_90, run in the PTX emulator "
          f"(torch {torch.__version__}); seconds per compile stage\n")
    print_table(rows, args.markdown)
    if args.summaries:
        for r in rows:
            if r.summary:
                print(f"\n{r.name}: {r.summary}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 1 if any(r.failed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
