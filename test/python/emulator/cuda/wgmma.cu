// Hopper warpgroup MMA (wgmma.mma_async, sm_90a) through inline PTX: one warpgroup (or two) per
// CTA computes a 64-row (128-row) slice of C = A @ B (+ Cin), A: M x K row-major, B: K x N
// row-major, Cin/C: M x N row-major. Operands are staged in shared memory in the canonical
// wgmma layouts (PTX ISA "Shared Memory Matrix Layout": no swizzle, or 32/64/128-byte swizzle;
// K-major, or MN-major with imm-trans = 1) and read through matrix descriptors; three kernels take
// A from registers. K is a multiple of 64: 64 k per stage, four k16 wgmmas per stage.
// Compiled for another target than sm_90a, the kernels only trap.
//
// The swizzled layouts are written here in the TMA form (16-byte chunk c of row r of an atom
// is stored at chunk c ^ ((r % 8) / (8 / chunks-per-row))) relative to the tile start; the
// descriptor's base offset is (tile address >> 7) & 7, as the ISA prescribes for a pattern
// that does not start on a multiple of 8 rows x swizzle bytes.
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

// ---------------------------------------------------------------- wgmma wrappers
// wgmma_ss_*: A and B from descriptors; wgmma_rs_*: A from four .b32 registers (f16x2/bf16x2).
// sd: scale-d (0: D = A*B, the accumulators' old values are ignored). SA/SB: imm-scale-a/b
// (1 or -1), TA/TB: imm-trans-a/b (0: K-major, 1: MN-major).

// The accumulator operands "%0, ..., %(n-1)" and their constraints C(d[0]), ..., C(d[n-1]).
#define WG_REGS4 "%0, %1, %2, %3"
#define WG_REGS16                                                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WG_REGS32                                                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "        \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_REGS128                                                                             \
    WG_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "  \
    "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "    \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "    \
    "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "    \
    "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "       \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "     \
    "%126, %127"
#define WG_ACC4(C, o) C(d[o]), C(d[o + 1]), C(d[o + 2]), C(d[o + 3])
#define WG_ACC16(C, o) WG_ACC4(C, o), WG_ACC4(C, o + 4), WG_ACC4(C, o + 8), WG_ACC4(C, o + 12)
#define WG_ACC32(C, o) WG_ACC16(C, o), WG_ACC16(C, o + 16)
#define WG_ACC128(C, o) WG_ACC32(C, o), WG_ACC32(C, o + 32), WG_ACC32(C, o + 64), WG_ACC32(C, o + 96)

// One wrapper: NAME(D* d, ...) runs wgmma.mma_async.sync.aligned.SHAPE on the accumulators
// REGS / ACCS; the operand numbers after them are spelled out (a, b or {a regs}, b; scale-d;
// the immediates).
#define WGMMA_SS(NAME, SHAPE, D, REGS, ACCS, A, B, SD, IMMS)                                  \
    template <int SA, int SB, int TA, int TB>                                                 \
    __device__ __forceinline__ void NAME(D* d, uint64_t a, uint64_t b, int sd) {              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned." SHAPE " {" REGS "}, " A ", " B ", p, "   \
                     IMMS ";\n}\n"                                                             \
                     : ACCS                                                                    \
                     : "l"(a), "l"(b), "r"(sd), "n"(SA), "n"(SB), "n"(TA), "n"(TB));            \
    }
#define WGMMA_RS(NAME, SHAPE, REGS, ACCS, A, B, SD, IMMS)                                      \
    template <int SA, int SB, int TB>                                                         \
    __device__ __forceinline__ void NAME(float* d, const uint32_t* a, uint64_t b, int sd) {  \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned." SHAPE " {" REGS "}, " A ", " B ", p, "   \
                     IMMS ";\n}\n"                                                             \
                     : ACCS                                                                    \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(sd), "n"(SA),   \
                       "n"(SB), "n"(TB));                                                      \
    }

WGMMA_SS(wgmma_ss_n8_f32_f16, "m64n8k16.f32.f16.f16", float, WG_REGS4, WG_ACC4("+f", 0),
         "%4", "%5", "%6", "%7, %8, %9, %10")
WGMMA_SS(wgmma_ss_n64_f32_f16, "m64n64k16.f32.f16.f16", float, WG_REGS32, WG_ACC32("+f", 0),
         "%32", "%33", "%34", "%35, %36, %37, %38")
WGMMA_SS(wgmma_ss_n64_f32_bf16, "m64n64k16.f32.bf16.bf16", float, WG_REGS32, WG_ACC32("+f", 0),
         "%32", "%33", "%34", "%35, %36, %37, %38")
WGMMA_SS(wgmma_ss_n256_f32_f16, "m64n256k16.f32.f16.f16", float, WG_REGS128,
         WG_ACC128("+f", 0), "%128", "%129", "%130", "%131, %132, %133, %134")
