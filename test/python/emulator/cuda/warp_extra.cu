// Shuffles in divergent code with partial member masks, __syncwarp(mask), static + dynamic
// shared memory together, and named barriers (bar.sync id, count) for pairs of warps.

extern "C" __global__ void divergent_shuffle(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = x[i], r;
    if (lane < 16) {
        r = __shfl_xor_sync(0x0000ffffu, v, 1);
        __syncwarp(0x0000ffffu);
        r += __shfl_sync(0x0000ffffu, v, 15 - lane) * 100;
    } else {
        r = __shfl_down_sync(0xffff0000u, v, 2);  // lanes 30, 31 keep their own value
        __syncwarp(0xffff0000u);
        r += __shfl_up_sync(0xffff0000u, v, 1, 16) * 100;  // width 16: lane 16 keeps its own value
    }
    out[i] = r;
}

extern "C" __global__ void static_and_dynamic_shared(const int* x, int* out, int ndyn) {
    __shared__ int stat[32];
    extern __shared__ int dyn[];
    int t = threadIdx.x;
    stat[t & 31] = -1;
    for (int k = t; k < ndyn; k += blockDim.x) dyn[k] = x[blockIdx.x * ndyn + k] * 2;
    __syncthreads();
    if (t < 32) stat[t] = t * 1000;
    __syncthreads();
    int acc = 0;
    for (int k = t; k < ndyn; k += blockDim.x) acc += dyn[ndyn - 1 - k];
    out[blockIdx.x * blockDim.x + t] = acc + stat[t & 31];
}

// Warps 0-1 exchange through barrier 1, warps 2-3 through barrier 2 (64 threads each).
extern "C" __global__ void named_barriers(const int* x, int* out) {
    __shared__ int s[128];
    int t = threadIdx.x;
    int pair = t / 64;
    s[t] = x[blockIdx.x * 128 + t] + pair * 100000;
    if (pair == 0) asm volatile("bar.sync 1, 64;");
    else asm volatile("bar.sync 2, 64;");
    int partner = pair * 64 + (63 - (t % 64));
    out[blockIdx.x * 128 + t] = s[partner];
}
