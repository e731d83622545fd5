// Control flow: divergent branches, early exit, data-dependent loops, device-function calls.

// Per-thread Collatz step count (data-dependent trip counts, capped), with an early exit for
// negative inputs and a nested divergent if/else chain.
extern "C" __global__ void collatz_steps(const int* x, int* steps, int* cls, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    if (v < 0) {  // early exit: leaves outputs untouched
        return;
    }
    int s = 0;
    long long u = v;
    while (u > 1 && s < 1000) {
        if (u & 1) u = 3 * u + 1;
        else u >>= 1;
        ++s;
    }
    steps[i] = s;
    int c;
    if (v % 3 == 0) {
        c = 1;
        if (v % 2 == 0) c = 2;
    } else if (v % 5 == 1) {
        c = 3;
    } else {
        c = (v & 4) ? 4 : 5;
    }
    cls[i] = c;
}

// Divergence within a warp followed by a block barrier after reconvergence, and `break` out of
// a loop at a per-thread iteration; the shared array is read across threads after the barrier.
extern "C" __global__ void diverge_then_sync(const int* lim, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x;
    int acc = 0;
    for (int k = 0; k < 64; ++k) {
        if (k >= lim[blockIdx.x * blockDim.x + t]) break;
        acc += (k & 1) ? k * t : -k;
    }
    if (t & 1) acc = acc * 2 + 1;
    else acc -= 3;
    s[t] = acc;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[blockDim.x - 1 - t] + s[t];
}

// Goto-like irregular control: a switch with fall-through.
extern "C" __global__ void switch_fallthrough(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i], r = 0;
    switch (v & 7) {
        case 0: r += 1;
        case 1: r += 10;
            break;
        case 2: r += 100;
        case 3: r += 1000;
        case 4: r += 10000;
            break;
        case 5: r = -v;
            break;
        default: r = v * v;
    }
    out[i] = r;
}

// Device functions kept out of line (.func + call), with scalar, pointer and multi-value results.
__device__ __noinline__ int poly(int a, int b) { return a * a - 3 * b + 7; }

__device__ __noinline__ float lerp_clamped(float a, float b, float t) {
    t = fminf(fmaxf(t, 0.f), 1.f);
    return a + (b - a) * t;
}

struct Pair {
    int lo;
    int hi;
};
__device__ __noinline__ Pair minmax3(int a, int b, int c) {
    Pair p;
    p.lo = min(a, min(b, c));
    p.hi = max(a, max(b, c));
    return p;
}

__device__ __noinline__ void store_twice(int* dst, int v) {
    dst[0] = v;
    dst[1] = v + 1;
}

// Out-of-line function with divergent internal control flow and an early return.
__device__ __noinline__ int clamp_steps(int v) {
    if (v <= 0) return -1;
    int s = 0;
    while (v != 1 && s < 50) {
        v = (v & 1) ? 3 * v + 1 : v / 2;
        ++s;
    }
    return s;
}

// Calls a call (two-level call chain).
__device__ __noinline__ int outer(int a, int b) { return poly(a, b) + clamp_steps(a); }

extern "C" __global__ void calls(const int* a, const int* b, const float* f, int* iout, float* fout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = a[i], y = b[i];
    iout[i * 6 + 0] = poly(x, y);
    Pair p = minmax3(x, y, x - y);
    iout[i * 6 + 1] = p.lo;
    iout[i * 6 + 2] = p.hi;
    iout[i * 6 + 3] = outer(x, y);
    store_twice(&iout[i * 6 + 4], clamp_steps(y));
    fout[i] = lerp_clamped(f[i], 2.f * f[i] + 1.f, (float)(x & 15) / 10.f);
}

// A per-thread local array indexed dynamically (ld/st.local through the depot).
extern "C" __global__ void local_array(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i];
    int arr[16];
    for (int k = 0; k < 16; ++k) arr[k] = v * k + (k ^ 5);
    int idx = (v * 7) & 15;
    out[i] = arr[idx] + arr[(idx + 3) & 15];
}

// Irreducible control flow from gotos: a loop with two entry points, entered per thread at either.
extern "C" __global__ void irreducible_goto(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = x[i], s = 0;
    if (v & 1) goto B;
A:
    s += 1;
    v >>= 1;
    if (v == 0) goto END;
B:
    s += 10;
    v -= 1;
    if (v > 0 && (v & 3)) goto A;
    if (v > 0) goto B;
END:
    out[i] = s;
}