WGMMA_SS(wgmma_ss_n256_f32_bf16, "m64n256k16.f32.bf16.bf16", float, WG_REGS128,
         WG_ACC128("+f", 0), "%128", "%129", "%130", "%131, %132, %133, %134")
WGMMA_SS(wgmma_ss_n64_f16_f16, "m64n64k16.f16.f16.f16", uint32_t, WG_REGS16, WG_ACC16("+r", 0),
         "%16", "%17", "%18", "%19, %20, %21, %22")
WGMMA_RS(wgmma_rs_n64_f32_f16, "m64n64k16.f32.f16.f16", WG_REGS32, WG_ACC32("+f", 0),
         "{%32, %33, %34, %35}", "%36", "%37", "%38, %39, %40")
WGMMA_RS(wgmma_rs_n64_f32_bf16, "m64n64k16.f32.bf16.bf16", WG_REGS32, WG_ACC32("+f", 0),
         "{%32, %33, %34, %35}", "%36", "%37", "%38, %39, %40")
WGMMA_RS(wgmma_rs_n256_f32_bf16, "m64n256k16.f32.bf16.bf16", WG_REGS128, WG_ACC128("+f", 0),
         "{%128, %129, %130, %131}", "%132", "%133", "%134, %135, %136")

// ---------------------------------------------------------------- shared-memory layouts

__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int sw,
                                              uint32_t base_offset) {
    uint64_t mode = sw == 128 ? 1 : sw == 64 ? 2 : sw == 32 ? 3 : 0;
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | ((uint64_t)(base_offset & 7) << 49) |
           (mode << 62);
}

// A tile of EXT (m or n) x 64 (k) 16-bit elements; offsets in bytes from the tile start.
// K-major: rows of k. SW == 0: 8 x 16-byte core matrices, next 8 k at LBO, next 8 rows at SBO.
// Swizzled: atoms of 8 rows x SW bytes; atoms for the next SW/2 k after all row groups.
template <int SW, int EXT, bool CORES_K_FAST>
struct KMajor {
    static constexpr uint32_t LBO = SW ? 16 : (CORES_K_FAST ? 128 : 128 * (EXT / 8));
    static constexpr uint32_t SBO = SW ? 8 * SW : (CORES_K_FAST ? 128 * 8 : 128);
    static constexpr uint32_t KATOM = 8 * SW * (EXT / 8);  // bytes of one atom column (SW / 2 k)
    __device__ static uint32_t offset(int mn, int k) {
        if constexpr (SW == 0) {
            return (mn / 8) * SBO + (k / 8) * LBO + (mn % 8) * 16 + (k % 8) * 2;
        } else {
            const int chunks = SW / 16, r = mn % 8;
            const int c = ((k * 2) % SW) / 16;
            const int cs = c ^ (r / (8 / chunks));
            return (k * 2 / SW) * KATOM + (mn / 8) * SBO + r * SW + cs * 16 + (k % 8) * 2;
        }
    }
    // descriptor start of the 16 k from k0 (a multiple of 16)
    __device__ static uint32_t start(int k0) {
        if constexpr (SW == 0) {
            return (k0 / 8) * LBO;
        } else {
            return (k0 * 2 / SW) * KATOM + (k0 * 2) % SW;
        }
    }
};

// MN-major: rows of m or n. SW == 0: 8 x 16-byte core matrices (8 k rows of 8 mn), next 8 mn at
// SBO, next 8 k at LBO. Swizzled: atoms of 8 k rows x SW bytes of mn; next SW/2 mn at LBO,
// next 8 k at SBO.
template <int SW, int EXT>
struct MNMajor {
    static constexpr int W = SW ? SW / 2 : 8;  // mn elements per atom row
    static constexpr uint32_t LBO = SW ? 8 * SW : 128 * (EXT / 8);
    static constexpr uint32_t SBO = SW ? 8 * SW * (EXT / W) : 128;
    __device__ static uint32_t offset(int mn, int k) {
        if constexpr (SW == 0) {
            return (mn / 8) * SBO + (k / 8) * LBO + (k % 8) * 16 + (mn % 8) * 2;
        } else {
            const int chunks = SW / 16, r = k % 8;
            const int c = (mn % W) / 8;
            const int cs = c ^ (r / (8 / chunks));
            return (k / 8) * SBO + (mn / W) * LBO + r * SW + cs * 16 + (mn % 8) * 2;
        }
    }
    __device__ static uint32_t start(int k0) { return (k0 / 8) * (SW ? SBO : LBO); }
};

template <int SW, int EXT, bool MN, bool CORES_K_FAST>
using Layout = typename std::conditional<MN, MNMajor<SW, EXT>, KMajor<SW, EXT, CORES_K_FAST>>::type;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// ---------------------------------------------------------------- the tile kernel

