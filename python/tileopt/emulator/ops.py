"""Instruction semantics: integer, floating-point, conversion, data movement and control flow.

``compile_instruction(cx, ins)`` turns one parsed instruction into one or more :class:`Op`.
Memory instructions live in :mod:`tileopt.emulator.memops`, warp-level ones (shfl, vote, mma,
ldmatrix...) in :mod:`tileopt.emulator.warpops`, Hopper's warpgroup MMA (wgmma) in
:mod:`tileopt.emulator.warpgroup`.
"""

from __future__ import annotations

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.errors import PTXLoadError
from tileopt.emulator.memory import (
    LOCAL_WINDOW,
    PARAM_WINDOW,
    SHARED_WINDOW,
    WINDOW_SIZE,
    synchronised,
    thread_ids,
)
from tileopt.emulator.parser import Imm, Instruction, Pair, Paren, Reg, Sink, Sym, Vec
from tileopt.emulator.program import BAR, BRA, BRX, CALL, EXIT, PLAIN, RET, TRAP, Op

HANDLERS: dict = {}

ROUND = {"rn", "rz", "rm", "rp"}
DIRECTED = {"rz", "rm", "rp"}
ROUNDI = {"rni", "rzi", "rmi", "rpi"}


def handler(*names):
    def deco(f):
        for n in names:
            HANDLERS[n] = f
        return f

    return deco


def split(ins: Instruction):
    """(base, types, modifiers) of an instruction's opcode."""
    parts = ins.opcode.split(".")
    types = [p for p in parts[1:] if p in nm.TYPES]
    mods = [p for p in parts[1:] if p not in nm.TYPES]
    return parts[0], types, mods


def check_mods(cx, mods, allowed) -> None:
    for m in mods:
        if m not in allowed:
            raise cx.unsupported(f"modifier .{m}")


def nops(cx, ins, n) -> None:
    if len(ins.operands) != n:
        raise cx.error(f"expected {n} operands, got {len(ins.operands)}")


def load_handlers() -> None:
    """Imports the modules that register the other instructions' handlers (they import this
    one, so not at its top): ``compile_instruction`` does on the first opcode it lacks."""
    from tileopt.emulator import (  # noqa: F401  (their handlers)
        asynccopy,
        devicelib,
        mbarrier,
        memops,
        tma,
        warpgroup,
        warpops,
    )


def compile_instruction(cx, ins: Instruction) -> list[Op]:
    """Compile one instruction into executable ops (raises UnsupportedInstructionError)."""
    base = ins.opcode.split(".")[0]
    h = HANDLERS.get(base)
    if h is None:
        load_handlers()
        h = HANDLERS.get(base)
    if h is None:
        raise cx.unsupported()
    if ins.parse_error:
        raise PTXLoadError(ins.parse_error)
    res = h(cx, ins)
    if isinstance(res, Op):
        return [res]
    if isinstance(res, list):
        return res
    fn, cls = res
    op = Op(PLAIN, ins, cls, fn)
    _warp_sync_info(cx, ins, base, op)
    return [op]


# warp-synchronous instructions: base -> index of the membermask operand (None: whole warp)
_WARP_SYNC = {
    "shfl": 4,
    "vote": 2,
    "match": 2,
    "redux": 2,
    "elect": 1,
    "mma": None,
    "ldmatrix": None,
    "stmatrix": None,
    "movmatrix": None,
    "wmma": None,
    "wgmma": None,
}


def _warp_sync_info(cx, ins: Instruction, base: str, op: Op) -> None:
    """Mark .sync warp-level ops: they wait until the lanes of their membermask arrive."""
    mods = ins.opcode.split(".")[1:]
    if base == "bar" and mods[:1] == ["warp"]:
        op.sync, op.member = 1, cx.reader(ins.operands[0], "b32")
        return
    if base not in _WARP_SYNC or "sync" not in mods:
        return
    op.sync = 1
    k = _WARP_SYNC[base]
    if k is not None and len(ins.operands) > k:
        op.member = cx.reader(ins.operands[k], "b32")


def one_type(cx, types) -> str:
    if len(types) != 1:
        raise cx.unsupported("expected exactly one type suffix")
    return types[0]


# ---------------------------------------------------------------- float helpers


def is_float(t: str) -> bool:
    return nm.TYPES[t][1] == "f"


def fdecode(t: str, n_of=None):
    """Decoder raw -> float64 (or float32 for f32) array; packed types give 2 lanes per thread."""
    if t == "f32":
        return lambda v: v
    if t == "f64":
        return lambda v: v
    if t == "f16":
        return lambda v: np.asarray(v).astype(np.float64)
    if t == "bf16":
        return lambda v: nm.bf16_to_f32(v).astype(np.float64)
    if t == "tf32":
        return lambda v: np.asarray(v).astype(np.float64)
    if t == "f16x2":
        return lambda v: (
            np.ascontiguousarray(np.atleast_1d(v), np.uint32).view(np.float16).astype(np.float64)
        )
    if t == "bf16x2":
        return lambda v: nm.bf16_to_f32(
            np.ascontiguousarray(np.atleast_1d(v), np.uint32).view(np.uint16)
        ).astype(np.float64)
    raise ValueError(t)


def fencode(t: str, mode: str):
    """Encoder float array -> the register representation of type *t* with rounding *mode*."""
    mode = mode or "rn"
    if t == "f32":
        return lambda x: x if x.dtype == np.float32 and mode == "rn" else nm.round_to_f32(x, mode)
    if t == "f64":
        return lambda x: np.asarray(x, np.float64)
    if t == "f16":
        return lambda x: nm.round_to_f16(x, mode)
    if t == "bf16":
        return lambda x: nm.f64_to_bf16(x, mode)
    if t == "f16x2":
        return lambda x: np.ascontiguousarray(nm.round_to_f16(x, mode)).view(np.uint32)
    if t == "bf16x2":
        return lambda x: np.ascontiguousarray(nm.f64_to_bf16(x, mode)).view(np.uint32)
    raise ValueError(t)


def _bcast_packed(vals):
    """Broadcast packed operands (1 value per thread) to a common length before unpacking."""
    n = max((np.size(v) for v in vals), default=1)
    return [np.broadcast_to(np.atleast_1d(v), (n,)) if np.size(v) != n else v for v in vals]


def round_mode(mods) -> str:
    """The floating-point rounding modifier among *mods* ('' if none)."""
    return next((m for m in mods if m in ROUND), "")


def float_op(cx, ins, t, mods, nargs, f32fn, f64fn, *, exact32=True, allowed=(),
             directed64=False):
    """Generic float instruction: dst = f(srcs) with rounding/ftz/sat/relu modifiers.
    *directed64*: f64fn rounds f64 results in the instruction's directed mode itself."""
    allowed = set(allowed) | ROUND | {"ftz", "sat", "relu", "noftz", "NaN", "approx", "full"}
    check_mods(cx, mods, allowed)
    nops(cx, ins, nargs + 1)
    mode = round_mode(mods)
    if t == "f64" and mode in DIRECTED and not directed64:
        raise cx.unsupported("directed rounding of this f64 instruction")
    ftz = "ftz" in mods and t == "f32"
    ftz16 = "ftz" in mods and t in ("f16", "f16x2")
    sat = "sat" in mods
    relu = "relu" in mods
    canon = relu or "NaN" in mods  # their NaN results are the canonical NaN
    rds = [cx.reader(o, t) for o in ins.operands[1:]]
    wr = cx.writer(ins.operands[0], t)
    packed = t in ("f16x2", "bf16x2")
    if t == "f32" and (mode in ("", "rn")) and exact32 and f32fn is not None:

        def run32(st, idx):
            xs = [r(st, idx) for r in rds]
            if ftz:
                xs = [nm.ftz32(x) for x in xs]
            y = f32fn(*xs)
            y = np.asarray(y, np.float32)
            if ftz:
                y = nm.ftz32(y)
            if sat:
                y = nm.sat01(y)
            if relu:
                y = np.where(y < 0, np.float32(0), y)
            if canon:
                y = nm.canonical_nan(y, t)
            wr(st, idx, y)

        return run32
    dec = fdecode(t)
    enc = fencode(t, mode)

    def run(st, idx):
        xs = [r(st, idx) for r in rds]
        if packed:
            xs = _bcast_packed(xs)
        if ftz:
            xs = [nm.ftz32(x) for x in xs]
        xs = [np.asarray(dec(x), np.float64) for x in xs]
        if ftz16:
            xs = [nm.ftz16(x) for x in xs]
        y = f64fn(*xs)
        if relu:
            y = np.where(y < 0, 0.0, y)
        if sat:
            y = nm.sat01(np.asarray(y, np.float64))
        if ftz16:  # flush the rounded result (re-encoding it is exact)
            y = nm.ftz16(nm.round_to_f16(y, mode))
        y = enc(np.asarray(y, np.float64))
        if ftz:
            y = nm.ftz32(y)
        if canon:
            y = nm.canonical_nan(y, t)
        wr(st, idx, y)

    return run


# ---------------------------------------------------------------- integer helpers


def _w(t):
    return nm.TYPES[t][0]


def _signed(t):
    return nm.TYPES[t][1] == "s"


def mulhi(a, b, t):
    w = _w(t)
    if w <= 32:
        wide = np.int64 if _signed(t) else np.uint64
        p = (
            a.astype(wide) * b.astype(wide)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
            else np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
        )
        return (np.asarray(p) >> w).astype(nm.np_dtype(t))
    # 64-bit high product from 32-bit halves
    ua = np.asarray(a).view(np.uint64) if np.asarray(a).dtype != np.uint64 else np.asarray(a)
    ub = np.asarray(b).view(np.uint64) if np.asarray(b).dtype != np.uint64 else np.asarray(b)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1 = ua & m32, ua >> s32
    b0, b1 = ub & m32, ub >> s32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    if _signed(t):
        sa = np.asarray(a) < 0
        sb = np.asarray(b) < 0
        hi = hi - np.where(sa, ub, np.uint64(0)) - np.where(sb, ua, np.uint64(0))
        return hi.view(np.int64)
    return hi


