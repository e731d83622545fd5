"""Emulator engine: memory spaces, bounds/alignment errors, write-back, atomics and counters."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tileopt.emulator as emu

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"

# out[i] = in[i + off] for i < n  (global index), f32
COPY = (
    HEAD
    + """.visible .entry copy(.param .u64 out, .param .u64 inp, .param .s32 off, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  ld.param.u32 %r5, [n];
  setp.ge.u32 %p1, %r4, %r5;
  @%p1 bra END;
  ld.param.s32 %r6, [off];
  add.s32 %r7, %r4, %r6;
  ld.param.u64 %rd1, [inp];
  mul.wide.s32 %rd2, %r7, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  ld.param.u64 %rd4, [out];
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f1;
END:
  ret;
}
"""
)


def test_out_of_bounds_read_names_everything() -> None:
    mod = emu.load_ptx(COPY)
    src = np.arange(100, dtype=np.float32)
    dst = np.zeros(100, np.float32)
    mod.launch("copy", grid=1, block=128, args=[dst, src, 0, 100])
    np.testing.assert_array_equal(dst, src)
    dst[:] = -1
    with pytest.raises(emu.MemoryAccessError) as ei:
        mod.launch("copy", grid=4, block=32, args=[dst, src, 1, 100])
    msg = str(ei.value)
    assert "kernel 'copy'" in msg and "line 22" in msg and "ld.global.f32 %f1, [%rd3]" in msg
    assert "CTA (3, 0, 0), thread (3, 0, 0)" in msg
    assert "argument 1 (inp" in msg and "400 bytes" in msg
    assert (dst == -1).all(), "buffers must not be written back after a fault"
    with pytest.raises(emu.MemoryAccessError, match=r"CTA \(0, 0, 0\), thread \(0, 0, 0\)"):
        mod.launch("copy", grid=1, block=32, args=[dst, src, -1, 10])


def test_misaligned_global_access() -> None:
    ptx = COPY.replace(
        "mul.wide.s32 %rd2, %r7, 4;", "mul.wide.s32 %rd2, %r7, 4;\n  add.s64 %rd2, %rd2, 2;"
    )
    mod = emu.load_ptx(ptx)
    with pytest.raises(emu.MemoryAccessError, match="Misaligned 4-byte access"):
        mod.launch(
            "copy", grid=1, block=32, args=[np.zeros(8, np.float32), np.zeros(16, np.float32), 0, 8]
        )


def test_non_contiguous_arrays_pass_their_first_elements_address() -> None:
    """As on a GPU, the kernel gets the address of a strided view's first element and indexes
    the memory from there itself (the copy here is contiguous); what it writes there reaches
    the host memory under the view, including elements between the view's own."""
    mod = emu.load_ptx(COPY)
    base = np.zeros((10, 4), np.float32)
    view = base[:, 1]  # strided: elements 1, 5, 9, ... of base
    src = np.arange(10, dtype=np.float32)
    mod.launch("copy", grid=1, block=32, args=[view, src, 0, 10])
    want = np.zeros(40, np.float32)
    want[1:11] = src
    np.testing.assert_array_equal(base.reshape(-1), want)
    torch = pytest.importorskip("torch")
    storage = torch.zeros(4, 10)
    t = storage.t()  # non-contiguous, its first element storage[0, 0]
    s = torch.arange(40, dtype=torch.float32).reshape(10, 4)
    mod.launch("copy", grid=1, block=64, args=[t, s, 0, 40])
    assert torch.equal(storage.reshape(-1), s.reshape(-1))
    # A view whose first element is not its lowest address (numpy's negative strides).
    backwards = np.zeros(8, np.float32)
    mod.launch("copy", grid=1, block=32, args=[backwards[::-2], src, 3, 1])
    np.testing.assert_array_equal(backwards, [0, 0, 0, 0, 0, 0, 0, 3])


