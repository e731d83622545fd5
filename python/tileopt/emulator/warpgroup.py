"""Warpgroup-level instructions of sm_90a: ``wgmma.fence``, ``wgmma.commit_group``,
``wgmma.wait_group`` and ``wgmma.mma_async`` (Hopper's asynchronous warpgroup MMA).

The emulator computes ``wgmma.mma_async`` when a warp reaches it, but its shared-memory
operands count as read until the ``wgmma.wait_group`` that retires its commit group (per
warp, as on the GPU): a write to them before then, by any thread or copy (a TMA refilling the
slot), is a shared-memory race. Its accumulator registers are written then too: until that
wait they hold NaN (f32, f16; the most negative s32), so an instruction that reads them early
computes NaN instead of the stale or partial values a GPU would give it, while a later wgmma
accumulating into them in place reads the pending values. The fence is accepted and counted
(class ``sync``), as are the commit and the wait. A warpgroup is four consecutive warps of a
CTA; warp ``r`` of it (warp id % 4) owns rows ``16r .. 16r+15`` of the 64-row accumulator.
Those rows need only the warp's own registers and shared memory (the matrix descriptors), so
each warp computes its slice on its own: ``D = (scale_a A) (scale_b B) + (D if scale-d)``
with the products of f16/bf16/tf32/fp8 values exact and one rounding of the sum to the
accumulator type, as ``mma.sync`` does (integer sums are exact). tf32 inputs are 32-bit words
(registers or shared memory) whose low 13 mantissa bits are ignored (truncated, as for
``mma.sync`` .tf32).

Shared-memory operands are read through 64-bit matrix descriptors (PTX ISA, "Matrix
Descriptor Format" and "Shared Memory Matrix Layout"): start address, leading- and
stride-dimension byte offsets (LBO, SBO), base offset and swizzle mode, over the canonical
K-major and MN-major layouts, with 16-byte core-matrix rows for every element size (8 f16/bf16
or 4 tf32 elements). See :func:`operand_addresses`.

Supported (N = 8..256, step 8; A from a descriptor or from registers, B from a descriptor):

* ``.m64nNk16`` with ``.f16``/``.bf16`` inputs and ``.f32`` accumulators, or ``.f16`` inputs
  and ``.f16`` accumulators; K-major or MN-major (imm-trans) operands;
* ``.m64nNk8.f32.tf32.tf32``: K-major operands only, as the PTX ISA requires for .tf32 (the
  instruction takes no imm-trans operands; a kernel that passes them is refused); A in
  registers is four .b32 registers per thread, laid out as for ``mma.sync.m16n8k8`` .tf32.

* ``.m64nNk32`` with 8-bit inputs: ``.s8``/``.u8`` (``.s32`` accumulators, wrapping modulo
  2^32 or clamped with ``.satfinite``; no imm-scale operands) or fp8 ``.e4m3``/``.e5m2``
  (``.f32`` or ``.f16`` accumulators); K-major operands only, as the PTX ISA requires for
  8-bit types; A in registers is four .b32 registers of four bytes each, laid out as for
  ``mma.sync.m16n8k32``.

Other shapes and types (b1, an integer with an fp8 operand) and the sparse ``.sp`` form are
refused at load time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.errors import EmulatorError
from tileopt.emulator.memops import read_elems, resolve
from tileopt.emulator.memory import thread_ids
from tileopt.emulator.ops import check_mods, handler, split
from tileopt.emulator.parser import Imm, Reg, Vec
from tileopt.emulator.warpops import (
    EIGHT_BIT,
    _frag_reader,
    _frag_tables,
    _full,
    _lane,
    _regs_of,
    accumulator_writers,
    decode8,
    eight_bit_pair,
    write_accumulator,
)

_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")


@dataclass(frozen=True)
class MatrixDescriptor:
    """The fields of a wgmma shared-memory matrix descriptor, decoded to bytes."""

    start: int  # shared-memory address of the matrix
    lbo: int  # leading-dimension byte offset
    sbo: int  # stride-dimension byte offset
    base_offset: int  # 3-bit pattern start (swizzled modes only)
    swizzle: int  # swizzle width in bytes: 0 (none), 32, 64 or 128


def _descriptor_fields(desc: np.ndarray) -> tuple[np.ndarray, ...]:
    """The fields of :class:`MatrixDescriptor`, elementwise over 64-bit descriptors: addresses
    and offsets are stored as ``(x & 0x3FFFF) >> 4`` in bits 13-0, 29-16 and 45-32, the base
    offset in bits 51-49 and the swizzle mode (0 none, 1 128B, 2 64B, 3 32B) in bits 63-62."""
    d = np.asarray(desc, np.uint64)

    def field(shift: int, mask: int) -> np.ndarray:
        return ((d >> np.uint64(shift)) & np.uint64(mask)).astype(np.int64)

    mode = field(62, 3)
    swizzle = np.select([mode == 1, mode == 2, mode == 3], [128, 64, 32], 0)
    start, lbo, sbo = (field(shift, 0x3FFF) << 4 for shift in (0, 16, 32))
    return start, lbo, sbo, field(49, 7), swizzle


def decode_descriptor(desc: int) -> MatrixDescriptor:
    """Decode one 64-bit matrix descriptor (see :func:`_descriptor_fields`)."""
    return MatrixDescriptor(*(int(f) for f in _descriptor_fields(int(desc) & (2**64 - 1))))


def operand_addresses(
    desc: np.ndarray, mn: np.ndarray, k: np.ndarray, mn_major: bool, esize: int = 2
) -> np.ndarray:
    """Shared-memory byte addresses of elements ``(mn, k)`` of a wgmma operand.

    *desc* holds one 64-bit descriptor per matrix; *mn* and *k* broadcast against it (the
    A operand is M x K, B is N x K). The canonical layouts of the PTX ISA, in bytes with 16-byte
    "core matrix rows" (T = 16 / *esize* elements) and W = swizzle bytes / 16:

    * K-major, no swizzle: ``((8,m),(T,2k)):((16,SBO),(1,LBO))`` - core matrices of 8 rows
      x 16 bytes, the next 16 bytes of K at LBO, the next 8 rows at SBO;
    * K-major, swizzled: ``((8,m),(T,2k)):((swizzle,SBO),(1,16))`` - rows of the swizzle width,
      the next 8 rows at SBO (LBO unused);
    * MN-major, no swizzle: ``((T,1,m),(8,k)):((1,16,SBO),(16,LBO))`` - 16 bytes of MN per
      K-row, the next 16 bytes of MN at SBO, the next 8 K-rows at LBO;
    * MN-major, swizzled: ``((T,W,m),(8,k)):((1,16,LBO),(swizzle,SBO))`` - K-rows of the
      swizzle width, the next swizzle-width of MN at LBO, the next 8 K-rows at SBO.

    The address ``a = start + offset`` is then swizzled like the TMA: the 16-byte chunk bits
    ``[4, 4+log2 W)`` are XORed with bits ``[7, 7+log2 W)``, where the row phase is counted
    from the pattern start: ``((a >> 7) - base_offset) mod W`` (base offset 0 when the
    pattern starts on a multiple of 8 x swizzle bytes).
    """
    start, lbo, sbo, base, sw = _descriptor_fields(desc)
    mn = np.asarray(mn, np.int64)
    k = np.asarray(k, np.int64)
    if mn_major:
        mb = mn * esize
        mc, rem = mb // 16, mb % 16
        w = np.maximum(sw // 16, 1)
        plain = mc * sbo + (k % 8) * 16 + (k // 8) * lbo
        swz = (mc % w) * 16 + (mc // w) * lbo + (k % 8) * sw + (k // 8) * sbo
    else:
        kb = k * esize
        kc, rem = kb // 16, kb % 16
        plain = (mn % 8) * 16 + (mn // 8) * sbo + kc * lbo
        swz = (mn % 8) * sw + (mn // 8) * sbo + kc * 16
    addr = start + np.where(sw == 0, plain, swz)
    mask = np.maximum(sw // 16 - 1, 0)
    phase = ((addr >> 7) - base) & mask
    return (addr ^ (phase << 4)) + rem


# ---------------------------------------------------------------- fence / commit / wait


def _noop(st, idx) -> None:
    return None


def _warps(st, idx) -> np.ndarray:
    return np.unique(thread_ids(st, idx) >> 5)


# What a warp's accumulator registers hold until the wgmma writing them is retired.
_POISON = {"f32": np.uint32(0x7FC00000), "f16": np.uint32(0x7E007E00),
           "s32": np.uint32(0x80000000)}


@dataclass
class PendingAccumulators:
    """A warp's wgmma accumulator writes that no ``wgmma.wait_group`` retired yet."""

    committed: int = 0  # commit groups so far (the group of an uncommitted wgmma)
    # register slot -> (commit group, the warp's thread ids, the register's bits there)
    regs: dict = field(default_factory=dict)


