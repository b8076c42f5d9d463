/* kernel_dump - compile kernels of one baracuda_quant.h with NVRTC alone (no GPU, no disk
   cache) and write each binary as it comes from NVRTC: a cubin, or PTX for compute_ targets.
   tools/kernel_diff.sh builds it once per header and compares two headers' output.

   Built against the header under test, which it does not include itself:
     cc -std=c11 -D_POSIX_C_SOURCE=200809L -DBARACUDA_QUANT_IMPLEMENTATION -DBARACUDA_QUANT_TOOLS \
        -include PATH/baracuda_quant.h tools/kernel_dump.c -ldl -lpthread -lm
   Headers that predate the tools' helpers (bq__desc_from_sku, bq__all_descs, bq__target_for)
   are built with -DKD_NO_DESC_FROM_SKU, -DKD_NO_ALL_DESCS, -DKD_NO_TARGET_FOR (kernel_diff.sh
   passes each one the header lacks); this file then does the same with the older header's
   own bq__normalize, bq__sku_of and bq__choose_target.

   usage: kernel_dump --out DIR (--skus FILE | --all) [--arch 90[,80...]]
                      [--family affine,dynamic,linear,fused,mx,rotate] [--filter TEXT] [--shard I/N] [--list]
                      [--modules]
     --skus FILE  one SKU a line as `baracuda-quant list --skus` prints them ("A + B" is
                  both; '#' starts a comment), each built for the target it names; --arch,
                  when given, keeps the SKUs whose target is of one of those archs
     --all        every kernel of the families with the int types' full q-ranges, for the
                  target bq_plan_select picks on each --arch (default 90) under this
                  environment (BARACUDA_QUANT_FORCE_PTX, BARACUDA_QUANT_WGMMA)
     --family F   only those families; --filter TEXT: only SKUs containing TEXT
     --shard I/N  only the SKUs whose position in the list is I modulo N
     --list       print the SKUs (marking those this header does not name), build nothing
     --modules    each SKU as select loads it, a module for each entry point (named
                  "SKU@entry"), rather than all its entry points in one source (headers
                  that have modules)
   Writes DIR/<SKU's file name>.cubin (or .ptx) and one line per SKU to DIR/index.I:
     ok<TAB>SKU<TAB>FILE | nosku<TAB>SKU<TAB>why | failed<TAB>SKU<TAB>why
   (nosku: this header does not name that SKU; failed: NVRTC could not build it).
   Exit 0 when the index is complete, 1 when NVRTC cannot be used, 2 on usage errors. */
#ifndef BQ_VERSION_STRING
#error "build with -DBARACUDA_QUANT_IMPLEMENTATION -include PATH/baracuda_quant.h (see the comment above)"
#endif

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KD_MAX_ARCHS 16
#define KD_FAM_AFFINE 1u
#define KD_FAM_DYNAMIC 2u
#define KD_FAM_LINEAR 4u
#define KD_FAM_FUSED 8u
#define KD_FAM_MX 16u
#define KD_FAM_ROTATE 32u

static const char *USAGE =
    "usage: kernel_dump --out DIR (--skus FILE | --all) [--arch 90[,80...]]\n"
    "                   [--family affine,dynamic,linear,fused,mx,rotate] [--filter TEXT] [--shard I/N] [--list]\n"
    "                   [--modules]\n";

typedef struct kd_item {
  char sku[256];
} kd_item;

static int usage(const char *fmt, const char *arg) {
  fprintf(stderr, "kernel_dump: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n%s", USAGE);
  return 2;
}

static void kd_trim(char *s) {
  size_t n = strlen(s), k = 0;
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  while (isspace((unsigned char)s[k])) k++;
  memmove(s, s + k, n - k + 1);
}

/* the family a SKU belongs to, by its name */
static unsigned kd_family_of_name(const char *sku) {
  if (!strncmp(sku, "linear_", 7)) return KD_FAM_LINEAR;
  if (!strncmp(sku, "dynamic_quantize.", 17)) return KD_FAM_DYNAMIC;
  if (!strncmp(sku, "rmsnorm_quantize.", 17) || strstr(sku, "_mul_quantize.")) return KD_FAM_FUSED;
  if (!strncmp(sku, "mx_", 3)) return KD_FAM_MX;
  if (!strncmp(sku, "hadamard.", 9)) return KD_FAM_ROTATE;
  return KD_FAM_AFFINE;
}

/* the arch a SKU's target names (its last dot-separated part: sm_90, sm_90a, compute_90),
   or -1 */
