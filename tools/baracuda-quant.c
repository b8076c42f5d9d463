/* baracuda-quant - inspect the setup and fill, list, check and clear the kernel cache.

   usage: baracuda-quant COMMAND [OPTIONS]        (every command takes --help)
     info     the library's version, the CUDA driver and NVRTC found (paths, versions,
              NVRTC's archs), devices and the target each gets, the cache directory,
              this process's cache counters and the BARACUDA_QUANT_* variables set
     warm --arch 90[,89,...] (--all | --skus FILE) [-j N] [--family F[,F]] [--filter TEXT]
          [--dir D] [--dry-run]
              compile kernels into the disk cache with NVRTC alone (no GPU needed), in N
              processes: the same entries (file name and key) bq_plan_select and
              bq_plan_run load on a device of each arch, a module for each entry point of
              a SKU. --all: every kernel of the families (affine, dynamic, linear, fused, mx, rotate)
              with the int types' full q-ranges, under the current environment
              (BARACUDA_QUANT_FORCE_PTX, BARACUDA_QUANT_WGMMA); --skus: one SKU a line as
              bq_plan_sku and `list --skus` print them ("A + B" warms both; "SKU@entry"
              one module), each for the target it names. --filter keeps the SKUs whose
              name contains TEXT.
     list [--dir D] [--skus]
              every file: status (valid, invalid, other: built by another library, NVRTC
              or options), target, size and module SKU, the NVRTC memo, temporary and
              stray files. --skus prints the valid entries' module SKUs alone, for warm
              --skus.
     verify [--dir D] [--fix]
              checks every entry as the library reads it (magic, format, lengths, key,
              checksum, file name); --fix removes invalid entries, unreadable memos and
              stale temporary files. Exit 0 when every entry is valid (after fixing).
     clear [--dir D] [--yes]
              removes the cache entries (*.bqk), the NVRTC memo (nvrtc-*.id), the tuned
              choices (tune-*.txt) and temporary files (*.tmp.*), nothing else; asks first
              unless --yes.
     tune --skus FILE --shape ROWSxCOLS[/G][,...] [--dir D]
              on a GPU: one run of each SKU on each shape, whose first use times the
              kernels the rules leave undecided and keeps the winner in the cache (the
              tune a plan's first run does), for container images.
   --dir defaults to the library's cache directory (BARACUDA_QUANT_CACHE_DIR, else
   $XDG_CACHE_HOME/baracuda_quant, else ~/.cache/baracuda_quant).
   Exit status: 0 success, 1 failure, 2 usage error. */
#define _GNU_SOURCE 1
#define BARACUDA_QUANT_IMPLEMENTATION
#define BARACUDA_QUANT_TOOLS /* bq__all_descs, bq__desc_from_sku and their kin */
#include "../baracuda_quant.h"

#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define EXIT_USAGE 2
#define MAX_ARCHS 16
#define TMP_STALE_S 600 /* a temporary file older than this is left over from a crash */

static const char *g_cmd = "";

static int usage_error(const char *usage, const char *fmt, ...) BQ__PRINTF(2, 3);
static int usage_error(const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "baracuda-quant %s: ", g_cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s", usage);
  return EXIT_USAGE;
}

/* getopt_long over a command's arguments; returns the option, -1 at the end, or '?' after
   reporting an unknown option or a missing argument */
