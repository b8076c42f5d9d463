/* tests/test_reference.c - pins the CPU reference (tests/reference.h) on hand-computed
   values, host only. If the reference is wrong, every GPU test is wrong with it, so each
   rule of docs/numerics.md that the GPU suites rely on has a value here that would fail. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../baracuda_quant.h"
#include "reference.h"
#include "reference_dynamic.h"
#include "reference_linear.h"

/* ---- helpers ------------------------------------------------------------------------- */

#define ASSERT_F16(f, want)                                                                    \
  do {                                                                                         \
    float f_ = (f);                                                                            \
    uint16_t got_ = ref_f32_to_f16(f_);                                                        \
    cr_assert_eq(got_, (uint16_t)(want), "f32->f16(%a = 0x%08x): got 0x%04x, want 0x%04x", f_, \
                 (unsigned)ref_f32_bits(f_), got_, (unsigned)(want));                          \
  } while (0)

#define ASSERT_BF16_BITS(bits, want)                                                            \
  do {                                                                                          \
    uint32_t b_ = (bits);                                                                       \
    uint16_t got_ = ref_f32_to_bf16(ref_bits_f32(b_));                                          \
    cr_assert_eq(got_, (uint16_t)(want), "f32->bf16(0x%08x): got 0x%04x, want 0x%04x", b_, got_, \
                 (unsigned)(want));                                                             \
  } while (0)

static int f16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

/* An independent oracle for RNE to a format with `bits` significand bits and smallest
   quantum 2^min_q_exp: round |f| to a multiple of its quantum with nearbyint in double
   (exact: the quotient is a power-of-two scaling). Returns the rounded value. */
static double oracle_round(float f, int bits, int min_q_exp)
{
  double a = fabs((double)f), q, r;
  int ex;
  frexp(a, &ex); /* 2^(ex-1) <= a < 2^ex */
  q = ldexp(1.0, ex - bits);
  if (q < ldexp(1.0, min_q_exp)) q = ldexp(1.0, min_q_exp);
  r = nearbyint(a / q) * q;
  return signbit(f) ? -r : r;
}

static uint16_t oracle_f16(float f)
{
  double r = oracle_round(f, 11, -24), a = fabs(r);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  int ex;
  double m;
  if (a >= 65536.0) return sign | 0x7c00;
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)(a / 0x1p-24));
  m = frexp(a, &ex); /* a = m * 2^ex, m in [0.5, 1) */
  return (uint16_t)(sign | (uint16_t)((ex - 1 + 15) << 10) | (uint16_t)((m * 2.0 - 1.0) * 1024.0));
}

static uint16_t oracle_bf16(float f)
{
  double r = oracle_round(f, 8, -133);
  if (fabs(r) >= 0x1p128) return signbit(f) ? 0xff80 : 0x7f80;
  return (uint16_t)(ref_f32_bits((float)r) >> 16); /* r is exact in f32 */
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void)
{
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- f16 --------------------------------------------------------------------------------- */

Test(f16, rne_ties)
{
  ASSERT_F16(1.0f, 0x3c00);
  ASSERT_F16(1.0f + 0x1p-11f, 0x3c00);            /* tie between 0x3c00 and 0x3c01: even */
  ASSERT_F16(1.0f + 3 * 0x1p-11f, 0x3c02);        /* tie between 0x3c01 and 0x3c02: even */
  ASSERT_F16(1.0f + 0x1p-11f + 0x1p-23f, 0x3c01); /* just above the tie */
  ASSERT_F16(1.0f + 0x1p-11f - 0x1p-23f, 0x3c00); /* just below */
  ASSERT_F16(1.0f - 0x1p-12f, 0x3c00);            /* tie between 0x3bff and 0x3c00 */
  ASSERT_F16(2049.0f, 0x6800);                    /* tie between 2048 and 2050 */
  ASSERT_F16(2051.0f, 0x6802);                    /* tie between 2050 and 2052 */
  ASSERT_F16(-(1.0f + 0x1p-11f), 0xbc00);
  ASSERT_F16(-(1.0f + 3 * 0x1p-11f), 0xbc02);
  ASSERT_F16(0.0f, 0x0000);
  ASSERT_F16(-0.0f, 0x8000);
  ASSERT_F16(1.0f / 3.0f, 0x3555);
}

Test(f16, overflow)
{
  ASSERT_F16(65504.0f, 0x7bff);
  ASSERT_F16(65519.0f, 0x7bff);
  ASSERT_F16(nextafterf(65520.0f, 0.0f), 0x7bff);
  ASSERT_F16(65520.0f, 0x7c00); /* the tie above the largest finite goes to even = inf */
  ASSERT_F16(-65520.0f, 0xfc00);
  ASSERT_F16(1e10f, 0x7c00);
  ASSERT_F16(FLT_MAX, 0x7c00);
  ASSERT_F16(-FLT_MAX, 0xfc00);
  ASSERT_F16(INFINITY, 0x7c00);
  ASSERT_F16(-INFINITY, 0xfc00);
}

Test(f16, subnormals)
{
  ASSERT_F16(0x1p-24f, 0x0001);
  ASSERT_F16(0x1p-25f, 0x0000); /* half the smallest subnormal: tie to even 0 */
  ASSERT_F16(-0x1p-25f, 0x8000);
  ASSERT_F16(nextafterf(0x1p-25f, 1.0f), 0x0001);
  ASSERT_F16(3 * 0x1p-25f, 0x0002); /* 1.5 units */
  ASSERT_F16(5 * 0x1p-25f, 0x0002); /* 2.5 units */
  ASSERT_F16(7 * 0x1p-25f, 0x0004); /* 3.5 units */
  ASSERT_F16(1023 * 0x1p-24f, 0x03ff);
  ASSERT_F16(0x1p-14f - 0x1p-25f, 0x0400); /* 1023.5 units: up to the smallest normal */
  ASSERT_F16(0x1p-14f - 3 * 0x1p-25f, 0x03fe); /* 1022.5 units */
  ASSERT_F16(0x1p-14f, 0x0400);
  ASSERT_F16(-0x1p-24f, 0x8001);
  ASSERT_F16(1e-10f, 0x0000);
  ASSERT_F16(FLT_MIN, 0x0000);
  ASSERT_F16(-ref_bits_f32(1), 0x8000); /* f32 subnormal */
}

Test(f16, nan_stays_nan)
{
  uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7f801fffu};
  size_t i;
  for (i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint16_t h = ref_f32_to_f16(ref_bits_f32(nans[i]));
    cr_assert(f16_is_nan(h), "f32 NaN 0x%08x -> f16 0x%04x is not NaN", nans[i], h);
  }
  cr_assert(isnan(ref_f16_to_f32(0x7e00)));
  cr_assert(isnan(ref_f16_to_f32(0x7c01)));
  cr_assert(isnan(ref_f16_to_f32(0xfe00)));
}

Test(f16, to_f32)
{
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x0001)), ref_f32_bits(0x1p-24f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x03ff)), ref_f32_bits(1023 * 0x1p-24f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x0400)), ref_f32_bits(0x1p-14f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x7bff)), ref_f32_bits(65504.0f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x3c00)), ref_f32_bits(1.0f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x3555)), ref_f32_bits(0.333251953125f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0xc000)), ref_f32_bits(-2.0f));
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x8000)), 0x80000000u);
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x7c00)), 0x7f800000u);
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0xfc00)), 0xff800000u);
  cr_assert_eq(ref_f32_bits(ref_f16_to_f32(0x8001)), ref_f32_bits(-0x1p-24f));
}

Test(f16, every_value_round_trips)
{
  uint32_t h;
  for (h = 0; h <= 0xffff; h++) {
    float f = ref_f16_to_f32((uint16_t)h);
    if (f16_is_nan((uint16_t)h)) {
      cr_assert(isnan(f), "f16 0x%04x", h);
      continue;
    }
    cr_assert_eq(ref_f32_to_f16(f), h, "f16 0x%04x -> %a -> 0x%04x", h, f, ref_f32_to_f16(f));
  }
}

/* Every f32 whose low 13 bits sit at or next to the f16 rounding point, plus random
   bit patterns, against the nearbyint oracle (and the compiler's _Float16 when it has
   one). */
