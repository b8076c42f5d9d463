/* ---- the dynamic family: scales computed on the device ------------------------------------ */
#include "../kernels_src/dynamic_abi.h" /* its entry points and parameter block, as dynamic.cu compiles them */

/* elements per 16-byte input access: dynamic.cu's BQ_VEC */
BQ__FN int bq__dynamic_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }

#define BQ__DYN_MAX_BLOCK 32768
/* The dynamic dispatch table: a row per granularity and float type (the int type, q-range
   and symmetry change no choice), each the fastest setting measured on the H100, per token
   f32 and f64 on the H200. The prelude gives the kernels its numbers. Columns:
   - cpt, block: bq_dynamic's accesses a thread kept on chip (dynamic.cu's BQ_CPT: 4 is 64
     bytes, 16 registers) and its largest team, which is also the per-tensor kernels' block
     (BQ_BLOCK). A segment that fits is read once; several accesses a thread keep enough
     bytes in flight at the occupancy the registers allow. Per token f32 and f64 keep 8: a
     row of half the threads, so twice the rows an SM holds in flight, which outweighs the
     registers it spills; f16 and bf16 rows ran slower so.
   - long_cpt, long_team: the same for bq_dynamic_long (BQ_LONG_CPT, BQ_LONG_TEAM).
   - long: 1 where rows longer than a block's accesses (block * cpt) take bq_dynamic_long:
     per token f16 and bf16, where fewer, fuller threads a row keep more rows on an SM (large
     teams of 4 accesses a thread leave few rows an SM, whose barriers stall the loads).
     Shorter rows, groups, and f32 and f64 rows keep bq_dynamic, faster for them. */
typedef struct bq__dynamic_row {
  bq_granularity gran;
  bq_dtype ft;
  int cpt, block, long_cpt, long_team, long_rows;
} bq__dynamic_row;
static const bq__dynamic_row bq__dynamic_table[] = {
  /* granularity, float type   cpt block long_cpt long_team long */
  {BQ_PER_TENSOR, BQ_F32,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_F64,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_F16,       4, 1024, 8, 512, 0},
  {BQ_PER_TENSOR, BQ_BF16,      4, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F32,        8, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F64,        8, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F16,        4, 1024, 8, 512, 1},
  {BQ_PER_TOKEN, BQ_BF16,       4, 1024, 8, 512, 1},
  {BQ_PER_GROUP, BQ_F32,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_F64,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_F16,        4, 1024, 8, 512, 0},
  {BQ_PER_GROUP, BQ_BF16,       4, 1024, 8, 512, 0},
};
#define BQ__DYNAMIC_ROWS ((int)(sizeof bq__dynamic_table / sizeof bq__dynamic_table[0]))
/* per token f32 and f64 with the fused rotation keep 4 accesses a thread: at 8 the
   rotation's registers spill (bq_dynamic is held to 64) */
static const bq__dynamic_row bq__dynamic_rot_rows[] = {
  {BQ_PER_TOKEN, BQ_F32,        4, 1024, 8, 512, 0},
  {BQ_PER_TOKEN, BQ_F64,        4, 1024, 8, 512, 0},
};
/* a normalized dynamic desc's row (bq__normalize refuses per channel) */
BQ__FN const bq__dynamic_row *bq__dynamic_row_of(const bq_desc *d) {
  if (d->rotation && d->granularity == BQ_PER_TOKEN && (d->float_type == BQ_F32 || d->float_type == BQ_F64))
    return &bq__dynamic_rot_rows[d->float_type == BQ_F64];
  /* per block (bq_dynamic_tiles, whose sizes are its own) keeps per group's row */
  const bq_granularity g = d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : d->granularity;
  for (int i = 0; i < BQ__DYNAMIC_ROWS; i++)
    if (bq__dynamic_table[i].gran == g && bq__dynamic_table[i].ft == d->float_type)
      return &bq__dynamic_table[i];
  return &bq__dynamic_table[0];
}

