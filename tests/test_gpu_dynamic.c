/* tests/test_gpu_dynamic.c - dynamic quantization (BQ_DYNAMIC_QUANTIZE) on the GPU
   against the CPU reference (tests/reference_dynamic.h), bit for bit: scales, zero
   points and data.

   Coverage: per token, per group, per tensor x f32/f64/f16/bf16 x s8/u8 x symmetric /
   asymmetric x scale type (T, f32) x full and narrow q-ranges; edge segments (zeros,
   constants, one huge outlier, NaN and +-inf elements, all NaN, subnormals, values near
   the type's max, exact rounding ties); D = 1 and odd D; rows longer than the kernel keeps
   on chip; strided rows; misaligned x and y; group sizes 1..4096 with padded parameter
   rows; 70000 rows; per-tensor sizes up to 4M+3 with a determinism check; zero-size
   problems.

   Every output allocation (y, scales, zero points) is poisoned with 0xA5 first and
   compared whole afterwards: guard bytes before and after, gaps between strided rows and
   padded parameter rows must keep the poison; symmetric runs pass a poisoned zero-point
   buffer (or NULL) that must stay untouched. x is checked to be unchanged. Inputs are drawn
   fresh each run (the seed is in every failure message; BQ_TEST_SEED=<n> replays one).

   Without a usable CUDA driver/device every test is skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_dynamic.h"
#include "reference_sr.h"
#include "reference_rotate.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GPU_UTIL_BUFFERS
#define GPU_UTIL_LAUNCHES
#include "gpu_util.h"

#undef BQ_OK /* gpu_util.h's: this suite's takes one message argument */
#define BQ_OK(call, what)                                                                    \
  do {                                                                                       \
    bq_status st_ = (call);                                                                  \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s | %s", #call, bq_status_name(st_),          \
                 bq_last_error(), (what));                                                   \
  } while (0)

static int g_sr; /* the cases round stochastically (desc.rounding; seeds and offsets drawn per case) */
static bq_desc make_desc(bq_granularity g, bq_dtype T, bq_dtype I, int asym, bq_dtype st, int qmin, int qmax)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.rounding = g_sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = g;
  d.float_type = T;
  d.int_type = I;
  d.asymmetric = asym;
  d.scale_type = st == BQ_F32 ? BQ_DTYPE_DEFAULT : st; /* the default must mean f32 */
  d.qmin = qmin;
  d.qmax = qmax;
  return d;
}

/* The narrow q-range used for each (int type, symmetric/asymmetric). */
static void narrow_range(bq_dtype I, int asym, int *qmin, int *qmax)
{
  if (I == BQ_S8) { *qmin = -7; *qmax = 7; }
  else if (asym) { *qmin = 3; *qmax = 200; }
  else { *qmin = 1; *qmax = 100; }
}

static const char *gran_name(bq_granularity g)
{
  return g == BQ_PER_TENSOR ? "per_tensor" : g == BQ_PER_TOKEN ? "per_token" : g == BQ_PER_GROUP ? "per_group"
                                                                                                 : "per_?";
}

/* elements per 16-byte access, and the longest row the kernel keeps on chip
   (256 threads x 8 accesses): dynamic.cu's BQ_VEC and 256 * BQ_CPT * BQ_VEC */
static int vec_of(bq_dtype T) { return 16 / (int)ref_dtype_size(T); }
static int64_t on_chip_of(bq_dtype T) { return (int64_t)256 * 8 * vec_of(T); }

/* ==== value generators ==================================================================== */

static void store_bits(bq_dtype t, void *buf, int64_t i, uint64_t bits)
{
  unsigned char *p = (unsigned char *)buf;
  if (t == BQ_F64) memcpy(p + 8 * i, &bits, 8);
  else if (t == BQ_F32) { uint32_t b = (uint32_t)bits; memcpy(p + 4 * i, &b, 4); }
  else { uint16_t b = (uint16_t)bits; memcpy(p + 2 * i, &b, 2); }
}

