/* tests/reference_rotate.h - the CPU reference of the Hadamard rotation (docs/numerics.md,
   "Rotation") and of Philox4x32-10, the counter-based generator its random signs come from
   (Random123's; test_rotate_reference checks its published answers).

   A row's blocks of n = 2^k elements, C = f64 for f64 data, else f32, each step one IEEE
   operation through volatiles:
     forward   v_j = s_j C(x_j); for h = 1, 2, ..., n / 2, every pair (i, i + h) with i & h
               == 0: (v_i, v_i+h) = (v_i + v_i+h, v_i - v_i+h); y_j = T(v_j c)
     inverse   v_j = C(y_j); the same butterfly; x_j = T(s_j (v_j c))
   c = C(1 / sqrt(n)) (2^(-k/2), times C(1 / sqrt(2)) for odd k); s_j = -1 where bit j % 32 of
   word (j / 32) % 4 of Philox4x32-10(counter (j / 128, 0, 0, 0), key (seed low, seed high))
   is set, else +1 (all +1 without random signs). */
#ifndef BQ_TESTS_REFERENCE_ROTATE_H
#define BQ_TESTS_REFERENCE_ROTATE_H

#include "reference.h"

REF_API void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int i = 0; i < 10; i++) {
    if (i) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* s_j of a block (1 or -1) */
REF_API int ref_rotate_sign(int signs, uint64_t seed, int j) {
  if (!signs) return 1;
  const uint32_t ctr[4] = {(uint32_t)(j / 128), 0, 0, 0}, key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  ref_philox4x32_10(ctr, key, w);
  return (w[(j / 32) % 4] >> (j % 32)) & 1u ? -1 : 1;
}

/* the rotation of [rows, cols] (row strides xs, ys) in blocks of n; inverse: backward */
REF_API void ref_rotate(bq_dtype t, int inverse, int signs, uint64_t seed, int n, int64_t rows, int64_t cols,
                        const void *x, int64_t xs, void *y, int64_t ys) {
  int k = 0;
  while ((1 << k) < n) k++;
  double vd[256];
  float vf[256];
  const int f64 = t == BQ_F64;
  volatile double cd = ldexp(1.0, -(k / 2));
  volatile float cf = ldexpf(1.0f, -(k / 2));
  if (k & 1) {
    volatile double r2 = 0x1.6a09e667f3bcdp-1;
    volatile float r2f = 0x1.6a09e6p-1f;
    cd = cd * r2, cf = cf * r2f;
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t b = 0; b < cols; b += n) {
      for (int j = 0; j < n; j++) {
        const int s = inverse ? 1 : ref_rotate_sign(signs, seed, j);
        if (f64) vd[j] = s * ref_load_d(t, x, r * xs + b + j);
        else vf[j] = (float)s * ref_load_f(t, x, r * xs + b + j);
      }
      for (int h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i++)
          if (!(i & h)) {
            if (f64) { volatile double a = vd[i], c = vd[i + h], u = a + c, w = a - c; vd[i] = u, vd[i + h] = w; }
            else { volatile float a = vf[i], c = vf[i + h], u = a + c, w = a - c; vf[i] = u, vf[i + h] = w; }
          }
      for (int j = 0; j < n; j++) {
        const int s = inverse ? ref_rotate_sign(signs, seed, j) : 1;
        if (f64) { volatile double v = vd[j] * cd; ref_store_d(y, r * ys + b + j, s * v); }
        else { volatile float v = vf[j] * cf; ref_store_f(t, y, r * ys + b + j, (float)s * v); }
      }
    }
}

#endif
