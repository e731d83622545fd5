// Inter-warp synchronisation through memory inside one CTA: warp 1 spins on a volatile flag that
// warp 0 sets. Legal CUDA (all warps of a CTA are resident and scheduled independently); an
// emulator must let the producer warp run while the consumer warp spins.

extern "C" __global__ void producer_consumer(volatile int* flag, int* data, int* out) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 0) {
        if (lane == 0) {
            data[0] = 42;
            __threadfence_block();
            flag[0] = 1;
        }
    } else if (warp == 1 && lane == 0) {
        while (flag[0] == 0) {
        }
        __threadfence_block();
        out[0] = data[0];
    }
}
