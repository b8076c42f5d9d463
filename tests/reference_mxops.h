/* tests/reference_mxops.h - the CPU reference of the microscaling ops (docs/numerics.md,
   "Microscaling"): quantize, dequantize and fake quantize (both directions) and dynamic
   quantize of [rows, cols] in groups of G
   along the row, each group with a one-byte scale: UE8M0 (MXFP8, MXFP4) or E4M3 times an
   f32 tensor scale g (NVFP4). Written from the contract, on reference.h's loads and stores,
   reference_fp4.h's and reference_fp8.h's conversions (from a double: an f32 quotient
   converts exactly) and reference_mx.h's peer rules and blocked layout.

   C = f64 for f64 data, else f32; every step one IEEE operation in C, through volatiles.
     element code   e = conv(C(x) / C(sc)), conv: one RNE into E2M1 / E4M3 / E5M2,
                    saturating (NaN: E2M1 0x7, FP8 0x7F)
     dequantize     y = T(C(value(e)) * C(sc))
     UE8M0          sc = 2^(code - 127) (255: NaN)
     NVFP4          sc = f32(g * f32(e4m3 code)), one f32 product
   Dynamic quantize, a group's amax = max |x| over its non-NaN elements (in C), capped at
   C(amax_bound) where one is given (UE8M0 only), then the code:
     default (UE8M0)  s = amax == 0 ? 1 : amax / max (C), rounded up to a power of two in C
                      (reference_dynamic.h's refd_pow2_up_*), stored as UE8M0 (clamped to
                      [2^-127, 2^127]; an f32 s past 2^127 rounds up to inf: 255)
     a peer's rule    reference_mx.h's ref_mx_scale on f32(amax)
     NVFP4            g = amax_t / 2688 in f32 (amax_t the tensor's f32 amax; 1 where it
                      is 0 or infinite) unless the caller gives g; the group's code
                      e4m3(max((f32(amax) / 6) / g, 2^-9)), both divisions in f32
     NVFP4, torchao   g = amax_t * f32(1 / 2688); code e4m3(clamp((amax * f32(1 / 6)) / g,
                      2^-6, 448)); q = conv(x * ((1 / g) / s8))
     NVFP4, TE        enc = min(2688 / amax_t, FLT_MAX) (1 where amax_t is 0 or enc 0),
                      g = 1 / enc (given g: enc = 1 / g); code e4m3(min(amax * (enc *
                      f32(1 / 6)), FLT_MAX)); q = conv(x * min(1 / (s8 g), FLT_MAX))
   Layouts: row-major r * grs + g, MN-major g * grs + r, blocked ref_mx_blocked_offset (its
   padding written 0 by dynamic quantize).
   Stochastic rounding (desc.rounding; docs/numerics.md, "Stochastic rounding"): conv is
   replaced by refmx_code_sr of the same value in C and element i's draw refmx_sr_draw, i =
   offset + r * cols + c. */
#ifndef BQ_TESTS_REFERENCE_MXOPS_H
#define BQ_TESTS_REFERENCE_MXOPS_H

#include "reference_dynamic.h"
#include "reference_fp4.h"
#include "reference_fp8.h"
#include "reference_mx.h"
#include "reference_rotate.h" /* ref_philox4x32_10 */

typedef struct refmx_fmt {
  double max;
  int emax, mbits;
} refmx_fmt;
REF_API refmx_fmt refmx_fmt_of(bq_dtype it) {
  refmx_fmt f = {6.0, 2, 1};
  if (it == BQ_E4M3) f.max = 448.0, f.emax = 8, f.mbits = 3;
  if (it == BQ_E5M2) f.max = 57344.0, f.emax = 15, f.mbits = 2;
  return f;
}
/* a value already in C to the element's code */
REF_API uint8_t refmx_code(bq_dtype it, double v) {
  if (it == BQ_E2M1) return ref_e2m1_from_double(v);
  return ref_fp8_from_double(v, it == BQ_E4M3 ? REF_E4M3 : REF_E5M2);
}
/* Stochastic rounding's 16-bit draw for element i: bits 16 (i % 2) of word (i / 2) % 4 of
   Philox4x32-10 at counter (i / 8 low word, high word, 1, 0) keyed by (seed low, seed high) */
