// Kernels with known memory-access patterns for the emulator's counters.

// Coalesced: each thread copies one float4 (16 B); a full warp touches 512 contiguous bytes.
extern "C" __global__ void copy_float4(const float4* __restrict__ in, float4* __restrict__ out, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) out[i] = in[i];
}

// Strided gather: out[i] = in[i * stride] (float), coalesced stores.
extern "C" __global__ void copy_strided(const float* __restrict__ in, float* __restrict__ out, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(long long)i * stride];
}

// Shared-memory access pattern: every lane reads word (lane * stride + offset) % 1024 of a 4 KiB
// array, once per warp (a single ld.shared.u32 per warp); with stride 0 it is a broadcast.
extern "C" __global__ void smem_stride_read(const int* in, int* out, int stride, int offset) {
    __shared__ int s[1024];
    for (int k = threadIdx.x; k < 1024; k += blockDim.x) s[k] = in[k];
    __syncthreads();
    int lane = threadIdx.x & 31;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(lane * stride + offset) & 1023];
}
