"""benchmarks/linear_tflops.py where there is no GPU.

It skips without one (``CUDA_VISIBLE_DEVICES=""`` hides a GPU from torch), and what its
``--save`` writes is a whole program: a fresh interpreter without tileopt's native bindings
runs a saved layer (its host function, ``tileopt.runtime.host``, and its kernels) in the
emulator and gets ``F.linear``'s result, as the GPU machine's ``--load`` does on the GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from benchmark_scripts import run_script, static_rows
from tileopt.testing.native import run_without_native_build


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_script("linear_tflops.py", *args, env=env)


def test_linear_tflops_skips_without_a_gpu() -> None:
    proc = run(env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("linear_tflops: skipped: "), proc.stdout


def test_linear_tflops_rejects_unknown_options() -> None:
    proc = run("--tokens", "many")
    assert proc.returncode == 2 and "--tokens takes integers" in proc.stderr, proc.stderr


def test_static_prints_each_layers_kernel_without_a_gpu() -> None:
    # One matmul kernel (the bias fused) per layer of GPT-2 at 64 tokens, no spills.
    rows = static_rows("linear_tflops.py", "--shapes", "gpt2", "--tokens", "64", "--target",
                       "sm_80")
    names = [" ".join(lead[1:]) for lead, _ in rows]
    assert names == [f"gpt2 {layer} T=64" for layer in ("qkv", "attn_out", "mlp_up",
                                                         "mlp_down")], rows
    for _, (kernel, regs, spills, shared, instructions) in rows:
        assert kernel.endswith("_matmul") and 0 < int(regs) <= 255 and spills == "0"
        assert int(shared) > 0 and int(instructions) > 100


def test_saved_layer_runs_without_the_native_build(tmp_path: Path) -> None:
    pytest.importorskip("tileopt.ir", reason="--save compiles: tileopt's native build")
    pytest.importorskip("torch_mlir", reason="--save compiles models: torch-mlir")
    proc = run("--save", str(tmp_path), "--shapes", "gpt2", "--tokens", "64", "--target",
               "sm_80")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = json.loads((tmp_path / "index.json").read_text())
    assert [e["name"] for e in index] == [f"gpt2 {layer} T=64" for layer in
                                          ("qkv", "attn_out", "mlp_up", "mlp_down")]
    proc = run_without_native_build(f"""
        import json
        from pathlib import Path

        import torch
        import torch.nn.functional as F
        from tileopt.runtime.host import bind_host_function
        from tileopt.runtime.kernel import Kernel

        d = Path({str(tmp_path)!r})
        entry = json.loads((d / "index.json").read_text())[1]  # attn_out: 64 x 768 x 768
        kernels = {{n: Kernel.load(d / f) for n, f in entry["kernels"].items()}}
        forward = bind_host_function(
            entry["source"], entry["function"],
            lambda name, grid, *args: kernels[name].launch(grid, *args, device="emulator"),
            lambda shape, dtype: torch.empty(shape, dtype=dtype), {{}})
        torch.manual_seed(0)
        w = (torch.randn(768, 768) / 768 ** 0.5).half()
        b = torch.randn(768).half()
        x = torch.randn(64, 768).half()
        got = forward(w, b, x)[0].float()
        want = F.linear(x.float(), w.float(), b.float())
        err = (got - want).abs().max().item()
        assert err < 1e-2, err
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
