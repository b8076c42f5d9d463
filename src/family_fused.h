/* ---- the fused family: a producer (RMSNorm, gated activation) and its quantize ------------- */
#include "../kernels_src/fused_abi.h" /* its entry points and parameter block, as fused.cu compiles them */

#define BQ__FUSED_THREADS 256 /* fused.cu's BQ_THREADS: the contract's reduction order */
/* each entry's (threads, accesses a thread): fused.cu's BQ_FUSED_ENTRY lines (the staged
   kernel's accesses a thread follow the row) */
static const int bq__fused_shapes[BQ__FUSED_ENTRIES][2] = {{256, 1}, {256, 2}, {256, 4}, {256, 8}, {256, 4},
                                                           {256, 0}, {128, 4}, {128, 8}, {128, 4}, {128, 8}, {128, 16},
                                                           {256, 2}, {256, 8}, {256, 0}};
/* the accesses an entry holds of a row at once (bq_fused_long: a batch; bq_fused_staged and
   bq_fused_amax: 0) */
BQ__FN int64_t bq__fused_held(int e) { return (int64_t)bq__fused_shapes[e][0] * bq__fused_shapes[e][1]; }
/* the narrow entries take RMSNorm per token and per group without a residual, in batches of
   at least this many rows an SM: there the fixed work a row is the largest share. (H100,
   bf16 [8192, 4096]: about 0.8 of the 256-thread kernel's time; for the gated op they were
   slower.) */
#define BQ__FUSED_NARROW_ROWS 16
#define BQ__FUSED_MAX_COLS ((int64_t)1 << 30)

/* The fused producers' kernel choice: the first row of bq__fused_rules whose facts hold
   (bq__fused_choose). A row names the facts it needs and those that rule it out, and how a
   row of the problem must fill the entry: up to what it holds, exactly that (a full row),
   or any. The facts, of a call: */
enum {
  BQ__FF_RMS = 1,      /* RMSNorm (not the gated op) */
  BQ__FF_RES = 2,      /* with a residual */
  BQ__FF_DENSE = 4,    /* every stream 16-byte aligned, whole accesses, y's rows aligned to a chunk of codes */
  BQ__FF_WHOLE = 8,    /* every T stream 16-byte aligned, whole accesses */
  BQ__FF_DYN = 16,     /* per token or per group (dynamic scales) */
  BQ__FF_MANY = 32,    /* at least BQ__FUSED_NARROW_ROWS rows an SM */
  BQ__FF_WIDE = 64,    /* f64 data: more registers an element */
  BQ__FF_ALIGNED = 128, /* every T stream 16-byte aligned */
  BQ__FF_LONG = 256,   /* more than two accesses a thread of 256 */
  BQ__FF_REG_C8 = 512, /* rows bq_fused_c8 holds but bq_fused_c4 does not, with the activation's
                          table or for 16-bit RMSNorm with a residual and dynamic scales */
  BQ__FF_STAGED = 1024 /* bq_fused_staged fits a block an SM or more (asked last: its module loads) */
};
enum { BQ__FILL_ANY, BQ__FILL_HELD, BQ__FILL_FULL }; /* bq__fused_rule.fill */
typedef struct bq__fused_rule {
  int entry;
  unsigned need, refuse; /* BQ__FF_* */
  int fill;
} bq__fused_rule;
static const bq__fused_rule bq__fused_rules[] = {
  /* narrow (128 threads): RMSNorm's dense rows, many of them, where a row's fixed work (its
     reductions, rstd, scale) is the largest share; bq_fused_m16 spills for f64 elements,
     the wider ones with a residual */
  {BQ__FUSED_M4F, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, 0, BQ__FILL_FULL},
  {BQ__FUSED_M4, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, 0, BQ__FILL_HELD},
  {BQ__FUSED_M8F, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES, BQ__FILL_FULL},
  {BQ__FUSED_M8, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES, BQ__FILL_HELD},
  {BQ__FUSED_M16, BQ__FF_RMS | BQ__FF_DENSE | BQ__FF_DYN | BQ__FF_MANY, BQ__FF_RES | BQ__FF_WIDE, BQ__FILL_HELD},
  /* long aligned rows staged in shared memory, the next row's copy in flight */
  {BQ__FUSED_STAGED, BQ__FF_ALIGNED | BQ__FF_LONG | BQ__FF_STAGED, BQ__FF_REG_C8, BQ__FILL_ANY},
  /* a row in registers, 256 threads; dense rows without the element path */
  {BQ__FUSED_C1, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C2D, BQ__FF_DENSE, 0, BQ__FILL_HELD},
  {BQ__FUSED_C2, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C4, 0, 0, BQ__FILL_HELD},
  {BQ__FUSED_C8D, BQ__FF_WHOLE, 0, BQ__FILL_HELD},
  {BQ__FUSED_C8, 0, 0, BQ__FILL_HELD},
  /* any row, in batches */
  {BQ__FUSED_LONG, 0, 0, BQ__FILL_ANY},
};
#define BQ__FUSED_RULES ((int)(sizeof bq__fused_rules / sizeof bq__fused_rules[0]))

BQ__FN int bq__fused_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

/* gated with bf16 gates: act(g) comes from a table of its 8192 values that need the
   formula, copied into each block's shared memory (fused.cu, "the activation's table") */
#define BQ__FUSED_ACT_BYTES (8192 * 4)
BQ__FN int bq__fused_act_table(const bq_desc *d) { return d->op == BQ_GATED_QUANTIZE && d->float_type == BQ_BF16; }

/* A fused desc emits a microscaling format where it names what only those have (as
   bq__is_mx): E2M1 storage, UE8M0 or E4M3 scales, the blocked layout or a scale rule */
