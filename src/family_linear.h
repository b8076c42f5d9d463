/* ---- the linear family: int8 GEMM with a dequantizing epilogue -------------------------------- */
#include "../kernels_src/linear_abi.h" /* its entry points, parameter block and flags, as linear.cu compiles them */
#define BQ__GEMM_ENTRIES                                                                  \
  {BQ_ENTRY_NAME(BQ_FN_GEMM_LARGE), BQ_ENTRY_NAME(BQ_FN_GEMV), BQ_ENTRY_NAME(BQ_FN_GEMV32), \
   BQ_ENTRY_NAME(BQ_FN_GEMV64), BQ_ENTRY_NAME(BQ_FN_GEMM_WGMMA)}

/* The linear dispatch table: a row per entry point, by enum. rows: the activation rows a
   weight-streaming pass takes (0: a tile kernel, 128 x 256); up_to: the largest M it
   serves, the smallest such row winning (at these sizes the weight's bytes set the time,
   and tiles would leave most SMs idle); unfilled_up_to: the largest M it serves while the
   large tiles would not fill the SMs once (passes of 64 rows, the weight coming back from
   L2). Past both, the tiles (bq_gemm_wgmma in an sm_90a module). bq__linear_config.
   smem_bound: 1 where its __launch_bounds__ name as many CTAs an SM as the arch's shared
   memory holds of its own (bq__linear_min_blocks), which bq__linear_prelude writes as
   BQ_LB_<ENTRY>; 0: none named. The tiles and bq_gemv are held so; bq_gemv64 to the count
   at its largest M: the bound lets ptxas use the registers that leaves, where left to
   itself it spills. */
typedef struct bq__linear_row { int entry; int64_t rows, up_to, unfilled_up_to; int smem_bound; } bq__linear_row;
static const bq__linear_row bq__linear_table[BQ__GEMM_CONFIGS] = {
  /* entry           rows up_to unfilled_up_to smem_bound */
  {BQ__GEMM_LARGE,    0,   0,   0, 1},
  {BQ__GEMV,         16,  16,   0, 1},
  {BQ__GEMV32,       32,  32,   0, 0},
  {BQ__GEMV64,       64,  64, 256, 1},
  {BQ__GEMM_WGMMA,    0,   0,   0, 1},
};
/* the tiles' pipeline stages, then 256 columns and 128 rows of epilogue parameters
   (BQ_COLS_SMEM, BQ_ROWS_SMEM) */
#define BQ__GEMM_SMEM_LARGE (3 * (128 + 256) * 128 + 256 * 24 + 128 * 16)
#define BQ__GEMM_SMEM_WGMMA (4 * (128 + 256) * 128 + 1024 + 256 * 24 + 128 * 16) /* + alignment to 1024 bytes */
/* weight streaming, by the rows it takes (16, 32 or 64), and the dynamic shared memory of its
   cp.async stages for M rows: 2 to 4 stages of 16 weight rows and min(rows, M) activation
   rows, 576 bytes each, as many as fit in 56 KiB (BQ_GV_SMEM in linear.cu) */
BQ__FN int64_t bq__gemv_rows(int cfg) { return cfg >= 0 && cfg < BQ__GEMM_CONFIGS ? bq__linear_table[cfg].rows : 0; }
BQ__FN unsigned bq__gemv_smem(int cfg, int64_t m) {
  int64_t rows = bq__gemv_rows(cfg), xr = m < rows ? m : rows, stage = (16 + xr) * 576, s = 57344 / stage;
  return (unsigned)((s < 2 ? 2 : s > 4 ? 4 : s) * stage);
}
/* the most any M asks of it (the cuFuncSetAttribute bound) */
BQ__FN unsigned bq__gemv_smem_max(int cfg) {
  unsigned most = 0;
  for (int64_t m = 1; m <= bq__gemv_rows(cfg); m++)
    if (bq__gemv_smem(cfg, m) > most) most = bq__gemv_smem(cfg, m);
  return most;
}

/* the dynamic shared memory an entry point's pipeline takes at most */
BQ__FN int64_t bq__linear_smem(int e) {
  return e == BQ__GEMM_WGMMA ? BQ__GEMM_SMEM_WGMMA : e == BQ__GEMM_LARGE ? BQ__GEMM_SMEM_LARGE : bq__gemv_smem_max(e);
}
/* The launch bounds' CTAs an SM for linear entry point e on arch: as many as the arch's
   shared memory holds (at least 1) where the table's smem_bound says so, else 0 (none) */
BQ__FN int bq__linear_min_blocks(int e, int arch) {
  if (!bq__linear_table[e].smem_bound) return 0;
  int64_t b = bq__arch_smem_sm(arch) / (bq__linear_smem(e) + BQ__SMEM_BLOCK_RESERVED);
  return b > 1 ? (int)b : 1;
}

BQ__FN int bq__linear_vec(const bq_desc *d) { (void)d; return 16; }
/* per-token activation scales are f32 (QuantizedLinear's own) while weight scales are not */
BQ__FN int bq__linear_asf32(const bq_desc *d) { return d->op == BQ_QUANTIZED_LINEAR && d->scale_type != BQ_F32; }
/* BQ_OP: the weight sums, or the GEMM both linear layers share (QuantizedLinear's own work
   is its activations' kernel and run-time flags), named for SmoothQuantLinear */
/* One entry point's launch bounds, BQ_LB_<ENTRY> for entry point bq_<entry>: the block of
   256 threads every linear kernel runs (bq__linear_run), and min_blocks CTAs an SM (0:
   none named; bq__linear_min_blocks). */
BQ__FN void bq__linear_bounds(bq__str *s, const char *entry, int min_blocks) {
  char name[32];
  size_t n = 0;
  for (const char *c = entry + 3; *c && n + 1 < sizeof name; c++) /* past "bq_", upper case */
    name[n++] = *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c;
  name[n] = 0;
  bq__launch_bounds_define(s, name, min_blocks);
}
BQ__FN void bq__linear_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  /* T is the output type, and so are common.cuh's scales (the GEMM reads its own, BQ_WST);
     the q-range is the host's business (the K bound) */
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST %s\n#define BQ_WGMMA %d\n", bq__spec("TYPE", d->out_type),
              bq__spec("TYPE", d->int_type), bq__spec("TYPE", d->out_type), t->arch_a);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_WST %s\n#define BQ_ASF32 %d\n",
              d->op == BQ_LINEAR_WEIGHT_SUMS ? "BQ_OP_LINEAR_WEIGHT_SUMS" : "BQ_OP_SMOOTHQUANT_LINEAR",
              bq__spec("TYPE", d->scale_type), bq__linear_asf32(d));
  /* the weight sums: a module of their own, outside the GEMM table; no minimum */
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS), 0);
    return;
  }
  static const char *const entries[] = BQ__GEMM_ENTRIES;
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    bq__linear_bounds(s, entries[bq__linear_table[i].entry], bq__linear_min_blocks(i, t->arch));
}

/* The largest K whose int32 accumulator cannot overflow: K * max|a| * 128 < 2^31 for
   activations in [qmin, qmax] and s8 weights, and, with zero points (which lie in
   [qmin, qmax]), K * (qmax - qmin) * 128 < 2^31 for acc - azp * wsum. */
BQ__FN int64_t bq__linear_max_k(const bq_desc *d) {
  int64_t amax = d->qmin < 0 ? -(int64_t)d->qmin : d->qmin;
  if (d->qmax > amax) amax = d->qmax;
  if (amax < 1) amax = 1;
  int64_t lim = 0x7fffffff / (amax * 128);
  if (d->asymmetric && d->qmax > d->qmin) {
    int64_t l2 = 0x7fffffff / ((int64_t)(d->qmax - d->qmin) * 128);
    if (l2 < lim) lim = l2;
  }
  return lim;
}

