"""The compile cache (tileopt.compiler.cache): hits, misses, bypass, damaged entries, unwritable
directories, concurrent writers, processes that compile the same model at once, the size cap
(least recently used entries evicted) and temporary files left by killed writers.

Every test has an empty cache directory of its own (``fresh_cache``); hits are proven by the
pipeline not running (it is replaced by a function that raises) and by the cache's counts,
never by timing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tileopt import kernels
from tileopt.compiler import cache, compile, nvidia
from tileopt.compiler import graph as graph_module
from tileopt.compiler import kernel as kernel_module
from tileopt.compiler.cache import CacheWarning
from tileopt.errors import OptionError


@pytest.fixture(autouse=True)
def _empty_cache(fresh_cache: Path) -> Path:
    cache.reset_stats()
    return fresh_cache


def _no_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes every stage of a kernel compilation and kernel formation raise."""
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the pipeline ran")

    for name in ("add_stages", "make_cubin"):
        monkeypatch.setattr(nvidia, name, broken)
    monkeypatch.setattr(kernel_module, "_parse", broken)
    monkeypatch.setattr(graph_module, "form_kernels", broken)


def _entries(directory: Path, kind: str = "kernel") -> list[Path]:
    return sorted((directory / kind).iterdir()) if (directory / kind).is_dir() else []


def _softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _check_softmax(k: Any) -> None:
    x = np.random.default_rng(0).standard_normal((5, 300)).astype(np.float32)
    y = np.zeros_like(x)
    k.launch(kernels.softmax_grid(x.shape), x, y)
    np.testing.assert_allclose(y, _softmax_reference(x), rtol=1e-5, atol=1e-7)


