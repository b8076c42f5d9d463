/* tests/test_affine_emulated.cpp - kernels_src/affine.cu (quantize, dequantize, fake
   quantize) run on the CPU by tests/emulator/cuda_emulator.h through the header's own run
   path, against the CPU reference (tests/reference.h) bit for bit. A host test, so that
   CI checks the affine kernel's logic (prologue, vector body, tail, parameter lookup per
   granularity, 32- and 64-bit indexing) on every change; test_gpu_affine is the real
   thing. Built once per specialization (tests/meson.build names it; tests/emu_spec.c writes
   the header EMU_SPEC: its EMU_* macros and bq__build_source's prelude). Outputs are
   poisoned and compared whole: guards, row gaps and padded parameter rows included. The
   test `shapes` runs random shapes through the host's own choice of kernel; `by_name` makes
   the host take each entry point in turn (bq__affine_force_entry) over shapes it serves.
   FP8 storage (e4m3, e5m2) passes no zero points, dequantizes random codes (all 256) and
   quantizes data that adds the type's edges (fp8_value) to the usual values. Per block
   (B x B tiles, edge tiles partial), MN-major per-group scales (layout=mn) and packed UE8M0
   scales (scale=ue8m0x4, no zero points) run the same tests with their own scale indexing
   (reference.h's ref_scale_index) and leading dimensions, default or larger. */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference_sr.h"
#include "reference_rotate.h"

#include "emulator/cuda_emulator.h"

/* the specialization: EMU_* and the host's prelude, from tests/emu_spec.c (meson) */
#include EMU_SPEC
namespace emu_aff {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/affine.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_aff

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <time.h>

#include <vector>


static void k_affine(const void *p) { emu_aff::bq_affine(*(const bq_affine_params *)p); }
/* per group and per block: scales (and zero points) indexed as a matrix (ref_scale_index) */
#define EMU_GROUPED (EMU_GRAN == BQ_GRAN_GROUP || EMU_GRAN == BQ_GRAN_BLOCK)
static const int X4 = EMU_ST == BQ_UE8M0X4; /* packed UE8M0 scales: no zero points */
#if EMU_GRAN == BQ_GRAN_CHANNEL || EMU_GROUPED
static void k_affine_odd(const void *p) { emu_aff::bq_affine_odd(*(const bq_affine_params *)p); }
#endif
#if EMU_GRAN != BQ_GRAN_TENSOR
static void k_affine_blocks(const void *p) { emu_aff::bq_affine_blocks(*(const bq_affine_params *)p); }
static void k_affine_narrow(const void *p) { emu_aff::bq_affine_narrow(*(const bq_affine_params *)p); }
#endif
#if (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP)
static void k_affine_flat(const void *p) { emu_aff::bq_affine_flat(*(const bq_affine_params *)p); }
#endif
#if EMU_GRAN == BQ_GRAN_CHANNEL
static void k_affine_cols(const void *p) { emu_aff::bq_affine_cols(*(const bq_affine_params *)p); }
#endif
/* fake quantize per tensor and per channel keep a mask (args.mask, bq_affine_mask) */
#define EMU_MASK (EMU_OP == BQ_OP_FAKE_QUANTIZE && (EMU_GRAN == BQ_GRAN_TENSOR || EMU_GRAN == BQ_GRAN_CHANNEL) && !EMU_ROT)
#if EMU_MASK
static void k_affine_mask(const void *p) { emu_aff::bq_affine_mask(*(const bq_affine_params *)p); }
#endif
/* forward quantize and dequantize per tensor, per token, per group and per block have
   bq_affine_lean (per block its parameter block carries the row's geometry after the others') */
#define EMU_HAS_LEAN (!EMU_BWD && EMU_OP != BQ_OP_FAKE_QUANTIZE && EMU_GRAN != BQ_GRAN_CHANNEL)
#if EMU_GRAN == BQ_GRAN_BLOCK
typedef bq_lean_block_params emu_lean_params;
typedef bq_pair_block_params emu_pair_params;
#else
typedef bq_lean_params emu_lean_params;
typedef bq_pair_params emu_pair_params;
#endif
#if EMU_HAS_LEAN
static void k_affine_lean(const void *p) { emu_aff::bq_affine_lean(*(const emu_lean_params *)p); }
#endif
/* and of those, quantize from 16-bit data has bq_affine_pair (but per tensor) */
#define EMU_HAS_PAIR (EMU_HAS_LEAN && EMU_OP == BQ_OP_QUANTIZE && EMU_GRAN != BQ_GRAN_TENSOR && \
                      (EMU_T == BQ_TYPE_F16 || EMU_T == BQ_TYPE_BF16))
#if EMU_HAS_PAIR
static void k_affine_pair(const void *p) { emu_aff::bq_affine_pair(*(const emu_pair_params *)p); }
#endif
/* stochastic rounding (round=sr): quantize and fake quantize forward take bq_affine_sr alone; so
   do quantize, dequantize and fake quantize (either direction) with the fused rotation (rot=1) */
#if EMU_SR || EMU_ROT
static void k_affine_sr(const void *p) { emu_aff::bq_affine_sr(*(const bq_affine_sr_params *)p); }
#endif
static int g_zps = -1; /* zero points: -1 at random, 0 none, 1 given (where the type takes them) */
/* launches of the channel-innermost kernel, of bq_affine_odd, bq_affine, bq_affine_blocks,
   bq_affine_flat and bq_affine_narrow */
static int g_cols, g_odd, g_even, g_blocks, g_flat, g_narrow, g_lean, g_pair;
static emu_kernel g_last; /* the kernel the last case launched */
static void count_kernels(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gx, (void)gy, (void)bx, (void)smem;
  g_last = k;
#if EMU_GRAN == BQ_GRAN_CHANNEL
  g_cols += k == k_affine_cols;
#endif
#if EMU_GRAN == BQ_GRAN_CHANNEL || EMU_GROUPED
  g_odd += k == k_affine_odd;
#endif
#if EMU_GRAN != BQ_GRAN_TENSOR
  g_blocks += k == k_affine_blocks;
  g_narrow += k == k_affine_narrow;
#endif
#if (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP)
  g_flat += k == k_affine_flat;
#endif
#if EMU_HAS_LEAN
  g_lean += k == k_affine_lean;
#endif
#if EMU_HAS_PAIR
  g_pair += k == k_affine_pair;
#endif
  g_even += k == k_affine;
#if EMU_SR || EMU_ROT
  cr_assert(k == k_affine_sr, "stochastic rounding or the rotation launched another kernel");
#endif
}
static void init(void) {
  emu_test_init();
  emu_launch_check = count_kernels;
}
TestSuite(emulated_affine, .init = init);
static int g_cases;
static int g_num_sms = 132; /* 1 makes rows of several tiles into one item (affine.cu's tpw) */
/* a third of the scales 2^30 to 2^60: neighbouring groups whose windows of bq_div_near (|dy|
   within |s| 2^+-96) differ, so that bq_affine_flat must take their intersection */
static int g_wide_scales;

static const bq_dtype T = (bq_dtype)EMU_T, I = (bq_dtype)EMU_I;
/* the fused rotation's builds (rot=1): the case's block and whether its signs are random */
static int g_rot_n, g_rot_signs;

static bq_desc the_desc(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = (bq_op)EMU_OP;
  d.direction = EMU_BWD ? BQ_BACKWARD : BQ_FORWARD;
  d.granularity = (bq_granularity)EMU_GRAN;
  d.float_type = T;
  d.int_type = I;
  d.qmin = EMU_QMIN;
  d.qmax = EMU_QMAX;
  d.scale_type = (bq_dtype)EMU_ST;
  d.scale_layout = (bq_scale_layout)EMU_LAYOUT;
  d.rounding = EMU_SR ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d.rotation = EMU_ROT;
  d.random_signs = EMU_ROT && g_rot_signs;
  return d;
}

/* per group and per block: a leading dimension for the scales (emu_pick_ld) */
static int64_t pick_ld(const bq_args &a) {
  const bq_desc d = the_desc();
  return EMU_GROUPED ? emu_pick_ld(&d, &a) : 0;
}

