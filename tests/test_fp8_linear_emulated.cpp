/* tests/test_fp8_linear_emulated.cpp - the FP8 linear layers' kernels of kernels_src/linear.cu
   (bq_fp8_gemm's mma.sync tiles; on sm_90a bq_fp8_tma's and bq_fp8_wgmma's tiles and the
   weight streaming), run on the CPU by
   tests/emulator/cuda_emulator.h through the header's own run path (validation, flags,
   launch geometry), against the CPU reference (reference_linear.h, reff8_gemm) bit for bit.

   The tensor cores' FP8 sums are the hardware's; the emulator and the reference share one
   model of them (a step of 32 products summed exactly, rounded to f32), so what this checks
   is the kernels' own logic: tile and fragment indexing, the swizzle, K tails, the order in
   which partial sums are formed and promoted (the wgmma tiles add one sum per 128 elements
   of K to the accumulator; chaining them instead fails here), the scales' flags and the
   epilogue. test_gpu_linear bounds the hardware's sums. Built once per specialization
   (EMU_SPEC); outputs are poisoned and compared whole, guards and row gaps included. */
#include "emu_prefix.h" /* parsed here: the precompiled prefix slowed these fibers by a third */
#include "reference_linear.h"

#include "emulator/cuda_emulator.h"

#include EMU_SPEC
namespace emu_f8 {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/linear.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_f8

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

static int g_blk; /* the case is blockwise: sm_90a's launches take the _blk entry points */
#if EMU_WGMMA
static void k_tiles(const void *p) { emu_f8::bq_fp8_wgmma(*(const bq_linear_params *)p); }
static void k_gemv(const void *p) { emu_f8::bq_fp8_gemv(*(const bq_linear_params *)p); }
static void k_tiles_blk(const void *p) { emu_f8::bq_fp8_wgmma_blk(*(const bq_linear_params *)p); }
static void k_gemv_blk(const void *p) { emu_f8::bq_fp8_gemv_blk(*(const bq_linear_params *)p); }
static void k_tma(const void *p) { emu_f8::bq_fp8_tma(*(const bq_fp8_tma_params *)p); }
static void k_tma_blk(const void *p) { emu_f8::bq_fp8_tma_blk(*(const bq_fp8_tma_params *)p); }
static const int ENTRY = BQ__FP8_WGMMA;
#else
static void k_tiles(const void *p) { emu_f8::bq_fp8_gemm(*(const bq_linear_params *)p); }
static void k_gemv(const void *p) { (void)p; cr_assert_fail("weight streaming launched by a module without it"); }
static void k_tiles_blk(const void *p) { (void)p; cr_assert_fail("a wgmma entry launched by an mma.sync module"); }
static void k_gemv_blk(const void *p) { (void)p; cr_assert_fail("a wgmma entry launched by an mma.sync module"); }
static void k_tma(const void *p) { (void)p; cr_assert_fail("a wgmma entry launched by an mma.sync module"); }
static void k_tma_blk(const void *p) { (void)p; cr_assert_fail("a wgmma entry launched by an mma.sync module"); }
static const int ENTRY = BQ__FP8_GEMM;
#endif
static int64_t g_m, g_n;
static int g_streamed; /* launches of the weight streaming */
static int g_tma;      /* ... of bq_fp8_tma's tiles */
static const bq_plan *g_plan;
static void check_launch(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  const int blk = EMU_WGMMA && g_blk; /* (the mma.sync tiles take every mode) */
  if (k == k_gemv || k == k_gemv_blk) { /* 64 output columns and 16 rows a CTA */
    g_streamed++;
    cr_assert(k == (blk ? k_gemv_blk : k_gemv), "the weight streaming's entry for the other scale modes");
    cr_assert_eq(gx, (unsigned)((g_n + 63) / 64));
    cr_assert_eq(gy, (unsigned)((g_m + 15) / 16));
    cr_assert_eq(bx, 128u);
    cr_assert_eq(smem, (unsigned)bq__fp8_smem(blk ? BQ__FP8_GEMV_BLK : BQ__FP8_GEMV));
    return;
  }
  const int64_t tiles = ((g_m + 127) / 128) * ((g_n + 127) / 128);
  cr_assert_eq(gy, 1u);
  if (k == k_tma || k == k_tma_blk) { /* (a CTA may take several tiles, of 192 rows) */
    g_tma++;
    cr_assert_eq(gx, (unsigned)bq__fp8_tma_blocks(g_plan, ((g_m + 191) / 192) * ((g_n + 127) / 128)));
    cr_assert(k == (blk ? k_tma_blk : k_tma), "the TMA tiles' entry for the other scale modes");
    cr_assert_eq(bx, (unsigned)BQ__FP8_TMA_THREADS);
    cr_assert_eq(smem, (unsigned)bq__fp8_smem(blk ? BQ__FP8_TMA_BLK : BQ__FP8_TMA));
    return;
  }
  cr_assert(k == (blk ? k_tiles_blk : k_tiles), "a kernel other than the module's tiles for this scale mode");
  cr_assert_eq(gx, (unsigned)tiles, "one CTA a 128 x 128 tile");
  cr_assert_eq(bx, 256u);
  cr_assert_eq(smem, (unsigned)bq__fp8_smem(blk ? BQ__FP8_WGMMA_BLK : ENTRY));
}
static void init(void) {
  emu_test_init();
  emu_launch_check = check_launch;
  emu_a_e5m2 = EMU_I == BQ_TYPE_E5M2;
}
TestSuite(emulated, .init = init);

static const bq_dtype OUT = (bq_dtype)EMU_OUT, AT = (bq_dtype)EMU_I;

typedef struct fcase {
  int force; /* bq__fp8_force_config */
  int mode, bias; /* REFF8_*: tensorwise, rowwise, blockwise (row-major or MN-major) */
  int64_t lds_pad; /* blockwise: args.group_row_stride past the least (0: the default) */
  int pdl;         /* launched as FP8 QuantizedLinear launches its weight streaming */
  int cap;         /* bq_fp8_tma's grid at most this (0: the rule), so that a CTA takes several tiles */
  int64_t m, n, k, lda_pad, ldy_pad;
  int x_off, w_off, y_off;
} fcase;

/* an FP8 code of kind AT (or e4m3) that is finite: NaN (and e5m2's infinities) redrawn */
static uint8_t rnd_code(int e5m2, int narrow) {
  for (;;) {
    uint8_t b = (uint8_t)rnd();
    if (narrow) b = (uint8_t)((b & 0x87) | (e5m2 ? 0x38 : 0x30) | ((b >> 3) & 8)); /* exponents near 1 */
    if (e5m2 ? ((b & 0x7c) == 0x7c) : ((b & 0x7f) == 0x7f)) continue;
    return b;
  }
}

static void run(const fcase *c) {
  char what[256];
  static const char *const modes[] = {"tensorwise", "rowwise", "blockwise", "blockwise-mn"};
  snprintf(what, sizeof what, "seed=0x%llx out=%s a=%s %s+%lld bias=%d M=%lld N=%lld K=%lld lda+%lld ldy+%lld offs %d/%d/%d",
           (unsigned long long)g_seed, ref_dtype_name(OUT), ref_dtype_name(AT), modes[c->mode], (long long)c->lds_pad,
           c->bias, (long long)c->m, (long long)c->n, (long long)c->k, (long long)c->lda_pad, (long long)c->ldy_pad,
           c->x_off, c->w_off, c->y_off);
  g_m = c->m, g_n = c->n;
  g_blk = c->mode >= REFF8_BLOCKWISE;
  bq__fp8_force_config = c->force;
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_FP8_LINEAR;
  d.granularity = c->mode == REFF8_TENSORWISE ? BQ_PER_TENSOR : c->mode == REFF8_ROWWISE ? BQ_PER_TOKEN : BQ_PER_BLOCK;
  d.scale_layout = c->mode == REFF8_BLOCKWISE_MN ? BQ_SCALES_MN_MAJOR : BQ_SCALES_ROW_MAJOR;
  d.out_type = OUT;
  d.int_type = AT;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  bq__kernel_src ks; /* this binary's kernels are the ones the plan's SKU names */
  bq__target tg = {90, 0, EMU_WGMMA, 0};
  cr_assert_eq(bq__kernel_for(&d, &tg, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE), "the SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
  entry.fn[ENTRY] = (bq__CUfunction)k_tiles;
  entry.fn[BQ__FP8_GEMV] = (bq__CUfunction)k_gemv;
  entry.fn[BQ__FP8_WGMMA_BLK] = (bq__CUfunction)k_tiles_blk;
  entry.fn[BQ__FP8_GEMV_BLK] = (bq__CUfunction)k_gemv_blk;
  entry.fn[BQ__FP8_TMA] = (bq__CUfunction)k_tma;
  entry.fn[BQ__FP8_TMA_BLK] = (bq__CUfunction)k_tma_blk;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = 132;
  g_plan = &plan;
  bq__fp8_tma_cap = c->cap;
  plan.linear.wgmma = EMU_WGMMA;
  plan.linear.pdl = c->pdl; /* the weight streaming's prologue for QuantizedLinear (weights first) */
  bq__fp8_force_pdl = c->pdl;

  const int64_t M = c->m, N = c->n, K = c->k, lda = K + c->lda_pad, ldy = N + c->ldy_pad;
  const size_t ys = ref_dtype_size(OUT);
  const int64_t guard = 24, ytot = guard + M * ldy + guard;
  std::vector<uint8_t> xb((size_t)(M * lda) + 64), wb((size_t)(N * K) + 64);
  const int blk = c->mode >= REFF8_BLOCKWISE, mn = c->mode == REFF8_BLOCKWISE_MN;
  const int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
  const int64_t lds = !blk ? 0 : mn ? (c->lds_pad ? M + c->lds_pad : (M + 3) / 4 * 4) : kb + c->lds_pad;
  std::vector<float> sa((size_t)(blk ? (mn ? kb * lds : M * lds) : M) + 1), sw((size_t)(blk ? nb * kb : N) + 1);
  std::vector<unsigned char> bias((size_t)N * ys + 8), yb((size_t)ytot * ys + 64), exp((size_t)ytot * ys);
  uint8_t *x = (uint8_t *)(((uintptr_t)xb.data() + 15) & ~(uintptr_t)15) + c->x_off;
  uint8_t *w = (uint8_t *)(((uintptr_t)wb.data() + 15) & ~(uintptr_t)15) + c->w_off;
  unsigned char *y0 = (unsigned char *)(((uintptr_t)yb.data() + 63) & ~(uintptr_t)63) + (size_t)c->y_off * ys;
  const int e5 = AT == BQ_E5M2;
  for (int64_t r = 0; r < M; r++) {
    const int narrow = (int)(rnd() % 3) == 0; /* rows of like magnitudes, where rounding shows */
    for (int64_t j = 0; j < lda; j++) x[r * lda + j] = rnd_code(e5, narrow);
  }
  for (int64_t i = 0; i < N * K; i++) w[i] = rnd_code(0, (int)(i / (K ? K : 1)) % 2);
  for (size_t i = 0; i < sa.size(); i++) sa[i] = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-8, 2));
  for (size_t i = 0; i < sw.size(); i++) sw[i] = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-8, 2));
  for (int64_t i = 0; i < N; i++) store_any(OUT, bias.data(), i, (rnd_unit() - 0.5) * 64);

  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y0 + (size_t)guard * ys;
  a.rows = M;
  a.cols = K;
  a.n = N;
  a.x_row_stride = lda;
  a.y_row_stride = ldy;
  a.w = w;
  a.scales = sa.data();
  a.w_scales = sw.data();
  a.bias = c->bias ? bias.data() : NULL;
  a.group_size = blk && (M & 1) ? 128 : 0;
  a.group_row_stride = c->lds_pad ? lds : 0;
  if (K == 0) a.x = NULL, a.w = NULL; /* y = bias: nothing else is read */

  reff8_problem P;
  memset(&P, 0, sizeof P);
  P.m = M, P.n = N, P.k = K, P.lda = lda, P.ldy = ldy;
  P.a_e5m2 = e5;
  P.a = x, P.w = w;
  P.mode = c->mode;
  P.lds = lds;
  P.sa = sa.data(), P.sw = sw.data();
  P.out_type = OUT;
  P.bias = c->bias ? bias.data() : NULL;
  memset(exp.data(), 0xA5, exp.size());
  P.y = exp.data() + (size_t)guard * ys;
  reff8_gemm(&P);
  /* copies landing at their wait, then at issue (a slice refilled while a wgmma reads it) */
  for (int eager = 0; eager < 2; eager++) {
    emu.eager_copies = eager;
    memset(yb.data(), 0xA5, yb.size());
    g_launches = 0;
    g_streamed = 0;
    g_tma = 0;
    cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
    cr_assert_eq(g_launches, M && N ? 1 : 0, "%s", what);
    /* sm_90a: M <= 64 streams the weight (unless the test forces the tiles) */
    const int streams = EMU_WGMMA && M && N && (bq__fp8_force_config == BQ__FP8_GEMV ||
                                                 (bq__fp8_force_config < 0 && M <= BQ__FP8_GEMV_ROWS));
    cr_assert_eq(g_streamed, streams, "%s", what);
    /* the other tiles: the TMA's where x and w lie on the 16-byte grid, rows included
       (blockwise only when forced) */
    const int aligned = c->x_off == 0 && c->w_off == 0 && lda % 16 == 0 && K % 16 == 0 && K > 0;
    const int tma = EMU_WGMMA && M && N && !streams && aligned && bq__fp8_force_config != BQ__FP8_WGMMA &&
                    (!g_blk || bq__fp8_force_config == BQ__FP8_TMA);
    cr_assert_eq(g_tma, tma, "%s", what);
    char msg[2048];
    size_t bad = ref_compare(OUT, exp.data(), y0, ytot, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%zu of %lld elements differ (from the front guard of %lld; copies landing %s):\n%s| %s", bad,
                 (long long)ytot, (long long)guard, eager ? "at issue" : "at their wait", msg, what);
  }
  emu.eager_copies = 0;
  bq__fp8_tma_cap = 0;
  bq__fp8_force_config = -1;
  bq__fp8_force_pdl = 0;
}

