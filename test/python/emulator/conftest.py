"""Shared fixtures for the PTX emulator tests: nvcc from the pinned pip wheels.

``compile_cuda(source, arch="sm_80", extra_flags=())`` compiles CUDA C to PTX
text with nvcc from the ``nvidia-cuda-nvcc`` wheel (or ``$TILEOPT_NVCC``) and
caches the result per (source, arch, flags) for the whole session, in memory
and in a pytest temporary directory.  Where nvcc cannot run, the requesting
test is skipped with a message that says why.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CUDA_DIR = Path(__file__).parent / "cuda"
ARCHS: tuple[str, ...] = ("sm_80", "sm_90")

CompileCuda = Callable[..., str]


def _nvidia_roots() -> list[Path]:
    """Directories of the ``nvidia`` namespace package (the pip CUDA wheels)."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def find_nvcc() -> tuple[Path | None, str]:
    """Return (nvcc path, "") or (None, reason it was not found)."""
    override = os.environ.get("TILEOPT_NVCC")
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return path, ""
        return None, f"TILEOPT_NVCC={override!r} is not an executable file"
    roots = _nvidia_roots()
    if not roots:
        return None, (
            "the 'nvidia' Python package is not installed; "
            "pip install nvidia-cuda-nvcc==13.5.37 nvidia-cuda-cccl==13.3.5.0.6 "
            "or set TILEOPT_NVCC"
        )
    for root in roots:
        for sub in sorted(root.glob("cu*/bin/nvcc")) + sorted(root.glob("cuda_nvcc/bin/nvcc")):
            if sub.is_file() and os.access(sub, os.X_OK):
                return sub, ""
    return (
        None,
        f"no bin/nvcc found under the 'nvidia' package at {[str(r) for r in roots]}",
    )


def _include_flags(nvcc: Path) -> list[str]:
    """-I flag for the cccl headers (``<nv/target>``, needed by cuda_fp16.h), if nvcc lacks them.

    nvcc searches ``<cuda root>/include`` by itself; where the cccl wheel put the
    headers elsewhere (``include/cccl`` or another ``nvidia/*`` directory), add it.
    """
    cuda_root = nvcc.parent.parent
    if (cuda_root / "include" / "nv" / "target").exists():
        return []
    candidates = [cuda_root / "include" / "cccl"]
    for root in _nvidia_roots():
        candidates += sorted(root.glob("*/include/cccl")) + sorted(root.glob("*/include"))
    for inc in candidates:
        if (inc / "nv" / "target").exists():
            return [f"-I{inc}"]
    return []


class _NvccCompiler:
    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.nvcc, self.reason = find_nvcc()
        self._memo: dict[str, str] = {}
        self._probe_error: str | None = None
        self._probed = False

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        assert self.nvcc is not None
        env["PATH"] = f"{self.nvcc.parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def _probe(self) -> None:
        """Check once that nvcc runs at all, so a broken install skips cleanly."""
        if self._probed:
            return
        self._probed = True
        if self.nvcc is None:
            return
        try:
            proc = subprocess.run(
                [str(self.nvcc), "--version"],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
                env=self._env(),
            )
        except OSError as exc:
            self._probe_error = f"nvcc at {self.nvcc} cannot run: {exc}"
            return
        if proc.returncode != 0:
            self._probe_error = f"nvcc at {self.nvcc} --version failed: {proc.stderr.strip()}"

    def __call__(self, source: str, arch: str = "sm_80", extra_flags: Sequence[str] = ()) -> str:
        self._probe()
        if self.nvcc is None:
            pytest.skip(f"nvcc unavailable: {self.reason}")
        if self._probe_error is not None:
            pytest.skip(self._probe_error)
        if (
            shutil.which("g++") is None
            and shutil.which("c++") is None
            and shutil.which("clang++") is None
        ):
            pytest.skip("nvcc needs a host C++ compiler (g++/clang++) on PATH for preprocessing")
        flags = [f"-arch={arch}", "-O3", *_include_flags(self.nvcc), *extra_flags]
        key = hashlib.sha256("\0".join([source, arch, *flags]).encode()).hexdigest()[:24]
        if key in self._memo:
            return self._memo[key]
        ptx_path = self.cache_dir / f"{key}_{arch}.ptx"
        if not ptx_path.exists():
            # Per-process names: another xdist worker may compile the same kernel at once.
            src_path = self.cache_dir / f"{key}_{arch}.{os.getpid()}.cu"
            src_path.write_text(source)
            tmp_out = self.cache_dir / f"{key}_{arch}.ptx.tmp{os.getpid()}"
            proc = subprocess.run(
                [str(self.nvcc), "--ptx", *flags, str(src_path), "-o", str(tmp_out)],
                check=False,
                capture_output=True,
                text=True,
                timeout=300,
                env=self._env(),
            )
            if proc.returncode != 0:
                # A compile error in a test kernel is a test bug: fail loudly, never skip.
                raise RuntimeError(
                    f"nvcc failed for {arch} (flags {flags}):\n{proc.stderr}\n"
                    f"--- source ---\n{source}"
                )
            tmp_out.replace(ptx_path)
        text = ptx_path.read_text()
        self._memo[key] = text
        return text


