/* qat_step.c - one quantization-aware training step with fake quantize on the GPU.

   Forward: the weight W [N, K] is fake-quantized per output channel (int8 symmetric,
   scales from each channel's absmax on the host, clipped a little so that the largest
   weights saturate), the activations x [M, K] per tensor (u8 with a zero point, the range
   also clipped). The tiny linear layer y = xq Wq^T and a squared-error loss run on the
   host from the fake-quantized values copied back. Backward: the loss's gradients with
   respect to xq and Wq go through fake quantize backward on the GPU (the straight-through
   estimator: dx = dy where the element was not clipped, else 0).

   Checks, bit for bit against a host computation of the library's contract (f32, IEEE
   division, round to nearest even, no FMA: this file is compiled with -ffp-contract=off):
     forward   y  = (sat(rne(x / s) + zp, qmin, qmax) - zp) * s
     backward  dx = (qmin <= rne(x / s) + zp <= qmax) ? dy : +0
   Exit status: 0 when every check passes, 1 when one fails, 77 (skipped) when there is no
   usable CUDA driver or device.
   Build: cc -std=c11 -ffp-contract=off -I.. qat_step.c -ldl -lpthread -lm */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 32  /* batch */
#define K 256 /* in features */
#define N 128 /* out features */
#define W_QMIN (-128)
#define W_QMAX 127
#define X_QMIN 0
#define X_QMAX 255
#define CLIP 0.9f /* ranges are this fraction of the observed ones */
#define LR 0.1f

static const char *prog = "qat_step";

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

static uint64_t rng = 0x9a7;
static double uniform(void) /* splitmix64, [-1, 1) */
{
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-52 - 1.0;
}

/* Selects a plan and runs it once on the default stream (with the workspace it asks for). */
static void run_once(const bq_desc *d, const bq_args *a, const char *what)
{
  bq_plan *p = NULL;
  check(bq_plan_select(d, &p), what);
  size_t need = workspace_bytes(p, a);
  void *ws = need ? dev_alloc(need) : NULL;
  check(bq_plan_run(p, a, ws, need, NULL), what);
  check(bq_synchronize(NULL), what);
  if (ws) bq_free(ws);
  bq_plan_destroy(p);
}

/* The contract in f32: q = sat(rne(x / s) + zp); *keep = whether rne(x / s) + zp was in
   range (the STE mask); returns the fake-quantized value (q - zp) * s. */
static float fake_quantize(float x, float s, int32_t zp, int qmin, int qmax, int *keep)
{
  float v = x / s;                 /* IEEE division in f32 */
  double r = (double)nearbyintf(v) + zp; /* rne (the default rounding mode), + zp exactly */
  *keep = r >= qmin && r <= qmax;  /* false for NaN */
  double q = r != r ? zp : r < qmin ? qmin : r > qmax ? qmax : r;
  return (float)(q - zp) * s;      /* q - zp is exact in f32; one rounding of the product */
}

/* counts elements whose bits differ; prints the first */
static int compare_bits(const char *name, const float *want, const float *got, int n)
{
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (memcmp(&want[i], &got[i], sizeof(float))) {
      if (!bad) fprintf(stderr, "%s: FAIL: %s[%d]: expected %.9g got %.9g\n", prog, name, i, want[i], got[i]);
      bad++;
    }
  if (bad) fprintf(stderr, "%s: FAIL: %s: %d of %d elements differ\n", prog, name, bad, n);
  return bad;
}

