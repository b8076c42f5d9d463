/* tests/test_gpu_affine.c - the affine ops on the GPU against the CPU reference
   (tests/reference.h), bit for bit: quantize, dequantize and fake quantize, forward and
   backward, f32/f64/f16/bf16 x s8/u8 x three q ranges x every granularity.

   Every run poisons its whole output allocation first (guard bytes before and after the
   output, gaps between strided rows) and compares every byte of it afterwards; inputs
   are checked to be unchanged. Inputs are drawn fresh (seed printed on failure; set
   BQ_TEST_SEED=<n> to replay one) with edge values spliced in: exact ties, range edges,
   NaN, +-inf, huge values, signed zeros, subnormals, zero/NaN/inf/negative scale
   elements, odd and extreme zero points.

   Without a usable CUDA driver/device every test is skipped. */
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_sr.h"
#include "reference_rotate.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLAN_CACHE_MAX 96
#define GPU_UTIL_BUFFERS
#include "gpu_util.h"

/* Every test starts here: skip without a GPU (not pass), then draw the seed. */
#define GPU_BEGIN() gpu_begin()


/* ==== value generators ================================================================== */

static const char *op_name(bq_op op)
{
  return op == BQ_QUANTIZE ? "quantize" : op == BQ_DEQUANTIZE ? "dequantize" : "fake_quantize";
}
static const char *gran_name(bq_granularity g)
{
  return g == BQ_PER_TENSOR ? "per_tensor" : g == BQ_PER_CHANNEL ? "per_channel"
         : g == BQ_PER_TOKEN ? "per_token" : "per_group";
}

static void store_t(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

static void store_bits(bq_dtype t, void *buf, int64_t i, uint64_t bits)
{
  unsigned char *p = (unsigned char *)buf;
  if (t == BQ_F64) memcpy(p + 8 * i, &bits, 8);
  else if (t == BQ_F32) { uint32_t b = (uint32_t)bits; memcpy(p + 4 * i, &b, 4); }
  else { uint16_t b = (uint16_t)bits; memcpy(p + 2 * i, &b, 2); }
}

#define N_SPECIALS 19
/* Edge values of the float type t, as bit patterns where that matters. */
static void put_special(bq_dtype t, void *buf, int64_t i, int which)
{
  /* NaN, -NaN with payload, sNaN, +inf, -inf, +max, -max, min subnormal, max subnormal,
     min normal: per type */
  static const uint64_t f64b[] = {0x7ff8000000000000ull, 0xfff8000000001234ull, 0x7ff0000000000001ull,
                                  0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7fefffffffffffffull,
                                  0xffefffffffffffffull, 0x0000000000000001ull, 0x000fffffffffffffull,
                                  0x0010000000000000ull};
  static const uint64_t f32b[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                                  0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x007fffffu, 0x00800000u};
  static const uint64_t f16b[] = {0x7e00, 0xfe12, 0x7c01, 0x7c00, 0xfc00, 0x7bff,
                                  0xfbff, 0x0001, 0x03ff, 0x0400};
  static const uint64_t b16b[] = {0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80, 0x7f7f,
                                  0xff7f, 0x0001, 0x007f, 0x0080};
  const uint64_t *tab = t == BQ_F64 ? f64b : t == BQ_F32 ? f32b : t == BQ_F16 ? f16b : b16b;
  if (which < 10) {
    store_bits(t, buf, i, tab[which]);
    if (which == 7 && (rnd() & 1)) store_bits(t, buf, i, tab[which] | (t == BQ_F64 ? 1ull << 63 : t == BQ_F32 ? 0x80000000u : 0x8000u));
    return;
  }
  switch (which) {
  case 10: store_t(t, buf, i, 1e30); break;
  case 11: store_t(t, buf, i, -1e30); break;
  case 12: store_t(t, buf, i, 65504.0); break;
  case 13: store_t(t, buf, i, -65504.0); break;
  case 14: store_t(t, buf, i, FLT_MAX); break;
  case 15: store_t(t, buf, i, 0.0); break;
  case 16: store_t(t, buf, i, -0.0); break;
  case 17: store_t(t, buf, i, (rnd() & 1) ? 1e300 : -1e-300); break; /* f64 only; others round */
  default: store_bits(t, buf, i, rnd()); break;                       /* any bit pattern */
  }
}

/* Per-tensor (host) scale: finite > 0, power of two or a full-mantissa double. */
static double pick_scale(void)
{
  if (rnd() % 5 < 2) return ldexp(1.0, (int)rnd_range(-10, 2));
  return ldexp(1.0 + rnd_unit(), (int)rnd_range(-10, 1));
}

/* Device-array scale element: sometimes 0, NaN, -0, inf or negative. */
static double pick_dev_scale(int specials)
{
  if (specials && rnd() % 100 < 6) {
    switch (rnd() % 5) {
    case 0: return 0.0;
    case 1: return NAN;
    case 2: return -0.0;
    case 3: return INFINITY;
    default: return -pick_scale();
    }
  }
  return pick_scale();
}

/* Zero point: mostly odd inside the q range, sometimes outside it, rarely extreme. */
static int32_t pick_zp(int qmin, int qmax, int specials)
{
  int r = (int)(rnd() % 100);
  if (r < 60) {
    int64_t v = rnd_range(qmin, qmax);
    if (!(v & 1) && qmin != qmax) v += v < qmax ? 1 : -1;
    return (int32_t)v;
  }
  if (r < 80) return (int32_t)rnd_range(qmin - 20, qmax + 20);
  if (r < 90 || !specials) return 0;
  switch (rnd() % 4) {
  case 0: return INT32_MAX;
  case 1: return INT32_MIN;
  case 2: return (1 << 30) + 1;
  default: return -(1 << 30) - 1;
  }
}

/* x (a float) for an element quantized with C scale s and zero point zp. */
static void gen_x(bq_dtype t, void *buf, int64_t i, double s, int32_t zp, int qmin, int qmax, int specials)
{
  double sg = (isfinite(s) && s != 0) ? fabs(s) : 1.0;
  double lo = (double)qmin - zp - 16, hi = (double)qmax - zp + 16, k;
  int r = (int)(rnd() % 100);
  if (specials && r >= 86) {
    put_special(t, buf, i, (int)(rnd() % N_SPECIALS));
    return;
  }
  if (r < 50) {
    store_t(t, buf, i, (lo + (hi - lo) * rnd_unit()) * sg);
  } else if (r < 65) { /* exact tie when s is a power of two */
    k = floor(lo + (hi - lo) * rnd_unit());
    store_t(t, buf, i, (k + 0.5) * sg);
  } else if (r < 72) {
    k = floor(lo + (hi - lo) * rnd_unit());
    store_t(t, buf, i, k * sg);
  } else if (r < 82) { /* the edges of the q range: the mask's and the clamp's boundaries */
    static const double d[] = {0.5, -0.5, 0.0, 1.0, -1.0, 0.49, 1.5};
    double base = (rnd() & 1) ? (double)qmax - zp : (double)qmin - zp;
    store_t(t, buf, i, (base + d[rnd() % 7]) * sg);
  } else { /* small: around zero */
    store_t(t, buf, i, (rnd_unit() * 4.0 - 2.0) * sg);
  }
}

static void gen_q(bq_dtype it, void *buf, int64_t i, int qmin, int qmax, int32_t zp)
{
  unsigned char *p = (unsigned char *)buf;
  int r = (int)(rnd() % 100), v;
  if (r < 85) { p[i] = (unsigned char)rnd(); return; } /* any stored value, in range or not */
  switch (rnd() % 6) {
  case 0: v = qmin; break;
  case 1: v = qmax; break;
  case 2: v = zp; break;
  case 3: v = it == BQ_U8 ? 255 : 127; break;
  case 4: v = it == BQ_U8 ? 0 : -128; break;
  default: v = 0; break;
  }
  p[i] = (unsigned char)v;
}

static void gen_dy(bq_dtype t, void *buf, int64_t i, int specials)
{
  int r = (int)(rnd() % 100);
  if (specials && r < 10) put_special(t, buf, i, (int)(rnd() % N_SPECIALS));
  else if (r < 16) store_t(t, buf, i, (double)rnd_range(-8, 8));
  else store_t(t, buf, i, (rnd_unit() * 2.0 - 1.0) * ldexp(1.0, (int)rnd_range(-6, 6)));
}

static void store_scale(bq_dtype st, void *buf, int64_t i, double v)
{
  if (st == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(st, buf, i, (float)v);
}

/* ==== one run: buffers with guards, generation, launch, check ============================ */

#define GUARD GPU_GUARD /* bytes of poison before and after every output, garbage around inputs */

typedef struct gcase {
  bq_desc d;     /* as given to bq_plan_select */
  bq_args a;     /* sizes and strides; pointers and quantization parameters are filled in */
  int off[4];    /* element offsets of x, y, dy, dx from a 256-byte boundary */
  int soff;      /* element offset of scales and zero points */
  int zp_null;   /* zero_points = NULL (all zero) */
  int specials;  /* splice edge values */
  unsigned char poison;
} gcase;

typedef struct prep {
  gcase c;
  bq_desc dn; /* normalized */
  ref_layout L;
  bq_dtype xt, ot, st;
  int bwd, has_x, has_y_host;
  dbuf x, dy, out, sc, zp;
  unsigned char *expected, *got;
  bq_args ha, da; /* host and device arguments */
  char what[640];
} prep;

static void prep_describe(prep *P)
{
  const bq_desc *d = &P->dn;
  const bq_args *a = &P->c.a;
  int n = snprintf(P->what, sizeof P->what, "%s %s %s T=%s I=%s q[%d,%d] scale_type=%s | ",
                   op_name(d->op), d->direction == BQ_BACKWARD ? "backward" : "forward",
                   gran_name(d->granularity), ref_dtype_name(d->float_type), ref_dtype_name(d->int_type),
                   d->qmin, d->qmax, ref_dtype_name(d->scale_type));
  size_t k = n > 0 ? (size_t)n : 0;
  switch (d->granularity) {
  case BQ_PER_TENSOR:
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "numel=%lld scale=%a zp=%d", (long long)a->numel,
                          P->ha.scale, (int)P->ha.zero_point);
    break;
  case BQ_PER_CHANNEL: {
    int i;
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "shape=[");
    for (i = 0; i < a->rank && k < sizeof P->what; i++)
      k += (size_t)snprintf(P->what + k, sizeof P->what - k, "%s%lld", i ? "," : "", (long long)a->shape[i]);
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "] axis=%d", a->axis);
    break;
  }
  default:
    k += (size_t)snprintf(P->what + k, sizeof P->what - k, "rows=%lld cols=%lld x_row_stride=%lld y_row_stride=%lld",
                          (long long)a->rows, (long long)a->cols, (long long)a->x_row_stride,
                          (long long)a->y_row_stride);
    if (d->granularity == BQ_PER_GROUP && k < sizeof P->what)
      k += (size_t)snprintf(P->what + k, sizeof P->what - k, " group_size=%lld group_row_stride=%lld",
                            (long long)a->group_size, (long long)a->group_row_stride);
    break;
  }
  if (k < sizeof P->what)
    snprintf(P->what + k, sizeof P->what - k,
             " | offsets x=%d y=%d dy=%d dx=%d params=%d | zero_points=%s | poison=0x%02x | "
             "BQ_TEST_SEED=0x%llx",
             P->c.off[0], P->c.off[1], P->c.off[2], P->c.off[3], P->c.soff,
             P->c.zp_null ? "NULL" : "array", P->c.poison, (unsigned long long)g_seed);
}

