/* tests/reference_linear.h - the CPU reference of the W8A8 linear layers (docs/numerics.md,
   "W8A8 linear layers"), on host buffers:

     acc[m, n]  = sum_k a[m, k] * w[n, k]                 exact (int64 here, checked to fit)
     acc'[m, n] = acc - azp[m] * wsum[n]                  asymmetric activations
     y[m, n]    = Tout(((C(acc') * C(sa[m])) * C(sw[n])) + C(bias[n]))

   C is f64 when Tout is f64, else f32; each step rounds to nearest even (compile with
   -ffp-contract=off). K == 0 writes the bias (or +0). QuantizedLinear's activations come
   from the dynamic per-token reference (reference_dynamic.h) with f32 scales. */
#ifndef BQ_TESTS_REFERENCE_LINEAR_H
#define BQ_TESTS_REFERENCE_LINEAR_H
#include "reference_dynamic.h"
#include "reference_fp8.h"

typedef struct refl_problem {
  int64_t m, n, k, lda, ldy;
  bq_dtype a_type;        /* BQ_S8 or BQ_U8 */
  const void *a;          /* [m, lda] */
  const int8_t *w;        /* [n, k] */
  bq_dtype scale_type;    /* of w_scales and (unless sa_f32) sa */
  const void *w_scales;   /* [n] */
  int sa_row;             /* 1: sa[m] of scale_type (or f32 when sa_f32); 0: sa_scalar */
  int sa_f32;
  const void *sa;
  double sa_scalar;
  int zp_mode;            /* 0 none, 1 zp_scalar, 2 zps[m] */
  const int32_t *zps;
  int32_t zp_scalar;
  const int32_t *wsum;    /* [n], used with zero points */
  bq_dtype out_type;
  const void *bias;       /* [n] of out_type, or NULL */
  void *y;                /* [m, ldy]: only the problem's elements are written */
} refl_problem;

/* Returns 0, or -1 when some true acc' does not fit int32 (a test set-up error). */
REF_API int refl_gemm(const refl_problem *P)
{
  int64_t m, n, k;
  int f64 = P->out_type == BQ_F64;
  for (n = 0; n < P->n; n++) {
    double swd = ref_load_d(P->scale_type, P->w_scales, n);
    float swf = f64 ? 0 : ref_load_f(P->scale_type, P->w_scales, n);
    for (m = 0; m < P->m; m++) {
      int64_t acc = 0, ref;
      int32_t acc2, zp = P->zp_mode == 2 ? P->zps[m] : P->zp_mode == 1 ? P->zp_scalar : 0;
      int64_t yi = m * P->ldy + n;
      for (k = 0; k < P->k; k++)
        acc += (int64_t)ref_load_int(P->a_type, P->a, m * P->lda + k) * P->w[n * P->k + k];
      ref = acc - (P->zp_mode ? (int64_t)zp * P->wsum[n] : 0);
      if (ref > INT32_MAX || ref < INT32_MIN) return -1;
      acc2 = (int32_t)ref;
      if (P->k == 0) { /* the bias, exactly, or +0 */
        if (P->bias) ref_copy_elem(P->out_type, P->y, yi, P->bias, n);
        else ref_store_zero(P->out_type, P->y, yi);
        continue;
      }
      if (f64) {
        double sa = P->sa_row ? ref_load_d(P->sa_f32 ? BQ_F32 : P->scale_type, P->sa, m) : P->sa_scalar;
        double v = ((double)acc2 * sa) * swd;
        if (P->bias) v = v + ref_load_d(BQ_F64, P->bias, n);
        ref_store_d(P->y, yi, v);
      } else {
        float sa = P->sa_row ? ref_load_f(P->sa_f32 ? BQ_F32 : P->scale_type, P->sa, m) : (float)P->sa_scalar;
        float v = ((float)acc2 * sa) * swf;
        if (P->bias) v = v + ref_load_f(P->out_type, P->bias, n);
        ref_store_f(P->out_type, P->y, yi, v);
      }
    }
  }
  return 0;
}

/* QuantizedLinear's activations on the CPU: x [P->m, P->k] of type T (row stride lda)
   quantized per token by the dynamic reference with f32 scales, into aq [m, k], qs [m]
   and, when asymmetric, qz [m]; P then reads them. qmin == qmax == 0: the full range. */
REF_API int refl_quantize_activations(refl_problem *P, bq_dtype T, bq_dtype I, int qmin, int qmax, int asym,
                                      const void *x, int64_t lda, unsigned char *aq, float *qs, int32_t *qz)
{
  bq_desc d;
  bq_args q;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = BQ_PER_TOKEN;
  d.float_type = T;
  d.int_type = I;
  d.qmin = qmin;
  d.qmax = qmax;
  d.scale_type = BQ_F32;
  d.asymmetric = asym;
  memset(&q, 0, sizeof q);
  q.x = x;
  q.y = aq;
  q.rows = P->m;
  q.cols = P->k;
  q.x_row_stride = lda;
  q.y_row_stride = P->k;
  q.out_scales = qs;
  q.out_zero_points = asym ? qz : NULL;
  if (P->k > 0 && refd_run(&d, &q) != 0) return -1;
  P->a = aq;
  P->a_type = I;
  P->lda = P->k;
  P->sa_row = 1;
  P->sa_f32 = 1;
  P->sa = qs;
  P->zp_mode = asym ? 2 : 0;
  P->zps = qz;
  return 0;
}

