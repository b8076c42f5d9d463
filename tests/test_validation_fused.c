/* test_validation_fused.c - descriptor and argument validation of the fused producers
   (BQ_RMSNORM_QUANTIZE, BQ_GATED_QUANTIZE), on a machine with no GPU.

   As in test_validation.c: descriptors go through bq_plan_select (a valid one gets as far
   as the driver, which is pointed at a path that does not exist), bq_sku and
   bq__plan_init; arguments through a plan built by bq__plan_init, which has no kernel, so
   every invalid case is checked through both bq_plan_can_implement and bq_plan_run (same
   status, same message: the run launched nothing). Every message names the plan
   ("rmsnorm_quantize_per_token: ", "silu_mul_quantize_per_group_asymmetric: "), the field
   and its value. Written to /work/notes/fused_spec.md and the header's "FUSED PRODUCERS". */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include "host_util.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
static const bq_dtype FTS[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};

static void no_driver(void) {
  setenv("BARACUDA_QUANT_DRIVER", "/nonexistent/libcuda.so.1", 1);
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
}
TestSuite(fused_desc, .init = no_driver);
TestSuite(fused_args, .init = no_driver);
TestSuite(fused_sku, .init = no_driver);

static void clear_error(void) { bq__err_buf[0] = 0; }

static void check_msg(const char *prefix, const char *needle, const char *ctx, const char *who) {
  const char *m = bq_last_error();
  cr_assert(m && *m, "%s %s: no error message", ctx, who);
  if (prefix)
    cr_assert(strncmp(m, prefix, strlen(prefix)) == 0, "%s %s: message \"%s\" does not start with \"%s\"", ctx, who,
              m, prefix);
  cr_assert(strstr(m, needle) != NULL, "%s %s: message \"%s\" lacks \"%s\"", ctx, who, m, needle);
}

/* ---- the fused descriptors ------------------------------------------------------------- */
/* kinds: 0 RMSNorm, 1 SiLU-gated (activation left 0), 2 SiLU-gated (BQ_SILU spelled),
   3 GELU-tanh-gated */
#define NOPS 4
static bq_desc fdesc(int kind, bq_granularity g, bq_dtype ft, int asym) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = kind == 0 ? BQ_RMSNORM_QUANTIZE : BQ_GATED_QUANTIZE;
  d.activation = kind == 2 ? BQ_SILU : kind == 3 ? BQ_GELU_TANH : BQ_ACTIVATION_DEFAULT;
  d.granularity = g;
  d.float_type = ft;
  d.asymmetric = asym;
  return d;
}

static const char *op_base(const bq_desc *d) {
  if (d->op == BQ_RMSNORM_QUANTIZE) return "rmsnorm_quantize";
  return d->activation == BQ_GELU_TANH ? "gelu_tanh_mul_quantize" : "silu_mul_quantize";
}
static const char *gran_str(bq_granularity g) {
  return g == BQ_PER_TENSOR ? "per_tensor" : g == BQ_PER_GROUP ? "per_group" : g == BQ_PER_CHANNEL ? "per_channel"
                                                                                                   : "per_token";
}
/* "rmsnorm_quantize_per_token", "silu_mul_quantize_per_group_asymmetric" */
static void fname(const bq_desc *d, char *buf, size_t n) {
  snprintf(buf, n, "%s_%s%s", op_base(d), gran_str(d->granularity), d->asymmetric == 1 ? "_asymmetric" : "");
}
static void fprefix(const bq_desc *d, char *buf, size_t n) {
  char nm[96];
  fname(d, nm, sizeof nm);
  snprintf(buf, n, "%s: ", nm);
}

static void expect_desc_status(const bq_desc *d, bq_status want, const char *prefix, const char *needle,
                               const char *ctx) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  clear_error();
  bq_status st = bq_plan_select(d, &p);
  cr_assert_eq(st, want, "%s bq_plan_select: got %s (%s), want %s [%s]", ctx, bq_status_name(st), bq_last_error(),
               bq_status_name(want), needle);
  cr_assert_null(p, "%s: failed select left *plan set", ctx);
  check_msg(prefix, needle, ctx, "bq_plan_select");
  char buf[256];
  clear_error();
  st = bq_sku(d, 90, buf, sizeof buf);
  cr_assert_eq(st, want, "%s bq_sku: got %s (%s)", ctx, bq_status_name(st), bq_last_error());
  check_msg(prefix, needle, ctx, "bq_sku");
  bq_plan plan;
  clear_error();
  st = bq__plan_init(d, &plan);
  cr_assert_eq(st, want, "%s bq__plan_init: got %s (%s)", ctx, bq_status_name(st), bq_last_error());
  check_msg(prefix, needle, ctx, "bq__plan_init");
}
static void expect_desc_invalid(const bq_desc *d, const char *prefix, const char *needle, const char *ctx) {
  expect_desc_status(d, BQ_ERROR_INVALID_ARGUMENT, prefix, needle, ctx);
}

static void expect_desc_valid(const bq_desc *d, const char *ctx) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  clear_error();
  bq_status st = bq_plan_select(d, &p);
  cr_assert_eq(st, BQ_ERROR_NO_DRIVER, "%s: bq_plan_select got %s (%s), want BQ_ERROR_NO_DRIVER", ctx,
               bq_status_name(st), bq_last_error());
  cr_assert_null(p);
  char buf[256];
  st = bq_sku(d, 90, buf, sizeof buf);
  cr_assert_eq(st, BQ_SUCCESS, "%s: bq_sku: %s (%s)", ctx, bq_status_name(st), bq_last_error());
  bq_plan plan;
  st = bq__plan_init(d, &plan);
  cr_assert_eq(st, BQ_SUCCESS, "%s: bq__plan_init: %s (%s)", ctx, bq_status_name(st), bq_last_error());
}

static void ctx_of(const bq_desc *d, char *buf, size_t n) {
  char nm[96];
  fname(d, nm, sizeof nm);
  snprintf(buf, n, "[%s T=%d I=%d q[%d,%d] scale_type=%d act=%d]", nm, (int)d->float_type, (int)d->int_type, d->qmin,
           d->qmax, (int)d->scale_type, (int)d->activation);
}

