// cp.async with a source size smaller than the copy size (the rest is zero-filled), 8-byte .ca
// copies, and a cp.async whose source size comes from a register.

extern "C" __global__ void cp_async_zfill(const int* in, int* out, int n) {
    __shared__ __align__(16) int buf[4 * 64];
    int t = threadIdx.x;  // 64 threads, 16 bytes each
    int base = blockIdx.x * 256 + t * 4;
    int valid = n - base;  // elements of this thread's 4 that exist
    valid = valid < 0 ? 0 : (valid > 4 ? 4 : valid);
    unsigned s = (unsigned)__cvta_generic_to_shared(&buf[t * 4]);
    const int* src = in + (valid > 0 ? base : 0);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid * 4));
    // 8-byte copies into a second region, source size fixed at 8
    __shared__ __align__(8) int buf2[2 * 64];
    unsigned s2 = (unsigned)__cvta_generic_to_shared(&buf2[t * 2]);
    const int* src2 = in + blockIdx.x * 128 + t * 2;
    bool ok2 = blockIdx.x * 128 + t * 2 + 1 < n;
    if (ok2) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s2), "l"(src2));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    for (int k = 0; k < 4; ++k) out[blockIdx.x * 256 + t * 4 + k] = buf[t * 4 + k];  // zeros past n
    out[gridDim.x * 256 + blockIdx.x * 128 + t * 2] = ok2 ? buf2[t * 2] : -1;
    out[gridDim.x * 256 + blockIdx.x * 128 + t * 2 + 1] = ok2 ? buf2[t * 2 + 1] : -1;
}
