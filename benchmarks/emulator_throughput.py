"""Throughput of the PTX emulator (tileopt.emulator) on a few CUDA C kernels.

Compiles the kernels below with nvcc from the pip wheel (``nvidia-cuda-nvcc``; or
``$TILEOPT_NVCC``) to PTX, runs them in the emulator and prints wall time and
thread-instructions per second, checking each result against numpy.

    PYTHONPATH=python python benchmarks/emulator_throughput.py [--arch sm_80] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SOURCE = r"""
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// one block per row, 256 threads, shared-memory + shuffle reductions
extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
    __shared__ float red[32];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < blockDim.x / 32; w++) m = fmaxf(m, red[w]);
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    s = 0.f;
    for (int w = 0; w < blockDim.x / 32; w++) s += red[w];
    float inv = 1.f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}

#define TILE 16
extern "C" __global__ void tiled_matmul(const float* A, const float* B, float* C,
                                        int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && kb < K) ? B[kb * N + col] : 0.f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
"""


def find_nvcc() -> str | None:
    """nvcc from $TILEOPT_NVCC, the nvidia-cuda-nvcc wheel, or PATH."""
    env = os.environ.get("TILEOPT_NVCC")
    if env:
        return env
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(root).glob("cu*/bin/nvcc")):
            return str(cand)
    return shutil.which("nvcc")


def compile_ptx(nvcc: str, arch: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.cu"
        src.write_text(SOURCE)
        out = Path(d) / "k.ptx"
        env = dict(os.environ)
        env["PATH"] = str(Path(nvcc).parent) + os.pathsep + env.get("PATH", "")
        subprocess.run(
            [nvcc, f"-arch={arch}", "-ptx", str(src), "-o", str(out)], check=True, env=env
        )
        return out.read_text()


def report(name: str, stats, wall: float, err: float) -> None:
    rate = stats.thread_instructions / wall
    print(
        f"{name:<34} {wall:8.2f} s {stats.thread_instructions / 1e6:10.1f} M thread-instr "
        f"{rate / 1e6:8.1f} M thread-instr/s "
        f"({stats.instructions / wall / 1e3:7.1f} K warp-instr/s)"
        f"  max err {err:.1e}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--quick", action="store_true", help="smaller problems")
    args = ap.parse_args()
    nvcc = find_nvcc()
    if nvcc is None:
        print(
            "SKIP: nvcc not found "
            "(pip install nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cccl==13.3.5.0.6)"
        )
        return 0
    import tileopt.emulator as emu

    t0 = time.perf_counter()
    ptx = compile_ptx(nvcc, args.arch)
    t1 = time.perf_counter()
    mod = emu.load_ptx(ptx)
    t2 = time.perf_counter()
    print(f"nvcc {t1 - t0:.2f} s, load_ptx {t2 - t1:.3f} s, arch {args.arch}")
    rng = np.random.default_rng(0)

    n = 1 << (18 if args.quick else 20)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    t = time.perf_counter()
    s = mod.launch("vector_add", grid=(n + 255) // 256, block=256, args=[a, b, c, n])
    report(f"vector_add n={n}", s, time.perf_counter() - t, float(np.abs(c - (a + b)).max()))

    rows, cols = (256, 1024) if args.quick else (1024, 1024)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    y = np.zeros_like(x)
    t = time.perf_counter()
    s = mod.launch("row_softmax", grid=rows, block=256, args=[x, y, cols])
    e = np.exp(x - x.max(1, keepdims=True))
    report(
        f"row_softmax {rows}x{cols}",
        s,
        time.perf_counter() - t,
        float(np.abs(y - e / e.sum(1, keepdims=True)).max()),
    )

    m = 128 if args.quick else 256
    A = rng.standard_normal((m, m), dtype=np.float32)
    B = rng.standard_normal((m, m), dtype=np.float32)
    C = np.zeros((m, m), np.float32)
    t = time.perf_counter()
    s = mod.launch(
        "tiled_matmul",
        grid=((m + 15) // 16, (m + 15) // 16),
        block=(16, 16),
        args=[A, B, C, m, m, m],
    )
    report(f"tiled_matmul {m}x{m}x{m}", s, time.perf_counter() - t, float(np.abs(C - A @ B).max()))
    print(f"  matmul shared bank conflicts: {s.shared_bank_conflicts}, barriers: {s.barriers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