static fcase base(void) {
  fcase c;
  memset(&c, 0, sizeof c);
  c.mode = REFF8_ROWWISE;
  c.force = -1;
  return c;
}

/* two tiles each way (and a partial third), K with and without a tail and in more slices
   than the pipelines have stages (912 and 1040: the TMA's tiles), every scale mode, with and
   without a bias; M = 200 and 260 give the TMA's 192-row tiles a partial second */
Test(emulated, tiles, .timeout = 600) {
  static const int64_t ks[7] = {128, 300, 77, 900, 640, 912, 1040};
  for (int j = 0; j < 7; j++) {
    fcase c = base();
    c.m = 200 + 60 * (j == 3);
    c.n = j ? 257 + 2 * j : 264;
    c.k = ks[j];
    c.bias = j != 1;
    static const int modes[7] = {REFF8_BLOCKWISE, REFF8_ROWWISE, REFF8_BLOCKWISE_MN, REFF8_TENSORWISE,
                                 REFF8_BLOCKWISE_MN, REFF8_ROWWISE, REFF8_BLOCKWISE};
    c.mode = modes[j];
    c.lds_pad = j == 2 ? 3 : 0;
    /* (the TMA's tiles: 6 tiles on 2 or 3 CTAs, so that a CTA's blockwise scale copies run
       ahead into its next tiles: by several tiles where K is one slice, j = 0) */
    c.cap = j >= 5 ? 2 + (j == 6) : j == 0 || j == 4 ? 2 : 0;
    run(&c);
    if (EMU_WGMMA && c.mode >= REFF8_BLOCKWISE) { /* the TMA's blockwise tiles, forced */
      c.force = BQ__FP8_TMA;
      run(&c);
    }
  }
}

