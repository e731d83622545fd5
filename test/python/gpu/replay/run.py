"""Replay the cases of collect.py on a real GPU through ``tileopt.runtime.cuda``.

Needs only torch (with CUDA), numpy, cuda-core/cuda-bindings and tileopt's pure-Python runtime
(``python/tileopt/runtime``): no MLIR, no compiler. For every case it rebuilds the arguments
on the GPU in the recorded layout (guarded storages, real strides and offsets), launches the
kernel with ``tileopt.runtime.cuda`` (``CudaModule`` + ``launch``, as ``Kernel.launch(...,
device="cuda")`` does) on the current torch stream, and checks:

* the outputs against the CPU torch reference, with the tolerances of the tests;
* the outputs against tileopt's PTX emulator on the same PTX (max |gpu - emulator|, and how
  many elements differ bit for bit);
* that nothing outside the output views changed (guards around every storage, the inputs, the
  parts of an output's storage outside its view).

Each case runs from the cubin (where it fits the GPU) and again from the PTX (JIT-compiled by
the driver), so both ways of loading code are exercised. The benchmark entries make large
inputs on the GPU, check the kernel against torch and time both (CUDA events, median of
batches queued behind a sleep kernel, so host launch overhead is not counted; that overhead
is reported apart).

Cases run in a child process; a launch that breaks the CUDA context (an illegal address) or
the process is recorded as CRASH and the child is restarted on the remaining cases.

    PYTHONPATH=python python3 test/python/gpu/replay/run.py [--cases .gpucases] [--only S,...]
        [--paths cubin,ptx] [--no-bench] [--out DIR]
    # without a GPU, the same replay in the emulator (checks this script and the collection):
    PYTHONPATH=python python3 test/python/gpu/replay/run.py --emulator --no-bench
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "python"))

EPS32 = float(np.finfo(np.float32).eps)
#: Unit roundoff of the types a result may be written in.
ROUND = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: EPS32 / 2}
INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


# ---------------------------------------------------------------------------------------------
# comparisons (collect.py uses the same function for the emulator's outputs)


def check(out: torch.Tensor, expected: torch.Tensor, atol: Any, rtol: float,
          is_exact: bool) -> tuple[bool, float, float]:
    """(passes, max |out - expected|, worst err / bound). Exact: bit for bit in out's dtype."""
    if is_exact:
        o = out.cpu().contiguous().reshape(-1)
        e = expected.cpu().to(o.dtype).contiguous().reshape(-1)
        same = o.view(torch.uint8).equal(e.view(torch.uint8))
        err = (o.double() - e.double()).abs().nan_to_num(float("inf")).max().item() \
            if o.numel() else 0.0
        return same, (0.0 if same else err), 0.0 if same else float("inf")
    o = out.cpu().double()
    e = expected.cpu().double()
    err = (o - e).abs()
    bound = torch.as_tensor(atol, dtype=torch.float64).cpu() + rtol * e.abs()
    ok = bool((err <= bound).all()) if err.numel() else True
    worst = (err / bound.clamp_min(1e-300)).nan_to_num(float("inf")).max().item() \
        if err.numel() else 0.0
    maxerr = err.nan_to_num(float("inf")).max().item() if err.numel() else 0.0
    return ok, maxerr, worst


def compare_emulator(out: torch.Tensor, emu: torch.Tensor | None) -> tuple[float, int]:
    """(max |out - emu| with equal NaNs as 0, number of elements that differ bit for bit)."""
    if emu is None:
        return float("nan"), -1
    o = out.cpu().contiguous().reshape(-1)
    e = emu.to(o.dtype).contiguous().reshape(-1)
    if o.numel() == 0:
        return 0.0, 0
    bits = INT_OF_SIZE[o.element_size()]
    differ = o.view(bits) != e.view(bits) if o.dtype != torch.bool else o != e
    od, ed = o.double(), e.double()
    diff = (od - ed).abs()
    both_nan = od.isnan() & ed.isnan()
    diff = torch.where(both_nan, torch.zeros_like(diff), diff).nan_to_num(float("inf"))
    return diff.max().item(), int(differ.sum())


