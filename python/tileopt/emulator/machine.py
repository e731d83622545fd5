"""Execution of a compiled kernel over a chunk of CTAs: registers, scheduling, barriers.

Scheduling: every thread has a program counter; the machine always executes the smallest
PC among unfinished threads, for all threads at that PC at once (over every CTA of the
chunk). Threads that took different paths wait at higher PCs and merge again as soon as
the others catch up, which gives correct reconvergence for structured and unstructured
control flow, keeps warps in lockstep, and makes ``bar.sync`` correct: when a barrier
executes, no thread of the CTA can still be behind it.

Polling loops (a backward branch over volatile/atomic loads, nanosleep or an mbarrier wait)
yield to the threads waiting further ahead after ``SPIN_LIMIT`` iterations, so a consumer
warp spinning on ``mbarrier.try_wait`` lets the producer warp that will complete the phase
run. A loop around an mbarrier wait is a deadlock when every thread that could run spins on
a wait that failed twice with no mbarrier changing in between (and the other threads wait at
barriers): the machine raises an error naming the wait, the barrier and its state.
"""

from __future__ import annotations

import time

import numpy as np

from tileopt.emulator.errors import EmulatorError
from tileopt.emulator.memory import ALL, GlobalMemory, SharedShadow, Views
from tileopt.emulator.program import BAR, BRA, BRX, CALL, EXIT, PLAIN, RET, TRAP, Op
from tileopt.emulator.stats import LaunchStats

_INF = 1 << 62


