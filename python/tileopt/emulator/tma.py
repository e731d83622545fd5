"""Hopper's bulk copies and the Tensor Memory Accelerator (TMA), and tensor maps.

Instructions (sm_90; ``.shared::cluster`` addresses name the CTA's own shared memory; another
CTA's, through ``mapa``, is refused as out of its bounds):

* ``cp.async.bulk.tensor.{1..5}d.shared::{cluster,cta}.global{.tile}.mbarrier::complete_tx::
  bytes{.L2::cache_hint} [dst], [tensorMap, {c0, ...}], [mbar]``: loads the box of the tensor
  map at coordinates ``c`` (signed, innermost dimension first) into shared memory at ``dst``
  (128-byte aligned): the box laid out row-major (innermost dimension contiguous), element
  strides applied, swizzled (see :func:`swizzle`), elements outside the tensor filled with
  zeros (or a NaN, ``0x7fff...``, when the map's fill mode says so); it completes the box's
  bytes on the mbarrier when they land (when a thread waits on the barrier, see
  :mod:`tileopt.emulator.asynccopy`). The global source is read when the copy is issued.
* ``cp.async.bulk.tensor.{1..5}d.global.shared::cta{.tile}.bulk_group{.L2::cache_hint}
  [tensorMap, {c0, ...}], [src]``: stores the box from shared memory (same layout) to the
  tensor; only elements inside the tensor are written, when the bulk group completes.
* ``cp.async.bulk.shared::{cluster,cta}.global.mbarrier::complete_tx::bytes [dst], [src],
  size, [mbar]`` and ``cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size``:
  plain bulk copies (16-byte aligned addresses, size a multiple of 16).
* ``cp.async.bulk.commit_group``, ``cp.async.bulk.wait_group{.read} N``; prefetches
  (``cp.async.bulk.prefetch...``) do nothing.
* ``tensormap.replace.tile.{global_address, rank, box_dim, global_dim, global_stride,
  element_stride, elemtype, interleave_layout, swizzle_mode, swizzle_atomicity, fill_mode}
  .{global, shared::cta}.b1024.{b32, b64}`` and ``tensormap.cp_fenceproxy.global.shared::cta
  .tensormap::generic.release.{cta,cluster,gpu,sys}.sync.aligned [dst], [src], 128``: build a
  tensor map on the device, as Triton's ``tl.make_tensor_descriptor`` does.
  ``fence.proxy.tensormap::generic`` and ``prefetch.tensormap`` are no-ops.

* ``cp.reduce.async.bulk.tensor.{1..5}d.global.shared::cta.{add,min,max,inc,dec,and,or,xor}
  {.tile}.bulk_group [tensorMap, {c0, ...}], [src]`` and ``cp.reduce.async.bulk.global
  .shared::cta.bulk_group.{op}{.noftz}.type [dst], [src], size``: the stores above, each
  element combined with what global memory holds when the bulk group completes (the map's
  element type, or the instruction's), as Triton's descriptor ``atomic_add/min/max`` do.

Refused at load time: im2col modes, multicast, bulk reductions into shared memory and
shared-to-shared (cluster) bulk copies. Refused at run time: interleaved maps, swizzle modes
other than none/32B/64B/128B.

Tensor maps: the real ``CUtensorMap`` is a 128-byte opaque object made by the driver
(``cuTensorMapEncodeTiled``). The emulator uses its own 128-byte encoding
(:func:`encode_map`), which the launcher writes for a :class:`tileopt.runtime.tma.TensorMap`
argument (by value into a ``.param .align 64 .b8 map[128]`` parameter, or into global
memory for a pointer parameter) and which ``tensormap.replace`` edits field by field, so maps
made on the host and on the device are read alike. A TMA instruction names the map by its
address: a generic address (``cvta.param`` of a parameter, or global memory), a kernel
parameter's state-space address (below 2^32), or the parameter's name.

Swizzling, as the hardware does it on shared-memory addresses: with a swizzle span of W bytes
(32, 64 or 128), the 16-byte chunk index bits ``[4, 4 + log2(W/16))`` of an address are XORed
with bits ``[7, 7 + log2(W/16))``; the pattern repeats every 8 rows of 128 bytes, so a buffer
aligned to ``8 * 128`` bytes (Triton and CUTLASS align to 1024) starts the pattern at row 0,
the layout that wgmma's swizzled descriptors read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.asynccopy import bar_transfer, bulk_store, bulk_wait, copies
from tileopt.emulator.errors import EmulatorError
from tileopt.emulator.memops import addr_reader, read_elems, resolve, write_elems
from tileopt.emulator.memory import (
    GLOBAL_BASE,
    PARAM_WINDOW,
    SHARED_WINDOW,
    WINDOW_SIZE,
    raise_access_error,
    thread_ids,
)
from tileopt.emulator.ops import check_mods, handler, split
from tileopt.emulator.parser import Addr, Imm, Sym, TensorAddr

# ---------------------------------------------------------------- the 128-byte encoding

MAP_BYTES = 128
MAGIC = 0x50414D54  # "TMAP"
# field: (byte offset, bytes, stride between ordinals)
FIELDS = {
    "global_address": (0, 8, 0),
    "magic": (8, 4, 0),
    "rank": (12, 1, 0),  # rank - 1
    "elemtype": (13, 1, 0),  # PTX tensormap.replace element type code
    "interleave_layout": (14, 1, 0),
    "swizzle_mode": (15, 1, 0),
    "fill_mode": (16, 1, 0),
    "l2_promotion": (17, 1, 0),
    "swizzle_atomicity": (18, 1, 0),
    "global_dim": (24, 4, 4),  # elements, dimension 0 (innermost) first
    "global_stride": (48, 8, 8),  # bytes, of dimensions 1..4 (ordinal 0 = dimension 1)
    "box_dim": (80, 4, 4),
    "element_stride": (100, 4, 4),
}
# PTX element type codes (tensormap.replace .elemtype): (bytes, floating point)
ELEMTYPES = {
    0: ("u8", 1, False),
    1: ("u16", 2, False),
    2: ("u32", 4, False),
    3: ("s32", 4, False),
    4: ("u64", 8, False),
    5: ("s64", 8, False),
    6: ("f16", 2, True),
    7: ("f32", 4, True),
    8: ("f32.ftz", 4, True),
    9: ("f64", 8, True),
    10: ("bf16", 2, True),
    11: ("tf32", 4, True),
    12: ("tf32.ftz", 4, True),
}
# CUtensorMapDataType (driver API) -> PTX element type code
CUDA_TO_PTX_ELEMTYPE = {
    0: 0,
    1: 1,
    2: 2,
    3: 3,
    4: 4,
    5: 5,
    6: 6,
    7: 7,
    8: 9,
    9: 10,
    10: 8,
    11: 11,
    12: 12,
}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
_NAN = {1: 0x7F, 2: 0x7FFF, 4: 0x7FFF_FFFF, 8: 0x7FFF_FFFF_FFFF_FFFF}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def encode_map(
    address: int,
    cuda_dtype: int,
    global_dims,
    global_strides,
    box_dims,
    element_strides,
    interleave: int = 0,
    swizzle: int = 0,
    l2_promotion: int = 0,
    oob_fill: int = 0,
) -> bytes:
    """The emulator's 128 bytes for a tensor map (arguments as ``cuTensorMapEncodeTiled``
    takes them: driver enums, dimensions innermost first, *global_strides* in bytes for
    dimensions 1..rank-1); *address* is the emulated global address of the tensor."""
    rank = len(global_dims)
    out = bytearray(MAP_BYTES)

    def put(name: str, value: int, ordinal: int = 0) -> None:
        off, size, step = FIELDS[name]
        out[off + step * ordinal : off + step * ordinal + size] = int(value).to_bytes(
            size, "little"
        )

    put("global_address", address)
    put("magic", MAGIC)
    put("rank", rank - 1)
    put("elemtype", CUDA_TO_PTX_ELEMTYPE[int(cuda_dtype)])
    put("interleave_layout", interleave)
    put("swizzle_mode", swizzle)
    put("fill_mode", oob_fill)
    put("l2_promotion", l2_promotion)
    for i in range(rank):
        put("global_dim", global_dims[i], i)
        put("box_dim", box_dims[i], i)
        put("element_stride", element_strides[i], i)
    for i, s in enumerate(global_strides):
        put("global_stride", s, i)
    return bytes(out)


@dataclass(frozen=True)
class MapInfo:
    """A decoded tensor map."""

    address: int  # generic global address of element (0, ..., 0)
    rank: int
    elemtype: str
    esize: int
    is_float: bool
    swizzle: int  # bytes: 0, 32, 64 or 128
    fill_nan: bool
    dims: tuple[int, ...]  # innermost first
    strides: tuple[int, ...]  # bytes; strides[0] = 1 element, strides[i] of dimension i
    box: tuple[int, ...]
    estrides: tuple[int, ...]

    @property
    def counts(self) -> tuple[int, ...]:
        """Elements of the box copied per dimension (dimension 0 ignores its element stride)."""
        return (self.box[0],) + tuple(
            -(-b // e) for b, e in zip(self.box[1:], self.estrides[1:], strict=True)
        )

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.counts)) * self.esize

    def describe(self) -> str:
        sw = f"{self.swizzle}B" if self.swizzle else "none"
        return (
            f"tensor map at 0x{self.address:x}: {self.elemtype}, dims {list(self.dims)}, "
            f"strides {list(self.strides[1:])} bytes, box {list(self.box)}, swizzle {sw}"
        )


def decode_map(raw: bytes) -> MapInfo:
    """Decode the emulator's 128-byte tensor map; ValueError says what is wrong with it."""
    raw = bytes(raw)

    def get(name: str, ordinal: int = 0) -> int:
        off, size, step = FIELDS[name]
        return int.from_bytes(raw[off + step * ordinal : off + step * ordinal + size], "little")

    if get("magic") != MAGIC:
        raise ValueError(
            "these 128 bytes are not a tensor map: pass a tileopt.runtime.tma.TensorMap for the "
            "parameter (the emulator does not read the driver's CUtensorMap encoding), or build "
            "the map with tensormap.replace"
        )
    rank = get("rank") + 1
    if not 1 <= rank <= 5:
        raise ValueError(f"rank {rank} not in 1..5")
    code = get("elemtype")
    if code not in ELEMTYPES:
        raise ValueError(f"element type code {code} is not supported")
    name, esize, is_float = ELEMTYPES[code]
    if get("interleave_layout") != 0:
        raise ValueError("interleaved tensor maps are not supported by the emulator")
    sw = get("swizzle_mode")
    if sw not in SWIZZLE_BYTES:
        raise ValueError(f"swizzle mode {sw} is not supported (only none, 32B, 64B and 128B)")
    dims = tuple(get("global_dim", i) for i in range(rank))
    gstr = tuple(get("global_stride", i) for i in range(rank - 1))
    box = tuple(get("box_dim", i) for i in range(rank))
    es = tuple(get("element_stride", i) for i in range(rank))
    addr = get("global_address")
    if any(d < 1 for d in dims):
        raise ValueError(f"global dimensions {list(dims)} must be positive")
    if any(s % 16 for s in gstr):
        raise ValueError(f"global strides {list(gstr)} must be multiples of 16 bytes")
    if addr % 16:
        raise ValueError(f"global address 0x{addr:x} must be 16-byte aligned")
    if any(not 1 <= b <= 256 for b in box):
        raise ValueError(f"box dimensions {list(box)} must be in 1..256")
    if any(not 1 <= e <= 8 for e in es):
        raise ValueError(f"element strides {list(es)} must be in 1..8")
    inner = box[0] * esize
    if inner % 16:
        raise ValueError(f"the box's inner dimension ({inner} bytes) must be a multiple of 16")
    span = SWIZZLE_BYTES[sw]
    if span and inner > span:
        raise ValueError(f"the box's inner dimension ({inner} bytes) exceeds the {span}B swizzle")
    fill_nan = get("fill_mode") == 1
    if fill_nan and not is_float:
        raise ValueError("NaN fill needs a floating-point element type")
    return MapInfo(
        addr, rank, name, esize, is_float, span, fill_nan, dims, (esize,) + gstr, box, es
    )


