/* test_sku.c - SKUs name kernels one to one, and NVRTC compiles them.

   (a) Every valid combination of op (quantize, dequantize, fake quantize, dynamic
       quantize), direction, granularity (per block included), float type, int type (s8, u8,
       e4m3, e5m2), q-range, scale type (packed UE8M0 included), scale layout,
       symmetric/asymmetric (dynamic quantize) and target is specialized with
       bq__kernel_for (no GPU, no NVRTC):
       equal SKUs mean byte-identical source and the same target; different normalized
       descriptors or targets mean different SKUs; SKUs are readable and their file names
       safe; bq_sku agrees with bq__kernel_for.
   (b) NVRTC compiles the SKUs of these sets (bq_cache_warm, disk cache off): every op for
       sm_80 and sm_90, the fused producers' and the linear layers' included; the FP8
       storage types' for sm_80, sm_89 and sm_90 too, and the software conversion's (.soft)
       for sm_89 and sm_90; per block, MN-major and packed UE8M0 SKUs on sm_80, sm_89 and
       sm_90, each SKU's kernels a module an entry point. With BQ_SKU_ALL=1
       (tools/gpu_check.sh sku) every module of every set; otherwise a sample of each pool
       of sets that holds every float type, storage type, op and entry point of the pool,
       for each arch (see sample()).
       NVRTC must be present: CI installs it, and a compile test that cannot compile
       fails rather than skips.
   Criterion runs every test in its own process, so each starts with fresh counters. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__all_descs, bq__desc_from_sku and their kin */
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const bq_op OPS[] = {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE, BQ_DYNAMIC_QUANTIZE};
static const bq_direction DIRS[] = {BQ_FORWARD, BQ_BACKWARD};
static const bq_granularity GRANS[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP};
/* (a) also takes per block (the compile sets sample it: see block_set) */
static const bq_granularity GRANS_ALL[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP, BQ_PER_BLOCK};
static const bq_dtype FTS[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
static const bq_dtype ITS[] = {BQ_S8, BQ_U8};
/* (a) also takes the FP8 storage types, which have no q-range (only {0, 0} is valid) */
static const bq_dtype ITS_ALL[] = {BQ_S8, BQ_U8, BQ_E4M3, BQ_E5M2};
static int is_fp8(bq_dtype t) { return t == BQ_E4M3 || t == BQ_E5M2; }
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* q-ranges per int type. The first two are the same range (both zero means the full
   range), so they must share SKUs; the rest are distinct. */
typedef struct qrange { int qmin, qmax; } qrange;
static const qrange Q_S8[] = {{0, 0}, {-128, 127}, {-7, 7}, {5, 5}, {-128, 0}};
static const qrange Q_U8[] = {{0, 0}, {0, 255}, {3, 200}, {5, 5}, {0, 1}};
#define NQ 5
#define NQ_DISTINCT 4

/* scale types: default, f32, the float type spelled out (the same as default), packed
   UE8M0 (per group, symmetric); each in either layout (MN-major: per group only) */
#define NST 4
#define NLAYOUT 2

static const bq__target TARGETS[] = {
    {80, 0, 0, 0}, /* sm_80 cubin */
    {90, 0, 0, 0}, /* sm_90 cubin */
    {90, 1, 0, 0}, /* compute_90 PTX */
    {90, 0, 1, 0}, /* sm_90a cubin */
};

typedef struct entry {
  bq_desc in;   /* as given */
  bq_desc norm; /* after bq__normalize */
  char canon[128]; /* the kernel it names, by the documented defaults (independent of bq__normalize) */
  bq__target target;
  char sku[256];
  char file[256];
  size_t source_len;
} entry;

static entry *entries;
static size_t n_entries;

static int same_desc(const bq_desc *a, const bq_desc *b) {
  return a->op == b->op && a->direction == b->direction && a->granularity == b->granularity &&
         a->float_type == b->float_type && a->int_type == b->int_type && a->qmin == b->qmin &&
         a->qmax == b->qmax && a->scale_type == b->scale_type && a->device == b->device &&
         a->asymmetric == b->asymmetric && a->scale_layout == b->scale_layout && a->pow2_scales == b->pow2_scales;
}
static int same_target(const bq__target *a, const bq__target *b) {
  return a->arch == b->arch && a->ptx == b->ptx && a->arch_a == b->arch_a;
}
static void describe(const entry *e, char *buf, size_t n) {
  snprintf(buf, n, "{op %d dir %d gran %d ft %d it %d q [%d,%d] st %d layout %d asym %d | target %d ptx %d a %d}",
           (int)e->in.op, (int)e->in.direction, (int)e->in.granularity, (int)e->in.float_type, (int)e->in.int_type,
           e->in.qmin, e->in.qmax, (int)e->in.scale_type, (int)e->in.scale_layout, e->in.asymmetric, e->target.arch,
           e->target.ptx, e->target.arch_a);
}

/* The full specialized source of e (the caller frees k->source.p). */
static void build(const entry *e, bq__kernel_src *k) {
  bq_status st = bq__kernel_for(&e->in, &e->target, k);
  char d[256];
  describe(e, d, sizeof d);
  cr_assert_eq(st, BQ_SUCCESS, "bq__kernel_for %s: %s (%s)", d, bq_status_name(st), bq_last_error());
  cr_assert_not_null(k->source.p, "%s: no source", d);
}

/* The documented meaning of a desc, worked out here from the header's comments and
   docs/numerics.md rather than by bq__normalize: int_type 0 is s8; qmin = qmax = 0 is the full
   range; scale_type 0 is f32, and per tensor the affine ops take a host
   scalar in C (f64 for f64, else f32); asymmetric only exists for dynamic quantize; the
   scale layout is its own; packed UE8M0 scales make dynamic quantize's power-of-two. */
static void canonical(const bq_desc *d, const bq__target *t, char *buf, size_t n) {
  bq_dtype it = d->int_type ? d->int_type : BQ_S8;
  int qmin = d->qmin, qmax = d->qmax;
  if (!qmin && !qmax && !is_fp8(it)) { qmin = it == BQ_S8 ? -128 : 0; qmax = it == BQ_S8 ? 127 : 255; }
  bq_dtype st = d->scale_type ? d->scale_type : BQ_F32;
  if (d->op != BQ_DYNAMIC_QUANTIZE && d->granularity == BQ_PER_TENSOR) st = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32;
  const int dyn = d->op == BQ_DYNAMIC_QUANTIZE;
  snprintf(buf, n, "%d %d %d %d %d %d %d %d %d %d %d | %d %d %d", (int)d->op, (int)d->direction, (int)d->granularity,
           (int)d->float_type, (int)it, qmin, qmax, (int)st, (int)d->scale_layout, dyn ? d->asymmetric : 0,
           dyn && st == BQ_UE8M0X4, t->arch, t->ptx, t->arch_a);
}

/* Is the combination a valid descriptor? (dynamic quantize: forward, not per channel;
   symmetric needs qmax > 0; an asymmetric range of one level is left out, see
   test_validation.c) */
static int valid(const bq_desc *d) {
  if (is_fp8(d->int_type) && (d->qmin || d->qmax || d->asymmetric)) return 0; /* symmetric, no q-range */
  if (d->scale_layout && d->granularity != BQ_PER_GROUP) return 0;          /* MN-major: per group */
  if (d->scale_type == BQ_UE8M0X4 && (d->granularity != BQ_PER_GROUP || d->asymmetric)) return 0;
  if (d->op != BQ_DYNAMIC_QUANTIZE) return d->asymmetric == 0;
  if (d->direction != BQ_FORWARD || d->granularity == BQ_PER_CHANNEL) return 0;
  int full = !d->qmin && !d->qmax;
  if (!d->asymmetric) return full || d->qmax > 0;
  return full || d->qmin != d->qmax;
}

static void enumerate(void) {
  size_t cap = NELEM(OPS) * NELEM(DIRS) * NELEM(GRANS_ALL) * NELEM(FTS) * NELEM(ITS_ALL) * NQ * NST * NLAYOUT * 2 *
               NELEM(TARGETS);
  entries = calloc(cap, sizeof *entries);
  cr_assert_not_null(entries);
  n_entries = 0;
  size_t dyn = 0, fp8 = 0, block = 0, mn = 0, x4 = 0;
  for (size_t o = 0; o < NELEM(OPS); o++)
    for (size_t r = 0; r < NELEM(DIRS); r++)
      for (size_t g = 0; g < NELEM(GRANS_ALL); g++)
        for (size_t f = 0; f < NELEM(FTS); f++)
          for (size_t i = 0; i < NELEM(ITS_ALL); i++)
            for (size_t q = 0; q < NQ; q++)
              for (size_t s = 0; s < NST; s++)
                for (int lay = 0; lay < NLAYOUT; lay++)
                for (int asym = 0; asym < 2; asym++)
                  for (size_t t = 0; t < NELEM(TARGETS); t++) {
                    entry *e = &entries[n_entries];
                    memset(&e->in, 0, sizeof e->in);
                    e->in.op = OPS[o];
                    e->in.direction = DIRS[r];
                    e->in.granularity = GRANS_ALL[g];
                    e->in.float_type = FTS[f];
                    e->in.int_type = ITS_ALL[i];
                    const qrange *qr = ITS_ALL[i] == BQ_U8 ? &Q_U8[q] : &Q_S8[q]; /* FP8: {0, 0} alone is valid */
                    e->in.qmin = qr->qmin;
                    e->in.qmax = qr->qmax;
                    e->in.scale_type = s == 0 ? BQ_DTYPE_DEFAULT : s == 1 ? BQ_F32 : s == 2 ? FTS[f] : BQ_UE8M0X4;
                    e->in.scale_layout = (bq_scale_layout)lay;
                    e->in.asymmetric = asym;
                    if (!valid(&e->in)) continue;
                    n_entries++;
                    dyn += OPS[o] == BQ_DYNAMIC_QUANTIZE;
                    fp8 += is_fp8(ITS_ALL[i]);
                    block += GRANS_ALL[g] == BQ_PER_BLOCK;
                    mn += lay;
                    x4 += e->in.scale_type == BQ_UE8M0X4;
                    e->target = TARGETS[t];
                    canonical(&e->in, &e->target, e->canon, sizeof e->canon);
                    char name[96];
                    bq_status st = bq__normalize(&e->in, &e->norm, name, sizeof name);
                    cr_assert_eq(st, BQ_SUCCESS, "normalize: %s", bq_last_error());
                    bq__kernel_src k;
                    build(e, &k);
                    cr_assert(same_target(&k.target, &e->target), "k.target differs from the target asked for");
                    memcpy(e->sku, k.sku, sizeof e->sku);
                    memcpy(e->file, k.file, sizeof e->file);
                    e->source_len = k.source.n;
                    cr_assert_eq(strlen(k.source.p), k.source.n, "source has an embedded NUL");
                    free(k.source.p);
                  }
  cr_assert(n_entries > 10000 && dyn > 1000 && fp8 > 1000 && block > 1000 && mn > 1000 && x4 > 1000,
            "%zu combinations, %zu dynamic, %zu FP8, %zu per block, %zu MN-major, %zu packed", n_entries, dyn, fp8, block,
            mn, x4);
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int by_canon(const void *a, const void *b) {
  return strcmp((*(const entry *const *)a)->canon, (*(const entry *const *)b)->canon);
}
static int by_sku(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  return strcmp(x->sku, y->sku);
}
/* by normalized desc and target */
static int by_key(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  const int kx[] = {(int)x->norm.op, (int)x->norm.direction, (int)x->norm.granularity, (int)x->norm.float_type,
                    (int)x->norm.int_type, x->norm.qmin, x->norm.qmax, (int)x->norm.scale_type, x->norm.device,
                    x->norm.asymmetric, (int)x->norm.scale_layout, x->norm.pow2_scales, x->target.arch,
                    x->target.ptx, x->target.arch_a};
  const int ky[] = {(int)y->norm.op, (int)y->norm.direction, (int)y->norm.granularity, (int)y->norm.float_type,
                    (int)y->norm.int_type, y->norm.qmin, y->norm.qmax, (int)y->norm.scale_type, y->norm.device,
                    y->norm.asymmetric, (int)y->norm.scale_layout, y->norm.pow2_scales, y->target.arch,
                    y->target.ptx, y->target.arch_a};
  for (size_t i = 0; i < NELEM(kx); i++)
    if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
  return 0;
}

static entry **sorted(int (*cmp)(const void *, const void *)) {
  entry **v = malloc(n_entries * sizeof *v);
  cr_assert_not_null(v);
  for (size_t i = 0; i < n_entries; i++) v[i] = &entries[i];
  qsort(v, n_entries, sizeof *v, cmp);
  return v;
}

/* ---- (a) uniqueness ----------------------------------------------------------------------- */
Test(sku, equal_skus_mean_identical_source_and_target) {
  enumerate();
  entry **v = sorted(by_sku);
  size_t groups = 0, shared = 0;
  for (size_t i = 0; i < n_entries;) {
    size_t j = i + 1;
    while (j < n_entries && !strcmp(v[j]->sku, v[i]->sku)) j++;
    groups++;
    if (j - i > 1) {
      bq__kernel_src first;
      build(v[i], &first);
      for (size_t m = i + 1; m < j; m++) {
        char da[256], db[256];
        describe(v[i], da, sizeof da);
        describe(v[m], db, sizeof db);
        /* a shared SKU is only allowed between spellings of one kernel */
        cr_assert(same_target(&v[i]->target, &v[m]->target), "SKU %s names two targets: %s and %s", v[i]->sku, da, db);
        cr_assert(same_desc(&v[i]->norm, &v[m]->norm), "SKU %s names two normalized descriptors: %s and %s",
                  v[i]->sku, da, db);
        cr_assert_str_eq(v[i]->canon, v[m]->canon, "SKU %s names two kernels: %s and %s", v[i]->sku, da, db);
        cr_assert_str_eq(v[i]->file, v[m]->file);
        bq__kernel_src k;
        build(v[m], &k);
        cr_assert(k.source.n == first.source.n && memcmp(k.source.p, first.source.p, k.source.n) == 0,
                  "SKU %s: %s and %s have different sources (%zu and %zu bytes)", v[i]->sku, da, db, first.source.n,
                  k.source.n);
        free(k.source.p);
        shared++;
      }
      free(first.source.p);
    }
    i = j;
  }
  /* as many SKUs as kernels the contract tells apart */
  char **canon = malloc(n_entries * sizeof *canon);
  cr_assert_not_null(canon);
  for (size_t i = 0; i < n_entries; i++) canon[i] = entries[i].canon;
  qsort(canon, n_entries, sizeof *canon, by_str);
  size_t want = 0;
  for (size_t i = 0; i < n_entries; i++) want += i == 0 || strcmp(canon[i], canon[i - 1]) != 0;
  free(canon);
  cr_assert_eq(groups, want, "%zu distinct SKUs among %zu combinations, but %zu distinct kernels", groups,
               n_entries, want);
  cr_assert(shared > 0);
  cr_log_info("%zu combinations, %zu distinct SKUs, %zu byte-compared duplicates", n_entries, groups, shared);
  free(v);
  free(entries);
}

/* The converse: one normalized desc and target always gets one SKU (how it was spelled
   does not matter: that is what makes the in-memory and disk caches hit). */
Test(sku, different_descs_or_targets_mean_different_skus) {
  enumerate();
  entry **v = sorted(by_key);
  size_t keys = 0;
  for (size_t i = 0; i < n_entries;) {
    size_t j = i + 1;
    while (j < n_entries && by_key(&v[j], &v[i]) == 0) j++;
    for (size_t m = i + 1; m < j; m++) {
      char da[256], db[256];
      describe(v[i], da, sizeof da);
      describe(v[m], db, sizeof db);
      cr_assert_str_eq(v[i]->sku, v[m]->sku, "one kernel, two SKUs: %s -> %s, %s -> %s", da, v[i]->sku, db, v[m]->sku);
    }
    keys++;
    i = j;
  }
  /* and distinct keys get distinct SKUs (and file names): sort by SKU, compare neighbours */
  entry **w = sorted(by_sku);
  size_t skus = 1;
  for (size_t i = 1; i < n_entries; i++) {
    if (!strcmp(w[i]->sku, w[i - 1]->sku)) {
      char da[256], db[256];
      describe(w[i - 1], da, sizeof da);
      describe(w[i], db, sizeof db);
      cr_assert_eq(by_key(&w[i], &w[i - 1]), 0, "SKU collision: %s and %s both get %s", da, db, w[i]->sku);
    } else {
      skus++;
    }
  }
  cr_assert_eq(skus, keys, "%zu SKUs for %zu distinct (normalized desc, target) pairs", skus, keys);

  /* the same with the documented meaning of each desc instead of bq__normalize's */
  for (size_t i = 0; i < n_entries; i++) w[i] = &entries[i];
  qsort(w, n_entries, sizeof *w, by_canon);
  size_t kernels = 1;
  for (size_t i = 1; i < n_entries; i++) {
    char da[256], db[256];
    describe(w[i - 1], da, sizeof da);
    describe(w[i], db, sizeof db);
    if (!strcmp(w[i]->canon, w[i - 1]->canon))
      cr_assert_str_eq(w[i]->sku, w[i - 1]->sku, "one kernel, two SKUs: %s -> %s, %s -> %s", da, w[i - 1]->sku, db,
                       w[i]->sku);
    else
      kernels++;
  }
  cr_assert_eq(kernels, skus, "%zu SKUs for %zu kernels", skus, kernels);

  /* file names: as unique as the SKUs */
  for (size_t i = 0; i < n_entries; i++) w[i] = &entries[i];
  qsort(w, n_entries, sizeof *w, by_sku);
  char **files = malloc(skus * sizeof *files);
  cr_assert_not_null(files);
  size_t nf = 0;
  for (size_t i = 0; i < n_entries; i++)
    if (i == 0 || strcmp(w[i]->sku, w[i - 1]->sku)) files[nf++] = w[i]->file;
  cr_assert_eq(nf, skus);
  qsort(files, nf, sizeof *files, by_str);
  for (size_t i = 1; i < nf; i++)
    cr_assert_str_neq(files[i - 1], files[i], "two SKUs share the file name %s", files[i]);
  free(files);
  free(w);
  free(v);
  free(entries);
}

Test(sku, readable_and_file_name_safe) {
  enumerate();
  for (size_t i = 0; i < n_entries; i++) {
    const entry *e = &entries[i];
    size_t n = strlen(e->sku);
    cr_assert(n > 0 && n < sizeof e->sku - 1, "SKU length %zu", n);
    for (size_t c = 0; c < n; c++)
      cr_assert(e->sku[c] > 0x20 && e->sku[c] < 0x7f, "SKU \"%s\" has byte 0x%02x at %zu", e->sku,
                (unsigned char)e->sku[c], c);
    size_t nf = strlen(e->file);
    cr_assert_eq(nf, n, "file name \"%s\" is not the SKU \"%s\" made safe", e->file, e->sku);
    for (size_t c = 0; c < nf; c++) {
      char ch = e->file[c];
      cr_assert(ch > 0x20 && ch < 0x7f, "file \"%s\" has byte 0x%02x", e->file, (unsigned char)ch);
      cr_assert(!strchr("/[],", ch), "file \"%s\" has '%c'", e->file, ch);
    }
    cr_assert(strcmp(e->file, ".") && strcmp(e->file, ".."));
    /* readable: the SKU spells out what it names */
    char tn[32];
    snprintf(tn, sizeof tn, "%s_%d%s", e->target.ptx ? "compute" : "sm", e->target.arch, e->target.arch_a ? "a" : "");
    size_t tl = strlen(tn);
    cr_assert(n > tl && !strcmp(e->sku + n - tl, tn) && e->sku[n - tl - 1] == '.', "SKU \"%s\" does not end in .%s",
              e->sku, tn);
    char q[32];
    snprintf(q, sizeof q, "q[%d,%d]", e->norm.qmin, e->norm.qmax);
    if (is_fp8(e->norm.int_type)) /* the type, and no q-range */
      cr_assert(strstr(e->sku, e->norm.int_type == BQ_E4M3 ? ".e4m3.scale_" : ".e5m2.scale_") && !strstr(e->sku, "q["),
                "SKU \"%s\"", e->sku);
    else
      cr_assert(strstr(e->sku, q), "SKU \"%s\" lacks %s", e->sku, q);
    cr_assert(strstr(e->sku, e->norm.direction == BQ_BACKWARD ? ".bwd." : ".fwd."), "%s", e->sku);
    /* the granularity's token, the layout's scale token, the scale type */
    char g[32], st[48];
    snprintf(g, sizeof g, ".%s.", bq__gran_name(e->norm.granularity));
    cr_assert(strstr(e->sku, g), "SKU \"%s\" lacks %s", e->sku, g);
    snprintf(st, sizeof st, ".scale_%s%s.", e->norm.scale_layout == BQ_SCALES_MN_MAJOR ? "mn_" : "",
             bq__dtype_name(e->norm.scale_type));
    cr_assert(strstr(e->sku, st), "SKU \"%s\" lacks %s", e->sku, st);
    cr_assert_eq(strstr(e->sku, "scale_mn_") != NULL, e->norm.scale_layout == BQ_SCALES_MN_MAJOR, "%s", e->sku);
  }
  free(entries);
}

Test(sku, bq_sku_matches_kernel_for_on_cubin_targets) {
  enumerate();
  size_t checked = 0;
  for (size_t i = 0; i < n_entries; i++) {
    const entry *e = &entries[i];
    if (e->target.ptx || e->target.arch_a) continue;
    char buf[256];
    memset(buf, 'x', sizeof buf);
    bq_status st = bq_sku(&e->in, e->target.arch, buf, sizeof buf);
    cr_assert_eq(st, BQ_SUCCESS, "bq_sku: %s", bq_last_error());
    cr_assert_str_eq(buf, e->sku);
    checked++;
  }
  cr_assert_eq(checked, n_entries / 2); /* two of the four targets */
  free(entries);
}

/* ---- (b) NVRTC compiles every SKU ------------------------------------------------------------ */
static bq_desc mk(bq_op op, bq_direction dir, bq_granularity g, bq_dtype ft, bq_dtype it, int qmin, int qmax,
                  int asym) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.direction = dir;
  d.granularity = g;
  d.float_type = ft;
  d.int_type = it;
  d.qmin = qmin;
  d.qmax = qmax;
  d.scale_type = ft; /* scales of the float type (f32 ones are the default's SKUs) */
  d.asymmetric = asym;
  return d;
}

/* One affine op: every direction x granularity x float type x int type with the full
   q-range, plus a narrow range for s8 per tensor f32 in each direction (and, on sm_90, a
   single-point range per channel). */
static size_t affine_set(bq_op op, int sm, bq_desc *out) {
  size_t n = 0;
  for (size_t r = 0; r < NELEM(DIRS); r++) {
    for (size_t g = 0; g < NELEM(GRANS); g++)
      for (size_t f = 0; f < NELEM(FTS); f++)
        for (size_t i = 0; i < NELEM(ITS); i++) out[n++] = mk(op, DIRS[r], GRANS[g], FTS[f], ITS[i], 0, 0, 0);
    out[n++] = mk(op, DIRS[r], BQ_PER_TENSOR, BQ_F32, BQ_S8, -7, 7, 0);
  }
  if (sm == 90) out[n++] = mk(op, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16, BQ_S8, 5, 5, 0);
  return n;
}

/* Dynamic quantize: every granularity it has x float type x int type x symmetric or
   asymmetric with the full q-range, plus a narrow range for s8 per token f32. */
static size_t dynamic_set(bq_op op, int sm, bq_desc *out) {
  (void)op;
  (void)sm;
  size_t n = 0;
  for (size_t g = 0; g < NELEM(GRANS); g++) {
    if (GRANS[g] == BQ_PER_CHANNEL) continue;
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (size_t i = 0; i < NELEM(ITS); i++)
        for (int asym = 0; asym < 2; asym++)
          out[n++] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, GRANS[g], FTS[f], ITS[i], 0, 0, asym);
  }
  for (int asym = 0; asym < 2; asym++)
    out[n++] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32, BQ_S8, -7, 7, asym);
  /* the fused rotation (per token): every float type, into s8 (asymmetric) and E4M3 */
  for (size_t f = 0; f < NELEM(FTS); f++)
    for (int fp8 = 0; fp8 < 2; fp8++) {
      bq_desc d = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, FTS[f], fp8 ? BQ_E4M3 : BQ_S8, 0, 0, !fp8);
      d.rotation = 1, d.random_signs = fp8;
      out[n++] = d;
    }
  return n;
}

