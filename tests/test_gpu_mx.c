/* tests/test_gpu_mx.c - the microscaling formats (MXFP8, MXFP4, NVFP4: src/family_mx.h,
   kernels_src/mx.cu) on the GPU against the CPU reference (tests/reference_mxops.h), bit for
   bit: codes, scales and NVFP4's tensor scale.

   Coverage: quantize, dequantize and dynamic quantize, fake quantize, and the backward
   passes (quantize, dequantize, fake quantize) x element and scale type (E4M3, E5M2
   and E2M1 with UE8M0; E2M1 with E4M3) x layout (row-major, MN-major, blocked) x float type
   (every one, rotating where the plans would be too many) x UE8M0 rule (dynamic); each plan
   on groups of 16 and 32 (bq_mx16, bq_mx32, each also forced onto bq_mx_any) and of other
   sizes, rows past the blocked layout's 128-row tiles, strided rows, misaligned floats and
   codes, padded scale rows; data of every kind: random magnitudes, values on the element
   grid and its midpoints (ties at each binade), zeros and groups of zeros (amax 0), NaN and
   +-inf, saturation (values past max times the scale), subnormals; static scales at the
   extremes (UE8M0 0, 254, NaN; every E4M3 code). Every output allocation is poisoned and
   compared whole, guards included; inputs are checked unchanged. And the E2M1 software
   conversion on every f32 bit pattern (quantize by a UE8M0 scale of 1, which divides
   exactly), against the CPU reference.
   The fused producers emitting the formats (RMSNorm with and without a residual, in place
   or not; SiLU and GELU-tanh x up): every format x layout x float type, every rule, NVFP4's
   tensor scale given and computed (bq_fused_amax), groups on the shuffle path and the
   generic one, each entry point by name; against the producer's reference
   (tests/reference_fused.h) followed by microscaling dynamic quantize: codes, scales, h,
   args.out and the tensor scale.
   Stochastic rounding (random seeds and offsets, near 2^64 too) and the fused rotation (every
   block size bq_mx_lanes takes, with and without random signs) against the same reference,
   the rotation's from tests/reference_rotate.h.

   Without a usable CUDA driver/device every test is skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_fused.h"
#include "reference_mxops.h"

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
static const bq_dtype ELEM[] = {BQ_E2M1, BQ_E2M1, BQ_E4M3, BQ_E5M2}, SCALE[] = {BQ_UE8M0, BQ_E4M3, BQ_UE8M0, BQ_UE8M0};

/* stochastic rounding's seed and offset for a call of d (0 and 0 under round to nearest):
   offsets off the 8-element sets now and then, and near 2^64, where the index wraps */
static int g_rot_n; /* the fused rotation's block in this case (desc.rotation) */
static void draw_sr(const bq_desc *d, bq_args *a) {
  if (d->rotation) a->rotation_block = g_rot_n;
  if (d->random_signs) a->seed = rnd();
  if (d->rounding != BQ_ROUND_STOCHASTIC) return;
  const int k = (int)(rnd() % 4);
  a->seed = rnd();
  a->offset = k == 0 ? 0 : k == 1 ? rnd() % 1000 : k == 2 ? rnd() : ~0ull - rnd() % 5000;
}

static bq_desc mx_desc(bq_op op, bq_dtype ft, int k, int lay, int rule) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.granularity = BQ_PER_GROUP;
  d.float_type = ft;
  d.int_type = ELEM[k];
  d.scale_type = SCALE[k];
  d.scale_layout = (bq_scale_layout)lay;
  d.scale_rule = (bq_scale_rule)rule;
  return d;
}

static double value(const bq_desc *d, int k, double mag) {
  const double s = rnd() & 1 ? -1.0 : 1.0, maxe = refmx_fmt_of(d->int_type).max;
  switch (k) {
  case 0: return 0.0 * s;
  case 1: return s * ldexp((double)rnd_range(0, 64), -3) * mag / (d->int_type == BQ_E2M1 ? 4.0 : maxe / 8);
  case 2: return rnd() % 7 == 0 ? NAN : rnd() % 5 == 0 ? s * INFINITY : s * rnd_unit() * mag;
  case 3: return s * mag * (1.0 + rnd_unit()) * (rnd() % 3 ? 1.0 : 1e6);
  case 4: return s * ldexp(rnd_unit(), d->float_type == BQ_F64 ? -1060 : d->float_type == BQ_F32 ? -140 : -20);
  default: return s * rnd_unit() * mag;
  }
}
/* static scales: codes near the data (UE8M0 2^-17 .. 2^8, and now and then 0, 254 or NaN;
   E4M3 0x20 .. 0x50, and now and then any code) */
