/* tests/reference_dynamic.h - the CPU reference of dynamic quantization
   (docs/numerics.md, "Dynamic quantization"), on top of tests/reference.h (f16/bf16
   conversions, rne with NaN -> 0 and the 2^40 clamp, quantize in C).

   Header-only, static functions, C11 + libm, written for exactness. C = double when
   T = f64, else float; every operation is one IEEE operation in C, rounded through a
   volatile (build with -ffp-contract=off). For one segment (a row, a group, the whole
   tensor) of n elements:

   symmetric:  amax = max |x| over the non-NaN elements (inf counts), starting from 0
               s    = amax == 0 ? 1 : amax / qmax                       (one division in C)
   asymmetric: lo = min(0, min x), hi = max(0, max x) over the non-NaN elements
               s  = hi == lo ? 1 : (hi - lo) / (qmax - qmin)            (subtraction, then division, in C)
   bound:      args.amax_bound != 0 (symmetric only): amax = min(amax, C(bound)), C(bound)
               finite and > 0 (one RNE conversion to f32 when C = float)
   pow2:       desc.pow2_scales, or scale_type UE8M0 (which implies it): s rounded up, in
               C, to a power of two: s itself when it is one, else the next one above it
               (exact, subnormals included; past the largest finite: +inf; inf and NaN
               stay; 0, an underflowed quotient, gives the smallest positive of C)
   both:       stored = RNE(s) to the scale type (T or f32; overflow -> inf, underflow -> 0)
               UE8M0: e = log2(s) + 127 clamped to [0, 254], s = 0 gives 0, inf / NaN 255
               sc     = C(stored)                                       (exact; 255: NaN)
               zp     = asymmetric ? sat(qmin - rne(lo / sc), qmin, qmax) : 0
                        (rne of NaN is 0, |rne| clamped to 2^40: no overflow)
               q[i]   = sat(rne(C(x[i]) / sc) + zp, qmin, qmax)         (reference.h's quantize)

   NaN elements are skipped by explicit comparisons (not fmin/fmax, whose treatment of
   signaling NaNs differs between C libraries). The sign of a zero lo or amax never
   matters: hi == lo compares equal, hi - (-0) == hi - (+0), and rne(-0) == rne(+0).

   Outputs: the scale (scale_type) and, only when asymmetric, the int32 zero point of
   segment p go to index p of out_scales / out_zero_points; symmetric writes no zero
   point. Zero-size problems write nothing.

   A segment is nr rows of nc elements, row stride xs in x (ys in y): one row for per
   tensor, per token and per group, a B x B tile (smaller at the edges) per block. Where
   its parameters go is reference.h's ref_scale_index, as for the static ops. Packed UE8M0
   (BQ_UE8M0X4) scales are UE8M0 bytes at byte indices; each parameter row's bytes past its
   last group, to the end of that word, are written 0. */
#ifndef BQ_TESTS_REFERENCE_DYNAMIC_H
#define BQ_TESTS_REFERENCE_DYNAMIC_H

#include "reference.h"

/* The quantization parameters of one segment, as the kernel must compute them. */
typedef struct refd_qp {
  float sf;       /* C(stored scale), C = float */
  double sd;      /* C(stored scale), C = double (T = f64) */
  int32_t zp;     /* 0 when symmetric */
  /* the reduction, for messages */
  double amax, lo, hi;
} refd_qp;

/* ---- the reduction ---------------------------------------------------------------- */

/* C = float: T in f32, f16, bf16 (loads are exact). nr rows of nc, row stride xs. */
REF_API void refd_reduce2_f(bq_dtype T, const void *x, int64_t nr, int64_t nc, int64_t xs, float *amax, float *lo,
                            float *hi)
{
  float a = 0.0f, l = 0.0f, h = 0.0f;
  int64_t i, k;
  for (k = 0; k < nr; k++)
  for (i = 0; i < nc; i++) {
    float v = ref_load_f(T, x, k * xs + i), m;
    if (v != v) continue; /* NaN: ignored */
    m = v < 0.0f ? -v : v;
    if (m > a) a = m;
    if (v < l) l = v;
    if (v > h) h = v;
  }
  *amax = a;
  *lo = l;
  *hi = h;
}

