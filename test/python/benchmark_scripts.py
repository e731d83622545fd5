"""What the tests of the GPU benchmarks (benchmarks/*_tflops.py) share: running a script, and
reading the table its ``--static`` prints without a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """benchmarks/``name`` with ``args`` in a fresh interpreter (its output captured)."""
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def static_rows(name: str, *args: str) -> list[tuple[list[str], list[str]]]:
    """The rows of ``name --static args`` (which compiles models: skipped without tileopt's
    native build or torch-mlir), each as its leading words (dtype, case) and its last five
    (kernel, registers, spilled bytes, shared bytes, PTX instructions)."""
    pytest.importorskip("tileopt.ir", reason="--static compiles: tileopt's native build")
    pytest.importorskip("torch_mlir", reason="--static compiles models: torch-mlir")
    proc = run_script(name, "--static", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split()[:7] == ["dtype", "name", "kernel", "regs", "spills", "shared", "PTX"]
    return [(row.split()[:-5], row.split()[-5:]) for row in rows]
