/* The microscaling references (tests/reference_mx.h, and reference_mxops.h against
   reference_dynamic.h for MXFP8 under the library's rule): each UE8M0 scale rule's two
   formulations agree for E4M3, E5M2 and E2M1 elements on every f32 exponent's edges and
   around the rounding thresholds, on an f32 grid and on random patterns; the rules give the
   peers' values on hand-picked cases; and the blocked layout's closed form is the peers'
   reshape sequence (torchao's to_blocked: pad, view, permute, reshape, transpose, reshape,
   flatten) carried out element by element, padding included. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reference_mx.h"

#define XORSHIFT_SEED 0x7a3c9e15d2b84f61ull
#include "xorshift.h"

typedef struct { const char *name; int emax, mbits; float max; } elem_t;
static const elem_t k_elems[3] = {{"e4m3", 8, 3, 448.0f}, {"e5m2", 15, 2, 57344.0f}, {"e2m1", 2, 1, 6.0f}};
static const char *const k_modes[5] = {"floor", "ceil", "even", "rceil", "rceil_sat"};

static int g_mismatches;
static void agree(uint32_t u) {
  const float a = ref_mx_float(u & 0x7FFFFFFFu);
  for (int t = 0; t < 3; t++)
    for (int m = 0; m < 5; m++) {
      const elem_t *e = &k_elems[t];
      const uint8_t x = ref_mx_scale(a, (ref_mx_mode)m, e->emax, e->mbits, e->max);
      const uint8_t y = ref_mx_scale_double(a, (ref_mx_mode)m, e->emax, e->mbits, e->max);
      if (x != y && g_mismatches++ < 8)
        cr_log_error("%s %s: amax 0x%08x (%a) gives %u on the bits, %u in doubles", e->name, k_modes[m],
                     u & 0x7FFFFFFFu, (double)a, x, y);
    }
}

Test(mx_reference, rules_by_hand) {
  /* e4m3 (max 448, emax 8): amax 448 = 1.75 * 2^8 -> FLOOR 2^0, CEIL 2^1, EVEN 2^0 (1.110b
     holds in 3 mantissa bits), RCEIL d = 1 -> 2^0 */
  cr_expect_eq(ref_mx_scale(448.0f, REF_MX_FLOOR, 8, 3, 448.0f), 127);
  cr_expect_eq(ref_mx_scale(448.0f, REF_MX_CEIL, 8, 3, 448.0f), 128);
  cr_expect_eq(ref_mx_scale(448.0f, REF_MX_EVEN, 8, 3, 448.0f), 127);
  cr_expect_eq(ref_mx_scale(448.0f, REF_MX_RCEIL, 8, 3, 448.0f), 127);
  /* EVEN: 1.9375 * 2^8 = 496 rounds up to 2^9 at 3 mantissa bits (the tie goes up) */
  cr_expect_eq(ref_mx_scale(496.0f, REF_MX_EVEN, 8, 3, 448.0f), 128);
  cr_expect_eq(ref_mx_scale(495.0f, REF_MX_EVEN, 8, 3, 448.0f), 127);
  /* e2m1 (max 6, emax 2): amax 6 = 1.5 * 2^2 -> FLOOR 2^0, EVEN 2^0 (1.1b holds in 1 bit);
     amax 7 = 1.75 * 2^2 -> EVEN 2^1 (the tie goes up); RCEIL d = 1 -> 2^0, amax 7 -> 2^1 */
  cr_expect_eq(ref_mx_scale(6.0f, REF_MX_FLOOR, 2, 1, 6.0f), 127);
  cr_expect_eq(ref_mx_scale(6.0f, REF_MX_EVEN, 2, 1, 6.0f), 127);
  cr_expect_eq(ref_mx_scale(7.0f, REF_MX_EVEN, 2, 1, 6.0f), 128);
  cr_expect_eq(ref_mx_scale(6.0f, REF_MX_RCEIL, 2, 1, 6.0f), 127);
  cr_expect_eq(ref_mx_scale(7.0f, REF_MX_RCEIL, 2, 1, 6.0f), 128);
  /* amax 0: 2^-127 in every rule; inf and NaN */
  for (int m = 0; m < 5; m++) cr_expect_eq(ref_mx_scale(0.0f, (ref_mx_mode)m, 8, 3, 448.0f), 0, "%s", k_modes[m]);
  cr_expect_eq(ref_mx_scale(INFINITY, REF_MX_FLOOR, 8, 3, 448.0f), 255);
  cr_expect_eq(ref_mx_scale(INFINITY, REF_MX_RCEIL, 8, 3, 448.0f), 255);
  cr_expect_eq(ref_mx_scale(INFINITY, REF_MX_RCEIL_SAT, 8, 3, 448.0f), 254);
  cr_expect_eq(ref_mx_scale(NAN, REF_MX_RCEIL_SAT, 8, 3, 448.0f), 255);
  /* RCEIL past 2^127: 255 unsaturated, 254 saturated */
  cr_expect_eq(ref_mx_scale(3e38f, REF_MX_RCEIL, 2, 1, 1.0f), 255);
  cr_expect_eq(ref_mx_scale(3e38f, REF_MX_RCEIL_SAT, 2, 1, 1.0f), 254);
}

