"""Runs generated tile programs (``fuzzgen``) through ``tileopt.compile`` and the emulator.

Every program must either compile and match its numpy reference, or be rejected with a
diagnostic (a ``tileopt.TileoptError``): never crash the process, hang, raise a raw Python
exception or give a wrong answer. Programs run in worker processes that compile and run many
programs in sequence and report over a pipe; a worker that dies (a signal: an MLIR assertion,
a segfault) or exceeds the timeout is recorded as a crash or hang of the program it was running,
its reproducer is saved, and a fresh worker takes over.

    python test/python/fuzz/fuzzrun.py --seed 1 --count 2000 --jobs 2 --timeout 60 --out DIR

Outcomes: ``ok``; ``diagnostic`` (an invalid program rejected, as it must be); ``unsupported``
(a valid program rejected with a diagnostic: allowed, listed); and the failures ``crash``,
``hang``, ``raw-exception``, ``wrong-answer``, ``run-error`` (a TileoptError from the launch of a
valid program with valid arguments), ``accepted-invalid`` (an invalid program compiled) and
``generator-error`` (a bug in the fuzzer itself). Reproducers (``program.mlir``, ``repro.py``,
``result.txt``) go under ``--out`` (default: a directory in the system temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FAILURES = ("crash", "hang", "raw-exception", "wrong-answer", "run-error", "accepted-invalid",
            "generator-error")
OUTCOMES = ("ok", "diagnostic", "unsupported") + FAILURES


# ---------------------------------------------------------------------------------------------
# arrays and checking (in the worker)


def make_arrays(p: Any) -> list[Any]:
    """The launch arguments of program ``p``: torch tensors laid out as each Arg says."""
    import numpy as np
    import torch

    tdt = {"i1": torch.bool, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
           "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16,
           "f32": torch.float32, "f64": torch.float64, "f8E4M3FN": torch.float8_e4m3fn,
           "f8E5M2": torch.float8_e5m2}
    out = []
    for a in p.args:
        if a.kind == "scalar":
            out.append(bool(a.value) if a.dtype == "i1" else a.value)
            continue
        v = np.asarray(a.value)
        src = torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v.copy())
        src = src.to(tdt[a.dtype])
        lay = a.layout if a.rank else "contiguous"
        if lay == "transposed" and a.rank >= 2:
            rev = list(range(a.rank))[::-1]
            t = src.permute(rev).contiguous().permute(rev)
        elif lay in ("strided", "padded", "aligned") and a.rank >= 1:
            n = a.shape[-1]
            item = src.element_size()
            if lay == "strided":
                width, step = 2 * n, 2
            elif lay == "padded":
                width, step = n + 3, 1
            else:
                per = max(1, 16 // item)
                width, step = -(-max(n, 1) // per) * per, 1
            big = torch.zeros(*a.shape[:-1], width, dtype=src.dtype)
            t = big[..., : n * step: step]
            t.copy_(src)
        else:
            t = src.contiguous()
        out.append(t)
    return out


def check(p: Any, arrays: list[Any]) -> list[str]:
    """Mismatches between the arrays after the launch and the reference (empty: all good)."""
    import numpy as np
    from fuzzgen import TINY, is_float, to_ref

    problems = []
    for i, (ref, err) in p.expected.items():
        a = p.args[i]
        t = arrays[i]
        got = t.float().numpy() if a.dtype == "bf16" else t.numpy()
        got = to_ref(got, a.dtype)
        if is_float(a.dtype):
            with np.errstate(all="ignore"):
                diff = np.abs(got - ref.astype(np.float64))
                bad = ~(diff <= 2 * err + TINY[a.dtype]) & np.isfinite(err)
        else:
            bad = (got != ref) & np.isfinite(err)
        bad = np.asarray(bad, dtype=bool)
        if bad.any():
            where = np.argwhere(bad)[:4]
            checked = int(np.isfinite(err).sum())
            desc = ", ".join(
                f"{tuple(int(x) for x in w)}: got {got[tuple(w)]!r} expected "
                f"{ref[tuple(w)]!r} (+-{2 * err[tuple(w)]:.3g})" for w in where)
            problems.append(f"argument {i} ({a.dtype}, shape {a.shape}): {int(bad.sum())} of "
                            f"{checked} checked elements differ; {desc}")
    return problems


def run_one(seed: int, index: int) -> dict[str, Any]:
    """Generates, compiles, runs and checks one program; the outcome as a dict."""
    import numpy as np
    import tileopt
    from fuzzgen import generate
    from tileopt.errors import TileoptError

    res: dict[str, Any] = {"seed": seed, "index": index}
    try:
        p = generate(seed, index)
    except Exception:
        return {**res, "outcome": "generator-error", "message": traceback.format_exc()}
    res.update(kind=p.kind, note=p.note)
    try:
        kernel = tileopt.compile(p.text, **p.options)
    except TileoptError as e:
        outcome = "diagnostic" if p.expect == "invalid" else "unsupported"
        msg = str(e)
        if not msg.strip():
            outcome, msg = "raw-exception", f"{type(e).__name__} with an empty message"
        return {**res, "outcome": outcome, "message": f"{type(e).__name__}: {msg}"}
    except Exception:
        return {**res, "outcome": "raw-exception", "message": traceback.format_exc()}
    if p.expect == "invalid":
        return {**res, "outcome": "accepted-invalid", "message": f"compiled: {p.note}"}
    if not p.run:
        return {**res, "outcome": "ok", "message": "compiled (not run)"}
    try:
        arrays = make_arrays(p)
    except Exception:
        return {**res, "outcome": "generator-error", "message": traceback.format_exc()}
    try:
        with np.errstate(all="ignore"):
            kernel.launch(p.grid, *arrays, device="emulator")
    except TileoptError as e:
        return {**res, "outcome": "run-error", "message": f"{type(e).__name__}: {e}"}
    except Exception:
        return {**res, "outcome": "raw-exception", "message": traceback.format_exc()}
    try:
        problems = check(p, arrays)
    except Exception:
        return {**res, "outcome": "generator-error", "message": traceback.format_exc()}
    if problems:
        return {**res, "outcome": "wrong-answer", "message": "\n".join(problems)}
    return {**res, "outcome": "ok", "message": ""}


def run_forked(seed: int, index: int, timeout: float) -> dict[str, Any]:
    """``run_one`` in a forked child: a signal or a timeout there is a crash or a hang."""
    res: dict[str, Any] = {"seed": seed, "index": index}
    err = tempfile.TemporaryFile()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child, in a process group of its own (ptxas and all)
        os.setpgid(0, 0)
        os.close(r)
        os.dup2(err.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            out = run_one(seed, index)
        except BaseException:  # noqa: BLE001
            out = {**res, "outcome": "raw-exception", "message": traceback.format_exc()}
        data = json.dumps(out).encode()
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([r], [], [], max(left, 0))
        if not ready:
            timed_out = True
            try:
                os.killpg(pid, 9)
            except ProcessLookupError:
                pass
            break
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    err.seek(0)
    tail = err.read().decode(errors="replace")[-4000:]
    if timed_out:
        return {**res, "outcome": "hang", "message": f"no answer in {timeout} s\n{tail}"}
    if chunks and not os.WIFSIGNALED(status):
        return json.loads(b"".join(chunks))
    how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exit status {os.WEXITSTATUS(status)}")
    return {**res, "outcome": "crash", "message": f"the process died ({how})\n{tail}"}


def worker_main() -> None:
    """Reads ``seed index timeout`` lines on stdin, answers one JSON line each (on the real
    stdout; anything native code prints goes to stderr). Each program runs in a forked child,
    so tileopt is imported once per worker, not once per crash."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import warnings

    warnings.simplefilter("ignore")
    # Everything a program imports, imported once before "ready" (so startup is not timed):
    # the forked children inherit it (they spent most of their time importing tileopt's
    # lazily loaded parts).
    import importlib

    for name in ("fuzzgen", "numpy.ma", "numpy.random", "torch", "tileopt.compiler",
                 "tileopt.dialects.tile", "tileopt.runtime.emulator"):
        importlib.import_module(name)
    from tileopt.emulator.ops import load_handlers

    load_handlers()

    proto.write("ready\n")
    for line in sys.stdin:
        seed, index, timeout = line.split()
        proto.write(json.dumps(run_forked(int(seed), int(index), float(timeout))) + "\n")


