/* tests/test_gpu_blocks.c - per-block scales (BQ_PER_BLOCK: B x B tiles, edge tiles
   partial), MN-major per-group scales (desc.scale_layout BQ_SCALES_MN_MAJOR) and packed
   UE8M0 scales (BQ_UE8M0X4, row-major and MN-major) on the GPU against the CPU references,
   bit for bit (NaN payloads aside): tests/reference.h's ref_run for quantize, dequantize
   and fake quantize in both directions, tests/reference_dynamic.h's refd_run for dynamic
   quantize. Both index scales with reference.h's ref_scale_index.

   Static ops per block: every op x direction x float type x storage type (s8, u8, e4m3,
   e5m2), the scale type turning among f32, T and UE8M0 and integer storage among full and
   narrow q-ranges, zero points on half the integer plans; B in 1, 3, 8, 100 and 128 with
   rows and columns off multiples of B, strided rows (the gaps must keep their poison),
   misaligned streams, group_row_stride default or larger; each affine entry point forced
   by name where the host offers it (bq_affine and bq_affine_odd everywhere,
   bq_affine_blocks on whole aligned blocks, bq_affine_narrow for f64 quantize), the launch
   checked to be that kernel. MN-major and packed scales: quantize, dequantize and fake
   quantize over a spread of types, group_row_stride default or larger than the least, the
   same forced entries (and bq_affine_flat for packed row-major scales).
   Dynamic quantize per block: symmetric and asymmetric, power-of-two scales (pow2_scales,
   UE8M0), args.amax_bound; tiles of zeros (amax 0), constants, one huge element, NaN and
   +-inf elements, all NaN, subnormals, values near T's largest; the vector path (aligned
   rows, B whole accesses: the launch's fast_groups checked) and the element path (odd
   strides, misaligned x, B not whole accesses), the whole matrix in one tile, tiles larger
   than the registers hold, and bf16 [1024, 1024] B = 128 to e4m3. Per group MN-major and
   packed: the fast group path and segments, padded rows (never written) and each packed
   row's bytes past its last group (written 0).

   Every output allocation (data, scales, zero points) is poisoned first and compared whole
   afterwards, guards and padding included; inputs must come back unchanged. The seed is in
   every failure message (BQ_TEST_SEED=<n> replays one). Without a usable CUDA
   driver/device every test is skipped. Every test is in the suite gpu_blocks (criterion's
   --filter takes the suite's name followed by a slash and a star). */
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */
#include "reference_dynamic.h"
#include "reference_sr.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_CACHE_MAX 128
#define GPU_UTIL_BUFFERS
#define GPU_UTIL_LAUNCHES
#include "gpu_util.h"


#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define POISON 0xA5
#define MSG_CAP 4096

static const bq_dtype k_float_types[4] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
static const bq_dtype k_storage_types[4] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};

/* ==== launches: which kernel ran, with which dynamic parameters ============================== */

static int g_pairs; /* forced bq_affine_lean launches that took bq_affine_pair */
static bq_dynamic_params g_dparams; /* the last dynamic quantize run's parameters */
static int g_sr; /* dynamic cases round stochastically: their last launch is the affine plan's */

static void begin(void)
{
  gpu_begin();
  launch_note_begin();
}

/* ==== values ================================================================================= */

