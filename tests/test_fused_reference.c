/* The fused producers' reference (tests/reference_fused.h, docs/numerics.md "Fused
   producers"):
   - RMSNorm's sum of squares equals a separate simulation of the contract's order (a
     thread index per element, the butterfly as a recursion), for many D and each T; and
     the order is visible (a plain sequential sum differs somewhere);
   - batch invariance: every row of a strided batch equals that row computed alone;
   - exp_c and tanh_c against libm (exp / tanh in double for C = float, expl / tanhl for
     C = double): a max-ulp bound over a grid of every 37th f32 (all of them near the
     thresholds) and over random and graded f64, monotonicity, special values;
   - hand-worked rows: D = 1, all zero, inf, NaN, the residual written in place, and
     hand-worked activations;
   - fused == the producer, then the existing quantize reference, for static per tensor,
     dynamic per token and per group. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../baracuda_quant.h"
#include "reference.h"
#include "reference_dynamic.h"
#include "reference_fused.h"

static const bq_dtype types[4] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};

#include "xorshift.h"
static double unit(void) { return (double)(rnd() >> 11) * 0x1p-53; } /* in [0, 1) */

/* A random value of either sign over a wide range of magnitudes. */
static double wide(void) {
  double v = ldexp(1.0 + unit(), (int)(rnd() % 16) - 8);
  return (rnd() & 1) ? -v : v;
}

static void store(bq_dtype T, void *buf, int64_t i, double v) {
  if (T == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(T, buf, i, (float)v);
}

static void fill(bq_dtype T, void *buf, int64_t n, double scale) {
  for (int64_t i = 0; i < n; i++) store(T, buf, i, scale * (2.0 * unit() - 1.0));
}

/* ==== (a) the sum of squares ============================================================ */

/* Lane l's value after the butterfly steps down to offset o (o = 32: before any step). */
static float lane_f(const float *p, int l, int o) {
  if (o == 32) return p[l];
  volatile float s = lane_f(p, l, 2 * o) + lane_f(p, l ^ o, 2 * o);
  return s;
}
static double lane_d(const double *p, int l, int o) {
  if (o == 32) return p[l];
  volatile double s = lane_d(p, l, 2 * o) + lane_d(p, l ^ o, 2 * o);
  return s;
}

/* The contract's order, element by element: element i belongs to thread (i / V) % 256. */
static float sim_sumsq_f(bq_dtype T, const void *h, int64_t D) {
  float part[256];
  int64_t V = T == BQ_F32 ? 4 : 8;
  for (int t = 0; t < 256; t++) part[t] = 0.0f;
  for (int64_t i = 0; i < D; i++) {
    int t = (int)((i / V) % 256);
    float c = ref_load_f(T, h, i);
    volatile float q = c * c;
    volatile float s = part[t] + q;
    part[t] = s;
  }
  float ss = lane_f(part, 0, 1);
  for (int w = 1; w < 8; w++) {
    volatile float s = ss + lane_f(part + 32 * w, 0, 1);
    ss = s;
  }
  return ss;
}

static double sim_sumsq_d(const void *h, int64_t D) {
  double part[256];
  for (int t = 0; t < 256; t++) part[t] = 0.0;
  for (int64_t i = 0; i < D; i++) {
    int t = (int)((i / 2) % 256);
    double c = ref_load_d(BQ_F64, h, i);
    volatile double q = c * c;
    volatile double s = part[t] + q;
    part[t] = s;
  }
  double ss = lane_d(part, 0, 1);
  for (int w = 1; w < 8; w++) {
    volatile double s = ss + lane_d(part + 32 * w, 0, 1);
    ss = s;
  }
  return ss;
}

Test(fused_reference, sum_of_squares_order) {
  static const int64_t Ds[] = {1, 2, 7, 8, 9, 255, 256, 257, 2047, 2048, 4095, 4096, 14336};
  int differs_from_sequential = 0;
  for (int ti = 0; ti < 4; ti++) {
    bq_dtype T = types[ti];
    for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++) {
      for (int rep = 0; rep < 3; rep++) {
        int64_t D = Ds[di];
        void *h = malloc((size_t)D * 8);
        for (int64_t i = 0; i < D; i++) store(T, h, i, rep == 0 ? 2.0 * unit() - 1.0 : wide());
        if (T == BQ_F64) {
          double a = reff_sumsq_d(h, D), b = sim_sumsq_d(h, D), seq = 0.0;
          cr_expect_eq(ref_f64_bits(a), ref_f64_bits(b), "f64 D=%lld rep %d: reference %a, simulation %a",
                       (long long)D, rep, a, b);
          for (int64_t i = 0; i < D; i++) {
            volatile double q = ref_load_d(T, h, i) * ref_load_d(T, h, i);
            volatile double s = seq + q;
            seq = s;
          }
          differs_from_sequential += seq != a;
        } else {
          float a = reff_sumsq_f(T, h, D), b = sim_sumsq_f(T, h, D), seq = 0.0f;
          cr_expect_eq(ref_f32_bits(a), ref_f32_bits(b), "%s D=%lld rep %d: reference %a, simulation %a",
                       ref_dtype_name(T), (long long)D, rep, a, b);
          for (int64_t i = 0; i < D; i++) {
            float c = ref_load_f(T, h, i);
            volatile float q = c * c;
            volatile float s = seq + q;
            seq = s;
          }
          differs_from_sequential += seq != a;
        }
        free(h);
      }
    }
  }
  cr_log_info("sum of squares: the contract's order differs from a sequential sum in %d of %d cases",
              differs_from_sequential, 4 * 13 * 3);
  cr_expect_gt(differs_from_sequential, 0, "the order should be visible in some sums");
}

