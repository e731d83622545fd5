"""Launching a compiled kernel on a real GPU through cuda.core (the "cuda" device).

Kernels run on the current torch stream of the tensors' device, so they order with the
surrounding PyTorch work. Without a CUDA driver every entry point raises
:class:`~tileopt.errors.DeviceError` saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tileopt.errors import DeviceError
from tileopt.runtime.abi import KernelParam, cuda_args

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
        self._opted_in: dict[str, int] = {}

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


#: Bytes of shared memory a kernel may use without opting in (static or dynamic), every chip.
STATIC_SHARED_LIMIT = 48 * 1024


def _torch_stream(cc: Any, module: CudaModule) -> Any:
    """The current torch stream of the module's device as a cuda.core ``Stream`` (borrowed:
    torch keeps it alive). ``Stream.from_handle`` takes the raw handle, so no version of the
    ``__cuda_stream__`` protocol is involved; older cuda-core wraps torch's stream object."""
    import torch

    stream = torch.cuda.current_stream(module.device.device_id)
    from_handle = getattr(getattr(cc, "Stream", None), "from_handle", None)
    if from_handle is not None:
        return from_handle(int(stream.cuda_stream))
    return module.device.create_stream(stream)


def launch(
    module: CudaModule,
    name: str,
    params: Sequence[KernelParam],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    shared_bytes: int = 0,
) -> None:
    """Launches kernel ``name`` on the current torch stream of the module's device, with
    ``shared_bytes`` of dynamic shared memory per program."""
    cc = _cuda_core()
    flat = cuda_args(params, args, name)
    try:
        # The calling thread may have no current context (a thread torch never used): the
        # launch needs the device's primary context, the one torch's tensors live in.
        module.device.set_current()
        stream = _torch_stream(cc, module)
        kernel = module.kernel(name)
        if shared_bytes > STATIC_SHARED_LIMIT:
            module.opt_in_shared(name, shared_bytes)
        config = cc.LaunchConfig(grid=grid, block=block, shmem_size=shared_bytes)
        cc.launch(stream, config, kernel, *flat)
    except DeviceError:
        raise
    except Exception as e:
        raise DeviceError(f"launching {name} grid={grid} block={block} failed: {e}") from e