static int next_opt(int argc, char **argv, const char *shorts, const struct option *longs) {
  opterr = 0;
  return getopt_long(argc, argv, shorts, longs, NULL);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void target_name(const bq__target *t, char *buf, size_t n) { bq__target_name(t, buf, n); }

/* The directory to work on: --dir (which the library then uses too), else the library's;
   NULL (reported) where there is none: the disk cache off, or --dir too long. (An empty
   --dir is a usage error, caught by dir_opt_ok before.) */
static const char *cache_dir(const char *cmd, const char *opt) {
  if (opt) setenv("BARACUDA_QUANT_CACHE_DIR", opt, 1);
  const char *dir = bq_cache_directory();
  if (dir) return dir;
  if (opt && !bq__env_flag("BARACUDA_QUANT_DISABLE_CACHE"))
    fprintf(stderr, "baracuda-quant %s: --dir (%zu characters) is too long for a cache directory (at most %d)\n", cmd,
            strlen(opt), BQ__PATH_MAX - 1);
  else fprintf(stderr, "baracuda-quant %s: the disk cache is off (BARACUDA_QUANT_DISABLE_CACHE)\n", cmd);
  return NULL;
}

/* ---- info ----------------------------------------------------------------------------- */
static const char *USAGE_INFO =
    "usage: baracuda-quant info\n"
    "  the library's version, the CUDA driver and NVRTC (paths, versions, NVRTC's archs),\n"
    "  devices (or none) and the targets select builds for them, the cache directory, this\n"
    "  process's cache counters and the BARACUDA_QUANT_* environment variables set\n";

static const char *lib_path(const void *fn_ptr_storage, size_t size) {
  void *p = NULL;
  Dl_info info;
  memcpy(&p, fn_ptr_storage, size < sizeof p ? size : sizeof p);
  if (p && dladdr(p, &info) && info.dli_fname) return info.dli_fname;
  return NULL;
}

static int cmd_info(int argc, char **argv) {
  static const struct option longs[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int c;
  while ((c = next_opt(argc, argv, "h", longs)) != -1) {
    if (c == 'h') { fputs(USAGE_INFO, stdout); return 0; }
    return usage_error(USAGE_INFO, "unknown option %s", argv[optind - 1]);
  }
  if (optind < argc) return usage_error(USAGE_INFO, "unexpected argument %s", argv[optind]);
  printf("library: baracuda_quant %s\n", bq_version_string());

  const bq__driver_api *drv = bq__driver_get();
  const char *dpath = lib_path(&bq__drv.cuInit, sizeof bq__drv.cuInit);
  if (drv)
    printf("driver: %s, CUDA %d.%d\n", dpath ? dpath : "?", drv->version / 1000, drv->version % 1000 / 10);
  else if (dpath)
    printf("driver: %s, not usable (%s: %s)\n", dpath, bq_status_name(bq__drv_status), bq__drv_msg);
  else
    printf("driver: none (%s: %s)\n", bq_status_name(bq__drv_status), bq__drv_msg);

  const bq__nvrtc_api *nv = bq__nvrtc_get();
  if (nv) {
    const char *npath = lib_path(&bq__nv.nvrtcVersion, sizeof bq__nv.nvrtcVersion);
    printf("nvrtc: %s, version %d.%d, archs", npath ? npath : "?", nv->major, nv->minor);
    for (int i = 0; i < nv->num_archs; i++) printf(" sm_%d", nv->archs[i]);
    printf("\n");
  } else {
    printf("nvrtc: none (%s: %s)\n", bq_status_name(bq__nv_status), bq__nv_msg);
  }

  int ndev = 0;
  bq__CUresult r = drv ? drv->cuDeviceGetCount(&ndev) : 0;
  if (!drv) printf("devices: none (no usable driver)\n");
  else if (r) printf("devices: none (cuDeviceGetCount failed: CUresult %d)\n", r);
  else if (ndev == 0) printf("devices: none\n");
  else printf("devices: %d\n", ndev);
  for (int i = 0; drv && !r && i < ndev; i++) {
    bq__CUdevice dev;
    char name[256] = "?";
    int major = 0, minor = 0, sms = 0;
    if (drv->cuDeviceGet(&dev, i) || drv->cuDeviceGetName(name, (int)sizeof name, dev) ||
        drv->cuDeviceGetAttribute(&major, BQ__CU_ATTR_CC_MAJOR, dev) ||
        drv->cuDeviceGetAttribute(&minor, BQ__CU_ATTR_CC_MINOR, dev) ||
        drv->cuDeviceGetAttribute(&sms, BQ__CU_ATTR_MULTIPROCESSOR_COUNT, dev)) {
      printf("  %d: could not be queried\n", i);
      continue;
    }
    int sm = 10 * major + minor;
    bq_desc affine, linear;
    memset(&affine, 0, sizeof affine);
    affine.op = BQ_QUANTIZE;
    affine.float_type = BQ_F32;
    linear = affine;
    linear.op = BQ_SMOOTHQUANT_LINEAR;
    linear.granularity = BQ_PER_TOKEN;
    linear.out_type = BQ_F32;
    bq__target ta, tl;
    char na[32], nl[32];
    if (bq__target_for(&affine, sm, &ta) || bq__target_for(&linear, sm, &tl)) {
      printf("  %d: %s, sm_%d, %d SMs; no target: %s\n", i, name, sm, sms, bq_last_error());
      continue;
    }
    target_name(&ta, na, sizeof na);
    target_name(&tl, nl, sizeof nl);
    /* what the launch rules and the tune's keys read (0: not reported) */
    int threads = 0, l2 = 0, clk = 0;
    if (drv->cuDeviceGetAttribute(&threads, BQ__CU_ATTR_MAX_THREADS_PER_SM, dev)) threads = 0;
    if (drv->cuDeviceGetAttribute(&l2, BQ__CU_ATTR_L2_CACHE_SIZE, dev)) l2 = 0;
    if (drv->cuDeviceGetAttribute(&clk, BQ__CU_ATTR_MEMORY_CLOCK_RATE, dev)) clk = 0;
    printf("  %d: %s, sm_%d, %d SMs of %d threads, L2 %d KiB, memory clock %d MHz; kernels built for %s, "
           "linear GEMMs for %s\n", i, name, sm, sms, threads, l2 >> 10, clk / 1000, na, nl);
  }

  const char *dir = bq_cache_directory();
  struct stat st;
  if (!dir) printf("cache: off (BARACUDA_QUANT_DISABLE_CACHE)\n");
  else if (stat(dir, &st) != 0) printf("cache: %s (does not exist yet)\n", dir);
  else {
    int entries = 0, tuned = 0;
    long long bytes = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      size_t n = strlen(e->d_name);
      char path[BQ__PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (n > 4 && !strcmp(e->d_name + n - 4, ".bqk") && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        entries++;
        bytes += (long long)st.st_size;
      }
      tuned += !strncmp(e->d_name, "tune-", 5) && n > 9 && !strcmp(e->d_name + n - 4, ".txt");
    }
    if (d) closedir(d);
    printf("cache: %s (%d entries, %lld bytes; %d tuned choices: `list` shows them)\n", dir, entries, bytes, tuned);
  }

  printf("first-use tune: %s\n", bq__tune_enabled() ? "on (BARACUDA_QUANT_TUNE=0 turns it off)" : "off (BARACUDA_QUANT_TUNE)");
  bq_cache_stats s;
  bq_cache_get_stats(&s);
  printf("counters (this process): %llu memory hits, %llu disk hits, %llu misses, %llu compiles, %llu corrupt, "
         "%llu write failures\n", (unsigned long long)s.memory_hits, (unsigned long long)s.disk_hits,
         (unsigned long long)s.misses, (unsigned long long)s.compiles, (unsigned long long)s.corrupt,
         (unsigned long long)s.write_failures);
  printf("environment:");
  int any = 0;
  for (char **e = environ; *e; e++)
    if (!strncmp(*e, "BARACUDA_QUANT_", 15)) printf("\n  %s", *e), any = 1;
  printf("%s\n", any ? "" : " no BARACUDA_QUANT_* variable set");
  return 0;
}

/* ---- warm ------------------------------------------------------------------------------- */
static const char *USAGE_WARM =
    "usage: baracuda-quant warm --arch SM[,SM...] (--all | --skus FILE) [-j N]\n"
    "                           [--family " BQ__FAMILY_LIST_COMMAS "] [--filter TEXT] [--dir D] [--dry-run]\n"
    "  compile kernels into the disk cache with NVRTC alone (no GPU), exactly as bq_plan_select\n"
    "  and bq_plan_run load them on a device of each arch (SM = 10 * major + minor: 90 for sm_90):\n"
    "  a SKU's every entry point, each a module of its own\n"
    "  --all          every kernel of the families (default: all of them), full q-ranges, for the\n"
    "                 targets select picks under this environment (BARACUDA_QUANT_FORCE_PTX, _WGMMA)\n"
    "  --skus FILE    one SKU a line as bq_plan_sku or `list --skus` print them (\"A + B\" is two;\n"
    "                 \"SKU@entry\" one module; '-' is standard input), each for the target it\n"
    "                 names, which must be one select uses on one of the archs\n"
    "  -j N           N processes (default: the number of CPUs)\n"
    "  --filter TEXT  only SKUs whose name (before the target) contains TEXT\n"
    "  --dir D        the cache directory (default: the library's)\n"
    "  --dry-run      print the SKUs, compile nothing\n";

typedef struct item {
  bq_desc d;    /* normalized */
  int sm;       /* --all: the arch; 0 for --skus */
  bq__target t; /* --skus: the target the SKU names */
  char sku[256];
} item;

typedef struct kid_result { int compiled, cached, failed, kernels; } kid_result;

static int parse_archs(const char *s, int *archs, int *n, char *err, size_t errn) {
  *n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || (*end && *end != ',') || v < INT_MIN || v > INT_MAX) {
      snprintf(err, errn, "--arch: \"%s\" is not a list of numbers such as 90,89", s);
      return -1;
    }
    if (bq__check_sm((int)v)) {
      snprintf(err, errn, "--arch: %.400s", bq_last_error());
      return -1;
    }
    if (*n == MAX_ARCHS) {
      snprintf(err, errn, "--arch: more than %d archs", MAX_ARCHS);
      return -1;
    }
    archs[(*n)++] = (int)v;
    s = *end ? end + 1 : end;
  }
  if (!*n) snprintf(err, errn, "--arch: no arch given");
  return *n ? 0 : -1;
}

static void trim(char *s) {
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  size_t k = 0;
  while (isspace((unsigned char)s[k])) k++;
  memmove(s, s + k, n - k + 1);
}

/* The SKUs of FILE as items; every unreadable one reported. -1 on error. FILE is a regular
   file, or '-' for standard input; a line is at most 2046 characters with no NUL, and a
   list at most SKUS_MAX lines (every module of every SKU, for several archs, is far fewer) (so an endless input, /dev/zero or a pipe that never stops,
   ends with an error). */
