"""The compile cache: compiled kernels and graphs, in memory and on disk.

``tileopt.compile`` looks a kernel up here before it runs the pipeline, and a
:class:`~tileopt.compiler.graph.CompiledGraph` looks up each of its specialisations after
``torch.export`` and torch-mlir's import, so a second compilation of the same kernel (in this
process or in another) skips MLIR and ptxas, and a second compilation of the same model skips
kernel formation and code generation.

Where and when:

- ``$TILEOPT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tileopt``, else ``~/.cache/tileopt``; entries
  live in ``<dir>/kernel/<key>`` and ``<dir>/graph/<key>``.
- ``TILEOPT_ALWAYS_COMPILE=1`` reads nothing (every compilation runs); results are still
  written.
- In memory, the last :data:`MEMORY_ENTRIES` entries of each directory (a hit returns the very
  object compiled before: a ``Kernel`` is shared).
- ``TILEOPT_CACHE_MAX_BYTES`` (default 1 GiB, :data:`DEFAULT_MAX_BYTES`; ``0`` for no limit)
  caps the entries' total size: when it is exceeded, the least recently used entries (by
  modification time, which a hit from disk renews) are deleted until :data:`LOW_WATER` of the
  cap is left. The directory is not scanned on every store: a process scans it at its first
  store and then after every :data:`SCAN_EVERY` stores or 1/16 of the cap written
  (:func:`prune` scans it now). A scan also deletes the temporary files of writers that died
  (older than :data:`STALE_SECONDS`).

Keys are sha256 digests of everything that decides the output (:func:`key`): the input's text,
the options, and :func:`toolchain` (the versions of tileopt, its sources and native build,
LLVM/MLIR, torch-mlir, the ptxas found and its ``--version``, nvJitLink, libdevice). The caller
composes them: ``kernel.py`` for kernels, ``graph.py`` for graphs.

An entry is one file: a header line ``tileopt-cache <FORMAT> <kind> <key> <sha256> <size>``,
then ``size`` bytes of zlib-compressed JSON (never pickle: reading an entry runs no code),
whose sha256 the header holds. A write goes to a temporary file in the same directory, is
fsynced and renamed over the entry (``os.replace``): readers see a whole entry or none, and
processes that write one entry at once all succeed and leave one entry. An entry that is
truncated, corrupt, fails its checksum, cannot be read or does not decode is deleted with a
:class:`CacheWarning` naming the file, and compiled again; a directory that cannot be written
is warned about once, and compilation goes on without storing.

:func:`stats`, :func:`reset_stats`, :func:`recording` and :func:`clear` are for tests,
benchmarks and reports.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from tileopt.errors import OptionError

#: The version of the entry format and of the key composition; part of every key and header.
FORMAT = 1

#: Entries kept in memory per process (least recently used dropped first).
MEMORY_ENTRIES = 256

#: The kinds of entries (each a subdirectory of the cache directory).
KINDS: tuple[str, ...] = ("kernel", "graph")

#: The packages whose versions are part of every key (absent ones count as "none").
PACKAGES: tuple[str, ...] = (
    "tileopt", "xtc-llvm-dev", "xtc-mlir-dev", "torch-mlir", "nvidia-cuda-nvcc",
    "nvidia-nvjitlink", "nvidia-nvvm", "cuda-core",
)

#: The cap on the entries' total size without ``$TILEOPT_CACHE_MAX_BYTES``: 1 GiB.
DEFAULT_MAX_BYTES = 1 << 30

#: Eviction deletes entries until they take at most this fraction of the cap (so that the
#: next stores do not evict again at once).
LOW_WATER = 0.8

#: A process scans the cache directory at its first store and then after this many stores
#: (or 1/16 of the cap written), whichever comes first.
SCAN_EVERY = 256

#: Temporary files older than this (seconds) were left by a writer that died; a scan deletes
#: them. A live writer holds one for as long as writing an entry takes.
STALE_SECONDS = 600

_MAGIC = b"tileopt-cache"
_HEADER_LIMIT = 512  # bytes: the header line is about 170

T = TypeVar("T")


class CacheWarning(UserWarning):
    """The compile cache found an unusable entry (deleted and compiled again) or cannot write
    its directory (compiling without storing); the message names the file or directory."""


# ---------------------------------------------------------------------------------------------
# settings


def cache_dir() -> Path:
    """The cache directory: ``$TILEOPT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tileopt`` (an
    absolute ``XDG_CACHE_HOME`` only, as the XDG spec says), else ``~/.cache/tileopt``."""
    return Path(_dir_name())


def _dir_name() -> str:
    env = os.environ.get("TILEOPT_CACHE_DIR")
    if env:
        return os.path.expanduser(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tileopt")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def always_compile() -> bool:
    """Whether ``$TILEOPT_ALWAYS_COMPILE`` is on (``1``/``true``/``yes``/``on``): nothing is
    read from the cache; OptionError for a value that is neither on nor off."""
    value = os.environ.get("TILEOPT_ALWAYS_COMPILE", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionError(
        f"TILEOPT_ALWAYS_COMPILE={os.environ['TILEOPT_ALWAYS_COMPILE']!r}; set it to 1 to "
        f"compile every time (the cache is not read), or 0 / unset it to use the cache"
    )


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_bytes() -> int | None:
    """The cap on the entries' total size, from ``$TILEOPT_CACHE_MAX_BYTES``: bytes, or with a
    suffix K, M, G or T (powers of 1024: ``512M``); :data:`DEFAULT_MAX_BYTES` when unset;
    None (no limit) for ``0``. OptionError for anything else."""
    text = os.environ.get("TILEOPT_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    number, unit = text.upper().removesuffix("IB").removesuffix("B"), ""
    if number[-1:] in _UNITS:
        number, unit = number[:-1], number[-1]
    try:
        value = int(number.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OptionError(
            f"TILEOPT_CACHE_MAX_BYTES={os.environ['TILEOPT_CACHE_MAX_BYTES']!r}; set it to a "
            f"size in bytes such as 1073741824 or 1G (K, M, G, T: powers of 1024), 0 for no "
            f"limit, or unset it for {DEFAULT_MAX_BYTES >> 30} GiB"
        )
    return value * _UNITS[unit] or None


# ---------------------------------------------------------------------------------------------
# keys


def key(kind: str, *parts: str) -> str:
    """The sha256 (hex) of ``kind``, :data:`FORMAT` and ``parts``, each length-prefixed so
    that no two different part lists hash alike."""
    h = hashlib.sha256(f"tileopt-cache {FORMAT} {kind}\n".encode())
    for part in parts:
        data = part.encode()
        h.update(b"%d:" % len(data))
        h.update(data)
    return h.hexdigest()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _sources_fingerprint() -> list[str]:
    """Hashes of the Python sources that turn IR into a Kernel (this package's compiler and
    the ABI) and the native libraries' build IDs: a development build changes them without
    changing tileopt's version."""
    lines = []
    here = Path(__file__).resolve().parent
    for path in sorted([*here.glob("*.py"), here.parent / "runtime" / "abi.py"]):
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = "unreadable"
        lines.append(f"{path.parent.name}/{path.name} {digest}")
    spec = importlib.util.find_spec("tileopt._mlir_libs")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(loc).iterdir()):
            if ".so" in path.name:
                try:
                    build_id = elf_build_id(path)
                    st = path.stat()
                except OSError:
                    continue
                # The build ID hashes the linked contents (CMakeLists.txt asks the linker for
                # one): reinstalling the same build keeps the cache. Without one, the size
                # and time tell a rebuild.
                lines.append(f"{path.name} " + (f"build-id {build_id}" if build_id else
                                                f"{st.st_size} {st.st_mtime_ns}"))
    return lines


