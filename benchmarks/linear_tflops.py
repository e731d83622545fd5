"""TFLOP/s of transformer linear layers compiled by ``tileopt.compile`` beside torch's.

``benchmarks/matmul_tflops.py`` times ``tileopt.kernels.matmul``; this times what a model gets:
``nn.Linear`` (f16 or bf16, with bias) compiled through the frontend, kernel formation's
tiling and its fused bias epilogue, reading the weight as torch stores it (K-major), against
``F.linear`` (cuBLAS with its bias epilogue), at the layer shapes of ``matmul_tflops.MODELS``
and ``TOKENS``. Each compiled layer's output is checked against an f32 reference; both sides
are timed as in matmul_tflops (CUDA events around a replayed CUDA graph of launches).

A GPU machine needs no native build: ``--save DIR`` compiles the layers here (for ``--target``,
default sm_90a) and writes each one's kernels (``Kernel.save``) and host function
(``index.json``); ``--load DIR`` runs them there with tileopt's pure-Python runtime
(:mod:`tileopt.runtime.host`, :mod:`tileopt.runtime.kernel`). With neither, it compiles in
process. Without a CUDA GPU it prints ``skipped: <reason>`` and exits 0. ``--static`` prints,
without a GPU, what each layer's kernels are: registers, spills, shared memory and static PTX
instructions.

    .venv/bin/python benchmarks/linear_tflops.py --save L --target sm_90a     # no GPU
    PYTHONPATH=python python3 benchmarks/linear_tflops.py --load L             # on the GPU
    .venv/bin/python benchmarks/linear_tflops.py --static --shapes gpt2       # no GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from matmul_tflops import (
    GOAL,
    MODELS,
    TOKENS,
    Shape,
    Timing,
    correct,
    gpu_unavailable,
    time_launch,
)

TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16"}


def layers(groups: Sequence[str], tokens: Sequence[int]) -> list[Shape]:
    """The linear layers of the models in ``groups`` at each token count (``k`` in, ``n``
    out features)."""
    return [Shape(f"{model} {layer} T={t}", t, n, k)
            for model in groups for t in tokens for layer, k, n in MODELS[model]]


def file_stem(dtype: str, shape: Shape) -> str:
    return f"{dtype}-{shape.name.replace(' ', '-').replace('=', '')}"


def compile_layer(dtype: str, shape: Shape, target: str, **options: Any) -> Any:
    """``tileopt.compile`` of ``nn.Linear(k, n)`` for ``m`` tokens (a CompiledGraph), with
    more compile ``options``."""
    import tileopt
    import torch
    from torch import nn

    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    layer = nn.Linear(shape.k, shape.n).to(torch_dtype)
    return tileopt.compile(layer, (torch.zeros(shape.m, shape.k, dtype=torch_dtype),),
                           target=target, **options)


def save(dtypes: Sequence[str], shapes: Sequence[Shape], target: str, out: Path,
         **options: Any) -> None:
    """Compiles every layer (with compile ``options``) into ``out``: its kernels and
    ``index.json`` (host functions)."""
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for dtype in dtypes:
        for shape in shapes:
            graph = compile_layer(dtype, shape, target, **options)
            tiles = [line.split(":")[-1].strip() for line in graph.stages["tile"].splitlines()
                     if "tile.dot" in line]
            index.append({"dtype": dtype, "name": shape.name, "m": shape.m, "n": shape.n,
                          "k": shape.k, "target": target, "tiles": tiles,
                          **save_program(graph, out, file_stem(dtype, shape))})
            print(f"  {dtype} {shape.name}: {', '.join(tiles)}", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def save_program(graph: Any, out: Path, stem: str) -> dict[str, Any]:
    """Writes a CompiledGraph's kernels to ``out`` as ``<stem>.<kernel>.json``; the index
    entry's ``kernels`` (name -> file), ``source`` and ``function`` (its host function)."""
    host = graph.program.host
    if host.constants:
        raise RuntimeError(f"{stem}: a host function with constants")
    kernels = {}
    for name in host.kernel_names:
        kernels[name] = f"{stem}.{name}.json"
        graph.program.kernels[name].save(out / kernels[name])
    return {"kernels": kernels, "source": host.source, "function": host.function}