/* ==== (b) batch invariance ================================================================ */

static int64_t elem_diff(bq_dtype T, const void *a, const void *b, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !ref_elem_equal(T, a, b, i);
  return bad;
}

Test(fused_reference, batch_invariance) {
  const int64_t M = 7, D = 300, xs = 2 * D + 5, rs = D + 3, os = D + 1;
  for (int ti = 0; ti < 4; ti++) {
    bq_dtype T = types[ti];
    size_t es = ref_dtype_size(T);
    for (int kind = 0; kind < 4; kind++) {
      unsigned char *x = malloc((size_t)(M * xs) * es), *r = malloc((size_t)(M * rs) * es);
      unsigned char *r0 = malloc((size_t)(M * rs) * es), *w = malloc((size_t)D * es);
      unsigned char *out = calloc((size_t)(M * os), es), *dense = malloc((size_t)(M * D) * es);
      unsigned char *one = malloc((size_t)D * es), *rone = malloc((size_t)D * es);
      fill(T, x, M * xs, 6.0);
      fill(T, r, M * rs, 2.0);
      fill(T, w, D, 1.5);
      memcpy(r0, r, (size_t)(M * rs) * es);
      reff_producer p = {0};
      p.kind = kind < 2 ? REFF_RMSNORM : kind == 2 ? REFF_SILU_MUL : REFF_GELU_TANH_MUL;
      p.T = T;
      p.rows = M;
      p.cols = D;
      p.x = x;
      p.x_row_stride = xs;
      p.residual = kind == 1 ? r : NULL;
      p.residual_row_stride = rs;
      p.weight = w;
      p.eps = 1e-6;
      p.out = out;
      p.out_row_stride = os;
      cr_assert_eq(reff_produce(&p, dense), 0);
      for (int64_t m = 0; m < M; m++) {
        reff_producer q = p;
        q.rows = 1;
        q.x = x + (size_t)(m * xs) * es;
        memcpy(rone, r0 + (size_t)(m * rs) * es, (size_t)D * es);
        q.residual = kind == 1 ? rone : NULL;
        q.out = NULL;
        cr_assert_eq(reff_produce(&q, one), 0);
        cr_expect_eq(elem_diff(T, one, out + (size_t)(m * os) * es, D), 0, "%s kind %d row %lld differs alone",
                     ref_dtype_name(T), kind, (long long)m);
        cr_expect_eq(elem_diff(T, one, dense + (size_t)(m * D) * es, D), 0);
        if (kind == 1)
          cr_expect_eq(elem_diff(T, rone, r + (size_t)(m * rs) * es, D), 0, "%s row %lld: h differs alone",
                       ref_dtype_name(T), (long long)m);
      }
      /* fused with dynamic per-group scales (a group inside a row): each row's integers,
         scales and zero points alone equal those in the batch */
      {
        uint8_t yb[7 * 300], y1[300];
        float sb[7 * 10], s1[10];
        int32_t zb[7 * 10], z1[10];
        bq_desc qd = {0};
        bq_args qa = {0};
        qd.op = BQ_DYNAMIC_QUANTIZE; qd.float_type = T; qd.int_type = BQ_U8; qd.granularity = BQ_PER_GROUP;
        qd.asymmetric = 1;
        qa.group_size = 30;
        qa.y = yb; qa.out_scales = sb; qa.out_zero_points = zb;
        memcpy(r, r0, (size_t)(M * rs) * es);
        p.out = NULL;
        cr_assert_eq(reff_fused_quantize(&p, &qd, &qa), 0);
        for (int64_t m = 0; m < M; m++) {
          reff_producer q = p;
          q.rows = 1;
          q.x = x + (size_t)(m * xs) * es;
          memcpy(rone, r0 + (size_t)(m * rs) * es, (size_t)D * es);
          q.residual = kind == 1 ? rone : NULL;
          qa.y = y1; qa.out_scales = s1; qa.out_zero_points = z1;
          cr_assert_eq(reff_fused_quantize(&q, &qd, &qa), 0);
          cr_expect_eq(memcmp(y1, yb + m * D, (size_t)D), 0, "%s kind %d row %lld: fused y differs alone",
                       ref_dtype_name(T), kind, (long long)m);
          cr_expect_eq(memcmp(s1, sb + m * 10, sizeof s1), 0);
          cr_expect_eq(memcmp(z1, zb + m * 10, sizeof z1), 0);
        }
      }
      free(x); free(r); free(r0); free(w); free(out); free(dense); free(one); free(rone);
    }
  }
}

