"""Compile a module from the command line and print one stage or a summary.

    python -m tileopt.compiler kernel.mlir --target sm_90 --emit ptx
    python -m tileopt.compiler k.mlir --start llvm --signature 'x: view<?xf32>, n: i32'

``--emit`` is a stage name (``tile``, ``tilegpu``, ``llvm``, ``ptx``, ``cubin``), ``summary``
(the kernel's metadata, stage times and PTX instruction count) or ``kernel`` (the whole kernel
as ``Kernel.save`` writes it, for ``tileopt.runtime.kernel.Kernel.load`` on a machine where
tileopt was not built).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tileopt.compiler.kernel import START_STAGES, compile
from tileopt.compiler.nvidia import STAGES
from tileopt.errors import ArgumentError, OptionError, TileoptError


def split_signature(text: str) -> list[str]:
    """``"x: view<?xf32, strides [1]>, n: i32"`` -> one string per parameter (commas inside
    ``<...>`` and ``[...]`` do not split)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "<[") - (c in ">]")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _fail(message: str, status: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status: 0, 1 when the module does not compile,
    2 for a bad command line (an unreadable input, a bad option)."""
    ap = argparse.ArgumentParser(prog="python -m tileopt.compiler", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="the module (MLIR text; PTX with --start ptx); '-' for stdin")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--num-warps", type=int, default=None,
                    help="warps per program (default: 4 at --start tile, else the kernel's)")
    ap.add_argument("--kernel", help="the kernel to compile when the module has several")
    ap.add_argument("--start", default="tile", choices=START_STAGES)
    ap.add_argument("--signature", help="the ABI after the tile stages, e.g. 'x: view<?xf32>, "
                    "n: i32'")
    ap.add_argument("--assembler", default="auto", choices=("auto", "ptxas", "nvjitlink"))
    ap.add_argument("--contiguous", action="store_true",
                    help="let every view's innermost stride be 1 (128-bit accesses)")
    ap.add_argument("--emit", default="summary", choices=(*STAGES, "summary", "kernel"))
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)

    try:
        text = (sys.stdin.read() if args.input == "-"
                else Path(args.input).read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        return _fail(f"cannot read {args.input}: it is not UTF-8 text ({e.reason} at byte "
                     f"{e.start})", 2)
    except OSError as e:
        return _fail(f"cannot read {args.input}: {e.strerror or e}", 2)
    try:
        signature = split_signature(args.signature) if args.signature else None
        kernel = compile(text, args.target, args.num_warps, kernel=args.kernel, start=args.start,
                         signature=signature, assembler=args.assembler,
                         contiguous=args.contiguous)
    except (OptionError, ArgumentError) as e:
        return _fail(str(e), 2)
    except TileoptError as e:
        return _fail(str(e), 1)
    if args.emit == "summary":
        out: str | bytes = kernel.summary() + "\n"
    elif args.emit == "kernel":
        out = kernel.to_json()
    elif args.emit not in kernel.asm:
        return _fail(f"stage {args.emit} was not produced (stages: {', '.join(kernel.asm)})", 1)
    else:
        out = kernel.asm[args.emit]
    try:
        if args.output:
            path = Path(args.output)
            path.write_bytes(out) if isinstance(out, bytes) else path.write_text(out)
        elif isinstance(out, bytes):
            sys.stdout.buffer.write(out)
        else:
            sys.stdout.write(out)
    except OSError as e:
        return _fail(f"cannot write {args.output or 'stdout'}: {e.strerror or e}", 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
