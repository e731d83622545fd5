"""The builder's casts, promotions and operators give torch's answers (issue 9).

Each kernel is compiled for sm_90 and run in the PTX emulator on sizes that are not a multiple
of the tile; torch computes the reference.
"""

from __future__ import annotations

import pytest
from tileopt.builder import KernelBuilder, Scalar, View
from tileopt.compiler import compile

torch = pytest.importorskip("torch")

N, BLOCK = 100, 128
TORCH = {"i1": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
         "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
CASTS = ["i8", "i16", "i32", "i64", "f16", "bf16", "f32"]


def test_booleans_cast_to_zero_or_one() -> None:
    """True becomes 1 (it used to be sign-extended to -1 / -1.0), as torch, numpy and Triton."""
    kb = KernelBuilder("cast_bool", m=View("i1", 1), **{f"o_{d}": View(d, 1) for d in CASTS})
    with kb as k:
        m = k.load(k.args.m, [0], [BLOCK])
        for d in CASTS:
            k.store(k.cast(m, d), getattr(k.args, f"o_{d}"), [0])
    kernel = compile(kb, target="sm_90")
    m = torch.rand(N, generator=torch.Generator().manual_seed(0)) > 0.5
    outs = [torch.full((N,), 7, dtype=TORCH[d]) for d in CASTS]
    kernel.launch(1, m, *outs, device="emulator")
    for d, out in zip(CASTS, outs, strict=True):
        torch.testing.assert_close(out, m.to(TORCH[d]), msg=d)


@pytest.mark.parametrize("src", ["f32", "i32", "f16"])
def test_cast_to_bool_is_not_zero(src: str) -> None:
    kb = KernelBuilder("to_bool", x=View(src, 1), m=View("i1", 1), back=View(src, 1))
    with kb as k:
        b = k.cast(k.load(k.args.x, [0], [BLOCK]), "i1")
        k.store(b, k.args.m, [0])
        k.store(k.cast(b, src), k.args.back, [0])
    kernel = compile(kb, target="sm_90")
    x = torch.tensor([0, 1, -1, 2, 0, -3, 255, 256] * 13)[:N].to(TORCH[src])
    m = torch.zeros(N, dtype=torch.bool)
    back = torch.zeros(N, dtype=TORCH[src])
    kernel.launch(1, x, m, back, device="emulator")
    torch.testing.assert_close(m, x.bool())
    torch.testing.assert_close(back, x.bool().to(TORCH[src]))


def test_where_with_a_scalar_condition_picks_whole_tiles() -> None:
    kb = KernelBuilder("pick", x=View("f32", 1), y=View("f32", 1), out=View("f32", 1),
                       a=Scalar("i32"), b=Scalar("i32"))
    with kb as k:
        x = k.load(k.args.x, [0], [BLOCK])
        y = k.load(k.args.y, [0], [BLOCK])
        first = k.args.a < k.args.b  # a scalar i1
        k.store(k.where(first, x, y) + k.where(first, 1.0, 2.0), k.args.out, [0])
    kernel = compile(kb, target="sm_90")
    x, y = torch.randn(N), torch.randn(N)
    for a, b in ((1, 2), (3, 2)):
        out = torch.zeros(N)
        kernel.launch(1, x, y, out, a, b, device="emulator")
        cond = torch.tensor(a < b)
        torch.testing.assert_close(out, torch.where(cond, x, y) + torch.where(cond, 1.0, 2.0))


def test_python_numbers_promote_like_torch() -> None:
    """An int tile with a float number is f32 (it used to truncate 0.5 to 0); a bool tile with
    an int is an integer (i32; torch's int64 has the same values); booleans order False <
    True."""
    kb = KernelBuilder("promote", n=View("i32", 1), m=View("i1", 1), h=View("f32", 1),
                       c=View("i32", 1), lt=View("i1", 1), mx=View("i1", 1))
    with kb as k:
        n = k.load(k.args.n, [0], [BLOCK])
        m = k.load(k.args.m, [0], [BLOCK])
        k.store(n + 0.5, k.args.h, [0])
        k.store(m + 1, k.args.c, [0])
        k.store(m < (m ^ True), k.args.lt, [0])
        k.store(k.maximum(m, m ^ True), k.args.mx, [0])
    kernel = compile(kb, target="sm_90")
    n = torch.arange(N, dtype=torch.int32) - 50
    m = torch.rand(N, generator=torch.Generator().manual_seed(1)) > 0.5
    h, c = torch.zeros(N), torch.zeros(N, dtype=torch.int32)
    lt, mx = torch.zeros(N, dtype=torch.bool), torch.zeros(N, dtype=torch.bool)
    kernel.launch(1, n, m, h, c, lt, mx, device="emulator")
    torch.testing.assert_close(h, n + 0.5)
    torch.testing.assert_close(c, (m + 1).to(torch.int32))
    torch.testing.assert_close(lt, m < ~m)
    torch.testing.assert_close(mx, torch.maximum(m, ~m))


@pytest.mark.parametrize("dtype", ["i32", "f32"])
def test_floor_division_and_remainder_round_like_torch(dtype: str) -> None:
    """``//`` and ``%`` round toward minus infinity (Python's and torch's); float ``//`` used to
    be a plain division and ``%`` took the sign of the dividend."""
    kb = KernelBuilder("divmod", a=View(dtype, 1), b=View(dtype, 1), q=View(dtype, 1),
                       r=View(dtype, 1))
    with kb as k:
        a = k.load(k.args.a, [0], [BLOCK], padding=1)
        b = k.load(k.args.b, [0], [BLOCK], padding=1)
        k.store(a // b, k.args.q, [0])
        k.store(a % b, k.args.r, [0])
    kernel = compile(kb, target="sm_90")
    gen = torch.Generator().manual_seed(2)
    a = torch.randint(-50, 50, (N,), generator=gen).to(TORCH[dtype])
    b = torch.randint(1, 9, (N,), generator=gen) * (torch.randint(0, 2, (N,), generator=gen) * 2
                                                    - 1)
    b = b.to(TORCH[dtype])
    if dtype == "f32":
        a, b = a + 0.25, b * 0.5
    q, r = torch.zeros_like(a), torch.zeros_like(a)
    kernel.launch(1, a, b, q, r, device="emulator")
    torch.testing.assert_close(q, torch.div(a, b, rounding_mode="floor"))
    torch.testing.assert_close(r, torch.remainder(a, b))
