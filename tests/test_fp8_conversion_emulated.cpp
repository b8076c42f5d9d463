/* tests/test_fp8_conversion_emulated.cpp - the kernels' own FP8 conversions
   (kernels_src/common.cuh: bq_f8_soft, bq_f8_of_c, bq_f8_to_c), compiled for the CPU
   through tests/emulator/cuda_emulator.h, against the CPU reference (tests/reference_fp8.h)
   bit for bit. The software form is what sm_80 runs (and what the emulator and the .soft
   SKUs run); the hardware instruction itself is checked against the same reference by
   tools/dev/fp8_hw_check.cu on a GPU.

   Built once per specialization (tests/meson.build: e4m3 and e5m2, with f32 and f64 data,
   whose bq_f8_of_c differ): every f16 and bf16 value; every f32 within a few ulps of each
   rounding boundary (the midpoints between neighbours, the largest finite value and the tie
   above it, half the smallest subnormal, zero); random f32 bit patterns of every exponent;
   f64 data: values within a few f64 ulps of each boundary and nearer to it than half an f32
   ulp (where a plain round to f32 would land on the tie: bq_f8_of_c rounds to odd into f32
   first), and random f64 values; bq_f8_to_c on all 256 codes. */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference.h"

#include "emulator/cuda_emulator.h"

/* the specialization: EMU_* and the host's prelude, from tests/emu_spec.c (meson) */
#include EMU_SPEC
namespace emu_f8 {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "emulator/kernel_undefs.h"
} // namespace emu_f8
/* common.cuh again with its dynamic-scale part (BQ_ASYM), for dynamic quantize's lean
   quotient: with a rounded scale, and with a power-of-two one (BQ_POW2) */
namespace emu_f8_dyn {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#define BQ_ASYM 0
#include "../kernels_src/common.cuh"
#include "emulator/kernel_undefs.h"
#undef BQ_ASYM
#undef BQ_POW2
} // namespace emu_f8_dyn
namespace emu_f8_pow2 {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#define BQ_ASYM 0
#define BQ_POW2 1
#include "../kernels_src/common.cuh"
#include "emulator/kernel_undefs.h"
#undef BQ_ASYM
#undef BQ_POW2
} // namespace emu_f8_pow2

#include <criterion/criterion.h>

#define XORSHIFT_SEED 0x7f4a7c15f39cc060ull
#include "xorshift.h"

static_assert(EMU_I == BQ_TYPE_E4M3 || EMU_I == BQ_TYPE_E5M2, "an FP8 specialization");
static const ref_fp8_kind K = EMU_I == BQ_TYPE_E5M2 ? REF_E5M2 : REF_E4M3;
static const ref_fp8_format &F = ref_fp8_formats[K];
static const int F64 = EMU_T == BQ_TYPE_F64;

static long g_bad, g_checked;
/* f32 input: bq_f8_soft, and bq_f8_of_c where C is f32 (in the emulator bq_f8_of_c is the
   software form on every specialization) */
static void check_f32(float v, const char *what) {
  const uint8_t want = ref_fp8_from_double((double)v, K);
  const int soft = emu_f8::bq_f8_soft(v);
  const int ofc = emu_f8::bq_f8_of_c((emu_f8::bq_c)v);
  g_checked++;
  if ((soft == want && ofc == want) || g_bad++ >= 8) return;
  cr_log_error("%s %s: %a (0x%08x) gives 0x%02x by bq_f8_soft, 0x%02x by bq_f8_of_c, want 0x%02x", F.name, what,
               (double)v, ref_f32_bits(v), soft, ofc, want);
}
/* f64 input (f64 specializations): bq_f8_of_c, one rounding from the double */
static void check_f64(double v, const char *what) {
  const uint8_t want = ref_fp8_from_double(v, K);
  const int got = emu_f8::bq_f8_of_c((emu_f8::bq_c)v);
  g_checked++;
  if (got == want || g_bad++ >= 8) return;
  cr_log_error("%s %s: %a (0x%016llx) gives 0x%02x by bq_f8_of_c, want 0x%02x", F.name, what, v,
               (unsigned long long)ref_f64_bits(v), got, want);
}
static void check(double v, const char *what) {
  if (F64) check_f64(v, what);
  else check_f32((float)v, what);
}

Test(fp8_conversion, every_f16_and_bf16) {
  for (uint32_t h = 0; h < 65536; h++) {
    check_f32(ref_f16_to_f32((uint16_t)h), "f16");
    check_f32(ref_bf16_to_f32((uint16_t)h), "bf16");
    if (F64) { /* (exact in f64 too) */
      check_f64(ref_f16_to_f32((uint16_t)h), "f16 as f64");
      check_f64(ref_bf16_to_f32((uint16_t)h), "bf16 as f64");
    }
  }
  cr_log_info("%s: %ld values", F.name, g_checked);
  cr_assert_eq(g_bad, 0, "%ld of %ld differ (the first above)", g_bad, g_checked);
}