def add_save_load_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--target``, ``--save DIR`` and ``--load DIR`` (``what``: the things compiled)."""
    parser.add_argument("--target", default=None,
                        help="tileopt's target (default: the GPU's; sm_90a with --save)")
    parser.add_argument("--save", type=Path, metavar="DIR",
                        help=f"compile the {what} into DIR and exit; needs no GPU")
    parser.add_argument("--load", type=Path, metavar="DIR",
                        help=f"run the {what} --save wrote to DIR (no native build needed)")
    parser.add_argument("--static", action="store_true",
                        help=f"compile the {what} here (for --target, default sm_90a) and "
                             "print their kernels' registers, spills, shared memory and PTX "
                             "instructions; needs no GPU")


def print_static(compiled: Iterable[tuple[str, str, Any]], target: str) -> None:
    """For each (dtype, name, CompiledGraph), compiled as it is printed, each kernel's ptxas
    registers and spilled bytes, shared memory and static PTX instructions."""
    from tileopt.emulator.parser import parse_ptx

    print(f"{'dtype':5} {'name':24} {'kernel':14} {'regs':>4} {'spills':>6} {'shared':>7} "
          f"{'PTX':>6}  target {target}")
    for dtype, name, graph in compiled:
        for kernel_name in graph.program.host.kernel_names:
            kernel = graph.program.kernels[kernel_name]
            md = kernel.metadata
            spills = md.spill_store_bytes + md.spill_load_bytes
            ptx = parse_ptx(str(kernel.asm["ptx"])).functions[kernel_name]
            print(f"{dtype:5} {name:24} {kernel_name:14} {md.registers:4} {spills:6} "
                  f"{md.shared_bytes:7} {len(ptx.body):6}", flush=True)


def on_gpu(source: str, function: str, kernels: dict[str, Any]) -> Any:
    """A layer's host function, launching its kernels on the GPU."""
    import torch
    from tileopt.runtime.host import bind_host_function

    def launch(name: str, grid: Any, *args: Any) -> None:
        kernels[name].launch(grid, *args, device="cuda")

    def empty(shape: tuple[int, ...], dtype: Any) -> Any:
        return torch.empty(shape, dtype=dtype, device="cuda")

    return bind_host_function(source, function, launch, empty, {}, "cuda")


def saved_layer(entry: dict[str, Any], directory: Path) -> Any:
    """A layer that --save wrote to ``directory``, on the GPU."""
    from tileopt.runtime.kernel import Kernel

    kernels = {name: Kernel.load(directory / f) for name, f in entry["kernels"].items()}
    return on_gpu(entry["source"], entry["function"], kernels)


