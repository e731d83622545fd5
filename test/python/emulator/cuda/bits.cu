// Integer PTX instructions reached through inline asm: bfe/bfi, prmt with sign replication,
// slct, carry chains, mul24, mad.hi, bfind, shf clamp, cnot, signed/unsigned min/max.
#include <stdint.h>

extern "C" __global__ void bit_ops(const unsigned* a, const unsigned* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i], r;
    unsigned* o = out + (size_t)i * 16;
    unsigned pos = y & 0xff, len = (y >> 8) & 0xff;  // deliberately allows pos, len >= 32
    asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(pos), "r"(len));
    o[0] = r;
    asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(pos), "r"(len));
    o[1] = r;
    asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(y), "r"(x), "r"(pos), "r"(len));
    o[2] = r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(y >> 16));  // nibble msb: sign
    o[3] = r;
    asm("slct.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(x ^ y));
    o[4] = r;
    asm("mul24.lo.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    o[5] = r;
    asm("mul24.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    o[6] = r;
    asm("bfe.u32 %0, %1, 8, 12;" : "=r"(r) : "r"(x));  // immediate position and length
    o[7] = r;
    asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(y));
    o[8] = r;
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(x >> (y & 31)));
    o[9] = r;
    asm("bfind.s32 %0, %1;" : "=r"(r) : "r"(x));
    o[10] = r;
    asm("shf.r.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(y & 63));
    o[11] = r;
    asm("cnot.b32 %0, %1;" : "=r"(r) : "r"(x & y & 0x11));
    o[12] = r;
    asm("min.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    o[13] = r;
    asm("max.s32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y));
    o[14] = r;
    asm("shf.l.clamp.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(x & 63));
    o[15] = r;
}

// 96-bit add and subtract with carry chains: add.cc / addc.cc / addc and sub.cc / subc.cc / subc.
extern "C" __global__ void carry_chain(const unsigned* a, const unsigned* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned* x = a + 3 * i;
    const unsigned* y = b + 3 * i;
    unsigned s0, s1, s2, d0, d1, d2;
    asm("add.cc.u32 %0, %3, %6;\n\taddc.cc.u32 %1, %4, %7;\n\taddc.u32 %2, %5, %8;"
        : "=r"(s0), "=r"(s1), "=r"(s2)
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(y[0]), "r"(y[1]), "r"(y[2]));
    asm("sub.cc.u32 %0, %3, %6;\n\tsubc.cc.u32 %1, %4, %7;\n\tsubc.u32 %2, %5, %8;"
        : "=r"(d0), "=r"(d1), "=r"(d2)
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(y[0]), "r"(y[1]), "r"(y[2]));
    unsigned* o = out + 6 * i;
    o[0] = s0; o[1] = s1; o[2] = s2; o[3] = d0; o[4] = d1; o[5] = d2;
}
