"""The emulator refuses instructions newer than a module's ``.target``, as ptxas does: its
rules (tileopt.emulator.targets) against ptxas's own verdicts on the same instructions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import tileopt.emulator as emu
from tileopt.compiler.tools import find_ptxas
from tileopt.emulator import targets

TARGETS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a"]

# One instruction of each rule, and some that no rule names (every target takes them).
INSTRUCTIONS = [
    "cp.async.ca.shared.global [%r5], [%rd1], 4;",
    "cp.async.cg.shared.global.L2::256B [%r5], [%rd1], 16;",
    "cp.async.mbarrier.arrive.shared.b64 [%r1];",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
    "{%r5,%r6}, {%f1,%f2,%f3,%f4};",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
    "{%r5,%r6}, {%f1,%f2,%f3,%f4};",
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r1,%r2,%r3,%r4}, {%r1,%r2,%r3,%r4}, "
    "{%r5,%r6}, {%r1,%r2,%r3,%r4};",
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
    "{%r5,%r6}, {%f1,%f2,%f3,%f4};",
    "redux.sync.add.u32 %r1, %r2, -1;",
    "cvt.rn.bf16.f32 %h1, %f1;",
    "cvt.f32.bf16 %f1, %h1;",
    "cvt.rn.f16x2.f32 %r1, %f1, %f2;",
    "cvt.rna.tf32.f32 %r1, %f1;",
    "cvt.rn.tf32.f32 %r1, %f1;",
    "cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2;",
    "cvt.rn.f16x2.e4m3x2 %r1, %h1;",
    "min.NaN.f32 %f1, %f2, %f3;",
    "min.xorsign.abs.f32 %f1, %f2, %f3;",
    "fma.rn.bf16 %h1, %h2, %h3, %h1;",
    "add.rn.bf16 %h1, %h2, %h3;",
    "ex2.approx.ftz.bf16 %h1, %h2;",
    "atom.global.add.noftz.bf16 %h1, [%rd1], %h2;",
    "red.global.add.v2.f32 [%rd1], {%f1, %f2};",
    "mbarrier.init.shared.b64 [%r1], 1;",
    "mbarrier.test_wait.parity.shared.b64 %p1, [%r1], %r2;",
    "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;",
    "mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r1], 16;",
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
    "[%rd1, {%r2, %r3}], [%r4];",
    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd1], [%r1], 16;",
    "cp.async.bulk.wait_group.read 0;",
    "elect.sync %r1|%p1, -1;",
    "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r1], {%r2, %r3};",
    "fence.proxy.async.shared::cta;",
    "fence.acq_rel.cluster;",
    "fence.mbarrier_init.release.cluster;",
    "barrier.cluster.arrive;",
    "griddepcontrol.wait;",
    "mapa.shared::cluster.u32 %r1, %r2, %r3;",
    "mov.u32 %r1, %cluster_ctarank;",
    "mov.u32 %r1, %clusterid.x;",
    "prefetch.tensormap [%rd1];",
    "discard.global.L2 [%rd1], 128;",
    "ld.global.L2::256B.f32 %f1, [%rd1];",
    "wgmma.fence.sync.aligned;",
    "setmaxnreg.inc.sync.aligned.u32 240;",
    # no rule: every target here takes them
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1,%r2,%r3,%r4}, [%r5];",
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2}, {%r5}, "
    "{%f1,%f2,%f3,%f4};",
    "match.any.sync.b32 %r1, %r2, -1;",
    "tanh.approx.f32 %f1, %f2;",
    "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;",
    "fence.proxy.alias;",
    "ld.acquire.gpu.global.u32 %r1, [%rd1];",
    "atom.global.add.noftz.f16x2 %r1, [%rd1], %r2;",
]

DECLS = """.reg .b32 %r<16>; .reg .b64 %rd<8>; .reg .pred %p<4>; .reg .f32 %f<8>; .reg .b16 %h<4>;
.shared .align 128 .b8 smem[4096];
"""
FIRST_LINE = 7  # of the instructions in the module below


def _module(target: str) -> str:
    body = "\n".join(INSTRUCTIONS)
    return (f".version 9.0\n.target {target}\n.address_size 64\n"
            f".visible .entry k(.param .u64 p)\n{{\n{DECLS}{body}\nret;\n}}\n")


def _refused_by_ptxas(ptxas: Path, target: str, tmp_path: Path) -> set[int]:
    """Indices into INSTRUCTIONS of the lines that ptxas refuses for ``target``."""
    src = tmp_path / f"{target}.ptx"
    src.write_text(_module(target))
    result = subprocess.run([str(ptxas), "-arch", target, str(src), "-o", "/dev/null"],
                            capture_output=True, text=True, timeout=120)
    lines = {int(m) for m in re.findall(r"line (\d+); error", result.stderr)}
    assert result.returncode == 0 or lines, result.stderr
    return {line - FIRST_LINE - 1 for line in lines}


@pytest.mark.parametrize("target", TARGETS)
def test_rules_refuse_what_ptxas_refuses(target: str, tmp_path: Path) -> None:
    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found (the nvidia-cuda-nvcc wheel, $TILEOPT_PTXAS or PATH)")
    refused = _refused_by_ptxas(ptxas, target, tmp_path)
    parsed = targets.parse_target(target)
    assert parsed is not None
    disagree = []
    for i, line in enumerate(INSTRUCTIONS):
        text = line.rstrip(";")
        opcode = text.split()[0]
        needed = targets.required_target(opcode, text)
        ours = needed is not None and not targets.allows(parsed, needed)
        if ours != (i in refused):
            disagree.append((text, "ptxas refuses" if i in refused else "ptxas takes"))
    assert not disagree, disagree


FP8_INSTRUCTIONS = [
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, "
    "{%r5,%r6}, {%f1,%f2,%f3,%f4};",
    "cvt.rn.satfinite.e5m2x2.f32 %h1, %f1, %f2;",
    "cvt.rn.f16x2.e4m3x2 %r1, %h1;",
    "cvt.rn.f16x2.f32 %r1, %f1, %f2;",  # no rule
]


@pytest.mark.parametrize("version", ["7.8", "8.0", "8.1", "8.3", "8.4"])
@pytest.mark.parametrize("target", ["sm_89", "sm_90"])
def test_version_rules_refuse_what_ptxas_refuses(target: str, version: str,
                                                 tmp_path: Path) -> None:
    """fp8 MMAs need PTX 8.4 and fp8 conversions on sm_89 PTX 8.1: the emulator refuses an
    older ``.version`` where ptxas does (sm_89 itself needs 7.8)."""
    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found (the nvidia-cuda-nvcc wheel, $TILEOPT_PTXAS or PATH)")
    for line in FP8_INSTRUCTIONS:
        ptx = (f".version {version}\n.target {target}\n.address_size 64\n"
               f".visible .entry k(.param .u64 p)\n{{\n{DECLS}{line}\nret;\n}}\n")
        src = tmp_path / "k.ptx"
        src.write_text(ptx)
        result = subprocess.run([str(ptxas), "-arch", target, str(src), "-o", "/dev/null"],
                                capture_output=True, text=True, timeout=120)
        try:
            emu.load_ptx(ptx)
            ours = True
        except emu.PTXLoadError as e:
            assert "needs .version" in str(e)
            ours = False
        assert ours == (result.returncode == 0), (line, result.stderr)


def test_load_names_the_instruction_and_both_targets() -> None:
    ptx = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k()
{
  .reg .pred %p<2>;
  .reg .b32 %r<2>;
  elect.sync %r1|%p1, -1;
  ret;
}
"""
    with pytest.raises(emu.PTXLoadError, match=r"line 8: `elect.sync %r1\|%p1, -1` needs \.target "
                       r"sm_90 or later, and the module's is sm_80"):
        emu.load_ptx(ptx)
    assert emu.load_ptx(ptx.replace("sm_80", "sm_90")).kernels == ["k"]
    with pytest.raises(emu.PTXLoadError, match="needs .target sm_90a only"):
        emu.load_ptx(ptx.replace("sm_80", "sm_90").replace(
            "elect.sync %r1|%p1, -1", "wgmma.fence.sync.aligned"))
