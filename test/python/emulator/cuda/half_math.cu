// Scalar and packed f16 / bf16 arithmetic, min/max, saturation, relu and comparisons.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// 12 f16 results per element (raw bits) + a comparison bit mask.
extern "C" __global__ void half_ops(const __half* a, const __half* b, const __half* c, __half* out,
                                    int* cmp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i], z = c[i];
    __half* o = out + (size_t)i * 10;
    o[0] = __hadd(x, y);
    o[1] = __hsub(x, y);
    o[2] = __hmul(x, y);
    o[3] = __hfma(x, y, z);
    o[4] = __hmin(x, y);
    o[5] = __hmax(x, y);
    o[6] = __hneg(x);
    o[7] = __habs(x);
    o[8] = __hfma_relu(x, y, z);
    o[9] = __hadd_sat(x, y);
    cmp[i] = (__hlt(x, y) ? 1 : 0) | (__hge(x, y) ? 2 : 0) | (__heq(x, z) ? 4 : 0) |
             (__hisnan(x) ? 8 : 0) | (__hgtu(x, y) ? 16 : 0) | (__hisinf(z) ? 32 : 0);
}

extern "C" __global__ void bf16_ops(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                    __nv_bfloat16* out, int* cmp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i], y = b[i], z = c[i];
    __nv_bfloat16* o = out + (size_t)i * 8;
    o[0] = __hadd(x, y);
    o[1] = __hsub(x, y);
    o[2] = __hmul(x, y);
    o[3] = __hfma(x, y, z);
    o[4] = __hmin(x, y);
    o[5] = __hmax(x, y);
    o[6] = __hneg(x);
    o[7] = __habs(x);
    cmp[i] = (__hlt(x, y) ? 1 : 0) | (__hge(x, y) ? 2 : 0) | (__heq(x, z) ? 4 : 0);
}

// Packed half2: add/mul/fma/max/relu.
extern "C" __global__ void half2_ops(const __half2* a, const __half2* b, const __half2* c, __half2* out, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    __half2 x = a[i], y = b[i], z = c[i];
    __half2* o = out + (size_t)i * 5;
    o[0] = __hadd2(x, y);
    o[1] = __hmul2(x, y);
    o[2] = __hfma2(x, y, z);
    o[3] = __hmax2(x, y);
    o[4] = __hfma2_relu(x, y, z);
}

// Packed bf16x2 add/mul/fma/min.
extern "C" __global__ void bf162_ops(const __nv_bfloat162* a, const __nv_bfloat162* b, const __nv_bfloat162* c,
                                     __nv_bfloat162* out, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    __nv_bfloat162 x = a[i], y = b[i], z = c[i];
    __nv_bfloat162* o = out + (size_t)i * 4;
    o[0] = __hadd2(x, y);
    o[1] = __hmul2(x, y);
    o[2] = __hfma2(x, y, z);
    o[3] = __hmin2(x, y);
}
