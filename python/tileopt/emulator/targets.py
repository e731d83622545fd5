"""Which instructions a module's ``.target`` allows, as ptxas decides.

A GPU never runs PTX that ptxas refuses for its target, so neither does the emulator: an
instruction newer than the module's ``.target`` (``wgmma`` in an ``sm_80`` module, ``elect`` in
``sm_89``) fails the load with a :class:`PTXLoadError` that names both. The rules below are
ptxas 13's answers for the instruction families the emulator runs (each is checked against
ptxas by the tests); forms they do not name are not checked. Some instructions need a newer
``.version`` too (fp8 MMAs PTX 8.4, fp8 conversions on sm_89 PTX 8.1): the load refuses
an older one likewise.
"""

from __future__ import annotations

import functools
import re

from tileopt.emulator.errors import PTXLoadError

_TARGET_RE = re.compile(r"\bsm_(\d+)([af]?)\b")
_CLUSTER_SREG_RE = re.compile(
    r"%(?:n?clusterid|cluster_n?ctaid|cluster_n?ctarank|is_explicit_cluster)\b"
)

# (what, first target) by opcode: the base and any of its dotted parts.
_SM90_BASES = {
    "elect", "stmatrix", "griddepcontrol", "mapa", "getctarank", "multimem", "st.async",
    "red.async",
}
_SM80_BASES = {"redux", "discard", "applypriority", "createpolicy"}


@functools.lru_cache(maxsize=64)  # once a module, not once an instruction
def parse_target(target: str) -> tuple[int, str] | None:
    """(SM number, suffix) of a ``.target`` value (``sm_90a`` -> (90, "a")), or None."""
    m = _TARGET_RE.search(target)
    return (int(m.group(1)), m.group(2)) if m else None


def required_target(opcode: str, text: str = "") -> tuple[int, str] | None:
    """The oldest target that accepts ``opcode`` (with operands ``text``): (SM number, "")
    for that SM or later, (SM number, "a") for its arch-specific target and later ones with
    an ``a``, (SM number, "only") for exactly that arch-specific target; None when no rule
    applies."""
    parts = opcode.split(".")
    base, rest = parts[0], set(parts[1:])
    two = ".".join(parts[:2])
    if base == "wgmma":
        return 90, "only"
    if base in ("setmaxnreg", "tensormap"):
        return 90, "a"
    if (
        base in _SM90_BASES
        or two in _SM90_BASES
        or (base == "cp" and "bulk" in rest)
        or (base == "mbarrier" and {"try_wait", "expect_tx"} & rest)
        or (base == "fence" and {"cluster", "mbarrier_init"} & rest)
        or (two == "fence.proxy" and "async" in rest)
        or (base == "barrier" and "cluster" in rest)
        or (base in ("atom", "red") and ({"v2", "v4", "v8"} & rest or {"bf16", "bf16x2"} & rest))
        or (base in ("add", "sub", "mul", "ex2") and {"bf16", "bf16x2"} & rest)
        or (base == "cvt" and "tf32" in rest and "rna" not in rest)
        or (base == "prefetch" and "tensormap" in rest)
        or any(p.startswith("shared::cluster") for p in rest)
        or _CLUSTER_SREG_RE.search(text)
    ):
        return 90, ""
    if {"e4m3", "e5m2", "e4m3x2", "e5m2x2"} & rest:
        return 89, ""
    if base in ("min", "max") and "xorsign" in rest:
        return 86, ""
    if (
        base in _SM80_BASES
        or (base == "cp" and "async" in rest)
        or base == "mbarrier"
        or {"bf16", "bf16x2", "tf32"} & rest
        or (base in ("min", "max") and "NaN" in rest)
        or (base == "cvt" and "f16x2" in rest and "f32" in rest)
        or (base == "mma" and ({"m16n8k16", "m16n8k32"} & rest))
        or "L2::256B" in rest
    ):
        return 80, ""
    return None


def allows(target: tuple[int, str], required: tuple[int, str]) -> bool:
    """Whether a module of ``target`` may use an instruction that ``required`` says of."""
    sm, suffix = target
    need, kind = required
    if kind == "only":
        return sm == need and suffix == "a"
    if kind == "a":
        return sm >= need and suffix in ("a", "f")
    return sm >= need


def required_version(opcode: str, target: tuple[int, str]) -> int | None:
    """The oldest PTX ISA version (x10) that takes ``opcode`` on ``target``, where it is
    newer than any the target itself needs; None when no rule applies."""
    parts = opcode.split(".")
    fp8 = {"e4m3", "e5m2", "e4m3x2", "e5m2x2"} & set(parts[1:])
    if fp8 and parts[0] == "mma":
        return 84
    if fp8 and parts[0] == "cvt" and target[0] == 89:
        return 81
    return None


def check_instruction(target: str, opcode: str, text: str, line: int,
                      version: str = "") -> None:
    """Raises PTXLoadError when ptxas would refuse ``opcode`` for ``target`` in a module of
    PTX ISA ``version`` (``8.4``)."""
    parsed = parse_target(target)
    wanted = required_version(opcode, parsed) if parsed and version else None
    if wanted and re.fullmatch(r"\d+\.\d", version):
        major, minor = version.split(".")
        if int(major) * 10 + int(minor) < wanted:
            raise PTXLoadError(
                f"line {line}: `{text or opcode}` needs .version {wanted // 10}.{wanted % 10} "
                f"or later, and the module's is {version} (ptxas refuses it, so no GPU runs it)"
            )
    needed = required_target(opcode, text) if parsed else None
    if parsed is None or needed is None or allows(parsed, needed):
        return
    sm, kind = needed
    what = {"only": f"sm_{sm}a only", "a": f"sm_{sm}a or a later 'a' target"}.get(
        kind, f"sm_{sm} or later"
    )
    raise PTXLoadError(
        f"line {line}: `{text or opcode}` needs .target {what}, and the module's is "
        f"{target.split(',')[0].strip()} (ptxas refuses it, so no GPU runs it)"
    )
