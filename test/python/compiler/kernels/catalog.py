"""The hand-written kernels of this folder and their ABIs (used by compiler and runtime tests).

Each ``.mlir`` file is a module at stage "llvm": a ``gpu.module`` whose ``gpu.func`` kernels
take their parameters exactly as docs/kernel-abi.md says a ``tile.kernel`` with the ABI below
would. Pure Python: loaded by path from the conftests.
"""

from __future__ import annotations

from pathlib import Path

from tileopt.runtime.abi import KernelParam

HERE = Path(__file__).parent
V = KernelParam.view
S = KernelParam.scalar

#: name -> (file, the kernel's ABI)
HANDWRITTEN: dict[str, tuple[str, list[KernelParam]]] = {
    "vector_add": ("vector_add.mlir", [V("x", "f32", 1), V("y", "f32", 1), V("z", "f32", 1)]),
    "scale": ("scale.mlir", [V("x", "f32", 2), V("y", "f32", 2), S("alpha", "f32")]),
    "exp_scale": ("exp.mlir", [V("x", "f32", 1), V("y", "f32", 1), S("alpha", "f32")]),
    "scale_half": ("scale_half.mlir", [V("x", "f16", 1), V("y", "f16", 1), S("alpha", "f16")]),
    # sm_90a only; its tensor map (tile.tensor_maps) is not part of the signature.
    "tma_copy": ("tma_copy.mlir", [V("x", "f16", 2), V("y", "f16", 2), S("dr", "i32"),
                                   S("dc", "i32")]),
}


def source(name: str) -> str:
    """The MLIR text of hand-written kernel ``name``."""
    return (HERE / HANDWRITTEN[name][0]).read_text()


def signature(name: str) -> list[KernelParam]:
    """The ABI of hand-written kernel ``name``."""
    return list(HANDWRITTEN[name][1])
