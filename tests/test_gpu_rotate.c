/* tests/test_gpu_rotate.c - the Hadamard rotation (src/family_rotate.h, kernels_src/rotate.cu)
   on the GPU against the CPU reference (tests/reference_rotate.h), bit for bit (NaN payloads
   aside): both directions x every float type x random signs or none x every block size (2
   to 256), each entry point forced where it takes the block; rows shorter than a warp's
   segment, strided and misaligned rows, large tensors (many warps a row); data with zeros,
   NaN, inf and wide magnitudes; guards around every allocation; inputs unchanged. And
   inverse(forward(x)) against x within the roundings, and batch invariance (a row alone
   gives the bits it gives in a batch). Without a usable CUDA driver/device every test is
   skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_rotate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_UTIL_BUFFERS
#define GPU_UTIL_LAUNCHES
#include "gpu_util.h"

static const bq_dtype FTS[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};

static bq_desc rot_desc(int inverse, bq_dtype ft, int signs) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_HADAMARD;
  d.direction = inverse ? BQ_BACKWARD : BQ_FORWARD;
  d.float_type = ft;
  d.random_signs = signs;
  return d;
}
static void store(bq_dtype t, void *buf, int64_t i, double v) {
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

/* one call: [rows, cols] in blocks of n; pads and offsets in elements; force: the entry */
static void run_case(const bq_desc *d, int64_t rows, int64_t cols, int n, int64_t xpad, int64_t ypad, int offx, int offy,
                     int force) {
  bq_plan *p = plan_get(d, "hadamard");
  const size_t T = (size_t)bq__dtype_size(d->float_type);
  const int64_t xs = cols + xpad, ys = cols + ypad;
  const uint64_t seed = rnd();
  char what[1024];
  snprintf(what, sizeof what, "seed=0x%llx %.300s | [%lld,%lld] n %d strides %lld/%lld offs %d/%d force %d key %llx",
           (unsigned long long)g_seed, bq_plan_sku(p), (long long)rows, (long long)cols, n, (long long)xs, (long long)ys,
           offx, offy, force, (unsigned long long)seed);
  dbuf X, Y;
  dbuf_make(&X, T, rows * xs, offx);
  dbuf_make(&Y, T, rows * ys, offy);
  fill_garbage(X.h, X.total);
  fill_garbage(Y.h, Y.total);
  const int kind = (int)(rnd() % 4);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      double v = (rnd_unit() - 0.5) * 8;
      if (kind == 1) v = rnd() % 9 == 0 ? NAN : rnd() % 7 == 0 ? ((rnd() & 1) ? INFINITY : -INFINITY) : v;
      if (kind == 2) v *= ldexp(1.0, (int)rnd_range(-30, 30));
      if (kind == 3 && rnd() % 3 == 0) v = 0.0;
      store(d->float_type, X.h + X.pre, r * xs + c, v);
    }
  BQ_OK(bq_memcpy_to_device(X.dev, X.h, X.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(Y.dev, Y.h, Y.total), "%s", what);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = X.dev + X.pre, a.y = Y.dev + Y.pre;
  a.rows = rows, a.cols = cols, a.group_size = n, a.x_row_stride = xs, a.y_row_stride = ys;
  a.seed = d->random_signs ? seed : 0;
  bq__rotate_force_entry = force;
  g_last_fn = NULL;
  BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), "%s", what);
  bq__rotate_force_entry = -1;
  if (force >= 0 && rows && cols) {
    const int v = 16 / (int)T, need = n > 32 * v ? n / 32 : v;
    if ((2 << force) >= need)
      cr_assert(g_last_fn && g_last_fn == plan_fn(p, force), "the last launch is not %s | %s", p->kernels[force], what);
  }
  BQ_OK(bq_synchronize(NULL), "%s", what);
  unsigned char *got = (unsigned char *)malloc(Y.total);
  cr_assert(got);
  BQ_OK(bq_memcpy_to_host(got, Y.dev, Y.total), "%s", what);
  ref_rotate(d->float_type, d->direction == BQ_BACKWARD, d->random_signs, a.seed, n, rows, cols, X.h + X.pre, xs,
             Y.h + Y.pre, ys);
  char msg[2048];
  const size_t bad = ref_compare(d->float_type, Y.h, got, (int64_t)(Y.total / T), msg, sizeof msg);
  cr_assert_eq(bad, 0, "y: %zu differ (data at %zu):\n%s| %s", bad, Y.pre / T, msg, what);
  check_unchanged(&X, "x", what);
  free(got);
  dbuf_free(&X);
  dbuf_free(&Y);
}

