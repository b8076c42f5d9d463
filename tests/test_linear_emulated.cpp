/* tests/test_linear_emulated.cpp - the W8A8 linear kernels of kernels_src/linear.cu, run
   on the CPU by tests/emulator/cuda_emulator.h, through the header's own run path
   (validation, tile choice, parameter packing, launch geometry), against the CPU
   reference bit for bit. A host test: CI has no GPU. It checks the kernels' logic
   (fragment and tile indexing, swizzle, tails, the copy pipeline's waits, split K, the
   epilogue); what only a GPU shows (races, speed, the real instructions) is for
   test_gpu_linear.

   Built once per specialization (EMU_SPEC, below), as SmoothQuantLinear
   or QuantizedLinear plans of that SKU (QuantizedLinear's activations go through
   dynamic.cu, emulated too) with every tile configuration forced in turn, plus the
   weight-sums kernel. Outputs are poisoned and
   compared whole, guards and row gaps included. */
#include "emu_prefix.h" /* parsed here: the precompiled prefix slowed these fibers by a third */
#include "reference_linear.h"

#include "emulator/cuda_emulator.h"

/* The specialization: tests/meson.build names it, tests/emu_spec.c writes the header EMU_SPEC:
   EMU_OUT the output type, EMU_I the activations' int type, EMU_ST the weight scales' type;
   EMU_QL 1 for QuantizedLinear plans, whose activations (type EMU_T) are quantized by
   dynamic.cu per token, EMU_ASYM with zero points; EMU_WGMMA 1 for an sm_90a module, with
   the warpgroup-MMA tiles. Its sections are the preludes bq__build_source writes. */
