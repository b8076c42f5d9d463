/* tests/test_gpu_fp8_linear.c - the FP8 linear layers (BQ_FP8_LINEAR) on the GPU.

   The tensor cores' FP8 sums are not IEEE f32 sums, so a result is checked against what the
   contract (docs/numerics.md, "FP8 linear layers") guarantees instead of bit for bit:
   - the bound: |acc - S| <= BOUND * A for every output, S the exact sum of the row's
     products and A the sum of their magnitudes (f64 on the CPU), read back through an f32
     output with unit scales and no bias, where y is acc itself; with scales, a bias and a
     narrower output, y within the bound carried through the epilogue's roundings;
   - batch invariance: a row's outputs are the same bits whatever M and whatever tile the
     row falls in (rows computed in a call of M = 300 against the same rows computed alone
     and inside calls of other M, at other row offsets);
   - determinism: two runs give the same bits;
   - everything outside the output (guards, gaps between strided rows) keeps its poison, and
     K == 0 writes the bias exactly.
   Blockwise scales (s_b = sa[m][b] * sw[n / 128][b] per 128-element K block b) bound
   |acc - sum_b s_b S_b| by BOUND * sum_b |s_b| A_b, S_b and A_b the block's sums.
   Cases: e4m3 and e5m2 activations x f32 / f16 / bf16 outputs x tensorwise / rowwise /
   blockwise (row-major and MN-major activation scales) x bias / none, M and N off every tile, K with tails, strided and misaligned operands, on
   the tiles select picks (wgmma on sm_90) and on the mma.sync tiles
   (BARACUDA_QUANT_WGMMA=0). Without a usable CUDA driver/device, or on a GPU older than
   sm_89, every test is skipped. Inputs are drawn fresh each run (BQ_TEST_SEED replays). */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_linear.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"

/* the contract's bound on the accumulator, relative to the sum of |products| (docs/numerics.md) */
#define BOUND 0x1p-9

static void fp8_begin(void) {
  gpu_begin();
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_FP8_LINEAR;
  d.out_type = BQ_BF16;
  bq_plan *p = NULL;
  bq_status st = bq_plan_select(&d, &p);
  if (st == BQ_ERROR_NOT_SUPPORTED) cr_skip_test("%s", bq_last_error()); /* no FP8 tensor cores before sm_89 */
  cr_assert_eq(st, BQ_SUCCESS, "%s", bq_last_error());
  bq_plan_destroy(p);
}

typedef struct fcase {
  bq_dtype at, out;
  int mode, bias, unit; /* mode: REFF8_*; unit: scales 1, no bias (y = acc for an f32 output) */
  int64_t m, n, k, lda, ldy;
  int x_off, y_off;
} fcase;

typedef struct fdata {
  uint8_t *x, *w; /* host [m, lda], [n, k] */
  float *sa, *sw; /* [m] and [n] (blockwise: [m][kb] and [nb][kb], row-major) */
  unsigned char *bias;
} fdata;

static uint8_t code(int e5m2, int band) {
  for (;;) {
    uint8_t b = (uint8_t)rnd();
    if (band) { /* exponents in a band of 8 binades around 1: typical activations and weights */
      const int eb = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, e = bias - 4 + (int)(rnd() % 8);
      b = (uint8_t)((b & 0x80) | (e << eb) | (b & ((1 << eb) - 1)));
    }
    if (e5m2 ? (b & 0x7c) == 0x7c : (b & 0x7f) == 0x7f) continue; /* NaN, infinities */
    return b;
  }
}

