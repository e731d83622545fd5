"""The NVIDIA pipeline: tile IR -> layouts -> LLVM/NVVM -> PTX -> cubin, one stage at a time.

Read it top to bottom like Triton's ``third_party/nvidia/backend/compiler.py``:

==========  ====================================================================================
stage       what it does
==========  ====================================================================================
tile        parse and verify the input; ``canonicalize``, ``tile-narrow-integer-tiles`` (index
            tiles in i32 where their values fit), ``canonicalize``, ``cse``
tilegpu     ``tile-assign-layouts``, ``tile-remove-layout-conversions``, ``canonicalize``, ``cse``:
            every tile value gets a distributed layout for ``num_warps`` warps on ``target``
llvm        ``convert-tile-to-nvvm`` (tile ops per thread), then upstream passes that finish the
            ``gpu.module`` in the LLVM/NVVM dialects (:data:`UPSTREAM_TO_LLVM`)
ptx         ``gpu-module-to-binary{format=isa}`` on the chosen kernel with an ``#nvvm.target`` set
            here (chip, -O level, libdevice linked for math); the PTX text is read out of the
            ``gpu.binary``
cubin       the ptxas executable (whole-program, as nvcc and Triton) turns the PTX into a cubin,
            nvJitLink (in-process) is the fallback; either runs ptxas with ``-v`` for registers
            and spills (:func:`make_cubin` says why ptxas comes first)
==========  ====================================================================================

Every pass pipeline lives in :data:`PIPELINES` (and :data:`UPSTREAM_TO_LLVM`): the one place to
edit when a pass or an option changes. The same strings run from the command line::

    tileopt-opt k.mlir --pass-pipeline='builtin.module(canonicalize,cse)'

and ``tileopt-opt k.mlir --tile-to-nvvm="chip=sm_90 num-warps=4"`` (lib/Conversion/TileToNVVM/
Pipelines.cpp) runs the tile, tilegpu and llvm stages in one go; ``python -m tileopt.compiler``
prints any stage.
"""

from __future__ import annotations

import functools
import numbers
import operator
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tileopt import ir, passmanager
from tileopt.compiler import tools
from tileopt.errors import (
    CompilationError,
    OptionError,
    PTXAssemblyError,
    TileoptError,
    mlir_error_text,
)
from tileopt.runtime.abi import (
    TENSOR_MAP_BITS,
    ArgumentError,
    KernelParam,
    TensorMapParam,
    check_tensor_maps,
)
from tileopt.runtime.ptx import ENTRY, ptx_entries

#: Stage names, in order; ``Kernel.asm`` has one entry per stage that ran.
STAGES: tuple[str, ...] = ("tile", "tilegpu", "llvm", "ptx", "cubin")

#: Pass pipelines of the MLIR stages; ``{target}`` and ``{num_warps}`` are replaced by the
#: values of :meth:`Options.pass_options`. The tile passes are tileopt's own (lib/, dialects/).
PIPELINES: dict[str, tuple[str, ...]] = {
    "tile": ("canonicalize", "tile-narrow-integer-tiles", "canonicalize", "cse"),
    "tilegpu": (
        "tile-assign-layouts{num-warps={num_warps} target={target}}",
        "tile-remove-layout-conversions",
        "canonicalize",
        "cse",
    ),
    "llvm": (
        "convert-tile-to-nvvm{chip={target} features={features} fp-fusion={fp_fusion} "
        "num-stages={num_stages} tma={tma} warp-specialize={warp_specialize} "
        "max-registers={max_registers}}",
    ),
}

#: Upstream passes that finish the ``llvm`` stage: whatever gpu/arith/cf/math/scf/nvvm ops the
#: tile lowering leaves in the ``gpu.module`` become LLVM dialect (``gpu.func`` -> ``llvm.func``
#: with ``nvvm.kernel``, math -> libdevice calls). On IR that is already LLVM they change
#: nothing, so a module given at stage "llvm" goes through them too.
UPSTREAM_TO_LLVM: tuple[str, ...] = (
    "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,cse)",
    "mark-tensor-map-params",
    "convert-nvvm-to-llvm",
    "reconcile-unrealized-casts",
    "check-nvptx-input",
)

#: The upstream pass that serializes a ``gpu.module`` with an ``#nvvm.target``; ``isa`` = PTX.
TO_PTX: tuple[str, ...] = ("gpu-module-to-binary{format=isa}",)


#: The GPUs LLVM 22's NVPTX back end knows (``llc -march=nvptx64 -mcpu=help``); it would take
#: another ``sm_XX`` with a warning and emit PTX for no chip, which ptxas rejects.
CHIPS: tuple[str, ...] = tuple(
    "sm_20 sm_21 sm_30 sm_32 sm_35 sm_37 sm_50 sm_52 sm_53 sm_60 sm_61 sm_62 sm_70 sm_72 sm_75 "
    "sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_90a sm_100 sm_100a sm_100f sm_101 sm_101a sm_101f "
    "sm_103 sm_103a sm_103f sm_110 sm_110a sm_110f sm_120 sm_120a sm_120f sm_121 sm_121a "
    "sm_121f".split()
)

#: The PTX ISA versions (x10) that LLVM 22's NVPTX back end can emit: its ``+ptxNN`` features
#: (``llc -march=nvptx64 -mattr=help``) from :func:`minimum_ptx_version`'s floor of 8.0 on.
#: LLVM ignores an unknown ``+ptxNN`` with a warning, so :class:`Options` rejects the others.
PTX_VERSIONS: tuple[int, ...] = (80, 81, 82, 83, 84, 85, 86, 87, 88, 90)


def minimum_ptx_version(target: str) -> int:
    """The oldest PTX ISA version (x10) that supports ``target``, at least 80: the same table
    as ``minimumPtxVersion`` in lib/Conversion/TileToNVVM/TileToNVVM.cpp, which picks the
    lowering's default."""
    sm = int(re.match(r"sm_(\d+)", target).group(1))  # type: ignore[union-attr]
    return {100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88}.get(sm, 88 if sm > 90 else 80)


def _version(v: int) -> str:
    return f"{v // 10}.{v % 10}"


