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
