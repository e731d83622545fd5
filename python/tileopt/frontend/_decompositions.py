"""The decomposition table the frontend runs on the exported program (imports torch).

torch-mlir's table (``torch_mlir.extras.fx_decomp_util.get_decomposition_table``: torch's
core ATen decompositions plus the overloads torch-mlir needs) with these changes:

- ``aten.var_mean.correction`` and ``aten.var.correction`` decompose here, in the precision
  torch computes them in (``get_computation_dtype``: f32 for f16, bf16 and f32 inputs, f64
  for f64), into sum / sub / mul / div. Left in the graph, torch-mlir's own decomposition
  computes the variance in f64 whatever the input, so every layer norm of an f32 model
  would compute in f64. Layer and group norm reach these through torch's decompositions
  (which upcast f16/bf16 to f32 first), ``torch.var``, ``torch.std``, ``torch.var_mean``
  directly.
- ``aten.sum`` and ``aten.mean`` of f16 and bf16 tensors (without another ``dtype``)
  compute in f32 and round once at the end, as torch's kernels do; torch-mlir would
  accumulate in the tensor's own type (sums of 4,096 f16 values came out up to 11 ulps from
  eager's, bf16 ones 1.7).
- ``aten.elu`` (``selu`` and ``celu`` too), ``aten.gelu``, ``aten.leaky_relu``,
  ``aten.hardsigmoid`` and ``aten.round.decimals`` of f16 and bf16 tensors compute in f32
  and round once, as torch's kernels do; torch-mlir splits elu and tanh-gelu into ops that
  each round to the half type (bf16 elu(-0.001) was 0) and multiplies by the slope rounded
  to it. elu itself is torch's reference, with ``expm1`` (torch-mlir's ``exp(x) - 1``
  cancelled: elu(-1e-10) was 0); powers 2, 3, 0.5, -0.5, -1 and -2 of floats are the
  products, roots and reciprocals torch's kernels compute (C's ``pow`` differs at -0 and
  -inf); float ``trunc`` is ``ceil`` below zero and ``floor`` above (-0 stays -0). (Kernel
  formation computes the other composite ops that torch-mlir lowers to one generic,
  sigmoid and erf-gelu among them, in f32.)
- ``aten.gelu`` with ``approximate="tanh"`` is torch's formula with sqrt(2 / pi) exact to
  f64 (torch-mlir's constant, 0.797724, put f32 results 5e-5 off eager's).
- ``aten.bitwise_or.Scalar``, ``aten.bitwise_xor.Scalar``, ``aten.fmod.Scalar`` and the
  shifts' ``Tensor_Scalar`` and ``Scalar_Tensor`` forms (``x | 3``, ``x.fmod(2.5)``,
  ``torch.bitwise_left_shift(x, 3)``) are their ``.Tensor`` forms with a 0-d tensor of the
  scalar (which promotes as the scalar does), and ``x << s`` and ``x >> s`` of tensors
  (``aten.__lshift__.Tensor``, ``aten.__rshift__.Tensor``) are ``bitwise_left_shift`` and
  ``bitwise_right_shift``: torch-mlir lowers only those. (Shift amounts outside the width
  give torch's results in the GPU lowering: 0, or the sign shifting right.)
- ``aten.addmv`` (``torch.addmv``) decomposes with torch's own decomposition (torch-mlir has
  no lowering for it).
- ``aten.rms_norm`` decomposes with torch's own decomposition, which upcasts f16/bf16 to f32
  as eager PyTorch does; torch-mlir leaves it out of its table (for StableHLO's sake) and its
  C++ decomposition computes in the input's precision.
- ``aten.convolution`` (every kind: strided, padded, dilated, grouped, depthwise,
  transposed; 1- to 3-D) decomposes into a gather of the input's windows (im2col) and a
  matmul of each group's flattened weight by them, which kernel formation makes two
  kernels: the gather, and the matmul with the bias in its epilogue.
- ``aten.max_pool{2,3}d_with_indices`` and ``aten.avg_pool{2,3}d`` (the 1-D ones reach them
  through an unsqueeze), with any padding, dilation and ``ceil_mode``, decompose as PyTorch's
  kernels compute them: one strided view of the padded input per offset in the window, a
  running maximum (replaced by a greater value or a NaN, the index with it) or a sum over the
  window's count.
- ``aten.adaptive_max_pool{2,3}d`` and ``aten._adaptive_avg_pool3d`` decompose one pooled
  dimension at a time (PyTorch's windows are products of intervals): strided views where the
  output size divides the input's, gathered positions where it does not, a reduction where it
  is 1. (torch's own decomposition takes ``_adaptive_avg_pool2d``.)
- ``aten.topk`` for ``k <= MAX_TOPK`` (the largest or the smallest) decomposes into ``k``
  row maxima or minima, each with the first position not yet taken that holds it; so does
  ``aten.sort`` of rows of at most ``MAX_TOPK`` elements.
- ``aten.scatter`` and ``aten.scatter_add`` whose index has at most ``MAX_SCATTER`` columns
  along the dimension (a mixture of experts' top-k weights into a row per token) decompose
  into one select (or add) per column, at the positions it names; so does ``aten.index_put``
  (``x[idx] = v``) with one 1-D index of at most ``MAX_SCATTER`` positions, and with one
  boolean mask and one value (``x[x < 0] = 0``) into a select where the mask holds.
- ``aten.slice_scatter`` and ``aten.select_scatter`` (``x[:, 2:6] = y``, ``x[i] = v``)
  of static sizes decompose into a select between ``x`` and ``y`` gathered at each
  position's place in the slice (torch-mlir's ``tensor.insert_slice`` has no kernel
  formation).
- ``aten._cdist_forward`` (``torch.cdist``) decomposes into the p-norm of the broadcast
  differences (torch-mlir has no lowering for it).
- ``aten.constant_pad_nd`` (``F.pad`` with a constant) decomposes into concatenations with
  filled tensors (torch-mlir's ``tensor.pad`` has no kernel formation).
- ``aten.cumsum`` (and ``aten.cumprod``) over at most ``MAX_MASKED_SCAN`` elements
  decomposes into a masked row sum (product), y[i] = sum of x[j] for j <= i (quadratic in
  the length, with the mask computed in registers: Hugging Face's position ids from an
  attention mask, RoBERTa's and OPT's); longer scans stay ``tm_tensor.scan``, which kernel
  formation reports as unsupported. ``aten.logcumsumexp``, ``aten.cummax`` and ``aten.cummin``
  are masked row reductions too: the maximum up to each element and the log of the sum of
  exponentials shifted by it; the extreme up to each element and the last position up to it
  holding it (a NaN from where it appears, as torch's kernels).
- ``aten.erfinv`` (no torch-mlir lowering) is torch's CPU algorithm: a rational approximation,
  then two Newton steps on erf; ``aten.hypot`` (none either) is the larger magnitude times
  sqrt(1 + (smaller / larger)^2), which neither overflows nor underflows.
- ``aten.mul.Tensor``, ``aten.sub.Tensor``, ``aten.div.Tensor_mode`` and
  ``aten.remainder.Scalar`` of an int8 tensor and a Python integer compute in int16 and
  round back to int8 (the same wrapped result): torch-mlir's lowering of these forms
  crashes the process (a segmentation fault in its passes, torch-mlir 20251003).
- Elementwise ops of an int8 tensor and a 0-d tensor of another integer type whose result
  is int8 (``x * torch.tensor(3)``, ``x & t``): the 0-d tensor is cast to int8 first, as
  torch's kernels cast their operands to the result's type: torch-mlir crashes on the mix.
- ``aten.mm``, ``aten.bmm``, ``aten.addmm`` and ``aten.baddbmm`` of int8 tensors (``a @ b``,
  ``torch.einsum``, an int8 convolution's matmul) compute in int32 and round back to int8,
  the same wrapped result as torch's: ``mm`` and ``addmm`` through ``aten._int_mm`` (int8
  products summed in int32), which kernel formation runs on tensor cores (``tile.dot`` of
  i8, as ``torch._int_mm`` itself), ``bmm`` and ``baddbmm`` with their operands widened;
  ``aten._scaled_mm`` (fp8 ``a @ b`` times scales, torchao's float8 layers) is the
  product of the fp8 values in f32, scaled: kernel formation runs it on fp8 tensor cores;
  a conversion between the two fp8 formats goes through f32;
  ``aten.max`` and ``aten.min`` of a whole int8 tensor
  are ``amax`` and ``amin``: torch-mlir's lowering of those int8 forms crashes the process
  (a segmentation fault in convert-torch-to-linalg, torch-mlir 20251003).

- A Python float beside a float64 tensor (``0.1 - x``, ``torch.div(x, 0.1,
  rounding_mode="trunc")``, ``x // 0.1``, ``x % 0.1``, ``torch.fmod(x, 0.1)``) is a 0-d
  float64 tensor: torch-mlir rounded it to f32 in these ops.
- ``aten.maximum``, ``aten.minimum``, ``aten.clamp`` (``clamp_min``, ``clamp_max``,
  ``hardtanh``, ``relu6``) and ``aten.hardsigmoid`` of float tensors keep NaN, as torch's
  kernels do: torch-mlir's compare-and-select gave the other operand or the bound; an
  integer tensor clamped to float bounds is clamped in the promoted type (torch-mlir
  compared it as a float without converting it).
- An integer tensor to a non-negative integer power (``x ** 2``, ``torch.square``) is
  products by squaring, to a float power (``x ** 0.5``) the power of it converted to the
  promoted float type: torch-mlir lowers powers of floats only; ``aten.isfinite``
  (no lowering) is ``x - x == 0``.
- Integer ``aten.neg`` (``-x``) is ``0 - x``, and integer floor division (``x // y``,
  ``torch.div(..., rounding_mode="floor")``, ``floor_divide``) is the truncated quotient,
  one less where the remainder is nonzero and its sign differs from the divisor's
  (``MIN // -1`` wraps to ``MIN``; int8 in int32): torch-mlir computes both through floats
  (int32 off past 2^24, int64 past 2^53, ``-MIN`` and ``MIN // -1`` saturated).
- Float ``aten.fmod`` is the exact remainder of the magnitudes (``arith.remf``, libdevice's
  fmod) with the sign of the dividend, and float floor division is torch's
  ``div_floor_floating`` over it: torch-mlir's ``x - trunc(x / y) * y`` and ``floor(x / y)``
  were wrong wherever the quotient is inexact (``fmod(1e10, 3.3)``, ``1.0 // 0.1``).
- Comparisons of a tensor with a Python scalar of another kind (``x == 2`` of a float
  tensor, ``i < 0.5`` of an integer one, ``mask == 1``) compare in the promoted type, the
  scalar cast to it; ``x == x`` of a float tensor is ``x <= x`` (False at NaN): torch-mlir's
  folders got constants of these forms wrong (and crashed the process on some).
- As torch computes them, where torch-mlir did not: ``sum``, ``mean`` and ``prod`` with a
  ``dtype`` (:func:`_reduction_in_dtype`), f16/bf16 vector norms in f32, an f16/bf16 tensor
  times or over a number it does not hold (in f32, :func:`_half_by_scalar_in_f32`), a bool
  tensor plus ``True``, softmax of a 0-d tensor, ``roll`` by any shift, circular padding,
  ``x[i]`` with int32 indices, ``scatter`` of a Python scalar (in the tensor's type), sort
  and topk values (the elements themselves: -0.0 stays -0.0), max pooling of integers.

- ``aten.scaled_dot_product_attention`` (without dropout) decomposes into
  ``softmax(q k^T * scale + mask) v`` with torch's safe softmax (rows whose every score is
  masked give 0), the scale applied to the scores: the shape kernel formation recognises as
  one flash-attention kernel. torch's own decomposition scales q and k by the square root of
  the scale first, two more kernels that store scaled copies of q and k. The scores of
  f16/bf16 tensors are f32, as in torch's attention kernels, also where the product does not
  fuse (head dimensions over 256, or over 128 on sm_75).

Nothing else changes precision: softmax and log-softmax are lowered by torch-mlir, which
upcasts f16/bf16 to f32 as torch's decompositions do.
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._prims_common import get_computation_dtype

aten = torch.ops.aten

#: The half-precision float types, which torch computes most ops on in f32.
_HALF_TYPES = (torch.float16, torch.bfloat16)


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
    to ``a``'s dtype, as torch's reference implementation does. Integer tensors are an
    error, as in torch (the integer variance was truncated).
    """
    if not a.is_floating_point():
        raise TypeError(f"std and var take floating-point tensors, as torch's; got {a.dtype}")
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


