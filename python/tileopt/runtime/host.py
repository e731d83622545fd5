"""The run time of a compiled model's host function (:mod:`tileopt.compiler.hostcode`).

The host function is Python source that allocates buffers, views tensors and launches
kernels; it needs only torch and the helpers here, not tileopt's native build. So a model
compiled on one machine runs on another from its saved kernels
(:meth:`tileopt.runtime.kernel.Kernel.save`) and its host source
(benchmarks/linear_tflops.py does that on GPU machines).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any


def div_trunc(a: int, b: int) -> int:
    """``arith.divsi``: the quotient rounded toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def rem_trunc(a: int, b: int) -> int:
    """``arith.remsi``: the remainder of :func:`div_trunc` (the sign of ``a``)."""
    return a - b * div_trunc(a, b)


def ceil_div(a: int, b: int) -> int:
    """``arith.ceildivsi``/``ceildivui``: the quotient rounded up."""
    return -(-a // b)


def contiguous(t: Any) -> Any:
    """``t`` itself when it is contiguous from the start of its storage, else a contiguous
    copy: for host arguments whose memref type has a static (identity) layout."""
    if t.is_contiguous() and t.storage_offset() == 0:
        return t
    import torch

    return t.clone(memory_format=torch.contiguous_format)


HELPERS: dict[str, Any] = {
    "div_trunc": div_trunc,
    "rem_trunc": rem_trunc,
    "ceil_div": ceil_div,
    "contiguous": contiguous,
}


def python_name(function: str) -> str:
    """The name of the ``def`` of host function ``function`` in its Python source."""
    return re.sub(r"\W", "_", function)


def bind_host_function(
    code: Any,
    function: str,
    launch: Callable[..., Any],
    empty: Callable[[tuple[int, ...], Any], Any],
    constants: Mapping[str, Any],
    device: Any = "cpu",
) -> Callable[..., tuple[Any, ...]]:
    """A host function as a Python callable, running on a device.

    Args:
        code: the host function's source, or that source compiled (``compile(source, ...)``).
        function: the host function's name (``HostProgram.function``).
        launch: ``launch(kernel_name, grid, *args)``, called for every kernel launch with a
            grid of three ints and the arguments (tensors and Python numbers).
        empty: ``empty(shape, dtype)``: a new contiguous tensor of a tuple of ints and a
            ``torch.dtype``, on the device.
        constants: the tensors of the function's ``memref.global`` constants, by name.
        device: where the constants live (they are moved there once, here).

    Returns:
        ``function(*inputs) -> tuple`` of the host function's results.
    """
    import torch

    namespace: dict[str, Any] = {
        "__name__": f"tileopt_host_{function}",
        "torch": torch,
        "launch": launch,
        "empty": empty,
        "constants": {k: v.to(device) for k, v in constants.items()},
        **HELPERS,
    }
    exec(code, namespace)
    fn: Callable[..., tuple[Any, ...]] = namespace[python_name(function)]
    return fn
