"""A structural generator of random tile programs, with a numpy reference for each.

``generate(seed, index)`` deterministically makes one :class:`Program`: MLIR text (tile
dialect + arith/math/scf/memref), the arrays to launch it with, the grid, the compile options
(target, num_warps, promises, start stage) and, for programs that are valid, the expected
contents of every array after the launch with a per-element error bound.

The reference is computed alongside generation: every generated op is a Python closure that
evaluates it on numpy values for one program of the grid. A value carries its exact result
(float64 for floats, Python ints in object arrays for integers, wrapped to their width) and
an error bound per element: rounding (unit roundoff of the element type at each op, a few ulps
for math functions, the summation bound for reductions and dots) accumulates through the ops,
and an element whose result is ill-conditioned (a compare, a float->int cast or an argmax whose
operands are closer than their error, an overflow) gets the bound ``inf``: it is not checked.
So the generator may freely produce any op the dialect allows; only undefined behaviour
(integer division by zero, shifts past the width) is avoided by construction.

Program kinds:
- ``valid``: must compile and match the reference (or be rejected with a diagnostic, which
  the harness reports separately as ``unsupported``).
- ``layout``: an elementwise/reduce program with explicit ``#tile.blocked`` layouts compiled with
  ``start="tilegpu"``; valid layouts must compile and match, invalid ones must be diagnosed.
- ``mutant``: a valid program mutated into invalid IR; it must get a diagnostic.
- ``huge``: a valid program with very large tiles: compiled only (a diagnostic is fine).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i1", "i8", "i16", "i32", "i64")
DTYPES = INTS + FLOATS
# fp8: only loaded for dots (tile.dot is their one arithmetic), never in the pool of values.
FP8 = ("f8E4M3FN", "f8E5M2")
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16, "f32": 32,
        "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}
EPS = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 2.0**-53}
# Relative error allowed for math functions (libdevice / approximate instructions).
MATH_EPS = {"f16": 2.0**-9, "bf16": 2.0**-6, "f32": 2.0**-19, "f64": 2.0**-48}
TINY = {"f16": 6.2e-5, "bf16": 1.2e-38, "f32": 1.2e-38, "f64": 2.3e-308}
FMAX = {"f16": 65504.0, "bf16": 3.38e38, "f32": 3.4e38, "f64": 1.79e308}
TARGETS = ("sm_80", "sm_90", "sm_90a")
DOT_SIZES = (1, 2, 8, 16, 16, 32, 64)
# Features to leave out while hunting for other bugs (fuzzrun --avoid): "negative-offsets",
# "rank0" (0-d tiles and views), "layout-rank" (layouts of the wrong rank).
AVOID: set[str] = set(filter(None, os.environ.get("TILEOPT_FUZZ_AVOID", "").split(",")))


def _nonneg(v: int) -> int:
    return max(v, 0) if "negative-offsets" in AVOID else v


def is_float(d: str) -> bool:
    return d in FLOATS or d in FP8


def wrap(x: Any, bits: int) -> Any:
    """Python ints (or an object array of them) wrapped to a signed ``bits``-bit integer."""
    half = 1 << (bits - 1)
    return (x + half) % (1 << bits) - half


def unsigned(x: Any, bits: int) -> Any:
    return x % (1 << bits)


# ---------------------------------------------------------------------------------------------
# values


@dataclass
class V:
    """A reference value: ``a`` (float64 array, or object array of ints), ``e`` (error bound)."""

    a: Any
    e: Any

    def __post_init__(self) -> None:
        self.a = np.asarray(self.a)
        if self.a.dtype.kind in "iub":  # integers as Python ints: exact, no overflow
            self.a = self.a.astype(object)
        self.e = np.asarray(self.e, dtype=np.float64)

    @staticmethod
    def exact(a: Any) -> V:
        a = np.asarray(a)
        return V(a, np.zeros(a.shape))


def _nan_inf(e: np.ndarray) -> np.ndarray:
    e = np.asarray(e, dtype=np.float64)
    return np.where(np.isnan(e), np.inf, e)


def rounded(r: np.ndarray, e: np.ndarray, d: str) -> V:
    """The result ``r`` of an op in type ``d`` with propagated error ``e``: adds one rounding
    and marks overflowing elements as unchecked."""
    with np.errstate(all="ignore"):
        r = np.asarray(r, dtype=np.float64)
        e = _nan_inf(e + EPS[d] * np.abs(r) + TINY[d])
        bad = ~np.isfinite(r) | (np.abs(r) + e > FMAX[d] / 4)
        return V(np.where(bad, 0.0, r), np.where(bad, np.inf, e))


@dataclass(frozen=True)
class Ty:
    """A tile type (``shape`` a tuple, ``()`` for rank 0) or a scalar (``shape`` None)."""

    shape: tuple[int, ...] | None
    dtype: str

    def mlir(self, enc: str = "") -> str:
        if self.shape is None:
            return self.dtype
        dims = "".join(f"{s}x" for s in self.shape)
        return f"tensor<{dims}{self.dtype}{', ' + enc if enc else ''}>"

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


def view_type(rank: int, dtype: str, contiguous: bool = False) -> str:
    if rank == 0:
        return f"memref<{dtype}, strided<[], offset: ?>>"
    strides = ["?"] * rank
    if contiguous:
        strides[-1] = "1"
    return f"memref<{'?x' * rank}{dtype}, strided<[{', '.join(strides)}], offset: ?>>"


@dataclass
class Arg:
    name: str  # the SSA name, e.g. "%arg0"
    kind: str  # "in", "out" (views) or "scalar"
    dtype: str
    rank: int = 0
    shape: tuple[int, ...] = ()
    value: Any = None  # scalars: the Python number; views: the exact contents (numpy)
    layout: str = "contiguous"  # how the array is laid out in memory
    vtype: str = ""  # the memref type


@dataclass
class Program:
    seed: int
    index: int
    kind: str  # valid | layout | mutant | huge
    text: str
    args: list[Arg]
    grid: tuple[int, int, int]
    options: dict[str, Any]
    expect: str  # "ok" (must compile and match) or "invalid" (must be diagnosed)
    run: bool = True
    # Per output argument index: (expected float64/object array, error bound array).
    expected: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    note: str = ""

    def snippet(self) -> str:
        """A Python reproducer."""
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        avoid = ",".join(sorted(AVOID))
        return (
            "import os, sys; sys.path.insert(0, 'test/python/fuzz')  # run from the repo root\n"
            f"os.environ['TILEOPT_FUZZ_AVOID'] = {avoid!r}\n"
            "import tileopt, fuzzgen, fuzzrun\n"
            f"p = fuzzgen.generate({self.seed}, {self.index})\n"
            f"k = tileopt.compile(open('program.mlir').read(), {opts})\n"
            "args = fuzzrun.make_arrays(p)\n"
            f"k.launch({self.grid}, *args, device='emulator')\n"
            "print(fuzzrun.check(p, args))\n"
        )


# ---------------------------------------------------------------------------------------------
# the generator


class Env(dict):
    """SSA name -> reference value for one program of the grid."""


Stmt = tuple[list[str], Callable[[Env, dict], None]]


class Gen:
    """Builds one kernel: ``self.body`` holds statements (MLIR lines + an evaluation closure)."""

    def __init__(self, rng: random.Random, tile_cap: int = 2048, enc: Callable | None = None):
        self.rng = rng
        self.n = 0
        self.args: list[Arg] = []
        self.body: list[Stmt] = []
        self.tile_cap = tile_cap
        self.enc = enc  # tensor type -> encoding text, for layout programs
        self.pool: list[tuple[str, Ty]] = []
        self.index_consts: dict[int, str] = {}
        self.nprog = 1

    # -- helpers ---------------------------------------------------------------------------
    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def t(self, ty: Ty) -> str:
        return ty.mlir(self.enc(ty) if self.enc and ty.shape else "")

    def emit(self, lines: list[str] | str, fn: Callable[[Env, dict], None]) -> None:
        self.body.append(([lines] if isinstance(lines, str) else lines, fn))

    def add(self, name: str, ty: Ty) -> str:
        self.pool.append((name, ty))
        return name

    def const_index(self, v: int) -> str:
        name = self.fresh()
        self.emit(f"{name} = arith.constant {v} : index", lambda env, _: env.__setitem__(name, v))
        return name

    def index_op(self, op: str, a: str, b: str) -> str:
        name = self.fresh()
        f = {"addi": lambda x, y: x + y, "muli": lambda x, y: x * y, "subi": lambda x, y: x - y}[op]
        self.emit(f"{name} = arith.{op} {a}, {b} : index",
                  lambda env, _: env.__setitem__(name, f(env[a], env[b])))
        return name

    def shape(self, rank: int, cap: int | None = None) -> tuple[int, ...]:
        cap = cap or self.tile_cap
        while True:
            s = tuple(self.rng.choice([1, 1, 2, 4, 8, 16, 32, 64, 128, 256]) for _ in range(rank))
            if int(np.prod(s)) <= cap:
                return s

    def dtype(self) -> str:
        return self.rng.choice(DTYPES + ("f32", "f32", "i32", "f16"))

    # -- values of a type ------------------------------------------------------------------
    def random_values(self, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
        r = self.rng
        nrng = np.random.default_rng(r.getrandbits(32))
        if dtype == "i1":
            return nrng.integers(0, 2, shape).astype(bool)
        if not is_float(dtype):
            bits = BITS[dtype]
            style = r.random()
            if style < 0.5:
                vals = nrng.integers(-20, 21, shape)
            elif bits < 64:
                vals = nrng.integers(-(1 << (bits - 1)), 1 << (bits - 1), shape)
            else:
                vals = nrng.integers(-(1 << 62), 1 << 62, shape) * 2 + nrng.integers(0, 2, shape)
            return vals.astype(f"int{bits}")
        vals = nrng.standard_normal(shape) * r.choice([0.5, 1.0, 2.0])
        if r.random() < 0.2:  # small integers: exact in every float type
            vals = np.round(vals * 4)
        return quantize(vals, dtype)

    # -- kernel arguments ------------------------------------------------------------------
    def new_arg(self, kind: str, dtype: str, rank: int = 0, shape: tuple[int, ...] = ()) -> Arg:
        a = Arg(f"%arg{len(self.args)}", kind, dtype, rank, shape)
        if kind == "scalar":
            if is_float(dtype):
                a.value = float(quantize(np.array(self.rng.uniform(-2, 2)), dtype))
            elif dtype == "i1":
                a.value = self.rng.random() < 0.5
            else:
                a.value = self.rng.randint(-50, 50)
            a.vtype = dtype
        else:
            a.value = self.random_values(dtype, shape)
            a.layout = self.rng.choice(["contiguous", "contiguous", "transposed", "strided",
                                        "padded"])
            a.vtype = view_type(rank, dtype)
        self.args.append(a)
        return a

    def view_shape(self, rank: int, tile: tuple[int, ...], nprog: int = 1,
                   dim: int = -1) -> tuple[int, ...]:
        out = []
        for d in range(rank):
            t = tile[d] * (nprog if d == dim else 1)
            c = self.rng.random()
            if c < 0.15:
                s = 1
            elif c < 0.3:
                s = self.rng.choice([37, 1000 if rank == 1 else 37, 3, 5, 17])
            elif c < 0.6:
                s = t
            else:
                s = self.rng.randint(1, t + 3)
            out.append(s)
        while int(np.prod(out)) > 200_000:
            out[out.index(max(out))] //= 2
        return tuple(out)

    # -- program id and offsets ------------------------------------------------------------
    def linear_pid(self, grid: tuple[int, int, int]) -> str:
        """The program's linear index pid0 + n0 * (pid1 + n1 * pid2), from program_id and
        num_programs."""
        pids = []
        for d in range(3):
            name = self.fresh()
            self.emit(f"{name} = tile.program_id {{dim = {d}}}",
                      lambda env, ctx, name=name, d=d: env.__setitem__(name, ctx["pid"][d]))
            pids.append(name)
        nps = []
        for d in range(2):
            name = self.fresh()
            self.emit(f"{name} = tile.num_programs {{dim = {d}}}",
                      lambda env, ctx, name=name, d=d: env.__setitem__(name, ctx["grid"][d]))
            nps.append(name)
        inner = self.index_op("addi", pids[1], self.index_op("muli", nps[1], pids[2]))
        return self.index_op("addi", pids[0], self.index_op("muli", nps[0], inner))

    def dim(self, view: Arg, d: int) -> str:
        name = self.fresh()
        c = self.const_index(d)
        self.emit(f"{name} = memref.dim {view.name}, {c} : {view.vtype}",
                  lambda env, _: env.__setitem__(name, view.shape[d]))
        return name

    def load_offsets(self, view: Arg, tile: tuple[int, ...], lin: str, dim: int) -> list[str]:
        offs = []
        for d in range(view.rank):
            c = self.rng.random()
            if d == dim:
                base = self.index_op("muli", lin, self.const_index(tile[d]))
                shift = _nonneg(self.rng.choice([0, 0, 0, -1, 1, -tile[d] // 2, 3]))
                offs.append(self.index_op("addi", base, self.const_index(shift)) if shift
                            else base)
            elif c < 0.5:
                offs.append(self.const_index(0))
            elif c < 0.7:
                offs.append(self.const_index(_nonneg(self.rng.choice([-tile[d], -1, 1, 5, 40]))))
            elif "negative-offsets" in AVOID:
                offs.append(self.const_index(0))
            else:  # the last tile of the view: dim - T (maybe negative)
                offs.append(self.index_op("subi", self.dim(view, d), self.const_index(tile[d])))
        return offs

    # -- ops -------------------------------------------------------------------------------
    def load(self, lin: str, shape: tuple[int, ...] | None = None, dtype: str | None = None,
             view: Arg | None = None) -> str:
        rank = len(shape) if shape is not None else self.rng.choice([0, 1, 1, 2, 2, 2, 3])
        if rank == 0 and "rank0" in AVOID:
            rank = 1
        shape = shape if shape is not None else self.shape(rank)
        dtype = dtype or self.dtype()
        dim = self.rng.randrange(rank) if rank else -1
        if view is None:
            view = self.new_arg("in", dtype, rank, self.view_shape(rank, shape, self.nprog, dim))
        offs = self.load_offsets(view, shape, lin, dim)
        ty = Ty(shape, dtype)
        pad_attr, pad = "", 0
        if self.rng.random() < 0.4:
            pad_attr, pad = padding_attr(dtype, self.rng)
        name = self.fresh()

        def run(env: Env, _: dict) -> None:
            src = view.value
            o = [env[x] for x in offs]
            out = np.full(shape, pad, dtype=object if not is_float(dtype) else np.float64)
            idx = np.indices(shape) if shape else np.zeros((0,), dtype=int)
            pos = [idx[d] + o[d] for d in range(len(shape))]
            ok = np.ones(shape, dtype=bool)
            for d in range(len(shape)):
                ok &= (pos[d] >= 0) & (pos[d] < src.shape[d])
            if len(shape) == 0:
                out = np.array(to_ref(src[()], dtype), dtype=out.dtype)
            else:
                sel = tuple(np.where(ok, p, 0) for p in pos)
                vals = to_ref(src[sel], dtype)
                out = np.where(ok, vals, out)
            env[name] = V.exact(out)

        self.emit(f"{name} = tile.load {view.name}[{', '.join(offs)}]{pad_attr} : {view.vtype}"
                  f" -> {self.t(ty)}", run)
        return self.add(name, ty)

    def constant(self, ty: Ty) -> str:
        name = self.fresh()
        d = ty.dtype
        if is_float(d):
            v = float(quantize(np.array(self.rng.choice([0.0, 1.0, -1.5, 0.25, 3.0,
                                                           self.rng.uniform(-3, 3)])), d))
            lit = float_literal(v)
        elif d == "i1":
            v = self.rng.choice([0, -1])
            lit = "true" if v else "false"
        else:
            v = self.rng.choice([0, 1, -1, 7, 100, -(1 << (BITS[d] - 1)), (1 << (BITS[d] - 1)) - 1])
            lit = str(v)
        if ty.shape is None:
            text = f"{name} = arith.constant {lit}" + ("" if d == "i1" else f" : {d}")
        else:
            text = f"{name} = arith.constant dense<{lit}> : {self.t(ty)}"
        self.emit(text, lambda env, _: env.__setitem__(
            name, V.exact(np.full(ty.shape or (), v, dtype=np.float64 if is_float(d) else object))))
        return name

    def splat(self, ty: Ty) -> str:
        """A tile of ``ty`` from a scalar: a kernel argument or a constant."""
        if self.rng.random() < 0.5:
            a = self.new_arg("scalar", ty.dtype)
            src = a.name
            val = to_ref(np.array(a.value), ty.dtype)
            if not is_float(ty.dtype) and ty.dtype != "i1":
                val = wrap(np.array(int(a.value), dtype=object), BITS[ty.dtype])
            if ty.dtype == "i1":
                val = np.array(-1 if a.value else 0, dtype=object)
            self.emit([], lambda env, _: env.__setitem__(src, V.exact(val)))
        else:
            src = self.constant(Ty(None, ty.dtype))
        name = self.fresh()
        self.emit(f"{name} = tile.splat {src} : {ty.dtype} -> {self.t(ty)}",
                  lambda env, _: env.__setitem__(
                      name, V(np.broadcast_to(env[src].a, ty.shape).copy(),
                              np.broadcast_to(env[src].e, ty.shape).copy())))
        return self.add(name, ty)

    def iota(self, n: int) -> str:
        name = self.fresh()
        ty = Ty((n,), "i32")
        self.emit(f"{name} = tile.iota : {self.t(ty)}", lambda env, _: env.__setitem__(
            name, V.exact(np.arange(n).astype(object))))
        return self.add(name, ty)

    def pick(self, pred: Callable[[Ty], bool] = lambda t: True) -> tuple[str, Ty] | None:
        c = [p for p in self.pool if pred(p[1])]
        if not c:
            return None
        # Prefer recent values, so chains get deep.
        return c[-1] if self.rng.random() < 0.4 else self.rng.choice(c)

    def like(self, ty: Ty) -> str:
        """A value of type ``ty``: from the pool, by broadcast or cast, or a new splat."""
        got = self.pick(lambda t: t == ty)
        if got and self.rng.random() < 0.7:
            return got[0]
        got = self.pick(lambda t: t.shape == ty.shape)
        if got and self.rng.random() < 0.5:
            return self.cast(got[0], got[1], ty.dtype)
        if ty.shape and self.rng.random() < 0.4:
            r = self.rng.randrange(len(ty.shape))
            small = Ty(tuple(1 if d == r else s for d, s in enumerate(ty.shape)), ty.dtype)
            src = self.pick(lambda t: t == small)
            src_name = src[0] if src else self.splat(small)
            return self.broadcast(src_name, small, ty)
        return self.splat(ty)

    def elementwise(self) -> None:
        got = self.pick(lambda t: t.shape is not None)
        if got is None:
            return
        a, ty = got
        d = ty.dtype
        if is_float(d):
            op = self.rng.choice(["addf", "subf", "mulf", "divf", "maximumf", "minimumf", "negf",
                                  "exp", "tanh", "sin", "cos", "sqrt", "log1p", "erf", "absf",
                                  "floor", "cmpf", "select", "addf", "mulf"])
        else:
            op = self.rng.choice(["addi", "subi", "muli", "andi", "ori", "xori", "maxsi",
                                  "minsi", "maxui", "minui", "divsi", "remsi", "divui", "remui",
                                  "shli", "shrsi", "shrui", "cmpi", "select", "addi"])
        if op in ("addf", "subf", "mulf", "maximumf", "minimumf", "addi", "subi", "muli", "andi",
                  "ori", "xori", "maxsi", "minsi", "maxui", "minui"):
            b = self.like(ty)
            self.binary(op, a, b, ty)
        elif op == "divf":
            b = self.like(ty)
            den = self.binary("addf", self.unary("absf", b, ty), self.splat_const(ty, 1.0), ty)
            self.binary("divf", a, den, ty)
        elif op in ("negf", "exp", "tanh", "sin", "cos", "absf", "erf", "floor"):
            self.unary(op, a, ty)
        elif op == "sqrt":
            self.unary("sqrt", self.unary("absf", a, ty), ty)
        elif op == "log1p":
            self.unary("log1p", self.unary("absf", a, ty), ty)
        elif op in ("divsi", "remsi", "divui", "remui"):
            if d == "i1":
                return
            b = self.like(ty)
            den = self.binary("ori", self.binary("andi", b, self.splat_const(ty, 7), ty),
                              self.splat_const(ty, 1), ty)
            self.binary(op, a, den, ty)
        elif op in ("shli", "shrsi", "shrui"):
            if d == "i1":
                return
            b = self.like(ty)
            # Mostly in range; else any amount (outside [0, bits): torch's 0 or sign).
            amt = b if self.rng.random() < 0.25 else self.binary(
                "andi", b, self.splat_const(ty, BITS[d] - 1), ty)
            self.binary(op, a, amt, ty)
        elif op in ("cmpf", "cmpi"):
            b = self.like(ty)
            preds = (["oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une", "ult", "uge"]
                     if op == "cmpf" else
                     ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"])
            self.compare(op, self.rng.choice(preds), a, b, ty)
        elif op == "select":
            c = self.like(Ty(ty.shape, "i1"))
            b = self.like(ty)
            self.select(c, a, b, ty)

    def splat_const(self, ty: Ty, v: float) -> str:
        name = self.fresh()
        lit = float_literal(v) if is_float(ty.dtype) else str(int(v))
        self.emit(f"{name} = arith.constant dense<{lit}> : {self.t(ty)}",
                  lambda env, _: env.__setitem__(name, V.exact(
                      np.full(ty.shape, v, dtype=np.float64 if is_float(ty.dtype) else object))))
        return name

    def binary(self, op: str, a: str, b: str, ty: Ty) -> str:
        name = self.fresh()
        d = ty.dtype

        def run(env: Env, _: dict) -> None:
            x, y = env[a], env[b]
            with np.errstate(all="ignore"):
                if is_float(d):
                    xa, ya, xe, ye = x.a, y.a, x.e, y.e
                    if op in ("addf", "subf"):
                        r = xa + ya if op == "addf" else xa - ya
                        env[name] = rounded(r, xe + ye, d)
                    elif op == "mulf":
                        env[name] = rounded(xa * ya, np.abs(xa) * ye + np.abs(ya) * xe + xe * ye, d)
                    elif op == "divf":
                        r = xa / ya
                        lo = np.abs(ya) - ye
                        e = np.where(lo > 0, (xe + np.abs(r) * ye) / np.where(lo > 0, lo, 1),
                                     np.inf)
                        env[name] = rounded(r, e, d)
                    else:
                        r = np.maximum(xa, ya) if op == "maximumf" else np.minimum(xa, ya)
                        env[name] = V(r, np.maximum(xe, ye))
                else:
                    bits = BITS[d]
                    xa, ya = x.a, y.a
                    if op in ("addi", "subi", "muli", "andi", "ori", "xori"):
                        r = {"addi": lambda: xa + ya, "subi": lambda: xa - ya,
                             "muli": lambda: xa * ya, "andi": lambda: xa & ya,
                             "ori": lambda: xa | ya, "xori": lambda: xa ^ ya}[op]()
                    elif op in ("maxsi", "minsi"):
                        r = np.where((xa > ya) == (op == "maxsi"), xa, ya)
                    elif op in ("maxui", "minui"):
                        ux, uy = unsigned(xa, bits), unsigned(ya, bits)
                        r = np.where((ux > uy) == (op == "maxui"), xa, ya)
                    elif op in ("divsi", "remsi"):
                        q = np.where(xa >= 0, xa // ya, -((-xa) // ya))
                        r = q if op == "divsi" else xa - q * ya
                    elif op in ("divui", "remui"):
                        ux = unsigned(xa, bits)
                        r = ux // ya if op == "divui" else ux % ya
                    elif op in ("shli", "shrsi", "shrui"):
                        # Python integers throughout (0-d arrays give scalars that numpy
                        # would take back as int64).
                        xo = np.asarray(xa, dtype=object)
                        amount = np.asarray(unsigned(ya, bits), dtype=object)
                        inside = amount < bits
                        k = np.where(inside, amount, 0).astype(object)
                        shifted = (xo << k if op == "shli" else xo >> k if op == "shrsi"
                                   else np.asarray(unsigned(xo, bits), dtype=object) >> k)
                        fill = np.where((xo < 0) & (op == "shrsi"), -1, 0)
                        r = np.where(inside, np.asarray(shifted, dtype=object),
                                     fill.astype(object))
                    env[name] = V(wrap(np.asarray(r, dtype=object), bits), np.maximum(x.e, y.e))

        self.emit(f"{name} = arith.{op} {a}, {b} : {self.t(ty)}", run)
        return self.add(name, ty)

    def unary(self, op: str, a: str, ty: Ty) -> str:
        name = self.fresh()
        d = ty.dtype
        dialect = "arith" if op == "negf" else "math"

        def run(env: Env, _: dict) -> None:
            x = env[a]
            xa, xe = x.a, x.e
            m = MATH_EPS[d]
            with np.errstate(all="ignore"):
                if op == "negf":
                    env[name] = V(-xa, xe)
                elif op == "absf":
                    env[name] = V(np.abs(xa), xe)
                elif op == "exp":
                    r = np.exp(xa)
                    e = r * np.expm1(xe) + r * (m + np.abs(xa) * 2.0**-22)
                    env[name] = rounded(r, e, d)
                elif op in ("tanh", "sin", "cos"):
                    r = getattr(np, op)(xa)
                    env[name] = rounded(r, xe + m * np.maximum(1.0, np.abs(xa) * 0 + 1), d)
                elif op == "erf":
                    import math
                    r = np.vectorize(math.erf, otypes=[np.float64])(xa) if xa.size else xa
                    env[name] = rounded(r, 1.13 * xe + m, d)
                elif op == "sqrt":
                    r = np.sqrt(xa)
                    e = np.minimum(np.sqrt(xe), xe / np.maximum(2 * r, 1e-300))
                    env[name] = rounded(r, e + m * r, d)
                elif op == "log1p":
                    r = np.log1p(xa)
                    env[name] = rounded(r, xe + m * np.maximum(r, 1e-30) + m, d)
                elif op == "floor":
                    r = np.floor(xa)
                    bad = np.floor(xa - xe) != np.floor(xa + xe)
                    env[name] = V(r, np.where(bad, np.inf, 0.0))

        math_name = {"log1p": "log1p"}.get(op, op)
        self.emit(f"{name} = {dialect}.{math_name} {a} : {self.t(ty)}", run)
        return self.add(name, ty)

    def compare(self, op: str, pred: str, a: str, b: str, ty: Ty) -> str:
        name = self.fresh()
        rty = Ty(ty.shape, "i1")
        d = ty.dtype

        def run(env: Env, _: dict) -> None:
            x, y = env[a], env[b]
            xa, ya = x.a, y.a
            if is_float(d):
                base = pred[1:]
                r = {"eq": xa == ya, "ne": xa != ya, "lt": xa < ya, "le": xa <= ya,
                     "gt": xa > ya, "ge": xa >= ya}[base]
                exact = (x.e == 0) & (y.e == 0)
                bad = ~exact & (np.abs(xa - ya) <= (x.e + y.e) * 1.01)
                bad |= ~np.isfinite(x.e) | ~np.isfinite(y.e)
            else:
                bits = BITS[d]
                if pred[0] == "u":
                    xa, ya = unsigned(xa, bits), unsigned(ya, bits)
                base = pred[-2:]
                r = {"eq": xa == ya, "ne": xa != ya, "lt": xa < ya, "le": xa <= ya,
                     "gt": xa > ya, "ge": xa >= ya}[base]
                bad = ~np.isfinite(np.maximum(x.e, y.e))
            r = np.where(np.asarray(r, dtype=bool), -1, 0).astype(object)
            env[name] = V(r, np.where(bad, np.inf, 0.0))

        self.emit(f"{name} = arith.{op} {pred}, {a}, {b} : {self.t(ty)}", run)
        return self.add(name, rty)

    def select(self, c: str, a: str, b: str, ty: Ty) -> str:
        name = self.fresh()

        def run(env: Env, _: dict) -> None:
            cond = np.asarray(env[c].a != 0, dtype=bool)
            r = np.where(cond, env[a].a, env[b].a)
            e = np.where(cond, env[a].e, env[b].e)
            env[name] = V(r.astype(env[a].a.dtype), np.where(np.isfinite(env[c].e), e, np.inf))

        self.emit(f"{name} = arith.select {c}, {a}, {b} : {self.t(Ty(ty.shape, 'i1'))}, "
                  f"{self.t(ty)}", run)
        return self.add(name, ty)

    def cast(self, a: str, ty: Ty, dst: str) -> str:
        src = ty.dtype
        if src == dst:
            return a
        rty = Ty(ty.shape, dst)
        if is_float(src) and is_float(dst):
            if src == "bf16" and dst == "f16" or src == "f16" and dst == "bf16":
                a = self.cast(a, ty, "f32")
                return self.cast(a, Ty(ty.shape, "f32"), dst)
            op = "extf" if BITS[dst] > BITS[src] else "truncf"
        elif is_float(src):
            op = self.rng.choice(["fptosi", "fptoui"]) if dst != "i1" else "fptoui"
        elif is_float(dst):
            op = self.rng.choice(["sitofp", "uitofp"])
        else:
            op = ("extsi" if self.rng.random() < 0.5 else "extui") if BITS[dst] > BITS[src] \
                else "trunci"
        name = self.fresh()

        def run(env: Env, _: dict) -> None:
            x = env[a]
            with np.errstate(all="ignore"):
                if op == "extf":
                    env[name] = V(x.a, x.e)
                elif op == "truncf":
                    env[name] = rounded(x.a, x.e, dst)
                elif op in ("sitofp", "uitofp"):
                    v = x.a if op == "sitofp" else unsigned(x.a, BITS[src])
                    r = np.asarray(v, dtype=object).astype(np.float64)
                    # the exact integer rounded once: an error of one rounding of dst
                    env[name] = rounded(r, np.where(np.isfinite(x.e), 0.0, np.inf), dst)
                elif op in ("fptosi", "fptoui"):
                    bits = BITS[dst]
                    lo, hi = ((-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if op == "fptosi"
                              else (0.0, 2.0**bits))
                    if dst == "i1" and op == "fptoui":
                        lo, hi = 0.0, 2.0
                    t = np.trunc(x.a)
                    bad = (np.trunc(x.a - x.e) != np.trunc(x.a + x.e)) | ~np.isfinite(x.e)
                    bad |= (x.a - x.e <= lo - 1) | (x.a + x.e >= hi)
                    tv = np.where(bad, 0, t).astype(np.int64).astype(object)
                    env[name] = V(wrap(tv, bits), np.where(bad, np.inf, 0.0))
                elif op in ("extsi", "trunci"):
                    env[name] = V(wrap(x.a, BITS[dst]), x.e)
                else:  # extui
                    env[name] = V(unsigned(x.a, BITS[src]), x.e)

        self.emit(f"{name} = arith.{op} {a} : {self.t(ty)} to {self.t(rty)}", run)
        return self.add(name, rty)

    def broadcast(self, a: str, ty: Ty, rty: Ty) -> str:
        name = self.fresh()
        self.emit(f"{name} = tile.broadcast {a} : {self.t(ty)} -> {self.t(rty)}",
                  lambda env, _: env.__setitem__(name, V(
                      np.broadcast_to(env[a].a, rty.shape).copy(),
                      np.broadcast_to(env[a].e, rty.shape).copy())))
        return self.add(name, rty)

    def shape_op(self) -> None:
        got = self.pick(lambda t: t.shape is not None)
        if got is None:
            return
        a, ty = got
        shape = ty.shape
        kind = self.rng.choice(["broadcast", "expand_dims", "reshape", "permute", "cast"])
        name = self.fresh()
        if kind == "broadcast":
            if 1 not in shape:
                return
            new = tuple(s if s != 1 or self.rng.random() < 0.3 else self.rng.choice([2, 4, 16])
                        for s in shape)
            if int(np.prod(new)) > self.tile_cap:
                return
            self.broadcast(a, ty, Ty(new, ty.dtype))
            return
        if kind == "cast":
            self.cast(a, ty, self.dtype())
            return
        if kind == "expand_dims":
            if len(shape) >= 4:
                return
            ax = self.rng.randint(0, len(shape))
            rty = Ty(shape[:ax] + (1,) + shape[ax:], ty.dtype)
            text = f"{name} = tile.expand_dims {a} {{axis = {ax}}} : {self.t(ty)} -> {self.t(rty)}"
            fn = lambda env, _: env.__setitem__(name, V(np.expand_dims(env[a].a, ax),  # noqa: E731
                                                        np.expand_dims(env[a].e, ax)))
        elif kind == "reshape":
            n = ty.numel
            rank = self.rng.choice([0, 1, 2, 3])
            if rank == 0 and (n != 1 or "rank0" in AVOID):
                rank = 1
            new = split_pow2(n, rank, self.rng)
            rty = Ty(new, ty.dtype)
            text = f"{name} = tile.reshape {a} : {self.t(ty)} -> {self.t(rty)}"
            fn = lambda env, _: env.__setitem__(name, V(env[a].a.reshape(new),  # noqa: E731
                                                        env[a].e.reshape(new)))
        else:
            if len(shape) < 2:
                return
            perm = list(range(len(shape)))
            self.rng.shuffle(perm)
            rty = Ty(tuple(shape[p] for p in perm), ty.dtype)
            text = (f"{name} = tile.permute {a} {{permutation = array<i64: "
                    f"{', '.join(map(str, perm))}>}} : {self.t(ty)} -> {self.t(rty)}")
            fn = lambda env, _: env.__setitem__(name, V(np.transpose(env[a].a, perm),  # noqa: E731
                                                        np.transpose(env[a].e, perm)))
        self.emit(text, fn)
        self.add(name, rty)

    def reduce(self) -> None:
        got = self.pick(lambda t: t.shape is not None and len(t.shape) >= 1)
        if got is None:
            return
        a, ty = got
        d = ty.dtype
        ax = self.rng.randrange(len(ty.shape))
        rshape = ty.shape[:ax] + ty.shape[ax + 1:]
        scalar_result = not rshape and (self.rng.random() < 0.5 or "rank0" in AVOID)
        rty = Ty(None if scalar_result else rshape, d)
        kind = self.rng.choice(["sum", "max", "min", "argmax", "sum"])
        if d == "i1" and kind == "sum":
            kind = "max"
        name = self.fresh()
        f = is_float(d)
        if kind == "argmax":
            idx = self.iota(ty.shape[ax])
            ity1 = Ty(tuple(ty.shape[ax] if i == ax else 1 for i in range(len(ty.shape))), "i32")
            if len(ty.shape) > 1:
                idx2 = self.fresh()
                self.emit(f"{idx2} = tile.reshape {idx} : {self.t(Ty((ty.shape[ax],), 'i32'))} -> "
                          f"{self.t(ity1)}", lambda env, _, i0=idx: env.__setitem__(
                              idx2, V(env[i0].a.reshape(ity1.shape),
                                      env[i0].e.reshape(ity1.shape))))
                idx = self.broadcast(idx2, ity1, Ty(ty.shape, "i32"))
            gt = "arith.cmpf ogt" if f else "arith.cmpi sgt"
            eq = "arith.cmpf oeq" if f else "arith.cmpi eq"
            rty_i = Ty(rty.shape, "i32")
            lines = [
                f"{name}:2 = tile.reduce {a}, {idx} {{axis = {ax}}} : {self.t(ty)}, "
                f"{self.t(Ty(ty.shape, 'i32'))} -> {self.t(rty)}, {self.t(rty_i)} {{",
                f"^bb0(%a: {d}, %ai: i32, %b: {d}, %bi: i32):",
                f"  %gt = {gt}, %b, %a : {d}",
                f"  %eq = {eq}, %b, %a : {d}",
                "  %lt = arith.cmpi slt, %bi, %ai : i32",
                "  %tie = arith.andi %eq, %lt : i1",
                "  %take = arith.ori %gt, %tie : i1",
                f"  %v = arith.select %take, %b, %a : {d}",
                "  %i = arith.select %take, %bi, %ai : i32",
                f"  tile.yield %v, %i : {d}, i32",
                "}",
            ]

            def run(env: Env, _: dict) -> None:
                x = env[a]
                xa = x.a
                m = np.max(xa, axis=ax) if xa.size else xa
                em = np.max(x.e, axis=ax)
                mk = np.expand_dims(m, ax)
                if f:
                    cand = (np.abs(xa - mk) <= np.expand_dims(em, ax) * 2) & (xa == xa)
                    exact = np.all(x.e == 0, axis=ax)
                    ties = np.sum(cand, axis=ax)
                    bad = ~exact & (ties > 1)
                else:
                    bad = ~np.isfinite(em)
                i = np.argmax(xa == mk, axis=ax)
                env[name + "#0"] = V(np.asarray(m), np.asarray(em))
                env[name + "#1"] = V(np.asarray(i).astype(object), np.where(bad, np.inf, 0.0))
            self.emit(lines, run)
            self.add(name + "#0", rty)
            self.add(name + "#1", rty_i)
            return
        if kind == "sum":
            comb = "arith.addf" if f else "arith.addi"
        elif kind == "max":
            comb = "arith.maximumf" if f else "arith.maxsi"
        else:
            comb = "arith.minimumf" if f else "arith.minsi"
        lines = [
            f"{name} = tile.reduce {a} {{axis = {ax}}} : {self.t(ty)} -> {self.t(rty)} {{",
            f"^bb0(%a: {d}, %b: {d}):",
            f"  %r = {comb} %a, %b : {d}",
            f"  tile.yield %r : {d}",
            "}",
        ]
        n = ty.shape[ax]

        def run(env: Env, _: dict) -> None:
            x = env[a]
            with np.errstate(all="ignore"):
                if kind == "sum":
                    if f:
                        r = np.sum(x.a, axis=ax)
                        e = np.sum(x.e, axis=ax) + (n - 1) * EPS[d] * np.sum(np.abs(x.a), axis=ax)
                        env[name] = rounded(r, e, d)
                    else:
                        env[name] = V(wrap(np.sum(x.a, axis=ax), BITS[d]), np.max(x.e, axis=ax))
                else:
                    fn = np.max if kind == "max" else np.min
                    env[name] = V(np.asarray(fn(x.a, axis=ax)), np.max(x.e, axis=ax))
        self.emit(lines, run)
        self.add(name, rty)

    def dot(self, lin: str, given: tuple[int, str, Ty] | None = None) -> Ty:
        """A tile.dot of random shapes and types; its type. With ``given`` = (i, name, type),
        operand i (0: lhs, 1: rhs) is that value and the result has its shape (a loop's
        carried tile, which the result may replace)."""
        d = self.rng.choice(["f16", "bf16", "f32", "f16", "f32", "i8", "fp8"])
        if d == "fp8":  # either format on either side
            d = self.rng.choice(FP8)
        m, n, k = (self.rng.choice(DOT_SIZES) for _ in range(3))
        if given:
            d = given[2].dtype
            if given[0] == 0:
                (m, k), n = given[2].shape, given[2].shape[1]
            else:
                (k, n), m = given[2].shape, given[2].shape[0]
        acc_d = "f16" if d == "f16" and self.rng.random() < 0.25 else "f32"
        if d == "i8":
            acc_d = "i32"
        tf32 = d == "f32" and self.rng.random() < 0.4
        src = [(m, k), (k, n)]
        types = [d, self.rng.choice(FP8) if d in FP8 else d]
        ops = []
        for i, s in enumerate(src):
            if given and i == given[0]:
                ops.append(given[1])
                continue
            got = self.pick(lambda t, s=s, i=i: t.shape == s and t.dtype == types[i])
            ops.append(got[0] if got and self.rng.random() < 0.5
                       else self.load(lin, s, types[i]))
        self.pool = [p for p in self.pool if p[1].dtype not in FP8]
        acc = self.like(Ty((m, n), acc_d))
        name = self.fresh()
        rty = Ty((m, n), acc_d)
        prec = " input_precision = tf32" if tf32 else ""

        def run(env: Env, _: dict) -> None:
            x, y, c = env[ops[0]], env[ops[1]], env[acc]
            if d == "i8":  # exact products, sums wrapped to i32; unchecked inputs spread
                unchecked = (np.isinf(x.e).astype(float) @ np.ones(y.e.shape)
                             + np.ones(x.e.shape) @ np.isinf(y.e).astype(float)) > 0
                env[name] = V(wrap(c.a + x.a @ y.a, 32),
                              np.where(unchecked | np.isinf(c.e), np.inf, 0.0))
                return
            with np.errstate(all="ignore"):
                r = c.a + x.a @ y.a
                mag = np.abs(x.a) @ np.abs(y.a)
                e = (c.e + x.e @ np.abs(y.a) + np.abs(x.a) @ y.e + x.e @ y.e
                     + mag * ((k + 1) * EPS[acc_d] + (2.0**-10 if tf32 else 0))
                     + np.abs(c.a) * EPS[acc_d])
                env[name] = rounded(r, e, acc_d)

        self.emit(f"{name} = tile.dot {ops[0]}, {ops[1]}, {acc}{prec} : "
                  f"{self.t(Ty((m, k), types[0]))}, {self.t(Ty((k, n), types[1]))} -> "
                  f"{self.t(rty)}", run)
        self.add(name, rty)
        return rty

    def loop(self, lin: str, depth: int) -> None:
        got = self.pick(lambda t: t.shape is not None)
        if got is None:
            return
        init, ty = got
        step = self.rng.choice([1, 2, 16, 32])
        lb = self.const_index(self.rng.choice([0, 0, 3]))
        if self.rng.random() < 0.5:
            ub = self.const_index(self.rng.choice([0, 1, 2, 3]) * step)
        else:
            v = [a for a in self.args if a.kind == "in" and a.rank >= 1]
            if not v:
                return
            view = self.rng.choice(v)
            ub = self.dim(view, self.rng.randrange(view.rank))
            while max(view.shape) // step > 4:
                step *= 2
        st = self.const_index(step)
        iv, carried, res = self.fresh(), self.fresh(), self.fresh()
        # With `off`, the loop also carries an index offset that steps by `inc` and restarts
        # at zero past `wrap` (a persistent kernel's k offset), which its load reads.
        off = self.fresh() if ty.shape and self.rng.random() < 0.3 else None
        result = f"{res}#0" if off else res  # the tile (with `off`, the loop's first result)
        inc = self.const_index(self.rng.choice([1, 2, 4, 8, 16, 32]))
        wrap = self.const_index(self.rng.choice([8, 16, 48, 64]))
        zero = self.const_index(0)
        # The body: a few ops on the carried value, outer values and loads at the iv.
        outer_body, outer_pool = self.body, list(self.pool)
        self.body = []
        self.pool = list(outer_pool) + [(carried, ty)]
        if ty.shape and self.rng.random() < (1.0 if off else 0.7):
            # a load whose offsets follow the induction variable (or the carried offset)
            rank = len(ty.shape)
            view = self.new_arg("in", ty.dtype, rank, self.view_shape(rank, ty.shape))
            offs = [(off or iv) if d == rank - 1 else self.const_index(0) for d in range(rank)]
            name = self.fresh()
            shape = ty.shape
            vw = view

            def run_load(env: Env, _: dict, name=name, offs=offs, shape=shape, vw=vw) -> None:
                o = [env[x] for x in offs]
                idx = np.indices(shape)
                pos = [idx[dd] + o[dd] for dd in range(len(shape))]
                ok = np.ones(shape, dtype=bool)
                for dd in range(len(shape)):
                    ok &= (pos[dd] >= 0) & (pos[dd] < vw.value.shape[dd])
                sel = tuple(np.where(ok, p, 0) for p in pos)
                vals = to_ref(vw.value[sel], ty.dtype)
                zero = 0.0 if is_float(ty.dtype) else 0
                env[name] = V.exact(np.where(ok, vals, zero).astype(vals.dtype))

            self.emit(f"{name} = tile.load {vw.name}[{', '.join(offs)}] : {vw.vtype} -> "
                      f"{self.t(ty)}", run_load)
            self.add(name, ty)
        if (ty.dtype in ("f16", "bf16", "f32", "i8") and len(ty.shape) == 2
                and all(s in DOT_SIZES for s in ty.shape) and self.rng.random() < 0.4):
            # a dot of the carried tile (its lhs or its rhs), whose result may replace it
            rty = self.dot(lin, (self.rng.randrange(2), carried, ty))
            self.cast(self.pool[-1][0], rty, ty.dtype)
        for _ in range(self.rng.randint(1, 4)):
            self.random_op(lin, depth + 1)
        cands = [p for p in self.pool[len(outer_pool):] if p[1] == ty]
        y = self.rng.choice(cands)[0]
        comb = ("addf" if is_float(ty.dtype) else "xori" if ty.dtype == "i1" else "addi")
        y = self.binary(comb, y, carried, ty) if y != carried else y
        if off:
            total, past, next_off = self.fresh(), self.fresh(), self.fresh()
            self.emit([f"{total} = arith.addi {off}, {inc} : index",
                       f"{past} = arith.cmpi sge, {total}, {wrap} : index",
                       f"{next_off} = arith.select {past}, {zero}, {total} : index"],
                      lambda env, _: env.__setitem__(
                          next_off, 0 if env[off] + env[inc] >= env[wrap]
                          else env[off] + env[inc]))
        body = self.body
        self.body, self.pool = outer_body, outer_pool
        tt = self.t(ty)
        if off:
            lines = [f"{res}:2 = scf.for {iv} = {lb} to {ub} step {st} iter_args({carried} = "
                     f"{init}, {off} = {zero}) -> ({tt}, index) {{"]
        else:
            lines = [f"{res} = scf.for {iv} = {lb} to {ub} step {st} iter_args({carried} = "
                     f"{init}) -> ({tt}) {{"]
        for text, _ in body:
            lines += ["  " + t for t in text]
        lines += ([f"  scf.yield {y}, {next_off} : {tt}, index", "}"] if off
                  else [f"  scf.yield {y} : {tt}", "}"])

        def run(env: Env, ctx: dict) -> None:
            cur = env[init]
            offset = 0
            i = env[lb]
            while i < env[ub]:
                env[iv] = i
                env[carried] = cur
                if off:
                    env[off] = offset
                for _, fn in body:
                    fn(env, ctx)
                cur = env[y]
                if off:
                    offset = env[next_off]
                i += env[st]
            env[result] = cur

        self.emit(lines, run)
        self.add(result, ty)

    def branch(self, lin: str, depth: int) -> None:
        """An scf.if on the program's linear index (below a constant): its then-branch runs a
        few ops and yields a tile of theirs or a constant (a restart, as a persistent
        kernel's accumulator: canonicalization makes that a select after the branch, the
        NVVM conversion moves it back in), its else-branch the tile as it was."""
        got = self.pick(lambda t: t.shape is not None)
        if got is None:
            return
        init, ty = got
        bound = self.const_index(self.rng.choice([0, 1, 2, 5]))
        cond, res = self.fresh(), self.fresh()
        self.emit(f"{cond} = arith.cmpi ult, {lin}, {bound} : index",
                  lambda env, _: env.__setitem__(cond, env[lin] < env[bound]))
        outer_body, outer_pool = self.body, list(self.pool)
        self.body = []
        for _ in range(self.rng.randint(1, 3)):
            self.random_op(lin, depth + 1)
        if self.rng.random() < 0.4:
            y = self.constant(ty)
        else:
            y = self.rng.choice([p for p in self.pool[len(outer_pool):] if p[1] == ty]
                                or [(init, ty)])[0]
        body = self.body
        self.body, self.pool = outer_body, outer_pool
        lines = [f"{res} = scf.if {cond} -> ({self.t(ty)}) {{"]
        for text, _ in body:
            lines += ["  " + t for t in text]
        lines += [f"  scf.yield {y} : {self.t(ty)}", "} else {",
                  f"  scf.yield {init} : {self.t(ty)}", "}"]

        def run(env: Env, ctx: dict) -> None:
            if env[cond]:
                for _, fn in body:
                    fn(env, ctx)
                env[res] = env[y]
            else:
                env[res] = env[init]

        self.emit(lines, run)
        self.add(res, ty)

    def random_op(self, lin: str, depth: int = 0) -> None:
        r = self.rng.random()
        if r < 0.12:
            self.load(lin)
        elif r < 0.55:
            self.elementwise()
        elif r < 0.72:
            self.shape_op()
        elif r < 0.82:
            self.reduce()
        elif r < 0.88:
            self.dot(lin)
        elif r < 0.91 and depth < 2:
            self.loop(lin, depth)
        elif r < 0.93 and depth < 2:
            self.branch(lin, depth)
        elif r < 0.96:
            self.splat(Ty(self.shape(self.rng.choice([0 if "rank0" not in AVOID else 1, 1, 2])),
                          self.dtype()))
        else:
            self.iota(self.rng.choice([1, 2, 16, 128]))

    def store(self, lin: str, name: str, ty: Ty, total: int) -> None:
        rank = len(ty.shape)
        dim = self.rng.randrange(rank) if rank else -1
        if rank == 0 and total > 1:
            return
        view = self.new_arg("out", ty.dtype, rank, self.view_shape(rank, ty.shape, total, dim))
        # Some f32 stores add into the view (atomically; programs' tiles may overlap).
        add = ty.dtype == "f32" and "store-add" not in AVOID and self.rng.random() < 0.2
        offs = []
        for d in range(rank):
            if d == dim:
                base = self.index_op("muli", lin, self.const_index(ty.shape[d]))
                shift = _nonneg(self.rng.choice([0, 0, -1, -(ty.shape[d] // 2), 2]))
                offs.append(self.index_op("addi", base, self.const_index(shift)) if shift
                            else base)
            else:
                offs.append(self.const_index(_nonneg(self.rng.choice([0, 0, -1, 3]))))

        def run(env: Env, ctx: dict) -> None:
            ref, err = ctx["out"][view.name]
            v = env[name]
            o = [env[x] for x in offs]
            if rank == 0:
                sel: Any = ()
                a, e = np.asarray(v.a), np.asarray(v.e)
            else:
                idx = np.indices(ty.shape)
                pos = [idx[d] + o[d] for d in range(rank)]
                ok = np.ones(ty.shape, dtype=bool)
                for d in range(rank):
                    ok &= (pos[d] >= 0) & (pos[d] < view.shape[d])
                sel = tuple(p[ok] for p in pos)
                a, e = np.asarray(v.a)[ok], np.asarray(v.e)[ok]
            if add:  # each add rounds its f32 sum
                ref[sel] += a
                err[sel] += e + np.abs(ref[sel]) * 2.0**-23
            else:
                ref[sel] = a
                err[sel] = e

        self.emit(f"tile.store {name}, {view.name}[{', '.join(offs)}]{' {add}' if add else ''} : "
                  f"{self.t(ty)}, {view.vtype}", run)


# ---------------------------------------------------------------------------------------------
# numbers


def quantize(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` (float64 values)."""
    import torch

    t = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
         "f64": torch.float64, "f8E4M3FN": torch.float8_e4m3fn,
         "f8E5M2": torch.float8_e5m2}[dtype]
    return torch.from_numpy(np.asarray(x, dtype=np.float64)).to(t).double().numpy()


