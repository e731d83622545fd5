"""tileopt as a ``torch.compile`` backend.

::

    compiled = torch.compile(model, backend="tileopt", options={"device": "emulator"})
    with torch.no_grad():
        y = compiled(x)

    report = FallbackReport()  # from tileopt.compiler.fallback
    compiled = torch.compile(model, backend="tileopt", dynamic=True, options={"report": report})
    ...
    print(report)  # per graph, one line per set of input shapes compiled

The name ``"tileopt"`` is registered by the entry point ``tileopt = "tileopt.dynamo:backend"``
in the group ``torch_dynamo_backends`` (``pyproject.toml``), so torch finds it without an
``import tileopt``; ``backend=tileopt.dynamo.backend`` works as well.

The backend never breaks a model that runs in eager PyTorch: each graph Dynamo captures is
split into the parts tileopt compiles and the parts that stay PyTorch calls (see
:mod:`tileopt.compiler.fallback`); a call that needs autograd (grad mode on and an input that
requires grad) runs the graph in PyTorch. ``TILEOPT_LOGS=fallback`` prints each fallback on
stderr; :func:`tileopt.explain` reports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["backend"]


def backend(
    gm: Any,
    example_inputs: Sequence[Any],
    *,
    options: Mapping[str, Any] | None = None,
    mode: str | None = None,
    **kwargs: Any,
) -> Any:
    """tileopt's Dynamo backend: returns a callable that runs ``gm`` with the parts tileopt
    compiles as its kernels and the rest in PyTorch.

    Args:
        gm: the ``torch.fx.GraphModule`` Dynamo captured (torch-level calls).
        example_inputs: its inputs; shapes are specialised: each new set of shapes (a new
            Dynamo graph, or new values of a dynamic graph's sizes, and of the numbers it reads
            from 0-d tensors, such as a LayerNorm's eps with ``dynamic=True``) is compiled on
            its first call, at most ``PartitionedGraph.MAX_SPECIALISATIONS`` per graph (more
            run eagerly).
        options: what ``torch.compile(..., options=...)`` passes; the same keys may also be
            given as keyword arguments (``functools.partial(backend, device="emulator")``):

            - ``target``: the GPU the kernels are compiled for (default ``"sm_90"``, as for
              ``tileopt.compile``);
            - ``device``: ``"emulator"`` (the PTX emulator, on CPU tensors), ``"cuda"``, or
              None (cuda for CUDA tensors where a driver works, else the emulator);
            - ``fallback``: ``"eager"`` (the default: what tileopt cannot compile runs in
              PyTorch) or ``"error"``/None (the graph is compiled whole; tileopt's error is
              raised);
            - ``report``: a :class:`tileopt.compiler.fallback.FallbackReport` that each graph
              adds its specialisations to (what was compiled, the kernels compiled and taken
              from the cache, what ran in PyTorch and why); ``print(report)`` shows it;
            - ``num_warps``, ``num_stages``, ``tma``, ``warp_specialize``, ``opt_level``,
              ``fp_fusion``, ``maxnreg``: passed to every kernel's compilation, as
              ``tileopt.compile``'s (unset: its defaults).
        mode: ``torch.compile``'s mode; tileopt has one way of compiling and ignores it.

    Raises:
        OptionError: an unknown option (the message lists the known keys) or a wrong value.
    """
    try:
        from tileopt.compiler import fallback as _fallback
    except ImportError as e:
        raise ImportError(
            f"tileopt's torch.compile backend needs tileopt's native MLIR bindings and "
            f"torch-mlir ({e}); build them with `make build`"
        ) from e
    settings = _fallback.check_backend_options({**(options or {}), **kwargs})
    return _fallback.PartitionedGraph(
        gm,
        target=settings["target"],
        device=settings["device"],
        fallback=settings["fallback"],
        name=_fallback.graph_name(),
        report=settings["report"],
        **{name: settings[name] for name in _fallback.BACKEND_KERNEL_OPTIONS if name in settings},
    )
