/* tests/reference.h - the CPU reference of the numerics contract (docs/numerics.md).

   Header-only, static functions, C11 + libm. Every GPU test compares against this bit
   for bit, so it is written for exactness, not speed:
   - C = double when T = f64, else float. f32 arithmetic is done in `float` variables
     (never widened to double, which would round differently); results of each
     operation go through a volatile so nothing can be fused or kept wider.
   - f16/bf16 conversions are bit-exact software round-to-nearest-even.
   - rne() is nearbyint/nearbyintf in the default rounding mode.
   - The add of the zero point and the saturation never overflow: rne(v) is clamped
     into [-2^40, 2^40] before the int64 add.
   Build with -ffp-contract=off (ISO C mode already implies it for gcc). */
#ifndef BQ_TESTS_REFERENCE_H
#define BQ_TESTS_REFERENCE_H

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../baracuda_quant.h"
#include "reference_fp8.h"

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "reference.h needs FLT_EVAL_METHOD == 0: f32 operations must round to float"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define REF_API static __attribute__((unused))
#else
#define REF_API static
#endif

/* ==== f16 / bf16 <-> f32, bit exact ================================================= */

REF_API uint32_t ref_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
REF_API float ref_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
REF_API uint64_t ref_f64_bits(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
REF_API double ref_bits_f64(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }

/* Round-to-nearest-even f32 -> f16. Overflow (>= 65520) gives inf, subnormals are
   rounded correctly (2^-25 is a tie and goes to 0), NaN stays NaN (quieted). */
REF_API uint16_t ref_f32_to_f16(float f)
{
  uint32_t x = ref_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
  if (a >= 0x477ff000u) /* >= 65520 (the tie above 65504 goes to even = inf), inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* result is normal: |f| >= 2^-14 */
    uint32_t r = a - ((uint32_t)(127 - 15) << 23); /* rebias the exponent */
    uint32_t h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry may bump exponent */
    return (uint16_t)(sign | h);
  }
  if (a <= 0x33000000u) /* <= 2^-25: 0 (2^-25 itself is a tie and 0 is even) */
    return sign;
  { /* subnormal result: units of 2^-24 */
    uint32_t e = a >> 23;                      /* biased exponent, 102..112 */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;  /* value = m * 2^(e - 150) */
    uint32_t shift = 126u - e;                 /* 14..24 */
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++; /* may round up to 0x0400 */
    return (uint16_t)(sign | h);
  }
}

REF_API float ref_f16_to_f32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    u = sign;
  } else { /* subnormal: normalize */
    int ee = 113;
    while (!(m & 0x400u)) { m <<= 1; ee--; }
    u = sign | ((uint32_t)ee << 23) | ((m & 0x3ffu) << 13);
  }
  return ref_bits_f32(u);
}

/* Round-to-nearest-even f32 -> bf16 (same exponent range as f32, so overflow and
   subnormals fall out of the integer add). NaN stays NaN (a naive add could turn a
   NaN with a small payload into inf). */
REF_API uint16_t ref_f32_to_bf16(float f)
{
  uint32_t x = ref_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

REF_API float ref_bf16_to_f32(uint16_t b) { return ref_bits_f32((uint32_t)b << 16); }

/* ==== dtypes ========================================================================= */

REF_API size_t ref_dtype_size(bq_dtype t)
{
  switch (t) {
  case BQ_F64: return 8;
  case BQ_F32: case BQ_S32: case BQ_UE8M0X4: return 4;
  case BQ_F16: case BQ_BF16: return 2;
  case BQ_S8: case BQ_U8: case BQ_E4M3: case BQ_E5M2: case BQ_UE8M0: return 1;
  default: return 0;
  }
}

REF_API const char *ref_dtype_name(bq_dtype t)
{
  switch (t) {
  case BQ_F32: return "f32";
  case BQ_F64: return "f64";
  case BQ_F16: return "f16";
  case BQ_BF16: return "bf16";
  case BQ_S8: return "s8";
  case BQ_U8: return "u8";
  case BQ_S32: return "s32";
  case BQ_E4M3: return "e4m3";
  case BQ_E5M2: return "e5m2";
  case BQ_UE8M0: return "ue8m0";
  case BQ_UE8M0X4: return "ue8m0x4";
  default: return "?";
  }
}

REF_API int ref_is_float(bq_dtype t) { return t == BQ_F32 || t == BQ_F64 || t == BQ_F16 || t == BQ_BF16; }
REF_API int ref_is_fp8(bq_dtype t) { return t == BQ_E4M3 || t == BQ_E5M2; }

/* UE8M0 scales (an unsigned exponent, bias 127): byte e is 2^(e - 127), 255 is NaN.
   Exact in f32 (e = 0 is 2^-127, a subnormal) and in f64. */
REF_API float ref_ue8m0_to_f32(uint8_t e)
{
  return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127);
}
REF_API double ref_ue8m0_to_f64(uint8_t e)
{
  return e == 255 ? NAN : ldexp(1.0, (int)e - 127);
}

/* s = 0, a power of two (any exponent), inf or NaN -> the UE8M0 byte that stores it:
   log2(s) + 127 clamped to [0, 254] (0 clamps to 0); inf and NaN give 255 (NaN). */
