"""Triton 3.9's pipelined and TMA matmuls in the emulator, against torch.

Triton (optional; these tests need 3.9: tensor descriptors and their launch metadata)
compiles ahead of time, without a GPU:

* ``tl.dot`` over masked ``tl.load`` with ``num_stages`` 3 and 4 for sm_80 (``mma.sync``) and
  sm_90a (``wgmma``): a multi-stage ``cp.async`` pipeline (commit groups, ``wait_group``
  ``num_stages - 2``, zero-filled edges);
* the same matmul through tensor descriptors on sm_90a, also warp-specialised
  (``tl.range(..., warp_specialize=True)``: producer and consumer warp groups): host-side
  ``TensorDescriptor``s (a
  ``CUtensorMap`` by value, ``.param .align 64 .b8 [128]``, followed by the shape and the
  strides; the emulator gets a :class:`tileopt.runtime.tma.TensorMap` built from Triton's
  ``tensordesc_meta``) and device-side ``tl.make_tensor_descriptor`` (``tensormap.replace``
  into a global scratch buffer): TMA loads completing on mbarriers, swizzled 64B/128B, TMA
  stores of the result.

Every launch must give torch's result with no out-of-bounds access and no shared-memory
race; mutations of the generated PTX (a wait removed or weakened, a wrong transaction count)
must be caught as races or deadlocks.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest
import tileopt.emulator as emu
import torch
from tileopt.runtime.tma import DataType, Swizzle, TensorMap

triton = pytest.importorskip("triton", reason="Triton (optional) is not installed")
if not triton.__version__.startswith("3.9"):
    pytest.skip(
        f"these tests compile with Triton 3.9's API (tensor descriptors, tensordesc_meta); "
        f"found Triton {triton.__version__}",
        allow_module_level=True,
    )
tl = pytest.importorskip("triton.language")
from triton.backends.compiler import GPUTarget  # noqa: E402

F32_EPS = float(np.finfo(np.float32).eps)
BM, BN, BK = 64, 64, 32


@triton.jit
def pointer_matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sbk,
    scm,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(
            a_ptr + rm[:, None] * sam + rk[None, :],
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + rk[:, None] * sbk + rn[None, :],
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rm[:, None] * scm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N)
    )


@triton.jit
def host_tma_matmul(
    a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k0])
        b = b_desc.load([k0, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


@triton.jit
def ws_tma_matmul(
    a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in tl.range(0, K, BK, warp_specialize=True):
        a = a_desc.load([pid_m * BM, k0])
        b = b_desc.load([k0, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


@triton.jit
def device_tma_matmul(
    a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = a_desc.load([pid_m * BM, k0])
        b = b_desc.load([k0, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


_BLOCKS = {"BM": BM, "BN": BN, "BK": BK}


def _compile(fn, signature: dict[str, str], attrs, capability: int, num_stages: int) -> Any:
    signature = {**signature, **{k: "constexpr" for k in _BLOCKS}}
    src = triton.compiler.ASTSource(
        fn=fn,
        signature={p: signature[p] for p in fn.arg_names},
        constexprs=dict(_BLOCKS),
        attrs=attrs,
    )
    target = GPUTarget("cuda", capability, 32)
    return triton.compile(src, target=target, options={"num_warps": 4, "num_stages": num_stages})


def _divisible(values: dict[str, int], first: int, fn) -> dict:
    """Triton's specialisation: pointers 16-byte aligned, integers divisible by 16 marked."""
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(first)}
    for name, v in values.items():
        if v % 16 == 0:
            attrs[(fn.arg_names.index(name),)] = [["tt.divisibility", 16]]
    return attrs


@functools.cache
def _pointer_kernel(capability: int, num_stages: int, m: int, n: int, k: int) -> Any:
    values = {"M": m, "N": n, "K": k, "sam": k, "sbk": n, "scm": n}
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", **{v: "i32" for v in values}}
    attrs = _divisible(values, 3, pointer_matmul)
    return _compile(pointer_matmul, sig, attrs, capability, num_stages)


@functools.cache
def _host_tma_kernel(num_stages: int, fn=host_tma_matmul) -> Any:
    sig = {
        "a_desc": f"tensordesc<fp16[{BM}, {BK}]>",
        "b_desc": f"tensordesc<fp16[{BK}, {BN}]>",
        "c_desc": f"tensordesc<fp32[{BM}, {BN}]>",
        "M": "i32",
        "N": "i32",
        "K": "i32",
    }
    return _compile(fn, sig, {}, 90, num_stages)


