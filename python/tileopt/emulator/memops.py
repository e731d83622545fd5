"""Memory instructions: ld, st, ldu, atom, red (and the address resolution that they, cp.async,
mbarrier and the bulk copies share)."""

from __future__ import annotations

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.memory import (
    CLUSTER_GENERIC_SHIFT,
    CLUSTER_RANK_SHIFT,
    GLOBAL_BASE,
    LOCAL_WINDOW,
    PARAM_WINDOW,
    SHARED_CLUSTER_SPAN,
    SHARED_WINDOW,
    WINDOW_SIZE,
    bank_conflicts,
    cluster_from_generic,
    raise_access_error,
    synchronised,
    thread_ids,
    warp_sectors,
)
from tileopt.emulator.ops import check_mods, fdecode, fencode, handler, split
from tileopt.emulator.parser import Addr, Sink, Sym, Vec

_SPACES = {"global", "shared", "local", "param", "const"}
_SYNC_MODS = {"volatile", "relaxed", "acquire", "release", "mmio"}
_CACHE_MODS = {
    "weak",
    "volatile",
    "relaxed",
    "acquire",
    "release",
    "acq_rel",
    "mmio",
    "sys",
    "gpu",
    "cta",
    "cluster",
    "ca",
    "cg",
    "cs",
    "lu",
    "cv",
    "wb",
    "wt",
    "nc",
    "unified",
    "L1::evict_normal",
    "L1::evict_unchanged",
    "L1::evict_first",
    "L1::evict_last",
    "L1::no_allocate",
    "L2::evict_normal",
    "L2::evict_first",
    "L2::evict_last",
    "L2::64B",
    "L2::128B",
    "L2::256B",
    "L2::cache_hint",
}


def parse_space(mods):
    sp = [m.split("::")[0] for m in mods if m.split("::")[0] in _SPACES]
    if len(sp) > 1:
        return None
    return sp[0] if sp else "generic"


def _signed64(v: int) -> int:
    """An address constant modulo 2^64, as the int64 the addresses are held in: PTX address
    arithmetic wraps, so [%rd+0xFFFFFFFFFFFFFFF0] is %rd-16."""
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)


def addr_reader(cx, op):
    """(symbol space or None, reader giving int64 addresses) for an address operand."""
    if not isinstance(op, Addr):
        raise cx.error("expected an address operand [..]")
    off = _signed64(op.offset)
    if op.base is None:
        return None, (lambda st, idx: np.int64(off))
    if isinstance(op.base, Sym):
        s = cx.symbol(op.base.name)
        a = _signed64(s.addr + off)
        return s, (lambda st, idx: np.int64(a))
    name = op.base.name
    slot = cx.reg_slot(name)
    dt = cx.reg_dtypes[slot]
    if dt.itemsize not in (4, 8):
        raise cx.error(f"address register {name} must be 32 or 64 bits")

    wrap32 = dt.itemsize == 4

    def rd(st, idx):
        v = st.regs[slot][idx].astype(np.int64)
        if off:
            with np.errstate(over="ignore"):  # modulo 2^64, as PTX address arithmetic
                v += off
            if wrap32:  # [%r+imm] with a 32-bit register is computed modulo 2^32
                v &= 0xFFFFFFFF
        return v

    return None, rd


# ---------------------------------------------------------------- core access


def _bcast(a, n):
    a = np.asarray(a, np.int64)
    return np.broadcast_to(a, (n,)) if a.ndim == 0 else a


