// Packed integer SIMD: the CUDA intrinsics on 16-bit and 8-bit lanes of a 32-bit word
// (nvcc turns the halfword ones into add/min/max.{u16x2,s16x2} on sm_90).

#define NOUT2 16
#define NOUT4 10

extern "C" __global__ void simd2(const unsigned* a, const unsigned* b, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i];
  unsigned* o = out + NOUT2 * i;
  o[0] = __vadd2(x, y);
  o[1] = __vsub2(x, y);
  o[2] = __vmaxs2(x, y);
  o[3] = __vmins2(x, y);
  o[4] = __vmaxu2(x, y);
  o[5] = __vminu2(x, y);
  o[6] = __vaddss2(x, y);
  o[7] = __vsubss2(x, y);
  o[8] = __vaddus2(x, y);
  o[9] = __vsubus2(x, y);
  o[10] = __vimax_s16x2_relu(x, y);
  o[11] = __vimin_s16x2_relu(x, y);
  o[12] = __vabsdiffs2(x, y);
  o[13] = __vneg2(x);
  o[14] = __vabs2(x);
  o[15] = __vhaddu2(x, y);
}

extern "C" __global__ void simd4(const unsigned* a, const unsigned* b, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i];
  unsigned* o = out + NOUT4 * i;
  o[0] = __vadd4(x, y);
  o[1] = __vsub4(x, y);
  o[2] = __vmaxs4(x, y);
  o[3] = __vmins4(x, y);
  o[4] = __vmaxu4(x, y);
  o[5] = __vminu4(x, y);
  o[6] = __vaddss4(x, y);
  o[7] = __vsubss4(x, y);
  o[8] = __vaddus4(x, y);
  o[9] = __vsubus4(x, y);
}