def _per_dim(values: Sequence[int], n: int) -> list[int]:
    """A convolution's per-dimension argument for ``n`` dimensions (one value: all of them)."""
    values = list(values)
    return values * n if len(values) == 1 else values


def _windows(x: torch.Tensor, kernel: Sequence[int], out: Sequence[int], stride: Sequence[int],
             padding: Sequence[int], dilation: Sequence[int],
             spacing: Sequence[int]) -> torch.Tensor:
    """The columns a convolution multiplies its weight by (im2col): ``[N, C * KK, P]`` for
    ``x`` of ``[N, C, *sizes]``, a kernel of ``KK`` offsets and ``P`` output positions; row
    ``c * KK + k`` holds for each output position the element of channel ``c`` that kernel
    offset ``k`` reads, or 0 in the padding. With a ``spacing`` above 1 the input is read as
    if ``spacing - 1`` zeros lay between its elements (a transposed convolution). One gather
    at indices computed from positions, with the zeros selected in, so no padded copy."""
    n = len(kernel)
    batch, channels = x.shape[:2]
    sizes = x.shape[2:]
    index = torch.zeros((), dtype=torch.int32, device=x.device)
    inside = torch.ones((), dtype=torch.bool, device=x.device)
    # dimensions [kernel offsets..., output positions...]
    for d in range(n):
        def along(length: int, dim: int) -> torch.Tensor:
            shape = [1] * (2 * n)
            shape[dim] = length
            return torch.arange(length, dtype=torch.int32, device=x.device).reshape(shape)

        at = along(out[d], n + d) * stride[d] + along(kernel[d], d) * dilation[d] - padding[d]
        if spacing[d] == 1:
            position, ok = at, (at >= 0) & (at < sizes[d])
        else:
            position = torch.div(at.clamp(min=0), spacing[d], rounding_mode="trunc")
            ok = (at >= 0) & (position * spacing[d] == at) & (position < sizes[d])
        index = index * sizes[d] + position.clamp(0, sizes[d] - 1)
        inside = inside & ok
    offsets, positions = math.prod(kernel), math.prod(out)
    index = index.expand(*kernel, *out).reshape(offsets * positions)
    inside = inside.expand(*kernel, *out).reshape(offsets * positions)
    columns = x.reshape(batch, channels, math.prod(sizes)).index_select(2, index)
    columns = torch.where(inside, columns, torch.zeros((), dtype=x.dtype, device=x.device))
    return columns.reshape(batch, channels * offsets, positions)


def _depthwise(pool: _Pooling, matrix: torch.Tensor, bias: torch.Tensor | None) -> Any:
    """A convolution of one input channel per group (depthwise; ``matrix``: ``[C, OC/C,
    KK]``) over ``pool``'s windows as a sum over the kernel's offsets of strided views of the
    padded input times their weights (in f32 for f16 and bf16): one elementwise kernel that
    reads the input where the windows' columns would be KK times its size."""
    dtype = pool.x.dtype
    compute = get_computation_dtype(dtype)
    channels, per_channel = matrix.shape[:2]
    weights = matrix.to(compute).reshape(channels, per_channel, -1, *([1] * pool.n))
    total = None
    for k, (view, _) in enumerate(pool.views(pool.padded(0.0))):
        term = view.to(compute).unsqueeze(2) * weights[:, :, k]  # [N, C, OC/C, *out]
        total = term if total is None else total + term
    y = total.reshape(pool.x.shape[0], channels * per_channel, *pool.out)
    if bias is not None:
        y = y + bias.to(compute).reshape(-1, *([1] * pool.n))
    return y.to(dtype)


