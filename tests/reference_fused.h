/* tests/reference_fused.h - the CPU reference of the fused producers (docs/numerics.md,
   "Fused producers"): (residual add +) RMSNorm and activation(gate) * up, each followed by
   the existing quantize (static per tensor, or dynamic per token or per group).

   Header-only, static functions, C11 + libm, on top of tests/reference.h (f16/bf16
   conversions, quantize) and tests/reference_dynamic.h (dynamic quantize). C = double when
   T = f64, else float. Every operation is one IEEE operation in C, rounded through a
   volatile (build with -ffp-contract=off), so that nothing is fused or kept wider.

   The math core (reff_*_f for C = float, reff_*_d for C = double: exp_c, tanh_c, SiLU,
   GELU-tanh) uses only +, -, *, / and sqrt rounded to nearest even, comparisons, and
   exact scaling by powers of two built from their bits. A CUDA kernel spells the same
   steps with __fadd_rn, __fmul_rn, __fdiv_rn (__dadd_rn, ... for f64) and __int_as_float
   and gets the same bits. Denormals are kept (no flush to zero).

   The fused wrappers compute the producer's T values (n or a) into a dense buffer and
   hand them to ref_run / refd_run unchanged: fused == producer, then quantize, by
   construction. */
#ifndef BQ_TESTS_REFERENCE_FUSED_H
#define BQ_TESTS_REFERENCE_FUSED_H

#include <stdlib.h>

#include "reference.h"
#include "reference_dynamic.h"

/* ==== one rounded operation each ====================================================== */

REF_API float reff_add_f(float a, float b) { volatile float r = a + b; return r; }
REF_API float reff_sub_f(float a, float b) { volatile float r = a - b; return r; }
REF_API float reff_mul_f(float a, float b) { volatile float r = a * b; return r; }
REF_API float reff_div_f(float a, float b) { volatile float r = a / b; return r; }
REF_API float reff_sqrt_f(float a) { volatile float r = sqrtf(a); return r; }
REF_API double reff_add_d(double a, double b) { volatile double r = a + b; return r; }
REF_API double reff_sub_d(double a, double b) { volatile double r = a - b; return r; }
REF_API double reff_mul_d(double a, double b) { volatile double r = a * b; return r; }
REF_API double reff_div_d(double a, double b) { volatile double r = a / b; return r; }
REF_API double reff_sqrt_d(double a) { volatile double r = sqrt(a); return r; }

/* 2^j from its bits, for j in the normal exponent range of C. */
REF_API float reff_pow2_f(int j) { return ref_bits_f32((uint32_t)(j + 127) << 23); }
REF_API double reff_pow2_d(int j) { return ref_bits_f64((uint64_t)(j + 1023) << 52); }

/* ==== exp_c (docs/numerics.md, "exp_c and tanh_c") ======================================

   A Cody-Waite reduction x = k ln2 + r, with ln2 split so that the large product and the
   first subtraction are exact; a Taylor polynomial for exp(r) - 1 by Horner; then 2^k
   applied in two steps of which only the last rounds (to a subnormal or to inf where the
   result goes there). NaN and x outside [XMIN, XMAX] are answered before the reduction;
   the clamps lie past the overflow and underflow thresholds, so the formula decides the
   results near them. */

#define REFF_LOG2E_F 0x1.715476p+0f
#define REFF_SHIFTER_F 0x1.8p+23f
#define REFF_LN2_HI_F 0x1.62e4p-1f     /* trailing zeros: kf * LN2_HI is exact */
#define REFF_LN2_LO_F 0x1.7f7d1cp-20f  /* RN(ln2 - LN2_HI) */
#define REFF_EXP_XMAX_F 89.0f          /* exp overflows above this */
#define REFF_EXP_XMIN_F (-104.0f)      /* exp rounds to +0 below this */