def _commit(st, idx) -> None:
    """The warps' uncommitted wgmmas form a group."""
    for w in _warps(st, idx):
        if w in st.wgmma_reads:
            open_, groups = st.wgmma_reads[w]
            groups.append(list(open_))
            open_.clear()
        if w in st.wgmma_acc:
            st.wgmma_acc[w].committed += 1


def _waiter(n: int):
    def wait(st, idx) -> None:
        """Retire all but the warps' ``n`` newest groups: their operands are read and their
        accumulators written."""
        for w in _warps(st, idx):
            if w in st.wgmma_reads:
                groups = st.wgmma_reads[w][1]
                while len(groups) > n:
                    for words in groups.pop(0):
                        st.shadow.release_reads(words)
            pending = st.wgmma_acc.get(w)
            if pending is not None:
                for slot, (group, tids, bits) in list(pending.regs.items()):
                    if group < pending.committed - n:
                        st.regs[slot][tids] = bits.view(st.regs[slot].dtype)
                        del pending.regs[slot]

    return wait


@handler("wgmma")
def h_wgmma(cx, ins):
    """wgmma.{fence,commit_group,wait_group,mma_async}.sync.aligned."""
    base, types, mods = split(ins)
    kind = mods[0] if mods else ""
    if kind in ("fence", "commit_group", "wait_group"):
        check_mods(cx, mods, {kind, "sync", "aligned"})
        if types or "sync" not in mods or "aligned" not in mods:
            raise cx.unsupported()
        want = 1 if kind == "wait_group" else 0
        if len(ins.operands) != want:
            raise cx.error(f"wgmma.{kind} expects {want} operand{'s' if want != 1 else ''}")
        if want and not (isinstance(ins.operands[0], Imm) and ins.operands[0].value >= 0):
            raise cx.error("wgmma.wait_group expects a non-negative integer constant")
        if kind == "wait_group":
            return _waiter(int(ins.operands[0].value)), "sync"
        return (_commit if kind == "commit_group" else _noop), "sync"
    if kind == "mma_async":
        return _mma_async(cx, ins, types, mods)
    raise cx.unsupported()


