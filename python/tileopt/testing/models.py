"""Reference models in plain PyTorch, for ``tileopt.compile(model, inputs)``.

The tests (``test/python/frontend/test_models.py``), the graph benchmark
(``benchmarks/graphs.py``) and ``make demo`` (``examples/demo.py``) compile these and compare
the result with eager PyTorch, so each is written once, here. Keep the defaults stable: the
benchmark's numbers depend on them, and every parameter is created in a fixed order, so that
a seeded generator gives the same weights every time.

    torch.manual_seed(0)
    block = GPTBlock(dim=64, heads=4).eval()
    graph = tileopt.compile(block, (torch.randn(2, 16, 64),))

Needs torch (not a dependency of tileopt itself).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "ConvNeXtBlock",
    "GPTBlock",
    "InvertedResidual",
    "LlamaBlock",
    "RMSNorm",
    "ResNetBlock",
    "TopTwoMoE",
    "causal_attention",
    "random_layer_norm",
    "rotate_half",
]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension, ``x / rms(x) * weight``.

    Args:
        dim: the size of the last dimension.
        eps: added to the mean square before the square root.

    The weight starts random in [0.5, 1.5) (drawn from torch's generator), not at ones, so
    that a wrong or missing scale shows in the output.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x * rsqrt(mean(x**2, -1) + eps) * weight``."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def random_layer_norm(dim: int) -> nn.LayerNorm:
    """An ``nn.LayerNorm(dim)`` whose weight is random in [0.5, 1.5) and bias in [-0.5, 0.5)
    (drawn from torch's generator), so that a wrong or missing affine part shows."""
    m = nn.LayerNorm(dim)
    with torch.no_grad():
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
    return m


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled dot-product attention written out: ``softmax(mask(q k^T / sqrt(d))) v``.

    ``q``, ``k``, ``v``: ``[..., t, d]``; position ``i`` attends to positions ``<= i`` (the
    others are set to -inf before the softmax). The same as
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``, as elementary ops.
    """
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """The halves of the last dimension swapped, the new first half negated: ``[-x2, x1]``
    (the rotation of rotary embeddings as Hugging Face's LLaMA writes it)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class GPTBlock(nn.Module):
    """A pre-norm GPT block: LayerNorm, causal self-attention, LayerNorm, GELU MLP (4 x dim),
    each with a residual connection; linear layers have biases.

    Args:
        dim: the model width (input and output ``[batch, t, dim]``).
        heads: attention heads; ``dim`` must be a multiple of it.
    """

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, t, dim]``; returns the same shape."""
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LlamaBlock(nn.Module):
    """A LLaMA-style block: RMSNorm, causal self-attention with rotary position embeddings,
    RMSNorm, SwiGLU MLP, each with a residual connection; no biases.

    Two ways of writing the same block, which PyTorch exports as different graphs:

    - by default, separate ``wq``, ``wk``, ``wv`` projections, and rotary embeddings that
      rotate each head's two halves with cos/sin tables of ``dim // heads // 2`` columns,
      sliced to the input's sequence length (up to ``seq``);
    - ``fused_qkv=True``: one ``wqkv`` projection split in three;
    - ``rotate_half=True``: rotary embeddings as Hugging Face's LLaMA writes them,
      ``x * cos + rotate_half(x) * sin`` with tables of the full head width; the input's
      sequence length must then be exactly ``seq``.

    Args:
        dim: the model width (input and output ``[batch, t, dim]``).
        heads: attention heads; ``dim // heads`` must be even.
        seq: the positions the rotary tables cover.
        hidden: the SwiGLU width (172 is about 8/3 x 64, rounded up to a multiple of 4).
        fused_qkv: one projection for q, k and v (see above).
        rotate_half: Hugging Face's form of the rotary embedding (see above).
    """

    def __init__(
        self,
        dim: int = 64,
        heads: int = 4,
        seq: int = 16,
        hidden: int = 172,
        *,
        fused_qkv: bool = False,
        rotate_half: bool = False,
    ) -> None:
        super().__init__()
        self.heads = heads
        self.fused_qkv = fused_qkv
        self.rotate_half = rotate_half
        # The order of creation fixes which random numbers each weight draws: keep it.
        self.norm1 = RMSNorm(dim)
        if fused_qkv:
            self.norm2 = RMSNorm(dim)
            self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        else:
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, dim, bias=False)
            self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        if not fused_qkv:
            self.norm2 = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        half = dim // heads // 2
        freqs = 1.0 / 10000 ** (torch.arange(half, dtype=torch.float32) / half)
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), freqs)
        if rotate_half:
            angles = angles.repeat(1, 2)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        """The rotary position embedding of ``x``: ``[batch, heads, t, dim // heads]``."""
        if self.rotate_half:
            return x * self.cos + rotate_half(x) * self.sin
        x1, x2 = x.chunk(2, dim=-1)
        cos, sin = self.cos[: x.shape[-2]], self.sin[: x.shape[-2]]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, t, dim]``; returns the same shape."""
        b, t, c = x.shape
        h = self.norm1(x)
        if self.fused_qkv:
            qkv = self.wqkv(h).split(c, dim=-1)
        else:  # a generator: each projection is viewed as heads before the next is computed
            qkv = (w(h) for w in (self.wq, self.wk, self.wv))
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in qkv)
        y = causal_attention(self.rope(q), self.rope(k), v).transpose(1, 2).reshape(b, t, c)
        x = x + self.wo(y)
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def _random_batch_norm(channels: int) -> nn.BatchNorm2d:
    """An ``nn.BatchNorm2d`` whose running statistics and affine part are random (drawn from
    torch's generator), so that in eval mode a wrong or missing normalisation shows."""
    m = nn.BatchNorm2d(channels)
    with torch.no_grad():
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 1.5)
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
    return m


class ResNetBlock(nn.Module):
    """A ResNet's basic block: two 3 x 3 convolutions (no bias) with batch norm, a residual,
    ReLU. Input and output ``[batch, channels, h, w]``; use in eval mode."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = _random_batch_norm(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = _random_batch_norm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``relu(x + bn2(conv2(relu(bn1(conv1(x))))))``."""
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1 x 1 expansion, a depthwise 3 x 3 convolution, a 1 x 1
    projection (each with batch norm; ReLU6 after the first two), a residual. Input and
    output ``[batch, channels, h, w]``; use in eval mode."""

    def __init__(self, channels: int = 16, expand: int = 4) -> None:
        super().__init__()
        wide = channels * expand
        self.expand = nn.Conv2d(channels, wide, 1, bias=False)
        self.bn1 = _random_batch_norm(wide)
        self.depthwise = nn.Conv2d(wide, wide, 3, padding=1, groups=wide, bias=False)
        self.bn2 = _random_batch_norm(wide)
        self.project = nn.Conv2d(wide, channels, 1, bias=False)
        self.bn3 = _random_batch_norm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x + bn3(project(relu6(bn2(depthwise(relu6(bn1(expand(x))))))))``."""
        h = F.relu6(self.bn1(self.expand(x)))
        h = F.relu6(self.bn2(self.depthwise(h)))
        return x + self.bn3(self.project(h))


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block: a depthwise 7 x 7 convolution, LayerNorm over channels (channels
    last), a GELU MLP (4 x channels), a layer scale, a residual. Input and output
    ``[batch, channels, h, w]``."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = random_layer_norm(channels)
        self.fc1 = nn.Linear(channels, 4 * channels)
        self.fc2 = nn.Linear(4 * channels, channels)
        self.scale = nn.Parameter(torch.rand(channels) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x + (fc2(gelu(fc1(norm(depthwise(x)))))) * scale`` (channels last inside)."""
        h = self.depthwise(x).permute(0, 2, 3, 1)
        h = self.fc2(F.gelu(self.fc1(self.norm(h)))) * self.scale
        return x + h.permute(0, 3, 1, 2)


class TopTwoMoE(nn.Module):
    """A mixture of experts' feed-forward layer with a top-2 gate, computed densely (every
    expert on every token, weighted by the gate: no data-dependent shapes): the gate's two
    largest logits, their softmax, SiLU experts. Input and output ``[tokens, dim]``."""

    def __init__(self, dim: int = 32, experts: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, dim, hidden) / math.sqrt(dim))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, dim) / math.sqrt(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``sum_e weight[t, e] * silu(x w1[e]) w2[e]``, ``weight`` zero but for the top 2."""
        logits = self.gate(x)
        top, chosen = torch.topk(logits, 2, dim=-1)
        experts = logits.shape[-1]
        weight = (F.one_hot(chosen, experts).to(x.dtype) * torch.softmax(top, -1)[..., None])
        weight = weight.sum(-2)  # [tokens, experts]
        h = F.silu(torch.einsum("td,edh->teh", x, self.w1))
        out = torch.einsum("teh,ehd->ted", h, self.w2)
        return (out * weight[..., None]).sum(1)
