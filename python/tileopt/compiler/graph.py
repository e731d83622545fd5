"""``compile_graph``: a PyTorch model compiled into fused tile kernels and host code.

The pipeline, stage by stage (each stage's output is kept in :attr:`CompiledGraph.stages`)::

    model, example inputs
      | tileopt.frontend.import_graph: torch.export + torch-mlir    -> "fx", "linalg"
      | tileopt-linalg-to-tile (LINALG_TO_TILE_PIPELINE)            -> "tile"
      |   kernel formation: tile.kernel ops + a host func.func of tile.launch ops
      | tileopt.compile, one tile.kernel at a time                  -> "ptx:<kernel>"
      | hostcode.translate: the host function as Python             -> "host"
      v
    CompiledGraph(*inputs) -> outputs, in the model's structure

A :class:`CompiledGraph` keeps one specialisation per shape of the user inputs (a call with
new shapes imports and compiles the model again); parameters, buffers and constants are read
from the live module on every call, so updating a weight needs no recompilation.

Specialisations are cached (:mod:`tileopt.compiler.cache`) by the linalg text, the inputs and
the options: the entry holds the tile module and its kernels' cache keys, so a compilation of
the same model in another process runs torch.export and torch-mlir, then only parses the tile
module, translates its host function and reads its kernels.

The part after kernel formation is :func:`compile_tile_module` / :class:`TileProgram`: a tile
module (text or ``tileopt.ir.Module``) compiled into kernels and host code, runnable on its
own, which is how hand-written tile modules are tested.
"""

from __future__ import annotations

import importlib
import inspect
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tileopt import ir
from tileopt.compiler import cache, hostcode
from tileopt.compiler.kernel import Kernel, _contexts, _dump, _parse, compile, load_cached
from tileopt.compiler.nvidia import max_shared_bytes
from tileopt.errors import (
    ArgumentError,
    CompilationError,
    DeviceError,
    OptionError,
    mlir_error_text,
)

#: The pass pipeline that turns the linalg function of an imported graph into a tile module.
LINALG_TO_TILE_PIPELINE = "builtin.module(tileopt-linalg-to-tile)"


#: The shared memory a block needs for attention kernels of head dimension 256 (q, a block
#: of keys and one of values; convert-linalg-to-tile's chooseAttentionTiling).
WIDE_ATTENTION_SHARED_BYTES = 96 * 1024


def linalg_to_tile_pipeline(allow_tf32: bool = False, target: str | None = None) -> str:
    """Kernel formation's pass pipeline; with ``allow_tf32`` its f32 matmuls and attention
    may round their inputs to tf32 (tensor cores, ``input_precision = tf32``). On a
    ``target`` whose blocks have less than 96 KiB of shared memory (sm_75), attention kernels
    take head dimensions up to 128, not 256."""
    options = []
    if allow_tf32:
        options.append("allow-tf32=true")
    # (A malformed target is the GPU compiler's to name.)
    if (target is not None and re.match(r"sm_\d", target)
            and max_shared_bytes(target) < WIDE_ATTENTION_SHARED_BYTES):
        options.append("max-head-dim=128")
    if not options:
        return LINALG_TO_TILE_PIPELINE
    return f"builtin.module(tileopt-linalg-to-tile{{{' '.join(options)}}})"


def tf32_allowed() -> bool:
    """Whether PyTorch lets f32 matmuls use tf32 (``torch.backends.cuda.matmul.fp32_precision
    == "tf32"``, which ``allow_tf32 = True`` and ``set_float32_matmul_precision("high")`` set),
    as Inductor reads it: a model compiled then gets tf32 tensor cores for its f32 matmuls."""
    import torch

    return getattr(torch.backends.cuda.matmul, "fp32_precision", "ieee") == "tf32"


#: The devices a CompiledGraph runs on.
GRAPH_DEVICES: tuple[str, ...] = ("emulator", "cuda")

# Arguments of tileopt.compile that compile_graph sets itself.
_OWN_COMPILE_ARGS = ("module", "target", "kernel", "start", "signature")


def _kernel_option_names() -> list[str]:
    return [p for p in inspect.signature(compile).parameters if p not in _OWN_COMPILE_ARGS]


def _check_kernel_options(options: Mapping[str, Any]) -> None:
    allowed = _kernel_option_names()
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise OptionError(
            f"unknown kernel option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; compile_graph passes {', '.join(allowed)} to "
            f"tileopt.compile for every kernel"
        )


# ---------------------------------------------------------------------------------------------
# kernel formation


def _unsupported_error(message: str, op: str | None, source: str | None) -> CompilationError:
    """A ``tileopt.errors.UnsupportedOperatorError`` (CompilationError where that class is not
    there yet) with attributes ``op`` and ``source``."""
    from tileopt import errors

    cls = getattr(errors, "UnsupportedOperatorError", CompilationError)
    try:
        err = cls(message, op=op, source=source)
    except TypeError:
        err = cls(message)
    for name, value in (("op", op), ("source", source)):
        if getattr(err, name, None) is None:
            setattr(err, name, value)
    return err