#define SKUS_MAX (1 << 18)
static int read_skus(const char *file, item **items, int *n) {
  FILE *f = stdin;
  if (strcmp(file, "-")) {
    int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      close(fd);
      fprintf(stderr, "baracuda-quant %s: %s is not a regular file (give - to read standard input)\n", g_cmd, file);
      return -1;
    }
    f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
      fprintf(stderr, "baracuda-quant %s: cannot open %s: %s\n", g_cmd, file, strerror(errno));
      if (fd >= 0) close(fd);
      return -1;
    }
  }
  char line[2048];
  int lineno = 0, bad = 0, cap = 0;
  *n = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    const size_t len = strlen(line);
    /* (a line that does not end in a newline before the end of the input is too long or
       holds a NUL, which ends the string early) */
    if (lineno > SKUS_MAX || len == 0 || (line[len - 1] != '\n' && !feof(f))) {
      fprintf(stderr, "baracuda-quant %s: %s:%d: %s\n", g_cmd, file, lineno,
              lineno > SKUS_MAX ? "more than 2^18 lines" : "a line longer than 2046 characters or holding a NUL");
      bad++;
      break;
    }
    trim(line);
    if (!line[0] || line[0] == '#') continue;
    for (char *part = line; part;) {
      char *plus = strstr(part, " + ");
      if (plus) *plus = 0;
      char sku[2048];
      snprintf(sku, sizeof sku, "%s", part);
      trim(sku);
      part = plus ? plus + 3 : NULL;
      item it;
      memset(&it, 0, sizeof it);
      if (bq__desc_from_sku(sku, &it.d, &it.t)) {
        fprintf(stderr, "baracuda-quant %s: %s:%d: %s\n", g_cmd, file, lineno, bq_last_error());
        bad++;
        continue;
      }
      snprintf(it.sku, sizeof it.sku, "%.255s", sku);
      int dup = 0;
      for (int i = 0; i < *n && !dup; i++) dup = !strcmp((*items)[i].sku, it.sku);
      if (dup) continue;
      if (*n == cap) {
        cap = cap ? 2 * cap : 64;
        item *grown = (item *)realloc(*items, (size_t)cap * sizeof *grown);
        if (!grown) { fprintf(stderr, "baracuda-quant %s: out of memory\n", g_cmd); bad++; break; }
        *items = grown;
      }
      (*items)[(*n)++] = it;
    }
  }
  if (f != stdin) fclose(f);
  return bad ? -1 : 0;
}

/* The target to warm one item with, or -1 (reported) when select never loads it. */
static int item_target(const item *it, const int *archs, int narchs, bq__target *t) {
  if (it->sm) {
    if (bq__target_for(&it->d, it->sm, t) == BQ_SUCCESS) return 0;
    printf("FAILED    sm_%d %s: %s\n", it->sm, it->sku, bq_last_error());
    return -1;
  }
  /* --skus: the target named, if select picks it on one of the archs under some setting of
     BARACUDA_QUANT_FORCE_PTX and BARACUDA_QUANT_WGMMA */
  for (int a = 0; a < narchs; a++)
    for (int fp = 0; fp < 2; fp++)
      for (int wg = 1; wg >= 0; wg--) {
        bq__target c;
        if (bq__target_pick(&it->d, archs[a], fp, wg, &c)) {
          printf("FAILED    %s: %s\n", it->sku, bq_last_error());
          return -1;
        }
        if (c.arch == it->t.arch && c.ptx == it->t.ptx && c.arch_a == it->t.arch_a) {
          *t = c;
          t->module = it->t.module; /* (a module's SKU: that entry point's alone) */
          return 0;
        }
      }
  char want[32];
  bq__target c;
  bq__target_for(&it->d, archs[0], &c);
  target_name(&c, want, sizeof want);
  printf("FAILED    %s: bq_plan_select never loads this target on the archs given (on sm_%d it loads %s)\n",
         it->sku, archs[0], want);
  return -1;
}

static void warm_share(const item *items, int n, int kid, int nkids, const int *archs, int narchs,
                       kid_result *res) {
  for (int i = kid; i < n; i += nkids) {
    const item *it = &items[i];
    bq__target t;
    if (item_target(it, archs, narchs, &t)) { res->failed++; continue; }
    bq__kernel_src k;
    memset(&k, 0, sizeof k);
    bq__sku_of(&it->d, &t, &k);
    bq_cache_stats before, after;
    bq_cache_get_stats(&before);
    int compiled = 0;
    double t0 = now_s();
    const char *names[BQ__MAX_KERNELS];
    res->kernels += t.module ? 1 : bq__kernels_of(&it->d, &t, names); /* a module an entry point */
    bq_status st = bq__warm_one(&it->d, &t, &compiled);
    bq_cache_get_stats(&after);
    if (!st && after.write_failures != before.write_failures) {
      st = BQ_ERROR_CUDA; /* any failure status: reported with its message */
      bq__fail(st, "the entry could not be written into the cache directory");
    }
    if (st) {
      printf("FAILED    %s: %s\n", k.sku, bq_last_error());
      res->failed++;
    } else if (compiled) {
      printf("compiled  %s (%.2f s, %d kernels)\n", k.sku, now_s() - t0, compiled);
      res->compiled++;
    } else {
      printf("cached    %s\n", k.sku);
      res->cached++;
    }
  }
}

