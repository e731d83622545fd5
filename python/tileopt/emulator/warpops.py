"""Warp-level instructions: shfl, vote, activemask, match, redux, elect, ldmatrix, stmatrix,
mma and wmma.

These read registers of other lanes, so they read whole register arrays (every thread of the
chunk) and combine them per warp (arrays reshaped to (warps, 32)).
"""

from __future__ import annotations

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.memops import addr_reader, parse_space, read_elems, resolve, write_elems
from tileopt.emulator.memory import ALL, bank_conflicts, thread_ids
from tileopt.emulator.ops import check_mods, fdecode, handler, nops, split
from tileopt.emulator.parser import Pair, Sink, Vec


def _full(reader, st):
    """Read an operand for every thread of the chunk (broadcast immediates)."""
    v = np.asarray(reader(st, ALL))
    if v.ndim == 0:
        return np.broadcast_to(v, (st.T,))
    return v


def _participants(st, idx):
    part = np.zeros(st.T, bool)
    part[idx] = True
    return part


_LANE_BITS = np.uint64(1) << np.arange(32, dtype=np.uint64)


def _mask_reader(cx, ins, operand):
    """The reader of a .sync instruction's membermask (operand ``operand``), or None when it
    has none (the legacy forms, which combine every executing thread of the warp)."""
    return cx.reader(ins.operands[operand], "b32") if len(ins.operands) > operand else None


def _groups(st, idx, mask):
    """The lanes each thread of ``idx`` combines with, as an (N, 32) bool array: those of its
    warp that execute the instruction and that its membermask names. Lanes of one warp may
    name different groups in one converged instruction (cooperative groups' tiled and labeled
    partitions), each getting its own group's result."""
    tids = thread_ids(st, idx)
    part = _participants(st, idx).reshape(-1, 32)[tids >> 5]
    if mask is None:
        return part
    named = (np.asarray(mask(st, idx)).astype(np.uint64)[..., None] & _LANE_BITS) != 0
    return part & named


def _lane_mask(lanes):
    """(N, 32) bool lanes as N 32-bit masks."""
    return (lanes.astype(np.uint64) * _LANE_BITS).sum(axis=-1).astype(np.uint32)


def _warp_values(st, idx, values, dtype):
    """Every thread's ``values`` (0 for those outside ``idx``), by (warp, lane), and each
    thread of ``idx``'s row of its warp's."""
    full = np.zeros(st.T, dtype)
    full[idx] = values
    return full.reshape(-1, 32)[thread_ids(st, idx) >> 5]


# ---------------------------------------------------------------- shfl


