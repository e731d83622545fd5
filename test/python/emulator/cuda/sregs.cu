// Special registers and 3-D launches.

// Every thread writes its coordinates: 3-D tid/ctaid/ntid/nctaid, linear ids, %laneid, %warpid,
// lane masks, %smid/%nsmid and the %clock ordering of two reads.
extern "C" __global__ void index3d(unsigned* out) {
    unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    unsigned tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    unsigned cta = (bz * gridDim.y + by) * gridDim.x + bx;
    unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
    unsigned t = (tz * blockDim.y + ty) * blockDim.x + tx;
    unsigned g = cta * nthreads + t;
    unsigned lane, warp, lt, eq, ge, smid, nsmid, c0, c1;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
    asm volatile("mov.u32 %0, %%lanemask_eq;" : "=r"(eq));
    asm volatile("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%nsmid;" : "=r"(nsmid));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c0));
    asm volatile("mov.u32 %0, %%clock;" : "=r"(c1));
    unsigned* o = out + (size_t)g * 16;
    o[0] = tx; o[1] = ty; o[2] = tz;
    o[3] = bx; o[4] = by; o[5] = bz;
    o[6] = blockDim.x * 10000 + blockDim.y * 100 + blockDim.z;
    o[7] = gridDim.x * 10000 + gridDim.y * 100 + gridDim.z;
    o[8] = lane; o[9] = warp; o[10] = lt; o[11] = eq; o[12] = ge;
    o[13] = smid < nsmid ? 1u : 0u;
    o[14] = c1 - c0;  // non-negative as unsigned wrap-around, small
    o[15] = t;
}