/* Which kernels of a set a run compiles. A SKU's kernels are modules of one entry point each
   (bq__kernels_of); a unit here is one such module. On the GPU host (tools/gpu_check.sh
   sku), with BQ_SKU_ALL=1, every module of every SKU. Elsewhere (CI, tools/run.sh test) a
   sample of each pool of sets (below): modules drawn in a random order are kept while they
   bring a float type, storage type, op or entry point the sample lacks (so every one of
   each that the pool has is compiled for the test's arch), then BQ_SKU_EXTRA (default 1)
   more. The order comes from BQ_SKU_SEED (meson passes the commit's hash, so each commit
   compiles another sample and a failure reproduces with its seed) and the pool's name; the
   log names the seed and every module compiled. */
static int sku_all(void) {
  const char *v = getenv("BQ_SKU_ALL");
  return v && *v && strcmp(v, "0") != 0;
}
static uint64_t sku_seed(void) {
  const char *v = getenv("BQ_SKU_SEED");
  uint64_t h = 0xcbf29ce484222325ull;
  for (; v && *v; v++) h = (h ^ (unsigned char)*v) * 0x100000001b3ull;
  return h;
}
static size_t sku_extra(void) {
  const char *v = getenv("BQ_SKU_EXTRA");
  return v && *v ? (size_t)strtoul(v, NULL, 10) : 1;
}
/* a module of a set: its normalized desc, target (module set) and whether the test owns it */
typedef struct unit {
  bq_desc d;
  bq__target t;
  int own;
} unit;
/* what a module brings to the sample, in two words: its float (or output) type, storage
   type and kind (op and activation); its entry point (its family's enum, a 16-bit field a
   family) */
