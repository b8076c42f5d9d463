/* tests/reference_fp8.h - the CPU reference of the FP8 storage conversions: OCP E4M3FN
   (4 exponent bits, bias 7, 3 mantissa bits, largest finite 448, no infinity, S.1111.111
   is NaN) and E5M2 (5 exponent bits, bias 15, 2 mantissa bits, largest finite 57344).

   ref_fp8_from_double(v, fmt) is what `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` does to a value:
   one round-to-nearest-even into the FP8 type, saturating to the largest finite value
   (+-inf and every overflow give +-max), NaN gives the canonical NaN 0x7F, -0 stays -0.
   It takes a double so that f64 data rounds once, straight into FP8; an f32 value converts
   exactly to double first, so f32 data gets the same single rounding.

   Two independent formulations, checked against each other by tests/test_fp8_reference.c:
   - ref_fp8_from_double: exponent and quantum from frexp, the significand rounded by
     nearbyint (the default rounding mode, to nearest even), the code assembled from fields;
   - ref_fp8_from_double_search: the nearest of the type's finite values, found by search in
     a table of them decoded by ldexp, a tie going to the even code.
   tools/fp8_hw_check.cu compares ref_fp8_from_double with the instruction itself on every f32
   bit pattern (on an H100: no difference for either type; NaN of either sign gives 0x7F).
   Header-only, static functions, C11 + libm. */
#ifndef BQ_TESTS_REFERENCE_FP8_H
#define BQ_TESTS_REFERENCE_FP8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define REF_FP8_API static __attribute__((unused))
#else
#define REF_FP8_API static
#endif

typedef enum { REF_E4M3 = 0, REF_E5M2 = 1 } ref_fp8_kind;

typedef struct {
  const char *name;
  int ebits, mbits, bias;
  double max;      /* largest finite value */
  uint8_t max_code; /* its code, sign clear */
  uint8_t nan;     /* the canonical NaN a conversion gives */
} ref_fp8_format;

static const ref_fp8_format ref_fp8_formats[2] = {
  {"e4m3", 4, 3, 7, 448.0, 0x7E, 0x7F},
  {"e5m2", 5, 2, 15, 57344.0, 0x7B, 0x7F},
};

/* ---- decode: code -> double (exact) ---------------------------------------------------- */
REF_FP8_API int ref_fp8_is_nan(uint8_t code, ref_fp8_kind k) {
  const ref_fp8_format *f = &ref_fp8_formats[k];
  int e = (code >> f->mbits) & ((1 << f->ebits) - 1), m = code & ((1 << f->mbits) - 1);
  if (k == REF_E4M3) return (code & 0x7F) == 0x7F;
  return e == (1 << f->ebits) - 1 && m != 0;
}

/* 2^p for the exponents a code's value takes (-9 to 15), built from its bits: exact, as
   ldexp is, without a library call (the emulated GEMM suites decode every operand) */
REF_FP8_API double ref_fp8_pow2(int p) {
  const uint64_t u = (uint64_t)(p + 1023) << 52;
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

REF_FP8_API double ref_fp8_to_double(uint8_t code, ref_fp8_kind k) {
  const ref_fp8_format *f = &ref_fp8_formats[k];
  int e = (code >> f->mbits) & ((1 << f->ebits) - 1), m = code & ((1 << f->mbits) - 1);
  double sign = (code & 0x80) ? -1.0 : 1.0;
  if (ref_fp8_is_nan(code, k)) return NAN;
  if (k == REF_E5M2 && e == (1 << f->ebits) - 1) return sign * INFINITY;
  if (e == 0) return sign * (double)m * ref_fp8_pow2(1 - f->bias - f->mbits);
  return sign * (double)((1 << f->mbits) | m) * ref_fp8_pow2(e - f->bias - f->mbits);
}

/* ---- encode, by fields ------------------------------------------------------------------ */
REF_FP8_API uint8_t ref_fp8_from_double(double v, ref_fp8_kind k) {
  const ref_fp8_format *f = &ref_fp8_formats[k];
  if (isnan(v)) return f->nan;
  uint8_t sign = signbit(v) ? 0x80 : 0;
  double a = fabs(v);
  if (a >= f->max) return sign | f->max_code; /* satfinite: overflow and inf give max */
  if (a == 0.0) return sign;
  const int emin = 1 - f->bias; /* exponent of the smallest normal */
  int e2;
  (void)frexp(a, &e2);          /* a = m * 2^e2, m in [0.5, 1): a's exponent is e2 - 1 */
  int e = e2 - 1 < emin ? emin : e2 - 1;
  double quantum = ldexp(1.0, e - f->mbits);  /* the spacing of the type at a */
  double n = nearbyint(a / quantum);          /* exact quotient, rounded to nearest even */
  /* n in [0, 2^(mbits+1)]; 2^(mbits+1) is the next binade's first value */
  if (n >= (double)(2 << f->mbits)) { e += 1; n /= 2; }
  if (n < (double)(1 << f->mbits)) return sign | (uint8_t)n; /* subnormal (or zero): exponent field 0 */
  int mant = (int)n - (1 << f->mbits);
  return sign | (uint8_t)(((e + f->bias) << f->mbits) | mant);
}

/* ---- encode, by search among the finite values ---------------------------------------------- */
REF_FP8_API uint8_t ref_fp8_from_double_search(double v, ref_fp8_kind k) {
  const ref_fp8_format *f = &ref_fp8_formats[k];
  static double table[2][128];
  static int count[2];
  if (!count[k]) { /* every finite non-negative value, in code order (which is value order) */
    int n = 0;
    for (int c = 0; c < 128; c++) {
      double d = ref_fp8_to_double((uint8_t)c, k);
      if (isnan(d) || isinf(d)) break;
      table[k][n++] = d;
    }
    count[k] = n;
  }
  if (isnan(v)) return f->nan;
  uint8_t sign = signbit(v) ? 0x80 : 0;
  double a = fabs(v);
  const double *t = table[k];
  int n = count[k];
  if (a >= t[n - 1]) return sign | (uint8_t)(n - 1);
  int lo = 0, hi = n - 1; /* t[lo] <= a < t[hi] */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (t[mid] <= a) lo = mid;
    else hi = mid;
  }
  double half = (t[lo] + t[hi]) / 2; /* exact: neighbours differ by one quantum */
  int c = a < half ? lo : a > half ? hi : ((lo & 1) ? hi : lo);
  return sign | (uint8_t)c;
}

#endif
