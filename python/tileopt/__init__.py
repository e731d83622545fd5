"""tileopt: an MLIR-based compiler from PyTorch graphs to fused NVIDIA GPU kernels.

The public surface is small: the errors below and, once built, the MLIR
bindings (``tileopt.ir``, ``tileopt.passmanager``, ``tileopt.dialects``) and
the PTX emulator (``tileopt.emulator``). Submodules are imported lazily so
that the pure-Python parts (the emulator) work without the native build.
"""

from __future__ import annotations

from tileopt.errors import (
    CompilationError,
    DeviceError,
    EmulatorError,
    TileoptError,
)

__all__ = [
    "CompilationError",
    "DeviceError",
    "EmulatorError",
    "TileoptError",
]

__version__ = "0.1.0"