Test(f16, matches_oracle)
{
  uint32_t hi, i;
  for (hi = 0; hi < (1u << 19); hi++) { /* every sign/exponent/top-10-mantissa prefix */
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
    for (i = 0; i < 6; i++) {
      uint32_t b = (hi << 13) | lows[i];
      float f = ref_bits_f32(b);
      if (isnan(f)) continue;
      cr_assert_eq(ref_f32_to_f16(f), oracle_f16(f), "0x%08x: 0x%04x vs oracle 0x%04x", b,
                   ref_f32_to_f16(f), oracle_f16(f));
    }
  }
  for (i = 0; i < 2000000; i++) {
    uint32_t b = (uint32_t)rng_next();
    float f = ref_bits_f32(b);
    if (isnan(f)) continue;
    cr_assert_eq(ref_f32_to_f16(f), oracle_f16(f), "0x%08x", b);
#ifdef __FLT16_MAX__
    {
      _Float16 c = (_Float16)f;
      uint16_t cb;
      memcpy(&cb, &c, 2);
      cr_assert_eq(ref_f32_to_f16(f), cb, "0x%08x: 0x%04x vs _Float16 0x%04x", b, ref_f32_to_f16(f), cb);
    }
#endif
  }
}

/* ---- bf16 -------------------------------------------------------------------------------- */

Test(bf16, rne_ties)
{
  ASSERT_BF16_BITS(0x3f800000u, 0x3f80);
  ASSERT_BF16_BITS(0x3f808000u, 0x3f80); /* 1 + 2^-8: tie, even */
  ASSERT_BF16_BITS(0x3f818000u, 0x3f82); /* tie between 0x3f81 and 0x3f82 */
  ASSERT_BF16_BITS(0x3f808001u, 0x3f81);
  ASSERT_BF16_BITS(0x3f807fffu, 0x3f80);
  ASSERT_BF16_BITS(0xbf808000u, 0xbf80);
  ASSERT_BF16_BITS(0xbf818000u, 0xbf82);
  ASSERT_BF16_BITS(0x80000000u, 0x8000);
  cr_assert_eq(ref_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
}

Test(bf16, overflow)
{
  ASSERT_BF16_BITS(0x7f7f7fffu, 0x7f7f);
  ASSERT_BF16_BITS(0x7f7f8000u, 0x7f80); /* tie above the largest finite: even = inf */
  ASSERT_BF16_BITS(ref_f32_bits(FLT_MAX), 0x7f80);
  ASSERT_BF16_BITS(ref_f32_bits(-FLT_MAX), 0xff80);
  ASSERT_BF16_BITS(0x7f800000u, 0x7f80);
  ASSERT_BF16_BITS(0xff800000u, 0xff80);
  ASSERT_BF16_BITS(0x7f7effffu, 0x7f7f);
}

Test(bf16, subnormals)
{
  ASSERT_BF16_BITS(0x00008000u, 0x0000); /* tie: even 0 */
  ASSERT_BF16_BITS(0x80008000u, 0x8000);
  ASSERT_BF16_BITS(0x00008001u, 0x0001);
  ASSERT_BF16_BITS(0x00018000u, 0x0002);
  ASSERT_BF16_BITS(0x00010000u, 0x0001);
  ASSERT_BF16_BITS(0x007f8000u, 0x0080); /* tie between 0x007f and 0x0080 (smallest normal) */
  ASSERT_BF16_BITS(0x007f7fffu, 0x007f);
  ASSERT_BF16_BITS(0x00000001u, 0x0000);
}

Test(bf16, nan_stays_nan)
{
  uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f80ffffu, 0x7fff0000u};
  size_t i;
  for (i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    uint16_t h = ref_f32_to_bf16(ref_bits_f32(nans[i]));
    cr_assert(bf16_is_nan(h), "f32 NaN 0x%08x -> bf16 0x%04x is not NaN", nans[i], h);
  }
}

Test(bf16, every_value_round_trips_and_matches_oracle)
{
  uint32_t h, i;
  for (h = 0; h <= 0xffff; h++) {
    float f = ref_bf16_to_f32((uint16_t)h);
    cr_assert_eq(ref_f32_bits(f), h << 16);
    if (!bf16_is_nan((uint16_t)h)) cr_assert_eq(ref_f32_to_bf16(f), h, "bf16 0x%04x", h);
  }
  for (h = 0; h <= 0xffff; h++) {
    static const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (i = 0; i < 6; i++) {
      uint32_t b = (h << 16) | lows[i];
      float f = ref_bits_f32(b);
      if (isnan(f)) continue;
      cr_assert_eq(ref_f32_to_bf16(f), oracle_bf16(f), "0x%08x: 0x%04x vs oracle 0x%04x", b,
                   ref_f32_to_bf16(f), oracle_bf16(f));
    }
  }
  for (i = 0; i < 2000000; i++) {
    uint32_t b = (uint32_t)rng_next();
    float f = ref_bits_f32(b);
    if (!isnan(f)) cr_assert_eq(ref_f32_to_bf16(f), oracle_bf16(f), "0x%08x", b);
  }
}

/* ---- quantize ---------------------------------------------------------------------------- */

Test(quantize, ties_to_even)
{
  static const float xs[] = {0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, -3.5f, 126.5f, -127.5f};
  static const int want[] = {0, 2, 2, 4, 0, -2, -2, -4, 126, -128};
  size_t i;
  for (i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    cr_assert_eq(ref_quantize_f(xs[i], 1.0f, 0, -128, 127), want[i], "f32 x=%g", xs[i]);
    cr_assert_eq(ref_quantize_d(xs[i], 1.0, 0, -128, 127), want[i], "f64 x=%g", xs[i]);
  }
  /* scale 0.5: the quotient is the tie */
  cr_assert_eq(ref_quantize_f(1.25f, 0.5f, 0, -128, 127), 2);
  cr_assert_eq(ref_quantize_f(1.75f, 0.5f, 0, -128, 127), 4);
  cr_assert_eq(ref_quantize_d(-1.25, 0.5, 0, -128, 127), -2);
}

Test(quantize, odd_zero_point_added_after_rounding)
{
  /* zp = 3: 2.5 -> 2 + 3 = 5 (adding first would give rne(5.5) = 6) */
  cr_assert_eq(ref_quantize_f(2.5f, 1.0f, 3, -128, 127), 5);
  cr_assert_eq(ref_quantize_f(3.5f, 1.0f, 3, -128, 127), 7);
  cr_assert_eq(ref_quantize_f(-2.5f, 1.0f, 3, -128, 127), 1);
  cr_assert_eq(ref_quantize_f(2.5f, 1.0f, -7, -128, 127), -5);
  cr_assert_eq(ref_quantize_d(3.5, 1.0, -7, -128, 127), -3);
  cr_assert_eq(ref_quantize_f(0.5f, 1.0f, 131, 0, 255), 131);
  cr_assert_eq(ref_quantize_f(1.5f, 1.0f, 131, 0, 255), 133);
}

/* f32 math must stay in float: these operands divide to exactly 2.5f in float, while
   the exact (and the double) quotient is a bit above 2.5. */
Test(quantize, f32_division_rounds_in_float)
{
  float x = ref_bits_f32(0x40204d57u), s = ref_bits_f32(0x3f803ddfu);
  volatile float q = x / s;
  cr_assert_eq(ref_f32_bits(q), ref_f32_bits(2.5f));
  cr_assert_eq(ref_quantize_f(x, s, 0, -128, 127), 2);
  cr_assert_eq(ref_quantize_d((double)x, (double)s, 0, -128, 127), 3);
  cr_assert_eq(ref_mask_f(x, s, -125, -128, 127), 1);  /* 2 - 125 = -123 */
  cr_assert_eq(ref_mask_f(x, s, 125, -128, 127), 1);   /* 127: in range */
  cr_assert_eq(ref_mask_d(x, s, 125, -128, 127), 0);   /* 3 + 125 = 128: out */
}

/* The host per-tensor scale is cast to float once: 0.05f / (float)0.1 is exactly 0.5 in
   float (-> 0), while 0.05f / 0.1 in double is 0.50000000745 (-> 1). */
Test(quantize, per_tensor_scale_cast_once_to_float)
{
  float xs[2] = {0.05f, 0.35f};
  double xd[2] = {(double)0.05f, (double)0.35f};
  int8_t q[2] = {99, 99};
  bq_desc d = {.op = BQ_QUANTIZE, .float_type = BQ_F32};
  bq_args a = {.x = xs, .y = q, .numel = 2, .scale = 0.1, .zero_point = 0};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[0], 0);
  cr_assert_eq(q[1], 4); /* 3.5 in float */
  d.float_type = BQ_F64;
  a.x = xd;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[0], 1);
  cr_assert_eq(q[1], 3);
}

