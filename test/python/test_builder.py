"""The Python kernel builder makes valid tile IR that round-trips."""

from __future__ import annotations

import inspect

import pytest
from tileopt import ir
from tileopt.builder import KernelBuilder, Scalar, View
from tileopt.errors import BuilderError
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
        with pytest.raises(BuilderError, match=r"cannot broadcast shapes \(4, 8\) and \(8, 8\)"):
            _ = a + b


def test_unknown_dtype_is_reported() -> None:
    with pytest.raises(BuilderError, match="unknown View element type 'f8'"):
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
        with pytest.raises(BuilderError, match="axis 2 is out of range for a view of rank 2"):
            k.size(k.args.x, 2)
    assert kb.module.operation.verify()
    assert "memref.dim %arg0, %c1" in str(kb.module)


def test_fdiv_rounding() -> None:
    kb = KernelBuilder("d", x=View("f32", 1), y=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        x = k.load(k.args.x, [0], [128])
        k.store(k.fdiv(x, 3.0, ieee_rounding=False) + k.fdiv(x, 7.0) + x / 5.0, k.args.y, [0])
        with pytest.raises(BuilderError, match="fdiv divides floats, got i32"):
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
        with pytest.raises(BuilderError, match=r"two Python numbers \(1, 2\) have no tile type"):
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
        with pytest.raises(BuilderError, match=r"carries 1 values: end its body with"):
            with k.loop(0, 4, 1, carried=[acc0]):
                pass
        with k.loop(0, 4, 1, carried=[acc0]) as loop:
            with pytest.raises(BuilderError, match=r"takes 1 values \(one per carried value\)"):
                loop.yield_()
            with pytest.raises(BuilderError, match=r"value 0 has type tensor<8xf32>"):
                loop.yield_(k.full([8], 0.0, "f32"))
            with pytest.raises(BuilderError, match="once the loop's body is built"):
                _ = loop.results
            loop.yield_(loop.carried[0])
        with pytest.raises(BuilderError, match="must be a builder Value"):
            k.loop(0, 4, 1, carried=[0.0])  # type: ignore[list-item]
        with pytest.raises(BuilderError, match="expected an integer or index scalar"):
            k.loop(0, k.constant(4.0, "f32"))
    # The loops whose bodies failed are gone: the kernel is still valid.
    assert kb.module.operation.verify()
    assert str(kb.module).count("scf.for") == 1


# ---------------------------------------------------------------------------------------------
# mistakes are reported at the call that made them (issue 9)


def test_branch_runs_ops_where_its_condition_holds() -> None:
    kb = KernelBuilder("clip", x=View("f32", 1), y=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        x = k.load(k.args.x, [0], [16])
        with k.if_(k.args.n > 0) as store:
            k.store(x, k.args.y, [0])
        assert store.results == []
        with k.if_(k.args.n > 1, carried=[x, k.args.n]) as twice:
            twice.yield_(x + x, k.args.n * 2)
        doubled, n = twice.results
        k.store(doubled + k.cast(n, "f32"), k.args.y, [16])
    assert kb.module.operation.verify()
    text = str(kb.module)
    assert text.count("scf.if") == 2
    # Where the condition fails, the carried values are what they were.
    assert "-> (tensor<16xf32>, i32) {" in text and "} else {" in text
    with kb.context:
        assert str(ir.Module.parse(text)) == text


def test_branch_else_runs_where_the_condition_fails() -> None:
    import torch
    from tileopt.compiler import compile

    kb = KernelBuilder("sides", x=View("f32", 1), y=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        x = k.load(k.args.x, [0], [128])
        positive = k.args.n > 0
        with k.if_(positive, carried=[x]) as branch:
            branch.yield_(x * 2.0)
        with branch.else_() as other:
            other.yield_(x - 1.0)
        (picked,) = branch.results
        k.store(picked, k.args.y, [0])
        with k.if_(positive) as plain:  # no carried values: an else of its own ops
            k.store(x, k.args.y, [128])
        with plain.else_():
            k.store(x + 10.0, k.args.y, [128])
    assert kb.module.operation.verify()
    assert str(kb.module).count("} else {") == 2
    kern = compile(kb, "sm_80", num_warps=4)
    x = torch.randn(128)
    for n, first, second in [(3, x * 2.0, x), (0, x - 1.0, x + 10.0)]:
        y = torch.zeros(256)
        kern.launch((1,), x, y, n)
        assert torch.equal(y, torch.cat([first, second]))


def test_branch_else_misuse_is_reported() -> None:
    kb = KernelBuilder("bad_else", x=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        acc0 = k.full([16], 0.0, "f32")
        branch = k.if_(k.args.n > 0, carried=[acc0])
        with pytest.raises(BuilderError, match="comes after the branch's own body is built"):
            branch.else_()
        with branch:
            branch.yield_(acc0 + 1.0)
        with pytest.raises(BuilderError, match=r"the else carries 1 values: end its body"):
            with branch.else_():
                pass
        # The branch whose else failed is gone; a whole one reports its results once built.
        kept = k.if_(k.args.n > 1, carried=[acc0])
        with kept:
            kept.yield_(acc0 + 2.0)
        other = kept.else_()
        with pytest.raises(BuilderError, match="a branch has one else body"):
            kept.else_()
        with pytest.raises(BuilderError, match="once the branch's else body is built"):
            _ = kept.results
        with other:
            other.yield_(acc0 - 2.0)
        assert len(kept.results) == 1
        # An else asked for but never built changes nothing.
        with k.if_(k.args.n > 2) as plain:
            pass
        plain.else_()
    assert kb.module.operation.verify()
    assert str(kb.module).count("scf.if") == 2
    assert str(kb.module).count("} else {") == 1


def test_branch_misuse_is_reported() -> None:
    kb = KernelBuilder("bad", x=View("f32", 1), n=Scalar("i32"))
    with kb as k:
        acc0 = k.full([16], 0.0, "f32")
        with pytest.raises(BuilderError, match=r"the branch carries 1 values: end its body"):
            with k.if_(k.args.n > 0, carried=[acc0]):
                pass
        with k.if_(k.args.n > 0, carried=[acc0]) as branch:
            with pytest.raises(BuilderError, match=r"branch.yield_ takes 1 values"):
                branch.yield_()
            with pytest.raises(BuilderError, match=r"value 0 has type tensor<8xf32>"):
                branch.yield_(k.full([8], 0.0, "f32"))
            with pytest.raises(BuilderError, match="once the branch's body is built"):
                _ = branch.results
            branch.yield_(acc0 + 1.0)
        with pytest.raises(BuilderError, match=r"must be a scalar boolean \(i1\), got i32"):
            k.if_(k.args.n)
        with pytest.raises(BuilderError, match=r"must be a scalar boolean \(i1\), got tensor"):
            k.if_(acc0 > 0.0)
        with pytest.raises(BuilderError, match="must be a builder Value"):
            k.if_(k.args.n > 0, carried=[0.0])  # type: ignore[list-item]
    # The branches whose bodies failed are gone: the kernel is still valid.
    assert kb.module.operation.verify()
    assert str(kb.module).count("scf.if") == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: View("f8", 2), r"unknown View element type 'f8'; expected one of i1, i8"),
        (lambda: View("index", 1), r"unknown View element type 'index'"),
        (lambda: View("f32", -1), r"View rank must be an int >= 0, got -1"),
        (lambda: View("f32", "2"), r"View rank must be an int >= 0, got '2'"),
        (lambda: View("f32", 2, shape=(3,)), r"View shape must be 2 sizes >= 0"),
        (lambda: View("f32", 1, contiguous="yes"), r"View contiguous must be True or False"),
        (lambda: Scalar("f8"), r"unknown Scalar type 'f8'"),
        (lambda: KernelBuilder("k", x=5), r"argument 'x' must be a View, a Scalar or an MLIR type"),
        (lambda: KernelBuilder("not a name"), r"the kernel's name must be an identifier"),
    ],
)
def test_bad_kernel_arguments(make, message) -> None:
    with pytest.raises(BuilderError, match=message):
        make()


def test_rank_0_views_are_valid() -> None:
    kb = KernelBuilder("r0", x=View("f32", 0), y=View("f32", 1))
    assert kb.module.operation.verify()
    assert "memref<f32, strided<[], offset: ?>>" in str(kb.module)


def mistakes(k: KernelBuilder) -> list[tuple[object, str]]:
    """(a call that is a mistake, what its BuilderError says) in a kernel of x: f32 (2-D),
    n: i32, m: i1 (1-D)."""
    a = k.load(k.args.x, [0, 0], [4, 8])
    b = k.load(k.args.x, [0, 0], [8, 8])
    i = k.iota(8)
    return [
        (lambda: k.load(k.args.x, [0, 0], [0, 8]), r"KernelBuilder.load: load shape must be a "
                                                   r"list of positive powers of two .*\[0, 8\]"),
        (lambda: k.load(k.args.x, [0, 0], [-4, 8]), r"load shape must be .*\[-4, 8\]"),
        (lambda: k.load(k.args.x, [0, 0], [6, 8]), r"load shape must be .*\[6, 8\]"),
        (lambda: k.load(k.args.x, [0, 0], [2.0, 8]), r"load shape must be"),
        (lambda: k.load(k.args.x, [0], [4, 8]), r"offsets must be 2 ints or integer scalars"),
        (lambda: k.load(k.args.x, [0.5, 0], [4, 8]), r"expected an int or an integer scalar"),
        (lambda: k.load(a, [0, 0], [4, 8]), r"view must be a View argument"),
        (lambda: k.load(k.args.n, [0, 0], [4, 8], padding=float("-inf")),
         r"view must be a View argument"),
        (lambda: k.load(k.args.x, [0, 0], [4, 8], padding="zero"),
         r"padding must be a Python number"),
        (lambda: k.load(k.args.m, [0], [8], padding=2), r"padding 2 does not fit in i1"),
        (lambda: k.full([6], 0.0, "f32"), r"KernelBuilder.full: splat shape must be"),
        (lambda: k.full([8], 0.0, "f8"), r"unknown element type 'f8'"),
        (lambda: k.iota(5), r"iota shape must be .*\[5\]"),
        (lambda: k.iota(0), r"iota shape must be"),
        (lambda: k.constant(1000, "i8"), r"constant 1000 does not fit in i8"),
        (lambda: k.constant(1.5, "i32"), r"constant 1.5 is not an integer"),
        (lambda: k.constant(float("nan"), "i32"), r"constant nan is not an integer"),
        (lambda: k.sum(a, axis=5), r"KernelBuilder.sum: axis 5 is out of range for rank 2: "
                                   r"expected an int in \[-2, 1\]"),
        (lambda: k.max(a, axis=None), r"axis None is out of range"),
        (lambda: k.argmax(a, axis=2), r"axis 2 is out of range for rank 2"),
        (lambda: k.sum(k.args.n, axis=0), r"operand 0 must be a tile, got a scalar of type i32"),
        (lambda: k.reduce([a], 0, lambda x, y: x + y), r"combine must return a list of 1 scalar"),
        (lambda: k.reduce([a, b], 0, lambda *v: v[:2]), r"'tile.reduce' op expected operands of "
                                                       r"one shape"),
        (lambda: k.expand_dims(a, 5), r"axis 5 is out of range for rank 3"),
        (lambda: k.dot(a, a), r"KernelBuilder.dot: 'tile.dot' op expected K of lhs \(8\) to "
                              r"equal K of rhs \(4\)"),
        (lambda: k.dot(i, i), r"dot takes 2-D tiles, got lhs \(8,\) and rhs \(8,\)"),
        (lambda: k.dot(a, k.trans(a), k.full([8, 8], 0.0, "f32")),
         r"'tile.dot' op expected acc of shape 4x4"),
        (lambda: a + b, r"operator \+: cannot broadcast shapes \(4, 8\) and \(8, 8\)"),
        (lambda: k.broadcast(a, [8, 16]), r"KernelBuilder.broadcast: 'tile.broadcast' op"),
        (lambda: k.broadcast(a, [4, 8, 2]), r"'tile.broadcast' op expected source rank"),
        (lambda: k.reshape(a, [16]), r"KernelBuilder.reshape: 'tile.reshape' op expected the "
                                     r"same number of elements"),
        (lambda: k.permute(a, [0, 0]), r"permutation \[0, 0\] is not a permutation of \[0, 1\] "
                                       r"\(x has shape \(4, 8\)\)"),
        (lambda: k.permute(a, [0, 1, 2]), r"is not a permutation of \[0, 1\]"),
        (lambda: k.trans(i), r"KernelBuilder.trans: permutation \[1, 0\] is not a permutation "
                             r"of \[0\]"),
        (lambda: a + k.cast(i, "f32"), r"cannot broadcast shapes \(4, 8\) and \(8,\)"),
        (lambda: a + k.args.n, r"operator \+: operands of different element types \(f32 \(4, 8\) "
                               r"and i32 scalar\): cast one with k.cast"),
        (lambda: a + "1", r"operand must be a Value or a Python number, got '1'"),
        (lambda: a & a, r"operator &: bitwise/logical operators take integers or booleans"),
        (lambda: k.exp(i), r"KernelBuilder.exp: exp takes floats, got i32"),
        (lambda: k.where(a, a, a), r"the condition must be i1 \(a comparison\), got f32"),
        (lambda: k.where(k.args.m, 1.0, 0.0), r"where's condition is a view \(memref<\?xi1"),
        (lambda: a + k.args.x, r"operand is a view .*: read a tile of it with k.load"),
        (lambda: k.where(k.load(k.args.m, [0], [8]), 1.0, 0.0) + b, r"cannot broadcast shapes"),
        (lambda: k.load(k.args.m, [0], [8]) + 1.0 - k.load(k.args.m, [0], [8]),
         r"operands of different element types \(f32 \(8,\) and i1 \(8,\)\)"),
        (lambda: k.cast(a, "f8"), r"unknown element type 'f8'"),
        (lambda: k.cast([1], "f32"), r"cast operand must be a tile or scalar Value"),
        (lambda: k.store([1.0], k.args.x, [0, 0]), r"stored value must be a tile or scalar"),
        (lambda: k.store(a, k.args.x, [0]), r"offsets must be 2 ints"),
        (lambda: k.store(k.args.n, k.args.x, [0, 0]), r"stored value is a scalar \(i32\), the "
                                                      r"view has rank 2"),
        (lambda: k.splat(a, [4, 8]), r"splat takes a scalar, got a tile of shape \(4, 8\)"),
        (lambda: k.program_id(3), r"dim 3 is out of range for rank 3"),
        (lambda: k.size(k.args.x, "0"), r"axis '0' is out of range for a view of rank 2"),
        (lambda: k.loop(0, 4, carried=a), r"carried must be a list of Values"),
        (lambda: k.loop(0.0, 4), r"expected an int or an integer scalar Value, got 0.0"),
        (lambda: k.maximum(1, 2), r"two Python numbers \(1, 2\) have no tile type"),
        (lambda: 0 < k.args.n < 5, r"a Value \(i1\) has no Python truth value"),
        (lambda: not k.args.n, r"a Value \(i32\) has no Python truth value"),
        (lambda: k.load(k.args.m, [0], [8]) + k.load(k.args.m, [0], [8]),
         r"no arithmetic on booleans \(i1\)"),
    ]


def test_builder_mistakes_raise_at_the_call() -> None:
    kb = KernelBuilder("bad", x=View("f32", 2), n=Scalar("i32"), m=View("i1", 1))
    with kb as k:
        for call, message in mistakes(k):
            with pytest.raises(BuilderError, match=message):
                call()
        other = KernelBuilder("other", y=View("f32", 1))
        with pytest.raises(BuilderError, match=r"view is a Value of another KernelBuilder"):
            k.load(other.args.y, [0], [8])
    # The ops that failed are gone: the kernel is still valid IR.
    assert kb.module.operation.verify()
    with pytest.raises(BuilderError, match=r"KernelBuilder.iota: ops are built inside `with kb "
                                           r"as k:`"):
        kb.iota(8)
    with pytest.raises(BuilderError, match=r"operator \*: ops are built inside"):
        _ = kb.args.x * 2.0


def test_negative_axes_count_from_the_end() -> None:
    kb = KernelBuilder("neg", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        x = k.load(k.args.x, [0, 0], [4, 8])
        assert k.sum(x, axis=-1).shape == (4,) and k.max(x, axis=-2).shape == (8,)
        assert k.sum(x, axis=-1, keepdims=True).shape == (4, 1)
        assert k.expand_dims(x, -1).shape == (4, 8, 1)
        assert k.argmax(x, axis=-1)[1].shape == (4,)
    assert kb.module.operation.verify()


def test_ops_carry_the_callers_location() -> None:
    kb = KernelBuilder("loc", x=View("f32", 1))
    with kb as k:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        y = k.exp(k.load(k.args.x, [0], [64]))
        k.store(y + 1.0, k.args.x, [0])
    text = kb.module.operation.get_asm(enable_debug_info=True)
    assert f'loc("{__file__}":{line}:13)' in text  # k.exp(...) starts at column 13
    assert f'loc("{__file__}":{line}:19)' in text  # k.load(...)
    assert f'loc("{__file__}":{line + 1}:17)' in text  # y + 1.0
    body = text.split("tile.kernel")[1].split("} loc(")[0]
    assert all("loc(#loc" in line for line in body.splitlines()[1:] if line.strip())