typedef struct bq__linear_view { int64_t m, n, k, lda, ldy; } bq__linear_view;
#define BQ__WSUM_MAX_K ((int64_t)1 << 24)

BQ__FN bq_status bq__linear_view_of(const bq_plan *p, const bq_args *a, bq__linear_view *v) {
  const char *nm = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", nm);
  int wsum = p->desc.op == BQ_LINEAR_WEIGHT_SUMS;
  if (!wsum && (a->rows < 0 || a->rows > 0x7fffffffLL))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) is negative or too large", nm, (long long)a->rows);
  if (a->n < 0 || a->n > 0x7fffffffLL)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.n (N = %lld) is negative or too large", nm, (long long)a->n);
  if (a->cols < 0 || a->cols > BQ__MAX_ELEMS)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) is negative or too large", nm, (long long)a->cols);
  v->m = wsum ? 0 : a->rows;
  v->n = a->n;
  v->k = a->cols;
  if (v->n && v->k > BQ__MAX_ELEMS / v->n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.n (N = %lld) times args.cols (K = %lld) is too large: the "
                    "weight holds more than 2^56 elements", nm, (long long)v->n, (long long)v->k);
  /* the sums: |w| <= 128, so K <= 2^24 keeps every int32 partial sum exact */
  if (wsum && v->k > BQ__WSUM_MAX_K)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) exceeds %lld, the largest K whose int32 "
                    "sums of s8 weights cannot overflow", nm, (long long)v->k, (long long)BQ__WSUM_MAX_K);
  if (wsum) return BQ_SUCCESS;
  int64_t max_k = p->desc.op == BQ_FP8_LINEAR ? BQ__MAX_ELEMS : bq__linear_max_k(&p->desc); /* f32 sums */
  if (v->k > max_k)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) exceeds %lld, the largest K whose int32 "
                    "accumulator cannot overflow for activations in [%d, %d] and s8 weights", nm, (long long)v->k,
                    (long long)max_k, p->desc.qmin, p->desc.qmax);
  v->lda = a->x_row_stride ? a->x_row_stride : v->k;
  v->ldy = a->y_row_stride ? a->y_row_stride : v->n;
  if (v->lda < v->k)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than args.cols (K = %lld)", nm,
                    (long long)a->x_row_stride, (long long)v->k);
  if (v->ldy < v->n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.n (N = %lld)", nm,
                    (long long)a->y_row_stride, (long long)v->n);
  if (v->m && (v->lda > BQ__MAX_ELEMS / v->m || v->ldy > BQ__MAX_ELEMS / v->m))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) times a row stride is too large", nm,
                    (long long)v->m);
  if (((v->m + 127) / 128) * ((v->n + 127) / 128) > 0x7fffffffLL) /* one CTA per tile, a 1-D grid */
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (M = %lld) times args.n (N = %lld) is too large", nm,
                    (long long)v->m, (long long)v->n);
  return BQ_SUCCESS;
}

