"""The NVIDIA pipeline on hand-written kernels at stage "llvm": PTX, cubin, ptxas, metadata."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from tileopt import ir
from tileopt.compiler import KernelParam, PTXAssemblyError, compile, nvidia, tools
from tileopt.errors import CompilationError, TileoptError
from tileopt.runtime.kernel import Kernel
from tileopt.runtime.ptx import ptx_instruction_count

TARGETS = ("sm_80", "sm_90")
NAMES = ("vector_add", "scale", "exp_scale", "scale_half")


def test_stage_table_reads_in_order() -> None:
    assert nvidia.STAGES == ("tile", "tilegpu", "llvm", "ptx", "cubin")
    opts = nvidia.Options(target="sm_80", num_warps=8)
    tile = nvidia.pipeline_text(nvidia.PIPELINES["tile"], opts)
    assert tile == "builtin.module(canonicalize,tile-narrow-integer-tiles,canonicalize,cse)"
    tilegpu = nvidia.pipeline_text(nvidia.PIPELINES["tilegpu"], opts)
    assert tilegpu == (
        "builtin.module(tile-assign-layouts{num-warps=8 target=sm_80},"
        "tile-remove-layout-conversions,canonicalize,cse)"
    )
    llvm = nvidia.pipeline_text(nvidia.PIPELINES["llvm"], opts)
    assert llvm == ("builtin.module(convert-tile-to-nvvm{chip=sm_80 features= fp-fusion=true "
                    "num-stages=3 tma=true warp-specialize=false max-registers=0})")
    capped = nvidia.pipeline_text(nvidia.PIPELINES["llvm"], nvidia.Options(maxnreg=128))
    assert capped.endswith(" max-registers=128})")
    # An explicit PTX version reaches the lowering, which picks instructions by it.
    pinned = nvidia.pipeline_text(nvidia.PIPELINES["llvm"],
                                  nvidia.Options(target="sm_90a", ptx_version=80))
    assert "convert-tile-to-nvvm{chip=sm_90a features=+ptx80 " in pinned
    # Braces of upstream pass options survive the substitution.
    assert nvidia.pipeline_text(nvidia.TO_PTX, opts) == (
        "builtin.module(gpu-module-to-binary{format=isa})"
    )


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_handwritten_kernel_compiles_and_ptxas_accepts(handwritten, name: str, target: str) -> None:
    k = handwritten.compiled(name, target)
    assert set(k.asm) == {"llvm", "ptx", "cubin"}
    # The llvm stage finished the module: only LLVM/NVVM ops remain in the gpu.module.
    assert "gpu.func" not in k.asm["llvm"] and "nvvm.kernel" in k.asm["llvm"]
    ptx = k.asm["ptx"]
    assert f".target {target}" in ptx
    assert re.search(rf"\.visible \.entry {name}\(", ptx)
    assert isinstance(k.asm["cubin"], bytes) and k.asm["cubin"][:4] == b"\x7fELF"
    md = k.metadata
    assert (md.name, md.target, md.num_warps, md.block) == (name, target, 4, (128, 1, 1))
    assert md.abi == tuple(handwritten.signature(name))
    assert md.shared_bytes == 0
    # ptxas -v ran and reported this kernel.
    assert md.registers is not None and 0 < md.registers <= 255
    assert md.spill_bytes == 0
    assert set(k.times) == {"parse", "llvm", "ptx", "cubin"}


def test_ptx_parameters_follow_the_abi(handwritten) -> None:
    ptx = handwritten.compiled("scale", "sm_90").asm["ptx"]
    widths, _ = nvidia.ptx_entries(ptx)["scale"]
    assert widths == [64] * 5 + [64] * 5 + [32]
    params = re.findall(r"\.param \.(\w+)", ptx)
    assert params == ["u64"] * 10 + ["f32"]


def test_libdevice_is_linked_for_math(handwritten) -> None:
    ptx = handwritten.compiled("exp_scale", "sm_90").asm["ptx"]
    assert "__nv_expf" not in ptx, "libdevice's expf was not linked and inlined"
    assert ".extern .func" not in ptx
    assert "ex2.approx" in ptx


def test_opt_level_and_ptx_version(handwritten) -> None:
    k = compile(handwritten.source("vector_add"), "sm_90", start="llvm",
                signature=handwritten.signature("vector_add"), ptx_version=80, opt_level=0)
    assert ".version 8.0" in k.asm["ptx"]
    assert k.metadata.registers is not None


def test_num_warps_sets_the_block(handwritten) -> None:
    k = compile(handwritten.source("vector_add"), "sm_80", 8, start="llvm",
                signature=handwritten.signature("vector_add"))
    assert k.metadata.block == (256, 1, 1)


@pytest.mark.parametrize("assembler", ["ptxas", "nvjitlink"])
def test_both_assemblers(handwritten, assembler: str) -> None:
    k = compile(handwritten.source("scale"), "sm_90", start="llvm", assembler=assembler,
                signature=handwritten.signature("scale"))
    assert k.metadata.assembler == assembler
    assert k.asm["cubin"][:4] == b"\x7fELF"
    assert k.metadata.registers is not None and k.metadata.spill_bytes == 0


def test_auto_prefers_ptxas_and_falls_back_to_nvjitlink(handwritten, monkeypatch,
                                                        fresh_cache) -> None:
    assert handwritten.compiled("scale", "sm_90").metadata.assembler == "ptxas"
    monkeypatch.setattr(tools, "find_ptxas", lambda: None)
    k = compile(handwritten.source("scale"), "sm_90", start="llvm",
                signature=handwritten.signature("scale"))
    assert k.metadata.assembler == "nvjitlink" and k.asm["cubin"][:4] == b"\x7fELF"
    assert k.metadata.registers is not None


def test_nvjitlink_and_ptxas_report_alike(handwritten) -> None:
    # Equal here; they can differ where ptxas emits subroutine calls (nvJitLink is ptxas -c).
    ptx = handwritten.compiled("exp_scale", "sm_80").asm["ptx"]
    _, log = tools.nvjitlink_cubin(ptx, "sm_80")
    _, ptxas_log = tools.run_ptxas(ptx, "sm_80", cubin=False)
    assert tools.parse_ptxas_info(log) == tools.parse_ptxas_info(ptxas_log)
    assert set(tools.parse_ptxas_info(log)) == {"exp_scale"}


def test_ptxas_options_reach_ptxas() -> None:
    """``run_ptxas(options=...)``: a register cap below what a matmul takes unconstrained is
    what ptxas then allocates (it spills the rest); a bad option is ptxas' error."""
    from tileopt import kernels

    ptx = compile(kernels.matmul("f16"), "sm_80").asm["ptx"]
    free = tools.parse_ptxas_info(tools.run_ptxas(ptx, "sm_80", cubin=False)[1])["matmul"]
    # ptxas ignores -maxrregcount beside a block size directive.
    unbounded = re.sub(r"^\s*\.(max|req)ntid.*$", "", ptx, flags=re.M)
    _, log = tools.run_ptxas(unbounded, "sm_80", cubin=False, options=["-maxrregcount", "32"])
    capped = tools.parse_ptxas_info(log)["matmul"]
    assert free.registers > 32 >= capped.registers
    with pytest.raises(PTXAssemblyError):
        tools.run_ptxas(ptx, "sm_80", cubin=False, options=["--no-such-option"])