REF_API unsigned refmx_sr_draw(uint64_t seed, uint64_t i) {
  const uint32_t ctr[4] = {(uint32_t)(i >> 3), (uint32_t)(i >> 35), 1u, 0u}, key[2] = {(uint32_t)seed,
                                                                                       (uint32_t)(seed >> 32)};
  uint32_t w[4];
  ref_philox4x32_10(ctr, key, w);
  return (w[(i >> 1) & 3] >> (16 * (i & 1))) & 0xffffu;
}
/* v (in C) rounded stochastically by the draw u: |v| = (n + f) q with q the grid's step at
   |v|, 2^(max(floor(log2 |v|), emin) - mantissa bits) (emin: 0 for E2M1, -6 E4M3, -14 E5M2);
   (n + 1) q, at most max, when (u + 1/2) 2^-16 < f, else n q; the sign kept. Every step is
   exact in a double. |v| at or past max (inf) and NaN round to nearest: they saturate. */
REF_API uint8_t refmx_code_sr(bq_dtype it, double v, unsigned u) {
  const refmx_fmt f = refmx_fmt_of(it);
  const double a = fabs(v);
  if (!(a < f.max)) return refmx_code(it, v);
  const int emin = it == BQ_E2M1 ? 0 : it == BQ_E4M3 ? -6 : -14;
  int e = emin;
  if (a > 0) {
    int fe;
    (void)frexp(a, &fe); /* a = m 2^fe, m in [0.5, 1) */
    if (fe - 1 > emin) e = fe - 1;
  }
  const double q = ldexp(1.0, e - f.mbits), t = a / q, n = floor(t), fr = t - n;
  const double r = (u + 0.5) * 0x1p-16;
  double m = (n + (r < fr ? 1.0 : 0.0)) * q;
  if (m > f.max) m = f.max;
  return refmx_code(it, copysign(m, v));
}
REF_API double refmx_value(bq_dtype it, uint8_t c) {
  if (it == BQ_E2M1) return ref_e2m1_to_double(c);
  return ref_fp8_to_double(c, it == BQ_E4M3 ? REF_E4M3 : REF_E5M2);
}
REF_API float refmx_e4m3_f32(uint8_t c) { return (float)ref_fp8_to_double(c, REF_E4M3); }

/* the scales' index of group g of row r, and the layout's extent in bytes */
REF_API int64_t refmx_scale_index(bq_scale_layout lay, int64_t r, int64_t g, int64_t ngroups, int64_t grs) {
  if (lay == BQ_SCALES_BLOCKED) return ref_mx_blocked_offset(r, g, ngroups);
  return lay == BQ_SCALES_MN_MAJOR ? g * grs + r : r * grs + g;
}
REF_API int64_t refmx_scale_bytes(bq_scale_layout lay, int64_t rows, int64_t ngroups, int64_t grs) {
  if (lay == BQ_SCALES_BLOCKED) return ref_mx_blocked_bytes(rows, ngroups);
  if (rows == 0 || ngroups == 0) return 0;
  return lay == BQ_SCALES_MN_MAJOR ? (ngroups - 1) * grs + rows : (rows - 1) * grs + ngroups;
}
/* the default leading dimension (group_row_stride 0) */
REF_API int64_t refmx_default_grs(bq_scale_layout lay, int64_t rows, int64_t ngroups) {
  return lay == BQ_SCALES_MN_MAJOR ? (rows + 3) / 4 * 4 : lay == BQ_SCALES_BLOCKED ? 0 : ngroups;
}

/* C(sc) of a scale code (g: NVFP4's tensor scale) */
REF_API double refmx_sc(const bq_desc *d, uint8_t code, float g) {
  if (d->scale_type == BQ_E4M3) {
    volatile float t = g * refmx_e4m3_f32(code);
    return (double)t;
  }
  return ref_ue8m0_to_f64(code); /* (exact in f32 too: 2^-127 is an f32 subnormal) */
}
/* NVFP4 under a peer's rule (dynamic quantize): the multiplier the peer quantizes by, for
   the E4M3 code and the tensor scale g (Transformer Engine: its encode factor enc too) */