/* Every rule of one call; the problem's view on success (run uses it, so it validates once). */
BQ__FN bq_status bq__linear_validate(const bq_plan *p, const bq_args *a, bq__linear_view *vp) {
  bq__linear_view v;
  bq_status st = bq__linear_view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  const bq_desc *d = &p->desc;
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    if (v.n == 0) return BQ_SUCCESS;
    if (v.k && (st = bq__check_ptr(p, "args.w", a->w, 1))) return st;
    return bq__check_ptr(p, "args.y", a->y, 4);
  }
  int sq = d->op == BQ_SMOOTHQUANT_LINEAR, per_tensor = sq && d->granularity == BQ_PER_TENSOR;
  if (!d->asymmetric && sq && (per_tensor ? a->zero_point != 0 : a->zero_points != NULL))
    return per_tensor ? bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_point (%d) must be 0: the plan is symmetric "
                                 "(desc.asymmetric = 0)", p->name, (int)a->zero_point)
                      : bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: the plan is "
                                 "symmetric (desc.asymmetric = 0)", p->name, (const void *)a->zero_points);
  if (per_tensor) {
    double c = d->out_type == BQ_F64 ? a->scale : (double)(float)a->scale;
    if (!(isfinite(c) && c > 0))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0 in the compute type",
                      p->name, a->scale);
  }
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  int ts = bq__dtype_size(d->out_type), ss = bq__dtype_size(d->scale_type);
  if ((st = bq__check_ptr(p, "args.y", a->y, ts))) return st;
  if ((st = bq__check_ptr(p, "args.w_scales", a->w_scales, ss))) return st;
  if (a->bias && (st = bq__check_ptr(p, "args.bias", a->bias, ts))) return st;
  if (v.k == 0) return BQ_SUCCESS; /* y = bias (or 0): nothing else is read */
  if ((st = bq__check_ptr(p, "args.x", a->x, sq ? 1 : bq__dtype_size(d->float_type)))) return st;
  if ((st = bq__check_ptr(p, "args.w", a->w, 1))) return st;
  if (sq && !per_tensor && (st = bq__check_ptr(p, "args.scales", a->scales, ss))) return st;
  if (d->asymmetric) {
    if (sq && !per_tensor && (st = bq__check_ptr(p, "args.zero_points", a->zero_points, 4))) return st;
    if ((st = bq__check_ptr(p, "args.w_sums", a->w_sums, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__linear_shape(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  return bq__linear_view_of(p, a, &v);
}
BQ__FN bq_status bq__linear_check(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  return bq__linear_validate(p, a, &v);
}

/* QuantizedLinear's workspace: the int8 activations (rows padded to 16 bytes), their f32
   scales and int32 zero points, each part 256-byte aligned. */
BQ__FN int64_t bq__al256(int64_t x) { return (x + 255) & ~(int64_t)255; }
BQ__FN int64_t bq__linear_lda_ws(int64_t k) { return (k + 15) & ~(int64_t)15; }
BQ__FN size_t bq__linear_workspace(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  if (p->desc.op != BQ_QUANTIZED_LINEAR || !a || a->rows <= 0 || a->n <= 0 || a->cols <= 0) return 0;
  if (bq__linear_view_of(p, a, &v)) return 0;
  return (size_t)(bq__al256(v.m * bq__linear_lda_ws(v.k)) + 2 * bq__al256(v.m * 4));
}

/* QuantizedLinear's activations (int8 and FP8): the held dynamic quantize plan run on x
   into the workspace, rows of bq__linear_lda_ws(K) bytes, then their scales (and zero
   points), each part 256-byte aligned; group: per group's G (0: per token). *q: the call. */
BQ__FN bq_status bq__linear_quantize_x(const bq_plan *p, const bq_args *a, const bq__linear_view *v, void *ws,
                                       int64_t group, void *stream, bq_args *q) {
  const int64_t lda = bq__linear_lda_ws(v->k);
  char *base = (char *)ws;
  memset(q, 0, sizeof *q);
  q->x = a->x;
  q->rows = v->m;
  q->cols = v->k;
  q->x_row_stride = v->lda;
  q->y = base;
  q->y_row_stride = lda;
  q->group_size = group;
  q->out_scales = base + bq__al256(v->m * lda);
  q->out_zero_points = p->desc.asymmetric ? (int32_t *)(base + bq__al256(v->m * lda) + bq__al256(v->m * 4)) : NULL;
  return bq_plan_run(p->sub, q, NULL, 0, stream);
}

/* The entry point for M rows and N columns: the linear dispatch table's choice. */
static int bq__linear_force_config = -1; /* tests: a BQ__GEMM_* / BQ__GEMV* to use where it applies */
BQ__FN int bq__linear_config(const bq_plan *p, int64_t m, int64_t n) {
  int f = bq__linear_force_config;
  if (p->linear.wgmma && f == BQ__GEMM_LARGE) f = BQ__GEMM_WGMMA; /* sm_90a tiles */
  if (f >= 0 && (f != BQ__GEMM_WGMMA || p->linear.wgmma) &&
      (bq__gemv_rows(f) == 0 || m <= bq__gemv_rows(f) || (f == BQ__GEMV64 && m <= 64 * 65535)))
    return f;
  int best = -1;
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    if (m <= bq__linear_table[i].up_to && (best < 0 || bq__linear_table[i].up_to < bq__linear_table[best].up_to))
      best = i;
  if (best >= 0) return bq__linear_table[best].entry;
  int64_t sms = p->num_sms > 0 ? p->num_sms : 1;
  int64_t tl = ((m + 127) / 128) * ((n + 255) / 256);
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++)
    if (m <= bq__linear_table[i].unfilled_up_to && tl < sms) return bq__linear_table[i].entry;
  return p->linear.wgmma ? BQ__GEMM_WGMMA : BQ__GEMM_LARGE;
}

BQ__FN bq_status bq__linear_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__linear_view v;
  bq_status st = bq__linear_validate(p, a, &v);
  if (st) return st;
  const bq_desc *d = &p->desc;
  bq_linear_params k;
  memset(&k, 0, sizeof k);
  k.n = v.n;
  k.k = v.k;
  k.w = (uint64_t)(uintptr_t)a->w;
  if ((uintptr_t)a->w % 16 == 0 && v.k % 16 == 0) k.flags |= BQ_LF_W16;
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    if (v.n == 0) return BQ_SUCCESS;
    k.w_sums = (uint64_t)(uintptr_t)a->y;
    return bq__launch(p, 0, (v.n + 7) / 8, 1, 256, 0, &k, stream);
  }
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  k.m = v.m;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.ldy = v.ldy;
  k.w_scales = (uint64_t)(uintptr_t)a->w_scales;
  k.bias = (uint64_t)(uintptr_t)a->bias;
  k.w_sums = (uint64_t)(uintptr_t)a->w_sums;
  int ts = bq__dtype_size(d->out_type);
  if (a->bias) k.flags |= BQ_LF_BIAS;
  if ((uintptr_t)a->y % (2 * (uintptr_t)ts) == 0 && v.ldy % 2 == 0) k.flags |= BQ_LF_Y2;
  if ((uintptr_t)a->y % (8 * (uintptr_t)ts) == 0 && v.ldy % 8 == 0) k.flags |= BQ_LF_Y8;
  if (v.k == 0) k.flags |= BQ_LF_K0;
  if (d->asymmetric) k.flags |= BQ_LF_ZP;
  if (d->op == BQ_QUANTIZED_LINEAR) {
    k.flags |= BQ_LF_SA_ROW | (d->asymmetric ? BQ_LF_ZP_ROW : 0);
    if (v.k) {
      if ((st = bq__check_workspace(p, ws, ws_bytes, bq__linear_workspace(p, a)))) return st;
      bq_args q;
      if ((st = bq__linear_quantize_x(p, a, &v, ws, 0, stream, &q))) return st;
      k.a = (uint64_t)(uintptr_t)q.y;
      k.lda = q.y_row_stride;
      k.a_scales = (uint64_t)(uintptr_t)q.out_scales;
      k.a_zps = (uint64_t)(uintptr_t)q.out_zero_points;
      k.flags |= BQ_LF_A16;
    }
  } else {
    k.a = (uint64_t)(uintptr_t)a->x;
    k.lda = v.lda;
    if (k.a % 16 == 0 && v.lda % 16 == 0) k.flags |= BQ_LF_A16;
    if (d->granularity == BQ_PER_TOKEN) {
      k.flags |= BQ_LF_SA_ROW | (d->asymmetric ? BQ_LF_ZP_ROW : 0);
      k.a_scales = (uint64_t)(uintptr_t)a->scales;
      k.a_zps = (uint64_t)(uintptr_t)a->zero_points;
    } else {
      k.a_scale = d->out_type == BQ_F64 ? a->scale : (double)(float)a->scale;
      k.a_zp = a->zero_point;
    }
  }
  /* K == 0: y = bias; no activation scale, zero point or weight sum exists to be read */
  if (v.k == 0) k.flags &= ~(BQ_LF_SA_ROW | BQ_LF_ZP | BQ_LF_ZP_ROW);
  int cfg = bq__linear_config(p, v.m, v.n);
  if (bq__gemv_rows(cfg)) {
    /* QuantizedLinear: the weight streams while the activations' kernel runs (p->linear.pdl) */
    int64_t rows = bq__gemv_rows(cfg);
    int pdl = d->op == BQ_QUANTIZED_LINEAR && v.k && p->linear.pdl;
    if (pdl) k.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, cfg, (v.n + 15) / 16, (v.m + rows - 1) / rows, 256,
                                                     bq__gemv_smem(cfg, v.m), &k, stream);
  }
  k.tiles_m = (int32_t)((v.m + 127) / 128); /* 128 x 256 tiles, both kinds */
  k.tiles_n = (int32_t)((v.n + 255) / 256);
  return bq__launch(p, cfg, (int64_t)k.tiles_m * k.tiles_n, 1, 256,
                       cfg == BQ__GEMM_LARGE ? BQ__GEMM_SMEM_LARGE : BQ__GEMM_SMEM_WGMMA, &k, stream);
}

/* The dynamic shared memory each GEMM entry point's pipeline takes (over 48 KiB: an opt-in,
   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) */
BQ__FN bq_status bq__linear_setup(bq_plan *p, int e, bq__CUfunction fn) {
  (void)p;
  const int smem = (int)bq__linear_smem(e);
  bq__CUresult r = bq__drv.cuFuncSetAttribute(fn, 8, smem);
  return r ? bq__cu_fail(r, "cuFuncSetAttribute (dynamic shared memory of the GEMM kernels)") : BQ_SUCCESS;
}

/* An sm_90a module's GEMM tiles are bq_gemm_wgmma's; elsewhere bq_gemm_large's (the other
   is an empty entry point that traps) */
BQ__FN int bq__linear_has(const bq_desc *d, const bq__target *t, int e) {
  (void)d;
  if (e == BQ__GEMM_LARGE) return !t->arch_a;
  if (e == BQ__GEMM_WGMMA) return t->arch_a;
  return 1;
}

/* QuantizedLinear and SmoothQuantLinear: int8 activations (quantized per token by the
   layer, or given), s8 weights, an output type of float */