def convolution(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Any:
    """``aten.convolution`` (1-, 2- and 3-D, any stride, padding, dilation and groups, and
    transposed) as a matmul of each group's flattened weight by the input's windows:
    ``[OC/G, C/G * KK] @ [C/G * KK, P]`` per image and group, the output's NCHW layout
    directly, the bias added in the matmul's epilogue. The windows (:func:`_windows`) are
    one gather; a 1 x 1 kernel without padding reads the input (every stride-th element) as
    it is; a depthwise one sums strided views (:func:`_depthwise`). A transposed
    convolution is the convolution, stride 1, of the input spread ``stride`` apart, padded
    by ``dilation * (kernel - 1) - padding`` (and ``output_padding`` after), with the
    kernel flipped and its channels swapped."""
    n = weight.ndim - 2
    kernel = list(weight.shape[2:])
    stride, padding = _per_dim(stride, n), _per_dim(padding, n)
    dilation, output_padding = _per_dim(dilation, n), _per_dim(output_padding, n)
    batch, channels = x.shape[:2]
    sizes = list(x.shape[2:])
    offsets = math.prod(kernel)
    if transposed:
        group_out = weight.shape[1]
        out_channels = group_out * groups
        out = [(size - 1) * s - 2 * p + dl * (k - 1) + extra + 1 for size, s, p, dl, k, extra
               in zip(sizes, stride, padding, dilation, kernel, output_padding, strict=True)]
        # [G, C/G, OC/G, KK] -> [G, OC/G, C/G * KK], the offsets reversed (the flip)
        flipped = weight.reshape(groups, channels // groups, group_out, offsets).flip(-1)
        matrix = flipped.permute(0, 2, 1, 3).reshape(groups, group_out, -1)
        pad = [dl * (k - 1) - p for dl, k, p in zip(dilation, kernel, padding, strict=True)]
        columns = _windows(x, kernel, out, [1] * n, pad, dilation, stride)
    else:
        out_channels = weight.shape[0]
        pool = _Pooling(x, n, kernel, stride, padding, dilation, False)  # the same windows
        out = pool.out
        matrix = weight.reshape(groups, out_channels // groups, -1)
        if channels == groups and offsets > 1:
            return _depthwise(pool, matrix, bias)
        if offsets == 1 and not any(padding):
            every = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
            columns = x[every].reshape(batch, channels, math.prod(out))
        else:
            columns = _windows(x, kernel, out, stride, padding, dilation, [1] * n)
    positions = math.prod(out)
    columns = columns.reshape(batch, groups, channels // groups * offsets, positions)
    y = torch.matmul(matrix, columns).reshape(batch, out_channels, positions)
    if bias is not None:
        y = y + bias.reshape(out_channels, 1)
    return y.reshape(batch, out_channels, *out)


def constant_pad_nd(x: torch.Tensor, pad: Sequence[int], value: float = 0.0) -> Any:
    """``F.pad`` with a constant: concatenations with filled tensors (a negative pad crops)."""
    for i in range(len(pad) // 2):
        dim = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0:
            x = x.narrow(dim, -before, x.shape[dim] + before)
        if after < 0:
            x = x.narrow(dim, 0, x.shape[dim] + after)
        parts = []
        for size in (before, after):
            shape = list(x.shape)
            shape[dim] = size
            # an empty part would leave torch-mlir an unlowered constant
            parts.append([torch.full(shape, value, dtype=x.dtype, device=x.device)]
                         if size > 0 else [])
        if before > 0 or after > 0:
            x = torch.cat([*parts[0], x, *parts[1]], dim)
    return x


class _Pooling:
    """The windows of a pooling op over ``x``'s last ``n`` dimensions, as PyTorch lays them
    out (``pooling_output_shape``): the output sizes, and for each offset in the window a
    strided view of ``x`` padded with ``fill`` (one element per output position) and the
    positions it reads in each dimension of ``x`` (outside it: padding)."""

    def __init__(self, x: torch.Tensor, n: int, kernel: Sequence[int], stride: Sequence[int],
                 padding: Sequence[int] | int, dilation: Sequence[int] | int,
                 ceil_mode: bool) -> None:
        def per_dim(v: Sequence[int] | int, default: Sequence[int]) -> list[int]:
            v = [v] if isinstance(v, int) else list(v) or list(default)
            return v * n if len(v) == 1 else v

        self.x, self.n = x, n
        self.kernel = per_dim(kernel, [1])
        self.stride = per_dim(stride, self.kernel)
        self.padding = per_dim(padding, [0])
        self.dilation = per_dim(dilation, [1])
        self.sizes = list(x.shape[x.ndim - n:])
        self.out = []
        for size, k, s, p, d in zip(self.sizes, self.kernel, self.stride, self.padding,
                                    self.dilation, strict=True):
            span = size + 2 * p - d * (k - 1) - 1
            o = (span + (s - 1 if ceil_mode else 0)) // s + 1
            if ceil_mode and (o - 1) * s >= size + p:
                o -= 1  # the last window starts inside the input or its left padding
            self.out.append(o)

    def starts(self, d: int) -> torch.Tensor:
        """Where each output position's window starts in dimension ``d`` of ``x`` (before
        the padding: negative inside it), shaped to broadcast over the output dimensions."""
        start = torch.arange(self.out[d], device=self.x.device) * self.stride[d] - self.padding[d]
        return start.reshape([self.out[d]] + [1] * (self.n - 1 - d))

    def padded(self, fill: float) -> torch.Tensor:
        """``x`` padded on each side to cover every window."""
        pad: list[int] = []
        for d in reversed(range(self.n)):
            k, s, p, dl = self.kernel[d], self.stride[d], self.padding[d], self.dilation[d]
            extent = (self.out[d] - 1) * s + dl * (k - 1) + 1
            pad += [p, extent - self.sizes[d] - p]
        return constant_pad_nd(self.x, pad, fill)

    def views(self, padded: torch.Tensor) -> Any:
        """For each offset in the window (row-major): the strided view of ``padded`` at that
        offset, and its positions in each dimension of ``x``."""
        lead = self.x.ndim - self.n
        for offsets in itertools.product(*(range(k) for k in self.kernel)):
            view, positions = padded, []
            for d, o in enumerate(offsets):
                first = o * self.dilation[d]
                length = (self.out[d] - 1) * self.stride[d] + 1
                view = view.narrow(lead + d, first, length)
                index = (slice(None),) * (lead + d) + (slice(None, None, self.stride[d]),)
                view = view[index]
                positions.append(self.starts(d) + first)
            yield view, positions


def _keep_greater(best: torch.Tensor, index: torch.Tensor, value: torch.Tensor,
                  at: torch.Tensor, inside: torch.Tensor | None = None) -> Any:
    """One step of PyTorch's max pooling: ``value`` and its index ``at`` replace ``best`` and
    ``index`` where it is greater or NaN (and ``inside`` the window)."""
    take = (value > best) | torch.isnan(value)
    if inside is not None:
        take = take & inside
    return torch.where(take, value, best), torch.where(take, at, index)


def max_pool(
    n: int, x: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int] = (),
    padding: Sequence[int] | int = 0, dilation: Sequence[int] | int = 1, ceil_mode: bool = False,
) -> Any:
    """``max_pool{n}d_with_indices`` as PyTorch's kernel computes it, one window offset after
    another over strided views of ``x`` padded with -inf (an integer type's least value): a
    value replaces the maximum where it is greater or NaN, and its flat index (into the
    pooled dimensions) the index, which starts at the window's first element inside ``x``."""
    pool = _Pooling(x, n, kernel_size, stride, padding, dilation, ceil_mode)
    index = torch.zeros(pool.out, dtype=torch.int64, device=x.device)
    for d in range(n):
        start, dl = pool.starts(d), pool.dilation[d]
        # the first position inside x: past the left padding in steps of the dilation
        first = start + (start.neg().clamp(min=0) + dl - 1) // dl * dl
        index = index * pool.sizes[d] + first
    # The least value of x's type: -inf of an integer type is poison (zeros came out).
    low = float("-inf") if x.is_floating_point() else torch.iinfo(x.dtype).min
    best = torch.full(x.shape[: x.ndim - n] + tuple(pool.out), low, dtype=x.dtype,
                      device=x.device)
    for view, positions in pool.views(pool.padded(low)):
        flat = torch.zeros_like(index)
        for d, position in enumerate(positions):
            flat = flat * pool.sizes[d] + position
        best, index = _keep_greater(best, index, view, flat)
    return best, index.expand(best.shape)


def avg_pool(
    n: int, x: torch.Tensor, kernel_size: Sequence[int], stride: Sequence[int] = (),
    padding: Sequence[int] | int = 0, ceil_mode: bool = False, count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """``avg_pool{n}d`` as PyTorch's kernel computes it: the sum over strided views of ``x``
    padded with zeros (in f32 for f16 and bf16, as PyTorch accumulates them), over
    ``divisor_override``, or else the window's size within the padding (``count_include_pad``)
    or within ``x``."""
    dtype = x.dtype
    x = x.to(get_computation_dtype(dtype))
    pool = _Pooling(x, n, kernel_size, stride, padding, 1, ceil_mode)
    total = None
    for view, _ in pool.views(pool.padded(0.0)):
        total = view if total is None else total + view
    if divisor_override:
        return (total / divisor_override).to(dtype)
    count = torch.ones(pool.out, dtype=torch.int64, device=x.device)
    for d in range(n):
        start = pool.starts(d)
        end = (start + pool.kernel[d]).clamp(max=pool.sizes[d] + pool.padding[d])
        if not count_include_pad:
            start, end = start.clamp(min=0), end.clamp(max=pool.sizes[d])
        count = count * (end - start)
    return (total / count.to(total.dtype)).to(dtype)


def _adaptive_windows(x: torch.Tensor, n: int, output_size: Sequence[int]) -> Any:
    """For each of ``x``'s last ``n`` dimensions, innermost first: the dimension, each
    window's length (shaped to broadcast along it), and for each offset in the windows (PyTorch's
    adaptive windows: output ``i`` of ``o`` pools positions ``floor(i * size / o)`` up to
    ``ceil((i + 1) * size / o)``) a function that reads those positions of a tensor shaped
    as ``x`` in the dimensions not yet pooled (clamped into ``x``), and whether they are
    inside the window (None: in every window). Where ``o`` divides the size, the windows
    are ``size / o`` long and the positions a strided view; where ``o`` is 1, the offsets
    are None: the window is the whole dimension, for a reduction."""
    for d in reversed(range(n)):
        dim, size, out = x.ndim - n + d, x.shape[x.ndim - n + d], output_size[d]
        trailing = [1] * (n - 1 - d)
        if out == 1:
            yield dim, torch.full(trailing, size, device=x.device), None
            continue
        if size % out == 0:
            k = size // out
            length = torch.full([out, *trailing], k, device=x.device)

            def strided(t: torch.Tensor, j: int, dim: int = dim, k: int = k,
                        out: int = out) -> torch.Tensor:
                view = t.narrow(dim, j, (out - 1) * k + 1)
                return view[(slice(None),) * dim + (slice(None, None, k),)]

            yield dim, length, [(functools.partial(strided, j=j), None) for j in range(k)]
            continue
        longest = max(-(-(i + 1) * size // out) - i * size // out for i in range(out))
        i = torch.arange(out, device=x.device)
        first = torch.div(i * size, out, rounding_mode="trunc")  # (not negative: floor)
        end = torch.div((i + 1) * size + out - 1, out, rounding_mode="trunc")
        length = (end - first).reshape(out, *trailing)

        def gathered(t: torch.Tensor, position: torch.Tensor, dim: int = dim) -> torch.Tensor:
            return t.index_select(dim, position)

        yield dim, length, [
            (functools.partial(gathered, position=(first + j).clamp(max=size - 1)), length > j)
            for j in range(longest)]


def adaptive_max_pool(n: int, x: torch.Tensor, output_size: Sequence[int]) -> Any:
    """``adaptive_max_pool{n}d`` as PyTorch's kernel computes it, one dimension at a time
    (a window is a product of intervals): a value replaces the maximum where it is greater
    or NaN, its flat index (into the pooled dimensions) with it; reducing the innermost
    dimension first keeps PyTorch's row-major order (the first of equal maxima, the last
    NaN). A window of -inf gives its first index."""
    index = torch.zeros((), dtype=torch.int64, device=x.device)
    for d in range(n):
        size = x.shape[x.ndim - n + d]
        index = (index.unsqueeze(-1) * size
                 + torch.arange(size, device=x.device).reshape(*([1] * d), size))
    values, index = x, index.expand(x.shape)
    for dim, _, offsets in _adaptive_windows(x, n, output_size):
        if offsets is None:  # the whole dimension: torch.max's first maximum, or last NaN
            best, at = torch.max(values, dim, keepdim=True)
            nan = torch.isnan(values).flip(dim).to(torch.int32)
            last_nan = values.shape[dim] - 1 - torch.argmax(nan, dim, keepdim=True)
            at = torch.where(torch.isnan(best), last_nan, at)
            values, index = best, torch.gather(index, dim, at)
            continue
        best = chosen = None
        for read, inside in offsets:
            value, at = read(values), read(index)
            if best is None:  # the first offset is in every window
                best, chosen = value, at
                continue
            best, chosen = _keep_greater(best, chosen, value, at, inside)
        values, index = best, chosen
    return values, index


def adaptive_avg_pool(n: int, x: torch.Tensor, output_size: Sequence[int]) -> Any:
    """``_adaptive_avg_pool{n}d``: each window's sum (in f32 for f16 and bf16, one dimension
    at a time) over its size."""
    dtype = x.dtype
    total = x.to(get_computation_dtype(dtype))
    count = torch.ones((), dtype=torch.int64, device=x.device)
    for dim, length, offsets in _adaptive_windows(x, n, output_size):
        if offsets is None:
            total = total.sum(dim, keepdim=True)
        else:
            parts = [read(total) if inside is None else torch.where(inside, read(total), 0.0)
                     for read, inside in offsets]
            total = functools.reduce(torch.add, parts)
        count = count * length
    return (total / count.to(total.dtype)).to(dtype)


#: The longest scan ``masked_cumsum`` takes (it costs the length squared per scan).
MAX_MASKED_SCAN = 4096


def _scan_rows(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``x``'s scanned dimension moved last and repeated along a new one before it
    ([..., i, j]: row i of the scan sees element j), and the mask of j <= i; None where the
    masked scan does not take ``x`` (longer than ``MAX_MASKED_SCAN``, complex)."""
    dim = dim % max(x.ndim, 1)
    n = x.shape[dim] if x.ndim else 1
    if not isinstance(n, int) or n > MAX_MASKED_SCAN or x.is_complex():
        return None
    rows = x.reshape(1) if x.ndim == 0 else x.movedim(dim, -1)
    index = torch.arange(n, device=x.device)
    return rows.unsqueeze(-2), index.unsqueeze(1) >= index.unsqueeze(0)


def _scanned(result: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    """A masked scan's [..., i] result back in ``x``'s layout."""
    return result.reshape(()) if x.ndim == 0 else result.movedim(-1, dim)


def _masked_scan(x: torch.Tensor, dim: int, dtype: torch.dtype | None, product: bool) -> Any:
    """``torch.cumsum`` (or with ``product``, ``torch.cumprod``) as a sum (a product) over
    the elements up to each one."""
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point() and not x.is_complex():
        x = x.to(torch.int64)  # torch scans booleans and integers in int64
    if x.ndim == 0:
        return x.clone()
    scan = _scan_rows(x, dim)
    if scan is None:
        return NotImplemented
    rows, upto = scan
    identity = torch.full((), 1 if product else 0, dtype=x.dtype, device=x.device)
    masked = torch.where(upto, rows, identity)
    scanned = masked.prod(-1, dtype=x.dtype) if product else masked.sum(-1, dtype=x.dtype)
    return _scanned(scanned, x, dim)


def masked_cumsum(x: torch.Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Any:
    """``torch.cumsum`` as a sum over the elements up to each one."""
    return _masked_scan(x, dim, dtype, product=False)


def masked_cumprod(x: torch.Tensor, dim: int, *, dtype: torch.dtype | None = None) -> Any:
    """``torch.cumprod`` as a product over the elements up to each one."""
    return _masked_scan(x, dim, dtype, product=True)


def logcumsumexp(x: torch.Tensor, dim: int) -> Any:
    """``torch.logcumsumexp`` as a masked scan: y[i] = m[i] + log(sum of exp(x[j] - m[i]) for
    j <= i), m[i] the maximum up to i (so no term overflows, and the largest is 1); an
    infinite or NaN maximum is the result, as in torch. f16/bf16 in f32."""
    scan = _scan_rows(x.to(get_computation_dtype(x.dtype)), dim)
    if scan is None or not x.is_floating_point():
        return NotImplemented
    rows, upto = scan
    low = torch.full((), float("-inf"), dtype=rows.dtype, device=x.device)
    peak = torch.where(upto, rows, low).amax(-1, keepdim=True)
    terms = torch.where(upto, torch.exp(rows - peak), torch.zeros((), dtype=rows.dtype))
    peak = peak.squeeze(-1)
    total = torch.where(torch.isinf(peak), peak, peak + torch.log(terms.sum(-1)))
    return _scanned(total, x, dim).to(x.dtype)


def _cumulative_extreme(greater: bool) -> Callable[..., Any]:
    """``torch.cummax`` (``greater``) or ``torch.cummin`` as masked scans: the extreme up to
    each element, and the last position up to it that holds it (torch's kernel moves the
    index on ties); a NaN is the extreme from where it appears, the last NaN its index."""
    def scan(x: torch.Tensor, dim: int) -> Any:
        found = _scan_rows(x, dim)
        if found is None or x.dtype == torch.bool:
            return NotImplemented
        rows, upto = found
        if x.is_floating_point():
            bound: float = float("-inf") if greater else float("inf")
        else:
            bound = torch.iinfo(x.dtype).min if greater else torch.iinfo(x.dtype).max
        outside = torch.full((), bound, dtype=x.dtype, device=x.device)
        masked = torch.where(upto, rows, outside)
        extreme = masked.amax(-1, keepdim=True) if greater else masked.amin(-1, keepdim=True)
        holds = rows == extreme
        if x.is_floating_point():
            holds = holds | (torch.isnan(rows) & torch.isnan(extreme))
        position = torch.arange(rows.shape[-1], device=x.device)
        index = torch.where(upto & holds, position, -1).amax(-1)
        return _scanned(extreme.squeeze(-1), x, dim), _scanned(index, x, dim)

    return scan


def hypot(x: torch.Tensor, y: torch.Tensor) -> Any:
    """``torch.hypot`` without overflow or underflow: the larger magnitude times
    sqrt(1 + (smaller / larger)^2); 0 where both are 0, inf where either is infinite (even
    beside a NaN, as C's hypot). f16/bf16 in f32."""
    dtype = torch.result_type(x, y)
    if not dtype.is_floating_point:
        return NotImplemented
    compute = get_computation_dtype(dtype)
    a, b = torch.abs(x.to(compute)), torch.abs(y.to(compute))
    big, small = torch.maximum(a, b), torch.minimum(a, b)
    ratio = small / big
    result = big * torch.sqrt(1.0 + ratio * ratio)
    result = torch.where(big == 0, torch.zeros((), dtype=compute), result)
    result = torch.where(torch.isinf(a) | torch.isinf(b),
                         torch.full((), float("inf"), dtype=compute), result)
    return result.to(dtype)


def erfinv(y: torch.Tensor) -> Any:
    """``torch.erfinv`` as torch's CPU kernel computes it (``calc_erfinv``): a rational
    approximation in the center (|y| <= 0.7) or of sqrt(-log((1 - |y|) / 2)) in the tails,
    then two Newton steps on erf; NaN past +-1, +-inf at +-1. f16/bf16 in f32."""
    if not y.is_floating_point():
        return NotImplemented
    dtype = y.dtype
    y = y.to(get_computation_dtype(dtype))
    a = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
    b = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
    c = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
    d = (3.543889200, 1.637067800)
    magnitude = y.abs()
    z = y * y
    center = y * (((a[3] * z + a[2]) * z + a[1]) * z + a[0]) / (
        (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0)
    # The tails' argument, kept finite where the center's branch is taken.
    t = torch.sqrt(-torch.log((1.0 - torch.where(magnitude <= 0.7, 0.5, magnitude)) / 2.0))
    tail = (((c[3] * t + c[2]) * t + c[1]) * t + c[0]) / ((d[1] * t + d[0]) * t + 1.0)
    x = torch.where(magnitude <= 0.7, center, torch.where(y < 0, -tail, tail))
    slope = 2.0 / math.sqrt(math.pi)
    for _ in range(2):
        x = x - (torch.erf(x) - y) / (slope * torch.exp(-x * x))
    edge = torch.where(y < 0, float("-inf"), float("inf")).to(y.dtype)
    x = torch.where(magnitude == 1.0, edge, torch.where(magnitude > 1.0, float("nan"), x))
    return x.to(dtype)


def _positions(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The positions along ``x``'s dimension ``dim``, shaped to broadcast along it."""
    size = x.shape[dim]
    return torch.arange(size, device=x.device).reshape(
        [size if d == dim else 1 for d in range(x.ndim)])


def _put(out: torch.Tensor, at: torch.Tensor, value: torch.Tensor | float,
         add: bool) -> torch.Tensor:
    """``out`` with ``value`` written (or added) where ``at`` holds."""
    if add:
        return out + torch.where(at, value, torch.zeros((), dtype=out.dtype, device=out.device))
    return torch.where(at, value, out)


#: The largest ``k`` ``topk`` takes, and the longest row ``sort`` takes (each element taken
#: costs two or three row reductions).
MAX_TOPK = 16


def topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> Any:  # noqa: A002 (aten's name)
    """``aten.topk`` for ``k`` up to :data:`MAX_TOPK` (a mixture of experts' top-2 gate) of
    a floating or integer tensor, in order: ``k`` times the largest (or smallest) element
    not yet taken, NaN above every number as PyTorch orders them, and the first position
    holding it, so equal elements keep their order. A larger ``k`` stays
    ``tm_tensor.topk``, which kernel formation reports as unsupported."""
    if not 0 < k <= MAX_TOPK or x.ndim == 0 or x.dtype == torch.bool or x.is_complex():
        return NotImplemented
    dim = dim % x.ndim
    position = _positions(x, dim)
    floating = x.is_floating_point()
    if floating:
        low, high = float("-inf"), float("inf")
    else:
        low, high = torch.iinfo(x.dtype).min, torch.iinfo(x.dtype).max
    nan = torch.isnan(x) if floating else torch.zeros_like(x, dtype=torch.bool)
    taken = torch.zeros_like(x, dtype=torch.bool)
    values, indices = [], []
    for _ in range(k):
        if largest:
            best = torch.amax(torch.where(taken, low, x), dim, keepdim=True)  # NaN first
        else:
            best = torch.amin(torch.where(taken | nan, high, x), dim, keepdim=True)
            if floating:  # NaN once no number is left
                number = torch.any(~taken & ~nan, dim, keepdim=True)
                best = torch.where(number, best, float("nan"))
        same = (x == best) | (nan & torch.isnan(best)) if floating else x == best
        index = torch.argmax((same & ~taken).to(torch.int32), dim, keepdim=True)
        taken = taken | (position == index)
        values.append(torch.gather(x, dim, index))  # the element itself: -0.0 or 0.0
        indices.append(index)
    return torch.cat(values, dim), torch.cat(indices, dim)


def sort(x: torch.Tensor, dim: int = -1, descending: bool = False) -> Any:
    """``aten.sort`` of rows of at most :data:`MAX_TOPK` elements: :func:`topk` of them all
    (stable: equal elements keep their order; NaN last, or first when descending)."""
    if x.ndim == 0:
        return NotImplemented
    return topk(x, x.shape[dim], dim, largest=descending)


def stable_sort(x: torch.Tensor, *, stable: bool | None = None, dim: int = -1,
                descending: bool = False) -> Any:
    """``aten.sort.stable``: :func:`sort`, which is stable."""
    return sort(x, dim, descending)


#: The most elements along its dimension that ``scatter`` writes from each row of its index.
MAX_SCATTER = 16


def _scatter(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor | float,
             add: bool) -> Any:
    """``x`` with ``src`` written (or added, with ``add``) where ``index`` points along
    ``dim``: for each of the index's ``m <= MAX_SCATTER`` columns, the positions it names
    take (or add) its value, later columns after earlier ones (PyTorch's order on the CPU).
    The index must span ``x`` in the other dimensions; an index outside ``x`` writes
    nothing (PyTorch raises)."""
    if x.ndim == 0 or index.ndim != x.ndim:
        return NotImplemented
    dim = dim % x.ndim
    m = index.shape[dim]
    if m > MAX_SCATTER or any(index.shape[d] != x.shape[d] for d in range(x.ndim) if d != dim):
        return NotImplemented
    if isinstance(src, torch.Tensor):
        src = src[tuple(slice(0, size) for size in index.shape)].to(x.dtype)
    else:  # a Python scalar takes x's type (int32 x, 1.5: 1), as PyTorch casts it
        src = torch.scalar_tensor(src, dtype=x.dtype, device=x.device)
    position = _positions(x, dim)
    out = x
    for i in range(m):
        value = src.narrow(dim, i, 1) if src.ndim else src
        out = _put(out, position == index.narrow(dim, i, 1), value, add)
    return out


def scatter_src(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> Any:
    """``aten.scatter.src`` (:func:`_scatter`)."""
    return _scatter(x, dim, index, src, add=False)


def scatter_value(x: torch.Tensor, dim: int, index: torch.Tensor, value: float) -> Any:
    """``aten.scatter.value`` (:func:`_scatter`)."""
    return _scatter(x, dim, index, value, add=False)


def scatter_add(x: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor) -> Any:
    """``aten.scatter_add`` (:func:`_scatter`)."""
    return _scatter(x, dim, index, src, add=True)


def index_put(x: torch.Tensor, indices: Sequence[torch.Tensor | None], values: torch.Tensor,
              accumulate: bool = False) -> Any:
    """``aten.index_put`` (``x[idx] = v``, ``x[:, idx] += v`` out of place) with one 1-D
    integer index of at most :data:`MAX_SCATTER` positions, after whole dimensions: for each
    position (negative ones count from the end), the slice it names takes (or adds) its
    values, later positions after earlier ones; or with one boolean mask and one value
    (:func:`_put_where`). Other indexings (several index tensors, a value per masked
    element) stay ``tm_tensor.scatter``, which kernel formation reports as unsupported."""
    named = [i for i, index in enumerate(indices) if index is not None]
    if len(named) != 1 or x.ndim == 0:
        return NotImplemented
    dim = named[0]
    index = indices[dim]
    if index is not None and index.dtype == torch.bool:
        return _put_where(x, dim, index, values, accumulate)
    if (index is None or index.ndim != 1
            or index.is_floating_point() or index.shape[0] > MAX_SCATTER
            or any(i is not None for i in indices[:dim])):
        return NotImplemented
    size = x.shape[dim]
    shape = list(x.shape)
    shape[dim] = index.shape[0]
    values = values.to(x.dtype).expand(shape)
    position = _positions(x, dim)
    index = torch.where(index < 0, index + size, index)
    out = x
    for i in range(index.shape[0]):
        out = _put(out, position == index[i], values.narrow(dim, i, 1), accumulate)
    return out


def _put_where(x: torch.Tensor, dim: int, mask: torch.Tensor, values: torch.Tensor,
               accumulate: bool) -> Any:
    """``x[..., mask] = v`` (or ``+= v``) with a boolean ``mask`` over ``x``'s dimensions
    from ``dim`` on and one value (``x[x < 0] = 0``): a select (or an add) where ``mask``
    holds. A value per selected element has a shape only known when the graph runs."""
    numel = values.numel()
    if (not isinstance(numel, int) or numel != 1 or dim + mask.ndim > x.ndim
            or tuple(mask.shape) != tuple(x.shape[dim:dim + mask.ndim])):
        return NotImplemented
    shape = [1] * dim + list(mask.shape) + [1] * (x.ndim - dim - mask.ndim)
    return _put(x, mask.reshape(shape), values.reshape(()).to(x.dtype), accumulate)


def roll(x: torch.Tensor, shifts: Sequence[int], dims: Sequence[int] = ()) -> Any:
    """``aten.roll``: each dimension's two slices swapped, the shift taken modulo the size;
    with no dims, of the flattened tensor. torch-mlir's decomposition sliced by the shift
    itself (a shift of the size or more rolled nothing, a negative one failed)."""
    if not dims:
        if len(shifts) != 1:
            return NotImplemented
        return roll(x.reshape(-1), shifts, [0]).reshape(x.shape)
    if len(shifts) != len(dims):
        return NotImplemented
    for shift, dim in zip(shifts, dims, strict=True):
        size = x.shape[dim]
        shift = shift % size if size else 0
        if shift:
            x = torch.cat([x.narrow(dim, size - shift, shift), x.narrow(dim, 0, size - shift)],
                          dim)
    return x


def circular_pad(x: torch.Tensor, pad: Sequence[int], mode: str = "constant",
                 value: float | None = None) -> Any:
    """``F.pad(x, pad, mode="circular")`` (``padding_mode="circular"`` convolutions) with
    pads from 0 to the size: each dimension, the last first, between its own last and first
    elements; torch's decomposition writes the wrapped parts with ``slice_scatter``, which
    kernel formation does not take."""
    if mode != "circular" or len(pad) % 2 or len(pad) // 2 > x.ndim:
        return NotImplemented
    for i in range(len(pad) // 2):
        dim, left, right = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        size = x.shape[dim]
        if not (0 <= left <= size and 0 <= right <= size):
            return NotImplemented
        x = torch.cat([x.narrow(dim, size - left, left), x, x.narrow(dim, 0, right)], dim)
    return x


def slice_scatter(x: torch.Tensor, src: torch.Tensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Any:
    """``aten.slice_scatter`` (``x[:, a:b:s] = src`` out of place: slice assignments, a
    shifted window's attention mask built part by part, a cache written at fixed positions):
    a select between ``x`` and ``src`` gathered at each position's place in the slice, which
    kernel formation fuses into the kernel that computes ``x``. torch-mlir lowers it to
    ``tensor.insert_slice``, which kernel formation does not take; so it stays where the
    sizes are not known when the graph is compiled."""
    if x.ndim == 0 or not all(isinstance(v, int) for v in (x.shape[dim], step)) or not all(
            v is None or isinstance(v, int) for v in (start, end)):
        return NotImplemented
    dim = dim % x.ndim
    size = x.shape[dim]
    first, last, step = slice(start, end, step).indices(size)
    count = len(range(first, last, step))
    shape = tuple(x.shape[:dim]) + (count,) + tuple(x.shape[dim + 1:])
    if tuple(src.shape) != shape:
        return NotImplemented
    if count == 0:
        return x.clone()
    offset = _positions(x, dim) - first
    taken = (offset >= 0) & (offset < last - first)
    at = offset.clamp(0, last - first - 1)
    if step > 1:  # at is at least 0: truncation is the floor
        taken = taken & (at % step == 0)
        at = torch.div(at, step, rounding_mode="trunc")
    return torch.where(taken, src.to(x.dtype).index_select(dim, at.reshape(-1)), x)


def select_scatter(x: torch.Tensor, src: torch.Tensor, dim: int, index: int) -> Any:
    """``aten.select_scatter`` (``x[:, i] = src`` out of place): :func:`slice_scatter` of
    the one position (a negative one counts from the end)."""
    if x.ndim == 0 or not isinstance(x.shape[dim], int) or not isinstance(index, int):
        return NotImplemented
    dim = dim % x.ndim
    if not -x.shape[dim] <= index < x.shape[dim]:
        return NotImplemented
    index %= x.shape[dim]
    return slice_scatter(x, src.unsqueeze(dim), dim, index, index + 1)


def index_with_int64_indices(x: torch.Tensor,
                             indices: Sequence[torch.Tensor | None]) -> Any:
    """``aten.index`` (``x[i]``) with integer indices of other types as int64: torch-mlir's
    lowering compares them with int64 bounds and fails on int32."""
    if not any(i is not None and i.dtype not in (torch.int64, torch.bool, torch.uint8)
               and not i.is_floating_point() for i in indices):
        return NotImplemented
    return aten.index.Tensor(x, [i.to(torch.int64) if i is not None and i.dtype not in (
        torch.bool, torch.uint8) else i for i in indices])


def _reduction_in_dtype(op: Any, bool_op: Any) -> Callable[..., Any]:
    """``op`` (sum, mean or prod) with a ``dtype`` other than its input's as torch computes
    it: of the input cast to ``dtype`` (an f16 or bf16 one then summed in f32, rounded once),
    but the mean of floats to a narrower float in their own type, rounded once; to bool,
    ``bool_op`` (any or all; None: as torch-mlir lowers it). torch-mlir summed in the half
    type, added bools as 1-bit integers (the parity), and crashed the process on int8 of
    another type."""

    def replacement(x: Any, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        if not isinstance(x, torch.Tensor) or dtype is None or (
                dtype == x.dtype != torch.bool) or (dtype == torch.bool and bool_op is None):
            return NotImplemented
        if (op in (aten.mean.dim, aten.mean.default) and x.is_floating_point()
                and dtype.is_floating_point and dtype.itemsize < x.dtype.itemsize):
            return op(x, *args, **kwargs).to(dtype)
        x = x.to(dtype)
        if dtype == torch.bool:
            return bool_op(x, *args, **kwargs)
        return op(x, *args, dtype=dtype, **kwargs)

    return replacement


def _over_elements(op: Any, name: str) -> Callable[..., Any]:
    """``op`` (a maximum, minimum or their index) as torch has it: an error over a dimension
    of size 0, which has no identity (the result was -inf, or an arbitrary index)."""

    def check(x: Any, dim: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.ndim:
            for d in _reduction_dims(x, dim):
                if x.shape[d] == 0:
                    raise ValueError(f"{name}(): expected reduction dim {d} to have non-zero "
                                     f"size, as torch does")
        return NotImplemented

    return check


def _bool_add(x: Any, other: Any, *, alpha: Any = 1) -> Any:
    """``x + other`` of bools (a bool tensor and ``True``): or, as torch adds bools;
    torch-mlir added them as 1-bit integers, which wrap (``True + True`` was False)."""
    if not (isinstance(x, torch.Tensor) and x.dtype == torch.bool and isinstance(other, bool)
            and alpha == 1):
        return NotImplemented
    return aten.bitwise_or.Tensor(x, torch.scalar_tensor(other, dtype=torch.bool,
                                                         device=x.device))


def _elu(x: Any, alpha: Any = 1.0, scale: Any = 1.0, input_scale: Any = 1.0) -> Any:
    """``aten.elu`` (``selu``, ``celu``) of floats as torch's reference computes it, with
    ``expm1``: torch-mlir's ``exp(x) - 1`` cancelled (``elu(-1e-10)`` was 0, ``elu(-1e-7)``
    19% off) and its ``max(0, x)`` turned -0 into 0."""
    if not _is_float(x):
        return NotImplemented
    return torch.where(x > 0, x * scale, (alpha * scale) * torch.expm1(x * input_scale))


def _tanh_gelu(x: Any, approximate: str = "none") -> Any:
    """``aten.gelu`` of floats with ``approximate="tanh"`` as torch's kernels compute it:
    torch-mlir's lowering took sqrt(2 / pi) as 0.797724 (not 0.7978845608), 5e-5 off eager
    near x = 1.3, where eager is 4e-7 from the exact value."""
    if approximate != "tanh" or not _is_float(x):
        return NotImplemented
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1 + torch.tanh(inner))


#: The powers torch's kernels compute without ``pow`` (``pow_tensor_scalar_optimized``).
_POWERS: dict[float, Callable[[torch.Tensor], torch.Tensor]] = {
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    0.5: torch.sqrt,
    -0.5: torch.rsqrt,
    -1.0: lambda x: 1 / x,
    -2.0: lambda x: 1 / (x * x),
}


def _float_power_as_torch(x: Any, exponent: Any) -> Any:
    """A float tensor to the power 2, 3, 0.5, -0.5, -1 or -2 as torch computes it (products,
    sqrt, rsqrt, reciprocals; f16 and bf16 in f32, rounded once): C's ``pow`` that
    torch-mlir calls differs at the edges (``(-0.0) ** 0.5`` was 0 for -0, ``(-inf) ** 0.5``
    inf for NaN)."""
    if (not _is_float(x) or isinstance(exponent, bool)
            or not isinstance(exponent, (int, float)) or float(exponent) not in _POWERS):
        return NotImplemented
    wide = get_computation_dtype(x.dtype)
    return _POWERS[float(exponent)](x.to(wide)).to(x.dtype)


def _float_trunc(x: Any) -> Any:
    """``torch.trunc`` of floats: ``ceil`` below zero, else ``floor`` (-0 stays -0);
    torch-mlir's ``sign(x) * floor(|x|)`` gave 0 for -0."""
    if not _is_float(x):
        return NotImplemented
    return torch.where(x < 0, torch.ceil(x), torch.floor(x))


def _softmax_of_0d(op: Any) -> Callable[..., Any]:
    """``op`` (softmax or log-softmax) of a 0-d tensor, as of one element: torch-mlir's
    decomposition fails on 0-d and its pass manager retries without end."""

    def replacement(x: Any, dim: int, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(x, torch.Tensor) or x.ndim != 0:
            return NotImplemented
        return op(x.reshape(1), 0, *args, **kwargs).reshape(())

    return replacement


def _half_by_scalar_in_f32(op: Any) -> Callable[..., Any]:
    """``op`` (mul or div) of an f16 or bf16 tensor and a Python number the half type does
    not hold, or a 0-d tensor of another type, as torch computes it: in f32, the number
    rounded to f32 only, the result rounded once (torch-mlir rounded the number to the half
    type: ``x * 1e5`` was inf, and ``x * 0.1`` one ulp off for a third of the values)."""

    def replacement(x: Any, other: Any) -> Any:
        tensor, number = (x, other) if isinstance(x, torch.Tensor) and (
            x.dtype in _HALF_TYPES) else (other, x)
        if not isinstance(tensor, torch.Tensor) or tensor.dtype not in _HALF_TYPES:
            return NotImplemented
        if isinstance(number, torch.Tensor):
            if (number.ndim != 0 or number.dtype in _HALF_TYPES
                    or not number.is_floating_point()):
                return NotImplemented
            number = number.to(torch.float32)
        elif isinstance(number, bool) or not isinstance(number, (int, float)) or _exactly(
                float(number), tensor.dtype):
            return NotImplemented  # a half number: the half type's op rounds the same
        else:
            number = torch.scalar_tensor(number, dtype=torch.float32, device=tensor.device)
        wide = tensor.to(torch.float32)
        result = op(wide, number) if tensor is x else op(number, wide)
        return result.to(tensor.dtype)

    return replacement


def cdist(x1: torch.Tensor, x2: torch.Tensor, p: float,
          compute_mode: int | None = None) -> Any:
    """``aten._cdist_forward`` (``torch.cdist``): the p-norm of every difference of a row of
    ``x1`` and a row of ``x2``, computed directly (one reduction over the broadcast
    differences, which kernel formation does not store). PyTorch computes p = 2 through a
    matmul for more than 25 rows, which loses digits to cancellation; this does not."""
    if not x1.is_floating_point() or x1.ndim < 2 or p < 0:
        return NotImplemented
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()  # [..., P, R, M]
    if p == 0:
        return (diff != 0).sum(-1).to(x1.dtype)
    if p == float("inf"):
        return diff.amax(-1)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return (diff * diff).sum(-1).sqrt()
    return diff.pow(p).sum(-1).pow(1.0 / p)


def _product_in_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` of f16/bf16 tensors in f32, as torch's attention kernels keep the scores
    (and tileopt's fused kernel does): where the product does not fuse into one attention
    kernel (head dimensions over 256), the half type's rounding of scores of size 10-40 was
    0.03 (f16) / 0.24 (bf16) off. ``@``'s own reshapes to a bmm come first, so that the
    widening is the bmm's operand, which the dot reads in the half type and widens itself."""
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a3 = a.expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b3 = b.expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
    return torch.bmm(a3.float(), b3.float()).reshape(*batch, a.shape[-2], b.shape[-1])


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """``F.scaled_dot_product_attention`` as the ops kernel formation fuses into one
    attention kernel (module docstring); with dropout, torch's own decomposition."""
    if dropout_p != 0.0:
        return NotImplemented
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        # Each key head serves `repeat` query heads: a broadcast, copied to the query heads.
        repeat = query.shape[-3] // key.shape[-3]

        def widen(t: torch.Tensor) -> torch.Tensor:
            wide = t.unsqueeze(-3).expand(*t.shape[:-2], repeat, *t.shape[-2:])
            return wide.reshape(*t.shape[:-3], t.shape[-3] * repeat, *t.shape[-2:])

        key, value = widen(key), widen(value)
    if query.dtype in _HALF_TYPES and key.dtype == query.dtype:
        scores = _product_in_f32(query, key.transpose(-2, -1)) * scale
    else:
        scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        seen = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool,
                          device=query.device).tril()
        scores = scores.masked_fill(~seen, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1)
    masked = (scores == float("-inf")).all(dim=-1, keepdim=True)
    probs = torch.where(masked, torch.zeros((), dtype=probs.dtype, device=probs.device), probs)
    # An f32 mask beside f16 or bf16 tensors made the scores f32: the result is value's type.
    return probs.to(value.dtype) @ value


def _first(replacement: Callable[..., Any],
           otherwise: Callable[..., Any] | None) -> Callable[..., Any]:
    """``replacement`` where it applies (elsewhere it returns NotImplemented), else
    ``otherwise`` (the table's decomposition, or none)."""

    def decomposed(*args: Any, **kwargs: Any) -> Any:
        result = replacement(*args, **kwargs)
        if result is NotImplemented and otherwise:
            return otherwise(*args, **kwargs)
        return result

    return decomposed


def _is_int8(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.int8


#: The ops whose int8-by-Python-integer form torch-mlir crashes on (module docstring).
_INT8_SCALAR_OPS = (aten.mul.Tensor, aten.sub.Tensor, aten.div.Tensor_mode,
                    aten.remainder.Scalar)


def _int8_by_scalar_in_int16(op: Any) -> Callable[..., Any]:
    """``op`` of an int8 tensor and a Python integer in int16, rounded back to int8."""

    def replacement(x: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        if not (_is_int8(x) and isinstance(other, int)):
            return NotImplemented
        return op(x.to(torch.int16), other, *args, **kwargs).to(torch.int8)

    return replacement


#: Elementwise ops whose int8 form with a 0-d tensor of another type torch-mlir crashes on
#: (module docstring).
_INT8_MIXED_OPS = (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor_mode,
                   aten.remainder.Tensor, aten.fmod.Tensor, aten.bitwise_and.Tensor,
                   aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor,
                   aten.bitwise_left_shift.Tensor, aten.bitwise_right_shift.Tensor,
                   aten.maximum.default, aten.minimum.default)


def _int8_with_0d_operands(op: Any) -> Callable[..., Any]:
    """``op`` with its 0-d tensors of other types cast to int8 where its two tensors' result
    is int8 (torch casts its operands to the result's type)."""

    def other(x: Any) -> bool:
        return isinstance(x, torch.Tensor) and x.ndim == 0 and x.dtype != torch.int8

    def replacement(*args: Any, **kwargs: Any) -> Any:
        tensors = [x for x in args if isinstance(x, torch.Tensor)]
        if (not any(other(x) for x in args) or len(tensors) != 2
                or torch.result_type(*tensors) != torch.int8):
            return NotImplemented
        return op(*[x.to(torch.int8) if other(x) else x for x in args], **kwargs)

    return replacement


#: The batched matrix products whose int8 form torch-mlir crashes on (module docstring;
#: ``mm`` and ``addmm`` go through ``_int_mm``).
_INT8_BATCHED_MATMUL_OPS = (aten.bmm.default, aten.baddbmm.default)


def _int8_in_int32(op: Any) -> Callable[..., Any]:
    """``op`` of int8 tensors with them widened to int32, rounded back to int8 (the same
    result modulo 256)."""

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if not any(_is_int8(x) for x in args):
            return NotImplemented
        wide = [x.to(torch.int32) if _is_int8(x) else x for x in args]
        return op(*wide, **kwargs).to(torch.int8)

    return replacement


def _int8_mm(a: Any, b: Any) -> Any:
    """``a @ b`` of 2-D int8 tensors as ``_int_mm`` (int32 sums) rounded back to int8."""
    if not (_is_int8(a) and _is_int8(b)):
        return NotImplemented
    return aten._int_mm.default(a, b).to(torch.int8)


def _int8_addmm(x: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """``beta * x + alpha * (a @ b)`` of int8 tensors with the product by ``_int_mm``, in
    int32, rounded back to int8 (the same result modulo 256)."""
    if not (_is_int8(x) and _is_int8(a) and _is_int8(b)):
        return NotImplemented
    return (x.to(torch.int32) * beta + aten._int_mm.default(a, b) * alpha).to(torch.int8)


_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def scaled_mm(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any = None,
              scale_result: Any = None, out_dtype: Any = None,
              use_fast_accum: bool = False) -> Any:
    """``torch._scaled_mm`` of fp8 matrices: ``a @ b`` of their values in f32 (exact
    products, which kernel formation runs on fp8 tensor cores), times ``scale_a`` and
    ``scale_b`` (per tensor, or per row of ``a`` and column of ``b``), plus ``bias``, in
    ``out_dtype`` (``a``'s by default). Not with a ``scale_result``, which torch's CPU
    kernel ignores and cuBLAS applies: the operator stays unsupported then."""
    if a.dtype not in _FP8 or b.dtype not in _FP8 or scale_result is not None:
        return NotImplemented
    # Each scale on its own: both join the matmul's epilogue (their product, an outer
    # product for row-wise scales, would be a tensor of its own).
    out = (a.to(torch.float32) @ b.to(torch.float32)) * scale_a.to(torch.float32)
    out = out * scale_b.to(torch.float32)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(a.dtype if out_dtype is None else out_dtype)


def _fp8_to_fp8(x: Any, *, dtype: Any = None, **kwargs: Any) -> Any:
    """One fp8 format converted to the other through f32, which holds every value of
    both (torch-mlir makes an invalid ``arith.extf`` of the two 8-bit types)."""
    if not (isinstance(x, torch.Tensor) and x.dtype in _FP8 and dtype in _FP8
            and dtype != x.dtype):
        return NotImplemented
    convert = torch.ops.prims.convert_element_type.default
    return convert(convert(x, torch.float32), dtype)


def _of_int8(op: Any) -> Callable[..., Any]:
    """``op`` of an int8 tensor (amax or amin over every dimension, for aten.max and
    aten.min of a whole tensor)."""

    def replacement(x: Any) -> Any:
        return op(x) if _is_int8(x) else NotImplemented

    return replacement


#: The reductions that torch computes in f32 for f16 and bf16 tensors (module docstring).
_HALF_REDUCTIONS = (aten.sum.dim_IntList, aten.mean.default, aten.mean.dim,
                    aten.linalg_vector_norm.default)

#: Activations that torch computes in f32 for f16 and bf16 tensors and torch-mlir splits
#: into ops that each round to the half type (module docstring).
_HALF_ACTIVATIONS = (aten.elu.default, aten.gelu.default, aten.leaky_relu.default,
                     aten.hardsigmoid.default, aten.round.decimals)


def _in_computation_dtype(op: Any) -> Callable[..., Any]:
    """``op`` of an f16 or bf16 tensor (without another ``dtype``) in f32
    (``get_computation_dtype``), rounded once to the tensor's type."""

    def replacement(x: Any, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        if not (isinstance(x, torch.Tensor) and x.dtype in _HALF_TYPES
                and dtype in (None, x.dtype)):
            return NotImplemented
        return op(x.to(get_computation_dtype(x.dtype)), *args, **kwargs).to(x.dtype)

    return replacement


def _integer_neg(x: Any) -> Any:
    """``-x`` of an integer tensor as ``0 - x`` (which wraps at the type's minimum)."""
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point or x.dtype == torch.bool:
        return NotImplemented
    return aten.sub.Tensor(torch.scalar_tensor(0, dtype=x.dtype, device=x.device), x)


def _integer_floor_division(x: Any, y: Any, *, rounding_mode: str | None = "floor") -> Any:
    """Integer ``x // y`` as torch's (module docstring); NotImplemented for floats or
    another rounding mode."""
    if rounding_mode != "floor" or not isinstance(x, torch.Tensor):
        return NotImplemented
    dtype = torch.result_type(x, y)
    if dtype.is_floating_point or dtype == torch.bool:
        return NotImplemented
    wide = torch.int32 if dtype == torch.int8 else dtype  # torch-mlir's int8 division fails
    x = x.to(wide)
    y = (y.to(wide) if isinstance(y, torch.Tensor)
         else torch.scalar_tensor(y, dtype=wide, device=x.device))
    minus_one = y == -1
    # MIN / -1 overflows the division; x // -1 is -x.
    q = torch.where(minus_one, -x, torch.div(x, torch.where(minus_one, 1, y),
                                             rounding_mode="trunc"))
    r = x - q * y
    q = q - ((r != 0) & ((r < 0) != (y < 0))).to(wide)
    return q.to(dtype)


def _float_operands(x: Any, y: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``x`` and ``y`` as tensors of their promoted type (a Python float rounded to it, as
    torch's kernels cast a scalar operand), or None where that type is not a float or
    neither is a tensor."""
    like = x if isinstance(x, torch.Tensor) else y
    if not isinstance(like, torch.Tensor):
        return None
    x, y = _as_tensor(x, like), _as_tensor(y, like)
    dtype = torch.result_type(x, y)
    if not dtype.is_floating_point:
        return None
    return x.to(dtype), y.to(dtype)


def _float_fmod(x: Any, y: Any) -> Any:
    """Float ``torch.fmod``, C's exact fmod: the remainder of the magnitudes (an exact
    ``arith.remf``, libdevice's fmod; f16 and bf16 in f32, which is exact too) with the
    sign of ``x``; a zero ``x`` is returned as it is (``x - 0`` keeps -0). torch-mlir
    computed ``x - trunc(x / y) * y``, wrong wherever the quotient is inexact:
    ``fmod(1e10, 3.3)`` was 323.7 for 0.296."""
    operands = _float_operands(x, y)
    if operands is None:
        return NotImplemented
    x, y = operands
    dtype, wide = x.dtype, get_computation_dtype(x.dtype)
    x = x.to(wide)
    r = aten.remainder.Tensor(x.abs(), y.to(wide).abs())
    return torch.where(x < 0, -r, torch.where(x == 0, x - r, r)).to(dtype)


def _float_floor_division(x: Any, y: Any, *, rounding_mode: str | None = "floor") -> Any:
    """Float ``x // y`` as torch's ``div_floor_floating``: ``(x - fmod(x, y)) / y``, one
    less where the remainder's sign differs from ``y``'s, rounded to the nearest integer
    (``floor``, and up past one half), ``x / y`` where ``y`` is 0; each step rounds to f16
    or bf16 as torch's vectorised kernel does, but for a divisor of one value. torch-mlir's
    ``floor(x / y)`` took the rounded quotient (``1.0 // 0.1`` was 10, torch's is 9) and
    gave infinity for ``inf // 2`` (torch's NaN)."""
    if rounding_mode != "floor":
        return NotImplemented
    operands = _float_operands(x, y)
    if operands is None:
        return NotImplemented
    dtype = operands[0].dtype
    if dtype in _HALF_TYPES and (
            not isinstance(y, torch.Tensor) or y.numel() == 1):
        # torch's kernel divides f16 and bf16 by one value in f32 throughout, that value
        # (a Python float) rounded to f32 only.
        x = operands[0].to(torch.float32)
        y = (y.to(torch.float32) if isinstance(y, torch.Tensor)
             else torch.scalar_tensor(y, dtype=torch.float32, device=x.device))
        return _float_floor_division(x, y).to(dtype)
    x, y = operands
    mod = _float_fmod(x, y)
    div = (x - mod) / y
    div = torch.where((mod != 0) & ((x < 0) != (y < 0)), div - 1, div)
    floor = torch.floor(div)
    floor = torch.where(div - floor > 0.5, floor + 1, floor)
    quotient = x / y
    # A zero quotient has the sign of x / y (finite here: |x| < |y|).
    floor = torch.where(div != 0, floor, quotient * 0)
    return torch.where(y != 0, floor, quotient)


def _exactly(value: float, dtype: torch.dtype) -> bool:
    """Whether the Python float ``value`` is a value of the float type ``dtype``."""
    if dtype == torch.float64 or not math.isfinite(value):
        return True
    if dtype not in (torch.float32, *_HALF_TYPES):
        return False
    fmt = "<e" if dtype == torch.float16 else "<f"
    try:
        packed = struct.pack(fmt, value)
    except OverflowError:
        return False
    # bfloat16 is the top half of a float32.
    return (struct.unpack(fmt, packed)[0] == value
            and (dtype != torch.bfloat16 or packed[:2] == b"\0\0"))


def _compare_in_promoted_type(op: Any, tensor_op: Any) -> Callable[..., Any]:
    """``op``, a ``.Scalar`` comparison of a tensor and a Python scalar, as torch computes it:
    both in the promoted type (bool as int64), the scalar cast to it (a float rounded, an
    integer wrapped). torch-mlir's folder of a constant tensor compared with a scalar read a
    float tensor as integers beside an integer scalar (``scalar_tensor(2.0) == 2`` was False;
    it also crashed the process), sign-extended bools, and compared floats in double and
    integers unwrapped; its lowering compared an integer tensor with a float exactly where
    torch rounds the integer to float32. ``tensor_op`` is the ``.Tensor`` form, which takes
    a float scalar not exact in the type as a 0-d tensor of it."""

    def decomposed(x: Any, other: Any) -> Any:
        if not isinstance(x, torch.Tensor) or isinstance(other, torch.Tensor):
            return NotImplemented
        dtype = torch.result_type(x, other)
        if dtype == torch.bool:
            dtype = torch.int64
        if dtype.is_floating_point:
            if x.dtype == dtype and isinstance(other, float) and _exactly(other, dtype):
                return NotImplemented
            if _exactly(float(other), dtype):
                return op(x.to(dtype), float(other))
            return tensor_op(x.to(dtype), torch.scalar_tensor(other, dtype=dtype,
                                                              device=x.device))
        bits = torch.iinfo(dtype).bits
        wrapped = (int(other) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
        if x.dtype == dtype and not isinstance(other, bool) and wrapped == other:
            return NotImplemented
        return op(x.to(dtype), wrapped)

    return decomposed


def _float_equal(x: Any, other: Any) -> Any:
    """``x == x`` of a float tensor: False where ``x`` is NaN (``x <= x``); torch-mlir folds an
    equality of a value with itself to True."""
    if x is not other or not _is_float(x):
        return NotImplemented
    return aten.le.Tensor(x, x)


def _isfinite(x: Any) -> Any:
    """``torch.isfinite``: ``x - x`` is 0 unless ``x`` is infinite or NaN; integers are."""
    if not isinstance(x, torch.Tensor):
        return NotImplemented
    return (x - x) == 0 if x.dtype.is_floating_point else torch.ones_like(x, dtype=torch.bool)


def _integer_power(x: Any, exponent: Any) -> Any:
    """An integer tensor to a non-negative Python integer power, by squaring (wrapping as
    torch's), or to a float power in the promoted float type; torch-mlir lowers powers of
    floats only."""
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point or x.dtype == torch.bool:
        return NotImplemented
    if isinstance(exponent, float):
        return aten.pow.Tensor_Scalar(x.to(torch.result_type(x, exponent)), exponent)
    if isinstance(exponent, bool) or not isinstance(exponent, int) or exponent < 0:
        return NotImplemented
    result, power = torch.ones_like(x), x
    while exponent:
        if exponent & 1:
            result = result * power
        exponent >>= 1
        if exponent:
            power = power * power
    return result


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point


def _nan_extreme(greater: bool) -> Callable[..., Any]:
    """``torch.maximum`` (``greater``) or ``torch.minimum`` of float tensors, NaN where
    either operand is NaN."""

    def decomposed(x: Any, y: Any) -> Any:
        if not (_is_float(x) or _is_float(y)):
            return NotImplemented
        return torch.where(torch.isnan(x) | ((x > y) if greater else (x < y)), x, y)

    return decomposed


def _nan_clamp(x: Any, min: Any = None, max: Any = None) -> Any:
    """``torch.clamp`` of a float tensor, or of an integer one with float bounds (in the
    promoted type): NaN stays NaN (and a NaN bound gives NaN); with ``min > max``, ``max``
    everywhere."""
    if not isinstance(x, torch.Tensor):
        return NotImplemented
    dtype = x.dtype
    for bound in (min, max):
        if bound is not None:
            dtype = torch.promote_types(dtype, torch.result_type(x, bound))
    if not dtype.is_floating_point:
        return NotImplemented
    x = x.to(dtype)
    for bound, outside in ((min, torch.lt), (max, torch.gt)):
        if bound is not None:
            nan_bound = torch.isnan(bound) if isinstance(bound, torch.Tensor) else bound != bound
            x = torch.where(outside(x, bound) | nan_bound, bound, x)
    return x


#: Forms torch-mlir has no lowering for, and the tensor forms they compute (module
#: docstring).
_SCALAR_AS_TENSOR = {
    aten.bitwise_or.Scalar: aten.bitwise_or.Tensor,
    aten.bitwise_xor.Scalar: aten.bitwise_xor.Tensor,
    aten.fmod.Scalar: aten.fmod.Tensor,
    aten.__lshift__.Tensor: aten.bitwise_left_shift.Tensor,
    aten.__rshift__.Tensor: aten.bitwise_right_shift.Tensor,
    aten.bitwise_left_shift.Tensor_Scalar: aten.bitwise_left_shift.Tensor,
    aten.bitwise_right_shift.Tensor_Scalar: aten.bitwise_right_shift.Tensor,
    aten.bitwise_left_shift.Scalar_Tensor: aten.bitwise_left_shift.Tensor,
    aten.bitwise_right_shift.Scalar_Tensor: aten.bitwise_right_shift.Tensor,
}


def _as_tensor(v: torch.Tensor | bool | int | float, like: torch.Tensor) -> torch.Tensor:
    """``v``, a Python scalar as a 0-d tensor beside ``like`` that promotes as the scalar does:
    bool, int64, or for a float the default dtype, float64 beside a float64 tensor (the
    scalar exactly)."""
    if isinstance(v, torch.Tensor):
        return v
    dtype = (torch.bool if isinstance(v, bool) else torch.int64 if isinstance(v, int)
             else torch.float64 if like.dtype == torch.float64 else torch.get_default_dtype())
    return torch.scalar_tensor(v, dtype=dtype, device=like.device)


#: Ops whose Python float operand torch-mlir rounds to the default dtype (f32) even beside a
#: float64 tensor (module docstring), and their overloads for a tensor in its place.
_FLOAT_SCALAR_OPS = {
    aten.sub.Tensor: aten.sub.Tensor, aten.rsub.Scalar: aten.rsub.Tensor,
    aten.div.Tensor_mode: aten.div.Tensor_mode, aten.div.Scalar_mode: aten.div.Tensor_mode,
    aten.floor_divide.default: aten.floor_divide.default,
    aten.floor_divide.Scalar: aten.floor_divide.default, aten.fmod.Tensor: aten.fmod.Tensor,
    aten.remainder.Scalar: aten.remainder.Tensor, aten.remainder.Tensor: aten.remainder.Tensor,
}


def _exact_float_scalars(tensor_op: Any) -> Callable[..., Any]:
    """``tensor_op`` of the arguments with their Python floats as 0-d float64 tensors, where
    a tensor argument is float64; NotImplemented elsewhere."""

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if not (any(isinstance(a, float) for a in args) and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args)):
            return NotImplemented
        like = next(a for a in args if isinstance(a, torch.Tensor) and a.dtype == torch.float64)
        return tensor_op(*[_as_tensor(a, like) if isinstance(a, float) else a for a in args],
                         **kwargs)

    return replacement


def _scalar_as_tensor(op: Any) -> Callable[..., Any]:
    """``op`` (a ``.Tensor`` overload) of its two arguments, a Python scalar among them as a
    0-d tensor of it, whose dtype (int64, the default float type or bool) promotes with the
    other argument as the scalar does."""

    def decomposed(x: torch.Tensor | bool | int | float,
                   other: torch.Tensor | bool | int | float) -> Any:
        like = x if isinstance(x, torch.Tensor) else other
        assert isinstance(like, torch.Tensor)
        return op(_as_tensor(x, like), _as_tensor(other, like))

    return decomposed


@functools.cache
def decomposition_table() -> dict[Any, Callable[..., Any]]:
    """torch-mlir's decomposition table with the changes this module's docstring lists."""
    from torch._decomp import core_aten_decompositions
    from torch._decomp import decomposition_table as torch_decompositions
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    table[aten.var_mean.correction] = var_mean_correction
    table[aten.var.correction] = var_correction
    # torch's table of CompositeImplicit ops (a CustomDecompTable: only [] finds them).
    table[aten.rms_norm.default] = core_aten_decompositions()[aten.rms_norm.default]
    # torch-mlir has no lowering for addmv (torch.addmv): torch's decomposition's mv and add.
    table[aten.addmv.default] = torch_decompositions[aten.addmv.default]
    table[aten.convolution.default] = convolution
    table[aten.cumsum.default] = masked_cumsum
    table[aten.cumprod.default] = masked_cumprod
    table[aten.logcumsumexp.default] = logcumsumexp
    table[aten.cummax.default] = _cumulative_extreme(greater=True)
    table[aten.cummin.default] = _cumulative_extreme(greater=False)
    table[aten.erfinv.default] = erfinv
    table[aten.hypot.default] = hypot
    table[aten.constant_pad_nd.default] = constant_pad_nd
    for n, max_op, avg_op in ((2, aten.max_pool2d_with_indices, aten.avg_pool2d),
                              (3, aten.max_pool3d_with_indices, aten.avg_pool3d)):
        table[max_op.default] = functools.partial(max_pool, n)
        table[avg_op.default] = functools.partial(avg_pool, n)
    for n, max_op, avg_op in ((2, aten.adaptive_max_pool2d, None),
                              (3, aten.adaptive_max_pool3d, aten._adaptive_avg_pool3d)):
        table[max_op.default] = functools.partial(adaptive_max_pool, n)
        if avg_op is not None:
            table[avg_op.default] = functools.partial(adaptive_avg_pool, n)
    table[aten.topk.default] = topk
    table[aten.scatter.src] = scatter_src
    table[aten.scatter.value] = scatter_value
    table[aten.scatter_add.default] = scatter_add
    table[aten.index_put.default] = index_put
    table[aten._cdist_forward.default] = cdist
    table[aten.sort.default] = sort
    table[aten.sort.stable] = stable_sort
    table[aten.scaled_dot_product_attention.default] = scaled_dot_product_attention
    table[aten._scaled_mm.default] = scaled_mm
    table[aten._to_copy.default] = _first(_fp8_to_fp8, table.get(aten._to_copy.default))
    for op in _INT8_SCALAR_OPS:
        table[op] = _first(_int8_by_scalar_in_int16(op), table.get(op))
    for op in _INT8_MIXED_OPS:
        table[op] = _first(_int8_with_0d_operands(op), table.get(op))
    for op in _INT8_BATCHED_MATMUL_OPS:
        table[op] = _first(_int8_in_int32(op), table.get(op))
    table[aten.mm.default] = _first(_int8_mm, table.get(aten.mm.default))
    table[aten.addmm.default] = _first(_int8_addmm, table.get(aten.addmm.default))
    # Over every dimension, as aten.max and aten.min of a whole tensor.
    table[aten.max.default] = _first(_of_int8(aten.amax.default), table.get(aten.max.default))
    table[aten.min.default] = _first(_of_int8(aten.amin.default), table.get(aten.min.default))
    table[aten.neg.default] = _first(_integer_neg, table.get(aten.neg.default))
    table[aten.pow.Tensor_Scalar] = _first(
        _integer_power, _first(_float_power_as_torch, table.get(aten.pow.Tensor_Scalar)))
    table[aten.isfinite.default] = _first(_isfinite, table.get(aten.isfinite.default))
    table[aten.roll.default] = roll
    table[aten.slice_scatter.default] = slice_scatter
    table[aten.select_scatter.default] = select_scatter
    for op, name in ((aten.amax.default, "amax"), (aten.amin.default, "amin"),
                     (aten.max.dim, "max"), (aten.min.dim, "min"), (aten.max.default, "max"),
                     (aten.min.default, "min"), (aten.argmax.default, "argmax"),
                     (aten.argmin.default, "argmin")):
        table[op] = _first(_over_elements(op, name), table.get(op))
    table[aten.pad.default] = _first(circular_pad, table.get(aten.pad.default))
    table[aten.elu.default] = _first(_elu, table.get(aten.elu.default))
    table[aten.gelu.default] = _first(_tanh_gelu, table.get(aten.gelu.default))
    table[aten.trunc.default] = _first(_float_trunc, table.get(aten.trunc.default))
    table[aten.add.Tensor] = _first(_bool_add, table.get(aten.add.Tensor))
    table[aten.index.Tensor] = _first(index_with_int64_indices, table.get(aten.index.Tensor))
    for op, bool_op in ((aten.sum.dim_IntList, aten.any.dims), (aten.sum.default, aten.any.default),
                        (aten.prod.dim_int, aten.all.dim), (aten.prod.default, aten.all.default),
                        (aten.mean.dim, None), (aten.mean.default, None)):
        table[op] = _first(_reduction_in_dtype(op, bool_op), table.get(op))
    for op in (aten._softmax.default, aten._log_softmax.default, aten.softmax.int,
               aten.log_softmax.int):
        table[op] = _first(_softmax_of_0d(op), table.get(op))
    for op in (aten.mul.Tensor, aten.div.Tensor, aten.mul.Scalar, aten.div.Scalar):
        table[op] = _first(_half_by_scalar_in_f32(op), table.get(op))
    for op, tensor_op in ((aten.lt.Scalar, aten.lt.Tensor), (aten.le.Scalar, aten.le.Tensor),
                          (aten.gt.Scalar, aten.gt.Tensor), (aten.ge.Scalar, aten.ge.Tensor),
                          (aten.eq.Scalar, aten.eq.Tensor), (aten.ne.Scalar, aten.ne.Tensor)):
        table[op] = _first(_compare_in_promoted_type(op, tensor_op), table.get(op))
    table[aten.eq.Tensor] = _first(_float_equal, table.get(aten.eq.Tensor))
    table[aten.maximum.default] = _first(_nan_extreme(True), table.get(aten.maximum.default))
    table[aten.minimum.default] = _first(_nan_extreme(False), table.get(aten.minimum.default))
    for op in (aten.clamp.default, aten.clamp.Tensor):
        table[op] = _first(_nan_clamp, table.get(op))
    for op, min_or_max in ((aten.clamp_min.default, "min"), (aten.clamp_min.Tensor, "min"),
                           (aten.clamp_max.default, "max"), (aten.clamp_max.Tensor, "max")):
        table[op] = _first(
            lambda x, bound, key=min_or_max: _nan_clamp(x, **{key: bound}), table.get(op))
    table[aten.hardtanh.default] = _first(
        lambda x, min_val=-1.0, max_val=1.0: _nan_clamp(x, min_val, max_val),
        table.get(aten.hardtanh.default))
    table[aten.hardsigmoid.default] = _first(
        lambda x: _nan_clamp(x + 3, 0.0, 6.0) / 6 if _is_float(x) else NotImplemented,
        table.get(aten.hardsigmoid.default))
    for op in (aten.div.Tensor_mode, aten.div.Scalar_mode):
        table[op] = _first(_integer_floor_division,
                           _first(_float_floor_division, table.get(op)))
    for op in (aten.floor_divide.default, aten.floor_divide.Scalar):
        table[op] = _first(functools.partial(_integer_floor_division, rounding_mode="floor"),
                           _first(_float_floor_division, table.get(op)))
    table[aten.fmod.Tensor] = _first(_float_fmod, table.get(aten.fmod.Tensor))
    for op, tensor_op in _SCALAR_AS_TENSOR.items():
        table[op] = _scalar_as_tensor(tensor_op)
    for op, tensor_op in _FLOAT_SCALAR_OPS.items():
        table[op] = _first(_exact_float_scalars(tensor_op), table.get(op))
    for op in (*_HALF_REDUCTIONS, *_HALF_ACTIVATIONS):
        table[op] = _first(_in_computation_dtype(op), table.get(op))
    return table