int main(void)
{
  static float w[N * K], x[M * K], ws[N], wq[N * K], xq[M * K], wq_host[N * K], xq_host[M * K];
  static float target[M * N], dy[M * N], g_xq[M * K], g_wq[N * K];
  static float gx[M * K], gw[N * K], gx_host[M * K], gw_host[N * K];
  static int keep_w[N * K], keep_x[M * K];

  for (int i = 0; i < N * K; i++) w[i] = (float)(0.05 * uniform() * (1 + (i / K) % 4));
  for (int i = 0; i < M * K; i++) x[i] = (float)(0.5 + uniform()); /* offset: the zero point is not 0 */
  for (int i = 0; i < M * N; i++) target[i] = (float)uniform();

  /* quantization parameters on the host: per channel s = CLIP * absmax / qmax (symmetric);
     per tensor s = CLIP * (hi - lo) / (qmax - qmin), zp = qmin - rne(CLIP * lo / s) */
  for (int n = 0; n < N; n++) {
    float amax = 0;
    for (int k = 0; k < K; k++) amax = fabsf(w[n * K + k]) > amax ? fabsf(w[n * K + k]) : amax;
    ws[n] = amax > 0 ? CLIP * amax / (float)W_QMAX : 1.0f;
  }
  float lo = 0, hi = 0;
  for (int i = 0; i < M * K; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  float xs = hi > lo ? CLIP * (hi - lo) / (float)(X_QMAX - X_QMIN) : 1.0f;
  int32_t xzp = X_QMIN - (int32_t)nearbyintf(CLIP * lo / xs);
  xzp = xzp < X_QMIN ? X_QMIN : xzp > X_QMAX ? X_QMAX : xzp;

  /* the first call that needs the GPU: no driver or no device ends here with 77 */
  float *dw = dev_alloc(sizeof w), *dx = dev_alloc(sizeof x), *dws = dev_alloc(sizeof ws);
  float *dwq = dev_alloc(sizeof wq), *dxq = dev_alloc(sizeof xq);
  float *dg_wq = dev_alloc(sizeof g_wq), *dg_xq = dev_alloc(sizeof g_xq), *dgw = dev_alloc(sizeof gw);
  float *dgx = dev_alloc(sizeof gx);
  check(bq_memcpy_to_device(dw, w, sizeof w), "copy W");
  check(bq_memcpy_to_device(dx, x, sizeof x), "copy x");
  check(bq_memcpy_to_device(dws, ws, sizeof ws), "copy the weight scales");

  /* forward: fake quantize W per output channel (axis 0 of [N, K]) and x per tensor */
  bq_desc d_w = {.op = BQ_FAKE_QUANTIZE, .direction = BQ_FORWARD, .granularity = BQ_PER_CHANNEL,
                 .float_type = BQ_F32, .int_type = BQ_S8, .qmin = W_QMIN, .qmax = W_QMAX, .scale_type = BQ_F32};
  bq_desc d_x = {.op = BQ_FAKE_QUANTIZE, .direction = BQ_FORWARD, .granularity = BQ_PER_TENSOR,
                 .float_type = BQ_F32, .int_type = BQ_U8, .qmin = X_QMIN, .qmax = X_QMAX, .scale_type = BQ_F32};
  bq_args a_w = {.x = dw, .y = dwq, .rank = 2, .shape = {N, K}, .axis = 0, .scales = dws, .zero_points = NULL};
  bq_args a_x = {.x = dx, .y = dxq, .numel = M * K, .scale = xs, .zero_point = xzp};
  run_once(&d_w, &a_w, "fake quantize W (forward)");
  run_once(&d_x, &a_x, "fake quantize x (forward)");
  check(bq_memcpy_to_host(wq, dwq, sizeof wq), "copy Wq");
  check(bq_memcpy_to_host(xq, dxq, sizeof xq), "copy xq");

  int bad = 0, clipped_w = 0, clipped_x = 0;
  for (int i = 0; i < N * K; i++) {
    wq_host[i] = fake_quantize(w[i], ws[i / K], 0, W_QMIN, W_QMAX, &keep_w[i]);
    clipped_w += !keep_w[i];
  }
  for (int i = 0; i < M * K; i++) {
    xq_host[i] = fake_quantize(x[i], (float)a_x.scale, xzp, X_QMIN, X_QMAX, &keep_x[i]);
    clipped_x += !keep_x[i];
  }
  bad += compare_bits("Wq (fake quantize forward, per channel)", wq_host, wq, N * K);
  bad += compare_bits("xq (fake quantize forward, per tensor)", xq_host, xq, M * K);

  /* the layer and the loss on the host: y = xq Wq^T, L = sum((y - t)^2) / (2 M N) */
  double loss = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)xq[m * K + k] * (double)wq[n * K + k];
      double e = acc - target[m * N + n];
      loss += e * e;
      dy[m * N + n] = (float)(e / (M * N));
    }
  loss /= 2.0 * M * N;
  /* dL/dxq = dy Wq, dL/dWq = dy^T xq */
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++) {
      double acc = 0;
      for (int n = 0; n < N; n++) acc += (double)dy[m * N + n] * (double)wq[n * K + k];
      g_xq[m * K + k] = (float)acc;
    }
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      double acc = 0;
      for (int m = 0; m < M; m++) acc += (double)dy[m * N + n] * (double)xq[m * K + k];
      g_wq[n * K + k] = (float)acc;
    }

  /* backward: the straight-through estimator on the GPU, against the saved forward inputs */
  check(bq_memcpy_to_device(dg_wq, g_wq, sizeof g_wq), "copy dL/dWq");
  check(bq_memcpy_to_device(dg_xq, g_xq, sizeof g_xq), "copy dL/dxq");
  d_w.direction = BQ_BACKWARD;
  d_x.direction = BQ_BACKWARD;
  bq_args b_w = a_w, b_x = a_x;
  b_w.y = NULL;
  b_w.dy = dg_wq;
  b_w.dx = dgw;
  b_x.y = NULL;
  b_x.dy = dg_xq;
  b_x.dx = dgx;
  run_once(&d_w, &b_w, "fake quantize W (backward)");
  run_once(&d_x, &b_x, "fake quantize x (backward)");
  check(bq_memcpy_to_host(gw, dgw, sizeof gw), "copy dL/dW");
  check(bq_memcpy_to_host(gx, dgx, sizeof gx), "copy dL/dx");
  for (int i = 0; i < N * K; i++) gw_host[i] = keep_w[i] ? g_wq[i] : 0.0f;
  for (int i = 0; i < M * K; i++) gx_host[i] = keep_x[i] ? g_xq[i] : 0.0f;
  bad += compare_bits("dL/dW (fake quantize backward, per channel)", gw_host, gw, N * K);
  bad += compare_bits("dL/dx (fake quantize backward, per tensor)", gx_host, gx, M * K);

  /* the step itself: SGD on the float (master) weights */
  double upd = 0;
  for (int i = 0; i < N * K; i++) {
    float u = LR * gw[i];
    w[i] -= u;
    upd += (double)u * u;
  }

  printf("QAT step: x [%d, %d] per tensor (u8, scale %.6g, zero point %d), W [%d, %d] per channel (s8)\n", M, K,
         (double)xs, (int)xzp, N, K);
  printf("  clipped (gradient masked to 0): %d of %d weights, %d of %d activations\n", clipped_w, N * K, clipped_x,
         M * K);
  printf("  loss %.6f, |SGD update of W| = %.3e\n", loss, sqrt(upd));
  if (clipped_w == 0 || clipped_x == 0) {
    fprintf(stderr, "%s: FAIL: the clipped ranges saturated no element: the masks were not exercised\n", prog);
    bad++;
  }

  bq_free(dw); bq_free(dx); bq_free(dws); bq_free(dwq); bq_free(dxq);
  bq_free(dg_wq); bq_free(dg_xq); bq_free(dgw); bq_free(dgx);
  if (bad) return 1;
  printf("%s: OK (forward and backward bit for bit against the host)\n", prog);
  return 0;
}