/* every valid fused descriptor (ops x T x I x q-range x granularity x asymmetric x scale type) */
typedef struct fcombo {
  bq_desc d;
} fcombo;
#define MAX_FCOMBOS 4096
static size_t fused_combos(fcombo *out) {
  static const bq_granularity GR[] = {BQ_GRANULARITY_DEFAULT, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_TENSOR};
  static const int QR[][3] = {{BQ_DTYPE_DEFAULT, 0, 0}, {BQ_S8, 0, 0},      {BQ_S8, -7, 7}, {BQ_U8, 0, 0},
                              {BQ_U8, 3, 250},          {BQ_S8, -128, 127}, {BQ_E4M3, 0, 0}, {BQ_E5M2, 0, 0}};
  size_t n = 0;
  for (int k = 0; k < NOPS; k++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (size_t g = 0; g < NELEM(GR); g++)
        for (int asym = 0; asym < 2; asym++)
          for (size_t q = 0; q < NELEM(QR); q++)
            for (int st = 0; st < 3; st++) {
              if (GR[g] == BQ_PER_TENSOR && asym) continue;
              if (QR[q][0] == BQ_E4M3 || QR[q][0] == BQ_E5M2) { /* FP8: symmetric, no q-range */
                if (asym) continue;
              }
              /* per tensor: the host scale in C; scale_type left default, or f32 where C is f32 */
              if (GR[g] == BQ_PER_TENSOR && (st == 2 || (st == 1 && FTS[f] == BQ_F64))) continue;
              bq_desc d = fdesc(k, GR[g], FTS[f], asym);
              d.int_type = (bq_dtype)QR[q][0];
              d.qmin = QR[q][1];
              d.qmax = QR[q][2];
              d.scale_type = st == 0 ? BQ_DTYPE_DEFAULT : st == 1 ? BQ_F32 : FTS[f];
              cr_assert(n < MAX_FCOMBOS);
              out[n++].d = d;
            }
  return n;
}

/* ---- descriptors ------------------------------------------------------------------------- */
Test(fused_desc, every_valid_combination_reaches_the_driver) {
  static fcombo c[MAX_FCOMBOS];
  size_t n = fused_combos(c);
  for (size_t i = 0; i < n; i++) {
    char ctx[192];
    ctx_of(&c[i].d, ctx, sizeof ctx);
    expect_desc_valid(&c[i].d, ctx);
  }
  cr_assert(n > 1000, "%zu combinations", n);
}

/* the per tensor form: per tensor scale in the compute type (f64 for f64 data) */
Test(fused_desc, per_tensor_scale_type_is_the_compute_type) {
  for (int k = 0; k < NOPS; k++) {
    bq_desc d = fdesc(k, BQ_PER_TENSOR, BQ_F64, 0);
    d.scale_type = BQ_F64;
    expect_desc_valid(&d, "per tensor f64, scale_type f64");
  }
}

Test(fused_desc, defaults_normalize_as_documented) {
  for (int k = 0; k < NOPS; k++)
    for (size_t f = 0; f < NELEM(FTS); f++) {
      bq_desc d = fdesc(k, BQ_GRANULARITY_DEFAULT, FTS[f], 0);
      bq_plan plan;
      cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert_eq(plan.desc.granularity, BQ_PER_TOKEN, "the fused ops default to per token");
      cr_assert_eq(plan.desc.int_type, BQ_S8);
      cr_assert_eq(plan.desc.qmin, -128);
      cr_assert_eq(plan.desc.qmax, 127);
      cr_assert_eq(plan.desc.scale_type, BQ_F32, "dynamic scales default to f32");
      char want[96];
      bq_desc w = d;
      w.granularity = BQ_PER_TOKEN;
      fname(&w, want, sizeof want);
      cr_assert_str_eq(plan.name, want);
      /* the normalized desc is accepted again as it is, with the same SKU */
      bq_plan again;
      cr_assert_eq(bq__plan_init(&plan.desc, &again), BQ_SUCCESS, "%s", bq_last_error());
      char a[256], b[256];
      cr_assert_eq(bq_sku(&d, 90, a, sizeof a), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert_eq(bq_sku(&plan.desc, 90, b, sizeof b), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert_str_eq(a, b);
    }
}

Test(fused_desc, plan_names) {
  static const struct { int kind; bq_granularity g; int asym; const char *name; } cases[] = {
    {0, BQ_PER_TOKEN, 0, "rmsnorm_quantize_per_token"},
    {0, BQ_PER_TOKEN, 1, "rmsnorm_quantize_per_token_asymmetric"},
    {0, BQ_PER_GROUP, 0, "rmsnorm_quantize_per_group"},
    {0, BQ_PER_TENSOR, 0, "rmsnorm_quantize_per_tensor"},
    {1, BQ_PER_GROUP, 1, "silu_mul_quantize_per_group_asymmetric"},
    {2, BQ_PER_TOKEN, 0, "silu_mul_quantize_per_token"},
    {3, BQ_PER_TOKEN, 1, "gelu_tanh_mul_quantize_per_token_asymmetric"},
    {3, BQ_PER_TENSOR, 0, "gelu_tanh_mul_quantize_per_tensor"},
  };
  for (size_t i = 0; i < NELEM(cases); i++) {
    bq_desc d = fdesc(cases[i].kind, cases[i].g, BQ_BF16, cases[i].asym);
    bq_plan plan;
    cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s: %s", cases[i].name, bq_last_error());
    cr_assert_str_eq(plan.name, cases[i].name);
  }
}

/* desc.activation belongs to the gated op: any other op with it set is refused */
Test(fused_desc, activation_on_other_ops) {
  static const bq_op ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE,
                              BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR, BQ_LINEAR_WEIGHT_SUMS,
                              BQ_RMSNORM_QUANTIZE};
  static const int acts[] = {BQ_SILU, BQ_GELU_TANH, 3, -1};
  for (size_t o = 0; o < NELEM(ops); o++)
    for (size_t a = 0; a < NELEM(acts); a++) {
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = ops[o];
      if (ops[o] != BQ_LINEAR_WEIGHT_SUMS) d.float_type = BQ_F16;
      if (ops[o] == BQ_SMOOTHQUANT_LINEAR) d.out_type = BQ_F16;
      if (ops[o] == BQ_DYNAMIC_QUANTIZE) d.granularity = BQ_PER_TOKEN;
      d.activation = (bq_activation)acts[a];
      char needle[64], ctx[64];
      snprintf(needle, sizeof needle, "desc.activation (%d", acts[a]);
      snprintf(ctx, sizeof ctx, "[op %d activation %d]", (int)ops[o], acts[a]);
      expect_desc_invalid(&d, NULL, needle, ctx);
    }
}

Test(fused_desc, activation_outside_the_enum) {
  static const int acts[] = {3, 4, 77, -1};
  for (size_t a = 0; a < NELEM(acts); a++)
    for (int asym = 0; asym < 2; asym++) {
      bq_desc d = fdesc(1, BQ_PER_TOKEN, BQ_BF16, asym);
      d.activation = (bq_activation)acts[a];
      char needle[64];
      snprintf(needle, sizeof needle, "desc.activation (%d", acts[a]);
      expect_desc_invalid(&d, NULL, needle, "gated, bad activation");
    }
}

/* per channel is a weight layout: not offered */
Test(fused_desc, per_channel_not_supported) {
  for (int k = 0; k < NOPS; k++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (int asym = 0; asym < 2; asym++) {
        bq_desc d = fdesc(k, BQ_PER_CHANNEL, FTS[f], asym);
        char ctx[192];
        ctx_of(&d, ctx, sizeof ctx);
        expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, NULL, "desc.granularity (per_channel)", ctx);
      }
}

Test(fused_desc, granularity_outside_the_enum) {
  for (int k = 0; k < NOPS; k++) {
    bq_desc d = fdesc(k, (bq_granularity)(BQ_PER_BLOCK + 1), BQ_F32, 0);
    expect_desc_invalid(&d, NULL, "desc.granularity (6)", "granularity 6");
    d.granularity = (bq_granularity)-1;
    expect_desc_invalid(&d, NULL, "desc.granularity (-1)", "granularity -1");
  }
}

/* per block, MN-major scales and packed UE8M0 scales are the affine ops' and dynamic
   quantize's only: NOT_SUPPORTED naming the field, at every granularity the producer takes
   (and a scale_layout outside the enum is malformed, INVALID_ARGUMENT) */
Test(fused_desc, block_mn_major_and_packed_scales_not_supported) {
  static const bq_granularity GR[] = {BQ_GRANULARITY_DEFAULT, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_TENSOR};
  size_t checked = 0;
  for (int k = 0; k < NOPS; k++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (int asym = 0; asym < 2; asym++) {
        char ctx[192], needle[128];
        bq_desc d = fdesc(k, BQ_PER_BLOCK, FTS[f], asym);
        ctx_of(&d, ctx, sizeof ctx);
        expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, op_base(&d),
                           "desc.granularity (per_block) is not offered for fused producers", ctx);
        d.scale_type = BQ_UE8M0X4; /* either one named */
        expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, op_base(&d), "is not offered for fused producers", ctx);
        for (size_t g = 0; g < NELEM(GR); g++) {
          if (GR[g] == BQ_PER_TENSOR && asym) continue;
          d = fdesc(k, GR[g], FTS[f], asym);
          ctx_of(&d, ctx, sizeof ctx);
          expect_desc_valid(&d, ctx);
          d.scale_layout = BQ_SCALES_MN_MAJOR;
          /* checked before the plan is named: the op's name leads */
          expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, d.op == BQ_RMSNORM_QUANTIZE ? "rmsnorm_quantize: "
                             : "gated_quantize: ", "desc.scale_layout (MN-major) is offered for quantize, dequantize, "
                             "fake quantize and dynamic quantize only", ctx);
          d.scale_layout = (bq_scale_layout)3; /* (2, the blocked layout, names a microscaling output) */
          expect_desc_invalid(&d, NULL, "desc.scale_layout (3) must be BQ_SCALES_ROW_MAJOR or BQ_SCALES_MN_MAJOR", ctx);
          d.scale_layout = (bq_scale_layout)-1;
          expect_desc_invalid(&d, NULL, "desc.scale_layout (-1)", ctx);
          d.scale_layout = BQ_SCALES_ROW_MAJOR;
          d.scale_type = BQ_UE8M0X4;
          char prefix[128];
          fprefix(&d, prefix, sizeof prefix);
          snprintf(needle, sizeof needle, "desc.scale_type (ue8m0x4) is not offered for fused producers");
          expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, GR[g] ? prefix : op_base(&d), needle, ctx);
          checked++;
        }
      }
  cr_assert_eq(checked, NOPS * 4 * (4 + 3), "%zu", checked);
}

