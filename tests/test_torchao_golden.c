/* tests/test_torchao_golden.c - the library's UE8M0 rules against torchao's MX recipe, bit
   for bit: tests/golden/torchao_mx.txt holds, for each float type (f32, bf16), element type
   (E4M3, E5M2, E2M1) and torchao scale mode (FLOOR, CEIL, EVEN, RCEIL), hashes of the
   scales and codes torchao's to_mx gave on the CPU (tests/make_torchao_golden.py writes it,
   torch and torchao needed; this test needs neither). The inputs are rebuilt here from the
   same generator, quantized by the CPU reference (tests/reference_mxops.h: microscaling
   dynamic quantize under the rule of the same name, which the emulated and GPU suites hold
   the kernels to), and hashed the same way. A case whose hashes differ names the first
   differing group after a re-run of the script shows it; this test names the case. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_mxops.h"

enum { ROWS = 48, K = 256, G = 32 };

/* make_torchao_golden.py's lcg() and input_bits(): the f32 bit patterns [ROWS * K] */
typedef struct { uint64_t s; } lcg_t;
static uint64_t lcg_next(lcg_t *g) {
  g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
  return g->s >> 33;
}
static void input_bits(int bf16, uint32_t *out) {
  lcg_t g = {0x5EED0FB0ull + (uint64_t)bf16};
  size_t n = 0;
  for (int r = 0; r < ROWS; r++) {
    const int64_t rowe = (int64_t)(lcg_next(&g) % 80) - 40;
    const int64_t zero_group = r % 5 == 0 ? (int64_t)(lcg_next(&g) % (K / G)) : -1;
    for (int c = 0; c < K; c++) {
      const uint64_t u = lcg_next(&g), v = lcg_next(&g);
      if (c / G == zero_group) {
        out[n++] = u % 2 ? 0u : 0x80000000u;
        continue;
      }
      int64_t e = rowe + (int64_t)(u % 12) - 6;
      if (e < -100) e = -100;
      const uint32_t mant = c % 7 ? (uint32_t)(v & 0x7FFFFFu) : (uint32_t)((v % 16) << 19);
      const uint32_t bits = (uint32_t)((u >> 8) & 1) << 31 | (uint32_t)(e + 127) << 23 | mant;
      out[n++] = bf16 ? bits & 0xFFFF0000u : bits;
    }
  }
}

static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

Test(torchao_golden, ue8m0_rules_match_torchao_to_mx) {
  char path[1024];
  const char *src = getenv("BQ_TEST_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/golden/torchao_mx.txt", src ? src : ".");
  FILE *f = fopen(path, "r");
  cr_assert(f, "cannot open %s (BQ_TEST_SOURCE_DIR: the repository)", path);
  static uint32_t bits[ROWS * K];
  static unsigned char x[ROWS * K * 4], q[ROWS * K], s[ROWS * K / G];
  char line[256];
  int cases = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char ft[8], et[8], mode[8];
    unsigned long long hs, hq;
    cr_assert_eq(sscanf(line, "%7s %7s %7s %llx %llx", ft, et, mode, &hs, &hq), 5, "bad line: %s", line);
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = BQ_DYNAMIC_QUANTIZE;
    d.granularity = BQ_PER_GROUP;
    d.float_type = !strcmp(ft, "bf16") ? BQ_BF16 : BQ_F32;
    d.int_type = !strcmp(et, "e4m3") ? BQ_E4M3 : !strcmp(et, "e5m2") ? BQ_E5M2 : BQ_E2M1;
    d.scale_type = BQ_UE8M0;
    d.scale_rule = !strcmp(mode, "floor") ? BQ_SCALE_FLOOR : !strcmp(mode, "ceil") ? BQ_SCALE_CEIL
                   : !strcmp(mode, "even") ? BQ_SCALE_EVEN : BQ_SCALE_RCEIL;
    input_bits(d.float_type == BQ_BF16, bits);
    for (int i = 0; i < ROWS * K; i++) {
      if (d.float_type == BQ_BF16) { /* the high half of the f32 pattern */
        const uint16_t h = (uint16_t)(bits[i] >> 16);
        memcpy(x + 2 * i, &h, 2);
      } else {
        memcpy(x + 4 * i, &bits[i], 4);
      }
    }
    memset(q, 0xA5, sizeof q);
    memset(s, 0xA5, sizeof s);
    refmx_op(&d, ROWS, K, G, K, K, K / G, x, q, NULL, NULL, s, 1.0f, 0);
    const size_t nq = d.int_type == BQ_E2M1 ? ROWS * K / 2 : ROWS * K;
    const int ok_s = fnv(s, sizeof s) == hs, ok_q = fnv(q, nq) == hq;
    if (!ok_s || !ok_q) {
      bad++;
      cr_log_error("%s %s %s: %s%s differ from torchao's", ft, et, mode, ok_s ? "" : "scales ",
                   ok_q ? "" : "codes");
    }
    cases++;
  }
  fclose(f);
  cr_assert_eq(cases, 24, "%d cases in %s", cases, path);
  cr_assert_eq(bad, 0, "%d of %d cases differ from torchao's to_mx", bad, cases);
}

/* The check can fail: another rule than torchao's mode gives other bytes */
Test(torchao_golden, another_rule_differs) {
  static uint32_t bits[ROWS * K];
  static unsigned char x[ROWS * K * 4], q1[ROWS * K], q2[ROWS * K], s1[ROWS * K / G], s2[ROWS * K / G];
  input_bits(0, bits);
  memcpy(x, bits, sizeof bits);
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE, d.granularity = BQ_PER_GROUP, d.float_type = BQ_F32, d.int_type = BQ_E4M3;
  d.scale_type = BQ_UE8M0, d.scale_rule = BQ_SCALE_FLOOR;
  refmx_op(&d, ROWS, K, G, K, K, K / G, x, q1, NULL, NULL, s1, 1.0f, 0);
  d.scale_rule = BQ_SCALE_CEIL;
  refmx_op(&d, ROWS, K, G, K, K, K / G, x, q2, NULL, NULL, s2, 1.0f, 0);
  cr_assert(fnv(s1, sizeof s1) != fnv(s2, sizeof s2) && fnv(q1, sizeof q1) != fnv(q2, sizeof q2));
}
