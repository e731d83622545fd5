"""Loaded PTX modules and kernel launches."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np

from tileopt.emulator import numeric as nm
from tileopt.emulator import tma
from tileopt.emulator.errors import LaunchError, MemoryAccessError
from tileopt.emulator.machine import State, run_chunk
from tileopt.emulator.memory import (
    BUFFER_ALIGN,
    BUFFER_GAP,
    GLOBAL_BASE,
    Buffer,
    GlobalMemory,
    GlobalShadow,
)
from tileopt.emulator.parser import Function, Param, parse_ptx
from tileopt.emulator.program import Compiler, Layout, Op, global_symbols
from tileopt.emulator.stats import LaunchStats

MAX_SHARED_PER_BLOCK = 232448  # 227 KiB (sm_90); sm_80 allows 163 KiB
_MALLOC_WARMED = False


def _warm_malloc() -> None:
    """Free one large (mmapped) block once per process.

    glibc then raises its mmap threshold to that size, so the emulator's many temporary
    arrays of a few hundred KB come from the heap instead of fresh zeroed pages (page faults
    on every numpy operation). Measured here: launches become 2-3x faster. Harmless elsewhere.
    """
    global _MALLOC_WARMED
    if not _MALLOC_WARMED:
        _MALLOC_WARMED = True
        block = np.ones(16 << 20, np.uint8)
        del block


DEFAULT_CHUNK_THREADS = 1 << 16


@dataclass
class CompiledKernel:
    """A kernel compiled to emulator ops."""

    function: Function
    ops: list[Op]
    reg_dtypes: list[np.dtype]
    layout: Layout
    nfuncs: int

    @property
    def params(self) -> list[Param]:
        return self.function.params


@dataclass(frozen=True)
class Pointer:
    """A pointer argument ``byte_offset`` bytes past the start of ``buffer`` (a numpy array or
    CPU tensor, copied in and written back like a plain buffer argument). The offset may be
    negative or past the end: only the kernel's accesses are bounds-checked."""

    buffer: object
    byte_offset: int


def _is_torch(a) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")


def _is_buffer(a) -> bool:
    return isinstance(a, np.ndarray) or _is_torch(a)


def _describe_buffer(i: int, p: Param, a) -> str:
    return f"argument {i} ({p.name}, {type(a).__name__} {tuple(a.shape)} {a.dtype})"


def _check_buffer(i: int, p: Param, a) -> None:
    """Raises LaunchError for buffers whose bytes the kernel cannot read as they are meant."""
    what = _describe_buffer(i, p, a)
    if isinstance(a, np.ndarray):
        if not a.dtype.isnative:
            raise LaunchError(
                f"{what} is in non-native (big-endian) byte order; the GPU reads little-endian "
                f"values: pass a.astype(a.dtype.newbyteorder('='))"
            )
        return
    if a.device.type != "cpu":
        raise LaunchError(f"{what} is on device {a.device}; the emulator takes CPU tensors "
                          f"(pass tensor.cpu())")
    if a.layout != _torch().strided:
        raise LaunchError(f"{what} has layout {a.layout}; pass a dense tensor (tensor.to_dense())")


def _torch():
    import torch

    return torch


def _host_span(a) -> tuple[int, int]:
    """[lo, hi): the host bytes an array or tensor reaches (any strides)."""
    if isinstance(a, np.ndarray):
        ptr, item, strides = a.__array_interface__["data"][0], a.itemsize, a.strides
    else:
        ptr, item = a.data_ptr(), a.element_size()
        strides = tuple(s * item for s in a.stride())
    if any(n == 0 for n in a.shape):
        return ptr, ptr
    lo = ptr + sum((n - 1) * s for n, s in zip(a.shape, strides, strict=True) if s < 0)
    hi = ptr + sum((n - 1) * s for n, s in zip(a.shape, strides, strict=True) if s > 0) + item
    return lo, hi


def _allocation_start(a) -> int:
    """Host address where the allocation holding ``a`` starts: the torch storage, or the numpy
    array that owns the memory (through views, ``as_strided`` and ``Tensor.numpy()``)."""
    b = a
    while not _is_torch(b):
        nxt = getattr(b, "base", None)
        if nxt is not None and not _is_buffer(nxt):
            nxt = getattr(nxt, "base", None)  # numpy's as_strided wraps its array in a DummyArray
        if not _is_buffer(nxt):
            return b.__array_interface__["data"][0]
        b = nxt
    return b.untyped_storage().data_ptr()