BQ__FN int bq__fused_mx(const bq_desc *d) {
  return (d->op == BQ_RMSNORM_QUANTIZE || d->op == BQ_GATED_QUANTIZE) &&
         (d->int_type == BQ_E2M1 || d->scale_type == BQ_UE8M0 || d->scale_type == BQ_E4M3 ||
          d->scale_layout == BQ_SCALES_BLOCKED || d->scale_rule != BQ_SCALE_RULE_DEFAULT);
}
BQ__FN int bq__fused_nv(const bq_desc *d) { return bq__fused_mx(d) && d->scale_type == BQ_E4M3; }

BQ__FN void bq__fused_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_ACT %s\n#define BQ_GRAN %s\n#define BQ_ASYM %d\n#define BQ_ACT_TAB %d\n",
              bq__spec("OP", d->op), d->op == BQ_GATED_QUANTIZE ? bq__spec("ACT", d->activation) : "0",
              bq__spec("GRAN", d->granularity), d->asymmetric, bq__fused_act_table(d));
  if (bq__fused_mx(d)) /* (common.cuh's microscaling part) */
    bq__str_fmt(s, "#define BQ_MX_LAYOUT %d\n#define BQ_MX_RULE %d\n", (int)d->scale_layout, (int)d->scale_rule);
}

/* One call's shape, strides (elements) and pointers, validated. */
typedef struct bq__fused_view {
  int64_t rows, cols, xs, ys, rs, os, group, ngroups, grs;
} bq__fused_view;

/* The shape rules: rows, cols, the row strides and the groups */
BQ__FN bq_status bq__fused_shape_of(const bq_plan *p, const bq_args *a, bq__fused_view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  const int rms = d->op == BQ_RMSNORM_QUANTIZE;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  if (a->rows < 0 || a->rows > BQ__MAX_ELEMS)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) is negative or too large", n, (long long)a->rows);
  if (a->cols < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (%lld) is negative", n, (long long)a->cols);
  if (a->cols > BQ__FUSED_MAX_COLS) /* the kernels index a row in 32 bits */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.cols (%lld) is larger than 2^30, the longest row offered", n,
                    (long long)a->cols);
  v->rows = a->rows;
  v->cols = a->cols;
  const int64_t in_cols = rms ? a->cols : 2 * a->cols;
  v->xs = a->x_row_stride ? a->x_row_stride : in_cols;
  v->ys = a->y_row_stride ? a->y_row_stride : a->cols;
  v->rs = a->residual_row_stride ? a->residual_row_stride : a->cols;
  v->os = a->out_row_stride ? a->out_row_stride : a->cols;
  if (v->xs < in_cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than %s (%lld)", n,
                    (long long)a->x_row_stride, rms ? "args.cols" : "2 * args.cols", (long long)in_cols);
  if (v->ys < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.cols (%lld)", n,
                    (long long)a->y_row_stride, (long long)a->cols);
  if (v->rs < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual_row_stride (%lld) is smaller than args.cols (%lld)",
                    n, (long long)a->residual_row_stride, (long long)a->cols);
  if (v->os < a->cols)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.out_row_stride (%lld) is smaller than args.cols (%lld)", n,
                    (long long)a->out_row_stride, (long long)a->cols);
  if (v->rows && (v->xs > BQ__MAX_ELEMS / v->rows || v->ys > BQ__MAX_ELEMS / v->rows ||
                  v->rs > BQ__MAX_ELEMS / v->rows || v->os > BQ__MAX_ELEMS / v->rows))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) times a row stride is too large", n,
                    (long long)a->rows);
  if (d->granularity != BQ_PER_GROUP) return BQ_SUCCESS;
  if (d->scale_layout == BQ_SCALES_BLOCKED && a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 with desc.scale_layout "
                    "BQ_SCALES_BLOCKED (its extent is the padded tiles')", n, (long long)a->group_row_stride);
  bq_status st = bq__group_shape(n, d, a, v->rows, &v->group, &v->ngroups, &v->grs);
  if (st) return st;
  if (d->scale_layout == BQ_SCALES_BLOCKED) v->grs = 0;
  if (d->int_type == BQ_E2M1 && v->group % 2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) is odd: E2M1 packs two elements a byte, "
                    "so groups must be even", n, (long long)v->group);
  if (d->int_type == BQ_E2M1 && v->ys % 2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is odd: E2M1 rows start on a byte", n,
                    (long long)a->y_row_stride);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__fused_shape(const bq_plan *p, const bq_args *a) {
  bq__fused_view v;
  return bq__fused_shape_of(p, a, &v);
}
/* Then the scalars and the pointers */
BQ__FN bq_status bq__fused_view_of(const bq_plan *p, const bq_args *a, bq__fused_view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  const int rms = d->op == BQ_RMSNORM_QUANTIZE, t = bq__dtype_size(d->float_type);
  bq_status st = bq__fused_shape_of(p, a, v);
  if (st) return st;
  const int c64 = d->float_type == BQ_F64; /* scalars are used in C: f64, or rounded to f32 */
  if (d->granularity == BQ_PER_TENSOR &&
      !(isfinite(a->scale) && a->scale > 0 && (c64 || ((float)a->scale > 0 && isfinite((float)a->scale)))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0 in the compute type", n,
                    a->scale);
  if (d->granularity == BQ_PER_TENSOR && (st = bq__fp8_zero_point(p, a->zero_point))) return st;
  if (rms && !(isfinite(a->eps) && a->eps >= 0 && (c64 || isfinite((float)a->eps))))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.eps (%g) must be finite and >= 0 in the compute type", n,
                    a->eps);
  if (!rms) {
    if (a->residual)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual (%p) applies to rmsnorm_quantize only", n, a->residual);
    if (a->norm_weight)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.norm_weight (%p) applies to rmsnorm_quantize only", n,
                      a->norm_weight);
    if (a->eps != 0)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.eps (%g) applies to rmsnorm_quantize only", n, a->eps);
  }
  if (rms && a->residual && a->residual == a->x && v->rs != v->xs)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.residual is args.x, but args.residual_row_stride (%lld) is "
                    "not x's (%lld)", n, (long long)v->rs, (long long)v->xs);
  if (d->rotation && (st = bq__rotation_block_check(n, a->rotation_block, v->cols))) return st;
  if (v->rows == 0 || v->cols == 0) return BQ_SUCCESS;
  if ((st = bq__check_ptr(p, "args.x", a->x, t))) return st;
  if ((st = bq__check_ptr(p, "args.y", a->y, 1))) return st;
  if (rms && (st = bq__check_ptr(p, "args.norm_weight", a->norm_weight, t))) return st;
  if (a->residual && (st = bq__check_ptr(p, "args.residual", a->residual, t))) return st;
  if (a->out && (st = bq__check_ptr(p, "args.out", a->out, t))) return st;
  if (d->granularity != BQ_PER_TENSOR) {
    if ((st = bq__check_ptr(p, "args.out_scales", a->out_scales, bq__fused_mx(d) ? 1 : bq__dtype_size(d->scale_type))))
      return st;
    if (d->asymmetric && (st = bq__check_ptr(p, "args.out_zero_points", a->out_zero_points, 4))) return st;
  }
  if (bq__fused_mx(d) && a->out_zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.out_zero_points must be NULL: the microscaling formats are "
                    "symmetric", n);
  if (bq__fused_nv(d)) { /* NVFP4: the tensor scale given, or computed and written */
    if (a->tensor_scale && (st = bq__check_ptr(p, "args.tensor_scale", a->tensor_scale, 4))) return st;
    if (!a->tensor_scale && (st = bq__check_ptr(p, "args.out_tensor_scale", a->out_tensor_scale, 4))) return st;
  }
  return BQ_SUCCESS;
}
/* NVFP4 without args.tensor_scale: bq_fused_amax first, a partial amax a block (at most 8
   blocks an SM) and their reduction after them in the workspace */