Test(quantize, nan_maps_to_zero_point)
{
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, 5, -128, 127), 5);
  cr_assert_eq(ref_quantize_f(-NAN, 1.0f, -3, -128, 127), -3);
  cr_assert_eq(ref_quantize_f(NAN, 0.25f, 200, -128, 127), 127); /* saturated zp */
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, -7, 0, 255), 0);
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, 300, 0, 255), 255);
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, 0, 3, 200), 3);
  cr_assert_eq(ref_quantize_d(NAN, 1.0, 17, -128, 127), 17);
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, INT32_MIN, -128, 127), -128);
  cr_assert_eq(ref_quantize_f(NAN, 1.0f, INT32_MAX, -128, 127), 127);
  /* 0 / 0 and x / NaN are NaN quotients */
  cr_assert_eq(ref_quantize_f(0.0f, 0.0f, 9, -128, 127), 9);
  cr_assert_eq(ref_quantize_f(-0.0f, 0.0f, 9, -128, 127), 9);
  cr_assert_eq(ref_quantize_f(3.0f, NAN, -9, -128, 127), -9);
  cr_assert_eq(ref_quantize_d(0.0, 0.0, 9, -128, 127), 9);
}

Test(quantize, infinities_saturate)
{
  cr_assert_eq(ref_quantize_f(INFINITY, 1.0f, 0, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-INFINITY, 1.0f, 0, -128, 127), -128);
  cr_assert_eq(ref_quantize_f(INFINITY, 1.0f, 0, 0, 255), 255);
  cr_assert_eq(ref_quantize_f(-INFINITY, 1.0f, 0, 0, 255), 0);
  cr_assert_eq(ref_quantize_f(INFINITY, 1.0f, 0, -7, 7), 7);
  cr_assert_eq(ref_quantize_f(-INFINITY, 1.0f, 0, -7, 7), -7);
  cr_assert_eq(ref_quantize_f(INFINITY, 1.0f, 0, 3, 200), 200);
  cr_assert_eq(ref_quantize_f(-INFINITY, 1.0f, 0, 3, 200), 3);
  cr_assert_eq(ref_quantize_f(INFINITY, 1.0f, INT32_MIN, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-INFINITY, 1.0f, INT32_MAX, -128, 127), -128);
  cr_assert_eq(ref_quantize_d(INFINITY, 1.0, INT32_MIN, -128, 127), 127);
  cr_assert_eq(ref_quantize_d(-INFINITY, 1.0, INT32_MAX, 0, 255), 0);
  /* x / 0 */
  cr_assert_eq(ref_quantize_f(1.0f, 0.0f, 0, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-1.0f, 0.0f, 0, -128, 127), -128);
  cr_assert_eq(ref_quantize_f(1e-45f, 0.0f, 0, -128, 127), 127);
}

