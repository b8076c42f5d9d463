/* tests/reference_mx.h - CPU references for the microscaling formats' scales (groundwork for
   MXFP8 / MXFP4: no library op writes these yet).

   A UE8M0 byte s is the power of two 2^(s - 127); 255 is NaN; there is no zero. A block's
   scale comes from its amax (an f32) and the element type's largest value (max_elem) or
   its exponent (emax_elem: 8 for E4M3, 15 for E5M2, 2 for E2M1), by one of the rules the
   peers use, each named after the peer it matches:
   - REF_MX_FLOOR (torchao's default, the OCP reference code): floor(log2(amax)) - emax_elem
     from amax's exponent bits, clamped to [-127, 128]; amax inf or NaN gives 255.
   - REF_MX_CEIL (torchao): the same with amax's exponent rounded up when its mantissa is
     not zero.
   - REF_MX_EVEN (torchao, vLLM's MXFP4): amax first rounded to the element type's mantissa
     width (mbits), ties up, then FLOOR.
   - REF_MX_RCEIL (torchao; cuBLAS's rule): d = amax * f32(1 / max_elem), rounded up to a
     power of two; past 2^127 (or d inf or NaN) gives 255.
   - REF_MX_RCEIL_SAT (TransformerEngine): the same, saturating: past 2^127 and inf give 254,
     NaN gives 255.
   Two formulations each, checked against each other by tests/test_mx_reference.c: one on
   an f32's bits (as the peers' kernels compute it), one in doubles (log2 by search, exact
   comparisons).

   The blocked scale layout of cuBLASLt's and CUTLASS's block-scaled GEMMs: scale (r, c) of
   a [R, C] scale matrix, rows padded to 128 and columns to 4, lies at byte
   ((r / 128) * ceil(C / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
   (ref_mx_blocked_offset); the test checks it against the peers' reshape sequence
   (torchao's to_blocked) carried out element by element. */
#ifndef BQ_TESTS_REFERENCE_MX_H
#define BQ_TESTS_REFERENCE_MX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define REF_MX_API static __attribute__((unused))
#else
#define REF_MX_API static
#endif

typedef enum { REF_MX_FLOOR, REF_MX_CEIL, REF_MX_EVEN, REF_MX_RCEIL, REF_MX_RCEIL_SAT } ref_mx_mode;

REF_MX_API uint32_t ref_mx_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
REF_MX_API float ref_mx_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- on the bits -------------------------------------------------------------------------- */
/* amax >= 0 (or NaN); mbits the element type's mantissa bits (EVEN), max_elem its largest
   value (RCEIL) */
REF_MX_API uint8_t ref_mx_scale(float amax, ref_mx_mode mode, int emax_elem, int mbits, float max_elem) {
  if (mode == REF_MX_RCEIL || mode == REF_MX_RCEIL_SAT) {
    const float d = amax * (1.0f / max_elem);
    if (isnan(d)) return 255;
    if (isinf(d)) return mode == REF_MX_RCEIL_SAT ? 254 : 255;
    const uint32_t u = ref_mx_bits(d), e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    const uint32_t up = e == 0 ? m > 0x400000 : m != 0; /* (byte 0 is 2^-127 = 0x00400000) */
    const uint32_t s = e + up;
    return (uint8_t)(s > 254 ? (mode == REF_MX_RCEIL_SAT ? 254 : 255) : s);
  }
  if (!isfinite(amax)) return 255;
  uint32_t u = ref_mx_bits(amax);
  if (mode == REF_MX_EVEN) u = (u + (1u << (22 - mbits))) & 0xFF800000u;
  int p = (int)((u >> 23) & 0xFF) - 127;
  if (mode == REF_MX_CEIL) p += (u & 0x7FFFFF) != 0;
  int e = p - emax_elem;
  e = e < -127 ? -127 : e > 128 ? 128 : e;
  return (uint8_t)(e + 127); /* (128 only for an amax whose rounding reached infinity) */
}

/* ---- in doubles ----------------------------------------------------------------------------- */
REF_MX_API uint8_t ref_mx_scale_double(float amax, ref_mx_mode mode, int emax_elem, int mbits, float max_elem) {
  const double a = (double)amax;
  if (mode == REF_MX_RCEIL || mode == REF_MX_RCEIL_SAT) {
    const double d = (double)(amax * (1.0f / max_elem)); /* (the peers' one f32 product) */
    if (isnan(d)) return 255;
    for (int s = 0; s <= 254; s++)
      if (ldexp(1.0, s - 127) >= d) return (uint8_t)s;
    return mode == REF_MX_RCEIL_SAT ? 254 : 255;
  }
  if (isnan(a) || isinf(a)) return 255;
  double v = a;
  if (mode == REF_MX_EVEN && v > 0) { /* to mbits + 1 significant bits, ties away (upward) */
    int e2;
    const double m = frexp(v, &e2); /* v = m * 2^e2, m in [0.5, 1) */
    const double q = ldexp(1.0, mbits + 1);
    v = ldexp(floor(m * q + 0.5) / q, e2);
    if (e2 - 1 < -126) v = a; /* (an f32 subnormal amax: the bits form rounds within the f32 field) */
  }
  /* floor(log2(v)), as the f32 exponent field gives it: -127 for 0 and f32 subnormals */
  int p = -127;
  if (v >= ldexp(1.0, -126))
    for (p = -126; p < 128 && ldexp(1.0, p + 1) <= v; p++) {}
  if (mode == REF_MX_CEIL && v > 0 && v >= ldexp(1.0, -126) && ldexp(1.0, p) != v) p += 1;
  if (mode == REF_MX_CEIL && v > 0 && v < ldexp(1.0, -126)) p = -126; /* (bits: exponent 0, mantissa set) */
  int e = p - emax_elem;
  e = e < -127 ? -127 : e > 128 ? 128 : e;
  return (uint8_t)(e + 127);
}

/* ---- the blocked layout ----------------------------------------------------------------------- */
REF_MX_API int64_t ref_mx_blocked_offset(int64_t r, int64_t c, int64_t scale_cols) {
  const int64_t cb = (scale_cols + 3) / 4;
  return ((r / 128) * cb + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
/* the padded layout's size in bytes */
REF_MX_API int64_t ref_mx_blocked_bytes(int64_t scale_rows, int64_t scale_cols) {
  return (scale_rows + 127) / 128 * 128 * ((scale_cols + 3) / 4 * 4);
}

#endif