BQ__FN void bq__linear_name(const bq_desc *d, char *buf, size_t n) {
  snprintf(buf, n, "%s%s%s", bq__op_name(d->op),
           d->op == BQ_SMOOTHQUANT_LINEAR ? (d->granularity == BQ_PER_TOKEN ? "_per_token" : "_per_tensor") : "",
           d->asymmetric ? "_asymmetric" : "");
}
BQ__FN bq_status bq__linear_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  const int ql = d->op == BQ_QUANTIZED_LINEAR;
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 0))) return st;
  if (ql && d->granularity == BQ_PER_TENSOR)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "quantized_linear: desc.granularity (per_tensor) is not offered: "
                    "activations are quantized per token (leave it BQ_GRANULARITY_DEFAULT or BQ_PER_TOKEN)");
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = ql ? BQ_PER_TOKEN : BQ_PER_TENSOR;
  bq__linear_name(d, name, name_size);
  if (!ql) { /* x is int8: the float type is the output's */
    if (d->out_type == BQ_DTYPE_DEFAULT && d->float_type == BQ_DTYPE_DEFAULT)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (0, default) names the output type and "
                      "desc.float_type is not set either", name);
    if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
    if (!bq__is_float(d->out_type))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                      name, (int)d->out_type, bq__dtype_name(d->out_type));
    d->float_type = d->out_type; /* equal layers, equal descs and SKUs */
  }
  if ((st = bq__rule_types(d, name, 0))) return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (backward) is not offered for linear layers", name);
  if (ql && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (%s) is not offered: activations are "
                    "quantized per token", name, bq__gran_name(d->granularity));
  if (!ql && d->granularity != BQ_PER_TENSOR && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.granularity (%s) must be per_tensor or per_token", name,
                    bq__gran_name(d->granularity));
  if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
  if (!bq__is_float(d->out_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16",
                    name, (int)d->out_type, bq__dtype_name(d->out_type));
  /* scales convert exactly to C: f64 scales only when C is f64 */
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  if (!bq__is_float(d->scale_type) || (d->scale_type == BQ_F64 && d->out_type != BQ_F64))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16 "
                    "(or BQ_F64 with an f64 out_type)", name, (int)in->scale_type, bq__dtype_name(d->scale_type));
  if ((st = bq__rule_asymmetric(d, name))) return st;
  return ql ? bq__rule_qrange(d, name, "activations") : BQ_SUCCESS;
}
/* QuantizedLinear and SmoothQuantLinear share the GEMM: what differs is run-time */
BQ__FN void bq__linear_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  snprintf(buf, n, "linear_gemm.a_%s.w_s8.out_%s.scale_%s.ascale_%s.mma_m16n8k32%s.%s", bq__dtype_name(d->int_type),
           bq__dtype_name(d->out_type), bq__dtype_name(d->scale_type),
           bq__linear_asf32(d) ? "f32" : bq__dtype_name(d->scale_type), t->arch_a ? "+wgmma_m64n256k32" : "",
           tn);
}
/* A GEMM with f32 activation scales and other weight scales comes back as QuantizedLinear
   (whose SKU names its GEMM alone); every other GEMM as SmoothQuantLinear per token */
BQ__FN int bq__linear_from_sku(char *const *tok, int n, bq_desc *d) {
  bq_dtype a[4] = {BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT, BQ_DTYPE_DEFAULT};
  if (n != 7 || strcmp(tok[0], "linear_gemm")) return 0;
  int ok = !strncmp(tok[1], "a_", 2) && bq__dtype_from_name(tok[1] + 2, &a[0]) && !strncmp(tok[3], "out_", 4) &&
           bq__dtype_from_name(tok[3] + 4, &a[1]) && !strncmp(tok[4], "scale_", 6) &&
           bq__dtype_from_name(tok[4] + 6, &a[2]) && !strncmp(tok[5], "ascale_", 7) &&
           bq__dtype_from_name(tok[5] + 7, &a[3]);
  d->op = ok && a[3] == BQ_F32 && a[2] != BQ_F32 ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
  d->granularity = BQ_PER_TOKEN;
  if (ok) d->int_type = a[0], d->out_type = d->float_type = a[1], d->scale_type = a[2];
  return ok;
}
/* the enumeration's variants: the output types */
BQ__FN void bq__linear_axes(bq_op op, int *outer, int *inner) {
  (void)op;
  *outer = 1, *inner = 4;
}
BQ__FN void bq__linear_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  (void)outer;
  in->out_type = fts[inner];
}
BQ__FN const char *bq__linear_guarantee(const bq_desc *d) {
  return d->out_type == BQ_F64
             ? "int32 accumulation (exact, tensor cores); epilogue in f64, each step rounded to nearest even "
               "(acc * sa * sw + bias, no FMA); bit-identical to the CPU reference of docs/numerics.md"
             : "int32 accumulation (exact, tensor cores); epilogue in f32, each step rounded to nearest even "
               "(acc * sa * sw + bias, no FMA), RNE to the output type; bit-identical to the CPU reference of "
               "docs/numerics.md";
}
/* QuantizedLinear's activations: dynamic quantize per token with f32 scales */
BQ__FN int bq__linear_activation_desc(const bq_desc *d, bq_desc *q) {
  if (d->op != BQ_QUANTIZED_LINEAR) return 0;
  memset(q, 0, sizeof *q);
  q->op = BQ_DYNAMIC_QUANTIZE;
  q->granularity = BQ_PER_TOKEN;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->qmin = d->qmin;
  q->qmax = d->qmax;
  q->scale_type = BQ_F32;
  q->device = d->device;
  q->asymmetric = d->asymmetric;
  return 1;
}
/* QuantizedLinear's weight streaming overlaps its activations' kernel (programmatic
   dependent launch) where the module is built for sm_90 or later (its griddepcontrol
   instructions) and the driver is 12.3 or newer (programmatic edges in captured graphs),
   unless BARACUDA_QUANT_PDL=0. */
BQ__FN int bq__pdl_wanted(const bq__target *t) {
  return t->arch >= 90 && bq__drv.version >= 12030 && bq__env_bool("BARACUDA_QUANT_PDL", 1);
}
BQ__FN bq_status bq__linear_plan_setup(bq_plan *p) {
  p->linear.wgmma = p->target.arch_a;
  p->linear.pdl = p->desc.op == BQ_QUANTIZED_LINEAR && bq__pdl_wanted(&p->target);
  return BQ_SUCCESS;
}

static const bq__family bq__linear_family = {
  {BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR}, {"quantized_linear", "smoothquant_linear"}, "linear",
  bq__linear_normalize, NULL, bq__linear_sku, bq__linear_from_sku, bq__linear_axes, bq__linear_vary, NULL,
  bq__linear_guarantee,
  "linear.cu", bq__text_linear_cu, bq__linear_prelude, bq__linear_vec, 1, bq__linear_shape, bq__linear_check,
  bq__linear_workspace, bq__linear_run, bq__linear_has, bq__linear_setup,
  {BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES, BQ__GEMM_ENTRIES},
  bq__linear_activation_desc, bq__linear_plan_setup, NULL, 0};

/* ---- the weight sums: int32 sums of the s8 weight rows (asymmetric activations' term) ---- */
/* Reads s8 weights, writes int32: no float type; every field but op left 0 (default), or
   its one meaningful value (s8 weights in their full range, int32 sums) */
