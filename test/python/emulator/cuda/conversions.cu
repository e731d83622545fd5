// Conversions with rounding modes: float <-> int, f32/f64 -> f16/bf16, explicit-rounding arithmetic.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// Float <-> int conversions with rounding intrinsics. Per element: 12 ints.
extern "C" __global__ void float_to_int(const float* f, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    int* o = out + (size_t)i * 12;
    o[0] = __float2int_rn(x);
    o[1] = __float2int_rz(x);
    o[2] = __float2int_rd(x);
    o[3] = __float2int_ru(x);
    o[4] = (int)__float2uint_rn(fabsf(x));
    o[5] = (int)__float2uint_rz(fabsf(x));
    o[6] = (int)x;  // cvt.rzi.s32.f32 (C truncation)
    o[7] = (int)rintf(x);  // cvt.rni.f32.f32 then cvt
    o[8] = (int)floorf(x);
    o[9] = (int)ceilf(x);
    o[10] = (int)truncf(x * 0.5f);
    o[11] = (int)(__float2ll_rn(x * 4096.f) >> 8);
}

// int -> float with rounding modes (inputs exceed 2^24 so the rounding matters).
extern "C" __global__ void int_to_float(const int* a, const unsigned* u, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float* o = out + (size_t)i * 6;
    o[0] = __int2float_rn(a[i]);
    o[1] = __int2float_rz(a[i]);
    o[2] = __int2float_rd(a[i]);
    o[3] = __int2float_ru(a[i]);
    o[4] = __uint2float_rn(u[i]);
    o[5] = __uint2float_rz(u[i]);
}

// f32 -> f16 / bf16 with rounding modes and back; f64 -> f32; halves as raw bits.
extern "C" __global__ void float_to_half(const float* f, const double* d, unsigned short* h,
                                         float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    unsigned short* o = h + (size_t)i * 8;
    o[0] = __half_as_ushort(__float2half_rn(x));
    o[1] = __half_as_ushort(__float2half_rz(x));
    o[2] = __half_as_ushort(__float2half_rd(x));
    o[3] = __half_as_ushort(__float2half_ru(x));
    o[4] = __bfloat16_as_ushort(__float2bfloat16(x));      // rn
    o[5] = __bfloat16_as_ushort(__float2bfloat16_rz(x));
    o[6] = __half_as_ushort(__double2half(d[i]));          // cvt.rn.f16.f64
    o[7] = __bfloat16_as_ushort(__double2bfloat16(d[i]));  // f64 -> bf16
    float* b = back + (size_t)i * 4;
    b[0] = __half2float(__float2half_rn(x));
    b[1] = __bfloat162float(__float2bfloat16(x));
    b[2] = __double2float_rn(d[i]);
    b[3] = __double2float_rz(d[i]);
}

// Saturating and ftz variants and f32 special functions with explicit approx intrinsics.
extern "C" __global__ void float_misc(const float* f, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    float* o = out + (size_t)i * 8;
    o[0] = __saturatef(x);           // cvt.sat / min-max with .sat
    o[1] = __fdividef(x, 3.0f);      // div.approx
    o[2] = __fsqrt_rn(fabsf(x));     // sqrt.rn.f32
    o[3] = __frcp_rn(x + 1000.f);    // rcp.rn.f32
    o[4] = __fadd_rz(x, 0.1f);       // add.rz.f32
    o[5] = __fmul_ru(x, 1.1f);       // mul.rp.f32
    o[6] = __fmaf_rd(x, x, -0.3f);   // fma.rm.f32
    o[7] = copysignf(fabsf(x) * 2.f, -x);
}

// f32 additions and subtractions in every rounding mode. Per element 8 outputs.
extern "C" __global__ void float_add_rounding(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = a[i], y = b[i];
    float* o = out + (size_t)i * 8;
    o[0] = __fadd_rn(x, y);
    o[1] = __fadd_rz(x, y);
    o[2] = __fadd_rd(x, y);
    o[3] = __fadd_ru(x, y);
    o[4] = __fsub_rn(x, y);
    o[5] = __fsub_rz(x, y);
    o[6] = __fsub_rd(x, y);
    o[7] = __fsub_ru(x, y);
}
