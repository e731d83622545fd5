"""mbarrier: Hopper/Ampere shared-memory barriers with arrival counts and transaction counts.

Instructions (``.shared``, ``.shared::cta`` and ``.shared::cluster`` addresses, 32- or 64-bit
address registers, generic addresses; ``.release``/``.acquire``/``.relaxed``, ``.cta``/
``.cluster`` scopes accepted):

* ``mbarrier.init [bar], count`` and ``mbarrier.inval [bar]``;
* ``mbarrier.arrive{.noComplete} [state,] [bar] {, count}`` (the state token is the phase of the
  arrival), ``mbarrier.arrive_drop`` (also lowers the expected count of later phases);
* ``mbarrier.arrive.expect_tx [state,] [bar], txCount {, count}``, ``mbarrier.expect_tx [bar],
  txCount``, ``mbarrier.complete_tx [bar], txCount`` (the transaction count of the phase, in
  bytes; asynchronous bulk copies complete their bytes on it);
* ``mbarrier.test_wait``/``mbarrier.try_wait`` with a state token or ``.parity``, with an
  optional suspend-time hint (ignored: the emulator never blocks in a wait);
* ``mbarrier.pending_count`` (reads 0).

Semantics (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier"): a
phase completes when its pending arrival count and its transaction count both reach zero;
the next phase then expects the barrier's expected count again. Arrivals beyond the pending
count go to the next phase when no transaction count is pending (several threads arriving
at once); otherwise they are an error, as are operations on a barrier that was never
initialised (or was invalidated), an ``init`` count outside ``[1, 2^20 - 1]`` and a
transaction count outside ``[-(2^20 - 1), 2^20 - 1]``. A completed phase synchronises the
CTA for the race checks (like ``bar.sync``).

The 64-bit barrier word (the emulator's encoding; the real one is opaque): bits 0-19 the
pending arrivals, 20-39 the expected arrivals, 40-60 the transaction count (two's
complement), 61-63 the phase number modulo 8 (a state token holds the phase of its arrival).

Asynchronous copies that complete on a barrier (``cp.async.mbarrier.arrive``,
``cp.async.bulk``, ``cp.async.bulk.tensor``) are delivered at the latest moment the emulator
can choose: when a thread waits on that barrier (:func:`tileopt.emulator.asynccopy.deliver`).
A wait that fails is recorded per thread; when every live thread of the chunk that could run
is spinning on waits that failed twice with no barrier changing in between, the machine
raises a deadlock error naming the wait (:meth:`tileopt.emulator.machine.State._run`).
"""

from __future__ import annotations

import numpy as np

from tileopt.emulator.errors import EmulatorError
from tileopt.emulator.memops import addr_reader, resolve
from tileopt.emulator.memory import thread_ids
from tileopt.emulator.ops import check_mods, handler, split
from tileopt.emulator.parser import Addr, Sink

_PEND_MASK = (1 << 20) - 1
MAX_COUNT = _PEND_MASK
_EXP_SHIFT = 20
_TX_SHIFT = 40
_TX_BITS = 21
_TX_MASK = (1 << _TX_BITS) - 1
_PH_SHIFT = 61
PHASES = 8


