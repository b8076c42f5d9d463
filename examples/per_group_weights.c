/* per_group_weights.c - int8 weights per group of 128 with asymmetric zero points.

   A float weight W [N, K] is quantized on the GPU by dynamic quantize per group (u8,
   asymmetric: each group of 128 consecutive elements of a row gets its own f32 scale and
   int32 zero point from its min and max), then dequantized back per group. Checks:
     - scales, zero points, the u8 weights and the dequantized weights equal a host
       computation of the library's contract bit for bit (f32, IEEE operations, round to
       nearest even, no FMA: this file is compiled with -ffp-contract=off):
         lo = min(0, min x), hi = max(0, max x), s = hi == lo ? 1 : (hi - lo) / (qmax - qmin)
         zp = sat(qmin - rne(lo / s)), q = sat(rne(x / s) + zp), back = (q - zp) * s
     - every element's error |back - x| is within half a step, s / 2, plus the roundings of
       the quotient x / s, of the scale and of the product: s/2 * (1 + 2^-10) + (|x| +
       |back|) * 2^-23 (no element is clipped by more than that: the range covers [lo, hi]).
   Prints the largest absolute error, the largest error in steps and the relative
   Frobenius error.
   Exit status: 0 when every check passes, 1 when one fails, 77 (skipped) when there is no
   usable CUDA driver or device.
   Build: cc -std=c11 -ffp-contract=off -I.. per_group_weights.c -ldl -lpthread -lm */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 512
#define K 4096
#define G 128 /* group size */
#define NG (K / G)
#define QMIN 0
#define QMAX 255

static const char *prog = "per_group_weights";

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

static uint64_t rng = 0x6a0;
static double uniform(void) /* splitmix64, [-1, 1) */
{
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-52 - 1.0;
}

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

static int32_t sat(double v) { return v < QMIN ? QMIN : v > QMAX ? QMAX : (int32_t)v; }

