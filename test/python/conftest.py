"""Fixtures shared by the compiler and runtime tests.

``handwritten`` gives the hand-written kernels of ``compiler/kernels`` (see its
``catalog.py``): written directly in the GPU/LLVM dialects following the kernel ABI
(docs/kernel-abi.md), so the "ptx" and "cubin" stages, the launchers and the emulator are
tested on code that does not depend on the tile passes.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location(
    "tileopt_test_kernels", Path(__file__).parent / "compiler" / "kernels" / "catalog.py"
)
assert _spec is not None and _spec.loader is not None
catalog = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalog)


@cache
def _compiled(name: str, target: str) -> Any:
    pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
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