static void fill(const fcase *c, fdata *f) {
  const int e5 = c->at == BQ_E5M2;
  f->x = (uint8_t *)calloc((size_t)(c->m * c->lda) + 1, 1);
  f->w = (uint8_t *)calloc((size_t)(c->n * c->k) + 1, 1);
  const int64_t kb = (c->k + 127) / 128, ns = c->mode >= REFF8_BLOCKWISE ? (c->n + 127) / 128 * kb : c->n,
                ms = c->mode >= REFF8_BLOCKWISE ? c->m * kb : c->m;
  f->sa = (float *)calloc((size_t)ms + 1, 4);
  f->sw = (float *)calloc((size_t)ns + 1, 4);
  f->bias = (unsigned char *)calloc((size_t)c->n + 1, 4);
  cr_assert(f->x && f->w && f->sa && f->sw && f->bias);
  for (int64_t r = 0; r < c->m; r++) {
    const int band = (int)(rnd() % 4) != 0; /* a row in four draws from every code */
    for (int64_t j = 0; j < c->lda; j++) f->x[r * c->lda + j] = code(e5, band);
  }
  for (int64_t r = 0; r < c->n; r++) {
    const int band = (int)(rnd() % 4) != 0;
    for (int64_t j = 0; j < c->k; j++) f->w[r * c->k + j] = code(0, band);
  }
  /* (an f16 output's scales small enough that most results are finite) */
  const int lo = c->out == BQ_F16 ? -11 : -6, hi = c->out == BQ_F16 ? -6 : 0;
  for (int64_t i = 0; i < ms; i++) f->sa[i] = c->unit ? 1.0f : (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(lo, hi));
  for (int64_t i = 0; i < ns; i++) f->sw[i] = c->unit ? 1.0f : (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(lo, hi));
  for (int64_t i = 0; i < c->n; i++) ref_store_f(c->out, f->bias, i, (float)((rnd_unit() - 0.5) * 16));
}
static void fdata_free(fdata *f) {
  free(f->x), free(f->w), free(f->sa), free(f->sw), free(f->bias);
}

static void *up(const void *h, size_t bytes) {
  void *d = NULL;
  BQ_OK(bq_malloc(&d, bytes ? bytes : 1));
  if (bytes) BQ_OK(bq_memcpy_to_device(d, h, bytes));
  return d;
}

/* rows [r0, r0 + c->m) of the data (x and sa from row r0) through the plan into the host
   buffer out ([c->m, ldy] elements, guards of 64 either side poisoned and checked) */
static void run_rows(bq_plan *plan, const fcase *c, const fdata *f, int64_t r0, unsigned char *out, const char *what) {
  const size_t ys = ref_dtype_size(c->out);
  const int64_t guard = 64, ytot = guard + c->m * c->ldy + guard;
  const size_t xbytes = (size_t)(c->m * c->lda) + (size_t)c->x_off;
  uint8_t *xh = (uint8_t *)calloc(xbytes + 1, 1);
  memcpy(xh + c->x_off, f->x + r0 * c->lda, (size_t)(c->m * c->lda));
  /* the activation scales of rows r0..: blockwise row-major [m][kb], or MN-major [kb][lds]
     with lds = m rounded up to 4 (the default: args.group_row_stride 0), padding poisoned */
  const int64_t kb = (c->k + 127) / 128, lds = (c->m + 3) / 4 * 4;
  const int blk = c->mode >= REFF8_BLOCKWISE;
  const size_t sab = blk ? (size_t)(kb * lds) * 4 + 4 : (size_t)c->m * 4 + 4;
  float *sah = (float *)malloc(sab);
  memset(sah, 0xFF, sab);
  for (int64_t m = 0; m < c->m; m++)
    for (int64_t b = 0; b < (blk ? kb : 1); b++)
      sah[c->mode == REFF8_BLOCKWISE_MN ? b * lds + m : m * (blk ? kb : 1) + b] =
          f->sa[c->mode == REFF8_TENSORWISE ? 0 : (r0 + m) * (blk ? kb : 1) + b];
  const size_t swb = (size_t)(blk ? (c->n + 127) / 128 * kb : c->n) * 4 + 4;
  void *dx = up(xh, xbytes), *dw = up(f->w, (size_t)(c->n * c->k)), *dsa = up(sah, sab), *dsw = up(f->sw, swb),
       *db = up(f->bias, (size_t)c->n * ys);
  free(sah);
  unsigned char *poison = (unsigned char *)malloc((size_t)(ytot + c->y_off) * ys);
  memset(poison, 0xA5, (size_t)(ytot + c->y_off) * ys);
  void *dy = up(poison, (size_t)(ytot + c->y_off) * ys);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = c->k ? (const char *)dx + c->x_off : NULL;
  a.w = c->k ? dw : NULL;
  a.y = (char *)dy + (size_t)(guard + c->y_off) * ys;
  a.rows = c->m, a.cols = c->k, a.n = c->n;
  a.x_row_stride = c->lda, a.y_row_stride = c->ldy;
  a.scales = dsa, a.w_scales = dsw;
  a.bias = c->bias ? db : NULL;
  BQ_OK(bq_plan_run(plan, &a, NULL, 0, NULL), "%s", what);
  BQ_OK(bq_synchronize(NULL), "%s", what);
  unsigned char *all = (unsigned char *)malloc((size_t)(ytot + c->y_off) * ys);
  BQ_OK(bq_memcpy_to_host(all, dy, (size_t)(ytot + c->y_off) * ys), "%s", what);
  /* the poison stands outside the problem's elements */
  for (int64_t i = 0; i < ytot; i++) {
    const int64_t r = (i - guard) / c->ldy, col = (i - guard) % c->ldy;
    const int inside = i >= guard && r < c->m && col < c->n;
    if (!inside)
      for (size_t b = 0; b < ys; b++)
        cr_assert_eq(all[(size_t)(i + c->y_off) * ys + b], 0xA5, "y element %lld (outside the output) was written | %s",
                     (long long)(i - guard), what);
  }
  memcpy(out, all + (size_t)(guard + c->y_off) * ys, (size_t)(c->m * c->ldy) * ys);
  free(all), free(poison), free(xh);
  bq_free(dx), bq_free(dw), bq_free(dsa), bq_free(dsw), bq_free(db), bq_free(dy);
}