static int kd_arch_of_name(const char *sku) {
  const char *dot = strrchr(sku, '.'), *p = dot ? dot + 1 : sku;
  if (!strncmp(p, "sm_", 3)) p += 3;
  else if (!strncmp(p, "compute_", 8)) p += 8;
  else return -1;
  return isdigit((unsigned char)*p) ? atoi(p) : -1;
}

/* ---- the helpers of newer headers, for older ones ------------------------------------- */
#if defined(KD_NO_DESC_FROM_SKU) || defined(KD_NO_ALL_DESCS)
static const bq_granularity kd_grans[] = {BQ_PER_TENSOR, BQ_PER_CHANNEL, BQ_PER_TOKEN, BQ_PER_GROUP};
static const bq_dtype kd_fts[] = {BQ_F32, BQ_F64, BQ_F16, BQ_BF16}, kd_its[] = {BQ_S8, BQ_U8};
#endif

#ifdef KD_NO_DESC_FROM_SKU
/* The desc whose SKU (for target t) is exactly sku, found by trying every desc this header
   normalizes with the SKU's q-range: the header's own naming decides. */
static bq_status kd_desc_from_sku(const char *sku, bq_desc *out, bq__target *t) {
  memset(t, 0, sizeof *t);
  const char *dot = strrchr(sku, '.'), *tn = dot ? dot + 1 : "";
  const char *num = !strncmp(tn, "sm_", 3) ? tn + 3 : !strncmp(tn, "compute_", 8) ? tn + 8 : NULL;
  char *end = NULL;
  long arch = num && isdigit((unsigned char)*num) ? strtol(num, &end, 10) : -1;
  t->ptx = num == tn + 8;
  t->arch_a = end && !strcmp(end, "a") && !t->ptx;
  t->arch = (int)arch;
  if (arch <= 0 || arch >= 1000 || !end || (*end && !t->arch_a))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%s) names no target", sku);
  int qmin = 0, qmax = 0;
  const char *q = strstr(sku, ".q[");
  if (q && sscanf(q, ".q[%d,%d]", &qmin, &qmax) != 2) qmin = qmax = 0;
  int lin = !strncmp(sku, "linear_", 7);
  for (int op = BQ_QUANTIZE; op <= BQ_LINEAR_WEIGHT_SUMS; op++) {
    int op_lin = op >= BQ_QUANTIZED_LINEAR;
    if (op_lin != lin) continue;
    if (!op_lin) { /* the op's name leads the SKU */
      const char *name = bq__op_name((bq_op)op);
      size_t n = strlen(name);
      if (strncmp(sku, name, n) || sku[n] != '.') continue;
    }
    { /* the op alone, every other field its default (the weight sums' desc) */
      bq_desc in, d;
      char name[96];
      bq__kernel_src k;
      memset(&in, 0, sizeof in);
      memset(&k, 0, sizeof k);
      in.op = (bq_op)op;
      if (bq__normalize(&in, &d, name, sizeof name) == BQ_SUCCESS && (bq__sku_of(&d, t, &k), !strcmp(k.sku, sku))) {
        *out = d;
        return BQ_SUCCESS;
      }
    }
    for (int dir = 0; dir < 2; dir++)
      for (int g = 0; g < 4; g++)
        for (int f = 0; f < 4; f++)
          for (int i = 0; i < 2; i++)
            for (int s = 0; s < 4; s++)
              for (int asym = 0; asym < 2; asym++)
                for (int o = 0; o < (op_lin ? 4 : 1); o++) {
                  bq_desc in, d;
                  char name[96];
                  memset(&in, 0, sizeof in);
                  in.op = (bq_op)op;
                  in.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
                  in.granularity = kd_grans[g];
                  in.float_type = kd_fts[f];
                  in.int_type = kd_its[i];
                  in.scale_type = kd_fts[s];
                  in.asymmetric = asym;
                  in.qmin = op_lin ? 0 : qmin;
                  in.qmax = op_lin ? 0 : qmax;
                  if (op_lin) in.out_type = kd_fts[o];
                  if (bq__normalize(&in, &d, name, sizeof name) != BQ_SUCCESS) continue;
                  bq__kernel_src k;
                  memset(&k, 0, sizeof k);
                  bq__sku_of(&d, t, &k);
                  if (!strcmp(k.sku, sku)) {
                    *out = d;
                    return BQ_SUCCESS;
                  }
                }
  }
  return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "SKU (%s) is not one this library (%s) names", sku, BQ_VERSION_STRING);
}
#define KD_DESC_FROM_SKU kd_desc_from_sku
#else
#define KD_DESC_FROM_SKU bq__desc_from_sku
#endif

