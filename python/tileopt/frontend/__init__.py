"""tileopt.frontend: PyTorch models in, linalg-on-tensors out.

:func:`import_graph` captures a model (an ``nn.Module`` or a function of tensors) with
``torch.export`` and lowers it with torch-mlir to linalg-on-tensors, and hands on an
:class:`ImportedGraph`:

- ``linalg``: the MLIR module as text (tileopt's MLIR parses it) with ``func.func @forward``,
  whose ops carry locations naming their aten op and the user's source line
  (:func:`describe_location` reads them);
- ``inputs``: one :class:`GraphInput` per argument of ``@forward``: the model's parameters,
  buffers and lifted tensor constants (arguments, never constants baked into the IR), then
  the user's inputs;
- ``output_spec``: how ``@forward``'s flat results make the model's output
  (:func:`unflatten_outputs`);
- ``fx_graph`` (the exported ATen graph, readable) and ``times``.

What cannot be imported raises a :class:`~tileopt.errors.CompilationError`:
:class:`~tileopt.errors.ExportError` when torch.export (or torch-mlir's importer) rejects the
model, :class:`~tileopt.errors.UnsupportedOperatorError` naming an operator torch-mlir cannot
lower and the line it came from. Importing this package imports neither torch nor torch-mlir;
:func:`import_graph` does, on its first call.
"""

from __future__ import annotations

from tileopt.frontend.importer import (
    SUPPORTED_DTYPES,
    GraphInput,
    ImportedGraph,
    OutputSpec,
    import_graph,
    unflatten_outputs,
)
from tileopt.frontend.locations import describe_location

__all__ = [
    "SUPPORTED_DTYPES",
    "GraphInput",
    "ImportedGraph",
    "OutputSpec",
    "describe_location",
    "import_graph",
    "unflatten_outputs",
]
