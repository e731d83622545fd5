"""Launching a compiled kernel on a real GPU through cuda.core (the "cuda" device).

Kernels run on the current torch stream of the tensors' device, so they order with the
surrounding PyTorch work. Without a CUDA driver every entry point raises
:class:`~tileopt.errors.DeviceError` saying so.

Kernels are launched with the driver's ``cuLaunchKernel`` on parameters packed here
(:class:`PackedParams`: numbers, pointers and TMA's 128-byte ``CUtensorMap`` by value).
Checking the arguments and packing them is most of a launch's host time, so each module
remembers the packed parameters of its recent argument lists (:func:`launch_key`): a launch
with tensors it has seen before (the same addresses, shapes, strides and dtypes) skips both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tileopt.errors import DeviceError
from tileopt.runtime.abi import KernelParam, TensorMapParam, cuda_args, is_torch

_PINS = "cuda-bindings==13.5.0 cuda-core==1.2.2 cuda-pathfinder==1.9.0"


_API = ("Device", "launch", "LaunchConfig", "ObjectCode")


def _cuda_core() -> Any:
    """cuda.core's API: the top-level namespace (the pinned cuda-core 1.x), else, for the
    older releases that GPU images still ship, ``cuda.core.experimental``, where the same
    names lived (``import cuda.core`` works there but has no ``Device``)."""
    try:
        import cuda.core as cc
    except ImportError as e:
        raise DeviceError(f"cuda-core is not installed ({e}); pip install {_PINS}") from e
    if all(hasattr(cc, n) for n in _API):
        return cc
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from cuda.core import experimental as cc_experimental
    except ImportError:
        cc_experimental = None
    if cc_experimental is not None and all(hasattr(cc_experimental, n) for n in _API):
        return cc_experimental
    version = getattr(cc, "__version__", "unknown")
    raise DeviceError(
        f"cuda-core {version} has no {', '.join(n for n in _API if not hasattr(cc, n))}; "
        f"pip install {_PINS}"
    )


def device(index: int = 0) -> Any:
    """The cuda.core ``Device`` ``index``, made current; DeviceError without a driver/GPU."""
    cc = _cuda_core()
    try:
        dev = cc.Device(index)
        dev.set_current()
    except RuntimeError as e:
        # cuda.pathfinder's DynamicLibNotFoundError (no libcuda.so) is a RuntimeError.
        if type(e).__name__ == "DynamicLibNotFoundError":
            raise DeviceError(f"no CUDA driver found: {e}") from e
        raise DeviceError(f"CUDA device {index} is not usable: {e}") from e
    except Exception as e:  # cuda.core raises its own CUDAError types on driver failures
        raise DeviceError(f"CUDA device {index} is not usable: {e}") from e
    return dev


def driver_available() -> tuple[bool, str]:
    """(True, "") where a CUDA driver and a device can be used, else (False, the reason)."""
    try:
        device(0)
    except DeviceError as e:
        return False, str(e)
    return True, ""


class CudaModule:
    """A kernel's code loaded on a device: the cubin when it matches, else the PTX (JIT)."""

    def __init__(self, cubin: bytes | None, ptx: str, target: str, index: int) -> None:
        cc = _cuda_core()
        self.device = device(index)
        major, minor = self.device.compute_capability
        arch = f"sm_{major}{minor}"
        digits = "".join(ch for ch in target.removeprefix("sm_") if ch.isdigit())
        want_major, want_minor = int(digits[:-1]), int(digits[-1])
        if (major, minor) < (want_major, want_minor):
            raise DeviceError(
                f"the kernel was compiled for {target} but device {index} is {arch}; "
                f"compile with target='{arch}'"
            )
        # A cubin runs on its own major version with an equal or higher minor; an sm_90a
        # cubin only on sm_90. Anything newer gets the PTX, compiled by the driver, except
        # arch-specific PTX (sm_90a: wgmma, setmaxnreg), which no other GPU can run.
        if target[-1].isdigit():
            cubin_fits = major == want_major
        else:
            cubin_fits = (major, minor) == (want_major, want_minor)
            if not cubin_fits:
                raise DeviceError(
                    f"the kernel was compiled for {target}, whose arch-specific code runs only "
                    f"on sm_{want_major}{want_minor}, but device {index} is {arch}; compile "
                    f"with target='{arch}'"
                )
        try:
            if cubin is not None and cubin_fits:
                self.code = cc.ObjectCode.from_cubin(cubin)
            else:
                self.code = cc.ObjectCode.from_ptx(ptx.encode())  # str would be a path
        except Exception as e:
            raise DeviceError(f"loading the kernel on {arch} failed: {e}") from e
        self._kernels: dict[str, Any] = {}
        self._functions: dict[str, Any] = {}
        self._opted_in: dict[str, int] = {}
        #: (kernel, launch_key(args)) -> PackedParams, the most recent LAUNCH_CACHE_SIZE.
        self.packed: dict[tuple[str, tuple[Any, ...]], PackedParams] = {}

    def opt_in_shared(self, name: str, size: int) -> None:
        """Lets kernel ``name`` take ``size`` bytes of dynamic shared memory: above
        :data:`STATIC_SHARED_LIMIT` the driver needs the kernel's opt-in, up to the device's
        per-block maximum (DeviceError beyond it)."""
        if self._opted_in.get(name, 0) >= size:
            return
        from cuda.bindings import driver

        limit = self.device.properties.max_shared_memory_per_block_optin
        if size > limit:
            raise DeviceError(
                f"kernel {name} needs {size} bytes of shared memory per program; this "
                f"{self.device.name} allows {limit}: compile it with smaller tiles or "
                f"fewer num_stages"
            )
        handle = self.kernel(name).handle
        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if isinstance(handle, driver.CUkernel):  # cuda.core loads kernels through libraries
            result = driver.cuKernelSetAttribute(attribute, size, handle,
                                                 self.device.device_id)
        else:
            result = driver.cuFuncSetAttribute(handle, attribute, size)
        if result[0] != driver.CUresult.CUDA_SUCCESS:
            raise DeviceError(f"kernel {name}: opting in to {size} bytes of shared memory "
                              f"failed: {result[0]!r}")
        self._opted_in[name] = size

    def kernel(self, name: str) -> Any:
        """The cuda.core ``Kernel`` ``name`` (loads the module on first use; the driver
        compiles PTX then), cached: looking it up again on every launch costs host time."""
        if name not in self._kernels:
            self._kernels[name] = self.code.get_kernel(name)
        return self._kernels[name]

    def function(self, name: str) -> Any:
        """The driver's ``CUfunction`` of kernel ``name``, for ``cuLaunchKernel``."""
        if name not in self._functions:
            from cuda.bindings import driver

            handle = self.kernel(name).handle
            if isinstance(handle, driver.CUkernel):  # cuda.core loads through libraries
                err, handle = driver.cuKernelGetFunction(handle)
                if err != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"cuKernelGetFunction failed: {err!r}")
            self._functions[name] = handle
        return self._functions[name]


