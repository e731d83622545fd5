"""Launching a compiled kernel in tileopt's PTX emulator (the "emulator" device)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tileopt.errors import ArgumentError, DeviceError, EmulatorError
from tileopt.runtime.abi import (
    KernelParam,
    TensorMapParam,
    describe_ptx_param,
    emulator_args,
)


def load(ptx: str) -> Any:
    """Loads PTX text into the emulator (a ``tileopt.emulator.Module``)."""
    import tileopt.emulator as emu

    if not hasattr(emu, "load_ptx"):
        raise DeviceError(
            "tileopt.emulator did not load (its package __init__ was not executed); "
            "reinstall tileopt (`make build`) so the editable install knows the emulator"
        )
    return emu.load_ptx(ptx)


def launch(
    module: Any,
    name: str,
    params: Sequence[KernelParam],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    shared_bytes: int = 0,
    tensor_maps: Sequence[TensorMapParam] = (),
    /,
    **options: Any,
) -> Any:
    """Runs kernel ``name`` of an emulator module over ``grid`` x ``block`` threads.

    ``args`` follow the kernel ABI (numpy arrays / CPU torch tensors for views, numbers for
    scalars); results are written back into the arrays. Returns the emulator's
    ``LaunchStats``. ``options`` go to ``Module.launch``: ``max_threads_per_chunk``,
    ``max_steps``, ``shared_checks``, ``global_checks``; any other name, or a bad value, raises
    :class:`ArgumentError`.
    ``shared_bytes`` is the dynamic shared memory (the PTX's ``.extern .shared`` array) of
    each program, ``Kernel.metadata.dynamic_shared_bytes``. ``tensor_maps``
    (``Kernel.metadata.tensor_maps``) are the kernel's TMA tensor maps: each is passed as a
    :class:`~tileopt.runtime.tma.TensorMap` over the emulated memory of its view.
    """
    from tileopt.emulator.module import LAUNCH_OPTIONS, check_launch_options

    unknown = sorted(set(options) - set(LAUNCH_OPTIONS))
    if unknown:
        raise ArgumentError(
            f"unknown emulator option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; the emulator takes {', '.join(LAUNCH_OPTIONS)}"
        )
    try:
        check_launch_options(**options)
    except EmulatorError as e:
        raise ArgumentError(f"emulator option {e}") from None
    flat = emulator_args(params, args, name, tensor_maps)
    try:
        return module.launch(name, grid=grid, block=block, args=flat, shared_bytes=shared_bytes,
                             **options)
    except EmulatorError as e:
        # The emulator names PTX parameters ("argument 8 (k_param_8, ...)"): say whose they are.
        for index in sorted({int(m) for m in re.findall(r"_param_(\d+)\b", str(e))}):
            e.add_note(describe_ptx_param(params, index, tensor_maps))
        raise