BQ__FN int bq__fused_two_pass(const bq_plan *p, const bq_args *a) {
  return bq__fused_nv(&p->desc) && a && !a->tensor_scale;
}
BQ__FN int64_t bq__fused_amax_blocks(const bq_plan *p, const bq_args *a) {
  const int64_t cap = (int64_t)(p->num_sms > 0 ? p->num_sms : 1) * 8;
  return a->rows < cap ? a->rows : cap;
}
/* A plan that quantizes the producer's values again with the plan it holds (bq__fused_sub):
   stochastic rounding, the fused rotation */
BQ__FN int bq__fused_holds(const bq_desc *d) { return d->rounding == BQ_ROUND_STOCHASTIC || d->rotation; }
/* ... and does so with a whole quantize op of its own (the rotation, or stochastic rounding
   into a microscaling format), not with the scales the producer wrote */
BQ__FN int bq__fused_composed(const bq_desc *d) {
  return d->rotation || (d->rounding == BQ_ROUND_STOCHASTIC && bq__fused_mx(d));
}
/* the producer's own workspace: NVFP4's partial amaxes and their reduction */
BQ__FN size_t bq__fused_amax_ws(const bq_plan *p, const bq_args *a) {
  if (!bq__fused_two_pass(p, a) || a->rows <= 0 || a->cols <= 0) return 0;
  return (size_t)bq__fused_amax_blocks(p, a) * 4 + 4;
}
/* the producer's values without args.out: [rows, cols] of T, dense */
BQ__FN size_t bq__fused_values(const bq_plan *p, const bq_args *a) {
  if (!bq__fused_holds(&p->desc) || a->out || a->rows <= 0 || a->cols <= 0) return 0;
  return (size_t)a->rows * (size_t)a->cols * (size_t)bq__dtype_size(p->desc.float_type);
}
/* The held plan's arguments: the values (at vals, row stride vs; 0: dense) quantized into y
   and the call's scales, with its seed, offset, rotation block and tensor scale */
BQ__FN void bq__fused_sub_args(const bq_plan *p, const bq_args *a, const void *vals, int64_t vs, bq_args *q) {
  memset(q, 0, sizeof *q);
  q->x = vals;
  q->y = a->y;
  q->rows = a->rows, q->cols = a->cols;
  q->x_row_stride = vs, q->y_row_stride = a->y_row_stride;
  q->out_scales = a->out_scales;
  q->out_zero_points = p->desc.asymmetric ? a->out_zero_points : NULL;
  q->group_size = a->group_size, q->group_row_stride = a->group_row_stride;
  q->tensor_scale = a->tensor_scale, q->out_tensor_scale = a->out_tensor_scale;
  q->seed = a->seed, q->offset = a->offset, q->rotation_block = a->rotation_block;
}
/* the values' bytes, then (rounded up to 256) the larger of the producer's and the held
   plan's own */
BQ__FN size_t bq__fused_workspace(const bq_plan *p, const bq_args *a) {
  const size_t own = bq__fused_amax_ws(p, a);
  if (!bq__fused_holds(&p->desc)) return own;
  const size_t vb = bq__fused_values(p, a);
  size_t sub = 0;
  if (bq__fused_composed(&p->desc) && p->desc.granularity != BQ_PER_TENSOR && p->sub && a->rows > 0 && a->cols > 0) {
    bq_args q;
    bq__fused_sub_args(p, a, NULL, 0, &q);
    sub = p->sub->fam->workspace(p->sub, &q);
  }
  const size_t rest = own > sub ? own : sub;
  return rest ? (vb + 255) / 256 * 256 + rest : vb;
}

/* The call's rules, then, where the plan holds a whole dynamic quantize, that op's rules over the values
   (args.out's, or the workspace's: dense, and aligned as bq_malloc's) */
