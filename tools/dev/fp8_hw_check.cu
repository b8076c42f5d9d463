// tools/dev/fp8_hw_check.cu - does the CPU reference of the FP8 conversions (tests/reference_fp8.h)
// agree with the hardware's cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on every f32 bit pattern?
// A fact-finding tool for the FP8 storage types, ahead of their kernels; built on a GPU host
// (sm_89 or later) with the toolkit:
//
//   nvcc -O2 -arch=sm_90 -Itests -Xcompiler -fopenmp tools/dev/fp8_hw_check.cu -o fp8_hw_check
//   ./fp8_hw_check
//
// The GPU converts all 2^32 patterns (a byte each), the host converts them again with
// ref_fp8_from_double on every core and counts the differences, by kind of input (NaN with
// the sign bit clear or set, the rest). Exit status: 0 none differ, 1 some do, 2 no GPU.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <omp.h>
#include "reference_fp8.h"

template <int KIND> __global__ void convert(uint8_t *out, uint64_t base, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const float x = __uint_as_float((uint32_t)(base + i));
    unsigned short r;
    if (KIND == REF_E4M3) asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    else asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    out[i] = (uint8_t)(r & 0xFF); // the second operand lands in the low byte
  }
}

int main() {
  const uint64_t total = 1ull << 32, chunk = 1ull << 30;
  uint8_t *d = nullptr, *h = nullptr;
  if (cudaMalloc(&d, chunk) != cudaSuccess || cudaMallocHost(&h, chunk) != cudaSuccess) {
    fprintf(stderr, "fp8_hw_check: no GPU memory\n");
    return 2;
  }
  int bad_total = 0;
  for (int kind = 0; kind < 2; kind++) {
    unsigned long long diff_nan_pos = 0, diff_nan_neg = 0, diff_other = 0;
    int code_pnan = -1, code_nnan = -1; // the hardware's code for +qNaN and -qNaN
    uint32_t first_other = 0;
    int have_first = 0;
    for (uint64_t base = 0; base < total; base += chunk) {
      if (kind == REF_E4M3) convert<REF_E4M3><<<4096, 256>>>(d, base, chunk);
      else convert<REF_E5M2><<<4096, 256>>>(d, base, chunk);
      if (cudaMemcpy(h, d, chunk, cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "fp8_hw_check: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 2;
      }
#pragma omp parallel for reduction(+ : diff_nan_pos, diff_nan_neg, diff_other) schedule(static)
      for (int64_t i = 0; i < (int64_t)chunk; i++) {
        const uint32_t bits = (uint32_t)(base + (uint64_t)i);
        float x;
        memcpy(&x, &bits, 4);
        const uint8_t want = ref_fp8_from_double((double)x, (ref_fp8_kind)kind), got = h[i];
        if (x != x) {
          if (bits == 0x7FC00000u) code_pnan = got; // (one thread each)
          if (bits == 0xFFC00000u) code_nnan = got;
          if (got != want) ++(bits >> 31 ? diff_nan_neg : diff_nan_pos);
        } else if (got != want) {
          ++diff_other;
#pragma omp critical
          if (!have_first) have_first = 1, first_other = bits;
        }
      }
    }
    const char *name = ref_fp8_formats[kind].name;
    printf("%s: 2^32 patterns; differ: %llu non-NaN, %llu +NaN, %llu -NaN\n", name, diff_other, diff_nan_pos,
           diff_nan_neg);
    printf("%s: hardware codes for +NaN 0x%02X, -NaN 0x%02X (reference 0x%02X)\n", name, code_pnan, code_nnan,
           ref_fp8_formats[kind].nan);
    if (diff_other) printf("%s: first non-NaN difference at f32 0x%08X\n", name, (unsigned)first_other);
    bad_total += diff_other || diff_nan_pos || diff_nan_neg;
  }
  return bad_total ? 1 : 0;
}
