"""Packed integer SIMD on 16-bit and 8-bit lanes of a 32-bit register (simd.cu,
simd_packed_ptx.cu): the CUDA ``__v*2``/``__v*4`` intrinsics as nvcc compiles them (on sm_90
``add``/``min``/``max`` on ``.u16x2``/``.s16x2``, ``.relu`` included), and inline PTX for the
packed forms of sm_120 (``.u8x4``/``.s8x4``, ``add.sat``).

References are per-lane Python integers, written from the CUDA Math API and PTX ISA
definitions; the inputs mix random words with the lane edge values (0, 1, -1, min, max).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
Lane = Callable[[int, int], int]


def _lanes(v: int, bits: int, signed: bool) -> list[int]:
    """The lanes of the 32-bit word ``v``, lane 0 in the low bits."""
    out = []
    for k in range(32 // bits):
        x = (v >> (k * bits)) & ((1 << bits) - 1)
        if signed and x >> (bits - 1):
            x -= 1 << bits
        out.append(x)
    return out


def _pack(lanes: list[int], bits: int) -> int:
    return sum((x & ((1 << bits) - 1)) << (k * bits) for k, x in enumerate(lanes))


def _sat(x: int, bits: int, signed: bool) -> int:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return min(max(x, lo), hi)


def _simd(bits: int, signed: bool, f: Lane, sat: bool = False) -> Callable[[int, int], int]:
    """A reference: ``f`` on each pair of lanes, wrapped (or saturated) to the lane width."""

    def ref(x: int, y: int) -> int:
        r = [f(a, b) for a, b in zip(_lanes(x, bits, signed), _lanes(y, bits, signed),
                                     strict=True)]
        return _pack([_sat(v, bits, signed) if sat else v for v in r], bits)

    return ref


def _add(a: int, b: int) -> int:
    return a + b


def _sub(a: int, b: int) -> int:
    return a - b


def _relu_max(a: int, b: int) -> int:
    return max(a, b, 0)


def _relu_min(a: int, b: int) -> int:
    return max(min(a, b), 0)


# simd.cu: simd2 (16 outputs per element) and simd4 (10), in the kernels' order.
SIMD2 = [
    _simd(16, False, _add),
    _simd(16, False, _sub),
    _simd(16, True, max),
    _simd(16, True, min),
    _simd(16, False, max),
    _simd(16, False, min),
    _simd(16, True, _add, sat=True),
    _simd(16, True, _sub, sat=True),
    _simd(16, False, _add, sat=True),
    _simd(16, False, _sub, sat=True),
    _simd(16, True, _relu_max),
    _simd(16, True, _relu_min),
    _simd(16, True, lambda a, b: abs(a - b)),
    _simd(16, True, lambda a, b: -a),
    _simd(16, True, lambda a, b: abs(a)),
    _simd(16, False, lambda a, b: (a + b) >> 1),
]
SIMD4 = [
    _simd(8, False, _add),
    _simd(8, False, _sub),
    _simd(8, True, max),
    _simd(8, True, min),
    _simd(8, False, max),
    _simd(8, False, min),
    _simd(8, True, _add, sat=True),
    _simd(8, True, _sub, sat=True),
    _simd(8, False, _add, sat=True),
    _simd(8, False, _sub, sat=True),
]
# simd_packed_ptx.cu: one output per inline PTX instruction.
PACKED_PTX = [
    ("add.sat.s16x2", _simd(16, True, _add, sat=True)),
    ("add.sat.u16x2", _simd(16, False, _add, sat=True)),
    ("add.s8x4", _simd(8, True, _add)),
    ("add.sat.s8x4", _simd(8, True, _add, sat=True)),
    ("add.sat.u8x4", _simd(8, False, _add, sat=True)),
    ("sub.u8x4", _simd(8, False, _sub)),
    ("sub.sat.s8x4", _simd(8, True, _sub, sat=True)),
    ("sub.sat.u8x4", _simd(8, False, _sub, sat=True)),
    ("max.s8x4", _simd(8, True, max)),
    ("min.u8x4", _simd(8, False, min)),
    ("max.relu.s8x4", _simd(8, True, _relu_max)),
    ("min.relu.s8x4", _simd(8, True, _relu_min)),
    ("min.relu.s16x2", _simd(16, True, _relu_min)),
    ("max.u16x2", _simd(16, False, max)),
]


def _operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n pairs of 32-bit words: every pair of lane edge values, then random words."""
    edges16 = [0x0000, 0x0001, 0xFFFF, 0x7FFF, 0x8000, 0x8001, 0x7FFE]
    edges8 = [0x00, 0x01, 0xFF, 0x7F, 0x80, 0x81]
    words = [e | e << 16 for e in edges16] + [e * 0x01010101 for e in edges8]
    words += [0x7FFF8000, 0x80007FFF, 0x7F80FF01, 0x017F80FF]
    x = [a for a in words for _ in words]
    y = [b for _ in words for b in words]
    rng = np.random.default_rng(seed)
    extra = max(n - len(x), 0)
    a = np.concatenate([np.array(x, np.uint32), rng.integers(0, 2**32, extra, dtype=np.uint32)])
    b = np.concatenate([np.array(y, np.uint32), rng.integers(0, 2**32, extra, dtype=np.uint32)])
    return a, b


