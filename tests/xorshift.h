/* tests/xorshift.h - the host suites' reproducible random numbers: Marsaglia's 64-bit xorshift
   (13, 7, 17). A suite may define XORSHIFT_SEED before the include for its own sequence. */
#ifndef BQ_TESTS_XORSHIFT_H
#define BQ_TESTS_XORSHIFT_H

#include <stdint.h>

#ifndef XORSHIFT_SEED
#define XORSHIFT_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t g_state = XORSHIFT_SEED;
static uint64_t rnd(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}

#endif
