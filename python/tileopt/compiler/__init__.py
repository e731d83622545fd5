"""tileopt.compiler: the driver that turns tile modules into launchable kernels.

``compile`` runs the NVIDIA pipeline (:mod:`tileopt.compiler.nvidia`, stage by stage) and
returns a :class:`Kernel` (its code at every stage, :class:`KernelMetadata`, ``launch``);
compiled kernels and graphs are cached in memory and on disk (:mod:`tileopt.compiler.cache`).
This package needs tileopt's native MLIR bindings.
"""

from __future__ import annotations

from tileopt.compiler.graph import CompiledGraph, compile_graph
from tileopt.compiler.kernel import Kernel, KernelMetadata, compile
from tileopt.compiler.specialize import SpecializingKernel
from tileopt.compiler.tools import PTXAssemblyError
from tileopt.runtime.abi import KernelParam, TensorMapParam

__all__ = [
    "CompiledGraph",
    "Kernel",
    "KernelMetadata",
    "KernelParam",
    "PTXAssemblyError",
    "SpecializingKernel",
    "TensorMapParam",
    "compile",
    "compile_graph",
]
