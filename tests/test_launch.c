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
    made_dir(dir);
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
  bq_affine_params k;
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

/* ==== the launch rules on the H100's properties give the H100's measured counts ============== */
/* The affine table's launch columns before they became rules (the counts measured on the
   H100, a row each in the table's order): the row kernel's items an SM, the blocks
   kernels' blocks an SM at most (0: none), the lean route's limit in MiB of the float
   stream (-1: any size, 0: never), and each entry point's launch bounds' least blocks an SM
   (row, cols, odd, blocks, flat, narrow, mask; a few retuned on the H200 since, as the
   table's comment says; bq_affine_cols' one wave, where the table's cwave asks for it, is
   its launch bounds' blocks an SM: 24 warps at 3 blocks, 32 at 4). */
static const int h100_warps[] = {
  64, 64, 64, 64, 64, 64, 64, 64, 256, 256, 256, 256, 128, 64, 128, 128,
  64, 64, 64, 64, 64, 64, 64, 64, 256, 64, 256, 256, 128, 64, 128, 128,
  64, 64, 64, 64, 64, 64, 64, 64, 256, 256, 256, 256, 128, 64, 128, 128,
  64, 64, 64, 64, 64, 64, 64, 64, 256, 64, 256, 256, 128, 64, 128, 128,
  64, 64, 64, 64, 64, 64, 64, 64, 256, 256, 256, 256, 128, 64, 128, 128,
  64, 64, 64, 64, 64, 64, 64, 64, 256, 64, 256, 256, 128, 64, 128, 128,
};
static const int h100_bcap[] = {
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0,
};
static const int h100_lean_mib[] = {
  -1, 32, -1, -1, 0, 0, 0, 0, 0, 0, 32, 32, 0, 0, 32, 32,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  -1, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
static const int h100_lb[] = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 3, 4, 3, 0, 0, 4, 0, 3, 4, 3, 0, 0, 4, 0,
  3, 3, 3, 0, 0, 4, 0, 3, 3, 3, 0, 0, 4, 0, 0, 0, 0, 0, 4, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 0, 4, 4, 0,
  3, 0, 3, 0, 4, 4, 0, 3, 0, 3, 4, 0, 4, 0, 3, 0, 3, 0, 4, 4, 0,
  3, 0, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  5, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0,
  0, 3, 0, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 3, 4, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0, 0, 3, 4, 0, 0, 4, 0,
  0, 3, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 4, 0, 0, 0, 4, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0,
  0, 3, 4, 0, 0, 4, 0, 0, 3, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 4, 0,
  0, 0, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 0, 0, 4, 4,
  3, 3, 3, 0, 0, 4, 4, 3, 4, 3, 0, 0, 4, 4, 3, 4, 3, 0, 0, 4, 4,
  0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 4, 4, 0,
  0, 0, 0, 0, 4, 4, 0, 3, 0, 3, 0, 4, 4, 0, 3, 0, 3, 0, 0, 4, 0,
  3, 0, 3, 0, 4, 4, 0, 3, 0, 3, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 3, 0, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0, 0, 3, 0, 0, 0, 4, 0,
  0, 3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
  0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 4, 0,
};

static const bq__limits h100 = {132, 2048}; /* the H200's are the same */

/* dynamic per tensor's reduction grid on a device of sms SMs of threads_sm threads */
static int64_t dynamic_blocks(int sms, int threads_sm, bq_dtype ft) {
  bq_plan p;
  memset(&p, 0, sizeof p);
  p.desc.op = BQ_DYNAMIC_QUANTIZE;
  p.desc.granularity = BQ_PER_TENSOR;
  p.desc.float_type = ft;
  p.num_sms = sms, p.threads_sm = threads_sm;
  return bq__dynamic_blocks(&p);
}

