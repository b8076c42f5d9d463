/* ---- devices and targets ---------------------------------------------------------- */
typedef struct bq__device_info {
  int known, sm, num_sms, ordinal;
  int threads_sm;   /* the threads an SM holds (0: not reported) */
  int mem_khz;      /* the memory's peak clock (0: not reported) */
  int64_t l2_bytes; /* (0: not reported) */
  char name[96];
} bq__device_info;
#define BQ__MAX_DEVICES 64
static bq__device_info bq__devices[BQ__MAX_DEVICES];
static pthread_mutex_t bq__dev_lock = PTHREAD_MUTEX_INITIALIZER;

/* The current context and its device's compute capability, queried once per device. */
BQ__FN bq_status bq__current_device(int fallback_device, bq__CUcontext *ctx, bq__device_info *out) {
  bq_status st = bq__context(fallback_device, ctx);
  if (st) return st;
  const bq__driver_api *d = &bq__drv;
  bq__CUdevice dev;
  bq__CUresult r = d->cuCtxGetDevice(&dev);
  if (r) return bq__cu_fail(r, "cuCtxGetDevice");
  if (dev < 0 || dev >= BQ__MAX_DEVICES) return bq__fail(BQ_ERROR_NO_DEVICE, "device %d out of range", dev);
  pthread_mutex_lock(&bq__dev_lock);
  bq__device_info info = bq__devices[dev];
  pthread_mutex_unlock(&bq__dev_lock);
  if (!info.known) {
    int major = 0, minor = 0, sms = 0;
    if ((r = d->cuDeviceGetAttribute(&major, BQ__CU_ATTR_CC_MAJOR, dev)) ||
        (r = d->cuDeviceGetAttribute(&minor, BQ__CU_ATTR_CC_MINOR, dev)) ||
        (r = d->cuDeviceGetAttribute(&sms, BQ__CU_ATTR_MULTIPROCESSOR_COUNT, dev)))
      return bq__cu_fail(r, "cuDeviceGetAttribute");
    info.known = 1;
    info.sm = major * 10 + minor;
    info.num_sms = sms;
    /* what tells two GPUs of one arch apart for the tune (its entries are keyed by them);
       a driver that does not report one leaves it 0 */
    int clk = 0, l2 = 0, th = 0;
    if (d->cuDeviceGetAttribute(&th, BQ__CU_ATTR_MAX_THREADS_PER_SM, dev)) th = 0;
    if (d->cuDeviceGetAttribute(&clk, BQ__CU_ATTR_MEMORY_CLOCK_RATE, dev)) clk = 0;
    if (d->cuDeviceGetAttribute(&l2, BQ__CU_ATTR_L2_CACHE_SIZE, dev)) l2 = 0;
    info.threads_sm = th > 0 ? th : 0;
    info.mem_khz = clk > 0 ? clk : 0;
    info.l2_bytes = l2 > 0 ? l2 : 0;
    if (d->cuDeviceGetName(info.name, (int)sizeof info.name, dev)) bq__copy(info.name, sizeof info.name, "?");
    info.name[sizeof info.name - 1] = 0;
    for (char *c = info.name; *c; c++) /* (one word in the tune's key and file) */
      if (*c <= ' ' || *c > '~') *c = '_';
    pthread_mutex_lock(&bq__dev_lock);
    bq__devices[dev] = info;
    pthread_mutex_unlock(&bq__dev_lock);
  }
  info.ordinal = dev;
  *out = info;
  return BQ_SUCCESS;
}

/* A plan's context and its device: for BQ_DEVICE_CURRENT bq__context's (the current one,
   else device 0's primary context, made current); for BQ_DEVICE(n) device n's primary
   context, pushed (*pushed = 1) while the plan is built if another context or none is
   current, so selecting changes nothing the caller sees. */
BQ__FN bq_status bq__plan_context(int device, bq__CUcontext *ctx, int *pushed, bq__device_info *out) {
  *pushed = 0;
  if (device == BQ_DEVICE_CURRENT) return bq__current_device(0, ctx, out);
  bq_status st = bq__primary(device - 1, ctx);
  if (st) return st;
  bq__CUcontext cur = NULL;
  bq__CUresult r = bq__drv.cuCtxGetCurrent(&cur);
  if (r) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (cur != *ctx) {
    if ((r = bq__drv.cuCtxPushCurrent(*ctx))) return bq__cu_fail(r, "cuCtxPushCurrent");
    *pushed = 1;
  }
  return bq__current_device(0, &cur, out);
}

/* What NVRTC is asked for: a cubin for the device's own arch, or PTX for the newest
   virtual arch NVRTC supports when the device is newer (or BARACUDA_QUANT_FORCE_PTX). */
#define BQ__HAVE_MODULES 1 /* (for tools built against several headers) */
typedef struct bq__target {
  int arch;  /* 90 */
  int ptx;   /* 1: PTX for compute_<arch>, finished by the driver */
  int arch_a; /* 1: the arch-specific variant (sm_90a) */
  int module; /* 0: the plan's every entry point in one source (tools, the CPU emulator);
                 e + 1: the module of entry point e alone, which is what is compiled,
                 cached and loaded */
} bq__target;

BQ__FN void bq__target_name(const bq__target *t, char *buf, size_t n) {
  snprintf(buf, n, "%s_%d%s", t->ptx ? "compute" : "sm", t->arch, t->arch_a ? "a" : "");
}

/* ---- cache files: opened without blocking, following a link or trusting a stranger ------ */
/* Strict C11 without POSIX feature macros leaves some names undeclared: there glibc's own
   flag stands in for O_NOFOLLOW (else links are followed: the reader still checks the
   file's type, key and checksum), and getpwuid stands in for getpwuid_r. */
#if !defined(O_NOFOLLOW) && defined(__O_NOFOLLOW)
#define O_NOFOLLOW __O_NOFOLLOW
#endif
#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif
#if !defined(__STRICT_ANSI__) || defined(_POSIX_C_SOURCE) || defined(_XOPEN_SOURCE) || \
    defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE) || defined(_BSD_SOURCE)
#define BQ__HAVE_GETPWUID_R 1
#endif
/* the longest directory whose entry paths (SKU file name, hash, temporary suffix) still fit */
#define BQ__DIR_MAX (BQ__PATH_MAX - 400)

/* Each cause of a cache warning is told once per directory ("" where the directory does
   not matter); past 128 causes the cache stops warning rather than grow. */
static pthread_mutex_t bq__warned_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t bq__warned[128];
static int bq__num_warned;

BQ__FN int bq__first_warning(const char *cause, const char *dir) {
  uint64_t h = bq__fnv1a(dir, strlen(dir), bq__fnv1a(cause, strlen(cause) + 1, BQ__FNV_SEED));
  int first = 1;
  pthread_mutex_lock(&bq__warned_lock);
  for (int i = 0; i < bq__num_warned && first; i++) first = bq__warned[i] != h;
  if (first && bq__num_warned < 128) bq__warned[bq__num_warned++] = h;
  else first = 0;
  pthread_mutex_unlock(&bq__warned_lock);
  return first;
}

/* The directory part of path, into buf. */
BQ__FN void bq__dir_of(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  size_t k = slash ? (size_t)(slash - path) : 0;
  if (k >= n) k = n - 1;
  memcpy(buf, slash ? path : ".", slash ? k : 1);
  buf[slash ? k : 1] = 0;
  if (slash && k == 0) bq__copy(buf, n, "/");
}

/* A directory others can write to: group or world writable (sticky or not: anyone may
   create a file at an entry's name before its owner does), or owned by someone other
   than this user and root. Its files are read only when this user or root owns them. */
BQ__FN int bq__dir_shared(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) return 1;
  return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_uid != geteuid() && st.st_uid != 0);
}

/* Opens a cache file for reading: a regular file, not through a symbolic link, without
   blocking (a FIFO, device or socket there is refused before anything could wait on it),
   and, in a directory others can write to, owned by this user or root. Returns the
   descriptor with *st filled, or -1 with *why saying what is wrong (NULL when there is
   simply no such file). Costs the open and one fstat (and a geteuid) for a file of ours. */
BQ__FN int bq__open_cache_file(const char *path, struct stat *st, const char **why) {
  *why = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) *why = "it is a symbolic link";
    else if (errno == ENXIO) *why = "it is a socket";
    else if (errno == EACCES) *why = "it is not readable";
    return -1;
  }
  if (fstat(fd, st) != 0) *why = "fstat failed";
  else if (S_ISDIR(st->st_mode)) *why = "it is a directory";
  else if (S_ISFIFO(st->st_mode)) *why = "it is a FIFO";
  else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) *why = "it is a device";
  else if (!S_ISREG(st->st_mode)) *why = "it is not a regular file";
  else if (st->st_uid != geteuid() && st->st_uid != 0) {
    char dir[BQ__PATH_MAX];
    bq__dir_of(path, dir, sizeof dir);
    if (bq__dir_shared(dir)) *why = "it belongs to another user and its directory is writable by others";
  }
  if (*why) { close(fd); return -1; }
  return fd;
}

/* Reads a whole small file; returns its length or -1. */
BQ__FN long bq__read_small(int fd, char *buf, size_t cap) {
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return (long)got;
    got += (size_t)r;
    if (got == cap) return -1; /* larger than any sane such file */
  }
}

/* A small cache file's whole text, NUL-terminated, into text (cap bytes, the NUL included):
   its length; -1 where there is no such file (*why NULL) or it cannot be read as one of
   ours (*why says why: bq__open_cache_file's checks, or too long) */
BQ__FN long bq__read_cache_text(const char *path, char *text, size_t cap, const char **why) {
  struct stat st;
  int fd = bq__open_cache_file(path, &st, why);
  if (fd < 0) return -1;
  long n = bq__read_small(fd, text, cap - 1);
  close(fd);
  if (n < 0) {
    *why = "unreadable or too long";
    return -1;
  }
  text[n] = 0;
  return n;
}

/* ---- NVRTC identity, memoized on disk so that a disk-cache hit never loads NVRTC ------ */
/* Loading libnvrtc costs milliseconds (its static initializers), far more than a cache
   hit may. The memo file records, for one way of finding NVRTC (BARACUDA_QUANT_NVRTC,
   LD_LIBRARY_PATH and the identity of /etc/ld.so.cache), the identity and supported
   archs of the library found, and is trusted only while that file's size and mtime hold:
     baracuda_quant nvrtc memo 1
     identity nvrtc 13.0 file /usr/local/cuda/lib64/libnvrtc.so.13 size N mtime M
     archs 75 80 86 ...            (ascending, each in 20..300, 1 to 64 of them)
     checksum <FNV-1a 64 of every byte above, 16 hex digits>
   A memo that does not read back exactly so is a miss (one warning) and is rewritten.
   Where NVRTC is loaded anyway (a compile, or a select that failed) the memo is checked
   against the library itself, and a select whose target came from a memo that differs
   chooses again. */
typedef struct bq__nvrtc_id {
  char identity[512];
  int archs[64];
  int num_archs;
  int from_memo; /* read from the memo and not yet checked against NVRTC itself */
} bq__nvrtc_id;

static pthread_mutex_t bq__id_lock = PTHREAD_MUTEX_INITIALIZER;
static bq__nvrtc_id bq__id;
static int bq__id_known;
static uint64_t bq__id_lookup_key;
static unsigned bq__id_gen; /* counts memos found wrong after use */
#define BQ__MEMO_MAGIC "baracuda_quant nvrtc memo 1\n"

BQ__FN uint64_t bq__nvrtc_lookup_key(void) {
  struct stat st;
  char buf[128];
  uint64_t h = BQ__FNV_SEED;
  const char *e = getenv("BARACUDA_QUANT_NVRTC");
  h = bq__fnv1a("N", 1, h);
  if (e) h = bq__fnv1a(e, strlen(e), h);
  e = getenv("LD_LIBRARY_PATH");
  h = bq__fnv1a("L", 1, h);
  if (e) h = bq__fnv1a(e, strlen(e), h);
  memset(&st, 0, sizeof st);
  stat("/etc/ld.so.cache", &st);
  snprintf(buf, sizeof buf, "C%lld.%lld.%lld", (long long)st.st_size, (long long)st.st_mtime,
           (long long)st.st_ino);
  return bq__fnv1a(buf, strlen(buf), h);
}

/* identity strings end with "file PATH size N mtime M": check that file still matches */
BQ__FN int bq__nvrtc_id_fresh(const char *identity) {
  const char *f = strstr(identity, " file ");
  const char *s = strstr(identity, " size ");
  if (!f || !s || s < f) return 0;
  char path[BQ__PATH_MAX];
  size_t n = (size_t)(s - (f + 6));
  if (n >= sizeof path) return 0;
  memcpy(path, f + 6, n);
  path[n] = 0;
  long long size = -1, mtime = -1;
  if (sscanf(s, " size %lld mtime %lld", &size, &mtime) != 2) return 0;
  struct stat st;
  return stat(path, &st) == 0 && (long long)st.st_size == size && (long long)st.st_mtime == mtime;
}

BQ__FN const char *bq__cache_dir_now(char *buf, size_t n); /* below */
BQ__FN int bq__write_atomic(const char *dir, const char *final_path, const void *a, size_t na,
                            const void *b, size_t nb, const void *c, size_t nc, int quiet);

BQ__FN void bq__memo_path(const char *dir, uint64_t key, char *path, size_t n) {
  snprintf(path, n, "%s/nvrtc-%016llx.id", dir, (unsigned long long)key);
}