Test(mx_reference, rules_agree) {
  g_mismatches = 0;
  for (uint32_t e = 0; e < 255; e++) /* every exponent: its edges, and the EVEN thresholds' neighbours */
    for (int k = -40; k <= 40; k++) {
      agree((e << 23) + (uint32_t)(k < 0 ? 0x800000 + k : k));
      for (int mb = 1; mb <= 3; mb++) agree((e << 23) + 0x800000u - (1u << (22 - mb)) + (uint32_t)k);
      agree((e << 23) + 0x400000u + (uint32_t)k); /* a mantissa of one half: RCEIL's subnormal edge */
    }
  for (uint32_t u = 0; u < 0x7F800000u; u += 16411) agree(u);
  for (int i = 0; i < 300000; i++) agree((uint32_t)(rnd() >> 32));
  agree(0x7F800000u); /* inf */
  agree(0x7FC00000u); /* NaN */
  cr_expect_eq(g_mismatches, 0, "%d amax values disagree", g_mismatches);
}

/* torchao's to_blocked, element by element: padded [nrb * 128, ncb * 4]; blocks =
   view(nrb, 128, ncb, 4).permute(0, 2, 1, 3); X = blocks.reshape(-1, 4, 32, 4);
   Y = X.transpose(1, 2); Z = Y.reshape(-1, 32, 16); out = Z.flatten(). For each output
   byte o the source (r, c) follows from those index maps, forwards. */
Test(mx_reference, blocked_layout) {
  static const int64_t shapes[][2] = {{1, 1}, {128, 4}, {129, 5}, {300, 7}, {256, 8}, {33, 64}, {1000, 3}};
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
    const int64_t R = shapes[s][0], C = shapes[s][1], nrb = (R + 127) / 128, ncb = (C + 3) / 4;
    const int64_t bytes = ref_mx_blocked_bytes(R, C);
    cr_assert_eq(bytes, nrb * 128 * ncb * 4);
    int64_t padding = 0;
    for (int64_t o = 0; o < bytes; o++) {
      const int64_t n = o / 512, i = (o / 16) % 32, j = o % 16; /* Z[n, i, j] */
      const int64_t a = j / 4, b = j % 4;                        /* = Y[n, i, a, b] = X[n, a, i, b] */
      const int64_t flat = ((n * 4 + a) * 32 + i) * 4 + b;       /* X's element in blocks' order */
      const int64_t rb = flat / (ncb * 128 * 4), cb = flat / (128 * 4) % ncb, rr = flat / 4 % 128, cc = flat % 4;
      const int64_t r = rb * 128 + rr, c = cb * 4 + cc;          /* blocks[rb, cb, rr, cc] = padded[r, c] */
      if (r >= R || c >= C) {
        padding++;
        continue;
      }
      cr_assert_eq(ref_mx_blocked_offset(r, c, C), o, "[%lld, %lld] scale (%lld, %lld)", (long long)R, (long long)C,
                   (long long)r, (long long)c);
    }
    cr_expect_eq(padding, bytes - R * C, "[%lld, %lld]", (long long)R, (long long)C);
  }
}