#define REFF_LOG2E_D 0x1.71547652b82fep+0
#define REFF_SHIFTER_D 0x1.8p+52
#define REFF_LN2_HI_D 0x1.62e42feep-1            /* trailing zeros: kf * LN2_HI is exact */
#define REFF_LN2_LO_D 0x1.a39ef35793c76p-33      /* RN(ln2 - LN2_HI) */
#define REFF_EXP_XMAX_D 710.0                    /* exp overflows above this */
#define REFF_EXP_XMIN_D (-746.0)                 /* exp rounds to +0 below this */

/* c_n = RN(1 / n!), from n = 2 up. */
static const float reff_exp_poly_f[6] = {
  0x1.0p-1f, 0x1.555556p-3f, 0x1.555556p-5f, 0x1.111112p-7f, 0x1.6c16c2p-10f, 0x1.a01a02p-13f,
};
static const double reff_exp_poly_d[12] = {
  0x1.0p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5, 0x1.1111111111111p-7,
  0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19,
  0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33,
};

/* The reduction and the polynomial, for finite x in [XMIN, XMAX]: exp(x) is 2^k (1 + m). */
REF_API float reff_exp_core_f(float x, int *k)
{
  float t = reff_mul_f(x, REFF_LOG2E_F);
  float kf = reff_sub_f(reff_add_f(t, REFF_SHIFTER_F), REFF_SHIFTER_F);
  float r = reff_sub_f(reff_sub_f(x, reff_mul_f(kf, REFF_LN2_HI_F)), reff_mul_f(kf, REFF_LN2_LO_F));
  float q = reff_exp_poly_f[5];
  int n;
  for (n = 4; n >= 0; n--) q = reff_add_f(reff_mul_f(q, r), reff_exp_poly_f[n]);
  *k = (int)kf;
  return reff_add_f(r, reff_mul_f(reff_mul_f(r, r), q));
}

REF_API double reff_exp_core_d(double x, int *k)
{
  double t = reff_mul_d(x, REFF_LOG2E_D);
  double kf = reff_sub_d(reff_add_d(t, REFF_SHIFTER_D), REFF_SHIFTER_D);
  double r = reff_sub_d(reff_sub_d(x, reff_mul_d(kf, REFF_LN2_HI_D)), reff_mul_d(kf, REFF_LN2_LO_D));
  double q = reff_exp_poly_d[11];
  int n;
  for (n = 10; n >= 0; n--) q = reff_add_d(reff_mul_d(q, r), reff_exp_poly_d[n]);
  *k = (int)kf;
  return reff_add_d(r, reff_mul_d(reff_mul_d(r, r), q));
}

REF_API float reff_exp_f(float x)
{
  int k, k1;
  float m, e;
  if (x != x) return reff_add_f(x, x);
  if (x > REFF_EXP_XMAX_F) return INFINITY;
  if (x < REFF_EXP_XMIN_F) return 0.0f;
  m = reff_exp_core_f(x, &k);
  e = reff_add_f(1.0f, m);
  k1 = k / 2;
  return reff_mul_f(reff_mul_f(e, reff_pow2_f(k1)), reff_pow2_f(k - k1));
}

REF_API double reff_exp_d(double x)
{
  int k, k1;
  double m, e;
  if (x != x) return reff_add_d(x, x);
  if (x > REFF_EXP_XMAX_D) return INFINITY;
  if (x < REFF_EXP_XMIN_D) return 0.0;
  m = reff_exp_core_d(x, &k);
  e = reff_add_d(1.0, m);
  k1 = k / 2;
  return reff_mul_d(reff_mul_d(e, reff_pow2_d(k1)), reff_pow2_d(k - k1));
}

/* ==== tanh_c ===========================================================================

   NaN and zeros come back as they are (a zero keeps its sign); a = |y|. Below A0, an odd
   polynomial a + a * (s * P(s)) with s = a * a, P a Chebyshev fit rounded to C. From A0 to
   SAT, t = 1 - 2 / (E + 2) with E = expm1(2a) = (2^k - 1) + 2^k * m from exp_c's core:
   t is at least a half there, so nothing cancels, and every step is monotone. Past SAT,
   where tanh rounds to 1 in C, t = 1. The sign of y is put back last. */

