"""A compiled kernel (:class:`Kernel`): its code at every stage, its metadata, ``launch``, and
its file form.

Nothing here needs the MLIR bindings: a kernel compiled on one machine (``Kernel.save``) runs
on another that has only a CUDA driver, cuda-core and numpy (``Kernel.load``), as Triton's
ahead-of-time kernels do. The compile cache stores kernels in the same JSON form.
"""

from __future__ import annotations

import base64
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tileopt.runtime import DEVICES
from tileopt.runtime.abi import ArgumentError, KernelParam, TensorMapParam
from tileopt.runtime.ptx import ptx_instruction_count

#: The version of the file form :meth:`Kernel.save` writes; :meth:`Kernel.load` reads only it.
FORMAT = "tileopt-kernel-1"

@dataclass(frozen=True)
class KernelMetadata:
    """What a launcher and a reader of the compiled kernel need to know.

    Attributes:
        name: the kernel's symbol, also its PTX ``.entry`` name.
        target: the GPU it was compiled for (``sm_90``).
        num_warps: warps per program, a warp-specialised kernel's producer warp included;
            the block is :attr:`block`.
        shared_bytes: shared memory per program: the static ``.shared`` variables its PTX
            uses plus :attr:`dynamic_shared_bytes`.
        abi: the kernel's arguments in order (see ``docs/kernel-abi.md``).
        registers: registers per thread from ``ptxas -v``; None without ptxas.
        spill_store_bytes: bytes of spill stores from ``ptxas -v``; None without ptxas.
        spill_load_bytes: bytes of spill loads from ``ptxas -v``; None without ptxas.
        assembler: what made the cubin: ``"ptxas"``, ``"nvjitlink"`` or ``"none"`` (no cubin).
        dynamic_shared_bytes: the dynamic shared memory (the PTX's ``.extern .shared``
            array) every launch passes; kernels that need more than the 48 KiB of static
            shared memory get theirs this way (the CUDA launcher opts in above 48 KiB).
        tensor_maps: the TMA tensor maps (sm_90a) the kernel takes after its arguments' PTX
            parameters, one ``.param .align 64 .b8 [128]`` each, in order; every launch
            builds them from the views they are over (see ``docs/kernel-abi.md``). The
            lowering records them as the ``tile.tensor_maps`` attribute of the kernel's
            ``llvm.func``.
    """

    name: str
    target: str
    num_warps: int
    shared_bytes: int
    abi: tuple[KernelParam, ...]
    registers: int | None
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    assembler: str = "none"
    dynamic_shared_bytes: int = 0
    tensor_maps: tuple[TensorMapParam, ...] = ()

    @property
    def block(self) -> tuple[int, int, int]:
        """The launch's block: ``(32 * num_warps, 1, 1)``."""
        return (32 * self.num_warps, 1, 1)

    @property
    def spill_bytes(self) -> int | None:
        """Spill stores plus spill loads in bytes (0: no spills); None without ptxas."""
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return None
        return self.spill_store_bytes + self.spill_load_bytes


#: The largest grid CUDA launches: 2**31 - 1 programs along x, 65535 along y and z.
MAX_GRID: tuple[int, int, int] = (2**31 - 1, 65535, 65535)


def _dim3(grid: int | Sequence[int]) -> tuple[int, int, int]:
    """``grid`` as three dimensions; ArgumentError naming it unless it is 1 to 3 positive
    integers within :data:`MAX_GRID`."""
    items = grid if isinstance(grid, Sequence) and not isinstance(grid, str) else (grid,)
    try:
        if any(isinstance(d, bool) for d in items):
            raise TypeError
        dims = tuple(operator.index(d) for d in items)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(
            1 <= d <= m for d, m in zip(dims, MAX_GRID, strict=False)):
        raise ArgumentError(
            f"grid must be 1 to 3 positive integers (at most {MAX_GRID} programs), got {grid!r}"
        )
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


