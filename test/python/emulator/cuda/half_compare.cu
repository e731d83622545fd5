// Packed f16x2 / bf16x2 comparisons (set.*.f16x2 and setp.*.f16x2 with a predicate pair).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Per pair: __hlt2 (1.0/0.0 per lane), __hge2 (per lane), and the all-lanes __hble2 / __hbgt2.
extern "C" __global__ void half2_compare(const __half2* a, const __half2* b, __half2* out, int* both, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    __half2 x = a[i], y = b[i];
    out[2 * i] = __hlt2(x, y);
    out[2 * i + 1] = __hge2(x, y);
    both[i] = (__hble2(x, y) ? 1 : 0) | (__hbgt2(x, y) ? 2 : 0);
}

extern "C" __global__ void bf162_compare(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* out,
                                         int* both, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    __nv_bfloat162 x = a[i], y = b[i];
    out[2 * i] = __hlt2(x, y);
    out[2 * i + 1] = __hge2(x, y);
    both[i] = (__hble2(x, y) ? 1 : 0) | (__hbgt2(x, y) ? 2 : 0);
}
