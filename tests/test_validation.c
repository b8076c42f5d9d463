/* test_validation.c - descriptor and argument validation, on a machine with no GPU.

   Descriptor rules go through the public bq_plan_select (it validates the descriptor
   before it needs a GPU: an invalid desc gets BQ_ERROR_INVALID_ARGUMENT, a valid one gets
   as far as the driver, which every test here points at a path that does not exist, so
   BQ_ERROR_NO_DRIVER on any machine) and bq_sku. Argument rules go through a plan built
   by the private bq__plan_init: it has no kernel, so bq_plan_run on it would crash if it
   ever launched. Every invalid-argument case is checked through both
   bq_plan_can_implement and bq_plan_run, which must return the same status and message:
   a run that returns an error on this plan has launched nothing.

   Every message must name the plan ("quantize_per_token_backward: "), the field and the
   offending value, written "field (value)". The combinations cover every op: quantize,
   dequantize and fake quantize in both directions, and dynamic quantize (forward, per
   tensor, token, group or block, symmetric or asymmetric). Criterion runs every test in its own
   process, so each starts with empty in-process state. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__desc_from_sku: the fused producers' SKUs name their descs back */
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_util.h"

/* ---- combinations ------------------------------------------------------------------- */
static const bq_op OPS[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
static const bq_direction DIRS[] = {BQ_FORWARD, BQ_BACKWARD};
static const bq_granularity GRANS[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
static const bq_dtype FTS[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define G_TENSOR (1 << BQ_PER_TENSOR)
#define G_CHANNEL (1 << BQ_PER_CHANNEL)
#define G_TOKEN (1 << BQ_PER_TOKEN)
#define G_GROUP (1 << BQ_PER_GROUP)
#define G_BLOCK (1 << BQ_PER_BLOCK)
#define G_ALL (G_TENSOR | G_CHANNEL | G_TOKEN | G_GROUP | G_BLOCK)
#define G_ROWS (G_TOKEN | G_GROUP | G_BLOCK)

/* which families a loop visits */
#define F_AFFINE 1  /* quantize, dequantize, fake quantize */
#define F_DYNAMIC 2 /* dynamic quantize */
#define F_BOTH 3

static const char *op_str(bq_op op) {
  return op == BQ_QUANTIZE ? "quantize" : op == BQ_DEQUANTIZE ? "dequantize"
       : op == BQ_FAKE_QUANTIZE ? "fake_quantize" : "dynamic_quantize";
}
static const char *gran_str(bq_granularity g) {
  return g == BQ_PER_TENSOR ? "per_tensor" : g == BQ_PER_CHANNEL ? "per_channel"
       : g == BQ_PER_TOKEN ? "per_token" : g == BQ_PER_GROUP ? "per_group" : "per_block";
}
static const char *ft_str(bq_dtype t) {
  return t == BQ_F32 ? "f32" : t == BQ_F64 ? "f64" : t == BQ_F16 ? "f16" : t == BQ_BF16 ? "bf16"
       : t == BQ_S8 ? "s8" : t == BQ_U8 ? "u8" : t == BQ_S32 ? "s32" : "?";
}
static int ft_size(bq_dtype t) { return t == BQ_F64 ? 8 : t == BQ_F32 ? 4 : 2; }
static int is_dyn(const bq_desc *d) { return d->op == BQ_DYNAMIC_QUANTIZE; }

/* One plan: its descriptor, the name its errors must carry, and a label for failures. */
typedef struct combo {
  bq_desc d;
  char name[96];
  char ctx[128];
} combo;

static bq_desc mkdesc(bq_op op, bq_direction dir, bq_granularity g, bq_dtype ft) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.direction = dir;
  d.granularity = g;
  d.float_type = ft;
  return d;
}

/* "dynamic_quantize_per_group_asymmetric", "fake_quantize_per_channel_backward" */
static void plan_name(const bq_desc *d, char *buf, size_t n) {
  snprintf(buf, n, "%s_%s%s%s", op_str(d->op), gran_str(d->granularity),
           is_dyn(d) && d->asymmetric ? "_asymmetric" : "", d->direction == BQ_BACKWARD ? "_backward" : "");
}

static void set_names(combo *c) {
  plan_name(&c->d, c->name, sizeof c->name);
  snprintf(c->ctx, sizeof c->ctx, "[%s %s]", c->name, ft_str(c->d.float_type));
}

/* every valid op x direction x granularity (in gran_mask) x float type (x symmetric or
   asymmetric for dynamic quantize, which is forward only and has no per-channel form) */
static size_t combos_of(combo *out, int gran_mask, int families) {
  size_t n = 0;
  for (size_t g = 0; g < NELEM(GRANS); g++) {
    if (!(gran_mask & (1 << GRANS[g]))) continue;
    for (size_t o = 0; o < NELEM(OPS); o++)
      for (size_t r = 0; r < NELEM(DIRS); r++)
        for (size_t f = 0; f < NELEM(FTS); f++)
          for (int asym = 0; asym < 2; asym++) {
            int dyn = OPS[o] == BQ_DYNAMIC_QUANTIZE;
            if (!(families & (dyn ? F_DYNAMIC : F_AFFINE))) continue;
            if (!dyn && asym) continue;
            if (dyn && (DIRS[r] != BQ_FORWARD || GRANS[g] == BQ_PER_CHANNEL)) continue;
            out[n].d = mkdesc(OPS[o], DIRS[r], GRANS[g], FTS[f]);
            out[n].d.asymmetric = asym;
            set_names(&out[n]);
            n++;
          }
  }
  return n;
}
static size_t combos(combo *out, int gran_mask) { return combos_of(out, gran_mask, F_BOTH); }
#define MAX_COMBOS 160

/* ---- messages ------------------------------------------------------------------------ */
static void clear_error(void) { bq__err_buf[0] = 0; }

/* The last error starts with prefix (unless NULL) and contains needle. */
static void check_msg(const char *prefix, const char *needle, const char *ctx, const char *who) {
  const char *m = bq_last_error();
  cr_assert(m && *m, "%s %s: no error message", ctx, who);
  if (prefix)
    cr_assert(strncmp(m, prefix, strlen(prefix)) == 0,
              "%s %s: message \"%s\" does not start with \"%s\"", ctx, who, m, prefix);
  cr_assert(strstr(m, needle) != NULL, "%s %s: message \"%s\" lacks \"%s\"", ctx, who, m, needle);
}

/* ---- descriptor checks ---------------------------------------------------------------- */
/* Every test points the loader at a driver that does not exist, so a valid descriptor
   gets BQ_ERROR_NO_DRIVER from bq_plan_select on any machine, GPU or not. */
static void no_driver(void) {
  setenv("BARACUDA_QUANT_DRIVER", "/nonexistent/libcuda.so.1", 1);
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
}
TestSuite(desc, .init = no_driver);
TestSuite(args, .init = no_driver);
TestSuite(zero_size, .init = no_driver);
TestSuite(status, .init = no_driver);

/* desc is rejected with `want` by bq_plan_select (which hands back no plan), bq_sku and
   bq__plan_init, each with a message that starts with prefix and contains needle. */
static void expect_desc_status(const bq_desc *desc, bq_status want, const char *prefix, const char *needle,
                               const char *ctx) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  clear_error();
  bq_status st = bq_plan_select(desc, &p);
  cr_assert_eq(st, want, "%s bq_plan_select: got %s (%s), want %s", ctx, bq_status_name(st), bq_last_error(),
               bq_status_name(want));
  cr_assert_null(p, "%s bq_plan_select: failed but left *plan non-NULL", ctx);
  check_msg(prefix, needle, ctx, "bq_plan_select");

  char buf[256] = "untouched";
  clear_error();
  st = bq_sku(desc, 80, buf, sizeof buf);
  cr_assert_eq(st, want, "%s bq_sku: got %s (%s)", ctx, bq_status_name(st), bq_last_error());
  check_msg(prefix, needle, ctx, "bq_sku");

  bq_plan plan;
  clear_error();
  st = bq__plan_init(desc, &plan);
  cr_assert_eq(st, want, "%s bq__plan_init: got %s", ctx, bq_status_name(st));
  check_msg(prefix, needle, ctx, "bq__plan_init");
}
static void expect_desc_invalid(const bq_desc *desc, const char *prefix, const char *needle, const char *ctx) {
  expect_desc_status(desc, BQ_ERROR_INVALID_ARGUMENT, prefix, needle, ctx);
}

/* desc passes validation: bq_plan_select gets as far as the (missing) driver, bq_sku and
   bq__plan_init succeed. */
static void expect_desc_valid(const bq_desc *desc, const char *ctx) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  clear_error();
  bq_status st = bq_plan_select(desc, &p);
  cr_assert_eq(st, BQ_ERROR_NO_DRIVER, "%s bq_plan_select: got %s (%s), want BQ_ERROR_NO_DRIVER", ctx,
               bq_status_name(st), bq_last_error());
  cr_assert_null(p, "%s", ctx);
  cr_assert(strstr(bq_last_error(), "/nonexistent/libcuda.so.1"), "%s: %s", ctx, bq_last_error());
  char buf[256];
  st = bq_sku(desc, 80, buf, sizeof buf);
  cr_assert_eq(st, BQ_SUCCESS, "%s bq_sku: %s (%s)", ctx, bq_status_name(st), bq_last_error());
  bq_plan plan;
  st = bq__plan_init(desc, &plan);
  cr_assert_eq(st, BQ_SUCCESS, "%s bq__plan_init: %s (%s)", ctx, bq_status_name(st), bq_last_error());
}

static void prefix_of(const combo *c, char *buf, size_t n) { snprintf(buf, n, "%s: ", c->name); }

Test(desc, null_desc) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  cr_assert_eq(bq_plan_select(NULL, &p), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_null(p);
  cr_assert(strstr(bq_last_error(), "desc is NULL"), "%s", bq_last_error());
  char buf[64];
  clear_error();
  cr_assert_eq(bq_sku(NULL, 80, buf, sizeof buf), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "desc is NULL"), "%s", bq_last_error());
  clear_error();
  cr_assert_eq(bq_cache_warm(NULL, 80), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "desc is NULL"), "%s", bq_last_error());
}

Test(desc, null_plan_out) {
  bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  cr_assert_eq(bq_plan_select(&d, NULL), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_plan_select: plan is NULL"), "%s", bq_last_error());
}

Test(desc, op_not_a_bq_op) {
  const int bad[] = {BQ_OP_NONE, BQ_FP8_QUANTIZED_LINEAR + 1, 100, -1};
  for (size_t g = 0; g < NELEM(GRANS); g++)
    for (size_t r = 0; r < NELEM(DIRS); r++)
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_desc d = mkdesc((bq_op)bad[b], DIRS[r], GRANS[g], BQ_F32);
        char needle[64], ctx[96];
        snprintf(needle, sizeof needle, "desc.op (%d)", bad[b]);
        snprintf(ctx, sizeof ctx, "[op %d %s dir %d]", bad[b], gran_str(GRANS[g]), (int)DIRS[r]);
        /* no plan name exists without an op: the message names the field and value */
        expect_desc_invalid(&d, NULL, needle, ctx);
      }
}

Test(desc, granularity_not_a_bq_granularity) {
  const int bad[] = {BQ_PER_BLOCK + 1, 7, 1000, -1};
  for (size_t o = 0; o < NELEM(OPS); o++)
    for (size_t r = 0; r < NELEM(DIRS); r++)
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_desc d = mkdesc(OPS[o], DIRS[r], (bq_granularity)bad[b], BQ_F32);
        char prefix[64], needle[64], ctx[96];
        snprintf(prefix, sizeof prefix, "%s: ", op_str(OPS[o])); /* the op is all that is known */
        snprintf(needle, sizeof needle, "desc.granularity (%d)", bad[b]);
        snprintf(ctx, sizeof ctx, "[%s granularity %d]", op_str(OPS[o]), bad[b]);
        expect_desc_invalid(&d, prefix, needle, ctx);
      }
}

Test(desc, direction_not_a_bq_direction) {
  const int bad[] = {2, 3, -1};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.direction != BQ_FORWARD) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.direction = (bq_direction)bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.direction (%d)", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
  }
}

Test(desc, float_type_must_be_a_float_type) {
  const int bad[] = {BQ_DTYPE_DEFAULT, BQ_S8, BQ_U8, BQ_S32, 99, -1};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.float_type != BQ_F32) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.float_type = (bq_dtype)bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.float_type (%d", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
  }
}

Test(desc, int_type_must_be_s8_or_u8) {
  const int bad[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16, BQ_S32, 99, -1};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = (bq_dtype)bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.int_type (%d", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

typedef struct qcase { bq_dtype it; int qmin, qmax; } qcase;

Test(desc, qmin_outside_the_int_type) {
  const qcase bad[] = {{BQ_S8, -129, 127}, {BQ_S8, 128, 127}, {BQ_S8, INT_MIN, 0}, {BQ_S8, -129, 0},
                       {BQ_DTYPE_DEFAULT, -129, 5}, {BQ_U8, -1, 255}, {BQ_U8, 256, 255},
                       {BQ_U8, -1, 0}, {BQ_U8, INT_MAX, 255}};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = bad[b].it;
      d.qmin = bad[b].qmin;
      d.qmax = bad[b].qmax;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.qmin (%d) is outside %s", bad[b].qmin,
               bad[b].it == BQ_U8 ? "u8 [0, 255]" : "s8 [-128, 127]");
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, qmax_outside_the_int_type) {
  const qcase bad[] = {{BQ_S8, -128, 128}, {BQ_S8, 0, -129}, {BQ_S8, 0, INT_MAX}, {BQ_DTYPE_DEFAULT, 0, 200},
                       {BQ_U8, 0, 256}, {BQ_U8, 0, -1}, {BQ_U8, 10, INT_MIN}};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = bad[b].it;
      d.qmin = bad[b].qmin;
      d.qmax = bad[b].qmax;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.qmax (%d) is outside %s", bad[b].qmax,
               bad[b].it == BQ_U8 ? "u8 [0, 255]" : "s8 [-128, 127]");
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, qmax_below_qmin) {
  const qcase bad[] = {{BQ_S8, 5, -5}, {BQ_S8, 1, 0}, {BQ_S8, 0, -1}, {BQ_S8, 127, -128},
                       {BQ_U8, 10, 9}, {BQ_U8, 255, 0}, {BQ_U8, 1, 0}};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = bad[b].it;
      d.qmin = bad[b].qmin;
      d.qmax = bad[b].qmax;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.qmax (%d) < desc.qmin (%d)", bad[b].qmax, bad[b].qmin);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, q_range_edges_are_valid) {
  const qcase ok[] = {{BQ_S8, -128, 127}, {BQ_S8, -128, -128}, {BQ_S8, 127, 127}, {BQ_S8, -5, 0},
                      {BQ_S8, 0, 5}, {BQ_S8, 5, 5}, {BQ_U8, 0, 255}, {BQ_U8, 255, 255},
                      {BQ_U8, 0, 1}, {BQ_U8, 3, 200}, {BQ_U8, 0, 0}, {BQ_S8, 0, 0}};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(ok); b++) {
      bq_desc d = c[i].d;
      d.int_type = ok[b].it;
      d.qmin = ok[b].qmin;
      d.qmax = ok[b].qmax;
      if (is_dyn(&d) && !d.asymmetric && d.qmax <= 0 && !(d.qmin == 0 && d.qmax == 0))
        continue; /* symmetric dynamic quantize needs qmax > 0: tested below */
      if (is_dyn(&d) && d.asymmetric && d.qmin == d.qmax && d.qmin != 0)
        continue; /* asymmetric dynamic quantize with one level: tested below */
      expect_desc_valid(&d, c[i].ctx);
    }
}

Test(desc, scale_type_must_be_the_float_type_or_f32) {
  const bq_dtype all[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16, BQ_S8, BQ_U8, BQ_S32};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(all); b++) {
      bq_desc d = c[i].d;
      d.scale_type = all[b];
      if (all[b] == d.float_type || all[b] == BQ_F32) {
        expect_desc_valid(&d, c[i].ctx);
        continue;
      }
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.scale_type (%d, %s)", (int)all[b], ft_str(all[b]));
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

/* A scale_type outside bq_dtype must be named by its value, like float_type and int_type
   are. (The library prints bq__dtype_name's "default" for it: the one spelling that
   names a valid value.) */
Test(desc, scale_type_outside_the_enum_names_its_value) {
  const int bad[] = {99, -1};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.scale_type = (bq_dtype)bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.scale_type (%d", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, device_negative) {
  const int bad[] = {-1, -7, INT_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.device = bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.device (%d)", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
    bq_desc d = c[i].d;
    d.device = 3; /* any ordinal >= 0 passes validation; the driver judges it */
    expect_desc_valid(&d, c[i].ctx);
  }
}

/* Every valid combination reaches the driver: BQ_ERROR_NO_DRIVER, not INVALID_ARGUMENT. */
Test(desc, every_valid_combination_reaches_the_driver) {
  const bq_dtype its[] = {BQ_DTYPE_DEFAULT, BQ_S8, BQ_U8};
  const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t a = 0; a < NELEM(its); a++)
      for (size_t s = 0; s < NELEM(sts); s++) {
        bq_desc d = c[i].d;
        d.int_type = its[a];
        d.scale_type = sts[s];
        expect_desc_valid(&d, c[i].ctx);
      }
}

/* Zero means default: direction forward, granularity per tensor, int_type s8,
   qmin = qmax = 0 the full range, scale_type f32 (per tensor: the compute type C, since
   the scale is a host scalar converted once to C). */
Test(desc, defaults_normalize_as_documented) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    bq_desc in = c[i].d, out;
    char name[96];
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
    cr_assert_str_eq(name, c[i].name);
    cr_assert_eq(out.op, in.op);
    cr_assert_eq(out.direction, in.direction);
    cr_assert_eq(out.granularity, in.granularity);
    cr_assert_eq(out.float_type, in.float_type);
    cr_assert_eq(out.int_type, BQ_S8, "%s: int_type default", c[i].ctx);
    cr_assert_eq(out.qmin, -128, "%s", c[i].ctx);
    cr_assert_eq(out.qmax, 127, "%s", c[i].ctx);
    /* per tensor, the affine ops take a host scalar (C); dynamic quantize writes a device
       scale in scale_type at every granularity */
    int host_scale = in.granularity == BQ_PER_TENSOR && !is_dyn(&in);
    bq_dtype want_st = host_scale ? (in.float_type == BQ_F64 ? BQ_F64 : BQ_F32) : BQ_F32;
    cr_assert_eq(out.asymmetric, in.asymmetric);
    cr_assert_eq(out.scale_type, want_st, "%s: scale_type %d, want %d", c[i].ctx, (int)out.scale_type,
                 (int)want_st);
    cr_assert_eq(out.device, 0);

    /* u8: the full range is [0, 255] */
    in.int_type = BQ_U8;
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS);
    cr_assert_eq(out.int_type, BQ_U8);
    cr_assert_eq(out.qmin, 0, "%s", c[i].ctx);
    cr_assert_eq(out.qmax, 255, "%s", c[i].ctx);

    /* only both zero means "default": [-5, 0] and [0, 5] stay as given */
    in.int_type = BQ_DTYPE_DEFAULT;
    in.qmin = -5;
    if (!is_dyn(&in) || in.asymmetric) { /* symmetric dynamic needs qmax > 0 */
      cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS);
      cr_assert_eq(out.qmin, -5);
      cr_assert_eq(out.qmax, 0);
    }
    in.qmin = 0;
    in.qmax = 5;
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS);
    cr_assert_eq(out.qmin, 0);
    cr_assert_eq(out.qmax, 5);

    /* explicit scale_type F32 or the float type is kept (per tensor: still the compute type) */
    in = c[i].d;
    in.scale_type = BQ_F32;
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS);
    want_st = host_scale ? (in.float_type == BQ_F64 ? BQ_F64 : BQ_F32) : BQ_F32;
    cr_assert_eq(out.scale_type, want_st, "%s", c[i].ctx);
    in.scale_type = in.float_type;
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS);
    want_st = host_scale ? (in.float_type == BQ_F64 ? BQ_F64 : BQ_F32) : in.float_type;
    cr_assert_eq(out.scale_type, want_st, "%s", c[i].ctx);
  }

  /* a desc with nothing but op and float_type is a forward per-tensor s8 full-range plan */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_F16;
  char sku[256], sku2[256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "quantize.fwd.per_tensor.f16.s8.q[-128,127].scale_f32."), "%s", sku);
  /* and it is the very SKU of the same plan spelled out */
  d.direction = BQ_FORWARD;
  d.granularity = BQ_PER_TENSOR;
  d.int_type = BQ_S8;
  d.qmin = -128;
  d.qmax = 127;
  d.scale_type = BQ_F16;
  cr_assert_eq(bq_sku(&d, 90, sku2, sizeof sku2), BQ_SUCCESS);
  cr_assert_str_eq(sku, sku2);
  /* the same with u8 and a per-group bf16 plan: scale_type defaults to f32; bf16 scales
     are asked for by name */
  memset(&d, 0, sizeof d);
  d.op = BQ_DEQUANTIZE;
  d.granularity = BQ_PER_GROUP;
  d.float_type = BQ_BF16;
  d.int_type = BQ_U8;
  cr_assert_eq(bq_sku(&d, 80, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dequantize.fwd.per_group.bf16.u8.q[0,255].scale_f32."), "%s", sku);
  d.scale_type = BQ_BF16;
  cr_assert_eq(bq_sku(&d, 80, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dequantize.fwd.per_group.bf16.u8.q[0,255].scale_bf16."), "%s", sku);
}

/* BQ_GRANULARITY_DEFAULT (0) is per tensor for the affine ops and dynamic quantize: the
   normalized desc, the plan name and the SKU are those of an explicit BQ_PER_TENSOR. */
Test(desc, default_granularity_is_per_tensor) {
  for (size_t o = 0; o < NELEM(OPS); o++)
    for (size_t f = 0; f < NELEM(FTS); f++) {
      bq_desc def = mkdesc(OPS[o], BQ_FORWARD, BQ_GRANULARITY_DEFAULT, FTS[f]);
      bq_desc exp = mkdesc(OPS[o], BQ_FORWARD, BQ_PER_TENSOR, FTS[f]), a, b;
      char n1[96], n2[96], s1[256], s2[256];
      cr_assert_eq(bq__normalize(&def, &a, n1, sizeof n1), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert_eq(bq__normalize(&exp, &b, n2, sizeof n2), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert_eq(a.granularity, BQ_PER_TENSOR, "%s %s", op_str(OPS[o]), ft_str(FTS[f]));
      cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "%s %s", op_str(OPS[o]), ft_str(FTS[f]));
      cr_assert_str_eq(n1, n2);
      cr_assert(strstr(n1, "_per_tensor"), "%s", n1);
      cr_assert_eq(bq_sku(&def, 90, s1, sizeof s1), BQ_SUCCESS);
      cr_assert_eq(bq_sku(&exp, 90, s2, sizeof s2), BQ_SUCCESS);
      cr_assert_str_eq(s1, s2);
      cr_assert(strstr(s1, ".per_tensor."), "%s", s1);
    }
  /* the enum's values: DEFAULT is 0, the rest shifted by one */
  cr_assert_eq(BQ_GRANULARITY_DEFAULT, 0);
  cr_assert_eq(BQ_PER_TENSOR, 1);
  cr_assert_eq(BQ_PER_GROUP, 4);
}

/* The kernels read a granularity by its name, which the prelude defines as the public
   enum's value: the source a desc compiles to says `#define BQ_GRAN BQ_GRAN_TOKEN`. */
Test(desc, kernel_granularity_names) {
  const bq_granularity g[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP};
  const char *const names[] = {"BQ_GRAN_TENSOR", "BQ_GRAN_CHANNEL", "BQ_GRAN_TOKEN", "BQ_GRAN_GROUP"};
  for (int k = 0; k < 4; k++) {
    bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, g[k], BQ_F32);
    bq__target t = {90, 0, 0, 0};
    bq__kernel_src ks;
    char want[64], value[64];
    snprintf(want, sizeof want, "#define BQ_GRAN %s\n", names[k]);
    snprintf(value, sizeof value, "#define %s %d\n", names[k], (int)g[k]);
    cr_assert_eq(bq__kernel_for(&d, &t, &ks), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strstr(ks.source.p, want) && strstr(ks.source.p, value), "%s%s not in the affine source", want, value);
    BQ_FREE(ks.source.p);
    if (g[k] == BQ_PER_CHANNEL) continue;
    d.op = BQ_DYNAMIC_QUANTIZE;
    cr_assert_eq(bq__kernel_for(&d, &t, &ks), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strstr(ks.source.p, want) && strstr(ks.source.p, value), "%s%s not in the dynamic source", want, value);
    BQ_FREE(ks.source.p);
  }
}

/* scale_type 0 means f32 for every float type: device scale arrays of the affine ops and
   dynamic quantize's out_scales; the float type itself stays available by name. */
Test(desc, default_scale_type_is_f32) {
  char sku[256];
  for (size_t f = 0; f < NELEM(FTS); f++) {
    bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, FTS[f]);
    cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
    cr_assert(strstr(sku, ".scale_f32."), "%s", sku);
    d.granularity = BQ_GRANULARITY_DEFAULT; /* per tensor: the one dynamic scale too */
    cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
    cr_assert(strstr(sku, "dynamic_quantize.fwd.per_tensor.") && strstr(sku, ".scale_f32."), "%s", sku);
    d = mkdesc(BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, FTS[f]);
    cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
    cr_assert(strstr(sku, ".scale_f32."), "%s", sku);
    d.scale_type = FTS[f];
    cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
    char want[32];
    snprintf(want, sizeof want, ".scale_%s.", ft_str(FTS[f]));
    cr_assert(strstr(sku, want), "%s", sku);
  }
  bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16);
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dynamic_quantize.fwd.per_token.bf16.s8.q[-128,127].scale_f32."), "%s", sku);
}

/* desc.device: BQ_DEVICE_CURRENT is 0, BQ_DEVICE(n) is n + 1; both pass validation and
   are kept in the normalized desc; a negative value is named. */
Test(desc, device_macros) {
  cr_assert_eq(BQ_DEVICE_CURRENT, 0);
  cr_assert_eq(BQ_DEVICE(0), 1);
  cr_assert_eq(BQ_DEVICE(3), 4);
  const int devs[] = {BQ_DEVICE_CURRENT, BQ_DEVICE(0), BQ_DEVICE(1), BQ_DEVICE(7)};
  for (size_t k = 0; k < NELEM(devs); k++) {
    bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16), out;
    d.device = devs[k];
    char name[96];
    cr_assert_eq(bq__normalize(&d, &out, name, sizeof name), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(out.device, devs[k]);
    expect_desc_valid(&d, "device macro");
  }
  bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16);
  d.device = BQ_DEVICE(-2);
  expect_desc_invalid(&d, "dynamic_quantize_per_token: ", "desc.device (-1) is negative", "BQ_DEVICE(-2)");
  /* bq_set_device: a negative ordinal is named; a valid one reaches the (missing) driver */
  clear_error();
  cr_assert_eq(bq_set_device(-1), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_set_device: ordinal (-1) is negative"), "%s", bq_last_error());
  cr_assert_eq(bq_set_device(0), BQ_ERROR_NO_DRIVER, "%s", bq_last_error());
}

/* ---- dynamic quantize's own rules ---- */
Test(desc, asymmetric_applies_to_dynamic_quantize_only) {
  const int bad[] = {1, 2, -1};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_AFFINE);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.asymmetric = bad[b];
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.asymmetric (%d)", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, dynamic_quantize_asymmetric_is_0_or_1) {
  const int bad[] = {2, 7, -1};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_DYNAMIC);
  cr_assert_eq(n, 32);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.asymmetric = bad[b];
      char name[96], prefix[128], needle[64];
      plan_name(&d, name, sizeof name);
      snprintf(prefix, sizeof prefix, "%s: ", name);
      snprintf(needle, sizeof needle, "desc.asymmetric (%d) must be 0 or 1", bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
}