# ---------------------------------------------------------------------------------------------
# environment


def environment(emulator: bool) -> dict[str, Any]:
    env: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                           "torch.cuda": torch.version.cuda, "numpy": np.__version__}
    for mod in ("cuda.core", "cuda.bindings", "cuda.pathfinder"):
        try:
            m = __import__(mod, fromlist=["__version__"])
            env[mod] = getattr(m, "__version__", "?")
        except Exception as e:  # noqa: BLE001
            env[mod] = f"missing ({type(e).__name__}: {e})"
    if emulator:
        env["device"] = "tileopt PTX emulator (no GPU)"
        return env
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        env["driver CUDA version"] = f"{version // 1000}.{version % 1000 // 10}"
    except Exception as e:  # noqa: BLE001
        env["driver CUDA version"] = f"? ({e})"
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["device"] = f"{p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, " \
                        f"{p.total_memory / 2**30:.0f} GiB"
    else:
        env["device"] = "torch sees no CUDA device"
    try:
        import cuda.core as cc

        api = cc if hasattr(cc, "Device") else __import__("cuda.core.experimental",
                                                          fromlist=["Device"])
        env["cuda.core API"] = ", ".join(
            f"{n}={'yes' if hasattr(api, n) else 'NO'}"
            for n in ("Device", "launch", "LaunchConfig", "ObjectCode", "Stream"))
        env["cuda.core namespace"] = api.__name__
    except Exception as e:  # noqa: BLE001
        env["cuda.core API"] = f"? ({e})"
    return env


# ---------------------------------------------------------------------------------------------
# launching


class Launcher:
    """Loads kernels and launches them on the GPU (tileopt.runtime.cuda) or in the emulator."""

    def __init__(self, cases_dir: Path, emulator: bool) -> None:
        from tileopt.runtime.abi import KernelParam, TensorMapParam

        self.dir = cases_dir
        self.emulator = emulator
        self.manifest = json.loads((cases_dir / "manifest.json").read_text())
        self.meta = self.manifest["kernels"]
        self.params = {kid: tuple(KernelParam.parse(t) for t in m["abi"])
                       for kid, m in self.meta.items()}
        self.tensor_maps = {kid: tuple(TensorMapParam(**t) for t in m.get("tensor_maps", ()))
                            for kid, m in self.meta.items()}
        self.modules: dict[tuple[str, str], Any] = {}
        self.device = "cpu" if emulator else "cuda"

    def path_of(self, kid: str, path: str) -> str:
        """What actually runs: "cubin", "ptx-jit" (PTX compiled by the driver) or "emulator"."""
        if self.emulator:
            return "emulator"
        module = self.module(kid, path)
        return "cubin" if getattr(module.code, "code_type", "?") == "cubin" else "ptx-jit"

    def module(self, kid: str, path: str) -> Any:
        key = (kid, path)
        if key not in self.modules:
            d = self.dir / "kernels" / kid
            ptx = (d / "kernel.ptx").read_text()
            if self.emulator:
                from tileopt.runtime import emulator

                self.modules[key] = emulator.load(ptx)
            else:
                from tileopt.runtime import cuda

                cubin_file = d / "kernel.cubin"
                cubin = cubin_file.read_bytes() if path == "cubin" and cubin_file.exists() \
                    else None
                self.modules[key] = cuda.CudaModule(cubin, ptx, self.meta[kid]["target"], 0)
        return self.modules[key]

    def launch(self, kid: str, path: str, grid: tuple[int, int, int], args: list[Any]) -> None:
        m = self.meta[kid]
        block = tuple(m["block"])
        if self.emulator:
            from tileopt.runtime import emulator

            emulator.launch(self.module(kid, path), m["name"], self.params[kid], grid, block,
                            args, m.get("dynamic_shared_bytes", 0), self.tensor_maps[kid])
        else:
            from tileopt.runtime import cuda

            cuda.launch(self.module(kid, path), m["name"], self.params[kid], grid, block, args,
                        shared_bytes=m.get("dynamic_shared_bytes", 0),
                        tensor_maps=self.tensor_maps[kid])