static void store_t(bq_dtype t, void *buf, int64_t i, double v)
{
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

/* the largest finite value of T */
static double t_max(bq_dtype t)
{
  return t == BQ_F64 ? DBL_MAX : t == BQ_F16 ? 65504.0 : t == BQ_BF16 ? 0x1.fep127 : FLT_MAX;
}

/* a static op's input x (float) for a scale near s: moderate quotients, ties where s is a
   power of two, the storage type's range and beyond, and now and then NaN, +-inf, +-0, huge */
static double gen_x(bq_dtype I, double s)
{
  const double range = ref_is_fp8(I) ? ref_fp8_formats[ref_fp8_kind_of(I)].max : 300.0;
  switch (rnd() % 24) {
  case 0: return NAN;
  case 1: return (rnd() & 1) ? INFINITY : -INFINITY;
  case 2: return (rnd() & 1) ? 0.0 : -0.0;
  case 3: return (rnd_unit() - 0.5) * 1e30;
  case 4: return ((double)rnd_range(-300, 300) + 0.5) * s; /* a tie when s is a power of two */
  case 5: return ldexp(rnd_unit() - 0.5, -(int)rnd_range(10, 40)) * s; /* tiny quotients */
  default: return (rnd_unit() - 0.5) * 2.4 * range * s;
  }
}

/* a gradient: moderate, zero, tiny, huge or special */
static double gen_dy(void)
{
  switch (rnd() % 16) {
  case 0: return (rnd() & 1) ? 0.0 : -0.0;
  case 1: return ldexp(rnd_unit() + 0.5, -(int)rnd_range(80, 140)) * ((rnd() & 1) ? 1 : -1);
  case 2: return (rnd_unit() - 0.5) * 1e30;
  case 3: return (rnd() & 1) ? NAN : -INFINITY;
  default: return (rnd_unit() - 0.5) * 8;
  }
}

/* a scale array's element: mostly a moderate scale (a power of two half the time), now and
   then 0, NaN, inf, negative, tiny or huge; UE8M0 bytes near 2^0 and the edges (0, 1, 126,
   127, 128, 254, 255 NaN) */
static void gen_scale(bq_dtype st, void *buf, int64_t i, double typical)
{
  if (st == BQ_UE8M0 || st == BQ_UE8M0X4) {
    static const int edge[] = {0, 1, 126, 127, 128, 254, 255};
    int e = 127 + (int)round(log2(typical)) + (int)rnd_range(-3, 3);
    if (rnd() % 8 == 0) e = PICK(edge);
    ((unsigned char *)buf)[i] = (unsigned char)(e < 0 ? 0 : e > 255 ? 255 : e);
    return;
  }
  double s = typical * ((rnd() & 1) ? 1.0 : 1.0 + rnd_unit());
  switch (rnd() % 40) {
  case 0: s = 0.0; break;
  case 1: s = NAN; break;
  case 2: s = INFINITY; break;
  case 3: s = -s; break;
  case 4: s = 1e-40; break; /* an f32 subnormal (f16 and bf16 scales: 0 or their own) */
  case 5: s = 1e30; break;
  default: break;
  }
  store_t(st, buf, i, s);
}

/* ==== static ops ============================================================================== */

typedef struct scase {
  bq_desc d;
  int64_t rows, cols, B, xpad, ypad, grs; /* grs: args.group_row_stride (0: the default) */
  int xoff, yoff, soff;                   /* misalignment, in elements (soff: of the scales) */
  int zps;                                /* pass zero points (integer storage, unpacked scales) */
  int force;                              /* bq__affine_force_entry, -1: the host's choice */
} scase;

static const char *const k_entry_names[BQ__AFFINE_ENTRIES] = {"bq_affine", "bq_affine_cols", "bq_affine_odd",
                                                              "bq_affine_blocks", "bq_affine_flat",
                                                              "bq_affine_narrow", "bq_affine_mask", "bq_affine_lean",
                                                              "bq_affine_pair"};

static void run_static(const scase *c)
{
  char what[768], msg[MSG_CAP];
  bq_desc dn = ref_desc_normalize(&c->d);
  const int bwd = dn.direction == BQ_BACKWARD, x4 = dn.scale_type == BQ_UE8M0X4;
  const int has_x = !(dn.op == BQ_DEQUANTIZE && bwd);
  const bq_dtype T = dn.float_type, xt = ref_x_type(&dn), ot = ref_out_type(&dn);
  const bq_dtype ses = ref_scale_elem_type(dn.scale_type); /* packed: bytes */
  bq_args ha, da, hr;
  ref_layout L;
  dbuf x, dy, out, sc, zp;
  memset(&ha, 0, sizeof ha);
  memset(&x, 0, sizeof x), memset(&dy, 0, sizeof dy), memset(&out, 0, sizeof out);
  memset(&sc, 0, sizeof sc), memset(&zp, 0, sizeof zp);
  ha.rows = c->rows;
  ha.cols = c->cols;
  ha.x_row_stride = c->xpad ? c->cols + c->xpad : 0;
  ha.y_row_stride = c->ypad ? c->cols + c->ypad : 0;
  ha.group_size = c->B;
  ha.group_row_stride = c->grs;
  bq_plan *plan = plan_get(&c->d, "static select");
  snprintf(what, sizeof what, "%.300s [%lld, %lld] B %lld strides %lld/%lld grs %lld offs %d/%d/%d zps %d force %s | "
           "BQ_TEST_SEED=0x%llx", bq_plan_sku(plan), (long long)c->rows, (long long)c->cols, (long long)c->B,
           (long long)ha.x_row_stride, (long long)ha.y_row_stride, (long long)c->grs, c->xoff, c->yoff, c->soff,
           c->zps, c->force < 0 ? "none" : k_entry_names[c->force], (unsigned long long)g_seed);
  cr_assert_eq(ref_layout_init(&L, &dn, &ha), 0, "bad case | %s", what);
  /* buffers: garbage around the inputs, the output poisoned */
  if (has_x) dbuf_make(&x, ref_dtype_size(xt), L.x_extent, c->xoff);
  if (bwd) dbuf_make(&dy, ref_dtype_size(T), L.y_extent, c->yoff);
  dbuf_make(&out, ref_dtype_size(ot), bwd ? L.x_extent : L.y_extent, bwd ? c->xoff : c->yoff);
  dbuf_make(&sc, ref_dtype_size(ses), L.n_params, x4 ? 4 * c->soff : c->soff);
  if (c->zps) dbuf_make(&zp, 4, L.n_params, c->soff);
  if (has_x) fill_garbage(x.h, x.total);
  if (bwd) fill_garbage(dy.h, dy.total);
  fill_garbage(sc.h, sc.total);
  if (c->zps) fill_garbage(zp.h, zp.total);
  memset(out.h, POISON, out.total);
  const double typical = ldexp(1.0, (int)rnd_range(-6, 3));
  for (int64_t i = 0; i < L.n_params; i++) gen_scale(dn.scale_type, sc.h + sc.pre, i, typical);
  if (c->zps)
    for (int64_t i = 0; i < L.n_params; i++) {
      int32_t z = (int32_t)rnd_range(dn.qmin, dn.qmax);
      if (rnd() % 16 == 0) z = (int32_t)rnd_range(-100000, 100000);
      if (rnd() % 32 == 0) z = (rnd() & 1) ? INT32_MAX - (int32_t)rnd_range(0, 300) : INT32_MIN + (int32_t)rnd_range(0, 300);
      memcpy(zp.h + zp.pre + 4 * i, &z, 4);
    }
  { /* entries no element reads (padded rows, the leading dimension's slack, packed bytes past
       a row's groups) hold NaN scales and zero points far outside the q-range: a kernel that
       reads one gets another result */
    unsigned char *used = (unsigned char *)calloc((size_t)L.n_params + 1, 1);
    cr_assert(used != NULL);
    ref_scales_mark_used(&L.S, c->rows, c->cols, used);
    for (int64_t i = 0; i < L.n_params; i++)
      if (!used[i]) {
        if (ses == BQ_UE8M0) sc.h[sc.pre + i] = 255;
        else store_t(ses, sc.h + sc.pre, i, NAN);
        if (c->zps) {
          const int32_t z = INT32_MIN + 5;
          memcpy(zp.h + zp.pre + 4 * i, &z, 4);
        }
      }
    free(used);
  }
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t k = 0; k < c->cols; k++) {
      if (has_x) {
        const int64_t xi = r * L.xs + k;
        if (xt == T) store_t(T, x.h + x.pre, xi, gen_x(dn.int_type, typical));
        else x.h[x.pre + xi] = (unsigned char)rnd(); /* a code: every byte, NaN and inf codes included */
      }
      if (bwd) store_t(T, dy.h + dy.pre, r * L.ys + k, gen_dy());
    }
  if (has_x) BQ_OK(bq_memcpy_to_device(x.dev, x.h, x.total), "%s", what);
  if (bwd) BQ_OK(bq_memcpy_to_device(dy.dev, dy.h, dy.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(out.dev, out.h, out.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(sc.dev, sc.h, sc.total), "%s", what);
  if (c->zps) BQ_OK(bq_memcpy_to_device(zp.dev, zp.h, zp.total), "%s", what);
  da = ha;
  da.x = has_x ? x.dev + x.pre : NULL;
  da.dy = bwd ? dy.dev + dy.pre : NULL;
  if (bwd) da.dx = out.dev + out.pre;
  else da.y = out.dev + out.pre;
  da.scales = sc.dev + sc.pre;
  da.zero_points = c->zps ? (const int32_t *)(void *)(zp.dev + zp.pre) : NULL;
  BQ_OK(bq_plan_can_implement(plan, &da), "%s", what);
  bq__affine_force_entry = c->force;
  g_last_fn = NULL;
  bq_status st = bq_plan_run(plan, &da, NULL, 0, NULL);
  bq__affine_force_entry = -1;
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run -> %s: %s | %s", bq_status_name(st), bq_last_error(), what);
  BQ_OK(bq_synchronize(NULL), "%s", what);
  /* (forcing bq_affine_lean forces the lean route, which takes bq_affine_pair where it applies) */
  const int paired = c->force == BQ__AFFINE_LEAN && plan->kernels[BQ__AFFINE_PAIR] && g_last_fn != NULL &&
                     g_last_fn == plan_fn(plan, BQ__AFFINE_PAIR);
  g_pairs += paired;
  if (c->force >= 0 && !paired)
    cr_assert(g_last_fn != NULL && g_last_fn == plan_fn(plan, c->force), "%s was not the kernel launched | %s",
              k_entry_names[c->force], what);
  /* the reference, into a copy of the poisoned image */
  unsigned char *expected = (unsigned char *)malloc(out.total), *got = (unsigned char *)malloc(out.total);
  cr_assert(expected && got);
  memcpy(expected, out.h, out.total);
  hr = ha;
  hr.x = has_x ? x.h + x.pre : NULL;
  hr.dy = bwd ? dy.h + dy.pre : NULL;
  if (bwd) hr.dx = expected + out.pre;
  else hr.y = expected + out.pre;
  hr.scales = sc.h + sc.pre;
  hr.zero_points = c->zps ? (const int32_t *)(void *)(zp.h + zp.pre) : NULL;
  cr_assert_eq(ref_run(&c->d, &hr), 0, "reference refused | %s", what);
  BQ_OK(bq_memcpy_to_host(got, out.dev, out.total), "%s", what);
  const size_t es = ref_dtype_size(ot);
  size_t bad = ref_compare(ot, expected, got, (int64_t)(out.total / es), msg, sizeof msg);
  cr_assert_eq(bad, 0, "%zu elements differ (index in the allocation; output from %zu):\n%s| %s", bad, out.pre / es,
               msg, what);
  check_unchanged(&x, "x", what);
  check_unchanged(&dy, "dy", what);
  check_unchanged(&sc, "scales", what);
  check_unchanged(&zp, "zero_points", what);
  free(expected);
  free(got);
  dbuf_free(&x), dbuf_free(&dy), dbuf_free(&out), dbuf_free(&sc), dbuf_free(&zp);
}

static int vec_of(bq_dtype T) { return 16 / (int)ref_dtype_size(T); }

/* A leading dimension for the scales of d over [rows, cols] in blocks of B: 0 (the default),
   or in turn the least valid one plus 0 to 3 (MN-major: the rows, often not a multiple of 4)
   and the default plus 1 to 5 */
static int64_t pick_grs(const bq_desc *d, int64_t rows, int64_t cols, int64_t B, int larger)
{
  static unsigned turn;
  ref_scales S;
  cr_assert_eq(ref_scales_init(&S, d, rows, cols, B, 0), 0);
  if (!larger) return 0;
  return turn++ % 2 ? S.ld + rnd_range(1, 5) : (S.mn ? S.prows : S.ld) + rnd_range(0, 3);
}

static scase new_case(const bq_desc *d, int64_t rows, int64_t cols, int64_t B, int force)
{
  scase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.rows = rows;
  c.cols = cols;
  c.B = B;
  c.force = force;
  const bq_desc n = ref_desc_normalize(d);
  c.zps = !ref_is_fp8(n.int_type) && n.scale_type != BQ_UE8M0X4 && rnd() % 4 != 0;
  return c;
}

/* Random shapes through the host's choice of kernel: per block, B in 1, 3, 8, 100 and 128
   with rows and columns off multiples of B (and one case on them); per group, groups of 1,
   3, 16, 32, 100 and 128. Strides, offsets and the scales' leading dimension vary. */
static void static_random(const bq_desc *d)
{
  const int block = d->granularity == BQ_PER_BLOCK;
  static const int64_t bs[] = {1, 3, 8, 100, 128}, gs[] = {1, 3, 16, 32, 100, 128};
  const int n = block ? COUNT(bs) + 1 : COUNT(gs);
  for (int i = 0; i < n; i++) {
    int64_t B, rows, cols;
    if (block) {
      B = i < COUNT(bs) ? bs[i] : 16;
      rows = i < COUNT(bs) ? (B < 50 ? 3 * B + rnd_range(1, B) : rnd_range(B + 1, 2 * B - 1)) : 3 * B;
      cols = i < COUNT(bs) ? (B < 50 ? 5 * B + rnd_range(1, B) : 2 * B + rnd_range(1, B - 1)) : 4 * B;
    } else {
      B = gs[i];
      rows = rnd_range(1, 70);
      cols = B * rnd_range(1, B < 50 ? 20 : 4);
    }
    scase c = new_case(d, rows, cols, B, -1);
    c.xpad = i % 3 == 1 ? rnd_range(1, 9) : 0;
    c.ypad = i % 3 == 2 ? rnd_range(1, 9) : 0;
    c.xoff = i % 2 ? (int)rnd_range(1, 7) : 0;
    c.yoff = i % 2 ? (int)rnd_range(1, 7) : 0;
    c.soff = (int)rnd_range(0, 3);
    c.grs = pick_grs(d, rows, cols, B, i % 2);
    run_static(&c);
  }
}

/* Each entry point by name on shapes it serves (the host's rules: bq_affine and
   bq_affine_odd any shape; bq_affine_blocks blocks of whole 16-byte accesses on aligned
   rows, cols a multiple of B; bq_affine_narrow blocks of 64 elements or more, cols a
   multiple of them; bq_affine_flat one dense array of row-major parameters) */
static void static_forced(const bq_desc *d)
{
  const bq_desc n = ref_desc_normalize(d);
  bq_plan *plan = plan_get(d, "forced select");
  const bq_desc *pd = &plan->desc;
  const int block = n.granularity == BQ_PER_BLOCK, mn = n.scale_layout == BQ_SCALES_MN_MAJOR;
  const int64_t p = vec_of(n.float_type);
  /* the row kernels: B short, odd, whole accesses, long; partial tiles per block */
  static const int64_t bs[] = {3, 7, 16, 100};
  for (int i = 0; i < COUNT(bs); i++) {
    const int64_t B = bs[i];
    const int64_t cols = block ? B * (i % 3 + 1) + (i % 2 ? B / 2 + 1 : 0) : B * (i + 2);
    const int64_t rows = block ? (B < 20 ? 2 * B + i : i + 2) : 1 + 5 * i;
    for (int e = 0; e < 2; e++) {
      scase c = new_case(d, rows, cols, B, e ? BQ__AFFINE_ODD : BQ__AFFINE_ROW);
      c.xpad = c.ypad = i % 2 ? 3 : 0;
      c.xoff = c.yoff = i % 3 ? 1 : 0;
      c.grs = pick_grs(d, rows, cols, B, i == 2);
      run_static(&c);
    }
  }
  if (block) { /* rows shorter than one access, B longer, rows aligned: a tile without a whole access. */
    scase c = new_case(d, 5, p > 1 ? p - 1 : 1, p + 3, BQ__AFFINE_ROW);
    run_static(&c);
    c.force = BQ__AFFINE_ODD;
    run_static(&c);
  }
  if (bq__affine_ga(pd)) /* whole aligned accesses a block, cols a multiple of B; rows partial per block */
    for (int i = 0; i < 3; i++) {
      const int64_t B = p * (i == 0 ? 1 : i == 1 ? 4 : 17);
      scase c = new_case(d, block ? (i == 0 ? 2 * B + 1 : i + 2) : 1 + 3 * i, 3 * B, B, BQ__AFFINE_BLOCKS);
      c.xpad = c.ypad = i % 2 ? 16 : 0;
      c.grs = pick_grs(d, c.rows, c.cols, B, i == 1);
      run_static(&c);
    }
  if (bq__affine_na(pd)) /* blocks of 64 elements or more, straddling accesses */
    for (int i = 0; i < 2; i++) {
      const int64_t B = i == 0 ? 65 : 301;
      scase c = new_case(d, block ? (i == 0 ? 70 : 3) : 1 + 2 * i, 2 * B, B, BQ__AFFINE_NARROW);
      c.xpad = c.ypad = i ? 5 : 0;
      c.xoff = c.yoff = 1;
      run_static(&c);
    }
  if (block && n.direction == BQ_FORWARD && n.op != BQ_FAKE_QUANTIZE) {
    /* the lean route: dense aligned rows, blocks and rows whole accesses (the last block of a
       row partial on even i), rows partial per block; no zero points on odd i, where 16-bit
       quantize takes bq_affine_pair */
    const int pairs = g_pairs;
    for (int i = 0; i < 4; i++) {
      const int64_t B = p * (i % 2 + 1) * (i < 2 ? 1 : 16), cols = B * (i + 1) + (i % 2 ? 0 : p);
      scase c = new_case(d, 2 * B + 1 + i, cols, B, BQ__AFFINE_LEAN);
      if (i % 2) c.zps = 0;
      c.grs = pick_grs(d, c.rows, cols, B, i >= 2);
      run_static(&c);
    }
    if (n.op == BQ_QUANTIZE && (n.float_type == BQ_F16 || n.float_type == BQ_BF16))
      cr_assert(g_pairs - pairs == 2, "bq_affine_pair took %d of the 2 lean cases without zero points", g_pairs - pairs);
  }
  if (bq__affine_fr(pd) && !block && !mn) /* one flat array whose accesses straddle groups */
    for (int i = 0; i < 2; i++) {
      /* a group at least the kernel's tile of 32 fr accesses spread over 30 groups, off
         the access grid; packed scales: whole words a row */
      int64_t G = 32 * bq__affine_fr(pd) * p / 30 + 1 + 2 * p * i;
      if (G % p == 0) G++;
      const int64_t ng = n.scale_type == BQ_UE8M0X4 ? 4 * (i + 1) : i + 2;
      scase c = new_case(d, i ? 3 : 1, G * ng, G, BQ__AFFINE_FLAT);
      c.xoff = c.yoff = i;
      run_static(&c);
    }
}

static bq_desc static_desc(bq_op op, bq_direction dir, bq_granularity g, bq_dtype T, bq_dtype I, bq_dtype st,
                           bq_scale_layout layout, int narrow)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.direction = dir;
  d.granularity = g;
  d.float_type = T;
  d.int_type = I;
  d.scale_type = st;
  d.scale_layout = layout;
  if (narrow && I == BQ_S8) d.qmin = -7, d.qmax = 7;
  if (narrow && I == BQ_U8) d.qmin = 3, d.qmax = 200;
  return d;
}

/* per block: every float type x storage type of one op and direction; the scale type turns
   among f32, T and UE8M0 and integer q-ranges between full and narrow over the matrix */
static void run_block_static(bq_op op, bq_direction dir)
{
  begin();
  for (int ti = 0; ti < 4; ti++)
    for (int ii = 0; ii < 4; ii++) {
      const int k = (((int)op * 2 + (int)dir) * 4 + ti) * 4 + ii;
      const bq_dtype T = k_float_types[ti], sts[3] = {BQ_F32, T, BQ_UE8M0};
      const bq_desc d = static_desc(op, dir, BQ_PER_BLOCK, T, k_storage_types[ii], sts[k % 3], BQ_SCALES_ROW_MAJOR,
                                    k % 4 == 3);
      static_random(&d);
      static_forced(&d);
    }
  /* one larger problem, partial tiles both ways */
  const bq_desc d = static_desc(op, dir, BQ_PER_BLOCK, BQ_BF16, BQ_E4M3, BQ_F32, BQ_SCALES_ROW_MAJOR, 0);
  scase c = new_case(&d, 1000, 1000, 128, -1);
  run_static(&c);
}

Test(gpu_blocks, static_quantize_forward, .timeout = 600) { run_block_static(BQ_QUANTIZE, BQ_FORWARD); }
Test(gpu_blocks, static_quantize_backward, .timeout = 600) { run_block_static(BQ_QUANTIZE, BQ_BACKWARD); }
Test(gpu_blocks, static_dequantize_forward, .timeout = 600) { run_block_static(BQ_DEQUANTIZE, BQ_FORWARD); }
Test(gpu_blocks, static_dequantize_backward, .timeout = 600) { run_block_static(BQ_DEQUANTIZE, BQ_BACKWARD); }
Test(gpu_blocks, static_fake_quantize_forward, .timeout = 600) { run_block_static(BQ_FAKE_QUANTIZE, BQ_FORWARD); }
Test(gpu_blocks, static_fake_quantize_backward, .timeout = 600) { run_block_static(BQ_FAKE_QUANTIZE, BQ_BACKWARD); }

/* per group, MN-major scales and packed UE8M0 (row-major and MN-major): quantize,
   dequantize and fake quantize over a spread of float, storage and scale types */
typedef struct { bq_op op; bq_direction dir; bq_dtype T, I, st; bq_scale_layout layout; } layout_case;
static const layout_case k_layout_cases[] = {
  {BQ_QUANTIZE, BQ_FORWARD, BQ_F32, BQ_S8, BQ_F32, BQ_SCALES_MN_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_BF16, BQ_E4M3, BQ_BF16, BQ_SCALES_MN_MAJOR},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_F64, BQ_U8, BQ_F32, BQ_SCALES_MN_MAJOR},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_F16, BQ_U8, BQ_F32, BQ_SCALES_MN_MAJOR},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_F64, BQ_E5M2, BQ_F64, BQ_SCALES_MN_MAJOR},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_BF16, BQ_E4M3, BQ_BF16, BQ_SCALES_MN_MAJOR},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_BF16, BQ_S8, BQ_UE8M0, BQ_SCALES_MN_MAJOR},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_F32, BQ_E4M3, BQ_F32, BQ_SCALES_MN_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_BF16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_F32, BQ_S8, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_F64, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_BF16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_F32, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_BF16, BQ_E5M2, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_F16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_F64, BQ_U8, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_BF16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_F16, BQ_S8, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_F32, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_F32, BQ_U8, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_F64, BQ_E5M2, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR},
};

