"""Host code: hand-written tile modules (host function + small tile kernels) translated into
Python by ``tileopt.compiler.hostcode``, run on the emulator and compared with torch.

These tests need no frontend and no kernel formation pass: the tile modules are written as
kernel formation will write them (see the contract in ``tileopt/compiler/hostcode.py``).
"""

from __future__ import annotations

import re

import pytest
from tileopt.compiler import hostcode
from tileopt.compiler.graph import compile_tile_module
from tileopt.errors import CompilationError

torch = pytest.importorskip("torch")

# The views of the kernels: any sizes and strides. TYPES, ADD2 and SCALE1 are also the
# kernels of test_compiled_graph.py, which imports them from here.
TYPES = """
!v1 = memref<?xf32, strided<[?], offset: ?>>
!v2 = memref<?x?xf32, strided<[?, ?], offset: ?>>
"""

# out = x + y on 2-D views of up to 64 columns, a program per row.
ADD2 = """
  tile.kernel @add2(%x: !v2, %y: !v2, %out: !v2) attributes {tile.fused = "generic x1: add"} {
    %r = tile.program_id {dim = 0 : i64}
    %c0 = arith.constant 0 : index
    %a = tile.load %x[%r, %c0] : !v2 -> tensor<1x64xf32>
    %b = tile.load %y[%r, %c0] : !v2 -> tensor<1x64xf32>
    %s = arith.addf %a, %b : tensor<1x64xf32>
    tile.store %s, %out[%r, %c0] : tensor<1x64xf32>, !v2
    tile.return
  }
"""

# out = x * k on 1-D views, 256 elements a program; k is a scalar argument.
SCALE1 = """
  tile.kernel @scale1(%x: !v1, %out: !v1, %k: f32) {
    %p = tile.program_id {dim = 0 : i64}
    %c256 = arith.constant 256 : index
    %o = arith.muli %p, %c256 : index
    %a = tile.load %x[%o] : !v1 -> tensor<256xf32>
    %t = tile.splat %k : f32 -> tensor<256xf32>
    %m = arith.mulf %a, %t : tensor<256xf32>
    tile.store %m, %out[%o] : tensor<256xf32>, !v1
    tile.return
  }
"""

# Types of host arguments: static shape, any strides.
A4x37 = "memref<4x37xf32, strided<[?, ?], offset: ?>>"
A37x4 = "memref<37x4xf32, strided<[?, ?], offset: ?>>"
A6x37 = "memref<6x37xf32, strided<[?, ?], offset: ?>>"
A37 = "memref<37xf32, strided<[?], offset: ?>>"
A74 = "memref<74xf32, strided<[?], offset: ?>>"


def tile_module(host: str, *kernels: str, globals_: str = "") -> str:
    """A tile module: the view type aliases, globals, kernels and the host function."""
    return TYPES + "module {\n" + globals_ + "".join(kernels) + host + "\n}\n"


def run(text: str, *inputs: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], object]:
    """Compiles a tile module, runs its host function on the emulator; (outputs, program)."""
    program = compile_tile_module(text)
    outputs = program.bind("emulator")(*inputs)
    return outputs, program


def strided(*shape: int) -> torch.Tensor:
    """A tensor of ``shape`` whose strides are not contiguous and whose storage offset is
    not 0: every other element of a larger tensor, transposed twice over."""
    big = torch.randn(*shape[:-1], 2 * shape[-1] + 1)
    return big[..., 1::2]


BIAS_ADD = tile_module(f"""
  func.func @forward(%x: {A4x37}, %b: {A37}) -> memref<4x37xf32> {{
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %base, %off, %size, %stride = memref.extract_strided_metadata %b
        : {A37} -> memref<f32>, index, index, index
    %bb = memref.reinterpret_cast %base to offset: [%off], sizes: [4, 37], strides: [0, %stride]
        : memref<f32> to memref<4x37xf32, strided<[0, ?], offset: ?>>
    %out = memref.alloc() {{alignment = 64 : i64}} : memref<4x37xf32>
    tile.launch @add2 grid(%c4, %c1, %c1) (%x, %bb, %out)
        : {A4x37}, memref<4x37xf32, strided<[0, ?], offset: ?>>, memref<4x37xf32>
    return %out : memref<4x37xf32>
  }}""", ADD2)


def test_broadcast_view_with_stride_0() -> None:
    x = torch.randn(4, 37)
    b = torch.randn(37)
    (out,), program = run(BIAS_ADD, x, b)
    torch.testing.assert_close(out, x + b)
    assert "arg1.as_strided((4, 37), (0, arg1.stride(0)), arg1.storage_offset())" in \
        program.host.source


