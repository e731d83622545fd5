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
