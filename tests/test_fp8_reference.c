/* The FP8 conversion reference (tests/reference_fp8.h): its two formulations agree on every
   f16 and bf16 value, on every f32 and f64 within a few ulps of each rounding boundary of
   both types (the midpoints between neighbouring values, the saturation point, half the
   smallest subnormal), and on random f32 bit patterns of every exponent; and the special
   values follow the contract (NaN, infinities, signed zeros, overflow). A mutation check:
   making either formulation round ties away from zero fails the boundary test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../baracuda_quant.h"
#include "reference.h"
#include "reference_fp8.h"
#include "reference_dynamic.h"

static const ref_fp8_kind kinds[2] = {REF_E4M3, REF_E5M2};

#define XORSHIFT_SEED 0x2545f4914f6cdd1dull
#include "xorshift.h"

static int g_mismatches;
static void agree(double v, ref_fp8_kind k, const char *what) {
  uint8_t a = ref_fp8_from_double(v, k), b = ref_fp8_from_double_search(v, k);
  if (a != b && g_mismatches++ < 8)
    cr_log_error("%s %s: %a gives 0x%02x by fields, 0x%02x by search", ref_fp8_formats[k].name, what, v, a, b);
}

Test(fp8_reference, special_values) {
  for (int i = 0; i < 2; i++) {
    ref_fp8_kind k = kinds[i];
    const ref_fp8_format *f = &ref_fp8_formats[k];
    cr_expect_eq(ref_fp8_from_double(NAN, k), f->nan);
    cr_expect_eq(ref_fp8_from_double(-NAN, k), f->nan);
    cr_expect_eq(ref_fp8_from_double(INFINITY, k), f->max_code);
    cr_expect_eq(ref_fp8_from_double(-INFINITY, k), 0x80 | f->max_code);
    cr_expect_eq(ref_fp8_from_double(0.0, k), 0x00);
    cr_expect_eq(ref_fp8_from_double(-0.0, k), 0x80);
    cr_expect_eq(ref_fp8_from_double(1e30, k), f->max_code);
    cr_expect_eq(ref_fp8_from_double(-1e30, k), 0x80 | f->max_code);
    cr_expect(ref_fp8_is_nan(f->nan, k));
    cr_expect_eq(ref_fp8_to_double(f->max_code, k), f->max);
    cr_expect_eq(ref_fp8_to_double(0x80 | f->max_code, k), -f->max);
    /* the smallest subnormal, half of it (a tie: to the even code, zero) and just above half */
    double sub = ldexp(1.0, 1 - f->bias - f->mbits);
    cr_expect_eq(ref_fp8_from_double(sub, k), 0x01);
    cr_expect_eq(ref_fp8_from_double(sub / 2, k), 0x00);
    cr_expect_eq(ref_fp8_from_double(-sub / 2, k), 0x80);
    cr_expect_eq(ref_fp8_from_double(nextafter(sub / 2, 1.0), k), 0x01);
    cr_expect_eq(ref_fp8_from_double(1.5 * sub, k), 0x02); /* tie between 1 and 2: even */
    cr_expect_eq(ref_fp8_from_double(1.0, k), (uint8_t)(f->bias << f->mbits));
  }
  /* the largest finite values, as the OCP specification lists them */
  cr_expect_eq(ref_fp8_to_double(0x7E, REF_E4M3), 448.0);
  cr_expect_eq(ref_fp8_to_double(0x7B, REF_E5M2), 57344.0);
  cr_expect(isinf(ref_fp8_to_double(0x7C, REF_E5M2)));
  cr_expect_eq(ref_fp8_to_double(0x01, REF_E4M3), ldexp(1.0, -9));
  cr_expect_eq(ref_fp8_to_double(0x01, REF_E5M2), ldexp(1.0, -16));
  /* e4m3: 464 is the tie between 448 and the (absent) 480: saturates to 448 either way */
  cr_expect_eq(ref_fp8_from_double(464.0, REF_E4M3), 0x7E);
  cr_expect_eq(ref_fp8_from_double(447.9, REF_E4M3), 0x7E);
  cr_expect_eq(ref_fp8_from_double(432.0, REF_E4M3), 0x7E); /* tie 416 | 448: 448's code is even */
  cr_expect_eq(ref_fp8_from_double(nextafter(432.0, 0.0), REF_E4M3), 0x7D);
}

