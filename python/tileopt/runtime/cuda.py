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


def _cuda_core() -> Any:
    try:
        import cuda.core as cc
    except ImportError as e:
        raise DeviceError(f"cuda-core is not installed ({e}); pip install {_PINS}") from e
    return cc


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
        # cubin only on sm_90. Anything newer gets the PTX, compiled by the driver.
        if target[-1].isdigit():
            cubin_fits = major == want_major
        else:
            cubin_fits = (major, minor) == (want_major, want_minor)
        try:
            if cubin is not None and cubin_fits:
                self.code = cc.ObjectCode.from_cubin(cubin)
            else:
                self.code = cc.ObjectCode.from_ptx(ptx.encode())  # str would be a path
        except Exception as e:
            raise DeviceError(f"loading the kernel on {arch} failed: {e}") from e


def launch(
    module: CudaModule,
    name: str,
    params: Sequence[KernelParam],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
) -> None:
    """Launches kernel ``name`` on the current torch stream of the module's device."""
    cc = _cuda_core()
    flat = cuda_args(params, args, name)
    import torch

    stream = module.device.create_stream(torch.cuda.current_stream(module.device.device_id))
    try:
        kernel = module.code.get_kernel(name)
        cc.launch(stream, cc.LaunchConfig(grid=grid, block=block), kernel, *flat)
    except Exception as e:
        raise DeviceError(f"launching {name} grid={grid} block={block} failed: {e}") from e
