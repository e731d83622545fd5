// sm_80 warp reductions (redux.sync via __reduce_*_sync) and match.sync (__match_any/all_sync).

extern "C" __global__ void warp_redux(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = (unsigned)x[i];
    out[4 * i] = (int)__reduce_add_sync(0xffffffffu, v);
    out[4 * i + 1] = __reduce_max_sync(0xffffffffu, (int)v);
    out[4 * i + 2] = (int)__reduce_or_sync(0xffffffffu, v);
    out[4 * i + 3] = (int)__reduce_min_sync(0xffffffffu, v);
}

extern "C" __global__ void warp_match(const int* x, unsigned* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    int pred;
    out[3 * i] = __match_any_sync(0xffffffffu, v);
    out[3 * i + 1] = __match_all_sync(0xffffffffu, v & 1, &pred);
    out[3 * i + 2] = pred ? 1u : 0u;
}