#ifdef KD_NO_ALL_DESCS
/* Every kernel of the families (bq__all_descs of newer headers): each op, direction,
   granularity and type this header normalizes, full q-ranges, QuantizedLinear's activation
   kernels too; one desc per SKU. Returns how many (all of them when out is NULL), -1 when
   out of memory. */
static int kd_all_descs(unsigned families, bq_desc *out, int cap) {
  const bq__target t = {.arch = 80};
  int n = 0, nseen = 0, seen_cap = 0;
  char(*seen)[256] = NULL;
  for (int op = BQ_QUANTIZE; op <= BQ_LINEAR_WEIGHT_SUMS; op++) {
    unsigned fam = op <= BQ_FAKE_QUANTIZE ? KD_FAM_AFFINE : op == BQ_DYNAMIC_QUANTIZE ? KD_FAM_DYNAMIC : KD_FAM_LINEAR;
    if (!(families & fam)) continue;
    int lin = fam == KD_FAM_LINEAR;
    for (int dir = 0; dir < 2; dir++)
      for (int g = 0; g < 4; g++)
        for (int f = 0; f < 4; f++)
          for (int i = 0; i < 2; i++)
            for (int s = 0; s < 4; s++)
              for (int asym = 0; asym < 2; asym++)
                for (int o = 0; o < (lin ? 4 : 1); o++) {
                  bq_desc in, d[2];
                  char name[96];
                  memset(&in, 0, sizeof in);
                  in.op = (bq_op)op;
                  in.direction = dir ? BQ_BACKWARD : BQ_FORWARD;
                  in.granularity = kd_grans[g];
                  in.float_type = kd_fts[f];
                  in.int_type = kd_its[i];
                  in.scale_type = kd_fts[s];
                  in.asymmetric = asym;
                  if (lin) in.out_type = kd_fts[o];
                  if (bq__normalize(&in, &d[0], name, sizeof name) != BQ_SUCCESS) continue;
                  int nd = 1;
                  if (op == BQ_QUANTIZED_LINEAR) {
                    bq__linear_activation_desc(&d[0], &in);
                    if (bq__normalize(&in, &d[1], name, sizeof name) == BQ_SUCCESS) nd = 2;
                  }
                  for (int j = 0; j < nd; j++) {
                    bq__kernel_src k;
                    memset(&k, 0, sizeof k);
                    bq__sku_of(&d[j], &t, &k);
                    int dup = 0;
                    for (int m = 0; m < nseen && !dup; m++) dup = !strcmp(seen[m], k.sku);
                    if (dup) continue;
                    if (nseen == seen_cap) {
                      seen_cap = seen_cap ? 2 * seen_cap : 256;
                      char(*grown)[256] = (char(*)[256])realloc(seen, (size_t)seen_cap * sizeof *seen);
                      if (!grown) { free(seen); return -1; }
                      seen = grown;
                    }
                    memcpy(seen[nseen++], k.sku, sizeof k.sku);
                    if (out && n < cap) out[n] = d[j];
                    n++;
                  }
                }
  }
  free(seen);
  return n;
}
#define KD_ALL_DESCS kd_all_descs
#else
#define KD_ALL_DESCS bq__all_descs
#endif

#ifdef KD_NO_TARGET_FOR
/* the target select picks: older headers chose it with bq__choose_target */
static bq_status kd_target_for(const bq_desc *d, int sm, bq__target *t) {
  return bq__choose_target(sm, sm == 90 && bq__wgmma_wanted(d), t);
}
#define KD_TARGET_FOR kd_target_for
#else
#define KD_TARGET_FOR bq__target_for
#endif

/* ---- the list of SKUs ------------------------------------------------------------------- */
static int kd_push(kd_item **items, int *n, int *cap, const char *sku) {
  for (int i = 0; i < *n; i++)
    if (!strcmp((*items)[i].sku, sku)) return 0;
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 256;
    kd_item *grown = (kd_item *)realloc(*items, (size_t)*cap * sizeof *grown);
    if (!grown) return -1;
    *items = grown;
  }
  snprintf((*items)[(*n)++].sku, sizeof(*items)->sku, "%s", sku);
  return 0;
}

static int kd_keep(const char *sku, unsigned families, const char *filter, const int *archs, int narchs) {
  if (families && !(kd_family_of_name(sku) & families)) return 0;
  if (filter && !strstr(sku, filter)) return 0;
  if (!narchs) return 1;
  int a = kd_arch_of_name(sku);
  for (int i = 0; i < narchs; i++)
    if (archs[i] == a) return 1;
  return 0;
}

