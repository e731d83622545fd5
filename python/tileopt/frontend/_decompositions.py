"""The decomposition table the frontend runs on the exported program (imports torch).

torch-mlir's table (``torch_mlir.extras.fx_decomp_util.get_decomposition_table``: torch's
core ATen decompositions plus the overloads torch-mlir needs) with two changes:

- ``aten.var_mean.correction`` and ``aten.var.correction`` decompose here, in the precision
  torch computes them in (``get_computation_dtype``: f32 for f16, bf16 and f32 inputs, f64
  for f64), into sum / sub / mul / div. Left in the graph, torch-mlir's own decomposition
  computes the variance in f64 whatever the input, so every layer norm of an f32 model
  would compute in f64. Layer and group norm reach these through torch's decompositions
  (which upcast f16/bf16 to f32 first), ``torch.var``, ``torch.std``, ``torch.var_mean``
  directly.
- ``aten.rms_norm`` decomposes with torch's own decomposition, which upcasts f16/bf16 to f32
  as eager PyTorch does; torch-mlir leaves it out of its table (for StableHLO's sake) and its
  C++ decomposition computes in the input's precision.

Nothing else changes precision: softmax and log-softmax are lowered by torch-mlir, which
upcasts f16/bf16 to f32 as torch's decompositions do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._prims_common import get_computation_dtype

aten = torch.ops.aten


def _reduction_dims(a: torch.Tensor, dim: Sequence[int] | int | None) -> list[int]:
    """``dim`` as a list of non-negative dims; None or empty: every dim (torch's rule)."""
    if dim is None:
        return list(range(a.ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(a.ndim))
    return sorted({d % a.ndim if a.ndim else 0 for d in dims})


def var_mean_correction(
    a: torch.Tensor,
    dim: Sequence[int] | int | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten.var_mean.correction`` computed in torch's computation dtype of ``a``.

    The mean is the sum divided by N, the variance the sum of squared differences from it
    divided by ``max(0, N - correction)`` (``correction`` defaults to 1); both are cast back
    to ``a``'s dtype, as torch's reference implementation does.
    """
    dims = _reduction_dims(a, dim)
    n = 1
    for d in dims:
        n *= a.shape[d] if a.ndim else 1
    x = a.to(get_computation_dtype(a.dtype))
    mean = torch.sum(x, dims, keepdim=True) / n
    diff = x - mean
    c = 1 if correction is None else correction
    var = torch.sum(diff * diff, dims, keepdim=True) / max(0, n - c)
    if not keepdim and a.ndim:
        var = torch.squeeze(var, dims)
        mean = torch.squeeze(mean, dims)
    return var.to(a.dtype), mean.to(a.dtype)


def var_correction(
    a: torch.Tensor,
    dim: Sequence[int] | int | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
) -> torch.Tensor:
    """``aten.var.correction``: the variance of :func:`var_mean_correction`."""
    return var_mean_correction(a, dim, correction=correction, keepdim=keepdim)[0]


@functools.cache
def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """torch-mlir's decomposition table with the changes this module's docstring lists."""
    from torch._decomp import core_aten_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    table[aten.var_mean.correction] = var_mean_correction
    table[aten.var.correction] = var_correction
    # torch's table of CompositeImplicit ops (a CustomDecompTable: only [] finds them).
    table[aten.rms_norm.default] = core_aten_decompositions()[aten.rms_norm.default]
    return table