static const int FP8 = I == BQ_E4M3 || I == BQ_E5M2;
static const ref_fp8_format &F8 = ref_fp8_formats[I == BQ_E5M2 ? REF_E5M2 : REF_E4M3];
static double f8_val(int code) { return ref_fp8_to_double((uint8_t)code, I == BQ_E5M2 ? REF_E5M2 : REF_E4M3); }

/* FP8 storage: x / s at the type's edges, for x = v * s (a power-of-two s makes v the
   quotient exactly; other scales move it off by an ulp or so): ties between neighbours and
   values just either side of them (f64: by less than an f32 ulp, which round-to-odd into
   f32 must keep off the tie), the largest finite value and the tie above it (saturation,
   and the backward mask's edge), subnormals and half the smallest, exact values */
static double fp8_value(double s) {
  const double eps = EMU_T == BQ_TYPE_F64 ? 0x1p-40 : 0x1p-20, sign = (rnd() & 1) ? 1.0 : -1.0;
  const double quantum_max = ldexp(1.0, (int)log2(F8.max) - F8.mbits); /* the spacing at max */
  const double sub = ldexp(1.0, 1 - F8.bias - F8.mbits);                 /* the smallest subnormal */
  switch (rnd() % 16) {
  case 0: return NAN;
  case 1: return (rnd() & 1) ? INFINITY : -INFINITY;
  case 2: return 0.0 * sign;
  case 3:
  case 4:
  case 5: { /* a tie between neighbours, or just off it */
    const int c = (int)rnd_range(0, F8.max_code - 1);
    const double mid = (f8_val(c) + f8_val(c + 1)) / 2;
    const int off = (int)(rnd() % 3) - 1;
    return sign * mid * (1.0 + off * eps) * s;
  }
  case 6: { /* the saturation boundary */
    static const double at[] = {0.0, 0.5, 1.0, -0.5, 2.0};
    const double v = F8.max + at[rnd() % 5] * quantum_max;
    const int off = (int)(rnd() % 3) - 1;
    return sign * v * (1.0 + off * eps) * s;
  }
  case 7: { /* subnormals, half the smallest (a tie with zero) and just off it */
    const double v = (rnd() & 1) ? sub * (double)rnd_range(1, (1 << F8.mbits) - 1) : sub / 2;
    const int off = (int)(rnd() % 3) - 1;
    return sign * v * (1.0 + off * eps) * s;
  }
  case 8: return sign * f8_val((int)rnd_range(0, F8.max_code)) * s; /* exact */
  case 9: return (rnd_unit() - 0.5) * 1e30;
  default: return (rnd_unit() - 0.5) * ldexp(1.0, (int)rnd_range(-20, (int)log2(F8.max) + 3)) * s;
  }
}

/* Per tensor, the backward mask's interval (x / s rounds into the q-range; FP8: |x / s| at most
   the largest finite) has its ends near g_edge_lo and g_edge_hi (set before x is drawn): values a
   few ulps of the float type either side of them, where an interval found an ulp off fails */
static int g_edge;
static double g_edge_lo, g_edge_hi;
static double t_step(double v, int k) { /* v on T's grid (normal range), then k ulps of T away */
  const int mb = EMU_T == BQ_TYPE_BF16 ? 8 : EMU_T == BQ_TYPE_F16 ? 11 : EMU_T == BQ_TYPE_F32 ? 24 : 53;
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  (void)frexp(v, &e);
  const double ulp = ldexp(1.0, e - mb);
  return (nearbyint(v / ulp) + k) * ulp;
}

/* a float value: mostly moderate, sometimes a tie of x / s, a special or a huge one */
static double value(double s) {
  if (g_edge && rnd() % 4 == 0) return t_step((rnd() & 1) ? g_edge_hi : g_edge_lo, (int)rnd_range(-3, 3));
  if (FP8) return fp8_value(s);
  switch (rnd() % 16) {
  case 0: return NAN;
  case 1: return (rnd() & 1) ? INFINITY : -INFINITY;
  case 2: return 0.0 * ((rnd() & 1) ? 1 : -1);
  case 3: return (double)(rnd_range(-300, 300)) * s + 0.5 * s; /* a tie when s is a power of two */
  case 4: return (rnd_unit() - 0.5) * 1e30;
  default: return (rnd_unit() - 0.5) * 600.0 * s;
  }
}

/* a gradient: mostly moderate, sometimes zero, subnormal, huge or special (dy / s leaves
   the fast division path on those) */
static double grad_value(void) {
  switch (rnd() % 16) {
  case 0: return 0.0 * ((rnd() & 1) ? 1 : -1);
  case 1: /* tiny: f64's and f32's ends of the range (f32 quantize backward: below the window of
             bq_div_near, |dy| >= 2^-96) */
    return ldexp(rnd_unit() + 0.5, -(int)(EMU_T == BQ_TYPE_F64 ? rnd_range(960, 1070) : rnd_range(80, 150))) *
           ((rnd() & 1) ? 1 : -1);
  case 2: return (rnd_unit() - 0.5) * (EMU_T == BQ_TYPE_F64 ? 1e300 : (rnd() & 1) ? 1e38 : 1e30);
  case 3: return (rnd() & 1) ? NAN : INFINITY;
  default: return (rnd_unit() - 0.5) * 8;
  }
}

