/* nvfp4_activations.c - RMSNorm straight into NVFP4, scales ready for a block-scaled GEMM.

   A bf16 activation x [M, K] goes through (RMSNorm, then NVFP4) in one pass on the GPU: E2M1
   codes two a byte [M, K / 2], an E4M3 scale for each group of 16 in the 128 x 4 blocked
   layout cuBLASLt and CUTLASS read, and the f32 tensor scale g, computed from the whole
   tensor in a first pass. args.out also keeps the normalized values n (bf16). Checks:
     - the fused output is bit for bit microscaling dynamic quantize of n (the unfused
       pair: mx quantize of the values the fused call wrote), codes, scales and g alike;
     - dequantized back (microscaling dequantize, blocked scales), every element is within
       half an E2M1 step of n: |back - n| <= sc * (the E2M1 step at |n| / sc) / 2 plus the
       roundings, with sc = g * s8 its group's scale; prints the relative Frobenius error.
   Exit status: 0 when every check passes, 1 when one fails, 77 (skipped) when there is no
   usable CUDA driver or device.
   Build: cc -std=c11 -ffp-contract=off -I.. nvfp4_activations.c -ldl -lpthread -lm */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 300 /* rows: past one 128-row tile, so the padding rows are written too */
#define K 2048
#define G 16
#define NG (K / G)
#define SCALE_BYTES (((M + 127) / 128) * 128 * ((NG + 3) / 4) * 4) /* the blocked layout's extent */

static const char *prog = "nvfp4_activations";

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

static void *dev_alloc(size_t bytes)
{
  void *p = NULL;
  check(bq_malloc(&p, bytes), "bq_malloc");
  return p;
}

static float bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f32_to_bf16(float f) /* round to nearest even (finite values here) */
{
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float e4m3_to_f32(uint8_t c) /* the E4M3 scales here are finite and positive */
{
  const int e = (c >> 3) & 15, m = c & 7;
  return e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m / 8.0f, -6);
}
/* the scale byte of group g of row r in the blocked layout */
static size_t blocked_at(int r, int g)
{
  return ((size_t)(r / 128) * ((NG + 3) / 4) + (size_t)(g / 4)) * 512 + (size_t)(r % 32) * 16 + (size_t)((r % 128) / 32) * 4 +
         (size_t)(g % 4);
}

