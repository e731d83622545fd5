"""Asynchronous copies: ``cp.async`` (Ampere) and the bookkeeping of the bulk copies (Hopper).

Copies are really asynchronous in the emulator: a copy reads its source when it is issued
and its bytes land in shared memory only when the program waits for it, at the latest moment
the PTX memory model allows:

* ``cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | , ignore-src}``
  (4, 8 or 16 bytes; bytes past src-size, or all of them when ignore-src is true, are zero):
  the copy joins the thread's open group; ``cp.async.commit_group`` closes the group;
  ``cp.async.wait_group N`` completes all but the N most recent committed groups of *the
  executing thread*, ``cp.async.wait_all`` all of its copies. Completed bytes are written by
  the thread that waited, for the race checks: other warps need a ``bar.sync`` before they
  read them.
* ``cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [bar]``: an arrival on the mbarrier
  once all prior ``cp.async`` of the thread have completed (without ``.noinc`` the pending
  count is raised by one first, so the arrival does not count against the expected count).
  The copies and the arrival happen when a thread waits on that barrier.
* Bulk copies into shared memory (``cp.async.bulk``, ``cp.async.bulk.tensor``, see
  :mod:`tileopt.emulator.tma`) complete their bytes on an mbarrier (``complete_tx``): they
  land, and the transaction count drops, when a thread waits on that barrier.
* Bulk copies out of shared memory (``.bulk_group`` completion) read shared memory when
  issued and write global memory when ``cp.async.bulk.wait_group N`` of the issuing thread
  completes their group (or when the kernel ends); until the ``.read`` form (or the full
  form) completes their group, the shared bytes they read must not be written.
  ``cp.async.bulk.commit_group`` closes the thread's open bulk group.

Until it completes, a copy's destination (for a bulk store, its source) is marked in the
race-check shadow (:class:`tileopt.emulator.memory.SharedShadow`): any read or write of
those bytes, by any thread, is a shared-memory race (``SharedRaceError``), also after a
``bar.sync``, and also when the thread that issued the copy exits without waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.memops import _check_align, addr_reader, read_elems, resolve
from tileopt.emulator.memory import GLOBAL_BASE, thread_ids, warp_sectors
from tileopt.emulator.ops import check_mods, handler, split
from tileopt.emulator.parser import Imm, Reg


@dataclass
class _CpBatch:
    """The cp.async copies of one execution of one instruction that are still in flight."""

    tids: np.ndarray  # issuing thread of each copy
    flat: np.ndarray  # chunk-flat shared byte offset of each copy
    data: np.ndarray  # (n, size) bytes
    group: np.ndarray  # the thread's open group when the copy was issued
    seq: int  # issue order
    size: int


@dataclass
class _Transfer:
    """Something that completes on an mbarrier when a thread waits on it."""

    kind: str  # "tx": bulk copy into shared memory; "arrive": cp.async.mbarrier.arrive
    tid: int
    line: int
    flat: np.ndarray | None = None  # tx: chunk-flat offsets of 16-byte chunks
    data: np.ndarray | None = None  # tx: (nchunks, 16) bytes
    nbytes: int = 0  # tx: bytes completed on the barrier
    seq: int = 0  # arrive: copies of the thread issued before this one
    probed: bool = False  # a wait already found it in flight: it lands at the next wait


@dataclass
class _BulkStore:
    """A bulk copy from shared to global memory (``.bulk_group`` completion)."""

    tid: int
    group: int
    src: np.ndarray  # chunk-flat offsets of the 16-byte shared chunks it reads
    goff: np.ndarray  # global offsets of the elements it writes
    data: np.ndarray  # their values (unsigned, esize bytes)
    esize: int
    reading: bool = True
    # cp.reduce.async.bulk: (old, data) -> what is written, raw values (None: a plain store)
    reduce: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None


@dataclass
class AsyncCopies:
    """A chunk's asynchronous copies in flight (``State.copies``)."""

    cp_open: np.ndarray
    bulk_open: np.ndarray
    cp: list[_CpBatch] = field(default_factory=list)
    bulk: list[_BulkStore] = field(default_factory=list)
    on_bar: dict[int, list[_Transfer]] = field(default_factory=dict)
    seq: int = 0


def copies(st) -> AsyncCopies:
    """The chunk's :class:`AsyncCopies` (created at first use)."""
    if st.copies is None:
        st.copies = AsyncCopies(np.zeros(st.T, np.int64), np.zeros(st.T, np.int64))
    return st.copies


def _land(st, flat: np.ndarray, data: np.ndarray) -> None:
    """Write copies of ``data.shape[1]`` bytes at chunk-flat shared offsets *flat*."""
    st.shared.u8[flat[:, None] + np.arange(data.shape[1])[None, :]] = data


# ---------------------------------------------------------------- cp.async


