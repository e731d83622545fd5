"""compile(..., aligned=True): tile.divisibility on the views, no run-time alignment check."""

from __future__ import annotations

import pytest
import tileopt
import torch
from tileopt import kernels
from tileopt.compiler import nvidia
from tileopt.runtime.abi import ArgumentError, KernelParam


@pytest.fixture(scope="module")
def both() -> tuple[tileopt.Kernel, tileopt.Kernel]:
    plain = tileopt.compile(kernels.vector_add(dtype="f32", block=1024), target="sm_90")
    aligned = tileopt.compile(
        kernels.vector_add(dtype="f32", block=1024), target="sm_90", aligned=True
    )
    return plain, aligned


def test_views_carry_the_promise(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    plain, aligned = both
    assert "tile.divisibility = 16" in str(aligned.asm["tile"])
    assert all(p.divisibility == 16 for p in aligned.metadata.abi if p.kind == "view")
    assert all(p.divisibility is None for p in plain.metadata.abi)


def test_no_fallback_code(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    plain, aligned = both
    name = aligned.metadata.name
    small = nvidia.ptx_instruction_count(str(aligned.asm["ptx"]), name)
    large = nvidia.ptx_instruction_count(str(plain.asm["ptx"]), name)
    assert small < 0.75 * large, (small, large)
    assert "ld.global.v4.b32" in str(aligned.asm["ptx"])


@pytest.mark.parametrize("n", [1024, 5000, 4097])
def test_aligned_launch_matches_torch(
    both: tuple[tileopt.Kernel, tileopt.Kernel], n: int
) -> None:
    _, aligned = both
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    stats = aligned.launch(((n + 1023) // 1024,), x, y, out, device="emulator")
    assert torch.equal(out, x + y)
    assert stats.global_load_sectors == 2 * ((n * 4 + 31) // 32)


def test_misaligned_arrays_are_rejected(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    _, aligned = both
    x = torch.randn(1025)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*divisibility 16>\) was compiled"):
        aligned.launch((1,), x[1:], x[1:], torch.empty(1024), device="emulator")


def test_param_text_round_trips() -> None:
    p = KernelParam.view("x", "f16", 2, strides=(None, 1), divisibility=16)
    assert str(p) == "x: view<?x?xf16, strides [?, 1], divisibility 16>"
    assert KernelParam.parse(str(p)) == p


def test_aligned_needs_tile_ir() -> None:
    with pytest.raises(tileopt.CompilationError, match="aligned= need start='tile'"):
        tileopt.compile(".version 8.0", start="ptx", aligned=True)