/* Parses a memo's text (NUL-terminated, n bytes) into id; NULL if sane, else what is wrong. */
BQ__FN const char *bq__memo_parse(const char *text, size_t n, bq__nvrtc_id *id) {
  memset(id, 0, sizeof *id);
  size_t m = strlen(BQ__MEMO_MAGIC);
  if (n != strlen(text)) return "it holds a NUL byte";
  if (n < m || memcmp(text, BQ__MEMO_MAGIC, m) != 0) return "bad magic";
  const char *c = strstr(text, "checksum ");
  if (!c || c[-1] != '\n') return "no checksum";
  char want[32];
  snprintf(want, sizeof want, "checksum %016llx\n",
           (unsigned long long)bq__fnv1a(text, (size_t)(c - text), BQ__FNV_SEED));
  if (strcmp(c, want) != 0) return "checksum mismatch";
  const char *p = text + m;
  if (strncmp(p, "identity nvrtc ", 15) != 0) return "no identity line";
  const char *eol = strchr(p, '\n');
  size_t k = (size_t)(eol - (p + 9));
  if (k >= sizeof id->identity) return "identity too long";
  for (const char *q = p + 9; q < eol; q++)
    if (*q < 0x20 || *q > 0x7e) return "identity not printable";
  memcpy(id->identity, p + 9, k);
  if (!strstr(id->identity, " file ") || !strstr(id->identity, " size ") || !strstr(id->identity, " mtime "))
    return "identity incomplete";
  p = eol + 1;
  if (strncmp(p, "archs", 5) != 0) return "no archs line";
  p += 5;
  while (*p == ' ') {
    p++;
    int v = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 4) v = v * 10 + (*p++ - '0'), digits++;
    if (!digits || (*p != ' ' && *p != '\n')) return "archs not numbers";
    if (v < 20 || v > 300) return "arch out of range";
    if (id->num_archs == 64) return "too many archs";
    if (id->num_archs && v <= id->archs[id->num_archs - 1]) return "archs not ascending";
    id->archs[id->num_archs++] = v;
  }
  if (*p != '\n' || p + 1 != c) return "archs line malformed";
  if (!id->num_archs) return "no archs";
  id->from_memo = 1;
  return NULL;
}

/* 1 with id filled when the memo at path is sane and its library unchanged; else 0, with
   one warning when the file is there but not a memo that makes sense. */
BQ__FN int bq__memo_read(const char *path, const char *dir, bq__nvrtc_id *id) {
  const char *why = NULL;
  char text[2048];
  const long n = bq__read_cache_text(path, text, sizeof text, &why);
  /* the layout before this one (no magic, no checksum) is replaced without a word */
  if (n >= 0 && !strncmp(text, "identity ", 9)) return 0;
  if (n >= 0) why = bq__memo_parse(text, (size_t)n, id);
  if (why) {
    if (bq__first_warning("memo", dir))
      bq__warn("ignoring NVRTC memo %s (%s): asking NVRTC itself and rewriting it", path, why);
    return 0;
  }
  return n >= 0 && bq__nvrtc_id_fresh(id->identity);
}

BQ__FN void bq__memo_write(const char *dir, const char *path, const bq__nvrtc_id *id) {
  bq__str s;
  memset(&s, 0, sizeof s);
  bq__str_fmt(&s, "%sidentity %s\narchs", BQ__MEMO_MAGIC, id->identity);
  for (int i = 0; i < id->num_archs; i++) bq__str_fmt(&s, " %d", id->archs[i]);
  bq__str_cat(&s, "\n");
  if (!s.oom) bq__str_fmt(&s, "checksum %016llx\n", (unsigned long long)bq__fnv1a(s.p, s.n, BQ__FNV_SEED));
  /* quiet: a memo that cannot be written costs asking NVRTC again at the next start, and
     nothing else; "kernels are cached in memory only" would be false where they came from
     disk (a read-only cache warmed with another NVRTC lookup path) */
  if (!s.oom) bq__write_atomic(dir, path, s.p, s.n, NULL, 0, NULL, 0, 1);
  BQ_FREE(s.p);
}

BQ__FN void bq__id_from_nvrtc(const bq__nvrtc_api *nv, bq__nvrtc_id *id) {
  memset(id, 0, sizeof *id);
  memcpy(id->identity, nv->identity, sizeof id->identity);
  memcpy(id->archs, nv->archs, sizeof id->archs);
  id->num_archs = nv->num_archs;
}

BQ__FN bq_status bq__nvrtc_identity(bq__nvrtc_id *out) {
  uint64_t key = bq__nvrtc_lookup_key();
  pthread_mutex_lock(&bq__id_lock);
  if (bq__id_known && bq__id_lookup_key == key) {
    *out = bq__id;
    pthread_mutex_unlock(&bq__id_lock);
    return BQ_SUCCESS;
  }
  pthread_mutex_unlock(&bq__id_lock);
  bq__nvrtc_id id;
  memset(&id, 0, sizeof id);
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 64];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d) bq__memo_path(d, key, path, sizeof path);
  if (!d || !bq__memo_read(path, d, &id)) {
    const bq__nvrtc_api *nv = bq__nvrtc_get();
    if (!nv) return bq__nv_status;
    bq__id_from_nvrtc(nv, &id);
    if (d) bq__memo_write(d, path, &id);
  }
  pthread_mutex_lock(&bq__id_lock);
  bq__id = id;
  bq__id_known = 1;
  bq__id_lookup_key = key;
  pthread_mutex_unlock(&bq__id_lock);
  *out = id;
  return BQ_SUCCESS;
}

/* Checks an identity read from the memo against NVRTC itself (loading it). Where they
   differ the memo is rewritten, NVRTC's own answer replaces it in memory and bq__id_gen
   counts the change; returns 1 then. Leaves this thread's error message as it was. */
BQ__FN int bq__nvrtc_recheck(void) {
  pthread_mutex_lock(&bq__id_lock);
  int memo = bq__id_known && bq__id.from_memo;
  bq__nvrtc_id old = bq__id;
  uint64_t key = bq__id_lookup_key;
  pthread_mutex_unlock(&bq__id_lock);
  if (!memo) return 0;
  char saved[sizeof bq__err_buf];
  memcpy(saved, bq__err_buf, sizeof saved);
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  memcpy(bq__err_buf, saved, sizeof saved);
  if (!nv) return 0;
  bq__nvrtc_id id;
  bq__id_from_nvrtc(nv, &id);
  int same = !strcmp(id.identity, old.identity) && id.num_archs == old.num_archs &&
             !memcmp(id.archs, old.archs, sizeof id.archs[0] * (size_t)id.num_archs);
  pthread_mutex_lock(&bq__id_lock);
  if (bq__id_lookup_key == key && bq__id.from_memo) {
    if (same) bq__id.from_memo = 0;
    else bq__id = id, __atomic_add_fetch(&bq__id_gen, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&bq__id_lock);
  if (same) return 0;
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 64];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d) {
    bq__memo_path(d, key, path, sizeof path);
    if (bq__first_warning("memo differs", d))
      bq__warn("NVRTC memo %s disagrees with NVRTC itself (its identity or archs): rewritten", path);
    bq__memo_write(d, path, &id);
  }
  return 1;
}

BQ__FN unsigned bq__nvrtc_gen(void) { return __atomic_load_n(&bq__id_gen, __ATOMIC_ACQUIRE); }

/* ---- the disk cache ----------------------------------------------------------------- */
/* One file per kernel: <dir>/<sku>-<hash of the full key>.bqk
     offset 0  char[8]  magic "BQKCACHE"
            8  u32      format version (BQ__CACHE_FORMAT)
           12  u32      key length K
           16  u64      payload length P
           24  u64      FNV-1a 64 of the payload
           32  K bytes  the full key: format, library version, SKU, target, NVRTC identity,
                        options and the whole specialized source
         32+K  P bytes  the cubin (or NUL-terminated PTX)
   The file must be exactly 32 + K + P bytes, its key must equal the expected key byte for
   byte and the payload must match its checksum before anything reaches the driver.
   Integers are little-endian (the host's order; the cache is not shared across hosts).
   Writers write <entry>.tmp.<pid>.<n>.<hex>.<hex> and rename it over the entry. */
#define BQ__CACHE_FORMAT 1u
#define BQ__CACHE_MAGIC "BQKCACHE"
#define BQ__CACHE_HEADER 32
#define BQ__CACHE_MAX_PAYLOAD (256u << 20)
#define BQ__TEMP_MAX_AGE 600 /* seconds: older temporary files are a killed writer's */

static struct {
  uint64_t memory_hits, disk_hits, misses, compiles, corrupt, write_failures;
} bq__stats;
#define BQ__COUNT(field) __atomic_add_fetch(&bq__stats.field, 1, __ATOMIC_RELAXED)

BQ__DEF void bq_cache_get_stats(bq_cache_stats *s) {
  if (!s) return;
  s->memory_hits = __atomic_load_n(&bq__stats.memory_hits, __ATOMIC_RELAXED);
  s->disk_hits = __atomic_load_n(&bq__stats.disk_hits, __ATOMIC_RELAXED);
  s->misses = __atomic_load_n(&bq__stats.misses, __ATOMIC_RELAXED);
  s->compiles = __atomic_load_n(&bq__stats.compiles, __ATOMIC_RELAXED);
  s->corrupt = __atomic_load_n(&bq__stats.corrupt, __ATOMIC_RELAXED);
  s->write_failures = __atomic_load_n(&bq__stats.write_failures, __ATOMIC_RELAXED);
}

/* BARACUDA_QUANT_STATS=1: the counters on stderr once, at exit (registered by the first
   bq_plan_select or bq_cache_warm, so a forked child prints its own line). */
static pthread_once_t bq__stats_once = PTHREAD_ONCE_INIT;
BQ__FN void bq__stats_print(void) {
  bq_cache_stats s;
  bq_cache_get_stats(&s);
  fprintf(stderr, "baracuda_quant: cache: %llu memory hits, %llu disk hits, %llu misses, %llu compiles, "
          "%llu corrupt, %llu write failures (pid %ld)\n", (unsigned long long)s.memory_hits,
          (unsigned long long)s.disk_hits, (unsigned long long)s.misses, (unsigned long long)s.compiles,
          (unsigned long long)s.corrupt, (unsigned long long)s.write_failures, (long)getpid());
}
BQ__FN void bq__stats_register(void) {
  if (bq__env_flag("BARACUDA_QUANT_STATS")) atexit(bq__stats_print);
}

/* This user's home directory from the user database, for processes without HOME
   (services, containers); looked up once per effective user. NULL if there is none. */
BQ__FN const char *bq__passwd_home(void) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static char home[BQ__PATH_MAX];
  static uid_t uid;
  static int known;
  uid_t me = geteuid();
  pthread_mutex_lock(&lock);
  if (!known || uid != me) {
    home[0] = 0;
#ifdef BQ__HAVE_GETPWUID_R
    struct passwd pw, *res = NULL;
    size_t cap = 16384;
    char *buf = (char *)BQ_MALLOC(cap);
    if (buf && getpwuid_r(me, &pw, buf, cap, &res) == 0 && res && res->pw_dir)
      bq__copy(home, sizeof home, res->pw_dir);
    BQ_FREE(buf);
#else
    struct passwd *res = getpwuid(me);
    if (res && res->pw_dir) bq__copy(home, sizeof home, res->pw_dir);
#endif
    uid = me;
    known = 1;
  }
  pthread_mutex_unlock(&lock);
  return home[0] == '/' ? home : NULL;
}

/* BARACUDA_QUANT_CACHE_DIR moves the cache, BARACUDA_QUANT_DISABLE_CACHE=1 turns it off.
   Read on every miss, so a program (or a test) may change them at any time. Without HOME
   the user database's home directory stands in; a directory that cannot be named (no
   home at all, or a path too long for its entries) means memory only, with one warning. */
