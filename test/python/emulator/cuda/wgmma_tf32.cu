// Hopper warpgroup MMA with tf32 inputs (wgmma.mma_async ... .m64nNk8.f32.tf32.tf32, sm_90a)
// through inline PTX: one warpgroup per CTA computes a 64-row slice of C = A @ B (+ Cin), A: M x K
// row-major f32, B: K x N row-major f32, Cin/C: M x N row-major f32. The f32 words are handed to
// the tensor cores as they are: the hardware reads them as tf32, ignoring the low 13 mantissa
// bits. A and B are staged in shared memory K-major (the only layout the PTX ISA allows for
// .tf32: the instruction has no imm-trans operands) in the canonical layouts of the PTX ISA
// "Shared Memory Matrix Layout" for 32-bit elements (core matrices of 8 rows x 16 bytes = 4 k; no
// swizzle or 32/64/128-byte swizzle) and read through matrix descriptors; some kernels take A from
// registers instead. K is a multiple of 32: 32 k per stage, four k8 wgmmas per stage.
// Compiled for another target than sm_90a, the kernels only trap.
#include <stdint.h>

// ---------------------------------------------------------------- wgmma wrappers
// wgmma_ss_nN: A and B from descriptors; wgmma_rs_nN: A from four .b32 registers (tf32 bits).
// sd: scale-d (0: D = A*B, the accumulators' old values are ignored). SA/SB: imm-scale-a/b.

#define WG_REGS4 "%0, %1, %2, %3"
#define WG_REGS32                                                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "        \
    "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_REGS64                                                                              \
    WG_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "  \
    "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_ACC4(o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3])
#define WG_ACC16(o) WG_ACC4(o), WG_ACC4(o + 4), WG_ACC4(o + 8), WG_ACC4(o + 12)
#define WG_ACC32(o) WG_ACC16(o), WG_ACC16(o + 16)
#define WG_ACC64(o) WG_ACC32(o), WG_ACC32(o + 32)

// NAME(d, ...) runs wgmma.mma_async.sync.aligned.SHAPE on the accumulators REGS / ACCS; the
// operand numbers after them are spelled out (a or {a regs}, b; scale-d; the two scales).
#define WGMMA_SS(NAME, SHAPE, REGS, ACCS, A, B, SD, IMMS)                                      \
    template <int SA, int SB>                                                                 \
    __device__ __forceinline__ void NAME(float* d, uint64_t a, uint64_t b, int sd) {          \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned." SHAPE " {" REGS "}, " A ", " B ", p, "   \
                     IMMS ";\n}\n"                                                             \
                     : ACCS                                                                    \
                     : "l"(a), "l"(b), "r"(sd), "n"(SA), "n"(SB));                              \
    }
#define WGMMA_RS(NAME, SHAPE, REGS, ACCS, A, B, SD, IMMS)                                      \
    template <int SA, int SB>                                                                 \
    __device__ __forceinline__ void NAME(float* d, const uint32_t* a, uint64_t b, int sd) {  \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                          \
                     "wgmma.mma_async.sync.aligned." SHAPE " {" REGS "}, " A ", " B ", p, "   \
                     IMMS ";\n}\n"                                                             \
                     : ACCS                                                                    \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(sd), "n"(SA),   \
                       "n"(SB));                                                               \
    }

WGMMA_SS(wgmma_ss_n8, "m64n8k8.f32.tf32.tf32", WG_REGS4, WG_ACC4(0), "%4", "%5", "%6", "%7, %8")
WGMMA_SS(wgmma_ss_n64, "m64n64k8.f32.tf32.tf32", WG_REGS32, WG_ACC32(0), "%32", "%33", "%34",
         "%35, %36")
WGMMA_SS(wgmma_ss_n128, "m64n128k8.f32.tf32.tf32", WG_REGS64, WG_ACC64(0), "%64", "%65", "%66",
         "%67, %68")
WGMMA_RS(wgmma_rs_n8, "m64n8k8.f32.tf32.tf32", WG_REGS4, WG_ACC4(0), "{%4, %5, %6, %7}", "%8",
         "%9", "%10, %11")
