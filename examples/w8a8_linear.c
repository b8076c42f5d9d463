/* w8a8_linear.c - a W8A8 linear layer y = x W^T + b, two ways, against the float layer.

   The float weight W [N, K] is quantized on the GPU per output channel (dynamic quantize
   per token over W's rows: int8 symmetric, f32 scales). Then:
     QuantizedLinear    x (f32) -> y: the plan quantizes x per token itself, then runs the
                        int8 GEMM with the per-token and per-channel scales
     SmoothQuantLinear  x quantized per token by a dynamic quantize plan first, then the
                        int8 GEMM on the int8 activations and their scales
   Both are compared with the float layer computed on the host in double from the ORIGINAL
   float weights (relative Frobenius error, bounded), and with each other: QuantizedLinear
   quantizes its activations with the same dynamic per-token quantization (same float and
   int types, q-range, f32 scales, symmetric) and both GEMMs end in the same epilogue
   y = f32((f32(acc) * sa[m]) * sw[n] + bias[n]) over an exact int32 accumulator, so the
   two outputs must be equal bit for bit.

   Timing: each layer over 20 runs after warm-up, bq_synchronize and clock_gettime around
   them (the public API has no device events). The float matmul on the GPU would need
   cuBLAS, which this program does not link: only our layers are timed, and the host
   reference's time is printed as context, not as a comparison.

   Exit status: 0 when every check passes, 1 when one fails, 77 (skipped) when there is no
   usable CUDA driver or device.
   Build: cc -std=c11 -ffp-contract=off -I.. w8a8_linear.c -ldl -lpthread -lm */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define M 64
#define N 1024
#define K 1024
#define ITERS 20
#define MAX_REL_ERR 2e-2 /* this data (int8 weights and activations of uniform values) lands near 5.5e-3 */

static const char *prog = "w8a8_linear";

/* Stops the program on an error; no driver or no device is a skip (exit 77). */
static void check(bq_status st, const char *what)
{
  if (st == BQ_SUCCESS) return;
  if (st == BQ_ERROR_NO_DRIVER || st == BQ_ERROR_NO_DEVICE || st == BQ_ERROR_DRIVER_TOO_OLD) {
    fprintf(stderr, "%s: skipped, no usable CUDA driver or device (%s): %s\n", prog, what, bq_last_error());
    exit(77);
  }
  fprintf(stderr, "%s: %s failed: %s: %s\n", prog, what, bq_status_name(st), bq_last_error());
  exit(1);
}

/* The workspace a call needs; an invalid call is reported here and again by the run. */
static size_t workspace_bytes(const bq_plan *plan, const bq_args *args)
{
  size_t bytes = 0;
  if (bq_plan_workspace_size(plan, args, &bytes) != BQ_SUCCESS) fprintf(stderr, "%s\n", bq_last_error());
  return bytes;
}

static void *dev_alloc(size_t bytes)
{
  void *p = NULL;
  check(bq_malloc(&p, bytes), "bq_malloc");
  return p;
}

static void *host_alloc(size_t bytes)
{
  void *p = malloc(bytes);
  if (!p) {
    fprintf(stderr, "%s: out of host memory\n", prog);
    exit(1);
  }
  return p;
}

static uint64_t rng = 0x5eed;
static double uniform(void) /* splitmix64, [-1, 1) */
{
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-52 - 1.0;
}

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static bq_plan *select_plan(const bq_desc *d, const char *what)
{
  bq_plan *p = NULL;
  check(bq_plan_select(d, &p), what);
  return p;
}

/* runs a plan with a workspace of its own size (allocated and freed around the run) */
static void run_plan(const bq_plan *p, const bq_args *a, void *ws, size_t ws_cap, const char *what)
{
  size_t need = workspace_bytes(p, a);
  if (need > ws_cap) {
    fprintf(stderr, "%s: %s needs %zu workspace bytes, %zu allocated\n", prog, what, need, ws_cap);
    exit(1);
  }
  check(bq_plan_run(p, a, need ? ws : NULL, need, NULL), what);
}