static bq_plan *plan_of(const fcase *c) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_FP8_LINEAR;
  d.granularity = c->mode == REFF8_TENSORWISE ? BQ_PER_TENSOR : c->mode == REFF8_ROWWISE ? BQ_PER_TOKEN : BQ_PER_BLOCK;
  d.scale_layout = c->mode == REFF8_BLOCKWISE_MN ? BQ_SCALES_MN_MAJOR : BQ_SCALES_ROW_MAJOR;
  d.out_type = c->out;
  d.int_type = c->at;
  return plan_get(&d, "fp8_linear"); /* (each test runs in a process of its own: its environment's plans) */
}

static double g_worst; /* the largest |acc - S| / A seen (unit f32 cases) */
static const char *const MODES[] = {"tensorwise", "rowwise", "blockwise", "blockwise-mn"};

/* every output of a case within the bound; returns the outputs (host, [m, ldy]) */
/* the layer's output (outputs poisoned and guarded), checked against the reference unless
   `check` is 0 */
static unsigned char *run_case(const fcase *c, const fdata *f, bq_plan *plan, const char *tiles, int check) {
  char what[320];
  snprintf(what, sizeof what, "seed=0x%llx %s a=%s out=%s %s bias=%d unit=%d M=%lld N=%lld K=%lld lda=%lld ldy=%lld "
           "x_off=%d y_off=%d", (unsigned long long)g_seed, tiles, ref_dtype_name(c->at), ref_dtype_name(c->out),
           MODES[c->mode], c->bias, c->unit, (long long)c->m, (long long)c->n, (long long)c->k,
           (long long)c->lda, (long long)c->ldy, c->x_off, c->y_off);
  const size_t ys = ref_dtype_size(c->out);
  unsigned char *y = (unsigned char *)malloc((size_t)(c->m * c->ldy) * ys + 1);
  run_rows(plan, c, f, 0, y, what);
  if (!check) return y;
  reff8_problem P;
  memset(&P, 0, sizeof P);
  P.m = c->m, P.n = c->n, P.k = c->k, P.lda = c->lda, P.ldy = c->ldy;
  P.a_e5m2 = c->at == BQ_E5M2;
  P.a = f->x, P.w = f->w;
  const double out_eps = c->out == BQ_F32 ? 0x1p-24 : c->out == BQ_F16 ? 0x1p-11 : 0x1p-8;
  const double out_tiny = c->out == BQ_F32 ? 0x1p-149 : c->out == BQ_F16 ? 0x1p-24 : 0x1p-133;
  for (int64_t m = 0; m < c->m; m++)
    for (int64_t n = 0; n < c->n; n++) {
      const double got = ref_load_d(c->out, y, m * c->ldy + n);
      /* blockwise: s and abs_sum carry each block's scale s_b (sa = sw = 1 after) */
      const int blk = c->mode >= REFF8_BLOCKWISE;
      const int64_t kb = (c->k + 127) / 128;
      double s = 0, abs_sum = 0;
      for (int64_t k = 0; k < c->k; k++) {
        const double p = reff8_product(&P, m, n, k) *
                         (blk ? (double)(f->sa[m * kb + k / 128] * f->sw[(n / 128) * kb + k / 128]) : 1.0);
        s += p, abs_sum += fabs(p);
      }
      const double sa = blk ? 1 : f->sa[c->mode ? m : 0], sw = blk ? 1 : f->sw[c->mode ? n : 0];
      const double b = c->bias ? ref_load_d(c->out, f->bias, n) : 0;
      if (c->k == 0) {
        cr_assert(got == b && signbit(got) == signbit(b), "M %lld N %lld: K == 0 wrote %a, not the bias %a | %s",
                  (long long)m, (long long)n, got, b, what);
        continue;
      }
      if (c->unit && !blk && c->out == BQ_F32 && !c->bias && abs_sum > 0) {
        const double r = fabs(got - s) / abs_sum;
        if (r > g_worst) g_worst = r;
      }
      /* the accumulator's bound through acc * sa * sw + bias, each step rounded in f32
         (relative 2^-24 each), then the output's rounding (blockwise: the fma of each block
         rounds once, relative 2^-24 of the sums so far) */
      const double v = s * sa * sw + b;
      const double tol = (BOUND + (blk ? (double)kb * 0x1p-23 : 0)) * abs_sum * sa * sw +
                         0x1p-22 * (fabs(s * sa * sw) + fabs(b)) + out_eps * fabs(v) + out_tiny;
      /* past the output's largest finite value (rounding included) it is infinite, with v's sign */
      const double top = c->out == BQ_F32 ? 0x1.ffffffp+127 : c->out == BQ_F16 ? 65520.0 : 0x1.ffp+127;
      if (fabs(v) - tol >= top) {
        cr_assert(isinf(got) && signbit(got) == signbit(v), "M %lld N %lld: y = %a, the exact result %a overflows | %s",
                  (long long)m, (long long)n, got, v, what);
        continue;
      }
      if (isinf(got) && fabs(v) + tol >= top && signbit(got) == signbit(v)) continue; /* at the edge: either */
      cr_assert(isfinite(got) && fabs(got - v) <= tol,
                "M %lld N %lld: y = %a, the exact result %a (sum %a of |products| %a): off by %.3g, over %.3g | %s",
                (long long)m, (long long)n, got, v, s, abs_sum, fabs(got - v), tol, what);
    }
  return y;
}
static unsigned char *check_case(const fcase *c, const fdata *f, bq_plan *plan, const char *tiles) {
  return run_case(c, f, plan, tiles, 1);
}

