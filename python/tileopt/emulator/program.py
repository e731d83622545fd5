"""Compile a parsed kernel into a flat list of operations (closures over numpy arrays).

Each PTX instruction becomes an :class:`Op` whose ``fn(st, idx)`` executes it for the
threads ``idx`` (``slice(None)`` = every thread of the chunk, else an index array).
Operands are resolved once, at load time, into reader/writer closures, so executing an
instruction is a handful of numpy operations and no parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator.errors import PTXLoadError, UnsupportedInstructionError
from tileopt.emulator.memory import GLOBAL_BASE
from tileopt.emulator.parser import (
    Addr,
    FImm,
    Function,
    Imm,
    Instruction,
    Module,
    Paren,
    Reg,
    Sink,
    Sym,
    Var,
    Vec,
)

# op kinds
PLAIN, BRA, EXIT, RET, CALL, BAR, BRX, TRAP = range(8)

Reader = Callable[..., object]
Writer = Callable[..., None]


@dataclass
class Op:
    """One executable operation of a compiled program."""

    kind: int
    ins: Instruction
    cls: str
    fn: Callable | None = None
    guard: int = -1  # predicate register slot
    guard_neg: bool = False
    target: int = 0  # branch target / callee entry
    func: int = 0  # function slot (RET) / callee slot (CALL)
    targets: tuple = ()  # brx.idx targets
    counted: bool = True
    aux: object = None
    # 1: waits for the lanes of its warp (membermask), 2: for the CTA (barrier), 3: for the
    # cluster (barrier.cluster.wait)
    sync: int = 0
    member: object = None  # membermask reader of warp-synchronous ops (None: all lanes)
    count_rd: object = None  # thread count of bar.sync a, b
    spin_loop: bool = False  # backward branch of a loop that polls memory (may spin-wait)
    wait_loop: bool = False  # backward branch of a loop around an mbarrier test/try_wait
    aux2: object = None  # barrier id of bar.sync (None when given in a register)


SPECIAL_REGS = {
    "%tid",
    "%ntid",
    "%ctaid",
    "%nctaid",
    "%laneid",
    "%warpid",
    "%nwarpid",
    "%smid",
    "%nsmid",
    "%gridid",
    "%clock",
    "%clock64",
    "%clock_hi",
    "%globaltimer",
    "%globaltimer_lo",
    "%globaltimer_hi",
    "%lanemask_eq",
    "%lanemask_le",
    "%lanemask_lt",
    "%lanemask_ge",
    "%lanemask_gt",
    "%dynamic_smem_size",
    "%total_smem_size",
    "%aggr_smem_size",
    "%clusterid",
    "%nclusterid",
    "%cluster_ctaid",
    "%cluster_nctaid",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%is_explicit_cluster",
}


def is_special(name: str) -> bool:
    """True when *name* is a PTX special register (``%tid.x``, ``%laneid``, ...)."""
    return (
        name.split(".")[0] in SPECIAL_REGS or name.startswith("%envreg") or name.startswith("%pm")
    )


@dataclass
class Symbol:
    """A resolved variable: state space and address (or param offset)."""

    space: str  # shared, global, const, local, kparam, tparam
    addr: int
    size: int
    var: Var | None = None


@dataclass
class Layout:
    """Static memory layout of a program."""

    shared_static: int = 0
    dyn_shared_align: int = 16
    local_size: int = 0
    tparam_size: int = 0
    kparam_size: int = 0
    kparam_offsets: list[int] = field(default_factory=list)


class Compiler:
    """Compiles one kernel (and the device functions it calls) to a list of :class:`Op`."""

    def __init__(self, module: Module, kernel: Function, global_syms: dict[str, Symbol]) -> None:
        self.module = module
        self.kernel = kernel
        self.global_syms = global_syms
        self.reg_slots: dict[tuple[str, str], int] = {}
        self.reg_dtypes: list[np.dtype] = []
        self.reg_types: list[str] = []
        self.layout = Layout()
        self.ops: list[Op] = []
        self.funcs: dict[str, int] = {}  # function name -> slot
        self.func_entry: dict[str, int] = {}
        self.func_syms: dict[str, dict[str, Symbol]] = {}
        self.cur_fn: Function | None = None
        self.cur_ins: Instruction | None = None
        self.uses_cc = False
        self.reach: dict[str, set[str]] = {}
        self.frame_info: dict[str, dict] = {}

    # ------------------------------------------------------------ errors

    def unsupported(self, what: str = "") -> UnsupportedInstructionError:
        ins = self.cur_ins
        fn = self.cur_fn.name if self.cur_fn else "?"
        msg = f"line {ins.line}: unsupported instruction `{ins.text}` in {fn}"
        if what:
            msg += f": {what}"
        return UnsupportedInstructionError(msg)

    def error(self, what: str) -> PTXLoadError:
        ins = self.cur_ins
        return PTXLoadError(f"line {ins.line}: {what} in `{ins.text}`")

    # ------------------------------------------------------------ layout

    def _collect_functions(self) -> list[Function]:
        from tileopt.emulator import devicelib

        order = [self.kernel]
        seen = {self.kernel.name}
        i = 0
        while i < len(order):
            f = order[i]
            i += 1
            for ins in f.body:
                if ins.opcode.split(".")[0] == "call":
                    callee = next((o.name for o in ins.operands if isinstance(o, Sym)), None)
                    if callee is None:
                        self.cur_fn, self.cur_ins = f, ins
                        raise self.unsupported("indirect call")
                    g = self.module.functions.get(callee)
                    if g is not None and not g.defined and callee in devicelib.SIGNATURES:
                        continue  # provided by the emulator (devicelib)
                    if g is None or not g.defined:
                        self.cur_fn, self.cur_ins = f, ins
                        raise self.unsupported(f"call of external function {callee!r}")
                    if g.is_entry:
                        self.cur_fn, self.cur_ins = f, ins
                        raise self.unsupported("call of a kernel")
                    if callee not in seen:
                        seen.add(callee)
                        order.append(g)
        self._check_recursion(order)
        return order

    def _check_recursion(self, funcs: list[Function]) -> None:
        """Record which calls are recursive (the callee can reach the caller): they save frames."""
        graph = {}
        for f in funcs:
            graph[f.name] = {
                next(o.name for o in ins.operands if isinstance(o, Sym))
                for ins in f.body
                if ins.opcode.split(".")[0] == "call"
            }

        def reach(a: str) -> set[str]:
            seen, todo = set(), [a]
            while todo:
                n = todo.pop()
                for m in graph.get(n, ()):
                    if m not in seen:
                        seen.add(m)
                        todo.append(m)
            return seen

        self.reach = {f.name: reach(f.name) for f in funcs}

    def is_recursive_call(self, caller: str, callee: str) -> bool:
        """True when *callee* can call back into *caller* (so the caller's frame must be saved)."""
        return caller in self.reach.get(callee, ()) or caller == callee

    def _symbols_used(self, funcs: list[Function]) -> set[str]:
        used = set()

        def scan(o):
            if isinstance(o, Sym):
                used.add(o.name)
            elif isinstance(o, Addr) and isinstance(o.base, Sym):
                used.add(o.base.name)
            elif isinstance(o, Vec | Paren):
                for x in o.items:
                    scan(x)

        for f in funcs:
            for ins in f.body:
                for o in ins.operands:
                    scan(o)
        return used

    def build_layout(self, funcs: list[Function]) -> None:
        used = self._symbols_used(funcs)
        lay = self.layout
        shared_off = 0
        extern_shared: list[Var] = []
        module_shared = {}
        for v in self.module.vars:
            if v.space == "shared" and v.name in used:
                if v.extern or v.size == 0:
                    extern_shared.append(v)
                else:
                    shared_off = _align(shared_off, v.align)
                    module_shared[v.name] = Symbol("shared", shared_off, v.size, v)
                    shared_off += v.size
        local_off = 0
        tparam_off = 0
        for f in funcs:
            syms: dict[str, Symbol] = dict(module_shared)
            for v in f.vars:
                if v.space == "shared":
                    if v.extern or v.size == 0:
                        extern_shared.append(v)
                        continue
                    shared_off = _align(shared_off, v.align)
                    syms[v.name] = Symbol("shared", shared_off, v.size, v)
                    shared_off += v.size
                elif v.space == "local":
                    local_off = _align(local_off, v.align)
                    syms[v.name] = Symbol("local", local_off, v.size, v)
                    local_off += v.size
                elif v.space == "param":
                    if v.name in syms:  # callseq params reuse the name in each scope
                        continue
                    tparam_off = _align(tparam_off, max(v.align, 8))
                    syms[v.name] = Symbol("tparam", tparam_off, v.size, v)
                    tparam_off += max(v.size, 8)
                elif v.space in ("global", "const"):
                    raise UnsupportedInstructionError(
                        f"line {v.line}: .{v.space} variable {v.name} declared inside a function"
                    )
            if f.is_entry:
                koff = 0
                for p in f.params:
                    koff = _align(koff, p.align)
                    lay.kparam_offsets.append(koff)
                    syms[p.name] = Symbol("kparam", koff, p.size)
                    koff += p.size
                lay.kparam_size = koff
            else:
                for p in f.params + f.rets:
                    tparam_off = _align(tparam_off, max(p.align, 8))
                    syms[p.name] = Symbol("tparam", tparam_off, p.size)
                    tparam_off += max(p.size, 8)
            self.func_syms[f.name] = syms
        align = max([v.align for v in extern_shared] + [16])
        lay.dyn_shared_align = align
        lay.shared_static = shared_off
        dyn_addr = _align(shared_off, align)
        for f in funcs:
            for v in extern_shared:
                self.func_syms[f.name][v.name] = Symbol("shared", dyn_addr, 0, v)
        lay.local_size = local_off
        lay.tparam_size = tparam_off

    def symbol(self, name: str) -> Symbol:
        s = self.func_syms[self.cur_fn.name].get(name)
        if s is None:
            s = self.global_syms.get(name)
        if s is None:
            raise self.error(f"unknown symbol {name!r}")
        return s

    # ------------------------------------------------------------ registers

    def reg_slot(self, name: str) -> int:
        fn = self.cur_fn
        key = (fn.name, name)
        slot = self.reg_slots.get(key)
        if slot is None:
            t = fn.regs.get(name)
            if t is None:
                raise self.error(f"undeclared register {name}")
            w = nm.type_width(t)
            if w == 1:
                dt = np.dtype(np.bool_)
            elif w in nm.UINT:
                dt = nm.UINT[w]
            else:
                raise self.unsupported(f"register {name} of type .{t}")
            slot = len(self.reg_dtypes)
            self.reg_slots[key] = slot
            self.reg_dtypes.append(dt)
            self.reg_types.append(t)
        return slot

    def hidden_slot(self, dt: np.dtype, tag: str) -> int:
        key = ("", tag)
        slot = self.reg_slots.get(key)
        if slot is None:
            slot = len(self.reg_dtypes)
            self.reg_slots[key] = slot
            self.reg_dtypes.append(np.dtype(dt))
            self.reg_types.append(tag)
        return slot

    # ------------------------------------------------------------ operands

    def _check_size(self, name: str, sdt: np.dtype, dt: np.dtype, t: str, relaxed: bool) -> None:
        """PTX ISA (Operand Size Exceeding Instruction-Type Size): a register must have the
        size of its operand's type (no automatic conversion; ptxas: "Arguments mismatch"),
        except that ld, st and cvt (*relaxed*) take registers wider than the type."""
        if sdt.itemsize == dt.itemsize or (relaxed and sdt.itemsize > dt.itemsize):
            return
        raise self.error(
            f"register {name} is {sdt.itemsize * 8}-bit, the .{t} operand needs "
            f"{dt.itemsize * 8} bits{' or more' if relaxed else ''}"
        )

    def reader(self, op, t: str, relaxed: bool = False) -> Reader:
        """A closure ``(st, idx) -> values`` reading operand *op* as PTX type *t*; *relaxed*
        (ld, st, cvt) lets the register be wider than *t* (its low bits are read)."""
        dt = nm.np_dtype(t)
        if isinstance(op, Sym) and op.name in self.cur_fn.regs:  # e.g. `.reg .pred __$temp3;`
            op = Reg(op.name)
        if isinstance(op, Reg):
            if op.neg:
                if t != "pred":
                    raise self.error("negation of a non-predicate operand")
                r = self.reader(Reg(op.name), "pred")
                return lambda st, idx: ~r(st, idx)
            if is_special(op.name):
                return self._special_reader(op.name, dt)
            slot = self.reg_slot(op.name)
            sdt = self.reg_dtypes[slot]
            if t == "pred" or sdt == np.bool_:
                if t != "pred" or sdt != np.bool_:
                    if sdt == np.bool_:  # predicate read as integer
                        return lambda st, idx: st.regs[slot][idx].astype(dt)
                    raise self.error(f"register {op.name} used as a predicate")
                return lambda st, idx: st.regs[slot][idx]
            self._check_size(op.name, sdt, dt, t, relaxed)
            if sdt.itemsize == dt.itemsize:
                if sdt == dt:
                    return lambda st, idx: st.regs[slot][idx]
                return lambda st, idx: st.regs[slot][idx].view(dt)
            udt = nm.UINT[dt.itemsize * 8]
            return lambda st, idx: st.regs[slot][idx].astype(udt).view(dt)
        if isinstance(op, Imm | FImm):
            return _const_reader(self._imm_value(op, t))
        if isinstance(op, Sym):
            s = self.symbol(op.name)
            if s.space == "tparam":
                raise self.unsupported("taking the address of a .param variable of a .func")
            addr = s.addr
            if s.space in ("global", "const"):
                addr = s.addr
            return _const_reader(np.array(addr & ((1 << (8 * dt.itemsize)) - 1)).astype(dt))
        if isinstance(op, Sink):
            raise self.error("sink '_' used as a source")
        raise self.error(f"unexpected operand {op!r}")

    def _imm_value(self, op, t: str) -> np.ndarray:
        dt = nm.np_dtype(t)
        w, kind = nm.TYPES[t]
        if isinstance(op, FImm):
            if kind == "f" and t in ("f32", "f64", "f16"):
                return np.array(op.value, np.float64).astype(dt)
            if op.width == 32 and w == 32:
                return np.array(op.value, np.float32).view(np.uint32).astype(dt)
            if op.width == 64 and w == 64:
                return np.array(op.value, np.float64).view(np.uint64).astype(dt)
            if t == "bf16" or t == "tf32":
                return np.array(op.value, np.float64).astype(np.float32)
            raise self.error(f"float immediate for .{t} operand")
        v = op.value
        if kind == "p":
            return np.array(bool(v))
        if t in ("f32", "f64", "f16"):
            return np.array(float(v), dt)
        if w == 128:
            raise self.unsupported("128-bit immediates")
        v &= (1 << w) - 1
        return np.array(v, nm.UINT[w]).view(dt) if w >= 8 else np.array(v, np.uint8).view(dt)

    def _special_reader(self, name: str, dt: np.dtype) -> Reader:
        base = name.split(".")[0]
        if base not in SPECIAL_REGS:
            raise self.unsupported(f"special register {name}")

        def rd(st, idx):
            v = st.special(name)
            if isinstance(v, np.ndarray) and v.ndim:
                v = v[idx]
            return np.asarray(v).astype(dt)

        return rd

    def writer(self, op, t: str, relaxed: bool = False) -> Writer:
        """A closure ``(st, idx, values)`` writing values of PTX type *t* to register *op*;
        *relaxed* (ld, cvt) lets the register be wider than *t* (sign-extended for .s types,
        zero-extended otherwise)."""
        if isinstance(op, Sink):
            return lambda st, idx, v: None
        if isinstance(op, Sym) and op.name in self.cur_fn.regs:  # register named without '%'
            op = Reg(op.name)
        if not isinstance(op, Reg) or op.neg or is_special(op.name):
            raise self.error(f"destination {op!r} is not a writable register")
        slot = self.reg_slot(op.name)
        sdt = self.reg_dtypes[slot]
        dt = nm.np_dtype(t)
        if sdt == np.bool_ or t == "pred":
            if not (sdt == np.bool_ and t == "pred"):
                raise self.error(f"type mismatch writing .{t} to {op.name}")

            def wp(st, idx, v):
                st.regs[slot][idx] = v

            return wp
        self._check_size(op.name, sdt, dt, t, relaxed)
        if sdt.itemsize == dt.itemsize:

            def w_same(st, idx, v):
                st.regs[slot][idx] = np.asarray(v).astype(dt, copy=False).view(sdt)

            return w_same
        # a wider register (relaxed): .s types sign-extend, the others zero-extend
        if nm.TYPES[t][1] == "s":
            wide = nm.SINT[sdt.itemsize * 8]

            def w_sext(st, idx, v):
                st.regs[slot][idx] = np.asarray(v).astype(dt, copy=False).astype(wide).view(sdt)

            return w_sext
        udt = nm.UINT[dt.itemsize * 8]

        def w_zext(st, idx, v):
            st.regs[slot][idx] = np.asarray(v).astype(dt, copy=False).view(udt).astype(sdt)

        return w_zext

    # ------------------------------------------------------------ compile

    def compile(self) -> list[Op]:
        from tileopt.emulator import ops as semantics

        funcs = self._collect_functions()
        self.build_layout(funcs)
        for i, f in enumerate(funcs):
            self.funcs[f.name] = i
        # first pass: entry pcs (one Op per instruction, plus one after each call)
        pc = 0
        label_pc: dict[tuple[str, str], int] = {}
        for f in funcs:
            self.func_entry[f.name] = pc
            idx_to_pc = []
            for ins in f.body:
                idx_to_pc.append(pc)
                pc += 2 if ins.opcode.split(".")[0] == "call" else 1
            idx_to_pc.append(pc)
            pc += 1  # implicit return at the end of the body
            for lab, k in f.labels.items():
                label_pc[(f.name, lab)] = idx_to_pc[k]
        self.label_pc = label_pc
        for f in funcs:
            self.cur_fn = f
            for ins in f.body:
                self.cur_ins = ins
                for op in semantics.compile_instruction(self, ins):
                    if ins.guard is not None:
                        if is_special(ins.guard.name):
                            raise self.error("special register as guard")
                        op.guard = self.reg_slot(ins.guard.name)
                        if self.reg_dtypes[op.guard] != np.bool_:
                            raise self.error(f"guard {ins.guard.name} is not a predicate")
                        op.guard_neg = ins.guard.neg
                    self.ops.append(op)
            end = Instruction(
                f.body[-1].line if f.body else f.line, "ret (end of function)", "ret", []
            )
            self.ops.append(
                Op(
                    EXIT if f.is_entry else RET,
                    end,
                    "branch",
                    func=self.funcs[f.name],
                    counted=False,
                )
            )
        assert len(self.ops) == pc, (len(self.ops), pc)
        _mark_spin_loops(self.ops)
        for fname, info in self.frame_info.items():
            info["slots"] = [slot for (fn_, _), slot in self.reg_slots.items() if fn_ == fname]
            syms = self.func_syms[fname]
            info["tparam"] = sorted(
                {(s.addr, max(s.size, 1)) for s in syms.values() if s.space == "tparam"}
            )
            info["local"] = sorted(
                {(s.addr, s.size) for s in syms.values() if s.space == "local" and s.size}
            )
            info["retslot"] = self.funcs[fname]
        return self.ops

    def label(self, name: str) -> int:
        pc = self.label_pc.get((self.cur_fn.name, name))
        if pc is None:
            raise self.error(f"unknown label {name!r}")
        return pc


_POLLING = (".volatile", ".relaxed", ".acquire", "atom.", "red.", "nanosleep", "mbarrier")


def _mark_spin_loops(ops: list[Op]) -> None:
    """Flag backward branches whose loop polls memory: candidates for spin-waits."""
    for pc, op in enumerate(ops):
        if op.kind == BRA and op.target <= pc:
            body = ops[op.target : pc + 1]
            op.spin_loop = any(any(m in o.ins.opcode + "." for m in _POLLING) for o in body)
            op.wait_loop = any(
                o.ins.opcode.startswith("mbarrier.")
                and ("test_wait" in o.ins.opcode or "try_wait" in o.ins.opcode)
                for o in body
            )


def _const_reader(v: np.ndarray) -> Reader:
    v = v[()] if isinstance(v, np.ndarray) else v
    return lambda st, idx: v


def _align(x: int, a: int) -> int:
    a = max(a, 1)
    return (x + a - 1) // a * a


def global_symbols(module: Module) -> tuple[dict[str, Symbol], int, list[tuple[Var, int]]]:
    """Place module .global/.const variables in the global window.

    Returns (symbols, end offset, placements).
    """
    syms: dict[str, Symbol] = {}
    off = 0x1000
    placed = []
    for v in module.vars:
        if v.space in ("global", "const"):
            if v.extern and v.size == 0:
                raise UnsupportedInstructionError(
                    f"line {v.line}: extern .{v.space} variable {v.name}"
                )
            off = _align(off, max(v.align, 256))
            syms[v.name] = Symbol(v.space, GLOBAL_BASE + off, v.size, v)
            placed.append((v, off))
            off += v.size + 256
        elif v.space == "local":
            raise UnsupportedInstructionError(
                f"line {v.line}: module-scope .local variable {v.name}"
            )
    return syms, off, placed


__all__ = [
    "BAR",
    "BRA",
    "BRX",
    "CALL",
    "EXIT",
    "PLAIN",
    "RET",
    "TRAP",
    "Compiler",
    "Op",
]