static void store_t(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

static uint64_t sign_bit(bq_dtype t)
{
  return t == BQ_F64 ? 1ull << 63 : t == BQ_F32 ? 0x80000000ull : 0x8000ull;
}

/* a NaN of type t: quiet, negative with a payload, or signaling */
static uint64_t nan_bits(bq_dtype t)
{
  static const uint64_t f64b[] = {0x7ff8000000000000ull, 0xfff8000000001234ull, 0x7ff0000000000001ull,
                                  0x7ff4000000000000ull};
  static const uint64_t f32b[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u, 0x7fa00000u};
  static const uint64_t f16b[] = {0x7e00, 0xfe12, 0x7c01, 0x7d00};
  static const uint64_t b16b[] = {0x7fc0, 0xffc1, 0x7f81, 0x7fa0};
  const uint64_t *tab = t == BQ_F64 ? f64b : t == BQ_F32 ? f32b : t == BQ_F16 ? f16b : b16b;
  return tab[rnd() % 4];
}
static uint64_t inf_bits(bq_dtype t, int neg)
{
  uint64_t b = t == BQ_F64 ? 0x7ff0000000000000ull : t == BQ_F32 ? 0x7f800000u : t == BQ_F16 ? 0x7c00u : 0x7f80u;
  return neg ? b | sign_bit(t) : b;
}
/* largest finite magnitudes and the subnormal mantissa mask */
static uint64_t max_bits(bq_dtype t)
{
  return t == BQ_F64 ? 0x7fefffffffffffffull : t == BQ_F32 ? 0x7f7fffffu : t == BQ_F16 ? 0x7bffu : 0x7f7fu;
}
static uint64_t mant_mask(bq_dtype t)
{
  return t == BQ_F64 ? 0x000fffffffffffffull : t == BQ_F32 ? 0x007fffffu : t == BQ_F16 ? 0x03ffu : 0x007fu;
}

/* The kinds of segment content (a segment: a row, a group or the whole tensor). */
enum {
  K_RANDOM,    /* uniform in [-m, m], m a random power of two */
  K_POSITIVE,  /* all > 0: asymmetric lo = 0 */
  K_NEGATIVE,  /* all < 0: asymmetric hi = 0 */
  K_OFFSET,    /* uniform in a random [a, b] */
  K_TIES,      /* s a power of two and most elements exact .5 ties of x / s */
  K_ZERO,      /* all +-0: amax == 0, hi == lo: s = 1 */
  K_CONST,     /* one value repeated */
  K_SINGLE,    /* zeros and one nonzero element */
  K_OUTLIER,   /* small values and one +-1e30 (f16: +-65504) */
  K_NAN,       /* random with ~20% NaN (quiet, negative, signaling) */
  K_INF,       /* random with +inf and/or -inf (and a NaN): s = inf */
  K_ALLNAN,    /* every element NaN */
  K_TINY,      /* subnormals of T: scales that underflow in f16 or f32 */
  K_HUGE,      /* magnitudes near T's max: (hi - lo) overflows in C, f32 scales of f64 overflow */
  K_SPRINKLED, /* random with ~1% NaN and ~1% zeros */
  NKINDS
};
static const char *const kind_names[NKINDS] = {"random", "positive", "negative", "offset", "ties",
                                               "zero",   "const",    "single",   "outlier", "nan",
                                               "inf",    "allnan",   "tiny",     "huge",    "sprinkled"};

/* A random power of two that keeps values of T comfortably finite and mostly normal. */
static double rnd_mag(bq_dtype T)
{
  int e = T == BQ_F16 ? (int)rnd_range(-8, 12) : T == BQ_F64 ? (int)rnd_range(-100, 100) : (int)rnd_range(-40, 40);
  return ldexp(1.0, e);
}

/* Fills one segment x[0..n) of a (normalized) desc's problem with content `kind`. */
static void gen_segment(const bq_desc *d, void *x, int64_t n, int kind)
{
  const bq_dtype T = d->float_type;
  int64_t i;
  if (n <= 0) return;
  switch (kind) {
  case K_RANDOM:
  case K_SPRINKLED:
  case K_NAN:
  case K_INF: {
    double m = rnd_mag(T);
    for (i = 0; i < n; i++) store_t(T, x, i, (2.0 * rnd_unit() - 1.0) * m);
    if (kind == K_SPRINKLED) {
      for (i = 0; i < n; i++) {
        uint64_t r = rnd() % 100;
        if (r == 0) store_bits(T, x, i, nan_bits(T));
        else if (r == 1) store_t(T, x, i, (rnd() & 1) ? 0.0 : -0.0);
      }
    } else if (kind == K_NAN) {
      for (i = 0; i < n; i++)
        if (rnd() % 5 == 0) store_bits(T, x, i, nan_bits(T));
    } else if (kind == K_INF) {
      int which = (int)(rnd() % 3); /* +inf, -inf, both */
      if (which != 1) store_bits(T, x, rnd_range(0, n - 1), inf_bits(T, 0));
      if (which != 0) store_bits(T, x, rnd_range(0, n - 1), inf_bits(T, 1));
      if (n > 2 && (rnd() & 1)) store_bits(T, x, rnd_range(0, n - 1), nan_bits(T));
    }
    return;
  }
  case K_POSITIVE:
  case K_NEGATIVE: {
    double m = rnd_mag(T), sg = kind == K_POSITIVE ? 1.0 : -1.0;
    for (i = 0; i < n; i++) store_t(T, x, i, sg * (0.01 + 0.99 * rnd_unit()) * m);
    return;
  }
  case K_OFFSET: {
    double m = rnd_mag(T), a = (2.0 * rnd_unit() - 1.0) * m, w = rnd_unit() * m;
    for (i = 0; i < n; i++) store_t(T, x, i, a + w * rnd_unit());
    return;
  }
  case K_TIES: {
    /* s = 2^e exactly: symmetric, one element is +-qmax * 2^e (the amax); asymmetric,
       lo = -k * 2^e and hi = (R - k) * 2^e with R = qmax - qmin, so s = 2^e, zp = qmin + k.
       The other elements are (j + 0.5) * 2^e inside [lo, hi] / [-amax, amax]: exact ties
       of x / s (RNE decides), or near them where T cannot hold the tie. */
    int e = T == BQ_F16 ? (int)rnd_range(-12, 6) : (int)rnd_range(-20, 20);
    double u = ldexp(1.0, e), lo, hi;
    if (d->asymmetric) {
      int R = d->qmax - d->qmin;
      int k = (int)rnd_range(0, R);
      lo = -(double)k * u;
      hi = (double)(R - k) * u;
      if (R == 0) { lo = -u; hi = u; }
    } else {
      lo = -(double)d->qmax * u;
      hi = (double)d->qmax * u;
    }
    for (i = 0; i < n; i++) {
      double v;
      int tries = 0;
      do {
        v = (floor(lo / u + (hi - lo) / u * rnd_unit()) + 0.5) * u;
      } while ((v < lo || v > hi) && ++tries < 8);
      if (v < lo || v > hi) v = 0.0;
      store_t(T, x, i, v);
    }
    if (d->asymmetric) {
      store_t(T, x, rnd_range(0, n - 1), lo);
      store_t(T, x, rnd_range(0, n - 1), hi);
    } else {
      store_t(T, x, rnd_range(0, n - 1), (rnd() & 1) ? hi : lo);
    }
    return;
  }
  case K_ZERO:
    for (i = 0; i < n; i++) store_t(T, x, i, (rnd() & 1) ? 0.0 : -0.0);
    return;
  case K_CONST: {
    double c = ((rnd() & 1) ? 1.0 : -1.0) * (1.0 + rnd_unit()) * rnd_mag(T);
    for (i = 0; i < n; i++) store_t(T, x, i, c);
    return;
  }
  case K_SINGLE:
    for (i = 0; i < n; i++) store_t(T, x, i, 0.0);
    store_t(T, x, rnd_range(0, n - 1), ((rnd() & 1) ? 1.0 : -1.0) * (0.5 + rnd_unit()) * rnd_mag(T));
    return;
  case K_OUTLIER: {
    double big = T == BQ_F16 ? 65504.0 : 1e30, m = T == BQ_F16 ? ldexp(1.0, (int)rnd_range(-8, 4)) : rnd_mag(T);
    if (m > 1e20) m = 1e20;
    for (i = 0; i < n; i++) store_t(T, x, i, (2.0 * rnd_unit() - 1.0) * m);
    store_t(T, x, rnd_range(0, n - 1), (rnd() & 1) ? big : -big);
    return;
  }
  case K_ALLNAN:
    for (i = 0; i < n; i++) store_bits(T, x, i, nan_bits(T));
    return;
  case K_TINY: /* random subnormal bit patterns (and their zeros), random signs */
    for (i = 0; i < n; i++) store_bits(T, x, i, (rnd() & mant_mask(T)) | ((rnd() & 1) ? sign_bit(T) : 0));
    return;
  case K_HUGE: { /* the top binade of T, random signs, often the max itself */
    uint64_t top = max_bits(T) & ~mant_mask(T);
    for (i = 0; i < n; i++) {
      uint64_t b = (rnd() % 4 == 0) ? max_bits(T) : top | (rnd() & mant_mask(T));
      store_bits(T, x, i, b | ((rnd() & 1) ? sign_bit(T) : 0));
    }
    return;
  }
  default:
    return;
  }
}

/* Kind of segment number `s`: a fixed kind, or (kind < 0) every kind once, then mostly
   random content with edge segments mixed in. */
static int kind_of(int kind, int64_t s)
{
  static const int later[] = {K_RANDOM, K_RANDOM, K_RANDOM, K_RANDOM, K_OFFSET, K_POSITIVE, K_NEGATIVE,
                              K_TIES,   K_TIES,   K_SPRINKLED, K_NAN,  K_OUTLIER, K_ZERO,   K_CONST,
                              K_SINGLE, K_TINY,   K_HUGE,   K_INF,    K_ALLNAN};
  if (kind >= 0) return kind;
  if (s < NKINDS) return (int)s;
  return PICK(later);
}

/* ==== one case: buffers with guards, generation, launch, check =========================== */

#define GUARD GPU_GUARD /* bytes of poison before and after every output, garbage around x */
#define POISON 0xA5

typedef struct dcase {
  bq_desc d;   /* as given to bq_plan_select */
  bq_args a;   /* numel / rows / cols / strides / group fields; pointers are filled in */
  int xoff;    /* element offsets from a 256-byte boundary: x (T elements), */
  int yoff;    /* y (bytes), */
  int soff;    /* scales and zero points (their elements) */
  int zp_null; /* symmetric: out_zero_points = NULL (else a poisoned buffer that must stay) */
  int kind;    /* segment content: < 0 mixed (see kind_of), else every segment */
  int repeat;  /* run a second time on the same input: identical bits required */
} dcase;

typedef struct drun {
  dcase c;
  bq_desc dn; /* normalized */
  ref_layout L;
  int64_t nparams, nseg, ngroups;
  size_t ts, ss; /* sizes of T and of the scale type */
  dbuf x, y, sc, zp;
  unsigned char *ey, *es, *ez; /* expected images of y, scales, zero points */
  unsigned char *gy, *gs, *gz, *gx; /* what came back */
  unsigned char *xr;                /* the fused rotation: x rotated by the reference (its layout) */
  bq_args ha, da;
  char what[768];
} drun;

static void describe(drun *R)
{
  const bq_desc *d = &R->dn;
  const bq_args *a = &R->c.a;
  int n = snprintf(R->what, sizeof R->what, "dynamic %s %s T=%s I=%s q[%d,%d] scale_type=%s | ",
                   gran_name(d->granularity), d->asymmetric ? "asymmetric" : "symmetric",
                   ref_dtype_name(d->float_type), ref_dtype_name(d->int_type), d->qmin, d->qmax,
                   ref_dtype_name(d->scale_type));
  size_t k = n > 0 ? (size_t)n : 0;
  if (k < sizeof R->what) {
    if (d->granularity == BQ_PER_TENSOR)
      n = snprintf(R->what + k, sizeof R->what - k, "numel=%lld", (long long)a->numel);
    else
      n = snprintf(R->what + k, sizeof R->what - k, "rows=%lld cols=%lld x_row_stride=%lld y_row_stride=%lld",
                   (long long)a->rows, (long long)a->cols, (long long)a->x_row_stride, (long long)a->y_row_stride);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what && d->granularity == BQ_PER_GROUP) {
    n = snprintf(R->what + k, sizeof R->what - k, " group_size=%lld group_row_stride=%lld",
                 (long long)a->group_size, (long long)a->group_row_stride);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what && d->rounding == BQ_ROUND_STOCHASTIC) {
    n = snprintf(R->what + k, sizeof R->what - k, " | stochastic rounding (seed 0x%llx, offset 0x%llx)",
                 (unsigned long long)a->seed, (unsigned long long)a->offset);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what && d->rotation) {
    n = snprintf(R->what + k, sizeof R->what - k, " | rotation blocks of %lld%s (seed 0x%llx)",
                 (long long)a->rotation_block, d->random_signs ? " with random signs" : "", (unsigned long long)a->seed);
    k += n > 0 ? (size_t)n : 0;
  }
  if (k < sizeof R->what)
    snprintf(R->what + k, sizeof R->what - k,
             " | offsets x=%d y=%d params=%d | out_zero_points=%s | content=%s%s | BQ_TEST_SEED=0x%llx",
             R->c.xoff, R->c.yoff, R->c.soff, R->c.zp_null ? "NULL" : "buffer",
             R->c.kind < 0 ? "mixed" : kind_names[R->c.kind], R->c.repeat ? " | run twice" : "",
             (unsigned long long)g_seed);
}

/* Allocates, generates the input and computes the expected outputs. */
static void drun_init(drun *R, const dcase *c)
{
  int64_t r, g;
  memset(R, 0, sizeof *R);
  R->c = *c;
  R->dn = refd_desc_normalize(&c->d);
  if (R->dn.asymmetric) R->c.zp_null = 0;
  describe(R);
  cr_assert_eq(ref_layout_init(&R->L, &R->dn, &c->a), 0, "bad test case (layout) | %s", R->what);
  R->ts = ref_dtype_size(R->dn.float_type);
  R->ss = ref_dtype_size(R->dn.scale_type);
  if (R->dn.granularity == BQ_PER_TENSOR) {
    R->nparams = R->nseg = c->a.numel > 0 ? 1 : 0;
  } else if (R->dn.granularity == BQ_PER_TOKEN) {
    R->nparams = R->nseg = R->L.count ? R->L.rows : 0;
  } else {
    R->ngroups = R->L.cols / R->L.group;
    R->nparams = R->L.n_params;
    R->nseg = R->L.count ? R->L.rows * R->ngroups : 0;
  }
  dbuf_make(&R->x, R->ts, R->L.x_extent, c->xoff);
  dbuf_make(&R->y, 1, R->L.y_extent, c->yoff);
  dbuf_make(&R->sc, R->ss, R->nparams, c->soff);
  if (!R->c.zp_null) dbuf_make(&R->zp, 4, R->nparams, c->soff);
  R->ey = (unsigned char *)malloc(R->y.total);
  R->gy = (unsigned char *)malloc(R->y.total);
  R->es = (unsigned char *)malloc(R->sc.total);
  R->gs = (unsigned char *)malloc(R->sc.total);
  R->gx = (unsigned char *)malloc(R->x.total);
  cr_assert(R->ey && R->gy && R->es && R->gs && R->gx, "host malloc | %s", R->what);
  if (!R->c.zp_null) {
    R->ez = (unsigned char *)malloc(R->zp.total);
    R->gz = (unsigned char *)malloc(R->zp.total);
    cr_assert(R->ez && R->gz, "host malloc | %s", R->what);
  }

  /* x: garbage everywhere (guards and row gaps keep it: reading it would change a
     scale), then the segments' content */
  fill_garbage(R->x.h, R->x.total);
  {
    unsigned char *x0 = R->x.h + R->x.pre;
    int64_t s = 0;
    switch (R->dn.granularity) {
    case BQ_PER_TENSOR:
      gen_segment(&R->dn, x0, c->a.numel, kind_of(c->kind, 0));
      break;
    case BQ_PER_TOKEN:
      if (R->L.count)
        for (r = 0; r < R->L.rows; r++) gen_segment(&R->dn, x0 + (size_t)(r * R->L.xs) * R->ts, R->L.cols, kind_of(c->kind, s++));
      break;
    default:
      if (R->L.count)
        for (r = 0; r < R->L.rows; r++)
          for (g = 0; g < R->ngroups; g++)
            gen_segment(&R->dn, x0 + (size_t)(r * R->L.xs + g * R->L.group) * R->ts, R->L.group, kind_of(c->kind, s++));
      break;
    }
  }

  /* expected: poison, then the reference writes the problem's outputs */
  memset(R->ey, POISON, R->y.total);
  memset(R->es, POISON, R->sc.total);
  if (R->ez) memset(R->ez, POISON, R->zp.total);
  R->ha = c->a;
  R->ha.x = R->x.h + R->x.pre;
  if (R->dn.rotation) { /* the reference: BQ_HADAMARD's forward pass, then dynamic quantize of its output */
    R->xr = (unsigned char *)malloc(R->x.total);
    cr_assert(R->xr, "host malloc | %s", R->what);
    memcpy(R->xr, R->x.h, R->x.total);
    if (R->L.count)
      ref_rotate(R->dn.float_type, 0, R->dn.random_signs, c->a.seed, (int)c->a.rotation_block, R->L.rows, R->L.cols,
                 R->x.h + R->x.pre, R->L.xs, R->xr + R->x.pre, R->L.xs);
    R->ha.x = R->xr + R->x.pre;
  }
  R->ha.y = R->ey + R->y.pre;
  R->ha.out_scales = R->es + R->sc.pre;
  R->ha.out_zero_points = R->ez ? (int32_t *)(void *)(R->ez + R->zp.pre) : NULL;
  cr_assert_eq(refd_run(&R->dn, &R->ha), 0, "reference rejected the case | %s", R->what);
  if (R->dn.rounding == BQ_ROUND_STOCHASTIC) /* y again: quantize with the scales written, rounding stochastically */
    cr_assert_eq(ref_dynamic_sr(&R->dn, &R->ha), 0, "the SR reference rejected the case | %s", R->what);

  R->da = c->a;
  R->da.x = R->x.dev + R->x.pre;
  R->da.y = R->y.dev + R->y.pre;
  R->da.out_scales = R->sc.dev + R->sc.pre;
  R->da.out_zero_points = R->c.zp_null ? NULL : (int32_t *)(void *)(R->zp.dev + R->zp.pre);
}

static void drun_free(drun *R)
{
  dbuf_free(&R->x);
  dbuf_free(&R->y);
  dbuf_free(&R->sc);
  dbuf_free(&R->zp);
  free(R->ey); free(R->gy); free(R->es); free(R->gs); free(R->ez); free(R->gz); free(R->gx); free(R->xr);
  memset(R, 0, sizeof *R);
}

/* "row r group g" (or tensor) of parameter index p, or NULL when p is in a padding gap */
static int param_where(const drun *R, int64_t p, char *buf, size_t cap)
{
  if (R->dn.granularity == BQ_PER_TENSOR) { snprintf(buf, cap, "tensor"); return 1; }
  if (R->dn.granularity == BQ_PER_TOKEN) { snprintf(buf, cap, "row %lld", (long long)p); return 1; }
  {
    int64_t r = p / R->L.grs, g = p % R->L.grs;
    if (g >= R->ngroups || r >= R->L.rows) return 0;
    snprintf(buf, cap, "row %lld group %lld", (long long)r, (long long)g);
    return 1;
  }
}

#define MSG_CAP 8192
#define MSG_MAX 8

/* The reduction of the segment holding parameter p, for messages. */
static void seg_summary(const drun *R, int64_t p, char *buf, size_t cap)
{
  const unsigned char *x0 = R->x.h + R->x.pre;
  int64_t start, n;
  bq_desc d = R->dn;
  unsigned char sbuf[8];
  int32_t zb = 0;
  refd_qp q;
  if (d.granularity == BQ_PER_TENSOR) { start = 0; n = R->c.a.numel; }
  else if (d.granularity == BQ_PER_TOKEN) { start = p * R->L.xs; n = R->L.cols; }
  else { start = (p / R->L.grs) * R->L.xs + (p % R->L.grs) * R->L.group; n = R->L.group; }
  q = refd_params(&d, x0 + (size_t)start * R->ts, n, sbuf, &zb, 0);
  snprintf(buf, cap, "[segment: n=%lld amax=%.17g lo=%.17g hi=%.17g -> C(s)=%.17g zp=%d]", (long long)n, q.amax,
           q.lo, q.hi, q.sd, (int)q.zp);
}

static size_t compare_y(const drun *R, char *msg, size_t cap)
{
  size_t bad = 0, j;
  char e[64], g[64], v[64], w[256];
  for (j = 0; j < R->y.total; j++) {
    int64_t k = (int64_t)j - (int64_t)R->y.pre, lg;
    if (R->ey[j] == R->gy[j]) continue;
    if (bad++ >= MSG_MAX) continue;
    ref_format_elem(e, sizeof e, R->dn.int_type, R->ey, (int64_t)j);
    ref_format_elem(g, sizeof g, R->dn.int_type, R->gy, (int64_t)j);
    if (k < 0 || k >= R->L.y_extent) {
      ref__append(msg, cap, "  y buffer[%zu] (guard, y index %lld): expected %s got %s\n", j, (long long)k, e, g);
      continue;
    }
    lg = ref_layout_logical(&R->L, k, 1);
    if (lg < 0) {
      ref__append(msg, cap, "  y[%lld] (gap between rows): expected %s got %s\n", (long long)k, e, g);
      continue;
    }
    {
      int64_t xi, yi, pi;
      ref_layout_index(&R->L, lg, &xi, &yi, &pi);
      ref_format_elem(v, sizeof v, R->dn.float_type, R->x.h + R->x.pre, xi);
      seg_summary(R, pi, w, sizeof w);
      ref__append(msg, cap, "  y[%lld] (row %lld col %lld) x=%s %s: expected %s got %s\n", (long long)k,
                  (long long)(lg / (R->L.cols ? R->L.cols : 1)), (long long)(lg % (R->L.cols ? R->L.cols : 1)), v, w,
                  e, g);
    }
  }
  if (bad > MSG_MAX) ref__append(msg, cap, "  ... %zu y bytes differ in all\n", bad);
  return bad;
}

/* scales (es = element size, t = type) or zero points (t = BQ_S32) */
static size_t compare_params(const drun *R, const char *name, bq_dtype t, size_t es, const dbuf *b,
                             const unsigned char *exp, const unsigned char *got, char *msg, size_t cap)
{
  size_t bad = 0, j;
  int64_t last = INT64_MIN;
  char e[64], g[64], w[256], where[64];
  for (j = 0; j < b->total; j++) {
    int64_t k = ((int64_t)j - (int64_t)b->pre), p;
    if (exp[j] == got[j]) continue;
    p = k >= 0 ? k / (int64_t)es : -1 - (-k - 1) / (int64_t)es;
    if (p == last) continue; /* one report per element */
    last = p;
    if (bad++ >= MSG_MAX) continue;
    if (p < 0 || p >= R->nparams) {
      ref__append(msg, cap, "  %s buffer byte %zu (guard, element %lld): expected 0x%02x got 0x%02x\n", name, j,
                  (long long)p, exp[j], got[j]);
      continue;
    }
    ref_format_elem(e, sizeof e, t, exp + b->pre, p);
    ref_format_elem(g, sizeof g, t, got + b->pre, p);
    if (!param_where(R, p, where, sizeof where)) {
      ref__append(msg, cap, "  %s[%lld] (padding between parameter rows): expected %s got %s\n", name,
                  (long long)p, e, g);
      continue;
    }
    seg_summary(R, p, w, sizeof w);
    ref__append(msg, cap, "  %s[%lld] (%s) %s: expected %s got %s\n", name, (long long)p, where, w, e, g);
  }
  if (bad > MSG_MAX) ref__append(msg, cap, "  ... %zu %s elements differ in all\n", bad, name);
  return bad;
}

/* Launches once (outputs poisoned first) and fetches everything back. */
static void drun_launch(drun *R)
{
  bq_plan *plan = plan_get(&R->c.d, R->what);
  void *ws = NULL;
  size_t wsb;
  bq_status st;
  BQ_OK(bq_memset(R->y.dev, POISON, R->y.total), R->what);
  BQ_OK(bq_memset(R->sc.dev, POISON, R->sc.total), R->what);
  if (R->zp.dev) BQ_OK(bq_memset(R->zp.dev, POISON, R->zp.total), R->what);
  st = bq_plan_can_implement(plan, &R->da);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_can_implement -> %s: %s | %s", bq_status_name(st), bq_last_error(), R->what);
  BQ_OK(bq_plan_workspace_size(plan, &R->da, &wsb), R->what);
  if (R->dn.granularity == BQ_PER_TENSOR && R->c.a.numel > 0)
    cr_assert(wsb > 0, "per tensor needs a workspace, bq_plan_workspace_size says 0 | %s", R->what);
  if (wsb) {
    BQ_OK(bq_malloc(&ws, wsb), R->what);
    BQ_OK(bq_memset(ws, POISON, wsb), R->what); /* the kernel must not depend on its contents */
  }
  BQ_OK(bq_plan_run(plan, &R->da, ws, wsb, NULL), R->what);
  BQ_OK(bq_synchronize(NULL), R->what);
  if (ws) BQ_OK(bq_free(ws), R->what);
  BQ_OK(bq_memcpy_to_host(R->gy, R->y.dev, R->y.total), R->what);
  BQ_OK(bq_memcpy_to_host(R->gs, R->sc.dev, R->sc.total), R->what);
  if (R->zp.dev) BQ_OK(bq_memcpy_to_host(R->gz, R->zp.dev, R->zp.total), R->what);
}

static void drun_check(drun *R, const char *pass)
{
  char *msg = (char *)malloc(MSG_CAP);
  size_t bad;
  cr_assert(msg != NULL);
  msg[0] = 0;
  bad = compare_params(R, "scales", R->dn.scale_type, R->ss, &R->sc, R->es, R->gs, msg, MSG_CAP);
  if (R->zp.dev)
    bad += compare_params(R, R->dn.asymmetric ? "zero_points" : "zero_points (symmetric: must stay untouched)",
                          BQ_S32, 4, &R->zp, R->ez, R->gz, msg, MSG_CAP);
  bad += compare_y(R, msg, MSG_CAP);
  BQ_OK(bq_memcpy_to_host(R->gx, R->x.dev, R->x.total), R->what);
  if (memcmp(R->gx, R->x.h, R->x.total)) {
    bad++;
    ref__append(msg, MSG_CAP, "  x (the input, with its guards and gaps) was modified\n");
  }
  if (bad) cr_assert_fail("%s: %zu mismatches | %s\n%s", pass, bad, R->what, msg);
  free(msg);
}

static void run_case(const dcase *c)
{
  drun R;
  drun_init(&R, c);
  BQ_OK(bq_memcpy_to_device(R.x.dev, R.x.h, R.x.total), R.what);
  drun_launch(&R);
  drun_check(&R, "run");
  if (c->repeat) {
    unsigned char *y1 = (unsigned char *)malloc(R.y.total), *s1 = (unsigned char *)malloc(R.sc.total);
    unsigned char *z1 = R.zp.dev ? (unsigned char *)malloc(R.zp.total) : NULL;
    cr_assert(y1 && s1 && (z1 || !R.zp.dev));
    memcpy(y1, R.gy, R.y.total);
    memcpy(s1, R.gs, R.sc.total);
    if (z1) memcpy(z1, R.gz, R.zp.total);
    drun_launch(&R);
    cr_assert(!memcmp(y1, R.gy, R.y.total) && !memcmp(s1, R.gs, R.sc.total) &&
                  (!z1 || !memcmp(z1, R.gz, R.zp.total)),
              "a second run on the same input gave different bits (not deterministic) | %s", R.what);
    drun_check(&R, "second run");
    free(y1); free(s1); free(z1);
  }
  drun_free(&R);
}

/* ==== case builders ============================================================================ */

static dcase token_case(const bq_desc *d, int64_t rows, int64_t cols, int64_t xs, int64_t ys, int xoff, int yoff)
{
  dcase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.a.rows = rows;
  c.a.cols = cols;
  c.a.x_row_stride = xs;
  c.a.y_row_stride = ys;
  c.xoff = xoff;
  c.yoff = yoff;
  c.soff = (int)rnd_range(0, 3);
  c.zp_null = !d->asymmetric && (rnd() & 1);
  c.kind = -1;
  if (g_sr) c.a.seed = rnd(), c.a.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
  return c;
}

static dcase group_case(const bq_desc *d, int64_t rows, int64_t G, int64_t ngroups, int64_t grs, int64_t xs_pad,
                        int64_t ys_pad, int xoff, int yoff)
{
  dcase c = token_case(d, rows, G * ngroups, 0, 0, xoff, yoff);
  c.a.x_row_stride = xs_pad ? G * ngroups + xs_pad : 0;
  c.a.y_row_stride = ys_pad ? G * ngroups + ys_pad : 0;
  c.a.group_size = G;
  c.a.group_row_stride = grs;
  return c;
}

static dcase tensor_case(const bq_desc *d, int64_t numel, int xoff, int yoff, int kind)
{
  dcase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.a.numel = numel;
  c.xoff = xoff;
  c.yoff = yoff;
  c.soff = (int)rnd_range(0, 3);
  c.zp_null = !d->asymmetric && (rnd() & 1);
  c.kind = kind;
  if (g_sr) c.a.seed = rnd(), c.a.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
  return c;
}

static int64_t odd_pad(void) { return 2 * rnd_range(0, 20) + 1; } /* 1, 3, ..., 41 */

/* ==== the matrix: scope x T x I x symmetric/asymmetric x scale type x q-range ================== */

static void matrix_token(const bq_desc *d)
{
  static const int64_t aligned_cols[] = {16, 256, 1024, 4096};
  static const int64_t odd_cols[] = {1, 2, 3, 7, 17, 31, 100, 257, 1000, 4095, 5001};
  dcase c;
  /* aligned, contiguous: the vector path from the first element */
  c = token_case(d, NKINDS + rnd_range(0, 16), PICK(aligned_cols), 0, 0, 0, 0);
  run_case(&c);
  /* odd lengths, contiguous rows (each row's prologue differs from the last's), x and y
     misaligned independently */
  c = token_case(d, NKINDS + rnd_range(0, 8), PICK(odd_cols), 0, 0, (int)rnd_range(0, 15), (int)rnd_range(0, 15));
  run_case(&c);
  /* odd lengths, padded odd strides, x and y misaligned independently */
  {
    int64_t cols = PICK(odd_cols);
    c = token_case(d, NKINDS + rnd_range(0, 8), cols, cols + odd_pad(), cols + rnd_range(0, 40),
                   (int)rnd_range(0, 15), (int)rnd_range(0, 15));
    run_case(&c);
  }
}

static void matrix_group(const bq_desc *d)
{
  static const int64_t slow_g[] = {1, 3, 5, 16, 32, 48, 128, 4096};
  int vec = vec_of(d->float_type);
  /* the shuffle path: G a power-of-two number (<= 128) of whole 16-byte accesses, x and
     every row 16-byte aligned (y need not be) */
  {
    int64_t G = (int64_t)vec << rnd_range(0, 7), ng = rnd_range(1, 6);
    int64_t xpad = (rnd() & 1) ? (int64_t)vec * rnd_range(1, 3) : 0;
    dcase c = group_case(d, NKINDS + rnd_range(0, 4), G, ng, ng + rnd_range(0, 3), xpad, rnd_range(0, 9), 0,
                         (int)rnd_range(0, 15));
    run_case(&c);
  }
  /* each group as a row of its own: odd G, misaligned x, odd strides */
  {
    int64_t G = PICK(slow_g), maxng = G >= 4096 ? 2 : 8192 / G < 6 ? 8192 / G : 6;
    int64_t ng = rnd_range(1, maxng);
    dcase c = group_case(d, rnd_range(3, 12), G, ng, ng + rnd_range(0, 3), odd_pad(), odd_pad(),
                         (int)rnd_range(0, 15), (int)rnd_range(0, 15));
    run_case(&c);
  }
}

static void matrix_tensor(const bq_desc *d)
{
  static const int64_t sizes[] = {1, 2, 3, 17, 100, 1000, 4097, 12345};
  int k;
  for (k = 0; k < NKINDS; k++) {
    dcase c = tensor_case(d, PICK(sizes), (int)rnd_range(0, 15), (int)rnd_range(0, 15), k);
    run_case(&c);
  }
  {
    dcase c = tensor_case(d, rnd_range(100000, 300000), (int)rnd_range(0, 15), (int)rnd_range(0, 15), K_SPRINKLED);
    run_case(&c);
  }
}

static void run_matrix(bq_granularity g, bq_dtype T)
{
  static const bq_dtype ints[] = {BQ_S8, BQ_U8};
  int ii, asym, sti, qr;
  gpu_begin();
  for (ii = 0; ii < 2; ii++)
    for (asym = 0; asym < 2; asym++)
      for (sti = 0; sti < (T == BQ_F32 ? 1 : 2); sti++)
        for (qr = 0; qr < 2; qr++) {
          int qmin = 0, qmax = 0;
          bq_desc d;
          if (qr) narrow_range(ints[ii], asym, &qmin, &qmax);
          d = make_desc(g, T, ints[ii], asym, sti ? BQ_F32 : T, qmin, qmax);
          if (g == BQ_PER_TOKEN) matrix_token(&d);
          else if (g == BQ_PER_GROUP) matrix_group(&d);
          else matrix_tensor(&d);
        }
}

#define MATRIX_TESTS(suite, gran)                                   \
  Test(suite, f32) { run_matrix(gran, BQ_F32); }                    \
  Test(suite, f64) { run_matrix(gran, BQ_F64); }                    \
  Test(suite, f16) { run_matrix(gran, BQ_F16); }                    \
  Test(suite, bf16) { run_matrix(gran, BQ_BF16); }

MATRIX_TESTS(dynamic_per_token, BQ_PER_TOKEN)
MATRIX_TESTS(dynamic_per_group, BQ_PER_GROUP)
MATRIX_TESTS(dynamic_per_tensor, BQ_PER_TENSOR)

/* Stochastic rounding: the matrix of each granularity (integer storage, every float type,
   symmetry, scale type and q-range) and FP8 storage, each case with a fresh seed and offset,
   scales and y against reference_dynamic.h's scales quantized by reference_sr.h */
static void run_sr(bq_granularity g)
{
  g_sr = 1;
  for (int t = 0; t < 4; t++) {
    const bq_dtype T = t == 0 ? BQ_F32 : t == 1 ? BQ_F64 : t == 2 ? BQ_F16 : BQ_BF16;
    run_matrix(g, T);
    for (int f8 = 0; f8 < 2; f8++) {
      const bq_desc d = make_desc(g, T, f8 ? BQ_E5M2 : BQ_E4M3, 0, f8 ? T : BQ_F32, 0, 0);
      if (g == BQ_PER_TOKEN) matrix_token(&d);
      else if (g == BQ_PER_GROUP) matrix_group(&d);
      else matrix_tensor(&d);
    }
  }
  g_sr = 0;
}
Test(dynamic_stochastic_rounding, per_token, .timeout = 600) { run_sr(BQ_PER_TOKEN); }
Test(dynamic_stochastic_rounding, per_group, .timeout = 600) { run_sr(BQ_PER_GROUP); }
Test(dynamic_stochastic_rounding, per_tensor, .timeout = 600) { run_sr(BQ_PER_TENSOR); }

/* ==== the fused rotation (desc.rotation, per token) ============================================ */

/* Per token with the fused rotation, against the reference's rotation (tests/reference_rotate.h)
   then reference_dynamic.h: every float type, integer (symmetric, asymmetric, narrow) and FP8
   storage, every block size the kernels take (2 up to 32 accesses), with and without the
   random signs, on each entry point by name: bq_dynamic (short rows, teams of a warp and more),
   bq_dynamic_long (forced: rows read once, and rows longer than its teams' registers, read
   twice) and bq_dynamic_staged (16-bit data, forced; its two slots past 48 KiB now and then).
   Rows on the 16-byte grid, padded strides,
   y anywhere; every content kind. */
static void rot_case(const bq_desc *d, int64_t n, int entry, const bq_plan *plan)
{
  const int vec = vec_of(d->float_type);
  const int64_t unit = n > vec ? n : vec;
  int64_t cols, rows = rnd_range(1, 24);
  switch (entry) {
  case BQ__DYN_LONG: /* past the long teams' registers (8 accesses of 512 lanes) now and then: read twice */
    cols = unit * rnd_range(1, 5) * (rnd() % 3 == 0 ? (int64_t)(4096 * 8 * 2) / unit + 1 : 16); break;
  case BQ__DYN_STAGED: /* a third of the rows past 48 KiB of two slots (the opt-in's), up to 4096 accesses */
    cols = unit * rnd_range((129 * vec + unit - 1) / unit, (rnd() % 3 ? 1024 : 4096) * vec / unit); break;
  default: cols = unit * rnd_range(1, 4096 / unit > 1 ? 4096 / unit : 1); break;
  }
  if (entry == BQ__DYN_LONG) rows = rnd_range(1, 6);
  const int64_t xs = rnd() & 1 ? cols + vec * rnd_range(1, 4) : 0, ys = rnd() & 1 ? cols + rnd_range(0, 40) : 0;
  dcase c = token_case(d, rows, cols, xs, ys, (int)(vec * rnd_range(0, 3)) % 16, (int)rnd_range(0, 15));
  c.a.rotation_block = n;
  const int sr = d->rounding == BQ_ROUND_STOCHASTIC;
  c.a.seed = d->random_signs || sr ? rnd() : 0; /* (it keys the signs and the rounding's draws) */
  if (sr) c.a.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
  c.kind = rnd() % 4 ? -1 : (int)rnd_range(0, NKINDS - 1);
  bq__dynamic_force_entry = entry == BQ__DYN_ROW ? -1 : entry;
  g_last_fn = NULL;
  run_case(&c);
  bq__dynamic_force_entry = -1;
  /* (rounding stochastically, the held affine plan's bq_affine_sr runs last, rotating again) */
  const bq__CUfunction fn = sr ? plan_fn(plan->sub, BQ__AFFINE_SR) : plan_fn(plan, entry);
  cr_assert(fn != NULL && g_last_fn == fn, "the fused rotation: entry %d did not run (rows %lld, cols %lld, block %lld) "
            "| seed 0x%llx", entry, (long long)rows, (long long)cols, (long long)n, (unsigned long long)g_seed);
}
static void run_rotation(bq_dtype T)
{
  gpu_begin();
  launch_note_begin();
  const int vec = vec_of(T);
  for (int which = 0; which < 5; which++) {
    bq_desc d = which == 0   ? make_desc(BQ_PER_TOKEN, T, BQ_S8, 0, T, 0, 0)
                : which == 1 ? make_desc(BQ_PER_TOKEN, T, BQ_U8, 1, BQ_F32, 0, 0)
                : which == 2 ? make_desc(BQ_PER_TOKEN, T, BQ_S8, 0, BQ_F32, -100, 100)
                : which == 3 ? make_desc(BQ_PER_TOKEN, T, BQ_E4M3, 0, BQ_F32, 0, 0)
                             : make_desc(BQ_PER_TOKEN, T, BQ_E5M2, 0, T, 0, 0);
    d.rotation = 1;
    for (int form = 0; form < 4; form++) { /* random signs or not, rounding to nearest or stochastically */
      d.random_signs = form & 1;
      d.rounding = form & 2 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
      const bq_plan *plan = plan_get(&d, "dynamic rotation");
      for (int64_t n = 2; n <= 32 * vec; n *= 2) {
        rot_case(&d, n, BQ__DYN_ROW, plan);
        rot_case(&d, n, BQ__DYN_LONG, plan);
        if (vec == 8) rot_case(&d, n, BQ__DYN_STAGED, plan);
      }
    }
  }
}
Test(dynamic_rotation, f32, .timeout = 600) { run_rotation(BQ_F32); }
Test(dynamic_rotation, f64, .timeout = 600) { run_rotation(BQ_F64); }
Test(dynamic_rotation, f16, .timeout = 600) { run_rotation(BQ_F16); }
Test(dynamic_rotation, bf16, .timeout = 600) { run_rotation(BQ_BF16); }

/* Batch invariance with the rotation: rows r0 .. r1 of a call, run alone, write the bytes
   (codes and scales) the whole call wrote there, whichever entry each call took */
Test(dynamic_rotation, rows_alone_equal_the_whole_call, .timeout = 600)
{
  static const bq_dtype types[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  gpu_begin();
  for (int k = 0; k < 8; k++) {
    const bq_dtype T = types[k % 4];
    bq_desc d = make_desc(BQ_PER_TOKEN, T, k < 4 ? BQ_S8 : BQ_E4M3, 0, BQ_F32, 0, 0);
    d.rotation = 1, d.random_signs = k & 1;
    if (k % 3 == 2) d.rounding = BQ_ROUND_STOCHASTIC; /* (rows alone: args.offset advanced by r0 cols) */
    const int vec = vec_of(T);
    /* 16-bit rows past 48 KiB of two slots half the time (the whole call's, more rows than a
       wave, take bq_dynamic_staged in the opt-in's shared memory; its rows alone, fewer,
       may not) */
    const int64_t most = vec == 8 && k >= 6 ? 16384 : 4096;
    const int64_t n = (int64_t)vec << rnd_range(0, 5), rows = rnd_range(most > 4096 ? 600 : 2, 1000);
    const int64_t cols = n * rnd_range(most > 4096 ? 1536 * 8 / n + 1 : 1, most / n), es = (int64_t)ref_dtype_size(T);
    const int64_t r0 = rnd_range(0, rows - 1), r1 = rnd_range(r0 + 1, rows < r0 + 40 ? rows : r0 + 40);
    char what[256];
    snprintf(what, sizeof what, "rotation%s T=%s [%lld, %lld] blocks of %lld rows %lld..%lld | BQ_TEST_SEED=0x%llx",
             d.rounding == BQ_ROUND_STOCHASTIC ? " + SR" : "", ref_dtype_name(T), (long long)rows, (long long)cols, (long long)n, (long long)r0, (long long)r1,
             (unsigned long long)g_seed);
    unsigned char *hx = (unsigned char *)malloc((size_t)(rows * cols * es));
    unsigned char *whole = (unsigned char *)malloc((size_t)(rows * cols)), *part = (unsigned char *)malloc((size_t)(rows * cols));
    float *ws = (float *)malloc((size_t)rows * 4), *ps = (float *)malloc((size_t)rows * 4);
    cr_assert(hx && whole && part && ws && ps);
    for (int64_t i = 0; i < rows * cols; i++) store_t(T, hx, i, (rnd_unit() - 0.5) * 300.0);
    void *dx, *dy, *ds;
    BQ_OK(bq_malloc(&dx, (size_t)(rows * cols * es)), what);
    BQ_OK(bq_malloc(&dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_malloc(&ds, (size_t)rows * 4), what);
    BQ_OK(bq_memcpy_to_device(dx, hx, (size_t)(rows * cols * es)), what);
    bq_plan *p = plan_get(&d, what);
    bq_args a;
    memset(&a, 0, sizeof a);
    a.x = dx, a.y = dy, a.out_scales = ds, a.rows = rows, a.cols = cols, a.rotation_block = n;
    const int sr = d.rounding == BQ_ROUND_STOCHASTIC;
    a.seed = d.random_signs || sr ? rnd() : 0, a.offset = sr ? rnd() : 0;
    BQ_OK(bq_memset(dy, POISON, (size_t)(rows * cols)), what);
    BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), what);
    BQ_OK(bq_memcpy_to_host(whole, dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_memcpy_to_host(ws, ds, (size_t)rows * 4), what);
    BQ_OK(bq_memset(dy, POISON, (size_t)(rows * cols)), what);
    BQ_OK(bq_memset(ds, POISON, (size_t)rows * 4), what);
    bq_args b = a;
    b.x = (const char *)dx + r0 * cols * es, b.y = (char *)dy + r0 * cols, b.out_scales = (char *)ds + r0 * 4;
    b.rows = r1 - r0, b.offset = sr ? a.offset + (uint64_t)(r0 * cols) : 0;
    BQ_OK(bq_plan_run(p, &b, NULL, 0, NULL), what);
    BQ_OK(bq_memcpy_to_host(part, dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_memcpy_to_host(ps, ds, (size_t)rows * 4), what);
    cr_assert(!memcmp(whole + r0 * cols, part + r0 * cols, (size_t)((r1 - r0) * cols)), "codes differ | %s", what);
    cr_assert(!memcmp(ws + r0, ps + r0, (size_t)(r1 - r0) * 4), "scales differ | %s", what);
    BQ_OK(bq_free(dx), what);
    BQ_OK(bq_free(dy), what);
    BQ_OK(bq_free(ds), what);
    free(hx), free(whole), free(part), free(ws), free(ps);
  }
}

/* ==== focused tests ============================================================================ */

static const bq_dtype g_types[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};

/* Two descs per float type used by the focused tests: symmetric s8 (scale in T) and
   asymmetric u8 (scale in f32), full ranges. */
static bq_desc focus_desc(bq_granularity g, bq_dtype T, int which)
{
  return which == 0 ? make_desc(g, T, BQ_S8, 0, T, 0, 0) : make_desc(g, T, BQ_U8, 1, BQ_F32, 0, 0);
}

/* Every edge kind as whole rows, for every type and both modes (plus the narrow ranges). */
Test(dynamic_edges, every_kind_per_row)
{
  int ti, which, k;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 4; which++) {
      bq_dtype T = g_types[ti];
      bq_desc d = which < 2 ? focus_desc(BQ_PER_TOKEN, T, which)
                            : make_desc(BQ_PER_TOKEN, T, which == 2 ? BQ_U8 : BQ_S8, which == 3, T,
                                        which == 2 ? 1 : -7, which == 2 ? 100 : 7);
      for (k = 0; k < NKINDS; k++) {
        static const int64_t cols[] = {1, 2, 17, 64, 333};
        dcase c = token_case(&d, 3, PICK(cols), 0, 0, (int)rnd_range(0, 3), (int)rnd_range(0, 3));
        c.kind = k;
        run_case(&c);
      }
    }
}

/* D = 1 and odd D. */
Test(dynamic_edges, short_and_odd_rows)
{
  static const int64_t cols[] = {1, 17, 4095};
  int ti, which, ci;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++)
      for (ci = 0; ci < 3; ci++) {
        bq_desc d = focus_desc(BQ_PER_TOKEN, g_types[ti], which);
        dcase c = token_case(&d, cols[ci] == 1 ? 300 : 37, cols[ci], 0, 0, 0, 0);
        run_case(&c);
        c = token_case(&d, cols[ci] == 1 ? 300 : 37, cols[ci], cols[ci] + odd_pad(), cols[ci] + odd_pad(),
                       (int)rnd_range(1, 15), (int)rnd_range(1, 15));
        run_case(&c);
      }
}

/* Rows around and far beyond what the kernel keeps in registers (256 x 8 accesses). */
Test(dynamic_edges, long_rows)
{
  int ti, which;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++) {
      bq_dtype T = g_types[ti];
      int64_t lim = on_chip_of(T), vec = vec_of(T);
      int64_t far = T == BQ_F64 ? 10000 : T == BQ_F32 ? 20000 : 40000;
      int64_t lens[] = {lim, lim + vec, lim + 1, lim - 1, far, far + 7};
      bq_desc d = focus_desc(BQ_PER_TOKEN, T, which);
      size_t li;
      for (li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        dcase c = token_case(&d, 5, lens[li], 0, 0, 0, 0);
        c.kind = li % 2 ? K_OUTLIER : K_RANDOM;
        run_case(&c);
        /* misaligned x: a prologue, the rest still on the vector path */
        c = token_case(&d, 4, lens[li], lens[li] + odd_pad(), 0, (int)rnd_range(1, 15), (int)rnd_range(0, 15));
        c.kind = li % 2 ? K_RANDOM : K_NAN;
        run_case(&c);
      }
      /* a single group longer than fits, and its mixed content */
      {
        bq_desc dg = focus_desc(BQ_PER_GROUP, T, which);
        dcase c = group_case(&dg, 3, 2 * lim + 3, 2, 3, 0, 0, (int)rnd_range(0, 15), (int)rnd_range(0, 15));
        run_case(&c);
      }
    }
}