@handler("shfl")
def h_shfl(cx, ins):
    base, types, mods = split(ins)
    modes = [m for m in mods if m in ("up", "down", "bfly", "idx")]
    check_mods(cx, mods, {"sync", "up", "down", "bfly", "idx"})
    if len(modes) != 1 or types != ["b32"]:
        raise cx.unsupported()
    mode = modes[0]
    operands = ins.operands
    if len(operands) not in (4, 5):
        raise cx.error("shfl expects 4 or 5 operands")
    dst = operands[0]
    if isinstance(dst, Pair):
        wd = cx.writer(dst.first, "b32")
        wp = cx.writer(dst.second, "pred") if not isinstance(dst.second, Sink) else None
    else:
        wd, wp = cx.writer(dst, "b32"), None
    ra = cx.reader(operands[1], "b32")
    rb = cx.reader(operands[2], "u32")
    rc = cx.reader(operands[3], "u32")

    def run(st, idx):
        tids = thread_ids(st, idx)
        lane = (tids & 31).astype(np.int64)
        b = np.asarray(rb(st, idx)).astype(np.int64) & 31
        c = np.asarray(rc(st, idx)).astype(np.int64)
        cval = c & 31
        segmask = (c >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - b
            pval = j >= max_lane
        elif mode == "down":
            j = lane + b
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            pval = j <= max_lane
        else:
            j = min_lane | (b & ~segmask)
            pval = j <= max_lane
        j = np.where(pval, j, lane)
        src = (tids & ~31) + j
        a = _full(ra, st)
        wd(st, idx, a[src])
        if wp is not None:
            wp(st, idx, np.broadcast_to(pval, tids.shape))

    return run, "shfl"


# ------------------------------------------------------------ vote, activemask, match, redux, elect


@handler("vote")
def h_vote(cx, ins):
    base, types, mods = split(ins)
    check_mods(cx, mods, {"sync", "all", "any", "uni", "ballot"})
    kinds = [m for m in mods if m in ("all", "any", "uni", "ballot")]
    if len(kinds) != 1:
        raise cx.unsupported()
    kind = kinds[0]
    if len(ins.operands) not in (2, 3):
        raise cx.error("vote expects 2 or 3 operands")
    ra = cx.reader(ins.operands[1], "pred")
    mask = _mask_reader(cx, ins, 2)
    wr = cx.writer(ins.operands[0], "b32" if kind == "ballot" else "pred")

    def run(st, idx):
        group = _groups(st, idx, mask)
        true = _warp_values(st, idx, ra(st, idx), bool) & group
        if kind == "ballot":
            res = _lane_mask(true)
        elif kind == "any":
            res = true.any(axis=1)
        elif kind == "all":
            res = (true == group).all(axis=1)
        else:
            res = (true == group).all(axis=1) | ~true.any(axis=1)
        wr(st, idx, res)

    return run, "alu"


@handler("activemask")
def h_activemask(cx, ins):
    nops(cx, ins, 1)
    wr = cx.writer(ins.operands[0], "b32")

    def run(st, idx):
        wr(st, idx, _lane_mask(_groups(st, idx, None)))

    return run, "alu"


@handler("match")
def h_match(cx, ins):
    base, types, mods = split(ins)
    check_mods(cx, mods, {"sync", "any", "all"})
    if len(types) != 1 or types[0] not in ("b32", "b64"):
        raise cx.unsupported()
    t = types[0]
    kinds = [m for m in mods if m in ("any", "all")]
    if len(kinds) != 1:
        raise cx.error("match needs exactly one of .any and .all")
    kind = kinds[0]
    nops(cx, ins, 3)  # the membermask is mandatory
    dst = ins.operands[0]
    if isinstance(dst, Pair):
        wd = cx.writer(dst.first, "b32")
        wp = cx.writer(dst.second, "pred") if not isinstance(dst.second, Sink) else None
    else:
        wd, wp = cx.writer(dst, "b32"), None
    ra = cx.reader(ins.operands[1], t)
    mask = _mask_reader(cx, ins, 2)
    dt = nm.np_dtype(t)

    def run(st, idx):
        group = _groups(st, idx, mask)
        own = np.broadcast_to(np.asarray(ra(st, idx), dt), thread_ids(st, idx).shape)
        same = (_warp_values(st, idx, own, dt) == own[:, None]) & group
        if kind == "any":
            wd(st, idx, _lane_mask(same))
            return
        ok = (same == group).all(axis=1)
        wd(st, idx, np.where(ok, _lane_mask(group), 0).astype(np.uint32))
        if wp is not None:
            wp(st, idx, ok)

    return run, "alu"


@handler("redux")
def h_redux(cx, ins):
    base, types, mods = split(ins)
    ops_ = [m for m in mods if m in ("add", "min", "max", "and", "or", "xor")]
    check_mods(cx, mods, {"sync", "add", "min", "max", "and", "or", "xor"})
    if len(ops_) != 1 or len(types) != 1 or types[0] not in ("u32", "s32", "b32"):
        raise cx.unsupported()
    t = types[0]
    op = ops_[0]
    nops(cx, ins, 3)  # the membermask is mandatory
    ra = cx.reader(ins.operands[1], t)
    mask = _mask_reader(cx, ins, 2)
    wr = cx.writer(ins.operands[0], t)
    dt = nm.np_dtype(t)

    def run(st, idx):
        group = _groups(st, idx, mask)
        a = _warp_values(st, idx, ra(st, idx), dt)
        if op == "add":
            wide = np.int64 if t == "s32" else np.uint64
            r = np.where(group, a, 0).astype(wide).sum(axis=1).astype(np.uint64)
            r = r.astype(np.uint32).view(dt)
        elif op == "min":
            r = np.where(group, a, np.iinfo(dt).max).min(axis=1)
        elif op == "max":
            r = np.where(group, a, np.iinfo(dt).min).max(axis=1)
        elif op == "and":
            r = np.bitwise_and.reduce(np.where(group, a, dt.type(np.iinfo(dt).max)), axis=1)
        elif op == "or":
            r = np.bitwise_or.reduce(np.where(group, a, 0).astype(dt), axis=1)
        else:
            r = np.bitwise_xor.reduce(np.where(group, a, 0).astype(dt), axis=1)
        wr(st, idx, np.asarray(r, dt))

    return run, "alu"


@handler("elect")
def h_elect(cx, ins):
    base, types, mods = split(ins)
    check_mods(cx, mods, {"sync"})
    nops(cx, ins, 2)  # d|p, membermask
    dst = ins.operands[0]
    if not isinstance(dst, Pair):
        raise cx.error("elect.sync needs d|p")
    wd = cx.writer(dst.first, "b32") if not isinstance(dst.first, Sink) else None
    wp = cx.writer(dst.second, "pred")
    mask = _mask_reader(cx, ins, 1)

    def run(st, idx):
        tids = thread_ids(st, idx)
        # the leader is the lowest executing lane of each thread's own membermask (tiled
        # partitions elect one leader per group)
        ld = np.argmax(_groups(st, idx, mask), axis=1)
        if wd is not None:
            wd(st, idx, ld.astype(np.uint32))
        wp(st, idx, (tids & 31) == ld)

    return run, "alu"


# ---------------------------------------------------------------- ldmatrix / stmatrix


def _matrix_common(cx, ins, load: bool):
    """What ldmatrix and stmatrix share: (transposed, state space, the register operands,
    the address operand)."""
    _, types, mods = split(ins)
    if types != ["b16"]:
        raise cx.unsupported()
    nums = [m for m in mods if m in ("x1", "x2", "x4")]
    if len(nums) != 1 or "m8n8" not in mods:
        raise cx.unsupported("only m8n8 .x1/.x2/.x4 .b16")
    check_mods(
        cx, mods, {"sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared", "shared::cta"}
    )
    nops(cx, ins, 2)
    data, address = ins.operands if load else ins.operands[::-1]
    regs = list(data.items) if isinstance(data, Vec) else [data]
    if len(regs) != int(nums[0][1:]):
        what = "ldmatrix: number of destination" if load else "stmatrix: number of source"
        raise cx.error(f"{what} registers does not match .x")
    return "trans" in mods, parse_space(mods), regs, address


@handler("ldmatrix")
def h_ldmatrix(cx, ins):
    trans, space, regs, src = _matrix_common(cx, ins, load=True)
    num = len(regs)
    wrs = [cx.writer(r, "b32") for r in regs]
    _, ard = addr_reader(cx, src)

    def run(st, idx):
        tids = thread_ids(st, idx)
        warps = np.unique(tids >> 5)
        addr_all = np.broadcast_to(np.asarray(ard(st, ALL), np.int64), (st.T,))
        lanes = (warps[:, None] * 32 + np.arange(8 * num)[None, :]).ravel()  # row-address lanes
        parts = resolve(st, ins, lanes, space, addr_all[lanes], 16, None, "r")
        st.stats.shared_bank_conflicts += bank_conflicts(lanes, addr_all[lanes], 16)
        rows = read_elems(parts, lanes.size, 2, 8, np.uint16)  # 8 arrays of (W*8*num,)
        m = np.stack(rows, axis=1).reshape(warps.size, num, 8, 8)
        wi = np.searchsorted(warps, tids >> 5)
        lane = tids & 31
        g, q = lane >> 2, lane & 3
        for i, wr in enumerate(wrs):
            if trans:
                lo, hi = m[wi, i, 2 * q, g], m[wi, i, 2 * q + 1, g]
            else:
                lo, hi = m[wi, i, g, 2 * q], m[wi, i, g, 2 * q + 1]
            wr(st, idx, lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16)))

    return run, "ld.shared"


