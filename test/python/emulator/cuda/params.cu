// Kernel parameters of every scalar width and signedness, structs by value (also indexed
// dynamically), and structs passed to out-of-line device functions.
#include <cuda_fp16.h>

extern "C" __global__ void scalar_params(signed char c, unsigned char uc, short s, unsigned short us, int i,
                                         unsigned u, long long ll, unsigned long long ull, float f, double d,
                                         __half h, bool b, long long* out) {
    out[0] = c;
    out[1] = uc;
    out[2] = s;
    out[3] = us;
    out[4] = i;
    out[5] = u;
    out[6] = ll;
    out[7] = (long long)(ull >> 1);
    out[8] = (long long)(f * 1024.0f);
    out[9] = (long long)(d * 1048576.0);
    out[10] = (long long)(__half2float(h) * 64.0f);
    out[11] = b ? 7 : -7;
}

struct Shape {
    int ndim;
    int sizes[6];
    long long strides[6];
};

// Linear index -> offset through a by-value struct indexed with a runtime dimension.
extern "C" __global__ void struct_param_offsets(Shape shape, long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long rem = i, off = 0;
    for (int dim = shape.ndim - 1; dim >= 0; --dim) {
        int sz = shape.sizes[dim];
        off += (rem % sz) * shape.strides[dim];
        rem /= sz;
    }
    out[i] = off;
}

struct Vec3 {
    float x, y, z;
};

__device__ __noinline__ Vec3 cross(Vec3 a, Vec3 b) {
    return Vec3{a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

extern "C" __global__ void struct_calls(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Vec3 u{a[3 * i], a[3 * i + 1], a[3 * i + 2]};
    Vec3 v{b[3 * i], b[3 * i + 1], b[3 * i + 2]};
    Vec3 w = cross(u, v);
    out[3 * i] = w.x;
    out[3 * i + 1] = w.y;
    out[3 * i + 2] = w.z;
}