BQ__FN const char *bq__cache_dir_now(char *buf, size_t n) {
  if (bq__env_flag("BARACUDA_QUANT_DISABLE_CACHE")) return NULL;
  const char *d = getenv("BARACUDA_QUANT_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  const char *base, *leaf;
  if (d && *d) base = d, leaf = "";
  else if (xdg && *xdg == '/') base = xdg, leaf = "/baracuda_quant";
  else if (home && *home) base = home, leaf = "/.cache/baracuda_quant";
  else if ((base = bq__passwd_home()) != NULL) {
    leaf = "/.cache/baracuda_quant";
    if (bq__first_warning("no HOME", base))
      bq__warn("HOME is not set: the kernel cache is in %s%s (the user database's home directory)",
               base, leaf);
  } else {
    if (bq__first_warning("no home", ""))
      bq__warn("HOME is not set and the user database has no home directory for uid %ld: "
               "kernels are cached in memory only (set BARACUDA_QUANT_CACHE_DIR)", (long)geteuid());
    return NULL;
  }
  size_t len = strlen(base) + strlen(leaf);
  if (len + 1 > n || len > BQ__DIR_MAX) {
    char what[64];
    snprintf(what, sizeof what, "%.40s", base);
    if (bq__first_warning("too long", base))
      bq__warn("the kernel cache directory path (%s...) is too long (%zu bytes, at most %d): "
               "kernels are cached in memory only", what, len, BQ__DIR_MAX);
    return NULL;
  }
  memcpy(buf, base, strlen(base) + 1);
  strcat(buf, leaf);
  return buf;
}

static __thread char bq__dir_tls[BQ__PATH_MAX];
BQ__DEF const char *bq_cache_directory(void) {
  return bq__cache_dir_now(bq__dir_tls, sizeof bq__dir_tls);
}

/* Creates dir and its missing parents, each 0700 (the cache holds code the process will
   run: others need not read it, let alone write it). 0, or -1 with errno set. */
BQ__FN int bq__mkdirs(const char *dir) {
  char tmp[BQ__PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof tmp) return errno = ENAMETOOLONG, -1;
  memcpy(tmp, dir, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
  struct stat st;
  if (stat(tmp, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) return errno = ENOTDIR, -1;
  return 0;
}

/* Whether name is one of this library's temporary files: <entry>.tmp.<digits>.<digits>.
   <hex>.<hex> with the entry a .bqk or .id file. */
BQ__FN int bq__is_temp_name(const char *name) {
  const char *t = strstr(name, ".tmp.");
  if (!t) return 0;
  while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
  size_t k = (size_t)(t - name);
  if (!((k > 4 && !memcmp(t - 4, ".bqk", 4)) || (k > 3 && !memcmp(t - 3, ".id", 3)))) return 0;
  const char *p = t + 5;
  for (int field = 0; field < 4; field++) {
    const char *start = p;
    while (field < 2 ? (*p >= '0' && *p <= '9') : (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) p++;
    if (p == start || *p != (field < 3 ? '.' : 0)) return 0;
    if (field < 3) p++;
  }
  return 1;
}

/* Removes temporary files that killed writers left: this library's names only, this
   user's regular files only, untouched for BQ__TEMP_MAX_AGE. Run after writing an entry. */
BQ__FN void bq__sweep_temps(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd) return;
  time_t now = time(NULL);
  uid_t me = geteuid();
  char path[BQ__PATH_MAX + 300];
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    if (!bq__is_temp_name(e->d_name)) continue;
    int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof path) continue;
    struct stat st;
    const char *why;
    int fd = bq__open_cache_file(path, &st, &why); /* never follows a link */
    if (fd < 0) continue;
    close(fd);
    if (st.st_uid == me && st.st_mtime + BQ__TEMP_MAX_AGE < now) unlink(path);
  }
  closedir(dd);
}

/* Write a+b+c to final_path through a unique temporary file in the same directory:
   created exclusively (never through a link), written, closed, then renamed, so readers
   see a whole file or none, and whatever stood at final_path (a FIFO, a link) is replaced,
   never written through; an empty directory there (debris: nothing the library writes) is
   removed first. 0 on success; a failure warns once per cause and directory (unless quiet),
   except where the reader already named the cause (a directory with files at final_path). */
BQ__FN int bq__write_atomic(const char *dir, const char *final_path, const void *a, size_t na,
                            const void *b, size_t nb, const void *c, size_t nc, int quiet) {
  static unsigned counter;
  char tmp[BQ__PATH_MAX + 400];
  const char *step = NULL;
  int fd = -1, err;
  if (bq__mkdirs(dir) != 0) step = "mkdir";
  if (!step) {
    unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    int stack_marker;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u.%lx.%lx", final_path, (long)getpid(), k,
             (unsigned long)(uintptr_t)&stack_marker, (unsigned long)time(NULL));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) step = "create";
  }
  const void *parts[3] = {a, b, c};
  size_t sizes[3] = {na, nb, nc};
  for (int i = 0; !step && i < 3; i++) {
    const char *p = (const char *)parts[i];
    size_t left = sizes[i];
    while (!step && left) {
      ssize_t w = write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w == 0) errno = ENOSPC;
      if (w <= 0) step = "write";
      else p += w, left -= (size_t)w;
    }
  }
  if (fd >= 0 && close(fd) != 0 && !step) step = "write";
  if (!step && rename(tmp, final_path) != 0) {
    int e = errno;
    step = "rename";
    if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) {
      if (rmdir(final_path) != 0) errno = e; /* a directory with files: the reader named it */
      else if (rename(tmp, final_path) == 0) step = NULL;
    }
  }
  if (!step) return 0;
  err = errno;
  if (fd >= 0) unlink(tmp);
  const char *cause = strerror(err);
  char key[96];
  snprintf(key, sizeof key, "%s %d", step, err);
  if (!strcmp(step, "rename") && (err == EISDIR || err == ENOTEMPTY || err == EEXIST ||
                                   err == EPERM || err == EBUSY))
    return -1; /* a directory or another user's file stands there: the reader said so */
  if (quiet || !bq__first_warning(key, dir)) return -1;
  if (!strcmp(step, "mkdir"))
    bq__warn("kernel cache directory %s cannot be created (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "create") && (err == EACCES || err == EPERM || err == EROFS))
    bq__warn("kernel cache directory %s is not writable (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "create"))
    bq__warn("cannot create a file in kernel cache directory %s (%s): kernels are cached in memory only",
             dir, cause);
  else if (!strcmp(step, "write"))
    bq__warn("cannot write kernel cache file %s (%s): it is kept in memory only", final_path, cause);
  else
    bq__warn("cannot replace kernel cache file %s (%s): it is kept in memory only", final_path, cause);
  return -1;
}

BQ__FN void bq__put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
BQ__FN void bq__put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
BQ__FN uint32_t bq__get_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
BQ__FN uint64_t bq__get_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

BQ__FN void bq__cache_header(unsigned char h[BQ__CACHE_HEADER], size_t key_len, const void *payload,
                             size_t n) {
  memcpy(h, BQ__CACHE_MAGIC, 8);
  bq__put_u32(h + 8, BQ__CACHE_FORMAT);
  bq__put_u32(h + 12, (uint32_t)key_len);
  bq__put_u64(h + 16, (uint64_t)n);
  bq__put_u64(h + 24, bq__fnv1a(payload, n, BQ__FNV_SEED));
}

/* An entry's contents are wrong: counted, and told once per process. */
BQ__FN void bq__corrupt(const char *path, const char *why) {
  BQ__COUNT(corrupt);
  if (bq__first_warning("corrupt", ""))
    bq__warn("ignoring corrupt kernel cache entry %s (%s): recompiling", path, why);
}

/* Read and validate an entry. Returns the payload (caller frees) or NULL for a miss. */
BQ__FN void *bq__disk_read(const char *path, const char *key, size_t key_len, size_t *out_len) {
  struct stat st;
  const char *why = NULL;
  int fd = bq__open_cache_file(path, &st, &why);
  if (fd < 0) {
    if (why) { /* something that is not one of our entries stands there */
      char dir[BQ__PATH_MAX];
      bq__dir_of(path, dir, sizeof dir);
      BQ__COUNT(corrupt);
      if (bq__first_warning(why, dir))
        bq__warn("ignoring kernel cache entry %s (%s): recompiling", path, why);
    }
    return NULL;
  }
  unsigned char h[BQ__CACHE_HEADER];
  void *payload = NULL;
  char *kbuf = NULL;
  if (st.st_size < BQ__CACHE_HEADER || read(fd, h, sizeof h) != (ssize_t)sizeof h) why = "truncated header";
  else if (memcmp(h, BQ__CACHE_MAGIC, 8) != 0) why = "bad magic";
  else if (bq__get_u32(h + 8) != BQ__CACHE_FORMAT) why = "other format version";
  else if (bq__get_u32(h + 12) != key_len) why = "key length differs";
  else if (bq__get_u64(h + 16) == 0 || bq__get_u64(h + 16) > BQ__CACHE_MAX_PAYLOAD) why = "absurd payload length";
  else if ((uint64_t)st.st_size != BQ__CACHE_HEADER + key_len + bq__get_u64(h + 16)) why = "file length differs from header";
  if (!why) {
    size_t n = (size_t)bq__get_u64(h + 16);
    kbuf = (char *)BQ_MALLOC(key_len ? key_len : 1);
    payload = BQ_MALLOC(n + 1);
    if (!kbuf || !payload) why = "out of memory";
    else if (read(fd, kbuf, key_len) != (ssize_t)key_len) why = "truncated key";
    else if (memcmp(kbuf, key, key_len) != 0) why = "key differs";
    else if (read(fd, payload, n) != (ssize_t)n) why = "truncated payload";
    else if (bq__fnv1a(payload, n, BQ__FNV_SEED) != bq__get_u64(h + 24)) why = "payload checksum mismatch";
    else {
      ((char *)payload)[n] = 0;
      *out_len = n;
    }
  }
  close(fd);
  BQ_FREE(kbuf);
  if (why) {
    BQ_FREE(payload);
    bq__corrupt(path, why);
    return NULL;
  }
  return payload;
}

/* ---- compiling --------------------------------------------------------------------- */
#define BQ__MAX_KERNELS 14
typedef struct bq__kernel_src {
  char sku[256];      /* canonical identity */
  char file[256];     /* file-name-safe SKU */
  bq__target target;
  bq__str source;     /* the full specialized source */
  const char *kernels[BQ__MAX_KERNELS]; /* entry points by the family's enum; NULL: not in this module */
} bq__kernel_src;

/* NVRTC options, for the NVRTC whose identity string ("nvrtc 13.0 file ...") is given.
   NVRTC 12.4 and newer take -minimal: it leaves out the runtime API's declarations, which
   the kernels never use, and the machine code stays byte for byte the same (a third of the
   front end's time). BARACUDA_QUANT_NVRTC_OPTIONS adds one more, for experiments (it is
   part of the cache key; results under it carry no numerics guarantee). */
#define BQ__MAX_OPTIONS 6
BQ__FN void bq__options(const bq__target *t, const char *identity, char arch_opt[64],
                        const char *opts[BQ__MAX_OPTIONS], int *n) {
  char tn[32];
  bq__target_name(t, tn, sizeof tn);
  snprintf(arch_opt, 64, "--gpu-architecture=%s", tn);
  opts[0] = arch_opt;
  opts[1] = "--fmad=false";
  opts[2] = "--std=c++17";
  *n = 3;
  int major = 0, minor = 0;
  if (identity && sscanf(identity, "nvrtc %d.%d", &major, &minor) == 2 && major * 100 + minor >= 1204)
    opts[(*n)++] = "-minimal";
  const char *extra = getenv("BARACUDA_QUANT_NVRTC_OPTIONS");
  if (extra && *extra) opts[(*n)++] = extra;
}

BQ__FN bq_status bq__compile(const bq__kernel_src *k, void **out, size_t *out_len) {
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  if (!nv) return bq__nv_status;
  char arch_opt[64];
  const char *opts[BQ__MAX_OPTIONS];
  int nopt;
  bq__options(&k->target, nv->identity, arch_opt, opts, &nopt);
  bq__nvrtcProgram prog = NULL;
  bq__nvrtcResult r = nv->nvrtcCreateProgram(&prog, k->source.p, k->file, 0, NULL, NULL);
  if (r) return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: nvrtcCreateProgram failed (%d)", k->sku, r);
  BQ__COUNT(compiles);
  r = nv->nvrtcCompileProgram(prog, nopt, opts);
  if (r) {
    size_t n = 0;
    nv->nvrtcGetProgramLogSize(prog, &n);
    char *log = (char *)BQ_MALLOC(n + 1);
    if (log) { log[0] = 0; nv->nvrtcGetProgramLog(prog, log); log[n] = 0; }
    bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: NVRTC compile failed (%d): %.700s", k->sku, r,
             log ? log : "(no log)");
    BQ_FREE(log);
    nv->nvrtcDestroyProgram(&prog);
    return BQ_ERROR_COMPILE_FAILED;
  }
  size_t n = 0;
  if (k->target.ptx) r = nv->nvrtcGetPTXSize(prog, &n);
  else r = nv->nvrtcGetCUBINSize(prog, &n);
  char *buf = r ? NULL : (char *)BQ_MALLOC(n + 1);
  if (buf) r = k->target.ptx ? nv->nvrtcGetPTX(prog, buf) : nv->nvrtcGetCUBIN(prog, buf);
  nv->nvrtcDestroyProgram(&prog);
  if (!buf || r) {
    BQ_FREE(buf);
    return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: could not fetch NVRTC output (%d)", k->sku, r);
  }
  buf[n] = 0;
  *out = buf;
  *out_len = k->target.ptx ? strlen(buf) + 1 : n; /* PTX keeps its NUL */
  return BQ_SUCCESS;
}

/* The full key: everything that changes the compiled bytes. */
BQ__FN bq_status bq__full_key(const bq__kernel_src *k, bq__str *key) {
  bq__nvrtc_id id;
  bq_status st = bq__nvrtc_identity(&id);
  if (st) return st;
  char arch_opt[64], tn[32];
  const char *opts[BQ__MAX_OPTIONS];
  int nopt;
  bq__options(&k->target, id.identity, arch_opt, opts, &nopt);
  bq__target_name(&k->target, tn, sizeof tn);
  bq__str_fmt(key, "baracuda_quant kernel cache format %u\nlibrary %s\nsku %s\ntarget %s %s\n%s\noptions",
              BQ__CACHE_FORMAT, BQ_VERSION_STRING, k->sku, tn, k->target.ptx ? "ptx" : "cubin",
              id.identity);
  for (int i = 0; i < nopt; i++) bq__str_fmt(key, " %s", opts[i]);
  bq__str_fmt(key, "\nsource %zu bytes\n", k->source.n);
  bq__str_put(key, k->source.p, k->source.n);
  return key->oom ? bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory building a cache key") : BQ_SUCCESS;
}