BQ__FN void bq__dynamic_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  const bq__dynamic_row *r = bq__dynamic_row_of(d);
  bq__str_fmt(s, "#define BQ_ASYM %d\n#define BQ_GRAN %s\n#define BQ_CPT %d\n#define BQ_BLOCK %d\n"
              "#define BQ_LONG_CPT %d\n#define BQ_LONG_TEAM %d\n#define BQ_POW2 %d\n#define BQ_WRITE_Y %d\n",
              d->asymmetric, bq__spec("GRAN", d->granularity), r->cpt, r->block, r->long_cpt, r->long_team,
              d->pow2_scales, d->rounding != BQ_ROUND_STOCHASTIC);
  if (d->rotation) bq__str_fmt(s, "#define BQ_DYN_ROT 1\n");
}

BQ__FN bq_status bq__dynamic_view_of(const bq_plan *p, const bq_args *a, bq__view *v) {
  bq_status st = bq__view_of(p, a, v);
  if (!st && p->desc.granularity == BQ_PER_BLOCK && v->group > BQ__DYN_MAX_BLOCK) /* a tile's indices fit 32 bits */
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: args.group_size (%lld) is larger than %d, the largest block "
                    "dynamic quantize offers", p->name, (long long)v->group, BQ__DYN_MAX_BLOCK);
  return st;
}
BQ__FN bq_status bq__dynamic_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__dynamic_view_of(p, a, &v);
}
/* The fused rotation (per token): blocks of args.rotation_block, a power of two from 2 up to
   a warp's accesses (32 of 16 bytes), dividing the row; rows on the 16-byte grid in whole
   accesses, so that a block's accesses sit in consecutive lanes (dynamic.cu's bq_dyn_rot) */
BQ__FN bq_status bq__dynamic_rotation_check(const bq_plan *p, const bq_args *a, const bq__view *v) {
  const int t = bq__dtype_size(p->desc.float_type);
  const int64_t n = a->rotation_block;
  const bq_status st = bq__rotation_block_check(p->name, n, v->cols);
  if (st) return st;
  if (n * t > 32 * 16 || (uintptr_t)a->x % 16 || (v->xs * t) % 16 || (v->cols * t) % 16)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: the fused rotation (desc.rotation) takes rows that start 16-byte "
                    "aligned (args.x %p, args.x_row_stride %lld) and are whole 16-byte accesses (args.cols %lld), in "
                    "blocks (args.rotation_block %lld) of at most 32 of them; BQ_HADAMARD, then this op, gives the "
                    "same bits", p->name, a->x, (long long)v->xs, (long long)v->cols, (long long)n);
  return BQ_SUCCESS;
}
/* the whole validation, giving the problem's view (check's, and run's first step) */
BQ__FN bq_status bq__dynamic_validate(const bq_plan *p, const bq_args *a, bq__view *vp) {
  bq__view v;
  bq_status st = bq__dynamic_view_of(p, a, &v);
  const bq_desc *d = &p->desc;
  if (st) return st;
  *vp = v;
  if (d->rotation && (st = bq__dynamic_rotation_check(p, a, &v))) return st;
  if (v.numel == 0) return st;
  if ((st = bq__check_ptr(p, "args.x", a->x, bq__dtype_size(d->float_type)))) return st;
  if ((st = bq__check_ptr(p, "args.y", a->y, 1))) return st;
  if ((st = bq__check_ptr(p, "args.out_scales", a->out_scales, bq__dtype_size(d->scale_type)))) return st;
  if (d->asymmetric && (st = bq__check_ptr(p, "args.out_zero_points", a->out_zero_points, 4))) return st;
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__dynamic_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__dynamic_validate(p, a, &v);
}

/* per tensor: one partial (two C values) per block of the reduction pass, a wave of them (as
   many as the SMs hold of the table's block) */