REF_API uint8_t ref_ue8m0_from_pow2(double s)
{
  int e;
  if (s != s || s == INFINITY) return 255;
  if (s <= 0.0) return 0;
  e = ilogb(s) + 127;
  return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
}

/* Element loads/stores. `_f` is the C = float path (T in f32, f16, bf16: exact load,
   RNE store); `_d` is the C = double path (f64, plus an f32 scale loaded exactly).
   Loads also read UE8M0 scale arrays (exact in either C). */
REF_API float ref_load_f(bq_dtype t, const void *buf, int64_t i)
{
  const unsigned char *p = (const unsigned char *)buf;
  switch (t) {
  case BQ_UE8M0: return ref_ue8m0_to_f32(p[i]);
  case BQ_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
  case BQ_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return ref_f16_to_f32(h); }
  case BQ_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return ref_bf16_to_f32(h); }
  default: return NAN;
  }
}

REF_API void ref_store_f(bq_dtype t, void *buf, int64_t i, float v)
{
  unsigned char *p = (unsigned char *)buf;
  switch (t) {
  case BQ_F32: memcpy(p + 4 * i, &v, 4); break;
  case BQ_F16: { uint16_t h = ref_f32_to_f16(v); memcpy(p + 2 * i, &h, 2); break; }
  case BQ_BF16: { uint16_t h = ref_f32_to_bf16(v); memcpy(p + 2 * i, &h, 2); break; }
  default: break;
  }
}

REF_API double ref_load_d(bq_dtype t, const void *buf, int64_t i)
{
  const unsigned char *p = (const unsigned char *)buf;
  if (t == BQ_F64) { double v; memcpy(&v, p + 8 * i, 8); return v; }
  if (t == BQ_UE8M0) return ref_ue8m0_to_f64(p[i]);
  return (double)ref_load_f(t, buf, i); /* exact widening */
}

REF_API void ref_store_d(void *buf, int64_t i, double v)
{
  memcpy((unsigned char *)buf + 8 * i, &v, 8);
}