@pytest.mark.parametrize("head_dim, exact_spills", [(64, True), (128, False)])
def test_a_spilling_block_directive_is_relaxed(head_dim: int, exact_spills: bool) -> None:
    """Flash attention on sm_80 as benchmarks/ptx_vs_triton.py compiles it: told its exact
    block (``.reqntid``) ptxas spills it at d = 64 to fit more blocks in an SM's registers,
    told a maximum (``.maxntid``) it spills it at d = 128. The kernel keeps ``.reqntid``
    unless that spills and ``.maxntid`` does not: spill-free both times, its PTX naming the
    directive it was assembled with. PTX given at stage "ptx" is assembled as given."""
    from tileopt import kernels

    views = ("q", "k", "v", "o")
    kern = compile(kernels.attention("f16", head_dim=head_dim, block_m=64, block_n=64),
                   target="sm_80", num_warps=4, num_stages=3, aligned=True, int32_indexing=True,
                   divisible_sizes={v: (16, 16, 16) for v in views},
                   same_shapes=[("q", "o"), ("k", "v")])
    ptx = str(kern.asm["ptx"])
    assert (kern.metadata.spill_store_bytes, kern.metadata.spill_load_bytes) == (0, 0)

    def spills(directive: str) -> int:
        text = re.sub(r"^\.(req|max)ntid .*$", directive, ptx, count=1, flags=re.M)
        log = tools.run_ptxas(text, "sm_80", cubin=False)[1]
        return tools.parse_ptxas_info(log)["attention"].spill_store_bytes

    exact, relaxed = spills(".reqntid 128"), spills(".maxntid 128")
    assert (exact > 0, relaxed > 0) == (exact_spills, not exact_spills)
    want = ".maxntid 128" if exact_spills else ".reqntid 128"
    assert re.search(rf"^{re.escape(want)}$", ptx, re.M)
    if exact_spills:
        given = re.sub(r"^\.maxntid .*$", ".reqntid 128", ptx, count=1, flags=re.M)
        kept = compile(given, target="sm_80", start="ptx", signature=kern.metadata.abi)
        assert str(kept.asm["ptx"]) == given and kept.metadata.spill_store_bytes == exact


