/* test_validation_linear.c - descriptor and argument validation of the W8A8 linear layers
   (QuantizedLinear, SmoothQuantLinear, the weight-sums helper), on a machine with no GPU.

   As in test_validation.c: descriptors go through bq_plan_select (a valid one gets as far
   as the driver, which is pointed at a path that does not exist), bq_sku and
   bq__plan_init; arguments through a plan built by bq__plan_init, which has no kernel, so
   every invalid case is checked through both bq_plan_can_implement and bq_plan_run (same
   status, same message: the run launched nothing). Every message names the plan, the
   field and its value. */
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
TestSuite(linear_desc, .init = no_driver);
TestSuite(linear_args, .init = no_driver);

static void clear_error(void) { bq__err_buf[0] = 0; }

static void check_msg(const char *prefix, const char *needle, const char *who) {
  const char *m = bq_last_error();
  cr_assert(m && *m, "%s: no error message", who);
  if (prefix)
    cr_assert(strncmp(m, prefix, strlen(prefix)) == 0, "%s: message \"%s\" does not start with \"%s\"", who, m, prefix);
  cr_assert(strstr(m, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", who, m, needle);
}

static bq_desc mk(bq_op op, bq_granularity g, bq_dtype ft, bq_dtype out) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.granularity = g;
  d.float_type = ft;
  d.out_type = out;
  return d;
}

static void expect_desc(const bq_desc *d, bq_status want, const char *prefix, const char *needle) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  clear_error();
  bq_status st = bq_plan_select(d, &p);
  cr_assert_eq(st, want, "bq_plan_select: got %s (%s), want %s [%s]", bq_status_name(st), bq_last_error(),
               bq_status_name(want), needle);
  cr_assert_null(p);
  check_msg(prefix, needle, "bq_plan_select");
  char buf[256];
  clear_error();
  cr_assert_eq(bq_sku(d, 90, buf, sizeof buf), want);
  check_msg(prefix, needle, "bq_sku");
  bq_plan plan;
  cr_assert_eq(bq__plan_init(d, &plan), want);
}

static void expect_desc_valid(const bq_desc *d, const char *ctx) {
  bq_plan *p = (bq_plan *)(uintptr_t)0x1;
  bq_status st = bq_plan_select(d, &p);
  cr_assert_eq(st, BQ_ERROR_NO_DRIVER, "%s: bq_plan_select got %s (%s), want BQ_ERROR_NO_DRIVER", ctx,
               bq_status_name(st), bq_last_error());
  cr_assert_null(p);
  char buf[256];
  st = bq_sku(d, 90, buf, sizeof buf);
  cr_assert_eq(st, BQ_SUCCESS, "%s: bq_sku: %s", ctx, bq_last_error());
  bq_plan plan;
  cr_assert_eq(bq__plan_init(d, &plan), BQ_SUCCESS, "%s: %s", ctx, bq_last_error());
}

/* ---- descriptors ----------------------------------------------------------------------- */
Test(linear_desc, every_valid_combination_is_accepted) {
  static const bq_dtype STS[] = {BQ_DTYPE_DEFAULT, BQ_F32, BQ_F16, BQ_BF16};
  size_t n = 0;
  for (int op = 0; op < 2; op++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (size_t o = 0; o < NELEM(FTS) + 1; o++)
        for (size_t s = 0; s < NELEM(STS); s++)
          for (int i = 0; i < 2; i++)
            for (int asym = 0; asym < 2; asym++)
              for (int g = 0; g < 2; g++) {
                bq_dtype out = o < NELEM(FTS) ? FTS[o] : BQ_DTYPE_DEFAULT;
                bq_desc d = mk(op ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR,
                               g ? BQ_PER_TOKEN : op ? BQ_PER_TENSOR : BQ_GRANULARITY_DEFAULT, FTS[f], out);
                d.scale_type = STS[s];
                d.int_type = i ? BQ_U8 : BQ_S8;
                d.asymmetric = asym;
                /* the default scale type is f32 */
                char ctx[128];
                snprintf(ctx, sizeof ctx, "op %d ft %d out %d st %d it %d asym %d g %d", (int)d.op, (int)d.float_type,
                         (int)out, (int)d.scale_type, (int)d.int_type, asym, g);
                expect_desc_valid(&d, ctx);
                n++;
              }
  /* f64 scales with an f64 output */
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F64, BQ_F64);
  d.scale_type = BQ_F64;
  expect_desc_valid(&d, "f64 scales, f64 out");
  cr_assert(n > 500);
}