Test(quantize, huge_values_and_extreme_zero_points_never_wrap)
{
  cr_assert_eq(ref_quantize_f(1e30f, 1.0f, INT32_MAX, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-1e30f, 1.0f, INT32_MIN, -128, 127), -128);
  cr_assert_eq(ref_quantize_f(1e30f, 1.0f, INT32_MIN, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-1e30f, 1.0f, INT32_MAX, -128, 127), -128);
  cr_assert_eq(ref_quantize_f(FLT_MAX, 1.0f, 0, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(-FLT_MAX, 0.5f, 0, 0, 255), 0);
  cr_assert_eq(ref_quantize_f(FLT_MAX, FLT_TRUE_MIN, 0, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(0.0f, 1.0f, INT32_MAX, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(0.0f, 1.0f, INT32_MIN, 0, 255), 0);
  /* exact int64 arithmetic: -2^31 + (2^31 - 1) = -1, 2^31 + -2^31 = 0, 2^31 + 256 - 2^31 */
  cr_assert_eq(ref_quantize_f(-2147483648.0f, 1.0f, INT32_MAX, -128, 127), -1);
  cr_assert_eq(ref_quantize_f(2147483648.0f, 1.0f, INT32_MIN, -128, 127), 0);
  cr_assert_eq(ref_quantize_f(2147483904.0f, 1.0f, INT32_MIN, 0, 255), 255);
  cr_assert_eq(ref_quantize_f(2147483904.0f, 1.0f, INT32_MIN, -128, 127), 127);
  cr_assert_eq(ref_quantize_f(2147483520.0f, 1.0f, INT32_MIN, -128, 127), -128);
  cr_assert_eq(ref_quantize_d(2147483649.0, 1.0, INT32_MIN, -128, 127), 1);
  cr_assert_eq(ref_quantize_d(-2147483700.0, 1.0, INT32_MAX, -128, 127), -53);
  cr_assert_eq(ref_quantize_d(1e300, 1.0, INT32_MAX, -128, 127), 127);
  cr_assert_eq(ref_quantize_d(-1e300, 1e-300, INT32_MIN, -128, 127), -128);
  cr_assert_eq(ref_quantize_d(DBL_MAX, 0.5, 0, -128, 127), 127); /* quotient inf */
}

Test(quantize, subnormals_and_signed_zero)
{
  cr_assert_eq(ref_quantize_f(FLT_TRUE_MIN, 1.0f, 4, -128, 127), 4);
  cr_assert_eq(ref_quantize_f(FLT_TRUE_MIN, FLT_TRUE_MIN, 4, -128, 127), 5);
  cr_assert_eq(ref_quantize_f(3 * FLT_TRUE_MIN, 2 * FLT_TRUE_MIN, 0, -128, 127), 2); /* 1.5 */
  cr_assert_eq(ref_quantize_f(5 * FLT_TRUE_MIN, 2 * FLT_TRUE_MIN, 0, -128, 127), 2); /* 2.5 */
  cr_assert_eq(ref_quantize_f(-0.0f, 1.0f, 0, -128, 127), 0);
  cr_assert_eq(ref_quantize_d(-0.0, 1.0, -1, -128, 127), -1);
}

Test(quantize, default_q_range_is_the_int_types)
{
  int lo, hi;
  bq_desc d = {.op = BQ_QUANTIZE, .float_type = BQ_F32};
  ref_qrange(&d, &lo, &hi);
  cr_assert(lo == -128 && hi == 127);
  d.int_type = BQ_S8;
  ref_qrange(&d, &lo, &hi);
  cr_assert(lo == -128 && hi == 127);
  d.int_type = BQ_U8;
  ref_qrange(&d, &lo, &hi);
  cr_assert(lo == 0 && hi == 255);
  d.qmin = 3;
  d.qmax = 200;
  ref_qrange(&d, &lo, &hi);
  cr_assert(lo == 3 && hi == 200);
  { /* through ref_run: u8 default range keeps 255 */
    float x[3] = {255.0f, -1.0f, 300.0f};
    uint8_t q[3];
    bq_desc du = {.op = BQ_QUANTIZE, .float_type = BQ_F32, .int_type = BQ_U8};
    bq_args a = {.x = x, .y = q, .numel = 3, .scale = 1.0};
    cr_assert_eq(ref_run(&du, &a), 0);
    cr_assert(q[0] == 255 && q[1] == 0 && q[2] == 255, "%d %d %d", q[0], q[1], q[2]);
  }
}

/* ---- dequantize -------------------------------------------------------------------------- */

Test(dequantize, difference_exact_in_integer)
{
  /* -128 - INT32_MAX = -2147483775: int32 would wrap to +2147483521 */
  float f = ref_dequantize_f(-128, 1.0f, INT32_MAX);
  double g = ref_dequantize_d(-128, 1.0, INT32_MAX);
  cr_assert_eq(ref_f32_bits(f), ref_f32_bits(-2147483648.0f), "%a", f);
  cr_assert_eq(ref_f64_bits(g), ref_f64_bits(-2147483775.0), "%a", g);
  /* 127 + 16777090 = 2^24 + 1: one RNE conversion to float (-> 2^24), exact in double */
  cr_assert_eq(ref_f32_bits(ref_dequantize_f(127, 1.0f, -16777090)), ref_f32_bits(16777216.0f));
  cr_assert_eq(ref_dequantize_d(127, 1.0, -16777090), 16777217.0);
  cr_assert_eq(ref_dequantize_f(255, 0.5f, INT32_MIN), 1073741952.0f); /* (2^31+255)/2 -> float */
  cr_assert_eq(ref_f32_bits(ref_dequantize_f(5, 0.5f, 3)), ref_f32_bits(1.0f));
  cr_assert_eq(ref_f32_bits(ref_dequantize_f(-128, 0.1f, 0)), 0xc14ccccdu);
  cr_assert_eq(ref_f32_bits(ref_dequantize_f(7, 2.0f, 7)), 0x00000000u); /* +0, not -0 */
  cr_assert_eq(ref_f32_bits(ref_dequantize_f(0, -2.0f, 0)), 0x80000000u); /* 0 * -2 = -0 */
}

Test(dequantize, rounds_in_compute_type_then_to_f16)
{
  int8_t q[4] = {1, 3, 5, -128};
  uint16_t y[4];
  float s[4] = {1.0f + 0x1p-11f, 1.0f + 0x1p-11f, 13428327 * 0x1p-26f, 1.0f};
  int32_t zp[4] = {0, 0, 0, INT32_MAX};
  bq_desc d = {.op = BQ_DEQUANTIZE, .granularity = BQ_PER_CHANNEL, .float_type = BQ_F16,
               .scale_type = BQ_F32};
  bq_args a = {.x = q, .y = y, .rank = 1, .shape = {4}, .axis = 0, .scales = s, .zero_points = zp};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(y[0], 0x3c00, "0x%04x", y[0]); /* 1 + 2^-11: tie to even */
  cr_assert_eq(y[1], 0x4201, "0x%04x", y[1]); /* 3 + 3*2^-11 = 3 + 0.75 ulp */
  /* 5 * s = 1 + 2^-11 + 3*2^-26 exactly: float rounds it to the tie 1 + 2^-11, then f16
     rounds to even (0x3c00). One rounding from the exact product would give 0x3c01. */
  cr_assert_eq(y[2], 0x3c00, "0x%04x", y[2]);
  cr_assert_eq(y[3], 0xfc00, "0x%04x", y[3]); /* -2147483648 overflows f16 */
}

Test(dequantize, to_bf16_and_f64)
{
  int8_t q[3] = {-128, 1, 127};
  uint16_t yb[3];
  double yd[3];
  bq_desc d = {.op = BQ_DEQUANTIZE, .float_type = BQ_BF16};
  bq_args a = {.x = q, .y = yb, .numel = 3, .scale = 1.0, .zero_point = INT32_MAX};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(yb[0], 0xcf00, "0x%04x", yb[0]); /* -2^31 */
  cr_assert_eq(yb[1], 0xcf00, "0x%04x", yb[1]); /* -2147483646 -> float -2^31 */
  d.float_type = BQ_F64;
  a.y = yd;
  a.scale = 0.1;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(yd[0], (-128.0 - 2147483647.0) * 0.1);
  cr_assert_eq(yd[2], -2147483520.0 * 0.1);
}

/* ---- fake quantize ----------------------------------------------------------------------- */

Test(fake_quantize, hand_values)
{
  float x[6] = {2.5f, 1e30f, NAN, -0.0f, 100.0f, -INFINITY};
  float y[6];
  bq_desc d = {.op = BQ_FAKE_QUANTIZE, .float_type = BQ_F32};
  bq_args a = {.x = x, .y = y, .numel = 6, .scale = 1.0, .zero_point = 3};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(ref_f32_bits(y[0]), ref_f32_bits(2.0f)); /* q = 5, (5 - 3) * 1 */
  cr_assert_eq(y[1], 124.0f);                            /* q = 127 */
  cr_assert_eq(ref_f32_bits(y[2]), 0u);                  /* NaN -> zp -> +0 */
  cr_assert_eq(ref_f32_bits(y[3]), 0u);                  /* -0 -> zp -> +0 */
  cr_assert_eq(y[5], -131.0f);                           /* q = -128 */
  d.qmin = -7;
  d.qmax = 7;
  a.scale = 0.5;
  a.zero_point = 2;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(y[4], 2.5f); /* q = 7, (7 - 2) * 0.5 */
  cr_assert_eq(y[5], -4.5f);
}

static void fill_random_floats(bq_dtype t, void *buf, int64_t n, float scale)
{
  int64_t i;
  for (i = 0; i < n; i++) {
    uint64_t r = rng_next();
    float v;
    switch (r % 16) {
    case 0: v = NAN; break;
    case 1: v = (r & 16) ? INFINITY : -INFINITY; break;
    case 2: v = ((int)(r >> 8 & 511) - 256 + 0.5f) * scale; break;
    case 3: v = (r & 16) ? -0.0f : 1e30f; break;
    default: v = ((float)(int64_t)(r >> 40) / (float)(1 << 24) - 0.5f) * 700.0f * scale; break;
    }
    if (t == BQ_F64) ref_store_d(buf, i, (double)v);
    else ref_store_f(t, buf, i, v);
  }
}

/* fake quantize == dequantize(quantize(x)) through the whole driver, per group with
   zero and NaN scales, for every float type and both int types. */
Test(fake_quantize, equals_dequantize_of_quantize)
{
  enum { R = 3, K = 12, G = 3, GRS = 5, N = R * K };
  static const bq_dtype ts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  static const bq_dtype is[] = {BQ_S8, BQ_U8};
  size_t ti, ii;
  for (ti = 0; ti < 4; ti++) {
    for (ii = 0; ii < 2; ii++) {
      double xbuf[N], ybuf[N], y2buf[N];
      float sbuf[R * GRS];
      int32_t zps[R * GRS];
      uint8_t q[N];
      char msg[2048];
      int k;
      bq_desc d = {.op = BQ_FAKE_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = ts[ti],
                   .int_type = is[ii], .scale_type = BQ_F32};
      bq_args a = {.x = xbuf, .y = ybuf, .rows = R, .cols = K, .group_size = G,
                   .group_row_stride = GRS, .scales = sbuf, .zero_points = zps};
      fill_random_floats(ts[ti], xbuf, N, 0.25f);
      for (k = 0; k < R * GRS; k++) {
        sbuf[k] = k == 2 ? 0.0f : k == 7 ? NAN : (float)(k + 1) * 0.125f;
        zps[k] = (int32_t)(rng_next() % 301) - 150;
      }
      cr_assert_eq(ref_run(&d, &a), 0);
      d.op = BQ_QUANTIZE;
      a.y = q;
      cr_assert_eq(ref_run(&d, &a), 0);
      d.op = BQ_DEQUANTIZE;
      a.x = q;
      a.y = y2buf;
      cr_assert_eq(ref_run(&d, &a), 0);
      cr_assert_eq(ref_compare(ts[ti], y2buf, ybuf, N, msg, sizeof msg), 0, "%s %s\n%s",
                   ref_dtype_name(ts[ti]), ref_dtype_name(is[ii]), msg);
    }
  }
}

/* ---- backward ---------------------------------------------------------------------------- */

Test(backward, mask_at_range_edges)
{
  /* s8 full range, zp 0 */
  cr_assert_eq(ref_mask_f(127.0f, 1.0f, 0, -128, 127), 1);
  cr_assert_eq(ref_mask_f(127.49f, 1.0f, 0, -128, 127), 1);
  cr_assert_eq(ref_mask_f(127.5f, 1.0f, 0, -128, 127), 0);  /* rne = 128 */
  cr_assert_eq(ref_mask_f(126.5f, 1.0f, 0, -128, 127), 1);  /* rne = 126 */
  cr_assert_eq(ref_mask_f(-128.5f, 1.0f, 0, -128, 127), 1); /* rne = -128 (even) */
  cr_assert_eq(ref_mask_f(-128.51f, 1.0f, 0, -128, 127), 0);
  cr_assert_eq(ref_mask_f(-129.5f, 1.0f, 0, -128, 127), 0); /* rne = -130 */
  cr_assert_eq(ref_mask_d(128.5, 1.0, 0, -128, 127), 0);    /* rne = 128 */
  cr_assert_eq(ref_mask_d(-128.5, 1.0, 0, -128, 127), 1);
  /* narrow s8 [-7, 7] */
  cr_assert_eq(ref_mask_f(7.5f, 1.0f, 0, -7, 7), 0);
  cr_assert_eq(ref_mask_f(6.5f, 1.0f, 0, -7, 7), 1);
  cr_assert_eq(ref_mask_f(7.49f, 1.0f, 0, -7, 7), 1);
  cr_assert_eq(ref_mask_f(-7.5f, 1.0f, 0, -7, 7), 0);
  cr_assert_eq(ref_mask_f(-6.5f, 1.0f, 0, -7, 7), 1);
  cr_assert_eq(ref_mask_f(3.75f, 0.5f, 0, -7, 7), 0); /* 7.5 -> 8 */
  cr_assert_eq(ref_mask_f(3.25f, 0.5f, 0, -7, 7), 1); /* 6.5 -> 6 */
  /* u8 [3, 200] with zp 3 */
  cr_assert_eq(ref_mask_f(-0.5f, 1.0f, 3, 3, 200), 1);  /* rne = -0 -> 3 */
  cr_assert_eq(ref_mask_f(-0.51f, 1.0f, 3, 3, 200), 0); /* rne = -1 -> 2 */
  cr_assert_eq(ref_mask_f(-1.0f, 1.0f, 3, 3, 200), 0);
  cr_assert_eq(ref_mask_f(196.5f, 1.0f, 3, 3, 200), 1); /* 196 + 3 = 199 */
  cr_assert_eq(ref_mask_f(197.49f, 1.0f, 3, 3, 200), 1);
  cr_assert_eq(ref_mask_f(197.5f, 1.0f, 3, 3, 200), 0); /* 198 + 3 = 201 */
  /* zero point outside the range: nothing passes at 0 */
  cr_assert_eq(ref_mask_f(0.0f, 1.0f, 300, 0, 255), 0);
  cr_assert_eq(ref_mask_f(-45.0f, 1.0f, 300, 0, 255), 1);
}

Test(backward, mask_special_values)
{
  cr_assert_eq(ref_mask_f(NAN, 1.0f, 0, -128, 127), 0);
  cr_assert_eq(ref_mask_f(NAN, 1.0f, 0, -128, 127), 0);
  cr_assert_eq(ref_mask_d(NAN, 1.0, 5, -128, 127), 0);
  cr_assert_eq(ref_mask_f(INFINITY, 1.0f, 0, -128, 127), 0);
  cr_assert_eq(ref_mask_f(-INFINITY, 1.0f, 0, 0, 255), 0);
  cr_assert_eq(ref_mask_f(0.0f, 0.0f, 0, -128, 127), 0); /* 0/0 NaN quotient */
  cr_assert_eq(ref_mask_f(1.0f, 0.0f, 0, -128, 127), 0); /* inf */
  cr_assert_eq(ref_mask_f(1.0f, NAN, 0, -128, 127), 0);
  cr_assert_eq(ref_mask_f(1e30f, 1.0f, INT32_MIN, -128, 127), 0);
  cr_assert_eq(ref_mask_f(0.0f, 1.0f, INT32_MIN, -128, 127), 0);
  cr_assert_eq(ref_mask_f(-2147483648.0f, 1.0f, INT32_MAX, -128, 127), 1); /* -1 */
  cr_assert_eq(ref_mask_f(-2147483648.0f, 1.0f, INT32_MAX, 0, 255), 0);
  cr_assert_eq(ref_mask_f(-0.0f, 1.0f, 0, 0, 255), 1);
  cr_assert_eq(ref_mask_f(FLT_TRUE_MIN, 1.0f, 0, -7, 7), 1);
}

Test(backward, quantize_gradient)
{
  float x[5] = {1.0f, 200.0f, NAN, -1.0f, 2.0f};
  float dy[5] = {3.0f, -3.0f, 5.0f, -1.0f, 1.0f};
  float dx[5];
  bq_desc d = {.op = BQ_QUANTIZE, .direction = BQ_BACKWARD, .float_type = BQ_F32};
  bq_args a = {.x = x, .dy = dy, .dx = dx, .numel = 5, .scale = 0.5, .zero_point = 1};
  memset(dx, 0x77, sizeof dx);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(dx[0], 6.0f);
  cr_assert_eq(ref_f32_bits(dx[1]), 0u); /* masked: +0 even for negative dy */
  cr_assert_eq(ref_f32_bits(dx[2]), 0u);
  cr_assert_eq(dx[3], -2.0f);
  cr_assert_eq(dx[4], 2.0f);
  { /* f16: 1 / 3 in float = 0x3eaaaaab, then RNE to f16 = 0x3555 */
    uint16_t xh[2] = {0x3c00, 0x7c00}, dyh[2] = {0x3c00, 0x3c00}, dxh[2] = {0xaaaa, 0xaaaa};
    bq_desc dh = {.op = BQ_QUANTIZE, .direction = BQ_BACKWARD, .float_type = BQ_F16};
    bq_args ah = {.x = xh, .dy = dyh, .dx = dxh, .numel = 2, .scale = 3.0};
    cr_assert_eq(ref_run(&dh, &ah), 0);
    cr_assert_eq(dxh[0], 0x3555, "0x%04x", dxh[0]);
    cr_assert_eq(dxh[1], 0x0000, "0x%04x", dxh[1]); /* x = inf: masked */
  }
}

Test(backward, fake_quantize_gradient_copies_bits)
{
  float x[4] = {1.0f, 1.0f, 1000.0f, 1.0f};
  uint32_t dyb[4] = {0x7fc01234u, 0x80000000u, 0x3f800000u, 0x00000001u};
  float dy[4], dx[4];
  bq_desc d = {.op = BQ_FAKE_QUANTIZE, .direction = BQ_BACKWARD, .float_type = BQ_F32};
  bq_args a = {.x = x, .dy = dy, .dx = dx, .numel = 4, .scale = 1.0};
  memcpy(dy, dyb, sizeof dy);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(ref_f32_bits(dx[0]), 0x7fc01234u); /* the NaN payload survives */
  cr_assert_eq(ref_f32_bits(dx[1]), 0x80000000u); /* -0 survives */
  cr_assert_eq(ref_f32_bits(dx[2]), 0u);          /* masked */
  cr_assert_eq(ref_f32_bits(dx[3]), 1u);          /* subnormal survives */
}

Test(backward, dequantize_gradient_ignores_x)
{
  float dy[3] = {3.0f, -0.0f, INFINITY}, dx[3];
  double dyd[1] = {0.1}, dxd[1];
  bq_desc d = {.op = BQ_DEQUANTIZE, .direction = BQ_BACKWARD, .float_type = BQ_F32};
  bq_args a = {.x = NULL, .dy = dy, .dx = dx, .numel = 3, .scale = 0.5, .zero_point = 100};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(dx[0], 1.5f);
  cr_assert_eq(ref_f32_bits(dx[1]), 0x80000000u);
  cr_assert_eq(dx[2], INFINITY);
  d.float_type = BQ_F64;
  a.dy = dyd;
  a.dx = dxd;
  a.numel = 1;
  a.scale = 3.0;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(ref_f64_bits(dxd[0]), ref_f64_bits(0.1 * 3.0));
  cr_assert_neq(ref_f64_bits(dxd[0]), ref_f64_bits((double)(0.1f * 3.0f)));
}

/* ---- layouts ----------------------------------------------------------------------------- */

Test(layout, per_channel_axis)
{
  float x[6] = {2, 2, 2, 8, 8, 8}, s3[3] = {1, 2, 4}, s2[2] = {1, 2};
  int8_t q[6];
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_CHANNEL, .float_type = BQ_F32};
  bq_args a = {.x = x, .y = q, .rank = 2, .shape = {2, 3}, .axis = 1, .scales = s3};
  int8_t w1[6] = {2, 1, 0, 8, 4, 2}, w0[6] = {2, 2, 2, 4, 4, 4};
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w1, 6);
  a.axis = -1;
  memset(q, 0, sizeof q);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w1, 6);
  a.axis = 0;
  a.scales = s2;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w0, 6);
  a.axis = -2;
  memset(q, 0, sizeof q);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w0, 6);
  { /* rank 3, middle axis, zero points */
    float x3[8] = {4, 4, 4, 4, 4, 4, 4, 4}, s[2] = {1, 2};
    int32_t zp[2] = {1, -1};
    int8_t q3[8], w[8] = {5, 5, 1, 1, 5, 5, 1, 1};
    bq_args a3 = {.x = x3, .y = q3, .rank = 3, .shape = {2, 2, 2}, .axis = 1, .scales = s,
                  .zero_points = zp};
    cr_assert_eq(ref_run(&d, &a3), 0);
    cr_assert_arr_eq(q3, w, 8);
  }
}

