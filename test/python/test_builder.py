"""The Python kernel builder makes valid tile IR that round-trips."""

from __future__ import annotations

import pytest
from tileopt import ir
from tileopt.builder import KernelBuilder, Scalar, View
from tileopt.passmanager import PassManager


def row_softmax(block: int = 1024) -> KernelBuilder:
    kb = KernelBuilder("softmax", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, block], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        k.store(e / k.sum(e, axis=1, keepdims=True), k.args.y, [row, 0])
    return kb


def op_names(kb: KernelBuilder) -> list[str]:
    names: list[str] = []

    def walk(op: ir.Operation) -> ir.WalkResult:
        names.append(op.name)
        return ir.WalkResult.ADVANCE

    kb.op.operation.walk(walk)
    return names


def test_softmax_verifies_prints_and_reparses() -> None:
    kb = row_softmax()
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert "tile.kernel @softmax(%arg0: memref<?x?xf32, strided<[?, ?], offset: ?>>" in text
    assert "{padding = 0xFF800000 : f32}" in text
    with kb.context:
        assert str(ir.Module.parse(text)) == text
    names = op_names(kb)
    assert names.count("tile.reduce") == 2
    assert names.count("tile.broadcast") == 2
    assert "math.exp" in names and "arith.divf" in names


def test_canonicalize_keeps_the_kernel_valid() -> None:
    kb = row_softmax(256)
    with kb.context:
        PassManager.parse("builtin.module(canonicalize,cse)").run(kb.module.operation)
    assert kb.module.operation.verify()
    # cse merges the two zero offsets.
    assert op_names(kb).count("arith.constant") == 1


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_matmul_with_bias_relu_epilogue(dtype: str) -> None:
    kb = KernelBuilder(
        "matmul",
        a=View(dtype, 2),
        b=View(dtype, 2),
        bias=View("f32", 1),
        c=View("f32", 2),
        k_size=Scalar("index"),
    )
    with kb as k:
        m = k.program_id(0) * 64
        n = k.program_id(1) * 64
        a = k.load(k.args.a, [m, 0], [64, 32])
        b = k.load(k.args.b, [0, n], [32, 64])
        acc = k.dot(a, b)
        bias = k.expand_dims(k.load(k.args.bias, [n], [64]), 0)
        k.store(k.maximum(acc + bias, 0.0), k.args.c, [m, n])
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert f"tensor<64x32x{dtype}>, tensor<32x64x{dtype}> -> tensor<64x64xf32>" in text
    assert "arith.maximumf" in text


def test_argmax_has_two_operand_reduce() -> None:
    kb = KernelBuilder("argmax", x=View("f32", 2), out=View("i32", 1))
    with kb as k:
        row = k.program_id(0) * 4
        _, idx = k.argmax(k.load(k.args.x, [row, 0], [4, 128]), axis=1)
        k.store(idx, k.args.out, [row])
    assert kb.module.operation.verify()
    assert ": tensor<4x128xf32>, tensor<4x128xi32> -> tensor<4xf32>, tensor<4xi32>" in str(
        kb.module
    )


def test_transpose_and_casts() -> None:
    kb = KernelBuilder("t", x=View("f16", 2), y=View("f32", 2))
    with kb as k:
        t = k.trans(k.cast(k.load(k.args.x, [0, 0], [32, 64]), "f32"))
        k.store(t, k.args.y, [0, 0])
    assert kb.module.operation.verify()
    assert "tensor<32x64xf32> -> tensor<64x32xf32>" in str(kb.module)


def test_shape_errors_are_reported() -> None:
    kb = KernelBuilder("bad", x=View("f32", 2))
    with kb as k:
        a = k.load(k.args.x, [0, 0], [4, 8])
        b = k.load(k.args.x, [0, 0], [8, 8])
        with pytest.raises(ValueError, match=r"cannot broadcast shapes \(4, 8\) and \(8, 8\)"):
            _ = a + b


def test_unknown_dtype_is_reported() -> None:
    with pytest.raises(ValueError, match="unknown element type 'f8'"):
        KernelBuilder("bad", x=View("f8", 1))


def test_kernels_share_a_module() -> None:
    first = KernelBuilder("first", x=View("f32", 1))
    second = KernelBuilder("second", module=first.module, x=View("f32", 1))
    with second as k:
        k.store(k.load(k.args.x, [0], [16]) * 2.0, k.args.x, [0])
    assert first.module.operation.verify()
    assert str(first.module).count("tile.kernel") == 2


def test_contiguous_view_has_static_unit_inner_stride() -> None:
    kb = KernelBuilder(
        "c", x=View("f32", 2, contiguous=True), y=View("f16", 1, contiguous=True),
        z=View("f32", 3, contiguous=True), w=View("f32", 2),
    )
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert "memref<?x?xf32, strided<[?, 1], offset: ?>>" in text
    assert "memref<?xf16, strided<[1], offset: ?>>" in text
    assert "memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>" in text
    assert "memref<?x?xf32, strided<[?, ?], offset: ?>>" in text