BQ__FN void bq__entry_path(const bq__kernel_src *k, const bq__str *key, const char *dir, char *path,
                           size_t n) {
  snprintf(path, n, "%s/%s-%016llx.bqk", dir, k->file,
           (unsigned long long)bq__fnv1a(key->p, key->n, BQ__FNV_SEED));
}

/* Disk hit (flag BQ__READ), or compile, stored when flag BQ__WRITE is set. *from_disk
   says which. The payload is malloc'd. A compile first checks a memo-derived NVRTC
   identity against NVRTC itself (loaded for the compile anyway), so the key is right. */
#define BQ__READ 1
#define BQ__WRITE 2
static __thread int bq__retarget; /* set while a select may choose its target again */
BQ__FN bq_status bq__obtain(const bq__kernel_src *k, int flags, void **out, size_t *len, int *from_disk) {
  bq__str key;
  memset(&key, 0, sizeof key);
  bq_status st = bq__full_key(k, &key);
  if (st) { BQ_FREE(key.p); return st; }
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 300];
  const char *d = flags ? bq__cache_dir_now(dir, sizeof dir) : NULL;
  *from_disk = 0;
  if (d) bq__entry_path(k, &key, d, path, sizeof path);
  if (d && (flags & BQ__READ)) {
    *out = bq__disk_read(path, key.p, key.n, len);
    if (*out) {
      *from_disk = 1;
      BQ_FREE(key.p);
      return BQ_SUCCESS;
    }
  }
  if (bq__nvrtc_recheck()) { /* the identity changed: so did the key, and maybe the target */
    if (bq__retarget) {
      BQ_FREE(key.p);
      return bq__fail(BQ_ERROR_COMPILE_FAILED, "%s: the NVRTC memo was wrong", k->sku);
    }
    key.n = 0;
    if ((st = bq__full_key(k, &key))) { BQ_FREE(key.p); return st; }
    if (d) bq__entry_path(k, &key, d, path, sizeof path);
  }
  st = bq__compile(k, out, len);
  if (!st && d && (flags & BQ__WRITE)) {
    unsigned char h[BQ__CACHE_HEADER];
    bq__cache_header(h, key.n, *out, *len);
    if (bq__write_atomic(d, path, h, sizeof h, key.p, key.n, *out, *len, 0) != 0) BQ__COUNT(write_failures);
    else bq__sweep_temps(d);
  }
  BQ_FREE(key.p);
  return st;
}

BQ__FN bq_status bq__obtain_binary(const bq__kernel_src *k, int use_disk, void **out, size_t *len,
                                   int *from_disk) {
  return bq__obtain(k, use_disk ? BQ__READ | BQ__WRITE : 0, out, len, from_disk);
}

/* Stores a compiled binary the driver accepted (a miss in bq__load_module). */
BQ__FN void bq__store_binary(const bq__kernel_src *k, const void *bin, size_t len) {
  bq__str key;
  memset(&key, 0, sizeof key);
  char dir[BQ__PATH_MAX], path[BQ__PATH_MAX + 300];
  const char *d = bq__cache_dir_now(dir, sizeof dir);
  if (d && !bq__full_key(k, &key)) {
    unsigned char h[BQ__CACHE_HEADER];
    bq__entry_path(k, &key, d, path, sizeof path);
    bq__cache_header(h, key.n, bin, len);
    if (bq__write_atomic(d, path, h, sizeof h, key.p, key.n, bin, len, 0) != 0) BQ__COUNT(write_failures);
    else bq__sweep_temps(d);
  }
  BQ_FREE(key.p);
}

/* ---- the in-memory cache: one loaded module per (SKU, context) ---------------------- */
/* A hit takes the lock for a lookup only. A miss inserts a "building" entry and builds
   it with the lock released, so hits on other keys never wait on a compile; another
   thread missing on the same key waits for that one build instead of compiling again. */
typedef struct bq__entry {
  struct bq__entry *next;
  uint64_t hash;
  char sku[256];
  bq__CUcontext ctx;
  int state; /* 0 building, 1 ready, 2 failed */
  int refs;  /* one for the map, one per plan or waiter */
  int in_map;
  bq_status status;
  char msg[512];
  bq__CUmodule module;
  bq__CUfunction fn[BQ__MAX_KERNELS];
} bq__entry;

static pthread_mutex_t bq__mem_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bq__mem_cond = PTHREAD_COND_INITIALIZER;
static bq__entry *bq__mem_head;

BQ__FN void bq__unlink_entry(bq__entry *e) { /* lock held */
  for (bq__entry **p = &bq__mem_head; *p; p = &(*p)->next)
    if (*p == e) { *p = e->next; break; }
  e->in_map = 0;
}

BQ__FN void bq__entry_free(bq__entry *e) { /* refs reached 0; lock not held */
  if (e->module) {
    bq__CUcontext cur = NULL;
    bq__drv.cuCtxGetCurrent(&cur);
    if (cur != e->ctx) bq__drv.cuCtxSetCurrent(e->ctx);
    bq__drv.cuModuleUnload(e->module);
    if (cur != e->ctx) bq__drv.cuCtxSetCurrent(cur);
  }
  BQ_FREE(e);
}

BQ__FN void bq__entry_release(bq__entry *e) {
  pthread_mutex_lock(&bq__mem_lock);
  int last = --e->refs == 0;
  pthread_mutex_unlock(&bq__mem_lock);
  if (last) bq__entry_free(e);
}

BQ__FN void bq__tune_forget(void); /* (the tune's choices in memory, below) */
BQ__DEF void bq_cache_clear_memory(void) {
  bq__entry *dead = NULL;
  pthread_mutex_lock(&bq__mem_lock);
  bq__entry **p = &bq__mem_head;
  while (*p) {
    bq__entry *e = *p;
    if (e->state == 0) { p = &e->next; continue; } /* being built: its builder owns it */
    *p = e->next;
    e->in_map = 0;
    if (--e->refs == 0) { e->next = dead; dead = e; }
  }
  pthread_mutex_unlock(&bq__mem_lock);
  while (dead) { bq__entry *n = dead->next; bq__entry_free(dead); dead = n; }
  bq__tune_forget();
}

/* Loads a disk entry, else a fresh compile, which is written to disk only once the driver
   has accepted it. An entry the driver refuses is recompiled and the accepted binary
   overwrites it; each message says which image was refused. */
BQ__FN bq_status bq__load_module(const bq__kernel_src *k, bq__entry *e) {
  bq__CUresult refused = 0;
  char where[BQ__PATH_MAX] = "";
  for (int attempt = 0; attempt < 2; attempt++) {
    void *bin = NULL;
    size_t len = 0;
    int from_disk = 0;
    bq_status st = bq__obtain(k, attempt == 0 ? BQ__READ : 0, &bin, &len, &from_disk);
    if (st) return st;
    bq__CUresult r = bq__drv.cuModuleLoadData(&e->module, bin);
    for (int i = 0; r == 0 && i < BQ__MAX_KERNELS; i++)
      if (k->kernels[i]) r = bq__drv.cuModuleGetFunction(&e->fn[i], e->module, k->kernels[i]);
    if (r == 0) {
      if (from_disk) BQ__COUNT(disk_hits);
      else BQ__COUNT(misses), bq__store_binary(k, bin, len);
      BQ_FREE(bin);
      if (refused) {
        if (bq__first_warning("refused", where))
          bq__warn("the driver refused the cached kernel %s in %s (CUresult %d); a fresh compile "
                   "loaded and replaced it", k->sku, where, refused);
      }
      return BQ_SUCCESS;
    }
    BQ_FREE(bin);
    if (e->module) { bq__drv.cuModuleUnload(e->module); e->module = NULL; }
    if (!from_disk) {
      char what[128];
      snprintf(what, sizeof what, "cuModuleLoadData of a freshly compiled %s image%s",
               k->target.ptx ? "PTX" : "cubin", refused ? " (the cached one was refused too)" : "");
      return bq__cu_fail(r, what);
    }
    refused = r;
    BQ__COUNT(corrupt);
    if (!bq__cache_dir_now(where, sizeof where)) bq__copy(where, sizeof where, "?");
  }
  return bq__fail(BQ_ERROR_CUDA, "%s: module load failed", k->sku);
}

/* A loaded function for the kernel whose SKU is k->sku, in context ctx. `build` fills in
   the source (only on a miss: a memory hit needs the SKU alone). */
typedef bq_status (*bq__build_fn)(const void *ctx_data, bq__kernel_src *k);

BQ__FN bq_status bq__get_entry(bq__kernel_src *k, bq__CUcontext ctx, bq__build_fn build,
                               const void *build_data, bq__entry **out) {
  uint64_t h = bq__fnv1a(k->sku, strlen(k->sku), BQ__FNV_SEED);
  pthread_mutex_lock(&bq__mem_lock);
  for (;;) {
    bq__entry *e = bq__mem_head;
    while (e && !(e->hash == h && e->ctx == ctx && !strcmp(e->sku, k->sku))) e = e->next;
    if (!e) break;
    e->refs++;
    while (e->state == 0) pthread_cond_wait(&bq__mem_cond, &bq__mem_lock);
    if (e->state == 1) {
      pthread_mutex_unlock(&bq__mem_lock);
      BQ__COUNT(memory_hits);
      *out = e;
      return BQ_SUCCESS;
    }
    /* its build failed: report that build's error to this waiter, and let a later
       select try again */
    if (e->in_map) bq__unlink_entry(e), e->refs--;
    bq_status st = e->status;
    char msg[512];
    memcpy(msg, e->msg, sizeof msg);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&bq__mem_lock);
    if (last) bq__entry_free(e);
    return bq__fail(st, "%s", msg);
  }
  bq__entry *e = (bq__entry *)calloc(1, sizeof *e);
  if (!e) { pthread_mutex_unlock(&bq__mem_lock); return bq__fail(BQ_ERROR_OUT_OF_MEMORY, "out of memory"); }
  e->hash = h;
  bq__copy(e->sku, sizeof e->sku, k->sku);
  e->ctx = ctx;
  e->refs = 2; /* the map and this caller */
  e->in_map = 1;
  e->next = bq__mem_head;
  bq__mem_head = e;
  pthread_mutex_unlock(&bq__mem_lock);

  bq_status st = build(build_data, k);
  if (!st) st = bq__load_module(k, e);

  pthread_mutex_lock(&bq__mem_lock);
  e->status = st;
  e->state = st ? 2 : 1;
  if (st) {
    bq__copy(e->msg, sizeof e->msg, bq__err_buf);
    if (e->in_map) { bq__unlink_entry(e); e->refs--; }
  }
  pthread_cond_broadcast(&bq__mem_cond);
  int last = st && --e->refs == 0;
  pthread_mutex_unlock(&bq__mem_lock);
  if (st) {
    if (last) bq__entry_free(e);
    return st;
  }
  *out = e;
  return BQ_SUCCESS;
}

/* ---- descriptors: names, normalization ------------------------------------------------ */
/* The names kernel source reads for the public enums' values, so that a kernel says
   `#if BQ_OP == BQ_OP_QUANTIZE` and every family encodes a type alike: each prelude defines
   them all (bq__spec_names) and then its specialization in them (BQ_OP BQ_OP_QUANTIZE). */
#define BQ__SPEC_NAMES(X)                                                                          \
  X(OP, QUANTIZE, BQ_QUANTIZE) X(OP, DEQUANTIZE, BQ_DEQUANTIZE) X(OP, FAKE_QUANTIZE, BQ_FAKE_QUANTIZE)   \
  X(OP, DYNAMIC_QUANTIZE, BQ_DYNAMIC_QUANTIZE) X(OP, QUANTIZED_LINEAR, BQ_QUANTIZED_LINEAR)          \
  X(OP, SMOOTHQUANT_LINEAR, BQ_SMOOTHQUANT_LINEAR) X(OP, LINEAR_WEIGHT_SUMS, BQ_LINEAR_WEIGHT_SUMS)  \
  X(OP, RMSNORM_QUANTIZE, BQ_RMSNORM_QUANTIZE) X(OP, GATED_QUANTIZE, BQ_GATED_QUANTIZE)             \
  X(OP, HADAMARD, BQ_HADAMARD) X(OP, FP8_LINEAR, BQ_FP8_LINEAR)                                   \
  X(OP, FP8_QUANTIZED_LINEAR, BQ_FP8_QUANTIZED_LINEAR)                                             \
  X(ACT, SILU, BQ_SILU) X(ACT, GELU_TANH, BQ_GELU_TANH)                                            \
  X(DIR, FORWARD, BQ_FORWARD) X(DIR, BACKWARD, BQ_BACKWARD)                                         \
  X(GRAN, TENSOR, BQ_PER_TENSOR) X(GRAN, CHANNEL, BQ_PER_CHANNEL) X(GRAN, TOKEN, BQ_PER_TOKEN)      \
  X(GRAN, GROUP, BQ_PER_GROUP) X(GRAN, BLOCK, BQ_PER_BLOCK)                                        \
  X(TYPE, F32, BQ_F32) X(TYPE, F64, BQ_F64) X(TYPE, F16, BQ_F16) X(TYPE, BF16, BQ_BF16)            \
  X(TYPE, S8, BQ_S8) X(TYPE, U8, BQ_U8) X(TYPE, S32, BQ_S32)                                        \
  X(TYPE, E4M3, BQ_E4M3) X(TYPE, E5M2, BQ_E5M2) X(TYPE, UE8M0, BQ_UE8M0) X(TYPE, E2M1, BQ_E2M1)