#define REFF_TANH_A0_F 0.5625f
#define REFF_TANH_SAT_F 10.0f
#define REFF_TANH_A0_D 0.5625
#define REFF_TANH_SAT_D 20.0

static const float reff_tanh_poly_f[6] = {
  -0x1.555556p-2f, 0x1.111102p-3f, -0x1.ba12d8p-5f, 0x1.655dcp-6f, -0x1.1680dcp-7f, 0x1.460e8p-9f,
};
static const double reff_tanh_poly_d[11] = {
  -0x1.5555555555555p-2, 0x1.1111111110fbep-3, -0x1.ba1ba1b9f19ap-5, 0x1.664f48727bbfdp-6,
  -0x1.226e32212f8e9p-7, 0x1.d6d30f918e945p-9, -0x1.7d9545835e3e5p-10, 0x1.34ad2f7abd75ap-11,
  -0x1.eaf47874aab53p-13, 0x1.616f17dcc6fd8p-14, -0x1.4ffe31971aeb8p-16,
};

REF_API float reff_tanh_f(float y)
{
  float a, t;
  if (y != y) return reff_add_f(y, y);
  if (y == 0.0f) return y;
  a = y < 0.0f ? -y : y;
  if (a < REFF_TANH_A0_F) {
    float s = reff_mul_f(a, a), P = reff_tanh_poly_f[5];
    int n;
    for (n = 4; n >= 0; n--) P = reff_add_f(reff_mul_f(P, s), reff_tanh_poly_f[n]);
    t = reff_add_f(a, reff_mul_f(a, reff_mul_f(s, P)));
  } else if (a <= REFF_TANH_SAT_F) {
    int k;
    float m = reff_exp_core_f(reff_add_f(a, a), &k), p = reff_pow2_f(k);
    float e = reff_add_f(reff_sub_f(p, 1.0f), reff_mul_f(p, m));
    t = reff_sub_f(1.0f, reff_div_f(2.0f, reff_add_f(e, 2.0f)));
  } else {
    t = 1.0f;
  }
  return y < 0.0f ? -t : t;
}

REF_API double reff_tanh_d(double y)
{
  double a, t;
  if (y != y) return reff_add_d(y, y);
  if (y == 0.0) return y;
  a = y < 0.0 ? -y : y;
  if (a < REFF_TANH_A0_D) {
    double s = reff_mul_d(a, a), P = reff_tanh_poly_d[10];
    int n;
    for (n = 9; n >= 0; n--) P = reff_add_d(reff_mul_d(P, s), reff_tanh_poly_d[n]);
    t = reff_add_d(a, reff_mul_d(a, reff_mul_d(s, P)));
  } else if (a <= REFF_TANH_SAT_D) {
    int k;
    double m = reff_exp_core_d(reff_add_d(a, a), &k), p = reff_pow2_d(k);
    double e = reff_add_d(reff_sub_d(p, 1.0), reff_mul_d(p, m));
    t = reff_sub_d(1.0, reff_div_d(2.0, reff_add_d(e, 2.0)));
  } else {
    t = 1.0;
  }
  return y < 0.0 ? -t : t;
}

/* ==== activations =======================================================================

   SiLU(g)      = g / (1 + exp_c(-g))
   GELU_tanh(g) = (0.5 * g) * (1 + tanh_c(K0 * (g + (K1 * g) * (g * g))))
   K0 (sqrt(2 / pi)) and K1 are the contract's decimals rounded to C. */

#define REFF_GELU_K0_F 0x1.988454p-1f
#define REFF_GELU_K1_F 0x1.6e4e26p-5f
#define REFF_GELU_K0_D 0x1.9884533d43651p-1
#define REFF_GELU_K1_D 0x1.6e4e26d4801f7p-5

typedef enum reff_kind { REFF_RMSNORM = 1, REFF_SILU_MUL, REFF_GELU_TANH_MUL } reff_kind;