Test(fused_desc, backward_refused) {
  static const bq_granularity GR[] = {BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_TENSOR};
  for (int k = 0; k < NOPS; k++)
    for (size_t g = 0; g < NELEM(GR); g++) {
      bq_desc d = fdesc(k, GR[g], BQ_F32, 0);
      d.direction = BQ_BACKWARD;
      char ctx[192], prefix[128];
      ctx_of(&d, ctx, sizeof ctx);
      fprefix(&d, prefix, sizeof prefix);
      expect_desc_invalid(&d, NULL, "desc.direction", ctx);
      d.direction = (bq_direction)7;
      expect_desc_invalid(&d, NULL, "desc.direction (7)", ctx);
    }
}

/* a static per tensor scale has no zero point computed from the data */
Test(fused_desc, asymmetric_with_per_tensor) {
  for (int k = 0; k < NOPS; k++)
    for (size_t f = 0; f < NELEM(FTS); f++) {
      bq_desc d = fdesc(k, BQ_PER_TENSOR, FTS[f], 1);
      char ctx[192];
      ctx_of(&d, ctx, sizeof ctx);
      expect_desc_invalid(&d, NULL, "desc.asymmetric (1)", ctx);
    }
}

Test(fused_desc, asymmetric_is_0_or_1) {
  static const int bad[] = {2, 7, -1};
  static const bq_granularity GR[] = {BQ_PER_TOKEN, BQ_PER_GROUP};
  for (int k = 0; k < NOPS; k++)
    for (size_t g = 0; g < NELEM(GR); g++)
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_desc d = fdesc(k, GR[g], BQ_BF16, bad[b]);
        char needle[64];
        snprintf(needle, sizeof needle, "desc.asymmetric (%d)", bad[b]);
        expect_desc_invalid(&d, NULL, needle, "asymmetric out of range");
      }
}

Test(fused_desc, q_ranges) {
  static const bq_granularity GR[] = {BQ_PER_TOKEN, BQ_PER_GROUP};
  for (int k = 0; k < NOPS; k++)
    for (size_t g = 0; g < NELEM(GR); g++) {
      char prefix[128], ctx[192];
      /* symmetric needs qmax > 0 */
      bq_desc d = fdesc(k, GR[g], BQ_F16, 0);
      d.qmin = -5;
      d.qmax = 0;
      fprefix(&d, prefix, sizeof prefix);
      ctx_of(&d, ctx, sizeof ctx);
      expect_desc_invalid(&d, prefix, "desc.qmax (0) must be > 0", ctx);
      d.qmin = -128;
      d.qmax = -1;
      expect_desc_invalid(&d, prefix, "desc.qmax (-1) must be > 0", ctx);
      /* asymmetric takes it, with two levels */
      d.asymmetric = 1;
      expect_desc_valid(&d, ctx);
      d.qmin = 5;
      d.qmax = 5;
      fprefix(&d, prefix, sizeof prefix);
      expect_desc_invalid(&d, prefix, "desc.qmax (5) must be > desc.qmin (5)", ctx);
      d.int_type = BQ_U8;
      d.qmin = 255;
      d.qmax = 255;
      expect_desc_invalid(&d, prefix, "desc.qmax (255) must be > desc.qmin (255)", ctx);
      /* outside the int type */
      d = fdesc(k, GR[g], BQ_F16, 0);
      d.qmin = -129;
      d.qmax = 7;
      expect_desc_invalid(&d, NULL, "desc.qmin (-129)", ctx);
      d.int_type = BQ_U8;
      d.qmin = 3;
      d.qmax = 256;
      expect_desc_invalid(&d, NULL, "desc.qmax (256)", ctx);
      d.qmin = 9;
      d.qmax = 8;
      expect_desc_invalid(&d, NULL, "desc.qmax (8) < desc.qmin (9)", ctx);
    }
  /* per tensor (static): quantize's rules, a one-level range is allowed as for quantize */
  for (int k = 0; k < NOPS; k++) {
    bq_desc d = fdesc(k, BQ_PER_TENSOR, BQ_F32, 0);
    d.int_type = BQ_U8;
    d.qmin = 3;
    d.qmax = 250;
    expect_desc_valid(&d, "per tensor u8 [3, 250]");
    d.int_type = BQ_S8;
    d.qmin = -7;
    d.qmax = 7;
    expect_desc_valid(&d, "per tensor s8 [-7, 7]");
  }
}

/* FP8 storage: every op and granularity, symmetric with no q-range; an asymmetric plan or
   a q-range is refused, naming the field */