typedef struct bq__spec_name { const char *kind, *name; int value; } bq__spec_name;
#define BQ__SPEC_ENTRY(kind, name, value) {#kind, "BQ_" #kind "_" #name, (int)(value)},
static const bq__spec_name bq__spec_names_list[] = {BQ__SPEC_NAMES(BQ__SPEC_ENTRY)};
#undef BQ__SPEC_ENTRY
/* "BQ_GRAN_TOKEN" for ("GRAN", BQ_PER_TOKEN) */
BQ__FN const char *bq__spec(const char *kind, int value) {
  for (size_t i = 0; i < sizeof bq__spec_names_list / sizeof bq__spec_names_list[0]; i++)
    if (bq__spec_names_list[i].value == value && !strcmp(bq__spec_names_list[i].kind, kind))
      return bq__spec_names_list[i].name;
  return "BQ_UNNAMED"; /* a normalized desc has none: the kernel then fails to compile */
}
/* every name, one #define a line */
BQ__FN void bq__spec_names(bq__str *s) {
  for (size_t i = 0; i < sizeof bq__spec_names_list / sizeof bq__spec_names_list[0]; i++)
    bq__str_fmt(s, "#define %s %d\n", bq__spec_names_list[i].name, bq__spec_names_list[i].value);
}

BQ__FN const char *bq__dtype_name(bq_dtype t) {
  switch (t) {
  case BQ_F32: return "f32";
  case BQ_F64: return "f64";
  case BQ_F16: return "f16";
  case BQ_BF16: return "bf16";
  case BQ_S8: return "s8";
  case BQ_U8: return "u8";
  case BQ_S32: return "s32";
  case BQ_E4M3: return "e4m3";
  case BQ_E5M2: return "e5m2";
  case BQ_UE8M0: return "ue8m0";
  case BQ_UE8M0X4: return "ue8m0x4";
  case BQ_E2M1: return "e2m1";
  case BQ_DTYPE_DEFAULT: return "default";
  default: return "invalid";
  }
}
BQ__FN int bq__dtype_size(bq_dtype t) {
  switch (t) {
  case BQ_F64: return 8;
  case BQ_F32: case BQ_S32: case BQ_UE8M0X4: return 4;
  case BQ_F16: case BQ_BF16: return 2;
  case BQ_S8: case BQ_U8: case BQ_E4M3: case BQ_E5M2: case BQ_UE8M0: return 1;
  default: return 0;
  }
}
/* k where n is 2^k with k from lo to hi, else -1 (block and group sizes that must be powers
   of two: a Hadamard block, bq_mx_lanes' group) */
BQ__FN int bq__pow2_log(int64_t n, int lo, int hi) {
  for (int k = lo; k <= hi; k++)
    if (((int64_t)1 << k) == n) return k;
  return -1;
}
/* a Hadamard block's log2 (BQ_HADAMARD's args.group_size, the fused rotation's
   args.rotation_block): n a power of two from 2 to 256, else -1 */
BQ__FN int bq__hadamard_log2(int64_t n) { return bq__pow2_log(n, 1, 8); }
/* The fused rotation's block (desc.rotation, args.rotation_block n): a power of two from 2 to
   256 dividing the row's cols (name: the plan's, for the message) */
BQ__FN bq_status bq__rotation_block_check(const char *name, int64_t n, int64_t cols) {
  if (bq__hadamard_log2(n) < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) must be a power of two from 2 to 256: "
                    "the fused rotation's block", name, (long long)n);
  if (cols % n)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rotation_block (%lld) does not divide args.cols (%lld)",
                    name, (long long)n, (long long)cols);
  return BQ_SUCCESS;
}
BQ__FN int bq__is_fp8(bq_dtype t) { return t == BQ_E4M3 || t == BQ_E5M2; }
BQ__FN int bq__is_float(bq_dtype t) { return t == BQ_F32 || t == BQ_F64 || t == BQ_F16 || t == BQ_BF16; }
/* The op's name ("quantize") and its label, as plans and SKUs name it (the gated op's by its
   activation): the family that serves the op gives both (defined after the families) */
BQ__FN const char *bq__op_name(bq_op op);
BQ__FN const char *bq__op_label(const bq_desc *d);
/* The index of a (resolved) granularity in the families' kernel lists: per tensor 0 to per
   block 4. */
BQ__FN int bq__gran_code(bq_granularity g) { return (int)g - (int)BQ_PER_TENSOR; }
BQ__FN const char *bq__gran_name(bq_granularity g) {
  switch (g) {
  case BQ_GRANULARITY_DEFAULT: return "default";
  case BQ_PER_TENSOR: return "per_tensor";
  case BQ_PER_CHANNEL: return "per_channel";
  case BQ_PER_TOKEN: return "per_token";
  case BQ_PER_GROUP: return "per_group";
  case BQ_PER_BLOCK: return "per_block";
  default: return "per_unknown";
  }
}
BQ__FN int bq__dtype_from_name(const char *s, bq_dtype *t) {
  for (int i = BQ_F32; i <= BQ_E2M1; i++)
    if (!strcmp(s, bq__dtype_name((bq_dtype)i))) { *t = (bq_dtype)i; return 1; }
  return 0;
}

/* "fake_quantize_per_channel_backward": the name errors are reported under, as the
   elementwise families give it (asym: the family names asymmetric plans so) */
BQ__FN void bq__plan_name_std(const bq_desc *d, int asym, char *buf, size_t n) {
  snprintf(buf, n, "%s_%s%s%s", bq__op_label(d), bq__gran_name(d->granularity),
           asym && d->asymmetric ? "_asymmetric" : "", d->direction == BQ_BACKWARD ? "_backward" : "");
}

/* ---- descriptor rules ----------------------------------------------------------------- */
/* The rules a descriptor's fields follow, each the same for every op that takes it: a
   family's `normalize` hook applies those of its ops, in its order (bq__normalize finds the
   family by desc.op, then hands the desc over). */

/* desc.activation: the gated op's (every other op leaves it 0) */
BQ__FN bq_status bq__rule_no_activation(const bq_desc *d) {
  if (d->activation != BQ_ACTIVATION_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.activation (%d) applies to gated quantize only",
                    bq__op_name(d->op), (int)d->activation);
  return BQ_SUCCESS;
}
/* desc.pow2_scales: dynamic quantize's */
BQ__FN bq_status bq__rule_no_pow2(const bq_desc *d) {
  if (d->pow2_scales != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) applies to dynamic quantize only",
                    bq__op_name(d->op), d->pow2_scales);
  return BQ_SUCCESS;
}
/* desc.granularity and desc.scale_layout name values of their enums; mn: the op offers
   MN-major scales */
BQ__FN bq_status bq__rule_enums(const bq_desc *d, int mn) {
  if (d->granularity < BQ_GRANULARITY_DEFAULT || d->granularity > BQ_PER_BLOCK)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.granularity (%d) is not a bq_granularity",
                    bq__op_name(d->op), (int)d->granularity);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->scale_layout != BQ_SCALES_MN_MAJOR)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d) must be BQ_SCALES_ROW_MAJOR or "
                    "BQ_SCALES_MN_MAJOR (BQ_SCALES_BLOCKED: a microscaling format's)", bq__op_name(d->op),
                    (int)d->scale_layout);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && !mn)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.scale_layout (MN-major) is offered for quantize, dequantize, "
                    "fake quantize and dynamic quantize only", bq__op_name(d->op));
  return BQ_SUCCESS;
}

/* Test hook: nonzero makes FP8 kernels convert with the software form (common.cuh's
   bq_f8_soft) on every GPU, under their own SKUs (".soft"), so that a test can check it
   against the hardware instruction. Set it before selecting plans, from one thread. */
static int bq__fp8_soft;

/* The rules for FP8 storage (desc.int_type BQ_E4M3 or BQ_E5M2), where the integer types'
   q-range rules stand; offered: the op takes FP8 storage (quantize, dequantize and fake
   quantize in either direction, dynamic quantize and the fused producers). Symmetric, with
   no q-range (qmin and qmax stay 0). */
BQ__FN bq_status bq__rule_fp8(const bq_desc *d, const char *name, int offered) {
  const char *t = bq__dtype_name(d->int_type);
  if (!offered)
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: desc.int_type (%s) is not offered for %s: FP8 storage serves "
                    "quantize, dequantize, fake quantize, dynamic quantize and the fused producers", name, t,
                    bq__op_name(d->op));
  if (d->qmin != 0 || d->qmax != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) and desc.qmax (%d) must be 0: %s has no q-range "
                    "(it saturates to its largest finite value)", name, d->qmin, d->qmax, t);
  if (d->asymmetric != 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0: %s storage is symmetric (no "
                    "zero points)", name, d->asymmetric, t);
  return BQ_SUCCESS;
}

/* desc.direction, desc.float_type, desc.int_type (default s8) with its q-range (default
   the type's), desc.device; fp8: the op offers FP8 storage */
BQ__FN bq_status bq__rule_types(bq_desc *d, const char *name, int fp8) {
  if (d->direction != BQ_FORWARD && d->direction != BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.direction (%d) is not a bq_direction", name,
                    (int)d->direction);
  if (!bq__is_float(d->float_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.float_type (%d, %s) must be BQ_F32, BQ_F64, BQ_F16 or BQ_BF16", name,
                    (int)d->float_type, bq__dtype_name(d->float_type));
  if (d->int_type == BQ_DTYPE_DEFAULT) d->int_type = BQ_S8;
  if (bq__is_fp8(d->int_type)) {
    bq_status st = bq__rule_fp8(d, name, fp8);
    if (st) return st;
  } else {
    if (d->int_type != BQ_S8 && d->int_type != BQ_U8)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.int_type (%d, %s) must be BQ_S8, BQ_U8, BQ_E4M3 or "
                      "BQ_E5M2", name, (int)d->int_type, bq__dtype_name(d->int_type));
    int lo = d->int_type == BQ_S8 ? -128 : 0, hi = d->int_type == BQ_S8 ? 127 : 255;
    if (d->qmin == 0 && d->qmax == 0) { d->qmin = lo; d->qmax = hi; }
    if (d->qmin < lo || d->qmin > hi)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmin (%d) is outside %s [%d, %d]", name,
                      d->qmin, bq__dtype_name(d->int_type), lo, hi);
    if (d->qmax < lo || d->qmax > hi)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) is outside %s [%d, %d]", name,
                      d->qmax, bq__dtype_name(d->int_type), lo, hi);
    if (d->qmax < d->qmin)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) < desc.qmin (%d)", name, d->qmax,
                      d->qmin);
  }
  if (d->device < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.device (%d) is negative", name, d->device);
  return BQ_SUCCESS;
}

/* desc.out_type: the linear layers' (every other op leaves it 0); then desc.scale_type's
   default, BQ_F32 */
BQ__FN bq_status bq__rule_no_out_type(bq_desc *d, const char *name) {
  if (d->out_type != BQ_DTYPE_DEFAULT)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.out_type (%d, %s) applies to linear layers only", name,
                    (int)d->out_type, bq__dtype_name(d->out_type));
  if (d->scale_type == BQ_DTYPE_DEFAULT) d->scale_type = BQ_F32;
  return BQ_SUCCESS;
}

/* The scale-type, layout and power-of-two rules of the elementwise ops (d->scale_type
   defaulted already): scale arrays are BQ_F32, the float type or BQ_UE8M0 (device arrays
   only: a static per-tensor scale is a host double), and per group BQ_UE8M0X4 (no zero
   points); per-group scales may be MN-major; dynamic (the op computes its scales) may round
   its scales up to powers of two (pow2_scales, implied by UE8M0). */
BQ__FN bq_status bq__scale_rules(bq_desc *d, const bq_desc *in, const char *name, int dynamic) {
  if (d->scale_type != d->float_type && d->scale_type != BQ_F32 && d->scale_type != BQ_UE8M0 &&
      d->scale_type != BQ_UE8M0X4)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (%d, %s) must be the float type (%s), BQ_F32, "
                    "BQ_UE8M0 or BQ_UE8M0X4", name, (int)in->scale_type, bq__dtype_name(d->scale_type),
                    bq__dtype_name(d->float_type));
  if (d->scale_type == BQ_UE8M0 && d->granularity == BQ_PER_TENSOR && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (ue8m0) names a device array's type: a static "
                    "per-tensor scale is the host double args.scale", name);
  if (d->scale_type == BQ_UE8M0X4 && d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_type (ue8m0x4) packs per-group scales: desc.granularity "
                    "must be BQ_PER_GROUP", name);
  if (d->scale_type == BQ_UE8M0X4 && dynamic && d->asymmetric == 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (1) needs zero points, which packed scales "
                    "(desc.scale_type ue8m0x4) do not carry", name);
  if (d->scale_layout != BQ_SCALES_ROW_MAJOR && d->granularity != BQ_PER_GROUP)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.scale_layout (%d, MN-major) applies to per-group scales only",
                    name, (int)d->scale_layout);
  if (d->pow2_scales != 0 && d->pow2_scales != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (%d) must be 0 or 1", name, d->pow2_scales);
  if (d->pow2_scales && !dynamic)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.pow2_scales (1) applies to dynamic quantize only", name);
  if (dynamic && (d->scale_type == BQ_UE8M0 || d->scale_type == BQ_UE8M0X4)) d->pow2_scales = 1;
  return BQ_SUCCESS;
}

