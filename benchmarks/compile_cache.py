"""What the compile cache (tileopt.compiler.cache) saves: cold compilation against hits.

Two subjects, each measured in this one run against an empty cache directory of its own:

- a single kernel: ``tileopt.kernels.softmax()`` compiled for sm_90 (tile IR -> PTX -> cubin);
- a transformer block: ``tileopt.testing.models.GPTBlock(dim=64, heads=4)`` on
  ``randn(2, 16, 64)`` through ``tileopt.compile(model, inputs)``.

Rows:

- ``cold``: nothing cached (kernel: the median of ``--repeat`` compilations with
  ``TILEOPT_ALWAYS_COMPILE=1``, which still write their entry; graph: the first compilation);
  this process is warmed up first (imports, MLIR context, torch.export's first-call costs).
- ``warm, in-process``: compiled again in this process: a hit in memory (kernel: the median of
  ``--repeat * 100`` compilations).
- ``warm, disk, same process``: the memory cache cleared first: the entry read from disk.
- ``warm, new process``: a new Python process compiles the same thing; its imports are timed
  apart (``imports``) and are not in ``total``; the first compilation of a process also pays
  one-time costs (hashing tileopt's sources, ``ptxas --version``).

For the graph, ``total`` is split into ``export`` (torch.export and the decompositions, which
run on every compilation: the key is the linalg text they lead to), ``torch-mlir`` and
``rest`` (kernel formation and code generation when cold; the cache lookup, parsing the tile
module, translating the host code and reading the kernels when warm). No timing is asserted.

    .venv/bin/python benchmarks/compile_cache.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import Any

import tileopt
import torch
from tileopt import kernels
from tileopt.compiler import cache
from tileopt.testing.models import GPTBlock


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gpt_block() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return GPTBlock(dim=64, heads=4).eval(), torch.randn(2, 16, 64)


def graph_row(seconds: float, graph: Any) -> dict[str, float]:
    export = graph.times.get("export", 0.0)
    mlir = graph.times.get("torch-mlir", 0.0)
    return {"total": seconds, "export": export, "torch-mlir": mlir,
            "rest": seconds - export - mlir}


_NEW_PROCESS = """
    import json, time
    t0 = time.perf_counter()
    import torch, tileopt
    import tileopt.frontend, torch_mlir.fx  # what tileopt.compile(model) imports on first use
    from tileopt import kernels
    from tileopt.compiler import cache
    from tileopt.testing.models import GPTBlock
    imports = time.perf_counter() - t0
    t0 = time.perf_counter()
    tileopt.compile(kernels.softmax(), "sm_90")
    kernel = time.perf_counter() - t0
    torch.manual_seed(0)
    model, x = GPTBlock(dim=64, heads=4).eval(), torch.randn(2, 16, 64)
    t0 = time.perf_counter()
    g = tileopt.compile(model, (x,), device="emulator")
    seconds = time.perf_counter() - t0
    error = (g(x) - model(x)).abs().max().item()
    print(json.dumps({"imports": imports, "kernel": kernel, "graph": seconds,
                      "times": g.times, "error": error,
                      "kernel_stats": vars(cache.stats()),
                      "graph_stats": vars(cache.stats("graph"))}))
"""


def new_process(directory: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_NEW_PROCESS)],
        env={**os.environ, "TILEOPT_CACHE_DIR": directory}, capture_output=True, text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the new process failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:10.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per median (default 5)")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="tileopt-compile-cache-bench-")
    os.environ["TILEOPT_CACHE_DIR"] = directory
    os.environ.pop("TILEOPT_ALWAYS_COMPILE", None)
    try:
        run(directory, max(args.repeat, 1))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run(directory: str, repeat: int) -> None:
    # Warm-up: imports, the MLIR context, torch.export's and torch-mlir's first-call costs.
    tileopt.compile(kernels.vector_add(), "sm_90")
    tileopt.compile(lambda t: torch.softmax(t, -1) * 2, (torch.randn(4, 8),),
                    device="emulator")

    kb = kernels.softmax()
    os.environ["TILEOPT_ALWAYS_COMPILE"] = "1"
    kernel_cold = median_seconds(lambda: tileopt.compile(kb, "sm_90"), repeat)
    del os.environ["TILEOPT_ALWAYS_COMPILE"]
    kernel_memory = median_seconds(lambda: tileopt.compile(kb, "sm_90"), repeat * 100)

    def from_disk() -> None:
        cache.clear()
        tileopt.compile(kb, "sm_90")

    kernel_disk = median_seconds(from_disk, repeat)

    model, x = gpt_block()
    t0 = time.perf_counter()
    cold = tileopt.compile(model, (x,), device="emulator")
    graph_cold = graph_row(time.perf_counter() - t0, cold)
    t0 = time.perf_counter()
    warm = tileopt.compile(model, (x,), device="emulator")
    graph_memory = graph_row(time.perf_counter() - t0, warm)
    cache.clear()
    t0 = time.perf_counter()
    disk = tileopt.compile(model, (x,), device="emulator")
    graph_disk = graph_row(time.perf_counter() - t0, disk)
    for g in (cold, warm, disk):
        torch.testing.assert_close(g(x), model(x), rtol=1e-4, atol=1e-5)

    other = new_process(directory)
    assert other["error"] < 1e-4, other["error"]
    assert other["kernel_stats"]["misses"] == 0 and other["graph_stats"]["disk_hits"] == 1, other
    graph_new = graph_row(other["graph"], argparse.Namespace(times=other["times"]))

    ptxas = cache.toolchain().split("\nptxas ", 1)[1].split("\n", 1)[0]
    print(f"tileopt {tileopt.__version__} compile cache, {os.cpu_count()} cores; "
          f"ptxas {ptxas[:60]}...")
    print(f"cache directory {directory} (removed at exit)\n")
    print("single kernel: tileopt.kernels.softmax() for sm_90")
    print(f"  {'cold (compile + store)':34}{ms(kernel_cold)}")
    print(f"  {'warm, in-process (memory)':34}{ms(kernel_memory)}")
    print(f"  {'warm, disk, same process':34}{ms(kernel_disk)}")
    print(f"  {'warm, new process':34}{ms(other['kernel'])}   "
          f"(+ imports {other['imports']:.2f} s, not counted)")
    print()
    print("transformer block: GPTBlock(dim=64, heads=4) on randn(2, 16, 64), "
          f"{len(cold.kernels)} kernels")
    print(f"  {'':34}{'total':>13}{'export':>13}{'torch-mlir':>13}{'rest':>13}")
    rows = [("cold (export + compile + store)", graph_cold),
            ("warm, in-process (memory)", graph_memory),
            ("warm, disk, same process", graph_disk),
            ("warm, new process", graph_new)]
    for label, row in rows:
        print(f"  {label:34}" + "".join(f"{ms(row[k]):>13}" for k in
                                        ("total", "export", "torch-mlir", "rest")))
    print(f"  (new process: + imports {other['imports']:.2f} s, not counted; its compile "
          f"cache stats: kernels {other['kernel_stats']}, graph {other['graph_stats']})")
    print(f"\n  saved by a new-process hit: {graph_cold['rest'] - graph_new['rest']:.2f} s "
          f"of {graph_cold['total']:.2f} s; what remains on top of torch.export: "
          f"{graph_new['total'] - graph_new['export']:.3f} s")


if __name__ == "__main__":
    main()