def to_ref(x: np.ndarray, dtype: str) -> np.ndarray:
    """Array contents as reference values: float64, or object arrays of signed ints (i1: 0/-1)."""
    x = np.asarray(x)
    if is_float(dtype):
        return x.astype(np.float64)
    if dtype == "i1":
        return np.where(x.astype(bool), -1, 0).astype(object)
    return x.astype(np.int64).astype(object)


def float_literal(v: float) -> str:
    r = repr(float(v))
    return r if ("e" in r or "." in r) else r + ".0"


def padding_attr(dtype: str, rng: random.Random) -> tuple[str, Any]:
    if is_float(dtype):
        v = rng.choice([0.0, 1.0, -2.5, 0.5])
        return f" {{padding = {float_literal(v)} : {dtype}}}", v
    if dtype == "i1":
        v = rng.choice([0, -1])
        return f" {{padding = {'true' if v else 'false'}}}", v
    v = rng.choice([0, 1, -7, 42])
    return f" {{padding = {v} : {dtype}}}", v


def split_pow2(n: int, rank: int, rng: random.Random) -> tuple[int, ...]:
    if rank == 0:
        return ()
    logn = n.bit_length() - 1
    cuts = sorted(rng.randint(0, logn) for _ in range(rank - 1))
    parts = [b - a for a, b in zip([0] + cuts, cuts + [logn], strict=True)]
    return tuple(1 << p for p in parts)


