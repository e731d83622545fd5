"""``tileopt.compile(..., specialize=True)``: kernels compiled at launch for the promises of
their arrays (tileopt.compiler.specialize), checked against torch in the emulator."""

from __future__ import annotations

import pytest

pytest.importorskip("tileopt.ir", reason="tileopt's native MLIR bindings are not built")
torch = pytest.importorskip("torch", reason="the results are compared with PyTorch")

import tileopt  # noqa: E402
from tileopt import kernels  # noqa: E402
from tileopt.builder import KernelBuilder, View  # noqa: E402
from tileopt.errors import ArgumentError, OptionError  # noqa: E402


def _matmul_operands(m: int, n: int, k: int, a_offset: int = 0):
    torch.manual_seed(0)
    a = torch.randn(m, k + a_offset, dtype=torch.float16)[:, a_offset:]
    b = torch.randn(k, n, dtype=torch.float16)
    return a, b, torch.zeros(m, n)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_aligned_arrays_get_the_pipelined_kernel(target: str) -> None:
    """Without promises the f16 matmul holds every tile in registers twice (its vector path
    and its unaligned fallback): 252+ registers and no cp.async. Specialised on aligned
    arrays it is the kernel compiled with the promises: pipelined, far fewer registers."""
    generic = tileopt.compile(kernels.matmul("f16"), target)
    special = tileopt.compile(kernels.matmul("f16"), target, specialize=True)
    a, b, c = _matmul_operands(100, 80, 96)
    promises = {
        "aligned": ["a", "b", "c"],
        "divisible_sizes": {"a": (1, 16), "b": (16, 16), "c": (1, 16)},
        "int32_indexing": ["a", "b", "c"],
    }
    assert special.specialization(a, b, c) == promises
    kernel = special.kernel_for(a, b, c)
    assert kernel is tileopt.compile(kernels.matmul("f16"), target, **promises)
    assert "cp.async" in str(kernel.asm["ptx"]) and "cp.async" not in str(generic.asm["ptx"])
    assert kernel.metadata.spill_bytes == 0
    assert kernel.metadata.registers < generic.metadata.registers // 2
    special.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-4)


def test_each_specialization_compiles_once() -> None:
    """Arrays that keep the same promises share a variant; a misaligned view gets one of
    its own that promises nothing about that view's address, and both compute a @ b."""
    special = tileopt.compile(kernels.matmul("f16"), "sm_80", specialize=True)
    for m, n, k in ((64, 64, 64), (128, 48, 32)):
        a, b, c = _matmul_operands(m, n, k)
        special.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-4)
    assert len(special.kernels) == 1
    a, b, c = _matmul_operands(64, 64, 64, a_offset=1)  # a's rows start 2 bytes off
    assert special.specialization(a, b, c)["aligned"] == ["b", "c"]
    special.launch(kernels.matmul_grid(a.shape, b.shape), a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-4)
    assert len(special.kernels) == 2
    unaligned = special.kernel_for(a, b, c)
    assert [p.divisibility for p in unaligned.metadata.abi] == [None, 16, 16]


def test_strided_views_are_specialized_on_their_inner_stride() -> None:
    """A kernel whose views take any strides: a contiguous array gets the unit-stride
    variant, a transposed one the general kernel; both copy x into y."""
    kb = KernelBuilder("copy", x=View("f32", 2), y=View("f32", 2))
    with kb as k:
        row, col = k.program_id(0) * 16, k.program_id(1) * 32
        k.store(k.load(k.args.x, [row, col], [16, 32]), k.args.y, [row, col])
    special = tileopt.compile(kb, "sm_80", specialize=True)
    x = torch.randn(40, 70)
    for source in (x, x.t().contiguous().t()):
        y = torch.zeros(40, 70)
        promises = special.specialization(source, y)
        assert promises.get("contiguous") == (["x", "y"] if source.is_contiguous() else ["y"])
        special.launch((3, 3), source, y)
        torch.testing.assert_close(y, x)
    assert len(special.kernels) == 2


def test_a_launch_like_an_earlier_one_still_checks_its_arrays() -> None:
    """The variant of an earlier launch's layout is reused, and still rejects what the
    launchers reject (a tensor whose memory does not hold its values)."""
    special = tileopt.compile(kernels.matmul("f16"), "sm_80", specialize=True)
    a, b, c = _matmul_operands(64, 64, 64)
    special.launch((1, 1), a, b, c)
    with pytest.raises(ArgumentError, match="pending neg bit"):
        special.launch((1, 1), a._neg_view(), b, c)
    c_numpy = c.numpy().copy()
    special.launch((1, 1), a.numpy(), b.numpy(), c_numpy)  # numpy arrays: the same promises
    torch.testing.assert_close(torch.from_numpy(c_numpy), a.float() @ b.float(),
                               rtol=1e-4, atol=1e-4)
    assert len(special.kernels) == 1


def test_bad_arguments_are_named_before_anything_compiles() -> None:
    special = tileopt.compile(kernels.matmul("f16"), "sm_80", specialize=True)
    a, b, c = _matmul_operands(64, 64, 64)
    with pytest.raises(ArgumentError, match="takes 3 arguments"):
        special.launch((1, 1), a, b)
    with pytest.raises(ArgumentError, match=r"argument 1 \(b: .*\) expects elements of f16"):
        special.launch((1, 1), a, b.float(), c)
    assert special.kernels == {}


def test_specialize_takes_no_fixed_promises() -> None:
    with pytest.raises(OptionError, match="specialize=True chooses"):
        tileopt.compile(kernels.matmul("f16"), "sm_80", specialize=True, aligned=True)
    with pytest.raises(OptionError, match="specialize= takes True or False"):
        tileopt.compile(kernels.matmul("f16"), "sm_80", specialize="yes")
    with pytest.raises(OptionError, match="specialize= is for tile kernels"):
        tileopt.compile(torch.nn.ReLU(), (torch.randn(4),), specialize=True)


def test_empty_arrays_launch_nothing_out_of_bounds() -> None:
    """Zero-size arrays keep every promise vacuously; the variant runs and reads nothing."""
    kb = KernelBuilder("add", x=View("f32", 1), y=View("f32", 1), out=View("f32", 1))
    with kb as k:
        start = k.program_id(0) * 128
        k.store(k.load(k.args.x, [start], [128]) + k.load(k.args.y, [start], [128]),
                k.args.out, [start])
    special = tileopt.compile(kb, "sm_80", specialize=True)
    empty = torch.zeros(0)
    special.launch((1,), empty, empty, torch.zeros(0))
    x, y, out = torch.randn(300), torch.randn(300), torch.zeros(300)
    special.launch((3,), x, y, out)
    torch.testing.assert_close(out, x + y)