def form_kernels(
    linalg: str | ir.Module,
    *,
    describe_location: Callable[[str], tuple[str | None, str | None]] | None = None,
    pipeline: str = LINALG_TO_TILE_PIPELINE,
) -> ir.Module:
    """Runs kernel formation (``pipeline``) on a linalg module; returns the tile module.

    Must be called inside an ``ir.Context`` (the result lives in it). ``linalg`` is text (as
    torch-mlir prints it) or a module, which is copied.

    Raises:
        UnsupportedOperatorError: a diagnostic of the pass starts with ``"unsupported:"``; the
            message names the ATen operator and the model's source line from the diagnostic's
            location (``describe_location``).
        CompilationError: the input does not parse, the pipeline is not registered, or the
            pass failed otherwise (the message holds MLIR's diagnostics).
    """
    module = _parse(linalg)
    try:
        from tileopt.passmanager import PassManager

        pm = PassManager.parse(pipeline)
    except ValueError as e:
        raise CompilationError(
            f"kernel formation: the pass pipeline {pipeline!r} does not parse or names a pass "
            f"this build does not register ({e}); rebuild tileopt with the pass"
        ) from e
    try:
        pm.run(module.operation)
    except ir.MLIRError as e:
        for diag in getattr(e, "error_diagnostics", []):
            message = str(diag.message)
            if message.startswith("unsupported:"):
                loc = str(diag.location)
                op, source = describe_location(loc) if describe_location else (None, None)
                what = message.removeprefix("unsupported:").strip()
                raise _unsupported_error(
                    f"tileopt cannot compile {op or 'an operator'}"
                    f"{f' at {source}' if source else ''} yet: {what} (location {loc}); "
                    f"compute it outside the compiled graph or rewrite it with supported ops",
                    op, source,
                ) from None  # MLIR's error holds the whole function: this names the op
        raise CompilationError(
            f"kernel formation ({pipeline}) failed:\n{mlir_error_text(e)}") from None
    return module


# ---------------------------------------------------------------------------------------------
# a tile module compiled


@dataclass
class TileProgram:
    """A tile module compiled: one :class:`Kernel` per launched kernel and the host code.

    Attributes:
        kernels: Kernel by the name the host code launches; kernels whose tile IR is the same
            (apart from the name) share one Kernel.
        fused: the ``tile.fused`` string of each kernel (what kernel formation put in it).
        host: the host function as Python (:class:`~tileopt.compiler.hostcode.HostProgram`).
        stages: ``"tile"`` (the module as MLIR text), ``"host"`` (the Python source) and
            ``"ptx:<kernel>"`` per kernel.
        times: seconds: ``"codegen"`` (all kernels), ``"codegen:<kernel>"`` each (0 where a
            cached Kernel was reused) and ``"host"``.
        kernel_keys: the compile cache key of each kernel's Kernel, by the launched name.
    """

    kernels: dict[str, Kernel]
    fused: dict[str, str]
    host: hostcode.HostProgram
    stages: dict[str, str] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    kernel_keys: dict[str, str] = field(default_factory=dict)

    def bind(
        self,
        device: str = "emulator",
        *,
        torch_device: Any = None,
        on_launch: Callable[[str, tuple[int, int, int], Any], None] | None = None,
        **emulator_options: Any,
    ) -> Callable[..., tuple[Any, ...]]:
        """The host function, callable on tensors: ``fn(*inputs) -> tuple of outputs``.

        Args:
            device: ``"emulator"`` (CPU tensors, every kernel runs its PTX in the emulator)
                or ``"cuda"`` (CUDA tensors).
            torch_device: where buffers and constants are made; by default ``"cpu"`` for the
                emulator and ``"cuda"`` for cuda.
            on_launch: called after every launch with the kernel's name, the grid and what
                ``Kernel.launch`` returned (the emulator's ``LaunchStats``; None on cuda).
            emulator_options: passed to every emulator launch (``max_steps``, ...).
        """
        import torch

        if device not in GRAPH_DEVICES:
            raise OptionError(f"device={device!r}; expected one of {', '.join(GRAPH_DEVICES)}")
        if torch_device is None:
            torch_device = "cpu" if device == "emulator" else "cuda"
        kernels = self.kernels
        options = emulator_options if device == "emulator" else {}

        def launch(name: str, grid: tuple[int, int, int], *args: Any) -> None:
            if any(g == 0 for g in grid):
                return  # an empty tensor: no programs to run
            result = kernels[name].launch(grid, *args, device=device, **options)
            if on_launch is not None:
                on_launch(name, grid, result)

        def empty(shape: tuple[int, ...], dtype: Any) -> Any:
            return torch.empty(shape, dtype=dtype, device=torch_device)

        return self.host.bind(launch, empty, torch_device)

    def summary_lines(self) -> list[str]:
        """One line per distinct kernel: name, registers, PTX size, what it fused."""
        names: dict[int, list[str]] = {}  # Kernel id -> the names it is launched by
        for name, k in self.kernels.items():
            names.setdefault(id(k), []).append(name)
        width = max((len(n[0]) for n in names.values()), default=0)
        lines = []
        for first, *others in names.values():
            k = self.kernels[first]
            md = k.metadata
            regs = "?" if md.registers is None else str(md.registers)
            ptx = str(k.asm.get("ptx", ""))
            line = (f"  {first:<{width}}  registers {regs:>3}  PTX {len(ptx) / 1024:6.1f} KiB"
                    f"  {_ptx_instructions(ptx, md.name):>5} instructions")
            if others:
                line += f"  (also launched as {', '.join(others)})"
            if self.fused.get(first):
                line += f"  fused: {self.fused[first]}"
            lines.append(line)
        return lines