static int cmd_warm(int argc, char **argv) {
  static const struct option longs[] = {
      {"help", no_argument, 0, 'h'},          {"arch", required_argument, 0, 'a'},
      {"all", no_argument, 0, 'A'},           {"skus", required_argument, 0, 's'},
      {"jobs", required_argument, 0, 'j'},    {"family", required_argument, 0, 'f'},
      {"filter", required_argument, 0, 'F'},  {"dir", required_argument, 0, 'd'},
      {"dry-run", no_argument, 0, 'n'},       {0, 0, 0, 0}};
  int archs[MAX_ARCHS], narchs = 0, all = 0, dry = 0, c;
  long jobs = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned families = 0;
  const char *skus = NULL, *filter = NULL, *dir_opt = NULL;
  char err[512];
  while ((c = next_opt(argc, argv, "hj:n", longs)) != -1) {
    switch (c) {
    case 'h': fputs(USAGE_WARM, stdout); return 0;
    case 'a':
      if (parse_archs(optarg, archs, &narchs, err, sizeof err)) return usage_error(USAGE_WARM, "%s", err);
      break;
    case 'A': all = 1; break;
    case 's': skus = optarg; break;
    case 'j': {
      char *end;
      jobs = strtol(optarg, &end, 10);
      if (end == optarg || *end || jobs < 1 || jobs > 1024)
        return usage_error(USAGE_WARM, "-j: \"%s\" is not a number of processes (1 to 1024)", optarg);
      break;
    }
    case 'f': {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", optarg);
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        unsigned f = bq__family_bit(tok);
        if (!f) return usage_error(USAGE_WARM, "--family: \"%s\" is not %s", tok, BQ__FAMILY_LIST);
        families |= f;
      }
      break;
    }
    case 'F': filter = optarg; break;
    case 'd': dir_opt = optarg; break;
    case 'n': dry = 1; break;
    default: return usage_error(USAGE_WARM, "unknown option or missing argument: %s", argv[optind - 1]);
    }
  }
  if (optind < argc) return usage_error(USAGE_WARM, "unexpected argument %s", argv[optind]);
  if (!narchs) return usage_error(USAGE_WARM, "--arch is required");
  if (dir_opt && !*dir_opt) return usage_error(USAGE_WARM, "--dir: the path is empty");
  if (all == !!skus) return usage_error(USAGE_WARM, "give one of --all and --skus FILE");
  if (skus && families) return usage_error(USAGE_WARM, "--family applies to --all");
  if (!families) families = BQ__ALL_FAMILIES;

  item *items = NULL;
  int n = 0;
  if (skus) {
    if (read_skus(skus, &items, &n)) { free(items); return 1; }
  } else {
    int nd = bq__all_descs(families, NULL, 0);
    bq_desc *descs = (bq_desc *)calloc((size_t)(nd > 0 ? nd : 1), sizeof *descs);
    items = (item *)calloc((size_t)(nd > 0 ? nd : 1) * (size_t)narchs, sizeof *items);
    if (nd < 0 || !descs || !items) { fprintf(stderr, "baracuda-quant warm: out of memory\n"); return 1; }
    bq__all_descs(families, descs, nd);
    const bq__target any = {80, 0, 0, 0};
    for (int a = 0; a < narchs; a++)
      for (int i = 0; i < nd; i++) {
        bq__kernel_src k;
        memset(&k, 0, sizeof k);
        bq__sku_of(&descs[i], &any, &k);
        *strrchr(k.sku, '.') = 0; /* the name before the target */
        if (filter && !strstr(k.sku, filter)) continue;
        if (archs[a] < bq__family_of(&descs[i])->min_sm) continue; /* (FP8 linear layers: sm_89 and later) */
        items[n].d = descs[i];
        items[n].sm = archs[a];
        snprintf(items[n].sku, sizeof items[n].sku, "%s", k.sku);
        n++;
      }
    free(descs);
  }
  if (n == 0) {
    fprintf(stderr, "baracuda-quant warm: no SKU to warm%s%s\n", filter ? " matches --filter " : "", filter ? filter : "");
    free(items);
    return 1;
  }
  if (dry) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
      bq__target t;
      if (item_target(&items[i], archs, narchs, &t)) { bad++; continue; }
      bq__kernel_src k;
      memset(&k, 0, sizeof k);
      bq__sku_of(&items[i].d, &t, &k);
      printf("%s\n", k.sku);
    }
    free(items);
    return bad ? 1 : 0;
  }
  const char *dir = cache_dir("warm", dir_opt);
  if (!dir) {
    free(items);
    return 1;
  }
  if (bq__mkdirs(dir) != 0 || access(dir, W_OK) != 0) {
    fprintf(stderr, "baracuda-quant warm: cannot write into %s: %s\n", dir, strerror(errno));
    free(items);
    return 1;
  }
  int nkids = (int)(jobs < n ? jobs : n);
  kid_result *res = (kid_result *)mmap(NULL, (size_t)nkids * sizeof *res, PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (res == MAP_FAILED) { perror("baracuda-quant warm: mmap"); free(items); return 1; }
  memset(res, 0, (size_t)nkids * sizeof *res);
  double t0 = now_s();
  fflush(NULL);
  pid_t *pids = (pid_t *)calloc((size_t)nkids, sizeof *pids);
  int failed_kids = 0;
  for (int k = 0; k < nkids; k++) {
    pids[k] = fork();
    if (pids[k] == 0) { /* NVRTC is loaded in the children only */
      setvbuf(stdout, NULL, _IOLBF, 0);
      warm_share(items, n, k, nkids, archs, narchs, &res[k]);
      fflush(NULL);
      _exit(0); /* (the parent's memory is the parent's to free: no exit handlers, no leak check) */
    }
    if (pids[k] < 0) { perror("baracuda-quant warm: fork"); failed_kids++; }
  }
  for (int k = 0; k < nkids; k++) {
    int status = 0;
    if (pids[k] > 0 && (waitpid(pids[k], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
      fprintf(stderr, "baracuda-quant warm: worker %d (pid %ld) did not finish\n", k, (long)pids[k]);
      failed_kids++;
    }
  }
  kid_result sum = {0, 0, 0, 0};
  for (int k = 0; k < nkids; k++)
    sum.compiled += res[k].compiled, sum.cached += res[k].cached, sum.failed += res[k].failed, sum.kernels += res[k].kernels;
  int done = sum.compiled + sum.cached + sum.failed;
  printf("warm: %d SKUs (%d kernels) into %s: %d compiled, %d already cached, %d failed (%.1f s, %d processes)\n", n,
         sum.kernels, dir, sum.compiled, sum.cached, sum.failed + (n - done), now_s() - t0, nkids);
  munmap(res, (size_t)nkids * sizeof *res);
  free(pids);
  free(items);
  return sum.failed || failed_kids || done != n ? 1 : 0;
}

/* ---- scanning a cache directory ---------------------------------------------------------- */
/* K_BLOCK: something that is not a regular file (a directory, a link, a FIFO) under an
   entry's, a memo's or a tune entry's name, where the library would write one */
enum { K_ENTRY, K_MEMO, K_TMP, K_STRAY, K_BLOCK, K_TUNE };
enum { S_VALID, S_INVALID, S_OTHER, S_UNCHECKED, S_STALE, S_LIVE, S_STRAY };
static const char *const STATUS_NAMES[] = {"valid", "invalid", "other", "unchecked", "stale", "temporary", "stray"};

typedef struct fent {
  char name[256];
  int kind, status;
  int mine; /* owned by this user */
  long long size;
  char sku[256], target[32], why[512];
} fent;

/* The first max bytes of a regular file, opened as the library opens its cache files: not
   through a link, without blocking (whatever was put at the path after the listing is
   refused before anything could wait on it), checked with fstat. */
static unsigned char *slurp(const char *path, size_t max, size_t *n) {
  *n = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return NULL;
  }
  size_t want = (uint64_t)st.st_size < max ? (size_t)st.st_size : max;
  unsigned char *buf = (unsigned char *)malloc(want + 1);
  while (buf && *n < want) {
    ssize_t r = read(fd, buf + *n, want - *n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    *n += (size_t)r;
  }
  close(fd);
  if (buf) buf[*n] = 0;
  return buf;
}

/* line i (0-based) of a key, into out; 0 when there is none */
static int key_line(const char *key, size_t n, int i, char *out, size_t outn) {
  const char *p = key, *end = key + n;
  for (; i > 0 && p < end; i--) {
    const char *nl = (const char *)memchr(p, '\n', (size_t)(end - p));
    if (!nl) return 0;
    p = nl + 1;
  }
  const char *nl = (const char *)memchr(p, '\n', (size_t)(end - p));
  if (!nl || (size_t)(nl - p) >= outn) return 0;
  memcpy(out, p, (size_t)(nl - p));
  out[nl - p] = 0;
  return 1;
}

/* An entry, checked as bq__disk_read checks it against the key this library, this NVRTC
   and these options give its SKU; an intact entry from another library, NVRTC or options
   is "other" (never read here, and left alone). */
static void check_entry(const char *dir, fent *e) {
  char path[BQ__PATH_MAX + 300];
  snprintf(path, sizeof path, "%s/%s", dir, e->name);
  size_t n = 0;
  unsigned char *buf = slurp(path, BQ__CACHE_HEADER + (1u << 24) + BQ__CACHE_MAX_PAYLOAD, &n);
  e->status = S_INVALID;
  snprintf(e->target, sizeof e->target, "-");
  if (!buf) { snprintf(e->why, sizeof e->why, "unreadable: %s", strerror(errno)); return; }
  uint64_t klen = n >= BQ__CACHE_HEADER ? bq__get_u32(buf + 12) : 0, plen = n >= BQ__CACHE_HEADER ? bq__get_u64(buf + 16) : 0;
  char lib[128] = "", skul[300] = "", targ[64] = "", ptx[16] = "";
  if (n < BQ__CACHE_HEADER) snprintf(e->why, sizeof e->why, "truncated header");
  else if (memcmp(buf, BQ__CACHE_MAGIC, 8) != 0) snprintf(e->why, sizeof e->why, "bad magic");
  else if (bq__get_u32(buf + 8) != BQ__CACHE_FORMAT) {
    e->status = S_OTHER;
    snprintf(e->why, sizeof e->why, "cache format %u (this library writes %u)", bq__get_u32(buf + 8), BQ__CACHE_FORMAT);
  } else if (plen == 0 || plen > BQ__CACHE_MAX_PAYLOAD) snprintf(e->why, sizeof e->why, "absurd payload length");
  else if ((uint64_t)n != BQ__CACHE_HEADER + klen + plen)
    snprintf(e->why, sizeof e->why, "file length differs from header");
  else if (bq__fnv1a(buf + BQ__CACHE_HEADER + klen, (size_t)plen, BQ__FNV_SEED) != bq__get_u64(buf + 24))
    snprintf(e->why, sizeof e->why, "payload checksum mismatch");
  else {
    const char *key = (const char *)buf + BQ__CACHE_HEADER;
    if (!key_line(key, klen, 1, lib, sizeof lib) || strncmp(lib, "library ", 8) ||
        !key_line(key, klen, 2, skul, sizeof skul) || strncmp(skul, "sku ", 4) ||
        !key_line(key, klen, 3, targ, sizeof targ) || sscanf(targ, "target %31s %15s", e->target, ptx) != 2) {
      snprintf(e->target, sizeof e->target, "-");
      snprintf(e->why, sizeof e->why, "key unreadable");
    } else {
      snprintf(e->sku, sizeof e->sku, "%.255s", skul + 4);
      bq_desc d;
      bq__target t;
      bq__kernel_src k;
      bq__str want;
      memset(&k, 0, sizeof k);
      memset(&want, 0, sizeof want);
      if (strcmp(lib + 8, BQ_VERSION_STRING)) {
        e->status = S_OTHER;
        snprintf(e->why, sizeof e->why, "built by baracuda_quant %s", lib + 8);
      } else if (bq__desc_from_sku(e->sku, &d, &t)) {
        snprintf(e->why, sizeof e->why, "%.500s", bq_last_error());
      } else if ((bq__sku_of(&d, &t, &k), bq__build_source(&d, &k)) || bq__full_key(&k, &want)) {
        /* d came normalized from bq__desc_from_sku (normalizing it again would refuse the
           weight sums' filled-in fields), so its source is built as select builds it */
        e->status = S_UNCHECKED;
        snprintf(e->why, sizeof e->why, "key not checked: %.480s", bq_last_error());
      } else if (want.n != klen || memcmp(want.p, key, klen) != 0) {
        char a[600], b[600];
        if (key_line(key, klen, 4, a, sizeof a) && key_line(want.p, want.n, 4, b, sizeof b) && strcmp(a, b)) {
          e->status = S_OTHER;
          snprintf(e->why, sizeof e->why, "built with another NVRTC (%.200s)", a);
        } else if (key_line(key, klen, 5, a, sizeof a) && key_line(want.p, want.n, 5, b, sizeof b) && strcmp(a, b)) {
          e->status = S_OTHER;
          snprintf(e->why, sizeof e->why, "built with other NVRTC options (%.200s)", a);
        } else {
          snprintf(e->why, sizeof e->why, "key differs from this library's (the kernel source changed)");
        }
      } else {
        char expect[BQ__PATH_MAX + 300];
        bq__entry_path(&k, &want, dir, expect, sizeof expect);
        size_t len = 0;
        void *payload = NULL;
        if (strcmp(strrchr(expect, '/') + 1, e->name)) {
          snprintf(e->why, sizeof e->why, "file name differs from its key's (%s)", strrchr(expect, '/') + 1);
        } else if (!(payload = bq__disk_read(path, want.p, want.n, &len))) {
          snprintf(e->why, sizeof e->why, "rejected by the library's reader");
        } else {
          e->status = S_VALID;
          e->why[0] = 0;
        }
        free(payload);
      }
      free(k.source.p);
      free(want.p);
    }
  }
  free(buf);
}

static void check_memo(const char *dir, fent *e) {
  char path[BQ__PATH_MAX + 300];
  snprintf(path, sizeof path, "%s/%s", dir, e->name);
  size_t n = 0;
  char *buf = (char *)slurp(path, 4096, &n);
  bq__nvrtc_id id;
  const char *bad = buf ? bq__memo_parse(buf, n, &id) : "unreadable";
  if (bad) { /* the library's own reader: magic, checksum, identity, archs */
    e->status = S_INVALID;
    snprintf(e->why, sizeof e->why, "NVRTC memo: %s", bad);
  } else {
    e->status = bq__nvrtc_id_fresh(id.identity) ? S_VALID : S_STALE;
    snprintf(e->why, sizeof e->why, "NVRTC memo: %.400s%s", id.identity,
             e->status == S_STALE ? " (that library changed: rewritten on next use)" : "");
  }
  free(buf);
}

/* a tune entry: the library's own parser, and its name the hash of its key */
static void check_tune(const char *dir, fent *e) {
  char path[BQ__PATH_MAX + 300], key[1024], want[BQ__PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, e->name);
  size_t n = 0;
  char *buf = (char *)slurp(path, 2047, &n);
  int choice = -1, of = 0;
  const char *bad = buf ? bq__tune_parse(buf, n, key, sizeof key, &choice, &of) : "unreadable";
  if (!bad) {
    bq__tune_path(dir, bq__fnv1a(key, strlen(key), BQ__FNV_SEED), want, sizeof want);
    if (strcmp(want, path) != 0) bad = "its name is not its key's";
  }
  e->status = bad ? S_INVALID : S_VALID;
  if (bad) snprintf(e->why, sizeof e->why, "tune entry: %s", bad);
  else snprintf(e->why, sizeof e->why, "tuned: %.400s: candidate %d of %d", key, choice, of);
  free(buf);
}

static void check_tmp(fent *e, time_t mtime) {
  const char *p = strstr(e->name, ".tmp.");
  long pid = p ? strtol(p + 5, NULL, 10) : 0;
  int alive = pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
  long age = (long)(time(NULL) - mtime);
  e->status = alive && age <= TMP_STALE_S ? S_LIVE : S_STALE;
  snprintf(e->why, sizeof e->why, "temporary file of pid %ld (%s), %ld s old", pid, alive ? "running" : "gone", age);
}

/* the reader's "recompiling" warning means nothing here: the status line says it all */
static void no_warning(const char *msg, void *user) { (void)msg, (void)user; }

static int by_name(const void *a, const void *b) { return strcmp(((const fent *)a)->name, ((const fent *)b)->name); }

/* Every file of dir, classified and (check != 0) checked. *missing when dir does not exist. */
static int scan(const char *dir, int check, fent **out, int *n, int *missing) {
  *out = NULL;
  *n = 0;
  *missing = 0;
  bq_set_warning_handler(no_warning, NULL);
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) { *missing = 1; return 0; }
    fprintf(stderr, "baracuda-quant %s: cannot read %s: %s\n", g_cmd, dir, strerror(errno));
    return -1;
  }
  int cap = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 128;
      fent *grown = (fent *)realloc(*out, (size_t)cap * sizeof *grown);
      if (!grown) { closedir(d); return -1; }
      *out = grown;
    }
    fent *e = &(*out)[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", de->d_name);
    char path[BQ__PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    struct stat st;
    int there = lstat(path, &st) == 0, reg = there && S_ISREG(st.st_mode);
    size_t len = strlen(e->name);
    const int entry_name = len > 4 && !strcmp(e->name + len - 4, ".bqk"),
              memo_name = !strncmp(e->name, "nvrtc-", 6) && len > 9 && !strcmp(e->name + len - 3, ".id"),
              tune_name = !strncmp(e->name, "tune-", 5) && len > 9 && !strcmp(e->name + len - 4, ".txt");
    e->size = reg ? (long long)st.st_size : 0;
    e->mine = reg && st.st_uid == geteuid();
    if (reg && bq__is_temp_name(e->name)) e->kind = K_TMP;
    else if (reg && entry_name) e->kind = K_ENTRY;
    else if (reg && memo_name) e->kind = K_MEMO;
    else if (reg && tune_name) e->kind = K_TUNE;
    else if (there && (entry_name || memo_name || tune_name) && !bq__is_temp_name(e->name)) {
      e->kind = K_BLOCK, e->status = S_INVALID;
      snprintf(e->why, sizeof e->why, "%s stands where the library writes %s",
               S_ISDIR(st.st_mode) ? "a directory" : S_ISLNK(st.st_mode) ? "a symbolic link" :
               S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a special file",
               entry_name ? "an entry (every process recompiles it)" : memo_name ? "its NVRTC memo" : "a tune entry");
    } else e->kind = K_STRAY, e->status = S_STRAY;
    if (e->kind == K_TMP) check_tmp(e, st.st_mtime);
    if (!check) continue;
    if (e->kind == K_ENTRY) check_entry(dir, e);
    if (e->kind == K_MEMO) check_memo(dir, e);
    if (e->kind == K_TUNE) check_tune(dir, e);
  }
  closedir(d);
  if (*n) qsort(*out, (size_t)*n, sizeof **out, by_name);
  return 0;
}

