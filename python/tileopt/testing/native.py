"""Running Python as a machine without tileopt's native build (a GPU machine) would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

#: Makes importing the MLIR bindings and the compiler fail in the interpreter that runs it.
_NO_NATIVE_BUILD = textwrap.dedent("""
    import sys

    class _NoNativeBuild:
        def find_spec(self, name, path=None, target=None):
            if name.startswith(("tileopt._mlir_libs", "tileopt.ir", "tileopt.compiler")):
                raise ImportError(f"{name} is not built here")
            return None

    sys.meta_path.insert(0, _NoNativeBuild())
""")


def run_without_native_build(script: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` in a fresh interpreter that sees tileopt's Python sources but cannot
    import its native bindings or its compiler; returns the finished process."""
    python_dir = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(python_dir)}
    return subprocess.run([sys.executable, "-c", _NO_NATIVE_BUILD + textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