/* ==== (c) exp_c and tanh_c ================================================================= */

/* The ulp of a C value near t (t finite), subnormal ulp below the normal range. */
static long double ulp_of(long double t, int p, int emin) {
  int e;
  if (t == 0) return ldexpl(1.0L, emin - p + 1);
  frexpl(fabsl(t), &e);
  e -= 1;
  if (e < emin) e = emin;
  return ldexpl(1.0L, e - p + 1);
}

/* |got - truth| in ulps of C. Overflow: inf counts as MAX + ulp(MAX), so an inf where the
   correctly rounded result is finite (or the other way round) shows as an error. */
static double ulp_err(long double got, long double truth, int p, int emin, long double max) {
  long double top = max + ulp_of(max, p, emin);
  if (isnan(got) || isnan(truth)) return isnan(got) && isnan(truth) ? 0.0 : 1e30;
  if (isinf(got) && isinf(truth)) return got == truth ? 0.0 : 1e30;
  if (isinf(got)) got = got > 0 ? top : -top;
  if (isinf(truth)) truth = truth > 0 ? top : -top;
  if (fabsl(truth) > top) truth = truth > 0 ? top : -top;
  return (double)(fabsl(got - truth) / ulp_of(fabsl(truth) > max ? max : truth, p, emin));
}

typedef struct sweep {
  double exp_max, tanh_max;
  float exp_at, tanh_at;
  long exp_nonmono, tanh_nonmono, odd_bad;
  float prev_x, prev_e, prev_t;
  int have_prev;
} sweep;

static void sweep_f32(sweep *s, float x) {
  float e = reff_exp_f(x), t = reff_tanh_f(x);
  double ee = ulp_err(e, (long double)exp((double)x), 24, -126, FLT_MAX);
  double te = ulp_err(t, (long double)tanh((double)x), 24, -126, FLT_MAX);
  if (ee > s->exp_max) { s->exp_max = ee; s->exp_at = x; }
  if (te > s->tanh_max) { s->tanh_max = te; s->tanh_at = x; }
  if (s->have_prev && x > s->prev_x) {
    s->exp_nonmono += e < s->prev_e;
    s->tanh_nonmono += t < s->prev_t;
  }
  s->odd_bad += ref_f32_bits(reff_tanh_f(-x)) != (ref_f32_bits(t) ^ 0x80000000u) && x == x;
  s->prev_x = x; s->prev_e = e; s->prev_t = t; s->have_prev = 1;
}

/* Every 131st f32 in ascending order (BQ_SWEEP_STRIDE: another stride, 1 for all), then
   every f32 near the points where something changes: the overflow and underflow
   thresholds, the start of exp's subnormal results, tanh's switch at 9/16, where tanh
   rounds to 1 and its saturation, and 0. */
