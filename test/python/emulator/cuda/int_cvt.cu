// Integer narrowing/widening conversions (plain and .sat) and f16/bf16 <-> integer conversions.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void int_narrow(const long long* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long v = x[i];
    int w = (int)v;
    int* o = out + (size_t)i * 10;
    o[0] = (signed char)w;
    o[1] = (unsigned char)w;
    o[2] = (short)w;
    o[3] = (unsigned short)w;
    int r;
    asm("cvt.sat.s8.s32 %0, %1;" : "=r"(r) : "r"(w));
    o[4] = (signed char)r;  // value already in range
    asm("cvt.sat.u8.s32 %0, %1;" : "=r"(r) : "r"(w));
    o[5] = r & 0xff;
    asm("cvt.sat.s16.s64 %0, %1;" : "=r"(r) : "l"(v));
    o[6] = (short)r;
    asm("cvt.sat.u32.s64 %0, %1;" : "=r"(r) : "l"(v));
    o[7] = r;
    asm("cvt.sat.s32.u64 %0, %1;" : "=r"(r) : "l"(v));
    o[8] = r;
    long long s;
    asm("cvt.s64.s16 %0, %1;" : "=l"(s) : "h"((unsigned short)w));
    o[9] = (int)(s >> 8);
}

extern "C" __global__ void half_int_cvt(const float* f, const int* x, int* out, unsigned short* h, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half hv = __float2half_rn(f[i]);
    int* o = out + (size_t)i * 4;
    o[0] = __half2int_rn(hv);
    o[1] = __half2int_rz(hv);
    o[2] = __half2short_rd(hv);
    o[3] = (int)__half2uint_ru(__habs(hv));
    unsigned short* hh = h + (size_t)i * 4;
    hh[0] = __half_as_ushort(__int2half_rn(x[i]));
    hh[1] = __half_as_ushort(__int2half_rz(x[i]));
    hh[2] = __half_as_ushort(__uint2half_rd((unsigned)x[i]));
    hh[3] = __bfloat16_as_ushort(__int2bfloat16_rn(x[i]));
}