static void fill_scales(unsigned char *sc, int64_t n, int nv) {
  for (int64_t i = 0; i < n; i++)
    sc[i] = nv ? (unsigned char)(rnd() % 8 == 0 ? rnd() : (uint64_t)rnd_range(0x20, 0x50))
               : (unsigned char)(rnd() % 16 == 0 ? (rnd() % 3 == 0 ? 0 : rnd() % 2 ? 254 : 255) : (int)rnd_range(110, 135));
}
static void store(bq_dtype t, void *buf, int64_t i, double v) {
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

/* NVFP4's tensor scale: g given (args.tensor_scale), or the buffer computed into
   (args.out_tensor_scale), in garbage-guarded device memory */
static void tensor_scale_buf(dbuf *G4, bq_args *a, int computed, float g, const char *what) {
  dbuf_make(G4, 4, 1, 0);
  fill_garbage(G4->h, G4->total);
  if (!computed) memcpy(G4->h + G4->pre, &g, 4);
  BQ_OK(bq_memcpy_to_device(G4->dev, G4->h, G4->total), "%s", what);
  if (computed) a->out_tensor_scale = G4->dev + G4->pre;
  else a->tensor_scale = G4->dev + G4->pre;
}

/* A run with the workspace the plan asks for (returned, for bq_free after the stream
   synchronizes; NULL when none), the last launch noted from NULL */
static void *run_with_workspace(bq_plan *p, const bq_args *a, const char *what) {
  size_t ws_bytes = 0;
  BQ_OK(bq_plan_workspace_size(p, a, &ws_bytes), "%s", what);
  void *ws = NULL;
  if (ws_bytes) BQ_OK(bq_malloc(&ws, ws_bytes), "%s", what);
  g_last_fn = NULL;
  BQ_OK(bq_plan_run(p, a, ws, ws_bytes, NULL), "%s", what);
  return ws;
}

/* One call: [rows, cols] in groups of G with the strides and offsets given; force: the
   entry point every run takes (-1: the host's) */
typedef struct mx_case {
  int64_t rows, ngroups, G, xpad, ypad, grs_extra;
  int offf, offc, force, computed;
} mx_case;

/* The entry point a run takes, restated: bq_mx_lanes where G is 2^k (k <= 5) times the
   16 / T elements of a 16-byte access of floats and each stream's base and row stride
   (bytes) are multiples of its piece (16 bytes of floats; 16 / T codes, E2M1 half as many
   bytes), but for dynamic quantize without the rotation; else by G; a forced one as forced.
   n streams: base, row stride, piece (bytes). */
static int want_entry(const bq_desc *d, int64_t G, int force, const uintptr_t *base, const int64_t *stride,
                      const int64_t *piece, int n) {
  if (force >= 0) return force;
  const int64_t E = 16 / bq__dtype_size(d->float_type);
  int lanes = G % E == 0 && G / E <= 32 && ((G / E) & (G / E - 1)) == 0 &&
              (d->op != BQ_DYNAMIC_QUANTIZE || d->rotation);
  for (int i = 0; i < n && lanes; i++) lanes = base[i] % (uintptr_t)piece[i] == 0 && stride[i] % piece[i] == 0;
  return lanes ? BQ__MX_LANES : G == 16 ? BQ__MX_G16 : G == 32 ? BQ__MX_G32 : BQ__MX_ANY;
}

static void run_case(const bq_desc *d, const mx_case *c) {
  bq_plan *p = plan_get(d, "mx");
  const int deq = d->op == BQ_DEQUANTIZE, dyn = d->op == BQ_DYNAMIC_QUANTIZE, e2 = d->int_type == BQ_E2M1;
  const int nv = d->scale_type == BQ_E4M3;
  const int64_t rows = c->rows, G = c->G, cols = c->ngroups * G, ng = c->ngroups;
  const int64_t xs = cols + c->xpad, ys = cols + c->ypad; /* (even pads for E2M1) */
  const int64_t grs0 = refmx_default_grs(d->scale_layout, rows, ng);
  const int64_t grs_arg = d->scale_layout == BQ_SCALES_BLOCKED || !c->grs_extra ? 0 : grs0 + c->grs_extra;
  const int64_t grs = grs_arg ? grs_arg : grs0;
  const int64_t nscale = refmx_scale_bytes(d->scale_layout, rows, ng, grs);
  const size_t T = (size_t)bq__dtype_size(d->float_type);
  const int64_t nf = rows * (deq ? ys : xs), ncodes = rows * (deq ? xs : ys), nb = e2 ? ncodes / 2 : ncodes;
  char what[1024];
  char sku[512];
  /* bq_mx_lanes' pieces a lane, where it may take two: the rule's, one or two (forced) */
  const int lacc = (int)(rnd() % 3) - 1;
  snprintf(sku, sizeof sku, "%s", bq_plan_sku(p));
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld strides %lld/%lld grs %lld offs %d/%d force %d "
           "lacc %d%s", (unsigned long long)g_seed, sku, (long long)rows, (long long)cols, (long long)G, (long long)xs,
           (long long)ys, (long long)grs_arg, c->offf, c->offc, c->force, lacc, c->computed ? " g computed" : "");
  dbuf F, C, S, G4;
  memset(&G4, 0, sizeof G4);
  dbuf_make(&F, T, nf, c->offf);
  dbuf_make(&C, 1, nb, c->offc);
  dbuf_make(&S, 1, nscale, 0);
  /* inputs */
  if (deq) {
    fill_garbage(C.h, C.total);
    fill_garbage(F.h, F.total); /* (the output: its guards and gaps must keep these bytes) */
  } else {
    fill_garbage(F.h, F.total);
    int kind = (int)(rnd() % 6);
    double mag = ldexp(1.0, (int)rnd_range(-8, 8));
    for (int64_t i = 0; i < nf; i++) {
      if (i % G == 0 && rnd() % 4 == 0) kind = (int)(rnd() % 6), mag = ldexp(1.0, (int)rnd_range(-8, 8));
      store(d->float_type, F.h + F.pre, i, value(d, kind, mag));
    }
    if (rows && ng && rnd() % 2) /* a group of zeros */
      for (int64_t j = 0; j < G; j++) store(d->float_type, F.h + F.pre, j, 0.0);
    fill_garbage(C.h, C.total);
  }
  fill_garbage(S.h, S.total);
  if (!dyn) fill_scales(S.h + S.pre, nscale, nv);
  float g = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 4));
  /* now and then far out: group scales past [2^-90, 2^90] take NVFP4's general quotient */
  if (nv && !c->computed && rnd() % 6 == 0) g = (float)ldexp(1.0 + rnd_unit(), rnd() % 2 ? -110 : 100);
  BQ_OK(bq_memcpy_to_device(F.dev, F.h, F.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(C.dev, C.h, C.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(S.dev, S.h, S.total), "%s", what);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rows, a.cols = cols, a.group_size = G;
  a.x_row_stride = xs, a.y_row_stride = ys, a.group_row_stride = grs_arg;
  a.x = deq ? (const void *)(C.dev + C.pre) : (const void *)(F.dev + F.pre);
  a.y = deq ? (void *)(F.dev + F.pre) : (void *)(C.dev + C.pre);
  if (dyn) a.out_scales = S.dev + S.pre;
  else a.scales = S.dev + S.pre;
  if (nv) tensor_scale_buf(&G4, &a, c->computed, g, what);
  if (dyn && !nv && rnd() % 4 == 0) a.amax_bound = ldexp(1.0 + rnd_unit(), (int)rnd_range(-6, 6));
  draw_sr(d, &a);
  bq__mx_force_entry = c->force;
  bq__mx_force_lacc = lacc;
  void *ws = run_with_workspace(p, &a, what);
  bq__mx_force_entry = -1;
  bq__mx_force_lacc = -1;
  if (rows && cols) { /* the group kernel launched last, by name: the forced one, else by the rule */
    const int64_t E = 16 / (int64_t)T, cs = e2 ? (deq ? xs : ys) / 2 : (deq ? xs : ys);
    const uintptr_t base[2] = {(uintptr_t)(F.dev + F.pre), (uintptr_t)(C.dev + C.pre)};
    const int64_t stride[2] = {(deq ? ys : xs) * (int64_t)T, cs}, piece[2] = {16, e2 ? E / 2 : E};
    const int e = want_entry(d, G, c->force, base, stride, piece, 2);
    cr_assert(g_last_fn && g_last_fn == plan_fn(p, e), "the last launch is not %s | %s", p->kernels[e], what);
  }
  BQ_OK(bq_synchronize(NULL), "%s", what);
  if (ws) bq_free(ws);
  /* the reference on the host images */
  dbuf *out = deq ? &F : &C;
  unsigned char *got = (unsigned char *)malloc(out->total), *gs = (unsigned char *)malloc(S.total);
  cr_assert(got && gs);
  BQ_OK(bq_memcpy_to_host(got, out->dev, out->total), "%s", what);
  BQ_OK(bq_memcpy_to_host(gs, S.dev, S.total), "%s", what);
  const float eg = refmx_op_full(d, rows, cols, G, xs, ys, grs,
                                 deq ? (const void *)(C.h + C.pre) : (const void *)(F.h + F.pre),
                                 deq ? (void *)(F.h + F.pre) : (void *)(C.h + C.pre), NULL, NULL, S.h + S.pre,
                                 c->computed ? NAN : g, a.amax_bound, a.seed, a.offset, (int)a.rotation_block);
  char msg[2048];
  size_t bad = deq ? ref_compare(d->float_type, out->h, got, (int64_t)(out->total / T), msg, sizeof msg)
                   : ref_compare(BQ_U8, out->h, got, (int64_t)out->total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "%s: %zu differ (from the allocation's start; data at %zu):\n%s| %s", deq ? "floats" : "codes", bad,
               out->pre, msg, what);
  bad = ref_compare(BQ_U8, S.h, gs, (int64_t)S.total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "scales: %zu differ (data at %zu):\n%s| %s", bad, S.pre, msg, what);
  if (c->computed && rows && cols) {
    float gg;
    BQ_OK(bq_memcpy_to_host(&gg, G4.dev + G4.pre, 4), "%s", what);
    cr_assert(!memcmp(&gg, &eg, 4), "tensor scale %a, expected %a | %s", (double)gg, (double)eg, what);
  }
  check_unchanged(deq ? &C : &F, "x", what);
  if (!dyn) check_unchanged(&S, "scales", what);
  free(got);
  free(gs);
  dbuf_free(&F);
  dbuf_free(&C);
  dbuf_free(&S);
  dbuf_free(&G4);
}

/* Fake quantize forward and the backward passes: floats in and out (x and dx on x's strides,
   y and dy on y's), the scales read; elements at the mask's edge (+-max times the group's
   scale, and one ulp past it) in a third of the groups */
static void run_case_t(const bq_desc *d, const mx_case *c) {
  bq_plan *p = plan_get(d, "mx floats");
  const int bwd = d->direction == BQ_BACKWARD, deq = d->op == BQ_DEQUANTIZE, nv = d->scale_type == BQ_E4M3;
  const int64_t rows = c->rows, G = c->G, cols = c->ngroups * G, ng = c->ngroups;
  const int64_t xs = cols + c->xpad, ys = cols + c->ypad;
  const int64_t grs0 = refmx_default_grs(d->scale_layout, rows, ng);
  const int64_t grs_arg = d->scale_layout == BQ_SCALES_BLOCKED || !c->grs_extra ? 0 : grs0 + c->grs_extra;
  const int64_t grs = grs_arg ? grs_arg : grs0;
  const int64_t nscale = refmx_scale_bytes(d->scale_layout, rows, ng, grs);
  const bq_dtype ft = d->float_type;
  const size_t T = (size_t)bq__dtype_size(ft);
  const double maxe = refmx_fmt_of(d->int_type).max;
  char what[1024], sku[512];
  snprintf(sku, sizeof sku, "%s", bq_plan_sku(p));
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld strides %lld/%lld grs %lld offs %d/%d force %d",
           (unsigned long long)g_seed, sku, (long long)rows, (long long)cols, (long long)G, (long long)xs, (long long)ys,
           (long long)grs_arg, c->offf, c->offc, c->force);
  dbuf X, Y, DX, S, G4;
  memset(&DX, 0, sizeof DX);
  memset(&G4, 0, sizeof G4);
  dbuf_make(&X, T, rows * xs, c->offf);
  dbuf_make(&Y, T, rows * ys, c->offc % 8);
  dbuf_make(&S, 1, nscale, 0);
  fill_garbage(X.h, X.total);
  fill_garbage(Y.h, Y.total);
  fill_garbage(S.h, S.total);
  fill_scales(S.h + S.pre, nscale, nv);
  const float g = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 4));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < cols; j++) {
      const double mag = ldexp(1.0, (int)rnd_range(-8, 8));
      store(ft, X.h + X.pre, r * xs + j, value(d, (int)(rnd() % 6), mag));
      if (bwd) store(ft, Y.h + Y.pre, r * ys + j, value(d, (int)(rnd() % 6), mag));
    }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t gi = 0; gi < ng; gi++)
      if (rnd() % 3 == 0) {
        const double v = maxe * refmx_sc(d, S.h[S.pre + refmx_scale_index(d->scale_layout, r, gi, ng, grs)], g);
        const int64_t i = r * xs + gi * G + rnd_range(0, G - 1);
        store(ft, X.h + X.pre, i, rnd() & 1 ? -v : v);
      }
  BQ_OK(bq_memcpy_to_device(X.dev, X.h, X.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(Y.dev, Y.h, Y.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(S.dev, S.h, S.total), "%s", what);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rows, a.cols = cols, a.group_size = G;
  a.x_row_stride = xs, a.y_row_stride = ys, a.group_row_stride = grs_arg;
  a.scales = S.dev + S.pre;
  if (nv) {
    dbuf_make(&G4, 4, 1, 0);
    fill_garbage(G4.h, G4.total);
    memcpy(G4.h + G4.pre, &g, 4);
    BQ_OK(bq_memcpy_to_device(G4.dev, G4.h, G4.total), "%s", what);
    a.tensor_scale = G4.dev + G4.pre;
  }
  if (bwd) {
    dbuf_make(&DX, T, rows * xs, c->offf);
    fill_garbage(DX.h, DX.total);
    BQ_OK(bq_memcpy_to_device(DX.dev, DX.h, DX.total), "%s", what);
    a.dy = Y.dev + Y.pre;
    a.dx = DX.dev + DX.pre;
    if (!deq) a.x = X.dev + X.pre;
  } else {
    a.x = X.dev + X.pre;
    a.y = Y.dev + Y.pre;
  }
  draw_sr(d, &a);
  bq__mx_force_entry = c->force;
  g_last_fn = NULL;
  BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), "%s", what);
  bq__mx_force_entry = -1;
  if (rows && cols) {
    const uintptr_t base[3] = {(uintptr_t)(bwd ? a.dy : a.x), (uintptr_t)(bwd ? a.dx : a.y), (uintptr_t)a.x};
    const int64_t stride[3] = {(bwd ? ys : xs) * (int64_t)T, (bwd ? xs : ys) * (int64_t)T, xs * (int64_t)T},
                  piece[3] = {16, 16, 16};
    const int e = want_entry(d, G, c->force, base, stride, piece, bwd && !deq ? 3 : 2);
    cr_assert(g_last_fn && g_last_fn == plan_fn(p, e), "the last launch is not %s | %s", p->kernels[e], what);
  }
  BQ_OK(bq_synchronize(NULL), "%s", what);
  dbuf *out = bwd ? &DX : &Y;
  unsigned char *got = (unsigned char *)malloc(out->total);
  cr_assert(got != NULL);
  BQ_OK(bq_memcpy_to_host(got, out->dev, out->total), "%s", what);
  refmx_op_sr(d, rows, cols, G, xs, ys, grs, X.h + X.pre, bwd ? NULL : (void *)(Y.h + Y.pre),
              bwd ? (const void *)(Y.h + Y.pre) : NULL, bwd ? (void *)(DX.h + DX.pre) : NULL, S.h + S.pre, g, 0,
              a.seed, a.offset);
  char msg[2048];
  const size_t bad = ref_compare(ft, out->h, got, (int64_t)(out->total / T), msg, sizeof msg);
  cr_assert_eq(bad, 0, "%s: %zu differ (data at %zu):\n%s| %s", bwd ? "dx" : "y", bad, out->pre, msg, what);
  check_unchanged(&X, "x", what);
  check_unchanged(&S, "scales", what);
  if (bwd) check_unchanged(&Y, "dy", what);
  free(got);
  dbuf_free(&X);
  dbuf_free(&Y);
  dbuf_free(&DX);
  dbuf_free(&S);
  dbuf_free(&G4);
}

