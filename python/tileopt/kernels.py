"""Reference tile kernels, written with :mod:`tileopt.builder`.

Each function returns a :class:`~tileopt.builder.KernelBuilder` holding one ``tile.kernel``
(compile it with ``tileopt.compile(kb, target="sm_90")``); a ``<name>_grid`` function beside it
gives the launch grid for given tensor shapes. Every view is ``contiguous`` (innermost stride 1,
any outer strides), so tensors passed to a launch need a unit innermost stride. Sizes come from
the views themselves (``memref.dim``): shapes that are not multiples of the tile need no extra
arguments, the loads and stores are masked by the views' bounds.

    kb = kernels.softmax(block=1024)
    k = tileopt.compile(kb, target="sm_90")
    k.launch(kernels.softmax_grid(x.shape), x, y)

The kernels are used by the tests (``test/python/gpu/test_kernels.py``), ``make demo`` and
``benchmarks/ptx_vs_triton.py``: keep names and parameters stable.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from tileopt.builder import KernelBuilder, Scalar, Value, View

FLOAT_DTYPES = ("f32", "f16", "bf16")
MATMUL_DTYPES = ("f32", "f16", "bf16")
FP8_DTYPES = ("f8E4M3FN", "f8E5M2")
EPILOGUES = (None, "bias_relu")


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative ints."""
    return -(-a // b)


def _check_dtype(dtype: str, allowed: Sequence[str]) -> None:
    if dtype not in allowed:
        raise ValueError(f"dtype {dtype!r} is not supported here; expected one of {allowed}")


def _check_out_dtype(out_dtype: str) -> None:
    if out_dtype not in FLOAT_DTYPES:
        raise ValueError(f"out_dtype must be one of {FLOAT_DTYPES}, got {out_dtype!r}")


def _check_pow2(**sizes: int) -> None:
    for name, v in sizes.items():
        if v < 1 or v & (v - 1):
            raise ValueError(f"{name} must be a power of two, got {v}")


def _parts(name: str, size: int) -> list[int]:
    """A matmul block's parts, each a power of two (tiles are): ``[size]`` for a power of
    two, ``[2p, p]`` for three times one (``p >= 16``: 48, 96, 192, 384)."""
    if size >= 1 and not size & (size - 1):
        return [size]
    part = size // 3
    if size % 3 or part < 16 or part & (part - 1):
        raise ValueError(f"{name} must be a power of two or three times one (at least 48), "
                         f"got {size}")
    return [2 * part, part]


def _view(dtype: str, rank: int) -> View:
    return View(dtype, rank, contiguous=True)


# ---------------------------------------------------------------------------------------------
# elementwise


def vector_add(dtype: str = "f32", block: int = 1024) -> KernelBuilder:
    """``out = x + y`` on 1-D tensors of ``dtype`` (f32, f16 or bf16), ``block`` elements a program.

    Arguments: ``x``, ``y``, ``out`` (1-D, same length). Grid: :func:`vector_add_grid`.
    """
    _check_dtype(dtype, FLOAT_DTYPES)
    _check_pow2(block=block)
    kb = KernelBuilder(
        "vector_add", x=_view(dtype, 1), y=_view(dtype, 1), out=_view(dtype, 1)
    )
    with kb as k:
        start = k.program_id(0) * block
        x = k.load(k.args.x, [start], [block])
        y = k.load(k.args.y, [start], [block])
        k.store(x + y, k.args.out, [start])
    return kb


def vector_add_grid(n: int, block: int = 1024) -> tuple[int]:
    """The grid of :func:`vector_add` for ``n`` elements."""
    return (max(cdiv(n, block), 1),)


def _gelu(k: KernelBuilder, x: Value) -> Value:
    """Exact GELU, ``x * (1 + erf(x / sqrt(2))) / 2`` (torch's default)."""
    return x * 0.5 * (k.erf(x * (1.0 / math.sqrt(2.0))) + 1.0)


def bias_gelu(dtype: str = "f32", block_m: int = 32, block_n: int = 64) -> KernelBuilder:
    """``out = gelu(x + bias)`` with the exact (erf) GELU; ``bias`` broadcasts over rows.

    Arguments: ``x`` (M x N), ``bias`` (N), ``out`` (M x N), all of ``dtype``; f16/bf16 are
    computed in f32 and rounded once. Each program does a ``block_m x block_n`` tile.
    Grid: :func:`bias_gelu_grid`.
    """
    _check_dtype(dtype, FLOAT_DTYPES)
    _check_pow2(block_m=block_m, block_n=block_n)
    kb = KernelBuilder(
        "bias_gelu", x=_view(dtype, 2), bias=_view(dtype, 1), out=_view(dtype, 2)
    )
    with kb as k:
        m = k.program_id(0) * block_m
        n = k.program_id(1) * block_n
        x = k.cast(k.load(k.args.x, [m, n], [block_m, block_n]), "f32")
        bias = k.cast(k.load(k.args.bias, [n], [block_n]), "f32")
        y = _gelu(k, x + k.expand_dims(bias, 0))
        k.store(k.cast(y, dtype), k.args.out, [m, n])
    return kb


def bias_gelu_grid(shape: Sequence[int], block_m: int = 32, block_n: int = 64) -> tuple[int, int]:
    """The grid of :func:`bias_gelu` for an input of ``shape`` (M, N)."""
    m, n = shape
    return (max(cdiv(m, block_m), 1), max(cdiv(n, block_n), 1))


# ---------------------------------------------------------------------------------------------
# row-wise: softmax, layer norm


def softmax(block: int = 1024) -> KernelBuilder:
    """Row softmax of an f32 M x N tensor whose rows fit one tile (``N <= block``).

    Arguments: ``x``, ``y`` (M x N, f32). One program a row; columns past the row's end load
    as ``-inf`` and add nothing. The final division is within 2 ulp (``div.full.f32``, as
    Triton's ``/`` and TorchInductor's softmax). Grid: :func:`softmax_grid`.
    """
    _check_pow2(block=block)
    kb = KernelBuilder("softmax", x=_view("f32", 2), y=_view("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, block], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        s = k.sum(e, axis=1, keepdims=True)
        k.store(k.fdiv(e, s, ieee_rounding=False), k.args.y, [row, 0])
    return kb


def softmax_grid(shape: Sequence[int]) -> tuple[int]:
    """The grid of :func:`softmax` and :func:`softmax_online` for an input of ``shape``."""
    return (max(shape[0], 1),)


def softmax_online(block: int = 1024) -> KernelBuilder:
    """Row softmax of an f32 M x N tensor for any N: loops over column blocks of ``block``.

    Arguments: ``x``, ``y`` (M x N, f32). One program a row. The first loop keeps the running
    maximum ``m`` and the running sum ``s`` of ``exp(x - m)`` (rescaling ``s`` by
    ``exp(m_old - m_new)`` when the maximum grows); the second loop writes
    ``exp(x - m) / s`` (within 2 ulp, like :func:`softmax`). Grid: :func:`softmax_grid`.
    """
    _check_pow2(block=block)
    kb = KernelBuilder("softmax_online", x=_view("f32", 2), y=_view("f32", 2))
    with kb as k:
        row = k.program_id(0)
        n = k.size(k.args.x, 1)
        m0 = k.full([1, 1], float("-inf"), "f32")
        s0 = k.full([1, 1], 0.0, "f32")
        with k.loop(0, n, block, carried=[m0, s0]) as loop:
            m, s = loop.carried
            x = k.load(k.args.x, [row, loop.iv], [1, block], padding=float("-inf"))
            # Every block holds at least one element of the row, so m_new is finite.
            m_new = k.maximum(m, k.max(x, axis=1, keepdims=True))
            s_new = s * k.exp(m - m_new) + k.sum(k.exp(x - m_new), axis=1, keepdims=True)
            loop.yield_(m_new, s_new)
        m, s = loop.results
        with k.loop(0, n, block) as loop:
            x = k.load(k.args.x, [row, loop.iv], [1, block], padding=float("-inf"))
            k.store(k.fdiv(k.exp(x - m), s, ieee_rounding=False), k.args.y, [row, loop.iv])
    return kb


def layer_norm(block: int = 1024, rows_per_program: int = 16) -> KernelBuilder:
    """Layer-norm forward over the last dim of an f32 M x N tensor whose rows fit one tile.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance, like
    ``torch.nn.functional.layer_norm``. Arguments: ``x`` (M x N), ``weight``, ``bias`` (N),
    ``y`` (M x N), all f32, and ``eps`` (f32 scalar). The mean and the variance divide by N
    within 2 ulp (``div.full.f32``, as Triton's ``/``). Each program loads ``weight`` and
    ``bias`` once and loops over ``rows_per_program`` consecutive rows, so the weights
    cost little memory traffic. Grid: :func:`layer_norm_grid`.
    """
    _check_pow2(block=block)
    if rows_per_program < 1:
        raise ValueError(f"rows_per_program must be positive, got {rows_per_program}")
    kb = KernelBuilder(
        "layer_norm",
        x=_view("f32", 2),
        weight=_view("f32", 1),
        bias=_view("f32", 1),
        y=_view("f32", 2),
        eps=Scalar("f32"),
    )
    with kb as k:
        n = k.size(k.args.x, 1)
        rows = k.size(k.args.x, 0)
        n_f32 = k.cast(k.cast(n, "i32"), "f32")
        inside = k.expand_dims(k.iota(block) < k.cast(n, "i32"), 0)
        w = k.expand_dims(k.load(k.args.weight, [0], [block]), 0)
        b = k.expand_dims(k.load(k.args.bias, [0], [block]), 0)
        first = k.program_id(0) * rows_per_program
        last = k.minimum(first + rows_per_program, rows)
        with k.loop(first, last, 1) as loop:
            row = loop.iv
            x = k.load(k.args.x, [row, 0], [1, block])
            mean = k.fdiv(k.sum(x, axis=1, keepdims=True), n_f32, ieee_rounding=False)
            xc = k.where(inside, x - mean, 0.0)
            var = k.fdiv(k.sum(xc * xc, axis=1, keepdims=True), n_f32, ieee_rounding=False)
            rstd = k.rsqrt(var + k.args.eps)
            k.store(xc * rstd * w + b, k.args.y, [row, 0])
    return kb


def layer_norm_grid(shape: Sequence[int], rows_per_program: int = 16) -> tuple[int]:
    """The grid of :func:`layer_norm` for an input of ``shape`` (M, N)."""
    return (max(cdiv(shape[0], rows_per_program), 1),)


# ---------------------------------------------------------------------------------------------
# reductions


def row_sum(block_m: int = 4, block_n: int = 256) -> KernelBuilder:
    """``out[i] = sum_j x[i, j]`` for an f32 M x N tensor, any N.

    Arguments: ``x`` (M x N), ``out`` (M), f32. Each program sums ``block_m`` rows, looping
    over column blocks of ``block_n`` with an elementwise tile accumulator that is reduced
    once at the end. Grid: :func:`row_sum_grid`.
    """
    _check_pow2(block_m=block_m, block_n=block_n)
    kb = KernelBuilder("row_sum", x=_view("f32", 2), out=_view("f32", 1))
    with kb as k:
        m = k.program_id(0) * block_m
        n = k.size(k.args.x, 1)
        acc0 = k.full([block_m, block_n], 0.0, "f32")
        with k.loop(0, n, block_n, carried=[acc0]) as loop:
            (acc,) = loop.carried
            loop.yield_(acc + k.load(k.args.x, [m, loop.iv], [block_m, block_n]))
        (acc,) = loop.results
        k.store(k.sum(acc, axis=1), k.args.out, [m])
    return kb


def row_sum_grid(shape: Sequence[int], block_m: int = 4) -> tuple[int]:
    """The grid of :func:`row_sum` for an input of ``shape`` (M, N)."""
    return (max(cdiv(shape[0], block_m), 1),)


def col_sum(block_m: int = 32, block_n: int = 128) -> KernelBuilder:
    """``out[j] = sum_i x[i, j]`` for an f32 M x N tensor, any M.

    Arguments: ``x`` (M x N), ``out`` (N), f32. Each program sums ``block_n`` columns,
    looping over row blocks of ``block_m`` with an elementwise tile accumulator that is
    reduced once at the end. Grid: :func:`col_sum_grid`.
    """
    _check_pow2(block_m=block_m, block_n=block_n)
    kb = KernelBuilder("col_sum", x=_view("f32", 2), out=_view("f32", 1))
    with kb as k:
        n = k.program_id(0) * block_n
        m = k.size(k.args.x, 0)
        acc0 = k.full([block_m, block_n], 0.0, "f32")
        with k.loop(0, m, block_m, carried=[acc0]) as loop:
            (acc,) = loop.carried
            loop.yield_(acc + k.load(k.args.x, [loop.iv, n], [block_m, block_n]))
        (acc,) = loop.results
        k.store(k.sum(acc, axis=0), k.args.out, [n])
    return kb


def col_sum_grid(shape: Sequence[int], block_n: int = 128) -> tuple[int]:
    """The grid of :func:`col_sum` for an input of ``shape`` (M, N)."""
    return (max(cdiv(shape[1], block_n), 1),)


def argmax(block_m: int = 1, block_n: int = 1024) -> KernelBuilder:
    """Row argmax of an f32 M x N tensor whose rows fit one tile (``N <= block_n``).

    Arguments: ``x`` (M x N, f32), ``out`` (M, i32). A two-operand ``tile.reduce`` over
    (value, column index) that keeps the first index among equal maxima, like
    ``torch.argmax``; columns past the row's end load as ``-inf`` and so never win over a
    real column. (NaNs are not treated specially.) Each program does ``block_m`` rows.
    Grid: :func:`argmax_grid`.
    """
    _check_pow2(block_m=block_m, block_n=block_n)
    kb = KernelBuilder("argmax", x=_view("f32", 2), out=_view("i32", 1))
    with kb as k:
        m = k.program_id(0) * block_m
        x = k.load(k.args.x, [m, 0], [block_m, block_n], padding=float("-inf"))
        _, index = k.argmax(x, axis=1)
        k.store(index, k.args.out, [m])
    return kb


def argmax_grid(shape: Sequence[int], block_m: int = 1) -> tuple[int]:
    """The grid of :func:`argmax` for an input of ``shape`` (M, N)."""
    return (max(cdiv(shape[0], block_m), 1),)


# ---------------------------------------------------------------------------------------------
# data movement


def transpose(dtype: str = "f32", block_m: int = 32, block_n: int = 32) -> KernelBuilder:
    """``y = x.T`` for an M x N tensor of ``dtype``; each program moves a tile.

    Arguments: ``x`` (M x N), ``y`` (N x M). The program at (i, j) loads the
    ``block_m x block_n`` tile of ``x`` at (i * block_m, j * block_n) and stores its
    transpose at (j * block_n, i * block_m). Grid: :func:`transpose_grid`.
    """
    _check_dtype(dtype, (*FLOAT_DTYPES, "i32"))
    _check_pow2(block_m=block_m, block_n=block_n)
    kb = KernelBuilder("transpose", x=_view(dtype, 2), y=_view(dtype, 2))
    with kb as k:
        m = k.program_id(0) * block_m
        n = k.program_id(1) * block_n
        t = k.load(k.args.x, [m, n], [block_m, block_n])
        k.store(k.trans(t), k.args.y, [n, m])
    return kb


def transpose_grid(
    shape: Sequence[int], block_m: int = 32, block_n: int = 32
) -> tuple[int, int]:
    """The grid of :func:`transpose` for an input of ``shape`` (M, N)."""
    m, n = shape
    return (max(cdiv(m, block_m), 1), max(cdiv(n, block_n), 1))


# ---------------------------------------------------------------------------------------------
# matmul


def _check_matmul(dtype: str, epilogue: str | None, split: bool = False,
                  dtypes: Sequence[str] = MATMUL_DTYPES, **blocks: int) -> None:
    """Checks a matmul's dtype (one of ``dtypes``), epilogue and blocks; with ``split``,
    ``block_m`` and ``block_n`` may be three times a power of two (:func:`_parts`)."""
    _check_dtype(dtype, dtypes)
    for name, size in blocks.items():
        if split and name in ("block_m", "block_n"):
            _parts(name, size)
        else:
            _check_pow2(**{name: size})
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if dtype in ("f16", "bf16") and blocks["block_k"] < 16:
        raise ValueError("f16/bf16 matmul needs block_k >= 16 (mma.sync m16n8k16)")
    if dtype in ("i8", *FP8_DTYPES) and blocks["block_k"] < 32:
        raise ValueError(f"{dtype} matmul needs block_k >= 32 (mma.sync m16n8k32)")


def matmul(
    dtype: str = "f16",
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    epilogue: str | None = None,
    out_dtype: str = "f32",
    group_m: int | None = None,
) -> KernelBuilder:
    """``c = a @ b`` (plus an epilogue) with f32 accumulation and an ``out_dtype`` result.

    Arguments: ``a`` (M x K), ``b`` (K x N) of ``dtype``; with ``epilogue="bias_relu"`` a
    ``bias`` (N, f32) and ``c = relu(a @ b + bias)``; then ``c`` (M x N, ``out_dtype``: f32,
    or f16/bf16 rounded from the f32 accumulator as ``torch.matmul`` returns). f16/bf16 go
    through tensor cores (``tile.dot`` -> mma.sync); f32 is exact f32 on CUDA cores (no
    tf32). ``dtype="i8"`` takes ``out_dtype="i32"`` and no epilogue: int8 products summed
    in i32 on tensor cores, wrapping as ``torch._int_mm``'s (``block_k`` >= 32, mma.sync
    m16n8k32). ``dtype="f8E4M3FN"`` or ``"f8E5M2"`` (``torch.float8_e4m3fn``/``e5m2``):
    exact fp8 products summed in f32, on tensor cores from sm_89 (``block_k`` >= 32), on
    CUDA cores before. Each program computes a ``block_m x block_n`` tile of ``c``, looping
    over K in steps of ``block_k`` with the accumulator carried by the loop. Grid:
    :func:`matmul_grid`.

    Program (i, j) computes tile (i, j), in launch order down the columns of tiles. With
    ``group_m``, the programs take the tiles in groups of ``group_m`` rows of tiles instead,
    each group along its rows (Triton's grouped ordering): the programs running at one time
    share rows of ``a`` and columns of ``b`` in L2.

    ``block_m`` and ``block_n`` are powers of two or three times one (48, 96, 192, 384): such
    a block is two tiles, of two thirds and one third (192: 128 and 64), and the program runs
    a dot per pair of parts; each part of ``a`` and of ``b`` is loaded once, and in a
    software pipeline copied once into shared memory, where its dots read it. Tiles of
    192 x 192 make one wave of GPT-2's QKV projection at 2048 tokens on 132 SMs (11 x 12
    tiles), which tiles of powers of two leave a second, nearly empty one.
    """
    _check_matmul(dtype, epilogue, split=True, dtypes=(*MATMUL_DTYPES, "i8", *FP8_DTYPES),
                  block_m=block_m, block_n=block_n, block_k=block_k)
    acc_dtype = "f32"
    if dtype == "i8":
        if out_dtype != "i32" or epilogue is not None:
            raise ValueError("an i8 matmul takes out_dtype='i32' and no epilogue, got "
                             f"out_dtype={out_dtype!r}, epilogue={epilogue!r}")
        acc_dtype = "i32"
    else:
        _check_out_dtype(out_dtype)
    if group_m is not None and (isinstance(group_m, bool) or not isinstance(group_m, int)
                                or group_m < 1):
        raise ValueError(f"group_m must be a positive integer or None, got {group_m!r}")
    kb = _matmul_builder("matmul", dtype, epilogue, out_dtype)
    with kb as k:
        tile_m, tile_n = k.program_id(0), k.program_id(1)
        if group_m is not None:
            grid_m = k.num_programs(0)
            program = tile_m + tile_n * grid_m  # in launch order
            per_group = k.num_programs(1) * group_m
            first_m = program // per_group * group_m
            rows = k.minimum(grid_m - first_m, group_m)
            tile_m = first_m + program % per_group % rows
            tile_n = program % per_group // rows
        m = tile_m * block_m
        n = tile_n * block_n
        size_k = k.size(k.args.a, 1)
        # Each part of the block: its first row (column), and its rows (columns).
        rows = _part_starts(m, _parts("block_m", block_m))
        cols = _part_starts(n, _parts("block_n", block_n))
        zeros = [k.full([pm, pn], 0, acc_dtype) for _, pm in rows for _, pn in cols]
        with k.loop(0, size_k, block_k, carried=zeros) as loop:
            loop.yield_(*_parts_k_step(k, rows, cols, loop.iv, loop.carried, block_k))
        _store_parts(k, loop.results, rows, cols, epilogue, out_dtype)
    return kb


def _part_starts(start: Value, parts: Sequence[int]) -> list[tuple[Value, int]]:
    """Each of a block's ``parts`` with its first index: the block's ``start``, then
    ``start`` plus the parts before it."""
    return [(start + sum(parts[:i]) if i else start, p) for i, p in enumerate(parts)]


def _parts_k_step(k: KernelBuilder, rows: Sequence[tuple[Value, int]],
                  cols: Sequence[tuple[Value, int]], kk: Value, accs: Sequence[Value],
                  block_k: int) -> list[Value]:
    """One k step from k offset ``kk`` of a block whose parts are ``rows`` and ``cols``
    (:func:`_part_starts`): each part of ``a`` and of ``b`` loaded once, a dot per pair of
    parts; the accumulators after it, in ``accs``' order (rows, then columns)."""
    a = [k.load(k.args.a, [r, kk], [pm, block_k]) for r, pm in rows]
    b = [k.load(k.args.b, [kk, c], [block_k, pn]) for c, pn in cols]
    return [k.dot(ai, bj, acc)
            for (ai, bj), acc in zip(itertools.product(a, b), accs, strict=True)]


def _store_parts(k: KernelBuilder, accs: Sequence[Value], rows: Sequence[tuple[Value, int]],
                 cols: Sequence[tuple[Value, int]], epilogue: str | None,
                 out_dtype: str) -> None:
    """Stores the accumulators of a block's parts (:func:`_parts_k_step`)."""
    for ((r, _), (c, _)), acc in zip(itertools.product(rows, cols), accs, strict=True):
        _store_matmul_tile(k, acc, r, c, epilogue, out_dtype)


def _matmul_builder(name: str, dtype: str, epilogue: str | None,
                    out_dtype: str, **extra: View) -> KernelBuilder:
    """A matmul kernel's builder: ``a``, ``b`` of ``dtype``, ``bias`` (f32) with the
    ``bias_relu`` epilogue, ``c`` of ``out_dtype``, then ``extra``; the epilogue's name
    after ``name``."""
    args: dict[str, View] = {"a": _view(dtype, 2), "b": _view(dtype, 2)}
    if epilogue == "bias_relu":
        args["bias"] = _view("f32", 1)
    args["c"] = _view(out_dtype, 2)
    return KernelBuilder(name if epilogue is None else f"{name}_{epilogue}", **args, **extra)


def _store_matmul_tile(
    k: KernelBuilder, acc: Value, m: Value, n: Value, epilogue: str | None, out_dtype: str
) -> None:
    """Stores the accumulator of the tile at (m, n) of ``c`` after ``epilogue``."""
    if epilogue == "bias_relu":
        bias = k.load(k.args.bias, [n], [acc.shape[1]])  # type: ignore[index]
        acc = k.maximum(acc + k.expand_dims(bias, 0), 0.0)
    k.store(acc if out_dtype == str(acc.dtype) else k.cast(acc, out_dtype), k.args.c, [m, n])


def _tile_counts(k: KernelBuilder, sizes: Sequence[Value],
                 blocks: Sequence[int]) -> tuple[Value, ...]:
    """The blocks of each of ``sizes`` (M, N, K: tiles along M and N, k steps; index), each
    at least one (of zeros where a size is 0), so that no division by them divides by
    zero."""
    return tuple(k.maximum((size + (block - 1)) / block, 1)
                 for size, block in zip(sizes, blocks, strict=True))


def _matmul_sizes(k: KernelBuilder) -> tuple[Value, Value, Value]:
    """M, N and K of a matmul kernel's ``a`` (M x K) and ``b`` (K x N)."""
    return k.size(k.args.a, 0), k.size(k.args.b, 1), k.size(k.args.a, 1)


def _k_step(k: KernelBuilder, tile_m: Value, tile_n: Value, kk: Value, acc: Value,
            block_m: int, block_n: int, block_k: int) -> tuple[Value, Value, Value, Value]:
    """One k step of the tile at (``tile_m``, ``tile_n``) (i32) from k offset ``kk``: the
    tile's first row and column, the accumulator after the step and the next k offset."""
    m = k.cast(tile_m, "index") * block_m
    n = k.cast(tile_n, "index") * block_n
    a = k.load(k.args.a, [m, kk], [block_m, block_k])
    b = k.load(k.args.b, [kk, n], [block_k, block_n])
    return m, n, k.dot(a, b, acc), kk + block_k


def persistent_matmul(
    dtype: str = "f16",
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 64,
    epilogue: str | None = None,
    out_dtype: str = "f32",
) -> KernelBuilder:
    """:func:`matmul` as a persistent kernel: each program computes several tiles.

    Arguments and result as :func:`matmul`. Launched on fewer programs than tiles (one or a
    few per SM, :func:`persistent_matmul_grid`), program ``p`` of ``P`` computes the tiles
    ``p, p + P, p + 2P, ...`` in :func:`matmul`'s launch order (down the columns of tiles).
    Its one loop runs over those tiles' k steps back to back (Triton's persistent matmul):
    the tile's position and k offset are carried from step to step, and after a tile's last
    k step the accumulator is stored and restarts at zero. So a pipelined loop
    (``num_stages``) copies the next tile's first operands while this one's epilogue runs,
    and no SM idles in a last wave of whole tiles. Blocks of three times a power of two
    are parts as in :func:`matmul` (192 x 192 on 132 programs: cuBLAS's schedule for GPT-2's
    QKV projection).
    """
    _check_matmul(dtype, epilogue, split=True, block_m=block_m, block_n=block_n,
                  block_k=block_k)
    _check_out_dtype(out_dtype)
    kb = _matmul_builder("persistent_matmul", dtype, epilogue, out_dtype)
    with kb as k:
        # Tile positions in i32 (there are fewer than 2^31 tiles), offsets in index.
        def i32(v: Value) -> Value:
            return k.cast(v, "i32")

        program, programs = i32(k.program_id(0)), i32(k.num_programs(0))
        grid_m, grid_n, k_steps = _tile_counts(k, _matmul_sizes(k), (block_m, block_n, block_k))
        grid_m, grid_n = i32(grid_m), i32(grid_n)
        k_end = k_steps * block_k
        tiles = (grid_m * grid_n - program + (programs - 1)) / programs  # this program's
        # Tile t + P is (m + dm, n + dn), with a carry from m into n.
        dm, dn = programs % grid_m, programs / grid_m
        parts_m, parts_n = _parts("block_m", block_m), _parts("block_n", block_n)
        zeros = [k.full([pm, pn], 0.0, "f32") for pm in parts_m for pn in parts_n]
        start = [program % grid_m, program / grid_m, k.index(0), *zeros]
        with k.loop(0, k.cast(tiles, "index") * k_steps, carried=start) as loop:
            tile_m, tile_n, kk, *accs = loop.carried
            rows = _part_starts(k.cast(tile_m, "index") * block_m, parts_m)
            cols = _part_starts(k.cast(tile_n, "index") * block_n, parts_n)
            accs = _parts_k_step(k, rows, cols, kk, accs, block_k)
            kk = kk + block_k
            last = kk == k_end
            # After its tile's last k step the accumulators are stored and restart at zero.
            with k.if_(last, carried=accs) as done:
                _store_parts(k, accs, rows, cols, epilogue, out_dtype)
                done.yield_(*zeros)
            next_m = tile_m + dm
            wrap = next_m >= grid_m
            next_m = k.where(wrap, next_m - grid_m, next_m)
            next_n = tile_n + dn + k.where(wrap, 1, 0)
            loop.yield_(
                k.where(last, next_m, tile_m),
                k.where(last, next_n, tile_n),
                k.where(last, k.index(0), kk),
                *done.results,
            )
    return kb


def persistent_matmul_grid(
    shape_a: Sequence[int], shape_b: Sequence[int], programs: int, block_m: int = 128,
    block_n: int = 128,
) -> tuple[int]:
    """The grid of :func:`persistent_matmul`: ``programs`` (the SMs times the programs that
    fit on one, say), or fewer where there are fewer tiles."""
    grid_m, grid_n = matmul_grid(shape_a, shape_b, block_m, block_n)
    return _programs_grid(programs, grid_m * grid_n)


def stream_k_matmul(
    dtype: str = "f16",
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 64,
    out_dtype: str = "f32",
    workspace: bool = False,
) -> KernelBuilder:
    """:func:`persistent_matmul` with the k steps of all tiles, not whole tiles, shared
    evenly between the programs (stream-K): no program idles in a last wave of tiles.

    Arguments as :func:`matmul` (no epilogue). The tiles' k steps are numbered tile by tile
    (tiles in :func:`matmul`'s launch order, down the columns), and program ``p`` of ``P``
    runs steps ``p * S // P`` up to ``(p + 1) * S // P`` of all ``S`` in one loop, as
    :func:`persistent_matmul` runs its tiles'. A tile whose steps a program ran all of is
    stored. The part of a tile split between programs:

    - by default is added into ``c`` atomically (``k.store(..., add=True)``), in any order,
      so ``c`` (f32 only) sums the parts: it **must hold zeros** when the kernel starts, and
      the sum's order varies from run to run;
    - with ``workspace``, is stored into one of the program's two slots of an f32 argument
      ``w`` (:func:`stream_k_workspace_shape`); after its loop the program adds its k
      steps of each such tile to the tile's count in an i32 argument ``counts``
      (:func:`stream_k_counts_shape`, **zeros** when the kernel starts, zeros again when
      it ends) with ``k.atomic_add``. The program whose add completes the tile's steps,
      the last to finish a part of it, sums the parts in program order into ``c`` (any
      ``out_dtype``; the same result on every run, whatever order the programs finish in)
      and sets the count back to zero: one launch, and no program waits for another.

    Grid: :func:`stream_k_matmul_grid`.
    """
    _check_matmul(dtype, None, block_m=block_m, block_n=block_n, block_k=block_k)
    _check_out_dtype(out_dtype)
    if not isinstance(workspace, bool):
        raise ValueError(f"workspace must be True or False, got {workspace!r}")
    if out_dtype != "f32" and not workspace:
        raise ValueError(f"out_dtype {out_dtype!r} needs workspace=True: the parts of a tile "
                         "added into c atomically would each be rounded")
    kb = (_matmul_builder("stream_k_matmul_parts", dtype, None, out_dtype, w=_view("f32", 2),
                          counts=_view("i32", 1))
          if workspace else _matmul_builder("stream_k_matmul", dtype, None, out_dtype))
    with kb as k:
        def i32(v: Value) -> Value:
            return k.cast(v, "i32")

        grid_m, grid_n, k_steps = _tile_counts(k, _matmul_sizes(k), (block_m, block_n, block_k))
        steps = grid_m * grid_n * k_steps
        # Programs past the steps' count run none: every other runs at least one.
        programs = k.minimum(k.num_programs(0), steps)
        program = k.minimum(k.program_id(0), programs)
        first = program * steps / programs
        last = k.minimum(program + 1, programs) * steps / programs
        tile = first / k_steps
        zeros = k.full([block_m, block_n], 0.0, "f32")
        # The tile's position, its next k step, and the step this program began it at (0
        # where it runs the whole tile): i32 (fewer than 2^31 tiles, and k steps), which
        # holds fewer registers than 64-bit offsets (82 against 87 at 64x64x32 on sm_90a).
        step0 = i32(first - tile * k_steps)
        start = [i32(tile - tile / grid_m * grid_m), i32(tile / grid_m), step0, step0, zeros]
        with k.loop(first, last, carried=start) as loop:
            tile_m, tile_n, step, began, acc = loop.carried
            kk = k.cast(step, "index") * block_k
            m, n, acc, _ = _k_step(k, tile_m, tile_n, kk, acc, block_m, block_n, block_k)
            step = step + 1
            tile_done = step == i32(k_steps)
            # The tile's last step, or this program's: the tile, or this program's part.
            with k.if_(tile_done | (loop.iv + 1 == last), carried=[acc]) as flush:
                # The store, or else the add: no add follows the store (which would keep
                # the accumulator live through the store's staging).
                whole = tile_done & (began == 0)
                with k.if_(whole) as stored:
                    k.store(acc if out_dtype == "f32" else k.cast(acc, out_dtype),
                            k.args.c, [m, n])
                with stored.else_():
                    if workspace:
                        # Slot 0: the part of the tile this program began within (its
                        # first); slot 1: of the tile it began at step 0 and ended within.
                        slot = k.where(began == 0, 1, 0)
                        row = (2 * program + k.cast(slot, "index")) * block_m
                        k.store(acc, k.args.w, [row, 0])
                    else:
                        k.store(acc, k.args.c, [m, n], add=True)
                flush.yield_(zeros)
            next_m = tile_m + 1
            wrap = next_m == i32(grid_m)
            loop.yield_(
                k.where(tile_done, k.where(wrap, 0, next_m), tile_m),
                k.where(tile_done, tile_n + k.where(wrap, 1, 0), tile_n),
                k.where(tile_done, 0, step),
                k.where(tile_done, 0, began),
                flush.results[0],
            )
        if workspace:
            _finish_split_tiles(k, start[:3], loop.results[:4],
                                (grid_m, k_steps, steps, programs), (block_m, block_n),
                                out_dtype)
    return kb


def _finish_split_tiles(k: KernelBuilder, begun: Sequence[Value], ended: Sequence[Value],
                        schedule: tuple[Value, Value, Value, Value], blocks: tuple[int, int],
                        out_dtype: str) -> None:
    """After a workspace stream-K program's loop, which began at tile position and step
    ``begun`` and ended at position, step and first step ``ended`` (the loop's state, i32):
    for each of its parts of split tiles (at most two: of its first tile, if it began
    within it and finished it; of its last, if it ended within it), adds the part's k steps
    to the tile's count; the program whose add completes the count sums the tile's parts
    in program order into ``c`` (:func:`_sum_split_tile`) and zeroes the count. After the
    loop, not in it, and from the loop's state: what the sum needs is not live in the
    loop. ``schedule``: the tiles along M, k steps a tile, all steps, programs that run
    steps."""
    grid_m, k_steps, _, _ = schedule
    steps_i32 = k.cast(k_steps, "i32")
    grid_m_i32 = k.cast(grid_m, "i32")
    tile_m0, tile_n0, step0 = begun
    tile_m, tile_n, step, began = ended
    first_tile = tile_n0 * grid_m_i32 + tile_m0
    last_tile = tile_n * grid_m_i32 + tile_m
    # The loop finished its first tile if it moved on from it.
    finished_first = (step0 != 0) & (last_tile != first_tile)
    with k.loop(0, 2) as parts_of_program:
        second = parts_of_program.iv == 1
        tile = k.where(second, last_tile, first_tile)
        ran = k.where(second, step - began, steps_i32 - step0)
        with k.if_(k.where(second, step != 0, finished_first)):
            tile = k.cast(tile, "index")
            before = k.atomic_add(k.args.counts, [tile], ran)
            with k.if_(before + ran == steps_i32):
                _sum_split_tile(k, tile, schedule, blocks, out_dtype)
                k.store(k.full([1], 0, "i32"), k.args.counts, [tile])


def _sum_split_tile(k: KernelBuilder, tile: Value,
                    schedule: tuple[Value, Value, Value, Value], blocks: tuple[int, int],
                    out_dtype: str) -> None:
    """Sums the parts of split ``tile`` (tiles numbered down the columns) from the
    workspace in program order into ``c``."""
    grid_m, k_steps, steps, programs = schedule
    block_m, block_n = blocks
    # The programs that ran steps of the tile (each runs one or more): the program that
    # runs step s of all is the last p with p * steps // programs <= s. The first began the
    # tile at step 0 (slot 1), each later one within it (slot 0).
    first_step = tile * k_steps
    first = ((first_step + 1) * programs - 1) / steps
    last = ((first_step + k_steps) * programs - 1) / steps
    tile_m, tile_n = tile - tile / grid_m * grid_m, tile / grid_m
    rows = _fixup_rows(block_m, block_n)
    with k.loop(0, block_m, rows) as slices:
        row = slices.iv
        total = k.load(k.args.w, [(2 * first + 1) * block_m + row, 0], [rows, block_n])
        with k.loop(first + 1, last + 1, carried=[total]) as parts:
            (total,) = parts.carried
            part = k.load(k.args.w, [2 * parts.iv * block_m + row, 0], [rows, block_n])
            parts.yield_(total + part)
        (total,) = parts.results
        k.store(total if out_dtype == "f32" else k.cast(total, out_dtype), k.args.c,
                [tile_m * block_m + row, tile_n * block_n])


def stream_k_workspace_shape(programs: int, block_m: int = 128,
                             block_n: int = 128) -> tuple[int, int]:
    """The shape of the f32 workspace ``w`` of :func:`stream_k_matmul` with ``workspace``
    on ``programs`` programs (its grid's): two ``block_m x block_n`` slots a program."""
    _programs_grid(programs, 1)  # checks programs
    return (2 * programs * block_m, block_n)


def stream_k_counts_shape(shape_c: Sequence[int], block_m: int = 128,
                          block_n: int = 128) -> tuple[int]:
    """The shape of the i32 ``counts`` of :func:`stream_k_matmul` with ``workspace``: one
    count a tile of ``c``, rounded up to a multiple of 16 (so that ``divisible_sizes=True``
    holds for it too)."""
    grid_m, grid_n = matmul_grid(shape_c, shape_c, block_m, block_n)
    return (cdiv(grid_m * grid_n, 16) * 16,)


def _fixup_rows(block_m: int, block_n: int) -> int:
    """The rows of a split tile that :func:`stream_k_matmul`'s last program sums at a time:
    2048 elements or fewer (16 a thread on 4 warps)."""
    return max(1, min(block_m, 2048 // block_n))


def stream_k_matmul_grid(
    shape_a: Sequence[int], shape_b: Sequence[int], programs: int, block_m: int = 128,
    block_n: int = 128, block_k: int = 64,
) -> tuple[int]:
    """The grid of :func:`stream_k_matmul`: ``programs`` (the SMs times the programs that
    fit on one, say), or fewer where there are fewer k steps in all."""
    grid_m, grid_n = matmul_grid(shape_a, shape_b, block_m, block_n)
    return _programs_grid(programs, grid_m * grid_n * max(cdiv(shape_a[1], block_k), 1))


def _programs_grid(programs: int, work: int) -> tuple[int]:
    """The 1-D grid of ``programs`` that share ``work`` units, or ``work`` programs where
    there are fewer units."""
    if isinstance(programs, bool) or not isinstance(programs, int) or programs < 1:
        raise ValueError(f"programs must be a positive integer, got {programs!r}")
    return (min(programs, work),)


def matmul_grid(
    shape_a: Sequence[int], shape_b: Sequence[int], block_m: int = 64, block_n: int = 64
) -> tuple[int, int]:
    """The grid of :func:`matmul` for ``a`` of ``shape_a`` (M, K) and ``b`` of ``shape_b``."""
    return (max(cdiv(shape_a[0], block_m), 1), max(cdiv(shape_b[1], block_n), 1))


def batched_matmul(
    dtype: str = "f16",
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    out_dtype: str = "f32",
) -> KernelBuilder:
    """``c[i] = a[i] @ b[i]`` over a batch, f32 accumulation, on a 3-D grid.

    Arguments: ``a`` (B x M x K), ``b`` (B x K x N) of ``dtype``, ``c`` (B x M x N,
    ``out_dtype``: f32, or f16/bf16 rounded from the f32 accumulator as ``torch.bmm``
    returns).
    Program (i, j, batch) computes the ``block_m x block_n`` tile (i, j) of ``c[batch]``
    (``program_id(2)`` is the batch), loading ``1 x block x block`` tiles of the 3-D views.
    Grid: :func:`batched_matmul_grid`.
    """
    _check_matmul(dtype, None, block_m=block_m, block_n=block_n, block_k=block_k)
    _check_out_dtype(out_dtype)
    kb = KernelBuilder(
        "batched_matmul", a=_view(dtype, 3), b=_view(dtype, 3), c=_view(out_dtype, 3)
    )
    with kb as k:
        m = k.program_id(0) * block_m
        n = k.program_id(1) * block_n
        batch = k.program_id(2)
        size_k = k.size(k.args.a, 2)
        acc0 = k.full([block_m, block_n], 0.0, "f32")
        with k.loop(0, size_k, block_k, carried=[acc0]) as loop:
            (acc,) = loop.carried
            a = k.load(k.args.a, [batch, m, loop.iv], [1, block_m, block_k])
            b = k.load(k.args.b, [batch, loop.iv, n], [1, block_k, block_n])
            a = k.reshape(a, [block_m, block_k])
            b = k.reshape(b, [block_k, block_n])
            loop.yield_(k.dot(a, b, acc))
        (acc,) = loop.results
        if out_dtype != "f32":
            acc = k.cast(acc, out_dtype)
        k.store(k.reshape(acc, [1, block_m, block_n]), k.args.c, [batch, m, n])
    return kb


def batched_matmul_grid(
    shape_a: Sequence[int], shape_b: Sequence[int], block_m: int = 64, block_n: int = 64
) -> tuple[int, int, int]:
    """The grid of :func:`batched_matmul` for ``a`` (B, M, K) and ``b`` (B, K, N)."""
    return (
        max(cdiv(shape_a[1], block_m), 1),
        max(cdiv(shape_b[2], block_n), 1),
        max(shape_a[0], 1),
    )


def attention(
    dtype: str = "f16",
    head_dim: int = 64,
    block_m: int = 64,
    block_n: int = 64,
    causal: bool = False,
    overlap: bool = False,
) -> KernelBuilder:
    """Scaled dot-product attention, ``o = softmax(q k^T * scale) v``, flash-attention style.

    Arguments: ``q`` (B x M x D), ``k``, ``v`` (B x N x D) of ``dtype``, ``o`` (B x M x D,
    ``dtype``) and ``scale`` (f32 scalar); B is batch times heads and D at most ``head_dim``
    (a power of two; smaller D is padded with zeros). Program (i, b) computes rows
    ``i * block_m ...`` of ``o[b]``: it loops over ``block_n`` keys at a time, keeps the
    running row maximum ``m`` and row sum ``l`` of ``exp(s - m)`` (an online softmax, in
    base 2 as flash attention: ``2^(s log2(e) - m)``) and an f32 accumulator rescaled by
    ``exp(m_old - m_new)``, so the M x N scores never reach global memory. Both products are
    ``tile.dot`` (tensor cores for f16/bf16; ``p`` is rounded to ``dtype`` first, as in
    Triton's tutorial). Only the blocks of keys that some row of the program sees in part
    (the last one; with ``causal``, where key ``j`` is seen by query ``i`` only when
    ``j <= i``, those on the diagonal) are masked, in a loop of their own; the keys stop at
    the block's last query. Grid: :func:`attention_grid`.

    ``overlap``: the loop over the whole blocks runs one product behind (flash attention 3's
    overlap within a warpgroup): an iteration issues the scores of its block, then ``p v`` of
    the block before, and the softmax of its scores runs while that product does. On sm_90a
    (wgmma, which runs asynchronously) that hides the softmax behind the tensor cores, for
    more registers (``p`` of the block before stays live) and a copy of the first block's
    softmax and of the last ``p v`` outside the loop; mma.sync gains nothing from it.
    """
    _check_dtype(dtype, MATMUL_DTYPES)
    _check_pow2(head_dim=head_dim, block_m=block_m, block_n=block_n)
    kb = KernelBuilder(
        "attention_causal" if causal else "attention",
        q=_view(dtype, 3), k=_view(dtype, 3), v=_view(dtype, 3), o=_view(dtype, 3),
        scale=Scalar("f32"),
    )
    with kb as k:
        first = k.program_id(0) * block_m
        batch = k.program_id(1)
        keys = k.size(k.args.k, 1)
        q = k.reshape(k.load(k.args.q, [batch, first, 0], [1, block_m, head_dim]),
                      [block_m, head_dim])
        rows = k.expand_dims(k.iota(block_m) + k.cast(first, "i32"), 1)
        stop = k.minimum(first + block_m, keys) if causal else keys
        # Scores in base 2 (scale * log2(e) folded into the scale): p = 2^(s - m) costs no
        # multiply beyond the scale's, and flushes below 2^-126 (ex2.approx.ftz): the
        # largest term of each row's sum is 1, so no flushed term moves the result.
        scale = k.args.scale * math.log2(math.e)
        acc0 = k.full([block_m, head_dim], 0.0, "f32")
        m0 = k.full([block_m, 1], float("-inf"), "f32")
        l0 = k.full([block_m, 1], 0.0, "f32")

        def scores(start: Value, masked: bool) -> Value:
            """``q k^T`` of keys ``start ...`` in base 2; ``masked``: past the end (and,
            if causal, after a row's query) a key's score is -inf."""
            key = k.reshape(k.load(k.args.k, [batch, start, 0], [1, block_n, head_dim]),
                            [block_n, head_dim])
            s = k.dot(q, k.trans(key), k.full([block_m, block_n], 0.0, "f32")) * scale
            if masked:
                cols = k.expand_dims(k.iota(block_n) + k.cast(start, "i32"), 0)
                seen = k.broadcast(cols < k.cast(keys, "i32"), [block_m, block_n])
                if causal:
                    seen = seen & (cols <= rows)
                s = k.where(seen, s, float("-inf"))
            return s

        def softmax(s: Value, m: Value) -> tuple[Value, Value, Value]:
            """The online softmax's new row maximum, ``p`` and the old sums' factor."""
            m_new = k.maximum(m, k.max(s, axis=1, keepdims=True))
            return m_new, k.exp2(s - m_new, ftz=True), k.exp2(m - m_new, ftz=True)

        def summed(l_: Value, alpha: Value, p: Value) -> Value:
            """The row sums rescaled to the new maximum, plus ``p``'s."""
            return l_ * alpha + k.sum(p, axis=1, keepdims=True)

        def values(start: Value) -> Value:
            return k.reshape(k.load(k.args.v, [batch, start, 0], [1, block_n, head_dim]),
                             [block_n, head_dim])

        def rounded(p: Value) -> Value:
            return k.cast(p, dtype) if dtype != "f32" else p

        def block(carried: Sequence[Value], start: Value, masked: bool) -> list[Value]:
            """The online softmax's step over keys ``start ...``."""
            acc, m, l_ = carried
            m_new, p, alpha = softmax(scores(start, masked), m)
            value = values(start)
            l_ = summed(l_, alpha, p)
            return [k.dot(rounded(p), value, acc * alpha), m_new, l_]

        # The blocks of keys every row of the program sees whole need no mask (as flash
        # attention's): all but the last of a non-causal row, those left of the diagonal of
        # a causal one. The rest (the last block, or the diagonal's) go first, masked: every
        # row sees their first key, so the first block makes m_new finite. (Last, their
        # values stayed live through the main loop: a generic sm_80 kernel spilled.)
        whole = keys // block_n * block_n
        if causal:
            whole = k.minimum(whole, (first + 1) // block_n * block_n)
        with k.loop(whole, stop, block_n, carried=[acc0, m0, l0]) as tail:
            tail.yield_(*block(tail.carried, tail.iv, masked=True))
        if not overlap:
            with k.loop(0, whole, block_n, carried=tail.results) as loop:
                loop.yield_(*block(loop.carried, loop.iv, masked=False))
            acc, m, l_ = loop.results
        else:
            # The whole blocks one product apart: iteration j issues block j's scores, then
            # block j-1's p v, then runs block j's softmax, which the waits for the two
            # products (where their results are first used) leave running beside p v.
            acc, m, l_ = tail.results
            p0 = k.full([block_m, block_n], 0.0, dtype)
            any_whole = whole > 0
            with k.if_(any_whole, carried=[acc, m, l_, p0]) as head:
                m_new, p, alpha = softmax(scores(k.index(0), masked=False), m)
                l_ = summed(l_, alpha, p)
                head.yield_(acc * alpha, m_new, l_, rounded(p))
            with k.loop(block_n, whole, block_n, carried=head.results) as loop:
                acc, m, l_, p_last = loop.carried
                s = scores(loop.iv, masked=False)
                acc = k.dot(p_last, values(loop.iv - block_n), acc)
                m_new, p, alpha = softmax(s, m)
                l_ = summed(l_, alpha, p)
                loop.yield_(acc * alpha, m_new, l_, rounded(p))
            acc, m, l_, p_last = loop.results
            with k.if_(any_whole, carried=[acc]) as last:
                last.yield_(k.dot(p_last, values(whole - block_n), acc))
            (acc,) = last.results
        out = k.fdiv(acc, l_, ieee_rounding=False)
        out = k.cast(out, dtype) if dtype != "f32" else out
        k.store(k.reshape(out, [1, block_m, head_dim]), k.args.o, [batch, first, 0])
    return kb


def attention_grid(shape_q: Sequence[int], block_m: int = 64) -> tuple[int, int]:
    """The grid of :func:`attention` for ``q`` of ``shape_q`` (B, M, D)."""
    return (max(cdiv(shape_q[1], block_m), 1), max(shape_q[0], 1))


__all__ = [
    "argmax",
    "argmax_grid",
    "attention",
    "attention_grid",
    "batched_matmul",
    "batched_matmul_grid",
    "bias_gelu",
    "bias_gelu_grid",
    "cdiv",
    "col_sum",
    "col_sum_grid",
    "layer_norm",
    "layer_norm_grid",
    "matmul",
    "matmul_grid",
    "persistent_matmul",
    "persistent_matmul_grid",
    "row_sum",
    "row_sum_grid",
    "softmax",
    "softmax_grid",
    "softmax_online",
    "stream_k_counts_shape",
    "stream_k_matmul",
    "stream_k_matmul_grid",
    "stream_k_workspace_shape",
    "transpose",
    "transpose_grid",
    "vector_add",
    "vector_add_grid",
]
