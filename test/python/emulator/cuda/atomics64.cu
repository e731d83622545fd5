// 64-bit, f64, f16 and reduction atomics; shared-memory CAS.
#include <cuda_fp16.h>

extern "C" __global__ void atomics_wide(const long long* v, unsigned long long* u64, double* f64,
                                        __half2* h2, __half* h1, unsigned* red_sum, int* out, int n) {
    __shared__ int s_lock_counter;
    if (threadIdx.x == 0) s_lock_counter = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        long long x = v[i];
        atomicMax(&u64[0], (unsigned long long)x);                 // atom.max.u64
        atomicMin((long long*)&u64[1], x);                          // atom.min.s64
        atomicAdd(&f64[0], (double)(x & 1023) * 0.25);             // atom.add.f64 (exact sums)
        unsigned long long old = u64[2], assumed;                   // 64-bit CAS retry loop
        do {
            assumed = old;
            old = atomicCAS(&u64[2], assumed, assumed + (unsigned long long)(x & 0xff));
        } while (old != assumed);
        atomicExch(&u64[3], 0xABCDEF0123456789ull);                 // atom.exch.b64
        atomicAdd(&h2[0], __halves2half2(__float2half(1.0f), __float2half(0.5f)));  // f16x2
        atomicAdd(h1, __float2half(0.25f));                         // atom.add.noftz.f16
        asm volatile("red.global.add.u32 [%0], %1;" ::"l"(red_sum), "r"((unsigned)(x & 0xffff)));
        int o;
        do {  // shared CAS: increment through compare-and-swap
            o = s_lock_counter;
        } while (atomicCAS(&s_lock_counter, o, o + 1) != o);
    }
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = s_lock_counter;
}
