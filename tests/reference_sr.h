/* tests/reference_sr.h - the CPU reference of quantize and fake quantize with stochastic
   rounding (desc.rounding BQ_ROUND_STOCHASTIC; docs/numerics.md, "Stochastic rounding"),
   integer and FP8 storage, every granularity: reference.h's ops with rne replaced.

   Element e of the problem (its row-major logical index r * cols + c; per tensor and per
   channel the flat index) draws u = refmx_sr_draw(seed, offset + e). With v = C(x) / C(s),
   one IEEE division in C (f64 for f64 data, else f32):
     integers  |v| = n + f (n an integer, 0 <= f < 1) becomes n + 1 when (u + 1/2) 2^-16 < f,
               else n, v's sign kept; NaN gives 0; then q = sat(r + zp, qmin, qmax)
     FP8       refmx_code_sr(type, v, u): the same on the type's grid, saturating at its
               largest finite value (NaN: the NaN code)
   Fake quantize is dequantize of that q with the same scale and zero point. */
#ifndef BQ_TESTS_REFERENCE_SR_H
#define BQ_TESTS_REFERENCE_SR_H

#include "reference_mxops.h"

/* stochastic rounding to an integer, as a double (exact: every value involved is) */
REF_API double ref_sr_int(double v, unsigned u) {
  if (v != v) return 0.0;
  const double a = fabs(v), n = floor(a), f = a - n, r = (u + 0.5) * 0x1p-16;
  return copysign(n + (r < f ? 1.0 : 0.0), v);
}
/* q = sat(r + zp) for an integer-valued r (infinities included), without overflow */
REF_API int32_t ref_sr_sat(double r, int32_t zp, int qmin, int qmax) {
  if (r > REF_RNE_CLAMP) r = REF_RNE_CLAMP;
  if (r < -REF_RNE_CLAMP) r = -REF_RNE_CLAMP;
  return ref_sat((int64_t)r + (int64_t)zp, qmin, qmax);
}

/* quantize or fake quantize, forward, with stochastic rounding: ref_run's form (0, or -1 for
   a problem it does not describe) */
REF_API int ref_run_sr(const bq_desc *desc, const bq_args *a) {
  bq_desc d = ref_desc_normalize(desc);
  ref_layout L;
  int64_t e, xi, yi, pi;
  if (!ref_is_float(d.float_type) || (d.int_type != BQ_S8 && d.int_type != BQ_U8 && !ref_is_fp8(d.int_type)))
    return -1;
  if ((d.op != BQ_QUANTIZE && d.op != BQ_FAKE_QUANTIZE) || d.direction != BQ_FORWARD || a->mask) return -1;
  if (ref_layout_init(&L, &d, a)) return -1;
  const bq_dtype T = d.float_type, I = d.int_type;
  const int fp8 = ref_is_fp8(I);
  for (e = 0; e < L.count; e++) {
    ref_layout_index(&L, e, &xi, &yi, &pi);
    const unsigned u = refmx_sr_draw(a->seed, a->offset + (uint64_t)e);
    const int32_t zp = fp8 ? 0 : ref_zero_point(&d, a, pi);
    if (T == BQ_F64) {
      const double s = ref_scale_d(&d, a, pi);
      volatile double v = ref_load_d(T, a->x, xi) / s;
      const int32_t q = fp8 ? refmx_code_sr(I, v, u) : ref_sr_sat(ref_sr_int(v, u), zp, d.qmin, d.qmax);
      if (d.op == BQ_QUANTIZE) ref_store_int(I, a->y, yi, q);
      else ref_store_d(a->y, yi, fp8 ? ref_fp8_dequantize_d(q, s, I) : ref_dequantize_d(q, s, zp));
    } else {
      const float s = ref_scale_f(&d, a, pi);
      volatile float v = ref_load_f(T, a->x, xi) / s;
      const int32_t q = fp8 ? refmx_code_sr(I, v, u) : ref_sr_sat(ref_sr_int(v, u), zp, d.qmin, d.qmax);
      if (d.op == BQ_QUANTIZE) ref_store_int(I, a->y, yi, q);
      else ref_store_f(T, a->y, yi, fp8 ? ref_fp8_dequantize_f(q, s, I) : ref_dequantize_f(q, s, zp));
    }
  }
  return 0;
}

/* dynamic quantize with stochastic rounding (docs/numerics.md, "Dynamic quantization": the
   stored-scale rule): a's out_scales (and out_zero_points) as reference_dynamic.h's refd_run
   wrote them, then y quantized with them as static parameters by ref_run_sr, at the same
   granularity (per tensor: one row of numel, its element indices the flat ones) */
REF_API int ref_dynamic_sr(const bq_desc *d, const bq_args *a) {
  bq_desc q;
  bq_args b;
  memset(&q, 0, sizeof q);
  memset(&b, 0, sizeof b);
  q.op = BQ_QUANTIZE;
  q.direction = BQ_FORWARD;
  q.granularity = d->granularity == BQ_PER_TENSOR ? BQ_PER_TOKEN : d->granularity;
  q.float_type = d->float_type;
  q.int_type = d->int_type;
  q.qmin = d->qmin;
  q.qmax = d->qmax;
  q.scale_type = d->scale_type;
  q.scale_layout = d->scale_layout;
  q.rounding = BQ_ROUND_STOCHASTIC;
  b.x = a->x;
  b.y = a->y;
  b.scales = a->out_scales;
  b.zero_points = d->asymmetric ? a->out_zero_points : NULL;
  b.seed = a->seed;
  b.offset = a->offset;
  if (d->granularity == BQ_PER_TENSOR) {
    b.rows = 1;
    b.cols = a->numel;
  } else {
    b.rows = a->rows;
    b.cols = a->cols;
    b.x_row_stride = a->x_row_stride;
    b.y_row_stride = a->y_row_stride;
    b.group_size = a->group_size;
    b.group_row_stride = a->group_row_stride;
  }
  return ref_run_sr(&q, &b);
}
#endif
