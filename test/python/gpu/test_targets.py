"""Targets by name: every sm_XX gets the PTX version it needs; impossible combinations are
errors, never an abort of the process (LLVM aborts on a PTX version too old for the chip)."""

from __future__ import annotations

import pytest
import tileopt
from tileopt import kernels


@pytest.mark.parametrize(("target", "version"), [("sm_100", "8.6"), ("sm_120", "8.7")])
def test_newer_chips_get_the_ptx_version_they_need(target: str, version: str) -> None:
    kernel = tileopt.compile(kernels.vector_add(), target=target)
    assert f".version {version}\n" in str(kernel.asm["ptx"])
    assert kernel.metadata.spill_bytes == 0


def test_a_ptx_version_too_old_for_the_chip_is_an_error_not_an_abort() -> None:
    with pytest.raises(tileopt.CompilationError, match="ptx_version=80 cannot target sm_100"):
        tileopt.compile(kernels.vector_add(), target="sm_100", ptx_version=80)