@handler("stmatrix")
def h_stmatrix(cx, ins):
    trans, space, regs, dsto = _matrix_common(cx, ins, load=False)
    num = len(regs)
    rds = [cx.reader(r, "b32") for r in regs]
    _, ard = addr_reader(cx, dsto)

    def run(st, idx):
        tids = thread_ids(st, idx)
        warps = np.unique(tids >> 5)
        addr_all = np.broadcast_to(np.asarray(ard(st, ALL), np.int64), (st.T,))
        w_lanes = warps[:, None] * 32 + np.arange(32)[None, :]  # (W, 32)
        lane = np.arange(32)
        g, q = lane >> 2, lane & 3
        m = np.zeros((warps.size, num, 8, 8), np.uint16)
        for i, rd in enumerate(rds):
            v = _full(rd, st)[w_lanes].astype(np.uint32)  # (W, 32)
            lo = (v & np.uint32(0xFFFF)).astype(np.uint16)
            hi = (v >> np.uint32(16)).astype(np.uint16)
            if trans:
                m[:, i, 2 * q, g] = lo
                m[:, i, 2 * q + 1, g] = hi
            else:
                m[:, i, g, 2 * q] = lo
                m[:, i, g, 2 * q + 1] = hi
        lanes = (warps[:, None] * 32 + np.arange(8 * num)[None, :]).ravel()
        parts = resolve(st, ins, lanes, space, addr_all[lanes], 16, None, "w")
        st.stats.shared_bank_conflicts += bank_conflicts(lanes, addr_all[lanes], 16)
        flat = m.reshape(-1, 8)
        write_elems(parts, 2, [flat[:, k] for k in range(8)])

    return run, "st.shared"