REF_API float refmx_nv_mul(const bq_desc *d, uint8_t code, float g, float enc) {
  const float s8 = refmx_e4m3_f32(code);
  (void)enc;
  if (d->scale_rule == BQ_SCALE_NVFP4_TORCHAO) {
    volatile float r = 1.0f / g;
    volatile float m = r / s8;
    return m;
  }
  volatile float t = s8 * g;
  volatile float m = 1.0f / t;
  return m > FLT_MAX ? FLT_MAX : m; /* fminf: (NaN: FLT_MAX) */
}
/* a value in C to its code by the plan's rounding (u: the element's draw, if stochastic) */
REF_API uint8_t refmx_round(const bq_desc *d, double v, unsigned u) {
  return d->rounding == BQ_ROUND_STOCHASTIC ? refmx_code_sr(d->int_type, v, u) : refmx_code(d->int_type, v);
}
/* element code of x (loaded from T) under sc */
REF_API uint8_t refmx_quantize(const bq_desc *d, double x, double sc, unsigned u) {
  if (d->float_type == BQ_F64) {
    volatile double q = x / sc;
    return refmx_round(d, q, u);
  }
  volatile float q = (float)x / (float)sc;
  return refmx_round(d, (double)q, u);
}
/* dequantized value stored into y[i] (T) */
REF_API void refmx_dequantize(const bq_desc *d, uint8_t code, double sc, void *y, int64_t i) {
  if (d->float_type == BQ_F64) {
    volatile double v = refmx_value(d->int_type, code) * sc;
    ref_store_d(y, i, v);
    return;
  }
  volatile float v = (float)refmx_value(d->int_type, code) * (float)sc;
  ref_store_f(d->float_type, y, i, v);
}

/* NVFP4's tensor scale from the tensor's amax (f32) */
REF_API float refmx_nv_g(float amax_t) {
  if (amax_t == 0.0f || isinf(amax_t)) return 1.0f;
  volatile float g = amax_t / 2688.0f;
  return g;
}
/* a group's scale code from its amax (in C) */
REF_API uint8_t refmx_rule(const bq_desc *d, double amax, float g, float enc) {
  const refmx_fmt f = refmx_fmt_of(d->int_type);
  if (d->scale_rule == BQ_SCALE_NVFP4_TORCHAO) { /* (amax * f32(1 / 6)) / g, clamped to [2^-6, 448] */
    volatile float b6 = (float)amax * (float)(1.0 / 6.0);
    volatile float b = b6 / g;
    float bb = b;
    if (bb < 0x1p-6f) bb = 0x1p-6f;
    if (bb > 448.0f) bb = 448.0f;
    return ref_fp8_from_double((double)bb, REF_E4M3);
  }
  if (d->scale_rule == BQ_SCALE_NVFP4_TE) { /* min(amax * (enc * f32(1 / 6)), FLT_MAX) */
    volatile float t = enc * (float)(1.0 / 6.0);
    volatile float b = (float)amax * t;
    const float bb = b != b || b > FLT_MAX ? FLT_MAX : b;
    return ref_fp8_from_double((double)bb, REF_E4M3);
  }
  if (d->scale_type == BQ_E4M3) {
    volatile float a = (float)amax;
    volatile float b6 = a / 6.0f;
    volatile float b = b6 / g;
    const float bb = b < 0x1p-9f ? 0x1p-9f : b;
    return ref_fp8_from_double((double)bb, REF_E4M3);
  }
  if (d->scale_rule == BQ_SCALE_RULE_DEFAULT) {
    if (d->float_type == BQ_F64) {
      volatile double s = amax == 0.0 ? 1.0 : amax / f.max;
      return ref_ue8m0_from_pow2(refd_pow2_up_d(s));
    }
    volatile float s = (float)amax == 0.0f ? 1.0f : (float)amax / (float)f.max;
    return ref_ue8m0_from_pow2((double)refd_pow2_up_f(s));
  }
  static const ref_mx_mode modes[] = {REF_MX_FLOOR, REF_MX_FLOOR, REF_MX_CEIL, REF_MX_EVEN, REF_MX_RCEIL,
                                      REF_MX_RCEIL_SAT};
  return ref_mx_scale((float)amax, modes[d->scale_rule], f.emax, f.mbits, (float)f.max);
}

/* element i of x as C */
REF_API double refmx_load(const bq_desc *d, const void *x, int64_t i) {
  return d->float_type == BQ_F64 ? ref_load_d(BQ_F64, x, i) : (double)ref_load_f(d->float_type, x, i);
}
/* code j of a row of codes (E2M1: two a byte, low nibble first) */
REF_API uint8_t refmx_get(const bq_desc *d, const unsigned char *q, int64_t j) {
  return d->int_type == BQ_E2M1 ? (uint8_t)((q[j / 2] >> (4 * (j % 2))) & 15) : q[j];
}
REF_API void refmx_put(const bq_desc *d, unsigned char *q, int64_t j, uint8_t c) {
  if (d->int_type != BQ_E2M1) { q[j] = c; return; }
  q[j / 2] = (unsigned char)(j % 2 ? (q[j / 2] & 0x0F) | (c << 4) : (q[j / 2] & 0xF0) | c);
}

