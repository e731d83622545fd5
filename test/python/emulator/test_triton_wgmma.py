"""Triton's sm_90 matmul PTX (wgmma.mma_async on swizzled shared memory) in the emulator vs torch.

Triton (an optional dependency) compiles ``tl.dot`` for compute capability 9.0 to sm_90a PTX
with ``wgmma.fence`` / ``wgmma.mma_async`` / ``wgmma.commit_group`` / ``wgmma.wait_group``, its
own shared-memory layouts (no swizzle or 32/64/128-byte swizzle, K-major or MN-major operands)
and matrix descriptors. Compilation is ahead of time (no GPU needed); the emulator runs the PTX.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np
import pytest
import tileopt.emulator as emu
import torch

triton = pytest.importorskip("triton", reason="Triton (optional) is not installed")
tl = pytest.importorskip("triton.language", reason="Triton (optional) is not installed")
from triton.backends.compiler import GPUTarget  # noqa: E402

F32_EPS = float(np.finfo(np.float32).eps)


@triton.jit
def wgmma_matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    m,
    n,
    k,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    A_TIMES_2: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, k, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rows[:, None] < m) & (ks[None, :] < k),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
            mask=(ks[:, None] < k) & (cols[None, :] < n),
            other=0.0,
        )
        if A_TIMES_2:  # computed in registers: Triton feeds wgmma A from registers
            a = a * 2.0
        acc = tl.dot(a, b, acc)
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc, mask=mask)


_PTR = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}
_BLOCKS = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
_SCALARS = ("m", "n", "k", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm")


def _compile(
    dtype: torch.dtype,
    scalars: dict[str, int],
    blocks: tuple[int, int, int],
    num_warps: int,
    a_times_2: bool,
) -> Any:
    """``triton.compile`` for sm_90 with the specialisation Triton's JIT would apply:
    integers equal to 1 become constants, multiples of 16 are marked divisible (as are the
    pointers, whose buffers are 16-byte aligned)."""
    fn = wgmma_matmul
    signature: dict[str, str] = {"a_ptr": _PTR[dtype], "b_ptr": _PTR[dtype], "c_ptr": "*fp32"}
    constexprs: dict[str, int] = dict(zip(_BLOCKS, blocks, strict=True))
    constexprs["A_TIMES_2"] = int(a_times_2)
    attrs: dict[tuple[int, ...], list[list[Any]]] = {
        (fn.arg_names.index(p),): [["tt.divisibility", 16]] for p in ("a_ptr", "b_ptr", "c_ptr")
    }
    for name, value in scalars.items():
        if value == 1:
            signature[name] = "constexpr"
            constexprs[name] = 1
            continue
        signature[name] = "i32"
        if value % 16 == 0:
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
    for name in (*_BLOCKS, "A_TIMES_2"):
        signature[name] = "constexpr"
    src = triton.compiler.ASTSource(
        fn=fn,
        signature={p: signature[p] for p in fn.arg_names},
        constexprs=constexprs,
        attrs=attrs,
    )
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})


def _entry_params(ptx: str, name: str) -> int:
    """Number of parameters of kernel *name* in the PTX."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\(([^)]*)\)", ptx, re.S)
    assert m, f"kernel {name} not in the PTX"
    return m.group(1).count(".param")