static void axes(const unit *u, uint64_t w[2]) {
  const bq_desc *d = &u->d;
  const bq_dtype ft = d->out_type ? d->out_type : d->float_type;
  const unsigned fam = d->op <= BQ_FAKE_QUANTIZE ? 0 : d->op == BQ_DYNAMIC_QUANTIZE ? 1 : bq__op_in(d->op, "fused") ? 2 : 3;
  w[0] = 1ull << ((unsigned)ft & 15) | 1ull << (16 + ((unsigned)d->int_type & 15)) |
         1ull << (32 + (((unsigned)d->op * 3 + (unsigned)d->activation) & 31));
  w[1] = 1ull << (16 * fam + (unsigned)(u->t.module - 1));
  if (bq__is_mx(d) || bq__fused_mx(d)) /* (pools of their own) its entry point, scale type, layout, rule and
                                          direction */
    w[1] = 1ull << (unsigned)(u->t.module - 1) | 1ull << (16 + (d->scale_type == BQ_E4M3)) |
           1ull << (24 + (unsigned)d->scale_layout) | 1ull << (32 + (unsigned)d->scale_rule) |
           1ull << (40 + (unsigned)d->direction);
}
static int popcount64(uint64_t v) {
  int c = 0;
  for (; v; v &= v - 1) c++;
  return c;
}
/* the sample, moved to the front of set[0, n); returns its size */
static size_t sample(unit *set, size_t n, const char *name) {
  if (sku_all()) return n;
  uint64_t st = sku_seed();
  for (const char *c = name; *c; c++) st = (st ^ (unsigned char)*c) * 0x100000001b3ull;
  st |= 1;
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates with xorshift64 */
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    const size_t j = (size_t)(st % i);
    const unit u = set[i - 1];
    set[i - 1] = set[j];
    set[j] = u;
  }
  /* greedily, the first module (in that order) that brings the most the sample lacks */
  uint64_t have[2] = {0, 0};
  size_t k = 0;
  for (;;) {
    size_t best = n;
    int gain = 0;
    for (size_t i = k; i < n; i++) {
      uint64_t w[2];
      axes(&set[i], w);
      const int g = popcount64(w[0] & ~have[0]) + popcount64(w[1] & ~have[1]);
      if (g > gain) gain = g, best = i;
    }
    if (best == n) break;
    uint64_t w[2];
    axes(&set[best], w);
    have[0] |= w[0], have[1] |= w[1];
    const unit u = set[k];
    set[k++] = set[best];
    set[best] = u;
  }
  const size_t extra = sku_extra();
  return k + extra < n ? k + extra : n;
}

/* The tests' sets and the pools they are sampled in together: a test (op, set) compiles its
   own members of its pool's sample, so that a pool of ops is covered once per arch rather
   than once per op. A test in no pool is a pool of its own. */
typedef size_t (*set_fn)(bq_op, int, bq_desc *);
typedef struct member { bq_op op; set_fn set; } member;
static size_t fp8_set(bq_op op, int sm, bq_desc *out);
static size_t affine_set(bq_op op, int sm, bq_desc *out);
static size_t rmsnorm_set(bq_op op, int sm, bq_desc *out);
static size_t silu_set(bq_op op, int sm, bq_desc *out);
static size_t gelu_set(bq_op op, int sm, bq_desc *out);
static size_t linear_set(bq_op op, int sm, bq_desc *out);
static size_t mx_set(bq_op op, int sm, bq_desc *out);
static size_t fmx_rms_set(bq_op op, int sm, bq_desc *out);
static size_t fmx_silu_set(bq_op op, int sm, bq_desc *out);
static size_t fmx_gelu_set(bq_op op, int sm, bq_desc *out);
static size_t rotate_set(bq_op op, int sm, bq_desc *out);
static const member POOLS[][5] = {
    {{BQ_QUANTIZE, mx_set}, {BQ_DEQUANTIZE, mx_set}, {BQ_FAKE_QUANTIZE, mx_set}, {BQ_DYNAMIC_QUANTIZE, mx_set}},
    {{BQ_QUANTIZE, fp8_set}, {BQ_DEQUANTIZE, fp8_set}, {BQ_FAKE_QUANTIZE, fp8_set}, {BQ_DYNAMIC_QUANTIZE, fp8_set}},
    {{BQ_QUANTIZE, affine_set}, {BQ_DEQUANTIZE, affine_set}, {BQ_FAKE_QUANTIZE, affine_set}},
    {{BQ_RMSNORM_QUANTIZE, rmsnorm_set}, {BQ_GATED_QUANTIZE, silu_set}, {BQ_GATED_QUANTIZE, gelu_set}},
    {{BQ_QUANTIZED_LINEAR, linear_set}, {BQ_SMOOTHQUANT_LINEAR, linear_set}},
    {{BQ_RMSNORM_QUANTIZE, fmx_rms_set}, {BQ_GATED_QUANTIZE, fmx_silu_set}, {BQ_GATED_QUANTIZE, fmx_gelu_set}},
    {{BQ_HADAMARD, rotate_set}},
};