/* one case: the shape in `a` (host buffers are made here), offsets in elements */
static void run(bq_args a, int64_t xtot, int64_t ytot, int64_t nparams, int off_x, int off_y, const char *shape) {
  char what[256];
  snprintf(what, sizeof what, "seed=0x%llx %s | %s offs %d/%d", (unsigned long long)g_seed, EMU_SPEC, shape,
           off_x, off_y);
  bq_desc d = the_desc();
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  bq__target tg = {90, 0, 0, 0};
  bq__kernel_src ks;
  cr_assert_eq(bq__kernel_for(&d, &tg, &ks), BQ_SUCCESS);
  cr_assert(strstr(ks.source.p, EMU_PRELUDE), "the SKU's prelude differs from this build's: %s", what);
  free(ks.source.p);
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
  entry.fn[BQ__AFFINE_ROW] = (bq__CUfunction)k_affine;
#if EMU_GRAN == BQ_GRAN_CHANNEL || EMU_GROUPED
  /* Both row kernels are right on every shape (bq_affine redoes straddling accesses element
     by element): half the cases swap them, so each runs on aligned and unaligned shapes.
     Which half: the top bit of the case's number times 2^32 / golden ratio, a sequence
     balanced along every arithmetic progression of cases (the shapes follow the case
     number modulo 3, 4 and 8), so that both kernels get their share of every kind of
     shape, seed after seed. */
  static unsigned ncase;
  const int swap = bq__affine_force_entry < 0 && (int)((ncase++ * 0x9E3779B9u) >> 31); /* by_name: none */
  entry.fn[BQ__AFFINE_ROW] = (bq__CUfunction)(swap ? k_affine_odd : k_affine);
  entry.fn[BQ__AFFINE_ODD] = (bq__CUfunction)(swap ? k_affine : k_affine_odd);
  entry.fn[BQ__AFFINE_BLOCKS] = (bq__CUfunction)k_affine_blocks; /* where no access straddles */
  entry.fn[BQ__AFFINE_NARROW] = (bq__CUfunction)k_affine_narrow; /* f64 quantize, blocks of 64 elements or more */
#endif
#if EMU_GRAN == BQ_GRAN_GROUP
  entry.fn[BQ__AFFINE_FLAT] = (bq__CUfunction)k_affine_flat; /* contiguous data where accesses straddle */
#endif
#if EMU_GRAN == BQ_GRAN_TOKEN
  entry.fn[BQ__AFFINE_BLOCKS] = (bq__CUfunction)k_affine_blocks; /* aligned rows, where the host takes it */
  entry.fn[BQ__AFFINE_FLAT] = (bq__CUfunction)k_affine_flat;     /* contiguous rows off the 16-byte grid */
  entry.fn[BQ__AFFINE_NARROW] = (bq__CUfunction)k_affine_narrow; /* f64 quantize, rows of 64 elements or more */
#endif
#if EMU_GRAN == BQ_GRAN_CHANNEL
  entry.fn[BQ__AFFINE_COLS] = (bq__CUfunction)k_affine_cols;
#endif
#if EMU_MASK
  entry.fn[BQ__AFFINE_MASK] = (bq__CUfunction)k_affine_mask;
#endif
#if EMU_HAS_LEAN
  entry.fn[BQ__AFFINE_LEAN] = (bq__CUfunction)k_affine_lean; /* small dense tensors, where the table says so */
#endif
#if EMU_HAS_PAIR
  entry.fn[BQ__AFFINE_PAIR] = (bq__CUfunction)k_affine_pair; /* the lean route's 16-bit quantize in pairs */
#endif
#if EMU_SR || EMU_ROT
  entry.fn[BQ__AFFINE_SR] = (bq__CUfunction)k_affine_sr;
#endif
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = g_num_sms;

  bq_desc n = ref_desc_normalize(&d);
  const bq_dtype xt = ref_x_type(&n), yt = ref_y_type(&n), ot = ref_out_type(&n);
  const bq_dtype st = n.scale_type;
  if (EMU_GROUPED) { /* the parameters' extent in the layout (bytes when packed) */
    ref_layout L;
    cr_assert_eq(ref_layout_init(&L, &n, &a), 0, "bad case: %s", what);
    nparams = std::max(nparams, L.n_params);
  }
  const int bwd = EMU_BWD;
  const int64_t guard = 21;
  /* x (or x for the mask), y / dy, out (y or dx) */
  std::vector<unsigned char> xb((size_t)(xtot + 2 * guard + 32) * 8), yb((size_t)(ytot + 2 * guard + 32) * 8),
      ob((size_t)(std::max(xtot, ytot) + 2 * guard + 32) * 8), eb(ob.size());
  std::vector<unsigned char> sb((size_t)(nparams + 1) * 8);
  std::vector<int32_t> zb((size_t)nparams + 1);
  double s_pt = ldexp(1.0, (int)rnd_range(-8, 4)) * ((rnd() & 1) ? 1.0 : 1.0 + rnd_unit());
  if (rnd() % 8 == 0) /* a scale whose reciprocal needs the power-of-two bracket */
    s_pt = ldexp(1.0 + rnd_unit(), (EMU_T == BQ_TYPE_F64 ? 600 : 100) * ((rnd() & 1) ? 1 : -1));
  for (int64_t i = 0; i < nparams; i++) {
    double s = ldexp(1.0, (int)rnd_range(-8, 4)) * ((rnd() & 3) ? 1.0 : 1.0 + rnd_unit());
    if (rnd() % 29 == 0) s = 0.0;
    if (rnd() % 31 == 0) s = -s;
    if (rnd() % 37 == 0) s = ldexp(1.0 + rnd_unit(), (rnd() & 1) ? 600 : -600); /* f64: outside [2^-500, 2^500] */
    if (rnd() % 41 == 0) s = ldexp(1.0 + rnd_unit(), (rnd() & 1) ? 100 : -100); /* f32: outside [2^-90, 2^90] */
    if (g_wide_scales && rnd() % 3 == 0) s = ldexp(1.0 + rnd_unit(), (int)rnd_range(30, 60));
    if (st == BQ_UE8M0 || st == BQ_UE8M0X4) { /* a byte: mostly near 2^0, the edges (0: 2^-127, an f32 subnormal; 255: NaN), any */
      static const int edge[] = {0, 1, 126, 127, 128, 254, 255};
      int e = (int)rnd_range(119, 131);
      if (rnd() % 6 == 0) e = edge[rnd() % 7];
      else if (rnd() % 9 == 0) e = (int)(rnd() & 255);
      else if (g_wide_scales && rnd() % 3 == 0) e = 127 + (int)rnd_range(30, 60);
      sb[(size_t)i] = (unsigned char)e;
    } else {
      store_any(st, sb.data(), i, s);
    }
    zb[(size_t)i] = rnd() % 5 == 0 ? (int32_t)rnd_range(-100000, 100000) : (int32_t)rnd_range(n.qmin, n.qmax);
    if (rnd() % 23 == 0) /* within the q-range's width of an int32 limit: quantize's general path */
      zb[(size_t)i] = (rnd() & 1) ? (int32_t)(INT32_MAX - rnd_range(0, 300)) : (int32_t)(INT32_MIN + rnd_range(0, 300));
  }
  if (EMU_GROUPED) { /* entries no element reads (padded rows, the leading dimension's slack, packed
                        bytes past a row's groups) hold NaN scales and zero points far outside the
                        q-range: a kernel that reads one gets another result */
    ref_layout L;
    cr_assert_eq(ref_layout_init(&L, &n, &a), 0);
    std::vector<unsigned char> used((size_t)nparams + 1);
    ref_scales_mark_used(&L.S, a.rows, a.cols, used.data());
    for (int64_t i = 0; i < nparams; i++)
      if (!used[(size_t)i]) {
        if (st == BQ_UE8M0 || st == BQ_UE8M0X4) sb[(size_t)i] = 255;
        else store_any(st, sb.data(), i, NAN);
        zb[(size_t)i] = INT32_MIN + 5;
      }
  }
  const int32_t zp_pt = FP8 ? 0 : (int32_t)rnd_range(n.qmin - 3, n.qmax + 3);
  g_edge = EMU_GRAN == BQ_GRAN_TENSOR && bwd && d.op != BQ_DEQUANTIZE;
  if (FP8) {
    g_edge_hi = F8.max * (double)(float)s_pt, g_edge_lo = -g_edge_hi;
  } else {
    g_edge_hi = ((double)n.qmax - zp_pt + 0.5) * (double)(float)s_pt;
    g_edge_lo = ((double)n.qmin - zp_pt - 0.5) * (double)(float)s_pt;
  }
  unsigned char *x = xb.data() + 8 * 8 + (size_t)(guard + off_x) * ref_dtype_size(xt);
  for (int64_t i = 0; i < xtot; i++) {
    if (ref_is_fp8(xt)) ref_store_int(xt, x, i, (int32_t)(rnd() & 255)); /* every code: NaN, inf, -0 included */
    else if (xt == BQ_S8 || xt == BQ_U8) ref_store_int(xt, x, i, (int32_t)rnd_range(xt == BQ_S8 ? -128 : 0, xt == BQ_S8 ? 127 : 255));
    else store_any(xt, x, i, value(s_pt));
  }
  /* backward: dy lives in the y layout */
  unsigned char *dy = yb.data() + 8 * 8 + (size_t)(guard + off_y) * ref_dtype_size(T);
  if (bwd)
    for (int64_t i = 0; i < ytot; i++) store_any(T, dy, i, grad_value());
  /* the output, in the y layout forward and the x layout backward */
  const int64_t otot = bwd ? xtot : ytot;
  const int off_o = bwd ? off_x : off_y;
  unsigned char *o0 = ob.data() + 8 * 8, *e0 = eb.data() + 8 * 8;
  const size_t os = ref_dtype_size(ot);
  memset(ob.data(), 0xA5, ob.size());
  memset(eb.data(), 0xA5, eb.size());
  unsigned char *out = o0 + (size_t)(guard + off_o) * os, *exp = e0 + (size_t)(guard + off_o) * os;

  a.x = (d.op == BQ_DEQUANTIZE && bwd) ? NULL : x;
  if (bwd) {
    a.dy = dy;
    a.dx = out;
  } else {
    a.y = out;
  }
  a.scale = s_pt;
  a.zero_point = zp_pt;
  if (EMU_GRAN != BQ_GRAN_TENSOR) {
    a.scales = sb.data();
    /* FP8 and packed scales take none */
    a.zero_points = !FP8 && !X4 && (g_zps < 0 ? rnd() % 4 != 0 : g_zps) ? zb.data() : NULL;
  }
#if EMU_SR /* the draws' key and first index: sometimes near 2^64 (the index wraps) */
  a.seed = rnd();
  const int ko = (int)(rnd() % 4);
  a.offset = ko == 0 ? 0 : ko == 1 ? rnd() % 1000 : ko == 2 ? rnd() : ~0ull - rnd() % 5000;
  snprintf(what + strlen(what), sizeof what - strlen(what), " sr %llx+%llu", (unsigned long long)a.seed,
           (unsigned long long)a.offset);
#endif
  /* the rotation's rows: [rows, cols] with x's and the output's strides, per tensor and per
     channel the flat array */
  const int64_t rrows = EMU_GRAN == BQ_GRAN_TENSOR || EMU_GRAN == BQ_GRAN_CHANNEL ? 1 : a.rows;
  const int64_t rcols = EMU_GRAN == BQ_GRAN_TENSOR || EMU_GRAN == BQ_GRAN_CHANNEL ? xtot : a.cols;
  const int64_t rxs = rrows == 1 ? rcols : a.x_row_stride ? a.x_row_stride : a.cols;
  const int64_t rys = rrows == 1 ? rcols : a.y_row_stride ? a.y_row_stride : a.cols;
  if (EMU_ROT) {
    a.rotation_block = g_rot_n;
    if (g_rot_signs && !EMU_SR) a.seed = rnd();
    snprintf(what + strlen(what), sizeof what - strlen(what), " rot %d signs %d", g_rot_n, g_rot_signs);
  }
  g_launches = 0;
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  cr_assert_eq(g_launches, otot > 0 ? 1 : 0, "%s", what);
  g_cases += otot > 0;
  /* the reference writes into its own copy */
  bq_args r = a;
  if (bwd) r.dx = exp;
  else r.y = exp;
  if (EMU_GRAN == BQ_GRAN_TENSOR) r.scale = d.float_type == BQ_F64 ? a.scale : (double)(float)a.scale;
  std::vector<unsigned char> xr, dyr;
  if (EMU_ROT && d.op != BQ_DEQUANTIZE && otot > 0) { /* the reference: BQ_HADAMARD's forward pass, then the op */
    xr = xb;
    r.x = xr.data() + (x - xb.data());
    ref_rotate(T, 0, d.random_signs, a.seed, g_rot_n, rrows, rcols, x, rxs, (void *)r.x, rxs);
  }
  if (EMU_ROT && bwd && otot > 0) { /* fake quantize backward: dy rotated too (the mask is the rotated x's) */
    dyr = yb;
    r.dy = dyr.data() + (dy - yb.data());
    ref_rotate(T, 0, d.random_signs, a.seed, g_rot_n, rrows, rcols, dy, rys, (void *)r.dy, rys);
  }
  cr_assert_eq(EMU_SR ? ref_run_sr(&d, &r) : ref_run(&d, &r), 0, "%s", what);
  if (EMU_ROT && d.op != BQ_QUANTIZE && otot > 0) /* the op, then BQ_HADAMARD's inverse on what it wrote */
    ref_rotate(T, 1, d.random_signs, a.seed, g_rot_n, rrows, rcols, exp, bwd ? rxs : rys, exp, bwd ? rxs : rys);
  char msg[2048];
  int64_t total = guard + off_o + otot + guard;
  size_t bad = ref_compare(ot, e0, o0, total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "%zu of %lld elements differ (index from the buffer's front, output at %lld):\n%s| %s", bad,
               (long long)total, (long long)(guard + off_o), msg, what);
  (void)yt;
#if EMU_MASK && !EMU_SR
  /* Again with a saved mask (bq_affine_mask): the forward pass writes y and the mask, the
     backward pass reads random mask words and no x. Output and mask start poisoned, with
     guard words either side that must stay so. */
  const emu_kernel taken = g_last; /* (the test by_name asks which kernel the case took) */
  const int64_t words = (otot + 31) / 32, gw = 3;
  std::vector<uint32_t> mb((size_t)(words + 2 * gw), 0xA5A5A5A5u);
  if (bwd)
    for (int64_t i = 0; i < words; i++) mb[(size_t)(gw + i)] = (uint32_t)rnd();
  std::vector<uint32_t> me = mb;
  memset(ob.data(), 0xA5, ob.size());
  memset(eb.data(), 0xA5, eb.size());
  bq_args m = a;
  m.mask = mb.data() + gw;
  if (bwd) m.x = NULL;
  g_launches = 0;
  g_last = NULL;
  cr_assert_eq(bq_plan_run(&plan, &m, NULL, 0, NULL), BQ_SUCCESS, "mask: %s | %s", bq_last_error(), what);
  cr_assert_eq(g_launches, otot > 0 ? 1 : 0, "mask: %s", what);
  cr_assert(otot == 0 || g_last == k_affine_mask, "mask: another kernel ran | %s", what);
  bq_args rm = m;
  rm.mask = me.data() + gw;
  if (bwd) rm.dx = exp;
  else rm.y = exp;
  rm.scale = r.scale;
  cr_assert_eq(ref_run(&d, &rm), 0, "%s", what);
  bad = ref_compare(ot, e0, o0, total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "mask: %zu of %lld elements differ (output at %lld):\n%s| %s", bad, (long long)total,
               (long long)(guard + off_o), msg, what);
  for (size_t i = 0; i < mb.size(); i++)
    cr_assert_eq(mb[i], me[i], "mask word %lld of %lld: 0x%08x, expected 0x%08x | %s", (long long)i - gw,
                 (long long)words, mb[i], me[i], what);
  g_last = taken;
#endif
}