/* sm_90a: small M on the tiles too (forced), and the weight streaming's passes of 16 rows,
   64 columns (with a partial last), K in more slices than its 8 stages */
Test(emulated, streaming_and_forced_tiles) {
  static const int64_t ms[] = {1, 5, 16, 17, 40, 64};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    fcase c = base();
    c.m = ms[i];
    c.n = 64 * (int64_t)(i % 3 + 1) + (i & 1 ? 5 : 0);
    c.k = i == 3 ? 1200 : 208 + 16 * (int64_t)i; /* (multiples of 16: the one-copy path where aligned) */
    c.bias = (int)(i & 1);
    c.mode = (int)((i + 2) % 4);
    c.lds_pad = i == 5 ? 2 : 0;
    c.pdl = i >= 3; /* (the streaming: weights first, then x) */
    c.x_off = i == 4;
    c.lda_pad = i == 2 ? 32 : 0;
    run(&c);
    if (EMU_WGMMA) { /* each of the two tiles (the TMA's where x and w are aligned) */
      c.force = BQ__FP8_WGMMA;
      run(&c);
      c.force = BQ__FP8_TMA;
      run(&c);
    }
  }
}

Test(emulated, small_and_tails) {
  static const int64_t ks[] = {0, 1, 16, 31, 32, 33, 127, 128, 129, 257};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    fcase c = base();
    c.m = 1 + (int64_t)i * 3;
    c.n = 1 + (int64_t)i * 5;
    c.k = ks[i];
    c.bias = (int)(i & 1);
    c.mode = (int)(i % 4);
    run(&c);
  }
}

/* row strides, x and w off the 16-byte grid (the register path), y off its vector grid */
Test(emulated, strides_and_misalignment) {
  for (int i = 0; i < 6; i++) {
    fcase c = base();
    c.m = i & 1 ? 40 : 131;
    c.n = 23 + 37 * i;
    c.k = 144 + 16 * i + (i == 5);
    c.lda_pad = i % 3 == 0 ? 0 : 16 * i + (i == 4);
    c.ldy_pad = i % 2 ? 3 : 8;
    c.x_off = i == 2 || i == 4;
    c.w_off = i == 3;
    c.y_off = i == 1 ? 1 : 0;
    c.bias = 1;
    c.mode = i % 4;
    c.lds_pad = i == 3 ? 5 : i == 2 ? 1 : 0;
    run(&c);
  }
}