/* wsum[n] = sum_k w[n, k] */
REF_API void refl_weight_sums(const int8_t *w, int64_t n, int64_t k, int32_t *out)
{
  int64_t i, j;
  for (i = 0; i < n; i++) {
    int32_t s = 0;
    for (j = 0; j < k; j++) s += w[i * k + j];
    out[i] = s;
  }
}

/* ---- FP8 linear layers (docs/numerics.md, "FP8 linear layers") ---------------------------------
   The tensor cores' FP8 sums are the hardware's own; this is the model the emulator runs
   (tests/emulator/cuda_emulator.h), so that an emulated run checks the kernels' K order,
   promotion and epilogue bit for bit: a step (32 elements of K, k in [32 j, 32 j + 32), zero
   past K) is its products summed exactly, rounded to f32; the 4 steps of each 128-element
   block b chain in f32 from the first (P_b), and acc = +0 takes acc = fma(P_b, s_b, acc)
   block after block, s_b = 1 (tensorwise, rowwise) or f32(sa[m][b] * sw[n / 128][b])
   (blockwise). Then y = Tout(((acc * sa) * sw) + bias) (blockwise: Tout(acc + bias)) in f32,
   each step rounded to nearest even; K == 0 writes the bias (or +0). The GPU tests bound the
   hardware's sums against reff8_exact instead. */
typedef struct reff8_problem {
  int64_t m, n, k, lda, ldy;
  int a_e5m2;            /* activations e5m2 (else e4m3); weights e4m3 */
  const uint8_t *a, *w;  /* [m, lda], [n, k] */
  int mode;              /* REFF8_TENSORWISE (sa[0], sw[0]), REFF8_ROWWISE (sa[m], sw[n]),
                            REFF8_BLOCKWISE (sa[m * lds + b], sw[(n / 128) * ceil(k / 128) + b])
                            or REFF8_BLOCKWISE_MN (sa[b * lds + m]) */
  int64_t lds;
  const float *sa, *sw;
  bq_dtype out_type;     /* BQ_F32, BQ_F16 or BQ_BF16 */
  const void *bias;      /* [n] of out_type, or NULL */
  void *y;               /* [m, ldy] */
} reff8_problem;
enum { REFF8_TENSORWISE, REFF8_ROWWISE, REFF8_BLOCKWISE, REFF8_BLOCKWISE_MN };
REF_API double reff8_product(const reff8_problem *P, int64_t m, int64_t n, int64_t k) {
  return ref_fp8_to_double(P->a[m * P->lda + k], P->a_e5m2 ? REF_E5M2 : REF_E4M3) *
         ref_fp8_to_double(P->w[n * P->k + k], REF_E4M3);
}
/* the exact sum (every partial sum of products of two FP8 values fits a double exactly
   while K < 2^20: 16-bit products spanning 2^-34 .. 2^32) */
REF_API double reff8_exact(const reff8_problem *P, int64_t m, int64_t n, int64_t k0, int64_t k1) {
  double s = 0;
  for (int64_t k = k0; k < k1 && k < P->k; k++) s += reff8_product(P, m, n, k);
  return s;
}
/* block b's scale s_b of output (m, n): 1 unless blockwise */
REF_API float reff8_block_scale(const reff8_problem *P, int64_t m, int64_t n, int64_t b) {
  if (P->mode < REFF8_BLOCKWISE) return 1.0f;
  const float sa = P->sa[P->mode == REFF8_BLOCKWISE_MN ? b * P->lds + m : m * P->lds + b];
  return sa * P->sw[(n / 128) * ((P->k + 127) / 128) + b];
}
REF_API float reff8_acc(const reff8_problem *P, int64_t m, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < P->k; b += 128) {
    float part = 0.0f;
    for (int j = 0; j < 4; j++) {
      float step = (float)reff8_exact(P, m, n, b + 32 * j, b + 32 * j + 32);
      part = j ? part + step : step;
    }
    acc = fmaf(part, reff8_block_scale(P, m, n, b / 128), acc);
  }
  return acc;
}
REF_API void reff8_gemm(const reff8_problem *P) {
  for (int64_t m = 0; m < P->m; m++)
    for (int64_t n = 0; n < P->n; n++) {
      const int64_t yi = m * P->ldy + n;
      if (P->k == 0) {
        if (P->bias) ref_copy_elem(P->out_type, P->y, yi, P->bias, n);
        else ref_store_zero(P->out_type, P->y, yi);
        continue;
      }
      float v = reff8_acc(P, m, n);
      if (P->mode < REFF8_BLOCKWISE) v = (v * P->sa[P->mode ? m : 0]) * P->sw[P->mode ? n : 0];
      if (P->bias) v = v + ref_load_f(P->out_type, P->bias, n);
      ref_store_f(P->out_type, P->y, yi, v);
    }
}
#endif