def test_inputs_with_non_contiguous_strides_and_offsets() -> None:
    x = torch.randn(37, 4).t()  # strides (1, 4)
    b = torch.randn(80)[5::2][:37]  # stride 2, storage offset 5
    assert not x.is_contiguous() and b.stride() == (2,) and b.storage_offset() == 5
    (out,), _ = run(BIAS_ADD, x, b)
    torch.testing.assert_close(out, x + b)


CHAIN = tile_module(f"""
  func.func @forward(%x: {A37x4}, %y: {A4x37}) -> (memref<4x37xf32>, memref<148xf32>) {{
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c148 = arith.constant 148 : index
    %c256 = arith.constant 256 : index
    %xt = memref.transpose %x (i, j) -> (j, i) : {A37x4} to {A4x37}
    %buf = memref.alloc() {{alignment = 64 : i64}} : memref<4x37xf32>
    tile.launch @add2 grid(%c4, %c1, %c1) (%xt, %y, %buf)
        : {A4x37}, {A4x37}, memref<4x37xf32>
    %flat = memref.collapse_shape %buf [[0, 1]] : memref<4x37xf32> into memref<148xf32>
    %out = memref.alloc() : memref<148xf32>
    %two = arith.constant 2.0 : f32
    %n = arith.ceildivsi %c148, %c256 : index
    tile.launch @scale1 grid(%n) (%flat, %out, %two) : memref<148xf32>, memref<148xf32>, f32
    return %buf, %out : memref<4x37xf32>, memref<148xf32>
  }}""", ADD2, SCALE1)


def test_transposed_view_allocation_feeding_a_second_kernel_and_two_outputs() -> None:
    x = torch.randn(37, 4)
    y = strided(4, 37)
    (s, out), program = run(CHAIN, x, y)
    torch.testing.assert_close(s, x.t() + y)
    torch.testing.assert_close(out, 2 * (x.t() + y).reshape(-1))
    assert program.host.kernel_names == ("add2", "scale1")
    assert program.host.num_outputs == 2


def test_generated_source_is_readable() -> None:
    program = compile_tile_module(CHAIN, input_descriptions=["x f32[37, 4]", "y f32[4, 37]"])
    source = program.host.source
    assert source == (
        "def forward(arg0, arg1):\n"
        "    # arg0: x f32[37, 4]\n"
        "    # arg1: y f32[4, 37]\n"
        "    view0 = arg0.permute(1, 0)\n"
        "    buf0 = empty((4, 37), torch.float32)\n"
        "    # add2: generic x1: add\n"
        '    launch("add2", (4, 1, 1), view0, arg1, buf0)\n'
        "    view1 = buf0.view(148)\n"
        "    buf1 = empty((148,), torch.float32)\n"
        "    # scale1\n"
        '    launch("scale1", (1, 1, 1), view1, buf1, 2.0)\n'
        "    return (buf0, buf1)\n"
    ), source
    assert program.stages["host"] == source
    assert set(program.stages) == {"tile", "host", "ptx:add2", "ptx:scale1"}
    assert ".entry add2" in program.stages["ptx:add2"]


VIEWS = tile_module(f"""
  func.func @forward(%x: {A6x37}) -> (memref<2x2x37xf32>, memref<37x4xf32, strided<[1, 37]>>,
                                      memref<18xf32, strided<[2], offset: 75>>) {{
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %sub = memref.subview %x[1, 0] [4, 37] [1, 1] : {A6x37} to {A4x37}
    %buf = memref.alloc() : memref<4x37xf32>
    memref.copy %sub, %buf : {A4x37} to memref<4x37xf32>
    %sum = memref.alloc() : memref<4x37xf32>
    tile.launch @add2 grid(%c4, %c1, %c1) (%buf, %sub, %sum)
        : memref<4x37xf32>, {A4x37}, memref<4x37xf32>
    %e = memref.expand_shape %sum [[0, 1], [2]] output_shape [2, 2, 37]
        : memref<4x37xf32> into memref<2x2x37xf32>
    %t = memref.transpose %sum (i, j) -> (j, i)
        : memref<4x37xf32> to memref<37x4xf32, strided<[1, 37]>>
    %row = memref.subview %sum[2, 1] [1, 18] [1, 2]
        : memref<4x37xf32> to memref<18xf32, strided<[2], offset: 75>>
    return %e, %t, %row
        : memref<2x2x37xf32>, memref<37x4xf32, strided<[1, 37]>>,
          memref<18xf32, strided<[2], offset: 75>>
  }}""", ADD2)