Test(fused_reference, exp_tanh_f32_sweep) {
  sweep s = {0};
  const char *sv = getenv("BQ_SWEEP_STRIDE");
  const int64_t stride = sv && atoll(sv) > 0 ? atoll(sv) : 131;
  for (int64_t b = -(int64_t)0x7f800000; b <= 0x7f800000; b += stride) {
    uint32_t bits = b < 0 ? 0x80000000u | (uint32_t)(-b) : (uint32_t)b;
    sweep_f32(&s, ref_bits_f32(bits));
  }
  static const float centers[] = {88.7228394f, -87.3365479f, -103.972084f, 0.5625f, -0.5625f, 9.01091f, 10.0f,
                                  -10.0f, 1.0f};
  for (size_t c = 0; c < sizeof centers / sizeof centers[0]; c++) {
    s.have_prev = 0;
    int64_t mid = (int64_t)ref_f32_bits(fabsf(centers[c]));
    for (int64_t k = -65536; k <= 65536; k++) {
      float x = ref_bits_f32((uint32_t)(mid + k));
      sweep_f32(&s, centers[c] < 0 ? -x : x);
      if (centers[c] < 0) s.have_prev = 0; /* descending: monotonicity checked on the positive side */
    }
  }
  s.have_prev = 0;
  for (uint32_t b = 0; b < 0x00200000u; b++) sweep_f32(&s, ref_bits_f32(b)); /* subnormals, tiny */
  cr_log_info("f32: exp_c max error %.3f ulp (at %a), tanh_c max error %.3f ulp (at %a)", s.exp_max,
              (double)s.exp_at, s.tanh_max, (double)s.tanh_at);
  cr_expect_leq(s.exp_max, 2.0, "exp_c f32 error %.3f ulp at %a", s.exp_max, (double)s.exp_at);
  cr_expect_leq(s.tanh_max, 2.0, "tanh_c f32 error %.3f ulp at %a", s.tanh_max, (double)s.tanh_at);
  cr_expect_eq(s.exp_nonmono, 0, "exp_c f32 decreases %ld times", s.exp_nonmono);
  cr_expect_eq(s.tanh_nonmono, 0, "tanh_c f32 decreases %ld times", s.tanh_nonmono);
  cr_expect_eq(s.odd_bad, 0, "tanh_c(-x) != -tanh_c(x) %ld times", s.odd_bad);
}

Test(fused_reference, exp_tanh_f64_sweep) {
  double exp_max = 0, tanh_max = 0, exp_at = 0, tanh_at = 0;
  long exp_nonmono = 0, tanh_nonmono = 0, odd_bad = 0;
  for (long i = 0; i < 3000000; i++) {
    double x;
    switch (i % 4) {
    case 0: x = unit() * 1500.0 - 750.0; break;            /* the whole exp range */
    case 1: x = unit() * 50.0 - 25.0; break;               /* tanh's range */
    case 2: x = ldexp(unit(), -(int)(rnd() % 1080)); break; /* tiny to subnormal */
    default: x = (unit() * 2.0 - 1.0) * 0.6; break;        /* tanh's polynomial */
    }
    if (rnd() & 1) x = -x;
    double e = reff_exp_d(x), t = reff_tanh_d(x);
    double ee = ulp_err(e, expl((long double)x), 53, -1022, DBL_MAX);
    double te = ulp_err(t, tanhl((long double)x), 53, -1022, DBL_MAX);
    if (ee > exp_max) { exp_max = ee; exp_at = x; }
    if (te > tanh_max) { tanh_max = te; tanh_at = x; }
    odd_bad += ref_f64_bits(reff_tanh_d(-x)) != (ref_f64_bits(t) ^ 0x8000000000000000ull);
  }
  /* ascending grids: the whole range, and consecutive doubles around the switch points */
  double pe = 0.0, pt = -1.0;
  for (long i = 0; i <= 2000000; i++) {
    double x = -760.0 + (double)i * 0.00076, e = reff_exp_d(x), t = reff_tanh_d(x);
    exp_nonmono += e < pe;
    tanh_nonmono += t < pt;
    pe = e; pt = t;
  }
  static const double centers[] = {709.782712893384, -708.3964185322641, -745.1332191019411, 0.5625, 19.06, 20.0};
  for (size_t c = 0; c < sizeof centers / sizeof centers[0]; c++) {
    int64_t mid = (int64_t)ref_f64_bits(fabs(centers[c]));
    double sign = centers[c] < 0 ? -1.0 : 1.0, pe2 = 0, pt2 = 0;
    for (int64_t k = -100000; k <= 100000; k++) {
      double x = sign * ref_bits_f64((uint64_t)(mid + k)), e = reff_exp_d(x), t = reff_tanh_d(x);
      double ee = ulp_err(e, expl((long double)x), 53, -1022, DBL_MAX);
      double te = ulp_err(t, tanhl((long double)x), 53, -1022, DBL_MAX);
      if (ee > exp_max) { exp_max = ee; exp_at = x; }
      if (te > tanh_max) { tanh_max = te; tanh_at = x; }
      if (k > -100000) {
        exp_nonmono += sign > 0 ? e < pe2 : e > pe2;
        tanh_nonmono += sign > 0 ? t < pt2 : t > pt2;
      }
      pe2 = e; pt2 = t;
    }
  }
  cr_log_info("f64: exp_c max error %.3f ulp (at %a), tanh_c max error %.3f ulp (at %a)", exp_max, exp_at,
              tanh_max, tanh_at);
  cr_expect_leq(exp_max, 2.0, "exp_c f64 error %.3f ulp at %a", exp_max, exp_at);
  cr_expect_leq(tanh_max, 2.0, "tanh_c f64 error %.3f ulp at %a", tanh_max, tanh_at);
  cr_expect_eq(exp_nonmono, 0, "exp_c f64 decreases %ld times", exp_nonmono);
  cr_expect_eq(tanh_nonmono, 0, "tanh_c f64 decreases %ld times", tanh_nonmono);
  cr_expect_eq(odd_bad, 0);
}

