/* The FP4 E2M1 conversion reference (tests/reference_fp4.h): its three formulations agree on
   every f16 and bf16 value, on every f32 from 0 to past 6 whose low bits are a multiple of
   2^8 and on every f32 within 64 ulps of each rounding boundary, and on random f32 bit
   patterns of every exponent; the special values follow the contract; decoding every code
   and converting it back gives the code. Mutation checks: rounding ties away from zero in
   the bits formulation, or in the fields one (round for nearbyint), fails three tests. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reference_fp4.h"

#define XORSHIFT_SEED 0x4f1bbcdcbfa53e0bull
#include "xorshift.h"

static int g_mismatches;
static float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void agree_bits(uint32_t u, const char *what) {
  const float f = f32_of(u);
  const uint8_t a = ref_e2m1_from_double((double)f), b = ref_e2m1_from_double_search((double)f),
                c = ref_e2m1_from_f32_bits(u);
  if ((a != b || a != c) && g_mismatches++ < 8)
    cr_log_error("%s: 0x%08x (%a) gives 0x%x by fields, 0x%x by search, 0x%x by bits", what, u, (double)f, a, b, c);
}

Test(fp4_reference, special_values) {
  cr_expect_eq(ref_e2m1_from_double(NAN), 0x7);
  cr_expect_eq(ref_e2m1_from_double(-NAN), 0x7);
  cr_expect_eq(ref_e2m1_from_f32_bits(0xFFC00000u), 0x7);
  cr_expect_eq(ref_e2m1_from_f32_bits(0x7F800001u), 0x7);
  cr_expect_eq(ref_e2m1_from_double(INFINITY), 0x7);
  cr_expect_eq(ref_e2m1_from_double(-INFINITY), 0xF);
  cr_expect_eq(ref_e2m1_from_double(0.0), 0x0);
  cr_expect_eq(ref_e2m1_from_double(-0.0), 0x8);
  cr_expect_eq(ref_e2m1_from_double(-1e-30), 0x8); /* rounds to -0 */
  cr_expect_eq(ref_e2m1_from_double(1e30), 0x7);
  /* the ties: to the even code */
  static const double ties[][2] = {{0.25, 0x0}, {0.75, 0x2}, {1.25, 0x2}, {1.75, 0x4},
                                   {2.5, 0x4},  {3.5, 0x6},  {5.0, 0x6}};
  for (int i = 0; i < 7; i++) {
    cr_expect_eq(ref_e2m1_from_double(ties[i][0]), (uint8_t)ties[i][1], "tie %g", ties[i][0]);
    cr_expect_eq(ref_e2m1_from_double(-ties[i][0]), (uint8_t)ties[i][1] | 8, "tie -%g", ties[i][0]);
    cr_expect_eq(ref_e2m1_from_float((float)ties[i][0]), (uint8_t)ties[i][1], "tie %g (bits)", ties[i][0]);
    /* just above a tie: the code above it */
    const double up = nextafter(ties[i][0], INFINITY);
    cr_expect_eq(ref_e2m1_from_double(up), ref_e2m1_from_double_search(up));
    cr_expect_gt(ref_e2m1_to_double(ref_e2m1_from_double(up)), ties[i][0]);
  }
}

Test(fp4_reference, codes_round_trip) {
  for (int c = 0; c < 16; c++) {
    const double v = ref_e2m1_to_double((uint8_t)c);
    cr_expect_eq(ref_e2m1_from_double(v), (uint8_t)c, "code 0x%x (%g)", c, v);
    cr_expect_eq(ref_e2m1_from_float((float)v), (uint8_t)c, "code 0x%x (%g, bits)", c, v);
  }
}

/* every f16 and bf16 value (each exact in f32), both signs */
Test(fp4_reference, every_f16_and_bf16) {
  g_mismatches = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    agree_bits(h << 16, "bf16");
    const int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    if (h & 0x8000) v = -v;
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    agree_bits(u, "f16");
  }
  cr_expect_eq(g_mismatches, 0, "%d f16/bf16 values disagree", g_mismatches);
}

/* f32: every value from 0 to past 6 on a 2^8-ulp grid, and every value within 64 ulps of
   each boundary between codes (the midpoints, 6 and its neighbours), both signs */
Test(fp4_reference, f32_range_and_boundaries) {
  g_mismatches = 0;
  for (uint32_t u = 0; u <= 0x40E00000u; u += 256) {
    agree_bits(u, "grid");
    agree_bits(u | 0x80000000u, "grid");
  }
  static const float bounds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 1.0f, 0.5f};
  for (int i = 0; i < 10; i++) {
    uint32_t b;
    memcpy(&b, &bounds[i], 4);
    for (uint32_t u = b - 64; u <= b + 64; u++) {
      agree_bits(u, "boundary");
      agree_bits(u | 0x80000000u, "boundary");
    }
  }
  cr_expect_eq(g_mismatches, 0, "%d f32 values disagree", g_mismatches);
}

Test(fp4_reference, random_f32_patterns) {
  g_mismatches = 0;
  for (int i = 0; i < 2000000; i++) agree_bits((uint32_t)(rnd() >> 32), "random");
  cr_expect_eq(g_mismatches, 0, "%d random patterns disagree", g_mismatches);
}