BQ__FN bq_status bq__fused_check(const bq_plan *p, const bq_args *a) {
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0 || !p->sub || !bq__fused_composed(&p->desc) ||
      p->desc.granularity == BQ_PER_TENSOR)
    return st;
  bq_args q;
  bq__fused_sub_args(p, a, a->out ? a->out : (const void *)(uintptr_t)256, a->out ? a->out_row_stride : 0, &q);
  return p->sub->fam->check(p->sub, &q);
}

/* Tests: an entry point by index for every run (a register entry too small for the row,
   a narrow one given rows that are not dense, or a full one rows of another length, takes
   bq_fused_long); -1: the host's choice. */
static int bq__fused_force_entry = -1;
BQ__FN int bq__aligned16(const void *ptr, int64_t stride_bytes) {
  return (uintptr_t)ptr % 16 == 0 && stride_bytes % 16 == 0;
}
/* The staged kernel's blocks an SM for rows of nacc accesses (two slots of slot bytes, after
   the activation's table), with the weight staged too where that costs no block an SM
   (*wbytes its bytes, else 0); 0 where its shared memory is not given. Its module loads
   first (bq__fused_setup gives it its shared memory). */
BQ__FN bq_status bq__fused_staged_fit(const bq_plan *p, int64_t tab, int64_t slot, int rms, int64_t nacc,
                                      int *blocks, int64_t *wbytes) {
  *blocks = 0, *wbytes = 0;
  for (int ws_try = rms; ws_try >= 0; ws_try--) {
    int nb = 0;
    const int64_t wb = ws_try ? nacc * 16 : 0, bytes = tab + wb + 2 * slot;
    bq__CUfunction sf = NULL;
    if (bytes > p->fused.smem_max) continue;
    bq_status st = bq__plan_fn(p, BQ__FUSED_STAGED, &sf);
    if (st) return st;
    if (bytes <= p->fused.staged_smem &&
        bq__drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, sf, BQ__FUSED_THREADS, (size_t)bytes) == 0 &&
        nb > *blocks)
      *blocks = nb, *wbytes = wb;
  }
  return BQ_SUCCESS;
}
/* The producer and its quantize, rounding to nearest: the entry point the rules pick */
BQ__FN bq_status bq__fused_produce(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0) return st;
  const bq_desc *d = &p->desc;
  const int t = bq__dtype_size(d->float_type), rms = d->op == BQ_RMSNORM_QUANTIZE;
  bq_fused_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.res = rms ? (uint64_t)(uintptr_t)a->residual : 0;
  k.w = rms ? (uint64_t)(uintptr_t)a->norm_weight : 0;
  k.out = (uint64_t)(uintptr_t)a->out;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.scales = (uint64_t)(uintptr_t)a->out_scales;
  k.zps = (uint64_t)(uintptr_t)a->out_zero_points;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.rs = v.rs;
  k.os = v.os;
  k.ys = v.ys;
  k.group = v.group;
  k.grs = v.grs;
  k.scale = a->scale;
  k.eps = rms ? a->eps : 0;
  k.zp = a->zero_point;
  k.tensor_scale = (uint64_t)(uintptr_t)a->tensor_scale;
  /* 16-byte accesses when every T stream's rows start 16-byte aligned */
  k.aligned = bq__aligned16(a->x, v.xs * t) && (rms || (v.cols * t) % 16 == 0) &&
              (!rms || bq__aligned16(a->norm_weight, 0)) && (!k.res || bq__aligned16(a->residual, v.rs * t)) &&
              (!k.out || bq__aligned16(a->out, v.os * t));
  /* groups of a power-of-two number of whole accesses, up to a warp's width */
  const int64_t gc = v.group / p->vec;
  k.fast_groups = d->granularity == BQ_PER_GROUP && v.group % p->vec == 0 && gc <= 32 && (gc & (gc - 1)) == 0;
  const int64_t nacc = (v.cols + p->vec - 1) / p->vec;
  /* dense rows: every stream 16-byte aligned, D whole accesses, y's rows aligned to a chunk
     of codes (the narrow entries and bq_fused_c2d store y in one width) */
  const int whole = k.aligned && v.cols % p->vec == 0;
  const int yal = (uintptr_t)a->y % p->vec == 0 && v.ys % p->vec == 0;
  const int64_t tab = bq__fused_act_table(d) ? BQ__FUSED_ACT_BYTES : 0; /* first in shared memory */
  if (bq__fused_two_pass(p, a)) { /* NVFP4's tensor scale: the amax, partials then their reduction */
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__fused_amax_ws(p, a)))) return st;
    k.amax = (uint64_t)(uintptr_t)ws;
    const int64_t parts = bq__fused_amax_blocks(p, a);
    if ((st = bq__launch(p, BQ__FUSED_AMAX, parts, 1, BQ__FUSED_THREADS, (unsigned)tab, &k, stream))) return st;
    k.nparts = (int)parts;
    if ((st = bq__launch(p, BQ__FUSED_AMAX, 1, 1, BQ__FUSED_THREADS, (unsigned)tab, &k, stream))) return st;
    k.amax += 4 * (uint64_t)parts; /* (the reduction's word) */
    k.nparts = 0;
    k.out_tensor_scale = (uint64_t)(uintptr_t)a->out_tensor_scale;
  }
  unsigned facts = (rms ? BQ__FF_RMS : 0) | (k.res ? BQ__FF_RES : 0) | (whole && yal ? BQ__FF_DENSE : 0) |
                   (whole ? BQ__FF_WHOLE : 0) | (k.aligned ? BQ__FF_ALIGNED : 0) |
                   (nacc > 2 * BQ__FUSED_THREADS ? BQ__FF_LONG : 0) |
                   (t == 8 ? BQ__FF_WIDE : 0);
  if (d->granularity == BQ_PER_TOKEN || d->granularity == BQ_PER_GROUP) facts |= BQ__FF_DYN;
  if (v.rows >= (int64_t)BQ__FUSED_NARROW_ROWS * (p->num_sms > 0 ? p->num_sms : 1)) facts |= BQ__FF_MANY;
  /* rows that bq_fused_c8 holds but bq_fused_c4 does not are faster in registers than
     staged with the activation's table, and for 16-bit RMSNorm with a residual and dynamic
     scales, whose two slots leave the staged kernel one block an SM */
  if ((tab || (rms && k.res && t == 2 && (facts & BQ__FF_DYN))) && nacc > bq__fused_held(BQ__FUSED_C4) &&
      nacc <= bq__fused_held(BQ__FUSED_C8))
    facts |= BQ__FF_REG_C8;
  /* staged: two slots of a row's streams (x and the residual, or the gate and up) a block;
     the weight staged too where that costs no block an SM (else it is read through L1) */
  const int64_t slot = nacc * 16 * (rms && !k.res ? 1 : 2);
  const int forced = bq__fused_force_entry >= 0 && bq__fused_force_entry < BQ__FUSED_ENTRIES;
  int64_t wbytes = 0;
  int staged_blocks = 0, which = BQ__FUSED_LONG;
  for (int r = 0; r < BQ__FUSED_RULES; r++) {
    const bq__fused_rule *u = &bq__fused_rules[r];
    const int64_t held = bq__fused_held(u->entry);
    if ((u->fill == BQ__FILL_HELD && nacc > held) || (u->fill == BQ__FILL_FULL && nacc != held)) continue;
    if ((u->need & BQ__FF_STAGED) && !forced && (u->need & ~facts & ~(unsigned)BQ__FF_STAGED) == 0 &&
        !(u->refuse & facts)) {
      if ((st = bq__fused_staged_fit(p, tab, slot, rms, nacc, &staged_blocks, &wbytes))) return st;
      if (staged_blocks > 0) facts |= BQ__FF_STAGED;
    }
    if ((u->need & ~facts) == 0 && !(u->refuse & facts)) {
      which = u->entry;
      break;
    }
  }
  if (forced) { /* the test hook: the entry asked for where it can take the problem */
    const int dense = whole && yal;
    if (k.aligned && (st = bq__fused_staged_fit(p, tab, slot, rms, nacc, &staged_blocks, &wbytes))) return st;
    which = bq__fused_force_entry;
    if (which != BQ__FUSED_LONG && which != BQ__FUSED_STAGED && nacc > bq__fused_held(which)) which = BQ__FUSED_LONG;
    if (which == BQ__FUSED_STAGED && staged_blocks <= 0) which = BQ__FUSED_LONG;
    if (which >= BQ__FUSED_M4 && which <= BQ__FUSED_M16 && !dense) which = BQ__FUSED_LONG;
    if (k.res && which >= BQ__FUSED_M8 && which <= BQ__FUSED_M16 && which != BQ__FUSED_M4F) which = BQ__FUSED_LONG;
    if ((which == BQ__FUSED_C2D && !dense) || (which == BQ__FUSED_C8D && !whole)) which = BQ__FUSED_LONG;
    if ((which == BQ__FUSED_M4F || which == BQ__FUSED_M8F) && nacc != bq__fused_held(which)) which = BQ__FUSED_LONG;
  }
  if (which == BQ__FUSED_STAGED) { /* persistent blocks, as many as fit at once */
    k.slot = (int32_t)slot;
    k.wstage = wbytes > 0;
    int64_t blocks = (int64_t)staged_blocks * (p->num_sms > 0 ? p->num_sms : 1);
    return bq__launch(p, which, v.rows < blocks ? v.rows : blocks, 1, BQ__FUSED_THREADS,
                      (unsigned)(tab + wbytes + 2 * slot), &k, stream);
  }
  /* a block a row (a block takes several when rows exceed the grid's limit); with the
     activation's table, which each block copies in first, as many blocks as fit at once */
  int64_t blocks = v.rows < 0x7fffffff ? v.rows : 0x7fffffff;
  if (tab) { /* (its module loaded first: bq__fused_setup counts its blocks) */
    bq__CUfunction fn;
    if (!bq__dry.plan && (st = bq__plan_fn(p, which, &fn))) return st;
    const int64_t per_sm = p->fused.tab_blocks[which] > 0 ? p->fused.tab_blocks[which] : 1;
    const int64_t fit = per_sm * (p->num_sms > 0 ? p->num_sms : 1);
    if (blocks > fit) blocks = fit;
  }
  return bq__launch(p, which, blocks, 1, bq__fused_shapes[which][0], (unsigned)tab, &k, stream);
}

