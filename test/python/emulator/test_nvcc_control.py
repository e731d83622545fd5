"""Control flow (cuda/control.cu): divergence, early exit, data-dependent loops, calls."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
SRC = "control.cu"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _collatz(v: int, cap: int) -> int:
    s = 0
    while v > 1 and s < cap:
        v = 3 * v + 1 if v & 1 else v >> 1
        s += 1
    return s


def _cls(v: int) -> int:
    if v % 3 == 0:
        return 2 if v % 2 == 0 else 1
    if v % 5 == 1:
        return 3
    return 4 if v & 4 else 5


@pytest.mark.parametrize("n,block", [(1000, 128), (33, 32), (4097, 256), (64, 64)])
def test_collatz_divergent_loops_and_early_exit(
    load_kernels: Loader, arch: str, n: int, block: int
) -> None:
    k = load_kernels(SRC, arch)
    rng = np.random.default_rng(n)
    x = rng.integers(-50, 100_000, size=n, dtype=np.int32)
    x[:4] = [0, 1, 27, -1]  # 27 takes 111 steps; 0 and 1 take none
    steps = np.full(n, -123, dtype=np.int32)
    cls = np.full(n, -456, dtype=np.int32)
    k.module.launch(
        "collatz_steps",
        grid=(_cdiv(n, block), 1, 1),
        block=(block, 1, 1),
        args=[x, steps, cls, n],
    )
    exp_steps = np.array([_collatz(int(v), 1000) if v >= 0 else -123 for v in x], dtype=np.int32)
    exp_cls = np.array([_cls(int(v)) if v >= 0 else -456 for v in x], dtype=np.int32)
    np.testing.assert_array_equal(steps, exp_steps)
    np.testing.assert_array_equal(cls, exp_cls)
    assert len(set(exp_steps.tolist())) > 10  # the trip counts really differ between threads


@pytest.mark.parametrize("grid,block", [(1, 32), (2, 64), (3, 256), (1, 96)])
def test_divergence_then_barrier(load_kernels: Loader, arch: str, grid: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    k.require("bar.sync")
    rng = np.random.default_rng(grid * block)
    lim = rng.integers(0, 70, size=grid * block, dtype=np.int32)
    out = np.zeros(grid * block, dtype=np.int32)
    k.module.launch("diverge_then_sync", grid=(grid, 1, 1), block=(block, 1, 1), args=[lim, out])
    expect = np.zeros(grid * block, dtype=np.int64)
    for b in range(grid):
        s = []
        for t in range(block):
            acc = 0
            for kk in range(min(int(lim[b * block + t]), 64)):
                acc += kk * t if kk & 1 else -kk
            acc = acc * 2 + 1 if t & 1 else acc - 3
            s.append(acc)
        for t in range(block):
            expect[b * block + t] = _wrap32(s[block - 1 - t] + s[t])
    np.testing.assert_array_equal(out, expect.astype(np.int32))


@pytest.mark.parametrize("n", [8, 100, 1000])
def test_switch_fallthrough(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels(SRC, arch)
    rng = np.random.default_rng(n)
    x = rng.integers(-(2**20), 2**20, size=n, dtype=np.int32)
    x[:8] = np.arange(8)
    out = np.zeros(n, dtype=np.int32)
    k.module.launch(
        "switch_fallthrough",
        grid=(_cdiv(n, 64), 1, 1),
        block=(64, 1, 1),
        args=[x, out, n],
    )
    table = {0: 11, 1: 10, 2: 11100, 3: 11000, 4: 10000}
    expect = []
    for v in x.tolist():
        c = v & 7
        expect.append(table[c] if c in table else (-v if c == 5 else _wrap32(v * v)))
    np.testing.assert_array_equal(out, np.array(expect, dtype=np.int32))


def _clamp_steps(v: int) -> int:
    if v <= 0:
        return -1
    return _collatz(v, 50)


@pytest.mark.parametrize("n,block", [(100, 64), (1000, 128), (31, 32)])
def test_device_function_calls(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    k.require(".func", "call.uni", "func_retval0", "st.param", "ld.param")
    rng = np.random.default_rng(n)
    a = rng.integers(-5000, 5000, size=n, dtype=np.int32)
    b = rng.integers(-5000, 5000, size=n, dtype=np.int32)
    f = rng.standard_normal(n).astype(np.float32)
    iout = np.zeros((n, 6), dtype=np.int32)
    fout = np.zeros(n, dtype=np.float32)
    k.module.launch(
        "calls",
        grid=(_cdiv(n, block), 1, 1),
        block=(block, 1, 1),
        args=[a, b, f, iout, fout, n],
    )
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        poly = _wrap32(x * x - 3 * y + 7)
        trio = (x, y, x - y)
        expect = [
            poly,
            min(trio),
            max(trio),
            _wrap32(poly + _clamp_steps(x)),
            _clamp_steps(y),
            _clamp_steps(y) + 1,
        ]
        assert iout[i].tolist() == expect, (i, x, y)
    # lerp_clamped: b = fma(2, f, 1); t = sat(k / 10); fma(b - a, t, a): each one f32 rounding.
    f64 = f.astype(np.float64)
    bb = (2.0 * f64 + 1.0).astype(np.float32).astype(np.float64)
    d = (bb - f64).astype(np.float32).astype(np.float64)
    t = np.clip(np.float32(1) * (a & 15).astype(np.float32) / np.float32(10), 0, 1).astype(
        np.float64
    )
    np.testing.assert_array_equal(fout, (d * t + f64).astype(np.float32))


@pytest.mark.parametrize("n", [50, 333])
def test_local_memory_array(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels(SRC, arch)
    k.require("ld.local", "st.local", "__local_depot")
    rng = np.random.default_rng(n)
    x = rng.integers(-1000, 1000, size=n, dtype=np.int32)
    out = np.zeros(n, dtype=np.int32)
    k.module.launch("local_array", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[x, out, n])
    kk = np.arange(16)
    arr = x[:, None].astype(np.int64) * kk[None, :] + (kk ^ 5)[None, :]
    idx = (x.astype(np.int64) * 7) & 15
    rows = np.arange(n)
    np.testing.assert_array_equal(
        out, (arr[rows, idx] + arr[rows, (idx + 3) & 15]).astype(np.int32)
    )


@pytest.mark.parametrize("n", [16, 100])
def test_recursive_calls(load_kernels: Loader, arch: str, n: int) -> None:
    """fib_rec recurses to a per-thread depth: needs a real call stack in the emulator."""
    k = load_kernels("recursion.cu", arch)
    x = np.arange(n, dtype=np.int32) * 5 + 3
    out = np.zeros(n, dtype=np.int32)
    k.module.launch("recursion_fib", grid=(_cdiv(n, 32), 1, 1), block=(32, 1, 1), args=[x, out, n])
    fib = [0, 1]
    while len(fib) < 16:
        fib.append(fib[-1] + fib[-2])
    np.testing.assert_array_equal(out, np.array([fib[v & 15] for v in x.tolist()], dtype=np.int32))


def test_inter_warp_spin_wait_makes_progress(load_kernels: Loader, tmp_path: Path) -> None:
    """Warp 1 spins on a flag that warp 0 sets later in program order: every warp must progress.

    Run in a child process with a time limit, so that a livelock fails this test instead of
    hanging the suite.
    """
    k = load_kernels("spin_wait.cu", "sm_80")  # the scheduling question is the same on sm_90
    k.require("ld.volatile.global")
    ptx_file = tmp_path / "spin_wait.ptx"
    ptx_file.write_text(k.ptx)
    code = textwrap.dedent(
        f"""
        import numpy as np
        import tileopt.emulator as emu
        mod = emu.load_ptx(open({str(ptx_file)!r}).read())
        flag, data, out = (np.zeros(1, np.int32) for _ in range(3))
        mod.launch("producer_consumer", grid=(1, 1, 1), block=(64, 1, 1), args=[flag, data, out])
        print("result", int(out[0]))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail("livelock: the consumer warp spun for 20 s and the producer warp never ran")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "result 42" in proc.stdout, proc.stdout


def _irreducible_ref(v: int) -> int:
    s = 0
    label = "B" if v & 1 else "A"
    while True:
        if label == "A":
            s += 1
            v >>= 1
            if v == 0:
                return s
            label = "B"
        else:
            s += 10
            v -= 1
            if v > 0 and (v & 3):
                label = "A"
            elif v > 0:
                label = "B"
            else:
                return s


@pytest.mark.parametrize("n", [64, 500])
def test_irreducible_control_flow(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels(SRC, arch)
    rng = np.random.default_rng(n)
    x = rng.integers(0, 5000, size=n, dtype=np.int32)
    x[:4] = [0, 1, 2, 3]
    out = np.zeros(n, dtype=np.int32)
    k.module.launch(
        "irreducible_goto", grid=(_cdiv(n, 64), 1, 1), block=(64, 1, 1), args=[x, out, n]
    )
    np.testing.assert_array_equal(out, [_irreducible_ref(int(v)) for v in x])