BQ__FN int64_t bq__dynamic_blocks(const bq_plan *p) {
  const bq__limits l = bq__limits_of(p);
  const int64_t per = l.threads_sm / bq__dynamic_row_of(&p->desc)->block;
  return l.sms * (per > 0 ? per : 1);
}
BQ__FN size_t bq__dynamic_workspace(const bq_plan *p, const bq_args *a) {
  if (p->desc.granularity != BQ_PER_TENSOR || !a || a->numel <= 0) return 0;
  return (size_t)bq__dynamic_blocks(p) * 16;
}

/* team size for a segment of `chunks` accesses, each thread holding up to `cpt` of them:
   a warp, or a block of 64 threads up to `max` (dynamic.cu's teams). A segment that fits is
   read once; several accesses per thread keep enough bytes in flight at the occupancy the
   kernel's registers allow. */
BQ__FN int bq__dynamic_team(int64_t chunks, int cpt, int max) {
  int tpr = 32;
  while (tpr < max && (int64_t)tpr * cpt < chunks) tpr *= 2;
  return tpr;
}

/* The entry points with code for d: per group, bq_dynamic_groups for integer codes only
   (FP8's fast groups ran faster inside bq_dynamic), bq_dynamic_sets for every code; per
   token, bq_dynamic_staged for 16-bit data; every other one the table names */
BQ__FN int bq__dynamic_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  if (e == BQ__DYN_SETS && d->granularity == BQ_PER_GROUP) return 1;
  if (e == BQ__DYN_STAGED) return d->float_type == BQ_F16 || d->float_type == BQ_BF16;
  return d->granularity != BQ_PER_GROUP || e != BQ__DYN_LONG || !bq__is_fp8(d->int_type);
}

/* The staged kernels' persistent wave (bq_dynamic_tiles staged, bq_dynamic_staged): as
   many blocks of `threads` an SM as its registers (64 a thread) and its shared memory (a
   slot of smem bytes a block) let it hold at once; more would wait for a resident block to
   finish every tile or row it takes. (The SM's threads never bind first: at 64 registers
   its register file holds 1024, fewer than any SM from sm_80 on runs.) */
BQ__FN int64_t bq__staged_wave(const bq_plan *p, int threads, unsigned smem) {
  const bq__limits l = bq__limits_of(p);
  int64_t per = bq__lb_blocks(64, threads);
  const int64_t fit = bq__arch_smem_sm(p->target.arch) / (smem + BQ__SMEM_BLOCK_RESERVED);
  if (per > fit) per = fit;
  return l.sms * (per > 0 ? per : 1);
}
/* Tests: BQ__DYN_ROW or BQ__DYN_LONG for every per-token run (bq_dynamic_long serves any
   row), BQ__DYN_STAGED for rows it takes (whatever their count), -1: the host's choice. */
static int bq__dynamic_force_entry = -1;
/* Tests: 0 runs per-block tiles unstaged (bq_dynamic_tiles' own loop) */
static int bq__tiles_staged = 1;
/* Tests: 0 runs per-token rows unstaged (bq_dynamic's teams, never bq_dynamic_staged) */
static int bq__rows_staged = 1;
/* The scales' kernels: per tensor its two passes, per block the tiles, per token and per
   group the teams' kernels (rounding to nearest, they quantize in the same pass) */
