/* tests/test_gpu_linear.c - the W8A8 linear layers on the GPU against the CPU reference
   (tests/reference_linear.h), bit for bit.

   Coverage: QuantizedLinear (f32/f64/f16/bf16 activations quantized per token on the
   device) and SmoothQuantLinear (int8 activations, per-tensor or per-token scales) x
   output types f32/f64/f16/bf16 x bias / no bias x symmetric / asymmetric (s8 and u8
   activations) x weight-scale types; M = 1, 7, 16, 17, 33, 64, 128, 1000 with odd N and K
   that are not multiples of any tile; each tile configuration forced in turn (weight
   streaming of 16, 32 and 64 rows, 128x256 tiles); K = 0; K at the int32 overflow bound with extreme values; strided
   activations and outputs; misaligned activations, weights and outputs; the weight-sums
   helper.

   The output allocation is poisoned with 0xA5 and compared whole: guard elements before
   and after and the gaps between strided rows must keep the poison. Inputs are drawn
   fresh each run (the seed is in every failure message; BQ_TEST_SEED=<n> replays one).

   Without a usable CUDA driver/device every test is skipped. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_linear.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_util.h"

static void linear_begin(void)
{
  gpu_begin();
  bq__linear_force_config = -1;
}

#undef BQ_OK /* gpu_util.h's: this suite's takes one message argument */
#define BQ_OK(call, what)                                                                    \
  do {                                                                                       \
    bq_status st_ = (call);                                                                  \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s | %s", #call, bq_status_name(st_),          \
                 bq_last_error(), (what));                                                   \
  } while (0)

static void *dev_alloc(size_t bytes)
{
  void *p = NULL;
  BQ_OK(bq_malloc(&p, bytes), "device allocation");
  return p;
}

/* ==== one case ========================================================================= */

typedef struct lin_case {
  bq_op op;              /* BQ_QUANTIZED_LINEAR or BQ_SMOOTHQUANT_LINEAR */
  bq_granularity gran;   /* SmoothQuant: per tensor or per token */
  bq_dtype T, out, st, I;
  int asym, bias, qmin, qmax;
  int64_t M, N, K, lda_pad, ldy_pad;
  int x_off, y_off, w_off; /* misalignment: elements of x (bytes for int8), of y, bytes of w */
  int extreme;           /* 1: activations at the range's ends, weights -128 (largest |acc|) */
  int force;             /* a BQ__GEMM_* tile configuration, or -1 */
  int graph;             /* 1: run through a CUDA graph captured on a stream of its own */
} lin_case;

static lin_case base_case(bq_op op, bq_dtype out)
{
  lin_case c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.gran = op == BQ_QUANTIZED_LINEAR ? BQ_PER_TOKEN : BQ_PER_TENSOR;
  c.T = out;
  c.out = out;
  c.st = BQ_F32;
  c.I = BQ_S8;
  c.force = -1;
  return c;
}

static void describe(const lin_case *c, char *buf, size_t n)
{
  snprintf(buf, n, "seed=0x%llx %s %s T=%s out=%s scale=%s I=%s %s bias=%d q=[%d,%d] M=%lld N=%lld K=%lld "
           "lda+%lld ldy+%lld x_off=%d y_off=%d w_off=%d extreme=%d force=%d graph=%d",
           (unsigned long long)g_seed, c->op == BQ_QUANTIZED_LINEAR ? "quantized_linear" : "smoothquant_linear",
           c->gran == BQ_PER_TOKEN ? "per_token" : "per_tensor", ref_dtype_name(c->T), ref_dtype_name(c->out),
           ref_dtype_name(c->st), ref_dtype_name(c->I), c->asym ? "asym" : "sym", c->bias, c->qmin, c->qmax,
           (long long)c->M, (long long)c->N, (long long)c->K, (long long)c->lda_pad, (long long)c->ldy_pad, c->x_off,
           c->y_off, c->w_off, c->extreme, c->force, c->graph);
}

static void store_any(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

/* a positive scale: a power of two times [1, 2) */
static double rnd_scale(int lo_exp, int hi_exp) { return ldexp(1.0 + rnd_unit(), (int)rnd_range(lo_exp, hi_exp)); }

/* the plan's descriptor of a case */
static bq_desc lin_desc(const lin_case *c)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = c->op;
  d.granularity = c->op == BQ_SMOOTHQUANT_LINEAR ? c->gran : BQ_GRANULARITY_DEFAULT; /* QuantizedLinear: the default */
  d.float_type = c->T;
  d.out_type = c->out;
  d.scale_type = c->st;
  d.int_type = c->I;
  d.asymmetric = c->asym;
  d.qmin = c->qmin;
  d.qmax = c->qmax;
  return d;
}

static void run_case(const lin_case *c0)
{
  lin_case c = *c0;
  char what[512];
  bq_desc d = lin_desc(&c);
  if (!c.qmin && !c.qmax) {
    c.qmin = c.I == BQ_S8 ? -128 : 0;
    c.qmax = c.I == BQ_S8 ? 127 : 255;
  }
  describe(&c, what, sizeof what);
  bq_plan *plan = plan_get(&d, what);
  bq__linear_force_config = c.force;

  const int ql = c.op == BQ_QUANTIZED_LINEAR;
  const int64_t M = c.M, N = c.N, K = c.K, lda = K + c.lda_pad, ldy = N + c.ldy_pad;
  const size_t xs = ql ? ref_dtype_size(c.T) : 1, ys = ref_dtype_size(c.out), ss = ref_dtype_size(c.st);
  /* y_guard: a multiple of 8, so that aligned outputs take the 8-element stores */
  const int64_t x_elems = M * lda, y_guard = 40, y_total = y_guard + M * ldy + y_guard;
  int64_t i, j;

  /* host inputs */
  unsigned char *x = calloc((size_t)(x_elems ? x_elems : 1), xs);
  int8_t *w = malloc((size_t)(N * K > 0 ? N * K : 1));
  unsigned char *wsc = malloc((size_t)(N ? N : 1) * ss), *bias = malloc((size_t)(N ? N : 1) * ys);
  unsigned char *sa = malloc((size_t)(M ? M : 1) * ss);
  int32_t *zps = malloc((size_t)(M ? M : 1) * 4), *wsum = malloc((size_t)(N ? N : 1) * 4);
  int32_t zp_scalar = 0;
  double sa_scalar = rnd_scale(-12, -4);
  for (i = 0; i < N * K; i++) w[i] = c.extreme ? (int8_t)-128 : (int8_t)rnd_range(-128, 127);
  for (i = 0; i < N; i++) store_any(c.st, wsc, i, rnd_scale(-10, -4));
  for (i = 0; i < N; i++) store_any(c.out, bias, i, (rnd_unit() - 0.5) * ldexp(1.0, (int)rnd_range(-4, 6)));
  for (i = 0; i < M; i++) {
    store_any(c.st, sa, i, rnd_scale(-12, -4));
    zps[i] = c.asym ? (int32_t)rnd_range(c.qmin, c.qmax) : 0;
  }
  if (c.asym && !ql) zp_scalar = (int32_t)rnd_range(c.qmin, c.qmax);
  for (i = 0; i < M; i++) {
    double mag = ldexp(1.0, (int)rnd_range(-6, 6));
    int kind = (int)(rnd() % 8); /* 0: all zero, 1: all positive, else signed */
    for (j = 0; j < lda; j++) {
      int64_t e = i * lda + j;
      if (ql) {
        double v = kind == 0 ? 0.0 : kind == 1 ? rnd_unit() * mag : (rnd_unit() - 0.5) * mag;
        store_any(c.T, x, e, v);
      } else {
        int32_t q = c.extreme ? ((rnd() & 1) ? c.qmin : c.qmax) : (int32_t)rnd_range(c.qmin, c.qmax);
        if (c.extreme && c.qmin < 0 && -c.qmin > c.qmax) q = c.qmin; /* the largest |a| */
        if (c.extreme && c.qmin >= 0) q = c.qmax;
        ref_store_int(c.I, x, e, q);
      }
    }
  }

  /* device buffers, misaligned by the case's offsets, the output poisoned */
  unsigned char *dx = dev_alloc((size_t)x_elems * xs + 64), *dw = dev_alloc((size_t)(N * K) + 64);
  unsigned char *dwsc = dev_alloc((size_t)N * ss + 16), *dbias = dev_alloc((size_t)N * ys + 16);
  unsigned char *dsa = dev_alloc((size_t)M * ss + 16), *dy = dev_alloc((size_t)y_total * ys + 64);
  int32_t *dzps = dev_alloc((size_t)M * 4 + 16), *dwsum = dev_alloc((size_t)N * 4 + 16);
  unsigned char *px = dx + (size_t)c.x_off * xs, *pw = dw + c.w_off, *py = dy + (size_t)(y_guard + c.y_off) * ys;
  BQ_OK(bq_memcpy_to_device(px, x, (size_t)x_elems * xs), what);
  BQ_OK(bq_memcpy_to_device(pw, w, (size_t)(N * K)), what);
  BQ_OK(bq_memcpy_to_device(dwsc, wsc, (size_t)N * ss), what);
  BQ_OK(bq_memcpy_to_device(dbias, bias, (size_t)N * ys), what);
  BQ_OK(bq_memcpy_to_device(dsa, sa, (size_t)M * ss), what);
  BQ_OK(bq_memcpy_to_device(dzps, zps, (size_t)M * 4), what);
  BQ_OK(bq_memset(dy, 0xA5, (size_t)y_total * ys + 64), what);

  /* the weight sums on the device, checked against the CPU */
  refl_weight_sums(w, N, K, wsum);
  if (c.asym) {
    bq_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.op = BQ_LINEAR_WEIGHT_SUMS;
    bq_plan *sp = plan_get(&sd, what);
    bq_args sa_args;
    memset(&sa_args, 0, sizeof sa_args);
    sa_args.w = pw;
    sa_args.n = N;
    sa_args.cols = K;
    sa_args.y = dwsum;
    BQ_OK(bq_memset(dwsum, 0xA5, (size_t)N * 4), what);
    BQ_OK(bq_plan_run(sp, &sa_args, NULL, 0, NULL), what);
    int32_t *got = malloc((size_t)(N ? N : 1) * 4);
    BQ_OK(bq_memcpy_to_host(got, dwsum, (size_t)N * 4), what);
    for (i = 0; i < N; i++)
      cr_assert_eq(got[i], wsum[i], "weight sum %lld: expected %d got %d | %s", (long long)i, wsum[i], got[i], what);
    free(got);
  }

  /* run */
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = px;
  a.y = py;
  a.rows = M;
  a.cols = K;
  a.n = N;
  a.x_row_stride = lda;
  a.y_row_stride = ldy;
  a.w = pw;
  a.w_scales = dwsc;
  a.bias = c.bias ? dbias : NULL;
  a.w_sums = c.asym ? dwsum : NULL;
  if (!ql) {
    if (c.gran == BQ_PER_TOKEN) {
      a.scales = dsa;
      a.zero_points = c.asym ? dzps : NULL;
    } else {
      a.scale = sa_scalar;
      a.zero_point = zp_scalar;
    }
  }
  if (K == 0) { /* y = bias: nothing else may be read, so pass nothing else */
    a.x = NULL;
    a.w = NULL;
    a.scales = NULL;
    a.zero_points = NULL;
    a.w_sums = NULL;
  }
  BQ_OK(bq_plan_can_implement(plan, &a), what);
  size_t ws_bytes = 0;
  BQ_OK(bq_plan_workspace_size(plan, &a, &ws_bytes), what);
  void *ws = ws_bytes ? dev_alloc(ws_bytes) : NULL;
  if (ws) BQ_OK(bq_memset(ws, 0x5A, ws_bytes), what);
  if (c.graph) { /* captured (running nothing), then replayed twice */
    const bq__driver_api *drv = bq__driver_get();
    bq__CUstream s = NULL;
    bq__CUgraph gr = NULL;
    bq__CUgraphExec ex = NULL;
    cr_assert_eq(drv->cuStreamCreate(&s, 0), 0, "%s", what);
    cr_assert_eq(drv->cuStreamBeginCapture(s, BQ__CU_STREAM_CAPTURE_MODE_GLOBAL), 0, "%s", what);
    bq_status st = bq_plan_run(plan, &a, ws, ws_bytes, s);
    int r = drv->cuStreamEndCapture(s, &gr);
    cr_assert_eq(st, BQ_SUCCESS, "run under capture: %s | %s", bq_last_error(), what);
    cr_assert_eq(r, 0, "cuStreamEndCapture -> %d | %s", r, what);
    cr_assert_eq(drv->cuGraphInstantiateWithFlags(&ex, gr, 0), 0, "%s", what);
    for (int rep = 0; rep < 2; rep++) {
      cr_assert_eq(drv->cuGraphLaunch(ex, s), 0, "%s", what);
      cr_assert_eq(drv->cuStreamSynchronize(s), 0, "%s", what);
    }
    drv->cuGraphExecDestroy(ex);
    drv->cuGraphDestroy(gr);
    drv->cuStreamDestroy(s);
  } else {
    BQ_OK(bq_plan_run(plan, &a, ws, ws_bytes, NULL), what);
    BQ_OK(bq_synchronize(NULL), what);
  }
  unsigned char *got = malloc((size_t)y_total * ys);
  BQ_OK(bq_memcpy_to_host(got, py - y_guard * ys, (size_t)y_total * ys), what);

  /* the reference */
  unsigned char *exp = malloc((size_t)y_total * ys);
  memset(exp, 0xA5, (size_t)y_total * ys);
  refl_problem P;
  memset(&P, 0, sizeof P);
  P.m = M;
  P.n = N;
  P.k = K;
  P.ldy = ldy;
  P.a_type = c.I;
  P.w = w;
  P.scale_type = c.st;
  P.w_scales = wsc;
  P.out_type = c.out;
  P.bias = c.bias ? bias : NULL;
  P.wsum = wsum;
  P.y = exp + y_guard * ys;
  unsigned char *aq = NULL;
  float *qs = NULL;
  int32_t *qz = NULL;
  if (ql) {
    aq = calloc((size_t)(M * K > 0 ? M * K : 1), 1);
    qs = calloc((size_t)(M ? M : 1), 4);
    qz = calloc((size_t)(M ? M : 1), 4);
    cr_assert_eq(refl_quantize_activations(&P, c.T, c.I, d.qmin, d.qmax, c.asym, x, lda, aq, qs, qz), 0,
                 "dynamic reference | %s", what);
  } else {
    P.a = x;
    P.lda = lda;
    P.sa_row = c.gran == BQ_PER_TOKEN;
    P.sa = sa;
    P.sa_scalar = c.out == BQ_F64 ? sa_scalar : (double)(float)sa_scalar;
    P.zp_mode = !c.asym ? 0 : c.gran == BQ_PER_TOKEN ? 2 : 1;
    P.zps = zps;
    P.zp_scalar = zp_scalar;
  }
  cr_assert_eq(refl_gemm(&P), 0, "reference: acc' does not fit int32 | %s", what);

  char msg[2048];
  size_t bad = ref_compare(c.out, exp, got, y_total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "%zu of %lld output elements differ (index from the front guard of %lld):\n%s| %s", bad,
               (long long)y_total, (long long)y_guard, msg, what);

  bq_free(dx); bq_free(dw); bq_free(dwsc); bq_free(dbias); bq_free(dsa); bq_free(dy); bq_free(dzps); bq_free(dwsum);
  if (ws) bq_free(ws);
  free(x); free(w); free(wsc); free(bias); free(sa); free(zps); free(wsum); free(got); free(exp);
  free(aq); free(qs); free(qz);
  bq__linear_force_config = -1;
}

/* ==== the matrices ======================================================================= */

static const bq_dtype FLOATS[4] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
static const int64_t MS[8] = {1, 7, 16, 17, 33, 64, 128, 1000};

static int64_t odd_dim(int64_t lo, int64_t hi) { return rnd_range(lo, hi) | 1; }

/* every (output type, bias, symmetry) on the M values in turn, odd N and K */
static void run_matrix(bq_op op, bq_granularity gran)
{
  int o, b, s, n = 0;
  for (o = 0; o < 4; o++)
    for (b = 0; b < 2; b++)
      for (s = 0; s < 2; s++, n++) {
        lin_case c = base_case(op, FLOATS[o]);
        c.gran = gran;
        c.T = FLOATS[(o + n) % 4];
        c.bias = b;
        c.asym = s;
        c.I = s && (n & 2) ? BQ_U8 : BQ_S8;
        c.st = (n % 3 == 0) ? BQ_F32 : (n % 3 == 1) ? BQ_BF16 : BQ_F16;
        if (c.out == BQ_F64 && n % 3 == 2) c.st = BQ_F64;
        c.M = MS[n % 8];
        c.N = odd_dim(1, c.M > 200 ? 150 : 300);
        c.K = odd_dim(1, c.M > 200 ? 300 : 700);
        run_case(&c);
      }
}

Test(linear, quantized_matrix) { linear_begin(); run_matrix(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN); }
Test(linear, smoothquant_per_tensor_matrix) { linear_begin(); run_matrix(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR); }
Test(linear, smoothquant_per_token_matrix) { linear_begin(); run_matrix(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN); }

Test(linear, every_m)
{
  linear_begin();
  for (int op = 0; op < 2; op++)
    for (int i = 0; i < 8; i++)
      for (int s = 0; s < 2; s++) {
        lin_case c = base_case(op ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR, BQ_F16);
        c.gran = BQ_PER_TOKEN;
        c.bias = 1;
        c.asym = s;
        c.M = MS[i];
        c.N = 259;
        c.K = 515;
        run_case(&c);
      }
}

/* each tile configuration, with aligned K (the cp.async path) and odd K, edges in M and N */
Test(linear, tile_configurations)
{
  linear_begin();
  static const int cfgs[4] = {BQ__GEMM_LARGE, BQ__GEMV, BQ__GEMV32, BQ__GEMV64};
  for (int i = 0; i < 4; i++)
    for (int odd = 0; odd < 2; odd++)
      for (int s = 0; s < 2; s++) {
        lin_case c = base_case(s ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR, s ? BQ_BF16 : BQ_F32);
        c.gran = BQ_PER_TOKEN;
        c.force = cfgs[i];
        c.bias = 1;
        c.asym = odd;
        c.M = bq__gemv_rows(cfgs[i]) ? bq__gemv_rows(cfgs[i]) - odd * 3 : 300 + odd * 19;
        c.N = 520 + odd * 13;
        c.K = odd ? 1001 : 4096 + 128 * 3; /* aligned: 9 tiles of 512 bytes, past weight streaming's 2 to 4 stages */
        run_case(&c);
      }
}

/* QuantizedLinear with weight streaming (M <= 64, and up to 256 in passes) starts that
   grid while the activations' kernel still runs (programmatic dependent launch; sm_90 and
   a 12.3 driver or newer; the 128 x 256 tiles wait as usual): the plan says so where it
   should, and long rows (K = 16384 + 8, f32 activations: the activations' kernel at its
   longest a row) come out bit for bit, each shape twice with fresh data; so do runs
   captured into CUDA graphs and replayed */
Test(linear, quantized_overlap)
{
  linear_begin();
  bq__CUcontext ctx;
  bq__device_info info;
  BQ_OK(bq__current_device(0, &ctx, &info), "device");
  const char *env = getenv("BARACUDA_QUANT_PDL");
  const int want = info.sm >= 90 && bq__drv.version >= 12030 && !(env && !strcmp(env, "0"));
  static const int64_t ms[6] = {1, 5, 16, 40, 64, 200};
  for (int i = 0; i < 6; i++)
    for (int rep = 0; rep < 2; rep++) {
      lin_case c = base_case(BQ_QUANTIZED_LINEAR, i & 1 ? BQ_BF16 : BQ_F16);
      c.T = BQ_F32;
      c.bias = rep;
      c.asym = (i + rep) & 1;
      c.M = ms[i];
      c.N = 301 + 2 * i;
      c.K = 16384 + 8;
      run_case(&c);
    }
  /* and through CUDA graphs: the overlapped launch captures as a programmatic edge */
  for (int i = 0; i < 3; i++) {
    lin_case c = base_case(BQ_QUANTIZED_LINEAR, BQ_BF16);
    c.T = i == 1 ? BQ_F16 : BQ_BF16;
    c.bias = 1;
    c.asym = i == 2;
    c.M = i == 0 ? 1 : i == 1 ? 16 : 130;
    c.N = 517;
    c.K = 4096 + 16;
    c.graph = 1;
    run_case(&c);
  }
  lin_case pc = base_case(BQ_QUANTIZED_LINEAR, BQ_F16);
  pc.T = BQ_F32;
  bq_desc d = lin_desc(&pc);
  bq_plan *p = plan_get(&d, "quantized_overlap");
  cr_assert_eq(p->linear.pdl, want, "plan.linear.pdl = %d on sm_%d, driver %d", p->linear.pdl, info.sm, bq__drv.version);
}

/* weight streaming in passes of 64 rows, and the automatic choice around its limits */
Test(linear, streaming_passes)
{
  linear_begin();
  static const int64_t ms[] = {65, 100, 129, 200, 256, 257};
  for (int i = 0; i < 6; i++)
    for (int f = 0; f < 2; f++) {
      lin_case c = base_case(i & 1 ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR, i & 2 ? BQ_F32 : BQ_F16);
      c.gran = BQ_PER_TOKEN;
      c.force = f ? BQ__GEMV64 : -1;
      c.bias = 1;
      c.asym = i & 1;
      c.M = ms[i];
      c.N = 333;
      c.K = 4096 + 48;
      run_case(&c);
    }
}

Test(linear, k_zero)
{
  linear_begin();
  for (int op = 0; op < 2; op++)
    for (int b = 0; b < 2; b++)
      for (int i = 0; i < 4; i++) {
        lin_case c = base_case(op ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR, FLOATS[i]);
        c.bias = b;
        c.asym = i & 1;
        c.M = i < 2 ? 5 : 70;
        c.N = 33;
        c.K = 0;
        run_case(&c);
      }
}

/* K at the validation bound: the largest |acc| that must still be exact */
Test(linear, k_at_overflow_bound)
{
  linear_begin();
  /* s8 symmetric, full range: K * 128 * 128 < 2^31 */
  lin_case c = base_case(BQ_SMOOTHQUANT_LINEAR, BQ_F32);
  c.extreme = 1;
  c.M = 3;
  c.N = 5;
  c.K = 131071;
  run_case(&c);
  c.M = 17; /* the tiled path too */
  c.N = 9;
  c.force = BQ__GEMM_LARGE;
  run_case(&c);
  c.force = -1;
  /* u8 asymmetric: K * 255 * 128 < 2^31 */
  c = base_case(BQ_SMOOTHQUANT_LINEAR, BQ_F64);
  c.I = BQ_U8;
  c.asym = 1;
  c.gran = BQ_PER_TOKEN;
  c.extreme = 1;
  c.M = 20;
  c.N = 7;
  c.K = 65793;
  run_case(&c);
  /* QuantizedLinear with a long K */
  c = base_case(BQ_QUANTIZED_LINEAR, BQ_F16);
  c.M = 2;
  c.N = 3;
  c.K = 131071;
  c.bias = 1;
  run_case(&c);
}

Test(linear, strided_and_misaligned)
{
  linear_begin();
  for (int n = 0; n < 16; n++) {
    lin_case c = base_case(n & 1 ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR, FLOATS[n % 4]);
    c.gran = n & 2 ? BQ_PER_TOKEN : (c.op == BQ_SMOOTHQUANT_LINEAR ? BQ_PER_TENSOR : BQ_PER_TOKEN);
    c.T = FLOATS[(n / 4) % 4];
    c.bias = n & 4 ? 1 : 0;
    c.asym = n & 8 ? 1 : 0;
    c.M = MS[n % 8];
    c.N = odd_dim(9, 200);
    c.K = n & 4 ? odd_dim(17, 400) : 64 * rnd_range(1, 6);
    c.lda_pad = rnd_range(0, 40);
    c.ldy_pad = rnd_range(1, 20);
    c.x_off = (int)rnd_range(0, 3);
    c.y_off = (int)rnd_range(0, 3);
    c.w_off = (int)rnd_range(0, 15);
    run_case(&c);
  }
}

Test(linear, narrow_ranges)
{
  linear_begin();
  for (int n = 0; n < 4; n++) {
    lin_case c = base_case(n & 1 ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR, BQ_BF16);
    c.gran = BQ_PER_TOKEN;
    c.asym = n >> 1;
    c.I = c.asym ? BQ_U8 : BQ_S8;
    c.qmin = c.asym ? 3 : -7;
    c.qmax = c.asym ? 200 : 7;
    c.bias = 1;
    c.M = 40;
    c.N = 77;
    c.K = 333;
    run_case(&c);
  }
}

Test(linear, weight_sums_shapes)
{
  linear_begin();
  static const int64_t ks[] = {0, 1, 15, 16, 17, 511, 512, 4097};
  for (int i = 0; i < 8; i++) {
    lin_case c = base_case(BQ_SMOOTHQUANT_LINEAR, BQ_F32);
    c.asym = 1;
    c.M = 3;
    c.N = 1 + 2 * i;
    c.K = ks[i];
    c.w_off = i & 3;
    run_case(&c);
  }
}

Test(linear, large_square)
{
  linear_begin();
  lin_case c = base_case(BQ_SMOOTHQUANT_LINEAR, BQ_F16);
  c.gran = BQ_PER_TOKEN;
  c.bias = 1;
  c.M = 1000;
  c.N = 1000;
  c.K = 1000;
  run_case(&c);
}

Test(linear, zero_size)
{
  linear_begin();
  for (int op = 0; op < 2; op++) {
    lin_case c = base_case(op ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR, BQ_F32);
    c.M = 0;
    c.N = 17;
    c.K = 33;
    run_case(&c);
    c.M = 5;
    c.N = 0;
    run_case(&c);
  }
}

/* The 128 x 256 tiles of one kind (force: BQ__GEMM_WGMMA or BQ__GEMM_LARGE): every output
   type, both activation types, symmetric and asymmetric, K with a tail and K longer than
   the pipeline, tiles at the edges of M and N, strided and misaligned operands (the
   copies' register path). */
static void tile_cases(int force)
{
  for (int n = 0; n < 16; n++) {
    lin_case c = base_case(n & 1 ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR, FLOATS[n % 4]);
    c.gran = n & 2 ? BQ_PER_TOKEN : (c.op == BQ_SMOOTHQUANT_LINEAR ? BQ_PER_TENSOR : BQ_PER_TOKEN);
    c.T = FLOATS[(n / 4) % 4];
    c.I = n & 4 ? BQ_U8 : BQ_S8;
    c.asym = (n >> 3) & 1;
    c.bias = n % 3 != 0;
    c.force = force;
    c.M = n < 8 ? 128 * (int64_t)rnd_range(1, 3) : odd_dim(65, 400);
    c.N = n < 8 ? 256 * (int64_t)rnd_range(1, 2) : odd_dim(17, 600);
    c.K = n < 4 ? 128 * (int64_t)rnd_range(1, 12) : odd_dim(1, 2000);
    if (n >= 12) {
      c.lda_pad = rnd_range(0, 40);
      c.ldy_pad = rnd_range(1, 20);
      c.x_off = (int)rnd_range(0, 3);
      c.y_off = (int)rnd_range(0, 3);
      c.w_off = (int)rnd_range(0, 15);
    }
    run_case(&c);
  }
}

/* The mma.sync tiles of an sm_90 (or other) module: BARACUDA_QUANT_WGMMA=0 asks for them
   on an sm_90 device, where the wgmma tiles are the default. */
Test(linear, mma_sync_tiles)
{
  linear_begin();
  setenv("BARACUDA_QUANT_WGMMA", "0", 1);
  bq_desc probe;
  memset(&probe, 0, sizeof probe);
  probe.op = BQ_SMOOTHQUANT_LINEAR;
  probe.float_type = BQ_F16;
  bq_plan *pp = plan_get(&probe, "mma.sync probe");
  cr_assert(!pp->linear.wgmma && !strstr(bq_plan_sku(pp), "wgmma") && !strstr(bq_plan_sku(pp), "sm_90a"), "%s",
            bq_plan_sku(pp));
  tile_cases(BQ__GEMM_LARGE);
}

/* The sm_90a warpgroup-MMA tiles, the default on an sm_90 device (skips elsewhere). */
Test(linear, wgmma_tiles)
{
  linear_begin();
  unsetenv("BARACUDA_QUANT_WGMMA");
  bq_desc probe;
  memset(&probe, 0, sizeof probe);
  probe.op = BQ_SMOOTHQUANT_LINEAR;
  probe.float_type = BQ_F16;
  bq_plan *pp = plan_get(&probe, "wgmma probe");
  if (!pp->linear.wgmma) cr_skip_test("the device is not sm_90: no wgmma tiles (SKU %s)", bq_plan_sku(pp));
  cr_assert(strstr(bq_plan_sku(pp), "+wgmma_m64n256k32.sm_90a"), "%s", bq_plan_sku(pp));
  tile_cases(BQ__GEMM_WGMMA);
  /* and the automatic choice: M beyond weight streaming takes the wgmma tiles */
  lin_case c = base_case(BQ_SMOOTHQUANT_LINEAR, BQ_BF16);
  c.gran = BQ_PER_TOKEN;
  c.bias = 1;
  c.M = 1000;
  c.N = 1000;
  c.K = 1000;
  run_case(&c);
}
