/* tests/test_gpu_batch.c - batch invariance on the GPU: a row's result does not depend on
   the batch it is computed in. Every row of a batch of M rows equals, bit for bit, the same
   row computed alone (M = 1).

   Linear layers (QuantizedLinear symmetric and asymmetric, SmoothQuantLinear per tensor and
   per token, several output types; K = N = 256): M = 1..300 and 1024, 4096, which walks
   through every tile configuration the plan chooses by M (weight streaming of 16, 32 and 64
   rows, passes of 64, 128 x 256 tiles); then the same batches with each configuration
   forced (128 x 256 tiles, passes of 64 rows) and, on an sm_90 device, with the mma.sync
   module that BARACUDA_QUANT_WGMMA=0 selects. The alone rows come from the default plan's
   automatic choice (weight streaming of 16 rows), so tile kinds are compared with each
   other as well. Outputs are poisoned with 0xff bytes, a NaN in every output type, which
   no finite input can produce: the alone rows must hold no NaN, and any element a batch
   leaves unwritten differs from its alone row.

   Dynamic quantize per token (symmetric and asymmetric, f32/f64/f16/bf16, rows of 256 to
   9000 elements, the warp, block and long-row kernels): the same M; y, scales and zero
   points. Int8 outputs have no impossible value, so every batch runs twice, under two
   poisons (0xa5 and 0x5a bytes): an element left unwritten differs from its alone row in
   one of the two runs. The alone rows are computed twice the same way.

   R = 300 distinct random rows (some all zero, all positive, constant, or with NaN
   elements for dynamic quantize); a batch of M rows takes row i % R at position i, so
   batches up to 300 are prefixes and each distinct row is computed alone once.
   Inputs are drawn fresh each run (BQ_TEST_SEED=<n> replays one). Without a usable CUDA
   driver/device every test is skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"

#define R 300       /* distinct rows */
#define MAX_M 4096  /* the largest batch */
#define LIN_K 256
#define LIN_N 256