/* Stochastic rounding and the fused rotation: the producer's run as when rounding to nearest
   (its scales and codes written, and its values: args.out, else the workspace), then the plan
   it holds (bq__fused_sub) quantizes those values over y:
   - stochastic rounding alone into integer or FP8 storage: bq_affine_sr with the scales just
     written (per tensor the static scale on every row), at each element's index r cols + c
     plus args.offset: the contract's producer, then its quantize (the dynamic scales are
     those rounding to nearest computes, as dynamic quantize's rule has them);
   - with the rotation, or stochastic rounding into a microscaling format: the whole op over
     the values, quantize per tensor with the static scale, else dynamic quantize at the same
     granularity, rotating and rounding as the desc says (its scales replace the producer's).
   y (and the scales) are written twice: the price of reusing every tuned producer kernel. */
BQ__FN bq_status bq__fused_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  if (!bq__fused_holds(&p->desc)) return bq__fused_produce(p, a, ws, ws_bytes, stream);
  bq__fused_view v;
  bq_status st = bq__fused_view_of(p, a, &v);
  if (st || v.rows == 0 || v.cols == 0) return st;
  if ((st = bq__fused_check(p, a))) return st; /* (the held op's rules before the workspace's, as can_implement) */
  const size_t need = bq__fused_workspace(p, a), vb = bq__fused_values(p, a);
  if (need && (st = bq__check_workspace(p, ws, ws_bytes, need))) return st;
  char *rest = need > vb ? (char *)ws + (vb + 255) / 256 * 256 : NULL;
  const size_t rest_bytes = rest ? ws_bytes - (size_t)(rest - (char *)ws) : 0;
  bq_args f = *a;
  if (!a->out) {
    f.out = ws;
    f.out_row_stride = 0; /* (cols: dense) */
  }
  bq_args q;
  bq__fused_sub_args(p, a, f.out, f.out_row_stride, &q);
  const int whole = bq__fused_composed(&p->desc) && p->desc.granularity != BQ_PER_TENSOR;
  if (whole && (st = p->sub->fam->check(p->sub, &q))) return st; /* (before the producer writes anything) */
  if ((st = bq__fused_produce(p, &f, rest, rest_bytes, stream))) return st;
  if (whole) return bq_plan_run(p->sub, &q, rest, rest_bytes, stream);
  q.scales = a->out_scales, q.out_scales = NULL;
  q.zero_points = q.out_zero_points, q.out_zero_points = NULL;
  q.scale = a->scale;
  q.zero_point = a->zero_point;
  bq__view w; /* [rows, cols] with the value's and y's row strides, whatever the granularity */
  memset(&w, 0, sizeof w);
  w.rows = v.rows, w.cols = v.cols, w.numel = v.rows * v.cols;
  w.xs = f.out_row_stride ? f.out_row_stride : v.cols;
  w.ys = v.ys;
  w.group = p->desc.granularity == BQ_PER_GROUP ? v.group : 0;
  w.grs = v.grs;
  return bq__affine_sr_run(p->sub, &q, &w, stream);
}
/* The plan a stochastic or rotating plan holds (bq__fused_run): quantize forward at the same
   granularity, types, q-range, scale type and layout, rounding stochastically; with the
   rotation, or into a microscaling format, the whole op: quantize per tensor, rotating, or
   dynamic quantize (the dynamic or the microscaling family) with the desc's rotation,
   rounding and scale rule */
