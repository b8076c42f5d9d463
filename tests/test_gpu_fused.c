/* tests/test_gpu_fused.c - the fused producers (BQ_RMSNORM_QUANTIZE, BQ_GATED_QUANTIZE)
   on the GPU against the CPU reference (tests/reference_fused.h), bit for bit: the
   integers, the scales and zero points, the residual buffer (h) and args.out (n or a),
   NaN payloads aside in the float outputs.

   Coverage: RMSNorm (no residual, a residual buffer, the residual in place: residual == x)
   and the gated op (SiLU, GELU-tanh) x f32/f64/f16/bf16 x s8/u8 (full and narrow ranges:
   s8 [-7, 7], u8 [3, 250]) and FP8 (e4m3, e5m2) x static per tensor with a zero point (FP8:
   none), per token symmetric and asymmetric, per group symmetric and asymmetric (G = 128
   and a generic G = 3 V or 96) x scale type (T, f32). Edge rows: all zeros, one huge element, NaN and +-inf elements,
   D = 1, odd D, rows longer than a block holds in registers, strided rows with gaps,
   misaligned streams, eps = 0. Every kernel entry forced by name (bq__fused_force_entry:
   the register entries, wide and narrow, the long one and the staged one), and batches
   the narrow entries take with y's rows off the chunk of codes they store.
   Fused == unfused: the reference's producer values run through the library's own
   BQ_DYNAMIC_QUANTIZE / BQ_QUANTIZE plan give the fused op's integers and scales. Batch
   invariance: a row's results in a batch of M rows (M = 1 .. 300, and 2300, a batch the
   narrow entries take on an H100) equal the same row alone.

   Every output allocation is poisoned with 0xA5 first and compared whole afterwards:
   guard bytes before and after and the gaps between strided rows must keep their poison
   (inputs: their garbage). Inputs are drawn fresh each run (the seed is in every failure
   message; BQ_TEST_SEED=<n> replays one).

   Without a usable CUDA driver/device every test is skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_fused.h"
#include "reference_sr.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_util.h"

#undef BQ_OK /* gpu_util.h's: this suite's takes one message argument */
#define BQ_OK(call, what)                                                                    \
  do {                                                                                       \
    bq_status st_ = (call);                                                                  \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s | %s", #call, bq_status_name(st_),          \
                 bq_last_error(), (what));                                                   \
  } while (0)

#define GUARD 256 /* bytes of poison (outputs) or garbage (inputs) before and after */
#define POISON 0xA5

/* ==== the case ============================================================================== */

enum { OP_RMS, OP_SILU, OP_GELU };
static const char *const op_names[] = {"rmsnorm", "silu_mul", "gelu_tanh_mul"};

enum { RES_NONE, RES_BUFFER, RES_IN_PLACE };

/* row contents */
enum {
  K_RANDOM,   /* uniform in [-m, m], m a random power of two */
  K_ZERO,     /* all +-0 (and a zero residual) */
  K_HUGE,     /* small values and one huge element */
  K_NAN,      /* a few NaN elements */
  K_INF,      /* a +inf or -inf element */
  K_WIDE,     /* magnitudes over the whole useful range (exp / tanh saturation for the gated op) */
  K_TINY,     /* subnormal-sized values */
  K_CONST,    /* one value repeated */
  NKINDS,
  K_EVERY = NKINDS /* asked for by name only: the gates' bit patterns in turn, 0 to 0xffff and
                      round again (every 16-bit gate over 2^16 gates), the rest random */
};
static const char *const kind_names[NKINDS + 1] = {"random", "zero", "huge", "nan",  "inf",
                                                   "wide",   "tiny", "const", "every gate"};
static uint32_t g_every; /* K_EVERY's next bit pattern */

typedef struct fcase {
  int op;
  bq_dtype T, I;
  int qmin, qmax;      /* both 0: the full range */
  bq_granularity g;    /* BQ_PER_TENSOR, BQ_PER_TOKEN or BQ_PER_GROUP */
  int asym;
  bq_dtype st;         /* dynamic scales: BQ_F32 or T */
  int64_t rows, cols;
  int64_t G, grs;      /* per group; grs 0 = dense */
  int64_t xpad, ypad, rpad, opad; /* row strides: dense + pad; a pad < 0 means a stride of 0 */
  int res;             /* RES_* (RMSNorm only) */
  int with_out;
  int zp_null;         /* symmetric dynamic: out_zero_points NULL (else a buffer that must stay) */
  double eps;
  double scale;        /* per tensor */
  int32_t zp;
  int xoff, roff, ooff, woff, yoff; /* element offsets from a 256-byte boundary */
  int kind;            /* < 0: mixed (every kind once, then mostly random) */
  int force;           /* bq__fused_force_entry, -1 = the host's choice */
  int unfused;         /* also compare with the library's quantize on the producer's values */
  int sr;              /* desc.rounding stochastic, with seed and offset */
  uint64_t seed, offset;
  int64_t rot;         /* desc.rotation: args.rotation_block (0: none) */
  int signs;           /* desc.random_signs (keyed by seed) */
} fcase;

static int vec_of(bq_dtype T) { return 16 / (int)ref_dtype_size(T); }

static bq_desc fused_desc(const fcase *c)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = c->op == OP_RMS ? BQ_RMSNORM_QUANTIZE : BQ_GATED_QUANTIZE;
  d.activation = c->op == OP_SILU ? ((rnd() & 1) ? BQ_SILU : BQ_ACTIVATION_DEFAULT) : c->op == OP_GELU ? BQ_GELU_TANH
                                                                                                      : BQ_ACTIVATION_DEFAULT;
  d.granularity = c->g;
  d.float_type = c->T;
  d.int_type = c->I;
  d.qmin = c->qmin;
  d.qmax = c->qmax;
  d.asymmetric = c->asym;
  d.scale_type = c->g == BQ_PER_TENSOR ? BQ_DTYPE_DEFAULT : c->st == BQ_F32 ? BQ_DTYPE_DEFAULT : c->st;
  d.rounding = c->sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d.rotation = c->rot > 0;
  d.random_signs = c->signs;
  return d;
}

/* the reference's quantize half: BQ_QUANTIZE per tensor, or BQ_DYNAMIC_QUANTIZE (normalized) */
static bq_desc quant_desc(const fcase *c)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = c->g == BQ_PER_TENSOR ? BQ_QUANTIZE : BQ_DYNAMIC_QUANTIZE;
  d.granularity = c->g;
  d.float_type = c->T;
  d.int_type = c->I;
  d.qmin = c->qmin;
  d.qmax = c->qmax;
  d.asymmetric = c->g == BQ_PER_TENSOR ? 0 : c->asym;
  d.scale_type = c->g == BQ_PER_TENSOR ? BQ_DTYPE_DEFAULT : c->st;
  return refd_desc_normalize(&d);
}

/* ==== buffers ================================================================================ */

typedef struct dbuf {
  unsigned char *h;   /* host image of the whole allocation (what is uploaded / expected) */
  unsigned char *g;   /* what came back */
  unsigned char *dev; /* device allocation (256-byte aligned) */
  size_t total, pre;  /* bytes; the data starts at pre */
} dbuf;

static void dbuf_make(dbuf *b, size_t es, int64_t count, int off, const char *what)
{
  void *p = NULL;
  b->pre = GUARD + (size_t)off * es;
  b->total = b->pre + (size_t)(count > 0 ? count : 0) * es + GUARD;
  b->h = (unsigned char *)malloc(b->total);
  b->g = (unsigned char *)malloc(b->total);
  cr_assert(b->h && b->g, "host malloc(%zu) | %s", b->total, what);
  BQ_OK(bq_malloc(&p, b->total), what);
  cr_assert_eq((uintptr_t)p % 256, 0, "bq_malloc returned %p: not 256-byte aligned", p);
  b->dev = (unsigned char *)p;
}

static void dbuf_free(dbuf *b)
{
  if (b->dev) bq_free(b->dev);
  free(b->h);
  free(b->g);
  memset(b, 0, sizeof *b);
}

static void fill_garbage(unsigned char *p, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { uint64_t r = rnd(); memcpy(p + i, &r, 8); }
  for (; i < n; i++) p[i] = (unsigned char)rnd();
}

/* ==== values ================================================================================= */

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

static uint64_t nan_bits(bq_dtype t)
{
  static const uint64_t f64b[] = {0x7ff8000000000000ull, 0xfff8000000001234ull, 0x7ff0000000000001ull};
  static const uint64_t f32b[] = {0x7fc00000u, 0xffc01234u, 0x7f800001u};
  static const uint64_t f16b[] = {0x7e00, 0xfe12, 0x7c01};
  static const uint64_t b16b[] = {0x7fc0, 0xffc1, 0x7f81};
  const uint64_t *tab = t == BQ_F64 ? f64b : t == BQ_F32 ? f32b : t == BQ_F16 ? f16b : b16b;
  return tab[rnd() % 3];
}

