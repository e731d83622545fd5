"""Emulator engine: arguments that share memory, buffers at unaligned offsets, and buffers the
emulator refuses (against numpy and torch)."""

from __future__ import annotations

import numpy as np
import pytest
import tileopt.emulator as emu

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# a[i] = 1.0 and b[i] = 2.0 for i < n: writes through two pointers.
TWO = (
    HEAD
    + """.visible .entry two(.param .u64 a, .param .u64 b, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [n];
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 bra END;
  mul.wide.u32 %rd1, %r1, 4;
  ld.param.u64 %rd2, [a];
  add.s64 %rd3, %rd2, %rd1;
  st.global.f32 [%rd3], 0f3F800000;
  ld.param.u64 %rd4, [b];
  add.s64 %rd5, %rd4, %rd1;
  st.global.f32 [%rd5], 0f40000000;
END:
  ret;
}
"""
)

# out[i] = the four floats at in + 16 * i, summed: one ld.global.v4.f32 per thread.
V4 = (
    HEAD
    + """.visible .entry v4(.param .u64 out, .param .u64 inp)
{
  .reg .b32 %r<2>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [inp];
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3];
  add.f32 %f5, %f1, %f2;
  add.f32 %f6, %f3, %f4;
  add.f32 %f7, %f5, %f6;
  ld.param.u64 %rd4, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd5, %rd4, %rd2;
  st.global.f32 [%rd5], %f7;
  ret;
}
"""
)


@pytest.mark.parametrize("lo,hi", [(0, 32), (32, 0)])
def test_overlapping_arrays_share_memory(lo: int, hi: int) -> None:
    """a and b overlap: each writes 16 elements, in either order nothing is restored stale."""
    mod = emu.load_ptx(TWO)
    buf = np.zeros(96, np.float32)
    a, b = buf[lo : lo + 64], buf[hi : hi + 64]
    mod.launch("two", grid=1, block=32, args=[a, b, 16])
    want = np.zeros(96, np.float32)
    want[lo : lo + 16] = 1
    want[hi : hi + 16] = 2
    np.testing.assert_array_equal(buf, want)


def test_torch_views_and_numpy_of_one_tensor_share_memory() -> None:
    torch = pytest.importorskip("torch")
    mod = emu.load_ptx(TWO)
    t = torch.zeros(80)
    mod.launch("two", grid=1, block=32, args=[t[40:], t[8:72].numpy(), 16])
    want = torch.zeros(80)
    want[8:24] = 2
    want[40:56] = 1
    assert torch.equal(t, want)


def test_pointers_into_one_buffer_share_memory() -> None:
    mod = emu.load_ptx(TWO)
    buf = np.zeros(64, np.float32)
    mod.launch("two", grid=1, block=32,
               args=[emu.Pointer(buf, 32 * 4), emu.Pointer(buf[:40], 0), 32])
    np.testing.assert_array_equal(buf, np.repeat(np.float32([2, 1]), 32))


def test_non_contiguous_array_stands_for_the_memory_it_reaches() -> None:
    """A pointer parameter gets the array's first element's address, as on a GPU: column 0 of
    ``buf`` is the pointer to ``buf[0, 0]``, from which the kernel writes 8 contiguous floats
    (row 0); they share memory with row 1, the other argument."""
    mod = emu.load_ptx(TWO)
    buf = np.zeros((8, 8), np.float32)
    mod.launch("two", grid=1, block=32, args=[buf[:, 0], buf[1], 8])
    want = np.zeros((8, 8), np.float32)
    want[0], want[1] = 1, 2
    np.testing.assert_array_equal(buf, want)


def test_write_into_a_read_only_array_is_refused() -> None:
    mod = emu.load_ptx(TWO)
    ro = np.zeros(16, np.float32)
    ro.flags.writeable = False
    rw = np.zeros(16, np.float32)
    with pytest.raises(emu.LaunchError, match=r"wrote into argument 1 \(b, .*read-only"):
        mod.launch("two", grid=1, block=32, args=[rw, ro, 4])
    assert not rw.any(), "nothing is written back when the launch fails"
    # A read-only view of a writable array that another argument writes through is fine.
    view = rw.view()
    view.flags.writeable = False
    mod.launch("two", grid=1, block=32, args=[view[8:], rw, 4])
    np.testing.assert_array_equal(rw[:12], [2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1])


@pytest.mark.parametrize("shift", [0, 1, 2, 3, 4])
def test_vector_loads_see_the_host_offset(shift: int) -> None:
    """A view 4 bytes into its allocation is 4 bytes off a 16-byte boundary in the emulator
    too: ld.v4 faults there as on a GPU, and works at a multiple of 16 bytes."""
    mod = emu.load_ptx(V4)
    base = np.arange(4 * 32 + 8, dtype=np.float32)
    inp = base[shift:][: 4 * 32]
    out = np.zeros(32, np.float32)
    if shift % 4:
        with pytest.raises(emu.MemoryAccessError, match="Misaligned 16-byte access") as info:
            mod.launch("v4", grid=1, block=32, args=[out, inp])
        assert "address must be a multiple of 16" in str(info.value)
    else:
        mod.launch("v4", grid=1, block=32, args=[out, inp])
        np.testing.assert_array_equal(out, inp.reshape(32, 4).sum(axis=1))


def test_vector_loads_on_offset_torch_views() -> None:
    torch = pytest.importorskip("torch")
    mod = emu.load_ptx(V4)
    t = torch.arange(4 * 32 + 4, dtype=torch.float32)
    out = torch.zeros(32)
    with pytest.raises(emu.MemoryAccessError, match="Misaligned 16-byte access"):
        mod.launch("v4", grid=1, block=32, args=[out, t[1:]])
    mod.launch("v4", grid=1, block=32, args=[out, t[4:]])
    assert torch.equal(out, t[4:].reshape(32, 4).sum(dim=1))


def test_fresh_allocations_are_256_byte_aligned() -> None:
    """Whatever malloc gave the host array, the kernel sees a cudaMalloc-like aligned start."""
    ptx = HEAD + """.visible .entry addr(.param .u64 out, .param .u64 p, .param .u64 q)
{
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [p];
  ld.param.u64 %rd3, [q];
  st.global.u64 [%rd1], %rd2;
  st.global.u64 [%rd1+8], %rd3;
  ret;
}
"""
    mod = emu.load_ptx(ptx)
    out = np.zeros(2, np.uint64)
    for n in (3, 100, 1000):
        a = np.zeros(n, np.float32)
        b = np.zeros(2 * n, np.int16)
        mod.launch("addr", grid=1, block=1, args=[out, a, b[5:]])
        assert int(out[0]) % 256 == 0
        assert int(out[1]) % 256 == 10


def test_non_native_byte_order_and_sparse_buffers_are_refused() -> None:
    mod = emu.load_ptx(TWO)
    with pytest.raises(emu.LaunchError, match=r"argument 1 \(b, .*big-endian.*newbyteorder"):
        mod.launch("two", grid=1, block=32, args=[np.zeros(4, np.float32), np.zeros(4, ">f4"), 4])
    torch = pytest.importorskip("torch")
    with pytest.raises(emu.LaunchError, match=r"argument 0 \(a, .*sparse_coo.*to_dense"):
        mod.launch("two", grid=1, block=32, args=[torch.zeros(4).to_sparse(), torch.zeros(4), 4])
