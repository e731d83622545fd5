"""Fixtures for the GPU code-generation tests: the reference kernels, compiled once per target.

The ``compiled`` fixture, ``compiled(name, target, **params)``, builds
``tileopt.kernels.<name>(**params)`` and compiles it for ``target``, cached for the session,
so the correctness, ptxas and PTX checks share one compilation.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
torch = pytest.importorskip("torch", reason="the kernel tests compare with PyTorch")

TARGETS = ("sm_80", "sm_90")


@cache
def _compiled(name: str, target: str, params: tuple[tuple[str, Any], ...]) -> Any:
    from tileopt import kernels
    from tileopt.compiler import compile

    return compile(getattr(kernels, name)(**dict(params)), target)


def _compile(name: str, target: str, **params: Any) -> Any:
    return _compiled(name, target, tuple(sorted(params.items())))


@pytest.fixture
def compiled() -> Any:
    """``compiled(name, target, **params)``: ``tileopt.kernels.<name>(**params)`` compiled for
    ``target``, cached for the session."""
    return _compile


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """Each target the kernels are tested on."""
    return request.param


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