/* the modules of the descs of a set for sm, appended to units */
static size_t units_of(const bq_desc *descs, size_t nd, int sm, int own, unit *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < nd; i++) {
    bq_desc d;
    char name[96];
    bq__target t;
    const char *names[BQ__MAX_KERNELS];
    cr_assert_eq(bq__normalize(&descs[i], &d, name, sizeof name), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq__target_for(&d, sm, &t), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(bq__kernels_of(&d, &t, names) > 0, "%s: no entry point", name);
    for (int e = 0; e < BQ__MAX_KERNELS; e++) {
      if (!names[e]) continue;
      cr_assert(n < cap);
      out[n].d = d;
      out[n].t = t;
      out[n].t.module = e + 1;
      out[n++].own = own;
    }
  }
  return n;
}

static void compile_all(bq_op op, int sm, set_fn set_of) {
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  cr_assert_null(bq_cache_directory(), "the disk cache is still on");
  static bq_desc descs[512];
  static unit set[16384];
  const member self[1] = {{op, set_of}};
  const member *pool = self;
  size_t np = 1, p = 0;
  for (size_t i = 0; i < NELEM(POOLS) && pool == self; i++)
    for (size_t j = 0; j < NELEM(POOLS[i]) && POOLS[i][j].set; j++)
      if (POOLS[i][j].op == op && POOLS[i][j].set == set_of) {
        pool = POOLS[i];
        p = i + 1;
        for (np = 0; np < NELEM(POOLS[i]) && POOLS[i][np].set; np++) {}
      }
  size_t all = 0, mine = 0;
  for (size_t j = 0; j < np; j++) {
    const size_t m = pool[j].set(pool[j].op, sm, descs);
    cr_assert(m > 0 && m <= NELEM(descs));
    all += units_of(descs, m, sm, pool[j].op == op && pool[j].set == set_of, set + all, NELEM(set) - all);
  }
  char name[80];
  snprintf(name, sizeof name, "pool %zu op %d sm_%d", p, p ? 0 : (int)op, sm);
  const size_t taken = sample(set, all, name);
  size_t n = 0; /* this test's members of the sample, first */
  for (size_t i = 0; i < taken; i++)
    if (set[i].own) {
      const unit u = set[n];
      set[n++] = set[i];
      set[i] = u;
    }
  for (size_t i = 0; i < all; i++) mine += set[i].own;
  /* each member has a kind or a storage type of its own, which the sample covers */
  cr_assert(n > 0, "sm_%d: none of this set's %zu modules is in its pool's sample", sm, mine);

  /* every module is distinct, so each warm is one compile */
  static char skus[8192][256];
  for (size_t i = 0; i < n; i++) {
    bq__kernel_src k;
    memset(&k, 0, sizeof k);
    bq__sku_of(&set[i].d, &set[i].t, &k);
    cr_assert(strchr(k.sku, '@'), "%s names no module", k.sku);
    memcpy(skus[i], k.sku, sizeof k.sku);
    for (size_t j = 0; j < i && n < 512; j++) cr_assert_str_neq(skus[i], skus[j]);
  }

  bq_cache_stats before, after;
  bq_cache_get_stats(&before);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) {
    bq_status st = bq__warm_one(&set[i].d, &set[i].t, NULL);
    if (st == BQ_ERROR_NO_NVRTC)
      cr_assert_fail("NVRTC could not be loaded (%s): this test needs it (CI installs it; set "
                     "BARACUDA_QUANT_NVRTC to its path) and does not skip", bq_last_error());
    if (st != BQ_SUCCESS) {
      cr_log_error("sm_%d %s: %s: %s", sm, skus[i], bq_status_name(st), bq_last_error());
      failed++;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  bq_cache_get_stats(&after);
  cr_assert_eq(failed, 0, "%zu of %zu modules failed to compile for sm_%d (see the log above)", failed, n, sm);
  cr_assert_eq(after.compiles - before.compiles, n, "sm_%d: %llu compiles for %zu modules", sm,
               (unsigned long long)(after.compiles - before.compiles), n);
  cr_assert_eq(after.misses - before.misses, n);
  cr_assert_eq(after.disk_hits, before.disk_hits, "the disk cache was used while disabled");
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  cr_log_info("sm_%d: %zu of %zu modules compiled in %.1f s (%.0f ms each), seed '%s'", sm, n, mine, s,
              1e3 * s / (double)n, getenv("BQ_SKU_SEED") ? getenv("BQ_SKU_SEED") : "");
  for (size_t i = 0; i < n && n < mine; i++) cr_log_info("  %s", skus[i]);
}

/* FP8 storage (e4m3, e5m2), one op: every direction x granularity x float type (dynamic
   quantize: forward, per tensor, token or group), symmetric with no q-range, scales of the
   float type, on sm_80 (the software conversion), sm_89 and sm_90 (cvt.rn.satfinite). */
static const bq_dtype FP8S[] = {BQ_E4M3, BQ_E5M2};
static size_t fp8_set(bq_op op, int sm, bq_desc *out) {
  (void)sm;
  size_t n = 0;
  for (size_t r = 0; r < NELEM(DIRS); r++)
    for (size_t g = 0; g < NELEM(GRANS); g++)
      for (size_t f = 0; f < NELEM(FTS); f++)
        for (size_t i = 0; i < NELEM(FP8S); i++) {
          if (op == BQ_DYNAMIC_QUANTIZE && (DIRS[r] == BQ_BACKWARD || GRANS[g] == BQ_PER_CHANNEL)) continue;
          out[n++] = mk(op, DIRS[r], GRANS[g], FTS[f], FP8S[i], 0, 0, 0);
        }
  return n;
}
/* The test hook's software conversion (bq__fp8_soft: SKUs named .soft, BQ_FP8_SOFT in the
   prelude) where the hardware one would be taken: one SKU per op, both types, every float
   type among them. */
static size_t fp8_soft_set(bq_op op, int sm, bq_desc *out) {
  (void)op;
  (void)sm;
  size_t n = 0;
  out[n++] = mk(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32, BQ_E4M3, 0, 0, 0);
  out[n++] = mk(BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64, BQ_E5M2, 0, 0, 0);
  out[n++] = mk(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, BQ_E5M2, 0, 0, 0);
  out[n++] = mk(BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16, BQ_E4M3, 0, 0, 0);
  out[n++] = mk(BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32, BQ_E5M2, 0, 0, 0);
  out[n++] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, BQ_E4M3, 0, 0, 0);
  out[n++] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64, BQ_E5M2, 0, 0, 0);
  for (size_t i = 0; i < n; i++) {
    char sku[256];
    bq__fp8_soft = 1;
    cr_assert_eq(bq_sku(&out[i], sm, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert(strstr(sku, ".soft."), "%s", sku);
  }
  return n;
}
static void fp8_soft(void) { bq__fp8_soft = 1; }

/* The microscaling formats, one op (with the gated op, one activation): every float type x
   element and scale type (MXFP8 e4m3 and e5m2, MXFP4, NVFP4) x layout (row-major, MN-major,
   blocked) x rule (dynamic quantize and the fused producers, which compute their scales) x
   direction (the others), those the library takes; on sm_80, sm_90 and sm_100 (the software
   E2M1 conversion everywhere). The microscaling family's ops, and the fused producers
   emitting the formats (bq__fused_mx). */
static size_t mx_set_of(bq_op op, bq_activation act, bq_desc *out) {
  static const bq_dtype elem[] = {BQ_E2M1, BQ_E2M1, BQ_E4M3, BQ_E5M2}, scale[] = {BQ_UE8M0, BQ_E4M3, BQ_UE8M0, BQ_UE8M0};
  const int fused = op == BQ_RMSNORM_QUANTIZE || op == BQ_GATED_QUANTIZE;
  const int rules = fused || op == BQ_DYNAMIC_QUANTIZE ? 8 : 1, dirs = fused || op == BQ_DYNAMIC_QUANTIZE ? 1 : 2;
  size_t n = 0;
  for (size_t f = 0; f < NELEM(FTS); f++)
    for (int k = 0; k < 4; k++)
      for (int lay = 0; lay < 3; lay++)
        for (int rule = 0; rule < rules; rule++)
          for (int dir = 0; dir < dirs; dir++) {
            bq_desc d;
            memset(&d, 0, sizeof d);
            d.op = op;
            d.activation = act;
            d.direction = (bq_direction)dir;
            d.granularity = BQ_PER_GROUP;
            d.float_type = FTS[f];
            d.int_type = elem[k];
            d.scale_type = scale[k];
            d.scale_layout = (bq_scale_layout)lay;
            d.scale_rule = (bq_scale_rule)rule;
            bq_desc nd;
            char nm[96];
            if ((fused ? bq__fused_mx(&d) : bq__is_mx(&d)) && bq__normalize(&d, &nd, nm, sizeof nm) == BQ_SUCCESS)
              out[n++] = d;
          }
  return n;
}
static size_t mx_set(bq_op op, int sm, bq_desc *out) { (void)sm; return mx_set_of(op, BQ_ACTIVATION_DEFAULT, out); }
Test(compile, mx_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_QUANTIZE, 80, mx_set); }
Test(compile, mx_dequantize_on_sm_90, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 90, mx_set); }
Test(compile, mx_dynamic_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 80, mx_set); }
Test(compile, mx_dynamic_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 90, mx_set); }
Test(compile, mx_dynamic_quantize_on_sm_100, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 100, mx_set); }
Test(compile, mx_quantize_on_sm_100, .timeout = 600) { compile_all(BQ_QUANTIZE, 100, mx_set); }
Test(compile, mx_fake_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 80, mx_set); }
Test(compile, mx_fake_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 90, mx_set); }
Test(compile, fp8_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_QUANTIZE, 80, fp8_set); }
Test(compile, fp8_quantize_on_sm_89, .timeout = 600) { compile_all(BQ_QUANTIZE, 89, fp8_set); }
Test(compile, fp8_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_QUANTIZE, 90, fp8_set); }
Test(compile, fp8_dequantize_on_sm_80, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 80, fp8_set); }
Test(compile, fp8_dequantize_on_sm_89, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 89, fp8_set); }
Test(compile, fp8_dequantize_on_sm_90, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 90, fp8_set); }
Test(compile, fp8_fake_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 80, fp8_set); }
Test(compile, fp8_fake_quantize_on_sm_89, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 89, fp8_set); }
Test(compile, fp8_fake_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 90, fp8_set); }
Test(compile, fp8_dynamic_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 80, fp8_set); }
Test(compile, fp8_dynamic_quantize_on_sm_89, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 89, fp8_set); }
Test(compile, fp8_dynamic_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 90, fp8_set); }
Test(compile, fp8_soft_on_sm_89, .timeout = 600, .init = fp8_soft) { compile_all(BQ_QUANTIZE, 89, fp8_soft_set); }
Test(compile, fp8_soft_on_sm_90, .timeout = 600, .init = fp8_soft) { compile_all(BQ_QUANTIZE, 90, fp8_soft_set); }