BQ__FN bq_status bq__dynamic_scales_run(const bq_plan *p, const bq_args *a, const bq__view *vp, void *ws,
                                         size_t ws_bytes, void *stream) {
  const bq__view v = *vp;
  bq_status st;
  const bq_desc *d = &p->desc;
  int t = bq__dtype_size(d->float_type);
  const bq__dynamic_row *row = bq__dynamic_row_of(d);
  bq_dynamic_params k;
  memset(&k, 0, sizeof k);
  k.x = (uint64_t)(uintptr_t)a->x;
  k.y = (uint64_t)(uintptr_t)a->y;
  k.scales = (uint64_t)(uintptr_t)a->out_scales;
  k.zps = (uint64_t)(uintptr_t)a->out_zero_points;
  k.rows = v.rows;
  k.cols = v.cols;
  k.xs = v.xs;
  k.ys = v.ys;
  k.group = v.group;
  k.ngroups = v.ngroups;
  k.grs = v.grs;
  k.bound = a->amax_bound;
  if (d->rotation) {
    k.rlog2 = bq__hadamard_log2(a->rotation_block); /* (validated) */
    k.rsigns = d->random_signs;
    k.seed_lo = (uint32_t)a->seed;
    k.seed_hi = (uint32_t)(a->seed >> 32);
  }
  if (d->granularity == BQ_PER_TENSOR) {
    if ((st = bq__check_workspace(p, ws, ws_bytes, bq__dynamic_workspace(p, a)))) return st;
    int64_t chunks = v.numel / p->vec + 1, max_blocks = bq__dynamic_blocks(p);
    int64_t blocks = (chunks + row->block - 1) / row->block;
    k.nblocks = (int32_t)(blocks < max_blocks ? blocks : max_blocks);
    k.partial = (uint64_t)(uintptr_t)ws;
    k.tpr = row->block;
    st = bq__launch(p, BQ__DYN_REDUCE, k.nblocks, 1, row->block, 0, &k, stream);
    /* (stochastic rounding's apply pass writes the scale alone: one block) */
    if (!st) st = bq__launch(p, BQ__DYN_APPLY, d->rounding == BQ_ROUND_STOCHASTIC ? 1 : k.nblocks, 1, row->block, 0,
                             &k, stream);
    return st;
  }
  if (d->granularity == BQ_PER_BLOCK) {
    /* a thread block a tile (striding past the grid's limit): bq_dynamic_tiles where every
       row starts 16-byte aligned and a block is whole accesses, else bq_dynamic_tiles_rows */
    k.trows = (v.rows + v.group - 1) / v.group;
    const int64_t tiles = k.trows * v.ngroups;
    const int threads = 2048 / p->vec; /* dynamic.cu's BQ_TILE_THREADS, each BQ_TILE_CPT accesses */
    k.fast_groups = v.group % p->vec == 0 && (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0;
    /* 16-bit data whose tiles fit the threads' registers: staged, a persistent wave of
       blocks (as many as the kernel's launch bounds let an SM hold) */
    k.staged = k.fast_groups && p->vec == 8 && (v.group / p->vec) * v.group <= (int64_t)threads * 8 && bq__tiles_staged;
    int64_t grid = bq__grid(tiles, 1);
    if (k.staged) {
      const int64_t wave = bq__staged_wave(p, threads, (unsigned)threads * 8 * 16);
      grid = tiles < wave ? tiles : wave;
    }
    k.tcols = k.staged && (v.cols - (v.ngroups - 1) * v.group) % p->vec != 0 ? v.ngroups - 1 : v.ngroups;
    k.tdq = k.tcols ? grid / k.tcols : 0;
    k.tdr = k.tcols ? grid % k.tcols : 0;
    if (k.staged) return bq__launch(p, BQ__DYN_ROW, grid, 1, threads, (unsigned)threads * 8 * 16, &k, stream);
    return bq__launch(p, k.fast_groups ? BQ__DYN_ROW : BQ__DYN_LONG, grid, 1, threads, 0, &k, stream);
  }
  int64_t chunks, segs;
  if (d->granularity == BQ_PER_TOKEN) {
    chunks = (v.cols + p->vec - 1) / p->vec;
    segs = v.rows;
  } else {
    /* groups of a power-of-two number of whole accesses (<= 128: 32 lanes of 4), rows
       16-byte aligned: reduced by shuffles across the lanes holding them; otherwise each
       group runs as a row */
    int64_t gc = v.group / p->vec;
    k.fast_groups = v.group % p->vec == 0 && gc <= 32 * row->cpt && (gc & (gc - 1)) == 0 &&
                    (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0;
    chunks = k.fast_groups ? v.cols / p->vec : (v.group + p->vec - 1) / p->vec;
    segs = k.fast_groups ? v.rows : v.rows * v.ngroups;
  }
  /* bq_dynamic_long where the table says so and the row is longer than 256 threads' cpt
     accesses (its teams' first size past bq_dynamic's) */
  /* whether some segment's y may start off a 32-byte sector (bq_segment_prologue) */
  k.align_y = (uintptr_t)a->y % 32 != 0 || v.ys % 32 != 0 || (d->granularity == BQ_PER_GROUP && v.group % 32 != 0);
  /* (per token only: per group's second entry is bq_dynamic_groups) */
  int lng = d->granularity == BQ_PER_TOKEN && row->long_rows && chunks > 256 * row->cpt;
  if (d->granularity == BQ_PER_TOKEN && bq__dynamic_force_entry >= 0) lng = bq__dynamic_force_entry == BQ__DYN_LONG;
  k.tpr = lng ? bq__dynamic_team(chunks, row->long_cpt, row->long_team) : bq__dynamic_team(chunks, row->cpt, row->block);
  /* fast groups need no team-wide barrier, so a row's team is capped and loops over the
     row's groups: short blocks that retire in address order. Two warps, or four for FP8 from
     16-bit data, whose lighter arithmetic wants more bytes a pass (on an H200, f32 [32768,
     4096] into s8 took 173 us against 199 with the row's team of 256) */
  const int team_cap = bq__is_fp8(d->int_type) && t == 2 ? 128 : 64;
  if (k.fast_groups && k.tpr > team_cap) k.tpr = team_cap;
  /* per token, f16 and bf16 rows on the 16-byte grid in whole accesses that a block's team
     holds, more of them than a wave: bq_dynamic_staged, a persistent wave of blocks, as
     many as the registers (64 a thread) and shared memory (a row's slot) let an SM hold,
     each staging its next row while it works on one (with a row a block there is no next
     row, and the slot's round trip only adds latency) */
  const int stage_forced = bq__dynamic_force_entry == BQ__DYN_STAGED;
  /* With the rotation, two slots (the next row's beside this one's), in as much shared memory
     as the block may opt into (bq__dynamic_setup): rows up to a block's 4096 accesses stage so,
     bq_dynamic_long's included, whose rotation otherwise leaves it one block an SM. */
  const int slots = d->rotation ? 2 : 1;
  /* (a slot of the rotation's map is whole 128-byte lines: bq_staged_slot) */
  const int64_t slot_bytes = d->rotation ? (chunks + 7) / 8 * 128 : chunks * 16;
  int64_t smem_most = 48 * 1024;
  if (d->rotation && d->granularity == BQ_PER_TOKEN && p->vec == 8 && slot_bytes * slots > smem_most &&
      chunks <= (int64_t)row->block * row->cpt && p->dynamic.smem_max > smem_most && bq__rows_staged) {
    bq__CUfunction fn; /* (its set-up gives the opt-in; a dry run takes it as given) */
    if (!bq__dry.plan && (st = bq__plan_fn(p, BQ__DYN_STAGED, &fn))) return st;
    smem_most = bq__dry.plan ? p->dynamic.smem_max : p->dynamic.staged_smem > smem_most ? p->dynamic.staged_smem : smem_most;
    if (lng && slot_bytes * slots <= smem_most && bq__dynamic_force_entry < 0) {
      lng = 0;
      k.tpr = bq__dynamic_team(chunks, row->cpt, row->block);
    }
  }
  if (d->granularity == BQ_PER_TOKEN && p->vec == 8 && !lng && k.tpr > 32 && v.cols % p->vec == 0 &&
      slot_bytes * slots <= smem_most && (uintptr_t)a->x % 16 == 0 && (v.xs * t) % 16 == 0 && bq__rows_staged &&
      (bq__dynamic_force_entry < 0 || stage_forced)) {
    const unsigned smem = (unsigned)(slot_bytes * slots);
    const int64_t wave = bq__staged_wave(p, k.tpr, smem);
    if (segs > wave || stage_forced) {
      k.staged = 1;
      return bq__launch(p, BQ__DYN_STAGED, segs < wave ? segs : wave, 1, k.tpr, smem, &k, stream);
    }
  }
  int threads = k.tpr > 32 ? k.tpr : 256; /* a block per row, or 8 warps of 8 rows */
  /* per group into integer codes, the fast groups take bq_dynamic_groups (the per-group
     module's second entry, bq__dynamic_has); groups of 2 or 4 accesses (half or all of
     dynamic.cu's BQ_DU a lane), into any code, bq_dynamic_sets, whose lanes hold two groups
     each, so that as many bytes are in flight as the larger groups keep (on an H100, FP8
     bf16 groups of 32 took 8% less time so) */
  const int64_t gca = d->granularity == BQ_PER_GROUP ? v.group / p->vec : 0;
  const int e = lng ? BQ__DYN_LONG
                : k.fast_groups && (gca == 2 || gca == 4) ? BQ__DYN_SETS
                : k.fast_groups && bq__dynamic_has(d, NULL, BQ__DYN_LONG) ? BQ__DYN_LONG
                                                                            : BQ__DYN_ROW;
  return bq__launch(p, e, bq__grid(segs, threads / k.tpr), 1, threads, 0, &k, stream);
}

/* Stochastic rounding: the kernels write the scales (and zero points) alone (BQ_WRITE_Y 0),
   then the plan's affine plan quantizes with them as static ones (bq__dynamic_sub): the
   stored-scale rule makes that the contract's two steps exactly. Per tensor, the scale is
   on the device: the affine plan is per token over one row of numel. */
BQ__FN bq_status bq__dynamic_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  bq__view v;
  bq_status st = bq__dynamic_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  if ((st = bq__dynamic_scales_run(p, a, &v, ws, ws_bytes, stream)) || p->desc.rounding != BQ_ROUND_STOCHASTIC) return st;
  bq_args q;
  memset(&q, 0, sizeof q);
  q.x = a->x;
  q.y = a->y;
  q.scales = a->out_scales;
  q.zero_points = p->desc.asymmetric ? a->out_zero_points : NULL;
  q.seed = a->seed; /* (with the random signs, theirs too: the scales' kernel drew the same) */
  q.offset = a->offset;
  q.rotation_block = a->rotation_block;
  if (p->desc.granularity == BQ_PER_TENSOR) {
    q.rows = 1;
    q.cols = v.numel;
  } else {
    q.rows = a->rows;
    q.cols = a->cols;
    q.x_row_stride = a->x_row_stride;
    q.y_row_stride = a->y_row_stride;
    q.group_size = a->group_size;
    q.group_row_stride = a->group_row_stride;
  }
  return bq_plan_run(p->sub, &q, NULL, 0, stream);
}
/* Dynamic quantize: the scales (and zero points) computed from the data, forward only */
BQ__FN bq_status bq__dynamic_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__plan_name_std(d, 1, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name)) || (st = bq__scale_rules(d, in, name, 1)))
    return st;
  if (d->direction != BQ_FORWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.direction (backward) is not defined for dynamic quantize", name);
  if (d->granularity == BQ_PER_CHANNEL)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED,
                    "%s: desc.granularity (per_channel) is not offered for dynamic quantize: "
                    "use per_token, per_group, per_block or per_tensor", name);
  if ((st = bq__rule_asymmetric(d, name))) return st;
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  /* the fused rotation is per token's (rounding either way): the other kernels' threads hold
     no whole blocks of a row (BQ_HADAMARD, then this op, gives the same bits) */
  if (d->rotation && d->granularity != BQ_PER_TOKEN)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.rotation (1) is offered per token for integer and FP8 "
                    "dynamic quantize (and for the microscaling formats); BQ_HADAMARD, then this op, gives the same "
                    "bits", name);
  return bq__rule_qrange(d, name, "dynamic quantize");
}
/* Stochastic rounding's plans hold the affine plan that quantizes with the scales written
   (bq__dynamic_run): quantize forward at the same granularity (per tensor: per token over
   one row), float and storage types, q-range, scale type and layout, rounding stochastically,
   with the same rotation (per token: the scales are the rotated rows') */