Test(desc, dynamic_quantize_is_forward_only) {
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_DYNAMIC);
  for (size_t i = 0; i < n; i++) {
    bq_desc d = c[i].d;
    d.direction = BQ_BACKWARD;
    char name[96], prefix[128];
    plan_name(&d, name, sizeof name);
    snprintf(prefix, sizeof prefix, "%s: ", name);
    expect_desc_invalid(&d, prefix, "desc.direction (backward)", c[i].ctx);
  }
}

/* per channel is a weight layout: not offered (NOT_SUPPORTED, not a malformed desc) */
Test(desc, dynamic_quantize_per_channel_not_supported) {
  for (size_t f = 0; f < NELEM(FTS); f++)
    for (int asym = 0; asym < 2; asym++) {
      bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, FTS[f]);
      d.asymmetric = asym;
      char name[96], prefix[128];
      plan_name(&d, name, sizeof name);
      snprintf(prefix, sizeof prefix, "%s: ", name);
      expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, prefix, "desc.granularity (per_channel)", name);
    }
}

/* s = amax / qmax: symmetric needs qmax > 0 */
Test(desc, dynamic_quantize_symmetric_needs_positive_qmax) {
  const qcase bad[] = {{BQ_S8, -5, 0}, {BQ_S8, -128, -1}, {BQ_S8, -128, -128}, {BQ_S8, -1, -1}};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_DYNAMIC);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = bad[b].it;
      d.qmin = bad[b].qmin;
      d.qmax = bad[b].qmax;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.qmax (%d) must be > 0", bad[b].qmax);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      d.asymmetric = 1; /* the asymmetric form takes the same range if it has two levels */
      if (d.qmin < d.qmax) expect_desc_valid(&d, c[i].ctx);
    }
    bq_desc d = c[i].d;
    d.qmin = -5;
    d.qmax = 1;
    expect_desc_valid(&d, c[i].ctx);
  }
}

/* s = (hi - lo) / (qmax - qmin): asymmetric needs qmax > qmin, as symmetric needs qmax > 0.
   A one-level range divides by zero: every scale it writes is +inf, and dequantizing its
   output gives (q - zp) * inf = 0 * inf = NaN. It must be rejected at select. */
Test(desc, dynamic_quantize_asymmetric_needs_two_levels) {
  const qcase bad[] = {{BQ_S8, 5, 5}, {BQ_S8, -128, -128}, {BQ_S8, 127, 127}, {BQ_U8, 255, 255}, {BQ_U8, 7, 7}};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_DYNAMIC);
  for (size_t i = 0; i < n; i++) {
    if (!c[i].d.asymmetric) continue;
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.int_type = bad[b].it;
      d.qmin = bad[b].qmin;
      d.qmax = bad[b].qmax;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      snprintf(needle, sizeof needle, "desc.qmax (%d)", bad[b].qmax);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
  }
}

Test(desc, bq_sku_buffer) {
  bq_desc d = mkdesc(BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16);
  char buf[256];
  cr_assert_eq(bq_sku(&d, 90, buf, sizeof buf), BQ_SUCCESS);
  size_t len = strlen(buf);
  cr_assert(len > 10);
  clear_error();
  cr_assert_eq(bq_sku(&d, 90, NULL, sizeof buf), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_sku: buf"), "%s", bq_last_error());
  clear_error();
  cr_assert_eq(bq_sku(&d, 90, buf, 0), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_sku: buf"), "%s", bq_last_error());
  char small[256];
  char needle[64];
  snprintf(needle, sizeof needle, "buf_size (%zu)", len);
  clear_error();
  cr_assert_eq(bq_sku(&d, 90, small, len), BQ_ERROR_INVALID_ARGUMENT); /* no room for the NUL */
  cr_assert(strstr(bq_last_error(), needle), "%s lacks %s", bq_last_error(), needle);
  memset(small, 'x', sizeof small);
  cr_assert_eq(bq_sku(&d, 90, small, len + 1), BQ_SUCCESS);
  cr_assert_str_eq(small, buf);
}

/* ---- argument checks -------------------------------------------------------------------- */
/* Device pointers are never dereferenced on the host: fake, well-aligned addresses. */
#define PX ((uintptr_t)0x100000)
#define PY ((uintptr_t)0x200000)
#define PDY ((uintptr_t)0x300000)
#define PDX ((uintptr_t)0x400000)
#define PS ((uintptr_t)0x500000)
#define PZ ((uintptr_t)0x600000)
#define POS ((uintptr_t)0x700000)
#define POZ ((uintptr_t)0x800000)

/* A valid, non-empty call for the combination's granularity (every pointer set). */
static bq_args base_args(bq_granularity g) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = (const void *)PX;
  a.y = (void *)PY;
  a.dy = (const void *)PDY;
  a.dx = (void *)PDX;
  a.scales = (const void *)PS;
  a.zero_points = (const int32_t *)PZ;
  a.out_scales = (void *)POS;
  a.out_zero_points = (int32_t *)POZ;
  switch (g) {
  case BQ_GRANULARITY_DEFAULT:
  case BQ_PER_TENSOR: a.numel = 1000; a.scale = 0.25; a.zero_point = 3; break;
  case BQ_PER_CHANNEL: a.rank = 3; a.shape[0] = 2; a.shape[1] = 3; a.shape[2] = 5; a.axis = 1; break;
  case BQ_PER_TOKEN: a.rows = 4; a.cols = 64; break;
  case BQ_PER_GROUP: a.rows = 4; a.cols = 64; a.group_size = 16; break;
  case BQ_PER_BLOCK: a.rows = 40; a.cols = 64; a.group_size = 16; break; /* 3 x 4 tiles, the last row of them partial */
  }
  return a;
}

/* can_implement and run both reject a with a message "<plan name>: ..." containing needle,
   and the same message: run validated and launched nothing (the plan has no kernel). */

static void expect_args_invalid(const combo *c, const bq_args *a, const char *needle) {
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&c->d, &plan), BQ_SUCCESS, "%s: %s", c->ctx, bq_last_error());
  for (int e = 0; e < BQ__MAX_KERNELS; e++) cr_assert_null(plan.mod[e]);
  char prefix[128], msg[1024];
  prefix_of(c, prefix, sizeof prefix);
  clear_error();
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s can_implement: got %s (%s), want BQ_ERROR_INVALID_ARGUMENT [%s]",
               c->ctx, bq_status_name(st), bq_last_error(), needle);
  check_msg(prefix, needle, c->ctx, "bq_plan_can_implement");
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  clear_error();
  st = bq_plan_run(&plan, a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s run: got %s (%s)", c->ctx, bq_status_name(st), bq_last_error());
  cr_assert_str_eq(bq_last_error(), msg, "%s: run says \"%s\", can_implement said \"%s\"", c->ctx,
                   bq_last_error(), msg);
  expect_workspace_agrees(&plan, a, BQ_ERROR_INVALID_ARGUMENT, msg, c->ctx);
}

/* can_implement accepts a. With run_too (only for zero-size calls, which launch nothing),
   run accepts it as well. */
static void expect_args_ok(const combo *c, const bq_args *a, int run_too, const char *what) {
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&c->d, &plan), BQ_SUCCESS, "%s: %s", c->ctx, bq_last_error());
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, BQ_SUCCESS, "%s %s: can_implement: %s (%s)", c->ctx, what, bq_status_name(st), bq_last_error());
  expect_workspace_agrees(&plan, a, BQ_SUCCESS, "", c->ctx);
  if (run_too) {
    st = bq_plan_run(&plan, a, NULL, 0, NULL);
    cr_assert_eq(st, BQ_SUCCESS, "%s %s: run: %s (%s)", c->ctx, what, bq_status_name(st), bq_last_error());
  }
}

Test(args, null_plan) {
  bq_args a = base_args(BQ_PER_TENSOR);
  cr_assert_eq(bq_plan_can_implement(NULL, &a), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_plan_can_implement: plan is NULL"), "%s", bq_last_error());
  cr_assert_eq(bq_plan_run(NULL, &a, NULL, 0, NULL), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "bq_plan_run: plan is NULL"), "%s", bq_last_error());
}

Test(args, null_args) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) expect_args_invalid(&c[i], NULL, "args is NULL");
}

Test(args, the_base_arguments_are_valid) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(c[i].d.granularity);
    expect_args_ok(&c[i], &a, 0, "base");
  }
}

/* ---- per tensor ---- */
Test(args, per_tensor_numel_negative) {
  const int64_t bad[] = {-1, -1000, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_TENSOR);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_TENSOR);
      a.numel = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.numel (%lld)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

Test(args, per_tensor_numel_too_large) {
  const int64_t bad[] = {((int64_t)1 << 56) + 1, (int64_t)1 << 62, INT64_MAX};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_TENSOR);
  for (size_t i = 0; i < n; i++) {
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_TENSOR);
      a.numel = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.numel (%lld)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
    bq_args a = base_args(BQ_PER_TENSOR);
    a.numel = (int64_t)1 << 56; /* the limit itself is fine */
    expect_args_ok(&c[i], &a, 0, "numel 2^56");
  }
}

static void expect_scale_rejected(const combo *c, double s) {
  bq_args a = base_args(BQ_PER_TENSOR);
  a.scale = s;
  char needle[64];
  snprintf(needle, sizeof needle, "args.scale (%g)", s);
  expect_args_invalid(c, &a, needle);
}
static void expect_scale_accepted(const combo *c, double s) {
  bq_args a = base_args(BQ_PER_TENSOR);
  a.scale = s;
  char what[64];
  snprintf(what, sizeof what, "scale %g", s);
  expect_args_ok(c, &a, 0, what);
}

Test(args, per_tensor_scale_zero_or_negative) {
  const double bad[] = {0.0, -0.0, -1.0, -1e-30, -DBL_MAX, -INFINITY};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_TENSOR, F_AFFINE);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) expect_scale_rejected(&c[i], bad[b]);
}

Test(args, per_tensor_scale_nan_or_inf) {
  const double bad[] = {NAN, -NAN, INFINITY};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_TENSOR, F_AFFINE);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) expect_scale_rejected(&c[i], bad[b]);
}

/* The scale is converted once to C: f32 for f32/f16/bf16 plans. A double that overflows
   (or underflows to 0 in) f32 is rejected there and accepted by an f64 plan. */
Test(args, per_tensor_scale_not_representable_in_f32) {
  const double f32_bad[] = {1e300, 1e39, DBL_MAX, 1e-50, 1e-300, DBL_TRUE_MIN};
  const double good[] = {FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 1.0, 0.5, 3e-10};
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_TENSOR, F_AFFINE);
  for (size_t i = 0; i < n; i++) {
    for (size_t b = 0; b < NELEM(f32_bad); b++) {
      if (c[i].d.float_type == BQ_F64) expect_scale_accepted(&c[i], f32_bad[b]);
      else expect_scale_rejected(&c[i], f32_bad[b]);
    }
    for (size_t b = 0; b < NELEM(good); b++) expect_scale_accepted(&c[i], good[b]);
  }
}

/* Other granularities take their scales from a device array, and dynamic quantize computes
   them: args.scale is ignored. */
Test(args, host_scale_ignored_unless_per_tensor_affine) {
  const double ignored[] = {0.0, -1.0, NAN, INFINITY, 1e300};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(ignored); b++) {
      if (c[i].d.granularity == BQ_PER_TENSOR && !is_dyn(&c[i].d)) continue;
      bq_args a = base_args(c[i].d.granularity);
      a.scale = ignored[b];
      expect_args_ok(&c[i], &a, 0, "ignored args.scale");
    }
}

/* ---- per channel ---- */
Test(args, per_channel_rank_out_of_range) {
  const int bad[] = {0, 9, -1, 100, INT_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++) {
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_CHANNEL);
      a.rank = bad[b];
      a.axis = 0;
      for (int k = 0; k < BQ_MAX_RANK; k++) a.shape[k] = 2;
      char needle[64];
      snprintf(needle, sizeof needle, "args.rank (%d)", bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
    for (int r = 1; r <= BQ_MAX_RANK; r++) {
      bq_args a = base_args(BQ_PER_CHANNEL);
      a.rank = r;
      a.axis = r - 1;
      for (int k = 0; k < BQ_MAX_RANK; k++) a.shape[k] = 2;
      expect_args_ok(&c[i], &a, 0, "rank 1..8");
    }
  }
}

Test(args, per_channel_axis_out_of_range) {
  const int bad[] = {3, 4, 8, INT_MAX, -4, -5, INT_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_CHANNEL); /* rank 3 */
      a.axis = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.axis (%d) is out of range for rank 3", bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

/* axis -k means rank - k, as in PyTorch: accepted, and the same view as the positive axis */
Test(args, per_channel_negative_axis) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++) {
    bq_plan plan;
    cr_assert_eq(bq__plan_init(&c[i].d, &plan), BQ_SUCCESS);
    for (int ax = -3; ax < 0; ax++) {
      bq_args a = base_args(BQ_PER_CHANNEL);
      a.shape[0] = 2; a.shape[1] = 3; a.shape[2] = 5;
      a.axis = ax;
      expect_args_ok(&c[i], &a, 0, "negative axis");
      bq__view vn, vp;
      cr_assert_eq(bq__view_of(&plan, &a, &vn), BQ_SUCCESS);
      a.axis = ax + 3;
      cr_assert_eq(bq__view_of(&plan, &a, &vp), BQ_SUCCESS);
      cr_assert_eq(memcmp(&vn, &vp, sizeof vn), 0, "%s: axis %d and %d give different views", c[i].ctx, ax, ax + 3);
      /* group = elements after the axis, gmod = the axis's length */
      const int64_t inner[] = {15, 5, 1}, len[] = {2, 3, 5};
      cr_assert_eq(vn.group, inner[ax + 3], "%s axis %d: group %lld", c[i].ctx, ax, (long long)vn.group);
      cr_assert_eq(vn.gmod, len[ax + 3], "%s axis %d: gmod %lld", c[i].ctx, ax, (long long)vn.gmod);
      cr_assert_eq(vn.numel, 30);
    }
  }
}

Test(args, per_channel_shape_negative) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) {
      bq_args a = base_args(BQ_PER_CHANNEL);
      a.rank = 4;
      a.axis = 2;
      for (int j = 0; j < 4; j++) a.shape[j] = 3;
      a.shape[k] = k == 1 ? INT64_MIN : -2;
      char needle[64];
      snprintf(needle, sizeof needle, "args.shape[%d] (%lld) is negative", k, (long long)a.shape[k]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

/* entries past rank are not part of the tensor */
Test(args, per_channel_shape_past_rank_ignored) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_CHANNEL);
    for (int k = a.rank; k < BQ_MAX_RANK; k++) a.shape[k] = -1;
    expect_args_ok(&c[i], &a, 0, "junk past rank");
  }
}

Test(args, per_channel_shape_too_large) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_CHANNEL);
    a.rank = 2;
    a.axis = 0;
    a.shape[0] = (int64_t)1 << 30;
    a.shape[1] = (int64_t)1 << 30;
    expect_args_invalid(&c[i], &a, "args.shape[1] (1073741824) makes the tensor too large");
    a.shape[0] = INT64_MAX;
    a.shape[1] = 1;
    expect_args_invalid(&c[i], &a, "args.shape[0] (9223372036854775807) makes the tensor too large");
    /* the product is checked, not each entry: 2^20 * 2^20 * 2^20 */
    a.rank = 3;
    a.shape[0] = a.shape[1] = a.shape[2] = (int64_t)1 << 20;
    expect_args_invalid(&c[i], &a, "args.shape[2] (1048576) makes the tensor too large");
    /* 2^28 * 2^28 = 2^56 is the limit itself */
    a.rank = 2;
    a.shape[0] = a.shape[1] = (int64_t)1 << 28;
    expect_args_ok(&c[i], &a, 0, "2^56 elements");
  }
}

/* At most 2^39 channels, whichever the axis: bq_affine_cols (axis innermost) launches a
   block for every 256 lanes of columns with no stride, in a grid x of at most 2^31 - 1. */
Test(args, per_channel_channel_count_bound) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  const int64_t max = (int64_t)1 << 39;
  for (size_t i = 0; i < n; i++)
    for (int axis = 0; axis < 2; axis++) {
      bq_args a = base_args(BQ_PER_CHANNEL);
      a.rank = 2;
      a.axis = axis;
      a.shape[axis] = max;
      a.shape[1 - axis] = 3;
      expect_args_ok(&c[i], &a, 0, "2^39 channels");
      a.shape[axis] = max + 1;
      char needle[96];
      snprintf(needle, sizeof needle, "args.shape[%d] (%lld) has more than 2^39 channels", axis, (long long)(max + 1));
      expect_args_invalid(&c[i], &a, needle);
      a.axis = axis - 2; /* the same axis, counted from the end */
      expect_args_invalid(&c[i], &a, needle);
      /* an empty tensor launches nothing: only its element count is bounded */
      a.shape[1 - axis] = 0;
      expect_args_ok(&c[i], &a, 1, "empty, 2^39 + 1 channels");
    }
}

/* ---- per token and per group: rows, cols, row strides ---- */
Test(args, rows_negative_or_too_large) {
  const int64_t bad[] = {-1, INT64_MIN, ((int64_t)1 << 56) + 1, INT64_MAX};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(c[i].d.granularity);
      a.rows = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.rows (%lld)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

Test(args, cols_negative_or_too_large) {
  const int64_t bad[] = {-1, -64, INT64_MIN, ((int64_t)1 << 56) + 16, INT64_MAX};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(c[i].d.granularity);
      a.cols = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.cols (%lld)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

Test(args, x_row_stride_smaller_than_cols) {
  const int64_t bad[] = {63, 1, -1, -64, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(c[i].d.granularity); /* cols 64 */
      a.x_row_stride = bad[b];
      char needle[96];
      snprintf(needle, sizeof needle, "args.x_row_stride (%lld) is smaller than args.cols (64)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

Test(args, y_row_stride_smaller_than_cols) {
  const int64_t bad[] = {63, 1, -1, -64, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(c[i].d.granularity);
      a.y_row_stride = bad[b];
      char needle[96];
      snprintf(needle, sizeof needle, "args.y_row_stride (%lld) is smaller than args.cols (64)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

/* a negative stride is rejected even where cols is 0 (nothing to move) */
Test(args, negative_row_stride_with_zero_cols) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(c[i].d.granularity);
    a.cols = 0;
    a.x_row_stride = -1;
    expect_args_invalid(&c[i], &a, "args.x_row_stride (-1) is smaller than args.cols (0)");
    a.x_row_stride = 0;
    a.y_row_stride = -3;
    expect_args_invalid(&c[i], &a, "args.y_row_stride (-3) is smaller than args.cols (0)");
  }
}

Test(args, row_strides_zero_equal_or_larger_accepted) {
  const int64_t ok[] = {0, 64, 65, 80, 1000};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++)
    for (size_t x = 0; x < NELEM(ok); x++)
      for (size_t y = 0; y < NELEM(ok); y++) {
        bq_args a = base_args(c[i].d.granularity);
        a.x_row_stride = ok[x];
        a.y_row_stride = ok[y];
        expect_args_ok(&c[i], &a, 0, "row strides");
      }
}

Test(args, rows_times_row_stride_overflows) {
  const int64_t big = (int64_t)1 << 30;
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(c[i].d.granularity);
    a.rows = big;
    a.x_row_stride = big; /* 2^60 elements */
    expect_args_invalid(&c[i], &a, "args.rows (1073741824) times the row stride is too large");
    a.x_row_stride = 0;
    a.y_row_stride = big;
    expect_args_invalid(&c[i], &a, "args.rows (1073741824) times the row stride is too large");
    /* the default stride (cols) counts too */
    a.y_row_stride = 0;
    a.rows = (int64_t)1 << 20;
    a.cols = (int64_t)1 << 40;
    expect_args_invalid(&c[i], &a, "args.rows (1048576) times the row stride is too large");
    /* stride at INT64_MAX: no wrap-around into a small product */
    a.rows = 2;
    a.cols = 64;
    a.x_row_stride = INT64_MAX;
    expect_args_invalid(&c[i], &a, "args.rows (2) times the row stride is too large");
    /* 2^28 rows of 2^28: the limit itself */
    a.rows = (int64_t)1 << 28;
    a.cols = 64;
    a.x_row_stride = (int64_t)1 << 28;
    a.y_row_stride = 0;
    expect_args_ok(&c[i], &a, 0, "rows * stride == 2^56");
  }
}

/* ---- per group ---- */
Test(args, group_size_below_one) {
  const int64_t bad[] = {0, -1, -16, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_GROUP);
      a.group_size = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.group_size (%lld) must be >= 1", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
      a.rows = 0; /* even with nothing to do */
      expect_args_invalid(&c[i], &a, needle);
    }
}

Test(args, group_size_does_not_divide_cols) {
  const int64_t bad[] = {3, 7, 48, 65, 128, INT64_MAX};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_GROUP); /* cols 64 */
      a.group_size = bad[b];
      char needle[96];
      snprintf(needle, sizeof needle, "args.group_size (%lld) does not divide args.cols (64)", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
    const int64_t ok[] = {1, 2, 32, 64};
    for (size_t b = 0; b < NELEM(ok); b++) {
      bq_args a = base_args(BQ_PER_GROUP);
      a.group_size = ok[b];
      expect_args_ok(&c[i], &a, 0, "group_size divides cols");
    }
  }
}

/* per token has no groups: group_size and group_row_stride are not looked at */
Test(args, per_token_ignores_group_fields) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_TOKEN);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_TOKEN);
    a.group_size = -5;
    a.group_row_stride = -7;
    expect_args_ok(&c[i], &a, 0, "ignored group fields");
  }
}

Test(args, group_row_stride_smaller_than_groups_per_row) {
  const int64_t bad[] = {3, 1};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_GROUP); /* 64 / 16 = 4 groups per row */
      a.group_row_stride = bad[b];
      char needle[128];
      snprintf(needle, sizeof needle, "args.group_row_stride (%lld) is smaller than cols / group_size (4)",
               (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
    }
}

/* a negative leading dimension is named as such, whatever the layout, granularity or rows */
Test(args, group_row_stride_negative) {
  const int64_t bad[] = {-1, -4, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP | G_BLOCK);
  for (size_t i = 0; i < n; i++)
    for (int mn = 0; mn < 2; mn++) {
      combo cc = c[i];
      if (mn && cc.d.granularity != BQ_PER_GROUP) continue;
      cc.d.scale_layout = mn ? BQ_SCALES_MN_MAJOR : BQ_SCALES_ROW_MAJOR;
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_args a = base_args(cc.d.granularity);
        a.group_row_stride = bad[b];
        char needle[128];
        snprintf(needle, sizeof needle, "args.group_row_stride (%lld) is negative", (long long)bad[b]);
        expect_args_invalid(&cc, &a, needle);
        a.rows = 0; /* even with nothing to do */
        expect_args_invalid(&cc, &a, needle);
      }
    }
}