def test_blocks_that_shared_memory_allows_bound_the_registers() -> None:
    """Told its exact block (256 threads), ptxas squeezes a 64 x 128 x 64 matmul at 4 stages
    on sm_80 into 64 registers, as for 4 blocks an SM, and spills; told a maximum block too.
    Its 72 KiB of shared memory leave room for 2 blocks, which ``.minnctapersm 2`` tells
    ptxas: no spills. Computed in the emulator, a @ b as before."""
    import torch
    from tileopt import kernels

    kern = compile(kernels.matmul("f16", 64, 128, 64), target="sm_80", num_warps=8,
                   num_stages=4, aligned=True, divisible_sizes=True, int32_indexing=True)
    if kern.metadata.registers is None:
        pytest.skip("needs ptxas (or nvJitLink) to count registers")
    ptx = str(kern.asm["ptx"])
    assert kern.metadata.shared_bytes == 73728
    assert nvidia.blocks_per_sm("sm_80", kern.metadata.shared_bytes, 256) == 2
    assert re.search(r"^\.reqntid 256\n\.minnctapersm 2$", ptx, re.M)
    assert kern.metadata.spill_bytes == 0

    def spills(text: str) -> int:
        info = tools.parse_ptxas_info(tools.run_ptxas(text, "sm_80", cubin=False)[1])["matmul"]
        return info.spill_store_bytes
    exact = ptx.replace(".minnctapersm 2\n", "")
    assert spills(exact) > 0 and spills(exact.replace(".reqntid", ".maxntid")) > 0
    torch.manual_seed(0)
    a, b = torch.randn(200, 320).half(), torch.randn(320, 272).half()
    c = torch.zeros(200, 272)
    kern.launch(kernels.matmul_grid(a.shape, b.shape, 64, 128), a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-3, rtol=1e-3)


def test_last_variant_has_no_block_size_and_must_fit_the_block() -> None:
    # Told no block size, ptxas allocates as for one block of any size: a variant it spills
    # none under is taken only where the kernel's own block still launches at that many
    # registers (8 a thread at a time, 64K an SM).
    ptx = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(\n)\n" \
          ".reqntid 256\n{\nret;\n}\n"
    variants = nvidia._relaxed_blocks(ptx, "sm_80", "k", 0, 128)
    assert ".maxntid 256" in variants[0] and "ntid" not in variants[-1]
    assert nvidia._registers_fit(255, 8) and nvidia._registers_fit(128, 16)
    assert not nvidia._registers_fit(142, 16) and not nvidia._registers_fit(129, 16)
    assert nvidia._registers_fit(121, 16)  # 128 a thread
    assert nvidia._registers_fit(1000, None)


def test_blocks_per_sm_follow_shared_memory_and_threads() -> None:
    # sm_80: 164 KiB an SM, 1 KiB of it reserved per block; sm_90: 228 KiB.
    assert nvidia.blocks_per_sm("sm_80", 73728, 256) == 2
    assert nvidia.blocks_per_sm("sm_90a", 73728, 256) == 3
    assert nvidia.blocks_per_sm("sm_86", 49152, 128) == 2
    # Without shared memory, the 2048 threads an SM runs bound it.
    assert nvidia.blocks_per_sm("sm_90", 0, 256) == 8
    assert nvidia.blocks_per_sm("sm_80", 200 * 1024, 128) == 1


