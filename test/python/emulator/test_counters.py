"""Counter tests: sectors per warp request, bank conflicts, requests/bytes, instruction counts.

Expected counts are computed here from the access pattern alone (which 32-byte sectors
each warp touches, which banks each warp hits), assuming only that launch buffers start
on a 32-byte boundary (cudaMalloc gives 256).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sectors(byte_offsets_per_warp: list[np.ndarray], size: int) -> int:
    """Sum over warp requests of distinct 32-byte sectors touched."""
    total = 0
    for offs in byte_offsets_per_warp:
        if offs.size == 0:
            continue
        first = offs // 32
        last = (offs + size - 1) // 32
        total += len(set(first.tolist()) | set(last.tolist()))
    return total


def _warps(n: int) -> list[np.ndarray]:
    """Thread indices 0..n-1 grouped into warps (1-D launches, block size a multiple of 32)."""
    idx = np.arange(n)
    return [idx[w * 32 : (w + 1) * 32] for w in range(_cdiv(n, 32))]


@pytest.mark.parametrize("n4,block", [(4096, 128), (1000, 256), (32, 32), (4000, 64)])
def test_coalesced_float4_copy_minimum_sectors(
    load_kernels: Loader, arch: str, n4: int, block: int
) -> None:
    k = load_kernels("counters.cu", arch)
    k.require("ld.global.nc.v4", "st.global.v4")
    x = np.random.default_rng(n4).standard_normal((n4, 4)).astype(np.float32)
    y = np.zeros_like(x)
    stats = k.module.launch(
        "copy_float4",
        grid=(_cdiv(n4, block), 1, 1),
        block=(block, 1, 1),
        args=[x, y, n4],
    )
    np.testing.assert_array_equal(y, x)
    nbytes = n4 * 16
    assert nbytes % 32 == 0
    assert stats.global_load_bytes == nbytes
    assert stats.global_store_bytes == nbytes
    assert stats.global_load_requests == _cdiv(n4, 32)
    assert stats.global_store_requests == _cdiv(n4, 32)
    assert stats.global_load_sectors == nbytes // 32  # the minimum: every sector fully used
    assert stats.global_store_sectors == nbytes // 32
    assert stats.global_load_unique_sectors == stats.global_store_unique_sectors == nbytes // 32


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8, 9, 32])
@pytest.mark.parametrize("n", [1024, 1000])
def test_strided_copy_sector_excess(load_kernels: Loader, arch: str, stride: int, n: int) -> None:
    k = load_kernels("counters.cu", arch)
    x = np.arange(n * stride, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    stats = k.module.launch(
        "copy_strided",
        grid=(_cdiv(n, 128), 1, 1),
        block=(128, 1, 1),
        args=[x, y, n, stride],
    )
    np.testing.assert_array_equal(y, x[::stride][:n])
    warps = _warps(n)
    expect_load = _sectors([w * stride * 4 for w in warps], 4)
    expect_store = _sectors([w * 4 for w in warps], 4)
    assert stats.global_load_requests == len(warps)
    assert stats.global_load_bytes == 4 * n
    assert stats.global_load_sectors == expect_load
    assert stats.global_store_sectors == expect_store == _cdiv(4 * n, 32)
    # The launch as a whole touches each sector of x it reads once, however many warps share it.
    assert stats.global_load_unique_sectors == len({int(i) * stride * 4 // 32 for i in range(n)})
    assert stats.global_store_unique_sectors == _cdiv(4 * n, 32)
    # The excess over the coalesced minimum grows with the stride up to 8x (one sector per thread).
    ideal = _cdiv(4 * n, 32)
    if n % 32 == 0:
        assert stats.global_load_sectors == ideal * min(stride, 8)


def test_unique_sectors_count_a_shared_element_once(load_kernels: Loader, arch: str) -> None:
    """Every thread reads x[0] (a stride of 0): each warp's request fetches its sector, the
    launch as a whole touches it once (what an L2 cache turns the requests into)."""
    k = load_kernels("counters.cu", arch)
    n = 1000
    x = np.arange(8, dtype=np.float32) + 3
    y = np.zeros(n, dtype=np.float32)
    stats = k.module.launch(
        "copy_strided", grid=(_cdiv(n, 128), 1, 1), block=(128, 1, 1), args=[x, y, n, 0]
    )
    np.testing.assert_array_equal(y, np.full(n, x[0]))
    assert stats.global_load_sectors == len(_warps(n))
    assert stats.global_load_unique_sectors == 1
    assert stats.global_store_unique_sectors == _cdiv(4 * n, 32)


@pytest.mark.parametrize("n,block", [(1000, 256), (4096, 128)])
def test_vec_add_requests_bytes_sectors(
    load_kernels: Loader, arch: str, n: int, block: int
) -> None:
    k = load_kernels("elementwise.cu", arch)
    a = np.ones(n, dtype=np.float32)
    b = np.ones(n, dtype=np.float32)
    c = np.zeros(n, dtype=np.float32)
    stats = k.module.launch(
        "vec_add", grid=(_cdiv(n, block), 1, 1), block=(block, 1, 1), args=[a, b, c, n]
    )
    warps = _cdiv(n, 32)
    assert stats.global_load_requests == 2 * warps
    assert stats.global_store_requests == warps
    assert stats.global_load_bytes == 8 * n
    assert stats.global_store_bytes == 4 * n
    assert stats.global_load_sectors == 2 * _cdiv(4 * n, 32)
    assert stats.global_store_sectors == _cdiv(4 * n, 32)
    assert stats.shared_bank_conflicts == 0
    assert stats.barriers == 0


def _body_instruction_count(ptx: str, kernel: str) -> int:
    """Number of instruction statements in a straight-line kernel body (no labels/declarations)."""
    lines = ptx.splitlines()
    start = next(i for i, line in enumerate(lines) if f".entry {kernel}(" in line)
    body_start = next(i for i in range(start, len(lines)) if lines[i].strip() == "{")
    count = 0
    for line in lines[body_start + 1 :]:
        s = line.split("//")[0].strip()
        if s.startswith("}"):
            break
        if not s or s.startswith(".") or s.endswith(":"):
            continue
        count += s.count(";")
    return count


@pytest.mark.parametrize("grid,block", [(4, 128), (1, 32), (3, 96)])
def test_instruction_counts_uniform_kernel(
    load_kernels: Loader, arch: str, grid: int, block: int
) -> None:
    """n == grid * block: every warp runs every instruction of vec_add once, all 32 lanes active."""
    k = load_kernels("elementwise.cu", arch)
    n = grid * block
    a = np.ones(n, dtype=np.float32)
    c = np.zeros(n, dtype=np.float32)
    stats = k.module.launch("vec_add", grid=(grid, 1, 1), block=(block, 1, 1), args=[a, a, c, n])
    warps = grid * block // 32
    per_warp = _body_instruction_count(k.ptx, "vec_add")
    assert per_warp > 5
    assert stats.instructions == warps * per_warp
    assert stats.thread_instructions == 32 * stats.instructions
    assert sum(stats.instructions_by_class.values()) == stats.instructions


def test_thread_instructions_reflect_inactive_lanes(load_kernels: Loader, arch: str) -> None:
    """With a tail, fewer thread-instructions than 32 per warp-instruction are executed."""
    k = load_kernels("elementwise.cu", arch)
    n = 40  # second warp: 8 of 32 lanes do the work, 24 exit early
    a = np.ones(n, dtype=np.float32)
    c = np.zeros(n, dtype=np.float32)
    stats = k.module.launch("vec_add", grid=(1, 1, 1), block=(64, 1, 1), args=[a, a, c, n])
    assert stats.instructions > 0
    assert stats.thread_instructions < 32 * stats.instructions
    assert stats.thread_instructions > 16 * stats.instructions


def test_barrier_counter(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("reduction.cu", arch)
    x = np.ones(4096, dtype=np.float32)
    counts = []
    for grid in (2, 4):
        out = np.zeros(grid, dtype=np.float32)
        stats = k.module.launch(
            "block_reduce_sum",
            grid=(grid, 1, 1),
            block=(128, 1, 1),
            args=[x, out, 4096],
        )
        assert out.sum() == 4096.0
        counts.append(stats.barriers)
    assert counts[0] > 0
    assert counts[1] == 2 * counts[0]  # one __syncthreads per CTA: proportional to the grid


def _bank_extra(words_per_warp: list[np.ndarray]) -> int:
    """Extra wavefronts: per warp request, max over banks of distinct 4-byte words, minus one."""
    extra = 0
    for words in words_per_warp:
        per_bank: dict[int, set[int]] = {}
        for w in words.tolist():
            per_bank.setdefault(w % 32, set()).add(w)
        extra += max(len(s) for s in per_bank.values()) - 1
    return extra


@pytest.mark.parametrize(
    "stride,offset",
    [(0, 5), (1, 0), (2, 0), (3, 7), (4, 1), (16, 0), (32, 0), (33, 2), (64, 0)],
)
def test_shared_bank_conflicts_stride(
    load_kernels: Loader, arch: str, stride: int, offset: int
) -> None:
    k = load_kernels("counters.cu", arch)
    k.require("ld.shared.u32")
    block, grid = 64, 2
    x = np.arange(1024, dtype=np.int32) * 3
    out = np.zeros(grid * block, dtype=np.int32)
    stats = k.module.launch(
        "smem_stride_read",
        grid=(grid, 1, 1),
        block=(block, 1, 1),
        args=[x, out, stride, offset],
    )
    lane = np.arange(grid * block) % 32
    np.testing.assert_array_equal(out, x[(lane * stride + offset) & 1023])
    words = (np.arange(32) * stride + offset) & 1023
    expect = grid * (block // 32) * _bank_extra([words])  # the fill loop's stores are conflict-free
    assert stats.shared_bank_conflicts == expect
    assert stats.global_load_requests == grid * (block // 32) * (1024 // block)


@pytest.mark.parametrize("rows,cols", [(32, 32), (64, 96)])
def test_transpose_bank_conflicts_padded_vs_unpadded(
    load_kernels: Loader, arch: str, rows: int, cols: int
) -> None:
    k = load_kernels("shared.cu", arch)
    ptx_lines = k.ptx.splitlines()

    def shared_loads(kernel: str) -> int:
        start = next(i for i, line in enumerate(ptx_lines) if f".entry {kernel}(" in line)
        end = next(i for i in range(start, len(ptx_lines)) if ptx_lines[i].startswith("}"))
        return sum(1 for line in ptx_lines[start:end] if re.search(r"\bld\.shared\.", line))

    a = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    grid = (cols // 32, rows // 32, 1)
    results = {}
    for kernel in ("transpose_padded", "transpose_unpadded"):
        # The 4 column reads per thread are unrolled into 4 ld.shared instructions.
        assert shared_loads(kernel) == 4, kernel
        out = np.zeros((cols, rows), dtype=np.float32)
        stats = k.module.launch(kernel, grid=grid, block=(32, 8, 1), args=[a, out, rows, cols])
        np.testing.assert_array_equal(out, a.T)
        results[kernel] = stats.shared_bank_conflicts
    ctas = grid[0] * grid[1]
    load_requests = ctas * 8 * 4  # 8 warps per CTA, 4 column reads each
    # Unpadded: the 32 lanes of a column read hit 32 different words of one bank -> 31 extra.
    assert results["transpose_unpadded"] == load_requests * 31
    # Padded (row stride 33 words): each lane lands in a different bank -> no conflicts at all.
    assert results["transpose_padded"] == 0


@pytest.mark.parametrize("off", [0, 1, 4, 7, 8, 9])
def test_misaligned_warp_touches_extra_sector(load_kernels: Loader, arch: str, off: int) -> None:
    k = load_kernels("counters.cu", arch)
    n = 1024
    x = np.arange(n + 16, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    stats = k.module.launch(
        "copy_offset", grid=(n // 256, 1, 1), block=(256, 1, 1), args=[x, y, n, off]
    )
    np.testing.assert_array_equal(y, x[off : off + n])
    warps = _warps(n)
    expect = _sectors([(w + off) * 4 for w in warps], 4)
    assert expect == len(warps) * (4 if off % 8 == 0 else 5)
    assert stats.global_load_sectors == expect
    assert stats.global_store_sectors == len(warps) * 4


@pytest.mark.parametrize("n", [1024, 1000])
def test_sectors_for_2_and_8_byte_elements(load_kernels: Loader, arch: str, n: int) -> None:
    k = load_kernels("counters.cu", arch)
    a = np.arange(n, dtype=np.uint16)
    b = np.zeros(n, dtype=np.uint16)
    c = np.arange(n, dtype=np.float64)
    d = np.zeros(n)
    stats = k.module.launch(
        "copy_u16_f64", grid=(_cdiv(n, 128), 1, 1), block=(128, 1, 1), args=[a, b, c, d, n]
    )
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(d, c)
    warps = _warps(n)
    assert stats.global_load_requests == 2 * len(warps)
    assert stats.global_load_bytes == 10 * n
    expect = _sectors([w * 2 for w in warps], 2) + _sectors([w * 8 for w in warps], 8)
    assert stats.global_load_sectors == expect == _cdiv(2 * n, 32) + _cdiv(8 * n, 32)
    assert stats.global_store_sectors == expect
