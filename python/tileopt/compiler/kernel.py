"""``tileopt.compile`` and the :class:`Kernel` it returns.

One call compiles one kernel: a module with a single kernel needs no name, a module with
several takes ``kernel="name"`` (the stages up to "llvm" still see the whole module, so host
functions and other kernels may sit beside it; the PTX holds only the chosen kernel).

Compilations are cached (:mod:`tileopt.compiler.cache`): the key is the input's text, every
option and the toolchain, so a second compilation of the same kernel, in this process or in
another, returns the Kernel without running MLIR or ptxas.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tileopt import ir
from tileopt._mlir_libs._site_initialize_0 import find_unsupported_syntax
from tileopt._tools import tool_path
from tileopt.builder import KernelBuilder, Scalar, View
from tileopt.compiler import cache, nvidia
from tileopt.compiler.specialize import SpecializingKernel
from tileopt.errors import CompilationError, OptionError, mlir_error_text
from tileopt.runtime.abi import ArgumentError, KernelParam, TensorMapParam
from tileopt.runtime.kernel import Kernel, KernelMetadata

#: Stages a compilation can start from (``start=``).
START_STAGES: tuple[str, ...] = ("tile", "tilegpu", "llvm", "ptx")


# ---------------------------------------------------------------------------------------------
# compile


def _is_collection(value: object) -> bool:
    """An iterable of items, not a string (whose items would be its characters)."""
    return isinstance(value, Iterable) and not isinstance(value, str | bytes)


def _signature(signature: Any) -> list[KernelParam]:
    """KernelParams from a sequence of KernelParam (or their text, ``"x: view<?xf32>"``) or a
    mapping name -> View/Scalar/KernelParam; OptionError naming the bad entry."""
    hint = ("pass signature= as a list of KernelParam (or 'name: view<?xf32>' strings) or a "
            "mapping name -> View/Scalar")
    if isinstance(signature, Mapping):
        params = []
        for name, spec in signature.items():
            if not isinstance(name, str):
                raise OptionError(f"signature entry {name!r}: names must be strings; {hint}")
            if isinstance(spec, KernelParam):
                params.append(KernelParam(name, spec.kind, spec.dtype, spec.rank))
            elif isinstance(spec, View):
                params.append(KernelParam.view(name, spec.dtype, spec.rank))
            elif isinstance(spec, Scalar):
                params.append(KernelParam.scalar(name, spec.dtype))
            else:
                raise OptionError(
                    f"signature entry {name!r}: expected a View, a Scalar or a KernelParam, got "
                    f"{spec!r}"
                )
        return params
    if not _is_collection(signature):
        raise OptionError(f"signature= got {signature!r}; {hint}")
    params = []
    for p in signature:
        if isinstance(p, str):
            try:
                p = KernelParam.parse(p)
            except ArgumentError as e:
                raise OptionError(f"signature= entry {p!r}: {e}") from None
        if not isinstance(p, KernelParam):
            raise OptionError(f"signature entries must be KernelParam, got {p!r}; {hint}")
        params.append(p)
    return params


def _check_given(derived: list[KernelParam], given: list[KernelParam] | None) -> list[KernelParam]:
    """The tile kernel's ABI; a given signature may rename its arguments but not change them."""
    if given is None:
        return derived
    strip = [(p.kind, p.dtype, p.rank) for p in given]
    if strip != [(p.kind, p.dtype, p.rank) for p in derived]:
        raise CompilationError(
            f"signature ({', '.join(map(str, given))}) does not match the tile.kernel's "
            f"arguments ({', '.join(map(str, derived))})"
        )
    return given


def _indices(option: str, by_name: Mapping[str, int], wanted: Sequence[str]) -> list[int]:
    """The argument indices of the views ``wanted`` names; OptionError naming ``option`` and
    the unknown names."""
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise OptionError(
            f"{option}= names {', '.join(map(repr, unknown))}, but the kernel's arguments "
            f"are {', '.join(by_name)}"
        )
    return [by_name[n] for n in wanted]