def check_int(option: str, value: object, allowed: Sequence[int], hint: str) -> int:
    """``value`` as an int if it is an integer (not a bool) in ``allowed``, else an
    :class:`OptionError` naming ``option`` and ``hint`` (what values it takes)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionError(f"{option} must be an int, {hint}; got {value!r} "
                          f"({type(value).__name__})")
    if int(value) not in allowed:
        raise OptionError(f"{option} must be {hint}, got {value!r}")
    return int(value)


def check_choice(option: str, value: object, choices: Sequence[str]) -> str:
    """``value`` if it is one of the strings ``choices``, else an :class:`OptionError`."""
    if not isinstance(value, str) or value not in choices:
        raise OptionError(
            f"{option} must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )
    return value


@dataclass(frozen=True)
class Options:
    """Options of one NVIDIA compilation; each is checked here (:class:`OptionError` names it).

    Attributes:
        target: the GPU, ``sm_XX`` (``sm_80``, ``sm_90``, ``sm_90a``, ...).
        num_warps: warps per program, a power of two in 1..32; the block is
            ``(32 * num_warps, 1, 1)``.
        opt_level: LLVM's -O level for the NVPTX back end (0-3). sm_90a compiles at 1 at
            least: at 0, LLVM's register allocation copies wgmma's accumulators between its
            commit and its wait, reading them while the MMA still writes them.
        ptx_version: the PTX ISA version to emit, e.g. ``80`` for 8.0 (one of
            :data:`PTX_VERSIONS`, not older than ``target`` needs); None takes the lowest
            one that ``target`` needs, or 8.1 on sm_90 and newer where a kernel adds f32
            tiles into memory (``red.global.add.v4.f32``; an older version adds one
            element an instruction).
        libdevice: path of ``libdevice.10.bc`` to link for math functions; None finds the one
            of the ``nvidia-nvvm`` wheel (or ``$TILEOPT_LIBDEVICE``).
        assembler: PTX -> cubin with ``"ptxas"``, ``"nvjitlink"`` or ``"auto"`` (ptxas where
            found, else nvJitLink); see :func:`make_cubin`.
        fp_fusion: let float multiplies and adds fuse into ``fma`` (one rounding instead of
            two), as nvcc (``--fmad=true``) and Triton (``enable_fp_fusion``) do by default.
        num_stages: software-pipelining depth of loops that feed tensor-core dots (1..8, as
            Triton's ``num_stages``): the copies of the next ``num_stages - 1`` iterations'
            operands are in flight while a dot runs. 1 waits for each iteration's copies. A
            kernel's ``tile.num_stages`` attribute takes precedence; kernels whose stages do
            not fit the chip's shared memory get fewer.
        tma: on sm_90a, let pipelined loops feeding wgmma copy their operands with the
            Tensor Memory Accelerator (``cp.async.bulk.tensor`` on tensor maps that the
            launchers build, see docs/kernel-abi.md) where the views allow it, as Triton's
            tensor descriptors do; False keeps ``cp.async``.
        warp_specialize: on sm_90a, give a kernel whose one pipelined loop copies with TMA
            a producer warp of its own, in a warpgroup after the others (the block is then
            ``32 * (num_warps + 4)`` threads, which the kernel's metadata records): it issues
            the copies, the ``num_warps``
            consumer warps wait for them and run the dots, with no barrier across the block
            in the loop, as Triton's ``warp_specialize`` and CUTLASS's kernels do. Kernels
            it does not apply to compile as without it.
        maxnreg: the registers per thread that ptxas may give the kernel (24..255, its
            ``.maxnreg``, as Triton's ``maxnreg``), or None for ptxas's choice: fewer
            registers let more blocks share an SM, at the price of spills where the code
            needs more. A warp-specialised kernel keeps that count in every warpgroup (its
            producer gives none to the consumers). Applies to kernels lowered from tile IR.
    """

    target: str = "sm_90"
    num_warps: int = 4
    opt_level: int = 3
    ptx_version: int | None = None
    libdevice: str | None = None
    assembler: str = "auto"
    fp_fusion: bool = True
    num_stages: int = 3
    tma: bool = True
    warp_specialize: bool = False
    maxnreg: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not re.fullmatch(r"sm_\d{2,3}[af]?", self.target):
            raise OptionError(
                f"target {self.target!r} is not an NVIDIA GPU name like 'sm_80' or 'sm_90a': "
                f"pass target='sm_XX'"
            )
        if self.target not in CHIPS:
            raise OptionError(
                f"target {self.target!r} is not a GPU that LLVM 22's NVPTX back end knows; "
                f"known: {', '.join(CHIPS[CHIPS.index('sm_70'):])} (and older)"
            )
        set_ = functools.partial(object.__setattr__, self)  # frozen: normalise numpy ints
        set_("num_warps", check_int("num_warps", self.num_warps, (1, 2, 4, 8, 16, 32),
                                    "a power of two in 1..32"))
        set_("opt_level", check_int("opt_level", self.opt_level, range(4), "0, 1, 2 or 3"))
        if self.ptx_version is not None:
            need = minimum_ptx_version(self.target)
            versions = [v for v in PTX_VERSIONS if v >= need]
            shown = ", ".join(map(str, versions))
            hint = f"one of {shown} (PTX {_version(versions[0])} to {_version(versions[-1])})"
            ptx = check_int("ptx_version", self.ptx_version, PTX_VERSIONS,
                            f"a PTX ISA version LLVM 22 can emit, x10: {hint}, or None")
            if ptx < need:  # LLVM aborts the process on a PTX version too old for the chip.
                raise OptionError(
                    f"ptx_version={ptx} cannot target {self.target}, which needs PTX "
                    f"{_version(need)} or newer: pass one of {shown}, or None"
                )
            set_("ptx_version", ptx)
        if self.libdevice is not None:
            if not isinstance(self.libdevice, str | os.PathLike):
                raise OptionError(
                    f"libdevice must be the path of libdevice.10.bc (a str or Path) or None, "
                    f"got {self.libdevice!r}"
                )
            if not os.path.isfile(self.libdevice):
                raise OptionError(
                    f"libdevice={str(self.libdevice)!r} is not a file: pass the path of "
                    f"libdevice.10.bc (from the nvidia-nvvm wheel), or None to find it"
                )
            set_("libdevice", os.fspath(self.libdevice))
        check_choice("assembler", self.assembler, ("auto", "ptxas", "nvjitlink"))
        if not isinstance(self.fp_fusion, bool):
            raise OptionError(f"fp_fusion must be True or False, got {self.fp_fusion!r}")
        set_("num_stages", check_int("num_stages", self.num_stages, range(1, 9), "in 1..8"))
        if not isinstance(self.tma, bool):
            raise OptionError(f"tma must be True or False, got {self.tma!r}")
        if not isinstance(self.warp_specialize, bool):
            raise OptionError(
                f"warp_specialize must be True or False, got {self.warp_specialize!r}")
        if self.maxnreg is not None:
            set_("maxnreg", check_int("maxnreg", self.maxnreg, range(24, 256),
                                      "24..255 (registers per thread), or None"))

    def pass_options(self) -> dict[str, Any]:
        """The values substituted into :data:`PIPELINES`."""
        # The lowering picks the PTX version (the chip's oldest, or newer for
        # instructions a kernel uses) unless ptx_version is given.
        features = "" if self.ptx_version is None else f"+ptx{self.ptx_version}"
        return {"target": self.target, "features": features, "num_warps": self.num_warps,
                "fp_fusion": str(self.fp_fusion).lower(), "num_stages": self.num_stages,
                "tma": str(self.tma).lower(),
                "warp_specialize": str(self.warp_specialize).lower(),
                "max_registers": self.maxnreg or 0}

    def nvvm_target(self, features: str | None = None, link_libdevice: bool = True) -> str:
        """The ``#nvvm.target`` attribute the ptx stage serializes with.

        ``features`` (e.g. ``"+ptx80"``, from the target the lowering attached) is used unless
        :attr:`ptx_version` is set; with neither, LLVM picks the PTX version. libdevice is
        linked only with ``link_libdevice`` (a module that calls no ``__nv_*`` function does
        not need it, and linking it costs 1-2 ms).
        """
        level = max(self.opt_level, 1) if self.target == "sm_90a" else self.opt_level
        fields = [f"O = {level}", f'chip = "{self.target}"']
        if self.ptx_version is not None:
            features = f"+ptx{self.ptx_version}"
        if features:
            fields.append(f'features = "{features}"')
        libdevice = (self.libdevice or tools.find_libdevice()) if link_libdevice else None
        if libdevice is not None:
            quoted = str(libdevice).replace("\\", "\\\\").replace('"', '\\"')
            fields.append(f'link = ["{quoted}"]')
        return f"#nvvm.target<{', '.join(fields)}>"


# ---------------------------------------------------------------------------------------------
# running passes


def pipeline_text(passes: Sequence[str], options: Options) -> str:
    """``builtin.module(p1,p2,...)`` with the options filled in."""
    filled = []
    for p in passes:
        for key, value in options.pass_options().items():
            p = p.replace("{" + key + "}", str(value))
        filled.append(p)
    return "builtin.module(" + ",".join(filled) + ")"


def run_passes(module: ir.Module, stage: str, passes: Sequence[str], options: Options) -> None:
    """Runs ``passes`` on ``module`` in place; CompilationError with MLIR's diagnostics."""
    text = pipeline_text(passes, options)
    try:
        pm = passmanager.PassManager.parse(text, context=module.context)
    except ValueError as e:
        raise CompilationError(
            f"stage {stage}: the pass pipeline does not parse (is every pass registered? the "
            f"tile passes come with tileopt's native build):\n  {text}\n{e}"
        ) from e
    try:
        pm.run(module.operation)
    except ir.MLIRError as e:
        raise CompilationError(f"stage {stage}: {text} failed:\n{mlir_error_text(e)}") from None


# ---------------------------------------------------------------------------------------------
# kernels and their ABI


def _is_kernel_func(op: ir.Operation) -> bool:
    attrs = op.attributes
    return op.name in ("gpu.func", "llvm.func") and (
        "gpu.kernel" in attrs or "nvvm.kernel" in attrs
    )


def sym_name(op: ir.Operation) -> str:
    """The ``sym_name`` of a symbol op."""
    return ir.StringAttr(op.attributes["sym_name"]).value


def tile_kernels(module: ir.Module) -> list[ir.Operation]:
    """The ``tile.kernel`` ops at the top of ``module``."""
    return [op.operation for op in module.body.operations if op.operation.name == "tile.kernel"]


def gpu_kernels(module: ir.Module) -> list[ir.Operation]:
    """The kernel functions (``gpu.kernel``/``nvvm.kernel``) of ``module``'s ``gpu.module``s."""
    found = []
    for op in module.body.operations:
        if op.operation.name == "gpu.module":
            for f in op.operation.regions[0].blocks[0].operations:
                if _is_kernel_func(f.operation):
                    found.append(f.operation)
    return found


def tile_signature(kernel: ir.Operation, names: Sequence[str] | None = None) -> list[KernelParam]:
    """The ABI of a ``tile.kernel``: a view per memref argument, a scalar per other argument."""
    fn_type = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    params = []
    for i, t in enumerate(fn_type.inputs):
        name = names[i] if names is not None and i < len(names) else f"arg{i}"
        if isinstance(t, ir.MemRefType):
            dyn = ir.ShapedType.get_dynamic_size()
            dyn_stride = ir.ShapedType.get_dynamic_stride_or_offset()
            strides, _ = t.get_strides_and_offset()  # the offset is folded into the pointer
            params.append(KernelParam.view(
                name, str(t.element_type), t.rank,
                shape=tuple(None if d == dyn else d for d in t.shape),
                strides=tuple(None if s == dyn_stride else s for s in strides),
                divisibility=arg_divisibility(kernel, i),
                size_divisibility=arg_size_divisibility(kernel, i),
                index_bitwidth=arg_index_bitwidth(kernel, i),
                same_shape_as=arg_same_shape_as(kernel, i),
            ))
        elif isinstance(t, ir.IntegerType | ir.IndexType | ir.FloatType):
            params.append(KernelParam.scalar(name, str(t),
                                             index_bitwidth=arg_index_bitwidth(kernel, i)))
        else:
            raise CompilationError(
                f"kernel @{sym_name(kernel)}: argument {i} has type {t}, which the kernel ABI "
                f"does not pass (views are strided memrefs, scalars are integers or floats)"
            )
    return params


def make_contiguous(kernel: ir.Operation, indices: Sequence[int]) -> None:
    """Gives the view arguments ``indices`` of a ``tile.kernel`` a static innermost stride of 1.

    ``memref<?x?xf32, strided<[?, ?], offset: ?>>`` becomes ``strided<[?, 1], offset: ?>``: the
    lowering may then move contiguous tiles with 128-bit loads and stores without checking the
    stride at run time, and the launcher checks that the arrays passed have that stride. The
    parameter list does not change. Must run in the kernel's context, with a location.
    """
    block = kernel.regions[0].blocks[0]
    fn_type = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    inputs = list(fn_type.inputs)
    for i in indices:
        t = inputs[i]
        if not isinstance(t, ir.MemRefType) or t.rank == 0:
            raise CompilationError(
                f"kernel @{sym_name(kernel)}: argument {i} ({t}) is not a view of rank >= 1; only "
                f"views can be made contiguous"
            )
        strides, offset = t.get_strides_and_offset()
        layout = ir.StridedLayoutAttr.get(offset, [*strides[:-1], 1])
        inputs[i] = ir.MemRefType.get(t.shape, t.element_type, layout=layout,
                                      memory_space=t.memory_space)
        block.arguments[i].set_type(inputs[i])
    kernel.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, fn_type.results)
    )


#: The argument attributes that promise a view's alignment and the divisibility of its sizes
#: (docs/kernel-abi.md).
DIVISIBILITY_ATTR = "tile.divisibility"
SIZE_DIVISIBILITY_ATTR = "tile.size_divisibility"
INDEX_BITWIDTH_ATTR = "tile.index_bitwidth"
SAME_SHAPE_AS_ATTR = "tile.same_shape_as"


def _arg_attr(kernel: ir.Operation, index: int, name: str) -> ir.Attribute | None:
    if "arg_attrs" not in kernel.attributes:
        return None
    attrs = ir.DictAttr(ir.ArrayAttr(kernel.attributes["arg_attrs"])[index])
    return attrs[name] if name in attrs else None


def arg_divisibility(kernel: ir.Operation, index: int) -> int | None:
    """The ``tile.divisibility`` (bytes) of argument ``index`` of a ``tile.kernel``, if any."""
    attr = _arg_attr(kernel, index, DIVISIBILITY_ATTR)
    return None if attr is None else ir.IntegerAttr(attr).value


def arg_size_divisibility(kernel: ir.Operation, index: int) -> tuple[int, ...] | None:
    """The ``tile.size_divisibility`` (per dimension) of argument ``index``, if any."""
    attr = _arg_attr(kernel, index, SIZE_DIVISIBILITY_ATTR)
    return None if attr is None else tuple(ir.DenseI64ArrayAttr(attr))


def arg_index_bitwidth(kernel: ir.Operation, index: int) -> int | None:
    """The ``tile.index_bitwidth`` of argument ``index`` of a ``tile.kernel``, if any."""
    attr = _arg_attr(kernel, index, INDEX_BITWIDTH_ATTR)
    return None if attr is None else ir.IntegerAttr(attr).value


def arg_same_shape_as(kernel: ir.Operation, index: int) -> int | None:
    """The ``tile.same_shape_as`` (an argument index) of argument ``index``, if any."""
    attr = _arg_attr(kernel, index, SAME_SHAPE_AS_ATTR)
    return None if attr is None else ir.IntegerAttr(attr).value


def _set_view_attrs(
    kernel: ir.Operation, indices: Sequence[int], what: str,
    make: Callable[[int, ir.MemRefType], tuple[str, ir.Attribute]],
) -> None:
    """Sets the argument attribute ``make(index, type)`` on each view argument of
    ``indices``."""
    fn_type = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    inputs = list(fn_type.inputs)
    if "arg_attrs" in kernel.attributes:
        old = ir.ArrayAttr(kernel.attributes["arg_attrs"])
        dicts = [{a.name: a.attr for a in ir.DictAttr(old[i])} for i in range(len(inputs))]
    else:
        dicts = [{} for _ in inputs]
    for i in indices:
        if not isinstance(inputs[i], ir.MemRefType):
            raise CompilationError(
                f"kernel @{sym_name(kernel)}: argument {i} ({inputs[i]}) is not a view; only "
                f"views can be {what}"
            )
        name, attr = make(i, ir.MemRefType(inputs[i]))
        dicts[i][name] = attr
    kernel.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def make_aligned(kernel: ir.Operation, indices: Sequence[int], divisibility: int = 16) -> None:
    """Puts ``tile.divisibility = divisibility`` on the view arguments ``indices``.

    The kernel may then take the address of each view's first element and the strides its
    type leaves dynamic (in bytes) as multiples of ``divisibility``: contiguous tiles move in
    16-byte vectors with no run-time check and no scalar fallback code. The launcher checks
    the promise (of a dimension of one element, no stride).
    """
    attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), divisibility)
    _set_view_attrs(kernel, indices, "aligned", lambda *_: (DIVISIBILITY_ATTR, attr))


