"""The exceptions tileopt raises.

Every error tileopt raises on purpose derives from :class:`TileoptError`, so a
caller can catch them all with one ``except``; each message says what went
wrong and what to do next.
"""

from __future__ import annotations


class TileoptError(Exception):
    """Base class of every error that tileopt raises on purpose."""


class CompilationError(TileoptError):
    """IR failed to parse, verify or lower; the message holds MLIR's diagnostics."""


class OptionError(CompilationError):
    """An argument of ``tileopt.compile`` (an option, or the module's type), of
    ``python -m tileopt.compiler``, or a ``TILEOPT_*`` environment variable has a wrong type or
    value; the message names it and the values it takes."""


class PTXAssemblyError(CompilationError):
    """ptxas (or nvJitLink's ptxas) rejected the PTX; the message quotes the offending line."""


class UnsupportedOperatorError(CompilationError):
    """An operator of the model that tileopt cannot lower; the message names the aten op and
    the user's source line.

    Attributes:
        op: the operator, ``"aten.median"`` (a custom op: ``"mylib.op"``); None if unknown.
        source: the line of the user's code it came from, ``"model.py:12"``; None if unknown.
    """

    def __init__(self, message: str, op: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.op = op
        self.source = source


class ExportError(CompilationError):
    """torch.export (or torch-mlir's import) rejected the model; the message holds its reason."""


class BuilderError(TileoptError):
    """A ``tileopt.builder`` call got operands, shapes or axes its op cannot take; raised at
    that call, the message names the op and the shapes."""


class ArgumentError(TileoptError):
    """A launch argument does not match the kernel's ABI (kind, dtype, rank, value)."""


class EmulatorError(TileoptError):
    """The PTX emulator could not load or run a kernel."""


class DeviceError(TileoptError):
    """A runtime device (for example the CUDA driver) is missing or failed."""


#: The longest diagnostic or note :func:`mlir_error_text` keeps whole.
DIAGNOSTIC_LIMIT = 2000


def mlir_error_text(error: Exception) -> str:
    """An ``ir.MLIRError``'s message and diagnostics as MLIR prints them, each note cut to
    :data:`DIAGNOSTIC_LIMIT` characters: a failing pass's "see current operation" note holds
    the whole function, thousands of lines for a model's graph."""
    diagnostics = getattr(error, "error_diagnostics", None)
    if not diagnostics:
        return str(error)
    lines = [str(getattr(error, "message", ""))]

    def add(diagnostic: object, prefix: str) -> None:
        text = str(getattr(diagnostic, "message", ""))
        if len(text) > DIAGNOSTIC_LIMIT:
            more = len(text) - DIAGNOSTIC_LIMIT
            text = f"{text[:DIAGNOSTIC_LIMIT]} ... ({more:,} characters more)"
        lines.append(f"{prefix}{getattr(diagnostic, 'location', 'unknown')}: {text}")
        for note in getattr(diagnostic, "notes", ()):
            add(note, " note: ")

    for diagnostic in diagnostics:
        add(diagnostic, "error: ")
    return "\n".join(lines)
