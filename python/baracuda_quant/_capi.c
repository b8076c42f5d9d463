/* The library compiled once into the Python package's shared object (loaded with ctypes),
   plus probes of the public structs' layout and enum values, so that the package's ctypes
   mirrors are checked against this compiler's view of the header. */
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__all_descs, bq__desc_from_sku and their kin */
#include "baracuda_quant.h"

#include <string.h>

#define BQ_PY_EXPORT __attribute__((visibility("default")))

BQ_PY_EXPORT size_t bq_py_sizeof(const char *type) {
  if (!strcmp(type, "bq_desc")) return sizeof(bq_desc);
  if (!strcmp(type, "bq_args")) return sizeof(bq_args);
  if (!strcmp(type, "bq_cache_stats")) return sizeof(bq_cache_stats);
  return 0;
}

/* Offset of a field, or (size_t)-1 for a name this list does not know. */
BQ_PY_EXPORT size_t bq_py_offsetof(const char *type, const char *field) {
#define BQ_PY_FIELD(T, f) \
  if (!strcmp(type, #T) && !strcmp(field, #f)) return offsetof(T, f);
  BQ_PY_FIELD(bq_desc, op) BQ_PY_FIELD(bq_desc, direction) BQ_PY_FIELD(bq_desc, granularity)
  BQ_PY_FIELD(bq_desc, float_type) BQ_PY_FIELD(bq_desc, int_type) BQ_PY_FIELD(bq_desc, qmin)
  BQ_PY_FIELD(bq_desc, qmax) BQ_PY_FIELD(bq_desc, scale_type) BQ_PY_FIELD(bq_desc, device)
  BQ_PY_FIELD(bq_desc, asymmetric) BQ_PY_FIELD(bq_desc, out_type) BQ_PY_FIELD(bq_desc, activation)
  BQ_PY_FIELD(bq_desc, pow2_scales) BQ_PY_FIELD(bq_desc, scale_layout) BQ_PY_FIELD(bq_desc, scale_rule)
  BQ_PY_FIELD(bq_desc, random_signs) BQ_PY_FIELD(bq_desc, rounding) BQ_PY_FIELD(bq_desc, rotation)
  BQ_PY_FIELD(bq_args, x) BQ_PY_FIELD(bq_args, y) BQ_PY_FIELD(bq_args, dy) BQ_PY_FIELD(bq_args, dx)
  BQ_PY_FIELD(bq_args, numel) BQ_PY_FIELD(bq_args, rank) BQ_PY_FIELD(bq_args, shape)
  BQ_PY_FIELD(bq_args, axis) BQ_PY_FIELD(bq_args, rows) BQ_PY_FIELD(bq_args, cols)
  BQ_PY_FIELD(bq_args, x_row_stride) BQ_PY_FIELD(bq_args, y_row_stride)
  BQ_PY_FIELD(bq_args, group_size) BQ_PY_FIELD(bq_args, group_row_stride)
  BQ_PY_FIELD(bq_args, scale) BQ_PY_FIELD(bq_args, zero_point) BQ_PY_FIELD(bq_args, scales)
  BQ_PY_FIELD(bq_args, zero_points) BQ_PY_FIELD(bq_args, out_scales)
  BQ_PY_FIELD(bq_args, out_zero_points) BQ_PY_FIELD(bq_args, n) BQ_PY_FIELD(bq_args, w)
  BQ_PY_FIELD(bq_args, w_scales) BQ_PY_FIELD(bq_args, bias) BQ_PY_FIELD(bq_args, w_sums)
  BQ_PY_FIELD(bq_args, residual) BQ_PY_FIELD(bq_args, residual_row_stride)
  BQ_PY_FIELD(bq_args, norm_weight) BQ_PY_FIELD(bq_args, eps) BQ_PY_FIELD(bq_args, out)
  BQ_PY_FIELD(bq_args, out_row_stride) BQ_PY_FIELD(bq_args, amax_bound) BQ_PY_FIELD(bq_args, mask)
  BQ_PY_FIELD(bq_args, tensor_scale) BQ_PY_FIELD(bq_args, out_tensor_scale) BQ_PY_FIELD(bq_args, seed)
  BQ_PY_FIELD(bq_args, offset) BQ_PY_FIELD(bq_args, rotation_block)
  BQ_PY_FIELD(bq_cache_stats, memory_hits) BQ_PY_FIELD(bq_cache_stats, disk_hits)
  BQ_PY_FIELD(bq_cache_stats, misses) BQ_PY_FIELD(bq_cache_stats, compiles)
  BQ_PY_FIELD(bq_cache_stats, corrupt) BQ_PY_FIELD(bq_cache_stats, write_failures)
#undef BQ_PY_FIELD
  return (size_t)-1;
}

/* Value of an enumerator, or -1000 for a name this list does not know. */
BQ_PY_EXPORT int bq_py_enum(const char *name) {
#define BQ_PY_ENUM(e) \
  if (!strcmp(name, #e)) return (int)(e);
  BQ_PY_ENUM(BQ_SUCCESS) BQ_PY_ENUM(BQ_ERROR_INVALID_ARGUMENT) BQ_PY_ENUM(BQ_ERROR_NOT_SUPPORTED)
  BQ_PY_ENUM(BQ_ERROR_NO_DRIVER) BQ_PY_ENUM(BQ_ERROR_DRIVER_TOO_OLD) BQ_PY_ENUM(BQ_ERROR_NO_DEVICE)
  BQ_PY_ENUM(BQ_ERROR_NO_NVRTC) BQ_PY_ENUM(BQ_ERROR_COMPILE_FAILED) BQ_PY_ENUM(BQ_ERROR_CUDA)
  BQ_PY_ENUM(BQ_ERROR_OUT_OF_MEMORY) BQ_PY_ENUM(BQ_ERROR_INSUFFICIENT_WORKSPACE)
  BQ_PY_ENUM(BQ_DTYPE_DEFAULT) BQ_PY_ENUM(BQ_F32) BQ_PY_ENUM(BQ_F64) BQ_PY_ENUM(BQ_F16)
  BQ_PY_ENUM(BQ_BF16) BQ_PY_ENUM(BQ_S8) BQ_PY_ENUM(BQ_U8) BQ_PY_ENUM(BQ_S32)
  BQ_PY_ENUM(BQ_E4M3) BQ_PY_ENUM(BQ_E5M2) BQ_PY_ENUM(BQ_UE8M0) BQ_PY_ENUM(BQ_UE8M0X4) BQ_PY_ENUM(BQ_E2M1)
  BQ_PY_ENUM(BQ_OP_NONE) BQ_PY_ENUM(BQ_QUANTIZE) BQ_PY_ENUM(BQ_DEQUANTIZE) BQ_PY_ENUM(BQ_FAKE_QUANTIZE)
  BQ_PY_ENUM(BQ_DYNAMIC_QUANTIZE) BQ_PY_ENUM(BQ_QUANTIZED_LINEAR) BQ_PY_ENUM(BQ_SMOOTHQUANT_LINEAR)
  BQ_PY_ENUM(BQ_LINEAR_WEIGHT_SUMS) BQ_PY_ENUM(BQ_RMSNORM_QUANTIZE) BQ_PY_ENUM(BQ_GATED_QUANTIZE) BQ_PY_ENUM(BQ_HADAMARD)
  BQ_PY_ENUM(BQ_FP8_LINEAR)
  BQ_PY_ENUM(BQ_FP8_QUANTIZED_LINEAR)
  BQ_PY_ENUM(BQ_ACTIVATION_DEFAULT) BQ_PY_ENUM(BQ_SILU) BQ_PY_ENUM(BQ_GELU_TANH)
  BQ_PY_ENUM(BQ_FORWARD) BQ_PY_ENUM(BQ_BACKWARD)
  BQ_PY_ENUM(BQ_PER_TENSOR) BQ_PY_ENUM(BQ_PER_CHANNEL) BQ_PY_ENUM(BQ_PER_TOKEN) BQ_PY_ENUM(BQ_PER_GROUP)
  BQ_PY_ENUM(BQ_PER_BLOCK) BQ_PY_ENUM(BQ_SCALES_ROW_MAJOR) BQ_PY_ENUM(BQ_SCALES_MN_MAJOR) BQ_PY_ENUM(BQ_SCALES_BLOCKED)
#if BQ_VERSION_MAJOR > 0 || BQ_VERSION_MINOR >= 2
  BQ_PY_ENUM(BQ_GRANULARITY_DEFAULT)
#endif
  BQ_PY_ENUM(BQ_SCALE_RULE_DEFAULT) BQ_PY_ENUM(BQ_SCALE_FLOOR) BQ_PY_ENUM(BQ_SCALE_CEIL) BQ_PY_ENUM(BQ_SCALE_EVEN)
  BQ_PY_ENUM(BQ_SCALE_RCEIL) BQ_PY_ENUM(BQ_SCALE_RCEIL_SAT) BQ_PY_ENUM(BQ_SCALE_NVFP4_TORCHAO)
  BQ_PY_ENUM(BQ_SCALE_NVFP4_TE) BQ_PY_ENUM(BQ_ROUND_NEAREST_EVEN) BQ_PY_ENUM(BQ_ROUND_STOCHASTIC)
#undef BQ_PY_ENUM
  return -1000;
}

/* Validates one call's descriptor and arguments as bq_plan_can_implement would, with no
   device: the plan is built without a kernel (as the library's own validation tests do)
   and never reaches a launch. Lets the package's tests check the bq_args it builds on
   machines without a GPU. */
BQ_PY_EXPORT bq_status bq_py_validate(const bq_desc *desc, const bq_args *args) {
  bq_plan p;
  bq_status st = bq__plan_init(desc, &p);
  return st ? st : p.fam->check(&p, args);
}

/* Every kernel the library offers, one normalized descriptor per SKU (what `baracuda-quant
   warm --all` compiles): writes at most cap, returns how many. The package's coverage test
   checks that each one is reachable from a Python function. */
BQ_PY_EXPORT int bq_py_all_descs(bq_desc *out, int cap) { return bq__all_descs(BQ__ALL_FAMILIES, out, cap); }

/* The SKU a descriptor normalizes to, for one fixed target (sm_80; SKUs differ across
   targets in their target alone), with no NVRTC and no device: 0, or the status of an
   invalid descriptor. */
BQ_PY_EXPORT bq_status bq_py_sku(const bq_desc *desc, char *buf, size_t buf_size) {
  bq_desc d;
  char name[96];
  bq_status st = bq__normalize(desc, &d, name, sizeof name);
  if (st) return st;
  const bq__target t = {80, 0, 0, 0};
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&d, &t, &k);
  bq__copy(buf, buf_size, k.sku);
  return BQ_SUCCESS;
}

/* The eager fast path of ops.py: a validated call's bq_args (tmpl, kept per geometry) run
   again with this call's pointers, in one foreign call instead of a ctypes copy of the
   struct and an attribute set a field. The library validates the run as always; a status
   other than 0 sends the caller down its general path, which reports it. */

/* per tensor (quantize, dequantize): x, y, scale and zero point */
BQ_PY_EXPORT bq_status bq_py_run_tensor(const bq_plan *plan, const bq_args *tmpl, void *x, void *y, double scale,
                                        int64_t zero_point, void *stream) {
  bq_args a = *tmpl;
  a.x = x, a.y = y, a.scale = scale, a.zero_point = (int32_t)zero_point;
  if ((int64_t)a.zero_point != zero_point) return BQ_ERROR_INVALID_ARGUMENT;
  return bq_plan_run(plan, &a, NULL, 0, stream);
}

/* per row (quantize per token, dynamic per token, the fused producers): x and y, and each of
   scales, out_scales, norm_weight and residual that is not NULL (a NULL one keeps tmpl's,
   which is NULL where the geometry has none) */
BQ_PY_EXPORT bq_status bq_py_run_rows(const bq_plan *plan, const bq_args *tmpl, void *x, void *y, void *scales,
                                      void *out_scales, void *norm_weight, void *residual, void *stream) {
  bq_args a = *tmpl;
  a.x = x, a.y = y;
  if (scales) a.scales = scales;
  if (out_scales) a.out_scales = out_scales;
  if (norm_weight) a.norm_weight = norm_weight;
  if (residual) a.residual = residual;
  return bq_plan_run(plan, &a, NULL, 0, stream);
}