REF_API float reff_silu_f(float g) { return reff_div_f(g, reff_add_f(1.0f, reff_exp_f(-g))); }
REF_API double reff_silu_d(double g) { return reff_div_d(g, reff_add_d(1.0, reff_exp_d(-g))); }

REF_API float reff_gelu_tanh_f(float g)
{
  float inner = reff_add_f(g, reff_mul_f(reff_mul_f(REFF_GELU_K1_F, g), reff_mul_f(g, g)));
  float t = reff_tanh_f(reff_mul_f(REFF_GELU_K0_F, inner));
  return reff_mul_f(reff_mul_f(0.5f, g), reff_add_f(1.0f, t));
}

REF_API double reff_gelu_tanh_d(double g)
{
  double inner = reff_add_d(g, reff_mul_d(reff_mul_d(REFF_GELU_K1_D, g), reff_mul_d(g, g)));
  double t = reff_tanh_d(reff_mul_d(REFF_GELU_K0_D, inner));
  return reff_mul_d(reff_mul_d(0.5, g), reff_add_d(1.0, t));
}

/* ==== RMSNorm's sum of squares ===========================================================

   The contract's order (docs/numerics.md, "RMSNorm"): accesses of 16 bytes dealt round
   robin to REFF_THREADS threads, each adding the squares of its elements in ascending
   order from +0; a xor butterfly in each warp (lane 0 keeps the warp's sum); the warps'
   sums added left to right. */

#define REFF_THREADS 256
#define REFF_WARP 32

REF_API int64_t reff_vec(bq_dtype T) { return 16 / (int64_t)ref_dtype_size(T); }

/* C = float (T in f32, f16, bf16). h: D elements of T, dense. */
REF_API float reff_sumsq_f(bq_dtype T, const void *h, int64_t D)
{
  float p[REFF_THREADS], v[REFF_WARP], nv[REFF_WARP], ss = 0.0f;
  const int64_t V = reff_vec(T), nacc = (D + V - 1) / V;
  int t, w, l, o;
  for (t = 0; t < REFF_THREADS; t++) {
    int64_t a, i;
    p[t] = 0.0f;
    for (a = t; a < nacc; a += REFF_THREADS)
      for (i = a * V; i < a * V + V && i < D; i++) {
        float c = ref_load_f(T, h, i);
        p[t] = reff_add_f(p[t], reff_mul_f(c, c));
      }
  }
  for (w = 0; w < REFF_THREADS / REFF_WARP; w++) {
    memcpy(v, p + w * REFF_WARP, sizeof v);
    for (o = REFF_WARP / 2; o >= 1; o /= 2) {
      for (l = 0; l < REFF_WARP; l++) nv[l] = reff_add_f(v[l], v[l ^ o]);
      memcpy(v, nv, sizeof v);
    }
    ss = w == 0 ? v[0] : reff_add_f(ss, v[0]);
  }
  return ss;
}

/* C = double (T = f64). */
REF_API double reff_sumsq_d(const void *h, int64_t D)
{
  double p[REFF_THREADS], v[REFF_WARP], nv[REFF_WARP], ss = 0.0;
  const int64_t V = reff_vec(BQ_F64), nacc = (D + V - 1) / V;
  int t, w, l, o;
  for (t = 0; t < REFF_THREADS; t++) {
    int64_t a, i;
    p[t] = 0.0;
    for (a = t; a < nacc; a += REFF_THREADS)
      for (i = a * V; i < a * V + V && i < D; i++) {
        double c = ref_load_d(BQ_F64, h, i);
        p[t] = reff_add_d(p[t], reff_mul_d(c, c));
      }
  }
  for (w = 0; w < REFF_THREADS / REFF_WARP; w++) {
    memcpy(v, p + w * REFF_WARP, sizeof v);
    for (o = REFF_WARP / 2; o >= 1; o /= 2) {
      for (l = 0; l < REFF_WARP; l++) nv[l] = reff_add_d(v[l], v[l ^ o]);
      memcpy(v, nv, sizeof v);
    }
    ss = w == 0 ? v[0] : reff_add_d(ss, v[0]);
  }
  return ss;
}