static const bq_dtype ATS[2] = {BQ_E4M3, BQ_E5M2}, OUTS[3] = {BQ_F32, BQ_F16, BQ_BF16};

static void cases_on(const char *tiles) {
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 100}, {130, 260, 1000}, {257, 129, 4096}, {64, 512, 128},
                                      {3, 5, 0}, {200, 300, 4097}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int i = 0; i < 2; i++)
      for (int o = 0; o < 3; o++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.at = ATS[i], c.out = OUTS[o];
        c.m = shapes[s][0], c.n = shapes[s][1], c.k = shapes[s][2];
        c.mode = (int)((s + (size_t)o) % 4);
        c.unit = o == 0 && (s % 2 == 0);
        c.bias = !c.unit && (int)((s + (size_t)i) % 2);
        c.lda = c.k + (s == 2 ? 16 : s == 4 ? 3 : 0);
        c.ldy = c.n + (s == 3 ? 5 : 0);
        c.x_off = s == 6;
        c.y_off = s == 1;
        fdata f;
        fill(&c, &f);
        bq_plan *p = plan_of(&c);
        free(check_case(&c, &f, p, tiles));
        fdata_free(&f);
      }
  cr_log_info("%s: the largest |acc - S| / sum |products| seen: %.3g (2^%.1f); the bound is 2^%d", tiles, g_worst,
              log2(g_worst > 0 ? g_worst : 1e-300), (int)log2(BOUND));
}