#undef BQ_OK /* gpu_util.h's: this suite's takes one message argument */
#define BQ_OK(call, what)                                                                    \
  do {                                                                                       \
    bq_status st_ = (call);                                                                  \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s | %s", #call, bq_status_name(st_),          \
                 bq_last_error(), (what));                                                   \
  } while (0)

/* the batch sizes: every M up to R, then two large ones */
static int64_t batch_m(int i) { return i < R ? i + 1 : i == R ? 1024 : MAX_M; }
#define N_BATCHES (R + 2)

static void *dev_alloc(size_t bytes, const char *what)
{
  void *p = NULL;
  BQ_OK(bq_malloc(&p, bytes ? bytes : 1), what);
  return p;
}

static void *host_alloc(size_t bytes)
{
  void *p = malloc(bytes ? bytes : 1);
  cr_assert(p != NULL, "host malloc(%zu)", bytes);
  return p;
}

/* The workspace a call needs; an invalid call is reported here and again by the run. */
static size_t workspace_bytes(const bq_plan *plan, const bq_args *args)
{
  size_t bytes = 0;
  if (bq_plan_workspace_size(plan, args, &bytes) != BQ_SUCCESS) fprintf(stderr, "%s\n", bq_last_error());
  return bytes;
}

static void store_any(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

static double rnd_scale(int lo_exp, int hi_exp) { return ldexp(1.0 + rnd_unit(), (int)rnd_range(lo_exp, hi_exp)); }

/* Copies rows 0..R-1 of a [MAX_M, cols] host image to rows R..MAX_M-1 (row i = row i % R). */
static void replicate_rows(unsigned char *buf, size_t row_bytes)
{
  for (int64_t i = R; i < MAX_M; i++) memcpy(buf + (size_t)i * row_bytes, buf + (size_t)(i % R) * row_bytes, row_bytes);
}

/* The first element of `row` (cols elements of type t) where got differs from want, or -1. */
static int64_t first_diff(bq_dtype t, const unsigned char *want, const unsigned char *got, int64_t cols)
{
  size_t es = ref_dtype_size(t);
  if (!memcmp(want, got, (size_t)cols * es)) return -1;
  for (int64_t j = 0; j < cols; j++)
    if (memcmp(want + (size_t)j * es, got + (size_t)j * es, es)) return j;
  return -1;
}

/* Checks rows 0..M-1 of got against the alone rows (row i against alone row i % R) and that
   row M (the guard row) kept its poison byte. */
static void check_batch(bq_dtype t, const char *name, const unsigned char *alone, const unsigned char *got, int64_t M,
                        int64_t cols, unsigned char poison, const char *variant, const char *what)
{
  const size_t es = ref_dtype_size(t), rb = (size_t)cols * es;
  char e[64], g[64];
  for (int64_t i = 0; i < M; i++) {
    int64_t j = first_diff(t, alone + (size_t)(i % R) * rb, got + (size_t)i * rb, cols);
    if (j >= 0) {
      ref_format_elem(e, sizeof e, t, alone + (size_t)(i % R) * rb, j);
      ref_format_elem(g, sizeof g, t, got + (size_t)i * rb, j);
      cr_assert_fail("%s[%lld][%lld] of a batch of M = %lld (%s): alone %s, in the batch %s | %s", name, (long long)i,
                     (long long)j, (long long)M, variant, e, g, what);
    }
  }
  for (size_t b = 0; b < rb; b++)
    cr_assert_eq(got[(size_t)M * rb + b], poison, "%s: the row after a batch of M = %lld was written (byte %zu: 0x%02x) "
                 "(%s) | %s", name, (long long)M, b, got[(size_t)M * rb + b], variant, what);
}

/* ==== linear layers ===================================================================== */

typedef struct lcase {
  bq_op op;
  bq_granularity gran; /* SmoothQuant: per tensor or per token */
  bq_dtype T, out, I;  /* T: QuantizedLinear's activations */
  int asym, bias;
} lcase;

static bq_desc lin_desc(const lcase *c)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = c->op;
  d.granularity = c->op == BQ_QUANTIZED_LINEAR ? BQ_PER_TOKEN : c->gran;
  d.float_type = c->op == BQ_QUANTIZED_LINEAR ? c->T : c->out;
  d.out_type = c->out;
  d.int_type = c->I;
  d.scale_type = BQ_F32;
  d.asymmetric = c->asym;
  return d;
}

typedef struct lbufs {
  const lcase *c;
  unsigned char *dx, *dy;
  void *dw, *dwsc, *dbias, *dsa, *dzps, *dwsum, *ws;
  size_t xs, ys, ws_bytes; /* bytes of an x and a y element */
  double sa_scalar;
  int32_t zp_scalar;
} lbufs;

/* One run of `plan` on rows [r0, r0 + M) of x (and their scales), into y. */
static void lin_run(const lbufs *B, const bq_plan *plan, int64_t r0, int64_t M, void *y, const char *what)
{
  const lcase *c = B->c;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = B->dx + (size_t)(r0 * LIN_K) * B->xs;
  a.y = y;
  a.rows = M;
  a.cols = LIN_K;
  a.n = LIN_N;
  a.w = B->dw;
  a.w_scales = B->dwsc;
  a.bias = c->bias ? B->dbias : NULL;
  a.w_sums = c->asym ? B->dwsum : NULL;
  if (c->op == BQ_SMOOTHQUANT_LINEAR) {
    if (c->gran == BQ_PER_TOKEN) {
      a.scales = (const float *)B->dsa + r0;
      a.zero_points = c->asym ? (const int32_t *)B->dzps + r0 : NULL;
    } else {
      a.scale = B->sa_scalar;
      a.zero_point = B->zp_scalar;
    }
  }
  size_t need = workspace_bytes(plan, &a);
  cr_assert(need <= B->ws_bytes, "workspace %zu > %zu | %s", need, B->ws_bytes, what);
  BQ_OK(bq_plan_run(plan, &a, need ? B->ws : NULL, need, NULL), what);
}

static void batch_linear(const lcase *c)
{
  const int ql = c->op == BQ_QUANTIZED_LINEAR;
  const int qmin = c->I == BQ_S8 ? -128 : 0, qmax = c->I == BQ_S8 ? 127 : 255;
  char what[384];
  snprintf(what, sizeof what, "seed=0x%llx %s %s T=%s out=%s I=%s %s bias=%d K=%d N=%d", (unsigned long long)g_seed,
           ql ? "quantized_linear" : "smoothquant_linear", c->gran == BQ_PER_TOKEN || ql ? "per_token" : "per_tensor",
           ref_dtype_name(c->T), ref_dtype_name(c->out), ref_dtype_name(c->I), c->asym ? "asym" : "sym", c->bias, LIN_K,
           LIN_N);

  lbufs B;
  memset(&B, 0, sizeof B);
  B.c = c;
  B.xs = ql ? ref_dtype_size(c->T) : 1;
  B.ys = ref_dtype_size(c->out);
  const size_t yrow = (size_t)LIN_N * B.ys;

  /* host inputs: R distinct rows, replicated */
  unsigned char *x = host_alloc((size_t)MAX_M * LIN_K * B.xs), *bias = host_alloc((size_t)LIN_N * B.ys);
  int8_t *w = host_alloc((size_t)LIN_N * LIN_K);
  float *wsc = host_alloc(4 * LIN_N), *sa = host_alloc(4 * MAX_M);
  int32_t *zps = host_alloc(4 * MAX_M), *wsum = host_alloc(4 * LIN_N);
  for (int64_t i = 0; i < LIN_N * LIN_K; i++) w[i] = (int8_t)rnd_range(-128, 127);
  for (int64_t n = 0; n < LIN_N; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < LIN_K; k++) s += w[n * LIN_K + k];
    wsum[n] = s;
    wsc[n] = (float)rnd_scale(-10, -4);
    store_any(c->out, bias, n, (rnd_unit() - 0.5) * ldexp(1.0, (int)rnd_range(-4, 6)));
  }
  B.sa_scalar = rnd_scale(-12, -4);
  B.zp_scalar = c->asym ? (int32_t)rnd_range(qmin, qmax) : 0;
  for (int64_t r = 0; r < R; r++) {
    sa[r] = (float)rnd_scale(-12, -4);
    zps[r] = c->asym ? (int32_t)rnd_range(qmin, qmax) : 0;
    double mag = ldexp(1.0, (int)rnd_range(-6, 6));
    int kind = (int)(rnd() % 8); /* 0: all zero, 1: all positive, else signed */
    for (int64_t k = 0; k < LIN_K; k++) {
      int64_t e = r * LIN_K + k;
      if (ql) store_any(c->T, x, e, kind == 0 ? 0.0 : kind == 1 ? rnd_unit() * mag : (rnd_unit() - 0.5) * mag);
      else ref_store_int(c->I, x, e, (int32_t)rnd_range(qmin, qmax));
    }
  }
  replicate_rows(x, (size_t)LIN_K * B.xs);
  for (int64_t i = R; i < MAX_M; i++) {
    sa[i] = sa[i % R];
    zps[i] = zps[i % R];
  }

  /* device buffers */
  B.dx = dev_alloc((size_t)MAX_M * LIN_K * B.xs, what);
  B.dw = dev_alloc((size_t)LIN_N * LIN_K, what);
  B.dwsc = dev_alloc(4 * LIN_N, what);
  B.dbias = dev_alloc((size_t)LIN_N * B.ys, what);
  B.dsa = dev_alloc(4 * MAX_M, what);
  B.dzps = dev_alloc(4 * MAX_M, what);
  B.dwsum = dev_alloc(4 * LIN_N, what);
  B.dy = dev_alloc((size_t)(MAX_M + 1) * yrow, what);
  unsigned char *dalone = dev_alloc((size_t)R * yrow, what);
  BQ_OK(bq_memcpy_to_device(B.dx, x, (size_t)MAX_M * LIN_K * B.xs), what);
  BQ_OK(bq_memcpy_to_device(B.dw, w, (size_t)LIN_N * LIN_K), what);
  BQ_OK(bq_memcpy_to_device(B.dwsc, wsc, 4 * LIN_N), what);
  BQ_OK(bq_memcpy_to_device(B.dbias, bias, (size_t)LIN_N * B.ys), what);
  BQ_OK(bq_memcpy_to_device(B.dsa, sa, 4 * MAX_M), what);
  BQ_OK(bq_memcpy_to_device(B.dzps, zps, 4 * MAX_M), what);
  BQ_OK(bq_memcpy_to_device(B.dwsum, wsum, 4 * LIN_N), what);

  /* the plans: the default (wgmma tiles on an sm_90 device) and the mma.sync module */
  bq_desc d = lin_desc(c);
  const char *env = getenv("BARACUDA_QUANT_WGMMA");
  char *saved = env ? strdup(env) : NULL;
  bq_plan *pa = NULL, *pb = NULL;
  unsetenv("BARACUDA_QUANT_WGMMA");
  BQ_OK(bq_plan_select(&d, &pa), what);
  setenv("BARACUDA_QUANT_WGMMA", "0", 1);
  BQ_OK(bq_plan_select(&d, &pb), what);
  if (saved) setenv("BARACUDA_QUANT_WGMMA", saved, 1);
  else unsetenv("BARACUDA_QUANT_WGMMA");
  free(saved);
  cr_assert(!pb->linear.wgmma, "BARACUDA_QUANT_WGMMA=0 selected %s | %s", bq_plan_sku(pb), what);

  {
    bq_args a;
    memset(&a, 0, sizeof a);
    a.rows = MAX_M;
    a.cols = LIN_K;
    a.n = LIN_N;
    B.ws_bytes = workspace_bytes(pa, &a);
    if (workspace_bytes(pb, &a) > B.ws_bytes) B.ws_bytes = workspace_bytes(pb, &a);
    B.ws = B.ws_bytes ? dev_alloc(B.ws_bytes, what) : NULL;
  }

  /* each distinct row alone, the plan choosing its tiles */
  bq__linear_force_config = -1;
  unsigned char *alone = host_alloc((size_t)R * yrow), *got = host_alloc((size_t)(MAX_M + 1) * yrow);
  BQ_OK(bq_memset(dalone, 0xff, (size_t)R * yrow), what);
  for (int64_t r = 0; r < R; r++) lin_run(&B, pa, r, 1, dalone + (size_t)r * yrow, what);
  BQ_OK(bq_synchronize(NULL), what);
  BQ_OK(bq_memcpy_to_host(alone, dalone, (size_t)R * yrow), what);
  for (int64_t i = 0; i < R * LIN_N; i++)
    cr_assert(!ref_elem_is_nan(c->out, alone, i), "row %lld alone: y[%lld] is NaN (left unwritten?) | %s",
              (long long)(i / LIN_N), (long long)(i % LIN_N), what);

  /* the batches, under each tile configuration */
  struct { bq_plan *p; int force; const char *name; } variants[5] = {
    {pa, -1, "default plan, tiles chosen by M"},
    {pa, BQ__GEMM_LARGE, "default plan, 128 x 256 tiles forced"},
    {pa, BQ__GEMV64, "default plan, weight streaming in passes of 64 rows forced"},
    {pb, -1, "mma.sync module, tiles chosen by M"},
    {pb, BQ__GEMM_LARGE, "mma.sync module, 128 x 256 tiles forced"},
  };
  const int nv = pa->linear.wgmma ? 5 : 3; /* without wgmma both plans are the same module */
  for (int v = 0; v < nv; v++) {
    bq__linear_force_config = variants[v].force;
    for (int bi = 0; bi < N_BATCHES; bi++) {
      const int64_t M = batch_m(bi);
      BQ_OK(bq_memset(B.dy, 0xff, (size_t)(M + 1) * yrow), what);
      lin_run(&B, variants[v].p, 0, M, B.dy, what);
      BQ_OK(bq_synchronize(NULL), what);
      BQ_OK(bq_memcpy_to_host(got, B.dy, (size_t)(M + 1) * yrow), what);
      check_batch(c->out, "y", alone, got, M, LIN_N, 0xff, variants[v].name, what);
    }
  }
  bq__linear_force_config = -1;

  bq_plan_destroy(pa);
  bq_plan_destroy(pb);
  bq_free(B.dx); bq_free(B.dw); bq_free(B.dwsc); bq_free(B.dbias); bq_free(B.dsa); bq_free(B.dzps);
  bq_free(B.dwsum); bq_free(B.dy); bq_free(dalone);
  if (B.ws) bq_free(B.ws);
  free(x); free(bias); free(w); free(wsc); free(sa); free(zps); free(wsum); free(alone); free(got);
}