/* decode(encode(decode(c))) == c for every finite code, and codes ascend with their values */
Test(fp8_reference, round_trip_and_order) {
  for (int i = 0; i < 2; i++) {
    ref_fp8_kind k = kinds[i];
    double prev = -1.0;
    for (int c = 0; c < 256; c++) {
      double d = ref_fp8_to_double((uint8_t)c, k);
      if (isnan(d) || isinf(d)) continue;
      cr_expect_eq(ref_fp8_from_double(d, k), (uint8_t)c, "%s code 0x%02x", ref_fp8_formats[k].name, c);
      cr_expect_eq(ref_fp8_from_double_search(d, k), (uint8_t)c, "%s code 0x%02x", ref_fp8_formats[k].name, c);
      if (c < 128) {
        cr_expect_gt(d, prev, "%s code 0x%02x", ref_fp8_formats[k].name, c);
        prev = d;
      }
    }
  }
}

Test(fp8_reference, every_f16_and_bf16) {
  g_mismatches = 0;
  for (int i = 0; i < 2; i++)
    for (uint32_t h = 0; h < 65536; h++) {
      agree((double)ref_f16_to_f32((uint16_t)h), kinds[i], "f16");
      agree((double)ref_bf16_to_f32((uint16_t)h), kinds[i], "bf16");
    }
  cr_expect_eq(g_mismatches, 0);
}

/* f32 and f64 values within 6 ulps of every boundary: each midpoint between neighbours, the
   saturation point (max and the tie above it) and the neighbourhood of zero */
Test(fp8_reference, near_every_boundary) {
  g_mismatches = 0;
  long checked = 0;
  for (int i = 0; i < 2; i++) {
    ref_fp8_kind k = kinds[i];
    const ref_fp8_format *f = &ref_fp8_formats[k];
    for (int c = 0; c <= f->max_code; c++) {
      double lo = ref_fp8_to_double((uint8_t)c, k);
      double hi = c < f->max_code ? ref_fp8_to_double((uint8_t)(c + 1), k) : f->max + ldexp(1.0, (int)(log2(f->max)) - f->mbits);
      double points[3] = {lo, (lo + hi) / 2, hi};
      for (int p = 0; p < 3; p++)
        for (int s = 0; s < 2; s++) {
          double b = s ? -points[p] : points[p];
          float bf = (float)b;
          double bd = b;
          float uf = bf, df = bf;
          double ud = bd, dd = bd;
          for (int u = 0; u < 6; u++) {
            agree(uf, k, "f32 above");
            agree(df, k, "f32 below");
            agree(ud, k, "f64 above");
            agree(dd, k, "f64 below");
            uf = nextafterf(uf, INFINITY);
            df = nextafterf(df, -INFINITY);
            ud = nextafter(ud, INFINITY);
            dd = nextafter(dd, -INFINITY);
            checked += 4;
          }
        }
    }
  }
  cr_log_info("%ld values near boundaries", checked);
  cr_expect_eq(g_mismatches, 0);
}

Test(fp8_reference, random_f32_bit_patterns) {
  g_mismatches = 0;
  for (int i = 0; i < 2; i++)
    for (long n = 0; n < (1L << 22); n++) {
      uint32_t u = (uint32_t)rnd();
      /* half of them near the types' range: exponents 2^-20 .. 2^17 */
      if (n & 1) u = (u & 0x807FFFFFu) | ((uint32_t)(107 + rnd() % 38) << 23);
      float x;
      memcpy(&x, &u, 4);
      agree((double)x, kinds[i], "f32");
    }
  cr_expect_eq(g_mismatches, 0);
}

/* UE8M0 scale bytes (tests/reference.h): byte e is 2^(e - 127), exact in f32 (e = 0 the
   subnormal 2^-127, e = 1 the smallest normal) and f64, 255 NaN; and the store of a power
   of two gives back its byte, clamped to [0, 254], inf and NaN 255. */
Test(ue8m0_reference, every_byte) {
  for (int e = 0; e < 256; e++) {
    float f = ref_ue8m0_to_f32((uint8_t)e);
    double d = ref_ue8m0_to_f64((uint8_t)e);
    if (e == 255) {
      cr_assert(isnan(f) && isnan(d));
      cr_assert_eq(ref_ue8m0_from_pow2(d), 255);
      continue;
    }
    uint32_t want = e ? (uint32_t)e << 23 : 0x00400000u;
    cr_assert_eq(ref_f32_bits(f), want, "byte %d: 0x%08x", e, ref_f32_bits(f));
    cr_assert_eq(ref_f64_bits(d), (uint64_t)(e - 127 + 1023) << 52, "byte %d", e);
    cr_assert_eq(ref_ue8m0_from_pow2(d), e, "byte %d", e);
    uint8_t b = (uint8_t)e;
    cr_assert_eq(ref_load_f(BQ_UE8M0, &b, 0), f);
    cr_assert_eq(ref_load_d(BQ_UE8M0, &b, 0), d);
  }
  cr_assert_eq(ref_ue8m0_from_pow2(INFINITY), 255);
  cr_assert_eq(ref_ue8m0_from_pow2(0.0), 0);
  cr_assert_eq(ref_ue8m0_from_pow2(0x1p-149), 0);
  cr_assert_eq(ref_ue8m0_from_pow2(0x1p-1000), 0);
  cr_assert_eq(ref_ue8m0_from_pow2(0x1p200), 254);
  cr_assert_eq(ref_dtype_size(BQ_UE8M0), 1);
}