def _ptx_instructions(ptx: str, kernel: str) -> int:
    """PTX instructions of ``kernel`` (0 when they cannot be counted)."""
    from tileopt.runtime.ptx import ptx_instruction_count

    try:
        return ptx_instruction_count(ptx, kernel)
    except Exception:  # only for a summary line
        return 0


_FUSED_ATTR = re.compile(r'\s*tile\.fused\s*=\s*"(?:[^"\\]|\\.)*"\s*,?')


def _cache_key(op: ir.Operation, name: str) -> str:
    """The kernel's IR without its name, its tile.fused note and locations."""
    text = op.get_asm(enable_debug_info=False)
    text = text.replace(f"tile.kernel @{name}(", "tile.kernel @kernel(", 1)
    return _FUSED_ATTR.sub(" ", text)


def _kernel_asm(op: Any, kernel_options: Mapping[str, Any]) -> str:
    """``op``'s text with debug locations. The pipeline depth that kernel formation chose
    for it (``tile.num_stages``, which the lowering takes over the option) gives way to a
    ``num_stages`` the caller asked for."""
    if "num_stages" not in kernel_options or "tile.num_stages" not in op.attributes:
        return op.get_asm(enable_debug_info=True)
    stages = op.attributes["tile.num_stages"]
    del op.attributes["tile.num_stages"]
    try:
        return op.get_asm(enable_debug_info=True)
    finally:
        op.attributes["tile.num_stages"] = stages


def compile_tile_module(
    module: str | ir.Module,
    *,
    target: str = "sm_90",
    function: str = "forward",
    input_descriptions: Sequence[str] | None = None,
    kernel_cache: dict[str, Kernel] | None = None,
    **kernel_options: Any,
) -> TileProgram:
    """Compiles a tile module: every launched ``tile.kernel`` and the host function.

    Args:
        module: tile IR text or a ``tileopt.ir.Module``: ``tile.kernel`` ops, ``memref.global``
            constants and a host ``func.func`` named ``function`` (see
            :mod:`tileopt.compiler.hostcode` for the ops it may hold).
        target: the GPU (``sm_90``), as for ``tileopt.compile``.
        function: the host function's name.
        input_descriptions: a comment per host argument for the generated source.
        kernel_cache: Kernels by their IR (without name and locations); filled and reused, so
            that a recompilation for new shapes compiles only kernels that changed.
        kernel_options: passed to ``tileopt.compile`` for every kernel (``num_warps``,
            ``opt_level``, ``fp_fusion``, ...).

    Returns:
        A :class:`TileProgram`; ``program.bind("emulator")`` makes it callable.

    Raises:
        CompilationError: the module does not parse, the host function holds an op host code
            does not handle, or a kernel fails to compile (its name in the message).
        OptionError: an unknown kernel option.
    """
    _check_kernel_options(kernel_options)
    if isinstance(module, str):
        with _contexts.get(), ir.Location.unknown():
            return compile_tile_module(
                _parse(module), target=target, function=function,
                input_descriptions=input_descriptions, kernel_cache=kernel_cache,
                **kernel_options,
            )
    reuse = {} if kernel_cache is None else kernel_cache
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    host = hostcode.translate(module, function, input_descriptions=input_descriptions)
    times["host"] = time.perf_counter() - t0
    ops = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
           for op in module.body.operations if op.operation.name == "tile.kernel"}
    kernels: dict[str, Kernel] = {}
    kernel_keys: dict[str, str] = {}
    fused: dict[str, str] = {}
    stages: dict[str, str] = {"tile": str(module), "host": host.source}
    total = 0.0
    for name in host.kernel_names:
        op = ops[name]
        if "tile.fused" in op.attributes:
            fused[name] = " ".join(ir.StringAttr(op.attributes["tile.fused"]).value.split())
        key = f"{target} {sorted(kernel_options.items())!r}\n{_cache_key(op, name)}"
        t = time.perf_counter()
        if key not in reuse:
            # A module of this kernel alone: the stages see nothing else.
            text = "module {\n" + _kernel_asm(op, kernel_options) + "\n}\n"
            options = dict(kernel_options)
            if "num_warps" not in options and "tile.num_warps" in op.attributes:
                # The warps kernel formation chose for the kernel's block sizes.
                options["num_warps"] = ir.IntegerAttr(op.attributes["tile.num_warps"]).value
            try:
                reuse[key] = compile(text, target, **options)
            except CompilationError as e:
                try:
                    renamed = type(e)(f"kernel @{name} of the tile module: {e}")
                except TypeError:  # an error class with other arguments: keep it, add a note
                    e.add_note(f"while compiling kernel @{name} of the tile module")
                    raise
                raise renamed from e
        seconds = time.perf_counter() - t
        kernels[name] = compiled = reuse[key]
        if compiled.cache_key is not None:
            kernel_keys[name] = compiled.cache_key
        times[f"codegen:{name}"] = seconds
        total += seconds
        stages[f"ptx:{name}"] = str(kernels[name].asm["ptx"])
    times["codegen"] = total
    return TileProgram(kernels, fused, host, stages, times, kernel_keys)