# ---------------------------------------------------------------- mma.sync

_lane = np.arange(32)
_g = _lane >> 2
_q = _lane & 3


def _tab(rows, cols):
    return np.stack(rows, axis=1), np.stack(cols, axis=1)  # (32, nelem)


def _frag_tables(shape, atype):
    """Row/col tables of mma.sync fragments A, B, C (PTX ISA layouts), indexed [lane, element]."""
    g, q = _g, _q
    if shape == "m16n8k16" and atype in ("f16", "bf16"):
        A = _tab(
            [g + 8 * ((e // 2) % 2) for e in range(8)],
            [2 * q + (e % 2) + 8 * (e // 4) for e in range(8)],
        )
        B = _tab([2 * q + (e % 2) + 8 * (e // 2) for e in range(4)], [g for _ in range(4)])
        M, N, K = 16, 8, 16
    elif shape == "m16n8k8" and atype in ("f16", "bf16"):
        A = _tab([g + 8 * (e // 2) for e in range(4)], [2 * q + (e % 2) for e in range(4)])
        B = _tab([2 * q + e for e in range(2)], [g for _ in range(2)])
        M, N, K = 16, 8, 8
    elif shape == "m16n8k8" and atype == "tf32":
        A = _tab([g + 8 * (e % 2) for e in range(4)], [q + 4 * (e // 2) for e in range(4)])
        B = _tab([q + 4 * e for e in range(2)], [g for _ in range(2)])
        M, N, K = 16, 8, 8
    elif shape == "m16n8k4" and atype == "tf32":
        A = _tab([g + 8 * e for e in range(2)], [q for _ in range(2)])
        B = _tab([q], [g])
        M, N, K = 16, 8, 4
    elif shape == "m16n8k32" and atype in EIGHT_BIT:
        # four bytes per .b32 register; a0..a3 and a8..a11 in row g, the rest in g + 8
        A = _tab(
            [g + 8 * ((e // 4) % 2) for e in range(16)],
            [4 * q + (e % 4) + 16 * (e // 8) for e in range(16)],
        )
        B = _tab([4 * q + (e % 4) + 16 * (e // 4) for e in range(8)], [g for _ in range(8)])
        M, N, K = 16, 8, 32
    elif shape == "m8n8k4" and atype == "f64":
        A = _tab([g], [q])
        B = _tab([q], [g])
        C = _tab([g, g], [2 * q, 2 * q + 1])
        return A, B, C, (8, 8, 4)
    else:
        return None
    C = _tab([g + 8 * (e // 2) for e in range(4)], [2 * q + (e % 2) for e in range(4)])
    return A, B, C, (M, N, K)


#: The 8-bit input types of mma.sync m16n8k32 and wgmma k32: integers (s32 accumulators) and
#: fp8 (f32 or f16 accumulators).
EIGHT_BIT = ("s8", "u8", "e4m3", "e5m2")


def eight_bit_pair(at: str, bt: str) -> bool:
    """Whether A and B are 8-bit inputs a dot takes together: integers of either signedness
    (.s8.u8) or fp8 of either format (.e4m3.e5m2)."""
    integers = ("s8", "u8")
    return at in EIGHT_BIT and bt in (integers if at in integers else ("e4m3", "e5m2"))


def decode8(raw: np.ndarray, t: str) -> np.ndarray:
    """8-bit element codes (uint8) -> float64 values of type *t* (one of EIGHT_BIT); the
    products and integer sums of a dot stay exact in float64."""
    raw = np.asarray(raw, np.uint8)
    if t == "s8":
        return raw.view(np.int8).astype(np.float64)
    if t == "u8":
        return raw.astype(np.float64)
    return nm.from_fp8(raw, t)


def _regs_of(op):
    return list(op.items) if isinstance(op, Vec) else [op]


def _frag_reader(cx, op, t, per_reg):
    """Reader for a fragment: returns (W*32, nelem) float64 values for the given warps."""
    regs = _regs_of(op)
    if t in ("f16", "bf16"):
        rds = [cx.reader(r, "b32") for r in regs]
        dec = fdecode(t)

        def rd(st, lanes):
            cols = []
            for r in rds:
                v = _full(r, st)[lanes].astype(np.uint32)
                lo = (v & np.uint32(0xFFFF)).astype(np.uint16)
                hi = (v >> np.uint32(16)).astype(np.uint16)
                if t == "f16":
                    cols += [
                        lo.view(np.float16).astype(np.float64),
                        hi.view(np.float16).astype(np.float64),
                    ]
                else:
                    cols += [dec(lo), dec(hi)]
            return np.stack(cols, axis=-1)

        return rd, len(regs) * 2
    if t in EIGHT_BIT:
        rds = [cx.reader(r, "b32") for r in regs]

        def rd8(st, lanes):
            cols = []
            for r in rds:
                v = _full(r, st)[lanes].astype(np.uint32)
                cols += [decode8((v >> np.uint32(8 * i)) & np.uint32(0xFF), t) for i in range(4)]
            return np.stack(cols, axis=-1)

        return rd8, len(regs) * 4
    rt = {"tf32": "f32", "f32": "f32", "f64": "f64", "s32": "s32"}[t]
    rds = [cx.reader(r, rt) for r in regs]

    def rd2(st, lanes):
        cols = [_full(r, st)[lanes].astype(np.float64) for r in rds]
        out = np.stack(cols, axis=-1)
        if t == "tf32":
            out = nm.f32_to_tf32(out.astype(np.float32), "rz").astype(np.float64)
        return out

    return rd2, len(regs)


@handler("mma")
def h_mma(cx, ins):
    base, types, mods = split(ins)
    shapes = [m for m in mods if m.startswith("m") and "n" in m and "k" in m]
    check_mods(cx, mods, {"sync", "aligned", "row", "col", "satfinite"} | set(shapes))
    if len(shapes) != 1 or "row" not in mods or "col" not in mods:
        raise cx.unsupported("only .row.col mma.sync")
    shape = shapes[0]
    if len(types) != 4:
        raise cx.unsupported()
    dt_, at, bt, ct = types
    integer = at in ("s8", "u8")
    if at != bt and not eight_bit_pair(at, bt):
        raise cx.unsupported()
    tabs = _frag_tables(shape, at)
    accs = ("s32",) if integer else ("f32", "f16", "f64")
    if tabs is None or dt_ not in accs or ct not in accs:
        raise cx.unsupported(f"mma shape/type {shape}.{'.'.join(types)}")
    satfinite = "satfinite" in mods
    if satfinite and not integer:
        raise cx.unsupported(f"mma .satfinite with .{at} inputs")
    (ar, ac), (br, bc), (cr, cc), (M, N, K) = tabs
    nops_ = len(ins.operands)
    if nops_ != 4:
        raise cx.error("mma expects 4 operands")
    d_op, a_op, b_op, c_op = ins.operands
    ra, na = _frag_reader(cx, a_op, at, None)
    rb, nb = _frag_reader(cx, b_op, bt, None)
    rc, nc = _frag_reader(cx, c_op, ct, None)
    if na != ar.shape[1] or nb != br.shape[1] or nc != cr.shape[1]:
        raise cx.error("mma fragment register count does not match the shape")
    wrs = accumulator_writers(cx, d_op, dt_)

    def run(st, idx):
        tids = thread_ids(st, idx)
        warps = np.unique(tids >> 5)
        W = warps.size
        lanes = (warps[:, None] * 32 + _lane[None, :]).ravel()
        A = np.zeros((W, M, K))
        B = np.zeros((W, K, N))
        C = np.zeros((W, M, N))
        A[:, ar, ac] = ra(st, lanes).reshape(W, 32, -1)
        B[:, br, bc] = rb(st, lanes).reshape(W, 32, -1)
        C[:, cr, cc] = rc(st, lanes).reshape(W, 32, -1)
        D = np.matmul(A, B) + C
        wi = np.searchsorted(warps, tids >> 5)
        lane = tids & 31
        vals = D[wi[:, None], cr[lane], cc[lane]]  # (n, nelem)
        write_accumulator(st, idx, wrs, vals, dt_, satfinite)

    return run, "mma"


def accumulator_writers(cx, d_op, dt_: str) -> list:
    """Writers of a dot's accumulator registers: one per register (two f16 in a .b32)."""
    return [cx.writer(r, "b32" if dt_ == "f16" else dt_) for r in _regs_of(d_op)]


def write_accumulator(st, idx, wrs, vals: np.ndarray, dt_: str, satfinite: bool) -> None:
    """Write a dot's exact results *vals* (n threads x elements, float64) to its accumulator
    registers: rounded once to f32 or f16 (two a register), f64 as is, or s32 (integer sums
    wrapped modulo 2^32, or clamped to the s32 range with .satfinite)."""
    if dt_ == "f16":
        h = nm.round_to_f16(vals).view(np.uint16).astype(np.uint32)
        vals = h[:, 0::2] | (h[:, 1::2] << np.uint32(16))
    elif dt_ == "s32":
        exact = np.rint(vals).astype(np.int64)
        if satfinite:
            vals = np.clip(exact, -(2**31), 2**31 - 1).astype(np.int32)
        else:
            vals = exact.astype(np.uint64).astype(np.uint32).view(np.int32)
    elif dt_ == "f32":
        vals = vals.astype(np.float32)
    for k, wr in enumerate(wrs):
        wr(st, idx, vals[:, k])


# ---------------------------------------------------------------- wmma (m16n16k16, own layout)
# The wmma fragment layout is opaque in PTX (only wmma instructions may interpret it), so the
# emulator uses its own consistent layout: element e of lane l of a 16x16 fragment is
# (row, col) = (_WR[l, e], _WC[l, e]) with 8 distinct elements per lane, repeated for
# 16-element fragments.

_WR = np.array([[(lane * 8 + e) // 16 for e in range(8)] for lane in range(32)])
_WC = np.array([[(lane * 8 + e) % 16 for e in range(8)] for lane in range(32)])


@handler("wmma")
def h_wmma(cx, ins):
    base, types, mods = split(ins)
    if "m16n16k16" not in mods:
        raise cx.unsupported("only wmma m16n16k16")
    kind = mods[0]
    if kind == "load":
        layout = "row" if "row" in mods else "col"
        space = parse_space([m for m in mods if m in ("global", "shared", "shared::cta")])
        t = types[0]
        check_mods(
            cx,
            mods,
            {
                "load",
                "a",
                "b",
                "c",
                "sync",
                "aligned",
                "row",
                "col",
                "m16n16k16",
                "global",
                "shared",
                "shared::cta",
            },
        )
        regs = _regs_of(ins.operands[0])
        _, ard = addr_reader(cx, ins.operands[1])
        rstride = cx.reader(ins.operands[2], "u32") if len(ins.operands) > 2 else None
        esize = 2 if t in ("f16", "bf16") else 4
        if t not in ("f16", "bf16", "f32"):
            raise cx.unsupported()
        packed = esize == 2
        wrs = [cx.writer(r, "b32" if packed else "f32") for r in regs]
        nel = len(regs) * (2 if packed else 1)

        def run_load(st, idx):
            tids = thread_ids(st, idx)
            lane = tids & 31
            base_addr = np.broadcast_to(np.asarray(ard(st, idx), np.int64), tids.shape)
            stride = np.asarray(rstride(st, idx)).astype(np.int64) if rstride is not None else 16
            vals = []
            for e in range(nel):
                r = _WR[lane, e % 8]
                c = _WC[lane, e % 8]
                off = (r * stride + c) if layout == "row" else (c * stride + r)
                parts = resolve(st, ins, idx, space, base_addr + off * esize, esize, "load")
                vals.append(read_elems(parts, tids.size, esize, 1, nm.UINT[esize * 8])[0])
            if packed:
                for k, wr in enumerate(wrs):
                    wr(
                        st,
                        idx,
                        vals[2 * k].astype(np.uint32)
                        | (vals[2 * k + 1].astype(np.uint32) << np.uint32(16)),
                    )
            else:
                for k, wr in enumerate(wrs):
                    wr(st, idx, vals[k].view(np.float32))

        return run_load, "ld." + ("global" if space == "global" else space)
    if kind == "store":
        layout = "row" if "row" in mods else "col"
        space = parse_space([m for m in mods if m in ("global", "shared", "shared::cta")])
        t = types[0]
        if t not in ("f32", "f16"):
            raise cx.unsupported()
        _, ard = addr_reader(cx, ins.operands[0])
        regs = _regs_of(ins.operands[1])
        rstride = cx.reader(ins.operands[2], "u32") if len(ins.operands) > 2 else None
        esize = 2 if t == "f16" else 4
        rds = [cx.reader(r, "b32") for r in regs]

        def run_store(st, idx):
            tids = thread_ids(st, idx)
            lane = tids & 31
            base_addr = np.broadcast_to(np.asarray(ard(st, idx), np.int64), tids.shape)
            stride = np.asarray(rstride(st, idx)).astype(np.int64) if rstride is not None else 16
            raw = [
                np.broadcast_to(np.asarray(r(st, idx)).astype(np.uint32), tids.shape) for r in rds
            ]
            if esize == 2:
                elems = []
                for v in raw:
                    elems += [
                        (v & np.uint32(0xFFFF)).astype(np.uint16),
                        (v >> np.uint32(16)).astype(np.uint16),
                    ]
            else:
                elems = raw
            for e in range(8):
                r = _WR[lane, e]
                c = _WC[lane, e]
                off = (r * stride + c) if layout == "row" else (c * stride + r)
                parts = resolve(st, ins, idx, space, base_addr + off * esize, esize, "store")
                write_elems(parts, esize, [elems[e]])

        return run_store, "st." + ("global" if space == "global" else space)
    if kind == "mma":
        if len(types) == 4:
            dt_, ct = types[0], types[3]
        elif len(types) == 2:
            dt_, ct = types
        else:
            raise cx.unsupported()
        if dt_ != "f32" or ct != "f32":
            raise cx.unsupported("wmma.mma with f16 accumulators")
        la = mods[3] if len(mods) > 3 else "row"
        lb = mods[4] if len(mods) > 4 else "col"
        del la, lb  # the load instructions already applied the memory layouts
        d_op, a_op, b_op, c_op = ins.operands[:4]
        ab_t = "bf16" if "bf16" in ins.opcode else "f16"
        ra, _ = _frag_reader(cx, a_op, ab_t, None)
        rb, _ = _frag_reader(cx, b_op, ab_t, None)
        rc, _ = _frag_reader(cx, c_op, "f32", None)
        wrs = [cx.writer(r, "f32") for r in _regs_of(d_op)]

        def run_mma(st, idx):
            tids = thread_ids(st, idx)
            warps = np.unique(tids >> 5)
            W = warps.size
            lanes = (warps[:, None] * 32 + _lane[None, :]).ravel()
            A = np.zeros((W, 16, 16))
            B = np.zeros((W, 16, 16))
            C = np.zeros((W, 16, 16))
            A[:, _WR, _WC] = ra(st, lanes).reshape(W, 32, -1)[:, :, :8]
            B[:, _WR, _WC] = rb(st, lanes).reshape(W, 32, -1)[:, :, :8]
            C[:, _WR, _WC] = rc(st, lanes).reshape(W, 32, -1)[:, :, :8]
            D = np.matmul(A, B) + C
            wi = np.searchsorted(warps, tids >> 5)
            lane = tids & 31
            for e, wr in enumerate(wrs):
                wr(st, idx, D[wi, _WR[lane, e % 8], _WC[lane, e % 8]].astype(np.float32))

        return run_mma, "mma"
    raise cx.unsupported()


@handler("movmatrix")
def h_movmatrix(cx, ins):
    """movmatrix.sync.aligned.m8n8.trans.b16 d, a: transpose an 8x8 b16 matrix across the warp."""
    base, types, mods = split(ins)
    check_mods(cx, mods, {"sync", "aligned", "m8n8", "trans"})
    if types != ["b16"] or "trans" not in mods or "m8n8" not in mods:
        raise cx.unsupported()
    ra = cx.reader(ins.operands[1], "b32")
    wr = cx.writer(ins.operands[0], "b32")
    g, q = _lane >> 2, _lane & 3

    def run(st, idx):
        tids = thread_ids(st, idx)
        warps = np.unique(tids >> 5)
        v = _full(ra, st)[(warps[:, None] * 32 + _lane[None, :])].astype(np.uint32)
        m = np.zeros((warps.size, 8, 8), np.uint32)
        m[:, g, 2 * q] = v & np.uint32(0xFFFF)
        m[:, g, 2 * q + 1] = v >> np.uint32(16)
        wi = np.searchsorted(warps, tids >> 5)
        lane = tids & 31
        lg, lq = lane >> 2, lane & 3
        wr(st, idx, m[wi, 2 * lq, lg] | (m[wi, 2 * lq + 1, lg] << np.uint32(16)))

    return run, "alu"
