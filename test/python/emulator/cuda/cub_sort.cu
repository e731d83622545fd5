// CUB BlockRadixSort: 128 threads x 4 keys per block.
#include <cub/block/block_radix_sort.cuh>

extern "C" __global__ void cub_radix_sort(const int* in, int* out) {
    using RS = cub::BlockRadixSort<int, 128, 4>;
    __shared__ typename RS::TempStorage tmp;
    int keys[4];
    for (int k = 0; k < 4; ++k) keys[k] = in[blockIdx.x * 512 + threadIdx.x * 4 + k];
    RS(tmp).Sort(keys);
    for (int k = 0; k < 4; ++k) out[blockIdx.x * 512 + threadIdx.x * 4 + k] = keys[k];
}
