"""Mutated PTX through the emulator: PTX that tileopt compiled, with one to three random edits
(a line deleted, duplicated or swapped, a token replaced, a number changed, a line cut short),
must load and run or be refused with a ``tileopt.TileoptError`` (``PTXLoadError``,
``LaunchError``, a step limit): never a raw Python exception or a hang. The emulator runs PTX
from other compilers too, so its parser and instruction decoders must take anything.

    python test/python/fuzz/ptxmutate.py --seed 1 --count 2000
"""

from __future__ import annotations

import argparse
import random
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Replacement tokens: registers of other kinds, immediates, types, brackets, branches.
TOKENS = ("%r1", "%rd2", "%p1", "%f3", "%rs1", "0x10", "-1", "65536", ".u32", ".f16", ".b64",
          "bra", ";", "[%r3]", "[%rd1+4]", "{", "}", "{%r1, %r2}", "_")

#: Kernels whose PTX is mutated: (builder factory name, compile options).
KERNELS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("vector_add", {}),
    ("softmax", {}),
    ("layer_norm", {}),
    ("row_sum", {}),
    ("col_sum", {}),
    ("argmax", {}),
    ("transpose", {}),
    ("bias_gelu", {}),
    ("matmul", {"target": "sm_80"}),
    ("matmul", {"target": "sm_90a", "aligned": True}),
    ("matmul", {"target": "sm_90a", "aligned": True, "warp_specialize": True}),
)


@dataclass
class Report:
    """Counts per outcome and, per distinct raw exception, the first trial that raised it."""

    count: int = 0
    refused: int = 0
    raw: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f"{self.count} PTX mutants: {self.count - self.refused - len(self.raw)} ran, "
                 f"{self.refused} refused with a TileoptError, {len(self.raw)} distinct raw "
                 f"exceptions"]
        lines += [f"  trial {trial}: {what}" for what, trial in self.raw.items()]
        return "\n".join(lines)


def mutate(ptx: str, rng: random.Random) -> str:
    """``ptx`` with one to three random edits."""
    lines = ptx.split("\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        edit = rng.choice(("delete", "duplicate", "swap", "token", "number", "cut"))
        if edit == "delete":
            del lines[i]
        elif edit == "duplicate":
            lines.insert(i, lines[i])
        elif edit == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif edit == "token" and lines[i].split():
            words = lines[i].split()
            words[rng.randrange(len(words))] = rng.choice(TOKENS)
            lines[i] = " ".join(words)
        elif edit == "number":
            lines[i] = lines[i].replace("1", str(rng.choice((0, 7, 255, 65536, -1))), 1)
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return "\n".join(lines)


def _arguments(kernel: Any) -> list[Any]:
    """Small tensors for each view of the kernel's ABI (64 x 64, 256, or one element) and 64
    for each scalar."""
    import torch
    from tileopt.runtime.abi import DTYPES

    args: list[Any] = []
    for p in kernel.metadata.abi:
        if p.kind == "scalar":
            args.append(64)
            continue
        shape = {0: (), 1: (256,), 2: (64, 64)}.get(p.rank, (4,) * p.rank)
        dtype = getattr(torch, DTYPES[p.dtype].torch[0])
        args.append(torch.rand(shape).to(dtype) if dtype.is_floating_point
                    else torch.randint(0, 64, shape).to(dtype))
    return args


def compiled_kernels() -> list[Any]:
    """The kernels of :data:`KERNELS`, compiled."""
    import tileopt
    from tileopt import kernels

    return [tileopt.compile(getattr(kernels, name)(), **options) for name, options in KERNELS]


def run(seed: int, count: int, progress: Callable[[int], None] | None = None) -> Report:
    """Mutates, loads and launches ``count`` PTX mutants (seeded by ``seed``)."""
    from tileopt.errors import TileoptError
    from tileopt.runtime import emulator

    rng = random.Random(seed)
    kernels = compiled_kernels()
    report = Report()
    for trial in range(count):
        kernel = rng.choice(kernels)
        ptx = mutate(str(kernel.asm["ptx"]), rng)
        md = kernel.metadata
        try:
            module = emulator.load(ptx)
            emulator.launch(module, md.name, md.abi, (2, 1, 1), md.block, _arguments(kernel),
                            max_steps=100_000)
        except TileoptError:
            report.refused += 1
        except Exception as e:  # what the fuzzer looks for
            where = traceback.extract_tb(e.__traceback__)[-1]
            what = (f"{type(e).__name__}: {str(e)[:120]} at {where.filename.split('/')[-1]}:"
                    f"{where.lineno}")
            report.raw.setdefault(what, trial)
        report.count += 1
        if progress:
            progress(trial)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1000)
    args = ap.parse_args(argv)
    report = run(args.seed, args.count)
    print(report.summary())
    return 1 if report.raw else 0


if __name__ == "__main__":
    sys.exit(main())
