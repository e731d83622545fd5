"""Source locations of the imported graph: which aten op and which line of the user's code.

The importer gives every op it imports from an FX node the MLIR location

    loc("aten.gather"(callsite("/home/u/model.py":14:0 at "/home/u/run.py":30:0)))

a name location holding the node's operator (``aten.gather``; a custom op gives its own
namespace, ``mylib.op``) around the node's stack trace as a call site, innermost frame first.
torch.export records only the frames of ``forward`` methods (and of a plain function that
:func:`~tileopt.frontend.import_graph` was given), so an op inside a helper function shows as
the ``forward`` line that called the helper; the importer drops the frames of tileopt's
frontend and FX's generated code, and the innermost frames that lie inside torch itself
(``torch/nn/modules/linear.py``), so the innermost frame is the user's line that called the
operator or the module that contains it. torch-mlir keeps an op's location through its
lowering to linalg: every linalg op, and every op in its body, carries the location of the
aten op it came from; constants that canonicalization hoisted carry ``loc(unknown)``.

This module needs neither torch nor torch-mlir.
"""

from __future__ import annotations

import os
import re

__all__ = ["describe_location", "location_frames"]

# The quoted strings of a printed location, each whole: a file location's path is followed by
# `:line:column`; anything else quoted is a name location's name (`"name"(child)`, or just
# `"name"` when its child is unknown).
_QUOTED_RE = re.compile(r'"((?:[^"\\]|\\.)*)"(?::(\d+):\d+)?')
# The names the importer gives: `namespace.op` (`aten.gather`, `mylib.op`).
_OP_RE = re.compile(r"[A-Za-z_]\w*(\.\w+)+")


def location_frames(location: object) -> tuple[str | None, list[tuple[str, int]]]:
    """The operator and the source frames of a printed MLIR location, innermost first.

    ``location`` is an MLIR location as ``str(op.location)`` prints it (an object with such
    a ``str`` works too). Returns ``(op, frames)``: ``op`` is the first name location's name
    (``"aten.gather"``) or None; ``frames`` are the ``(path, line)`` of the file locations
    inside it (of all of them without a name) in printed order, which for the importer's
    call sites is innermost first. Of a fused location (``loc(fused[...])``) the first part
    that names an operator counts; an alias (``loc(#loc3)``) carries nothing to read and
    gives ``(None, [])``.
    """
    text = str(location)
    quoted = list(_QUOTED_RE.finditer(text))
    files = [m for m in quoted if m.group(2) is not None]
    name = next(
        (m for m in quoted if m.group(2) is None and _OP_RE.fullmatch(m.group(1))), None
    )
    op = None
    if name is not None:
        op = name.group(1)
        # Only the files inside the name location belong to its operator (a fused location
        # lists other parts after it).
        has_child = text.startswith("(", name.end())
        end = _matching_paren(text, name.end()) if has_child else name.end()
        files = [m for m in files if name.end() <= m.start() < end]
    frames = [(m.group(1), int(m.group(2))) for m in files]
    return op, frames


def describe_location(location: object) -> tuple[str | None, str | None]:
    """The aten op and the user's source line of an op of ``ImportedGraph.linalg``.

    ``location`` is the op's location as ``str(op.location)`` prints it, for example
    ``loc("aten.gather"("/home/u/test_x.py":14:0))``. Returns ``(op, source)``:
    ``("aten.gather", "test_x.py:14")``; ``op`` is None where the location names no
    operator, ``source`` (the innermost frame's file name and line) None where it has no
    file (``loc(unknown)``, an op torch.export recorded no stack trace for).
    """
    op, frames = location_frames(location)
    if not frames:
        return op, None
    path, line = frames[0]
    return op, f"{os.path.basename(path)}:{line}"


def _matching_paren(text: str, open_index: int) -> int:
    """The index just past the parenthesis that closes the one at ``open_index``
    (skipping quoted strings); ``len(text)`` if it is not closed."""
    depth = 0
    i = open_index
    while i < len(text):
        c = text[i]
        if c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)