/* a plan's cases: the formats' group sizes on their kernels and on bq_mx_any, other sizes,
   rows past a blocked tile, strides and offsets */
static void run_plan(const bq_desc *d) {
  const int e2 = d->int_type == BQ_E2M1, nv = d->scale_type == BQ_E4M3;
  const int floats = d->op == BQ_FAKE_QUANTIZE || d->direction == BQ_BACKWARD; /* no codes in or out */
  static const int64_t even[] = {2, 8, 10, 48, 64, 128, 4096}, any[] = {1, 7, 33, 64, 100, 4096};
  for (int rep = 0; rep < 12; rep++) {
    mx_case c;
    memset(&c, 0, sizeof c);
    c.force = -1;
    c.G = rep < 4 ? (rep % 2 ? 32 : 16) : rep < 6 ? (rep % 2 ? 32 : 16) : e2 ? PICK(even) : PICK(any);
    if (rep == 4 || rep == 5) c.force = BQ__MX_ANY;
    c.rows = rep == 0 ? 300 : rep == 1 ? 129 : rnd_range(1, 40);
    c.ngroups = c.G >= 4096 ? 1 : rnd_range(1, rep < 2 ? 9 : 20);
    c.xpad = rnd() % 2 ? 0 : (e2 ? 2 : 1) * rnd_range(1, 8);
    c.ypad = rnd() % 2 ? 0 : (e2 ? 2 : 1) * rnd_range(1, 8);
    c.grs_extra = rnd() % 2 ? 0 : rnd_range(1, 3);
    c.offf = rnd() % 3 ? 0 : (int)rnd_range(1, 7);
    c.offc = rnd() % 3 ? 0 : (int)rnd_range(1, 15);
    c.computed = nv && d->op == BQ_DYNAMIC_QUANTIZE && rep % 2;
    if (floats) c.G = rep < 6 ? c.G : PICK(any), c.xpad = rnd() % 2 ? 0 : rnd_range(1, 9), c.ypad = rnd() % 2 ? 0 : rnd_range(1, 9);
    if (rep >= 9) { /* bq_mx_lanes' grid: bases, strides and G in whole pieces (2^k of them a group) */
      const int64_t E = 16 / bq__dtype_size(d->float_type);
      c.G = E << rnd_range(0, 5);
      c.xpad = rnd() % 2 ? 0 : 32 * rnd_range(1, 3);
      c.ypad = rnd() % 2 ? 0 : 32 * rnd_range(1, 3);
      c.offf = c.offc = 0;
      c.ngroups = rnd_range(1, 20);
    }
    if (floats) run_case_t(d, &c);
    else run_case(d, &c);
  }
  /* a large dense one: many blocks, the amax pass's partials */
  mx_case c = {4096, 256, nv ? 16 : 32, 0, 0, 0, 0, 0, -1, nv && d->op == BQ_DYNAMIC_QUANTIZE};
  for (int k = 0; k < 2; k++) { /* (bq_mx_lanes, the rule's but for dynamic quantize, then the format's own) */
    c.force = k ? (nv ? BQ__MX_G16 : BQ__MX_G32) : d->op == BQ_DYNAMIC_QUANTIZE ? BQ__MX_LANES : -1;
    if (floats) run_case_t(d, &c);
    else run_case(d, &c);
  }
}

