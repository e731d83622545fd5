"""The tile stages of the pipeline, on kernels made with tileopt.builder.

Stage "tile" (canonicalize, cse) and the ABI derived from ``tile.kernel`` run everywhere; the
whole path from tile IR to the emulator needs the tile passes (layout assignment and
``convert-tile-to-nvvm``) and skips, naming them, until they are registered.
"""

from __future__ import annotations

import numpy as np
import pytest
from tileopt import ir
from tileopt.compiler import KernelParam, compile, nvidia
from tileopt.errors import CompilationError

builder = pytest.importorskip("tileopt.builder")
View, Scalar, KernelBuilder = builder.View, builder.Scalar, builder.KernelBuilder

BLOCK = 1024


def vector_add(dtype: str) -> KernelBuilder:
    """z = x + y over rank-1 views, BLOCK elements per program."""
    kb = KernelBuilder("vector_add", x=View(dtype, 1), y=View(dtype, 1), z=View(dtype, 1),
                       n=Scalar("i32"))
    with kb as k:
        start = k.program_id(0) * BLOCK
        x = k.load(k.args.x, [start], [BLOCK])
        y = k.load(k.args.y, [start], [BLOCK])
        k.store(x + y, k.args.z, [start])
    return kb


def test_abi_from_the_tile_kernel_signature() -> None:
    kb = vector_add("f16")
    (op,) = nvidia.tile_kernels(kb.module)
    params = nvidia.tile_signature(op, list(vars(kb.args)))
    assert params == [KernelParam.view("x", "f16", 1), KernelParam.view("y", "f16", 1),
                      KernelParam.view("z", "f16", 1), KernelParam.scalar("n", "i32")]
    assert [p.ptx_param_bits() for p in params] == [[64] * 4] * 3 + [[32]]
    # Without names (IR text) the arguments are arg0, arg1, ...
    assert [p.name for p in nvidia.tile_signature(op)] == ["arg0", "arg1", "arg2", "arg3"]


def test_tile_stage_canonicalizes() -> None:
    kb = vector_add("f32")
    with ir.Context():
        module = ir.Module.parse(str(kb.module))
        before = str(module).count("arith.constant")
        nvidia.make_tile(module, nvidia.Options())
        after = str(module)
    assert "tile.kernel @vector_add" in after
    assert after.count("arith.constant") <= before


def test_tile_compile_stops_with_a_clear_error_without_the_tile_passes() -> None:
    with ir.Context():
        registered = True
        try:
            from tileopt import passmanager

            passmanager.PassManager.parse("builtin.module(tile-assign-layouts)")
        except ValueError:
            registered = False
    if registered:
        pytest.skip("the tile passes are registered: the end-to-end tests below run instead")
    with pytest.raises(CompilationError, match="stage tilegpu(.|\n)*tile-assign-layouts"):
        compile(vector_add("f32"), "sm_90")
    with pytest.raises(CompilationError, match="stage llvm(.|\n)*convert-tile-to-nvvm"):
        compile(vector_add("f32"), "sm_90", start="tilegpu")


def test_several_tile_kernels_need_a_name() -> None:
    kb = vector_add("f32")
    KernelBuilder("other", module=kb.module, x=View("f32", 1))
    with pytest.raises(CompilationError, match=r"2 kernels \(vector_add, other\)"):
        compile(kb.module, "sm_90")


@pytest.mark.usefixtures("require_tile_passes")
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 1000, 3 * BLOCK + 5])
def test_vector_add_from_tile_ir_in_the_emulator(dtype: str, target: str, n: int) -> None:
    torch = pytest.importorskip("torch")
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    k = compile(vector_add(dtype), target)
    assert set(k.asm) == {"tile", "tilegpu", "llvm", "ptx", "cubin"}
    assert k.metadata.spill_bytes == 0
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=gen).to(tdt)
    y = torch.randn(n, generator=gen).to(tdt)
    z = torch.zeros(n, dtype=tdt)
    k.launch((n + BLOCK - 1) // BLOCK, x, y, z, n)
    torch.testing.assert_close(z, x + y)
    assert np.isfinite(z.float().numpy()).all()