/* C = double: T = f64. */
REF_API void refd_reduce2_d(const void *x, int64_t nr, int64_t nc, int64_t xs, double *amax, double *lo, double *hi)
{
  double a = 0.0, l = 0.0, h = 0.0;
  int64_t i, k;
  for (k = 0; k < nr; k++)
  for (i = 0; i < nc; i++) {
    double v = ref_load_d(BQ_F64, x, k * xs + i), m;
    if (v != v) continue;
    m = v < 0.0 ? -v : v;
    if (m > a) a = m;
    if (v < l) l = v;
    if (v > h) h = v;
  }
  *amax = a;
  *lo = l;
  *hi = h;
}

/* one contiguous run of n elements */
REF_API void refd_reduce_f(bq_dtype T, const void *x, int64_t n, float *amax, float *lo, float *hi)
{
  refd_reduce2_f(T, x, 1, n, n, amax, lo, hi);
}
REF_API void refd_reduce_d(const void *x, int64_t n, double *amax, double *lo, double *hi)
{
  refd_reduce2_d(x, 1, n, n, amax, lo, hi);
}

/* ---- scale and zero point ------------------------------------------------------------ */

/* s rounded up to a power of two in C: s itself when it is one (subnormals included), else
   the next one above; above the largest power of two of C: +inf. 0 gives the smallest
   positive power of two of C (2^-149, 2^-1074); inf and NaN stay. */
REF_API float refd_pow2_up_f(float s)
{
  int e;
  float m;
  if (s == 0.0f) return FLT_TRUE_MIN;
  if (s != s || s == INFINITY || s < 0.0f) return s;
  m = frexpf(s, &e); /* s = m 2^e, m in [0.5, 1) */
  if (m == 0.5f) return s;
  return ldexpf(1.0f, e); /* e = 128: +inf */
}

REF_API double refd_pow2_up_d(double s)
{
  int e;
  double m;
  if (s == 0.0) return DBL_TRUE_MIN;
  if (s != s || s == INFINITY || s < 0.0) return s;
  m = frexp(s, &e);
  if (m == 0.5) return s;
  return ldexp(1.0, e); /* e = 1024: +inf */
}

/* Does desc d (normalized) round its dynamic scales to powers of two? */
REF_API int refd_pow2(const bq_desc *d)
{
  return d->pow2_scales != 0 || d->scale_type == BQ_UE8M0 || d->scale_type == BQ_UE8M0X4;
}

/* The bound in C (0: none). Returns -1 when it is not usable (refused by the library):
   not finite or not > 0 once converted, or set on an asymmetric plan. */
REF_API int refd_bound_f(const bq_desc *d, double bound, float *out)
{
  volatile float b = (float)bound;
  float bb = b;
  *out = 0.0f;
  if (bound == 0.0) return 0;
  if (d->asymmetric || bb != bb || bb == INFINITY || !(bb > 0.0f)) return -1;
  *out = bb;
  return 0;
}

REF_API int refd_bound_d(const bq_desc *d, double bound, double *out)
{
  *out = 0.0;
  if (bound == 0.0) return 0;
  if (d->asymmetric || bound != bound || bound == INFINITY || !(bound > 0.0)) return -1;
  *out = bound;
  return 0;
}

/* Rounds a C = float scale to the scale type, writes it to scales[p], returns C(stored). */
REF_API float refd_store_scale_f(bq_dtype st, void *scales, int64_t p, float s)
{
  if (st == BQ_UE8M0 || st == BQ_UE8M0X4) { /* (packed: p is the byte's index) */ /* s is a power of two (or 0, inf, NaN) */
    uint8_t e = ref_ue8m0_from_pow2((double)s);
    ((unsigned char *)scales)[p] = e;
    return ref_ue8m0_to_f32(e);
  }
  ref_store_f(st, scales, p, s);          /* f32: as is; f16 / bf16: RNE */
  return ref_load_f(st, scales, p);       /* exact */
}