static void mx_begin(void) {
  gpu_begin();
  launch_note_begin();
}
TestSuite(mx, .init = mx_begin);

/* quantize and dequantize: every element and scale type x layout, the float type rotating */
Test(mx, quantize, .timeout = 900) {
  for (int k = 0; k < 4; k++)
    for (int lay = 0; lay < 3; lay++) {
      const bq_desc d = mx_desc(BQ_QUANTIZE, FTS[(k + lay) % 4], k, lay, 0);
      if (bq__is_mx(&d)) run_plan(&d);
    }
}
Test(mx, dequantize, .timeout = 900) {
  for (int k = 0; k < 4; k++)
    for (int lay = 0; lay < 3; lay++) {
      const bq_desc d = mx_desc(BQ_DEQUANTIZE, FTS[(k + lay + 1) % 4], k, lay, 0);
      if (bq__is_mx(&d)) run_plan(&d);
    }
}
/* fake quantize forward and backward, quantize and dequantize backward: every element and
   scale type x layout, the float type rotating */
Test(mx, fake_quantize_and_backward, .timeout = 900) {
  static const bq_op ops[] = {BQ_FAKE_QUANTIZE, BQ_FAKE_QUANTIZE, BQ_QUANTIZE, BQ_DEQUANTIZE};
  for (int o = 0; o < 4; o++)
    for (int k = 0; k < 4; k++)
      for (int lay = 0; lay < 3; lay++) {
        bq_desc d = mx_desc(ops[o], FTS[(o + k + lay) % 4], k, lay, 0);
        d.direction = o == 0 ? BQ_FORWARD : BQ_BACKWARD;
        if (bq__is_mx(&d)) run_plan(&d);
      }
}
/* dynamic quantize: every element type x layout x rule (UE8M0's six, NVFP4's three), the float type
   rotating; and every float type on MXFP4 and NVFP4 in the blocked layout */
Test(mx, dynamic_quantize, .timeout = 900) {
  for (int k = 0; k < 4; k++)
    for (int lay = 0; lay < 3; lay++)
      for (int rule = 0; rule < 8; rule++) {
        const bq_desc d = mx_desc(BQ_DYNAMIC_QUANTIZE, FTS[(k + lay + rule) % 4], k, lay, rule);
        bq_desc nd;
        char nm[96];
        if (bq__is_mx(&d) && bq__normalize(&d, &nd, nm, sizeof nm) == BQ_SUCCESS) run_plan(&d);
      }
  for (int f = 0; f < 4; f++)
    for (int k = 0; k < 2; k++) run_plan((const bq_desc[]){mx_desc(BQ_DYNAMIC_QUANTIZE, FTS[f], k, 2, 0)});
}

/* stochastic rounding: quantize, fake quantize and dynamic quantize of every element and
   scale type, the layout and the float type rotating, each plan's kernels as run_plan takes
   them, random seeds and offsets (the reference draws each element by its index, so rows
   at any offset are rows of the whole call) */
Test(mx, stochastic_rounding, .timeout = 900) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 4; k++) {
      bq_desc d = mx_desc(ops[o], FTS[(o + k) % 4], k, (o + k) % 3, 0);
      d.rounding = BQ_ROUND_STOCHASTIC;
      run_plan(&d);
    }
}

/* the fused rotation: quantize, dynamic quantize and dequantize of every element and scale
   type, the layout and the float type rotating, with and without the random signs (and with
   stochastic rounding), against the reference's rotation then the op (or the op then the
   inverse): calls on bq_mx_lanes' grid with every block size it takes, NVFP4's tensor scale
   given and computed */
Test(mx, fused_rotation, .timeout = 900) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_DYNAMIC_QUANTIZE, BQ_DEQUANTIZE};
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 4; k++) {
      bq_desc d = mx_desc(ops[o], FTS[(o + k) % 4], k, (o + 2 * k) % 3, 0);
      d.rotation = 1, d.random_signs = k & 1;
      if (ops[o] != BQ_DEQUANTIZE && o == k % 3) d.rounding = BQ_ROUND_STOCHASTIC;
      const int64_t E = 16 / bq__dtype_size(d.float_type);
      for (int rep = 0; rep < 8; rep++) {
        mx_case c;
        memset(&c, 0, sizeof c);
        c.force = -1;
        c.G = E << rnd_range(0, 5);
        g_rot_n = 2 << rnd_range(0, refmx_rot_max_shift(E)); /* (2 to 32 E) */
        const int64_t unit = c.G > g_rot_n ? c.G : g_rot_n;
        c.rows = rep == 0 ? 300 : rnd_range(1, 40);
        c.ngroups = unit / c.G * rnd_range(1, 4);
        c.xpad = rnd() % 2 ? 0 : 32 * rnd_range(1, 3);
        c.ypad = rnd() % 2 ? 0 : 32 * rnd_range(1, 3);
        c.computed = d.scale_type == BQ_E4M3 && d.op == BQ_DYNAMIC_QUANTIZE && rep % 2;
        run_case(&d, &c);
      }
    }
  g_rot_n = 0;
}

/* The E2M1 conversion on every f32 bit pattern: MXFP4 quantize of f32 data by the UE8M0
   scale 1 (code 127: x * 1 is x), 2^28 patterns a launch, against ref_e2m1_from_double */