Test(linear_desc, defaults) {
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, BQ_GRANULARITY_DEFAULT, BQ_F64, BQ_DTYPE_DEFAULT);
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(plan.desc.granularity, BQ_PER_TOKEN);
  cr_assert_eq(plan.desc.out_type, BQ_F64);
  cr_assert_eq(plan.desc.scale_type, BQ_F32, "scales default to f32, f64 output too");
  cr_assert_eq(plan.desc.int_type, BQ_S8);
  cr_assert_eq(plan.desc.qmin, -128);
  cr_assert_eq(plan.desc.qmax, 127);
  cr_assert_str_eq(plan.name, "quantized_linear");
  d.scale_type = BQ_F64; /* asked for by name: allowed with an f64 output */
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(plan.desc.scale_type, BQ_F64);
  d.scale_type = BQ_DTYPE_DEFAULT;
  d.out_type = BQ_F16;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS);
  cr_assert_eq(plan.desc.scale_type, BQ_F32, "f64 activations, f16 out: scales default to f32");
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_DTYPE_DEFAULT);
  d.asymmetric = 1;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS);
  cr_assert_eq(plan.desc.out_type, BQ_BF16);
  cr_assert_eq(plan.desc.scale_type, BQ_F32);
  cr_assert_str_eq(plan.name, "smoothquant_linear_per_token_asymmetric");
  d.scale_type = BQ_BF16;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS);
  cr_assert_eq(plan.desc.scale_type, BQ_BF16);
  /* the SKU of a desc with scale_type left 0 says f32 */
  char sku[256];
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_DTYPE_DEFAULT, BQ_BF16);
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(sku, "linear_gemm.a_s8.w_s8.out_bf16.scale_f32.ascale_f32.mma_m16n8k32+wgmma_m64n256k32.sm_90a");
}

/* BQ_GRANULARITY_DEFAULT: per token for QuantizedLinear (its only granularity, which an
   explicit BQ_PER_TENSOR does not get: NOT_SUPPORTED), per tensor for SmoothQuantLinear. */
Test(linear_desc, default_granularity) {
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, BQ_GRANULARITY_DEFAULT, BQ_F16, BQ_F16), e;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(plan.desc.granularity, BQ_PER_TOKEN);
  e = d;
  e.granularity = BQ_PER_TOKEN;
  char a[256], b[256];
  cr_assert_eq(bq_sku(&d, 90, a, sizeof a), BQ_SUCCESS);
  cr_assert_eq(bq_sku(&e, 90, b, sizeof b), BQ_SUCCESS);
  cr_assert_str_eq(a, b);
  d.granularity = BQ_PER_TENSOR;
  expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, "quantized_linear: ", "desc.granularity (per_tensor) is not offered");
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_GRANULARITY_DEFAULT, BQ_F16, BQ_F16);
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(plan.desc.granularity, BQ_PER_TENSOR);
  cr_assert_str_eq(plan.name, "smoothquant_linear_per_tensor");
  e = d;
  e.granularity = BQ_PER_TENSOR;
  bq_plan plan2;
  cr_assert_eq(bq__plan_init(&e, &plan2), BQ_SUCCESS);
  cr_assert_eq(memcmp(&plan.desc, &plan2.desc, sizeof plan.desc), 0);
}

/* SmoothQuantLinear's x is int8: out_type or float_type names the output, either
   defaults to the other, and the normalized desc (and SKU) is the same either way. */