/* ==== one row =============================================================================

   RMSNorm of one row of D elements. x: the row (T); r: the residual row or NULL, which
   receives h = T(C(x) + C(r)) (read before it is written, element by element); w: the
   weight (T, D elements); n: the output row (T). Without a residual h is x. */
REF_API void reff_rmsnorm_row(bq_dtype T, const void *x, void *r, const void *w, int64_t D, double eps,
                              void *n)
{
  const void *h = r ? (const void *)r : x;
  int64_t i;
  if (T == BQ_F64) {
    double ss, rstd;
    if (r)
      for (i = 0; i < D; i++) ref_store_d(r, i, reff_add_d(ref_load_d(T, x, i), ref_load_d(T, r, i)));
    ss = reff_sumsq_d(h, D);
    rstd = reff_div_d(1.0, reff_sqrt_d(reff_add_d(reff_div_d(ss, (double)D), eps)));
    for (i = 0; i < D; i++)
      ref_store_d(n, i, reff_mul_d(reff_mul_d(ref_load_d(T, h, i), rstd), ref_load_d(T, w, i)));
  } else {
    float ss, rstd;
    if (r)
      for (i = 0; i < D; i++) ref_store_f(T, r, i, reff_add_f(ref_load_f(T, x, i), ref_load_f(T, r, i)));
    ss = reff_sumsq_f(T, h, D);
    rstd = reff_div_f(1.0f, reff_sqrt_f(reff_add_f(reff_div_f(ss, (float)D), (float)eps)));
    for (i = 0; i < D; i++)
      ref_store_f(T, n, i, reff_mul_f(reff_mul_f(ref_load_f(T, h, i), rstd), ref_load_f(T, w, i)));
  }
}

/* The gated activation of one row: x holds 2D elements, gate = [0, D), up = [D, 2D);
   a_i = T(act(C(g_i)) * C(u_i)). act: REFF_SILU_MUL or REFF_GELU_TANH_MUL. */
REF_API void reff_gated_row(bq_dtype T, reff_kind act, const void *x, int64_t D, void *a)
{
  int64_t i;
  for (i = 0; i < D; i++) {
    if (T == BQ_F64) {
      double g = ref_load_d(T, x, i), u = ref_load_d(T, x, D + i);
      double v = act == REFF_SILU_MUL ? reff_silu_d(g) : reff_gelu_tanh_d(g);
      ref_store_d(a, i, reff_mul_d(v, u));
    } else {
      float g = ref_load_f(T, x, i), u = ref_load_f(T, x, D + i);
      float v = act == REFF_SILU_MUL ? reff_silu_f(g) : reff_gelu_tanh_f(g);
      ref_store_f(T, a, i, reff_mul_f(v, u));
    }
  }
}

/* ==== the batch and the fused wrappers =================================================== */

/* A producer over [rows, cols] outputs (cols = D). Strides are in elements between row
   starts; 0 means dense (cols, or 2 * cols for the gated input). */
typedef struct reff_producer {
  reff_kind kind;
  bq_dtype T;
  int64_t rows, cols;
  const void *x;               /* RMSNorm: [rows, D]; gated: [rows, 2D] */
  int64_t x_row_stride;
  void *residual;              /* RMSNorm only, or NULL: read, then holds h */
  int64_t residual_row_stride;
  const void *weight;          /* RMSNorm: [D] */
  double eps;                  /* RMSNorm: used as C(eps) */
  void *out;                   /* optional: n or a, [rows, D] of T */
  int64_t out_row_stride;
} reff_producer;

/* Writes the producer's T values to `dense` ([rows, cols], dense) and, when p->out is
   set, to p->out; with a residual, h to the residual buffer. Returns 0, or -1 when the
   problem is not valid. */