REF_API int32_t ref_load_int(bq_dtype t, const void *buf, int64_t i)
{
  const unsigned char *p = (const unsigned char *)buf;
  if (t == BQ_S8) { int8_t v; memcpy(&v, p + i, 1); return v; }
  if (t == BQ_U8 || t == BQ_E4M3 || t == BQ_E5M2) return p[i]; /* FP8: the code */
  if (t == BQ_S32) { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
  return 0;
}

REF_API void ref_store_int(bq_dtype t, void *buf, int64_t i, int32_t v)
{
  unsigned char *p = (unsigned char *)buf;
  if (t == BQ_S8) { int8_t b = (int8_t)v; memcpy(p + i, &b, 1); }
  else if (t == BQ_U8 || t == BQ_E4M3 || t == BQ_E5M2) p[i] = (unsigned char)v;
  else if (t == BQ_S32) memcpy(p + 4 * i, &v, 4);
}

/* Store a T zero (+0.0) / copy one T element bit for bit. */
REF_API void ref_store_zero(bq_dtype t, void *buf, int64_t i)
{
  size_t es = ref_dtype_size(t);
  memset((unsigned char *)buf + (size_t)i * es, 0, es);
}

REF_API void ref_copy_elem(bq_dtype t, void *dst, int64_t di, const void *src, int64_t si)
{
  size_t es = ref_dtype_size(t);
  memcpy((unsigned char *)dst + (size_t)di * es, (const unsigned char *)src + (size_t)si * es, es);
}

/* ==== the scalar ops ================================================================= */

/* q-range: both 0 means the full range of the int type. */
REF_API void ref_qrange(const bq_desc *d, int *qmin, int *qmax)
{
  bq_dtype it = d->int_type ? d->int_type : BQ_S8;
  if (ref_is_fp8(it)) { /* no q-range */
    *qmin = *qmax = 0;
  } else if (d->qmin == 0 && d->qmax == 0) {
    *qmin = it == BQ_U8 ? 0 : -128;
    *qmax = it == BQ_U8 ? 255 : 127;
  } else {
    *qmin = d->qmin;
    *qmax = d->qmax;
  }
}

#define REF_RNE_CLAMP 1099511627776.0 /* 2^40: beyond any |zp| + q range, exact in f32 */

/* rne(v) + zp as int64, without overflow. *is_nan set when v is NaN (then rne is 0). */
REF_API int64_t ref_rne_zp_f(float v, int32_t zp, int *is_nan)
{
  volatile float r = nearbyintf(v);
  float rr = r;
  *is_nan = rr != rr;
  if (rr != rr) rr = 0.0f;
  if (rr > (float)REF_RNE_CLAMP) rr = (float)REF_RNE_CLAMP;
  if (rr < -(float)REF_RNE_CLAMP) rr = -(float)REF_RNE_CLAMP;
  return (int64_t)rr + (int64_t)zp;
}

REF_API int64_t ref_rne_zp_d(double v, int32_t zp, int *is_nan)
{
  volatile double r = nearbyint(v);
  double rr = r;
  *is_nan = rr != rr;
  if (rr != rr) rr = 0.0;
  if (rr > REF_RNE_CLAMP) rr = REF_RNE_CLAMP;
  if (rr < -REF_RNE_CLAMP) rr = -REF_RNE_CLAMP;
  return (int64_t)rr + (int64_t)zp;
}

REF_API int32_t ref_sat(int64_t v, int qmin, int qmax)
{
  return (int32_t)(v < qmin ? qmin : v > qmax ? qmax : v);
}

/* q = sat(rne(x / s) + zp, qmin, qmax); one IEEE division in C. */
REF_API int32_t ref_quantize_f(float x, float s, int32_t zp, int qmin, int qmax)
{
  volatile float v = x / s;
  int nan;
  return ref_sat(ref_rne_zp_f(v, zp, &nan), qmin, qmax);
}

REF_API int32_t ref_quantize_d(double x, double s, int32_t zp, int qmin, int qmax)
{
  volatile double v = x / s;
  int nan;
  return ref_sat(ref_rne_zp_d(v, zp, &nan), qmin, qmax);
}

/* STE mask: qmin <= rne(x / s) + zp <= qmax, 0 when x / s is NaN. */
REF_API int ref_mask_f(float x, float s, int32_t zp, int qmin, int qmax)
{
  volatile float v = x / s;
  int nan;
  int64_t r = ref_rne_zp_f(v, zp, &nan);
  return !nan && r >= qmin && r <= qmax;
}

REF_API int ref_mask_d(double x, double s, int32_t zp, int qmin, int qmax)
{
  volatile double v = x / s;
  int nan;
  int64_t r = ref_rne_zp_d(v, zp, &nan);
  return !nan && r >= qmin && r <= qmax;
}

/* C(q - zp) * C(s): q - zp exact in int64, one RNE conversion, one multiply in C.
   The caller rounds the result to T. */
REF_API float ref_dequantize_f(int32_t q, float s, int32_t zp)
{
  int64_t diff = (int64_t)q - (int64_t)zp;
  volatile float c = (float)diff;
  volatile float p = c * s;
  return p;
}

REF_API double ref_dequantize_d(int32_t q, double s, int32_t zp)
{
  int64_t diff = (int64_t)q - (int64_t)zp;
  volatile double c = (double)diff;
  volatile double p = c * s;
  return p;
}

/* ==== FP8 storage (docs/numerics.md, "FP8 storage") ==================================== */
/* q = fp8(C(x) / C(s)): one IEEE division in C, one RNE into the type, satfinite. The
   quotient converts exactly to double, so the FP8 rounding is the only one after it. */
REF_API ref_fp8_kind ref_fp8_kind_of(bq_dtype t) { return t == BQ_E5M2 ? REF_E5M2 : REF_E4M3; }
REF_API int32_t ref_fp8_quantize_f(float x, float s, bq_dtype t)
{
  volatile float v = x / s;
  return ref_fp8_from_double((double)v, ref_fp8_kind_of(t));
}
REF_API int32_t ref_fp8_quantize_d(double x, double s, bq_dtype t)
{
  volatile double v = x / s;
  return ref_fp8_from_double(v, ref_fp8_kind_of(t));
}
/* STE mask: |C(x) / C(s)| <= max, 0 for NaN */
REF_API int ref_fp8_mask_f(float x, float s, bq_dtype t)
{
  volatile float v = x / s;
  return fabsf(v) <= (float)ref_fp8_formats[ref_fp8_kind_of(t)].max;
}
REF_API int ref_fp8_mask_d(double x, double s, bq_dtype t)
{
  volatile double v = x / s;
  return fabs(v) <= ref_fp8_formats[ref_fp8_kind_of(t)].max;
}
/* C(q) * C(s): the code's value is exact in either C; one rounding */
REF_API float ref_fp8_dequantize_f(int32_t q, float s, bq_dtype t)
{
  volatile float c = (float)ref_fp8_to_double((uint8_t)q, ref_fp8_kind_of(t));
  volatile float p = c * s;
  return p;
}
REF_API double ref_fp8_dequantize_d(int32_t q, double s, bq_dtype t)
{
  volatile double p = ref_fp8_to_double((uint8_t)q, ref_fp8_kind_of(t)) * s;
  return p;
}

/* ==== layouts ========================================================================= */

/* The granularity a descriptor means: BQ_GRANULARITY_DEFAULT is per tensor for these ops. */
REF_API bq_granularity ref_gran(const bq_desc *d)
{
  return d->granularity == BQ_GRANULARITY_DEFAULT ? BQ_PER_TENSOR : d->granularity;
}

/* Normalizes the zero-means-default fields of a descriptor (scale_type: f32). */
REF_API bq_desc ref_desc_normalize(const bq_desc *in)
{
  bq_desc d = *in;
  if (!d.int_type) d.int_type = BQ_S8;
  if (!d.scale_type) d.scale_type = BQ_F32;
  d.granularity = ref_gran(in);
  ref_qrange(in, &d.qmin, &d.qmax);
  return d;
}

/* Element types of the four tensors. Backward: dy and dx are T for every op (the
   gradient of quantize's output and of dequantize's input are real-valued). */
REF_API bq_dtype ref_x_type(const bq_desc *d)
{
  bq_dtype it = d->int_type ? d->int_type : BQ_S8;
  return (d->op == BQ_DEQUANTIZE) ? it : d->float_type;
}

REF_API bq_dtype ref_y_type(const bq_desc *d)
{
  bq_dtype it = d->int_type ? d->int_type : BQ_S8;
  return (d->op == BQ_QUANTIZE) ? it : d->float_type;
}

REF_API bq_dtype ref_out_type(const bq_desc *d)
{
  return d->direction == BQ_BACKWARD ? d->float_type : ref_y_type(d);
}

/* Per group and per block: which scale (and zero point) element (r, c) of [rows, cols]
   takes. The scales form a matrix of parameter rows (a data row each per group, B data
   rows each per block) by blocks along the row (c / B, B = args.group_size), stored
   - row-major:  prow * ld + b                    (ld default: the blocks a row holds)
   - MN-major:   b * ld + prow                    (per group only; ld default: rows rounded
                                                   up to a multiple of 4)
   - BQ_UE8M0X4: UE8M0 bytes four to an int32 word along b, words row-major (word
                 prow * ld + b / 4, ld default ceil(blocks / 4)) or MN-major (word
                 (b / 4) * ld + prow, ld default as MN-major's); the byte is b % 4 of the
                 word (little-endian), so the index below is a BYTE index.
   ld = args.group_row_stride when set (int32 words for BQ_UE8M0X4). */
typedef struct ref_scales {
  int block, mn, x4;  /* per block; MN-major; packed UE8M0 */
  int64_t B;          /* G or B */
  int64_t prows, nb;  /* parameter rows; blocks a row (cols / G, or cols / B rounded up) */
  int64_t ld;         /* leading dimension, in elements (int32 words when x4) */
  int64_t span;       /* elements of scale_type the layout spans (outer * ld; x4: words) */
} ref_scales;

/* Returns 0, or -1 when group_size / group_row_stride do not fit [rows, cols] */
REF_API int ref_scales_init(ref_scales *S, const bq_desc *d, int64_t rows, int64_t cols, int64_t group_size,
                            int64_t group_row_stride)
{
  int64_t need, def, outer;
  memset(S, 0, sizeof *S);
  S->block = d->granularity == BQ_PER_BLOCK;
  S->mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  S->x4 = d->scale_type == BQ_UE8M0X4;
  S->B = group_size;
  if (S->B < 1 || (!S->block && cols % S->B) || (S->block && S->mn) || group_row_stride < 0) return -1;
  S->nb = S->block ? (cols + S->B - 1) / S->B : cols / S->B;
  S->prows = S->block ? (rows + S->B - 1) / S->B : rows;
  if (S->mn) { /* ld spans the parameter rows; outer: the blocks (words) */
    need = S->prows;
    def = (S->prows + 3) / 4 * 4;
    outer = S->x4 ? (S->nb + 3) / 4 : S->nb;
  } else {
    need = def = S->x4 ? (S->nb + 3) / 4 : S->nb;
    outer = S->prows;
  }
  S->ld = group_row_stride ? group_row_stride : def;
  if (S->ld < need) return -1;
  S->span = outer * S->ld;
  return 0;
}

/* Element (r, c)'s index in the scale (and zero point) arrays: an element index, a byte
   index for BQ_UE8M0X4 */
REF_API int64_t ref_scale_index(const ref_scales *S, int64_t r, int64_t c)
{
  const int64_t prow = S->block ? r / S->B : r, b = c / S->B;
  if (S->x4) return 4 * (S->mn ? (b / 4) * S->ld + prow : prow * S->ld + b / 4) + b % 4;
  return S->mn ? b * S->ld + prow : prow * S->ld + b;
}

/* Marks used[i] = 1 for each index i some element of [rows, cols] reads (used: S->span
   entries, bytes when x4, zeroed by the caller); the others are padding or slack. */
REF_API void ref_scales_mark_used(const ref_scales *S, int64_t rows, int64_t cols, unsigned char *used)
{
  int64_t r, c;
  for (r = 0; r < rows; r++)
    for (c = 0; c < cols; c += S->B) used[ref_scale_index(S, r, c)] = 1;
}

/* How logical elements map onto buffers and onto quantization parameters. The "x
   layout" holds x and dx, the "y layout" holds y and dy (they differ only for per token
   and per group, through the row strides). */
typedef struct ref_layout {
  bq_granularity g;
  int64_t count;              /* logical elements */
  int64_t rows, cols, xs, ys; /* per token / per group (per tensor, channel: 1 row) */
  int64_t group, grs;         /* per group, per block: G or B; the scales' ld */
  ref_scales S;               /* per group, per block: where the parameters are */
  int64_t inner, channels;    /* per channel */
  int64_t x_extent, y_extent; /* elements spanned by the x / y layouts */
  int64_t n_params;           /* scales / zero points (0 for per tensor): one past the last
                                 index read (bytes for BQ_UE8M0X4: its last word's end) */
} ref_layout;

/* Returns 0, or -1 when the arguments do not describe a valid problem. */
REF_API int ref_layout_init(ref_layout *L, const bq_desc *d, const bq_args *a)
{
  memset(L, 0, sizeof *L);
  L->g = ref_gran(d);
  switch (L->g) {
  case BQ_PER_TENSOR:
    if (a->numel < 0) return -1;
    L->count = L->x_extent = L->y_extent = a->numel;
    L->rows = 1; L->cols = L->xs = L->ys = a->numel;
    return 0;
  case BQ_PER_CHANNEL: {
    int axis = a->axis, k;
    int64_t n = 1;
    if (a->rank < 1 || a->rank > BQ_MAX_RANK) return -1;
    if (axis < 0) axis += a->rank;
    if (axis < 0 || axis >= a->rank) return -1;
    L->inner = 1;
    for (k = 0; k < a->rank; k++) {
      if (a->shape[k] < 0) return -1;
      n *= a->shape[k];
      if (k > axis) L->inner *= a->shape[k];
    }
    L->channels = a->shape[axis];
    L->count = L->x_extent = L->y_extent = n;
    L->n_params = L->channels;
    L->rows = 1; L->cols = L->xs = L->ys = n;
    return 0;
  }
  case BQ_PER_TOKEN:
  case BQ_PER_GROUP:
  case BQ_PER_BLOCK:
    if (a->rows < 0 || a->cols < 0) return -1;
    L->rows = a->rows; L->cols = a->cols;
    L->xs = a->x_row_stride ? a->x_row_stride : a->cols;
    L->ys = a->y_row_stride ? a->y_row_stride : a->cols;
    if (L->xs < L->cols || L->ys < L->cols) return -1;
    L->count = L->rows * L->cols;
    L->x_extent = L->count ? (L->rows - 1) * L->xs + L->cols : 0;
    L->y_extent = L->count ? (L->rows - 1) * L->ys + L->cols : 0;
    if (d->granularity == BQ_PER_TOKEN) {
      L->n_params = L->rows;
    } else {
      const ref_scales *S = &L->S;
      if (ref_scales_init(&L->S, d, L->rows, L->cols, a->group_size, a->group_row_stride)) return -1;
      L->group = S->B;
      L->grs = S->ld;
      if (L->count) {
        const int64_t w = S->x4 ? (S->nb + 3) / 4 : S->nb; /* entries (words) along a parameter row */
        L->n_params = S->mn ? (w - 1) * S->ld + S->prows : (S->prows - 1) * S->ld + w;
        if (S->x4) L->n_params *= 4;
      }
    }
    return 0;
  default:
    return -1;
  }
}

/* Logical element e -> its index in the x layout, the y layout, the parameter arrays. */
REF_API void ref_layout_index(const ref_layout *L, int64_t e, int64_t *xi, int64_t *yi, int64_t *pi)
{
  int64_t r, c;
  switch (L->g) {
  case BQ_PER_TENSOR: *xi = *yi = e; *pi = 0; return;
  case BQ_PER_CHANNEL: *xi = *yi = e; *pi = (e / L->inner) % L->channels; return;
  case BQ_PER_TOKEN:
    r = e / L->cols; c = e % L->cols;
    *xi = r * L->xs + c; *yi = r * L->ys + c; *pi = r;
    return;
  case BQ_PER_GROUP:
  case BQ_PER_BLOCK:
    r = e / L->cols; c = e % L->cols;
    *xi = r * L->xs + c; *yi = r * L->ys + c; *pi = ref_scale_index(&L->S, r, c);
    return;
  default: *xi = *yi = *pi = 0; return;
  }
}

/* Index k of the x (use_y = 0) or y layout -> logical element, or -1 in a row gap. */
REF_API int64_t ref_layout_logical(const ref_layout *L, int64_t k, int use_y)
{
  int64_t stride = use_y ? L->ys : L->xs, r, c;
  if (L->g == BQ_PER_TENSOR || L->g == BQ_PER_CHANNEL) return (k >= 0 && k < L->count) ? k : -1;
  if (k < 0 || stride <= 0) return -1;
  r = k / stride; c = k % stride;
  if (r >= L->rows || c >= L->cols) return -1;
  return r * L->cols + c;
}

/* The output tensor lives in the y layout (forward) or the x layout (backward: dx). */
REF_API int ref_out_uses_y(const bq_desc *d) { return d->direction != BQ_BACKWARD; }

/* The element type a scale index counts: packed UE8M0 scales are UE8M0 bytes */
REF_API bq_dtype ref_scale_elem_type(bq_dtype st)
{
  return st == BQ_UE8M0X4 ? BQ_UE8M0 : st ? st : BQ_F32;
}

/* Quantization parameters of element with parameter index pi, in C. */
REF_API float ref_scale_f(const bq_desc *d, const bq_args *a, int64_t pi)
{
  if (ref_gran(d) == BQ_PER_TENSOR) return (float)a->scale;
  return ref_load_f(ref_scale_elem_type(d->scale_type), a->scales, pi);
}

REF_API double ref_scale_d(const bq_desc *d, const bq_args *a, int64_t pi)
{
  if (ref_gran(d) == BQ_PER_TENSOR) return a->scale;
  return ref_load_d(ref_scale_elem_type(d->scale_type), a->scales, pi);
}

REF_API int32_t ref_zero_point(const bq_desc *d, const bq_args *a, int64_t pi)
{
  if (ref_gran(d) == BQ_PER_TENSOR) return a->zero_point;
  return a->zero_points ? a->zero_points[pi] : 0;
}

/* ==== the driver ====================================================================== */

/* Fake quantize's saved mask (args.mask): bit e % 32 of word e / 32 for element e */
REF_API int ref_mask_bit(const bq_args *a, int64_t e)
{
  return (int)(((const uint32_t *)a->mask)[e / 32] >> (e % 32) & 1u);
}
REF_API void ref_mask_set(const bq_args *a, int64_t e, int in)
{
  uint32_t *w = (uint32_t *)a->mask + e / 32;
  *w = in ? *w | (1u << (e % 32)) : *w & ~(1u << (e % 32));
}

/* One element. xi/yi: indices in the x / y layouts; pi: parameter index. */
REF_API void ref_elem(const bq_desc *d, const bq_args *a, int qmin, int qmax, int64_t xi,
                      int64_t yi, int64_t pi)
{
  bq_dtype T = d->float_type, I = d->int_type ? d->int_type : BQ_S8;
  int32_t zp = ref_zero_point(d, a, pi);
  int bwd = d->direction == BQ_BACKWARD;
  /* FP8 storage: the same op with its own scalar functions (zero points are 0) */
#define ref_quantize_d(x, s, zp, lo, hi) (ref_is_fp8(I) ? ref_fp8_quantize_d(x, s, I) : ref_quantize_d(x, s, zp, lo, hi))
#define ref_quantize_f(x, s, zp, lo, hi) (ref_is_fp8(I) ? ref_fp8_quantize_f(x, s, I) : ref_quantize_f(x, s, zp, lo, hi))
#define ref_mask_d(x, s, zp, lo, hi) (ref_is_fp8(I) ? ref_fp8_mask_d(x, s, I) : ref_mask_d(x, s, zp, lo, hi))
#define ref_mask_f(x, s, zp, lo, hi) (ref_is_fp8(I) ? ref_fp8_mask_f(x, s, I) : ref_mask_f(x, s, zp, lo, hi))
#define ref_dequantize_d(q, s, zp) (ref_is_fp8(I) ? ref_fp8_dequantize_d(q, s, I) : ref_dequantize_d(q, s, zp))
#define ref_dequantize_f(q, s, zp) (ref_is_fp8(I) ? ref_fp8_dequantize_f(q, s, I) : ref_dequantize_f(q, s, zp))
  if (T == BQ_F64) {
    double s = ref_scale_d(d, a, pi);
    switch (d->op) {
    case BQ_QUANTIZE:
      if (!bwd) {
        ref_store_int(I, a->y, yi, ref_quantize_d(ref_load_d(T, a->x, xi), s, zp, qmin, qmax));
      } else if (ref_mask_d(ref_load_d(T, a->x, xi), s, zp, qmin, qmax)) {
        volatile double g = ref_load_d(T, a->dy, yi) / s;
        ref_store_d(a->dx, xi, g);
      } else {
        ref_store_zero(T, a->dx, xi);
      }
      return;
    case BQ_DEQUANTIZE:
      if (!bwd) {
        ref_store_d(a->y, yi, ref_dequantize_d(ref_load_int(I, a->x, xi), s, zp));
      } else {
        volatile double g = ref_load_d(T, a->dy, yi) * s;
        ref_store_d(a->dx, xi, g);
      }
      return;
    case BQ_FAKE_QUANTIZE:
      if (!bwd) {
        int32_t q = ref_quantize_d(ref_load_d(T, a->x, xi), s, zp, qmin, qmax);
        if (a->mask) ref_mask_set(a, xi, ref_mask_d(ref_load_d(T, a->x, xi), s, zp, qmin, qmax));
        ref_store_d(a->y, yi, ref_dequantize_d(q, s, zp));
      } else if (a->mask ? ref_mask_bit(a, xi) : ref_mask_d(ref_load_d(T, a->x, xi), s, zp, qmin, qmax)) {
        ref_copy_elem(T, a->dx, xi, a->dy, yi);
      } else {
        ref_store_zero(T, a->dx, xi);
      }
      return;
    default: return;
    }
  } else {
    float s = ref_scale_f(d, a, pi);
    switch (d->op) {
    case BQ_QUANTIZE:
      if (!bwd) {
        ref_store_int(I, a->y, yi, ref_quantize_f(ref_load_f(T, a->x, xi), s, zp, qmin, qmax));
      } else if (ref_mask_f(ref_load_f(T, a->x, xi), s, zp, qmin, qmax)) {
        volatile float g = ref_load_f(T, a->dy, yi) / s;
        ref_store_f(T, a->dx, xi, g);
      } else {
        ref_store_zero(T, a->dx, xi);
      }
      return;
    case BQ_DEQUANTIZE:
      if (!bwd) {
        ref_store_f(T, a->y, yi, ref_dequantize_f(ref_load_int(I, a->x, xi), s, zp));
      } else {
        volatile float g = ref_load_f(T, a->dy, yi) * s;
        ref_store_f(T, a->dx, xi, g);
      }
      return;
    case BQ_FAKE_QUANTIZE:
      if (!bwd) {
        int32_t q = ref_quantize_f(ref_load_f(T, a->x, xi), s, zp, qmin, qmax);
        if (a->mask) ref_mask_set(a, xi, ref_mask_f(ref_load_f(T, a->x, xi), s, zp, qmin, qmax));
        ref_store_f(T, a->y, yi, ref_dequantize_f(q, s, zp));
      } else if (a->mask ? ref_mask_bit(a, xi) : ref_mask_f(ref_load_f(T, a->x, xi), s, zp, qmin, qmax)) {
        ref_copy_elem(T, a->dx, xi, a->dy, yi);
      } else {
        ref_store_zero(T, a->dx, xi);
      }
      return;
    default: return;
    }
  }
}

#undef ref_quantize_d
#undef ref_quantize_f
#undef ref_mask_d
#undef ref_mask_f
#undef ref_dequantize_d
#undef ref_dequantize_f

/* Runs the op of `d` on HOST buffers: a->x, a->dy, a->scales, a->zero_points are read
   (zero_points NULL: all zero), a->y (forward) or a->dx (backward) is written. Only the
   elements of the problem are written: gaps between strided rows keep what the caller
   put there. Fake quantize per tensor and per channel with a->mask: the forward pass also
   writes the mask's ceil(numel / 32) words (bits past numel 0), the backward pass reads it
   instead of x. Returns 0, or -1 when the problem is not valid. */
REF_API int ref_run(const bq_desc *desc, const bq_args *a)
{
  bq_desc d = ref_desc_normalize(desc);
  ref_layout L;
  int64_t e, xi, yi, pi;
  if (!ref_is_float(d.float_type) || (d.int_type != BQ_S8 && d.int_type != BQ_U8 && !ref_is_fp8(d.int_type)))
    return -1;
  if (d.op != BQ_QUANTIZE && d.op != BQ_DEQUANTIZE && d.op != BQ_FAKE_QUANTIZE) return -1;
  if (ref_layout_init(&L, &d, a)) return -1;
  if (a->mask && (d.op != BQ_FAKE_QUANTIZE || (L.g != BQ_PER_TENSOR && L.g != BQ_PER_CHANNEL))) return -1;
  if (a->mask && d.direction != BQ_BACKWARD) memset(a->mask, 0, (size_t)((L.count + 31) / 32) * 4);
  for (e = 0; e < L.count; e++) {
    ref_layout_index(&L, e, &xi, &yi, &pi);
    ref_elem(&d, a, d.qmin, d.qmax, xi, yi, pi);
  }
  return 0;
}

/* ==== comparison ======================================================================= */

REF_API int ref_elem_is_nan(bq_dtype t, const void *buf, int64_t i)
{
  const unsigned char *p = (const unsigned char *)buf;
  switch (t) {
  case BQ_F32: { uint32_t u; memcpy(&u, p + 4 * i, 4); return (u & 0x7fffffffu) > 0x7f800000u; }
  case BQ_F64: { uint64_t u; memcpy(&u, p + 8 * i, 8); return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
  case BQ_F16: { uint16_t u; memcpy(&u, p + 2 * i, 2); return (u & 0x7fffu) > 0x7c00u; }
  case BQ_BF16: { uint16_t u; memcpy(&u, p + 2 * i, 2); return (u & 0x7fffu) > 0x7f80u; }
  default: return 0;
  }
}

/* Integers exactly; floats bit for bit except that any NaN equals any NaN. */
REF_API int ref_elem_equal(bq_dtype t, const void *a, const void *b, int64_t i)
{
  size_t es = ref_dtype_size(t);
  if (es == 0) return 0; /* (a type with no size here, E2M1's half bytes: never equal; compare their bytes as BQ_U8) */
  if (!memcmp((const unsigned char *)a + (size_t)i * es, (const unsigned char *)b + (size_t)i * es, es))
    return 1;
  return ref_is_float(t) && ref_elem_is_nan(t, a, i) && ref_elem_is_nan(t, b, i);
}

/* "0x3c00 (1)" into buf. */
REF_API void ref_format_elem(char *buf, size_t cap, bq_dtype t, const void *p, int64_t i)
{
  const unsigned char *b = (const unsigned char *)p;
  switch (t) {
  case BQ_F32: { float v; memcpy(&v, b + 4 * i, 4); snprintf(buf, cap, "0x%08x (%.9g)", (unsigned)ref_f32_bits(v), v); break; }
  case BQ_F64: { double v; memcpy(&v, b + 8 * i, 8); snprintf(buf, cap, "0x%016llx (%.17g)", (unsigned long long)ref_f64_bits(v), v); break; }
  case BQ_F16: { uint16_t h; memcpy(&h, b + 2 * i, 2); snprintf(buf, cap, "0x%04x (%.6g)", h, ref_f16_to_f32(h)); break; }
  case BQ_BF16: { uint16_t h; memcpy(&h, b + 2 * i, 2); snprintf(buf, cap, "0x%04x (%.4g)", h, ref_bf16_to_f32(h)); break; }
  case BQ_S8: case BQ_U8: snprintf(buf, cap, "0x%02x (%d)", b[i], (int)ref_load_int(t, p, i)); break;
  case BQ_S32: snprintf(buf, cap, "%d", (int)ref_load_int(t, p, i)); break;
  case BQ_E4M3: case BQ_E5M2: snprintf(buf, cap, "0x%02x (%g)", b[i], ref_fp8_to_double(b[i], ref_fp8_kind_of(t))); break;
  case BQ_UE8M0: snprintf(buf, cap, "0x%02x (%g)", b[i], ref_ue8m0_to_f64(b[i])); break;
  default: snprintf(buf, cap, "?"); break;
  }
}

REF_API void ref__append(char *msg, size_t cap, const char *fmt, ...)
{
  size_t len;
  va_list ap;
  if (!msg || !cap) return;
  len = strlen(msg);
  if (len + 1 >= cap) return;
  va_start(ap, fmt);
  vsnprintf(msg + len, cap - len, fmt, ap);
  va_end(ap);
}

#define REF_REPORT_MAX 8 /* mismatches described in the message */

/* Compares `count` elements of type t. Returns the number of mismatches and describes
   the first few in msg (always NUL-terminated; may be NULL). */
REF_API size_t ref_compare(bq_dtype t, const void *expected, const void *got, int64_t count,
                           char *msg, size_t cap)
{
  size_t bad = 0;
  int64_t i;
  char e[64], g[64];
  if (msg && cap) msg[0] = 0;
  for (i = 0; i < count; i++) {
    if (ref_elem_equal(t, expected, got, i)) continue;
    if (bad < REF_REPORT_MAX) {
      ref_format_elem(e, sizeof e, t, expected, i);
      ref_format_elem(g, sizeof g, t, got, i);
      ref__append(msg, cap, "  [%lld] expected %s got %s\n", (long long)i, e, g);
    }
    bad++;
  }
  if (bad > REF_REPORT_MAX) ref__append(msg, cap, "  ... %zu mismatches in all\n", bad);
  return bad;
}

/* Compares a whole output buffer of `total` elements (of the op's output type) whose
   element `origin` is output element 0: guard elements before and after, gaps between
   strided rows and the problem's elements alike. `host` holds the HOST inputs of the run
   (x, dy, scales, zero_points), used to describe the first mismatches: buffer index,
   row/col, inputs, scale and zero point, expected and got, as hex bits. */
REF_API size_t ref_compare_output(const bq_desc *desc, const bq_args *host, const void *expected,
                                  const void *got, int64_t total, int64_t origin, char *msg,
                                  size_t cap)
{
  bq_desc d = ref_desc_normalize(desc);
  bq_dtype ot = ref_out_type(&d);
  ref_layout L;
  int have_layout = ref_layout_init(&L, &d, host) == 0;
  int64_t out_extent = have_layout ? (ref_out_uses_y(&d) ? L.y_extent : L.x_extent) : 0;
  size_t bad = 0;
  int64_t j;
  char e[64], g[64], v[64];
  if (msg && cap) msg[0] = 0;
  for (j = 0; j < total; j++) {
    int64_t k = j - origin, lg, xi, yi, pi;
    if (ref_elem_equal(ot, expected, got, j)) continue;
    bad++;
    if (bad > REF_REPORT_MAX) continue;
    ref_format_elem(e, sizeof e, ot, expected, j);
    ref_format_elem(g, sizeof g, ot, got, j);
    if (k < 0 || k >= out_extent) {
      ref__append(msg, cap, "  buffer[%lld] (guard, output index %lld): expected %s got %s\n",
                  (long long)j, (long long)k, e, g);
      continue;
    }
    lg = ref_layout_logical(&L, k, ref_out_uses_y(&d));
    if (lg < 0) {
      ref__append(msg, cap, "  out[%lld] (gap between rows): expected %s got %s\n", (long long)k, e, g);
      continue;
    }
    ref_layout_index(&L, lg, &xi, &yi, &pi);
    ref__append(msg, cap, "  out[%lld] (elem %lld, row %lld col %lld):", (long long)k, (long long)lg,
                (long long)(lg / (L.cols ? L.cols : 1)), (long long)(lg % (L.cols ? L.cols : 1)));
    if (host->x && !(d.op == BQ_DEQUANTIZE && d.direction == BQ_BACKWARD)) {
      ref_format_elem(v, sizeof v, ref_x_type(&d), host->x, xi);
      ref__append(msg, cap, " x=%s", v);
    }
    if (d.direction == BQ_BACKWARD && host->dy) {
      ref_format_elem(v, sizeof v, d.float_type, host->dy, yi);
      ref__append(msg, cap, " dy=%s", v);
    }
    if (d.granularity == BQ_PER_TENSOR) {
      ref__append(msg, cap, " s=%.17g zp=%d", host->scale, (int)host->zero_point);
    } else {
      if (host->scales) {
        ref_format_elem(v, sizeof v, ref_scale_elem_type(d.scale_type), host->scales, pi);
        ref__append(msg, cap, " s[%lld]=%s", (long long)pi, v);
      }
      ref__append(msg, cap, " zp=%d", (int)ref_zero_point(&d, host, pi));
    }
    ref__append(msg, cap, " expected %s got %s\n", e, g);
  }
  if (bad > REF_REPORT_MAX) ref__append(msg, cap, "  ... %zu mismatches in all\n", bad);
  return bad;
}

#endif /* BQ_TESTS_REFERENCE_H */
