// tools/dev/mix_bound.cu - how fast can any kernel stream a given mix of reads and writes? A
// quantizer from f32 to int8 reads four bytes for each one it writes, a dequantizer to bf16
// writes two for each one it reads, a backward pass reads two tensors and writes one. The
// device-to-device copy (one read, one write) is the benchmark's reference for all of them,
// but DRAM need not serve every mix as fast as the copy's. This program times, for each mix
// and each size given, stream kernels that read and write exactly those bytes (16-byte
// accesses where a side is that wide, no arithmetic beyond an XOR) over a sweep of launch
// shapes and accesses in flight a thread, and reports the best of them as a ratio to the
// copy, counted the way tools/bench counts a row (bytes read once + written once, / time).
// With --sweep it also prints every launch shape's ratio for each mix, with the bytes a
// shape keeps in flight on an SM: how many an SM needs on this GPU to reach the bound.
// Every timed run starts cold as in tools/dev/read_bound.cu.
// Build and run on a GPU host:
//   nvcc -O3 -arch=sm_90a -o mix_bound tools/dev/mix_bound.cu && ./mix_bound [--sweep] 64 256
// (sizes in MiB of the wider stream). Not part of the build: the library itself needs no nvcc.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                                     \
  do {                                                                                                            \
    cudaError_t e_ = (x);                                                                                         \
    if (e_ != cudaSuccess) {                                                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                          \
      exit(1);                                                                                                    \
    }                                                                                                             \
  } while (0)

// A B-byte word (B = 2, 4, 8, 16, 32) read and written as whole vectors
template <int B> struct word { uint32_t v[B >= 4 ? B / 4 : 1]; };
template <int B> static __device__ __forceinline__ word<B> ld(const void *p) {
  word<B> w;
  if constexpr (B == 32) {
    const uint4 *q = (const uint4 *)p;
    uint4 a, b;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "l"(q));
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(q + 1));
    w.v[0] = a.x, w.v[1] = a.y, w.v[2] = a.z, w.v[3] = a.w, w.v[4] = b.x, w.v[5] = b.y, w.v[6] = b.z, w.v[7] = b.w;
  } else if constexpr (B == 16) {
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(w.v[0]), "=r"(w.v[1]), "=r"(w.v[2]), "=r"(w.v[3]) : "l"(p));
  } else if constexpr (B == 8) {
    asm volatile("ld.global.cs.v2.u32 {%0,%1}, [%2];" : "=r"(w.v[0]), "=r"(w.v[1]) : "l"(p));
  } else if constexpr (B == 4) {
    asm volatile("ld.global.cs.u32 %0, [%1];" : "=r"(w.v[0]) : "l"(p));
  } else {
    unsigned short s;
    asm volatile("ld.global.cs.u16 %0, [%1];" : "=h"(s) : "l"(p));
    w.v[0] = s;
  }
  return w;
}
template <int B> static __device__ __forceinline__ uint32_t fold(const word<B> &w) {
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < (B >= 4 ? B / 4 : 1); i++) x ^= w.v[i];
  return x;
}
template <int B> static __device__ __forceinline__ void st(void *p, uint32_t x) {
  if constexpr (B == 32) {
    uint4 *q = (uint4 *)p;
    q[0] = make_uint4(x, x + 1, x + 2, x + 3);
    q[1] = make_uint4(x + 4, x + 5, x + 6, x + 7);
  } else if constexpr (B == 16) {
    *(uint4 *)p = make_uint4(x, x + 1, x + 2, x + 3);
  } else if constexpr (B == 8) {
    *(uint2 *)p = make_uint2(x, x + 1);
  } else if constexpr (B == 4) {
    *(uint32_t *)p = x;
  } else {
    *(unsigned short *)p = (unsigned short)x;
  }
}

// n items: item i reads R bytes at a + i R (and R at b + i R where TWO, a second input) and
// writes W bytes at y + i W. U items in flight a thread: thread t takes items t, t + T, ...
// in groups of U. ONESHOT: the grid covers the items once, each thread its U items.
template <int R, int W, bool TWO, int U>
__global__ void __launch_bounds__(256) mix_kernel(const char *a, const char *b, char *y, size_t n) {
  const size_t T = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * T < n; i += U * T) {
    word<R> va[U], vb[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      va[u] = ld<R>(a + (i + u * T) * R);
      if (TWO) vb[u] = ld<R>(b + (i + u * T) * R);
    }
#pragma unroll
    for (int u = 0; u < U; u++) st<W>(y + (i + u * T) * W, fold(va[u]) ^ (TWO ? fold(vb[u]) : 0u));
  }
  for (; i < n; i += T) st<W>(y + i * W, fold(ld<R>(a + i * R)) ^ (TWO ? fold(ld<R>(b + i * R)) : 0u));
}

static cudaStream_t g_stream;
static char *g_scratch;
static const size_t SCRATCH = 64u << 20;

template <class F> static double time_median(F launch, int reps) {
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 3; i++) launch(i);
  for (int i = 0; i < reps; i++) {
    CK(cudaMemsetAsync(g_scratch, 0x5a, SCRATCH, g_stream)); // L2 evicted before each run
    CK(cudaEventRecord(ev[2 * i], g_stream));
    launch(i);
    CK(cudaEventRecord(ev[2 * i + 1], g_stream));
  }
  CK(cudaEventSynchronize(ev[2 * reps - 1]));
  CK(cudaGetLastError());
  std::vector<double> t(reps);
  for (int i = 0; i < reps; i++) {
    float ms;
    CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    t[i] = 1e3 * ms;
  }
  for (auto &e : ev) CK(cudaEventDestroy(e));
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