Test(args, group_row_stride_too_large) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_GROUP);
    a.rows = (int64_t)1 << 20;
    a.group_row_stride = (int64_t)1 << 40;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (1099511627776) is too large");
    a.rows = 2;
    a.group_row_stride = INT64_MAX;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (9223372036854775807) is too large");
    /* the bound: rows * group_row_stride <= 2^56 entries, 2^54 int32 words of packed scales
       (whose kernels index bytes) */
    const int x4 = c[i].d.scale_type == BQ_UE8M0X4;
    const int64_t lim = (int64_t)1 << (x4 ? 34 : 36);
    char msg[96];
    a.rows = (int64_t)1 << 20;
    a.group_row_stride = lim + 1;
    snprintf(msg, sizeof msg, "args.group_row_stride (%lld) is too large", (long long)(lim + 1));
    expect_args_invalid(&c[i], &a, msg);
    a.group_row_stride = lim;
    expect_args_ok(&c[i], &a, 0, "rows * group_row_stride at the bound");
  }
}

Test(args, group_row_stride_zero_equal_or_larger_accepted) {
  const int64_t ok[] = {0, 4, 5, 1000};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(ok); b++) {
      bq_args a = base_args(BQ_PER_GROUP);
      a.group_row_stride = ok[b];
      expect_args_ok(&c[i], &a, 0, "group_row_stride");
      bq_plan plan;
      bq__view v;
      cr_assert_eq(bq__plan_init(&c[i].d, &plan), BQ_SUCCESS);
      cr_assert_eq(bq__view_of(&plan, &a, &v), BQ_SUCCESS);
      cr_assert_eq(v.grs, ok[b] ? ok[b] : 4, "%s: grs %lld", c[i].ctx, (long long)v.grs);
      cr_assert_eq(v.group, 16);
    }
}

/* ---- pointers ---- */
typedef struct ptr_field {
  const char *name;
  int elem;     /* its element size in bytes */
  int required; /* must be non-NULL */
} ptr_field;
enum { F_X, F_Y, F_DY, F_DX, F_SCALES, F_ZPS, F_OSCALES, F_OZPS, F_COUNT };

/* What the plan reads and writes, by the header's documentation. */
static void fields_of(const bq_desc *d, ptr_field f[F_COUNT]) {
  int t = ft_size(d->float_type), fwd = d->direction == BQ_FORWARD;
  memset(f, 0, sizeof(ptr_field) * F_COUNT);
  f[F_X].name = "args.x";
  f[F_Y].name = "args.y";
  f[F_DY].name = "args.dy";
  f[F_DX].name = "args.dx";
  f[F_SCALES].name = "args.scales";
  f[F_ZPS].name = "args.zero_points";
  f[F_OSCALES].name = "args.out_scales";
  f[F_OZPS].name = "args.out_zero_points";
  if (is_dyn(d)) { /* reads x, writes y and the scales (and zero points) it computes */
    bq_dtype st = d->scale_type ? d->scale_type : BQ_F32;
    f[F_X].required = f[F_Y].required = f[F_OSCALES].required = 1;
    f[F_X].elem = t;
    f[F_Y].elem = 1;
    f[F_OSCALES].elem = ft_size(st);
    f[F_OZPS].required = d->asymmetric;
    f[F_OZPS].elem = d->asymmetric ? 4 : 0;
    return;
  }
  if (fwd) {
    f[F_X].required = 1;
    f[F_X].elem = d->op == BQ_DEQUANTIZE ? 1 : t;
    f[F_Y].required = 1;
    f[F_Y].elem = d->op == BQ_QUANTIZE ? 1 : t;
  } else {
    f[F_DY].required = 1;
    f[F_DY].elem = t;
    f[F_DX].required = 1;
    f[F_DX].elem = t;
    if (d->op != BQ_DEQUANTIZE) { /* the mask is recomputed from the saved input */
      f[F_X].required = 1;
      f[F_X].elem = t;
    }
  }
  if (d->granularity != BQ_PER_TENSOR) {
    bq_dtype st = d->scale_type ? d->scale_type : BQ_F32;
    f[F_SCALES].required = 1;
    f[F_SCALES].elem = ft_size(st);
    f[F_ZPS].elem = 4; /* optional: NULL means all zero points are 0 */
  }
}

static void set_field(bq_args *a, int k, uintptr_t v) {
  switch (k) {
  case F_X: a->x = (const void *)v; break;
  case F_Y: a->y = (void *)v; break;
  case F_DY: a->dy = (const void *)v; break;
  case F_DX: a->dx = (void *)v; break;
  case F_SCALES: a->scales = (const void *)v; break;
  case F_ZPS: a->zero_points = (const int32_t *)v; break;
  case F_OSCALES: a->out_scales = (void *)v; break;
  case F_OZPS: a->out_zero_points = (int32_t *)v; break;
  }
}
static const uintptr_t BASE[F_COUNT] = {PX, PY, PDY, PDX, PS, PZ, POS, POZ};

/* every combination with both scale types (it changes the scales' element size) */
static size_t pointer_combos(combo *out) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL), m = 0;
  for (size_t i = 0; i < n; i++) {
    out[m++] = c[i];
    if ((c[i].d.granularity != BQ_PER_TENSOR || is_dyn(&c[i].d)) && c[i].d.float_type != BQ_F32) {
      out[m] = c[i];
      out[m].d.scale_type = BQ_F32;
      snprintf(out[m].ctx, sizeof out[m].ctx, "[%s %s scale f32]", c[i].name, ft_str(c[i].d.float_type));
      m++;
    }
  }
  return m;
}

Test(args, required_pointer_null) {
  static combo c[2 * MAX_COMBOS];
  size_t n = pointer_combos(c);
  int checked = 0;
  for (size_t i = 0; i < n; i++) {
    ptr_field f[F_COUNT];
    fields_of(&c[i].d, f);
    for (int k = 0; k < F_COUNT; k++) {
      bq_args a = base_args(c[i].d.granularity);
      set_field(&a, k, 0);
      if (f[k].required) {
        char needle[64];
        snprintf(needle, sizeof needle, "%s is NULL", f[k].name);
        expect_args_invalid(&c[i], &a, needle);
        checked++;
      } else {
        expect_args_ok(&c[i], &a, 0, f[k].name); /* not read: may be NULL */
      }
    }
  }
  cr_assert(checked > 300, "only %d cases", checked);
}

/* args.mask: fake quantize per tensor and per channel keep it (4-byte words); backward then
   needs no x. Every other plan refuses it, naming the field. */
Test(args, mask) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  int kept = 0, refused = 0;
  for (size_t i = 0; i < n; i++) {
    const bq_desc *d = &c[i].d;
    bq_args a = base_args(d->granularity);
    a.mask = (void *)(uintptr_t)0x900000;
    if (d->op == BQ_FAKE_QUANTIZE && (d->granularity == BQ_PER_TENSOR || d->granularity == BQ_PER_CHANNEL)) {
      expect_args_ok(&c[i], &a, 0, "mask");
      if (d->direction == BQ_BACKWARD) {
        a.x = NULL; /* the saved mask replaces x */
        expect_args_ok(&c[i], &a, 0, "mask without x");
      }
      a.mask = (void *)(uintptr_t)0x900002;
      expect_args_invalid(&c[i], &a, "args.mask (0x900002) is not aligned to its element size (4 bytes)");
      kept++;
    } else {
      expect_args_invalid(&c[i], &a, "must be NULL: only fake quantize per tensor and per channel keep a mask");
      refused++;
    }
  }
  cr_assert(kept >= 8 && refused >= 30, "kept %d, refused %d", kept, refused);
}

/* only what the op reads or writes is needed: everything else may be NULL at once */
Test(args, unused_pointers_may_all_be_null) {
  static combo c[2 * MAX_COMBOS];
  size_t n = pointer_combos(c);
  for (size_t i = 0; i < n; i++) {
    ptr_field f[F_COUNT];
    fields_of(&c[i].d, f);
    bq_args a = base_args(c[i].d.granularity);
    for (int k = 0; k < F_COUNT; k++)
      if (!f[k].required) set_field(&a, k, 0);
    expect_args_ok(&c[i], &a, 0, "unused pointers NULL");
  }
}

Test(args, pointer_not_aligned_to_its_element) {
  static combo c[2 * MAX_COMBOS];
  size_t n = pointer_combos(c);
  int checked = 0;
  for (size_t i = 0; i < n; i++) {
    ptr_field f[F_COUNT];
    fields_of(&c[i].d, f);
    for (int k = 0; k < F_COUNT; k++) {
      if (f[k].elem <= 1) continue;
      for (int off = 1; off < f[k].elem; off++) {
        bq_args a = base_args(c[i].d.granularity);
        uintptr_t p = BASE[k] + 0x40 + (uintptr_t)off;
        set_field(&a, k, p);
        char needle[96];
        snprintf(needle, sizeof needle, "%s (%p) is not aligned", f[k].name, (const void *)p);
        expect_args_invalid(&c[i], &a, needle);
        checked++;
      }
    }
  }
  cr_assert(checked > 500, "only %d cases", checked);
}

/* Any element-aligned address works (the kernels have a scalar prologue and tail):
   16-byte alignment is a fast path, not a requirement. s8/u8 data may sit anywhere. */
Test(args, element_aligned_pointers_accepted) {
  static combo c[2 * MAX_COMBOS];
  size_t n = pointer_combos(c);
  for (size_t i = 0; i < n; i++) {
    ptr_field f[F_COUNT];
    fields_of(&c[i].d, f);
    for (int k = 0; k < F_COUNT; k++) {
      if (!f[k].elem) continue;
      for (int off = f[k].elem; off < 16; off += f[k].elem) {
        bq_args a = base_args(c[i].d.granularity);
        set_field(&a, k, BASE[k] + (uintptr_t)off);
        expect_args_ok(&c[i], &a, 0, f[k].name);
      }
    }
    /* all of them misaligned to 16 at once */
    bq_args a = base_args(c[i].d.granularity);
    for (int k = 0; k < F_COUNT; k++)
      if (f[k].elem) set_field(&a, k, BASE[k] + (uintptr_t)(f[k].elem < 16 ? f[k].elem : 0) * 3);
    expect_args_ok(&c[i], &a, 0, "all 16-byte-misaligned");
  }
}

/* ---- zero-size problems: success from can_implement and run, nothing launched (the plan
   has no kernel), nothing read (every pointer is NULL) ---- */
static bq_args null_ptrs(bq_args a) {
  a.x = NULL;
  a.y = NULL;
  a.dy = NULL;
  a.dx = NULL;
  a.scales = NULL;
  a.zero_points = NULL;
  a.out_scales = NULL;
  a.out_zero_points = NULL;
  return a;
}

/* ---- workspace ---- */
/* bq_plan_workspace_size's bytes, asserting it succeeded (bytes starts at a value it must overwrite) */
static size_t ws_bytes(const bq_plan *p, const bq_args *a, const char *ctx) {
  size_t b = 12345;
  bq_status st = bq_plan_workspace_size(p, a, &b);
  cr_assert_eq(st, BQ_SUCCESS, "%s: bq_plan_workspace_size: %s (%s)", ctx, bq_status_name(st), bq_last_error());
  return b;
}

Test(args, affine_ops_need_no_workspace) {
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_AFFINE);
  for (size_t i = 0; i < n; i++) {
    bq_plan plan;
    cr_assert_eq(bq__plan_init(&c[i].d, &plan), BQ_SUCCESS);
    bq_args a = base_args(c[i].d.granularity);
    cr_assert_eq(ws_bytes(&plan, &a, c[i].ctx), 0, "%s", c[i].ctx);
  }
}

/* bq_plan_workspace_size returns a status: a NULL plan, args or bytes, or a shape run
   would reject, is an error naming the field, with *bytes = 0 where it can be written. */
Test(args, workspace_size_status) {
  bq_args a = base_args(BQ_PER_TENSOR);
  size_t b = 99;
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(NULL, &a, &b), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(b, 0);
  cr_assert(strstr(bq_last_error(), "bq_plan_workspace_size: plan is NULL"), "%s", bq_last_error());
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    bq_plan plan;
    cr_assert_eq(bq__plan_init(&c[i].d, &plan), BQ_SUCCESS);
    a = base_args(c[i].d.granularity);
    clear_error();
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, NULL), BQ_ERROR_INVALID_ARGUMENT, "%s", c[i].ctx);
    check_msg(c[i].name, "bytes is NULL", c[i].ctx, "bq_plan_workspace_size");
    b = 99;
    clear_error();
    cr_assert_eq(bq_plan_workspace_size(&plan, NULL, &b), BQ_ERROR_INVALID_ARGUMENT, "%s", c[i].ctx);
    cr_assert_eq(b, 0, "%s", c[i].ctx);
    check_msg(c[i].name, "args is NULL", c[i].ctx, "bq_plan_workspace_size");
    /* a negative size is named as run names it */
    const char *needle;
    switch (c[i].d.granularity) {
    case BQ_PER_CHANNEL: a.rank = 0; needle = "args.rank (0)"; break;
    case BQ_PER_TOKEN: case BQ_PER_GROUP: case BQ_PER_BLOCK: a.rows = -3; needle = "args.rows (-3)"; break;
    default: a.numel = -3; needle = "args.numel (-3)"; break;
    }
    b = 99;
    clear_error();
    cr_assert_eq(bq_plan_workspace_size(&plan, &a, &b), BQ_ERROR_INVALID_ARGUMENT, "%s", c[i].ctx);
    cr_assert_eq(b, 0, "%s", c[i].ctx);
    check_msg(c[i].name, needle, c[i].ctx, "bq_plan_workspace_size");
    /* valid: succeeds, and bytes is 0 except for per-tensor dynamic quantize */
    a = base_args(c[i].d.granularity);
    size_t need = ws_bytes(&plan, &a, c[i].ctx);
    cr_assert_eq(need != 0, is_dyn(&c[i].d) && c[i].d.granularity == BQ_PER_TENSOR, "%s: %zu", c[i].ctx, need);
  }
}

/* Per tensor, dynamic quantize reduces in two passes through a workspace: run checks it
   before it launches anything. Per token and per group need none. */
Test(args, dynamic_quantize_workspace) {
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_ALL, F_DYNAMIC);
  for (size_t i = 0; i < n; i++) {
    bq_plan plan;
    cr_assert_eq(bq__plan_init(&c[i].d, &plan), BQ_SUCCESS);
    bq_args a = base_args(c[i].d.granularity);
    size_t need = ws_bytes(&plan, &a, c[i].ctx);
    if (c[i].d.granularity != BQ_PER_TENSOR) {
      cr_assert_eq(need, 0, "%s: %zu", c[i].ctx, need);
      continue;
    }
    cr_assert(need > 0, "%s: no workspace for a two-pass reduction", c[i].ctx);
    cr_assert_eq(bq_plan_can_implement(&plan, &a), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
    char needle[96];
    snprintf(needle, sizeof needle, "(%zu bytes)", need);
    /* none, or one byte short: INSUFFICIENT_WORKSPACE, nothing launched */
    const size_t sizes[] = {0, need - 1};
    void *const spaces[] = {NULL, (void *)(uintptr_t)0x900000};
    for (int k = 0; k < 2; k++) {
      clear_error();
      bq_status st = bq_plan_run(&plan, &a, spaces[k], sizes[k], NULL);
      cr_assert_eq(st, BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s: %s (%s)", c[i].ctx, bq_status_name(st), bq_last_error());
      check_msg(c[i].name, needle, c[i].ctx, "bq_plan_run");
      cr_assert(strstr(bq_last_error(), "workspace"), "%s", bq_last_error());
    }
    /* large enough but not 16-byte aligned */
    void *odd = (void *)(uintptr_t)0x900008;
    snprintf(needle, sizeof needle, "workspace (%p) is not 16-byte aligned", odd);
    clear_error();
    bq_status st = bq_plan_run(&plan, &a, odd, need, NULL);
    cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s: %s (%s)", c[i].ctx, bq_status_name(st), bq_last_error());
    check_msg(c[i].name, needle, c[i].ctx, "bq_plan_run");
    /* nothing to do: no workspace needed */
    a.numel = 0;
    cr_assert_eq(ws_bytes(&plan, &a, c[i].ctx), 0);
    a = null_ptrs(a);
    cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
  }
}

Test(zero_size, per_tensor_numel_zero) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_TENSOR);
  for (size_t i = 0; i < n; i++) {
    bq_args a = null_ptrs(base_args(BQ_PER_TENSOR));
    a.numel = 0;
    expect_args_ok(&c[i], &a, 1, "numel 0");
  }
}

Test(zero_size, per_channel_zero_in_shape) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++)
    for (int rank = 1; rank <= 4; rank++)
      for (int z = 0; z < rank; z++)
        for (int axis = 0; axis < rank; axis++) {
          bq_args a = null_ptrs(base_args(BQ_PER_CHANNEL));
          a.rank = rank;
          a.axis = axis;
          for (int k = 0; k < rank; k++) a.shape[k] = k + 2;
          a.shape[z] = 0; /* on the axis or off it */
          expect_args_ok(&c[i], &a, 1, "zero in shape");
          a.axis = axis - rank; /* negative axis too */
          expect_args_ok(&c[i], &a, 1, "zero in shape, negative axis");
        }
}

/* A zero anywhere makes the tensor empty, however large the other entries are. */
Test(zero_size, per_channel_zero_with_huge_entries) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_CHANNEL);
  for (size_t i = 0; i < n; i++)
    for (int axis = 0; axis < 3; axis++) {
      bq_args a = null_ptrs(base_args(BQ_PER_CHANNEL));
      a.rank = 3;
      a.axis = axis;
      a.shape[0] = 0;
      a.shape[1] = (int64_t)1 << 40;
      a.shape[2] = (int64_t)1 << 40;
      expect_args_ok(&c[i], &a, 1, "zero then huge");
    }
}

Test(zero_size, rows_zero) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++) {
    bq_args a = null_ptrs(base_args(c[i].d.granularity));
    a.rows = 0;
    expect_args_ok(&c[i], &a, 1, "rows 0");
    a.x_row_stride = 100; /* valid strides with no rows */
    a.y_row_stride = 64;
    expect_args_ok(&c[i], &a, 1, "rows 0, strides");
    a.cols = (int64_t)1 << 56; /* no rows: no product to overflow */
    a.x_row_stride = a.y_row_stride = 0;
    if (c[i].d.granularity == BQ_PER_GROUP) a.group_size = 1;
    expect_args_ok(&c[i], &a, 1, "rows 0, huge cols");
  }
}

Test(zero_size, cols_zero) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++) {
    bq_args a = null_ptrs(base_args(c[i].d.granularity));
    a.cols = 0;
    expect_args_ok(&c[i], &a, 1, "cols 0");
    a.rows = 1000;
    a.x_row_stride = 8;
    expect_args_ok(&c[i], &a, 1, "cols 0, stride 8");
  }
}

Test(zero_size, rows_and_cols_zero) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ROWS);
  for (size_t i = 0; i < n; i++) {
    bq_args a = null_ptrs(base_args(c[i].d.granularity));
    a.rows = 0;
    a.cols = 0;
    expect_args_ok(&c[i], &a, 1, "0 x 0");
  }
}

/* zero size does not excuse invalid arguments */
Test(zero_size, still_validated) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++) {
    bq_args a = null_ptrs(base_args(c[i].d.granularity));
    switch (c[i].d.granularity) {
    case BQ_PER_TENSOR:
      if (is_dyn(&c[i].d)) continue; /* nothing else to get wrong */
      a.numel = 0;
      a.scale = -1.0;
      expect_args_invalid(&c[i], &a, "args.scale (-1)");
      break;
    case BQ_PER_CHANNEL:
      a.shape[0] = 0;
      a.axis = 3;
      expect_args_invalid(&c[i], &a, "args.axis (3)");
      break;
    default:
      a.rows = 0;
      a.x_row_stride = 10; /* < cols 64 */
      expect_args_invalid(&c[i], &a, "args.x_row_stride (10)");
      break;
    }
  }
}

/* ---- status names and version ------------------------------------------------------------ */
Test(status, every_status_has_a_name_and_description) {
  static const char *const names[] = {
      "BQ_SUCCESS", "BQ_ERROR_INVALID_ARGUMENT", "BQ_ERROR_NOT_SUPPORTED", "BQ_ERROR_NO_DRIVER",
      "BQ_ERROR_DRIVER_TOO_OLD", "BQ_ERROR_NO_DEVICE", "BQ_ERROR_NO_NVRTC", "BQ_ERROR_COMPILE_FAILED",
      "BQ_ERROR_CUDA", "BQ_ERROR_OUT_OF_MEMORY", "BQ_ERROR_INSUFFICIENT_WORKSPACE"};
  static const bq_status values[] = {
      BQ_SUCCESS, BQ_ERROR_INVALID_ARGUMENT, BQ_ERROR_NOT_SUPPORTED, BQ_ERROR_NO_DRIVER,
      BQ_ERROR_DRIVER_TOO_OLD, BQ_ERROR_NO_DEVICE, BQ_ERROR_NO_NVRTC, BQ_ERROR_COMPILE_FAILED,
      BQ_ERROR_CUDA, BQ_ERROR_OUT_OF_MEMORY, BQ_ERROR_INSUFFICIENT_WORKSPACE};
  cr_assert_eq(BQ__STATUS_COUNT, (int)NELEM(names), "a status was added: list it here");
  cr_assert_eq(BQ_SUCCESS, 0);
  for (size_t i = 0; i < NELEM(names); i++) {
    cr_assert_str_eq(bq_status_name(values[i]), names[i]);
    cr_assert_eq((int)values[i], (int)i);
  }
  for (int s = 0; s < BQ__STATUS_COUNT; s++) {
    const char *nm = bq_status_name((bq_status)s), *ds = bq_status_description((bq_status)s);
    cr_assert_not_null(nm);
    cr_assert_not_null(ds);
    cr_assert(strncmp(nm, "BQ_", 3) == 0, "%d: %s", s, nm);
    cr_assert_str_neq(nm, "BQ_STATUS_UNKNOWN");
    cr_assert(strlen(ds) > 5, "%s: description \"%s\"", nm, ds);
    cr_assert_str_neq(ds, "unknown status", "%s", nm);
    for (int t = 0; t < s; t++) {
      cr_assert_str_neq(nm, bq_status_name((bq_status)t));
      cr_assert_str_neq(ds, bq_status_description((bq_status)t), "%s and %s share a description", nm,
                        bq_status_name((bq_status)t));
    }
  }
  cr_assert_str_eq(bq_status_description(BQ_SUCCESS), "success");
  cr_assert(strstr(bq_status_description(BQ_ERROR_NO_DRIVER), "libcuda"));
  cr_assert(strstr(bq_status_description(BQ_ERROR_NO_NVRTC), "NVRTC"));
  /* outside the enum: a placeholder, never NULL */
  const int outside[] = {BQ__STATUS_COUNT, BQ__STATUS_COUNT + 1, 1000, -1};
  for (size_t i = 0; i < NELEM(outside); i++) {
    cr_assert_str_eq(bq_status_name((bq_status)outside[i]), "BQ_STATUS_UNKNOWN");
    cr_assert_str_eq(bq_status_description((bq_status)outside[i]), "unknown status");
  }
}

Test(status, version) {
  unsigned v = bq_version();
  cr_assert_eq(v, ((unsigned)BQ_VERSION_MAJOR << 16) | ((unsigned)BQ_VERSION_MINOR << 8) | BQ_VERSION_PATCH);
  cr_assert_eq(v >> 16, (unsigned)BQ_VERSION_MAJOR);
  cr_assert_eq((v >> 8) & 0xff, (unsigned)BQ_VERSION_MINOR);
  cr_assert_eq(v & 0xff, (unsigned)BQ_VERSION_PATCH);
  cr_assert_str_eq(bq_version_string(), BQ_VERSION_STRING);
  char buf[64];
  snprintf(buf, sizeof buf, "%d.%d.%d", BQ_VERSION_MAJOR, BQ_VERSION_MINOR, BQ_VERSION_PATCH);
  cr_assert_str_eq(bq_version_string(), buf);
}

/* an error message is kept per thread: a failed call here leaves other threads' intact */
static void *other_thread(void *arg) {
  (void)arg;
  bq_plan *p;
  bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32);
  d.qmin = 9;
  d.qmax = 1;
  bq_plan_select(&d, &p);
  return strstr(bq_last_error(), "desc.qmax (1) < desc.qmin (9)") ? (void *)1 : NULL;
}
Test(status, last_error_is_per_thread) {
  bq_desc d = mkdesc(BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16);
  d.device = -2;
  bq_plan *p;
  cr_assert_eq(bq_plan_select(&d, &p), BQ_ERROR_INVALID_ARGUMENT);
  char mine[1024];
  snprintf(mine, sizeof mine, "%s", bq_last_error());
  pthread_t t;
  void *ok = NULL;
  cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, &ok);
  cr_assert(ok, "the other thread did not see its own error");
  cr_assert_str_eq(bq_last_error(), mine);
  cr_assert(strstr(mine, "dequantize_per_group_backward: desc.device (-2)"), "%s", mine);
}

/* the precision guarantee names the arithmetic and the contract's document */
Test(status, precision_guarantee) {
  bq_plan plan;
  bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16);
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "f32 arithmetic"), "%s", bq_plan_precision_guarantee(&plan));
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "CPU reference of docs/numerics.md"));
  d = mkdesc(BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64);
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "f64 arithmetic"), "%s", bq_plan_precision_guarantee(&plan));
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "CPU reference of docs/numerics.md"));
  cr_assert_str_eq(bq_plan_precision_guarantee(NULL), "");
}

/* ---- devices: a plan runs in its own context ------------------------------------------ */
/* tests/fake_driver.c in its two-device mode: primary contexts, a per-thread context stack,
   and launches that run nothing but record the device whose context was current. */