def replay_case(launcher: Launcher, case: dict[str, Any], path: str) -> dict[str, Any]:
    data = torch.load(launcher.dir / "cases" / f"{case['id']}.pt", weights_only=True)
    dev = launcher.device
    bases = [None if b is None else b.to(dev, copy=True) for b in data["bases"]]
    args = []
    for b, geom, scalar in zip(bases, data["geometry"], data["scalars"], strict=True):
        args.append(scalar if b is None else b.as_strided(*geom))
    row: dict[str, Any] = {"kind": "case", "id": case["id"], "target": case["target"],
                           "path": launcher.path_of(case["kernel"], path)}
    launcher.launch(case["kernel"], path, tuple(case["grid"]), args)
    if dev == "cuda":
        torch.cuda.synchronize()
    ok, maxerr, worst, emu_diff, emu_bits, notes = True, 0.0, 0.0, 0.0, 0, []
    outputs = {int(i): o for i, o in data["outputs"].items()}
    for i, o in outputs.items():
        region = bases[i].as_strided(*o["region"])
        good, err, w = check(region, o["expected"], o["atol"], o["rtol"], o["exact"])
        ok &= good
        maxerr, worst = max(maxerr, err), max(worst, w)
        d, nbits = compare_emulator(region, o["emulator"])
        emu_diff = max(emu_diff, d) if not math.isnan(d) else d
        emu_bits = nbits if nbits < 0 or emu_bits < 0 else emu_bits + nbits
        if not good:
            notes.append(f"arg {i}: max err {err:.3g} ({w:.3g}x the bound)")
    # Nothing outside the output views may change: guards, inputs, the rest of a storage.
    stray = 0
    for i, (b, before) in enumerate(zip(bases, data["bases"], strict=True)):
        if b is None:
            continue
        mask = torch.zeros(b.numel(), dtype=torch.bool)
        if i in outputs:
            mask.as_strided(*data["geometry"][i]).fill_(True)
        after = b.cpu()
        bits = INT_OF_SIZE[after.element_size()]
        changed = (after.view(bits) != before.view(bits)) if after.dtype != torch.bool \
            else after != before
        n = int((changed & ~mask).sum())
        if n:
            stray += n
            where = torch.nonzero(changed & ~mask)[0].item()
            notes.append(f"arg {i}: {n} element(s) outside the output views changed "
                         f"(first at storage index {where})")
    ok &= stray == 0
    row.update(ok=ok, maxerr=maxerr, worst=worst, emu_diff=emu_diff, emu_bits=emu_bits,
               stray=stray, notes="; ".join(notes),
               emulator_matches_reference=case.get("emulator_matches_reference"))
    return row


# ---------------------------------------------------------------------------------------------
# benchmarks