# ---------------------------------------------------------------------------------------------
# the compile cache's side of a graph


def _graph_key(graph: Any, target: str, kernel_options: Mapping[str, Any],
               pipeline: str) -> str:
    """The cache key of a specialisation: the imported graph's linalg text and inputs, the
    target, the kernel options, kernel formation's pipeline and the toolchain."""
    inputs = [(inp.name, inp.kind, inp.target, str(inp.dtype), tuple(inp.shape))
              for inp in graph.inputs]
    return cache.key(
        "graph",
        cache.toolchain(),
        pipeline,
        repr((target, sorted(kernel_options.items()), inputs, graph.num_user_inputs)),
        graph.linalg,
    )


def _graph_payload(program: TileProgram) -> dict[str, Any]:
    """A TileProgram as the JSON payload of a cache entry: the tile module's text, the host
    function's name and each kernel's cache key and fusion note. The host code is translated
    again on a hit (an entry holds no code to run)."""
    return {"tile": program.stages["tile"], "function": program.host.function,
            "kernels": program.kernel_keys, "fused": program.fused}


def _check_graph_payload(payload: Any) -> dict[str, Any]:
    """``payload`` if it has the shape :func:`_graph_payload` gives, else ValueError."""
    ok = (isinstance(payload, dict) and set(payload) == {"tile", "function", "kernels", "fused"}
          and isinstance(payload["tile"], str) and isinstance(payload["function"], str)
          and all(isinstance(d, dict) and all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in d.items())
                  for d in (payload["kernels"], payload["fused"])))
    if not ok:
        raise ValueError("not a graph entry")
    return payload  # type: ignore[no-any-return]


def _cached_program(key: str, descriptions: Sequence[str]) -> TileProgram | None:
    """The TileProgram of the graph entry ``key``, None when the cache has no entry or lacks
    one of its kernels. Must be called inside an ``ir.Context``."""
    entry = cache.lookup("graph", key, _check_graph_payload)
    if entry is None:
        return None
    t0 = time.perf_counter()
    try:
        host = hostcode.translate(_parse(entry["tile"]), entry["function"],
                                  input_descriptions=descriptions)
    except CompilationError:  # should not happen; compile it again
        return None
    times = {"host": time.perf_counter() - t0}
    kernels: dict[str, Kernel] = {}
    stages = {"tile": entry["tile"], "host": host.source}
    for name in host.kernel_names:
        t = time.perf_counter()
        k = load_cached(entry["kernels"].get(name, ""))
        if k is None:
            return None
        if k not in kernels.values():  # $TILEOPT_DUMP_DIR, as a compilation would
            for stage, code in k.asm.items():
                _dump(k.name, stage, code)
        kernels[name] = k
        times[f"codegen:{name}"] = time.perf_counter() - t
        stages[f"ptx:{name}"] = str(k.asm["ptx"])
    times["codegen"] = sum(times[f"codegen:{name}"] for name in kernels)
    return TileProgram(kernels, dict(entry["fused"]), host, stages, times,
                       dict(entry["kernels"]))


# ---------------------------------------------------------------------------------------------
# the compiled graph


def _torch_dtype(d: Any) -> Any:
    """A torch.dtype from a GraphInput's dtype (a torch.dtype, ``"torch.float32"``,
    ``"float32"`` or an MLIR name such as ``"f32"``)."""
    import torch

    if isinstance(d, torch.dtype):
        return d
    name = str(d).removeprefix("torch.")
    name = hostcode.TORCH_DTYPES.get(name, name)
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise CompilationError(f"the imported graph has an input of unknown dtype {d!r}")
    return value