/* the boundaries: each code's value and the midpoint above it, from 0 to the largest finite
   value, the tie above that, and the value past it; both signs */
static int boundaries(double *out) {
  int n = 0;
  for (int c = 0; c <= F.max_code; c++) {
    const double lo = ref_fp8_to_double((uint8_t)c, K);
    const double hi = c < F.max_code ? ref_fp8_to_double((uint8_t)(c + 1), K)
                                     : F.max + ldexp(1.0, (int)log2(F.max) - F.mbits);
    out[n++] = lo;
    out[n++] = (lo + hi) / 2;
    if (c == F.max_code) out[n++] = hi;
  }
  return n;
}

Test(fp8_conversion, f32_near_every_boundary) {
  static double b[512];
  const int nb = boundaries(b);
  for (int i = 0; i < nb; i++)
    for (int s = 0; s < 2; s++) {
      const float c = (float)(s ? -b[i] : b[i]);
      float up = c, down = c;
      for (int u = 0; u < 8; u++) {
        check_f32(up, "f32 above a boundary");
        check_f32(down, "f32 below a boundary");
        up = nextafterf(up, INFINITY);
        down = nextafterf(down, -INFINITY);
      }
    }
  /* the specials */
  const float sp[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f,
                      0.0f, -0.0f};
  for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) check_f32(sp[i], "special");
  cr_assert_eq(emu_f8::bq_f8_soft(NAN), 0x7F);
  cr_assert_eq(emu_f8::bq_f8_soft(-NAN), 0x7F);
  cr_assert_eq(emu_f8::bq_f8_soft(INFINITY), F.max_code);
  cr_assert_eq(emu_f8::bq_f8_soft(-INFINITY), 0x80 | F.max_code);
  cr_assert_eq(emu_f8::bq_f8_soft(-0.0f), 0x80);
  cr_log_info("%s: %ld values", F.name, g_checked);
  cr_assert_eq(g_bad, 0, "%ld of %ld differ (the first above)", g_bad, g_checked);
}

Test(fp8_conversion, random_f32_bit_patterns) {
  for (long n = 0; n < (1L << 21); n++) {
    uint32_t u = (uint32_t)rnd();
    /* three in four near the type's range: exponents 2^-26 .. 2^17 */
    if (n & 3) u = (u & 0x807FFFFFu) | ((uint32_t)(101 + rnd() % 44) << 23);
    float x;
    memcpy(&x, &u, 4);
    check_f32(x, "random f32");
  }
  cr_log_info("%s: %ld values", F.name, g_checked);
  cr_assert_eq(g_bad, 0, "%ld of %ld differ (the first above)", g_bad, g_checked);
}

/* f64 data: within 8 f64 ulps of each boundary, then at k f32-ulp/2^j fractions either side
   (below half an f32 ulp: a plain round to f32 would land on the boundary), and random f64
   values over the type's range */
Test(fp8_conversion, f64_near_every_boundary) {
  if (!F64) {
    cr_log_info("f32 specialization: bq_f8_of_c takes f32 (see the other tests)");
    return;
  }
  static double b[512];
  const int nb = boundaries(b);
  for (int i = 0; i < nb; i++)
    for (int s = 0; s < 2; s++) {
      const double c = s ? -b[i] : b[i];
      double up = c, down = c;
      for (int u = 0; u < 8; u++) {
        check_f64(up, "f64 above a boundary");
        check_f64(down, "f64 below a boundary");
        up = nextafter(up, INFINITY);
        down = nextafter(down, -INFINITY);
      }
      if (c == 0.0) continue;
      for (int j = 1; j <= 30; j++) { /* c (1 +- 2^-(24 + j)): inside half an f32 ulp of c */
        check_f64(c * (1.0 + ldexp(1.0, -(24 + j))), "f64 off a boundary by < f32 ulp/2");
        check_f64(c * (1.0 - ldexp(1.0, -(24 + j))), "f64 off a boundary by < f32 ulp/2");
      }
    }
  /* past f32's range and below its subnormals: round to odd must keep the sign and the side */
  const double sp[] = {1e300, -1e300, 1e-300, -1e-300, 0x1p-150, 0x1p-151, -0x1p-150, 3.5e38, -3.5e38, INFINITY,
                       -INFINITY, NAN, -NAN, 0.0, -0.0, (double)FLT_MAX * (1 + 0x1p-30)};
  for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) check_f64(sp[i], "f64 special");
  for (long n = 0; n < (1L << 20); n++) {
    uint64_t u = rnd();
    /* three in four near the type's range: exponents 2^-26 .. 2^17 */
    if (n & 3) u = (u & 0x800FFFFFFFFFFFFFull) | ((uint64_t)(1023 - 26 + rnd() % 44) << 52);
    double x;
    memcpy(&x, &u, 8);
    check_f64(x, "random f64");
  }
  cr_log_info("%s: %ld values", F.name, g_checked);
  cr_assert_eq(g_bad, 0, "%ld of %ld differ (the first above)", g_bad, g_checked);
}

