// tools/dev/read_bound.cu - how fast can any kernel read a tensor once, timed the way tools/bench
// times its rows? The decode rows of the linear layers read their weight once, so the best
// read of the weight's size bounds them. This program times, for each size given:
//   - the device-to-device copy (cuMemcpyDtoDAsync), as the benchmark does;
//   - read-only kernels (16-byte non-caching loads, XOR-folded so nothing is optimized away)
//     over a sweep of grids, block sizes and loads in flight a thread, and reports the best;
//   - an empty kernel (the launch and event floor).
// Every timed run starts cold: 64 MiB memsets are queued first (they evict L2 and keep the
// GPU ahead of the host), and the timed runs rotate over buffer sets spanning 256 MiB.
// Build and run on a GPU host:
//   nvcc -O3 -arch=sm_90a -o read_bound tools/dev/read_bound.cu -lcuda && ./read_bound 16 64
// (sizes in MiB). Not part of the build: the library itself needs no nvcc.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                                     \
  do {                                                                                                            \
    cudaError_t e_ = (x);                                                                                         \
    if (e_ != cudaSuccess) {                                                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                          \
      exit(1);                                                                                                    \
    }                                                                                                             \
  } while (0)

static __device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// U loads in flight a thread: thread t of the grid reads 16-byte words t, t + T, ..., in
// groups of U.
template <int U> __global__ void read_kernel(const uint4 *p, size_t n16, unsigned *sink) {
  const size_t T = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  unsigned x = 0;
  for (; i + (U - 1) * T < n16; i += U * T) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = ld_stream(p + i + u * T);
#pragma unroll
    for (int u = 0; u < U; u++) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += T) {
    const uint4 v = ld_stream(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) sink[0] = x; // never true for the data below; keeps the loads
}
static void launch_read(int u, unsigned blocks, int threads, cudaStream_t st, const uint4 *p, size_t n16, unsigned *sink) {
  switch (u) {
  case 1: read_kernel<1><<<blocks, threads, 0, st>>>(p, n16, sink); break;
  case 2: read_kernel<2><<<blocks, threads, 0, st>>>(p, n16, sink); break;
  case 4: read_kernel<4><<<blocks, threads, 0, st>>>(p, n16, sink); break;
  default: read_kernel<8><<<blocks, threads, 0, st>>>(p, n16, sink); break;
  }
}
__global__ void empty_kernel(unsigned *sink) {
  if (threadIdx.x == 1024) sink[0] = 1;
}

static cudaStream_t g_stream;
static char *g_scratch;
static const size_t SCRATCH = 64u << 20;

template <class F> static double time_median(F launch, int reps) {
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto &e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 3; i++) launch(i);
  for (int i = 0; i < reps; i++) CK(cudaMemsetAsync(g_scratch, 0x5a, SCRATCH, g_stream));
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(ev[2 * i], g_stream));
    launch(i);
    CK(cudaEventRecord(ev[2 * i + 1], g_stream));
  }
  CK(cudaEventSynchronize(ev[2 * reps - 1]));
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

int main(int argc, char **argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&g_scratch, SCRATCH));
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  const int reps = 100;
  printf("read_bound: %d SMs; times are medians of %d cold runs (us)\n", sms, reps);
  printf("empty kernel: %.2f us\n", time_median([&](int) { empty_kernel<<<1, 32, 0, g_stream>>>(sink); }, reps));
  for (int a = 1; a < argc; a++) {
    const size_t bytes = (size_t)atoi(argv[a]) << 20, n16 = bytes / 16;
    const int sets = (int)std::max<size_t>(2, (256u << 20) / bytes);
    char *buf;
    CK(cudaMalloc(&buf, 2 * bytes * sets));
    CK(cudaMemset(buf, 0x11, 2 * bytes * sets));
    auto src = [&](int i) { return buf + (size_t)(i % sets) * 2 * bytes; };
    const double copy = time_median(
        [&](int i) { CK(cudaMemcpyAsync(src(i) + bytes, src(i), bytes, cudaMemcpyDeviceToDevice, g_stream)); }, reps);
    printf("\n%zu MiB: copy %.2f us (%.0f GB/s counting read + write)\n", bytes >> 20, copy, 2e-3 * bytes / copy);
    double best = 1e30;
    char bestcfg[96] = "";
    auto try_grid = [&](unsigned blocks, int threads, int u, const char *kind) {
      const double t = time_median(
          [&](int i) { launch_read(u, blocks, threads, g_stream, (const uint4 *)src(i), n16, sink); }, reps);
      if (t < best) {
        best = t;
        snprintf(bestcfg, sizeof bestcfg, "%s%u blocks of %d threads, %d loads %s", kind, blocks, threads, u,
                 *kind ? "a thread" : "in flight a thread");
      }
    };
    for (int threads : {256, 512, 1024})
      for (int per_sm : {1, 2, 4, 8, 16, 32})
        for (int u : {1, 2, 4, 8})
          if (threads * per_sm <= 2048) try_grid((unsigned)(sms * per_sm), threads, u, "");
    // one-shot grids: every thread loads exactly U words, all at once
    for (int threads : {256, 512, 1024})
      for (int u : {1, 2, 4, 8}) {
        const size_t blocks = n16 / ((size_t)threads * u);
        if (blocks && blocks * threads * u == n16) try_grid((unsigned)blocks, threads, u, "one-shot: ");
      }
    printf("%zu MiB: best read %.2f us (%.0f GB/s; %s)\n", bytes >> 20, best, 1e-3 * bytes / best, bestcfg);
    printf("%zu MiB: a kernel that reads these bytes once reaches at most %.3f of copy bandwidth\n", bytes >> 20,
           copy / (2 * best));
    CK(cudaFree(buf));
  }
  return 0;
}