static int kd_read_skus(const char *file, unsigned families, const char *filter, const int *archs, int narchs,
                        kd_item **items, int *n) {
  FILE *f = strcmp(file, "-") ? fopen(file, "r") : stdin;
  if (!f) {
    fprintf(stderr, "kernel_dump: cannot open %s: %s\n", file, strerror(errno));
    return -1;
  }
  char line[4096];
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    for (char *part = line; part;) {
      char *plus = strstr(part, " + ");
      if (plus) *plus = 0;
      char sku[4096];
      snprintf(sku, sizeof sku, "%s", part);
      kd_trim(sku);
      part = plus ? plus + 3 : NULL;
      if (!sku[0] || !kd_keep(sku, families, filter, archs, narchs)) continue;
      if (strlen(sku) >= sizeof(*items)->sku) {
        fprintf(stderr, "kernel_dump: %s: SKU too long: %.80s...\n", file, sku);
        continue;
      }
      if (kd_push(items, n, &cap, sku)) { fprintf(stderr, "kernel_dump: out of memory\n"); return -1; }
    }
  }
  if (f != stdin) fclose(f);
  return 0;
}

/* --all: every desc of the families on every arch, named with the target select picks;
   a desc with no target on an arch is recorded as failed under its name for sm_<arch> */
static int kd_all_skus(unsigned families, const char *filter, const int *archs, int narchs, FILE *index,
                       kd_item **items, int *n) {
  int nd = KD_ALL_DESCS(families ? families : 31u, NULL, 0);
  bq_desc *descs = (bq_desc *)calloc((size_t)(nd > 0 ? nd : 1), sizeof *descs);
  if (nd < 0 || !descs) { fprintf(stderr, "kernel_dump: out of memory\n"); free(descs); return -1; }
  KD_ALL_DESCS(families ? families : 31u, descs, nd);
  int cap = 0;
  for (int a = 0; a < narchs; a++)
    for (int i = 0; i < nd; i++) {
      bq__target t;
      bq__kernel_src k;
      memset(&k, 0, sizeof k);
      if (KD_TARGET_FOR(&descs[i], archs[a], &t) != BQ_SUCCESS) {
        bq__target any = {.arch = archs[a]};
        bq__sku_of(&descs[i], &any, &k);
        if (index && (!filter || strstr(k.sku, filter))) fprintf(index, "failed\t%s\tno target: %s\n", k.sku, bq_last_error());
        continue;
      }
      bq__sku_of(&descs[i], &t, &k);
      if (filter && !strstr(k.sku, filter)) continue;
      if (kd_push(items, n, &cap, k.sku)) { fprintf(stderr, "kernel_dump: out of memory\n"); free(descs); return -1; }
    }
  free(descs);
  return 0;
}

/* ---- one SKU ------------------------------------------------------------------------------- */
static void kd_module(const char *sku, const bq_desc *dp, const bq__target *tp, const char *out_dir, FILE *index);
static int kd_modules; /* --modules: each entry point's module of a SKU, as select loads them */
static void kd_one(const char *sku, const char *out_dir, FILE *index) {
  bq_desc d;
  bq__target t;
  if (KD_DESC_FROM_SKU(sku, &d, &t) != BQ_SUCCESS) {
    fprintf(index, "nosku\t%s\t%s\n", sku, bq_last_error());
    return;
  }
#ifdef BQ__HAVE_MODULES
  if (kd_modules && !t.module) {
    const char *names[BQ__MAX_KERNELS];
    bq__kernels_of(&d, &t, names);
    for (int e = 0; e < BQ__MAX_KERNELS; e++) {
      if (!names[e]) continue;
      bq__target m = t;
      m.module = e + 1;
      bq__kernel_src k;
      memset(&k, 0, sizeof k);
      bq__sku_of(&d, &m, &k);
      kd_module(k.sku, &d, &m, out_dir, index);
    }
    return;
  }
#endif
  kd_module(sku, &d, &t, out_dir, index);
}
static void kd_module(const char *sku, const bq_desc *dp, const bq__target *tp, const char *out_dir, FILE *index) {
  bq_desc d = *dp;
  bq__target t = *tp;
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&d, &t, &k);
  void *bin = NULL;
  size_t len = 0;
  bq_status st = bq__build_source(&d, &k);
  if (!st) st = bq__compile(&k, &bin, &len);
  if (st) {
    char why[1024];
    snprintf(why, sizeof why, "%s", bq_last_error());
    for (char *p = why; *p; p++)
      if (*p == '\n' || *p == '\t') *p = ' ';
    fprintf(index, "failed\t%s\t%s\n", sku, why);
  } else {
    char name[300], path[PATH_MAX + 300];
    snprintf(name, sizeof name, "%s.%s", k.file, t.ptx ? "ptx" : "cubin");
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    size_t n = t.ptx ? strlen((const char *)bin) : len; /* PTX without its NUL */
    if (!f || fwrite(bin, 1, n, f) != n || fclose(f) != 0) {
      fprintf(index, "failed\t%s\tcannot write %s: %s\n", sku, path, strerror(errno));
    } else {
      fprintf(index, "ok\t%s\t%s\n", sku, name);
    }
  }
  free(bin);
  free(k.source.p);
  fflush(index);
}

