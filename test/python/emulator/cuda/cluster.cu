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