# ---------------------------------------------------------------- mma_async


def _acc_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row/col (within the warp's 16 rows) of accumulator element e of each lane, (32, N/2):
    for each 8-column block j, d[4j..4j+3] = (g, 8j+2q), (g, 8j+2q+1), (g+8, ..), (g+8, ..)."""
    g, q = _lane >> 2, _lane & 3
    e = np.arange(n // 2)
    j, r = e // 4, e % 4
    rows = g[:, None] + 8 * (r[None, :] // 2)
    cols = 8 * j[None, :] + 2 * q[:, None] + (r[None, :] % 2)
    return rows, cols


def _imm(cx, op, allowed: tuple[int, ...], what: str) -> int:
    if not isinstance(op, Imm) or op.value not in allowed:
        raise cx.error(f"{what} must be one of {', '.join(map(str, allowed))}")
    return op.value


def _decode(raw: np.ndarray, t: str) -> np.ndarray:
    """Element bit patterns from shared memory -> float64: 16-bit f16/bf16, 32-bit words
    read as tf32 (the low 13 mantissa bits ignored), or 8-bit integers and fp8."""
    if t in EIGHT_BIT:
        return decode8(raw, t)
    if t == "f16":
        return raw.view(np.float16).astype(np.float64)
    if t == "tf32":
        return nm.f32_to_tf32(raw.view(np.float32), "rz").astype(np.float64)
    return nm.bf16_to_f32(raw).astype(np.float64)


def _check_types(cx, shape: str, types: list[str], k: int) -> None:
    """Refuse the input types and K that are not emulated (b1, mixed widths)."""
    at, bt = types[1:] if len(types) == 3 else ("", "")
    ok = len(types) == 3 and (
        (at == bt and at in ("f16", "bf16") and k == 16)
        or (at == bt == "tf32" and k == 8)
        or (eight_bit_pair(at, bt) and k == 32)
    )
    if not ok:
        raise cx.unsupported(
            f"wgmma.mma_async .{shape}.{'.'.join(types)}: only .m64nNk16 with .f16/.bf16 A and "
            "B, or .m64nNk8 with .tf32 A and B, or .m64nNk32 with 8-bit integers (.s8/.u8) or "
            "fp8 (.e4m3/.e5m2) A and B is emulated (not b1)"
        )


def _tf32_operand_count(cx, operands: list, a_in_regs: bool) -> None:
    """.tf32 takes ``d, a, b-desc, scale-d, imm-scale-a, imm-scale-b``: no imm-trans operands,
    since the PTX ISA allows only K-major .tf32 operands (ptxas rejects the extra operands)."""
    if len(operands) == 6:
        return
    names = "imm-trans-b" if a_in_regs else "imm-trans-a/imm-trans-b"
    if len(operands) == (7 if a_in_regs else 8):
        if any(not isinstance(o, Imm) or o.value != 0 for o in operands[6:]):
            raise cx.error(
                f"MN-major (transposed, {names} = 1) .tf32 operand: the PTX ISA allows only "
                "K-major A and B in shared memory for wgmma .tf32 (transposes are for .f16/.bf16)"
            )
        raise cx.error(
            f"wgmma.mma_async .tf32 takes no {names} operands (.tf32 operands are always "
            "K-major); drop them"
        )
    raise cx.error("wgmma.mma_async .tf32 expects 6 operands")


def _mma_async(cx, ins, types, mods):
    shapes = [m for m in mods if _SHAPE.fullmatch(m)]
    if "sp" in mods:
        raise cx.unsupported("sparse wgmma.mma_async.sp")
    if len(shapes) != 1:
        raise cx.unsupported("wgmma.mma_async needs one .m64nNkK shape")
    M, N, K = map(int, _SHAPE.fullmatch(shapes[0]).groups())
    _check_types(cx, shapes[0], types, K)
    dt_, at, bt = types
    integer = at in ("s8", "u8")
    allowed = {"mma_async", "sync", "aligned", *shapes} | ({"satfinite"} if integer else set())
    check_mods(cx, mods, allowed)
    if "sync" not in mods or "aligned" not in mods:
        raise cx.unsupported()
    if M != 64 or N % 8 or not 8 <= N <= 256:
        raise cx.error(f"invalid wgmma shape .{shapes[0]}")
    accs = ("s32",) if integer else ("f32", "f16") if at in ("f16", "e4m3", "e5m2") else ("f32",)
    if dt_ not in accs:
        raise cx.unsupported(f"wgmma.mma_async accumulator .{dt_} with .{at} inputs")
    tf32 = at == "tf32"
    esize = 4 if tf32 else 1 if at in EIGHT_BIT else 2  # bytes per element in shared memory
    T = 16 // esize  # elements per 16-byte core-matrix row
    operands = ins.operands
    a_in_regs = isinstance(operands[1], Vec) if len(operands) > 1 else False
    counts = (6, 7) if a_in_regs else (6, 8)
    if tf32:
        _tf32_operand_count(cx, operands, a_in_regs)
    elif at in EIGHT_BIT:
        # K-major operands only (no imm-trans); integers take no imm-scale operands either
        counts = (4,) if integer else (6,)
        if len(operands) not in counts:
            raise cx.error(
                f"wgmma.mma_async .{at} expects {counts[0]} operands (8-bit operands are "
                "K-major: no imm-trans" + ("; integers take no imm-scale)" if integer else ")")
            )
    elif len(operands) not in counts:
        raise cx.error(f"wgmma.mma_async expects {' or '.join(map(str, counts))} operands")
    d_op, a_op, b_op, sd_op = operands[:4]
    scale_a = _imm(cx, operands[4], (1, -1), "imm-scale-a") if len(operands) > 4 else 1
    scale_b = _imm(cx, operands[5], (1, -1), "imm-scale-b") if len(operands) > 5 else 1
    trans = [_imm(cx, o, (0, 1), "imm-trans") for o in operands[6:]]
    satfinite = "satfinite" in mods
    if a_in_regs:
        trans_a, trans_b = 0, (trans[0] if trans else 0)
    else:
        trans_a, trans_b = trans if trans else (0, 0)
    if not isinstance(b_op, Reg) or (not a_in_regs and not isinstance(a_op, Reg)):
        raise cx.error("wgmma.mma_async matrix descriptors must be 64-bit registers")
    rsd = cx.reader(sd_op, "pred")
    rb_desc = cx.reader(b_op, "b64")
    if a_in_regs:
        # a warp's 16 x K slice of A is laid out as the A fragment of mma.sync m16n8kK
        ar, ac = _frag_tables(f"m16n8k{K}", at)[0]
        ra, na = _frag_reader(cx, a_op, at, None)
        if na != ar.shape[1]:
            what = ".b32 (tf32)" if tf32 else f".{at}x2"
            raise cx.error(f"wgmma.mma_async A in registers takes four {what} registers")
        ra_desc = None
    else:
        ra_desc = cx.reader(a_op, "b64")
    nd = N // 4 if dt_ == "f16" else N // 2  # f16 accumulators pack two a register
    if len(_regs_of(d_op)) != nd:
        raise cx.error(f"wgmma.mma_async .m64n{N} with .{dt_} needs {nd} accumulator registers")
    rc, _ = _frag_reader(cx, d_op, dt_, None)
    wrs = accumulator_writers(cx, d_op, dt_)
    slots = [cx.reg_slot(r.name) for r in _regs_of(d_op)]
    poison = _POISON[dt_]
    cr, cc = _acc_tables(N)
    sign = float(scale_a * scale_b)

    def uniform(st, rd, tids, first, wi, what: str) -> np.ndarray:
        """Per-warp value of an operand that every lane of a warp must hold alike."""
        v = _full(rd, st)[tids]
        per_warp = v[first]
        bad = v != per_warp[wi]
        if bad.any():
            t = int(tids[np.flatnonzero(bad)[0]])
            cta, tid = st.describe_thread(t)
            raise EmulatorError(
                f"kernel {st.kernel_name!r}, PTX line {ins.line}: `{ins.text}`: {what} differs "
                f"between the lanes of a warp (CTA {cta}, thread {tid})"
            )
        return per_warp

    def load(st, desc, warp_tid, mn, kk, mn_major: bool, t: str) -> np.ndarray:
        """Operand elements (W, len(mn), K) as float64 from shared memory, per warp, read in
        16-byte chunks of T elements."""
        W = desc.shape[0]
        if mn_major:  # 16-byte chunks run along MN: T consecutive mn at one k
            addr = operand_addresses(
                desc[:, None, None], mn[:, None, ::T], kk[None, :, None], True, esize
            )
        else:  # along K: T consecutive k at one mn
            addr = operand_addresses(
                desc[:, None, None], mn[:, :, None], kk[None, None, ::T], False, esize
            )
        flat = addr.reshape(W, -1)
        tids_rep = np.repeat(warp_tid, flat.shape[1])
        parts = resolve(st, ins, tids_rep, "shared", flat.ravel(), 16, None, "r")
        if st.shadow is not None:  # read until a wgmma.wait_group retires the wgmma
            words = (parts[0][1].reshape(W, -1, 1) >> 2) + np.arange(4)
            for w, warp_words in zip(warp_tid >> 5, words.reshape(W, -1), strict=True):
                st.shadow.hold_reads(ins, warp_words)
                st.wgmma_reads.setdefault(int(w), ([], []))[0].append(warp_words)
        raw = np.stack(read_elems(parts, tids_rep.size, esize, T, nm.UINT[8 * esize]), axis=-1)
        vals = _decode(raw, t)
        if mn_major:  # (W, K, MN/T, T) -> (W, MN, K)
            return vals.reshape(W, K, -1).transpose(0, 2, 1)
        return vals.reshape(W, mn.shape[1], K)  # (W, MN, K/T, T)

    kidx = np.arange(K)

    def run(st, idx):
        if st.tpc_real % 128:
            raise EmulatorError(
                f"kernel {st.kernel_name!r}, PTX line {ins.line}: `{ins.text}` needs whole "
                f"warpgroups (4 warps), but the CTA has {st.tpc_real} threads"
            )
        tids = thread_ids(st, idx)
        warps, first = np.unique(tids >> 5, return_index=True)
        W = warps.size
        wi = np.searchsorted(warps, tids >> 5)
        warp_tid = tids[first]
        rank = (warps % (st.tpc // 32)) % 4
        lanes = (warps[:, None] * 32 + _lane[None, :]).ravel()
        rows = 16 * rank[:, None] + np.arange(16)[None, :]  # (W, 16) rows of A and D
        scale_d = uniform(st, rsd, tids, first, wi, "scale-d")
        b_desc = uniform(st, rb_desc, tids, first, wi, "the B descriptor").astype(np.uint64)
        nidx = np.broadcast_to(np.arange(N), (W, N))
        B = load(st, b_desc, warp_tid, nidx, kidx, bool(trans_b), bt)  # (W, N, K)
        if ra_desc is None:
            A = np.zeros((W, 16, K))
            A[:, ar, ac] = ra(st, lanes).reshape(W, 32, -1)
        else:
            a_desc = uniform(st, ra_desc, tids, first, wi, "the A descriptor").astype(np.uint64)
            A = load(st, a_desc, warp_tid, rows, kidx, bool(trans_a), at)  # (W, 16, K)
        D = np.matmul(A, B.transpose(0, 2, 1))
        if sign < 0:
            D = -D
        if scale_d.any():
            # in place on the warps' pending accumulators, if an earlier wgmma writes them
            for w in warps:
                pending = st.wgmma_acc.get(int(w))
                for slot in slots if pending is not None else ():
                    if slot in pending.regs:
                        _, ptids, bits = pending.regs[slot]
                        st.regs[slot][ptids] = bits.view(st.regs[slot].dtype)
            C = np.zeros((W, 16, N))
            C[:, cr, cc] = rc(st, lanes).reshape(W, 32, -1)
            D = D + np.where(scale_d[:, None, None], C, 0.0)
        lane = tids & 31
        vals = D[wi[:, None], cr[lane], cc[lane]]  # (n, N/2)
        write_accumulator(st, idx, wrs, vals, dt_, satfinite)
        # Written at the wait that retires this wgmma: until then the registers hold poison.
        bounds = np.searchsorted(tids >> 5, warps, side="right")
        starts = np.concatenate(([0], bounds[:-1]))
        for slot in slots:
            reg = st.regs[slot]
            bits = reg[tids].view(np.uint32).copy()
            reg[tids] = poison.view(reg.dtype)
            for w, start, stop in zip(warps, starts, bounds, strict=True):
                pending = st.wgmma_acc.setdefault(int(w), PendingAccumulators())
                pending.regs[slot] = (pending.committed, tids[start:stop], bits[start:stop])

    return run, "mma"
