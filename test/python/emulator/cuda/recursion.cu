// Recursive device functions (kept apart: a call stack is a separate emulator feature).

// Recursion: needs a call stack (the PTX uses a local-memory depot for the frame).
__device__ __noinline__ int fib_rec(int n) { return n < 2 ? n : fib_rec(n - 1) + fib_rec(n - 2); }

// Recursive calls with per-thread different depths.
extern "C" __global__ void recursion_fib(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = fib_rec(x[i] & 15);
}
