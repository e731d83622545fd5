// Thread-block clusters (sm_90): the cluster's special registers and its barrier. Compiled for
// an earlier target, the kernels only trap.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define CLUSTERS 1
#define CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define CLUSTERS 0
#define CLUSTER_DIMS(x, y, z)
#endif

// Clusters of two CTAs along x (__cluster_dims__: .reqnctapercluster in the PTX).
extern "C" __global__ void CLUSTER_DIMS(2, 1, 1) cluster_rank(const float* x, float* out, int n) {
#if CLUSTERS
    cg::cluster_group cluster = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i] + 10.0f * cluster.block_rank() + cluster.num_blocks();
#else
    __trap();
#endif
}

// Clusters of two CTAs along y: each CTA publishes a value, the cluster barrier orders it
// before its partner reads it.
extern "C" __global__ void CLUSTER_DIMS(1, 2, 1) cluster_exchange(int* slots, int* out) {
#if CLUSTERS
    cg::cluster_group cluster = cg::this_cluster();
    int cta = blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) slots[cta] = cta * 7 + 1;
    cluster.sync();
    int partner = (blockIdx.y ^ 1) * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) out[cta] = slots[partner] + 1000 * (int)cluster.block_index().y;
#else
    __trap();
#endif
}

// No cluster shape in the kernel: the launch gives it (cudaLaunchKernelEx's attribute).
extern "C" __global__ void launch_cluster(int* out) {
#if CLUSTERS
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0)
        out[blockIdx.x] = (int)cluster.block_rank() * 100 + (int)cluster.num_blocks();
#else
    __trap();
#endif
}

// Distributed shared memory, the CUDA programming guide's histogram: each CTA of a cluster
// of four holds a quarter of the bins in its shared memory, and every thread adds its element
// into the CTA that holds its bin (cluster.map_shared_rank: mapa, then an atomic add through
// the generic address); after cluster.sync each CTA adds its bins into the global histogram.
extern "C" __global__ void CLUSTER_DIMS(4, 1, 1)
    cluster_histogram(const int* x, int* bins, int n, int nbins) {
#if CLUSTERS
    extern __shared__ int smem[];
    cg::cluster_group cluster = cg::this_cluster();
    int per_cta = nbins / 4;
    for (int i = threadIdx.x; i < per_cta; i += blockDim.x) smem[i] = 0;
    cluster.sync();  // every CTA's bins are zero before any CTA adds to them
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int bin = min(max(x[i], 0), nbins - 1);
        int* dst = cluster.map_shared_rank(smem, bin / per_cta);
        atomicAdd(dst + bin % per_cta, 1);
    }
    cluster.sync();  // every add landed before the CTA reads its bins
    int first = (int)cluster.block_rank() * per_cta;
    for (int i = threadIdx.x; i < per_cta; i += blockDim.x) atomicAdd(&bins[first + i], smem[i]);
#else
    __trap();
#endif
}

// Each CTA of a cluster of two writes its values into its partner's shared memory (a plain
// store through the mapped address), and reads what the partner wrote into its own.
extern "C" __global__ void CLUSTER_DIMS(2, 1, 1) cluster_swap(const float* x, float* out) {
#if CLUSTERS
    __shared__ float inbox[128];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned partner = cluster.block_rank() ^ 1;
    float* theirs = cluster.map_shared_rank(inbox, partner);
    theirs[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    cluster.sync();
    out[blockIdx.x * blockDim.x + threadIdx.x] = inbox[threadIdx.x] + 1000.0f * partner;
#else
    __trap();
#endif
}