/* ---- one contract: MXFP8 under the library's rule is the dynamic family's FP8 per group ---- */
/* tests/reference_mxops.h's dynamic quantize of E4M3 / E5M2 elements in UE8M0-scaled groups
   (the library's rule, row-major) and tests/reference_dynamic.h's per-group FP8 quantize
   with UE8M0 scales give the same codes and scales on random data of every kind, every float
   type: the microscaling family's MXFP8 and the dynamic family's are one contract. */
#include "reference_mxops.h"

Test(mx_ops, mxfp8_default_rule_is_dynamic_fp8_per_group) {
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16}, its[] = {BQ_E4M3, BQ_E5M2};
  const int64_t rows = 37, G = 32, ng = 6, cols = G * ng;
  static unsigned char x[37 * 192 * 8], y1[37 * 192], y2[37 * 192], s1[2048], s2[2048]; /* (scales: room for any layout) */
  int checked = 0;
  for (int f = 0; f < 4; f++)
    for (int i = 0; i < 2; i++)
      for (int rep = 0; rep < 8; rep++) {
        bq_desc d;
        memset(&d, 0, sizeof d);
        d.op = BQ_DYNAMIC_QUANTIZE;
        d.granularity = BQ_PER_GROUP;
        d.float_type = fts[f];
        d.int_type = its[i];
        d.scale_type = BQ_UE8M0;
        for (int64_t k = 0; k < rows * cols; k++) {
          const uint64_t r = rnd();
          const double mag = ldexp(1.0, (int)(r % 40) - 20);
          double v = ((double)(r >> 11) * 0x1p-53 - 0.5) * mag;
          if (r % 97 == 0) v = NAN;
          if (r % 89 == 0) v = (r & 1) ? INFINITY : -INFINITY;
          if (r % 83 == 0) v = 0.0;
          if (fts[f] == BQ_F64) ref_store_d(x, k, v);
          else ref_store_f(fts[f], x, k, (float)v);
        }
        memset(y1, 0xA5, sizeof y1), memset(y2, 0xA5, sizeof y2), memset(s1, 0xA5, sizeof s1), memset(s2, 0xA5, sizeof s2);
        bq_args a;
        memset(&a, 0, sizeof a);
        a.x = x, a.y = y1, a.out_scales = s1, a.rows = rows, a.cols = cols, a.group_size = G;
        cr_assert_eq(refd_run(&d, &a), 0);
        refmx_op(&d, rows, cols, G, cols, cols, ng, x, y2, NULL, NULL, s2, 0.0f, 0.0);
        cr_assert(!memcmp(s1, s2, sizeof s1), "%s %s rep %d: the scales differ", ref_dtype_name(fts[f]),
                  ref_dtype_name(its[i]), rep);
        cr_assert(!memcmp(y1, y2, sizeof y1), "%s %s rep %d: the codes differ", ref_dtype_name(fts[f]),
                  ref_dtype_name(its[i]), rep);
        checked++;
      }
  cr_assert_eq(checked, 64);
}

/* ---- stochastic rounding (docs/numerics.md, "Stochastic rounding") ------------------------- */
static const bq_dtype k_sr_types[3] = {BQ_E4M3, BQ_E5M2, BQ_E2M1};
/* the grid's step at |v| and the neighbours below and above */
static double sr_step(bq_dtype it, double a) {
  const refmx_fmt f = refmx_fmt_of(it);
  const int emin = it == BQ_E2M1 ? 0 : it == BQ_E4M3 ? -6 : -14;
  int e = emin, fe;
  if (a > 0 && (frexp(a, &fe), fe - 1 > emin)) e = fe - 1;
  return ldexp(1.0, e - f.mbits);
}
/* a random value below max, of a magnitude anywhere on the grid (subnormals included) */
static double sr_value(bq_dtype it) {
  const refmx_fmt f = refmx_fmt_of(it);
  double v;
  do v = ldexp(1.0 + ((double)(rnd() >> 11) * 0x1p-53), (it == BQ_E2M1 ? -3 : -20) + (int)(rnd() % (uint64_t)(f.emax + (it == BQ_E2M1 ? 4 : 21))));
  while (!(v < f.max));
  return rnd() & 1 ? -v : v;
}

/* Over every draw u, the rounding takes v to its two neighbours only, never moves a grid value,
   and its mean is v within 2^-17 of the step (the draws' resolution) */