/* C = double: the scale type is f64 or f32 (RNE by the C conversion, overflow -> inf). */
REF_API double refd_store_scale_d(bq_dtype st, void *scales, int64_t p, double s)
{
  if (st == BQ_UE8M0 || st == BQ_UE8M0X4) {
    uint8_t e = ref_ue8m0_from_pow2(s);
    ((unsigned char *)scales)[p] = e;
    return ref_ue8m0_to_f64(e);
  }
  if (st == BQ_F32) {
    volatile float f = (float)s;
    float ff = f;
    memcpy((unsigned char *)scales + 4 * p, &ff, 4);
    return (double)ff;
  }
  ref_store_d(scales, p, s);
  return s;
}

/* zp = sat(qmin - rne(lo / sc), qmin, qmax), with rne(NaN) = 0 and |rne| <= 2^40. */
REF_API int32_t refd_zero_point_f(float lo, float sc, int qmin, int qmax)
{
  volatile float v = lo / sc;
  int nan;
  int64_t r = ref_rne_zp_f(v, 0, &nan);
  return ref_sat((int64_t)qmin - r, qmin, qmax);
}

REF_API int32_t refd_zero_point_d(double lo, double sc, int qmin, int qmax)
{
  volatile double v = lo / sc;
  int nan;
  int64_t r = ref_rne_zp_d(v, 0, &nan);
  return ref_sat((int64_t)qmin - r, qmin, qmax);
}

/* The parameters of a segment; writes scales[p] (and zps[p] when asymmetric and zps is
   not NULL). `d` must be normalized (ref_desc_normalize). bound: args.amax_bound (0: none;
   must be valid, see refd_bound_f). */
REF_API refd_qp refd_params2(const bq_desc *d, double bound, const void *x, int64_t nr, int64_t nc, int64_t xs,
                             void *scales, int32_t *zps, int64_t p)
{
  refd_qp q;
  const int qmin = d->qmin, qmax = d->qmax, asym = d->asymmetric != 0;
  memset(&q, 0, sizeof q);
  if (d->float_type == BQ_F64) {
    double amax, lo, hi, s, b;
    refd_reduce2_d(x, nr, nc, xs, &amax, &lo, &hi);
    if (refd_bound_d(d, bound, &b) == 0 && b > 0.0 && b < amax) amax = b;
    if (asym) {
      if (hi == lo) {
        s = 1.0;
      } else {
        volatile double span = hi - lo;
        volatile double v = span / (double)(qmax - qmin);
        s = v;
      }
    } else {
      if (amax == 0.0) {
        s = 1.0;
      } else {
        volatile double v = amax / (ref_is_fp8(d->int_type) ? ref_fp8_formats[ref_fp8_kind_of(d->int_type)].max
                                                             : (double)qmax);
        s = v;
      }
    }
    if (refd_pow2(d)) s = refd_pow2_up_d(s);
    q.sd = refd_store_scale_d(d->scale_type, scales, p, s);
    q.sf = (float)q.sd; /* unused for f64 */
    q.zp = asym ? refd_zero_point_d(lo, q.sd, qmin, qmax) : 0;
    q.amax = amax;
    q.lo = lo;
    q.hi = hi;
  } else {
    float amax, lo, hi, s, b;
    refd_reduce2_f(d->float_type, x, nr, nc, xs, &amax, &lo, &hi);
    if (refd_bound_f(d, bound, &b) == 0 && b > 0.0f && b < amax) amax = b;
    if (asym) {
      if (hi == lo) {
        s = 1.0f;
      } else {
        volatile float span = hi - lo;
        volatile float v = span / (float)(qmax - qmin);
        s = v;
      }
    } else {
      if (amax == 0.0f) {
        s = 1.0f;
      } else {
        volatile float v = amax / (ref_is_fp8(d->int_type) ? (float)ref_fp8_formats[ref_fp8_kind_of(d->int_type)].max
                                                            : (float)qmax);
        s = v;
      }
    }
    if (refd_pow2(d)) s = refd_pow2_up_f(s);
    q.sf = refd_store_scale_f(d->scale_type, scales, p, s);
    q.sd = (double)q.sf;
    q.zp = asym ? refd_zero_point_f(lo, q.sf, qmin, qmax) : 0;
    q.amax = amax;
    q.lo = lo;
    q.hi = hi;
  }
  if (asym && zps) zps[p] = q.zp;
  return q;
}