Test(linear_desc, smoothquant_float_type_optional) {
  const bq_dtype outs[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  for (size_t i = 0; i < NELEM(outs); i++) {
    bq_desc only_out = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_DTYPE_DEFAULT, outs[i]);
    bq_desc only_ft = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, outs[i], BQ_DTYPE_DEFAULT);
    bq_desc both = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, outs[i], outs[i]);
    bq_desc other = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, outs[i] == BQ_F32 ? BQ_F16 : BQ_F32, outs[i]);
    expect_desc_valid(&only_out, "out_type only");
    bq_plan p1, p2, p3, p4;
    cr_assert_eq(bq__plan_init(&only_out, &p1), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq__plan_init(&only_ft, &p2), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq__plan_init(&both, &p3), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq__plan_init(&other, &p4), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(p1.desc.float_type, outs[i]);
    cr_assert_eq(p1.desc.out_type, outs[i]);
    cr_assert_eq(memcmp(&p1.desc, &p2.desc, sizeof p1.desc), 0);
    cr_assert_eq(memcmp(&p1.desc, &p3.desc, sizeof p1.desc), 0);
    cr_assert_eq(memcmp(&p1.desc, &p4.desc, sizeof p1.desc), 0, "a different float_type is the output's");
    char a[256], b[256];
    cr_assert_eq(bq_sku(&only_out, 90, a, sizeof a), BQ_SUCCESS);
    cr_assert_eq(bq_sku(&both, 90, b, sizeof b), BQ_SUCCESS);
    cr_assert_str_eq(a, b);
  }
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_tensor: ", "desc.out_type (0");
  d.granularity = BQ_GRANULARITY_DEFAULT;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_tensor: ", "desc.out_type (0");
  /* QuantizedLinear still needs float_type: its x is float */
  d = mk(BQ_QUANTIZED_LINEAR, BQ_GRANULARITY_DEFAULT, BQ_DTYPE_DEFAULT, BQ_F16);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.float_type (0");
}

/* desc.device macros pass validation on linear plans too; a negative value is named. */
Test(linear_desc, device_macros) {
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, BQ_GRANULARITY_DEFAULT, BQ_F16, BQ_F16);
  d.device = BQ_DEVICE(1);
  expect_desc_valid(&d, "BQ_DEVICE(1)");
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS);
  cr_assert_eq(plan.desc.device, 2);
  d.device = -1;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.device (-1)");
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_DTYPE_DEFAULT, BQ_F32);
  d.device = -4;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_token: ", "desc.device (-4)");
}

Test(linear_desc, granularities) {
  static const bq_granularity bad_ql[] = {BQ_PER_CHANNEL, BQ_PER_GROUP};
  for (size_t i = 0; i < NELEM(bad_ql); i++) {
    bq_desc d = mk(BQ_QUANTIZED_LINEAR, bad_ql[i], BQ_F16, BQ_F16);
    expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, "quantized_linear: ", "desc.granularity (");
    d.op = BQ_SMOOTHQUANT_LINEAR;
    expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, "smoothquant_linear", "desc.granularity (");
  }
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, (bq_granularity)7, BQ_F16, BQ_F16);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.granularity (7)");
}

/* per block, MN-major scales and packed UE8M0 scales are not the linear layers': per block
   and MN-major are NOT_SUPPORTED naming the field; ue8m0x4 is outside their scale types
   (INVALID_ARGUMENT naming desc.scale_type); a scale_layout outside the enum is malformed */
Test(linear_desc, block_mn_major_and_packed_scales_refused) {
  static const bq_op ops[] = {BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR};
  static const char *names[] = {"quantized_linear", "smoothquant_linear"};
  for (size_t o = 0; o < NELEM(ops); o++)
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (int asym = 0; asym < 2; asym++) {
        bq_desc d = mk(ops[o], BQ_PER_BLOCK, FTS[f], FTS[f]);
        d.asymmetric = asym;
        expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, names[o], "desc.granularity (per_block)");
        d.granularity = BQ_PER_TOKEN;
        expect_desc_valid(&d, names[o]);
        d.scale_layout = BQ_SCALES_MN_MAJOR;
        char needle[96];
        snprintf(needle, sizeof needle, "%s: desc.scale_layout (MN-major) is offered for quantize, dequantize", names[o]);
        expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, names[o], needle);
        d.scale_layout = (bq_scale_layout)2;
        expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, names[o], "desc.scale_layout (2) must be BQ_SCALES_ROW_MAJOR or "
                    "BQ_SCALES_MN_MAJOR");
        d.scale_layout = (bq_scale_layout)-1;
        expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, names[o], "desc.scale_layout (-1)");
        d.scale_layout = BQ_SCALES_ROW_MAJOR;
        d.scale_type = BQ_UE8M0X4;
        snprintf(needle, sizeof needle, "desc.scale_type (%d, ue8m0x4) must be BQ_F32, BQ_F16 or BQ_BF16", (int)BQ_UE8M0X4);
        expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, names[o], needle);
      }
  /* the weight sums: every field but device left 0 */
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  d.granularity = BQ_PER_BLOCK;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", "desc.granularity (5) must be left 0");
  d.granularity = BQ_GRANULARITY_DEFAULT;
  d.scale_type = BQ_UE8M0X4;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", "desc.scale_type (11, ue8m0x4)");
  d.scale_type = BQ_DTYPE_DEFAULT;
  d.scale_layout = BQ_SCALES_MN_MAJOR;
  expect_desc(&d, BQ_ERROR_NOT_SUPPORTED, "linear_weight_sums", "desc.scale_layout (MN-major)");
}

