"""Kernels at the edges of the tile dialect, compiled and run in the emulator against torch:
rank-0 tiles and views (a full reduction to one number, as a loss is), element accesses of
i1 views (bytes in memory), and the limits that make a compilation a diagnostic instead of
an abort or a compilation of minutes (issue 9).

The kernels are built by the functions and constants at module level, which
``replay/collect.py`` imports too."""

from __future__ import annotations

import numpy as np
import pytest
import tileopt
import torch
from tileopt.builder import KernelBuilder, View


def total_kernel() -> KernelBuilder:
    """sum(x) (up to 1024 elements) as a rank-0 tile, stored to the rank-0 view ``s`` and,
    reshaped, to the 1-element view ``v``."""
    kb = KernelBuilder("total", x=View("f32", 1), s=View("f32", 0), v=View("f32", 1))
    with kb as k:
        x = k.load(k.args.x, [0], [1024])
        total = k.splat(k.sum(x, axis=0), [])  # tensor<f32>
        assert total.shape == ()
        k.store(total, k.args.s, [])
        k.store(k.reshape(total, [1]), k.args.v, [0])
    return kb


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_full_reduction_to_rank0(target: str, n: int) -> None:
    """sum(x) as a rank-0 tile, stored to a rank-0 view and, reshaped, to a 1-element view."""
    kernel = tileopt.compile(total_kernel(), target=target)
    x = torch.randn(n)
    s, v = torch.zeros(()), torch.zeros(1)
    kernel.launch(1, x, s, v)
    torch.testing.assert_close(s, x.sum(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, x.sum().reshape(1), rtol=1e-5, atol=1e-5)


RANK0_REDUCE = """
tile.kernel @rowmax(%x: memref<?xf32>, %y: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] {padding = 0xFF800000 : f32} : memref<?xf32> -> tensor<512xf32>
  %m = tile.reduce %t {axis = 0} : tensor<512xf32> -> tensor<f32> {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %a, %b : f32
    tile.yield %r : f32
  }
  %one = tile.reshape %m : tensor<f32> -> tensor<1xf32>
  tile.store %one, %y[%c0] : tensor<1xf32>, memref<?xf32>
  tile.return
}
"""


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_reduce_to_rank0_then_reshape(target: str, num_warps: int) -> None:
    """tile.reduce to tensor<f32>, reshaped to tensor<1xf32> (it aborted in the lowering)."""
    kernel = tileopt.compile(RANK0_REDUCE, target=target, num_warps=num_warps)
    x = torch.randn(300)
    y = torch.zeros(1)
    kernel.launch(1, x, y)
    assert y.item() == x.max().item()


def rank0_scale_kernel() -> KernelBuilder:
    """y = 3 * x on rank-0 views."""
    kb = KernelBuilder("scale", x=View("f32", 0), y=View("f32", 0))
    with kb as k:
        k.store(k.load(k.args.x, [], []) * 3.0, k.args.y, [])
    return kb


def test_rank0_view_roundtrip(target: str) -> None:
    """A rank-0 view loaded whole, scaled and stored: every thread holds the element."""
    kernel = tileopt.compile(rank0_scale_kernel(), target=target, num_warps=2)
    x, y = torch.tensor(1.25), torch.zeros(())
    kernel.launch(1, x, y)
    assert y.item() == 3.75


I1_COPY = """
tile.kernel @flags(%x: memref<?xi1, strided<[?], offset: ?>>,
                   %y: memref<?xi1, strided<[?], offset: ?>>, %n: index) {
  %pid = tile.program_id {dim = 0}
  %in = arith.cmpi ult, %pid, %n : index
  scf.if %in {
    %v = memref.load %x[%pid] : memref<?xi1, strided<[?], offset: ?>>
    %true = arith.constant true
    %w = arith.xori %v, %true : i1
    memref.store %w, %y[%pid] : memref<?xi1, strided<[?], offset: ?>>
  }
  tile.return
}
"""


def test_i1_element_accesses(target: str) -> None:
    """memref.load/store of bool views (upstream's lowering asserts on i1): bytes, as Triton."""
    kernel = tileopt.compile(I1_COPY, target=target, num_warps=1)
    x = torch.rand(45) > 0.5
    y = torch.zeros(45, dtype=torch.bool)
    kernel.launch(45, x, y[:: 1], 45)
    assert torch.equal(y, ~x)


def test_index_arrays_are_refused() -> None:
    """array<index: ...> aborts MLIR 22's parser: a CompilationError with the position."""
    text = "tile.kernel @k() attributes {a = array<index: 1>} {\n  tile.return\n}\n"
    with pytest.raises(tileopt.CompilationError, match=r"1:34: array<index: \.\.\.> attributes"):
        tileopt.compile(text)


def test_tile_limits_are_diagnostics() -> None:
    """Tiles over 2^20 elements, or over the registers of their warps, are refused up front
    with a message naming the op (they took minutes and gigabytes before)."""
    for shape, warps, message in [
        ([2048, 1024], 4, r"tile of 2097152 elements \(2048x1024\), more than the limit"),
        ([128, 128], 1, r"needs at least 512 32-bit registers per thread on 1 warp"),
    ]:
        kb = KernelBuilder("big", y=View("f32", 2))
        with kb as k:
            k.store(k.full(shape, 1.0, "f32"), k.args.y, [0, 0])
        with pytest.raises(tileopt.CompilationError, match=message):
            tileopt.compile(kb, num_warps=warps)


def test_a_merged_constant_too_large_points_at_a_use() -> None:
    """Canonicalization merges equal constants made on different lines into one with no
    location: the register diagnostic then points at the line of a use."""
    kb = KernelBuilder("big", y=View("f32", 2))
    with kb as k:
        a, b = k.full([128, 128], 1.0, "f32"), k.full([128, 128], 1.0, "f32")
        k.store(a, k.args.y, [0, 0])
        k.store(b, k.args.y, [128, 0])
    with pytest.raises(tileopt.CompilationError,
                       match=r"needs at least 512 32-bit registers(.|\n)*"
                             r"test_edge_kernels\.py\":\d+:\d+\): used here"):
        tileopt.compile(kb, num_warps=1)


def copy_kernel() -> KernelBuilder:
    """y[:1024] = x[:1024], one tile."""
    kb = KernelBuilder("copy", x=View("f32", 1), y=View("f32", 1))
    with kb as k:
        k.store(k.load(k.args.x, [0], [1024]), k.args.y, [0])
    return kb


def test_layouts_for_more_warps_than_launched() -> None:
    """Layouts made for 8 warps cannot be compiled for 4 (half the tile had no owner)."""
    tilegpu = tileopt.compile(copy_kernel(), num_warps=8).asm["tilegpu"]
    assert "tile.num_warps = 8" in tilegpu
    with pytest.raises(tileopt.CompilationError, match="8"):
        tileopt.compile(tilegpu, start="tilegpu", num_warps=4)
    kernel = tileopt.compile(tilegpu, start="tilegpu")
    assert kernel.metadata.num_warps == 8
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    kernel.launch(1, x, y)
    np.testing.assert_array_equal(y, x)


def shift_kernel(offset: int) -> KernelBuilder:
    """A 16x64 tile of x at (offset, offset), padded with -7, stored to y at (0, 0) and, plus
    1, at (offset, 32 + offset); ``offset`` < 0 puts the tiles partly before the views."""
    kb = KernelBuilder("shift", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        t = k.load(k.args.x, [offset, offset], [16, 64], padding=-7.0)
        k.store(t, k.args.y, [0, 0])
        k.store(t + 1.0, k.args.y, [offset, 32 + offset])
    return kb


def shift_expected(x: torch.Tensor, offset: int) -> torch.Tensor:
    """What ``shift_kernel(offset)`` leaves in a y of zeros shaped like the 20x70 ``x``."""
    tile = torch.full((16, 64), -7.0)
    expected = torch.zeros(20, 70)
    for i in range(16):
        for j in range(64):
            if 0 <= i + offset < 20 and 0 <= j + offset < 70:
                tile[i, j] = x[i + offset, j + offset]
    expected[:16, :64] = tile
    for i in range(16):
        for j in range(64):
            r, c = i + offset, j + 32 + offset
            if 0 <= r < 20 and 0 <= c < 70:
                expected[r, c] = tile[i, j] + 1.0
    return expected


@pytest.mark.parametrize("offset", [-1, -2, -5, -33])
def test_negative_tile_offsets(target: str, offset: int) -> None:
    """Tiles partly before the view's start read padding and store nothing there (an index
    add marked no-unsigned-wrap once let LLVM fold every bounds check to false)."""
    kernel = tileopt.compile(shift_kernel(offset), target=target)
    x = torch.randn(20, 70)
    y = torch.zeros(20, 70)
    kernel.launch(1, x, y)
    torch.testing.assert_close(y, shift_expected(x, offset))


TO_BOOL = """
tile.kernel @to_bool(%x: memref<?xf32>, %y: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xf32> -> tensor<64xf32>
  %b = arith.fptoui %t : tensor<64xf32> to tensor<64xi1>
  tile.store %b, %y[%c0] : tensor<64xi1>, memref<?xi1>
  tile.return
}
"""


def test_float_to_bool_casts(target: str) -> None:
    """fptoui/fptosi to i1 truncate toward zero like torch's float -> bool of an integer-valued
    float (NVPTX once tested the float's bits for zero: 0.0 gave 1, 1.0 gave 0)."""
    kernel = tileopt.compile(TO_BOOL, target=target, num_warps=1)
    x = torch.tensor([0.0, 0.5, 1.0, 1.5, 0.25, 1.75] * 10)
    y = torch.zeros(60, dtype=torch.bool)
    kernel.launch(1, x, y)
    assert torch.equal(y, x.trunc().bool())


BOOL_TO_FLOAT = """
tile.kernel @bool_to_float(%x: memref<?xi1>, %flag: i1, %s: memref<?xbf16>, %u: memref<?xbf16>,
                           %h: memref<?xf16>, %f: memref<?xbf16>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<?xi1> -> tensor<64xi1>
  %signed = arith.sitofp %t : tensor<64xi1> to tensor<64xbf16>
  tile.store %signed, %s[%c0] : tensor<64xbf16>, memref<?xbf16>
  %unsigned = arith.uitofp %t : tensor<64xi1> to tensor<64xbf16>
  tile.store %unsigned, %u[%c0] : tensor<64xbf16>, memref<?xbf16>
  %half = arith.sitofp %t : tensor<64xi1> to tensor<64xf16>
  tile.store %half, %h[%c0] : tensor<64xf16>, memref<?xf16>
  %one = arith.sitofp %flag : i1 to bf16
  %splat = tile.splat %one : bf16 -> tensor<2xbf16>
  tile.store %splat, %f[%c0] : tensor<2xbf16>, memref<?xbf16>
  tile.return
}
"""


def test_bool_to_float_casts(target: str) -> None:
    """sitofp from i1 gives -1.0 for true (a signed 1-bit integer), uitofp 1.0: LLVM 22's NVPTX
    back end gave 1.0 for sitofp to bf16 on sm_90 (its cvt.rn.bf16.s32 of an unsigned bit)."""
    kernel = tileopt.compile(BOOL_TO_FLOAT, target=target, num_warps=1)
    x = torch.tensor([True, False, False, True, True] * 12)
    outs = [torch.zeros(60, dtype=dtype) for dtype in (torch.bfloat16, torch.bfloat16,
                                                        torch.float16)]
    for flag in (True, False):
        f = torch.zeros(2, dtype=torch.bfloat16)
        kernel.launch(1, x, flag, *outs, f)
        assert torch.equal(f, torch.full((2,), -1.0 if flag else 0.0, dtype=torch.bfloat16))
    assert torch.equal(outs[0], -x.to(torch.bfloat16))
    assert torch.equal(outs[1], x.to(torch.bfloat16))
    assert torch.equal(outs[2], -x.to(torch.float16))


def shifts_kernel(ty: str) -> str:
    """Shifts of x by s three ways, select(s < bits, x << s, 0) (a bounds-checked shift) and
    sext(x << (bits - 1) with nsw) to i64 (defined where x is 0 or -1)."""
    view, tile, wide = f"memref<?x{ty}>", f"tensor<32x{ty}>", "tensor<32xi64>"
    bits = int(ty[1:])
    outs = ", ".join(f"%o{i}: {view}" for i in range(4))
    extend = f"arith.extsi %n : {tile} to {wide}" if bits < 64 else "arith.addi %n, %zero : " + tile
    return f"""
tile.kernel @shifts(%x: {view}, %s: {view}, {outs}, %wide: memref<?xi64>) {{
  %c0 = arith.constant 0 : index
  %xv = tile.load %x[%c0] : {view} -> {tile}
  %sv = tile.load %s[%c0] : {view} -> {tile}
  %l = arith.shli %xv, %sv : {tile}
  %r = arith.shrsi %xv, %sv : {tile}
  %u = arith.shrui %xv, %sv : {tile}
  %width = arith.constant dense<{bits}> : {tile}
  %zero = arith.constant dense<0> : {tile}
  %in = arith.cmpi ult, %sv, %width : {tile}
  %guarded = arith.select %in, %l, %zero : tensor<32xi1>, {tile}
  %top = arith.constant dense<{bits - 1}> : {tile}
  %n = arith.shli %xv, %top overflow<nsw> : {tile}
  %e = {extend}
  tile.store %l, %o0[%c0] : {tile}, {view}
  tile.store %r, %o1[%c0] : {tile}, {view}
  tile.store %u, %o2[%c0] : {tile}, {view}
  tile.store %guarded, %o3[%c0] : {tile}, {view}
  tile.store %e, %wide[%c0] : {wide}, memref<?xi64>
  tile.return
}}"""


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_shifts_by_any_amount(target: str, dtype: torch.dtype) -> None:
    """Amounts outside [0, bits) (poison in arith) shift as torch's: 0 shifting left or
    logically right, the sign arithmetically right. LLVM 22's NVPTX back end shifted a
    bounds-checked i64 shift by the amount's low 32 bits, and made sext(shl nsw x, bits - 1)
    a multiply by +2^(bits-1)."""
    bits = torch.iinfo(dtype).bits
    kernel = tileopt.compile(shifts_kernel(f"i{bits}"), target=target, num_warps=1)
    amounts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits, -1, -bits]
    if dtype == torch.int64:
        amounts += [2**32, 2**32 + 1, 2**33 + 5, -(2**40)]
    gen = torch.Generator().manual_seed(bits)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (32,), generator=gen, dtype=dtype)
    x[:4] = torch.tensor([-1, 0, -1, 0])
    s = torch.tensor(amounts, dtype=dtype)[torch.randint(0, len(amounts), (32,), generator=gen)]
    outs = [torch.zeros(32, dtype=dtype) for _ in range(4)]
    wide = torch.zeros(32, dtype=torch.int64)
    kernel.launch(1, x, s, *outs, wide)
    left = torch.bitwise_left_shift(x, s)
    assert torch.equal(outs[0], left)
    assert torch.equal(outs[1], torch.bitwise_right_shift(x, s))
    logical = [(int(a) % 2**bits) >> int(b) if 0 <= int(b) < bits else 0
               for a, b in zip(x, s, strict=True)]
    signed = [v - 2**bits if v >= 2 ** (bits - 1) else v for v in logical]
    assert torch.equal(outs[2], torch.tensor(signed, dtype=dtype))
    assert torch.equal(outs[3], left)
    top = -(2 ** (bits - 1))
    assert torch.equal(wide[:4], torch.tensor([top, 0, top, 0]))