@pytest.fixture(scope="session")
def _nvcc_compiler(tmp_path_factory: pytest.TempPathFactory) -> _NvccCompiler:
    # One directory for the whole run: xdist workers share what the others compiled.
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    cache_dir = root / "nvcc_ptx_cache"
    cache_dir.mkdir(exist_ok=True)
    return _NvccCompiler(cache_dir)


@pytest.fixture(scope="session")
def compile_cuda(_nvcc_compiler: _NvccCompiler) -> CompileCuda:
    """``compile_cuda(source, arch="sm_80", extra_flags=()) -> str``: PTX text from nvcc."""
    return _nvcc_compiler


def read_kernel(name: str) -> str:
    """Source text of ``test/python/emulator/cuda/<name>``."""
    return (CUDA_DIR / name).read_text()


@pytest.fixture(scope="session")
def compile_kernel(compile_cuda: CompileCuda) -> Callable[..., str]:
    """``compile_kernel("file.cu", arch="sm_80", extra_flags=()) -> str``: PTX of a suite kernel."""

    def _compile(name: str, arch: str = "sm_80", extra_flags: Sequence[str] = ()) -> str:
        return compile_cuda(read_kernel(name), arch, extra_flags)

    return _compile


@pytest.fixture(params=ARCHS)
def arch(request: pytest.FixtureRequest) -> str:
    """Each target architecture the suite validates (sm_80, sm_90)."""
    return str(request.param)


@dataclass
class LoadedPTX:
    """nvcc's PTX for one suite source file and the emulator module loaded from it."""

    name: str
    arch: str
    ptx: str
    module: Any

    def require(self, *fragments: str) -> None:
        """Assert that the PTX holds each fragment (so the test exercises what it claims)."""
        missing = [f for f in fragments if f not in self.ptx]
        assert not missing, (
            f"{self.name} ({self.arch}): PTX lacks {missing}; the kernel no longer tests them"
        )


@pytest.fixture(scope="session")
def load_kernels(compile_kernel: Callable[..., str]) -> Callable[..., LoadedPTX]:
    """``load_kernels("file.cu", arch="sm_80") -> LoadedPTX``: nvcc + ``emu.load_ptx``, cached."""
    cache: dict[tuple[str, str, tuple[str, ...]], LoadedPTX] = {}

    def _load(name: str, arch: str = "sm_80", extra_flags: Sequence[str] = ()) -> LoadedPTX:
        key = (name, arch, tuple(extra_flags))
        if key not in cache:
            ptx = compile_kernel(name, arch, extra_flags)
            import tileopt.emulator as emu

            cache[key] = LoadedPTX(name, arch, ptx, emu.load_ptx(ptx))
        return cache[key]

    return _load