def cp_complete(st, keep: np.ndarray, tags_by_thread: bool) -> None:
    """Complete the cp.async copies whose entry in *keep* (per thread: copies of groups
    numbered below it complete) says so."""
    ac = st.copies
    left = []
    for b in ac.cp:
        done = b.group < keep[b.tids]
        if done.any():
            flat = b.flat[done]
            _land(st, flat, b.data[done])
            if st.shadow is not None:
                tags = st.shadow.me[b.tids[done]] if tags_by_thread else None
                st.shadow.async_end(flat, b.size, True, tags)
            if done.all():
                continue
            keep_m = ~done
            b = _CpBatch(
                b.tids[keep_m], b.flat[keep_m], b.data[keep_m], b.group[keep_m], b.seq, b.size
            )
        left.append(b)
    ac.cp = left


def _cp_before(st, tid: int, seq: int) -> None:
    """Complete the cp.async copies of thread *tid* issued before issue number *seq*."""
    ac = st.copies
    left = []
    for b in ac.cp:
        done = (b.tids == tid) & (b.seq < seq)
        if done.any():
            flat = b.flat[done]
            _land(st, flat, b.data[done])
            if st.shadow is not None:
                st.shadow.async_end(flat, b.size, True, None)
            if done.all():
                continue
            k = ~done
            b = _CpBatch(b.tids[k], b.flat[k], b.data[k], b.group[k], b.seq, b.size)
        left.append(b)
    ac.cp = left


