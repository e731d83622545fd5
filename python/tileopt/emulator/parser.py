"""PTX text -> a small syntax tree (module, functions, declarations, instructions).

The parser accepts what nvcc, LLVM's NVPTX backend and Triton emit (PTX ISA 7.x-9.x):
directives, nested ``{ }`` scopes (call sequences, inline asm), labels, predicate
guards, vector operands, address expressions, initialisers and debug sections.
Semantics are checked later, by :mod:`tileopt.emulator.program`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from tileopt.emulator.errors import PTXLoadError, UnsupportedInstructionError
from tileopt.emulator.numeric import TYPES
from tileopt.emulator.targets import check_instruction

# ------------------------------------------------------------------ operands


@dataclass(frozen=True)
class Reg:
    """A register (or special register) operand, possibly negated (``!%p``)."""

    name: str
    neg: bool = False


@dataclass(frozen=True)
class Imm:
    """An integer immediate."""

    value: int


@dataclass(frozen=True)
class FImm:
    """A floating-point immediate: ``0fXXXXXXXX`` (32-bit), ``0dXXXXXXXXXXXXXXXX`` or a decimal."""

    value: float
    width: int  # 32 or 64 for hex forms, 0 for decimal literals


@dataclass(frozen=True)
class Sym:
    """A symbol: a label, function or variable name."""

    name: str


@dataclass(frozen=True)
class Addr:
    """An address expression ``[base+offset]``; base is a register, a symbol or None."""

    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True)
class TensorAddr:
    """A tensor-map operand ``[tensorMap, {c0, c1, ...}]`` of the bulk tensor copies: the map's
    address and the coordinates (innermost dimension first)."""

    base: Addr
    coords: tuple


@dataclass(frozen=True)
class Vec:
    """A vector operand ``{a, b, ...}``."""

    items: tuple


@dataclass(frozen=True)
class Paren:
    """A parenthesised list (call arguments / return values)."""

    items: tuple


@dataclass(frozen=True)
class Pair:
    """Two destinations ``%a|%b`` (setp, shfl, elect; either may be the sink ``_``)."""

    first: Reg | Sink
    second: Reg | Sink


@dataclass(frozen=True)
class Sink:
    """The ``_`` sink operand."""


Operand = Reg | Imm | FImm | Sym | Addr | TensorAddr | Vec | Paren | Pair | Sink

# ------------------------------------------------------------------ declarations


@dataclass
class Var:
    """A variable declared in .global/.const/.shared/.local/.param space."""

    name: str
    space: str
    type: str
    align: int
    size: int  # bytes; 0 for an unsized extern array
    init: bytes | None = None
    extern: bool = False
    line: int = 0


@dataclass
class Param:
    """A parameter of an .entry or .func (or a return value of a .func)."""

    name: str
    type: str
    size: int
    align: int
    is_array: bool = False
    is_ptr: bool = False


@dataclass
class Instruction:
    """One PTX instruction."""

    line: int
    text: str
    opcode: str
    operands: list
    guard: Reg | None = None
    parse_error: str | None = (
        None  # operands that did not parse (reported once the opcode is known)
    )

    @property
    def parts(self) -> list[str]:
        """The opcode split at dots: ``ld.global.f32`` -> ``['ld', 'global', 'f32']``."""
        return self.opcode.split(".")


class RegTable(dict[str, str]):
    """A function's registers, name -> type. A parameterized declaration ``%r<N>`` is kept as
    a range and its names resolved on lookup: N is unbounded in PTX, and expanding it eagerly
    would take time and memory proportional to N."""

    def __init__(self) -> None:
        super().__init__()
        # prefix -> [(declaration number, N, type)]
        self.ranges: dict[str, list[tuple[int, int, str]]] = {}

    def declare_range(self, prefix: str, n: int, typ: str) -> None:
        # a later declaration wins, as when the names were stored one by one
        for name in [k for k in self if k.startswith(prefix)]:
            if 0 <= _range_index(name[len(prefix):]) < n:
                del self[name]
        seq = sum(len(v) for v in self.ranges.values())
        self.ranges.setdefault(prefix, []).append((seq, n, typ))

    def _in_range(self, name: str) -> str | None:
        # %rd1<5> declares %rd10..%rd14, so every split of the trailing digits is a candidate
        best: tuple[int, str] | None = None
        for i in range(len(name) - 1, 0, -1):
            k = _range_index(name[i:])
            if k < 0:
                if not name[i].isdigit():
                    break
                continue
            for seq, n, typ in self.ranges.get(name[:i], ()):
                if k < n and (best is None or seq > best[0]):
                    best = (seq, typ)
        return best[1] if best else None

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        t = super().get(name)
        if t is None and self.ranges:
            t = self._in_range(name)
        return default if t is None else t

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __getitem__(self, name: str) -> str:
        t = self.get(name)
        if t is None:
            raise KeyError(name)
        return t


def _range_index(digits: str) -> int:
    """K of a name %rK that a ``%r<N>`` declaration makes (decimal, no leading zeros), else -1."""
    if not (digits.isascii() and digits.isdigit()) or (len(digits) > 1 and digits[0] == "0"):
        return -1
    return int(digits)


@dataclass
class Function:
    """An .entry kernel or a .func device function."""

    name: str
    is_entry: bool
    params: list[Param]
    rets: list[Param]
    line: int
    body: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    regs: RegTable = field(default_factory=lambda: RegTable())  # name -> type
    vars: list[Var] = field(default_factory=list)  # .shared/.local/.param declared inside
    branch_targets: dict[str, list[str]] = field(default_factory=dict)
    directives: dict[str, tuple[int, ...]] = field(default_factory=dict)
    defined: bool = True


@dataclass
class Module:
    """A parsed PTX module."""

    version: str = ""
    target: str = ""
    address_size: int = 64
    functions: dict[str, Function] = field(default_factory=dict)
    vars: list[Var] = field(default_factory=list)


# ------------------------------------------------------------------ lexing

_COMMENT_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
# A run of characters that `_statements` only collects.
_ORDINARY_RE = re.compile(r'[^"\n{};]+')
_LABEL_RE = re.compile(r"^\s*([A-Za-z_$%][\w$]*)\s*:(?!:)")
_IDENT = r"[A-Za-z_$%][\w$.]*"


def _strip_comments(text: str) -> str:
    def repl(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith('"'):
            return s
        return "\n" * s.count("\n") if s.startswith("/*") else ""

    return _COMMENT_RE.sub(repl, text)


def _statements(text: str):
    """Yield (kind, text, line): kind in 'stmt', 'label', 'open', 'close'."""
    text = _strip_comments(text)
    buf: list[str] = []
    line = 1
    start_line = 1
    depth = 0  # braces inside a statement (vector operands, initialisers)
    skip = 0  # inside a .section { } block
    i = 0
    n = len(text)
    while i < n:
        run = _ORDINARY_RE.match(text, i)
        if run:  # ordinary text: collected whole, as the loop below would a character at a time
            if not skip:
                if not buf or not "".join(buf).strip():
                    start_line = line
                buf.append(run.group())
            i = run.end()
            continue
        c = text[i]
        if c == '"':
            j = text.index('"', i + 1) if '"' in text[i + 1 :] else n - 1
            buf.append(text[i : j + 1])
            i = j + 1
            continue
        if c == "\n":
            if not skip and depth == 0 and buf:
                cur = "".join(buf).strip()
                # labels may precede the directive (-G: `$L__func_begin0:` then `.loc 1 15 0`)
                head = re.sub(r"^(\s*[A-Za-z_$%][\w$]*\s*:(?!:))+", "", cur).split(None, 1)[0:1]
                if head and head[0] in _LINE_DIRECTIVES:
                    yield from _emit(cur, start_line)
                    buf = []
            line += 1
        if skip:
            if c == "{":
                skip += 1
            elif c == "}":
                skip -= 1
            i += 1
            continue
        if not buf or not "".join(buf).strip():
            start_line = line if c != "\n" else line
        if c == "{":
            cur = "".join(buf).strip()
            # a scope block may follow labels: `$L__BB1_3: { .reg .b32 a; ... }`
            if depth == 0 and (
                not cur
                or _is_header(cur)
                or re.fullmatch(r"(\s*[A-Za-z_$%][\w$]*\s*:(?!:))+\s*", cur)
            ):
                m = _LABEL_RE.match(cur)
                while m and cur:
                    yield "label", m.group(1), start_line
                    cur = cur[m.end() :].strip()
                    m = _LABEL_RE.match(cur)
                if cur.startswith(".section"):
                    skip = 1
                else:
                    yield "open", cur, start_line
                buf = []
            else:
                depth += 1
                buf.append(c)
            i += 1
            continue
        if c == "}":
            if depth > 0:
                depth -= 1
                buf.append(c)
            else:
                cur = "".join(buf).strip()
                if cur:
                    yield from _emit(cur, start_line)
                buf = []
                yield "close", "", line
            i += 1
            continue
        if c == ";" and depth == 0:
            cur = "".join(buf).strip()
            buf = []
            if cur:
                yield from _emit(cur, start_line)
            i += 1
            continue
        buf.append(c)
        i += 1
    cur = "".join(buf).strip()
    if cur:
        yield from _emit(cur, start_line)


_LINE_DIRECTIVES = {".version", ".target", ".address_size", ".loc", ".file"}


def _is_header(s: str) -> bool:
    return bool(re.search(r"(^|\s)\.(entry|func)\b", s)) or s.startswith(".section")


def _emit(cur: str, line: int):
    m = _LABEL_RE.match(cur)
    while m:
        # a label is followed by a statement or nothing; `name: .branchtargets` is kept whole
        rest = cur[m.end() :].strip()
        if rest.startswith(".branchtargets") or rest.startswith(".callprototype"):
            yield "stmt", cur, line
            return
        yield "label", m.group(1), line
        cur = rest
        m = _LABEL_RE.match(cur)
    if cur:
        yield "stmt", cur, line


_BRACKETS_RE = re.compile(r"[\[\]{}()]")


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split *s* at *sep* outside brackets, braces and parentheses."""
    if not _BRACKETS_RE.search(s):  # the common case: a plain split gives the same pieces
        parts = [part.strip() for part in s.split(sep)]
        return parts if len(parts) > 1 or parts[0] else []
    out, depth, cur = [], 0, []
    for c in s:
        if c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    tail = "".join(cur).strip()
    if tail or out:
        out.append(tail)
    return out


