"""Errors raised by the PTX emulator (all subclasses of :class:`tileopt.errors.EmulatorError`)."""

from __future__ import annotations

from tileopt.errors import EmulatorError

__all__ = [
    "DeviceAssertError",
    "EmulatorError",
    "GlobalRaceError",
    "LaunchError",
    "MemoryAccessError",
    "PTXLoadError",
    "SharedRaceError",
    "UnsupportedInstructionError",
]


class DeviceAssertError(EmulatorError):
    """A thread of the kernel failed a device-side assertion (``assert`` in CUDA C++, Triton's
    ``tl.device_assert``): the message names the assertion, its source line and the thread."""


class PTXLoadError(EmulatorError):
    """The PTX text could not be parsed; the message names the line."""


class UnsupportedInstructionError(PTXLoadError):
    """The PTX uses an instruction (or form of one) that the emulator does not implement.

    Raised at load time, never during a launch: the emulator refuses a kernel it
    cannot run exactly rather than giving a wrong result.
    """


class LaunchError(EmulatorError):
    """A launch was malformed: unknown kernel, wrong argument count or type, bad grid/block."""


class MemoryAccessError(EmulatorError):
    """A kernel accessed memory out of bounds or misaligned.

    The message names the kernel, the PTX line and instruction, the CTA and thread,
    the address and the nearest buffer.
    """


class SharedRaceError(EmulatorError):
    """Two warps of a CTA accessed the same shared-memory word, at least one writing, with no
    barrier in between (a missing ``bar.sync``); the message names both sides."""


class GlobalRaceError(EmulatorError):
    """A warp of a CTA read global memory that another warp of the same CTA stored, or changed
    what another warp stored, with no barrier in between (a missing ``bar.sync``: the GPU does
    not order the two); the message names both sides."""