class State:
    """Registers and memories of one chunk of CTAs."""

    def __init__(
        self,
        *,
        kernel_name: str,
        reg_dtypes,
        grid,
        block,
        cta_first: int,
        ncta: int,
        gm: GlobalMemory,
        kparams: np.ndarray,
        shared_static: int,
        shared_dynamic: int,
        local_size: int,
        tparam_size: int,
        nfuncs: int,
        stats: LaunchStats,
        max_steps: int = 10**8,
        shared_checks: str = "raise",
        cluster: tuple[int, int, int] = (1, 1, 1),
        explicit_cluster: bool = False,
    ) -> None:
        self.kernel_name = kernel_name
        self.grid = grid
        self.block = block
        bx, by, bz = block
        self.tpc_real = bx * by * bz
        self.tpc = (self.tpc_real + 31) // 32 * 32
        self.cta_first = cta_first
        self.ncta = ncta
        self.T = T = ncta * self.tpc
        self.arange = np.arange(T, dtype=np.int64)
        self.regs = [np.zeros(T, dt) for dt in reg_dtypes]
        self.gm = gm
        self.kparams = kparams
        self.kparam_limit = max(kparams.size - 16, 0)
        self.kparam_views = Views(kparams.size)
        self.kparam_views.u8[: kparams.size] = kparams
        self.shared_static = shared_static
        self.shared_dynamic = shared_dynamic
        self.shared_limit = shared_static + shared_dynamic
        self.S = (self.shared_limit + 15) // 16 * 16
        self.shared = Views(ncta * self.S)
        # barriers (and completed mbarrier phases) each CTA passed: GlobalShadow's epochs
        self.gepoch = np.zeros(max(ncta, 1), np.int64)
        self.gtag_base: np.ndarray | None = None  # GlobalShadow's per-thread tag parts
        self.shadow = (
            SharedShadow(ncta, self.S, (self.tpc_real + 31) // 32 * 32, shared_checks)
            if shared_checks != "off" and self.S
            else None
        )
        self.L_used = local_size
        self.L = (local_size + 15) // 16 * 16
        self.local = Views(T * self.L)
        self.P = (tparam_size + 15) // 16 * 16
        self.tparam = Views(T * self.P)
        self.retpc = [np.zeros(T, np.int64) for _ in range(nfuncs)]
        self.stats = stats
        self.clock = 0
        self._special: dict[str, object] = {}
        self.frames: dict[str, dict] = {}
        self.bar_arrived: dict[object, np.ndarray] = {}  # barrier id -> bar.arrive count per CTA
        self._cur_pc = 0
        self.max_steps = max_steps
        self.tid_linear = self.arange % self.tpc
        # Thread-block clusters (whole ones in a chunk): each thread's cluster, numbered from
        # 0 in the chunk, and its barrier.cluster.arrive count.
        self.cluster = cluster
        self.explicit_cluster = explicit_cluster
        c = cta_first + self.arange // self.tpc
        gx, gy, _ = grid
        cx, cy, cz = cluster
        cid = ((c % gx) // cx + ((c // gx) % gy) // cy * (gx // cx)
               + (c // (gx * gy)) // cz * (gx // cx) * (gy // cy))
        self.cluster_of = cid - (int(cid.min()) if T else 0)
        self.nclusters = int(self.cluster_of.max()) + 1 if T else 0
        self.cluster_arrivals = np.zeros(T, np.int64)
        # Each CTA's rank in its cluster, and the CTAs of each cluster by rank (the CTA whose
        # shared memory a mapa address names).
        local = np.arange(ncta, dtype=np.int64)
        g = cta_first + local
        self.cta_rank = (g % gx % cx + (g // gx) % gy % cy * cx
                         + (g // (gx * gy)) % cz * cx * cy)
        self.cluster_ctas = np.full((self.nclusters, cx * cy * cz), -1, np.int64)
        if T:
            self.cluster_ctas[self.cluster_of[local * self.tpc], self.cta_rank] = local
        self.live = self.tid_linear < self.tpc_real
        self.alive = self.live.copy()
        self.copies = None  # asynchronous copies in flight (tileopt.emulator.asynccopy)
        # per warp, the shared words its wgmmas read that no wgmma.wait_group retired yet:
        # (uncommitted reads, committed groups) (tileopt.emulator.warpgroup)
        self.wgmma_reads: dict[int, tuple[list, list]] = {}
        # per warp, its wgmmas' accumulator writes that no wgmma.wait_group retired yet
        self.wgmma_acc: dict = {}
        # mbarrier progress, for the deadlock check: a counter of barrier changes and, per
        # thread, the value it had at the thread's last failed wait (-1: none), whether the
        # wait before that failed at the same value, and which barrier / PTX line it was
        self.mb_changes = 0
        self.wait_stamp: np.ndarray | None = None
        self.wait_repeat: np.ndarray | None = None
        self.wait_flat: np.ndarray | None = None
        self.wait_line: np.ndarray | None = None

    # ------------------------------------------------------------ helpers for ops

    def describe_thread(self, t: int):
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        c = self.cta_first + t // self.tpc
        tl = t % self.tpc
        return (c % gx, (c // gx) % gy, c // (gx * gy)), (tl % bx, (tl // bx) % by, tl // (bx * by))

    def tparam_copy(self, idx, pairs) -> None:
        tids = self.arange[idx] if isinstance(idx, slice) else idx
        base = tids * self.P
        u8 = self.tparam.u8
        for src, dst, n in pairs:
            for k in range(n):
                u8[base + dst + k] = u8[base + src + k]

    def tparam_read(self, idx, pairs) -> list[np.ndarray]:
        tids = self.arange[idx] if isinstance(idx, slice) else idx
        base = tids * self.P
        u8 = self.tparam.u8
        return [np.stack([u8[base + src + k] for k in range(n)]) for src, _, n in pairs]

    def tparam_write(self, idx, pairs, saved) -> None:
        tids = self.arange[idx] if isinstance(idx, slice) else idx
        base = tids * self.P
        u8 = self.tparam.u8
        for (_, dst, n), data in zip(pairs, saved, strict=True):
            for k in range(n):
                u8[base + dst + k] = data[k]

    MAX_CALL_DEPTH = 512

    def push_frame(self, fname: str, info: dict, idx) -> None:
        """Save the calling function's registers, return pc, params and locals (recursive calls)."""
        tids = self.arange[idx] if isinstance(idx, slice) else idx
        fr = self.frames.setdefault(fname, {"depth": np.zeros(self.T, np.int64), "levels": []})
        depth = fr["depth"]
        d_of = depth[tids]
        for d in np.unique(d_of):
            d = int(d)
            if d >= self.MAX_CALL_DEPTH:
                raise EmulatorError(
                    f"kernel {self.kernel_name!r}: call depth of {fname} exceeds "
                    f"{self.MAX_CALL_DEPTH} (runaway recursion?)"
                )
            sel = tids[d_of == d]
            while len(fr["levels"]) <= d:
                fr["levels"].append({})
            lvl = fr["levels"][d]
            for slot in info["slots"]:
                arr = lvl.get(slot)
                if arr is None:
                    arr = lvl[slot] = np.zeros(self.T, self.regs[slot].dtype)
                arr[sel] = self.regs[slot][sel]
            ret = lvl.get("ret")
            if ret is None:
                ret = lvl["ret"] = np.zeros(self.T, np.int64)
            ret[sel] = self.retpc[info["retslot"]][sel]
            for kind, views, stride in (
                ("tparam", self.tparam, self.P),
                ("local", self.local, self.L),
            ):
                for a, n in info[kind]:
                    key = (kind, a)
                    buf = lvl.get(key)
                    if buf is None:
                        buf = lvl[key] = np.zeros((n, self.T), np.uint8)
                    for k in range(n):
                        buf[k, sel] = views.u8[sel * stride + a + k]
        depth[tids] += 1

    def pop_frame(self, fname: str, info: dict, idx) -> None:
        """Restore what :meth:`push_frame` saved, for the threads returning to the call site."""
        tids = self.arange[idx] if isinstance(idx, slice) else idx
        fr = self.frames[fname]
        depth = fr["depth"]
        depth[tids] -= 1
        d_of = depth[tids]
        for d in np.unique(d_of):
            sel = tids[d_of == d]
            lvl = fr["levels"][int(d)]
            for slot in info["slots"]:
                self.regs[slot][sel] = lvl[slot][sel]
            self.retpc[info["retslot"]][sel] = lvl["ret"][sel]
            for kind, views, stride in (
                ("tparam", self.tparam, self.P),
                ("local", self.local, self.L),
            ):
                for a, n in info[kind]:
                    buf = lvl[(kind, a)]
                    for k in range(n):
                        views.u8[sel * stride + a + k] = buf[k, sel]

    def special(self, name: str):
        v = self._special.get(name)
        if v is not None:
            return v
        v = self._compute_special(name)
        if name not in (
            "%clock",
            "%clock64",
            "%globaltimer",
            "%clock_hi",
            "%globaltimer_lo",
            "%globaltimer_hi",
        ):
            self._special[name] = v
        return v

    def _compute_special(self, name: str):
        bx, by, bz = self.block
        gx, gy, gz = self.grid
        base, _, comp = name.partition(".")
        tl = self.tid_linear
        if base == "%tid":
            return {"x": tl % bx, "y": (tl // bx) % by, "z": tl // (bx * by)}[comp].astype(
                np.uint32
            )
        if base == "%ntid":
            return np.uint32({"x": bx, "y": by, "z": bz}[comp])
        cx, cy, cz = self.cluster
        if base in ("%ctaid", "%clusterid", "%cluster_ctaid", "%cluster_ctarank"):
            c = self.cta_first + self.arange // self.tpc
            x, y, z = c % gx, (c // gx) % gy, c // (gx * gy)
            if base == "%cluster_ctarank":
                return (x % cx + (y % cy) * cx + (z % cz) * cx * cy).astype(np.uint32)
            v, n = {"x": (x, cx), "y": (y, cy), "z": (z, cz)}[comp]
            v = v // n if base == "%clusterid" else v % n if base == "%cluster_ctaid" else v
            return v.astype(np.uint32)
        if base == "%nctaid":
            return np.uint32({"x": gx, "y": gy, "z": gz}[comp])
        if base == "%nclusterid":
            return np.uint32({"x": gx // cx, "y": gy // cy, "z": gz // cz}[comp])
        if base == "%cluster_nctaid":
            return np.uint32({"x": cx, "y": cy, "z": cz}[comp])
        if base == "%cluster_nctarank":
            return np.uint32(cx * cy * cz)
        if base == "%is_explicit_cluster":
            return np.uint32(self.explicit_cluster)
        if base == "%gridid":
            return np.uint32(0)
        lane = (tl & 31).astype(np.uint64)
        if base == "%laneid":
            return lane.astype(np.uint32)
        if base == "%warpid":
            return (tl >> 5).astype(np.uint32)
        if base == "%nwarpid":
            return np.uint32(self.tpc // 32)
        if base == "%smid":
            return ((self.cta_first + self.arange // self.tpc) % 132).astype(np.uint32)
        if base == "%nsmid":
            return np.uint32(132)
        if base in ("%clock", "%clock_hi"):
            return np.uint32((self.clock * 4) & 0xFFFFFFFF)
        if base == "%clock64":
            return np.uint64(self.clock * 4)
        if base.startswith("%globaltimer"):
            return np.uint64(time.time_ns())
        one = np.uint64(1)
        if base == "%lanemask_eq":
            return (one << lane).astype(np.uint32)
        if base == "%lanemask_le":
            return ((one << (lane + one)) - one).astype(np.uint32)
        if base == "%lanemask_lt":
            return ((one << lane) - one).astype(np.uint32)
        if base == "%lanemask_ge":
            return (~((one << lane) - one) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if base == "%lanemask_gt":
            return (~((one << (lane + one)) - one) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if base == "%dynamic_smem_size":
            return np.uint32(self.shared_dynamic)
        if base in ("%total_smem_size", "%aggr_smem_size"):
            return np.uint32(self.shared_limit)
        raise EmulatorError(f"special register {name} is not supported")

    # ------------------------------------------------------------ execution

    def run(self, ops: list[Op], counts_w: list[int], counts_t: list[int]) -> None:
        """Execute the program for every thread of the chunk."""
        with np.errstate(all="ignore"):
            self._run(ops, counts_w, counts_t)
            if self.copies is not None:
                from tileopt.emulator.asynccopy import finish

                finish(self)

    def _group(self, mask: np.ndarray):
        n = int(np.count_nonzero(mask))
        if n == self.T:
            return ALL, n, self.T // 32
        idx = np.flatnonzero(mask)
        nw = int(np.count_nonzero(mask.reshape(-1, 32).any(axis=1)))
        return idx, n, nw

    def _run(self, ops: list[Op], counts_w: list[int], counts_t: list[int]) -> None:
        """The scheduler: run the group of threads with the lowest PC, one op at a time.

        ``waiting`` maps a PC to the mask of threads waiting there; PCs in ``parked`` hold
        threads blocked at a barrier or a warp-synchronous op until the threads they wait
        for arrive. A loop that polls memory and spins while other threads wait further
        ahead yields to them after ``SPIN_LIMIT`` iterations (forward progress).
        """
        regs = self.regs
        T = self.T
        self.alive = self.live.copy()
        waiting: dict[int, np.ndarray] = {}
        parked: set[int] = set()
        pc = 0
        mask: np.ndarray | None = self.alive.copy()
        idx, nthr, nw = self._group(mask)
        steps = 0
        spin = 0
        boost = 0
        while True:
            if mask is None:  # pick the runnable group with the lowest pc
                boost = 0
                pc = self._pick(ops, waiting, parked)
                if pc < 0:
                    return
                mask = waiting.pop(pc)
                idx, nthr, nw = self._group(mask)
            op = ops[pc]
            steps += 1
            if op.counted:
                counts_w[pc] += nw
                counts_t[pc] += nthr
            gidx = idx
            if op.guard >= 0:
                g = regs[op.guard][idx]
                if op.guard_neg:
                    g = ~g
                if g.all():
                    pass
                elif not g.any():
                    gidx = None
                elif isinstance(idx, slice):
                    gidx = np.flatnonzero(g)
                else:
                    gidx = idx[g]
            if op.sync and gidx is not None:
                blocked = self._blocked(op, mask, gidx)
                if blocked is not None:
                    # these threads wait here; the rest of the group goes on
                    if op.counted:
                        counts_w[pc] -= nw
                        counts_t[pc] -= nthr
                    waiting[pc] = waiting[pc] | blocked if pc in waiting else blocked
                    parked.add(pc)
                    mask = mask & ~blocked
                    if not mask.any():
                        mask = None
                        continue
                    idx, nthr, nw = self._group(mask)
                    if op.counted:
                        counts_w[pc] += nw
                        counts_t[pc] += nthr
                    gidx = idx if op.guard < 0 else self._guard(op, idx)
                    if gidx is None:
                        pc += 1
                        mask, idx, nthr, nw = self._after(
                            pc, mask, idx, nthr, nw, waiting, parked, boost
                        )
                        continue
            kind = op.kind
            if kind == PLAIN:
                if gidx is not None:
                    op.fn(self, gidx)
                pc += 1
            elif kind == BRA:
                if gidx is None:
                    pc += 1
                elif gidx is idx:
                    if (
                        op.wait_loop
                        and op.target <= pc
                        and self.wait_stamp is not None
                        and self._stuck(idx)
                    ):
                        self._check_mbarrier_deadlock(ops, waiting, parked, idx)
                    if op.target <= pc and op.spin_loop and waiting:
                        spin += 1
                        others = [p for p in waiting if p not in parked and p != op.target]
                        if spin >= self.SPIN_LIMIT and others:
                            # a polling loop spins: let the threads further ahead run, the
                            # next group after this loop first (round robin: two spinning
                            # groups must not starve a third)
                            spin = 0
                            waiting[op.target] = (
                                waiting[op.target] | mask if op.target in waiting else mask
                            )
                            parked.discard(op.target)
                            later = [p for p in others if p > pc]
                            pc = min(later) if later else min(others)
                            mask = waiting.pop(pc)
                            idx, nthr, nw = self._group(mask)
                            boost = self.BOOST_STEPS
                            continue
                    pc = op.target
                else:
                    tm = np.zeros(T, bool)
                    tm[gidx] = True
                    mask = mask & ~tm
                    if op.target in waiting:
                        waiting[op.target] |= tm
                        parked.discard(op.target)
                    else:
                        waiting[op.target] = tm
                    idx, nthr, nw = self._group(mask)
                    pc += 1
            elif kind == BAR:
                if gidx is not None:
                    self._barrier(op, gidx)
                    if op.sync == 0:
                        parked.clear()  # arrivals may release threads blocked at bar.sync
                pc += 1
            elif kind in (EXIT, TRAP):
                if gidx is None:
                    pc += 1
                else:
                    if kind == TRAP:
                        t = int(self.arange[gidx][0]) if isinstance(gidx, slice) else int(gidx[0])
                        cta, tid = self.describe_thread(t)
                        raise EmulatorError(
                            f"kernel {self.kernel_name!r} executed `trap` at PTX line "
                            f"{op.ins.line} (CTA {cta}, thread {tid})"
                        )
                    self.alive[gidx] = False
                    parked.clear()  # exits may complete barriers: blocked groups check again
                    if gidx is idx:
                        mask = None
                        continue
                    tm = np.zeros(T, bool)
                    tm[gidx] = True
                    mask = mask & ~tm
                    idx, nthr, nw = self._group(mask)
                    pc += 1
            elif kind == CALL:
                if gidx is None:
                    pc += 1
                else:
                    op.fn(self, gidx)
                    self.retpc[op.func][gidx] = pc + 1
                    if gidx is idx:
                        pc = op.target
                    else:
                        tm = np.zeros(T, bool)
                        tm[gidx] = True
                        mask = mask & ~tm
                        waiting[op.target] = waiting[op.target] | tm if op.target in waiting else tm
                        parked.discard(op.target)
                        idx, nthr, nw = self._group(mask)
                        pc += 1
            elif kind in (RET, BRX):
                if gidx is None:
                    pc += 1
                else:
                    if kind == RET:
                        tgt = self.retpc[op.func][gidx]
                    else:
                        sel = np.asarray(op.fn(self, gidx)).astype(np.int64)
                        sel = np.broadcast_to(sel, (thr_count(gidx, T),))
                        if (sel >= len(op.targets)).any() or (sel < 0).any():
                            raise EmulatorError(
                                f"brx.idx index out of range at PTX line {op.ins.line}"
                            )
                        tgt = np.asarray(op.targets, np.int64)[sel]
                    tids = self.arange if isinstance(gidx, slice) else gidx
                    rest = mask
                    for u in np.unique(tgt):
                        tm = np.zeros(T, bool)
                        tm[tids[tgt == u]] = True
                        rest = rest & ~tm
                        u = int(u)
                        waiting[u] = waiting[u] | tm if u in waiting else tm
                        parked.discard(u)
                    if gidx is idx:
                        mask = None
                        continue
                    mask = rest
                    idx, nthr, nw = self._group(mask)
                    pc += 1
            else:  # pragma: no cover
                raise AssertionError(kind)
            if waiting:
                mask, idx, nthr, nw = self._after(pc, mask, idx, nthr, nw, waiting, parked, boost)
                if mask is None:
                    continue
                pc = self._cur_pc
                if boost:
                    boost -= 1
            self.clock = steps
            if steps > self.max_steps:
                raise EmulatorError(
                    f"kernel {self.kernel_name!r} executed more than {self.max_steps} instruction "
                    f"steps in one chunk (at PTX line {op.ins.line}): an infinite loop? "
                    "(a spin-wait on a flag set by another CTA cannot make progress: CTAs run "
                    "one chunk after another). Raise the limit with launch(..., max_steps=N)."
                )

    SPIN_LIMIT = 32
    BOOST_STEPS = 100_000

    def _guard(self, op: Op, idx):
        g = self.regs[op.guard][idx]
        if op.guard_neg:
            g = ~g
        if g.all():
            return idx
        if not g.any():
            return None
        return np.flatnonzero(g) if isinstance(idx, slice) else idx[g]

    def _after(self, pc, mask, idx, nthr, nw, waiting, parked, boost):
        """Merge with a group waiting at *pc*, or yield to a group waiting at a lower pc."""
        self._cur_pc = pc
        if pc in waiting:
            mask = mask | waiting.pop(pc)
            parked.discard(pc)
            idx, nthr, nw = self._group(mask)
        if not boost:
            low = min((p for p in waiting if p not in parked), default=_INF)
            if low < pc:
                waiting[pc] = mask
                self._cur_pc = low
                mask = waiting.pop(low)
                idx, nthr, nw = self._group(mask)
        return mask, idx, nthr, nw

    def _pick(self, ops, waiting, parked) -> int:
        """Lowest runnable pc; when all threads are blocked, release matching barriers."""
        runnable = [p for p in waiting if p not in parked]
        if runnable:
            return min(runnable)
        if not waiting:
            return -1
        # every remaining thread is blocked: blocked groups were parked when others were still
        # elsewhere; re-check them now (others may have exited), then match barriers across pcs
        for p in sorted(waiting):
            op = ops[p]
            gmask = waiting[p]
            gidx = np.flatnonzero(gmask)
            if op.guard >= 0:
                gidx = self._guard(op, gidx)
            if gidx is None or self._blocked(op, gmask, gidx) is None:
                parked.discard(p)
                return p
        released = self._release_barriers_across_pcs(ops, waiting, parked)
        if released >= 0:
            return released
        lines = ", ".join(
            f"PTX line {ops[p].ins.line} `{ops[p].ins.text}` ({int(np.count_nonzero(m))} threads)"
            for p, m in sorted(waiting.items())
        )
        raise EmulatorError(
            f"kernel {self.kernel_name!r} deadlocked: every thread waits at a barrier "
            f"or warp-synchronous instruction that the others never reach: {lines}"
        )

    def _stuck(self, idx) -> bool:
        """True when every thread of *idx* failed its last two mbarrier waits with no barrier
        changing in between, nor since (see :func:`tileopt.emulator.mbarrier.record_wait`)."""
        assert self.wait_stamp is not None and self.wait_repeat is not None
        stamp = self.wait_stamp[idx]
        return bool((self.wait_repeat[idx] & (stamp == self.mb_changes)).all())

    def _check_mbarrier_deadlock(self, ops, waiting, parked, idx) -> None:
        """Raise when no thread of the chunk can make progress: the threads of *idx* spin on
        mbarrier waits that cannot succeed, every other group that could run does too, and the
        rest wait at barriers (which only the spinning threads could release)."""
        for p, m in waiting.items():
            gidx = np.flatnonzero(m)
            if p in parked:
                op = ops[p]
                g = self._guard(op, gidx) if op.guard >= 0 else gidx
                if g is None or self._blocked(op, m, g) is None:
                    return  # it can run after all
                continue
            if not self._stuck(gidx):
                return
        from tileopt.emulator.mbarrier import describe

        tids = self.arange[idx] if isinstance(idx, slice) else idx
        assert self.wait_line is not None and self.wait_flat is not None
        seen: dict[tuple[int, int], int] = {}
        for t in tids.tolist():
            key = (int(self.wait_line[t]), int(self.wait_flat[t]))
            seen[key] = seen.get(key, 0) + 1
        waits = []
        line_text = {o.ins.line: o.ins.text for o in ops}
        for (line, flat), n in list(seen.items())[:3]:
            cta, _ = self.describe_thread(flat // self.S * self.tpc)
            waits.append(
                f"PTX line {line} `{line_text.get(line, '?')}` ({n} threads; CTA {cta}, "
                f"{describe(self, flat)})"
            )
        others = ", ".join(
            f"PTX line {ops[p].ins.line} `{ops[p].ins.text}` ({int(np.count_nonzero(m))} threads)"
            for p, m in sorted(waiting.items())
        )
        raise EmulatorError(
            f"kernel {self.kernel_name!r} deadlocked: every thread that can run spins on an "
            f"mbarrier wait that can never succeed (no thread is left to arrive, and no copy in "
            f"flight completes on the barrier): "
            + "; ".join(waits)
            + (f"; other threads wait at: {others}" if others else "")
        )

    def _release_barriers_across_pcs(self, ops, waiting, parked) -> int:
        """bar.sync counts arrivals per barrier id, not per instruction: when all live threads of
        a CTA wait at barriers with the same id (possibly different instructions), release them
        past their barriers. Returns the lowest runnable pc afterwards, or -1."""
        by_id: dict[object, list[int]] = {}
        for p in waiting:
            if ops[p].kind == BAR:
                by_id.setdefault(ops[p].aux2, []).append(p)
        released = False
        for pcs in by_id.values():
            at_bar = np.zeros(self.T, bool)
            for p in pcs:
                at_bar |= waiting[p]
            cta_ok = ~(self.alive & ~at_bar).reshape(self.ncta, self.tpc).any(axis=1)
            if not cta_ok.any():
                continue
            rel_all = np.repeat(cta_ok, self.tpc)
            first = True
            for p in sorted(pcs):
                rel = waiting[p] & rel_all
                if not rel.any():
                    continue
                self._barrier(ops[p], np.flatnonzero(rel), count=first)
                first = False
                rest = waiting[p] & ~rel
                if rest.any():
                    waiting[p] = rest
                else:
                    del waiting[p]
                    parked.discard(p)
                q = p + 1
                waiting[q] = waiting[q] | rel if q in waiting else rel
                parked.discard(q)
                released = True
        if not released:
            return -1
        return min((p for p in waiting if p not in parked), default=-1)

    def _blocked(self, op: Op, mask: np.ndarray, gidx) -> np.ndarray | None:
        """Threads of the group that must wait at this op (None: all may proceed)."""
        alive = self.alive
        absent = alive & ~mask
        if not absent.any():
            return None
        T = self.T
        if op.sync == 3:  # barrier.cluster.wait: every live thread of the cluster arrived
            arrivals = self.cluster_arrivals
            low = np.full(self.nclusters, np.iinfo(np.int64).max, np.int64)
            np.minimum.at(low, self.cluster_of[alive], arrivals[alive])
            blocked = mask & (low[self.cluster_of] < arrivals)
            return blocked if blocked.any() else None
        if op.sync == 2:
            present = mask.reshape(self.ncta, self.tpc).sum(axis=1)
            arrived = self.bar_arrived.get(op.aux2)
            if arrived is not None:  # threads that passed bar.arrive on this barrier
                present = present + arrived
            if op.count_rd is not None:
                need = np.asarray(op.count_rd(self, gidx)).astype(np.int64)
                need = int(need.max()) if need.ndim else int(need)
                need = np.minimum(need, alive.reshape(self.ncta, self.tpc).sum(axis=1))
            else:
                need = alive.reshape(self.ncta, self.tpc).sum(axis=1)
            wait_cta = present < need
            if not wait_cta.any():
                return None
            blocked = mask & np.repeat(wait_cta, self.tpc)
            return blocked if blocked.any() else None
        # warp-synchronous op: lanes of the membermask that are alive must all be here
        lane_bits = np.uint64(1) << (self.arange & 31).astype(np.uint64)
        if op.member is not None:
            m = np.zeros(T, np.uint64)
            m[gidx] = np.asarray(op.member(self, gidx)).astype(np.uint64) & np.uint64(0xFFFFFFFF)
            need = np.bitwise_or.reduce(m.reshape(-1, 32), axis=1)
        else:
            need = np.full(T // 32, np.uint64(0xFFFFFFFF))
        missing = np.where(absent, lane_bits, np.uint64(0)).reshape(-1, 32)
        missing = np.bitwise_or.reduce(missing, axis=1) & need
        wait_warp = missing != 0
        if not wait_warp.any():
            return None
        blocked = mask & np.repeat(wait_warp, 32)
        return blocked if blocked.any() else None

    def _barrier(self, op: Op, gidx, count: bool = True) -> None:
        tids = self.arange if isinstance(gidx, slice) else gidx
        if op.sync == 0:  # bar.arrive: count the arrivals, do not wait
            arrived = self.bar_arrived.setdefault(op.aux2, np.zeros(self.ncta, np.int64))
            arrived += np.bincount(tids // self.tpc, minlength=self.ncta)
            return
        ctas = np.unique(tids // self.tpc) if not isinstance(gidx, slice) else np.arange(self.ncta)
        arrived = self.bar_arrived.get(op.aux2)
        if arrived is not None:
            arrived[ctas] = 0
        if count:
            self.stats.barriers += int(ctas.size)
            self.gepoch[ctas] += 1
            if self.shadow is not None:
                self.shadow.barrier(ctas)
        if op.aux is None:
            return
        red, c, wr = op.aux
        v = np.zeros(self.T, bool)
        v[gidx] = c(self, gidx)
        v = v.reshape(self.ncta, self.tpc)
        part = np.zeros(self.T, bool)
        part[gidx] = True
        part = part.reshape(self.ncta, self.tpc)
        if red == "popc":
            r = v.sum(axis=1).astype(np.uint32)
        elif red == "and":
            r = (v | ~part).all(axis=1)
        else:
            r = v.any(axis=1)
        wr(self, gidx, r[tids // self.tpc])


def thr_count(idx, T: int) -> int:
    return T if isinstance(idx, slice) else int(idx.shape[0])


def run_chunk(state: State, ops: list[Op], counts_w, counts_t) -> float:
    t0 = time.perf_counter()
    state.run(ops, counts_w, counts_t)
    return time.perf_counter() - t0


__all__ = ["State", "run_chunk"]