/* desc.asymmetric is 0 or 1; the q-range leaves a scale to compute: qmax > 0 for symmetric
   (FP8 has no q-range) and qmax > qmin for asymmetric, `what` naming the scales' kind */
BQ__FN bq_status bq__rule_asymmetric(const bq_desc *d, const char *name) {
  if (d->asymmetric != 0 && d->asymmetric != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.asymmetric (%d) must be 0 or 1", name, d->asymmetric);
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__rule_qrange(const bq_desc *d, const char *name, const char *what) {
  if (!d->asymmetric && d->qmax <= 0 && !bq__is_fp8(d->int_type))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) must be > 0 for symmetric %s", name, d->qmax, what);
  if (d->asymmetric && d->qmax == d->qmin)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.qmax (%d) must be > desc.qmin (%d) for asymmetric %s", name,
                    d->qmax, d->qmin, what);
  return BQ_SUCCESS;
}

/* ---- the elementwise families' SKU and specialization ------------------------------- */
/* The SKU of quantize, dequantize, fake quantize, dynamic quantize and the fused producers:
   op, direction, granularity, float and int types, q-range (FP8 has none; its test hook's
   software conversion is named), scale layout and type, variant (the family's: elements per
   chunk; symmetric or asymmetric) and target */
BQ__FN void bq__sku_std(const bq_desc *d, const char *variant, const char *tn, char *buf, size_t n) {
  char range[40] = "";
  if (!bq__is_fp8(d->int_type)) snprintf(range, sizeof range, ".q[%d,%d]", d->qmin, d->qmax);
  else if (bq__fp8_soft) snprintf(range, sizeof range, ".soft");
  snprintf(buf, n, "%s.%s.%s.%s.%s%s.scale_%s%s.%s.%s", bq__op_label(d), d->direction == BQ_BACKWARD ? "bwd" : "fwd",
           bq__gran_name(d->granularity), bq__dtype_name(d->float_type), bq__dtype_name(d->int_type), range,
           d->scale_layout == BQ_SCALES_MN_MAJOR ? "mn_" : "", bq__dtype_name(d->scale_type), variant, tn);
}
/* Their kernels' types: T, I, the q-range and the scales' type and layout (common.cuh's
   BQ_SL; packed UE8M0 scales are UE8M0 bytes to the kernels, which address them by layout) */
BQ__FN void bq__prelude_types(const bq_desc *d, bq__str *s) {
  bq__str_fmt(s, "#define BQ_FT %s\n#define BQ_IT %s\n#define BQ_QMIN (%d)\n#define BQ_QMAX (%d)\n"
              "#define BQ_ST %s\n#define BQ_SL %d\n%s", bq__spec("TYPE", d->float_type),
              bq__spec("TYPE", d->int_type), d->qmin, d->qmax,
              bq__spec("TYPE", d->scale_type == BQ_UE8M0X4 ? BQ_UE8M0 : d->scale_type),
              d->scale_type == BQ_UE8M0X4 ? (d->scale_layout == BQ_SCALES_MN_MAJOR ? 2 : 3)
                                          : d->scale_layout == BQ_SCALES_MN_MAJOR ? 1 : 0,
              bq__is_fp8(d->int_type) && bq__fp8_soft ? "#define BQ_FP8_SOFT 1\n" : "");
}

/* ---- plans and families ------------------------------------------------------------- */
/* A family is one kernel source and its host side, serving one op or a few: the affine ops
   (quantize, dequantize, fake quantize), dynamic quantize, the fused producers, the linear
   layers, their weight sums. The core asks the family a desc's op belongs to (bq__family_for)
   and never which op it holds: each op's rules, names, kernels and launches are its
   family's hooks. */
struct bq_plan;
enum { BQ__OWNS_MASK = 1, BQ__OWNS_AMAX_BOUND = 2, BQ__OWNS_TENSOR_SCALE = 4, BQ__OWNS_SEED = 8, BQ__OWNS_OFFSET = 16, BQ__OWNS_ROTATION = 32 }; /* bq__family.owns */
#define BQ__FAMILY_OPS 4
typedef struct bq__family {
  /* -- its ops and their descriptors -- */
  bq_op ops[BQ__FAMILY_OPS];            /* the ops it serves (0 ends the list) */
  const char *op_names[BQ__FAMILY_OPS]; /* their names, in plan names, SKUs and messages */
  const char *group;       /* its name to tools (warm --family, bq__all_descs) */
  /* *d, a copy of in whose op is the family's: its defaults filled in and the plan's name
     written, or a field refused by name */
  bq_status (*normalize)(const bq_desc *in, bq_desc *d, char *name, size_t name_size);
  const char *(*label)(const bq_desc *d); /* the op in plan names and SKUs (NULL: its name) */
  /* the SKU of a normalized desc for target t, named tn (bq__sku_of adds a module's entry) */
  void (*sku)(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n);
  /* the SKU's tokens (split at '.', the target's left off) back to a desc for bq__normalize,
     1 where they are this family's form; NULL: the elementwise form (bq__desc_from_sku) */
  int (*from_sku)(char *const *tok, int n, bq_desc *d);
  /* the tools' enumeration (bq__all_descs): how many variants op has beyond the fields every
     desc has, outside and inside them, and one applied to a desc (NULL: none) */
  void (*axes)(bq_op op, int *outer, int *inner);
  void (*vary)(bq_desc *in, int outer, int inner);
  unsigned (*owns)(const bq_desc *d);         /* the op-owned bq_args fields d takes (BQ__OWNS_*) */
  const char *(*guarantee)(const bq_desc *d); /* bq_plan_precision_guarantee (NULL: the elementwise one) */
  /* -- its kernels -- */
  const char *src_name;     /* kernels_src/ file */
  const char *(*src)(void); /* its embedded text (the kernel text closes the implementation) */
  /* the source's specialization after the SKU line and the names (bq__prelude) */
  void (*prelude)(const bq_desc *d, const bq__target *t, bq__str *s);
  int (*vec)(const bq_desc *d);
  int wgmma; /* on sm_90, an sm_90a module: the warpgroup-MMA tiles */
  /* the shape rules alone (what the workspace size depends on): the first thing `check`
     does, so bq_plan_workspace_size refuses a shape with check's very status and message */
  bq_status (*shape)(const struct bq_plan *p, const bq_args *a);
  bq_status (*check)(const struct bq_plan *p, const bq_args *a);
  size_t (*workspace)(const struct bq_plan *p, const bq_args *a);
  bq_status (*run)(const struct bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream);
  /* entry point e has code for d on t (the kernel source leaves an empty one where it does
     not); NULL: every entry point kernels[] names does */
  int (*has)(const bq_desc *d, const bq__target *t, int e);
  /* what entry point e needs once its module loads, before a run may take it (NULL: nothing) */
  bq_status (*setup)(struct bq_plan *p, int e, bq__CUfunction fn);
  const char *kernels[5][BQ__MAX_KERNELS]; /* by granularity (bq__gran_code), the entry points by the
                                              family's enum (NULL where the source has none) */
  /* -- its plans -- */
  /* 1 with *q filled where d's plans hold a plan of q, another family's kernel (select,
     warm and the enumeration take it along) */
  int (*sub)(const bq_desc *d, bq_desc *q);
  /* select's set-up of the plan in its device's context, before modules load (NULL: none) */
  bq_status (*plan_setup)(struct bq_plan *p);
  /* the fields of the typical problem (bq__typical_args) only d's ops read; ptr: a pointer
     to give one (NULL: none) */
  void (*typical)(const bq_desc *d, bq_args *a, void *ptr);
  int min_sm; /* the oldest compute capability its kernels run on (0: the library's, BQ__MIN_SM) */
} bq__family;

/* A plan is immutable but for its modules: each entry point's is loaded the first time a
   run takes it (select loads the ones a typical problem takes, bq__plan_prime), published
   with an atomic store once its set-up (the family's `setup`: attributes, occupancy) is
   done, so a run that sees a module also sees its set-up. */
struct bq_plan {
  bq_desc desc; /* normalized */
  char name[96];
  char sku[512];
  struct bq_plan *sub;  /* the plan of another family's kernel it holds (bq__family.sub) */
  struct bq_plan *rows; /* a plan its family's run selects on first use and keeps, published
                           once with an atomic store (per channel's per-token plan) */
  const bq__family *fam;
  bq__target target; /* its modules' target (module 0: bq__plan_load names each one's) */
  const char *kernels[BQ__MAX_KERNELS]; /* its entry points with code (bq__kernels_of) */
  bq__entry *mod[BQ__MAX_KERNELS];      /* each entry point's module, once loaded */
  pthread_mutex_t lock;                 /* held while a module is published */
  bq__CUcontext ctx; /* the context its modules live in: run needs it current, or none */
  int device;        /* ctx's device ordinal */
  int num_sms;
  int threads_sm;   /* the threads an SM holds (0: not reported; the launch rules take 2048) */
  int64_t l2_bytes; /* the device's L2 (0: not reported) */
  char gpu[160];    /* the device for the tune's keys: "<name> sms <n> mem <kHz>" */
  int vec;
  union { /* the family's own state, its plan_setup's and setup's */
    struct {
      int wgmma; /* the module is sm_90a and has the warpgroup-MMA tiles */
      int pdl;   /* QuantizedLinear: weight streaming starts while the activations' kernel runs */
    } linear;
    struct {
      int64_t smem_max;    /* the dynamic shared memory a block may opt into, less a margin */
      int64_t staged_smem; /* what bq_fused_staged was given (0 where the driver refused) */
      int tab_blocks[BQ__MAX_KERNELS]; /* with the activation's table: each entry's blocks an SM
                                          (found when it loads: the table's size is fixed) */
    } fused;
    struct {
      int64_t smem_max;    /* with the rotation: the dynamic shared memory a block may opt into */
      int64_t staged_smem; /* what bq_dynamic_staged was given (0: the default 48 KiB) */
    } dynamic;
  };
};

#define BQ__MAX_ELEMS ((int64_t)1 << 56)
#define BQ__MAX_CHANNELS ((int64_t)1 << 39) /* per channel: bq_affine_cols' grid x (256 lanes of 2 or more columns a block) fits */

BQ__FN bq_status bq__check_ptr(const bq_plan *p, const char *field, const void *ptr, int elem) {
  if (!ptr) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", p->name, field);
  if ((uintptr_t)ptr % (uintptr_t)elem)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: %s (%p) is not aligned to its element size (%d bytes)",
                    p->name, field, ptr, elem);
  return BQ_SUCCESS;
}

/* One call's problem as [rows, cols] with row strides, after the shape rules. */
typedef struct bq__view {
  int64_t rows, cols, xs, ys, numel;
  int64_t group, gmod, grs, ngroups;
} bq__view;

/* Per group, [rows, cols]: args.group_size divides cols; per block, B = args.group_size
   tiles it, edge tiles partial. The scales' leading dimension (group_row_stride; 0: the
   layout's own) holds a row of groups or blocks (row-major) or the rows (MN-major), and the
   array fits. *grs is the kernels' form of it: bytes for BQ_UE8M0X4 (common.cuh's bq_pbase). */
BQ__FN bq_status bq__group_shape(const char *n, const bq_desc *d, const bq_args *a, int64_t rows, int64_t *group,
                                 int64_t *ngroups, int64_t *grs) {
  const int block = d->granularity == BQ_PER_BLOCK, mn = d->scale_layout == BQ_SCALES_MN_MAJOR;
  const int x4 = d->scale_type == BQ_UE8M0X4;
  if (a->group_size < 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) must be >= 1", n, (long long)a->group_size);
  if (!block && a->cols % a->group_size)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_size (%lld) does not divide args.cols (%lld)", n,
                    (long long)a->group_size, (long long)a->cols);
  if (a->group_row_stride < 0)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is negative", n,
                    (long long)a->group_row_stride);
  const int64_t B = a->group_size, ng = block ? a->cols / B + (a->cols % B != 0) : a->cols / B;
  const int64_t srows = block ? rows / B + (rows % B != 0) : rows; /* rows of scales */
  /* the leading dimension's least value and default, and how many of it the array spans */
  int64_t need, def, count;
  if (mn) need = srows, def = (srows + 3) / 4 * 4, count = x4 ? (ng + 3) / 4 : ng;
  else need = def = x4 ? (ng + 3) / 4 : ng, count = srows;
  const int64_t rs = a->group_row_stride ? a->group_row_stride : def;
  if (rs < need)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is smaller than %s (%lld)", n,
                    (long long)a->group_row_stride,
                    mn ? "args.rows" : block ? "cols / group_size rounded up" : x4 ? "the row's int32 words of packed "
                    "scales" : "cols / group_size", (long long)need);
  /* (packed: the kernels index bytes; bounded with no rows too, where it still scales) */
  if (rs > BQ__MAX_ELEMS / (x4 ? 4 : 1) / (count ? count : 1))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.group_row_stride (%lld) is too large", n, (long long)rs);
  *group = B;
  *ngroups = ng;
  *grs = x4 ? 4 * rs : rs;
  return BQ_SUCCESS;
}