/* The fused producers, one op (the gated one with one activation): every granularity it
   has x float type x int type x symmetric or asymmetric (the dynamic ones) with the full
   q-range, plus a narrow range per token; FP8 storage (symmetric) for every granularity x
   FP8 type, the float type rotating so that each meets each FP8 type across the set. */
static size_t fused_set_of(bq_op op, bq_activation act, bq_desc *out) {
  static const bq_granularity fgrans[] = {BQ_PER_TENSOR, BQ_PER_TOKEN, BQ_PER_GROUP};
  size_t n = 0, k = 0;
  for (size_t g = 0; g < NELEM(fgrans); g++) {
    for (size_t f = 0; f < NELEM(FTS); f++)
      for (size_t i = 0; i < NELEM(ITS); i++)
        for (int asym = 0; asym < (fgrans[g] == BQ_PER_TENSOR ? 1 : 2); asym++) {
          out[n] = mk(op, BQ_FORWARD, fgrans[g], FTS[f], ITS[i], 0, 0, asym);
          out[n++].activation = act;
        }
    for (int i = 0; i < 2; i++, k++) {
      out[n] = mk(op, BQ_FORWARD, fgrans[g], FTS[(k + (size_t)act) % NELEM(FTS)], i ? BQ_E5M2 : BQ_E4M3, 0, 0, 0);
      out[n++].activation = act;
    }
  }
  out[n] = mk(op, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, BQ_S8, -7, 7, 0);
  out[n++].activation = act;
  return n;
}
static size_t fmx_rms_set(bq_op op, int sm, bq_desc *out) { (void)sm; return mx_set_of(op, BQ_ACTIVATION_DEFAULT, out); }
static size_t fmx_silu_set(bq_op op, int sm, bq_desc *out) { (void)sm; return mx_set_of(op, BQ_SILU, out); }
static size_t fmx_gelu_set(bq_op op, int sm, bq_desc *out) { (void)sm; return mx_set_of(op, BQ_GELU_TANH, out); }
Test(compile, mx_rmsnorm_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_RMSNORM_QUANTIZE, 80, fmx_rms_set); }
Test(compile, mx_silu_mul_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 90, fmx_silu_set); }
Test(compile, mx_gelu_tanh_mul_quantize_on_sm_100, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 100, fmx_gelu_set); }
Test(compile, mx_rmsnorm_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_RMSNORM_QUANTIZE, 90, fmx_rms_set); }

/* The Hadamard rotation: every float type x direction x random signs or none */
static size_t rotate_set(bq_op op, int sm, bq_desc *out) {
  (void)sm;
  size_t n = 0;
  for (size_t f = 0; f < NELEM(FTS); f++)
    for (int dir = 0; dir < 2; dir++)
      for (int signs = 0; signs < 2; signs++) {
        memset(&out[n], 0, sizeof out[n]);
        out[n].op = op;
        out[n].direction = (bq_direction)dir;
        out[n].float_type = FTS[f];
        out[n++].random_signs = signs;
      }
  return n;
}
Test(compile, hadamard_on_sm_80, .timeout = 600) { compile_all(BQ_HADAMARD, 80, rotate_set); }
Test(compile, hadamard_on_sm_90, .timeout = 600) { compile_all(BQ_HADAMARD, 90, rotate_set); }
Test(compile, hadamard_on_sm_100, .timeout = 600) { compile_all(BQ_HADAMARD, 100, rotate_set); }

static size_t rmsnorm_set(bq_op op, int sm, bq_desc *out) { (void)sm; return fused_set_of(op, BQ_ACTIVATION_DEFAULT, out); }
static size_t silu_set(bq_op op, int sm, bq_desc *out) { (void)sm; return fused_set_of(op, BQ_SILU, out); }
static size_t gelu_set(bq_op op, int sm, bq_desc *out) { (void)sm; return fused_set_of(op, BQ_GELU_TANH, out); }

/* UE8M0 scale arrays and power-of-two dynamic scales, one op: every direction x granularity
   with device scales x float type, the storage type rotating over s8, u8, e4m3, e5m2 (so
   each float type meets each across the set); dynamic quantize with UE8M0 scales and with
   pow2_scales on f32 or float-type scales, symmetric and (integers) asymmetric. */
static size_t ue8m0_set(bq_op op, int sm, bq_desc *out) {
  (void)sm;
  size_t n = 0, k = 0;
  for (size_t r = 0; r < NELEM(DIRS); r++)
    for (size_t g = 0; g < NELEM(GRANS); g++)
      for (size_t f = 0; f < NELEM(FTS); f++) {
        const int dyn = op == BQ_DYNAMIC_QUANTIZE;
        if (dyn ? (DIRS[r] == BQ_BACKWARD || GRANS[g] == BQ_PER_CHANNEL) : GRANS[g] == BQ_PER_TENSOR) continue;
        const bq_dtype it = ITS_ALL[k++ % NELEM(ITS_ALL)];
        out[n] = mk(op, DIRS[r], GRANS[g], FTS[f], it, 0, 0, 0);
        out[n++].scale_type = BQ_UE8M0;
        if (!dyn) continue;
        out[n] = mk(op, DIRS[r], GRANS[g], FTS[f], it, 0, 0, 0);
        out[n].scale_type = f % 2 ? FTS[f] : BQ_F32;
        out[n++].pow2_scales = 1;
        if (is_fp8(it)) continue;
        out[n] = mk(op, DIRS[r], GRANS[g], FTS[f], it, 0, 0, 1); /* asymmetric */
        out[n].scale_type = (f + g) % 2 ? BQ_UE8M0 : BQ_F32;
        out[n++].pow2_scales = 1;
      }
  return n;
}

/* Per block (the affine ops through the per-group kernels with a row of scales per B rows,
   dynamic quantize through bq_dynamic_tiles), MN-major and packed UE8M0 scales: a sample,
   the whole set on sm_90; on sm_80 (FP8 in software) and sm_89 those whose storage or
   scale path differs there. */
static size_t block_set(bq_op op, int sm, bq_desc *out) {
  (void)op;
  size_t n = 0;
  bq_desc all[8];
  all[n] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_BF16, BQ_E4M3, 0, 0, 0);
  all[n++].scale_type = BQ_UE8M0;                                                     /* 0 */
  all[n++] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_F32, BQ_U8, 0, 0, 1); /* 1 */
  all[n++] = mk(BQ_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_BF16, BQ_S8, 0, 0, 0);       /* 2 */
  all[n++] = mk(BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_BLOCK, BQ_F64, BQ_E5M2, 0, 0, 0); /* 3 */
  all[n] = mk(BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16, BQ_E4M3, 0, 0, 0);
  all[n].scale_type = BQ_UE8M0X4;
  all[n++].scale_layout = BQ_SCALES_MN_MAJOR;                                         /* 4 */
  all[n] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16, BQ_E4M3, 0, 0, 0);
  all[n++].scale_type = BQ_UE8M0X4;                                                   /* 5 */
  all[n] = mk(BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16, BQ_S8, 0, 0, 1);
  all[n].scale_type = BQ_F32;
  all[n++].scale_layout = BQ_SCALES_MN_MAJOR;                                         /* 6 */
  static const int on80[] = {0, 3, 4}, on89[] = {0, 5};
  const int *pick = sm == 80 ? on80 : on89;
  const size_t np = sm == 80 ? NELEM(on80) : NELEM(on89);
  if (sm == 90) {
    memcpy(out, all, n * sizeof *all);
    return n;
  }
  for (size_t i = 0; i < np; i++) out[i] = all[pick[i]];
  return np;
}

/* One test per op and arch, so that Criterion's parallel workers (separate processes)
   overlap them: NVRTC serializes compiles inside one process. */
Test(compile, block_mn_and_packed_on_sm_80, .timeout = 600) { compile_all(BQ_QUANTIZE, 80, block_set); }
Test(compile, block_mn_and_packed_on_sm_89, .timeout = 600) { compile_all(BQ_QUANTIZE, 89, block_set); }
Test(compile, block_mn_and_packed_on_sm_90, .timeout = 600) { compile_all(BQ_QUANTIZE, 90, block_set); }
Test(compile, ue8m0_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_QUANTIZE, 90, ue8m0_set); }
Test(compile, ue8m0_dequantize_on_sm_80, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 80, ue8m0_set); }
Test(compile, ue8m0_fake_quantize_on_sm_89, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 89, ue8m0_set); }
Test(compile, ue8m0_dynamic_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 80, ue8m0_set); }
Test(compile, ue8m0_dynamic_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 90, ue8m0_set); }
Test(compile, quantize_on_sm_80, .timeout = 600) { compile_all(BQ_QUANTIZE, 80, affine_set); }
Test(compile, quantize_on_sm_90, .timeout = 600) { compile_all(BQ_QUANTIZE, 90, affine_set); }
Test(compile, dequantize_on_sm_80, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 80, affine_set); }
Test(compile, dequantize_on_sm_90, .timeout = 600) { compile_all(BQ_DEQUANTIZE, 90, affine_set); }
Test(compile, fake_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 80, affine_set); }
Test(compile, fake_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_FAKE_QUANTIZE, 90, affine_set); }
Test(compile, dynamic_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 80, dynamic_set); }
Test(compile, dynamic_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_DYNAMIC_QUANTIZE, 90, dynamic_set); }
Test(compile, rmsnorm_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_RMSNORM_QUANTIZE, 80, rmsnorm_set); }
Test(compile, rmsnorm_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_RMSNORM_QUANTIZE, 90, rmsnorm_set); }
Test(compile, silu_mul_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 80, silu_set); }
Test(compile, silu_mul_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 90, silu_set); }
Test(compile, gelu_tanh_mul_quantize_on_sm_80, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 80, gelu_set); }
Test(compile, gelu_tanh_mul_quantize_on_sm_90, .timeout = 600) { compile_all(BQ_GATED_QUANTIZE, 90, gelu_set); }