static void two_devices(void) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "twodev", 1);
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
}
TestSuite(devices, .init = two_devices);

static int *fake_counter(const char *name) {
  void *lib = dlopen(fake_driver(), RTLD_NOW | RTLD_NOLOAD);
  cr_assert_not_null(lib, "the fake driver is not loaded");
  int *v = (int *)dlsym(lib, name);
  cr_assert_not_null(v, "%s", name);
  return v;
}
static bq__CUcontext current(void) {
  cr_assert_not_null(bq__driver_get(), "the fake driver did not load: %s", bq_last_error());
  bq__CUcontext c = (bq__CUcontext)0x1;
  cr_assert_eq(bq__drv.cuCtxGetCurrent(&c), 0);
  return c;
}

/* A plan given device 1's context, as bq_plan_select gives it one (no kernel: the fake
   driver's launches run nothing). */
static void plan_on(int device, bq_plan *plan, bq__entry *entry) {
  bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  d.device = device;
  cr_assert_eq(bq__plan_init(&d, plan), BQ_SUCCESS, "%s", bq_last_error());
  bq__CUcontext before = current();
  int pushed = -1;
  bq__device_info info;
  cr_assert_eq(bq__plan_context(plan->desc.device, &plan->ctx, &pushed, &info), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(current(), plan->ctx, "the plan's context is current while it is built");
  if (pushed) {
    bq__CUcontext c;
    cr_assert_eq(bq__drv.cuCtxPopCurrent(&c), 0);
  }
  cr_assert_eq(current(), device == BQ_DEVICE_CURRENT && !before ? plan->ctx : before);
  plan->device = info.ordinal;
  memset(entry, 0, sizeof *entry);
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan->mod[e] = entry;
}

Test(devices, run_refuses_another_devices_context_and_pushes_its_own_when_none) {
  int *launches = NULL, *launch_device = NULL;
  bq_plan plan;
  bq__entry entry;
  cr_assert_null(current());
  plan_on(BQ_DEVICE(1), &plan, &entry);
  cr_assert_eq(plan.device, 1);
  cr_assert_null(current(), "selecting for BQ_DEVICE(1) left a context current");
  launches = fake_counter("fake_launches");
  launch_device = fake_counter("fake_launch_device");
  bq_args a = base_args(BQ_PER_TENSOR);

  /* device 0's context current: refused by name, nothing launched */
  cr_assert_eq(bq_set_device(0), BQ_SUCCESS, "%s", bq_last_error());
  bq__CUcontext dev0 = current();
  cr_assert_not_null(dev0);
  clear_error();
  bq_status st = bq_plan_run(&plan, &a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s: %s", bq_status_name(st), bq_last_error());
  check_msg("quantize_per_tensor: ", "plan selected on device 1, current context is device 0's", "[device 0 current]",
            "bq_plan_run");
  cr_assert_eq(*launches, 0);
  cr_assert_eq(current(), dev0);

  /* device 1's context current: launched there */
  cr_assert_eq(bq_set_device(1), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(current(), plan.ctx);
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(*launches, 1);
  cr_assert_eq(*launch_device, 1);

  /* none current: the plan's context is pushed for the launch and popped after */
  cr_assert_eq(bq__drv.cuCtxSetCurrent(NULL), 0);
  cr_assert_null(current());
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(*launches, 2);
  cr_assert_eq(*launch_device, 1);
  cr_assert_null(current(), "run left the plan's context current");

  /* a plan of the current context (device 0's) refuses device 1's */
  bq_plan p0;
  bq__entry e0;
  cr_assert_eq(bq_set_device(0), BQ_SUCCESS);
  plan_on(BQ_DEVICE_CURRENT, &p0, &e0);
  cr_assert_eq(p0.device, 0);
  cr_assert_eq(p0.ctx, dev0);
  cr_assert_eq(bq_plan_run(&p0, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(*launch_device, 0);
  cr_assert_eq(bq_set_device(1), BQ_SUCCESS);
  clear_error();
  cr_assert_eq(bq_plan_run(&p0, &a, NULL, 0, NULL), BQ_ERROR_INVALID_ARGUMENT);
  check_msg("quantize_per_tensor: ", "plan selected on device 0, current context is device 1's", "[device 1 current]",
            "bq_plan_run");
  /* invalid arguments are still reported as such whatever context is current */
  a.numel = -1;
  cr_assert_eq(bq_set_device(0), BQ_SUCCESS);
  clear_error();
  cr_assert_eq(bq_plan_run(&p0, &a, NULL, 0, NULL), BQ_ERROR_INVALID_ARGUMENT);
  check_msg("quantize_per_tensor: ", "args.numel (-1)", "[bad numel]", "bq_plan_run");
  cr_assert_eq(*launches, 3);
}

/* BQ_DEVICE_CURRENT with nothing current takes device 0's primary context (made current,
   as the CUDA runtime would); BQ_DEVICE(n) past the last device is NO_DEVICE by name;
   bq_set_device likewise. */
Test(devices, contexts_of_descs) {
  bq_plan p;
  bq__entry e;
  cr_assert_null(current());
  plan_on(BQ_DEVICE_CURRENT, &p, &e);
  cr_assert_eq(p.device, 0);
  cr_assert_eq(current(), p.ctx);
  bq_plan q;
  plan_on(BQ_DEVICE(0), &q, &e);
  cr_assert_eq(q.ctx, p.ctx, "BQ_DEVICE(0) is device 0's primary context");
  bq__CUcontext ctx;
  int pushed;
  bq__device_info info;
  clear_error();
  cr_assert_eq(bq__plan_context(BQ_DEVICE(2), &ctx, &pushed, &info), BQ_ERROR_NO_DEVICE);
  cr_assert(strstr(bq_last_error(), "device 2 does not exist (2 CUDA devices)"), "%s", bq_last_error());
  cr_assert_eq(current(), p.ctx);
  clear_error();
  cr_assert_eq(bq_set_device(2), BQ_ERROR_NO_DEVICE);
  cr_assert(strstr(bq_last_error(), "device 2 does not exist"), "%s", bq_last_error());
  cr_assert_eq(current(), p.ctx);
}

/* bq_plan_select for BQ_DEVICE(1) while device 0 is current builds in device 1's context
   and leaves device 0's current, whether the build succeeds or not (the fake driver loads
   no module: the select fails after the context was pushed). */
Test(devices, select_restores_the_current_context) {
  cr_assert_eq(bq_set_device(0), BQ_SUCCESS, "%s", bq_last_error());
  bq__CUcontext dev0 = current();
  bq_desc d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  d.device = BQ_DEVICE(1);
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  bq_status st = bq_plan_select(&d, &p);
  cr_assert_eq(current(), dev0, "select left another context current (%s)", bq_last_error());
  if (st == BQ_SUCCESS) { /* the fake driver loads what NVRTC built */
    cr_assert_not_null(p);
    cr_assert_eq(p->device, 1);
    bq_plan_destroy(p);
  } else {
    cr_assert_null(p);
  }
  bq__CUcontext c;
  cr_assert_eq(bq__drv.cuCtxPopCurrent(&c), 0);
  cr_assert_eq(c, dev0);
  cr_assert_null(current(), "select left a context pushed");
}

/* ---- FP8 storage (BQ_E4M3, BQ_E5M2) ------------------------------------------------------ */
/* FP8 is symmetric storage with no q-range: quantize, dequantize, fake quantize (either
   direction, every granularity) and dynamic quantize (forward; per tensor, token or group).
   Everything else is refused by name: a q-range, desc.asymmetric, dynamic backward or per
   channel, the linear layers and the fused producers; at run time a zero point. */
static const bq_dtype FP8S[] = {BQ_E4M3, BQ_E5M2};
static const char *fp8_str(bq_dtype t) { return t == BQ_E4M3 ? "e4m3" : "e5m2"; }

/* every valid FP8 combination: the symmetric combos with int_type set */
static size_t fp8_combos(combo *out, int gran_mask, int families, bq_dtype it) {
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, gran_mask, families), m = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    out[m] = c[i];
    out[m].d.int_type = it;
    snprintf(out[m].ctx, sizeof out[m].ctx, "[%s %s %s]", c[i].name, ft_str(c[i].d.float_type), fp8_str(it));
    m++;
  }
  return m;
}

Test(desc, fp8_every_valid_combination_reaches_the_driver) {
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_BOTH, FP8S[k]);
    cr_assert_eq(n, 4 * (2 * 3 * 5 + 4), "%zu combinations", n); /* per float type: 30 affine, 4 dynamic */
    for (size_t i = 0; i < n; i++) {
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type};
      for (size_t s = 0; s < NELEM(sts); s++) {
        bq_desc d = c[i].d;
        d.scale_type = sts[s];
        expect_desc_valid(&d, c[i].ctx);
        /* qmin == qmax == 0 spelled out is the same (no range) */
        d.qmin = d.qmax = 0;
        expect_desc_valid(&d, c[i].ctx);
      }
    }
  }
}

Test(desc, fp8_q_range_refused) {
  const qcase bad[] = {{0, -128, 127}, {0, 0, 255}, {0, 0, 1}, {0, -1, 0}, {0, 5, 5}, {0, 448, 448}, {0, INT_MIN, INT_MAX}};
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_BOTH, FP8S[k]);
    for (size_t i = 0; i < n; i++)
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_desc d = c[i].d;
        d.qmin = bad[b].qmin;
        d.qmax = bad[b].qmax;
        char prefix[128], needle[128];
        prefix_of(&c[i], prefix, sizeof prefix);
        snprintf(needle, sizeof needle, "desc.qmin (%d) and desc.qmax (%d) must be 0: %s has no q-range", bad[b].qmin,
                 bad[b].qmax, fp8_str(FP8S[k]));
        expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      }
  }
}

Test(desc, fp8_asymmetric_refused) {
  const int bad[] = {1, 2, -1};
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_BOTH, FP8S[k]);
    for (size_t i = 0; i < n; i++)
      for (size_t b = 0; b < NELEM(bad); b++) {
        bq_desc d = c[i].d;
        d.asymmetric = bad[b];
        char name[96], prefix[128], needle[128];
        plan_name(&d, name, sizeof name); /* dynamic: "..._asymmetric" */
        snprintf(prefix, sizeof prefix, "%s: ", name);
        snprintf(needle, sizeof needle, "desc.asymmetric (%d) must be 0: %s storage is symmetric", bad[b],
                 fp8_str(FP8S[k]));
        expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      }
  }
}

/* FP8 descriptors go through their own normalization: the fields every op checks are
   still checked there (desc.device, desc.out_type, desc.scale_type), naming field and value */
Test(desc, fp8_other_fields_still_checked) {
  const bq_dtype bad_st[] = {BQ_S8, BQ_U8, BQ_S32, BQ_E4M3, BQ_E5M2, (bq_dtype)99, (bq_dtype)-1};
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_BOTH, FP8S[k]);
    for (size_t i = 0; i < n; i++) {
      char prefix[128], needle[128];
      prefix_of(&c[i], prefix, sizeof prefix);
      bq_desc d = c[i].d;
      d.device = -3;
      expect_desc_invalid(&d, prefix, "desc.device (-3) is negative", c[i].ctx);
      d = c[i].d;
      d.out_type = BQ_F16;
      snprintf(needle, sizeof needle, "desc.out_type (%d, f16) applies to linear layers only", (int)BQ_F16);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      for (size_t b = 0; b < NELEM(bad_st); b++) {
        d = c[i].d;
        d.scale_type = bad_st[b];
        snprintf(needle, sizeof needle, "desc.scale_type (%d", (int)bad_st[b]);
        expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      }
      for (size_t f = 0; f < NELEM(FTS); f++) { /* another float type than the data's */
        if (FTS[f] == c[i].d.float_type || FTS[f] == BQ_F32) continue;
        d = c[i].d;
        d.scale_type = FTS[f];
        snprintf(needle, sizeof needle, "desc.scale_type (%d, %s) must be the float type (%s), BQ_F32, BQ_UE8M0 or BQ_UE8M0X4",
                 (int)FTS[f],
                 ft_str(FTS[f]), ft_str(c[i].d.float_type));
        expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      }
    }
  }
}

Test(desc, fp8_dynamic_quantize_is_forward_only) {
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_DYNAMIC, FP8S[k]);
    cr_assert_eq(n, 16);
    for (size_t i = 0; i < n; i++) {
      bq_desc d = c[i].d;
      d.direction = BQ_BACKWARD;
      char name[96], prefix[128];
      plan_name(&d, name, sizeof name);
      snprintf(prefix, sizeof prefix, "%s: ", name);
      expect_desc_invalid(&d, prefix, "desc.direction (backward) is not defined for dynamic quantize", c[i].ctx);
    }
  }
}

Test(desc, fp8_dynamic_quantize_per_channel_not_supported) {
  for (size_t k = 0; k < NELEM(FP8S); k++)
    for (size_t f = 0; f < NELEM(FTS); f++) {
      bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, FTS[f]);
      d.int_type = FP8S[k];
      char ctx[96];
      snprintf(ctx, sizeof ctx, "[dynamic per_channel %s %s]", ft_str(FTS[f]), fp8_str(FP8S[k]));
      expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, "dynamic_quantize_per_channel: ", "desc.granularity (per_channel)",
                         ctx);
    }
}

/* the linear layers have no FP8 form: NOT_SUPPORTED naming desc.int_type (and the op), at
   every granularity the op would otherwise take (the fused producers' FP8 rules are
   test_validation_fused.c's) */
Test(desc, fp8_linear_not_supported) {
  const bq_op ops[] = {BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR};
  const char *names[] = {"quantized_linear", "smoothquant_linear"};
  const bq_granularity grans[] = {BQ_GRANULARITY_DEFAULT, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_TENSOR};
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(FP8S); k++)
    for (size_t o = 0; o < NELEM(ops); o++)
      for (size_t g = 0; g < NELEM(grans); g++)
        for (size_t f = 0; f < NELEM(FTS); f++)
          for (int act = 0; act < (ops[o] == BQ_GATED_QUANTIZE ? 3 : 1); act++) {
            if (ops[o] == BQ_QUANTIZED_LINEAR && grans[g] == BQ_PER_TENSOR) continue; /* refused for that first */
            bq_desc d = mkdesc(ops[o], BQ_FORWARD, grans[g], FTS[f]);
            d.int_type = FP8S[k];
            d.activation = (bq_activation)act; /* default, BQ_SILU, BQ_GELU_TANH */
            char needle[128], ctx[128];
            snprintf(needle, sizeof needle, "desc.int_type (%s) is not offered for %s", fp8_str(FP8S[k]), names[o]);
            snprintf(ctx, sizeof ctx, "[%s gran %d %s %s act %d]", names[o], (int)grans[g], ft_str(FTS[f]),
                     fp8_str(FP8S[k]), act);
            /* the plan's name leads (quantized_linear, smoothquant_linear_per_token,
               silu_mul_quantize_per_group, ...) */
            const char *lead = ops[o] == BQ_GATED_QUANTIZE ? (act == 2 ? "gelu_tanh_mul_quantize" : "silu_mul_quantize")
                                                           : names[o];
            expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, lead, needle, ctx);
            /* with a q-range or asymmetric as well, the op is still what is named */
            d.qmin = -7, d.qmax = 7, d.asymmetric = 1;
            expect_desc_status(&d, BQ_ERROR_NOT_SUPPORTED, lead, needle, ctx);
            checked++;
          }
  cr_assert_eq(checked, 2 * (3 + 4) * 4);
  /* the weight sums read s8 weights only */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  d.int_type = BQ_E4M3;
  char needle[64];
  snprintf(needle, sizeof needle, "desc.int_type (%d, e4m3) must be BQ_S8", (int)BQ_E4M3);
  expect_desc_invalid(&d, "linear_weight_sums: ", needle, "[weight sums e4m3]");
}

/* What FP8 normalizes to: int_type kept, qmin = qmax = 0, symmetric, scale_type by the same
   rule as the integer types; and a normalized desc is accepted again, unchanged, with the
   same SKU. */
Test(desc, fp8_normalized_descs_are_accepted_again_unchanged) {
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_BOTH, FP8S[k]);
    for (size_t i = 0; i < n; i++) {
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type};
      for (size_t s = 0; s < NELEM(sts); s++) {
        bq_desc in = c[i].d, out, again;
        in.scale_type = sts[s];
        char name[96], name2[96], sku[256], sku2[256];
        cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
        cr_assert_str_eq(name, c[i].name);
        cr_assert_eq(out.int_type, FP8S[k], "%s", c[i].ctx);
        cr_assert_eq(out.qmin, 0, "%s", c[i].ctx);
        cr_assert_eq(out.qmax, 0, "%s", c[i].ctx);
        cr_assert_eq(out.asymmetric, 0, "%s", c[i].ctx);
        cr_assert_eq(out.out_type, BQ_DTYPE_DEFAULT, "%s", c[i].ctx);
        int host_scale = in.granularity == BQ_PER_TENSOR && !is_dyn(&in);
        bq_dtype want_st = host_scale ? (in.float_type == BQ_F64 ? BQ_F64 : BQ_F32)
                                      : (sts[s] == BQ_DTYPE_DEFAULT ? BQ_F32 : sts[s]);
        cr_assert_eq(out.scale_type, want_st, "%s scale_type %d: %d, want %d", c[i].ctx, (int)sts[s],
                     (int)out.scale_type, (int)want_st);
        /* the integer type's normalized desc has the same scale type */
        bq_desc s8 = in, s8n;
        s8.int_type = BQ_S8;
        cr_assert_eq(bq__normalize(&s8, &s8n, name2, sizeof name2), BQ_SUCCESS);
        cr_assert_eq(s8n.scale_type, out.scale_type, "%s", c[i].ctx);
        /* idempotent */
        cr_assert_eq(bq__normalize(&out, &again, name2, sizeof name2), BQ_SUCCESS, "%s: normalized desc refused: %s",
                     c[i].ctx, bq_last_error());
        cr_assert(!memcmp(&out, &again, sizeof out), "%s: normalizing twice changed the desc", c[i].ctx);
        cr_assert_str_eq(name2, name);
        expect_desc_valid(&out, c[i].ctx);
        cr_assert_eq(bq_sku(&in, 80, sku, sizeof sku), BQ_SUCCESS);
        cr_assert_eq(bq_sku(&out, 80, sku2, sizeof sku2), BQ_SUCCESS);
        cr_assert_str_eq(sku, sku2, "%s", c[i].ctx);
      }
    }
  }
}

/* SKUs of FP8 plans: one per normalized desc, distinct from each other's and from every
   s8 / u8 SKU, naming the type and no q-range; the test hook's software conversion
   (bq__fp8_soft) has SKUs of its own, ".soft", whose prelude defines BQ_FP8_SOFT, and it
   leaves the integer types' SKUs alone. */
Test(desc, fp8_skus) {
  enum { CAP = 8 * 1024 };
  static char skus[CAP][256];
  static int kind[CAP]; /* 0 s8/u8, 1 e4m3, 2 e5m2, +8 soft */
  size_t n = 0;
  const bq_dtype its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  const int targets[] = {80, 89, 90};
  for (int soft = 0; soft < 2; soft++)
    for (size_t a = 0; a < NELEM(its); a++) {
      combo c[MAX_COMBOS];
      size_t m = fp8_combos(c, G_ALL, F_BOTH, its[a]);
      for (size_t i = 0; i < m; i++)
        for (int s = 0; s < 2; s++)
          for (size_t t = 0; t < NELEM(targets); t++) {
            bq_desc d = c[i].d;
            d.scale_type = s ? d.float_type : BQ_F32;
            if (s && d.float_type == BQ_F32) continue; /* the same kernel */
            if (s && d.granularity == BQ_PER_TENSOR && !is_dyn(&d)) continue; /* host scalar: the same kernel */
            bq__fp8_soft = soft;
            bq_status st = bq_sku(&d, targets[t], skus[n], sizeof skus[n]);
            bq__fp8_soft = 0;
            cr_assert_eq(st, BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
            int fp8 = its[a] == BQ_E4M3 ? 1 : its[a] == BQ_E5M2 ? 2 : 0;
            kind[n] = fp8 + (soft ? 8 : 0);
            const char *sku = skus[n];
            if (fp8) {
              cr_assert(strstr(sku, fp8 == 1 ? ".e4m3." : ".e5m2."), "%s: %s", c[i].ctx, sku);
              cr_assert(!strstr(sku, fp8 == 1 ? "e5m2" : "e4m3"), "%s: %s", c[i].ctx, sku);
              cr_assert(!strstr(sku, "q["), "%s: %s names a q-range", c[i].ctx, sku);
              cr_assert_eq(strstr(sku, ".soft.") != NULL, soft, "%s: %s", c[i].ctx, sku);
              /* the prelude is the kernel's: the soft form defines BQ_FP8_SOFT */
              bq__target tg = {targets[t], 0, 0, 0};
              bq__kernel_src ks;
              bq__fp8_soft = soft;
              st = bq__kernel_for(&d, &tg, &ks);
              bq__fp8_soft = 0;
              cr_assert_eq(st, BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
              cr_assert_str_eq(ks.sku, sku);
              cr_assert_eq(strstr(ks.source.p, "#define BQ_FP8_SOFT 1\n") != NULL, soft, "%s: %s", c[i].ctx, sku);
              cr_assert(strstr(ks.source.p, fp8 == 1 ? "#define BQ_IT BQ_TYPE_E4M3\n" : "#define BQ_IT BQ_TYPE_E5M2\n"),
                        "%s: %s", c[i].ctx, sku);
              free(ks.source.p);
            } else {
              cr_assert(strstr(sku, "q["), "%s: %s", c[i].ctx, sku);
              cr_assert(!strstr(sku, "soft") && !strstr(sku, "e4m3") && !strstr(sku, "e5m2"), "%s: %s", c[i].ctx, sku);
            }
            n++;
            cr_assert(n < CAP);
          }
    }
  /* distinct, except that the hook leaves the integer types' SKUs as they are */
  size_t same_int = 0, n_int = 0;
  for (size_t i = 0; i < n; i++) n_int += kind[i] == 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      if (strcmp(skus[i], skus[j])) continue;
      cr_assert(kind[i] == 0 && kind[j] == 8, "two kernels share the SKU %s", skus[i]);
      same_int++;
    }
  cr_assert_eq(n, 2 * 4 * 3 * (136 + 84), "%zu SKUs", n); /* scale f32: 136 a type; the float type: 84 more */
  cr_assert_eq(same_int, n_int, "%zu of %zu integer SKUs unchanged by the hook", same_int, n_int);
}

/* Run time: an FP8 plan refuses a zero point (per tensor args.zero_point != 0, elsewhere
   args.zero_points != NULL) in can_implement and run alike, and before anything else of
   the call is looked at past the scale: even a zero-size call is refused. */
Test(args, fp8_zero_points_refused) {
  const int32_t zps[] = {1, -1, 3, INT32_MAX, INT32_MIN};
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_AFFINE, FP8S[k]);
    cr_assert_eq(n, 5 * 2 * 3 * 4);
    for (size_t i = 0; i < n; i++) {
      bq_granularity g = c[i].d.granularity;
      bq_args a = base_args(g);
      a.zero_point = 0;
      a.zero_points = NULL;
      expect_args_ok(&c[i], &a, 0, "no zero points");
      char needle[128];
      if (g == BQ_PER_TENSOR) {
        /* zero_points is not looked at per tensor */
        a.zero_points = (const int32_t *)PZ;
        expect_args_ok(&c[i], &a, 0, "zero_points per tensor");
        for (size_t z = 0; z < NELEM(zps); z++) {
          a.zero_point = zps[z];
          snprintf(needle, sizeof needle, "args.zero_point (%d) must be 0: %s storage is symmetric", (int)zps[z],
                   fp8_str(FP8S[k]));
          expect_args_invalid(&c[i], &a, needle);
          a.numel = 0;
          expect_args_invalid(&c[i], &a, needle);
          a.numel = 1000;
        }
      } else {
        /* zero_point is not looked at elsewhere */
        a.zero_point = 5;
        expect_args_ok(&c[i], &a, 0, "zero_point per tensor field");
        a.zero_points = (const int32_t *)PZ;
        snprintf(needle, sizeof needle, "args.zero_points (%p) must be NULL: %s storage is symmetric",
                 (const void *)PZ, fp8_str(FP8S[k]));
        expect_args_invalid(&c[i], &a, needle);
        if (g == BQ_PER_CHANNEL) a.shape[0] = 0;
        else a.rows = 0;
        expect_args_invalid(&c[i], &a, needle);
      }
    }
  }
}

/* Dynamic quantize has no zero-point inputs: its FP8 plans take the base arguments
   (out_zero_points is not written by a symmetric plan) */
Test(args, fp8_dynamic_base_arguments_are_valid) {
  for (size_t k = 0; k < NELEM(FP8S); k++) {
    combo c[MAX_COMBOS];
    size_t n = fp8_combos(c, G_ALL, F_DYNAMIC, FP8S[k]);
    for (size_t i = 0; i < n; i++) {
      bq_args a = base_args(c[i].d.granularity);
      expect_args_ok(&c[i], &a, 0, "base");
      a.out_zero_points = NULL;
      a.zero_points = NULL;
      expect_args_ok(&c[i], &a, 0, "no zero points");
    }
  }
}

/* On the fake driver: an FP8 plan with a kernel entry launches once for a valid call and
   never for a call with a zero point. */