def test_without_nvjitlink_and_ptxas_there_is_no_cubin(handwritten, monkeypatch,
                                                       fresh_cache) -> None:
    def missing(ptx: str, target: str) -> tuple[bytes, str]:
        raise ImportError("no nvJitLink here")

    # Compiled before the patches: handwritten.compiled caches its kernels for the session.
    ptx = handwritten.compiled("vector_add", "sm_90").asm["ptx"]
    monkeypatch.setattr(tools, "nvjitlink_cubin", missing)
    monkeypatch.setattr(tools, "find_ptxas", lambda: None)
    k = compile(ptx, "sm_90", start="ptx", signature=handwritten.signature("vector_add"))
    assert "cubin" not in k.asm and k.metadata.assembler == "none"
    assert k.metadata.registers is None and k.metadata.spill_bytes is None


# ---------------------------------------------------------------------------------------------
# input forms and kernel selection


def test_ir_module_input_is_not_modified(handwritten) -> None:
    with ir.Context():
        module = ir.Module.parse(handwritten.source("vector_add"))
        before = str(module)
        k = compile(module, "sm_90", start="llvm", signature=handwritten.signature("vector_add"))
        assert str(module) == before
    assert ".entry vector_add" in k.asm["ptx"]


def test_signature_as_a_mapping_of_builder_specs(handwritten) -> None:
    builder = pytest.importorskip("tileopt.builder")
    sig = {"x": builder.View("f32", 2), "y": builder.View("f32", 2),
           "alpha": builder.Scalar("f32")}
    k = compile(handwritten.source("scale"), "sm_90", start="llvm", signature=sig)
    assert k.metadata.abi == tuple(handwritten.signature("scale"))


def _two_kernels(handwritten) -> str:
    """One gpu.module holding both vector_add and scale."""
    a = handwritten.source("vector_add")
    b = handwritten.source("scale")
    body = b[b.index("gpu.func @scale"):b.rindex("gpu.return")] + "gpu.return\n    }\n"
    at = a.rindex("gpu.return")
    at = a.index("}", at) + 1
    return a[:at] + "\n    " + body + a[at:]


def test_module_with_several_kernels_needs_a_name(handwritten) -> None:
    src = _two_kernels(handwritten)
    with pytest.raises(CompilationError, match=r"2 kernels \(vector_add, scale\).*kernel='name'"):
        compile(src, "sm_90", start="llvm", signature=handwritten.signature("vector_add"))
    k = compile(src, "sm_90", start="llvm", kernel="scale",
                signature=handwritten.signature("scale"))
    assert ".entry scale" in k.asm["ptx"] and "vector_add" not in k.asm["ptx"]
    assert "@vector_add" in k.asm["llvm"]  # the llvm stage still holds the whole module
    with pytest.raises(CompilationError, match="no kernel 'nope'.*vector_add, scale"):
        compile(src, "sm_90", start="llvm", kernel="nope", signature=[])


def test_start_at_ptx(handwritten) -> None:
    ptx = handwritten.compiled("vector_add", "sm_90").asm["ptx"]
    k = compile(ptx, "sm_90", start="ptx", signature=handwritten.signature("vector_add"))
    assert set(k.asm) == {"ptx", "cubin"}
    assert k.metadata.registers == handwritten.compiled("vector_add", "sm_90").metadata.registers