/* Strided rows: x and y row strides larger than cols, odd, with guarded gaps. */
Test(dynamic_edges, strided_rows)
{
  static const int64_t cols[] = {5, 64, 129, 1024};
  int ti, which, ci;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++)
      for (ci = 0; ci < 4; ci++) {
        bq_desc d = focus_desc(BQ_PER_TOKEN, g_types[ti], which);
        dcase c = token_case(&d, 33, cols[ci], cols[ci] + odd_pad(), cols[ci] + odd_pad(), 0, 0);
        run_case(&c);
        c = token_case(&d, 33, cols[ci], cols[ci] + 2 * rnd_range(1, 40), cols[ci] + 1, (int)rnd_range(0, 15),
                       (int)rnd_range(0, 15));
        run_case(&c);
      }
}

/* x and y offset by 0..15 elements from a 256-byte boundary, independently. */
Test(dynamic_edges, misaligned_pointers)
{
  int ti, which, off;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++) {
      bq_dtype T = g_types[ti];
      bq_desc dt = focus_desc(BQ_PER_TOKEN, T, which), dn = focus_desc(BQ_PER_TENSOR, T, which);
      bq_desc dg = focus_desc(BQ_PER_GROUP, T, which);
      for (off = 0; off < 16; off++) {
        dcase c = token_case(&dt, 9, 300, 0, 0, off, (int)rnd_range(0, 15));
        run_case(&c);
        c = token_case(&dt, 9, 300, 0, 0, (int)rnd_range(0, 15), off);
        run_case(&c);
        c = tensor_case(&dn, rnd_range(1, 3000), off, (int)rnd_range(0, 15), K_RANDOM);
        run_case(&c);
        c = tensor_case(&dn, rnd_range(1, 3000), (int)rnd_range(0, 15), off, K_TIES);
        run_case(&c);
        c = group_case(&dg, 5, 32, 4, 0, 0, 0, off, (int)rnd_range(0, 15));
        run_case(&c);
      }
    }
}