#if EMU_SR
/* Stochastic rounding element by element: bq_quantize_sr and bq_fake_quantize_sr against
   reference_sr.h on 2^20 (value, draw) pairs, a quarter of them on the draw's threshold
   (n + (u + 1/2) 2^-16, which goes down) and a quarter one ulp of C either side of it, by
   scales that are powers of two (the quotient exact) and zero points across the q-range */
Test(emulated_affine, sr_element, .timeout = 600) {
  const int f64 = EMU_T == BQ_TYPE_F64;
  for (int k = 0; k < (1 << 20); k++) {
    const unsigned u = (unsigned)(rnd() & 0xffff);
    const double th = (double)rnd_range(-127, 127) + copysign((u + 0.5) * 0x1p-16, (rnd() & 1) ? 1.0 : -1.0);
    double v;
    switch (k % 8) {
    case 0: case 1: v = th; break;
    case 2: v = f64 ? nextafter(th, INFINITY) : (double)nextafterf((float)th, INFINITY); break;
    case 3: v = f64 ? nextafter(th, -INFINITY) : (double)nextafterf((float)th, -INFINITY); break;
    case 4: { static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e30, -1e30, 0x1p-20, -0x1p-17, 447.9, 57343.0};
              v = sp[rnd() % (sizeof sp / sizeof sp[0])]; break; }
    case 5: v = ldexp(rnd_unit() - 0.5, (int)rnd_range(-24, 18)); break;
    default: v = (rnd_unit() - 0.5) * 600.0; break;
    }
    const double sc = ldexp(1.0, (int)rnd_range(-6, 6));
    const int32_t zp = FP8 ? 0 : (int32_t)rnd_range(EMU_QMIN, EMU_QMAX);
    const emu_aff::bq_c x = (emu_aff::bq_c)(v * sc), s = (emu_aff::bq_c)sc;
    const emu_aff::bq_scale bs = emu_aff::bq_scale_of(s);
    const emu_aff::bq_zp bz = emu_aff::bq_zp_of(zp);
    const double vq = f64 ? (double)x / (double)s : (double)((float)x / (float)s);
    const int32_t want = FP8 ? (int32_t)refmx_code_sr(I, vq, u) : ref_sr_sat(ref_sr_int(vq, u), zp, EMU_QMIN, EMU_QMAX);
#if EMU_OP == BQ_OP_QUANTIZE
    const int32_t got = emu_aff::bq_quantize_sr(x, bs, bz, u);
    cr_assert_eq(got, want, "x %a / s %a (zp %d) draw %u: %d, expected %d", (double)x, (double)s, zp, u, got, want);
#else
    const double y = (double)emu_aff::bq_fake_quantize_sr(x, bs, bz, u);
    const double ye = FP8 ? (f64 ? ref_fp8_dequantize_d(want, sc, I) : (double)ref_fp8_dequantize_f(want, (float)sc, I))
                          : (f64 ? ref_dequantize_d(want, sc, zp) : (double)ref_dequantize_f(want, (float)sc, zp));
    cr_assert((y == ye && signbit(y) == signbit(ye)) || (y != y && ye != ye), "x %a / s %a (zp %d) draw %u: %a, expected %a",
              (double)x, (double)s, zp, u, y, ye);
#endif
  }
}
#endif

