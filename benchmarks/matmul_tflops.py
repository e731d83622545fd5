"""TFLOP/s of tileopt's matmul beside Triton's and cuBLAS's (torch.matmul) on a CUDA GPU.

For f16 and bf16 inputs, at 4096 x 4096 x 4096 and at the shapes of a transformer's linear
layers (GPT-2 small and LLaMA-7B: the fused QKV projection, the attention output, the MLP's up
and down projections) at a few token counts, it times:

- ``tileopt``: :func:`tileopt.kernels.matmul` compiled by ``tileopt.compile`` for the GPU's
  own target (``sm_90a`` on H100: wgmma; ``sm_80`` on A100: mma.sync) with the promises that
  Triton's JIT gives itself for these tensors (``aligned``, ``divisible_sizes`` where a size is
  a multiple of 16, ``int32_indexing``), launched with ``Kernel.launch(..., device="cuda")``
  (tileopt's CUDA runtime, on torch's current stream);
- ``Triton``: the same algorithm as an ``@triton.jit`` kernel (the tiling of
  ``tileopt.kernels.matmul``: one ``BLOCK_M x BLOCK_N`` tile of ``c`` a program, program 0
  along M, no grouped ordering), if Triton is importable;
- ``cuBLAS``: ``torch.matmul(a, b)``, the goal's reference.

All three accumulate in f32 and write the same ``c``: f16/bf16 as torch.matmul returns it
(``kernels.matmul(out_dtype=...)``), or f32 with ``--out-dtype f32`` (cuBLAS:
``torch.mm(a, b, out_dtype=torch.float32)``). The goal (issue 12) is tileopt at 90% of
cuBLAS or more. ``--dtypes i8``: int8 operands summed in int32 (``torch._int_mm`` is cuBLAS's
side; the TFLOP/s columns are then int8 TOPS), in the configurations' blocks with twice their
``block_k`` (the same bytes a k step), one tile a program (no persistent or stream-K
kernels for int8); every result exact. ``--dtypes f8E4M3FN``: e4m3 operands summed in f32
into a bf16 result, as torchao's float8 layers (``torch._scaled_mm`` with unit scales and the
column-major b it requires is cuBLAS's side; tileopt and Triton read b row-major), blocks
as int8's.

Each of tileopt and Triton tries the same tile configurations (``CONFIGS``: block sizes,
warps, and ``num_stages`` where ``tileopt.compile`` takes it), a program a tile in launch
order and grouped, and tileopt also as :func:`tileopt.kernels.persistent_matmul` on the
programs the GPU runs at once (``resident_programs``) and as
:func:`tileopt.kernels.stream_k_matmul` on as many (f32 results: its launch zeroes ``c``
first, in the time, and it adds the tiles that programs split; other results: with its
workspace, where the last program of each split tile sums its parts), and keeps the fastest
per shape;
configurations that do not compile (or need more shared memory than the GPU has) are skipped
and counted. Every result is checked against ``a.float() @ b.float()`` before it is timed.

Timing: CUDA events around a CUDA graph of ``--reps`` launches, replayed ``--repeat`` times after
``--warmup`` launches; the median replay over ``--reps`` is a launch's time, so Python's launch
overhead is not in it. Where a launch cannot be captured in a graph the events go around each
eager launch instead (then host overhead counts for small shapes) and the row says "eager".
Inputs stay in L2 between launches (no flush), for all three alike.

Without a CUDA GPU (``torch.cuda.is_available()`` False, or no CUDA driver for tileopt's
runtime) the script prints ``skipped: <reason>`` and exits 0. A GPU machine without tileopt's
native build runs kernels compiled elsewhere: ``--save-kernels DIR`` here (no GPU needed),
``--kernels DIR`` there (tileopt's pure-Python runtime, cuda-core and torch).

    .venv/bin/python benchmarks/matmul_tflops.py            # f16 and bf16, every shape
    .venv/bin/python benchmarks/matmul_tflops.py --quick    # 4096^3 and one token count
    .venv/bin/python benchmarks/matmul_tflops.py --dtypes f16 --shapes square,llama7b
    .venv/bin/python benchmarks/matmul_tflops.py --save-kernels K --target sm_90a  # no GPU
    PYTHONPATH=python python3 benchmarks/matmul_tflops.py --kernels K               # on the GPU
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOAL = 0.90  # tileopt's TFLOP/s over cuBLAS's that issue 12 asks for


def _torch_dtypes() -> dict[str, Any]:
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i8": torch.int8, "i32": torch.int32, "f8E4M3FN": torch.float8_e4m3fn}


#: The 8-bit input dtypes: k steps of twice the configurations' elements, a tile a program.
EIGHT_BIT = ("i8", "f8E4M3FN")



def gpu_unavailable() -> str | None:
    """Why this machine cannot run the benchmark (None: it can)."""
    try:
        import torch
    except ImportError as e:
        return f"torch is not importable ({e})"
    if not torch.cuda.is_available():
        return (f"no CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}, "
                f"CUDA {torch.version.cuda or 'none'})")
    try:
        from tileopt.runtime.cuda import driver_available
    except ImportError as e:
        return f"tileopt's CUDA runtime is not importable ({e})"
    ok, why = driver_available()
    if not ok:
        return f"tileopt's CUDA runtime cannot use the GPU: {why}"
    return None


# ---------------------------------------------------------------------------------------------
# shapes and configurations


@dataclass(frozen=True)
class Shape:
    """One ``(m x k) @ (k x n)``: a name and its sizes."""

    name: str
    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


#: Transformer linear layers as (layer, in features, out features): the weights are ``k x n``.
MODELS: dict[str, list[tuple[str, int, int]]] = {
    # GPT-2 small: d_model 768, MLP 3072
    "gpt2": [("qkv", 768, 3 * 768), ("attn_out", 768, 768), ("mlp_up", 768, 3072),
             ("mlp_down", 3072, 768)],
    # LLaMA-7B: d_model 4096, SwiGLU MLP 11008 (gate and up fused: 2 x 11008 columns)
    "llama7b": [("qkv", 4096, 3 * 4096), ("attn_out", 4096, 4096),
                ("mlp_gate_up", 4096, 2 * 11008), ("mlp_down", 11008, 4096)],
}
TOKENS = (512, 2048, 8192)  # tokens in a batch (batch x sequence): the matmuls' M
QUICK_TOKENS = (2048,)


def shapes(groups: Sequence[str], quick: bool) -> list[Shape]:
    """The benchmark's shapes: ``square`` (4096^3) and the layers of each model in
    ``groups`` at each token count."""
    out: list[Shape] = []
    if "square" in groups:
        out.append(Shape("square 4096", 4096, 4096, 4096))
    for model, layers in MODELS.items():
        if model not in groups:
            continue
        for tokens in QUICK_TOKENS if quick else TOKENS:
            for layer, k, n in layers:
                if quick and layer not in ("qkv", "mlp_down"):
                    continue
                out.append(Shape(f"{model} {layer} T={tokens}", tokens, n, k))
    return out


@dataclass(frozen=True)
class Config:
    """A tiling of the matmul: block sizes, warps, pipeline stages (both compilers)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int | None = None  # grouped tile order (kernels.matmul's group_m)
    persistent: bool = False  # kernels.persistent_matmul, on the programs the GPU holds at once
    stream_k: bool = False  # kernels.stream_k_matmul, on as many programs

    def __str__(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} "
                f"s{self.num_stages}" + (f" g{self.group_m}" if self.group_m else "")
                + (" persistent" if self.persistent else "")
                + (" stream-K" if self.stream_k else ""))

    def powers_of_two(self) -> bool:
        """Whether every block is a power of two: blocks of three times one are
        ``kernels.matmul``'s and ``kernels.persistent_matmul``'s alone, and Triton takes
        none."""
        return all(b & (b - 1) == 0 for b in (self.block_m, self.block_n, self.block_k))

    def grouped(self, group_m: int | None) -> Config:
        return Config(self.block_m, self.block_n, self.block_k, self.num_warps,
                      self.num_stages, group_m)

    def persistent_schedule(self) -> Config:
        return Config(self.block_m, self.block_n, self.block_k, self.num_warps,
                      self.num_stages, persistent=True)

    def stream_k_schedule(self) -> Config:
        return Config(self.block_m, self.block_n, self.block_k, self.num_warps,
                      self.num_stages, stream_k=True)