/* Per group: G in {1, 3, 16, 32, 128, 4096}, parameter rows padded (group_row_stride >
   cols / G), x aligned (the shuffle path where G allows) and misaligned. */
Test(dynamic_edges, group_sizes)
{
  static const int64_t gs[] = {1, 3, 16, 32, 128, 4096};
  int ti, which;
  size_t gi;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++)
      for (gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
        bq_desc d = focus_desc(BQ_PER_GROUP, g_types[ti], which);
        int64_t G = gs[gi], ng = G >= 4096 ? 2 : G >= 128 ? 8 : 16;
        dcase c = group_case(&d, 11, G, ng, ng + rnd_range(1, 5), 0, 0, 0, 0);
        run_case(&c);
        c = group_case(&d, 11, G, ng, ng, 0, odd_pad(), 0, (int)rnd_range(1, 15));
        run_case(&c);
        c = group_case(&d, 11, G, ng, ng + 1, odd_pad(), odd_pad(), (int)rnd_range(1, 15), (int)rnd_range(0, 15));
        run_case(&c);
      }
}

/* Groups of 4 and 2 accesses (bf16 32 and 16 elements, f32 16 and 8, f64 8 and 4) on aligned
   rows of more groups than a team holds at once: bq_groups_sets, each lane's second group
   included; integer codes (bq_dynamic_groups) and FP8 (bq_dynamic). */