/* bq_f8_to_c: every code, exactly its value (NaN codes NaN, e5m2's infinities, -0) */
Test(fp8_conversion, every_code_decodes) {
  int nan = 0;
  for (int c = 0; c < 256; c++) {
    const double want = ref_fp8_to_double((uint8_t)c, K);
    const emu_f8::bq_c got = emu_f8::bq_f8_to_c(c);
    if (isnan(want)) {
      cr_assert(isnan((double)got), "%s code 0x%02x: %a, want NaN", F.name, c, (double)got);
      nan++;
      continue;
    }
    cr_assert((double)got == want && signbit((double)got) == signbit(want), "%s code 0x%02x: %a, want %a", F.name,
              c, (double)got, want);
    /* and back (e5m2's infinities saturate to the largest finite value) */
    cr_assert_eq(emu_f8::bq_f8_of_c(got), isinf(want) ? (c & 0x80) | F.max_code : c, "%s code 0x%02x: %a back",
                 F.name, c, (double)got);
  }
  cr_assert_eq(nan, K == REF_E4M3 ? 2 : 6);
}

/* ---- the quantize quotient ---------------------------------------------------------------
   bq_quantize_f8 (bq_f8_quotient: no division in f32; the reciprocal with a fallback in f64)
   and the mask bq_in_range against one IEEE division in C and the reference's rounding, for
   x and s drawn from every exponent (the quotient's exactness matters only where the FP8
   rounding or the mask can tell: that is the claim under test). The plain-scale forms
   (bq_quantize_near and bq_in_range_near, for scales with s.plain) likewise. */
static long g_qbad, g_qchecked;
static void check_quotient(double xd, double sd) {
  typedef emu_f8::bq_c C;
  const C x = (C)xd, s = (C)sd; /* C = f32: the draw is rounded to f32 first */
  const emu_f8::bq_scale q = emu_f8::bq_scale_of(s);
  volatile C quot = x / s;
  const uint8_t want = ref_fp8_from_double((double)quot, K);
  const int want_mask = fabs((double)quot) <= F.max;
  const int got = emu_f8::bq_quantize_f8(x, q);
  emu_f8::bq_zp z = emu_f8::bq_zp_of(0);
  const int mask = emu_f8::bq_in_range(x, q, z);
  int got_near = want, mask_near = want_mask;
#if EMU_T != BQ_TYPE_F64
  if (q.plain) {
    float xa[4] = {(float)x, 0, 0, 0};
    emu_f8::bq_i ya[4];
    emu_f8::bq_quantize_near<true>(xa, q, 0, ya);
    got_near = ya[0];
    mask_near = emu_f8::bq_in_range_near(x, q, z);
  }
#endif
  g_qchecked++;
  if ((got == want && mask == want_mask && got_near == want && mask_near == want_mask) || g_qbad++ >= 8) return;
  cr_log_error("%s: x %a / s %a = %a: code 0x%02x (plain form 0x%02x), mask %d (plain form %d); want 0x%02x, %d",
               F.name, (double)x, (double)s, (double)quot, got, got_near, mask, mask_near, want, want_mask);
}
static double any_exponent(int lo, int hi) { /* +-m 2^e, m uniform in [1, 2), e uniform in [lo, hi] */
  const double m = 1.0 + (double)(rnd() >> 11) * 0x1p-53;
  const int e = lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
  return (rnd() & 1 ? -1 : 1) * ldexp(m, e);
}
Test(fp8_conversion, quotient_against_division) {
  const int lo = F64 ? -1074 : -149, hi = F64 ? 1023 : 127;
  /* random pairs over every exponent; then quotients near each FP8 tie, its saturation
     boundary and its smallest subnormal (x = target * s, nudged by a few ulps) */
  for (int i = 0; i < 3000000; i++) check_quotient(any_exponent(lo, hi), any_exponent(lo, hi));
  const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) check_quotient(special[i], special[j] == 0 ? (j ? -1e-30 : 1e-30) : special[j]);
  for (int i = 0; i < 200000; i++) {
    const double sv = any_exponent(F64 ? -1000 : -140, F64 ? 1000 : 120);
    for (int j = 0; j < 5; j++) check_quotient(special[j], sv), check_quotient(any_exponent(lo, hi), special[j]);
  }
  for (int c = 0; c < 0x7F; c++) {
    const double a = ref_fp8_to_double((uint8_t)c, K), b = ref_fp8_to_double((uint8_t)(c + 1), K);
    if (isnan(b) || isinf(b)) break;
    for (int k = 0; k < 400; k++) {
      const double sv = any_exponent(F64 ? -1000 : -140, F64 ? 1000 : 120);
      const double targets[] = {(a + b) / 2, b, a / 2};
      for (int t = 0; t < 3; t++) {
        double xv = (F64 ? 1.0 : 1.0) * targets[t] * fabs(sv);
        if (!F64) xv = (double)(float)xv;
        for (int u = -3; u <= 3; u++) {
          double w = xv;
          for (int v = 0; v < (u < 0 ? -u : u); v++) w = F64 ? nextafter(w, u < 0 ? 0.0 : INFINITY)
                                                              : (double)nextafterf((float)w, u < 0 ? 0.0f : INFINITY);
          check_quotient(w, fabs(sv));
          check_quotient(-w, -fabs(sv));
        }
      }
    }
  }
  cr_log_info("%s %s: %ld quotients checked, %ld wrong", F.name, F64 ? "f64" : "f32", g_qchecked, g_qbad);
  cr_assert_eq(g_qbad, 0, "%ld of %ld quotients differ from the division's FP8 rounding (first ones logged above)",
               g_qbad, g_qchecked);
}

