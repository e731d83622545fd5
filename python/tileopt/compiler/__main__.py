"""Compile a module from the command line and print one stage or a summary.

    python -m tileopt.compiler kernel.mlir --target sm_90 --emit ptx
    python -m tileopt.compiler k.mlir --start llvm --signature 'x: view<?xf32>, n: i32'

``--emit`` is a stage name (``tile``, ``tilegpu``, ``llvm``, ``ptx``, ``cubin``) or ``summary``
(the kernel's metadata, stage times and PTX instruction count).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileopt.compiler.kernel import START_STAGES, compile
from tileopt.compiler.nvidia import STAGES
from tileopt.errors import TileoptError
from tileopt.runtime.abi import KernelParam


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m tileopt.compiler", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="the module (MLIR text; PTX with --start ptx); '-' for stdin")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--num-warps", type=int, default=4)
    ap.add_argument("--kernel", help="the kernel to compile when the module has several")
    ap.add_argument("--start", default="tile", choices=START_STAGES)
    ap.add_argument("--signature", help="the ABI after the tile stages, e.g. 'x: view<?xf32>, "
                    "n: i32'")
    ap.add_argument("--assembler", default="auto", choices=("auto", "ptxas", "nvjitlink"))
    ap.add_argument("--contiguous", action="store_true",
                    help="let every view's innermost stride be 1 (128-bit accesses)")
    ap.add_argument("--emit", default="summary", choices=(*STAGES, "summary"))
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)

    text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
    try:
        signature = None
        if args.signature:
            signature = [KernelParam.parse(p) for p in args.signature.split(",")]
        kernel = compile(text, args.target, args.num_warps, kernel=args.kernel, start=args.start,
                         signature=signature, assembler=args.assembler,
                         contiguous=args.contiguous)
    except TileoptError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.emit == "summary":
        out: str | bytes = kernel.summary() + "\n"
    elif args.emit not in kernel.asm:
        print(f"error: stage {args.emit} was not produced (stages: {', '.join(kernel.asm)})",
              file=sys.stderr)
        return 1
    else:
        out = kernel.asm[args.emit]
    if args.output:
        path = Path(args.output)
        path.write_bytes(out) if isinstance(out, bytes) else path.write_text(out)
    elif isinstance(out, bytes):
        sys.stdout.buffer.write(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
