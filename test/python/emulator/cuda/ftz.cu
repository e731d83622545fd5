// Compiled with --use_fast_math in the test: .ftz arithmetic flushes subnormal inputs and results.
extern "C" __global__ void ftz_probe(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = x[i], b = y[i];
    out[4 * i] = a + b;
    out[4 * i + 1] = a * b;
    out[4 * i + 2] = fmaxf(a, b);
    out[4 * i + 3] = a * 0.5f;
}