#include EMU_SPEC
namespace emu_gemm {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/linear.cu"
static int gv_smem(int mt, int64_t m) { return BQ_GV_SMEM(m < 16 * mt ? (int)m : 16 * mt); }
#include "emulator/kernel_undefs.h"
} // namespace emu_gemm
namespace emu_sums {
#define EMU_SECTION 2
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/linear.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_sums
#if EMU_QL
namespace emu_dyn {
#define EMU_SECTION 3
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/dynamic.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_dyn
#endif

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <stddef.h>
#include <time.h>

/* the host's parameter block is the kernel's, field for field */
#define SAME_OFFSET(f) static_assert(offsetof(bq_linear_params, f) == offsetof(bq_linear_params, f), #f)
SAME_OFFSET(a); SAME_OFFSET(w); SAME_OFFSET(y); SAME_OFFSET(a_scales); SAME_OFFSET(a_zps); SAME_OFFSET(w_scales);
SAME_OFFSET(w_sums); SAME_OFFSET(bias); SAME_OFFSET(m); SAME_OFFSET(n); SAME_OFFSET(k); SAME_OFFSET(lda);
SAME_OFFSET(ldy); SAME_OFFSET(a_scale); SAME_OFFSET(a_zp); SAME_OFFSET(flags); SAME_OFFSET(tiles_m);
SAME_OFFSET(tiles_n);

/* cuLaunchKernelEx's structures, as CUDA 12's cuda.h lays them out */
static_assert(offsetof(bq__CUlaunchAttribute, value) == 8 && sizeof(bq__CUlaunchAttribute) == 72, "CUlaunchAttribute");
static_assert(offsetof(bq__CUlaunchConfig, stream) == 32 && offsetof(bq__CUlaunchConfig, attrs) == 40 &&
                  offsetof(bq__CUlaunchConfig, num_attrs) == 48 && sizeof(bq__CUlaunchConfig) == 56,
              "CUlaunchConfig");

/* ---- the launch hook: cuLaunchKernel runs the emulator ---------------------------------------- */
static void k_large(const void *p) { emu_gemm::bq_gemm_large(*(const bq_linear_params *)p); }
static void k_gemv(const void *p) { emu_gemm::bq_gemv(*(const bq_linear_params *)p); }
static void k_gemv32(const void *p) { emu_gemm::bq_gemv32(*(const bq_linear_params *)p); }
static void k_gemv64(const void *p) { emu_gemm::bq_gemv64(*(const bq_linear_params *)p); }
static void k_wgmma(const void *p) { emu_gemm::bq_gemm_wgmma(*(const bq_linear_params *)p); }
static void k_sums(const void *p) { emu_sums::bq_weight_sums(*(const bq_linear_params *)p); }
#if EMU_QL
static void k_dyn(const void *p) { emu_dyn::bq_dynamic(*(const bq_dynamic_params *)p); }
static void k_dyn_long(const void *p) { emu_dyn::bq_dynamic_long(*(const bq_dynamic_params *)p); }
static void k_dyn_staged(const void *p) { emu_dyn::bq_dynamic_staged(*(const bq_dynamic_params *)p); }
#endif
static int64_t g_launch_m; /* the M of the case being run */
static void check_launch(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gx;
  (void)bx;
  cr_assert(gy == 1 || k == k_gemv64, "only weight streaming takes a 2-D grid");
  if (k == k_large) cr_assert_eq(smem, (unsigned)BQ__GEMM_SMEM_LARGE);
  if (k == k_wgmma) cr_assert_eq(smem, (unsigned)BQ__GEMM_SMEM_WGMMA);
  /* weight streaming: the shared memory its kernel needs for this M */
  if (k == k_gemv) cr_assert_eq(smem, (unsigned)emu_gemm::gv_smem(1, g_launch_m));
  if (k == k_gemv32) cr_assert_eq(smem, (unsigned)emu_gemm::gv_smem(2, g_launch_m));
  if (k == k_gemv64) cr_assert_eq(smem, (unsigned)emu_gemm::gv_smem(4, g_launch_m));
}

static void init(void) {
  emu_test_init();
  emu_launch_check = check_launch;
  emu_a_unsigned = EMU_I == BQ_TYPE_U8;
}
TestSuite(emulated, .init = init);

/* the specialization this binary was built for */
static const bq_dtype OUT = (bq_dtype)EMU_OUT, ST = (bq_dtype)EMU_ST, AT = (bq_dtype)EMU_I, T = (bq_dtype)EMU_T;


typedef struct ecase {
  bq_granularity gran;
  int asym, bias, extreme, force;
  int64_t m, n, k, lda_pad, ldy_pad;
  int x_off, w_off, y_off;
} ecase;

static void run(const ecase *c0) {
  ecase cc = *c0;
  if (EMU_QL) cc.asym = EMU_ASYM; /* the dynamic kernel is built for one */
  const ecase *c = &cc;
  g_launch_m = c->m;
  char what[256];
  snprintf(what, sizeof what, "seed=0x%llx out=%s st=%s a=%s %s asym=%d bias=%d M=%lld N=%lld K=%lld lda+%lld ldy+%lld "
           "offs %d/%d/%d force=%d extreme=%d", (unsigned long long)g_seed, ref_dtype_name(OUT), ref_dtype_name(ST),
           ref_dtype_name(AT), c->gran == BQ_PER_TOKEN ? "per_token" : "per_tensor", c->asym, c->bias, (long long)c->m,
           (long long)c->n, (long long)c->k, (long long)c->lda_pad, (long long)c->ldy_pad, c->x_off, c->w_off, c->y_off,
           c->force, c->extreme);
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = EMU_QL ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
  d.granularity = EMU_QL ? BQ_PER_TOKEN : c->gran;
  d.float_type = T;
  d.out_type = OUT;
  d.scale_type = ST;
  d.int_type = AT;
  d.asymmetric = c->asym;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  /* this binary's kernels must be the ones the plan's SKU names */
  bq__kernel_src ks;
  bq__target tg = {90, 0, EMU_WGMMA, 0};
  cr_assert_eq(bq__kernel_for(&d, &tg, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE), "the SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
  entry.fn[BQ__GEMM_LARGE] = (bq__CUfunction)k_large;
  entry.fn[BQ__GEMV] = (bq__CUfunction)k_gemv;
  entry.fn[BQ__GEMV32] = (bq__CUfunction)k_gemv32;
  entry.fn[BQ__GEMV64] = (bq__CUfunction)k_gemv64;
  entry.fn[BQ__GEMM_WGMMA] = (bq__CUfunction)k_wgmma;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = 132;
  plan.linear.wgmma = EMU_WGMMA;
  plan.linear.pdl = EMU_QL; /* QuantizedLinear on sm_90: weight streaming overlaps the activations' kernel */
  bq__linear_force_config = c->force;
#if EMU_QL
  /* the activations' per-token dynamic quantize plan, on dynamic.cu */
  bq_desc qd;
  memset(&qd, 0, sizeof qd);
  qd.op = BQ_DYNAMIC_QUANTIZE;
  qd.granularity = BQ_PER_TOKEN;
  qd.float_type = T;
  qd.int_type = AT;
  qd.scale_type = BQ_F32;
  qd.asymmetric = c->asym;
  bq_plan sub;
  cr_assert_eq(bq__plan_init(&qd, &sub), BQ_SUCCESS, "%s", bq_last_error());
  const bq__target tq = {90, 0, 0, 0}; /* dynamic quantize has no sm_90a module */
  cr_assert_eq(bq__kernel_for(&qd, &tq, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE_ACT), "the dynamic SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry sub_entry;
  memset(&sub_entry, 0, sizeof sub_entry);
  sub_entry.fn[BQ__DYN_ROW] = (bq__CUfunction)k_dyn;
  sub_entry.fn[BQ__DYN_LONG] = (bq__CUfunction)k_dyn_long;
  sub_entry.fn[BQ__DYN_STAGED] = (bq__CUfunction)k_dyn_staged;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) sub.mod[e] = &sub_entry;
  sub.num_sms = 132;
  plan.sub = &sub;
#endif

  const int qmin = AT == BQ_S8 ? -128 : 0, qmax = AT == BQ_S8 ? 127 : 255;
  const int64_t M = c->m, N = c->n, K = c->k, lda = K + c->lda_pad, ldy = N + c->ldy_pad;
  const size_t ys = ref_dtype_size(OUT), ss = ref_dtype_size(ST);
  const int64_t guard = 24, ytot = guard + M * ldy + guard; /* y stays 8-element aligned: y8 stores */
  std::vector<unsigned char> xb((size_t)(M * lda) + 64), wb((size_t)(N * K) + 64), wsc((size_t)N * ss + 8),
      bias((size_t)N * ys + 8), sa((size_t)M * ss + 8), yb((size_t)ytot * ys + 64), exp((size_t)ytot * ys);
  std::vector<int32_t> zps((size_t)M + 1), wsum((size_t)N + 1);
  /* 16-byte (y: 64-byte) aligned storage plus the case's offsets */
  unsigned char *x = (unsigned char *)(((uintptr_t)xb.data() + 15) & ~(uintptr_t)15) + c->x_off;
  int8_t *w = (int8_t *)(((uintptr_t)wb.data() + 15) & ~(uintptr_t)15) + c->w_off;
  unsigned char *y0 = (unsigned char *)(((uintptr_t)yb.data() + 63) & ~(uintptr_t)63) + (size_t)c->y_off * ys;
  const size_t xs = EMU_QL ? ref_dtype_size(T) : 1;
  if (EMU_QL) xb.resize((size_t)(M * lda) * xs + 64);
  x = (unsigned char *)(((uintptr_t)xb.data() + 15) & ~(uintptr_t)15) + (size_t)c->x_off * xs;
  for (int64_t r = 0; r < M; r++) {
    double mag = ldexp(1.0, (int)rnd_range(-6, 6));
    int kind = (int)(rnd() % 6); /* 0: zeros, 1: positive, else signed */
    for (int64_t j = 0; j < lda; j++) {
      int64_t i = r * lda + j;
      if (EMU_QL)
        store_any(T, x, i, kind == 0 ? 0.0 : kind == 1 ? rnd_unit() * mag : (rnd_unit() - 0.5) * mag);
      else
        ref_store_int(AT, x, i, c->extreme ? (AT == BQ_S8 ? qmin : qmax) : (int32_t)rnd_range(qmin, qmax));
    }
  }
  for (int64_t i = 0; i < N * K; i++) w[i] = c->extreme ? (int8_t)-128 : (int8_t)rnd_range(-128, 127);
  for (int64_t i = 0; i < N; i++) store_any(ST, wsc.data(), i, ldexp(1.0 + rnd_unit(), (int)rnd_range(-10, -4)));
  for (int64_t i = 0; i < N; i++) store_any(OUT, bias.data(), i, (rnd_unit() - 0.5) * 8);
  for (int64_t i = 0; i < M; i++) {
    store_any(ST, sa.data(), i, ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, -4)));
    zps[(size_t)i] = c->asym ? (int32_t)rnd_range(qmin, qmax) : 0;
  }
  refl_weight_sums(w, N, K, wsum.data());
  double sa_scalar = ldexp(1.0 + rnd_unit(), -9);
  int32_t zp_scalar = c->asym ? (int32_t)rnd_range(qmin, qmax) : 0;