def swizzle(addr: np.ndarray, span: int) -> np.ndarray:
    """Shared-memory byte addresses after the TMA's swizzle of span *span* bytes (0: none)."""
    if not span:
        return addr
    mask = span // 16 - 1
    return addr ^ (((addr >> 7) & mask) << 4)


# ---------------------------------------------------------------- reading a map


def _map_bytes(st, ins, tid: int, addr: int) -> bytes:
    """The 128 bytes of the tensor map at *addr* (generic, or a kernel parameter offset)."""
    if addr % 64:
        raise _err(st, ins, tid, f"tensor map address 0x{addr:x} is not 64-byte aligned")
    if addr < WINDOW_SIZE or PARAM_WINDOW <= addr < PARAM_WINDOW + WINDOW_SIZE:
        off = addr % WINDOW_SIZE
        if off + MAP_BYTES > st.kparam_limit:
            raise _err(st, ins, tid, f"tensor map at param offset 0x{off:x} is past the parameters")
        return st.kparam_views.u8[off : off + MAP_BYTES].tobytes()
    if addr >= GLOBAL_BASE:
        off = np.array([addr - GLOBAL_BASE], np.int64)
        if st.gm.check(off, MAP_BYTES) is not None:
            raise _err(
                st,
                ins,
                tid,
                f"tensor map at 0x{addr:x} is outside every buffer (nearest: "
                f"{st.gm.nearest(int(off[0]))})",
            )
        return st.gm.mem.u8[int(off[0]) : int(off[0]) + MAP_BYTES].tobytes()
    raise _err(st, ins, tid, f"tensor map address 0x{addr:x} is not in param or global memory")