/* The whole op on [rows, cols] in groups of G, row strides xs and ys (elements; x and dx
   take xs, y and dy ys), scales of leading dimension grs (ignored when blocked):
   forward quantize (x floats -> y codes, scales read), dequantize (x codes -> y floats),
   fake quantize (x -> y floats) or dynamic quantize (scales written; NVFP4: g the tensor
   scale given, or NaN to compute it, returned); backward quantize dx = m ? T(dy / sc) : +0,
   dequantize dx = T(dy * sc), fake quantize dx = m ? dy : +0, m = (|C(x) / C(sc)| <= max).
   bound: args.amax_bound (0: none). refmx_op_sr: seed and offset, stochastic rounding's. */
REF_API float refmx_op_sr(const bq_desc *d, int64_t rows, int64_t cols, int64_t G, int64_t xs, int64_t ys, int64_t grs,
                          const void *x, void *y, const void *dy, void *dx, void *scales, float g, double bound,
                          uint64_t seed, uint64_t offset) {
  const int64_t ng = G ? cols / G : 0;
  unsigned char *sb = (unsigned char *)scales;
  const int nv = d->scale_type == BQ_E4M3, bwd = d->direction == BQ_BACKWARD, e2 = d->int_type == BQ_E2M1;
  const double maxe = refmx_fmt_of(d->int_type).max;
  float enc = 1.0f; /* Transformer Engine's encode factor */
  if (d->op == BQ_DYNAMIC_QUANTIZE && nv && g != g) {
    float at = 0.0f;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        const float v = (float)fabs(refmx_load(d, x, r * xs + c));
        if (v > at) at = v; /* (NaN fails the comparison) */
      }
    if (d->scale_rule == BQ_SCALE_NVFP4_TORCHAO) {
      volatile float gg = at * (float)(1.0 / 2688.0);
      g = gg;
    } else if (d->scale_rule == BQ_SCALE_NVFP4_TE) {
      volatile float e = 2688.0f / at;
      float ee = e > FLT_MAX ? FLT_MAX : e;
      if (at == 0.0f || ee == 0.0f) ee = 1.0f;
      enc = ee;
      volatile float gg = 1.0f / enc;
      g = gg;
    } else {
      g = refmx_nv_g(at);
    }
  } else if (d->scale_rule == BQ_SCALE_NVFP4_TE) {
    volatile float e = 1.0f / g;
    enc = e;
  }
  if (d->op == BQ_DYNAMIC_QUANTIZE && d->scale_layout == BQ_SCALES_BLOCKED)
    memset(sb, 0, (size_t)ref_mx_blocked_bytes(rows, ng));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t gi = 0; gi < ng; gi++) {
      const int64_t si = refmx_scale_index(d->scale_layout, r, gi, ng, grs);
      uint8_t code;
      if (d->op == BQ_DYNAMIC_QUANTIZE) {
        double amax = 0.0;
        for (int64_t j = 0; j < G; j++) {
          const double v = fabs(refmx_load(d, x, r * xs + gi * G + j));
          if (v > amax) amax = v;
        }
        if (bound > 0) {
          const double b = d->float_type == BQ_F64 ? bound : (double)(float)bound;
          if (!(amax <= b)) amax = b;
        }
        code = refmx_rule(d, amax, g, enc);
        sb[si] = code;
      } else {
        code = sb[si];
      }
      const double sc = refmx_sc(d, code, g);
      for (int64_t j = 0; j < G; j++) {
        const int64_t c = gi * G + j, xi = r * xs + c, yi = r * ys + c;
        const unsigned u = d->rounding == BQ_ROUND_STOCHASTIC ? refmx_sr_draw(seed, offset + (uint64_t)(r * cols + c)) : 0;
        if (bwd) {
          const double dv = refmx_load(d, dy, yi);
          if (d->op == BQ_DEQUANTIZE) {
            if (d->float_type == BQ_F64) { volatile double v = dv * sc; ref_store_d(dx, xi, v); }
            else { volatile float v = (float)dv * (float)sc; ref_store_f(d->float_type, dx, xi, v); }
            continue;
          }
          double q;
          if (d->float_type == BQ_F64) { volatile double v = refmx_load(d, x, xi) / sc; q = v; }
          else { volatile float v = (float)refmx_load(d, x, xi) / (float)sc; q = v; }
          const int m = fabs(q) <= maxe; /* (NaN: 0) */
          if (d->op == BQ_FAKE_QUANTIZE) {
            if (d->float_type == BQ_F64) ref_store_d(dx, xi, m ? dv : 0.0);
            else ref_store_f(d->float_type, dx, xi, m ? (float)dv : 0.0f);
          } else if (d->float_type == BQ_F64) {
            volatile double v = dv / sc;
            ref_store_d(dx, xi, m ? v : 0.0);
          } else {
            volatile float v = (float)dv / (float)sc;
            ref_store_f(d->float_type, dx, xi, m ? v : 0.0f);
          }
        } else if (d->op == BQ_DEQUANTIZE) {
          refmx_dequantize(d, refmx_get(d, (const unsigned char *)x + (e2 ? r * xs / 2 : r * xs), c), sc, y, yi);
        } else if (d->op == BQ_FAKE_QUANTIZE) {
          refmx_dequantize(d, refmx_quantize(d, refmx_load(d, x, xi), sc, u), sc, y, yi);
        } else {
          uint8_t q;
          if (nv && (d->scale_rule == BQ_SCALE_NVFP4_TORCHAO || d->scale_rule == BQ_SCALE_NVFP4_TE)) {
            const float m = refmx_nv_mul(d, code, g, enc); /* the peer's product, in C */
            if (d->float_type == BQ_F64) { volatile double v = refmx_load(d, x, xi) * (double)m; q = refmx_round(d, v, u); }
            else { volatile float v = (float)refmx_load(d, x, xi) * m; q = refmx_round(d, (double)v, u); }
          } else {
            q = refmx_quantize(d, refmx_load(d, x, xi), sc, u);
          }
          refmx_put(d, (unsigned char *)y + (e2 ? r * ys / 2 : r * ys), c, q);
        }
      }
    }
  return g;
}
REF_API float refmx_op(const bq_desc *d, int64_t rows, int64_t cols, int64_t G, int64_t xs, int64_t ys, int64_t grs,
                       const void *x, void *y, const void *dy, void *dx, void *scales, float g, double bound) {
  return refmx_op_sr(d, rows, cols, G, xs, ys, grs, x, y, dy, dx, scales, g, bound, 0, 0);
}
/* The largest block the fused rotation takes is 32 accesses of E elements (a warp's worth:
   bq_mx_lanes' shuffles): the tests draw rot_n = 2 << k for k from 0 to this */