Test(fused_desc, fp8_storage) {
  static const bq_granularity GR[] = {BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_TENSOR};
  static const bq_dtype F8[] = {BQ_E4M3, BQ_E5M2};
  for (int k = 0; k < NOPS; k++)
    for (size_t g = 0; g < NELEM(GR); g++)
      for (size_t i = 0; i < NELEM(F8); i++) {
        char ctx[192];
        bq_desc d = fdesc(k, GR[g], FTS[(k + g + i) % NELEM(FTS)], 0);
        d.int_type = F8[i];
        ctx_of(&d, ctx, sizeof ctx);
        expect_desc_valid(&d, ctx);
        bq_plan plan;
        cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
        cr_assert_eq(plan.desc.qmin, 0, "%s", ctx);
        cr_assert_eq(plan.desc.qmax, 0, "%s", ctx);
        char sku[256];
        cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
        cr_assert(strstr(sku, F8[i] == BQ_E4M3 ? ".e4m3." : ".e5m2.") && !strstr(sku, "q["), "%s: %s", ctx, sku);
        d.qmin = -7;
        d.qmax = 7;
        expect_desc_invalid(&d, NULL, "desc.qmin (-7) and desc.qmax (7) must be 0", ctx);
        if (GR[g] == BQ_PER_TENSOR) continue;
        d.qmin = d.qmax = 0;
        d.asymmetric = 1;
        expect_desc_invalid(&d, NULL, "desc.asymmetric (1) must be 0", ctx);
      }
}

Test(fused_desc, int_float_scale_and_out_types) {
  static const int bad_ints[] = {BQ_S32, BQ_F32, 77, -1};
  static const int bad_floats[] = {BQ_S8, BQ_U8, BQ_S32, 77, -1};
  for (int k = 0; k < NOPS; k++) {
    char needle[64];
    for (size_t i = 0; i < NELEM(bad_ints); i++) {
      bq_desc d = fdesc(k, BQ_PER_TOKEN, BQ_F32, 0);
      d.int_type = (bq_dtype)bad_ints[i];
      snprintf(needle, sizeof needle, "desc.int_type (%d", bad_ints[i]);
      expect_desc_invalid(&d, NULL, needle, "int_type");
    }
    for (size_t i = 0; i < NELEM(bad_floats); i++) {
      bq_desc d = fdesc(k, BQ_PER_TOKEN, (bq_dtype)bad_floats[i], 0);
      snprintf(needle, sizeof needle, "desc.float_type (%d", bad_floats[i]);
      expect_desc_invalid(&d, NULL, needle, "float_type");
    }
    {
      bq_desc d = fdesc(k, BQ_PER_TOKEN, BQ_F32, 0);
      d.float_type = BQ_DTYPE_DEFAULT;
      expect_desc_invalid(&d, NULL, "desc.float_type (0", "float_type unset");
    }
    /* dynamic scales: f32 or the float type */
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (size_t s = 0; s < NELEM(FTS); s++) {
        if (FTS[s] == BQ_F32 || FTS[s] == FTS[f]) continue;
        bq_desc d = fdesc(k, BQ_PER_GROUP, FTS[f], 1);
        d.scale_type = FTS[s];
        snprintf(needle, sizeof needle, "desc.scale_type (%d", (int)FTS[s]);
        expect_desc_invalid(&d, NULL, needle, "scale_type");
      }
    {
      bq_desc d = fdesc(k, BQ_PER_TOKEN, BQ_F32, 0);
      d.scale_type = BQ_S8;
      snprintf(needle, sizeof needle, "desc.scale_type (%d", (int)BQ_S8);
      expect_desc_invalid(&d, NULL, needle, "scale_type s8");
      d = fdesc(k, BQ_PER_TOKEN, BQ_F32, 0);
      d.out_type = BQ_F32;
      snprintf(needle, sizeof needle, "desc.out_type (%d", (int)BQ_F32);
      expect_desc_invalid(&d, NULL, needle, "out_type");
      d = fdesc(k, BQ_PER_TOKEN, BQ_F32, 0);
      d.device = -3;
      expect_desc_invalid(&d, NULL, "desc.device (-3)", "device");
    }
  }
}