BQ__FN int bq__fused_sub(const bq_desc *d, bq_desc *q) {
  if (!bq__fused_holds(d)) return 0;
  bq__affine_sr_of(d, d->granularity, q);
  q->rounding = d->rounding;
  q->rotation = d->rotation;
  q->random_signs = d->random_signs;
  if (bq__fused_composed(d) && d->granularity != BQ_PER_TENSOR) {
    q->op = BQ_DYNAMIC_QUANTIZE;
    q->scale_rule = d->scale_rule;
    q->asymmetric = d->asymmetric;
  }
  return 1;
}

/* bq_fused_staged gets the dynamic shared memory its rows may take (where the driver refuses,
   the register entries serve every row); with the activation's table, each register entry
   gets its blocks an SM */
BQ__FN bq_status bq__fused_setup(bq_plan *p, int e, bq__CUfunction fn) {
  const int64_t most = p->fused.smem_max;
  if (e == BQ__FUSED_STAGED)
    p->fused.staged_smem =
        most > 0 && !bq__drv.cuFuncSetAttribute(fn, BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)most) ? most : 0;
  else if (bq__fused_act_table(&p->desc) &&
           bq__drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&p->fused.tab_blocks[e], fn, bq__fused_shapes[e][0],
                                                               BQ__FUSED_ACT_BYTES))
    p->fused.tab_blocks[e] = 0; /* (then one block an SM) */
  return BQ_SUCCESS;
}

/* RMSNorm (with a residual or not) and the gated activations, then quantize: forward,
   per tensor (static), per token or per group (dynamic), integer or FP8 storage */
BQ__FN bq_status bq__fused_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  const int gated = d->op == BQ_GATED_QUANTIZE;
  bq_status st;
  if (!gated && (st = bq__rule_no_activation(d))) return st;
  if (gated && d->activation == BQ_ACTIVATION_DEFAULT) d->activation = BQ_SILU;
  if ((st = bq__rule_no_pow2(d))) return st;
  if (gated && d->activation != BQ_SILU && d->activation != BQ_GELU_TANH)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "gated_quantize: desc.activation (%d) must be BQ_SILU or BQ_GELU_TANH",
                    (int)d->activation);
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", bq__op_name(d->op),
                    (int)d->rounding);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", bq__op_name(d->op), d->rotation);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation",
                    bq__op_name(d->op), d->random_signs);
  if (bq__fused_mx(d)) { /* a microscaling format: per group (the default here), forward */
    if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_GROUP;
    if (d->granularity < BQ_GRANULARITY_DEFAULT || d->granularity > BQ_PER_BLOCK)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) is not a bq_granularity",
                      bq__op_name(d->op), (int)d->granularity);
    bq__plan_name_std(d, 0, name, name_size);
    if ((st = bq__mx_desc_rules(in, d, name, 1))) return st;
    return BQ_SUCCESS;
  }
  if ((st = bq__rule_enums(d, 0))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TOKEN;
  bq__plan_name_std(d, 1, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name))) return st;
  if (d->scale_type == BQ_UE8M0 || d->scale_type == BQ_UE8M0X4)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.scale_type (%s) is not offered for fused producers", name,
                    bq__dtype_name(d->scale_type));
  if (d->granularity == BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (per_block) is not offered for fused producers: "
                    "use per_token or per_group (dynamic) or per_tensor (static)", name);
  if ((st = bq__scale_rules(d, in, name, 0))) return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not offered for fused producers", name);
  if (d->granularity == BQ_PER_CHANNEL)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (per_channel) is not offered for fused producers: "
                    "use per_token or per_group (dynamic) or per_tensor (static)", name);
  if ((st = bq__rule_asymmetric(d, name))) return st;
  if (d->rotation && d->granularity == BQ_PER_GROUP) /* (dynamic quantize rotates per token only) */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.rotation (1) is offered per token and per tensor for integer "
                    "and FP8 storage (and for the microscaling formats); the producer's values (args.out), "
                    "BQ_HADAMARD, then dynamic quantize give the same bits", name);
  if (d->granularity != BQ_PER_TENSOR) return bq__rule_qrange(d, name, "scales");
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (1) applies to the dynamic granularities "
                    "(per_token, per_group): a static per-tensor scale takes args.zero_point", name);
  d->scale_type = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32; /* the host scalar is in the compute type */
  return BQ_SUCCESS;
}
/* the gated op by its activation */
BQ__FN const char *bq__fused_label(const bq_desc *d) {
  if (d->op == BQ_GATED_QUANTIZE) return d->activation == BQ_GELU_TANH ? "gelu_tanh_mul_quantize" : "silu_mul_quantize";
  return "rmsnorm_quantize";
}
/* the microscaling formats by name in SKUs: the element and scale types */
static const struct bq__fused_format {
  const char *name;
  bq_dtype it, st;
} bq__fused_formats[] = {{"mxfp4", BQ_E2M1, BQ_UE8M0}, {"nvfp4", BQ_E2M1, BQ_E4M3},
                         {"mxfp8_e4m3", BQ_E4M3, BQ_UE8M0}, {"mxfp8_e5m2", BQ_E5M2, BQ_UE8M0}};