#if !EMU_ROT
Test(emulated_affine, shapes, .timeout = 600) {
  /* Per channel and per group, a third and a quarter of the cases are shaped for
     bq_affine_blocks; 24 more keep the row kernels as many cases as before it. Per group,
     the last 24 are contiguous with groups of at least 4 accesses (bq_affine_flat; about
     three in four take it: some groups are too short for its tile, some aligned ones go to
     bq_affine_blocks). Per token, the last 24 are contiguous rows of at least 4 accesses,
     most of them off the 16-byte grid (bq_affine_flat). */
  /* (per channel, f64 quantize forward: 120, since bq_affine_narrow takes the runs of 64
     elements or more from the row kernels) */
  const int reps = EMU_GRAN == BQ_GRAN_CHANNEL ? (EMU_NA && !EMU_BWD ? 120 : 88) : EMU_GROUPED ? 112 : EMU_GRAN == BQ_GRAN_TOKEN ? 88 : 64;
  for (int rep = 0; rep < reps; rep++) {
    bq_args a;
    memset(&a, 0, sizeof a);
    char shape[128];
    int64_t xtot, ytot, np;
    int offx = (int)rnd_range(0, 7), offy = (int)rnd_range(0, 7);
#if EMU_GRAN == BQ_GRAN_TENSOR
    static const int64_t ns[] = {0, 1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 255, 257, 1000, 4099, 9001};
    a.numel = rep < 16 ? ns[rep] : rnd_range(1, rep < 60 ? 20000 : 300000);
    xtot = ytot = a.numel;
    np = 1;
    snprintf(shape, sizeof shape, "numel %lld", (long long)a.numel);
#elif EMU_GRAN == BQ_GRAN_CHANNEL
    a.rank = (int)rnd_range(1, 4);
    int64_t tot = 1;
    for (int i = 0; i < a.rank; i++) {
      a.shape[i] = rnd_range(1, a.rank == 1 ? 3000 : a.rank == 2 ? 90 : 17);
      tot *= a.shape[i];
    }
    a.axis = (int)rnd_range(-a.rank, a.rank - 1);
    if (rep % 3 == 1) { /* runs of one channel a whole number of 16-byte accesses, aligned (bq_affine_blocks) */
      a.rank = (int)rnd_range(2, 3);
      a.axis = (int)rnd_range(0, a.rank - 2);
      const int64_t p = 16 / ref_dtype_size(T);
      tot = 1;
      for (int i = 0; i < a.rank; i++) {
        a.shape[i] = i > a.axis ? (i == a.rank - 1 ? p * ((rnd() & 3) ? rnd_range(1, 40) : rnd_range(100, 300)) : 2)
                                : rnd_range(1, a.rank == 2 ? 40 : 9);
        tot *= a.shape[i];
      }
      offx = offy = 8 - (int)(21 % 8);
    }
    if (rep % 3 == 0) { /* the channel axis innermost, C a multiple of 4 (bq_affine_cols), aligned */
      tot /= a.shape[a.rank - 1];
      a.shape[a.rank - 1] = 4 * rnd_range(a.rank == 1 ? 8 : 7, 70);
      tot *= a.shape[a.rank - 1];
      a.axis = (rnd() & 1) ? -1 : a.rank - 1;
      offx = offy = 8 - (int)(21 % 8); /* the guard is 21 elements: 16-byte aligned for any type */
    }
    xtot = ytot = tot;
    np = a.shape[a.axis < 0 ? a.axis + a.rank : a.axis];
    snprintf(shape, sizeof shape, "rank %d [%lld,%lld,%lld,%lld] axis %d", a.rank, (long long)a.shape[0],
             (long long)a.shape[1], (long long)a.shape[2], (long long)a.shape[3], a.axis);
#else
    a.rows = rep >= 52 ? rnd_range(100, 400) : rnd_range(1, 40);
    g_num_sms = rep % 2 ? 1 : 132;
#if EMU_GRAN == BQ_GRAN_BLOCK
    /* B x B tiles: rows and columns mostly not multiples of B (partial edge tiles); a
       quarter of the cases whole aligned accesses a block with cols a multiple of B
       (bq_affine_blocks, or bq_affine_narrow) */
    static const int64_t bs[] = {1, 2, 3, 5, 8, 16, 33, 64, 100, 128};
    const int64_t p = 16 / ref_dtype_size(T);
    const int aligned = rep % 4 == 1;
    const int64_t B = aligned ? p * (int64_t)(1 + rnd() % 12) : bs[rnd() % 10];
    a.group_size = B;
    a.rows = rnd_range(1, B < 20 ? 4 * B + 3 : rep % 3 ? 2 * B : 5);
    a.cols = aligned ? B * rnd_range(1, 600 / B + 2) : rnd_range(1, B < 20 ? 6 * B + 5 : 3 * B);
    if (a.rows * a.cols > 40000) a.rows = 40000 / a.cols + 1;
    np = 0; /* run() takes the layout's extent */
    const int flat = 0;
#elif EMU_GRAN == BQ_GRAN_GROUP
    static const int64_t gs[] = {1, 2, 3, 8, 16, 32, 64, 128, 7, 100};
    const int64_t p = 16 / ref_dtype_size(T);
    static const int64_t as[] = {1, 2, 3, 4, 12, 16, 40, 130, 300}; /* accesses a group, aligned rows */
    const int aligned = rep % 4 == 1 && rep < 88; /* bq_affine_blocks: whole accesses a group, rows aligned */
    const int64_t g = aligned ? p * as[rnd() % 9] : gs[rnd() % 10];
    const int wide = rep % 8 == 3; /* rows of many groups: a tile's parameter blocks take several rounds */
    a.cols = g * rnd_range(1, wide ? 400 / g + 300 : 12);
    if (wide) a.rows = rnd_range(1, 3);
    a.group_size = g;
    a.group_row_stride = rnd() & 1 ? 0 : a.cols / g + rnd_range(1, 3);
    const int flat = rep >= 88; /* one flat array: groups of 4 accesses or more, straddling or not */
    g_wide_scales = flat && rep % 2 == 0;
    if (flat) {
      static const int64_t fg[] = {4, 5, 13, 40}; /* accesses a group, plus 0 to p - 1 elements */
      a.group_size = p * fg[rnd() % 4] + rnd_range(0, p - 1);
      a.cols = a.group_size * rnd_range(1, 6);
      a.rows = rnd_range(1, rep % 2 ? 3 : 60);
      a.group_row_stride = rnd() & 1 ? 0 : a.cols / a.group_size;
    }
    np = a.rows * (a.group_row_stride ? a.group_row_stride : a.cols / a.group_size);
#else
    const int64_t p = 16 / ref_dtype_size(T);
    const int flat = rep >= 64; /* contiguous rows of 4 accesses or more (bq_affine_flat) */
    const int aligned = rep % 4 == 1 && !flat; /* rows a whole number of accesses, 16-byte aligned (bq_affine_blocks) */
    /* f64 quantize: bq_affine_narrow takes rows of 64 elements or more, so half the aligned
       cases and two thirds of the flat ones stay shorter, for the kernels they are for */
    const int shorter = EMU_NA && (rep % 8 == 1 || (flat && rep % 3 != 2));
    a.cols = aligned ? p * (shorter ? rnd_range(1, 31) : (rnd() & 3) ? rnd_range(1, 90) : rnd_range(120, 300))
                     : rnd_range(1, 700);
    g_wide_scales = flat && rep % 2 == 0;
    if (flat) {
      a.cols = p * rnd_range(4, shorter ? 30 : rep % 3 ? 40 : 300) + rnd_range(rep % 4 ? 1 : 0, p - 1);
      a.rows = rnd_range(1, rep % 2 ? 3 : 80);
    }
    np = a.rows;
#endif
    a.x_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
    a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
#if (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GRAN == BQ_GRAN_GROUP)
    if (flat) {
      a.x_row_stride = rnd() & 1 ? 0 : a.cols;
      a.y_row_stride = rnd() & 1 ? 0 : a.cols;
      if (rnd() % 4 == 0) offx = offy = 8 - (int)(21 % 8); /* aligned: straddles only where G is odd */
    }
#endif
#if (EMU_GRAN == BQ_GRAN_TOKEN || EMU_GROUPED)
    if (aligned) { /* row strides whole accesses of x and y (either may lead), bases aligned */
      if (a.cols > 600) a.rows = rnd_range(1, 6);
      a.x_row_stride = rnd() & 1 ? 0 : a.cols + 16 * rnd_range(0, 2);
      a.y_row_stride = rnd() & 1 ? 0 : a.cols + 16 * rnd_range(0, 2);
      offx = offy = 8 - (int)(21 % 8);
    }
#endif
#if EMU_GROUPED /* per block, MN-major and packed scales: the layout's own least and default */
    if (EMU_GRAN == BQ_GRAN_BLOCK || EMU_LAYOUT || X4) a.group_row_stride = pick_ld(a);
#endif
    emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
#endif
    run(a, xtot, ytot, np, offx, offy, shape);
  }
  cr_assert(g_cases >= 60, "only %d cases had work", g_cases);
  /* the kernels the dispatch table turns off for this specialization are never taken (the
     test by_name runs each of the others by name) */
  if (!EMU_GA) cr_assert(g_blocks == 0, "%d cases took bq_affine_blocks", g_blocks);
  /* (bq_affine_flat reads parameters at a flat index: never MN-major) */
  if (!EMU_FR || EMU_LAYOUT) cr_assert(g_flat == 0, "%d cases took bq_affine_flat", g_flat);
  if (!EMU_NA) cr_assert(g_narrow == 0, "%d cases took bq_affine_narrow", g_narrow);
  if (!EMU_LEAN) cr_assert(g_lean + g_pair == 0, "%d cases took bq_affine_lean or bq_affine_pair", g_lean + g_pair);
}
#endif

