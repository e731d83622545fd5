// Memory features: cache-operator loads/stores, fences, prefetch, generic pointers into shared
// memory, isspacep, module-scope __constant__/__device__ variables with initialisers, vector types.
#include <stdint.h>

__constant__ int c_table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
__device__ unsigned g_table[4] = {0x10, 0x200, 0x3000, 0x40000};
__device__ unsigned g_counter;  // zero-initialised module variable

extern "C" __global__ void cache_ops(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int a = __ldcg(in + i);
    int b = __ldca(in + i);
    int c = __ldcs(in + i);
    int d = __ldlu(in + i);
    int e = __ldcv(in + i);
    int f;
    asm volatile("ld.global.L1::no_allocate.b32 %0, [%1];" : "=r"(f) : "l"(in + i));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(in + i));
    __threadfence();
    __threadfence_block();
    __stcg(out + 4 * i, a + b);
    __stcs(out + 4 * i + 1, c * d);
    __stwt(out + 4 * i + 2, e - f);
    out[4 * i + 3] = c_table[i & 7] + (int)g_table[i & 3];
    atomicAdd(&g_counter, 1u);
}

// Reads the module counter written by cache_ops (same module, a later launch).
extern "C" __global__ void read_counter(unsigned* out) { *out = g_counter; }

// Generic pointers: one out-of-line function reads/writes through a pointer that is shared in
// one call and global in the other; isspacep tells them apart.
__device__ __noinline__ int bump(int* p, int v) {
    int old = *p;
    *p = old + v;
    return old * 2 + (__isShared(p) ? 1 : 0) + (__isGlobal(p) ? 4 : 0);
}

extern "C" __global__ void generic_pointers(int* g, int* out) {
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = t * 3;
    __syncthreads();
    int r1 = bump(&s[(t + 1) & 63], 1000);  // shared (each slot bumped by exactly one thread)
    int r2 = bump(&g[t], 7);                  // global
    __syncthreads();
    out[3 * t] = r1;
    out[3 * t + 1] = r2;
    out[3 * t + 2] = s[t];
}

// Vector types: double2, longlong2, char4, short4, int2 loads and stores (ld/st .v2/.v4 of
// various element types).
extern "C" __global__ void vector_types(const double2* d, const longlong2* l, const char4* c, const short4* s,
                                        const int2* p, double* od, long long* ol, int* oi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double2 a = d[i];
    longlong2 b = l[i];
    char4 e = c[i];
    short4 f = s[i];
    int2 g = p[i];
    od[i] = a.x * 2.0 - a.y;
    ol[i] = b.x ^ (b.y << 1);
    oi[3 * i] = e.x + 2 * e.y + 3 * e.z + 4 * e.w;
    oi[3 * i + 1] = f.x - f.y + f.z - f.w;
    oi[3 * i + 2] = g.x * g.y;
}

// Generic pointers into local memory (a per-thread array passed to an out-of-line function) and
// atomics through generic pointers that point into shared or global memory.
__device__ __noinline__ void fill_squares(int* p, int n, int base) {
    for (int k = 0; k < n; ++k) p[k] = (base + k) * (base + k);
}

__device__ __noinline__ void atomic_bump(int* p, int v) { atomicAdd(p, v); }

extern "C" __global__ void generic_local_and_atomics(int* g, int* out) {
    __shared__ int s[4];
    int t = threadIdx.x;
    if (t < 4) s[t] = 0;
    __syncthreads();
    int local[8];
    fill_squares(local, 8, t);
    int acc = 0;
    for (int k = 0; k < 8; ++k) acc += local[(k * 3 + t) & 7];
    atomic_bump(&s[t & 3], 1);
    atomic_bump(&g[t & 1], t);
    __syncthreads();
    out[t] = acc;
    if (t < 4) out[blockDim.x + t] = s[t];
}