Test(dynamic_edges, group_sets)
{
  static const int64_t ngs[] = {300, 513, 1024};
  int ti, which, h;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 3; which++)
      for (h = 0; h < 2; h++) {
        const bq_dtype T = g_types[ti];
        const bq_desc d = which < 2 ? focus_desc(BQ_PER_GROUP, T, which)
                                    : make_desc(BQ_PER_GROUP, T, BQ_E4M3, 0, BQ_F32, 0, 0);
        const int64_t G = (64 / (int64_t)ref_dtype_size(T)) >> h, ng = PICK(ngs);
        dcase c = group_case(&d, (int)rnd_range(1, 40), G, ng, rnd() & 1 ? 0 : ng + rnd_range(1, 5), 0, 0, 0, 0);
        run_case(&c);
        c = group_case(&d, 7, G, ng, 0, 8 * rnd_range(1, 4), rnd() & 1 ? 0 : odd_pad(), 0, (int)rnd_range(0, 15));
        run_case(&c);
      }
}

/* Per token: rows 1, 7, 256 and 70000 (past the 65535 of a grid's y/z dimension). */
Test(dynamic_edges, token_row_counts)
{
  static const int64_t rows[] = {1, 7, 256};
  int ti, which;
  size_t ri;
  gpu_begin();
  for (ti = 0; ti < 4; ti++) {
    for (which = 0; which < 2; which++)
      for (ri = 0; ri < 3; ri++) {
        bq_desc d = focus_desc(BQ_PER_TOKEN, g_types[ti], which);
        dcase c = token_case(&d, rows[ri], 96, 0, 0, 0, 0);
        run_case(&c);
      }
    {
      /* 70000 rows, one mode per type (alternating), including a narrow range */
      bq_desc d = ti == 0 ? make_desc(BQ_PER_TOKEN, BQ_F32, BQ_S8, 0, BQ_F32, 0, 0)
                  : ti == 1 ? make_desc(BQ_PER_TOKEN, BQ_F64, BQ_U8, 1, BQ_F32, 0, 0)
                  : ti == 2 ? make_desc(BQ_PER_TOKEN, BQ_F16, BQ_U8, 0, BQ_F16, 1, 100)
                            : make_desc(BQ_PER_TOKEN, BQ_BF16, BQ_S8, 1, BQ_BF16, 0, 0);
      dcase c = token_case(&d, 70000, 40, 0, 0, 0, 0);
      run_case(&c);
    }
  }
  /* and per group with many rows */
  {
    bq_desc d = make_desc(BQ_PER_GROUP, BQ_BF16, BQ_S8, 1, BQ_F32, 0, 0);
    dcase c = group_case(&d, 70000, 16, 3, 4, 0, 0, 0, 0);
    run_case(&c);
  }
}

