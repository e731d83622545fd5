// printf in device code: nvcc calls the extern function vprintf.
#include <cstdio>

extern "C" __global__ void with_printf(int* out) {
    if (threadIdx.x == 0) printf("block %d says %f\n", (int)blockIdx.x, 1.5);
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}
