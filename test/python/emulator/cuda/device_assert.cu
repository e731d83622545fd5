// assert() in device code: nvcc calls the extern function __assertfail.
#include <cassert>

extern "C" __global__ void with_assert(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(x[i] >= 0);
    out[i] = x[i];
}
