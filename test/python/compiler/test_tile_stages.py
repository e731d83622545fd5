"""The tile stages of the pipeline, on kernels made with tileopt.builder.

Stage "tile" (canonicalize, cse) and the ABI derived from ``tile.kernel`` need only the
bindings; the whole path from tile IR to the emulator needs the tile passes (layout assignment
and ``convert-tile-to-nvvm``) and skips, naming them, where they are not registered.
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
    assert [p.ptx_param_bits() for p in params] == [[64] * 3] * 3 + [[32]]
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


def test_several_tile_kernels_need_a_name() -> None:
    kb = vector_add("f32")
    KernelBuilder("other", module=kb.module, x=View("f32", 1))
    with pytest.raises(CompilationError, match=r"2 kernels \(vector_add, other\)"):
        compile(kb.module, "sm_90")


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


def test_a_given_signature_must_match_the_tile_kernel() -> None:
    kb = vector_add("f32")
    wrong = [KernelParam.view("a", "f16", 1), KernelParam.view("b", "f32", 1),
             KernelParam.view("c", "f32", 1), KernelParam.scalar("n", "i32")]
    with pytest.raises(CompilationError, match=r"signature \(a: view<\?xf16>.*does not match"):
        compile(kb, "sm_90", signature=wrong)


def softmax(block: int) -> KernelBuilder:
    """Row softmax where a row fits one tile of ``block`` columns."""
    kb = KernelBuilder("softmax", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, block], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        k.store(e / k.sum(e, axis=1, keepdims=True), k.args.y, [row, 0])
    return kb


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (37, 1000), (5, 1024)])
def test_softmax_shared_memory_in_the_metadata(rows: int, cols: int) -> None:
    torch = pytest.importorskip("torch")
    k = compile(softmax(1024), "sm_80", num_warps=4)
    # The cross-warp reductions go through shared memory, declared in the PTX.
    assert k.metadata.shared_bytes > 0
    assert k.metadata.shared_bytes == nvidia.shared_bytes(k.asm["ptx"], "softmax")
    assert "tile.kernel @softmax" in k.asm["tile"] and "#tile.blocked" in k.asm["tilegpu"]
    x = torch.randn(cols, rows).t()  # a transposed view: strides (1, rows)
    y = torch.full((rows, cols), float("nan"))
    k.launch(rows, x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))


def test_one_kernel_of_a_module_with_several() -> None:
    torch = pytest.importorskip("torch")
    kb = softmax(256)
    add = KernelBuilder("add_one", module=kb.module, x=View("f32", 1), y=View("f32", 1))
    with add as k:
        start = k.program_id(0) * 512
        k.store(k.load(k.args.x, [start], [512]) + 1.0, k.args.y, [start])
    kern = compile(kb.module, "sm_90", kernel="add_one", num_warps=2)
    assert ".entry add_one(" in kern.asm["ptx"] and ".entry softmax(" not in kern.asm["ptx"]
    assert "tile.kernel @softmax" in kern.asm["tile"]  # earlier stages keep the whole module
    assert kern.metadata.block == (64, 1, 1)
    assert [p.name for p in kern.metadata.abi] == ["arg0", "arg1"]
    x = torch.arange(1000.0)
    y = torch.zeros(1000)
    kern.launch(2, x, y)
    torch.testing.assert_close(y, x + 1)



def test_static_memref_types_reach_the_abi() -> None:
    with ir.Context():
        t = ir.Type.parse("memref<128x?xf16, strided<[?, 1], offset: ?>>")
        kb = KernelBuilder("k", x=t, y=View("f32", 1))
    (op,) = nvidia.tile_kernels(kb.module)
    x, y = nvidia.tile_signature(op, ["x", "y"])
    assert str(x) == "x: view<128x?xf16, strides [?, 1]>"
    assert y == KernelParam.view("y", "f32", 1)


def test_contiguous_views() -> None:
    torch = pytest.importorskip("torch")
    from tileopt.runtime import ArgumentError

    n = 3 * BLOCK + 5
    x, y, z = torch.randn(n), torch.randn(n), torch.zeros(n)
    k = compile(vector_add("f32"), "sm_90", contiguous=True)
    assert [str(p) for p in k.metadata.abi] == [
        "x: view<?xf32, strides [1]>", "y: view<?xf32, strides [1]>",
        "z: view<?xf32, strides [1]>", "n: i32"]
    assert "strided<[1], offset: ?>" in k.asm["tile"]
    assert "ld.global.v4" in k.asm["ptx"] and "st.global.v4" in k.asm["ptx"]
    stats = k.launch((n + BLOCK - 1) // BLOCK, x, y, z, n)
    torch.testing.assert_close(z, x + y, rtol=0, atol=0)
    minimum = 3 * (n * 4 // 32 + 1)
    assert stats.global_load_sectors + stats.global_store_sectors <= 1.1 * minimum
    # The launcher holds the kernel to its static inner stride.
    with pytest.raises(ArgumentError, match=r"argument 0 \(x: view<\?xf32, strides \[1\]>\) has "
                                            r"static stride 1 in dimension 0, got strides \(2,\)"):
        k.launch(1, torch.randn(2 * n)[::2], y, torch.zeros(n), n)


def test_contiguous_by_name_and_its_errors() -> None:
    k = vector_add("f16")
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(str(k.module))
        (op,) = nvidia.tile_kernels(module)
        nvidia.make_contiguous(op, [1])
        params = nvidia.tile_signature(op, ["x", "y", "z", "n"])
        with pytest.raises(CompilationError, match="argument 3 .* is not a view"):
            nvidia.make_contiguous(op, [3])
    assert [p.strides for p in params] == [None, (1,), None, None]
    with pytest.raises(CompilationError, match="contiguous= names 'w', but the kernel's arguments"):
        compile(k, "sm_90", contiguous=["w"])
    with pytest.raises(CompilationError, match="contiguous=.* need start='tile'"):
        compile(k, "sm_90", contiguous=True, start="tilegpu")


def test_libdevice_is_linked_only_when_called(tmp_path) -> None:
    bc = tmp_path / "libdevice.10.bc"
    bc.write_bytes(b"")
    opts = nvidia.Options(target="sm_80", libdevice=str(bc))
    assert f'link = ["{bc}"]' in opts.nvvm_target("+ptx80")
    assert "link" not in opts.nvvm_target("+ptx80", link_libdevice=False)
    # A kernel that calls libdevice (erf) gets it linked: no external function is left.
    from tileopt import kernels

    gelu = compile(kernels.bias_gelu("f32"), "sm_80")
    assert "__nv_erff" in gelu.asm["llvm"] and ".extern .func" not in gelu.asm["ptx"]
    assert "__nv_" not in compile(vector_add("f32"), "sm_80").asm["llvm"]


def test_compilations_share_a_context_for_a_while(monkeypatch) -> None:
    from tileopt.compiler import kernel as kernel_module

    contexts = kernel_module._Contexts()
    monkeypatch.setattr(kernel_module, "_contexts", contexts)
    monkeypatch.setattr(kernel_module._Contexts, "LIFETIME", 2)
    monkeypatch.setenv("TILEOPT_ALWAYS_COMPILE", "1")  # every compile takes a context
    first = compile(vector_add("f32"), "sm_80")
    one = contexts.context
    second = compile(vector_add("f16"), "sm_80")
    assert contexts.context is one
    compile(vector_add("f32"), "sm_80")
    assert contexts.context is not one  # replaced after LIFETIME compilations
    # Kernels keep their own text: nothing of one compilation leaks into another.
    assert "f16" not in first.asm["tile"] and "f16" in second.asm["tile"]
    assert first.asm["ptx"] == compile(vector_add("f32"), "sm_80").asm["ptx"]