def compiled_on_gpu(graph: Any) -> Any:
    """A CompiledGraph compiled here, on the GPU."""
    program = graph.program
    return on_gpu(program.host.source, program.host.function, dict(program.kernels))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="f16", help="comma-separated: f16,bf16")
    parser.add_argument("--shapes", default=",".join(MODELS),
                        help="comma-separated models: " + ", ".join(MODELS))
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)),
                        help="comma-separated token counts (the matmuls' M)")
    parser.add_argument("--warp-specialize", action="store_true",
                        help="compile with warp_specialize=True (sm_90a's TMA pipelines get "
                             "a producer warp)")
    add_save_load_arguments(parser, "layers")
    opts = parser.parse_args(argv)
    options = {"warp_specialize": True} if opts.warp_specialize else {}
    dtypes = parse_dtypes(parser, opts.dtypes)
    groups = [g for g in opts.shapes.split(",") if g]
    if bad := [g for g in groups if g not in MODELS]:
        parser.error(f"unknown models {bad}; {', '.join(MODELS)}")
    try:
        tokens = [int(t) for t in opts.tokens.split(",") if t]
    except ValueError:
        parser.error(f"--tokens takes integers, got {opts.tokens!r}")
    shapes = layers(groups, tokens)
    if opts.save is not None:
        save(dtypes, shapes, opts.target or "sm_90a", opts.save, **options)
        return 0
    if opts.static:
        target = opts.target or "sm_90a"
        print_static(((d, s.name, compile_layer(d, s, target, **options))
                      for d in dtypes for s in shapes), target)
        return 0

    why = gpu_unavailable()
    if why is not None:
        print(f"linear_tflops: skipped: {why}")
        return 0
    import torch
    import torch.nn.functional as F
    from matmul_tflops import device_target

    if opts.load is not None:
        entries = json.loads((opts.load / "index.json").read_text())
    else:
        target = opts.target or device_target()
        entries = [{"dtype": d, "name": s.name, "m": s.m, "n": s.n, "k": s.k, "target": target,
                    "forward": compiled_on_gpu(compile_layer(d, s, target, **options))}
                   for d in dtypes for s in shapes]
    print_preamble("cuBLAS", f"layers from {opts.load}" if opts.load else None,
                   f"{'dtype':<5} {'layer':<28} {'M':>6} {'N':>6} {'K':>6} {'torch':>7} "
                   f"{'tileopt':>7} {'ratio':>6}  target")
    gen = torch.Generator(device="cuda").manual_seed(0)
    ratios: list[float] = []
    failures: list[str] = []
    for entry in entries:
        m, n, k = entry["m"], entry["n"], entry["k"]
        torch_dtype = getattr(torch, TORCH_DTYPES[entry["dtype"]])
        w = (torch.randn(n, k, device="cuda", generator=gen) / k ** 0.5).to(torch_dtype)
        bias = torch.randn(n, device="cuda", generator=gen).to(torch_dtype)
        x = torch.randn(m, k, device="cuda", generator=gen).to(torch_dtype)
        forward = entry.get("forward") or saved_layer(entry, opts.load)
        want = F.linear(x.float(), w.float(), bias.float())
        wrong = correct(forward(w, bias, x)[0], want)
        label = f"{entry['dtype']} {entry['name']}"
        if wrong:
            failures.append(f"{label}: {wrong}")
            continue
        theirs = Timing(time_launch(lambda w=w, b=bias, x=x: F.linear(x, w, b), 10, 20, 10)[0])
        ours = Timing(time_launch(lambda f=forward, w=w, b=bias, x=x: f(w, b, x), 10, 20, 10)[0])
        shape = Shape(entry["name"], m, n, k)
        ratios.append(theirs.ms / ours.ms)
        print(f"{entry['dtype']:<5} {entry['name']:<28} {m:>6} {n:>6} {k:>6} "
              f"{theirs.tflops(shape):7.1f} {ours.tflops(shape):7.1f} {ratios[-1]:6.2f}  "
              f"{entry['target']}", flush=True)
        torch.cuda.empty_cache()
    return report(ratios, failures, "layers")


def parse_dtypes(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The dtypes of a comma-separated ``--dtypes``; a usage error for one not benchmarked."""
    dtypes = [d for d in text.split(",") if d]
    if bad := [d for d in dtypes if d not in TORCH_DTYPES]:
        parser.error(f"unknown dtypes {bad}; {', '.join(TORCH_DTYPES)} are benchmarked")
    return dtypes


def print_preamble(baseline: str, loaded: str | None, header: str) -> None:
    """Prints the GPU, torch and its ``baseline``, where tileopt's code was ``loaded`` from,
    how times are taken, and the table's ``header``."""
    import torch

    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__} ({baseline})"
          + (f"; tileopt's {loaded}" if loaded else ""))
    print("time: median of 10 replays of a CUDA graph of 20 launches; TFLOP/s, then tileopt's "
          "over torch's\n")
    print(header + "\n" + "-" * len(header), flush=True)


def report(ratios: Sequence[float], failures: Sequence[str], what: str) -> int:
    """Prints the ratios' summary and the failures; the exit status (1 if any failed)."""
    print()
    if ratios:
        print(f"tileopt / torch: median {statistics.median(ratios):.2f}, min {min(ratios):.2f}; "
              f"{sum(r >= GOAL for r in ratios)} of {len(ratios)} {what} at {GOAL:.2f} or more")
    for line in failures:
        print(f"  {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