Test(fused_reference, exp_tanh_special_values) {
  const float dn = 0x1p-149f, fmax = FLT_MAX;
  /* exp: exact 1 at zeros and denormals, inf / +0 at the ends, NaN */
  cr_expect_eq(ref_f32_bits(reff_exp_f(0.0f)), ref_f32_bits(1.0f));
  cr_expect_eq(ref_f32_bits(reff_exp_f(-0.0f)), ref_f32_bits(1.0f));
  cr_expect_eq(reff_exp_f(dn), 1.0f);
  cr_expect_eq(reff_exp_f(-dn), 1.0f);
  cr_expect(isinf(reff_exp_f(INFINITY)) && reff_exp_f(INFINITY) > 0);
  cr_expect_eq(ref_f32_bits(reff_exp_f(-INFINITY)), 0u, "exp(-inf) must be +0");
  cr_expect(isnan(reff_exp_f(NAN)));
  cr_expect(isinf(reff_exp_f(fmax)));
  cr_expect_eq(ref_f32_bits(reff_exp_f(-fmax)), 0u);
  /* overflow: the largest x with a finite result, and the next f32 */
  cr_expect(isfinite(reff_exp_f(0x1.62e42ep+6f)));
  cr_expect(isinf(reff_exp_f(0x1.62e430p+6f)));
  /* underflow: below half the smallest subnormal, +0; just above, the smallest subnormal */
  cr_expect_eq(ref_f32_bits(reff_exp_f(-104.0f)), 0u);
  cr_expect_eq(reff_exp_f(-103.9f), dn);
  cr_expect_eq(reff_exp_f(-87.0f) > FLT_MIN, 1);
  cr_expect_eq(reff_exp_f(-88.0f) < FLT_MIN && reff_exp_f(-88.0f) > 0, 1);
  cr_expect_eq(ref_f64_bits(reff_exp_d(0.0)), ref_f64_bits(1.0));
  cr_expect_eq(ref_f64_bits(reff_exp_d(-0.0)), ref_f64_bits(1.0));
  cr_expect_eq(reff_exp_d(0x1p-1074), 1.0);
  cr_expect(isinf(reff_exp_d(INFINITY)));
  cr_expect_eq(ref_f64_bits(reff_exp_d(-INFINITY)), 0u);
  cr_expect(isnan(reff_exp_d(NAN)));
  cr_expect(isfinite(reff_exp_d(709.78)));
  cr_expect(isinf(reff_exp_d(709.79)));
  cr_expect_eq(reff_exp_d(-745.0), 0x1p-1074);
  cr_expect_eq(ref_f64_bits(reff_exp_d(-745.2)), 0u);
  cr_expect_eq(reff_exp_f(1.0f), 0x1.5bf0a8p+1f, "exp_c(1) = %a", (double)reff_exp_f(1.0f));

  /* tanh: zeros keep their sign, denormals come back as they are, +-1 at the ends */
  cr_expect_eq(ref_f32_bits(reff_tanh_f(0.0f)), 0u);
  cr_expect_eq(ref_f32_bits(reff_tanh_f(-0.0f)), 0x80000000u);
  cr_expect_eq(ref_f64_bits(reff_tanh_d(0.0)), 0u);
  cr_expect_eq(ref_f64_bits(reff_tanh_d(-0.0)), 0x8000000000000000ull);
  cr_expect_eq(reff_tanh_f(dn), dn);
  cr_expect_eq(reff_tanh_f(-dn), -dn);
  cr_expect_eq(reff_tanh_d(-0x1p-1074), -0x1p-1074);
  cr_expect_eq(reff_tanh_f(INFINITY), 1.0f);
  cr_expect_eq(reff_tanh_f(-INFINITY), -1.0f);
  cr_expect_eq(reff_tanh_f(fmax), 1.0f);
  cr_expect_eq(reff_tanh_f(9.5f), 1.0f);
  cr_expect_lt(reff_tanh_f(8.5f), 1.0f);
  cr_expect_eq(reff_tanh_d(INFINITY), 1.0);
  cr_expect_eq(reff_tanh_d(-DBL_MAX), -1.0);
  cr_expect_lt(reff_tanh_d(18.5), 1.0);
  cr_expect(isnan(reff_tanh_f(NAN)));
  cr_expect(isnan(reff_tanh_d(NAN)));
}

/* ==== (d) hand-worked rows ================================================================= */

static float f(float v) { volatile float r = v; return r; }