WGMMA_RS(wgmma_rs_n64, "m64n64k8.f32.tf32.tf32", WG_REGS32, WG_ACC32(0), "{%32, %33, %34, %35}",
         "%36", "%37", "%38, %39")
WGMMA_RS(wgmma_rs_n128, "m64n128k8.f32.tf32.tf32", WG_REGS64, WG_ACC64(0),
         "{%64, %65, %66, %67}", "%68", "%69", "%70, %71")

// ---------------------------------------------------------------- shared-memory layout

__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int sw) {
    uint64_t mode = sw == 128 ? 1 : sw == 64 ? 2 : sw == 32 ? 3 : 0;
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (mode << 62);
}

// A K-major tile of EXT (m or n) rows x KT = 32 k of 4-byte elements; offsets in bytes from the
// (1024-byte aligned) tile start. SW == 0: core matrices of 8 rows x 16 bytes (4 k), the next 4 k
// at LBO, the next 8 rows at SBO (core matrices along K adjacent if CORES_K_FAST, else along MN).
// Swizzled: atoms of 8 rows x SW bytes (SW / 4 k) with 16-byte chunk c of row r stored at chunk
// c ^ ((r % 8) / (8 / chunks-per-row)) (the TMA pattern); the next 8 rows at SBO = 8 * SW, the
// atoms for the next SW / 4 k after all row groups.
template <int SW, int EXT, bool CORES_K_FAST>
struct KMajor {
    static constexpr int KT = 32;
    static constexpr uint32_t LBO = SW ? 16 : (CORES_K_FAST ? 128 : 128 * (EXT / 8));
    static constexpr uint32_t SBO = SW ? 8 * SW : (CORES_K_FAST ? 128 * (KT / 4) : 128);
    static constexpr uint32_t KATOM = 8 * SW * (EXT / 8);  // bytes of one atom column
    static constexpr uint32_t BYTES = EXT * KT * 4;
    __device__ static uint32_t offset(int mn, int k) {
        if constexpr (SW == 0) {
            return (mn / 8) * SBO + (k / 4) * LBO + (mn % 8) * 16 + (k % 4) * 4;
        } else {
            const int chunks = SW / 16, r = mn % 8;
            const int c = ((k * 4) % SW) / 16;
            const int cs = c ^ (r / (8 / chunks));
            return (k * 4 / SW) * KATOM + (mn / 8) * SBO + r * SW + cs * 16 + (k % 4) * 4;
        }
    }
    // descriptor start of the 8 k from k0 (a multiple of 8)
    __device__ static uint32_t start(int k0) {
        if constexpr (SW == 0) {
            return (k0 / 4) * LBO;
        } else {
            return (k0 * 4 / SW) * KATOM + (k0 * 4) % SW;
        }
    }
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// ---------------------------------------------------------------- the tile kernel

// AREGS: A from registers (fragment of mma.sync m16n8k8 .tf32: register i of a lane holds row
// g + 8 (i % 2), column q + 4 (i / 2) of the warp's 16 x 8 slice).
template <int N, int SW, bool AREGS, int SA, int SB>
__device__ void wgmma_tf32_tile(const float* A, const float* B, const float* Cin, float* C, int K,
                                int scale_d) {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __trap();  // wgmma needs sm_90a; other targets compile the kernels without it
#else
    using LA = KMajor<SW, 64, true>;
    using LB = KMajor<SW, N, false>;
    constexpr int A_BYTES = AREGS ? 0 : LA::BYTES;
    __shared__ __align__(1024) uint8_t smem[A_BYTES + LB::BYTES];
    uint8_t* sa = smem;
    uint8_t* sb = smem + A_BYTES;
    const int tid = threadIdx.x, nthr = blockDim.x;
    const int wrank = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m_cta = blockIdx.x * 64;
    const int row0 = m_cta + 16 * wrank;  // this warp's first row of C
    float d[N / 2];
    // accumulator fragment: element 4j+e of a lane is (row g + 8(e/2), column 8j + 2q + e%2)
    for (int j = 0; j < N / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
            d[4 * j + e] = Cin[(row0 + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2];
        }
    }
    for (int k0 = 0; k0 < K; k0 += LA::KT) {
        if (!AREGS) {
            for (int i = tid; i < 64 * LA::KT; i += nthr) {
                const int r = i / LA::KT, k = i % LA::KT;
                *(float*)(sa + LA::offset(r, k)) = A[(m_cta + r) * K + k0 + k];
            }
        }
        for (int i = tid; i < LB::KT * N; i += nthr) {
            const int k = i / N, n = i % N;
            *(float*)(sb + LB::offset(n, k)) = B[(k0 + k) * N + n];
        }
        uint32_t af[4][4];
        if (AREGS) {
            for (int s = 0; s < 4; ++s) {
                for (int i = 0; i < 4; ++i) {
                    const int row = row0 + g + 8 * (i % 2), col = k0 + 8 * s + q + 4 * (i / 2);
                    af[s][i] = __float_as_uint(A[row * K + col]);
                }
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        for (int s = 0; s < 4; ++s) {
            const int sd = (k0 == 0 && s == 0) ? scale_d : 1;
            const uint64_t db = make_desc(smem_addr(sb) + LB::start(8 * s), LB::LBO, LB::SBO, SW);
            const uint64_t da = make_desc(smem_addr(sa) + LA::start(8 * s), LA::LBO, LA::SBO, SW);
            if constexpr (AREGS) {
                if constexpr (N == 8) wgmma_rs_n8<SA, SB>(d, af[s], db, sd);
                if constexpr (N == 64) wgmma_rs_n64<SA, SB>(d, af[s], db, sd);
                if constexpr (N == 128) wgmma_rs_n128<SA, SB>(d, af[s], db, sd);
            } else {
                if constexpr (N == 8) wgmma_ss_n8<SA, SB>(d, da, db, sd);
                if constexpr (N == 64) wgmma_ss_n64<SA, SB>(d, da, db, sd);
                if constexpr (N == 128) wgmma_ss_n128<SA, SB>(d, da, db, sd);
            }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        __syncthreads();
    }
    for (int j = 0; j < N / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
            C[(row0 + g + 8 * (e / 2)) * N + 8 * j + 2 * q + e % 2] = d[4 * j + e];
        }
    }
#endif
}

// ---------------------------------------------------------------- kernels
// wgt_n<N>_<ss: A in shared memory | rs: A in registers>_sw<swizzle>[_neg<a|b>].
// All take (A, B, Cin, C, K, scale_d); grid.x = M / 64, block = 128.

#define WGT_KERNEL(NAME, ...)                                                                    \
    extern "C" __global__ void NAME(const float* A, const float* B, const float* Cin, float* C, \
                                    int K, int scale_d) {                                       \
        wgmma_tf32_tile<__VA_ARGS__>(A, B, Cin, C, K, scale_d);                                 \
    }

//                           N  SW  AREGS  SA  SB
WGT_KERNEL(wgt_n8_ss_sw0,     8,   0, false,  1,  1)
WGT_KERNEL(wgt_n8_ss_sw128,   8, 128, false,  1,  1)
WGT_KERNEL(wgt_n64_ss_sw0,   64,   0, false,  1,  1)
WGT_KERNEL(wgt_n64_ss_sw32,  64,  32, false,  1,  1)
WGT_KERNEL(wgt_n64_ss_sw64,  64,  64, false,  1,  1)
WGT_KERNEL(wgt_n64_ss_sw128, 64, 128, false,  1,  1)
WGT_KERNEL(wgt_n128_ss_sw0, 128,   0, false,  1,  1)
WGT_KERNEL(wgt_n128_ss_sw128, 128, 128, false, 1, 1)
WGT_KERNEL(wgt_n8_rs_sw128,   8, 128, true,   1,  1)
WGT_KERNEL(wgt_n64_rs_sw0,   64,   0, true,   1,  1)
WGT_KERNEL(wgt_n128_rs_sw128, 128, 128, true,  1,  1)
WGT_KERNEL(wgt_n64_ss_sw128_nega, 64, 128, false, -1, 1)
WGT_KERNEL(wgt_n64_rs_sw32_negb,  64,  32, true,   1, -1)