def _apply_to_views(
    module: ir.Module,
    kernel: ir.Operation,
    option: str,
    value: bool | Sequence[str] | Mapping[str, tuple[int, ...]],
    names: Sequence[str] | None,
    apply: Callable[..., None],
) -> None:
    """Applies ``compile(..., contiguous=)``, ``aligned=``, ... (``option``) to ``kernel``: to
    every view when ``value`` is True, else to the views it names (a mapping also gives each
    view's per-dimension values: ``apply(kernel, indices, values)``)."""
    derived = nvidia.tile_signature(kernel, names)
    if value is True:
        indices = [i for i, p in enumerate(derived) if p.kind == "view" and p.rank > 0]
    else:
        indices = _indices(option, {p.name: i for i, p in enumerate(derived)}, list(value))
    if isinstance(value, Mapping):
        apply(kernel, indices, list(value.values()))
    else:
        apply(kernel, indices)
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise CompilationError(
            f"{option}= made the module invalid:\n{mlir_error_text(e)}") from None


def _apply_same_shapes(
    module: ir.Module,
    kernel: ir.Operation,
    groups: Sequence[Sequence[str]],
    names: Sequence[str] | None,
) -> None:
    """Applies ``compile(..., same_shapes=)``: in each group of view names, every view after
    the first has the first one's shape."""
    derived = nvidia.tile_signature(kernel, names)
    by_name = {p.name: i for i, p in enumerate(derived)}
    seen: set[str] = set()
    for group in groups:
        indices = _indices("same_shapes", by_name, group)
        repeated = seen.intersection(group)
        if repeated or len(set(group)) != len(group):
            raise OptionError(
                f"same_shapes= names {', '.join(map(repr, sorted(repeated) or group))} more "
                f"than once; put views of one shape in one group"
            )
        seen.update(group)
        nvidia.make_same_shape(kernel, indices[0], indices[1:])
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        raise CompilationError(
            f"same_shapes= made the module invalid:\n{mlir_error_text(e)}") from None


class _Contexts(threading.local):
    """One MLIR context per thread for compilations. Making a context (registering and
    loading the dialects) costs several milliseconds, more than the tile stages of a small
    kernel; a context keeps every type and attribute it ever made, so it is replaced after
    :attr:`LIFETIME` compilations."""

    LIFETIME = 256

    def __init__(self) -> None:
        self.context: ir.Context | None = None
        self.uses = 0

    def get(self) -> ir.Context:
        if self.context is None or self.uses >= self.LIFETIME:
            self.context, self.uses = ir.Context(), 0
        self.uses += 1
        return self.context


_contexts = _Contexts()


def _module_text(module: Any) -> str:
    """The input's text: itself, or a Module printed with its locations."""
    if isinstance(module, ir.Module):
        return module.operation.get_asm(enable_debug_info=True)
    if isinstance(module, str):
        return module
    raise OptionError(
        f"compile takes as module= IR text, a tileopt.ir.Module or a KernelBuilder, "
        f"got {type(module).__name__}"
    )


_SSA_NAME = re.compile(r"%[\w.$-]+")
#: Ops whose regions are isolated from above: SSA names start afresh in them.
_ISOLATED_SCOPE = re.compile(r"\b(?:tile\.kernel|func\.func|gpu\.func|llvm\.func|gpu\.module"
                             r"|builtin\.module|module)\b")


def _has_forward_reference(text: str) -> bool:
    """Whether an SSA name may be used before its definition (a guess that errs on the side
    of yes: a name is defined where ``=`` follows it, or ``:`` with no space, as in argument
    lists and ``%r:2 =``; ``%x : i32`` after an op's operands is a use)."""
    defined: set[str] = set()
    scopes = [m.start() for m in _ISOLATED_SCOPE.finditer(text)]
    scope = 0
    for m in _SSA_NAME.finditer(text):
        while scope < len(scopes) and scopes[scope] < m.start():
            defined.clear()
            scope += 1
        after = text[m.end():m.end() + 8]
        assigned = after.lstrip().startswith("=") and not after.lstrip().startswith("==")
        if after.startswith(":") or assigned:
            defined.add(m.group())
        elif m.group() not in defined:
            return True
    return False


def _check_parses_in_a_child(text: str) -> None:
    """CompilationError when parsing ``text`` kills tileopt-opt. MLIR 22's parser aborts the
    process (``operation destroyed but still has uses``) on a malformed region that defines
    a name used before it, so such text is parsed in a child process first (a diagnostic
    there is left to the parse in this process, whose dialects may differ)."""
    try:
        child = subprocess.run([str(tool_path("tileopt-opt")), "-o", os.devnull],
                               input=text.encode(), capture_output=True, timeout=120,
                               check=False)
    except (OSError, subprocess.TimeoutExpired):
        return  # no tool to ask: parse in-process, as without forward references
    if child.returncode < 0:
        said = child.stderr.decode(errors="replace").split("LLVM ERROR")[0].strip()
        said = said.split("PLEASE submit")[0].strip()
        raise CompilationError(f"the input module does not parse or verify:\n{said}")