Test(linear_desc, types) {
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F16, BQ_S8);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_tensor: ", "desc.out_type (5, s8)");
  d.out_type = (bq_dtype)42;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_tensor: ", "desc.out_type (42");
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  d.scale_type = BQ_F64;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.scale_type (2, f64)");
  d.scale_type = BQ_S8;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.scale_type (5, s8)");
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_S8, BQ_F32);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.float_type (5, s8)");
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  d.int_type = BQ_S32;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.int_type (7, s32)");
  /* out_type belongs to linear layers only */
  d = mk(BQ_QUANTIZE, BQ_PER_TENSOR, BQ_F32, BQ_F16);
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantize_per_tensor: ", "desc.out_type (3, f16)");
}

Test(linear_desc, direction_symmetry_and_ranges) {
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  d.direction = BQ_BACKWARD;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.direction (backward)");
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  d.asymmetric = 2;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "smoothquant_linear_per_token", "desc.asymmetric (2)");
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  d.qmin = -5;
  d.qmax = -1;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear: ", "desc.qmax (-1) must be > 0");
  d.asymmetric = 1;
  d.qmin = d.qmax = 4;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear_asymmetric: ", "desc.qmax (4) must be > desc.qmin (4)");
  d.qmin = -200;
  d.qmax = 5;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "quantized_linear_asymmetric: ", "desc.qmin (-200)");
}

Test(linear_desc, weight_sums) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  expect_desc_valid(&d, "weight sums, all defaults");
  d.direction = BQ_BACKWARD;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", "desc.direction (1)");
  d.direction = BQ_FORWARD;
  d.device = -2;
  expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", "desc.device (-2)");
  d.device = 0;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS);
  cr_assert_str_eq(plan.name, "linear_weight_sums");
}

Test(linear_desc, skus_name_the_gemm) {
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F16, BQ_F16);
  d.scale_type = BQ_F32;
  char a[256], b[256];
  cr_assert_eq(bq_sku(&d, 90, a, sizeof a), BQ_SUCCESS);
  /* on sm_90 select builds the GEMM for sm_90a, with the warpgroup-MMA tiles */
  cr_assert_str_eq(a, "linear_gemm.a_s8.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32+wgmma_m64n256k32.sm_90a");
  /* QuantizedLinear with f32 scales runs the very same GEMM */
  d.op = BQ_QUANTIZED_LINEAR;
  d.float_type = BQ_BF16;
  cr_assert_eq(bq_sku(&d, 90, b, sizeof b), BQ_SUCCESS);
  cr_assert_str_eq(a, b);
  /* with bf16 weight scales its activation scales stay f32 */
  d.scale_type = BQ_BF16;
  cr_assert_eq(bq_sku(&d, 80, b, sizeof b), BQ_SUCCESS);
  cr_assert_str_eq(b, "linear_gemm.a_s8.w_s8.out_f16.scale_bf16.ascale_f32.mma_m16n8k32.sm_80");
  d.op = BQ_SMOOTHQUANT_LINEAR;
  cr_assert_eq(bq_sku(&d, 80, b, sizeof b), BQ_SUCCESS);
  cr_assert_str_eq(b, "linear_gemm.a_s8.w_s8.out_f16.scale_bf16.ascale_bf16.mma_m16n8k32.sm_80");
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  cr_assert_eq(bq_sku(&d, 90, b, sizeof b), BQ_SUCCESS);
  cr_assert_str_eq(b, "linear_weight_sums.s8.dp4a.sm_90");
}

/* Every other field of the weight sums: left 0, or its one meaningful value (s8 weights in
   the full s8 range, int32 sums); anything else is rejected naming the field and value. */
