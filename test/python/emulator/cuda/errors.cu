// Kernels with planted memory bugs: each must raise emu.MemoryAccessError.

// Off by one: thread i reads x[i + 1], so the last thread reads one element past the end.
extern "C" __global__ void oob_read_past_end(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + 1];
}

// Off by one on the store: `<=` instead of `<`.
extern "C" __global__ void oob_write_past_end(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = 2.f * x[i < n ? i : 0];
}

// Negative index: thread 0 reads x[-1].
extern "C" __global__ void oob_read_negative(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i - 1];
}

// Shared-memory overrun: s has 64 floats (256 bytes, the CTA's whole static shared memory);
// with shift == 1 the thread with threadIdx.x == 63 writes s[64].
extern "C" __global__ void smem_overrun(const float* x, float* y, int shift) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t + shift] = x[t];
    __syncthreads();
    y[t] = s[t];
}

// Dynamic shared memory overrun: writes buf[t + shift] of a launch-sized extern array.
extern "C" __global__ void dyn_smem_overrun(const int* x, int* y, int shift) {
    extern __shared__ int buf[];
    int t = threadIdx.x;
    buf[t + shift] = x[t];
    __syncthreads();
    y[t] = buf[t];
}

// Misaligned 4-byte access: reads an int at a byte offset `off` (2 => misaligned).
extern "C" __global__ void misaligned_i32(const char* x, int* y, int off) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = *reinterpret_cast<const int*>(x + off + 4 * i);
}

// Misaligned vector access: float4 loads from a pointer that is only 4-byte aligned (off = 1).
extern "C" __global__ void misaligned_v4(const float* x, float4* y, int off) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = reinterpret_cast<const float4*>(x + off)[i];
}

// Writes through a pointer argument well beyond any buffer (wild pointer arithmetic).
extern "C" __global__ void wild_write(float* y, long long delta) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 5) y[delta] = 1.f;
}

// A float4 store whose 16 bytes straddle the end of the buffer (n4 floats = not a multiple of 4).
extern "C" __global__ void oob_vector_straddle(float* y, int nfloats) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * i < nfloats) reinterpret_cast<float4*>(y)[i] = make_float4(1.f, 2.f, 3.f, 4.f);
}

// An out-of-bounds atomic (histogram bin index not reduced modulo the bin count).
extern "C" __global__ void oob_atomic(const int* data, unsigned* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[data[i]], 1u);
}

// The faulting load happens inside an out-of-line device function.
__device__ __noinline__ float load_at(const float* p, int k) { return p[k]; }

extern "C" __global__ void oob_in_callee(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = load_at(x, i + 2);
}

// cp.async reading past the end of the global source.
extern "C" __global__ void oob_cp_async(const int* in, int* out, int n) {
    __shared__ __align__(16) int buf[4 * 32];
    int t = threadIdx.x;
    unsigned s = (unsigned)__cvta_generic_to_shared(&buf[4 * t]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(in + 4 * t));
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    if (4 * t < n) out[t] = buf[4 * t];
}

// Shared-memory overrun through a generic pointer inside an out-of-line function.
__device__ __noinline__ void store_generic(float* p, int k, float v) { p[k] = v; }

extern "C" __global__ void generic_smem_overrun(float* y, int shift) {
    __shared__ float s[32];
    int t = threadIdx.x;
    store_generic(s, t + shift, 1.f);
    __syncthreads();
    y[t] = s[t];
}

// A per-thread local array indexed past its end (the frame is 64 bytes).
extern "C" __global__ void local_overrun(const int* idx, int* out) {
    int t = threadIdx.x;
    int arr[16];
    for (int k = 0; k < 16; ++k) arr[k] = k * t;
    out[t] = arr[idx[t]];
}