def _parse(module: Any) -> ir.Module:
    """The input as a module of the current context (a copy when it is a Module)."""
    text = _module_text(module)
    unsupported = find_unsupported_syntax(text)
    if unsupported is not None:  # upstream MLIR would abort the process on it
        offset, message = unsupported
        before = text.encode()[:offset].decode(errors="replace")  # a byte offset
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        raise CompilationError(f"the input module does not parse: {line}:{column}: {message}")
    if _has_forward_reference(text):
        _check_parses_in_a_child(text)
    try:
        mod = ir.Module.parse(text)
        mod.operation.verify()
    except ir.MLIRError as e:
        raise CompilationError(
            f"the input module does not parse or verify:\n{mlir_error_text(e)}") from None
    return mod


def _choose(kernels: Sequence[str], kernel: str | None, where: str) -> str:
    if kernel is not None:
        if kernel not in kernels:
            raise OptionError(
                f"no kernel {kernel!r} in the {where}; kernels: {', '.join(kernels) or 'none'}"
            )
        return kernel
    if len(kernels) == 1:
        return kernels[0]
    if not kernels:
        raise CompilationError(f"the {where} has no kernels")
    raise CompilationError(
        f"the {where} has {len(kernels)} kernels ({', '.join(kernels)}): "
        f"choose one with kernel='name'"
    )


def _dump(name: str, stage: str, content: str | bytes) -> None:
    """Writes a stage to ``$TILEOPT_DUMP_DIR/<kernel>.<stage>.<suffix>`` when that is set."""
    directory = os.environ.get("TILEOPT_DUMP_DIR")
    if not directory:
        return
    suffix = {"ptx": "ptx", "cubin": "cubin"}.get(stage, "mlir")
    path = Path(directory) / f"{name}.{stage}.{suffix}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    except OSError as e:
        raise OptionError(
            f"TILEOPT_DUMP_DIR={directory!r}: cannot write {path} ({e.strerror or e}); set it "
            f"to a writable directory, or unset it to dump nothing"
        ) from e


def _view_names(option: str, value: object) -> bool | list[str]:
    """The value of ``contiguous=``, ``aligned=``, ...: True/False, or a list of view names."""
    if isinstance(value, bool):
        return value
    if _is_collection(value):
        names = list(value)
        if all(isinstance(n, str) for n in names):
            return names
    raise OptionError(
        f"{option}= takes True (every view), False, or a list of view names such as ['x', 'y'], "
        f"got {value!r}"
    )


def _size_divisors(value: object) -> bool | list[str] | dict[str, tuple[int, ...]]:
    """The value of ``divisible_sizes=``: True/False, view names, or a mapping from view names
    to one positive divisor per dimension."""
    if not isinstance(value, Mapping):
        return _view_names("divisible_sizes", value)
    divisors: dict[str, tuple[int, ...]] = {}
    for name, per_dim in value.items():
        if not (isinstance(name, str) and _is_collection(per_dim) and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in per_dim)):
            raise OptionError(
                f"divisible_sizes= maps view names to one positive divisor per dimension, "
                f"e.g. {{'x': (16, 16)}}, got {name!r}: {per_dim!r}"
            )
        divisors[name] = tuple(per_dim)
    return divisors


def _groups(value: object) -> list[list[str]]:
    """The value of ``same_shapes=``: groups of view names."""
    if _is_collection(value):
        groups = [list(g) if _is_collection(g) else g for g in value]
        if all(isinstance(g, list) and len(g) >= 2 and all(isinstance(n, str) for n in g)
               for g in groups):
            return groups  # type: ignore[return-value]
    raise OptionError(
        f"same_shapes= takes groups of two or more view names, e.g. [('x', 'y', 'out')], "
        f"got {value!r}"
    )


def _tensor_maps_option(value: object, start: str) -> tuple[TensorMapParam, ...]:
    """The value of ``tensor_maps=``: TensorMapParams, only with ``start="ptx"``."""
    if value is None:
        return ()
    if start != "ptx":
        raise OptionError("tensor_maps= is for start='ptx' (the lowering records them for the "
                          "other stages)")
    if _is_collection(value):
        maps = tuple(value)
        if all(isinstance(m, TensorMapParam) for m in maps):
            return maps
    raise OptionError(
        f"tensor_maps= takes a list of TensorMapParam(view, box, swizzle), got {value!r}"
    )