TestSuite(fp8_launch, .init = two_devices);
Test(fp8_launch, zero_points_refused_before_any_launch) {
  size_t runs = 0;
  int *launches = NULL;
  for (size_t k = 0; k < NELEM(FP8S); k++)
    for (size_t g = 0; g < NELEM(GRANS); g++)
      for (size_t o = 0; o < 3; o++) {
        bq_desc d = mkdesc(OPS[o], o == 2 ? BQ_BACKWARD : BQ_FORWARD, GRANS[g], BQ_BF16);
        d.int_type = FP8S[k];
        bq_plan plan;
        bq__entry entry;
        cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
        int pushed = -1;
        bq__device_info info;
        cr_assert_eq(bq__plan_context(plan.desc.device, &plan.ctx, &pushed, &info), BQ_SUCCESS, "%s", bq_last_error());
        plan.device = info.ordinal;
        memset(&entry, 0, sizeof entry);
        for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
        if (!launches) launches = fake_counter("fake_launches");
        bq_args a = base_args(GRANS[g]);
        a.zero_point = 0;
        a.zero_points = NULL;
        int before = *launches;
        cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
        cr_assert_eq(*launches, before + 1, "a valid FP8 call did not launch once");
        if (GRANS[g] == BQ_PER_TENSOR) a.zero_point = 1;
        else a.zero_points = (const int32_t *)PZ;
        clear_error();
        cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_ERROR_INVALID_ARGUMENT);
        check_msg(NULL, GRANS[g] == BQ_PER_TENSOR ? "args.zero_point (1) must be 0" : "args.zero_points (",
                  "[fp8 launch]", "bq_plan_run");
        cr_assert_eq(*launches, before + 1, "a refused FP8 call launched");
        runs++;
      }
  cr_assert_eq(runs, 2 * 5 * 3);
}

/* ---- UE8M0 scales, power-of-two dynamic scales, the amax bound ------------------------ */
/* desc.scale_type BQ_UE8M0: device scale arrays of the affine ops (per channel, token,
   group; either direction; every storage type) and dynamic quantize's out_scales (every
   granularity); refused naming desc.scale_type for per-tensor affine plans (a host scalar),
   the linear layers and the fused producers. desc.pow2_scales: dynamic quantize only, 0 or
   1; UE8M0 implies it. args.amax_bound: symmetric dynamic quantize only; finite and > 0
   once converted to C. */
static const bq_dtype ITS4[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
static const char *it_str(bq_dtype t) {
  return t == BQ_S8 ? "s8" : t == BQ_U8 ? "u8" : t == BQ_E4M3 ? "e4m3" : t == BQ_E5M2 ? "e5m2" : "?";
}

/* every valid combination with int type it (FP8: symmetric only) */
static size_t it_combos(combo *out, int gran_mask, int families, bq_dtype it) {
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, gran_mask, families), m = 0;
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric && (it == BQ_E4M3 || it == BQ_E5M2)) continue;
    out[m] = c[i];
    out[m].d.int_type = it;
    snprintf(out[m].ctx, sizeof out[m].ctx, "[%s %s %s]", c[i].name, ft_str(c[i].d.float_type), it_str(it));
    m++;
  }
  return m;
}

/* the field, then its value named somewhere in the message ("desc.scale_type (ue8m0)" or
   "desc.scale_type (10, ue8m0)") */
static void ue8m0_needle(char *buf, size_t n) { snprintf(buf, n, "desc.scale_type ("); }
static void check_names_ue8m0(const char *ctx) {
  const char *m = bq_last_error(), *f = strstr(m, "desc.scale_type (");
  cr_assert(f && strstr(f, "ue8m0"), "%s: message \"%s\" does not name ue8m0 after desc.scale_type", ctx, m);
}

Test(desc, ue8m0_dtype_name) {
  cr_assert_str_eq(bq__dtype_name(BQ_UE8M0), "ue8m0");
  cr_assert_eq(bq__dtype_size(BQ_UE8M0), 1);
  cr_assert_eq((int)BQ_UE8M0, (int)BQ_E5M2 + 1);
}

Test(desc, ue8m0_scale_arrays_accepted) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_CHANNEL | G_TOKEN | G_GROUP | G_BLOCK, F_AFFINE, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      bq_desc d = c[i].d;
      d.scale_type = BQ_UE8M0;
      expect_desc_valid(&d, c[i].ctx);
      checked++;
    }
    n = it_combos(c, G_ALL, F_DYNAMIC, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      bq_desc d = c[i].d;
      d.scale_type = BQ_UE8M0;
      expect_desc_valid(&d, c[i].ctx);
      d.pow2_scales = 1;
      expect_desc_valid(&d, c[i].ctx);
      checked++;
    }
  }
  /* affine: 4 grans x 3 ops x 2 dirs x 4 T per int type; dynamic: 4 grans x 4 T (x 2 for int) */
  cr_assert_eq(checked, 4 * 96 + 2 * 32 + 2 * 16, "%zu", checked);
}

Test(desc, ue8m0_refused_for_per_tensor_affine_plans) {
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_TENSOR, F_AFFINE, ITS4[k]);
    cr_assert_eq(n, 24);
    for (size_t i = 0; i < n; i++) {
      bq_desc d = c[i].d;
      d.scale_type = BQ_UE8M0;
      char prefix[128], needle[64];
      prefix_of(&c[i], prefix, sizeof prefix);
      ue8m0_needle(needle, sizeof needle);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      check_names_ue8m0(c[i].ctx);
      d.granularity = BQ_GRANULARITY_DEFAULT; /* per tensor as well */
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      check_names_ue8m0(c[i].ctx);
    }
  }
}

/* the linear layers' and the fused producers' descriptors that are valid with scale_type 0 */
static size_t other_ops(bq_desc *out, const char **lead) {
  size_t n = 0;
  const bq_dtype fts[] = {BQ_F16, BQ_BF16, BQ_F32};
  for (size_t f = 0; f < NELEM(fts); f++) {
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = BQ_QUANTIZED_LINEAR;
    d.float_type = fts[f];
    lead[n] = "quantized_linear", out[n++] = d;
    d.asymmetric = 1;
    lead[n] = "quantized_linear", out[n++] = d;
    memset(&d, 0, sizeof d);
    d.op = BQ_SMOOTHQUANT_LINEAR;
    d.granularity = BQ_PER_TOKEN;
    d.out_type = fts[f];
    lead[n] = "smoothquant_linear", out[n++] = d;
    d.granularity = BQ_PER_TENSOR;
    lead[n] = "smoothquant_linear", out[n++] = d;
    const bq_granularity grans[] = {BQ_PER_TOKEN, BQ_PER_GROUP};
    for (size_t g = 0; g < NELEM(grans); g++)
      for (int asym = 0; asym < 2; asym++) {
        memset(&d, 0, sizeof d);
        d.op = BQ_RMSNORM_QUANTIZE;
        d.granularity = grans[g];
        d.float_type = fts[f];
        d.asymmetric = asym;
        lead[n] = "rmsnorm_quantize", out[n++] = d;
        d.op = BQ_GATED_QUANTIZE;
        lead[n] = "silu_mul_quantize", out[n++] = d;
        d.activation = BQ_GELU_TANH;
        lead[n] = "gelu_tanh_mul_quantize", out[n++] = d;
      }
  }
  return n;
}

Test(desc, ue8m0_refused_for_linear_and_microscaling_for_fused) {
  bq_desc ds[64];
  const char *lead[64];
  size_t n = other_ops(ds, lead);
  cr_assert_eq(n, 3 * (4 + 12));
  for (size_t i = 0; i < n; i++) {
    char ctx[64], needle[64];
    snprintf(ctx, sizeof ctx, "[%s #%zu]", lead[i], i);
    expect_desc_valid(&ds[i], ctx);
    bq_desc d = ds[i];
    d.scale_type = BQ_UE8M0;
    ue8m0_needle(needle, sizeof needle);
    /* the linear layers: INVALID_ARGUMENT (their scale-type rule); the fused producers: a
       microscaling output (E2M1 by default), per group and symmetric, else refused by name */
    const int fused = d.op == BQ_RMSNORM_QUANTIZE || d.op == BQ_GATED_QUANTIZE;
    if (fused && d.granularity == BQ_PER_GROUP && !d.asymmetric) {
      expect_desc_valid(&d, ctx);
    } else if (fused) {
      expect_desc_status(&d, BQ_ERROR_INVALID_ARGUMENT, lead[i],
                         d.asymmetric ? "desc.asymmetric (1) must be 0: the microscaling formats are symmetric"
                                      : "must be BQ_PER_GROUP: the microscaling formats scale groups", ctx);
    } else {
      expect_desc_status(&d, BQ_ERROR_INVALID_ARGUMENT, lead[i], needle, ctx);
      check_names_ue8m0(ctx);
    }
  }
}

Test(desc, pow2_scales_refused_outside_dynamic_quantize) {
  const int vals[] = {1, 2, -1};
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_ALL, F_AFFINE, ITS4[k]);
    for (size_t i = 0; i < n; i++)
      for (size_t v = 0; v < NELEM(vals); v++) {
        bq_desc d = c[i].d;
        d.pow2_scales = vals[v];
        char needle[64];
        snprintf(needle, sizeof needle, "desc.pow2_scales (%d)", vals[v]);
        /* led by the op's name (the plan's, or the op's alone as desc.activation's) */
        expect_desc_invalid(&d, op_str(d.op), needle, c[i].ctx);
      }
  }
  bq_desc ds[64];
  const char *lead[64];
  size_t n = other_ops(ds, lead);
  for (size_t i = 0; i < n; i++)
    for (size_t v = 0; v < NELEM(vals); v++) {
      char ctx[64], needle[64];
      snprintf(ctx, sizeof ctx, "[%s #%zu]", lead[i], i);
      bq_desc d = ds[i];
      d.pow2_scales = vals[v];
      snprintf(needle, sizeof needle, "desc.pow2_scales (%d)", vals[v]);
      expect_desc_invalid(&d, NULL, needle, ctx); /* (the op's name or the plan's leads) */
    }
  /* the weight sums too */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  expect_desc_valid(&d, "[weight sums]");
  d.pow2_scales = 1;
  expect_desc_invalid(&d, "linear_weight_sums: ", "desc.pow2_scales (1)", "[weight sums]");
}

Test(desc, pow2_scales_is_0_or_1) {
  const int bad[] = {2, -1, 3, INT_MAX, INT_MIN};
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_ALL, F_DYNAMIC, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type, BQ_UE8M0};
      for (size_t s = 0; s < NELEM(sts); s++) {
        bq_desc d = c[i].d;
        d.scale_type = sts[s];
        d.pow2_scales = 1;
        expect_desc_valid(&d, c[i].ctx);
        for (size_t b = 0; b < NELEM(bad); b++) {
          d.pow2_scales = bad[b];
          char prefix[128], needle[64];
          prefix_of(&c[i], prefix, sizeof prefix);
          snprintf(needle, sizeof needle, "desc.pow2_scales (%d)", bad[b]);
          expect_desc_invalid(&d, prefix, needle, c[i].ctx);
        }
      }
    }
  }
}

/* normalized: scale_type UE8M0 kept (device arrays), dynamic UE8M0 sets pow2_scales
   (asked 0 or 1), pow2_scales kept otherwise; a normalized desc is accepted again
   unchanged, with the same SKU */
Test(desc, ue8m0_and_pow2_normalized_descs_round_trip) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_ALL, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      int dyn = is_dyn(&c[i].d), host = c[i].d.granularity == BQ_PER_TENSOR && !dyn;
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type, BQ_UE8M0};
      for (size_t s = 0; s < NELEM(sts); s++)
        for (int p2 = 0; p2 < (dyn ? 2 : 1); p2++) {
          if (sts[s] == BQ_UE8M0 && host) continue;
          bq_desc in = c[i].d, out, again;
          in.scale_type = sts[s];
          in.pow2_scales = p2;
          char name[96], name2[96], sku[256], sku2[256];
          cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
          cr_assert_str_eq(name, c[i].name);
          if (sts[s] == BQ_UE8M0) cr_assert_eq(out.scale_type, BQ_UE8M0, "%s", c[i].ctx);
          int want_p2 = dyn && (p2 || sts[s] == BQ_UE8M0);
          cr_assert_eq(out.pow2_scales, want_p2, "%s scale_type %d pow2 %d: normalized pow2_scales %d", c[i].ctx,
                       (int)sts[s], p2, out.pow2_scales);
          cr_assert_eq(bq__normalize(&out, &again, name2, sizeof name2), BQ_SUCCESS, "%s: normalized desc refused: %s",
                       c[i].ctx, bq_last_error());
          cr_assert(!memcmp(&out, &again, sizeof out), "%s: normalizing twice changed the desc", c[i].ctx);
          cr_assert_str_eq(name2, name);
          expect_desc_valid(&out, c[i].ctx);
          cr_assert_eq(bq_sku(&in, 90, sku, sizeof sku), BQ_SUCCESS);
          cr_assert_eq(bq_sku(&out, 90, sku2, sizeof sku2), BQ_SUCCESS);
          cr_assert_str_eq(sku, sku2, "%s", c[i].ctx);
          checked++;
        }
    }
  }
  cr_assert(checked > 1000, "%zu", checked);
}

/* SKUs: one per normalized desc, distinct; ".pow2" exactly for dynamic plans with pow2
   scales (UE8M0 ones included), "scale_ue8m0" exactly for UE8M0 scales; UE8M0 with
   pow2_scales 0 or 1 is the same kernel */
Test(desc, ue8m0_and_pow2_skus) {
  enum { CAP = 8 * 1024 };
  static char skus[CAP][256];
  size_t n = 0;
  const int targets[] = {80, 90};
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t m = it_combos(c, G_ALL, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < m; i++) {
      int dyn = is_dyn(&c[i].d), host = c[i].d.granularity == BQ_PER_TENSOR && !dyn;
      const bq_dtype sts[] = {BQ_F32, c[i].d.float_type, BQ_UE8M0};
      for (size_t s = 0; s < NELEM(sts); s++)
        for (int p2 = 0; p2 < (dyn ? 2 : 1); p2++)
          for (size_t t = 0; t < NELEM(targets); t++) {
            if (s == 1 && c[i].d.float_type == BQ_F32) continue; /* the same kernel */
            if (host && s > 0) continue;                         /* host scalar */
            if (sts[s] == BQ_UE8M0 && p2) continue;              /* implied: checked below */
            bq_desc d = c[i].d;
            d.scale_type = sts[s];
            d.pow2_scales = p2;
            bq_status st = bq_sku(&d, targets[t], skus[n], sizeof skus[n]);
            cr_assert_eq(st, BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
            const char *sku = skus[n];
            int want_p2 = dyn && (p2 || sts[s] == BQ_UE8M0);
            cr_assert_eq(strstr(sku, ".pow2.") != NULL, want_p2, "%s pow2 %d: %s", c[i].ctx, p2, sku);
            cr_assert_eq(strstr(sku, "scale_ue8m0") != NULL, sts[s] == BQ_UE8M0, "%s: %s", c[i].ctx, sku);
            if (sts[s] == BQ_UE8M0 && dyn) {
              char again[256];
              d.pow2_scales = 1;
              cr_assert_eq(bq_sku(&d, targets[t], again, sizeof again), BQ_SUCCESS);
              cr_assert_str_eq(again, sku, "%s", c[i].ctx);
            }
            n++;
            cr_assert(n < CAP);
          }
    }
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      cr_assert(strcmp(skus[i], skus[j]), "two kernels share the SKU %s", skus[i]);
  /* the example of the manual */
  bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16);
  d.int_type = BQ_E4M3;
  d.scale_type = BQ_UE8M0;
  char sku[256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dynamic_quantize.fwd.per_token.bf16.e4m3.scale_ue8m0."), "%s", sku);
  cr_assert(strstr(sku, ".sym.pow2.sm_90"), "%s", sku);
}

/* args.amax_bound: 0 is none; symmetric dynamic plans take a bound that is finite and > 0
   in C (f32 for f32, f16, bf16 data: one RNE conversion; f64 for f64); asymmetric dynamic
   plans and every other op refuse any nonzero bound, naming it */
Test(args, amax_bound) {
  const double always_bad[] = {-1.0, -DBL_MIN, NAN, -NAN, INFINITY, -INFINITY};
  /* f32 edges: FLT_MAX is finite; 2^128 - 2^103 rounds (tie, to even) to inf; 2^-150
     rounds to 0; just above it to 2^-149 */
  const double f32_ok[] = {1.0, 448.0, 1e-30, 70000.0, (double)FLT_MAX, 0x1.fffffefffffffp127, 0x1.0000000000001p-150,
                           (double)FLT_TRUE_MIN};
  const double f32_bad[] = {0x1.ffffffp127, 1e39, DBL_MAX, 0x1p-150, 1e-50, DBL_TRUE_MIN};
  const double f64_ok[] = {1.0, 1e39, DBL_MAX, 1e-50, DBL_TRUE_MIN, 0x1p-150};
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_ALL, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      bq_args a = base_args(c[i].d.granularity);
      if (ITS4[k] == BQ_E4M3 || ITS4[k] == BQ_E5M2) a.zero_point = 0, a.zero_points = NULL;
      a.amax_bound = 0.0;
      expect_args_ok(&c[i], &a, 0, "no bound");
      char needle[64];
      snprintf(needle, sizeof needle, "args.amax_bound (");
      int sym_dyn = is_dyn(&c[i].d) && !c[i].d.asymmetric;
      if (!sym_dyn) {
        const double any[] = {1.0, 1e-30, 0x1p-150, -1.0, NAN, INFINITY};
        for (size_t b = 0; b < NELEM(any); b++) {
          a.amax_bound = any[b];
          expect_args_invalid(&c[i], &a, needle);
        }
        checked++;
        continue;
      }
      int f64 = c[i].d.float_type == BQ_F64;
      for (size_t b = 0; b < NELEM(always_bad); b++) {
        a.amax_bound = always_bad[b];
        expect_args_invalid(&c[i], &a, needle);
      }
      const double *ok = f64 ? f64_ok : f32_ok;
      size_t nok = f64 ? NELEM(f64_ok) : NELEM(f32_ok);
      for (size_t b = 0; b < nok; b++) {
        a.amax_bound = ok[b];
        char what[64];
        snprintf(what, sizeof what, "bound %a", ok[b]);
        expect_args_ok(&c[i], &a, 0, what);
      }
      if (!f64)
        for (size_t b = 0; b < NELEM(f32_bad); b++) {
          a.amax_bound = f32_bad[b];
          expect_args_invalid(&c[i], &a, needle);
        }
      checked++;
    }
  }
  cr_assert_eq(checked, 2 * (120 + 32) + 2 * (120 + 16), "%zu", checked);
}

/* pow2 and UE8M0 dynamic plans take the same arguments as the others; a bound with them */
Test(args, pow2_and_ue8m0_dynamic_base_arguments_are_valid) {
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_ALL, F_DYNAMIC, ITS4[k]);
    for (size_t i = 0; i < n; i++)
      for (int s = 0; s < 2; s++) {
        combo cc = c[i];
        cc.d.pow2_scales = 1;
        if (s) cc.d.scale_type = BQ_UE8M0;
        bq_args a = base_args(cc.d.granularity);
        expect_args_ok(&cc, &a, 0, "base");
        if (!cc.d.asymmetric) {
          a.amax_bound = 3.5;
          expect_args_ok(&cc, &a, 0, "bound");
        }
      }
  }
}

/* ---- per block, MN-major scales, packed UE8M0 scales ---------------------------------- */
/* BQ_PER_BLOCK: B x B tiles (B = args.group_size), edge tiles partial, scales
   [ceil(rows / B)][ceil(cols / B)] with leading dimension group_row_stride >= ceil(cols / B);
   every affine op and dynamic quantize; not the fused producers nor the linear layers.
   desc.scale_layout: BQ_SCALES_ROW_MAJOR (0) or BQ_SCALES_MN_MAJOR (1), the latter per group
   only: scales [c / G][r], leading dimension >= rows (default rows rounded up to 4).
   desc.scale_type BQ_UE8M0X4: per group only, symmetric only (no zero points), leading
   dimension in int32 words (row-major >= ceil(groups / 4)), pointers 4-byte aligned;
   dynamic quantize takes power-of-two scales from it. */

/* can_implement and run both refuse a with status want, the same message, which starts
   with the plan's name and contains needle */
static void expect_args_status(const combo *c, const bq_args *a, bq_status want, const char *needle) {
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&c->d, &plan), BQ_SUCCESS, "%s: %s", c->ctx, bq_last_error());
  char prefix[128], msg[1024];
  prefix_of(c, prefix, sizeof prefix);
  clear_error();
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, want, "%s can_implement: got %s (%s), want %s [%s]", c->ctx, bq_status_name(st), bq_last_error(),
               bq_status_name(want), needle);
  check_msg(prefix, needle, c->ctx, "bq_plan_can_implement");
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  clear_error();
  st = bq_plan_run(&plan, a, NULL, 0, NULL);
  cr_assert_eq(st, want, "%s run: got %s (%s)", c->ctx, bq_status_name(st), bq_last_error());
  cr_assert_str_eq(bq_last_error(), msg, "%s: run says \"%s\", can_implement said \"%s\"", c->ctx, bq_last_error(), msg);
  expect_workspace_agrees(&plan, a, want, msg, c->ctx);
}

/* the view bq_plan_run would launch with: B or G, blocks a row, and the kernels' leading
   dimension (bytes for packed scales) */
static void expect_view(const combo *c, const bq_args *a, int64_t group, int64_t ngroups, int64_t grs) {
  bq_plan plan;
  bq__view v;
  cr_assert_eq(bq__plan_init(&c->d, &plan), BQ_SUCCESS, "%s: %s", c->ctx, bq_last_error());
  cr_assert_eq(bq__view_of(&plan, a, &v), BQ_SUCCESS, "%s: %s", c->ctx, bq_last_error());
  cr_assert_eq(v.group, group, "%s: group %lld, want %lld", c->ctx, (long long)v.group, (long long)group);
  cr_assert_eq(v.ngroups, ngroups, "%s: ngroups %lld, want %lld", c->ctx, (long long)v.ngroups, (long long)ngroups);
  cr_assert_eq(v.grs, grs, "%s: grs %lld, want %lld", c->ctx, (long long)v.grs, (long long)grs);
}

/* c with another scale type and layout, its ctx saying so */
static combo with_scales(const combo *c, bq_dtype st, bq_scale_layout lay) {
  combo r = *c;
  r.d.scale_type = st;
  r.d.scale_layout = lay;
  snprintf(r.ctx, sizeof r.ctx, "%.80s scale %d%s]", c->ctx, (int)st, lay == BQ_SCALES_MN_MAJOR ? " mn" : "");
  return r;
}

Test(desc, block_layout_and_packed_enums) {
  cr_assert_eq((int)BQ_PER_BLOCK, 5);
  cr_assert_eq((int)BQ_SCALES_ROW_MAJOR, 0);
  cr_assert_eq((int)BQ_SCALES_MN_MAJOR, 1);
  cr_assert_eq((int)BQ_UE8M0X4, 11);
  cr_assert_eq((int)BQ_UE8M0X4, (int)BQ_UE8M0 + 1);
  cr_assert_str_eq(bq__dtype_name(BQ_UE8M0X4), "ue8m0x4");
  cr_assert_eq(bq__dtype_size(BQ_UE8M0X4), 4);
  cr_assert_str_eq(bq__gran_name(BQ_PER_BLOCK), "per_block");
  cr_assert_eq((int)BQ_SCALES_BLOCKED, 2);
  cr_assert_eq((int)BQ_E2M1, 12);
  cr_assert_str_eq(bq__dtype_name(BQ_E2M1), "e2m1");
  /* fields are appended (scale_layout, scale_rule, random_signs, then rounding, the
     descriptor's last): zero-initialized descs keep row-major scales, the library's rule, no
     signs and round to nearest even */
  const size_t end = offsetof(bq_desc, rotation) + sizeof(int), al = _Alignof(bq_desc);
  cr_assert_eq((end + al - 1) / al * al, sizeof(bq_desc), "rotation ends at %zu of %zu", end, sizeof(bq_desc));
  cr_assert(offsetof(bq_desc, rotation) > offsetof(bq_desc, rounding));
  cr_assert(offsetof(bq_desc, rounding) > offsetof(bq_desc, random_signs));
  cr_assert(offsetof(bq_args, rotation_block) > offsetof(bq_args, offset));
  cr_assert(offsetof(bq_desc, random_signs) > offsetof(bq_desc, scale_rule));
  cr_assert(offsetof(bq_args, seed) > offsetof(bq_args, out_tensor_scale));
  cr_assert(offsetof(bq_args, offset) > offsetof(bq_args, seed));
  cr_assert_eq((int)BQ_ROUND_NEAREST_EVEN, 0);
  cr_assert_eq(sizeof(bq_rounding), sizeof(int));
  cr_assert_eq(sizeof(bq_scale_layout), sizeof(int));
  cr_assert(offsetof(bq_desc, scale_layout) > offsetof(bq_desc, pow2_scales));
  cr_assert(offsetof(bq_desc, scale_rule) > offsetof(bq_desc, scale_layout));
}

