"""benchmarks/attention_tflops.py where there is no GPU.

It skips without one, and what its ``--save`` writes is a whole program: a fresh interpreter
without tileopt's native bindings runs a saved case (its host function and its flash-attention
kernel) in the emulator and gets ``F.scaled_dot_product_attention``'s result, as the GPU
machine's ``--load`` does on the GPU.
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
    return run_script("attention_tflops.py", *args, env=env)


def test_attention_tflops_skips_without_a_gpu() -> None:
    proc = run(env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("attention_tflops: skipped: "), proc.stdout


def test_attention_tflops_rejects_unknown_options() -> None:
    proc = run("--dtypes", "f8")
    assert proc.returncode == 2 and "unknown dtypes ['f8']" in proc.stderr, proc.stderr
    proc = run("--cases", "bert")
    assert proc.returncode == 2 and "no case matches 'bert'" in proc.stderr, proc.stderr


def test_static_prints_each_kernel_without_a_gpu() -> None:
    # What ptxas and the PTX say of each case's kernel: one flash-attention kernel per case,
    # no spills, its registers ptxas's (at most 255) and PTX instructions the emulator parses.
    cases = static_rows("attention_tflops.py", "--cases", "gpt2", "--seq", "80", "--target",
                        "sm_80")
    assert [case for case, _ in cases] == [["f16", "gpt2"], ["f16", "gpt2", "causal"]], cases
    for _, (kernel, regs, spills, shared, instructions) in cases:
        assert kernel.endswith("_attention") and 0 < int(regs) <= 255 and spills == "0"
        assert int(shared) > 0 and int(instructions) > 100


def test_saved_case_runs_without_the_native_build(tmp_path: Path) -> None:
    pytest.importorskip("tileopt.ir", reason="--save compiles: tileopt's native build")
    pytest.importorskip("torch_mlir", reason="--save compiles models: torch-mlir")
    proc = run("--save", str(tmp_path), "--cases", "gpt2", "--seq", "80", "--target", "sm_80")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = json.loads((tmp_path / "index.json").read_text())
    assert [(e["case"]["name"], e["case"]["seq"]) for e in index] == [
        ("gpt2", 80), ("gpt2 causal", 80)]
    proc = run_without_native_build(f"""
        import json
        from pathlib import Path

        import torch
        import torch.nn.functional as F
        from tileopt.runtime.host import bind_host_function
        from tileopt.runtime.kernel import Kernel

        d = Path({str(tmp_path)!r})
        torch.manual_seed(0)
        for entry in json.loads((d / "index.json").read_text()):
            kernels = {{n: Kernel.load(d / f) for n, f in entry["kernels"].items()}}
            assert len(kernels) == 1, kernels  # one flash-attention kernel
            forward = bind_host_function(
                entry["source"], entry["function"],
                lambda name, grid, *args: kernels[name].launch(grid, *args, device="emulator"),
                lambda shape, dtype: torch.empty(shape, dtype=dtype), {{}})
            q, k, v = (torch.randn(1, 12, 80, 64).half() for _ in range(3))
            causal = entry["case"]["causal"]
            got = forward(q, k, v)[0].float()
            want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                  is_causal=causal)
            err = (got - want).abs().max().item()
            assert err < 1e-2, (causal, err)
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