/* a problem verify reports (and --fix removes) */
static int is_problem(const fent *e) {
  return (e->kind == K_ENTRY && (e->status == S_INVALID || e->status == S_UNCHECKED)) ||
         ((e->kind == K_MEMO || e->kind == K_TUNE) && e->status == S_INVALID) || (e->kind == K_TMP && e->status == S_STALE && e->mine) ||
         e->kind == K_BLOCK;
}

static void print_fent(const fent *e) {
  if (e->kind == K_ENTRY && e->sku[0])
    printf("%-9s %-12s %10lld  %s%s%s%s%s\n", STATUS_NAMES[e->status], e->target, e->size, e->sku,
           e->status == S_VALID ? "" : " (", e->status == S_VALID ? "" : e->name, e->status == S_VALID ? "" : "): ",
           e->why);
  else if (e->kind == K_STRAY)
    printf("%-9s %-12s %10lld  %s (not written by the library: left alone)\n", "stray", "-", e->size, e->name);
  else
    printf("%-9s %-12s %10lld  %s: %s\n",
           e->kind == K_MEMO && e->status == S_VALID   ? "memo"
           : e->kind == K_TUNE && e->status == S_VALID ? "tuned"
                                                       : STATUS_NAMES[e->status],
           e->kind == K_ENTRY ? e->target : "-", e->size, e->name, e->why);
}