Test(fused_reference, rmsnorm_one_element) {
  /* one element: ss is h * h, every other partial being +0 */
  float x = 3.0f, w = 2.0f, n;
  volatile float hh = x * x, me = hh / 1.0f, den = sqrtf(me + (float)1e-6), rs = 1.0f / den, hr = x * rs, e = hr * w;
  reff_rmsnorm_row(BQ_F32, &x, NULL, &w, 1, 1e-6, &n);
  cr_expect_eq(ref_f32_bits(n), ref_f32_bits(e), "n = %a, by hand %a", (double)n, (double)f(e));
  cr_expect_lt(fabsf(n - 2.0f), 1e-6f);

  double xd = -0.75, wd = 3.0, nd;
  volatile double hd = xd * xd, md = hd / 1.0, dd = sqrt(md + 1e-5), rd = 1.0 / dd, pd = xd * rd, ed = pd * wd;
  reff_rmsnorm_row(BQ_F64, &xd, NULL, &wd, 1, 1e-5, &nd);
  cr_expect_eq(ref_f64_bits(nd), ref_f64_bits(ed));

  /* bf16 with a residual: h is written back and n is computed from it */
  uint16_t xb = ref_f32_to_bf16(1.5f), rb = ref_f32_to_bf16(0.5f), wb = ref_f32_to_bf16(-1.25f), nb;
  reff_rmsnorm_row(BQ_BF16, &xb, &rb, &wb, 1, 0.01, &nb);
  cr_expect_eq(rb, ref_f32_to_bf16(2.0f));
  volatile float h4 = 2.0f * 2.0f, d4 = sqrtf(h4 + (float)0.01), r4 = 1.0f / d4, p4 = 2.0f * r4, e4 = p4 * -1.25f;
  cr_expect_eq(nb, ref_f32_to_bf16(e4), "bf16 n 0x%04x, by hand 0x%04x", nb, ref_f32_to_bf16(e4));
}

Test(fused_reference, rmsnorm_special_rows) {
  enum { D = 37 };
  float x[D], w[D], n[D];
  /* all zero: n is a zero with the sign of w */
  for (int i = 0; i < D; i++) { x[i] = 0.0f; w[i] = i % 2 ? -1.5f : 2.0f; }
  reff_rmsnorm_row(BQ_F32, x, NULL, w, D, 1e-5, n);
  for (int i = 0; i < D; i++)
    cr_expect_eq(ref_f32_bits(n[i]), i % 2 ? 0x80000000u : 0u, "n[%d] = %a", i, (double)n[i]);
  cr_expect_eq(reff_sumsq_f(BQ_F32, x, D), 0.0f);
  /* all zero without eps: rstd is inf and n is NaN */
  reff_rmsnorm_row(BQ_F32, x, NULL, w, D, 0.0, n);
  for (int i = 0; i < D; i++) cr_expect(isnan(n[i]));
  /* an inf: rstd is zero, so the row is signed zeros with NaN at the inf */
  for (int i = 0; i < D; i++) { x[i] = (float)(i - 10); w[i] = 1.0f; }
  x[5] = INFINITY;
  reff_rmsnorm_row(BQ_F32, x, NULL, w, D, 1e-6, n);
  for (int i = 0; i < D; i++) {
    if (i == 5) cr_expect(isnan(n[i]));
    else cr_expect_eq(ref_f32_bits(n[i]), i < 10 ? 0x80000000u : 0u, "n[%d] = %a", i, (double)n[i]);
  }
  /* a NaN: the whole row NaN */
  x[5] = NAN;
  reff_rmsnorm_row(BQ_F32, x, NULL, w, D, 1e-6, n);
  for (int i = 0; i < D; i++) cr_expect(isnan(n[i]));
}

Test(fused_reference, rmsnorm_residual_in_place) {
  /* f16: the first sum is a tie that rounds to even; the residual buffer holds h
     afterwards and n is computed from the rounded h */
  uint16_t x[2] = {ref_f32_to_f16(1.0f), ref_f32_to_f16(1.0f)};
  uint16_t r[2] = {ref_f32_to_f16(0x1p-11f), ref_f32_to_f16(0x1.8p-10f)};
  uint16_t w[2] = {ref_f32_to_f16(1.0f), ref_f32_to_f16(1.0f)}, n[2];
  reff_rmsnorm_row(BQ_F16, x, r, w, 2, 0.0, n);
  cr_expect_eq(r[0], ref_f32_to_f16(1.0f), "h[0] = 0x%04x", r[0]);
  cr_expect_eq(r[1], ref_f32_to_f16(1.001953125f), "h[1] = 0x%04x", r[1]);
  volatile float a = 1.0f * 1.0f, b = 1.001953125f * 1.001953125f, ss = a + b, me = ss / 2.0f, sq = sqrtf(me + 0.0f),
                 rs = 1.0f / sq, n0 = 1.0f * rs, n1 = 1.001953125f * rs;
  cr_expect_eq(n[0], ref_f32_to_f16(n0 * 1.0f));
  cr_expect_eq(n[1], ref_f32_to_f16(n1 * 1.0f));
}