BQ__FN bq_status bq__weight_sums_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 0))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__copy(name, name_size, "linear_weight_sums");
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) must be BQ_FORWARD", name, (int)d->direction);
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  bq_desc z; /* the normalized desc, which is accepted again as it is */
  memset(&z, 0, sizeof z);
  z.op = d->op;
  z.granularity = BQ_PER_TENSOR;
  z.device = d->device;
  z.float_type = BQ_F32;
  z.int_type = BQ_S8;
  z.qmin = -128;
  z.qmax = 127;
  z.scale_type = BQ_F32;
  z.out_type = BQ_S32;
  if (d->granularity == z.granularity && d->float_type == z.float_type && d->int_type == z.int_type &&
      d->qmin == z.qmin && d->qmax == z.qmax && d->scale_type == z.scale_type && d->out_type == z.out_type &&
      !d->asymmetric) {
    *d = z;
    return BQ_SUCCESS;
  }
  if (in->granularity != BQ_GRANULARITY_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) must be left 0: one sum per weight row",
                    name, (int)in->granularity);
  if (d->float_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be left BQ_DTYPE_DEFAULT: the "
                    "sums read no float data", name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type != BQ_DTYPE_DEFAULT && d->int_type != BQ_S8)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_S8 (the weights) or default",
                    name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->out_type != BQ_DTYPE_DEFAULT && d->out_type != BQ_S32)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_S32 (the sums) or default",
                    name, (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be left BQ_DTYPE_DEFAULT: the "
                    "sums use no scales", name, (int)d->scale_type, bq__dtype_name(d->scale_type));
  if (!(d->qmin == 0 && d->qmax == 0) && !(d->qmin == -128 && d->qmax == 127))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be both 0 or the s8 "
                    "range [-128, 127]", name, d->qmin, d->qmax);
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: the sums serve both kinds of "
                    "layer", name, d->asymmetric);
  *d = z;
  return BQ_SUCCESS;
}
BQ__FN void bq__weight_sums_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)d, (void)t;
  snprintf(buf, n, "linear_weight_sums.s8.dp4a.%s", tn);
}
BQ__FN int bq__weight_sums_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 3 || strcmp(tok[0], "linear_weight_sums")) return 0;
  d->op = BQ_LINEAR_WEIGHT_SUMS;
  return 1;
}
/* the enumeration: its one desc, whatever the other fields (its validation refuses any
   field but op) */
BQ__FN void bq__weight_sums_vary(bq_desc *in, int outer, int inner) {
  (void)outer, (void)inner;
  memset(in, 0, sizeof *in);
  in->op = BQ_LINEAR_WEIGHT_SUMS;
}
BQ__FN const char *bq__weight_sums_guarantee(const bq_desc *d) {
  (void)d;
  return "exact: int32 sums of the s8 weights (K <= 2^24)";
}

static const bq__family bq__weight_sums_family = {
  {BQ_LINEAR_WEIGHT_SUMS}, {"linear_weight_sums"}, "linear",
  bq__weight_sums_normalize, NULL, bq__weight_sums_sku, bq__weight_sums_from_sku, bq__linear_axes,
  bq__weight_sums_vary, NULL, bq__weight_sums_guarantee,
  "linear.cu", bq__text_linear_cu, bq__linear_prelude, bq__linear_vec, 0, bq__linear_shape, bq__linear_check,
  bq__no_workspace, bq__linear_run, NULL, NULL,
  {{BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}, {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}, {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)},
   {BQ_ENTRY_NAME(BQ_FN_WEIGHT_SUMS)}},
  NULL, NULL, NULL, 0};

/* ---- FP8 linear layers: FP8 activations x e4m3 weights, f32 accumulators ------------------- */
/* One module, linear.cu with BQ_OP_FP8_LINEAR. In an sm_90a module: M <= 64 takes
   bq_fp8_gemv (weight streaming: passes of 16 rows, 64 output columns a CTA, which fills
   the GPU where tiles of 128 rows would leave most SMs idle), larger M 128 x 128 tiles:
   bq_fp8_tma's (192 rows) where x and w are 16-byte aligned (rows included: the tensor
   maps' rule), whose copies a producer warp issues, else bq_fp8_wgmma's, whose every
   thread copies;
   all form each output from the same 128-element partial sums in the
   same order, so a row's result does not depend on M. Elsewhere (sm_89, sm_90 without
   wgmma) bq_fp8_gemm's 128 x 128 mma.sync tiles take every M, on the same 128-element
   blocks. Tensorwise, rowwise and blockwise scales are run-time flags of one SKU. */
#define BQ__FP8_ENTRIES                                                                                            \
  {BQ_ENTRY_NAME(BQ_FN_FP8_GEMM), BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA), BQ_ENTRY_NAME(BQ_FN_FP8_GEMV),                      \
   BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA_BLK), BQ_ENTRY_NAME(BQ_FN_FP8_GEMV_BLK), BQ_ENTRY_NAME(BQ_FN_FP8_TMA),              \
   BQ_ENTRY_NAME(BQ_FN_FP8_TMA_BLK)}
#define BQ__FP8_GEMV_ROWS 64 /* the largest M bq_fp8_gemv takes */
/* bq_fp8_wgmma: BQ_F8_STAGES (5) stages of 128 + 128 rows of 128 bytes; bq_fp8_gemv:
   BQ_F8V_STAGES (8) of 16 + 64; each then the 1024-byte alignment and the columns' and rows'
   parameters; bq_fp8_gemm: BQ_F8G_STAGES (4) of 128 + 128 and the parameters. The blockwise
   entries add each stage's scales (BQ_F8_SCALES, BQ_F8V_SCALES floats). bq_fp8_tma:
   BQ_F8T_STAGES (5) of 192 + 128, the alignment, two mbarriers a stage (blockwise, then the
   consumers' scale rings: BQ_F8T_AHEAD (4) + 1 slots of 3 x 384 floats). */
#define BQ__FP8_SMEM_WGMMA (5 * (128 + 128) * 128 + 1024 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_GEMV (8 * (16 + 64) * 128 + 1024 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_GEMM (4 * (128 + 128) * 128 + 256 * 24 + 128 * 16)
#define BQ__FP8_SMEM_TMA (5 * (192 + 128) * 128 + 1024 + 2 * 5 * 8)
#define BQ__FP8_TMA_THREADS 512 /* three consumer warpgroups and the producer's */
#define BQ__FP8_TMA_ROWS 192    /* a tile's rows: 64 a consumer warpgroup */
BQ__FN int64_t bq__fp8_smem(int e) {
  switch (e) {
  case BQ__FP8_WGMMA: return BQ__FP8_SMEM_WGMMA;
  case BQ__FP8_GEMV: return BQ__FP8_SMEM_GEMV;
  case BQ__FP8_WGMMA_BLK: return BQ__FP8_SMEM_WGMMA + 5 * 144 * 4;
  case BQ__FP8_GEMV_BLK: return BQ__FP8_SMEM_GEMV + 8 * 20 * 4;
  case BQ__FP8_TMA: return BQ__FP8_SMEM_TMA;
  case BQ__FP8_TMA_BLK: return BQ__FP8_SMEM_TMA + (4 + 1) * 3 * 384 * 4; /* and linear.cu's scale rings */
  default: return BQ__FP8_SMEM_GEMM;
  }
}
/* tests: BQ__FP8_WGMMA, BQ__FP8_TMA (where x and w allow it) or BQ__FP8_GEMV (M <= 64), where
   the module has it */
static int bq__fp8_force_config = -1;
static int bq__fp8_force_pdl; /* tests: FP8_LINEAR's weight streaming takes QuantizedLinear's prologue */
/* Whether the TMA tiles' tensor maps can describe x [M, K] and w [N, K] (row strides lda and
   K bytes): cuTensorMapEncodeTiled takes dimensions up to 2^32 and strides under 2^40; a
   larger problem takes the cp.async tiles */
BQ__FN int bq__fp8_tma_fits(const bq__linear_view *v) {
  const int64_t dim = (int64_t)1 << 32, stride = (int64_t)1 << 40;
  return v->k <= dim && v->m <= dim && v->n <= dim && v->lda < stride; /* (w's stride is K) */
}
/* the entry point for M rows; aligned: x and w (and their rows) on the 16-byte grid, and
   within the tensor maps' limits */
