// 64-bit bit-field extraction (bfe .u64/.s64) and mad.wide.u32 through inline asm.

// 64-bit bit fields and 64x64 -> 128 multiply through mul.lo/mul.hi.u64 and mad.wide.u32.
extern "C" __global__ void bits64(const unsigned long long* a, const unsigned long long* b,
                                  unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = a[i], y = b[i], r;
    unsigned pos = (unsigned)(y & 0x7f), len = (unsigned)((y >> 8) & 0x7f);
    unsigned long long* o = out + (size_t)i * 4;
    asm("bfe.u64 %0, %1, %2, %3;" : "=l"(r) : "l"(x), "r"(pos), "r"(len));
    o[0] = r;
    asm("bfe.s64 %0, %1, %2, %3;" : "=l"(r) : "l"(x), "r"(pos), "r"(len));
    o[1] = r;
    o[2] = 0;  // bfi.b64: see bfi64.cu
    asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(r) : "r"((unsigned)x), "r"((unsigned)(x >> 32)), "l"(y));
    o[3] = r;
}