/* Allocates everything for one case (host images and device buffers). */
static void prep_init(prep *P, const gcase *c)
{
  memset(P, 0, sizeof *P);
  P->c = *c;
  P->dn = ref_desc_normalize(&c->d);
  if (P->dn.granularity == BQ_PER_TENSOR) P->dn.scale_type = P->dn.float_type == BQ_F64 ? BQ_F64 : BQ_F32;
  cr_assert_eq(ref_layout_init(&P->L, &P->dn, &c->a), 0, "bad test case (layout)");
  P->bwd = P->dn.direction == BQ_BACKWARD;
  P->xt = ref_x_type(&P->dn);
  P->ot = ref_out_type(&P->dn);
  P->st = P->dn.scale_type;
  P->has_x = !(P->bwd && P->dn.op == BQ_DEQUANTIZE); /* dequantize backward does not read x */
  if (P->has_x) dbuf_make(&P->x, ref_dtype_size(P->xt), P->L.x_extent, c->off[0]);
  if (P->bwd) dbuf_make(&P->dy, ref_dtype_size(P->dn.float_type), P->L.y_extent, c->off[2]);
  dbuf_make(&P->out, ref_dtype_size(P->ot), P->bwd ? P->L.x_extent : P->L.y_extent, P->bwd ? c->off[3] : c->off[1]);
  if (P->dn.granularity != BQ_PER_TENSOR) {
    dbuf_make(&P->sc, ref_dtype_size(P->st), P->L.n_params, c->soff);
    if (!c->zp_null) dbuf_make(&P->zp, 4, P->L.n_params, c->soff);
  }
  P->expected = (unsigned char *)malloc(P->out.total);
  P->got = (unsigned char *)malloc(P->out.total);
  cr_assert(P->expected && P->got);

  P->ha = c->a;
  P->da = c->a;
  P->ha.x = P->has_x ? P->x.h + P->x.pre : NULL;
  P->da.x = P->has_x ? P->x.dev + P->x.pre : NULL;
  P->ha.dy = P->bwd ? P->dy.h + P->dy.pre : NULL;
  P->da.dy = P->bwd ? P->dy.dev + P->dy.pre : NULL;
  P->ha.y = P->bwd ? NULL : P->expected + P->out.pre;
  P->da.y = P->bwd ? NULL : P->out.dev + P->out.pre;
  P->ha.dx = P->bwd ? P->expected + P->out.pre : NULL;
  P->da.dx = P->bwd ? P->out.dev + P->out.pre : NULL;
  if (P->dn.granularity != BQ_PER_TENSOR) {
    P->ha.scales = P->sc.h + P->sc.pre;
    P->da.scales = P->sc.dev + P->sc.pre;
    P->ha.zero_points = c->zp_null ? NULL : (const int32_t *)(const void *)(P->zp.h + P->zp.pre);
    P->da.zero_points = c->zp_null ? NULL : (const int32_t *)(const void *)(P->zp.dev + P->zp.pre);
  }
}

/* Draws fresh inputs into the host images. keep_scalars: keep the per-tensor scale and
   zero point (a captured graph holds them by value). */
static void prep_generate(prep *P, int keep_scalars)
{
  const bq_desc *d = &P->dn;
  const ref_layout *L = &P->L;
  int qmin = d->qmin, qmax = d->qmax, sp = P->c.specials;
  int64_t e, xi, yi, pi;
  if (P->has_x) fill_garbage(P->x.h, P->x.total);
  if (P->bwd) fill_garbage(P->dy.h, P->dy.total);
  if (d->granularity == BQ_PER_TENSOR) {
    if (!keep_scalars) {
      P->ha.scale = P->da.scale = pick_scale();
      P->ha.zero_point = P->da.zero_point = ref_is_fp8(d->int_type) ? 0 : pick_zp(qmin, qmax, sp && rnd() % 4 == 0);
    }
  } else {
    void *s = P->sc.h + P->sc.pre;
    fill_garbage(P->sc.h, P->sc.total);
    for (pi = 0; pi < L->n_params; pi++) store_scale(P->st, s, pi, pick_dev_scale(sp));
    if (sp && L->n_params >= 8) { /* at least one zero and one NaN scale */
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), 0.0);
      store_scale(P->st, s, rnd_range(0, L->n_params - 1), NAN);
    }
    if (!P->c.zp_null) {
      int32_t *z = (int32_t *)(void *)(P->zp.h + P->zp.pre);
      fill_garbage(P->zp.h, P->zp.total);
      for (pi = 0; pi < L->n_params; pi++) z[pi] = pick_zp(qmin, qmax, sp);
    }
  }
  for (e = 0; e < L->count; e++) {
    double s;
    int32_t zp;
    ref_layout_index(L, e, &xi, &yi, &pi);
    s = ref_scale_d(d, &P->ha, pi);
    if (d->float_type != BQ_F64 && d->granularity == BQ_PER_TENSOR) s = (double)(float)s;
    zp = ref_zero_point(d, &P->ha, pi);
    if (P->has_x) {
      if (P->xt == BQ_S8 || P->xt == BQ_U8) gen_q(P->xt, (void *)P->ha.x, xi, qmin, qmax, zp);
      else if (ref_is_fp8(P->xt)) ((unsigned char *)(void *)P->ha.x)[xi] = (unsigned char)rnd(); /* FP8 codes: any */
      else gen_x(P->xt, (void *)P->ha.x, xi, s, zp, qmin, qmax, sp);
    }
    if (P->bwd) gen_dy(d->float_type, (void *)P->ha.dy, yi, sp);
  }
  prep_describe(P);
}

/* Uploads the input images and poisons the whole output allocation. */
static void prep_upload(prep *P)
{
  if (P->has_x) BQ_OK(bq_memcpy_to_device(P->x.dev, P->x.h, P->x.total), "%s", P->what);
  if (P->bwd) BQ_OK(bq_memcpy_to_device(P->dy.dev, P->dy.h, P->dy.total), "%s", P->what);
  if (P->sc.dev) BQ_OK(bq_memcpy_to_device(P->sc.dev, P->sc.h, P->sc.total), "%s", P->what);
  if (P->zp.dev) BQ_OK(bq_memcpy_to_device(P->zp.dev, P->zp.h, P->zp.total), "%s", P->what);
  BQ_OK(bq_memset(P->out.dev, P->c.poison, P->out.total), "%s", P->what);
}

/* Downloads the output allocation and compares all of it with the reference. */
/* a host copy of buffer b (rows of ld elements) whose rows are rotated forward as
   BQ_HADAMARD rotates them, with the case's block, signs and seed (the caller frees it) */
static unsigned char *rotated_copy(const prep *P, const dbuf *b, int64_t ld)
{
  unsigned char *r = (unsigned char *)malloc(b->total);
  cr_assert(r, "host malloc | %s", P->what);
  memcpy(r, b->h, b->total);
  ref_rotate(P->dn.float_type, 0, P->dn.random_signs, P->ha.seed, (int)P->ha.rotation_block, P->L.rows, P->L.cols,
             b->h + b->pre, ld, r + b->pre, ld);
  return r;
}

