// FP8 conversions (cuda_fp8.h): f32 -> e4m3 / e5m2 with saturation, and back through f16.
#include <cuda_fp8.h>

extern "C" __global__ void fp8_cvt(const float* f, unsigned char* q, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_fp8_e4m3 a(f[i]);
    __nv_fp8_e5m2 b(f[i]);
    q[2 * i] = a.__x;
    q[2 * i + 1] = b.__x;
    back[2 * i] = float(a);
    back[2 * i + 1] = float(b);
}
