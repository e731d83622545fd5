// 64-bit bit-field insertion (bfi.b64) through inline asm.

extern "C" __global__ void bfi64(const unsigned long long* a, const unsigned long long* b,
                                 unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = a[i], y = b[i], r;
    unsigned pos = (unsigned)(y & 0x7f), len = (unsigned)((y >> 8) & 0x7f);
    asm("bfi.b64 %0, %1, %2, %3, %4;" : "=l"(r) : "l"(y), "l"(x), "r"(pos), "r"(len));
    out[i] = r;
}