Test(mx, e2m1_every_f32, .timeout = 900) {
  const bq_desc d = mx_desc(BQ_QUANTIZE, BQ_F32, 0, 0, 0);
  bq_plan *p = plan_get(&d, "every f32");
  const int64_t n = (int64_t)1 << 28, G = 32;
  void *x = NULL, *y = NULL, *s = NULL;
  BQ_OK(bq_malloc(&x, (size_t)n * 4), "x");
  BQ_OK(bq_malloc(&y, (size_t)n / 2), "y");
  BQ_OK(bq_malloc(&s, (size_t)n / G), "scales");
  BQ_OK(bq_memset(s, 127, (size_t)n / G), "scales");
  uint32_t *hx = (uint32_t *)malloc((size_t)n * 4);
  unsigned char *hy = (unsigned char *)malloc((size_t)n / 2);
  cr_assert(hx && hy);
  for (int64_t chunk = 0; chunk < 16; chunk++) {
    for (int64_t i = 0; i < n; i++) hx[i] = (uint32_t)((chunk << 28) | i);
    BQ_OK(bq_memcpy_to_device(x, hx, (size_t)n * 4), "x");
    bq_args a;
    memset(&a, 0, sizeof a);
    a.x = x, a.y = y, a.scales = s;
    a.rows = n / 4096, a.cols = 4096, a.group_size = G;
    BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), "chunk %lld", (long long)chunk);
    BQ_OK(bq_memcpy_to_host(hy, y, (size_t)n / 2), "y");
    for (int64_t i = 0; i < n; i++) {
      float f;
      memcpy(&f, &hx[i], 4);
      const uint8_t want = ref_e2m1_from_double((double)f), got = (uint8_t)((hy[i / 2] >> (4 * (i % 2))) & 15);
      if (want != got)
        cr_assert_fail("f32 0x%08x: code 0x%x, expected 0x%x (seed 0x%llx)", hx[i], got, want,
                       (unsigned long long)g_seed);
    }
  }
  free(hx);
  free(hy);
  bq_free(x);
  bq_free(y);
  bq_free(s);
}

/* The every-half tests' buffers: x every 16-bit pattern in each of `rows` rows of 65536,
   row r's groups of G taking scale code r, the codes' buffer (y, hy) to fill */
typedef struct every_half {
  int64_t rows, cols, G, n;
  void *x, *y, *s;
  uint16_t *hx;
  unsigned char *hs, *hy;
} every_half;
static every_half every_half_make(int64_t G) {
  every_half e = {256, 65536, G, 256 * 65536, NULL, NULL, NULL, NULL, NULL, NULL};
  BQ_OK(bq_malloc(&e.x, (size_t)e.n * 2), "x");
  BQ_OK(bq_malloc(&e.y, (size_t)e.n / 2), "y");
  BQ_OK(bq_malloc(&e.s, (size_t)e.n / G), "scales");
  e.hx = (uint16_t *)malloc((size_t)e.n * 2);
  e.hs = (unsigned char *)malloc((size_t)e.n / G), e.hy = (unsigned char *)malloc((size_t)e.n / 2);
  cr_assert(e.hx && e.hs && e.hy);
  for (int64_t i = 0; i < e.n; i++) e.hx[i] = (uint16_t)i;
  for (int64_t i = 0; i < e.n / G; i++) e.hs[i] = (unsigned char)(i / (e.cols / G));
  BQ_OK(bq_memcpy_to_device(e.x, e.hx, (size_t)e.n * 2), "x");
  BQ_OK(bq_memcpy_to_device(e.s, e.hs, (size_t)e.n / G), "scales");
  return e;
}
static void every_half_free(every_half *e) {
  free(e->hx);
  free(e->hs);
  free(e->hy);
  bq_free(e->x);
  bq_free(e->y);
  bq_free(e->s);
}

/* MXFP4 quantize of bf16 and f16 data, which takes two elements a step in packed half
   arithmetic (bq_e2m1_pair) where a scale's reciprocal is a normal of the type: every
   pattern of the type (a row of 65536) under every UE8M0 scale (row r's groups take code r;
   the others take the f32 form), against the reference's E2M1 of the exact product
   x 2^(127 - r) (NaN's code for 255); through bq_mx_lanes and bq_mx32 */
Test(mx, e2m1_every_half_every_scale, .timeout = 900) {
  every_half e = every_half_make(32);
  const int64_t rows = e.rows, cols = e.cols, G = e.G, n = e.n;
  void *x = e.x, *y = e.y, *s = e.s;
  const uint16_t *hx = e.hx;
  unsigned char *hy = e.hy;
  for (int t = 0; t < 2; t++) {
    const bq_dtype ft = t ? BQ_F16 : BQ_BF16;
    const bq_desc d = mx_desc(BQ_QUANTIZE, ft, 0, 0, 0);
    bq_plan *p = plan_get(&d, "every half");
    for (int force = 0; force < 2; force++) {
      BQ_OK(bq_memset(y, 0xee, (size_t)n / 2), "y");
      bq_args a;
      memset(&a, 0, sizeof a);
      a.x = x, a.y = y, a.scales = s;
      a.rows = rows, a.cols = cols, a.group_size = G;
      bq__mx_force_entry = force ? BQ__MX_G32 : BQ__MX_LANES;
      const bq_status st = bq_plan_run(p, &a, NULL, 0, NULL);
      bq__mx_force_entry = -1;
      BQ_OK(st, "%s force %d", t ? "f16" : "bf16", force);
      BQ_OK(bq_memcpy_to_host(hy, y, (size_t)n / 2), "y");
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < n; i++) {
        const int code = (int)(i / cols);
        const double v = (double)(t ? ref_f16_to_f32(hx[i]) : ref_bf16_to_f32(hx[i])) *
                         (code == 255 ? NAN : ldexp(1.0, 127 - code));
        const uint8_t want = ref_e2m1_from_double(v), got = (uint8_t)((hy[i / 2] >> (4 * (i % 2))) & 15);
        if (want != got && !bad++) first = i;
      }
      cr_assert_eq(bad, 0, "%s, %s: %lld codes differ, the first 0x%04x scale code %lld (seed 0x%llx)",
                   t ? "f16" : "bf16", force ? "bq_mx32" : "bq_mx_lanes", (long long)bad,
                   first >= 0 ? hx[first] : 0, (long long)(first / cols), (unsigned long long)g_seed);
    }
  }
  every_half_free(&e);
}

/* NVFP4 quantize of bf16 and f16 data, which compares magnitudes with per-group thresholds
   two elements a step (bq_nv_pairs) where a group's scale s = g s8 lies in [2^-90, 2^90]:
   every pattern of the type (a row of 65536) under every E4M3 scale code (row r's groups take
   code r: zero, negative and NaN scales take the f32 form) and the tensor scales 1, 2^-40,
   2^40 and a random one, against the reference's E2M1 of the f32 quotient x / s; through
   bq_mx_lanes (one and two 16-byte pieces a lane) and bq_mx16 */