#: The tilings both sides try (Triton's matmul tutorial's for A100/H100 among them).
CONFIGS = [
    Config(128, 256, 64, 8, 3),
    Config(128, 256, 64, 8, 4),
    Config(128, 128, 64, 4, 3),
    Config(128, 128, 64, 4, 4),
    Config(128, 128, 64, 8, 3),
    Config(128, 128, 64, 8, 4),
    Config(128, 128, 32, 4, 4),
    Config(64, 128, 32, 4, 4),
    Config(64, 64, 32, 4, 3),
    # Small tiles, deep pipelines: launches too small to fill the GPU with large tiles (as
    # cuBLAS's 64x64 tiles with 13 stages for GPT-2's 512 x 768 x 3072 on an H100).
    Config(64, 64, 64, 4, 6),
    Config(64, 64, 64, 4, 8),
    Config(64, 128, 64, 4, 5),
    Config(64, 128, 64, 4, 3),
    Config(64, 64, 64, 4, 3),
    # Kernel formation's picks for launches of less than half a wave: deep k steps (its
    # others, 128x256x64 w8 s4, 128x128x64 w4 s4 and 128x128x32 w4 s4, are above). On an
    # H100 (2026-11-27) 64x256x64 w4, 256x128x64 w8 (3, 4 stages), 64x64x128 w4 (3, 4),
    # 128x64x128 w4 s3 and 128x128x128 w8 s3 were never the fastest.
    Config(64, 64, 256, 4, 3),
    Config(64, 128, 128, 4, 3),
    # 64 rows on 8 warps: on sm_90a two warpgroups split the columns (TMA and warp
    # specialisation since 2026-11-28), half the accumulator a thread of 4 warps'.
    Config(64, 128, 64, 8, 3),
    Config(64, 256, 64, 8, 3),
    # Blocks of 192 (or 96): two tiles each, a dot per pair of parts sharing their copies
    # (kernels.matmul). They fill 132 SMs where powers of two leave a last wave nearly empty:
    # GPT-2's QKV at 2048 tokens is 11 x 12 blocks of 192 x 192 (288 of 128 x 128), its MLP
    # down projection 32 x 4 of 64 x 192 or 16 x 8 of 128 x 96 (96 of 128 x 128).
    Config(192, 192, 64, 8, 3),
    Config(128, 192, 64, 8, 3),
    Config(192, 128, 64, 8, 4),
    Config(64, 192, 64, 4, 4),
    Config(128, 96, 64, 4, 4),
]
QUICK_CONFIGS = [Config(128, 256, 64, 8, 3), Config(128, 128, 64, 4, 4),
                 Config(64, 64, 32, 4, 3)]