# ---------------------------------------------------------------------------------------------
# the parent


class Worker:
    """A worker process; ``run`` returns the outcome of one program, or a crash/hang."""

    def __init__(self, log_dir: Path, n: int) -> None:
        self.log = log_dir / f"worker{n}.stderr"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.err = open(self.log, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, bufsize=0)
        line = self._readline(300)
        if line != "ready":
            raise RuntimeError(f"the fuzz worker did not start: {line!r}; see {self.log}")

    def _readline(self, timeout: float) -> str | None:
        """A line from the worker; None on timeout; "" at EOF."""
        assert self.proc is not None and self.proc.stdout is not None
        buf = b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                return ""
            buf += chunk
        return buf.decode().strip()

    def stderr_tail(self, since: int) -> str:
        self.err.flush()
        data = self.log.read_bytes()[since:]
        return data.decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, seed: int, index: int, timeout: float) -> dict[str, Any]:
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        mark = self.log.stat().st_size
        res: dict[str, Any] = {"seed": seed, "index": index}
        try:
            self.proc.stdin.write(f"{seed} {index} {timeout}\n".encode())
            line = self._readline(timeout + 60)
        except BrokenPipeError:
            line = ""
        if line:
            return json.loads(line)
        if line is None:
            self.stop()
            return {**res, "outcome": "hang",
                    "message": f"no answer in {timeout} s\n{self.stderr_tail(mark)}"}
        rc = self.proc.wait()
        self.proc = None
        how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return {**res, "outcome": "crash",
                "message": f"the worker process died ({how})\n{self.stderr_tail(mark)}"}