#: ``compile``'s target when none is given (a sentinel tells it from an explicit None).
_DEFAULT_TARGET: Any = type("DefaultTarget", (), {"__repr__": lambda self: "'sm_90'"})()


def _is_model(source: Any) -> bool:
    """A PyTorch model (an ``nn.Module`` or a function of tensors), not tile IR."""
    if isinstance(source, str | bytes | KernelBuilder | ir.Module):
        return False
    return callable(source)


def compile(
    module: Any,
    example_inputs: Any = None,
    num_warps: int | None = None,
    *,
    target: str = _DEFAULT_TARGET,
    device: str | None = None,
    fallback: str | None = None,
    kernel: str | None = None,
    start: str = "tile",
    signature: Any = None,
    opt_level: int = 3,
    ptx_version: int | None = None,
    libdevice: str | None = None,
    assembler: str = "auto",
    contiguous: bool | Sequence[str] = False,
    aligned: bool | Sequence[str] = False,
    divisible_sizes: bool | Sequence[str] | Mapping[str, Sequence[int]] = False,
    int32_indexing: bool | Sequence[str] = False,
    same_shapes: Sequence[Sequence[str]] = (),
    fp_fusion: bool = True,
    num_stages: int | None = None,
    tma: bool = True,
    warp_specialize: bool = False,
    maxnreg: int | None = None,
    dynamic_shared_bytes: int | None = None,
    tensor_maps: Sequence[TensorMapParam] | None = None,
    specialize: bool = False,
) -> Any:
    """Compiles a PyTorch model into fused kernels, or one tile kernel, for an NVIDIA GPU.

    **A model**: ``tileopt.compile(model, (x,), target="sm_90")`` takes an ``nn.Module`` or a
    function of tensors and the example inputs to trace it with (a tuple of tensors, or one
    tensor). It exports the model (``torch.export``), imports it with torch-mlir into linalg,
    forms fused kernels (``tileopt-linalg-to-tile``), compiles each and returns a
    :class:`~tileopt.compiler.graph.CompiledGraph`: call it like the model; ``device`` picks
    where kernels run (``"cuda"``, or ``"emulator"``: each kernel's PTX in tileopt's emulator;
    None: cuda for CUDA example inputs with a driver, else the emulator). ``target`` and the
    kernel options below (``num_warps``, ``opt_level``, ``fp_fusion``, ...) apply to every
    kernel. Raises ``ExportError`` when torch.export rejects the model and
    ``UnsupportedOperatorError`` (naming the aten op and its source line) for an operator
    tileopt cannot lower; with ``fallback="eager"`` such a model is split instead, and what
    tileopt cannot compile runs in PyTorch.

    **A tile kernel**: ``tileopt.compile(kb, "sm_90")`` compiles one kernel of tile IR and
    returns a :class:`Kernel`; the rest of this docstring describes that use.

    **The compile cache** (:mod:`tileopt.compiler.cache`): kernels and a model's compiled
    specialisations are kept in memory and in ``$TILEOPT_CACHE_DIR`` (default
    ``~/.cache/tileopt``), keyed by the input, every option and the toolchain's versions; a
    hit skips MLIR and ptxas (for a model: kernel formation and code generation; torch.export
    still runs). ``TILEOPT_ALWAYS_COMPILE=1`` compiles every time.

    Args:
        module: a model (above); or IR text, a ``tileopt.ir.Module`` (not modified: it is
            copied into a context of the compilation's own) or a
            ``tileopt.builder.KernelBuilder``; PTX text when ``start="ptx"``.
        example_inputs: a model's example inputs; for tile IR, the target may be given here
            instead (``compile(kb, "sm_90")``).
        target: ``sm_XX`` (``sm_90a``: Hopper's arch-specific instructions, f16/bf16 dots on
            wgmma; ``sm_90`` keeps portable mma.sync); default ``sm_90``.
        device: a model's device (above); not used for tile IR.
        fallback: for a model: None or ``"error"`` (the default: raise the error when a part
            of the model does not compile) or ``"eager"``: a model that does not compile as
            one graph is returned as a :class:`~tileopt.compiler.fallback.FallbackGraph`,
            which runs it through ``torch.compile`` with tileopt's backend (the parts tileopt
            compiles as its kernels, the rest in PyTorch; ``.report`` says which, and
            ``TILEOPT_LOGS=fallback`` logs it); only an OptionError or DeviceError is
            raised then. Not used for tile IR (None only).
        num_warps: warps per program (block = ``32 * num_warps`` threads), a power of two in
            1..32. None: 4 with ``start="tile"``; at a later stage the number the layouts were
            made for, which the kernel's PTX ``.reqntid`` (or ``.maxntid``) directive records
            (4 for PTX without one). A number that disagrees with the directive is an error:
            the block would not be the one the code was made for.
        kernel: which kernel, when the module has several.
        start: the stage the module is already at: ``"tile"`` (tile IR, the default),
            ``"tilegpu"`` (layout-annotated tile IR), ``"llvm"`` (a ``gpu.module`` in the
            GPU/NVVM/LLVM/arith/cf/math dialects; the upstream passes that finish stage "llvm"
            still run on it) or ``"ptx"``.
        signature: the kernel's ABI when ``start`` is "llvm" or "ptx" (where memref types are
            gone): a sequence of :class:`KernelParam`, or a mapping ``name -> View/Scalar``
            like a KernelBuilder's arguments. At "tile"/"tilegpu" it is derived from the
            ``tile.kernel`` signature (names from the builder or ``arg<i>``).
        opt_level, ptx_version, libdevice, assembler, fp_fusion, num_stages, tma,
            warp_specialize, maxnreg: see :class:`tileopt.compiler.nvidia.Options`
            (``fp_fusion=False`` keeps every float multiply and add separately rounded;
            ``num_stages`` (default 3) is the depth of the software pipeline of loops that
            feed tensor-core dots; ``tma=False`` keeps sm_90a's pipelines on cp.async
            instead of TMA; ``warp_specialize=True`` gives sm_90a's TMA pipelines a producer
            warp, in one more warpgroup of the block; ``maxnreg`` caps the registers per
            thread, from tile IR only).
        dynamic_shared_bytes: with ``start="ptx"``, the dynamic shared memory its launches
            pass, for PTX that declares an ``.extern .shared`` array (PTX does not record the
            size). From the other stages the lowering records it.
        tensor_maps: with ``start="ptx"``, the TMA tensor maps (:class:`TensorMapParam`:
            the view each is over, its box and swizzle) that the PTX takes after the
            parameters of its arguments, one ``.param .align 64 .b8 [128]`` each. From the
            other stages the lowering records them (``tile.tensor_maps``).
        contiguous: views whose innermost stride the kernel may take as 1 (``True``: every
            view; or their names): their memref types get a static inner stride of 1 before
            the tile stage, so the lowering's 128-bit loads and stores need no run-time stride
            check; the launcher then rejects arrays with another inner stride. Only with
            ``start="tile"``; like ``tileopt.builder.View(..., contiguous=True)``.
        aligned: views (``True``: every view; or their names) whose first element's address
            and dynamic strides the kernel may take as multiples of 16 bytes
            (``tile.divisibility = 16``, Triton's divisibility hint): with ``contiguous``, their
            tiles move in 16-byte vectors with no run-time check, which saves instructions,
            registers and compile time. The launcher rejects arrays that break the promise.
            Only with ``start="tile"``.
        divisible_sizes: views (``True``: every view; or their names) whose innermost size
            the kernel may take as a multiple of 16 elements (``tile.size_divisibility``, as
            Triton's JIT specializes a size divisible by 16): a vector access then never
            straddles the view's end, so it needs one predicate and no scalar tail. Or a
            mapping from view names to one divisor per dimension, e.g. ``{"x": (16, 16)}``
            (1: no promise), as Triton's JIT specializes every size divisible by 16: a tile
            whose offset and size are multiples of its extent along a dimension checks its
            bounds there once. The launcher rejects arrays of other sizes. Only with
            ``start="tile"``.
        int32_indexing: views (``True``: every view; or their names) whose sizes and element
            offsets the kernel may take as below 2**31 (``tile.index_bitwidth = 32``): their
            index arithmetic is 32-bit, which saves registers, as Triton's ``i32`` arguments
            do. The launcher rejects larger arrays. Only with ``start="tile"``.
        same_shapes: groups of view names, e.g. ``[("x", "y", "out")]``: the views of a group
            have one shape (``tile.same_shape_as``), so their bounds checks use the first
            view's sizes and accesses to them share predicates, like a Triton kernel that
            masks every pointer with one ``n``. The launcher rejects other shapes. Only with
            ``start="tile"``.
        specialize: instead of one kernel for every array, return a
            :class:`~tileopt.compiler.specialize.SpecializingKernel`: each launch finds the
            promises its arrays keep (``contiguous``, ``aligned``, ``divisible_sizes`` by 16,
            ``int32_indexing``, as Triton's JIT specialises on its arguments) and runs the
            kernel compiled with them, compiling it on first use. Not with those four
            options; only with ``start="tile"``.

    Returns:
        A :class:`Kernel` (with ``specialize=True``, a ``SpecializingKernel``): in this
        process, the same object for the same compilation (the compile cache's hit in
        memory).

    Raises:
        OptionError: an argument has a wrong type or value (a CompilationError naming it), or
            ``$TILEOPT_DUMP_DIR`` cannot be written.
        CompilationError: MLIR failed to parse, verify or lower (the message holds MLIR's
            diagnostics and the locations, for a KernelBuilder the lines that built the ops),
            the PTX does not follow the kernel ABI, or ``num_warps`` disagrees with the PTX.
        PTXAssemblyError: ptxas rejected the PTX (a CompilationError quoting the PTX line).
    """
    if fallback is not None and fallback not in ("error", "eager"):
        raise OptionError(
            f"fallback={fallback!r}; it takes None or 'error' (raise), or 'eager' (what "
            f"tileopt cannot compile runs in PyTorch)"
        )
    if _is_model(module):
        from tileopt.compiler.graph import compile_graph

        if specialize is not False:
            raise OptionError("specialize= is for tile kernels: a model's kernels are "
                              "specialised on its inputs' shapes already")

        kernel_options = {
            name: value for name, value in (
                ("num_warps", num_warps), ("opt_level", opt_level), ("ptx_version", ptx_version),
                ("libdevice", libdevice), ("assembler", assembler), ("fp_fusion", fp_fusion),
                ("num_stages", num_stages), ("tma", tma), ("warp_specialize", warp_specialize),
                ("maxnreg", maxnreg),
            ) if value != {"opt_level": 3, "assembler": "auto", "fp_fusion": True,
                           "tma": True, "warp_specialize": False}.get(name)
        }
        if target is _DEFAULT_TARGET:
            target = "sm_90"
        if fallback == "eager":
            from tileopt.compiler.fallback import compile_with_fallback

            return compile_with_fallback(module, example_inputs, target=target, device=device,
                                         **kernel_options)
        return compile_graph(module, example_inputs, target=target, device=device,
                             **kernel_options)
    if fallback is not None:
        raise OptionError("fallback= is for PyTorch models; tile IR compiles or raises")
    if isinstance(example_inputs, str):
        if target is not _DEFAULT_TARGET:
            raise OptionError("target given twice: as the second argument and as target=")
        target = example_inputs
    elif example_inputs is not None:
        raise OptionError(
            f"compile of tile IR takes the target as its second argument, got "
            f"{type(example_inputs).__name__}; example inputs are for PyTorch models"
        )
    if target is _DEFAULT_TARGET:
        target = "sm_90"
    options = nvidia.Options(target, 4 if num_warps is None else num_warps, opt_level,
                             ptx_version, libdevice, assembler, fp_fusion,
                             3 if num_stages is None else num_stages, tma, warp_specialize,
                             maxnreg)
    if maxnreg is not None and start not in ("tile", "tilegpu"):
        raise OptionError(f"maxnreg= is applied by the tile lowering; start={start!r} has "
                          f"passed it (set .maxnreg in the PTX instead)")
    if dynamic_shared_bytes is not None:
        nvidia.check_int("dynamic_shared_bytes", dynamic_shared_bytes, range(0, 1 << 20),
                         "a byte count below 1 MiB")
        if start != "ptx":
            raise OptionError("dynamic_shared_bytes= is for start='ptx' (the lowering records "
                              "it for the other stages)")
    maps = _tensor_maps_option(tensor_maps, start)
    nvidia.check_choice("start", start, START_STAGES)
    if kernel is not None and not isinstance(kernel, str):
        raise OptionError(f"kernel= takes the kernel's name (a str) or None, got {kernel!r}")
    if start == "ptx" and not isinstance(module, str):
        raise OptionError(f"start='ptx' takes the PTX text, got {type(module).__name__}")
    source = module  # as given: what a specialization compiles
    names: list[str] | None = None
    if isinstance(module, KernelBuilder):
        names = list(vars(module.args))
        module = module.module
    given = _signature(signature) if signature is not None else None
    asm: dict[str, str | bytes] = {}
    times: dict[str, float] = {}

    view_options: dict[str, tuple[Any, Callable[..., None]]] = {
        option: (_view_names(option, value), apply)
        for option, value, apply in (
            ("contiguous", contiguous, nvidia.make_contiguous),
            ("aligned", aligned, nvidia.make_aligned),
            ("int32_indexing", int32_indexing, nvidia.make_int32_indexed),
        )
    }
    view_options["divisible_sizes"] = (
        _size_divisors(divisible_sizes), nvidia.make_size_divisible
    )
    groups = _groups(same_shapes)
    if start != "tile" and (groups or any(v for v, _ in view_options.values())):
        raise OptionError(
            "contiguous=, aligned=, divisible_sizes=, int32_indexing= and same_shapes= need "
            "start='tile' (the memref types)"
        )
    if not isinstance(specialize, bool):
        raise OptionError(f"specialize= takes True or False, got {specialize!r}")
    if specialize:
        if start != "tile" or any(v for v, _ in view_options.values()):
            raise OptionError(
                "specialize=True chooses contiguous=, aligned=, divisible_sizes= and "
                "int32_indexing= at each launch from its arrays: it takes tile IR "
                "(start='tile') and none of those four options"
            )
        return _specializing(source, _module_text(module), names, given, groups, kernel,
                             options, num_warps, signature=signature, same_shapes=same_shapes)
    text = _module_text(module)
    # num_warps=None differs from the default only after the tile stages (taken from the PTX).
    key = _kernel_key(text, options, num_warps is None and start != "tile", start, kernel,
                      names, given, [v for v, _ in view_options.values()], groups,
                      dynamic_shared_bytes, maps)
    cached = load_cached(key)
    if cached is not None:
        for stage, content in cached.asm.items():
            _dump(cached.name, stage, content)
        return cached
    if start == "ptx":
        ptx = text
        name = _choose(list(nvidia.ptx_entries(ptx)), kernel, "PTX")
        params = given
    else:
        t0 = time.perf_counter()
        with _contexts.get(), ir.Location.unknown():
            mod = _parse(text)
            if start in ("tile", "tilegpu"):
                ops = {nvidia.sym_name(op): op for op in nvidia.tile_kernels(mod)}
                name = _choose(list(ops), kernel, "module")
                for option, (value, apply) in view_options.items():
                    if value:
                        _apply_to_views(mod, ops[name], option, value, names, apply)
                if groups:
                    _apply_same_shapes(mod, ops[name], groups, names)
                params = _check_given(nvidia.tile_signature(ops[name], names), given)
            else:
                kernels = [nvidia.sym_name(op) for op in nvidia.gpu_kernels(mod)]
                name = _choose(kernels, kernel, "module's gpu.module")
                params = given
            times["parse"] = time.perf_counter() - t0
            stages: dict[str, Any] = {}
            nvidia.add_stages(stages, options, name)
            if start == "tilegpu":  # given with its layouts: nothing to run for it
                stages["tilegpu"] = lambda src: src
            elif start == "llvm":  # given in GPU/LLVM dialects: only the upstream passes,
                # and LLVM's code generation in a child process (it may abort on given IR)
                stages["llvm"] = lambda src: nvidia.make_llvm(src, options, lower_tile=False)
                stages["ptx"] = lambda src: nvidia.make_ptx_isolated(src, options, name)
            src: Any = mod
            for stage in nvidia.STAGES[nvidia.STAGES.index(start):nvidia.STAGES.index("cubin")]:
                t = time.perf_counter()
                src = stages[stage](src)
                times[stage] = time.perf_counter() - t
                asm[stage] = src if isinstance(src, str) else str(src)
                _dump(name, stage, asm[stage])
            ptx = src
            dynamic_shared_bytes = nvidia.recorded_dynamic_shared_bytes(str(asm["llvm"]), name)
            maps = nvidia.recorded_tensor_maps(str(asm["llvm"]), name)
    if params is None:
        raise CompilationError(
            f"kernel {name}: pass signature= (the kernel's views and scalars) when starting at "
            f"stage {start!r}; memref types are gone by then"
        )
    nvidia.check_tensor_map_params(name, params, maps)
    nvidia.check_ptx_abi(ptx, name, params, maps)
    dynamic = nvidia.check_dynamic_shared(ptx, name, dynamic_shared_bytes)
    # The launch's warps: the PTX's block (with warp_specialize, a producer warpgroup may
    # follow the layouts' warps), which a num_warps given for the layouts must explain.
    warps = nvidia.ptx_num_warps(ptx, name)
    block_warps = options.num_warps if warps is None else warps
    producer = options.warp_specialize and warps == options.num_warps + 4 and start != "ptx"
    if warps is not None and warps != options.num_warps and not producer and (
            num_warps is not None or start == "tile"):
        raise CompilationError(
            f"kernel {name}: num_warps={options.num_warps}, but its code is made for {warps} "
            f"warps (its PTX's block is {32 * warps} threads): pass num_warps={warps}, or "
            f"None to take it from the kernel, or recompile from start='tile'"
        )

    shared = nvidia.shared_bytes(ptx, name) + dynamic  # (retuning adds no .shared)
    result = nvidia.make_cubin(ptx, options, name, start != "ptx", shared)  # retune ours
    ptx = asm["ptx"] = result.ptx
    times["cubin"] = result.seconds
    if result.cubin is not None:
        asm["cubin"] = result.cubin
        _dump(name, "cubin", result.cubin)
    info = result.info
    metadata = KernelMetadata(
        name=name,
        target=options.target,
        num_warps=block_warps,
        shared_bytes=shared,
        abi=tuple(params),
        registers=info.registers if info else None,
        spill_store_bytes=info.spill_store_bytes if info else None,
        spill_load_bytes=info.spill_load_bytes if info else None,
        assembler=result.assembler,
        dynamic_shared_bytes=dynamic,
        tensor_maps=maps,
    )
    compiled = Kernel(asm, metadata, times, key)
    cache.store("kernel", key, compiled, Kernel.to_payload)
    return compiled


