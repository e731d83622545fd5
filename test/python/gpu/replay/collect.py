"""Compile tileopt's GPU test kernels HERE (no GPU needed) and write replayable cases.

The GPU machine cannot build tileopt (no MLIR there), so the work is split: this script
compiles a broad set of kernels (those of ``test/python/gpu`` and ``tileopt.kernels``:
elementwise, softmax and reductions, layer norm, mma.sync matmuls for sm_80/sm_90, wgmma for
sm_90a, edge kernels with odd sizes, masks, casts, promises, the seeded random kernels, the
hand-written kernels of ``test/python/compiler/kernels``) and writes, for every case:

* the kernel (shared by the cases that launch it): ``kernels/<kid>/kernel.ptx``,
  ``kernel.cubin`` (when ptxas/nvJitLink made one) and ``meta.json`` (name, target, ABI as
  KernelParam text, num_warps, block, shared memory, registers);
* ``cases/<case>.pt``: the launch arguments (each view as a guarded flat storage plus its
  sizes/strides/offset, so non-contiguous views, slices and "nothing written past the view"
  survive the trip; the guards are NaN or a byte pattern), the expected outputs computed by
  torch on the CPU (float64 unless the test is exact) with the test's tolerances, and the
  outputs of tileopt's PTX emulator on the same PTX and the same memory layout;
* ``manifest.json``: the cases (kernel, grid, outputs) and the benchmark entries (large shapes
  whose inputs ``run.py`` generates on the GPU, timed against the equivalent torch op).

``run.py`` (on the GPU machine) replays them through ``tileopt.runtime.cuda``. The kernels of
the GPU tests are imported from the test modules (their module-level builders and texts), not
copied; the tests' fixtures are not used.

    .venv/bin/python test/python/gpu/replay/collect.py [--out .gpucases] [--only SUBSTR,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
GPU_TESTS = HERE.parent
sys.path.insert(0, str(GPU_TESTS))
sys.path.insert(0, str(HERE))

import test_edge_kernels as edge  # noqa: E402
import test_promises as prom  # noqa: E402
import test_random_kernels as rnd  # noqa: E402
import tileopt  # noqa: E402
from run import check  # noqa: E402
from test_kernels import EPS32, ROUND, TORCH_DTYPES, matmul_bound, sum_bound  # noqa: E402
from tileopt import kernels  # noqa: E402

GUARD = 256  # guard elements on each side of every view's storage (keeps 16-byte alignment)
TARGETS = ("sm_80", "sm_90")


def _catalog() -> Any:
    import importlib.util

    path = GPU_TESTS.parent / "compiler" / "kernels" / "catalog.py"
    spec = importlib.util.spec_from_file_location("tileopt_replay_catalog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# references and tolerances


@dataclass
class Ref:
    """What an output must hold: ``expected`` (exact when ``exact``: bit for bit in the
    output's dtype; else ``|out - expected| <= atol + rtol * |expected|`` in float64) over
    ``region`` of the argument (a function of the argument's view; None: all of it)."""

    expected: torch.Tensor
    atol: Any = 0.0
    rtol: float = 0.0
    exact: bool = False
    region: Callable[[torch.Tensor], torch.Tensor] | None = None


def exact(expected: torch.Tensor, region: Callable | None = None) -> Ref:
    return Ref(expected.clone(), exact=True, region=region)


def close(expected: torch.Tensor, atol: Any, rtol: float = 0.0,
          region: Callable | None = None) -> Ref:
    atol = atol.double().clone() if isinstance(atol, torch.Tensor) else float(atol)
    return Ref(expected.double().clone(), atol, float(rtol), region=region)


# ---------------------------------------------------------------------------------------------
# the collector


def _guard_value(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return 0x5A if dtype.itemsize == 1 else 0x5A5A if dtype.itemsize == 2 else 0x5A5A5A5A


def guarded(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the same sizes, strides and storage offset, in a storage of its own
    with GUARD elements of a sentinel on each side."""
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
    base = torch.full((n + 2 * GUARD,), _guard_value(t.dtype), dtype=t.dtype)
    base[GUARD:GUARD + n] = flat
    return base.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset() + GUARD)


def _base(view: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``view`` as a flat tensor."""
    n = view.untyped_storage().nbytes() // view.element_size()
    return torch.empty(0, dtype=view.dtype).set_(view.untyped_storage(), 0, (n,), (1,))


def _geometry(t: torch.Tensor) -> list[Any]:
    return [list(t.shape), list(t.stride()), int(t.storage_offset())]


def _safe(name: str) -> str:
    out = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_")


@dataclass
class Collector:
    out: Path
    only: list[str] = field(default_factory=list)
    kernels: dict[str, Any] = field(default_factory=dict)
    kernel_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)
    bench: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def wanted(self, cid: str) -> bool:
        return not self.only or any(s in cid for s in self.only)

    # -- kernels --------------------------------------------------------------------------

    def kernel(self, key: str, make: Callable[[], Any], target: str, **options: Any) -> str:
        """Compiles (once) and writes a kernel; returns its id. ``make()`` gives the builder
        or IR text; ``options`` go to ``tileopt.compile``."""
        opts = {k: v for k, v in sorted(options.items())}
        kid = _safe(f"{key}-{target}")
        if opts:
            digest = hashlib.sha1(repr(opts).encode()).hexdigest()[:6]
            kid = _safe(f"{key}-{target}-{digest}")
        if kid in self.kernels:
            return kid
        src = make()
        k = tileopt.compile(src, target=target, **opts)
        self._write_kernel(kid, key, k, opts)
        return kid

    def add_kernel(self, key: str, k: Any, note: str = "") -> str:
        kid = _safe(f"{key}-{k.metadata.target}")
        if kid not in self.kernels:
            self._write_kernel(kid, key, k, {"note": note} if note else {})
        return kid

    def _write_kernel(self, kid: str, key: str, k: Any, opts: dict[str, Any]) -> None:
        md = k.metadata
        d = self.out / "kernels" / kid
        d.mkdir(parents=True, exist_ok=True)
        ptx = str(k.asm["ptx"])
        (d / "kernel.ptx").write_text(ptx)
        cubin = k.asm.get("cubin")
        if isinstance(cubin, bytes):
            (d / "kernel.cubin").write_bytes(cubin)
        version = next((ln.split()[1] for ln in ptx.splitlines() if ln.startswith(".version")),
                       "?")
        meta = {
            "kid": kid, "key": key, "name": md.name, "target": md.target,
            "num_warps": md.num_warps, "block": list(md.block),
            "shared_bytes": md.shared_bytes, "abi": [str(p) for p in md.abi],
            "dynamic_shared_bytes": md.dynamic_shared_bytes,
            "tensor_maps": [dataclasses.asdict(m) for m in md.tensor_maps],
            "registers": md.registers, "spill_bytes": md.spill_bytes,
            "assembler": md.assembler, "has_cubin": isinstance(cubin, bytes),
            "ptx_version": version, "options": {k: repr(v) for k, v in opts.items()},
            "uses": sorted({w for w in ("wgmma", "mma.sync", "ldmatrix", "cp.async", "shfl",
                                        "bar.sync", "cp.async.bulk.tensor", "mbarrier")
                            if w in ptx}),
        }
        (d / "meta.json").write_text(json.dumps(meta, indent=1))
        self.kernels[kid] = k
        self.kernel_meta[kid] = meta

    # -- cases ----------------------------------------------------------------------------

    def case(self, cid: str, kid: str, grid: Any, args: list[Any], outputs: dict[int, Ref],
             note: str = "") -> None:
        """Records one launch of kernel ``kid`` over ``grid`` with ``args`` (CPU tensors in
        their real layout, or numbers); ``outputs``: argument index -> Ref."""
        cid = _safe(cid)
        if not self.wanted(cid):
            return
        assert cid not in {c["id"] for c in self.cases}, cid
        k = self.kernels[kid]
        abi = k.metadata.abi
        grid = tuple(int(g) for g in (grid if isinstance(grid, tuple | list) else (grid,)))
        grid = (*grid, *(1,) * (3 - len(grid)))
        views = [guarded(a) if p.kind == "view" else None for p, a in zip(abi, args, strict=True)]
        launch_args = [v if v is not None else a for v, a in zip(views, args, strict=True)]
        bases = [None if v is None else _base(v).clone() for v in views]

        # The emulator on the very same layout (its own copies).
        emu_views = [None if v is None else
                     b.clone().as_strided(v.shape, v.stride(), v.storage_offset())
                     for v, b in zip(views, bases, strict=True)]
        emu_args = [e if e is not None else a for e, a in zip(emu_views, args, strict=True)]
        t0 = time.perf_counter()
        emu_error = None
        try:
            k.launch(grid, *emu_args, device="emulator")
        except Exception as e:  # noqa: BLE001 - recorded, the GPU run still happens
            emu_error = f"{type(e).__name__}: {e}"
        emu_seconds = time.perf_counter() - t0

        out_data: dict[int, dict[str, Any]] = {}
        emu_ok = emu_error is None
        for i, ref in outputs.items():
            v = views[i]
            assert v is not None, f"{cid}: output {i} is not a view"
            region = ref.region(v) if ref.region is not None else v
            assert region.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
            assert tuple(region.shape) == tuple(ref.expected.shape), (
                cid, i, tuple(region.shape), tuple(ref.expected.shape))
            out_data[i] = {
                "region": _geometry(region),
                "expected": ref.expected,
                "atol": ref.atol,
                "rtol": ref.rtol,
                "exact": ref.exact,
                "emulator": None,
            }
            if emu_error is None:
                er = _base(emu_views[i]).as_strided(region.shape, region.stride(),
                                                     region.storage_offset())
                out_data[i]["emulator"] = er.contiguous().clone()
                emu_ok = emu_ok and check(er, ref.expected, ref.atol, ref.rtol, ref.exact)[0]
        data = {
            "bases": bases,
            "geometry": [None if v is None else _geometry(v) for v in views],
            "scalars": [None if v is not None else a for v, a in zip(views, args, strict=True)],
            "outputs": out_data,
        }
        (self.out / "cases").mkdir(parents=True, exist_ok=True)
        torch.save(data, self.out / "cases" / f"{cid}.pt")
        del launch_args
        self.cases.append({
            "id": cid, "kernel": kid, "target": k.metadata.target, "grid": list(grid),
            "outputs": sorted(outputs), "note": note, "emulator_error": emu_error,
            "emulator_matches_reference": emu_ok, "emulator_seconds": round(emu_seconds, 3),
        })
        status = "ok" if emu_ok else f"EMULATOR MISMATCH {emu_error or ''}"
        print(f"  {cid:60s} {k.metadata.target:7s} emu {emu_seconds:6.2f}s {status}",
              flush=True)

    def benchmark(self, bid: str, kid: str, grid: Any, args: list[dict[str, Any]],
                  outputs: list[int], op: str, **info: Any) -> None:
        """A large case whose inputs run.py makes on the GPU (``args``: ``{"randn": shape,
        "dtype": ..., "scale": ...}``, ``{"empty": shape, "dtype": ...}`` or ``{"scalar": v}``),
        checked against and timed beside torch op ``op`` (run.py's BENCH_OPS)."""
        bid = _safe(bid)
        if not self.wanted(bid):
            return
        grid = tuple(int(g) for g in grid)
        self.bench.append({"id": bid, "kernel": kid, "target": self.kernels[kid].metadata.target,
                           "grid": [*grid, *(1,) * (3 - len(grid))], "args": args,
                           "outputs": outputs, "op": op, **info})


# ---------------------------------------------------------------------------------------------
# the cases


def reference_kernels(c: Collector) -> None:
    """test_kernels.py: every reference kernel of tileopt.kernels on sm_80 and sm_90."""
    for target in TARGETS:
        for dtype in ("f32", "f16", "bf16"):
            td = TORCH_DTYPES[dtype]
            kid = c.kernel(f"vector_add_{dtype}", lambda d=dtype: kernels.vector_add(dtype=d),
                           target)
            for n in (1, 1000, 4097):
                x, y = torch.randn(n, dtype=td), torch.randn(n, dtype=td)
                out = torch.full_like(x, float("nan"))
                c.case(f"vector_add_{dtype}-n{n}-{target}", kid, kernels.vector_add_grid(n),
                       [x, y, out], {2: exact(x + y)})
        for dtype in ("f32", "f16", "bf16"):
            td = TORCH_DTYPES[dtype]
            kid = c.kernel(f"bias_gelu_{dtype}", lambda d=dtype: kernels.bias_gelu(dtype=d),
                           target)
            for shape in ((33, 70), (64, 256), (5, 1000)):
                x = (torch.randn(shape) * 3).to(td)
                bias = torch.randn(shape[1]).to(td)
                out = torch.full_like(x, float("nan"))
                ref = F.gelu(x.double() + bias.double())
                c.case(f"bias_gelu_{dtype}-{shape[0]}x{shape[1]}-{target}", kid,
                       kernels.bias_gelu_grid(shape), [x, bias, out],
                       {2: close(ref, 1e-6, ROUND[dtype] + 8 * EPS32)})
        kid = c.kernel("softmax", kernels.softmax, target)
        for shape in ((7, 1000), (3, 1024), (4, 37), (1, 1)):
            x = torch.randn(shape) * 4
            y = torch.full_like(x, float("nan"))
            c.case(f"softmax-{shape[0]}x{shape[1]}-{target}", kid, kernels.softmax_grid(shape),
                   [x, y], {1: close(torch.softmax(x.double(), 1), 1e-7, 1e-5)})
        # A column slice: unit inner stride, row stride 48 (test_contiguous_views_...).
        xs = torch.randn(64, 48)
        y = torch.full((64, 24), float("nan"))
        c.case(f"softmax-slice64x24of48-{target}", kid, kernels.softmax_grid(y.shape),
               [xs[:, 10:34], y], {1: close(torch.softmax(xs[:, 10:34].double(), 1), 1e-7, 1e-5)})
        for block, shape in ((256, (5, 1000)), (256, (3, 4097)), (256, (4, 70)), (256, (2, 256)),
                             (256, (2, 1)), (1024, (3, 4097)), (1024, (2, 1000))):
            kid = c.kernel(f"softmax_online_b{block}",
                           lambda b=block: kernels.softmax_online(block=b), target)
            x = torch.randn(shape) * 8 + torch.linspace(-20, 20, shape[1])
            y = torch.full_like(x, float("nan"))
            c.case(f"softmax_online_b{block}-{shape[0]}x{shape[1]}-{target}", kid,
                   kernels.softmax_grid(shape), [x, y],
                   {1: close(torch.softmax(x.double(), 1), 1e-7, 2e-5)})
        kid = c.kernel("layer_norm", kernels.layer_norm, target)
        for shape in ((37, 1000), (5, 70), (16, 1024), (1, 1), (48, 1001)):
            x = torch.randn(shape) * 2 + 1
            w, b = torch.randn(shape[1]), torch.randn(shape[1])
            y = torch.full_like(x, float("nan"))
            ref = F.layer_norm(x.double(), shape[1:], w.double(), b.double(), 1e-5)
            c.case(f"layer_norm-{shape[0]}x{shape[1]}-{target}", kid,
                   kernels.layer_norm_grid(shape), [x, w, b, y, 1e-5],
                   {3: close(ref, 2e-5, 1e-5)})
        kid = c.kernel("row_sum", kernels.row_sum, target)
        for shape in ((33, 700), (1, 4097), (64, 64), (5, 1)):
            x = torch.randn(shape)
            out = torch.full((shape[0],), float("nan"))
            c.case(f"row_sum-{shape[0]}x{shape[1]}-{target}", kid, kernels.row_sum_grid(shape),
                   [x, out], {1: close(x.double().sum(1), sum_bound(x, 1, 256))})
        kid = c.kernel("col_sum", kernels.col_sum, target)
        for shape in ((33, 700), (4097, 3), (64, 128), (1, 5)):
            x = torch.randn(shape)
            out = torch.full((shape[1],), float("nan"))
            c.case(f"col_sum-{shape[0]}x{shape[1]}-{target}", kid, kernels.col_sum_grid(shape),
                   [x, out], {1: close(x.double().sum(0), sum_bound(x, 0, 32))})
        kid = c.kernel("argmax", kernels.argmax, target)
        for shape in ((33, 700), (5, 1024), (16, 1), (3, 70)):
            x = torch.randint(-4, 5, shape).float()
            x[0] = -float("inf")
            out = torch.full((shape[0],), -1, dtype=torch.int32)
            c.case(f"argmax-{shape[0]}x{shape[1]}-{target}", kid, kernels.argmax_grid(shape),
                   [x, out], {1: exact(x.argmax(dim=1).int())})
        for dtype in ("f32", "f16"):
            kid = c.kernel(f"transpose_{dtype}", lambda d=dtype: kernels.transpose(d), target)
            for shape in ((33, 70), (64, 128), (1, 100), (100, 1)):
                x = torch.randn(shape).to(TORCH_DTYPES[dtype])
                y = torch.zeros(shape[::-1], dtype=x.dtype)
                c.case(f"transpose_{dtype}-{shape[0]}x{shape[1]}-{target}", kid,
                       kernels.transpose_grid(shape), [x, y], {1: exact(x.t())})
        for dtype in ("f32", "f16", "bf16"):
            kid = c.kernel(f"matmul_{dtype}", lambda d=dtype: kernels.matmul(d), target)
            td = TORCH_DTYPES[dtype]
            for m, kk, n in ((70, 100, 90), (64, 64, 64), (33, 17, 129), (1, 300, 1)):
                a, b = torch.randn(m, kk).to(td), torch.randn(kk, n).to(td)
                cc = torch.full((m, n), float("nan"))
                c.case(f"matmul_{dtype}-{m}x{kk}x{n}-{target}", kid,
                       kernels.matmul_grid(a.shape, b.shape), [a, b, cc],
                       {2: close(a.double() @ b.double(), matmul_bound(a, b))})
        kid = c.kernel("matmul_bias_relu_f16",
                       lambda: kernels.matmul("f16", epilogue="bias_relu"), target)
        for m, kk, n in ((70, 100, 90), (33, 17, 129)):
            a, b = torch.randn(m, kk).half(), torch.randn(kk, n).half()
            bias = torch.randn(n)
            cc = torch.full((m, n), float("nan"))
            ref = torch.relu(a.float() @ b.float() + bias)
            c.case(f"matmul_bias_relu_f16-{m}x{kk}x{n}-{target}", kid,
                   kernels.matmul_grid(a.shape, b.shape), [a, b, bias, cc],
                   {3: close(ref, 2 * matmul_bound(a, b) + EPS32 * bias.abs())})
        for dtype in ("f16", "bf16"):
            kid = c.kernel(f"batched_matmul_{dtype}",
                           lambda d=dtype: kernels.batched_matmul(d), target)
            td = TORCH_DTYPES[dtype]
            for batch, m, kk, n in ((3, 70, 100, 90), (2, 64, 32, 64), (4, 1, 40, 9)):
                a, b = torch.randn(batch, m, kk).to(td), torch.randn(batch, kk, n).to(td)
                cc = torch.full((batch, m, n), float("nan"))
                c.case(f"batched_matmul_{dtype}-{batch}x{m}x{kk}x{n}-{target}", kid,
                       kernels.batched_matmul_grid(a.shape, b.shape), [a, b, cc],
                       {2: close(a.float() @ b.float(), 2 * matmul_bound(a, b))})


PROMISES = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}


def matmul_cases(c: Collector, kid: str, tag: str, dtype: str, bm: int, bn: int,
                 shapes: list[tuple[int, int, int]]) -> None:
    """Cases ``<tag>-MxKxN`` of a kernels.matmul kernel (``bm x bn`` tiles, f32 result)."""
    td = TORCH_DTYPES[dtype]
    for m, kk, n in shapes:
        a, b = torch.randn(m, kk).to(td), torch.randn(kk, n).to(td)
        cc = torch.full((m, n), float("nan"))
        c.case(f"{tag}-{m}x{kk}x{n}", kid, kernels.matmul_grid(a.shape, b.shape, bm, bn),
               [a, b, cc], {2: close(a.double() @ b.double(), matmul_bound(a, b))})


def wgmma_kernels(c: Collector) -> None:
    """test_wgmma.py: sm_90a matmuls on wgmma (plain and with promises: cp.async)."""
    blocks_list = [({}, "64x64x32"), ({"block_m": 128, "block_n": 32, "block_k": 64}, "128x32x64"),
                   ({"block_m": 64, "block_n": 16, "block_k": 128}, "64x16x128"),
                   ({"block_m": 128, "block_n": 64, "block_k": 16, "num_warps": 8},
                    "128x64x16w8")]
    for dtype in ("f16", "bf16"):
        for blocks, bname in blocks_list:
            for promises in (False, True):
                b2 = dict(blocks)
                nw = b2.pop("num_warps", 4)
                opts = PROMISES if promises else {}
                tag = "promised" if promises else "plain"
                kid = c.kernel(f"wgmma_matmul_{dtype}_{bname}_{tag}",
                               lambda d=dtype, bb=b2: kernels.matmul(d, **bb), "sm_90a",
                               num_warps=nw, **opts)
                shapes = [(96, 160, 80), (64, 64, 64)] if promises else [(70, 100, 90),
                                                                          (33, 17, 129)]
                matmul_cases(c, kid, f"wgmma_{dtype}_{bname}_{tag}", dtype,
                             blocks.get("block_m", 64), blocks.get("block_n", 64), shapes)
    kid = c.kernel("wgmma_matmul_bias_relu_f16",
                   lambda: kernels.matmul("f16", epilogue="bias_relu"), "sm_90a")
    a, b = torch.randn(70, 100).half(), torch.randn(100, 90).half()
    bias = torch.randn(90)
    cc = torch.full((70, 90), float("nan"))
    c.case("wgmma_bias_relu_f16-70x100x90", kid, kernels.matmul_grid(a.shape, b.shape),
           [a, b, bias, cc],
           {3: close(torch.relu(a.float() @ b.float() + bias),
                     2 * matmul_bound(a, b) + EPS32 * bias.abs())})
    kid = c.kernel("wgmma_batched_matmul_bf16", lambda: kernels.batched_matmul("bf16"), "sm_90a")
    a, b = torch.randn(3, 70, 100).bfloat16(), torch.randn(3, 100, 90).bfloat16()
    cc = torch.full((3, 70, 90), float("nan"))
    c.case("wgmma_batched_bf16-3x70x100x90", kid, kernels.batched_matmul_grid(a.shape, b.shape),
           [a, b, cc], {2: close(a.double() @ b.double(), matmul_bound(a, b))})
    # Plain sm_90 keeps mma.sync; the same shapes through the cubin for sm_90.
    for dtype in ("f16", "bf16"):
        kid = c.kernel(f"matmul_{dtype}_promised", lambda d=dtype: kernels.matmul(d), "sm_90",
                       **PROMISES)
        a, b = torch.randn(96, 160).to(TORCH_DTYPES[dtype]), torch.randn(160, 80).to(
            TORCH_DTYPES[dtype])
        cc = torch.full((96, 80), float("nan"))
        c.case(f"matmul_{dtype}_promised-96x160x80-sm_90", kid,
               kernels.matmul_grid(a.shape, b.shape), [a, b, cc],
               {2: close(a.double() @ b.double(), matmul_bound(a, b))})


def edge_kernels(c: Collector) -> None:
    """test_edge_kernels.py: rank-0 tiles and views, i1, negative offsets, casts to bool."""
    for target in TARGETS:
        kid = c.kernel("total_rank0", edge.total_kernel, target)
        for n in (1, 37, 1000):
            x = torch.randn(n)
            s, v = torch.zeros(()), torch.zeros(1)
            tol = 1e-5 + 1e-5 * abs(x.sum().item())
            c.case(f"total_rank0-n{n}-{target}", kid, 1, [x, s, v],
                   {1: close(x.double().sum(), tol), 2: close(x.double().sum().reshape(1), tol)})
        for nw in (1, 4, 8):
            kid = c.kernel(f"rowmax_rank0_w{nw}", lambda: edge.RANK0_REDUCE, target, num_warps=nw)
            x = torch.randn(300)
            c.case(f"rowmax_rank0_w{nw}-n300-{target}", kid, 1, [x, torch.zeros(1)],
                   {1: exact(x.max().reshape(1))})
        kid = c.kernel("scale_rank0", edge.rank0_scale_kernel, target, num_warps=2)
        c.case(f"scale_rank0-{target}", kid, 1, [torch.tensor(1.25), torch.zeros(())],
               {1: exact(torch.tensor(3.75))})
        kid = c.kernel("i1_flags", lambda: edge.I1_COPY, target, num_warps=1)
        x = torch.rand(45) > 0.5
        c.case(f"i1_flags-n45-{target}", kid, 45, [x, torch.zeros(45, dtype=torch.bool), 45],
               {1: exact(~x)})
        for offset in (-1, -2, -5, -33):
            kid = c.kernel(f"shift_m{-offset}", lambda o=offset: edge.shift_kernel(o), target)
            x = torch.randn(20, 70)
            c.case(f"negative_offset_m{-offset}-20x70-{target}", kid, 1,
                   [x, torch.zeros(20, 70)], {1: exact(edge.shift_expected(x, offset))})
        kid = c.kernel("float_to_bool", lambda: edge.TO_BOOL, target, num_warps=1)
        x = torch.tensor([0.0, 0.5, 1.0, 1.5, 0.25, 1.75] * 10)
        c.case(f"float_to_bool-n60-{target}", kid, 1, [x, torch.zeros(60, dtype=torch.bool)],
               {1: exact(x.trunc().bool())})
        kid = c.kernel("where_rank0", edge.sign_kernel, target, num_warps=1)
        for value in (-1.5, 2.0):
            c.case(f"where_rank0-{value}-{target}", kid, 1, [torch.tensor(value), torch.zeros(())],
                   {1: exact(torch.tensor(1.0 if value > 0 else -1.0))})
    # Layouts made for 8 warps, compiled from the tilegpu stage (test_layouts_for_more_...).
    tilegpu = tileopt.compile(edge.copy_kernel(), num_warps=8).asm["tilegpu"]
    kid = c.add_kernel("copy_from_tilegpu_w8", tileopt.compile(tilegpu, start="tilegpu"))
    x = torch.arange(1000, dtype=torch.float32)
    c.case("copy_from_tilegpu_w8-n1000-sm_90", kid, 1, [x, torch.zeros(1000)], {1: exact(x)})


def promise_kernels(c: Collector) -> None:
    """test_promises.py: aligned=, divisible_sizes=, int32_indexing=, same_shapes=."""
    kid = c.kernel("vector_add_aligned", lambda: kernels.vector_add("f32", 1024), "sm_90",
                   aligned=True)
    for n in (1024, 5000, 4097):
        x, y = torch.randn(n), torch.randn(n)
        c.case(f"vector_add_aligned-n{n}-sm_90", kid, (-(-n // 1024),), [x, y, torch.empty(n)],
               {2: exact(x + y)})
    kid = c.kernel("vector_add_divisible", lambda: kernels.vector_add("f32", 1024), "sm_90",
                   aligned=True, divisible_sizes=True)
    for n in (16, 1024, 4112, 5008):
        x, y = torch.randn(n), torch.randn(n)
        out = torch.full((n + 64,), 7.0)
        c.case(f"vector_add_divisible-n{n}-sm_90", kid, (-(-n // 1024),), [x, y, out[:n]],
               {2: exact(x + y)}, note="out[n:] must stay 7.0 (checked as untouched storage)")
    for dtype in ("f32", "f16"):
        kid = c.kernel(f"bias_gelu_{dtype}_divisible_16x128",
                       lambda d=dtype: kernels.bias_gelu(d, block_m=16, block_n=128), "sm_80",
                       divisible_sizes=True)
        td = TORCH_DTYPES[dtype]
        for shift in (0, 1):
            m, n = 21, 784
            base = torch.randn(m * n + shift).to(td)
            x = base[shift:].view(m, n)
            bias = torch.randn(n).to(td)
            out = torch.full((m, n + 16), 7.0, dtype=td)
            tol = 1e-5 if dtype == "f32" else 2e-3
            expect = F.gelu(x.float() + bias.float())
            c.case(f"bias_gelu_{dtype}_divisible-shift{shift}-21x784-sm_80", kid,
                   kernels.bias_gelu_grid((m, n), 16, 128), [x, bias, out[:, :n]],
                   {2: close(expect, tol, tol)})
    kid = c.kernel("vector_add_int32", lambda: kernels.vector_add("f32", 1024), "sm_90",
                   aligned=True, int32_indexing=True)
    for n in (1, 1000, 5000):
        x, y = torch.randn(n), torch.randn(n)
        c.case(f"vector_add_int32-n{n}-sm_90", kid, (-(-n // 1024),), [x, y, torch.empty(n)],
               {2: exact(x + y)})
    for target in TARGETS:
        m, n = 48, 784
        x = torch.randn(m, n)
        w, b = torch.randn(n), torch.randn(n)
        kid = c.kernel("layer_norm_all_promises", kernels.layer_norm, target, **PROMISES,
                       same_shapes=[("x", "y"), ("weight", "bias")])
        c.case(f"layer_norm_all_promises-48x784-{target}", kid, kernels.layer_norm_grid((m, n)),
               [x, w, b, torch.zeros(m, n), 1e-5],
               {3: close(F.layer_norm(x, (n,), w, b, 1e-5), 2e-5, 1e-5)})
        kid = c.kernel("softmax_all_promises", kernels.softmax, target, **PROMISES,
                       same_shapes=[("x", "y")])
        c.case(f"softmax_all_promises-48x784-{target}", kid, kernels.softmax_grid((m, n)),
               [x, torch.zeros(m, n)], {1: close(torch.softmax(x, dim=1), 1e-7, 1e-5)})
        kid = c.kernel("col_sum_all_promises", kernels.col_sum, target, **PROMISES)
        c.case(f"col_sum_all_promises-48x784-{target}", kid, kernels.col_sum_grid((m, n)),
               [x, torch.zeros(n)], {1: close(x.sum(0), 1e-4, 1e-5)})
        a, bb = torch.randn(64, 96).half(), torch.randn(96, 80).half()
        kid = c.kernel("matmul_f16_all_promises", lambda: kernels.matmul("f16"), target,
                       **PROMISES)
        c.case(f"matmul_f16_all_promises-64x96x80-{target}", kid,
               kernels.matmul_grid((64, 96), (96, 80)), [a, bb, torch.zeros(64, 80)],
               {2: close(a.float() @ bb.float(), 1e-2, 1e-3)})
    for bound in (96, 98, 97, "n"):
        for divisible in (False, True):
            tag = f"masks_{bound}_{'div' if divisible else 'plain'}"
            kid = c.kernel(tag, lambda bd=bound: prom.masks_kernel(bd), "sm_80",
                           num_warps=1, divisible_sizes=divisible)
            nn = 160
            x = torch.arange(nn, dtype=torch.float32)
            limit = nn if bound == "n" else bound
            exp = torch.where(torch.arange(nn) < limit, x, torch.tensor(99.0))
            c.case(f"{tag}-n160-sm_80", kid, (2,), [x, torch.zeros(nn)], {1: exact(exp)})
    kid = c.kernel("vector_add_same_shapes", lambda: kernels.vector_add("f32", 1024), "sm_90",
                   **PROMISES, same_shapes=[("x", "y", "out")])
    for n in (16, 4096, 5008):
        x, y, out = torch.randn(n), torch.randn(n), torch.full((n + 32,), 7.0)
        c.case(f"vector_add_same_shapes-n{n}-sm_90", kid, (-(-n // 1024),), [x, y, out[:n]],
               {2: exact(x + y)})
    kid = c.kernel("layer_norm_int32_b256", lambda: kernels.layer_norm(256, 16), "sm_90",
                   int32_indexing=True)
    m, n = 37, 200
    x, w, b = torch.randn(m, n), torch.randn(n), torch.randn(n)
    y = torch.full((m + 5, n), 7.0)
    c.case("layer_norm_int32_extra_programs-37x200-sm_90", kid,
           (kernels.layer_norm_grid((m, n))[0] + 3,), [x, w, b, y[:m], 1e-5],
           {3: close(F.layer_norm(x, (n,), w, b, 1e-5), 2e-5, 1e-5)})


def random_kernels(c: Collector) -> None:
    """test_random_kernels.py: the seeded random tile and dot kernels."""
    for i, case in enumerate(rnd.tile_cases(seed=7, count=24)):
        torch.manual_seed(0)
        (bm, bn), (rows, cols) = case.block, case.shape
        if bm * bn > 255 * 32 * case.warps:
            continue  # a compile-time diagnostic, nothing to run
        kid = c.kernel(f"rand_tile{i}_{case.op}_{case.dtype}_{bm}x{bn}_w{case.warps}",
                       lambda cs=case: rnd.build(cs), case.target, num_warps=case.warps,
                       int32_indexing=case.int32)
        x = rnd.random_tensor(case.dtype, rows, cols)
        v = rnd.random_tensor(case.dtype, max(rows, cols))
        y = torch.zeros((cols, rows) if case.op == "transpose" else (rows, cols), dtype=x.dtype)
        r = torch.zeros(max(rows, cols), dtype=x.dtype)
        grid = {"row_sum": (-(-rows // bm), 1), "row_max": (-(-rows // bm), 1),
                "col_sum": (1, -(-cols // bn))}.get(case.op, (-(-rows // bm), -(-cols // bn)))
        xd = x.double()
        padded = torch.zeros(max(rows, bm), max(cols, bn), dtype=torch.float64)
        padded[:rows, :cols] = xd
        if case.op in ("row_sum", "col_sum", "row_max"):
            expected, index, count = {
                "row_sum": (padded[:rows, :bn].sum(1), 3, rows),
                "col_sum": (padded[:bm, :cols].sum(0), 3, cols),
                "row_max": (padded[:rows, :bn].max(1).values, 3, rows),
            }[case.op]
            def region(t: torch.Tensor, n: int = count) -> torch.Tensor:
                return t[:n]
        else:
            index, region = 2, None
            if case.op == "row_bias":
                expected = xd + v[:cols].double()[None, :]
            elif case.op == "col_scale":
                expected = xd * v[:rows].double()[:, None]
            elif case.op == "transpose":
                expected = xd.T
            else:
                expected = xd * 3
        scale = max(1.0, expected.abs().max().item())
        tol = {"i32": 0.0, "f32": 1e-5, "f16": 1e-2}[case.dtype] * scale * max(bm, bn) ** 0.5
        c.case(f"rand_tile{i}_{case.op}_{case.dtype}_{bm}x{bn}_w{case.warps}-{rows}x{cols}-"
               f"{case.target}", kid, grid, [x, v, y, r], {index: close(expected, tol,
                                                                        region=region)},
               note=str(case))
    for i, case in enumerate(rnd.dot_cases(seed=11, count=12)):
        torch.manual_seed(0)
        (bm, bn, bk), (m, n, k_size) = case.block, case.shape
        tag = (f"rand_dot{i}_{case.dtype}_{bm}x{bn}x{bk}_w{case.warps}"
               f"{'_bT' if case.trans_b else ''}")
        kid = c.kernel(tag, lambda cs=case: rnd.build_dot(cs), case.target,
                       num_warps=case.warps, int32_indexing=case.int32)
        a = torch.randn(m, k_size).to(rnd.TORCH[case.dtype])
        b = torch.randn(*((n, k_size) if case.trans_b else (k_size, n))).to(rnd.TORCH[case.dtype])
        expected = a.double() @ (b.double().T if case.trans_b else b.double())
        tol = 1e-5 * max(1, k_size) ** 0.5 * max(1.0, expected.abs().max().item())
        c.case(f"{tag}-{m}x{k_size}x{n}-{case.target}", kid, (-(-m // bm), -(-n // bn)),
               [a, b, torch.zeros(m, n)], {2: close(expected, tol)}, note=str(case))


def handwritten_kernels(c: Collector) -> None:
    """test/python/compiler/kernels: kernels written in the GPU/LLVM dialects (start="llvm")."""
    cat = _catalog()
    for target in TARGETS:
        def comp(name: str, src: str | None = None, sig: Any = None, target: str = target) -> Any:
            return tileopt.compile(src or cat.source(name), target, start="llvm",
                                   signature=sig or cat.signature(name))
        kid = c.add_kernel("hw_vector_add", comp("vector_add"))
        for n in (1, 1000, 4099):
            x, y = torch.randn(n), torch.randn(n)
            c.case(f"hw_vector_add-n{n}-{target}", kid, (n + 127) // 128,
                   [x, y, torch.empty(n)], {2: exact(x + y)})
        kid = c.add_kernel("hw_scale", comp("scale"))
        x = torch.randn(40, 70).t()[::2]  # (35, 40), strides (2, 70)
        y = torch.zeros(50, 40)[5:40]
        c.case(f"hw_scale-noncontiguous35x40-{target}", kid, (35 * 40 + 127) // 128,
               [x, y, 3.0], {1: exact(3.0 * x)})
        kid = c.add_kernel("hw_exp_scale", comp("exp_scale"))
        for n in (100, 1025):
            x = torch.linspace(-10, 10, n)
            c.case(f"hw_exp_scale-n{n}-{target}", kid, (n + 127) // 128,
                   [x, torch.empty(n), 0.5], {1: close(0.5 * torch.exp(x.double()), 0.0, 2e-6)})
        from tileopt.runtime.abi import KernelParam
        for dtype in ("f16", "bf16"):
            src = cat.source("scale_half").replace("f16", dtype)
            sig = [KernelParam.view("x", dtype, 1), KernelParam.view("y", dtype, 1),
                   KernelParam.scalar("alpha", dtype)]
            kid = c.add_kernel(f"hw_scale_half_{dtype}", comp("scale_half", src, sig))
            td = TORCH_DTYPES[dtype]
            for n in (3, 1000):
                x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(td)
                alpha = torch.tensor(1.3, dtype=td)
                c.case(f"hw_scale_half_{dtype}-n{n}-{target}", kid, (n + 127) // 128,
                       [x, torch.zeros(n, dtype=td), 1.3], {1: exact(x * alpha)})


def pipelined_kernels(c: Collector) -> None:
    """test_pipelining.py, test_tma.py, test_mma_types.py, test_mma_reductions.py: multi-stage
    cp.async and TMA matmuls (large tiles in dynamic shared memory), pipelined batched
    matmuls and attention, f16-accumulator and tf32 dots, reductions in mma layouts."""
    odd = [(200, 304, 144), (70, 16, 48), (64, 96, 64), (130, 80, 208)]
    for target in ("sm_80", "sm_90a"):
        for stages in (1, 2, 3, 4):
            kid = c.kernel(f"pipe_matmul_f16_64x64x32_s{stages}",
                           lambda: kernels.matmul("f16", block_m=64, block_n=64, block_k=32),
                           target, num_warps=4, num_stages=stages, tma=False, **PROMISES)
            matmul_cases(c, kid, f"pipe_f16_64x64x32_s{stages}_{target}", "f16", 64, 64, odd)
    large = [("sm_80", 128, 128, 4, 3), ("sm_80", 128, 128, 8, 4), ("sm_80", 128, 256, 8, 3),
             ("sm_90a", 128, 128, 4, 4), ("sm_90a", 128, 128, 8, 3), ("sm_90a", 128, 256, 8, 4)]
    for target, bm, bn, warps, stages in large:
        for tma in (False, True) if target == "sm_90a" else (False,):
            name = f"{bm}x{bn}x64_w{warps}_s{stages}_{'tma' if tma else 'cpasync'}"
            kid = c.kernel(f"pipe_matmul_f16_{name}",
                           lambda bm=bm, bn=bn: kernels.matmul("f16", block_m=bm, block_n=bn,
                                                               block_k=64),
                           target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
            matmul_cases(c, kid, f"pipe_f16_{name}_{target}", "f16", bm, bn,
                         [(200, 304, 272), (130, 1008, 144)])
    for dtype in ("f16", "bf16"):
        for stages in (1, 2, 3, 4):
            kid = c.kernel(f"tma_matmul_{dtype}_64x64x32_s{stages}",
                           lambda d=dtype: kernels.matmul(d, block_m=64, block_n=64, block_k=32),
                           "sm_90a", num_warps=4, num_stages=stages, **PROMISES)
            matmul_cases(c, kid, f"tma_{dtype}_64x64x32_s{stages}", dtype, 64, 64, odd)
    # TMA needs no size promise: boxes clip at the view's edges.
    kid = c.kernel("tma_matmul_f16_64x64x32_s3_nodiv",
                   lambda: kernels.matmul("f16", block_m=64, block_n=64, block_k=32), "sm_90a",
                   num_warps=4, num_stages=3, aligned=True, int32_indexing=True)
    matmul_cases(c, kid, "tma_f16_64x64x32_s3_nodiv", "f16", 64, 64, [(70, 40, 24), (33, 72, 136)])

    # On sm_90a also by 3-D TMA boxes (one matrix of the batch), where a batch stride larger
    # than a matrix (every other matrix) must not leak into the box.
    for target, tma in (("sm_80", False), ("sm_90a", False), ("sm_90a", True)):
        kid = c.kernel("pipe_batched_matmul_f16_s3",
                       lambda: kernels.batched_matmul("f16", block_m=64, block_n=64, block_k=32),
                       target, num_warps=4, num_stages=3, tma=tma, **PROMISES)
        tag = f"s3_{target}" + ("_tma" if tma else "")
        for batch, m, kk, n in [(3, 130, 96, 80), (1, 70, 160, 208)]:
            a = torch.randn(2 * batch, m, kk).half()[::2]
            b = torch.randn(batch, kk, n).half()
            cc = torch.full((batch, m, n), float("nan"))
            c.case(f"pipe_batched_f16_{tag}-{batch}x{m}x{kk}x{n}", kid,
                   kernels.batched_matmul_grid(a.shape, b.shape, 64, 64), [a, b, cc],
                   {2: close(a.double() @ b.double(), 2 * matmul_bound(a, b))})

    for target in ("sm_80", "sm_90a"):
        grouped = {**PROMISES, "divisible_sizes": {"q": (1, 1, 16), "k": (1, 16, 16),
                                                   "v": (1, 16, 16), "o": (1, 1, 16)}}
        for stages, promises, tag, overlap in (
                (1, PROMISES, "s1", False), (3, PROMISES, "s3", False),
                (3, grouped, "s3_grouped", False), (2, PROMISES, "s2_overlap", True)):
            kid = c.kernel(f"attention_f16_64x64_{tag}",
                           lambda overlap=overlap: kernels.attention(
                               "f16", head_dim=64, block_m=64, block_n=64, overlap=overlap),
                           target, num_warps=4, num_stages=stages, **promises)
            shapes = [(2, 70, 80), (1, 64, 144)] if tag.endswith("grouped") else \
                [(2, 130, 96), (1, 64, 200)]
            for batch, m, n in shapes:
                q, k, v = (torch.randn(batch, rows, 64).half() for rows in (m, n, n))
                o = torch.full((batch, m, 64), float("nan")).half()
                want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                      scale=0.125)
                c.case(f"attention_f16_{tag}_{target}-{batch}x{m}x{n}", kid,
                       kernels.attention_grid(q.shape, 64), [q, k, v, o, 0.125],
                       {3: close(want, (4 * ROUND["f16"] + 1e-6) * want.abs().max(),
                                 4 * ROUND["f16"])})

    import test_mma_reductions as red
    import test_mma_types as types
    import test_tma

    # Two dots in one TMA pipeline: four maps, one mbarrier per slot for all four copies.
    kid = c.kernel("tma_two_dots_f16_s3", test_tma.two_dots_kernel, "sm_90a", num_stages=3,
                   **PROMISES)
    for m, kk, n in [(130, 96, 80), (64, 16, 64)]:
        a, b = torch.randn(m, kk).half(), torch.randn(kk, n).half()
        d, e = torch.randn(m, kk).half(), torch.randn(kk, n).half()
        cc = torch.full((m, n), float("nan"))
        c.case(f"tma_two_dots_f16_s3-{m}x{kk}x{n}", kid, kernels.matmul_grid(a.shape, b.shape),
               [a, b, d, e, cc],
               {4: close(a.double() @ b.double() + d.double() @ e.double(),
                         2 * (matmul_bound(a, b) + matmul_bound(d, e)))})

    eps16 = torch.finfo(torch.float16).eps
    for target, warps, (bm, bn, bk) in (("sm_80", 4, (64, 64, 32)), ("sm_90a", 4, (64, 64, 32)),
                                        ("sm_90a", 8, (64, 128, 64))):
        kid = c.kernel(f"f16acc_matmul_{bm}x{bn}x{bk}_w{warps}",
                       lambda bm=bm, bn=bn, bk=bk: types._matmul("f16", "f16", False, bm, bn, bk),
                       target, num_warps=warps, **PROMISES)
        for m, kk, n in types.PROMISED_SHAPES:
            a, b = torch.randn(m, kk).half(), torch.randn(kk, n).half()
            cc = torch.full((m, n), float("nan")).half()
            bound = (kk + 1) * (eps16 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
            c.case(f"f16acc_{bm}x{bn}x{bk}_w{warps}_{target}-{m}x{kk}x{n}", kid,
                   kernels.matmul_grid(a.shape, b.shape, bm, bn), [a, b, cc],
                   {2: close(a.double() @ b.double(), bound)})
    for target, warps, (bm, bn, bk) in (("sm_80", 4, (64, 64, 32)), ("sm_80", 8, (128, 64, 16)),
                                        ("sm_90a", 4, (64, 64, 32)),
                                        ("sm_90a", 8, (128, 64, 16)),
                                        ("sm_90a", 8, (64, 128, 32))):
        kid = c.kernel(f"tf32_matmul_{bm}x{bn}x{bk}_w{warps}",
                       lambda bm=bm, bn=bn, bk=bk: types._matmul("f32", "f32", True, bm, bn, bk),
                       target, num_warps=warps, **PROMISES)
        to_tf32 = types.tf32_truncate if target == "sm_90a" else types.tf32_round
        for m, kk, n in types.PROMISED_SHAPES:
            a, b = torch.randn(m, kk), torch.randn(kk, n)
            cc = torch.full((m, n), float("nan"))
            bound = (kk + 1) * (EPS32 / 2) * (a.double().abs() @ b.double().abs()) + 1e-30
            c.case(f"tf32_{bm}x{bn}x{bk}_w{warps}_{target}-{m}x{kk}x{n}", kid,
                   kernels.matmul_grid(a.shape, b.shape, bm, bn), [a, b, cc],
                   {2: close(to_tf32(a).double() @ to_tf32(b).double(), bound)})

    # tf32 x @ w.T (an f32 linear layer): the K-major weight comes by TMA (map dims (1, 0)).
    kid = c.kernel("tf32_linear_kmajor_s3",
                   lambda: types.linear_tf32_ir("memref<?x?xf32, strided<[1, ?], offset: ?>>"),
                   "sm_90a", num_stages=3)
    for m, kk, n in types.PROMISED_SHAPES + [(130, 208, 80)]:
        a, w = torch.randn(m, kk), torch.randn(n, kk)
        cc = torch.full((m, n), float("nan"))
        bound = (kk + 1) * (EPS32 / 2) * (a.double().abs() @ w.double().abs().t()) + 1e-30
        c.case(f"tf32_linear_kmajor_s3-{m}x{kk}x{n}", kid,
               kernels.matmul_grid((m, kk), (kk, n), 64, 64), [a, w.t(), cc],
               {2: close(types.tf32_truncate(a).double() @ types.tf32_truncate(w).double().t(),
                         bound)})

    for shape, warps, block_n, axis, op in red.CASES:
        tag = (f"mma_reduce_{shape[0]}x{shape[1]}_w{warps[0]}x{warps[1]}_n{block_n}_axis{axis}"
               f"_{op}")
        kid = c.kernel(tag, lambda s=shape, w=warps, n=block_n, a=axis, o=op:
                       red._kernel(s, w, n, a, o),
                       "sm_80", num_warps=warps[0] * warps[1], start="tilegpu")
        # Rows of 16-byte multiples (the view's divisibility), read in part.
        x = torch.randint(-50, 50, (shape[0], max(shape[1], 4))).float()[:, :shape[1]]
        y = torch.full((shape[1 - axis],), float("nan"))
        c.case(tag, kid, (1,), [x, y],
               {1: exact(red.COMBINE[op][1](x, dim=axis))})


def schedule_kernels(c: Collector) -> None:
    """test_warp_specialize.py, test_persistent.py, test_stream_k.py, test_pipelining.py:
    matmuls with a TMA producer warpgroup (mbarrier handshakes, setmaxnreg), persistent
    programs that loop over tiles, stream-K programs whose split tiles add into a ``c`` of
    zeros (red.global.add) or are summed by their last program (a workspace and atomic
    counts), and blocks of 192 (96) whose dots read each part's one copy;
    odd shapes, programs fewer than, as many as and more than the tiles or k steps."""
    import test_persistent as persistent
    import test_stream_k as stream_k

    for bm, bn, bk, warps, stages, dtype in (
            (64, 64, 32, 4, 2, "f16"), (64, 64, 32, 4, 3, "bf16"), (128, 128, 64, 4, 3, "f16"),
            (128, 128, 64, 8, 4, "f16"), (64, 128, 64, 8, 3, "f16"),
            (128, 256, 64, 8, 3, "f16")):
        name = f"{bm}x{bn}x{bk}_w{warps}_s{stages}_{dtype}"
        kid = c.kernel(f"ws_matmul_{name}",
                       lambda bm=bm, bn=bn, bk=bk, d=dtype: kernels.matmul(
                           d, block_m=bm, block_n=bn, block_k=bk),
                       "sm_90a", num_warps=warps, num_stages=stages, warp_specialize=True,
                       **PROMISES)
        matmul_cases(c, kid, f"ws_{name}", dtype, bm, bn,
                     [(200, 304, 144), (70, 16, 48), (bm + 3, 2 * bk + 16, bn + 16),
                      (70, 0, 48)])

    for target, bm, bn, bk, warps, stages, tma in (
            ("sm_90a", 192, 192, 64, 8, 3, True), ("sm_90a", 128, 192, 64, 8, 3, False),
            ("sm_90a", 128, 96, 64, 4, 4, True), ("sm_80", 96, 192, 32, 4, 3, False)):
        name = f"{bm}x{bn}x{bk}_w{warps}_s{stages}_{'tma' if tma else 'cpasync'}_{target}"
        kid = c.kernel(f"split_matmul_{name}",
                       lambda bm=bm, bn=bn, bk=bk: kernels.matmul(
                           "f16", block_m=bm, block_n=bn, block_k=bk),
                       target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
        matmul_cases(c, kid, f"split_{name}", "f16", bm, bn,
                     [(200, 304, 208), (bm + 3, 2 * bk + 16, bn + 16)])

    def label(target: str, warps: int, stages: int, tile: tuple[int, int, int],
              options: dict[str, Any]) -> str:
        flags = "".join(f"_{k}" for k, v in sorted(options.items()) if v)
        return f"{tile[0]}x{tile[1]}x{tile[2]}_w{warps}_s{stages}{flags}"

    # (kind, configurations, kernel, grid, shapes with programs, c's values before the launch:
    # stream-K's split tiles add their parts into zeros)
    schedules = [
        ("persistent", persistent.CONFIGS, kernels.persistent_matmul,
         lambda a, b, p, bm, bn, bk: kernels.persistent_matmul_grid(a.shape, b.shape, p, bm,
                                                                    bn),
         lambda bm, bn, bk: [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4), (200, 304, 144, 3),
                             (70, 0, 48, 2)], float("nan")),
        ("stream_k", stream_k.CONFIGS, kernels.stream_k_matmul,
         lambda a, b, p, bm, bn, bk: kernels.stream_k_matmul_grid(a.shape, b.shape, p, bm, bn,
                                                                  bk),
         lambda bm, bn, bk: [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4),
                             (5 * bm, 3 * bk + 16, 2 * bn - 16, 3), (70, 16, 48, 1),
                             (70, 0, 48, 2)], 0.0),
    ]
    for kind, configs, make, grid, shapes, start in schedules:
        for target, warps, stages, tile, options in configs:
            bm, bn, bk = tile
            name = label(target, warps, stages, tile, options)
            kid = c.kernel(f"{kind}_matmul_{name}", lambda make=make, t=tile: make("f16", *t),
                           target, num_warps=warps, num_stages=stages, **PROMISES,
                           **options)
            for m, kk, n, programs in shapes(bm, bn, bk):
                a, b = torch.randn(m, kk).half(), torch.randn(kk, n).half()
                cc = torch.full((m, n), start)
                c.case(f"{kind}_{name}_{target}-{m}x{kk}x{n}-p{programs}", kid,
                       grid(a, b, programs, bm, bn, bk), [a, b, cc],
                       {2: close(a.double() @ b.double(), matmul_bound(a, b))})

    # Stream-K with a workspace, f16 results: the last program of each split tile sums its
    # parts after an atomic count (its fences order the parts between SMs, which the
    # emulator, running programs together or one by one, cannot test); the counts end at
    # zero. Sixteen programs at once on the last shape.
    for target, warps, stages, tile, options in (
            ("sm_80", 4, 3, (64, 64, 32), {}), ("sm_90a", 4, 3, (64, 64, 32), {"tma": True}),
            ("sm_90a", 8, 4, (128, 128, 64), {"tma": True})):
        bm, bn, bk = tile
        name = label(target, warps, stages, tile, options)
        kid = c.kernel(f"stream_k_workspace_matmul_{name}",
                       lambda t=tile: kernels.stream_k_matmul("f16", *t, out_dtype="f16",
                                                              workspace=True),
                       target, num_warps=warps, num_stages=stages, **PROMISES, **options)
        for m, kk, n, programs in [(2 * bm + 3, 5 * bk + 16, 2 * bn + 16, 4),
                                   (200, 304, 144, 3), (256, 512, 192, 16)]:
            a, b = torch.randn(m, kk).half(), torch.randn(kk, n).half()
            grid = kernels.stream_k_matmul_grid(a.shape, b.shape, programs, bm, bn, bk)
            counts = torch.zeros(kernels.stream_k_counts_shape((m, n), bm, bn),
                                 dtype=torch.int32)
            want = a.double() @ b.double()
            c.case(f"stream_k_workspace_{name}_{target}-{m}x{kk}x{n}-p{programs}", kid, grid,
                   [a, b, torch.full((m, n), float("nan")).half(),
                    torch.full(kernels.stream_k_workspace_shape(grid[0], bm, bn),
                               float("nan")), counts],
                   {2: close(want, matmul_bound(a, b) + want.abs() * 2.0**-11),
                    4: exact(counts)})


def benchmarks(c: Collector) -> None:
    """Large shapes (inputs made on the GPU by run.py), checked and timed beside torch."""
    def f32(*shape: int, scale: float = 1.0) -> dict[str, Any]:
        return {"randn": list(shape), "dtype": "float32", "scale": scale}

    def empty(*shape: int, dtype: str = "float32") -> dict[str, Any]:
        return {"empty": list(shape), "dtype": dtype}

    n = 1 << 26
    kid = c.kernel("bench_vector_add", lambda: kernels.vector_add("f32"), "sm_90", **PROMISES,
                   same_shapes=[("x", "y", "out")])
    c.benchmark("vector_add-f32-64M-sm_90", kid, kernels.vector_add_grid(n),
                [f32(n), f32(n), empty(n)], [2], "vector_add", bytes=3 * 4 * n)
    m, nn = 8192, 8192
    kid = c.kernel("bench_bias_gelu", lambda: kernels.bias_gelu("f32"), "sm_90", **PROMISES)
    c.benchmark("bias_gelu-f32-8192x8192-sm_90", kid, kernels.bias_gelu_grid((m, nn)),
                [f32(m, nn, scale=3.0), f32(nn), empty(m, nn)], [2], "bias_gelu",
                bytes=(2 * m * nn + nn) * 4)
    m, nn = 16384, 1024
    kid = c.kernel("bench_softmax", kernels.softmax, "sm_90", **PROMISES, same_shapes=[("x", "y")])
    c.benchmark("softmax-16384x1024-sm_90", kid, kernels.softmax_grid((m, nn)),
                [f32(m, nn, scale=4.0), empty(m, nn)], [1], "softmax", bytes=2 * m * nn * 4)
    kid = c.kernel("bench_layer_norm", kernels.layer_norm, "sm_90", **PROMISES,
                   same_shapes=[("x", "y"), ("weight", "bias")])
    c.benchmark("layer_norm-16384x1024-sm_90", kid, kernels.layer_norm_grid((m, nn)),
                [f32(m, nn, scale=2.0), f32(nn), f32(nn), empty(m, nn), {"scalar": 1e-5}], [3],
                "layer_norm", bytes=(2 * m * nn + 2 * nn) * 4)
    m, nn = 8192, 8192
    kid = c.kernel("bench_row_sum", kernels.row_sum, "sm_90", **PROMISES)
    c.benchmark("row_sum-8192x8192-sm_90", kid, kernels.row_sum_grid((m, nn)),
                [f32(m, nn), empty(m)], [1], "row_sum", bytes=m * nn * 4)
    kid = c.kernel("bench_transpose", lambda: kernels.transpose("f32"), "sm_90", **PROMISES)
    c.benchmark("transpose-f32-8192x8192-sm_90", kid, kernels.transpose_grid((m, nn)),
                [f32(m, nn), empty(nn, m)], [1], "transpose", bytes=2 * m * nn * 4)
    s = 4096
    for target, opts, tag in (("sm_90", PROMISES, "mma.sync"), ("sm_90a", PROMISES, "wgmma"),
                              ("sm_80", PROMISES, "mma.sync-ptxjit")):
        for dtype in ("f16", "bf16") if target == "sm_90a" else ("f16",):
            kid = c.kernel(f"bench_matmul_{dtype}", lambda d=dtype: kernels.matmul(d), target,
                           **opts)
            td = {"f16": "float16", "bf16": "bfloat16"}[dtype]
            c.benchmark(f"matmul_{dtype}-{s}^3-{target}-{tag}", kid,
                        kernels.matmul_grid((s, s), (s, s)),
                        [{"randn": [s, s], "dtype": td}, {"randn": [s, s], "dtype": td},
                         empty(s, s)], [2], "matmul", flops=2 * s ** 3)
    kid = c.kernel("bench_matmul_f16_wgmma_128x64x16w8",
                   lambda: kernels.matmul("f16", block_m=128, block_n=64, block_k=16), "sm_90a",
                   num_warps=8, **PROMISES)
    c.benchmark(f"matmul_f16-{s}^3-sm_90a-wgmma-128x64x16w8", kid,
                kernels.matmul_grid((s, s), (s, s), 128, 64),
                [{"randn": [s, s], "dtype": "float16"}, {"randn": [s, s], "dtype": "float16"},
                 empty(s, s)], [2], "matmul", flops=2 * s ** 3)
    # The pipelined large tiles (num_stages, dynamic shared memory; TMA or cp.async on sm_90a).
    for target, bm, bn, warps, stages, tma in (
            ("sm_90a", 128, 256, 8, 3, True), ("sm_90a", 128, 256, 8, 4, True),
            ("sm_90a", 128, 256, 8, 3, False), ("sm_90a", 128, 128, 8, 4, True),
            ("sm_90a", 128, 128, 4, 4, True), ("sm_90", 128, 128, 4, 4, False),
            ("sm_90", 128, 256, 8, 3, False)):
        name = f"{bm}x{bn}x64w{warps}s{stages}{'-tma' if tma else ''}"
        kid = c.kernel(f"bench_matmul_f16_{name}",
                       lambda bm=bm, bn=bn: kernels.matmul("f16", block_m=bm, block_n=bn,
                                                           block_k=64),
                       target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
        c.benchmark(f"matmul_f16-{s}^3-{target}-{name}", kid,
                    kernels.matmul_grid((s, s), (s, s), bm, bn),
                    [{"randn": [s, s], "dtype": "float16"},
                     {"randn": [s, s], "dtype": "float16", "scale": 1 / 64},
                     empty(s, s)], [2], "matmul", flops=2 * s ** 3)
    # Batched matmuls (one 3-D TMA box per matrix of the batch) beside torch.bmm, both
    # writing f16.
    batch, s = 32, 1024
    for bm, bn, warps, stages, tma in ((128, 128, 8, 4, True), (128, 256, 8, 3, True),
                                       (128, 256, 8, 3, False)):
        name = f"{bm}x{bn}x64w{warps}s{stages}{'-tma' if tma else ''}"
        kid = c.kernel(f"bench_batched_matmul_f16_{name}",
                       lambda bm=bm, bn=bn: kernels.batched_matmul(
                           "f16", block_m=bm, block_n=bn, block_k=64, out_dtype="f16"),
                       "sm_90a", num_warps=warps, num_stages=stages, tma=tma, **PROMISES)
        c.benchmark(f"batched_matmul_f16-{batch}x{s}^3-sm_90a-{name}", kid,
                    kernels.batched_matmul_grid((batch, s, s), (batch, s, s), bm, bn),
                    [{"randn": [batch, s, s], "dtype": "float16"},
                     {"randn": [batch, s, s], "dtype": "float16", "scale": 1 / 32},
                     empty(batch, s, s, dtype="float16")], [2], "batched_matmul",
                    flops=2 * batch * s ** 3)
    # (batch x heads, tokens, head dimension) and the configurations: long sequences of d 64;
    # on sm_90a keys and values come by TMA where its mbarriers cost no block per SM (not at
    # 64 x 64 on 4 warps, 3 stages); "cp" variants keep cp.async (tma=False). LLaMA-7B's heads
    # (32 of 2048 tokens, d 128) with the blocks kernel formation might take there. "ov":
    # kernels.attention(overlap=True), the softmax beside the previous block's p v; "r128":
    # with maxnreg=128 (four blocks an SM, as without overlap; 159 registers leave three).
    for (batch, seq, d), configs in (
            ((16, 4096, 64), (
                ("sm_90a", 64, 64, 4, 3, True, False), ("sm_90", 64, 64, 4, 3, True, False),
                ("sm_90a", 128, 64, 8, 3, True, False), ("sm_90a", 128, 128, 8, 2, True, False),
                ("sm_90a", 128, 64, 8, 2, True, False), ("sm_90a", 64, 128, 4, 3, True, False),
                ("sm_90a", 128, 64, 4, 3, True, False), ("sm_90a", 64, 64, 4, 3, False, False),
                ("sm_90a", 128, 64, 8, 3, False, False), ("sm_90a", 128, 64, 4, 3, True, True),
                ("sm_90a", 128, 64, 8, 2, True, True), ("sm_90a", 64, 64, 4, 3, False, True),
                ("sm_90a", 64, 64, 4, 3, False, True, 128))),
            ((32, 2048, 128), (
                ("sm_90a", 64, 64, 4, 3, True, False), ("sm_90a", 128, 64, 8, 3, True, False),
                ("sm_90a", 128, 64, 8, 2, True, False), ("sm_90a", 64, 128, 4, 2, True, False),
                ("sm_90a", 128, 128, 8, 2, True, False), ("sm_90a", 64, 64, 4, 2, True, False),
                ("sm_90a", 64, 64, 4, 2, True, True), ("sm_90a", 128, 128, 8, 2, True, True),
                ("sm_90a", 128, 64, 8, 2, True, True)))):
        qkv = {"randn": [batch, seq, d], "dtype": "float16"}
        for target, bm, bn, warps, stages, tma, overlap, *cap in configs:
            name = (f"{bm}x{bn}w{warps}s{stages}" + ("" if tma else "cp")
                    + ("ov" if overlap else "") + "".join(f"r{r}" for r in cap))
            kid = c.kernel(f"bench_attention_f16_{'' if d == 64 else f'd{d}_'}{name}",
                           lambda bm=bm, bn=bn, d=d, overlap=overlap: kernels.attention(
                               "f16", head_dim=d, block_m=bm, block_n=bn, overlap=overlap),
                           target, num_warps=warps, num_stages=stages, tma=tma, **PROMISES,
                           same_shapes=[("q", "o"), ("k", "v")],
                           **({"maxnreg": cap[0]} if cap else {}))
            c.benchmark(f"attention_f16-{batch}x{seq}x{d}-{target}-{name}", kid,
                        kernels.attention_grid((batch, seq, d), bm),
                        [qkv, qkv, qkv, {"empty": [batch, seq, d], "dtype": "float16"},
                         {"scalar": d ** -0.5}], [3], "attention",
                        flops=4 * batch * seq * seq * d)


GROUPS: dict[str, Callable[[Collector], None]] = {
    "reference": reference_kernels,
    "wgmma": wgmma_kernels,
    "edge": edge_kernels,
    "promises": promise_kernels,
    "random": random_kernels,
    "handwritten": handwritten_kernels,
    "pipelined": pipelined_kernels,
    "schedules": schedule_kernels,
    "bench": benchmarks,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(GPU_TESTS.parents[2] / ".gpucases"))
    ap.add_argument("--only", default="", help="comma-separated substrings of case ids")
    ap.add_argument("--groups", default=",".join(GROUPS), help=",".join(GROUPS))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    c = Collector(out, [s for s in args.only.split(",") if s])
    t0 = time.perf_counter()
    for group in args.groups.split(","):
        print(f"== {group}", flush=True)
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        try:
            GROUPS[group](c)
        except Exception:  # noqa: BLE001 - the other groups are still worth collecting
            traceback.print_exc()
            c.failures.append(group)
    import cuda.core
    manifest = {
        "collected_with": {"torch": torch.__version__, "numpy": np.__version__,
                           "cuda.core": cuda.core.__version__, "tileopt": tileopt.__version__,
                           "python": sys.version.split()[0]},
        "guard": GUARD,
        "kernels": c.kernel_meta,
        "cases": c.cases,
        "bench": c.bench,
        "collect_failures": c.failures,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    bad = [x["id"] for x in c.cases if not x["emulator_matches_reference"]]
    print(f"{len(c.cases)} cases, {len(c.bench)} benchmarks, {len(c.kernels)} kernels, "
          f"{size / 2**20:.1f} MiB in {out}, {time.perf_counter() - t0:.0f} s")
    if bad:
        print(f"emulator disagrees with the reference on {len(bad)} cases: {', '.join(bad)}")
    if c.failures:
        print(f"groups that failed to collect: {', '.join(c.failures)}")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
