/* The rotation's CPU reference (tests/reference_rotate.h): Philox4x32-10 gives Random123's
   published answers (tests/kat_vectors of the Random123 distribution, the three
   "philox4x32 10" lines); the sign vector is a function of the seed alone and about half
   negative; the butterfly is the Walsh-Hadamard matrix (against the Sylvester matrix in
   f64, elementwise) and orthonormal (the inverse undoes the forward pass to f64 rounding);
   with signs, inverse(forward(x)) = x too. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <math.h>

#include "reference_rotate.h"

Test(rotate_reference, philox4x32_10_known_answers) {
  static const uint32_t cases[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1}};
  for (int c = 0; c < 3; c++) {
    uint32_t out[4];
    ref_philox4x32_10(cases[c], cases[c] + 4, out);
    for (int i = 0; i < 4; i++)
      cr_assert_eq(out[i], cases[c][6 + i], "case %d word %d: 0x%08x, expected 0x%08x", c, i, out[i], cases[c][6 + i]);
  }
}

Test(rotate_reference, signs_follow_the_seed) {
  int neg = 0, differ = 0;
  for (int j = 0; j < 256; j++) {
    neg += ref_rotate_sign(1, 0x1234567890abcdefull, j) < 0;
    differ += ref_rotate_sign(1, 0x1234567890abcdefull, j) != ref_rotate_sign(1, 0x1234567890abcdeeull, j);
    cr_assert_eq(ref_rotate_sign(0, 0x1234567890abcdefull, j), 1);
  }
  cr_assert(neg > 96 && neg < 160, "%d of 256 negative", neg);
  cr_assert(differ > 96, "another seed changed %d of 256 signs", differ);
}

/* f64 data: the forward pass is H x / sqrt(n), H[i][j] = (-1)^popcount(i & j) */
Test(rotate_reference, the_walsh_hadamard_matrix) {
  for (int n = 2; n <= 256; n *= 2) {
    double x[256], y[256];
    for (int j = 0; j < n; j++) x[j] = sin(1.0 + j * 0.37) * (j % 5 + 1);
    ref_rotate(BQ_F64, 0, 0, 0, n, 1, n, x, n, y, n);
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int j = 0; j < n; j++) s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -x[j] : x[j]);
      s /= sqrt((double)n);
      cr_assert(fabs(y[i] - s) <= 1e-12 * (1 + fabs(s)) * n, "n %d row %d: %a, expected %a", n, i, y[i], s);
    }
  }
}

Test(rotate_reference, the_inverse_undoes_it) {
  for (int n = 2; n <= 256; n *= 2)
    for (int signs = 0; signs < 2; signs++) {
      double x[512], y[512], z[512];
      for (int j = 0; j < 2 * n; j++) x[j] = cos(0.3 + j * 0.91) * (j % 3 + 1);
      ref_rotate(BQ_F64, 0, signs, 77, n, 1, 2 * n, x, 2 * n, y, 2 * n);
      ref_rotate(BQ_F64, 1, signs, 77, n, 1, 2 * n, y, 2 * n, z, 2 * n);
      for (int j = 0; j < 2 * n; j++)
        cr_assert(fabs(z[j] - x[j]) <= 1e-13 * n, "n %d signs %d elem %d: %a back as %a", n, signs, j, x[j], z[j]);
    }
}