def _specializing(
    source: Any,
    text: str,
    names: list[str] | None,
    given: list[KernelParam] | None,
    groups: list[list[str]],
    kernel: str | None,
    options: nvidia.Options,
    num_warps: int | None,
    **passed: Any,
) -> SpecializingKernel:
    """``compile(source, ..., specialize=True)`` (``text``, ``names``, ``given`` and
    ``groups`` as ``compile`` made them of ``source``, ``signature=`` and ``same_shapes=``):
    a SpecializingKernel whose variants are ``compile(source, ...)`` with the promises each
    launch's arrays keep."""
    with _contexts.get(), ir.Location.unknown():  # the ABI every launch is checked against
        mod = _parse(text)
        ops = {nvidia.sym_name(op): op for op in nvidia.tile_kernels(mod)}
        name = _choose(list(ops), kernel, "module")
        if groups:
            _apply_same_shapes(mod, ops[name], groups, names)
        params = _check_given(nvidia.tile_signature(ops[name], names), given)
    fixed = {**asdict(options), "num_warps": num_warps, "kernel": kernel, **passed}

    def variant(**promises: Any) -> Kernel:
        return compile(source, **fixed, **promises)

    return SpecializingKernel(name, params, variant)


# ---------------------------------------------------------------------------------------------
# the compile cache's side of a Kernel


def _kernel_key(text: str, options: nvidia.Options, *choices: Any) -> str:
    """The cache key of a compilation: the input ``text``, the options and every other
    argument that changes the result (``choices``), the pass pipelines and the toolchain."""
    return cache.key(
        "kernel",
        cache.toolchain(),
        repr((nvidia.PIPELINES, nvidia.UPSTREAM_TO_LLVM, nvidia.TO_PTX)),
        repr((options, *choices)),
        text,
    )


def load_cached(key: str) -> Kernel | None:
    """The Kernel that the compile cache holds under ``key`` (from memory, else from disk,
    with ``times == {"cache": seconds}``), None if there is none."""
    t0 = time.perf_counter()

    def decode(payload: dict[str, Any]) -> Kernel:
        kernel = Kernel.from_payload(payload, key)
        kernel.times["cache"] = time.perf_counter() - t0
        return kernel

    return cache.lookup("kernel", key, decode)