def test_subviews_copy_expand_and_outputs_that_are_views() -> None:
    x = strided(6, 37)
    (e, t, row), program = run(VIEWS, x)
    want = 2 * x[1:5]
    torch.testing.assert_close(e, want.reshape(2, 2, 37))
    torch.testing.assert_close(t, want.t())
    torch.testing.assert_close(row, want[2, 1:37:2])
    # The outputs are views of one buffer, as their memref types say.
    assert t.stride() == (1, 37) and row.stride() == (2,) and row.storage_offset() == 75
    assert e.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    source = program.host.source
    assert "view0 = arg0[1:5]" in source
    assert "buf0.copy_(view0)" in source
    assert "buf1.view(2, 2, 37)" in source
    assert "buf1[2, 1:36:2]" in source


ROW_AND_STRIDE = tile_module(f"""
  func.func @forward(%x: {A4x37}, %y: {A74}) -> (memref<37xf32>, memref<37xf32>) {{
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %k = arith.constant -1.5 : f32
    %row = memref.subview %x[1, 0] [1, 37] [1, 1] : {A4x37} to {A37}
    %out = memref.alloc() : memref<37xf32>
    tile.launch @scale1 grid(%c1) (%row, %out, %k) : {A37}, memref<37xf32>, f32
    %base, %off, %size, %stride = memref.extract_strided_metadata %y
        : {A74} -> memref<f32>, index, index, index
    %s2 = arith.muli %stride, %c2 : index
    %off1 = arith.addi %off, %stride : index
    %odd = memref.reinterpret_cast %base to offset: [%off1], sizes: [37], strides: [%s2]
        : memref<f32> to {A37}
    %out2 = memref.alloc() : memref<37xf32>
    tile.launch @scale1 grid(%c1) (%odd, %out2, %k) : {A37}, memref<37xf32>, f32
    return %out, %out2 : memref<37xf32>, memref<37xf32>
  }}""", SCALE1)


def test_rank_reducing_subview_and_index_arithmetic_on_strides() -> None:
    x = strided(4, 37)
    y = torch.randn(74, 3)[:, 1]  # stride 3, storage offset 1
    (a, b), program = run(ROW_AND_STRIDE, x, y)
    torch.testing.assert_close(a, -1.5 * x[1])
    torch.testing.assert_close(b, -1.5 * y[1::2])
    source = program.host.source
    assert "view0 = arg0[1]" in source
    assert "s0 = arg1.stride(0) * 2" in source
    assert "s1 = arg1.storage_offset() + arg1.stride(0)" in source


RESHAPE_INPUT = tile_module(f"""
  func.func @forward(%x: {A4x37}) -> memref<2x74xf32> {{
    %c1 = arith.constant 1 : index
    %k = arith.constant 3.0 : f32
    %flat = memref.collapse_shape %x [[0, 1]]
        : {A4x37} into memref<148xf32, strided<[?], offset: ?>>
    %out = memref.alloc() : memref<148xf32>
    tile.launch @scale1 grid(%c1) (%flat, %out, %k)
        : memref<148xf32, strided<[?], offset: ?>>, memref<148xf32>, f32
    %e = memref.expand_shape %out [[0, 1]] output_shape [2, 74]
        : memref<148xf32> into memref<2x74xf32>
    return %e : memref<2x74xf32>
  }}""", SCALE1)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_collapse_of_an_input_with_any_strides(layout: str) -> None:
    x = {"contiguous": lambda: torch.randn(4, 37),
         "transposed": lambda: torch.randn(37, 4).t(),
         "sliced": lambda: strided(4, 37)}[layout]()
    (out,), program = run(RESHAPE_INPUT, x)
    torch.testing.assert_close(out, 3 * x.reshape(2, 74))
    # An input may not be viewable as the new shape: reshape copies it then.
    assert "arg0.reshape(148)" in program.host.source
    assert "buf0.view(2, 74)" in program.host.source


IDENTITY_ARG = tile_module("""
  func.func @forward(%x: memref<4x37xf32>, %y: memref<4x37xf32>) -> memref<4x37xf32> {
    %c1 = arith.constant 1 : index
    %c37 = arith.constant 37 : index
    %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %x
        : memref<4x37xf32> -> memref<f32>, index, index, index, index, index
    %n = arith.muli %sizes#0, %strides#0 : index
    %c4 = arith.divsi %n, %c37 : index
    %out = memref.alloc() : memref<4x37xf32>
    tile.launch @add2 grid(%c4, %c1, %c1) (%x, %y, %out)
        : memref<4x37xf32>, memref<4x37xf32>, memref<4x37xf32>
    return %out : memref<4x37xf32>
  }""", ADD2)