@dataclass
class Batch:
    seed: int
    count: int
    results: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def counts(self) -> Counter:
        return Counter(r["outcome"] for r in self.results)

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["outcome"] in FAILURES]

    def summary(self) -> str:
        c = self.counts
        lines = [f"fuzz seed {self.seed}: {len(self.results)} programs in {self.seconds:.1f} s"]
        lines.append("  " + ", ".join(f"{o} {c[o]}" for o in OUTCOMES if c[o]))
        slow = sorted((r for r in self.results if r["outcome"] != "hang"),
                      key=lambda r: -r.get("seconds", 0))[:3]
        if slow:
            lines.append("  slowest: " + ", ".join(
                f"#{r['index']} {r.get('seconds', 0):.1f} s ({r.get('kind', '?')})" for r in slow))
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in self.results:
            if r["outcome"] in FAILURES or r["outcome"] == "unsupported":
                sig = signature(r["message"])
                if r["outcome"] == "wrong-answer":
                    sig = f"{r.get('kind')} program, {r.get('tag', '?')}"
                groups[(r["outcome"], sig)].append(r)
        for (outcome, sig), rs in sorted(groups.items()):
            ids = ", ".join(f"{r['index']}" for r in rs[:6])
            lines.append(f"  [{outcome}] x{len(rs)} (programs {ids}): {sig}")
        return "\n".join(lines)