class Case(NamedTuple):
    """One compilation and launch of :func:`wgmma_matmul`."""

    dtype: torch.dtype
    blocks: tuple[int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K
    num_warps: int
    mnk: tuple[int, int, int]  # problem size (not multiples of the blocks)
    a_kmajor: bool = True  # A stored row-major (else column-major: strides swapped)
    b_nmajor: bool = True  # B stored row-major (else column-major)
    a_times_2: bool = False  # A scaled in registers (wgmma with A from registers)

    @property
    def id(self) -> str:
        t = "f16" if self.dtype == torch.float16 else "bf16"
        bm, bn, bk = self.blocks
        lay = ("a" if self.a_kmajor else "aT") + ("b" if self.b_nmajor else "bT")
        regs = "-aregs" if self.a_times_2 else ""
        return f"{t}-{bm}x{bn}x{bk}-w{self.num_warps}-{lay}{regs}-" + "x".join(map(str, self.mnk))


F16, BF16 = torch.float16, torch.bfloat16
CASES = [
    Case(F16, (64, 64, 32), 4, (100, 90, 70)),
    Case(F16, (64, 16, 16), 4, (70, 40, 50)),
    Case(BF16, (64, 32, 64), 4, (64, 50, 130)),
    Case(F16, (64, 64, 128), 4, (80, 70, 150)),
    Case(BF16, (128, 128, 32), 8, (150, 140, 40)),
    Case(F16, (128, 64, 64), 4, (130, 70, 90)),
    Case(F16, (64, 256, 32), 4, (70, 260, 40)),
    Case(BF16, (64, 64, 64), 8, (90, 100, 70)),
    Case(F16, (64, 64, 64), 4, (70, 80, 90), b_nmajor=False),
    Case(BF16, (128, 32, 128), 4, (130, 40, 140), b_nmajor=False),
    Case(F16, (64, 128, 16), 8, (70, 130, 40), b_nmajor=False),
    Case(F16, (64, 64, 32), 4, (80, 70, 60), a_kmajor=False),
    Case(BF16, (64, 16, 64), 4, (70, 30, 100), a_kmajor=False, b_nmajor=False),
    # sizes and strides multiples of 16: cp.async pipelining, wgmma.wait_group 1
    Case(F16, (64, 64, 32), 4, (128, 64, 128)),
    Case(BF16, (128, 64, 64), 8, (128, 128, 192), b_nmajor=False),
    Case(F16, (64, 64, 32), 4, (70, 90, 80), a_times_2=True),
    Case(BF16, (128, 64, 64), 8, (130, 70, 90), a_times_2=True),
    Case(F16, (64, 256, 16), 4, (64, 260, 40), b_nmajor=False, a_times_2=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_triton_wgmma_matmul(case: Case) -> None:
    dtype, blocks, num_warps, (m, n, k), a_kmajor, b_nmajor, a_times_2 = case
    gen = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    # the same matrices, stored the other way round where the case says so
    a_store = a.contiguous() if a_kmajor else a.t().contiguous()
    b_store = b.contiguous() if b_nmajor else b.t().contiguous()
    stride_am, stride_ak = (k, 1) if a_kmajor else (1, m)
    stride_bk, stride_bn = (n, 1) if b_nmajor else (1, k)
    scalars = dict(
        zip(_SCALARS, (m, n, k, stride_am, stride_ak, stride_bk, stride_bn, n), strict=True)
    )
    compiled = _compile(dtype, scalars, blocks, num_warps, a_times_2)
    ptx = compiled.asm["ptx"]
    name = compiled.metadata.name
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async.sync.aligned" in ptx, "Triton did not use wgmma"
    assert "wgmma.wait_group.sync.aligned" in ptx
    # A from registers: "{d...}, {a0, a1, a2, a3}, b-desc, ..."; else "{d...}, a-desc, b-desc"
    a_regs = re.search(r"wgmma\.mma_async\S* \{[^}]*\}, \{", ptx) is not None
    assert a_regs == a_times_2
    bm, bn, _ = blocks
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn), 1)
    c = torch.full((m, n), float("nan"))
    args: list[Any] = [a_store, b_store, c] + [v for v in scalars.values() if v != 1]
    # Triton >= 3.3 appends scratch pointers (global, profile) to the kernel's parameters.
    sizes = [
        getattr(compiled.metadata, "global_scratch_size", 0),
        getattr(compiled.metadata, "profile_scratch_size", 0),
    ]
    for i in range(_entry_params(ptx, name) - len(args)):
        size = sizes[i] if i < len(sizes) else 0
        args.append(np.zeros(max(size * grid[0] * grid[1], 16), np.uint8))
    stats = emu.load_ptx(ptx).launch(
        name,
        grid=grid,
        block=(32 * num_warps, 1, 1),
        args=args,
        shared_bytes=compiled.metadata.shared,
    )
    assert stats.instructions_by_class.get("mma", 0) > 0
    a64, b64 = a.double() * (2 if a_times_2 else 1), b.double()
    ref = a64 @ b64
    bound = (k + 1) * F32_EPS * (a64.abs() @ b64.abs()) + 1e-30
    err = (c.double() - ref).abs()
    assert bool((err <= bound).all()), (
        f"max excess {float((err - bound).max())} at "
        f"{np.unravel_index(int((err - bound).argmax()), err.shape)}"
    )