/* ---- SKUs ------------------------------------------------------------------------------- */
Test(fused_sku, documented_form) {
  bq_desc d = fdesc(0, BQ_PER_TOKEN, BQ_BF16, 0);
  char buf[256];
  cr_assert_eq(bq_sku(&d, 90, buf, sizeof buf), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(buf, "rmsnorm_quantize.fwd.per_token.bf16.s8.q[-128,127].scale_f32.vec8.sym.sm_90");
  d = fdesc(1, BQ_PER_TOKEN, BQ_BF16, 0);
  cr_assert_eq(bq_sku(&d, 90, buf, sizeof buf), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(buf, "silu_mul_quantize.fwd.per_token.bf16.s8.q[-128,127].scale_f32.vec8.sym.sm_90");
  d = fdesc(3, BQ_PER_TOKEN, BQ_BF16, 0);
  cr_assert_eq(bq_sku(&d, 90, buf, sizeof buf), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(buf, "gelu_tanh_mul_quantize.fwd.per_token.bf16.s8.q[-128,127].scale_f32.vec8.sym.sm_90");
  /* and distinct from dynamic quantize's */
  bq_desc q;
  memset(&q, 0, sizeof q);
  q.op = BQ_DYNAMIC_QUANTIZE;
  q.granularity = BQ_PER_TOKEN;
  q.float_type = BQ_BF16;
  char qb[256];
  cr_assert_eq(bq_sku(&q, 90, qb, sizeof qb), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_neq(qb, buf);
}

/* the fields that tell kernels apart (normalized), as a key */
static void key_of(const bq_desc *in, char *buf, size_t n) {
  bq_plan plan;
  cr_assert_eq(bq__plan_init(in, &plan), BQ_SUCCESS, "%s", bq_last_error());
  const bq_desc *d = &plan.desc;
  int act = d->op == BQ_GATED_QUANTIZE ? (d->activation == BQ_GELU_TANH ? 2 : 1) : 0;
  snprintf(buf, n, "op%d act%d g%d t%d i%d q%d,%d s%d a%d", (int)d->op, act, (int)d->granularity, (int)d->float_type,
           (int)d->int_type, d->qmin, d->qmax, (int)d->scale_type, d->asymmetric);
}

typedef struct skurow {
  char sku[256];
  char key[128];
  char desc[192];
} skurow;
static int by_sku(const void *a, const void *b) { return strcmp(((const skurow *)a)->sku, ((const skurow *)b)->sku); }
static int by_key(const void *a, const void *b) { return strcmp(((const skurow *)a)->key, ((const skurow *)b)->key); }

/* one kernel, one SKU; distinct kernels, distinct SKUs (and file names), on two targets */
Test(fused_sku, unique_over_all_fused_descs) {
  static fcombo c[MAX_FCOMBOS];
  size_t n = fused_combos(c);
  static const int ccs[] = {80, 90};
  skurow *rows = calloc(n * 2, sizeof *rows);
  cr_assert_not_null(rows);
  size_t m = 0;
  for (size_t t = 0; t < NELEM(ccs); t++)
    for (size_t i = 0; i < n; i++) {
      skurow *r = &rows[m++];
      cr_assert_eq(bq_sku(&c[i].d, ccs[t], r->sku, sizeof r->sku), BQ_SUCCESS, "%s", bq_last_error());
      char k[100];
      key_of(&c[i].d, k, sizeof k);
      snprintf(r->key, sizeof r->key, "%s cc%d", k, ccs[t]);
      ctx_of(&c[i].d, r->desc, sizeof r->desc);
      const char *base = op_base(&c[i].d);
      cr_assert(strncmp(r->sku, base, strlen(base)) == 0 && r->sku[strlen(base)] == '.', "%s: SKU %s", r->desc,
                r->sku);
      for (const char *p = r->sku; *p; p++)
        cr_assert(*p > ' ' && *p != '/' && *p < 127, "%s: SKU %s is not file-name safe", r->desc, r->sku);
    }
  /* equal keys, equal SKUs */
  qsort(rows, m, sizeof *rows, by_key);
  size_t keys = 0;
  for (size_t i = 0; i < m; i++) {
    if (i && !strcmp(rows[i].key, rows[i - 1].key))
      cr_assert_str_eq(rows[i].sku, rows[i - 1].sku, "one kernel, two SKUs: %s -> %s, %s -> %s", rows[i - 1].desc,
                       rows[i - 1].sku, rows[i].desc, rows[i].sku);
    else
      keys++;
  }
  /* equal SKUs, equal keys */
  qsort(rows, m, sizeof *rows, by_sku);
  size_t skus = 0;
  for (size_t i = 0; i < m; i++) {
    if (i && !strcmp(rows[i].sku, rows[i - 1].sku))
      cr_assert_str_eq(rows[i].key, rows[i - 1].key, "SKU collision: %s and %s both get %s", rows[i - 1].desc,
                       rows[i].desc, rows[i].sku);
    else
      skus++;
  }
  cr_assert_eq(skus, keys, "%zu SKUs for %zu kernels", skus, keys);
  /* and none is another op's SKU: the dynamic quantize SKUs of the same settings differ */
  for (size_t i = 0; i < n; i += 7) {
    bq_desc q = c[i].d;
    if (q.granularity == BQ_PER_TENSOR) continue;
    q.op = BQ_DYNAMIC_QUANTIZE;
    q.activation = BQ_ACTIVATION_DEFAULT;
    if (q.granularity == BQ_GRANULARITY_DEFAULT) q.granularity = BQ_PER_TOKEN;
    char a[256], b[256];
    cr_assert_eq(bq_sku(&q, 90, a, sizeof a), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq_sku(&c[i].d, 90, b, sizeof b), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_str_neq(a, b);
  }
  cr_log_info("%zu fused descs, %zu SKUs", n, skus);
  free(rows);
}

/* ---- arguments ---------------------------------------------------------------------------- */
#define PTR(n) ((void *)(uintptr_t)(0x10000000u + (n) * 0x100000u))

static bq_args fargs(const bq_desc *d) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = 33;
  a.cols = 256;
  a.x = PTR(1);
  a.y = PTR(2);
  a.out_scales = PTR(3);
  a.out_zero_points = PTR(4);
  a.out = PTR(5);
  if (d->op == BQ_RMSNORM_QUANTIZE) {
    a.residual = PTR(6);
    a.norm_weight = PTR(7);
    a.eps = 1e-6;
  }
  if (d->granularity == BQ_PER_GROUP) a.group_size = 64;
  if (d->granularity == BQ_PER_TENSOR) {
    a.scale = 0.03125;
    a.zero_point = 3;
  }
  return a;
}

static void plan_of(const bq_desc *d, bq_plan *p) {
  cr_assert_eq(bq__plan_init(d, p), BQ_SUCCESS, "%s", bq_last_error());
  for (int e = 0; e < BQ__MAX_KERNELS; e++) cr_assert_null(p->mod[e]);
}


static void expect_args_status(const bq_desc *d, const bq_args *a, bq_status want, const char *needle) {
  bq_plan plan;
  plan_of(d, &plan);
  char prefix[128], msg[1024];
  snprintf(prefix, sizeof prefix, "%s: ", plan.name);
  clear_error();
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, want, "%s can_implement: got %s (%s), want %s [%s]", plan.name, bq_status_name(st),
               bq_last_error(), bq_status_name(want), needle);
  check_msg(prefix, needle, plan.name, "bq_plan_can_implement");
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  clear_error();
  st = bq_plan_run(&plan, a, NULL, 0, NULL);
  cr_assert_eq(st, want, "%s run: got %s (%s)", plan.name, bq_status_name(st), bq_last_error());
  cr_assert_str_eq(bq_last_error(), msg, "%s: run says \"%s\", can_implement said \"%s\"", plan.name,
                   bq_last_error(), msg);
  expect_workspace_agrees(&plan, a, want, msg, plan.name);
}
static void expect_invalid(const bq_desc *d, const bq_args *a, const char *needle) {
  expect_args_status(d, a, BQ_ERROR_INVALID_ARGUMENT, needle);
}

static void expect_ok(const bq_desc *d, const bq_args *a, int run_too, const char *what) {
  bq_plan plan;
  plan_of(d, &plan);
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, BQ_SUCCESS, "%s %s: can_implement: %s (%s)", plan.name, what, bq_status_name(st), bq_last_error());
  size_t ws = 12345;
  st = bq_plan_workspace_size(&plan, a, &ws);
  cr_assert_eq(st, BQ_SUCCESS, "%s %s: workspace_size: %s (%s)", plan.name, what, bq_status_name(st),
               bq_last_error());
  cr_assert_eq(ws, 0, "%s %s: the fused ops need no workspace (got %zu)", plan.name, what, ws);
  if (run_too) {
    st = bq_plan_run(&plan, a, NULL, 0, NULL);
    cr_assert_eq(st, BQ_SUCCESS, "%s %s: run: %s (%s)", plan.name, what, bq_status_name(st), bq_last_error());
  }
}

/* every plan shape the argument rules are tried on: op kind x granularity x asym x T */
#define NSHAPES (NOPS * 5 * 2)
static bq_desc shape_of(int i) {
  static const bq_granularity GR[] = {BQ_PER_TOKEN, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_GROUP, BQ_PER_TENSOR};
  int k = i % NOPS, g = (i / NOPS) % 5, t = i / (NOPS * 5);
  return fdesc(k, GR[g], t ? BQ_BF16 : BQ_F64, g < 4 ? g & 1 : 0);
}

Test(fused_args, base_is_valid) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    bq_args a = fargs(&d);
    expect_ok(&d, &a, 0, "base");
    a.out = NULL;
    expect_ok(&d, &a, 0, "no out");
    if (d.op == BQ_RMSNORM_QUANTIZE) {
      a.residual = NULL;
      expect_ok(&d, &a, 0, "no residual");
      a = fargs(&d);
      a.residual = (void *)a.x; /* in place, same stride */
      expect_ok(&d, &a, 0, "residual in place");
      a.x_row_stride = a.residual_row_stride = 300;
      expect_ok(&d, &a, 0, "residual in place, strided");
      a = fargs(&d);
      a.eps = 0;
      expect_ok(&d, &a, 0, "eps = 0");
      a.eps = 1e30;
      expect_ok(&d, &a, 0, "eps large but finite in f32");
    }
    if (!d.asymmetric && d.granularity != BQ_PER_TENSOR) {
      a = fargs(&d);
      a.out_zero_points = NULL;
      expect_ok(&d, &a, 0, "symmetric, no zero points");
    }
    if (d.granularity == BQ_PER_TENSOR) {
      a = fargs(&d);
      a.out_scales = NULL;
      a.out_zero_points = NULL;
      expect_ok(&d, &a, 0, "per tensor: no scale arrays");
    }
    /* strides: dense spelled out, and larger */
    a = fargs(&d);
    a.x_row_stride = d.op == BQ_GATED_QUANTIZE ? 2 * a.cols : a.cols;
    a.y_row_stride = a.cols;
    a.out_row_stride = a.cols;
    a.residual_row_stride = a.cols;
    expect_ok(&d, &a, 0, "dense strides spelled out");
    a.x_row_stride += 3;
    a.y_row_stride += 5;
    a.out_row_stride += 7;
    a.residual_row_stride += 9;
    expect_ok(&d, &a, 0, "padded strides");
  }
}

