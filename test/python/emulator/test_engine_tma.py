"""Emulator engine: Hopper bulk copies and TMA (cp.async.bulk{.tensor}), bulk groups, tensor
maps made on the host (tileopt.runtime.tma.TensorMap) and on the device (tensormap.replace),
checked against a numpy model of the box, the out-of-bounds fill and the swizzle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tileopt.emulator as emu
from tileopt.runtime.tma import DataType, OOBFill, Swizzle, TensorMap

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"
THREADS = 128


def _coords(rank: int, first: int = 20) -> tuple[str, str, str]:
    """(.param declarations, ld.param lines, the {...} operand) of *rank* coordinates."""
    params = "".join(f", .param .s32 c{i}" for i in range(rank))
    loads = "".join(f"  ld.param.s32 %r{first + i}, [c{i}];\n" for i in range(rank))
    return params, loads, "{" + ", ".join(f"%r{first + i}" for i in range(rank)) + "}"


def load_kernel(rank: int, dst_offset: int = 0) -> str:
    """Thread 0 loads the box at the coordinates into `tile + dst_offset` (expect_tx nbytes);
    every thread waits on the mbarrier, then the CTA copies the tile's raw bytes to out."""
    params, loads, crd = _coords(rank)
    return (
        HEAD
        + f""".visible .entry tma_load(.param .align 64 .b8 tmap[128], .param .u64 out,
    .param .u32 nbytes{params})
{{
  .reg .pred %p<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<10>;
  .shared .align 1024 .b8 tile[20480];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, tile;
  add.u32 %r3, %r3, {dst_offset};
  ld.param.u32 %r6, [nbytes];
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra SYNC;
  mbarrier.init.shared::cta.b64 [%r2], 1;
{loads}  mov.b64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], %r6;
  cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
      [%r3], [%rd2, {crd}], [%r2];
SYNC:
  bar.sync 0;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  ld.param.u64 %rd3, [out];
  shl.b32 %r7, %r1, 4;
COPY:
  setp.ge.u32 %p3, %r7, %r6;
  @%p3 bra DONE;
  add.u32 %r8, %r3, %r7;
  ld.shared.v4.u32 {{%r10, %r11, %r12, %r13}}, [%r8];
  cvt.u64.u32 %rd4, %r7;
  add.s64 %rd5, %rd3, %rd4;
  st.global.v4.u32 [%rd5], {{%r10, %r11, %r12, %r13}};
  add.u32 %r7, %r7, {16 * THREADS};
  bra COPY;
DONE:
  ret;
}}
"""
    )


def store_kernel(rank: int, wait: str = "cp.async.bulk.wait_group.read 0;") -> str:
    """The CTA copies raw bytes from src into the tile; thread 0 stores the box at the
    coordinates with a bulk-group TMA store."""
    params, loads, crd = _coords(rank)
    return (
        HEAD
        + f""".visible .entry tma_store(.param .align 64 .b8 tmap[128], .param .u64 src,
    .param .u32 nbytes{params})
{{
  .reg .pred %p<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<10>;
  .shared .align 1024 .b8 tile[20480];
  mov.u32 %r1, %tid.x;
  mov.u32 %r3, tile;
  ld.param.u32 %r6, [nbytes];
  ld.param.u64 %rd3, [src];
  shl.b32 %r7, %r1, 4;
COPY:
  setp.ge.u32 %p3, %r7, %r6;
  @%p3 bra STORE;
  add.u32 %r8, %r3, %r7;
  cvt.u64.u32 %rd4, %r7;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd5];
  st.shared.v4.u32 [%r8], {{%r10, %r11, %r12, %r13}};
  add.u32 %r7, %r7, {16 * THREADS};
  bra COPY;
STORE:
  fence.proxy.async.shared::cta;
  bar.sync 0;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
{loads}  mov.b64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [%rd2, {crd}], [%r3];
  cp.async.bulk.commit_group;
  {wait}
DONE:
  ret;
}}
"""
    )


# ---------------------------------------------------------------- the numpy model


