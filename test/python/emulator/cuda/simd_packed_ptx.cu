// Packed integer PTX that nvcc does not emit from C: sub/min/max/add(.sat) on .u8x4/.s8x4 and
// add.sat on .u16x2/.s16x2 (PTX ISA 9.2, sm_120 and later), and min.relu.s16x2 (sm_90).
// Older targets compile an empty body (nvcc checks inline PTX against the target).

#define NOUTP 14

#define PTX(op, k)                                   \
  asm(op " %0, %1, %2;" : "=r"(r) : "r"(x), "r"(y)); \
  o[k] = r;

extern "C" __global__ void packed_ptx(const unsigned* a, const unsigned* b, unsigned* out,
                                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i], r;
  unsigned* o = out + NOUTP * i;
#if __CUDA_ARCH__ >= 1200
  PTX("add.sat.s16x2", 0)
  PTX("add.sat.u16x2", 1)
  PTX("add.s8x4", 2)
  PTX("add.sat.s8x4", 3)
  PTX("add.sat.u8x4", 4)
  PTX("sub.u8x4", 5)
  PTX("sub.sat.s8x4", 6)
  PTX("sub.sat.u8x4", 7)
  PTX("max.s8x4", 8)
  PTX("min.u8x4", 9)
  PTX("max.relu.s8x4", 10)
  PTX("min.relu.s8x4", 11)
  PTX("min.relu.s16x2", 12)
  PTX("max.u16x2", 13)
#endif
}
