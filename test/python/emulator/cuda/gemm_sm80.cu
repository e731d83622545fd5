// An sm_80-style GEMM, the shape of code a tile compiler emits: 64x64x32 CTA tiles, 4 warps
// (2x2, 32x32 each), two-stage cp.async pipeline into padded shared memory, ldmatrix (x4 for A,
// x2.trans for row-major B) and mma.sync m16n8k16 f16 -> f32.
// C (M x N, f32) = A (M x K, f16 row-major) @ B (K x N, f16 row-major); M, N % 64 == 0, K % 32 == 0.
#include <cuda_fp16.h>
#include <stdint.h>

#define BM 64
#define BN 64
#define BK 32
#define APAD 40  // halves per A row in smem (32 + 8): 80-byte rows, 16-byte aligned
#define BPAD 72  // halves per B row in smem (64 + 8)

__device__ __forceinline__ void cp16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

__device__ __forceinline__ void load_tiles(uint16_t (*As)[APAD], uint16_t (*Bs)[BPAD], const uint16_t* A,
                                           const uint16_t* B, int K, int N, int m0, int n0, int k0) {
    int t = threadIdx.x;
    for (int c = t; c < BM * BK / 8; c += 128) {  // A: 64 rows x 4 chunks of 8 halves
        int r = c / 4, q = c % 4;
        cp16(&As[r][q * 8], A + (size_t)(m0 + r) * K + k0 + q * 8);
    }
    for (int c = t; c < BK * BN / 8; c += 128) {  // B: 32 rows x 8 chunks
        int r = c / 8, q = c % 8;
        cp16(&Bs[r][q * 8], B + (size_t)(k0 + r) * N + n0 + q * 8);
    }
}

extern "C" __global__ void __launch_bounds__(128) gemm_f16_sm80(const uint16_t* A, const uint16_t* B, float* C,
                                                                int M, int N, int K) {
    __shared__ __align__(16) uint16_t As[2][BM][APAD];
    __shared__ __align__(16) uint16_t Bs[2][BK][BPAD];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int wm = warp / 2, wn = warp % 2;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[2][4][4];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j)
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    int ktiles = K / BK;
    load_tiles(As[0], Bs[0], A, B, K, N, m0, n0, 0);
    asm volatile("cp.async.commit_group;\n" ::);
    for (int kt = 0; kt < ktiles; ++kt) {
        int st = kt & 1;
        if (kt + 1 < ktiles) load_tiles(As[st ^ 1], Bs[st ^ 1], A, B, K, N, m0, n0, (kt + 1) * BK);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[2][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                unsigned addr = (unsigned)__cvta_generic_to_shared(
                    &As[st][wm * 32 + mt * 16 + (lane % 16)][kk + (lane / 16) * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(a[mt][0]), "=r"(a[mt][1]), "=r"(a[mt][2]), "=r"(a[mt][3])
                             : "r"(addr));
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                unsigned addr = (unsigned)__cvta_generic_to_shared(&Bs[st][kk + (lane % 16)][wn * 32 + nt * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                             : "=r"(b[nt][0]), "=r"(b[nt][1])
                             : "r"(addr));
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
                    asm volatile(
                        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                        : "+f"(acc[mt][nt][0]), "+f"(acc[mt][nt][1]), "+f"(acc[mt][nt][2]), "+f"(acc[mt][nt][3])
                        : "r"(a[mt][0]), "r"(a[mt][1]), "r"(a[mt][2]), "r"(a[mt][3]), "r"(b[nt][0]),
                          "r"(b[nt][1]));
        }
        __syncthreads();
    }
    int g = lane / 4, t4 = lane % 4;
    for (int mt = 0; mt < 2; ++mt)
        for (int nt = 0; nt < 4; ++nt) {
            int r = m0 + wm * 32 + mt * 16 + g, c = n0 + wn * 32 + nt * 8 + 2 * t4;
            *reinterpret_cast<float2*>(&C[(size_t)r * N + c]) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<float2*>(&C[(size_t)(r + 8) * N + c]) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
        }
}