BQ__FN int bq__fp8_config(const bq_plan *p, int64_t m, int aligned) {
  if (!p->linear.wgmma) return BQ__FP8_GEMM;
  int e = m <= BQ__FP8_GEMV_ROWS ? BQ__FP8_GEMV : aligned ? BQ__FP8_TMA : BQ__FP8_WGMMA;
  const int f = bq__fp8_force_config;
  if (f == BQ__FP8_WGMMA || (f == BQ__FP8_GEMV && m <= BQ__FP8_GEMV_ROWS)) e = f;
  if (f == BQ__FP8_TMA) e = aligned ? BQ__FP8_TMA : BQ__FP8_WGMMA; /* the tiles, the TMA's where they can */
  /* blockwise: the same tiles with the blocks' scales, the cp.async tiles unless the tests
     force the TMA's (docs/design.md says why) */
  if (p->desc.granularity == BQ_PER_BLOCK)
    e = e == BQ__FP8_GEMV ? BQ__FP8_GEMV_BLK : e == BQ__FP8_TMA && f == BQ__FP8_TMA ? BQ__FP8_TMA_BLK : BQ__FP8_WGMMA_BLK;
  return e;
}
/* bq_fp8_tma's grid: a CTA a tile, or (persistent) at most a CTA an SM, each taking every
   gridDim-th tile; tests cap it to give a CTA several tiles */
#define BQ__FP8_TMA_PERSISTENT 1
static int64_t bq__fp8_tma_cap; /* tests: at most this many CTAs (0: the rule) */
BQ__FN int64_t bq__fp8_tma_blocks(const bq_plan *p, int64_t tiles) {
  int64_t b = tiles;
  if (BQ__FP8_TMA_PERSISTENT && p->num_sms > 0 && b > p->num_sms) b = p->num_sms;
  if (bq__fp8_tma_cap > 0 && b > bq__fp8_tma_cap) b = bq__fp8_tma_cap;
  return b;
}
/* A CUtensorMap of the rows x k bytes at base (row stride ld bytes, 16-byte aligned) in
   boxes of box_rows x 128 bytes, 128-byte swizzle, zeros past the edges (the fill is 0) */
BQ__FN bq_status bq__fp8_tensor_map(const bq_plan *p, bq_u64 map[16], uint64_t base, int64_t rows, int64_t k,
                                    int64_t ld, unsigned box_rows) {
  const unsigned long long dims[2] = {(unsigned long long)k, (unsigned long long)rows}, strides[1] = {(unsigned long long)ld};
  const unsigned box[2] = {128, box_rows}, estrides[2] = {1, 1};
  /* CU_TENSOR_MAP_DATA_TYPE_UINT8 0, INTERLEAVE_NONE 0, SWIZZLE_128B 3, L2_PROMOTION_L2_256B 3, FLOAT_OOB_FILL_NONE 0 */
  bq__CUresult r = bq__drv.cuTensorMapEncodeTiled(map, 0, 2, (void *)(uintptr_t)base, dims, strides, box, estrides, 0, 3,
                                                  3, 0);
  if (!r) return BQ_SUCCESS;
  char what[160];
  snprintf(what, sizeof what, "cuTensorMapEncodeTiled (%s: %lld rows of %lld bytes, %lld bytes apart)", p->name,
           (long long)rows, (long long)k, (long long)ld);
  return bq__cu_fail(r, what);
}

BQ__FN void bq__fp8_linear_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (0)\n#define BQ_QMAX (0)\n"
              "#define BQ_ST %s\n#define BQ_WGMMA %d\n#define BQ_OP BQ_OP_FP8_LINEAR\n#define BQ_WST BQ_TYPE_F32\n"
              "#define BQ_ASF32 0\n", bq__spec("TYPE", d->out_type), bq__spec("TYPE", d->int_type),
              bq__spec("TYPE", d->out_type), t->arch_a);
  /* one CTA an SM: the accumulators take most registers, the stages most shared memory */
  bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_FP8_GEMM), 1);
  bq__linear_bounds(s, BQ_ENTRY_NAME(BQ_FN_FP8_WGMMA), 1);
}

/* Blockwise: args.group_size, 0 or the one group size there is */
BQ__FN bq_status bq__fp8_group_rule(const bq_plan *p, const bq_args *a) {
  if (a->group_size != 0 && a->group_size != 128)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be 128 or 0: blockwise scales are "
                    "1 x 128 activation groups and 128 x 128 weight blocks", p->name, (long long)a->group_size);
  return BQ_SUCCESS;
}
/* Blockwise: the activation scales' leading dimension (args.group_row_stride, 0 meaning
   ceil(K / 128) row-major, M rounded up to 4 MN-major, the quantizers' defaults) */
BQ__FN bq_status bq__fp8_block_lds(const bq_plan *p, const bq_args *a, const bq__linear_view *v, int64_t *lds) {
  const int mn = p->desc.scale_layout == BQ_SCALES_MN_MAJOR;
  const int64_t kb = (v->k + 127) / 128, least = mn ? v->m : kb;
  bq_status st = bq__fp8_group_rule(p, a);
  if (st) return st;
  if (a->group_row_stride < 0 || (a->group_row_stride > 0 && a->group_row_stride < least))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0 or at least %s (%lld)",
                    p->name, (long long)a->group_row_stride, mn ? "M (MN-major activation scales)" :
                    "ceil(K / 128) (row-major activation scales)", (long long)least);
  *lds = a->group_row_stride ? a->group_row_stride : mn ? (v->m + 3) / 4 * 4 : kb;
  return BQ_SUCCESS;
}
/* FP8 QuantizedLinear's own rules: blockwise quantizes x in groups of 128 along K, and the
   activation scales are the layer's (in the workspace), so args.group_row_stride is 0 */
BQ__FN bq_status bq__fp8_ql_rules(const bq_plan *p, const bq_args *a, const bq__linear_view *v) {
  if (p->desc.granularity == BQ_PER_BLOCK && v->k % 128)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (K = %lld) must be a multiple of 128: the activations "
                    "are quantized in groups of 128 along K", p->name, (long long)v->k);
  bq_status st;
  if (p->desc.granularity == BQ_PER_BLOCK && (st = bq__fp8_group_rule(p, a))) return st;
  if (a->group_row_stride != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) must be 0: the activations' scales "
                    "are the layer's own, in the workspace", p->name, (long long)a->group_row_stride);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__fp8_linear_validate(const bq_plan *p, const bq_args *a, bq__linear_view *vp, int64_t *lds) {
  const int ql = p->desc.op == BQ_FP8_QUANTIZED_LINEAR;
  bq__linear_view v;
  bq_status st = bq__linear_view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  *lds = 0;
  if (ql && (st = bq__fp8_ql_rules(p, a, &v))) return st;
  if (!ql && p->desc.granularity == BQ_PER_BLOCK && (st = bq__fp8_block_lds(p, a, &v, lds))) return st;
  if (v.m == 0 || v.n == 0) return BQ_SUCCESS;
  int ts = bq__dtype_size(p->desc.out_type);
  if ((st = bq__check_ptr(p, "args.y", a->y, ts))) return st;
  if (!ql && (st = bq__check_ptr(p, "args.scales", a->scales, 4))) return st;
  if ((st = bq__check_ptr(p, "args.w_scales", a->w_scales, 4))) return st;
  if (a->bias && (st = bq__check_ptr(p, "args.bias", a->bias, ts))) return st;
  if (v.k == 0) return BQ_SUCCESS; /* y = bias (or 0) */
  if ((st = bq__check_ptr(p, "args.x", a->x, ql ? bq__dtype_size(p->desc.float_type) : 1))) return st;
  return bq__check_ptr(p, "args.w", a->w, 1);
}
/* FP8 QuantizedLinear's workspace: the FP8 activations (rows padded to 16 bytes), then
   their f32 scales (per token [M], blockwise [M][K / 128]), each part 256-byte aligned */