def _map(st, ins, tid: int, addr: int) -> MapInfo:
    raw = _map_bytes(st, ins, tid, addr)
    cache = st.__dict__.setdefault("_tensor_maps", {})
    info = cache.get(raw)
    if info is None:
        try:
            info = decode_map(raw)
        except ValueError as e:
            raise _err(st, ins, tid, f"bad tensor map at 0x{addr:x}: {e}") from None
        cache[raw] = info
    return info


def _err(st, ins, tid: int, what: str) -> EmulatorError:
    cta, t = st.describe_thread(tid)
    return EmulatorError(
        f"kernel {st.kernel_name!r} at PTX line {ins.line}: `{ins.text}`\n"
        f"  CTA {cta}, thread {t}: {what}"
    )


def _box_elements(info: MapInfo, coords: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(global byte offsets from GLOBAL_BASE, in-bounds mask) of the box elements at *coords*,
    in shared-memory order (row-major, innermost dimension last)."""
    offs = np.zeros((), np.int64) + (info.address - GLOBAL_BASE)
    ok = np.ones((), bool)
    counts = info.counts
    for i in range(info.rank):
        k = np.arange(counts[i], dtype=np.int64)
        g = coords[i] + k * (info.estrides[i] if i else 1)
        shape = [1] * info.rank
        shape[info.rank - 1 - i] = counts[i]
        offs = offs + (g * info.strides[i]).reshape(shape)
        ok = ok & ((g >= 0) & (g < info.dims[i])).reshape(shape)
    return offs.ravel(), np.broadcast_to(ok, offs.shape).ravel()


def _shared_chunks(st, ins, tid: int, dst: int, nbytes: int, span: int, align: int):
    """(chunk-flat offsets, shared addresses) of the 16-byte chunks of a bulk copy's shared
    side of *nbytes* at *dst*, swizzled; bounds and alignment checked."""
    if SHARED_WINDOW <= dst < SHARED_WINDOW + WINDOW_SIZE:
        dst -= SHARED_WINDOW
    tids = np.array([tid])
    if dst % align:
        raise_access_error(
            st,
            ins,
            tids,
            np.ones(1, bool),
            np.array([dst]),
            "shared",
            f"Misaligned bulk copy: shared address must be a multiple of {align}",
            lambda a: f"{nbytes} bytes",
        )
    addr = swizzle(dst + 16 * np.arange(nbytes // 16, dtype=np.int64), span)
    bad = (addr < 0) | (addr + 16 > st.shared_limit)
    if bad.any():
        raise_access_error(
            st,
            ins,
            np.full(addr.shape[0], tid),
            bad,
            addr,
            "shared",
            "Out-of-bounds shared memory access by a bulk copy",
            lambda a: (
                f"CTA shared memory is [0x0, 0x{st.shared_limit:x}); the copy covers "
                f"{nbytes} bytes from 0x{dst:x}"
            ),
        )
    return (tid // st.tpc) * st.S + addr, addr


def _check_global(st, ins, tid: int, goff: np.ndarray, size: int, what: str) -> None:
    bad = st.gm.check(goff, size)
    if bad is not None:
        raise_access_error(
            st,
            ins,
            np.full(goff.shape[0], tid),
            bad,
            goff + GLOBAL_BASE,
            "global",
            "Out-of-bounds access by a bulk copy",
            lambda a: f"{what}; nearest buffer: {st.gm.nearest(a - GLOBAL_BASE)}",
        )


def _count_global(st, goff: np.ndarray, size: int, store: bool) -> None:
    if not goff.size:
        return
    nsec = int(np.unique(np.concatenate([goff >> 5, (goff + size - 1) >> 5])).size)
    st.gm.touch(goff, size, store)
    s = st.stats
    if store:
        s.global_store_requests += 1
        s.global_store_sectors += nsec
        s.global_store_bytes += int(goff.size) * size
    else:
        s.global_load_requests += 1
        s.global_load_sectors += nsec
        s.global_load_bytes += int(goff.size) * size


def _bar_flat(st, ins, tid: int, bar: int) -> int:
    if SHARED_WINDOW <= bar < SHARED_WINDOW + WINDOW_SIZE:
        bar -= SHARED_WINDOW
    if bar % 8 or bar < 0 or bar + 8 > st.shared_limit:
        raise _err(
            st, ins, tid, f"mbarrier address 0x{bar:x} is not an 8-byte aligned shared address"
        )
    flat = (tid // st.tpc) * st.S + bar
    if int(st.shared.read(np.array([flat]), 8)[0]) == 0:
        raise _err(st, ins, tid, f"the mbarrier at shared address 0x{bar:x} is not initialised")
    return flat


# ---------------------------------------------------------------- cp.async.bulk


def _per_thread(st, idx, readers):
    """Rows of operand values, one list per active thread: [(tid, v0, v1, ...), ...]."""
    tids = thread_ids(st, idx)
    n = tids.shape[0]
    cols = [np.broadcast_to(np.asarray(r(st, idx)).astype(np.int64), (n,)) for r in readers]
    return list(zip(tids.tolist(), *(c.tolist() for c in cols), strict=True))


def _map_addr_reader(cx, op):
    """Reader of a tensor-map operand's address (see the module docstring)."""
    if isinstance(op.base, Addr) and isinstance(op.base.base, Sym):
        s = cx.symbol(op.base.base.name)
        if s.space == "kparam":
            a = PARAM_WINDOW + s.addr + op.base.offset
            return lambda st, idx: np.int64(a)
    return addr_reader(cx, op.base)[1]


def _coords_reader(cx, coords, rank):
    if len(coords) != rank:
        raise cx.error(f"a {rank}d tensor copy takes {rank} coordinates, got {len(coords)}")
    return [cx.reader(c, "s32") for c in coords]


def compile_bulk(cx, ins, rest: list[str], types: list[str]):
    """cp.async.bulk.* (the part of the opcode after ``bulk``)."""
    if rest == ["commit_group"]:

        def commit(st, idx):
            copies(st).bulk_open[thread_ids(st, idx)] += 1

        return commit, "sync"
    if rest[:1] == ["wait_group"]:
        check_mods(cx, rest, {"wait_group", "read"})
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise cx.error("cp.async.bulk.wait_group expects an integer constant")
        keep = ins.operands[0].value
        read_only = "read" in rest

        def wait(st, idx):
            bulk_wait(st, thread_ids(st, idx), keep, read_only)

        return wait, "sync"
    if rest[:1] == ["prefetch"]:
        return (lambda st, idx: None), "sync"
    for m in rest:
        if m.startswith("multicast"):
            raise cx.unsupported("multicast bulk copies (clusters of more than one CTA)")
        if m in (
            "im2col",
            "im2col_no_offs",
            "gather4",
            "scatter4",
            "tile::gather4",
            "tile::scatter4",
        ):
            raise cx.unsupported(f".{m} bulk tensor copies")
    if rest[:1] == ["tensor"]:
        return _compile_tensor(cx, ins, rest[1:])
    return _compile_plain(cx, ins, rest)


_REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


def _reducer(cx, op: str, t: str):
    """``(old, data) -> new`` on raw values of PTX type *t* for bulk reduction *op*, or None
    where the PTX ISA has no such reduction."""
    from tileopt.emulator.errors import UnsupportedInstructionError
    from tileopt.emulator.memops import _atom_fn

    integer = t in ("u32", "s32", "u64", "s64")
    if (op in ("inc", "dec") and t != "u32") or (op in ("and", "or", "xor") and not integer):
        return None
    try:
        f = _atom_fn(cx, op, t)
    except UnsupportedInstructionError:
        return None
    typed, raw = nm.np_dtype(t), _UINT[nm.np_dtype(t).itemsize]

    def reduce(old: np.ndarray, data: np.ndarray) -> np.ndarray:
        new = np.asarray(f(old.view(typed), data.view(typed))).astype(typed)
        return new.view(raw)

    return reduce


def compile_bulk_reduce(cx, ins, mods: list[str], types: list[str]):
    """cp.reduce.async.bulk{.tensor}.* (the part of the opcode after ``bulk``): a bulk store
    that combines each element with what global memory holds (add, min, max, inc, dec, and,
    or, xor), of the tensor map's element type or the instruction's."""
    ops_found = [m for m in mods if m in _REDUCE_OPS]
    if len(ops_found) != 1:
        raise cx.error("cp.reduce.async.bulk takes one of " + ", ".join(_REDUCE_OPS))
    op = ops_found[0]
    rest = [m for m in mods if m not in (op, "noftz")]
    if rest[:1] == ["tensor"]:
        reducers = {}
        for t in ("u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64"):
            if (r := _reducer(cx, op, t)) is not None:
                reducers[t] = r
        return _compile_tensor(cx, ins, rest[1:], reduce=(op, reducers))
    if len(types) != 1 or (r := _reducer(cx, op, types[0])) is None:
        raise cx.unsupported(f"bulk reduction .{op} of {'.'.join(types) or 'no type'}")
    return _compile_plain(cx, ins, rest, reduce=(r, nm.np_dtype(types[0]).itemsize))


def _direction(cx, mods):
    """'load' (global -> shared, mbarrier) or 'store' (shared -> global, bulk group)."""
    sp = [m for m in mods if m in ("shared::cluster", "shared::cta", "global")]
    if sp[:1] == ["global"] and len(sp) == 2 and sp[1] == "shared::cta":
        if "bulk_group" not in mods:
            raise cx.unsupported("a bulk store without .bulk_group completion")
        return "store"
    if len(sp) == 2 and sp[0] in ("shared::cluster", "shared::cta") and sp[1] == "global":
        if "mbarrier::complete_tx::bytes" not in mods:
            raise cx.unsupported("a bulk load without .mbarrier::complete_tx::bytes")
        return "load"
    raise cx.unsupported("bulk copies other than global <-> shared")


def _compile_tensor(cx, ins, mods, reduce=None):
    """A bulk tensor copy; with ``reduce`` ((op, {element type: reducer})), a reduction."""
    if not mods or not mods[0].endswith("d") or mods[0][:-1] not in "12345":
        raise cx.unsupported()
    rank = int(mods[0][:-1])
    check_mods(
        cx,
        mods[1:],
        {
            "shared::cluster",
            "shared::cta",
            "global",
            "tile",
            "mbarrier::complete_tx::bytes",
            "bulk_group",
            "L2::cache_hint",
            "cta_group::1",
        },
    )
    direction = _direction(cx, mods[1:])
    if reduce is not None and direction != "store":
        raise cx.unsupported("bulk reductions into shared memory")
    ops_ = list(ins.operands)
    if "L2::cache_hint" in mods and ops_:
        ops_ = ops_[:-1]
    if direction == "load":
        if len(ops_) != 3 or not isinstance(ops_[1], TensorAddr):
            raise cx.error("expected [dst], [tensorMap, {coordinates}], [mbar]")
        _, dst_rd = addr_reader(cx, ops_[0])
        map_rd = _map_addr_reader(cx, ops_[1])
        crd = _coords_reader(cx, ops_[1].coords, rank)
        _, bar_rd = addr_reader(cx, ops_[2])

        def load(st, idx):
            for tid, dst, maddr, bar, *coords in _per_thread(
                st, idx, [dst_rd, map_rd, bar_rd, *crd]
            ):
                info = _map(st, ins, tid, maddr)
                if info.rank != rank:
                    raise _err(st, ins, tid, f"a {rank}d copy through a rank-{info.rank} map")
                bflat = _bar_flat(st, ins, tid, bar)
                goff, ok = _box_elements(info, coords)
                e = info.esize
                fill = _NAN[e] if info.fill_nan else 0
                vals = np.full(goff.shape[0], fill, _UINT[e])
                g_in = goff[ok]
                _check_global(st, ins, tid, g_in, e, info.describe())
                vals[ok] = st.gm.mem.read(g_in, e)
                _count_global(st, g_in, e, False)
                flat, saddr = _shared_chunks(st, ins, tid, dst, info.nbytes, info.swizzle, 128)
                data = vals.view(np.uint8).reshape(-1, 16)
                bar_transfer(st, ins, tid, bflat, flat, data, saddr, info.nbytes)

        return load, "cp.async"
    if len(ops_) != 2 or not isinstance(ops_[0], TensorAddr):
        raise cx.error("expected [tensorMap, {coordinates}], [src]")
    map_rd = _map_addr_reader(cx, ops_[0])
    crd = _coords_reader(cx, ops_[0].coords, rank)
    _, src_rd = addr_reader(cx, ops_[1])

    def store(st, idx):
        for tid, maddr, src, *coords in _per_thread(st, idx, [map_rd, src_rd, *crd]):
            info = _map(st, ins, tid, maddr)
            if info.rank != rank:
                raise _err(st, ins, tid, f"a {rank}d copy through a rank-{info.rank} map")
            goff, ok = _box_elements(info, coords)
            e = info.esize
            flat, saddr = _shared_chunks(st, ins, tid, src, info.nbytes, info.swizzle, 128)
            vals = st.shared.u8[flat[:, None] + np.arange(16)[None, :]].reshape(-1).view(_UINT[e])
            g_in = goff[ok]
            _check_global(st, ins, tid, g_in, e, info.describe())
            _count_global(st, g_in, e, True)
            combine = None
            if reduce is not None:
                op, reducers = reduce
                combine = reducers.get(info.elemtype)
                if combine is None:
                    raise _err(st, ins, tid, f"a bulk reduction .{op} of {info.elemtype} "
                                             f"elements (the PTX ISA has none)")
                _count_global(st, g_in, e, False)
            bulk_store(st, ins, tid, flat, saddr, g_in, vals[ok].copy(), e, combine)

    return store, "cp.async"


def _compile_plain(cx, ins, mods, reduce=None):
    """A plain bulk copy; with ``reduce`` ((reducer, element bytes)), a reduction."""
    check_mods(
        cx,
        mods,
        {
            "shared::cluster",
            "shared::cta",
            "global",
            "mbarrier::complete_tx::bytes",
            "bulk_group",
            "L2::cache_hint",
        },
    )
    direction = _direction(cx, mods)
    if reduce is not None and direction != "store":
        raise cx.unsupported("bulk reductions into shared memory")
    ops_ = list(ins.operands)
    if "L2::cache_hint" in mods and ops_:
        ops_ = ops_[:-1]
    nops = 4 if direction == "load" else 3
    if len(ops_) != nops:
        raise cx.error(f"cp.async.bulk expects {nops} operands")
    _, dst_rd = addr_reader(cx, ops_[0])
    _, src_rd = addr_reader(cx, ops_[1])
    size_rd = cx.reader(ops_[2], "u32")
    bar_rd = addr_reader(cx, ops_[3])[1] if direction == "load" else None

    def run(st, idx):
        readers = [dst_rd, src_rd, size_rd] + ([bar_rd] if bar_rd is not None else [])
        for tid, dst, src, size, *bar in _per_thread(st, idx, readers):
            if size % 16 or size <= 0:
                raise _err(st, ins, tid, f"bulk copy size {size} is not a positive multiple of 16")
            gaddr = src if direction == "load" else dst
            if gaddr % 16:
                raise _err(st, ins, tid, f"global address 0x{gaddr:x} is not 16-byte aligned")
            goff = gaddr - GLOBAL_BASE + np.arange(size // 8, dtype=np.int64) * 8
            _check_global(st, ins, tid, goff, 8, f"a {size}-byte bulk copy")
            if direction == "load":
                bflat = _bar_flat(st, ins, tid, bar[0])
                flat, saddr = _shared_chunks(st, ins, tid, dst, size, 0, 16)
                data = st.gm.mem.read(goff, 8).view(np.uint8).reshape(-1, 16)
                _count_global(st, goff, 8, False)
                bar_transfer(st, ins, tid, bflat, flat, data.copy(), saddr, size)
            else:
                flat, saddr = _shared_chunks(st, ins, tid, src, size, 0, 16)
                vals = st.shared.u8[flat[:, None] + np.arange(16)[None, :]].reshape(-1)
                e, combine = 8, None
                if reduce is not None:  # element by element
                    combine, e = reduce
                    goff = gaddr - GLOBAL_BASE + np.arange(size // e, dtype=np.int64) * e
                    _count_global(st, goff, e, False)
                _count_global(st, goff, e, True)
                bulk_store(st, ins, tid, flat, saddr, goff, vals.view(_UINT[e]).copy(), e,
                           combine)

    return run, "cp.async"


# ---------------------------------------------------------------- tensormap.*


_REPLACE = {
    "global_address": False,
    "rank": False,
    "box_dim": True,
    "global_dim": True,
    "global_stride": True,
    "element_stride": True,
    "elemtype": False,
    "interleave_layout": False,
    "swizzle_mode": False,
    "swizzle_atomicity": False,
    "fill_mode": False,
}


@handler("tensormap")
def h_tensormap(cx, ins):
    base, types, mods = split(ins)
    if mods[:1] == ["replace"]:
        check_mods(cx, mods, {"replace", "tile", "global", "shared::cta", "b1024"} | set(_REPLACE))
        fields = [m for m in mods if m in _REPLACE]
        if len(fields) != 1 or "tile" not in mods:
            raise cx.unsupported()
        name = fields[0]
        space = "global" if "global" in mods else "shared"
        ops_ = list(ins.operands)
        has_ord = _REPLACE[name]
        if len(ops_) != (3 if has_ord else 2):
            raise cx.error(f"tensormap.replace.{name} expects {3 if has_ord else 2} operands")
        ordinal = 0
        if has_ord:
            if not isinstance(ops_[1], Imm) or not 0 <= ops_[1].value < 5:
                raise cx.error("the ordinal must be a constant 0..4")
            ordinal = ops_[1].value
            if name == "global_stride" and ordinal > 3:
                raise cx.error("global_stride ordinals are 0..3")
        off, size, step = FIELDS[name]
        off += step * ordinal
        t = types[-1] if types else "b32"
        val = cx.reader(ops_[-1], "b64" if t == "b64" else "b32")
        _, ard = addr_reader(cx, ops_[0])
        mo, ms, _ = FIELDS["magic"]

        def replace(st, idx):
            addr = ard(st, idx)
            n = thread_ids(st, idx).shape[0]
            v = np.broadcast_to(np.asarray(val(st, idx)).astype(np.uint64), (n,))
            raw = v.astype(_UINT[size])
            write_elems(resolve(st, ins, idx, space, addr + off, size, "store"), size, [raw])
            magic = np.full(n, MAGIC, np.uint32)
            write_elems(resolve(st, ins, idx, space, addr + mo, ms, "store"), ms, [magic])

        return replace, "alu"
    if mods[:1] == ["cp_fenceproxy"]:
        check_mods(
            cx,
            mods,
            {
                "cp_fenceproxy",
                "global",
                "shared::cta",
                "tensormap::generic",
                "release",
                "cta",
                "cluster",
                "gpu",
                "sys",
                "sync",
                "aligned",
            },
        )
        ops_ = list(ins.operands)
        if len(ops_) != 3 or not isinstance(ops_[2], Imm) or ops_[2].value != MAP_BYTES:
            raise cx.error("tensormap.cp_fenceproxy expects [dst], [src], 128")
        _, dst_rd = addr_reader(cx, ops_[0])
        _, src_rd = addr_reader(cx, ops_[1])

        def cp(st, idx):
            n = thread_ids(st, idx).shape[0]
            d, s = dst_rd(st, idx), src_rd(st, idx)
            for k in range(0, MAP_BYTES, 16):
                vals = read_elems(
                    resolve(st, ins, idx, "shared", s + k, 16, "load"), n, 8, 2, np.uint64
                )
                write_elems(resolve(st, ins, idx, "global", d + k, 16, "store"), 8, vals)

        return cp, "sync"
    raise cx.unsupported()


__all__ = ["MAP_BYTES", "MapInfo", "decode_map", "encode_map", "swizzle"]