  /* the weight sums through the emulated helper kernel */
  if (c->asym) {
    bq_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.op = BQ_LINEAR_WEIGHT_SUMS;
    bq_plan sp;
    cr_assert_eq(bq__plan_init(&sd, &sp), BQ_SUCCESS);
    bq__entry se;
    memset(&se, 0, sizeof se);
    se.fn[0] = (bq__CUfunction)k_sums;
    for (int e = 0; e < BQ__MAX_KERNELS; e++) sp.mod[e] = &se;
    std::vector<int32_t> got((size_t)N + 1, (int32_t)0xA5A5A5A5);
    bq_args sa_args;
    memset(&sa_args, 0, sizeof sa_args);
    sa_args.w = w;
    sa_args.n = N;
    sa_args.cols = K;
    sa_args.y = got.data();
    cr_assert_eq(bq_plan_run(&sp, &sa_args, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
    for (int64_t i = 0; i < N; i++) cr_assert_eq(got[(size_t)i], wsum[(size_t)i], "weight sum %lld | %s", (long long)i, what);
    cr_assert_eq(got[(size_t)N], (int32_t)0xA5A5A5A5, "weight sums wrote past N | %s", what);
  }

  memset(yb.data(), 0xA5, yb.size());
  memset(exp.data(), 0xA5, exp.size());
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
  a.w_scales = wsc.data();
  a.bias = c->bias ? bias.data() : NULL;
  a.w_sums = c->asym ? wsum.data() : NULL;
  if (c->gran == BQ_PER_TOKEN) {
    a.scales = sa.data();
    a.zero_points = c->asym ? zps.data() : NULL;
  } else {
    a.scale = sa_scalar;
    a.zero_point = zp_scalar;
  }
  if (K == 0) { /* y = bias: nothing else may be read, so pass nothing else */
    a.x = NULL;
    a.w = NULL;
    a.scales = NULL;
    a.zero_points = NULL;
    a.w_sums = NULL;
  }

  refl_problem P;
  memset(&P, 0, sizeof P);
  P.m = M;
  P.n = N;
  P.k = K;
  P.lda = lda;
  P.ldy = ldy;
  P.a_type = AT;
  P.a = x;
  P.w = w;
  P.scale_type = ST;
  P.w_scales = wsc.data();
  P.sa_row = c->gran == BQ_PER_TOKEN;
  P.sa = sa.data();
  P.sa_scalar = OUT == BQ_F64 ? sa_scalar : (double)(float)sa_scalar;
  P.zp_mode = !c->asym ? 0 : c->gran == BQ_PER_TOKEN ? 2 : 1;
  P.zps = zps.data();
  P.zp_scalar = zp_scalar;
  std::vector<unsigned char> aq((size_t)(M * K) + 1);
  std::vector<float> qs((size_t)M + 1);
  std::vector<int32_t> qz((size_t)M + 1);
  if (EMU_QL) /* the activations through the dynamic reference, then the GEMM's */
    cr_assert_eq(refl_quantize_activations(&P, T, AT, 0, 0, c->asym, x, lda, aq.data(), qs.data(), qz.data()), 0, "%s",
                 what);
  P.wsum = wsum.data();
  P.out_type = OUT;
  P.bias = c->bias ? bias.data() : NULL;
  P.y = exp.data() + (size_t)guard * ys;
  cr_assert_eq(refl_gemm(&P), 0, "%s", what);
  /* twice: asynchronous copies landing as late as allowed (at their wait: catches reads
     before the wait) and as early as possible (at issue: catches a slice refilled while a
     wgmma may still read it) */
  for (int eager = 0; eager < 2; eager++) {
    emu.eager_copies = eager;
    memset(yb.data(), 0xA5, yb.size());
    g_launches = 0;
    g_overlapped = 0;
    size_t ws_bytes = 0;
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws_bytes), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
    std::vector<unsigned char> wsb(ws_bytes + 16, 0x5A);
    void *ws = ws_bytes ? (void *)(((uintptr_t)wsb.data() + 15) & ~(uintptr_t)15) : NULL;
    cr_assert_eq(bq_plan_run(&plan, &a, ws, ws_bytes, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
    cr_assert_eq(g_launches, M && N ? 1 + (EMU_QL && K > 0) : 0, "%s", what);
    /* programmatic serialization: exactly QuantizedLinear's weight streaming after its
       activations' kernel */
    const int cfg = bq__linear_config(&plan, M, N);
    cr_assert_eq(g_overlapped, M && N && EMU_QL && K > 0 && bq__gemv_rows(cfg) ? 1 : 0, "%s", what);
    char msg[2048];
    size_t bad = ref_compare(OUT, exp.data(), y0, ytot, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%zu of %lld elements differ (from the front guard of %lld; copies landing %s):\n%s| %s",
                 bad, (long long)ytot, (long long)guard, eager ? "at issue" : "at their wait", msg, what);
  }
  emu.eager_copies = 0;
  bq__linear_force_config = -1;
}

static ecase base(void) {
  ecase c;
  memset(&c, 0, sizeof c);
  c.gran = BQ_PER_TOKEN;
  c.force = -1;
  return c;
}

/* each tile configuration: two tiles in M and N where the tile allows, K with and without
   a tail, the copy path (aligned) and the register path (odd K: misaligned weight rows) */
Test(emulated, tile_configurations, .timeout = 600) {
  static const int cfgs[5] = {BQ__GEMM_LARGE, BQ__GEMV, BQ__GEMV32, BQ__GEMV64, BQ__GEMM_WGMMA};
  /* the last: more K slices than stages (tiles: 128 bytes, 3 or 4 stages) */
  static const int64_t ks[4] = {384, 300, 77, 1040};
  for (int i = 0; i < 4 + EMU_WGMMA; i++)
    for (int j = 0; j < 4; j++) {
      ecase c = base();
      c.force = cfgs[i];
      c.m = bq__gemv_rows(cfgs[i]) ? bq__gemv_rows(cfgs[i]) - 5 * j : 129 + j;
      /* tiles: N = 264 (j = 0) takes the 8-element stores, N odd the pairs and singles */
      c.n = cfgs[i] == BQ__GEMM_LARGE || cfgs[i] == BQ__GEMM_WGMMA ? (j ? 257 + 2 * j : 264) : 33 + j;
      /* weight streaming: K in several 512-byte tiles more than its 2 to 4 stages, aligned */
      c.k = (j == 0 || j == 3) && bq__gemv_rows(cfgs[i]) ? 4096 + 1040 - 528 * (j == 0) : ks[j];
      c.bias = j != 1;
      c.asym = j >= 2;
      c.gran = j == 1 ? BQ_PER_TENSOR : BQ_PER_TOKEN;
      run(&c);
    }
}

Test(emulated, small_m_values) {
  static const int64_t ms[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 32, 33, 40, 63, 64, 65};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    ecase c = base();
    c.m = ms[i];
    c.n = 17 + (int64_t)i;
    c.k = 64 * (int64_t)(i + 1) + (int64_t)(i % 3) * 16;
    c.bias = (int)(i & 1);
    c.asym = (int)((i >> 1) & 1);
    run(&c);
  }
}

/* weight streaming in several passes of 64 rows (M up to 256 when the tiles would not
   fill the GPU), and the automatic choice around the boundaries */
Test(emulated, streaming_passes) {
  static const int64_t ms[] = {65, 100, 128, 129, 200, 256, 257};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    ecase c = base();
    c.m = ms[i];
    c.n = 40 + (int64_t)i;
    c.k = i & 1 ? 192 : 173;
    c.bias = 1;
    c.asym = (int)(i & 1);
    run(&c);
    c.force = BQ__GEMV64;
    run(&c);
  }
}

Test(emulated, k_tails_and_zero) {
  static const int64_t ks[] = {0, 1, 15, 16, 17, 31, 32, 33, 127, 128, 129, 255, 257};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    for (int f = 0; f < 2; f++) {
      ecase c = base();
      c.force = f ? BQ__GEMM_LARGE : -1;
      c.m = f ? 20 : 5;
      c.n = 11;
      c.k = ks[i];
      c.bias = (int)(i & 1);
      c.asym = (int)(i % 3 == 0);
      run(&c);
    }
}

Test(emulated, strides_and_misalignment) {
  for (int i = 0; i < 8; i++) {
    ecase c = base();
    c.force = i % 3 == 0 ? BQ__GEMV : i % 3 == 1 ? BQ__GEMM_LARGE : -1;
    c.m = c.force == BQ__GEMV ? 9 : i & 1 ? 40 : 70;
    c.n = 23 + i;
    c.k = i & 1 ? 96 : 131;
    c.lda_pad = i & 2 ? 16 : 5;
    c.ldy_pad = 1 + i;
    c.x_off = i & 4 ? 3 : 0;
    c.w_off = i & 1 ? 0 : 7;
    c.y_off = i & 2;
    c.bias = 1;
    c.asym = i & 1;
    c.gran = i & 4 ? BQ_PER_TENSOR : BQ_PER_TOKEN;
    run(&c);
  }
}

Test(emulated, extreme_values) {
  for (int f = 0; f < 2; f++) {
    ecase c = base();
    c.extreme = 1;
    c.force = f ? BQ__GEMM_LARGE : BQ__GEMV;
    c.m = f ? 17 : 3;
    c.n = 9;
    c.k = 4096 + 16;
    c.asym = f;
    run(&c);
  }
}

/* K at the validation bound, largest |acc| (weight streaming: the tiles would take minutes) */
Test(emulated, k_at_overflow_bound) {
  for (int asym = 0; asym < 2; asym++) {
    ecase c = base();
    c.extreme = 1;
    c.asym = asym;
    c.m = 3;
    c.n = 5;
    c.k = AT == BQ_S8 && !(EMU_QL ? EMU_ASYM : asym) ? 131071 : 65793;
    run(&c);
  }
}

Test(emulated, zero_sizes) {
  ecase c = base();
  c.m = 0;
  c.n = 5;
  c.k = 10;
  run(&c);
  c.m = 4;
  c.n = 0;
  run(&c);
}