#: Bytes of shared memory a kernel may use without opting in (static or dynamic), every chip.
STATIC_SHARED_LIMIT = 48 * 1024

#: Argument lists whose packed parameters a module keeps (per module, all its kernels).
LAUNCH_CACHE_SIZE = 64


def _current_stream(module: CudaModule) -> int:
    """The raw handle of the current torch stream of the module's device."""
    import torch

    return int(torch.cuda.current_stream(module.device.device_id).cuda_stream)


def launch_key(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """What decides a launch's parameters and the outcome of its argument checks: per torch
    tensor its address, shape, strides, dtype, device, layout and conj/neg bits; per number
    its type and value. None (no caching) when an argument is anything else."""
    key: list[Any] = []
    for a in args:
        if type(a) in (int, float, bool):
            key.append((type(a), a))
        elif is_torch(a):
            key.append((a.data_ptr(), a.shape, a.stride(), a.dtype, a.device, a.layout,
                        a.is_conj(), a.is_neg()))
        else:
            return None
    return tuple(key)


class PackedParams:
    """A launch's kernel parameters in host memory, as ``cuLaunchKernel`` takes them: an array
    of pointers (:attr:`address`), the ``i``-th to the bytes of parameter ``i``.

    ``flat`` holds numpy scalars (their bytes, in native order) and ``bytes`` (a struct by
    value: a 128-byte tensor map). Every value starts at an offset aligned to its size (64
    bytes for a ``CUtensorMap``), as its PTX parameter is. The driver copies the values at the
    launch; keep this object alive until ``cuLaunchKernel`` returns.
    """

    def __init__(self, flat: Sequence[Any]) -> None:
        values: list[bytes] = []
        for i, v in enumerate(flat):
            if isinstance(v, bytes | bytearray):
                values.append(bytes(v))
            elif isinstance(v, np.generic):
                values.append(v.tobytes())
            else:
                raise DeviceError(f"kernel parameter {i}: cannot pass a {type(v).__name__} by "
                                  f"value; expected a numpy scalar or bytes")
        offsets = []
        end = 0
        for b in values:
            align = 64 if len(b) >= 64 else max(len(b), 1)
            end = -(-end // align) * align
            offsets.append(end)
            end += len(b)
        self._data = np.zeros(end + 64, np.uint8)
        start = -self._data.ctypes.data % 64  # the first value 64-byte aligned
        for off, b in zip(offsets, values, strict=True):
            self._data[start + off : start + off + len(b)] = np.frombuffer(b, np.uint8)
        base = self._data.ctypes.data + start
        self._pointers = np.array([base + off for off in offsets] or [0], np.uint64)

    @property
    def address(self) -> int:
        """The address of the array of pointers (``void**``), ``kernelParams``."""
        return int(self._pointers.ctypes.data)


def _set_current(module: CudaModule, name: str, grid: tuple[int, int, int],
                 block: tuple[int, int, int]) -> None:
    try:
        module.device.set_current()
    except Exception as e:
        raise DeviceError(f"launching {name} grid={grid} block={block} failed: {e}") from e


def launch(
    module: CudaModule,
    name: str,
    params: Sequence[KernelParam],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    shared_bytes: int = 0,
    tensor_maps: Sequence[TensorMapParam] = (),
) -> None:
    """Launches kernel ``name`` on the current torch stream of the module's device, with
    ``shared_bytes`` of dynamic shared memory per program and, after the arguments'
    parameters, one ``CUtensorMap`` (encoded by the driver) per ``tensor_maps``."""
    key = launch_key(args)
    packed = module.packed.get((name, key)) if key is not None else None
    if packed is None:
        if tensor_maps:  # the driver encodes the maps: it needs the device's context
            _set_current(module, name, grid, block)
        packed = PackedParams(cuda_args(params, args, name, tensor_maps))
        if key is not None:
            if len(module.packed) >= LAUNCH_CACHE_SIZE:
                del module.packed[next(iter(module.packed))]  # the oldest
            module.packed[(name, key)] = packed
    try:
        from cuda.bindings import driver

        # The calling thread may have no current context (a thread torch never used): the
        # launch needs the device's primary context, the one torch's tensors live in.
        module.device.set_current()
        stream = _current_stream(module)
        function = module.function(name)
        if shared_bytes > STATIC_SHARED_LIMIT:
            module.opt_in_shared(name, shared_bytes)
        result = driver.cuLaunchKernel(function, *grid, *block, shared_bytes, stream,
                                       packed.address, 0)
        err = result[0] if isinstance(result, tuple) else result
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuLaunchKernel failed: {err!r}")
    except DeviceError:
        raise
    except Exception as e:
        raise DeviceError(f"launching {name} grid={grid} block={block} failed: {e}") from e