def make_size_divisible(
    kernel: ir.Operation,
    indices: Sequence[int],
    divisors: Sequence[Sequence[int]] | None = None,
) -> None:
    """Promises that the sizes of each view argument of ``indices`` are multiples of
    ``divisors`` (one per dimension, per view; by default 16 for the innermost size and 1 for
    the others): ``tile.size_divisibility = array<i64: ...>``.

    A vector access along a divisible dimension then never straddles the view's end (one
    predicate per vector, no scalar tail), and a tile whose offset and size are multiples of
    its extent checks its bounds once. The launcher checks the promise.
    """
    per_view = dict(zip(indices, divisors, strict=True)) if divisors is not None else {}

    def make(i: int, t: ir.MemRefType) -> tuple[str, ir.Attribute]:
        sizes = list(per_view.get(i, [1] * (t.rank - 1) + [16] if t.rank else []))
        if len(sizes) != t.rank:
            raise OptionError(
                f"kernel @{sym_name(kernel)}: divisible_sizes= gives argument {i} {len(sizes)} "
                f"divisors, but it is a view of rank {t.rank}"
            )
        return SIZE_DIVISIBILITY_ATTR, ir.DenseI64ArrayAttr.get(sizes)

    _set_view_attrs(kernel, indices, "size-divisible", make)


