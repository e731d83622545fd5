// wmma API matmuls (wmma.load / wmma.mma / wmma.store in PTX), f16 and bf16 -> f32.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

// wmma 16x16x16, one warp per 16x16 tile of C; A row-major M x K, B row-major K x N.
using namespace nvcuda;
extern "C" __global__ void wmma_f16(const __half* A, const __half* B, float* C, int M, int N, int K) {
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::load_matrix_sync(fa, A + m0 * K + k0, K);
        wmma::load_matrix_sync(fb, B + k0 * N + n0, N);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(C + m0 * N + n0, fc, N, wmma::mem_row_major);
}

extern "C" __global__ void wmma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.f);
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::load_matrix_sync(fa, A + m0 * K + k0, K);
        wmma::load_matrix_sync(fb, B + k0 + n0 * K, K);  // B given as Bt (N x K) = col-major K x N
        wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(C + m0 * N + n0, fc, N, wmma::mem_row_major);
}