/* ---- linear layers ----------------------------------------------------------------------------- */
/* QuantizedLinear, SmoothQuantLinear (per tensor, per token) and the weight-sums helper,
   over float, output, scale and int types, q-ranges, symmetry and targets. The kernel a
   desc names, by the documented rules: the GEMM is specialized for the activation int
   type, the output type (default: the float type), the scale type (default: f32) and
   whether per-token
   activation scales are f32 while weight scales are not (QuantizedLinear's own scales);
   the q-range, the symmetry and the granularity are run-time matters. */
typedef struct lentry {
  bq_desc in;
  bq__target target;
  char canon[128], sku[256], file[256];
} lentry;

static lentry *lin_entries;
static size_t n_lin;

static void lin_canonical(const bq_desc *d, const bq__target *t, char *buf, size_t n) {
  if (d->op == BQ_LINEAR_WEIGHT_SUMS) {
    snprintf(buf, n, "weight_sums | %d %d %d", t->arch, t->ptx, t->arch_a);
    return;
  }
  bq_dtype it = d->int_type ? d->int_type : BQ_S8;
  bq_dtype out = d->out_type ? d->out_type : d->float_type;
  bq_dtype st = d->scale_type ? d->scale_type : BQ_F32;
  snprintf(buf, n, "gemm %d %d %d %d | %d %d %d", (int)it, (int)out, (int)st,
           d->op == BQ_QUANTIZED_LINEAR && st != BQ_F32, t->arch, t->ptx, t->arch_a);
}

static void lin_enumerate(void) {
  static const bq_op ops[] = {BQ_QUANTIZED_LINEAR, BQ_SMOOTHQUANT_LINEAR, BQ_LINEAR_WEIGHT_SUMS};
  static const bq_dtype outs[] = {BQ_DTYPE_DEFAULT, BQ_F32, BQ_F64, BQ_F16, BQ_BF16};
  static const bq_granularity grans[] = {BQ_GRANULARITY_DEFAULT, BQ_PER_TENSOR, BQ_PER_TOKEN};
  size_t cap = NELEM(ops) * NELEM(grans) * NELEM(FTS) * NELEM(outs) * NELEM(outs) * NELEM(ITS) * 2 * 2 * NELEM(TARGETS);
  lin_entries = calloc(cap, sizeof *lin_entries);
  cr_assert_not_null(lin_entries);
  n_lin = 0;
  for (size_t o = 0; o < NELEM(ops); o++)
    for (size_t g = 0; g < NELEM(grans); g++)
      for (size_t f = 0; f < NELEM(FTS); f++)
        for (size_t u = 0; u < NELEM(outs); u++)
          for (size_t s = 0; s < NELEM(outs); s++)
            for (size_t i = 0; i < NELEM(ITS); i++)
              for (int q = 0; q < 2; q++)
                for (int asym = 0; asym < 2; asym++)
                  for (size_t t = 0; t < NELEM(TARGETS); t++) {
                    lentry *e = &lin_entries[n_lin];
                    memset(&e->in, 0, sizeof e->in);
                    e->in.op = ops[o];
                    e->in.granularity = grans[g];
                    e->in.float_type = FTS[f];
                    e->in.out_type = outs[u];
                    e->in.scale_type = outs[s];
                    e->in.int_type = ITS[i];
                    if (q) {
                      e->in.qmin = ITS[i] == BQ_S8 ? -7 : 3;
                      e->in.qmax = ITS[i] == BQ_S8 ? 7 : 200;
                    }
                    e->in.asymmetric = asym;
                    e->target = TARGETS[t];
                    bq_desc norm;
                    char name[96];
                    if (bq__normalize(&e->in, &norm, name, sizeof name) != BQ_SUCCESS) continue;
                    n_lin++;
                    lin_canonical(&e->in, &e->target, e->canon, sizeof e->canon);
                    bq__kernel_src k;
                    cr_assert_eq(bq__kernel_for(&e->in, &e->target, &k), BQ_SUCCESS, "%s", bq_last_error());
                    cr_assert(same_target(&k.target, &e->target));
                    memcpy(e->sku, k.sku, sizeof e->sku);
                    memcpy(e->file, k.file, sizeof e->file);
                    free(k.source.p);
                  }
  cr_assert(n_lin > 2000, "%zu linear combinations", n_lin);
}

static int lin_by_sku(const void *a, const void *b) {
  return strcmp((*(const lentry *const *)a)->sku, (*(const lentry *const *)b)->sku);
}
static int lin_by_canon(const void *a, const void *b) {
  return strcmp((*(const lentry *const *)a)->canon, (*(const lentry *const *)b)->canon);
}

Test(sku, linear_skus_name_kernels_one_to_one) {
  lin_enumerate();
  lentry **v = malloc(n_lin * sizeof *v);
  cr_assert_not_null(v);
  for (size_t i = 0; i < n_lin; i++) v[i] = &lin_entries[i];
  /* equal SKUs: one kernel, byte-identical source */
  qsort(v, n_lin, sizeof *v, lin_by_sku);
  size_t skus = 0, compared = 0;
  for (size_t i = 0; i < n_lin;) {
    size_t j = i + 1;
    while (j < n_lin && !strcmp(v[j]->sku, v[i]->sku)) j++;
    skus++;
    bq__kernel_src first;
    cr_assert_eq(bq__kernel_for(&v[i]->in, &v[i]->target, &first), BQ_SUCCESS);
    for (size_t m = i + 1; m < j; m++) {
      cr_assert_str_eq(v[i]->canon, v[m]->canon, "SKU %s names two kernels: %s and %s", v[i]->sku, v[i]->canon,
                       v[m]->canon);
      if (m - i <= 4) { /* byte-compare a few spellings of each */
        bq__kernel_src k;
        cr_assert_eq(bq__kernel_for(&v[m]->in, &v[m]->target, &k), BQ_SUCCESS);
        cr_assert(k.source.n == first.source.n && !memcmp(k.source.p, first.source.p, k.source.n),
                  "SKU %s: two sources", v[i]->sku);
        free(k.source.p);
        compared++;
      }
    }
    free(first.source.p);
    i = j;
  }
  /* as many SKUs as kernels */
  qsort(v, n_lin, sizeof *v, lin_by_canon);
  size_t kernels = 0;
  for (size_t i = 0; i < n_lin; i++) {
    if (i && !strcmp(v[i]->canon, v[i - 1]->canon))
      cr_assert_str_eq(v[i]->sku, v[i - 1]->sku, "one kernel (%s), two SKUs: %s and %s", v[i]->canon, v[i - 1]->sku,
                       v[i]->sku);
    else
      kernels++;
  }
  cr_assert_eq(skus, kernels, "%zu SKUs for %zu kernels", skus, kernels);
  /* readable, file-name safe, ending in the target */
  for (size_t i = 0; i < n_lin; i++) {
    const lentry *e = &lin_entries[i];
    char tn[32];
    snprintf(tn, sizeof tn, ".%s_%d%s", e->target.ptx ? "compute" : "sm", e->target.arch, e->target.arch_a ? "a" : "");
    size_t n = strlen(e->sku), tl = strlen(tn);
    cr_assert(n > tl && !strcmp(e->sku + n - tl, tn), "SKU %s does not end in %s", e->sku, tn);
    cr_assert_str_eq(e->sku, e->file);
    for (size_t c = 0; c < n; c++) cr_assert(e->sku[c] > 0x20 && e->sku[c] < 0x7f && !strchr("/[],", e->sku[c]));
  }
  cr_log_info("%zu linear combinations, %zu SKUs, %zu byte-compared duplicates", n_lin, skus, compared);
  free(v);
  free(lin_entries);
}

/* Every GEMM SKU and the weight-sums SKU of one activation int type, compiled. */
static size_t linear_set(bq_op op, int sm, bq_desc *out) {
  (void)sm;
  static const bq_dtype sts[] = {BQ_F32, BQ_F16, BQ_BF16, BQ_F64};
  bq_dtype it = op == BQ_QUANTIZED_LINEAR ? BQ_S8 : BQ_U8; /* which half of the set */
  size_t n = 0;
  for (size_t o = 0; o < NELEM(FTS); o++)
    for (size_t s = 0; s < NELEM(sts); s++)
      for (int ql = 0; ql < 2; ql++) {
        if (sts[s] == BQ_F64 && FTS[o] != BQ_F64) continue;
        if (ql && sts[s] == BQ_F32) continue; /* the same GEMM as SmoothQuant's */
        bq_desc d;
        memset(&d, 0, sizeof d);
        d.op = ql ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
        d.granularity = BQ_PER_TOKEN;
        d.float_type = FTS[o];
        d.out_type = FTS[o];
        d.scale_type = sts[s];
        d.int_type = it;
        out[n++] = d;
      }
  if (it == BQ_S8) {
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = BQ_LINEAR_WEIGHT_SUMS;
    out[n++] = d;
  }
  return n;
}
/* bq_op picks the half: QuantizedLinear = s8 activations, SmoothQuant = u8. On sm_90 the
   mma.sync GEMMs are what select builds with BARACUDA_QUANT_WGMMA=0. */
static void no_wgmma(void) { setenv("BARACUDA_QUANT_WGMMA", "0", 1); }
Test(compile, linear_s8_on_sm_80, .timeout = 900) { compile_all(BQ_QUANTIZED_LINEAR, 80, linear_set); }
Test(compile, linear_s8_on_sm_90, .timeout = 900, .init = no_wgmma) { compile_all(BQ_QUANTIZED_LINEAR, 90, linear_set); }
Test(compile, linear_u8_on_sm_80, .timeout = 900) { compile_all(BQ_SMOOTHQUANT_LINEAR, 80, linear_set); }
Test(compile, linear_u8_on_sm_90, .timeout = 900, .init = no_wgmma) { compile_all(BQ_SMOOTHQUANT_LINEAR, 90, linear_set); }

/* sm_90a modules (the wgmma tiles): every output type x activation int type, with f32
   scales and with bf16 weight scales under QuantizedLinear; the other scale variants
   differ from these only in the epilogue's loads, which the sm_90 compiles above cover */