#define BQ__FUSED_FORMATS 4
/* the variant: elements per access; static, symmetric or asymmetric scales. A microscaling
   format's: "rmsnorm_quantize.fwd.per_group.bf16.nvfp4.blocked.te.sm_90" (the format, the
   layout, the rule) */
BQ__FN void bq__fused_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  if (bq__fused_mx(d)) {
    const char *fmt = "?";
    for (int i = 0; i < BQ__FUSED_FORMATS; i++)
      if (bq__fused_formats[i].it == d->int_type && bq__fused_formats[i].st == d->scale_type) fmt = bq__fused_formats[i].name;
    snprintf(buf, n, "%s.fwd.%s.%s.%s.%s.%s%s%s.%s", bq__fused_label(d), bq__gran_name(d->granularity),
             bq__dtype_name(d->float_type), fmt, bq__mx_layouts[d->scale_layout], bq__mx_rules[d->scale_rule],
             d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "", tn);
    return;
  }
  char variant[32];
  snprintf(variant, sizeof variant, "vec%d.%s%s%s", bq__fused_vec(d),
           d->granularity == BQ_PER_TENSOR ? "static" : d->asymmetric ? "asym" : "sym",
           d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "");
  bq__sku_std(d, variant, tn, buf, n);
}
/* The microscaling form of a SKU's tokens (bq__fused_sku's, the target's left off); 0 for
   the others, which take the elementwise form */
BQ__FN int bq__fused_from_sku(char *const *tok, int n, bq_desc *d) {
  const int rot = n >= 8 && !strcmp(tok[n - 1], "rot"), sr = n - rot >= 8 && !strcmp(tok[n - rot - 1], "sr");
  if (n - rot - sr != 7 || strcmp(tok[1], "fwd")) return 0;
  int op = -1, fmt = -1, lay = -1, rule = -1;
  for (int i = 0; i < 3; i++) { /* RMSNorm, then the gated op with SiLU and GELU-tanh */
    bq_desc l;
    memset(&l, 0, sizeof l);
    l.op = i ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE;
    l.activation = i == 2 ? BQ_GELU_TANH : i ? BQ_SILU : BQ_ACTIVATION_DEFAULT;
    if (!strcmp(tok[0], bq__fused_label(&l))) op = i;
  }
  for (int i = 0; i < BQ__FUSED_FORMATS; i++)
    if (!strcmp(tok[4], bq__fused_formats[i].name)) fmt = i;
  for (int i = 0; i < 3; i++)
    if (!strcmp(tok[5], bq__mx_layouts[i])) lay = i;
  for (int i = 0; i < BQ__MX_RULES; i++)
    if (!strcmp(tok[6], bq__mx_rules[i])) rule = i;
  if (op < 0 || fmt < 0 || lay < 0 || rule < 0 || strcmp(tok[2], bq__gran_name(BQ_PER_GROUP))) return 0;
  d->op = op ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE;
  d->activation = op == 2 ? BQ_GELU_TANH : op ? BQ_SILU : BQ_ACTIVATION_DEFAULT;
  d->granularity = BQ_PER_GROUP;
  d->int_type = bq__fused_formats[fmt].it;
  d->scale_type = bq__fused_formats[fmt].st;
  d->scale_layout = (bq_scale_layout)lay;
  d->scale_rule = (bq_scale_rule)rule;
  d->rounding = sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d->rotation = rot;
  return bq__dtype_from_name(tok[3], &d->float_type);
}
/* the enumeration's variants: the gated op's two activations, each with its integer and FP8
   kernels (variant 0) and the microscaling formats by layout (1 + format + 4 layout), those by
   rule, rounding and rotation (inner: rule + BQ__MX_RULES (stochastic + 2 rotation)); a
   microscaling variant keeps one desc of the enumeration's other fields (its first values)
   and refuses the rest, which it would only repeat */