static lcase lin(bq_op op, bq_granularity gran, bq_dtype T, bq_dtype out, bq_dtype I, int asym, int bias)
{
  lcase c = {op, gran, T, out, I, asym, bias};
  return c;
}

Test(batch, quantized_linear_symmetric)
{
  gpu_begin();
  lcase a = lin(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F16, BQ_S8, 0, 1);
  lcase b = lin(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_BF16, BQ_S8, 0, 0);
  batch_linear(&a);
  batch_linear(&b);
}

Test(batch, quantized_linear_asymmetric)
{
  gpu_begin();
  lcase a = lin(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F16, BQ_F32, BQ_U8, 1, 1);
  lcase b = lin(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_BF16, BQ_S8, 1, 0);
  batch_linear(&a);
  batch_linear(&b);
}

Test(batch, smoothquant_per_tensor)
{
  gpu_begin();
  lcase a = lin(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F16, BQ_F16, BQ_S8, 0, 1);
  lcase b = lin(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F32, BQ_F32, BQ_U8, 1, 1);
  batch_linear(&a);
  batch_linear(&b);
}

Test(batch, smoothquant_per_token)
{
  gpu_begin();
  lcase a = lin(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_BF16, BQ_S8, 0, 1);
  lcase b = lin(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32, BQ_S8, 1, 0);
  batch_linear(&a);
  batch_linear(&b);
}