def _is_dense(a) -> bool:
    """True when the elements fill the host span in order (C-contiguous)."""
    return bool(a.flags.c_contiguous) if isinstance(a, np.ndarray) else bool(a.is_contiguous())


def _buffer_bytes(a) -> np.ndarray:
    """A contiguous uint8 copy of a dense buffer's bytes."""
    if isinstance(a, np.ndarray):
        return np.ascontiguousarray(a).reshape(-1).view(np.uint8).copy()
    t = a.detach().reshape(-1).contiguous()
    return t.view(_torch().uint8).numpy().copy() if t.numel() else np.zeros(0, np.uint8)


def _dense_span(a) -> tuple[object, int]:
    """For a non-contiguous array: a dense 1-D array over the host memory it reaches (its
    lowest to its highest element's bytes, in the same storage) and the byte offset of its
    first element in it."""
    lo, hi = _host_span(a)
    if isinstance(a, np.ndarray):
        # A 1-element view of the element at the lowest address, widened over the span.
        corner = a[tuple(slice(n - 1, n) if st < 0 else slice(0, 1)
                         for n, st in zip(a.shape, a.strides, strict=True))]
        span = np.lib.stride_tricks.as_strided(
            corner.reshape(-1).view(np.uint8), shape=(hi - lo,), strides=(1,),
            writeable=a.flags.writeable)
        return span, a.__array_interface__["data"][0] - lo
    # torch strides are never negative: the first element is the lowest
    return a.detach().as_strided(((hi - lo) // a.element_size(),), (1,)), 0


def _writable(a) -> bool:
    return bool(a.flags.writeable) if isinstance(a, np.ndarray) else True


def _write_back(a, data: np.ndarray) -> None:
    if isinstance(a, np.ndarray):
        try:
            a[...] = data.view(a.dtype).reshape(a.shape)
        except ValueError as e:
            raise LaunchError(f"cannot write a kernel's result back into a numpy array: {e}") from e
        return
    torch = _torch()
    src = torch.from_numpy(data.copy()).view(a.dtype).reshape(a.shape)
    try:
        with torch.no_grad():
            a.copy_(src)
    except RuntimeError as e:
        raise LaunchError(f"cannot write a kernel's result back into a torch tensor: {e}") from e


@dataclass
class _Member:
    """A buffer argument inside a :class:`_Region`: ``size`` bytes at ``rel`` bytes into it."""

    index: int
    param: Param
    array: object
    rel: int
    size: int


@dataclass
class _Region:
    """Emulated global memory shared by the buffer arguments whose host bytes overlap.

    Arguments that are views of one storage (slices of one array, torch views of one tensor)
    share one region laid out as on the host, so a write through one is seen through the
    others and nothing stale is written back. ``phase`` is the offset of the region's first
    byte from the start of its host allocation modulo :data:`BUFFER_ALIGN`.
    """

    phase: int
    data: np.ndarray
    members: list[_Member]
    buffer: Buffer | None = None

    def label(self) -> str:
        names = [_describe_buffer(m.index, m.param, m.array) for m in self.members]
        unique = list(dict.fromkeys(names))
        if len(unique) == 1:
            return unique[0]
        return "one memory shared by " + ", ".join(unique)


def _tensor_map_class():
    """:class:`tileopt.runtime.tma.TensorMap` (imported when a launch first needs it)."""
    from tileopt.runtime.tma import TensorMap

    return TensorMap


def _is_tensor_map(a) -> bool:
    return type(a).__name__ == "TensorMap" and isinstance(a, _tensor_map_class())


def _regions(fn: Function, args: list) -> tuple[list[_Region], dict[int, tuple[_Region, int]]]:
    """The regions of a launch's buffer arguments and, per argument index, (region, byte
    offset of the argument's first byte in it). The tensor of a TensorMap argument is a
    buffer like the others."""
    spans: list[tuple[int, int, int, Param, object]] = []  # (lo, hi, index, param, dense array)
    firsts: dict[int, int] = {}  # a non-contiguous array's first element, into its span
    for i, (p, a) in enumerate(zip(fn.params, args, strict=True)):
        if isinstance(a, Pointer):
            a = a.buffer
        elif _is_tensor_map(a):
            if not _is_buffer(a.base):
                raise LaunchError(
                    f"argument {i} ({p.name}) is a TensorMap over {type(a.base).__name__}; the "
                    f"emulator needs its base as a numpy array or a CPU torch tensor"
                )
            if not _is_dense(a.base):  # its strides must stay those of the host memory
                raise LaunchError(
                    f"argument {i} ({p.name}) is a TensorMap over a non-contiguous view; make "
                    f"the map over the contiguous tensor that holds it (TensorMap(base=tensor, "
                    f"global_dims=..., global_strides=...) can describe any part of it)"
                )
            a = a.base
        if not _is_buffer(a):
            continue
        _check_buffer(i, p, a)
        lo, hi = _host_span(a)
        if not _is_dense(a):
            # The pointer is its first element's address, as a GPU kernel gets it (the
            # kernel indexes it with its own strides): it stands for the memory it reaches.
            a, firsts[i] = _dense_span(a)
        spans.append((lo, hi, i, p, a))
    # Buffers whose host bytes overlap share one region laid out as on the host.
    groups: list[list[tuple[int, int, int, Param, object]]] = []
    for item in sorted(spans, key=lambda d: (d[0], d[1])):
        if groups and item[0] < max(g[1] for g in groups[-1]) and item[0] < item[1]:
            groups[-1].append(item)
        else:
            groups.append([item])
    regions: list[_Region] = []
    for group in groups:
        lo = group[0][0]
        hi = max(g[1] for g in group)
        data = np.zeros(hi - lo, np.uint8)
        members = []
        for glo, ghi, i, p, a in group:
            data[glo - lo : ghi - lo] = _buffer_bytes(a)
            members.append(_Member(i, p, a, glo - lo, ghi - glo))
        phase = (lo - _allocation_start(group[0][4])) % BUFFER_ALIGN
        regions.append(_Region(phase, data, members))
    return regions, {m.index: (r, m.rel + firsts.get(m.index, 0)) for r in regions
                     for m in r.members}


def _check_writes(name: str, region: _Region, new: np.ndarray) -> np.ndarray | None:
    """The changed bytes of a region (None if none); raises if the kernel wrote into a
    read-only array."""
    changed = new != region.data
    if not changed.any():
        return None
    covered = np.zeros(changed.shape, bool)
    for m in region.members:
        if _writable(m.array):
            covered[m.rel : m.rel + m.size] = True
    stray = changed & ~covered
    if stray.any():
        at = int(np.flatnonzero(stray)[0])
        m = next(m for m in region.members if m.rel <= at < m.rel + m.size)
        raise LaunchError(
            f"kernel {name} wrote into {_describe_buffer(m.index, m.param, m.array)}, a "
            f"read-only array (writeable=False); pass a writable array (a.copy())"
        )
    return changed


def _pack_scalar(p: Param, v, i: int) -> bytes:
    t = p.type
    w, kind = nm.TYPES[t]
    if p.is_array:
        if isinstance(v, bytes | bytearray | memoryview):
            b = bytes(v)
        elif isinstance(v, np.ndarray | np.generic):
            b = np.asarray(v).tobytes()
        else:
            raise LaunchError(
                f"argument {i} ({p.name}) is a {p.size}-byte .param array: pass bytes"
            )
        if len(b) != p.size:
            raise LaunchError(f"argument {i} ({p.name}) needs {p.size} bytes, got {len(b)}")
        return b
    nbytes = max(w // 8, 1)
    if kind == "f" and t in ("f32", "f64", "f16"):
        return np.array(float(v), nm.np_dtype(t)).tobytes()
    if kind == "f" and t == "bf16":
        return nm.f32_to_bf16(np.array([float(v)], np.float32)).tobytes()
    if isinstance(v, float | np.floating):
        if kind in ("u", "s"):
            if not float(v).is_integer():
                raise LaunchError(
                    f"argument {i} ({p.name}) is an integer parameter (.{t}) but got the "
                    f"non-integral float {float(v)!r}"
                )
            v = int(v)
        elif isinstance(v, np.floating) and v.dtype.itemsize * 8 == w:
            return np.asarray(v).tobytes()  # raw bits of a typed float for an untyped .bN param
        elif w == 32:
            return struct.pack("<f", float(v))
        elif w == 64:
            return struct.pack("<d", float(v))
        elif w == 16:
            return np.array(float(v), np.float16).tobytes()
        else:
            raise LaunchError(f"argument {i} ({p.name}, .{t}): cannot pass a float")
    try:
        iv = int(v)
    except (TypeError, ValueError) as e:
        raise LaunchError(
            f"argument {i} ({p.name}, .{t}): expected a number or a buffer, got {type(v).__name__}"
        ) from e
    if kind == "s" and not (-(1 << (w - 1)) <= iv < (1 << w)):
        raise LaunchError(f"argument {i} ({p.name}, .{t}): {iv} does not fit")
    if kind in ("u", "b") and not (-(1 << (w - 1)) <= iv < (1 << w)):
        raise LaunchError(f"argument {i} ({p.name}, .{t}): {iv} does not fit")
    return (iv & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")


def _dim3(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, int | np.integer):
        v = (int(v),)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise LaunchError(f"{what} must be 1-3 positive integers, got {v}")
    return v + (1,) * (3 - len(v))  # type: ignore[return-value]


LAUNCH_OPTIONS = ("max_threads_per_chunk", "max_steps", "shared_checks", "global_checks")


def check_launch_options(
    max_threads_per_chunk: int = DEFAULT_CHUNK_THREADS,
    max_steps: int = 10**8,
    shared_checks: str = "raise",
    global_checks: str = "raise",
) -> None:
    """Raises :class:`LaunchError` unless the options of :meth:`Module.launch` are valid."""
    for what, v in (("max_threads_per_chunk", max_threads_per_chunk), ("max_steps", max_steps)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise LaunchError(f"{what} must be a positive integer, got {v!r}")
    for what, v in (("shared_checks", shared_checks), ("global_checks", global_checks)):
        if v not in ("raise", "count", "off"):
            raise LaunchError(f"{what} must be 'raise', 'count' or 'off', not {v!r}")


class Module:
    """A loaded PTX module: its kernels can be launched on numpy arrays / CPU torch tensors."""

    def __init__(self, text: str) -> None:
        self.ptx = parse_ptx(text)
        self.global_syms, self._globals_end, placed = global_symbols(self.ptx)
        self._globals = [
            (v, off, bytearray(v.init if v.init is not None else bytes(v.size)))
            for v, off in placed
        ]
        self._compiled: dict[str, CompiledKernel] = {}
        for f in self.ptx.functions.values():
            if f.is_entry:
                cx = Compiler(self.ptx, f, self.global_syms)
                ops = cx.compile()
                self._compiled[f.name] = CompiledKernel(
                    f, ops, cx.reg_dtypes, cx.layout, len(cx.funcs)
                )

    @property
    def kernels(self) -> list[str]:
        """Names of the module's .entry kernels."""
        return list(self._compiled)

    @property
    def target(self) -> str:
        """The module's .target (e.g. ``sm_80``)."""
        return self.ptx.target

    def kernel_info(self, name: str) -> CompiledKernel:
        """The compiled form of a kernel (parameters, static shared size, ops)."""
        if name not in self._compiled:
            raise LaunchError(
                f"no kernel {name!r} in module; kernels: {', '.join(self.kernels) or 'none'}"
            )
        return self._compiled[name]

    def read_global(self, name: str) -> bytes:
        """Current bytes of a module-scope .global/.const variable."""
        for v, _, data in self._globals:
            if v.name == name:
                return bytes(data)
        raise LaunchError(f"no .global/.const variable {name!r}")

    def launch(
        self,
        name: str,
        grid,
        block,
        args,
        shared_bytes: int = 0,
        *,
        max_threads_per_chunk: int = DEFAULT_CHUNK_THREADS,
        max_steps: int = 10**8,
        shared_checks: str = "raise",
        global_checks: str = "raise",
        cluster=None,
    ) -> LaunchStats:
        """Run kernel *name* over *grid* x *block* threads.

        Args:
            name: the .entry name.
            grid, block: ints or 1-3-tuples.
            args: one per kernel parameter: numpy arrays / CPU torch tensors for pointer
                parameters (copied to emulated global memory and written back after the launch),
                or a :class:`Pointer` into one, Python or numpy numbers for scalar parameters
                (typed by the .param declaration), bytes for .param .b8 arrays (structs by value),
                a :class:`tileopt.runtime.tma.TensorMap` for a ``.param .b8 map[128]`` (a
                ``CUtensorMap`` by value, as Triton and nvcc pass it) or for a pointer
                parameter (the map in global memory); the map's tensor becomes a buffer of
                the launch (written back after it, shared with the other arguments it overlaps).
                A pointer parameter gets the address of the array's first element, as a GPU
                kernel does: a non-contiguous array (a transpose, a strided slice) stands for
                the host memory it reaches, which the kernel indexes with its own strides.
                Arrays whose memory overlaps (views of one storage) share one emulated buffer
                laid out as on the host; every allocation starts 256-byte aligned and a view
                keeps its byte offset into its allocation (torch storage, owning numpy array)
                modulo 256, so alignment-dependent paths run as on a GPU.
            shared_bytes: dynamic shared memory (extern .shared) in bytes.
            max_threads_per_chunk: CTAs are executed in chunks of about this many threads
                (all CTAs of a chunk at once); bounds memory use.
            max_steps: safety limit on instruction steps per chunk (catches infinite loops).
            shared_checks: "raise" (default): a shared-memory race between warps of a CTA (no
                bar.sync between a write and another warp's read or write of the same word)
                raises :class:`SharedRaceError`; "count": only count races and reads of
                uninitialised shared memory in the stats; "off": no checks (a little faster).
            cluster: the thread-block cluster's shape (an int or 1-3-tuple of CTAs), as
                ``cudaLaunchKernelEx``'s cluster dimension attribute gives it; by default the
                kernel's ``.reqnctapercluster`` (nvcc's ``__cluster_dims__``, Triton's
                ``num_ctas``), else clusters of one CTA. The grid must be a multiple of it.
                ``%cluster_*`` registers, ``barrier.cluster`` and distributed shared memory
                (``mapa``) work across a cluster's CTAs; bulk and multicast copies into
                another CTA are refused.
            global_checks: the same for global memory within a CTA: "raise" (default): a plain
                load of bytes another warp of the CTA stored, or a plain store that changes
                them, with no barrier in between raises :class:`GlobalRaceError`
                (:class:`tileopt.emulator.memory.GlobalShadow`); "count"; "off".

        Returns:
            A :class:`LaunchStats` with the launch's counters.

        Raises:
            LaunchError: bad kernel name, arguments, grid or block, or a write into a
                read-only array.
            MemoryAccessError: an out-of-bounds or misaligned access (buffers are not written back).
            SharedRaceError: a shared-memory race (also against an asynchronous copy in flight),
                unless ``shared_checks`` says otherwise.
            GlobalRaceError: a global-memory race between warps of a CTA, unless
                ``global_checks`` says otherwise.
            EmulatorError: a deadlock (every thread waits at barriers or spins on mbarrier waits
                that cannot succeed), a trap, misuse of an mbarrier or a bad tensor map.
        """
        t0 = time.perf_counter()
        _warm_malloc()
        check_launch_options(max_threads_per_chunk, max_steps, shared_checks, global_checks)
        ck = self.kernel_info(name)
        fn = ck.function
        grid = _dim3(grid, "grid")
        block = _dim3(block, "block")
        nthreads = block[0] * block[1] * block[2]
        if nthreads > 1024 or block[2] > 64:
            raise LaunchError(f"block {block} has {nthreads} threads; at most 1024 (z at most 64)")
        for key in ("maxntid", "reqntid"):
            lim = fn.directives.get(key)
            if lim:
                lim3 = tuple(lim) + (1,) * (3 - len(lim))
                total = int(np.prod(lim3))
                if key == "reqntid" and block != lim3:
                    raise LaunchError(
                        f"kernel {name} requires block {lim3} (.reqntid), got {block}"
                    )
                if key == "maxntid" and nthreads > total:
                    raise LaunchError(
                        f"kernel {name} allows at most {total} threads per block (.maxntid)"
                    )
        if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
            raise LaunchError(f"grid {grid} exceeds CUDA's limits")
        cluster_dims, explicit = _cluster_shape(fn, name, grid, cluster)
        lay = ck.layout
        dyn_off = (
            (lay.shared_static + lay.dyn_shared_align - 1)
            // lay.dyn_shared_align
            * lay.dyn_shared_align
        )
        shared_static = dyn_off if shared_bytes else lay.shared_static
        if shared_bytes < 0 or shared_static + shared_bytes > MAX_SHARED_PER_BLOCK:
            raise LaunchError(
                f"shared memory {lay.shared_static} static + {shared_bytes} dynamic bytes exceeds "
                f"{MAX_SHARED_PER_BLOCK}"
            )
        args = list(args)
        if len(args) != len(fn.params):
            raise LaunchError(
                f"kernel {name} takes {len(fn.params)} arguments "
                f"({', '.join(p.name for p in fn.params)}), got {len(args)}"
            )
        # ---- global memory: module variables, then the buffers
        buffers: list[Buffer] = []
        contents: list[tuple[Buffer, np.ndarray]] = []
        for v, off, data in self._globals:
            b = Buffer(f".{v.space} variable {v.name}", off, v.size)
            buffers.append(b)
            contents.append((b, np.frombuffer(bytes(data), np.uint8)))
        off = self._globals_end + BUFFER_GAP
        regions, where = _regions(fn, args)
        for r in regions:
            # Allocations start 256-byte aligned (as cudaMalloc's do) and a view keeps its
            # offset into its allocation modulo 256, so that code paths that depend on
            # alignment (vector accesses, misaligned fallbacks) are taken as on a GPU.
            off = (off + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN + r.phase
            r.buffer = Buffer(r.label(), off, r.data.size)
            buffers.append(r.buffer)
            contents.append((r.buffer, r.data))
            off += r.data.size + BUFFER_GAP
        # tensor maps: the emulator's encoding, by value or in global memory behind a pointer
        maps: dict[int, bytes | int] = {}
        for i, (p, a) in enumerate(zip(fn.params, args, strict=True)):
            if not _is_tensor_map(a):
                continue
            r, rel = where[i]
            assert r.buffer is not None
            enc = _encode_map(a, GLOBAL_BASE + r.buffer.start + rel)
            if p.is_array and p.size == tma.MAP_BYTES:
                maps[i] = enc
            elif p.size == 8 and not p.is_array:
                off = (off + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN
                b = Buffer(f"tensor map of argument {i} ({p.name})", off, tma.MAP_BYTES)
                buffers.append(b)
                contents.append((b, np.frombuffer(enc, np.uint8)))
                maps[i] = GLOBAL_BASE + off
                off += tma.MAP_BYTES + BUFFER_GAP
            else:
                raise LaunchError(
                    f"argument {i} ({p.name}, {p.size}-byte .{p.type}{'[]' if p.is_array else ''})"
                    f" got a TensorMap: it needs a .param .b8 {p.name}[128] (a map by value) or "
                    f"a 64-bit pointer parameter"
                )
        kparams = bytearray(lay.kparam_size)
        for i, (p, a) in enumerate(zip(fn.params, args, strict=True)):
            poff = lay.kparam_offsets[i]
            byte_offset = 0
            if i in maps:
                m = maps[i]
                kparams[poff : poff + p.size] = m if isinstance(m, bytes) else struct.pack("<Q", m)
                continue
            if isinstance(a, Pointer):
                a, byte_offset = a.buffer, a.byte_offset
            if _is_buffer(a):
                if p.size != 8 or p.is_array:
                    raise LaunchError(
                        f"argument {i} ({p.name}, .{p.type}) is not a 64-bit pointer parameter; "
                        f"got a {type(a).__name__}"
                    )
                r, rel = where[i]
                assert r.buffer is not None
                address = GLOBAL_BASE + r.buffer.start + rel + byte_offset
                kparams[poff : poff + 8] = struct.pack("<Q", address)
            else:
                kparams[poff : poff + p.size] = _pack_scalar(p, a, i)
        gm = GlobalMemory(buffers, off + 64)
        if global_checks != "off":
            gm.shadow = GlobalShadow(off + 64, global_checks)
        for b, data in contents:
            gm.mem.u8[b.start : b.start + b.size] = data
        kp = np.frombuffer(bytes(kparams) + bytes(16), np.uint8)
        # ---- run, chunk by chunk
        stats = LaunchStats(kernel=name, grid=grid, block=block)
        counts_w = [0] * len(ck.ops)
        counts_t = [0] * len(ck.ops)
        tpc = (nthreads + 31) // 32 * 32
        ncta_total = grid[0] * grid[1] * grid[2]
        per_chunk = max(1, max_threads_per_chunk // tpc)
        # A chunk holds whole clusters (its CTAs run together: barrier.cluster waits for all).
        cx, cy, cz = cluster_dims
        unit = cx if cy == cz == 1 else grid[0] * cy if cz == 1 else grid[0] * grid[1] * cz
        per_chunk = max(unit, per_chunk // unit * unit)
        for first in range(0, ncta_total, per_chunk):
            n = min(per_chunk, ncta_total - first)
            st = State(
                kernel_name=name,
                reg_dtypes=ck.reg_dtypes,
                grid=grid,
                block=block,
                cta_first=first,
                ncta=n,
                gm=gm,
                kparams=kp,
                shared_static=shared_static,
                shared_dynamic=shared_bytes,
                local_size=lay.local_size,
                tparam_size=lay.tparam_size,
                nfuncs=ck.nfuncs,
                stats=stats,
                max_steps=max_steps,
                shared_checks=shared_checks,
                cluster=cluster_dims,
                explicit_cluster=explicit,
            )
            run_chunk(st, ck.ops, counts_w, counts_t)
        # ---- counters
        by_class: dict[str, int] = {}
        for op, w in zip(ck.ops, counts_w, strict=True):
            if op.counted and w:
                by_class[op.cls] = by_class.get(op.cls, 0) + w
        stats.instructions = sum(counts_w)
        stats.thread_instructions = sum(counts_t)
        stats.instructions_by_class = by_class
        stats.global_load_unique_sectors = int(np.count_nonzero(gm.loaded))
        stats.global_store_unique_sectors = int(np.count_nonzero(gm.stored))
        for r in regions:  # (module variables lie side by side: no bytes outside them)
            assert r.buffer is not None
            b = r.buffer
            if changed := gm.outside_words_changed(b):
                raise MemoryAccessError(
                    f"kernel {name} changed {changed} byte(s) outside {b.describe()}, in the "
                    f"4-byte word it shares with its first or last element (a sub-word access "
                    f"to the whole word must leave the bytes outside the buffer as they were)"
                )
        # ---- write back
        for v, goff, data in self._globals:
            data[:] = gm.mem.u8[goff : goff + v.size].tobytes()
        writes = []
        for r in regions:
            assert r.buffer is not None
            new = gm.mem.u8[r.buffer.start : r.buffer.end]
            changed = _check_writes(name, r, new)
            if changed is not None:
                writes.append((r, new, changed))
        for r, new, changed in writes:
            for m in r.members:  # read-only members: their changes come through others
                if _writable(m.array) and changed[m.rel : m.rel + m.size].any():
                    _write_back(m.array, new[m.rel : m.rel + m.size].copy())
        stats.wall_time = time.perf_counter() - t0
        return stats


def _cluster_shape(fn: Function, name: str, grid: tuple[int, int, int],
                   given) -> tuple[tuple[int, int, int], bool]:
    """The launch's cluster shape (``given``, or the kernel's ``.reqnctapercluster``, or one
    CTA) and whether the kernel runs in explicit clusters; LaunchError where CUDA would refuse
    the launch."""
    declared = fn.directives.get("reqnctapercluster")
    shape = _dim3(declared, "cluster") if declared else None
    if given is not None:
        given = _dim3(given, "cluster")
        if shape is not None and given != shape:
            raise LaunchError(f"kernel {name} requires clusters of {shape} CTAs "
                              f"(.reqnctapercluster), got cluster={given}")
        shape = given
    explicit = shape is not None or "explicitcluster" in fn.directives
    shape = shape or (1, 1, 1)
    size = shape[0] * shape[1] * shape[2]
    most = fn.directives.get("maxclusterrank")
    limit = int(most[0]) if most else 16
    if size > limit:
        raise LaunchError(f"kernel {name}: a cluster of {shape} has {size} CTAs; at most {limit}"
                          + (" (.maxclusterrank)" if most else ""))
    if any(g % c for g, c in zip(grid, shape, strict=True)):
        raise LaunchError(f"kernel {name}: grid {grid} is not a multiple of its cluster {shape}")
    return shape, explicit


def _encode_map(m, address: int) -> bytes:
    """The emulator's 128 bytes for TensorMap *m* whose tensor starts at *address*."""
    return tma.encode_map(
        address,
        int(m.dtype),
        m.global_dims,
        m.global_strides,
        m.box_dims,
        m.element_strides,
        int(m.interleave),
        int(m.swizzle),
        int(m.l2_promotion),
        int(m.oob_fill),
    )


def load_ptx(text: str) -> Module:
    """Parse and compile PTX text.

    Every instruction of every kernel (and of the device functions they call) is checked
    here: anything the emulator cannot execute exactly raises
    :class:`~tileopt.emulator.errors.UnsupportedInstructionError` naming the instruction and
    its line; syntax errors raise :class:`~tileopt.emulator.errors.PTXLoadError`.
    """
    return Module(text)