# ---------------------------------------------------------------------------------------------
# programs


def _kernel_text(g: Gen) -> str:
    sig = ", ".join(f"{a.name}: {a.vtype}" for a in g.args)
    lines = [f"tile.kernel @fuzz({sig}) {{"]
    for text, _ in g.body:
        lines += ["  " + t for t in text]
    lines += ["  tile.return", "}"]
    return "\n".join(lines) + "\n"


def _evaluate(g: Gen, grid: tuple[int, int, int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for a in g.args:
        if a.kind == "out":
            out[a.name] = (to_ref(a.value, a.dtype).copy(), np.zeros(a.shape))
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                env = Env()
                for a in g.args:
                    if a.kind == "scalar":
                        env[a.name] = a.value
                ctx = {"pid": (x, y, z), "grid": grid, "out": out}
                for _, fn in g.body:
                    fn(env, ctx)
    return {i: out[a.name] for i, a in enumerate(g.args) if a.kind == "out"}


def _promises(g: Gen, rng: random.Random, opts: dict[str, Any]) -> None:
    """Random promises, made true of the arrays the harness will pass."""
    views = [(i, a) for i, a in enumerate(g.args) if a.kind != "scalar" and a.rank > 0]
    if not views:
        return
    if rng.random() < 0.3:
        chosen = [f"arg{i}" for i, a in views if rng.random() < 0.6]
        if chosen:
            for i, a in views:
                if f"arg{i}" in chosen:
                    a.layout = "contiguous"
            opts["contiguous"] = chosen
    if rng.random() < 0.25:
        chosen = [f"arg{i}" for i, a in views if rng.random() < 0.6]
        for i, a in views:
            if f"arg{i}" in chosen:
                a.layout = "aligned"
        if chosen:
            opts["aligned"] = chosen
    promise = rng.random()
    if promise < 0.15:
        chosen = [f"arg{i}" for i, a in views if a.shape[-1] % 16 == 0]
        if chosen:
            opts["divisible_sizes"] = chosen
    elif promise < 0.3:  # each size's largest power-of-two divisor (up to 64), or none
        opts["divisible_sizes"] = {
            f"arg{i}": tuple(min(s & -s, 64) if s and rng.random() < 0.8 else 1
                             for s in a.shape)
            for i, a in views if rng.random() < 0.7
        }
    if rng.random() < 0.3:
        opts["int32_indexing"] = True if rng.random() < 0.5 else [f"arg{views[0][0]}"]
    if rng.random() < 0.2:
        by_shape: dict[tuple, list[str]] = {}
        for i, a in views:
            by_shape.setdefault(a.shape, []).append(f"arg{i}")
        groups = [tuple(v) for v in by_shape.values() if len(v) >= 2]
        if groups:
            opts["same_shapes"] = groups


def _unify_shapes(g: Gen, rng: random.Random) -> None:
    """Sometimes give an output view the shape of an input view of the same rank, so that
    same_shapes= has groups to promise."""
    ins = [a for a in g.args if a.kind == "in" and a.rank > 0]
    for a in g.args:
        if a.kind == "out" and a.rank > 0 and rng.random() < 0.3:
            same = [b for b in ins if b.rank == a.rank]
            if same:
                b = rng.choice(same)
                a.shape = b.shape
                a.value = g.random_values(a.dtype, a.shape)


def gen_valid(seed: int, index: int, rng: random.Random, kind: str = "valid") -> Program:
    huge = kind == "huge"
    g = Gen(rng, tile_cap=1 << rng.choice([16, 18, 20]) if huge else 2048)
    ndims = rng.choice([1, 1, 2, 3])
    grid = [1, 1, 1]
    for d in range(ndims):
        grid[d] = rng.choice([1, 1, 2, 3])
    if huge:
        grid = [1, 1, 1]
    grid_t = (grid[0], grid[1], grid[2])
    total = grid[0] * grid[1] * grid[2]
    g.nprog = total
    lin = g.linear_pid(grid_t)
    if huge:
        rank = rng.choice([1, 2])
        g.load(lin, g.shape(rank, g.tile_cap) if rng.random() < 0.5 else
               tuple([g.tile_cap] if rank == 1 else [g.tile_cap // 64, 64]))
    else:
        g.load(lin)
        if rng.random() < 0.5:
            g.load(lin)
    for _ in range(rng.randint(2, 14 if not huge else 4)):
        g.random_op(lin)
    # Store the last values made (and maybe another one) to output views.
    tiles = [p for p in g.pool if p[1].shape is not None]
    stores = [tiles[-1]] + ([rng.choice(tiles)] if rng.random() < 0.5 else [])
    if rng.random() < 0.3:
        scal = [p for p in g.pool if p[1].shape is None]
        if scal:  # a scalar (1-D reduction) stored as a splat tile
            s, sty = rng.choice(scal)
            stores.append((g.splat_from(s, sty), Ty((1,), sty.dtype)))
    seen = set()
    for name, ty in stores:
        if name in seen:
            continue
        seen.add(name)
        if ty.shape == () and (total > 1 or "rank0" in AVOID):
            # a rank-0 tile: reshape to rank 1 so programs write separate elements
            r = g.fresh()
            g.emit(f"{r} = tile.reshape {name} : {g.t(ty)} -> {g.t(Ty((1,), ty.dtype))}",
                   lambda env, _, r=r, name=name: env.__setitem__(
                       r, V(env[name].a.reshape(1), env[name].e.reshape(1))))
            name, ty = r, Ty((1,), ty.dtype)
        g.store(lin, name, ty, total)
    if not any(a.kind == "out" for a in g.args):
        name, ty = tiles[-1]
        g.store(lin, name, ty, total)
    _unify_shapes(g, rng)
    opts: dict[str, Any] = {
        "target": rng.choice(TARGETS),
        "num_warps": rng.choice([1, 2, 4, 4, 8, 8] + ([3, 5, 6, 7] if rng.random() < 0.1 else [])),
    }
    _promises(g, rng, opts)
    if opts["target"] == "sm_90a" and rng.random() < 0.3:  # a producer warp for TMA pipelines
        opts["warp_specialize"] = True
    if rng.random() < 0.1:  # a register cap that ptxas meets with spills where it must
        opts["maxnreg"] = rng.choice([24, 32, 64, 128, 255])
    p = Program(seed, index, kind, _kernel_text(g), g.args, grid_t, opts, "ok", run=not huge)
    if not huge:
        p.expected = _evaluate(g, grid_t)
    return p


def _splat_from(self: Gen, s: str, sty: Ty) -> str:
    name = self.fresh()
    ty = Ty((1,), sty.dtype)
    self.emit(f"{name} = tile.splat {s} : {sty.dtype} -> {self.t(ty)}",
              lambda env, _: env.__setitem__(name, V(np.asarray(env[s].a).reshape(1),
                                                     np.asarray(env[s].e).reshape(1))))
    return self.add(name, ty)


Gen.splat_from = _splat_from  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# explicit layouts (start="tilegpu")


def random_layout(rng: random.Random, rank: int, warps: int, valid: bool) -> tuple[str, str]:
    """A ``#tile.blocked`` for ``rank`` and ``warps``; with ``valid`` False one broken on
    purpose. Returns (text, what was broken)."""
    def split(total: int) -> list[int]:
        """A random factorisation of the power of two ``total`` over ``rank`` entries."""
        log = total.bit_length() - 1
        cuts = sorted(rng.randint(0, log) for _ in range(rank - 1))
        parts = [b - a for a, b in zip([0] + cuts, cuts + [log], strict=True)]
        return [1 << p for p in parts]
    spt = [rng.choice([1, 1, 2, 4]) for _ in range(rank)]
    tpw = split(32)
    wpc = split(warps)
    order = list(range(rank))[::-1]
    if rng.random() < 0.3:
        rng.shuffle(order)
    broken = ""
    if not valid:
        broken = rng.choice(["tpw", "wpc", "order", "rank", "zero", "order-dup"])
        if broken == "tpw":
            tpw[rng.randrange(rank)] *= 2
        elif broken == "wpc":
            wpc[rng.randrange(rank)] *= 2
        elif broken == "order":
            order[0] = rank + rng.randint(0, 3)
        elif broken == "rank":
            spt.append(1)
            tpw.append(1)
            wpc.append(1)
            order = [len(order)] + order
        elif broken == "zero":
            spt[rng.randrange(rank)] = 0
        elif broken == "order-dup" and rank > 1:
            order[1] = order[0]
        elif broken == "order-dup":
            order[0] = 1
    lst = lambda v: ", ".join(map(str, v))  # noqa: E731
    return (f"#tile.blocked<sizePerThread = [{lst(spt)}], threadsPerWarp = [{lst(tpw)}], "
            f"warpsPerCTA = [{lst(wpc)}], order = [{lst(order)}]>"), broken


def gen_layout(seed: int, index: int, rng: random.Random) -> Program:
    warps = rng.choice([1, 2, 4, 8])
    valid = rng.random() < 0.5
    rank = rng.choice([1, 1, 2, 2, 3])
    layout, broken = random_layout(rng, rank, warps, valid)
    if not valid and broken == "rank" and "layout-rank" in AVOID:
        layout, broken = random_layout(rng, rank, warps, True)[0], "none (avoided)"
        valid = True
    if not valid and rng.random() < 0.2 and "layout-rank" not in AVOID:
        # a valid layout of the wrong rank for the tensors
        layout, broken = random_layout(rng, rank + rng.choice([-1, 1]) if rank > 1 else 2,
                                       warps, True)[0], "tensor-rank"
    g = Gen(rng, tile_cap=1024)

    def enc(ty: Ty) -> str:
        if len(ty.shape) == rank:
            return "#L"
        if len(ty.shape) == rank - 1 and ty.shape is not None:
            return f"#tile.slice<dim = {g.slice_dim}, parent = #L>"  # type: ignore[attr-defined]
        return ""
    g.enc = enc
    g.slice_dim = rng.randrange(rank)  # type: ignore[attr-defined]
    grid = (rng.choice([1, 2]), 1, 1)
    g.nprog = grid[0]
    lin = g.linear_pid(grid)
    shape = g.shape(rank, 1024)
    dtype = rng.choice(["f32", "f16", "i32", "f64", "i8", "bf16"])
    a = g.load(lin, shape, dtype)
    ty = Ty(shape, dtype)
    for _ in range(rng.randint(1, 4)):
        if is_float(dtype):
            op = rng.choice(["addf", "mulf", "maximumf", "exp", "negf"])
        else:
            op = rng.choice(["addi", "muli", "xori", "maxsi"])
        if op in ("exp", "negf"):
            a = g.unary(op, a, ty)
        else:
            b = g.load(lin, shape, dtype) if rng.random() < 0.5 else a
            a = g.binary(op, a, b, ty)
    out, oty = a, ty
    if rank >= 2 and rng.random() < 0.5:
        # reduce along the slice dim: result has the slice layout
        ax = g.slice_dim  # type: ignore[attr-defined]
        rshape = shape[:ax] + shape[ax + 1:]
        rty = Ty(rshape, dtype)
        name = g.fresh()
        comb = "arith.addf" if is_float(dtype) else "arith.addi"
        n = shape[ax]

        def run(env: Env, _: dict, a=a) -> None:
            x = env[a]
            with np.errstate(all="ignore"):
                if is_float(dtype):
                    r = np.sum(x.a, axis=ax)
                    e = np.sum(x.e, axis=ax) + (n - 1) * EPS[dtype] * np.sum(np.abs(x.a), axis=ax)
                    env[name] = rounded(r, e, dtype)
                else:
                    env[name] = V(wrap(np.sum(x.a, axis=ax), BITS[dtype]), np.max(x.e, axis=ax))
        g.emit([f"{name} = tile.reduce {a} {{axis = {ax}}} : {g.t(ty)} -> {g.t(rty)} {{",
                f"^bb0(%a: {dtype}, %b: {dtype}):", f"  %r = {comb} %a, %b : {dtype}",
                f"  tile.yield %r : {dtype}", "}"], run)
        out, oty = name, rty
    g.store(lin, out, oty, grid[0])
    text = f"#L = {layout}\n" + _kernel_text(g)
    opts = {"target": rng.choice(TARGETS), "num_warps": warps, "start": "tilegpu"}
    p = Program(seed, index, "layout", text, g.args, grid, opts, "ok" if valid else "invalid",
                note=f"layout {'valid' if valid else 'broken: ' + broken}")
    p.expected = _evaluate(g, grid) if valid else {}
    p.run = valid
    return p


# ---------------------------------------------------------------------------------------------
# mutants

#: Lines a mutant may edit, besides result types: (edit, whether line `s` offers it).
_MUTATION_SITES: tuple[tuple[str, Any], ...] = (
    ("axis", lambda s: "{axis = " in s),
    ("perm", lambda s: "permutation = array<i64:" in s),
    ("operand-type", lambda s: s.startswith("%") and "arith.add" in s and ": tensor<" in s),
    ("pid-dim", lambda s: "tile.program_id {dim" in s),
    ("dim-index", lambda s: "memref.dim" in s),
    ("store-rank", lambda s: "tile.store" in s),
    ("dot-type", lambda s: "tile.dot" in s),
    ("splat-type", lambda s: "tile.splat" in s),
    ("padding-type", lambda s: "padding = " in s),
    ("iota-type", lambda s: "tile.iota" in s),
)


def mutate(text: str, rng: random.Random) -> tuple[str, str] | None:
    """A copy of ``text`` made invalid by one edit (and what the edit was), or None."""
    import re

    lines = text.split("\n")
    edits = []
    for i, line in enumerate(lines):
        s = line.strip()
        if " -> tensor<" in s and ("tile.load" in s or "tile.broadcast" in s or
                                    "tile.reshape" in s or "tile.permute" in s):
            # Prefer values used nowhere else: then the op's verifier sees the bad type, not
            # the parser's check that every use of a value has one type.
            name = s.split(" = ")[0]
            unused = not any(re.search(re.escape(name) + r"\b", ln) for ln in lines[i + 1:])
            for _ in range(3 if unused else 1):
                edits.append(("result-rank", i))
                edits.append(("result-dtype", i))
        edits += [(what, i) for what, applies in _MUTATION_SITES if applies(s)]
    if not edits:
        return None
    what, i = rng.choice(edits)
    line = lines[i]
    if what == "result-rank":
        head, tail = line.rsplit(" -> tensor<", 1)
        stripped = re.sub(r"^\d+x", "", tail, count=1)
        if "tile.load" in line and stripped != tail and rng.random() < 0.5:
            line = head + " -> tensor<" + stripped  # one dimension fewer than the view
        elif "tile.reshape" in line:
            line = head + " -> tensor<3x" + tail  # not a power of two
        else:
            line = head + " -> tensor<" + rng.choice(["2x", "3x"]) + tail
    elif what == "result-dtype":
        head, tail = line.rsplit(" -> tensor<", 1)
        m = re.search(r"(i1|i8|i16|i32|i64|f16|bf16|f32|f64)>", tail)
        if not m:
            return None
        new = rng.choice([d for d in DTYPES if d != m.group(1)])
        line = head + " -> tensor<" + tail[:m.start()] + new + ">" + tail[m.end():]
    elif what == "axis":
        line = re.sub(r"\{axis = \d+", "{axis = " + str(rng.choice([-1, 4, 7, 100])), line)
    elif what == "perm":
        line = re.sub(r"array<i64: [^>]*>", rng.choice(["array<i64: 0, 0>", "array<i64: 5>",
                                                         "array<i64: >", "array<i64: 1, 2, 3>"]),
                      line)
    elif what == "operand-type":
        line = re.sub(r": tensor<([^>]*)>$",
                      lambda m: ": tensor<" + ("3x" + m.group(1)) + ">", line)
    elif what == "pid-dim":
        line = re.sub(r"dim = \d", "dim = " + str(rng.choice([3, 4, -1])), line)
    elif what == "dim-index":
        # an out-of-range constant index: replace the index operand with a fresh constant
        m = re.match(r"(\s*)(%\w+) = memref.dim (%\w+), (%\w+) : (.*)", line)
        if not m:
            return None
        k = rng.choice([5, 9, -1])
        line = (f"{m.group(1)}%mut = arith.constant {k} : index\n"
                f"{m.group(1)}{m.group(2)} = memref.dim {m.group(3)}, %mut : {m.group(5)}")
    elif what == "store-rank":
        line = re.sub(r"\[([^\]]*)\]", lambda m: "[" + (m.group(1) + ", " if m.group(1) else "")
                      + m.group(1).split(",")[0] + "]" if m.group(1) else "[%mutc]", line, count=1)
        if "%mutc" in line:
            line = line.replace("%mutc", "%v1")
    elif what == "dot-type":
        line = re.sub(r"-> tensor<(\d+)x(\d+)x(\w+)>", lambda m: f"-> tensor<{m.group(1)}x"
                      f"{int(m.group(2)) * 2}x{m.group(3)}>", line)
    elif what == "splat-type":
        line = re.sub(r"-> tensor<([^>]*?)(i1|i8|i16|i32|i64|f16|bf16|f32|f64)>",
                      lambda m: "-> tensor<" + m.group(1) + ("f32" if m.group(2) != "f32"
                                                             else "i32") + ">", line)
    elif what == "padding-type":
        line = re.sub(r"padding = [^}]*", rng.choice(["padding = \"x\"", "padding = 1 : i3",
                                                      "padding = [1, 2]"]), line)
    elif what == "iota-type":
        line = re.sub(r"tensor<(\d+)xi32>", lambda m: rng.choice(
            [f"tensor<{m.group(1)}xf32>", f"tensor<{m.group(1)}x2xi32>", "tensor<3xi32>"]), line)
    if line == lines[i]:
        return None
    lines[i] = line
    return "\n".join(lines), what


def gen_mutant(seed: int, index: int, rng: random.Random) -> Program:
    for _ in range(20):
        base = gen_valid(seed, index, rng)
        m = mutate(base.text, rng)
        if m is not None:
            break
    else:
        return base
    text, what = m
    if base.options["num_warps"] not in (1, 2, 4, 8):  # diagnosed for the edit, not the warps
        base.options["num_warps"] = 4
    base.kind, base.text, base.expect, base.run = "mutant", text, "invalid", False
    base.expected, base.note = {}, f"mutation {what}"
    return base


def generate(seed: int, index: int) -> Program:
    """Program ``index`` of the batch ``seed`` (deterministic)."""
    rng = random.Random(seed * 1_000_003 + index)
    r = rng.random()
    if r < 0.70:
        return gen_valid(seed, index, rng)
    if r < 0.82:
        return gen_layout(seed, index, rng)
    if r < 0.96:
        return gen_mutant(seed, index, rng)
    return gen_valid(seed, index, rng, kind="huge")
