"""tileopt.runtime: launching compiled kernels on the "emulator" and "cuda" devices.

The kernel ABI (:mod:`tileopt.runtime.abi`, ``docs/kernel-abi.md``) is shared by both: the
emulator (:mod:`tileopt.runtime.emulator`) runs the PTX on the CPU, the CUDA launcher
(:mod:`tileopt.runtime.cuda`) loads the cubin with cuda.core. A compiled kernel
(:mod:`tileopt.runtime.kernel`) launches on either, saved to a file and loaded again where
tileopt was not built. Nothing here imports the MLIR bindings or the compiler.
"""

from __future__ import annotations

from tileopt.runtime.abi import ArgumentError, KernelParam, TensorMapParam

DEVICES = ("emulator", "cuda")

__all__ = ["DEVICES", "ArgumentError", "KernelParam", "TensorMapParam"]
