// CUB block-wide collectives (BlockReduce, BlockScan, WarpReduce, WarpScan): the raking and
// warp-scan PTX that real library code produces (inline-asm shfl with predicate outputs, redux).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>

struct MaxOp {
    template <typename T>
    __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

extern "C" __global__ void cub_reduce_scan(const int* in, const float* fin, int* isum, float* fmax_out,
                                           int* excl, int* incl_max, int* warp_sum, int* warp_incl, int n) {
    using BRi = cub::BlockReduce<int, 128>;
    using BRf = cub::BlockReduce<float, 128, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;
    using BS = cub::BlockScan<int, 128>;
    using BSw = cub::BlockScan<int, 128, cub::BLOCK_SCAN_WARP_SCANS>;
    using WR = cub::WarpReduce<int>;
    using WS = cub::WarpScan<int>;
    __shared__ union {
        typename BRi::TempStorage ri;
        typename BRf::TempStorage rf;
        typename BS::TempStorage s;
        typename BSw::TempStorage sw;
    } tmp;
    __shared__ typename WR::TempStorage wr[4];
    __shared__ typename WS::TempStorage ws[4];
    int i = blockIdx.x * 128 + threadIdx.x;
    int warp = threadIdx.x / 32;
    int v = i < n ? in[i] : 0;
    float f = i < n ? fin[i] : -1e30f;
    int s = BRi(tmp.ri).Sum(v);
    if (threadIdx.x == 0) isum[blockIdx.x] = s;
    __syncthreads();
    float m = BRf(tmp.rf).Reduce(f, MaxOp());
    if (threadIdx.x == 0) fmax_out[blockIdx.x] = m;
    __syncthreads();
    int e;
    BS(tmp.s).ExclusiveSum(v, e);
    __syncthreads();
    int im;
    BSw(tmp.sw).InclusiveScan(v, im, MaxOp());
    int wsum = WR(wr[warp]).Sum(v);
    int wincl;
    WS(ws[warp]).InclusiveSum(v, wincl);
    if (i < n) {
        excl[i] = e;
        incl_max[i] = im;
        warp_incl[i] = wincl;
        if (threadIdx.x % 32 == 0) warp_sum[i / 32] = wsum;
    }
}
