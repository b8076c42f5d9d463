// sr_bound.cu - what stochastic rounding costs on this GPU, apart from the library: bf16 to
// s8 per tensor over 256 MiB of input, a grid-stride kernel of 16 elements a thread, timed
// against a copy kernel over the input's bytes (ratio = effective bandwidth over the
// copy's, bytes read once and written once). Rows: round to nearest (the memory bound);
// stochastic rounding with the draws replaced by the index (the rounding's own arithmetic);
// and Philox4x32 with 10 or 7 rounds giving 16-bit draws (8 a call: the library's contract)
// or 8-bit ones (16 a call). The quotient is a product by the reciprocal with one
// correction, lighter than the library's; so the Philox-10 16-bit row bounds from above what
// the contract's draws allow at this byte count, and the library's /sr rows are read against it.
// The last row takes the contract's own steps (the library's exact quotient with its guards,
// its saturation tests): the cost of the arithmetic the contract fixes, in a kernel this lean.
//   nvcc -O3 -arch=sm_90 -o sr_bound tools/dev/sr_bound.cu && ./sr_bound
#include <cstdio>
#include <cstdint>
#include <cuda_bf16.h>
#include <vector>
#include <algorithm>

__device__ __forceinline__ void philox(uint32_t (&c)[4], uint32_t k0, uint32_t k1, int rounds) {
#pragma unroll
  for (int i = 0; i < 10; i++) {
    if (i >= rounds) break;
    if (i) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0, c[1] = (uint32_t)p1, c[2] = n2, c[3] = (uint32_t)p0;
  }
}
__device__ __forceinline__ float srint(float v, uint32_t u, int bits) {
  const float a = fabsf(v), n = floorf(a), f = __fsub_rn(a, n);
  const float r = __fmul_rn((float)(2u * u + 1u), bits == 16 ? 0x1p-17f : 0x1p-9f);
  const float m = __fadd_rn(n, r < f ? 1.0f : 0.0f);
  return v == v ? copysignf(m, v) : 0.0f;
}
// MODE 2: the contract's own steps as the library takes them (common.cuh): the quotient
// C(x) / C(s) correctly rounded from the reciprocal with its guards (a power-of-two m, tiny
// and huge quotients), the threshold from the draw's bits, NaN to 0 with the sign kept, then
// the zero point's offset and both saturation tests
__device__ __forceinline__ float exact_quotient(float x, float s, float rcp, float m) {
  const float xm = __fmul_rn(x, m);
  const bool tiny = fabsf(xm) < 0x1p-96f;
  const float xs = tiny ? __fmul_rn(xm, 0x1p64f) : xm;
  const float q0 = __fmul_rn(xs, rcp);
  const float r = __fmaf_rn(-q0, s, xs);
  float q1 = r == 0.0f ? q0 : __fmaf_rn(r, rcp, q0);
  q1 = fabsf(q0) < 0x1p90f ? q1 : q0;
  return tiny ? __fmul_rn(q1, 0x1p-64f) : q1;
}
__device__ __forceinline__ int contract_sr(float x, float s, float rcp, float m, uint32_t u) {
  const float v = exact_quotient(x, s, rcp, m);
  const float a = fabsf(v), n = floorf(a), f = __fsub_rn(a, n);
  const float t = __fsub_rn(__uint_as_float(0x3f800000u | ((2u * u + 1u) << 6)), 1.0f);
  const float mm = __fadd_rn(n, t < f ? 1.0f : 0.0f);
  const float rr = v == v ? copysignf(mm, v) : 0.0f;
  const int inside = -128 + __float2int_rz(__fsub_rn(rr, -128.0f));
  const int below = rr < -128.0f ? -128 : inside;
  return rr > 127.0f ? 127 : below;
}
template <int MODE, int ROUNDS, int BITS>  // MODE 0 nearest, 1 stochastic, 2 the contract's steps
__global__ void __launch_bounds__(256) k(const uint4 *x, uint4 *y, long n16, float s, float rcp, uint32_t k0,
                                          uint32_t k1, float m1 = 1.0f) {
  for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n16; t += (long)gridDim.x * blockDim.x) {
    const uint4 a = __ldcs(x + 2 * t), b = __ldcs(x + 2 * t + 1);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t u[16];
    if (MODE >= 1) {
      if (BITS == 8) {
        uint32_t c[4] = {(uint32_t)t, (uint32_t)(t >> 32), 1u, 0u};
        philox(c, k0, k1, ROUNDS);
#pragma unroll
        for (int j = 0; j < 16; j++) u[j] = (c[j >> 2] >> (8 * (j & 3))) & 0xffu;
      } else if (BITS == 16) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
          uint32_t c[4] = {(uint32_t)(2 * t + h), (uint32_t)((2 * t + h) >> 32), 1u, 0u};
          philox(c, k0, k1, ROUNDS);
#pragma unroll
          for (int j = 0; j < 8; j++) u[8 * h + j] = (c[j >> 1] >> (16 * (j & 1))) & 0xffffu;
        }
      } else {
#pragma unroll
        for (int j = 0; j < 16; j++) u[j] = (uint32_t)(t * 16 + j) & 0xffffu;  // no generator
      }
    }
    uint32_t o[4] = {0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const float xv = __uint_as_float((w[j >> 1] >> (16 * (j & 1))) << 16);
      const float q0 = __fmul_rn(xv, rcp);
      const float q1 = __fmaf_rn(__fmaf_rn(-q0, s, xv), rcp, q0);
      const float r = MODE ? srint(q1, u[j], BITS ? BITS : 16) : rintf(q1);
      const int qi = MODE == 2 ? contract_sr(xv, s, rcp, m1, u[j]) : max(-128, min(127, __float2int_rz(r)));
      o[j >> 2] |= ((uint32_t)qi & 0xffu) << (8 * (j & 3));
    }
    __stcs(y + t, make_uint4(o[0], o[1], o[2], o[3]));
  }
}
__global__ void copyk(const uint4 *x, uint4 *y, long n) {
  for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) __stcs(y + t, __ldcs(x + t));
}
template <typename F> static float timeit(F f) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int i = 0; i < 5; i++) f();
  for (int i = 0; i < 30; i++) {
    cudaEventRecord(e0);
    f();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms * 1000);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}
