/* tests/reference_fp4.h - the CPU reference of the OCP FP4 E2M1 conversion, the element type
   of MXFP4 and NVFP4 (groundwork for them: no library op stores E2M1 yet). A code is 4 bits:
   sign (bit 3), exponent (2 bits, bias 1), mantissa (1 bit); the values are
   +-{0, 0.5, 1, 1.5, 2, 3, 4, 6} and there is no infinity and no NaN.

   ref_e2m1_from_double(v) is the conversion the contract will name: one round to nearest
   even onto those values, saturating (every magnitude past 6 and +-inf give +-6), -0 keeps
   its sign (0x8), and NaN gives 0x7 (+6), as `cvt.rn.satfinite.e2m1x2.f32` is documented by
   its users to do (to be checked on the instruction when an sm_100 GPU is lent). It takes a
   double, so that f64 data rounds once, straight into E2M1.

   Three formulations, checked against each other by tests/test_fp4_reference.c:
   - ref_e2m1_from_double: exponent and quantum from frexp, the significand rounded by
     nearbyint (to nearest even), the code assembled from fields;
   - ref_e2m1_from_double_search: the nearest of the eight magnitudes, a tie going to the
     even code;
   - ref_e2m1_from_f32_bits: integers on an f32's bits alone (comparisons below 1, the
     mantissa rounded to one bit with a carry above it), the form a GPU without the
     instruction would run.
   Header-only, static functions, C11 + libm. */
#ifndef BQ_TESTS_REFERENCE_FP4_H
#define BQ_TESTS_REFERENCE_FP4_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define REF_FP4_API static __attribute__((unused))
#else
#define REF_FP4_API static
#endif

#define REF_E2M1_MAX 6.0
#define REF_E2M1_NAN_CODE 0x7 /* what NaN converts to: +6 */

/* code -> double (exact) */
REF_FP4_API double ref_e2m1_to_double(uint8_t code) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  const double m = mag[code & 7];
  return (code & 8) ? -m : m;
}

/* ---- by fields ------------------------------------------------------------------------- */
REF_FP4_API uint8_t ref_e2m1_from_double(double v) {
  if (isnan(v)) return REF_E2M1_NAN_CODE;
  const uint8_t sign = signbit(v) ? 8 : 0;
  const double a = fabs(v);
  if (a >= REF_E2M1_MAX) return sign | 7; /* satfinite: overflow and inf give max */
  if (a == 0.0) return sign;
  int e2;
  (void)frexp(a, &e2);          /* a = m * 2^e2, m in [0.5, 1): a's exponent is e2 - 1 */
  int e = e2 - 1 < 0 ? 0 : e2 - 1; /* 0: the smallest normal's exponent (bias 1) */
  double n = nearbyint(a / ldexp(1.0, e - 1)); /* the exact quotient by the quantum, to nearest even */
  if (n >= 4.0) e += 1, n /= 2;  /* the next binade's first value */
  if (n < 2.0) return sign | (uint8_t)n;   /* subnormal (or zero): exponent field 0 */
  return sign | (uint8_t)(((e + 1) << 1) | ((int)n - 2)); /* a < 6 keeps e + 1 <= 3 */
}

/* ---- by search ------------------------------------------------------------------------- */
REF_FP4_API uint8_t ref_e2m1_from_double_search(double v) {
  if (isnan(v)) return REF_E2M1_NAN_CODE;
  const uint8_t sign = signbit(v) ? 8 : 0;
  const double a = fabs(v);
  if (a >= REF_E2M1_MAX) return sign | 7; /* (far past 6 the distances lose their difference) */
  int best = 0;
  for (int c = 1; c < 8; c++) {
    const double d = fabs(ref_e2m1_to_double((uint8_t)c) - a), db = fabs(ref_e2m1_to_double((uint8_t)best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c; /* (codes ascend: a tie is the even one) */
  }
  return sign | (uint8_t)best;
}

/* ---- on an f32's bits ------------------------------------------------------------------ */
REF_FP4_API uint8_t ref_e2m1_from_f32_bits(uint32_t u) {
  const uint8_t sign = (uint8_t)((u >> 28) & 8);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return REF_E2M1_NAN_CODE;
  if (a >= 0x40C00000u) return sign | 7;      /* 6.0 and past it, infinity */
  if (a < 0x3F800000u)                         /* below 1: 0, 0.5 or 1 (ties 0.25 -> 0, 0.75 -> 1) */
    return sign | (a <= 0x3E800000u ? 0 : a < 0x3F400000u ? 1 : 2);
  /* [1, 6): the mantissa rounded to its top bit, to nearest even, a carry moving the
     exponent; (exponent << 1 | mantissa bit) less the bias's 126 << 1 is the code */
  const uint32_t r = a + 0x1FFFFFu + ((a >> 22) & 1u);
  return sign | (uint8_t)((r >> 22) - 252u);
}
REF_FP4_API uint8_t ref_e2m1_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return ref_e2m1_from_f32_bits(u);
}

#endif