def test_arguments_with_the_identity_layout_are_made_contiguous() -> None:
    x = strided(4, 37)
    y = torch.randn(37, 4).t()
    (out,), program = run(IDENTITY_ARG, x, y)
    torch.testing.assert_close(out, x + y)
    source = program.host.source
    assert "arg0 = contiguous(arg0)" in source and "arg1 = contiguous(arg1)" in source
    # The identity layout is static: sizes and strides fold into the grid.
    assert 'launch("add2", (4, 1, 1), arg0, arg1, buf0)' in source


def test_a_global_constant_broadcast_over_rows() -> None:
    values = [0.5 * i - 3 for i in range(37)]
    globals_ = (
        '  memref.global "private" constant @bias : memref<37xf32> = dense<['
        + ", ".join(f"{v:e}" for v in values) + "]>\n"
    )
    text = tile_module(f"""
  func.func @forward(%x: {A4x37}) -> memref<4x37xf32> {{
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %g = memref.get_global @bias : memref<37xf32>
    %bb = memref.reinterpret_cast %g to offset: [0], sizes: [4, 37], strides: [0, 1]
        : memref<37xf32> to memref<4x37xf32, strided<[0, 1]>>
    %out = memref.alloc() : memref<4x37xf32>
    tile.launch @add2 grid(%c4, %c1, %c1) (%x, %bb, %out)
        : {A4x37}, memref<4x37xf32, strided<[0, 1]>>, memref<4x37xf32>
    return %out : memref<4x37xf32>
  }}""", ADD2, globals_=globals_)
    x = torch.randn(4, 37)
    (out,), program = run(text, x)
    torch.testing.assert_close(out, x + torch.tensor(values))
    assert 'cst0 = constants["bias"]' in program.host.source
    assert 'cst0.as_strided((4, 37), (0, 1), 0)' in program.host.source


def test_globals_of_every_element_type() -> None:
    globals_ = """
  memref.global "private" constant @f16 : memref<3xf16> = dense<[1.5, -2.0, 0x7C00]>
  memref.global "private" constant @bf16 : memref<2x2xbf16> = dense<[[1.0, -2.5], [3.0, 0.125]]>
  memref.global "private" constant @bf16s : memref<3xbf16> = dense<2.5>
  memref.global "private" constant @i1 : memref<3xi1> = dense<[true, false, true]>
  memref.global "private" constant @i8 : memref<2xi8> = dense<[-3, 7]>
  memref.global "private" constant @i64s : memref<2x3xi64> = dense<5>
  memref.global "private" constant @f64 : memref<2xf64> = dense<[0.25, 1.0e100]>
  memref.global "private" @zeros : memref<2xi32> = uninitialized
  memref.global "private" constant @res : memref<2xf32> = dense_resource<blob0>
"""
    types = ["memref<3xf16>", "memref<2x2xbf16>", "memref<3xbf16>", "memref<3xi1>",
             "memref<2xi8>", "memref<2x3xi64>", "memref<2xf64>", "memref<2xi32>",
             "memref<2xf32>"]
    names = ["f16", "bf16", "bf16s", "i1", "i8", "i64s", "f64", "zeros", "res"]
    body = "".join(f"    %{n} = memref.get_global @{n} : {t}\n"
                   for n, t in zip(names, types, strict=True))
    host = (f"  func.func @forward() -> ({', '.join(types)}) {{\n{body}"
            f"    return {', '.join('%' + n for n in names)} : {', '.join(types)}\n  }}")
    # dense_resource blobs: 4 bytes of alignment, then the little-endian elements.
    resources = ('{-# dialect_resources: { builtin: { blob0: "0x04000000'
                 '0000803F00002040" } } #-}\n')
    text = tile_module(host, globals_=globals_) + resources
    program = compile_tile_module(text)
    out = program.bind("emulator")()
    want = [
        torch.tensor([1.5, -2.0, float("inf")], dtype=torch.float16),
        torch.tensor([[1.0, -2.5], [3.0, 0.125]], dtype=torch.bfloat16),
        torch.full((3,), 2.5, dtype=torch.bfloat16),
        torch.tensor([True, False, True]),
        torch.tensor([-3, 7], dtype=torch.int8),
        torch.full((2, 3), 5, dtype=torch.int64),
        torch.tensor([0.25, 1e100], dtype=torch.float64),
        torch.zeros(2, dtype=torch.int32),
        torch.tensor([1.0, 2.5]),
    ]
    for name, got, w in zip(names, out, want, strict=True):
        assert got.dtype == w.dtype, name
        torch.testing.assert_close(got, w, msg=name)
    assert program.kernels == {}