static void run_layout_static(int packed)
{
  begin();
  for (int i = 0; i < COUNT(k_layout_cases); i++) {
    const layout_case *l = &k_layout_cases[i];
    if ((l->st == BQ_UE8M0X4) != packed) continue;
    const bq_desc d = static_desc(l->op, l->dir, BQ_PER_GROUP, l->T, l->I, l->st, l->layout, i % 3 == 2);
    static_random(&d);
    static_forced(&d);
  }
}

Test(gpu_blocks, static_mn_major, .timeout = 600) { run_layout_static(0); }
Test(gpu_blocks, static_ue8m0x4, .timeout = 600) { run_layout_static(1); }

/* ==== dynamic quantize ======================================================================== */

#define NKINDS 9
static const char *const k_kind_names[NKINDS] = {"random", "zeros", "constant", "outlier", "nan_inf",
                                                 "all_nan", "subnormal", "near_max", "positive"};

/* element (r, c) of a segment of kind `kind` (mag: its typical magnitude) */
static double dyn_value(bq_dtype T, int kind, double mag, int first)
{
  switch (kind) {
  case 1: return (rnd() & 1) ? 0.0 : -0.0;
  case 2: return mag;
  case 3: return first ? ((rnd() & 1) ? 1e30 : -t_max(T)) : (rnd_unit() - 0.5) * mag;
  case 4: return rnd() % 5 == 0 ? NAN : rnd() % 7 == 0 ? ((rnd() & 1) ? INFINITY : -INFINITY) : (rnd_unit() - 0.5) * mag;
  case 5: return NAN;
  case 6: return (rnd_unit() - 0.5) * (T == BQ_F64 ? 0x1p-1060 : T == BQ_F16 ? 0x1p-20 : 0x1p-140);
  case 7: return (rnd_unit() - 0.5) * 2 * t_max(T);
  case 8: return rnd_unit() * mag;
  default: return (rnd_unit() - 0.5) * mag;
  }
}

