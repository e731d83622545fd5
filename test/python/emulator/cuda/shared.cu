// Shared-memory kernels: transposes (padded / unpadded), tiled matmul, histograms with atomics.
#define TILE 32
#define ROWS 8

// out (cols x rows) = in (rows x cols)^T, through a 32x33 padded shared tile; block 32x8.
extern "C" __global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Same with an unpadded 32x32 tile: the column reads hit one bank 32 times.
extern "C" __global__ void transpose_unpadded(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

// C (M x N) = A (M x K) @ B (K x N), row-major f32, 16x16 shared tiles, any M, N, K.
#define MT 16
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[MT][MT];
    __shared__ float Bs[MT][MT];
    int row = blockIdx.y * MT + threadIdx.y;
    int col = blockIdx.x * MT + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += MT) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < MT; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

// Dynamic shared memory (extern __shared__): reverse each block's slice.
extern "C" __global__ void reverse_dynamic_smem(const int* in, int* out, int n) {
    extern __shared__ int buf[];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    buf[t] = base + t < n ? in[base + t] : -1;
    __syncthreads();
    int src = blockDim.x - 1 - t;
    if (base + t < n) out[base + t] = buf[src];
}

// Histogram with global atomics (many collisions: few bins).
extern "C" __global__ void histogram_global(const int* data, unsigned* bins, int n, int nbins) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int b = data[i] % nbins;
        atomicAdd(&bins[b], 1u);
    }
}

// Histogram privatised in shared memory, merged with global atomics.
extern "C" __global__ void histogram_shared(const int* data, unsigned* bins, int n, int nbins) {
    extern __shared__ unsigned sbins[];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) sbins[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&sbins[data[i] % nbins], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x)
        if (sbins[b]) atomicAdd(&bins[b], sbins[b]);
}

// Other atomics: min/max/and/or/xor/exch/cas/inc/dec and f32 add on global memory,
// and a shared-memory f32 add + max per block.
// ints[0]=min, [1]=max, [2]=and, [3]=or, [4]=xor, [5]=cas-counter, [6]=inc(wrap), [7]=dec(wrap), [8]=sum64 lo
extern "C" __global__ void atomics_misc(const int* data, int* ints, unsigned* uints, float* fsum,
                                        unsigned long long* u64, float* block_out, int n) {
    __shared__ float s_sum;
    __shared__ int s_max;
    if (threadIdx.x == 0) { s_sum = 0.f; s_max = -2147483647 - 1; }
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = data[i];
        atomicMin(&ints[0], v);
        atomicMax(&ints[1], v);
        atomicAnd(&ints[2], v | 0x10);
        atomicOr(&ints[3], v & 0xff0);
        atomicXor(&ints[4], v);
        // CAS loop: increment ints[5] by 1 (exercises atom.cas in a divergent retry loop).
        int old = ints[5], assumed;
        do {
            assumed = old;
            old = atomicCAS(&ints[5], assumed, assumed + 1);
        } while (old != assumed);
        atomicInc(&uints[0], 9u);   // wraps to 0 after 9
        atomicDec(&uints[1], 12u);  // wraps to 12 at 0
        atomicExch(&uints[2], 1234u);
        atomicAdd(fsum, (float)(v & 7));
        atomicAdd(u64, (unsigned long long)(unsigned)v);
        atomicAdd(&s_sum, 0.5f);
        atomicMax(&s_max, v);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        block_out[blockIdx.x * 2] = s_sum;
        block_out[blockIdx.x * 2 + 1] = (float)s_max;
    }
}