BQ__FN void bq__fused_axes(bq_op op, int *outer, int *inner) {
  *outer = (op == BQ_GATED_QUANTIZE ? 2 : 1) * (1 + BQ__FUSED_FORMATS * 3), *inner = BQ__MX_RULES * 4;
}
BQ__FN void bq__fused_vary(bq_desc *in, int outer, int inner) {
  const int acts = in->op == BQ_GATED_QUANTIZE ? 2 : 1, mx = outer / acts;
  if (in->op == BQ_GATED_QUANTIZE) in->activation = outer % acts ? BQ_GELU_TANH : BQ_SILU;
  const int first = in->granularity == BQ_PER_TENSOR && in->int_type == BQ_S8 && in->scale_type == BQ_F32 &&
                    in->scale_layout == BQ_SCALES_ROW_MAJOR && !in->asymmetric && in->direction == BQ_FORWARD;
  if (mx > 0 && !first) {
    in->op = BQ_OP_NONE; /* (a repeat: refused) */
    return;
  }
  if (mx == 0) { /* integer and FP8 storage: rounding to nearest (inner 0) or stochastically (1),
                    with the rotation (2, 3: per tensor and per token) */
    if (inner > 3 || (inner > 1 && in->granularity == BQ_PER_GROUP)) in->op = BQ_OP_NONE;
    in->rounding = inner & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
    in->rotation = inner >> 1 & 1;
    return;
  }
  const struct bq__fused_format *f = &bq__fused_formats[(mx - 1) % BQ__FUSED_FORMATS];
  in->granularity = BQ_PER_GROUP;
  in->int_type = f->it;
  in->scale_type = f->st;
  in->scale_layout = (bq_scale_layout)((mx - 1) / BQ__FUSED_FORMATS);
  in->scale_rule = (bq_scale_rule)(inner % BQ__MX_RULES);
  in->rounding = inner / BQ__MX_RULES & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  in->rotation = inner / BQ__MX_RULES >> 1;
  in->qmin = in->qmax = 0;
}
/* NVFP4's tensor scales (given or computed); stochastic rounding's seed and offset; the
   rotation's block, and the seed of its random signs */
BQ__FN unsigned bq__fused_owns(const bq_desc *d) {
  return (bq__fused_nv(d) ? BQ__OWNS_TENSOR_SCALE : 0) |
         (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* bq_fused_amax is NVFP4's alone */
BQ__FN int bq__fused_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  return e != BQ__FUSED_AMAX || bq__fused_nv(d);
}
BQ__FN const char *bq__fused_guarantee(const bq_desc *d) {
  if (bq__fused_mx(d))
    return "exact: the producer as the contract builds it, its values rounded to T, then microscaling dynamic "
           "quantize (docs/numerics.md, \"Microscaling\"); bit-identical to the CPU reference";
  return d->float_type == BQ_F64
             ? "exact: the producer in f64, each operation rounded to nearest even (exp and tanh as the "
               "contract builds them), its values rounded to T and quantized as the unfused ops would; "
               "bit-identical to the CPU reference of docs/numerics.md"
             : "exact: the producer in f32, each operation rounded to nearest even (no FMA; exp and tanh as "
               "the contract builds them), its values rounded to T and quantized as the unfused ops would; "
               "bit-identical to the CPU reference of docs/numerics.md";
}
/* bq_fused_staged: as much dynamic shared memory as a block may opt into, less its static
   reductions' and a margin (bq__fused_setup gives it) */
BQ__FN bq_status bq__fused_plan_setup(bq_plan *p) {
  p->fused.smem_max = bq__smem_optin(); /* (0: the register entries serve every row) */
  return BQ_SUCCESS;
}
/* RMSNorm's weight and epsilon; a microscaling format's groups (16 for NVFP4, 32 else) and
   NVFP4's tensor scale, given (a pointer past the weight's, never dereferenced); the
   rotation's blocks, 32 */
BQ__FN void bq__fused_typical(const bq_desc *d, bq_args *a, void *ptr) {
  a->norm_weight = d->op == BQ_RMSNORM_QUANTIZE ? ptr : NULL;
  a->eps = d->op == BQ_RMSNORM_QUANTIZE ? 1e-6 : 0.0;
  if (bq__fused_mx(d)) a->group_size = d->scale_type == BQ_E4M3 ? 16 : 32;
  if (bq__fused_nv(d)) a->tensor_scale = (char *)ptr + ((size_t)1 << 33);
  if (d->rotation) a->rotation_block = 32;
}

#define BQ__FUSED_KERNELS                                                                                   \
  {BQ_ENTRY_NAME(BQ_FN_FUSED_C1),  BQ_ENTRY_NAME(BQ_FN_FUSED_C2),   BQ_ENTRY_NAME(BQ_FN_FUSED_C4),                \
   BQ_ENTRY_NAME(BQ_FN_FUSED_C8),  BQ_ENTRY_NAME(BQ_FN_FUSED_LONG), BQ_ENTRY_NAME(BQ_FN_FUSED_STAGED),            \
   BQ_ENTRY_NAME(BQ_FN_FUSED_M4),  BQ_ENTRY_NAME(BQ_FN_FUSED_M8),   BQ_ENTRY_NAME(BQ_FN_FUSED_M4F),               \
   BQ_ENTRY_NAME(BQ_FN_FUSED_M8F), BQ_ENTRY_NAME(BQ_FN_FUSED_M16),  BQ_ENTRY_NAME(BQ_FN_FUSED_C2D),               \
   BQ_ENTRY_NAME(BQ_FN_FUSED_C8D), BQ_ENTRY_NAME(BQ_FN_FUSED_AMAX)}
static const bq__family bq__fused_family = {
  {BQ_RMSNORM_QUANTIZE, BQ_GATED_QUANTIZE}, {"rmsnorm_quantize", "gated_quantize"}, "fused",
  bq__fused_normalize, bq__fused_label, bq__fused_sku, bq__fused_from_sku, bq__fused_axes, bq__fused_vary,
  bq__fused_owns, bq__fused_guarantee, "fused.cu", bq__text_fused_cu, bq__fused_prelude, bq__fused_vec, 0,
  bq__fused_shape, bq__fused_check, bq__fused_workspace, bq__fused_run, bq__fused_has, bq__fused_setup,
  {BQ__FUSED_KERNELS, {NULL}, BQ__FUSED_KERNELS, BQ__FUSED_KERNELS},
  bq__fused_sub, bq__fused_plan_setup, bq__fused_typical, 0};
#undef BQ__FUSED_KERNELS
