"""Negative tests: planted memory bugs (cuda/errors.cu) and unsupported PTX, reported precisely."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
import tileopt.emulator as emu
from tileopt.errors import EmulatorError

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]
SRC = "errors.cu"


def _assert_names_thread(msg: str, cta: tuple[int, int, int], tid: tuple[int, int, int]) -> None:
    """The message names the CTA and the thread (as 3-D coordinates, in any punctuation)."""
    coords = r"\D{0,4}".join(str(c) for c in cta)
    assert re.search(rf"\bCTA\b\D{{0,12}}{coords}\b", msg, re.IGNORECASE), (
        f"CTA {cta} not named in:\n{msg}"
    )
    coords = r"\D{0,4}".join(str(c) for c in tid)
    assert re.search(rf"\bthread\b\D{{0,12}}{coords}\b", msg, re.IGNORECASE), (
        f"thread {tid} not named in:\n{msg}"
    )


def _assert_names_buffer(msg: str, kernel: str, index: int) -> None:
    """The nearest buffer is named: by the kernel's parameter name or by argument index."""
    forms = [
        f"{kernel}_param_{index}",
        f"arg {index}",
        f"args[{index}]",
        f"argument {index}",
        f"arg{index}",
    ]
    assert any(f in msg for f in forms), f"buffer (argument {index}) not named in:\n{msg}"


def _ptx_line(ptx: str, fragment: str) -> int:
    """1-based line number of the only PTX line containing *fragment*."""
    hits = [i + 1 for i, line in enumerate(ptx.splitlines()) if fragment in line]
    assert len(hits) == 1, (fragment, hits)
    return hits[0]


def _kernel_lines(ptx: str, kernel: str) -> tuple[int, int]:
    lines = ptx.splitlines()
    start = next(i for i, line in enumerate(lines) if f".entry {kernel}(" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("}"))
    return start + 1, end + 1


def _assert_names_line(msg: str, ptx: str, kernel: str, opcode: str) -> None:
    """The message names a PTX line inside *kernel* that holds *opcode*."""
    lo, hi = _kernel_lines(ptx, kernel)
    lines = ptx.splitlines()
    named = [int(m) for m in re.findall(r"line\D{0,3}(\d+)", msg)]
    assert any(lo <= n <= hi and opcode in lines[n - 1] for n in named), (
        f"no line of {kernel} with {opcode} named in:\n{msg}"
    )
    assert opcode in msg, f"instruction {opcode} not named in:\n{msg}"


def test_memory_access_error_is_an_emulator_error() -> None:
    assert issubclass(emu.MemoryAccessError, EmulatorError)
    assert issubclass(emu.PTXLoadError, EmulatorError)
    assert issubclass(emu.UnsupportedInstructionError, EmulatorError)