BQ__FN size_t bq__fp8_linear_workspace(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  if (p->desc.op != BQ_FP8_QUANTIZED_LINEAR || !a || a->rows <= 0 || a->n <= 0 || a->cols <= 0) return 0;
  if (bq__linear_view_of(p, a, &v)) return 0;
  const int64_t scales = p->desc.granularity == BQ_PER_BLOCK ? v.m * ((v.k + 127) / 128) : v.m;
  return (size_t)(bq__al256(v.m * bq__linear_lda_ws(v.k)) + bq__al256(scales * 4));
}
BQ__FN bq_status bq__fp8_linear_check(const bq_plan *p, const bq_args *a) {
  bq__linear_view v;
  int64_t lds;
  return bq__fp8_linear_validate(p, a, &v, &lds);
}

BQ__FN bq_status bq__fp8_linear_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws, (void)ws_bytes;
  bq__linear_view v;
  int64_t lds;
  bq_status st = bq__fp8_linear_validate(p, a, &v, &lds);
  if (st || v.m == 0 || v.n == 0) return st;
  bq_linear_params k;
  memset(&k, 0, sizeof k);
  const int ts = bq__dtype_size(p->desc.out_type);
  k.m = v.m, k.n = v.n, k.k = v.k, k.lda = v.lda, k.ldy = v.ldy;
  k.a = (uint64_t)(uintptr_t)a->x;
  k.w = (uint64_t)(uintptr_t)a->w;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.a_scales = (uint64_t)(uintptr_t)a->scales;
  k.w_scales = (uint64_t)(uintptr_t)a->w_scales;
  k.bias = (uint64_t)(uintptr_t)a->bias;
  const int ql = p->desc.op == BQ_FP8_QUANTIZED_LINEAR;
  if (ql && v.k) { /* x quantized into the workspace (per token, or groups of 128), read from there */
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__fp8_linear_workspace(p, a)))) return st;
    const int blk = p->desc.granularity == BQ_PER_BLOCK;
    bq_args q;
    if ((st = bq__linear_quantize_x(p, a, &v, ws, blk ? 128 : 0, stream, &q))) return st;
    if (blk) lds = v.k / 128; /* row-major [M][K / 128] */
    k.a = (uint64_t)(uintptr_t)q.y;
    k.lda = v.lda = q.y_row_stride;
    k.a_scales = (uint64_t)(uintptr_t)q.out_scales;
  }
  if (p->desc.granularity == BQ_PER_TOKEN) k.flags |= BQ_LF_SA_ROW | BQ_LF_SW_ROW;
  if (p->desc.granularity == BQ_PER_BLOCK) k.flags |= BQ_LF_BLOCK;
  if (p->desc.scale_layout == BQ_SCALES_MN_MAJOR) k.flags |= BQ_LF_SA_MN;
  k.w_sums = (uint64_t)lds; /* (the activation scales' leading dimension: linear_abi.h) */
  if (a->bias) k.flags |= BQ_LF_BIAS;
  if (v.k == 0) k.flags |= BQ_LF_K0;
  if (k.a % 16 == 0 && v.lda % 16 == 0) k.flags |= BQ_LF_A16;
  if ((uintptr_t)a->w % 16 == 0 && v.k % 16 == 0) k.flags |= BQ_LF_W16;
  if ((uintptr_t)a->y % (2 * (uintptr_t)ts) == 0 && v.ldy % 2 == 0) k.flags |= BQ_LF_Y2;
  if ((uintptr_t)a->y % (8 * (uintptr_t)ts) == 0 && v.ldy % 8 == 0) k.flags |= BQ_LF_Y8;
  const int tma_ok = (k.flags & BQ_LF_A16) && (k.flags & BQ_LF_W16) && v.k && bq__fp8_tma_fits(&v);
  const int e = bq__fp8_config(p, v.m, tma_ok);
  /* FP8 QuantizedLinear: the weight streaming and the TMA tiles copy weights while the
     activations' kernel runs */
  const int pdl = (ql || bq__fp8_force_pdl) && v.k && p->linear.pdl;
  if (e == BQ__FP8_GEMV || e == BQ__FP8_GEMV_BLK) {
    if (pdl) k.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, e, (v.n + 63) / 64, (v.m + 15) / 16, 128,
                                                     (unsigned)bq__fp8_smem(e), &k, stream);
  }
  /* tiles of 128 columns, each in one weight block; 128 rows, the TMA's BQ__FP8_TMA_ROWS */
  const int tma = e == BQ__FP8_TMA || e == BQ__FP8_TMA_BLK, bm = tma ? BQ__FP8_TMA_ROWS : 128;
  k.tiles_m = (int32_t)((v.m + bm - 1) / bm);
  k.tiles_n = (int32_t)((v.n + 127) / 128);
  if (tma) {
    bq_fp8_tma_params t;
    memset(&t, 0, sizeof t);
    t.p = k;
    if ((st = bq__fp8_tensor_map(p, t.tmap_a, k.a, v.m, v.k, v.lda, BQ__FP8_TMA_ROWS)) ||
        (st = bq__fp8_tensor_map(p, t.tmap_w, k.w, v.n, v.k, v.k, 128)))
      return st;
    if (pdl) t.p.flags |= BQ_LF_PDL;
    return (pdl ? bq__launch_overlapped : bq__launch)(p, e, bq__fp8_tma_blocks(p, (int64_t)k.tiles_m * k.tiles_n), 1,
                                                     BQ__FP8_TMA_THREADS, (unsigned)bq__fp8_smem(e), &t, stream);
  }
  return bq__launch(p, e, (int64_t)k.tiles_m * k.tiles_n, 1, 256, (unsigned)bq__fp8_smem(e), &k, stream);
}
BQ__FN bq_status bq__fp8_linear_setup(bq_plan *p, int e, bq__CUfunction fn) {
  (void)p;
  bq__CUresult r = bq__drv.cuFuncSetAttribute(fn, 8, (int)bq__fp8_smem(e));
  return r ? bq__cu_fail(r, "cuFuncSetAttribute (dynamic shared memory of the FP8 GEMM tiles)") : BQ_SUCCESS;
}
BQ__FN int bq__fp8_linear_has(const bq_desc *d, const bq__target *t, int e) {
  (void)d;
  return e == BQ__FP8_GEMM ? !t->arch_a : t->arch_a;
}