#if EMU_ROT
/* The fused rotation (rot=1 builds): bq_affine_sr over shapes whose rows (per tensor and per
   channel: the flat array) hold whole blocks of n, 2 up to 32 threads' elements (16 a thread of
   16-bit data and of codes, else 8), random signs half the time, against BQ_HADAMARD's
   reference and the op's (tests/reference_rotate.h, reference.h): a block within a thread's
   elements, or spread over consecutive lanes; rows that end in a partial chunk (blocks
   shorter than a thread's); strided rows; one SM's grid looping (a lane's place in its
   blocks the same at every step). */
Test(emulated_affine, rotation, .timeout = 600) {
  const int N = (EMU_OP == BQ_OP_DEQUANTIZE || ref_dtype_size(T) <= 2) ? 16 : 8;
  int max_shift = 0; /* n = 2 << shift, at most 32 N and 256 */
  while ((2 << (max_shift + 1)) <= 32 * N && (2 << (max_shift + 1)) <= 256) max_shift++;
  for (int rep = 0; rep < 40; rep++) {
    g_rot_n = 2 << rnd_range(0, max_shift);
    g_rot_signs = (int)(rnd() & 1);
    const int64_t n = g_rot_n;
    bq_args a;
    memset(&a, 0, sizeof a);
    char shape[160];
    int64_t xtot, ytot, np;
    const int offx = (int)rnd_range(0, 7), offy = (int)rnd_range(0, 7);
    g_num_sms = rep % 2 ? 1 : 132;
#if EMU_GRAN == BQ_GRAN_TENSOR
    a.numel = n * rnd_range(1, rep % 4 ? 40 : 3000 / n + 1);
    xtot = ytot = a.numel;
    np = 1;
    snprintf(shape, sizeof shape, "numel %lld", (long long)a.numel);
#elif EMU_GRAN == BQ_GRAN_CHANNEL
    a.rank = (int)rnd_range(1, 3);
    int64_t tot = 1;
    for (int i = 0; i < a.rank; i++) {
      a.shape[i] = i == a.rank - 1 ? n * rnd_range(1, 600 / n + 1) : rnd_range(1, 9);
      tot *= a.shape[i];
    }
    a.axis = (int)rnd_range(-a.rank, a.rank - 1);
    xtot = ytot = tot;
    np = a.shape[a.axis < 0 ? a.axis + a.rank : a.axis];
    snprintf(shape, sizeof shape, "rank %d [%lld,%lld,%lld] axis %d", a.rank, (long long)a.shape[0],
             (long long)a.shape[1], (long long)a.shape[2], a.axis);
#else
    a.rows = rnd_range(1, 24);
#if EMU_GRAN == BQ_GRAN_GROUP
    static const int64_t gs[] = {1, 2, 8, 16, 32, 128, 256};
    const int64_t g = gs[rnd() % 7], unit = g > n ? g : n; /* (powers of two: the larger divides) */
    a.group_size = g;
    a.cols = unit * rnd_range(1, 700 / unit + 1);
    np = 0; /* run() takes the layout's extent */
#elif EMU_GRAN == BQ_GRAN_BLOCK
    static const int64_t bs[] = {1, 3, 16, 33, 128};
    a.group_size = bs[rnd() % 5];
    a.cols = n * rnd_range(1, 500 / n + 1);
    np = 0;
#else
    a.cols = n * rnd_range(1, 700 / n + 1);
    np = a.rows;
#endif
    a.x_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
    a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
#if EMU_GROUPED
    a.group_row_stride = pick_ld(a);
#endif
    emu_rows_case(&a, &xtot, &ytot, shape, sizeof shape);
#endif
    run(a, xtot, ytot, np, offx, offy, shape);
  }
  g_num_sms = 132;
  g_rot_n = 0;
  cr_assert(g_cases >= 30, "only %d cases had work", g_cases);
}
#endif

#if EMU_MASK && !EMU_SR
/* bq_affine_mask over the sizes its chunks (32 accesses, two a warp) fall on either side of,
   with every stream on the 16-byte grid (the vector path) and off it (element by element);
   per channel, runs of one channel that are whole accesses (a scale an access) and not */
Test(emulated_affine, mask, .timeout = 600) {
  const int64_t p = 16 / ref_dtype_size(T), c = 32 * p;
  const int al = 8 - (int)(21 % 8); /* offsets that align every stream (a 21-element guard) */
  const int64_t ns[] = {1, 31, 33, c - 1, c, c + 1, 2 * c - 3, 2 * c, 2 * c + 5, 3 * c, 5 * c + 17, 4099, 9 * c};
  for (int k = 0; k < 2 * (int)(sizeof ns / sizeof ns[0]); k++) {
    const int64_t n = ns[k / 2];
    const int off = k % 2 ? al : al - 1;
    char shape[160];
    bq_args a;
    memset(&a, 0, sizeof a);
#if EMU_GRAN == BQ_GRAN_TENSOR
    a.numel = n;
    snprintf(shape, sizeof shape, "mask: numel %lld off %d", (long long)n, off);
    run(a, n, n, 1, off, off, shape);
#else
    /* [C, inner] with inner a multiple of p on even k and of no access on odd k */
    const int64_t inner = k % 4 < 2 ? p * (1 + (int64_t)(rnd() % 5)) : 1 + 2 * (int64_t)(rnd() % 7);
    a.rank = 2;
    a.shape[0] = (n + inner - 1) / inner;
    a.shape[1] = inner;
    a.axis = 0;
    const int64_t tot = a.shape[0] * inner;
    snprintf(shape, sizeof shape, "mask: [%lld, %lld] axis 0 off %d", (long long)a.shape[0], (long long)inner, off);
    run(a, tot, tot, a.shape[0], off, off, shape);
#endif
  }
}
#endif