static inline int refmx_rot_max_shift(int64_t E) { return E == 8 ? 7 : E == 4 ? 6 : 5; }
/* refmx_op_sr with the fused rotation (desc.rotation, blocks of rot_n): quantize and dynamic
   quantize rotate x first (reference_rotate.h's forward pass into a dense copy of T, signs
   keyed by the seed where desc.random_signs), dequantize rotates y back after (its inverse) */
REF_API float refmx_op_full(const bq_desc *d, int64_t rows, int64_t cols, int64_t G, int64_t xs, int64_t ys,
                            int64_t grs, const void *x, void *y, const void *dy, void *dx, void *scales, float g,
                            double bound, uint64_t seed, uint64_t offset, int rot_n) {
  if (!d->rotation || rows == 0 || cols == 0)
    return refmx_op_sr(d, rows, cols, G, xs, ys, grs, x, y, dy, dx, scales, g, bound, seed, offset);
  if (d->op == BQ_DEQUANTIZE) {
    const float r = refmx_op_sr(d, rows, cols, G, xs, ys, grs, x, y, dy, dx, scales, g, bound, seed, offset);
    ref_rotate(d->float_type, 1, d->random_signs, seed, rot_n, rows, cols, y, ys, y, ys);
    return r;
  }
  void *t = malloc((size_t)(rows * cols) * ref_dtype_size(d->float_type));
  ref_rotate(d->float_type, 0, d->random_signs, seed, rot_n, rows, cols, x, xs, t, cols);
  const float r = refmx_op_sr(d, rows, cols, G, cols, ys, grs, t, y, dy, dx, scales, g, bound, seed, offset);
  free(t);
  return r;
}

#endif