def test_dump_dir(handwritten, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TILEOPT_DUMP_DIR", str(tmp_path))
    compile(handwritten.source("vector_add"), "sm_80", start="llvm",
            signature=handwritten.signature("vector_add"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["vector_add.cubin.cubin", "vector_add.llvm.mlir", "vector_add.ptx.ptx"]


# ---------------------------------------------------------------------------------------------
# errors


def test_ptxas_rejection_quotes_the_offending_line(handwritten) -> None:
    ptx = handwritten.compiled("vector_add", "sm_90").asm["ptx"]
    lines = ptx.splitlines()
    n = next(i for i, line in enumerate(lines) if "add.rn.f32" in line)
    lines[n] = lines[n].replace("add.rn.f32", "add.rn.q32")
    bad = "\n".join(lines) + "\n"
    sig = handwritten.signature("vector_add")
    with pytest.raises(PTXAssemblyError) as info:
        compile(bad, "sm_90", start="ptx", signature=sig, assembler="nvjitlink")
    msg = str(info.value)
    assert "nvJitLink rejected the PTX for sm_90" in msg
    assert f"PTX line {n + 1}: add.rn.q32" in msg
    assert isinstance(info.value, CompilationError) and isinstance(info.value, TileoptError)


def test_ptxas_rejection_through_the_ptxas_executable(handwritten) -> None:
    ptx = handwritten.compiled("vector_add", "sm_90").asm["ptx"].replace(
        "ld.global.b32", "ld.global.zz32", 1)
    expected = r"ptxas rejected(.|\n)*PTX line \d+: ld.global.zz32"
    with pytest.raises(PTXAssemblyError, match=expected):
        compile(ptx, "sm_90", start="ptx", signature=handwritten.signature("vector_add"))


def test_a_target_ptxas_does_not_know(handwritten) -> None:
    """CUDA 13's ptxas no longer assembles for Volta: the error says which ptxas, and how
    to use another."""
    expected = r"ptxas rejected(.|\n)*does not assemble for sm_70(.|\n)*TILEOPT_PTXAS"
    with pytest.raises(PTXAssemblyError, match=expected):
        handwritten.compiled("vector_add", "sm_70")


def test_ops_left_unlowered_are_named_with_their_location(handwritten) -> None:
    # tensor ops have no lowering to NVVM: the conversion fails on tensor.extract.
    src = handwritten.source("vector_add").replace(
        "%sum = arith.addf %xv, %yv : f32",
        "%t = tensor.from_elements %xv, %yv : tensor<2xf32>\n"
        "      %k = arith.index_cast %xs : i64 to index\n"
        "      %e = tensor.extract %t[%k] : tensor<2xf32>\n"
        "      %sum = arith.addf %e, %yv : f32",
    )
    with pytest.raises(CompilationError) as info:
        compile(src, "sm_90", start="llvm", signature=handwritten.signature("vector_add"))
    msg = str(info.value)
    assert "stage llvm: these ops could not be lowered" in msg
    # Each op is named with its location in the input.
    assert re.search(r"'tensor.from_elements' at loc\(.*:\d+:\d+\)", msg)
    assert re.search(r"'tensor.extract' at loc\(.*:\d+:\d+\)", msg)


def test_pass_failure_carries_mlir_diagnostics(handwritten) -> None:
    # A gpu.func whose signature convert-gpu-to-nvvm cannot convert: it fails with a diagnostic.
    src = handwritten.source("vector_add").replace(
        "%zs: i64) kernel {", "%zs: i64, %bad: tensor<4xf32>) kernel {"
    )
    with pytest.raises(CompilationError) as info:
        compile(src, "sm_90", start="llvm", signature=handwritten.signature("vector_add"))
    msg = str(info.value)
    assert "stage llvm" in msg and "convert-gpu-to-nvvm" in msg
    assert "error:" in msg  # MLIR's own diagnostic follows


def test_parse_error_is_a_compilation_error() -> None:
    expected = "does not parse or verify(.|\n)*custom op 'this' is unknown"
    with pytest.raises(CompilationError, match=expected):
        compile("module { this is not mlir }", "sm_90")


def test_unknown_pass_is_reported(handwritten, monkeypatch) -> None:
    monkeypatch.setattr(nvidia, "UPSTREAM_TO_LLVM", ("no-such-pass",))
    with pytest.raises(CompilationError, match="does not parse(.|\n)*no-such-pass"):
        compile(handwritten.source("vector_add"), "sm_90", start="llvm",
                signature=handwritten.signature("vector_add"))


def test_signature_that_does_not_match_the_ptx(handwritten) -> None:
    wrong = [KernelParam.view("x", "f32", 2), KernelParam.view("y", "f32", 1),
             KernelParam.view("z", "f32", 1)]
    with pytest.raises(CompilationError, match="do not follow the kernel ABI"):
        compile(handwritten.source("vector_add"), "sm_90", start="llvm", signature=wrong)


def test_signature_is_required_after_the_tile_stages(handwritten) -> None:
    with pytest.raises(CompilationError, match="pass signature="):
        compile(handwritten.source("vector_add"), "sm_90", start="llvm")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": "gfx90a"}, "not an NVIDIA GPU name"),
        ({"num_warps": 3}, "power of two"),
        ({"start": "cubin"}, "start must be one of"),
        ({"assembler": "nvcc"}, "assembler must be"),
    ],
)
def test_bad_options(handwritten, kwargs, message) -> None:
    args = {"target": "sm_90", "start": "llvm", "signature": handwritten.signature("vector_add")}
    args.update(kwargs)
    with pytest.raises(CompilationError, match=message):
        compile(handwritten.source("vector_add"), **args)


# ---------------------------------------------------------------------------------------------
# PTX and ptxas text


PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'small' for 'sm_90'
ptxas info    : Function properties for small
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
"""


def test_parse_ptxas_info() -> None:
    info = tools.parse_ptxas_info(PTXAS_LOG)
    assert info["small"] == tools.PtxasInfo(12, 0, 0, 0, 0)
    assert info["big"] == tools.PtxasInfo(255, 40, 36, 48, 4096)


SHARED_PTX = """\
.version 8.0
.target sm_90
.address_size 64
.shared .align 16 .b8 used_a[1024];
.shared .align 4 .b8 used_b[10];
.shared .align 16 .b8 other[4096];
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .align 8 .b8 k_param_1[16],
\t.param .b16 k_param_2
)
.maxntid 128, 1, 1
{
\tmov.u64 %rd1, used_a;
\tmov.u64 %rd2, used_b;
\tmov.u64 %rd3, dyn;
\tret;
}
.visible .entry j()
{
\tmov.u64 %rd1, other;
\tret;
}
"""


def test_shared_bytes_counts_the_variables_a_kernel_uses() -> None:
    assert nvidia.shared_bytes(SHARED_PTX, "k") == 1024 + 10
    assert nvidia.shared_bytes(SHARED_PTX, "j") == 4096
    entries = nvidia.ptx_entries(SHARED_PTX)
    assert entries["k"][0] == [64, 128, 16] and entries["j"][0] == []


def test_import_tileopt_stays_light() -> None:
    code = (
        "import sys, tileopt\n"
        "assert 'tileopt.ir' not in sys.modules and 'tileopt.compiler' not in sys.modules\n"
        "assert tileopt.compile.__module__ == 'tileopt.compiler.kernel'\n"
        "assert tileopt.Kernel.__name__ == 'Kernel'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_subpackages_load_on_first_use() -> None:
    """``import tileopt`` then ``tileopt.kernels``, ``tileopt.dynamo``, ... (as ``torch.nn``
    after ``import torch``), each imported only when first used."""
    code = (
        "import sys, tileopt\n"
        "assert 'tileopt.kernels' not in sys.modules and 'tileopt.dynamo' not in sys.modules\n"
        "assert tileopt.kernels.matmul.__module__ == 'tileopt.kernels'\n"
        "assert callable(tileopt.dynamo.backend) and tileopt.emulator.load_ptx\n"
        "try:\n    tileopt.nope\nexcept AttributeError as e:\n"
        "    assert \"no attribute 'nope'\" in str(e)\n"
        "else:\n    raise AssertionError('tileopt.nope exists')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ptx_instruction_count() -> None:
    ptx = (".visible .entry k(\n.param .u64 k_param_0\n)\n{\n\t.reg .b32 %r<3>;\n"
           "\t// a comment\n\tmov.u32 %r1, %tid.x;\n$L__BB0_1:\n\t@%p1 bra $L__BB0_1;\n"
           "\tret;  // done\n}\n")
    assert ptx_instruction_count(ptx, "k") == 3
    assert ptx_instruction_count(ptx, "missing") == 0


def test_summary(handwritten) -> None:
    text = handwritten.compiled("scale", "sm_90").summary()
    assert text.splitlines()[0] == "kernel scale(x: view<?x?xf32>, y: view<?x?xf32>, alpha: f32)"
    assert re.search(r"registers \d+, spills 0 bytes, shared memory 0 bytes", text)
    assert re.search(r"PTX instructions \d+, cubin by ptxas", text)


def test_command_line(handwritten, tmp_path) -> None:
    src = tmp_path / "scale.mlir"
    src.write_text(handwritten.source("scale"))
    sig = ", ".join(map(str, handwritten.signature("scale")))
    base = [sys.executable, "-m", "tileopt.compiler", str(src), "--start", "llvm",
            "--signature", sig, "--target", "sm_80"]
    out = subprocess.run([*base, "--emit", "ptx"], capture_output=True, text=True, check=True)
    assert ".target sm_80" in out.stdout and ".entry scale(" in out.stdout
    out = subprocess.run(base, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("kernel scale(x: view<?x?xf32>")
    cubin = tmp_path / "scale.cubin"
    subprocess.run([*base, "--emit", "cubin", "-o", str(cubin)], check=True)
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    saved = tmp_path / "scale.json"
    subprocess.run([*base, "--emit", "kernel", "-o", str(saved)], check=True)
    kernel = Kernel.load(saved)
    assert kernel.name == "scale" and kernel.asm["cubin"] == cubin.read_bytes()
    bad = subprocess.run([*base[:-4], "--target", "sm_80"], capture_output=True, text=True)
    assert bad.returncode == 1 and "pass signature=" in bad.stderr
