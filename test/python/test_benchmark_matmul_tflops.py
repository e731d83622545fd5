"""benchmarks/matmul_tflops.py where there is no GPU: it says why it skips and exits 0.

The benchmark itself needs a CUDA GPU; this checks only its skip path, on every machine
(``CUDA_VISIBLE_DEVICES=""`` hides a GPU from torch where there is one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "matmul_tflops.py"


def test_matmul_tflops_skips_without_a_gpu() -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("matmul_tflops: skipped: "), proc.stdout
    assert "torch.cuda.is_available() is False" in proc.stdout


def test_matmul_tflops_rejects_unknown_options_before_skipping() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dtypes", "f8"], capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "unknown dtypes" in proc.stderr


@pytest.mark.parametrize(("target", "dtype", "out"), [
    ("sm_80", "i8", "i32"), ("sm_89", "f8E4M3FN", "bf16"),
])
def test_matmul_tflops_saves_8bit_kernels(target: str, dtype: str, out: str,
                                          tmp_path: Path) -> None:
    """``--dtypes i8`` compiles int8 kernels (int32 results) and ``--dtypes f8E4M3FN`` e4m3
    ones (bf16 results) without a GPU: a tile a program only, k steps of twice the
    configurations' elements (the same bytes)."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--dtypes", dtype, "--target", target,
         "--save-kernels", str(tmp_path)], capture_output=True, text=True, timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = sorted(p.name for p in tmp_path.glob("*.json") if p.name != "errors.json")
    prefix = f"{target}-{dtype}-{out}-"
    assert names and all(n.startswith(prefix) for n in names), names
    assert not [n for n in names if "-p-" in n or "-sk-" in n], names
    assert any(n.startswith(f"{prefix}128x128x128-w4-s4-") for n in names), names