Test(sr_reference, every_draw_is_unbiased_to_the_resolution) {
  for (int t = 0; t < 3; t++) {
    const bq_dtype it = k_sr_types[t];
    for (int k = 0; k < 400; k++) {
      const double v = k < 40 ? refmx_value(it, (uint8_t)(rnd() % (it == BQ_E2M1 ? 16u : it == BQ_E4M3 ? 0x7Fu : 0x7Cu))) : sr_value(it);
      const double a = fabs(v), q = sr_step(it, a), lo = floor(a / q) * q;
      double sum = 0;
      for (unsigned u = 0; u < 65536; u++) {
        const double r = fabs(refmx_value(it, refmx_code_sr(it, v, u)));
        cr_assert(r == lo || r == lo + q || (lo + q > refmx_fmt_of(it).max && r == lo), "%d: %a by u %u gave %a", t, v,
                  u, r);
        if (a == lo) cr_assert(r == a, "%d: the grid value %a moved to %a (u %u)", t, v, r, u);
        sum += r; /* (exact: few bits each) */
      }
      const double err = sum / 65536 - a;
      cr_assert(fabs(err) <= q * 0x1p-17, "%d: v %a, step %a: the mean over every draw is off by %a", t, v, q, err);
    }
  }
}

/* The draws from Philox4x32-10 make the mean error zero: N elements at the same v (random
   magnitudes; an f32 value of C in half the cases), at indices from a random offset, each
   rounded by its own draw: |mean error| within 5 standard errors (sd q sqrt(f (1 - f))) plus
   the resolution's bias bound. Over the 16-bit draws' top 4 bits, the counts pass a
   chi-square test (15 degrees of freedom, 40 is beyond p = 0.0005), and neighbours differ. */
Test(sr_reference, philox_draws_give_zero_mean_error) {
  const int N = 1 << 18;
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 12; k++) {
      const bq_dtype it = k_sr_types[t];
      double v = sr_value(it);
      if (k & 1) v = (double)(float)v;
      const uint64_t seed = rnd(), off = k % 3 ? rnd() : 0;
      const double a = fabs(v), q = sr_step(it, a), f = a / q - floor(a / q);
      double sum = 0;
      long counts[16] = {0}, same = 0;
      unsigned prev = 0;
      for (int i = 0; i < N; i++) {
        const unsigned u = refmx_sr_draw(seed, off + (uint64_t)i);
        counts[u >> 12]++;
        same += i && u == prev;
        prev = u;
        sum += fabs(refmx_value(it, refmx_code_sr(it, v, u))) - a;
      }
      const double mean = sum / N, se = q * sqrt(f * (1 - f) / N);
      cr_assert(fabs(mean) <= 5 * se + q * 0x1p-17, "%d: v %a (f %.4f): mean error %a, standard error %a", t, v, f,
                mean, se);
      double chi = 0;
      for (int b = 0; b < 16; b++) chi += (counts[b] - N / 16.0) * (counts[b] - N / 16.0) / (N / 16.0);
      cr_assert(chi < 40, "seed %llx offset %llu: chi-square %.1f over the draws' top bits", (unsigned long long)seed,
                (unsigned long long)off, chi);
      cr_assert(same < 20, "%ld neighbouring draws equal", same);
    }
}

/* The draw of element i is Philox4x32-10's output at counter (i / 8, 1) as documented (the
   generator's own answers are test_rotate_reference's): here its layout, word (i / 2) % 4,
   half i % 2, and the wrap of the index modulo 2^64 */
Test(sr_reference, draw_layout) {
  const uint64_t seed = 0x0123456789abcdefull;
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint64_t blocks[3] = {0, 0x123456789ull, (~0ull) >> 3};
  for (int b = 0; b < 3; b++) {
    const uint32_t ctr[4] = {(uint32_t)blocks[b], (uint32_t)(blocks[b] >> 32), 1u, 0u};
    uint32_t w[4];
    ref_philox4x32_10(ctr, key, w);
    for (int j = 0; j < 8; j++)
      cr_assert_eq(refmx_sr_draw(seed, blocks[b] * 8 + (uint64_t)j), (w[j / 2] >> (16 * (j % 2))) & 0xffffu);
  }
  /* offset + index wraps: element 2^64 - 1 + 9 is element 8 */
  cr_assert_eq(refmx_sr_draw(seed, ~0ull + 9ull), refmx_sr_draw(seed, 8));
}