SET_HALF = (
    HEAD
    + """.visible .entry set_half(.param .u64 p, .param .u32 i, .param .u32 v, .param .u32 keep)
{
  .reg .pred %p<2>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra END;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r2, [i];
  mul.wide.u32 %rd2, %r2, 2;
  add.s64 %rd3, %rd1, %rd2;
  and.b64 %rd4, %rd3, -4;
  cvt.u32.u64 %r3, %rd3;
  and.b32 %r4, %r3, 3;
  shl.b32 %r5, %r4, 3;
  mov.b32 %r6, 65535;
  shl.b32 %r7, %r6, %r5;
  ld.param.u32 %r8, [keep];
  and.b32 %r7, %r7, %r8;
  not.b32 %r9, %r7;
  ld.param.u32 %r10, [v];
  shl.b32 %r11, %r10, %r5;
  ld.relaxed.gpu.global.b32 %r12, [%rd4];
LOOP:
  and.b32 %r13, %r12, %r9;
  or.b32 %r14, %r13, %r11;
  atom.relaxed.gpu.global.cas.b32 %r15, [%rd4], %r12, %r14;
  setp.ne.u32 %p1, %r15, %r12;
  mov.b32 %r12, %r15;
  @%p1 bra LOOP;
END:
  ret;
}
"""
)


def test_sub_word_atomic_on_the_word_a_buffer_shares() -> None:
    """LLVM's compare-and-swap loop for a 16-bit atomic (bf16 before sm_90) reads and swaps the
    4-byte word around the element, which reaches outside an array whose last element ends, or
    whose first begins, in the middle of a word: allowed, as a GPU does, while the bytes outside
    keep their value; a kernel that changes them is an error."""
    mod = emu.load_ptx(SET_HALF)
    a = np.zeros(5, np.float16)  # its last element shares a word with 2 bytes past its end
    mod.launch("set_half", grid=1, block=32, args=[a, 4, 0x3C00, 0xFFFFFFFF])
    np.testing.assert_array_equal(a, [0, 0, 0, 0, 1])
    base = np.zeros(8, np.float16)
    view = base[1:5]  # its first element shares a word with the byte before it
    mod.launch("set_half", grid=1, block=32, args=[view, 0, 0x4000, 0xFFFFFFFF])
    np.testing.assert_array_equal(base, [0, 2, 0, 0, 0, 0, 0, 0])
    # keep=0: the swap writes the whole word, the half outside the array too
    with pytest.raises(emu.MemoryAccessError, match=r"changed 2 byte\(s\) outside argument 0"):
        mod.launch("set_half", grid=1, block=32, args=[a, 4, 0x3C013C00, 0])
    with pytest.raises(emu.MemoryAccessError, match="Out-of-bounds"):  # a word wholly outside
        mod.launch("set_half", grid=1, block=32, args=[a, 6, 0x3C00, 0xFFFFFFFF])


def test_same_array_twice_aliases() -> None:
    mod = emu.load_ptx(COPY)
    a = np.arange(64, dtype=np.float32)
    mod.launch("copy", grid=1, block=32, args=[a, a, 32, 32])  # a[i] = a[i + 32]
    np.testing.assert_array_equal(a[:32], np.arange(32, 64))


SHARED = (
    HEAD
    + """.visible .entry sh(.param .u64 out, .param .u32 stride)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 tile[1024];
  .extern .shared .align 16 .b8 dyn[];
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [stride];
  mul.lo.u32 %r3, %r1, %r2;
  shl.b32 %r3, %r3, 2;
  mov.u32 %r4, tile;
  add.u32 %r5, %r4, %r3;
  st.shared.u32 [%r5], %r1;
  mov.u32 %r6, dyn;
  shl.b32 %r7, %r1, 2;
  add.u32 %r6, %r6, %r7;
  st.shared.u32 [%r6], %r1;
  bar.sync 0;
  // generic load of the dynamic slot through cvta
  cvta.shared.u64 %rd1, dyn;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd1, %rd1, %rd2;
  ld.u32 %r8, [%rd1];
  ld.shared.u32 %r9, [%r5];
  add.u32 %r8, %r8, %r9;
  ld.param.u64 %rd3, [out];
  add.s64 %rd4, %rd3, %rd2;
  st.global.u32 [%rd4], %r8;
  ret;
}
"""
)