#if !EMU_SR && !EMU_ROT /* (stochastic rounding and the rotation have theirs) */
/* ---- every entry point by name --------------------------------------------------------- */
/* One case with the host made to take `entry` (bq__affine_force_entry): it must launch `fn`. */
static void named_case(int entry, emu_kernel fn, const char *name, bq_args a, int64_t np, int off, const char *what) {
  int64_t xtot, ytot;
  char shape[256];
  if (EMU_GRAN == BQ_GRAN_CHANNEL) {
    xtot = 1;
    for (int i = 0; i < a.rank; i++) xtot *= a.shape[i];
    ytot = xtot;
    snprintf(shape, sizeof shape, "%s: %s rank %d [%lld,%lld,%lld] axis %d", name, what, a.rank, (long long)a.shape[0],
             (long long)a.shape[1], (long long)a.shape[2], a.axis);
  } else if (EMU_GRAN == BQ_GRAN_TENSOR) {
    xtot = ytot = a.numel;
    snprintf(shape, sizeof shape, "%s: %s numel %lld", name, what, (long long)a.numel);
  } else {
    char rs[160];
    emu_rows_case(&a, &xtot, &ytot, rs, sizeof rs);
    snprintf(shape, sizeof shape, "%s: %s %s", name, what, rs);
  }
  bq__affine_force_entry = entry;
  g_last = NULL;
  run(a, xtot, ytot, np, off, off, shape);
  bq__affine_force_entry = -1;
  /* forcing bq_affine_lean forces the lean route, which takes bq_affine_pair where it applies
     (the pair cases below say where) */
#if EMU_HAS_PAIR
  if (entry == BQ__AFFINE_LEAN && g_last == k_affine_pair) return;
#endif
  cr_assert(g_last == fn, "%s took another kernel", shape);
}
/* [rows, cols] (per token, per group of g) with row strides cols + pad; a single row, or
   parameter rows dense */
static bq_args rows_args(int64_t rows, int64_t cols, int64_t g, int64_t pad) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rows;
  a.cols = cols;
  a.group_size = g;
  a.x_row_stride = a.y_row_stride = pad ? cols + pad : 0;
  return a;
}
static int64_t rows_params(const bq_args &a) {
  return EMU_GRAN == BQ_GRAN_GROUP ? a.rows * (a.cols / a.group_size) : a.rows; /* (grouped: run() takes the layout's) */
}
static bq_args channel_args(int rank, int64_t s0, int64_t s1, int64_t s2, int axis) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rank = rank;
  a.shape[0] = s0;
  a.shape[1] = s1;
  a.shape[2] = s2;
  a.axis = axis;
  return a;
}