def make_same_shape(kernel: ir.Operation, leader: int, indices: Sequence[int]) -> None:
    """Promises that the view arguments ``indices`` have the shape of view argument ``leader``
    (``tile.same_shape_as = leader``): their bounds checks use its sizes, so accesses to them
    share predicates. The launcher checks the shapes."""
    attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), leader)
    _set_view_attrs(kernel, [i for i in indices if i != leader], "shaped alike",
                    lambda *_: (SAME_SHAPE_AS_ATTR, attr))


def make_int32_indexed(kernel: ir.Operation, indices: Sequence[int]) -> None:
    """Promises that the sizes and element offsets of the view arguments ``indices`` fit in
    32-bit signed integers (``tile.index_bitwidth = 32``): their index arithmetic is then
    32-bit (fewer registers), as Triton's is for ``i32`` arguments. The launcher checks it.
    """
    attr = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 32)
    _set_view_attrs(kernel, indices, "int32-indexed", lambda *_: (INDEX_BITWIDTH_ATTR, attr))


# ---------------------------------------------------------------------------------------------
# reading PTX

_NTID = re.compile(r"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_SHARED = re.compile(
    r"^\s*(?P<ext>\.extern\s+)?\.shared\s+(?:\.align\s+(?P<align>\d+)\s+)?\.[a-z]+(?P<bits>\d+)"
    r"\s+(?P<name>[\w$.]+)(?P<dims>(?:\[\d*\])*)\s*;",
    re.M,
)