BQ__FN int bq__dynamic_sub(const bq_desc *d, bq_desc *q) {
  if (d->rounding != BQ_ROUND_STOCHASTIC) return 0;
  bq__affine_sr_of(d, d->granularity == BQ_PER_TENSOR ? BQ_PER_TOKEN : d->granularity, q);
  q->rotation = d->rotation;
  q->random_signs = d->random_signs;
  return 1;
}
/* the variant: elements per access, symmetric or not, power-of-two scales */
BQ__FN void bq__dynamic_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  char variant[32];
  snprintf(variant, sizeof variant, "vec%d.%s%s%s%s", bq__dynamic_vec(d), d->asymmetric ? "asym" : "sym",
           d->pow2_scales ? ".pow2" : "", d->rounding == BQ_ROUND_STOCHASTIC ? ".sr" : "", d->rotation ? ".rot" : "");
  bq__sku_std(d, variant, tn, buf, n);
}
/* the enumeration's variants: pow2_scales 0 and 1, each rounding to nearest or stochastically,
   without the fused rotation and (per token; the others refused) with it */
BQ__FN void bq__dynamic_axes(bq_op op, int *outer, int *inner) {
  (void)op;
  *outer = 1, *inner = 8;
}
BQ__FN void bq__dynamic_vary(bq_desc *in, int outer, int inner) {
  (void)outer;
  in->pow2_scales = inner & 1;
  in->rounding = (inner >> 1) & 1 ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  in->rotation = inner >> 2;
}
BQ__FN unsigned bq__dynamic_owns(const bq_desc *d) {
  return BQ__OWNS_AMAX_BOUND | (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* With the rotation, per token from 16-bit data: the shared memory a block may opt into, and
   bq_dynamic_staged given it once it loads (where the driver refuses, 48 KiB: longer rows
   take bq_dynamic_long) */
BQ__FN bq_status bq__dynamic_plan_setup(bq_plan *p) {
  if (p->desc.rotation && p->vec == 8) p->dynamic.smem_max = bq__smem_optin();
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__dynamic_setup(bq_plan *p, int e, bq__CUfunction fn) {
  const int64_t most = p->dynamic.smem_max;
  if (e == BQ__DYN_STAGED && most > 48 * 1024)
    p->dynamic.staged_smem = !bq__drv.cuFuncSetAttribute(fn, BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)most) ? most : 0;
  return BQ_SUCCESS;
}
/* the typical problem's rotation blocks: 32 (every float type's rows take them) */
BQ__FN void bq__dynamic_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)ptr;
  if (d->rotation) a->rotation_block = 32;
}

static const bq__family bq__dynamic_family = {
  {BQ_DYNAMIC_QUANTIZE}, {"dynamic_quantize"}, "dynamic",
  bq__dynamic_normalize, NULL, bq__dynamic_sku, NULL, bq__dynamic_axes, bq__dynamic_vary, bq__dynamic_owns, NULL,
  "dynamic.cu", bq__text_dynamic_cu, bq__dynamic_prelude, bq__dynamic_vec, 0, bq__dynamic_shape, bq__dynamic_check,
  bq__dynamic_workspace, bq__dynamic_run, bq__dynamic_has, bq__dynamic_setup,
  {{NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_REDUCE), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_APPLY)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_LONG), NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_STAGED)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_GROUPS), NULL, NULL, BQ_ENTRY_NAME(BQ_FN_DYNAMIC_SETS)},
   {BQ_ENTRY_NAME(BQ_FN_DYNAMIC_TILES), BQ_ENTRY_NAME(BQ_FN_DYNAMIC_TILES_ROWS)}},
  bq__dynamic_sub, bq__dynamic_plan_setup, bq__dynamic_typical, 0};