/* refd_pow2_up_f against a bit-level formulation on random positive f32 patterns of every
   exponent: a normal with mantissa bits goes to the next exponent (255: inf), a subnormal
   to the next power of two of its integer significand. */
static uint32_t pow2_up_bits(uint32_t u) {
  uint32_t e = u >> 23, m = u & 0x7fffffu;
  if (u == 0) return 1; /* an underflowed quotient: the smallest positive */
  if (e == 255) return u;
  if (e) return m ? (e + 1) << 23 : u; /* (254 + 1) << 23 is inf */
  if (!(m & (m - 1))) return u;
  uint32_t p = 1;
  while (p < m) p <<= 1;
  return p; /* 0x800000: the smallest normal, as it should be */
}
Test(ue8m0_reference, pow2_up, .timeout = 60) {
  for (int i = 0; i < 2000000; i++) {
    uint32_t u = (uint32_t)(rnd() & 0x7fffffffu);
    if (i < 512) u = (uint32_t)(i / 2) << 23 | (i & 1 ? 1u : 0u); /* every exponent, exact or not */
    if ((u >> 23) == 255 && (u & 0x7fffffu)) continue;
    float s = ref_bits_f32(u), r = refd_pow2_up_f(s);
    cr_assert_eq(ref_f32_bits(r), pow2_up_bits(u), "0x%08x -> 0x%08x", u, ref_f32_bits(r));
    double rd = refd_pow2_up_d((double)s);
    /* in f64 the f32 values above 2^127 round up to 2^128, finite */
    double want = u > 0x7f000000u && u < 0x7f800000u ? 0x1p128 : u == 0 ? DBL_TRUE_MIN : (double)r;
    cr_assert_eq(rd, want, "f64 0x%08x", u);
  }
  cr_assert(isnan(refd_pow2_up_f(NAN)));
  cr_assert_eq(refd_pow2_up_f(0x1.000002p127f), INFINITY);
  cr_assert_eq(refd_pow2_up_f(0x1p127f), 0x1p127f);
  cr_assert_eq(refd_pow2_up_d(0x1.0000000000001p1023), INFINITY);
  cr_assert_eq(refd_pow2_up_d(0x1p-1074), 0x1p-1074);
  cr_assert_eq(refd_pow2_up_d(0x3p-1074), 0x1p-1072);
}