Test(fused_reference, activations_by_hand) {
  /* SiLU times up with the stated grouping, in f32 */
  float x[2] = {1.0f, 2.0f}, a;
  volatile float e = reff_exp_f(-1.0f), d = 1.0f + e, s = 1.0f / d, p = s * 2.0f;
  reff_gated_row(BQ_F32, REFF_SILU_MUL, x, 1, &a);
  cr_expect_eq(ref_f32_bits(a), ref_f32_bits(p));
  cr_expect_lt(fabs((double)a - 2.0 / (1.0 + exp(-1.0))), 1e-6);
  /* GELU-tanh times up with the stated grouping */
  volatile float gg = 1.0f * 1.0f, kg = REFF_GELU_K1_F * 1.0f, c = kg * gg, in = 1.0f + c, z = REFF_GELU_K0_F * in;
  volatile float t = reff_tanh_f(z), o = 1.0f + t, hg = 0.5f * 1.0f, g = hg * o, q = g * 2.0f;
  reff_gated_row(BQ_F32, REFF_GELU_TANH_MUL, x, 1, &a);
  cr_expect_eq(ref_f32_bits(a), ref_f32_bits(q));
  cr_expect_lt(fabs((double)a - 2.0 * 0.8411919906), 1e-6);
  /* special values, as the formulas give them */
  cr_expect(isinf(reff_silu_f(INFINITY)));
  cr_expect(isnan(reff_silu_f(-INFINITY)));                         /* -inf / inf */
  cr_expect_eq(ref_f32_bits(reff_silu_f(-100.0f)), 0x80000000u);     /* exp_c overflows */
  cr_expect_eq(ref_f32_bits(reff_silu_f(0.0f)), 0u);
  cr_expect_eq(ref_f32_bits(reff_silu_f(-0.0f)), 0x80000000u);
  cr_expect(isnan(reff_silu_f(NAN)));
  cr_expect(isinf(reff_gelu_tanh_f(INFINITY)));
  cr_expect(isnan(reff_gelu_tanh_f(-INFINITY)));                    /* -inf * 0 */
  cr_expect_eq(ref_f32_bits(reff_gelu_tanh_f(-10.0f)), 0x80000000u); /* tanh_c saturates */
  cr_expect_eq(reff_gelu_tanh_f(1e30f), 1e30f);                       /* g * g overflows */
  cr_expect_eq(ref_f64_bits(reff_gelu_tanh_d(0.0)), 0u);
  cr_expect(isnan(reff_silu_d(-INFINITY)));
  /* f16 gated row: a = f16(act(g) * u) */
  uint16_t xh[4] = {ref_f32_to_f16(-0.5f), ref_f32_to_f16(3.0f), ref_f32_to_f16(1.5f), ref_f32_to_f16(-2.0f)}, ah[2];
  reff_gated_row(BQ_F16, REFF_SILU_MUL, xh, 2, ah);
  cr_expect_eq(ah[0], ref_f32_to_f16(f(reff_silu_f(-0.5f) * 1.5f)));
  cr_expect_eq(ah[1], ref_f32_to_f16(f(reff_silu_f(3.0f) * -2.0f)));
}

/* ==== (e) fused == producer, then quantize ================================================== */

