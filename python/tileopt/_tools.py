"""Console entry points for the native tools shipped in the package."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def tool_path(name: str) -> Path:
    """The path of a native tool (e.g. ``tileopt-opt``) built into the package."""
    spec = importlib.util.find_spec("tileopt._mlir_libs")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "tileopt's native part is not built; run `make build` (or `pip install -e .`) first"
        )
    path = Path(spec.origin).parent / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; rebuild tileopt with `make build`")
    return path


def tileopt_opt() -> None:
    """Runs ``tileopt-opt`` with this process's arguments."""
    exe = tool_path("tileopt-opt")
    os.execv(exe, [str(exe), *sys.argv[1:]])
