"""The fixed-seed fuzz batch: random tile programs (``fuzzgen``) must compile and match numpy,
or be rejected with a diagnostic; never crash, hang, raise a raw exception or answer wrongly.

``make fuzz`` runs the long version (``fuzzrun.py``); this is the short one that ``make test``
runs. A failure prints each distinct problem once, with the directory of its reproducer
(``program.mlir`` and ``repro.py``), and ``fuzzmin.py`` shrinks it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
pytest.importorskip("torch", reason="the fuzz harness lays out arrays with torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzzgen  # noqa: E402
import fuzzrun  # noqa: E402
import ptxmutate  # noqa: E402

SEED = 20261123
COUNT = int(os.environ.get("TILEOPT_FUZZ_TEST_COUNT", "120"))
TIMEOUT = float(os.environ.get("TILEOPT_FUZZ_TEST_TIMEOUT", "60"))


def test_generator_is_deterministic() -> None:
    for index in (0, 7, 31):
        a, b = fuzzgen.generate(SEED, index), fuzzgen.generate(SEED, index)
        assert a.text == b.text and a.options == b.options and a.grid == b.grid


def test_fixed_seed_batch() -> None:
    out = Path(tempfile.gettempdir()) / f"tileopt-fuzz-pytest-{os.getpid()}"
    batch = fuzzrun.run_batch(SEED, COUNT, jobs=2, timeout=TIMEOUT, out=out)
    print(batch.summary())
    counts = batch.counts
    assert counts["generator-error"] == 0, batch.summary()
    # Most programs must get through (a generator that only makes invalid IR tests nothing).
    assert counts["ok"] >= COUNT // 3, batch.summary()
    if batch.failures:
        pytest.fail(f"{len(batch.failures)} of {COUNT} fuzz programs failed; reproducers in "
                    f"{out}\n{batch.summary()}", pytrace=False)


def test_ptx_mutants() -> None:
    """Mutated PTX loads and runs, or is refused with a TileoptError: no raw exception."""
    report = ptxmutate.run(SEED, int(os.environ.get("TILEOPT_FUZZ_TEST_PTX_COUNT", "300")))
    print(report.summary())
    assert not report.raw, report.summary()