Test(layout, per_token_strides_leave_gaps)
{
  /* 2 x 2, x stride 3, y stride 4: gaps hold 0x77 and must keep it */
  float x[6] = {1, 2, 99, 3, 4, 99}, s[2] = {1, 0.5f};
  uint8_t q[8];
  uint8_t want[8] = {1, 2, 0x77, 0x77, 6, 8, 0x77, 0x77};
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32,
               .int_type = BQ_U8};
  bq_args a = {.x = x, .y = q, .rows = 2, .cols = 2, .x_row_stride = 3, .y_row_stride = 4,
               .scales = s};
  memset(q, 0x77, sizeof q);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, want, 8);
  { /* backward: dy uses the y stride, dx the x stride */
    float dy[8] = {1, 1, 9, 9, 1, 1, 9, 9}, dx[6];
    float wdx[6] = {1, 1, -7, 2, 2, -7};
    bq_desc db = d;
    bq_args ab = a;
    db.direction = BQ_BACKWARD;
    ab.dy = dy;
    ab.dx = dx;
    ab.y = NULL;
    for (int i = 0; i < 6; i++) dx[i] = -7;
    cr_assert_eq(ref_run(&db, &ab), 0);
    cr_assert_arr_eq(dx, wdx, sizeof dx);
  }
}