def sign_kernel() -> KernelBuilder:
    """y = 1 if x > 0 else -1, on rank-0 views (a where() of rank-0 tiles)."""
    kb = KernelBuilder("sign", x=View("f32", 0), y=View("f32", 0))
    with kb as k:
        x = k.load(k.args.x, [], [])
        k.store(k.where(x > 0.0, 1.0, -1.0), k.args.y, [])
    return kb


@pytest.mark.parametrize("value", [-1.5, 2.0])
def test_where_on_rank0_tiles(target: str, value: float) -> None:
    """where() of a rank-0 condition and two numbers is a rank-0 tile (its shape () once read
    as 'no shape')."""
    kernel = tileopt.compile(sign_kernel(), target=target, num_warps=1)
    y = torch.zeros(())
    kernel.launch(1, torch.tensor(value), y)
    assert y.item() == (1.0 if value > 0 else -1.0)


def exponentials_kernel() -> KernelBuilder:
    """y = 2**x, z = 2**x with ``ftz`` (results below 2**-126 may flush to zero)."""
    kb = KernelBuilder("exponentials", x=View("f32", 1), y=View("f32", 1), z=View("f32", 1))
    with kb as k:
        x = k.load(k.args.x, [0], [128])
        k.store(k.exp2(x), k.args.y, [0])
        k.store(k.exp2(x, ftz=True), k.args.z, [0])
    return kb


def test_exp2_keeps_subnormal_results_unless_ftz(target: str) -> None:
    """ex2.approx keeps results down to 2**-149 (relative error below 2**-22); with ftz
    (ex2.approx.ftz, as Triton's tl.math.exp2) those below 2**-126 are +0, the others
    the same."""
    kernel = tileopt.compile(exponentials_kernel(), target=target)
    ptx = str(kernel.asm["ptx"])
    assert "ex2.approx.f32" in ptx and "ex2.approx.ftz.f32" in ptx
    x = torch.linspace(-140.0, 20.0, 128)
    x[:3] = torch.tensor([float("-inf"), float("inf"), float("nan")])
    y, z = torch.full((128,), float("nan")), torch.full((128,), float("nan"))
    kernel.launch(1, x, y, z)
    want = torch.exp2(x.double())
    small = want < 2.0**-126  # -inf's 0 among them
    torch.testing.assert_close(y.double(), want, rtol=2.0**-22, atol=2.0**-149, equal_nan=True)
    torch.testing.assert_close(z[~small].double(), want[~small], rtol=2.0**-22, atol=0,
                               equal_nan=True)
    assert (z[small] == 0).all() and (y[small][1:] > 0).all()
