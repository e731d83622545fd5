"""What a kernel may assume about its views, promised at compile time and checked at launch
(Triton's JIT specialisations): compile(..., aligned=True) (tile.divisibility: no run-time
alignment check), divisible_sizes=True (tile.size_divisibility: no scalar tails) and
int32_indexing=True (tile.index_bitwidth = 32: 32-bit index arithmetic).

``replay/collect.py`` imports the kernel builders at module level (``masks_kernel``)."""

from __future__ import annotations

import pytest
import tileopt
import torch
from tileopt import kernels
from tileopt.builder import KernelBuilder, View
from tileopt.runtime.abi import ArgumentError, KernelParam
from tileopt.runtime.ptx import ptx_instruction_count


@pytest.fixture(scope="module")
def both() -> tuple[tileopt.Kernel, tileopt.Kernel]:
    plain = tileopt.compile(kernels.vector_add(dtype="f32", block=1024), target="sm_90")
    aligned = tileopt.compile(
        kernels.vector_add(dtype="f32", block=1024), target="sm_90", aligned=True
    )
    return plain, aligned


def test_views_carry_the_promise(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    plain, aligned = both
    assert "tile.divisibility = 16" in str(aligned.asm["tile"])
    assert all(p.divisibility == 16 for p in aligned.metadata.abi if p.kind == "view")
    assert all(p.divisibility is None for p in plain.metadata.abi)


def test_no_fallback_code(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    plain, aligned = both
    name = aligned.metadata.name
    small = ptx_instruction_count(str(aligned.asm["ptx"]), name)
    large = ptx_instruction_count(str(plain.asm["ptx"]), name)
    assert small < 0.75 * large, (small, large)
    assert "ld.global.v4.b32" in str(aligned.asm["ptx"])


@pytest.mark.parametrize("n", [1024, 5000, 4097])
def test_aligned_launch_matches_torch(
    both: tuple[tileopt.Kernel, tileopt.Kernel], n: int
) -> None:
    _, aligned = both
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    stats = aligned.launch(((n + 1023) // 1024,), x, y, out, device="emulator")
    assert torch.equal(out, x + y)
    assert stats.global_load_sectors == 2 * ((n * 4 + 31) // 32)


def test_misaligned_arrays_are_rejected(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> None:
    _, aligned = both
    x = torch.randn(1025)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*divisibility 16>\) was compiled"):
        aligned.launch((1,), x[1:], x[1:], torch.empty(1024), device="emulator")


@pytest.fixture(scope="module")
def aligned_matmul() -> tileopt.Kernel:
    return tileopt.compile(kernels.matmul("f16", 64, 16, 64), target="sm_80", aligned=True)


def test_a_column_major_array_is_told_its_innermost_stride(
    aligned_matmul: tileopt.Kernel,
) -> None:
    a = torch.randn(104, 63).half().t()  # strides (1, 63): the promise broken too
    with pytest.raises(ArgumentError, match=r"static stride 1 in dimension 1, got strides "
                                            r"\(1, 63\)"):
        aligned_matmul.launch((1, 1), a, torch.randn(104, 16).half(), torch.zeros(63, 16),
                              device="emulator")


def test_a_column_operand_breaks_the_promise(aligned_matmul: tileopt.Kernel) -> None:
    """A contiguous (K, 1) operand has a row stride of 1, which the kernel does not know: its
    rows lie 2 bytes apart, and each 16-byte cp.async of a row would read a misaligned
    address. The launcher names it; an aligned copy of the same values runs."""
    a, b = torch.randn(70, 104).half(), torch.randn(104, 1).half()
    with pytest.raises(ArgumentError, match=r"argument 1 \(b: .*strides the kernel does not "
                                            r"know \(\(1, 1\), in elements, of sizes \(104, 1\)\)"):
        aligned_matmul.launch((2, 1), a, b, torch.zeros(70, 1), device="emulator")
    b16 = torch.zeros(104, 8).half()[:, :1]  # the same column, rows 16 bytes apart
    b16.copy_(b)
    c = torch.zeros(70, 8)[:, :1]
    aligned_matmul.launch(kernels.matmul_grid(a.shape, b.shape, 64, 16), a, b16, c,
                          device="emulator")
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_empty_arrays_keep_any_promise(aligned_matmul: tileopt.Kernel) -> None:
    a = torch.empty_strided((65, 0), (3, 1), dtype=torch.half)  # a row stride never used
    b = torch.randn(0, 16).half()
    c = torch.full((65, 16), float("nan"))
    aligned_matmul.launch(kernels.matmul_grid(a.shape, b.shape, 64, 16), a, b, c,
                          device="emulator")
    assert torch.equal(c, torch.zeros(65, 16))


def test_param_text_round_trips() -> None:
    p = KernelParam.view("x", "f16", 2, strides=(None, 1), divisibility=16)
    assert str(p) == "x: view<?x?xf16, strides [?, 1], divisibility 16>"
    assert KernelParam.parse(str(p)) == p


def test_aligned_needs_tile_ir() -> None:
    for option in ("aligned", "divisible_sizes", "int32_indexing"):
        with pytest.raises(tileopt.CompilationError, match=f"{option}=.*need start='tile'"):
            tileopt.compile(".version 8.0", start="ptx", **{option: True})


@pytest.fixture(scope="module")
def divisible(both: tuple[tileopt.Kernel, tileopt.Kernel]) -> tileopt.Kernel:
    return tileopt.compile(
        kernels.vector_add(dtype="f32", block=1024), target="sm_90", aligned=True,
        divisible_sizes=True,
    )


def test_divisible_sizes_drop_the_scalar_tails(
    both: tuple[tileopt.Kernel, tileopt.Kernel], divisible: tileopt.Kernel
) -> None:
    _, aligned = both
    assert "tile.size_divisibility = array<i64: 16>" in str(divisible.asm["tile"])
    assert all(p.size_divisibility == (16,) for p in divisible.metadata.abi)
    ptx = str(divisible.asm["ptx"])
    assert "ld.global.b32" not in ptx and "st.global.b32" not in ptx
    assert "bra" not in ptx  # no tail branches at all
    name = divisible.metadata.name
    assert ptx_instruction_count(ptx, name) < 0.7 * ptx_instruction_count(
        str(aligned.asm["ptx"]), name
    )


@pytest.mark.parametrize("n", [16, 1024, 4112, 5008])
def test_divisible_sizes_launch_matches_torch(divisible: tileopt.Kernel, n: int) -> None:
    x, y, out = torch.randn(n), torch.randn(n), torch.full((n + 64,), 7.0)
    stats = divisible.launch(((n + 1023) // 1024,), x, y, out[:n], device="emulator")
    assert torch.equal(out[:n], x + y)
    assert torch.all(out[n:] == 7.0)  # nothing written past the view
    assert stats.global_load_sectors == 2 * ((n * 4 + 31) // 32)


def test_other_sizes_are_rejected(divisible: tileopt.Kernel) -> None:
    x = torch.randn(5000)
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*size_divisibility \[16\]>\) was "
                       r"compiled for sizes that are multiples of \[16\].*\(5000,\)"):
        divisible.launch((5,), x, x, torch.empty(5000), device="emulator")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shift", [0, 1])
def test_divisible_rows_unaligned_or_aligned(dtype: str, shift: int) -> None:
    """Only the size promise: the vector path (run-time alignment check) has whole runs, the
    scalar path (misaligned rows: ``shift``) stays correct; rows end inside a tile."""
    k = tileopt.compile(kernels.bias_gelu(dtype, block_m=16, block_n=128), target="sm_80",
                        divisible_sizes=True)
    assert [p.size_divisibility for p in k.metadata.abi] == [(1, 16), (16,), (1, 16)]
    torch_dtype = getattr(torch, {"f32": "float32", "f16": "float16"}[dtype])
    m, n = 21, 784
    base = torch.randn(m * n + shift).to(torch_dtype)
    x = base[shift:].view(m, n)
    bias = torch.randn(n).to(torch_dtype)
    out = torch.full((m, n + 16), 7.0, dtype=torch_dtype)
    k.launch(kernels.bias_gelu_grid((m, n), 16, 128), x, bias, out[:, :n], device="emulator")
    expect = torch.nn.functional.gelu(x.float() + bias.float())
    tol = 1e-5 if dtype == "f32" else 2e-3
    torch.testing.assert_close(out[:, :n].float(), expect, atol=tol, rtol=tol)
    assert torch.all(out[:, n:] == 7.0)


def test_size_divisibility_param_text_round_trips() -> None:
    p = KernelParam.view("x", "f32", 2, strides=(None, 1), size_divisibility=(1, 16))
    assert str(p) == "x: view<?x?xf32, strides [?, 1], size_divisibility [1, 16]>"
    assert KernelParam.parse(str(p)) == p
    assert KernelParam.view("y", "f32", 1, size_divisibility=(1,)).size_divisibility is None
    with pytest.raises(ArgumentError, match="size_divisibility"):
        KernelParam.view("z", "f32", 2, size_divisibility=(16,))



def test_int32_indexing_uses_32_bit_index_arithmetic() -> None:
    # Both aligned: without that promise the unaligned fallback dominates the registers.
    plain = tileopt.compile(kernels.vector_add("f32", block=1024), target="sm_90", aligned=True)
    narrow = tileopt.compile(kernels.vector_add("f32", block=1024), target="sm_90",
                             aligned=True, int32_indexing=True)
    assert all(p.index_bitwidth == 32 for p in narrow.metadata.abi)
    assert "tile.index_bitwidth = 32" in str(narrow.asm["tile"])
    ptx = str(narrow.asm["ptx"])
    assert "setp.lt.u32" in ptx and "setp.lt.u64" not in ptx  # bounds checks in 32 bits
    assert "setp.lt.u64" in str(plain.asm["ptx"])
    assert narrow.metadata.registers < plain.metadata.registers
    for n in (1, 1000, 5000):
        x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
        narrow.launch((-(-n // 1024),), x, y, out, device="emulator")
        assert torch.equal(out, x + y)


def test_arrays_too_large_for_32_bit_indices_are_rejected() -> None:
    import numpy as np

    k = tileopt.compile(kernels.transpose("f32"), target="sm_80", int32_indexing=["y"])
    assert [p.index_bitwidth for p in k.metadata.abi] == [None, 32]
    small = np.zeros((4, 4), np.float32)
    # A view that reaches past 2**31 elements (never touched: the launch is refused first).
    huge = np.lib.stride_tricks.as_strided(small, shape=(4, 4), strides=(2**30 * 4, 4))
    with pytest.raises(ArgumentError, match=r"argument 1 \(y: .*index_bitwidth 32>\) was "
                       r"compiled with 32-bit indices .*below 2\*\*31"):
        k.launch((1, 1), small, huge, device="emulator")
    from tileopt.runtime.abi import check_args

    check_args(k.metadata.abi, [huge, small], "transpose")  # x has 64-bit indices: fine
    p = KernelParam.view("x", "f32", 2, index_bitwidth=32)
    assert str(p) == "x: view<?x?xf32, index_bitwidth 32>"
    assert KernelParam.parse(str(p)) == p


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_kernels_with_every_promise_match_torch(target: str) -> None:
    """The benchmark's configuration (aligned, sizes divisible by 16, 32-bit indices, views
    of one shape sharing their sizes)."""
    promises = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}
    m, n = 48, 784
    x = torch.randn(m, n)
    w, b = torch.randn(n), torch.randn(n)

    k = tileopt.compile(kernels.layer_norm(), target, **promises,
                        same_shapes=[("x", "y"), ("weight", "bias")])
    y = torch.zeros(m, n)
    k.launch(kernels.layer_norm_grid((m, n)), x, w, b, y, 1e-5)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5),
                               atol=2e-5, rtol=1e-5)

    k = tileopt.compile(kernels.softmax(), target, **promises, same_shapes=[("x", "y")])
    y = torch.zeros(m, n)
    k.launch(kernels.softmax_grid((m, n)), x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), atol=1e-7, rtol=1e-5)

    k = tileopt.compile(kernels.col_sum(), target, **promises)
    out = torch.zeros(n)
    k.launch(kernels.col_sum_grid((m, n)), x, out)
    torch.testing.assert_close(out, x.sum(0), atol=1e-4, rtol=1e-5)

    a, bb = torch.randn(64, 96).half(), torch.randn(96, 80).half()
    k = tileopt.compile(kernels.matmul("f16"), target, **promises)
    assert "cp.async.cg.shared.global" in str(k.asm["ptx"])  # operands straight to shared
    c = torch.zeros(64, 80)
    k.launch(kernels.matmul_grid((64, 96), (96, 80)), a, bb, c)
    torch.testing.assert_close(c, a.float() @ bb.float(), atol=1e-2, rtol=1e-3)


def masks_kernel(bound: int | str) -> KernelBuilder:
    """y = where(i < bound, x, -1) + where(bound <= i, 100, 0) over 128 elements a program,
    with ``bound`` a constant or, for ``"n"``, the size of x."""
    view = View("f32", 1, contiguous=True)
    kb = KernelBuilder("masks", x=view, y=view)
    with kb as k:
        start = k.program_id(0) * 128
        idx = k.iota(128) + k.cast(start, "i32")
        limit = k.cast(k.size(k.args.x, 0), "i32") if bound == "n" else bound
        below = idx < limit
        above = limit <= idx  # the same test, operands swapped
        x = k.load(k.args.x, [start], [128])
        k.store(k.where(below, x, -1.0) + k.where(above, 100.0, 0.0), k.args.y, [start])
    return kb


@pytest.mark.parametrize("bound", [96, 98, 97, "n"])
@pytest.mark.parametrize("divisible", [False, True])
def test_iota_masks_against_numpy(bound: int | str, divisible: bool) -> None:
    """Masks from iota compared with a bound that is a multiple of 4 (constant or a size
    promised by divisible_sizes), of 2, or odd: compares shared over a thread's elements
    must still give every element its own answer."""
    import numpy as np

    kernel = tileopt.compile(masks_kernel(bound), target="sm_80", num_warps=1,
                             divisible_sizes=divisible)
    n = 160
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    kernel.launch((2,), x, y, device="emulator")
    limit = n if bound == "n" else bound
    np.testing.assert_array_equal(y, np.where(np.arange(n) < limit, x, 99.0))


def test_same_shapes_share_one_bounds_check() -> None:
    promises = {"aligned": True, "divisible_sizes": True, "int32_indexing": True}
    alone = tileopt.compile(kernels.vector_add("f32", block=1024), "sm_90", **promises)
    shared = tileopt.compile(kernels.vector_add("f32", block=1024), "sm_90", **promises,
                             same_shapes=[("x", "y", "out")])
    assert [p.same_shape_as for p in shared.metadata.abi] == [None, 0, 0]
    ptx = str(shared.asm["ptx"])
    # One bounds check per vector for the three accesses, one size parameter loaded.
    assert ptx.count("setp.") == 2 and str(alone.asm["ptx"]).count("setp.") == 6
    for n in (16, 4096, 5008):
        x, y, out = torch.randn(n), torch.randn(n), torch.full((n + 32,), 7.0)
        shared.launch((-(-n // 1024),), x, y, out[:n], device="emulator")
        assert torch.equal(out[:n], x + y) and torch.all(out[n:] == 7.0)
    with pytest.raises(ArgumentError, match=r"argument 2 \(out: .*same_shape_as 0>\) was "
                       r"compiled with the shape of argument 0 \(x\) .*\(32,\) and \(16,\)"):
        shared.launch((1,), torch.randn(16), torch.randn(16), torch.empty(32))


def test_same_shapes_groups_are_checked() -> None:
    kb = kernels.vector_add("f32")
    for groups, message in [
        (["x"], "groups of two or more view names"),
        ([("x", "w")], "names 'w', but the kernel's arguments are x, y, out"),
        ([("x", "y"), ("y", "out")], "names 'y' more than once"),
    ]:
        with pytest.raises(tileopt.CompilationError, match=message):
            tileopt.compile(kb, "sm_80", same_shapes=groups)
    with pytest.raises(tileopt.CompilationError, match="same_shapes= made the module invalid"):
        tileopt.compile(kernels.bias_gelu("f32"), "sm_80", same_shapes=[("x", "bias")])
    p = KernelParam.view("y", "f32", 1, same_shape_as=0)
    assert str(p) == "y: view<?xf32, same_shape_as 0>" and KernelParam.parse(str(p)) == p


def test_32_bit_loops_run_the_same_iterations() -> None:
    """With 32-bit indices, layer norm's row loop `pid * 16 .. min(pid * 16 + 16, M)` counts
    in i32 (its start clamped to its end): programs past the last row run no iteration, and
    a last program with fewer rows stops at M."""
    k = tileopt.compile(kernels.layer_norm(block=256, rows_per_program=16), "sm_90",
                        int32_indexing=True)
    assert "setp.lt.u64" not in str(k.asm["ptx"])  # no 64-bit compare left, the loop's included
    m, n = 37, 200
    x, w, b = torch.randn(m, n), torch.randn(n), torch.randn(n)
    y = torch.full((m + 5, n), 7.0)
    grid = (kernels.layer_norm_grid((m, n))[0] + 3,)  # three programs with no rows
    k.launch(grid, x, w, b, y[:m], 1e-5, device="emulator")  # raises on out-of-bounds
    torch.testing.assert_close(y[:m], torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5),
                               atol=2e-5, rtol=1e-5)
    assert torch.all(y[m:] == 7.0)


def _reduction(name: str, divisible: dict[str, tuple[int, ...]]) -> tileopt.Kernel:
    builder = kernels.row_sum(block_m=4, block_n=256) if name == "row_sum" else kernels.col_sum(
        block_m=32, block_n=128)
    return tileopt.compile(builder, target="sm_80", aligned=True, int32_indexing=True,
                           divisible_sizes=divisible)


def test_divisible_row_counts_share_row_bounds_checks() -> None:
    """Rows 4 * pid .. 4 * pid + 3 of x (rows a multiple of 16): in bounds together, so the
    kernel compares the tile offset once instead of each thread's rows."""
    cols_only = _reduction("row_sum", {"x": (1, 16)})
    both = _reduction("row_sum", {"x": (16, 16), "out": (16,)})
    assert [p.size_divisibility for p in both.metadata.abi] == [(16, 16), (16,)]

    def compares(k: tileopt.Kernel) -> int:
        return str(k.asm["ptx"]).count("setp.lt.u32")

    assert compares(both) < compares(cols_only), (compares(both), compares(cols_only))


@pytest.mark.parametrize(("name", "m", "n"), [
    ("row_sum", 48, 784), ("row_sum", 16, 16), ("col_sum", 48, 272), ("col_sum", 80, 16),
])
def test_divisible_row_counts_match_torch(name: str, m: int, n: int) -> None:
    """Odd multiples of 16 rows, so that the last tile (4 or 32 rows) is whole, or for
    col_sum's 32-row blocks half in bounds: its two 16-row groups check apart."""
    k = _reduction(name, {"x": (16, 16), "out": (16,)})
    x = torch.randn(m, n)
    size = m if name == "row_sum" else n
    out = torch.full((size + 16,), 7.0)
    grid = kernels.row_sum_grid((m, n), 4) if name == "row_sum" else kernels.col_sum_grid(
        (m, n), 128)
    k.launch(grid, x, out[:size], device="emulator")
    torch.testing.assert_close(out[:size], x.sum(dim=1 if name == "row_sum" else 0))
    assert torch.all(out[size:] == 7.0)  # nothing written past the view


def test_row_counts_off_the_promise_are_rejected() -> None:
    k = _reduction("row_sum", {"x": (16, 16), "out": (16,)})
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: .*size_divisibility \[16, 16\].*\) "
                       r"was compiled for sizes that are multiples of \[16, 16\].*\(50, 64\)"):
        k.launch((13,), torch.randn(50, 64), torch.empty(50), device="emulator")


def _batched_copy(divisible: bool) -> tileopt.Kernel:
    """y = 2 x over 1 x 8 x 64 tiles of 3-D views (program (i, b): rows 8 i.. of batch b)."""
    kb = KernelBuilder("batched_copy", x=View("f32", 3, contiguous=True),
                       y=View("f32", 3, contiguous=True))
    with kb as k:
        rows, batch = k.program_id(0) * 8, k.program_id(1)
        x = k.load(k.args.x, [batch, rows, 0], [1, 8, 64])
        k.store(x * 2, k.args.y, [batch, rows, 0])
    sizes = {"x": (1, 1, 16), "y": (1, 1, 16)} if divisible else False
    return tileopt.compile(kb, target="sm_80", num_warps=2, aligned=True, int32_indexing=True,
                           divisible_sizes=sizes)


def test_batched_tiles_compare_batch_and_columns_once() -> None:
    """Each thread's 16-byte runs agree on the batch and the column (not the registers inside a
    run), so a run's check adds one row compare to a batch-and-column check made once."""
    k = _batched_copy(divisible=True)
    # batch + column once per access, then one row compare per run: 2 loads, 2 stores
    assert str(k.asm["ptx"]).count("setp.lt.u32") == 2 * (2 + 2), str(k.asm["ptx"])


@pytest.mark.parametrize(("batch", "rows", "cols"), [(3, 13, 37), (2, 8, 61), (1, 5, 3)])
def test_batched_runs_across_the_end_match_torch(batch: int, rows: int, cols: int) -> None:
    """Columns that are not a multiple of 4: the run across the end of each row checks its
    elements one by one, each in every dim (the batch and row too), against torch; nothing is
    written past the views (16-byte aligned rows of a wider allocation)."""
    k = _batched_copy(divisible=False)
    x = torch.randn(batch, rows, 64)[:, :, :cols]
    y_all = torch.full((batch + 1, rows + 1, 64), 7.0)
    y = y_all[:batch, :rows, :cols]
    k.launch(((rows + 7) // 8, batch), x, y, device="emulator")
    torch.testing.assert_close(y, 2 * x)
    y_all[:batch, :rows, :cols] = 7.0
    assert torch.all(y_all == 7.0)  # nothing written outside the view


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_with_every_promise_matches_torch(target: str, causal: bool) -> None:
    """Attention with the promises Triton's JIT makes (benchmarks/ptx_vs_triton.py's): the
    copies of its loop over whole blocks of keys check no key row (the loop ends at the keys'
    size rounded down to the block, the values share it), so every row they copy must be
    inside: odd key counts, and the emulator raises on any access past the end."""
    import torch.nn.functional as F

    kern = tileopt.compile(
        kernels.attention("f16", head_dim=64, causal=causal), target, aligned=True,
        divisible_sizes=True, int32_indexing=True, same_shapes=[("q", "o"), ("k", "v")])
    torch.manual_seed(0)
    for batch, m, n in [(2, 130, 200), (1, 64, 64), (3, 70, 16)]:
        n = m if causal else n
        q = torch.randn(batch, m, 64).half()
        k, v = torch.randn(batch, n, 64).half(), torch.randn(batch, n, 64).half()
        o = torch.full((batch, m, 64), float("nan")).half()
        kern.launch(kernels.attention_grid(q.shape), q, k, v, o, 64**-0.5)
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                             is_causal=causal)
        assert torch.allclose(o.double(), ref, atol=4e-3, rtol=4e-3)