def resolve(st, ins, idx, space, addr, size, count=None, shadow=None):
    """Check an access of *size* bytes per thread; returns [(views, flat offsets, positions)].

    *count* is "load"/"store"/None: which global/shared counters to update.
    *shadow* is "r"/"w"/"a" (read, write, atomic) for the shared-memory race and
    initialisation checks; by default derived from *count*.
    Generic addresses are split by window; the result is a list of (Views, offsets, positions)
    where positions are indices into the active-thread vector (None = all of them).
    """
    tids = thread_ids(st, idx)
    n = tids.shape[0]
    addr = _bcast(addr, n)
    if shadow is None and count is not None:
        shadow = "r" if count == "load" else "w"
    if shadow == "a":
        synchronised(st, idx)
    if space == "generic":
        g = addr >= GLOBAL_BASE
        if g.all():
            return resolve(st, ins, idx, "global", addr, size, count, shadow)
        sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + SHARED_CLUSTER_SPAN)
        if sh.all():
            return resolve(st, ins, idx, "shared::generic", addr - SHARED_WINDOW, size, count,
                           shadow)
        lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + WINDOW_SIZE)
        if lo.all():
            return resolve(st, ins, idx, "local", addr - LOCAL_WINDOW, size, count, shadow)
        pa = (addr >= PARAM_WINDOW) & (addr < PARAM_WINDOW + WINDOW_SIZE)
        if pa.all():
            return resolve(st, ins, idx, "kparam", addr - PARAM_WINDOW, size, count, shadow)
        bad = ~(g | sh | lo | pa)
        if bad.any():
            raise_access_error(
                st,
                ins,
                tids,
                bad,
                addr,
                "generic",
                "Out-of-bounds access",
                lambda a: (
                    "address is in no state-space window; nearest global buffer: "
                    + st.gm.nearest(a - GLOBAL_BASE)
                ),
            )
        out = []
        for m, sp, base in (
            (g, "global", 0),
            (sh, "shared::generic", SHARED_WINDOW),
            (lo, "local", LOCAL_WINDOW),
            (pa, "kparam", PARAM_WINDOW),
        ):
            pos = np.flatnonzero(m)
            if pos.size:
                sub = tids[pos]
                for views, offs, p2 in resolve(
                    st, ins, sub, sp, addr[pos] - base, size, count, shadow
                ):
                    out.append((views, offs, pos if p2 is None else pos[p2]))
        return out
    if space in ("global", "const"):
        off = addr - GLOBAL_BASE
        bad = st.gm.check(off, size)
        if bad is not None:
            raise_access_error(
                st,
                ins,
                tids,
                bad,
                addr,
                space,
                "Out-of-bounds access",
                lambda a: "nearest buffer: " + st.gm.nearest(a - GLOBAL_BASE),
            )
        _check_align(st, ins, tids, addr, size, space)
        if shadow == "r" and st.gm.shadow is not None:
            st.gm.shadow.load(st, ins, tids, off, size)
        if count is not None:
            nreq, nsec = warp_sectors(tids, off, size)
            st.gm.touch(off, size, count != "load")
            s = st.stats
            if count == "load":
                s.global_load_requests += nreq
                s.global_load_sectors += nsec
                s.global_load_bytes += n * size
            else:
                s.global_store_requests += nreq
                s.global_store_sectors += nsec
                s.global_store_bytes += n * size
        return [(st.gm.mem, off, None)]
    if space == "shared::generic":  # a generic address's offset past the shared window
        if not (addr >> CLUSTER_GENERIC_SHIFT).any():
            return resolve(st, ins, idx, "shared", addr, size, count, shadow)
        return resolve(st, ins, idx, "shared::cluster", cluster_from_generic(addr), size,
                       count, shadow)
    if space == "shared::cluster":
        # Another CTA of the cluster's shared memory: mapa put its rank + 1 above the offset.
        rank = addr >> CLUSTER_RANK_SHIFT
        if not rank.any():
            return resolve(st, ins, idx, "shared", addr, size, count, shadow)
        own = tids // st.tpc
        cluster = st.cluster_of[own * st.tpc]
        ctas = st.cluster_ctas.shape[1]
        bad = (rank < 0) | (rank > ctas)
        if bad.any():
            raise_access_error(
                st, ins, tids, bad, addr, "shared::cluster", "Out-of-bounds shared memory access",
                lambda a: f"names the CTA of rank {(a >> CLUSTER_RANK_SHIFT) - 1} in a cluster "
                f"of {ctas}")
        target = np.where(rank == 0, own, st.cluster_ctas[cluster, np.maximum(rank - 1, 0)])
        offset = addr & ((1 << CLUSTER_RANK_SHIFT) - 1)
        if (target == own).all():
            return resolve(st, ins, idx, "shared", offset, size, count, shadow)
        limit = st.shared_limit
        _check_window(st, ins, tids, offset, size, limit, "shared::cluster",
                      "Out-of-bounds shared memory access",
                      f"CTA shared memory is [0x0, 0x{limit:x}) ({limit} bytes)")
        _check_align(st, ins, tids, offset, size, "shared::cluster")
        if count == "load":
            st.stats.shared_load_requests += 1
        elif count is not None:
            st.stats.shared_store_requests += 1
        # Not race-checked: the shadow orders a CTA's own threads (bar.sync), not a cluster's.
        return [(st.shared, target * st.S + offset, None)]
    if space == "shared":
        limit = st.shared_limit
        _check_window(
            st,
            ins,
            tids,
            addr,
            size,
            limit,
            "shared",
            "Out-of-bounds shared memory access",
            f"CTA shared memory is [0x0, 0x{limit:x}) ({limit} bytes: "
            f"{st.shared_static} static + {st.shared_dynamic} dynamic)",
        )
        _check_align(st, ins, tids, addr, size, "shared")
        if count is not None:
            st.stats.shared_bank_conflicts += bank_conflicts(tids, addr, size)
            if count == "load":
                st.stats.shared_load_requests += 1
            else:
                st.stats.shared_store_requests += 1
        flat = (tids // st.tpc) * st.S + addr
        if shadow is not None and st.shadow is not None:
            st.shadow.access(st, ins, tids, flat, addr, size, shadow)
        return [(st.shared, flat, None)]
    if space == "local":
        limit = st.L_used
        _check_window(
            st,
            ins,
            tids,
            addr,
            size,
            limit,
            "local",
            "Out-of-bounds local memory access",
            f"thread local memory is [0x0, 0x{limit:x})",
        )
        _check_align(st, ins, tids, addr, size, "local")
        return [(st.local, tids * st.L + addr, None)]
    if space == "tparam":
        return [(st.tparam, tids * st.P + addr, None)]
    if space == "kparam":  # kernel parameters through their address (cvta.param): read-only
        limit = st.kparam_limit
        if count == "store" or shadow in ("w", "a"):
            raise_access_error(
                st,
                ins,
                tids,
                np.ones(n, bool),
                addr,
                "param",
                "Write to a kernel parameter",
                lambda a: "kernel parameters are read-only",
            )
        _check_window(
            st,
            ins,
            tids,
            addr,
            size,
            limit,
            "param",
            "Out-of-bounds kernel parameter access",
            f"the kernel's parameters are [0x0, 0x{limit:x})",
        )
        _check_align(st, ins, tids, addr, size, "param")
        return [(st.kparam_views, addr, None)]
    raise AssertionError(space)


def _check_window(st, ins, tids, addr, size, limit, space, what, window):
    """Raises unless every access of ``size`` bytes at ``addr`` lies in [0, ``limit``)."""
    bad = (addr < 0) | (addr + size > limit)
    if bad.any():
        raise_access_error(st, ins, tids, bad, addr, space, what, lambda a: window)


def _check_align(st, ins, tids, addr, size, space):
    if size > 1:
        mis = (addr & (size - 1)) != 0
        if mis.any():
            raise_access_error(
                st,
                ins,
                tids,
                mis,
                addr,
                space,
                f"Misaligned {size}-byte access",
                lambda a: (
                    f"address must be a multiple of {size}"
                    + (
                        ("; nearest buffer: " + st.gm.nearest(a - GLOBAL_BASE))
                        if space in ("global", "const")
                        else ""
                    )
                ),
            )


def read_elems(parts, n, esize, nelem, dtype):
    """Read *nelem* consecutive elements of *esize* bytes per thread; returns list of arrays."""
    if len(parts) == 1 and parts[0][2] is None:
        views, off, _ = parts[0]
        return [views.read(off + k * esize, esize).view(dtype) for k in range(nelem)]
    out = [np.zeros(n, dtype) for _ in range(nelem)]
    for views, off, pos in parts:
        for k in range(nelem):
            out[k][pos] = views.read(off + k * esize, esize).view(dtype)
    return out


def write_elems(parts, esize, vals):
    udt = nm.UINT[esize * 8]
    for views, off, pos in parts:
        for k, v in enumerate(vals):
            if v is None:
                continue
            v = np.asarray(v)
            raw = v.view(udt) if v.dtype.itemsize == esize else v.astype(udt)
            if pos is not None and raw.ndim:
                raw = raw[pos]
            views.write(off + k * esize, esize, raw)


def _check_global_store(st, ins, idx, parts, esize, vals) -> None:
    """The intra-CTA race check (GlobalShadow) of plain global stores, before they land."""
    tids = thread_ids(st, idx)
    udt = nm.UINT[esize * 8]
    raws = [v.view(udt) if v.dtype.itemsize == esize else v.astype(udt)
            for v in map(np.asarray, vals)]
    for views, off, pos in parts:
        if views is not st.gm.mem:
            continue

        def changes(p, views=views, off=off, pos=pos):
            q = p if pos is None else pos[p]
            differs = np.zeros(p.shape, bool)
            for k, raw in enumerate(raws):
                differs |= views.read(off[p] + k * esize, esize) != raw[q]
            return differs

        st.gm.shadow.store(st, ins, tids if pos is None else tids[pos], off, esize * len(raws),
                           changes)


# ---------------------------------------------------------------- ld / st


def _vec_count(mods):
    for m in mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def _decode_access(cx, ins, load: bool):
    """What ld and st share: (type, modifiers, vector count, state space, the register
    operands (a vector's items), the address operand, element bytes)."""
    _, types, mods = split(ins)
    if len(types) != 1:
        raise cx.unsupported()
    t = types[0]
    nvec = _vec_count(mods)
    allowed = {"v2", "v4", "param::func", "shared::cta", "shared::cluster"}
    check_mods(cx, mods, _CACHE_MODS | _SPACES | allowed | ({"param::entry"} if load else set()))
    space = "shared::cluster" if "shared::cluster" in mods else parse_space(mods)
    if space is None:
        raise cx.unsupported()
    ops_ = list(ins.operands)
    if len(ops_) == 3:
        ops_ = ops_[:2]  # cache policy operand
    if len(ops_) != 2:
        raise cx.error(f"{'ld' if load else 'st'} expects 2 operands")
    data, address = ops_ if load else ops_[::-1]
    regs = list(data.items) if isinstance(data, Vec) else [data]
    if len(regs) != nvec:
        raise cx.error(f"vector size does not match the {'destination' if load else 'source'}")
    w = nm.type_width(t)
    if w == 128:
        raise cx.unsupported(f"128-bit {'loads' if load else 'stores'}")
    return t, mods, nvec, space, regs, address, max(w // 8, 1)


@handler("ld", "ldu")
def h_ld(cx, ins):
    t, mods, nvec, space, dsts, src, esize = _decode_access(cx, ins, load=True)
    dtype = nm.np_dtype(t)
    if t == "pred":
        raise cx.unsupported()
    # ld may load into registers wider than .t (PTX ISA: operand size exceeding type size)
    wrs = [cx.writer(d, t, relaxed=True) if not isinstance(d, Sink) else None for d in dsts]
    sym, ard = addr_reader(cx, src)
    if space == "param" and sym is None and cx.cur_fn.is_entry:
        space = "kparam"  # a kernel parameter through its address (mov %r, param)
    elif space == "param" or (sym is not None and sym.space in ("kparam", "tparam")):
        if sym is None or sym.space not in ("kparam", "tparam"):
            raise cx.unsupported("ld.param through a register address")
        if sym.space == "kparam":
            off = src.offset + sym.addr

            def ld_kparam(st, idx):
                raw = st.kparams[off : off + esize * nvec]
                vals = np.frombuffer(raw.tobytes(), dtype=dtype)
                for k, wr in enumerate(wrs):
                    if wr is not None:
                        wr(st, idx, vals[k])

            return ld_kparam, "ld.param"
        space = "tparam"
    elif sym is not None and sym.space in ("shared", "local") and space == "generic":
        raise cx.unsupported("generic access through a non-generic symbol address")
    cls = "ld." + ("param" if space in ("tparam", "kparam") else space.split("::")[0])
    counted = ("load" if space in ("global", "shared", "shared::cluster", "generic", "const")
               else None)
    total = esize * nvec
    shadow = "a" if _SYNC_MODS.intersection(mods) else None  # synchronising: no race checks

    def run(st, idx):
        addr = ard(st, idx)
        parts = resolve(st, ins, idx, space, addr, total, counted, shadow)
        n = thread_ids(st, idx).shape[0]
        vals = read_elems(parts, n, esize, nvec, dtype)
        for wr, v in zip(wrs, vals, strict=True):
            if wr is not None:
                wr(st, idx, v)

    return run, cls


@handler("st")
def h_st(cx, ins):
    t, mods, nvec, space, srcs, dst, esize = _decode_access(cx, ins, load=False)
    if space == "const":  # constant memory is read-only: st.{global,local,shared,param}
        raise cx.error("st has no .const state space")
    rds = [cx.reader(s, t, relaxed=True) for s in srcs]  # st may store from wider registers
    sym, ard = addr_reader(cx, dst)
    if space == "param" or (sym is not None and sym.space in ("kparam", "tparam")):
        if sym is None or sym.space != "tparam":
            raise cx.unsupported("st.param to a kernel parameter or through a register")
        space = "tparam"
    cls = "st." + ("param" if space == "tparam" else space.split("::")[0])
    counted = "store" if space in ("global", "shared", "shared::cluster", "generic") else None
    total = esize * nvec
    shadow = "a" if _SYNC_MODS.intersection(mods) else None  # synchronising: no race checks

    def run(st, idx):
        addr = ard(st, idx)
        parts = resolve(st, ins, idx, space, addr, total, counted, shadow)
        n = thread_ids(st, idx).shape[0]
        vals = [np.broadcast_to(np.asarray(r(st, idx)), (n,)) for r in rds]
        if shadow is None and st.gm.shadow is not None:
            _check_global_store(st, ins, idx, parts, esize, vals)
        write_elems(parts, esize, vals)

    return run, cls


# ---------------------------------------------------------------- atomics


def _atom_fn(cx, op, t):
    """Binary function (old, b) -> new on raw values of type t (except cas, which is ternary)."""
    dt = nm.np_dtype(t)
    if t in ("f16x2", "bf16x2", "f16", "bf16"):
        if op not in ("add", "min", "max"):
            raise cx.unsupported(f"atom.{op}.{t}")
        dec, enc = fdecode(t), fencode(t, "rn")
        f = {"add": np.add, "min": np.fmin, "max": np.fmax}[op]
        if t == "f16":
            return lambda a, b: np.asarray(
                f(np.asarray(a, np.float64), np.asarray(b, np.float64))
            ).astype(np.float16)
        if t == "bf16":
            return lambda a, b: enc(f(dec(a), dec(b)))
        return lambda a, b: enc(f(dec(a), dec(b)))
    if op == "add":
        if t in ("f32", "f64"):
            return lambda a, b: np.add(a, b).astype(dt)
        return np.add
    if op in ("min", "max"):
        if t in ("f32", "f64"):
            return np.fmin if op == "min" else np.fmax
        return np.minimum if op == "min" else np.maximum
    if op in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    if op == "exch":
        return lambda a, b: b
    if op == "inc":
        return lambda a, b: np.where(a >= b, dt.type(0), a + dt.type(1))
    if op == "dec":
        return lambda a, b: np.where((a == 0) | (a > b), b, a - dt.type(1))
    raise cx.unsupported(f"atomic operation .{op}")


_ASSOC = {"add", "min", "max", "and", "or", "xor"}


def _segmented_scan(vals, seg_start_mask, f):
    """Inclusive scan of f within segments (Hillis-Steele, log2(n) numpy steps)."""
    n = vals.shape[0]
    seg_id = np.cumsum(seg_start_mask) - 1
    out = vals.copy()
    s = 1
    while s < n:
        same = np.zeros(n, bool)
        same[s:] = seg_id[s:] == seg_id[:-s]
        if not same.any():
            break
        comb = f(out[:-s], out[s:])
        nxt = out.copy()
        m = same[s:]
        nxt[s:][m] = np.asarray(comb)[m]
        out = nxt
        s *= 2
    return out


def atomic_update(views, off, esize, dt, op, f, b, c=None):
    """Apply an atomic op for threads (in order) at flat offsets *off*; returns the old values."""
    n = off.shape[0]
    b = np.broadcast_to(np.asarray(b, dt), (n,))
    if c is not None:
        c = np.broadcast_to(np.asarray(c, dt), (n,))
    order = np.argsort(off, kind="stable")
    so = off[order]
    starts = np.ones(n, bool)
    starts[1:] = so[1:] != so[:-1]
    old = np.empty(n, dt)
    if starts.all():  # no two threads on one address
        cur = views.read(off, esize).view(dt)
        new = np.where(cur == b, c, cur) if op == "cas" else f(cur, b)
        views.write(off, esize, np.asarray(new, dt).view(nm.UINT[esize * 8]))
        return cur
    seg_first = np.flatnonzero(starts)
    seg_id = np.cumsum(starts) - 1
    mem0 = views.read(so[seg_first], esize).view(dt)
    sb = b[order]
    if op in _ASSOC:
        inc = _segmented_scan(sb, starts, f)
        excl_prev = np.empty(n, dt)
        excl_prev[1:] = inc[:-1]
        base = mem0[seg_id]
        old_sorted = np.where(starts, base, np.asarray(f(base, excl_prev), dt))
        last = np.append(seg_first[1:] - 1, n - 1)
        final = np.asarray(f(mem0, inc[last]), dt)
    elif op == "exch":
        prev = np.empty(n, dt)
        prev[1:] = sb[:-1]
        old_sorted = np.where(starts, mem0[seg_id], prev)
        last = np.append(seg_first[1:] - 1, n - 1)
        final = sb[last]
    else:  # sequential rounds: cas, inc, dec
        rank = np.arange(n) - seg_first[seg_id]
        cur = mem0.copy()
        old_sorted = np.empty(n, dt)
        sc = c[order] if c is not None else None
        for r in range(int(rank.max()) + 1):
            sel = np.flatnonzero(rank == r)
            sid = seg_id[sel]
            o = cur[sid]
            old_sorted[sel] = o
            if op == "cas":
                cur[sid] = np.where(o == sb[sel], sc[sel], o)
            else:
                cur[sid] = f(o, sb[sel])
        final = cur
    views.write(so[seg_first], esize, np.asarray(final, dt).view(nm.UINT[esize * 8]))
    old[order] = old_sorted
    return old


@handler("atom", "red")
def h_atom(cx, ins):
    base, types, mods = split(ins)
    if len(types) != 1:
        raise cx.unsupported()
    t = types[0]
    opnames = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}
    ops_ = [m for m in mods if m in opnames]
    check_mods(
        cx,
        mods,
        opnames
        | _SPACES
        | {
            "relaxed",
            "acquire",
            "release",
            "acq_rel",
            "sys",
            "gpu",
            "cta",
            "cluster",
            "noftz",
            "L2::cache_hint",
            "shared::cta",
            "shared::cluster",
            "v2",
            "v4",
            "v8",
        },
    )
    if len(ops_) != 1:
        raise cx.unsupported()
    op = ops_[0]
    space = "shared::cluster" if "shared::cluster" in mods else parse_space(mods)
    if space not in ("global", "shared", "shared::cluster", "generic"):
        raise cx.unsupported(f"atomics on .{space}")
    vectors = [m for m in mods if m in ("v2", "v4", "v8")]
    nvec = int(vectors[0][1:]) if vectors else 1
    if len(vectors) > 1 or (vectors and (
            space.startswith("shared") or op not in ("add", "min", "max")
            or vectors[0] not in _ATOM_VECTORS.get(t, ())
            or (t == "f32" and op != "add"))):
        # PTX ISA 8.1: .v2/.v4 .f32 adds, .v2/.v4/.v8 of 16-bit floats and .v2/.v4 of
        # their pairs, on global memory.
        raise cx.unsupported(f"vector {base}.{op} .{'.'.join(vectors)}.{t} on .{space}")
    operands = list(ins.operands)
    is_red = base == "red"
    nsrc = 2 if op == "cas" else 1
    expect = (1 if is_red else 2) + nsrc
    if len(operands) == expect + 1 and "L2::cache_hint" in mods:
        operands = operands[:-1]
    if len(operands) != expect:
        raise cx.error(f"{base} expects {expect} operands")
    if is_red:
        dst = None
        aop, rest = operands[0], operands[1:]
    else:
        dst, aop, rest = operands[0], operands[1], operands[2:]
    if op == "add" and t in ("f16", "f16x2", "bf16", "bf16x2") and "noftz" not in mods:
        # PTX ISA: atom.add and red.add of these types require the .noftz qualifier
        raise cx.error(f"{base}.add.{t} requires .noftz")
    w = nm.type_width(t)
    if w not in (16, 32, 64):
        raise cx.unsupported()
    esize = w // 8
    dt = nm.np_dtype(t)
    f = None if op == "cas" else _atom_fn(cx, op, t)
    # PTX ISA (atom, red): atom.add.f32 on global memory flushes subnormal inputs and results
    # to sign-preserving zero; on shared memory it keeps them.
    f_global = (
        (lambda a, b: nm.ftz32(np.add(nm.ftz32(a), nm.ftz32(b))))
        if op == "add" and t == "f32" else f
    )
    if op == "cas" and t not in ("b32", "b64", "u32", "u64", "s32", "s64", "b16"):
        raise cx.unsupported()

    def elements(operand, what: str) -> list:
        """A vector atomic's registers, one an element."""
        if nvec == 1:
            return [operand]
        if not isinstance(operand, Vec) or len(operand.items) != nvec:
            raise cx.error(f"{base}.v{nvec} expects a vector of {nvec} {what}")
        return list(operand.items)

    rbs = [cx.reader(r, t) for r in elements(rest[0], "operands")]
    rc = cx.reader(rest[1], t) if op == "cas" else None
    wrs = ([cx.writer(d, t) if not isinstance(d, Sink) else None
            for d in elements(dst, "destinations")]
           if dst is not None and not isinstance(dst, Sink) else [None] * nvec)
    sym, ard = addr_reader(cx, aop)

    def run(st, idx):
        addr = ard(st, idx)
        # A vector access is aligned to its size; each element's update is atomic.
        parts = resolve(st, ins, idx, space, addr, esize * nvec, "store", "a")
        n = thread_ids(st, idx).shape[0]
        cv = np.broadcast_to(np.asarray(rc(st, idx), dt), (n,)) if rc is not None else None
        for j, (rb, wr) in enumerate(zip(rbs, wrs, strict=True)):
            bv = np.broadcast_to(np.asarray(rb(st, idx), dt), (n,))
            old = np.empty(n, dt)
            for views, off, pos in parts:
                fn = f_global if views is st.gm.mem else f
                if pos is None:
                    old[:] = atomic_update(views, off + j * esize, esize, dt, op, fn, bv, cv)
                else:
                    old[pos] = atomic_update(views, off + j * esize, esize, dt, op, fn,
                                             bv[pos], None if cv is None else cv[pos])
            if wr is not None:
                wr(st, idx, old)

    return run, "atom"


#: The vector atomics PTX has (ISA 8.1, sm_90), by element type.
_ATOM_VECTORS: dict[str, tuple[str, ...]] = {
    "f32": ("v2", "v4"), "f16": ("v2", "v4", "v8"), "bf16": ("v2", "v4", "v8"),
    "f16x2": ("v2", "v4"), "bf16x2": ("v2", "v4"),
}


# ---------------------------------------------------------------- distributed shared memory


def _cluster_address(cx, ins, what: str, operands: int):
    """(type, whether the addresses are generic, reader of the ``.shared::cluster`` form of
    the address operand) of ``mapa`` and ``getctarank``."""
    _, types, mods = split(ins)
    check_mods(cx, mods, {"shared::cluster"})
    if len(types) != 1 or types[0] not in ("u32", "u64"):
        raise cx.error(f"{what} takes .u32 or .u64")
    if len(ins.operands) != operands:
        raise cx.error(f"{what} expects {operands} operands")
    generic = "shared::cluster" not in mods
    a = cx.reader(ins.operands[1], types[0])

    def address(st, idx):
        v = np.asarray(a(st, idx)).astype(np.int64)
        return cluster_from_generic(v - SHARED_WINDOW) if generic else v

    return types[0], generic, address


@handler("mapa")
def h_mapa(cx, ins):
    """mapa{.shared::cluster}.{u32,u64} d, a, rank: the address of ``a``'s place in the
    shared memory of the cluster's CTA ``rank`` (its rank + 1 above the offset)."""
    t, generic, address = _cluster_address(cx, ins, "mapa", 3)
    rank = cx.reader(ins.operands[2], "u32")
    wr = cx.writer(ins.operands[0], t)
    dt = nm.np_dtype(t)
    shift = CLUSTER_GENERIC_SHIFT if generic else CLUSTER_RANK_SHIFT
    base = SHARED_WINDOW if generic else 0

    def run(st, idx):
        offset = address(st, idx) & ((1 << CLUSTER_RANK_SHIFT) - 1)
        r = np.asarray(rank(st, idx)).astype(np.int64) & 0xFFFF
        wr(st, idx, (base + offset + ((r + 1) << shift)).astype(dt))

    return run, "alu"


@handler("getctarank")
def h_getctarank(cx, ins):
    """getctarank{.shared::cluster}.{u32,u64} d, a: the rank of the cluster's CTA whose
    shared memory ``a`` names."""
    _, _, address = _cluster_address(cx, ins, "getctarank", 2)
    wr = cx.writer(ins.operands[0], "u32")

    def run(st, idx):
        rank = address(st, idx) >> CLUSTER_RANK_SHIFT
        own = st.cta_rank[thread_ids(st, idx) // st.tpc]
        wr(st, idx, np.where(rank > 0, rank - 1, own).astype(np.uint32))

    return run, "alu"