def ptx_num_warps(ptx: str, kernel: str) -> int | None:
    """The warps per block that ``kernel``'s ``.reqntid`` (else ``.maxntid``) directive sets,
    None without one. The lowering sets ``.reqntid`` from the layouts' warp count, so this is
    the one number a launch of the PTX may use; CompilationError if it is not whole warps."""
    for m in ENTRY.finditer(ptx):
        if m.group(1) != kernel:
            continue
        found = {d.group(1): d for d in _NTID.finditer(m.group(3))}
        d = found.get("reqntid") or found.get("maxntid")
        if d is None:
            return None
        threads = functools.reduce(operator.mul, (int(x) for x in d.groups()[1:] if x), 1)
        if threads % 32:
            raise CompilationError(
                f"kernel {kernel}: its PTX's .{d.group(1)} is {threads} threads, not whole warps"
            )
        return threads // 32
    return None


def _used_shared(ptx: str, kernel: str) -> Iterator[re.Match[str]]:
    """The ``.shared`` declarations whose variable ``kernel``'s body refers to."""
    entries = ptx_entries(ptx)
    if kernel not in entries:
        return
    body = entries[kernel][1]
    for m in _SHARED.finditer(ptx):
        if re.search(rf"(?<![\w$.]){re.escape(m.group('name'))}(?![\w$])", body):
            yield m


