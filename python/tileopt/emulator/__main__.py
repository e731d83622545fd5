"""Command line: ``python -m tileopt.emulator kernel.ptx [--list]``.

Loads a PTX file (which checks that every instruction is supported) and lists its kernels
with their parameters, static shared memory, local memory and instruction counts.
Exit status 1 with the error message when the PTX does not load.
"""

from __future__ import annotations

import argparse
import sys

from tileopt.emulator import EmulatorError, load_ptx


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tileopt.emulator",
        description="Load PTX into the tileopt emulator and describe its kernels.",
    )
    ap.add_argument("ptx", help="PTX file ('-' for stdin)")
    ap.add_argument("--list", action="store_true", help="print only the kernel names")
    args = ap.parse_args(argv)
    text = sys.stdin.read() if args.ptx == "-" else open(args.ptx, encoding="utf-8").read()
    try:
        mod = load_ptx(text)
    except EmulatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.list:
        for k in mod.kernels:
            print(k)
        return 0
    print(f"target {mod.target or '?'}, {len(mod.kernels)} kernel(s)")
    for k in mod.kernels:
        info = mod.kernel_info(k)
        params = ", ".join(
            f".{p.type}{'[' + str(p.size) + ']' if p.is_array else ''} {p.name}"
            for p in info.params
        )
        lay = info.layout
        print(f"  {k}({params})")
        print(
            f"    {len(info.ops)} ops, {len(info.reg_dtypes)} registers, "
            f"shared {lay.shared_static} B static, "
            f"local {lay.local_size} B, device functions {info.nfuncs - 1}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