static void rot_begin(void) {
  gpu_begin();
  launch_note_begin();
}
TestSuite(rotate, .init = rot_begin);

Test(rotate, every_form_block_and_entry, .timeout = 900) {
  for (int inv = 0; inv < 2; inv++)
    for (int f = 0; f < 4; f++)
      for (int signs = 0; signs < 2; signs++) {
        const bq_desc d = rot_desc(inv, FTS[f], signs);
        for (int n = 2; n <= 256; n *= 2) {
          run_case(&d, rnd_range(1, 9), (int64_t)n * rnd_range(1, 12), n, rnd() % 2 ? 0 : rnd_range(1, 9),
                   rnd() % 2 ? 0 : rnd_range(1, 9), rnd() % 3 ? 0 : (int)rnd_range(1, 7),
                   rnd() % 3 ? 0 : (int)rnd_range(1, 7), -1);
          run_case(&d, 2, n, n, 0, 0, 0, 0, (int)(rnd() % 3)); /* (a forced entry where it can take the block) */
        }
        run_case(&d, 3000, 4096, 128, 0, 0, 0, 0, -1); /* many warps */
      }
}

/* the inverse undoes the forward pass to within the roundings (f32 data, n = 128): and a row
   alone gives the bits it gives in a batch */
Test(rotate, inverse_and_batch_invariance, .timeout = 900) {
  const int64_t rows = 257, cols = 2048;
  const bq_desc fw = rot_desc(0, BQ_F32, 1), bw = rot_desc(1, BQ_F32, 1);
  bq_plan *pf = plan_get(&fw, "forward"), *pb = plan_get(&bw, "inverse");
  float *hx = (float *)malloc((size_t)rows * cols * 4), *hy = (float *)malloc((size_t)rows * cols * 4);
  float *hz = (float *)malloc((size_t)rows * cols * 4), *h1 = (float *)malloc((size_t)cols * 4);
  cr_assert(hx && hy && hz && h1);
  for (int64_t i = 0; i < rows * cols; i++) hx[i] = (float)(rnd_unit() - 0.5);
  void *x, *y, *z;
  BQ_OK(bq_malloc(&x, (size_t)rows * cols * 4), "x");
  BQ_OK(bq_malloc(&y, (size_t)rows * cols * 4), "y");
  BQ_OK(bq_malloc(&z, (size_t)rows * cols * 4), "z");
  BQ_OK(bq_memcpy_to_device(x, hx, (size_t)rows * cols * 4), "x");
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rows, a.cols = cols, a.group_size = 128, a.seed = 0xfeedfacecafebeefull;
  a.x = x, a.y = y;
  BQ_OK(bq_plan_run(pf, &a, NULL, 0, NULL), "forward");
  a.x = y, a.y = z;
  BQ_OK(bq_plan_run(pb, &a, NULL, 0, NULL), "inverse");
  BQ_OK(bq_memcpy_to_host(hy, y, (size_t)rows * cols * 4), "y");
  BQ_OK(bq_memcpy_to_host(hz, z, (size_t)rows * cols * 4), "z");
  for (int64_t i = 0; i < rows * cols; i++)
    cr_assert(fabsf(hz[i] - hx[i]) <= 1e-5f, "elem %lld: %a came back %a", (long long)i, (double)hx[i], (double)hz[i]);
  /* row 100 alone */
  a.rows = 1, a.x = (char *)x + 100 * cols * 4, a.y = z;
  BQ_OK(bq_plan_run(pf, &a, NULL, 0, NULL), "one row");
  BQ_OK(bq_memcpy_to_host(h1, z, (size_t)cols * 4), "one row");
  cr_assert(!memcmp(h1, hy + 100 * cols, (size_t)cols * 4), "row 100 alone differs from row 100 in the batch");
  bq_free(x), bq_free(y), bq_free(z);
  free(hx), free(hy), free(hz), free(h1);
}