/* ---- dynamic quantize's lean quotient ---------------------------------------------------
   bq_f8_lean_quotient serves segments whose scale s is normal, at least 2^-80 and not capped
   by a bound, so every element has |x| <= amax with s = RN(amax / max) (or s = amax / max
   rounded up to a power of two). Its FP8 code must be the IEEE division's: checked for
   amax over every exponent the condition allows, x over every exponent up to amax
   (subnormals, zeros and NaN included), and x near each FP8 tie of x / s. */
#if EMU_T != BQ_TYPE_F64
static long g_lbad, g_lchecked;
static void check_lean(float x, float s, int pow2) {
  volatile float quot = x / s;
  const uint8_t want = ref_fp8_from_double((double)quot, K);
  const int got = pow2 ? emu_f8_pow2::bq_f8_of_f32(emu_f8_pow2::bq_f8_lean_quotient(x, emu_f8_pow2::bq_scale_of(s)))
                       : emu_f8_dyn::bq_f8_of_f32(emu_f8_dyn::bq_f8_lean_quotient(x, emu_f8_dyn::bq_scale_of(s)));
  g_lchecked++;
  if (got == want || g_lbad++ >= 8) return;
  cr_log_error("%s lean%s: x %a / s %a = %a: code 0x%02x, want 0x%02x", F.name, pow2 ? " (power of two)" : "",
               (double)x, (double)s, (double)quot, got, want);
}
Test(fp8_conversion, lean_quotient_against_division) {
  for (int i = 0; i < 400000; i++) {
    const int pow2 = i & 1;
    /* amax and its scale: s at least 2^-80 and at most 2^126 (its reciprocal normal) */
    float amax, s;
    do {
      amax = (float)fabs(any_exponent(-72, 120));
      s = amax / (float)F.max;
      if (pow2) s = exp2f(ceilf(log2f(s)));
    } while (!(s >= 0x1p-80f && s <= 0x1p126f) || !emu_f8_dyn::bq_scale_of(s).plain);
    /* x at every exponent up to amax's, and x near each tie of x / s, both signs */
    const int ea = ilogbf(amax);
    float x = (float)any_exponent(-149, ea);
    if (fabsf(x) > amax) x = copysignf(amax, x);
    check_lean(x, s, pow2);
    const int c = (int)(rnd() % 0x7E);
    const double a = ref_fp8_to_double((uint8_t)c, K), b = ref_fp8_to_double((uint8_t)(c + 1), K);
    if (isnan(b) || isinf(b)) continue;
    float t = (float)((a + b) / 2 * s);
    for (int u = -3; u <= 3; u++) {
      float w = t;
      for (int v = 0; v < (u < 0 ? -u : u); v++) w = nextafterf(w, u < 0 ? 0.0f : INFINITY);
      if (w <= amax) check_lean(w, s, pow2), check_lean(-w, s, pow2);
    }
  }
  const float special[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, NAN, -NAN};
  for (int e = -80; e <= 120; e++)
    for (int k = 0; k < 7; k++) check_lean(special[k], ldexpf(1.0f, e), e & 1), check_lean(special[k], ldexpf(1.5f, e), 0);
  cr_log_info("%s: %ld lean quotients checked, %ld wrong", F.name, g_lchecked, g_lbad);
  cr_assert_eq(g_lbad, 0, "%ld of %ld lean quotients differ from the division's FP8 rounding (first ones logged above)",
               g_lbad, g_lchecked);
}
#endif
