"""Fixtures shared by the compiler and runtime tests.

``handwritten`` gives the hand-written kernels of ``compiler/kernels`` (see its
``catalog.py``): written directly in the GPU/LLVM dialects following the kernel ABI
(docs/kernel-abi.md), so the "ptx" and "cubin" stages, the launchers and the emulator are
tested on code that does not depend on the tile passes.

Every test run has a compile cache of its own (``$TILEOPT_CACHE_DIR``, a temporary directory
removed at the end), so no run reads what another (or an older build) wrote; ``fresh_cache``
gives one test an empty cache, for tests that replace parts of the compiler.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

_run_cache_dir: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _run_cache_dir
    _run_cache_dir = tempfile.mkdtemp(prefix="tileopt-test-cache-")
    os.environ["TILEOPT_CACHE_DIR"] = _run_cache_dir


def pytest_collection_finish(session: pytest.Session) -> None:
    # What is alive after collection (torch, MLIR, numpy, the test modules: millions of
    # objects) stays to the end: frozen, the cyclic collector's passes skip it, and they come
    # every 20,000 allocations instead of 700. The collector took 5% of a worker's time (up
    # to 8%); now about 2%.
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _run_cache_dir is not None:
        shutil.rmtree(_run_cache_dir, ignore_errors=True)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty compile cache directory for this test (in memory too: entries are kept per
    directory)."""
    directory = tmp_path / "tileopt-cache"
    monkeypatch.setenv("TILEOPT_CACHE_DIR", str(directory))
    return directory


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

    # Compiled through the pipeline, never read from the cache: tests check its stages.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILEOPT_ALWAYS_COMPILE", "1")
        return compile(catalog.source(name), target, start="llvm",
                       signature=catalog.signature(name))


class Handwritten:
    """The hand-written kernels: ``source(name)``, ``signature(name)``, ``compiled(name, sm)``."""

    source = staticmethod(catalog.source)
    signature = staticmethod(catalog.signature)
    compiled = staticmethod(_compiled)


@pytest.fixture
def handwritten() -> type[Handwritten]:
    """The hand-written kernels; ``handwritten.compiled(name, target)`` is cached."""
    return Handwritten