def fields(w) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pending arrivals, expected arrivals, transaction count, phase) of barrier words."""
    w = np.asarray(w, np.uint64)
    pend = (w & np.uint64(_PEND_MASK)).astype(np.int64)
    exp = ((w >> np.uint64(_EXP_SHIFT)) & np.uint64(_PEND_MASK)).astype(np.int64)
    tx = ((w >> np.uint64(_TX_SHIFT)) & np.uint64(_TX_MASK)).astype(np.int64)
    tx = np.where(tx >= 1 << (_TX_BITS - 1), tx - (1 << _TX_BITS), tx)
    phase = (w >> np.uint64(_PH_SHIFT)).astype(np.int64)
    return pend, exp, tx, phase


def pack(pend, exp, tx, phase) -> np.ndarray:
    """Barrier words from their fields (see :func:`fields`)."""
    return (
        (np.asarray(np.asarray(phase) % PHASES, np.uint64) << np.uint64(_PH_SHIFT))
        | (np.asarray(np.asarray(tx) & _TX_MASK, np.uint64) << np.uint64(_TX_SHIFT))
        | (np.asarray(exp, np.uint64) << np.uint64(_EXP_SHIFT))
        | np.asarray(pend, np.uint64)
    )


def _fail(st, ins, flat: int, what: str) -> EmulatorError:
    cta = flat // st.S if st.S else 0
    c = st.cta_first + cta
    gx, gy, _ = st.grid
    where = (c % gx, (c // gx) % gy, c // (gx * gy))
    return EmulatorError(
        f"mbarrier error in kernel {st.kernel_name!r} at PTX line {ins.line}: `{ins.text}`\n"
        f"  CTA {where}, mbarrier at shared address 0x{flat % st.S if st.S else flat:x}: {what}"
    )


def _check_init(st, ins, words, flat) -> None:
    bad = np.asarray(words) == 0
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise _fail(
            st,
            ins,
            int(np.asarray(flat)[i]),
            "the barrier is not initialised (no mbarrier.init, or mbarrier.inval since)",
        )


def _changed(st, ctas_completed) -> None:
    """Bookkeeping after barrier words changed: progress stamp, race-check epochs."""
    st.mb_changes += 1
    if len(ctas_completed):
        st.gepoch[np.unique(np.asarray(ctas_completed, np.int64))] += 1
    if st.shadow is not None and len(ctas_completed):
        # a completed phase synchronises the CTA's threads like a barrier (race checks)
        st.shadow.barrier(np.unique(np.asarray(ctas_completed, np.int64)))


def update(
    st, ins, flat, *, arrive=None, expect=None, complete=None, drop=False, no_complete=False
) -> np.ndarray:
    """Apply barrier operations of several threads, in thread order, to shared memory.

    *flat* holds the chunk-flat byte offsets of the barriers (one per thread, duplicates
    allowed); *arrive* the arrival counts (None: no arrival), *expect* / *complete* the
    transaction bytes added (expect-tx, done before the arrival) or completed. Returns the
    state tokens (the phase of each thread's arrival).
    """
    flat = np.asarray(flat, np.int64)
    n = flat.shape[0]
    views = st.shared
    uniq, inv = np.unique(flat, return_inverse=True)
    words = views.read(uniq, 8)
    _check_init(st, ins, words, uniq)
    pend, exp, tx, phase = fields(words)
    arr = None if arrive is None else np.broadcast_to(np.asarray(arrive, np.int64), (n,))
    if (
        expect is None
        and complete is None
        and not drop
        and not no_complete
        and arr is not None
        and not tx.any()
        and (exp > 0).all()
        and (pend > 0).all()
    ):
        return _arrive_fast(st, uniq, inv, arr, pend, exp, phase)
    exps = None if expect is None else np.broadcast_to(np.asarray(expect, np.int64), (n,))
    comps = None if complete is None else np.broadcast_to(np.asarray(complete, np.int64), (n,))
    pend, exp, tx, phase = (a.tolist() for a in (pend, exp, tx, phase))
    tokens = np.zeros(n, np.int64)
    completed: list[int] = []
    for i in range(n):
        u = int(inv[i])
        if exps is not None:
            tx[u] += int(exps[i])
        if comps is not None:
            tx[u] -= int(comps[i])
        if not -MAX_COUNT <= tx[u] <= MAX_COUNT:
            raise _fail(st, ins, int(uniq[u]), f"transaction count {tx[u]} out of range")
        tokens[i] = phase[u]
        if arr is not None:
            c = int(arr[i])
            pend[u] -= c
            if drop:
                exp[u] = max(exp[u] - c, 0)
            while pend[u] < 0:
                if tx[u] != 0 or exp[u] == 0:
                    raise _fail(
                        st,
                        ins,
                        int(uniq[u]),
                        f"{-pend[u]} more arrivals than the phase expects "
                        f"(transaction count {tx[u]}, expected arrivals {exp[u]})",
                    )
                phase[u] += 1  # extra arrivals complete this phase and count for the next
                pend[u] += exp[u]
                completed.append(int(uniq[u]) // st.S)
        if pend[u] == 0 and tx[u] == 0:
            if no_complete:
                raise _fail(st, ins, int(uniq[u]), "mbarrier.arrive.noComplete completed the phase")
            phase[u] += 1
            pend[u] = exp[u]
            completed.append(int(uniq[u]) // st.S)
            if exp[u] == 0:
                pend[u] = 0
    views.write(uniq, 8, pack(pend, exp, tx, phase))
    _changed(st, completed)
    return tokens % PHASES


def _arrive_fast(st, uniq, inv, counts, pend, exp, phase) -> np.ndarray:
    """Arrivals only, no transaction counts: vectorised over the threads (in thread order)."""
    order = np.argsort(inv, kind="stable")
    seg = inv[order]
    c = counts[order]
    n = c.shape[0]
    starts = np.ones(n, bool)
    starts[1:] = seg[1:] != seg[:-1]
    first = np.flatnonzero(starts)
    cum = np.cumsum(c)
    before = cum - c - (cum - c)[first][np.cumsum(starts) - 1]  # earlier arrivals, same barrier
    p0, e = pend[seg], exp[seg]
    done_before = np.where(before >= p0, 1 + (before - p0) // e, 0)
    tokens = np.empty(n, np.int64)
    tokens[order] = (phase[seg] + done_before) % PHASES
    total = np.zeros(uniq.shape[0], np.int64)
    np.add.at(total, inv, counts)
    ncomp = np.where(total >= pend, 1 + (total - pend) // exp, 0)
    new_pend = pend - total + ncomp * exp
    st.shared.write(uniq, 8, pack(new_pend, exp, np.zeros_like(exp), phase + ncomp))
    _changed(st, (uniq // st.S)[ncomp > 0])
    return tokens


def record_wait(st, tids, ok, flat, line: int) -> None:
    """Remember, per thread, whether its last wait failed and what barriers looked like then
    (``st.mb_changes``): the machine's deadlock check reads it."""
    if st.wait_stamp is None:
        st.wait_stamp = np.full(st.T, -1, np.int64)
        st.wait_repeat = np.zeros(st.T, bool)
        st.wait_flat = np.zeros(st.T, np.int64)
        st.wait_line = np.zeros(st.T, np.int64)
    prev = st.wait_stamp[tids]
    now = st.mb_changes
    st.wait_repeat[tids] = ~ok & (prev == now)
    st.wait_stamp[tids] = np.where(ok, -1, now)
    st.wait_flat[tids] = flat
    st.wait_line[tids] = line


# ---------------------------------------------------------------- the instruction

_KINDS = (
    "init",
    "arrive",
    "arrive_drop",
    "test_wait",
    "try_wait",
    "inval",
    "pending_count",
    "expect_tx",
    "complete_tx",
)


@handler("mbarrier")
def h_mbarrier(cx, ins):
    base, types, mods = split(ins)
    kinds = [m for m in mods if m in _KINDS]
    check_mods(
        cx,
        mods,
        set(_KINDS)
        | {
            "shared",
            "shared::cta",
            "shared::cluster",
            "parity",
            "noComplete",
            "release",
            "acquire",
            "relaxed",
            "cta",
            "cluster",
            "sync",
            "aligned",
        },
    )
    if not kinds:
        raise cx.unsupported()
    kind = kinds[0]
    space = ("shared::cluster" if "shared::cluster" in mods  # maybe another CTA's (mapa)
             else "shared" if any(m.startswith("shared") for m in mods) else "generic")
    ops_ = list(ins.operands)
    if kind == "pending_count":
        rd = cx.reader(ops_[1], "b64")
        wr = cx.writer(ops_[0], "b32")
        return (lambda st, idx: wr(st, idx, np.zeros(np.shape(rd(st, idx)), np.uint32))), "sync"

    def locate(st, idx, ard):
        """Flat offsets into the chunk's shared memory of the barriers the threads name."""
        n = thread_ids(st, idx).shape[0]
        flat = np.zeros(n, np.int64)
        for views, off, pos in resolve(st, ins, idx, space, ard(st, idx), 8, None, "a"):
            if views is not st.shared:
                raise EmulatorError(
                    f"mbarrier at PTX line {ins.line} (`{ins.text}`) is not in shared memory"
                )
            if pos is None:
                flat[:] = off
            else:
                flat[pos] = off
        return flat

    def count_of(rd, st, idx, n):
        return np.broadcast_to(np.asarray(rd(st, idx)).astype(np.int64), (n,))

    if kind in ("init", "inval"):
        if len(ops_) != (2 if kind == "init" else 1):
            raise cx.error(f"mbarrier.{kind} expects {2 if kind == 'init' else 1} operands")
        _, ard = addr_reader(cx, ops_[0])
        cnt = cx.reader(ops_[1], "u32") if kind == "init" else None

        def run_init(st, idx):
            from tileopt.emulator.asynccopy import pending_on

            n = thread_ids(st, idx).shape[0]
            flat = locate(st, idx, ard)
            if cnt is None:
                if pending_on(st, flat):
                    raise _fail(st, ins, int(flat[0]), "invalidated with copies still in flight")
                st.shared.write(flat, 8, np.zeros(n, np.uint64))
            else:
                c = count_of(cnt, st, idx, n)
                bad = (c < 1) | (c > MAX_COUNT)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise _fail(st, ins, int(flat[i]), f"count {int(c[i])} not in [1, {MAX_COUNT}]")
                st.shared.write(flat, 8, pack(c, c, 0, 0))
            st.mb_changes += 1

        return run_init, "sync"

    if kind in ("expect_tx", "complete_tx"):  # mbarrier.expect_tx [bar], txCount
        if len(ops_) != 2:
            raise cx.error(f"mbarrier.{kind} expects 2 operands")
        _, ard = addr_reader(cx, ops_[0])
        txr = cx.reader(ops_[1], "u32")

        def run_tx(st, idx):
            n = thread_ids(st, idx).shape[0]
            flat = locate(st, idx, ard)
            tx = count_of(txr, st, idx, n)
            if kind == "expect_tx":
                update(st, ins, flat, expect=tx)
            else:
                update(st, ins, flat, complete=tx)

        return run_tx, "sync"

    if kind in ("arrive", "arrive_drop"):
        # mbarrier.arrive{.expect_tx} [state,] [addr] {, txCount} {, count}
        dst = ops_[0]
        has_state = not isinstance(dst, Addr)
        wr = cx.writer(dst, "b64") if has_state and not isinstance(dst, Sink) else None
        aop = ops_[1] if has_state else ops_[0]
        rest = ops_[2:] if has_state else ops_[1:]
        expect = "expect_tx" in kinds
        if len(rest) > (2 if expect else 1) or (expect and not rest):
            raise cx.error("bad mbarrier.arrive operands")
        txr = cx.reader(rest[0], "u32") if expect else None
        cnt_op = rest[1] if expect and len(rest) > 1 else (rest[0] if rest and not expect else None)
        cnt = cx.reader(cnt_op, "u32") if cnt_op is not None else None
        _, ard = addr_reader(cx, aop)
        drop = kind == "arrive_drop"
        no_complete = "noComplete" in mods

        def run_arrive(st, idx):
            n = thread_ids(st, idx).shape[0]
            flat = locate(st, idx, ard)
            c = count_of(cnt, st, idx, n) if cnt is not None else np.ones(n, np.int64)
            bad = (c < 1) | (c > MAX_COUNT)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise _fail(st, ins, int(flat[i]), f"arrival count {int(c[i])} out of range")
            tx = count_of(txr, st, idx, n) if txr is not None else None
            tok = update(st, ins, flat, arrive=c, expect=tx, drop=drop, no_complete=no_complete)
            if wr is not None:
                wr(st, idx, tok.astype(np.uint64))

        return run_arrive, "sync"

    # test_wait / try_wait{.parity} waitComplete, [addr], state|parity {, suspendTimeHint}
    if len(ops_) not in (3, 4):
        raise cx.error(f"mbarrier.{kind} expects 3 or 4 operands")
    wr = cx.writer(ops_[0], "pred")
    _, ard = addr_reader(cx, ops_[1])
    parity = "parity" in mods
    tok = cx.reader(ops_[2], "b32" if parity else "b64")
    if len(ops_) == 4:
        cx.reader(ops_[3], "u32")  # suspend-time hint: checked, ignored

    def run_wait(st, idx):
        from tileopt.emulator.asynccopy import deliver

        tids = thread_ids(st, idx)
        n = tids.shape[0]
        flat = locate(st, idx, ard)
        t = np.broadcast_to(np.asarray(tok(st, idx)).astype(np.int64), (n,))

        def probe():
            words = st.shared.read(flat, 8)
            _check_init(st, ins, words, flat)
            phase = fields(words)[3]
            if parity:
                return (phase & 1) != (t & 1)
            return (phase - t) % PHASES != 0

        done = probe()
        if not done.all() and deliver(st, ins, np.unique(flat[~done])):
            done = probe()  # copies in flight on these barriers progressed
        record_wait(st, tids, done, flat, ins.line)
        wr(st, idx, done)

    return run_wait, "sync"


def describe(st, flat: int) -> str:
    """The state of the barrier at chunk-flat offset *flat*, in words (deadlock messages)."""
    pend, exp, tx, phase = (int(v[0]) for v in fields(st.shared.read(np.array([flat]), 8)))
    return (
        f"mbarrier at shared address 0x{flat % st.S:x}: phase {phase} (mod {PHASES}), "
        f"{pend} of {exp} arrivals pending, transaction count {tx}"
    )