static double huge_of(bq_dtype T) { return T == BQ_F16 ? 60000.0 : T == BQ_F64 ? 1e200 : 1e30; }
static double tiny_of(bq_dtype T)
{
  return T == BQ_F16 ? 0x1p-20 : T == BQ_F64 ? 0x1p-1060 : T == BQ_F32 ? 0x1p-140 : 0x1p-130;
}

/* one element of content `kind`; `mag` the row's magnitude */
static double value_of(const fcase *c, int kind, double mag)
{
  switch (kind) {
  case K_ZERO: return (rnd() & 1) ? 0.0 : -0.0;
  case K_TINY: return (2.0 * rnd_unit() - 1.0) * tiny_of(c->T) * (double)(1 + rnd() % 64);
  case K_WIDE: {
    /* gate values over [-120, 120] (f32: exp_c saturates past 89 / -104), or magnitudes
       from 2^-20 to 2^20 */
    if (c->op != OP_RMS) return (2.0 * rnd_unit() - 1.0) * (c->T == BQ_F16 ? 20.0 : 120.0);
    return ((rnd() & 1) ? 1.0 : -1.0) * ldexp(1.0 + rnd_unit(), (int)rnd_range(-20, c->T == BQ_F16 ? 10 : 20));
  }
  default: return (2.0 * rnd_unit() - 1.0) * mag;
  }
}

/* Fills n elements of a row of x (or of the residual) with content `kind`. */
static void gen_row(const fcase *c, void *x, int64_t n, int kind)
{
  const bq_dtype T = c->T;
  int64_t i;
  double mag = ldexp(1.0, (int)rnd_range(-3, 3));
  if (n <= 0) return;
  if (kind == K_CONST) {
    double v = ((rnd() & 1) ? 1.0 : -1.0) * (0.5 + rnd_unit()) * mag;
    for (i = 0; i < n; i++) store_t(T, x, i, v);
    return;
  }
  if (kind == K_EVERY) {
    for (i = 0; i < n; i++)
      if (i < c->cols && ref_dtype_size(T) == 2) store_bits(T, x, i, g_every++ & 0xffffu);
      else store_t(T, x, i, value_of(c, K_RANDOM, mag));
    return;
  }
  for (i = 0; i < n; i++) store_t(T, x, i, value_of(c, kind, mag));
  if (kind == K_HUGE) store_t(T, x, rnd_range(0, n - 1), (rnd() & 1) ? huge_of(T) : -huge_of(T));
  if (kind == K_NAN) {
    int64_t k, cnt = 1 + (int64_t)(rnd() % 3);
    for (k = 0; k < cnt; k++) store_bits(T, x, rnd_range(0, n - 1), nan_bits(T));
  }
  if (kind == K_INF) store_t(T, x, rnd_range(0, n - 1), (rnd() & 1) ? INFINITY : -INFINITY);
}

static int kind_of(int kind, int64_t r)
{
  static const int later[] = {K_RANDOM, K_RANDOM, K_RANDOM, K_RANDOM, K_RANDOM, K_WIDE, K_WIDE,
                              K_ZERO,   K_HUGE,   K_NAN,    K_INF,    K_TINY,   K_CONST};
  if (kind >= 0) return kind;
  if (r < NKINDS) return (int)r;
  return PICK(later);
}

/* ==== one run ================================================================================ */

typedef struct frun {
  fcase c;
  bq_desc fd, qd;
  int64_t D, in_cols, xs, ys, rs, os, ng, grs, nparams;
  size_t ts, ss;
  dbuf x, r, w, o, y, sc, zp;
  unsigned char *x0;   /* the original x buffer (before an in-place run changes it) */
  unsigned char *r0;   /* the original residual buffer */
  unsigned char *dense; /* the producer's T values, [rows, D], from the reference */
  bq_args da;
  char what[1024];
} frun;

static void describe(frun *R)
{
  const fcase *c = &R->c;
  snprintf(R->what, sizeof R->what,
           "%s %s T=%s I=%s q[%d,%d] %s scale_type=%s | rows=%lld cols=%lld x_row_stride=%lld "
           "y_row_stride=%lld residual=%s residual_row_stride=%lld out=%s out_row_stride=%lld G=%lld "
           "group_row_stride=%lld eps=%g scale=%.17g zp=%d | offsets x=%d res=%d out=%d w=%d y=%d | content=%s | "
           "force_entry=%d%s | rounding %s, rotation block %lld%s (seed 0x%llx, offset 0x%llx) | BQ_TEST_SEED=0x%llx",
           op_names[c->op], c->g == BQ_PER_TENSOR ? "per_tensor" : c->g == BQ_PER_TOKEN ? "per_token" : "per_group",
           ref_dtype_name(c->T), ref_dtype_name(R->qd.int_type), R->qd.qmin, R->qd.qmax,
           c->asym ? "asymmetric" : "symmetric", ref_dtype_name(R->qd.scale_type), (long long)c->rows,
           (long long)c->cols, (long long)R->da.x_row_stride, (long long)R->da.y_row_stride,
           c->res == RES_NONE ? "none" : c->res == RES_BUFFER ? "buffer" : "in place (== x)",
           (long long)R->da.residual_row_stride, c->with_out ? "set" : "NULL", (long long)R->da.out_row_stride,
           (long long)c->G, (long long)c->grs, c->eps, c->scale, (int)c->zp, c->xoff, c->roff, c->ooff, c->woff,
           c->yoff, c->kind < 0 ? "mixed" : kind_names[c->kind], c->force, c->unfused ? " | unfused check" : "",
           c->sr ? "stochastic" : "to nearest", (long long)c->rot, c->signs ? " with random signs" : "",
           (unsigned long long)c->seed, (unsigned long long)c->offset, (unsigned long long)g_seed);
}

static int64_t stride_of(int64_t pad, int64_t dense) { return pad < 0 ? 0 : dense + pad; }

/* Allocates the buffers and draws the inputs. */
static void frun_init(frun *R, const fcase *c)
{
  int64_t row;
  memset(R, 0, sizeof *R);
  R->c = *c;
  if (c->op != OP_RMS) R->c.res = RES_NONE;
  if (c->g == BQ_PER_TENSOR || c->asym) R->c.zp_null = 0;
  R->fd = fused_desc(&R->c);
  R->qd = quant_desc(&R->c);
  R->D = c->cols;
  R->in_cols = c->op == OP_RMS ? R->D : 2 * R->D;
  R->ts = ref_dtype_size(c->T);
  R->ss = ref_dtype_size(R->qd.scale_type);
  R->da.rows = c->rows;
  R->da.cols = c->cols;
  R->da.x_row_stride = stride_of(c->xpad, R->in_cols);
  R->da.y_row_stride = stride_of(c->ypad, R->D);
  R->da.out_row_stride = stride_of(c->opad, R->D);
  R->da.residual_row_stride = R->c.res == RES_IN_PLACE ? R->da.x_row_stride : stride_of(c->rpad, R->D);
  R->xs = R->da.x_row_stride ? R->da.x_row_stride : R->in_cols;
  R->ys = R->da.y_row_stride ? R->da.y_row_stride : R->D;
  R->os = R->da.out_row_stride ? R->da.out_row_stride : R->D;
  R->rs = R->da.residual_row_stride ? R->da.residual_row_stride : R->D;
  if (c->g == BQ_PER_GROUP) {
    R->ng = R->D / c->G;
    R->grs = c->grs ? c->grs : R->ng;
    R->nparams = c->rows * R->grs;
    R->da.group_size = c->G;
    R->da.group_row_stride = c->grs;
  } else if (c->g == BQ_PER_TOKEN) {
    R->nparams = c->rows;
  }
  describe(R);
  cr_assert(c->g != BQ_PER_GROUP || (c->G >= 1 && R->D % c->G == 0), "bad test case (G) | %s", R->what);

  dbuf_make(&R->x, R->ts, c->rows * R->xs, c->xoff, R->what);
  dbuf_make(&R->w, R->ts, R->D, c->woff, R->what);
  dbuf_make(&R->y, 1, c->rows * R->ys, c->yoff, R->what);
  if (R->c.res == RES_BUFFER) dbuf_make(&R->r, R->ts, c->rows * R->rs, c->roff, R->what);
  if (c->with_out) dbuf_make(&R->o, R->ts, c->rows * R->os, c->ooff, R->what);
  if (c->g != BQ_PER_TENSOR) {
    dbuf_make(&R->sc, R->ss, R->nparams, (int)(rnd() % 4), R->what);
    if (!R->c.zp_null) dbuf_make(&R->zp, 4, R->nparams, (int)(rnd() % 4), R->what);
  }

  /* inputs: garbage everywhere (gaps and guards must not be read: a NaN there would show),
     then the rows */
  fill_garbage(R->x.h, R->x.total);
  fill_garbage(R->w.h, R->w.total);
  if (R->r.h) fill_garbage(R->r.h, R->r.total);
  for (row = 0; row < c->rows; row++) {
    int k = kind_of(c->kind, row);
    unsigned char *xr = R->x.h + R->x.pre + (size_t)(row * R->xs) * R->ts;
    gen_row(&R->c, xr, R->in_cols, k);
    if (R->r.h) {
      unsigned char *rr = R->r.h + R->r.pre + (size_t)(row * R->rs) * R->ts;
      gen_row(&R->c, rr, R->D, k == K_ZERO ? K_ZERO : (k == K_NAN || k == K_INF || k == K_HUGE) ? K_RANDOM : k);
    }
  }
  {
    int64_t i;
    unsigned char *w0 = R->w.h + R->w.pre;
    for (i = 0; i < R->D; i++) store_t(c->T, w0, i, (rnd() % 16 == 0) ? 0.0 : (2.0 * rnd_unit() - 1.0) * 2.0);
  }
  R->x0 = (unsigned char *)malloc(R->x.total);
  cr_assert(R->x0);
  memcpy(R->x0, R->x.h, R->x.total);
  if (R->r.h) {
    R->r0 = (unsigned char *)malloc(R->r.total);
    cr_assert(R->r0);
    memcpy(R->r0, R->r.h, R->r.total);
  }
}