static int kd_parse_archs(const char *s, int *archs, int *n) {
  *n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || (*end && *end != ',') || v < 50 || v > 999 || *n == KD_MAX_ARCHS) return -1;
    archs[(*n)++] = (int)v;
    s = *end ? end + 1 : end;
  }
  return *n ? 0 : -1;
}

int main(int argc, char **argv) {
  const char *out = NULL, *skus = NULL, *filter = NULL;
  int all = 0, list = 0, archs[KD_MAX_ARCHS], narchs = 0, shard = 0, nshards = 1;
  unsigned families = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return 0; }
    if (!strcmp(a, "--all")) { all = 1; continue; }
    if (!strcmp(a, "--list")) { list = 1; continue; }
    if (!strcmp(a, "--modules")) {
#ifdef BQ__HAVE_MODULES
      kd_modules = 1;
      continue;
#else
      return usage("%s: this header compiles one module a SKU", a);
#endif
    }
    if (!has) return usage("%s needs an argument (or is unknown)", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--out")) out = v;
    else if (!strcmp(a, "--skus")) skus = v;
    else if (!strcmp(a, "--filter")) filter = v;
    else if (!strcmp(a, "--arch")) {
      if (kd_parse_archs(v, archs, &narchs)) return usage("--arch: \"%s\" is not a list such as 90,80", v);
    } else if (!strcmp(a, "--family")) {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "affine")) families |= KD_FAM_AFFINE;
        else if (!strcmp(tok, "dynamic")) families |= KD_FAM_DYNAMIC;
        else if (!strcmp(tok, "linear")) families |= KD_FAM_LINEAR;
        else if (!strcmp(tok, "fused")) families |= KD_FAM_FUSED;
        else if (!strcmp(tok, "mx")) families |= KD_FAM_MX;
        else if (!strcmp(tok, "rotate")) families |= KD_FAM_ROTATE;
        else return usage("--family: \"%s\" is not affine, dynamic, linear, fused, mx or rotate", tok);
      }
    } else if (!strcmp(a, "--shard")) {
      char tail = 0;
      if (sscanf(v, "%d/%d%c", &shard, &nshards, &tail) != 2 || nshards < 1 || shard < 0 || shard >= nshards)
        return usage("--shard: \"%s\" is not I/N with 0 <= I < N", v);
    } else return usage("unknown option %s", a);
  }
  if (!out) return usage("%s", "--out DIR is required");
  if (all == !!skus) return usage("%s", "give one of --all and --skus FILE");
  if (all && !narchs) archs[narchs++] = 90;
  if (mkdir(out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "kernel_dump: cannot create %s: %s\n", out, strerror(errno));
    return 1;
  }
  char ipath[PATH_MAX];
  snprintf(ipath, sizeof ipath, "%s/index.%d", out, shard);
  FILE *index = fopen(ipath, "w");
  if (!index) {
    fprintf(stderr, "kernel_dump: cannot write %s: %s\n", ipath, strerror(errno));
    return 1;
  }
  if (!bq__nvrtc_get()) { /* nothing can be built: say why once, not once a SKU */
    fprintf(stderr, "kernel_dump: NVRTC cannot be used: %s\n", bq_last_error());
    fclose(index);
    return 1;
  }
  kd_item *items = NULL;
  int n = 0;
  /* --all: only shard 0 records the descs that have no target (once, not once a shard) */
  int rc = all ? kd_all_skus(families, filter, archs, narchs, shard == 0 ? index : NULL, &items, &n)
               : kd_read_skus(skus, families, filter, archs, narchs, &items, &n);
  if (rc) { fclose(index); free(items); return 1; }
  for (int i = shard; i < n; i += nshards) {
    if (list) {
      bq_desc d;
      bq__target t;
      printf("%s%s\n", items[i].sku, KD_DESC_FROM_SKU(items[i].sku, &d, &t) ? "\t(not named by this header)" : "");
    }
    else kd_one(items[i].sku, out, index);
  }
  free(items);
  if (fclose(index) != 0) return 1;
  return 0;
}
