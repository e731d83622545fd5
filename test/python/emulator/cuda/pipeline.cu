// The CUDA pipeline primitives (cuda_pipeline.h): cp.async with an explicit src-size operand.
#include <cuda_pipeline.h>

// The CUDA pipeline primitives (__pipeline_memcpy_async / commit / wait_prior).
extern "C" __global__ void pipeline_primitives_copy(const float4* in, float4* out, int n4) {
    __shared__ __align__(16) float4 buf[2][64];
    int t = threadIdx.x;
    int nblocks = (n4 + 63) / 64;
    int stage = 0;
    int b = blockIdx.x;
    if (b < nblocks && b * 64 + t < n4) __pipeline_memcpy_async(&buf[0][t], &in[b * 64 + t], sizeof(float4));
    __pipeline_commit();
    for (; b < nblocks; b += gridDim.x) {
        int nb = b + gridDim.x;
        if (nb < nblocks && nb * 64 + t < n4)
            __pipeline_memcpy_async(&buf[stage ^ 1][t], &in[nb * 64 + t], sizeof(float4));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        int i = b * 64 + t;
        if (i < n4) {
            float4 v = buf[stage][63 - t];  // reversed within the 64-element chunk
            out[i] = make_float4(v.w, v.z, v.y, v.x);
        }
        __syncthreads();
        stage ^= 1;
    }
}
