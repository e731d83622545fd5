// cp.async double buffering: each block streams its row of tiles through two shared buffers.
#include <stdint.h>

#define CHUNK 128  // floats per stage per block (one float4 per thread for 32 threads)

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// out[b * nchunks + c] = sum(x[b][c*CHUNK:(c+1)*CHUNK] * w[c*CHUNK...]) via inline-PTX cp.async,
// double-buffered: chunk c+1 is in flight while chunk c is consumed. Block = 32 threads.
extern "C" __global__ void cp_async_double_buffer(const float* x, const float* w, float* out, int nchunks) {
    __shared__ __align__(16) float xs[2][CHUNK];
    __shared__ __align__(16) float ws[2][CHUNK];
    const float* xb = x + (size_t)blockIdx.x * nchunks * CHUNK;
    int t = threadIdx.x;
    cp_async16(&xs[0][t * 4], xb + t * 4);
    cp_async16(&ws[0][t * 4], w + t * 4);
    cp_commit();
    for (int c = 0; c < nchunks; ++c) {
        int cur = c & 1;
        if (c + 1 < nchunks) {
            cp_async16(&xs[cur ^ 1][t * 4], xb + (c + 1) * CHUNK + t * 4);
            cp_async16(&ws[cur ^ 1][t * 4], w + (c + 1) * CHUNK + t * 4);
        }
        cp_commit();
        cp_wait<1>();  // all but the newest group are complete: chunk c has landed
        __syncthreads();
        // Each thread reads a different thread's float4 (so the data really went through smem).
        int src = ((t + 5) & 31) * 4;
        float p = 0.f;
        for (int e = 0; e < 4; ++e) p += xs[cur][src + e] * ws[cur][src + e];
        for (int off = 16; off > 0; off >>= 1) p += __shfl_xor_sync(0xffffffffu, p, off);
        if (t == 0) out[blockIdx.x * nchunks + c] = p;
        __syncthreads();  // buffer cur is refilled in the next iteration
    }
    asm volatile("cp.async.wait_all;\n" ::);
}

// 4-byte cp.async.ca copies with an odd element count, then a shifted read-back.
extern "C" __global__ void cp_async_ca4(const int* in, int* out, int n) {
    __shared__ int buf[256];
    int t = threadIdx.x, base = blockIdx.x * 256;
    if (base + t < n) cp_async4(&buf[t], in + base + t);
    cp_commit();
    cp_wait<0>();
    __syncthreads();
    int src = (t + 1) & 255;
    if (base + t < n && base + src < n) out[base + t] = buf[src] + 1;
    else if (base + t < n) out[base + t] = -7;
}