static void frun_free(frun *R)
{
  dbuf_free(&R->x); dbuf_free(&R->r); dbuf_free(&R->w); dbuf_free(&R->o);
  dbuf_free(&R->y); dbuf_free(&R->sc); dbuf_free(&R->zp);
  free(R->x0); free(R->r0); free(R->dense);
  memset(R, 0, sizeof *R);
}

static void *res_ptr(frun *R, int host)
{
  if (R->c.res == RES_BUFFER) return (host ? R->r.h : R->r.dev) + R->r.pre;
  if (R->c.res == RES_IN_PLACE) return (host ? R->x.h : R->x.dev) + R->x.pre;
  return NULL;
}

/* The expected outputs, in the host images (x and the residual are changed in place). */
static void frun_expect(frun *R)
{
  const fcase *c = &R->c;
  reff_producer p;
  bq_args qa;
  memset(&p, 0, sizeof p);
  p.kind = c->op == OP_RMS ? REFF_RMSNORM : c->op == OP_SILU ? REFF_SILU_MUL : REFF_GELU_TANH_MUL;
  p.T = c->T;
  p.rows = c->rows;
  p.cols = c->cols;
  p.x_row_stride = R->xs;
  p.residual_row_stride = R->rs;
  p.out_row_stride = R->os;
  p.weight = R->w.h + R->w.pre;
  p.eps = c->eps;

  /* the dense producer values first, on scratch copies of the inputs */
  {
    unsigned char *xc = (unsigned char *)malloc(R->x.total), *rc = R->r0 ? (unsigned char *)malloc(R->r.total) : NULL;
    cr_assert(xc && (!R->r0 || rc));
    memcpy(xc, R->x0, R->x.total);
    if (rc) memcpy(rc, R->r0, R->r.total);
    p.x = xc + R->x.pre;
    p.residual = c->res == RES_BUFFER ? (void *)(rc + R->r.pre) : c->res == RES_IN_PLACE ? (void *)(xc + R->x.pre) : NULL;
    p.out = NULL;
    R->dense = (unsigned char *)malloc((size_t)(c->rows * c->cols) * R->ts + 1);
    cr_assert(R->dense);
    cr_assert_eq(reff_produce(&p, R->dense), 0, "reference refused the producer | %s", R->what);
    free(xc);
    free(rc);
  }

  /* then the whole fused reference on the host images */
  memset(R->y.h, POISON, R->y.total);
  if (R->o.h) memset(R->o.h, POISON, R->o.total);
  if (R->sc.h) memset(R->sc.h, POISON, R->sc.total);
  if (R->zp.h) memset(R->zp.h, POISON, R->zp.total);
  memcpy(R->x.h, R->x0, R->x.total);
  if (R->r.h) memcpy(R->r.h, R->r0, R->r.total);
  p.x = R->x.h + R->x.pre;
  p.residual = res_ptr(R, 1);
  p.out = R->o.h ? R->o.h + R->o.pre : NULL;
  memset(&qa, 0, sizeof qa);
  qa.y = R->y.h + R->y.pre;
  qa.y_row_stride = R->ys;
  qa.out_scales = R->sc.h ? R->sc.h + R->sc.pre : NULL;
  qa.out_zero_points = R->zp.h ? (int32_t *)(void *)(R->zp.h + R->zp.pre) : NULL;
  qa.group_size = c->G;
  qa.group_row_stride = c->grs;
  qa.scale = c->scale;
  qa.zero_point = c->zp;
  cr_assert_eq(reff_fused_quantize(&p, &R->qd, &qa), 0, "reference refused the case | %s", R->what);
  unsigned char *vals = R->dense; /* the values quantized again: the producer's, or rotated */
  if (c->rot) { /* the rotation (BQ_HADAMARD's reference) of the producer's values, then the whole op */
    vals = (unsigned char *)malloc((size_t)(c->rows * c->cols) * R->ts + 1);
    cr_assert(vals);
    ref_rotate(c->T, 0, c->signs, c->seed, (int)c->rot, c->rows, c->cols, R->dense, c->cols, vals, c->cols);
  }
  if (c->rot && c->g == BQ_PER_TOKEN) { /* dynamic quantize per token of the rotated values, y and scales anew */
    bq_desc q = R->qd;
    bq_args b;
    memset(&b, 0, sizeof b);
    b.x = vals;
    b.y = R->y.h + R->y.pre;
    b.rows = c->rows;
    b.cols = c->cols;
    b.y_row_stride = R->ys;
    b.out_scales = R->sc.h + R->sc.pre;
    b.out_zero_points = c->asym ? (int32_t *)(void *)(R->zp.h + R->zp.pre) : NULL;
    b.seed = c->seed;
    b.offset = c->offset;
    cr_assert_eq(refd_run(&q, &b), 0, "the dynamic reference refused the case | %s", R->what);
    q.rounding = BQ_ROUND_STOCHASTIC;
    if (c->sr) cr_assert_eq(ref_dynamic_sr(&q, &b), 0, "the SR reference refused the case | %s", R->what);
  } else if (c->sr || c->rot) { /* y again: the producer's values quantized with the scales written, rounding stochastically
                  (per tensor as per token, every row's scale and zero point the static ones) */
    bq_desc q;
    bq_args b;
    memset(&q, 0, sizeof q);
    memset(&b, 0, sizeof b);
    q.op = BQ_QUANTIZE;
    q.granularity = c->g == BQ_PER_TENSOR ? BQ_PER_TOKEN : c->g;
    q.float_type = c->T;
    q.int_type = R->qd.int_type;
    q.qmin = R->qd.qmin;
    q.qmax = R->qd.qmax;
    q.scale_type = c->g == BQ_PER_TENSOR ? (c->T == BQ_F64 ? BQ_F64 : BQ_F32) : R->qd.scale_type;
    q.rounding = BQ_ROUND_STOCHASTIC;
    unsigned char *ts = NULL;
    int32_t *tz = NULL;
    if (c->g == BQ_PER_TENSOR) {
      ts = (unsigned char *)malloc((size_t)c->rows * 8 + 8);
      tz = (int32_t *)malloc((size_t)c->rows * 4 + 4);
      cr_assert(ts && tz);
      for (int64_t r = 0; r < c->rows; r++) store_t(q.scale_type, ts, r, c->scale), tz[r] = c->zp;
      b.scales = ts;
      b.zero_points = tz;
    } else {
      b.scales = R->sc.h + R->sc.pre;
      b.zero_points = R->zp.h && c->asym ? (const int32_t *)(const void *)(R->zp.h + R->zp.pre) : NULL;
      b.group_size = c->G;
      b.group_row_stride = c->grs;
    }
    b.x = vals;
    b.y = R->y.h + R->y.pre;
    b.rows = c->rows;
    b.cols = c->cols;
    b.y_row_stride = R->ys;
    b.seed = c->seed;
    b.offset = c->offset;
    if (!c->sr) q.rounding = BQ_ROUND_NEAREST_EVEN; /* (the rotation alone: quantize per tensor, rounding to nearest) */
    cr_assert_eq(c->sr ? ref_run_sr(&q, &b) : ref_run(&q, &b), 0, "the reference refused the case | %s", R->what);
    free(ts);
    free(tz);
  }
  if (vals != R->dense) free(vals);
}