Test(fused_reference, fused_equals_unfused) {
  const int64_t M = 5, D = 256, G = 32;
  for (int ti = 0; ti < 4; ti++) {
    bq_dtype T = types[ti];
    size_t es = ref_dtype_size(T);
    for (int kind = 0; kind < 4; kind++) {
      for (int scope = 0; scope < 6; scope++) {
        unsigned char *x = malloc((size_t)(M * 2 * D) * es), *r = malloc((size_t)(M * D) * es);
        unsigned char *r2 = malloc((size_t)(M * D) * es), *w = malloc((size_t)D * es);
        unsigned char *n = malloc((size_t)(M * D) * es), *n2 = malloc((size_t)(M * D) * es);
        unsigned char *dense = malloc((size_t)(M * D) * es);
        uint8_t y1[5 * 256 + 64], y2[5 * 256 + 64];
        double sc1[64], sc2[64]; /* big enough for any scale type */
        int32_t zp1[64], zp2[64];
        fill(T, x, M * 2 * D, 4.0);
        fill(T, r, M * D, 1.0);
        fill(T, w, D, 1.0);
        memcpy(r2, r, (size_t)(M * D) * es);
        memset(y1, 0xa5, sizeof y1); memset(y2, 0xa5, sizeof y2);
        memset(sc1, 0, sizeof sc1); memset(sc2, 0, sizeof sc2);
        memset(zp1, 0, sizeof zp1); memset(zp2, 0, sizeof zp2);

        reff_producer p = {0};
        p.kind = kind < 2 ? REFF_RMSNORM : kind == 2 ? REFF_SILU_MUL : REFF_GELU_TANH_MUL;
        p.T = T; p.rows = M; p.cols = D; p.x = x;
        p.residual = kind == 1 ? r : NULL;
        p.weight = w; p.eps = 1e-5; p.out = n;

        bq_desc qd = {0};
        bq_args qa = {0};
        qd.float_type = T;
        qd.int_type = scope % 2 ? BQ_U8 : BQ_S8;
        if (scope < 2) {
          qd.op = BQ_QUANTIZE; qd.granularity = BQ_PER_TENSOR;
          qa.scale = 0.03125; qa.zero_point = scope ? 128 : -3;
        } else {
          qd.op = BQ_DYNAMIC_QUANTIZE;
          qd.granularity = scope < 4 ? BQ_PER_TOKEN : BQ_PER_GROUP;
          qd.asymmetric = scope % 2;
          qd.scale_type = scope == 4 ? T : BQ_F32;
          qa.group_size = G;
          qa.out_scales = sc1; qa.out_zero_points = zp1;
        }
        qa.y = y1;
        cr_assert_eq(reff_fused_quantize(&p, &qd, &qa), 0, "%s kind %d scope %d", ref_dtype_name(T), kind, scope);

        /* unfused: the producer alone, then the existing quantize on its T output */
        reff_producer p2 = p;
        p2.residual = kind == 1 ? r2 : NULL;
        p2.out = n2;
        cr_assert_eq(reff_produce(&p2, dense), 0);
        bq_args ua = {0};
        ua.x = n2; ua.y = y2;
        if (scope < 2) {
          ua.numel = M * D; ua.scale = qa.scale; ua.zero_point = qa.zero_point;
          cr_assert_eq(ref_run(&qd, &ua), 0);
        } else {
          ua.rows = M; ua.cols = D; ua.group_size = G;
          ua.out_scales = sc2; ua.out_zero_points = zp2;
          cr_assert_eq(refd_run(&qd, &ua), 0);
        }
        cr_expect_eq(memcmp(y1, y2, sizeof y1), 0, "%s kind %d scope %d: y differs", ref_dtype_name(T), kind, scope);
        cr_expect_eq(memcmp(sc1, sc2, sizeof sc1), 0, "%s kind %d scope %d: scales differ", ref_dtype_name(T), kind,
                     scope);
        cr_expect_eq(memcmp(zp1, zp2, sizeof zp1), 0);
        cr_expect_eq(memcmp(n, n2, (size_t)(M * D) * es), 0);
        cr_expect_eq(memcmp(r, r2, (size_t)(M * D) * es), 0);
        free(x); free(r); free(r2); free(w); free(n); free(n2); free(dense);
      }
    }
  }
}

/* The output row stride: y rows apart, the gaps untouched. */
Test(fused_reference, fused_output_stride) {
  const int64_t M = 3, D = 64, ys = 80;
  float x[3 * 64], w[64];
  int8_t y[3 * 80], yd[3 * 64];
  float sc[3], scd[3];
  fill(BQ_F32, x, M * D, 3.0);
  fill(BQ_F32, w, D, 1.0);
  memset(y, 0x55, sizeof y);
  reff_producer p = {0};
  p.kind = REFF_RMSNORM; p.T = BQ_F32; p.rows = M; p.cols = D; p.x = x; p.weight = w; p.eps = 1e-6;
  bq_desc qd = {0};
  qd.op = BQ_DYNAMIC_QUANTIZE; qd.float_type = BQ_F32; qd.int_type = BQ_S8; qd.granularity = BQ_PER_TOKEN;
  bq_args qa = {0};
  qa.y = y; qa.y_row_stride = ys; qa.out_scales = sc;
  cr_assert_eq(reff_fused_quantize(&p, &qd, &qa), 0);
  qa.y = yd; qa.y_row_stride = 0; qa.out_scales = scd;
  cr_assert_eq(reff_fused_quantize(&p, &qd, &qa), 0);
  for (int64_t m = 0; m < M; m++) {
    cr_expect_eq(memcmp(y + m * ys, yd + m * D, (size_t)D), 0);
    for (int64_t c = D; c < ys; c++) cr_expect_eq((uint8_t)y[m * ys + c], 0x55);
  }
  cr_expect_eq(memcmp(sc, scd, sizeof sc), 0);
}