/* refd_run by hand: pow2 rounding, UE8M0 bytes, the bound, NaN and inf scales */
static void dyn1(bq_dtype T, bq_dtype I, bq_dtype st, int pow2, int asym, double bound, const double *xs, int n,
                 uint8_t *y, void *scales, int32_t *zp) {
  unsigned char x[64];
  for (int i = 0; i < n; i++) {
    if (T == BQ_F64) ref_store_d(x, i, xs[i]);
    else ref_store_f(T, x, i, (float)xs[i]);
  }
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.float_type = T;
  d.int_type = I;
  d.scale_type = st;
  d.pow2_scales = pow2;
  d.asymmetric = asym;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.numel = n;
  a.x = x;
  a.y = y;
  a.out_scales = scales;
  a.out_zero_points = zp;
  a.amax_bound = bound;
  cr_assert_eq(refd_run(&d, &a), 0);
}
Test(ue8m0_reference, dynamic_by_hand) {
  uint8_t y[8], sb[8];
  float sf;
  int32_t zp = 0;
  const double x1[] = {1.0, -3.0, NAN};
  /* amax 3: s = 3/448 -> 2^-7 (byte 120); 1/2^-7 = 128 = 0x70, -384 = 0xFC */
  dyn1(BQ_F32, BQ_E4M3, BQ_UE8M0, 0, 0, 0.0, x1, 3, y, sb, NULL);
  cr_assert_eq(sb[0], 120);
  cr_assert_eq(y[0], 0x70); cr_assert_eq(y[1], 0xFC); cr_assert_eq(y[2], 0x7F);
  /* bound 1: amax 1, s = 1/448 -> 2^-8 (119); 256 = 0x78, -768 saturates to -448 = 0xFE */
  dyn1(BQ_BF16, BQ_E4M3, BQ_UE8M0, 1, 0, 1.0, x1, 3, y, sb, NULL);
  cr_assert_eq(sb[0], 119);
  cr_assert_eq(y[0], 0x78); cr_assert_eq(y[1], 0xFE); cr_assert_eq(y[2], 0x7F);
  /* an inf element: s = inf, stored 255 (NaN), every code 0x7F; with a bound, finite */
  const double x2[] = {1.0, INFINITY, -2.0};
  dyn1(BQ_F32, BQ_E5M2, BQ_UE8M0, 0, 0, 0.0, x2, 3, y, sb, NULL);
  cr_assert_eq(sb[0], 255);
  cr_assert_eq(y[0], 0x7F); cr_assert_eq(y[1], 0x7F); cr_assert_eq(y[2], 0x7F);
  dyn1(BQ_F32, BQ_E5M2, BQ_UE8M0, 0, 0, 57344.0, x2, 3, y, sb, NULL); /* s = 1 exactly: 127 */
  cr_assert_eq(sb[0], 127);
  cr_assert_eq(y[0], 0x3C); cr_assert_eq(y[1], 0x7B); cr_assert_eq(y[2], 0xC0);
  /* s8, pow2 f32 scales: amax 127 gives s = 1 exactly; 128 gives 128/127 -> 2 */
  const double x3[] = {127.0, -1.0}, x4[] = {128.0, -1.0};
  dyn1(BQ_F32, BQ_S8, BQ_F32, 1, 0, 0.0, x3, 2, y, &sf, NULL);
  cr_assert_eq(sf, 1.0f);
  cr_assert_eq((int8_t)y[0], 127); cr_assert_eq((int8_t)y[1], -1);
  dyn1(BQ_F32, BQ_S8, BQ_F32, 1, 0, 0.0, x4, 2, y, &sf, NULL);
  cr_assert_eq(sf, 2.0f);
  cr_assert_eq((int8_t)y[0], 64); cr_assert_eq((int8_t)y[1], 0); /* -0.5 rounds to even: 0 */
  /* s8 symmetric with an inf element and UE8M0: NaN scale, every q the zero point 0 */
  dyn1(BQ_F32, BQ_S8, BQ_UE8M0, 0, 0, 0.0, x2, 3, y, sb, NULL);
  cr_assert_eq(sb[0], 255);
  cr_assert_eq(y[0], 0); cr_assert_eq(y[1], 0); cr_assert_eq(y[2], 0);
  /* u8 asymmetric pow2: span 4 / 255 -> 2^-5, zp = 0 - rne(-1 / 2^-5) = 32 */
  const double x5[] = {-1.0, 3.0};
  dyn1(BQ_F32, BQ_U8, BQ_F32, 1, 1, 0.0, x5, 2, y, &sf, &zp);
  cr_assert_eq(sf, 0x1p-5f);
  cr_assert_eq(zp, 32);
  cr_assert_eq(y[0], 0); cr_assert_eq(y[1], 128);
  /* f64 data, UE8M0: s below 2^-127 clamps to byte 0 (2^-127); above 2^127 to 254 */
  const double x6[] = {1e-300}, x7[] = {1e300};
  dyn1(BQ_F64, BQ_E4M3, BQ_UE8M0, 0, 0, 0.0, x6, 1, y, sb, NULL);
  cr_assert_eq(sb[0], 0);
  cr_assert_eq(y[0], 0x00);
  dyn1(BQ_F64, BQ_E4M3, BQ_UE8M0, 0, 0, 0.0, x7, 1, y, sb, NULL);
  cr_assert_eq(sb[0], 254);
  cr_assert_eq(y[0], 0x7E); /* 1e300 / 2^127: past max, saturates */
  /* an underflowed quotient (2^-149 / 127 is 0 in f32) gives the smallest positive, 2^-149 */
  const double x8[] = {0x1p-149, 0.0};
  dyn1(BQ_F32, BQ_S8, BQ_F32, 1, 0, 0.0, x8, 2, y, &sf, NULL);
  cr_assert_eq(sf, 0x1p-149f);
  cr_assert_eq((int8_t)y[0], 1); cr_assert_eq((int8_t)y[1], 0);
  dyn1(BQ_F32, BQ_E4M3, BQ_UE8M0, 0, 0, 0.0, x8, 2, y, sb, NULL); /* 2^-149 stored as 2^-127 */
  cr_assert_eq(sb[0], 0);
  cr_assert_eq(y[0], 0x00); cr_assert_eq(y[1], 0x00);
  /* an invalid bound or a bound on an asymmetric plan is refused */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.float_type = BQ_F32;
  d.int_type = BQ_U8;
  d.asymmetric = 1;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.amax_bound = 1.0;
  cr_assert_eq(refd_run(&d, &a), -1);
  d.asymmetric = 0;
  a.amax_bound = 1e39; /* inf in f32 */
  cr_assert_eq(refd_run(&d, &a), -1);
  d.float_type = BQ_F64;
  cr_assert_eq(refd_run(&d, &a), 0);
}