@pytest.mark.parametrize("stride,conflicts", [(1, 0), (2, 1), (32, 31), (33, 0)])
def test_shared_bank_conflicts_and_generic_shared(stride: int, conflicts: int) -> None:
    mod = emu.load_ptx(SHARED)
    out = np.zeros(32, np.uint32)
    if stride * 32 * 4 > 1024:
        with pytest.raises(
            emu.MemoryAccessError,
            match=r"shared memory is \[0x0, 0x480\) \(1152 bytes: 1024 static",
        ):
            mod.launch("sh", grid=1, block=32, args=[out, stride], shared_bytes=128)
        return
    st = mod.launch("sh", grid=2, block=32, args=[out, stride], shared_bytes=128)
    np.testing.assert_array_equal(out, 2 * np.arange(32))
    # two CTAs x (st.shared tile, ld.shared tile) have the conflicts; dyn accesses are conflict free
    assert st.shared_bank_conflicts == 2 * 2 * conflicts
    with pytest.raises(emu.MemoryAccessError, match="Out-of-bounds shared"):
        mod.launch("sh", grid=1, block=32, args=[out, stride], shared_bytes=64)


def test_sector_counting_coalesced_vs_strided() -> None:
    mod = emu.load_ptx(COPY)
    src = np.arange(4096, dtype=np.float32)
    dst = np.zeros(1024, np.float32)
    st = mod.launch("copy", grid=8, block=128, args=[dst, src, 0, 1024])
    assert st.global_load_requests == 32 and st.global_load_sectors == 32 * 4
    assert st.global_load_bytes == 4096 and st.global_store_sectors == 128
    assert st.instructions_by_class["ld.global"] == 32


LOCAL = (
    HEAD
    + """.visible .entry loc(.param .u64 out)
{
  .local .align 4 .b8 depot[64];
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd1, depot;
  cvta.local.u64 %rd2, %rd1;
  st.local.u32 [depot+60], %r1;
  mul.lo.u32 %r2, %r1, 3;
  st.u32 [%rd2+4], %r2;          // generic store into local memory
  ld.local.u32 %r3, [depot+4];
  ld.local.u32 %r4, [depot+60];
  add.u32 %r5, %r3, %r4;
  ld.param.u64 %rd3, [out];
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.global.u32 [%rd5], %r5;
  ld.local.u32 %r6, [depot+64];
  ret;
}
"""
)


def test_local_memory_per_thread_and_bounds() -> None:
    mod = emu.load_ptx(LOCAL.replace("  ld.local.u32 %r6, [depot+64];\n", ""))
    out = np.zeros(64, np.uint32)
    mod.launch("loc", grid=1, block=64, args=[out])
    np.testing.assert_array_equal(out, 4 * np.arange(64))
    with pytest.raises(emu.MemoryAccessError, match="local memory"):
        emu.load_ptx(LOCAL).launch("loc", grid=1, block=32, args=[out])


ATOM = (
    HEAD
    + """.visible .entry at(.param .u64 hist, .param .u64 keys, .param .u64 old, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  ld.param.u32 %r5, [n];
  setp.ge.u32 %p1, %r4, %r5;
  @%p1 bra END;
  ld.param.u64 %rd1, [keys];
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r6, [%rd3];
  ld.param.u64 %rd4, [hist];
  mul.wide.u32 %rd5, %r6, 4;
  add.s64 %rd6, %rd4, %rd5;
  OP
  ld.param.u64 %rd7, [old];
  add.s64 %rd8, %rd7, %rd2;
  st.global.u32 [%rd8], %r7;
END:
  ret;
}
"""
)