REF_API int reff_produce(const reff_producer *p, void *dense)
{
  const size_t es = ref_dtype_size(p->T);
  const int64_t D = p->cols, in_cols = p->kind == REFF_RMSNORM ? D : 2 * D;
  const int64_t xs = p->x_row_stride ? p->x_row_stride : in_cols;
  const int64_t rs = p->residual_row_stride ? p->residual_row_stride : D;
  const int64_t os = p->out_row_stride ? p->out_row_stride : D;
  int64_t row;
  if (!ref_is_float(p->T) || p->rows < 0 || D < 0 || xs < in_cols || rs < D || os < D) return -1;
  if (p->kind != REFF_RMSNORM && p->kind != REFF_SILU_MUL && p->kind != REFF_GELU_TANH_MUL) return -1;
  for (row = 0; row < p->rows; row++) {
    const unsigned char *x = (const unsigned char *)p->x + (size_t)(row * xs) * es;
    unsigned char *n = (unsigned char *)dense + (size_t)(row * D) * es;
    if (p->kind == REFF_RMSNORM) {
      unsigned char *r = p->residual ? (unsigned char *)p->residual + (size_t)(row * rs) * es : NULL;
      reff_rmsnorm_row(p->T, x, r, p->weight, D, p->eps, n);
    } else {
      reff_gated_row(p->T, p->kind, x, D, n);
    }
    if (p->out) memcpy((unsigned char *)p->out + (size_t)(row * os) * es, n, (size_t)D * es);
  }
  return 0;
}

/* Producer, then quantize. qd: BQ_QUANTIZE per tensor (static: qa->scale, qa->zero_point),
   or BQ_DYNAMIC_QUANTIZE per token / per group (qa->out_scales, qa->out_zero_points,
   qa->group_size, qa->group_row_stride); float_type must be p->T. qa->y (with
   qa->y_row_stride) receives the integers. qa's x, rows, cols and x_row_stride are taken
   from the producer. Returns 0, or -1 when the problem is not valid. */
REF_API int reff_fused_quantize(const reff_producer *p, const bq_desc *qd, const bq_args *qa)
{
  const size_t es = ref_dtype_size(p->T);
  const int64_t ys = qa->y_row_stride ? qa->y_row_stride : p->cols;
  void *dense;
  int64_t row;
  int rc = 0;
  if (qd->float_type != p->T || p->rows < 0 || p->cols < 0 || ys < p->cols) return -1;
  if (!(qd->op == BQ_QUANTIZE && ref_gran(qd) == BQ_PER_TENSOR && qd->direction != BQ_BACKWARD) &&
      !(qd->op == BQ_DYNAMIC_QUANTIZE && (qd->granularity == BQ_PER_TOKEN || qd->granularity == BQ_PER_GROUP)))
    return -1;
  dense = malloc((size_t)(p->rows * p->cols) * es + 1);
  if (!dense) return -1;
  if (reff_produce(p, dense)) {
    free(dense);
    return -1;
  }
  if (qd->op == BQ_QUANTIZE) {
    /* per tensor is element-wise: one call per row keeps y's row stride */
    size_t isz = ref_dtype_size(qd->int_type ? qd->int_type : BQ_S8);
    for (row = 0; row < p->rows && !rc; row++) {
      bq_args a;
      memset(&a, 0, sizeof a);
      a.x = (const unsigned char *)dense + (size_t)(row * p->cols) * es;
      a.y = (unsigned char *)qa->y + (size_t)(row * ys) * isz;
      a.numel = p->cols;
      a.scale = qa->scale;
      a.zero_point = qa->zero_point;
      rc = ref_run(qd, &a);
    }
  } else {
    bq_args a = *qa;
    a.x = dense;
    a.rows = p->rows;
    a.cols = p->cols;
    a.x_row_stride = p->cols;
    rc = refd_run(qd, &a);
  }
  free(dense);
  return rc;
}

#endif /* BQ_TESTS_REFERENCE_FUSED_H */
