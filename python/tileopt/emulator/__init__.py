"""tileopt.emulator: run PTX on the CPU with numpy, bounds-checked and counted.

    import tileopt.emulator as emu
    mod = emu.load_ptx(ptx_text)          # every instruction checked here
    stats = mod.launch("kernel", grid=(g, 1, 1), block=(256, 1, 1), args=[x, y, n])

An instruction the module's ``.target`` does not allow (``wgmma`` outside ``sm_90a``,
``elect`` before ``sm_90``), which ptxas would refuse, fails the load
(:mod:`tileopt.emulator.targets`), as one the emulator does not implement does.

All CTAs of a launch execute together (registers are numpy arrays over the threads of
the grid, in chunks of about 64K threads), warps in lockstep with per-thread masks: the
threads with the lowest PC run first, so divergent paths reconverge; barriers and
``.sync`` warp instructions wait for the threads they name; a loop that polls memory
yields to the threads it waits for. Every global and shared access is checked against
the launch's buffers and the CTA's shared memory (:class:`MemoryAccessError`), and
shared-memory races between warps of a CTA (a missing ``bar.sync``) raise
:class:`SharedRaceError` unless ``launch(..., shared_checks="count")``, as global-memory races
between warps of a CTA raise :class:`GlobalRaceError` (a load of what another warp stored, a
store that changes it, with no barrier between) unless ``global_checks="count"``.
:class:`~tileopt.emulator.stats.LaunchStats` holds the counters (instructions by class,
global requests/bytes/sectors, bank conflicts, barriers).

Asynchronous copies are asynchronous (:mod:`tileopt.emulator.asynccopy`): ``cp.async``
lands at the executing thread's ``cp.async.wait_group``/``wait_all`` (commit groups per
thread), bulk copies and TMA loads (:mod:`tileopt.emulator.tma`, ``cp.async.bulk{.tensor}``,
1-5d boxes, 32/64/128B swizzle, zero or NaN out-of-bounds fill) land when a thread waits on
their mbarrier, bulk/TMA stores read shared memory at issue and write global memory when
their bulk group completes. Until then their shared bytes are marked: reading or writing
them is a shared-memory race, whatever barriers come in between. mbarriers
(:mod:`tileopt.emulator.mbarrier`) have arrival and transaction counts and phases as in the
PTX ISA; a warp spinning on ``mbarrier.try_wait`` yields to the other warps (warp-specialised
producers and consumers), and when every thread that could run spins on waits that can never
succeed the launch stops with a deadlock error naming the wait. Tensor maps are passed as
:class:`tileopt.runtime.tma.TensorMap` arguments (by value or behind a pointer) or built on
the device with ``tensormap.replace``.

Thread-block clusters (the kernel's ``.reqnctapercluster`` or ``launch(..., cluster=...)``)
run whole in one chunk: ``%cluster_*`` registers and ``barrier.cluster`` work across their
CTAs, and so does distributed shared memory: ``mapa`` and ``getctarank``, and ``ld``, ``st``,
``atom``, ``red`` and ``mbarrier`` on another CTA's shared memory through ``.shared::cluster``
or generic addresses (those accesses are not race-checked; bulk and multicast copies into
another CTA are refused). Device-side ``printf``
(``vprintf``) prints each calling thread's line, and a failed ``assert`` (``__assertfail``)
stops the launch with :class:`DeviceAssertError` (:mod:`tileopt.emulator.devicelib`).

Pure Python + numpy: no GPU, no native tileopt build, and torch only when tensors are
passed. ``python -m tileopt.emulator kernel.ptx`` lists a module's kernels.
"""

from __future__ import annotations

from tileopt.emulator.errors import (
    DeviceAssertError,
    EmulatorError,
    GlobalRaceError,
    LaunchError,
    MemoryAccessError,
    PTXLoadError,
    SharedRaceError,
    UnsupportedInstructionError,
)
from tileopt.emulator.module import Module, Pointer, load_ptx
from tileopt.emulator.stats import LaunchStats

__all__ = [
    "DeviceAssertError",
    "EmulatorError",
    "LaunchError",
    "LaunchStats",
    "MemoryAccessError",
    "Module",
    "PTXLoadError",
    "Pointer",
    "GlobalRaceError",
    "SharedRaceError",
    "UnsupportedInstructionError",
    "load_ptx",
]