Test(desc, scale_layout_not_a_bq_scale_layout) {
  const int bad[] = {3, -1, 99, INT_MIN}; /* (2, BQ_SCALES_BLOCKED, names a microscaling format) */
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_ALL);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_desc d = c[i].d;
      d.scale_layout = (bq_scale_layout)bad[b];
      char prefix[64], needle[128];
      snprintf(prefix, sizeof prefix, "%s: ", op_str(d.op)); /* checked before the plan is named */
      snprintf(needle, sizeof needle, "desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR or BQ_SCALES_MN_MAJOR",
               bad[b]);
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
    }
  /* the linear layers and the fused producers: out of range is malformed there too (2, the
     blocked layout, makes a fused producer's output a microscaling format) */
  bq_desc ds[64];
  const char *lead[64];
  n = other_ops(ds, lead);
  for (size_t i = 0; i < n; i++) {
    bq_desc d = ds[i];
    const int fused = d.op == BQ_RMSNORM_QUANTIZE || d.op == BQ_GATED_QUANTIZE;
    d.scale_layout = (bq_scale_layout)(fused ? 3 : 2);
    char ctx[64], needle[96];
    snprintf(ctx, sizeof ctx, "[%s #%zu]", lead[i], i);
    snprintf(needle, sizeof needle, "desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR or BQ_SCALES_MN_MAJOR",
             (int)d.scale_layout);
    expect_desc_invalid(&d, NULL, needle, ctx);
  }
}

/* MN-major: per group, every affine op and dynamic quantize, every storage and scale type */
Test(desc, mn_major_per_group_accepted) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_GROUP, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type, BQ_UE8M0, BQ_UE8M0X4};
      for (size_t s = 0; s < NELEM(sts); s++) {
        if (sts[s] == BQ_UE8M0X4 && c[i].d.asymmetric) continue; /* no zero points: below */
        bq_desc d = c[i].d;
        d.scale_type = sts[s];
        d.scale_layout = BQ_SCALES_MN_MAJOR;
        expect_desc_valid(&d, c[i].ctx);
        bq_desc out;
        char name[96];
        cr_assert_eq(bq__normalize(&d, &out, name, sizeof name), BQ_SUCCESS);
        cr_assert_eq(out.scale_layout, BQ_SCALES_MN_MAJOR, "%s", c[i].ctx);
        cr_assert_str_eq(name, c[i].name); /* the layout is not part of the plan's name */
        checked++;
      }
    }
  }
  /* affine 24 combos, dynamic 4 symmetric + 4 asymmetric (int types) per storage type */
  cr_assert_eq(checked, 4 * 24 * 5 + 2 * (4 * 5 + 4 * 4) + 2 * 4 * 5, "%zu", checked);
}

/* MN-major with another granularity is malformed: INVALID_ARGUMENT naming desc.scale_layout */
Test(desc, mn_major_other_granularities_refused) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_TENSOR | G_CHANNEL | G_TOKEN | G_BLOCK, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      bq_desc d = c[i].d;
      d.scale_layout = BQ_SCALES_MN_MAJOR;
      char prefix[128];
      prefix_of(&c[i], prefix, sizeof prefix);
      expect_desc_invalid(&d, prefix, "desc.scale_layout (1, MN-major) applies to per-group scales only", c[i].ctx);
      if (d.granularity == BQ_PER_TENSOR) { /* the default granularity is per tensor too */
        d.granularity = BQ_GRANULARITY_DEFAULT;
        expect_desc_invalid(&d, prefix, "desc.scale_layout (1, MN-major)", c[i].ctx);
      }
      checked++;
    }
  }
  cr_assert(checked > 400, "%zu", checked);
}

/* per block: every affine op (either direction) and dynamic quantize (symmetric or
   asymmetric, pow2), every storage type, scales f32, T or UE8M0 */
Test(desc, per_block_accepted) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_BLOCK, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      const bq_dtype sts[] = {BQ_DTYPE_DEFAULT, BQ_F32, c[i].d.float_type, BQ_UE8M0};
      for (size_t s = 0; s < NELEM(sts); s++)
        for (int p2 = 0; p2 < (is_dyn(&c[i].d) ? 2 : 1); p2++) {
          bq_desc d = c[i].d, out;
          d.scale_type = sts[s];
          d.pow2_scales = p2;
          expect_desc_valid(&d, c[i].ctx);
          char name[96];
          cr_assert_eq(bq__normalize(&d, &out, name, sizeof name), BQ_SUCCESS);
          cr_assert_eq(out.granularity, BQ_PER_BLOCK);
          cr_assert_str_eq(name, c[i].name);
          cr_assert(strstr(name, "_per_block"), "%s", name);
          checked++;
        }
    }
  }
  cr_assert_eq(checked, 4 * 24 * 4 + 2 * 8 * 4 * 2 + 2 * 4 * 4 * 2, "%zu", checked);
}

/* BQ_UE8M0X4 packs per-group scales: any other granularity names desc.scale_type */
Test(desc, ue8m0x4_per_group_only) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_TENSOR | G_CHANNEL | G_TOKEN | G_BLOCK, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++) {
      if (c[i].d.asymmetric) continue;
      bq_desc d = c[i].d;
      d.scale_type = BQ_UE8M0X4;
      char prefix[128];
      prefix_of(&c[i], prefix, sizeof prefix);
      const char *needle = "desc.scale_type (ue8m0x4) packs per-group scales: desc.granularity must be BQ_PER_GROUP";
      expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      if (d.granularity == BQ_PER_TENSOR) {
        d.granularity = BQ_GRANULARITY_DEFAULT;
        expect_desc_invalid(&d, prefix, needle, c[i].ctx);
      }
      checked++;
    }
  }
  cr_assert(checked > 400, "%zu", checked);
}

/* packed scales carry no zero points: asymmetric dynamic quantize refuses them, in either
   layout, naming desc.asymmetric */
Test(desc, ue8m0x4_asymmetric_refused) {
  const bq_dtype its[] = {BQ_S8, BQ_U8};
  for (size_t k = 0; k < NELEM(its); k++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (int lay = 0; lay < 2; lay++) {
        bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, FTS[f]);
        d.int_type = its[k];
        d.scale_type = BQ_UE8M0X4;
        d.scale_layout = (bq_scale_layout)lay;
        char ctx[96];
        snprintf(ctx, sizeof ctx, "[dynamic per_group %s %s layout %d]", ft_str(FTS[f]), it_str(its[k]), lay);
        expect_desc_valid(&d, ctx);
        d.asymmetric = 1;
        expect_desc_invalid(&d, "dynamic_quantize_per_group_asymmetric: ",
                            "desc.asymmetric (1) needs zero points, which packed scales (desc.scale_type ue8m0x4) "
                            "do not carry", ctx);
        d.asymmetric = 2; /* refused as well, naming the field */
        expect_desc_invalid(&d, NULL, "desc.asymmetric (", ctx);
      }
}

/* accepted per group in either layout: every affine op and symmetric dynamic quantize,
   every storage type; dynamic quantize takes power-of-two scales from it (pow2_scales set
   in the normalized desc, and the same kernel whether asked or not) */
Test(desc, ue8m0x4_accepted_and_implies_pow2) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_GROUP, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < n; i++)
      for (int lay = 0; lay < 2; lay++) {
        if (c[i].d.asymmetric) continue;
        int dyn = is_dyn(&c[i].d);
        bq_desc d = c[i].d, out, again;
        d.scale_type = BQ_UE8M0X4;
        d.scale_layout = (bq_scale_layout)lay;
        expect_desc_valid(&d, c[i].ctx);
        char name[96], sku[256], sku2[256];
        cr_assert_eq(bq__normalize(&d, &out, name, sizeof name), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
        cr_assert_eq(out.scale_type, BQ_UE8M0X4, "%s", c[i].ctx);
        cr_assert_eq(out.scale_layout, (bq_scale_layout)lay, "%s", c[i].ctx);
        cr_assert_eq(out.pow2_scales, dyn, "%s: pow2_scales %d", c[i].ctx, out.pow2_scales);
        cr_assert_eq(bq__normalize(&out, &again, name, sizeof name), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
        cr_assert(!memcmp(&out, &again, sizeof out), "%s: normalizing twice changed the desc", c[i].ctx);
        cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
        cr_assert(strstr(sku, lay ? ".scale_mn_ue8m0x4." : ".scale_ue8m0x4."), "%s: %s", c[i].ctx, sku);
        cr_assert_eq(strstr(sku, ".pow2.") != NULL, dyn, "%s: %s", c[i].ctx, sku);
        if (dyn) {
          d.pow2_scales = 1;
          cr_assert_eq(bq_sku(&d, 90, sku2, sizeof sku2), BQ_SUCCESS);
          cr_assert_str_eq(sku, sku2, "%s", c[i].ctx);
        }
        checked++;
      }
  }
  cr_assert_eq(checked, 4 * (24 + 4) * 2, "%zu", checked);
}

/* SKUs: the granularity token per_block, the scale token scale_mn_<type> for MN-major,
   scale_ue8m0x4 for packed scales; each kernel its own SKU; a normalized desc has its
   input's SKU */
Test(desc, block_mn_and_packed_skus) {
  enum { CAP = 4 * 1024 };
  static char skus[CAP][256];
  size_t n = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t m = it_combos(c, G_TOKEN | G_GROUP | G_BLOCK, F_BOTH, ITS4[k]);
    for (size_t i = 0; i < m; i++) {
      const bq_dtype sts[] = {BQ_F32, c[i].d.float_type, BQ_UE8M0, BQ_UE8M0X4};
      for (size_t s = 0; s < NELEM(sts); s++)
        for (int lay = 0; lay < 2; lay++) {
          int group = c[i].d.granularity == BQ_PER_GROUP;
          if (s == 1 && c[i].d.float_type == BQ_F32) continue; /* the same kernel */
          if ((lay || sts[s] == BQ_UE8M0X4) && !group) continue;
          if (sts[s] == BQ_UE8M0X4 && c[i].d.asymmetric) continue;
          bq_desc d = c[i].d, out;
          d.scale_type = sts[s];
          d.scale_layout = (bq_scale_layout)lay;
          cr_assert_eq(bq_sku(&d, 90, skus[n], sizeof skus[n]), BQ_SUCCESS, "%s: %s", c[i].ctx, bq_last_error());
          const char *sku = skus[n];
          cr_assert_eq(strstr(sku, ".per_block.") != NULL, c[i].d.granularity == BQ_PER_BLOCK, "%s", sku);
          cr_assert_eq(strstr(sku, ".scale_mn_") != NULL, lay, "%s", sku);
          cr_assert_eq(strstr(sku, "ue8m0x4") != NULL, sts[s] == BQ_UE8M0X4, "%s", sku);
          char name[96], again[256];
          cr_assert_eq(bq__normalize(&d, &out, name, sizeof name), BQ_SUCCESS);
          cr_assert_eq(bq_sku(&out, 90, again, sizeof again), BQ_SUCCESS);
          cr_assert_str_eq(again, sku);
          n++;
          cr_assert(n < CAP);
        }
    }
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) cr_assert(strcmp(skus[i], skus[j]), "two kernels share the SKU %s", skus[i]);
  /* spelled out */
  bq_desc d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_BF16);
  d.int_type = BQ_E4M3;
  char sku[256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dynamic_quantize.fwd.per_block.bf16.e4m3.scale_f32.") == sku, "%s", sku);
  d = mkdesc(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16);
  d.scale_type = BQ_UE8M0X4;
  d.scale_layout = BQ_SCALES_MN_MAJOR;
  cr_assert_eq(bq_sku(&d, 80, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, "dequantize.fwd.per_group.f16.s8.q[-128,127].scale_mn_ue8m0x4.") == sku, "%s", sku);
  d.scale_type = BQ_F32;
  cr_assert_eq(bq_sku(&d, 80, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, ".scale_mn_f32.") , "%s", sku);
}

/* The kernels' prelude: BQ_GRAN_BLOCK for per block; BQ_SL names the scales' layout
   (common.cuh: 0 row-major, 1 MN-major, 2 packed MN-major, 3 packed row-major) and packed
   scales are UE8M0 bytes to the kernels (BQ_ST) */
Test(desc, kernel_prelude_of_block_and_layouts) {
  struct { bq_op op; bq_granularity g; bq_dtype st; bq_scale_layout lay; const char *gran; int sl; } k[] = {
    {BQ_QUANTIZE, BQ_PER_BLOCK, BQ_F32, BQ_SCALES_ROW_MAJOR, "BQ_GRAN_BLOCK", 0},
    {BQ_DYNAMIC_QUANTIZE, BQ_PER_BLOCK, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, "BQ_GRAN_BLOCK", 0},
    {BQ_DEQUANTIZE, BQ_PER_GROUP, BQ_F32, BQ_SCALES_MN_MAJOR, "BQ_GRAN_GROUP", 1},
    {BQ_FAKE_QUANTIZE, BQ_PER_GROUP, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR, "BQ_GRAN_GROUP", 2},
    {BQ_DYNAMIC_QUANTIZE, BQ_PER_GROUP, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR, "BQ_GRAN_GROUP", 3},
    {BQ_DYNAMIC_QUANTIZE, BQ_PER_GROUP, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR, "BQ_GRAN_GROUP", 2},
    {BQ_QUANTIZE, BQ_PER_TOKEN, BQ_F32, BQ_SCALES_ROW_MAJOR, "BQ_GRAN_TOKEN", 0},
  };
  for (size_t i = 0; i < NELEM(k); i++) {
    bq_desc d = mkdesc(k[i].op, BQ_FORWARD, k[i].g, BQ_BF16);
    d.scale_type = k[i].st;
    d.scale_layout = k[i].lay;
    bq__target t = {90, 0, 0, 0};
    bq__kernel_src ks;
    cr_assert_eq(bq__kernel_for(&d, &t, &ks), BQ_SUCCESS, "#%zu: %s", i, bq_last_error());
    char want[64];
    snprintf(want, sizeof want, "#define BQ_GRAN %s\n", k[i].gran);
    cr_assert(strstr(ks.source.p, want), "#%zu: %s missing", i, want);
    snprintf(want, sizeof want, "#define BQ_SL %d\n", k[i].sl);
    cr_assert(strstr(ks.source.p, want), "#%zu: %s missing", i, want);
    const int ue8m0 = k[i].st == BQ_UE8M0 || k[i].st == BQ_UE8M0X4;
    cr_assert(strstr(ks.source.p, ue8m0 ? "#define BQ_ST BQ_TYPE_UE8M0\n" : "#define BQ_ST BQ_TYPE_F32\n"), "#%zu", i);
    if (k[i].g == BQ_PER_BLOCK)
      cr_assert(strstr(ks.source.p, "#define BQ_GRAN_BLOCK 5\n"), "#%zu: BQ_GRAN_BLOCK is not the enum's value", i);
    BQ_FREE(ks.source.p);
  }
}

/* ---- per block arguments ---- */
Test(args, per_block_group_size_below_one) {
  const int64_t bad[] = {0, -1, -16, INT64_MIN};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_BLOCK);
  cr_assert_eq(n, 32);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(bad); b++) {
      bq_args a = base_args(BQ_PER_BLOCK);
      a.group_size = bad[b];
      char needle[64];
      snprintf(needle, sizeof needle, "args.group_size (%lld) must be >= 1", (long long)bad[b]);
      expect_args_invalid(&c[i], &a, needle);
      a.rows = 0;
      expect_args_invalid(&c[i], &a, needle);
    }
}

/* rows and cols need not be multiples of B: ceil(cols / B) blocks a row, the leading
   dimension defaulting to it; B larger than the matrix is one partial tile */
Test(args, per_block_partial_tiles_accepted) {
  const struct { int64_t rows, cols, B, ng; } ok[] = {
    {40, 64, 16, 4}, {40, 50, 16, 4}, {7, 50, 16, 4}, {40, 64, 100, 1}, {3, 5, 7, 1}, {1, 129, 128, 2},
    {33, 33, 1, 33}, {40, 64, 32768, 1}, {5, 100, 3, 34}};
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_BLOCK);
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < NELEM(ok); b++) {
      bq_args a = base_args(BQ_PER_BLOCK);
      a.rows = ok[b].rows;
      a.cols = ok[b].cols;
      a.group_size = ok[b].B;
      if (c[i].d.direction == BQ_BACKWARD || is_dyn(&c[i].d)) a.zero_points = NULL;
      char what[96];
      snprintf(what, sizeof what, "%lld x %lld, B %lld", (long long)a.rows, (long long)a.cols, (long long)a.group_size);
      expect_args_ok(&c[i], &a, 0, what);
      expect_view(&c[i], &a, ok[b].B, ok[b].ng, ok[b].ng);
      a.group_row_stride = ok[b].ng + 3;
      expect_args_ok(&c[i], &a, 0, what);
      expect_view(&c[i], &a, ok[b].B, ok[b].ng, ok[b].ng + 3);
      a.group_row_stride = ok[b].ng;
      expect_args_ok(&c[i], &a, 0, what);
    }
}

Test(args, per_block_group_row_stride_smaller_than_blocks_per_row) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_BLOCK);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_BLOCK);
    a.cols = 50; /* 4 blocks of 16 a row, the last partial */
    a.group_row_stride = 3;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (3) is smaller than cols / group_size rounded up (4)");
    a.group_row_stride = 1;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (1) is smaller than cols / group_size rounded up (4)");
    a.cols = 64; /* whole blocks: the same words */
    a.group_row_stride = 3;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (3) is smaller than cols / group_size rounded up (4)");
    a.group_size = 5; /* 13 blocks */
    a.group_row_stride = 12;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (12) is smaller than cols / group_size rounded up (13)");
    a.group_row_stride = 13;
    expect_args_ok(&c[i], &a, 0, "13 blocks");
  }
}

/* the scales' array, ceil(rows / B) rows of group_row_stride, is bounded like per group's */
Test(args, per_block_group_row_stride_too_large) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_BLOCK);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_BLOCK);
    a.rows = (int64_t)1 << 24; /* 2^20 rows of blocks: at most 2^56 entries */
    a.group_row_stride = ((int64_t)1 << 36) + 1;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (68719476737) is too large");
    a.group_row_stride = INT64_MAX;
    expect_args_invalid(&c[i], &a, "args.group_row_stride (9223372036854775807) is too large");
    a.group_row_stride = (int64_t)1 << 36;
    expect_args_ok(&c[i], &a, 0, "2^20 rows of blocks * 2^36");
    a.rows = ((int64_t)1 << 24) + 1; /* one more (partial) row of blocks */
    expect_args_invalid(&c[i], &a, "args.group_row_stride (68719476736) is too large");
  }
}

/* dynamic per block: B above 32768 is not offered (a tile's indices are 32-bit); the
   affine ops take any B */
Test(args, per_block_dynamic_largest_block) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_BLOCK);
  for (size_t i = 0; i < n; i++) {
    bq_args a = base_args(BQ_PER_BLOCK);
    a.group_size = 32768;
    expect_args_ok(&c[i], &a, 0, "B 32768");
    const int64_t big[] = {32769, 65536, (int64_t)1 << 40};
    for (size_t b = 0; b < NELEM(big); b++) {
      a.group_size = big[b];
      if (!is_dyn(&c[i].d)) {
        expect_args_ok(&c[i], &a, 0, "large B, affine");
        continue;
      }
      char needle[128];
      snprintf(needle, sizeof needle, "args.group_size (%lld) is larger than 32768, the largest block dynamic "
               "quantize offers", (long long)big[b]);
      expect_args_status(&c[i], &a, BQ_ERROR_NOT_SUPPORTED, needle);
    }
  }
}

/* per group's messages stay as they were, in either layout and with packed scales */
Test(args, per_group_messages_in_every_layout) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++)
    for (int lay = 0; lay < 2; lay++)
      for (int x4 = 0; x4 < 2; x4++) {
        if (x4 && c[i].d.asymmetric) continue;
        combo cc = with_scales(&c[i], x4 ? BQ_UE8M0X4 : BQ_F32, (bq_scale_layout)lay);
        bq_args a = base_args(BQ_PER_GROUP);
        if (x4) a.zero_points = NULL;
        expect_args_ok(&cc, &a, 0, "base");
        a.group_size = 48;
        expect_args_invalid(&cc, &a, "args.group_size (48) does not divide args.cols (64)");
        a.group_size = 0;
        expect_args_invalid(&cc, &a, "args.group_size (0) must be >= 1");
        if (!lay && !x4) {
          a.group_size = 16;
          a.group_row_stride = 3;
          expect_args_invalid(&cc, &a, "args.group_row_stride (3) is smaller than cols / group_size (4)");
        }
      }
}

/* MN-major: the leading dimension runs over rows: >= rows, default rows rounded up to 4 */
Test(args, mn_major_group_row_stride) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    combo cc = with_scales(&c[i], BQ_F32, BQ_SCALES_MN_MAJOR);
    bq_args a = base_args(BQ_PER_GROUP); /* 4 rows, 4 groups of 16 */
    expect_view(&cc, &a, 16, 4, 4);
    a.rows = 5;
    expect_view(&cc, &a, 16, 4, 8);
    a.rows = 1;
    expect_view(&cc, &a, 16, 4, 4);
    a.rows = 13;
    a.group_row_stride = 12;
    expect_args_invalid(&cc, &a, "args.group_row_stride (12) is smaller than args.rows (13)");
    a.group_row_stride = 1;
    expect_args_invalid(&cc, &a, "args.group_row_stride (1) is smaller than args.rows (13)");
    a.group_row_stride = 13; /* not a multiple of 4: allowed */
    expect_args_ok(&cc, &a, 0, "ld == rows");
    expect_view(&cc, &a, 16, 4, 13);
    a.group_row_stride = 0;
    expect_view(&cc, &a, 16, 4, 16);
    /* fewer rows than groups: the row-major rule (ld >= groups) is not the one applied */
    a.rows = 2;
    a.group_size = 1; /* 64 groups */
    a.group_row_stride = 2;
    expect_args_ok(&cc, &a, 0, "2 rows, 64 groups, ld 2");
    /* the array is ngroups columns of ld: at most 2^56 entries (2^54 words when packed) */
    a.rows = 4;
    a.group_size = 16;
    const int64_t lim = (int64_t)1 << (cc.d.scale_type == BQ_UE8M0X4 ? 52 : 54); /* 4 groups */
    char msg[96];
    snprintf(msg, sizeof msg, "args.group_row_stride (%lld) is too large", (long long)(lim + 1));
    a.group_row_stride = lim + 1;
    expect_args_invalid(&cc, &a, msg);
    a.group_row_stride = lim;
    expect_args_ok(&cc, &a, 0, "4 groups * the bound");
  }
}

/* packed scales, row-major: the leading dimension counts int32 words, >= ceil(groups / 4);
   the kernels get it in bytes */
Test(args, ue8m0x4_row_major_group_row_stride) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    combo cc = with_scales(&c[i], BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR);
    bq_args a = base_args(BQ_PER_GROUP); /* 4 groups: one word */
    a.zero_points = NULL;
    expect_args_ok(&cc, &a, 0, "base");
    expect_view(&cc, &a, 16, 4, 4);
    a.group_size = 4; /* 16 groups: 4 words */
    expect_view(&cc, &a, 4, 16, 16);
    a.group_row_stride = 3;
    expect_args_invalid(&cc, &a, "args.group_row_stride (3) is smaller than the row's int32 words of packed scales (4)");
    a.group_row_stride = 4;
    expect_view(&cc, &a, 4, 16, 16);
    a.group_row_stride = 7;
    expect_view(&cc, &a, 4, 16, 28);
    a.cols = 80; /* 5 groups of 16: 2 words, the second with 3 bytes of padding */
    a.group_size = 16;
    a.group_row_stride = 0;
    expect_view(&cc, &a, 16, 5, 8);
    a.group_row_stride = 1;
    expect_args_invalid(&cc, &a, "args.group_row_stride (1) is smaller than the row's int32 words of packed scales (2)");
    a.group_row_stride = 2;
    expect_args_ok(&cc, &a, 0, "2 words");
    /* bounded as an array of words */
    a.rows = (int64_t)1 << 20;
    a.group_row_stride = ((int64_t)1 << 34) + 1;
    expect_args_invalid(&cc, &a, "args.group_row_stride (17179869185) is too large");
    a.group_row_stride = (int64_t)1 << 34;
    expect_args_ok(&cc, &a, 0, "2^20 rows of 2^34 words");
  }
}

/* packed scales, MN-major: words (g / 4) * ld + r, ld >= rows (default rows rounded up to 4) */
Test(args, ue8m0x4_mn_major_group_row_stride) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    combo cc = with_scales(&c[i], BQ_UE8M0X4, BQ_SCALES_MN_MAJOR);
    bq_args a = base_args(BQ_PER_GROUP);
    a.zero_points = NULL;
    a.rows = 6;
    expect_view(&cc, &a, 16, 4, 4 * 8);
    a.group_row_stride = 5;
    expect_args_invalid(&cc, &a, "args.group_row_stride (5) is smaller than args.rows (6)");
    a.group_row_stride = 6;
    expect_args_ok(&cc, &a, 0, "ld == rows");
    expect_view(&cc, &a, 16, 4, 4 * 6);
    /* many groups, few rows: ld is a count of rows, not of words a row */
    a.rows = 1;
    a.group_size = 1; /* 64 groups: 16 word rows */
    a.group_row_stride = 1;
    expect_args_ok(&cc, &a, 0, "1 row, 64 groups, ld 1");
    expect_view(&cc, &a, 1, 64, 4);
    /* bounded: ceil(groups / 4) word rows of ld */
    a.group_row_stride = ((int64_t)1 << 50) + 1; /* 16 word rows */
    expect_args_invalid(&cc, &a, "args.group_row_stride (1125899906842625) is too large");
    a.group_row_stride = (int64_t)1 << 50;
    expect_args_ok(&cc, &a, 0, "16 word rows of 2^50");
  }
}