@dataclass
class _Specialisation:
    """The model compiled for one set of user input shapes."""

    graph: Any
    program: TileProgram
    forward: Callable[..., tuple[Any, ...]]
    stages: dict[str, str]
    times: dict[str, float]
    dtypes: list[Any]
    #: Whether its f32 matmuls may use tf32 (:func:`tf32_allowed` when it was compiled).
    allow_tf32: bool
    #: Whether the host code returned an output in memory it was given (an argument's, an
    #: earlier output's) at the first call; None before it. Without, no output is ever
    #: checked for a copy (:func:`_in_eager_memory`): the code's own buffers are new.
    returns_given_memory: bool | None = None


def _describe_input(inp: Any) -> str:
    if inp.kind == "user":
        return f"input {inp.target} ({inp.name})" if inp.name else f"input {inp.target}"
    return f"{inp.kind} {inp.target!r}"


class CompiledGraph:
    """A model compiled into tile kernels and host code; call it like the model.

    Attributes:
        model: the model (an ``nn.Module`` or a function); its parameters, buffers and tensor
            constants are read on every call.
        target: the GPU the kernels are compiled for (``sm_90``).
        device: ``"emulator"`` or ``"cuda"``.
        last_stats: the emulator's ``LaunchStats`` of each launch of the last call (empty on
            cuda).
        specialisations: the compiled variants by the shapes of the user inputs.

    The other attributes (:attr:`kernels`, :attr:`stages`, :attr:`host_code`, :attr:`times`,
    :attr:`graph`) describe the current specialisation: the one the last call used (at first,
    the example inputs').
    """

    def __init__(
        self,
        model: Any,
        example_inputs: Sequence[Any],
        *,
        target: str = "sm_90",
        device: str | None = None,
        frontend: Any = None,
        formation: Callable[[str], str | ir.Module] | None = None,
        **kernel_options: Any,
    ) -> None:
        """Compiles ``model`` for ``example_inputs``; see :func:`compile_graph`.

        ``frontend`` (a module-like object with ``import_graph``, ``unflatten_outputs`` and
        ``describe_location``; default ``tileopt.frontend``) and ``formation`` (linalg text
        -> tile module; default the ``tileopt-linalg-to-tile`` pipeline) replace those stages,
        for tests.
        """
        if not isinstance(target, str):
            raise OptionError(f"target= takes a GPU name such as 'sm_90', got {target!r}")
        _check_kernel_options(kernel_options)
        self.model = model
        self.target = target
        self.kernel_options = dict(kernel_options)
        self.device = self._choose_device(device, example_inputs)
        self._frontend = frontend
        self._formation = formation
        self._kernel_cache: dict[str, Kernel] = {}
        self._constants: dict[int, Any] = {}
        self.specialisations: dict[tuple[tuple[int, ...], ...], _Specialisation] = {}
        self.last_stats: list[Any] = []
        self._last_min_bytes = 0
        flat = self._flatten(example_inputs)
        self._current = self._specialise(tuple(flat), flat)
        self._check_user_inputs(flat)  # e.g. CUDA example inputs for device="emulator"

    # -- compilation

    @staticmethod
    def _choose_device(device: str | None, example_inputs: Sequence[Any]) -> str:
        if device is None:
            leaves = CompiledGraph._flatten(example_inputs)
            if any(getattr(t, "is_cuda", False) for t in leaves):
                from tileopt.runtime import cuda

                if cuda.driver_available()[0]:
                    return "cuda"
            return "emulator"
        if device not in GRAPH_DEVICES:
            raise OptionError(
                f"device={device!r}; compile_graph runs on {', '.join(GRAPH_DEVICES)} "
                f"(None: cuda for CUDA example inputs where a driver works, else emulator)"
            )
        if device == "cuda":
            from tileopt.runtime import cuda

            ok, reason = cuda.driver_available()
            if not ok:
                raise DeviceError(f"device='cuda': {reason}; use device='emulator'")
        return device

    @staticmethod
    def _flatten(inputs: Any) -> list[Any]:
        """The user inputs as a list: a tensor alone is one input (as ``import_graph`` takes
        it); a GraphInput's ``target`` is a position in this list."""
        if hasattr(inputs, "shape") or not isinstance(inputs, Sequence):
            return [inputs]
        return list(inputs)

    def _get_frontend(self) -> Any:
        if self._frontend is None:
            try:
                self._frontend = importlib.import_module("tileopt.frontend")
            except ImportError as e:
                raise CompilationError(
                    f"compile_graph needs tileopt.frontend (torch.export + torch-mlir), which "
                    f"does not import: {e}"
                ) from e
        return self._frontend

    def _specialise(self, example_inputs: tuple[Any, ...], flat: list[Any]) -> _Specialisation:
        frontend = self._get_frontend()
        graph = frontend.import_graph(self.model, example_inputs)
        times: dict[str, float] = dict(getattr(graph, "times", {}) or {})
        descriptions = []
        for inp in graph.inputs:
            shape = ", ".join(map(str, inp.shape))
            dtype = str(_torch_dtype(inp.dtype)).removeprefix("torch.")
            label = inp.name if inp.kind == "user" else f"{inp.kind} {inp.target}"
            descriptions.append(f"{label} {dtype}[{shape}]")
        allow_tf32 = tf32_allowed()
        pipeline = linalg_to_tile_pipeline(allow_tf32, self.target)
        # A formation of a test's own is not part of the key: those are compiled every time.
        key = None if self._formation is not None else _graph_key(
            graph, self.target, self.kernel_options, pipeline)
        with _contexts.get(), ir.Location.unknown():
            t0 = time.perf_counter()
            program = None if key is None else _cached_program(key, descriptions)
            if program is not None:
                times["formation"] = 0.0
                times["cache"] = time.perf_counter() - t0
            else:
                t0 = time.perf_counter()
                if self._formation is not None:
                    tile = self._formation(graph.linalg)
                    tile_module = _parse(tile) if isinstance(tile, str) else tile
                else:
                    tile_module = form_kernels(graph.linalg, describe_location=getattr(
                        frontend, "describe_location", None), pipeline=pipeline)
                times["formation"] = time.perf_counter() - t0
                program = compile_tile_module(
                    tile_module, target=self.target, input_descriptions=descriptions,
                    kernel_cache=self._kernel_cache, **self.kernel_options,
                )
                if key is not None and set(program.kernel_keys) == set(program.kernels):
                    cache.store("graph", key, _graph_payload(program))
        if program.host.num_inputs != len(graph.inputs):
            raise CompilationError(
                f"the host function takes {program.host.num_inputs} arguments, but the imported "
                f"graph has {len(graph.inputs)} inputs (user inputs, parameters, buffers, "
                f"constants); kernel formation must keep the function's arguments"
            )
        times.update(program.times)
        stages = {"fx": graph.fx_graph, "linalg": graph.linalg, **program.stages}
        forward = program.bind(self.device, torch_device=self._torch_device(flat),
                               on_launch=self._record)
        spec = _Specialisation(graph, program, forward, stages, times,
                               [_torch_dtype(inp.dtype) for inp in graph.inputs], allow_tf32)
        self.specialisations[self._key(flat)] = spec
        return spec

    def _torch_device(self, flat: list[Any]) -> Any:
        if self.device == "emulator":
            return "cpu"
        for t in flat:
            if getattr(t, "is_cuda", False):
                return t.device
        return "cuda"

    @staticmethod
    def _key(flat: list[Any]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(s) for s in t.shape) for t in flat)

    def _record(self, name: str, grid: tuple[int, int, int], stats: Any) -> None:
        if stats is not None:
            self.last_stats.append(stats)

    # -- calls

    def _check_user_inputs(self, flat: list[Any]) -> None:
        import torch

        spec = self._current
        user = {inp.target: (inp, dt) for inp, dt in zip(spec.graph.inputs, spec.dtypes,
                                                          strict=True) if inp.kind == "user"}
        expected = spec.graph.num_user_inputs
        if len(flat) != expected:
            names = ", ".join(user[i][0].name or f"input {i}" for i in sorted(user))
            raise ArgumentError(
                f"the compiled graph takes {expected} tensor input{'s' * (expected != 1)} "
                f"({names}), got {len(flat)}"
            )
        want_device = "cpu" if self.device == "emulator" else "cuda"
        for i, t in enumerate(flat):
            inp, dtype = user.get(i, (None, None))
            what = _describe_input(inp) if inp is not None else f"input {i}"
            if not isinstance(t, torch.Tensor):
                raise ArgumentError(f"{what} must be a torch.Tensor, got {type(t).__name__}")
            if t.device.type != want_device:
                raise ArgumentError(
                    f"{what} is on {t.device}, but the graph runs on {self.device} "
                    f"({want_device} tensors): pass tensor.to({want_device!r}) or compile with "
                    f"device={'cuda' if t.device.type == 'cuda' else 'emulator'!r}"
                )
            if inp is None:
                continue
            if t.dtype != dtype:
                raise ArgumentError(
                    f"{what} has dtype {t.dtype}, but the graph was compiled for {dtype}: pass "
                    f"tensor.to({dtype}) or compile again for this dtype"
                )
            if t.dim() != len(inp.shape):
                raise ArgumentError(
                    f"{what} has rank {t.dim()} (shape {tuple(t.shape)}), but the graph was "
                    f"compiled for rank {len(inp.shape)} (shape {tuple(inp.shape)})"
                )

    def _live_tensor(self, inp: Any, dtype: Any) -> Any:
        """The current value of a parameter, buffer or constant of the model."""
        import torch

        what = _describe_input(inp)
        value: Any = None
        try:
            if inp.kind == "parameter":
                value = self.model.get_parameter(inp.target)
            elif inp.kind == "buffer":
                value = self.model.get_buffer(inp.target)
            elif inp.kind == "constant":
                value = self.model
                for part in str(inp.target).split("."):
                    value = getattr(value, part)
            else:
                raise CompilationError(f"the imported graph has an input of kind {inp.kind!r}")
        except AttributeError:
            value = None
        if not isinstance(value, torch.Tensor):
            if inp.kind == "constant" and isinstance(getattr(inp, "value", None), torch.Tensor):
                # A constant the model does not hold as an attribute (torch.export lifted it).
                key = id(inp)
                if key not in self._constants:
                    self._constants[key] = inp.value.to(self._current_device())
                return self._constants[key]
            raise ArgumentError(
                f"the model has no {what} any more; compile it again (tileopt.compile)"
            )
        want = "cpu" if self.device == "emulator" else "cuda"
        if value.device.type != want:
            raise ArgumentError(
                f"{what} is on {value.device}, but the graph runs on {self.device} ({want} "
                f"tensors): move the model with model.to({want!r})"
            )
        if value.dtype != dtype or tuple(value.shape) != tuple(inp.shape):
            raise ArgumentError(
                f"{what} is now {value.dtype}{list(value.shape)}, but the graph was compiled "
                f"for {dtype}{list(inp.shape)}; compile the model again (tileopt.compile)"
            )
        return value.detach()

    def _current_device(self) -> Any:
        return "cpu" if self.device == "emulator" else "cuda"

    def __call__(self, *inputs: Any) -> Any:
        """Runs the compiled graph; returns the outputs in the model's structure.

        Raises:
            ArgumentError: wrong number of inputs, or an input of another dtype, rank or
                device than the graph was compiled for (named by position and name); a
                parameter whose dtype or shape changed.
        """
        import torch

        flat = self._flatten(inputs)
        self._check_user_inputs(flat)
        key = self._key(flat)
        spec = self.specialisations.get(key)
        if spec is None or spec.allow_tf32 != tf32_allowed():
            spec = self._specialise(tuple(flat), flat)
        self._current = spec
        args = []
        for inp, dtype in zip(spec.graph.inputs, spec.dtypes, strict=True):
            if inp.kind == "user":
                args.append(flat[inp.target].detach())
            else:
                args.append(self._live_tensor(inp, dtype))
        self.last_stats = []
        with torch.no_grad():
            outputs = list(spec.forward(*args))
            if spec.returns_given_memory is not False:
                spec.returns_given_memory = _in_eager_memory(
                    outputs, args, getattr(spec.graph.output_spec, "memory", ()))
        self._last_min_bytes = _io_bytes(args, outputs)
        frontend = self._get_frontend()
        return frontend.unflatten_outputs(spec.graph, list(outputs))

    # -- what was compiled

    @property
    def graph(self) -> Any:
        """The ImportedGraph of the current specialisation."""
        return self._current.graph

    @property
    def program(self) -> TileProgram:
        """The compiled tile module of the current specialisation."""
        return self._current.program

    @property
    def kernels(self) -> list[Kernel]:
        """The Kernels, one per distinct kernel, in the order of their first launch."""
        seen: dict[int, Kernel] = {}
        for k in self._current.program.kernels.values():
            seen.setdefault(id(k), k)
        return list(seen.values())

    @property
    def stages(self) -> dict[str, str]:
        """The code at every stage: ``"fx"``, ``"linalg"``, ``"tile"``, ``"host"`` (the
        generated Python) and ``"ptx:<kernel>"`` per kernel."""
        return self._current.stages

    @property
    def host_code(self) -> str:
        """The generated Python host code."""
        return self._current.program.host.source

    @property
    def times(self) -> dict[str, float]:
        """Seconds per stage: the frontend's (``"export"``, ``"torch-mlir"``, ...),
        ``"formation"``, ``"codegen"`` (all kernels) and ``"codegen:<kernel>"`` each,
        ``"host"``; a specialisation read from the compile cache has ``"cache"`` (reading it
        all), ``"formation"`` 0 and, as ``"codegen"``, the time to read its kernels."""
        return self._current.times

    @property
    def last_global_bytes(self) -> int:
        """Global bytes the kernels of the last emulator call loaded and stored (requested)."""
        return sum(s.global_load_bytes + s.global_store_bytes for s in self.last_stats)

    @property
    def last_sector_bytes(self) -> int:
        """Global bytes the kernels of the last emulator call moved in 32-byte sectors."""
        return 32 * sum(s.global_load_sectors + s.global_store_sectors for s in self.last_stats)

    @property
    def last_unique_bytes(self) -> int:
        """Global bytes of the distinct 32-byte sectors each kernel of the last emulator call
        read and wrote, summed over the kernels: the DRAM traffic when the L2 cache holds a
        kernel's working set (``LaunchStats.global_load_unique_sectors``)."""
        return 32 * sum(
            s.global_load_unique_sectors + s.global_store_unique_sectors for s in self.last_stats
        )

    @property
    def last_min_bytes(self) -> int:
        """Bytes of the last call's inputs (user inputs, parameters, buffers, constants) and
        of its outputs that are new tensors: what a perfectly fused graph reads and writes."""
        return self._last_min_bytes

    def summary(self) -> str:
        """The device, target and one line per kernel: name, registers, PTX size, fused ops."""
        program = self._current.program
        head = (f"CompiledGraph of {_model_name(self.model)} on {self.device} ({self.target}): "
                f"{len(self.kernels)} kernel{'s' * (len(self.kernels) != 1)}, "
                f"{len(self.specialisations)} specialisation"
                f"{'s' * (len(self.specialisations) != 1)}")
        return "\n".join([head, *program.summary_lines()])

    def __repr__(self) -> str:
        names = ", ".join(self._current.program.kernels)
        return (f"<CompiledGraph {_model_name(self.model)} device={self.device} "
                f"target={self.target} kernels=[{names}]>")


