/* The arithmetic behind common.cuh's bq_div_near (f32 quantize backward): with
   rcp = RN(1 / s), q0 = RN(a rcp), r = RN(a - q0 s) (one FMA) and q1 = r == 0 ? q0 :
   RN(q0 + r rcp) (one FMA), q1 is a / s correctly rounded wherever |s| lies in
   [2^-90, 2^90] (a scale that needs no power-of-two bracket) and |a| is 0 or in
   [max(2^-96, |s| 2^-96), min(|s| 2^96, FLT_MAX)]. Checked here bit for bit against IEEE
   division: every bf16 and f16 value against random scales, and random f32 values with hard
   cases (near multiples of s, near the window's ends, signed zeros, infinities). Values
   outside the window are skipped, so the window itself must keep out what the formula gets
   wrong: with |s| > 2^32, |s| 2^96 rounds to infinity, and an infinite a (whose residual is
   NaN) would pass an unclamped window; the tests then fail. A mutation test: widening the
   window to |a| >= 2^-149 makes the first test fail. Host arithmetic, -ffp-contract=off. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../baracuda_quant.h"
#include "reference.h"
#include "reference_fp4.h"

#include "xorshift.h"
/* a scale the fast path takes: |s| in [2^-90, 2^90], sometimes a power of two */
static float random_scale(void) {
  int e = (int)(rnd() % 181) - 90;
  float s = ldexpf(1.0f + (float)(rnd() % (1u << 23)) / (float)(1u << 23), e);
  if (rnd() % 4 == 0) s = ldexpf(1.0f, e);
  if (s > 0x1p90f) s = 0x1p90f;
  return (rnd() & 1) ? -s : s;
}
typedef struct window { float s, rcp, lo, hi; } window;
static window window_of(float s) {
  window w = {s, 1.0f / s, fmaxf(0x1p-96f, fabsf(s) * 0x1p-96f), fminf(fabsf(s) * 0x1p96f, 0x1.fffffep127f)};
  return w;
}
static int in_window(const window *w, float a) {
  float aa = fabsf(a);
  return aa == 0.0f || (aa >= w->lo && aa <= w->hi);
}
static float markstein(const window *w, float a) {
  float q0 = a * w->rcp, r = fmaf(-q0, w->s, a);
  return r == 0.0f ? q0 : fmaf(r, w->rcp, q0);
}

Test(division, every_bf16_and_f16_value) {
  long checked = 0;
  for (int k = 0; k < 300; k++) {
    window w = window_of(random_scale());
    for (uint32_t h = 0; h < 131072; h++) {
      float a = h < 65536 ? ref_bf16_to_f32((uint16_t)h) : ref_f16_to_f32((uint16_t)h);
      if (!in_window(&w, a)) continue; /* (infinities and NaN too: the window keeps them out) */
      float q = markstein(&w, a), ref = a / w.s;
      cr_assert_eq(ref_f32_bits(q), ref_f32_bits(ref), "a = %a, s = %a: %a, IEEE %a", a, w.s, q, ref);
      checked++;
    }
  }
  cr_assert_gt(checked, 20000000);
}

Test(division, random_f32) {
  long checked = 0;
  for (int k = 0; k < 20000; k++) {
    window w = window_of(random_scale());
    for (int j = 0; j < 1000; j++) {
      uint32_t u = (uint32_t)rnd();
      if (j % 7 == 0) u = ref_f32_bits(w.s) ^ (uint32_t)(rnd() % 16);                               /* near multiples of s */
      if (j % 11 == 0) u = (u & 0x807fffffu) | (ref_f32_bits(w.lo) & 0x7f800000u);                 /* the window's low end */
      if (j % 13 == 0) u = (u & 0x807fffffu) | (ref_f32_bits(fminf(w.hi, 0x1p127f)) & 0x7f800000u); /* its high end */
      if (j % 17 == 0) u &= 0x80000000u;                                                   /* signed zeros */
      if (j % 19 == 0) u = (u & 0x80000000u) | 0x7f800000u;                                /* infinities */
      float a = ref_bits_f32(u);
      if (!in_window(&w, a)) continue;
      float q = markstein(&w, a), ref = a / w.s;
      cr_assert_eq(ref_f32_bits(q), ref_f32_bits(ref), "a = %a, s = %a: %a, IEEE %a", a, w.s, q, ref);
      checked++;
    }
  }
  cr_assert_gt(checked, 10000000);
}