/* packed scale pointers are int32 words: 4-byte aligned (scales; dynamic's out_scales) */
Test(args, ue8m0x4_pointers_4_byte_aligned) {
  combo c[MAX_COMBOS];
  size_t n = combos(c, G_GROUP);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    for (int lay = 0; lay < 2; lay++) {
      combo cc = with_scales(&c[i], BQ_UE8M0X4, (bq_scale_layout)lay);
      int dyn = is_dyn(&cc.d);
      const char *field = dyn ? "args.out_scales" : "args.scales";
      for (int off = 1; off < 4; off++) {
        bq_args a = base_args(BQ_PER_GROUP);
        a.zero_points = NULL;
        uintptr_t p = (dyn ? POS : PS) + 0x40 + (uintptr_t)off;
        if (dyn) a.out_scales = (void *)p;
        else a.scales = (const void *)p;
        char needle[128];
        snprintf(needle, sizeof needle, "%s (%p) is not aligned to its element size (4 bytes)", field, (const void *)p);
        expect_args_invalid(&cc, &a, needle);
      }
      bq_args a = base_args(BQ_PER_GROUP);
      a.zero_points = NULL;
      if (dyn) a.out_scales = (void *)(POS + 4);
      else a.scales = (const void *)(PS + 4);
      expect_args_ok(&cc, &a, 0, "4-byte aligned");
      /* a byte-aligned UE8M0 array is fine unpacked */
      combo cu = with_scales(&c[i], BQ_UE8M0, (bq_scale_layout)lay);
      if (dyn) a.out_scales = (void *)(POS + 1);
      else a.scales = (const void *)(PS + 1);
      expect_args_ok(&cu, &a, 0, "ue8m0 byte-aligned");
    }
  }
}

/* static ops with packed scales take no zero points: args.zero_points must be NULL, even
   for a zero-size call; NULL is accepted */
Test(args, ue8m0x4_static_zero_points_refused) {
  size_t checked = 0;
  for (size_t k = 0; k < NELEM(ITS4); k++) {
    combo c[MAX_COMBOS];
    size_t n = it_combos(c, G_GROUP, F_AFFINE, ITS4[k]);
    for (size_t i = 0; i < n; i++)
      for (int lay = 0; lay < 2; lay++) {
        combo cc = with_scales(&c[i], BQ_UE8M0X4, (bq_scale_layout)lay);
        bq_args a = base_args(BQ_PER_GROUP);
        a.zero_points = NULL;
        expect_args_ok(&cc, &a, 0, "no zero points");
        a.zero_points = (const int32_t *)PZ;
        char needle[128];
        snprintf(needle, sizeof needle, "args.zero_points (%p) must be NULL: packed scales (ue8m0x4) carry no zero "
                 "points", (const void *)PZ);
        expect_args_invalid(&cc, &a, needle);
        a.rows = 0;
        expect_args_invalid(&cc, &a, needle);
        checked++;
      }
  }
  cr_assert_eq(checked, 4 * 24 * 2, "%zu", checked);
  /* dynamic quantize reads no zero points: its symmetric plans ignore the field */
  combo c[MAX_COMBOS];
  size_t n = combos_of(c, G_GROUP, F_DYNAMIC);
  for (size_t i = 0; i < n; i++) {
    if (c[i].d.asymmetric) continue;
    combo cc = with_scales(&c[i], BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR);
    bq_args a = base_args(BQ_PER_GROUP);
    expect_args_ok(&cc, &a, 0, "zero_points set, not read");
    a.out_zero_points = NULL;
    expect_args_ok(&cc, &a, 0, "out_zero_points NULL");
    a.amax_bound = 3.5; /* a bound with packed power-of-two scales */
    expect_args_ok(&cc, &a, 0, "amax bound");
    a.amax_bound = -1.0;
    expect_args_invalid(&cc, &a, "args.amax_bound (");
  }
}

/* ---- the second probe's findings ----------------------------------------------------------- */
TestSuite(probe2, .init = two_devices);
/* a plan for d on the fake driver's device, every entry point the fake entry (launches run
   nothing and are checked against the launch limits) */
static void fake_plan(const bq_desc *d, bq_plan *plan, bq__entry *entry) {
  cr_assert_eq(bq__plan_init(d, plan), BQ_SUCCESS, "%s", bq_last_error());
  int pushed = -1;
  bq__device_info info;
  cr_assert_eq(bq__plan_context(plan->desc.device, &plan->ctx, &pushed, &info), BQ_SUCCESS, "%s", bq_last_error());
  if (pushed) {
    bq__CUcontext c;
    bq__drv.cuCtxPopCurrent(&c);
  }
  plan->device = info.ordinal;
  plan->num_sms = 132;
  memset(entry, 0, sizeof *entry);
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan->mod[e] = entry;
}

/* Signed overflows on calls the library accepts (UndefinedBehaviorSanitizer, which
   tools/run.sh test runs this suite under, stops on them): per block with B near 2^62
   (bq__affine_flat's bound on the groups a warp's tile touches), and packed UE8M0 scales
   with zero rows and a leading dimension near 2^62 (bq__group_shape's bytes of it: such a
   stride is refused, as with rows, naming the field). */
Test(probe2, huge_block_and_packed_stride_overflow_nothing) {
  bq_plan plan;
  bq__entry entry;
  for (int op = 0; op < 3; op++) {
    bq_desc d = mkdesc(OPS[op], BQ_FORWARD, BQ_PER_BLOCK, BQ_F32);
    fake_plan(&d, &plan, &entry);
    bq_args a = base_args(BQ_PER_BLOCK);
    a.group_size = (int64_t)1 << 62; /* one partial tile */
    a.zero_points = NULL;
    bq_status st = bq_plan_run(&plan, &a, NULL, 0, NULL);
    cr_assert(st == BQ_SUCCESS || st == BQ_ERROR_NOT_SUPPORTED, "%s: %s", bq_status_name(st), bq_last_error());
  }
  bq_desc d = mkdesc(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16);
  d.int_type = BQ_E4M3;
  d.scale_type = BQ_UE8M0X4;
  fake_plan(&d, &plan, &entry);
  bq_args a = base_args(BQ_PER_GROUP);
  a.zero_points = NULL;
  a.rows = 0;
  a.group_row_stride = ((int64_t)1 << 62) + 1;
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "args.group_row_stride (4611686018427387905) is too large"), "%s", bq_last_error());
  size_t ws = 1;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_ERROR_INVALID_ARGUMENT);
  a.group_row_stride = 4; /* an ordinary one: the empty call is accepted */
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
}

/* ---- the microscaling formats (src/family_mx.h) -------------------------------------------- */
static combo mx_combo(bq_op op, bq_dtype it, bq_dtype st, bq_scale_layout lay, bq_scale_rule rule) {
  combo c;
  memset(&c, 0, sizeof c);
  c.d.op = op;
  c.d.granularity = BQ_PER_GROUP;
  c.d.float_type = BQ_BF16;
  c.d.int_type = it;
  c.d.scale_type = st;
  c.d.scale_layout = lay;
  c.d.scale_rule = rule;
  snprintf(c.name, sizeof c.name, "%s_per_group", op_str(op));
  snprintf(c.ctx, sizeof c.ctx, "[%s %s %s layout %d rule %d]", c.name, bq__dtype_name(it), bq__dtype_name(st),
           (int)lay, (int)rule);
  return c;
}
/* a valid call of c's plan: [rows, cols] in groups of g, every pointer aligned */
static bq_args mx_args(const combo *c, int64_t rows, int64_t cols, int64_t g) {
  static uint64_t buf[64];
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = buf;
  a.y = buf + 8;
  a.rows = rows, a.cols = cols, a.group_size = g;
  if (c->d.op == BQ_DYNAMIC_QUANTIZE) a.out_scales = buf + 16;
  else a.scales = buf + 16;
  if (c->d.scale_type == BQ_E4M3 && c->d.op != BQ_DYNAMIC_QUANTIZE) a.tensor_scale = buf + 24;
  if (c->d.scale_type == BQ_E4M3 && c->d.op == BQ_DYNAMIC_QUANTIZE) a.out_tensor_scale = buf + 24;
  return a;
}

/* which descriptors are microscaling ones, and that they are accepted and named as such */
Test(desc, mx_descriptors_accepted) {
  const combo ok[] = {
    mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT),
    mx_combo(BQ_DEQUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E4M3, BQ_UE8M0, BQ_SCALES_BLOCKED, BQ_SCALE_FLOOR),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E5M2, BQ_UE8M0, BQ_SCALES_MN_MAJOR, BQ_SCALE_RCEIL_SAT),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_DTYPE_DEFAULT, BQ_SCALES_ROW_MAJOR, BQ_SCALE_EVEN),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_DTYPE_DEFAULT, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT),
    mx_combo(BQ_FAKE_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_MN_MAJOR, BQ_SCALE_RULE_DEFAULT),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_BLOCKED, BQ_SCALE_NVFP4_TORCHAO),
    mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_NVFP4_TE),
  };
  for (size_t i = 0; i < NELEM(ok); i++) {
    cr_assert(bq__is_mx(&ok[i].d), "%s", ok[i].ctx);
    expect_desc_valid(&ok[i].d, ok[i].ctx);
    char buf[256];
    cr_assert_eq(bq_sku(&ok[i].d, 90, buf, sizeof buf), BQ_SUCCESS, "%s: %s", ok[i].ctx, bq_last_error());
    cr_assert(!strncmp(buf, "mx_", 3), "%s: SKU %s", ok[i].ctx, buf);
  }
  /* FP8 per group with UE8M0 in the other layouts under the library's rule stays with the
     affine and dynamic families (MXFP8 as they serve it) */
  combo c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E4M3, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  cr_assert(!bq__is_mx(&c.d));
  c = mx_combo(BQ_QUANTIZE, BQ_E4M3, BQ_UE8M0, BQ_SCALES_MN_MAJOR, BQ_SCALE_RULE_DEFAULT);
  cr_assert(!bq__is_mx(&c.d));
}

Test(desc, mx_fields_refused_by_name) {
  struct { combo c; bq_status want; const char *needle; } cases[20];
  int n = 0;
#define MX_CASE(C, W, N) cases[n].c = (C), cases[n].want = (W), cases[n].needle = (N), n++
  combo c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.direction = BQ_BACKWARD;
  snprintf(c.name, sizeof c.name, "dynamic_quantize_per_group_backward");
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.direction (backward) is not defined for dynamic quantize");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.direction = (bq_direction)7;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.direction (7) is not a bq_direction");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.granularity = BQ_PER_TOKEN;
  snprintf(c.name, sizeof c.name, "quantize_per_token");
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.granularity (per_token) must be BQ_PER_GROUP");
  c = mx_combo(BQ_QUANTIZE, BQ_S8, BQ_UE8M0, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.int_type (5, s8) must be BQ_E2M1, BQ_E4M3 or BQ_E5M2");
  c = mx_combo(BQ_QUANTIZE, BQ_E4M3, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_type (8, e4m3) is NVFP4's, whose elements are E2M1");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_F32, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_type (1, f32) must be BQ_UE8M0");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_FLOOR);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_rule (1, floor) applies to dynamic quantize only");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_CEIL);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_rule (2, ceil) names a UE8M0 rule");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, (bq_scale_rule)8);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_rule (8) is not a bq_scale_rule");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_NVFP4_TE);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_rule (7, te) names an NVFP4 rule: desc.scale_type is ue8m0");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_UE8M0, (bq_scale_layout)3, BQ_SCALE_FLOOR);
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.scale_layout (3) must be BQ_SCALES_ROW_MAJOR");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.qmax = 6;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.qmin (0) and desc.qmax (6) must be 0");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.asymmetric = 1;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.asymmetric (1) must be 0");
  c = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.pow2_scales = 1;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.pow2_scales (1) must be 0");
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.float_type = BQ_S8;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT, "desc.float_type (5, s8) must be BQ_F32");
  /* a linear layer: the rule is refused there (the fused producers take it: a microscaling
     output, test_validation_fused) */
  c = mx_combo(BQ_QUANTIZED_LINEAR, BQ_S8, BQ_F32, BQ_SCALES_ROW_MAJOR, BQ_SCALE_FLOOR);
  c.d.granularity = BQ_PER_TOKEN;
  MX_CASE(c, BQ_ERROR_INVALID_ARGUMENT,
          "desc.scale_rule (1) applies to microscaling dynamic quantize and the fused producers only");
#undef MX_CASE
  for (int i = 0; i < n; i++) {
    char prefix[128];
    const int other = cases[i].c.d.op == BQ_QUANTIZED_LINEAR;
    snprintf(prefix, sizeof prefix, "%s: ", other ? "quantized_linear" : cases[i].c.name);
    expect_desc_status(&cases[i].c.d, cases[i].want, prefix, cases[i].needle, cases[i].c.ctx);
  }
}

Test(args, mx_shapes_and_fields_refused_by_name) {
  combo q = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  bq_args a = mx_args(&q, 4, 64, 32);
  expect_args_ok(&q, &a, 0, "MXFP4 quantize");
  a.group_size = 7;
  a.cols = 63;
  expect_args_invalid(&q, &a, "args.group_size (7) is odd: E2M1 packs two elements a byte");
  a = mx_args(&q, 4, 64, 32);
  a.y_row_stride = 65;
  expect_args_invalid(&q, &a, "args.y_row_stride (65) is odd: E2M1 rows start on a byte");
  a = mx_args(&q, 4, 64, 32);
  a.zero_points = (const int32_t *)a.scales;
  expect_args_invalid(&q, &a, "args.zero_points must be NULL");
  a = mx_args(&q, 4, 64, 32);
  a.tensor_scale = a.scales;
  expect_args_invalid(&q, &a, "args.tensor_scale");
  a = mx_args(&q, 2, 8192, 8192);
  expect_args_status(&q, &a, BQ_ERROR_NOT_SUPPORTED, "args.group_size (8192) is larger than 4096");

  combo dq = mx_combo(BQ_DEQUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT);
  a = mx_args(&dq, 4, 64, 32);
  expect_args_ok(&dq, &a, 0, "MXFP4 dequantize, blocked");
  a.group_row_stride = 4;
  expect_args_invalid(&dq, &a, "args.group_row_stride (4) must be 0 with desc.scale_layout BQ_SCALES_BLOCKED");
  a = mx_args(&dq, 4, 64, 32);
  a.x_row_stride = 67;
  expect_args_invalid(&dq, &a, "args.x_row_stride (67) is odd");

  combo nq = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  a = mx_args(&nq, 4, 64, 16);
  expect_args_ok(&nq, &a, 0, "NVFP4 quantize");
  a.tensor_scale = NULL;
  expect_args_invalid(&nq, &a, "args.tensor_scale");
  a = mx_args(&nq, 4, 64, 16);
  a.tensor_scale = (const char *)a.tensor_scale + 1;
  expect_args_invalid(&nq, &a, "args.tensor_scale");

  combo nd = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT);
  a = mx_args(&nd, 4, 64, 16);
  expect_args_ok(&nd, &a, 0, "NVFP4 dynamic, the tensor scale computed");
  a.out_tensor_scale = NULL;
  expect_args_invalid(&nd, &a, "args.out_tensor_scale");
  a = mx_args(&nd, 4, 64, 16);
  a.amax_bound = 2.0;
  expect_args_invalid(&nd, &a, "args.amax_bound (2) applies to dynamic quantize only");
  a = mx_args(&nd, 4, 64, 16);
  a.out_tensor_scale = NULL;
  a.tensor_scale = a.out_scales; /* given: no amax pass, no workspace */
  expect_args_ok(&nd, &a, 0, "NVFP4 dynamic, the tensor scale given");

  /* fake quantize and the backward passes move floats alone: odd strides are fine */
  combo fb = mx_combo(BQ_FAKE_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  fb.d.direction = BQ_BACKWARD;
  snprintf(fb.name, sizeof fb.name, "fake_quantize_per_group_backward");
  a = mx_args(&fb, 4, 64, 32);
  a.dy = a.y, a.dx = (char *)a.y + 256, a.y = NULL;
  a.x_row_stride = 65, a.y_row_stride = 67;
  expect_args_ok(&fb, &a, 0, "MXFP4 fake quantize backward, odd strides");
  a.dy = NULL;
  expect_args_invalid(&fb, &a, "args.dy");
  combo ff = mx_combo(BQ_FAKE_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT);
  a = mx_args(&ff, 4, 64, 16);
  a.tensor_scale = a.scales;
  expect_args_ok(&ff, &a, 0, "NVFP4 fake quantize");
  a.y = (char *)a.y + 1;
  expect_args_invalid(&ff, &a, "args.y");

  /* the tensor scales belong to NVFP4 plans alone */
  combo md = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E4M3, BQ_UE8M0, BQ_SCALES_BLOCKED, BQ_SCALE_FLOOR);
  a = mx_args(&md, 4, 64, 32);
  expect_args_ok(&md, &a, 0, "MXFP8 dynamic, blocked");
  a.out_tensor_scale = a.out_scales;
  expect_args_invalid(&md, &a, "args.out_tensor_scale");
}

/* NVFP4 dynamic quantize computing its tensor scale needs a workspace (the amax pass's
   partials); given the scale, none */
Test(args, mx_nvfp4_workspace) {
  combo nd = mx_combo(BQ_DYNAMIC_QUANTIZE, BQ_E2M1, BQ_E4M3, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&nd.d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  bq_args a = mx_args(&nd, 64, 4096, 16);
  size_t ws = 0;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(ws >= 4 && ws % 4 == 0, "workspace %zu", ws);
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s", bq_last_error());
  a.out_tensor_scale = NULL;
  a.tensor_scale = a.out_scales;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &ws), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(ws, 0);
}

/* ---- the Hadamard rotation ------------------------------------------------------------------ */
static combo rot_combo(bq_direction dir, bq_dtype ft, int signs) {
  combo c;
  memset(&c, 0, sizeof c);
  c.d.op = BQ_HADAMARD;
  c.d.direction = dir;
  c.d.float_type = ft;
  c.d.random_signs = signs;
  snprintf(c.name, sizeof c.name, "hadamard%s", dir == BQ_BACKWARD ? "_backward" : "");
  snprintf(c.ctx, sizeof c.ctx, "[hadamard dir %d ft %d signs %d]", (int)dir, (int)ft, signs);
  return c;
}

Test(desc, hadamard_forms_and_fields) {
  for (size_t f = 0; f < NELEM(FTS); f++)
    for (int dir = 0; dir < 2; dir++)
      for (int signs = 0; signs < 2; signs++) {
        combo c = rot_combo((bq_direction)dir, FTS[f], signs);
        expect_desc_valid(&c.d, c.ctx);
        char sku[256];
        cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS);
        cr_assert(!strncmp(sku, "hadamard.", 9) && strstr(sku, signs ? ".signs." : ".plain."), "%s", sku);
      }
  char prefix[64];
  combo c = rot_combo(BQ_FORWARD, BQ_BF16, 0);
  snprintf(prefix, sizeof prefix, "hadamard: ");
  const struct { int field; const char *needle; } bad[] = {
      {0, "desc.int_type (5) must be 0: the rotation moves floats"}, {1, "desc.qmax (7) must be 0"},
      {2, "desc.scale_type (1) must be 0"}, {3, "desc.asymmetric (1) must be 0"},
      {4, "desc.scale_rule (1) applies to microscaling"}, {5, "desc.random_signs (2) must be 0 or 1"},
      {6, "desc.granularity (3) must be BQ_PER_GROUP"}, {7, "desc.float_type (5, s8) must be BQ_F32"},
      {8, "desc.activation (1) applies to gated quantize only"}, {9, "desc.scale_layout (2) must be 0"}};
  for (size_t i = 0; i < NELEM(bad); i++) {
    bq_desc d = c.d;
    switch (bad[i].field) {
    case 0: d.int_type = BQ_S8; break;
    case 1: d.qmax = 7; break;
    case 2: d.scale_type = BQ_F32; break;
    case 3: d.asymmetric = 1; break;
    case 4: d.scale_rule = BQ_SCALE_FLOOR; break;
    case 5: d.random_signs = 2; break;
    case 6: d.granularity = BQ_PER_TOKEN; break;
    case 7: d.float_type = BQ_S8; break;
    case 8: d.activation = BQ_SILU; break;
    default: d.scale_layout = BQ_SCALES_BLOCKED; break;
    }
    expect_desc_invalid(&d, bad[i].field == 8 ? NULL : prefix, bad[i].needle, c.ctx);
  }
  /* the signs belong to the rotation alone */
  bq_desc q = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  q.random_signs = 1;
  expect_desc_invalid(&q, "quantize: ", "desc.random_signs (1) applies to BQ_HADAMARD and the fused rotation",
                      "[quantize signs]");
}

Test(args, hadamard_shapes_and_seed) {
  const combo c = rot_combo(BQ_FORWARD, BQ_F32, 1);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = (const void *)(uintptr_t)0x10000, a.y = (void *)(uintptr_t)0x20000;
  a.rows = 5, a.cols = 256, a.group_size = 64, a.seed = 7;
  expect_args_ok(&c, &a, 0, "blocks of 64");
  const int64_t sizes[] = {0, 1, 3, 48, 512, -2};
  for (size_t i = 0; i < NELEM(sizes); i++) {
    bq_args b = a;
    b.group_size = sizes[i];
    char needle[128];
    snprintf(needle, sizeof needle, "args.group_size (%lld) must be a power of two from 2 to 256", (long long)sizes[i]);
    expect_args_invalid(&c, &b, needle);
  }
  bq_args b = a;
  b.cols = 96;
  expect_args_invalid(&c, &b, "args.group_size (64) does not divide args.cols (96)");
  b = a, b.x_row_stride = 255;
  expect_args_invalid(&c, &b, "args.x_row_stride (255) is smaller than args.cols (256)");
  b = a, b.y_row_stride = 7;
  expect_args_invalid(&c, &b, "args.y_row_stride (7) is smaller than args.cols (256)");
  b = a, b.x = (const void *)(uintptr_t)0x10002;
  expect_args_invalid(&c, &b, "args.x");
  b = a, b.y = NULL;
  expect_args_invalid(&c, &b, "args.y");
  /* a seed on another plan is refused by name */
  combo q;
  memset(&q, 0, sizeof q);
  q.d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  snprintf(q.name, sizeof q.name, "quantize_per_tensor");
  snprintf(q.ctx, sizeof q.ctx, "[quantize seed]");
  bq_args s;
  memset(&s, 0, sizeof s);
  s.x = (const void *)(uintptr_t)0x10000, s.y = (void *)(uintptr_t)0x20000, s.numel = 64, s.scale = 0.5, s.seed = 9;
  expect_args_invalid(&q, &s, "args.seed (9) must be 0: it keys BQ_HADAMARD's random signs");
  /* without the signs, the seed is not taken */
  const combo plain = rot_combo(BQ_BACKWARD, BQ_F16, 0);
  expect_args_invalid(&plain, &a, "args.seed (7) must be 0");
}

