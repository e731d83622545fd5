"""Memory of one launch: global buffers, per-CTA shared memory, per-thread local and param memory.

Addresses the kernel sees (64-bit generic addresses):

* global: ``GLOBAL_BASE + offset`` into one flat byte array that holds the module's
  .global/.const variables and the launch's buffers, each aligned to 256 bytes with
  unmapped gaps between them, so that every access can be checked against the buffers;
* shared: state-space addresses ``0 .. shared_size``; generic form ``SHARED_WINDOW + addr``;
* local: state-space addresses ``0 .. local_size`` per thread; generic ``LOCAL_WINDOW + addr``;
* kernel parameters: state-space addresses ``0 .. kparam_size`` (``mov %r, param`` of an
  .entry parameter); generic ``PARAM_WINDOW + addr`` (``cvta.param``), read-only. Triton and
  nvcc pass a tensor map (``CUtensorMap``) by value this way and name it in TMA instructions.

All accesses are checked (bounds and natural alignment) and counted here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tileopt.emulator.errors import MemoryAccessError

GLOBAL_BASE = 0x7F00_0000_0000
SHARED_WINDOW = 0x7E00_0000_0000
LOCAL_WINDOW = 0x7D00_0000_0000
PARAM_WINDOW = 0x7C00_0000_0000
WINDOW_SIZE = 1 << 32
#: Another cluster CTA's shared memory (``mapa``): a ``.shared::cluster`` address holds the
#: CTA's rank + 1 from bit 24 up, above the offset; a generic one from bit 32 up, past the
#: shared window's 4 GiB (a plain address past the window stays out of bounds), up to the
#: next window.
CLUSTER_RANK_SHIFT = 24
CLUSTER_GENERIC_SHIFT = 32
SHARED_CLUSTER_SPAN = 1 << 40


def cluster_from_generic(offset: np.ndarray) -> np.ndarray:
    """The ``.shared::cluster`` addresses of generic ones (``offset``: past SHARED_WINDOW);
    an offset of 24 bits or more names no CTA (rank 255: out of bounds)."""
    offset = np.asarray(offset).astype(np.int64)
    low = offset & (WINDOW_SIZE - 1)
    rank = np.where(low >> CLUSTER_RANK_SHIFT != 0, 255, offset >> CLUSTER_GENERIC_SHIFT)
    return (low & ((1 << CLUSTER_RANK_SHIFT) - 1)) | (rank << CLUSTER_RANK_SHIFT)


BUFFER_ALIGN = 256
BUFFER_GAP = 256

ALL = slice(None)

_LOG2 = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass
class Buffer:
    """A region of global memory: a launch argument or a module variable."""

    label: str
    start: int  # byte offset from GLOBAL_BASE
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def describe(self) -> str:
        a = GLOBAL_BASE + self.start
        return f"{self.label} [0x{a:x}, 0x{a + self.size:x}) ({self.size} bytes)"


class Views:
    """A byte array with u8/u16/u32/u64 views of it (length padded to a multiple of 16)."""

    def __init__(self, nbytes: int) -> None:
        n = (max(nbytes, 16) + 15) // 16 * 16
        self.u8 = np.zeros(n, np.uint8)
        self.refresh()

    def refresh(self) -> None:
        self.by_size = {
            1: self.u8,
            2: self.u8.view(np.uint16),
            4: self.u8.view(np.uint32),
            8: self.u8.view(np.uint64),
        }

    def read(self, off: np.ndarray, size: int) -> np.ndarray:
        """Read naturally aligned elements of *size* bytes at byte offsets *off* (raw unsigned)."""
        return self.by_size[size][off >> _LOG2[size]]

    def write(self, off: np.ndarray, size: int, vals: np.ndarray) -> None:
        self.by_size[size][off >> _LOG2[size]] = vals


def thread_ids(st, idx) -> np.ndarray:
    """Thread indices (within the chunk) selected by *idx*."""
    return st.arange if isinstance(idx, slice) else idx


class GlobalMemory:
    """The global address space of a launch."""

    def __init__(self, buffers: list[Buffer], total: int) -> None:
        self.buffers = sorted(buffers, key=lambda b: b.start)
        self.starts = np.array([b.start for b in self.buffers], np.int64)
        self.ends = np.array([b.end for b in self.buffers], np.int64)
        self.mem = Views(total)
        # 32-byte sectors the launch has read / written (LaunchStats' unique sectors).
        self.loaded = np.zeros((total + 31) // 32, bool)
        self.stored = np.zeros((total + 31) // 32, bool)
        self.shadow: GlobalShadow | None = None  # the race check, where the launch has one

    def touch(self, off: np.ndarray, size: int, store: bool) -> None:
        """Marks the sectors that accesses of *size* bytes at byte offsets *off* touch."""
        seen = self.stored if store else self.loaded
        seen[off >> 5] = True
        if size > 1:
            seen[(off + (size - 1)) >> 5] = True

    def nearest(self, off: int) -> str:
        if not self.buffers:
            return "no buffers"
        best = min(
            self.buffers,
            key=lambda b: (
                0 if b.start <= off < b.end else min(abs(off - b.start), abs(off - b.end + 1))
            ),
        )
        return best.describe()

    def check(self, off: np.ndarray, size: int) -> np.ndarray | None:
        """Return a boolean array of bad accesses, or None when all are inside a buffer."""
        if off.size == 0:
            return None
        if not self.buffers:
            return np.ones(off.shape, bool)
        lo = int(off.min())
        hi = int(off.max())
        k = int(np.searchsorted(self.starts, lo, "right")) - 1
        if k >= 0 and hi + size <= self.ends[k]:
            return None
        j = np.searchsorted(self.starts, off, "right") - 1
        jj = np.maximum(j, 0)
        ok = (j >= 0) & (off + size <= self.ends[jj])
        if ok.all():
            return None
        if size == 4:
            # The 4-byte word that a buffer's first or last element shares with bytes outside
            # it: sub-word atomics (LLVM's compare-and-swap loop on the enclosing word, as
            # for bf16 atomics before sm_90) read and write it whole, which a GPU allows (its
            # allocations are whole words); the bytes outside must keep their value
            # (outside_words_changed, after the launch).
            k = np.searchsorted(self.starts, off + 3, "right") - 1
            kk = np.maximum(k, 0)
            ok |= ((off & 3) == 0) & (k >= 0) & (off < self.ends[kk])
            if ok.all():
                return None
        return ~ok

    def outside_words_changed(self, buffer: Buffer) -> int:
        """Bytes that share a 4-byte word with the buffer's first or last byte, outside it,
        and that the launch changed (0 unless a kernel wrote past the buffer within them)."""
        before = self.mem.u8[buffer.start & ~3 : buffer.start]
        after = self.mem.u8[buffer.end : -(-buffer.end // 4) * 4]
        return int(np.count_nonzero(before)) + int(np.count_nonzero(after))


def warp_sectors(tids: np.ndarray, byte_addr: np.ndarray, size: int) -> tuple[int, int]:
    """(warp requests, distinct 32-byte sectors summed over warps) of one access by *tids*."""
    if tids.size == 0:
        return 0, 0
    warps = tids >> 5
    nreq = 1 + int(np.count_nonzero(warps[1:] != warps[:-1]))
    first = byte_addr >> 5
    keys = (warps.astype(np.int64) << 40) | (first & ((1 << 40) - 1))
    if size > 1:
        last = (byte_addr + (size - 1)) >> 5
        if np.any(last != first):
            keys = np.concatenate([keys, (warps.astype(np.int64) << 40) | (last & ((1 << 40) - 1))])
    keys = np.sort(keys, kind="stable")
    nsec = 1 + int(np.count_nonzero(keys[1:] != keys[:-1]))
    return nreq, nsec


_LANE = np.arange(32)


def _full_warps(tids: np.ndarray) -> bool:
    """True when *tids* is a sequence of whole warps (32 consecutive lanes each)."""
    n = tids.shape[0]
    if n % 32:
        return False
    first = tids[::32]
    return bool(((first & 31) == 0).all() and (tids[31::32] - first == 31).all())


def bank_conflicts(tids: np.ndarray, addr: np.ndarray, size: int) -> int:
    """Extra shared-memory wavefronts beyond one per request phase (32 banks of 4 bytes).

    64-bit accesses are processed in two half-warp phases and 128-bit accesses in four
    quarter-warp phases; within a phase, threads reading the same word share it (broadcast).
    """
    if tids.size == 0:
        return 0
    if size <= 4:
        word = addr >> 2
        if _full_warps(tids):
            # conflict free when each warp's words lie in a window of 32 (distinct banks)
            w = word.reshape(-1, 32)
            if bool(((w.max(axis=1) - w.min(axis=1)) < 32).all()):
                return 0
        else:
            # conflict free when, in every warp, all lanes on one bank use one word
            key = ((tids >> 5) - (int(tids[0]) >> 5)) * 32 + (word & 31)
            table = np.empty(int(key[-1]) + 32, np.int64)
            table[key] = word
            if bool((table[key] == word).all()):
                return 0
    lanes = tids & 31
    if size == 8:
        group = ((tids >> 5) << 1) | (lanes >> 4)
    elif size == 16:
        group = ((tids >> 5) << 2) | (lanes >> 3)
    else:
        group = tids >> 5
    nwords = max(size // 4, 1)
    word = addr >> 2
    if nwords > 1:
        word = (word[:, None] + np.arange(nwords)[None, :]).ravel()
        group = np.repeat(group, nwords)
    g0 = int(group[0])
    group = group - g0  # small bincount range
    keys = (group.astype(np.int64) << 32) | (word & 0xFFFFFFFF)
    keys = np.sort(keys, kind="stable")
    distinct = np.ones(keys.shape[0], bool)
    distinct[1:] = keys[1:] != keys[:-1]
    keys = keys[distinct]
    gb = ((keys >> 32) << 5) | (keys & 31)
    cnt = np.bincount(gb)
    ngroups = (cnt.shape[0] + 31) // 32
    cnt = np.concatenate([cnt, np.zeros(ngroups * 32 - cnt.shape[0], cnt.dtype)]).reshape(
        ngroups, 32
    )
    maxes = cnt.max(axis=1)
    return int(np.sum(maxes[maxes > 0] - 1))


class SharedShadow:
    """Shadow state of a chunk's shared memory for race and initialisation checks.

    Per 4-byte word: a tag ``epoch << 24 | (warp + 8)`` of the last write and of the last
    read(s) (0: never; ``ATOMIC``: written by atomics only; ``MANY`` in the low bits: read, or
    written, by several warps), and the bytes of the word written in the write tag's epoch.
    Each CTA's epoch advances at every barrier. A read of bytes that another warp wrote in the
    same epoch (no bar.sync in between), and a write of a word that another warp read in the
    same epoch, are races (raised or counted); two warps writing one byte in an epoch is counted
    only (replicated stores of one value are common), and warps writing different bytes of one
    word (an 8-bit tile's st.shared.b8) is no race. Volatile, relaxed and
    atomic accesses synchronise and are not checked. Reads of never-written words are counted
    as uninitialised.

    Asynchronous copies: ``pend`` counts, per word, the copies into it that are still in
    flight (cp.async before its wait_group, cp.async.bulk(.tensor) before its mbarrier wait)
    and ``rpend`` the asynchronous reads of it still in flight (a TMA store before its
    cp.async.bulk.wait_group.read, a wgmma before the wgmma.wait_group that retires it). Any
    access to a word with a copy in flight into it, and a write to a word that is still being
    read, is a race whatever the barriers in between: bar.sync waits for neither.
    """

    NEVER, MANY, ATOMIC, BASE = 0, 1, 4, 8
    LOW = (1 << 24) - 1

    def __init__(self, ncta: int, S: int, tpc: int, mode: str) -> None:
        nw = max(ncta * S // 4, 1)
        self.wtag = np.zeros(nw, np.int64)
        self.rtag = np.zeros(nw, np.int64)
        self.wmask = np.zeros(nw, np.uint8)  # bytes written in the epoch of wtag (bit i: byte i)
        self.tpc = tpc
        self.mode = mode
        t = np.arange(max(ncta, 1) * tpc, dtype=np.int64)
        self.me = (np.int64(1) << 24) | ((t >> 5) + self.BASE)  # this thread's tag, epoch 1
        # asynchronous copies in flight: per word, copies writing it / bulk copies reading it,
        # and the PTX line of the last one issued (for the message)
        self.pend = np.zeros(nw, np.int32)
        self.rpend = np.zeros(nw, np.int32)
        self.pend_line = np.zeros(nw, np.int32)
        self.stamp = np.zeros(nw, np.int64)  # scratch for _count's test for repeated words
        self.npend = 0
        self.nrpend = 0
        self.lines: dict[int, str] = {}

    def barrier(self, ctas: np.ndarray) -> None:
        self.me.reshape(-1, self.tpc)[ctas] += np.int64(1) << 24

    def access(self, st, ins, tids, flat, addr, size, kind: str) -> None:
        words = flat >> 2
        # all threads of the chunk: tids is the identity, no gather needed
        me = self.me if tids is st.arange else self.me[tids]
        # the bytes of each word accessed (sub-word accesses are aligned to their size)
        mask = (((1 << size) - 1) << (flat & 3)).astype(np.uint8) if size < 4 else np.uint8(15)
        if size > 4:
            k = size // 4
            words = (words[:, None] + np.arange(k)[None, :]).ravel()
            tids = np.repeat(tids, k)
            me = np.repeat(me, k)
            addr = (addr[:, None] + 4 * np.arange(k)[None, :]).ravel()
        if self.npend or (self.nrpend and kind != "r"):
            self._check_async(st, ins, tids, words, addr, kind)
        ep = me & ~self.LOW
        wt = self.wtag[words]
        if kind == "a":
            self.wtag[words] = np.where(wt == self.NEVER, self.ATOMIC, wt)
            return
        # tags of a CTA's words never exceed its current epoch: ">= epoch" means "this epoch"
        this_epoch = (wt >= ep + self.BASE) | (wt == (ep | self.MANY))
        by_other = this_epoch & (wt != me)  # written by another warp (or several) this epoch
        written = self.wmask[words]
        raw = by_other & ((written & mask) != 0)  # ... in the bytes accessed now
        rt = self.rtag[words]
        other = (rt >= ep) & (rt != me)  # read by another warp in this epoch
        if kind == "r":
            st.stats.shared_uninitialized_reads += int(np.count_nonzero(wt == self.NEVER))
            if raw.any():
                self._race(st, ins, tids, raw, addr, wt, "reads", "written")
            self.rtag[words] = me ^ ((me ^ (ep | self.MANY)) & -other.astype(np.int64))
            return
        if other.any():
            self._race(st, ins, tids, other, addr, rt, "writes", "read")
        if raw.any():  # two warps wrote one byte: counted, not raised (often the same value)
            st.stats.shared_races += int(np.count_nonzero(raw))
        self.wtag[words] = np.where(by_other, ep | self.MANY, me)
        if size >= 4:
            self.wmask[words] = np.where(this_epoch, written | mask, mask)
            return
        # Sub-word stores: several threads of this one instruction may write bytes of a word,
        # so the bytes accumulate, and a word that several warps wrote is tagged as such.
        self.wmask[words] = np.where(this_epoch, written, 0)
        np.bitwise_or.at(self.wmask, words, mask)
        order = np.argsort(words, kind="stable")
        w, t = words[order], np.broadcast_to(me, words.shape)[order]
        several = (w[1:] == w[:-1]) & (t[1:] != t[:-1])
        if several.any():
            self.wtag[w[1:][several]] = (t[1:][several] & ~self.LOW) | self.MANY

    # ------------------------------------------------------------ asynchronous copies

    @staticmethod
    def _words(flat: np.ndarray, size: int) -> np.ndarray:
        """The 4-byte words of accesses of *size* bytes (a multiple of 4) at flat offsets."""
        words = flat >> 2
        if size > 4:
            words = (words[:, None] + np.arange(size // 4)[None, :]).ravel()
        return words

    def async_begin(self, st, ins, tids, flat, addr, size: int, write: bool) -> None:
        """A copy issued by threads *tids* starts writing (or, for a bulk store, reading) the
        *size* bytes at each flat offset: the issuing thread's access is checked now (a copy
        into words other warps read since the last barrier is a race), and the words stay
        marked until :meth:`async_end`."""
        self.access(st, ins, tids, flat, addr, size, "w" if write else "r")
        words = self._words(flat, size)
        if write:
            self._count(self.pend, words, 1)
            self.npend += words.size
        else:
            self._count(self.rpend, words, 1)
            self.nrpend += words.size
        self.pend_line[words] = ins.line
        self.lines[ins.line] = ins.text

    def async_end(self, flat, size: int, write: bool, tags=None) -> None:
        """Copies at flat offsets *flat* (``size`` bytes each) completed. A write lands with
        the shadow tags *tags* (the completing thread's tag for cp.async, ``ATOMIC`` - already
        synchronised by the mbarrier - for bulk copies)."""
        words = self._words(np.asarray(flat, np.int64), size)
        if write:
            self._count(self.pend, words, -1)
            self.npend -= words.size
            if tags is None:
                self.wtag[words] = self.ATOMIC
            else:
                tags = np.asarray(tags, np.int64)
                self.wtag[words] = np.repeat(tags, size // 4) if tags.ndim else tags
                self.wmask[words] = 15
        else:
            self._count(self.rpend, words, -1)
            self.nrpend -= words.size

    def _count(self, counts: np.ndarray, words: np.ndarray, delta: int) -> None:
        """``counts[w] += delta`` for each occurrence of each word ``w`` in *words*: a plain
        indexed add where no word repeats (the usual case), else ``np.add.at`` (which counts
        repeats, at 10-20 times the cost)."""
        order = np.arange(words.size)
        self.stamp[words] = order
        if (self.stamp[words] == order).all():
            counts[words] += delta
        else:
            np.add.at(counts, words, delta)

    def hold_reads(self, ins, words: np.ndarray) -> None:
        """An asynchronous reader (a wgmma's shared-memory operands) reads the 4-byte *words*
        until :meth:`release_reads`: writing them until then is a race, as for a bulk store's
        source."""
        self._count(self.rpend, words, 1)
        self.nrpend += words.size
        self.pend_line[words] = ins.line
        self.lines[ins.line] = ins.text

    def release_reads(self, words: np.ndarray) -> None:
        self._count(self.rpend, words, -1)
        self.nrpend -= words.size

    def _check_async(self, st, ins, tids, words, addr, kind) -> None:
        bad = self.pend[words] > 0
        what = "an asynchronous copy into it"
        if not bad.any() and kind != "r":
            bad = self.rpend[words] > 0
            what = "an asynchronous read of it (a bulk store, or a wgmma's operands)"
        if not bad.any():
            return
        st.stats.shared_races += int(np.count_nonzero(bad))
        if self.mode != "raise":
            return
        from tileopt.emulator.errors import SharedRaceError

        i = int(np.flatnonzero(bad)[0])
        t = int(tids[i])
        cta, tid = st.describe_thread(t)
        line = int(self.pend_line[words[i]])
        verb = {"r": "reads", "w": "writes", "a": "accesses"}[kind]
        raise SharedRaceError(
            f"Shared-memory race in kernel {st.kernel_name!r} at PTX line {ins.line}: "
            f"`{ins.text}`\n"
            f"  CTA {cta}, thread {tid} (warp {(t % self.tpc) // 32}) {verb} shared address "
            f"0x{int(addr[i]):x} while {what} (PTX line {line}: `{self.lines.get(line, '?')}`) "
            f"is still in flight\n"
            f"  (wait for the copy first: cp.async.wait_group/wait_all for cp.async, the mbarrier "
            f"phase for cp.async.bulk, cp.async.bulk.wait_group(.read) for a bulk store, "
            f"wgmma.wait_group for a wgmma; bar.sync "
            f"does not wait for asynchronous copies; launch(..., shared_checks='count') only "
            f"counts races)"
        )

    def _race(self, st, ins, tids, bad, addr, tags, verb, past) -> None:
        st.stats.shared_races += int(np.count_nonzero(bad))
        if self.mode != "raise":
            return
        from tileopt.emulator.errors import SharedRaceError

        i = int(np.flatnonzero(bad)[0])
        t = int(tids[i])
        cta, tid = st.describe_thread(t)
        low = int(tags[i]) & self.LOW
        nwarps = self.tpc // 32
        who = "several warps" if low == self.MANY else f"warp {(low - self.BASE) % nwarps}"
        raise SharedRaceError(
            f"Shared-memory race in kernel {st.kernel_name!r} at PTX line {ins.line}: "
            f"`{ins.text}`\n"
            f"  CTA {cta}, thread {tid} (warp {(t % self.tpc) // 32}) {verb} shared address "
            f"0x{int(addr[i]):x}, {past} by {who} of the same CTA since the last barrier\n"
            f"  (a bar.sync is missing between the two accesses; "
            f"launch(..., shared_checks='count') only counts races)"
        )


def synchronised(st, idx) -> None:
    """Threads *idx* synchronised through memory (a fence, a volatile, relaxed, acquire or
    release access, an atomic): their CTAs' GlobalShadow epochs advance, as at a barrier, so
    flag-and-fence handoffs between warps are not races (a conservative choice: any such
    access by any thread of the CTA orders all of its warps)."""
    st.gepoch[np.unique(thread_ids(st, idx) // st.tpc)] += 1


class GlobalShadow:
    """Intra-CTA race check of a launch's global memory.

    Per 4-byte word, who last stored to it with a plain ``st``: a tag
    ``(cta + 1) << 40 | epoch << 16 | warp << 4 | bytes`` (0: nobody), where ``epoch`` counts
    the CTA's barriers (``State.gepoch``) and ``bytes`` is a mask of the word's bytes the warp
    stored. A plain load of bytes that another warp of the same CTA stored in the same epoch,
    and a plain store that changes such bytes, are races: without a ``bar.sync`` between
    them the GPU lets the warps run in either order (an H100 kept the first of two such
    stores). Replicated stores of one value are not races. Other CTAs' stores are not
    compared: CTAs order their global accesses with atomics and fences, which this does not
    follow. Within a CTA, volatile, relaxed, acquire, release and atomic accesses and fences
    synchronise (:func:`synchronised`) and are not checked themselves.
    """

    MASK = 0xF
    WHO = ~0xF  # the CTA, epoch and warp of a tag
    SYNC = ~0xFFFF  # the CTA and epoch

    def __init__(self, total: int, mode: str) -> None:
        self.tag = np.zeros((total + 3) // 4, np.int64)
        self.mode = mode
        self.stored = False  # no plain store yet: loads have nothing to race with

    @staticmethod
    def _words(off: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread position, word, byte mask) of each word accesses of *size* bytes touch."""
        pos = np.arange(off.shape[0])
        if size >= 4:
            k = size // 4
            words = ((off >> 2)[:, None] + np.arange(k)[None, :]).ravel()
            return np.repeat(pos, k), words, np.full(words.shape, 0xF, np.int64)
        masks = (((1 << size) - 1) << (off & 3)).astype(np.int64)
        return pos, off >> 2, masks

    def _me(self, st, tids: np.ndarray) -> np.ndarray:
        """The threads' tags without bytes: their CTA, its current epoch and their warp."""
        if st.gtag_base is None:  # per state (chunk): the CTA and warp parts, once
            cta = st.arange // st.tpc
            st.gtag_base = ((st.cta_first + cta + 1) << 40) | (((st.arange % st.tpc) >> 5) << 4)
        all_threads = tids is st.arange
        base = st.gtag_base if all_threads else st.gtag_base[tids]
        epochs = (st.gepoch & 0xFFFFFF) << 16
        if not epochs.any():
            return base
        return base | (np.repeat(epochs, st.tpc) if all_threads else epochs[tids // st.tpc])

    def _conflicts(self, st, tids, off, size):
        pos, words, masks = self._words(off, size)
        me = self._me(st, tids)[pos]
        tag = self.tag[words]
        hit = ((tag & self.SYNC) == (me & self.SYNC)) & ((tag & self.WHO) != me) & (
            (tag & masks) != 0)
        return pos, words, masks, me, tag, hit

    def load(self, st, ins, tids: np.ndarray, off: np.ndarray, size: int) -> None:
        """Plain loads by threads *tids* of *size* bytes at global byte offsets *off*."""
        if not self.stored:
            return
        pos, _, _, _, tag, hit = self._conflicts(st, tids, off, size)
        if hit.any():
            self._race(st, ins, tids, off, pos, tag, hit, "reads", "stored")

    def store(self, st, ins, tids: np.ndarray, off: np.ndarray, size: int,
              changes: Callable[[np.ndarray], np.ndarray]) -> None:
        """Plain stores, before they land; ``changes(positions)`` says which of the threads
        at those positions (of *tids*) store a value other than the one in memory."""
        pos, words, masks, me, tag, hit = self._conflicts(st, tids, off, size)
        if hit.any():
            changed = np.zeros(hit.shape, bool)
            changed[hit] = changes(pos[hit])
            hit &= changed
            if hit.any():
                self._race(st, ins, tids, off, pos, tag, hit, "changes", "stored")
        same = (tag & self.WHO) == me
        self.tag[words] = me | masks | np.where(same, tag & self.MASK, 0)
        self.stored = True

    def _race(self, st, ins, tids, off, pos, tags, bad, verb, past) -> None:
        st.stats.global_races += int(np.count_nonzero(bad))
        if self.mode != "raise":
            return
        from tileopt.emulator.errors import GlobalRaceError

        i = int(np.flatnonzero(bad)[0])
        t = int(tids[pos[i]])
        cta, tid = st.describe_thread(t)
        other = (int(tags[i]) >> 4) & 0xFFF
        raise GlobalRaceError(
            f"Global-memory race in kernel {st.kernel_name!r} at PTX line {ins.line}: "
            f"`{ins.text}`\n"
            f"  CTA {cta}, thread {tid} (warp {(t % st.tpc) // 32}) {verb} global address "
            f"0x{int(off[pos[i]]) + GLOBAL_BASE:x}, {past} by warp {other % (st.tpc // 32)} of "
            f"the same CTA since the last barrier\n"
            f"  (a bar.sync is missing between the two accesses: the GPU runs the warps in "
            f"either order; launch(..., global_checks='count') only counts races)"
        )


def raise_access_error(
    st, ins, tids: np.ndarray, bad: np.ndarray, addrs: np.ndarray, space: str, what: str, detail_fn
) -> None:
    """Raise a MemoryAccessError naming the first offending thread."""
    i = int(np.flatnonzero(bad)[0])
    t = int(tids[i])
    cta, tid = st.describe_thread(t)
    addr = int(addrs[i])
    shown = addr & ((1 << 64) - 1)  # addresses are held in int64; show them as PTX's u64
    raise MemoryAccessError(
        f"{what} in kernel {st.kernel_name!r} at PTX line {ins.line}: `{ins.text}`\n"
        f"  CTA {cta}, thread {tid}: {space} address 0x{shown:x}\n"
        f"  {detail_fn(addr)}\n"
        f"  ({int(np.count_nonzero(bad))} of {bad.size} active threads faulted)"
    )