def test_atomic_add_histogram_returns_distinct_old_values() -> None:
    mod = emu.load_ptx(ATOM.replace("OP", "atom.global.add.u32 %r7, [%rd6], 1;"))
    rng = np.random.default_rng(0)
    n = 5000
    keys = rng.integers(0, 7, n).astype(np.uint32)
    hist = np.full(7, 10, np.uint32)
    old = np.zeros(n, np.uint32)
    st = mod.launch("at", grid=(n + 255) // 256, block=256, args=[hist, keys, old, n])
    np.testing.assert_array_equal(hist, 10 + np.bincount(keys, minlength=7))
    for k in range(7):  # the old values of one bin are a permutation of 10..10+count-1
        got = np.sort(old[keys == k])
        np.testing.assert_array_equal(got, 10 + np.arange(got.size))
    assert st.instructions_by_class["atom"] > 0


@pytest.mark.parametrize(
    "op,ref",
    [
        ("atom.global.max.s32 %r7, [%rd6], %r4;", lambda h, k, i: np.maximum.reduce),
        ("atom.global.exch.b32 %r7, [%rd6], %r4;", None),
        ("atom.global.cas.b32 %r7, [%rd6], 0, %r4;", None),
        ("atom.global.inc.u32 %r7, [%rd6], 3;", None),
    ],
)
def test_atomics_sequential_semantics(op: str, ref) -> None:
    mod = emu.load_ptx(ATOM.replace("OP", op))
    n = 64
    keys = (np.arange(n) % 3).astype(np.uint32)
    hist = np.zeros(3, np.uint32)
    old = np.zeros(n, np.uint32)
    mod.launch("at", grid=1, block=64, args=[hist, keys, old, n])
    # model: threads apply the op one after another in some order; check with thread order
    mem = [0, 0, 0]
    exp_old = []
    for i in range(n):
        k = int(keys[i])
        o = mem[k]
        exp_old.append(o)
        if "max" in op:
            mem[k] = max(o, i)
        elif "exch" in op:
            mem[k] = i
        elif "cas" in op:
            mem[k] = i if o == 0 else o
        else:
            mem[k] = 0 if o >= 3 else o + 1
    np.testing.assert_array_equal(hist, mem)
    np.testing.assert_array_equal(old, exp_old)


def test_red_float_add_shared_and_global() -> None:
    ptx = (
        HEAD
        + """.visible .entry r(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<4>;
  .shared .align 4 .f32 acc;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, acc;
  st.shared.f32 [%r2], 0f00000000;
  bar.sync 0;
  cvt.rn.f32.u32 %f1, %r1;
  red.shared.add.f32 [%r2], %f1;
  bar.sync 0;
  ld.shared.f32 %f2, [%r2];
  ld.param.u64 %rd1, [out];
  red.global.add.f32 [%rd1], %f2;
  ret;
}
"""
    )
    out = np.zeros(1, np.float32)
    emu.load_ptx(ptx).launch("r", grid=3, block=128, args=[out])
    assert out[0] == 3 * sum(range(128)) * 128


def _vector_atomic(ins: str) -> str:
    """Thread t: f1..f4 = t, t+1, t+2, t+3 (and r5 = the bits of half 1.0 twice); %rd3 =
    out + 16 * (t % 8); runs ``ins``, then stores f5..f6 (a vector atom's old values) at
    old + 8 * t."""
    return (
        ".version 8.1\n.target sm_90a\n.address_size 64\n"
        + """.visible .entry k(.param .u64 out, .param .u64 old)
{
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  cvt.rn.f32.u32 %f1, %r1;
  add.f32 %f2, %f1, 0f3F800000;
  add.f32 %f3, %f2, 0f3F800000;
  add.f32 %f4, %f3, 0f3F800000;
  mov.b32 %r5, 0x3C003C00;
  ld.param.u64 %rd1, [out];
  and.b32 %r2, %r1, 7;
  mul.wide.u32 %rd2, %r2, 16;
  add.s64 %rd3, %rd1, %rd2;
  mov.f32 %f5, 0f00000000;
  mov.f32 %f6, 0f00000000;
  """ + ins + """
  ld.param.u64 %rd4, [old];
  mul.wide.u32 %rd5, %r1, 8;
  add.s64 %rd6, %rd4, %rd5;
  st.global.v2.f32 [%rd6], {%f5, %f6};
  ret;
}
"""
    )


def test_vector_red_adds_every_element() -> None:
    """sm_90's vector reductions (Triton's tl.atomic_add of f32 tiles): each element of the
    vector is one atomic add at its place."""
    out, old = np.zeros(32, np.float32), np.zeros(128, np.float32)
    emu.load_ptx(_vector_atomic(
        "red.global.gpu.relaxed.add.v4.f32 [%rd3], {%f1, %f2, %f3, %f4};"
    )).launch("k", grid=1, block=64, args=[out, old])
    expected = np.zeros(32)
    for t in range(64):
        expected[4 * (t % 8):4 * (t % 8) + 4] += t + np.arange(4)
    assert np.array_equal(out, expected)


def test_vector_atom_returns_each_old_value() -> None:
    out, old = np.zeros(32, np.float32), np.zeros(64, np.float32)
    emu.load_ptx(_vector_atomic(
        "atom.global.add.v2.f32 {%f5, %f6}, [%rd3], {%f1, %f2};"
    )).launch("k", grid=1, block=8, args=[out, old])
    # one thread an address: the old values are the zeros before
    assert np.array_equal(old[:16], np.zeros(16))
    assert np.array_equal(out.reshape(8, 4)[:, :2], np.stack([np.arange(8), np.arange(8) + 1], 1))


def test_vector_red_of_half_pairs() -> None:
    out, old = np.zeros(64, np.float16), np.zeros(64, np.float32)
    emu.load_ptx(_vector_atomic(
        "red.global.add.noftz.v2.f16x2 [%rd3], {%r5, %r5};"
    )).launch("k", grid=1, block=16, args=[out, old])
    # 16 threads, two on each 16-byte slot's first 8 bytes (four halves of 1.0 each)
    expected = np.zeros((8, 8), np.float16)
    expected[:, :4] = 2.0
    assert np.array_equal(out.reshape(8, 8), expected)


@pytest.mark.parametrize(
    ("ins", "what"),
    [
        ("red.global.add.v4.f32 [%rd3], {%f1, %f2};", "expects a vector of 4 operands"),
        ("red.global.add.v4.s32 [%rd3], {%r1, %r1, %r1, %r1};", "vector red.add .v4.s32"),
        ("red.shared.add.v2.f32 [%r1], {%f1, %f2};", "on .shared"),
        ("red.global.min.v2.f32 [%rd3], {%f1, %f2};", "vector red.min .v2.f32"),
        ("red.global.add.v8.f32 [%rd3], {%f1, %f2, %f3, %f4, %f1, %f2, %f3, %f4};",
         "vector red.add .v8.f32"),
    ],
)
def test_vector_atomics_ptx_lacks_are_refused(ins: str, what: str) -> None:
    with pytest.raises(emu.PTXLoadError, match=re.escape(what)):
        emu.load_ptx(_vector_atomic(ins))


def test_vector_red_must_be_aligned_to_its_size() -> None:
    with pytest.raises(emu.MemoryAccessError, match="Misaligned 16-byte access"):
        emu.load_ptx(_vector_atomic(
            "add.s64 %rd7, %rd3, 4;\n  red.global.add.v4.f32 [%rd7], {%f1, %f2, %f3, %f4};"
        )).launch("k", grid=1, block=8, args=[np.zeros(40, np.float32), np.zeros(64, np.float32)])


def test_module_global_variable_persists_and_cp_async_zero_fill() -> None:
    ptx = (
        HEAD
        + """.global .align 4 .u32 counter;
.visible .entry cp(.param .u64 out, .param .u64 inp, .param .u32 valid)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 s[512];
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [valid];
  shl.b32 %r3, %r1, 4;
  sub.u32 %r4, %r2, %r3;
  min.s32 %r4, %r4, 16;
  max.s32 %r4, %r4, 0;
  mov.u32 %r5, s;
  add.u32 %r5, %r5, %r3;
  ld.param.u64 %rd1, [inp];
  cvt.u64.u32 %rd2, %r3;
  add.s64 %rd3, %rd1, %rd2;
  cp.async.cg.shared.global [%r5], [%rd3], 16, %r4;
  cp.async.commit_group;
  cp.async.wait_group 0;
  bar.sync 0;
  ld.shared.v4.u32 {%r1, %r2, %r6, %r7}, [%r5];
  ld.param.u64 %rd4, [out];
  add.s64 %rd5, %rd4, %rd2;
  st.global.v4.u32 [%rd5], {%r1, %r2, %r6, %r7};
  mov.u64 %rd6, counter;
  atom.global.add.u32 %r1, [%rd6], 1;
  ret;
}
"""
    )
    mod = emu.load_ptx(ptx)
    src = np.arange(1, 31, dtype=np.uint32)  # 120 bytes: the last copies are partial / empty
    out = np.full(128, 99, np.uint32)
    mod.launch("cp", grid=1, block=32, args=[out, src, 120])
    np.testing.assert_array_equal(out[:30], src)
    assert (out[30:] == 0).all()
    mod.launch("cp", grid=1, block=32, args=[out, src, 120])
    assert int.from_bytes(mod.read_global("counter"), "little") == 64


def test_results_and_counters_do_not_depend_on_chunking() -> None:
    mod = emu.load_ptx(ATOM.replace("OP", "atom.global.add.u32 %r7, [%rd6], 1;"))
    rng = np.random.default_rng(5)
    n = 3000
    keys = rng.integers(0, 50, n).astype(np.uint32)
    results = []
    for chunk in (64, 1000, 1 << 16):
        hist = np.zeros(50, np.uint32)
        old = np.zeros(n, np.uint32)
        st = mod.launch(
            "at",
            grid=(n + 127) // 128,
            block=128,
            args=[hist, keys, old, n],
            max_threads_per_chunk=chunk,
        )
        results.append(
            (hist.copy(), st.instructions, st.global_load_sectors, st.thread_instructions)
        )
    for r in results[1:]:
        np.testing.assert_array_equal(r[0], results[0][0])
        assert r[1:] == results[0][1:]


def test_infinite_loop_hits_step_limit() -> None:
    ptx = HEAD + ".visible .entry spin()\n{\nL:\n  bra.uni L;\n}\n"
    with pytest.raises(emu.EmulatorError, match="infinite loop"):
        emu.load_ptx(ptx).launch("spin", grid=1, block=32, args=[], max_steps=1000)


@pytest.mark.parametrize(
    "op,dtype,ref",
    [
        ("atom.global.add.f64 %rd9, [%rd6], %rd8;", np.float64, "add"),
        ("atom.global.min.u64 %rd9, [%rd6], %rd8;", np.uint64, "min"),
        ("atom.global.max.s64 %rd9, [%rd6], %rd8;", np.int64, "max"),
        ("atom.global.add.noftz.f16x2 %r9, [%rd6], %r8;", np.float16, "add2"),
        ("atom.global.or.b32 %r9, [%rd6], %r8;", np.uint32, "or"),
    ],
)
def test_atomics_other_types(op: str, dtype, ref: str) -> None:
    wide = np.dtype(dtype).itemsize == 8
    size = 8 if wide else 4
    ptx = (
        HEAD
        + f""".visible .entry a(.param .u64 dst, .param .u64 src)
{{
  .reg .b32 %r<10>;
  .reg .b64 %rd<10>;
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 3;
  ld.param.u64 %rd1, [dst];
  mul.wide.u32 %rd2, %r2, {size};
  add.s64 %rd6, %rd1, %rd2;
  ld.param.u64 %rd3, [src];
  mul.wide.u32 %rd4, %r1, {size};
  add.s64 %rd5, %rd3, %rd4;
  ld.global.b{8 * size} {"%rd8" if wide else "%r8"}, [%rd5];
  {op}
  ret;
}}
"""
    )
    rng = np.random.default_rng(7)
    n = 96
    if ref == "add2":
        src = (rng.integers(-8, 8, 2 * n) * 0.25).astype(np.float16)
        dst = np.zeros(8, np.float16)
        emu.load_ptx(ptx).launch("a", grid=1, block=n, args=[dst, src])
        exp = src.reshape(n, 2).astype(np.float64).reshape(n // 4, 4, 2).sum(0).reshape(8)
        np.testing.assert_array_equal(dst, exp.astype(np.float16))
        return
    if dtype == np.float64:
        src = rng.integers(-100, 100, n).astype(np.float64) * 0.5
    else:
        src = rng.integers(0 if dtype != np.int64 else -(2**40), 2**40, n).astype(dtype)
    init = {"add": 0, "min": np.iinfo(np.uint64).max, "max": np.iinfo(np.int64).min, "or": 0}[ref]
    dst = np.full(4, init, dtype)
    emu.load_ptx(ptx).launch("a", grid=1, block=n, args=[dst, src])
    groups = src.reshape(n // 4, 4)
    exp = {
        "add": lambda g: g.sum(0),
        "min": lambda g: g.min(0),
        "max": lambda g: g.max(0),
        "or": lambda g: np.bitwise_or.reduce(g, axis=0),
    }[ref](groups)
    np.testing.assert_array_equal(dst, exp.astype(dtype))


def _one_thread(body: str, buf: np.ndarray, extra: str = "") -> None:
    """Run `body` on one thread with %rd1 = the address of `buf` (sm_90: every atomic form)."""
    ptx = (
        HEAD.replace("sm_80", "sm_90")
        + f""".visible .entry k(.param .u64 buf)
{{
  .reg .b16 %h<4>;
  .reg .b32 %r<8>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;
  {extra}
  ld.param.u64 %rd1, [buf];
  {body}
  ret;
}}
"""
    )
    emu.load_ptx(ptx).launch("k", grid=1, block=1, args=[buf])


def test_atom_add_f32_flushes_subnormals_on_global_memory_only() -> None:
    # PTX ISA (atom, red): atom.add.f32 on global memory flushes subnormal inputs and results
    # to sign-preserving zero; on shared memory it keeps them.
    tiny = 0x00000001  # the smallest subnormal
    buf = np.array([tiny, 0x00C00000, 0x80000001, 0, 0, 0], np.uint32)
    _one_thread(f"""mov.b32 %f1, {tiny};
  atom.global.add.f32 %f2, [%rd1], %f1;      // tiny + tiny: both inputs flush
  mov.b32 %r1, %f2;
  st.global.u32 [%rd1+12], %r1;              // the old value is memory's, unflushed
  mov.b32 %f3, 0x80800000;
  red.global.add.f32 [%rd1+4], %f3;          // 1.5 * 2^-126 - 2^-126: a subnormal result
  mov.b32 %f5, 0x80000001;
  red.add.f32 [%rd1+8], %f5;                 // generic into global: -tiny + -tiny = -0
  mov.u32 %r2, sm;
  st.shared.u32 [%r2], {tiny};
  atom.shared.add.f32 %f4, [%r2], %f1;       // shared: tiny + tiny = 2 * tiny
  ld.shared.u32 %r3, [%r2];
  st.global.u32 [%rd1+16], %r3;""", buf, ".shared .align 4 .b8 sm[4];")
    np.testing.assert_array_equal(buf, [0, 0, 0x80000000, tiny, 2 * tiny, 0])


def test_address_offsets_wrap_modulo_2_64() -> None:
    # PTX address arithmetic is modulo 2^64: [%rd+0xFFFFFFFFFFFFFFF0] is %rd - 16.
    buf = np.arange(8, dtype=np.uint32)
    _one_thread("""add.s64 %rd2, %rd1, 32;
  ld.global.u32 %r1, [%rd2+0xFFFFFFFFFFFFFFF0];
  st.global.u32 [%rd1], %r1;""", buf)
    assert buf[0] == 4
    # an absolute address above 2^63 is out of bounds, not an overflow in the emulator
    for body in ["ld.global.u32 %r1, [0x8000000000000000];",
                 "atom.global.add.u32 %r1, [0xFFFFFFFFFFFFFFFF], 1;"]:
        with pytest.raises(emu.MemoryAccessError, match="global address 0x[8f]"):
            _one_thread(body, buf)


@pytest.mark.parametrize(("body", "message"), [
    ("st.const.u32 [%rd1], 7;", "st has no .const state space"),
    ("mov.b16 %h1, 0x3C00;\n  atom.global.add.f16 %h2, [%rd1], %h1;",
     "atom.add.f16 requires .noftz"),
    ("red.global.add.bf16x2 [%rd1], %r1;", "red.add.bf16x2 requires .noftz"),
])
def test_stores_and_atomics_ptx_lacks_are_load_errors(body: str, message: str) -> None:
    with pytest.raises(emu.PTXLoadError, match=re.escape(message)):
        _one_thread(body, np.zeros(4, np.uint32))
