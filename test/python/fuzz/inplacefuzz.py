"""Random PyTorch programs with in-place ops and views through ``torch.compile(backend=
"tileopt")``, against eager.

Each seed gives a chain of up to sixteen steps on two [5, 7] inputs ``x`` and ``w`` (f32, or
``w`` f16): pure ops (new tensors), views (rows, columns, slices, transposes, reshapes),
in-place ops (``add_``, ``mul_``, ``relu_``, ``clamp_``, ``sigmoid_``, ``masked_fill_``,
``F.relu(inplace=True)``, ``x += y`` across dtypes), slice, row and boolean-mask assignments,
in-place ops on slices (``x[:, 1:3].mul_(3)``, ``x[0].copy_(x[-1])``),
and ops that tileopt leaves to PyTorch (``sort``), on any live tensor: the inputs, views of
them, tensors the graph made and views of those. The backend turns the in-place ops that no
one else sees into out-of-place ones and compiles them; the others run eagerly in order. The
outputs and the inputs afterwards must equal eager's, bit for bit or within 1e-5 (f16: 1e-3);
anything else (an exception, a difference) is a failure. ``test_modelfuzz.py`` runs a
fixed-seed batch; ``make fuzz-models`` a long one:

    .venv/bin/python test/python/fuzz/inplacefuzz.py --seed 0 --count 100
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
from modelfuzz import run_seeds  # noqa: E402

SHAPE = (5, 7)
Step = tuple[str, int, Any]

PURE: tuple[Callable[[torch.Tensor], torch.Tensor], ...] = (
    lambda t: t * 2.0, lambda t: t.exp() * 0.1, lambda t: F.relu(t - 0.2), lambda t: t.clone(),
    lambda t: t * 1.0, lambda t: t + 0.0, lambda t: t.float() + 1.0,
    lambda t: t.sort(-1).values,  # sort runs eagerly
)
IN_PLACE: tuple[Callable[[torch.Tensor], Any], ...] = (
    lambda t: t.add_(1.0), lambda t: t.mul_(-2.0), lambda t: t.relu_(),
    lambda t: t.clamp_(min=0.1), lambda t: F.relu(t, inplace=True), lambda t: t.sigmoid_(),
    lambda t: t.masked_fill_(t > 0.5, -1.0),
)


def _views(shape: tuple[int, ...]) -> list[tuple[Callable[[torch.Tensor], torch.Tensor],
                                                tuple[int, ...]]]:
    """Views of a tensor of ``shape``, with their shapes."""
    if len(shape) == 2:
        rows, cols = shape
        return [(lambda t: t[-1], (cols,)), (lambda t: t.t(), (cols, rows)),
                (lambda t: t[:, 1:3], (rows, 2)), (lambda t: t.reshape(-1), (rows * cols,))]
    return [(lambda t: t[1:], (shape[0] - 1,)), (lambda t: t.unsqueeze(0), (1, shape[0]))]


def _assignments(shape: tuple[int, ...]) -> list[Callable[[torch.Tensor], None]]:
    """Slice, row and boolean-mask assignments to a tensor of ``shape``, and in-place ops on
    its slices."""
    def mask(t: torch.Tensor) -> None:
        t[t < -0.5] = 0.25

    if len(shape) == 2:
        def columns(t: torch.Tensor) -> None:
            t[:, 1:3] = 0.5

        def row(t: torch.Tensor) -> None:
            t[0] = 3.0

        return [columns, row, mask, lambda t: t[:, 1:3].mul_(3.0),
                lambda t: t[..., :2].zero_(), lambda t: t[0].copy_(t[-1])]

    def head(t: torch.Tensor) -> None:
        t[:1] = -1.0

    return [head, mask]


def program(seed: int) -> tuple[list[Step], list[int], torch.dtype]:
    """One seed's steps (kind, tensor, what), the tensors it returns and ``w``'s dtype."""
    r = random.Random(seed)
    shapes: list[tuple[int, ...]] = [SHAPE, SHAPE]
    steps: list[Step] = []
    for _ in range(r.randint(3, 16)):
        # Half the steps take one of the three newest tensors.
        i = r.randrange(max(0, len(shapes) - 3) if r.random() < 0.5 else 0, len(shapes))
        kind = r.choice(("pure", "view", "view", "in_place", "in_place", "assign", "iadd"))
        if kind == "pure":
            steps.append(("new", i, r.choice(PURE)))
            shapes.append(shapes[i])
        elif kind == "view":
            view, shape = r.choice(_views(shapes[i]))
            steps.append(("new", i, view))
            shapes.append(shape)
        elif kind == "in_place":
            steps.append(("change", i, r.choice(IN_PLACE)))
        elif kind == "assign":
            steps.append(("change", i, r.choice(_assignments(shapes[i]))))
        else:
            j = r.randrange(len(shapes))
            if shapes[j] == shapes[i] or shapes[j] == shapes[i][-1:]:
                steps.append(("iadd", i, j))
    outputs = r.sample(range(len(shapes)), min(len(shapes), 3))
    return steps, outputs, r.choice((torch.float32, torch.float32, torch.float16))


def function(steps: list[Step], outputs: list[int]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """The program as a function of ``x`` and ``w``."""
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        live = [x, w]
        for kind, i, what in steps:
            if kind == "new":
                live.append(what(live[i]))
            elif kind == "change":
                what(live[i])
            else:
                live[i] += live[what]
        return tuple(live[o] * 1.0 for o in outputs)

    return f


def check(seed: int) -> str:
    """Runs one seed's program eagerly and compiled: "ok", "eager fails" (the program is
    invalid in PyTorch: nothing to compare) or raises AssertionError for a difference."""
    import tileopt.dynamo  # noqa: F401  (registers the backend)

    steps, outputs, w_dtype = program(seed)
    f = function(steps, outputs)
    gen = torch.Generator().manual_seed(seed)
    x, w = torch.randn(SHAPE, generator=gen), torch.randn(SHAPE, generator=gen).to(w_dtype)
    eager_x, eager_w, x, w = x.clone(), w.clone(), x, w
    torch._dynamo.reset()
    with torch.no_grad():
        try:
            want = f(eager_x, eager_w)
        except RuntimeError:
            return "eager fails"
        got = torch.compile(f, backend="tileopt", options={"device": "emulator"})(x, w)
    for name, a, b in zip([f"output {i}" for i in range(len(got))] + ["x", "w"],
                          (*got, x, w), (*want, eager_x, eager_w), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{name}: {a.shape} {a.dtype}, " \
            f"eager {b.shape} {b.dtype}"
        tolerance = 1e-3 if a.dtype == torch.float16 else 1e-5
        assert torch.allclose(a, b, rtol=tolerance, atol=tolerance, equal_nan=True), (
            f"seed {seed} {name}: differs from eager by "
            f"{float((a.float() - b.float()).abs().nan_to_num().max()):.2e}")
    return "ok"


def main(argv: list[str] | None = None) -> int:
    return run_seeds(check, lambda seed: str(seed), "programs", __doc__.splitlines()[0], 100,
                     argv)


if __name__ == "__main__":
    sys.exit(main())
