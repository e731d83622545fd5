"""A tile kernel compiled at launch for what its arguments promise (``compile(...,
specialize=True)``), as Triton's JIT specialises a kernel on its arguments.

Without promises a kernel handles every array: unaligned rows at run time, 64-bit indices,
a bounds check per access. That costs registers: ``kernels.matmul("f16")`` takes 252
registers on sm_80 and copies no operand asynchronously, where the same kernel with
``aligned=`` takes 80 and runs a 3-stage ``cp.async`` pipeline. A
:class:`SpecializingKernel` looks at each launch's arrays instead, finds the promises they
keep (:meth:`SpecializingKernel.specialization`), and launches the kernel compiled with
exactly those, compiling it on first use. The promises are the launchers' own checks
(:func:`tileopt.runtime.abi.check_view`), so a variant never rejects the arrays it was
chosen for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tileopt.runtime.abi import ArgumentError, KernelParam, check_args, check_view, is_torch
from tileopt.runtime.kernel import Kernel

#: The size divisor and the byte alignment a launch checks for, as Triton's JIT does.
DIVISOR = 16

#: One view's promises: contiguous, aligned, per-dimension size divisors, 32-bit indices.
ViewPromises = tuple[bool, bool, tuple[int, ...], bool]


def _keeps(i: int, p: KernelParam, a: Any) -> bool:
    """Whether the array ``a`` passes the launch checks of the view ``p``."""
    try:
        check_view(i, p, a)
    except ArgumentError:
        return False
    return True


def view_promises(i: int, p: KernelParam, a: Any) -> ViewPromises:
    """The promises the array ``a`` (argument ``i``, already checked against ``p``) keeps:
    a unit inner stride (where the kernel does not know it), 16-byte alignment of its
    address and of the strides beside that unit one, sizes that are multiples of 16 (per
    dimension), and element offsets below 2**31. Each is checked with the ones before it,
    as the variant's launch will."""
    inner_dynamic = p.strides is None or p.strides[-1] is None
    contiguous = False
    if inner_dynamic:
        unit = replace(p, strides=(*(p.strides or (None,) * p.rank)[:-1], 1))
        contiguous = _keeps(i, unit, a)
        if contiguous:
            p = unit
    aligned = _keeps(i, replace(p, divisibility=DIVISOR), a)
    if aligned:
        p = replace(p, divisibility=DIVISOR)
    divisors = tuple(DIVISOR if int(n) % DIVISOR == 0 else 1 for n in a.shape)
    if any(d > 1 for d in divisors):
        p = replace(p, size_divisibility=divisors)
    int32 = _keeps(i, replace(p, index_bitwidth=32), a)
    return contiguous, aligned, divisors, int32


#: How many argument layouts a SpecializingKernel remembers (then it forgets them all).
_MAX_SEEN = 4096


def _layout(a: Any) -> Any:
    """What the promises of the argument ``a`` depend on: a tensor's or an array's dtype,
    shape, strides and address modulo 16; for anything else, its type."""
    if is_torch(a):
        return ("torch", a.dtype, a.shape, a.stride(), a.data_ptr() % DIVISOR)
    if isinstance(a, np.ndarray):
        return ("numpy", a.dtype, a.shape, a.strides, a.ctypes.data % DIVISOR)
    return type(a)


class SpecializingKernel:
    """A tile kernel that each launch compiles (once) for the promises its arrays keep.

    Made by ``tileopt.compile(kernel, target, specialize=True)``; launched like a
    :class:`~tileopt.runtime.kernel.Kernel`. The first launch with arrays of a new
    specialization compiles it (through the compile cache, so another process or a later
    run finds it on disk); later ones look it up by the arrays' promises.

    Attributes:
        name: the kernel's name.
        abi: its arguments without promises (what every launch is checked against first).
        kernels: the variants compiled so far, by specialization (one
            :data:`ViewPromises` per view, None per scalar).
    """

    def __init__(self, name: str, abi: Sequence[KernelParam],
                 compile_variant: Callable[..., Kernel]) -> None:
        self.name = name
        self.abi = tuple(abi)
        self.kernels: dict[tuple[ViewPromises | None, ...], Kernel] = {}
        self._compile = compile_variant
        self._seen: dict[tuple[Any, ...], Kernel] = {}

    def __repr__(self) -> str:
        return (f"<SpecializingKernel {self.name} ({', '.join(map(str, self.abi))}), "
                f"{len(self.kernels)} variants compiled>")

    def specialization(self, *args: Any) -> dict[str, Any]:
        """The promises ``args`` keep, as ``tileopt.compile``'s options (``contiguous=``,
        ``aligned=``, ``int32_indexing=``: the views' names; ``divisible_sizes=``: a
        divisor per dimension), those that no view keeps left out.

        Raises:
            ArgumentError: ``args`` do not match the kernel's arguments (named in the
                message), as a launch would.
        """
        return self._options(self._key(args))

    def kernel_for(self, *args: Any) -> Kernel:
        """The kernel compiled for the promises ``args`` keep (compiled now if it is new).

        Raises:
            ArgumentError: as :meth:`specialization`.
            CompilationError: the variant does not compile.
        """
        # Arrays of one dtype, shape, strides and address modulo 16 keep the same promises:
        # a launch like an earlier one skips the checks (the variant's launch makes them).
        seen = tuple(_layout(a) for a in args)
        kernel = self._seen.get(seen)
        if kernel is None:
            key = self._key(args)
            kernel = self.kernels.get(key)
            if kernel is None:
                kernel = self.kernels[key] = self._compile(**self._options(key))
            if len(self._seen) >= _MAX_SEEN:
                self._seen.clear()
            self._seen[seen] = kernel
        return kernel

    def launch(
        self, grid: int | Sequence[int], *args: Any, device: str = "emulator", **options: Any
    ) -> Any:
        """Runs the variant for ``args`` (:meth:`kernel_for`) over ``grid``: see
        :meth:`tileopt.runtime.kernel.Kernel.launch`."""
        return self.kernel_for(*args).launch(grid, *args, device=device, **options)

    def _key(self, args: Sequence[Any]) -> tuple[ViewPromises | None, ...]:
        check_args(self.abi, args, self.name)
        return tuple(view_promises(i, p, a) if p.kind == "view" and p.rank > 0 else None
                     for i, (p, a) in enumerate(zip(self.abi, args, strict=True)))

    def _options(self, key: tuple[ViewPromises | None, ...]) -> dict[str, Any]:
        views = [(p.name, k) for p, k in zip(self.abi, key, strict=True) if k is not None]
        options = {
            "contiguous": [n for n, k in views if k[0]],
            "aligned": [n for n, k in views if k[1]],
            "divisible_sizes": {n: k[2] for n, k in views if any(d > 1 for d in k[2])},
            "int32_indexing": [n for n, k in views if k[3]],
        }
        return {option: value for option, value in options.items() if value}