int main() {
  const long n = 128l << 20, n16 = n / 16;  // bf16 elements: 256 MiB
  uint4 *x, *y, *c;
  cudaMalloc(&x, n * 2), cudaMalloc(&y, n), cudaMalloc(&c, n * 2);
  cudaMemset(x, 0x3f, n * 2);
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int grid = sms * 8;
  const float s = 0.0371f, rcp = 1.0f / s;
  const float tc = timeit([&] { copyk<<<grid, 256>>>(x, c, n * 2 / 16); });
  const double copy_gbs = 2.0 * n * 2 / tc / 1e3;
  printf("copy 256 MiB: %.1f us (%.0f GB/s)\n", tc, copy_gbs);
  auto row = [&](const char *name, float us) {
    printf("%-34s %8.1f us  ratio to copy %.3f\n", name, us, (3.0 * n / us / 1e3) / (2.0 * (n * 2) / tc / 1e3) * 1.0);
  };
  row("nearest", timeit([&] { k<0, 10, 16><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("stochastic, no generator", timeit([&] { k<1, 10, 0><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("philox-10, 16-bit draws", timeit([&] { k<1, 10, 16><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("philox-7, 16-bit draws", timeit([&] { k<1, 7, 16><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("philox-10, 8-bit draws", timeit([&] { k<1, 10, 8><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("philox-7, 8-bit draws", timeit([&] { k<1, 7, 8><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  row("philox-10 16-bit, contract steps", timeit([&] { k<2, 10, 16><<<grid, 256>>>(x, y, n16, s, rcp, 7, 0); }));
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
  return 0;
}