TestSuite(fp8_linear, .init = fp8_begin);

Test(fp8_linear, within_the_bound, .timeout = 600) { cases_on("default tiles"); }

static void no_wgmma(void) {
  setenv("BARACUDA_QUANT_WGMMA", "0", 1);
  fp8_begin();
}
Test(fp8_linear, within_the_bound_mma_sync, .init = no_wgmma, .timeout = 600) { cases_on("mma.sync tiles"); }

/* a row's bits do not depend on M, the tile it falls in, or the run */
static void invariance(const char *tiles) {
  static const int modes[4] = {REFF8_ROWWISE, REFF8_TENSORWISE, REFF8_BLOCKWISE_MN, REFF8_BLOCKWISE};
  for (int o = 0; o < 4; o++) {
    fcase c;
    memset(&c, 0, sizeof c);
    c.at = o == 2 ? BQ_E5M2 : BQ_E4M3, c.out = OUTS[o % 3], c.mode = modes[o], c.bias = o != 0;
    c.m = 300, c.n = 300, c.k = o % 2 ? 1500 : 1504, c.lda = c.k, c.ldy = c.n; /* (1504: the TMA's tiles) */
    fdata f;
    fill(&c, &f);
    bq_plan *p = plan_of(&c);
    const size_t ys = ref_dtype_size(c.out), row = (size_t)c.ldy * ys;
    char what[200];
    snprintf(what, sizeof what, "seed=0x%llx %s out=%s %s", (unsigned long long)g_seed, tiles, ref_dtype_name(c.out),
             MODES[c.mode]);
    unsigned char *all = (unsigned char *)malloc((size_t)c.m * row), *again = (unsigned char *)malloc((size_t)c.m * row);
    run_rows(p, &c, &f, 0, all, what);
    run_rows(p, &c, &f, 0, again, what);
    cr_assert(!memcmp(all, again, (size_t)c.m * row), "two runs differ | %s", what);
    static const int64_t parts[][2] = {{0, 1}, {299, 1}, {13, 77}, {127, 2}, {128, 130}, {200, 100}, {5, 129}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
      fcase s = c;
      s.m = parts[i][1];
      unsigned char *part = (unsigned char *)malloc((size_t)s.m * row);
      run_rows(p, &s, &f, parts[i][0], part, what);
      for (int64_t r = 0; r < s.m; r++)
        cr_assert(!memcmp(part + (size_t)r * row, all + (size_t)(parts[i][0] + r) * row, (size_t)c.n * ys),
                  "row %lld computed in a call of M = %lld (from row %lld) differs from the same row in M = 300 | %s",
                  (long long)(parts[i][0] + r), (long long)s.m, (long long)parts[i][0], what);
      free(part);
    }
    free(all), free(again);
    fdata_free(&f);
  }
}
Test(fp8_linear, batch_invariant, .timeout = 600) { invariance("default tiles"); }

/* sm_90a: bq_fp8_tma's tiles (x and w 16-byte aligned) and bq_fp8_wgmma's compute the same
   bits in every scale mode, type and output, the TMA's within the bound (the cp.async tiles'
   bound is within_the_bound's) */