BQ__FN bq_status bq__view_of(const bq_plan *p, const bq_args *a, bq__view *v) {
  const bq_desc *d = &p->desc;
  const char *n = p->name;
  memset(v, 0, sizeof *v);
  if (!a) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args is NULL", n);
  switch (d->granularity) {
  case BQ_GRANULARITY_DEFAULT: /* resolved by normalization */
  case BQ_PER_TENSOR:
    if (a->numel < 0 || a->numel > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.numel (%lld) is negative or too large", n,
                      (long long)a->numel);
    v->rows = 1; v->cols = v->xs = v->ys = v->numel = a->numel;
    break;
  case BQ_PER_CHANNEL: {
    if (a->rank < 1 || a->rank > BQ_MAX_RANK)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rank (%d) must be in [1, %d]", n, a->rank, BQ_MAX_RANK);
    int axis = a->axis < 0 ? a->axis + a->rank : a->axis;
    if (axis < 0 || axis >= a->rank)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.axis (%d) is out of range for rank %d", n, a->axis, a->rank);
    int64_t total = 1, inner = 1;
    for (int i = 0; i < a->rank; i++) {
      if (a->shape[i] < 0)
        return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) is negative", n, i, (long long)a->shape[i]);
      if (a->shape[i] && total > BQ__MAX_ELEMS / a->shape[i])
        return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) makes the tensor too large", n, i,
                        (long long)a->shape[i]);
      total *= a->shape[i];
    }
    /* bq_affine_cols (the axis innermost) launches a block per 256 lanes of columns in a
       grid x of at most 2^31 - 1 blocks, with no stride: the channel count is bounded so
       that every non-empty per-channel call fits it, whichever kernel takes it */
    if (total && a->shape[axis] > BQ__MAX_CHANNELS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.shape[%d] (%lld) has more than 2^39 channels (args.axis %d)",
                      n, axis, (long long)a->shape[axis], a->axis);
    for (int i = axis + 1; i < a->rank && total; i++) inner *= a->shape[i]; /* <= total */
    v->rows = 1; v->cols = v->xs = v->ys = v->numel = total;
    v->group = inner ? inner : 1;
    v->gmod = a->shape[axis] ? a->shape[axis] : 1;
    break;
  }
  case BQ_PER_TOKEN:
  case BQ_PER_GROUP:
  case BQ_PER_BLOCK: {
    if (a->rows < 0 || a->rows > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) is negative or too large", n, (long long)a->rows);
    if (a->cols < 0 || a->cols > BQ__MAX_ELEMS)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.cols (%lld) is negative or too large", n, (long long)a->cols);
    v->rows = a->rows; v->cols = a->cols;
    v->xs = a->x_row_stride ? a->x_row_stride : a->cols;
    v->ys = a->y_row_stride ? a->y_row_stride : a->cols;
    if (v->xs < a->cols)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.x_row_stride (%lld) is smaller than args.cols (%lld)", n,
                      (long long)a->x_row_stride, (long long)a->cols);
    if (v->ys < a->cols)
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.y_row_stride (%lld) is smaller than args.cols (%lld)", n,
                      (long long)a->y_row_stride, (long long)a->cols);
    if (v->rows && (v->xs > BQ__MAX_ELEMS / v->rows || v->ys > BQ__MAX_ELEMS / v->rows))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.rows (%lld) times the row stride is too large", n,
                      (long long)a->rows);
    v->numel = v->rows * v->cols;
    if (d->granularity == BQ_PER_GROUP || d->granularity == BQ_PER_BLOCK) {
      bq_status st = bq__group_shape(n, d, a, v->rows, &v->group, &v->ngroups, &v->grs);
      if (st) return st;
    }
    break;
  }
  }
  return BQ_SUCCESS;
}

#define BQ__BLOCKS_MAX_GRID (((int64_t)1 << 24) - 1)
BQ__FN int64_t bq__grid(int64_t work, int teams) {
  int64_t blocks = (work + teams - 1) / teams;
  return blocks > 0x7fffffff ? 0x7fffffff : blocks;
}

/* Validation bounds every call so that its grid fits the launch limits; a grid that does
   not would run only part of the work, so it fails here rather than launch. */
BQ__FN int bq__grid_invalid(const bq_plan *p, int64_t blocks, int64_t blocks_y) {
  if (blocks >= 1 && blocks <= 0x7fffffff && blocks_y >= 1 && blocks_y <= 65535) return 0;
  bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: grid (%lld, %lld) exceeds the launch limits", p->name, (long long)blocks,
           (long long)blocks_y);
  return 1;
}

/* ---- a plan's modules: one an entry point, loaded on first use ------------------------------- */
BQ__FN void bq__sku_of(const bq_desc *d, const bq__target *t, bq__kernel_src *k);
BQ__FN bq_status bq__build_source(const void *data, bq__kernel_src *k);

/* Loads entry point e's module into the plan (the memory cache, the disk cache or NVRTC, as
   select does), runs the family's set-up for it and publishes it. A run that needs it
   first loads it here: under stream capture the thread's capture mode is relaxed for the
   load, which enqueues nothing. Two threads may load one module at once; the memory cache
   compiles it once, and one of them publishes it. */
BQ__FN bq_status bq__plan_load(bq_plan *p, int e, bq__entry **out) {
  if (e < 0 || e >= BQ__MAX_KERNELS || !p->kernels[e])
    return bq__fail(BQ_ERROR_NOT_SUPPORTED, "%s: its kernels have no entry point %d", p->name, e);
  if (!p->ctx) return bq__fail(BQ_ERROR_NO_DEVICE, "%s: the plan has no device to load %s on", p->name, p->kernels[e]);
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__target t = p->target;
  t.module = e + 1;
  bq__sku_of(&p->desc, &t, &k);
  int mode = 2; /* CU_STREAM_CAPTURE_MODE_RELAXED */
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  bq__entry *got = NULL;
  bq_status st = bq__get_entry(&k, p->ctx, bq__build_source, &p->desc, &got);
  BQ_FREE(k.source.p);
  if (st) {
    char msg[sizeof bq__err_buf];
    memcpy(msg, bq__err_buf, sizeof msg);
    bq__fail(st, "%s: %s", p->name, msg);
  }
  pthread_mutex_lock(&p->lock);
  bq__entry *cur = p->mod[e];
  if (!st && !cur) {
    if (p->fam->setup) st = p->fam->setup(p, e, got->fn[e]);
    if (!st) {
      __atomic_store_n(&p->mod[e], got, __ATOMIC_RELEASE);
      cur = got;
      got = NULL;
    }
  }
  pthread_mutex_unlock(&p->lock);
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  if (got) bq__entry_release(got);
  if (st) return st;
  *out = cur;
  return BQ_SUCCESS;
}

/* Entry point e's function, its module loaded first where no run has taken it yet */
BQ__FN bq_status bq__plan_fn(const bq_plan *cp, int e, bq__CUfunction *fn) {
  bq_plan *p = (bq_plan *)cp; /* (the module table is filled in once per entry point) */
  bq__entry *m = e >= 0 && e < BQ__MAX_KERNELS ? __atomic_load_n(&p->mod[e], __ATOMIC_ACQUIRE) : NULL;
  if (!m) {
    bq_status st = bq__plan_load(p, e, &m);
    if (st) return st;
  }
  *fn = m->fn[e];
  return BQ_SUCCESS;
}

/* Select's dry run (bq__plan_prime): launches record which entry points the plan's own runs
   take, and launch nothing */
static __thread struct { const bq_plan *plan; unsigned taken; } bq__dry;

/* What launching entry point `which` over a [blocks, blocks_y] grid needs first: the grid
   within the launch limits, then in a dry run the entry point recorded (*dry set: launch
   nothing), else its function, its module loaded where no run has taken it yet */
BQ__FN bq_status bq__launch_prep(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, bq__CUfunction *f,
                                 int *dry) {
  *f = NULL;
  *dry = bq__dry.plan != NULL;
  if (bq__grid_invalid(p, blocks, blocks_y)) return BQ_ERROR_NOT_SUPPORTED;
  if (!*dry) return bq__plan_fn(p, which, f);
  if (bq__dry.plan == p) bq__dry.taken |= 1u << which;
  return BQ_SUCCESS;
}

/* Kernel `which` of the plan over a [blocks, blocks_y] grid, with `smem` bytes of dynamic
   shared memory; params is the kernel's one parameter block. */
BQ__FN bq_status bq__launch(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, int threads, unsigned smem,
                            void *params, void *stream) {
  void *args[1] = {params};
  bq__CUfunction f;
  int dry;
  bq_status st = bq__launch_prep(p, which, blocks, blocks_y, &f, &dry);
  if (st || dry) return st;
  bq__CUresult r = bq__drv.cuLaunchKernel(f, (unsigned)blocks, (unsigned)blocks_y, 1, (unsigned)threads, 1, 1, smem,
                                          (bq__CUstream)stream, args, NULL);
  return r ? bq__cu_fail(r, "cuLaunchKernel") : BQ_SUCCESS;
}
/* The same with programmatic stream serialization: the grid may start before the stream's
   previous kernel ends, once that kernel's blocks have all run bq_launch_dependents, and it
   must bq_wait_prior_grid before it reads what that kernel writes. */
BQ__FN bq_status bq__launch_overlapped(const bq_plan *p, int which, int64_t blocks, int64_t blocks_y, int threads,
                                       unsigned smem, void *params, void *stream) {
  void *args[1] = {params};
  bq__CUfunction f;
  int dry;
  bq_status st = bq__launch_prep(p, which, blocks, blocks_y, &f, &dry);
  if (st || dry) return st;
  bq__CUlaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = BQ__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
  at.value.i = 1;
  bq__CUlaunchConfig c = {(unsigned)blocks, (unsigned)blocks_y, 1, (unsigned)threads, 1, 1, smem, (bq__CUstream)stream,
                          &at, 1};
  bq__CUresult r = bq__drv.cuLaunchKernelEx(&c, f, args, NULL);
  return r ? bq__cu_fail(r, "cuLaunchKernelEx (programmatic stream serialization)") : BQ_SUCCESS;
}

/* The workspace a run was given against the `need` bytes bq_plan_workspace_size reports. */
BQ__FN bq_status bq__check_workspace(const bq_plan *p, const void *ws, size_t ws_bytes, size_t need) {
  if (!ws || ws_bytes < need)
    return bq__fail(BQ_ERROR_INSUFFICIENT_WORKSPACE, "%s: workspace (%zu bytes at %p) is smaller than "
                    "bq_plan_workspace_size (%zu bytes)", p->name, ws_bytes, ws, need);
  if ((uintptr_t)ws % 16)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: workspace (%p) is not 16-byte aligned", p->name, ws);
  return BQ_SUCCESS;
}

/* ---- the first-use tune ------------------------------------------------------------------
   Where the rules cannot tell which of a family's kernels is faster on this GPU, and every
   one of them computes the same bits (the GPU suites force each and compare), the family
   asks bq__tune_choice. The first run of a plan on a shape class times each candidate once,
   on scratch buffers the library allocates (the caller's scales and zero points are read,
   never written; the caller's input and output are not touched), on a stream of its own
   after the caller's stream has drained, and keeps the winner in memory and on disk beside
   the kernels (tune-<hash>.txt), keyed by the GPU (name, SMs, memory clock), the driver,
   the plan's SKU, the decision and the class. A run under stream capture, a dry run, a
   scratch allocation that fails, or BARACUDA_QUANT_TUNE=0 takes the rule's candidate (the
   first two without remembering anything, so a later plain run may still tune). The timing
   takes a warm-up launch and three alternating launches of each candidate, which for the
   DRAM-sized tensors tuned is a few milliseconds; a candidate's module is compiled (or read
   from the cache) first. A candidate replaces the rule's only when it is at least 2% faster,
   so that noise does not flip a choice between runs.
   The file, one entry each, checked in full before use (anything else is re-tuned and
   rewritten, with one warning):
     baracuda_quant tune 1
     key <gpu name> sms <n> mem <kHz> driver <version> sku <SKU> tune <decision> class <n>
     choice <k> of <n>
     us <each candidate's best time, microseconds>
     checksum <FNV-1a 64 of every byte above, 16 hex digits> */
#define BQ__TUNE_MAGIC "baracuda_quant tune 1\n"
#define BQ__TUNE_MAX 4 /* candidates a decision may have */
#define BQ__TUNE_MAX_SCRATCH ((size_t)1 << 30)
typedef struct bq__tuned {
  struct bq__tuned *next;
  uint64_t hash;
  int choice;
  char key[];
} bq__tuned;
static pthread_mutex_t bq__tune_lock = PTHREAD_MUTEX_INITIALIZER;
static bq__tuned *bq__tune_head;
static __thread int bq__tune_forced = -1; /* the candidate a timing launch takes */
static uint64_t bq__tune_count;           /* tunes timed by this process (for the tests) */

/* A decision: its name (part of the key), the shape class, the candidates and the rule's,
   and the scratch a timing needs: bytes[i] for buffer i, and point() making a copy of the
   caller's arguments that reads and writes those buffers instead. */
typedef struct bq__tune_req {
  const char *what;
  int cls, n, rule;
  size_t bytes[2];
  void (*point)(bq_args *s, const bq_args *a, void *const buf[2]);
} bq__tune_req;

BQ__FN int bq__tune_enabled(void) { return bq__env_bool("BARACUDA_QUANT_TUNE", 1); }

BQ__FN void bq__tune_key(const bq_plan *p, const bq__tune_req *r, bq__str *key) {
  bq__str_fmt(key, "%s driver %d sku %s tune %s class %d", p->gpu, bq__drv.version, p->sku, r->what, r->cls);
}

