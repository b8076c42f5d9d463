/* test_launch.c - the grids the library launches at the bounds validation sets, on a
   machine with no GPU: plans are selected against the fake driver (tests/fake_driver.c,
   which aborts on a launch outside the launch limits and records every launch), with
   kernels compiled by the real NVRTC into a private cache directory. Device pointers are
   fake addresses: nothing runs.

   Each case runs the largest (or a just-inside) call of a kernel's bound and checks the
   kernel launched and its grid; the just-outside calls are validation's, in
   test_validation.c and test_validation_linear.c. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_util.h"

static unsigned long long (*launches)(void);
static void (*last_launch)(unsigned dims[7], char *name, size_t name_size);

static void use_fake_driver(void) {
  const char *path = fake_driver();
  setenv("BARACUDA_QUANT_DRIVER", path, 1);
  unsetenv("FAKE_CUDA_MODE");
  if (!getenv("BARACUDA_QUANT_CACHE_DIR")) {
    static char dir[] = "/tmp/bq_launch_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    setenv("BARACUDA_QUANT_CACHE_DIR", dir, 1);
  }
  void *h = dlopen(path, RTLD_NOW);
  cr_assert_not_null(h, "%s: %s", path, dlerror());
  *(void **)&launches = dlsym(h, "fake_cuda_launches");
  *(void **)&last_launch = dlsym(h, "fake_cuda_last_launch");
  cr_assert(launches && last_launch);
}
TestSuite(launch, .init = use_fake_driver, .timeout = 300);

static bq_plan *select_(bq_op op, bq_granularity g, bq_dtype ft) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.granularity = g;
  d.float_type = ft;
  bq_plan *p = NULL;
  bq_status st = bq_plan_select(&d, &p);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_select: %s", bq_last_error());
  return p;
}

#define P(n) ((void *)(uintptr_t)(0x100000000ull * (n)))

/* a quantize's arguments: x, y and scales at fake addresses, everything else zero */
static bq_args quantize_args(void) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = P(1);
  a.y = P(2);
  a.scales = P(3);
  return a;
}

/* runs a, which must launch kernel `name` once with grid (gx, gy) and 256-thread blocks at most */
static void expect_launch(bq_plan *p, const bq_args *a, const char *name, unsigned gx, unsigned gy) {
  cr_assert_eq(bq_plan_can_implement(p, a), BQ_SUCCESS, "%s", bq_last_error());
  unsigned long long before = launches();
  bq_status st = bq_plan_run(p, a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run: %s", bq_last_error());
  cr_assert_eq(launches(), before + 1);
  unsigned dims[7];
  char kernel[128];
  last_launch(dims, kernel, sizeof kernel);
  cr_assert_str_eq(kernel, name);
  cr_assert_eq(dims[0], gx, "%s: grid x %u, expected %u", name, dims[0], gx);
  cr_assert_eq(dims[1], gy, "%s: grid y %u, expected %u", name, dims[1], gy);
  cr_assert(dims[3] >= 32 && dims[3] <= 256, "%s: block %u", name, dims[3]);
}

/* per channel, the axis innermost: 2^39 f32 channels, 4 a lane, 256 lanes a block */
Test(launch, per_channel_columns_at_the_channel_bound) {
  bq_plan *p = select_(BQ_QUANTIZE, BQ_PER_CHANNEL, BQ_F32);
  bq_args a = quantize_args();
  a.rank = 2;
  a.shape[0] = 3;
  a.shape[1] = (int64_t)1 << 39;
  a.axis = 1;
  expect_launch(p, &a, "bq_affine_cols", 1u << 29, 1);
  bq_plan_destroy(p);
}

/* per group, bq_affine_blocks: its 32-bit lane index needs fewer than 2^24 blocks of 256;
   2^28 items of a warp (8 a block) are capped there, 2^25 are not */
Test(launch, blocks_grid_capped_below_2p24) {
  bq_plan *p = select_(BQ_QUANTIZE, BQ_PER_GROUP, BQ_F32);
  bq_args a = quantize_args();
  a.cols = 4096;
  a.group_size = 4; /* 1024 groups a row, 32 an item: 32 items a row */
  a.rows = (int64_t)1 << 23;
  expect_launch(p, &a, "bq_affine_blocks", (1u << 24) - 1, 1);
  a.rows = (int64_t)1 << 20;
  expect_launch(p, &a, "bq_affine_blocks", 1u << 22, 1);
  bq_plan_destroy(p);
}

/* weight sums: N = 2^31 - 1 rows (8 a block) of K = 2^24 */
Test(launch, weight_sums_at_the_bounds) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  bq_plan *p = NULL;
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  bq_args a;
  memset(&a, 0, sizeof a);
  a.w = P(1);
  a.y = P(2);
  a.n = 0x7fffffff;
  a.cols = (int64_t)1 << 24;
  expect_launch(p, &a, "bq_weight_sums", 1u << 28, 1);
  bq_plan_destroy(p);
}

/* a grid outside the launch limits fails before the driver: never truncated */
Test(launch, grid_outside_the_limits_is_refused) {
  bq_plan *p = select_(BQ_QUANTIZE, BQ_PER_TENSOR, BQ_F32);
  bq__affine_params k;
  memset(&k, 0, sizeof k);
  unsigned long long before = launches();
  const int64_t bad[][2] = {{(int64_t)1 << 31, 1}, {(int64_t)1 << 32, 1}, {0, 1}, {1, 65536}, {1, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    bq_status st = bq__launch(p, 0, bad[i][0], bad[i][1], 256, 0, &k, NULL);
    cr_assert_eq(st, BQ_ERROR_NOT_SUPPORTED, "grid (%lld, %lld)", (long long)bad[i][0], (long long)bad[i][1]);
    cr_assert(strstr(bq_last_error(), "exceeds the launch limits"), "%s", bq_last_error());
  }
  cr_assert_eq(launches(), before, "nothing reached the driver");
  cr_assert_eq(bq__launch(p, 0, 0x7fffffff, 65535, 256, 0, &k, NULL), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(launches(), before + 1);
  bq_plan_destroy(p);
}