/* Per token, 1500 to 2200 rows of 129 to 512 accesses, with every kind of row, odd
   lengths, padded strides, misaligned pointers (the prologue that aligns both x and y,
   or x alone), and q-ranges whose bounds clamp inside the int type's range (the
   saturating conversion's path). */
Test(dynamic_edges, many_rows)
{
  int ti, m;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (m = 0; m < 4; m++) {
      const bq_dtype T = g_types[ti];
      const int64_t vec = vec_of(T);
      const bq_desc d = m < 2 ? focus_desc(BQ_PER_TOKEN, T, m)
                        : m == 2 ? make_desc(BQ_PER_TOKEN, T, BQ_S8, 0, T, -50, 100)
                                 : make_desc(BQ_PER_TOKEN, T, BQ_U8, 0, BQ_F32, 1, 100);
      const int64_t cols = m == 0 ? 512 * vec : m == 1 ? 129 * vec : rnd_range(128 * vec + 1, 512 * vec);
      const int odd = m >= 2;
      dcase c = token_case(&d, rnd_range(1500, 2200), cols, odd ? cols + odd_pad() : 0,
                           odd ? cols + rnd_range(0, 40) : 0, odd ? (int)rnd_range(0, 15) : 0,
                           odd ? (int)rnd_range(0, 15) : 0);
      run_case(&c);
    }
}

