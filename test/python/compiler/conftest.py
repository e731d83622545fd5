"""Fixtures for the compiler tests: hand-written kernels at stage "llvm" and their ABIs.

The tile passes (layout assignment, ``convert-tile-to-nvvm``) are not required here: the
kernels in ``kernels/`` (see ``kernels/catalog.py``) are written directly in the GPU/LLVM
dialects following the kernel ABI (docs/kernel-abi.md), so the "ptx" and "cubin" stages,
ptxas and the emulator are tested on them. Tests that need the tile passes skip with that
reason.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")

_spec = importlib.util.spec_from_file_location(
    "tileopt_test_kernels", Path(__file__).parent / "kernels" / "catalog.py"
)
assert _spec is not None and _spec.loader is not None
catalog = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalog)


@cache
def _compiled(name: str, target: str) -> Any:
    from tileopt.compiler import compile

    return compile(catalog.source(name), target, start="llvm", signature=catalog.signature(name))


class Handwritten:
    """The hand-written kernels: ``source(name)``, ``signature(name)``, ``compiled(name, sm)``."""

    source = staticmethod(catalog.source)
    signature = staticmethod(catalog.signature)
    compiled = staticmethod(_compiled)


@pytest.fixture
def handwritten() -> type[Handwritten]:
    """The hand-written kernels; ``handwritten.compiled(name, target)`` is cached."""
    return Handwritten


@pytest.fixture
def require_tile_passes() -> None:
    """Skips the test unless the tile passes of the pipeline are registered (issue 4's C++)."""
    from tileopt import ir, passmanager
    from tileopt.compiler import nvidia

    missing = []
    with ir.Context():
        for stage in ("tilegpu", "llvm"):
            for p in nvidia.PIPELINES[stage]:
                name = p.split("{")[0]
                try:
                    passmanager.PassManager.parse(f"builtin.module({name})")
                except ValueError:
                    missing.append(name)
    if missing:
        pytest.skip(f"tile passes not registered yet (C++ of issue 4): {', '.join(missing)}")
