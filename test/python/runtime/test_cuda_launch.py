"""``device="cuda"``: cuda.core on the current torch stream, or a clear DeviceError."""

from __future__ import annotations

import numpy as np
import pytest
from tileopt.errors import DeviceError
from tileopt.runtime import cuda


def _gpu() -> tuple[bool, str]:
    ok, why = cuda.driver_available()
    if not ok:
        return False, why
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        return False, "torch has no CUDA (CPU build)"
    return True, ""


HAVE_GPU, NO_GPU = _gpu()
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason=f"needs an NVIDIA GPU: {NO_GPU}")


@pytest.mark.skipif(HAVE_GPU, reason="a CUDA driver is present")
def test_no_driver_is_a_clear_device_error(handwritten) -> None:
    k = handwritten.compiled("vector_add", "sm_90")
    x = np.zeros(4, np.float32)
    with pytest.raises(DeviceError, match="no CUDA driver found|CUDA device 0 is not usable"):
        k.launch(1, x, x, x, device="cuda")
    ok, why = cuda.driver_available()
    assert not ok and why


@needs_gpu
@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_vector_add_on_the_gpu(handwritten, n: int) -> None:
    import torch

    major, minor = torch.cuda.get_device_capability()
    k = handwritten.compiled("vector_add", "sm_80" if major * 10 + minor < 90 else "sm_90")
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    z = torch.empty(n, device="cuda")
    k.launch((n + 127) // 128, x, y, z, device="cuda")
    torch.cuda.synchronize()
    torch.testing.assert_close(z, x + y, rtol=0, atol=0)


@needs_gpu
def test_scale_noncontiguous_on_the_gpu(handwritten) -> None:
    import torch

    k = handwritten.compiled("scale", "sm_80")
    x = torch.randn(40, 70, device="cuda").t()[::2]
    y = torch.zeros(50, 40, device="cuda")[5:40]
    k.launch((35 * 40 + 127) // 128, x, y, 3.0, device="cuda")
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 3.0 * x, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("capability", "target", "code_type"),
    [((9, 0), "sm_90", "cubin"), ((9, 0), "sm_90a", "cubin"), ((8, 6), "sm_80", "cubin"),
     ((8, 0), "sm_86", None), ((10, 0), "sm_90", "ptx"), ((8, 0), "sm_90", None),
     ((10, 0), "sm_100", "cubin")],
)
def test_code_for_the_device(handwritten, monkeypatch, capability, target, code_type) -> None:
    """The cubin where it matches the device, the PTX (driver JIT) on newer GPUs, else an error.

    A stand-in device: no driver is needed to pick and wrap the code.
    """
    pytest.importorskip("cuda.core", reason="cuda-core is not installed")
    fake = type("FakeDevice", (), {"compute_capability": capability, "device_id": 0})()
    monkeypatch.setattr(cuda, "device", lambda index=0: fake)
    k = handwritten.compiled("vector_add", "sm_90")
    if code_type is None:
        with pytest.raises(DeviceError, match=f"compiled for {target} but device 0 is sm_80"):
            cuda.CudaModule(k.asm["cubin"], k.asm["ptx"], target, 0)
        return
    module = cuda.CudaModule(k.asm["cubin"], k.asm["ptx"], target, 0)
    assert module.code.code_type == code_type
