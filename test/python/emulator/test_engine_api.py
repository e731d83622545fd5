"""Emulator engine: launch argument handling, errors and the command line."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
import tileopt.emulator as emu
from tileopt.emulator.__main__ import main as cli_main

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry scale(.param .u64 out, .param .f32 a, .param .s32 b, .param .u64 c,
                      .param .align 4 .b8 s[8])
{
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  ld.param.f32 %f1, [a];
  ld.param.s32 %r2, [b];
  ld.param.u64 %rd1, [c];
  ld.param.v2.u32 {%r3, %r4}, [s];
  cvt.rn.f32.s32 %f2, %r2;
  add.f32 %f3, %f1, %f2;
  cvt.u32.u64 %r5, %rd1;
  add.u32 %r5, %r5, %r3;
  add.u32 %r5, %r5, %r4;
  cvt.rn.f32.u32 %f2, %r5;
  add.f32 %f3, %f3, %f2;
  ld.param.u64 %rd2, [out];
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.f32 [%rd4], %f3;
  ret;
}
"""


def test_scalar_and_struct_arguments_are_typed_by_params() -> None:
    mod = emu.load_ptx(PTX)
    out = np.zeros(8, np.float32)
    s = np.array([100, 1000], np.uint32).tobytes()
    stats = mod.launch("scale", grid=1, block=8, args=[out, 0.5, -3, np.uint64(10), s])
    np.testing.assert_array_equal(out, np.float32(0.5 - 3 + 1110))
    assert stats.kernel == "scale" and stats.block == (8, 1, 1)
    assert "kernel scale" in str(stats)


@pytest.mark.parametrize(
    "args,exc,match",
    [
        ([np.zeros(8, np.float32), 0.5, 2**40, 1, bytes(8)], emu.LaunchError, "does not fit"),
        ([np.zeros(8, np.float32), 0.5, 1, 1, bytes(4)], emu.LaunchError, "needs 8 bytes"),
        ([np.zeros(8, np.float32), np.zeros(2), 1, 1, bytes(8)], emu.LaunchError, "64-bit pointer"),
        ([np.zeros(8, np.float32), 0.5, "x", 1, bytes(8)], emu.LaunchError, "expected a number"),
        # an integer passed for a pointer is a wild pointer: caught at the first access
        ([1, 0.5, 1, 1, bytes(8)], emu.MemoryAccessError, "no buffers|nearest buffer"),
    ],
)
def test_bad_arguments(args, exc, match: str) -> None:
    mod = emu.load_ptx(PTX)
    with pytest.raises(exc, match=match):
        mod.launch("scale", grid=1, block=8, args=args)


def test_bad_launch_configuration() -> None:
    mod = emu.load_ptx(PTX)
    out = np.zeros(8, np.float32)
    args = [out, 0.5, 1, 1, bytes(8)]
    with pytest.raises(emu.LaunchError, match="no kernel 'nope'"):
        mod.launch("nope", grid=1, block=1, args=args)
    with pytest.raises(emu.LaunchError, match="at most 1024"):
        mod.launch("scale", grid=1, block=(64, 32), args=args)
    with pytest.raises(emu.LaunchError, match="positive"):
        mod.launch("scale", grid=0, block=1, args=args)
    with pytest.raises(emu.LaunchError, match="shared memory"):
        mod.launch("scale", grid=1, block=1, args=args, shared_bytes=1 << 20)


def test_cli_lists_kernels(tmp_path, capsys) -> None:
    f = tmp_path / "k.ptx"
    f.write_text(PTX)
    assert cli_main([str(f), "--list"]) == 0
    assert capsys.readouterr().out.split() == ["scale"]
    assert cli_main([str(f)]) == 0
    assert "scale(.u64 out, .f32 a" in capsys.readouterr().out
    bad = tmp_path / "bad.ptx"
    bad.write_text(PTX.replace("add.f32 %f3, %f1, %f2;", "frobnicate.f32 %f3, %f1;"))
    assert cli_main([str(bad)]) == 1
    assert "unsupported instruction `frobnicate.f32" in capsys.readouterr().err


def test_cli_bad_input_is_one_line_and_status_2(tmp_path, capsys) -> None:
    """A missing or unreadable file, a binary file and an unknown kernel: status 2 (as argparse)
    and one line on stderr that names the problem, never a traceback."""
    f = tmp_path / "k.ptx"
    f.write_text(PTX)
    binary = tmp_path / "k.cubin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xbe\xef" * 4)
    cases = [
        ([str(tmp_path / "missing.ptx")], "cannot read PTX file '.*missing.ptx': No such file"),
        ([str(tmp_path)], "cannot read PTX file .*: Is a directory"),
        ([str(binary)], "is not a PTX text file .*not a cubin"),
        ([str(f), "--kernel", "nope"], "no kernel 'nope' in .*; its kernels: scale"),
    ]
    for argv, message in cases:
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert err.startswith("python -m tileopt.emulator: error: "), err
        assert re.search(message, err), err
    assert cli_main([str(f), "--kernel", "scale"]) == 0
    assert "scale(.u64 out" in capsys.readouterr().out


def test_cli_runs_as_a_module(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tileopt.emulator", str(tmp_path / "missing.ptx")],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("No such file or directory")
