"""`make demo`: build a row-softmax tile kernel from Python, print its IR, and
run it through `tileopt-opt` (canonicalize + cse)."""

from __future__ import annotations

import subprocess
import sys

from tileopt._tools import tool_path
from tileopt.builder import KernelBuilder, View


def build_softmax(block: int = 1024) -> KernelBuilder:
    """One program per row; the row fits one tile of `block` columns."""
    kb = KernelBuilder("softmax", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row = k.program_id(0)
        x = k.load(k.args.x, [row, 0], [1, block], padding=float("-inf"))
        e = k.exp(x - k.max(x, axis=1, keepdims=True))
        k.store(e / k.sum(e, axis=1, keepdims=True), k.args.y, [row, 0])
    return kb


def main() -> int:
    kb = build_softmax()
    assert kb.module.operation.verify()
    print("// ---- row softmax, built from Python ----")
    print(kb.module)
    opt = subprocess.run(
        [str(tool_path("tileopt-opt")), "--canonicalize", "--cse"],
        input=str(kb.module),
        capture_output=True,
        text=True,
        check=False,
    )
    if opt.returncode != 0:
        print(opt.stderr, file=sys.stderr)
        return opt.returncode
    print("// ---- after tileopt-opt --canonicalize --cse ----")
    print(opt.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