Test(layout, per_group_index)
{
  /* 2 x 4, G = 2, group_row_stride 3: scale index = row * 3 + col / 2 */
  float x[8] = {4, 4, 4, 4, 8, 8, 8, 8}, s[6] = {1, 2, 1000, 4, 8, 1000};
  int8_t q[8], w[8] = {4, 4, 2, 2, 2, 2, 1, 1};
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32};
  bq_args a = {.x = x, .y = q, .rows = 2, .cols = 4, .group_size = 2, .group_row_stride = 3,
               .scales = s};
  ref_layout L;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w, 8);
  cr_assert_eq(ref_layout_init(&L, &d, &a), 0);
  cr_assert_eq(L.n_params, 5);
  a.group_row_stride = 0; /* default cols / G = 2: scales {1, 2, 1000, 4} */
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[4], 0); /* 8 / 1000 */
  cr_assert_eq(q[6], 2); /* 8 / 4 */
  a.group_size = 3;      /* does not divide cols */
  cr_assert_eq(ref_run(&d, &a), -1);
}

Test(layout, zero_size_writes_nothing)
{
  float x[1] = {1};
  int8_t q[4] = {0x5a, 0x5a, 0x5a, 0x5a}, w[4] = {0x5a, 0x5a, 0x5a, 0x5a};
  float s[1] = {1};
  bq_desc d = {.op = BQ_QUANTIZE, .float_type = BQ_F32};
  bq_args a = {.x = x, .y = q, .numel = 0, .scale = 1.0};
  cr_assert_eq(ref_run(&d, &a), 0);
  d.granularity = BQ_PER_TOKEN;
  a.rows = 0;
  a.cols = 4;
  a.scales = s;
  cr_assert_eq(ref_run(&d, &a), 0);
  a.rows = 4;
  a.cols = 0;
  cr_assert_eq(ref_run(&d, &a), 0);
  d.granularity = BQ_PER_CHANNEL;
  a.rank = 3;
  a.shape[0] = 2;
  a.shape[1] = 0;
  a.shape[2] = 2;
  a.axis = 2;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w, 4);
}

/* ---- per block, MN-major and packed UE8M0 scales ------------------------------------------ */

Test(layout, scale_index_by_layout)
{
  /* the index rules of the header's BQ_PER_BLOCK, BQ_SCALES_MN_MAJOR and BQ_UE8M0X4, for a
     [9, 10] matrix; group_row_stride 0 takes each layout's default */
  bq_desc d = {.op = BQ_QUANTIZE, .float_type = BQ_F32, .granularity = BQ_PER_BLOCK};
  ref_scales S;
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 4, 0), 0); /* 3 x 3 blocks, ld 3 */
  cr_assert_eq(S.prows, 3); cr_assert_eq(S.nb, 3); cr_assert_eq(S.ld, 3);
  cr_assert_eq(ref_scale_index(&S, 0, 0), 0);
  cr_assert_eq(ref_scale_index(&S, 3, 9), 2);
  cr_assert_eq(ref_scale_index(&S, 4, 0), 3);
  cr_assert_eq(ref_scale_index(&S, 8, 9), 8);
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 4, 5), 0);
  cr_assert_eq(ref_scale_index(&S, 8, 5), 2 * 5 + 1);
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 4, 2), -1); /* ld below 3 blocks a row */
  d.scale_layout = BQ_SCALES_MN_MAJOR;
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 4, 0), -1); /* MN-major is per group only */
  d.granularity = BQ_PER_GROUP;
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 4, 0), -1); /* 4 does not divide 10 */
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 2, 0), 0);  /* 5 groups, ld 12 (9 rows rounded up) */
  cr_assert_eq(S.ld, 12); cr_assert_eq(S.span, 60);
  cr_assert_eq(ref_scale_index(&S, 8, 9), 4 * 12 + 8);
  cr_assert_eq(ref_scale_index(&S, 1, 2), 12 + 1);
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 2, 8), -1); /* ld below rows */
  d.scale_type = BQ_UE8M0X4; /* MN-major words: byte 4 ((g / 4) ld + r) + g % 4 */
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 2, 0), 0);
  cr_assert_eq(S.ld, 12); cr_assert_eq(S.span, 24); /* 2 words along the groups */
  cr_assert_eq(ref_scale_index(&S, 8, 9), 4 * (12 + 8) + 0);
  cr_assert_eq(ref_scale_index(&S, 2, 7), 4 * 2 + 3);
  d.scale_layout = BQ_SCALES_ROW_MAJOR; /* row-major words: byte 4 (r ld + g / 4) + g % 4 */
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 2, 0), 0);
  cr_assert_eq(S.ld, 2); cr_assert_eq(S.span, 18);
  cr_assert_eq(ref_scale_index(&S, 3, 9), 4 * (3 * 2 + 1) + 0);
  cr_assert_eq(ref_scale_index(&S, 3, 7), 4 * (3 * 2) + 3);
  cr_assert_eq(ref_scales_init(&S, &d, 9, 10, 2, 1), -1); /* 5 groups need 2 words */
}

Test(layout, per_block_partial_tiles)
{
  /* [3, 5] in 2 x 2 blocks (2 x 3 of them, the last row and column partial), scales' ld 4:
     element (r, c) takes s[(r / 2) * 4 + c / 2]; s[3] and s[7] are never read */
  float x[15], s[8] = {1, 2, 4, 1000, 8, 16, 32, 1000};
  int8_t q[18], w[18] = {64, 64, 32, 32, 16, 0x5a, 64, 64, 32, 32, 16, 0x5a, 8, 8, 4, 4, 2, 0x5a};
  int32_t zp[8] = {0, 1, 0, 0, 0, 0, -1, 0};
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_BLOCK, .float_type = BQ_F32};
  bq_args a = {.x = x, .y = q, .rows = 3, .cols = 5, .y_row_stride = 6, .group_size = 2,
               .group_row_stride = 4, .scales = s};
  ref_layout L;
  for (int i = 0; i < 15; i++) x[i] = 64;
  memset(q, 0x5a, sizeof q);
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w, sizeof q);
  cr_assert_eq(ref_layout_init(&L, &d, &a), 0);
  cr_assert_eq(L.n_params, 7);
  a.zero_points = zp; /* the same index */
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[2], 33); cr_assert_eq(q[8], 33); cr_assert_eq(q[16], 1); cr_assert_eq(q[14], 4);
  a.zero_points = NULL;
  a.group_row_stride = 0; /* default 3 blocks a row: row 2 takes s[3..5] */
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[12], 0); cr_assert_eq(q[14], 8); cr_assert_eq(q[16], 4);
  a.group_row_stride = 2; /* smaller than the 3 blocks a row */
  cr_assert_eq(ref_run(&d, &a), -1);
  { /* dequantize reads the same entries */
    int8_t qi[15];
    float y[15];
    bq_desc dd = {.op = BQ_DEQUANTIZE, .granularity = BQ_PER_BLOCK, .float_type = BQ_F32};
    bq_args ad = {.x = qi, .y = y, .rows = 3, .cols = 5, .group_size = 2, .group_row_stride = 4, .scales = s};
    for (int i = 0; i < 15; i++) qi[i] = 1;
    cr_assert_eq(ref_run(&dd, &ad), 0);
    const float wy[15] = {1, 1, 2, 2, 4, 1, 1, 2, 2, 4, 8, 8, 16, 16, 32};
    cr_assert_arr_eq(y, wy, sizeof y);
  }
}

Test(layout, per_group_mn_major)
{
  /* [3, 4], G = 2, MN-major: element (r, c) takes s[(c / 2) * ld + r], ld 4 by default (3
     rows rounded up); s[3] and s[7] are the padded rows, never read */
  float x[12], s[8] = {1, 2, 4, 1000, 8, 16, 32, 1000};
  int8_t q[12], w[12] = {64, 64, 8, 8, 32, 32, 4, 4, 16, 16, 2, 2};
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32,
               .scale_layout = BQ_SCALES_MN_MAJOR};
  bq_args a = {.x = x, .y = q, .rows = 3, .cols = 4, .group_size = 2, .scales = s};
  ref_layout L;
  for (int i = 0; i < 12; i++) x[i] = 64;
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_arr_eq(q, w, sizeof q);
  cr_assert_eq(ref_layout_init(&L, &d, &a), 0);
  cr_assert_eq(L.n_params, 7);
  a.group_row_stride = 3; /* ld 3: the second group's scales are s[3..5] */
  cr_assert_eq(ref_run(&d, &a), 0);
  cr_assert_eq(q[2], 0); cr_assert_eq(q[6], 8); cr_assert_eq(q[10], 4);
  a.group_row_stride = 2; /* smaller than rows */
  cr_assert_eq(ref_run(&d, &a), -1);
}