static size_t linear_set_90a(bq_op op, int sm, bq_desc *out) {
  (void)op;
  (void)sm;
  size_t n = 0;
  for (size_t o = 0; o < NELEM(FTS); o++)
    for (size_t i = 0; i < NELEM(ITS); i++) {
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = i ? BQ_QUANTIZED_LINEAR : BQ_SMOOTHQUANT_LINEAR;
      d.granularity = BQ_PER_TOKEN;
      d.float_type = FTS[o];
      d.out_type = FTS[o];
      d.scale_type = i ? BQ_BF16 : BQ_F32;
      d.int_type = ITS[i];
      out[n++] = d;
    }
  return n;
}
Test(compile, linear_on_sm_90a, .timeout = 900) {
  compile_all(BQ_SMOOTHQUANT_LINEAR, 90, linear_set_90a);
  /* select's default on sm_90: these SKUs are the sm_90a ones */
  static bq_desc set[64];
  size_t n = linear_set_90a(BQ_SMOOTHQUANT_LINEAR, 90, set);
  for (size_t i = 0; i < n; i++) {
    char sku[256];
    cr_assert_eq(bq_sku(&set[i], 90, sku, sizeof sku), BQ_SUCCESS);
    cr_assert(strstr(sku, "+wgmma_m64n256k32.sm_90a"), "%s", sku);
  }
}

/* FP8 linear layers: every activation type x output type (tensorwise and rowwise share the
   kernel), on sm_89 (mma.sync tiles) and on sm_90 (select's sm_90a wgmma tiles) */