@functools.cache
def _device_tma_kernel(num_stages: int, m: int, n: int, k: int) -> Any:
    values = {"M": m, "N": n, "K": k}
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", **{v: "i32" for v in values}}
    return _compile(
        device_tma_matmul, sig, _divisible(values, 3, device_tma_matmul), 90, num_stages
    )


def _entry_params(ptx: str) -> int:
    m = re.search(r"\.entry\s+\w+\s*\(([^)]*)\)", ptx, re.S)
    assert m, "no kernel in the PTX"
    return m.group(1).count(".param")


def _operands(m: int, n: int, k: int):
    gen = torch.Generator().manual_seed(m * 10_000 + n * 100 + k)
    a = torch.randn(m, k, generator=gen).to(torch.float16)
    b = torch.randn(k, n, generator=gen).to(torch.float16)
    return a, b, torch.full((m, n), float("nan"))


def _check(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, stats: emu.LaunchStats) -> None:
    a64, b64 = a.double(), b.double()
    ref = a64 @ b64
    bound = (a.shape[1] + 1) * F32_EPS * (a64.abs() @ b64.abs()) + 1e-30
    err = (c.double() - ref).abs()
    assert bool((err <= bound).all()), f"max error {float(err.max())}"
    assert stats.shared_races == 0
    assert stats.shared_uninitialized_reads == 0


def _launch(compiled: Any, ptx: str, args: list, grid, **kw) -> emu.LaunchStats:
    scratch = getattr(compiled.metadata, "global_scratch_size", 0)
    sizes = [scratch * grid[0] * grid[1], getattr(compiled.metadata, "profile_scratch_size", 0)]
    for i in range(_entry_params(ptx) - len(args)):  # Triton's scratch pointers
        args.append(np.zeros(max(sizes[i] if i < len(sizes) else 0, 16), np.uint8))
    return emu.load_ptx(ptx).launch(
        compiled.metadata.name,
        grid=grid,
        block=32 * compiled.metadata.num_warps,
        args=args,
        shared_bytes=compiled.metadata.shared,
        **kw,
    )


def _grid(m: int, n: int) -> tuple[int, int, int]:
    return (triton.cdiv(m, BM), triton.cdiv(n, BN), 1)


# ---------------------------------------------------------------- cp.async pipelines

POINTER_CASES = [
    (80, 3, (200, 136, 112)),
    (80, 4, (70, 90, 160)),
    (90, 3, (200, 136, 112)),
    (90, 4, (130, 72, 96)),
]


@pytest.mark.parametrize(
    "capability,num_stages,mnk",
    POINTER_CASES,
    ids=[f"sm{c}-stages{s}-{'x'.join(map(str, mnk))}" for c, s, mnk in POINTER_CASES],
)
def test_triton_cp_async_pipelined_matmul(capability: int, num_stages: int, mnk) -> None:
    m, n, k = mnk
    compiled = _pointer_kernel(capability, num_stages, m, n, k)
    ptx = compiled.asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx
    assert ptx.count("cp.async.commit_group") == num_stages  # prologue + steady state
    assert re.search(rf"cp\.async\.wait_group\s+{num_stages - 2};", ptx)
    assert ("wgmma.mma_async" in ptx) == (capability == 90)
    a, b, c = _operands(m, n, k)
    stats = _launch(compiled, ptx, [a, b, c, m, n, k, k, n, n], _grid(m, n))
    _check(a, b, c, stats)


def test_triton_cp_async_mutations_are_caught() -> None:
    """A weaker wait reads tiles in flight; a missing bar.sync reads another warp's copies."""
    m, n, k = 200, 136, 112
    compiled = _pointer_kernel(80, 3, m, n, k)
    ptx = compiled.asm["ptx"]
    wait = re.search(r"cp\.async\.wait_group\s+1;", ptx)
    assert wait
    weaker = ptx[: wait.start()] + "cp.async.wait_group 2;" + ptx[wait.end() :]
    barrier = ptx.index("bar.sync", wait.end())
    no_barrier = ptx[:barrier] + "// " + ptx[barrier:]
    for mutant, message in ((weaker, "still in flight"), (no_barrier, "written by warp")):
        a, b, c = _operands(m, n, k)
        with pytest.raises(emu.SharedRaceError, match=message):
            _launch(compiled, mutant, [a, b, c, m, n, k, k, n, n], _grid(m, n))


# ---------------------------------------------------------------- TMA