def test_allocations_of_every_element_type() -> None:
    types = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
             "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64"}
    body = "".join(f"    %{t} = memref.alloc() : memref<2x{t}>\n" for t in types)
    results = ", ".join(f"memref<2x{t}>" for t in types)
    host = (f"  func.func @forward() -> ({results}) {{\n{body}"
            f"    return {', '.join('%' + t for t in types)} : {results}\n  }}")
    program = compile_tile_module(tile_module(host))
    out = program.bind("emulator")()
    assert [o.dtype for o in out] == [getattr(torch, d) for d in types.values()]
    assert "empty((2,), torch.bfloat16)" in program.host.source


def test_index_arithmetic_folds_with_llvm_semantics() -> None:
    ops = {"divsi": (-7, 2, -3), "remsi": (-7, 2, -1), "ceildivsi": (-7, 2, -3),
           "floordivsi": (-7, 2, -4), "ceildivui": (7, 2, 4), "divui": (7, 2, 3),
           "remui": (7, 2, 1), "minsi": (-7, 2, -7), "maxui": (7, 2, 7), "subi": (2, 7, -5)}
    for name, (a, b, want) in ops.items():
        assert hostcode._BINARY[f"arith.{name}"][1](a, b) == want, name
    # Dynamic operands call the same helpers in the generated code (the run time's).
    from tileopt.runtime import host

    assert host.div_trunc(-7, 2) == -3 and host.rem_trunc(7, -2) == 1
    assert host.ceil_div(7, 2) == 4 and host.ceil_div(-7, 2) == -3


def test_empty_grid_launches_nothing() -> None:
    x = "memref<0x37xf32, strided<[?, ?], offset: ?>>"
    text = tile_module(f"""
  func.func @forward(%x: {x}) -> memref<0x37xf32> {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %out = memref.alloc() : memref<0x37xf32>
    tile.launch @add2 grid(%c0, %c1, %c1) (%x, %x, %out) : {x}, {x}, memref<0x37xf32>
    return %out : memref<0x37xf32>
  }}""", ADD2)
    (out,), _ = run(text, torch.randn(0, 37))
    assert out.shape == (0, 37)


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(("op", "line"), [
    ("memref.load", f"%v = memref.load %x[%c0] : {A37}"),
    ("arith.addf", "%v = arith.addf %f, %f : f32"),
    ("memref.alloc", "%v = memref.alloc() : memref<4xf32, strided<[2]>>"),
])
def test_an_unknown_host_op_is_a_compilation_error_naming_it(op: str, line: str) -> None:
    text = tile_module(f"""
  func.func @forward(%x: {A37}) {{
    %c0 = arith.constant 0 : index
    %f = arith.constant 1.0 : f32
    {line}
    return
  }}""")
    with pytest.raises(CompilationError, match=re.escape(f"'{op}'")):
        hostcode.translate(text)


def test_control_flow_in_the_host_function_is_an_error() -> None:
    text = tile_module(f"""
  func.func @forward(%x: {A37}) {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    scf.for %i = %c0 to %c1 step %c1 {{
    }}
    return
  }}""")
    with pytest.raises(CompilationError, match=r"'scf\.for'.*not supported in host code"):
        hostcode.translate(text)


def test_a_missing_host_function_is_an_error() -> None:
    text = tile_module("  func.func @main() {\n    return\n  }")
    with pytest.raises(CompilationError, match=r"no host function @forward.*@main"):
        hostcode.translate(text)
    assert hostcode.translate(text, "main").source == "def main():\n    return ()\n"


def test_a_static_non_contiguous_argument_layout_is_an_error() -> None:
    text = tile_module("""
  func.func @forward(%x: memref<4x4xf32, strided<[1, 4]>>) {
    return
  }""")
    with pytest.raises(CompilationError, match=r"argument 0 .*not contiguous"):
        hostcode.translate(text)


def test_a_launch_of_an_unknown_kernel_is_an_error() -> None:
    text = tile_module(f"""
  func.func @forward(%x: {A37}) {{
    %c1 = arith.constant 1 : index
    tile.launch @nothing grid(%c1) (%x) : {A37}
    return
  }}""")
    with pytest.raises(CompilationError):
        hostcode.translate(text)