def widen_t(t):
    k = nm.TYPES[t][1]
    w = _w(t) * 2
    return ("s" if k == "s" else "u") + str(w)


# ---------------------------------------------------------------- arithmetic


# Packed integer SIMD types: lanes of a 32-bit register -> (lane bits, signed).
_PACKED_INT = {"u16x2": (16, False), "s16x2": (16, True), "u8x4": (8, False), "s8x4": (8, True)}


def _packed_int_op(cx, ins, base, mods):
    """add/sub/min/max on packed integer lanes of .b32 registers (lane 0 in the low bits).

    ``add``/``min``/``max`` on .u16x2/.s16x2 (sm_90), and add/sub/min/max on .u8x4/.s8x4 plus
    ``add.sat`` on every packed type (sm_120): add and sub wrap around in each lane unless
    ``.sat`` clamps them to the lane's range; ``.relu`` (signed min/max only) clamps negative
    lanes to 0.
    """
    t = next(m for m in mods if m in _PACKED_INT)
    rest = [m for m in mods if m != t]
    bits, signed = _PACKED_INT[t]
    allowed = {"add": {"sat"}, "sub": {"sat"}}.get(base, {"relu"} if signed else set())
    if base == "sub" and bits == 16:
        raise cx.unsupported(f"sub has no .{t} form (PTX has add.{t} only)")
    check_mods(cx, rest, allowed)
    nops(cx, ins, 3)
    a, b = (cx.reader(o, "b32") for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], "b32")
    lane = nm.SINT[bits] if signed else nm.UINT[bits]
    info = np.iinfo(lane)
    sat = "sat" in rest
    relu = "relu" in rest
    f = {"add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum}[base]

    def run(st, idx):
        x, y = (
            np.ascontiguousarray(np.atleast_1d(v), np.uint32).view(lane).astype(np.int32)
            for v in _bcast_packed([a(st, idx), b(st, idx)])
        )
        r = f(x, y)
        if sat:
            r = np.clip(r, info.min, info.max)
        if relu:
            r = np.maximum(r, 0)
        wr(st, idx, np.ascontiguousarray(r.astype(lane)).view(np.uint32))

    return run, "alu"


@handler("add", "sub")
def h_addsub(cx, ins):
    base, types, mods = split(ins)
    if any(m in _PACKED_INT for m in mods):
        return _packed_int_op(cx, ins, base, mods)
    t = one_type(cx, types)
    sub = base == "sub"
    if is_float(t):
        f = np.subtract if sub else np.add
        mode = round_mode(mods)
        if t == "f64" and mode in DIRECTED:

            def f(x, y):
                return nm.add_f64(x, np.negative(y) if sub else y, mode)

        elif t == "f32" and mode in DIRECTED:
            # Directed rounding of a float64 sum rounded to nearest loses the bits below
            # float64's ulp (1 + 1e-30 toward zero is 1 - 2^-24); rounded to odd it keeps
            # them. (To nearest, rounding twice through float64 is exact.) .rm makes exact
            # zero sums -0.
            def f(x, y):
                z = np.negative(y) if sub else y
                return nm.zero_sum_sign(fma_to_odd(x, 1.0, z), x, z, mode)

        return float_op(cx, ins, t, mods, 2, f, f, directed64=True), "fp"
    check_mods(cx, mods, {"sat", "cc"})
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    if "sat" in mods:
        if t != "s32":
            raise cx.unsupported(".sat needs .s32")

        def run_sat(st, idx):
            x = np.asarray(a(st, idx)).astype(np.int64)
            y = np.asarray(b(st, idx)).astype(np.int64)
            wr(st, idx, np.clip(x - y if sub else x + y, -(2**31), 2**31 - 1).astype(np.int32))

        return run_sat, "alu"
    if "cc" in mods:
        return _carry_op(cx, t, a, b, None, wr, sub, False), "alu"
    op = np.subtract if sub else np.add

    def run(st, idx):
        wr(st, idx, op(a(st, idx), b(st, idx)))

    return run, "alu"


def _carry_op(cx, t, a, b, c, wr, sub, use_cin, set_cc=True):
    if t not in ("u32", "s32", "b32", "u64", "s64", "b64"):
        raise cx.unsupported("carry arithmetic type")
    cc = cx.hidden_slot(np.uint8, "%cc")
    w = _w(t)
    ut = nm.UINT[w]

    def run(st, idx):
        x = np.asarray(a(st, idx)).astype(ut)
        y = np.asarray(b(st, idx)).astype(ut)
        cin = st.regs[cc][idx].astype(ut) if use_cin else ut.type(0)
        if sub:
            # The hardware subtracts as x + ~y + 1 (sub.cc) or x + ~y + CF (subc): CF is
            # the carry of that sum, 1 where nothing was borrowed (nvcc's 128-bit division
            # reads it with addc), not the borrow that PTX's description names.
            if use_cin:
                d = x - y - (ut.type(1) - cin)
                carry = (x > y) | ((x == y) & (cin != 0))
            else:
                d = x - y
                carry = x >= y
        else:
            s1 = x + y
            d = s1 + cin
            carry = (s1 < x) | (d < s1)
        wr(st, idx, d)
        if set_cc:
            st.regs[cc][idx] = np.asarray(carry, np.uint8)

    return run


@handler("addc", "subc")
def h_addc(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, {"cc"})
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    return _carry_op(cx, t, a, b, None, wr, base == "subc", True, "cc" in mods), "alu"


@handler("mul", "mul24")
def h_mul(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    if is_float(t):
        mode = round_mode(mods)
        f = np.multiply
        if t == "f64" and mode in DIRECTED:

            def f(x, y):
                return nm.mul_f64(x, y, mode)

        return float_op(cx, ins, t, mods, 2, f, f, directed64=True), "fp"
    check_mods(cx, mods, {"lo", "hi", "wide"})
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    if base == "mul24":
        if "wide" in mods:
            raise cx.unsupported()
        hi = "hi" in mods
        wr = cx.writer(ins.operands[0], t)
        s = _signed(t)

        def run24(st, idx):
            x = np.asarray(a(st, idx)).astype(np.int64)
            y = np.asarray(b(st, idx)).astype(np.int64)
            if s:
                x = (x << 40) >> 40
                y = (y << 40) >> 40
            else:
                x &= 0xFFFFFF
                y &= 0xFFFFFF
            p = x * y
            wr(st, idx, ((p >> 16) if hi else p).astype(np.uint64).astype(np.uint32))

        return run24, "alu"
    if "wide" in mods:
        if _w(t) not in (16, 32):  # PTX has no 128-bit results
            raise cx.error(".wide needs a 16- or 32-bit integer type")
        wt = widen_t(t)
        wdt = nm.np_dtype(wt)
        wr = cx.writer(ins.operands[0], wt)

        def runw(st, idx):
            wr(st, idx, np.asarray(a(st, idx)).astype(wdt) * np.asarray(b(st, idx)).astype(wdt))

        return runw, "alu"
    wr = cx.writer(ins.operands[0], t)
    if "hi" in mods:

        def runh(st, idx):
            wr(st, idx, mulhi(a(st, idx), b(st, idx), t))

        return runh, "alu"

    def run(st, idx):
        wr(st, idx, np.multiply(a(st, idx), b(st, idx)))

    return run, "alu"


def fma_f32(x, y, z):
    """fma for a float32 result: float64 x*y+z, made exact by :func:`fma_to_odd` only where
    the float64 sum could double-round (its bits below float32 precision are 0 or a tie)."""
    p = np.asarray(x, np.float64) * y
    s = np.atleast_1d(np.asarray(p + z, np.float64))
    low = s.view(np.uint64) & np.uint64(0x0FFFFFFF)
    risky = (low == 0) | (np.abs(s) < 1.2e-38)
    if not risky.any():
        return s
    return fma_to_odd(x, y, z)


def fma_to_odd(x, y, z):
    """x*y+z in float64 rounded to odd, so one more rounding to f32/f16/bf16 is exact (fused):
    the product of two f32 (or narrower) values is exact in float64."""
    return nm.add_to_odd(np.asarray(x, np.float64) * y, np.asarray(z, np.float64))


@handler("fma", "mad", "mad24", "madc")
def h_fma(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    if is_float(t):
        mode = round_mode(mods)
        if t == "f64":

            def f(x, y, z):
                return nm.fma_f64(x, y, z, mode)

        elif t == "f32" and mode in DIRECTED:  # (.rm makes exact zero sums -0)

            def f(x, y, z):
                return nm.zero_sum_sign(fma_f32(x, y, z), np.multiply(x, y), z, mode)

        else:
            f = fma_f32 if t == "f32" else fma_to_odd
        return float_op(cx, ins, t, mods, 3, None, f, exact32=False, directed64=True), "fp"
    check_mods(cx, mods, {"lo", "hi", "wide", "cc", "sat"})
    nops(cx, ins, 4)
    if base == "mad24":
        raise cx.unsupported()
    a, b = (cx.reader(o, t) for o in ins.operands[1:3])
    if "wide" in mods:
        if _w(t) not in (16, 32):  # PTX has no 128-bit results
            raise cx.error(".wide needs a 16- or 32-bit integer type")
        wt = widen_t(t)
        wdt = nm.np_dtype(wt)
        c = cx.reader(ins.operands[3], wt)  # c and d are twice as wide as a and b
        wr = cx.writer(ins.operands[0], wt)
        if "cc" in mods or base == "madc":
            raise cx.unsupported("mad.wide with carry")

        def runw(st, idx):
            wr(
                st,
                idx,
                np.asarray(a(st, idx)).astype(wdt) * np.asarray(b(st, idx)).astype(wdt)
                + c(st, idx),
            )

        return runw, "alu"
    c = cx.reader(ins.operands[3], t)
    wr = cx.writer(ins.operands[0], t)
    hi = "hi" in mods
    if "cc" in mods or base == "madc":
        cc = cx.hidden_slot(np.uint8, "%cc")
        use_cin = base == "madc"
        ut = nm.UINT[_w(t)]
        set_cc = "cc" in mods

        def runc(st, idx):
            x, y = a(st, idx), b(st, idx)
            p = mulhi(x, y, t) if hi else np.multiply(x, y)
            p = np.asarray(p).astype(ut)
            z = np.asarray(c(st, idx)).astype(ut)
            cin = st.regs[cc][idx].astype(ut) if use_cin else ut.type(0)
            s1 = p + z
            d = s1 + cin
            wr(st, idx, d)
            if set_cc:
                st.regs[cc][idx] = ((s1 < p) | (d < s1)).astype(np.uint8)

        return runc, "alu"
    if "sat" in mods:
        if not (hi and t == "s32"):
            raise cx.unsupported()

        def runs(st, idx):
            p = mulhi(a(st, idx), b(st, idx), t).astype(np.int64) + np.asarray(c(st, idx)).astype(
                np.int64
            )
            wr(st, idx, np.clip(p, -(2**31), 2**31 - 1).astype(np.int32))

        return runs, "alu"

    def run(st, idx):
        x, y = a(st, idx), b(st, idx)
        p = mulhi(x, y, t) if hi else np.multiply(x, y)
        wr(st, idx, np.add(p, c(st, idx)))

    return run, "alu"


@handler("div", "rem")
def h_div(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    if is_float(t):
        if base == "rem":
            raise cx.unsupported()
        mode = round_mode(mods)
        f = np.divide
        if t == "f64" and mode in DIRECTED:

            def f(x, y):
                return nm.div_f64(x, y, mode)

        elif t == "f32" and "approx" in mods:
            f = div_approx
        return float_op(cx, ins, t, mods, 2, f, f, directed64=True), "fp"
    check_mods(cx, mods, set())
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    signed = _signed(t)
    dt = nm.np_dtype(t)
    is_rem = base == "rem"

    def run(st, idx):
        x = np.asarray(a(st, idx), dt)
        y = np.asarray(b(st, idx), dt)
        zero = y == 0
        ys = np.where(zero, dt.type(1), y)
        if signed:
            # C semantics: truncate toward zero; INT_MIN / -1 wraps
            ys = np.where((ys == -1) & (x == np.iinfo(dt).min), dt.type(1), ys)
            r = np.fmod(x, ys)
            if is_rem:
                res = r
            else:
                q = (x - r) // ys
                res = np.where((y == -1) & (x == np.iinfo(dt).min), x, q)
        else:
            res = x % ys if is_rem else x // ys
        if np.any(zero):
            res = np.where(zero, x if is_rem else dt.type(-1 if signed else np.iinfo(dt).max), res)
        wr(st, idx, res)

    return run, "alu"


def div_approx(x, y):
    """div.approx.f32 is x * (1/y): for 2^126 < |y| < 2^128, 1/y is subnormal and flushed, so
    the result is a zero with the sign of x * y, or the canonical NaN for x infinite or NaN."""
    d = np.divide(x, y)
    big = np.abs(y) > np.float32(2.0**126)
    if np.count_nonzero(big) and np.count_nonzero(big := big & np.isfinite(y)):
        zero = np.where(np.isfinite(x), x * np.copysign(np.float32(0), y), np.float32(np.nan))
        d = np.where(big, nm.canonical_nan(zero, "f32"), d)
    return d


@handler("abs", "neg")
def h_absneg(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    nops(cx, ins, 2)
    if is_float(t):
        check_mods(cx, mods, {"ftz"})
        a = cx.reader(ins.operands[1], t)
        wr = cx.writer(ins.operands[0], t)
        w = _w(t)
        sign = {16: 0x8000, 32: 0x80000000, 64: 0x8000000000000000}[w]
        if t in ("f16x2", "bf16x2"):
            sign = 0x80008000
        ut = nm.UINT[w]
        smask = ut.type(sign)
        neg = base == "neg"
        ftz = "ftz" in mods and t == "f32"
        ftz16 = "ftz" in mods and t in ("f16", "f16x2")
        dt = nm.np_dtype(t)

        def run(st, idx):
            x = a(st, idx)
            if ftz:
                x = nm.ftz32(x)
            elif ftz16:  # (f16x2: per lane)
                h = np.ascontiguousarray(np.atleast_1d(x)).view(np.float16)
                x = nm.ftz16(h).view(dt).reshape(np.shape(x))
            u = (
                np.asarray(x).view(ut)
                if np.asarray(x).dtype.itemsize == ut.itemsize
                else np.asarray(x).astype(ut)
            )
            u = (u ^ smask) if neg else (u & ~smask)
            wr(st, idx, np.asarray(u).view(dt))

        return run, "fp"
    check_mods(cx, mods, set())
    a = cx.reader(ins.operands[1], t)
    wr = cx.writer(ins.operands[0], t)
    if base == "neg":
        return (lambda st, idx: wr(st, idx, np.negative(a(st, idx)))), "alu"
    return (lambda st, idx: wr(st, idx, np.abs(a(st, idx)))), "alu"


@handler("min", "max")
def h_minmax(cx, ins):
    base, types, mods = split(ins)
    if any(m in _PACKED_INT for m in mods):
        return _packed_int_op(cx, ins, base, mods)
    t = one_type(cx, types)
    is_min = base == "min"
    if is_float(t):
        # .xorsign.abs (sm_86+; Triton's symmetric tl.clamp): the min/max of the magnitudes,
        # with the XOR of the inputs' signs unless the result is NaN. The two go together.
        xorsign = "xorsign" in mods
        if xorsign != ("abs" in mods):
            raise cx.unsupported(".xorsign and .abs go together")
        if t == "f64" and ("NaN" in mods or xorsign):
            raise cx.error(f"{base}.f64 has no .NaN, .xorsign or .abs")
        if "NaN" in mods:
            f = np.minimum if is_min else np.maximum
        else:
            f = np.fmin if is_min else np.fmax

        def fz(x, y):
            if xorsign:
                negative = np.signbit(x) ^ np.signbit(y)
                x, y = np.abs(x), np.abs(y)
            r = f(x, y)
            # -0.0 is less than +0.0
            z = (x == 0) & (y == 0)
            if np.any(z):
                sx = np.signbit(x)
                sy = np.signbit(y)
                neg = (sx | sy) if is_min else (sx & sy)
                r = np.where(z, np.where(neg, -0.0, 0.0).astype(np.asarray(r).dtype), r)
            if xorsign:
                r = np.where(np.isnan(r), r, np.copysign(r, np.where(negative, -1.0, 1.0)))
            return r

        return float_op(cx, ins, t, mods, 2, fz, fz, allowed={"xorsign", "abs"}), "fp"
    check_mods(cx, mods, {"relu"})
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    f = np.minimum if is_min else np.maximum
    relu = "relu" in mods
    return (
        lambda st, idx: wr(
            st, idx, np.maximum(f(a(st, idx), b(st, idx)), 0) if relu else f(a(st, idx), b(st, idx))
        )
    ), "alu"


@handler("rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh")
def h_funcs(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    if not is_float(t):
        raise cx.unsupported()
    approx = "approx" in mods
    mods = [m for m in mods if m not in ("approx", "full")]
    if t == "f64" and approx and "ftz" in mods and base in ("rcp", "rsqrt"):
        return float_op(cx, ins, t, mods, 1, None, _approx_ftz_f64(base)), "fp"
    mode = round_mode(mods)
    f = {
        "rcp": lambda x: 1.0 / x,
        "sqrt": np.sqrt,
        "rsqrt": lambda x: 1.0 / np.sqrt(x),
        "ex2": np.exp2,
        "lg2": np.log2,
        "sin": np.sin,
        "cos": np.cos,
        "tanh": np.tanh,
    }[base]
    exact32 = base in ("rcp", "sqrt") and not approx
    f64 = f
    if t == "f64" and mode in DIRECTED and exact32:
        if base == "rcp":

            def f64(x):
                return nm.div_f64(1.0, x, mode)

        else:

            def f64(x):
                return nm.sqrt_f64(x, mode)

    return float_op(cx, ins, t, mods, 1, f if exact32 else None, f64, exact32=exact32,
                    directed64=exact32), "fp"


_HI_WORD = np.uint64(0xFFFFFFFF00000000)


def _approx_ftz_f64(base: str):
    """rcp.approx.ftz.f64 and rsqrt.approx.ftz.f64 read the upper word of a (1.11.20, the low
    32 bits ignored), flush subnormal inputs and results to sign-preserving zero, and zero the
    low 32 bits of the result (here the exact result truncated); NaN gives 0x7FFFFFFF00000000."""
    f = np.reciprocal if base == "rcp" else (lambda x: 1.0 / np.sqrt(x))

    def run(x):
        x = nm.ftz64((np.asarray(x, np.float64).view(np.uint64) & _HI_WORD).view(np.float64))
        y = nm.ftz64(f(x))
        bits = np.asarray(y).view(np.uint64) & _HI_WORD
        return np.where(np.isnan(y), np.uint64(0x7FFFFFFF00000000), bits).view(np.float64)

    return run


@handler("copysign")
def h_copysign(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    return (lambda st, idx: wr(st, idx, np.copysign(b(st, idx), a(st, idx)))), "fp"


@handler("testp")
def h_testp(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    nops(cx, ins, 2)
    a = cx.reader(ins.operands[1], t)
    wr = cx.writer(ins.operands[0], "pred")
    tiny = np.finfo(nm.np_dtype(t)).tiny
    tests = {
        "finite": np.isfinite,
        "infinite": np.isinf,
        "number": lambda x: ~np.isnan(x),
        "notanumber": np.isnan,
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= tiny),
        "subnormal": lambda x: (np.abs(x) < tiny) & (x != 0),
    }
    if len(mods) != 1 or mods[0] not in tests:
        raise cx.unsupported()
    f = tests[mods[0]]
    return (lambda st, idx: wr(st, idx, f(a(st, idx)))), "fp"


# ---------------------------------------------------------------- logic and bits


@handler("and", "or", "xor")
def h_logic(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 3)
    a, b = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[base]
    return (lambda st, idx: wr(st, idx, f(a(st, idx), b(st, idx)))), "alu"


@handler("not", "cnot")
def h_not(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 2)
    a = cx.reader(ins.operands[1], t)
    wr = cx.writer(ins.operands[0], t)
    dt = nm.np_dtype(t)
    if base == "cnot":
        return (lambda st, idx: wr(st, idx, (np.asarray(a(st, idx)) == 0).astype(dt))), "alu"
    return (lambda st, idx: wr(st, idx, np.invert(a(st, idx)))), "alu"


@handler("shl", "shr")
def h_shift(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 3)
    a = cx.reader(ins.operands[1], t)
    b = cx.reader(ins.operands[2], "u32")
    wr = cx.writer(ins.operands[0], t)
    w = _w(t)
    dt = nm.np_dtype(t)
    arith = base == "shr" and _signed(t)
    left = base == "shl"

    def run(st, idx):
        x = np.asarray(a(st, idx), dt)
        n = np.asarray(b(st, idx), np.uint32)
        if n.ndim == 0:  # immediate shift amount: no per-thread select
            k = int(n)
            if k >= w:
                r = (x >> dt.type(w - 1)) if arith else np.zeros_like(x)
            else:
                r = (x << dt.type(k)) if left else (x >> dt.type(k))
            wr(st, idx, r)
            return
        big = n >= w
        nn = np.minimum(n, w - 1).astype(dt)
        if left:
            r = nm.select(big, dt.type(0), x << nn)
        elif arith:
            r = x >> nn
        else:
            r = nm.select(big, dt.type(0), x >> nn)
        wr(st, idx, r)

    return run, "alu"


@handler("shf")
def h_shf(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    if t != "b32":
        raise cx.unsupported()
    check_mods(cx, mods, {"l", "r", "wrap", "clamp"})
    nops(cx, ins, 4)
    a, b, c = (cx.reader(o, "u32") for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], "u32")
    left = "l" in mods
    wrap = "wrap" in mods

    def run(st, idx):
        lo = np.asarray(a(st, idx)).astype(np.uint64)
        hi = np.asarray(b(st, idx)).astype(np.uint64)
        n = np.asarray(c(st, idx)).astype(np.uint64)
        n = n & np.uint64(31) if wrap else np.minimum(n, np.uint64(32))
        v = (hi << np.uint64(32)) | lo
        if left:
            r = ((v << n) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
        else:
            r = (v >> n) & np.uint64(0xFFFFFFFF)
        wr(st, idx, r.astype(np.uint32))

    return run, "alu"


@handler("popc", "clz", "brev", "bfind")
def h_bits(cx, ins):
    base, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, {"shiftamt"})
    nops(cx, ins, 2)
    a = cx.reader(ins.operands[1], t)
    w = _w(t)
    ut = nm.UINT[w]
    if base == "popc":
        wr = cx.writer(ins.operands[0], "u32")
        return (
            lambda st, idx: wr(
                st, idx, np.bitwise_count(np.asarray(a(st, idx)).view(ut)).astype(np.uint32)
            )
        ), "alu"
    if base == "clz":
        wr = cx.writer(ins.operands[0], "u32")
        return (
            lambda st, idx: wr(
                st, idx, (w - bit_length(np.asarray(a(st, idx)).view(ut))).astype(np.uint32)
            )
        ), "alu"
    if base == "brev":
        wr = cx.writer(ins.operands[0], t)
        return (lambda st, idx: wr(st, idx, brev(np.asarray(a(st, idx)).view(ut)))), "alu"
    wr = cx.writer(ins.operands[0], "u32")
    shiftamt = "shiftamt" in mods
    signed = _signed(t)

    def run(st, idx):
        x = np.atleast_1d(np.asarray(a(st, idx)))
        if signed:
            x = np.where(x < 0, ~x, x)
        bl = bit_length(x.view(ut)).astype(np.int64)
        pos = bl - 1
        if shiftamt:
            pos = np.where(bl == 0, -1, (w - 1) - pos)
        wr(st, idx, np.where(bl == 0, 0xFFFFFFFF, pos).astype(np.int64).astype(np.uint32))

    return run, "alu"


def bit_length(u: np.ndarray) -> np.ndarray:
    """Number of significant bits of unsigned integers."""
    u = np.asarray(u)
    if u.dtype.itemsize == 8:
        hi = (u >> np.uint64(32)).astype(np.uint32)
        lo = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return np.where(hi != 0, bit_length(hi) + 32, bit_length(lo))
    _, e = np.frexp(u.astype(np.float64))
    return np.where(u == 0, 0, e).astype(np.int64)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)


def brev(u: np.ndarray) -> np.ndarray:
    """Reverse the bits of unsigned integers."""
    u = np.ascontiguousarray(np.atleast_1d(u))
    b = _REV8[u.view(np.uint8)].reshape(u.shape + (u.dtype.itemsize,))[..., ::-1]
    return np.ascontiguousarray(b).view(u.dtype).reshape(u.shape)


@handler("bfe")
def h_bfe(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 4)
    a = cx.reader(ins.operands[1], t)
    b, c = (cx.reader(o, "u32") for o in ins.operands[2:])
    wr = cx.writer(ins.operands[0], t)
    w = _w(t)
    signed = _signed(t)
    ut = nm.UINT[w]
    dt = nm.np_dtype(t)
    u64 = np.uint64
    all_ones = u64(0xFFFFFFFFFFFFFFFF)

    def run(st, idx):
        x = np.atleast_1d(np.asarray(a(st, idx))).view(ut).astype(u64)
        pos = np.asarray(b(st, idx)).astype(np.int64) & 0xFF
        ln = np.asarray(c(st, idx)).astype(np.int64) & 0xFF
        k = np.clip(np.minimum(ln, w - pos), 0, w)  # bits taken from a
        mask = np.where(k >= 64, all_ones, (u64(1) << np.minimum(k, 63).astype(u64)) - u64(1))
        r = (x >> np.minimum(pos, w - 1).astype(u64)) & mask
        if signed:
            sbit_pos = np.minimum(pos + ln - 1, w - 1).astype(u64)
            sb = (((x >> sbit_pos) & u64(1)) == 1) & (ln > 0)
            r = np.where(sb, r | ~mask, r)
        if w < 64:
            r = r & u64((1 << w) - 1)
        wr(st, idx, r.astype(ut).view(dt))

    return run, "alu"


@handler("bfi")
def h_bfi(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 5)
    w = _w(t)
    ut = nm.UINT[w]
    f, b = (cx.reader(o, t) for o in ins.operands[1:3])
    c, d = (cx.reader(o, "u32") for o in ins.operands[3:])
    wr = cx.writer(ins.operands[0], t)
    u64 = np.uint64
    all_ones = u64(0xFFFFFFFFFFFFFFFF)

    def run(st, idx):
        fv = np.atleast_1d(np.asarray(f(st, idx))).view(ut).astype(u64)
        bv = np.atleast_1d(np.asarray(b(st, idx))).view(ut).astype(u64)
        pos = np.asarray(c(st, idx)).astype(np.int64) & 0xFF
        ln = np.asarray(d(st, idx)).astype(np.int64) & 0xFF
        k = np.clip(np.minimum(ln, w - pos), 0, w)
        ones = np.where(k >= 64, all_ones, (u64(1) << np.minimum(k, 63).astype(u64)) - u64(1))
        sh = np.minimum(pos, w - 1).astype(u64)
        mask = np.where(pos >= w, u64(0), ones << sh)
        r = (bv & ~mask) | ((fv << sh) & mask)
        if w < 64:
            r = r & u64((1 << w) - 1)
        wr(st, idx, r.astype(ut))

    return run, "alu"


@handler("bmsk")
def h_bmsk(cx, ins):
    """bmsk.{clamp,wrap}.b32 d, a, b: a mask of b bits starting at bit a."""
    _, types, mods = split(ins)
    if types != ["b32"] or len(mods) != 1 or mods[0] not in ("clamp", "wrap"):
        raise cx.unsupported()
    nops(cx, ins, 3)
    a, b = (cx.reader(o, "u32") for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], "b32")
    wrap = mods[0] == "wrap"

    def run(st, idx):
        pos = np.asarray(a(st, idx)).astype(np.int64)
        width = np.asarray(b(st, idx)).astype(np.int64)
        pos, width = (
            (pos & 31, width & 31) if wrap else (np.minimum(pos, 32), np.minimum(width, 32))
        )
        m = (np.int64(1) << width) - 1
        d = np.where(pos >= 32, 0, (m << np.minimum(pos, 31)) & 0xFFFFFFFF)
        wr(st, idx, d.astype(np.uint32))

    return run, "alu"


@handler("szext")
def h_szext(cx, ins):
    """szext.{clamp,wrap}.{u32,s32} d, a, b: sign/zero-extend the low b bits of a."""
    _, types, mods = split(ins)
    if (
        len(types) != 1
        or types[0] not in ("u32", "s32")
        or len(mods) != 1
        or mods[0]
        not in (
            "clamp",
            "wrap",
        )
    ):
        raise cx.unsupported()
    nops(cx, ins, 3)
    a = cx.reader(ins.operands[1], "u32")
    b = cx.reader(ins.operands[2], "u32")
    wr = cx.writer(ins.operands[0], "u32")
    wrap = mods[0] == "wrap"
    signed = types[0] == "s32"

    def run(st, idx):
        x = np.asarray(a(st, idx)).astype(np.int64)
        n = np.asarray(b(st, idx)).astype(np.int64)
        n = n & 31 if wrap else np.minimum(n, 32)
        low = x & ((np.int64(1) << n) - 1)
        if signed:
            sb = (low >> np.maximum(n - 1, 0)) & 1
            low = np.where((sb == 1) & (n > 0), low - (np.int64(1) << n), low)
        d = np.where(n >= 32, x, np.where(n == 0, 0, low))
        wr(st, idx, (d & 0xFFFFFFFF).astype(np.uint32))

    return run, "alu"


@handler("prmt")
def h_prmt(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    if t != "b32":
        raise cx.unsupported()
    mode = mods[0] if mods else ""
    if mode not in ("", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16") or len(mods) > 1:
        raise cx.unsupported()
    nops(cx, ins, 4)
    a, b, c = (cx.reader(o, "u32") for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], "u32")

    def run(st, idx):
        av = np.asarray(a(st, idx)).astype(np.uint64)
        bv = np.asarray(b(st, idx)).astype(np.uint64)
        cv = np.asarray(c(st, idx)).astype(np.uint64)
        av, bv, cv = np.broadcast_arrays(av, bv, cv)
        src = av | (bv << np.uint64(32))  # bytes 0..7
        byt = [(src >> np.uint64(8 * k)) & np.uint64(0xFF) for k in range(8)]
        allb = np.stack(byt)  # (8, n)
        n = src.shape[0] if src.ndim else 1
        if mode == "":
            sels = [(cv >> np.uint64(4 * i)) & np.uint64(0xF) for i in range(4)]
            res = np.zeros_like(src)
            for i, s in enumerate(sels):
                sel = (s & np.uint64(7)).astype(np.int64)
                v = np.take_along_axis(allb.reshape(8, -1), sel.reshape(1, -1), 0).reshape(
                    sel.shape
                )
                msb = (v >> np.uint64(7)) & np.uint64(1)
                v = np.where((s & np.uint64(8)) != 0, msb * np.uint64(0xFF), v)
                res |= v << np.uint64(8 * i)
            wr(st, idx, res.astype(np.uint32))
            return
        s = (cv & np.uint64(3)).astype(np.int64).reshape(-1)
        tables = {
            "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
            "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
            "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
            "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
            "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
            "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
        }[mode]
        tab = np.array(tables, np.int64)[s]  # (n, 4)
        flat = allb.reshape(8, -1)
        res = np.zeros(n, np.uint64)
        for i in range(4):
            v = flat[tab[:, i], np.arange(n)]
            res |= v << np.uint64(8 * i)
        wr(st, idx, res.astype(np.uint32).reshape(np.shape(src)))

    return run, "alu"


@handler("lop3")
def h_lop3(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    if len(ins.operands) != 5 or not isinstance(ins.operands[4], Imm):
        raise cx.unsupported("lop3 needs an immediate LUT")
    lut = ins.operands[4].value & 0xFF
    a, b, c = (cx.reader(o, t) for o in ins.operands[1:4])
    wr = cx.writer(ins.operands[0], t)

    def run(st, idx):
        x, y, z = a(st, idx), b(st, idx), c(st, idx)
        r = None
        for k in range(8):
            if lut >> k & 1:
                term = (x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z)
                r = term if r is None else r | term
        if r is None:
            r = x ^ x
        wr(st, idx, r)

    return run, "alu"


@handler("sad")
def h_sad(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 4)
    a, b, c = (cx.reader(o, t) for o in ins.operands[1:])
    wr = cx.writer(ins.operands[0], t)
    wide = np.int64 if _signed(t) else np.uint64
    dt = nm.np_dtype(t)

    def run(st, idx):
        x = np.asarray(a(st, idx)).astype(wide)
        y = np.asarray(b(st, idx)).astype(wide)
        d = np.where(x > y, x - y, y - x)
        wr(st, idx, (np.asarray(c(st, idx)).astype(wide) + d).astype(dt))

    return run, "alu"


@handler("dp4a", "dp2a")
def h_dp4a(cx, ins):
    base, types, mods = split(ins)
    if len(types) != 2:
        raise cx.unsupported()
    nops(cx, ins, 4)
    ta, tb = types
    a = cx.reader(ins.operands[1], "u32")
    b = cx.reader(ins.operands[2], "u32")
    c = cx.reader(ins.operands[3], "s32" if "s32" in types else "u32")
    out_t = "s32" if ("s32" in types) else "u32"
    wr = cx.writer(ins.operands[0], out_t)
    if base == "dp2a":
        raise cx.unsupported()

    def bytes_of(v, s):
        v = np.asarray(v).astype(np.uint32)
        out = []
        for k in range(4):
            x = ((v >> np.uint32(8 * k)) & np.uint32(0xFF)).astype(np.int64)
            if s:
                x = np.where(x >= 128, x - 256, x)
            out.append(x)
        return out

    def run(st, idx):
        xa = bytes_of(a(st, idx), ta == "s32")
        xb = bytes_of(b(st, idx), tb == "s32")
        acc = np.asarray(c(st, idx)).astype(np.int64)
        for k in range(4):
            acc = acc + xa[k] * xb[k]
        wr(
            st,
            idx,
            acc.astype(np.uint64).astype(np.uint32).view(np.int32)
            if out_t == "s32"
            else acc.astype(np.uint64).astype(np.uint32),
        )

    return run, "alu"


# ---------------------------------------------------------------- compare / select

_CMP = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "lo": np.less,
    "ls": np.less_equal,
    "hi": np.greater,
    "hs": np.greater_equal,
}


def comparator(cx, cmp: str, t: str):
    """A function (a, b) -> bool array for PTX comparison *cmp* on type *t*."""
    if is_float(t):
        if t in ("f16x2", "bf16x2"):
            raise cx.unsupported("packed comparison")
        dec = fdecode(t)
        if cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
            f = _CMP[cmp]
            if cmp == "ne":
                return lambda a, b: (dec(a) != dec(b)) & ~np.isnan(dec(a)) & ~np.isnan(dec(b))
            return lambda a, b: f(dec(a), dec(b))
        if cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu"):
            f = _CMP[cmp[:-1]]

            def fu(a, b):
                x, y = dec(a), dec(b)
                return f(x, y) | np.isnan(x) | np.isnan(y)

            return fu
        if cmp == "num":
            return lambda a, b: ~np.isnan(dec(a)) & ~np.isnan(dec(b))
        if cmp == "nan":
            return lambda a, b: np.isnan(dec(a)) | np.isnan(dec(b))
        raise cx.unsupported(f"comparison .{cmp}")
    if cmp not in _CMP:
        raise cx.unsupported(f"comparison .{cmp}")
    f = _CMP[cmp]
    if cmp in ("lo", "ls", "hi", "hs") and _signed(t):
        ut = nm.UINT[_w(t)]
        return lambda a, b: f(np.asarray(a).view(ut), np.asarray(b).view(ut))
    if t == "pred":
        return lambda a, b: f(a, b)
    return f


_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@handler("setp", "set")
def h_setp(cx, ins):
    base, types, mods = split(ins)
    cmps = [
        m
        for m in mods
        if m in _CMP or m in ("equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
    ]
    bops = [m for m in mods if m in _BOOL]
    check_mods(cx, mods, set(cmps) | set(bops) | {"ftz"})
    if len(cmps) != 1 or len(bops) > 1:
        raise cx.unsupported()
    if base == "setp":
        t = one_type(cx, types)
        dtype_out = "pred"
    else:
        if len(types) != 2:
            raise cx.unsupported()
        dtype_out, t = types
    if bops and len(ins.operands) != 4:
        raise cx.error("boolean setp needs a predicate operand c")
    if not bops and len(ins.operands) != 3:
        raise cx.error("wrong number of operands")
    if t in ("f16x2", "bf16x2"):
        return _packed_compare(cx, ins, base, cmps[0], t, dtype_out, bops, "ftz" in mods)
    cmpf = comparator(cx, cmps[0], t)
    ftz = {"f32": nm.ftz32, "f16": nm.ftz16}.get(t) if "ftz" in mods else None
    dst = ins.operands[0]
    a, b = (cx.reader(o, t) for o in ins.operands[1:3])
    c = None
    if bops:
        c = cx.reader(ins.operands[3], "pred")
        bop = _BOOL[bops[0]]
    if isinstance(dst, Pair):
        w1 = cx.writer(dst.first, dtype_out)
        w2 = cx.writer(dst.second, dtype_out) if not isinstance(dst.second, Sink) else None
    else:
        w1, w2 = cx.writer(dst, dtype_out), None
    if dtype_out != "pred":
        odt = nm.np_dtype(dtype_out)
        one = (
            np.array(1.0 if is_float(dtype_out) else -1).astype(odt)
            if dtype_out not in ("f16", "bf16")
            else None
        )
        if dtype_out == "f16":
            one = np.array(1.0, np.float16)
        elif dtype_out == "bf16":
            one = np.array(0x3F80, np.uint16)  # 1.0 as bf16 bits
        if one is None:
            raise cx.unsupported()

        def conv(p):
            return np.where(p, one, odt.type(0))
    else:

        def conv(p):
            return p

    def run(st, idx):
        x, y = a(st, idx), b(st, idx)
        if ftz is not None:
            x, y = ftz(x), ftz(y)
        p = np.asarray(cmpf(x, y))
        if c is not None:
            cv = c(st, idx)
            p1 = bop(p, cv)
            p2 = bop(~p, cv) if w2 is not None else None
        else:
            p1, p2 = p, (~p if w2 is not None else None)
        w1(st, idx, conv(p1))
        if w2 is not None:
            w2(st, idx, conv(p2))

    return run, "alu"


def _packed_compare(cx, ins, base, cmp, t, dtype_out, bops, ftz):
    """setp/set on .f16x2/.bf16x2: lanes compared separately (lower half -> p, upper -> q);
    .ftz (f16x2) flushes subnormal lanes."""
    et = t[:-2]
    cmpf = comparator(cx, cmp, et)
    a, b = (cx.reader(o, "b32") for o in ins.operands[1:3])
    c = cx.reader(ins.operands[3], "pred") if bops else None
    bop = _BOOL[bops[0]] if bops else None

    def halves(v):
        v = np.asarray(v).astype(np.uint32)
        lo = (v & np.uint32(0xFFFF)).astype(np.uint16)
        hi = (v >> np.uint32(16)).astype(np.uint16)
        if et == "f16":
            if ftz:
                return nm.ftz16(lo.view(np.float16)), nm.ftz16(hi.view(np.float16))
            return lo.view(np.float16), hi.view(np.float16)
        return lo, hi

    def lanes(st, idx):
        (alo, ahi), (blo, bhi) = halves(a(st, idx)), halves(b(st, idx))
        r0, r1 = np.asarray(cmpf(alo, blo)), np.asarray(cmpf(ahi, bhi))
        if c is not None:
            cv = c(st, idx)
            r0, r1 = bop(r0, cv), bop(r1, cv)
        return r0, r1

    dst = ins.operands[0]
    if base == "setp":
        if not isinstance(dst, Pair):
            raise cx.error("packed setp needs two destination predicates p|q")
        wp = cx.writer(dst.first, "pred")
        wq = cx.writer(dst.second, "pred") if not isinstance(dst.second, Sink) else None

        def run_setp(st, idx):
            r0, r1 = lanes(st, idx)
            wp(st, idx, r0)
            if wq is not None:
                wq(st, idx, r1)

        return run_setp, "alu"
    one = {"f16x2": 0x3C00, "bf16x2": 0x3F80, "u32": 0xFFFF, "s32": 0xFFFF}.get(dtype_out)
    if one is None:
        raise cx.unsupported()
    wr = cx.writer(dst, "b32")

    def run_set(st, idx):
        r0, r1 = lanes(st, idx)
        lo = np.where(r0, np.uint32(one), np.uint32(0))
        hi = np.where(r1, np.uint32(one), np.uint32(0))
        wr(st, idx, lo | (hi << np.uint32(16)))

    return run_set, "alu"


@handler("selp")
def h_selp(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 4)
    a, b = (cx.reader(o, t) for o in ins.operands[1:3])
    c = cx.reader(ins.operands[3], "pred")
    wr = cx.writer(ins.operands[0], t)
    return (lambda st, idx: wr(st, idx, nm.select(c(st, idx), a(st, idx), b(st, idx)))), "alu"


@handler("slct")
def h_slct(cx, ins):
    _, types, mods = split(ins)
    check_mods(cx, mods, {"ftz"})
    if len(types) != 2:
        raise cx.unsupported()
    t, ct = types
    nops(cx, ins, 4)
    a, b = (cx.reader(o, t) for o in ins.operands[1:3])
    c = cx.reader(ins.operands[3], ct)
    wr = cx.writer(ins.operands[0], t)
    # .ftz flushes a subnormal c: a negative one is -0, so >= 0 selects a
    flush = nm.ftz32 if "ftz" in mods and ct == "f32" else np.asarray
    return (
        lambda st, idx: wr(st, idx, np.where(flush(c(st, idx)) >= 0, a(st, idx), b(st, idx)))
    ), "alu"


# ---------------------------------------------------------------- mov / cvt / cvta


@handler("mov")
def h_mov(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    check_mods(cx, mods, set())
    nops(cx, ins, 2)
    dst, src = ins.operands
    w = _w(t)
    if isinstance(src, Vec):  # pack
        n = len(src.items)
        ew = w // n
        et = f"b{ew}"
        rds = [cx.reader(o, et) for o in src.items]
        wr = cx.writer(dst, t)
        ut = nm.UINT[w]

        def pack(st, idx):
            vals = [np.asarray(r(st, idx)).astype(ut) for r in rds]
            res = vals[0]
            for k in range(1, n):
                res = res | (vals[k] << ut.type(ew * k))
            wr(st, idx, res)

        return pack, "alu"
    if isinstance(dst, Vec):  # unpack
        n = len(dst.items)
        ew = w // n
        et = f"b{ew}"
        rd = cx.reader(src, t)
        wrs = [cx.writer(o, et) for o in dst.items]
        ut = nm.UINT[w]
        et_dt = nm.UINT[ew]
        m = ut.type((1 << ew) - 1)

        def unpack(st, idx):
            v = (
                np.asarray(rd(st, idx)).view(ut)
                if np.ndim(rd(st, idx))
                else np.asarray(rd(st, idx)).astype(ut)
            )
            for k, wr in enumerate(wrs):
                wr(st, idx, ((v >> ut.type(ew * k)) & m).astype(et_dt))

        return unpack, "alu"
    if isinstance(src, Sym) and src.name in cx.module.functions:
        raise cx.unsupported("function addresses")
    rd = cx.reader(src, t)
    wr = cx.writer(dst, t)
    return (lambda st, idx: wr(st, idx, rd(st, idx))), "alu"


@handler("cvt")
def h_cvt(cx, ins):
    _, types, mods = split(ins)
    if len(types) not in (2,):
        raise cx.unsupported()
    dt_, st_ = types
    check_mods(cx, mods, ROUND | ROUNDI | {"ftz", "sat", "relu", "rna", "satfinite"})
    rmode = next((m for m in mods if m in ROUND or m in ROUNDI or m == "rna"), "")
    ftz = "ftz" in mods
    sat = "sat" in mods
    relu = "relu" in mods
    satfinite = "satfinite" in mods
    if dt_ in _FP8X2 or st_ in _FP8X2 or dt_ in ("e4m3", "e5m2") or st_ in ("e4m3", "e5m2"):
        return _cvt_fp8(cx, ins, dt_, st_, mods)
    # packed conversions: cvt.rn.f16x2.f32 d, a, b  (a -> upper half)
    if dt_ in ("f16x2", "bf16x2"):
        if st_ != "f32":
            raise cx.unsupported()
        nops(cx, ins, 3)
        a, b = (cx.reader(o, "f32", relaxed=True) for o in ins.operands[1:])
        wr = cx.writer(ins.operands[0], "u32", relaxed=True)
        ft = dt_[:-2]
        mode = rmode or "rn"

        def half(x):
            x = np.asarray(x, np.float64)
            if relu:
                x = np.where(x < 0, 0.0, x)
            if satfinite:
                x = nm.satfinite(x, ft)
            if ft == "bf16":
                return nm.f64_to_bf16(x, mode)  # (NaN: the canonical one)
            h = nm.round_to_f16(x, mode)
            return np.asarray(nm.canonical_nan(h, "f16") if relu else h).view(np.uint16)

        def runp(st, idx):
            h, lw = half(a(st, idx)), half(b(st, idx))
            wr(st, idx, (h.astype(np.uint32) << np.uint32(16)) | lw.astype(np.uint32))

        return runp, "cvt"
    nops(cx, ins, 2)
    a = cx.reader(ins.operands[1], st_, relaxed=True)
    wr = cx.writer(ins.operands[0], dt_, relaxed=True)
    fd = is_float(dt_)
    fs = is_float(st_)
    ddt = nm.np_dtype(dt_)
    if fs and not fd:  # float -> int
        mode = rmode or "rzi"
        if mode not in ROUNDI:
            raise cx.unsupported("float-to-int conversion needs an integer rounding mode")
        dec = fdecode(st_)
        info = np.iinfo(ddt)
        w = _w(dt_)
        # NaN gives 0, but 1 << (w - 1) from f64 or to a 64-bit integer (PTX ISA, cvt)
        nan_int = np.array(0 if st_ != "f64" and w < 64 else 1 << (w - 1), nm.UINT[w]).view(ddt)

        def f2i(st, idx):
            x = np.asarray(a(st, idx))
            if ftz and st_ == "f32":
                x = nm.ftz32(x)
            x = np.asarray(dec(x), np.float64)
            r = nm.round_integral(x, mode)
            r = np.clip(r, float(info.min), float(info.max))
            r = np.where(np.isnan(r), 0.0, r)
            if info.max == 2**64 - 1:
                big = r >= 2.0**63
                res = np.where(
                    big,
                    (r - 2.0**63).astype(np.uint64) + np.uint64(2**63),
                    np.where(big, 0, r).astype(np.int64).astype(np.uint64),
                )
                # r == 2**64 (clipped max) is represented exactly as 2**64 in float
                res = np.where(r >= 2.0**64, np.uint64(2**64 - 1), res)
            elif info.max == 2**63 - 1:
                res = np.where(
                    r >= 2.0**63, np.int64(2**63 - 1), np.where(r >= 2.0**63, 0, r).astype(np.int64)
                )
            else:
                res = r.astype(np.int64).astype(ddt)
            if nan_int != 0:
                res = np.where(np.isnan(x), nan_int, res)
            wr(st, idx, res)

        return f2i, "cvt"
    if fd and not fs:  # int -> float
        mode = rmode or "rn"
        if mode not in ROUND:
            raise cx.unsupported()
        enc = fencode(dt_, mode)

        def i2f(st, idx):
            x = np.asarray(a(st, idx))
            if dt_ == "f32" and mode == "rn":
                y = x.astype(np.float32)
            elif dt_ == "f64":
                y = nm.int_to_f64(x, mode)
            else:
                y = enc(nm.int_to_f64_odd(x))
            if sat:
                y = _sat_float(y, dt_, enc)
            wr(st, idx, y)

        return i2f, "cvt"
    if fd and fs:  # float -> float
        dec = fdecode(st_)
        if rmode in ROUNDI:
            if dt_ != st_:
                raise cx.unsupported()

            def rint(st, idx):
                x = np.asarray(a(st, idx))
                if ftz and st_ == "f32":
                    x = nm.ftz32(x)
                y = nm.round_integral(np.asarray(dec(x)), rmode)
                if sat:
                    y = nm.sat01(np.asarray(y))
                y = (
                    fencode(dt_, "rn")(np.asarray(y, np.float64))
                    if dt_ in ("f16", "bf16")
                    else y.astype(ddt)
                )
                wr(st, idx, y)

            return rint, "cvt"
        mode = rmode or "rn"
        if dt_ == "tf32":

            def totf32(st, idx):
                x = np.asarray(a(st, idx), np.float32)
                if satfinite:
                    x = nm.satfinite(x, "tf32")
                wr(st, idx, nm.f32_to_tf32(x, mode).view(np.uint32))

            wr = cx.writer(ins.operands[0], "b32", relaxed=True)
            return totf32, "cvt"
        enc = fencode(dt_, mode)

        def f2f(st, idx):
            x = np.asarray(a(st, idx))
            if ftz and st_ == "f32":
                x = nm.ftz32(x)
            if st_ == dt_ and dt_ in ("f32", "f64"):
                y = x
            elif dt_ == "f64" or (dt_ == "f32" and st_ in ("f16", "bf16")):
                y = np.asarray(dec(x)).astype(ddt)
            elif dt_ == "f32" and st_ == "f64" and mode == "rn":
                y = x.astype(np.float32)
            elif satfinite and dt_ in nm.MAX_FINITE:
                y = enc(nm.satfinite(np.asarray(dec(x), np.float64), dt_))
            else:
                y = enc(np.asarray(dec(x), np.float64))
            if relu:
                y = np.where(fdecode(dt_)(y) < 0, enc(np.zeros(np.shape(y))), y)
                y = nm.canonical_nan(y, dt_)
            if sat:
                y = _sat_float(y, dt_, enc)
            if ftz and dt_ == "f32":
                y = nm.ftz32(y)
            wr(st, idx, y)

        return f2f, "cvt"
    # int -> int
    sdt = nm.np_dtype(st_)

    def i2i(st, idx):
        x = np.asarray(a(st, idx), sdt)
        if sat:
            info = np.iinfo(ddt)
            if sdt == np.uint64:
                y = np.minimum(x, np.uint64(info.max)).astype(ddt) if info.max > 0 else x
            else:
                xi = x.astype(np.int64)
                y = np.clip(xi, max(info.min, -(2**63)), min(info.max, 2**63 - 1))
                if ddt == np.uint64:
                    y = np.maximum(xi, 0).astype(np.uint64)
            y = np.asarray(y).astype(ddt)
        else:
            y = x.astype(ddt)
        wr(st, idx, y)

    return i2i, "cvt"


def _sat_float(y, t: str, enc):
    """cvt's .sat on float results of type *t*: clamped to [0, 1], NaN to 0."""
    if t in ("f32", "f64"):
        return nm.sat01(np.asarray(y))
    return enc(nm.sat01(np.asarray(fdecode(t)(y), np.float64)))


_FP8X2 = ("e4m3x2", "e5m2x2")


def _cvt_fp8(cx, ins, dt_, st_, mods):
    """fp8 pairs: cvt.rn.satfinite.e4m3x2.{f32 a, b | f16x2 a} and cvt.rn.f16x2.e4m3x2 a."""
    relu = "relu" in mods
    if dt_ in _FP8X2:
        fmt = dt_[:-2]
        if "satfinite" not in mods or "rn" not in mods:
            raise cx.unsupported("f32 -> fp8 needs .rn.satfinite")
        wr = cx.writer(ins.operands[0], "b16", relaxed=True)
        if st_ == "f32":
            nops(cx, ins, 3)
            a, b = (cx.reader(o, "f32", relaxed=True) for o in ins.operands[1:])

            def run2(st, idx):
                hi = nm.to_fp8(a(st, idx), fmt, relu).astype(np.uint16)
                lo = nm.to_fp8(b(st, idx), fmt, relu).astype(np.uint16)
                wr(st, idx, (hi << np.uint16(8)) | lo)

            return run2, "cvt"
        if st_ == "f16x2":
            nops(cx, ins, 2)
            a = cx.reader(ins.operands[1], "b32", relaxed=True)
            dec = fdecode("f16x2")

            def runh(st, idx):
                v = np.atleast_1d(dec(a(st, idx))).reshape(-1, 2)  # [:, 0] = low half
                lo = nm.to_fp8(v[:, 0], fmt, relu).astype(np.uint16)
                hi = nm.to_fp8(v[:, 1], fmt, relu).astype(np.uint16)
                wr(st, idx, (hi << np.uint16(8)) | lo)

            return runh, "cvt"
        raise cx.unsupported()
    if st_ in _FP8X2 and dt_ == "f16x2":
        fmt = st_[:-2]
        nops(cx, ins, 2)
        a = cx.reader(ins.operands[1], "b16", relaxed=True)
        wr = cx.writer(ins.operands[0], "b32", relaxed=True)

        def runu(st, idx):
            v = np.atleast_1d(np.asarray(a(st, idx))).astype(np.uint16)
            lo = nm.from_fp8((v & np.uint16(0xFF)).astype(np.uint8), fmt)
            hi = nm.from_fp8((v >> np.uint16(8)).astype(np.uint8), fmt)
            if relu:
                lo, hi = np.where(lo < 0, 0.0, lo), np.where(hi < 0, 0.0, hi)
            h_lo = lo.astype(np.float16).view(np.uint16).astype(np.uint32)
            h_hi = hi.astype(np.float16).view(np.uint16).astype(np.uint32)
            wr(st, idx, h_lo | (h_hi << np.uint32(16)))

        return runu, "cvt"
    raise cx.unsupported("this fp8 conversion")


@handler("cvta")
def h_cvta(cx, ins):
    _, types, mods = split(ins)
    t = one_type(cx, types)
    to = "to" in mods
    spaces = [m for m in mods if m != "to"]
    if len(spaces) != 1:
        raise cx.unsupported()
    space = spaces[0].split("::")[0]
    nops(cx, ins, 2)
    a = cx.reader(ins.operands[1], t)
    wr = cx.writer(ins.operands[0], t)
    if space in ("global", "const"):
        return (lambda st, idx: wr(st, idx, a(st, idx))), "alu"
    if space == "param":  # kernel parameters (the address of an .entry parameter)
        if not cx.cur_fn.is_entry:
            raise cx.unsupported("cvta.param in a .func")
        base = PARAM_WINDOW
    elif space == "shared":
        base = SHARED_WINDOW
    elif space == "local":
        base = LOCAL_WINDOW
    else:
        raise cx.unsupported(f"cvta to/from .{space}")
    dt = nm.np_dtype(t)
    if to:

        def run_to(st, idx):
            v = np.asarray(a(st, idx)).astype(np.uint64)
            wr(st, idx, ((v - np.uint64(base)) & np.uint64(WINDOW_SIZE - 1)).astype(dt))

        return run_to, "alu"

    def run(st, idx):
        v = np.asarray(a(st, idx)).astype(np.uint64) & np.uint64(WINDOW_SIZE - 1)
        wr(st, idx, (v + np.uint64(base)).astype(dt))

    return run, "alu"


@handler("isspacep")
def h_isspacep(cx, ins):
    _, types, mods = split(ins)
    nops(cx, ins, 2)
    if len(mods) != 1:
        raise cx.unsupported()
    space = mods[0]
    a = cx.reader(ins.operands[1], "u64")
    wr = cx.writer(ins.operands[0], "pred")
    from tileopt.emulator.memory import GLOBAL_BASE

    def run(st, idx):
        v = np.asarray(a(st, idx)).astype(np.uint64)
        if space in ("global", "const"):
            r = v >= np.uint64(GLOBAL_BASE)
        elif space == "shared":
            r = (v >= np.uint64(SHARED_WINDOW)) & (v < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
        elif space == "local":
            r = (v >= np.uint64(LOCAL_WINDOW)) & (v < np.uint64(LOCAL_WINDOW + WINDOW_SIZE))
        elif space == "param":
            r = (v >= np.uint64(PARAM_WINDOW)) & (v < np.uint64(PARAM_WINDOW + WINDOW_SIZE))
        else:
            r = np.zeros(np.shape(v), bool)
        wr(st, idx, r)

    return run, "alu"


# ---------------------------------------------------------------- control flow


@handler("bra")
def h_bra(cx, ins):
    _, types, mods = split(ins)
    check_mods(cx, mods, {"uni"})
    nops(cx, ins, 1)
    tgt = ins.operands[0]
    if not isinstance(tgt, Sym):
        raise cx.unsupported("indirect branch")
    return Op(BRA, ins, "branch", target=cx.label(tgt.name))


@handler("brx")
def h_brx(cx, ins):
    _, types, mods = split(ins)
    check_mods(cx, mods, {"idx", "uni"})
    nops(cx, ins, 2)
    tbl = ins.operands[1]
    if not isinstance(tbl, Sym) or tbl.name not in cx.cur_fn.branch_targets:
        raise cx.unsupported("brx.idx needs a .branchtargets label")
    targets = tuple(cx.label(n) for n in cx.cur_fn.branch_targets[tbl.name])
    return Op(BRX, ins, "branch", fn=cx.reader(ins.operands[0], "u32"), targets=targets)


@handler("exit")
def h_exit(cx, ins):
    return Op(EXIT, ins, "branch")


@handler("ret")
def h_ret(cx, ins):
    _, _, mods = split(ins)
    check_mods(cx, mods, {"uni"})
    if cx.cur_fn.is_entry:
        return Op(EXIT, ins, "branch")
    return Op(RET, ins, "branch", func=cx.funcs[cx.cur_fn.name])


@handler("trap")
def h_trap(cx, ins):
    return Op(TRAP, ins, "branch")


def _library_call(cx, ins, fname: str, args, rets, devicelib) -> list[Op]:
    """A call of one of CUDA's device functions that the emulator provides (``devicelib``):
    the function reads the caller's .param arguments (little-endian integers) and writes its
    return value into the caller's .param."""
    sizes, ret_size = devicelib.SIGNATURES[fname]
    if len(args) != len(sizes) or len(rets) != (1 if ret_size else 0):
        raise cx.error(f"call of {fname} with the wrong number of arguments")

    def param(o, size: int) -> int:
        sym = cx.func_syms[cx.cur_fn.name].get(o.name) if isinstance(o, Sym) else None
        if sym is None or sym.space != "tparam" or sym.size < size:
            raise cx.unsupported(f"{fname}'s arguments must be .param variables of {size} bytes")
        return sym.addr

    srcs = [param(o, n) for o, n in zip(args, sizes, strict=True)]
    ret = param(rets[0], ret_size) if ret_size else None
    fn = devicelib.FUNCTIONS[fname]

    def run(st, idx):
        params = []
        for addr, n in zip(srcs, sizes, strict=True):
            raw = st.tparam_read(idx, [(addr, None, n)])[0]  # (bytes, threads)
            params.append(sum(raw[k].astype(np.uint64) << np.uint64(8 * k) for k in range(n)))
        result = fn(st, ins, thread_ids(st, idx), params)
        if ret is not None:
            data = np.asarray(result, "<u4").view(np.uint8).reshape(-1, 4).T
            st.tparam_write(idx, [(None, ret, 4)], [data])

    # Two ops, as every call compiles to (the second is where a callee would return).
    return [Op(PLAIN, ins, "branch", fn=run),
            Op(PLAIN, ins, "branch", fn=lambda st, idx: None, counted=False)]


@handler("call")
def h_call(cx, ins):
    _, _, mods = split(ins)
    check_mods(cx, mods, {"uni"})
    ops = list(ins.operands)
    rets: tuple = ()
    if ops and isinstance(ops[0], Paren):
        rets = ops.pop(0).items
    if not ops or not isinstance(ops[0], Sym):
        raise cx.unsupported("indirect call")
    fname = ops.pop(0).name
    args = ops.pop(0).items if ops and isinstance(ops[0], Paren) else ()
    if ops:
        raise cx.unsupported("call with a prototype")
    callee = cx.module.functions[fname]
    from tileopt.emulator import devicelib  # (it reads memory through memops, which imports ops)

    if not callee.defined and fname in devicelib.FUNCTIONS:
        return _library_call(cx, ins, fname, args, rets, devicelib)
    if len(args) != len(callee.params) or len(rets) != len(callee.rets):
        raise cx.error(f"call of {fname} with the wrong number of arguments")

    def copies(srcs, dsts, src_fn, dst_fn):
        pairs = []
        for s, d in zip(srcs, dsts, strict=True):
            if not isinstance(s, Sym):
                raise cx.unsupported("call arguments must be .param variables")
            ss = cx.func_syms[src_fn].get(s.name)
            ds = cx.func_syms[dst_fn].get(d.name)
            if ss is None:
                raise cx.error(f"call argument {s.name} is not declared")
            if ds is None or ss.space != "tparam" or ds.space != "tparam":
                raise cx.unsupported("call arguments must be .param variables")
            pairs.append((ss.addr, ds.addr, max(ds.size, 1)))
        return pairs

    copy_in = copies(args, callee.params, cx.cur_fn.name, fname)  # (caller var, callee param, n)
    copy_out = [(d, s_, n) for (s_, d, n) in copies(rets, callee.rets, cx.cur_fn.name, fname)]

    def mover(pairs):
        def run(st, idx):
            st.tparam_copy(idx, pairs)

        return run

    caller = cx.cur_fn.name
    if cx.is_recursive_call(caller, fname):
        info = cx.frame_info.setdefault(caller, {})

        def call_rec(st, idx):
            st.push_frame(caller, info, idx)
            st.tparam_copy(idx, copy_in)

        def back_rec(st, idx):
            saved = st.tparam_read(idx, copy_out)
            st.pop_frame(caller, info, idx)
            st.tparam_write(idx, copy_out, saved)

        call = Op(
            CALL, ins, "branch", fn=call_rec, target=cx.func_entry[fname], func=cx.funcs[fname]
        )
        back = Op(PLAIN, ins, "branch", fn=back_rec, counted=False)
    else:
        call = Op(
            CALL,
            ins,
            "branch",
            fn=mover(copy_in),
            target=cx.func_entry[fname],
            func=cx.funcs[fname],
        )
        back = Op(PLAIN, ins, "branch", fn=mover(copy_out), counted=False)
    return [call, back]


@handler("bar", "barrier")
def h_bar(cx, ins):
    base, types, mods = split(ins)
    if base == "bar" and mods and mods[0] == "warp":
        check_mods(cx, mods, {"warp", "sync"})
        return (lambda st, idx: None), "sync"
    if base == "barrier" and "cluster" in mods:
        # barrier.cluster.arrive counts the thread in; .wait waits until every live thread of
        # its cluster arrived as often as it did (machine.State._blocked).
        check_mods(cx, mods, {"cluster", "arrive", "wait", "relaxed", "release", "acquire",
                              "aligned"})
        if ("arrive" in mods) == ("wait" in mods) or ins.operands:
            raise cx.error("barrier.cluster takes .arrive or .wait and no operands")
        if "wait" in mods:

            def passed(st, idx):  # orders each CTA's accesses too, as bar.sync does
                ctas = np.unique(thread_ids(st, idx) // st.tpc)
                st.gepoch[ctas] += 1
                if st.shadow is not None:
                    st.shadow.barrier(ctas)

            return Op(PLAIN, ins, "sync", fn=passed, sync=3)

        def arrive(st, idx):
            st.cluster_arrivals[thread_ids(st, idx)] += 1

        return Op(PLAIN, ins, "sync", fn=arrive)
    mods_set = set(mods) - {"aligned", "cta"}
    kind = "sync"
    if "arrive" in mods_set:
        kind = "arrive"
    elif "red" in mods_set:
        kind = "red"
    check_mods(cx, mods_set, {"sync", "arrive", "red", "popc", "and", "or"})
    if kind != "red":
        for o in ins.operands:
            if not isinstance(o, Imm | Reg):
                raise cx.error("bad barrier operand")
        op = Op(BAR, ins, "sync", aux=None, sync=0 if kind == "arrive" else 2)
        op.aux2 = (
            ins.operands[0].value if ins.operands and isinstance(ins.operands[0], Imm) else None
        )
        if len(ins.operands) > 1 and kind != "arrive":
            op.count_rd = cx.reader(ins.operands[1], "u32")
        return op
    # bar.red.popc.u32 d, a{, b}, {!}c ; bar.red.and.pred p, a{, b}, {!}c
    red = "popc" if "popc" in mods_set else ("and" if "and" in mods_set else "or")
    t = "u32" if red == "popc" else "pred"
    wr = cx.writer(ins.operands[0], t)
    c = cx.reader(ins.operands[-1], "pred")
    op = Op(BAR, ins, "sync", aux=(red, c, wr), sync=2)
    op.aux2 = ins.operands[1].value if isinstance(ins.operands[1], Imm) else None
    if len(ins.operands) == 4:
        op.count_rd = cx.reader(ins.operands[2], "u32")
    return op


def _noop(st, idx):
    return None


@handler("membar", "fence")
def h_fence(cx, ins):
    return synchronised, "sync"


@handler(
    "prefetch",
    "prefetchu",
    "nanosleep",
    "pmevent",
    "griddepcontrol",
    "discard",
    "applypriority",
    "brkpt",
)
def h_noop(cx, ins):
    return _noop, "alu"


@handler("setmaxnreg")
def h_setmaxnreg(cx, ins):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 n: a hint to the register allocation of the
    warpgroup, which the emulator's registers do not need; the count must be one the
    hardware takes (a multiple of 8 from 24 to 256)."""
    _, types, mods = split(ins)
    actions = [m for m in mods if m in ("inc", "dec")]
    check_mods(cx, mods, {"inc", "dec", "sync", "aligned"})
    if types != ["u32"] or len(actions) != 1 or len(mods) != 3:
        raise cx.error("setmaxnreg expects .inc or .dec, then .sync.aligned.u32")
    nops(cx, ins, 1)
    count = ins.operands[0]
    if not (isinstance(count, Imm) and isinstance(count.value, int)
            and 24 <= count.value <= 256 and count.value % 8 == 0):
        raise cx.error("setmaxnreg's register count must be a constant multiple of 8 "
                       "from 24 to 256")
    return _noop, "alu"


@handler("createpolicy")
def h_createpolicy(cx, ins):
    wr = cx.writer(ins.operands[0], "b64")
    return (lambda st, idx: wr(st, idx, np.uint64(0))), "alu"


__all__ = ["HANDLERS", "compile_instruction"]