@pytest.mark.parametrize("n,block", [(1000, 128), (64, 64), (5, 32)])
def test_global_read_one_past_end(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_read_past_end"
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(-(-n // block), 1, 1), block=(block, 1, 1), args=[x, y, n])
    msg = str(info.value)
    assert name in msg
    _assert_names_line(msg, k.ptx, name, "ld.global")
    last = n - 1
    _assert_names_thread(msg, (last // block, 0, 0), (last % block, 0, 0))
    _assert_names_buffer(msg, name, 0)
    assert "0x" in msg  # the address


def test_global_read_in_bounds_control(load_kernels: Loader, arch: str) -> None:
    """Control for the test above: with one spare element the same kernel runs cleanly."""
    k = load_kernels(SRC, arch)
    n = 1000
    x = np.arange(n + 1, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    k.module.launch("oob_read_past_end", grid=(8, 1, 1), block=(128, 1, 1), args=[x, y, n])
    np.testing.assert_array_equal(y, x[1:])


@pytest.mark.parametrize("n,block", [(100, 128), (256, 128)])
def test_global_write_one_past_end(load_kernels: Loader, arch: str, n: int, block: int) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_write_past_end"
    x = np.ones(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    grid = n // block + 1  # enough threads to reach i == n
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(grid, 1, 1), block=(block, 1, 1), args=[x, y, n])
    msg = str(info.value)
    assert name in msg
    _assert_names_line(msg, k.ptx, name, "st.global")
    _assert_names_thread(msg, (n // block, 0, 0), (n % block, 0, 0))
    _assert_names_buffer(msg, name, 1)


def test_global_read_negative_index(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_read_negative"
    x = np.ones(300, dtype=np.float32)
    y = np.zeros(300, dtype=np.float32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(3, 1, 1), block=(128, 1, 1), args=[x, y, 300])
    msg = str(info.value)
    assert name in msg
    _assert_names_line(msg, k.ptx, name, "ld.global")
    _assert_names_thread(msg, (0, 0, 0), (0, 0, 0))
    _assert_names_buffer(msg, name, 0)


def test_shared_overrun_static(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "smem_overrun"
    x = np.ones(64, dtype=np.float32)
    y = np.zeros(64, dtype=np.float32)
    k.module.launch(name, grid=(1, 1, 1), block=(64, 1, 1), args=[x, y, 0])  # control: in bounds
    np.testing.assert_array_equal(y, x)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(2, 1, 1), block=(64, 1, 1), args=[x, y, 1])
    msg = str(info.value)
    assert name in msg
    assert "shared" in msg.lower()
    _assert_names_line(msg, k.ptx, name, "st.shared")
    _assert_names_thread(msg, (0, 0, 0), (63, 0, 0))


def test_shared_overrun_dynamic(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "dyn_smem_overrun"
    x = np.arange(32, dtype=np.int32)
    y = np.zeros(32, dtype=np.int32)
    k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, 0], shared_bytes=128)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, 1], shared_bytes=128)
    msg = str(info.value)
    assert name in msg and "shared" in msg.lower()
    _assert_names_thread(msg, (0, 0, 0), (31, 0, 0))


def test_misaligned_i32(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "misaligned_i32"
    x = np.arange(64 * 4 + 8, dtype=np.uint8)
    y = np.zeros(64, dtype=np.int32)
    k.module.launch(name, grid=(2, 1, 1), block=(32, 1, 1), args=[x, y, 4])  # control: aligned
    np.testing.assert_array_equal(y, x[4 : 4 + 256].view(np.int32))
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(2, 1, 1), block=(32, 1, 1), args=[x, y, 2])
    msg = str(info.value)
    assert name in msg
    assert "align" in msg.lower()
    _assert_names_line(msg, k.ptx, name, "ld.global")
    _assert_names_thread(msg, (0, 0, 0), (0, 0, 0))
    _assert_names_buffer(msg, name, 0)


def test_misaligned_vector_v4(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "misaligned_v4"
    x = np.arange(4 * 32 + 4, dtype=np.float32)
    y = np.zeros((32, 4), dtype=np.float32)
    k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, 0])  # control: aligned
    np.testing.assert_array_equal(y.reshape(-1), x[:128])
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[x, y, 1])
    msg = str(info.value)
    assert name in msg and "align" in msg.lower()
    _assert_names_line(msg, k.ptx, name, "ld.global")
    _assert_names_thread(msg, (0, 0, 0), (0, 0, 0))


def test_wild_pointer_write(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "wild_write"
    y = np.zeros(16, dtype=np.float32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[y, 1 << 30])
    msg = str(info.value)
    assert name in msg
    _assert_names_line(msg, k.ptx, name, "st.global")
    _assert_names_thread(msg, (0, 0, 0), (5, 0, 0))


# ------------------------------------------------------------------------- unsupported PTX

_PTX_TEMPLATE = """\
//
// hand-written for the emulator's load-time checks
//
.version 8.0
.target sm_80
.address_size 64

.visible .entry ok_kernel(
	.param .u64 ok_kernel_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [ok_kernel_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 4;
	add.s64 	%rd2, %rd2, %rd3;
	st.global.u32 	[%rd2], %r1;
	ret;
}

.visible .entry bad_kernel(
	.param .u64 bad_kernel_param_0
)
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [bad_kernel_param_0];
	mov.u32 	%r1, %tid.x;
	{BAD}
	ret;
}
"""


def test_handwritten_ptx_loads_and_runs() -> None:
    """Control: the template without the bad line loads, lists its kernels and runs."""
    ptx = _PTX_TEMPLATE.replace("{BAD}", "add.s32 \t%r2, %r1, 3;")
    mod = emu.load_ptx(ptx)
    assert set(mod.kernels) == {"ok_kernel", "bad_kernel"}
    out = np.zeros(64, dtype=np.uint32)
    mod.launch("ok_kernel", grid=(1, 1, 1), block=(64, 1, 1), args=[out])
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32))


@pytest.mark.parametrize(
    "bad,opcode",
    [
        ("foo.bar.b32 \t%r2, %r1, 3;", "foo.bar"),
        (
            "tcgen05.mma.cta_group::1.kind::f16 \t[%rd1], %rd1, %rd2, %r1, 1;",
            "tcgen05.mma",
        ),
        ("@%p1 frobnicate.u32 \t%r2, %r1;", "frobnicate"),
    ],
)
def test_unsupported_instruction_load_time_error(bad: str, opcode: str) -> None:
    ptx = _PTX_TEMPLATE.replace("{BAD}", bad)
    if "%p1" in bad:
        ptx = ptx.replace(".reg .b32 \t%r<4>;", ".reg .pred \t%p<2>;\n\t.reg .b32 \t%r<4>;")
    line = _ptx_line(ptx, opcode)
    with pytest.raises(emu.PTXLoadError) as info:  # UnsupportedInstructionError or its base
        emu.load_ptx(ptx)
    msg = str(info.value)
    assert opcode in msg, msg
    assert re.search(rf"line\D{{0,3}}{line}\b", msg), f"line {line} not named in:\n{msg}"


def test_unsupported_instruction_class() -> None:
    ptx = _PTX_TEMPLATE.replace("{BAD}", "foo.bar.b32 \t%r2, %r1, 3;")
    with pytest.raises(emu.UnsupportedInstructionError):
        emu.load_ptx(ptx)


def test_syntax_error_names_line() -> None:
    ptx = _PTX_TEMPLATE.replace("{BAD}", "add.s32 \t%r2, %r1 3 ]];")
    line = _ptx_line(ptx, "]];")
    with pytest.raises(emu.PTXLoadError) as info:
        emu.load_ptx(ptx)
    assert re.search(rf"line\D{{0,3}}{line}\b", str(info.value)), str(info.value)


def test_vector_store_straddling_the_end(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_vector_straddle"
    y = np.zeros(10, dtype=np.float32)  # 2.5 float4s: thread 2 writes bytes 32..47 of 40
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[y, 10])
    msg = str(info.value)
    _assert_names_line(msg, k.ptx, name, "st.global.v4")
    _assert_names_thread(msg, (0, 0, 0), (2, 0, 0))
    _assert_names_buffer(msg, name, 0)


def test_out_of_bounds_atomic(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_atomic"
    data = np.zeros(300, dtype=np.int32)
    data[217] = 16  # bins has 16 entries
    bins = np.zeros(16, dtype=np.uint32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(3, 1, 1), block=(128, 1, 1), args=[data, bins, 300])
    msg = str(info.value)
    _assert_names_line(msg, k.ptx, name, "atom.global")
    _assert_names_thread(msg, (1, 0, 0), (89, 0, 0))
    _assert_names_buffer(msg, name, 1)


def test_out_of_bounds_inside_device_function(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_in_callee"
    x = np.zeros(100, dtype=np.float32)
    y = np.zeros(100, dtype=np.float32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(128, 1, 1), args=[x, y, 100])
    msg = str(info.value)
    assert name in msg
    assert "ld.global" in msg
    line = int(re.findall(r"line\D{0,3}(\d+)", msg)[0])
    assert "ld.global" in k.ptx.splitlines()[line - 1]  # the callee's load, wherever it lies
    _assert_names_thread(msg, (0, 0, 0), (98, 0, 0))
    _assert_names_buffer(msg, name, 0)


def test_cp_async_source_out_of_bounds(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "oob_cp_async"
    x = np.zeros(4 * 31, dtype=np.int32)  # thread 31's 16-byte chunk lies past the end
    out = np.zeros(32, dtype=np.int32)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[x, out, 4 * 31])
    msg = str(info.value)
    _assert_names_line(msg, k.ptx, name, "cp.async")
    _assert_names_thread(msg, (0, 0, 0), (31, 0, 0))
    _assert_names_buffer(msg, name, 0)


# ------------------------------------------------------------------------- launch errors


def test_launch_errors_are_reported(load_kernels: Loader) -> None:
    """Malformed launches raise an EmulatorError that says what is wrong (never run silently)."""
    mod = load_kernels("elementwise.cu", "sm_80").module
    a = np.zeros(64, dtype=np.float32)
    cases = [
        (
            dict(name="no_such_kernel", grid=(1, 1, 1), block=(32, 1, 1), args=[a, a, a, 1]),
            "no_such",
        ),
        (dict(name="vec_add", grid=(1, 1, 1), block=(32, 1, 1), args=[a, a, a]), "argument"),
        (dict(name="vec_add", grid=(0, 1, 1), block=(32, 1, 1), args=[a, a, a, 1]), "grid"),
        (dict(name="vec_add", grid=(1, 1, 1), block=(2048, 1, 1), args=[a, a, a, 1]), "block"),
    ]
    for kw, word in cases:
        name = kw.pop("name")
        with pytest.raises(EmulatorError) as info:
            mod.launch(name, **kw)
        assert word in str(info.value), str(info.value)


def test_non_integral_float_for_integer_param_is_rejected(load_kernels: Loader) -> None:
    """1.5 for an .s32/.u32 parameter is a caller bug: silently truncating it would hide it."""
    mod = load_kernels("elementwise.cu", "sm_80").module
    a = np.zeros(64, dtype=np.float32)
    with pytest.raises(EmulatorError):
        mod.launch("vec_add", grid=(1, 1, 1), block=(32, 1, 1), args=[a, a, a, 1.5])


# --------------------------------------------------------------- trap, assert and printf


def test_trap_aborts_the_launch(load_kernels: Loader, arch: str) -> None:
    k = load_kernels("trap.cu", arch)
    k.require("trap;")
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, dtype=np.int32)
    k.module.launch("with_trap", grid=(2, 1, 1), block=(32, 1, 1), args=[x, out])  # control
    np.testing.assert_array_equal(out, x)
    x[45] = -1
    with pytest.raises(EmulatorError) as info:
        k.module.launch("with_trap", grid=(2, 1, 1), block=(32, 1, 1), args=[x, out])
    msg = str(info.value)
    assert "with_trap" in msg and "trap" in msg
    _assert_names_thread(msg, (1, 0, 0), (13, 0, 0))


def test_device_printf_prints(compile_kernel: Callable[..., str],
                              capsys: pytest.CaptureFixture[str]) -> None:
    """printf calls the extern vprintf: the emulator formats each calling thread's line from
    the format string and the argument buffer (an int, a double promoted from the literal)."""
    ptx = compile_kernel("device_printf.cu", "sm_80")
    assert ".extern .func" in ptx and "vprintf" in ptx
    out = np.zeros(64, dtype=np.int32)
    stats = emu.load_ptx(ptx).launch("with_printf", grid=(2, 1, 1), block=(32, 1, 1),
                                     args=[out])
    assert out.sum() == 64
    lines = ["block 0 says 1.500000\n", "block 1 says 1.500000\n"]
    assert stats.printed == lines
    assert capsys.readouterr().out == "".join(lines)


def test_device_assert_aborts_the_launch(compile_kernel: Callable[..., str]) -> None:
    """assert calls the extern __assertfail: a failing one stops the launch with an error that
    names the assertion, its source line and the thread; a passing one does nothing."""
    ptx = compile_kernel("device_assert.cu", "sm_80")
    assert ".extern .func" in ptx and "__assertfail" in ptx
    mod = emu.load_ptx(ptx)
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, dtype=np.int32)
    mod.launch("with_assert", grid=(2, 1, 1), block=(32, 1, 1), args=[x, out])
    np.testing.assert_array_equal(out, x)
    x[39] = -3
    with pytest.raises(emu.DeviceAssertError) as info:
        mod.launch("with_assert", grid=(2, 1, 1), block=(32, 1, 1), args=[x, out])
    msg = str(info.value)
    assert re.search(r"`x\[i\] >= 0` failed at \S+\.cu:6 in void with_assert", msg), msg
    _assert_names_thread(msg, (1, 0, 0), (7, 0, 0))


def test_shared_overrun_through_pointer_in_callee(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "generic_smem_overrun"
    y = np.zeros(32, dtype=np.float32)
    k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[y, 0])  # control
    np.testing.assert_array_equal(y, 1.0)
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[y, 1])
    msg = str(info.value)
    assert name in msg and "shared" in msg.lower()
    _assert_names_thread(msg, (0, 0, 0), (31, 0, 0))


def test_local_array_overrun(load_kernels: Loader, arch: str) -> None:
    k = load_kernels(SRC, arch)
    name = "local_overrun"
    idx = np.arange(32, dtype=np.int32) % 16
    out = np.zeros(32, dtype=np.int32)
    k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[idx, out])  # control
    np.testing.assert_array_equal(out, idx * np.arange(32))
    idx[9] = 20
    with pytest.raises(emu.MemoryAccessError) as info:
        k.module.launch(name, grid=(1, 1, 1), block=(32, 1, 1), args=[idx, out])
    msg = str(info.value)
    assert name in msg and "local" in msg.lower()
    _assert_names_line(msg, k.ptx, name, "ld.local")
    _assert_names_thread(msg, (0, 0, 0), (9, 0, 0))


_CLUSTER_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out) .reqnctapercluster 2, 1, 1
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<5>;
  .shared .align 4 .b32 box[4];
  mov.u32 %r1, box;
  ACCESS
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r3;
  ret;
}
"""


@pytest.mark.parametrize(("access", "message"), [
    # another CTA's shared memory past the cluster (mapa of rank 5 in a cluster of 2)
    ("mapa.shared::cluster.u32 %r2, %r1, 5;\n  ld.shared::cluster.u32 %r3, [%r2];",
     r"names the CTA of rank 5 in a cluster of 2"),
    # a generic address past the shared window's first 16 MiB is not another CTA's
    ("cvta.shared.u64 %rd2, box;\n  add.s64 %rd3, %rd2, 16777216;\n  ld.u32 %r3, [%rd3];",
     r"Out-of-bounds"),
    # a plain .shared access does not read a mapa address as another CTA's
    ("mapa.shared::cluster.u32 %r2, %r1, 1;\n  ld.shared.u32 %r3, [%r2];",
     r"Out-of-bounds shared memory access"),
])
def test_distributed_shared_memory_out_of_bounds(access: str, message: str) -> None:
    module = emu.load_ptx(_CLUSTER_PTX.replace("ACCESS", access))
    with pytest.raises(emu.MemoryAccessError, match=message):
        module.launch("k", grid=2, block=32, args=[np.zeros(1, np.uint32)])


def test_distributed_shared_memory_in_bounds_control() -> None:
    # Each CTA stores its rank + 10 into its partner's box (mapa.shared::cluster, st), and
    # after barrier.cluster reads its own box; getctarank names the partner.
    access = """mov.u32 %r0, %cluster_ctarank;
  xor.b32 %r2, %r0, 1;
  mapa.shared::cluster.u32 %r2, %r1, %r2;
  add.u32 %r3, %r0, 10;
  st.shared::cluster.u32 [%r2], %r3;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  getctarank.shared::cluster.u32 %r2, %r2;
  ld.shared.u32 %r3, [box];
  mad.lo.u32 %r3, %r2, 100, %r3;
  mov.u32 %r2, %ctaid.x;
  mul.wide.u32 %rd4, %r2, 4;"""
    ptx = _CLUSTER_PTX.replace("ACCESS", access).replace(
        "st.global.u32 [%rd1], %r3;", "add.s64 %rd1, %rd1, %rd4;\n  st.global.u32 [%rd1], %r3;")
    out = np.zeros(4, np.uint32)
    emu.load_ptx(ptx).launch("k", grid=4, block=32, args=[out])
    partner = np.array([1, 0, 1, 0])
    np.testing.assert_array_equal(out, partner * 100 + partner + 10)