Test(fused_args, zero_sizes) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    bq_args a = fargs(&d);
    a.rows = 0;
    expect_ok(&d, &a, 1, "rows = 0");
    a = fargs(&d);
    a.rows = 0;
    a.x = NULL;
    a.y = NULL;
    a.out_scales = NULL;
    a.out_zero_points = NULL;
    a.out = NULL;
    a.residual = NULL;
    a.norm_weight = NULL;
    expect_ok(&d, &a, 1, "rows = 0, every pointer NULL");
    if (d.granularity != BQ_PER_GROUP) {
      a = fargs(&d);
      a.cols = 0;
      expect_ok(&d, &a, 1, "cols = 0");
    }
  }
}

Test(fused_args, shapes) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    bq_args a = fargs(&d);
    a.rows = -1;
    expect_invalid(&d, &a, "args.rows (-1)");
    a = fargs(&d);
    a.cols = -2;
    expect_invalid(&d, &a, "args.cols (-2)");
    a = fargs(&d);
    a.y_row_stride = a.cols - 1;
    expect_invalid(&d, &a, "args.y_row_stride (255)");
    a = fargs(&d);
    a.out_row_stride = a.cols - 1;
    expect_invalid(&d, &a, "args.out_row_stride (255)");
    a = fargs(&d);
    a.x_row_stride = a.cols - 1;
    expect_invalid(&d, &a, "args.x_row_stride (255)");
    if (d.op == BQ_GATED_QUANTIZE) {
      /* gate and up: 2 cols a row */
      a = fargs(&d);
      a.x_row_stride = a.cols;
      expect_invalid(&d, &a, "args.x_row_stride (256)");
      a.x_row_stride = 2 * a.cols - 1;
      expect_invalid(&d, &a, "args.x_row_stride (511)");
      a.x_row_stride = 2 * a.cols;
      expect_ok(&d, &a, 0, "x_row_stride = 2 cols");
    } else {
      a = fargs(&d);
      a.residual_row_stride = a.cols - 1;
      expect_invalid(&d, &a, "args.residual_row_stride (255)");
    }
    a = fargs(&d);
    a.rows = (int64_t)1 << 40;
    a.x_row_stride = (int64_t)1 << 30;
    expect_invalid(&d, &a, "args.rows");
  }
}

Test(fused_args, group_size) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    if (d.granularity != BQ_PER_GROUP) continue;
    bq_args a = fargs(&d);
    a.group_size = 0;
    expect_invalid(&d, &a, "args.group_size (0)");
    a.group_size = -4;
    expect_invalid(&d, &a, "args.group_size (-4)");
    a.group_size = 96;
    expect_invalid(&d, &a, "args.group_size (96) does not divide args.cols (256)");
    a.group_size = 5;
    expect_invalid(&d, &a, "args.group_size (5) does not divide args.cols (256)");
    a.cols = 288;
    a.group_size = 96; /* a generic group size */
    expect_ok(&d, &a, 0, "G = 96");
    a.group_size = 3;
    expect_ok(&d, &a, 0, "G = 3");
    a.group_size = 288;
    expect_ok(&d, &a, 0, "G = cols");
    a = fargs(&d);
    a.group_row_stride = 3;
    expect_invalid(&d, &a, "args.group_row_stride (3)");
    a.group_row_stride = 9;
    expect_ok(&d, &a, 0, "padded group rows");
  }
}

Test(fused_args, pointers) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    int t = d.float_type == BQ_F64 ? 8 : 2;
    bq_args a = fargs(&d);
    a.x = NULL;
    expect_invalid(&d, &a, "args.x is NULL");
    a = fargs(&d);
    a.x = (char *)PTR(1) + t / 2;
    expect_invalid(&d, &a, "args.x (0x");
    a = fargs(&d);
    a.y = NULL;
    expect_invalid(&d, &a, "args.y is NULL");
    a = fargs(&d);
    a.y = (char *)PTR(2) + 3; /* int8: any address */
    expect_ok(&d, &a, 0, "odd y");
    a = fargs(&d);
    a.out = (char *)PTR(5) + t / 2;
    expect_invalid(&d, &a, "args.out (0x");
    a = fargs(&d);
    a.x = (char *)PTR(1) + t; /* element-aligned but not 16-byte aligned: fine */
    a.out = (char *)PTR(5) + 3 * t;
    expect_ok(&d, &a, 0, "element-aligned x and out");
    if (d.granularity != BQ_PER_TENSOR) {
      int s = d.scale_type == BQ_DTYPE_DEFAULT || d.scale_type == BQ_F32 ? 4 : t;
      a = fargs(&d);
      a.out_scales = NULL;
      expect_invalid(&d, &a, "args.out_scales is NULL");
      a = fargs(&d);
      a.out_scales = (char *)PTR(3) + s / 2;
      expect_invalid(&d, &a, "args.out_scales (0x");
      if (d.asymmetric) {
        a = fargs(&d);
        a.out_zero_points = NULL;
        expect_invalid(&d, &a, "args.out_zero_points is NULL");
        a = fargs(&d);
        a.out_zero_points = (int32_t *)((char *)PTR(4) + 2);
        expect_invalid(&d, &a, "args.out_zero_points (0x");
      }
    }
    if (d.op == BQ_RMSNORM_QUANTIZE) {
      a = fargs(&d);
      a.norm_weight = NULL;
      expect_invalid(&d, &a, "args.norm_weight is NULL");
      a = fargs(&d);
      a.norm_weight = (char *)PTR(7) + t / 2;
      expect_invalid(&d, &a, "args.norm_weight (0x");
      a = fargs(&d);
      a.residual = (char *)PTR(6) + t / 2;
      expect_invalid(&d, &a, "args.residual (0x");
      a = fargs(&d);
      a.residual = (char *)PTR(6) + t; /* element-aligned: fine */
      expect_ok(&d, &a, 0, "element-aligned residual");
    }
  }
}

Test(fused_args, eps) {
  static const double bad[] = {-1e-6, -0.0 - 1e-300, -1.0, NAN, -NAN, INFINITY, -INFINITY};
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    if (d.op != BQ_RMSNORM_QUANTIZE) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = fargs(&d);
      a.eps = bad[b];
      expect_invalid(&d, &a, "args.eps (");
    }
    bq_args a = fargs(&d);
    a.eps = 1e300; /* finite in f64; C(eps) = inf where C is f32 */
    if (d.float_type == BQ_F64) expect_ok(&d, &a, 0, "eps 1e300 in f64");
    else expect_invalid(&d, &a, "args.eps (");
    a.eps = -0.0;
    expect_ok(&d, &a, 0, "eps = -0");
    a.eps = 5e-324;
    expect_ok(&d, &a, 0, "eps subnormal");
  }
}

