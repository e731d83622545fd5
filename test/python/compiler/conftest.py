"""The compiler tests need tileopt's native MLIR bindings."""

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