def _model_name(model: Any) -> str:
    return getattr(model, "__name__", None) or type(model).__name__


def _in_eager_memory(outputs: list[Any], args: Sequence[Any],
                     memory: Sequence[tuple[str, int] | None]) -> bool:
    """Replaces by a copy each of ``outputs`` that the host code returns in an argument's
    memory or an earlier output's where eager PyTorch returns it in memory of its own
    (``memory``: the frontend's ``OutputSpec.memory``): ``x.clone()`` and ``x * 1.0`` fold
    to ``x``, and a later in-place change of either must not show in the other. Returns
    whether any output was in such memory."""
    def key(t: Any) -> int | None:  # None: no memory (an empty tensor)
        storage = t.untyped_storage()
        return storage.data_ptr() if storage.nbytes() else None

    owner = {key(a): ("input", k) for k, a in reversed(list(enumerate(args)))}
    owner.pop(None, None)
    given = False
    for j, out in enumerate(outputs):
        found = owner.get(key(out)) if j < len(memory) else None
        given = given or found is not None
        if found is not None and found != memory[j]:
            outputs[j] = out = out.clone()
        if key(out) is not None:
            owner.setdefault(key(out), ("result", j))
    return given


def _io_bytes(inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    def nbytes(t: Any) -> int:
        return int(t.numel() * t.element_size())

    storages = set()
    total = 0
    for t in inputs:
        if hasattr(t, "untyped_storage"):
            storages.add(t.untyped_storage().data_ptr())
            total += nbytes(t)
    seen_out = set()
    for t in outputs:
        if not hasattr(t, "untyped_storage"):
            continue
        ptr = t.untyped_storage().data_ptr()
        if ptr in storages or ptr in seen_out:
            continue  # a view of an input or of another output
        seen_out.add(ptr)
        total += nbytes(t)
    return total


def compile_graph(
    model: Any,
    example_inputs: Sequence[Any],
    *,
    target: str = "sm_90",
    device: str | None = None,
    **kernel_options: Any,
) -> CompiledGraph:
    """Compiles a PyTorch model (an ``nn.Module`` or a function of tensors) into fused tile
    kernels and Python host code.

    Args:
        model: what to compile; ``model(*example_inputs)`` must run.
        example_inputs: the inputs to trace with: a tuple (or list) of tensors, or one
            tensor; their shapes are the first specialisation.
        target: the GPU the kernels are compiled for (``sm_90``, ``sm_80``, ...).
        device: ``"emulator"`` (kernels run in the PTX emulator on CPU tensors) or ``"cuda"``;
            None picks cuda when the example inputs are CUDA tensors and a driver works, else
            the emulator.
        kernel_options: passed to ``tileopt.compile`` for every kernel (``num_warps``,
            ``opt_level``, ``fp_fusion``, ...).

    Returns:
        A :class:`CompiledGraph`: call it like the model.

    Raises:
        ExportError: torch.export or torch-mlir cannot import the model.
        UnsupportedOperatorError: kernel formation does not handle an operator of the model
            (named with its source line).
        CompilationError: any other failure of a stage (MLIR's diagnostics in the message).
        OptionError: an unknown option or device.
        DeviceError: ``device="cuda"`` without a usable CUDA driver.
    """
    return CompiledGraph(model, example_inputs, target=target, device=device, **kernel_options)
