// Tensor-core matmuls: inline-PTX mma.sync m16n8k16 fed by ldmatrix, (see wmma.cu for the wmma API).
// C (M x N, f32) = A (M x K, row-major) @ B (K x N, given as Bt: N x K row-major, i.e. "col").
// M % 16 == 0, N % 8 == 0 (per-warp 16x8 tile), K % 16 == 0.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

template <bool BF16>
__device__ __forceinline__ void mma_16816(float* d, const unsigned* a, const unsigned* b) {
    if (BF16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

// One warp per 16x8 output tile; A and B tiles staged in shared memory, loaded with ldmatrix.
template <bool BF16>
__device__ void mma_ldmatrix_impl(const uint16_t* A, const uint16_t* Bt, float* C, int M, int N, int K) {
    __shared__ __align__(16) uint16_t As[16 * 16];
    __shared__ __align__(16) uint16_t Bs[8 * 16];
    int lane = threadIdx.x;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = lane; e < 256; e += 32) As[e] = A[(m0 + e / 16) * K + k0 + e % 16];
        for (int e = lane; e < 128; e += 32) Bs[e] = Bt[(n0 + e / 16) * K + k0 + e % 16];
        __syncwarp();
        unsigned a[4], b[2];
        // x4: lanes 0-15 give rows 0-15 of k-half 0, lanes 16-31 rows 0-15 of k-half 1.
        unsigned a_addr = (unsigned)__cvta_generic_to_shared(&As[(lane % 16) * 16 + (lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(a_addr));
        // x2: lanes 0-7 rows n 0-7 at k 0-7, lanes 8-15 rows n 0-7 at k 8-15.
        unsigned b_addr = (unsigned)__cvta_generic_to_shared(&Bs[(lane % 8) * 16 + ((lane / 8) % 2) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b[0]), "=r"(b[1]) : "r"(b_addr));
        mma_16816<BF16>(d, a, b);
        __syncwarp();
    }
    int g = lane / 4, t = lane % 4;
    C[(m0 + g) * N + n0 + 2 * t] = d[0];
    C[(m0 + g) * N + n0 + 2 * t + 1] = d[1];
    C[(m0 + g + 8) * N + n0 + 2 * t] = d[2];
    C[(m0 + g + 8) * N + n0 + 2 * t + 1] = d[3];
}

extern "C" __global__ void mma_ldmatrix_f16(const uint16_t* A, const uint16_t* Bt, float* C, int M, int N, int K) {
    mma_ldmatrix_impl<false>(A, Bt, C, M, N, K);
}
extern "C" __global__ void mma_ldmatrix_bf16(const uint16_t* A, const uint16_t* Bt, float* C, int M, int N, int K) {
    mma_ldmatrix_impl<true>(A, Bt, C, M, N, K);
}

// B given K x N row-major and loaded with ldmatrix.trans (x2.trans feeds the col operand).
extern "C" __global__ void mma_ldmatrix_trans_f16(const uint16_t* A, const uint16_t* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) uint16_t As[16 * 16];
    __shared__ __align__(16) uint16_t Bs[16 * 8];  // k-major: Bs[k * 8 + n]
    int lane = threadIdx.x;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = lane; e < 256; e += 32) As[e] = A[(m0 + e / 16) * K + k0 + e % 16];
        for (int e = lane; e < 128; e += 32) Bs[e] = B[(k0 + e / 8) * N + n0 + e % 8];
        __syncwarp();
        unsigned a[4], b[2];
        unsigned a_addr = (unsigned)__cvta_generic_to_shared(&As[(lane % 16) * 16 + (lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(a_addr));
        // lanes 0-15 give rows k = 0..15 (8 n-values each); .trans turns them into the col layout.
        unsigned b_addr = (unsigned)__cvta_generic_to_shared(&Bs[(lane % 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b[0]), "=r"(b[1]) : "r"(b_addr));
        mma_16816<false>(d, a, b);
        __syncwarp();
    }
    int g = lane / 4, t = lane % 4;
    C[(m0 + g) * N + n0 + 2 * t] = d[0];
    C[(m0 + g) * N + n0 + 2 * t + 1] = d[1];
    C[(m0 + g + 8) * N + n0 + 2 * t] = d[2];
    C[(m0 + g + 8) * N + n0 + 2 * t + 1] = d[3];
}

// Fragments loaded directly from global memory per the PTX ISA layout (no ldmatrix):
// m16n8k8 f16 -> f32.
extern "C" __global__ void mma_m16n8k8_f16(const __half* A, const __half* Bt, float* C, int M, int N, int K) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 8) {
        __half2 a0 = __halves2half2(A[(m0 + g) * K + k0 + 2 * t], A[(m0 + g) * K + k0 + 2 * t + 1]);
        __half2 a1 = __halves2half2(A[(m0 + g + 8) * K + k0 + 2 * t], A[(m0 + g + 8) * K + k0 + 2 * t + 1]);
        __half2 b0 = __halves2half2(Bt[(n0 + g) * K + k0 + 2 * t], Bt[(n0 + g) * K + k0 + 2 * t + 1]);
        unsigned ua0 = *reinterpret_cast<unsigned*>(&a0), ua1 = *reinterpret_cast<unsigned*>(&a1);
        unsigned ub0 = *reinterpret_cast<unsigned*>(&b0);
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
            "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(ua0), "r"(ua1), "r"(ub0));
    }
    C[(m0 + g) * N + n0 + 2 * t] = d[0];
    C[(m0 + g) * N + n0 + 2 * t + 1] = d[1];
    C[(m0 + g + 8) * N + n0 + 2 * t] = d[2];
    C[(m0 + g + 8) * N + n0 + 2 * t + 1] = d[3];
}

