"""Shrinks a crashing (or wrongly accepted / rejected) tile program to a small reproducer.

    python test/python/fuzz/fuzzmin.py --seed 1 --index 31 [--out min.mlir]
    python test/python/fuzz/fuzzmin.py --file program.mlir --options '{"target": "sm_90"}'

Each candidate compiles in a forked child (the parent imports tileopt once), so an abort costs
a fork, not a fresh interpreter. A candidate is kept when its outcome has the same signature as
the original's (the assertion line, or the exception type and first line): lines are dropped
one at a time and in blocks (a region that loses a line no longer parses, so regions go whole
or not at all), until nothing more can be dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def outcome(text: str, options: dict[str, Any], timeout: float = 60.0) -> str:
    """The signature of compiling ``text``: "ok", "diag: ...", "exc: ...", "signal N: ..."."""
    err = tempfile.TemporaryFile()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        os.dup2(err.fileno(), 2)
        os.dup2(err.fileno(), 1)
        msg = "ok"
        try:
            import tileopt
            from tileopt.errors import TileoptError

            try:
                tileopt.compile(text, **options)
            except TileoptError as e:
                lines = [ln for ln in str(e).splitlines() if "error:" in ln] or [str(e)]
                msg = "diag: " + re.sub(r'"-":\d+:\d+', "", lines[0])[:200]
        except Exception as e:  # noqa: BLE001
            msg = f"exc: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(r)
            return "hang"
        time.sleep(0.005)
    msg = os.read(r, 1 << 16).decode(errors="replace")
    os.close(r)
    if os.WIFSIGNALED(status):
        err.seek(0)
        text_err = err.read().decode(errors="replace")
        asserts = [ln for ln in text_err.splitlines()
                   if re.search(r"Assertion|LLVM ERROR|UNREACHABLE|error", ln)]
        line = asserts[0] if asserts else text_err.strip().splitlines()[-1:] or [""]
        line = line if isinstance(line, str) else line[0]
        return f"signal {os.WTERMSIG(status)}: {re.sub(r'0x[0-9a-f]+', '0x', line)[:300]}"
    return msg


def shrink(text: str, options: dict[str, Any], keep: str, budget: float = 300.0) -> str:
    """Drops lines of ``text`` while the outcome stays ``keep``."""
    lines = text.split("\n")
    t0 = time.monotonic()
    changed = True
    while changed and time.monotonic() - t0 < budget:
        changed = False
        # Blocks first (whole regions), then single lines, from the end.
        for size in (8, 4, 2, 1):
            i = len(lines) - size
            while i >= 0 and time.monotonic() - t0 < budget:
                cand = lines[:i] + lines[i + size:]
                if any("tile.kernel" in ln for ln in lines[i:i + size]) or \
                        any(ln.strip() == "tile.return" for ln in lines[i:i + size]):
                    i -= 1
                    continue
                if outcome("\n".join(cand), options) == keep:
                    lines = cand
                    changed = True
                i -= 1
    # Drop kernel arguments that are no longer used.
    text = "\n".join(lines)
    m = re.search(r"tile.kernel @\w+\((.*?)\) \{", text)
    if m:
        args = [a.strip() for a in re.split(r",\s*(?=%arg)", m.group(1))]
        for a in list(args):
            name = a.split(":")[0]
            rest = text[m.end():]
            if not re.search(re.escape(name) + r"\b", rest):
                trial = [x for x in args if x != a]
                cand = text[:m.start(1)] + ", ".join(trial) + text[m.end(1):]
                if outcome(cand, options) == keep:
                    text, args = cand, trial
                    m = re.search(r"tile.kernel @\w+\((.*?)\) \{", text)
                    assert m
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int)
    ap.add_argument("--index", type=int)
    ap.add_argument("--file", type=Path)
    ap.add_argument("--options", default=None, help="compile options as JSON")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds")
    args = ap.parse_args()
    if args.file:
        text = args.file.read_text()
        options = json.loads(args.options or "{}")
    else:
        from fuzzgen import generate

        p = generate(args.seed, args.index)
        text, options = p.text, dict(p.options)
        if args.options:
            options = json.loads(args.options)
    options = {k: (tuple(tuple(g) for g in v) if k == "same_shapes" else v)
               for k, v in options.items()}
    import tileopt  # noqa: F401  (once, before forking)

    keep = outcome(text, options)
    print(f"outcome: {keep}", file=sys.stderr)
    small = shrink(text, options, keep, args.budget)
    print(f"// outcome: {keep}\n// options: {json.dumps(options)}\n{small}")
    if args.out:
        args.out.write_text(f"// outcome: {keep}\n// options: {json.dumps(options)}\n{small}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
