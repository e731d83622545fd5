"""tileopt: an MLIR-based compiler from PyTorch graphs to fused NVIDIA GPU kernels.

The public surface is small: the errors below and, once built, the MLIR
bindings (``tileopt.ir``, ``tileopt.passmanager``, ``tileopt.dialects``) and
the PTX emulator (``tileopt.emulator``). Submodules are imported lazily so
that the pure-Python parts (the emulator) work without the native build.
"""

from __future__ import annotations

import importlib

from tileopt.errors import (
    ArgumentError,
    BuilderError,
    CompilationError,
    DeviceError,
    EmulatorError,
    ExportError,
    OptionError,
    PTXAssemblyError,
    TileoptError,
    UnsupportedOperatorError,
)

__all__ = [
    "ArgumentError",
    "BuilderError",
    "CompilationError",
    "CompiledGraph",
    "DeviceError",
    "EmulatorError",
    "ExportError",
    "Kernel",
    "OptionError",
    "PTXAssemblyError",
    "TileoptError",
    "UnsupportedOperatorError",
    "compile",
    "explain",
]


def __getattr__(name: str) -> object:
    # `compile` and `Kernel` need the native MLIR bindings: import them on first use only,
    # so that `import tileopt` (and the emulator) work without the native build.
    if name in ("compile", "Kernel", "CompiledGraph"):
        try:
            from tileopt import compiler
        except ImportError as e:
            raise ImportError(
                f"tileopt.{name} needs tileopt's native MLIR bindings ({e}); build them with "
                f"`make build`"
            ) from e
        return getattr(compiler, name)
    if name == "explain":
        # Needs torch, torch-mlir and the native bindings: imported on first use as well.
        try:
            from tileopt.compiler import fallback
        except ImportError as e:
            raise ImportError(
                f"tileopt.explain needs tileopt's native MLIR bindings and torch ({e}); build "
                f"them with `make build`"
            ) from e
        return fallback.explain
    if name in _SUBMODULES:
        # `import tileopt` then `tileopt.kernels.matmul(...)`, as `import torch` allows
        # `torch.nn`: a subpackage loads on its first use (its own ImportError if it needs
        # what is not installed).
        return importlib.import_module(f"tileopt.{name}")
    raise AttributeError(f"module 'tileopt' has no attribute {name!r}")


#: The subpackages that ``tileopt.<name>`` imports on first use.
_SUBMODULES = ("builder", "compiler", "dynamo", "emulator", "errors", "frontend", "kernels",
               "runtime", "testing")

__version__ = "0.1.0"
