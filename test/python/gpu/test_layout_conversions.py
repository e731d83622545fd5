"""Differential tests: `tile.convert_layout` between random layouts, run in the emulator.

A conversion goes through shared memory, laid out padded or XOR-swizzled (whichever takes the
fewest bank conflicts), in slices for large tiles. Each case loads a tile in one layout,
converts it to another and stores it: the output must equal the input bit for bit, and the
emulator checks every shared-memory access for races and bounds. The cases come from a fixed
seed: blocked layouts with random vectors, lane and warp splits and orders, and the mma
accumulator layout (warp columns 8 apart as mma.sync's, or a wider blockN as wgmma's), over
tile shapes from 8 to 256 and 8-, 16- and 32-bit elements.
"""

from __future__ import annotations

import random

import pytest
import tileopt
import torch

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i8": torch.int8}


def _split(rng: random.Random, total: int) -> list[int]:
    """A random split of the power of two ``total`` over two dimensions."""
    log = total.bit_length() - 1
    first = rng.randint(0, log)
    return [1 << first, 1 << (log - first)]


def _layout(rng: random.Random, warps: int, shape: tuple[int, int]) -> tuple[str, int]:
    """A random layout for ``shape`` on ``warps`` warps, and the elements a thread holds
    (a layout larger than the tile replicates it)."""
    def held(per_thread: list[int], cover: list[int]) -> int:
        return (per_thread[0] * max(1, shape[0] // cover[0])
                * per_thread[1] * max(1, shape[1] // cover[1]))

    if rng.random() < 0.25:
        wpc = _split(rng, warps)
        block_n = rng.choice([8, 8, 16, 32, 64])
        # Each warp's 16 x blockN blocks: 2 x 2 elements a thread per 8 columns, fewer
        # where the tile is narrower than a block.
        text = f"#tile.mma<warpsPerCTA = [{', '.join(map(str, wpc))}], blockN = {block_n}>"
        return text, held([2, 2 * min(block_n, shape[1]) // 8],
                          [16 * wpc[0], block_n * wpc[1]])
    spt = [rng.choice([1, 1, 2, 4, 8]) for _ in range(2)]
    tpw, wpc = _split(rng, 32), _split(rng, warps)
    order = rng.choice([[1, 0], [1, 0], [0, 1]])

    def lst(v: list[int]) -> str:
        return ", ".join(map(str, v))

    text = (f"#tile.blocked<sizePerThread = [{lst(spt)}], threadsPerWarp = [{lst(tpw)}], "
            f"warpsPerCTA = [{lst(wpc)}], order = [{lst(order)}]>")
    return text, held(spt, [s * t * w for s, t, w in zip(spt, tpw, wpc, strict=True)])


def _cases(seed: int, count: int) -> list[tuple[str, str, str, tuple[int, int], int, str]]:
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        warps = rng.choice([1, 2, 4, 8])
        shape = (rng.choice([8, 16, 32, 64, 128]), rng.choice([8, 16, 32, 64, 128, 256]))
        (src, held_src), (dst, held_dst) = _layout(rng, warps, shape), _layout(rng, warps, shape)
        if max(held_src, held_dst) > 64:  # a small kernel: at most 64 elements a thread
            continue
        cases.append((src, dst, rng.choice(list(TORCH)), shape, warps,
                      rng.choice(["sm_80", "sm_90a"])))
    return cases


def _kernel(src: str, dst: str, dtype: str, shape: tuple[int, int]) -> str:
    view = f"memref<?x?x{dtype}, strided<[?, 1]>>"
    arg = f"{view} {{tile.divisibility = 16}}"
    tile = f"tensor<{shape[0]}x{shape[1]}x{dtype}"
    return f"""
#A = {src}
#B = {dst}
tile.kernel @convert(%x: {arg}, %y: {arg}) {{
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : {view} -> {tile}, #A>
  %u = tile.convert_layout %t : {tile}, #A> -> {tile}, #B>
  tile.store %u, %y[%c0, %c0] : {tile}, #B>, {view}
  tile.return
}}
"""


@pytest.mark.parametrize("case", _cases(20261125, 40), ids=lambda c: f"{c[2]}-{c[3]}-w{c[4]}")
def test_conversion_moves_every_element(
        case: tuple[str, str, str, tuple[int, int], int, str]) -> None:
    src, dst, dtype, shape, warps, target = case
    kernel = tileopt.compile(_kernel(src, dst, dtype, shape), target=target,
                             num_warps=warps, start="tilegpu")
    gen = torch.Generator().manual_seed(0)
    # Rows 16-byte aligned (the views' divisibility): i8 rows of 8 sit in rows of 16.
    row = -(-shape[1] * TORCH[dtype].itemsize // 16) * 16 // TORCH[dtype].itemsize
    x = torch.randint(-100, 100, (shape[0], row), generator=gen).to(TORCH[dtype])
    y = torch.zeros_like(x)
    kernel.launch((1, 1, 1), x[:, :shape[1]], y[:, :shape[1]], device="emulator")
    assert torch.equal(y[:, :shape[1]], x[:, :shape[1]]), f"{src} -> {dst}"


# Conversions of 16-bit tiles into whole 32-bit words per thread can go through ldmatrix
# (StagingLayout::fragments), in slices past the 16 KiB aim; reshapes that spread the elements
# alike move nothing. Each must still move every element where it belongs.
_MMA41 = "#tile.mma<warpsPerCTA = [4, 1]>"
_ROWS8 = ("#tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], "
          "order = [1, 0]>")
_FRAGMENT_CASES = [
    # attention's output: the mma accumulator to rows of 8, an ldmatrix.x4 per 8 elements
    (_MMA41, _ROWS8, "f16", (64, 64), 4, 4, 8192),
    # 32 KiB in two slices of 16 KiB
    (_MMA41, _ROWS8, "f16", (128, 128), 4, 16, 16384),
    # bf16 on 8 warps
    ("#tile.mma<warpsPerCTA = [8, 1]>",
     "#tile.blocked<sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [8, 1], "
     "order = [1, 0]>", "bf16", (128, 128), 8, 8, 32768),
    # pairs from a blocked layout; as free of bank conflicts in two slices as in one
    ("#tile.blocked<sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], "
     "order = [1, 0]>", _ROWS8, "f16", (64, 64), 4, 4, 4096),
]


@pytest.mark.parametrize("case", _FRAGMENT_CASES, ids=lambda c: f"{c[2]}-{c[3]}-w{c[4]}")
def test_fragment_restage_moves_every_element(
        case: tuple[str, str, str, tuple[int, int], int, int, int]) -> None:
    src, dst, dtype, shape, warps, calls, shared = case
    kernel = tileopt.compile(_kernel(src, dst, dtype, shape), target="sm_80", num_warps=warps,
                             start="tilegpu")
    assert str(kernel.asm["ptx"]).count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == calls
    assert kernel.metadata.shared_bytes == shared
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(-100, 100, shape, generator=gen).to(TORCH[dtype])
    y = torch.zeros_like(x)
    kernel.launch((1, 1, 1), x, y, device="emulator")
    assert torch.equal(y, x)


_RESHAPE_KERNEL = """
#A = {src}
#B = {dst}
tile.kernel @reshape(%x: memref<?x?x?xf16, strided<[?, ?, 1]>> {{tile.divisibility = 16}},
                     %y: memref<?x?xf16, strided<[?, 1]>> {{tile.divisibility = 16}}) {{
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0, %c0] : memref<?x?x?xf16, strided<[?, ?, 1]>>
         -> tensor<1x64x64xf16, #A>
  %u = tile.reshape %t : tensor<1x64x64xf16, #A> -> tensor<64x64xf16, #B>
  tile.store %u, %y[%c0, %c0] : tensor<64x64xf16, #B>, memref<?x?xf16, strided<[?, 1]>>
  tile.return
}}
"""


@pytest.mark.parametrize(("src", "dst", "shared"), [
    # the same distribution with a unit dimension more: registers stay put
    ("#tile.blocked<sizePerThread = [1, 1, 8], threadsPerWarp = [1, 4, 8], "
     "warpsPerCTA = [1, 4, 1], order = [2, 1, 0]>", _ROWS8, 0),
    # another distribution: through ldmatrix
    ("#tile.blocked<sizePerThread = [1, 2, 2], threadsPerWarp = [1, 8, 4], "
     "warpsPerCTA = [1, 1, 4], order = [2, 1, 0]>", _ROWS8, 64 * 64 * 2),
], ids=["in-place", "fragments"])
def test_reshape_moves_every_element(src: str, dst: str, shared: int) -> None:
    kernel = tileopt.compile(_RESHAPE_KERNEL.format(src=src, dst=dst), target="sm_80",
                             num_warps=4, start="tilegpu")
    assert kernel.metadata.shared_bytes == shared
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(-100, 100, (1, 64, 64), generator=gen).to(torch.float16)
    y = torch.zeros(64, 64, dtype=torch.float16)
    kernel.launch((1, 1, 1), x, y, device="emulator")
    assert torch.equal(y, x[0])
