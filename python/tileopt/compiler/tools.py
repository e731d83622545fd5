"""The NVIDIA tools the pipeline calls: ptxas (info and fallback assembler), nvJitLink, libdevice.

Tools come from the pinned pip wheels (``nvidia-cuda-nvcc`` for ptxas, ``nvidia-nvvm`` for
libdevice, ``nvidia-nvjitlink`` + ``cuda-core`` for in-process PTX -> cubin); the environment
variables ``TILEOPT_PTXAS`` and ``TILEOPT_LIBDEVICE`` override them, and ``ptxas`` on ``PATH`` is
the last resort. Nothing here needs a GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tileopt.errors import OptionError, PTXAssemblyError


@functools.cache
def _nvidia_roots() -> tuple[Path, ...]:
    """``site-packages/nvidia/cu*`` directories of the pip CUDA wheels, newest first (looked
    up once: every compilation asks for ptxas and libdevice)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return ()
    roots: list[Path] = []
    for loc in spec.submodule_search_locations:
        roots.extend(sorted(Path(loc).glob("cu*"), reverse=True))
        roots.append(Path(loc) / "cuda_nvcc")
    return tuple(roots)


def _env_file(variable: str, what: str) -> Path | None:
    """The file that the environment variable ``variable`` names, None when it is unset;
    OptionError when it names no file (``what`` says which file it should name)."""
    env = os.environ.get(variable)
    if not env:
        return None
    if not Path(env).is_file():
        raise OptionError(
            f"{variable}={env!r} is not a file: set it to the path of {what}, or unset it to use "
            f"the pip wheel's"
        )
    return Path(env)


def find_ptxas() -> Path | None:
    """ptxas: ``$TILEOPT_PTXAS``, else the ``nvidia-cuda-nvcc`` wheel's, else ``PATH``'s;
    :class:`OptionError` when ``$TILEOPT_PTXAS`` names no file."""
    env = _env_file("TILEOPT_PTXAS", "a ptxas executable")
    if env is not None:
        return env
    for root in _nvidia_roots():
        exe = root / "bin" / "ptxas"
        if exe.is_file():
            return exe
    found = shutil.which("ptxas")
    return Path(found) if found else None


def find_libdevice() -> Path | None:
    """libdevice.10.bc: ``$TILEOPT_LIBDEVICE``, else the ``nvidia-nvvm`` wheel's;
    :class:`OptionError` when ``$TILEOPT_LIBDEVICE`` names no file."""
    env = _env_file("TILEOPT_LIBDEVICE", "libdevice.10.bc")
    if env is not None:
        return env
    for root in _nvidia_roots():
        bc = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if bc.is_file():
            return bc
    return None


# ---------------------------------------------------------------------------------------------
# ptxas -v


@dataclass(frozen=True)
class PtxasInfo:
    """What ``ptxas -v`` reports for one entry function."""

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_frame_bytes: int
    shared_bytes: int


_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_ptxas_info(log: str) -> dict[str, PtxasInfo]:
    """Per entry function, registers, spills, stack and shared bytes from ``ptxas -v`` output."""
    out: dict[str, PtxasInfo] = {}
    name: str | None = None
    props = (0, 0, 0)
    for line in log.splitlines():
        if m := _FUNC.search(line):
            name, props = m.group(1), (0, 0, 0)
        elif name is not None and (m := _PROPS.search(line)):
            props = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif name is not None and (m := _USED.search(line)):
            out[name] = PtxasInfo(
                registers=int(m.group(1)),
                spill_store_bytes=props[1],
                spill_load_bytes=props[2],
                stack_frame_bytes=props[0],
                shared_bytes=int(m.group(2) or 0),
            )
            name = None
    return out


_ERROR_LINE = re.compile(r"line (\d+); (?:error|fatal)\s*:\s*(.*)")


def describe_ptx_error(log: str, ptx: str) -> str:
    """ptxas' error log followed by the PTX lines it names (``line N: <text>``)."""
    lines = ptx.splitlines()
    quoted: list[str] = []
    seen: set[int] = set()
    for m in _ERROR_LINE.finditer(log):
        n = int(m.group(1))
        if n in seen or not 1 <= n <= len(lines):
            continue
        seen.add(n)
        quoted.append(f"  PTX line {n}: {lines[n - 1].strip()}    <- {m.group(2).strip()}")
    text = log.strip()
    if quoted:
        text += "\noffending PTX:\n" + "\n".join(quoted)
    return text


def run_ptxas(ptx: str, target: str, *, cubin: bool,
              options: Sequence[str] = ()) -> tuple[bytes | None, str]:
    """Runs ``ptxas -v --gpu-name target`` with ``options`` (as ``-maxrregcount N``);
    returns (the cubin if asked, ptxas' log).

    Raises :class:`PTXAssemblyError` with ptxas' message and the offending PTX line when
    ptxas rejects the PTX, :class:`FileNotFoundError` when there is no ptxas,
    :class:`OptionError` when the ptxas found (``$TILEOPT_PTXAS``) cannot be run.
    """
    exe = find_ptxas()
    if exe is None:
        raise FileNotFoundError(
            "ptxas not found: install the nvidia-cuda-nvcc wheel or set TILEOPT_PTXAS"
        )
    with tempfile.TemporaryDirectory(prefix="tileopt-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        cmd = [str(exe), "-v", "--gpu-name", target, *options, str(src), "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise
        except OSError as e:  # not executable, not a program
            raise OptionError(
                f"cannot run ptxas {exe} ({e.strerror or e}); set TILEOPT_PTXAS to an executable "
                f"ptxas, or unset it to use the pip wheel's"
            ) from e
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            hint = ""
            if "is not defined for option 'gpu-name'" in log:
                hint = (f"\nthis ptxas ({exe}) does not assemble for {target}: compile for "
                        f"a GPU it knows, or set TILEOPT_PTXAS to a ptxas that knows {target}")
            raise PTXAssemblyError(
                f"ptxas rejected the PTX for {target}:\n{describe_ptx_error(log, ptx)}{hint}"
            )
        return (out.read_bytes() if cubin else None), log


def nvjitlink_cubin(ptx: str, target: str) -> tuple[bytes, str]:
    """PTX -> cubin in-process with nvJitLink (cuda.core ``Linker``), with ``ptxas -v``.

    Returns the cubin and the embedded ptxas' ``-v`` report (the same text ``ptxas -v`` prints).
    Raises :class:`PTXAssemblyError` when the PTX is rejected, :class:`ImportError` or
    ``RuntimeError`` when cuda.core or the nvJitLink library is missing.
    """
    from cuda.core import Linker, LinkerOptions, ObjectCode

    try:
        linker = Linker(
            ObjectCode.from_ptx(ptx.encode()),
            options=LinkerOptions(arch=target, ptxas_options=["-v"]),
        )
        cubin = bytes(linker.link("cubin").code)
        log = linker.get_info_log() or ""
    except Exception as e:
        if type(e).__name__ == "nvJitLinkError" or "ptxas" in str(e):
            raise PTXAssemblyError(
                f"nvJitLink rejected the PTX for {target}:\n{describe_ptx_error(str(e), ptx)}"
            ) from e
        raise
    return cubin, log.rstrip("\x00")