BQ__FN void bq__tune_path(const char *dir, uint64_t hash, char *path, size_t n) {
  snprintf(path, n, "%s/tune-%016llx.txt", dir, (unsigned long long)hash);
}

/* Parses an entry's text (NUL-terminated, n bytes): NULL when sane, with its key (up to
   key_cap bytes), its choice and its candidates' count; else what is wrong. */
BQ__FN const char *bq__tune_parse(const char *text, size_t n, char *key, size_t key_cap, int *choice, int *of) {
  const size_t m = strlen(BQ__TUNE_MAGIC);
  if (n != strlen(text)) return "it holds a NUL byte";
  if (n < m || memcmp(text, BQ__TUNE_MAGIC, m) != 0) return "bad magic";
  const char *c = strstr(text, "\nchecksum ");
  if (!c) return "no checksum";
  c++;
  char want[40];
  snprintf(want, sizeof want, "checksum %016llx\n", (unsigned long long)bq__fnv1a(text, (size_t)(c - text), BQ__FNV_SEED));
  if (strcmp(c, want) != 0) return "checksum mismatch";
  const char *p = text + m, *eol = strchr(p, '\n');
  if (strncmp(p, "key ", 4) != 0 || !eol || eol > c) return "no key line";
  if ((size_t)(eol - p - 4) >= key_cap) return "key too long";
  for (const char *q = p + 4; q < eol; q++)
    if (*q < 0x20 || *q > 0x7e) return "key not printable";
  memcpy(key, p + 4, (size_t)(eol - p - 4));
  key[eol - p - 4] = 0;
  p = eol + 1;
  int k = -1, cands = -1, used = 0;
  if (sscanf(p, "choice %d of %d\n%n", &k, &cands, &used) != 2 || used == 0) return "no choice line";
  if (cands < 2 || cands > BQ__TUNE_MAX || k < 0 || k >= cands) return "choice out of range";
  p += used;
  eol = strchr(p, '\n');
  if (strncmp(p, "us", 2) != 0 || !eol) return "no times line";
  if (eol + 1 != c) return "times line malformed";
  for (const char *q = p + 2; q < eol; q++)
    if (!(*q == ' ' || *q == '.' || (*q >= '0' && *q <= '9'))) return "times not numbers";
  *choice = k;
  *of = cands;
  return NULL;
}

/* 1 with *choice set where dir holds a sane entry for key, of n_cand candidates; one warning
   for a file there that is not one */
BQ__FN int bq__tune_read(const char *dir, const char *key, uint64_t hash, int n_cand, int *choice) {
  char path[BQ__PATH_MAX + 64], text[2048], got_key[1024];
  bq__tune_path(dir, hash, path, sizeof path);
  const char *why = NULL;
  int k = -1, of = -1;
  const long n = bq__read_cache_text(path, text, sizeof text, &why);
  if (n >= 0) {
    why = bq__tune_parse(text, (size_t)n, got_key, sizeof got_key, &k, &of);
    if (!why && strcmp(got_key, key) != 0) why = "another key";
    else if (!why && of != n_cand) why = "choice out of range";
  }
  if (why && bq__first_warning("tune", dir))
    bq__warn("ignoring tune entry %s (%s): tuning again and rewriting it", path, why);
  if (n < 0 || why) return 0;
  *choice = k;
  return 1;
}

BQ__FN void bq__tune_write(const char *dir, const char *key, uint64_t hash, int choice, int n, const double *us) {
  char path[BQ__PATH_MAX + 64];
  bq__tune_path(dir, hash, path, sizeof path);
  bq__str s;
  memset(&s, 0, sizeof s);
  bq__str_fmt(&s, "%skey %s\nchoice %d of %d\nus", BQ__TUNE_MAGIC, key, choice, n);
  for (int i = 0; i < n; i++) bq__str_fmt(&s, " %.2f", us[i]);
  bq__str_fmt(&s, "\n");
  if (!s.oom) bq__str_fmt(&s, "checksum %016llx\n", (unsigned long long)bq__fnv1a(s.p, s.n, BQ__FNV_SEED));
  if (!s.oom && bq__write_atomic(dir, path, s.p, s.n, NULL, 0, NULL, 0, 1) != 0) BQ__COUNT(write_failures);
  BQ_FREE(s.p);
}

BQ__FN int bq__tune_find(const char *key, uint64_t hash, int *choice) {
  int found = 0;
  pthread_mutex_lock(&bq__tune_lock);
  for (bq__tuned *t = bq__tune_head; t && !found; t = t->next)
    if (t->hash == hash && !strcmp(t->key, key)) *choice = t->choice, found = 1;
  pthread_mutex_unlock(&bq__tune_lock);
  return found;
}
/* keeps key's choice unless another thread kept one first */
BQ__FN void bq__tune_remember(const char *key, uint64_t hash, int choice) {
  size_t n = strlen(key);
  bq__tuned *t = (bq__tuned *)BQ_MALLOC(sizeof *t + n + 1);
  if (!t) return;
  t->hash = hash;
  t->choice = choice;
  memcpy(t->key, key, n + 1);
  pthread_mutex_lock(&bq__tune_lock);
  for (bq__tuned *o = bq__tune_head; o && t; o = o->next)
    if (o->hash == hash && !strcmp(o->key, key)) BQ_FREE(t), t = NULL;
  if (t) t->next = bq__tune_head, bq__tune_head = t;
  pthread_mutex_unlock(&bq__tune_lock);
}
BQ__FN void bq__tune_forget(void) {
  pthread_mutex_lock(&bq__tune_lock);
  bq__tuned *t = bq__tune_head;
  bq__tune_head = NULL;
  pthread_mutex_unlock(&bq__tune_lock);
  while (t) {
    bq__tuned *next = t->next;
    BQ_FREE(t);
    t = next;
  }
}

/* Times each candidate of r on scratch; 0 with us[] filled, else -1 (nothing timed). The
   caller's stream has drained; this thread's capture mode is relaxed meanwhile, so that the
   allocations do not disturb another thread's capture. */
BQ__FN int bq__tune_time(const bq_plan *p, const bq_args *a, const bq__tune_req *r, double *us) {
  const bq__driver_api *d = &bq__drv;
  bq__CUdeviceptr buf[2] = {0, 0};
  bq__CUstream ts = NULL;
  bq__CUevent ev[2] = {NULL, NULL};
  int ok = 1;
  for (int i = 0; i < 2 && ok; i++)
    if (r->bytes[i] && (d->cuMemAlloc(&buf[i], r->bytes[i]) || d->cuMemsetD8(buf[i], 0, r->bytes[i]))) ok = 0;
  if (ok && (d->cuStreamCreate(&ts, 1 /* non-blocking */) || d->cuEventCreate(&ev[0], BQ__CU_EVENT_DEFAULT) ||
             d->cuEventCreate(&ev[1], BQ__CU_EVENT_DEFAULT)))
    ok = 0;
  bq_args s;
  void *ptr[2] = {(void *)(uintptr_t)buf[0], (void *)(uintptr_t)buf[1]};
  r->point(&s, a, ptr);
  for (int i = 0; i < r->n; i++) us[i] = 1e30;
  for (int rep = 0; rep < 4 && ok; rep++) /* a warm-up round, then three timed */
    for (int c = 0; c < r->n && ok; c++) {
      float ms = 0;
      bq__tune_forced = c;
      ok = !d->cuEventRecord(ev[0], ts) && !p->fam->run(p, &s, NULL, 0, ts) && !d->cuEventRecord(ev[1], ts) &&
           !d->cuEventSynchronize(ev[1]) && !d->cuEventElapsedTime(&ms, ev[0], ev[1]);
      bq__tune_forced = -1;
      if (ok && rep > 0 && 1e3 * ms < us[c]) us[c] = 1e3 * ms;
    }
  if (ts) d->cuStreamSynchronize(ts);
  for (int i = 0; i < 2; i++)
    if (ev[i]) d->cuEventDestroy(ev[i]);
  if (ts) d->cuStreamDestroy(ts);
  for (int i = 0; i < 2; i++)
    if (buf[i]) d->cuMemFree(buf[i]);
  return ok ? 0 : -1;
}

/* Times r's candidates for p on a and keeps the winner: in memory, and in dir where there is
   one. Nothing happens under stream capture (the rule's candidate, not remembered, so a later
   plain run may still tune); an allocation or launch that fails keeps the rule's in memory. */
BQ__FN int bq__tune_now(const bq_plan *p, const bq_args *a, void *stream, const bq__tune_req *r, const char *key,
                        uint64_t hash, const char *dir) {
  int capturing = 1, mode = BQ__CU_STREAM_CAPTURE_MODE_RELAXED, choice = r->rule;
  if (bq__drv.cuStreamIsCapturing((bq__CUstream)stream, &capturing) || capturing) return r->rule;
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  double us[BQ__TUNE_MAX];
  const int timed = r->bytes[0] + r->bytes[1] <= BQ__TUNE_MAX_SCRATCH &&
                    !bq__drv.cuStreamSynchronize((bq__CUstream)stream) && bq__tune_time(p, a, r, us) == 0;
  bq__drv.cuThreadExchangeStreamCaptureMode(&mode);
  if (timed) {
    int best = r->rule;
    for (int c = 0; c < r->n; c++)
      if (us[c] < us[best]) best = c;
    choice = us[best] < 0.98 * us[r->rule] ? best : r->rule;
    __atomic_add_fetch(&bq__tune_count, 1, __ATOMIC_RELAXED);
    if (dir) bq__tune_write(dir, key, hash, choice, r->n, us);
  }
  bq__tune_remember(key, hash, choice);
  return choice;
}

/* The candidate a run of p on a takes for decision r: the tuned one (tuned now, on first
   use, where it may be), else the rule's */
BQ__FN int bq__tune_choice(const bq_plan *p, const bq_args *a, void *stream, const bq__tune_req *r) {
  if (bq__tune_forced >= 0) return bq__tune_forced < r->n ? bq__tune_forced : r->rule;
  if (bq__dry.plan || r->n < 2 || r->n > BQ__TUNE_MAX || !bq__tune_enabled()) return r->rule;
  bq__str key;
  memset(&key, 0, sizeof key);
  bq__tune_key(p, r, &key);
  if (key.oom) return r->rule;
  const uint64_t hash = bq__fnv1a(key.p, key.n, BQ__FNV_SEED);
  int choice = r->rule;
  char dirbuf[BQ__PATH_MAX];
  if (!bq__tune_find(key.p, hash, &choice)) {
    const char *dir = bq__cache_dir_now(dirbuf, sizeof dirbuf);
    if (dir && bq__tune_read(dir, key.p, hash, r->n, &choice)) bq__tune_remember(key.p, hash, choice);
    else choice = bq__tune_now(p, a, stream, r, key.p, hash, dir);
  }
  BQ_FREE(key.p);
  return choice;
}

/* ---- launch rules ------------------------------------------------------------------------
   The dispatch tables say what a kernel needs (registers a thread, waves of an SM's warps, a
   share of an SM); these rules turn that into counts for the device in use, read once per
   device: its SMs and the threads an SM holds. Launch bounds are compiled before any device
   is known, from the register file every arch from sm_80 on has. */
#define BQ__REGS_PER_SM 65536 /* 32-bit registers an SM, sm_80 to sm_120 */
/* The dynamic shared memory a block may opt into on the current context's device, less a
   margin for the kernels' static reductions (0 where the driver does not say) */
BQ__FN int64_t bq__smem_optin(void) {
  int optin = 0;
  bq__CUdevice cd = 0;
  bq__CUresult r = bq__drv.cuCtxGetDevice(&cd);
  if (!r) r = bq__drv.cuDeviceGetAttribute(&optin, BQ__CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN, cd);
  return !r && optin > 1024 ? optin - 1024 : 0;
}
/* The shared memory an SM of compute capability arch (10 * major + minor) gives its blocks,
   and what the driver reserves of it a block: a module is compiled for an arch, so its
   launch bounds follow the arch, every device of which has the same. */
#define BQ__SMEM_BLOCK_RESERVED 1024
BQ__FN int64_t bq__arch_smem_sm(int arch) {
  if (arch == 80 || arch == 87) return 164 * 1024;
  if (arch >= 90 && arch < 110) return 228 * 1024;
  return 100 * 1024; /* 8.6, 8.9, 12.x */
}
typedef struct bq__limits { int64_t sms, threads_sm; } bq__limits;
BQ__FN bq__limits bq__limits_of(const bq_plan *p) {
  bq__limits l = {p->num_sms > 0 ? p->num_sms : 1, p->threads_sm >= 256 ? p->threads_sm : 2048};
  return l;
}
/* the least blocks of `threads` an SM must hold for ptxas to give each thread at most `regs`
   registers: the launch bounds' second argument (0: none named) */
BQ__FN int bq__lb_blocks(int regs, int threads) { return regs > 0 ? BQ__REGS_PER_SM / (threads * regs) : 0; }
/* the warps of `waves` SM-fulls of resident warps, on one SM */
BQ__FN int64_t bq__wave_warps(const bq__limits *l, int waves) { return (int64_t)waves * (l->threads_sm / 32); }
/* the bytes of `waves` waves of 16-byte accesses, one access for every thread the SMs hold */
BQ__FN int64_t bq__wave_bytes(const bq__limits *l, int waves) { return (int64_t)waves * l->sms * l->threads_sm * 16; }