Test(mx, nvfp4_every_half_every_scale, .timeout = 900) {
  every_half e = every_half_make(16);
  const int64_t rows = e.rows, cols = e.cols, G = e.G, n = e.n;
  void *x = e.x, *y = e.y, *s = e.s, *g4 = NULL;
  BQ_OK(bq_malloc(&g4, 4), "tensor scale");
  const uint16_t *hx = e.hx;
  unsigned char *hy = e.hy;
  const float gs[4] = {1.0f, 0x1p-40f, 0x1p40f, (float)ldexp(1.0 + (double)(rnd() >> 11) * 0x1p-53, (int)(rnd() % 61) - 30)};
  for (int t = 0; t < 2; t++) {
    const bq_dtype ft = t ? BQ_F16 : BQ_BF16;
    const bq_desc d = mx_desc(BQ_QUANTIZE, ft, 1, 0, 0);
    bq_plan *p = plan_get(&d, "every half, NVFP4");
    for (int gi = 0; gi < 4; gi++) {
      BQ_OK(bq_memcpy_to_device(g4, &gs[gi], 4), "tensor scale");
      for (int way = 0; way < 3; way++) {
        BQ_OK(bq_memset(y, 0xee, (size_t)n / 2), "y");
        bq_args a;
        memset(&a, 0, sizeof a);
        a.x = x, a.y = y, a.scales = s, a.tensor_scale = g4;
        a.rows = rows, a.cols = cols, a.group_size = G;
        bq__mx_force_entry = way == 2 ? BQ__MX_G16 : BQ__MX_LANES;
        bq__mx_force_lacc = way == 2 ? -1 : way;
        const bq_status st = bq_plan_run(p, &a, NULL, 0, NULL);
        bq__mx_force_entry = -1;
        bq__mx_force_lacc = -1;
        BQ_OK(st, "%s g %a way %d", t ? "f16" : "bf16", (double)gs[gi], way);
        BQ_OK(bq_memcpy_to_host(hy, y, (size_t)n / 2), "y");
        int64_t bad = 0, first = -1;
        for (int64_t r = 0; r < rows; r++) {
          const double sc = refmx_sc(&d, (uint8_t)r, gs[gi]);
          for (int64_t i = r * cols; i < (r + 1) * cols; i++) {
            const double v = t ? ref_f16_to_f32(hx[i]) : ref_bf16_to_f32(hx[i]);
            const uint8_t want = refmx_quantize(&d, v, sc, 0), got = (uint8_t)((hy[i / 2] >> (4 * (i % 2))) & 15);
            if (want != got && !bad++) first = i;
          }
        }
        cr_assert_eq(bad, 0, "%s, g %a, %s: %lld codes differ, the first 0x%04x scale code %lld (seed 0x%llx)",
                     t ? "f16" : "bf16", (double)gs[gi], way == 2 ? "bq_mx16" : way ? "bq_mx_lanes, two pieces" : "bq_mx_lanes",
                     (long long)bad, first >= 0 ? hx[first] : 0, (long long)(first / cols), (unsigned long long)g_seed);
      }
    }
  }
  every_half_free(&e);
  bq_free(g4);
}

/* MXFP4 and NVFP4 dequantize, which decodes four codes a step from byte tables
   (bq_e2m1_f32x4): every code byte (a row of 512 elements) under every scale code (row r's
   groups take code r), NVFP4's tensor scale 1 and a random one, every float type, through
   bq_mx_lanes and the format's group kernel, against the reference's value times C(scale) */
Test(mx, e2m1_dequantize_every_code, .timeout = 900) {
  const int64_t rows = 256, cols = 512, n = rows * cols;
  unsigned char *hq = (unsigned char *)malloc((size_t)n / 2), *hs = (unsigned char *)malloc((size_t)n / 16);
  void *q = NULL, *s = NULL, *y = NULL, *g4 = NULL;
  cr_assert(hq && hs);
  for (int64_t i = 0; i < n / 2; i++) hq[i] = (unsigned char)i;
  BQ_OK(bq_malloc(&q, (size_t)n / 2), "codes");
  BQ_OK(bq_malloc(&s, (size_t)n / 16), "scales");
  BQ_OK(bq_malloc(&y, (size_t)n * 8), "y");
  BQ_OK(bq_malloc(&g4, 4), "tensor scale");
  BQ_OK(bq_memcpy_to_device(q, hq, (size_t)n / 2), "codes");
  unsigned char *want = (unsigned char *)malloc((size_t)n * 8), *got = (unsigned char *)malloc((size_t)n * 8);
  cr_assert(want && got);
  char msg[1024];
  for (int k = 0; k < 2; k++) {
    const int64_t G = k ? 16 : 32, ng = cols / G;
    for (int64_t i = 0; i < rows * ng; i++) hs[i] = (unsigned char)(i / ng);
    BQ_OK(bq_memcpy_to_device(s, hs, (size_t)(rows * ng)), "scales");
    for (int f = 0; f < 4; f++)
      for (int gi = 0; gi < (k ? 2 : 1); gi++) {
        const bq_desc d = mx_desc(BQ_DEQUANTIZE, FTS[f], k, 0, 0);
        const size_t T = (size_t)bq__dtype_size(FTS[f]);
        const float g = gi ? (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-20, 20)) : 1.0f;
        BQ_OK(bq_memcpy_to_device(g4, &g, 4), "tensor scale");
        bq_plan *p = plan_get(&d, "every code, dequantize");
        for (int64_t r = 0; r < rows; r++) {
          const double sc = refmx_sc(&d, (uint8_t)r, g);
          for (int64_t e = 0; e < cols; e++)
            refmx_dequantize(&d, (uint8_t)((hq[(r * cols + e) / 2] >> (4 * (e % 2))) & 15), sc, want, r * cols + e);
        }
        for (int way = 0; way < 2; way++) {
          BQ_OK(bq_memset(y, 0xee, (size_t)n * T), "y");
          bq_args a;
          memset(&a, 0, sizeof a);
          a.x = q, a.y = y, a.scales = s, a.tensor_scale = k ? g4 : NULL;
          a.rows = rows, a.cols = cols, a.group_size = G;
          const int entry = way ? (k ? BQ__MX_G16 : BQ__MX_G32) : BQ__MX_LANES;
          bq__mx_force_entry = entry;
          const bq_status st = bq_plan_run(p, &a, NULL, 0, NULL);
          bq__mx_force_entry = -1;
          BQ_OK(st, "%s g %a way %d", bq_plan_sku(p), (double)g, way);
          cr_assert(g_last_fn && g_last_fn == plan_fn(p, entry), "%s: the last launch is not %s", bq_plan_sku(p),
                    p->kernels[entry]);
          BQ_OK(bq_memcpy_to_host(got, y, (size_t)n * T), "y");
          const size_t bad = ref_compare(FTS[f], want, got, n, msg, sizeof msg);
          cr_assert_eq(bad, 0, "%s, g %a, %s: %zu values differ (row r: scale code r, element e: code byte e / 2)\n%s"
                       "(seed 0x%llx)", bq_plan_sku(p), (double)g, way ? "the group kernel" : "bq_mx_lanes", bad, msg,
                       (unsigned long long)g_seed);
        }
      }
  }
  free(hq), free(hs), free(want), free(got);
  bq_free(q), bq_free(s), bq_free(y), bq_free(g4);
}

/* ---- the fused producers emitting a microscaling format ---------------------------------- */
typedef struct fmx_case {
  int64_t rows, cols, G, xpad, ypad, grs_extra;
  int res;      /* 0 none, 1 a buffer, 2 in place (x) */
  int with_out, offx, offy, force, computed;
} fmx_case;

