"""Bad inputs to ``tileopt.compile``, ``Kernel.launch`` and ``python -m tileopt.compiler``.

Every one raises a TileoptError whose message names the argument (issue 9): compile options
an :class:`OptionError` (a CompilationError), launch arguments an :class:`ArgumentError`, and
the command line exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tileopt
from tileopt.builder import KernelBuilder, View
from tileopt.compiler import KernelParam, compile, nvidia
from tileopt.compiler.__main__ import main, split_signature
from tileopt.errors import ArgumentError, CompilationError, OptionError, TileoptError

torch = pytest.importorskip("torch")


def double(block: int = 64) -> KernelBuilder:
    """y = 2 x over (M x block) views, one row block of 64 rows per program."""
    kb = KernelBuilder("double", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0) * 64
        k.store(k.load(k.args.x, [row, 0], [64, block]) * 2.0, k.args.y, [row, 0])
    return kb


# ---------------------------------------------------------------------------------------------
# compile's options


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": None}, r"target None is not an NVIDIA GPU name"),
        ({"target": 90}, r"target 90 is not an NVIDIA GPU name"),
        ({"target": "sm_99"}, r"target 'sm_99' is not a GPU that LLVM 22's NVPTX back end"),
        ({"num_warps": "4"}, r"num_warps must be an int, a power of two in 1\.\.32; got '4'"),
        ({"num_warps": 4.0}, r"num_warps must be an int.*got 4\.0 \(float\)"),
        ({"num_warps": True}, r"num_warps must be an int.*got True \(bool\)"),
        ({"num_warps": 64}, r"num_warps must be a power of two in 1\.\.32, got 64"),
        ({"num_warps": 0}, r"num_warps must be a power of two"),
        ({"opt_level": 4}, r"opt_level must be 0, 1, 2 or 3, got 4"),
        ({"opt_level": -1}, r"opt_level must be 0, 1, 2 or 3"),
        ({"opt_level": "3"}, r"opt_level must be an int"),
        ({"opt_level": None}, r"opt_level must be an int"),
        ({"ptx_version": 999}, r"ptx_version must be a PTX ISA version LLVM 22 can emit.*90 "
                               r"\(PTX 8\.0 to 9\.0\), or None, got 999"),
        ({"ptx_version": 89}, r"ptx_version must be a PTX ISA version"),
        ({"ptx_version": "8.0"}, r"ptx_version must be an int"),
        ({"ptx_version": 80, "target": "sm_100"}, r"ptx_version=80 cannot target sm_100, which "
                                                  r"needs PTX 8\.6 or newer"),
        ({"assembler": "foo"}, r"assembler must be one of 'auto', 'ptxas', 'nvjitlink', got "
                               r"'foo'"),
        ({"assembler": None}, r"assembler must be one of"),
        ({"libdevice": "/no/such/libdevice.10.bc"}, r"libdevice='/no/such/libdevice\.10\.bc' is "
                                                    r"not a file"),
        ({"libdevice": 5}, r"libdevice must be the path of libdevice\.10\.bc"),
        ({"fp_fusion": "yes"}, r"fp_fusion must be True or False"),
        ({"maxnreg": 16}, r"maxnreg must be 24\.\.255 \(registers per thread\), or None, got 16"),
        ({"maxnreg": 256}, r"maxnreg must be 24\.\.255"),
        ({"maxnreg": True}, r"maxnreg must be an int"),
        ({"maxnreg": 64, "start": "llvm"}, r"maxnreg= is applied by the tile lowering; "
                                           r"start='llvm' has passed it"),
        ({"kernel": 5}, r"kernel= takes the kernel's name"),
        ({"kernel": "nope"}, r"no kernel 'nope' in the module; kernels: double"),
        ({"start": None}, r"start must be one of 'tile', 'tilegpu', 'llvm', 'ptx', got None"),
        ({"start": "cubin"}, r"start must be one of"),
        ({"contiguous": "x"}, r"contiguous= takes True \(every view\), False, or a list of view "
                              r"names"),
        ({"aligned": 1}, r"aligned= takes True"),
        ({"divisible_sizes": [0]}, r"divisible_sizes= takes True"),
        ({"divisible_sizes": {"x": (0,)}}, r"divisible_sizes= maps view names to one positive "
                                           r"divisor per dimension, e\.g\. \{'x': \(16, 16\)\}, "
                                           r"got 'x': \(0,\)"),
        ({"divisible_sizes": {"x": 16}}, r"divisible_sizes= maps view names"),
        ({"divisible_sizes": {"x": (16,)}}, r"divisible_sizes= gives argument 0 1 divisors, "
                                            r"but it is a view of rank 2"),
        ({"divisible_sizes": {"z": (16,)}}, r"divisible_sizes= names 'z', but the kernel's "
                                            r"arguments are x, y"),
        ({"int32_indexing": ["z"]}, r"int32_indexing= names 'z', but the kernel's arguments are "
                                    r"x, y"),
        ({"same_shapes": 5}, r"same_shapes= takes groups of two or more view names"),
        ({"same_shapes": [("x",)]}, r"same_shapes= takes groups"),
        ({"same_shapes": [("x", 1)]}, r"same_shapes= takes groups"),
        ({"same_shapes": "xy"}, r"same_shapes= takes groups"),
        ({"signature": 5}, r"signature= got 5; pass signature= as a list"),
        ({"signature": {"x": 5}}, r"signature entry 'x': expected a View, a Scalar"),
        ({"signature": ["x: view<?xf32"]}, r"signature= entry 'x: view<\?xf32': cannot read"),
        ({"signature": [5]}, r"signature entries must be KernelParam, got 5"),
    ],
)
def test_bad_compile_options_name_the_option(kwargs, message) -> None:
    with pytest.raises(OptionError, match=message) as info:
        compile(double(), **kwargs)
    assert isinstance(info.value, CompilationError)  # one `except` catches every failure


def test_bad_module_types() -> None:
    with pytest.raises(OptionError, match="compile takes as module= IR text, a tileopt.ir.Module "
                                          "or a KernelBuilder, got int"):
        compile(5)
    with pytest.raises(OptionError, match="start='ptx' takes the PTX text, got KernelBuilder"):
        compile(double(), start="ptx")


def test_every_known_ptx_version_compiles() -> None:
    """The newest PTX version LLVM 22 emits is accepted (ptxas assembles it); LLVM knows no
    newer one (its `+ptxNN` features end at 90)."""
    newest = nvidia.PTX_VERSIONS[-1]
    k = compile(double(), "sm_90", ptx_version=newest)
    assert f".version {newest // 10}.{newest % 10}" in k.asm["ptx"]
    assert newest == 90


def test_numpy_integers_are_options() -> None:
    np = pytest.importorskip("numpy")
    k = compile(double(), "sm_80", num_warps=np.int64(2), opt_level=np.int32(2))
    assert k.metadata.num_warps == 2 and type(k.metadata.num_warps) is int


# ---------------------------------------------------------------------------------------------
# environment variables


def test_dump_dir_naming_a_file(tmp_path: Path, monkeypatch) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    for bad in (not_a_dir, not_a_dir / "sub"):
        monkeypatch.setenv("TILEOPT_DUMP_DIR", str(bad))
        with pytest.raises(OptionError, match=rf"TILEOPT_DUMP_DIR='{bad}': cannot write .*set it "
                                              rf"to a writable directory"):
            compile(double())
    monkeypatch.setenv("TILEOPT_DUMP_DIR", str(tmp_path / "dumps"))
    compile(double())
    assert (tmp_path / "dumps" / "double.ptx.ptx").is_file()


@pytest.mark.parametrize("variable", ["TILEOPT_LIBDEVICE", "TILEOPT_PTXAS"])
def test_tool_variables_naming_no_file(variable: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(variable, str(tmp_path / "missing"))
    from tileopt import kernels

    with pytest.raises(OptionError, match=rf"{variable}='.*missing' is not a file"):
        compile(kernels.bias_gelu("f32"), "sm_80")  # calls libdevice's erf


# ---------------------------------------------------------------------------------------------
# num_warps comes from one place


def test_num_warps_of_a_later_stage_comes_from_the_kernel() -> None:
    """Layouts made for 8 warps, compiled again from stage "tilegpu": the launch uses the 8
    warps the code is made for (it used to take the default 4, leaving half the output
    unwritten), and a num_warps that disagrees is an error naming both numbers."""
    k8 = compile(double(), num_warps=8)
    assert k8.metadata.num_warps == 8 and nvidia.ptx_num_warps(k8.asm["ptx"], "double") == 8
    for start in ("tilegpu", "llvm", "ptx"):
        source = k8.asm[start]
        kw = {} if start == "tilegpu" else {"signature": k8.metadata.abi}
        k = compile(source, start=start, **kw)
        assert k.metadata.num_warps == 8 and k.metadata.block == (256, 1, 1)
        assert compile(source, start=start, num_warps=8, **kw).metadata.num_warps == 8
        with pytest.raises(CompilationError, match=r"kernel double: num_warps=4, but its code is "
                                                   r"made for 8 warps .*pass num_warps=8"):
            compile(source, start=start, num_warps=4, **kw)
        x = torch.randn(200, 64)
        y = torch.zeros_like(x)
        k.launch(4, x, y, device="emulator")
        torch.testing.assert_close(y, x * 2)


def test_ptx_num_warps_reads_the_directives() -> None:
    body = ".visible .entry k(\n.param .u64 k_param_0\n)\n{directive}\n{{\n\tret;\n}}\n"
    assert nvidia.ptx_num_warps(body.format(directive=".maxntid 256, 1, 1"), "k") == 8
    assert nvidia.ptx_num_warps(body.format(directive=".reqntid 64"), "k") == 2
    assert nvidia.ptx_num_warps(body.format(directive=""), "k") is None
    with pytest.raises(CompilationError, match=r"\.reqntid is 48 threads, not whole warps"):
        nvidia.ptx_num_warps(body.format(directive=".reqntid 48, 1, 1"), "k")


# ---------------------------------------------------------------------------------------------
# source locations


def test_a_late_diagnostic_names_the_users_line() -> None:
    """A mistake that only a pass finds (a reshape too large for the chip's shared memory) is
    reported at the file and line of the builder call that made the op. (The tile is transposed
    first: a reshape whose layouts spread the elements alike moves nothing and needs none.)"""
    kb = KernelBuilder("t", x=View("f32", 2), y=View("f32", 1))
    with kb as k:
        x = k.permute(k.load(k.args.x, [0, 0], [256, 256]), [1, 0])
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        k.store(k.reshape(x, [65536]), k.args.y, [0])
    with pytest.raises(CompilationError) as info:
        compile(kb, "sm_90", num_warps=32)
    assert f'"{__file__}":{line}:' in str(info.value)
    assert "needs 262144 bytes of shared memory" in str(info.value)
    assert "more than the 232448 a block can have on sm_90" in str(info.value)


# ---------------------------------------------------------------------------------------------
# launch


@pytest.mark.parametrize(
    ("grid", "options", "message"),
    [
        ("4", {}, r"grid must be 1 to 3 positive integers"),
        (True, {}, r"grid must be"),
        ((1, 2, 3, 4), {}, r"grid must be"),
        ((0,), {}, r"grid must be"),
        (2.0, {}, r"grid must be"),
        ((1, 70000), {}, r"grid must be"),
        (1, {"max_thread": 4},
         r"unknown emulator option 'max_thread'; the emulator takes max_threads_per_chunk"),
    ],
)
def test_bad_launch_arguments(grid, options, message) -> None:
    k = compile(double())
    x = torch.zeros(64, 64)
    with pytest.raises(ArgumentError, match=message):
        k.launch(grid, x, x.clone(), **options)
    with pytest.raises(ArgumentError, match="unknown device"):
        k.launch(1, x, x.clone(), device=None)


# ---------------------------------------------------------------------------------------------
# the command line


@pytest.fixture
def vector_add_mlir() -> Path:
    return Path(__file__).parent / "kernels" / "vector_add.mlir"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.mlir"], "error: cannot read missing.mlir: No such file or directory"),
        ([str(Path(__file__).parent)], "error: cannot read .*: Is a directory"),
        (["{kernel}", "--start", "llvm", "--signature", "x:view<?xf32"],
         "error: signature= entry 'x:view<\\?xf32': cannot read a kernel parameter"),
        (["{kernel}", "--start", "llvm", "--num-warps", "3"],
         "error: num_warps must be a power of two in 1..32, got 3"),
        (["{kernel}", "--target", "sm_99", "--start", "llvm"], "error: target 'sm_99'"),
        (["{kernel}", "--start", "llvm", "--signature",
          "x: view<?xf32>, y: view<?xf32>, z: view<?xf32>", "-o", "/"],
         "error: cannot write /: Is a directory"),
    ],
)
def test_command_line_errors_exit_2(argv, message, vector_add_mlir, capsys) -> None:
    argv = [a.replace("{kernel}", str(vector_add_mlir)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.match(message, err), err


def test_command_line_in_a_process(tmp_path: Path) -> None:
    """No traceback from the real entry point: status 2 for a missing file, 1 for IR that does
    not compile."""
    run = [sys.executable, "-m", "tileopt.compiler"]
    out = subprocess.run([*run, str(tmp_path / "missing.mlir")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: cannot read")
    bad = tmp_path / "bad.mlir"
    bad.write_text("this is not IR")
    out = subprocess.run([*run, str(bad)], capture_output=True, text=True, check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: the input module does not parse or verify")


def test_signature_with_commas_inside_types() -> None:
    text = "x: view<?x?xf32, strides [?, 1]>, n: i32, y: view<?xf16, size_divisibility [16]>"
    params = [KernelParam.parse(p) for p in split_signature(text)]
    assert [p.name for p in params] == ["x", "n", "y"]
    assert params[0].strides == (None, 1)


def test_errors_are_exported() -> None:
    assert issubclass(tileopt.OptionError, tileopt.CompilationError)
    assert issubclass(tileopt.BuilderError, TileoptError)


def test_mlir_errors_cut_long_notes() -> None:
    """A failing pass's "see current operation" note prints the whole function (5 MB for a
    model's graph): an error message keeps its first DIAGNOSTIC_LIMIT characters."""
    from types import SimpleNamespace

    from tileopt.errors import DIAGNOSTIC_LIMIT, mlir_error_text

    body = "%0 = arith.constant 0 : i64\n" * 100_000
    note = SimpleNamespace(location="loc(unknown)", message=f"see current operation: {body}",
                           notes=[])
    error = SimpleNamespace(message="Failure while executing pass pipeline:", error_diagnostics=[
        SimpleNamespace(location='loc("model.py":3:0)', message="kernel formation failed",
                        notes=[note])])
    text = mlir_error_text(error)  # type: ignore[arg-type]
    lines = text.splitlines()
    assert lines[:2] == ["Failure while executing pass pipeline:",
                         'error: loc("model.py":3:0): kernel formation failed']
    assert lines[2].startswith(" note: loc(unknown): see current operation: %0 = arith")
    assert len(text) < DIAGNOSTIC_LIMIT + 300
    assert text.endswith(f"({len(note.message) - DIAGNOSTIC_LIMIT:,} characters more)")
    assert mlir_error_text(ValueError("plain")) == "plain"


# ---------------------------------------------------------------------------------------------
# IR that crashed or hung the compiler (found by mutating IR text): a located diagnostic now


def _llvm_kernel(body: str, globals_: str = "") -> str:
    """A start="llvm" module: one kernel of the LLVM dialect taking (p, n)."""
    return (
        "module attributes {gpu.container_module} {\n  gpu.module @tileopt_kernels {\n"
        f"{globals_}    llvm.func @k(%p: !llvm.ptr<1>, %n: i64) attributes "
        f"{{gpu.kernel, nvvm.kernel}} {{\n{body}      llvm.return\n    }}\n  }}\n}}\n"
    )


_MMA_ONE_COLUMN = """#mma = #tile.mma<warpsPerCTA = [1, 1]>
tile.kernel @k(%a: memref<?x?xf32>, %b: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %x = tile.load %a[%c0, %c0] : memref<?x?xf32> -> tensor<64x64xf32>
  %y = tile.load %b[%c0, %c0] : memref<?x?xf32> -> tensor<64x1xf32, #mma>
  %d = tile.dot %x, %y, %y : tensor<64x64xf32>, tensor<64x1xf32, #mma>
    -> tensor<64x1xf32, #mma>
  tile.store %d, %b[%c0, %c0] : tensor<64x1xf32, #mma>, memref<?x?xf32>
  tile.return
}
"""
_MMA_F32_OPERANDS = """#mma = #tile.mma<warpsPerCTA = [1, 1]>
tile.kernel @k(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {tile.num_warps = 1} {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<?x?xf32> -> tensor<16x8xf32, #mma>
  %b = tile.load %y[%c0, %c0] : memref<?x?xf32> -> tensor<8x8xf32, #mma>
  %c = tile.load %y[%c0, %c0] : memref<?x?xf32> -> tensor<16x8xf32, #mma>
  %d = tile.dot %a, %b, %c : tensor<16x8xf32, #mma>, tensor<8x8xf32, #mma> -> tensor<16x8xf32, #mma>
  tile.store %d, %y[%c0, %c0] : tensor<16x8xf32, #mma>, memref<?x?xf32>
  tile.return
}
"""
_HUGE_LAYOUT = """#l = #tile.blocked<sizePerThread = [{size}], threadsPerWarp = [32],
  warpsPerCTA = [{warps}], order = [0]>
tile.kernel @k(%s: f32) attributes {{tile.num_warps = 4 : i32}} {{
  %t = tile.splat %s : f32 -> tensor<256xf32, #l>
  tile.return
}}
"""

# 16 rows of lanes on a one-row tile: each thread holds 2048 of its elements, not 4096 / 32.
_REPLICATED_ROWS = """#l = #tile.blocked<sizePerThread = [1, 1], threadsPerWarp = [16, 2],
  warpsPerCTA = [1, 1], order = [1, 0]>
tile.kernel @k(%s: f16) attributes {tile.num_warps = 1 : i32} {
  %t = tile.splat %s : f16 -> tensor<1x4096xf16, #l>
  tile.return
}
"""


@pytest.mark.parametrize(("text", "start", "message"), [
    (_MMA_ONE_COLUMN, "tile", "has an mma accumulator layout, but sm_90 has no tensor-core dot"),
    ("tile.kernel @k(%x: memref<?xf32>) {\n  tile.return\n}\n"
     "func.func @host(%x: memref<?xf32>) -> index {\n  %c = arith.constant -1 : index\n"
     "  %d = memref.dim %x, %c : memref<?xf32>\n  return %d : index\n}\n", "tile",
     "'memref.dim' at loc(\"-\":6:8): index -1 is out of range for a memref of rank 1"),
    # a name used before a malformed region that defines it: MLIR's parser aborted
    ("tile.kernel @k(%x: memref<?xi32>) {\n"
     "  tile.yield %r : i32\n"
     "  %c0 = arith.constant 0 : index\n"
     "  %t = tile.load %x[%c0] : memref<?xi32> -> tensor<4xi32>\n"
     "  %s = tile.reduce %t {axis = 0} : tensor<4xi32> -> tensor<i32> {\n"
     "    %r = arith.minsi %a, %b : i32\n"
     "  ^bb0(%a: i32, %b: i32):\n",
     "tile", "expected operation name in quotes"),
    (_MMA_F32_OPERANDS, "tilegpu", "has an mma accumulator layout, but"),
    (_HUGE_LAYOUT.format(size=1, warps=2147483648), "tilegpu",
     "expected warpsPerCTA to multiply to at most 32"),
    (_HUGE_LAYOUT.format(size=2147483648, warps=4), "tilegpu",
     "expected sizePerThread to multiply to at most 1048576"),
    # a layout that repeats a tile in every thread (compiles that ran for minutes)
    (_HUGE_LAYOUT.format(size=65536, warps=4), "tilegpu",
     "gives each thread 65536 of them (65536 32-bit registers, replicas included)"),
    (_REPLICATED_ROWS, "tilegpu",
     "a tile of 4096 'f16' elements (1x4096) whose layout"),
    (_llvm_kernel('      %v = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, '
                  '$33;", "=r,l" %p : (!llvm.ptr<1>) -> i32\n'), "llvm",
     "names operand $33 in its text"),
    (_llvm_kernel("      %c = llvm.load %p : !llvm.ptr<1> -> vector<1024xbf16>\n"
                  "      %b = llvm.bitcast %c : vector<1024xbf16> to vector<1xi32>\n"
                  "      llvm.store %b, %p : vector<1xi32>, !llvm.ptr<1>\n"), "llvm",
     "a bitcast keeps the size"),
    (_llvm_kernel("      %q = llvm.addrspacecast %p : !llvm.ptr<1> to !llvm.ptr<4294967295>\n"
                  "      %x = llvm.load %q : !llvm.ptr<4294967295> -> i32\n"
                  "      llvm.store %x, %p : i32, !llvm.ptr<1>\n"),
     "llvm", "address space 4294967295, which NVPTX has no state space for"),
    (_llvm_kernel("      %u = llvm.load %p : !llvm.ptr<1> -> vector<2147483648xi8>\n"
                  "      %e = llvm.extractelement %u[%n : i64] : vector<2147483648xi8>\n"
                  "      llvm.store %e, %p : i8, !llvm.ptr<1>\n"), "llvm",
     "a vector of 2147483648 lanes"),
    (_llvm_kernel("", "    llvm.mlir.global internal @g() {addr_space = 2 : i32} : "
                      "!llvm.array<16 x i8>\n"), "llvm", "address space 2"),
    # what check-nvptx-input does not know: LLVM's own abort, in the child process
    (_llvm_kernel('      %v = llvm.inline_asm has_side_effects asm_dialect = att "mov.b32 $0, '
                  '$x;", "=r,l" %p : (!llvm.ptr<1>) -> i32\n'
                  "      llvm.store %v, %p : i32, !llvm.ptr<1>\n"), "llvm",
     "LLVM's NVPTX back end failed on kernel k (signal SIGABRT); it said:\n  LLVM ERROR: Bad $ "
     "operand number in inline asm string"),
    (_llvm_kernel("      %u = llvm.mlir.poison : vector<4294967296xf32>\n"), "llvm",
     "vectors of 2^32 or more lanes"),
], ids=["mma-one-column", "host-dim-index", "forward-reference-into-bad-region",
        "mma-f32-operands", "warps-overflow",
        "elements-per-thread", "replicated-elements", "replicated-rows",
        "inline-asm-operand", "bitcast-size", "address-space-huge", "vector-lanes",
        "global-address-space", "llvm-abort-in-a-child", "vector-lanes-parse"])
def test_ir_that_crashed_the_compiler_gets_a_diagnostic(text: str, start: str,
                                                        message: str) -> None:
    with pytest.raises(CompilationError, match=re.escape(message)):
        compile(text, "sm_90", start=start, num_warps=4 if start != "tilegpu" else None)