Test(fused_args, per_tensor_scale) {
  static const double bad[] = {0.0, -0.0, -1.0, NAN, INFINITY, -INFINITY};
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    if (d.granularity != BQ_PER_TENSOR) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = fargs(&d);
      a.scale = bad[b];
      expect_invalid(&d, &a, "args.scale (");
    }
    if (d.float_type != BQ_F64) { /* C = f32: the scale must be a finite positive f32 */
      bq_args a = fargs(&d);
      a.scale = 1e300;
      expect_invalid(&d, &a, "args.scale (");
      a.scale = 1e-300;
      expect_invalid(&d, &a, "args.scale (");
    } else {
      bq_args a = fargs(&d);
      a.scale = 1e300;
      expect_ok(&d, &a, 0, "f64 scale 1e300");
    }
  }
}

/* FP8 per tensor takes no zero point: args.zero_point must be 0 */
Test(fused_args, fp8_per_tensor_zero_point) {
  static const int32_t bad[] = {3, -1, INT32_MIN};
  for (int k = 0; k < NOPS; k++) {
    bq_desc d = fdesc(k, BQ_PER_TENSOR, k % 2 ? BQ_BF16 : BQ_F32, 0);
    d.int_type = k < 2 ? BQ_E4M3 : BQ_E5M2;
    bq_args a = fargs(&d);
    for (size_t b = 0; b < NELEM(bad); b++) {
      char needle[64];
      snprintf(needle, sizeof needle, "args.zero_point (%d) must be 0", (int)bad[b]);
      a.zero_point = bad[b];
      expect_invalid(&d, &a, needle);
    }
    a.zero_point = 0;
    expect_ok(&d, &a, 0, "FP8 per tensor, zero point 0");
  }
}

/* the dynamic fields are not read by the per tensor form and vice versa */
Test(fused_args, fields_of_other_granularities_ignored) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    bq_args a = fargs(&d);
    a.numel = -1; /* never read by the fused ops (a per-tensor view's field) */
    a.rank = -1;
    a.axis = 99;
    if (d.granularity == BQ_PER_TENSOR) {
      a.group_size = 7;
      a.out_scales = (char *)PTR(3) + 1;
      a.out_zero_points = (int32_t *)((char *)PTR(4) + 1);
    } else {
      a.scale = -1.0;
    }
    if (d.granularity == BQ_PER_TOKEN) a.group_size = 7;
    if (!d.asymmetric) a.out_zero_points = (int32_t *)((char *)PTR(4) + 1);
    expect_ok(&d, &a, 0, "fields of other granularities");
  }
}

/* RMSNorm's own fields given to the gated op are refused, naming the field (the gated op
   has no residual, weight or eps: a caller who sets one has the wrong op) */
Test(fused_args, rmsnorm_fields_on_the_gated_op) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    if (d.op != BQ_GATED_QUANTIZE) continue;
    bq_args a = fargs(&d);
    a.residual = PTR(6);
    expect_invalid(&d, &a, "args.residual (");
    a = fargs(&d);
    a.norm_weight = PTR(7);
    expect_invalid(&d, &a, "args.norm_weight (");
    a = fargs(&d);
    a.eps = 1e-6;
    expect_invalid(&d, &a, "args.eps (");
  }
}

/* the residual in place must share x's stride */
Test(fused_args, residual_in_place_needs_x_stride) {
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    if (d.op != BQ_RMSNORM_QUANTIZE) continue;
    bq_args a = fargs(&d);
    a.residual = (void *)a.x;
    a.x_row_stride = 300;
    a.residual_row_stride = 0;
    expect_invalid(&d, &a, "args.residual_row_stride (256)");
    a.residual_row_stride = 301;
    expect_invalid(&d, &a, "args.residual_row_stride (301)");
    a.residual_row_stride = 300;
    expect_ok(&d, &a, 0, "in place, same stride");
  }
}

/* args.amax_bound belongs to dynamic quantize: a fused producer refuses any nonzero bound,
   naming it */
Test(fused_args, amax_bound_refused) {
  const double bad[] = {1.0, 1e-30, 448.0, -1.0, NAN, INFINITY};
  for (int i = 0; i < NSHAPES; i++) {
    bq_desc d = shape_of(i);
    bq_args a = fargs(&d);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
      a.amax_bound = bad[b];
      expect_invalid(&d, &a, "args.amax_bound (");
    }
    a.amax_bound = 0.0;
    expect_ok(&d, &a, 0, "no bound");
  }
}

/* ---- microscaling output ------------------------------------------------------------------- */
static bq_desc mxdesc(int kind, bq_dtype ft, bq_dtype it, bq_dtype st, bq_scale_layout lay, bq_scale_rule rule) {
  bq_desc d = fdesc(kind, BQ_GRANULARITY_DEFAULT, ft, 0);
  d.int_type = it;
  d.scale_type = st;
  d.scale_layout = lay;
  d.scale_rule = rule;
  return d;
}

/* a microscaling format's fields make one: each format x layout x rule of its kind is valid
   (per group by default), named by its format in the SKU; the others' fields refused by name */
Test(fused_desc, microscaling_formats) {
  static const bq_dtype IT[] = {BQ_E2M1, BQ_E2M1, BQ_E4M3, BQ_E5M2}, ST[] = {BQ_UE8M0, BQ_E4M3, BQ_UE8M0, BQ_UE8M0};
  static const char *const FMT[] = {".mxfp4.", ".nvfp4.", ".mxfp8_e4m3.", ".mxfp8_e5m2."};
  size_t valid = 0;
  for (int k = 0; k < NOPS; k++)
    for (int f = 0; f < 4; f++)
      for (int lay = 0; lay < 3; lay++)
        for (int rule = 0; rule < 8; rule++) {
          const bq_desc d = mxdesc(k, FTS[(k + lay) % 4], IT[f], ST[f], (bq_scale_layout)lay, (bq_scale_rule)rule);
          char ctx[192];
          snprintf(ctx, sizeof ctx, "[%s format %d layout %d rule %d]", op_base(&d), f, lay, rule);
          const int nv_rule = rule >= 6, nv = ST[f] == BQ_E4M3;
          if (rule && nv_rule != nv) {
            expect_desc_invalid(&d, NULL, nv_rule ? "names an NVFP4 rule" : "names a UE8M0 rule", ctx);
            continue;
          }
          expect_desc_valid(&d, ctx);
          bq_desc nd;
          char name[96], sku[256];
          cr_assert_eq(bq__normalize(&d, &nd, name, sizeof name), BQ_SUCCESS);
          cr_assert_eq(nd.granularity, BQ_PER_GROUP, "%s", ctx);
          cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
          cr_assert(strstr(sku, FMT[f]) && strstr(sku, ".per_group."), "%s: %s", ctx, sku);
          valid++;
        }
  cr_assert_eq(valid, (size_t)NOPS * 3 * (3 * 6 + 3), "%zu", valid); /* (UE8M0 formats: 6 rules; NVFP4: 3) */
}

