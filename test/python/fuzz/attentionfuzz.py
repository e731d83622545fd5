"""Random attention through ``tileopt.compile(f, inputs)``, against eager and f64.

Each seed gives one attention: ``F.scaled_dot_product_attention`` or the same written out
(``softmax(mask(q k^T * scale)) v``), grouped-query (``enable_gqa``, Llama's ``repeat_kv``) or
with k and v broadcast over the batch; causal or not; no mask, a boolean one (a [t, s] pattern
or a padding mask over keys, some rows masked whole), an additive one in f32 or the tensors'
type (``finfo.min`` where Hugging Face masks); f32, f16 or bf16 at amplitudes up to 8 (scores
of size ~40); one query (decoding) to 100, head dimensions up to 160 (past what one attention
kernel holds). A program must compile and be as close to the f64 reference as eager is (four
times eager's error, at least 8e-5 of the output's scale), with NaN exactly where eager has
them, or be refused with ``UnsupportedOperatorError``; anything else is a failure.
``test_modelfuzz.py`` runs a fixed-seed batch; ``make fuzz-models`` a long one:

    .venv/bin/python test/python/fuzz/attentionfuzz.py --seed 0 --count 100
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
from modelfuzz import run_seeds  # noqa: E402

LENGTHS = (1, 5, 16, 37, 64, 65, 100)
HEAD_DIMS = (8, 16, 40, 64, 96, 128, 160, 256, 320)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: The least error allowed, of the output's scale: test_models' f32 tolerance (f32 exp is
#: ex2.approx, as Triton's and Inductor's).
FLOOR = 8e-5


@dataclass
class Attention:
    """One random attention: ``f(q, k, v[, mask])``."""

    seed: int
    form: str  # "sdpa" or "by_hand"
    kv: str  # "same", "gqa" (enable_gqa), "repeat_kv", or "batch" (k and v broadcast)
    dtype: torch.dtype
    batch: int
    heads: int
    kv_heads: int
    t: int
    s: int
    d: int
    causal: bool
    mask: str  # "none", "bool", "padding", "float32" or "float" (the tensors' type)
    scale: float | None
    amplitude: float

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 *mask: torch.Tensor) -> torch.Tensor:
        m = mask[0] if mask else None
        if self.kv == "repeat_kv":
            k, v = _repeat_kv(k, self.heads // self.kv_heads), _repeat_kv(
                v, self.heads // self.kv_heads)
        if self.form == "sdpa":
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=m, is_causal=self.causal, scale=self.scale,
                enable_gqa=self.kv == "gqa")
        scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
        scores = q @ k.transpose(-2, -1) * scale
        if self.causal:
            keep = torch.ones(self.t, self.s, dtype=torch.bool).tril()
            scores = scores.masked_fill(~keep, float("-inf"))
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else (
                scores + m)
        return scores.softmax(-1).to(v.dtype) @ v

    def inputs(self) -> tuple[torch.Tensor, ...]:
        g = torch.Generator().manual_seed(self.seed)
        kv_batch = 1 if self.kv == "batch" else self.batch

        def randn(*shape: int, amplitude: float = 1.0) -> torch.Tensor:
            return (torch.randn(shape, generator=g) * amplitude).to(self.dtype)

        q = randn(self.batch, self.heads, self.t, self.d, amplitude=self.amplitude)
        k = randn(kv_batch, self.kv_heads, self.s, self.d, amplitude=self.amplitude)
        v = randn(kv_batch, self.kv_heads, self.s, self.d)
        if self.mask == "none":
            return q, k, v
        if self.mask in ("bool", "padding"):
            shape = (self.t, self.s) if self.mask == "bool" else (self.batch, 1, 1, self.s)
            keep = torch.rand(shape, generator=g) > 0.3
            if self.mask == "bool" and self.t > 2:
                keep[1] = False  # a row masked whole: NaN written out, 0 through SDPA
            return q, k, v, keep
        low = torch.finfo(torch.float32 if self.mask == "float32" else self.dtype).min
        additive = torch.randn(self.t, self.s, generator=g)
        additive = additive.masked_fill(torch.rand(self.t, self.s, generator=g) < 0.3, low)
        return q, k, v, additive.to(torch.float32 if self.mask == "float32" else self.dtype)


def _repeat_kv(x: torch.Tensor, n: int) -> torch.Tensor:
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def attention(seed: int) -> Attention:
    """The attention of one seed."""
    r = random.Random(seed)
    form = r.choice(("sdpa", "sdpa", "by_hand"))
    kv = r.choice(("same", "same", "gqa", "repeat_kv", "batch"))
    if form == "by_hand" and kv == "gqa":
        kv = "repeat_kv"
    heads = r.choice((1, 2, 4, 6, 8))
    kv_heads = heads
    if kv in ("gqa", "repeat_kv"):
        kv_heads = r.choice([h for h in (1, 2, 3, 4) if heads % h == 0 and h < heads] or [1])
        if kv_heads == heads:
            kv = "same"
    t, s = r.choice(LENGTHS), r.choice(LENGTHS)
    causal = r.random() < 0.3 and (form == "sdpa" or t <= s)
    mask = r.choice(("none", "none", "bool", "padding", "float32", "float"))
    if causal and form == "sdpa":
        mask = "none"  # SDPA takes a mask or is_causal, not both
    return Attention(seed, form, kv, r.choice(DTYPES), r.choice((1, 2)), heads, kv_heads,
                     t, s, r.choice(HEAD_DIMS), causal, mask,
                     r.choice((None, None, 0.3, 1.0)), r.choice((1.0, 4.0, 8.0)))


def _error(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest |got - want| where both are finite, relative to want's largest."""
    finite = torch.isfinite(want) & torch.isfinite(got)
    if not finite.any():
        return 0.0
    scale = max(1.0, float(want[finite].abs().max()))
    return float((got.double()[finite] - want.double()[finite]).abs().max()) / scale


def check(seed: int) -> str:
    """Compiles and runs one seed's attention: "ok", "unsupported: ..." or raises
    AssertionError for a wrong answer (other exceptions propagate)."""
    import tileopt

    a = attention(seed)
    args = a.inputs()
    with torch.no_grad():
        want = a(*args)
        reference = a(*(x.double() if x.is_floating_point() else x for x in args))
    try:
        graph = tileopt.compile(a, args)
    except tileopt.UnsupportedOperatorError as e:
        return "unsupported: " + str(e).splitlines()[0]
    with torch.no_grad():
        got = graph(*args)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    # NaN where eager and f64 both have it (a row masked whole), and nowhere they both have
    # none. Where they disagree either is right: eager's half-precision scores overflow
    # where f64's do not (as tileopt's, rounded as eager's are), and CPU bf16 matmuls
    # spread a NaN row of p into other rows of p @ v that f64 keeps finite.
    agree = torch.isnan(want) == torch.isnan(reference)
    assert torch.equal(torch.isnan(got)[agree], torch.isnan(want)[agree]), (
        f"seed {seed} {a}: NaNs differ")
    eager, ours = _error(want, reference), _error(got, reference)
    assert ours <= max(4 * eager, FLOOR), (
        f"seed {seed} {a}: error {ours:.2e} from f64, eager's {eager:.2e}")
    return "ok"


def main(argv: list[str] | None = None) -> int:
    return run_seeds(check, str, "attentions", __doc__.splitlines()[0], 100, argv)


if __name__ == "__main__":
    sys.exit(main())