/* NVFP4's fast quotient (common.cuh's bq_mx_nv_fast, f32 kernels, a group scale s > 0 in
   [2^-90, 2^90]): q0 = RN(|x| rcp), q1 = RN(q0 + RN(|x| - q0 s) rcp) with no window and no
   zero-residual select, the magnitude code of min(|q1|'s bits, 6's bits), x's sign unless
   q0 is NaN. Held to the contract, E2M1(RN_f32(x / s)), on every bf16 and f16 value and on
   random f32 values with the hard cases: within a few ulps of each E2M1 midpoint times s
   (where the quotient's last bit decides the code), tiny and huge values, signed zeros,
   infinities and NaN. Mutation tests: q1 = q0 (no correction), or x's sign on a NaN, fails both. */
static uint32_t e2m1_mag_bits(float v) { /* bq_e2m1_mag */
  uint32_t u = ref_f32_bits(v) & 0x7fffffffu;
  if (u > 0x40c00000u) u = 0x40c00000u;
  const uint32_t lo = ref_f32_bits(fmaf(ref_bits_f32(u), 2.0f, 0x1p23f)) & 3u;
  const uint32_t hi = (u - 0x3f000000u + 0x1fffffu + ((u >> 22) & 1u)) >> 22;
  return u < 0x3f800000u ? lo : hi;
}
static int nv_fast(float x, float s, float rcp) {
  const float a = fabsf(x), q0 = a * rcp;
  const float q1 = fmaf(fmaf(-q0, s, a), rcp, q0);
  return (int)(e2m1_mag_bits(q1) | (q0 == q0 ? (ref_f32_bits(x) >> 28) & 8u : 0u));
}
static float positive_plain_scale(void) {
  float s = fabsf(random_scale());
  return s < 0x1p-90f ? 0x1p-90f : s;
}
static void nv_check(float x, float s, float rcp) {
  const int got = nv_fast(x, s, rcp), want = ref_e2m1_from_double((double)(x / s));
  cr_assert_eq(got, want, "x = %a, s = %a: code %#x, contract %#x", x, s, got, want);
}

Test(division, nvfp4_fast_every_bf16_and_f16_value) {
  for (int k = 0; k < 200; k++) {
    const float s = positive_plain_scale(), rcp = 1.0f / s;
    for (uint32_t h = 0; h < 131072; h++)
      nv_check(h < 65536 ? ref_bf16_to_f32((uint16_t)h) : ref_f16_to_f32((uint16_t)h), s, rcp);
  }
}

Test(division, nvfp4_fast_random_f32) {
  static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
  for (int k = 0; k < 20000; k++) {
    const float s = positive_plain_scale(), rcp = 1.0f / s;
    for (int j = 0; j < 500; j++) {
      uint32_t u = (uint32_t)rnd();
      if (j % 2 == 0) u = ref_f32_bits(mids[rnd() % 8] * s) + (uint32_t)(rnd() % 9) - 4u; /* near midpoints */
      if (j % 11 == 0) u = (u & 0x807fffffu) | ((uint32_t)(rnd() % 30) << 23);          /* tiny */
      if (j % 13 == 0) u = (u & 0x807fffffu) | ((uint32_t)(225 + rnd() % 30) << 23);    /* huge */
      if (j % 17 == 0) u &= 0x80000000u;                                                /* signed zeros */
      if (j % 19 == 0) u = (u & 0x80000000u) | 0x7f800000u | (uint32_t)(rnd() % 2 ? rnd() % 0x800000u : 0u);
      nv_check(ref_bits_f32(u ^ (uint32_t)(rnd() & 1) << 31), s, rcp);
    }
  }
}
