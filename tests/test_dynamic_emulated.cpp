/* tests/test_dynamic_emulated.cpp - kernels_src/dynamic.cu (dynamic quantization per
   token, per group and per tensor) run on the CPU by tests/emulator/cuda_emulator.h
   through the header's own run path, against the CPU reference
   (tests/reference_dynamic.h) bit for bit: data, scales and zero points. A host test, so
   that CI checks the kernel's logic (teams, on-chip rows and the two-pass fallback, the
   shuffle path for groups, the per-tensor partials) on every change; test_gpu_dynamic is
   the real thing. Built once per specialization (tests/meson.build names it; tests/emu_spec.c
   writes the header EMU_SPEC). Outputs are poisoned and compared whole. FP8 storage (e4m3,
   e5m2; symmetric) adds segments of the type's edges (fp8_edge) to the usual data.
   Power-of-two scales (pow2=1, or scale=ue8m0, which implies them): every stored scale is
   checked to be a power of two (or 0, inf, NaN) besides bit for bit; symmetric plans run
   half their cases with args.amax_bound, random, often below the data's amax. Per block
   (bq_dynamic_tiles: B x B tiles, edge tiles partial, each tile on its vector path or
   element by element), MN-major per-group scales (layout=mn: the padded rows' entries are
   never written) and packed UE8M0 (scale=ue8m0x4: each row's bytes past its last group
   written 0) index their parameters by reference.h's ref_scale_index; the scale buffer is
   compared whole, guards and padding included. */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference_dynamic.h"
#include "reference_rotate.h"

#include "emulator/cuda_emulator.h"