def elf_build_id(path: Path) -> str | None:
    """The GNU build ID (hex) of the ELF file ``path``, None if it is not a 64-bit
    little-endian ELF file or has no ``NT_GNU_BUILD_ID`` note. Reads only the program headers
    and note segments; OSError if the file cannot be read."""
    with open(path, "rb") as f:
        header = f.read(64)
        if len(header) < 64 or header[:6] != b"\x7fELF\x02\x01":
            return None
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        if phentsize < 56 or phnum > 1024:
            return None
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        for i in range(len(table) // phentsize):
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table,
                                                                     i * phentsize)
            if p_type != 4 or p_filesz > 1 << 16:  # PT_NOTE, of a sane size
                continue
            f.seek(p_offset)
            notes = f.read(p_filesz)
            at = 0
            while at + 12 <= len(notes):
                namesz, descsz, n_type = struct.unpack_from("<III", notes, at)
                name_at = at + 12
                desc_at = name_at + (namesz + 3) // 4 * 4
                at = desc_at + (descsz + 3) // 4 * 4
                if n_type == 3 and notes[name_at:name_at + namesz] == b"GNU\x00":
                    desc = notes[desc_at:desc_at + descsz]
                    return desc.hex() if len(desc) == descsz and desc else None
    return None


@functools.cache
def _fingerprint() -> str:
    from tileopt import __version__

    lines = [f"tileopt {__version__}", f"python {sys.version_info[0]}.{sys.version_info[1]}"]
    lines += [f"{p} {_version(p)}" for p in PACKAGES]
    lines += _sources_fingerprint()
    return "\n".join(lines)