#: Each configuration is tried in launch order and in groups of this many rows of tiles.
GROUP_M = 8


def with_groups(configs: Sequence[Config]) -> list[Config]:
    """``configs`` in each schedule: a program a tile down the columns, grouped
    (``GROUP_M``), persistent and stream-K (tileopt only: Triton's kernel here is its
    tutorial's; stream-K where the results are f32, ``--out-dtype f32``); blocks of three
    times a power of two in all but stream-K (``kernels.matmul``'s and
    ``kernels.persistent_matmul``'s)."""
    return [v for c in configs
            for v in ((c.grouped(None), c.grouped(GROUP_M), c.persistent_schedule(),
                       c.stream_k_schedule()) if c.powers_of_two()
                      else (c.grouped(None), c.grouped(GROUP_M), c.persistent_schedule()))]


def k_block(dtype: str, config: Config) -> int:
    """``config``'s k step for ``dtype`` inputs: twice as many 8-bit elements (as many
    bytes)."""
    return 2 * config.block_k if dtype in EIGHT_BIT else config.block_k


def runs(dtype: str, config: Config) -> bool:
    """Whether the benchmark runs ``config`` for ``dtype``: 8-bit inputs have one schedule,
    a tile a program (kernels.matmul)."""
    return dtype not in EIGHT_BIT or not (config.persistent or config.stream_k)


def resident_programs(metadata: Any, props: Any) -> int:
    """The programs of a kernel that the GPU runs at once: its SMs times the blocks one SM
    holds by registers (allocated per warp in units of 256), shared memory (1 KiB reserved a
    block) and threads."""
    threads = metadata.block[0] * metadata.block[1] * metadata.block[2]
    warps = -(-threads // 32)
    by_regs = props.regs_per_multiprocessor // max(
        1, warps * -(-32 * (metadata.registers or 255) // 256) * 256)
    by_shared = props.shared_memory_per_multiprocessor // (metadata.shared_bytes + 1024)
    by_threads = props.max_threads_per_multi_processor // threads
    return props.multi_processor_count * max(1, min(by_regs, by_shared, by_threads, 32))


# ---------------------------------------------------------------------------------------------
# timing


@dataclass
class Timing:
    """The fastest configuration of one implementation on one shape."""

    ms: float | None = None  # per launch
    config: str = ""
    eager: bool = False  # timed without a CUDA graph (host overhead included)
    note: str = ""  # why there is no time

    def tflops(self, shape: Shape) -> float | None:
        return None if self.ms is None else shape.flops / (self.ms * 1e-3) / 1e12


def time_launch(fn: Callable[[], Any], warmup: int, reps: int, repeat: int) -> tuple[float, bool]:
    """(ms per launch of ``fn``, whether it was timed eagerly): CUDA events around replays of
    a CUDA graph of ``reps`` launches, the median of ``repeat``; without a graph (``fn``
    cannot be captured), events around each eager launch."""
    import torch

    for _ in range(warmup):
        fn()
    # torch's recipe: warm up on a side stream too (cuBLAS sets up its workspace per stream)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        graph.replay()
        torch.cuda.synchronize()
    except Exception:  # not capturable: time eager launches
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat * reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat * reps)]
        for start, end in zip(starts, ends, strict=True):
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends,
                                                                  strict=True)), True
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times), False