_D2H = {6: DataType.FLOAT16, 7: DataType.FLOAT32, 10: DataType.BFLOAT16}  # device -> host enum


def _host_maps(compiled: Any, tensors) -> list:
    """The kernel arguments of host-side descriptors: per tensor, a TensorMap made from
    Triton's tensordesc_meta (block size, swizzle, element type), the shape, the strides."""
    args: list = []
    for t, meta in zip(tensors, compiled.metadata.tensordesc_meta, strict=True):
        tm = TensorMap.from_tensor(
            t,
            tuple(meta["block_size"]),
            swizzle=Swizzle(meta["swizzle"]),
            dtype=_D2H[meta["elem_type"]],
        )
        args += [tm, *t.shape, *t.stride()]
    return args


HOST_CASES = [(3, (200, 136, 104)), (4, (200, 136, 104)), (3, (70, 40, 48)), (2, (64, 64, 200))]


@pytest.mark.parametrize(
    "num_stages,mnk", HOST_CASES, ids=[f"stages{s}-{'x'.join(map(str, t))}" for s, t in HOST_CASES]
)
def test_triton_tma_matmul_host_descriptors(num_stages: int, mnk) -> None:
    m, n, k = mnk
    compiled = _host_tma_kernel(num_stages)
    ptx = compiled.asm["ptx"]
    assert ".param .align 64 .b8" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    swizzles = {meta["swizzle"] for meta in compiled.metadata.tensordesc_meta}
    assert swizzles == {Swizzle.B64, Swizzle.B128}
    a, b, c = _operands(m, n, k)
    stats = _launch(compiled, ptx, _host_maps(compiled, (a, b, c)) + [m, n, k], _grid(m, n))
    _check(a, b, c, stats)


@pytest.mark.parametrize("num_stages,mnk", [(2, (130, 72, 200)), (3, (200, 136, 104))])
def test_triton_warp_specialised_tma_matmul(num_stages: int, mnk) -> None:
    """tl.range(warp_specialize=True): a producer warp group issues the TMA loads, two
    consumer warp groups run wgmma; full/empty mbarriers, setmaxnreg, named barriers."""
    m, n, k = mnk
    compiled = _host_tma_kernel(num_stages, ws_tma_matmul)
    ptx = compiled.asm["ptx"]
    assert "setmaxnreg" in ptx and ptx.count("waitLoop:") > 1
    assert compiled.metadata.num_warps > 4  # the producer's warps come on top
    a, b, c = _operands(m, n, k)
    stats = _launch(compiled, ptx, _host_maps(compiled, (a, b, c)) + [m, n, k], _grid(m, n))
    _check(a, b, c, stats)


def test_triton_tma_matmul_device_descriptors() -> None:
    m, n, k = 200, 136, 104
    compiled = _device_tma_kernel(3, m, n, k)
    ptx = compiled.asm["ptx"]
    assert "tensormap.replace.tile.global_address" in ptx
    assert "tensormap.cp_fenceproxy" in ptx
    assert compiled.metadata.global_scratch_size > 0
    a, b, c = _operands(m, n, k)
    stats = _launch(compiled, ptx, [a, b, c, m, n, k], _grid(m, n))
    _check(a, b, c, stats)


def test_triton_tma_mutations_are_caught() -> None:
    """No loop on the mbarrier wait: the wgmma reads tiles in flight. A transaction count
    larger than the copies: every warp waits forever (a deadlock error, not a hang). No
    wait for the TMA store: the CTA exits while the store reads its shared memory."""
    m, n, k = 200, 136, 104
    compiled = _host_tma_kernel(3)
    ptx = compiled.asm["ptx"]
    no_loop = re.sub(r"@!\w+ bra(\.uni)? waitLoop;", "", ptx)
    expect = re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", ptx)
    assert no_loop != ptx and expect
    too_many = ptx.replace(expect.group(0), expect.group(0).replace(expect.group(1), "16384"))
    no_store_wait = re.sub(r"cp\.async\.bulk\.wait_group(\.read)?\s+0;", "", ptx)
    mutants = [
        (no_loop, emu.SharedRaceError, "while an asynchronous copy into it"),
        (too_many, emu.EmulatorError, "deadlocked"),
        (no_store_wait, emu.SharedRaceError, "exited while a bulk copy"),
    ]
    for mutant, error, message in mutants:
        a, b, c = _operands(m, n, k)
        with pytest.raises(error, match=message):
            _launch(compiled, mutant, _host_maps(compiled, (a, b, c)) + [m, n, k], _grid(m, n))