@functools.cache
def _ptxas_version(path: str) -> str:
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({type(e).__name__})"
    return " ".join((proc.stdout + proc.stderr).split())


def toolchain() -> str:
    """What besides the input and the options decides a compilation's output: the versions
    of :data:`PACKAGES`, hashes of tileopt's compiler sources and native libraries (computed
    once per process), the ptxas that would run and its ``--version`` (once per ptxas), and
    ``$TILEOPT_LIBDEVICE``."""
    from tileopt.compiler import tools

    try:
        ptxas = tools.find_ptxas()
    except OptionError as e:  # the compilation itself reports it, if it runs ptxas
        found = f"invalid: {e}"
    else:
        found = "none" if ptxas is None else f"{ptxas} {_ptxas_version(str(ptxas))}"
    libdevice = os.environ.get("TILEOPT_LIBDEVICE", "")
    return f"{_fingerprint()}\nptxas {found}\nlibdevice {libdevice}"


# ---------------------------------------------------------------------------------------------
# statistics


@dataclass(frozen=True)
class CacheStats:
    """Counts of cache events for one kind of entry since the last :func:`reset_stats`.

    Attributes:
        memory_hits: found in this process's memory.
        disk_hits: read from the cache directory.
        misses: not found (or not read: ``TILEOPT_ALWAYS_COMPILE``).
        stores: entries written to the cache directory.
        corrupt: unusable entries deleted.
        evicted: entries deleted to keep the directory under its cap (``kernel`` or
            ``graph`` as the entry's kind, whichever process stored it).
    """

    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    stores: int = 0
    corrupt: int = 0
    evicted: int = 0

    @property
    def hits(self) -> int:
        """Memory and disk hits."""
        return self.memory_hits + self.disk_hits


_lock = threading.RLock()
_counts: dict[str, dict[str, int]] = {}
_memory: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
_unwritable: set[str] = set()
_since_scan: dict[str, tuple[int, int]] = {}  # directory -> (stores, bytes) since its scan
_recorders = threading.local()


def _count(kind: str, event: str, digest: str = "") -> None:
    with _lock:
        per_kind = _counts.setdefault(kind, {})
        per_kind[event] = per_kind.get(event, 0) + 1
    for events in getattr(_recorders, "stack", ()):
        events.append((kind, event, digest))


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, str, str]]]:
    """Collects this thread's cache events while the block runs, as ``(kind, event, key)``
    tuples (``event`` is a field name of :class:`CacheStats`: ``"misses"``, ``"disk_hits"``,
    ...): what one compilation compiled and what it took from the cache, apart from what
    other threads do meanwhile. Blocks may nest; each sees every event of its span."""
    events: list[tuple[str, str, str]] = []
    stack = getattr(_recorders, "stack", None)
    if stack is None:
        stack = _recorders.stack = []
    stack.append(events)
    try:
        yield events
    finally:
        stack.remove(events)


def stats(kind: str = "kernel") -> CacheStats:
    """The counts for ``kind`` (``"kernel"`` or ``"graph"``)."""
    with _lock:
        counts = dict(_counts.get(kind, {}))
    return CacheStats(**{f.name: counts.get(f.name, 0) for f in fields(CacheStats)})


def reset_stats() -> None:
    """Sets every count to zero."""
    with _lock:
        _counts.clear()