def correct(got: Any, want: Any) -> str | None:
    """None when ``got`` matches the reference ``want`` (f32; for int8 inputs the exact
    int32 product, f64), else the largest error."""
    if not got.is_floating_point():
        wrong = int((got.double() != want).sum().item())
        return f"wrong result ({wrong} elements differ)" if wrong else None
    err = (got.float() - want).abs().max().item()
    scale = want.abs().max().item()
    # f16/bf16 inputs and f32 accumulation: well within 1% of the output's scale; a bf16 or
    # f16 result (cuBLAS) rounds to 8 or 11 bits.
    if not math.isfinite(err) or err > 1e-2 * max(scale, 1.0):
        return f"wrong result (max error {err:.3g}, output scale {scale:.3g})"
    return None


def best(
    candidates: Sequence[tuple[str, Callable[[], Any], Any]],
    want: Any,
    opts: argparse.Namespace,
    failures: list[str],
    brief: dict[str, float] | None = None,
) -> Timing:
    """The fastest of ``candidates`` (name, launch, output tensor) that computes ``want``: each
    is checked, timed briefly (ms per launch into ``brief``, if given), and the fastest timed
    again with ``opts``' repetitions."""
    import torch

    scored: list[tuple[float, str, Callable[[], Any]]] = []
    for name, launch, out in candidates:
        try:
            launch()
            torch.cuda.synchronize()
        except Exception as e:  # an OOM of shared memory, a launch the GPU refuses
            failures.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        wrong = correct(out, want)
        if wrong:
            failures.append(f"{name}: {wrong}")
            continue
        ms, _ = time_launch(launch, 2, max(opts.reps // 4, 2), 3)
        scored.append((ms, name, launch))
        if brief is not None:
            brief[name] = ms
    if not scored:
        return Timing(note="no configuration ran")
    _, name, launch = min(scored, key=lambda s: s[0])
    ms, eager = time_launch(launch, opts.warmup, opts.reps, opts.repeat)
    return Timing(ms, name, eager)


# ---------------------------------------------------------------------------------------------
# the three implementations


class TileoptMatmul:
    """tileopt.kernels.matmul, compiled once per (dtype, configuration, size promises, copy
    variant), or read from the kernels ``--save-kernels`` wrote (``kernels_dir``)."""

    def __init__(self, target: str, out_dtype: str, kernels_dir: Path | None = None) -> None:
        self.target = target
        self.out_dtype = out_dtype  # "same" (the inputs') or "f32"
        self.kernels_dir = kernels_dir
        self.kernels: dict[tuple[Any, ...], Any] = {}
        self.errors: dict[tuple[Any, ...], str] = {}
        if kernels_dir is not None:
            saved = kernels_dir / "errors.json"
            for name, error in (json.loads(saved.read_text()) if saved.exists() else {}).items():
                self.errors[("file", name)] = error

    def variants(self) -> tuple[str, ...]:
        """The copies tried: on sm_90a TMA, TMA from a producer warp (``warp_specialize``)
        and cp.async; cp.async elsewhere."""
        return ("tma", "ws", "cpasync") if self.target == "sm_90a" else ("cpasync",)

    def workspace(self, dtype: str, config: Config) -> bool:
        """Whether ``config``'s stream-K sums split tiles through a workspace (results other
        than f32) rather than atomic adds."""
        return config.stream_k and self.out(dtype) != "f32"

    def out(self, dtype: str) -> str:
        """The result's dtype for ``dtype`` inputs (int32 for int8, as torch._int_mm; bf16
        for fp8 unless ``--out-dtype`` says, as torchao's float8 layers)."""
        if dtype == "i8":
            return "i32"
        if dtype == "f8E4M3FN" and self.out_dtype == "same":
            return "bf16"
        return dtype if self.out_dtype == "same" else self.out_dtype

    @staticmethod
    def divisible(shape: Shape) -> tuple[str, ...]:
        """The views whose row length is promised a multiple of 16 (as Triton's JIT does)."""
        return tuple(name for name, size in (("a", shape.k), ("b", shape.n), ("c", shape.n))
                     if size % 16 == 0)

    def file_name(self, dtype: str, config: Config, divisible: Sequence[str], copy: str) -> str:
        tiles = f"{config.block_m}x{config.block_n}x{k_block(dtype, config)}"
        schedule = ("p" if config.persistent else "sk" if config.stream_k
                    else f"g{config.group_m or 0}")
        return (f"{self.target}-{dtype}-{self.out(dtype)}-{tiles}-w{config.num_warps}-"
                f"s{config.num_stages}-{schedule}-"
                f"{copy}-div_{'_'.join(divisible) or 'none'}.json")

    def kernel(self, dtype: str, config: Config, divisible: tuple[str, ...], copy: str) -> Any:
        """The compiled (or saved) kernel; raises the compilation's error (remembered)."""
        name = self.file_name(dtype, config, divisible, copy)
        key = ("file", name)
        if key in self.errors:
            raise RuntimeError(self.errors[key])
        if key not in self.kernels:
            try:
                self.kernels[key] = self._make(dtype, config, divisible, copy, name)
            except Exception as e:
                lines = [re.sub(r'^error:\s*("[^"]*":\d+:\d+:\s*)?', "", x.strip())
                         for x in str(e).splitlines() if x.strip().startswith("error:")]
                first = lines[0] if lines else (str(e).splitlines() or [repr(e)])[0]
                self.errors[key] = first[:200]
                raise RuntimeError(self.errors[key]) from None
        return self.kernels[key]

    def _make(self, dtype: str, config: Config, divisible: tuple[str, ...], copy: str,
              name: str) -> Any:
        if self.kernels_dir is not None:
            from tileopt.runtime.kernel import Kernel

            path = self.kernels_dir / name
            if not path.exists():
                raise RuntimeError(f"error: {name} is not among the saved kernels")
            return Kernel.load(path)
        import tileopt
        from tileopt import kernels

        tiles = {"block_m": config.block_m, "block_n": config.block_n,
                 "block_k": k_block(dtype, config)}
        out = {"out_dtype": self.out(dtype)}
        promises = {"aligned": True, "int32_indexing": True}
        workspace = self.workspace(dtype, config)
        return tileopt.compile(
            kernels.stream_k_matmul(dtype, **tiles, **out, workspace=True) if workspace
            else kernels.stream_k_matmul(dtype, **tiles) if config.stream_k
            else kernels.persistent_matmul(dtype, **tiles, **out) if config.persistent
            else kernels.matmul(dtype, group_m=config.group_m, **tiles, **out),
            target=self.target, num_warps=config.num_warps, num_stages=config.num_stages,
            tma=copy != "cpasync", warp_specialize=copy == "ws", **promises,
            divisible_sizes=list(divisible),
        )

    def save(self, dtypes: Sequence[str], configs: Sequence[Config], divisibles:
             set[tuple[str, ...]], out: Path) -> None:
        """Compiles every kernel the benchmark launches into ``out`` (one file a kernel,
        ``errors.json`` for those that do not compile)."""
        out.mkdir(parents=True, exist_ok=True)
        for dtype in dtypes:
            for config in (c for c in configs if runs(dtype, c)):
                for divisible in sorted(divisibles):
                    for copy in self.variants():
                        name = self.file_name(dtype, config, divisible, copy)
                        try:
                            kernel = self.kernel(dtype, config, divisible, copy)
                        except RuntimeError as e:
                            print(f"  {name}: does not compile: {e}", flush=True)
                            continue
                        kernel.save(out / name)
                        md = kernel.metadata
                        print(f"  {name}: {md.registers} registers, {md.shared_bytes} "
                              f"bytes of shared memory", flush=True)
        errors = {key[1]: error for key, error in self.errors.items()}
        (out / "errors.json").write_text(json.dumps(errors, indent=1))

    def candidates(self, dtype: str, shape: Shape, a: Any, b: Any,
                   configs: Sequence[Config], failures: list[str]) -> list[tuple[str, Any, Any]]:
        import torch

        props = torch.cuda.get_device_properties(0)
        out = []
        for config in (c for c in configs if runs(dtype, c)):
            for copy in self.variants():
                label = f"{config}{'' if copy == 'cpasync' else ' ' + copy}"
                workspace = self.workspace(dtype, config)
                try:
                    kernel = self.kernel(dtype, config, self.divisible(shape), copy)
                except RuntimeError as e:
                    failures.append(f"{label}: does not compile: {e}")
                    continue
                c = torch.empty(shape.m, shape.n, device="cuda",
                                dtype=_torch_dtypes()[self.out(dtype)])
                grid = (math.ceil(shape.m / config.block_m),
                        math.ceil(shape.n / config.block_n))
                # As kernels.persistent_matmul_grid and stream_k_matmul_grid (no native
                # build where the kernels were saved elsewhere).
                if config.persistent:
                    grid = (min(resident_programs(kernel.metadata, props), grid[0] * grid[1]),)
                if config.stream_k:
                    steps = grid[0] * grid[1] * max(math.ceil(shape.k / config.block_k), 1)
                    grid = (min(resident_programs(kernel.metadata, props), steps),)

                if workspace:  # as kernels.stream_k_workspace_shape and stream_k_counts_shape
                    w = torch.empty(2 * grid[0] * config.block_m, config.block_n,
                                    device="cuda")
                    # Zeros, which every launch leaves zeros.
                    counts = torch.zeros(math.ceil(shape.m / config.block_m)
                                         * math.ceil(shape.n / config.block_n),
                                         dtype=torch.int32, device="cuda")

                    def launch(kernel: Any = kernel, grid: Any = grid, c: Any = c, w: Any = w,
                               counts: Any = counts) -> None:
                        kernel.launch(grid, a, b, c, w, counts, device="cuda")
                else:
                    def launch(kernel: Any = kernel, grid: Any = grid, c: Any = c,
                               zeroed: bool = config.stream_k) -> None:
                        if zeroed:  # it adds the tiles that programs split into zeros
                            c.zero_()
                        kernel.launch(grid, a, b, c, device="cuda")

                out.append((label, launch, c))
        return out


def triton_matmul() -> Any | None:
    """The Triton kernel (tileopt's tiling), or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr, m, n, k, stride_a, stride_b, stride_c,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
    ):
        tile_m, tile_n = tl.program_id(0), tl.program_id(1)
        if GROUP_M > 0:  # as kernels.matmul's group_m
            grid_m = tl.num_programs(0)
            program = tile_m + tile_n * grid_m
            per_group = tl.num_programs(1) * GROUP_M
            first_m = program // per_group * GROUP_M
            rows_of_tiles = tl.minimum(grid_m - first_m, GROUP_M)
            tile_m = first_m + program % per_group % rows_of_tiles
            tile_n = program % per_group // rows_of_tiles
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if a_ptr.dtype.element_ty == tl.int8:  # int8 products summed in int32
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
        else:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, k, BLOCK_K):
            ks = start + tl.arange(0, BLOCK_K)
            a = tl.load(
                a_ptr + rows[:, None] * stride_a + ks[None, :],
                mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0,
            )
            b = tl.load(
                b_ptr + ks[:, None] * stride_b + cols[None, :],
                mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0,
            )
            acc = tl.dot(a, b, acc)
        mask = (rows[:, None] < m) & (cols[None, :] < n)
        tl.store(c_ptr + rows[:, None] * stride_c + cols[None, :],
                 acc.to(c_ptr.dtype.element_ty), mask=mask)

    return matmul_kernel


def triton_candidates(kernel: Any, shape: Shape, a: Any, b: Any, out_dtype: Any,
                      configs: Sequence[Config]) -> list[tuple[str, Any, Any]]:
    import torch

    out = []
    dtype = {torch.int8: "i8", torch.float8_e4m3fn: "f8E4M3FN"}.get(a.dtype, "")
    for config in configs:
        # the tutorial's kernel has one schedule, and blocks of powers of two (tl.arange)
        if config.persistent or config.stream_k or not config.powers_of_two():
            continue
        c = torch.empty(shape.m, shape.n, device="cuda", dtype=out_dtype)
        grid = (math.ceil(shape.m / config.block_m), math.ceil(shape.n / config.block_n))

        def launch(config: Config = config, grid: Any = grid, c: Any = c) -> None:
            kernel[grid](a, b, c, shape.m, shape.n, shape.k, a.stride(0), b.stride(0),
                         c.stride(0), BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                         BLOCK_K=k_block(dtype, config), GROUP_M=config.group_m or 0,
                         num_warps=config.num_warps,
                         num_stages=config.num_stages)

        out.append((str(config), launch, c))
    return out


def cublas_candidates(a: Any, b: Any, out_dtype: Any) -> list[tuple[str, Any, Any]]:
    """torch.matmul into a preallocated output of the inputs' dtype, or torch.mm into an
    ``out_dtype`` one (none where torch has no ``out_dtype``); for int8, torch._int_mm; for
    fp8, torch._scaled_mm of unit scales with b copied column-major (as it requires)."""
    import torch

    c = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=out_dtype)
    if a.dtype == torch.int8:
        return [("torch._int_mm", lambda: torch._int_mm(a, b, out=c), c)]
    if a.dtype == torch.float8_e4m3fn:
        one, b_cols = torch.ones((), device="cuda"), b.t().contiguous().t()
        return [("torch._scaled_mm", lambda: torch._scaled_mm(
            a, b_cols, one, one, out_dtype=out_dtype, out=c), c)]
    if out_dtype == a.dtype:
        return [("torch.matmul", lambda: torch.matmul(a, b, out=c), c)]
    try:
        torch.mm(a[:16, :16], b[:16, :16], out_dtype=out_dtype)
    except (TypeError, RuntimeError):
        return []
    return [("torch.mm out_dtype", lambda: torch.mm(a, b, out_dtype=out_dtype, out=c), c)]


# ---------------------------------------------------------------------------------------------


def device_target() -> str:
    """tileopt's target for the current GPU: sm_90a on Hopper (wgmma), else sm_XY."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="4096^3 and one token count, three configurations")
    parser.add_argument("--dtypes", default="f16,bf16",
                        help="comma-separated: f16,bf16,i8,f8E4M3FN")
    parser.add_argument("--shapes", default="square,gpt2,llama7b",
                        help="comma-separated groups: square, " + ", ".join(MODELS))
    parser.add_argument("--target", default=None,
                        help="tileopt's target (default: the GPU's, sm_90a on H100)")
    parser.add_argument("--warmup", type=int, default=10, help="launches before timing")
    parser.add_argument("--reps", type=int, default=20, help="launches in one CUDA graph")
    parser.add_argument("--repeat", type=int, default=10, help="timed graph replays")
    parser.add_argument("--no-triton", action="store_true", help="leave Triton out")
    parser.add_argument("--out-dtype", choices=("same", "f32"), default="same",
                        help="the result's dtype: the inputs' (as torch.matmul) or f32")
    parser.add_argument("--save-kernels", type=Path, metavar="DIR",
                        help="compile tileopt's kernels for --target (default sm_90a) into DIR "
                             "and exit; needs no GPU")
    parser.add_argument("--details", type=Path, metavar="FILE",
                        help="append each shape's brief time of every configuration (JSON "
                             "lines: TFLOP/s per configuration and implementation) to FILE")
    parser.add_argument("--kernels", type=Path, metavar="DIR",
                        help="launch the kernels --save-kernels wrote to DIR instead of "
                             "compiling (a GPU machine without tileopt's native build)")
    opts = parser.parse_args(argv)
    dtypes = [d for d in opts.dtypes.split(",") if d]
    groups = [g for g in opts.shapes.split(",") if g]
    if bad := [d for d in dtypes if d not in ("f16", "bf16", *EIGHT_BIT)]:
        parser.error(f"unknown dtypes {bad}; f16, bf16, i8 and f8E4M3FN are benchmarked")
    if bad := [g for g in groups if g != "square" and g not in MODELS]:
        parser.error(f"unknown shape groups {bad}; square, {', '.join(MODELS)}")

    configs = with_groups(QUICK_CONFIGS if opts.quick else CONFIGS)
    if opts.save_kernels is not None:
        ours = TileoptMatmul(opts.target or "sm_90a", opts.out_dtype)
        divisibles = {ours.divisible(s) for s in shapes(groups, opts.quick)}
        ours.save(dtypes, configs, divisibles, opts.save_kernels)
        return 0

    why = gpu_unavailable()
    if why is not None:
        print(f"matmul_tflops: skipped: {why}")
        return 0

    import tileopt
    import torch

    target = opts.target or device_target()
    ours = TileoptMatmul(target, opts.out_dtype, opts.kernels)
    tr_kernel = None if opts.no_triton else triton_matmul()
    if tr_kernel is not None:
        import triton

        triton_version = f"Triton {triton.__version__}"
    else:
        triton_version = "Triton not used" if opts.no_triton else "Triton not installed"
    print(
        f"{torch.cuda.get_device_name()} (tileopt target {target}); tileopt "
        f"{tileopt.__version__}, {triton_version}, torch {torch.__version__} (cuBLAS)"
        + (f"; tileopt's kernels from {opts.kernels}" if opts.kernels else "")
    )
    print(f"time: median of {opts.repeat} replays of a CUDA graph of {opts.reps} launches; "
          f"tileopt and Triton: the fastest of {len(configs)} configurations per shape")
    print(f"all three write {'f32' if opts.out_dtype == 'f32' else 'the inputs dtype'} "
          f"(f32 accumulation); TFLOP/s columns, then tileopt's and Triton's over cuBLAS's\n")

    header = (f"{'dtype':<5} {'shape':<28} {'M':>6} {'N':>6} {'K':>6} {'cuBLAS':>7} "
              f"{'Triton':>7} {'tileopt':>7} {'/cuBLAS':>7} {'Tr/cuB':>6}  "
              f"tileopt config | Triton config")
    print(header + "\n" + "-" * len(header), flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    misses: list[str] = []
    eager_rows = 0
    reported: set[tuple[str, str]] = set()
    for dtype in dtypes:
        torch_dtype = _torch_dtypes()[dtype]
        for shape in shapes(groups, opts.quick):
            if dtype == "i8":
                a, b = (torch.randint(-128, 128, size, device="cuda", generator=gen,
                                      dtype=torch.int8)
                        for size in ((shape.m, shape.k), (shape.k, shape.n)))
                want = a.double() @ b.double()  # exact: |sums| < 2^53
            elif dtype == "f8E4M3FN":
                a = torch.randn(shape.m, shape.k, device="cuda", generator=gen).to(torch_dtype)
                b = (torch.randn(shape.k, shape.n, device="cuda", generator=gen)
                     / math.sqrt(shape.k)).to(torch_dtype)
                want = a.float() @ b.float()
            else:
                a = torch.randn(shape.m, shape.k, device="cuda", generator=gen).to(torch_dtype)
                b = torch.randn(shape.k, shape.n, device="cuda", generator=gen).to(torch_dtype)
                b /= math.sqrt(shape.k)
                want = a.float() @ b.float()
            failures: dict[str, list[str]] = {"tileopt": [], "Triton": [], "cuBLAS": []}
            out_dtype = _torch_dtypes()[ours.out(dtype)]
            cublas = best(cublas_candidates(a, b, out_dtype), want, opts, failures["cuBLAS"])
            tr = Timing(note=triton_version)
            if tr_kernel is not None:
                tr = best(triton_candidates(tr_kernel, shape, a, b, out_dtype, configs), want,
                          opts, failures["Triton"])
            brief: dict[str, float] = {}
            mine = best(ours.candidates(dtype, shape, a, b, configs, failures["tileopt"]),
                        want, opts, failures["tileopt"], brief)
            if opts.details is not None:
                with opts.details.open("a") as f:
                    f.write(json.dumps({
                        "dtype": dtype, "shape": shape.name, "m": shape.m, "n": shape.n,
                        "k": shape.k, "cublas": cublas.tflops(shape),
                        "tileopt": {name: Timing(ms).tflops(shape)
                                    for name, ms in brief.items()}}) + "\n")
            tf = {name: t.tflops(shape) for name, t in
                  (("cublas", cublas), ("triton", tr), ("ours", mine))}

            def ratio(x: float | None, y: float | None) -> float | None:
                return None if x is None or not y else x / y

            r_cublas = ratio(tf["ours"], tf["cublas"])
            mark = "  below goal" if r_cublas is not None and r_cublas < GOAL else ""
            if r_cublas is None or mark:
                misses.append(f"{dtype} {shape.name}: tileopt "
                              f"{_fmt(r_cublas, '.2f')}x cuBLAS")
            eager = any(t.eager for t in (cublas, tr, mine))
            eager_rows += eager
            print(
                f"{dtype:<5} {shape.name:<28} {shape.m:>6} {shape.n:>6} {shape.k:>6} "
                f"{_fmt(tf['cublas']):>7} {_fmt(tf['triton']):>7} {_fmt(tf['ours']):>7} "
                f"{_fmt(r_cublas, '.2f'):>7} {_fmt(ratio(tf['triton'], tf['cublas']), '.2f'):>6}  "
                f"{mine.config or mine.note} | {tr.config or tr.note}"
                + (" (eager)" if eager else "") + mark,
                flush=True,
            )
            for who, lines in failures.items():
                for line in lines:
                    if (who, line) not in reported:  # a compile error: once, not every shape
                        reported.add((who, line))
                        print(f"      {who} {line}")
            del a, b, want
            torch.cuda.empty_cache()
    print()
    if eager_rows:
        print(f"{eager_rows} rows timed eagerly (a launch could not be captured in a CUDA "
              f"graph): host launch overhead is in their times")
    if misses:
        print(f"tileopt below {GOAL:.0%} of cuBLAS on {len(misses)} shapes:")
        for line in misses:
            print(f"  {line}")
    else:
        print(f"tileopt reaches {GOAL:.0%} of cuBLAS on every shape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
