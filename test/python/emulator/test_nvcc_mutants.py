"""Mutants of nvcc's PTX for the suite's CUDA sources (test/python/fuzz/ptxmutate.py's edits:
lines deleted, duplicated, swapped or cut, tokens and numbers replaced) must load or be refused
with a ``TileoptError`` naming the line: the emulator's parser and instruction decoders take any
text. These found a KeyError in call arguments and an IndexError in ``.align``."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import tileopt.emulator as emu
from tileopt.errors import TileoptError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import ptxmutate  # noqa: E402

SOURCES = {"control.cu": "sm_80", "reduction.cu": "sm_80", "shared.cu": "sm_80",
           "mma.cu": "sm_80", "conversions.cu": "sm_90", "simd.cu": "sm_90"}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_mutants_load_or_are_refused(compile_kernel: Callable[..., str], source: str) -> None:
    ptx = compile_kernel(source, arch=SOURCES[source])
    rng = random.Random(source)
    for _ in range(100):
        mutant = ptxmutate.mutate(ptx, rng)
        try:
            emu.load_ptx(mutant)
        except TileoptError:
            pass