/* one contiguous run of n elements */
REF_API refd_qp refd_params_b(const bq_desc *d, double bound, const void *x, int64_t n, void *scales,
                              int32_t *zps, int64_t p)
{
  return refd_params2(d, bound, x, 1, n, n, scales, zps, p);
}

REF_API refd_qp refd_params(const bq_desc *d, const void *x, int64_t n, void *scales, int32_t *zps, int64_t p)
{
  return refd_params_b(d, 0.0, x, n, scales, zps, p);
}

/* One segment of nr rows of nc (row strides xs, ys): parameters to index p, then
   y = quantize(x) element by element. */
REF_API refd_qp refd_segment2(const bq_desc *d, double bound, const void *x, void *y, int64_t nr, int64_t nc,
                              int64_t xs, int64_t ys, void *scales, int32_t *zps, int64_t p)
{
  refd_qp q = refd_params2(d, bound, x, nr, nc, xs, scales, zps, p);
  int64_t i, k;
  for (k = 0; k < nr; k++)
  for (i = 0; i < nc; i++) {
    int32_t v;
    const int64_t xi = k * xs + i;
    if (ref_is_fp8(d->int_type))
      v = d->float_type == BQ_F64 ? ref_fp8_quantize_d(ref_load_d(BQ_F64, x, xi), q.sd, d->int_type)
                                  : ref_fp8_quantize_f(ref_load_f(d->float_type, x, xi), q.sf, d->int_type);
    else
      v = d->float_type == BQ_F64
              ? ref_quantize_d(ref_load_d(BQ_F64, x, xi), q.sd, q.zp, d->qmin, d->qmax)
              : ref_quantize_f(ref_load_f(d->float_type, x, xi), q.sf, q.zp, d->qmin, d->qmax);
    ref_store_int(d->int_type, y, k * ys + i, v);
  }
  return q;
}

/* One segment: parameters to index p, then y[i] = quantize(x[i]) for i < n. */
REF_API refd_qp refd_segment(const bq_desc *d, double bound, const void *x, void *y, int64_t n, void *scales,
                             int32_t *zps, int64_t p)
{
  return refd_segment2(d, bound, x, y, 1, n, n, n, scales, zps, p);
}

/* ---- the whole op ------------------------------------------------------------------- */

/* Normalizes a dynamic-quantize descriptor: int type, q-range, scale type defaults;
   scale type UE8M0 sets pow2_scales. (Per tensor keeps scale_type: the one dynamic scale
   is stored in it.) */
REF_API bq_desc refd_desc_normalize(const bq_desc *in)
{
  bq_desc d = *in;
  if (!d.int_type) d.int_type = BQ_S8;
  if (!d.scale_type) d.scale_type = BQ_F32;
  if (!d.granularity) d.granularity = BQ_PER_TENSOR;
  ref_qrange(in, &d.qmin, &d.qmax);
  if (d.scale_type == BQ_UE8M0 || d.scale_type == BQ_UE8M0X4) d.pow2_scales = 1;
  return d;
}