static void prep_check(prep *P)
{
  size_t oes = ref_dtype_size(P->ot), bad;
  char msg[4096];
  memset(P->expected, P->c.poison, P->out.total);
  const int sr = P->c.d.rounding == BQ_ROUND_STOCHASTIC, rot = P->c.d.rotation, deq = P->dn.op == BQ_DEQUANTIZE;
  const int fake = P->dn.op == BQ_FAKE_QUANTIZE;
  const ref_layout *L = &P->L;
  unsigned char *xr = NULL, *dyr = NULL;
  const void *x0 = P->ha.x, *dy0 = P->ha.dy;
  if (rot && !deq && L->count) { /* the fused rotation's reference: BQ_HADAMARD's forward pass on x, then the op */
    xr = rotated_copy(P, &P->x, L->xs);
    P->ha.x = xr + P->x.pre;
  }
  if (rot && P->bwd && L->count) { /* fake quantize backward: dy rotated forward too (the mask is the rotated x's) */
    dyr = rotated_copy(P, &P->dy, L->ys);
    P->ha.dy = dyr + P->dy.pre;
  }
  cr_assert_eq(sr ? ref_run_sr(&P->c.d, &P->ha) : ref_run(&P->c.d, &P->ha), 0, "reference rejected the case: %s",
               P->what);
  P->ha.x = x0;
  P->ha.dy = dy0;
  free(xr);
  free(dyr);
  if (rot && (deq || fake) && L->count) /* dequantize and fake quantize: BQ_HADAMARD's inverse pass on the output */
    ref_rotate(P->dn.float_type, 1, P->dn.random_signs, P->ha.seed, (int)P->ha.rotation_block, L->rows, L->cols,
               P->expected + P->out.pre, P->bwd ? L->xs : L->ys, P->expected + P->out.pre, P->bwd ? L->xs : L->ys);
  BQ_OK(bq_memcpy_to_host(P->got, P->out.dev, P->out.total), "%s", P->what);
  bad = ref_compare_output(&P->c.d, &P->ha, P->expected, P->got, (int64_t)(P->out.total / oes),
                           (int64_t)(P->out.pre / oes), msg, sizeof msg);
  cr_assert(bad == 0, "%s\n  %zu of %zu output elements differ (guards included):\n%s", P->what, bad,
            P->out.total / oes, msg);
  check_unchanged(&P->x, "x", P->what);
  check_unchanged(&P->dy, "dy", P->what);
  check_unchanged(&P->sc, "scales", P->what);
  check_unchanged(&P->zp, "zero_points", P->what);
}

static void prep_free(prep *P)
{
  dbuf_free(&P->x);
  dbuf_free(&P->dy);
  dbuf_free(&P->out);
  dbuf_free(&P->sc);
  dbuf_free(&P->zp);
  free(P->expected);
  free(P->got);
}

/* the fused rotation's block (desc.rotation: a case's args.rotation_block) */
static int g_rot_n;
/* One case end to end on the legacy default stream. */
static void run_case(const gcase *c)
{
  prep P;
  bq_plan *plan;
  size_t ws;
  void *wsp = NULL;
  prep_init(&P, c);
  prep_generate(&P, 0);
  if (c->d.rotation) { /* the block, and the signs' key */
    P.ha.rotation_block = P.da.rotation_block = g_rot_n;
    P.ha.seed = P.da.seed = c->d.random_signs ? rnd() : 0;
    const size_t n = strlen(P.what);
    snprintf(P.what + n, sizeof P.what - n, " | rotation %d signs %d seed=0x%llx", g_rot_n, c->d.random_signs,
             (unsigned long long)P.ha.seed);
  }
  if (c->d.rounding == BQ_ROUND_STOCHASTIC) { /* the draws' key and first index: now and then near 2^64 */
    const int k = (int)(rnd() % 4);
    P.ha.seed = P.da.seed = rnd();
    P.ha.offset = P.da.offset = k == 0 ? 0 : k == 1 ? rnd() % 1000 : k == 2 ? rnd() : ~0ull - rnd() % 5000;
    const size_t n = strlen(P.what);
    snprintf(P.what + n, sizeof P.what - n, " | seed=0x%llx offset=%llu", (unsigned long long)P.ha.seed,
             (unsigned long long)P.ha.offset);
  }
  prep_upload(&P);
  plan = plan_get(&c->d, P.what);
  BQ_OK(bq_plan_can_implement(plan, &P.da), "%s", P.what);
  BQ_OK(bq_plan_workspace_size(plan, &P.da, &ws), "%s", P.what);
  if (ws) BQ_OK(bq_malloc(&wsp, ws), "%s", P.what);
  BQ_OK(bq_plan_run(plan, &P.da, wsp, ws, NULL), "%s", P.what);
  BQ_OK(bq_synchronize(NULL), "%s", P.what);
  if (wsp) bq_free(wsp);
  prep_check(&P);
  prep_free(&P);
}

/* ==== the matrix ============================================================================ */

static const bq_dtype k_float_types[4] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
static const bq_dtype k_int_types[2] = {BQ_S8, BQ_U8};
/* full range (0, 0), a narrow one, a one-sided one */
static const int k_qranges[2][3][2] = {{{0, 0}, {-7, 7}, {0, 127}}, {{0, 0}, {3, 200}, {0, 15}}};

typedef struct { int rank; int64_t shape[BQ_MAX_RANK]; int axis; } chan_case;
typedef struct { int64_t rows, cols, xs, ys; } tok_case;
typedef struct { int64_t rows, cols, g, grs, xs, ys; } grp_case;

static const int64_t k_tensor_sizes[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 255, 1000, 4097, 65537};

static const chan_case k_chan_cases[] = {
  {1, {0}, 0}, {1, {1}, 0}, {1, {17}, 0}, {1, {1000}, -1},
  {2, {5, 7}, 0}, {2, {7, 5}, 1}, {2, {3, 4097}, -1}, {2, {4097, 3}, -2}, {2, {1, 33}, 0},
  {3, {3, 5, 7}, 1}, {3, {2, 3, 17}, -1}, {3, {17, 2, 3}, 0}, {3, {3, 0, 5}, 1}, {3, {4, 33, 9}, -2},
  {4, {2, 3, 4, 5}, 2}, {4, {3, 1, 5, 7}, -3}, {4, {2, 3, 4, 5}, 3}, {4, {5, 4, 3, 2}, 0},
  {8, {2, 1, 3, 2, 1, 2, 3, 2}, 5}, {8, {2, 3, 1, 2, 3, 1, 2, 5}, -4},
  /* the channel axis innermost with C % 4 == 0: bq_affine_cols where the offsets align
     (indices 21 and 24 take offset mode 0) */
  {2, {33, 96}, 1}, {3, {3, 5, 128}, -1}, {2, {7, 36}, 1}, {2, {1, 4096}, -1}, {2, {19, 260}, -1},
  /* runs of one channel a whole number of 16-byte accesses (bq_affine_blocks where the
     offsets align), two-part runs among them (1032 bf16 elements: 129 accesses) */
  {3, {3, 5, 64}, 1}, {2, {9, 1032}, 0}, {4, {2, 3, 16, 8}, -3}, {3, {2, 7, 4096}, 0},
};

static const tok_case k_tok_cases[] = {
  {0, 7, 0, 0}, {3, 0, 0, 0}, {0, 0, 0, 0}, {0, 5, 9, 11},
  {1, 1, 0, 0}, {7, 1, 3, 5}, {5, 1, 0, 0}, {3, 17, 0, 0}, {5, 17, 19, 23},
  {4, 4095, 0, 0}, {3, 4095, 4097, 4101}, {2, 64, 64, 65}, {33, 256, 0, 0},
  {9, 1000, 1003, 1000}, {2, 3, 1001, 7},
};