int main(void)
{
  const size_t n_el = (size_t)N * K, n_par = (size_t)N * NG;
  float *w = host_alloc(n_el * 4), *back = host_alloc(n_el * 4), *scales = host_alloc(n_par * 4);
  int32_t *zps = host_alloc(n_par * 4);
  unsigned char *q = host_alloc(n_el);

  /* each group its own spread and offset (some groups all positive or all negative), and
     now and then an outlier */
  for (int n = 0; n < N; n++)
    for (int g = 0; g < NG; g++) {
      double spread = 0.01 * (1 + (n + 3 * g) % 5), offset = spread * 1.5 * uniform();
      for (int i = 0; i < G; i++) w[(size_t)n * K + g * G + i] = (float)(offset + spread * uniform());
      if ((n * NG + g) % 17 == 0) w[(size_t)n * K + g * G + (n + g) % G] = (float)(8 * spread);
    }

  /* the first call that needs the GPU: no driver or no device ends here with 77 */
  void *dw = dev_alloc(n_el * 4), *dq = dev_alloc(n_el), *dback = dev_alloc(n_el * 4);
  void *dscales = dev_alloc(n_par * 4), *dzps = dev_alloc(n_par * 4);
  check(bq_memcpy_to_device(dw, w, n_el * 4), "copy W");

  bq_desc d_q = {.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32, .int_type = BQ_U8,
                 .qmin = QMIN, .qmax = QMAX, .scale_type = BQ_F32, .asymmetric = 1};
  bq_args a_q = {.x = dw, .y = dq, .rows = N, .cols = K, .group_size = G, .group_row_stride = NG,
                 .out_scales = dscales, .out_zero_points = dzps};
  run_once(&d_q, &a_q, "dynamic quantize per group");
  bq_desc d_dq = {.op = BQ_DEQUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32, .int_type = BQ_U8,
                  .qmin = QMIN, .qmax = QMAX, .scale_type = BQ_F32};
  bq_args a_dq = {.x = dq, .y = dback, .rows = N, .cols = K, .group_size = G, .group_row_stride = NG,
                  .scales = dscales, .zero_points = dzps};
  run_once(&d_dq, &a_dq, "dequantize per group");
  check(bq_memcpy_to_host(q, dq, n_el), "copy q");
  check(bq_memcpy_to_host(back, dback, n_el * 4), "copy the dequantized weights");
  check(bq_memcpy_to_host(scales, dscales, n_par * 4), "copy scales");
  check(bq_memcpy_to_host(zps, dzps, n_par * 4), "copy zero points");

  long bad_params = 0, bad_q = 0, bad_back = 0, bad_bound = 0;
  double max_abs = 0, max_steps = 0, err2 = 0, ref2 = 0;
  for (int n = 0; n < N; n++)
    for (int g = 0; g < NG; g++) {
      const size_t p = (size_t)n * NG + g, e0 = (size_t)n * K + (size_t)g * G;
      float lo = 0, hi = 0;
      for (int i = 0; i < G; i++) {
        lo = w[e0 + i] < lo ? w[e0 + i] : lo;
        hi = w[e0 + i] > hi ? w[e0 + i] : hi;
      }
      float span = hi - lo, s = hi == lo ? 1.0f : span / (float)(QMAX - QMIN);
      float lq = lo / s;
      int32_t zp = sat((double)QMIN - nearbyintf(lq));
      if (memcmp(&s, &scales[p], 4) || zp != zps[p]) {
        if (!bad_params)
          fprintf(stderr, "%s: FAIL: row %d group %d: expected scale %.9g zero point %d, got %.9g and %d\n", prog, n, g,
                  (double)s, (int)zp, (double)scales[p], (int)zps[p]);
        bad_params++;
      }
      for (int i = 0; i < G; i++) {
        const size_t e = e0 + i;
        float v = w[e] / s;
        int32_t qe = sat((double)nearbyintf(v) + zp);
        float be = (float)(qe - zp) * s;
        if (qe != q[e]) {
          if (!bad_q)
            fprintf(stderr, "%s: FAIL: q[%d][%d] of %.9g: expected %d got %d\n", prog, n, g * G + i, (double)w[e],
                    (int)qe, (int)q[e]);
          bad_q++;
        }
        if (memcmp(&be, &back[e], 4)) {
          if (!bad_back)
            fprintf(stderr, "%s: FAIL: dequantized [%d][%d]: expected %.9g got %.9g\n", prog, n, g * G + i, (double)be,
                    (double)back[e]);
          bad_back++;
        }
        double err = fabs((double)back[e] - (double)w[e]);
        double bound = 0.5 * (double)scales[p] * (1 + 0x1p-10) + (fabs((double)w[e]) + fabs((double)back[e])) * 0x1p-23;
        if (!(err <= bound)) {
          if (!bad_bound)
            fprintf(stderr, "%s: FAIL: [%d][%d]: |%.9g - %.9g| = %.3g exceeds %.3g (scale %.6g)\n", prog, n, g * G + i,
                    (double)back[e], (double)w[e], err, bound, (double)scales[p]);
          bad_bound++;
        }
        if (err > max_abs) max_abs = err;
        if (err / scales[p] > max_steps) max_steps = err / scales[p];
        err2 += err * err;
        ref2 += (double)w[e] * w[e];
      }
    }

  printf("W [%d, %d] in u8 groups of %d with asymmetric zero points (%d scales and zero points)\n", N, K, G,
         (int)n_par);
  printf("  bytes: %zu f32 -> %zu (u8 + f32 scale + int32 zero point a group)\n", n_el * 4, n_el + n_par * 8);
  printf("  round trip: max |error| %.3e, max error %.4f steps (bound 0.5), relative Frobenius %.3e\n", max_abs,
         max_steps, sqrt(err2 / ref2));
  if (bad_params || bad_q || bad_back || bad_bound)
    fprintf(stderr, "%s: FAIL: %ld parameters, %ld quantized and %ld dequantized elements differ from the host; "
            "%ld elements exceed the error bound\n", prog, bad_params, bad_q, bad_back, bad_bound);

  bq_free(dw); bq_free(dq); bq_free(dback); bq_free(dscales); bq_free(dzps);
  free(w); free(back); free(scales); free(zps); free(q);
  if (bad_params || bad_q || bad_back || bad_bound) return 1;
  printf("%s: OK\n", prog);
  return 0;
}
