"""Complex tensors that a graph makes and reads itself, as real tensors (imports torch).

Rotary embeddings written with complex numbers (Llama 4's and DeepSeek-V2's in Hugging Face,
Meta's reference Llama) make ``freqs_cis = torch.polar(ones, angles)``, multiply
``torch.view_as_complex(x.reshape(..., -1, 2))`` by it and take ``torch.view_as_real`` of the
product. torch-mlir has no complex lowering to linalg, so :func:`complex_as_real` rewrites
the exported graph first: each complex tensor of shape ``S`` becomes a real one of shape
``S + (2,)`` (its real and imaginary parts, the layout ``view_as_real`` gives), and each op
on complex tensors the real ops that compute it. A graph whose complex tensors meet an op
not rewritten here (or come in or go out of it) is left as it is, and reported unsupported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

aten = torch.ops.aten

#: The real type of each complex type's parts.
_PARTS = {torch.complex64: torch.float32, torch.complex128: torch.float64}


#: Why an op on complex tensors that :func:`complex_as_real` does not rewrite is unsupported.
UNSUPPORTED = (
    "tileopt computes complex tensors through their real and imaginary parts, in the ops of "
    "rotary embeddings only (view_as_complex, polar, complex, products, sums, conj, abs, real, "
    "imag, reshapes, slices, cat, view_as_real). Compute with real tensors"
)


def _is_complex(node: Any) -> bool:
    value = node.meta.get("val") if isinstance(node, fx.Node) else None
    return isinstance(value, torch.Tensor) and value.dtype.is_complex


class _Rewriter:
    """Emits the real ops of one complex op before it, with their fake values."""

    def __init__(self, graph: fx.Graph, mode: Any) -> None:
        self.graph = graph
        self.mode = mode
        self.real: dict[fx.Node, fx.Node] = {}  # a complex node -> its parts
        self.origin: fx.Node | None = None
        self.emitted: list[fx.Node] = []

    def emit(self, op: Any, *args: Any, **kwargs: Any) -> fx.Node:
        node = self.graph.call_function(op, args, kwargs)
        self.emitted.append(node)
        with self.mode:
            node.meta["val"] = op(*fx.node.map_arg(args, lambda n: n.meta["val"]),
                                  **fx.node.map_arg(kwargs, lambda n: n.meta["val"]))
        assert self.origin is not None
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in self.origin.meta:
                node.meta[key] = self.origin.meta[key]
        return node

    def part(self, z: fx.Node, i: int) -> fx.Node:
        return self.emit(aten.select.int, self.real[z], -1, i)

    def pair(self, re: fx.Node, im: fx.Node) -> fx.Node:
        return self.emit(aten.cat.default, [self.emit(aten.unsqueeze.default, re, -1),
                                            self.emit(aten.unsqueeze.default, im, -1)], -1)


def _rank(node: fx.Node) -> int:
    return node.meta["val"].ndim


def _dim(d: int, rank: int) -> int:
    """A dimension of a complex tensor of ``rank`` as one of its parts' (not the last)."""
    return d % rank if rank else 0


