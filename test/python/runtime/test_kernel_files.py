"""Kernel.save / Kernel.load: a kernel compiled here runs where tileopt's native build is not.

The loader is what a GPU machine without LLVM/MLIR uses (benchmarks/matmul_tflops.py
--kernels): the kernel must come back whole (code, cubin, metadata, tensor maps), launch there
without importing the MLIR bindings, and a file that is not a saved kernel must say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")

from tileopt import kernels  # noqa: E402
from tileopt.compiler import compile  # noqa: E402
from tileopt.runtime.kernel import Kernel  # noqa: E402
from tileopt.testing.native import run_without_native_build  # noqa: E402


def test_saved_kernel_comes_back_whole(tmp_path: Path) -> None:
    kern = compile(kernels.matmul("f16", block_m=64, block_n=64, block_k=32), "sm_90a",
                   num_stages=3, aligned=True, divisible_sizes=True, int32_indexing=True)
    assert kern.metadata.tensor_maps, "the TMA pipeline should take tensor maps"
    kern.save(tmp_path / "k.json")
    back = Kernel.load(tmp_path / "k.json")
    assert back.metadata == kern.metadata
    assert back.asm == kern.asm


def test_loaded_kernel_runs_without_the_native_bindings(tmp_path: Path) -> None:
    compile(kernels.vector_add("f32"), "sm_80").save(tmp_path / "add.json")
    # A fresh interpreter in which importing the MLIR bindings fails, as on a machine
    # without the native build.
    proc = run_without_native_build(f"""
        import numpy as np
        from tileopt.runtime.kernel import Kernel

        kern = Kernel.load({str(tmp_path / "add.json")!r})
        assert "PTX instructions" in kern.summary()
        x, y = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, np.float32)
        out = np.zeros(1000, np.float32)
        kern.launch((1000 + 1023) // 1024, x, y, out)
        np.save({str(tmp_path / "out.npy")!r}, out)
        assert not any(m.startswith("tileopt._mlir_libs") for m in sys.modules)
    """, timeout=300)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  np.arange(1000, dtype=np.float32) + 0.5)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "is not a saved tileopt kernel"),
        (json.dumps({"format": "tileopt-kernel-0"}), "tileopt-kernel-1 format"),
        (json.dumps({"format": "tileopt-kernel-1", "metadata": {}}), "KernelMetadata"),
        (json.dumps([1, 2]), "tileopt-kernel-1 format"),
    ],
)
def test_load_names_what_is_wrong(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=problem) as info:
        Kernel.load(path)
    assert str(path) in str(info.value)


def test_load_of_a_truncated_kernel_fails_cleanly(tmp_path: Path) -> None:
    compile(kernels.vector_add("f32"), "sm_80").save(tmp_path / "add.json")
    text = (tmp_path / "add.json").read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="is not a saved tileopt kernel"):
        Kernel.load(tmp_path / "cut.json")