static void run_fused(const bq_desc *d, const fmx_case *c) {
  bq_plan *p = plan_get(d, "fused mx");
  const int rms = d->op == BQ_RMSNORM_QUANTIZE, e2 = d->int_type == BQ_E2M1, nv = d->scale_type == BQ_E4M3;
  const int res = rms ? c->res : 0;
  const int64_t rows = c->rows, D = c->cols, G = c->G, ng = D / G, in_cols = rms ? D : 2 * D;
  const int64_t xs = in_cols + c->xpad, ys = D + c->ypad, os = D;
  const int64_t grs0 = refmx_default_grs(d->scale_layout, rows, ng);
  const int64_t grs_arg = d->scale_layout == BQ_SCALES_BLOCKED || !c->grs_extra ? 0 : grs0 + c->grs_extra;
  const int64_t grs = grs_arg ? grs_arg : grs0;
  const int64_t nscale = refmx_scale_bytes(d->scale_layout, rows, ng, grs);
  const size_t T = (size_t)bq__dtype_size(d->float_type);
  char what[1024];
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] G %lld strides %lld/%lld grs %lld res %d out %d offs %d/%d "
           "force %d%s", (unsigned long long)g_seed, bq_plan_sku(p), (long long)rows, (long long)D, (long long)G,
           (long long)xs, (long long)ys, (long long)grs_arg, res, c->with_out, c->offx, c->offy, c->force,
           c->computed ? " g computed" : "");
  dbuf X, R, W, O, Y, S, G4;
  memset(&R, 0, sizeof R);
  memset(&O, 0, sizeof O);
  memset(&G4, 0, sizeof G4);
  dbuf_make(&X, T, rows * xs, c->offx);
  if (res == 1) dbuf_make(&R, T, rows * D, 0);
  dbuf_make(&W, T, D, 0);
  if (c->with_out) dbuf_make(&O, T, rows * os, 0);
  dbuf_make(&Y, 1, e2 ? rows * ys / 2 : rows * ys, c->offy);
  dbuf_make(&S, 1, nscale, 0);
  fill_garbage(X.h, X.total);
  int kind = (int)(rnd() % 6);
  double mag = ldexp(1.0, (int)rnd_range(-4, 4));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < in_cols; i++) {
      if (i % G == 0 && rnd() % 4 == 0) kind = (int)(rnd() % 6), mag = ldexp(1.0, (int)rnd_range(-4, 4));
      store(d->float_type, X.h + X.pre, r * xs + i, value(d, kind == 3 ? 5 : kind, mag));
    }
  if (res == 1) {
    fill_garbage(R.h, R.total);
    for (int64_t i = 0; i < rows * D; i++) store(d->float_type, R.h + R.pre, i, value(d, 5, mag));
  }
  fill_garbage(W.h, W.total);
  for (int64_t i = 0; i < D; i++) store(d->float_type, W.h + W.pre, i, rnd() % 16 == 0 ? 0.0 : 4 * rnd_unit() - 2);
  if (c->with_out) fill_garbage(O.h, O.total);
  fill_garbage(Y.h, Y.total);
  fill_garbage(S.h, S.total);
  BQ_OK(bq_memcpy_to_device(X.dev, X.h, X.total), "%s", what);
  if (res == 1) BQ_OK(bq_memcpy_to_device(R.dev, R.h, R.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(W.dev, W.h, W.total), "%s", what);
  if (c->with_out) BQ_OK(bq_memcpy_to_device(O.dev, O.h, O.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(Y.dev, Y.h, Y.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(S.dev, S.h, S.total), "%s", what);
  float g = (float)ldexp(1.0 + rnd_unit(), (int)rnd_range(-12, 2));
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rows, a.cols = D, a.group_size = G;
  a.x = X.dev + X.pre, a.x_row_stride = xs;
  a.y = Y.dev + Y.pre, a.y_row_stride = ys;
  a.out_scales = S.dev + S.pre, a.group_row_stride = grs_arg;
  a.residual = res == 1 ? (void *)(R.dev + R.pre) : res == 2 ? (void *)(X.dev + X.pre) : NULL;
  a.residual_row_stride = res == 2 ? xs : 0;
  a.norm_weight = rms ? W.dev + W.pre : NULL;
  a.eps = rms ? 1e-6 : 0.0;
  a.out = c->with_out ? (void *)(O.dev + O.pre) : NULL;
  if (nv) tensor_scale_buf(&G4, &a, c->computed, g, what);
  draw_sr(d, &a); /* (stochastic rounding's seed and offset, the rotation's block and signs) */
  bq__fused_force_entry = c->force;
  void *ws = run_with_workspace(p, &a, what);
  bq__fused_force_entry = -1;
  if (c->force >= 0 && rows && D)
    cr_assert(g_last_fn && g_last_fn == plan_fn(p, c->force), "the last launch is not %s | %s", p->kernels[c->force],
              what);
  BQ_OK(bq_synchronize(NULL), "%s", what);
  if (ws) bq_free(ws);

  /* the reference on the host images: the producer (h into the residual image, n into
     out's), then microscaling dynamic quantize of n */
  reff_producer rp;
  memset(&rp, 0, sizeof rp);
  rp.kind = rms ? REFF_RMSNORM : d->activation == BQ_GELU_TANH ? REFF_GELU_TANH_MUL : REFF_SILU_MUL;
  rp.T = d->float_type;
  rp.rows = rows, rp.cols = D;
  rp.x = X.h + X.pre, rp.x_row_stride = xs;
  rp.residual = res == 1 ? (void *)(R.h + R.pre) : res == 2 ? (void *)(X.h + X.pre) : NULL;
  rp.residual_row_stride = res == 2 ? xs : D;
  rp.weight = W.h + W.pre;
  rp.eps = 1e-6;
  rp.out = c->with_out ? (void *)(O.h + O.pre) : NULL;
  rp.out_row_stride = os;
  unsigned char *dense = (unsigned char *)malloc((size_t)(rows * D) * T + 1);
  cr_assert(dense && reff_produce(&rp, dense) == 0, "%s", what);
  bq_desc md = *d;
  md.op = BQ_DYNAMIC_QUANTIZE, md.activation = BQ_ACTIVATION_DEFAULT, md.granularity = BQ_PER_GROUP;
  const float eg = refmx_op_full(&md, rows, D, G, D, ys, grs, dense, Y.h + Y.pre, NULL, NULL, S.h + S.pre,
                                 c->computed ? NAN : g, 0, a.seed, a.offset, g_rot_n);
  free(dense);
  char msg[2048];
  const dbuf *outs[] = {&Y, &S, &X, &R, &O};
  const char *names[] = {"codes", "scales", "x (h in place)", "residual (h)", "out"};
  const bq_dtype types[] = {BQ_U8, BQ_U8, d->float_type, d->float_type, d->float_type};
  for (int k = 0; k < 5; k++) {
    const dbuf *b = outs[k];
    if (!b->dev) continue;
    unsigned char *got = (unsigned char *)malloc(b->total);
    cr_assert(got);
    BQ_OK(bq_memcpy_to_host(got, b->dev, b->total), "%s", what);
    const size_t es = types[k] == BQ_U8 ? 1 : T;
    const size_t bad = ref_compare(types[k], b->h, got, (int64_t)(b->total / es), msg, sizeof msg);
    cr_assert_eq(bad, 0, "%s: %zu differ (from the allocation's start; data at %zu):\n%s| %s", names[k], bad,
                 b->pre / es, msg, what);
    free(got);
  }
  check_unchanged(&W, "norm_weight", what);
  if (c->computed && rows && D) {
    float gg;
    BQ_OK(bq_memcpy_to_host(&gg, G4.dev + G4.pre, 4), "%s", what);
    cr_assert(!memcmp(&gg, &eg, 4), "tensor scale %a, expected %a | %s", (double)gg, (double)eg, what);
  }
  dbuf_free(&X);
  dbuf_free(&R);
  dbuf_free(&W);
  dbuf_free(&O);
  dbuf_free(&Y);
  dbuf_free(&S);
  dbuf_free(&G4);
}

static void run_fused_plan(const bq_desc *d, int reps) {
  const int e2 = d->int_type == BQ_E2M1, nv = d->scale_type == BQ_E4M3;
  const int64_t V = 16 / bq__dtype_size(d->float_type);
  for (int rep = 0; rep < reps; rep++) {
    fmx_case c;
    memset(&c, 0, sizeof c);
    c.force = -1;
    c.G = rep % 3 == 2 ? (e2 ? 2 * rnd_range(1, 24) : rnd_range(1, 48)) : nv ? 16 : 32; /* (the generic path) */
    c.rows = rep == 0 ? 300 : rnd_range(1, 40);
    c.cols = c.G * rnd_range(1, rep == 1 ? 400 : 40);
    c.xpad = rnd() % 2 ? 0 : rnd_range(1, 9) * (rnd() % 2 ? V : 1);
    c.ypad = rnd() % 2 ? 0 : (e2 ? 2 : 1) * rnd_range(1, 8);
    c.grs_extra = rnd() % 2 ? 0 : rnd_range(1, 3);
    c.res = (int)(rnd() % 3);
    c.with_out = (int)(rnd() % 2);
    c.offx = rnd() % 3 ? 0 : (int)rnd_range(1, (int)V - 1 > 1 ? (int)V - 1 : 1);
    c.offy = rnd() % 3 ? 0 : (int)rnd_range(1, 15);
    c.computed = nv && rep % 2;
    run_fused(d, &c);
  }
}

static bq_desc fmx_desc(bq_op op, bq_activation act, bq_dtype ft, int k, int lay, int rule) {
  bq_desc d = mx_desc(op, ft, k, lay, rule);
  d.activation = act;
  return d;
}
static const bq_op FOPS[] = {BQ_RMSNORM_QUANTIZE, BQ_GATED_QUANTIZE, BQ_GATED_QUANTIZE};
static const bq_activation FACTS[] = {BQ_ACTIVATION_DEFAULT, BQ_SILU, BQ_GELU_TANH};

/* every op x format x layout x float type (the library's rule), then every rule once a format
   (the op, layout and float type rotating) */
Test(mx, fused_producers, .timeout = 900) {
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 4; k++)
      for (int lay = 0; lay < 3; lay++)
        for (int f = 0; f < 4; f++)
          run_fused_plan((const bq_desc[]){fmx_desc(FOPS[o], FACTS[o], FTS[f], k, lay, 0)}, 3);
  int i = 0;
  for (int k = 0; k < 4; k++)
    for (int rule = 1; rule < 8; rule++, i++) {
      const bq_desc d = fmx_desc(FOPS[i % 3], FACTS[i % 3], FTS[i % 4], k, i % 3, rule);
      bq_desc nd;
      char nm[96];
      if (bq__normalize(&d, &nd, nm, sizeof nm) == BQ_SUCCESS) run_fused_plan(&d, 4);
    }
}

/* E2M1 from bf16 and f16 on the fused producers' fast path: two elements a step
   (bq_nv_pairs, bq_e2m1_pairs) where the group's scale allows, the f32 form where it does not
   (tiny and huge groups, f16's narrow range); every op x MXFP4 and NVFP4 x both types, the
   layout and the rule (MXFP4's, whose pairs take any) rotating, more cases than above */
Test(mx, fused_half_pairs, .timeout = 900) {
  int i = 0;
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 2; k++)
      for (int t = 0; t < 2; t++, i++) {
        const int rule = k == 0 ? (int)(rnd() % 6) : 0; /* (MXFP4: the library's, or a UE8M0 rule) */
        run_fused_plan((const bq_desc[]){fmx_desc(FOPS[o], FACTS[o], t ? BQ_F16 : BQ_BF16, k, i % 3, rule)}, 6);
      }
}