def _sum_bound(x: torch.Tensor, dim: int, block: int) -> torch.Tensor:
    depth = -(-x.shape[dim] // block) + math.ceil(math.log2(block)) + 1
    return depth * (EPS32 / 2) * x.double().abs().sum(dim) + 1e-30


def _matmul_bound(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.shape[-1] + 1) * (EPS32 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30


def bench_ops() -> dict[str, Any]:
    """op -> (reference(args) -> (expected, atol, rtol, exact), torch_version(args))."""
    import torch.nn.functional as F

    def attention_ref(a: list[Any]) -> Any:
        want = F.scaled_dot_product_attention(a[0].float(), a[1].float(), a[2].float(),
                                              scale=a[4])
        f16 = 2.0**-11
        return want, (4 * f16 + 1e-6) * want.abs().max().item(), 4 * f16, False

    def gelu_ref(a: list[Any]) -> Any:
        return F.gelu(a[0].double() + a[1].double()), 1e-6, EPS32 / 2 + 8 * EPS32, False

    return {
        "vector_add": (lambda a: (a[0] + a[1], 0, 0, True),
                       lambda a: torch.add(a[0], a[1], out=a[2])),
        "bias_gelu": (gelu_ref, lambda a: F.gelu(a[0] + a[1])),
        "softmax": (lambda a: (torch.softmax(a[0].double(), 1), 1e-7, 1e-5, False),
                    lambda a: torch.softmax(a[0], 1)),
        "layer_norm": (lambda a: (F.layer_norm(a[0].double(), a[0].shape[1:], a[1].double(),
                                               a[2].double(), a[4]), 2e-5, 1e-5, False),
                       lambda a: F.layer_norm(a[0], a[0].shape[1:], a[1], a[2], a[4])),
        "row_sum": (lambda a: (a[0].double().sum(1), _sum_bound(a[0], 1, 256), 0, False),
                    lambda a: a[0].sum(1)),
        "transpose": (lambda a: (a[0].t(), 0, 0, True), lambda a: a[0].t().contiguous()),
        "matmul": (lambda a: (a[0].double() @ a[1].double(), _matmul_bound(a[0], a[1]), 0,
                              False),
                   lambda a: torch.mm(a[0], a[1])),
        # Written in the inputs' type, as torch.bmm: rounded once more.
        "batched_matmul": (lambda a: (a[0].double() @ a[1].double(),
                                      (1 + ROUND[a[2].dtype]) * _matmul_bound(a[0], a[1]),
                                      ROUND[a[2].dtype], False),
                           lambda a: torch.bmm(a[0], a[1])),
        # p is rounded to f16 before its product (as test_pipelining); f32 reference.
        # torch on (batch, 1 head, sequence, d): its fused (flash) kernels need 4-D inputs.
        "attention": (attention_ref,
                      lambda a: F.scaled_dot_product_attention(
                          *(x.unsqueeze(1) for x in a[:3]), scale=a[4])),
    }


def gpu_time(fn: Any, reps: int = 10, batches: int = 7) -> float:
    """Median seconds per call: batches of ``reps`` calls between two CUDA events, queued
    behind a sleep kernel so that the host's launch overhead is hidden."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(20_000_000)  # ~10 ms at 2 GHz: the launches queue up meanwhile
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(times)


def host_time(fn: Any, reps: int = 50) -> float:
    """Seconds of host time per call (launches only, no synchronization in between)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t = (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    return t


def run_bench(launcher: Launcher, b: dict[str, Any]) -> dict[str, Any]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    args: list[Any] = []
    for spec in b["args"]:
        if "scalar" in spec:
            args.append(spec["scalar"])
        elif "randn" in spec:
            t = torch.randn(spec["randn"], generator=gen, device="cuda") * spec.get("scale", 1.0)
            args.append(t.to(getattr(torch, spec["dtype"])))
        else:
            args.append(torch.full(spec["empty"], float("nan"), device="cuda",
                                   dtype=getattr(torch, spec["dtype"])))
    grid = tuple(b["grid"])
    reference, torch_fn = bench_ops()[b["op"]]
    row: dict[str, Any] = {"kind": "bench", "id": b["id"], "target": b["target"],
                           "path": launcher.path_of(b["kernel"], "cubin")}

    def ours() -> None:
        launcher.launch(b["kernel"], "cubin", grid, args)

    ours()
    torch.cuda.synchronize()
    expected, atol, rtol, is_exact = reference(args)
    out = args[b["outputs"][0]]
    ok, maxerr, worst = check(out, expected, atol.cpu() if isinstance(atol, torch.Tensor)
                              else atol, rtol, is_exact)
    del expected, atol
    torch.cuda.empty_cache()
    t_ours, t_torch = gpu_time(ours), gpu_time(lambda: torch_fn(args))
    row.update(ok=ok, maxerr=maxerr, worst=worst, t_ours=t_ours, t_torch=t_torch,
               host_us=host_time(ours) * 1e6, host_torch_us=host_time(lambda: torch_fn(args)) * 1e6)
    if "bytes" in b:
        row["ours_rate"] = f"{b['bytes'] / t_ours / 1e9:.0f} GB/s"
        row["torch_rate"] = f"{b['bytes'] / t_torch / 1e9:.0f} GB/s"
    if "flops" in b:
        row["ours_rate"] = f"{b['flops'] / t_ours / 1e12:.0f} TFLOP/s"
        row["torch_rate"] = f"{b['flops'] / t_torch / 1e12:.0f} TFLOP/s"
    return row


# ---------------------------------------------------------------------------------------------
# the child: runs items, one JSON line each


def child(opts: argparse.Namespace) -> int:
    launcher = Launcher(Path(opts.cases), opts.emulator)
    cases = {c["id"]: c for c in launcher.manifest["cases"]}
    benches = {b["id"]: b for b in launcher.manifest["bench"]}
    items = json.loads(Path(opts.items).read_text())
    count = 0
    with open(opts.results, "a") as log:
        for kind, item_id, path in items:
            log.write(json.dumps({"start": [kind, item_id, path]}) + "\n")
            log.flush()
            if os.environ.get("TILEOPT_REPLAY_CRASH_ON") == item_id:  # tests the restarts
                os._exit(139)
            t0 = time.perf_counter()
            try:
                if kind == "case":
                    row = replay_case(launcher, cases[item_id], path)
                else:
                    row = run_bench(launcher, benches[item_id])
            except Exception as e:  # noqa: BLE001 - one row per item, the rest still run
                row = {"kind": kind, "id": item_id, "path": path, "ok": False,
                       "target": (cases.get(item_id) or benches.get(item_id) or {}).get("target"),
                       "error": f"{type(e).__name__}: {e}",
                       "traceback": traceback.format_exc(limit=8)}
                sticky = not opts.emulator and _context_broken()
                row["sticky"] = sticky
                log.write(json.dumps({"row": row, "path": path}) + "\n")
                log.flush()
                print(f"ERROR {kind} {item_id} [{path}]: {row['error']}", flush=True)
                if sticky:
                    return 3
                continue
            row["seconds"] = round(time.perf_counter() - t0, 3)
            log.write(json.dumps({"row": row, "path": path}) + "\n")
            log.flush()
            count += 1
            if not row["ok"]:
                print(f"FAIL {kind} {item_id} [{row['path']}] {row.get('notes', '')}", flush=True)
            elif kind == "bench" or count % 50 == 0:
                print(f"ok   {kind} {item_id} [{row['path']}] ({count} done)", flush=True)
    return 0


def _context_broken() -> bool:
    """True when the CUDA context is unusable (a sticky error such as an illegal address)."""
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return False
    except Exception:  # noqa: BLE001
        return True


# ---------------------------------------------------------------------------------------------
# the parent: schedules children, prints the tables


def fmt(x: Any, spec: str = ".2g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "n/a"
    return format(x, spec)


def case_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'case':62s} {'target':7s} {'path':8s} {'max err':>9s} {'err/bnd':>8s} "
             f"{'vs emulator':>15s} {'result':6s}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['id'][:62]:62s} {str(r.get('target')):7s} {r['path']:8s} "
                         f"{'':>9s} {'':>8s} {'':>15s} {'CRASH' if r.get('crash') else 'ERROR'}"
                         f"  {r['error'][:200]}")
            continue
        if r.get("emu_bits", -1) < 0:
            emu = "no emu output"
        elif r["emu_bits"] == 0:
            emu = "= (bitwise)"
        else:
            emu = f"{fmt(r['emu_diff'])} ({r['emu_bits']} el)"
        lines.append(f"{r['id'][:62]:62s} {r['target']:7s} {r['path']:8s} {fmt(r['maxerr']):>9s} "
                     f"{fmt(r['worst']):>8s} {emu:>15s} {'pass' if r['ok'] else 'FAIL'}"
                     + (f"  {r['notes']}" if r.get("notes") else ""))
    return lines


def bench_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'benchmark':44s} {'path':8s} {'check':5s} {'tileopt':>10s} {'torch':>10s} "
             f"{'ratio':>6s} {'tileopt rate':>14s} {'torch rate':>14s} {'host us':>12s}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['id'][:44]:44s} {r['path']:8s} ERROR {r['error'][:200]}")
            continue
        lines.append(
            f"{r['id'][:44]:44s} {r['path']:8s} {'pass' if r['ok'] else 'FAIL':5s} "
            f"{r['t_ours'] * 1e6:8.1f}us {r['t_torch'] * 1e6:8.1f}us "
            f"{r['t_ours'] / r['t_torch']:6.2f} {r.get('ours_rate', ''):>14s} "
            f"{r.get('torch_rate', ''):>14s} {r['host_us']:5.0f}/{r['host_torch_us']:<5.0f}"
            + ("" if r["ok"] else f"  max err {fmt(r['maxerr'])} ({fmt(r['worst'])}x bound)"))
    return lines