/* relative Frobenius error of y against the double reference */
static double rel_error(const float *y, const double *ref)
{
  double num = 0, den = 0;
  for (int i = 0; i < M * N; i++) {
    double e = (double)y[i] - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  return sqrt(num / den);
}

int main(void)
{
  float *x = host_alloc(sizeof(float) * M * K), *w = host_alloc(sizeof(float) * N * K);
  float *bias = host_alloc(sizeof(float) * N);
  float *y_ql = host_alloc(sizeof(float) * M * N), *y_sq = host_alloc(sizeof(float) * M * N);
  double *ref = host_alloc(sizeof(double) * M * N);

  /* weights: each output channel its own magnitude; activations: each token its own */
  for (int n = 0; n < N; n++) {
    double mag = 0.02 * (1 + n % 7);
    for (int k = 0; k < K; k++) w[n * K + k] = (float)(mag * uniform());
    bias[n] = (float)(0.1 * uniform());
  }
  for (int m = 0; m < M; m++) {
    double mag = ldexp(1.0, m % 9 - 4);
    for (int k = 0; k < K; k++) x[m * K + k] = (float)(mag * uniform());
  }

  /* the first call that needs the GPU: no driver or no device ends here with 77 */
  void *dx = dev_alloc(sizeof(float) * M * K), *dw = dev_alloc(sizeof(float) * N * K);
  void *dbias = dev_alloc(sizeof(float) * N), *dwq = dev_alloc((size_t)N * K), *dws = dev_alloc(sizeof(float) * N);
  void *dxq = dev_alloc((size_t)M * K), *dxs = dev_alloc(sizeof(float) * M);
  void *dy_ql = dev_alloc(sizeof(float) * M * N), *dy_sq = dev_alloc(sizeof(float) * M * N);
  check(bq_memcpy_to_device(dx, x, sizeof(float) * M * K), "copy x");
  check(bq_memcpy_to_device(dw, w, sizeof(float) * N * K), "copy W");
  check(bq_memcpy_to_device(dbias, bias, sizeof(float) * N), "copy bias");

  /* dynamic quantize per token: W's rows (output channels) and x's rows (tokens) */
  bq_desc dq = {.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32,
                .int_type = BQ_S8, .scale_type = BQ_F32, .asymmetric = 0};
  bq_desc ql = {.op = BQ_QUANTIZED_LINEAR, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32,
                .out_type = BQ_F32, .int_type = BQ_S8, .scale_type = BQ_F32, .asymmetric = 0};
  bq_desc sq = {.op = BQ_SMOOTHQUANT_LINEAR, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32,
                .out_type = BQ_F32, .int_type = BQ_S8, .scale_type = BQ_F32, .asymmetric = 0};
  bq_plan *p_dq = select_plan(&dq, "select dynamic quantize"), *p_ql = select_plan(&ql, "select QuantizedLinear");
  bq_plan *p_sq = select_plan(&sq, "select SmoothQuantLinear");
  printf("QuantizedLinear:   %s\nSmoothQuantLinear: %s\nactivations:       %s\n", bq_plan_sku(p_ql),
         bq_plan_sku(p_sq), bq_plan_sku(p_dq));

  bq_args wq = {.x = dw, .y = dwq, .rows = N, .cols = K, .out_scales = dws};
  bq_args xq = {.x = dx, .y = dxq, .rows = M, .cols = K, .out_scales = dxs};
  bq_args a_ql = {.x = dx, .y = dy_ql, .rows = M, .cols = K, .n = N, .w = dwq, .w_scales = dws, .bias = dbias};
  bq_args a_sq = {.x = dxq, .y = dy_sq, .rows = M, .cols = K, .n = N, .w = dwq, .w_scales = dws, .bias = dbias,
                  .scales = dxs};
  size_t ws_cap = workspace_bytes(p_ql, &a_ql);
  if (workspace_bytes(p_dq, &wq) > ws_cap) ws_cap = workspace_bytes(p_dq, &wq);
  if (workspace_bytes(p_dq, &xq) > ws_cap) ws_cap = workspace_bytes(p_dq, &xq);
  if (workspace_bytes(p_sq, &a_sq) > ws_cap) ws_cap = workspace_bytes(p_sq, &a_sq);
  void *ws = ws_cap ? dev_alloc(ws_cap) : NULL;

  run_plan(p_dq, &wq, ws, ws_cap, "quantize W per output channel");
  run_plan(p_ql, &a_ql, ws, ws_cap, "QuantizedLinear");
  run_plan(p_dq, &xq, ws, ws_cap, "quantize x per token");
  run_plan(p_sq, &a_sq, ws, ws_cap, "SmoothQuantLinear");
  check(bq_synchronize(NULL), "bq_synchronize");
  check(bq_memcpy_to_host(y_ql, dy_ql, sizeof(float) * M * N), "copy y (QuantizedLinear)");
  check(bq_memcpy_to_host(y_sq, dy_sq, sizeof(float) * M * N), "copy y (SmoothQuantLinear)");

  /* the float layer from the original weights, in double */
  double t0 = now_us();
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)x[m * K + k] * (double)w[n * K + k];
      ref[m * N + n] = acc + (double)bias[n];
    }
  double host_us = now_us() - t0;

  int fail = 0;
  double e_ql = rel_error(y_ql, ref), e_sq = rel_error(y_sq, ref);
  printf("[M, N, K] = [%d, %d, %d]: relative Frobenius error against the float layer\n", M, N, K);
  printf("  QuantizedLinear   %.3e\n  SmoothQuantLinear %.3e   (bound %.0e)\n", e_ql, e_sq, MAX_REL_ERR);
  if (!(e_ql <= MAX_REL_ERR) || !(e_sq <= MAX_REL_ERR)) {
    fprintf(stderr, "%s: FAIL: the error exceeds %g\n", prog, MAX_REL_ERR);
    fail = 1;
  }
  int differ = 0, first = -1;
  for (int i = 0; i < M * N; i++)
    if (memcmp(&y_ql[i], &y_sq[i], sizeof(float))) {
      if (first < 0) first = i;
      differ++;
    }
  if (differ) {
    fprintf(stderr, "%s: FAIL: %d outputs differ between QuantizedLinear and SmoothQuantLinear; first y[%d][%d]: "
            "%.9g vs %.9g\n", prog, differ, first / N, first % N, y_ql[first], y_sq[first]);
    fail = 1;
  } else {
    printf("  QuantizedLinear and SmoothQuantLinear agree bit for bit (%d outputs)\n", M * N);
  }

  /* timing: 3 warm-up runs, then ITERS timed */
  double us[3];
  for (int which = 0; which < 3; which++) {
    for (int it = 0; it < 3 + ITERS; it++) {
      if (it == 3) {
        check(bq_synchronize(NULL), "bq_synchronize");
        t0 = now_us();
      }
      if (which == 0) run_plan(p_ql, &a_ql, ws, ws_cap, "QuantizedLinear");
      if (which == 1) run_plan(p_dq, &xq, ws, ws_cap, "quantize x per token");
      if (which >= 1) run_plan(p_sq, &a_sq, ws, ws_cap, "SmoothQuantLinear");
    }
    check(bq_synchronize(NULL), "bq_synchronize");
    us[which] = (now_us() - t0) / ITERS;
  }
  char dev[256] = "";
  check(bq_device_name(dev, sizeof dev), "bq_device_name");
  printf("time a forward on %s (mean of %d, host clock around the stream):\n", dev, ITERS);
  printf("  QuantizedLinear (x f32 -> y)              %8.1f us\n", us[0]);
  printf("  dynamic quantize x + SmoothQuantLinear    %8.1f us\n", us[1]);
  printf("  SmoothQuantLinear alone (x already int8)  %8.1f us\n", us[2]);
  printf("  (context only: the host's double reference took %.0f us)\n", host_us);

  bq_plan_destroy(p_dq);
  bq_plan_destroy(p_ql);
  bq_plan_destroy(p_sq);
  bq_free(dx); bq_free(dw); bq_free(dbias); bq_free(dwq); bq_free(dws); bq_free(dxq); bq_free(dxs);
  bq_free(dy_ql); bq_free(dy_sq);
  if (ws) bq_free(ws);
  free(x); free(w); free(bias); free(y_ql); free(y_sq); free(ref);
  if (fail) return 1;
  printf("%s: OK\n", prog);
  return 0;
}