/* Uploads the inputs, poisons the outputs, runs the fused plan and fetches every buffer. */
static void frun_exec(frun *R)
{
  const fcase *c = &R->c;
  bq_plan *plan = plan_get(&R->fd, R->what);
  bq_status st;
  size_t wsb = 1;
  BQ_OK(bq_memcpy_to_device(R->x.dev, R->x0, R->x.total), R->what);
  BQ_OK(bq_memcpy_to_device(R->w.dev, R->w.h, R->w.total), R->what);
  if (R->r.dev) BQ_OK(bq_memcpy_to_device(R->r.dev, R->r0, R->r.total), R->what);
  BQ_OK(bq_memset(R->y.dev, POISON, R->y.total), R->what);
  if (R->o.dev) BQ_OK(bq_memset(R->o.dev, POISON, R->o.total), R->what);
  if (R->sc.dev) BQ_OK(bq_memset(R->sc.dev, POISON, R->sc.total), R->what);
  if (R->zp.dev) BQ_OK(bq_memset(R->zp.dev, POISON, R->zp.total), R->what);
  R->da.x = R->x.dev + R->x.pre;
  R->da.y = R->y.dev + R->y.pre;
  R->da.residual = res_ptr(R, 0);
  R->da.norm_weight = c->op == OP_RMS ? R->w.dev + R->w.pre : NULL;
  R->da.eps = c->op == OP_RMS ? c->eps : 0.0; /* the gated op takes no eps */
  R->da.out = R->o.dev ? R->o.dev + R->o.pre : NULL;
  R->da.out_scales = R->sc.dev ? R->sc.dev + R->sc.pre : NULL;
  R->da.out_zero_points = R->zp.dev ? (int32_t *)(void *)(R->zp.dev + R->zp.pre) : NULL;
  R->da.scale = c->scale;
  R->da.zero_point = c->zp;
  R->da.seed = c->sr || c->signs ? c->seed : 0;
  R->da.offset = c->sr ? c->offset : 0;
  R->da.rotation_block = c->rot;
  st = bq_plan_can_implement(plan, &R->da);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_can_implement -> %s: %s | %s", bq_status_name(st), bq_last_error(), R->what);
  BQ_OK(bq_plan_workspace_size(plan, &R->da, &wsb), R->what);
  /* stochastic rounding or the rotation without args.out: the producer's values, dense, in the
     workspace (per token, the held dynamic quantize needs none of its own) */
  const size_t want_ws = (c->sr || c->rot) && !c->with_out ? (size_t)(c->rows * c->cols) * R->ts : 0;
  cr_assert_eq(wsb, want_ws, "bq_plan_workspace_size says %zu, expected %zu | %s", wsb, want_ws, R->what);
  void *ws = NULL;
  if (wsb) BQ_OK(bq_malloc(&ws, wsb), R->what);
  bq__fused_force_entry = c->force;
  st = bq_plan_run(plan, &R->da, ws, wsb, NULL);
  bq__fused_force_entry = -1;
  if (ws) {
    BQ_OK(bq_synchronize(NULL), R->what);
    bq_free(ws);
  }
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run -> %s: %s | %s", bq_status_name(st), bq_last_error(), R->what);
  BQ_OK(bq_synchronize(NULL), R->what);
  BQ_OK(bq_memcpy_to_host(R->x.g, R->x.dev, R->x.total), R->what);
  BQ_OK(bq_memcpy_to_host(R->y.g, R->y.dev, R->y.total), R->what);
  BQ_OK(bq_memcpy_to_host(R->w.g, R->w.dev, R->w.total), R->what);
  if (R->r.dev) BQ_OK(bq_memcpy_to_host(R->r.g, R->r.dev, R->r.total), R->what);
  if (R->o.dev) BQ_OK(bq_memcpy_to_host(R->o.g, R->o.dev, R->o.total), R->what);
  if (R->sc.dev) BQ_OK(bq_memcpy_to_host(R->sc.g, R->sc.dev, R->sc.total), R->what);
  if (R->zp.dev) BQ_OK(bq_memcpy_to_host(R->zp.g, R->zp.dev, R->zp.total), R->what);
}

/* ==== comparison ============================================================================= */

#define MSG_CAP 8192
#define MSG_MAX 8

/* where byte j of a buffer with rows of `stride` elements (es bytes) lies */
static void where_of(const dbuf *b, size_t j, size_t es, int64_t rows, int64_t stride, int64_t cols, char *buf,
                     size_t cap)
{
  int64_t k = ((int64_t)j - (int64_t)b->pre);
  int64_t e = k >= 0 ? k / (int64_t)es : -1;
  if (k < 0 || e >= rows * stride) snprintf(buf, cap, "guard byte %zu", j);
  else if (e % stride >= cols) snprintf(buf, cap, "gap after row %lld (element %lld)", (long long)(e / stride), (long long)e);
  else snprintf(buf, cap, "row %lld col %lld", (long long)(e / stride), (long long)(e % stride));
}

/* a float buffer (T or a scale type): bit for bit, NaN payloads aside, element by element */
static size_t compare_float(const frun *R, const char *name, bq_dtype t, const dbuf *b, int64_t rows, int64_t stride,
                            int64_t cols, char *msg, size_t cap)
{
  const size_t es = ref_dtype_size(t);
  const int64_t n = (int64_t)(b->total / es);
  size_t bad = 0;
  int64_t i;
  char e[64], g[64], w[96];
  cr_assert_eq(b->total % es, 0);
  cr_assert_eq(b->pre % es, 0);
  for (i = 0; i < n; i++) {
    if (ref_elem_equal(t, b->h, b->g, i)) continue;
    if (bad++ >= MSG_MAX) continue;
    ref_format_elem(e, sizeof e, t, b->h, i);
    ref_format_elem(g, sizeof g, t, b->g, i);
    where_of(b, (size_t)i * es, es, rows, stride, cols, w, sizeof w);
    ref__append(msg, cap, "  %s[%s]: expected %s got %s\n", name, w, e, g);
  }
  if (bad > MSG_MAX) ref__append(msg, cap, "  ... %zu %s elements differ in all\n", bad, name);
  (void)R;
  return bad;
}

static size_t compare_y(const frun *R, char *msg, size_t cap)
{
  size_t bad = 0, j;
  char e[64], g[64], v[64], w[96];
  for (j = 0; j < R->y.total; j++) {
    int64_t k = (int64_t)j - (int64_t)R->y.pre;
    if (R->y.h[j] == R->y.g[j]) continue;
    if (bad++ >= MSG_MAX) continue;
    ref_format_elem(e, sizeof e, R->qd.int_type, R->y.h, (int64_t)j);
    ref_format_elem(g, sizeof g, R->qd.int_type, R->y.g, (int64_t)j);
    where_of(&R->y, j, 1, R->c.rows, R->ys, R->D, w, sizeof w);
    if (k >= 0 && k < R->c.rows * R->ys && k % R->ys < R->D) {
      int64_t row = k / R->ys, col = k % R->ys;
      ref_format_elem(v, sizeof v, R->c.T, R->dense, row * R->D + col);
      ref__append(msg, cap, "  y[%s] (producer value %s): expected %s got %s\n", w, v, e, g);
    } else {
      ref__append(msg, cap, "  y[%s]: expected %s got %s\n", w, e, g);
    }
  }
  if (bad > MSG_MAX) ref__append(msg, cap, "  ... %zu y bytes differ in all\n", bad);
  return bad;
}

