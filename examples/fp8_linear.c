/* fp8_linear.c - an FP8 linear layer y = x W^T + b on FP8 tensor cores, against the float layer.

   The float weight W [N, K] is quantized on the GPU to e4m3 per output channel (dynamic
   quantize per token over W's rows, f32 scales), the float activations x [M, K] to e4m3
   per token the same way; then BQ_FP8_LINEAR rowwise (per-token x per-channel scales)
   gives y in bf16. Checked on the host:
   - against the float layer computed in double from the ORIGINAL float data (relative
     Frobenius error, bounded: e4m3 keeps 3 mantissa bits, so about 2^-5 per operand);
   - row 7 computed alone (M = 1, the weight-streaming path on sm_90) against the same row
     of the M = 192 call (tiles): the same bits, as the contract's batch invariance says.

   Exit status: 0 when every check passes, 1 when one fails, 77 (skipped) when there is no
   usable CUDA driver or device, or the GPU has no FP8 tensor cores (before sm_89).
   Build: cc -std=c11 -ffp-contract=off -I.. fp8_linear.c -ldl -lpthread -lm */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 192
#define N 512
#define K 1024
#define MAX_REL_ERR 6e-2 /* this data (normal draws) lands near 3e-2 */

static const char *prog = "fp8_linear";

/* Stops the program on an error; no driver, no device or no FP8 tensor cores is a skip. */
static void check(bq_status st, const char *what) {
  if (st == BQ_SUCCESS) return;
  if (st == BQ_ERROR_NO_DRIVER || st == BQ_ERROR_NO_DEVICE || st == BQ_ERROR_DRIVER_TOO_OLD ||
      st == BQ_ERROR_NOT_SUPPORTED) {
    fprintf(stderr, "%s: skipped (%s): %s\n", prog, what, bq_last_error());
    exit(77);
  }
  fprintf(stderr, "%s: %s failed: %s: %s\n", prog, what, bq_status_name(st), bq_last_error());
  exit(1);
}

static float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static double normal(uint64_t *s) { /* Box-Muller on a xorshift draw */
  double u[2];
  for (int i = 0; i < 2; i++) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    u[i] = ((double)(*s >> 11) + 0.5) * 0x1p-53;
  }
  return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* rows x cols floats on the device -> e4m3 codes and one f32 scale a row */
static void quantize_rows(const void *f, int64_t rows, void *codes, void *scales) {
  bq_desc d = {.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32, .int_type = BQ_E4M3};
  bq_plan *plan;
  check(bq_plan_select(&d, &plan), "select the e4m3 quantizer");
  bq_args a = {.x = f, .rows = rows, .cols = K, .y = codes, .out_scales = scales};
  check(bq_plan_run(plan, &a, NULL, 0, NULL), "quantize to e4m3");
  bq_plan_destroy(plan);
}

int main(void) {
  float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K), *bias = malloc(sizeof(float) * N);
  uint16_t *bias16 = malloc(2 * N), *y = malloc(2 * (size_t)M * N), *y7 = malloc(2 * N);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < M * K; i++) x[i] = (float)normal(&s);
  for (int i = 0; i < N * K; i++) w[i] = (float)(normal(&s) * 0.05);
  for (int i = 0; i < N; i++) {
    bias[i] = (float)(normal(&s) * 0.1);
    uint32_t u;
    memcpy(&u, &bias[i], 4);
    bias16[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); /* to bf16, nearest even */
    bias[i] = bf16_to_f32(bias16[i]);
  }
  void *dx, *dw, *dxq, *dwq, *dsa, *dsw, *db, *dy;
  check(bq_malloc(&dx, sizeof(float) * M * K), "bq_malloc");
  check(bq_malloc(&dw, sizeof(float) * N * K), "bq_malloc");
  check(bq_malloc(&dxq, (size_t)M * K), "bq_malloc");
  check(bq_malloc(&dwq, (size_t)N * K), "bq_malloc");
  check(bq_malloc(&dsa, 4 * M), "bq_malloc");
  check(bq_malloc(&dsw, 4 * N), "bq_malloc");
  check(bq_malloc(&db, 2 * N), "bq_malloc");
  check(bq_malloc(&dy, 2 * (size_t)M * N), "bq_malloc");
  check(bq_memcpy_to_device(dx, x, sizeof(float) * M * K), "copy x");
  check(bq_memcpy_to_device(dw, w, sizeof(float) * N * K), "copy w");
  check(bq_memcpy_to_device(db, bias16, 2 * N), "copy bias");
  quantize_rows(dw, N, dwq, dsw); /* per output channel */
  quantize_rows(dx, M, dxq, dsa); /* per token */

  bq_desc d = {.op = BQ_FP8_LINEAR, .granularity = BQ_PER_TOKEN, .out_type = BQ_BF16};
  bq_plan *plan;
  check(bq_plan_select(&d, &plan), "select the FP8 linear layer");
  bq_args a = {.x = dxq, .rows = M, .cols = K, .n = N, .w = dwq, .scales = dsa, .w_scales = dsw, .bias = db, .y = dy};
  check(bq_plan_run(plan, &a, NULL, 0, NULL), "run the FP8 linear layer");
  check(bq_memcpy_to_host(y, dy, 2 * (size_t)M * N), "copy y");
  /* row 7 alone */
  bq_args a7 = a;
  a7.rows = 1;
  a7.x = (const char *)dxq + 7 * K;
  a7.scales = (const float *)dsa + 7;
  check(bq_plan_run(plan, &a7, NULL, 0, NULL), "run row 7 alone");
  check(bq_memcpy_to_host(y7, dy, 2 * N), "copy row 7");
  printf("%s: %s\n", prog, bq_plan_sku(plan));

  double num = 0, den = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double r = bias[n];
      for (int k = 0; k < K; k++) r += (double)x[m * K + k] * w[n * K + k];
      const double e = bf16_to_f32(y[(size_t)m * N + n]) - r;
      num += e * e, den += r * r;
    }
  const double rel = sqrt(num / den);
  const int same = !memcmp(y7, y + 7 * N, 2 * N);
  printf("%s: y = x W^T + b, M %d N %d K %d: relative error %.3g against the float layer (bound %.3g); "
         "row 7 alone %s the same row of the M = %d call\n", prog, M, N, K, rel, MAX_REL_ERR,
         same ? "gives the same bits as" : "DIFFERS FROM", M);
  bq_plan_destroy(plan);
  bq_free(dx), bq_free(dw), bq_free(dxq), bq_free(dwq), bq_free(dsa), bq_free(dsw), bq_free(db), bq_free(dy);
  free(x), free(w), free(bias), free(bias16), free(y), free(y7);
  return rel <= MAX_REL_ERR && same ? 0 : 1;
}
