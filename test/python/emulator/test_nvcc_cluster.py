"""Thread-block clusters (cuda/cluster.cu, sm_90): the %cluster_* registers from the kernel's
``.reqnctapercluster`` or the launch's ``cluster=``, and barrier.cluster across a cluster's
CTAs, in the emulator against numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pytest
import tileopt.emulator as emu

if TYPE_CHECKING:
    from conftest import LoadedPTX

Loader = Callable[..., "LoadedPTX"]


def test_nvcc_cluster_ranks(load_kernels: Loader) -> None:
    """__cluster_dims__(2, 1, 1): every launch runs in clusters of two CTAs, whose rank and
    size the kernel reads (%cluster_ctarank, %cluster_nctarank)."""
    k = load_kernels("cluster.cu", "sm_90")
    k.require(".reqnctapercluster", "%cluster_ctarank")
    n, block = 1000, 128
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    k.module.launch("cluster_rank", grid=8, block=block, args=[x, out, n])
    rank = (np.arange(n) // block) % 2
    np.testing.assert_array_equal(out, 2 * x + 10 * rank.astype(np.float32) + 2)


def test_nvcc_cluster_barrier_orders_the_clusters_ctas(load_kernels: Loader) -> None:
    """cluster.sync() (barrier.cluster.arrive/wait) across clusters of two CTAs along y: each
    CTA reads what its partner wrote before the barrier."""
    k = load_kernels("cluster.cu", "sm_90")
    k.require("barrier.cluster.arrive", "barrier.cluster.wait")
    gx, gy = 3, 4
    slots = np.zeros(gx * gy, np.int32)
    out = np.zeros(gx * gy, np.int32)
    k.module.launch("cluster_exchange", grid=(gx, gy), block=64, args=[slots, out])
    cta = np.arange(gx * gy)
    y = cta // gx
    partner = (y ^ 1) * gx + cta % gx
    np.testing.assert_array_equal(out, partner * 7 + 1 + 1000 * (y % 2))


def test_cluster_shape_from_the_launch_and_its_checks(load_kernels: Loader) -> None:
    """A kernel without a declared shape takes the launch's (cluster=); a grid that is not a
    multiple of the cluster, a shape other than the declared one, and clusters of more than 16
    CTAs are refused as CUDA refuses them."""
    k = load_kernels("cluster.cu", "sm_90")
    out = np.zeros(8, np.int32)
    k.module.launch("launch_cluster", grid=8, block=32, args=[out])
    np.testing.assert_array_equal(out, 1)  # clusters of one CTA
    k.module.launch("launch_cluster", grid=8, block=32, args=[out], cluster=4)
    np.testing.assert_array_equal(out, np.arange(8) % 4 * 100 + 4)
    x, y = np.zeros(96, np.float32), np.zeros(96, np.float32)
    with pytest.raises(emu.LaunchError, match=r"grid \(3, 1, 1\) is not a multiple of its "
                                              r"cluster \(2, 1, 1\)"):
        k.module.launch("cluster_rank", grid=3, block=32, args=[x, y, 96])
    with pytest.raises(emu.LaunchError, match=r"requires clusters of \(2, 1, 1\)"):
        k.module.launch("cluster_rank", grid=4, block=32, args=[x, y, 96], cluster=4)
    with pytest.raises(emu.LaunchError, match="has 32 CTAs; at most 16"):
        k.module.launch("launch_cluster", grid=32, block=32, args=[np.zeros(32, np.int32)],
                        cluster=32)


def test_nvcc_distributed_shared_memory_histogram(load_kernels: Loader) -> None:
    """The CUDA programming guide's histogram in distributed shared memory (mapa, atomic adds
    into another CTA's shared memory through generic addresses) against numpy."""
    k = load_kernels("cluster.cu", "sm_90")
    k.require("mapa")
    n, nbins = 3001, 64
    x = np.random.default_rng(1).integers(-5, nbins + 5, n).astype(np.int32)
    bins = np.zeros(nbins, np.int32)
    k.module.launch("cluster_histogram", grid=8, block=96, args=[x, bins, n, nbins],
                    shared_bytes=nbins // 4 * 4)
    np.testing.assert_array_equal(bins, np.bincount(np.clip(x, 0, nbins - 1), minlength=nbins))


def test_nvcc_distributed_shared_memory_swap(load_kernels: Loader) -> None:
    """Stores into the partner CTA's shared memory, read after cluster.sync."""
    k = load_kernels("cluster.cu", "sm_90")
    x = np.random.default_rng(2).standard_normal(6 * 128).astype(np.float32)
    out = np.zeros_like(x)
    k.module.launch("cluster_swap", grid=6, block=128, args=[x, out])
    cta = np.arange(6).repeat(128)
    want = x.reshape(3, 2, 128)[:, ::-1].reshape(-1) + (1000 * (cta % 2 ^ 1)).astype(np.float32)
    np.testing.assert_array_equal(out, want)
