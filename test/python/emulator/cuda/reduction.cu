// Block reductions with warp shuffles and shared memory; row softmax; warp vote.
#include <cfloat>

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ int warp_sum_i(int v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// One partial sum per block: out[blockIdx.x] = sum of x over the block's slice.
extern "C" __global__ void block_reduce_sum(const float* x, float* out, int n) {
    __shared__ float partial[32];
    int tid = threadIdx.x;
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) v += x[i];
    v = warp_sum(v);
    int lane = tid & 31, warp = tid >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    if (warp == 0) {
        v = lane < nwarps ? partial[lane] : 0.f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

// Integer reduction (exact): butterfly shuffles, then atomics into a single total.
extern "C" __global__ void block_reduce_i32(const int* x, int* out, int* total, int n) {
    __shared__ int partial[32];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    int v = i < n ? x[i] : 0;
    v = warp_sum_i(v);
    int lane = tid & 31, warp = tid >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (tid == 0) {
        int s = 0;
        for (int w = 0; w < (int)((blockDim.x + 31) >> 5); ++w) s += partial[w];
        out[blockIdx.x] = s;
        atomicAdd(total, s);
    }
}

// Row max + argmax using shfl with index (exact): one warp per row.
extern "C" __global__ void row_max_argmax(const float* x, float* mx, int* idx, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float best = -FLT_MAX;
    int besti = 0x7fffffff;
    for (int c = lane; c < cols; c += 32) {
        float v = x[row * cols + c];
        if (v > best) { best = v; besti = c; }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, off);
        int oi = __shfl_xor_sync(0xffffffffu, besti, off);
        if (ov > best || (ov == best && oi < besti)) { best = ov; besti = oi; }
    }
    if (lane == 0) { mx[row] = best; idx[row] = besti; }
}

// Row softmax: one block per row, block-wide max and sum through shuffles + shared memory.
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    float m = -FLT_MAX;
    for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = lane < nwarps ? red[lane] : -FLT_MAX;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    __syncthreads();
    float s = 0.f;
    for (int c = tid; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) red[warp] = s;
    __syncthreads();
    s = lane < nwarps ? red[lane] : 0.f;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    float inv = 1.f / s;
    for (int c = tid; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}

// Precise-math softmax variant (expf, not __expf): exercises the libdevice-style expansion.
extern "C" __global__ void softmax_rows_precise(const float* x, float* y, int cols) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    float m = -FLT_MAX;
    for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = lane < nwarps ? red[lane] : -FLT_MAX;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    __syncthreads();
    float s = 0.f;
    for (int c = tid; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) red[warp] = s;
    __syncthreads();
    s = lane < nwarps ? red[lane] : 0.f;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int c = tid; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
}

// Warp vote / ballot / activemask / shuffle variants. Per thread, 8 int outputs.
extern "C" __global__ void warp_vote(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    if (i >= n) return;  // partial last warp: later votes see only the active lanes
    int v = x[i];
    unsigned active = __activemask();
    unsigned ballot = __ballot_sync(active, v > 0);
    int all_pos = __all_sync(active, v > 0);
    int any_big = __any_sync(active, v > 100);
    int from0 = __shfl_sync(active, v, 0);
    int up = __shfl_up_sync(active, v, 3);        // lanes < 3 keep their own value
    int down = __shfl_down_sync(active, v, 5);    // lanes >= 32-5 keep their own value
    int idx = __shfl_sync(active, v, (lane * 7) & 31);
    int* o = out + (size_t)i * 8;
    o[0] = (int)active;
    o[1] = (int)ballot;
    o[2] = all_pos;
    o[3] = any_big;
    o[4] = from0;
    o[5] = up;
    o[6] = down;
    o[7] = idx;
}

// Sub-warp shuffles with width 8 (the clamp / segment mask in shfl.sync's c operand).
extern "C" __global__ void shfl_width8(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    int a = __shfl_sync(0xffffffffu, v, 2, 8);
    int b = __shfl_up_sync(0xffffffffu, v, 1, 8);
    int c = __shfl_down_sync(0xffffffffu, v, 3, 8);
    int d = __shfl_xor_sync(0xffffffffu, v, 5, 8);
    out[i * 4 + 0] = a;
    out[i * 4 + 1] = b;
    out[i * 4 + 2] = c;
    out[i * 4 + 3] = d;
}
