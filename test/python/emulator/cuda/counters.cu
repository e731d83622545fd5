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

// Offset copy: out[i] = in[i + off]; a warp's 128 bytes straddle a sector boundary unless off % 8 == 0.
extern "C" __global__ void copy_offset(const float* __restrict__ in, float* __restrict__ out, int n, int off) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i + off];
}

// 2-byte and 8-byte element copies.
extern "C" __global__ void copy_u16_f64(const unsigned short* a, unsigned short* b, const double* c, double* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = a[i];
        d[i] = c[i];
    }
}