def _box_positions(tm: TensorMap, coords, dst: int = 0):
    """Yield (index into the tensor or None when outside it, shared byte address) for each
    element of the box, in the hardware's order, swizzle applied per 16-byte chunk."""
    counts = tm.box_elements
    esize = tm.element_size
    span = tm.swizzle.span
    rank = tm.rank
    for lin, idx in enumerate(itertools.product(*[range(c) for c in reversed(counts)])):
        k = idx[::-1]  # innermost first
        g = [coords[0] + k[0]] + [coords[i] + k[i] * tm.element_strides[i] for i in range(1, rank)]
        inside = all(0 <= g[i] < tm.global_dims[i] for i in range(rank))
        addr = dst + lin * esize
        if span:
            row = addr // 128
            chunk = (addr // 16) % 8
            addr = (addr // 128) * 128 + ((chunk ^ (row % (span // 16))) * 16) + addr % 16
        yield (tuple(reversed(g)) if inside else None), addr


def model_load(tm: TensorMap, coords, dst: int = 0) -> np.ndarray:
    """The bytes a TMA load leaves in shared memory from `dst` (box bytes, swizzled)."""
    a = np.asarray(tm.base)
    out = np.zeros(tm.box_bytes + dst, np.uint8)
    if tm.oob_fill == OOBFill.NAN:  # the all-ones-payload positive NaN
        fill = np.frombuffer({2: b"\xff\x7f", 4: b"\xff\xff\xff\x7f"}[a.itemsize], np.uint8)
    else:
        fill = np.zeros(a.itemsize, np.uint8)
    for where, addr in _box_positions(tm, coords, dst):
        v = fill if where is None else np.array(a[where]).reshape(1).view(np.uint8)
        out[addr : addr + a.itemsize] = v
    return out[dst:]


def model_store(tm: TensorMap, coords, tile: np.ndarray, target: np.ndarray) -> None:
    """Apply a TMA store of the shared bytes *tile* to *target* (in place)."""
    e = target.itemsize
    for where, addr in _box_positions(tm, coords):
        if where is not None:
            target[where] = tile[addr : addr + e].view(target.dtype)[0]


def _launch_load(tm: TensorMap, coords, dst_offset: int = 0) -> tuple[np.ndarray, emu.LaunchStats]:
    out = np.zeros(tm.box_bytes, np.uint8)
    mod = emu.load_ptx(load_kernel(tm.rank, dst_offset))
    stats = mod.launch("tma_load", grid=1, block=THREADS, args=[tm, out, tm.box_bytes, *coords])
    return out, stats


# ---------------------------------------------------------------- loads


F16, F32, U8 = np.float16, np.float32, np.uint8
LOADS = [
    # shape (row-major), dtype, box (row-major), swizzle, coordinates (innermost first)
    ((70, 40), F16, (16, 8), Swizzle.NONE, (16, 32)),
    ((70, 40), F16, (16, 16), Swizzle.B32, (16, 64)),  # rows 64..79: 6 outside
    ((70, 40), F16, (32, 32), Swizzle.B64, (-8, -5)),  # before the start in both dimensions
    ((50, 72), F16, (64, 64), Swizzle.B128, (40, 10)),  # columns 40..103: 32 outside
    ((45, 36), F32, (24, 32), Swizzle.B128, (8, 30)),
    ((33, 64), U8, (8, 64), Swizzle.B64, (0, 30)),
    ((200,), F32, (64,), Swizzle.NONE, (170,)),
    ((3, 9, 24), F16, (2, 8, 16), Swizzle.B32, (16, 4, 2)),
    ((2, 3, 4, 5, 16), F32, (2, 2, 2, 4, 8), Swizzle.B32, (12, -1, 2, 1, 1)),
]


@pytest.mark.parametrize(
    "shape,dtype,box,swizzle,coords",
    LOADS,
    ids=[f"{len(s)}d-{np.dtype(d).name}-{w.name}" for s, d, _, w, _ in LOADS],
)
def test_tma_load_box_swizzle_and_zero_fill(shape, dtype, box, swizzle, coords) -> None:
    rng = np.random.default_rng(len(shape) * 100 + box[-1])
    a = (
        (rng.standard_normal(shape) * 8).astype(dtype)
        if dtype != U8
        else rng.integers(0, 255, shape, dtype=np.uint8)
    )
    tm = TensorMap.from_tensor(a, box, swizzle=swizzle)
    out, stats = _launch_load(tm, coords)
    np.testing.assert_array_equal(out, model_load(tm, coords))
    assert stats.shared_races == 0
    assert stats.shared_uninitialized_reads == 0


def test_tma_load_nan_fill_element_strides_and_unaligned_pattern() -> None:
    """NaN fill, element strides (dimension 1 every other row), and a destination 384 bytes
    past a 1024-byte boundary: the swizzle follows the shared address."""
    a = np.arange(20 * 30 * 16, dtype=np.float32).reshape(20, 30, 16)
    tm = TensorMap.from_tensor(
        a, (4, 8, 16), swizzle=Swizzle.B64, oob_fill=OOBFill.NAN, element_strides=(1, 2, 1)
    )
    assert tm.box_elements == (16, 4, 4)
    coords = (0, 24, 18)  # rows 24, 26, 28, 30 (30 outside), planes 18..21 (20, 21 outside)
    out, _ = _launch_load(tm, coords, dst_offset=384)
    np.testing.assert_array_equal(out, model_load(tm, coords, dst=384))
    vals = out.view(np.float32)
    assert np.isnan(vals).sum() == (4 * 4 * 16) - (2 * 3 * 16)


def test_tma_map_in_global_memory_and_by_parameter_name() -> None:
    """A map behind a pointer parameter (in global memory), and a map named directly."""
    a = np.arange(64 * 32, dtype=np.float16).reshape(64, 32)
    tm = TensorMap.from_tensor(a, (16, 32), swizzle=Swizzle.B64)
    ptr_ptx = (
        load_kernel(2)
        .replace(".param .align 64 .b8 tmap[128]", ".param .u64 tmap")
        .replace(
            "  mov.b64 %rd1, tmap;\n  cvta.param.u64 %rd2, %rd1;\n",
            "  ld.param.u64 %rd2, [tmap];\n",
        )
    )
    name_ptx = load_kernel(2).replace("[%rd2, {", "[tmap, {")
    for ptx in (ptr_ptx, name_ptx):
        out = np.zeros(tm.box_bytes, np.uint8)
        emu.load_ptx(ptx).launch(
            "tma_load", grid=1, block=THREADS, args=[tm, out, tm.box_bytes, 0, 40]
        )
        np.testing.assert_array_equal(out, model_load(tm, (0, 40)))


def test_tma_load_read_before_the_wait_is_a_race() -> None:
    """Without looping on the wait, the threads read the tile while the copy is in flight."""
    a = np.ones((16, 16), np.float32)
    tm = TensorMap.from_tensor(a, (16, 16))
    ptx = load_kernel(2).replace("  @!%p2 bra WAIT;\n", "")
    with pytest.raises(emu.SharedRaceError, match="cp.async.bulk.tensor.2d"):
        emu.load_ptx(ptx).launch(
            "tma_load", grid=1, block=THREADS, args=[tm, np.zeros(1024, np.uint8), 1024, 0, 0]
        )


def test_tma_expect_tx_larger_than_the_copies_deadlocks() -> None:
    a = np.ones((16, 16), np.float32)
    tm = TensorMap.from_tensor(a, (16, 16))
    mod = emu.load_ptx(load_kernel(2))
    with pytest.raises(emu.EmulatorError, match=r"deadlocked.*transaction count 1024"):
        mod.launch(
            "tma_load", grid=2, block=THREADS, args=[tm, np.zeros(2048, np.uint8), 2048, 0, 0]
        )


def test_tma_errors() -> None:
    a = np.ones((16, 16), np.float32)
    mod = emu.load_ptx(load_kernel(2))
    out = np.zeros(1024, np.uint8)
    with pytest.raises(emu.EmulatorError, match="not a tensor map"):
        mod.launch("tma_load", grid=1, block=THREADS, args=[bytes(128), out, 1024, 0, 0])
    # the map claims more rows than the array holds: the TMA reads past the buffer
    big = TensorMap(a, DataType.FLOAT32, (16, 32), (64,), (16, 16))
    with pytest.raises(emu.MemoryAccessError, match="Out-of-bounds access by a bulk copy"):
        mod.launch("tma_load", grid=1, block=THREADS, args=[big, out, 1024, 0, 16])
    tm = TensorMap.from_tensor(a, (16, 16))
    mis = emu.load_ptx(load_kernel(2, dst_offset=64))
    with pytest.raises(emu.MemoryAccessError, match="multiple of 128"):
        mis.launch("tma_load", grid=1, block=THREADS, args=[tm, out, 1024, 0, 0])
    with pytest.raises(emu.LaunchError, match="needs a .param .b8"):
        emu.load_ptx(store_kernel(2)).launch(
            "tma_store", grid=1, block=THREADS, args=[tm, a, tm, 0, 0]
        )
    with pytest.raises(emu.EmulatorError, match="a 3d copy through a rank-2 map"):
        emu.load_ptx(load_kernel(3)).launch(
            "tma_load", grid=1, block=THREADS, args=[tm, out, 1024, 0, 0, 0]
        )


# ---------------------------------------------------------------- stores and bulk groups


STORES = [
    ((70, 40), F16, (32, 32), Swizzle.B64, (16, 50)),
    ((30, 24), F32, (16, 32), Swizzle.B128, (-8, -4)),
    ((5, 6, 16), F32, (2, 4, 16), Swizzle.NONE, (0, 4, 4)),
]


@pytest.mark.parametrize(
    "shape,dtype,box,swizzle,coords",
    STORES,
    ids=[f"{len(s)}d-{np.dtype(d).name}-{w.name}" for s, d, _, w, _ in STORES],
)
def test_tma_store_writes_only_the_elements_inside(shape, dtype, box, swizzle, coords) -> None:
    target = np.full(shape, -1, dtype)
    tm = TensorMap.from_tensor(target, box, swizzle=swizzle)
    rng = np.random.default_rng(7)
    src = rng.integers(0, 200, tm.box_bytes // np.dtype(dtype).itemsize).astype(dtype)
    expect = target.copy()
    model_store(tm, coords, src.view(np.uint8), expect)
    stats = emu.load_ptx(store_kernel(tm.rank)).launch(
        "tma_store", grid=1, block=THREADS, args=[tm, src, tm.box_bytes, *coords]
    )
    np.testing.assert_array_equal(target, expect)
    assert (target != -1).any() and (target == -1).any()
    assert stats.shared_races == 0


def test_bulk_store_source_must_not_be_reused_before_wait_read() -> None:
    target = np.zeros((16, 16), np.float32)
    tm = TensorMap.from_tensor(target, (16, 16))
    src = np.ones(256, np.float32)
    # the CTA exits while the store still reads its shared memory
    with pytest.raises(emu.SharedRaceError, match="exited while a bulk copy"):
        emu.load_ptx(store_kernel(2, wait="")).launch(
            "tma_store", grid=1, block=THREADS, args=[tm, src, 1024, 0, 0]
        )
    # the source is overwritten before the read completes, then after
    for wait, race in (("", True), ("cp.async.bulk.wait_group.read 0;", False)):
        ptx = store_kernel(
            2, wait=wait + "\n  st.shared.u32 [%r3], %r1;\n  cp.async.bulk.wait_group 0;"
        )
        mod = emu.load_ptx(ptx)
        if race:
            with pytest.raises(emu.SharedRaceError, match="asynchronous read of it"):
                mod.launch("tma_store", grid=1, block=THREADS, args=[tm, src, 1024, 0, 0])
        else:
            mod.launch("tma_store", grid=1, block=THREADS, args=[tm, src, 1024, 0, 0])
            np.testing.assert_array_equal(target, 1.0)


def test_plain_bulk_copies() -> None:
    """cp.async.bulk global -> shared (mbarrier) and shared -> global (bulk group)."""
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 in, .param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .shared .align 128 .b8 buf[1024];
  .shared .align 8 .b64 bar;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, buf;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra SYNC;
  mbarrier.init.shared.b64 [%r2], 1;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], 1024, [%r2];
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 1024;
SYNC:
  bar.sync 0;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  shl.b32 %r4, %r1, 2;
  add.u32 %r5, %r3, %r4;
  ld.shared.u32 %r6, [%r5];
  add.u32 %r6, %r6, 1000;
  bar.sync 0;
  st.shared.u32 [%r5], %r6;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p1 bra DONE;
  cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r3], 1024;
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group 0;
DONE:
  ret;
}
"""
    )
    x = np.arange(256, dtype=np.uint32)
    out = np.zeros(256, np.uint32)
    stats = emu.load_ptx(ptx).launch("k", grid=1, block=256, args=[x, out])
    np.testing.assert_array_equal(out, x + 1000)
    assert stats.shared_races == 0


REDUCTIONS = [
    ("add", np.float32, lambda old, new: old + new),
    ("add", np.float16, lambda old, new: (old.astype(np.float64) + new).astype(np.float16)),
    ("min", np.int32, np.minimum),
    ("max", np.float32, np.fmax),
    ("xor", np.uint32, np.bitwise_xor),
    ("inc", np.uint32, lambda old, new: np.where(old >= new, 0, old + 1).astype(np.uint32)),
]


@pytest.mark.parametrize("op,dtype,combine", REDUCTIONS,
                         ids=[f"{op}-{np.dtype(d).name}" for op, d, _ in REDUCTIONS])
def test_tma_reduction_combines_with_global_memory(op, dtype, combine) -> None:
    """cp.reduce.async.bulk.tensor (Triton's descriptor atomic_add/min/max): the box's elements
    inside the tensor combine with what it holds, in the map's element type."""
    rng = np.random.default_rng(11)
    shape, box, coords = (30, 40), (16, 16), (30, -3)
    values = (rng.standard_normal(shape) * 50 if np.dtype(dtype).kind == "f"
              else rng.integers(-60 if dtype == np.int32 else 0, 60, shape))
    target = values.astype(dtype)
    before = target.copy()
    tm = TensorMap.from_tensor(target, box, swizzle=Swizzle.NONE)
    src = (rng.standard_normal(16 * 16) * 50 if np.dtype(dtype).kind == "f"
           else rng.integers(-60 if dtype == np.int32 else 1, 60, 16 * 16)).astype(dtype)
    stored, inside = np.zeros(shape, dtype), np.zeros(shape, dtype)
    model_store(tm, coords, src.view(np.uint8), stored)
    model_store(tm, coords, np.ones(16 * 16, dtype).view(np.uint8), inside)
    mask = inside != 0
    expect = before.copy()
    expect[mask] = combine(before[mask], stored[mask])
    ptx = store_kernel(tm.rank).replace(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.bulk_group")
    emu.load_ptx(ptx).launch("tma_store", grid=1, block=THREADS,
                             args=[tm, src, tm.box_bytes, *coords])
    np.testing.assert_array_equal(target, expect)
    assert mask.any() and (~mask).any()


def test_bulk_reduction_of_a_type_it_lacks_is_refused() -> None:
    """inc of f32 elements has no PTX bulk reduction: refused when the map's type is known (at
    the copy), or at load time for a plain bulk reduction of that type."""
    target = np.zeros((8, 16), np.float32)
    tm = TensorMap.from_tensor(target, (8, 16))
    ptx = store_kernel(2).replace(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.inc.bulk_group")
    with pytest.raises(emu.EmulatorError, match=r"bulk reduction \.inc of f32"):
        emu.load_ptx(ptx).launch("tma_store", grid=1, block=THREADS,
                                 args=[tm, np.zeros(128, np.float32), 512, 0, 0])
    plain = ptx.replace(
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.inc.bulk_group [%rd2, {%r20, %r21}]",
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.inc.f32 [%rd2]")
    with pytest.raises(emu.UnsupportedInstructionError, match=r"bulk reduction \.inc of f32"):
        emu.load_ptx(plain)


# ---------------------------------------------------------------- tensor maps on the device


def test_tensor_map_built_on_the_device() -> None:
    """As tl.make_tensor_descriptor: zero a map in shared memory, tensormap.replace its fields,
    copy it to global memory with tensormap.cp_fenceproxy, load through it."""
    ptx = (
        HEAD
        + """.visible .entry k(.param .u64 a, .param .u32 rows, .param .u32 cols,
    .param .u64 scratch, .param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<30>;
  .reg .b64 %rd<16>;
  .shared .align 1024 .b8 tile[4096];
  .shared .align 128 .b8 tmap[128];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, tmap;
  setp.lt.u32 %p1, %r1, 32;
  shl.b32 %r3, %r1, 2;
  add.u32 %r4, %r2, %r3;
  mov.b32 %r5, 0;
  @%p1 st.shared::cta.b32 [%r4], %r5;
  bar.warp.sync -1;
  ld.param.u64 %rd1, [a];
  ld.param.u32 %r6, [rows];
  ld.param.u32 %r7, [cols];
  ld.param.u64 %rd2, [scratch];
  cvt.u64.u32 %rd3, %r2;
  setp.ne.u32 %p2, %r1, 0;
  @%p2 bra FILLED;
  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd3], %rd1;
  tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd3], 1;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 0, 32;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 1, 16;
  tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd3], 0, %r7;
  tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd3], 1, %r6;
  mul.wide.u32 %rd4, %r7, 4;
  tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%rd3], 0, %rd4;
  tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd3], 0, 1;
  tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd3], 1, 1;
  tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd3], 7;
  tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd3], 3;
  tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%rd3], 1;
FILLED:
  bar.warp.sync -1;
  @%p1 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
      [%rd2], [%rd3], 128;
  @%p1 fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
  bar.sync 0;
  mov.u32 %r8, bar;
  mov.u32 %r9, tile;
  @%p2 bra SYNC;
  prefetch.tensormap [%rd2];
  mbarrier.init.shared::cta.b64 [%r8], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 2048;
  mov.u32 %r10, 8;
  mov.u32 %r11, 40;
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
      [%r9], [%rd2, {%r10, %r11}], [%r8];
SYNC:
  bar.sync 0;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
  @!%p3 bra WAIT;
  shl.b32 %r12, %r1, 4;
  add.u32 %r13, %r9, %r12;
  ld.shared.v4.u32 {%r14, %r15, %r16, %r17}, [%r13];
  ld.param.u64 %rd5, [out];
  cvt.u64.u32 %rd6, %r12;
  add.s64 %rd7, %rd5, %rd6;
  st.global.v4.u32 [%rd7], {%r14, %r15, %r16, %r17};
  ret;
}
"""
    )
    a = np.arange(50 * 36, dtype=np.float32).reshape(50, 36)
    out = np.zeros(2048, np.uint8)
    stats = emu.load_ptx(ptx).launch(
        "k", grid=1, block=128, args=[a, 50, 36, np.zeros(128, np.uint8), out]
    )
    tm = TensorMap.from_tensor(a, (16, 32), swizzle=Swizzle.B128, oob_fill=OOBFill.NAN)
    np.testing.assert_array_equal(out, model_load(tm, (8, 40)))
    assert stats.shared_races == 0


# ---------------------------------------------------------------- warp specialisation


def test_warp_specialised_tma_producer_and_consumers() -> None:
    """Warp 0 produces: it waits until a stage is empty, then loads a tile into it (full
    barrier: expect_tx + TMA). Warps 1-2 consume: they wait until the stage is full, add the
    tile into their registers, and release the stage (empty barrier, 64 arrivals). Two
    stages, more tiles than stages: producer and consumers wait on each other."""
    ptx = (
        HEAD
        + """.visible .entry k(.param .align 64 .b8 tmap[128], .param .u32 ntiles, .param .u64 out)
{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<10>;
  .shared .align 1024 .b8 stages[2048];
  .shared .align 8 .b64 full[2];
  .shared .align 8 .b64 empty[2];
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [ntiles];
  mov.u32 %r3, full;
  mov.u32 %r4, empty;
  mov.u32 %r5, stages;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra INIT_DONE;
  mbarrier.init.shared::cta.b64 [%r3], 1;
  mbarrier.init.shared::cta.b64 [%r3+8], 1;
  mbarrier.init.shared::cta.b64 [%r4], 64;
  mbarrier.init.shared::cta.b64 [%r4+8], 64;
INIT_DONE:
  bar.sync 0;
  mov.u32 %r6, 0;
  setp.ge.u32 %p2, %r1, 32;
  @%p2 bra CONSUMER;
PRODUCE:
  and.b32 %r7, %r6, 1;
  shl.b32 %r8, %r7, 3;
  shr.u32 %r9, %r6, 1;
  and.b32 %r9, %r9, 1;
  xor.b32 %r9, %r9, 1;
  add.u32 %r10, %r4, %r8;
EMPTY_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r10], %r9;
  @!%p3 bra EMPTY_WAIT;
  @%p1 bra PRODUCED;
  add.u32 %r11, %r3, %r8;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r11], 1024;
  shl.b32 %r12, %r7, 10;
  add.u32 %r13, %r5, %r12;
  shl.b32 %r14, %r6, 4;
  mov.u32 %r15, 0;
  mov.b64 %rd1, tmap;
  cvta.param.u64 %rd2, %rd1;
  cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes
      [%r13], [%rd2, {%r15, %r14}], [%r11];
PRODUCED:
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p4, %r6, %r2;
  @%p4 bra PRODUCE;
  ret;
CONSUMER:
  sub.u32 %r16, %r1, 32;
  shl.b32 %r17, %r16, 4;
  mov.u32 %r20, 0;
  mov.u32 %r21, 0;
  mov.u32 %r22, 0;
  mov.u32 %r23, 0;
CONSUME:
  and.b32 %r7, %r6, 1;
  shl.b32 %r8, %r7, 3;
  shr.u32 %r9, %r6, 1;
  and.b32 %r9, %r9, 1;
  add.u32 %r11, %r3, %r8;
FULL_WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r11], %r9;
  @!%p3 bra FULL_WAIT;
  shl.b32 %r12, %r7, 10;
  add.u32 %r13, %r5, %r12;
  add.u32 %r13, %r13, %r17;
  ld.shared.v4.u32 {%r24, %r25, %r26, %r27}, [%r13];
  add.u32 %r20, %r20, %r24;
  add.u32 %r21, %r21, %r25;
  add.u32 %r22, %r22, %r26;
  add.u32 %r23, %r23, %r27;
  add.u32 %r10, %r4, %r8;
  mbarrier.arrive.shared::cta.b64 _, [%r10];
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p4, %r6, %r2;
  @%p4 bra CONSUME;
  ld.param.u64 %rd3, [out];
  cvt.u64.u32 %rd4, %r17;
  add.s64 %rd5, %rd3, %rd4;
  st.global.v4.u32 [%rd5], {%r20, %r21, %r22, %r23};
  ret;
}
"""
    )
    ntiles = 7
    a = np.random.default_rng(3).integers(0, 1000, (ntiles * 16, 16), dtype=np.uint32)
    tm = TensorMap.from_tensor(a, (16, 16))
    out = np.zeros(256, np.uint32)
    stats = emu.load_ptx(ptx).launch("k", grid=2, block=96, args=[tm, ntiles, out])
    np.testing.assert_array_equal(out, a.reshape(ntiles, 256).sum(axis=0, dtype=np.uint32))
    assert stats.shared_races == 0


def test_tensor_map_over_a_non_contiguous_view_is_refused() -> None:
    a = np.zeros((32, 64), np.float32)
    tm = TensorMap.from_tensor(a[:, :32], (8, 32))
    with pytest.raises(emu.LaunchError, match="non-contiguous view"):
        emu.load_ptx(load_kernel(2)).launch(
            "tma_load", grid=1, block=THREADS, args=[tm, np.zeros(1024, np.uint8), 1024, 0, 0]
        )


def test_kernel_parameters_through_their_address() -> None:
    """mov of a parameter's address, ld.param through a register, cvta.param + generic ld;
    parameters are read-only."""
    ptx = (
        HEAD
        + """.visible .entry k(.param .align 8 .b8 s[16], .param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  mov.b64 %rd1, s;
  ld.param.u32 %r1, [%rd1+4];
  cvta.param.u64 %rd2, %rd1;
  ld.u32 %r2, [%rd2+8];
  isspacep.param %p1, %rd2;
  selp.u32 %r3, 1, 0, %p1;
  ld.param.u64 %rd3, [out];
  st.global.u32 [%rd3], %r1;
  st.global.u32 [%rd3+4], %r2;
  st.global.u32 [%rd3+8], %r3;
  STORE
  ret;
}
"""
    )
    s = np.array([10, 11, 12, 13], np.uint32).tobytes()
    out = np.zeros(3, np.uint32)
    emu.load_ptx(ptx.replace("STORE", "")).launch("k", grid=1, block=1, args=[s, out])
    np.testing.assert_array_equal(out, [11, 12, 1])
    bad = emu.load_ptx(ptx.replace("STORE", "st.u32 [%rd2], %r1;"))
    with pytest.raises(emu.MemoryAccessError, match="kernel parameters are read-only"):
        bad.launch("k", grid=1, block=1, args=[s, out])