static const grp_case k_grp_cases[] = {
  {0, 96, 32, 0, 0, 0}, {3, 0, 32, 0, 0, 0}, {0, 0, 3, 0, 0, 0},
  {1, 1, 1, 0, 0, 0}, {1, 3, 3, 0, 0, 0}, {4, 96, 32, 0, 0, 0}, {3, 9, 3, 5, 11, 13},
  {2, 128, 1, 130, 0, 0}, {5, 256, 128, 3, 257, 259}, {3, 384, 128, 7, 390, 401},
  {2, 4095, 3, 1366, 4097, 4099}, {6, 32, 32, 2, 0, 33}, {7, 1, 1, 3, 5, 2},
  {17, 96, 3, 0, 0, 0}, {4, 4096, 128, 0, 0, 0},
  /* whole accesses a group with aligned row strides (bq_affine_blocks where the offsets
     align): groups of 1536 take several parts */
  {3, 256, 64, 4, 264, 272}, {2, 3072, 1536, 0, 0, 0}, {5, 2048, 1024, 3, 2056, 2048},
  /* contiguous, groups of 35 elements or more that accesses straddle (bq_affine_flat; also
     {4, 4096, 128} above where the offsets misalign) */
  {7, 4095, 105, 0, 0, 0}, {5, 111, 37, 3, 0, 0}, {40, 200, 100, 0, 200, 200}, {1, 8197, 1171, 0, 0, 0},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Offsets: mode 0 all aligned, 1 the same nonzero element offset everywhere (streams
   that can be aligned together), 2 independent (input and output out of phase). */
static void set_offsets(gcase *c, int mode)
{
  int i, k = (int)rnd_range(1, 15);
  for (i = 0; i < 4; i++) c->off[i] = mode == 0 ? 0 : mode == 1 ? k : (int)rnd_range(0, 15);
  if (mode == 2 && c->off[0] == c->off[1] && c->off[0] == c->off[3]) c->off[1] = (c->off[1] + 5) % 16;
  c->soff = mode == 0 ? 0 : (int)rnd_range(0, 3);
}

static void set_shape(gcase *c, bq_granularity g, int idx)
{
  memset(&c->a, 0, sizeof c->a);
  switch (g) {
  case BQ_GRANULARITY_DEFAULT: /* per tensor */
  case BQ_PER_TENSOR: c->a.numel = k_tensor_sizes[idx]; break;
  case BQ_PER_CHANNEL:
    c->a.rank = k_chan_cases[idx].rank;
    memcpy(c->a.shape, k_chan_cases[idx].shape, sizeof c->a.shape);
    c->a.axis = k_chan_cases[idx].axis;
    break;
  case BQ_PER_TOKEN:
    c->a.rows = k_tok_cases[idx].rows; c->a.cols = k_tok_cases[idx].cols;
    c->a.x_row_stride = k_tok_cases[idx].xs; c->a.y_row_stride = k_tok_cases[idx].ys;
    break;
  case BQ_PER_GROUP:
    c->a.rows = k_grp_cases[idx].rows; c->a.cols = k_grp_cases[idx].cols;
    c->a.group_size = k_grp_cases[idx].g; c->a.group_row_stride = k_grp_cases[idx].grs;
    c->a.x_row_stride = k_grp_cases[idx].xs; c->a.y_row_stride = k_grp_cases[idx].ys;
    break;
  case BQ_PER_BLOCK: break; /* tests/test_gpu_blocks.c */
  }
}

static int n_cases(bq_granularity g)
{
  return g == BQ_PER_TENSOR ? COUNT(k_tensor_sizes) : g == BQ_PER_CHANNEL ? COUNT(k_chan_cases)
         : g == BQ_PER_TOKEN ? COUNT(k_tok_cases) : COUNT(k_grp_cases);
}

/* The large problems: which = 0: ~4M elements, 1: ~1M (odd) elements. */
static void set_big_shape(gcase *c, bq_granularity g, int which, int ti)
{
  memset(&c->a, 0, sizeof c->a);
  switch (g) {
  case BQ_GRANULARITY_DEFAULT: /* per tensor */
  case BQ_PER_TENSOR: c->a.numel = which ? 1000003 : ((int64_t)1 << 22) + 19; break;
  case BQ_PER_CHANNEL:
    if (!which) { c->a.rank = 2; c->a.shape[0] = 1024; c->a.shape[1] = (ti & 2) ? 4100 : 4099; c->a.axis = (ti & 1) ? -1 : 0; }
    else { c->a.rank = 3; c->a.shape[0] = 7; c->a.shape[1] = 1009; c->a.shape[2] = 143; c->a.axis = 1; }
    break;
  case BQ_PER_TOKEN:
    if (which) { c->a.rows = 977; c->a.cols = 1023; c->a.x_row_stride = 1024; c->a.y_row_stride = 1031; }
    else if (ti & 1) { c->a.rows = 1023; c->a.cols = 4101; c->a.x_row_stride = 4103; c->a.y_row_stride = 4111; }
    else if (ti == 2) { c->a.rows = 1000; c->a.cols = 4095; } /* contiguous rows off the grid (bq_affine_flat) */
    else { c->a.rows = 1024; c->a.cols = 4096; }
    break;
  case BQ_PER_GROUP:
    if (which) {
      c->a.rows = 1001; c->a.cols = 999; c->a.group_size = 3; c->a.group_row_stride = 400;
      c->a.x_row_stride = 1000; c->a.y_row_stride = 1001;
    } else if (ti & 1) {
      c->a.rows = 1000; c->a.cols = 4224; c->a.group_size = 32; c->a.group_row_stride = 140;
      c->a.x_row_stride = 4227; c->a.y_row_stride = 4233;
    } else if (ti == 2) { /* contiguous, G = 105 on rows of 4095 (bq_affine_flat) */
      c->a.rows = 1000; c->a.cols = 4095; c->a.group_size = 105;
    } else {
      c->a.rows = 1024; c->a.cols = 4096; c->a.group_size = 128;
    }
    break;
  case BQ_PER_BLOCK: break; /* tests/test_gpu_blocks.c */
  }
}

/* Every float type x int type x q range (x scale type) for one granularity, op and
   direction: the small cases with fresh parameters and offsets, plus one large problem
   per float type. */
/* A case's descriptor: float type ti, int type ii with its q-range qi, and per tensor no
   scale type (the caller sets it otherwise); the rest of c zeroed */
static int g_sr; /* the cases round stochastically (desc.rounding) */
static void case_desc(gcase *c, bq_op op, bq_direction dir, bq_granularity g, int ti, int ii, int qi)
{
  memset(c, 0, sizeof *c);
  c->d.rounding = g_sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  c->d.op = op;
  c->d.direction = dir;
  c->d.granularity = g;
  c->d.float_type = k_float_types[ti];
  c->d.int_type = k_int_types[ii];
  c->d.qmin = k_qranges[ii][qi][0];
  c->d.qmax = k_qranges[ii][qi][1];
}

static void run_matrix(bq_granularity g, bq_op op, bq_direction dir)
{
  int ti, ii, qi, sti, k;
  GPU_BEGIN();
  for (ti = 0; ti < 4; ti++) {
    for (ii = 0; ii < 2; ii++) {
      for (qi = 0; qi < 3; qi++) {
        int nst = (g == BQ_PER_TENSOR || k_float_types[ti] == BQ_F32) ? 1 : 2;
        for (sti = 0; sti < nst; sti++) {
          gcase c;
          case_desc(&c, op, dir, g, ti, ii, qi);
          if (ii == 0 && (ti + qi) % 2) c.d.int_type = BQ_DTYPE_DEFAULT; /* 0 means s8 */
          /* scale type: the float type or f32 (as 0 = default or spelled out) */
          if (g != BQ_PER_TENSOR)
            c.d.scale_type = sti || nst == 1 ? ((ti + ii + qi) % 2 ? BQ_F32 : BQ_DTYPE_DEFAULT) : k_float_types[ti];
          for (k = 0; k < n_cases(g); k++) {
            set_shape(&c, g, k);
            set_offsets(&c, k % 3);
            c.zp_null = rnd() % 4 == 0;
            c.specials = k % 5 != 1; /* a few cases without edge values: plain data */
            c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
            run_case(&c);
          }
          /* one large problem per float type, for one (int type, q range, scale type):
             ~4M elements for two of the float types, ~1M (odd) for the other two,
             alternating with the op and direction */
          if (ii == (ti & 1) && qi == (ti == 2 ? 2 : ti == 1 ? 1 : 0) && sti == (ti & 1 ? nst - 1 : 0)) {
            k = (ti + (int)op + (int)dir) & 1;
            set_big_shape(&c, g, k, ti);
            set_offsets(&c, (ti + (int)op) % 3);
            c.zp_null = ti == 3;
            c.specials = 1;
            c.poison = 0xa5;
            run_case(&c);
          }
        }
      }
    }
  }
}

#define AFFINE_SUITE(suite, gran)                                                        \
  Test(suite, quantize_forward) { run_matrix(gran, BQ_QUANTIZE, BQ_FORWARD); }           \
  Test(suite, quantize_backward) { run_matrix(gran, BQ_QUANTIZE, BQ_BACKWARD); }         \
  Test(suite, dequantize_forward) { run_matrix(gran, BQ_DEQUANTIZE, BQ_FORWARD); }       \
  Test(suite, dequantize_backward) { run_matrix(gran, BQ_DEQUANTIZE, BQ_BACKWARD); }     \
  Test(suite, fake_quantize_forward) { run_matrix(gran, BQ_FAKE_QUANTIZE, BQ_FORWARD); } \
  Test(suite, fake_quantize_backward) { run_matrix(gran, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }

AFFINE_SUITE(per_tensor, BQ_PER_TENSOR)
AFFINE_SUITE(per_channel, BQ_PER_CHANNEL)
AFFINE_SUITE(per_token, BQ_PER_TOKEN)
AFFINE_SUITE(per_group, BQ_PER_GROUP)

/* ==== stochastic rounding (bq_affine_sr) ===================================================== */
/* The matrix above with desc.rounding stochastic (integer storage, every float type, q-range
   and scale type, small and large shapes), then FP8 storage and per block over a set of
   shapes, each case against reference_sr.h bit for bit with a fresh seed and offset */
static void run_sr(bq_granularity g, bq_op op)
{
  static const int64_t blocks[][4] = {{1, 1, 1, 0}, {5, 7, 2, 0}, {33, 130, 32, 0}, {128, 512, 128, 0}, {70, 301, 64, 9}};
  g_sr = 1;
  run_matrix(g, op, BQ_FORWARD);
  for (int ti = 0; ti < 4; ti++)
    for (int f8 = 0; f8 < 2; f8++)
      for (int k = 0; k < n_cases(g); k += 2) {
        gcase c;
        case_desc(&c, op, BQ_FORWARD, g, ti, 0, 0);
        c.d.int_type = f8 ? BQ_E5M2 : BQ_E4M3;
        if (g != BQ_PER_TENSOR) c.d.scale_type = k % 4 ? BQ_F32 : k_float_types[ti];
        set_shape(&c, g, k);
        set_offsets(&c, k % 3);
        c.zp_null = 1;
        c.specials = 1;
        c.poison = 0x5a;
        run_case(&c);
      }
  if (g == BQ_PER_GROUP) /* and per block: B x B tiles, the edge ones partial */
    for (int ti = 0; ti < 4; ti++)
      for (int k = 0; k < COUNT(blocks); k++) {
        gcase c;
        case_desc(&c, op, BQ_FORWARD, BQ_PER_BLOCK, ti, k % 2, k % 3);
        if (k == 3) c.d.int_type = BQ_E4M3, c.d.qmin = c.d.qmax = 0;
        c.d.scale_type = BQ_F32;
        c.a.rows = blocks[k][0], c.a.cols = blocks[k][1], c.a.group_size = blocks[k][2];
        c.a.x_row_stride = c.a.y_row_stride = blocks[k][3] ? c.a.cols + blocks[k][3] : 0;
        set_offsets(&c, k % 3);
        c.zp_null = k == 3 || rnd() % 2;
        c.specials = 1;
        c.poison = 0xa5;
        run_case(&c);
      }
  g_sr = 0;
}

/* ==== the fused rotation (bq_affine_sr) ========================================================= */
/* Quantize and fake quantize (rounding to nearest and stochastically), dequantize and fake
   quantize backward with desc.rotation, against BQ_HADAMARD's reference then the op's
   (dequantize: the op's, then the inverse pass; fake quantize: both; its backward pass: x and
   dy rotated, the op's, then the inverse pass on dx): every
   float type, integer and FP8 storage, every block size (2 to 256), random signs half the time,
   each granularity's rows (per tensor and per channel: the flat array; the last dimension a
   multiple of the block), unaligned offsets and strided rows, small and large. */
static void rot_shape(gcase *c, bq_granularity g, int64_t n, int big)
{
  switch (g) {
  case BQ_PER_TENSOR: c->a.numel = n * rnd_range(1, big ? ((int64_t)4 << 20) / n : 4096 / n + 1); break;
  case BQ_PER_CHANNEL:
    c->a.rank = 3, c->a.shape[0] = rnd_range(1, 5), c->a.shape[1] = rnd_range(1, big ? 300 : 9);
    c->a.shape[2] = n * rnd_range(1, 2048 / n + 1), c->a.axis = (int)rnd_range(-3, 2);
    break;
  default: {
    /* per group, groups of a power of two (the larger of G and n divides the row) */
    const int64_t G = g == BQ_PER_GROUP ? (int64_t)1 << rnd_range(0, 8) : 1, unit = G > n ? G : n;
    c->a.rows = big ? rnd_range(200, 1200) : rnd_range(1, 40);
    c->a.cols = unit * rnd_range(1, 4096 / unit + 1);
    if (g == BQ_PER_GROUP) c->a.group_size = G;
    if (g == BQ_PER_BLOCK) c->a.group_size = rnd_range(1, 130);
    c->a.x_row_stride = rnd() & 1 ? c->a.cols + rnd_range(0, 13) : 0;
    c->a.y_row_stride = rnd() & 1 ? c->a.cols + rnd_range(0, 13) : 0;
    break;
  }
  }
}
static void run_rotation(bq_granularity g, bq_op op, bq_direction dir)
{
  GPU_BEGIN();
  const int rounds = op != BQ_DEQUANTIZE && dir == BQ_FORWARD; /* (stochastically too) */
  for (int ti = 0; ti < 4; ti++)
    for (int form = 0; form < (rounds ? 6 : 3); form++)
      for (int64_t n = 2; n <= 256; n *= 2) {
        gcase c;
        g_sr = form >= 3; /* quantize and fake quantize forward: rounding to nearest, then stochastically */
        case_desc(&c, op, dir, g, ti, form % 2, (int)(n % 3));
        if (form % 3 == 2) c.d.int_type = n % 4 ? BQ_E4M3 : BQ_E5M2, c.d.qmin = c.d.qmax = 0;
        if (g != BQ_PER_TENSOR) c.d.scale_type = form % 2 ? BQ_F32 : k_float_types[ti];
        c.d.rotation = 1;
        c.d.random_signs = (int)((n + (int64_t)form) % 2);
        g_rot_n = (int)n;
        rot_shape(&c, g, n, n == 64 && form == ti % 3);
        set_offsets(&c, (int)(n % 3));
        c.zp_null = form % 3 == 2 || rnd() % 3 == 0;
        c.specials = n % 5 != 1;
        c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
        run_case(&c);
      }
  g_sr = 0;
  g_rot_n = 0;
}
Test(affine_rotation, quantize_per_tensor, .timeout = 600) { run_rotation(BQ_PER_TENSOR, BQ_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, quantize_per_channel, .timeout = 600) { run_rotation(BQ_PER_CHANNEL, BQ_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, quantize_per_token, .timeout = 600) { run_rotation(BQ_PER_TOKEN, BQ_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, quantize_per_group, .timeout = 600) { run_rotation(BQ_PER_GROUP, BQ_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, quantize_per_block, .timeout = 600) { run_rotation(BQ_PER_BLOCK, BQ_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, dequantize_per_tensor, .timeout = 600) { run_rotation(BQ_PER_TENSOR, BQ_DEQUANTIZE, BQ_FORWARD); }
Test(affine_rotation, dequantize_per_channel, .timeout = 600) { run_rotation(BQ_PER_CHANNEL, BQ_DEQUANTIZE, BQ_FORWARD); }
Test(affine_rotation, dequantize_per_token, .timeout = 600) { run_rotation(BQ_PER_TOKEN, BQ_DEQUANTIZE, BQ_FORWARD); }
Test(affine_rotation, dequantize_per_group, .timeout = 600) { run_rotation(BQ_PER_GROUP, BQ_DEQUANTIZE, BQ_FORWARD); }
Test(affine_rotation, dequantize_per_block, .timeout = 600) { run_rotation(BQ_PER_BLOCK, BQ_DEQUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_per_tensor, .timeout = 600) { run_rotation(BQ_PER_TENSOR, BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_per_channel, .timeout = 600) { run_rotation(BQ_PER_CHANNEL, BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_per_token, .timeout = 600) { run_rotation(BQ_PER_TOKEN, BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_per_group, .timeout = 600) { run_rotation(BQ_PER_GROUP, BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_per_block, .timeout = 600) { run_rotation(BQ_PER_BLOCK, BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(affine_rotation, fake_quantize_backward_per_tensor, .timeout = 600) { run_rotation(BQ_PER_TENSOR, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }
Test(affine_rotation, fake_quantize_backward_per_channel, .timeout = 600) { run_rotation(BQ_PER_CHANNEL, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }
Test(affine_rotation, fake_quantize_backward_per_token, .timeout = 600) { run_rotation(BQ_PER_TOKEN, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }
Test(affine_rotation, fake_quantize_backward_per_group, .timeout = 600) { run_rotation(BQ_PER_GROUP, BQ_FAKE_QUANTIZE, BQ_BACKWARD); }

Test(stochastic_rounding, quantize_per_tensor, .timeout = 600) { run_sr(BQ_PER_TENSOR, BQ_QUANTIZE); }
Test(stochastic_rounding, quantize_per_channel, .timeout = 600) { run_sr(BQ_PER_CHANNEL, BQ_QUANTIZE); }
Test(stochastic_rounding, quantize_per_token, .timeout = 600) { run_sr(BQ_PER_TOKEN, BQ_QUANTIZE); }
Test(stochastic_rounding, quantize_per_group_and_block, .timeout = 600) { run_sr(BQ_PER_GROUP, BQ_QUANTIZE); }
Test(stochastic_rounding, fake_quantize_per_tensor, .timeout = 600) { run_sr(BQ_PER_TENSOR, BQ_FAKE_QUANTIZE); }
Test(stochastic_rounding, fake_quantize_per_channel, .timeout = 600) { run_sr(BQ_PER_CHANNEL, BQ_FAKE_QUANTIZE); }
Test(stochastic_rounding, fake_quantize_per_token, .timeout = 600) { run_sr(BQ_PER_TOKEN, BQ_FAKE_QUANTIZE); }
Test(stochastic_rounding, fake_quantize_per_group_and_block, .timeout = 600) { run_sr(BQ_PER_GROUP, BQ_FAKE_QUANTIZE); }

/* Batch invariance: rows r0 .. r1 of a per-token call, run alone with args.offset advanced by
   r0 * cols, write the bytes the whole call wrote there */
Test(stochastic_rounding, rows_alone_equal_the_whole_call, .timeout = 600)
{
  GPU_BEGIN();
  for (int ti = 0; ti < 4; ti++) {
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = BQ_QUANTIZE;
    d.granularity = BQ_PER_TOKEN;
    d.float_type = k_float_types[ti];
    d.int_type = ti % 2 ? BQ_E4M3 : BQ_S8;
    d.rounding = BQ_ROUND_STOCHASTIC;
    const int64_t rows = rnd_range(2, 300), cols = rnd_range(1, 3000), es = (int64_t)ref_dtype_size(d.float_type);
    const int64_t r0 = rnd_range(0, rows - 1), r1 = rnd_range(r0 + 1, rows);
    char what[256];
    snprintf(what, sizeof what, "T=%s [%lld, %lld] rows %lld..%lld | BQ_TEST_SEED=0x%llx", ref_dtype_name(d.float_type),
             (long long)rows, (long long)cols, (long long)r0, (long long)r1, (unsigned long long)g_seed);
    unsigned char *hx = (unsigned char *)malloc((size_t)(rows * cols * es)), *whole = (unsigned char *)malloc((size_t)(rows * cols)),
                  *part = (unsigned char *)malloc((size_t)(rows * cols));
    float *hs = (float *)malloc((size_t)rows * 4);
    cr_assert(hx && whole && part && hs);
    for (int64_t i = 0; i < rows * cols; i++) store_t(d.float_type, hx, i, (rnd_unit() - 0.5) * 300.0);
    for (int64_t r = 0; r < rows; r++) hs[r] = (float)(0.5 + rnd_unit());
    void *dx, *dy, *ds;
    BQ_OK(bq_malloc(&dx, (size_t)(rows * cols * es)), "%s", what);
    BQ_OK(bq_malloc(&dy, (size_t)(rows * cols)), "%s", what);
    BQ_OK(bq_malloc(&ds, (size_t)rows * 4), "%s", what);
    BQ_OK(bq_memcpy_to_device(dx, hx, (size_t)(rows * cols * es)), "%s", what);
    BQ_OK(bq_memcpy_to_device(ds, hs, (size_t)rows * 4), "%s", what);
    bq_plan *p = plan_get(&d, what);
    bq_args a;
    memset(&a, 0, sizeof a);
    a.x = dx, a.y = dy, a.scales = ds, a.rows = rows, a.cols = cols;
    a.seed = rnd(), a.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
    BQ_OK(bq_memset(dy, 0x5a, (size_t)(rows * cols)), "%s", what);
    BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), "%s", what);
    BQ_OK(bq_synchronize(NULL), "%s", what);
    BQ_OK(bq_memcpy_to_host(whole, dy, (size_t)(rows * cols)), "%s", what);
    BQ_OK(bq_memset(dy, 0x5a, (size_t)(rows * cols)), "%s", what);
    bq_args b = a;
    b.x = (unsigned char *)dx + r0 * cols * es, b.y = (unsigned char *)dy + r0 * cols;
    b.scales = (float *)ds + r0, b.rows = r1 - r0, b.offset = a.offset + (uint64_t)(r0 * cols);
    BQ_OK(bq_plan_run(p, &b, NULL, 0, NULL), "%s", what);
    BQ_OK(bq_synchronize(NULL), "%s", what);
    BQ_OK(bq_memcpy_to_host(part, dy, (size_t)(rows * cols)), "%s", what);
    for (int64_t i = 0; i < rows * cols; i++) {
      const int in = i >= r0 * cols && i < r1 * cols;
      cr_assert_eq(part[i], in ? whole[i] : 0x5a, "element %lld: 0x%02x, the whole call's 0x%02x (%s) | %s", (long long)i,
                   part[i], whole[i], in ? "inside" : "outside: untouched", what);
    }
    bq_free(dx), bq_free(dy), bq_free(ds);
    free(hx), free(whole), free(part), free(hs);
  }
}

/* ==== bq_affine_lean and bq_affine_pair by name ============================================== */

/* which kernel the last launch ran */
static bq__CUfunction g_last_fn;
static bq__CUresult (*g_launch)(bq__CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                unsigned, bq__CUstream, void **, void **);
static bq__CUresult note_launch(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, bq__CUstream s, void **params, void **extra)
{
  g_last_fn = f;
  return g_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

/* Forward quantize and dequantize per tensor, per token and per group through bq_affine_lean,
   whatever the table's size limit: dense data, the lead stream aligned and the other one at
   any element offset, elements past the last whole access, every float type, int type and
   q-range, against the reference with guards. The kernel takes the other stream on its
   accesses' grid only (half the cases); off it, another kernel runs, checked the same.
   Quantize from 16-bit data without zero points takes bq_affine_pair (two accesses a thread)
   where rows and groups are whole pairs and the output is 16-byte aligned, and only there. */
static void run_lean(bq_granularity g, bq_op op)
{
  static const int64_t sizes[] = {1, 7, 8, 17, 1000, 4097, 65537, 1000003};
  static const tok_case toks[] = {{1, 8, 0, 0}, {3, 64, 0, 0}, {33, 256, 0, 0}, {1000, 1024, 0, 0}, {2, 4096, 0, 0}};
  static const grp_case grps[] = {{1, 16, 8, 0, 0, 0}, {3, 96, 32, 0, 0, 0}, {4, 4096, 128, 0, 0, 0},
                                  {1000, 1024, 64, 0, 0, 0}, {7, 48, 16, 0, 0, 0}};
  int ti, ii, qi, k, pairs = 0, n = g == BQ_PER_TENSOR ? COUNT(sizes) : g == BQ_PER_TOKEN ? COUNT(toks) : COUNT(grps);
  GPU_BEGIN();
  if (bq__drv.cuLaunchKernel != note_launch) {
    g_launch = bq__drv.cuLaunchKernel;
    bq__drv.cuLaunchKernel = note_launch;
  }
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++)
      for (qi = 0; qi < 3; qi++)
        for (k = 0; k < n; k++) {
          gcase c;
          prep P;
          bq_plan *plan;
          case_desc(&c, op, BQ_FORWARD, g, ti, ii, qi);
          if (g != BQ_PER_TENSOR) c.d.scale_type = (ti + qi) % 2 ? BQ_F32 : BQ_DTYPE_DEFAULT;
          if (g == BQ_PER_TENSOR) c.a.numel = sizes[k];
          else if (g == BQ_PER_TOKEN) c.a.rows = toks[k].rows, c.a.cols = toks[k].cols;
          else c.a.rows = grps[k].rows, c.a.cols = grps[k].cols, c.a.group_size = grps[k].g;
          /* the lead stream (x, or dequantize's y) aligned; the other at an element offset */
          const int off = rnd() % 2 || (k == 2 && qi == 0) ? 0 : (int)rnd_range(1, 15);
          c.off[0] = op == BQ_DEQUANTIZE ? off : 0;
          c.off[1] = op == BQ_DEQUANTIZE ? 0 : off;
          c.zp_null = rnd() % 4 == 0 || (k == 2 && qi == 0); /* (k == 2, qi == 0: pairs, where they apply) */
          c.specials = k % 3 != 1;
          c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
          prep_init(&P, &c);
          prep_generate(&P, 0);
          prep_upload(&P);
          plan = plan_get(&c.d, P.what);
          bq__affine_force_entry = BQ__AFFINE_LEAN;
          g_last_fn = NULL;
          bq_status st = bq_plan_run(plan, &P.da, NULL, 0, NULL);
          bq__affine_force_entry = -1;
          cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run -> %s: %s | %s", bq_status_name(st), bq_last_error(), P.what);
          BQ_OK(bq_synchronize(NULL), "%s", P.what);
          if (off % plan->vec == 0) {
            const int64_t run = g == BQ_PER_TOKEN ? c.a.cols : c.a.group_size;
            const int want = op == BQ_QUANTIZE && g != BQ_PER_TENSOR && bq__dtype_size(c.d.float_type) == 2 &&
                             c.zp_null && run % 16 == 0 && (uintptr_t)P.da.y % 16 == 0;
            const int e = want ? BQ__AFFINE_PAIR : BQ__AFFINE_LEAN;
            pairs += want;
            cr_assert(g_last_fn != NULL && plan_fn(plan, e) != NULL && g_last_fn == plan_fn(plan, e),
                      "%s was not the kernel launched | %s", want ? "bq_affine_pair" : "bq_affine_lean", P.what);
          } else
            cr_assert(g_last_fn != NULL && g_last_fn != plan_fn(plan, BQ__AFFINE_LEAN) &&
                          (g == BQ_PER_TENSOR || g_last_fn != plan_fn(plan, BQ__AFFINE_PAIR)),
                      "the lean route took a stream off its accesses' grid | %s", P.what);
          prep_check(&P);
          prep_free(&P);
        }
  if (op == BQ_QUANTIZE && g != BQ_PER_TENSOR) cr_assert(pairs > 0, "no case took bq_affine_pair");
}

Test(lean, quantize_per_tensor) { run_lean(BQ_PER_TENSOR, BQ_QUANTIZE); }
Test(lean, dequantize_per_tensor) { run_lean(BQ_PER_TENSOR, BQ_DEQUANTIZE); }
Test(lean, quantize_per_token) { run_lean(BQ_PER_TOKEN, BQ_QUANTIZE); }
Test(lean, dequantize_per_token) { run_lean(BQ_PER_TOKEN, BQ_DEQUANTIZE); }
Test(lean, quantize_per_group) { run_lean(BQ_PER_GROUP, BQ_QUANTIZE); }
Test(lean, dequantize_per_group) { run_lean(BQ_PER_GROUP, BQ_DEQUANTIZE); }

/* ==== the first-use tune between the lean route and the row kernels ========================== */

/* the tune entries in dir */
static int tune_files(const char *dir)
{
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "tune-", 5)) n++;
  if (d) closedir(d);
  return n;
}
static void tune_unlink(const char *dir)
{
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[1024];
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "tune-", 5)) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  if (d) closedir(d);
}

/* Two DRAM-sized problems whose rule takes the row kernels where the lean route could serve
   them (per-group dequantize bf16, per-token quantize f32): each candidate forced by name
   computes the reference's bits; the first plain run times both once (one tune), writes one
   entry and computes the same bits; a second run, and a run after the memory is cleared
   (the entry read back), tune nothing; a damaged entry is tuned again and rewritten; under
   stream capture, and with BARACUDA_QUANT_TUNE=0, nothing is timed or written and the bits
   are the same. */
Test(tune, lean_or_row_kernels, .timeout = 600)
{
  char dir[] = "/tmp/bq_tune_test_XXXXXX";
  int ci, cand;
  GPU_BEGIN();
  cr_assert_not_null(mkdtemp(dir));
  setenv("BARACUDA_QUANT_CACHE_DIR", dir, 1);
  unsetenv("BARACUDA_QUANT_TUNE");
  if (bq__drv.cuLaunchKernel != note_launch) {
    g_launch = bq__drv.cuLaunchKernel;
    bq__drv.cuLaunchKernel = note_launch;
  }
  for (ci = 0; ci < 2; ci++) {
    gcase c;
    prep P;
    bq_plan *plan = NULL;
    memset(&c, 0, sizeof c);
    if (ci == 0) {
      c.d.op = BQ_DEQUANTIZE;
      c.d.granularity = BQ_PER_GROUP;
      c.d.float_type = BQ_BF16;
      c.d.scale_type = BQ_F32;
      c.a.rows = 16384, c.a.cols = 4096, c.a.group_size = 128;
    } else {
      c.d.op = BQ_QUANTIZE;
      c.d.granularity = BQ_PER_TOKEN;
      c.d.float_type = BQ_F32;
      c.a.rows = 8192, c.a.cols = 4096;
      c.zp_null = 1;
    }
    c.specials = 1;
    c.poison = 0xa5;
    prep_init(&P, &c);
    prep_generate(&P, 0);
    prep_upload(&P);
    bq_cache_clear_memory();
    BQ_OK(bq_plan_select(&c.d, &plan), "%s", P.what);
    cr_assert(plan->l2_bytes > 0, "the device reports no L2 size: nothing is tuned | %s", P.what);
    cr_assert(c.a.rows * c.a.cols * bq__dtype_size(c.d.float_type) >= plan->l2_bytes,
              "the case fits in L2 (%lld bytes): nothing is tuned | %s", (long long)plan->l2_bytes, P.what);
    /* each candidate by name: 0 the rule's row kernels, 1 the lean route */
    for (cand = 0; cand < 2; cand++) {
      const bq__CUfunction lean_fn = plan_fn(plan, BQ__AFFINE_LEAN), pair_fn = plan_fn(plan, BQ__AFFINE_PAIR);
      bq_status st;
      bq__tune_forced = cand;
      g_last_fn = NULL;
      st = bq_plan_run(plan, &P.da, NULL, 0, NULL);
      bq__tune_forced = -1;
      cr_assert_eq(st, BQ_SUCCESS, "candidate %d: %s | %s", cand, bq_last_error(), P.what);
      BQ_OK(bq_synchronize(NULL), "%s", P.what);
      const int took_lean = g_last_fn != NULL && (g_last_fn == plan_fn(plan, BQ__AFFINE_LEAN) ||
                                                   g_last_fn == plan_fn(plan, BQ__AFFINE_PAIR));
      cr_assert_eq(took_lean, cand, "candidate %d launched %s | %s", cand, took_lean ? "the lean route" : "another kernel",
                   P.what);
      (void)lean_fn, (void)pair_fn;
      prep_check(&P);
      BQ_OK(bq_memset(P.out.dev, c.poison, P.out.total), "%s", P.what);
    }
    /* the first plain run tunes, once */
    uint64_t n0 = bq__tune_count;
    cr_assert_eq(tune_files(dir), 0, "%s", P.what);
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    cr_assert_eq(bq__tune_count, n0 + 1, "the first run did not tune | %s", P.what);
    cr_assert_eq(tune_files(dir), 1, "%s", P.what);
    prep_check(&P);
    BQ_OK(bq_memset(P.out.dev, c.poison, P.out.total), "%s", P.what);
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    cr_assert_eq(bq__tune_count, n0 + 1, "the second run tuned again | %s", P.what);
    prep_check(&P);
    /* from disk after the memory is cleared */
    bq_cache_clear_memory();
    BQ_OK(bq_memset(P.out.dev, c.poison, P.out.total), "%s", P.what);
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    cr_assert_eq(bq__tune_count, n0 + 1, "the entry on disk was not read | %s", P.what);
    prep_check(&P);
    /* a damaged entry: tuned again and rewritten */
    {
      DIR *d = opendir(dir);
      struct dirent *e;
      char path[1024] = "";
      while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "tune-", 5)) snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (d) closedir(d);
      FILE *f = fopen(path, "r+");
      cr_assert_not_null(f, "%s | %s", path, P.what);
      fseek(f, 30, SEEK_SET);
      fputc('#', f);
      fclose(f);
    }
    bq_cache_clear_memory();
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    cr_assert_eq(bq__tune_count, n0 + 2, "a damaged entry was taken | %s", P.what);
    cr_assert_eq(tune_files(dir), 1, "%s", P.what);
    bq_cache_clear_memory();
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    cr_assert_eq(bq__tune_count, n0 + 2, "the rewritten entry was not read | %s", P.what);
    /* under stream capture: nothing timed or written, the graph computes the same bits */
    {
      bq__CUstream s = NULL;
      bq__CUgraph gr = NULL;
      bq__CUgraphExec ex = NULL;
      bq_status st;
      int r;
      tune_unlink(dir);
      bq_cache_clear_memory();
      BQ_OK(bq_memset(P.out.dev, c.poison, P.out.total), "%s", P.what);
      cr_assert_eq(bq__drv.cuStreamCreate(&s, 0), 0);
      cr_assert_eq(bq__drv.cuStreamBeginCapture(s, BQ__CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
      st = bq_plan_run(plan, &P.da, NULL, 0, s);
      r = bq__drv.cuStreamEndCapture(s, &gr);
      cr_assert_eq(st, BQ_SUCCESS, "run under capture: %s | %s", bq_last_error(), P.what);
      cr_assert_eq(r, 0, "cuStreamEndCapture -> %d | %s", r, P.what);
      cr_assert_eq(bq__tune_count, n0 + 2, "a run under capture tuned | %s", P.what);
      cr_assert_eq(tune_files(dir), 0, "%s", P.what);
      cr_assert_eq(bq__drv.cuGraphInstantiateWithFlags(&ex, gr, 0), 0, "%s", P.what);
      cr_assert_eq(bq__drv.cuGraphLaunch(ex, s), 0, "%s", P.what);
      cr_assert_eq(bq__drv.cuStreamSynchronize(s), 0, "%s", P.what);
      prep_check(&P);
      bq__drv.cuGraphExecDestroy(ex);
      bq__drv.cuGraphDestroy(gr);
      bq__drv.cuStreamDestroy(s);
    }
    /* BARACUDA_QUANT_TUNE=0: the rule's kernels, nothing timed or written */
    setenv("BARACUDA_QUANT_TUNE", "0", 1);
    bq_cache_clear_memory();
    BQ_OK(bq_memset(P.out.dev, c.poison, P.out.total), "%s", P.what);
    g_last_fn = NULL;
    BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
    BQ_OK(bq_synchronize(NULL), "%s", P.what);
    unsetenv("BARACUDA_QUANT_TUNE");
    cr_assert_eq(bq__tune_count, n0 + 2, "BARACUDA_QUANT_TUNE=0 tuned | %s", P.what);
    cr_assert_eq(tune_files(dir), 0, "%s", P.what);
    cr_assert(g_last_fn != NULL && g_last_fn != plan_fn(plan, BQ__AFFINE_LEAN) &&
                  g_last_fn != plan_fn(plan, BQ__AFFINE_PAIR),
              "BARACUDA_QUANT_TUNE=0 did not take the rule's kernels | %s", P.what);
    prep_check(&P);
    bq_plan_destroy(plan);
    prep_free(&P);
  }
}

/* ==== fake quantize with a saved mask (args.mask, bq_affine_mask) ============================ */

/* The forward pass of case cf (fake quantize, per tensor or per channel) with args.mask:
   y and the mask against the reference, the mask's guard words untouched. Then the
   backward pass from that device mask, x NULL: dx against the reference, and that equals
   the backward pass computed from x (the mask is the STE mask, bit for bit). */
static void run_mask_pair(const gcase *cf)
{
  prep F, B;
  bq_plan *plan;
  dbuf mk;
  unsigned char *got;
  size_t i;
  int64_t words;
  gcase cb = *cf;
  prep_init(&F, cf);
  prep_generate(&F, 0);
  prep_upload(&F);
  words = (F.L.count + 31) / 32;
  dbuf_make(&mk, 4, words, cf->off[1] % 4); /* 4-byte words, 16-byte aligned or not */
  memset(mk.h, cf->poison, mk.total);
  BQ_OK(bq_memset(mk.dev, cf->poison, mk.total), "%s", F.what);
  F.da.mask = mk.dev + mk.pre;
  F.ha.mask = mk.h + mk.pre;
  plan = plan_get(&cf->d, F.what);
  BQ_OK(bq_plan_run(plan, &F.da, NULL, 0, NULL), "mask forward: %s", F.what);
  BQ_OK(bq_synchronize(NULL), "%s", F.what);
  prep_check(&F); /* y, and the expected mask words into mk.h */
  got = (unsigned char *)malloc(mk.total);
  cr_assert(got != NULL);
  BQ_OK(bq_memcpy_to_host(got, mk.dev, mk.total), "%s", F.what);
  for (i = 0; i < mk.total && got[i] == mk.h[i]; i++) {}
  cr_assert(i == mk.total, "mask forward: %s\n  mask byte %lld of %lld words differs: 0x%02x, expected 0x%02x", F.what,
            (long long)i - (long long)mk.pre, (long long)words, got[i], mk.h[i]);

  cb.d.direction = BQ_BACKWARD;
  prep_init(&B, &cb);
  B.ha.scale = B.da.scale = F.ha.scale; /* the forward pass's parameters and x */
  B.ha.zero_point = B.da.zero_point = F.ha.zero_point;
  prep_generate(&B, 1);
  memcpy(B.x.h, F.x.h, F.x.total);
  if (F.sc.h) memcpy(B.sc.h, F.sc.h, F.sc.total);
  if (F.zp.h) memcpy(B.zp.h, F.zp.h, F.zp.total);
  prep_upload(&B);
  B.da.mask = F.da.mask;
  B.ha.mask = F.ha.mask;
  B.da.x = NULL; /* not read */
  plan = plan_get(&cb.d, B.what);
  BQ_OK(bq_plan_run(plan, &B.da, NULL, 0, NULL), "mask backward: %s", B.what);
  BQ_OK(bq_synchronize(NULL), "%s", B.what);
  prep_check(&B); /* dx from the mask */
  {
    bq_args r = B.ha;
    r.mask = NULL;
    r.dx = got = (unsigned char *)realloc(got, B.out.total);
    cr_assert(got != NULL);
    memset(got, cb.poison, B.out.total);
    r.dx = got + B.out.pre;
    cr_assert_eq(ref_run(&cb.d, &r), 0);
    cr_assert(memcmp(got, B.expected, B.out.total) == 0, "mask backward: %s\n  the mask's dx differs from x's",
              B.what);
  }
  free(got);
  dbuf_free(&mk);
  prep_free(&F);
  prep_free(&B);
}

/* Every float type x int type x q range, the small shapes and two large ones */
static void run_mask_matrix(bq_granularity g)
{
  int ti, ii, qi, k;
  GPU_BEGIN();
  for (ti = 0; ti < 4; ti++)
    for (ii = 0; ii < 2; ii++)
      for (qi = 0; qi < 3; qi++) {
        gcase c;
        case_desc(&c, BQ_FAKE_QUANTIZE, BQ_FORWARD, g, ti, ii, qi);
        if (g != BQ_PER_TENSOR) c.d.scale_type = (ti + qi) % 2 ? BQ_F32 : BQ_DTYPE_DEFAULT;
        for (k = 0; k < n_cases(g) + 2; k++) {
          if (k < n_cases(g)) set_shape(&c, g, k);
          else set_big_shape(&c, g, k - n_cases(g), ti);
          set_offsets(&c, k % 3);
          c.zp_null = rnd() % 4 == 0;
          c.specials = k % 5 != 1;
          c.poison = (rnd() & 1) ? 0xa5 : 0x5a;
          run_mask_pair(&c);
        }
      }
}

Test(mask, per_tensor) { run_mask_matrix(BQ_PER_TENSOR); }
Test(mask, per_channel) { run_mask_matrix(BQ_PER_CHANNEL); }

/* ==== CUDA graphs ============================================================================ */

/* A graph captured around bq_plan_run on a fresh plan replays correctly, reading the
   device buffers' current contents (inputs, scales and zero points changed after the
   capture), and the capture itself runs nothing. */
Test(graph, capture_and_replay)
{
  const bq__driver_api *drv;
  int ci, rep;
  GPU_BEGIN();
  drv = bq__driver_get();
  for (ci = 0; ci < 3; ci++) {
    gcase c;
    prep P;
    bq_plan *plan = NULL;
    bq__CUstream s = NULL;
    bq__CUgraph gr = NULL;
    bq__CUgraphExec ex = NULL;
    bq_status st;
    int r;
    size_t i;
    memset(&c, 0, sizeof c);
    if (ci == 0) {
      c.d.op = BQ_QUANTIZE;
      c.d.float_type = BQ_F32;
      c.a.numel = 100003;
    } else if (ci == 1) {
      c.d.op = BQ_FAKE_QUANTIZE;
      c.d.direction = BQ_BACKWARD;
      c.d.granularity = BQ_PER_TOKEN;
      c.d.float_type = BQ_BF16;
      c.d.int_type = BQ_U8;
      c.d.scale_type = BQ_BF16; /* scales of the float type */
      c.d.qmin = 3;
      c.d.qmax = 200;
      c.a.rows = 37; c.a.cols = 1000; c.a.x_row_stride = 1003; c.a.y_row_stride = 1001;
    } else {
      c.d.op = BQ_DEQUANTIZE;
      c.d.granularity = BQ_PER_GROUP;
      c.d.float_type = BQ_F16;
      c.d.scale_type = BQ_F32;
      c.a.rows = 64; c.a.cols = 4096; c.a.group_size = 128;
    }
    set_offsets(&c, ci);
    c.specials = 1;
    c.poison = 0xa5;
    prep_init(&P, &c);
    prep_generate(&P, 0);
    prep_upload(&P);
    st = bq_plan_select(&c.d, &plan); /* fresh: its first run is the captured one */
    cr_assert_eq(st, BQ_SUCCESS, "%s: select: %s", P.what, bq_last_error());
    cr_assert_eq(drv->cuStreamCreate(&s, 0), 0);
    cr_assert_eq(drv->cuStreamBeginCapture(s, BQ__CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    st = bq_plan_run(plan, &P.da, NULL, 0, s);
    r = drv->cuStreamEndCapture(s, &gr);
    cr_assert_eq(st, BQ_SUCCESS, "%s: run under capture: %s", P.what, bq_last_error());
    cr_assert_eq(r, 0, "%s: cuStreamEndCapture -> %d", P.what, r);
    cr_assert_eq(drv->cuGraphInstantiateWithFlags(&ex, gr, 0), 0, "%s", P.what);
    /* capturing executed nothing: the output is still all poison */
    BQ_OK(bq_memcpy_to_host(P.got, P.out.dev, P.out.total), "%s", P.what);
    for (i = 0; i < P.out.total && P.got[i] == c.poison; i++) {}
    cr_assert_eq(i, P.out.total, "%s: the capture wrote byte %zu of the output", P.what, i);
    for (rep = 0; rep < 2; rep++) {
      prep_generate(&P, 1); /* new data behind the same pointers */
      prep_upload(&P);
      cr_assert_eq(drv->cuGraphLaunch(ex, s), 0, "%s", P.what);
      cr_assert_eq(drv->cuStreamSynchronize(s), 0, "%s", P.what);
      prep_check(&P);
    }
    drv->cuGraphExecDestroy(ex);
    drv->cuGraphDestroy(gr);
    drv->cuStreamDestroy(s);
    bq_plan_destroy(plan);
    prep_free(&P);
  }
}

/* ==== zero-size problems ======================================================================== */

/* A zero-size run succeeds, writes nothing, and launches nothing: captured into a graph
   it adds no node. */
Test(zero_size, succeeds_without_launch)
{
  static const bq_granularity grans[4] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP};
  static const bq_op ops[3] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE};
  const bq__driver_api *drv;
  int gi, oi, dir, v;
  GPU_BEGIN();
  drv = bq__driver_get();
  for (gi = 0; gi < 4; gi++)
    for (oi = 0; oi < 3; oi++)
      for (dir = 0; dir < 2; dir++)
        for (v = 0; v < 3; v++) {
          gcase c;
          prep P;
          bq_plan *plan;
          bq__CUstream s = NULL;
          bq__CUgraph gr = NULL;
          bq_status st;
          int r;
          memset(&c, 0, sizeof c);
          c.d.op = ops[oi];
          c.d.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
          c.d.granularity = grans[gi];
          c.d.float_type = k_float_types[(gi + oi + v) % 4];
          c.d.int_type = k_int_types[(oi + v) % 2];
          switch (grans[gi]) {
          case BQ_GRANULARITY_DEFAULT: /* per tensor */
          case BQ_PER_TENSOR: c.a.numel = 0; break;
          case BQ_PER_CHANNEL:
            c.a.rank = 3; c.a.shape[0] = v == 0 ? 0 : 4; c.a.shape[1] = v == 1 ? 0 : 5;
            c.a.shape[2] = v == 2 ? 0 : 6; c.a.axis = v - 1;
            break;
          case BQ_PER_TOKEN:
            c.a.rows = v == 1 ? 5 : 0; c.a.cols = v == 0 ? 7 : 0; c.a.x_row_stride = v == 2 ? 9 : 0;
            break;
          case BQ_PER_GROUP:
            c.a.rows = v == 1 ? 5 : 0; c.a.cols = v == 1 ? 0 : 96; c.a.group_size = 32;
            c.a.group_row_stride = v == 2 ? 7 : 0;
            break;
          case BQ_PER_BLOCK: break; /* tests/test_gpu_blocks.c */
          }
          set_offsets(&c, v);
          c.specials = 1;
          c.poison = 0xa5;
          prep_init(&P, &c);
          prep_generate(&P, 0);
          prep_upload(&P);
          plan = plan_get(&c.d, P.what);
          /* on the legacy stream */
          BQ_OK(bq_plan_run(plan, &P.da, NULL, 0, NULL), "%s", P.what);
          BQ_OK(bq_synchronize(NULL), "%s", P.what);
          prep_check(&P);
          /* under capture: no node */
          cr_assert_eq(drv->cuStreamCreate(&s, 0), 0);
          cr_assert_eq(drv->cuStreamBeginCapture(s, BQ__CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
          st = bq_plan_run(plan, &P.da, NULL, 0, s);
          r = drv->cuStreamEndCapture(s, &gr);
          cr_assert_eq(st, BQ_SUCCESS, "%s: %s", P.what, bq_last_error());
          cr_assert_eq(r, 0, "%s: cuStreamEndCapture -> %d", P.what, r);
          {
            size_t n = 12345;
            cr_assert_eq(drv->cuGraphGetNodes(gr, NULL, &n), 0);
            cr_assert_eq(n, 0, "%s: a zero-size run put %zu node(s) into the graph", P.what, n);
          }
          drv->cuGraphDestroy(gr);
          drv->cuStreamDestroy(s);
          prep_check(&P);
          prep_free(&P);
        }
}
