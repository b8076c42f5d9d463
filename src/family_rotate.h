/* ---- the Hadamard rotation: a block-diagonal Walsh-Hadamard transform along each row ------ */
#include "../kernels_src/rotate_abi.h" /* its entry points and parameter block, as rotate.cu compiles them */

/* BQ_HADAMARD: a float type, either direction (backward: the inverse), per group (the
   default: blocks of args.group_size along the row), random_signs 0 or 1; every other
   field at its default */
BQ__FN bq_status bq__rotate_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  (void)in;
  bq_status st;
  if ((st = bq__rule_no_activation(d))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_GROUP;
  snprintf(name, name_size, "hadamard%s", d->direction == BQ_BACKWARD ? "_backward" : "");
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name, (int)d->direction);
  if (d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) must be BQ_PER_GROUP (blocks of "
                    "args.group_size along the row) or the default", name, (int)d->granularity);
  if (d->random_signs != 0 && d->random_signs != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0 or 1", name, d->random_signs);
  const struct { const char *field; int value; } unused[] = {
      {"int_type", (int)d->int_type}, {"qmin", d->qmin}, {"qmax", d->qmax}, {"scale_type", (int)d->scale_type},
      {"asymmetric", d->asymmetric}, {"out_type", (int)d->out_type}, {"pow2_scales", d->pow2_scales},
      {"scale_layout", (int)d->scale_layout}, {"scale_rule", (int)d->scale_rule}};
  for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++)
    if (unused[i].value != 0)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.%s (%d) must be 0: the rotation moves floats and has no "
                      "quantization", name, unused[i].field, unused[i].value);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
BQ__FN const char *bq__rotate_label(const bq_desc *d) { (void)d; return "hadamard"; }
/* "hadamard.fwd.bf16.signs.sm_90" */
BQ__FN void bq__rotate_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  snprintf(buf, n, "hadamard.%s.%s.%s.%s", d->direction == BQ_BACKWARD ? "bwd" : "fwd", bq__dtype_name(d->float_type),
           d->random_signs ? "signs" : "plain", tn);
}
BQ__FN int bq__rotate_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 4 || strcmp(tok[0], "hadamard") || (strcmp(tok[1], "fwd") && strcmp(tok[1], "bwd")) ||
      (strcmp(tok[3], "signs") && strcmp(tok[3], "plain")))
    return 0;
  d->op = BQ_HADAMARD;
  d->direction = strcmp(tok[1], "bwd") ? BQ_FORWARD : BQ_BACKWARD;
  d->granularity = BQ_PER_GROUP;
  d->random_signs = !strcmp(tok[3], "signs");
  return bq__dtype_from_name(tok[2], &d->float_type);
}
/* the enumeration's variants: with and without the random signs, and the first values of
   the enumeration's other fields alone (the rest only repeat them) */