/* Per token, f16 and bf16 rows that bq_dynamic_staged takes: whole accesses on the 16-byte
   grid (129 to 1024 of them) and more rows than a wave of its blocks, so that persistent
   blocks stage their next rows while they work on one. Each shape runs staged (that entry
   must be the launch) and unstaged (bq__rows_staged 0); the entry is also forced on fewer
   rows than a wave. The wave restated: teams of 32 threads doubled until 4 accesses a
   thread hold the row, and 1024 / team blocks an SM (64 registers a thread; the shared
   memory of a row's slot holds more on every arch). */
Test(dynamic_edges, staged_rows)
{
  static const struct { int64_t cols, xpad, ypad; int yoff, extra; } shapes[] = {
    {1032, 0, 0, 0, 1},    /* 129 accesses (teams of 64), one row past the wave */
    {4096, 0, 0, 0, 44},   /* a few blocks take a second row */
    {4096, 64, 64, 0, 0},  /* padded strides; 0: three waves, every block several rows */
    {2056, 8, 3, 1, 500},  /* y at an odd stride, off its grid */
    {8192, 0, 0, 2, 0},    /* 1024 accesses (teams of 256) */
  };
  int ti, which;
  size_t si;
  gpu_begin();
  launch_note_begin();
  _Static_assert(sizeof(bq_dynamic_params) <= sizeof g_last_params, "g_last_params holds the parameters");
  for (ti = 2; ti < 4; ti++)
    for (which = 0; which < 4; which++) {
      const bq_dtype T = g_types[ti];
      const bq_desc d = which < 2 ? focus_desc(BQ_PER_TOKEN, T, which)
                        : which == 2 ? make_desc(BQ_PER_TOKEN, T, BQ_S8, 0, T, -50, 100)
                                     : make_desc(BQ_PER_TOKEN, T, BQ_E4M3, 0, BQ_F32, 0, 0);
      const bq_plan *plan = plan_get(&d, "staged_rows");
      for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t cols = shapes[si].cols, nch = cols / 8;
        int64_t team = 32;
        while (team * 4 < nch) team *= 2;
        const int64_t wave = (int64_t)plan->num_sms * (1024 / team);
        for (int st = 0; st < 2; st++) {
          bq__rows_staged = st;
          dcase c = token_case(&d, shapes[si].extra ? wave + shapes[si].extra : 3 * wave, cols,
                               shapes[si].xpad ? cols + shapes[si].xpad : 0, shapes[si].ypad ? cols + shapes[si].ypad : 0,
                               0, shapes[si].yoff);
          if (which == 3) c.kind = K_RANDOM;
          g_last_fn = NULL;
          memset(g_last_params, 0, sizeof g_last_params);
          g_note_bytes = sizeof(bq_dynamic_params);
          run_case(&c);
          g_note_bytes = 0;
          const bq__CUfunction fn = plan_fn(plan, BQ__DYN_STAGED);
          const int ran = fn != NULL && g_last_fn == fn;
          cr_assert_eq(ran, st, "bq_dynamic_staged %s, expected %s: shape %zu, %lld rows of %lld | seed 0x%llx",
                       ran ? "ran" : "did not run", st ? "to" : "not to", si, (long long)c.a.rows, (long long)cols,
                       (unsigned long long)g_seed);
          bq_dynamic_params k;
          memcpy(&k, g_last_params, sizeof k);
          cr_assert_eq(k.staged, st, "params.staged %d | shape %zu", k.staged, si);
        }
      }
      /* forced on fewer rows than a wave: each block one row, nothing to stage next */
      bq__rows_staged = 1;
      bq__dynamic_force_entry = BQ__DYN_STAGED;
      dcase c = token_case(&d, 7, 4096, 0, 0, 0, 0);
      g_last_fn = NULL;
      run_case(&c);
      bq__dynamic_force_entry = -1;
      cr_assert(g_last_fn != NULL && g_last_fn == plan_fn(plan, BQ__DYN_STAGED),
                "forced: bq_dynamic_staged did not run | seed 0x%llx", (unsigned long long)g_seed);
    }
  bq__rows_staged = 1;
}