// ATYPE 0: f16, 1: bf16. ACC16: f16 accumulators (f16 inputs only). AREGS: A from registers.
// WG: warpgroups per CTA (64 rows each). SHIFT: bytes between a 1024-byte boundary and the
// A tile, B is 128 bytes further still (non-zero, different base offsets in the descriptors).
template <int N, int ATYPE, int SW, bool A_MN, bool B_MN, bool AREGS, int SA, int SB, bool ACC16,
          int WG, int SHIFT>
__device__ void wgmma_tile(const uint16_t* A, const uint16_t* B, const float* Cin, void* Cout,
                           int K, int scale_d) {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // wgmma needs sm_90a; other targets compile the kernels without it
#else
    using LA = Layout<SW, 64, A_MN, true>;
    using LB = Layout<SW, N, B_MN, false>;
    constexpr int A_BYTES = 64 * 64 * 2, B_BYTES = 64 * N * 2;
    // with SHIFT, B starts 128 bytes further than A (relative to 1024): different base offsets
    constexpr int B_SHIFT = SHIFT ? 128 : 0;
    __shared__ __align__(1024) uint8_t smem[SHIFT + (AREGS ? 0 : WG * A_BYTES) + B_SHIFT + B_BYTES];
    uint8_t* sa = smem + SHIFT;
    uint8_t* sb = sa + (AREGS ? 0 : WG * A_BYTES) + B_SHIFT;
    const int tid = threadIdx.x, nthr = blockDim.x;
    const int wg = tid / 128, wrank = (tid % 128) / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m_cta = blockIdx.x * 64 * WG;
    const int row0 = m_cta + wg * 64 + 16 * wrank;  // this warp's first row of C
    constexpr int NACC = ACC16 ? N / 4 : N / 2;
    float d[ACC16 ? 1 : N / 2];
    uint32_t dh[ACC16 ? N / 4 : 1];
    // accumulator fragment: element 4j+e of a lane is (row g + 8(e/2), column 8j + 2q + e%2)
    for (int j = 0; j < N / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
            const float c = Cin[(row0 + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2];
            if (ACC16) {
                const uint32_t h = __half_as_ushort(__float2half_rn(c));
                uint32_t& w = dh[(4 * j + e) / 2];
                w = (e % 2) ? (w | (h << 16)) : h;
            } else {
                d[4 * j + e] = c;
            }
        }
    }
    (void)NACC;
    for (int k0 = 0; k0 < K; k0 += 64) {
        if (!AREGS) {
            for (int i = tid; i < WG * 64 * 64; i += nthr) {
                const int r = i / 64, k = i % 64;
                *(uint16_t*)(sa + (r / 64) * A_BYTES + LA::offset(r % 64, k)) =
                    A[(m_cta + r) * K + k0 + k];
            }
        }
        for (int i = tid; i < 64 * N; i += nthr) {
            const int k = i / N, n = i % N;
            *(uint16_t*)(sb + LB::offset(n, k)) = B[(k0 + k) * N + n];
        }
        // A fragments in registers: a[2i], a[2i+1] of register i at rows g (+8 for i odd),
        // columns 2q, 2q+1 (+8 for i >= 2), as for mma.sync m16n8k16.
        uint32_t af[4][4];
        if (AREGS) {
            for (int s = 0; s < 4; ++s) {
                for (int i = 0; i < 4; ++i) {
                    const int row = row0 + g + 8 * (i % 2), col = k0 + 16 * s + 2 * q + 8 * (i / 2);
                    af[s][i] = A[row * K + col] | ((uint32_t)A[row * K + col + 1] << 16);
                }
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const uint8_t* ta = sa + wg * A_BYTES;
        const uint32_t base_a = (smem_addr(ta) >> 7) & 7, base_b = (smem_addr(sb) >> 7) & 7;
        for (int s = 0; s < 4; ++s) {
            const int sd = (k0 == 0 && s == 0) ? scale_d : 1;
            const uint64_t db =
                make_desc(smem_addr(sb) + LB::start(16 * s), LB::LBO, LB::SBO, SW, base_b);
            const uint64_t da =
                make_desc(smem_addr(ta) + LA::start(16 * s), LA::LBO, LA::SBO, SW, base_a);
            constexpr int TA = A_MN ? 1 : 0, TB = B_MN ? 1 : 0;
            if constexpr (AREGS) {
                if constexpr (N == 64 && ATYPE == 0) wgmma_rs_n64_f32_f16<SA, SB, TB>(d, af[s], db, sd);
                if constexpr (N == 64 && ATYPE == 1) wgmma_rs_n64_f32_bf16<SA, SB, TB>(d, af[s], db, sd);
                if constexpr (N == 256 && ATYPE == 1) wgmma_rs_n256_f32_bf16<SA, SB, TB>(d, af[s], db, sd);
            } else if constexpr (ACC16) {
                wgmma_ss_n64_f16_f16<SA, SB, TA, TB>(dh, da, db, sd);
            } else {
                if constexpr (N == 8) wgmma_ss_n8_f32_f16<SA, SB, TA, TB>(d, da, db, sd);
                if constexpr (N == 64 && ATYPE == 0) wgmma_ss_n64_f32_f16<SA, SB, TA, TB>(d, da, db, sd);
                if constexpr (N == 64 && ATYPE == 1) wgmma_ss_n64_f32_bf16<SA, SB, TA, TB>(d, da, db, sd);
                if constexpr (N == 256 && ATYPE == 0) wgmma_ss_n256_f32_f16<SA, SB, TA, TB>(d, da, db, sd);
                if constexpr (N == 256 && ATYPE == 1) wgmma_ss_n256_f32_bf16<SA, SB, TA, TB>(d, da, db, sd);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        __syncthreads();
    }
    for (int j = 0; j < N / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
            const int at = (row0 + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2;
            if (ACC16) {
                const uint32_t w = dh[(4 * j + e) / 2];
                ((uint16_t*)Cout)[at] = (e % 2) ? (uint16_t)(w >> 16) : (uint16_t)(w & 0xFFFF);
            } else {
                ((float*)Cout)[at] = d[4 * j + e];
            }
        }
    }
#endif
}

// ---------------------------------------------------------------- kernels
// wg_<type>_n<N>_<A major><B major>_sw<swizzle>[_variant]: k = K-major, m/n = MN-major.
// All take (A, B, Cin, C, K, scale_d); grid.x = M / (64 * warpgroups), block = 128 * warpgroups.

#define WG_KERNEL(NAME, ...)                                                                     \
    extern "C" __global__ void NAME(const uint16_t* A, const uint16_t* B, const float* Cin,     \
                                    void* C, int K, int scale_d) {                              \
        wgmma_tile<__VA_ARGS__>(A, B, Cin, C, K, scale_d);                                      \
    }

//                              N  type SW  A_MN   B_MN   AREGS  SA  SB  ACC16  WG SHIFT
WG_KERNEL(wg_f16_n64_kk_sw0,    64, 0,   0, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kk_sw32,   64, 0,  32, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kk_sw64,   64, 0,  64, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kk_sw128,  64, 0, 128, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kn_sw0,    64, 0,   0, false, true,  false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kn_sw32,   64, 0,  32, false, true,  false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kn_sw64,   64, 0,  64, false, true,  false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kn_sw128,  64, 0, 128, false, true,  false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_mk_sw0,    64, 0,   0, true,  false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_mk_sw128,  64, 0, 128, true,  false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_bf16_n64_mn_sw64,  64, 1,  64, true,  true,  false, 1,  1, false, 1, 0)
WG_KERNEL(wg_bf16_n64_kk_sw128, 64, 1, 128, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n8_kk_sw32,     8, 0,  32, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n256_kk_sw64, 256, 0,  64, false, false, false, 1,  1, false, 1, 0)
WG_KERNEL(wg_bf16_n256_kn_sw128, 256, 1, 128, false, true, false, 1, 1, false, 1, 0)
WG_KERNEL(wg_f16_n64_rk_sw64,   64, 0,  64, false, false, true,  1,  1, false, 1, 0)
WG_KERNEL(wg_bf16_n256_rn_sw32, 256, 1, 32, false, true,  true,  1,  1, false, 1, 0)
WG_KERNEL(wg_f16_n64_kk_sw128_nega,  64, 0, 128, false, false, false, -1, 1, false, 1, 0)
WG_KERNEL(wg_bf16_n64_rk_sw128_negab, 64, 1, 128, false, false, true, -1, -1, false, 1, 0)
WG_KERNEL(wg_bf16_n64_kn_sw0_negb,   64, 1,   0, false, true,  false, 1, -1, false, 1, 0)
WG_KERNEL(wg_f16acc_n64_kk_sw128,    64, 0, 128, false, false, false, 1,  1, true,  1, 0)
WG_KERNEL(wg_f16_n64_kk_sw128_wg2,   64, 0, 128, false, false, false, 1,  1, false, 2, 0)
WG_KERNEL(wg_bf16_n64_kn_sw32_wg2,   64, 1,  32, false, true,  false, 1,  1, false, 2, 0)
WG_KERNEL(wg_f16_n64_kk_sw128_shift, 64, 0, 128, false, false, false, 1,  1, false, 1, 256)
WG_KERNEL(wg_f16_n64_kn_sw64_shift,  64, 0,  64, false, true,  false, 1,  1, false, 1, 384)