/* ---- stochastic rounding (desc.rounding, args.seed and args.offset) ---------------------------- */
Test(desc, stochastic_rounding_forms_and_fields) {
  /* the microscaling formats' quantize, fake quantize and dynamic quantize, forward; MXFP8 in
     rows with it is this family's too (its SKU says so) */
  const bq_op ops[] = {BQ_QUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
  for (size_t i = 0; i < NELEM(ops); i++) {
    combo c = mx_combo(ops[i], BQ_E2M1, BQ_E4M3, BQ_SCALES_BLOCKED, BQ_SCALE_RULE_DEFAULT);
    c.d.rounding = BQ_ROUND_STOCHASTIC;
    expect_desc_valid(&c.d, c.ctx);
    c = mx_combo(ops[i], BQ_E4M3, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
    c.d.rounding = BQ_ROUND_STOCHASTIC;
    char sku[256];
    cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(!strncmp(sku, "mx_", 3) && strstr(sku, ".sr.sm_90"), "%s", sku);
    c.d.rounding = BQ_ROUND_NEAREST_EVEN; /* (without it, the dynamic and affine families') */
    cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strncmp(sku, "mx_", 3) && !strstr(sku, ".sr."), "%s", sku);
  }
  combo c = mx_combo(BQ_DEQUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.rounding = BQ_ROUND_STOCHASTIC;
  expect_desc_invalid(&c.d, "dequantize_per_group: ", "desc.rounding (stochastic) applies where floats are rounded",
                      c.ctx);
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.direction = BQ_BACKWARD, c.d.rounding = BQ_ROUND_STOCHASTIC;
  expect_desc_invalid(&c.d, "quantize_per_group_backward: ", "desc.rounding (stochastic) applies where", c.ctx);
  c.d.direction = BQ_FORWARD, c.d.rounding = (bq_rounding)2;
  expect_desc_invalid(&c.d, "quantize_per_group: ", "desc.rounding (2) is not a bq_rounding", c.ctx);
  /* the affine family's quantize and fake quantize take it (forward), with its own SKU variant;
     dequantize and the backward ops refuse it by name */
  static const bq_granularity grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  for (int g = 0; g < 5; g++)
    for (int o = 0; o < 2; o++) {
      bq_desc q = mkdesc(o ? BQ_FAKE_QUANTIZE : BQ_QUANTIZE, BQ_FORWARD, grans[g], g % 2 ? BQ_BF16 : BQ_F64);
      q.int_type = g == 3 ? BQ_E4M3 : BQ_S8, q.rounding = BQ_ROUND_STOCHASTIC;
      char sku[256], ctx[64];
      snprintf(ctx, sizeof ctx, "[affine sr %d %d]", g, o);
      expect_desc_valid(&q, ctx);
      cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(strncmp(sku, "mx_", 3) && strstr(sku, ".sr.sm_90"), "%s %s", sku, ctx);
      q.direction = BQ_BACKWARD;
      expect_desc_invalid(&q, NULL, "desc.rounding (stochastic) applies where floats are rounded into the storage "
                          "type: quantize and fake quantize, forward", ctx);
    }
  bq_desc q = mkdesc(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  q.rounding = BQ_ROUND_STOCHASTIC;
  expect_desc_invalid(&q, "dequantize_per_tensor: ", "desc.rounding (stochastic) applies where floats are rounded",
                      "[deq sr]");
  q = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32);
  q.rounding = (bq_rounding)2;
  expect_desc_invalid(&q, "quantize_per_tensor: ", "desc.rounding (2) is not a bq_rounding", "[affine rounding 2]");
  /* dynamic quantize into integer and FP8 codes takes it, every granularity: its SKU says so
     and names the affine plan it holds */
  for (int g = 0; g < 5; g++) {
    if (grans[g] == BQ_PER_CHANNEL) continue;
    q = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, grans[g], g % 2 ? BQ_BF16 : BQ_F32);
    q.int_type = g == 2 ? BQ_E4M3 : BQ_U8, q.asymmetric = g != 2, q.rounding = BQ_ROUND_STOCHASTIC;
    char sku[256], ctx[64];
    snprintf(ctx, sizeof ctx, "[dynamic sr %d]", g);
    expect_desc_valid(&q, ctx);
    cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(!strncmp(sku, "dynamic_quantize.", 17) && strstr(sku, ".sr.sm_90"), "%s %s", sku, ctx);
    q.rounding = (bq_rounding)2;
    expect_desc_invalid(&q, NULL, "desc.rounding (2) is not a bq_rounding", ctx);
  }
  /* the fused producers: integer and FP8 storage, every granularity, holding the affine plan
     that quantizes their values ("+ quantize...sr" in the SKU); microscaling refused by name */
  for (int g = 0; g < 3; g++) {
    const bq_granularity gs[] = {BQ_PER_TENSOR, BQ_PER_TOKEN, BQ_PER_GROUP};
    q = mkdesc(g == 1 ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE, BQ_FORWARD, gs[g], g ? BQ_BF16 : BQ_F32);
    q.int_type = g == 2 ? BQ_E4M3 : BQ_S8, q.asymmetric = g == 1, q.rounding = BQ_ROUND_STOCHASTIC;
    char sku[512], ctx[64];
    snprintf(ctx, sizeof ctx, "[fused sr %d]", g);
    expect_desc_valid(&q, ctx);
    cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strstr(sku, ".sr.sm_90"), "%s %s", sku, ctx);
    q.rounding = (bq_rounding)2;
    expect_desc_invalid(&q, NULL, "desc.rounding (2) is not a bq_rounding", ctx);
  }
  q = mkdesc(BQ_RMSNORM_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16);
  q.int_type = BQ_E2M1, q.rounding = BQ_ROUND_STOCHASTIC; /* a microscaling format: held mx dynamic quantize */
  expect_desc_valid(&q, "[fused mx sr]");
  {
    char sku[512];
    cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strstr(sku, ".mxfp4.rows.") && strstr(sku, ".sr.sm_90"), "%s", sku);
  }
  /* every other family refuses it by name: the rotation */
  q = mkdesc(BQ_HADAMARD, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16);
  q.rounding = BQ_ROUND_STOCHASTIC;
  expect_desc_invalid(&q, NULL, "desc.rounding (1) must be BQ_ROUND_NEAREST_EVEN", "[hadamard sr]");
}

/* the affine family's stochastic rounding: any seed and offset; no saved mask */
Test(args, affine_stochastic_rounding) {
  combo c;
  memset(&c, 0, sizeof c);
  for (int o = 0; o < 2; o++) {
    c.d = mkdesc(o ? BQ_FAKE_QUANTIZE : BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16);
    c.d.rounding = BQ_ROUND_STOCHASTIC;
    snprintf(c.ctx, sizeof c.ctx, "[affine sr %d]", o);
    snprintf(c.name, sizeof c.name, "%s_per_tensor", o ? "fake_quantize" : "quantize");
    bq_args a = base_args(BQ_PER_TENSOR);
    a.seed = ~0ull, a.offset = ~0ull;
    expect_args_ok(&c, &a, 0, "seed and offset");
    a.mask = (void *)(uintptr_t)0x900000;
    expect_args_invalid(&c, &a, "args.mask (0x900000) must be NULL: only fake quantize per tensor and per channel "
                                "keep a mask (rounding to nearest, unrotated)");
  }
}

Test(args, stochastic_rounding_seed_and_offset) {
  combo c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.rounding = BQ_ROUND_STOCHASTIC;
  bq_args a = mx_args(&c, 4, 64, 32);
  a.seed = ~0ull, a.offset = ~0ull; /* any: the index wraps */
  expect_args_ok(&c, &a, 0, "seed and offset");
  /* round to nearest takes neither */
  c.d.rounding = BQ_ROUND_NEAREST_EVEN;
  bq_args b = mx_args(&c, 4, 64, 32);
  b.offset = 5;
  expect_args_invalid(&c, &b, "args.offset (5) must be 0: it places stochastic rounding's draws");
  b.offset = 0, b.seed = 3;
  expect_args_invalid(&c, &b, "args.seed (3) must be 0: it keys BQ_HADAMARD's random signs (desc.random_signs) "
                              "and stochastic rounding");
}

/* ---- the fused rotation (desc.rotation, args.rotation_block) ------------------------------------ */
/* a's call with blocks that are no power of two from 2 to 256 is refused by name */
static void expect_bad_rotation_blocks(const combo *c, const bq_args *a) {
  const int64_t bad[] = {0, 1, 3, 48, 512};
  for (size_t i = 0; i < NELEM(bad); i++) {
    bq_args b = *a;
    b.rotation_block = bad[i];
    char needle[128];
    snprintf(needle, sizeof needle, "args.rotation_block (%lld) must be a power of two from 2 to 256", (long long)bad[i]);
    expect_args_invalid(c, &b, needle);
  }
}
Test(desc, fused_rotation_forms_and_fields) {
  const bq_op ops[] = {BQ_QUANTIZE, BQ_DYNAMIC_QUANTIZE, BQ_DEQUANTIZE};
  for (size_t i = 0; i < NELEM(ops); i++)
    for (int signs = 0; signs < 2; signs++) {
      combo c = mx_combo(ops[i], BQ_E4M3, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
      c.d.rotation = 1, c.d.random_signs = signs;
      expect_desc_valid(&c.d, c.ctx);
      char sku[256];
      cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(!strncmp(sku, "mx_", 3) && strstr(sku, ".rot.sm_90"), "%s", sku);
    }
  combo c = mx_combo(BQ_FAKE_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.rotation = 1;
  expect_desc_invalid(&c.d, "fake_quantize_per_group: ", "desc.rotation (1) applies to quantize, dynamic quantize and "
                      "dequantize, forward", c.ctx);
  c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.rotation = 2;
  expect_desc_invalid(&c.d, "quantize_per_group: ", "desc.rotation (2) must be 0 or 1", c.ctx);
  c.d.rotation = 0, c.d.random_signs = 1;
  expect_desc_invalid(&c.d, "quantize: ", "desc.random_signs (1) applies to BQ_HADAMARD and the fused rotation",
                      c.ctx);
  bq_desc q = mkdesc(BQ_LINEAR_WEIGHT_SUMS, BQ_FORWARD, BQ_GRANULARITY_DEFAULT, BQ_F32);
  q.rotation = 1;
  expect_desc_invalid(&q, NULL, "desc.rotation (1) must be 0: the fused rotation is quantize's, dequantize's, "
                      "dynamic quantize's and the fused producers'", "[linear_weight_sums rot]");
}

/* the fused producers' rotation: per tensor and per token into integer and FP8 storage,
   either rounding, and every microscaling format (either rounding); ".rot" (and ".sr") in
   the SKU, which names the desc back; per group into integer or FP8 storage refused by name */
Test(desc, fused_producer_rotation_forms) {
  const bq_granularity gs[] = {BQ_PER_TENSOR, BQ_PER_TOKEN};
  for (size_t g = 0; g < NELEM(gs); g++)
    for (int k = 0; k < 8; k++) {
      bq_desc q = mkdesc(k & 4 ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE, BQ_FORWARD, gs[g], BQ_BF16);
      q.int_type = k & 1 ? BQ_E4M3 : BQ_S8;
      q.rotation = 1, q.random_signs = k >> 1 & 1;
      q.rounding = k & 2 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
      char ctx[64], sku[512];
      snprintf(ctx, sizeof ctx, "[fused rot %zu %d]", g, k);
      expect_desc_valid(&q, ctx);
      cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(strstr(sku, k & 2 ? ".sr.rot.sm_90" : ".rot.sm_90"), "%s %s", sku, ctx);
      bq_desc back;
      bq__target t;
      cr_assert_eq(bq__desc_from_sku(sku, &back, &t), BQ_SUCCESS, "%s: %s", sku, bq_last_error());
    }
  const bq_dtype its[] = {BQ_E2M1, BQ_E4M3};
  for (size_t i = 0; i < NELEM(its); i++)
    for (int k = 0; k < 4; k++) {
      bq_desc q = mkdesc(BQ_RMSNORM_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16);
      q.int_type = its[i], q.scale_type = i ? BQ_UE8M0 : BQ_E4M3, q.scale_layout = BQ_SCALES_BLOCKED;
      q.rotation = k & 1, q.random_signs = k & 1;
      q.rounding = k & 2 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
      char ctx[64], sku[512];
      snprintf(ctx, sizeof ctx, "[fused mx rot %zu %d]", i, k);
      expect_desc_valid(&q, ctx);
      cr_assert_eq(bq_sku(&q, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(!(k & 2) == !strstr(sku, ".sr.") && !(k & 1) == !strstr(sku, ".rot."), "%s %s", sku, ctx);
      bq_desc back;
      bq__target t;
      cr_assert_eq(bq__desc_from_sku(sku, &back, &t), BQ_SUCCESS, "%s: %s", sku, bq_last_error());
      cr_assert(back.rotation == (k & 1) && back.rounding == q.rounding, "%s", sku);
    }
  bq_desc q = mkdesc(BQ_RMSNORM_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16);
  q.rotation = 1;
  expect_desc_status(&q, BQ_ERROR_NOT_SUPPORTED, "rmsnorm_quantize_per_group: ", "desc.rotation (1) is offered per "
                     "token and per tensor for integer and FP8 storage", "[fused rot per group]");
  q.granularity = BQ_PER_TOKEN, q.rotation = 2;
  expect_desc_invalid(&q, NULL, "desc.rotation (2) must be 0 or 1", "[fused rot 2]");
  q.rotation = 0, q.random_signs = 1;
  expect_desc_invalid(&q, NULL, "desc.random_signs (1) applies to BQ_HADAMARD and the fused rotation", "[fused signs]");
}

/* the affine family's fused rotation: quantize (rounding to nearest or stochastically) and
   dequantize, forward, every granularity, integer and FP8 storage; bq_affine_sr alone, its
   SKUs "rows.rot" or "sr.rot" */
Test(desc, affine_rotation_forms) {
  const bq_granularity gs[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
  const bq_dtype its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  for (size_t g = 0; g < NELEM(gs); g++)
    for (int op = 0; op < 2; op++)
      for (int sr = 0; sr < 2 - op; sr++) {
        combo c;
        memset(&c, 0, sizeof c);
        c.d = mkdesc(op ? BQ_DEQUANTIZE : BQ_QUANTIZE, BQ_FORWARD, gs[g], g % 2 ? BQ_F32 : BQ_BF16);
        c.d.int_type = its[(g + (size_t)op) % 4];
        c.d.rotation = 1, c.d.random_signs = (int)(g + (size_t)sr) % 2;
        c.d.rounding = sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
        set_names(&c);
        expect_desc_valid(&c.d, c.ctx);
        char sku[256];
        cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
        cr_assert(strstr(sku, sr ? ".sr.rot.sm_90" : ".rows.rot.sm_90"), "%s %s", sku, c.ctx);
      }
  for (int dir = 0; dir < 2; dir++) /* fake quantize, either way: bq_affine_sr alone */
    for (int sr = 0; sr < 2 - dir; sr++) {
      bq_desc d = mkdesc(BQ_FAKE_QUANTIZE, dir ? BQ_BACKWARD : BQ_FORWARD, dir ? BQ_PER_CHANNEL : BQ_PER_TOKEN, BQ_F32);
      d.rotation = 1, d.random_signs = sr;
      d.rounding = sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
      expect_desc_valid(&d, "[fake_quantize rot]");
      char sku[256];
      cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(strstr(sku, sr ? ".sr.rot.sm_90" : ".rows.rot.sm_90"), "%s", sku);
    }
  const bq_op bwd_ops[] = {BQ_QUANTIZE, BQ_DEQUANTIZE};
  for (size_t i = 0; i < NELEM(bwd_ops); i++) {
    bq_desc d = mkdesc(bwd_ops[i], BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32);
    d.rotation = 1;
    expect_desc_invalid(&d, i ? "dequantize_per_token_backward: " : "quantize_per_token_backward: ",
                        "desc.rotation (1) applies to quantize and dequantize forward, and to fake quantize either "
                        "way", "[bwd rot]");
  }
  bq_desc d;
  d = mkdesc(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32);
  d.rotation = 2;
  expect_desc_invalid(&d, "quantize_per_token: ", "desc.rotation (2) must be 0 or 1", "[quantize rot 2]");
}

/* dynamic quantize's fused rotation (integer and FP8 storage): per token, rounding either way */
static combo dyn_rot_combo(bq_granularity g, bq_dtype ft, bq_dtype it) {
  combo c;
  c.d = mkdesc(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, g, ft);
  c.d.int_type = it;
  c.d.rotation = 1;
  set_names(&c);
  return c;
}
Test(desc, dynamic_rotation_forms) {
  const bq_dtype its[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
  for (size_t i = 0; i < NELEM(its); i++)
    for (int signs = 0; signs < 2; signs++) {
      combo c = dyn_rot_combo(BQ_PER_TOKEN, i % 2 ? BQ_F32 : BQ_BF16, its[i]);
      c.d.random_signs = signs;
      c.d.asymmetric = its[i] == BQ_U8;
      set_names(&c);
      expect_desc_valid(&c.d, c.ctx);
      char sku[256];
      cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
      cr_assert(!strncmp(sku, "dynamic_quantize.", 17) && strstr(sku, ".rot.sm_90"), "%s", sku);
    }
  const bq_granularity others[] = {BQ_PER_TENSOR, BQ_PER_GROUP, BQ_PER_BLOCK};
  for (size_t i = 0; i < NELEM(others); i++) {
    combo c = dyn_rot_combo(others[i], BQ_BF16, BQ_S8);
    char prefix[128];
    prefix_of(&c, prefix, sizeof prefix);
    expect_desc_status(&c.d, BQ_ERROR_NOT_SUPPORTED, prefix, "desc.rotation (1) is offered per token for integer "
                       "and FP8 dynamic quantize", c.ctx);
  }
  combo c = dyn_rot_combo(BQ_PER_TOKEN, BQ_BF16, BQ_E4M3);
  c.d.rounding = BQ_ROUND_STOCHASTIC; /* with stochastic rounding: the sub-plan rotates too */
  expect_desc_valid(&c.d, c.ctx);
  char sku[256];
  cr_assert_eq(bq_sku(&c.d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(sku, ".sr.rot.sm_90"), "%s", sku);
  c.d.rounding = BQ_ROUND_NEAREST_EVEN, c.d.rotation = 2;
  expect_desc_invalid(&c.d, "dynamic_quantize_per_token: ", "desc.rotation (2) must be 0 or 1", c.ctx);
  c.d.rotation = 0, c.d.random_signs = 1;
  expect_desc_invalid(&c.d, "dynamic_quantize: ", "desc.random_signs (1) applies to BQ_HADAMARD and the fused "
                      "rotation", c.ctx);
}

Test(args, dynamic_rotation_block_and_grid) {
  combo c = dyn_rot_combo(BQ_PER_TOKEN, BQ_BF16, BQ_S8);
  bq_args a = base_args(BQ_PER_TOKEN);
  a.cols = 256, a.rotation_block = 128;
  expect_args_ok(&c, &a, 0, "blocks of 128");
  a.rotation_block = 256;
  expect_args_ok(&c, &a, 0, "blocks of 256: a warp's accesses");
  a.rotation_block = 2;
  expect_args_ok(&c, &a, 0, "blocks of 2: inside an access");
  expect_bad_rotation_blocks(&c, &a);
  a.rotation_block = 128;
  bq_args b = a;
  b.cols = 192;
  expect_args_invalid(&c, &b, "args.rotation_block (128) does not divide args.cols (192)");
  /* off the 16-byte grid, or blocks past a warp's accesses: not offered */
  const char *grid = "the fused rotation (desc.rotation) takes rows that start 16-byte aligned";
  b = a, b.x = (const char *)a.x + 2;
  expect_args_status(&c, &b, BQ_ERROR_NOT_SUPPORTED, grid);
  b = a, b.x_row_stride = 260;
  expect_args_status(&c, &b, BQ_ERROR_NOT_SUPPORTED, grid);
  b = a, b.rows = 1, b.cols = 132, b.rotation_block = 4; /* 264 bytes: not whole accesses */
  expect_args_status(&c, &b, BQ_ERROR_NOT_SUPPORTED, grid);
  combo f = dyn_rot_combo(BQ_PER_TOKEN, BQ_F32, BQ_E4M3);
  b = a, b.rotation_block = 256; /* 1 KiB of f32: 64 accesses */
  expect_args_status(&f, &b, BQ_ERROR_NOT_SUPPORTED, grid);
  /* the block is the rotation's alone */
  c.d.rotation = 0;
  set_names(&c);
  expect_args_invalid(&c, &a, "args.rotation_block (128) must be 0: it is the fused rotation's block");
}

Test(args, fused_rotation_block_and_grid) {
  combo c = mx_combo(BQ_QUANTIZE, BQ_E2M1, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, BQ_SCALE_RULE_DEFAULT);
  c.d.rotation = 1;
  bq_args a = mx_args(&c, 4, 256, 32);
  a.rotation_block = 128;
  expect_args_ok(&c, &a, 0, "blocks of 128");
  expect_bad_rotation_blocks(&c, &a);
  /* bf16: blocks of up to 32 16-byte accesses (256 elements); off the grid, not offered */
  bq_args b = a;
  b.x = (const char *)a.x + 2;
  expect_args_status(&c, &b, BQ_ERROR_NOT_SUPPORTED, "the fused rotation (desc.rotation) takes rows whose streams start "
                     "on the 16-byte grid");
  b = a, b.group_size = 16, b.cols = 96, b.rotation_block = 32;
  expect_args_ok(&c, &b, 0, "groups of 16, blocks of 32");
  b = a, b.cols = 192;
  expect_args_invalid(&c, &b, "args.rotation_block (128) does not divide args.cols (192)");
  /* the block is the rotation's alone */
  c.d.rotation = 0;
  expect_args_invalid(&c, &a, "args.rotation_block (128) must be 0: it is the fused rotation's block");
}

/* FP8 linear layers' scale modes: the plan's name says the mode; blockwise takes 128 x 128
   blocks only (args.group_size 0 or 128) and an activation-scale stride no shorter than
   its layout's rows (row-major: ceil(K / 128); MN-major: M); MN-major is blockwise's alone. */
Test(args, fp8_linear_scale_modes) {
  combo c;
  memset(&c, 0, sizeof c);
  c.d.op = BQ_FP8_LINEAR;
  c.d.out_type = BQ_BF16;
  static const bq_granularity grans[] = {BQ_GRANULARITY_DEFAULT, BQ_PER_TENSOR, BQ_PER_TOKEN, BQ_PER_BLOCK};
  static const char *const names[] = {"fp8_linear_tensorwise", "fp8_linear_tensorwise", "fp8_linear_rowwise",
                                      "fp8_linear_blockwise"};
  for (size_t g = 0; g < NELEM(grans); g++) {
    bq_desc in = c.d, out;
    in.granularity = grans[g];
    char name[96];
    cr_assert_eq(bq__normalize(&in, &out, name, sizeof name), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_str_eq(name, names[g]);
    if (grans[g] == BQ_PER_BLOCK) continue;
    in.scale_layout = BQ_SCALES_MN_MAJOR;
    expect_desc_invalid(&in, names[g], "desc.scale_layout (MN-major) applies to blockwise activation scales only",
                        "[fp8 linear MN-major]");
  }
  bq_desc grp = c.d;
  grp.granularity = BQ_PER_GROUP;
  expect_desc_status(&grp, BQ_ERROR_NOT_SUPPORTED, "fp8_linear", "desc.granularity (per_group) is not offered",
                     "[fp8 linear per group]");

  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = (const void *)(uintptr_t)0x10000, a.w = (const void *)(uintptr_t)0x20000, a.y = (void *)(uintptr_t)0x30000;
  a.scales = (const void *)(uintptr_t)0x40000, a.w_scales = (const void *)(uintptr_t)0x50000;
  a.rows = 10, a.cols = 300, a.n = 64; /* 3 K blocks */
  for (int mn = 0; mn < 2; mn++) {
    c.d.granularity = BQ_PER_BLOCK;
    c.d.scale_layout = mn ? BQ_SCALES_MN_MAJOR : BQ_SCALES_ROW_MAJOR;
    snprintf(c.name, sizeof c.name, "fp8_linear_blockwise");
    snprintf(c.ctx, sizeof c.ctx, "[fp8 linear blockwise %s]", mn ? "MN-major" : "row-major");
    bq_args b = a;
    expect_args_ok(&c, &b, 0, "defaults");
    b.group_size = 128;
    b.group_row_stride = mn ? 10 : 3; /* the least */
    expect_args_ok(&c, &b, 0, "the least stride");
    b.group_row_stride = mn ? 9 : 2;
    expect_args_invalid(&c, &b, mn ? "args.group_row_stride (9) must be 0 or at least M" :
                                     "args.group_row_stride (2) must be 0 or at least ceil(K / 128)");
    b.group_row_stride = -1;
    expect_args_invalid(&c, &b, "args.group_row_stride (-1)");
    b.group_row_stride = 0;
    b.group_size = 64;
    expect_args_invalid(&c, &b, "args.group_size (64) must be 128 or 0");
  }
}

/* FP8 QuantizedLinear: per token (the default) or blockwise, x's float type named, the
   activations' scales its own (row-major, no stride); blockwise K a multiple of 128 */
Test(args, fp8_quantized_linear_rules) {
  combo c;
  memset(&c, 0, sizeof c);
  c.d.op = BQ_FP8_QUANTIZED_LINEAR;
  c.d.float_type = BQ_BF16;
  bq_desc out;
  char name[96];
  cr_assert_eq(bq__normalize(&c.d, &out, name, sizeof name), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(name, "fp8_quantized_linear_rowwise");
  cr_assert(out.granularity == BQ_PER_TOKEN && out.out_type == BQ_BF16 && out.int_type == BQ_E4M3);
  bq_desc t = c.d;
  t.granularity = BQ_PER_TENSOR;
  expect_desc_status(&t, BQ_ERROR_NOT_SUPPORTED, "fp8_quantized_linear", "desc.granularity (per_tensor) is not offered",
                     "[fp8 ql per tensor]");
  t = c.d;
  t.granularity = BQ_PER_BLOCK;
  t.scale_layout = BQ_SCALES_MN_MAJOR;
  expect_desc_invalid(&t, "fp8_quantized_linear_blockwise", "desc.scale_layout (MN-major) must be left 0",
                      "[fp8 ql MN]");
  t = c.d;
  t.float_type = BQ_F64;
  expect_desc_invalid(&t, "fp8_quantized_linear_rowwise", "desc.float_type (", "[fp8 ql f64]");
  t = c.d;
  t.float_type = BQ_DTYPE_DEFAULT;
  t.out_type = BQ_F32;
  expect_desc_invalid(&t, "fp8_quantized_linear_rowwise", "desc.float_type (0", "[fp8 ql no float type]");

  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = (const void *)(uintptr_t)0x10000, a.w = (const void *)(uintptr_t)0x20000, a.y = (void *)(uintptr_t)0x30000;
  a.w_scales = (const void *)(uintptr_t)0x50000;
  a.rows = 10, a.cols = 256, a.n = 64;
  for (int blk = 0; blk < 2; blk++) {
    c.d.granularity = blk ? BQ_PER_BLOCK : BQ_PER_TOKEN;
    snprintf(c.name, sizeof c.name, "fp8_quantized_linear_%s", blk ? "blockwise" : "rowwise");
    snprintf(c.ctx, sizeof c.ctx, "[fp8 ql %s]", blk ? "blockwise" : "rowwise");
    bq_args b = a;
    expect_args_ok(&c, &b, 0, "a dense problem");
    b.group_row_stride = 4;
    expect_args_invalid(&c, &b, "args.group_row_stride (4) must be 0");
    b = a;
    b.cols = 200;
    if (blk) expect_args_invalid(&c, &b, "args.cols (K = 200) must be a multiple of 128");
    else expect_args_ok(&c, &b, 0, "K = 200");
    b = a;
    b.x = (const void *)(uintptr_t)0x10001; /* bf16 x: 2-byte aligned */
    expect_args_invalid(&c, &b, "args.x");
  }
  /* the workspace: the FP8 rows (16-byte padded) and the scales, each 256-byte aligned */
  bq_plan plan;
  c.d.granularity = BQ_PER_BLOCK;
  cr_assert_eq(bq__plan_init(&c.d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  size_t need = 0;
  a.cols = 1024;
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &need), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(need, (size_t)(10 * 1024 + 512), "blockwise workspace %zu", need); /* 10 x 8 scales: 320 -> 512 */
}