BQ__FN bq_status bq__fp8_linear_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  const int ql = d->op == BQ_FP8_QUANTIZED_LINEAR;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = ql ? BQ_PER_TOKEN : BQ_PER_TENSOR;
  snprintf(name, name_size, "%s_%s", ql ? "fp8_quantized_linear" : "fp8_linear",
           d->granularity == BQ_PER_TOKEN   ? "rowwise"
           : d->granularity == BQ_PER_BLOCK ? "blockwise"
                                            : "tensorwise");
  if (ql && d->granularity != BQ_PER_TOKEN && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "fp8_quantized_linear: desc.granularity (%s) is not offered: "
                    "BQ_PER_TOKEN (activations quantized per token, weight scales per channel) or BQ_PER_BLOCK "
                    "(1 x 128 activation groups x 128 x 128 weight blocks)", bq__gran_name(d->granularity));
  if (ql && d->scale_layout != BQ_SCALES_ROW_MAJOR)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (MN-major) must be left 0: the activations' "
                    "scales are the layer's own", name);
  if (d->granularity != BQ_PER_TENSOR && d->granularity != BQ_PER_TOKEN && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "fp8_linear: desc.granularity (%s) is not offered: BQ_PER_TENSOR "
                    "(tensorwise), BQ_PER_TOKEN (rowwise: per token x per channel) or BQ_PER_BLOCK (blockwise: "
                    "1 x 128 activation groups x 128 x 128 weight blocks)", bq__gran_name(d->granularity));
  if (d->scale_layout == BQ_SCALES_MN_MAJOR && d->granularity != BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (MN-major) applies to blockwise activation "
                    "scales only", name);
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) must be BQ_FORWARD", name, (int)d->direction);
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_E4M3;
  if (d->int_type != BQ_E4M3 && d->int_type != BQ_E5M2)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_E4M3 or BQ_E5M2 (the "
                    "activations; the weights are e4m3)", name, (int)d->int_type, bq__dtype_name(d->int_type));
  if (d->qmin != 0 || d->qmax != 0 || d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.%s (%d) must be 0: FP8 activations have no q-range or zero "
                    "points", name, d->qmin ? "qmin" : d->qmax ? "qmax" : "asymmetric",
                    d->qmin ? d->qmin : d->qmax ? d->qmax : d->asymmetric);
  if (ql && d->float_type != BQ_F32 && d->float_type != BQ_F16 && d->float_type != BQ_BF16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16 (x's "
                    "type)", name, (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->out_type == BQ_DTYPE_DEFAULT && d->float_type == BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (0, default) names the output type and "
                    "desc.float_type is not set either", name);
  if (d->out_type == BQ_DTYPE_DEFAULT) d->out_type = d->float_type;
  if (d->out_type != BQ_F32 && d->out_type != BQ_F16 && d->out_type != BQ_BF16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) must be BQ_F32, BQ_F16 or BQ_BF16", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (!ql && d->float_type != BQ_DTYPE_DEFAULT && d->float_type != d->out_type)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.float_type (%s) and desc.out_type (%s) differ: both name the "
                    "output (set either)", name, bq__dtype_name(d->float_type), bq__dtype_name(d->out_type));
  if (!ql) d->float_type = d->out_type; /* equal layers, equal descs and SKUs */
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  if (d->scale_type != BQ_F32)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be BQ_F32", name,
                    (int)in->scale_type, bq__dtype_name(d->scale_type));
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}
/* tensorwise and rowwise share the kernel: the SKU names it alone */
BQ__FN void bq__fp8_linear_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  snprintf(buf, n, "fp8_linear.a_%s.w_e4m3.out_%s.scale_f32.mma_m16n8k32%s.%s", bq__dtype_name(d->int_type),
           bq__dtype_name(d->out_type), t->arch_a ? "+wgmma_m64n128k32" : "", tn);
}
BQ__FN int bq__fp8_linear_from_sku(char *const *tok, int n, bq_desc *d) {
  if (n != 6 || strcmp(tok[0], "fp8_linear")) return 0;
  bq_dtype a = BQ_DTYPE_DEFAULT, o = BQ_DTYPE_DEFAULT;
  int ok = !strncmp(tok[1], "a_", 2) && bq__dtype_from_name(tok[1] + 2, &a) && !strcmp(tok[2], "w_e4m3") &&
           !strncmp(tok[3], "out_", 4) && bq__dtype_from_name(tok[3] + 4, &o) && !strcmp(tok[4], "scale_f32");
  d->op = BQ_FP8_LINEAR;
  d->granularity = BQ_PER_TENSOR;
  if (ok) d->int_type = a, d->out_type = d->float_type = o;
  return ok;
}
/* the enumeration's variants: the activations' type, then the output type (FP8
   QuantizedLinear: x's type, per token or blockwise, whose activation kernels differ) */
BQ__FN void bq__fp8_linear_axes(bq_op op, int *outer, int *inner) {
  *outer = 2, *inner = op == BQ_FP8_QUANTIZED_LINEAR ? 6 : 3;
}
BQ__FN void bq__fp8_linear_vary(bq_desc *in, int outer, int inner) {
  static const bq_dtype ots[] = {BQ_F32, BQ_F16, BQ_BF16};
  in->int_type = outer ? BQ_E5M2 : BQ_E4M3;
  in->out_type = in->float_type = ots[inner % 3];
  if (in->op == BQ_FP8_QUANTIZED_LINEAR) in->granularity = inner >= 3 ? BQ_PER_BLOCK : BQ_PER_TOKEN;
  in->qmin = in->qmax = 0;
  in->asymmetric = 0;
  in->scale_type = BQ_F32;
}
BQ__FN const char *bq__fp8_linear_guarantee(const bq_desc *d) {
  if (d->op == BQ_FP8_QUANTIZED_LINEAR)
    return "x quantized by dynamic quantize (bit for bit that op), then FP8 tensor-core sums (not IEEE f32: the "
           "hardware's), one partial sum per 128 elements of K joining the f32 accumulator in order: "
           "deterministic and independent of M and the tile; error bound in docs/numerics.md; the FP8 linear "
           "layers' epilogue";
  return "FP8 tensor-core sums (not IEEE f32: the hardware's), one partial sum per 128 elements of K, each "
         "joining the f32 accumulator in order by fma with its scale (1, or blockwise sa * sw): deterministic "
         "and independent of M and the tile; error bound in docs/numerics.md; epilogue acc * sa * sw + bias "
         "(blockwise acc + bias) in f32, each step rounded to nearest even, RNE to the output type";
}
BQ__FN bq_status bq__fp8_linear_plan_setup(bq_plan *p) {
  p->linear.wgmma = p->target.arch_a;
  p->linear.pdl = p->desc.op == BQ_FP8_QUANTIZED_LINEAR && bq__pdl_wanted(&p->target);
  return BQ_SUCCESS;
}
/* FP8 QuantizedLinear's activations: dynamic quantize per token, or per group of 128 (row-major
   f32 scales), into the FP8 type */
BQ__FN int bq__fp8_linear_activation_desc(const bq_desc *d, bq_desc *q) {
  if (d->op != BQ_FP8_QUANTIZED_LINEAR) return 0;
  memset(q, 0, sizeof *q);
  q->op = BQ_DYNAMIC_QUANTIZE;
  q->granularity = d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : BQ_PER_TOKEN;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->scale_type = BQ_F32;
  q->device = d->device;
  return 1;
}

static const bq__family bq__fp8_linear_family = {
  {BQ_FP8_LINEAR, BQ_FP8_QUANTIZED_LINEAR}, {"fp8_linear", "fp8_quantized_linear"}, "linear",
  bq__fp8_linear_normalize, NULL, bq__fp8_linear_sku, bq__fp8_linear_from_sku, bq__fp8_linear_axes,
  bq__fp8_linear_vary, NULL, bq__fp8_linear_guarantee,
  "linear.cu", bq__text_linear_cu, bq__fp8_linear_prelude, bq__linear_vec, 1, bq__linear_shape, bq__fp8_linear_check,
  bq__fp8_linear_workspace, bq__fp8_linear_run, bq__fp8_linear_has, bq__fp8_linear_setup,
  {BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES, BQ__FP8_ENTRIES},
  bq__fp8_linear_activation_desc, bq__fp8_linear_plan_setup, NULL, 89};