def clear(*, memory: bool = True, disk: bool = False) -> None:
    """Forgets the entries held in memory (``memory``) and deletes the entries of the current
    cache directory (``disk``; only its ``kernel/`` and ``graph/`` subdirectories). Unwritable
    directories are warned about again."""
    with _lock:
        if memory:
            _memory.clear()
        _unwritable.clear()
        _since_scan.clear()
    if disk:
        for kind in KINDS:
            shutil.rmtree(cache_dir() / kind, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# reading


class _Unusable(Exception):
    """An entry that must not be trusted; the message says why."""


def _entry_path(directory: str, kind: str, digest: str) -> Path:
    return Path(directory) / kind / digest


def _decode_file(data: bytes, kind: str, digest: str) -> Any:
    """The JSON payload of an entry file; _Unusable unless the header and checksum match."""
    end = data.find(b"\n", 0, _HEADER_LIMIT)
    if end < 0:
        raise _Unusable("no header line" if data else "empty file")
    fields_ = data[:end].split(b" ")
    if len(fields_) != 6 or fields_[0] != _MAGIC:
        raise _Unusable("not a tileopt cache entry")
    if fields_[1] != b"%d" % FORMAT or fields_[2] != kind.encode() or (
            fields_[3] != digest.encode()):
        raise _Unusable("its header names another format, kind or key")
    body = data[end + 1:]
    try:
        size = int(fields_[5])
    except ValueError:
        raise _Unusable("bad header") from None
    if len(body) != size:
        what = "truncated" if len(body) < size else "too long"
        raise _Unusable(f"{what}: {len(body)} bytes of payload, the header says {size}")
    if hashlib.sha256(body).hexdigest().encode() != fields_[4]:
        raise _Unusable("checksum mismatch")
    try:
        return json.loads(zlib.decompress(body))
    except (zlib.error, ValueError) as e:
        raise _Unusable(f"undecodable payload ({e})") from e


def _discard(path: Path, inode: int | None, kind: str, reason: str) -> None:
    """Deletes an unusable entry (unless another process replaced it meanwhile) and warns."""
    _count(kind, "corrupt")
    try:
        if inode is None or os.stat(path).st_ino == inode:
            if path.is_dir():
                path.rmdir()  # a directory where the entry should be (empty: ours)
            else:
                path.unlink()
    except OSError:
        pass
    warnings.warn(
        f"tileopt's compile cache entry {path} is unusable ({reason}): deleted it, compiling "
        f"the {kind} again",
        CacheWarning,
        stacklevel=4,
    )


def _remember(slot: tuple[str, str, str], value: Any) -> None:
    with _lock:
        _memory[slot] = value
        _memory.move_to_end(slot)
        while len(_memory) > MEMORY_ENTRIES:
            _memory.popitem(last=False)


def lookup(kind: str, digest: str, decode: Callable[[Any], T]) -> T | None:
    """The cached value of entry ``digest``: from memory, else read from the cache directory
    and made by ``decode`` (JSON payload -> value; any exception it raises marks the entry
    unusable). None on a miss, an unusable entry (deleted, warned about) or with
    ``TILEOPT_ALWAYS_COMPILE``."""
    max_bytes()  # a wrong value is reported before compiling, not after
    if always_compile():
        _count(kind, "misses", digest)
        return None
    directory = _dir_name()
    slot = (directory, kind, digest)
    with _lock:
        if slot in _memory:
            _memory.move_to_end(slot)
            _count(kind, "memory_hits", digest)
            return _memory[slot]  # type: ignore[no-any-return]
    path = _entry_path(directory, kind, digest)
    inode: int | None = None
    try:
        with open(path, "rb") as f:
            inode = os.fstat(f.fileno()).st_ino
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):  # no entry (or no directory)
        _count(kind, "misses", digest)
        return None
    except OSError as e:
        _discard(path, inode, kind, f"unreadable: {e.strerror or e}")
        _count(kind, "misses", digest)
        return None
    try:
        value = decode(_decode_file(data, kind, digest))
    except Exception as e:  # never trust, never crash: compile again
        reason = str(e) if isinstance(e, _Unusable) else f"does not decode: {e!r}"
        _discard(path, inode, kind, reason)
        _count(kind, "misses", digest)
        return None
    _remember(slot, value)
    _count(kind, "disk_hits", digest)
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    return value


# ---------------------------------------------------------------------------------------------
# writing