Test(rules, h100_properties_give_the_h100_counts) {
  cr_assert_eq(BQ__AFFINE_ROWS, (int)(sizeof h100_warps / sizeof h100_warps[0]));
  for (int i = 0; i < BQ__AFFINE_ROWS; i++) {
    const bq__affine_row *r = &bq__affine_table[i];
    const int64_t t = bq__dtype_size(r->ft);
    cr_assert_eq(bq__wave_warps(&h100, r->waves), h100_warps[i], "row %d: items an SM", i);
    cr_assert_eq(r->bcap ? h100.threads_sm / r->bcap / 256 : 0, h100_bcap[i], "row %d: blocks an SM", i);
    for (int e = 0; e < 7; e++)
      cr_assert_eq(bq__lb_blocks(r->regs[e], 256), h100_lb[7 * i + e], "row %d, entry %d: launch bounds", i, e);
    cr_assert_eq(r->regs[BQ__AFFINE_LEAN], 0, "row %d: bq_affine_lean names no bounds", i);
    cr_assert_eq(r->regs[BQ__AFFINE_PAIR], 0, "row %d: bq_affine_pair names no bounds", i);
    /* the lean limit at the sizes it was measured at (8 to 256 MiB of the float stream);
       between 32 and 64 MiB, where nothing was measured, it moved from 32 to 33 MiB */
    for (int64_t mib = 8; mib <= 256; mib *= 2) {
      const int64_t n = (mib << 20) / t;
      const int was = h100_lean_mib[i] < 0 || (h100_lean_mib[i] > 0 && mib <= h100_lean_mib[i]);
      cr_assert_eq(bq__affine_lean_rule(r, n, t, &h100), was, "row %d at %lld MiB: the lean route", i, (long long)mib);
    }
  }
  /* dynamic per tensor: two blocks of 1024 an SM (a device that reports no thread count: 2048) */
  cr_assert_eq(dynamic_blocks(132, 2048, BQ_BF16), 264);
  cr_assert_eq(dynamic_blocks(132, 0, BQ_BF16), 264);
}

/* The linear entry points' launch bounds: on sm_90 (the H100's and H200's arch) the rule
   gives the counts measured there, and the generated sm_90 sources are those of the
   constants it replaced; sm_80 (164 KiB of shared memory an SM) and sm_89 (100 KiB) get
   what their shared memory holds, never fewer than 1 where the table bounds an entry. */
Test(rules, linear_bounds_follow_the_arch_shared_memory) {
  static const int sm90[BQ__GEMM_CONFIGS] = {1, 4, 0, 2, 1}; /* large, gemv, gemv32, gemv64, wgmma */
  static const int sm80[BQ__GEMM_CONFIGS] = {1, 2, 0, 1, 1};
  static const int sm89[BQ__GEMM_CONFIGS] = {1, 1, 0, 1, 1};
  for (int e = 0; e < BQ__GEMM_CONFIGS; e++) {
    cr_assert_eq(bq__linear_min_blocks(e, 90), sm90[e], "entry %d on sm_90", e);
    cr_assert_eq(bq__linear_min_blocks(e, 80), sm80[e], "entry %d on sm_80", e);
    cr_assert_eq(bq__linear_min_blocks(e, 89), sm89[e], "entry %d on sm_89", e);
    cr_assert_eq(bq__linear_min_blocks(e, 100), sm90[e], "entry %d on sm_100 (228 KiB, as sm_90)", e);
  }
  /* and the prelude writes them: sm_90's bq_gemv held to 4 CTAs, sm_80's to 2 */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_SMOOTHQUANT_LINEAR;
  d.int_type = BQ_S8;
  d.out_type = BQ_F16;
  d.scale_type = BQ_F32;
  for (int arch = 80; arch <= 90; arch += 10) {
    bq__str s;
    memset(&s, 0, sizeof s);
    bq__target t;
    memset(&t, 0, sizeof t);
    t.arch = arch;
    bq__linear_prelude(&d, &t, &s);
    cr_assert_not_null(s.p);
    cr_assert(strstr(s.p, arch == 90 ? "#define BQ_LB_GEMV __launch_bounds__(256, 4)\n"
                                     : "#define BQ_LB_GEMV __launch_bounds__(256, 2)\n"), "sm_%d:\n%s", arch, s.p);
    cr_assert(strstr(s.p, "#define BQ_LB_GEMV32 __launch_bounds__(256)\n"), "sm_%d:\n%s", arch, s.p);
    free(s.p);
  }
}

/* The per-block staged tiles' persistent wave (256 threads, a 32 KiB slot a block): the four
   blocks their launch bounds allow where the SM's shared memory holds four slots (sm_90's
   228 KiB, sm_80's 164), three where it holds three (sm_89's 100 KiB: a fourth block would
   wait for one of the three to finish all its tiles) */
Test(rules, staged_tiles_wave_fits_the_shared_memory) {
  static const int arch[3] = {90, 80, 89}, sms[3] = {132, 108, 84}, want[3] = {4, 4, 3};
  for (int i = 0; i < 3; i++) {
    bq_plan p;
    memset(&p, 0, sizeof p);
    p.desc.op = BQ_DYNAMIC_QUANTIZE;
    p.desc.granularity = BQ_PER_BLOCK;
    p.desc.float_type = BQ_BF16;
    p.num_sms = sms[i], p.threads_sm = arch[i] == 89 ? 1536 : 2048;
    p.target.arch = arch[i];
    cr_assert_eq(bq__staged_wave(&p, 256, 256 * 8 * 16), (int64_t)sms[i] * want[i], "sm_%d", arch[i]);
  }
}