static size_t fp8_linear_set(bq_op op, int sm, bq_desc *out) {
  (void)op;
  (void)sm;
  static const bq_dtype ots[] = {BQ_F32, BQ_F16, BQ_BF16};
  size_t n = 0;
  for (size_t o = 0; o < NELEM(ots); o++)
    for (int e5 = 0; e5 < 2; e5++) {
      bq_desc d;
      memset(&d, 0, sizeof d);
      d.op = BQ_FP8_LINEAR;
      d.granularity = o == 1 ? BQ_PER_TOKEN : BQ_PER_TENSOR;
      d.out_type = ots[o];
      d.int_type = e5 ? BQ_E5M2 : BQ_E4M3;
      out[n++] = d;
    }
  return n;
}
Test(compile, fp8_linear_on_sm_89, .timeout = 900) { compile_all(BQ_FP8_LINEAR, 89, fp8_linear_set); }
Test(compile, fp8_linear_on_sm_90a, .timeout = 900) {
  compile_all(BQ_FP8_LINEAR, 90, fp8_linear_set);
  static bq_desc set[8];
  size_t n = fp8_linear_set(BQ_FP8_LINEAR, 90, set);
  for (size_t i = 0; i < n; i++) {
    char sku[256];
    cr_assert_eq(bq_sku(&set[i], 90, sku, sizeof sku), BQ_SUCCESS);
    cr_assert(strstr(sku, "+wgmma_m64n128k32.sm_90a"), "%s", sku);
  }
}
/* no FP8 tensor cores before sm_89: refused by name, never compiled */
Test(sku, fp8_linear_needs_sm_89) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_FP8_LINEAR;
  d.out_type = BQ_BF16;
  char sku[256];
  cr_assert_eq(bq_sku(&d, 80, sku, sizeof sku), BQ_ERROR_NOT_SUPPORTED);
  cr_assert(strstr(bq_last_error(), "desc.op (fp8_linear) needs compute capability 8.9"), "%s", bq_last_error());
  cr_assert_eq(bq_sku(&d, 89, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_str_eq(sku, "fp8_linear.a_e4m3.w_e4m3.out_bf16.scale_f32.mma_m16n8k32.sm_89");
}

/* ---- SKUs back to descriptors (the cache tool's warm --skus and list) --------------------- */
/* Every kernel of every family, on each kind of target: bq__desc_from_sku gives back a
   desc and target whose SKU is the one parsed; the three families partition the kernels. */
static int cmp_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

Test(sku, desc_from_sku_round_trips_every_kernel) {
  static bq_desc all[8192];
  int n = bq__all_descs(7, all, 8192);
  cr_assert(n > 0 && n <= 8192, "%d kernels", n);
  int per_family = bq__all_descs(1, NULL, 0) + bq__all_descs(2, NULL, 0) + bq__all_descs(4, NULL, 0);
  int linear_only = bq__all_descs(4, NULL, 0), dyn_only = bq__all_descs(2, NULL, 0);
  /* QuantizedLinear's activation kernels are dynamic-quantize kernels listed with linear too,
     and dynamic quantize's stochastic rounding holds affine plans listed with it */
  cr_assert(per_family > n && per_family - n <= 16 + 512, "%d per family, %d in all", per_family, n);
  cr_assert(linear_only > 40 && dyn_only > 50, "%d linear, %d dynamic", linear_only, dyn_only);
  size_t checked = 0;
  for (int i = 0; i < n; i++)
    for (size_t t = 0; t < NELEM(TARGETS); t++) {
      int lin = bq__op_in(all[i].op, "linear");
      bq__target target = TARGETS[t];
      if (target.arch_a && !(lin && all[i].op != BQ_LINEAR_WEIGHT_SUMS)) continue;
      bq__kernel_src k;
      memset(&k, 0, sizeof k);
      bq__sku_of(&all[i], &target, &k);
      bq_desc back;
      bq__target bt;
      bq_status st = bq__desc_from_sku(k.sku, &back, &bt);
      cr_assert_eq(st, BQ_SUCCESS, "%s: %s", k.sku, bq_last_error());
      cr_assert(same_target(&bt, &target), "%s: target %d %d %d", k.sku, bt.arch, bt.ptx, bt.arch_a);
      bq__kernel_src k2;
      memset(&k2, 0, sizeof k2);
      bq__sku_of(&back, &bt, &k2);
      cr_assert_str_eq(k2.sku, k.sku);
      /* the same kernel: byte-identical source */
      bq__kernel_src s1, s2;
      cr_assert_eq(bq__kernel_for(&all[i], &target, &s1), BQ_SUCCESS);
      cr_assert_eq(bq__kernel_for(&back, &bt, &s2), BQ_SUCCESS);
      cr_assert(s1.source.n == s2.source.n && !memcmp(s1.source.p, s2.source.p, s1.source.n), "%s: two sources",
                k.sku);
      free(s1.source.p);
      free(s2.source.p);
      checked++;
    }
  /* all distinct: each SKU once, sorted, no two neighbours equal */
  static char names[8192][sizeof(((bq__kernel_src *)0)->sku)];
  for (int i = 0; i < n; i++) {
    bq__kernel_src a;
    memset(&a, 0, sizeof a);
    bq__sku_of(&all[i], &TARGETS[0], &a);
    memcpy(names[i], a.sku, sizeof names[i]);
  }
  qsort(names, (size_t)n, sizeof names[0], cmp_names);
  for (int i = 1; i < n; i++) cr_assert_str_neq(names[i - 1], names[i]);
  cr_log_info("%d kernels (%d with linear's activation kernels counted twice), %zu SKUs round-tripped", n,
              per_family, checked);
}

Test(sku, desc_from_sku_rejects_what_the_library_does_not_name) {
  static const char *bad[] = {
      "",
      "quantize",
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2",          /* no target */
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_",      /* no arch */
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90b",   /* not a target */
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.compute_90a", /* PTX is never arch-specific */
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec8x2.sm_90",    /* another variant */
      "quantize.fwd.per_tensor.f32.s8.q[-128,128].scale_f32.vec4x2.sm_90",    /* outside s8 */
      "quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f16.vec4x2.sm_90",    /* per tensor scales are C */
      "quantize.sideways.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90",
      "dynamic_quantize.bwd.per_token.f32.s8.q[-128,127].scale_f32.vec4.sym.sm_90",
      "dynamic_quantize.fwd.per_token.f32.s8.q[-128,127].scale_f32.vec4.both.sm_90",
      "linear_gemm.a_s8.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32+wgmma_m64n256k32.sm_90", /* wgmma needs 90a */
      "linear_gemm.a_s8.w_s8.out_f16.scale_f64.ascale_f64.mma_m16n8k32.sm_90", /* f64 scales, f16 out */
      "linear_gemm.a_s32.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32.sm_90",
      "linear_weight_sums.s8.dp4a.sm_90.extra",
      "quantize.fwd.per_tensor.f32.e4m3.q[0,0].scale_f32.vec4x2.sm_90",       /* FP8 names no q-range */
      "quantize.fwd.per_tensor.f32.e4m3.q[-128,127].scale_f32.vec4x2.sm_90",
      "quantize.fwd.per_tensor.f32.e4m3.soft.scale_f32.vec4x2.sm_90",         /* the test hook's, when off */
      "dynamic_quantize.fwd.per_token.f32.e5m2.scale_f32.vec4.asym.sm_90",    /* FP8 is symmetric */
      "dynamic_quantize.fwd.per_channel.f32.e5m2.scale_f32.vec4.sym.sm_90",
      "quantize.fwd.per_tensor.e4m3.e4m3.scale_f32.vec4x2.sm_90",
      "quantize.fwd.per_token.f32.s8.q[-128,127].scale_mn_f32.vec4x2.sm_90",   /* MN-major: per group only */
      "quantize.fwd.per_block.f32.s8.q[-128,127].scale_mn_f32.vec4x2.sm_90",
      "quantize.fwd.per_token.f32.s8.q[-128,127].scale_ue8m0x4.vec4x2.sm_90",  /* packed: per group only */
      "quantize.fwd.per_block.f32.s8.q[-128,127].scale_ue8m0x4.vec4x2.sm_90",
      "dynamic_quantize.fwd.per_group.f32.s8.q[-128,127].scale_ue8m0x4.vec4.asym.pow2.sm_90", /* no zero points */
      "dynamic_quantize.fwd.per_group.f32.s8.q[-128,127].scale_ue8m0x4.vec4.sym.sm_90",       /* pow2 implied */
      "quantize.fwd.per_group.f32.s8.q[-128,127].scale_mn_.vec4x2.sm_90",
      "quantize.fwd.per_group.f32.s8.q[-128,127].scale_mn_mn_f32.vec4x2.sm_90",
      "quantize.fwd.per_group.f32.s8.q[-128,127].scale_nm_f32.vec4x2.sm_90",
      "quantize.fwd.per_blocks.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90",
      "rmsnorm_quantize.fwd.per_block.bf16.s8.q[-128,127].scale_f32.vec8.sym.sm_90", /* not for fused producers */
      "rmsnorm_quantize.fwd.per_group.bf16.s8.q[-128,127].scale_mn_f32.vec8.sym.sm_90",
  };
  for (size_t i = 0; i < NELEM(bad); i++) {
    bq_desc d;
    bq__target t;
    cr_assert_eq(bq__desc_from_sku(bad[i], &d, &t), BQ_ERROR_INVALID_ARGUMENT, "accepted \"%s\"", bad[i]);
    cr_assert(strstr(bq_last_error(), "SKU ("), "%s", bq_last_error());
  }
  bq_desc d;
  bq__target t;
  cr_assert_eq(bq__desc_from_sku(NULL, &d, &t), BQ_ERROR_INVALID_ARGUMENT);
  /* and a GEMM with f32 activation scales under bf16 weight scales is QuantizedLinear's */
  cr_assert_eq(bq__desc_from_sku("linear_gemm.a_u8.w_s8.out_bf16.scale_bf16.ascale_f32.mma_m16n8k32.sm_80", &d, &t),
               BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(d.op, BQ_QUANTIZED_LINEAR);
  cr_assert_eq(bq__desc_from_sku("linear_gemm.a_u8.w_s8.out_bf16.scale_bf16.ascale_bf16.mma_m16n8k32.sm_80", &d, &t),
               BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(d.op, BQ_SMOOTHQUANT_LINEAR);
  /* FP8 SKUs, which name no q-range */
  cr_assert_eq(bq__desc_from_sku("dynamic_quantize.fwd.per_token.f32.e5m2.scale_f32.vec4.sym.sm_90", &d, &t),
               BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(d.op == BQ_DYNAMIC_QUANTIZE && d.int_type == BQ_E5M2 && d.qmin == 0 && d.qmax == 0 && !d.asymmetric);
}

/* Per block, MN-major and packed SKUs back to their descriptors: the normalized desc
   itself (scale_layout, scale_type and the implied pow2_scales included), and every such
   kernel is among bq__all_descs' (what the cache tool warms and lists). */
Test(sku, desc_from_sku_block_mn_and_packed) {
  static bq_desc all[8192];
  const int n = bq__all_descs(3, all, 8192);
  cr_assert(n > 0 && n <= 8192, "%d", n);
  int block = 0, mn = 0, x4 = 0;
  for (int i = 0; i < n; i++) {
    block += all[i].granularity == BQ_PER_BLOCK;
    mn += all[i].scale_layout == BQ_SCALES_MN_MAJOR;
    x4 += all[i].scale_type == BQ_UE8M0X4;
    cr_assert(all[i].scale_layout == BQ_SCALES_ROW_MAJOR || all[i].granularity == BQ_PER_GROUP);
    cr_assert(all[i].scale_type != BQ_UE8M0X4 || (all[i].granularity == BQ_PER_GROUP && !all[i].asymmetric));
  }
  /* per block: the affine ops, 3 ops x 2 directions x 4 I x scale types (f32, T, ue8m0: 3 for
     each T, 2 for f32 data); dynamic quantize, 6 (I, symmetry) pairs (s8 and u8 both ways,
     FP8 symmetric) x (scale type, pow2) pairs (f32 and T each with pow2 0 or 1, ue8m0 with
     pow2 implied: 5 for each T, 3 for f32 data); and quantize and fake quantize forward, and
     dynamic quantize, again with stochastic rounding; with the fused rotation, quantize and fake
     quantize forward (both roundings), dequantize forward and fake quantize backward */
  cr_assert_eq(block, 3 * 2 * 4 * (2 + 3 * 3) + 2 * 4 * (2 + 3 * 3) + 2 * 6 * (3 + 3 * 5) + 6 * 4 * (2 + 3 * 3),
               "%d per-block kernels", block);
  cr_assert(mn > 0 && x4 > 0, "%d MN-major, %d packed", mn, x4);
  static const struct { bq_op op; bq_direction dir; bq_granularity g; bq_dtype ft, it, st; bq_scale_layout lay; int asym; } k[] = {
    {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_BF16, BQ_E4M3, BQ_UE8M0, BQ_SCALES_ROW_MAJOR, 0},
    {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_F32, BQ_U8, BQ_F32, BQ_SCALES_ROW_MAJOR, 1},
    {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_BLOCK, BQ_BF16, BQ_S8, BQ_BF16, BQ_SCALES_ROW_MAJOR, 0},
    {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_BLOCK, BQ_F64, BQ_E5M2, BQ_F64, BQ_SCALES_ROW_MAJOR, 0},
    {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR, 0},
    {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16, BQ_S8, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR, 0},
    {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_ROW_MAJOR, 0},
    {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16, BQ_E4M3, BQ_UE8M0X4, BQ_SCALES_MN_MAJOR, 0},
    {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16, BQ_S8, BQ_F32, BQ_SCALES_MN_MAJOR, 1},
    {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32, BQ_U8, BQ_UE8M0, BQ_SCALES_MN_MAJOR, 0},
  };
  for (size_t i = 0; i < NELEM(k); i++)
    for (size_t t = 0; t < 3; t++) {
      bq_desc in;
      memset(&in, 0, sizeof in);
      in.op = k[i].op;
      in.direction = k[i].dir;
      in.granularity = k[i].g;
      in.float_type = k[i].ft;
      in.int_type = k[i].it;
      in.scale_type = k[i].st;
      in.scale_layout = k[i].lay;
      in.asymmetric = k[i].asym;
      bq_desc norm, back;
      char name[96];
      cr_assert_eq(bq__normalize(&in, &norm, name, sizeof name), BQ_SUCCESS, "#%zu: %s", i, bq_last_error());
      bq__kernel_src ks;
      memset(&ks, 0, sizeof ks);
      bq__sku_of(&norm, &TARGETS[t], &ks);
      bq__target bt;
      cr_assert_eq(bq__desc_from_sku(ks.sku, &back, &bt), BQ_SUCCESS, "%s: %s", ks.sku, bq_last_error());
      cr_assert(same_target(&bt, &TARGETS[t]), "%s", ks.sku);
      cr_assert(!memcmp(&back, &norm, sizeof norm), "%s: the desc read back is not the normalized one", ks.sku);
      cr_assert_eq(back.scale_layout, k[i].lay, "%s", ks.sku);
      cr_assert_eq(back.scale_type, k[i].st, "%s", ks.sku);
      cr_assert_eq(back.granularity, k[i].g, "%s", ks.sku);
      cr_assert_eq(back.pow2_scales, k[i].op == BQ_DYNAMIC_QUANTIZE && (k[i].st == BQ_UE8M0 || k[i].st == BQ_UE8M0X4),
                   "%s", ks.sku);
      int listed = 0;
      for (int j = 0; j < n && !listed; j++) listed = !memcmp(&all[j], &norm, sizeof norm);
      cr_assert(listed, "%s is not among bq__all_descs'", ks.sku);
    }
}

/* The dispatch tables are keyed as their lookups assume: the affine table in the order
   bq__affine_row_of indexes it (op, direction, granularity, float type), each of the
   dynamic table's keys once, the linear table by its entry enum. */
Test(sku, dispatch_tables_are_keyed_as_looked_up) {
  cr_assert_eq(BQ__AFFINE_ROWS, 3 * 2 * 4 * 4);
  for (int i = 0; i < BQ__AFFINE_ROWS; i++) {
    const bq__affine_row *r = &bq__affine_table[i];
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = r->op;
    d.direction = r->dir;
    d.granularity = r->gran;
    d.float_type = r->ft;
    cr_assert_eq(bq__affine_row_of(&d), r, "affine row %d (%s %s %s) is out of order", i, bq__op_name(r->op),
                 bq__gran_name(r->gran), bq__dtype_name(r->ft));
    cr_assert(r->u == 2 || r->u == 4, "affine row %d: u %d", i, r->u);
  }
  for (int i = 0; i < BQ__DYNAMIC_ROWS; i++) {
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.granularity = bq__dynamic_table[i].gran;
    d.float_type = bq__dynamic_table[i].ft;
    cr_assert_eq(bq__dynamic_row_of(&d), &bq__dynamic_table[i], "dynamic row %d is not its key's", i);
  }
  for (int i = 0; i < BQ__GEMM_CONFIGS; i++) cr_assert_eq(bq__linear_table[i].entry, i, "linear row %d", i);
}

/* ---- modules: one an entry point -------------------------------------------------------------- */
/* Select loads the modules of the entry points a typical problem takes (bq__plan_typical's
   dry run): for every kernel the families name, that run succeeds and takes one or more of
   the plan's own entry points (a plan whose dry run took none would load them all). */
Test(sku, typical_problem_takes_the_plans_own_entry_points) {
  const int n = bq__all_descs(BQ__ALL_FAMILIES, NULL, 0);
  cr_assert(n > 2000, "%d kernels", n);
  bq_desc *all = calloc((size_t)n, sizeof *all);
  cr_assert_not_null(all);
  cr_assert_eq(bq__all_descs(BQ__ALL_FAMILIES, all, n), n);
  int by_count[4] = {0};
  for (int i = 0; i < n; i++) {
    bq_plan p, sub, sub2;
    char sku[256];
    cr_assert_eq(bq__plan_init(&all[i], &p), BQ_SUCCESS, "%s", bq_last_error());
    bq_desc q, q2;
    if (p.fam->sub && p.fam->sub(&p.desc, &q)) { /* the plan it holds, as select makes it (QuantizedLinear's
                                                    activations; dynamic quantize's stochastic rounding; the
                                                    fused producers' second op) */
      cr_assert_eq(bq__plan_init(&q, &sub), BQ_SUCCESS, "%s", bq_last_error());
      p.sub = &sub;
      if (sub.fam->sub && sub.fam->sub(&sub.desc, &q2)) { /* (and the one that holds: a fused producer's
                                                               dynamic quantize rounding stochastically) */
        cr_assert_eq(bq__plan_init(&q2, &sub2), BQ_SUCCESS, "%s", bq_last_error());
        sub.sub = &sub2;
      }
    }
    bq_sku(&all[i], 90, sku, sizeof sku);
    const unsigned taken = bq__plan_typical(&p);
    cr_assert(taken != 0, "%s: the dry run took no entry point (%s)", sku, bq_last_error());
    int count = 0;
    for (int e = 0; e < BQ__MAX_KERNELS; e++)
      if (taken >> e & 1) {
        cr_assert_not_null(p.kernels[e], "%s: the dry run took entry point %d, which it lacks", sku, e);
        count++;
      }
    by_count[count < 3 ? count : 3]++;
  }
  /* (per tensor dynamic quantize takes two: its reduction and its quantize pass) */
  cr_log_info("%d kernels: %d take one entry point on the typical problem, %d two, %d more", n, by_count[1],
              by_count[2], by_count[3]);
  free(all);
}