typedef struct dcase {
  bq_desc d;
  int64_t rows, cols, B, xs, ys, grs; /* xs, ys: row strides (0: cols) */
  int xoff, yoff, soff;
  int kind;     /* every segment of this kind, or -1: a kind per segment */
  double bound; /* args.amax_bound */
  int fast;     /* per block: the launch's fast_groups must be this (-1: not checked) */
} dcase;

static void run_dynamic(const dcase *c)
{
  char what[768], msg[MSG_CAP];
  const bq_desc dn = refd_desc_normalize(&c->d);
  const bq_dtype T = dn.float_type, ses = ref_scale_elem_type(dn.scale_type);
  const int x4 = dn.scale_type == BQ_UE8M0X4, asym = dn.asymmetric;
  const size_t ts = ref_dtype_size(T), ss = ref_dtype_size(ses);
  bq_args ha, da, hr;
  ref_layout L;
  dbuf x, y, sc, zp;
  memset(&ha, 0, sizeof ha);
  memset(&x, 0, sizeof x), memset(&y, 0, sizeof y), memset(&sc, 0, sizeof sc), memset(&zp, 0, sizeof zp);
  ha.rows = c->rows;
  ha.cols = c->cols;
  ha.x_row_stride = c->xs;
  ha.y_row_stride = c->ys;
  ha.group_size = c->B;
  ha.group_row_stride = c->grs;
  ha.amax_bound = c->bound;
  if (dn.rounding == BQ_ROUND_STOCHASTIC) ha.seed = rnd(), ha.offset = rnd() % 2 ? rnd() : ~0ull - rnd() % 1000;
  bq_plan *plan = plan_get(&c->d, "dynamic select");
  snprintf(what, sizeof what, "%.300s [%lld, %lld] B %lld strides %lld/%lld grs %lld offs %d/%d/%d kind %s bound %a | "
           "BQ_TEST_SEED=0x%llx", bq_plan_sku(plan), (long long)c->rows, (long long)c->cols, (long long)c->B,
           (long long)c->xs, (long long)c->ys, (long long)c->grs, c->xoff, c->yoff, c->soff,
           c->kind < 0 ? "mixed" : k_kind_names[c->kind], c->bound, (unsigned long long)g_seed);
  cr_assert_eq(ref_layout_init(&L, &dn, &ha), 0, "bad case | %s", what);
  dbuf_make(&x, ts, L.x_extent, c->xoff);
  dbuf_make(&y, 1, L.y_extent, c->yoff);
  dbuf_make(&sc, ss, L.n_params, x4 ? 4 * c->soff : c->soff);
  if (asym) dbuf_make(&zp, 4, L.n_params, c->soff);
  fill_garbage(x.h, x.total);
  memset(y.h, POISON, y.total);
  memset(sc.h, POISON, sc.total);
  if (asym) memset(zp.h, POISON, zp.total);
  /* a kind and a magnitude per segment (a tile per block; a group otherwise) */
  const int64_t segr = dn.granularity == BQ_PER_BLOCK ? c->B : 1, nsc = (c->cols + c->B - 1) / c->B;
  for (int64_t r = 0; r < c->rows; r++)
    for (int64_t k = 0; k < c->cols; k++) {
      const uint64_t seg = (uint64_t)(r / segr) * (uint64_t)nsc + (uint64_t)(k / c->B);
      uint64_t h = (seg + 1) * 0x9e3779b97f4a7c15ull ^ g_seed;
      h ^= h >> 29;
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 32;
      const int kind = c->kind >= 0 ? c->kind : (int)(h % NKINDS);
      const double mag = ldexp(1.0, (int)((h >> 8) % 40) - 20);
      const int first = r % segr == 0 && k % c->B == (int64_t)((h >> 20) % (uint64_t)c->B);
      store_t(T, x.h + x.pre, r * L.xs + k, dyn_value(T, kind, mag, first));
    }
  BQ_OK(bq_memcpy_to_device(x.dev, x.h, x.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(y.dev, y.h, y.total), "%s", what);
  BQ_OK(bq_memcpy_to_device(sc.dev, sc.h, sc.total), "%s", what);
  if (asym) BQ_OK(bq_memcpy_to_device(zp.dev, zp.h, zp.total), "%s", what);
  da = ha;
  da.x = x.dev + x.pre;
  da.y = y.dev + y.pre;
  da.out_scales = sc.dev + sc.pre;
  da.out_zero_points = asym ? (int32_t *)(void *)(zp.dev + zp.pre) : NULL;
  size_t ws = 1;
  BQ_OK(bq_plan_workspace_size(plan, &da, &ws), "%s", what);
  cr_assert_eq(ws, 0, "a workspace of %zu bytes | %s", ws, what);
  memset(g_last_params, 0, sizeof g_last_params);
  g_note_bytes = sizeof g_dparams;
  bq_status st = bq_plan_run(plan, &da, NULL, 0, NULL);
  g_note_bytes = 0;
  memcpy(&g_dparams, g_last_params, sizeof g_dparams);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_run -> %s: %s | %s", bq_status_name(st), bq_last_error(), what);
  BQ_OK(bq_synchronize(NULL), "%s", what);
  if (c->fast >= 0 && !g_sr)
    cr_assert_eq(g_dparams.fast_groups != 0, c->fast, "fast_groups %d, expected %d | %s", g_dparams.fast_groups,
                 c->fast, what);
  /* the reference, into copies of the poisoned images */
  unsigned char *ey = (unsigned char *)malloc(y.total), *es = (unsigned char *)malloc(sc.total);
  unsigned char *ez = asym ? (unsigned char *)malloc(zp.total) : NULL, *got = (unsigned char *)malloc(y.total + sc.total + zp.total);
  cr_assert(ey && es && got && (!asym || ez));
  memcpy(ey, y.h, y.total);
  memcpy(es, sc.h, sc.total);
  if (asym) memcpy(ez, zp.h, zp.total);
  hr = ha;
  hr.x = x.h + x.pre;
  hr.y = ey + y.pre;
  hr.out_scales = es + sc.pre;
  hr.out_zero_points = asym ? (int32_t *)(void *)(ez + zp.pre) : NULL;
  cr_assert_eq(refd_run(&c->d, &hr), 0, "reference refused | %s", what);
  if (dn.rounding == BQ_ROUND_STOCHASTIC) /* y again: the scales written, quantized stochastically */
    cr_assert_eq(ref_dynamic_sr(&dn, &hr), 0, "the SR reference refused | %s", what);
  BQ_OK(bq_memcpy_to_host(got, y.dev, y.total), "%s", what);
  size_t bad = ref_compare(dn.int_type, ey, got, (int64_t)y.total, msg, sizeof msg);
  cr_assert_eq(bad, 0, "data: %zu bytes differ (index in the allocation; y from %zu):\n%s| %s", bad, y.pre, msg, what);
  BQ_OK(bq_memcpy_to_host(got, sc.dev, sc.total), "%s", what);
  bad = ref_compare(ses, es, got, (int64_t)(sc.total / ss), msg, sizeof msg);
  cr_assert_eq(bad, 0, "scales: %zu differ (index in the allocation; scales from %zu):\n%s| %s", bad, sc.pre / ss,
               msg, what);
  if (x4) /* each parameter row's bytes past its last group, to its word's end, are 0 */
    for (int64_t r = 0; r < L.S.prows; r++)
      for (int64_t g = L.S.nb; g % 4; g++)
        cr_assert_eq(got[sc.pre + ref_scale_index(&L.S, r, g * L.S.B)], 0, "row %lld's byte of group %lld | %s",
                     (long long)r, (long long)g, what);
  if (asym) {
    BQ_OK(bq_memcpy_to_host(got, zp.dev, zp.total), "%s", what);
    bad = ref_compare(BQ_S32, ez, got, (int64_t)(zp.total / 4), msg, sizeof msg);
    cr_assert_eq(bad, 0, "zero points: %zu differ (index in the allocation; from %zu):\n%s| %s", bad, zp.pre / 4, msg,
                 what);
  }
  check_unchanged(&x, "x", what);
  free(ey), free(es), free(ez), free(got);
  dbuf_free(&x), dbuf_free(&y), dbuf_free(&sc), dbuf_free(&zp);
}

static bq_desc dyn_desc(bq_granularity g, bq_dtype T, bq_dtype I, int asym, bq_dtype st, int pow2,
                        bq_scale_layout layout)
{
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_DYNAMIC_QUANTIZE;
  d.granularity = g;
  d.float_type = T;
  d.int_type = I;
  d.asymmetric = asym;
  d.scale_type = st;
  d.pow2_scales = pow2;
  d.scale_layout = layout;
  return d;
}

/* a bound for a symmetric plan half the time: near the data's magnitudes, often below a
   tile's amax */
static double pick_bound(const bq_desc *d)
{
  if (d->asymmetric || rnd() & 1) return 0.0;
  return ldexp(1.0 + rnd_unit(), (int)rnd_range(-20, 20));
}

static dcase dyn_case(const bq_desc *d, int64_t rows, int64_t cols, int64_t B)
{
  dcase c;
  memset(&c, 0, sizeof c);
  c.d = *d;
  c.rows = rows;
  c.cols = cols;
  c.B = B;
  c.kind = -1;
  c.fast = -1;
  c.bound = pick_bound(d);
  return c;
}

/* Per block: named shapes with the path the host must give their tiles, then B in 1, 3, 8,
   100 and 128 over partial tiles, strided, misaligned, with larger group_row_stride. */
static void dyn_block(const bq_desc *d)
{
  const int64_t p = vec_of(d->float_type);
  const int64_t wide = 4 * 128 + p; /* the right edge tile whole accesses */
  struct { int64_t rows, cols, B, xs, ys; int xoff, yoff, fast; } named[] = {
    {300, wide, 128, 0, 0, 0, 0, 1},                 /* aligned rows, B whole accesses */
    {129, 4095, 128, 4096, 4095 + 3, 0, 1, 1},      /* a padded stride: the right edge tile as windows */
    {257, 4095, 128, 0, 0, 0, 2, 0},                 /* odd rows: every tile as windows */
    {257, 4095, 128, 0, 0, 0, 0, 0},                 /* the same, y aligned */
    {40, 6 * p, 2 * p, 6 * p + 1, 0, 0, 0, 0},       /* an odd x stride */
    {40, 6 * p, 2 * p, 6 * p + 1, 6 * p + 9, 0, 0, 0}, /* and y's 8 more */
    {20, 6 * p, 2 * p, 0, 0, 3, 1, 0},               /* x off the 16-byte grid */
    {50, 3 * (p + 1) + 2, p + 1, 0, 0, 0, 0, 0},     /* B not whole accesses */
    {37, 5 * p + 3, 64 * p, 8 * p, 0, 0, 0, 1},      /* the whole matrix in one tile */
    {600, 64 * p + 3 * p, 64 * p, 0, 0, 0, 1, 1},    /* tiles past the registers: read twice */
    {1100, 147 * p, 2 * p, 0, 0, 0, 2, 1},           /* more tiles than a wave of blocks: staged, each block several */
    {1100, 147 * p + 1, 2 * p, 0, 0, 0, 0, 0},       /* the same off the grid */
    {700, 9 * 128 + 5, 128, 0, 9 * 128 + 13, 0, 0, 0}, /* odd rows of 128-row tiles, more than a wave */
  };
  /* each named shape staged where it may be (f16 and bf16 tiles that fit the registers) and
     a block a tile (bq__tiles_staged 0) */
  for (int st = 0; st < 2; st++)
  for (int i = 0; i < COUNT(named); i++) {
    bq__tiles_staged = st;
    dcase c = dyn_case(d, named[i].rows, named[i].cols, named[i].B);
    c.xs = named[i].xs;
    c.ys = named[i].ys;
    c.xoff = named[i].xoff;
    c.yoff = named[i].yoff;
    c.fast = named[i].fast;
    c.grs = pick_grs(d, c.rows, c.cols, c.B, i % 2);
    run_dynamic(&c);
    /* staged restated: f16 and bf16 tiles on the grid that fit the registers */
    const int staged = st && p == 8 && c.fast && (c.B / p) * c.B <= 2048;
    if (!g_sr) cr_assert_eq(g_dparams.staged, staged, "staged %d, expected %d: named shape %d", g_dparams.staged, staged, i);
  }
  bq__tiles_staged = 1;
  static const int64_t bs[] = {1, 3, 8, 100, 128};
  for (int i = 0; i < COUNT(bs); i++) {
    const int64_t B = bs[i];
    dcase c = dyn_case(d, B < 50 ? 3 * B + rnd_range(1, B) : B + rnd_range(1, B - 1),
                       B < 50 ? 5 * B + rnd_range(1, B) : 2 * B + rnd_range(1, B - 1), B);
    c.xs = i % 2 ? c.cols + rnd_range(1, 9) : 0;
    c.ys = i % 3 ? c.cols + rnd_range(1, 9) : 0;
    c.xoff = i % 2 ? 0 : (int)rnd_range(0, 3);
    c.soff = (int)rnd_range(0, 3);
    c.grs = pick_grs(d, c.rows, c.cols, B, i % 2 == 0);
    run_dynamic(&c);
  }
  /* a tile of each kind alone */
  for (int k = 0; k < NKINDS; k++) {
    dcase c = dyn_case(d, 2 * 16 + 5, 3 * 16 + 7, 16);
    c.kind = k;
    run_dynamic(&c);
  }
}

/* Per group with MN-major or packed scales: groups the fast path takes (whole accesses,
   power-of-two counts of them, aligned rows) and segments (7, 100, odd strides), group
   counts off multiples of 4, the leading dimension default or larger. */
static void dyn_group(const bq_desc *d)
{
  const int64_t p = vec_of(d->float_type);
  static const int64_t gs[] = {16, 32, 128, 7, 100, 1};
  for (int i = 0; i < COUNT(gs); i++)
    for (int j = 0; j < 2; j++) {
      const int64_t G = gs[i] == 16 ? 2 * p : gs[i], ng = j ? 4 * rnd_range(1, 3) : 4 * rnd_range(0, 3) + rnd_range(1, 3);
      dcase c = dyn_case(d, j ? rnd_range(1, 9) : rnd_range(10, 70), G * ng, G);
      c.xs = i >= 3 && j ? c.cols + 2 * rnd_range(0, 5) + 1 : 0;
      c.ys = j ? 0 : c.cols + rnd_range(0, 5);
      c.xoff = i >= 3 ? (int)rnd_range(0, 5) : 0;
      c.soff = (int)rnd_range(0, 3);
      c.grs = pick_grs(d, c.rows, c.cols, G, j);
      run_dynamic(&c);
    }
}

Test(gpu_blocks, dynamic_per_block, .timeout = 600)
{
  begin();
  const bq_desc ds[] = {
    dyn_desc(BQ_PER_BLOCK, BQ_BF16, BQ_S8, 0, BQ_F32, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F32, BQ_U8, 1, BQ_F32, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F16, BQ_S8, 1, BQ_F16, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F64, BQ_S8, 0, BQ_F64, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_BF16, BQ_E4M3, 0, BQ_UE8M0, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F32, BQ_E4M3, 0, BQ_F32, 1, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F16, BQ_E5M2, 0, BQ_F32, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F64, BQ_E4M3, 0, BQ_UE8M0, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_BF16, BQ_U8, 1, BQ_BF16, 1, BQ_SCALES_ROW_MAJOR),
  };
  for (int i = 0; i < COUNT(ds); i++) dyn_block(&ds[i]);
}

/* the DeepSeek-style weight shape: bf16 [1024, 1024] in 128 x 128 tiles to e4m3 */
Test(gpu_blocks, dynamic_per_block_128_e4m3, .timeout = 600)
{
  begin();
  const bq_dtype sts[3] = {BQ_F32, BQ_UE8M0, BQ_BF16};
  for (int i = 0; i < 3; i++) {
    const bq_desc d = dyn_desc(BQ_PER_BLOCK, BQ_BF16, BQ_E4M3, 0, sts[i], 0, BQ_SCALES_ROW_MAJOR);
    dcase c = dyn_case(&d, 1024, 1024, 128);
    c.fast = 1;
    run_dynamic(&c);
  }
}

Test(gpu_blocks, dynamic_mn_major_and_ue8m0x4, .timeout = 600)
{
  begin();
  const bq_desc ds[] = {
    dyn_desc(BQ_PER_GROUP, BQ_F32, BQ_S8, 0, BQ_F32, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_BF16, BQ_U8, 1, BQ_BF16, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F16, BQ_E4M3, 0, BQ_UE8M0, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F64, BQ_S8, 0, BQ_F32, 1, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_BF16, BQ_E4M3, 0, BQ_UE8M0X4, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F32, BQ_E5M2, 0, BQ_UE8M0X4, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F16, BQ_S8, 0, BQ_UE8M0X4, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_BF16, BQ_E4M3, 0, BQ_UE8M0X4, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F32, BQ_E4M3, 0, BQ_UE8M0X4, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F64, BQ_E5M2, 0, BQ_UE8M0X4, 0, BQ_SCALES_MN_MAJOR),
  };
  for (int i = 0; i < COUNT(ds); i++) dyn_group(&ds[i]);
}

/* Stochastic rounding (desc.rounding): per block and per group with MN-major and packed
   scales, the shapes above, each case with a fresh seed and offset, against the reference's
   scales quantized by reference_sr.h */
Test(gpu_blocks, dynamic_stochastic_rounding, .timeout = 600)
{
  begin();
  const bq_desc ds[] = {
    dyn_desc(BQ_PER_BLOCK, BQ_BF16, BQ_S8, 0, BQ_F32, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F32, BQ_U8, 1, BQ_F32, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F16, BQ_E4M3, 0, BQ_UE8M0, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_BLOCK, BQ_F64, BQ_E5M2, 0, BQ_F64, 1, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_BF16, BQ_U8, 1, BQ_BF16, 0, BQ_SCALES_MN_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F32, BQ_E4M3, 0, BQ_UE8M0X4, 0, BQ_SCALES_ROW_MAJOR),
    dyn_desc(BQ_PER_GROUP, BQ_F16, BQ_S8, 0, BQ_UE8M0X4, 0, BQ_SCALES_MN_MAJOR),
  };
  g_sr = 1;
  for (int i = 0; i < COUNT(ds); i++) {
    bq_desc d = ds[i];
    d.rounding = BQ_ROUND_STOCHASTIC;
    if (d.granularity == BQ_PER_BLOCK) dyn_block(&d);
    else dyn_group(&d);
  }
  g_sr = 0;
}