static void summary(const char *dir, const fent *f, int n) {
  int count[7] = {0}, entries = 0, memos = 0, tmps = 0, tunes = 0;
  for (int i = 0; i < n; i++) {
    count[f[i].status] += f[i].kind == K_ENTRY || f[i].kind == K_BLOCK; /* (a blocked entry is invalid) */
    entries += f[i].kind == K_ENTRY || f[i].kind == K_BLOCK;
    memos += f[i].kind == K_MEMO;
    tunes += f[i].kind == K_TUNE;
    tmps += f[i].kind == K_TMP;
  }
  int strays = 0;
  for (int i = 0; i < n; i++) strays += f[i].kind == K_STRAY;
  printf("%s: %d entries (%d valid, %d invalid, %d other, %d unchecked), %d NVRTC memos, %d tuned choices, "
         "%d temporary, %d stray\n", dir, entries, count[S_VALID], count[S_INVALID], count[S_OTHER], count[S_UNCHECKED],
         memos, tunes, tmps, strays);
}

/* ---- list --------------------------------------------------------------------------------- */
static const char *USAGE_LIST =
    "usage: baracuda-quant list [--dir D] [--skus]\n"
    "  every file of the cache directory: status (valid; invalid with the reason; other: built\n"
    "  by another library version, NVRTC or NVRTC options, never read here), target, size and\n"
    "  SKU; the NVRTC memo; the tuned choices (key and choice); temporary and stray files\n"
    "  --skus   the valid entries' SKUs alone, one a line (input for warm --skus)\n"
    "  --dir D  the cache directory (default: the library's)\n";

static int cmd_list(int argc, char **argv) {
  static const struct option longs[] = {
      {"help", no_argument, 0, 'h'}, {"dir", required_argument, 0, 'd'}, {"skus", no_argument, 0, 's'}, {0, 0, 0, 0}};
  const char *dir_opt = NULL;
  int skus_only = 0, c;
  while ((c = next_opt(argc, argv, "h", longs)) != -1) {
    if (c == 'h') { fputs(USAGE_LIST, stdout); return 0; }
    if (c == 'd') dir_opt = optarg;
    else if (c == 's') skus_only = 1;
    else return usage_error(USAGE_LIST, "unknown option or missing argument: %s", argv[optind - 1]);
  }
  if (optind < argc) return usage_error(USAGE_LIST, "unexpected argument %s", argv[optind]);
  if (dir_opt && !*dir_opt) return usage_error(USAGE_LIST, "--dir: the path is empty");
  const char *dir = cache_dir("list", dir_opt);
  if (!dir) return 1;
  char dirbuf[BQ__PATH_MAX];
  snprintf(dirbuf, sizeof dirbuf, "%s", dir);
  fent *f;
  int n, missing;
  if (scan(dirbuf, 1, &f, &n, &missing)) return 1;
  if (missing && !skus_only) printf("%s does not exist: no entries\n", dirbuf);
  if (!skus_only && n) printf("%-9s %-12s %10s  %s\n", "STATUS", "TARGET", "BYTES", "SKU / FILE");
  for (int i = 0; i < n; i++) {
    if (!skus_only) print_fent(&f[i]);
    else if (f[i].kind == K_ENTRY && f[i].status == S_VALID) printf("%s\n", f[i].sku);
  }
  if (!skus_only && !missing) summary(dirbuf, f, n);
  free(f);
  return 0;
}

/* ---- verify ------------------------------------------------------------------------------- */
static const char *USAGE_VERIFY =
    "usage: baracuda-quant verify [--dir D] [--fix]\n"
    "  check every entry as the library reads it (magic, format, lengths, key, checksum, file\n"
    "  name) and report the invalid ones, unreadable NVRTC memos and stale temporary files;\n"
    "  exit 0 when there are none (after fixing), 1 otherwise\n"
    "  --fix    remove them (entries of other library versions, NVRTCs or options and stray\n"
    "           files are left alone)\n"
    "  --dir D  the cache directory (default: the library's)\n";