typedef void (*kfn)(const char *, const char *, char *, size_t);
struct mix {
  const char *name, *like;
  int r, w, two;
  kfn k[4]; // U = 1, 2, 4, 8
};
#define MIX(name, like, R, W, TWO)                                                                               \
  {name, like, R, W, TWO, {mix_kernel<R, W, TWO, 1>, mix_kernel<R, W, TWO, 2>, mix_kernel<R, W, TWO, 4>, mix_kernel<R, W, TWO, 8>}}
static const mix g_mixes[] = {
    MIX("1:1", "copy, fake quantize forward (same type in and out)", 16, 16, false),
    MIX("2:1", "quantize f16/bf16 -> 8-bit", 16, 8, false),
    MIX("4:1", "quantize f32 -> 8-bit", 16, 4, false),
    MIX("8:1", "quantize f64 -> 8-bit", 32, 4, false),
    MIX("1:2", "dequantize 8-bit -> f16/bf16", 8, 16, false),
    MIX("1:4", "dequantize 8-bit -> f32", 4, 16, false),
    MIX("1:8", "dequantize 8-bit -> f64", 4, 32, false),
    MIX("1+1:1", "backward: dy and x in, dx out (same type)", 16, 16, true),
};

int main(int argc, char **argv) {
  int sms = 0, dev = 0;
  bool sweep = false;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&g_scratch, SCRATCH));
  const int reps = 50;
  printf("mix_bound: %s, %d SMs; times are medians of %d cold runs (us); ratio = (bytes read + written) / time "
         "against the copy's 2 * bytes / time at the wider stream's size\n", prop.name, sms, reps);
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--sweep")) {
      sweep = true;
      continue;
    }
    const size_t wide = (size_t)atoi(argv[a]) << 20;
    // each buffer set: a, b and y of the wider stream's size, sets rotating over >= 512 MiB
    const int sets = (int)std::max<size_t>(2, (512u << 20) / (3 * wide));
    char *buf;
    CK(cudaMalloc(&buf, 3 * wide * sets));
    CK(cudaMemset(buf, 0x11, 3 * wide * sets));
    auto base = [&](int i) { return buf + (size_t)(i % sets) * 3 * wide; };
    const double copy = time_median(
        [&](int i) { CK(cudaMemcpyAsync(base(i) + wide, base(i), wide, cudaMemcpyDeviceToDevice, g_stream)); }, reps);
    const double copy_gbps = 2e-3 * wide / copy;
    printf("\n%zu MiB: copy %.2f us, %.0f GB/s\n", wide >> 20, copy, copy_gbps);
    printf("%-6s %-52s %10s %8s %6s  %s\n", "mix", "like", "best_us", "GB/s", "ratio", "launch");
    for (const mix &m : g_mixes) {
      const size_t n = wide / (size_t)std::max(m.r, m.w), bytes = n * ((m.two ? 2 : 1) * m.r + m.w);
      double best = 1e30;
      char cfg[96] = "";
      for (int per_sm : {2, 4, 8})
        for (int ui = 0; ui < 4; ui++) {
          const unsigned blocks = (unsigned)(sms * per_sm);
          const double t = time_median(
              [&](int i) { m.k[ui]<<<blocks, 256, 0, g_stream>>>(base(i), base(i) + 2 * wide, base(i) + wide, n); },
              reps);
          // bytes an SM keeps in flight: its threads times U items of reads
          const double inflight = (double)per_sm * 256 * (1 << ui) * m.r * (m.two ? 2 : 1);
          if (sweep)
            printf("  sweep %-6s %zu MiB: %d blocks/SM x 256, %d in flight a thread (%6.0f KiB read in flight an SM): "
                   "%8.2f us, ratio %.3f\n", m.name, wide >> 20, per_sm, 1 << ui, inflight / 1024, t,
                   1e-3 * bytes / t / copy_gbps);
          if (t < best) best = t, snprintf(cfg, sizeof cfg, "%d blocks/SM x 256, %d in flight a thread", per_sm, 1 << ui);
        }
      for (int ui = 0; ui < 3; ui++) { // one-shot grids: every thread its U items
        const size_t per = (size_t)256 << ui, blocks = (n + per - 1) / per;
        if (blocks > 0x7fffffff) continue;
        const double t = time_median(
            [&](int i) { m.k[ui]<<<(unsigned)blocks, 256, 0, g_stream>>>(base(i), base(i) + 2 * wide, base(i) + wide, n); },
            reps);
        if (sweep)
          printf("  sweep %-6s %zu MiB: one-shot, %d a thread: %8.2f us, ratio %.3f\n", m.name, wide >> 20, 1 << ui, t,
                 1e-3 * bytes / t / copy_gbps);
        if (t < best) best = t, snprintf(cfg, sizeof cfg, "one-shot, %d a thread", 1 << ui);
      }
      printf("%-6s %-52s %10.2f %8.0f %6.3f  %s\n", m.name, m.like, best, 1e-3 * bytes / best,
             1e-3 * bytes / best / copy_gbps, cfg);
    }
    CK(cudaFree(buf));
  }
  return 0;
}
