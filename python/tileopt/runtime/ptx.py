"""Reading PTX text: its kernels' parameters and bodies, and their instruction counts.

Plain text work with no MLIR: the compiler (:mod:`tileopt.compiler.nvidia`) and a
:class:`~tileopt.runtime.kernel.Kernel` loaded without the native build share it.
"""

from __future__ import annotations

import functools
import re

#: An ``.entry``: its name, its parameter list and its directives (``.reqntid``, ...).
ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)\s*((?:\.[^{]*)?)\{", re.S)
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.([a-z]+)(\d+)\b[^,]*?(?:\[(\d+)\])?\s*(?:,|$)"
)
_BRACE = re.compile(r"[{}]")


@functools.lru_cache(maxsize=32)
def ptx_entries(ptx: str) -> dict[str, tuple[list[int], str]]:
    """Per ``.entry``: the sizes of its parameters in bits, and its body text.

    A byte-array parameter counts by its size: LLVM's NVPTX back end declares ``f16``/``bf16``
    kernel parameters as ``.param .align 2 .b8 p[2]``, 16 bits like ``.param .b16``.
    """
    out: dict[str, tuple[list[int], str]] = {}
    for m in ENTRY.finditer(ptx):
        depth, i = 1, len(ptx)
        for brace in _BRACE.finditer(ptx, m.end()):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                i = brace.end()
                break
        widths = [int(p.group(2)) * int(p.group(3) or 1) for p in _PARAM.finditer(m.group(2))]
        out[m.group(1)] = (widths, ptx[m.end():i])
    return out


def ptx_instruction_count(ptx: str, kernel: str) -> int:
    """Static PTX instructions in ``kernel``'s body (not labels, declarations or comments)."""
    entries = ptx_entries(ptx)
    if kernel not in entries:
        return 0
    count = 0
    for line in entries[kernel][1].splitlines():
        line = line.split("//")[0].strip()
        if not line or line in ("{", "}") or line.endswith(":") or line.startswith("."):
            continue
        count += 1
    return count