/* ==== dynamic quantize per token ============================================================ */

typedef struct dcase {
  bq_dtype T, I;
  int asym, qmin, qmax; /* qmin == qmax == 0: the int type's range */
  int64_t cols;
} dcase;

typedef struct dbufs {
  bq_plan *p;
  unsigned char *dx, *dy, *ds, *dz; /* x [MAX_M, cols]; outputs of a batch (plus a guard row) */
  unsigned char *ay, *as, *az;      /* outputs of the alone rows [R] */
  size_t ts;
  int64_t cols;
  int asym;
} dbufs;

static void dyn_run(const dbufs *B, int64_t r0, int64_t M, void *y, void *s, void *z, const char *what)
{
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = B->dx + (size_t)(r0 * B->cols) * B->ts;
  a.y = y;
  a.rows = M;
  a.cols = B->cols;
  a.out_scales = s;
  a.out_zero_points = B->asym ? (int32_t *)z : NULL;
  cr_assert_eq(workspace_bytes(B->p, &a), 0, "per token needs no workspace | %s", what);
  BQ_OK(bq_plan_run(B->p, &a, NULL, 0, NULL), what);
}

/* Every distinct row alone, outputs poisoned with `poison` first; fetched into y, s, z. */
static void dyn_alone(const dbufs *B, unsigned char poison, unsigned char *y, unsigned char *s, unsigned char *z,
                      const char *what)
{
  const size_t cols = (size_t)B->cols;
  BQ_OK(bq_memset(B->ay, poison, R * cols), what);
  BQ_OK(bq_memset(B->as, poison, R * 4), what);
  BQ_OK(bq_memset(B->az, poison, R * 4), what);
  for (int64_t r = 0; r < R; r++) dyn_run(B, r, 1, B->ay + r * cols, B->as + 4 * r, B->az + 4 * r, what);
  BQ_OK(bq_synchronize(NULL), what);
  BQ_OK(bq_memcpy_to_host(y, B->ay, R * cols), what);
  BQ_OK(bq_memcpy_to_host(s, B->as, R * 4), what);
  BQ_OK(bq_memcpy_to_host(z, B->az, R * 4), what);
}