# ------------------------------------------------------------------ operands


_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]+")
_BIN_RE = re.compile(r"0[bB][01]+")
_OCT_RE = re.compile(r"0[0-7]+")
_DEC_RE = re.compile(r"\d+")
_F32_RE = re.compile(r"0[fF]([0-9a-fA-F]{8})")
_F64_RE = re.compile(r"0[dD]([0-9a-fA-F]{16})")
_DECIMAL_FLOAT_RE = re.compile(r"(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_SYMBOL_RE = re.compile(r"[A-Za-z_$][\w$]*")


def parse_int(tok: str, line: int | None = None) -> int | None:
    """Parse a PTX integer literal (decimal, hex, octal, binary, U suffix); None if not one.
    PTX literals are 64-bit: wider ones raise PTXLoadError (naming *line* when given)."""
    t = tok.strip()
    neg = False
    if t.startswith("-"):
        neg, t = True, t[1:].strip()
    elif t.startswith("+"):
        t = t[1:].strip()
    if t.endswith(("U", "u")):
        t = t[:-1]
    try:
        if _HEX_RE.fullmatch(t):
            v = int(t, 16)
        elif _BIN_RE.fullmatch(t):
            v = int(t[2:], 2)
        elif _OCT_RE.fullmatch(t):
            v = int(t, 8)
        elif _DEC_RE.fullmatch(t):
            v = int(t)
        else:
            return None
    except ValueError:
        return None
    if v >> 64:  # a leading '-' negates modulo 2^64, so only the magnitude is limited
        where = f"line {line}: " if line is not None else ""
        raise PTXLoadError(f"{where}integer literal {tok.strip()!r} does not fit in 64 bits")
    return -v if neg else v


def parse_float(tok: str) -> FImm | None:
    """Parse a PTX float literal: 0fXXXXXXXX, 0dXXXXXXXXXXXXXXXX or decimal; None if not one."""
    t = tok.strip()
    neg = t.startswith("-")
    if neg:
        t = t[1:]
    m = _F32_RE.fullmatch(t)
    if m:
        v = struct.unpack("<f", struct.pack("<I", int(m.group(1), 16)))[0]
        return FImm(-v if neg else v, 32)
    m = _F64_RE.fullmatch(t)
    if m:
        v = struct.unpack("<d", struct.pack("<Q", int(m.group(1), 16)))[0]
        return FImm(-v if neg else v, 64)
    if _DECIMAL_FLOAT_RE.fullmatch(t) and ("." in t or "e" in t.lower()):
        v = float(t)
        return FImm(-v if neg else v, 0)
    return None


def parse_operand(tok: str, line: int) -> Operand:
    """Parse one operand token."""
    t = tok.strip()
    if not t:
        raise PTXLoadError(f"line {line}: empty operand")
    if t == "_":
        return Sink()
    if t.startswith("["):
        if not t.endswith("]"):
            raise PTXLoadError(f"line {line}: bad address operand {t!r}")
        inner = t[1:-1].strip()
        items = split_top(inner)
        if len(items) == 2 and items[1].startswith("{") and items[1].endswith("}"):
            coords = tuple(parse_operand(x, line) for x in split_top(items[1][1:-1]))
            return TensorAddr(_parse_addr(items[0], line), coords)
        return _parse_addr(inner, line)
    if t.startswith("{"):
        inner = t[1:-1]
        return Vec(tuple(parse_operand(x, line) for x in split_top(inner)))
    if t.startswith("("):
        inner = t[1:-1].strip()
        return Paren(tuple(parse_operand(x, line) for x in split_top(inner)) if inner else ())
    if "|" in t:
        a, b = t.split("|", 1)
        ra, rb = parse_operand(a, line), parse_operand(b, line)
        # both halves are registers, also when named without '%' (`.reg .pred p;` in a scope)
        ra = Reg(ra.name) if isinstance(ra, Sym) else ra
        rb = Reg(rb.name) if isinstance(rb, Sym) else rb
        if not isinstance(ra, Reg | Sink) or not isinstance(rb, Reg | Sink):
            raise PTXLoadError(f"line {line}: bad operand pair {t!r}")
        return Pair(ra, rb)  # type: ignore[arg-type]
    if t.startswith("!"):
        r = parse_operand(t[1:], line)
        if not isinstance(r, Reg):
            raise PTXLoadError(f"line {line}: bad negated operand {t!r}")
        return Reg(r.name, True)
    if t.startswith("%"):  # no literal starts with %
        return Reg(t)
    f = parse_float(t)
    if f is not None:
        return f
    v = parse_int(t, line)
    if v is not None:
        return Imm(v)
    if _SYMBOL_RE.fullmatch(t):
        return Sym(t)
    # simple constant expressions such as (1+2) or -(4)
    if re.fullmatch(r"[\d\s+\-*()xXa-fA-F]+", t):
        for lit in re.findall(r"0[xX][0-9a-fA-F]+|\d+", t):
            parse_int(lit, line)  # each literal is 64-bit
        try:
            return Imm(int(eval(t, {"__builtins__": {}})))  # noqa: S307 - digits and operators only
        except Exception:  # noqa: BLE001
            pass
    raise PTXLoadError(f"line {line}: cannot parse operand {t!r}")


def _parse_addr(s: str, line: int) -> Addr:
    m = re.fullmatch(r"([%A-Za-z_$][\w$.]*)?\s*(?:([+-])\s*(.+))?", s)
    if not m:
        v = parse_int(s, line)
        if v is None:
            raise PTXLoadError(f"line {line}: bad address expression [{s}]")
        return Addr(None, v)
    name, sign, off = m.group(1), m.group(2), m.group(3)
    offset = 0
    if off is not None:
        off = off.strip().replace("+-", "-").replace("+ -", "-")
        v = parse_int(off, line)
        if v is None:
            raise PTXLoadError(f"line {line}: bad address offset in [{s}]")
        offset = -v if sign == "-" else v
    if name is None:
        v = parse_int(s, line)
        return Addr(None, v if v is not None else 0)
    if name.startswith("%"):
        return Addr(Reg(name), offset)
    return Addr(Sym(name), offset)


# ------------------------------------------------------------------ declarations

_SPACES = ("reg", "shared", "global", "const", "local", "param", "tex", "sreg")


def _decl_parts(s: str):
    """Split a declaration into (modifiers, names-part, init)."""
    init = None
    if "=" in s:
        s, init = s.split("=", 1)
        init = init.strip()
    toks = s.split()
    mods = []
    rest_i = 0
    for i, tk in enumerate(toks):
        if tk.startswith("."):
            mods.append(tk)
            rest_i = i + 1
        elif mods and mods[-1] == ".align" or (mods and mods[-1] == ".ptr" and False):
            mods.append(tk)
            rest_i = i + 1
        else:
            break
    names = " ".join(toks[rest_i:])
    return mods, names, init


def _mods_info(mods: list[str], line: int):
    align = 0
    typ = None
    vec = 1
    flags = set()
    i = 0
    while i < len(mods):
        m = mods[i]
        if m == ".align":
            if i + 1 == len(mods):
                raise PTXLoadError(f"line {line}: .align needs a number of bytes")
            align = parse_int(mods[i + 1], line) or 0
            i += 2
            continue
        name = m[1:]
        if name in TYPES:
            typ = name
        elif name in ("v2", "v4", "v8"):
            vec = int(name[1:])
        else:
            flags.add(name)
        i += 1
    return align, typ, vec, flags


def _flatten_init(s: str) -> list[str]:
    s = s.strip()
    if s.startswith("{"):
        out: list[str] = []
        for part in split_top(s[1:-1]):
            out.extend(_flatten_init(part))
        return out
    return [s]


def _encode_init(items: list[str], typ: str, line: int) -> bytes:
    width, kind = TYPES[typ]
    nbytes = max(width // 8, 1)
    out = bytearray()
    for it in items:
        f = parse_float(it)
        if kind == "f" and typ in ("f32", "f64"):
            if f is not None:
                v = f.value
            else:
                iv = parse_int(it, line)
                if iv is None:
                    raise UnsupportedInstructionError(
                        f"line {line}: unsupported initialiser {it!r}"
                    )
                v = float(iv)
            out += struct.pack("<f" if typ == "f32" else "<d", v)
            continue
        iv = parse_int(it, line)
        if iv is None:
            if f is not None and f.width:
                iv = struct.unpack(
                    "<I" if f.width == 32 else "<Q",
                    struct.pack("<f" if f.width == 32 else "<d", f.value),
                )[0]
            else:
                raise UnsupportedInstructionError(
                    f"line {line}: unsupported initialiser {it!r} "
                    "(addresses of symbols are not supported)"
                )
        out += (iv & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")
    return bytes(out)


def parse_var(s: str, line: int) -> list[Var]:
    """Parse a .shared/.global/.const/.local/.param variable declaration."""
    mods, names, init = _decl_parts(s)
    align, typ, vec, flags = _mods_info(mods, line)
    space = next((f for f in flags if f in _SPACES), None)
    if space is None or typ is None:
        raise PTXLoadError(f"line {line}: cannot parse declaration {s!r}")
    if space == "tex":
        raise UnsupportedInstructionError(
            f"line {line}: texture declarations are not supported: {s!r}"
        )
    out = []
    elem = max(TYPES[typ][0] // 8, 1) * vec
    for nm in split_top(names):
        m = re.fullmatch(r"([\w$%]+)\s*((?:\[\s*\w*\s*\])*)", nm.strip())
        if not m:
            raise PTXLoadError(f"line {line}: cannot parse declared name {nm!r}")
        name, dims = m.group(1), m.group(2)
        count = 1
        unsized = False
        for d in re.findall(r"\[\s*(\w*)\s*\]", dims):
            if d == "":
                unsized = True
            else:
                count *= parse_int(d, line) or 0
        data = None
        if init is not None:
            items = _flatten_init(init)
            data = _encode_init(items, typ, line)
            if unsized:
                count = len(data) // elem
                unsized = False
        size = 0 if unsized else count * elem
        if data is not None and len(data) < size:
            data = data + bytes(size - len(data))
        out.append(
            Var(name, space, typ, align or elem, size, data, "extern" in flags or unsized, line)
        )
    return out


def _parse_params(s: str, line: int) -> list[Param]:
    out = []
    for p in split_top(s):
        p = p.strip()
        if not p:
            continue
        toks = p.split()
        name_tok = toks[-1]
        m = re.fullmatch(r"([\w$]+)\s*(\[\s*(\d*)\s*\])?", name_tok)
        if not m:
            raise PTXLoadError(f"line {line}: cannot parse parameter {p!r}")
        name = m.group(1)
        mods = toks[:-1]
        align, typ, vec, flags = _mods_info(mods, line)
        if typ is None:
            raise PTXLoadError(f"line {line}: parameter without a type {p!r}")
        elem = max(TYPES[typ][0] // 8, 1) * vec
        is_array = m.group(2) is not None
        count = int(m.group(3)) if is_array and m.group(3) else 1
        out.append(Param(name, typ, elem * count, align or elem, is_array, "ptr" in flags))
    return out


_HEADER_RE = re.compile(
    r"^(?P<pre>(?:\.\w+\s+)*)\.(?P<kind>entry|func)\s*(?:\((?P<rets>[^)]*)\))?\s*(?P<name>[\w$]+)\s*"
    r"(?:\((?P<params>[^)]*)\))?(?P<post>.*)$",
    re.S,
)


def _parse_header(s: str, line: int) -> Function:
    m = _HEADER_RE.match(s.strip())
    if not m:
        raise PTXLoadError(f"line {line}: cannot parse function header {s!r}")
    fn = Function(
        name=m.group("name"),
        is_entry=m.group("kind") == "entry",
        params=_parse_params(m.group("params") or "", line),
        rets=_parse_params(m.group("rets") or "", line),
        line=line,
    )
    post = m.group("post") or ""
    for dm in re.finditer(r"\.(\w+)((?:\s*,?\s*\d+)*)", post):
        nums = tuple(int(x) for x in re.findall(r"\d+", dm.group(2)))
        fn.directives[dm.group(1)] = nums
    return fn


# ------------------------------------------------------------------ module

_IGNORED_DIRECTIVES = {
    "loc",
    "file",
    "pragma",
    "section",
    "maxntid",
    "reqntid",
    "minnctapersm",
    "maxnctapersm",
    "maxnreg",
    "noreturn",
    "explicitcluster",
    "reqnctapercluster",
    "maxclusterrank",
    "alias",
    "weak",
    "visible",
    "common",
    "blocksareclusters",
    "abi_preserve",
    "abi_preserve_control",
}

_INSTR_RE = re.compile(r"^(?:@(!?)\s*(%?[\w$]+)\s+)?([A-Za-z][\w.:]*)\s*(.*)$", re.S)


def parse_instruction(s: str, line: int) -> Instruction:
    """Parse an instruction statement (without the trailing ';')."""
    m = _INSTR_RE.match(s)
    if not m:
        raise PTXLoadError(f"line {line}: cannot parse instruction {s!r}")
    neg, pred, opcode, rest = m.groups()
    guard = Reg(pred, bool(neg)) if pred else None
    rest = rest.strip()
    try:
        ops = [parse_operand(t, line) for t in split_top(rest)] if rest else []
    except PTXLoadError as e:
        return Instruction(line, " ".join(s.split()), opcode, [], guard, parse_error=str(e))
    return Instruction(line, " ".join(s.split()), opcode, ops, guard)


def parse_ptx(text: str) -> Module:
    """Parse PTX source text into a :class:`Module`."""
    mod = Module()
    fn: Function | None = None
    depth = 0  # scope depth inside the current function
    pending: Function | None = None
    # labels are local to their { } block (Triton repeats `waitLoop:` in one block per wait):
    # per open nested block, the body index where it starts and its labels -> unique names
    scopes: list[tuple[int, dict[str, str]]] = []
    nscopes = 0
    for kind, s, line in _statements(text):
        if kind == "open":
            if fn is None:
                if not s:
                    raise PTXLoadError(f"line {line}: unexpected '{{' outside a function")
                fn = _parse_header(s, line)
                if fn.name in mod.functions and mod.functions[fn.name].defined:
                    raise PTXLoadError(f"line {line}: function {fn.name} defined twice")
                mod.functions[fn.name] = fn
                depth = 1
            else:
                if s:
                    raise PTXLoadError(
                        f"line {line}: unexpected block header {s!r} inside {fn.name}"
                    )
                depth += 1
                scopes.append((len(fn.body), {}))
            continue
        if kind == "close":
            if fn is None:
                raise PTXLoadError(f"line {line}: unbalanced '}}'")
            depth -= 1
            if depth == 0:
                fn = None
                scopes = []
            elif scopes:
                start, local = scopes.pop()
                if local:
                    _rename_labels(fn.body, start, local)
            continue
        if kind == "label":
            if fn is None:
                raise PTXLoadError(f"line {line}: label {s} outside a function")
            name = s
            if scopes:
                local = scopes[-1][1]
                if s in local:
                    raise PTXLoadError(f"line {line}: label {s} defined twice in a block")
                nscopes += 1
                name = local[s] = f"{s}@{nscopes}"
            if name in fn.labels:
                raise PTXLoadError(f"line {line}: label {s} defined twice in {fn.name}")
            fn.labels[name] = len(fn.body)
            continue
        # statements
        if s.startswith("."):
            words = s.split()
            if words[0].count(".") > 1:
                # ptxas reads `.reg.b16 x;` (cuda_fp16.h's inline asm) as `.reg .b16 x;`
                words[:1] = ["." + part for part in words[0][1:].split(".")]
                s = " ".join(words)
            head = words[0][1:]
            if head in ("version", "target", "address_size") and len(words) < 2:
                raise PTXLoadError(f"line {line}: .{head} needs a value: {s!r}")
            if head == "version":
                mod.version = words[1]
            elif head == "target":
                mod.target = s.split(None, 1)[1].strip()
            elif head == "address_size":
                if not words[1].isdigit():
                    raise PTXLoadError(f"line {line}: .address_size takes a number: {s!r}")
                mod.address_size = int(words[1])
                if mod.address_size != 64:
                    raise UnsupportedInstructionError(
                        f"line {line}: only .address_size 64 is supported"
                    )
            elif _is_header(s):
                pending = _parse_header(s, line)  # a prototype (.extern .func ...;)
                pending.defined = False
                mod.functions.setdefault(pending.name, pending)
            elif head == "reg":
                if fn is None:
                    raise PTXLoadError(f"line {line}: .reg outside a function")
                _parse_reg(s, line, fn)
            elif any(
                f".{sp}" in s.split()
                for sp in ("shared", "global", "const", "local", "param", "tex")
            ) and head not in ("pragma", "loc", "file"):
                vars_ = parse_var(s, line)
                if fn is None:
                    mod.vars.extend(vars_)
                else:
                    fn.vars.extend(vars_)
            elif head in _IGNORED_DIRECTIVES:
                if fn is not None and head in ("maxntid", "reqntid", "minnctapersm", "maxnreg"):
                    fn.directives[head] = tuple(int(x) for x in re.findall(r"\d+", s))
            else:
                raise UnsupportedInstructionError(
                    f"line {line}: unsupported directive {s.split()[0]!r}"
                )
            continue
        if fn is None:
            raise PTXLoadError(f"line {line}: instruction outside a function: {s!r}")
        m = _LABEL_RE.match(s)
        if m and ".branchtargets" in s:
            targets = [
                t.strip() for t in s[s.index(".branchtargets") + len(".branchtargets") :].split(",")
            ]
            fn.branch_targets[m.group(1)] = targets
            continue
        if m and ".callprototype" in s:
            raise UnsupportedInstructionError(
                f"line {line}: indirect calls (.callprototype) are not supported"
            )
        ins = parse_instruction(s, line)
        check_instruction(mod.target, ins.opcode, ins.text, line, mod.version)
        fn.body.append(ins)
    if fn is not None:
        raise PTXLoadError(f"function {fn.name} is not closed by '}}'")
    return mod


def _rename_labels(body: list[Instruction], start: int, local: dict[str, str]) -> None:
    """Point the label operands of body[start:] (a closed block) at the block's labels."""
    for k in range(start, len(body)):
        ins = body[k]
        if any(isinstance(o, Sym) and o.name in local for o in ins.operands):
            ops = [
                Sym(local[o.name]) if isinstance(o, Sym) and o.name in local else o
                for o in ins.operands
            ]
            body[k] = Instruction(ins.line, ins.text, ins.opcode, ops, ins.guard, ins.parse_error)


def _parse_reg(s: str, line: int, fn: Function) -> None:
    mods, names, _ = _decl_parts(s)
    _, typ, vec, _ = _mods_info(mods, line)
    if typ is None:
        raise PTXLoadError(f"line {line}: .reg without a type: {s!r}")
    if vec != 1:
        raise UnsupportedInstructionError(f"line {line}: vector registers are not supported: {s!r}")
    for nm in split_top(names):
        nm = nm.strip()
        m = re.fullmatch(r"(%?[\w$]+)<(\d+)>", nm)
        if m:
            fn.regs.declare_range(m.group(1), int(m.group(2)), typ)
        elif re.fullmatch(r"%?[\w$]+", nm):
            fn.regs[nm] = typ
        else:
            raise PTXLoadError(f"line {line}: cannot parse register name {nm!r}")