/* Runs dynamic quantization on HOST buffers: reads a->x, writes a->y (only the problem's
   elements: row gaps keep their contents), a->out_scales and, when asymmetric,
   a->out_zero_points (may be NULL when symmetric: never touched). a->amax_bound bounds
   symmetric segments' amax. Index of a segment's
   parameters: per tensor 0, per token the row, per group and per block ref_scale_index of
   its first element (packed UE8M0: a byte index, and the bytes past each parameter row's
   last group, to its word's end, written 0). Returns 0, or -1 when the problem is not valid. */
REF_API int refd_run(const bq_desc *desc, const bq_args *a)
{
  bq_desc d = refd_desc_normalize(desc);
  size_t es = ref_dtype_size(d.float_type);
  const unsigned char *x = (const unsigned char *)a->x;
  unsigned char *y = (unsigned char *)a->y;
  int64_t r, g;
  if (!ref_is_float(d.float_type) || (d.int_type != BQ_S8 && d.int_type != BQ_U8 && !ref_is_fp8(d.int_type)))
    return -1;
  if (d.scale_type != d.float_type && d.scale_type != BQ_F32 && d.scale_type != BQ_UE8M0 &&
      d.scale_type != BQ_UE8M0X4)
    return -1;
  if (d.scale_type == BQ_UE8M0X4 && (d.granularity != BQ_PER_GROUP || d.asymmetric)) return -1;
  if (d.pow2_scales != 0 && d.pow2_scales != 1) return -1;
  if (d.float_type == BQ_F64) {
    double b;
    if (refd_bound_d(&d, a->amax_bound, &b)) return -1;
  } else {
    float b;
    if (refd_bound_f(&d, a->amax_bound, &b)) return -1;
  }
  if (ref_is_fp8(d.int_type) ? d.asymmetric != 0 : (!d.asymmetric && d.qmax <= 0)) return -1;
  switch (d.granularity) {
  case BQ_PER_TENSOR:
    if (a->numel < 0) return -1;
    if (a->numel == 0) return 0;
    refd_segment(&d, a->amax_bound, x, y, a->numel, a->out_scales, a->out_zero_points, 0);
    return 0;
  case BQ_PER_TOKEN:
    if (a->rows < 0 || a->cols < 0) return -1;
    /* fall through */
  case BQ_PER_GROUP:
  case BQ_PER_BLOCK: {
    int64_t xs = a->x_row_stride ? a->x_row_stride : a->cols;
    int64_t ys = a->y_row_stride ? a->y_row_stride : a->cols;
    ref_scales S;
    int64_t B; /* a segment's rows (per block) and columns */
    if (a->rows < 0 || a->cols < 0 || xs < a->cols || ys < a->cols) return -1;
    if (d.granularity == BQ_PER_TOKEN) {
      memset(&S, 0, sizeof S); /* per token: the row's index, as row-major per group of cols with ld 1 */
      S.B = a->cols ? a->cols : 1;
      S.ld = 1;
    } else if (ref_scales_init(&S, &d, a->rows, a->cols, a->group_size, a->group_row_stride)) {
      return -1;
    }
    if (a->rows == 0 || a->cols == 0) return 0;
    B = S.B;
    for (r = 0; r < a->rows; r += S.block ? B : 1)
      for (g = 0; g * B < a->cols; g++) {
        const int64_t c0 = g * B, nr = S.block ? (a->rows - r < B ? a->rows - r : B) : 1;
        const int64_t nc = a->cols - c0 < B ? a->cols - c0 : B;
        refd_segment2(&d, a->amax_bound, x + (size_t)(r * xs + c0) * es, y + (size_t)(r * ys + c0), nr, nc, xs, ys,
                      a->out_scales, a->out_zero_points, ref_scale_index(&S, r, c0));
      }
    if (S.x4) /* each parameter row's last word: the bytes past its last group are 0 */
      for (r = 0; r < S.prows; r++)
        for (g = S.nb; g % 4; g++) ((unsigned char *)a->out_scales)[ref_scale_index(&S, r, g * B)] = 0;
    return 0;
  }
  default:
    return -1;
  }
}

#endif /* BQ_TESTS_REFERENCE_DYNAMIC_H */