def shared_bytes(ptx: str, kernel: str) -> int:
    """Static shared memory of ``kernel``: the ``.shared`` variables its body refers to."""
    total = 0
    for m in _used_shared(ptx, kernel):
        if m.group("ext"):
            continue  # dynamic shared memory: sized at launch
        count = 1
        for d in re.findall(r"\[(\d*)\]", m.group("dims")):
            count *= int(d or 0)
        size = count * max(int(m.group("bits")) // 8, 1)
        align = int(m.group("align") or 1)
        total = (total + align - 1) // align * align + size
    return total


_DYNAMIC_SHARED = re.compile(r"tile\.dynamic_shared_bytes = (\d+)")


def recorded_dynamic_shared_bytes(llvm: str, kernel: str) -> int | None:
    """The dynamic shared memory that the lowering recorded on ``kernel``'s ``llvm.func``
    (its ``tile.dynamic_shared_bytes`` attribute) in the text of stage ``llvm``; None if
    it recorded none."""
    m = re.search(rf"llvm\.func @{re.escape(kernel)}\(.*", llvm)
    found = _DYNAMIC_SHARED.search(m.group()) if m else None
    return int(found.group(1)) if found else None


def check_dynamic_shared(ptx: str, kernel: str, size: int | None) -> int:
    """The dynamic shared memory ``kernel``'s launches pass: ``size`` (recorded by the
    lowering or given with PTX), 0 for a kernel that uses no ``.extern .shared`` array;
    CompilationError for one that does when ``size`` is unknown."""
    extern = [m.group("name") for m in _used_shared(ptx, kernel) if m.group("ext")]
    if extern and size is None:
        raise CompilationError(
            f"kernel {kernel} uses dynamic shared memory ({', '.join(extern)}), whose size "
            f"PTX does not record: pass compile(..., dynamic_shared_bytes=N)"
        )
    return size or 0


_TENSOR_MAPS = re.compile(r"\btile\.tensor_maps\s*=\s*\[")
_MAP_ENTRY = re.compile(r"\{([^{}]*)\}")
_MAP_FIELD = re.compile(
    r"\s*(\w+)\s*=\s*(?:array<i\d+(?::\s*([\d\s,]*))?>|\[([^\]]*)\]|(\d+)(?:\s*:\s*\w+)?)\s*(?:,|$)"
)


def _map_from_text(kernel: str, k: int, text: str) -> TensorMapParam:
    """Tensor map ``k`` from the text of its dictionary, ``box = array<i64: 128, 64>,
    swizzle = 128 : i64, view = 0 : i64`` (and ``dims = array<i64: 1, 0>`` where the map
    reorders the view's dimensions); CompilationError on anything else."""
    bad = CompilationError(
        f"kernel {kernel}: cannot read tensor map {k} from its tile.tensor_maps entry "
        f"{{{text}}}: expected {{box = array<i64: ...>, [dims = array<i64: ...>,] "
        f"swizzle = N : i64, view = N : i64}}"
    )
    values: dict[str, Any] = {}
    at = 0
    text = text.strip()
    while at < len(text):
        m = _MAP_FIELD.match(text, at)
        if m is None or m.end() == at or m.group(1) in values:
            raise bad
        if m.group(4) is not None:
            values[m.group(1)] = int(m.group(4))
        else:
            items = m.group(2) if m.group(3) is None else m.group(3)
            values[m.group(1)] = tuple(
                int(re.sub(r"\s*:\s*\w+$", "", v).strip()) for v in (items or "").split(",")
                if v.strip())
        at = m.end()
    if not {"box", "swizzle", "view"} <= set(values) <= {"box", "dims", "swizzle", "view"}:
        raise bad
    try:
        return TensorMapParam(values["view"], values["box"], values["swizzle"],
                              values.get("dims"))
    except ArgumentError as e:
        raise CompilationError(f"kernel {kernel}: tile.tensor_maps entry {k}: {e}") from None


def recorded_tensor_maps(llvm: str, kernel: str) -> tuple[TensorMapParam, ...]:
    """The TMA tensor maps that the lowering recorded on ``kernel``'s ``llvm.func`` in the
    text of stage ``llvm`` (its ``tile.tensor_maps`` attribute, an array of dictionaries
    ``{box = array<i64: ...>, swizzle = N : i64, view = N : i64}``); () if it recorded none.
    CompilationError for an entry with other keys (a map the launchers would build wrong)."""
    m = re.search(rf"llvm\.func @{re.escape(kernel)}\(.*", llvm)
    found = _TENSOR_MAPS.search(m.group()) if m else None
    if m is None or found is None:
        return ()
    line = m.group()
    depth, end = 1, len(line)
    for i in range(found.end(), len(line)):
        depth += {"[": 1, "]": -1}.get(line[i], 0)
        if depth == 0:
            end = i
            break
    else:
        raise CompilationError(f"kernel {kernel}: its tile.tensor_maps attribute is not closed")
    body = line[found.end():end]
    entries = _MAP_ENTRY.findall(body)
    if _MAP_ENTRY.sub("", body).replace(",", "").strip():
        raise CompilationError(
            f"kernel {kernel}: tile.tensor_maps = [{body}] is not an array of dictionaries"
        )
    return tuple(_map_from_text(kernel, k, text) for k, text in enumerate(entries))


def check_tensor_map_params(
    kernel: str, params: Sequence[KernelParam], tensor_maps: Sequence[TensorMapParam]
) -> None:
    """CompilationError unless every tensor map is over a view of ``params`` of its box's
    rank, with a box and swizzle that TMA allows."""
    try:
        check_tensor_maps(params, tensor_maps)
    except ArgumentError as e:
        raise CompilationError(f"kernel {kernel}: {e}") from None


def _check_map_alignment(ptx: str, kernel: str, first: int, count: int) -> None:
    """CompilationError unless PTX parameters ``first`` .. ``first + count - 1`` of ``kernel``
    are 64-byte aligned, as the driver needs a ``CUtensorMap`` parameter to be."""
    if not count:
        return
    m = next(m for m in ENTRY.finditer(ptx) if m.group(1) == kernel)
    decls = [d for d in m.group(2).split(",") if d.strip()]
    for i, decl in enumerate(decls[first:first + count], first):
        align = re.search(r"\.align\s+(\d+)", decl)
        if align is None or int(align.group(1)) % 64:
            raise CompilationError(
                f"kernel {kernel}: PTX parameter {i}, tensor map {i - first}, is declared "
                f"{' '.join(decl.split())!r}; a CUtensorMap parameter needs .align 64 (the "
                f"llvm.align = 64 argument attribute); see docs/kernel-abi.md"
            )


def check_ptx_abi(
    ptx: str, kernel: str, params: Sequence[KernelParam],
    tensor_maps: Sequence[TensorMapParam] = (),
) -> None:
    """CompilationError unless ``kernel``'s PTX parameters are exactly the ABI of ``params``,
    then one 128-byte parameter per tensor map."""
    entries = ptx_entries(ptx)
    if kernel not in entries:
        raise CompilationError(
            f"the PTX has no .entry {kernel} (entries: {', '.join(entries) or 'none'})"
        )
    got = entries[kernel][0]
    abi = [w for p in params for w in p.ptx_param_bits()]
    want = abi + [TENSOR_MAP_BITS] * len(tensor_maps)
    if got == want:
        _check_map_alignment(ptx, kernel, len(abi), len(tensor_maps))
        return
    if got[:len(abi)] == abi and all(w == TENSOR_MAP_BITS for w in got[len(abi):]):
        raise CompilationError(
            f"kernel {kernel}: its PTX has {len(got) - len(abi)} tensor-map parameters "
            f"(.b8 [128]) after the {len(abi)} of its arguments, but {len(tensor_maps)} tensor "
            f"maps are known (the tile.tensor_maps attribute of its llvm.func; for PTX, "
            f"compile(..., tensor_maps=)); see docs/kernel-abi.md"
        )
    maps = f" and {len(tensor_maps)} tensor maps" if tensor_maps else ""
    raise CompilationError(
        f"kernel {kernel}: its PTX parameters ({len(got)}: bit widths {got}) do not follow "
        f"the kernel ABI of ({', '.join(map(str, params))}){maps}, which needs {len(want)}: "
        f"{want}; see docs/kernel-abi.md"
    )


# ---------------------------------------------------------------------------------------------
# the stages


def check_dim_indices(module: ir.Module) -> None:
    """CompilationError for a ``memref.dim`` whose constant index is outside its memref's
    rank anywhere in the module: canonicalization folds it with an assertion in upstream MLIR
    (the tile.kernel verifier checks kernels; this checks host functions too)."""
    bad: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.dim" and len(op.operands) == 2:
            owner = op.operands[1].owner  # an op (view), or a block for an argument
            owner = getattr(owner, "operation", owner)
            if isinstance(owner, ir.Operation) and owner.name == "arith.constant":
                index = ir.IntegerAttr(owner.attributes["value"]).value
                rank = ir.ShapedType(op.operands[0].type).rank
                if not 0 <= index < rank:
                    bad.append(f"'memref.dim' at {op.location}: index {index} is out of range "
                               f"for a memref of rank {rank}")
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if bad:
        raise CompilationError("stage tile: " + "; ".join(bad[:5]))


def make_tile(module: ir.Module, options: Options) -> ir.Module:
    """Stage "tile": verify, canonicalize, narrow integer tiles, canonicalize, CSE."""
    module.operation.verify()
    check_dim_indices(module)
    run_passes(module, "tile", PIPELINES["tile"], options)
    return module


def make_tilegpu(module: ir.Module, options: Options) -> ir.Module:
    """Stage "tilegpu": layouts for ``num_warps`` warps on ``target``."""
    run_passes(module, "tilegpu", PIPELINES["tilegpu"], options)
    return module


#: Dialects that may remain in a ``gpu.module`` after stage "llvm" (they translate to LLVM IR).
LOWERED_DIALECTS: tuple[str, ...] = ("llvm", "nvvm", "rocdl", "builtin")


def check_lowered(module: ir.Module) -> None:
    """CompilationError naming every op (and its location) left in a ``gpu.module`` that does
    not translate to LLVM IR, instead of a failure deep inside ``gpu-module-to-binary``."""
    left: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name not in ("gpu.module", "gpu.module_end") and (
            name.split(".")[0] not in LOWERED_DIALECTS
        ):
            left.append(f"  '{name}' at {op.location}")
        return ir.WalkResult.ADVANCE

    for op in module.body.operations:
        if op.operation.name == "gpu.module":
            op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    if left:
        shown = left[:10] + ([f"  ... and {len(left) - 10} more"] if len(left) > 10 else [])
        raise CompilationError(
            "stage llvm: these ops could not be lowered to LLVM/NVVM (no conversion of the "
            "pipeline handles them):\n" + "\n".join(shown)
        )


def make_llvm(module: ir.Module, options: Options, *, lower_tile: bool = True) -> ir.Module:
    """Stage "llvm": tile ops per thread (unless ``lower_tile`` is False), then upstream.

    Ops that no pass lowered are reported by name and location (:func:`check_lowered`).
    """
    if lower_tile:
        run_passes(module, "llvm", PIPELINES["llvm"], options)
    run_passes(module, "llvm", UPSTREAM_TO_LLVM, options)
    check_lowered(module)
    return module


def make_ptx(module: ir.Module, options: Options, kernel: str) -> str:
    """Stage "ptx": the PTX of ``kernel`` alone (other kernels are left out), at -O level."""
    with module.context, ir.Location.unknown():
        gpu_module = ir.Module.create()
        gpu_module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
        found = False
        for op in module.body.operations:
            if op.operation.name != "gpu.module":
                continue
            clone = op.operation.clone(ip=ir.InsertionPoint(gpu_module.body))
            old = str(clone.attributes["targets"]) if "targets" in clone.attributes else ""
            m = re.search(r'#nvvm\.target<[^>]*features = "([^"]*)"', old)
            calls_libdevice = any(
                f.operation.name == "llvm.func" and sym_name(f.operation).startswith("__nv_")
                for f in clone.regions[0].blocks[0].operations
            )
            target = ir.Attribute.parse(
                options.nvvm_target(m.group(1) if m else None, calls_libdevice)
            )
            clone.attributes["targets"] = ir.ArrayAttr.get([target])
            for f in list(clone.regions[0].blocks[0].operations):
                if _is_kernel_func(f.operation):
                    if sym_name(f.operation) == kernel:
                        found = True
                    else:
                        f.operation.erase()
        if not found:
            raise CompilationError(f"stage ptx: no kernel function {kernel} in any gpu.module")
        run_passes(gpu_module, "ptx", TO_PTX, options)
        from tileopt.dialects import gpu

        for op in gpu_module.body.operations:
            if op.operation.name != "gpu.binary":
                continue
            for obj in ir.ArrayAttr(op.operation.attributes["objects"]):
                data = gpu.ObjectAttr(obj).object
                text = data.decode() if isinstance(data, bytes) else str(data)
                if re.search(rf"\.entry\s+{re.escape(kernel)}\s*\(", text):
                    return text
    raise CompilationError(f"stage ptx: gpu-module-to-binary produced no PTX for {kernel}")


#: Seconds LLVM's code generation of a module given at stage "llvm" may take (make_ptx_isolated).
ISOLATED_PTX_SECONDS = 120


def make_ptx_isolated(module: ir.Module, options: Options, kernel: str) -> str:
    """:func:`make_ptx` in a child process, for a module given at stage "llvm": LLVM's
    translation and NVPTX back end run in-process and abort it (assertions, fatal errors) or
    never finish on some IR that the LLVM dialect's verifiers and ``check-nvptx-input``
    accept. The child's death or time-out becomes a CompilationError quoting what LLVM said."""
    text = module.operation.get_asm(enable_debug_info=True)
    command = [sys.executable, "-c", "from tileopt.compiler.nvidia import _make_ptx_child; "
               "_make_ptx_child()"]
    try:
        child = subprocess.run(command, input=pickle.dumps((text, options, kernel)),
                               capture_output=True, timeout=ISOLATED_PTX_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise CompilationError(
            f"stage ptx: LLVM's NVPTX code generation of kernel {kernel} did not finish in "
            f"{ISOLATED_PTX_SECONDS} s") from None
    if child.returncode == 0:
        ok, value = pickle.loads(child.stdout)
        if ok:
            return value
        raise CompilationError(value)
    said = child.stderr.decode(errors="replace").strip().splitlines()
    how = (f"signal {signal.Signals(-child.returncode).name}" if child.returncode < 0
           else f"exit status {child.returncode}")
    raise CompilationError(
        f"stage ptx: LLVM's NVPTX back end failed on kernel {kernel} ({how}); it said:\n"
        + "\n".join(f"  {line}" for line in said[-8:]))


def _make_ptx_child() -> None:
    """make_ptx_isolated's child: (module text, Options, kernel) in on stdin, (True, PTX) or
    (False, the CompilationError's message) out on stdout."""
    text, options, kernel = pickle.loads(sys.stdin.buffer.read())
    try:
        with ir.Context(), ir.Location.unknown():
            result = (True, make_ptx(ir.Module.parse(text), options, kernel))
    except TileoptError as e:
        result = (False, str(e))
    sys.stdout.buffer.write(pickle.dumps(result))


@dataclass(frozen=True)
class CubinResult:
    """What the cubin stage produced: the cubin (None without any assembler), ptxas' report for
    the kernel, the tool that assembled it (``"ptxas"``, ``"nvjitlink"`` or ``"none"``) and
    the PTX it assembled (the stage's input, or with ``retune`` that PTX's variant)."""

    cubin: bytes | None
    info: tools.PtxasInfo | None
    assembler: str
    seconds: float = 0.0
    ptx: str = ""


_REQNTID = re.compile(r"^(\s*)\.reqntid(\s)", re.M)
_REQNTID_LINE = re.compile(r"^(\s*\.reqntid\b[^\n]*)$", re.M)


def _spills(info: tools.PtxasInfo | None) -> bool:
    return info is not None and info.spill_store_bytes + info.spill_load_bytes > 0


def _registers_fit(registers: int, warps: int | None) -> bool:
    """Whether a block of ``warps`` at ``registers`` a thread fits in an SM's 64K registers
    (allocated 8 a thread at a time). Told no block size, ptxas may take more than the
    kernel's block can launch with."""
    return warps is None or -(-registers // 8) * 8 * 32 * warps <= 65536


def max_shared_bytes(target: str) -> int:
    """The most shared memory a block of ``target`` may have, opted in (CUDA's
    ``sharedMemPerBlockOptin``): the same table as ``maxSharedBytes`` in
    lib/Conversion/TileToNVVM/TileToNVVM.cpp."""
    sm = int(re.match(r"sm_(\d+)", target).group(1))  # type: ignore[union-attr]
    kib = {70: 96, 72: 96, 75: 64, 80: 163, 87: 163, 86: 99, 88: 99, 89: 99, 120: 99, 121: 99}
    return 1024 * kib.get(sm, 227 if sm >= 90 else 48)


def blocks_per_sm(target: str, shared_bytes: int, threads: int) -> int:
    """The blocks of ``threads`` threads and ``shared_bytes`` of shared memory each that one SM
    of ``target`` can hold by its shared memory (1 KiB of which each block leaves to the
    system) and its 2048 threads, at least one."""
    by_shared = (max_shared_bytes(target) + 1024) // (shared_bytes + 1024)
    return max(1, min(by_shared, 2048 // max(threads, 1)))


def _relaxed_blocks(ptx: str, target: str, kernel: str, shared_bytes: int,
                    registers: int) -> list[str]:
    """Variants of tileopt's ``ptx`` that tell ptxas less about the block, for
    :func:`make_cubin` to try where it spills under ``.reqntid`` at ``registers`` a thread:
    ``.maxntid`` of the same block; and ``.reqntid`` with ``.minnctapersm`` of the blocks an
    SM holds by the kernel's shared memory, where those are fewer than the blocks that
    ``registers`` fit in an SM's 64K registers (ptxas squeezed the registers for blocks that
    the shared memory does not leave room for); last, no block size at all, under which
    ptxas allocates for one block (an 8-warp causal scores matmul on sm_90, 96 KiB of shared
    memory: 20 bytes spilled at 128 registers to fit two blocks under either, none at 142)."""
    variants = []
    relaxed = _REQNTID.sub(r"\1.maxntid\2", ptx, count=1)
    if relaxed != ptx:
        variants.append(relaxed)
    warps = ptx_num_warps(ptx, kernel)
    if warps is not None:
        blocks = blocks_per_sm(target, shared_bytes, 32 * warps)
        bounded = _REQNTID_LINE.sub(rf"\1\n.minnctapersm {blocks}", ptx, count=1)
        if bounded != ptx and blocks < 65536 // (max(registers, 1) * 32 * warps):
            variants.append(bounded)
    unbounded = _REQNTID_LINE.sub("", ptx, count=1)
    if unbounded != ptx:
        variants.append(unbounded)
    return variants


def make_cubin(ptx: str, options: Options, kernel: str, retune: bool = False,
               shared_bytes: int = 0) -> CubinResult:
    """Stage "cubin": PTX -> cubin with ptxas' ``-v`` report (registers, spills).

    ``options.assembler`` picks the tool: ``"ptxas"`` (the executable, whole-program
    compilation like nvcc and Triton), ``"nvjitlink"`` (in-process, about 10 ms instead of
    40-60 ms, but nvJitLink compiles in relocatable mode (``ptxas -c``), which costs registers
    when ptxas emits subroutine calls: 24 instead of 16 on a kernel with a 64-bit division), or
    ``"auto"``: the ptxas executable where there is one, else nvJitLink. PTX that ptxas rejects
    raises :class:`~tileopt.compiler.tools.PTXAssemblyError` with ptxas' message and the
    offending PTX line. With neither tool the cubin is None.

    ``retune`` (PTX that tileopt generated, without ``options.maxnreg``): where ptxas spills
    under the kernel's ``.reqntid`` (its exact block, which the lowering sets), the kernel
    takes the first variant of :func:`_relaxed_blocks` under which ptxas does not spill:
    ``.maxntid`` of the same block, then ``.reqntid`` with ``.minnctapersm`` of the blocks
    that an SM holds by the kernel's ``shared_bytes`` (per block), then no block size.
    Told the exact block, ptxas sometimes spills to fit more blocks in an SM's registers,
    and told a maximum it chooses otherwise: attention (d = 64) on sm_80 spills 16 bytes at
    128 registers under ``.reqntid`` and none at 128 under ``.maxntid``, and at d = 128 the
    reverse; a 64 x 128 x 64 matmul on 8 warps, 4 stages on sm_80 (72 KiB of shared memory:
    2 blocks an SM) spills 24 bytes at 64 registers under either, to fit 4 blocks, and none
    at 101 under ``.minnctapersm 2``.
    """
    t0 = time.perf_counter()
    order = {"auto": ("ptxas", "nvjitlink"), "ptxas": ("ptxas",), "nvjitlink": ("nvjitlink",)}
    for tool in order[options.assembler]:
        try:
            result = _assemble(tool, ptx, options.target, kernel)
        except (FileNotFoundError, ImportError, RuntimeError):
            continue  # no ptxas executable / no cuda.core or libnvJitLink
        if retune and options.maxnreg is None and _spills(result.info):
            assert result.info is not None  # it spills
            warps = ptx_num_warps(ptx, kernel)
            for relaxed in _relaxed_blocks(ptx, options.target, kernel, shared_bytes,
                                           result.info.registers):
                try:
                    other = _assemble(tool, relaxed, options.target, kernel)
                except PTXAssemblyError:  # too few registers for an instruction
                    continue
                if (other.info is not None and not _spills(other.info)
                        and _registers_fit(other.info.registers, warps)):
                    result = other
                    break
        return replace(result, seconds=time.perf_counter() - t0)
    return CubinResult(None, None, "none", time.perf_counter() - t0, ptx)


def _assemble(tool: str, ptx: str, target: str, kernel: str) -> CubinResult:
    """``ptx`` assembled by ``tool`` (``"ptxas"`` or ``"nvjitlink"``), with its report."""
    if tool == "ptxas":
        out, log = tools.run_ptxas(ptx, target, cubin=True)
    else:
        out, log = tools.nvjitlink_cubin(ptx, target)
    return CubinResult(out, tools.parse_ptxas_info(log).get(kernel), tool, ptx=ptx)


def add_stages(stages: dict[str, Callable[[Any], Any]], options: Options, kernel: str) -> None:
    """Fills ``stages`` (name -> function of the previous stage's output), in order, for the
    kernel called ``kernel``."""
    stages["tile"] = lambda src: make_tile(src, options)
    stages["tilegpu"] = lambda src: make_tilegpu(src, options)
    stages["llvm"] = lambda src: make_llvm(src, options)
    stages["ptx"] = lambda src: make_ptx(src, options, kernel)
    stages["cubin"] = lambda src: make_cubin(src, options, kernel)