Test(layout, packed_ue8m0_static)
{
  /* dequantize of q = 1 gives each element's scale 2^(e - 127) */
  int8_t qi[30];
  float y[30];
  uint8_t sb[64];
  bq_desc d = {.op = BQ_DEQUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32,
               .scale_type = BQ_UE8M0X4};
  for (int i = 0; i < 30; i++) qi[i] = 1;
  for (int i = 0; i < 64; i++) sb[i] = (uint8_t)(100 + i); /* byte i: 2^(i - 27) */
  /* row-major, [2, 10], G = 2 (5 groups: 2 words a row), ld 3 words: row r, group g at byte
     4 (3 r + g / 4) + g % 4 */
  bq_args a = {.x = qi, .y = y, .rows = 2, .cols = 10, .group_size = 2, .group_row_stride = 3, .scales = sb};
  cr_assert_eq(ref_run(&d, &a), 0);
  const int rm[10] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4}; /* row 0's bytes; row 1's are 12 on */
  for (int c = 0; c < 10; c++) {
    cr_assert_eq(y[c], ldexpf(1.0f, rm[c] - 27), "row 0 col %d: %g", c, y[c]);
    cr_assert_eq(y[10 + c], ldexpf(1.0f, 12 + rm[c] - 27), "row 1 col %d: %g", c, y[10 + c]);
  }
  ref_layout L;
  cr_assert_eq(ref_layout_init(&L, &d, &a), 0);
  cr_assert_eq(L.n_params, 4 * (3 + 2)); /* to the end of row 1's second word */
  /* MN-major, [3, 10], G = 2, ld 4 words by default: group g of row r at byte
     4 ((g / 4) 4 + r) + g % 4 */
  d.scale_layout = BQ_SCALES_MN_MAJOR;
  a.rows = 3;
  a.group_row_stride = 0;
  cr_assert_eq(ref_run(&d, &a), 0);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 10; c++) {
      const int g = c / 2, byte = 4 * ((g / 4) * 4 + r) + g % 4;
      cr_assert_eq(y[r * 10 + c], ldexpf(1.0f, byte - 27), "MN row %d col %d: %g", r, c, y[r * 10 + c]);
    }
  cr_assert_eq(y[2 * 10 + 9], ldexpf(1.0f, 24 - 27)); /* row 2, group 4: word 6, byte 24 */
  cr_assert_eq(y[1 * 10 + 7], ldexpf(1.0f, 7 - 27));  /* row 1, group 3: word 1, byte 7 */
  cr_assert_eq(ref_layout_init(&L, &d, &a), 0);
  cr_assert_eq(L.n_params, 4 * (4 + 3));
}

/* dynamic quantize of host arrays */
static void dyn_run(bq_desc d, bq_args a)
{
  d.op = BQ_DYNAMIC_QUANTIZE;
  cr_assert_eq(refd_run(&d, &a), 0);
}

Test(dynamic_layout, per_block_partial_tiles)
{
  /* [3, 3] f32 in 2 x 2 tiles, s8 symmetric, scales' ld 3 (entries 2 and 5 untouched):
       tile (0, 0) rows 0-1 cols 0-1: amax 127 -> s 1; 63.5 rounds to even 64
       tile (0, 1) rows 0-1 col 2: amax 254 -> s 2
       tile (1, 0) row 2 cols 0-1: NaN ignored, amax 12.7 -> s 12.7 / 127
       tile (1, 1) row 2 col 2: amax 0.5 -> s 0.5 / 127 */
  float x[12] = {1, -127, 254, 99, 63.5f, 2, -0.0f, 99, NAN, -12.7f, 0.5f, 99}; /* row stride 4 */
  int8_t y[12];
  float s[6];
  const float p = ref_bits_f32(0x5a5a5a5au);
  volatile float s10 = 12.7f / 127.0f, s11 = 0.5f / 127.0f;
  bq_desc d = {.granularity = BQ_PER_BLOCK, .float_type = BQ_F32, .int_type = BQ_S8};
  bq_args a = {.x = x, .y = y, .rows = 3, .cols = 3, .x_row_stride = 4, .y_row_stride = 4, .group_size = 2,
               .group_row_stride = 3, .out_scales = s};
  memset(y, 0x5a, sizeof y);
  memset(s, 0x5a, sizeof s);
  dyn_run(d, a);
  const int8_t wy[12] = {1, -127, 127, 0x5a, 64, 2, 0, 0x5a, 0, -127, 127, 0x5a};
  cr_assert_arr_eq(y, wy, sizeof y);
  cr_assert_eq(s[0], 1.0f); cr_assert_eq(s[1], 2.0f);
  cr_assert_eq(s[3], (float)s10); cr_assert_eq(s[4], (float)s11);
  cr_assert(!memcmp(&s[2], &p, 4) && !memcmp(&s[5], &p, 4), "entries past a row's 2 blocks were written");
  /* asymmetric u8, the whole matrix one tile (B = 4 > rows, cols): lo -127, hi 254,
     s = 381 / 255, zp = 0 - rne(-127 / s) = 85 */
  uint8_t yu[12];
  int32_t zp[1] = {77};
  d.int_type = BQ_U8;
  d.asymmetric = 1;
  a.y = yu;
  a.group_size = 4;
  a.group_row_stride = 0;
  a.out_zero_points = zp;
  dyn_run(d, a);
  volatile float su = 381.0f / 255.0f;
  cr_assert_eq(s[0], (float)su);
  cr_assert_eq(zp[0], 85);
  volatile float v = 254.0f / (float)su;
  cr_assert_eq(yu[2], (uint8_t)(nearbyintf(v) + 85));
  cr_assert_eq(yu[1], 0);
}

Test(dynamic_layout, per_group_mn_major)
{
  /* [2, 4], G = 2, MN-major, ld 4 by default: row r, group g at s[4 g + r]; the padded rows
     2, 3 (entries 2, 3, 6, 7) untouched */
  float x[8] = {127, 1, 254, 2, 12.7f, -1, 0, 0};
  int8_t y[8];
  float s[8];
  const float p = ref_bits_f32(0x5a5a5a5au);
  volatile float s01 = 12.7f / 127.0f;
  bq_desc d = {.granularity = BQ_PER_GROUP, .float_type = BQ_F32, .int_type = BQ_S8,
               .scale_layout = BQ_SCALES_MN_MAJOR};
  bq_args a = {.x = x, .y = y, .rows = 2, .cols = 4, .group_size = 2, .out_scales = s};
  memset(s, 0x5a, sizeof s);
  dyn_run(d, a);
  cr_assert_eq(s[0], 1.0f);          /* row 0 group 0 */
  cr_assert_eq(s[1], (float)s01);    /* row 1 group 0 */
  cr_assert_eq(s[4], 2.0f);          /* row 0 group 1 */
  cr_assert_eq(s[5], 1.0f);          /* row 1 group 1: amax 0 */
  for (int i = 2; i < 8; i += (i == 3 ? 3 : 1)) cr_assert(!memcmp(&s[i], &p, 4), "padded entry %d written", i);
  const int8_t wy[8] = {127, 1, 127, 1, 127, -10, 0, 0};
  cr_assert_arr_eq(y, wy, sizeof y);
}