Test(emulated_affine, by_name, .timeout = 600) {
  const int64_t p = 16 / ref_dtype_size(T); /* elements an access */
  const int al = 8 - (int)(21 % 8), un = al - 1; /* offsets that align every stream (a 21-element guard), and none */
  (void)p, (void)al, (void)un;
  /* the row kernel: aligned, straddling, odd, strided, short and long shapes */
#if EMU_GRAN == BQ_GRAN_TENSOR
  static const int64_t ns[] = {1, 7, 16, 64 * 8 + 3, 5000, 70001};
  for (int i = 0; i < 6; i++) {
    bq_args a;
    memset(&a, 0, sizeof a);
    a.numel = ns[i];
    named_case(BQ__AFFINE_ROW, k_affine, "bq_affine", a, 1, i % 2 ? un : al, "numel");
  }
#elif EMU_GRAN == BQ_GRAN_CHANNEL
  /* the two row kernels, each on every shape */
  const bq_args rowk[] = {channel_args(3, 3, 5, 7, 1), channel_args(2, 4, 2 * p, 1, 0), channel_args(1, 1000, 1, 1, 0),
                          channel_args(3, 2, 9, 130, 1), channel_args(2, 3, 4 * p, 1, 1)};
  for (int i = 0; i < 5; i++) {
    const bq_args &a = rowk[i];
    named_case(BQ__AFFINE_ROW, k_affine, "bq_affine", a, a.shape[a.axis], i % 2 ? un : al, "row");
    named_case(BQ__AFFINE_ODD, k_affine_odd, "bq_affine_odd", a, a.shape[a.axis], i % 2 ? un : al, "row");
  }
  /* the channel axis innermost: C a multiple of the columns a lane owns, 8 lanes' worth or more */
  const int64_t cp = p < 4 ? p : 4;
  for (int i = 0; i < 4; i++) {
    const int64_t c = cp * (i == 0 ? 8 : i == 1 ? 9 : i == 2 ? 50 : 300), r = i == 3 ? 2 : 1 + 30 * i;
    bq_args a = channel_args(2, r, c, 1, i % 2 ? -1 : 1);
    named_case(BQ__AFFINE_COLS, k_affine_cols, "bq_affine_cols", a, c, al, "innermost");
  }
  if (EMU_GA) /* a channel's run a whole number of aligned accesses */
    for (int i = 0; i < 4; i++) {
      const int64_t m = i == 0 ? 1 : i == 1 ? 3 : i == 2 ? 40 : 130;
      bq_args a = i % 2 ? channel_args(3, 2, 5, p * m, 1) : channel_args(2, 3, p * m, 1, 0);
      named_case(BQ__AFFINE_BLOCKS, k_affine_blocks, "bq_affine_blocks", a, a.shape[a.axis], al, "aligned runs");
    }
  if (EMU_NA) /* runs of 64 elements or more, straddling (backward takes it only so) */
    for (int i = 0; i < 3; i++) {
      const int64_t g = i == 0 ? 65 : i == 1 ? 101 : 130;
      bq_args a = channel_args(2, 1 + 2 * i, g, 1, 0);
      named_case(BQ__AFFINE_NARROW, k_affine_narrow, "bq_affine_narrow", a, a.shape[0], un, "runs of 64 or more");
    }
#elif EMU_GRAN == BQ_GRAN_BLOCK
  /* the row kernels: B short, odd, whole accesses, long; rows and columns past a multiple of
     B (partial edge tiles) or not; rows strided or not */
  static const int64_t bs[] = {1, 3, 7, 16, 100, 130};
  for (int i = 0; i < 6; i++) {
    const int64_t B = bs[i], cols = B * (i % 3 + 1) + (i % 2 ? B / 2 + 1 : 0), rows = B < 20 ? 2 * B + i : i + 1;
    bq_args a = rows_args(rows, cols, B, i % 2 ? 3 : 0);
    a.group_row_stride = i % 3 == 2 ? (cols + B - 1) / B + 2 : 0;
    named_case(BQ__AFFINE_ROW, k_affine, "bq_affine", a, 0, i % 3 ? un : al, "row");
    named_case(BQ__AFFINE_ODD, k_affine_odd, "bq_affine_odd", a, 0, i % 3 ? un : al, "row");
  }
  { /* rows shorter than one access, B longer, rows 16-byte aligned: a tile with no whole
       access (the slot kernels' span of blocks must then be empty). */
    bq_args a = rows_args(5, p > 1 ? p - 1 : 1, p + 3, 0);
    named_case(BQ__AFFINE_ROW, k_affine, "bq_affine", a, 0, al, "a row shorter than an access");
    named_case(BQ__AFFINE_ODD, k_affine_odd, "bq_affine_odd", a, 0, al, "a row shorter than an access");
  }
  if (EMU_GA) /* B whole accesses, cols a multiple of B, rows 16-byte aligned; rows partial */
    for (int i = 0; i < 4; i++) {
      const int64_t m = i == 0 ? 1 : i == 1 ? 4 : i == 2 ? 9 : 17, B = p * m;
      bq_args a = rows_args(i == 0 ? 2 * B + 1 : i + 2, 3 * B, B, i % 2 ? 16 : 0);
      named_case(BQ__AFFINE_BLOCKS, k_affine_blocks, "bq_affine_blocks", a, 0, al, "aligned blocks");
    }
  if (EMU_NA) /* B of 64 elements or more, cols a multiple of B, straddling */
    for (int i = 0; i < 3; i++) {
      const int64_t B = i == 0 ? 64 : i == 1 ? 65 : 301;
      bq_args a = rows_args(i == 0 ? 65 : 1 + 2 * i, 2 * B, B, i == 1 ? 5 : 0);
      named_case(BQ__AFFINE_NARROW, k_affine_narrow, "bq_affine_narrow", a, 0, un, "blocks of 64 or more");
    }
#else
  const int tok = EMU_GRAN == BQ_GRAN_TOKEN;
  /* the row kernels: groups (rows) short, odd, whole accesses, long; rows strided or not */
  static const int64_t gs[] = {3, 7, 16, 100, 1000};
  for (int i = 0; i < 5; i++) {
    const int64_t g = gs[i], cols = tok ? g : g * (i + 2), rows = i == 4 ? 2 : 1 + 7 * i;
    bq_args a = rows_args(rows, cols, tok ? 0 : g, i % 2 ? 3 : 0);
    named_case(BQ__AFFINE_ROW, k_affine, "bq_affine", a, rows_params(a), i % 3 ? un : al, "row");
#if EMU_GRAN == BQ_GRAN_GROUP
    named_case(BQ__AFFINE_ODD, k_affine_odd, "bq_affine_odd", a, rows_params(a), i % 3 ? un : al, "row");
#endif
  }
  if (EMU_GA) /* blocks a whole number of accesses, rows 16-byte aligned */
    for (int i = 0; i < 4; i++) {
      const int64_t m = i == 0 ? 1 : i == 1 ? 4 : i == 2 ? 40 : 130, g = p * m;
      bq_args a = rows_args(i == 3 ? 2 : 1 + 3 * i, tok ? g : 3 * g, tok ? 0 : g, i % 2 ? 16 : 0);
      named_case(BQ__AFFINE_BLOCKS, k_affine_blocks, "bq_affine_blocks", a, rows_params(a), al, "aligned blocks");
    }
  if (EMU_FR && !EMU_LAYOUT) /* one flat array whose accesses straddle blocks (row-major parameters) */
    for (int i = 0; i < 4; i++) {
      const int64_t g = i % 2 ? p * 13 + 3 : p * 5 + 1;
      /* packed scales: dense rows of words (whole words a row) or one row */
      const int64_t ng = X4 && i ? 4 * (1 + i % 2) : 1 + i;
      bq_args a = rows_args(i == 0 ? 1 : i == 1 ? 4 : i == 2 ? 40 : 3, tok ? g : g * ng, tok ? 0 : g, 0);
      named_case(BQ__AFFINE_FLAT, k_affine_flat, "bq_affine_flat", a, rows_params(a), i == 3 ? un : al, "flat");
    }
  if (EMU_NA) /* blocks (rows) of 64 elements or more, straddling */
    for (int i = 0; i < 3; i++) {
      const int64_t g = i == 0 ? 64 : i == 1 ? 65 : 301;
      bq_args a = rows_args(1 + 2 * i, tok ? g : 2 * g, tok ? 0 : g, i == 1 ? 5 : 0);
      named_case(BQ__AFFINE_NARROW, k_affine_narrow, "bq_affine_narrow", a, rows_params(a), un, "blocks of 64 or more");
    }
#endif
#if EMU_HAS_LEAN
  /* bq_affine_lean, whatever the table's size limit: dense data, the lead stream aligned, whole
     accesses, elements past the last one (per tensor); the last case has blocks' worth of
     accesses, so that a thread's second and later accesses (the table's lu) are used */
  for (int i = 0; i < 7; i++) {
#if EMU_GRAN == BQ_GRAN_TENSOR
    static const int64_t ln[] = {1, 7, p, 32 * p + 3, 5000, 70001, 1100 * p};
    bq_args a;
    memset(&a, 0, sizeof a);
    a.numel = ln[i];
    named_case(BQ__AFFINE_LEAN, k_affine_lean, "bq_affine_lean", a, 1, al, "dense");
#else
    const int lt = EMU_GRAN == BQ_GRAN_TOKEN;
    const int64_t g = p * (i % 3 + 1), cols = i == 6 ? p * 40 : lt ? p * (i + 1) : g * (i + 2);
    bq_args a = rows_args(i == 0 ? 1 : i == 6 ? 37 : 3 * i + 1, cols, lt ? 0 : g, 0);
    if (EMU_GROUPED && !X4 && !EMU_LAYOUT) a.group_row_stride = 0; /* dense row-major scales */
    if (EMU_GRAN == BQ_GRAN_TOKEN || (!X4 && !EMU_LAYOUT))
      named_case(BQ__AFFINE_LEAN, k_affine_lean, "bq_affine_lean", a, rows_params(a), al, "dense");
#endif
  }
#if EMU_GRAN == BQ_GRAN_BLOCK
  /* per block: a partial last block in each row and in the last rows of blocks (a whole
     number of accesses), and scales with a longer leading dimension */
  if (!X4 && !EMU_LAYOUT)
    for (int i = 0; i < 4; i++) {
      const int64_t B = p * (i % 2 + 1), cols = B * (i + 1) + p, rows = B * (i + 1) + 1 + i;
      bq_args a = rows_args(rows, cols, B, 0);
      a.group_row_stride = i < 2 ? 0 : (cols + B - 1) / B + 3;
      named_case(BQ__AFFINE_LEAN, k_affine_lean, "bq_affine_lean", a, rows_params(a), al, "partial blocks");
    }
#endif
#if EMU_GRAN != BQ_GRAN_TENSOR
  /* bq_affine_pair (quantize from 16-bit data without zero points, rows and groups whole
     pairs of accesses, the output 16-byte aligned) and, for each condition, a case that
     misses only it and takes bq_affine_lean */
  const int al16 = 16 - (int)(21 % 16); /* offset that puts a 1-byte output on the 16-byte grid too */
  for (int i = 0; i < 5; i++) {
    const int lt = EMU_GRAN == BQ_GRAN_TOKEN;
    const int64_t g = p * (i == 1 ? 4 : i == 2 ? 3 : 2); /* (i == 2: an odd number of accesses) */
    bq_args a = rows_args(i == 1 ? 5 : 3, lt ? g : g * (i + 2), lt ? 0 : g, 0);
    if (EMU_GROUPED && !X4 && !EMU_LAYOUT) a.group_row_stride = 0;
    if (EMU_GRAN != BQ_GRAN_TOKEN && (X4 || EMU_LAYOUT)) continue;
    g_zps = i == 3; /* (i == 3: zero points, where the type takes them) */
    named_case(BQ__AFFINE_LEAN, k_affine_lean, "bq_affine_lean", a, rows_params(a), i == 4 ? al : al16,
               i == 4 ? "pairs, the output off the 16-byte grid" : "pairs");
    g_zps = -1;
    const int out1 = EMU_OP == BQ_OP_QUANTIZE && ref_dtype_size(T) == 2; /* 16-bit data to 1-byte codes */
    const int want = out1 && i != 2 && i != 4 && !(i == 3 && !FP8 && !X4);
#if EMU_HAS_PAIR
    const int took = g_last == k_affine_pair;
#else
    const int took = 0;
#endif
    cr_assert_eq(took, want, "case %d: %s bq_affine_pair", i, want ? "did not take" : "took");
  }
#if EMU_GRAN == BQ_GRAN_BLOCK
  /* per block, rows must be whole pairs too: blocks of two accesses, rows of an odd number of
     accesses (the last block partial) take bq_affine_lean; of an even number, the pair */
  if (!X4 && !EMU_LAYOUT)
    for (int i = 0; i < 2; i++) {
      const int64_t B = 2 * p;
      bq_args a = rows_args(2 * B + 1, 3 * B + p * (1 + i), B, 0);
      g_zps = 0;
      named_case(BQ__AFFINE_LEAN, k_affine_lean, "bq_affine_lean", a, rows_params(a), al16, "pairs, partial blocks");
      g_zps = -1;
#if EMU_HAS_PAIR
      const int took = g_last == k_affine_pair;
#else
      const int took = 0;
#endif
      const int want = EMU_OP == BQ_OP_QUANTIZE && ref_dtype_size(T) == 2 && i == 1;
      cr_assert_eq(took, want, "partial blocks %d: %s bq_affine_pair", i, want ? "did not take" : "took");
    }
#endif
#endif
#endif
}
#endif