Test(fp8_linear, tma_tiles_equal_cp_async_tiles, .timeout = 600) {
  bq_plan *probe = plan_of(&(fcase){.at = BQ_E4M3, .out = BQ_BF16});
  if (!probe->linear.wgmma) cr_skip_test("no wgmma on this GPU: neither tile runs");
  static const int64_t shapes[][3] = {{260, 300, 1024}, {129, 520, 1152}, {520, 257, 1040}, {65, 128, 16}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int i = 0; i < 2; i++)
      for (int o = 0; o < 3; o++) {
        fcase c;
        memset(&c, 0, sizeof c);
        c.at = ATS[i], c.out = OUTS[o];
        c.m = shapes[s][0], c.n = shapes[s][1], c.k = shapes[s][2];
        c.mode = (int)((s + (size_t)o + (size_t)i) % 4);
        c.bias = (int)((s + (size_t)i) % 2);
        c.lda = c.k + (s == 1 ? 64 : 0);
        c.ldy = c.n + (s == 2 ? 3 : 0);
        fdata f;
        fill(&c, &f);
        bq_plan *p = plan_of(&c);
        bq__fp8_force_config = BQ__FP8_TMA;
        bq__fp8_tma_cap = s % 2 ? 3 : 0; /* (a CTA several tiles) */
        unsigned char *t = check_case(&c, &f, p, "TMA tiles");
        bq__fp8_tma_cap = 0;
        bq__fp8_force_config = BQ__FP8_WGMMA;
        unsigned char *w = run_case(&c, &f, p, "cp.async tiles", 0);
        bq__fp8_force_config = -1;
        const size_t ys = ref_dtype_size(c.out);
        for (int64_t r = 0; r < c.m; r++)
          cr_assert(!memcmp(t + (size_t)(r * c.ldy) * ys, w + (size_t)(r * c.ldy) * ys, (size_t)c.n * ys),
                    "seed=0x%llx %s a=%s out=%s M=%lld N=%lld K=%lld: row %lld differs between the TMA's tiles and "
                    "cp.async's", (unsigned long long)g_seed, MODES[c.mode], ref_dtype_name(c.at),
                    ref_dtype_name(c.out), (long long)c.m, (long long)c.n, (long long)c.k, (long long)r);
        free(t), free(w);
        fdata_free(&f);
      }
}
Test(fp8_linear, batch_invariant_mma_sync, .init = no_wgmma, .timeout = 600) { invariance("mma.sync tiles"); }

/* ---- FP8 QuantizedLinear: bit for bit dynamic quantize, then the FP8 linear layer ---------- */
/* x float [M, K] quantized by the layer (per token, or 1 x 128 groups) and multiplied: the
   same bits as the two ops run one after the other (its own plans of them), on the weight
   streaming (M <= 64; with programmatic dependent launch unless BARACUDA_QUANT_PDL=0) and on
   the tiles, with outputs poisoned and guarded. */
