"""Every suite kernel compiles with the pinned pip nvcc for each target (no emulator needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

CUDA_DIR = Path(__file__).parent / "cuda"

SOURCES = sorted(p.name for p in CUDA_DIR.glob("*.cu"))


def test_sources_present() -> None:
    assert {
        "elementwise.cu",
        "reduction.cu",
        "shared.cu",
        "mma.cu",
        "cp_async.cu",
        "control.cu",
    } <= set(SOURCES)


@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles(compile_kernel: Callable[..., str], arch: str, name: str) -> None:
    ptx = compile_kernel(name, arch)
    assert f".target {arch}" in ptx
    assert ".visible .entry" in ptx


def test_compile_cuda_fixture_caches(compile_cuda: Callable[..., str]) -> None:
    src = 'extern "C" __global__ void k_cache_probe(int* p) { p[threadIdx.x] = 1; }'
    first = compile_cuda(src, "sm_80")
    assert compile_cuda(src, "sm_80") is first  # served from the session cache
    assert ".entry k_cache_probe" in first