static int cmd_verify(int argc, char **argv) {
  static const struct option longs[] = {
      {"help", no_argument, 0, 'h'}, {"dir", required_argument, 0, 'd'}, {"fix", no_argument, 0, 'f'}, {0, 0, 0, 0}};
  const char *dir_opt = NULL;
  int fix = 0, c;
  while ((c = next_opt(argc, argv, "h", longs)) != -1) {
    if (c == 'h') { fputs(USAGE_VERIFY, stdout); return 0; }
    if (c == 'd') dir_opt = optarg;
    else if (c == 'f') fix = 1;
    else return usage_error(USAGE_VERIFY, "unknown option or missing argument: %s", argv[optind - 1]);
  }
  if (optind < argc) return usage_error(USAGE_VERIFY, "unexpected argument %s", argv[optind]);
  if (dir_opt && !*dir_opt) return usage_error(USAGE_VERIFY, "--dir: the path is empty");
  const char *dir = cache_dir("verify", dir_opt);
  if (!dir) return 1;
  char dirbuf[BQ__PATH_MAX];
  snprintf(dirbuf, sizeof dirbuf, "%s", dir);
  fent *f;
  int n, missing, left = 0, removed = 0;
  if (scan(dirbuf, 1, &f, &n, &missing)) return 1;
  if (missing) { printf("%s does not exist: no entries\n", dirbuf); return 0; }
  for (int i = 0; i < n; i++) {
    if (!is_problem(&f[i])) continue;
    char path[BQ__PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dirbuf, f[i].name);
    struct stat st;
    const int dir = f[i].kind == K_BLOCK && lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    /* a directory goes only when empty: its files are not the library's to remove */
    int gone = fix && f[i].status != S_UNCHECKED && (dir ? rmdir(path) : unlink(path)) == 0;
    printf("%s %s: %s%s\n", f[i].status == S_STALE ? "stale" : f[i].status == S_UNCHECKED ? "unchecked" : "invalid",
           f[i].name, f[i].why,
           gone ? " (removed)" : fix && dir ? " (it holds files: not removed, remove it by hand)" : "");
    removed += gone;
    left += !gone;
  }
  summary(dirbuf, f, n);
  printf("verify: %s%s (%d removed)\n", left ? "problems remain: " : "no invalid entries", left ? "see above" : "",
         removed);
  free(f);
  return left ? 1 : 0;
}

/* ---- clear -------------------------------------------------------------------------------- */
static const char *USAGE_CLEAR =
    "usage: baracuda-quant clear [--dir D] [--yes]\n"
    "  remove the cache entries (*.bqk), the NVRTC memo (nvrtc-*.id), the tuned choices\n"
    "  (tune-*.txt) and temporary files (*.tmp.*): only files the library writes; anything\n"
    "  else stays (and is named)\n"
    "  --yes    do not ask (needed when standard input is not a terminal)\n"
    "  --dir D  the cache directory (default: the library's)\n";

static int cmd_clear(int argc, char **argv) {
  static const struct option longs[] = {
      {"help", no_argument, 0, 'h'}, {"dir", required_argument, 0, 'd'}, {"yes", no_argument, 0, 'y'}, {0, 0, 0, 0}};
  const char *dir_opt = NULL;
  int yes = 0, c;
  while ((c = next_opt(argc, argv, "hy", longs)) != -1) {
    if (c == 'h') { fputs(USAGE_CLEAR, stdout); return 0; }
    if (c == 'd') dir_opt = optarg;
    else if (c == 'y') yes = 1;
    else return usage_error(USAGE_CLEAR, "unknown option or missing argument: %s", argv[optind - 1]);
  }
  if (optind < argc) return usage_error(USAGE_CLEAR, "unexpected argument %s", argv[optind]);
  if (dir_opt && !*dir_opt) return usage_error(USAGE_CLEAR, "--dir: the path is empty");
  const char *dir = cache_dir("clear", dir_opt);
  if (!dir) return 1;
  char dirbuf[BQ__PATH_MAX];
  snprintf(dirbuf, sizeof dirbuf, "%s", dir);
  fent *f;
  int n, missing, ours = 0, others = 0;
  if (scan(dirbuf, 0, &f, &n, &missing)) return 1;
  if (missing) { printf("%s does not exist: nothing to clear\n", dirbuf); return 0; }
  for (int i = 0; i < n; i++) /* (another user's temporary file is left to its writer; what
                                  blocks an entry's path was not written by the library) */
    if ((f[i].kind == K_TMP && !f[i].mine) || f[i].kind == K_BLOCK) f[i].kind = K_STRAY;
  for (int i = 0; i < n; i++) ours += f[i].kind != K_STRAY, others += f[i].kind == K_STRAY;
  if (!yes && ours) {
    if (!isatty(0)) {
      free(f);
      return usage_error(USAGE_CLEAR, "would remove %d files from %s: pass --yes", ours, dirbuf);
    }
    printf("remove %d files from %s? [y/N] ", ours, dirbuf);
    fflush(stdout);
    char answer[16] = "";
    if (!fgets(answer, sizeof answer, stdin) || (answer[0] != 'y' && answer[0] != 'Y')) {
      printf("nothing removed\n");
      free(f);
      return 1;
    }
  }
  int removed = 0, failed = 0;
  long long bytes = 0;
  for (int i = 0; i < n; i++) {
    if (f[i].kind == K_STRAY) continue;
    char path[BQ__PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dirbuf, f[i].name);
    if (unlink(path) == 0) removed++, bytes += f[i].size;
    else if (errno != ENOENT) fprintf(stderr, "baracuda-quant clear: cannot remove %s: %s\n", path, strerror(errno)), failed++;
  }
  printf("clear: removed %d files (%lld bytes) from %s\n", removed, bytes, dirbuf);
  if (others) {
    printf("clear: left %d files the library does not write alone:", others);
    for (int i = 0; i < n; i++)
      if (f[i].kind == K_STRAY) printf(" %s", f[i].name);
    printf("\n");
  }
  free(f);
  return failed ? 1 : 0;
}

/* ---- tune ----------------------------------------------------------------------------------- */
static const char *USAGE_TUNE =
    "usage: baracuda-quant tune --skus FILE --shape ROWSxCOLS[/G][,...] [--dir D]\n"
    "  on this machine's GPU (the current device, else device 0): for each SKU and shape, one\n"
    "  run on buffers of that shape (zero data, scales of 1/64), whose first use times the\n"
    "  kernels the rules leave undecided and keeps the winner beside the kernels, as a plan's\n"
    "  first run would; for container images, with the kernels from `warm`. Each line says\n"
    "  whether the run tuned a choice or the rules decided every one. Forward quantize and\n"
    "  dequantize per tensor, per token and per group with row-major scales run; other SKUs\n"
    "  are named and left (nothing of theirs is tuned).\n"
    "  --skus FILE  one SKU a line, as for warm --skus (each for the target select picks here)\n"
    "  --shape S    ROWSxCOLS, with /G for per group (G elements a group); several, comma-separated\n"
    "  --dir D      the cache directory (default: the library's)\n";

typedef struct tshape { int64_t rows, cols, g; } tshape;

static int parse_shapes(const char *s, tshape *out, int *n, int cap) {
  *n = 0;
  while (*s) {
    long long r = 0, c = 0, g = 0;
    int used = 0;
    if (*n == cap) return -1;
    if (sscanf(s, "%lldx%lld%n", &r, &c, &used) != 2 || r <= 0 || c <= 0) return -1;
    s += used;
    if (*s == '/') {
      int u2 = 0;
      if (sscanf(s + 1, "%lld%n", &g, &u2) != 1 || g <= 0) return -1;
      s += 1 + u2;
    }
    if (*s && *s != ',') return -1;
    if (*s) s++;
    out[(*n)++] = (tshape){r, c, g};
  }
  return *n ? 0 : -1;
}

/* 1/64 in scale type t, its bytes into b; the size, or 0 for a type the command does not fill */
static int scale_pattern(bq_dtype t, unsigned char b[8]) {
  const float f = 1.0f / 64;
  const double dd = 1.0 / 64;
  uint16_t h = 0;
  switch (t) {
  case BQ_F32: memcpy(b, &f, 4); return 4;
  case BQ_F64: memcpy(b, &dd, 8); return 8;
  case BQ_F16: h = 0x2400; memcpy(b, &h, 2); return 2;
  case BQ_BF16: h = 0x3c80; memcpy(b, &h, 2); return 2;
  case BQ_UE8M0: b[0] = 121; return 1;
  default: return 0;
  }
}