/* the specialization: EMU_* and the host's prelude, from tests/emu_spec.c (meson) */
#include EMU_SPEC
namespace emu_dyn {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/dynamic.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_dyn

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <time.h>

#include <vector>


#if EMU_GRAN == BQ_GRAN_TENSOR
static void k0(const void *p) { emu_dyn::bq_dynamic_reduce(*(const bq_dynamic_params *)p); }
static void k1(const void *p) { emu_dyn::bq_dynamic_apply(*(const bq_dynamic_params *)p); }
#elif EMU_GRAN == BQ_GRAN_BLOCK
static void k0(const void *p) { emu_dyn::bq_dynamic_tiles(*(const bq_dynamic_params *)p); }
static void k1(const void *p) { emu_dyn::bq_dynamic_tiles_rows(*(const bq_dynamic_params *)p); }
#else
static void k0(const void *p) { emu_dyn::bq_dynamic(*(const bq_dynamic_params *)p); }
#if EMU_GRAN == BQ_GRAN_TOKEN
static void k1(const void *p) { emu_dyn::bq_dynamic_long(*(const bq_dynamic_params *)p); }
static void k2(const void *p) { emu_dyn::bq_dynamic_staged(*(const bq_dynamic_params *)p); }
#else
static void k1(const void *p) { emu_dyn::bq_dynamic_groups(*(const bq_dynamic_params *)p); }
static void k2(const void *p) { emu_dyn::bq_dynamic_sets(*(const bq_dynamic_params *)p); }
#endif
#endif
static emu_kernel g_last; /* the last kernel launched */
static int g_sms = 132; /* the plan's SMs: fewer make persistent blocks take several tiles */
static void note_kernel(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gx, (void)gy, (void)bx, (void)smem;
  g_last = k;
}
/* the last launch's parameters (per block: fast_groups says whether tiles may take the
   vector path) */
static bq_dynamic_params g_params;
static bq__CUresult note_params(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, bq__CUstream s, void **params, void **extra) {
  memcpy(&g_params, params[0], sizeof g_params);
  return emu_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}
static void init(void) {
  emu_test_init();
  emu_launch_check = note_kernel;
  bq__drv.cuLaunchKernel = note_params;
}
TestSuite(emulated_dynamic, .init = init);

static const bq_dtype T = (bq_dtype)EMU_T, I = (bq_dtype)EMU_I;
static const int X4 = EMU_ST == BQ_UE8M0X4; /* packed UE8M0: the scales are bytes */
/* what the scales' layout depends on (emu_pick_ld) */
static bq_desc layout_desc(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = (bq_granularity)EMU_GRAN;
  d.scale_type = (bq_dtype)EMU_ST;
  d.scale_layout = (bq_scale_layout)EMU_LAYOUT;
  return d;
}


static const int FP8 = I == BQ_E4M3 || I == BQ_E5M2;
static const ref_fp8_format &F8 = ref_fp8_formats[I == BQ_E5M2 ? REF_E5M2 : REF_E4M3];
static double f8_val(int code) { return ref_fp8_to_double((uint8_t)code, I == BQ_E5M2 ? REF_E5M2 : REF_E4M3); }

/* FP8 storage, kind 6: the type's edges times a power of two `mag`. A segment whose largest
   magnitude is max * mag gets the scale mag exactly (s = amax / max), and then x / s is the
   edge itself: ties between neighbours and values just either side (f64: closer than an
   f32 ulp, for round-to-odd), subnormals and half the smallest, exact values, the largest. */
static double fp8_edge(double mag) {
  const double eps = EMU_T == BQ_TYPE_F64 ? 0x1p-40 : 0x1p-20, sign = (rnd() & 1) ? 1.0 : -1.0;
  const double sub = ldexp(1.0, 1 - F8.bias - F8.mbits);
  const int off = (int)(rnd() % 3) - 1;
  switch (rnd() % 8) {
  case 0: return sign * F8.max * mag;
  case 1:
  case 2:
  case 3: {
    const int c = (int)rnd_range(0, F8.max_code - 1);
    return sign * (f8_val(c) + f8_val(c + 1)) / 2 * (1.0 + off * eps) * mag;
  }
  case 4: return sign * ((rnd() & 1) ? sub * (double)rnd_range(1, (1 << F8.mbits) - 1) : sub / 2) * (1.0 + off * eps) * mag;
  case 5: return sign * f8_val((int)rnd_range(0, F8.max_code)) * mag;
  case 6: return sign * F8.max * (1.0 - 0x1p-12 * (double)rnd_range(0, 3)) * mag; /* near the largest */
  default: return (rnd_unit() - 0.5) * F8.max * mag;
  }
}

/* a segment's worth of values: a kind per segment (random, positive, zeros, constant, an
   outlier, NaN and inf sprinkled; FP8 also the type's edges) */
static double value(int kind, double mag) {
  switch (kind) {
  case 6:
  case 7: return fp8_edge(mag);
  case 0: return 0.0;
  case 1: return rnd_unit() * mag;
  case 2: return mag / 3;
  case 3: return rnd() % 97 == 0 ? 1e30 : (rnd_unit() - 0.5) * mag;
  case 4: return rnd() % 13 == 0 ? NAN : rnd() % 17 == 0 ? INFINITY : (rnd_unit() - 0.5) * mag;
  default: return (rnd_unit() - 0.5) * mag;
  }
}

/* a random bound for a symmetric plan (0: none, half the time): a power of two times
   1..2, near the data's magnitudes (2^-12 .. 2^12, FP8 edges times its max), so that it
   is often below a segment's amax; now and then exactly a power of two */
static double random_bound(void) {
  if (EMU_ASYM || rnd() % 2) return 0.0;
  double b = ldexp(1.0 + ((rnd() % 4) ? rnd_unit() : 0.0), (int)rnd_range(-12, 12));
  if (FP8 && rnd() % 3 == 0) b *= F8.max;
  if (rnd() % 17 == 0) b = ldexp(1.0, EMU_T == BQ_TYPE_F64 ? -(int)rnd_range(500, 600) : -(int)rnd_range(85, 110));
  return b;
}

/* a stored scale (index i of scale type st) is a power of two, 0, inf or NaN */
static int stored_pow2(bq_dtype st, const void *s, int64_t i) {
  if (st == BQ_UE8M0) return 1;
  double v = st == BQ_F64 ? ref_load_d(st, s, i) : (double)ref_load_f(st, s, i);
  int e;
  return v != v || v == 0.0 || isinf(v) || frexp(v, &e) == 0.5;
}

/* 1: every element uniform in one range (value kind 5), so that a large segment's codes
   spread over the whole q-range: the mixed data's infinities and far larger magnitudes
   would leave most of its codes equal, which hides an element put in the wrong place */
static int g_tame;
/* the fused rotation's builds (rot=1): the case's block and whether its signs are random */
static int g_rot_n, g_rot_signs;
/* the shared memory a block may opt into, as bq__dynamic_plan_setup and bq__dynamic_setup
   would have found it (0: the default 48 KiB) */
static int64_t g_optin;
static void run(bq_args a, int64_t xtot, int64_t ytot, int64_t nparams, int off_x, int off_y, const char *shape) {
  char what[320];
  a.amax_bound = random_bound();
  if (EMU_ROT) a.rotation_block = g_rot_n, a.seed = g_rot_signs ? rnd() : 0;
  snprintf(what, sizeof what, "seed=0x%llx %s | %s offs %d/%d bound %a rot %d signs %d", (unsigned long long)g_seed,
           EMU_SPEC, shape, off_x, off_y, a.amax_bound, g_rot_n, g_rot_signs);
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = (bq_granularity)EMU_GRAN;
  d.float_type = T;
  d.int_type = I;
  d.qmin = EMU_QMIN;
  d.qmax = EMU_QMAX;
  d.scale_type = (bq_dtype)EMU_ST;
  d.asymmetric = EMU_ASYM;
  d.pow2_scales = EMU_POW2;
  d.scale_layout = (bq_scale_layout)EMU_LAYOUT;
  d.rotation = EMU_ROT;
  d.random_signs = EMU_ROT && g_rot_signs;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  bq__target tg = {90, 0, 0, 0};
  bq__kernel_src ks;
  cr_assert_eq(bq__kernel_for(&d, &tg, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE), "the SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
#if EMU_GRAN == BQ_GRAN_TENSOR
  entry.fn[BQ__DYN_REDUCE] = (bq__CUfunction)k0;
  entry.fn[BQ__DYN_APPLY] = (bq__CUfunction)k1;
#else
  entry.fn[BQ__DYN_ROW] = (bq__CUfunction)k0;
  entry.fn[BQ__DYN_LONG] = (bq__CUfunction)k1;
#if EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP
  entry.fn[BQ__DYN_STAGED] = (bq__CUfunction)k2; /* (per group: BQ__DYN_SETS) */
#endif
#endif
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = g_sms;
  plan.dynamic.smem_max = plan.dynamic.staged_smem = g_optin;

  const bq_dtype st = X4 ? BQ_UE8M0 : (bq_dtype)EMU_ST; /* packed: bytes at byte indices */
  const size_t ts = ref_dtype_size(T), ss = ref_dtype_size(st);
  ref_layout L;
  memset(&L, 0, sizeof L);
  if (EMU_GRAN == BQ_GRAN_GROUP || EMU_GRAN == BQ_GRAN_BLOCK) { /* the parameters' extent in the layout */
    cr_assert_eq(ref_layout_init(&L, &d, &a), 0, "bad case: %s", what);
    nparams = L.n_params;
  }
  const int64_t guard = 19, sguard = X4 ? 20 : guard; /* (packed scales: words, 4-byte aligned) */
  std::vector<unsigned char> xb((size_t)(xtot + 2 * guard + 16) * ts + 64);
  std::vector<unsigned char> yb((size_t)(ytot + 2 * guard + 16) + 64), eyb(yb.size());
  std::vector<unsigned char> sb((size_t)(nparams + 2 * sguard) * ss + 64), esb(sb.size());
  std::vector<int32_t> zb((size_t)(nparams + 2 * guard)), ezb(zb.size());
  unsigned char *x = xb.data() + 64 + (size_t)off_x * ts;
  const int kinds = FP8 ? 8 : 6;
  int kind = g_tame ? 5 : (int)(rnd() % kinds);
  double mag = ldexp(1.0, (int)rnd_range(-10, 10));
  for (int64_t i = 0; i < xtot; i++) {
    if (!g_tame && rnd() % 64 == 0) {
      kind = (int)(rnd() % kinds);
      mag = ldexp(1.0, (int)rnd_range(-10, 10));
      /* now and then a magnitude whose scale needs the reciprocal's power-of-two bracket */
      if (rnd() % 5 == 0) mag = ldexp(1.0, EMU_T == BQ_TYPE_F64 ? -(int)rnd_range(500, 600) : -(int)rnd_range(85, 110));
    }
    store_any(T, x, i, value(kind, mag));
  }
  /* the row padding past each row's last element (x_row_stride > cols) far larger than the
     data, so that a kernel reading it into a reduction shows */
  if (a.x_row_stride > a.cols)
    for (int64_t r = 0; r < a.rows; r++)
      for (int64_t j = a.cols; j < a.x_row_stride; j++) store_any(T, x, r * a.x_row_stride + j, (j & 1) ? 3e4 : -3e4);
  memset(yb.data(), 0xA5, yb.size());
  memset(eyb.data(), 0xA5, eyb.size());
  memset(sb.data(), 0xA5, sb.size());
  memset(esb.data(), 0xA5, esb.size());
  memset(zb.data(), 0xA5, zb.size() * 4);
  memset(ezb.data(), 0xA5, ezb.size() * 4);
  unsigned char *y = yb.data() + 64 + (size_t)(guard + off_y), *ey = eyb.data() + 64 + (size_t)(guard + off_y);
  a.x = x;
  a.y = y;
  a.out_scales = sb.data() + 64 + (size_t)sguard * ss;
  a.out_zero_points = EMU_ASYM ? zb.data() + guard : NULL;
  size_t ws_bytes = 0;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws_bytes), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  std::vector<unsigned char> wsb(ws_bytes + 16);
  void *ws = ws_bytes ? (void *)(((uintptr_t)wsb.data() + 15) & ~(uintptr_t)15) : NULL;
  g_launches = 0;
  cr_assert_eq(bq_plan_run(&plan, &a, ws, ws_bytes, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
#if EMU_GRAN == BQ_GRAN_GROUP /* fast groups of 2 or 4 accesses in bq_dynamic_sets, integer codes' other fast
                                 groups in bq_dynamic_groups, FP8's and every other group in bq_dynamic, and
                                 the host's cap on a fast-groups team, restated: four warps for FP8 from
                                 16-bit data, else two */
  if (g_launches) {
    const int64_t gca = a.group_size * (int64_t)ts / 16; /* (accesses a group, where fast) */
    const emu_kernel want = !g_params.fast_groups        ? (emu_kernel)k0
                            : gca == 2 || gca == 4       ? (emu_kernel)k2
                            : !FP8                       ? (emu_kernel)k1
                                                         : (emu_kernel)k0;
    cr_assert(g_last == want, "fast_groups %d took another kernel | %s", g_params.fast_groups, what);
    if (g_params.fast_groups)
      cr_assert(g_params.tpr <= (FP8 && ref_dtype_size(T) == 2 ? 128 : 64), "a fast-groups team of %d | %s",
                g_params.tpr, what);
  }
#endif
  bq_args r = a;
  std::vector<unsigned char> xrb;
  if (EMU_ROT) { /* the reference: BQ_HADAMARD's forward pass, then dynamic quantize of its output */
    xrb = xb;
    const int64_t xs = a.x_row_stride ? a.x_row_stride : a.cols;
    r.x = xrb.data() + (x - xb.data());
    ref_rotate(T, 0, d.random_signs, a.seed, g_rot_n, a.rows, a.cols, x, xs, (void *)r.x, xs);
  }
  r.y = ey;
  r.out_scales = esb.data() + 64 + (size_t)sguard * ss;
  r.out_zero_points = EMU_ASYM ? ezb.data() + guard : NULL;
  cr_assert_eq(refd_run(&d, &r), 0, "%s", what);
  char msg[2048];
  size_t bad = ref_compare(I, eyb.data(), yb.data(), (int64_t)yb.size(), msg, sizeof msg);
  cr_assert_eq(bad, 0, "data: %zu bytes differ:\n%s| %s", bad, msg, what);
  bad = ref_compare(st, esb.data() + 64, sb.data() + 64, nparams + 2 * sguard, msg, sizeof msg);
  cr_assert_eq(bad, 0, "scales: %zu differ (index from the front guard of %lld):\n%s| %s", bad, (long long)sguard, msg,
               what);
  cr_assert(!memcmp(zb.data(), ezb.data(), zb.size() * 4), "zero points differ | %s", what);
  if (X4) /* each row's bytes past its last group, to its word's end, are 0 */
    for (int64_t r = 0; r < L.S.prows; r++)
      for (int64_t g = L.S.nb; g % 4; g++)
        cr_assert_eq(((unsigned char *)a.out_scales)[ref_scale_index(&L.S, r, g * L.S.B)], 0,
                     "row %lld's byte for group %lld | %s", (long long)r, (long long)g, what);
  if (EMU_POW2)
    for (int64_t i = 0; i < nparams; i++)
      cr_assert(stored_pow2(st, a.out_scales, i) || !memcmp((unsigned char *)a.out_scales + i * ss, "\xA5\xA5\xA5\xA5\xA5\xA5\xA5\xA5", ss),
                "scale %lld is not a power of two | %s", (long long)i, what);
}

#if EMU_GRAN == BQ_GRAN_BLOCK
/* A random per-block shape: half the cases shaped for the vector path (x 16-byte aligned,
   row strides and B whole accesses; the right edge tile whole accesses or not), the others
   anything (B any, strides and offsets odd). Rows and columns mostly not multiples of B. */
static void block_shape(bq_args *a, int rep, int *offx) {
  static const int64_t bs[] = {1, 2, 3, 8, 16, 33, 64, 100, 128, 256};
  const int64_t p = 16 / ref_dtype_size(T);
  const int vec = rep % 2 == 0;
  static const int64_t vm[] = {1, 2, 3, 8, 16};
  const int64_t B = vec ? p * vm[rnd() % 5] : bs[rnd() % 10];
  a->group_size = B;
  a->cols = B * rnd_range(0, 3) + (vec && rnd() % 3 ? p * rnd_range(1, B / p) : rnd_range(1, B));
  a->rows = rnd_range(1, B <= 16 ? 5 * B : 2 * B + 3);
  if (a->rows * a->cols > 60000) a->rows = 60000 / a->cols + 1;
  const int64_t cp = (a->cols + p - 1) / p * p; /* cols rounded up to whole accesses */
  a->x_row_stride = vec ? (rnd() & 1 && a->cols == cp ? 0 : cp + p * rnd_range(0, 2)) : (rnd() & 1 ? 0 : a->cols + rnd_range(0, 9));
  a->y_row_stride = rnd() & 1 ? 0 : a->cols + rnd_range(0, 9);
  const bq_desc d = layout_desc();
  a->group_row_stride = emu_pick_ld(&d, a);
  if (vec) *offx = 0;
}
#endif

#if !EMU_ROT
Test(emulated_dynamic, shapes, .timeout = 600) {
  int n_staged = 0;
  /* per token, 16 more cases of contiguous rows, most of them off the 16-byte grid (each
     row's prologue then differs from the last's) */
  const int reps = EMU_GRAN == BQ_GRAN_TOKEN ? 56 : 40;
  for (int rep = 0; rep < reps; rep++) {
    bq_args a;
    memset(&a, 0, sizeof a);
    char shape[128];
    int64_t xtot, ytot, np;
    int offx = (int)rnd_range(0, 7), offy = (int)rnd_range(0, 7);
#if EMU_GRAN == BQ_GRAN_TENSOR
    static const int64_t ns[] = {1, 2, 7, 16, 17, 257, 4099, 70001};
    /* (f64 data: half the largest, which keeps its run time near the others') */
    a.numel = rep < 8 ? ns[rep] : rnd_range(1, rep < 36 ? 30000 : EMU_T == BQ_TYPE_F64 ? 200000 : 400000);
    xtot = ytot = a.numel;
    np = 1;
    snprintf(shape, sizeof shape, "numel %lld", (long long)a.numel);
#else
    a.rows = rnd_range(1, rep < 30 ? 20 : 3);
#if EMU_GRAN == BQ_GRAN_GROUP
    static const int64_t gs[] = {1, 2, 8, 16, 32, 64, 128, 256, 512, 1024, 7, 100, 4096};
    /* every fourth case groups of 2 or 4 accesses, more of them than a team holds at once,
       on aligned rows: bq_groups_sets, a lane's second group included */
    const int sets = rep % 4 == 1;
    const int64_t g = sets ? (int64_t)(64 / ref_dtype_size(T)) >> (rep / 4 % 2) : gs[rnd() % 13];
    a.cols = g * (sets ? rnd_range(100, 400) : rnd_range(1, g >= 256 ? 3 : 10));
    a.group_size = g;
    a.group_row_stride = rnd() & 1 ? 0 : a.cols / g + rnd_range(1, 3);
    if (EMU_LAYOUT || X4) { /* the layout's own least and default */
      const bq_desc dd = layout_desc();
      a.group_row_stride = emu_pick_ld(&dd, &a);
    }
    np = 0; /* run() takes the layout's extent */
    offx = rnd() & 1 || sets ? 0 : offx; /* aligned rows take the shuffle path */
#elif EMU_GRAN == BQ_GRAN_BLOCK
    block_shape(&a, rep, &offx);
    np = 0;
#else
    /* short rows; past 1024 accesses, rows for bq_dynamic_long, which keeps up to 4096 on
       chip and reads longer ones twice */
    a.cols = rep < 30 || rep >= 40 ? rnd_range(1, 3000) : rnd_range(4100, 40000);
    np = a.rows;
#endif
#if EMU_GRAN != BQ_GRAN_BLOCK /* (block_shape sets its own) */
    a.x_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9) * (rnd() & 1 ? 8 : 1);
    a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
#endif
#if EMU_GRAN == BQ_GRAN_GROUP
    if (sets && a.x_row_stride % 8) a.x_row_stride += 8 - a.x_row_stride % 8; /* (rows on the 16-byte grid) */
#endif
    if (rep >= 40) { /* contiguous rows, a row stride of 0 or the row length */
      a.rows = rnd_range(2, 24);
      a.x_row_stride = rnd() & 1 ? 0 : a.cols;
      a.y_row_stride = rnd() & 1 ? 0 : a.cols;
      np = a.rows;
    }
    emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
#endif
#if EMU_GRAN == BQ_GRAN_TOKEN
    if (rep % 4 == 3) { /* rows the staged kernel may take: whole accesses on the 16-byte grid */
      a.rows = rnd_range(1, 24);
      a.cols = 8 * rnd_range(129, 1024);
      a.x_row_stride = rnd() & 1 ? 0 : a.cols + 8 * rnd_range(0, 3);
      a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
      offx = 0;
      np = a.rows;
      emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
    }
    /* a third of the cases unstaged, a third on one SM (staged rows then loop: a persistent
       block takes several, staging each next one while it works) */
    bq__rows_staged = rep % 3 != 0;
    g_sms = rep % 3 == 1 ? 1 : 132;
    memset(&g_params, 0, sizeof g_params);
#endif
    run(a, xtot, ytot, np, offx, offy, shape);
#if EMU_GRAN == BQ_GRAN_TOKEN
    /* staged restated: f16 and bf16 rows on the 16-byte grid in whole accesses, more than a
       warp's 4 accesses a lane and no more than 1024 accesses (bq_dynamic_long's above),
       and more rows than a wave: an SM holds 1024 / team blocks at 64 registers a thread */
    const int64_t nch = (a.cols + 7) / 8, xs = a.x_row_stride ? a.x_row_stride : a.cols;
    int64_t team = 32;
    while (team * 4 < nch) team *= 2;
    const int staged = bq__rows_staged && ref_dtype_size(T) == 2 && a.cols % 8 == 0 && offx % 8 == 0 &&
                       xs % 8 == 0 && nch > 128 && nch <= 1024 && a.rows > g_sms * (1024 / team);
    cr_assert_eq(g_params.staged, staged, "staged %d | %s", g_params.staged, shape);
    if (staged) cr_assert(g_last == k2, "bq_dynamic_staged was not the kernel launched | %s", shape);
    n_staged += staged;
#endif
  }
#if EMU_GRAN == BQ_GRAN_TOKEN
  cr_assert(ref_dtype_size(T) != 2 || n_staged > 0, "no case took the staged rows");
  bq__rows_staged = 1;
  g_sms = 132;
#endif
}

#endif

#if EMU_GRAN == BQ_GRAN_TOKEN && !EMU_ROT
/* Both per-token entry points by name (bq__dynamic_force_entry), each over short, odd, long
   (past bq_dynamic's on-chip rows and past bq_dynamic_long's), strided and contiguous rows:
   every case must launch the kernel named. */
Test(emulated_dynamic, by_name, .timeout = 600) {
  const int64_t p = 16 / ref_dtype_size(T);
  static const int64_t colsp[] = {1, 7, 64, 1025, 4097, 9000}; /* accesses a row */
  for (int e = 0; e < 2; e++)
    for (int i = 0; i < 6; i++) {
      bq_args a;
      memset(&a, 0, sizeof a);
      a.rows = i < 3 ? 1 + 5 * i : 2;
      a.cols = p * colsp[i] + (i % 2 ? 0 : p / 2);
      a.x_row_stride = i % 3 == 1 ? a.cols + 3 : 0;
      a.y_row_stride = i % 3 == 2 ? a.cols + 5 : 0;
      int64_t xtot, ytot;
      char shape[160], what[200];
      emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
      snprintf(what, sizeof what, "%s: %s", e ? "bq_dynamic_long" : "bq_dynamic", shape);
      bq__dynamic_force_entry = e ? BQ__DYN_LONG : BQ__DYN_ROW;
      g_last = NULL;
      run(a, xtot, ytot, a.rows, i % 2, i % 3 == 0 ? 3 : 0, what);
      bq__dynamic_force_entry = -1;
      cr_assert(g_last == (e ? (emu_kernel)k1 : (emu_kernel)k0), "%s took another kernel", what);
    }
}
#endif

#if EMU_GRAN == BQ_GRAN_TOKEN && EMU_ROT
/* The fused rotation (rot=1 builds): rows on the 16-byte grid in whole blocks of n (2 up to
   32 accesses), random signs half the time, against BQ_HADAMARD's reference then dynamic
   quantize's. Each entry point: bq_dynamic's teams (short rows, and a team of one warp), bq_dynamic_long's
   (rows past 1024 accesses) and, for 16-bit data, bq_dynamic_staged's two slots (rows of
   129 to 1024 accesses, more of them than a wave: a persistent block takes several, on one
   SM); then each again by name. */
Test(emulated_dynamic, rotation, .timeout = 600) {
  const int64_t p = 16 / ref_dtype_size(T);
  int max_shift = 0; /* n = 2 << shift, at most 32 accesses */
  while ((2 << (max_shift + 1)) <= 32 * p) max_shift++;
  int n_staged = 0, n_long = 0, n_long_staged = 0;
  for (int rep = 0; rep < 48; rep++) {
    g_rot_n = 2 << rnd_range(0, max_shift);
    g_rot_signs = (int)(rnd() & 1);
    const int64_t unit = g_rot_n > p ? g_rot_n : p; /* the row: whole accesses and whole blocks */
    const int forced = rep >= 32 ? (int)(rep % 3) : -1; /* BQ__DYN_ROW, BQ__DYN_LONG, BQ__DYN_STAGED */
    if (forced == 2 && ref_dtype_size(T) != 2) continue; /* (staged: 16-bit rows) */
    const int kind = forced == 2 ? 2 : rep % 4; /* 0, 1 short rows; 2 the staged range; 3 long rows */
    bq_args a;
    memset(&a, 0, sizeof a);
    /* (long rows with the opt-in: two slots past 48 KiB, 1537 accesses or more, as only those
       take the opt-in rather than bq_dynamic_long; and more rows than a wave of the staged
       kernel, at most 6 blocks of two slots of 1025 accesses, so that every such case stages) */
    const int optin_long = kind == 3 && rep % 8 != 3;
    int64_t nch;
    if (kind < 2) nch = rnd_range(1, kind ? 128 : 16) * p;
    else if (kind == 2) nch = rnd_range(129, 1024 - 32) * p; /* (whole blocks: at most 1024 accesses) */
    else nch = rnd_range(optin_long ? 1537 : 1025, 2500) * p;
    a.cols = (nch + unit - 1) / unit * unit;
    a.rows = kind == 3 ? (optin_long ? rnd_range(8, 12) : rnd_range(1, 3)) : kind == 2 ? rnd_range(2, 12) : rnd_range(1, 20);
    a.x_row_stride = rnd() & 1 ? 0 : a.cols + p * rnd_range(0, 3);
    a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
    const int entries[3] = {BQ__DYN_ROW, BQ__DYN_LONG, BQ__DYN_STAGED};
    bq__dynamic_force_entry = forced >= 0 ? entries[forced] : -1;
    g_sms = 1;
    /* long rows half the time with the opt-in a GPU gives (then bq_dynamic_staged's two slots
       take them, past 48 KiB), half without (bq_dynamic_long) */
    g_optin = kind == 3 && !optin_long ? 0 : 227 * 1024 - 1024;
    int64_t xtot, ytot;
    char shape[160];
    emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
    memset(&g_params, 0, sizeof g_params);
    g_last = NULL;
    run(a, xtot, ytot, a.rows, 0, (int)rnd_range(0, 7), shape);
    bq__dynamic_force_entry = -1;
    if (forced >= 0) {
      const emu_kernel want[3] = {k0, k1, k2};
      cr_assert(g_last == want[forced], "entry %d by name took another kernel | %s", forced, shape);
    }
    n_staged += g_last == k2;
    n_long += g_last == k1;
    n_long_staged += kind == 3 && g_last == k2;
  }
  g_sms = 132;
  g_rot_n = 0;
  g_optin = 0;
  cr_assert(n_long > 0, "no case took bq_dynamic_long");
  cr_assert(ref_dtype_size(T) != 2 || n_staged > 0, "no case took bq_dynamic_staged");
  cr_assert(ref_dtype_size(T) != 2 || n_long_staged > 0, "no row past 48 KiB took bq_dynamic_staged");
}
#endif

#if EMU_GRAN == BQ_GRAN_BLOCK
/* Named shapes, each with the path its tiles must take (the launch's fast_groups: vector
   accesses where the right edge tile allows): aligned rows with B whole accesses and edge
   tiles partial both ways; the right edge tile off the access grid (scalar there); B not a
   multiple of the access; an odd x row stride and an unaligned x; the whole matrix in one
   tile; a tile larger than the threads' registers (read twice); B of 12 accesses (its rows
   spread over the threads in steps that are not a power of two); rows of more accesses than
   the block has threads (as windows), aligned and off the grid; odd rows of whole 128-row
   tiles, and of tiles past the registers; odd rows of many 128-row tiles and of 40-row
   tiles, a right edge column one element wide, and one of 37 elements (lines inside a row
   that are part of one) in padded rows; B = 1, y unaligned and aligned. */
Test(emulated_dynamic, paths, .timeout = 600) {
  const int64_t p = 16 / ref_dtype_size(T);
  struct {
    int64_t rows, cols, B, xs, ys, grs;
    int offx, offy, fast; /* offy 5: y 8-byte aligned (past a 19-byte guard) */
    const char *name;
  } c[] = {
      {3 * 8 + 5, 4 * 8 * p + 2 * p, 8 * p, 0, 0, 0, 0, 5, 1, "vector, edge tiles partial"},
      {2 * 4 * p + 1, 2 * 4 * p + 3, 4 * p, 10 * p, 0, 5, 0, 5, 1, "vector, right edge tile scalar"},
      {50, 3 * (p + 1) + 2, p + 1, 0, 3 * (p + 1) + 7, 0, 0, 2, 0, "B not whole accesses"},
      {40, 6 * p, 2 * p, 6 * p + 1, 0, 4, 0, 5, 0, "odd x row stride"},
      {20, 6 * p, 2 * p, 0, 0, 0, 3, 5, 0, "x off the 16-byte grid"},
      {37, 5 * p + 3, 64 * p, 8 * p, 0, 0, 0, 1, 1, "the whole matrix in one tile"},
      {300, 64 * p + 3 * p, 64 * p, 0, 0, 0, 0, 5, 1, "tiles past the registers"},
      {70, 3 * 12 * p + 5 * p, 12 * p, 0, 0, 0, 0, 5, 1, "B of 12 accesses (rows a step not a power of two)"},
      {5, 2 * 300 * p + 3 * p, 300 * p, 0, 0, 0, 0, 0, 1, "rows of more accesses than the block has threads"},
      {6, 2 * 300 * p + 5, 300 * p, 2 * 300 * p + 7, 0, 0, 0, 5, 0, "rows of more lines than the block has threads, off the grid"},
      {260, 3 * 128 + 5, 128, 3 * 128 + 5, 0, 0, 0, 5, 0, "odd rows, B = 128"},
      {420, 2 * 200 + 9, 200, 0, 0, 0, 1, 3, 0, "odd rows past the registers, x off the grid"},
      {300, 5 * 128 + 3, 128, 0, 5 * 128 + 19, 0, 0, 5, 0, "odd rows, B = 128, more tiles than the blocks"},
      {90, 4 * 40 + 7, 40, 4 * 40 + 11, 4 * 40 + 19, 0, 0, 5, 0, "odd rows, B = 40, lines a row not dividing the threads"},
      {50, 3 * 40 + 1, 40, 0, 3 * 40 + 9, 0, 0, 5, 0, "B = 40, a right edge column one element wide"},
      {100, 2 * 128 + 37, 128, 2 * 128 + 45, 2 * 128 + 53, 0, 0, 5, 0, "B = 128, a right edge column of 37, padded rows"},
      {7, 9, 1, 0, 11, 0, 0, 2, p == 1, "B = 1"},
      {7, 9, 1, 0, 17, 0, 0, 5, p == 1, "B = 1, y 8-byte aligned"},
  };
  /* each case unstaged and, where its tiles may be, staged (16-bit data, tiles that fit the
     registers: bq_tiles_staged), then staged again on one SM (4 persistent blocks, so a
     block takes several tiles and stages its next while it works), each on mixed data and
     again on uniform data */
  for (int pass = 0; pass < 6; pass++)
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    const int mode = pass % 3;
    g_tame = pass >= 3;
    bq__tiles_staged = mode > 0;
    g_sms = mode == 2 ? 1 : 132;
    bq_args a;
    memset(&a, 0, sizeof a);
    a.rows = c[i].rows;
    a.cols = c[i].cols;
    a.group_size = c[i].B;
    a.x_row_stride = c[i].xs;
    a.y_row_stride = c[i].ys;
    a.group_row_stride = c[i].grs;
    int64_t xtot, ytot;
    char shape[200], what[260];
    emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
    snprintf(what, sizeof what, "%s: %s", c[i].name, shape);
    memset(&g_params, 0, sizeof g_params);
    run(a, xtot, ytot, 0, c[i].offx, c[i].offy, what);
    const int staged = mode > 0 && c[i].fast && p == 8 && (c[i].B / p) * c[i].B <= 2048;
    cr_assert_eq(g_params.fast_groups != 0, c[i].fast, "%s: fast_groups %d", what, g_params.fast_groups);
    cr_assert_eq(g_params.group, c[i].B, "%s", what);
    /* off the grid, every tile goes to bq_dynamic_tiles_rows */
    cr_assert(g_last == (c[i].fast ? (emu_kernel)k0 : (emu_kernel)k1), "%s: %s launched", what,
              c[i].fast ? "bq_dynamic_tiles not" : "bq_dynamic_tiles_rows not");
    cr_assert_eq(g_params.staged, staged, "%s: mode %d, staged %d", what, mode, g_params.staged);
  }
  bq__tiles_staged = 1;
  g_sms = 132;
  g_tame = 0;
}
#endif