def _lower(r: _Rewriter, node: fx.Node) -> fx.Node | None:
    """The real node of ``node``'s result (its parts where it is complex); None where
    ``node`` is an op on complex tensors this module does not rewrite."""
    t, args, kwargs = node.target, node.args, node.kwargs
    if t is aten.cat.default:
        tensors = args[0]
        dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
        if not isinstance(tensors, Sequence) or not all(_is_complex(z) for z in tensors):
            return None
        return r.emit(t, [r.real[z] for z in tensors], _dim(dim, _rank(node)))
    complex_args = [a for a in args if _is_complex(a)]
    if t is aten.view_as_complex.default:
        return args[0]
    if t is aten.view_as_real.default:
        return r.real[args[0]]
    if t is aten._assert_tensor_metadata.default:  # of the complex tensor: nothing to check
        return r.real[args[0]]
    if kwargs and t not in (aten._to_copy.default, aten.clone.default):
        return None
    if t is aten.polar.default:
        magnitude, angle = args
        return r.pair(r.emit(aten.mul.Tensor, magnitude, r.emit(aten.cos.default, angle)),
                      r.emit(aten.mul.Tensor, magnitude, r.emit(aten.sin.default, angle)))
    if t is aten.complex.default:
        shape = list(node.meta["val"].shape)
        return r.pair(r.emit(aten.expand.default, args[0], shape),
                      r.emit(aten.expand.default, args[1], shape))
    if t in (aten.mul.Tensor, aten.div.Tensor) and len(args) == 2:
        a, b = args
        if len(complex_args) == 2 and t is aten.mul.Tensor:
            ar, ai, br, bi = r.part(a, 0), r.part(a, 1), r.part(b, 0), r.part(b, 1)
            mul = aten.mul.Tensor
            return r.pair(r.emit(aten.sub.Tensor, r.emit(mul, ar, br), r.emit(mul, ai, bi)),
                          r.emit(aten.add.Tensor, r.emit(mul, ar, bi), r.emit(mul, ai, br)))
        if len(complex_args) != 1 or (t is aten.div.Tensor and _is_complex(b)):
            return None
        z, other = (a, b) if _is_complex(a) else (b, a)
        if isinstance(other, fx.Node):
            other = r.emit(aten.unsqueeze.default, other, -1)
        elif not isinstance(other, (int, float)) or isinstance(other, bool):
            return None
        return r.emit(t, r.real[z], other) if z is a else r.emit(t, other, r.real[z])
    if t in (aten.add.Tensor, aten.sub.Tensor) and len(args) == 2 and len(complex_args) == 2:
        return r.emit(t, r.real[args[0]], r.real[args[1]])
    if t is aten.neg.default:
        return r.emit(t, r.real[args[0]])
    if t in (aten.conj.default, aten._conj.default, aten.conj_physical.default):
        return r.pair(r.part(args[0], 0), r.emit(aten.neg.default, r.part(args[0], 1)))
    if t is aten.real.default:
        return r.part(args[0], 0)
    if t is aten.imag.default:
        return r.part(args[0], 1)
    if t is aten.abs.default:
        re, im = r.part(args[0], 0), r.part(args[0], 1)
        return r.emit(aten.sqrt.default, r.emit(aten.add.Tensor, r.emit(aten.mul.Tensor, re, re),
                                                r.emit(aten.mul.Tensor, im, im)))
    if t in (aten.clone.default, aten.alias.default):
        return r.emit(aten.clone.default, r.real[args[0]])
    if t is aten._to_copy.default:
        z = args[0]
        dtype = kwargs.get("dtype", node.meta["val"].dtype)
        if set(kwargs) - {"dtype", "device", "layout"}:
            return None
        parts = _PARTS.get(dtype)
        if parts is not None:
            return r.emit(aten._to_copy.default, r.real[z], dtype=parts)
        return r.emit(aten._to_copy.default, r.part(z, 0), dtype=dtype)  # torch drops imag
    if not complex_args or args[0] is not complex_args[0]:
        return None
    z, rank, rest = args[0], _rank(args[0]), list(args[1:])
    if t in (aten.reshape.default, aten.view.default, aten._unsafe_view.default):
        return r.emit(aten.reshape.default, r.real[z], [*rest[0], 2])
    if t is aten.expand.default:
        return r.emit(t, r.real[z], [*rest[0], 2])
    if t is aten.unsqueeze.default:
        return r.emit(t, r.real[z], rest[0] % (rank + 1))
    if t in (aten.slice.Tensor, aten.select.int, aten.squeeze.dim):
        return r.emit(t, r.real[z], _dim(rest[0] if rest else 0, rank), *rest[1:])
    if t is aten.squeeze.dims:
        return r.emit(t, r.real[z], [_dim(d, rank) for d in rest[0]])
    if t is aten.permute.default:
        return r.emit(t, r.real[z], [*(_dim(d, rank) for d in rest[0]), rank])
    if t is aten.transpose.int:
        return r.emit(t, r.real[z], _dim(rest[0], rank), _dim(rest[1], rank))
    return None


def complex_as_real(program: Any) -> fx.Node | None:
    """Rewrites the complex tensors that ``program``'s graph makes and reads itself as real
    ones (this module's docstring). Where it cannot, leaves the graph as it is and returns
    the first op on complex tensors that it does not take (None for a complex input or
    output of the graph, or a complex type other than complex64 and complex128)."""
    graph: fx.Graph = program.graph_module.graph
    touched = [n for n in graph.nodes
               if _is_complex(n) or any(_is_complex(a) for a in n.all_input_nodes)]
    if not touched or any(n.op != "call_function" for n in touched):
        return None  # none, or a complex input or output
    values = [n.meta["val"] for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    mode = torch._guards.detect_fake_mode(values)
    if mode is None or any(_is_complex(n) and n.meta["val"].dtype not in _PARTS
                           for n in touched):
        return None
    r = _Rewriter(graph, mode)
    lowered: dict[fx.Node, fx.Node] = {}
    for node in touched:
        r.origin = node
        with graph.inserting_before(node):
            real = _lower(r, node)
        if real is None:  # an op this module does not take: undo, leave the graph
            for n in reversed(r.emitted):
                graph.erase_node(n)
            return node
        lowered[node] = real
        if _is_complex(node):
            r.real[node] = real
    for node, real in lowered.items():
        if not _is_complex(node):
            node.replace_all_uses_with(real)
    for node in reversed(touched):
        graph.erase_node(node)
    graph.eliminate_dead_code()
    program.graph_module.recompile()
    return None