static void ql_case(bq_dtype ft, bq_dtype out, int blockwise, int64_t m, int64_t n, int64_t k, int bias) {
  char what[200];
  snprintf(what, sizeof what, "seed=0x%llx x=%s out=%s %s M=%lld N=%lld K=%lld bias=%d", (unsigned long long)g_seed,
           ref_dtype_name(ft), ref_dtype_name(out), blockwise ? "blockwise" : "rowwise", (long long)m, (long long)n,
           (long long)k, bias);
  const size_t ts = ref_dtype_size(ft), ys = ref_dtype_size(out);
  const int64_t kb = (k + 127) / 128, nsw = blockwise ? (n + 127) / 128 * kb : n, guard = 64;
  unsigned char *x = (unsigned char *)malloc((size_t)(m * k) * ts + 1), *w = (unsigned char *)malloc((size_t)(n * k) + 1);
  float *sw = (float *)malloc((size_t)nsw * 4 + 4);
  unsigned char *b = (unsigned char *)malloc((size_t)n * ys + 1);
  for (int64_t r = 0; r < m; r++) {
    const double mag = ldexp(1.0, (int)rnd_range(-4, 4));
    for (int64_t j = 0; j < k; j++) ref_store_f(ft, x, r * k + j, (float)((rnd_unit() - 0.5) * mag));
  }
  for (int64_t i = 0; i < n * k; i++) w[i] = code(0, 1);
  for (int64_t i = 0; i < nsw; i++) sw[i] = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-8, -4));
  for (int64_t i = 0; i < n; i++) ref_store_f(out, b, i, (float)((rnd_unit() - 0.5) * 4));
  void *dx = up(x, (size_t)(m * k) * ts), *dw = up(w, (size_t)(n * k)), *dsw = up(sw, (size_t)nsw * 4),
       *db = up(b, (size_t)n * ys);
  const size_t ybytes = (size_t)(m * n + 2 * guard) * ys;
  unsigned char *poison = (unsigned char *)malloc(ybytes), *got = (unsigned char *)malloc(ybytes),
                *want = (unsigned char *)malloc(ybytes);
  memset(poison, 0xA5, ybytes);
  void *dy = up(poison, ybytes), *dy2 = up(poison, ybytes);

  /* the layer */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_FP8_QUANTIZED_LINEAR;
  d.granularity = blockwise ? BQ_PER_BLOCK : BQ_PER_TOKEN;
  d.float_type = ft;
  d.out_type = out;
  bq_plan *ql = plan_get(&d, what);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = dx, a.rows = m, a.cols = k, a.n = n, a.w = dw, a.w_scales = dsw, a.bias = bias ? db : NULL;
  a.y = (char *)dy + guard * ys;
  size_t need = 0;
  BQ_OK(bq_plan_workspace_size(ql, &a, &need), "%s", what);
  void *ws = NULL;
  BQ_OK(bq_malloc(&ws, need ? need : 1), "%s", what);
  BQ_OK(bq_plan_run(ql, &a, ws, need, NULL), "%s", what);
  BQ_OK(bq_synchronize(NULL), "%s", what);

  /* the two ops */
  bq_desc q;
  memset(&q, 0, sizeof q);
  q.op = BQ_DYNAMIC_QUANTIZE;
  q.granularity = blockwise ? BQ_PER_GROUP : BQ_PER_TOKEN;
  q.float_type = ft;
  q.int_type = BQ_E4M3;
  q.scale_type = BQ_F32;
  void *xq = NULL, *sa = NULL;
  BQ_OK(bq_malloc(&xq, (size_t)(m * k) + 1), "%s", what);
  BQ_OK(bq_malloc(&sa, (size_t)(m * kb) * 4 + 4), "%s", what);
  bq_args qa;
  memset(&qa, 0, sizeof qa);
  qa.x = dx, qa.y = xq, qa.rows = m, qa.cols = k, qa.out_scales = sa, qa.group_size = blockwise ? 128 : 0;
  BQ_OK(bq_plan_run(plan_get(&q, what), &qa, NULL, 0, NULL), "%s", what);
  bq_desc l;
  memset(&l, 0, sizeof l);
  l.op = BQ_FP8_LINEAR;
  l.granularity = blockwise ? BQ_PER_BLOCK : BQ_PER_TOKEN;
  l.out_type = out;
  bq_args la = a;
  la.x = xq, la.scales = sa, la.y = (char *)dy2 + guard * ys;
  BQ_OK(bq_plan_run(plan_get(&l, what), &la, NULL, 0, NULL), "%s", what);
  BQ_OK(bq_synchronize(NULL), "%s", what);
  BQ_OK(bq_memcpy_to_host(got, dy, ybytes), "%s", what);
  BQ_OK(bq_memcpy_to_host(want, dy2, ybytes), "%s", what);
  for (size_t i = 0; i < ybytes; i++)
    cr_assert_eq(got[i], want[i], "byte %zu of y (from the front guard of %lld elements) differs: %#x, the two ops "
                 "%#x | %s", i, (long long)guard, got[i], want[i], what);
  for (size_t i = 0; i < (size_t)guard * ys; i++) /* (the two ops' guards are the poison too: checked above) */
    cr_assert_eq(got[i], 0xA5, "the front guard was written | %s", what);
  bq_free(dx), bq_free(dw), bq_free(dsw), bq_free(db), bq_free(dy), bq_free(dy2), bq_free(ws), bq_free(xq), bq_free(sa);
  free(x), free(w), free(sw), free(b), free(poison), free(got), free(want);
}

static void ql_cases(void) {
  static const int64_t ms[] = {1, 16, 64, 65, 300};
  static const bq_dtype fts[] = {BQ_F32, BQ_F16, BQ_BF16};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
    for (int f = 0; f < 3; f++)
      for (int blk = 0; blk < 2; blk++)
        ql_case(fts[f], OUTS[(f + i) % 3], blk, ms[i], i % 2 ? 200 : 256, blk ? 1024 : (i % 2 ? 1000 : 512),
                (int)((i + (size_t)f) % 2));
}
Test(fp8_linear, quantized_linear, .timeout = 600) { ql_cases(); }
static void no_pdl(void) {
  setenv("BARACUDA_QUANT_PDL", "0", 1);
  fp8_begin();
}
Test(fp8_linear, quantized_linear_without_pdl, .init = no_pdl, .timeout = 600) { ql_cases(); }