BQ__FN void bq__rotate_axes(bq_op op, int *outer, int *inner) { (void)op, *outer = 2, *inner = 1; }
BQ__FN void bq__rotate_vary(bq_desc *in, int outer, int inner) {
  (void)inner;
  if (in->granularity != BQ_PER_TENSOR || in->int_type != BQ_S8 || in->scale_type != BQ_F32 ||
      in->scale_layout != BQ_SCALES_ROW_MAJOR || in->asymmetric) {
    in->op = BQ_OP_NONE; /* (a repeat: refused) */
    return;
  }
  in->granularity = BQ_PER_GROUP;
  in->int_type = in->scale_type = BQ_DTYPE_DEFAULT;
  in->random_signs = outer;
}
BQ__FN unsigned bq__rotate_owns(const bq_desc *d) { return d->random_signs ? BQ__OWNS_SEED : 0; }
BQ__FN const char *bq__rotate_guarantee(const bq_desc *d) {
  (void)d;
  return "exact: the butterfly of docs/numerics.md (\"Rotation\"), each sum and difference rounded once in C, then "
         "one product by C(1 / sqrt(n)) and one rounding to T; bit-identical to the CPU reference";
}
BQ__FN void bq__rotate_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT BQ_TYPE_S8\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST BQ_TYPE_F32\n#define BQ_SL 0\n#define BQ_OP BQ_OP_HADAMARD\n#define BQ_DIR %s\n"
              "#define BQ_GRAN BQ_GRAN_GROUP\n#define BQ_ASYM 0\n", bq__spec("TYPE", d->float_type),
              bq__spec("DIR", d->direction));
}
BQ__FN int bq__rotate_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* [rows, cols] with row strides, blocks of n = group_size (a power of two, 2 to 256) */
typedef struct bq__rotate_view {
  int64_t rows, cols, xs, ys;
  int log2n;
} bq__rotate_view;
BQ__FN bq_status bq__rotate_view_of(const bq_plan *p, const bq_args *a, bq__rotate_view *v, int pointers) {
  const char *n = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  const int k = bq__hadamard_log2(a->group_size);
  if (k < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be a power of two from 2 to 256: the "
                    "rotation's block", n, (long long)a->group_size);
  bq__view bv; /* rows, cols, the row strides and the blocks as per group takes them */
  bq_status st = bq__view_of(p, a, &bv);
  if (st) return st;
  v->rows = bv.rows, v->cols = bv.cols, v->xs = bv.xs, v->ys = bv.ys, v->log2n = k;
  if (!pointers || v->rows == 0 || v->cols == 0) return BQ_SUCCESS;
  const int t = bq__dtype_size(p->desc.float_type);
  if ((st = bq__check_ptr(p, "args.x", a->x, t)) || (st = bq__check_ptr(p, "args.y", a->y, t))) return st;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__rotate_shape(const bq_plan *p, const bq_args *a) {
  bq__rotate_view v;
  return bq__rotate_view_of(p, a, &v, 0);
}
BQ__FN bq_status bq__rotate_check(const bq_plan *p, const bq_args *a) {
  bq__rotate_view v;
  return bq__rotate_view_of(p, a, &v, 1);
}
/* a lane's elements: 16 bytes of T, or more where a warp of them would not hold a block */
BQ__FN int bq__rotate_lane_elems(const bq_desc *d, int log2n) {
  const int v = bq__rotate_vec(d), e = log2n > 5 ? 1 << (log2n - 5) : 1;
  return v > e ? v : e;
}
/* Tests: the entry point every run takes where it can (-1: the host's) */
static int bq__rotate_force_entry = -1;
BQ__FN bq_status bq__rotate_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws, (void)ws_bytes;
  bq__rotate_view v;
  bq_status st = bq__rotate_view_of(p, a, &v, 1);
  if (st || v.rows == 0 || v.cols == 0) return st;
  int E = bq__rotate_lane_elems(&p->desc, v.log2n);
  if (bq__rotate_force_entry >= 0 && (2 << bq__rotate_force_entry) >= E) E = 2 << bq__rotate_force_entry;
  bq_rotate_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.rows = v.rows, k.cols = v.cols, k.xs = v.xs, k.ys = v.ys;
  k.segs = (v.cols + 32 * E - 1) / (32 * E);
  k.log2n = v.log2n;
  k.signs = p->desc.random_signs;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  const int e = E == 2 ? BQ__ROTATE_E2 : E == 4 ? BQ__ROTATE_E4 : BQ__ROTATE_E8;
  const int64_t blocks = bq__grid(v.rows * k.segs, 8), cap = (int64_t)bq__limits_of(p).sms * 8; /* 8 warps a block */
  return bq__launch(p, e, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}
/* the typical problem's blocks: 128 */
BQ__FN void bq__rotate_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)d, (void)ptr;
  a->group_size = 128;
}

static const bq__family bq__rotate_family = {
  {BQ_HADAMARD}, {"hadamard"}, "rotate",
  bq__rotate_normalize, bq__rotate_label, bq__rotate_sku, bq__rotate_from_sku, bq__rotate_axes, bq__rotate_vary,
  bq__rotate_owns, bq__rotate_guarantee, "rotate.cu", bq__text_rotate_cu, bq__rotate_prelude, bq__rotate_vec, 0,
  bq__rotate_shape, bq__rotate_check, bq__no_workspace, bq__rotate_run, NULL, NULL,
  {{NULL}, {NULL}, {NULL},
   {BQ_ENTRY_NAME(BQ_FN_ROTATE2), BQ_ENTRY_NAME(BQ_FN_ROTATE4), BQ_ENTRY_NAME(BQ_FN_ROTATE8)},
   {NULL}},
  NULL, NULL, bq__rotate_typical, 0};