@handler("cp")
def h_cp(cx, ins):
    base, types, mods = split(ins)
    if mods[:3] == ["reduce", "async", "bulk"]:
        from tileopt.emulator.tma import compile_bulk_reduce

        return compile_bulk_reduce(cx, ins, mods[3:], types)
    if not mods or mods[0] != "async":
        raise cx.unsupported()
    rest = mods[1:]
    if rest[:1] == ["bulk"]:
        from tileopt.emulator.tma import compile_bulk

        return compile_bulk(cx, ins, rest[1:], types)
    if rest and rest[0] in ("commit_group", "wait_group", "wait_all"):
        return _cp_group_op(cx, ins, rest[0])
    if rest and rest[0] == "mbarrier":
        return _cp_mbarrier_arrive(cx, ins, rest)
    check_mods(
        cx,
        rest,
        {
            "ca",
            "cg",
            "shared",
            "shared::cta",
            "global",
            "L2::cache_hint",
            "L2::64B",
            "L2::128B",
            "L2::256B",
        },
    )
    operands = list(ins.operands)
    if len(operands) < 3:
        raise cx.error("cp.async expects at least 3 operands")
    dsto, srco, szo = operands[:3]
    extra = operands[3:]
    if not isinstance(szo, Imm) or szo.value not in (4, 8, 16):
        raise cx.unsupported("cp-size must be 4, 8 or 16")
    cp = szo.value
    src_size = None
    ignore = None
    if "L2::cache_hint" in rest and extra:
        extra = extra[:-1]
    if extra:
        e = extra[0]
        if isinstance(e, Reg) and (e.neg or cx.cur_fn.regs.get(e.name) == "pred"):
            ignore = cx.reader(e, "pred")  # ignore-src predicate: zero-fill when true
        else:
            src_size = cx.reader(e, "u32")
    _, dread = addr_reader(cx, dsto)
    _, sread = addr_reader(cx, srco)

    def run(st, idx):
        tids = thread_ids(st, idx)
        n = tids.shape[0]
        if src_size is not None:
            ss = np.broadcast_to(np.asarray(src_size(st, idx)).astype(np.int64), (n,))
        elif ignore is not None:
            ss = np.where(np.broadcast_to(ignore(st, idx), (n,)), 0, cp).astype(np.int64)
        else:
            ss = None
        daddr = np.broadcast_to(np.asarray(dread(st, idx), np.int64), (n,))
        saddr = np.broadcast_to(np.asarray(sread(st, idx), np.int64), (n,))
        ((_, flat, _),) = resolve(st, ins, idx, "shared", daddr, cp, None, None)
        if ss is None or (ss >= cp).all():
            parts = resolve(st, ins, idx, "global", saddr, cp, "load")
            esize = 8 if cp >= 8 else 4
            vals = read_elems(parts, n, esize, cp // esize, nm.UINT[esize * 8])
            data = np.ascontiguousarray(np.stack(vals, axis=1)).view(np.uint8)
        else:  # partial source: zero-fill the bytes past src-size
            ss = np.minimum(ss, cp)
            data = np.zeros((n, cp), np.uint8)
            has = np.flatnonzero(ss > 0)
            if has.size:
                sub = tids[has]
                sa = saddr[has]
                for k in range(cp):  # bounds-check only the bytes actually read
                    rd_k = np.flatnonzero(ss[has] > k)
                    if rd_k.size == 0:
                        break
                    p = resolve(st, ins, sub[rd_k], "global", sa[rd_k] + k, 1, None)
                    data[has[rd_k], k] = read_elems(p, rd_k.size, 1, 1, np.uint8)[0]
                _check_align(st, ins, sub, sa, cp, "global")
                nreq, nsec = warp_sectors(sub, sa - GLOBAL_BASE, cp)
                st.gm.touch(sa - GLOBAL_BASE, cp, False)
                st.stats.global_load_requests += nreq
                st.stats.global_load_sectors += nsec
                st.stats.global_load_bytes += int(ss.sum())
        ac = copies(st)
        if st.shadow is not None:
            st.shadow.async_begin(st, ins, tids, flat, daddr, cp, True)
        tids = np.array(tids, np.int64)  # a copy: ``st.arange`` is shared
        ac.cp.append(_CpBatch(tids, np.array(flat), data, ac.cp_open[tids], ac.seq, cp))
        ac.seq += 1

    return run, "cp.async"


def _cp_group_op(cx, ins, what: str):
    if what == "commit_group":
        check_mods(cx, split(ins)[2], {"async", "commit_group"})

        def commit(st, idx):
            copies(st).cp_open[thread_ids(st, idx)] += 1

        return commit, "sync"
    if what == "wait_all":
        check_mods(cx, split(ins)[2], {"async", "wait_all"})
        keep_n = 0
    else:
        check_mods(cx, split(ins)[2], {"async", "wait_group"})
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise cx.error("cp.async.wait_group expects an integer constant")
        keep_n = ins.operands[0].value

    def wait(st, idx):
        if st.copies is None:
            return
        ac = st.copies
        tids = thread_ids(st, idx)
        if what == "wait_all":  # = commit_group + wait_group 0
            ac.cp_open[tids] += 1
        if not ac.cp:
            return
        keep = np.full(st.T, -1, np.int64)
        keep[tids] = ac.cp_open[tids] - keep_n
        cp_complete(st, keep, True)

    return wait, "sync"


def _cp_mbarrier_arrive(cx, ins, rest):
    # cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]
    check_mods(cx, rest, {"mbarrier", "arrive", "noinc", "shared", "shared::cta", "b64"})
    if len(ins.operands) != 1:
        raise cx.error("cp.async.mbarrier.arrive expects one address operand")
    noinc = "noinc" in rest
    _, ard = addr_reader(cx, ins.operands[0])
    space = "shared" if any(m.startswith("shared") for m in rest) else "generic"

    def run(st, idx):
        from tileopt.emulator import mbarrier

        tids = thread_ids(st, idx)
        ((views, flat, _),) = _shared_parts(st, ins, idx, space, ard(st, idx), 8)
        mbarrier._check_init(st, ins, views.read(flat, 8), flat)
        if not noinc:  # the pending count is raised now, the arrival comes with the copies
            uniq, cnt = np.unique(flat, return_counts=True)
            pend, exp, tx, ph = mbarrier.fields(views.read(uniq, 8))
            views.write(uniq, 8, mbarrier.pack(pend + cnt, exp, tx, ph))
            st.mb_changes += 1
        ac = copies(st)
        for t, f in zip(tids.tolist(), flat.tolist(), strict=True):
            ac.on_bar.setdefault(int(f), []).append(_Transfer("arrive", t, ins.line, seq=ac.seq))

    return run, "sync"


def _shared_parts(st, ins, idx, space, addr, size):
    """resolve() for an operand that must be in the CTA's shared memory."""
    from tileopt.emulator.errors import EmulatorError

    parts = resolve(st, ins, idx, space, addr, size, None, "a")
    if len(parts) != 1 or parts[0][0] is not st.shared or parts[0][2] is not None:
        raise EmulatorError(
            f"PTX line {ins.line} (`{ins.text}`): the mbarrier address is not in shared memory"
        )
    return parts


# ---------------------------------------------------------------- completion on mbarriers


def bar_transfer(
    st, ins, tid: int, bar: int, flat: np.ndarray, data: np.ndarray, addr: np.ndarray, nbytes: int
) -> None:
    """A bulk copy into shared memory by thread *tid*, completing *nbytes* on the mbarrier at
    chunk-flat offset *bar*: 16-byte chunks ``data`` go to chunk-flat offsets ``flat``
    (shared addresses ``addr``) when a thread waits on the barrier."""
    if st.shadow is not None:
        tids = np.full(flat.shape[0], tid, np.int64)
        st.shadow.async_begin(st, ins, tids, flat, addr, 16, True)
    copies(st).on_bar.setdefault(int(bar), []).append(
        _Transfer("tx", tid, ins.line, flat=flat, data=data, nbytes=nbytes)
    )


def pending_on(st, bars) -> bool:
    """True when copies are in flight on any mbarrier at the chunk-flat offsets *bars*."""
    if st.copies is None:
        return False
    return any(st.copies.on_bar.get(int(b)) for b in np.atleast_1d(bars))


def deliver(st, ins, bars: np.ndarray) -> bool:
    """A failed wait on the mbarriers at chunk-flat offsets *bars* lets their copies in
    flight progress: those that an earlier wait found in flight complete now (in issue
    order: their bytes land in shared memory, then they complete their transaction bytes or
    arrive on the barrier); the others are marked to complete at the next wait. So the first
    wait that needs a copy always fails (a kernel that reads without looping on the wait
    reads bytes still in flight), and the copies land as late as a program can tell.
    Returns True when anything changed."""
    if st.copies is None or not st.copies.on_bar:
        return False
    from tileopt.emulator import mbarrier

    changed = False
    for b in np.atleast_1d(bars).tolist():
        todo = st.copies.on_bar.get(int(b))
        if not todo:
            continue
        changed = True
        if not all(tr.probed for tr in todo):
            for tr in todo:
                tr.probed = True
            st.mb_changes += 1
            continue
        del st.copies.on_bar[int(b)]
        for tr in todo:
            if tr.kind == "tx":
                _land(st, tr.flat, tr.data)
                if st.shadow is not None:
                    st.shadow.async_end(tr.flat, 16, True, None)
                mbarrier.update(st, ins, np.array([b]), complete=np.array([tr.nbytes]))
            else:
                _cp_before(st, tr.tid, tr.seq)
                mbarrier.update(st, ins, np.array([b]), arrive=np.array([1]))
    return changed


# ---------------------------------------------------------------- bulk stores (bulk_group)


def bulk_store(
    st,
    ins,
    tid: int,
    src: np.ndarray,
    src_addr: np.ndarray,
    goff: np.ndarray,
    data: np.ndarray,
    esize: int,
    reduce: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> None:
    """A bulk copy from shared memory (16-byte chunks at chunk-flat offsets *src*, read now)
    to global memory (elements of *esize* bytes at global offsets *goff*, written when its
    bulk group completes; with *reduce*, combined with what global memory holds then, as
    ``cp.reduce.async.bulk`` does)."""
    ac = copies(st)
    if st.shadow is not None:
        tids = np.full(src.shape[0], tid, np.int64)
        st.shadow.async_begin(st, ins, tids, src, src_addr, 16, False)
    ac.bulk.append(_BulkStore(tid, int(ac.bulk_open[tid]), src, goff, data, esize,
                              reduce=reduce))


def _bulk_write(st, op: _BulkStore) -> None:
    if op.goff.size:
        data = op.data
        if op.reduce is not None:
            data = op.reduce(st.gm.mem.read(op.goff, op.esize), data)
        st.gm.mem.write(op.goff, op.esize, data)


def bulk_wait(st, tids: np.ndarray, keep_n: int, read_only: bool) -> None:
    """cp.async.bulk.wait_group{.read} keep_n by threads *tids*."""
    ac = st.copies
    if ac is None or not ac.bulk:
        return
    limit = np.full(st.T, -1, np.int64)
    limit[tids] = ac.bulk_open[tids] - keep_n
    left = []
    for op in ac.bulk:
        if op.group < limit[op.tid]:
            if op.reading:
                op.reading = False
                if st.shadow is not None:
                    st.shadow.async_end(op.src, 16, False)
            if not read_only:
                _bulk_write(st, op)
                continue
        left.append(op)
    ac.bulk = left


def finish(st) -> None:
    """End of a chunk: bulk stores still in flight reach global memory. A CTA must not exit
    while a bulk copy still reads its shared memory (the memory goes to the next CTA): that
    is reported as a race (cp.async.bulk.wait_group.read is missing)."""
    ac = st.copies
    if ac is None:
        return
    reading = [op for op in ac.bulk if op.reading]
    for op in ac.bulk:
        _bulk_write(st, op)
    ac.bulk = []
    if reading and st.shadow is not None:
        st.stats.shared_races += len(reading)
        if st.shadow.mode == "raise":
            from tileopt.emulator.errors import SharedRaceError

            op = reading[0]
            line = int(st.shadow.pend_line[op.src[0] >> 2])
            cta, tid = st.describe_thread(op.tid)
            raise SharedRaceError(
                f"Shared-memory race in kernel {st.kernel_name!r}: CTA {cta} exited while a bulk "
                f"copy from its shared memory (PTX line {line}: "
                f"`{st.shadow.lines.get(line, '?')}`, issued by thread {tid}) was still reading "
                f"it\n  (wait for it with cp.async.bulk.wait_group.read before the threads exit; "
                f"launch(..., shared_checks='count') only counts races)"
            )