/* The fused producers with stochastic rounding or the rotation (or both): the producer, then
   microscaling dynamic quantize of its values, rotating and rounding as the desc says; every
   op and format, the layout and the float type rotating, random signs now and then, NVFP4's
   tensor scale given and computed; rows on the rotation's grid (x strided anywhere) */
Test(mx, fused_producers_sr_and_rotation, .timeout = 900) {
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 4; k++)
      for (int form = 1; form < 4; form++) { /* bit 0: stochastic rounding, bit 1: the rotation */
        bq_desc d = fmx_desc(FOPS[o], FACTS[o], FTS[(o + k + form) % 4], k, (o + 2 * k + form) % 3, 0);
        d.rounding = form & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
        d.rotation = form >> 1, d.random_signs = (form >> 1) & (int)(rnd() & 1);
        const int nv = d.scale_type == BQ_E4M3, e2 = d.int_type == BQ_E2M1;
        const int64_t E = 16 / bq__dtype_size(d.float_type);
        for (int rep = 0; rep < 3; rep++) {
          fmx_case c;
          memset(&c, 0, sizeof c);
          c.force = -1;
          c.G = d.rotation ? E << rnd_range(0, 5) : nv ? 16 : e2 ? 2 * rnd_range(1, 24) : rnd_range(1, 48);
          if (nv && d.rotation) c.G = E > 16 ? E : 16; /* (NVFP4: groups of 16) */
          g_rot_n = d.rotation ? 2 << rnd_range(0, refmx_rot_max_shift(E)) : 0;
          const int64_t unit = c.G > g_rot_n ? c.G : g_rot_n;
          c.rows = rep == 0 ? 200 : rnd_range(1, 40);
          c.cols = unit * rnd_range(1, 24);
          c.xpad = rnd() % 2 ? 0 : rnd_range(1, 9);
          c.ypad = d.rotation ? (rnd() % 2 ? 0 : 32 * rnd_range(1, 3)) : (e2 ? 2 : 1) * rnd_range(0, 8);
          c.res = (int)(rnd() % 3);
          c.with_out = (int)(rnd() % 2);
          c.computed = nv && rep % 2;
          run_fused(&d, &c);
        }
      }
  g_rot_n = 0;
}

/* Each entry point by name (bq__fused_force_entry), on rows it takes whole: dense, aligned,
   of exactly the accesses it holds (the long and staged entries: longer rows); no residual
   for the narrow entries that take none. MXFP4 and NVFP4 (computed tensor scale: the amax
   launches too), bf16 and f32, both ops. */
Test(mx, fused_entry_points, .timeout = 900) {
  for (int v = 0; v < 4; v++) {
    const bq_desc d = fmx_desc(FOPS[v % 3], FACTS[v % 3], v < 2 ? BQ_BF16 : BQ_F32, v % 2, v % 3, 0);
    const int64_t V = 16 / bq__dtype_size(d.float_type);
    for (int e = 0; e < BQ__FUSED_AMAX; e++) {
      const int64_t held = bq__fused_held(e);
      fmx_case c;
      memset(&c, 0, sizeof c);
      c.force = e;
      c.G = d.scale_type == BQ_E4M3 ? 16 : 32;
      c.rows = e == BQ__FUSED_STAGED ? 300 : 7;
      c.cols = (e == BQ__FUSED_LONG ? 3000 : e == BQ__FUSED_STAGED ? 600 : held) * V;
      c.res = e >= BQ__FUSED_M8 && e <= BQ__FUSED_M16 && e != BQ__FUSED_M4F ? 0 : 1 + e % 2;
      c.with_out = e % 2;
      c.computed = d.scale_type == BQ_E4M3;
      run_fused(&d, &c);
    }
  }
}