class Kernel:
    """A compiled kernel: its code at every stage, its metadata, and ``launch``.

    Attributes:
        asm: every stage produced, by name: ``"tile"``, ``"tilegpu"``, ``"llvm"`` (MLIR text),
            ``"ptx"`` (text), ``"cubin"`` (bytes; absent when neither ptxas nor nvJitLink is
            installed). A compilation started at a later stage has only that stage onwards.
        metadata: a :class:`KernelMetadata`.
        times: seconds spent in each stage (``"parse"``: reading the input); a Kernel read
            from the disk cache has ``"cache"`` instead (a hit in memory returns the Kernel
            compiled before, times and all).
        cache_key: its key in the compile cache (:mod:`tileopt.compiler.cache`); None for a
            Kernel made otherwise.
    """

    def __init__(
        self,
        asm: dict[str, str | bytes],
        metadata: KernelMetadata,
        times: dict[str, float],
        cache_key: str | None = None,
    ) -> None:
        self.asm = asm
        self.metadata = metadata
        self.times = times
        self.cache_key = cache_key
        self._emulator_module: Any = None
        self._cuda_modules: dict[int, Any] = {}

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self.metadata.name

    def __repr__(self) -> str:
        md = self.metadata
        regs = "?" if md.registers is None else md.registers
        return (
            f"<Kernel {md.name} {md.target} num_warps={md.num_warps} registers={regs} "
            f"shared={md.shared_bytes}B ({', '.join(map(str, md.abi))})>"
        )

    def summary(self) -> str:
        """A few lines: ABI, target, registers, spills, shared memory, PTX size, stage times."""
        md = self.metadata
        regs = "unknown (no ptxas)" if md.registers is None else str(md.registers)
        spills = "unknown" if md.spill_bytes is None else f"{md.spill_bytes} bytes"
        ptx_instructions = ptx_instruction_count(str(self.asm["ptx"]), md.name)
        times = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.times.items())
        return "\n".join([
            f"kernel {md.name}({', '.join(map(str, md.abi))})",
            f"  target {md.target}, num_warps {md.num_warps} (block {md.block[0]})",
            f"  registers {regs}, spills {spills}, shared memory {md.shared_bytes} bytes",
            f"  PTX instructions {ptx_instructions}, cubin by {md.assembler}",
            *(f"  tensor map {k}: {m} over argument {m.view} ({md.abi[m.view].name})"
              for k, m in enumerate(md.tensor_maps)),
            f"  compile: {times}",
        ])

    def to_payload(self) -> dict[str, Any]:
        """The kernel as JSON-ready data: every stage (the cubin in base64) and the
        metadata; not the times. :meth:`from_payload` reads it back."""
        md = self.metadata
        cubin = self.asm.get("cubin")
        return {
            "metadata": {f.name: getattr(md, f.name) for f in fields(md)
                         if f.name not in _METADATA_LISTS},
            "abi": [{f.name: getattr(p, f.name) for f in fields(p)} for p in md.abi],
            "tensor_maps": [{f.name: getattr(m, f.name) for f in fields(m)}
                            for m in md.tensor_maps],
            "asm": {stage: code for stage, code in self.asm.items() if stage != "cubin"},
            "cubin": base64.b64encode(cubin).decode() if isinstance(cubin, bytes) else None,
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any], cache_key: str | None = None) -> Kernel:
        """The Kernel of :meth:`to_payload`'s data; TypeError/ValueError/KeyError unless it
        has that shape."""
        md = payload["metadata"]
        names = {f.name for f in fields(KernelMetadata)} - set(_METADATA_LISTS)
        if set(md) != names or not all(
                isinstance(md[n], _METADATA_TYPES.get(n, object)) for n in names):
            raise ValueError(f"metadata {md!r} does not have the fields of KernelMetadata")
        abi = tuple(
            KernelParam(**{n: tuple(v) if isinstance(v, list) else v for n, v in p.items()})
            for p in payload["abi"]
        )
        tensor_maps = tuple(TensorMapParam(**m) for m in payload["tensor_maps"])
        asm: dict[str, str | bytes] = dict(payload["asm"])
        if "ptx" not in asm or not all(isinstance(code, str) for code in asm.values()):
            raise ValueError("the stages are not text, or there is no PTX")
        if payload["cubin"] is not None:
            asm["cubin"] = base64.b64decode(payload["cubin"], validate=True)
        return cls(asm, KernelMetadata(**md, abi=abi, tensor_maps=tensor_maps), {}, cache_key)

    def to_json(self) -> str:
        """The text :meth:`save` writes."""
        return json.dumps({"format": FORMAT, **self.to_payload()})

    def save(self, path: str | Path) -> None:
        """Writes the kernel to ``path`` (JSON: its stages, cubin and metadata) for
        :meth:`load`, on this machine or one without the compiler."""
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Kernel:
        """The kernel :meth:`save` wrote to ``path``. Needs no MLIR bindings: only the
        launchers' own needs (cuda-core for ``device="cuda"``).

        Raises:
            OSError: ``path`` cannot be read.
            ValueError: ``path`` is not a kernel :meth:`save` wrote (named in the message).
        """
        text = Path(path).read_text()
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"it is not in the {FORMAT} format")
            return cls.from_payload(data)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{path} is not a saved tileopt kernel: {e}") from None

    def launch(
        self, grid: int | Sequence[int], *args: Any, device: str = "emulator", **options: Any
    ) -> Any:
        """Runs the kernel over ``grid`` programs with ``args`` in the kernel's argument order.

        Args:
            grid: 1 to 3 positive integers (missing dimensions are 1).
            args: numpy arrays or torch tensors for views (any strides), numbers for scalars.
            device: ``"emulator"`` (PTX on the CPU; numpy arrays / CPU tensors, written back)
                or ``"cuda"`` (the cubin through cuda.core on the current torch stream; CUDA
                torch tensors).
            options: for the emulator, passed to ``tileopt.emulator.Module.launch``.

        Returns:
            The emulator's ``LaunchStats`` for ``device="emulator"``, None for ``"cuda"``.

        Raises:
            ArgumentError: an argument does not match the ABI (named in the message).
            DeviceError: no CUDA driver or device, or the device rejects the kernel.
            EmulatorError: the emulator found an out-of-bounds access or cannot run the PTX.
        """
        dims = _dim3(grid)
        md = self.metadata
        if device == "emulator":
            from tileopt.runtime import emulator

            if self._emulator_module is None:
                self._emulator_module = emulator.load(str(self.asm["ptx"]))
            return emulator.launch(
                self._emulator_module, md.name, md.abi, dims, md.block, args,
                md.dynamic_shared_bytes, md.tensor_maps, **options,
            )
        if device == "cuda":
            from tileopt.runtime import cuda

            if options:
                raise ArgumentError(f"device='cuda' takes no options, got {sorted(options)}")
            index = next(
                (a.device.index or 0 for a in args if getattr(a, "is_cuda", False)), 0
            )
            if index not in self._cuda_modules:
                cubin = self.asm.get("cubin")
                self._cuda_modules[index] = cuda.CudaModule(
                    cubin if isinstance(cubin, bytes) else None,
                    str(self.asm["ptx"]),
                    md.target,
                    index,
                )
            cuda.launch(self._cuda_modules[index], md.name, md.abi, dims, md.block, args,
                        shared_bytes=md.dynamic_shared_bytes, tensor_maps=md.tensor_maps)
            return None
        raise ArgumentError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")


#: KernelMetadata's fields that the payload holds beside its "metadata", as lists of dicts.
_METADATA_LISTS = ("abi", "tensor_maps")

#: The types of KernelMetadata's fields that a payload is checked against (others: any).
_METADATA_TYPES: dict[str, Any] = {
    "name": str, "target": str, "num_warps": int, "shared_bytes": int, "assembler": str,
    "dynamic_shared_bytes": int,
    "registers": int | None, "spill_store_bytes": int | None, "spill_load_bytes": int | None,
}
