// Integer bit tricks, shifts, division and remainder (32- and 64-bit).

// Integer ops. Per element 20 outputs (unsigned 32-bit view).
extern "C" __global__ void int_ops(const int* a, const int* b, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i], y = b[i];
    unsigned ux = (unsigned)x, uy = (unsigned)y;
    unsigned* o = out + (size_t)i * 20;
    o[0] = __popc(ux);
    o[1] = __clz(x);
    o[2] = __brev(ux);
    o[3] = __byte_perm(ux, uy, 0x5140);
    o[4] = __byte_perm(ux, uy, (unsigned)(y & 0x7777));
    o[5] = (unsigned)(x >> (y & 31));          // shr.s32 (arithmetic)
    o[6] = ux >> (uy & 31);                     // shr.u32
    o[7] = ux << (uy & 31);                     // shl.b32
    o[8] = y != 0 ? (unsigned)(x / y) : 0u;     // div.s32
    o[9] = y != 0 ? (unsigned)(x % y) : 0u;     // rem.s32
    o[10] = uy != 0 ? ux / uy : 0u;             // div.u32
    o[11] = uy != 0 ? ux % uy : 0u;             // rem.u32
    o[12] = (unsigned)__mulhi(x, y);            // mul.hi.s32
    o[13] = __umulhi(ux, uy);                   // mul.hi.u32
    o[14] = (unsigned)__ffs(x);                 // bfind / brev + clz
    o[15] = __funnelshift_l(ux, uy, 7);         // shf.l
    o[16] = (unsigned)min(x, y) ^ (unsigned)max(x, y);
    o[17] = (unsigned)abs(x);
    o[18] = __sad(x, y, 3u);
    o[19] = (ux >> 5) & 0x3ff;                  // bfe candidate
}

// 64-bit integer ops. Per element 8 outputs.
extern "C" __global__ void int64_ops(const long long* a, const long long* b, unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long x = a[i], y = b[i];
    unsigned long long ux = (unsigned long long)x, uy = (unsigned long long)y;
    unsigned long long* o = out + (size_t)i * 8;
    o[0] = (unsigned long long)__popcll(ux);
    o[1] = (unsigned long long)__clzll(x);
    o[2] = __brevll(ux);
    o[3] = y != 0 ? (unsigned long long)(x / y) : 0ull;
    o[4] = y != 0 ? (unsigned long long)(x % y) : 0ull;
    o[5] = uy != 0 ? ux / uy : 0ull;
    o[6] = (unsigned long long)(x * y);
    o[7] = __umul64hi(ux, uy);
}


// 128-bit division and remainder, which nvcc inlines as carry chains (sub.cc/subc) whose
// carry flag it reads with addc: a and b are pairs of 64-bit words, low first. Per element 4
// outputs of two words: unsigned quotient and remainder, signed quotient and remainder.
extern "C" __global__ void int128_div(const unsigned long long* a, const unsigned long long* b,
                                      unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned __int128 x = ((unsigned __int128)a[2 * i + 1] << 64) | a[2 * i];
    unsigned __int128 y = ((unsigned __int128)b[2 * i + 1] << 64) | b[2 * i];
    __int128 sx = (__int128)x, sy = (__int128)y;
    unsigned __int128 r[4] = {x / y, x % y, (unsigned __int128)(sx / sy),
                              (unsigned __int128)(sx % sy)};
    for (int j = 0; j < 4; ++j) {
        out[(size_t)i * 8 + 2 * j] = (unsigned long long)r[j];
        out[(size_t)i * 8 + 2 * j + 1] = (unsigned long long)(r[j] >> 64);
    }
}