def _warn_unwritable(directory: str, error: OSError | str) -> None:
    with _lock:
        if directory in _unwritable:
            return
        _unwritable.add(directory)
    reason = error if isinstance(error, str) else (error.strerror or str(error))
    warnings.warn(
        f"tileopt's compile cache directory {directory} cannot be written ({reason}): "
        f"compiling without storing results; set TILEOPT_CACHE_DIR to a writable directory",
        CacheWarning,
        stacklevel=4,
    )


def encode_file(kind: str, digest: str, payload: Any) -> bytes:
    """The bytes of an entry file holding ``payload`` (JSON-serializable)."""
    body = zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 1)
    header = b"%s %d %s %s %s %d\n" % (
        _MAGIC, FORMAT, kind.encode(), digest.encode(), hashlib.sha256(body).hexdigest().encode(),
        len(body),
    )
    return header + body


def store(kind: str, digest: str, value: T, encode: Callable[[T], Any] | None = None) -> None:
    """Keeps ``value`` in memory (what :func:`lookup` returns for ``digest``) and writes
    ``encode(value)`` (a JSON-serializable payload; ``value`` itself when ``encode`` is None)
    as entry ``digest`` of the cache directory, atomically. A directory that cannot be written
    is warned about once per process; nothing is raised."""
    directory = _dir_name()
    _remember((directory, kind, digest), value)
    with _lock:
        if directory in _unwritable:
            return
    try:
        data = encode_file(kind, digest, value if encode is None else encode(value))
    except (TypeError, ValueError) as e:  # a value the payload cannot hold: keep it in memory
        warnings.warn(f"tileopt's compile cache cannot store a {kind} ({e})", CacheWarning,
                      stacklevel=3)
        return
    path = _entry_path(directory, kind, digest)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{digest[:16]}.", suffix=".tmp")
    except OSError as e:
        _warn_unwritable(directory, e)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _warn_unwritable(directory, e)
        return
    _count(kind, "stores", digest)
    _after_store(directory, len(data))


def _after_store(directory: str, size: int) -> None:
    """Scans ``directory`` (:func:`prune`) at this process's first store into it, then after
    every :data:`SCAN_EVERY` stores or 1/16 of the cap written."""
    try:
        cap = max_bytes()
    except OptionError:  # reported by lookup
        return
    with _lock:
        stores, written = _since_scan.get(directory, (SCAN_EVERY, 0))
        stores, written = stores + 1, written + size
        due = stores >= SCAN_EVERY or (cap is not None and written >= cap // 16)
        _since_scan[directory] = (0, 0) if due else (stores, written)
    if due:
        _prune(directory, cap)


# ---------------------------------------------------------------------------------------------
# the directory's size


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def prune() -> int:
    """Scans the cache directory now: deletes the temporary files of writers that died
    (older than :data:`STALE_SECONDS`) and, when the entries take more than
    ``$TILEOPT_CACHE_MAX_BYTES``, the least recently used ones (oldest modification time
    first) until they take at most :data:`LOW_WATER` of it. Returns the bytes the entries
    take afterwards. Stores call it now and then (see the module's docstring)."""
    return _prune(_dir_name(), max_bytes())


def _prune(directory: str, cap: int | None) -> int:
    now = time.time()
    entries: list[tuple[float, int, str, str]] = []  # mtime, size, path, kind
    total = 0
    for kind in KINDS:
        try:
            scan = os.scandir(os.path.join(directory, kind))
        except OSError:  # no such directory yet, or unreadable
            continue
        with scan:
            for item in scan:
                try:
                    if not item.is_file(follow_symlinks=False):
                        continue
                    st = item.stat(follow_symlinks=False)
                except OSError:  # deleted meanwhile
                    continue
                if _is_temporary(item.name):
                    if now - st.st_mtime > STALE_SECONDS:
                        with contextlib.suppress(OSError):
                            os.unlink(item.path)
                    continue
                entries.append((st.st_mtime, st.st_size, item.path, kind))
                total += st.st_size
    if cap is None or total <= cap:
        return total
    entries.sort()
    goal = int(cap * LOW_WATER)
    for _, size, path, kind in entries:
        if total <= goal:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:  # another process evicted it
            total -= size
            continue
        except OSError:
            continue
        total -= size
        _count(kind, "evicted", os.path.basename(path))
    return total