def _run(k: LoadedPTX, kernel: str, refs: list, n: int) -> None:
    a, b = _operands(n, n)
    n = a.size
    out = np.zeros(n * len(refs), np.uint32)
    k.module.launch(kernel, grid=(n + 127) // 128, block=128, args=[a, b, out, n])
    got = out.reshape(n, len(refs))
    for j, ref in enumerate(refs):
        want = np.array([ref(int(x), int(y)) for x, y in zip(a, b, strict=True)], np.uint32)
        bad = np.flatnonzero(got[:, j] != want)
        assert bad.size == 0, (
            f"{kernel} output {j}: x=0x{int(a[bad[0]]):08x} y=0x{int(b[bad[0]]):08x} -> "
            f"0x{int(got[bad[0], j]):08x}, expected 0x{int(want[bad[0]]):08x} "
            f"({bad.size} of {n} wrong)"
        )


@pytest.mark.parametrize("n", [600])
def test_halfword_intrinsics(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("simd.cu", arch)
    if arch == "sm_90":
        k.require("add.u16x2", "add.s16x2", "max.s16x2", "min.s16x2", "max.u16x2", "min.u16x2",
                  "max.s16x2.relu", "min.s16x2.relu")
    _run(k, "simd2", SIMD2, n)


@pytest.mark.parametrize("n", [600])
def test_byte_intrinsics(load_kernels: Loader, arch: str, n: int) -> None:
    _run(load_kernels("simd.cu", arch), "simd4", SIMD4, n)


def test_packed_ptx_of_sm_120(load_kernels: Loader) -> None:
    k = load_kernels("simd_packed_ptx.cu", "sm_120a")
    k.require(*(f"{op} " for op, _ in PACKED_PTX))
    _run(k, "packed_ptx", [ref for _, ref in PACKED_PTX], 700)


@pytest.mark.parametrize(
    "op",
    ["sub.s16x2", "sub.u16x2", "min.relu.u16x2", "max.relu.u8x4", "add.relu.s16x2",
     "max.sat.s16x2"],
)
def test_packed_forms_that_ptx_lacks_are_refused(op: str) -> None:
    import tileopt.emulator as emu

    ptx = (
        ".version 9.2\n.target sm_120a\n.address_size 64\n"
        ".visible .entry k()\n{\n  .reg .b32 %r<4>;\n"
        f"  mov.b32 %r1, 1;\n  {op} %r3, %r1, %r1;\n  ret;\n}}\n"
    )
    with pytest.raises(emu.UnsupportedInstructionError, match=op.split(".")[0]):
        emu.load_ptx(ptx)
