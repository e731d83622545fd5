// ldmatrix fragment layouts probed directly, and mma.sync m16n8k8 with bf16 inputs.
#include <cuda_bf16.h>
#include <stdint.h>

// One warp. smem holds 32 rows of 8 b16 elements (4 matrices of 8x8); lane l supplies the address
// of physical row perm[l], so matrix m row r is physical row perm[8m + r]. Per lane 11 registers:
// x1 (1), x2 (2), x4 (4), x4.trans (4).
extern "C" __global__ void ldmatrix_probe(const uint16_t* src, const int* perm, unsigned* out) {
    __shared__ __align__(16) uint16_t tile[32 * 8];
    int lane = threadIdx.x;
    for (int e = lane; e < 256; e += 32) tile[e] = src[e];
    __syncwarp();
    unsigned addr = (unsigned)__cvta_generic_to_shared(&tile[perm[lane] * 8]);
    unsigned r[11];
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[1]), "=r"(r[2]) : "r"(addr));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]) : "r"(addr));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]) : "r"(addr));
    for (int k = 0; k < 11; ++k) out[lane * 11 + k] = r[k];
}

// mma.sync m16n8k8 bf16 -> f32, fragments loaded per the PTX ISA layout. A: M x K row-major,
// Bt: N x K row-major, one warp per 16x8 tile of C.
extern "C" __global__ void mma_m16n8k8_bf16(const uint16_t* A, const uint16_t* Bt, float* C, int M, int N, int K) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 8) {
        unsigned a0 = A[(m0 + g) * K + k0 + 2 * t] | ((unsigned)A[(m0 + g) * K + k0 + 2 * t + 1] << 16);
        unsigned a1 = A[(m0 + g + 8) * K + k0 + 2 * t] | ((unsigned)A[(m0 + g + 8) * K + k0 + 2 * t + 1] << 16);
        unsigned b0 = Bt[(n0 + g) * K + k0 + 2 * t] | ((unsigned)Bt[(n0 + g) * K + k0 + 2 * t + 1] << 16);
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(b0));
    }
    C[(m0 + g) * N + n0 + 2 * t] = d[0];
    C[(m0 + g) * N + n0 + 2 * t + 1] = d[1];
    C[(m0 + g + 8) * N + n0 + 2 * t] = d[2];
    C[(m0 + g + 8) * N + n0 + 2 * t + 1] = d[3];
}

#if __CUDA_ARCH__ >= 900
// stmatrix (sm_90): lane l holds, for matrix m, elements (row l/4, cols 2(l%4), 2(l%4)+1) with the
// value m*64 + row*8 + col; lane l supplies the address of row perm[l]. Stores x4 and x4.trans.
extern "C" __global__ void stmatrix_probe(const int* perm, uint16_t* out) {
    __shared__ __align__(16) uint16_t tile[2][32 * 8];
    int lane = threadIdx.x;
    unsigned r[4];
    for (int m = 0; m < 4; ++m) {
        unsigned v = m * 64 + (lane / 4) * 8 + 2 * (lane % 4);
        r[m] = v | ((v + 1) << 16);
    }
    unsigned a0 = (unsigned)__cvta_generic_to_shared(&tile[0][perm[lane] * 8]);
    unsigned a1 = (unsigned)__cvta_generic_to_shared(&tile[1][perm[lane] * 8]);
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
                 ::"r"(a0), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
                 ::"r"(a1), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    __syncwarp();
    for (int e = lane; e < 512; e += 32) out[e] = tile[e / 256][e % 256];
}
#endif