Test(linear_desc, weight_sums_fields) {
  bq_desc base;
  memset(&base, 0, sizeof base);
  base.op = BQ_LINEAR_WEIGHT_SUMS;
  bq_desc d = base;
  d.int_type = BQ_S8;
  d.out_type = BQ_S32;
  d.qmin = -128;
  d.qmax = 127;
  expect_desc_valid(&d, "weight sums, meaningful values spelled out");
  char sku[256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert_str_eq(sku, "linear_weight_sums.s8.dp4a.sm_90", "the same kernel as all defaults");
  static const int floats[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16, BQ_S8, 77, -1};
  char needle[96];
  for (size_t i = 0; i < NELEM(floats); i++) {
    d = base;
    d.float_type = (bq_dtype)floats[i];
    snprintf(needle, sizeof needle, "desc.float_type (%d", floats[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
    d = base;
    d.scale_type = (bq_dtype)floats[i];
    snprintf(needle, sizeof needle, "desc.scale_type (%d", floats[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
  static const int ints[] = {BQ_U8, BQ_S32, BQ_F32, 77, -1};
  for (size_t i = 0; i < NELEM(ints); i++) {
    d = base;
    d.int_type = (bq_dtype)ints[i];
    snprintf(needle, sizeof needle, "desc.int_type (%d", ints[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
  static const int outs[] = {BQ_F32, BQ_F16, BQ_S8, BQ_U8, 77, -1};
  for (size_t i = 0; i < NELEM(outs); i++) {
    d = base;
    d.out_type = (bq_dtype)outs[i];
    snprintf(needle, sizeof needle, "desc.out_type (%d", outs[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
  static const int qr[][2] = {{-7, 7}, {-128, 0}, {0, 127}, {0, 255}, {-128, 128}, {5, 5}};
  for (size_t i = 0; i < NELEM(qr); i++) {
    d = base;
    d.qmin = qr[i][0];
    d.qmax = qr[i][1];
    snprintf(needle, sizeof needle, "desc.qmin (%d) and desc.qmax (%d)", qr[i][0], qr[i][1]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
  static const int asym[] = {1, 2, -1};
  for (size_t i = 0; i < NELEM(asym); i++) {
    d = base;
    d.asymmetric = asym[i];
    snprintf(needle, sizeof needle, "desc.asymmetric (%d)", asym[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
  static const int grans[] = {1, 2, 3};
  for (size_t i = 0; i < NELEM(grans); i++) {
    d = base;
    d.granularity = (bq_granularity)grans[i];
    snprintf(needle, sizeof needle, "desc.granularity (%d)", grans[i]);
    expect_desc(&d, BQ_ERROR_INVALID_ARGUMENT, "linear_weight_sums: ", needle);
  }
}

/* ---- arguments -------------------------------------------------------------------------- */
/* bq_plan_workspace_size's bytes, asserting it succeeded */
static size_t ws_of(const bq_plan *p, const bq_args *a) {
  size_t b = 12345;
  bq_status st = bq_plan_workspace_size(p, a, &b);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_workspace_size: %s (%s)", bq_status_name(st), bq_last_error());
  return b;
}

/* Fake, well-aligned device addresses: validation never dereferences them. */
#define PTR(n) ((void *)(uintptr_t)(0x10000000u + (n) * 0x100000u))

static bq_args base(const bq_desc *d) {
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = 33;
  a.cols = 256;
  a.n = 65;
  a.x = PTR(1);
  a.y = PTR(2);
  a.w = PTR(3);
  a.w_scales = PTR(4);
  a.bias = PTR(5);
  if (d->op == BQ_SMOOTHQUANT_LINEAR) {
    if (d->granularity == BQ_PER_TOKEN) {
      a.scales = PTR(6);
      if (d->asymmetric) a.zero_points = PTR(7);
    } else {
      a.scale = 0.01;
      if (d->asymmetric) a.zero_point = 3;
    }
  }
  if (d->asymmetric) a.w_sums = PTR(8);
  return a;
}

static void plan_of(const bq_desc *d, bq_plan *p) {
  cr_assert_eq(bq__plan_init(d, p), BQ_SUCCESS, "%s", bq_last_error());
  for (int e = 0; e < BQ__MAX_KERNELS; e++) cr_assert_null(p->mod[e]);
}


static void expect_invalid(const bq_desc *d, const bq_args *a, const char *needle) {
  bq_plan plan;
  plan_of(d, &plan);
  char prefix[128], msg[1024];
  snprintf(prefix, sizeof prefix, "%s: ", plan.name);
  clear_error();
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s can_implement: got %s (%s) [%s]", plan.name, bq_status_name(st),
               bq_last_error(), needle);
  check_msg(prefix, needle, "bq_plan_can_implement");
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  clear_error();
  st = bq_plan_run(&plan, a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s run: got %s (%s)", plan.name, bq_status_name(st), bq_last_error());
  cr_assert_str_eq(bq_last_error(), msg);
  expect_workspace_agrees(&plan, a, BQ_ERROR_INVALID_ARGUMENT, msg, plan.name);
}

static void expect_ok(const bq_desc *d, const bq_args *a, const char *what) {
  bq_plan plan;
  plan_of(d, &plan);
  bq_status st = bq_plan_can_implement(&plan, a);
  cr_assert_eq(st, BQ_SUCCESS, "%s %s: %s (%s)", plan.name, what, bq_status_name(st), bq_last_error());
  expect_workspace_agrees(&plan, a, BQ_SUCCESS, "", plan.name);
}

/* the four plan shapes every argument rule is tried on */
static bq_desc kinds(int i) {
  bq_desc d = mk(i & 1 ? BQ_SMOOTHQUANT_LINEAR : BQ_QUANTIZED_LINEAR,
                 i & 2 ? BQ_PER_TOKEN : i & 1 ? BQ_PER_TENSOR : BQ_GRANULARITY_DEFAULT, BQ_F16, BQ_F16);
  d.asymmetric = (i >> 2) & 1;
  return d;
}
#define NKINDS 8

Test(linear_args, base_is_valid) {
  for (int i = 0; i < NKINDS; i++) {
    bq_desc d = kinds(i);
    bq_args a = base(&d);
    expect_ok(&d, &a, "base");
    a.bias = NULL;
    expect_ok(&d, &a, "no bias");
  }
}

Test(linear_args, shapes) {
  for (int i = 0; i < NKINDS; i++) {
    bq_desc d = kinds(i);
    bq_args a = base(&d);
    a.rows = -1;
    expect_invalid(&d, &a, "args.rows (M = -1)");
    a = base(&d);
    a.n = -3;
    expect_invalid(&d, &a, "args.n (N = -3)");
    a = base(&d);
    a.cols = -2;
    expect_invalid(&d, &a, "args.cols (K = -2)");
    a = base(&d);
    a.x_row_stride = 255;
    expect_invalid(&d, &a, "args.x_row_stride (255)");
    a = base(&d);
    a.y_row_stride = 64;
    expect_invalid(&d, &a, "args.y_row_stride (64)");
    a = base(&d);
    a.x_row_stride = 300;
    a.y_row_stride = 70;
    expect_ok(&d, &a, "strides");
    a = base(&d);
    a.rows = (int64_t)1 << 40;
    expect_invalid(&d, &a, "args.rows (M = 1099511627776)");
    a = base(&d);
    a.n = (int64_t)1 << 31;
    expect_invalid(&d, &a, "args.n (N = 2147483648)");
    a = base(&d);
    a.rows = (int64_t)1 << 23; /* 2^32 tiles of 128 x 128 */
    a.n = (int64_t)1 << 23;
    a.cols = 16;
    a.x_row_stride = a.y_row_stride = 0;
    expect_invalid(&d, &a, "times args.n (N = 8388608) is too large");
  }
}

Test(linear_args, k_overflow_bound) {
  /* s8 symmetric, full range: K * 128 * 128 < 2^31 */
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F16, BQ_F16);
  bq_args a = base(&d);
  a.cols = 131071;
  expect_ok(&d, &a, "K = 131071");
  a.cols = 131072;
  expect_invalid(&d, &a, "args.cols (K = 131072) exceeds 131071");
  /* asymmetric: also K * (qmax - qmin) * 128 < 2^31 */
  d.asymmetric = 1;
  a = base(&d);
  a.cols = 65793;
  expect_ok(&d, &a, "asymmetric K = 65793");
  a.cols = 65794;
  expect_invalid(&d, &a, "args.cols (K = 65794) exceeds 65793");
  /* u8 symmetric: |a| <= 255 */
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_BF16);
  d.int_type = BQ_U8;
  a = base(&d);
  a.cols = 65794;
  expect_invalid(&d, &a, "args.cols (K = 65794) exceeds 65793");
  /* a narrow range allows more */
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F32, BQ_F32);
  d.qmin = -7;
  d.qmax = 7;
  a = base(&d);
  a.cols = 2396745;
  expect_ok(&d, &a, "[-7, 7], K = 2396745");
  a.cols = 2396746;
  expect_invalid(&d, &a, "args.cols (K = 2396746) exceeds 2396745");
}

Test(linear_args, pointers) {
  for (int i = 0; i < NKINDS; i++) {
    bq_desc d = kinds(i);
    bq_args a = base(&d);
    a.y = NULL;
    expect_invalid(&d, &a, "args.y is NULL");
    a = base(&d);
    a.y = (char *)PTR(2) + 1;
    expect_invalid(&d, &a, "args.y (0x");
    a = base(&d);
    a.w_scales = NULL;
    expect_invalid(&d, &a, "args.w_scales is NULL");
    a = base(&d);
    a.bias = (char *)PTR(5) + 1;
    expect_invalid(&d, &a, "args.bias (0x");
    a = base(&d);
    a.x = NULL;
    expect_invalid(&d, &a, "args.x is NULL");
    a = base(&d);
    a.w = NULL;
    expect_invalid(&d, &a, "args.w is NULL");
    if (d.op == BQ_QUANTIZED_LINEAR) {
      a = base(&d);
      a.x = (char *)PTR(1) + 1;
      expect_invalid(&d, &a, "args.x (0x");
    } else {
      a = base(&d);
      a.x = (char *)PTR(1) + 1; /* int8 activations: any address */
      a.w = (char *)PTR(3) + 3;
      expect_ok(&d, &a, "misaligned int8 activations and weights");
    }
    if (d.asymmetric) {
      a = base(&d);
      a.w_sums = NULL;
      expect_invalid(&d, &a, "args.w_sums is NULL");
      a = base(&d);
      a.w_sums = (int32_t *)((char *)PTR(8) + 2);
      expect_invalid(&d, &a, "args.w_sums (0x");
    }
  }
}

Test(linear_args, smoothquant_scales_and_zero_points) {
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, BQ_F32, BQ_F32);
  bq_args a = base(&d);
  a.scales = NULL;
  expect_invalid(&d, &a, "args.scales is NULL");
  a = base(&d);
  a.zero_points = PTR(7);
  expect_invalid(&d, &a, "args.zero_points (0x10700000) must be NULL");
  d.asymmetric = 1;
  a = base(&d);
  a.zero_points = NULL;
  expect_invalid(&d, &a, "args.zero_points is NULL");
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F32, BQ_F16);
  static const double bad[] = {0.0, -1.0, NAN, INFINITY, 1e300, 1e-300};
  for (size_t i = 0; i < NELEM(bad); i++) {
    a = base(&d);
    a.scale = bad[i];
    expect_invalid(&d, &a, "args.scale (");
  }
  a = base(&d);
  a.zero_point = 3;
  expect_invalid(&d, &a, "args.zero_point (3) must be 0");
  d.out_type = BQ_F64; /* C = f64: 1e300 is fine */
  a = base(&d);
  a.scale = 1e300;
  expect_ok(&d, &a, "f64 per-tensor scale 1e300");
}

Test(linear_args, zero_sizes) {
  for (int i = 0; i < NKINDS; i++) {
    bq_desc d = kinds(i);
    bq_plan plan;
    plan_of(&d, &plan);
    bq_args a;
    memset(&a, 0, sizeof a);
    a.rows = 0;
    a.n = 9;
    a.cols = 16;
    if (d.op == BQ_SMOOTHQUANT_LINEAR && d.granularity == BQ_PER_TENSOR) a.scale = 1;
    /* nothing to compute: no pointer is needed and nothing is launched */
    cr_assert_eq(bq_plan_can_implement(&plan, &a), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(ws_of(&plan, &a), 0);
    a.rows = 4;
    a.n = 0;
    cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
    /* K == 0 writes y = bias: y and w_scales are needed, x and w are not */
    a.n = 9;
    a.cols = 0;
    a.y = PTR(2);
    a.w_scales = PTR(4);
    cr_assert_eq(bq_plan_can_implement(&plan, &a), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(ws_of(&plan, &a), 0);
    a.y = NULL;
    cr_assert_eq(bq_plan_can_implement(&plan, &a), BQ_ERROR_INVALID_ARGUMENT);
  }
}

Test(linear_args, workspace) {
  bq_desc d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_BF16);
  bq_plan plan;
  plan_of(&d, &plan);
  bq_args a = base(&d);
  a.rows = 33;
  a.cols = 250; /* rows padded to 256 bytes: 33 * 256 = 8448 -> 8448; scales and zero points 256 each */
  size_t ws = ws_of(&plan, &a);
  cr_assert_eq(ws, (size_t)(8448 + 256 + 256), "%zu", ws);
  clear_error();
  bq_status st = bq_plan_run(&plan, &a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s", bq_status_name(st));
  check_msg("quantized_linear: ", "bq_plan_workspace_size (8960 bytes)", "run");
  st = bq_plan_run(&plan, &a, PTR(9), ws - 1, NULL);
  cr_assert_eq(st, BQ_ERROR_INSUFFICIENT_WORKSPACE);
  st = bq_plan_run(&plan, &a, (char *)PTR(9) + 8, ws + 8, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT);
  check_msg("quantized_linear: ", "workspace (0x", "run");
  /* SmoothQuant needs none */
  d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F16, BQ_F16);
  plan_of(&d, &plan);
  a = base(&d);
  cr_assert_eq(ws_of(&plan, &a), 0);
  /* the status: NULL plan, args or bytes, and a shape run would reject, are named */
  size_t b = 7;
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(NULL, &a, &b), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(b, 0);
  check_msg("bq_plan_workspace_size: ", "plan is NULL", "workspace_size");
  d = mk(BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, BQ_BF16, BQ_BF16);
  plan_of(&d, &plan);
  a = base(&d);
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, NULL), BQ_ERROR_INVALID_ARGUMENT);
  check_msg("quantized_linear: ", "bytes is NULL", "workspace_size");
  b = 7;
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(&plan, NULL, &b), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(b, 0);
  check_msg("quantized_linear: ", "args is NULL", "workspace_size");
  a.rows = -1;
  b = 7;
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &b), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(b, 0);
  check_msg("quantized_linear: ", "args.rows (M = -1)", "workspace_size");
  a = base(&d);
  a.cols = 1 << 30; /* past the K bound */
  clear_error();
  cr_assert_eq(bq_plan_workspace_size(&plan, &a, &b), BQ_ERROR_INVALID_ARGUMENT);
  check_msg("quantized_linear: ", "args.cols (K = 1073741824) exceeds", "workspace_size");
}

Test(linear_args, weight_sums) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.n = 10;
  a.cols = 77;
  a.w = (char *)PTR(3) + 1;
  a.y = PTR(2);
  expect_ok(&d, &a, "weight sums");
  a.n = -1;
  expect_invalid(&d, &a, "args.n (N = -1)");
  a.n = 10;
  a.y = NULL;
  expect_invalid(&d, &a, "args.y is NULL");
  a.y = (char *)PTR(2) + 2;
  expect_invalid(&d, &a, "args.y (0x");
  a.y = PTR(2);
  a.w = NULL;
  expect_invalid(&d, &a, "args.w is NULL");
  a.n = 0;
  a.y = NULL;
  bq_plan plan;
  plan_of(&d, &plan);
  cr_assert_eq(bq_plan_run(&plan, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
}

/* K: the int32 sums of |w| <= 128 are exact up to K = 2^24; N x K: at most 2^56 weight
   elements (the kernel's 64-bit index). Each bound just below and just above. */
Test(linear_args, weight_sums_bounds) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_LINEAR_WEIGHT_SUMS;
  bq_args a;
  memset(&a, 0, sizeof a);
  a.w = PTR(3);
  a.y = PTR(2);
  a.n = 4096;
  a.cols = (int64_t)1 << 24;
  expect_ok(&d, &a, "K = 2^24");
  a.cols = ((int64_t)1 << 24) + 1;
  expect_invalid(&d, &a, "args.cols (K = 16777217) exceeds 16777216");
  a.n = 1;
  a.cols = (int64_t)1 << 56;
  expect_invalid(&d, &a, "args.cols (K = 72057594037927936) exceeds");
  /* N x K: 2^31 - 1 rows of 2^25 + 1 exceed 2^56, of 2^25 do not (K then fails alone) */
  a.n = 0x7fffffff;
  a.cols = ((int64_t)1 << 25) + 1;
  expect_invalid(&d, &a, "args.n (N = 2147483647) times args.cols (K = 33554433) is too large");
  a.cols = (int64_t)1 << 25;
  expect_invalid(&d, &a, "args.cols (K = 33554432) exceeds");
  a.cols = (int64_t)1 << 24;
  expect_ok(&d, &a, "N = 2^31 - 1, K = 2^24");
  a.n = ((int64_t)1 << 31);
  expect_invalid(&d, &a, "args.n (N = 2147483648)");
  bq_plan plan;
  plan_of(&d, &plan);
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "K <= 2^24"), "%s", bq_plan_precision_guarantee(&plan));
}

Test(linear_args, precision_guarantee) {
  bq_plan plan;
  bq_desc d = mk(BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, BQ_F16, BQ_F16);
  plan_of(&d, &plan);
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "int32 accumulation"));
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "f32"));
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "CPU reference of docs/numerics.md"));
  d.out_type = BQ_F64;
  plan_of(&d, &plan);
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "f64"));
  cr_assert(strstr(bq_plan_precision_guarantee(&plan), "CPU reference of docs/numerics.md"));
}

/* args.amax_bound belongs to dynamic quantize: a linear layer refuses any nonzero bound,
   naming it (its activations' amax is not bounded) */
Test(linear_args, amax_bound_refused) {
  const double bad[] = {1.0, 1e-30, 448.0, -1.0, NAN, INFINITY};
  for (int i = 0; i < NKINDS; i++) {
    bq_desc d = kinds(i);
    bq_args a = base(&d);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
      a.amax_bound = bad[b];
      expect_invalid(&d, &a, "args.amax_bound (");
    }
    a.amax_bound = 0.0;
    expect_ok(&d, &a, "no bound");
  }
}