Test(fused_desc, microscaling_fields_refused_by_name) {
  for (int k = 0; k < NOPS; k++) {
    char ctx[64];
    snprintf(ctx, sizeof ctx, "[op %d]", k);
    bq_desc d = mxdesc(k, BQ_BF16, BQ_S8, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    expect_desc_invalid(&d, NULL, "desc.int_type (5, s8) must be BQ_E2M1, BQ_E4M3 or BQ_E5M2 in a microscaling format",
                        ctx);
    d = mxdesc(k, BQ_BF16, BQ_E2M1, BQ_F32, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    expect_desc_invalid(&d, NULL, "desc.scale_type (1, f32) must be BQ_UE8M0 (MXFP8, MXFP4) or BQ_E4M3", ctx);
    d = mxdesc(k, BQ_BF16, BQ_E4M3, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    expect_desc_invalid(&d, NULL, "desc.scale_type (8, e4m3) is NVFP4's, whose elements are E2M1", ctx);
    d = mxdesc(k, BQ_BF16, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    d.granularity = BQ_PER_TOKEN;
    expect_desc_invalid(&d, NULL, "desc.granularity (per_token) must be BQ_PER_GROUP", ctx);
    d.granularity = BQ_PER_TENSOR;
    expect_desc_invalid(&d, NULL, "desc.granularity (per_tensor) must be BQ_PER_GROUP", ctx);
    d.granularity = (bq_granularity)9;
    expect_desc_invalid(&d, NULL, "desc.granularity (9) is not a bq_granularity", ctx);
    d = mxdesc(k, BQ_BF16, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    d.asymmetric = 1;
    expect_desc_invalid(&d, NULL, "desc.asymmetric (1) must be 0: the microscaling formats are symmetric", ctx);
    d.asymmetric = 0, d.qmax = 6;
    expect_desc_invalid(&d, NULL, "desc.qmin (0) and desc.qmax (6) must be 0", ctx);
    d.qmax = 0, d.direction = BQ_BACKWARD;
    expect_desc_invalid(&d, NULL, "desc.direction (backward) is not defined for fused producers", ctx);
    d.direction = BQ_FORWARD, d.scale_rule = (bq_scale_rule)8;
    expect_desc_invalid(&d, NULL, "desc.scale_rule (8) is not a bq_scale_rule", ctx);
    d.scale_rule = BQ_SCALE_RULE_DEFAULT, d.scale_layout = (bq_scale_layout)3;
    expect_desc_invalid(&d, NULL, "desc.scale_layout (3) must be BQ_SCALES_ROW_MAJOR", ctx);
    d.scale_layout = BQ_SCALES_ROW_MAJOR, d.float_type = BQ_S8;
    expect_desc_invalid(&d, NULL, "desc.float_type (5, s8) must be BQ_F32", ctx);
    d.float_type = BQ_BF16, d.out_type = BQ_F16;
    expect_desc_invalid(&d, NULL, "desc.out_type (3, f16) applies to linear layers only", ctx);
    d.out_type = BQ_DTYPE_DEFAULT, d.pow2_scales = 1;
    expect_desc_invalid(&d, NULL, "desc.pow2_scales (1) applies to dynamic quantize only", ctx);
    d.pow2_scales = 0, d.scale_type = BQ_UE8M0X4; /* (packed scales: not a microscaling form) */
    expect_desc_invalid(&d, NULL, "desc.scale_type (11, ue8m0x4) must be BQ_UE8M0", ctx);
  }
}

/* the arguments of a microscaling output: E2M1's even groups and code strides, the blocked
   layout's own extent, no zero points, NVFP4's tensor scale (given, or computed into
   out_tensor_scale with a workspace), every pointer and stride by name */
Test(fused_args, microscaling) {
  for (int k = 0; k < NOPS; k++) {
    const bq_desc q = mxdesc(k, BQ_BF16, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    bq_args a = fargs(&q);
    a.out_zero_points = NULL;
    a.group_size = 32;
    const bq_args base = a;
    expect_ok(&q, &a, 0, "MXFP4");
    a.group_size = 7;
    a.cols = 63;
    expect_invalid(&q, &a, "args.group_size (7) is odd: E2M1 packs two elements a byte");
    a = base;
    a.y_row_stride = 257;
    expect_invalid(&q, &a, "args.y_row_stride (257) is odd: E2M1 rows start on a byte");
    a = base;
    a.out_zero_points = (int32_t *)PTR(4);
    expect_invalid(&q, &a, "args.out_zero_points must be NULL: the microscaling formats are symmetric");
    a = base;
    a.out_scales = NULL;
    expect_invalid(&q, &a, "args.out_scales");
    a = base;
    a.tensor_scale = PTR(8);
    expect_invalid(&q, &a, "args.tensor_scale");
    a = base;
    a.group_row_stride = 7;
    expect_invalid(&q, &a, "args.group_row_stride (7) is smaller than cols / group_size (8)");
    /* odd groups of FP8 elements are fine (the generic path) */
    const bq_desc f8 = mxdesc(k, BQ_F32, BQ_E4M3, BQ_UE8M0, BQ_SCALES_MN_MAJOR, BQ_SCALE_FLOOR);
    a = base;
    a.group_size = 1;
    a.y_row_stride = 257;
    a.group_row_stride = 0;
    expect_ok(&f8, &a, 0, "MXFP8 e4m3, groups of 1, MN-major");
    a.group_row_stride = 32;
    expect_invalid(&f8, &a, "args.group_row_stride (32) is smaller than args.rows (33)");
    /* blocked: its own extent */
    const bq_desc b = mxdesc(k, BQ_F16, BQ_E2M1, BQ_UE8M0, BQ_SCALES_BLOCKED, BQ_SCALE_RCEIL);
    a = base;
    expect_ok(&b, &a, 0, "MXFP4 blocked");
    a.group_row_stride = 8;
    expect_invalid(&b, &a, "args.group_row_stride (8) must be 0 with desc.scale_layout BQ_SCALES_BLOCKED");
    /* NVFP4: the tensor scale given (no workspace), or computed (a workspace, out_tensor_scale) */
    const bq_desc nv = mxdesc(k, BQ_BF16, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_NVFP4_TE);
    a = base;
    a.group_size = 16;
    a.tensor_scale = PTR(8);
    expect_ok(&nv, &a, 0, "NVFP4, tensor scale given");
    a.tensor_scale = (const char *)PTR(8) + 2;
    expect_invalid(&nv, &a, "args.tensor_scale");
    a.tensor_scale = NULL;
    expect_invalid(&nv, &a, "args.out_tensor_scale is NULL");
    a.out_tensor_scale = PTR(9);
    bq_plan plan;
    plan_of(&nv, &plan);
    plan.num_sms = 4;
    size_t ws = 0;
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(ws, (size_t)(4 * 8 * 4 + 4), "NVFP4 computed: %zu bytes of workspace (33 rows, 4 SMs)", ws);
    a.rows = 5;
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(ws, (size_t)(5 * 4 + 4), "NVFP4 computed: %zu bytes for 5 rows", ws);
    cr_assert_eq(bq_plan_can_implement(&plan, &a), BQ_SUCCESS, "%s", bq_last_error());
    char buf[64];
    cr_assert_eq(bq_plan_run(&plan, &a, buf, 8, NULL), BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s", bq_last_error());
    a.rows = 0;
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(ws, 0, "no rows, no workspace");
  }
}