def _subprocess(script: str, directory: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**os.environ, "TILEOPT_CACHE_DIR": str(directory), **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# kernels


def test_a_hit_returns_an_equal_kernel_without_the_pipeline(_empty_cache: Path, monkeypatch,
                                                            tmp_path: Path) -> None:
    first = compile(kernels.softmax(), "sm_90")
    assert first.cache_key is not None and "cache" not in first.times
    assert cache.stats() == cache.CacheStats(misses=1, stores=1)
    assert [p.name for p in _entries(_empty_cache)] == [first.cache_key]

    _no_pipeline(monkeypatch)
    assert compile(kernels.softmax(), "sm_90") is first  # in memory: the same Kernel
    cache.clear()  # memory only: the next one is read from disk
    monkeypatch.setenv("TILEOPT_DUMP_DIR", str(tmp_path / "dumps"))
    again = compile(kernels.softmax(), "sm_90")
    assert again is not first and again.cache_key == first.cache_key
    assert again.asm == first.asm and isinstance(again.asm["cubin"], bytes)
    assert list(again.asm) == list(first.asm) == ["tile", "tilegpu", "llvm", "ptx", "cubin"]
    assert again.metadata == first.metadata
    assert set(again.times) == {"cache"}
    assert cache.stats() == cache.CacheStats(memory_hits=1, disk_hits=1, misses=1, stores=1)
    # A hit dumps the stages as a compilation would.
    assert (tmp_path / "dumps" / "softmax.ptx.ptx").read_text() == again.asm["ptx"]
    _check_softmax(again)


def test_text_input_and_a_later_stage_hit(handwritten, monkeypatch) -> None:
    source, signature = handwritten.source("scale"), handwritten.signature("scale")
    first = compile(source, "sm_80", start="llvm", signature=signature)
    _no_pipeline(monkeypatch)
    cache.clear()
    again = compile(source, "sm_80", start="llvm", signature=signature)
    assert again.asm == first.asm and again.metadata == first.metadata
    assert cache.stats().disk_hits == 1


def test_options_and_targets_miss() -> None:
    kb = kernels.vector_add()
    base = compile(kb, "sm_90")
    variants = [
        compile(kb, "sm_80"),
        compile(kb, "sm_90", num_warps=8),
        compile(kb, "sm_90", opt_level=2),
        compile(kb, "sm_90", aligned=True),
        compile(kb, "sm_90", assembler="nvjitlink"),
        compile(kernels.vector_add("f16"), "sm_90"),
    ]
    keys = {k.cache_key for k in [base, *variants]}
    assert len(keys) == 1 + len(variants)
    assert cache.stats() == cache.CacheStats(misses=7, stores=7)
    assert ".target sm_80" in variants[0].asm["ptx"] and variants[1].metadata.num_warps == 8
    assert variants[4].metadata.assembler == "nvjitlink"
    assert compile(kb, "sm_90", num_warps=4) is base  # the default, spelled out: a hit
    assert cache.stats().memory_hits == 1


def test_always_compile_reads_nothing_but_still_writes(_empty_cache: Path,
                                                       monkeypatch) -> None:
    first = compile(kernels.softmax(), "sm_90")
    ran = []
    make_cubin = nvidia.make_cubin
    monkeypatch.setattr(nvidia, "make_cubin", lambda *a: ran.append(1) or make_cubin(*a))
    monkeypatch.setenv("TILEOPT_ALWAYS_COMPILE", "1")
    again = compile(kernels.softmax(), "sm_90")
    assert ran == [1] and again is not first and again.asm["ptx"] == first.asm["ptx"]
    assert cache.stats() == cache.CacheStats(misses=2, stores=2)
    assert len(_entries(_empty_cache)) == 1
    monkeypatch.setenv("TILEOPT_ALWAYS_COMPILE", "sometimes")
    with pytest.raises(OptionError, match="TILEOPT_ALWAYS_COMPILE='sometimes'; set it to 1"):
        compile(kernels.softmax(), "sm_90")


def _garbage(data: bytes) -> bytes:
    return bytes(range(256)) * 4


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped(data: bytes) -> bytes:  # a payload byte changed: the checksum does not match
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def _empty(data: bytes) -> bytes:
    return b""


def _wrong_payload(data: bytes) -> bytes:  # a valid file whose JSON is not a kernel
    header = data.split(b"\n", 1)[0].split(b" ")
    return cache.encode_file("kernel", header[3].decode(), {"metadata": {"name": 3}})


@pytest.mark.parametrize("damage", [_garbage, _truncated, _flipped, _empty, _wrong_payload],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_entry_is_deleted_warned_about_and_compiled_again(_empty_cache: Path,
                                                                    damage: Any) -> None:
    first = compile(kernels.softmax(), "sm_90")
    (path,) = _entries(_empty_cache)
    path.write_bytes(damage(path.read_bytes()))
    cache.clear()
    with pytest.warns(CacheWarning, match=rf"entry {path} is unusable .*deleted it, compiling "
                                          rf"the kernel again"):
        again = compile(kernels.softmax(), "sm_90")
    assert again.asm["ptx"] == first.asm["ptx"] and "cache" not in again.times
    assert cache.stats() == cache.CacheStats(misses=2, stores=2, corrupt=1)
    # Compiled again, the entry was written again: whole and valid.
    cache.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile(kernels.softmax(), "sm_90").asm == first.asm
    assert cache.stats().disk_hits == 1
    _check_softmax(again)


def test_an_unreadable_entry_is_compiled_again(_empty_cache: Path) -> None:
    first = compile(kernels.softmax(), "sm_90")
    (path,) = _entries(_empty_cache)
    path.unlink()
    path.mkdir()  # open() fails on a directory, as on a file without read permission
    cache.clear()
    with pytest.warns(CacheWarning) as record:
        again = compile(kernels.softmax(), "sm_90")
    messages = [str(w.message) for w in record]
    assert any(f"entry {path} is unusable (unreadable" in m for m in messages), messages
    assert again.asm["ptx"] == first.asm["ptx"]


def test_a_directory_that_cannot_be_made_compiles_and_warns_once(tmp_path: Path,
                                                                 monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TILEOPT_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        a = compile(kernels.vector_add(), "sm_90")
        b = compile(kernels.vector_add("f16"), "sm_90")
    found = [str(w.message) for w in record if issubclass(w.category, CacheWarning)]
    assert len(found) == 1, found
    assert f"directory {blocker / 'cache'} cannot be written" in found[0]
    assert "set TILEOPT_CACHE_DIR to a writable directory" in found[0]
    assert a.asm["ptx"] != b.asm["ptx"] and cache.stats().stores == 0
    assert compile(kernels.vector_add(), "sm_90") is a  # still cached in memory


def test_a_read_only_directory_compiles_and_warns(_empty_cache: Path) -> None:
    _empty_cache.mkdir()
    _empty_cache.chmod(0o500)
    try:
        if os.access(_empty_cache, os.W_OK):
            pytest.skip("running as root: chmod 0o500 does not stop root from writing, so the "
                        "directory stays writable")
        with pytest.warns(CacheWarning, match=f"directory {_empty_cache} cannot be written"):
            k = compile(kernels.softmax(), "sm_90")
        _check_softmax(k)
        assert cache.stats().stores == 0
    finally:
        _empty_cache.chmod(0o700)


def test_default_directory_follows_xdg(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TILEOPT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "tileopt"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec says: ignore it
    assert cache.cache_dir() == Path.home() / ".cache" / "tileopt"
    monkeypatch.setenv("TILEOPT_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def _native_libraries() -> list[Path]:
    import tileopt._mlir_libs as libs

    return sorted(p for loc in libs.__path__ for p in Path(loc).iterdir() if ".so" in p.name)


def test_the_native_libraries_are_named_by_their_build_id(monkeypatch, tmp_path: Path) -> None:
    # Every native library carries a GNU build ID (the build asks the linker for one), the
    # one that binutils' readelf reads, where it is installed.
    libraries = _native_libraries()
    assert libraries
    readelf = shutil.which("readelf")
    for path in libraries:
        build_id = cache.elf_build_id(path)
        assert build_id is not None and len(build_id) >= 16, path
        if readelf:
            notes = subprocess.run([readelf, "-n", str(path)], capture_output=True, text=True,
                                   check=True).stdout
            assert f"Build ID: {build_id}" in notes, path
    # So a reinstall of the same build (a copy with a new time) keeps the toolchain's
    # fingerprint, and the cache with it; another library (or the same file changed) does not.
    # A file that is not ELF is named by its size and time.
    libs = tmp_path / "libs"
    libs.mkdir()
    shutil.copy(libraries[0], libs / libraries[0].name)
    (libs / "other.so").write_bytes(b"not an ELF file")
    monkeypatch.setattr(cache.importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(libs)]))
    before = cache._sources_fingerprint()
    for path in libs.iterdir():
        os.utime(path, ns=(1, 1))
    after = cache._sources_fingerprint()
    named = [line for line in after if line.startswith(libraries[0].name)]
    assert named == [f"{libraries[0].name} build-id {cache.elf_build_id(libraries[0])}"]
    assert before != after and [x for x in before if "other.so" not in x] == [
        x for x in after if "other.so" not in x]
    assert "other.so 15 1" in after
    shutil.copy(libraries[-1], libs / libraries[0].name)
    assert cache._sources_fingerprint() != after
    # Truncated or foreign files have no build ID; a directory cannot be read.
    (libs / "short.so").write_bytes(b"\x7fELF\x02\x01" + bytes(10))
    for name in ("short.so", "other.so"):
        assert cache.elf_build_id(libs / name) is None
    with pytest.raises(OSError):
        cache.elf_build_id(libs)


_COMPILE_WHEN_TOLD = """
    import hashlib, json, os, time
    from tileopt import kernels
    from tileopt.compiler import cache, compile
    kb = kernels.softmax()
    open(os.environ["READY"], "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["GO"]) and time.monotonic() < deadline:
        time.sleep(0.005)
    k = compile(kb, "sm_90")
    print(json.dumps({"ptx": hashlib.sha256(k.asm["ptx"].encode()).hexdigest(),
                      "stores": cache.stats().stores}))
"""


def test_two_processes_writing_one_entry_both_succeed(_empty_cache: Path,
                                                      tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs, ready = [], []
    for i in range(2):
        ready.append(tmp_path / f"ready{i}")
        # TILEOPT_ALWAYS_COMPILE: both compile and both write the entry, at the same time.
        procs.append(_subprocess(_COMPILE_WHEN_TOLD, _empty_cache, READY=str(ready[i]),
                                 GO=str(go), TILEOPT_ALWAYS_COMPILE="1"))
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.005)
    go.touch()
    results = [_finish(p) for p in procs]
    assert [r["stores"] for r in results] == [1, 1]
    assert results[0]["ptx"] == results[1]["ptx"]
    (entry,) = [p.name for p in (_empty_cache / "kernel").iterdir()]  # no temporary files left
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = compile(kernels.softmax(), "sm_90")
    assert k.cache_key == entry and set(k.times) == {"cache"}
    _check_softmax(k)


# ---------------------------------------------------------------------------------------------
# graphs


_COMPILE_RMS_NORM = """
    import json, os, time, torch, tileopt
    from tileopt.compiler import cache
    from tileopt.testing.models import RMSNorm

    torch.manual_seed(0)
    model = RMSNorm(37).eval()
    x = torch.randn(4, 37)
    if "GO" in os.environ:  # imported: wait for the other process, then compile at once
        open(os.environ["READY"], "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["GO"]) and time.monotonic() < deadline:
            time.sleep(0.005)
    g = tileopt.compile(model, (x,), device="emulator")
    error = (g(x) - model(x)).abs().max().item()
    print(json.dumps({"graph": vars(cache.stats("graph")), "kernel": vars(cache.stats()),
                      "error": error, "times": g.times}))
"""


def _start_together(script: str, directory: Path, tmp_path: Path,
                    n: int = 2) -> list[subprocess.Popen[str]]:
    """``n`` processes running ``script``, which waits (after its imports) until all of them
    are ready (the files ``$READY`` and ``$GO``)."""
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(n)]
    procs = [_subprocess(script, directory, READY=str(r), GO=str(go)) for r in ready]
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.005)
    go.touch()
    return procs


def test_processes_compiling_a_model_at_once_share_one_entry(_empty_cache: Path,
                                                             tmp_path: Path,
                                                             monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_mlir")
    import tileopt
    from tileopt.testing.models import RMSNorm

    # Two processes compile the same model at the same time: both succeed and leave one
    # graph entry (and whole kernel entries, no temporary files) ...
    procs = _start_together(_COMPILE_RMS_NORM, _empty_cache, tmp_path)
    results = [_finish(p) for p in procs]
    for result in results:
        assert result["graph"]["misses"] + result["graph"]["disk_hits"] == 1
        assert result["error"] < 1e-5
    assert sum(result["graph"]["stores"] for result in results) >= 1
    assert len(_entries(_empty_cache, "graph")) == 1
    assert not [p for kind in cache.KINDS for p in _entries(_empty_cache, kind)
                if p.name.startswith(".")]
    # ... which another process (this one) reads, without running the pipeline.
    _no_pipeline(monkeypatch)
    torch.manual_seed(0)
    model = RMSNorm(37).eval()
    x = torch.randn(4, 37)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = tileopt.compile(model, (x,), device="emulator")
    torch.testing.assert_close(g(x), model(x))
    assert cache.stats("graph").disk_hits == 1 and cache.stats("graph").misses == 0
    assert cache.stats().misses == 0 and cache.stats().disk_hits >= 1
    assert g.times["formation"] == 0 and "cache" in g.times


def test_graph_hits_misses_and_damaged_entries(_empty_cache: Path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_mlir")
    import tileopt
    from tileopt.testing.models import RMSNorm

    torch.manual_seed(0)
    model = RMSNorm(37).eval()
    x = torch.randn(4, 37)
    want = model(x)
    first = tileopt.compile(model, (x,), device="emulator")
    torch.testing.assert_close(first(x), want)
    assert (cache.stats("graph").misses, cache.stats("graph").stores) == (1, 1)
    (entry,) = _entries(_empty_cache, "graph")

    # In memory, then from disk: no formation, no kernel compilation, the same results.
    with monkeypatch.context() as m:
        _no_pipeline(m)
        again = tileopt.compile(model, (x,), device="emulator")
        cache.clear()
        from_disk = tileopt.compile(model, (x,), device="emulator")
    for g in (again, from_disk):
        torch.testing.assert_close(g(x), want)
        assert g.host_code == first.host_code and g.stages["tile"] == first.stages["tile"]
        assert [k.asm for k in g.kernels] == [k.asm for k in first.kernels]
    assert (cache.stats("graph").memory_hits, cache.stats("graph").disk_hits) == (1, 1)

    # Another target or option: another entry.
    tileopt.compile(model, (x,), device="emulator", target="sm_80")
    assert len(_entries(_empty_cache, "graph")) == 2

    # A damaged graph entry: deleted, warned about, compiled again.
    entry.write_bytes(entry.read_bytes()[:-10])
    cache.clear()
    with pytest.warns(CacheWarning, match=f"entry {entry} is unusable .*compiling the graph"):
        damaged = tileopt.compile(model, (x,), device="emulator")
    torch.testing.assert_close(damaged(x), want)
    assert entry.is_file() and cache.stats("graph").corrupt == 1

    # A kernel entry gone: the graph is compiled again (formation too), without a warning.
    for path in _entries(_empty_cache):
        path.unlink()
    cache.clear()
    cache.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        missing = tileopt.compile(model, (x,), device="emulator")
    torch.testing.assert_close(missing(x), want)
    assert cache.stats("graph").disk_hits == 1 and cache.stats("graph").stores == 1
    assert cache.stats().stores >= 1 and missing.times["formation"] > 0


# ---------------------------------------------------------------------------------------------
# the directory's size, temporary files


def _store(name: str, size: int = 2000, kind: str = "kernel") -> Path:
    """Stores an entry of about ``size`` bytes (random payload) in the cache directory."""
    digest = cache.key(kind, name)
    cache.store(kind, digest, {"data": os.urandom(size // 2).hex()})
    return cache.cache_dir() / kind / digest


def _lookup(path: Path) -> Any:
    return cache.lookup(path.parent.name, path.name, lambda payload: payload)


_KILLED_WRITER = """
    import os, sys, time
    from tileopt.compiler import cache

    def stuck(*args):  # the entry is written, not yet renamed: then the process is killed
        print("written", flush=True)
        time.sleep(600)

    os.replace = stuck
    cache.store("kernel", cache.key("kernel", "killed"), {"data": "x"})
"""


def test_a_killed_writers_temporary_file_is_deleted_when_stale(_empty_cache: Path) -> None:
    proc = _subprocess(_KILLED_WRITER, _empty_cache)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    (left,) = (_empty_cache / "kernel").iterdir()
    assert left.name.startswith(".") and left.name.endswith(".tmp")
    live = left.with_name(".0123456789abcdef.live.tmp")  # a writer at work: kept
    live.write_bytes(b"partial")
    # Not stale yet: kept by this process's first store (which scans the directory).
    first = _store("first")
    assert left.exists() and live.exists() and first.exists()
    old = time.time() - cache.STALE_SECONDS - 1
    os.utime(left, (old, old))
    cache.clear()  # forgets this process's scans: as for a new process
    second = _store("second")
    assert not left.exists() and live.exists()
    assert {p.name for p in _entries(_empty_cache)} == {first.name, second.name, live.name}
    assert _lookup(first) is not None and _lookup(second) is not None


def test_the_size_cap_evicts_the_least_recently_used_entries(_empty_cache: Path,
                                                             monkeypatch) -> None:
    paths = [_store(f"entry {i}") for i in range(4)]
    sizes = [p.stat().st_size for p in paths]
    base = time.time() - 1000
    for i, path in enumerate(paths):  # entry 0 used longest ago
        os.utime(path, (base + i, base + i))
    cache.clear()  # memory: the next lookup reads the disk
    assert _lookup(paths[0]) is not None  # a hit from disk: now the most recently used
    assert paths[0].stat().st_mtime > base + 3

    # A cap the four entries exceed, whose low-water mark holds three.
    cap = sum(sizes) - 1
    assert sum(sizes) - sizes[1] <= int(cap * cache.LOW_WATER)  # sizes alike: one goes
    monkeypatch.setenv("TILEOPT_CACHE_MAX_BYTES", str(cap))
    assert cache.prune() == sum(sizes) - sizes[1]
    assert [p.exists() for p in paths] == [True, False, True, True]
    assert cache.stats().evicted == 1

    # A store after clear() (as at a process's first store) scans: entry 2 goes next.
    cache.clear()
    new = _store("entry 4", 2200)  # a little larger than the others: the cap is exceeded
    assert sum(sizes) - sizes[1] + new.stat().st_size > cap
    assert sum(sizes) - sizes[1] - sizes[2] + new.stat().st_size <= int(cap * cache.LOW_WATER)
    assert [p.exists() for p in [*paths, new]] == [True, False, False, True, True]
    assert cache.stats().evicted == 2
    # An evicted entry is a miss (compiled again), not an error.
    assert _lookup(paths[1]) is None and cache.stats().corrupt == 0


def test_the_directory_is_scanned_now_and_then(_empty_cache: Path, monkeypatch) -> None:
    scans: list[str] = []
    prune = cache._prune
    monkeypatch.setattr(cache, "_prune", lambda d, cap: scans.append(d) or prune(d, cap))
    monkeypatch.setattr(cache, "SCAN_EVERY", 4)
    for i in range(9):
        _store(f"small {i}", 100)
    assert len(scans) == 3  # the process's first store, then every 4th: stores 1, 5 and 9
    monkeypatch.setenv("TILEOPT_CACHE_MAX_BYTES", "32K")
    _store("big", 4096)  # 1/16 of the cap written: scanned too
    assert len(scans) == 4 and scans[-1] == str(_empty_cache)
    assert len(_entries(_empty_cache)) == 10 and cache.stats().evicted == 0


@pytest.mark.parametrize("value, expected", [
    ("", 1 << 30), ("123456", 123456), ("64k", 64 << 10), ("512M", 512 << 20),
    ("2GiB", 2 << 30), ("1000B", 1000), ("0", None),
])
def test_max_bytes(monkeypatch, value: str, expected: int | None) -> None:
    monkeypatch.setenv("TILEOPT_CACHE_MAX_BYTES", value)
    assert cache.max_bytes() == expected


@pytest.mark.parametrize("value", ["lots", "-1", "1.5G", "G"])
def test_a_wrong_max_bytes_is_reported_before_compiling(monkeypatch, value: str) -> None:
    monkeypatch.setenv("TILEOPT_CACHE_MAX_BYTES", value)
    with pytest.raises(OptionError, match=rf"TILEOPT_CACHE_MAX_BYTES={value!r}; set it to a "
                                          rf"size in bytes"):
        compile(kernels.softmax(), "sm_90")