def test_size_reads_the_view_bounds() -> None:
    kb = KernelBuilder("s", x=View("f32", 2))
    with kb as k:
        assert str(k.size(k.args.x, 1).type) == "index"
        with pytest.raises(ValueError, match="axis 2 is out of range for a view of rank 2"):
            k.size(k.args.x, 2)
    assert kb.module.operation.verify()
    assert "memref.dim %arg0, %c1" in str(kb.module)


def test_fdiv_rounding() -> None:
    kb = KernelBuilder("d", x=View("f32", 1), y=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        x = k.load(k.args.x, [0], [128])
        k.store(k.fdiv(x, 3.0, ieee_rounding=False) + k.fdiv(x, 7.0) + x / 5.0, k.args.y, [0])
        with pytest.raises(TypeError, match="fdiv divides floats, got i32"):
            k.fdiv(k.args.n, k.args.n)
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert text.count("arith.divf") == 3
    assert text.count("fastmath<afn>") == 1


def test_where_with_two_numbers_takes_the_condition_shape() -> None:
    kb = KernelBuilder("w", x=View("f32", 1), y=View("f32", 1))
    with kb as k:
        x = k.load(k.args.x, [0], [64])
        picked = k.where(x > 0.0, 1.0, 0.0)
        assert picked.shape == (64,) and str(picked.dtype) == "f32"
        assert str(k.where(x > 0.0, 1, 2).dtype) == "i32"
        k.store(picked, k.args.y, [0])
        with pytest.raises(TypeError, match=r"two Python numbers \(1, 2\) have no tile type"):
            k.maximum(1, 2)
    assert kb.module.operation.verify()


def online_row_sum() -> KernelBuilder:
    kb = KernelBuilder("row_sum", x=View("f32", 2, contiguous=True), out=View("f32", 1))
    with kb as k:
        row = k.program_id(0)
        acc0 = k.full([1, 256], 0.0, "f32")
        count0 = k.constant(0, "i32")
        with k.loop(0, k.size(k.args.x, 1), 256, carried=[acc0, count0]) as loop:
            acc, count = loop.carried
            x = k.load(k.args.x, [row, loop.iv], [1, 256])
            loop.yield_(acc + x, count + 1)
        acc, count = loop.results
        k.store(k.sum(acc, axis=1) + k.cast(count, "f32"), k.args.out, [row])
    return kb


def test_loop_carries_tiles_and_scalars() -> None:
    kb = online_row_sum()
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert "scf.for %arg2 = %c0 to %dim step %c256 iter_args(" in text
    assert "-> (tensor<1x256xf32>, i32)" in text
    assert "scf.yield" in text
    with kb.context:
        assert str(ir.Module.parse(text)) == text
        PassManager.parse("builtin.module(canonicalize,cse)").run(kb.module.operation)
    assert kb.module.operation.verify()


def test_nested_loops_without_carried_values() -> None:
    kb = KernelBuilder("copy", x=View("f32", 2), y=View("f32", 2), n=Scalar("i32"))
    with kb as k:
        with k.loop(0, k.args.n, 16) as outer:
            with k.loop(outer.iv, k.size(k.args.x, 1), 32) as inner:
                t = k.load(k.args.x, [outer.iv, inner.iv], [16, 32])
                k.store(t, k.args.y, [outer.iv, inner.iv])
        assert outer.results == [] and inner.results == []
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert text.count("scf.for") == 2
    assert "arith.index_cast %arg2 : i32 to index" in text


def test_loop_misuse_is_reported() -> None:
    kb = KernelBuilder("bad", x=View("f32", 1))
    with kb as k:
        acc0 = k.full([16], 0.0, "f32")
        with pytest.raises(RuntimeError, match=r"carries 1 values: end its body with"):
            with k.loop(0, 4, 1, carried=[acc0]):
                pass
        with k.loop(0, 4, 1, carried=[acc0]) as loop:
            with pytest.raises(ValueError, match=r"takes 1 values \(one per carried value\)"):
                loop.yield_()
            with pytest.raises(ValueError, match=r"value 0 has type tensor<8xf32>"):
                loop.yield_(k.full([8], 0.0, "f32"))
            with pytest.raises(RuntimeError, match="once the loop's body is built"):
                _ = loop.results
            loop.yield_(loop.carried[0])
        with pytest.raises(TypeError, match="must be a builder Value"):
            k.loop(0, 4, 1, carried=[0.0])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="expected an integer or index scalar"):
            k.loop(0, k.constant(4.0, "f32"))
    # The loops whose bodies failed are gone: the kernel is still valid.
    assert kb.module.operation.verify()
    assert str(kb.module).count("scf.for") == 1