/* A device whose SMs hold 1536 threads (compute capability 8.6 and 8.9) gets counts of its
   own from the same rows: three quarters of the warps, three blocks of 256 for a half
   share, one 1024-thread block an SM; launch bounds are the register file's, the same. */
Test(rules, a_smaller_sm_gets_its_own_counts) {
  const bq__limits l = {84, 1536};
  for (int i = 0; i < BQ__AFFINE_ROWS; i++) {
    const bq__affine_row *r = &bq__affine_table[i];
    cr_assert_eq(bq__wave_warps(&l, r->waves), h100_warps[i] * 3 / 4, "row %d", i);
    if (r->bcap) cr_assert_eq(l.threads_sm / r->bcap / 256, 3, "row %d", i);
  }
  cr_assert_eq(bq__wave_bytes(&l, 8), (int64_t)8 * 84 * 1536 * 16);
  cr_assert_eq(dynamic_blocks(84, 1536, BQ_F32), 84);
}

/* ==== per channel with the channel axis outermost runs as per token ========================== */

/* the function the last launch ran (the fake driver's own launch underneath) */
static bq__CUfunction g_fn;
static bq__CUresult (*g_real_launch)(bq__CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, bq__CUstream, void **, void **);
static bq__CUresult note_fn(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned smem, bq__CUstream s, void **params, void **extra) {
  g_fn = f;
  return g_real_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}
/* runs a once; whether the launch ran one of plan q's functions */
static int ran_from(bq_plan *p, const bq_args *a, const bq_plan *q) {
  if (bq__drv.cuLaunchKernel != note_fn) {
    g_real_launch = bq__drv.cuLaunchKernel;
    bq__drv.cuLaunchKernel = note_fn;
  }
  g_fn = NULL;
  bq_status st = bq_plan_run(p, a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run: %s", bq_last_error());
  cr_assert_not_null(g_fn);
  for (int e = 0; q && e < BQ__MAX_KERNELS; e++)
    if (q->mod[e] && q->mod[e]->fn[e] == g_fn) return 1;
  return 0;
}

/* Forward quantize and dequantize per channel over [C, inner] (or [1, C, inner]), inner >=
   1024, run the per-token plan's kernels (selected on first use, kept); shorter rows, an
   inner channel axis and fake quantize run the per-channel plan's own. */
Test(launch, per_channel_outermost_runs_per_token) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE};
  for (int oi = 0; oi < 3; oi++) {
    bq_plan *p = select_(ops[oi], BQ_PER_CHANNEL, BQ_F16);
    bq_args a = quantize_args();
    a.rank = 2, a.shape[0] = 4096, a.shape[1] = 1024, a.axis = 0;
    if (ops[oi] == BQ_FAKE_QUANTIZE) {
      cr_assert(ran_from(p, &a, p), "fake quantize left its own kernels");
      cr_assert_null(p->rows, "fake quantize selected a per-token plan");
      bq_plan_destroy(p);
      continue;
    }
    cr_assert_null(p->rows);
    cr_assert(ran_from(p, &a, NULL) == 0 && p->rows != NULL, "no per-token plan for [4096, 1024], axis 0");
    cr_assert(strstr(bq_plan_sku(p->rows), ".per_token.") != NULL, "%s", bq_plan_sku(p->rows));
    const bq_plan *first = p->rows;
    cr_assert(ran_from(p, &a, p->rows), "[4096, 1024], axis 0: not the per-token plan's kernel");
    a.rank = 3, a.shape[0] = 1, a.shape[1] = 4096, a.shape[2] = 1024, a.axis = 1;
    cr_assert(ran_from(p, &a, p->rows), "[1, 4096, 1024], axis 1: not the per-token plan's kernel");
    cr_assert_eq(p->rows, first, "the per-token plan was selected again");
    a.rank = 2, a.shape[0] = 4096, a.shape[1] = 1000, a.axis = 0; /* rows under 1024 elements */
    cr_assert(ran_from(p, &a, p), "[4096, 1000], axis 0: not the per-channel plan's kernel");
    a.rank = 3, a.shape[0] = 8, a.shape[1] = 512, a.shape[2] = 1024, a.axis = 1; /* not outermost */
    cr_assert(ran_from(p, &a, p), "[8, 512, 1024], axis 1: not the per-channel plan's kernel");
    bq_plan_destroy(p);
  }
}