def signature(message: str) -> str:
    """The first informative line of a message, numbers and SSA names blurred: failures with
    one cause group together."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    pick = ""
    mlir_errors = [ln for ln in lines if re.match(r'error: "-":\d+:\d+: ', ln)]
    if mlir_errors:  # MLIR's own diagnostic, not the pipeline that printed it
        return re.sub(r"\d+", "N", re.sub(r"%[\w#]+", "%_", mlir_errors[0]))[:300]
    for ln in lines:
        if re.search(r"Assertion|error:|Error|UNREACHABLE|LLVM ERROR|Segmentation|signal|"
                     r"differ|compiled|no answer|died", ln) and not ln.startswith("==="):
            pick = ln
            if "died" not in ln:
                break
    if "died" in pick:
        more = [ln for ln in lines if re.search(r"Assertion|LLVM ERROR|UNREACHABLE", ln)]
        pick += " " + (more[0] if more else (lines[-1] if lines else ""))
    if not pick and lines:
        pick = lines[-1]
    pick = re.sub(r"%[\w#]+", "%_", pick)
    pick = re.sub(r"\d+", "N", pick)
    return pick[:300]


def triage(text: str) -> str:
    """A hint for grouping wrong answers: features of the program known to go wrong."""
    tags = []
    if re.search(r"arith.constant -\d+ : index", text):
        tags.append("has negative constant offsets")
    if re.search(r"arith.fpto[su]i [^\n]* to tensor<[^>]*xi1>", text):
        tags.append("has float-to-i1 casts")
    if "scf.for" in text:
        tags.append("has loops")
    if "tile.dot" in text:
        tags.append("has dots")
    return ", ".join(tags) or "plain"


def save(out: Path, r: dict[str, Any]) -> Path:
    from fuzzgen import generate

    d = out / r["outcome"] / f"{r['seed']}-{r['index']}"
    d.mkdir(parents=True, exist_ok=True)
    try:
        p = generate(r["seed"], r["index"])
        r.setdefault("kind", p.kind)
        r.setdefault("note", p.note)
        if r["outcome"] == "wrong-answer":
            r["tag"] = triage(p.text)
    except Exception:
        p = None
    (d / "result.txt").write_text(json.dumps(r, indent=1) + "\n\n" + r.get("message", ""))
    if p is None:
        return d
    (d / "program.mlir").write_text(p.text)
    (d / "repro.py").write_text(p.snippet().replace(
        "open('program.mlir')", f"open({str(d / 'program.mlir')!r})"))
    return d


def run_batch(seed: int, count: int, jobs: int = 2, timeout: float = 60.0,
              out: Path | None = None, start: int = 0, verbose: bool = False,
              save_unsupported: bool = True) -> Batch:
    """Runs programs ``start .. start+count-1`` of batch ``seed`` on ``jobs`` workers."""
    out = out or Path(tempfile.gettempdir()) / f"tileopt-fuzz-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    batch = Batch(seed, count)
    todo = iter(range(start, start + count))
    lock = threading.Lock()
    t0 = time.monotonic()
    errors: list[BaseException] = []

    def loop(n: int) -> None:
        w = Worker(out, n)
        try:
            while True:
                with lock:
                    index = next(todo, None)
                if index is None:
                    return
                t = time.monotonic()
                r = w.run(seed, index, timeout)
                r["seconds"] = round(time.monotonic() - t, 2)
                keep = r["outcome"] in FAILURES or (
                    save_unsupported and r["outcome"] == "unsupported")
                if keep:
                    r["saved"] = str(save(out, r))
                with lock:
                    batch.results.append(r)
                    if verbose or r["outcome"] in FAILURES:
                        print(f"{index}: {r['outcome']} {r.get('kind', '')} "
                              f"{signature(r.get('message', ''))[:160]}", flush=True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            w.stop()

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    batch.results.sort(key=lambda r: r["index"])
    batch.seconds = time.monotonic() - t0
    (out / "summary.txt").write_text(batch.summary() + "\n")
    with open(out / "results.jsonl", "w") as f:
        for r in batch.results:
            f.write(json.dumps({k: v for k, v in r.items() if k != "message"}
                               | {"message": r.get("message", "")[:500]}) + "\n")
    return batch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    ap.add_argument("--out", type=Path, default=None,
                    help="where reproducers go (default: $TMPDIR/tileopt-fuzz-SEED)")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--avoid", default="",
                    help="comma-separated features to leave out while hunting other bugs "
                         "(negative-offsets)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one", type=int, default=None,
                    help="run program INDEX of --seed in this process and print the result")
    args = ap.parse_args(argv)
    if args.avoid:
        os.environ["TILEOPT_FUZZ_AVOID"] = args.avoid  # the workers inherit it
        import fuzzgen

        fuzzgen.AVOID.update(args.avoid.split(","))
    if args.worker:
        worker_main()
        return 0
    if args.one is not None:
        from fuzzgen import generate

        print(generate(args.seed, args.one).text)
        print(json.dumps(run_one(args.seed, args.one), indent=1))
        return 0
    batch = run_batch(args.seed, args.count, args.jobs, args.timeout, args.out, args.start,
                      args.verbose)
    print(batch.summary())
    out = args.out or Path(tempfile.gettempdir()) / f"tileopt-fuzz-{args.seed}"
    print(f"reproducers and summary in {out}")
    return 1 if batch.failures else 0


if __name__ == "__main__":
    sys.exit(main())