def parent(opts: argparse.Namespace) -> int:
    cases_dir = Path(opts.cases)
    manifest = json.loads((cases_dir / "manifest.json").read_text())
    only = [s for s in opts.only.split(",") if s]
    paths = [p for p in opts.paths.split(",") if p]
    items: list[list[str]] = []
    major = None if opts.emulator or not torch.cuda.is_available() else \
        torch.cuda.get_device_capability(0)[0]
    for c in manifest["cases"]:
        if only and not any(s in c["id"] for s in only):
            continue
        meta = manifest["kernels"][c["kernel"]]
        # A cubin of another major version does not load: CudaModule takes the PTX, which
        # the "ptx" pass runs anyway.
        digits = "".join(ch for ch in meta["target"] if ch.isdigit())
        cubin_loads = meta["has_cubin"] and (major is None or int(digits[:-1]) == major)
        kernel_paths = ["emulator"] if opts.emulator else [
            p for p in paths if p == "ptx" or cubin_loads]
        items.extend(["case", c["id"], p] for p in kernel_paths)
    if not opts.no_bench and not opts.emulator:
        items.extend(["bench", b["id"], "cubin"] for b in manifest["bench"]
                     if not only or any(s in b["id"] for s in only))
    out_dir = Path(opts.out or os.environ.get("OUT") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.jsonl"
    results.unlink(missing_ok=True)
    env = environment(opts.emulator)
    print("environment:")
    for k, v in env.items():
        print(f"  {k}: {v}")
    print(f"collected with: {manifest['collected_with']}")
    print(f"{len(items)} items ({len(manifest['cases'])} cases, paths {paths}, "
          f"{len(manifest['bench'])} benchmarks)", flush=True)

    done: dict[tuple[str, str, str], dict[str, Any]] = {}
    restarts = 0
    t0 = time.perf_counter()
    while True:
        todo = [it for it in items if tuple(it) not in done]
        if not todo:
            break
        if restarts > opts.max_restarts:
            for it in todo:
                done[tuple(it)] = {"kind": it[0], "id": it[1], "path": it[2], "ok": False,
                                   "target": None, "error": "not run: too many restarts"}
            break
        items_file = out_dir / "items.json"
        items_file.write_text(json.dumps(todo))
        cmd = [sys.executable, __file__, "--child", "--cases", str(cases_dir), "--items",
               str(items_file), "--results", str(results)]
        if opts.emulator:
            cmd.append("--emulator")
        before = len(done)
        proc = subprocess.run(cmd, check=False)
        started = None
        for line in results.read_text().splitlines() if results.exists() else []:
            rec = json.loads(line)
            if "start" in rec:
                started = tuple(rec["start"])
            else:
                r = rec["row"]
                done[(r["kind"], r["id"], rec["path"])] = r
                started = None
        if started is not None and started not in done:
            done[started] = {"kind": started[0], "id": started[1], "path": started[2],
                             "ok": False, "crash": True, "target": None,
                             "error": f"the process died (exit status {proc.returncode})"}
        if len(done) == before:  # the child did nothing at all: it cannot start
            for it in todo:
                done[tuple(it)] = {"kind": it[0], "id": it[1], "path": it[2], "ok": False,
                                   "target": None,
                                   "error": f"the child process failed (exit status "
                                            f"{proc.returncode}) before running anything"}
            break
        if proc.returncode != 0:
            restarts += 1
    seconds = time.perf_counter() - t0
    rows = [done[tuple(it)] for it in items if tuple(it) in done]
    case_rows = [r for r in rows if r["kind"] == "case"]
    bench_rows = [r for r in rows if r["kind"] == "bench"]
    lines = ["environment: " + json.dumps(env), ""] + case_table(case_rows) + [""] + \
        bench_table(bench_rows)
    failed = [r for r in rows if not r["ok"]]
    emu_mismatch = [r for r in case_rows if r.get("emu_bits", 0) > 0]
    summary = [
        f"{sum(r['ok'] for r in case_rows)}/{len(case_rows)} case runs pass "
        f"({len(set(r['id'] for r in case_rows))} cases), "
        f"{sum(r['ok'] for r in bench_rows)}/{len(bench_rows)} benchmarks pass, "
        f"{len(emu_mismatch)} case runs differ from the emulator bit for bit, "
        f"{restarts} restarts, {seconds:.0f} s",
    ]
    (out_dir / "results.txt").write_text("\n".join(lines + [""] + summary) + "\n")
    (out_dir / "results.json").write_text(json.dumps({"environment": env, "rows": rows},
                                                     indent=1, default=str))
    families: dict[str, dict[str, list[int]]] = {}
    for r in case_rows:
        fam = r["id"].split("-")[0]
        if fam.startswith("rand_"):
            fam = "rand_tile" if fam.startswith("rand_tile") else "rand_dot"
        counts = families.setdefault(fam, {}).setdefault(r["path"], [0, 0])
        counts[0] += bool(r["ok"])
        counts[1] += 1
    family_lines = [f"  {f:40s} " + "  ".join(f"{p}:{a}/{b}" for p, (a, b) in
                                              sorted(families[f].items()))
                    for f in sorted(families)]
    with open(out_dir / "results.txt", "a") as f:
        f.write("\nby kernel family, pass/total per path:\n" + "\n".join(family_lines) + "\n")
    # The terminal gets what failed, the emulator differences and the benchmarks in full (the
    # whole table is in results.txt).
    print()
    bad_families = [ln for f, ln in zip(sorted(families), family_lines, strict=True)
                    if any(a < b for a, b in families[f].values())]
    print(f"{len(families) - len(bad_families)} of {len(families)} kernel families pass on "
          f"every path" + (", these do not:" if bad_families else ""))
    for line in bad_families:
        print(line)
    if failed:
        print("FAILURES:")
        for line in case_table([r for r in failed if r["kind"] == "case"])[1:]:
            print(line)
        for r in failed:
            if r.get("traceback"):
                print(f"--- {r['id']} [{r['path']}]\n{r['traceback']}")
                break
    if emu_mismatch:
        print("differ from the emulator (bit for bit):")
        for line in case_table(emu_mismatch)[1:]:
            print(line)
    if bench_rows:
        print()
        print("\n".join(bench_table(bench_rows)))
    print()
    print(summary[0])
    print(f"full table: {out_dir / 'results.txt'}")
    return 0 if not failed else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=str(REPO / ".gpucases"))
    ap.add_argument("--only", default="", help="comma-separated substrings of case ids")
    ap.add_argument("--paths", default="cubin,ptx",
                    help="load code from the cubin and/or the PTX (driver JIT)")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--emulator", action="store_true",
                    help="replay in tileopt's PTX emulator on the CPU (no GPU needed)")
    ap.add_argument("--out", default="", help="folder for results.{txt,json} (default $OUT or .)")
    ap.add_argument("--max-restarts", type=int, default=20)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--items", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    return child(opts) if opts.child else parent(opts)


if __name__ == "__main__":
    sys.exit(main())