static int cmd_tune(int argc, char **argv) {
  static const struct option longs[] = {{"help", no_argument, 0, 'h'},
                                        {"skus", required_argument, 0, 's'},
                                        {"shape", required_argument, 0, 'S'},
                                        {"dir", required_argument, 0, 'd'},
                                        {0, 0, 0, 0}};
  const char *skus = NULL, *dir_opt = NULL;
  tshape shapes[64];
  int nshapes = 0, c;
  while ((c = next_opt(argc, argv, "h", longs)) != -1) {
    switch (c) {
    case 'h': fputs(USAGE_TUNE, stdout); return 0;
    case 's': skus = optarg; break;
    case 'd': dir_opt = optarg; break;
    case 'S':
      if (parse_shapes(optarg, shapes, &nshapes, 64))
        return usage_error(USAGE_TUNE, "--shape: \"%s\" is not ROWSxCOLS[/G][,...] (at most 64)", optarg);
      break;
    default: return usage_error(USAGE_TUNE, "unknown option or missing argument: %s", argv[optind - 1]);
    }
  }
  if (optind < argc) return usage_error(USAGE_TUNE, "unexpected argument %s", argv[optind]);
  if (!skus) return usage_error(USAGE_TUNE, "--skus is required");
  if (!nshapes) return usage_error(USAGE_TUNE, "--shape is required");
  if (dir_opt && !*dir_opt) return usage_error(USAGE_TUNE, "--dir: the path is empty");
  if (dir_opt) setenv("BARACUDA_QUANT_CACHE_DIR", dir_opt, 1);
  if (!bq__tune_enabled()) {
    fprintf(stderr, "baracuda-quant tune: BARACUDA_QUANT_TUNE is off: nothing would be tuned\n");
    return 1;
  }
  item *items = NULL;
  int n = 0, failed = 0, tuned = 0;
  if (read_skus(skus, &items, &n)) { free(items); return 1; }
  for (int i = 0; i < n; i++) {
    const bq_desc *d = &items[i].d;
    const int ok_kind = (d->op == BQ_QUANTIZE || d->op == BQ_DEQUANTIZE) && d->direction == BQ_FORWARD &&
                        (d->granularity == BQ_PER_TENSOR || d->granularity == BQ_PER_TOKEN ||
                         d->granularity == BQ_PER_GROUP) &&
                        d->scale_layout != BQ_SCALES_MN_MAJOR;
    unsigned char pat[8];
    const int ssize = scale_pattern(d->scale_type, pat);
    if (!ok_kind || (d->granularity != BQ_PER_TENSOR && !ssize)) {
      printf("%s: not tuned by this command\n", items[i].sku);
      continue;
    }
    bq_plan *plan = NULL;
    if (bq_plan_select(d, &plan)) {
      fprintf(stderr, "baracuda-quant tune: %s: %s\n", items[i].sku, bq_last_error());
      failed++;
      continue;
    }
    if (strcmp(bq_plan_sku(plan), items[i].sku) != 0) {
      printf("%s: this GPU's plan is %s: skipped\n", items[i].sku, bq_plan_sku(plan));
      bq_plan_destroy(plan);
      continue;
    }
    const int in_size = bq__dtype_size(d->op == BQ_QUANTIZE ? d->float_type : d->int_type),
              out_size = bq__dtype_size(d->op == BQ_QUANTIZE ? d->int_type : d->float_type);
    for (int k = 0; k < nshapes; k++) {
      const tshape *sh = &shapes[k];
      bq_args a;
      memset(&a, 0, sizeof a);
      const int64_t numel = sh->rows * sh->cols;
      int64_t nscales = 0;
      if (d->granularity == BQ_PER_TENSOR) a.numel = numel, a.scale = 1.0 / 64;
      else {
        a.rows = sh->rows, a.cols = sh->cols;
        if (d->granularity == BQ_PER_GROUP) {
          if (!sh->g) {
            printf("%s [%lld, %lld]: per group needs /G in the shape: skipped\n", items[i].sku, (long long)sh->rows,
                   (long long)sh->cols);
            continue;
          }
          a.group_size = sh->g;
          nscales = sh->rows * ((sh->cols + sh->g - 1) / sh->g);
        } else nscales = sh->rows;
      }
      void *x = NULL, *y = NULL, *sc = NULL;
      unsigned char *host = NULL;
      bq_status st = bq_malloc(&x, (size_t)numel * in_size);
      if (!st) st = bq_malloc(&y, (size_t)numel * out_size);
      if (!st) st = bq_memset(x, 0, (size_t)numel * in_size);
      if (!st && nscales) {
        host = (unsigned char *)malloc((size_t)nscales * ssize);
        st = host ? bq_malloc(&sc, (size_t)nscales * ssize) : BQ_ERROR_OUT_OF_MEMORY;
        for (int64_t e = 0; !st && e < nscales; e++) memcpy(host + e * ssize, pat, (size_t)ssize);
        if (!st) st = bq_memcpy_to_device(sc, host, (size_t)nscales * ssize);
      }
      a.x = x, a.y = y, a.scales = sc;
      const uint64_t before = bq__tune_count;
      if (!st) st = bq_plan_run(plan, &a, NULL, 0, NULL);
      if (!st) st = bq_synchronize(NULL);
      if (st) {
        fprintf(stderr, "baracuda-quant tune: %s [%lld, %lld]: %s\n", items[i].sku, (long long)sh->rows,
                (long long)sh->cols, bq_last_error());
        failed++;
      } else {
        const uint64_t got = bq__tune_count - before;
        tuned += (int)got;
        printf("%s [%lld, %lld]%s: %s\n", items[i].sku, (long long)sh->rows, (long long)sh->cols,
               d->granularity == BQ_PER_GROUP ? " per group" : "",
               got ? "tuned" : "the rules decide (or a choice was tuned before)");
      }
      bq_free(x), bq_free(y), bq_free(sc);
      free(host);
    }
    bq_plan_destroy(plan);
  }
  const char *dir = bq_cache_directory();
  printf("tune: %d choices tuned%s%s\n", tuned, dir ? " into " : " (the disk cache is off: memory only)", dir ? dir : "");
  free(items);
  return failed ? 1 : 0;
}

/* ---- main --------------------------------------------------------------------------------- */
static const char *USAGE =
    "usage: baracuda-quant COMMAND [OPTIONS]   (COMMAND --help for its options)\n"
    "  info     library, driver, NVRTC, devices, cache directory, counters, environment\n"
    "  warm     compile kernels into the cache with NVRTC alone (no GPU)\n"
    "  list     the cache's entries, their status, target, size and SKU\n"
    "  verify   check every entry; --fix removes invalid ones\n"
    "  clear    remove the entries, the NVRTC memo and the tuned choices, nothing else\n"
    "  tune     on a GPU: time the kernels the rules leave undecided for SKUs and shapes\n"
    "exit status: 0 success, 1 failure, 2 usage error\n";

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"info", cmd_info}, {"warm", cmd_warm}, {"list", cmd_list}, {"verify", cmd_verify}, {"clear", cmd_clear}, {"tune", cmd_tune}};
  if (argc < 2) { fputs(USAGE, stderr); return EXIT_USAGE; }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(USAGE, stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) { printf("baracuda-quant %s\n", bq_version_string()); return 0; }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) {
      g_cmd = cmds[i].name;
      return cmds[i].fn(argc - 1, argv + 1);
    }
  fprintf(stderr, "baracuda-quant: unknown command \"%s\"\n%s", argv[1], USAGE);
  return EXIT_USAGE;
}
