// f64 arithmetic and CUDA math-library expansions.

// f64: correctly rounded add/sub/mul/div/sqrt/fma, min/max/abs/neg, comparisons.
extern "C" __global__ void f64_math(const double* a, const double* b, const double* c, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i], z = c[i];
    double* o = out + (size_t)i * 10;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = __dmul_rn(x, y);
    o[3] = x / y;            // div.rn.f64
    o[4] = sqrt(fabs(x));    // sqrt.rn.f64
    o[5] = fma(x, y, z);     // fma.rn.f64
    o[6] = fmin(x, y);
    o[7] = fmax(x, z);
    o[8] = -fabs(z);
    o[9] = (x < y) ? 1.0 : ((x == y) ? 0.5 : 0.0);
}

// f64 transcendental through the CUDA math library (long instruction sequences).
extern "C" __global__ void f64_libm(const double* a, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i];
    out[i * 3 + 0] = exp(x);
    out[i * 3 + 1] = log(fabs(x) + 1.0);
    out[i * 3 + 2] = 1.0 / sqrt(fabs(x) + 0.25);  // rsqrt expansion / rcp.rn.f64
}

