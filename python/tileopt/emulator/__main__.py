"""Command line: ``python -m tileopt.emulator kernel.ptx [--list] [--kernel NAME]``.

Loads a PTX file (which checks that every instruction is supported) and lists its kernels
with their parameters, static shared memory, local memory and instruction counts.
Exit status 1 with the error message when the PTX does not load; exit status 2 with a
one-line message (as argparse does) for bad command-line input: a file that cannot be read,
a kernel name the module does not define.
"""

from __future__ import annotations

import argparse
import sys

from tileopt.emulator import EmulatorError, load_ptx

PROG = "python -m tileopt.emulator"


def _usage_error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def _read(path: str) -> str:
    """The text of ``path`` ('-': stdin); raises OSError or UnicodeDecodeError."""
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def main(argv: list[str] | None = None) -> int:
    """Runs the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Load PTX into the tileopt emulator and describe its kernels.",
    )
    ap.add_argument("ptx", help="PTX file ('-' for stdin)")
    ap.add_argument("--list", action="store_true", help="print only the kernel names")
    ap.add_argument("--kernel", metavar="NAME", help="describe only this kernel")
    args = ap.parse_args(argv)
    where = "standard input" if args.ptx == "-" else repr(args.ptx)
    try:
        text = _read(args.ptx)
    except OSError as e:
        return _usage_error(f"cannot read PTX file {where}: {e.strerror or e}")
    except UnicodeDecodeError as e:
        return _usage_error(
            f"{where} is not a PTX text file (byte 0x{e.object[e.start]:02x} at offset "
            f"{e.start} is not UTF-8); pass the .ptx text, not a cubin or object file"
        )
    try:
        mod = load_ptx(text)
    except EmulatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    kernels = mod.kernels
    if args.kernel is not None:
        if args.kernel not in kernels:
            return _usage_error(
                f"no kernel {args.kernel!r} in {where}; its kernels: {', '.join(kernels) or 'none'}"
            )
        kernels = [args.kernel]
    if args.list:
        for k in kernels:
            print(k)
        return 0
    print(f"target {mod.target or '?'}, {len(mod.kernels)} kernel(s)")
    for k in kernels:
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
