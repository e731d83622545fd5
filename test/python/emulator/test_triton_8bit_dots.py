"""Triton 3.9's int8 and fp8 matmuls in the emulator, against torch.

Triton (optional; skipped without it) compiles ``tl.dot`` on 8-bit operands ahead of time:
``mma.sync.m16n8k32`` with ``.s8`` inputs and ``.s32`` accumulators on sm_80, with
``.e4m3``/``.e5m2`` inputs on sm_89, and ``wgmma.mma_async`` ``.m64nNk32`` (``.s8`` and
``.e4m3``, operands in swizzled shared memory) on sm_90a. Its fragment layouts and matrix
descriptors are those of the hardware, so matching torch checks the emulator's 8-bit tables.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tileopt.emulator as emu
import torch

triton = pytest.importorskip("triton", reason="Triton (optional) is not installed")
tl = pytest.importorskip("triton.language", reason="Triton (optional) is not installed")
from triton.backends.compiler import GPUTarget  # noqa: E402


@triton.jit
def dot8(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         INT: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.int32 if INT else tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        zero = 0 if INT else 0.0  # the padding, in the operands' kind
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :],
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=zero)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :],
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=zero)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


TYPES = {"s8": ("*i8", torch.int8), "e4m3": ("*fp8e4nv", torch.float8_e4m3fn),
         "e5m2": ("*fp8e5", torch.float8_e5m2)}


def _run(capability: int, a_type: str, b_type: str, shape: tuple[int, int, int],
         block: tuple[int, int, int], warps: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    m, n, k = shape
    bm, bn, bk = block
    integer = a_type == "s8"
    consts = {"BM": bm, "BN": bn, "BK": bk, "INT": integer}
    sig = {"a_ptr": TYPES[a_type][0], "b_ptr": TYPES[b_type][0],
           "c_ptr": "*i32" if integer else "*fp32", "M": "i32", "N": "i32", "K": "i32",
           **{c: "constexpr" for c in consts}}
    src = triton.compiler.ASTSource(fn=dot8, signature={p: sig[p] for p in dot8.arg_names},
                                    constexprs=consts)
    compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": warps, "num_stages": 3})
    gen = torch.Generator().manual_seed(m + n + k)
    if integer:
        a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
        c = torch.full((m, n), 7, dtype=torch.int32)
        args: list[Any] = [a, b]
    else:
        a = torch.randn(m, k, generator=gen).to(TYPES[a_type][1])
        b = torch.randn(k, n, generator=gen).to(TYPES[b_type][1])
        c = torch.full((m, n), float("nan"))
        args = [a.view(torch.uint8), b.view(torch.uint8)]
    ptx = compiled.asm["ptx"]
    args += [c, m, n, k]
    params = re.search(r"\.entry\s+\w+\s*\(([^)]*)\)", ptx, re.S).group(1).count(".param")
    args += [np.zeros(16, np.uint8) for _ in range(params - len(args))]  # Triton's scratch
    grid = (-(-m // bm), -(-n // bn), 1)
    stats = emu.load_ptx(ptx).launch(compiled.metadata.name, grid=grid, block=32 * warps,
                                     args=args, shared_bytes=compiled.metadata.shared)
    # warps store different bytes of shared words (st.shared.b8): no race
    assert stats.shared_races == 0 and stats.shared_uninitialized_reads == 0
    want = a.double() @ b.double()
    instr = " ".join(sorted(set(re.findall(r"(?:mma\.sync|wgmma\.mma_async)\S*", ptx))))
    return c, want, instr


CASES = [
    (80, "s8", "s8", (70, 45, 100), (32, 32, 32), 4, "m16n8k32.row.col.satfinite.s32.s8.s8.s32"),
    (80, "s8", "s8", (128, 64, 64), (64, 64, 64), 4, "m16n8k32.row.col.satfinite.s32.s8.s8.s32"),
    (89, "e4m3", "e4m3", (64, 40, 96), (64, 32, 32), 4, "m16n8k32.row.col.f32.e4m3.e4m3.f32"),
    (89, "e5m2", "e4m3", (33, 64, 64), (32, 64, 64), 2, "f32.e5m2.e4m3.f32"),
    (90, "s8", "s8", (100, 70, 130), (64, 64, 64), 4, "m64n64k32.s32.s8.s8"),
    (90, "e4m3", "e4m3", (64, 128, 64), (64, 128, 64), 4, "k32.f32.e4m3.e4m3"),
    (90, "e5m2", "e5m2", (128, 32, 96), (128, 32, 32), 8, "k32.f32.e5m2.e5m2"),
]


@pytest.mark.parametrize(("capability", "a_type", "b_type", "shape", "block", "warps", "instr"),
                         CASES, ids=[f"sm{c[0]}-{c[1]}-{c[2]}-{c[4][0]}x{c[4][1]}" for c in CASES])
def test_triton_8bit_dot(capability: int, a_type: str, b_type: str, shape: tuple[int, int, int],
                         block: tuple[int, int, int], warps: int, instr: str) -> None:
    got, want, used = _run(capability, a_type, b_type, shape, block, warps)
    assert instr in used, used  # the instruction under test
    if a_type == "s8":
        assert torch.equal(got.long(), want.long())  # exact, no overflow at these sizes
    else:
        # fp8 products are exact; the f32 sums round at most once per k step
        tol = shape[2] * float(np.finfo(np.float32).eps) * float(want.abs().max()) + 1e-30
        assert float((got.double() - want).abs().max()) <= tol
