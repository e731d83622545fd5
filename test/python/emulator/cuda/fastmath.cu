// f32 approximate special functions (.approx) and testp / classification.
#include <math.h>

// Per element 9 outputs of the approximate instructions the CUDA fast-math intrinsics map to.
extern "C" __global__ void approx_ops(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], r;
    float* o = out + (size_t)i * 9;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[0] = r;
    asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(fabsf(v)));
    o[1] = r;
    asm("rsqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(fabsf(v)));
    o[2] = r;
    asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[3] = r;
    asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(fabsf(v)));
    o[4] = r;
    asm("sin.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[5] = r;
    asm("cos.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[6] = r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    o[7] = r;
    asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(v), "f"(3.0f));
    o[8] = r;
}

// NaN / Inf / subnormal handling: classification and IEEE min/max/comparisons.
extern "C" __global__ void classify(const float* x, const float* y, int* cls, float* mm, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], w = y[i];
    int c = 0;
    c |= isnan(v) ? 1 : 0;
    c |= isinf(v) ? 2 : 0;
    c |= isfinite(v) ? 4 : 0;
    c |= signbit(v) ? 8 : 0;
    c |= (v < w) ? 16 : 0;
    c |= (v != w) ? 32 : 0;   // unordered-or-not-equal: true with NaNs
    c |= !(v >= w) ? 64 : 0;  // setp.ltu
    c |= (v != 0.f && fabsf(v) < 1.17549435e-38f) ? 128 : 0;  // subnormal
    unsigned p;
    asm("{ .reg .pred q; testp.normal.f32 q, %1; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "f"(v));
    c |= p << 8;
    asm("{ .reg .pred q; testp.subnormal.f32 q, %1; selp.u32 %0, 1, 0, q; }" : "=r"(p) : "f"(v));
    c |= p << 9;
    cls[i] = c;
    mm[2 * i] = fminf(v, w);  // IEEE minNum: NaN loses
    mm[2 * i + 1] = fmaxf(v, w);
}