/* The staged rows on a plan that counts 1 or 3 SMs (its grid sized so): a few blocks
   each take many rows in turn, staging every next one in the same slot, on small tensors
   (the case to run under compute-sanitizer's racecheck and synccheck). 100 rows and more:
   past the wave of 3 SMs (at most 16 blocks an SM at 64 registers a thread). */
Test(dynamic_edges, staged_rows_few_blocks)
{
  static const int64_t cols[] = {1032, 4096, 8192};
  gpu_begin();
  launch_note_begin();
  for (int ti = 2; ti < 4; ti++)
    for (int which = 0; which < 2; which++) {
      const bq_desc d = focus_desc(BQ_PER_TOKEN, g_types[ti], which);
      bq_plan *plan = plan_get(&d, "staged_rows_few_blocks");
      const int sms = plan->num_sms;
      for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
        for (int fake = 1; fake <= 3; fake += 2) {
          plan->num_sms = fake;
          dcase c = token_case(&d, rnd_range(100, 160), cols[ci], ci == 1 ? cols[ci] + 8 : 0, ci == 2 ? cols[ci] + 5 : 0,
                               0, (int)rnd_range(0, 3));
          g_last_fn = NULL;
          run_case(&c);
          plan->num_sms = sms;
          cr_assert(g_last_fn != NULL && g_last_fn == plan_fn(plan, BQ__DYN_STAGED),
                    "bq_dynamic_staged did not run: %lld rows of %lld on %d SMs | seed 0x%llx", (long long)c.a.rows,
                    (long long)cols[ci], fake, (unsigned long long)g_seed);
        }
    }
}

/* Per tensor: numel 1, 17 and 4M+3; the large ones run twice (determinism). */
Test(dynamic_edges, tensor_sizes_and_determinism)
{
  int ti, which;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++) {
      bq_desc d = focus_desc(BQ_PER_TENSOR, g_types[ti], which);
      dcase c;
      int k;
      for (k = 0; k < NKINDS; k++) {
        c = tensor_case(&d, 1, (int)rnd_range(0, 15), (int)rnd_range(0, 15), k);
        run_case(&c);
        c = tensor_case(&d, 17, (int)rnd_range(0, 15), (int)rnd_range(0, 15), k);
        run_case(&c);
      }
      c = tensor_case(&d, ((int64_t)4 << 20) + 3, (int)rnd_range(0, 15), (int)rnd_range(0, 15),
                      which ? K_SPRINKLED : K_OUTLIER);
      c.repeat = 1;
      run_case(&c);
      c = tensor_case(&d, ((int64_t)4 << 20) + 3, 0, 0, K_RANDOM);
      c.repeat = 1;
      run_case(&c);
    }
}

/* Zero-size problems: success, and nothing written (outputs keep their poison). */
Test(dynamic_edges, zero_size)
{
  int ti, which;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (which = 0; which < 2; which++) {
      bq_dtype T = g_types[ti];
      bq_desc dt = focus_desc(BQ_PER_TOKEN, T, which), dg = focus_desc(BQ_PER_GROUP, T, which);
      bq_desc dn = focus_desc(BQ_PER_TENSOR, T, which);
      dcase c = tensor_case(&dn, 0, 0, 0, K_RANDOM);
      run_case(&c);
      c = token_case(&dt, 0, 16, 0, 0, 0, 0);
      run_case(&c);
      c = token_case(&dt, 5, 0, 0, 0, 0, 0);
      run_case(&c);
      c = token_case(&dt, 0, 0, 0, 0, 0, 0);
      run_case(&c);
      c = group_case(&dg, 0, 16, 2, 0, 0, 0, 0, 0);
      run_case(&c);
      c = group_case(&dg, 4, 16, 0, 0, 0, 0, 0, 0); /* cols = 0 */
      run_case(&c);
    }
}

/* Batch invariance with stochastic rounding: rows r0 .. r1 of a per-token or per-group call,
   run alone with args.offset advanced by r0 * cols, write the bytes (codes and scales) the
   whole call wrote there */
Test(dynamic_stochastic_rounding, rows_alone_equal_the_whole_call, .timeout = 600)
{
  gpu_begin();
  for (int k = 0; k < 8; k++) {
    const bq_dtype T = g_types[k % 4];
    g_sr = 1;
    const bq_desc d = make_desc(k < 4 ? BQ_PER_TOKEN : BQ_PER_GROUP, T, k % 2 ? BQ_E4M3 : BQ_S8, 0, BQ_F32, 0, 0);
    g_sr = 0;
    const int64_t G = k < 4 ? 0 : 32, rows = rnd_range(2, 300), cols = G ? G * rnd_range(1, 40) : rnd_range(1, 3000);
    const int64_t es = (int64_t)ref_dtype_size(T), ng = G ? cols / G : 1;
    const int64_t r0 = rnd_range(0, rows - 1), r1 = rnd_range(r0 + 1, rows);
    char what[256];
    snprintf(what, sizeof what, "%s T=%s [%lld, %lld] rows %lld..%lld | BQ_TEST_SEED=0x%llx", G ? "per group" : "per token",
             ref_dtype_name(T), (long long)rows, (long long)cols, (long long)r0, (long long)r1, (unsigned long long)g_seed);
    unsigned char *hx = (unsigned char *)malloc((size_t)(rows * cols * es));
    unsigned char *whole = (unsigned char *)malloc((size_t)(rows * cols)), *part = (unsigned char *)malloc((size_t)(rows * cols));
    float *ws = (float *)malloc((size_t)(rows * ng) * 4), *ps = (float *)malloc((size_t)(rows * ng) * 4);
    cr_assert(hx && whole && part && ws && ps);
    for (int64_t i = 0; i < rows * cols; i++) store_t(T, hx, i, (rnd_unit() - 0.5) * 300.0);
    void *dx, *dy, *ds;
    BQ_OK(bq_malloc(&dx, (size_t)(rows * cols * es)), what);
    BQ_OK(bq_malloc(&dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_malloc(&ds, (size_t)(rows * ng) * 4), what);
    BQ_OK(bq_memcpy_to_device(dx, hx, (size_t)(rows * cols * es)), what);
    bq_plan *p = plan_get(&d, what);
    bq_args a;
    memset(&a, 0, sizeof a);
    a.x = dx, a.y = dy, a.out_scales = ds, a.rows = rows, a.cols = cols, a.group_size = G;
    a.seed = rnd(), a.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
    BQ_OK(bq_memset(dy, 0x5a, (size_t)(rows * cols)), what);
    BQ_OK(bq_memset(ds, 0x5a, (size_t)(rows * ng) * 4), what);
    BQ_OK(bq_plan_run(p, &a, NULL, 0, NULL), what);
    BQ_OK(bq_synchronize(NULL), what);
    BQ_OK(bq_memcpy_to_host(whole, dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_memcpy_to_host(ws, ds, (size_t)(rows * ng) * 4), what);
    BQ_OK(bq_memset(dy, 0x5a, (size_t)(rows * cols)), what);
    BQ_OK(bq_memset(ds, 0x5a, (size_t)(rows * ng) * 4), what);
    bq_args b = a;
    b.x = (unsigned char *)dx + r0 * cols * es, b.y = (unsigned char *)dy + r0 * cols;
    b.out_scales = (float *)ds + r0 * ng, b.rows = r1 - r0, b.offset = a.offset + (uint64_t)(r0 * cols);
    BQ_OK(bq_plan_run(p, &b, NULL, 0, NULL), what);
    BQ_OK(bq_synchronize(NULL), what);
    BQ_OK(bq_memcpy_to_host(part, dy, (size_t)(rows * cols)), what);
    BQ_OK(bq_memcpy_to_host(ps, ds, (size_t)(rows * ng) * 4), what);
    for (int64_t i = 0; i < rows * cols; i++) {
      const int in = i >= r0 * cols && i < r1 * cols;
      cr_assert_eq(part[i], in ? whole[i] : 0x5a, "element %lld: 0x%02x, the whole call's 0x%02x (%s) | %s", (long long)i,
                   part[i], whole[i], in ? "inside" : "outside: untouched", what);
    }
    for (int64_t i = r0 * ng; i < r1 * ng; i++)
      cr_assert(!memcmp(&ps[i], &ws[i], 4), "scale %lld: %a, the whole call's %a | %s", (long long)i, ps[i], ws[i], what);
    bq_free(dx), bq_free(dy), bq_free(ds);
    free(hx), free(whole), free(part), free(ws), free(ps);
  }
}