int main(void)
{
  /* inputs: rows of different magnitudes, a weight around 1 */
  uint16_t *hx = malloc((size_t)M * K * 2), *hw = malloc((size_t)K * 2), *hn = malloc((size_t)M * K * 2);
  uint16_t *hback = malloc((size_t)M * K * 2);
  uint8_t *hq = malloc((size_t)M * K / 2), *hq2 = malloc((size_t)M * K / 2);
  uint8_t *hs = malloc(SCALE_BYTES), *hs2 = malloc(SCALE_BYTES);
  if (!hx || !hw || !hn || !hback || !hq || !hq2 || !hs || !hs2) return fprintf(stderr, "%s: out of memory\n", prog), 1;
  uint64_t st = 0x243F6A8885A308D3ull;
  for (size_t i = 0; i < (size_t)M * K; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(st >> 11) * 0x1p-53 - 0.5;
    hx[i] = f32_to_bf16((float)(u * ldexp(1.0, (int)(i / K % 9) - 4)));
  }
  for (int i = 0; i < K; i++) hw[i] = f32_to_bf16(0.5f + (float)(i % 97) / 97.0f);

  void *x = dev_alloc((size_t)M * K * 2), *w = dev_alloc((size_t)K * 2), *n = dev_alloc((size_t)M * K * 2);
  void *q = dev_alloc((size_t)M * K / 2), *s = dev_alloc(SCALE_BYTES), *g = dev_alloc(4);
  void *q2 = dev_alloc((size_t)M * K / 2), *s2 = dev_alloc(SCALE_BYTES), *back = dev_alloc((size_t)M * K * 2);
  check(bq_memcpy_to_device(x, hx, (size_t)M * K * 2), "copy x");
  check(bq_memcpy_to_device(w, hw, (size_t)K * 2), "copy weight");

  /* RMSNorm into NVFP4, blocked scales, g computed (a workspace for the amax passes) */
  bq_desc d = {.op = BQ_RMSNORM_QUANTIZE, .float_type = BQ_BF16, .int_type = BQ_E2M1, .scale_type = BQ_E4M3,
               .scale_layout = BQ_SCALES_BLOCKED};
  bq_plan *fused;
  check(bq_plan_select(&d, &fused), "select the fused plan");
  bq_args a = {.x = x, .y = q, .rows = M, .cols = K, .group_size = G, .out_scales = s, .norm_weight = w,
               .eps = 1e-6, .out = n, .out_tensor_scale = g};
  size_t ws_bytes = 0;
  check(bq_plan_workspace_size(fused, &a, &ws_bytes), "workspace size");
  void *ws = ws_bytes ? dev_alloc(ws_bytes) : NULL;
  check(bq_plan_run(fused, &a, ws, ws_bytes, NULL), "RMSNorm + NVFP4");

  /* the unfused pair: microscaling dynamic quantize of n with the same g */
  bq_desc dq = {.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_BF16, .int_type = BQ_E2M1,
                .scale_type = BQ_E4M3, .scale_layout = BQ_SCALES_BLOCKED};
  bq_plan *unfused;
  check(bq_plan_select(&dq, &unfused), "select the dynamic quantize plan");
  bq_args b = {.x = n, .y = q2, .rows = M, .cols = K, .group_size = G, .out_scales = s2, .tensor_scale = g};
  check(bq_plan_run(unfused, &b, NULL, 0, NULL), "NVFP4 of n");

  /* and back: microscaling dequantize of the fused codes */
  bq_desc dd = {.op = BQ_DEQUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_BF16, .int_type = BQ_E2M1,
                .scale_type = BQ_E4M3, .scale_layout = BQ_SCALES_BLOCKED};
  bq_plan *deq;
  check(bq_plan_select(&dd, &deq), "select the dequantize plan");
  bq_args c = {.x = q, .y = back, .rows = M, .cols = K, .group_size = G, .scales = s, .tensor_scale = g};
  check(bq_plan_run(deq, &c, NULL, 0, NULL), "dequantize");
  check(bq_synchronize(NULL), "synchronize");

  float hg;
  check(bq_memcpy_to_host(hn, n, (size_t)M * K * 2), "copy n");
  check(bq_memcpy_to_host(hq, q, (size_t)M * K / 2), "copy q");
  check(bq_memcpy_to_host(hq2, q2, (size_t)M * K / 2), "copy q2");
  check(bq_memcpy_to_host(hs, s, SCALE_BYTES), "copy scales");
  check(bq_memcpy_to_host(hs2, s2, SCALE_BYTES), "copy scales2");
  check(bq_memcpy_to_host(hback, back, (size_t)M * K * 2), "copy back");
  check(bq_memcpy_to_host(&hg, g, 4), "copy g");

  int bad = 0;
  if (memcmp(hq, hq2, (size_t)M * K / 2) || memcmp(hs, hs2, SCALE_BYTES)) {
    fprintf(stderr, "%s: FAIL: the fused codes or scales differ from microscaling quantize of n\n", prog);
    bad = 1;
  }
  for (int r = M; r < (M + 127) / 128 * 128; r++) /* the padding rows' scale bytes: 0 */
    for (int gi = 0; gi < NG && !bad; gi++)
      if (hs[blocked_at(r, gi)] != 0) fprintf(stderr, "%s: FAIL: padding row %d group %d not 0\n", prog, r, gi), bad = 1;
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < M && !bad; r++)
    for (int j = 0; j < K; j++) {
      const float v = bf16_to_f32(hn[(size_t)r * K + j]), bk = bf16_to_f32(hback[(size_t)r * K + j]);
      const float sc = hg * e4m3_to_f32(hs[blocked_at(r, j / G)]);
      const float a = fabsf(v) / sc, step = a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f;
      const float tol = (a > 6.0f ? (a - 6.0f) * sc : 0.0f) + sc * step / 2 * (1.0f + 0x1p-7f) + (fabsf(v) + fabsf(bk)) * 0x1p-8f;
      if (!(fabsf(bk - v) <= tol)) {
        fprintf(stderr, "%s: FAIL: row %d col %d: n %g came back %g (scale %g)\n", prog, r, j, v, bk, sc);
        bad = 1;
        break;
      }
      err2 += ((double)bk - v) * ((double)bk - v), ref2 += (double)v * v;
    }
  if (!bad)
    printf("%s: RMSNorm -> NVFP4 [%d, %d] in one pass: bit for bit the unfused pair; tensor scale %g; relative "
           "Frobenius error after dequantize %.4f; OK\n", prog, M, K, (double)hg, sqrt(err2 / ref2));
  bq_plan_destroy(fused), bq_plan_destroy(unfused), bq_plan_destroy(deq);
  void *bufs[] = {x, w, n, q, s, g, q2, s2, back, ws};
  for (int i = 0; i < 10; i++)
    if (bufs[i]) bq_free(bufs[i]);
  free(hx), free(hw), free(hn), free(hback), free(hq), free(hq2), free(hs), free(hs2);
  return bad;
}