static void frun_check(const frun *R, const char *when)
{
  static char msg[MSG_CAP];
  size_t bad;
  msg[0] = 0;
  bad = compare_y(R, msg, sizeof msg);
  cr_assert_eq(bad, 0, "%s: y differs:\n%s| %s", when, msg, R->what);
  if (R->sc.h) {
    msg[0] = 0;
    bad = compare_float(R, "out_scales", R->qd.scale_type, &R->sc, 1, R->nparams, R->nparams, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%s: scales differ:\n%s| %s", when, msg, R->what);
  }
  if (R->zp.h) {
    size_t i, n = R->zp.total / 4;
    msg[0] = 0;
    bad = 0;
    for (i = 0; i < n; i++) {
      int32_t e, g;
      memcpy(&e, R->zp.h + 4 * i, 4);
      memcpy(&g, R->zp.g + 4 * i, 4);
      if (e == g) continue;
      if (bad++ < MSG_MAX)
        ref__append(msg, sizeof msg, "  out_zero_points buffer element %zu (%s): expected %d (0x%08x) got %d\n", i,
                    R->c.asym ? "asymmetric" : "symmetric: must stay poisoned", e, (unsigned)e, g);
    }
    cr_assert_eq(bad, 0, "%s: zero points differ:\n%s| %s", when, msg, R->what);
  }
  if (R->o.h) {
    msg[0] = 0;
    bad = compare_float(R, "out", R->c.T, &R->o, R->c.rows, R->os, R->D, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%s: args.out differs:\n%s| %s", when, msg, R->what);
  }
  if (R->r.h) {
    msg[0] = 0;
    bad = compare_float(R, "residual", R->c.T, &R->r, R->c.rows, R->rs, R->D, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%s: the residual buffer (h) differs:\n%s| %s", when, msg, R->what);
  }
  if (R->c.res == RES_IN_PLACE) {
    msg[0] = 0;
    bad = compare_float(R, "x (== residual)", R->c.T, &R->x, R->c.rows, R->xs, R->D, msg, sizeof msg);
    cr_assert_eq(bad, 0, "%s: x, the residual in place (h), differs:\n%s| %s", when, msg, R->what);
  } else {
    cr_assert(!memcmp(R->x.h, R->x.g, R->x.total), "%s: x was written | %s", when, R->what);
  }
  cr_assert(!memcmp(R->w.h, R->w.g, R->w.total), "%s: norm_weight was written | %s", when, R->what);
}

/* Fused == unfused: the producer's values uploaded, then the library's own quantize plan
   (BQ_DYNAMIC_QUANTIZE, or BQ_QUANTIZE per tensor on dense rows) must give the fused
   op's integers, scales and zero points. */
static void frun_unfused(const frun *R)
{
  const fcase *c = &R->c;
  const int64_t n = c->rows * c->cols;
  bq_desc d = R->qd;
  bq_args a;
  void *dx = NULL, *dy = NULL, *ds = NULL, *dz = NULL;
  unsigned char *gy, *gs = NULL;
  int32_t *gz = NULL;
  size_t ws = 0;
  void *wsp = NULL;
  bq_plan *plan;
  int64_t row;
  if (n == 0) return;
  if (c->g == BQ_PER_TENSOR && R->ys != R->D) return; /* quantize per tensor is dense */
  if (c->g == BQ_PER_TENSOR) d.scale_type = BQ_DTYPE_DEFAULT;
  plan = plan_get(&d, R->what);
  memset(&a, 0, sizeof a);
  BQ_OK(bq_malloc(&dx, (size_t)n * R->ts), R->what);
  BQ_OK(bq_malloc(&dy, (size_t)(c->rows * R->ys)), R->what);
  BQ_OK(bq_memcpy_to_device(dx, R->dense, (size_t)n * R->ts), R->what);
  BQ_OK(bq_memset(dy, POISON, (size_t)(c->rows * R->ys)), R->what);
  a.x = dx;
  a.y = dy;
  if (c->g == BQ_PER_TENSOR) {
    a.numel = n;
    a.scale = c->scale;
    a.zero_point = c->zp;
  } else {
    a.rows = c->rows;
    a.cols = c->cols;
    a.y_row_stride = R->da.y_row_stride;
    a.group_size = c->G;
    a.group_row_stride = c->grs;
    BQ_OK(bq_malloc(&ds, (size_t)R->nparams * R->ss), R->what);
    BQ_OK(bq_memset(ds, POISON, (size_t)R->nparams * R->ss), R->what);
    a.out_scales = ds;
    if (c->asym) {
      BQ_OK(bq_malloc(&dz, (size_t)R->nparams * 4), R->what);
      BQ_OK(bq_memset(dz, POISON, (size_t)R->nparams * 4), R->what);
      a.out_zero_points = (int32_t *)dz;
    }
  }
  BQ_OK(bq_plan_workspace_size(plan, &a, &ws), R->what);
  if (ws) BQ_OK(bq_malloc(&wsp, ws), R->what);
  BQ_OK(bq_plan_run(plan, &a, wsp, ws, NULL), R->what);
  BQ_OK(bq_synchronize(NULL), R->what);
  gy = (unsigned char *)malloc((size_t)(c->rows * R->ys));
  cr_assert(gy);
  BQ_OK(bq_memcpy_to_host(gy, dy, (size_t)(c->rows * R->ys)), R->what);
  for (row = 0; row < c->rows; row++) {
    const unsigned char *f = R->y.g + R->y.pre + (size_t)(row * R->ys), *u = gy + (size_t)(row * R->ys);
    int64_t col;
    for (col = 0; col < c->cols; col++)
      cr_assert_eq(f[col], u[col], "fused != unfused: y row %lld col %lld: fused %d, producer + library quantize %d | %s",
                   (long long)row, (long long)col, (int)ref_load_int(R->qd.int_type, f, col),
                   (int)ref_load_int(R->qd.int_type, u, col), R->what);
  }
  if (ds) {
    gs = (unsigned char *)malloc((size_t)R->nparams * R->ss);
    cr_assert(gs);
    BQ_OK(bq_memcpy_to_host(gs, ds, (size_t)R->nparams * R->ss), R->what);
    {
      static char msg[MSG_CAP];
      size_t bad;
      msg[0] = 0;
      bad = ref_compare(R->qd.scale_type, gs, R->sc.g + R->sc.pre, R->nparams, msg, sizeof msg);
      cr_assert_eq(bad, 0, "fused != unfused: scales (expected = library quantize, got = fused):\n%s| %s", msg, R->what);
    }
  }
  if (dz) {
    gz = (int32_t *)malloc((size_t)R->nparams * 4);
    cr_assert(gz);
    BQ_OK(bq_memcpy_to_host(gz, dz, (size_t)R->nparams * 4), R->what);
    cr_assert(!memcmp(gz, R->zp.g + R->zp.pre, (size_t)R->nparams * 4), "fused != unfused: zero points | %s", R->what);
  }
  free(gy);
  free(gs);
  free(gz);
  bq_free(dx);
  bq_free(dy);
  if (ds) bq_free(ds);
  if (dz) bq_free(dz);
  if (wsp) bq_free(wsp);
}

static void run_case(const fcase *c)
{
  frun R;
  frun_init(&R, c);
  frun_expect(&R);
  frun_exec(&R);
  frun_check(&R, "fused vs reference");
  if (c->unfused) frun_unfused(&R);
  frun_free(&R);
}

/* ==== the descriptors ========================================================================= */

/* The quantize settings each (op, T) is tried with (each a kernel of its own: q-ranges and
   scale types are in the SKU, so the list is kept short). */
typedef struct qset {
  bq_granularity g;
  bq_dtype I;
  int qmin, qmax;
  int asym;
  int st_t; /* scale type T (else f32) */
} qset;
static const qset QSETS[] = {
  {BQ_PER_TENSOR, BQ_S8, 0, 0, 0, 0},   /* Q0: static, a zero point */
  {BQ_PER_TENSOR, BQ_U8, 3, 250, 0, 0}, /* Q1: static, narrow u8 */
  {BQ_PER_TOKEN, BQ_S8, 0, 0, 0, 1},    /* Q2: per token symmetric s8, scales in T */
  {BQ_PER_TOKEN, BQ_U8, 0, 0, 0, 0},    /* Q3: per token symmetric u8, f32 scales */
  {BQ_PER_TOKEN, BQ_U8, 3, 250, 1, 0},  /* Q4: per token asymmetric narrow u8, f32 scales */
  {BQ_PER_TOKEN, BQ_S8, -7, 7, 1, 1},   /* Q5: per token asymmetric narrow s8, scales in T */
  {BQ_PER_GROUP, BQ_S8, -7, 7, 0, 0},   /* Q6: per group symmetric narrow s8, f32 scales */
  {BQ_PER_GROUP, BQ_U8, 0, 0, 1, 1},    /* Q7: per group asymmetric u8, scales in T */
  {BQ_PER_TENSOR, BQ_E4M3, 0, 0, 0, 0}, /* Q8: static e4m3 (no zero point) */
  {BQ_PER_TOKEN, BQ_E4M3, 0, 0, 0, 1},  /* Q9: per token e4m3, scales in T */
  {BQ_PER_GROUP, BQ_E5M2, 0, 0, 0, 0},  /* Q10: per group e5m2, f32 scales */
};
#define NQSETS ((int)(sizeof QSETS / sizeof QSETS[0]))

static const bq_dtype g_types[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};

/* a case with every field at a plain default for (op, T, qset) */
static fcase base_case(int op, bq_dtype T, int q)
{
  fcase c;
  const qset *s = &QSETS[q];
  memset(&c, 0, sizeof c);
  c.op = op;
  c.T = T;
  c.I = s->I;
  c.qmin = s->qmin;
  c.qmax = s->qmax;
  c.g = s->g;
  c.asym = s->asym;
  c.st = s->st_t ? T : BQ_F32;
  c.rows = 7;
  c.cols = 256;
  c.G = s->g == BQ_PER_GROUP ? 128 : 0;
  c.xpad = c.ypad = c.rpad = c.opad = -1;
  c.res = op == OP_RMS ? (int)(rnd() % 3) : RES_NONE;
  c.with_out = (int)(rnd() & 1);
  c.zp_null = (int)(rnd() & 1);
  c.eps = (rnd() & 1) ? 1e-6 : 1e-5;
  if (s->g == BQ_PER_TENSOR) {
    int lo = s->qmin || s->qmax ? s->qmin : s->I == BQ_S8 ? -128 : 0;
    int hi = s->qmin || s->qmax ? s->qmax : s->I == BQ_S8 ? 127 : 255;
    c.scale = ldexp(1.0 + rnd_unit(), (int)rnd_range(-9, -3)) * (s->qmin || s->qmax ? 8.0 : 1.0);
    c.zp = (int32_t)rnd_range(lo, hi);
    if (rnd() % 4 == 0) c.zp = (lo + hi) / 2;
    if (s->I == BQ_E4M3 || s->I == BQ_E5M2) c.zp = 0; /* FP8 is symmetric */
  }
  c.kind = -1;
  c.force = -1;
  return c;
}

static int64_t odd_pad(void) { return 2 * rnd_range(0, 20) + 1; }

/* the generic group size: 3 V elements, or 96 */
static int64_t generic_g(bq_dtype T) { return (rnd() & 1) ? 3 * vec_of(T) : 96; }

/* ==== the matrix: op x T x quantize settings ================================================== */

static void matrix(int op, bq_dtype T)
{
  static const int64_t aligned_cols[] = {128, 256, 1024, 4096};
  static const int64_t odd_cols[] = {1, 3, 17, 100, 333, 1000, 4095};
  const int64_t V = vec_of(T);
  int q;
  gpu_begin();
  for (q = 0; q < NQSETS; q++) {
    fcase c = base_case(op, T, q);
    if (c.g == BQ_PER_GROUP) {
      /* G = 128, aligned rows (the shuffle path), mixed content */
      c.rows = NKINDS + rnd_range(0, 8);
      c.cols = 128 * rnd_range(1, 8);
      c.unfused = 1;
      run_case(&c);
      /* the generic path: G = 3 V or 96, padded parameter rows, strided and misaligned */
      c = base_case(op, T, q);
      c.G = generic_g(T);
      c.rows = NKINDS + rnd_range(0, 4);
      c.cols = c.G * rnd_range(1, 12);
      c.grs = c.cols / c.G + rnd_range(0, 3);
      c.xpad = odd_pad();
      c.ypad = odd_pad();
      c.rpad = odd_pad();
      c.opad = odd_pad();
      c.xoff = (int)rnd_range(0, (int)V - 1);
      c.yoff = (int)rnd_range(0, 15);
      run_case(&c);
      /* G = 128, dense, with a row longer than the registers hold */
      c = base_case(op, T, q);
      c.rows = 3;
      c.cols = 128 * (2048 * V / 128 + rnd_range(1, 3));
      c.unfused = 1;
      run_case(&c);
      continue;
    }
    /* aligned, dense: the vector path from the first element; every kind of row */
    c.rows = NKINDS + rnd_range(0, 8);
    c.cols = PICK(aligned_cols);
    c.unfused = 1;
    run_case(&c);
    /* odd lengths, dense rows (the up half and the rows after the first are misaligned) */
    c = base_case(op, T, q);
    c.rows = NKINDS + rnd_range(0, 4);
    c.cols = PICK(odd_cols);
    c.unfused = 1;
    run_case(&c);
    /* odd lengths, padded odd strides with guarded gaps, misaligned pointers */
    c = base_case(op, T, q);
    c.rows = NKINDS + rnd_range(0, 4);
    c.cols = PICK(odd_cols);
    c.xpad = odd_pad();
    c.ypad = rnd_range(0, 40);
    c.rpad = odd_pad();
    c.opad = odd_pad();
    c.xoff = (int)rnd_range(0, (int)V - 1);
    c.roff = (int)rnd_range(0, (int)V - 1);
    c.ooff = (int)rnd_range(0, (int)V - 1);
    c.woff = (int)rnd_range(0, (int)V - 1);
    c.yoff = (int)rnd_range(0, 15);
    run_case(&c);
    /* a row past the registers (the long entry), dense */
    c = base_case(op, T, q);
    c.rows = 2;
    c.cols = 2048 * V + rnd_range(1, 3 * V);
    c.unfused = 1;
    run_case(&c);
  }
}

#define MATRIX_TESTS(suite, op)                                   \
  Test(suite, f32) { matrix(op, BQ_F32); }                        \
  Test(suite, f64) { matrix(op, BQ_F64); }                        \
  Test(suite, f16) { matrix(op, BQ_F16); }                        \
  Test(suite, bf16) { matrix(op, BQ_BF16); }

MATRIX_TESTS(fused_rmsnorm, OP_RMS)
MATRIX_TESTS(fused_silu, OP_SILU)
MATRIX_TESTS(fused_gelu, OP_GELU)

/* ==== focused tests (a few of the matrix's kernels, so that they are compiled once) =========== */

/* Q2 (per token sym s8, T scales), Q4 (per token asym u8 narrow), Q7 (per group asym), Q1
   (static narrow u8) */
static const int FOCUS_Q[] = {2, 4, 7, 1};
#define NFOCUS 4

/* Every kind of row alone (a case of rows all of that kind), D = 1 and odd D, eps = 0. */
Test(fused_edges, every_kind_and_short_rows)
{
  static const int64_t cols[] = {1, 2, 5, 17, 4095};
  int op, ti, qi, k;
  gpu_begin();
  for (op = 0; op < 3; op++)
    for (ti = 0; ti < 4; ti++)
      for (qi = 0; qi < NFOCUS; qi++) {
        const bq_dtype T = g_types[ti];
        for (k = 0; k < NKINDS; k++) {
          fcase c = base_case(op, T, FOCUS_Q[qi]);
          c.kind = k;
          c.rows = 3;
          if (c.g == BQ_PER_GROUP) {
            c.G = (k & 1) ? 128 : generic_g(T);
            c.cols = c.G * rnd_range(1, 3);
          } else {
            c.cols = PICK(cols);
          }
          if (k == K_ZERO && op == OP_RMS && (rnd() & 1)) c.eps = 0.0; /* 0 * inf: NaN rows */
          run_case(&c);
        }
        {
          /* eps = 0 on ordinary rows, D = 1 */
          fcase c = base_case(op, T, FOCUS_Q[qi]);
          c.eps = 0.0;
          c.rows = 33;
          c.cols = 1;
          c.G = c.g == BQ_PER_GROUP ? 1 : 0;
          run_case(&c);
        }
      }
}

/* Rows past what a block holds in registers (2048 accesses of 16 bytes), e.g. 40000 bf16,
   around the c8 limit, with and without the residual. */
Test(fused_edges, long_rows)
{
  int op, ti, qi;
  gpu_begin();
  for (op = 0; op < 3; op++)
    for (ti = 0; ti < 4; ti++)
      for (qi = 0; qi < 3; qi++) {
        const bq_dtype T = g_types[ti];
        const int64_t V = vec_of(T), lim = 2048 * V;
        const int64_t far = T == BQ_F64 ? 10000 : T == BQ_F32 ? 20000 : 40000;
        const int64_t lens[] = {lim, lim + 1, lim + V, far, far + 7};
        size_t li;
        for (li = 0; li < sizeof lens / sizeof lens[0]; li++) {
          fcase c = base_case(op, T, FOCUS_Q[qi]);
          c.rows = 3;
          c.cols = lens[li];
          if (c.g == BQ_PER_GROUP) {
            c.G = li % 2 ? 128 : generic_g(T);
            c.cols = (lens[li] + c.G - 1) / c.G * c.G;
          }
          c.res = op == OP_RMS ? (int)(li % 3) : RES_NONE;
          c.kind = li == 3 ? K_RANDOM : -1;
          if (li == 4) { /* and strided, misaligned */
            c.xpad = odd_pad();
            c.rpad = odd_pad();
            c.xoff = (int)rnd_range(1, 15) % (int)V;
          }
          run_case(&c);
        }
      }
}

/* Strided rows with gaps (every stride padded, some odd), guards checked; the residual in
   place with a padded stride. */
Test(fused_edges, strided_rows)
{
  static const int64_t cols[] = {5, 64, 129, 1024};
  int op, ti, qi, ci;
  gpu_begin();
  for (op = 0; op < 3; op++)
    for (ti = 0; ti < 4; ti++)
      for (qi = 0; qi < NFOCUS; qi++)
        for (ci = 0; ci < 4; ci++) {
          const bq_dtype T = g_types[ti];
          fcase c = base_case(op, T, FOCUS_Q[qi]);
          c.rows = 9;
          c.cols = cols[ci];
          if (c.g == BQ_PER_GROUP) {
            c.G = ci == 3 ? 128 : 1;
            c.grs = c.cols / c.G + 2;
          }
          c.xpad = (ci & 1) ? odd_pad() : vec_of(T) * rnd_range(1, 3);
          c.ypad = odd_pad();
          c.rpad = odd_pad();
          c.opad = (ci & 1) ? odd_pad() : vec_of(T);
          c.with_out = 1;
          if (op == OP_RMS) c.res = ci < 2 ? RES_IN_PLACE : RES_BUFFER;
          run_case(&c);
        }
}

/* RMSNorm's residual in place (residual == x, same stride) on every type, all scopes. */
Test(fused_edges, residual_in_place)
{
  int ti, q;
  gpu_begin();
  for (ti = 0; ti < 4; ti++)
    for (q = 0; q < NFOCUS; q++) {
      const bq_dtype T = g_types[ti];
      fcase c = base_case(OP_RMS, T, FOCUS_Q[q]);
      c.res = RES_IN_PLACE;
      c.rows = 20;
      c.cols = c.g == BQ_PER_GROUP ? 384 : (rnd() & 1) ? 4096 : 1003;
      c.with_out = 1;
      c.unfused = 1;
      run_case(&c);
      c.xpad = odd_pad();
      c.xoff = (int)rnd_range(0, vec_of(T) - 1);
      run_case(&c);
    }
}

/* Each kernel entry by name: the row in registers (bq_fused_c1 .. c8: 256 threads of k = 1,
   2, 4, 8 accesses, and c2d, c8d for dense rows; bq_fused_m4, m8, m16: 128 threads of 4, 8,
   16 accesses, and m4f, m8f for rows of exactly 512 or 1024 accesses),
   bq_fused_long (any row from memory), bq_fused_staged (rows staged in shared memory by
   persistent blocks: 16-byte aligned rows whose two slots fit the block's shared memory);
   a forced entry that cannot take the row (too long; for a narrow entry, rows that are not
   dense: misaligned, D not whole accesses, a residual; for c2d and c8d, misaligned or D not
   whole accesses) falls back to the long one. */
static void entries_by_name(const int *qsets, int nq, const bq_dtype *types, int nt)
{
  int op, ti, e;
  gpu_begin();
  for (op = 0; op < 3; op++)
    for (ti = 0; ti < nt; ti++)
      for (e = 0; e < BQ__FUSED_AMAX; e++) { /* (bq_fused_amax: NVFP4's first launches, test_gpu_mx) */
        const bq_dtype T = types[ti];
        const int64_t V = vec_of(T);
        const int64_t held = bq__fused_held(e);
        /* staged: two slots of x and the residual (or gate and up), 226 KiB on an H100, less
           the activation's table where there is one */
        const int tab = op != OP_RMS && T == BQ_BF16;
        const int64_t cap = e == BQ__FUSED_LONG ? (int64_t)2048 * V + 5 * V
                            : e == BQ__FUSED_STAGED ? (int64_t)(tab ? 3104 : 3616) * V : held * V;
        int qi;
        for (qi = 0; qi < nq; qi++) {
          const int64_t lens[] = {1, cap / 2 + 1, cap - 1, cap, cap + V + 3};
          size_t li;
          for (li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            fcase c = base_case(op, T, qsets[qi]);
            c.force = e;
            c.rows = e == BQ__FUSED_STAGED ? 40 : 3; /* staged: persistent blocks take several rows each */
            c.cols = lens[li];
            if (e == BQ__FUSED_STAGED && li == 1) c.cols = V * (cap / (2 * V)); /* aligned dense rows */
            if (e >= BQ__FUSED_M4 && li < 2) c.cols = (lens[li] + V - 1) / V * V; /* dense: narrow entries */
            if (c.g == BQ_PER_GROUP) {
              c.G = li % 2 ? 128 : generic_g(T);
              c.cols = (lens[li] + c.G - 1) / c.G * c.G;
              if (c.cols > cap && li < 4 && c.cols - c.G >= c.G) c.cols -= c.G; /* keep it inside the entry */
            }
            if (li == 2) { /* strided, misaligned */
              c.xpad = odd_pad();
              c.xoff = (int)rnd_range(0, (int)V - 1);
            }
            run_case(&c);
          }
        }
      }
}
Test(fused_edges, every_entry_by_name) { entries_by_name(FOCUS_Q, 3, g_types, 4); }
/* FP8 storage through every entry, bf16 and f32 (the matrix has every T): per token e4m3 and
   per group e5m2, whose quantize takes FP8's forms of the row's and the group's code */
Test(fused_edges, fp8_every_entry_by_name)
{
  static const int fp8_q[] = {9, 10};
  static const bq_dtype types[] = {BQ_BF16, BQ_F32};
  entries_by_name(fp8_q, 2, types, 2);
}

/* The narrow entries store y a chunk of codes at a time, so the host gives them only rows
   whose y rows are aligned to a chunk (V bytes). RMSNorm at batches they take (2300 rows:
   16 an SM on an H100), bf16 D = 4096 (bq_fused_m4f) and 14336 (bq_fused_m16), f32 D = 4096
   (bq_fused_m8f): y aligned, then y's start off the chunk, then its row stride not a
   multiple of V (the host gives those rows to another entry); then with a residual, a
   buffer and in place, y aligned (bf16 D = 4096: bq_fused_m4f; the others take the
   256-thread entries); each against the reference. */
Test(fused_edges, narrow_y_alignment)
{
  static const struct { bq_dtype T; int64_t cols; } shapes[] = {{BQ_BF16, 4096}, {BQ_BF16, 14336}, {BQ_F32, 4096}};
  size_t si;
  int q, k;
  gpu_begin();
  for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (q = 0; q < NFOCUS; q++)
      for (k = 0; k < 5; k++) {
        const bq_dtype T = shapes[si].T;
        fcase c = base_case(OP_RMS, T, FOCUS_Q[q]);
        if (c.g == BQ_PER_TENSOR) continue;
        c.res = k == 3 ? RES_BUFFER : k == 4 ? RES_IN_PLACE : RES_NONE;
        c.rows = 2300;
        c.cols = shapes[si].cols;
        if (k == 1) c.yoff = 1 + (int)rnd_range(0, vec_of(T) - 2);
        if (k == 2) c.ypad = odd_pad();
        run_case(&c);
      }
}

/* destroys the plans plan_get keeps, then drops the library's loaded modules: the next
   select loads its module afresh (from disk) */
static void plans_drop(void)
{
  int i;
  for (i = 0; i < g_nplans; i++) bq_plan_destroy(g_plans[i].p);
  g_nplans = 0;
  bq_cache_clear_memory();
}
/* The activation's table (gated, bf16 gates): every 16-bit gate pattern, through each
   register entry, the long one and the staged one, and through a module's first launch,
   whose first blocks compute the table and publish it (the memory cache is cleared before
   it, so the module is loaded afresh), then a second launch, whose blocks copy it. f16 gates
   take the formula; they are swept too. */
Test(fused_edges, every_16_bit_gate)
{
  static const bq_dtype types[] = {BQ_BF16, BQ_F16};
  int op, ti, e, launch;
  gpu_begin();
  for (op = 1; op < 3; op++)
    for (ti = 0; ti < 2; ti++) {
      const int64_t V = vec_of(types[ti]);
      for (e = -1; e <= BQ__FUSED_STAGED; e++) {
        fcase c = base_case(op, types[ti], FOCUS_Q[e < 0 ? 0 : e % 3]);
        c.force = e;
        c.kind = K_EVERY;
        c.cols = e < 0 ? 4096 : e == BQ__FUSED_LONG ? 2048 * V + 3 * V : e == BQ__FUSED_STAGED ? 1024 * V
                                                                       : bq__fused_held(e) * V;
        c.rows = 65536 / c.cols + 1;
        if (c.g == BQ_PER_GROUP) c.G = 128;
        if (e < 0) { /* the host's choice, as many blocks as fit: a fresh module, twice */
          c.rows = 2048;
          plans_drop();
        }
        for (launch = 0; launch < (e < 0 ? 2 : 1); launch++) {
          g_every = (uint32_t)rnd();
          run_case(&c);
        }
      }
    }
}

/* Batch invariance: the rows of a batch of M equal the same rows computed alone (M = 1),
   bit for bit (NaN payloads included: the same kernel runs either way). */
static void batch_invariance(int op, bq_dtype T, int q)
{
  static const int64_t Ms[] = {1, 2, 3, 17, 64, 255, 300, 2300}; /* 2300: a narrow entry (H100) */
  static const int64_t cols_of[] = {4096, 1000, 12288};
  size_t mi;
  for (mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
    fcase c = base_case(op, T, q);
    frun B;
    int pick;
    c.rows = Ms[mi];
    c.cols = c.g == BQ_PER_GROUP ? 128 * rnd_range(1, 32) : cols_of[mi % 3];
    c.with_out = 1;
    c.zp_null = 0;
    frun_init(&B, &c);
    frun_expect(&B);
    frun_exec(&B);
    frun_check(&B, "batch vs reference");
    for (pick = 0; pick < 3; pick++) {
      const int64_t r = pick == 0 ? 0 : pick == 1 ? c.rows - 1 : rnd_range(0, c.rows - 1);
      fcase c1 = c;
      frun S;
      c1.rows = 1;
      frun_init(&S, &c1);
      /* row r of the batch's inputs, and its weight */
      memcpy(S.x0 + S.x.pre, B.x0 + B.x.pre + (size_t)(r * B.xs) * B.ts, (size_t)B.in_cols * B.ts);
      memcpy(S.x.h, S.x0, S.x.total);
      if (S.r0) {
        memcpy(S.r0 + S.r.pre, B.r0 + B.r.pre + (size_t)(r * B.rs) * B.ts, (size_t)B.D * B.ts);
        memcpy(S.r.h, S.r0, S.r.total);
      }
      memcpy(S.w.h + S.w.pre, B.w.h + B.w.pre, (size_t)B.D * B.ts);
      frun_expect(&S);
      frun_exec(&S);
      frun_check(&S, "single row vs reference");
      snprintf(S.what + strlen(S.what), sizeof S.what - strlen(S.what), " | batch row %lld of M = %lld", (long long)r,
               (long long)c.rows);
      cr_assert(!memcmp(S.y.g + S.y.pre, B.y.g + B.y.pre + (size_t)(r * B.ys), (size_t)B.D),
                "batch invariance: y differs | %s", S.what);
      cr_assert(!memcmp(S.o.g + S.o.pre, B.o.g + B.o.pre + (size_t)(r * B.os) * B.ts, (size_t)B.D * B.ts),
                "batch invariance: out differs | %s", S.what);
      if (B.r.g)
        cr_assert(!memcmp(S.r.g + S.r.pre, B.r.g + B.r.pre + (size_t)(r * B.rs) * B.ts, (size_t)B.D * B.ts),
                  "batch invariance: the residual (h) differs | %s", S.what);
      if (c.res == RES_IN_PLACE)
        cr_assert(!memcmp(S.x.g + S.x.pre, B.x.g + B.x.pre + (size_t)(r * B.xs) * B.ts, (size_t)B.D * B.ts),
                  "batch invariance: h (in place) differs | %s", S.what);
      if (B.sc.g) {
        const int64_t per = c.g == BQ_PER_GROUP ? B.ng : 1, sst = c.g == BQ_PER_GROUP ? B.grs : 1;
        cr_assert(!memcmp(S.sc.g + S.sc.pre, B.sc.g + B.sc.pre + (size_t)(r * sst) * B.ss, (size_t)per * B.ss),
                  "batch invariance: scales differ | %s", S.what);
        if (B.zp.g && c.asym)
          cr_assert(!memcmp(S.zp.g + S.zp.pre, B.zp.g + B.zp.pre + (size_t)(r * sst) * 4, (size_t)per * 4),
                    "batch invariance: zero points differ | %s", S.what);
      }
      frun_free(&S);
    }
    frun_free(&B);
  }
}

Test(fused_batch, rmsnorm)
{
  gpu_begin();
  batch_invariance(OP_RMS, BQ_BF16, 2);
  batch_invariance(OP_RMS, BQ_F16, 7);
  batch_invariance(OP_RMS, BQ_F32, 1);
  batch_invariance(OP_RMS, BQ_F64, 4);
}

Test(fused_batch, gated)
{
  gpu_begin();
  batch_invariance(OP_SILU, BQ_BF16, 4);
  batch_invariance(OP_GELU, BQ_F16, 2);
  batch_invariance(OP_SILU, BQ_F32, 7);
  batch_invariance(OP_GELU, BQ_F64, 1);
}

/* More rows than a grid's y or z dimension holds (65535), and a few thousand rows of
   mixed content. */
Test(fused_edges, many_rows)
{
  static const struct { int op; int ti; int q; int64_t rows, cols; } cases[] = {
    {OP_RMS, 3, 2, 70000, 40},  {OP_SILU, 2, 4, 70000, 24},  {OP_GELU, 0, 7, 70000, 128},
    {OP_RMS, 1, 1, 3000, 333},  {OP_GELU, 3, 2, 2500, 1000}, {OP_SILU, 1, 7, 2000, 256},
  };
  size_t i;
  gpu_begin();
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fcase c = base_case(cases[i].op, g_types[cases[i].ti], cases[i].q);
    c.rows = cases[i].rows;
    c.cols = cases[i].cols;
    c.with_out = 1;
    run_case(&c);
  }
}

/* Zero-size problems: success, and nothing written. */
/* ==== stochastic rounding ====================================================================== */
/* desc.rounding stochastic (integer and FP8 storage): every op, float type and quantize
   setting, against the reference producer, then its quantize (the dynamic scales as rounding
   to nearest computes them) and the SR reference on the producer's values with the scales
   written (per tensor: the static scale and zero point on every row). Rows short, aligned,
   odd, strided and off the 16-byte grid, and longer than the registers hold; args.out given
   (the values read from it) or not (the workspace); fresh seeds and offsets, now and then
   near 2^64 (the index wraps). */
static void sr_matrix(int op)
{
  gpu_begin();
  for (int ti = 0; ti < 4; ti++)
    for (int q = 0; q < NQSETS; q++)
      for (int k = 0; k < 3; k++) {
        const bq_dtype T = g_types[ti];
        fcase c = base_case(op, T, q);
        c.sr = 1;
        c.seed = rnd();
        c.offset = k == 2 ? ~0ull - rnd() % 5000 : rnd() % 100000;
        c.with_out = k == 1;
        c.rows = rnd_range(1, 12);
        if (c.g == BQ_PER_GROUP) {
          c.G = k == 0 ? 128 : generic_g(T);
          c.cols = c.G * rnd_range(1, k == 2 ? 48 : 12);
          c.grs = k == 1 ? c.cols / c.G + rnd_range(0, 3) : 0;
        } else {
          c.cols = k == 0 ? 128 * rnd_range(1, 16) : k == 1 ? rnd_range(1, 3000) : vec_of(T) * 2048 + rnd_range(1, 900);
        }
        if (k == 1) {
          c.xpad = odd_pad();
          c.ypad = odd_pad();
          c.rpad = odd_pad();
          c.opad = odd_pad();
          c.xoff = (int)rnd_range(0, vec_of(T) - 1);
          c.yoff = (int)rnd_range(0, 15);
        }
        run_case(&c);
      }
}
/* The fused rotation (per tensor and per token, integer and FP8): against the producer's
   reference values rotated by ref_rotate, then quantize per tensor with the static scale or
   dynamic quantize per token (and its stochastic rounding), y and the scales written anew;
   every float type and quantize setting, blocks from 2 to 256, random signs or not, rounding
   either way, args.out or the workspace, strided rows */
static void rot_matrix(int op)
{
  gpu_begin();
  for (int ti = 0; ti < 4; ti++)
    for (int q = 0; q < NQSETS; q++) {
      if (QSETS[q].g == BQ_PER_GROUP) continue; /* (refused: dynamic quantize rotates per token only) */
      for (int k = 0; k < 4; k++) {
        const bq_dtype T = g_types[ti];
        fcase c = base_case(op, T, q);
        const int vec = vec_of(T);
        c.rot = (int64_t)2 << rnd_range(0, 7);
        if (c.g == BQ_PER_TOKEN && c.rot > 32 * vec) c.rot = 32 * vec; /* (dynamic's blocks: at most 32 accesses) */
        c.signs = k & 1;
        c.sr = k >> 1;
        c.seed = rnd();
        c.offset = k == 3 ? ~0ull - rnd() % 5000 : rnd() % 100000;
        c.with_out = (int)(rnd() & 1);
        c.rows = rnd_range(1, 12);
        const int64_t unit = c.rot > vec ? c.rot : vec; /* (per token: whole 16-byte accesses) */
        c.cols = unit * rnd_range(1, k == 2 ? 4096 / unit + 1 : 512 / unit + 1);
        if (k == 1) { /* strides (args.out's on the 16-byte grid, the held op's rows) */
          c.xpad = odd_pad();
          c.ypad = odd_pad();
          c.rpad = odd_pad();
          c.opad = vec * rnd_range(0, 3);
        }
        run_case(&c);
      }
    }
}
Test(fused_rotation, rmsnorm, .timeout = 600) { rot_matrix(OP_RMS); }
Test(fused_rotation, silu_mul, .timeout = 600) { rot_matrix(OP_SILU); }
Test(fused_rotation, gelu_tanh_mul, .timeout = 600) { rot_matrix(OP_GELU); }

Test(fused_sr, rmsnorm, .timeout = 600) { sr_matrix(OP_RMS); }
Test(fused_sr, silu_mul, .timeout = 600) { sr_matrix(OP_SILU); }
Test(fused_sr, gelu_tanh_mul, .timeout = 600) { sr_matrix(OP_GELU); }

Test(fused_edges, zero_size)
{
  int op, ti, qi;
  gpu_begin();
  for (op = 0; op < 3; op++)
    for (ti = 0; ti < 4; ti++)
      for (qi = 0; qi < NFOCUS; qi++) {
        fcase c = base_case(op, g_types[ti], FOCUS_Q[qi]);
        c.rows = 0;
        c.cols = c.g == BQ_PER_GROUP ? 128 : 64;
        run_case(&c);
        if (c.g != BQ_PER_GROUP) {
          c.rows = 4;
          c.cols = 0;
          c.with_out = 1;
          run_case(&c);
        }
      }
}