Test(dynamic_layout, packed_ue8m0_zeroes_padding)
{
  /* [2, 6] f32 to e4m3, G = 2 (3 groups: one word a row), UE8M0X4 row-major with ld 2 words:
     row r's bytes 8 r + g, byte 8 r + 3 zeroed, bytes 8 r + 4 .. 7 untouched.
       row 0: amax 448 -> s 1 (127); 896 -> 2 (128); 0 -> 1 (127)
       row 1: amax 1 -> 1 / 448 rounded up to 2^-8 (119); NaN ignored, 2 -> 2^-7 (120);
              -inf -> s inf, stored 255 (NaN): codes 0x7F */
  float x[12] = {448, -1, 896, 3, 0, -0.0f, 1, 1, NAN, 2, -INFINITY, 4};
  uint8_t y[12], sb[16];
  bq_desc d = {.granularity = BQ_PER_GROUP, .float_type = BQ_F32, .int_type = BQ_E4M3,
               .scale_type = BQ_UE8M0X4};
  bq_args a = {.x = x, .y = y, .rows = 2, .cols = 6, .group_size = 2, .group_row_stride = 2, .out_scales = sb};
  memset(sb, 0x5a, sizeof sb);
  dyn_run(d, a);
  const uint8_t ws[16] = {127, 128, 127, 0, 0x5a, 0x5a, 0x5a, 0x5a, 119, 120, 255, 0, 0x5a, 0x5a, 0x5a, 0x5a};
  cr_assert_arr_eq(sb, ws, 16);
  const uint8_t wy[12] = {0x7E, 0xB8, 0x7E, 0x3C, 0x00, 0x80, 0x78, 0x78, 0x7F, 0x78, 0x7F, 0x7F};
  cr_assert_arr_eq(y, wy, 12);
  /* MN-major, the same [2, 6]: ld 4 words by default, row r's word r, bytes 4 r + g (byte
     4 r + 3 zeroed); the padded rows' words 2 and 3 untouched */
  d.scale_layout = BQ_SCALES_MN_MAJOR;
  a.group_row_stride = 0;
  memset(sb, 0x5a, sizeof sb);
  dyn_run(d, a);
  const uint8_t wm[16] = {127, 128, 127, 0, 119, 120, 255, 0, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a};
  cr_assert_arr_eq(sb, wm, 16);
  cr_assert_arr_eq(y, wy, 12);
  /* asymmetric and other granularities are not packed */
  d.asymmetric = 1;
  cr_assert_eq(refd_run(&(bq_desc){.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_GROUP, .float_type = BQ_F32,
                                   .int_type = BQ_U8, .asymmetric = 1, .scale_type = BQ_UE8M0X4}, &a), -1);
  cr_assert_eq(refd_run(&(bq_desc){.op = BQ_DYNAMIC_QUANTIZE, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32,
                                   .int_type = BQ_E4M3, .scale_type = BQ_UE8M0X4}, &a), -1);
}

/* ---- comparison -------------------------------------------------------------------------- */

Test(compare, nan_equals_nan_signed_zero_differs)
{
  uint32_t e[4] = {0x7fc00000u, 0x00000000u, 0x3f800000u, 0xffc01234u};
  uint32_t g[4] = {0x7f800001u, 0x80000000u, 0x3f800000u, 0x7fc00000u};
  char msg[1024];
  cr_assert_eq(ref_compare(BQ_F32, e, g, 4, msg, sizeof msg), 1);
  cr_assert(strstr(msg, "[1]") && strstr(msg, "0x80000000"), "%s", msg);
  {
    uint16_t eh[2] = {0x7e00, 0x7c00}, gh[2] = {0x7c01, 0x7c00};
    cr_assert_eq(ref_compare(BQ_F16, eh, gh, 2, NULL, 0), 0);
    gh[1] = 0x7e00; /* inf vs NaN */
    cr_assert_eq(ref_compare(BQ_F16, eh, gh, 2, NULL, 0), 1);
  }
  {
    uint8_t eq[3] = {1, 2, 3}, gq[3] = {1, 2, 4};
    cr_assert_eq(ref_compare(BQ_U8, eq, gq, 3, msg, sizeof msg), 1);
    cr_assert(strstr(msg, "[2]"), "%s", msg);
  }
}

Test(compare, output_report_names_guards_gaps_and_inputs)
{
  /* buffer: 2 guard elements, then a 2 x 2 per-token output with stride 3 */
  float x[4] = {1, 2, 3, 4}, s[2] = {1, 1};
  int8_t exp_[2 + 6 + 2], got[2 + 6 + 2];
  char msg[4096];
  bq_desc d = {.op = BQ_QUANTIZE, .granularity = BQ_PER_TOKEN, .float_type = BQ_F32};
  bq_args a = {.x = x, .rows = 2, .cols = 2, .x_row_stride = 2, .y_row_stride = 3, .scales = s};
  memset(exp_, 0x5a, sizeof exp_);
  a.y = exp_ + 2;
  cr_assert_eq(ref_run(&d, &a), 0);
  memcpy(got, exp_, sizeof got);
  got[0] = 0;     /* guard before */
  got[2 + 2] = 0; /* gap */
  got[2 + 4] = 9; /* row 1 col 1 */
  got[9] = 0;     /* guard after */
  cr_assert_eq(ref_compare_output(&d, &a, exp_, got, 10, 2, msg, sizeof msg), 4);
  cr_assert(strstr(msg, "guard") && strstr(msg, "gap") && strstr(msg, "row 1 col 1") &&
                strstr(msg, "x=0x40800000"),
            "%s", msg);
}

/* ---- the linear reference, on hand-worked cases -------------------------------------------- */
static refl_problem lin_problem(const int8_t *a, const int8_t *w, int64_t m, int64_t n, int64_t k, const float *sw,
                                const void *bias, bq_dtype out, void *y)
{
  refl_problem P;
  memset(&P, 0, sizeof P);
  P.m = m;
  P.n = n;
  P.k = k;
  P.lda = k;
  P.ldy = n;
  P.a_type = BQ_S8;
  P.a = a;
  P.w = w;
  P.scale_type = BQ_F32;
  P.w_scales = sw;
  P.out_type = out;
  P.bias = bias;
  P.y = y;
  return P;
}

Test(reference_linear, worked_example)
{
  /* a = [3, -2], w = [5, 7]: acc = 15 - 14 = 1; y = 1 * 0.5 * 0.25 + 1 = 1.125 */
  const int8_t a[2] = {3, -2}, w[2] = {5, 7};
  const float sw[1] = {0.25f}, bias[1] = {1.0f};
  float y[1] = {0};
  refl_problem P = lin_problem(a, w, 1, 1, 2, sw, bias, BQ_F32, y);
  P.sa_scalar = 0.5;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert_eq(y[0], 1.125f);
  /* zero point 1: wsum = 12, acc' = 1 - 12 = -11; y = -11 * 0.125 + 1 = -0.375 */
  int32_t wsum[1];
  refl_weight_sums(w, 1, 2, wsum);
  cr_assert_eq(wsum[0], 12);
  P.zp_mode = 1;
  P.zp_scalar = 1;
  P.wsum = wsum;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert_eq(y[0], -0.375f);
  /* no bias: exactly the product */
  P.bias = NULL;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert_eq(y[0], -1.375f);
}

Test(reference_linear, rounding_order_and_output_type)
{
  /* a large accumulator, still exact in f32: 1040 * 127 * 127 = 16774160 < 2^24 */
  int8_t a[1040], w[1040];
  int64_t k = 1040, i;
  for (i = 0; i < k; i++) { a[i] = 127; w[i] = 127; } /* 1040 * 16129 = 16774160 */
  const float sw[1] = {1.0f};
  float y[1];
  refl_problem P = lin_problem(a, w, 1, 1, k, sw, NULL, BQ_F32, y);
  P.sa_scalar = 1.0;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert_eq(y[0], 16774160.0f); /* exact: < 2^24 */
  /* f16 output: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even, 1 */
  const int8_t one[1] = {1};
  const float s1[1] = {1.0f + 0x1p-11f};
  uint16_t h[1];
  P = lin_problem(one, one, 1, 1, 1, s1, NULL, BQ_F16, h);
  P.sa_scalar = 1.0;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert_eq(h[0], 0x3c00);
  /* ((acc * sa) * sw), not acc * (sa * sw): sa = sw = 1 + 2^-12, acc = 3 */
  const int8_t three[1] = {3};
  const float s2[1] = {1.0f + 0x1p-12f};
  float y2[1];
  P = lin_problem(three, one, 1, 1, 1, s2, NULL, BQ_F32, y2);
  P.sa_scalar = 1.0 + 0x1p-12;
  cr_assert_eq(refl_gemm(&P), 0);
  float want = (3.0f * (1.0f + 0x1p-12f)) * (1.0f + 0x1p-12f);
  float other = 3.0f * ((1.0f + 0x1p-12f) * (1.0f + 0x1p-12f));
  cr_assert_eq(y2[0], want);
  cr_assert(want != other, "the example does not tell the orders apart");
}

Test(reference_linear, k_zero_writes_the_bias_exactly)
{
  const float sw[2] = {1.0f, 1.0f};
  const float bias[2] = {-0.0f, 3.5f};
  float y[4] = {9, 9, 9, 9};
  refl_problem P = lin_problem(NULL, NULL, 2, 2, 0, sw, bias, BQ_F32, y);
  P.sa_scalar = 1.0;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert(signbit(y[0]) && y[0] == 0.0f, "-0 bias must stay -0");
  cr_assert_eq(y[1], 3.5f);
  cr_assert_eq(y[3], 3.5f);
  P.bias = NULL;
  cr_assert_eq(refl_gemm(&P), 0);
  cr_assert(!signbit(y[0]) && y[0] == 0.0f && y[3] == 0.0f);
}
