"""tileopt's own MLIR Python bindings: dialects, parsing, passes, errors."""

from __future__ import annotations

import pytest
from tileopt import ir
from tileopt.dialects import arith, func, gpu, linalg, llvm, math, memref, nvvm, scf, tensor, tile
from tileopt.passmanager import PassManager

KERNEL = """
tile.kernel @scale(%x: memref<?xf32, strided<[?], offset: ?>>, %s: f32) {
  %pid = tile.program_id {dim = 0}
  %c128 = arith.constant 128 : index
  %off = arith.muli %pid, %c128 : index
  %t = tile.load %x[%off] : memref<?xf32, strided<[?], offset: ?>> -> tensor<128xf32>
  %v = tile.splat %s : f32 -> tensor<128xf32>
  %r = arith.mulf %t, %v : tensor<128xf32>
  tile.store %r, %x[%off] : tensor<128xf32>, memref<?xf32, strided<[?], offset: ?>>
  tile.return
}
"""


def test_every_context_knows_tile_and_upstream_dialects() -> None:
    for _ in range(2):
        with ir.Context() as ctx:
            for name in (
                "tile",
                "arith",
                "math",
                "scf",
                "memref",
                "func",
                "gpu",
                "nvvm",
                "llvm",
                "linalg",
                "tensor",
            ):
                assert ctx.dialects[name] is not None


def test_upstream_dialect_modules_import() -> None:
    modules = (arith, func, gpu, linalg, llvm, math, memref, nvvm, scf, tensor)
    assert all(m.__name__.startswith("tileopt.dialects.") for m in modules)


def test_parse_print_reparse_round_trip() -> None:
    with ir.Context():
        module = ir.Module.parse(KERNEL)
        assert module.operation.verify()
        text = str(module)
        again = ir.Module.parse(text)
        assert str(again) == text
        ops = [op.operation.name for op in module.body.operations[0].regions[0].blocks[0]]
        assert ops[:2] == ["tile.program_id", "arith.constant"]
        assert ops[-1] == "tile.return"


def test_generated_op_classes() -> None:
    with ir.Context():
        module = ir.Module.parse(KERNEL)
        kernel = module.body.operations[0]
        assert isinstance(kernel, tile.KernelOp)
        assert kernel.sym_name.value == "scale"
        load = next(op for op in kernel.body.blocks[0] if isinstance(op, tile.LoadOp))
        assert str(load.result.type) == "tensor<128xf32>"
        assert load.padding is None


def test_pass_manager_runs_canonicalize() -> None:
    with ir.Context():
        module = ir.Module.parse(
            """
            tile.kernel @k(%x: memref<?xf32>, %s: f32) {
              %c0 = arith.constant 0 : index
              %v = tile.splat %s : f32 -> tensor<1x16xf32>
              %b = tile.broadcast %v : tensor<1x16xf32> -> tensor<8x16xf32>
              %r = tile.reshape %b : tensor<8x16xf32> -> tensor<128xf32>
              tile.store %r, %x[%c0] : tensor<128xf32>, memref<?xf32>
              tile.return
            }
            """
        )
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        text = str(module)
        assert "tile.splat %arg1 : f32 -> tensor<128xf32>" in text
        assert "tile.broadcast" not in text and "tile.reshape" not in text


def test_invalid_ir_raises_with_the_verifier_message() -> None:
    bad = KERNEL.replace("tensor<128xf32>", "tensor<100xf32>")
    with ir.Context():
        with pytest.raises(ir.MLIRError, match="must be tile .* but got 'tensor<100xf32>'"):
            ir.Module.parse(bad)
        with pytest.raises(
            ir.MLIRError, match="expected K of lhs \\(32\\) to equal K of rhs \\(16\\)"
        ):
            ir.Module.parse(
                """
                tile.kernel @k(%s: f16) {
                  %a = tile.splat %s : f16 -> tensor<16x32xf16>
                  %b = tile.splat %s : f16 -> tensor<16x16xf16>
                  %c = arith.constant dense<0.0> : tensor<16x16xf32>
                  %d = tile.dot %a, %b, %c
                      : tensor<16x32xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
                  tile.return
                }
                """
            )


def test_syntax_error_raises() -> None:
    with ir.Context():
        with pytest.raises(ir.MLIRError, match="custom op 'tile.nonsense' is unknown"):
            ir.Module.parse("tile.kernel @k() {\n %0 = tile.nonsense\n tile.return\n}")


def test_unknown_pass_raises() -> None:
    with ir.Context():
        with pytest.raises(ValueError, match="no-such-pass"):
            PassManager.parse("builtin.module(no-such-pass)")