static void gen_row(bq_dtype T, unsigned char *x, int64_t r, int64_t cols)
{
  const int kind = (int)(rnd() % 10); /* 0 zero, 1 positive, 2 negative, 3 constant, 4 with NaN, else signed */
  const double mag = ldexp(1.0, T == BQ_F16 ? (int)rnd_range(-8, 8) : (int)rnd_range(-20, 20));
  const double cst = (rnd_unit() - 0.5) * mag;
  for (int64_t k = 0; k < cols; k++) {
    const int64_t e = r * cols + k;
    double v = kind == 0 ? 0.0 : kind == 1 ? rnd_unit() * mag : kind == 2 ? -rnd_unit() * mag
               : kind == 3 ? cst : (rnd_unit() - 0.5) * mag;
    if (kind == 4 && rnd() % 7 == 0) v = NAN;
    store_any(T, x, e, v);
  }
}

static void batch_dynamic(const dcase *c)
{
  char what[384];
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = BQ_PER_TOKEN;
  d.float_type = c->T;
  d.int_type = c->I;
  d.qmin = c->qmin;
  d.qmax = c->qmax;
  d.scale_type = BQ_F32;
  d.asymmetric = c->asym;
  snprintf(what, sizeof what, "seed=0x%llx dynamic per_token T=%s I=%s %s q=[%d,%d] scale=f32 cols=%lld",
           (unsigned long long)g_seed, ref_dtype_name(c->T), ref_dtype_name(c->I), c->asym ? "asym" : "sym", c->qmin,
           c->qmax, (long long)c->cols);

  dbufs B;
  memset(&B, 0, sizeof B);
  B.ts = ref_dtype_size(c->T);
  B.cols = c->cols;
  B.asym = c->asym;
  B.p = plan_get(&d, what);
  const size_t cols = (size_t)c->cols, xrow = cols * B.ts;

  unsigned char *x = host_alloc((size_t)MAX_M * xrow);
  for (int64_t r = 0; r < R; r++) gen_row(c->T, x, r, c->cols);
  replicate_rows(x, xrow);
  B.dx = dev_alloc((size_t)MAX_M * xrow, what);
  B.dy = dev_alloc((size_t)(MAX_M + 1) * cols, what);
  B.ds = dev_alloc(4 * (MAX_M + 1), what);
  B.dz = dev_alloc(4 * (MAX_M + 1), what);
  B.ay = dev_alloc(R * cols, what);
  B.as = dev_alloc(4 * R, what);
  B.az = dev_alloc(4 * R, what);
  BQ_OK(bq_memcpy_to_device(B.dx, x, (size_t)MAX_M * xrow), what);

  /* the alone rows, twice under two poisons: equal, so every element was written */
  unsigned char *ay = host_alloc(R * cols), *as = host_alloc(4 * R), *az = host_alloc(4 * R);
  unsigned char *ay2 = host_alloc(R * cols), *as2 = host_alloc(4 * R), *az2 = host_alloc(4 * R);
  dyn_alone(&B, 0xa5, ay, as, az, what);
  dyn_alone(&B, 0x5a, ay2, as2, az2, what);
  for (int64_t r = 0; r < R; r++) {
    int64_t j = first_diff(c->I, ay + r * cols, ay2 + r * cols, c->cols);
    cr_assert(j < 0, "row %lld alone: y[%lld] differs between runs under two poisons (0x%02x, 0x%02x): unwritten "
              "or not deterministic | %s", (long long)r, (long long)j, ay[r * cols + j], ay2[r * cols + j], what);
    cr_assert(!memcmp(as + 4 * r, as2 + 4 * r, 4), "row %lld alone: the scale differs between runs under two poisons "
              "| %s", (long long)r, what);
    if (c->asym)
      cr_assert(!memcmp(az + 4 * r, az2 + 4 * r, 4), "row %lld alone: the zero point differs between runs under two "
                "poisons | %s", (long long)r, what);
    else
      for (int b = 0; b < 4; b++)
        cr_assert(az[4 * r + b] == 0xa5 && az2[4 * r + b] == 0x5a, "row %lld alone: a symmetric plan wrote a zero "
                  "point | %s", (long long)r, what);
  }

  unsigned char *gy = host_alloc((size_t)(MAX_M + 1) * cols), *gs = host_alloc(4 * (MAX_M + 1));
  unsigned char *gz = host_alloc(4 * (MAX_M + 1));
  static const unsigned char poisons[2] = {0xa5, 0x5a};
  for (int bi = 0; bi < N_BATCHES; bi++)
    for (int pi = 0; pi < 2; pi++) {
      const int64_t M = batch_m(bi);
      const unsigned char P = poisons[pi];
      const char *variant = pi ? "outputs poisoned with 0x5a" : "outputs poisoned with 0xa5";
      BQ_OK(bq_memset(B.dy, P, (size_t)(M + 1) * cols), what);
      BQ_OK(bq_memset(B.ds, P, 4 * (size_t)(M + 1)), what);
      BQ_OK(bq_memset(B.dz, P, 4 * (size_t)(M + 1)), what);
      dyn_run(&B, 0, M, B.dy, B.ds, B.dz, what);
      BQ_OK(bq_synchronize(NULL), what);
      BQ_OK(bq_memcpy_to_host(gy, B.dy, (size_t)(M + 1) * cols), what);
      BQ_OK(bq_memcpy_to_host(gs, B.ds, 4 * (size_t)(M + 1)), what);
      BQ_OK(bq_memcpy_to_host(gz, B.dz, 4 * (size_t)(M + 1)), what);
      check_batch(c->I, "y", ay, gy, M, c->cols, P, variant, what);
      check_batch(BQ_F32, "scales", as, gs, M, 1, P, variant, what);
      if (c->asym) {
        check_batch(BQ_S32, "zero_points", az, gz, M, 1, P, variant, what);
      } else {
        for (size_t b = 0; b < 4 * (size_t)(M + 1); b++)
          cr_assert_eq(gz[b], P, "a symmetric plan wrote zero points (M = %lld) | %s", (long long)M, what);
      }
    }

  bq_free(B.dx); bq_free(B.dy); bq_free(B.ds); bq_free(B.dz); bq_free(B.ay); bq_free(B.as); bq_free(B.az);
  free(x); free(ay); free(as); free(az); free(ay2); free(as2); free(az2); free(gy); free(gs); free(gz);
}

