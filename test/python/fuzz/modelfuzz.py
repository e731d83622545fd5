"""Random small PyTorch programs through ``tileopt.compile(f, inputs)``, against eager.

Each seed gives a chain of up to six steps (elementwise functions, a broadcast operand,
reductions over a random dimension, max/min with indices, softmax, layer norm, transposes,
short cumsums, slice assignments, convolutions and pooling along the last dimension,
products with a constant matrix along it: f32, int8 through ``torch._int_mm`` of the
quantized input, and e4m3 through ``torch._scaled_mm``) on a random shape of up to
20,000 elements (sizes 1, 3, 7, ... 20001: unit dimensions, odd sizes, rows longer than a
program holds). A program must compile and match eager PyTorch, or be refused with
``UnsupportedOperatorError``; anything else (another exception, a wrong answer) is a
failure. ``test_fuzz.py`` runs a fixed-seed batch; ``make fuzz-models`` a long one:

    .venv/bin/python test/python/fuzz/modelfuzz.py --seed 0 --count 200
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812

SIZES = (1, 3, 7, 16, 37, 64, 100, 129, 1000, 5000, 17000, 20001)
MAX_ELEMENTS = 20000
STEPS = ("unary", "unary", "binary", "reduce", "softmax", "norm", "broadcast", "transpose",
         "cumsum")
UNARY: tuple[Callable[[torch.Tensor], torch.Tensor], ...] = (
    torch.exp, torch.tanh, torch.sigmoid, F.relu, F.gelu, F.silu, torch.abs, torch.neg,
    lambda t: t * 2.5, lambda t: t.pow(2),
)
TOLERANCE = 1e-3


def _window(x: torch.Tensor, r: random.Random) -> torch.Tensor:
    """A convolution (constant weights), max or average pooling of every row of ``x`` along
    its last dimension, padded to keep its length."""
    rows = x.reshape(-1, 1, x.shape[-1])
    k = r.choice((1, 2, 3, 5))
    kind = r.choice(("conv", "max", "avg"))
    if kind == "conv":
        dilation = r.choice((1, 2))
        weight = torch.tensor([[[r.uniform(-1, 1) for _ in range(k)]]])
        span = dilation * (k - 1)
        padded = F.pad(rows, (span // 2, span - span // 2))
        out = F.conv1d(padded, weight, dilation=dilation)
    elif kind == "max":
        out = F.max_pool1d(F.pad(rows, (k // 2, (k - 1) // 2), value=float("-inf")), k, 1)
    else:
        out = F.avg_pool1d(rows, k, 1, k // 2, count_include_pad=r.random() < 0.5)
        out = out[..., : x.shape[-1]]
    return out.reshape(x.shape)


def _product(x: torch.Tensor, x0: torch.Tensor, r: random.Random) -> torch.Tensor:
    """``x`` times a constant f32 matrix along its last dimension, or (a quarter of the
    time each) the program's input quantized to int8 times a constant int8 matrix by
    ``torch._int_mm`` (int32 sums, exact: the input is the same on both sides), scaled back
    to floats, or converted to e4m3 times a constant e4m3 matrix by ``torch._scaled_mm``
    (exact products summed in f32, scaled)."""
    n = x.shape[-1]
    # From Python's random (a torch.Generator made while torch.export traces would be an
    # input of the exported program).
    kind = r.random()
    if kind < 0.5:
        w = torch.tensor([[r.gauss(0, 1) for _ in range(n)] for _ in range(n)])
        return x @ (w / n**0.5)
    if kind >= 0.75:
        q = (x0 * 8).to(torch.float8_e4m3fn).reshape(-1, n)
        w = torch.tensor([[r.gauss(0, 4) for _ in range(n)] for _ in range(n)])
        scale = torch.tensor(1 / (32 * n**0.5))
        y = torch._scaled_mm(q, w.to(torch.float8_e4m3fn).t(), scale, torch.tensor(1.0),
                             out_dtype=torch.float32)
        return y.reshape(x.shape)
    q = (x0 * 40).round().clamp(-128, 127).to(torch.int8).reshape(-1, n)
    w = torch.tensor([[r.randrange(-128, 128) for _ in range(n)] for _ in range(n)],
                     dtype=torch.int8)
    return (torch._int_mm(q, w).float() / (3000.0 * n**0.5)).reshape(x.shape)


@dataclass
class Program:
    """A random program: ``f(x, y)`` on ``x`` of ``shape`` and ``y`` of ``shape[-1:]``."""

    seed: int
    shape: list[int]
    steps: list[tuple[str, int]]

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x0 = x
        for step, seed in self.steps:
            r = random.Random(seed)
            if step == "unary" and seed % 4 == 0 and x.ndim:
                # A sliding window along the last dimension; the other unary steps are
                # those of before, so old seeds keep their programs.
                x = _window(x, r)
            elif step == "unary":
                x = r.choice(UNARY)(x)
            elif step == "binary":
                x = x + y if r.random() < 0.5 else x * y
            elif x.ndim == 0:
                continue
            elif step == "reduce":
                op = r.choice(("sum", "mean", "amax", "amin"))
                dim = r.randrange(x.ndim)
                if op in ("amax", "amin") and seed % 3 == 0:
                    # With its first index, read back by a gather (so a near-tie that
                    # rounding flips moves the result by that rounding only). The other
                    # steps are those of before, so old seeds keep their programs.
                    values, index = getattr(torch, op[1:])(x, dim, keepdim=True)
                    x = torch.gather(x, dim, index) + values - x * 0.5
                else:
                    x = getattr(torch, op)(x, dim=dim, keepdim=True) - x * 0.5
            elif step == "softmax":
                x = torch.softmax(x, r.randrange(x.ndim))
            elif step == "norm":
                x = F.layer_norm(x, x.shape[-1:])
            elif step == "broadcast" and seed % 3 == 0 and x.shape[-1] <= 300:
                # A product with a constant matrix along the last dimension; the other
                # broadcast steps are those of before, so old seeds keep their programs.
                x = x + _product(x, x0, r)
            elif step == "broadcast":
                x = x + x.mean(-1, keepdim=True)
            elif step == "transpose" and seed % 4 == 0 and x.ndim:
                # A slice (or one position) of a copy of x assigned a function of itself
                # (aten.slice_scatter, aten.select_scatter); the other transpose steps are
                # those of before, so old seeds keep their programs.
                dim = r.randrange(x.ndim)
                size = x.shape[dim]
                at: list[slice | int] = [slice(None)] * x.ndim
                if r.random() < 0.25:
                    at[dim] = r.randrange(-size, size)
                else:
                    at[dim] = slice(r.randrange(-size, size), r.choice(
                        (None, r.randrange(-size, size + 3))), r.choice((1, 1, 2, 3)))
                x = x.clone()
                x[tuple(at)] = torch.tanh(x[tuple(at)]) * 2
            elif step == "transpose" and x.ndim >= 2:
                x = (x.transpose(0, -1).contiguous() * 1.0).transpose(0, -1)
            elif step == "cumsum" and x.shape[-1] <= 300:
                x = torch.cumsum(x, -1) / 10
        return x

    def inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.shape, generator=g), torch.randn(self.shape[-1:], generator=g)


def program(seed: int) -> Program:
    """The program of one seed."""
    rng = random.Random(seed)
    shape = [rng.choice(SIZES) for _ in range(rng.choice((1, 2, 3)))]
    while torch.Size(shape).numel() > MAX_ELEMENTS:
        i = rng.randrange(len(shape))
        shape[i] = max(1, shape[i] // 3)
    steps = [(rng.choice(STEPS), rng.randrange(10**6)) for _ in range(rng.randint(1, 6))]
    return Program(seed, shape, steps)


def check(seed: int) -> str:
    """Compiles and runs one seed's program: "ok", "unsupported: ..." or raises
    AssertionError for a wrong answer (other exceptions propagate)."""
    import tileopt

    f = program(seed)
    x, y = f.inputs()
    want = f(x, y)
    try:
        graph = tileopt.compile(f, (x, y))
    except tileopt.UnsupportedOperatorError as e:
        return "unsupported: " + str(e).splitlines()[0]
    got = graph(x, y)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert torch.equal(torch.isnan(got), torch.isnan(want)), f"seed {seed}: NaNs differ"
    finite = ~torch.isnan(want)
    scale = max(1.0, float(want[finite].abs().max())) if finite.any() else 1.0
    error = float((got[finite] - want[finite]).abs().max()) / scale if finite.any() else 0.0
    assert error <= TOLERANCE, f"seed {seed} {f.shape} {f.steps}: error {error:.1e}"
    return "ok"


def run_seeds(check: Callable[[int], str], label: Callable[[int], str], noun: str,
              description: str, count: int, argv: list[str] | None) -> int:
    """The command line of a fuzzer: ``--seed`` and ``--count``; each seed's ``label`` and
    ``check`` result, or FAILED with the exception; exit status 1 on any failure."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=count)
    args = parser.parse_args(argv)
    failures = 0
    for seed in range(args.seed, args.seed + args.count):
        try:
            result = check(seed)
        except Exception as e:  # a bug: report it, go on, fail at the end
            failures += 1
            result = f"FAILED {type(e).__name__}: {str(e).splitlines()[0][:400]}"
        print(f"{label(seed)} {result}", flush=True)
    print(f"{args.count} {noun}, {failures} failures")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    return run_seeds(check, lambda seed: f"{seed} {program(seed).shape}", "programs",
                     __doc__.splitlines()[0], 200, argv)


if __name__ == "__main__":
    sys.exit(main())