static dcase dyn(bq_dtype T, bq_dtype I, int asym, int qmin, int qmax, int64_t cols)
{
  dcase c = {T, I, asym, qmin, qmax, cols};
  return c;
}

/* rows of a warp (256 elements), of a block (odd lengths, rows off the 16-byte grid) */
Test(batch, dynamic_symmetric)
{
  gpu_begin();
  dcase a = dyn(BQ_F32, BQ_S8, 0, 0, 0, 256);
  dcase b = dyn(BQ_F64, BQ_U8, 0, 1, 100, 4095);
  batch_dynamic(&a);
  batch_dynamic(&b);
}

Test(batch, dynamic_asymmetric)
{
  gpu_begin();
  dcase a = dyn(BQ_BF16, BQ_U8, 1, 0, 0, 256);
  dcase b = dyn(BQ_F16, BQ_S8, 1, -7, 7, 1001);
  batch_dynamic(&a);
  batch_dynamic(&b);
}

/* f16 and bf16 rows longer than 256 threads' 4 accesses: the long-row kernel */
Test(batch, dynamic_long_rows)
{
  gpu_begin();
  dcase a = dyn(BQ_BF16, BQ_S8, 0, 0, 0, 9000);
  dcase b = dyn(BQ_F16, BQ_U8, 1, 0, 0, 9003);
  batch_dynamic(&a);
  batch_dynamic(&b);
}
