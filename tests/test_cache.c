/* test_cache.c - the kernel cache and the run-time loader, on a machine with no GPU.
   Criterion runs every test in its own process, so each starts with empty in-process
   state (no driver or NVRTC loaded, no counters). NVRTC must be present: CI installs it,
   and a compile test that cannot compile fails rather than skips. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <sys/wait.h>

#define BQ_TEST_DIR_TEMPLATE "/tmp/bq_cache_test_XXXXXX"
#include "host_util.h"

/* quantize backward per tensor: one entry point (bq_affine), so one module a warm */
static bq_desc desc_(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZE;
  d.direction = BQ_BACKWARD;
  d.float_type = BQ_F32;
  return d;
}

static void warm_ok(const bq_desc *d) {
  bq_status st = bq_cache_warm(d, 90);
  cr_assert_eq(st, BQ_SUCCESS, "bq_cache_warm: %s: %s", bq_status_name(st), bq_last_error());
}

/* the path of the one kernel entry (.bqk) in dir_, or fails */
static void entry_path(char *out, size_t n) {
  DIR *d = opendir(dir_);
  cr_assert_not_null(d);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len > 4 && !strcmp(e->d_name + len - 4, ".bqk")) {
      snprintf(out, n, "%s/%s", dir_, e->d_name);
      found++;
    }
  }
  closedir(d);
  cr_assert_eq(found, 1, "expected one cache entry in %s, found %d", dir_, found);
}

TestSuite(cache, .timeout = 300);

Test(cache, round_trip_then_disk_hit) {
  fresh_dir();
  bq_desc d = desc_();
  warm_ok(&d);
  bq_cache_stats s = stats_();
  cr_assert_eq(s.misses, 1);
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.disk_hits, 0);
  char path[512];
  entry_path(path, sizeof path);
  cr_assert(strstr(path, "quantize.bwd.per_tensor.f32.s8") && strstr(path, "@bq_affine-"), "file named after the module's SKU: %s", path);
  warm_ok(&d);
  s = stats_();
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 1, "a disk hit must not compile");
  cr_assert_eq(count_files(dir_, ".tmp."), 0, "no temporary file left behind");
}

Test(cache, golden_file_pins_the_format) {
  /* The on-disk layout for format BQ__CACHE_FORMAT is pinned by a committed file. If the
     layout changes, bump BQ__CACHE_FORMAT and commit the new golden file. */
  char golden[512];
  const char *src = getenv("BQ_TEST_SOURCE_DIR");
  snprintf(golden, sizeof golden, "%s/tests/golden/cache_format_%u.bqk", src ? src : ".",
           BQ__CACHE_FORMAT);
  const char *key = "golden key: format, library, sku, target, nvrtc, options, source";
  const char *payload = "golden payload: stands for a cubin";
  unsigned char h[BQ__CACHE_HEADER];
  bq__cache_header(h, strlen(key), payload, strlen(payload));
  size_t n = sizeof h + strlen(key) + strlen(payload);
  unsigned char *expect = malloc(n);
  memcpy(expect, h, sizeof h);
  memcpy(expect + sizeof h, key, strlen(key));
  memcpy(expect + sizeof h + strlen(key), payload, strlen(payload));
  if (getenv("BQ_WRITE_GOLDEN")) write_all(golden, expect, n);
  size_t got_n = 0;
  unsigned char *got = read_all(golden, &got_n);
  cr_assert_eq(got_n, n, "golden file %s has %zu bytes, the format writes %zu: bump BQ__CACHE_FORMAT",
               golden, got_n, n);
  cr_assert_eq(memcmp(got, expect, n), 0, "cache format changed without a version bump (%s)", golden);
  size_t plen = 0;
  void *back = bq__disk_read(golden, key, strlen(key), &plen);
  cr_assert_not_null(back, "the reader rejects the golden file");
  cr_assert_eq(plen, strlen(payload));
  cr_assert_eq(memcmp(back, payload, plen), 0);
  free(back);
  free(got);
  free(expect);
}

/* Corrupt the entry with `how`, then check: the next warm counts it corrupt, recompiles,
   succeeds and rewrites a valid entry with the same cubin; the one after is a disk hit. */
static void corrupt_and_recover(void (*how)(const char *path, unsigned char *buf, size_t n)) {
  fresh_dir();
  bq_desc d = desc_();
  warm_ok(&d);
  char path[512];
  entry_path(path, sizeof path);
  size_t n = 0;
  unsigned char *orig = read_all(path, &n);
  unsigned char *buf = malloc(n);
  memcpy(buf, orig, n);
  how(path, buf, n);
  bq_cache_stats before = stats_();
  warm_ok(&d);
  bq_cache_stats after = stats_();
  cr_assert_eq(after.corrupt, before.corrupt + 1, "corruption not detected");
  cr_assert_eq(after.compiles, before.compiles + 1, "corrupt entry not recompiled");
  cr_assert_eq(after.disk_hits, before.disk_hits, "corrupt entry served as a hit");
  size_t n2 = 0;
  unsigned char *again = read_all(path, &n2);
  cr_assert_eq(n2, n, "rewritten entry differs in size");
  cr_assert_eq(memcmp(again, orig, n), 0, "rewritten entry differs from the first compile");
  warm_ok(&d);
  cr_assert_eq(stats_().disk_hits, after.disk_hits + 1, "rewritten entry is not a hit");
  free(orig);
  free(buf);
  free(again);
}

static void truncate_half(const char *p, unsigned char *b, size_t n) { write_all(p, b, n / 2); }
static void truncate_in_header(const char *p, unsigned char *b, size_t n) { (void)n; write_all(p, b, 10); }
static void flip_payload_byte(const char *p, unsigned char *b, size_t n) {
  b[n - 100] ^= 0x01;
  write_all(p, b, n);
}
static void zero_header(const char *p, unsigned char *b, size_t n) {
  memset(b, 0, BQ__CACHE_HEADER);
  write_all(p, b, n);
}
static void absurd_length(const char *p, unsigned char *b, size_t n) {
  bq__put_u64(b + 16, (uint64_t)1 << 60);
  write_all(p, b, n);
}
static void wrong_key(const char *p, unsigned char *b, size_t n) {
  b[BQ__CACHE_HEADER + 40] ^= 0x20; /* same length, different key */
  write_all(p, b, n);
}
static void garbage(const char *p, unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 2654435761u >> 13);
  write_all(p, b, n);
}
static void empty_file(const char *p, unsigned char *b, size_t n) { (void)n; write_all(p, b, 0); }
static void appended_bytes(const char *p, unsigned char *b, size_t n) {
  FILE *f = fopen(p, "wb");
  fwrite(b, 1, n, f);
  fputs("trailing", f);
  fclose(f);
}
static void other_version(const char *p, unsigned char *b, size_t n) {
  bq__put_u32(b + 8, BQ__CACHE_FORMAT + 1);
  write_all(p, b, n);
}

Test(cache, truncated_file) { corrupt_and_recover(truncate_half); }
Test(cache, truncated_header) { corrupt_and_recover(truncate_in_header); }
Test(cache, flipped_payload_byte) { corrupt_and_recover(flip_payload_byte); }
Test(cache, zeroed_header) { corrupt_and_recover(zero_header); }
Test(cache, absurd_length_field) { corrupt_and_recover(absurd_length); }
Test(cache, wrong_key) { corrupt_and_recover(wrong_key); }
Test(cache, garbage_file) { corrupt_and_recover(garbage); }
Test(cache, empty_file) { corrupt_and_recover(empty_file); }
Test(cache, trailing_bytes) { corrupt_and_recover(appended_bytes); }
Test(cache, other_format_version) { corrupt_and_recover(other_version); }

Test(cache, corrupt_entries_warn_once) {
  bq_set_warning_handler(count_warning, NULL);
  corrupt_and_recover(flip_payload_byte);
  cr_assert_eq(warnings_, 1);
  cr_assert(strstr(warning_[0], "corrupt"), "warning: %s", warning_[0]);
  corrupt_and_recover(garbage);
  cr_assert_eq(warnings_, 1, "a second corrupt entry warned again");
}

Test(cache, unwritable_directory_is_memory_only_with_one_warning) {
  fresh_dir();
  char blocker[300], sub[400];
  snprintf(blocker, sizeof blocker, "%s/a_file", dir_);
  write_all(blocker, "x", 1);
  snprintf(sub, sizeof sub, "%s/cache", blocker); /* a directory under a regular file */
  setenv("BARACUDA_QUANT_CACHE_DIR", sub, 1);
  bq_set_warning_handler(count_warning, NULL);
  bq_desc d = desc_();
  warm_ok(&d);
  d.op = BQ_DEQUANTIZE;
  warm_ok(&d);
  bq_cache_stats s = stats_();
  cr_assert_eq(s.write_failures, 2);
  cr_assert_eq(s.compiles, 2);
  cr_assert_eq(warnings_, 1, "expected exactly one warning, got %d", warnings_);
  /* the cause named is the real one: a file where a parent directory should be */
  cr_assert(strstr(warning_[0], "cannot be created") && strstr(warning_[0], strerror(ENOTDIR)) &&
            strstr(warning_[0], sub), "%s", warning_[0]);
}

Test(cache, disabled_cache_writes_nothing) {
  fresh_dir();
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  cr_assert_null(bq_cache_directory());
  bq_desc d = desc_();
  warm_ok(&d);
  warm_ok(&d);
  cr_assert_eq(stats_().compiles, 2);
  cr_assert_eq(count_files(dir_, ".bqk"), 0);
  cr_assert_eq(count_files(dir_, ".id"), 0);
}

Test(cache, default_directory) {
  unsetenv("BARACUDA_QUANT_CACHE_DIR");
  unsetenv("BARACUDA_QUANT_DISABLE_CACHE");
  setenv("XDG_CACHE_HOME", "/tmp/bq_xdg", 1);
  cr_assert_str_eq(bq_cache_directory(), "/tmp/bq_xdg/baracuda_quant");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/tmp/bq_home", 1);
  cr_assert_str_eq(bq_cache_directory(), "/tmp/bq_home/.cache/baracuda_quant");
  setenv("BARACUDA_QUANT_CACHE_DIR", "/tmp/elsewhere", 1);
  cr_assert_str_eq(bq_cache_directory(), "/tmp/elsewhere");
  /* the default needs no set-up: the directory is created on first use */
  char home[64];
  snprintf(home, sizeof home, "/tmp/bq_home_XXXXXX");
  cr_assert_not_null(mkdtemp(home));
  made_dir(home);
  unsetenv("BARACUDA_QUANT_CACHE_DIR");
  setenv("HOME", home, 1);
  bq_desc d = desc_();
  warm_ok(&d);
  snprintf(dir_, sizeof dir_, "%s/.cache/baracuda_quant", home);
  cr_assert_eq(count_files(dir_, ".bqk"), 1);
}

Test(cache, key_covers_everything_that_changes_the_bytes) {
  fresh_dir();
  bq__target t90 = {90, 0, 0, 0}, t80 = {80, 0, 0, 0}, p90 = {90, 1, 0, 0};
  bq_desc d = desc_();
  bq__kernel_src a, b, c;
  cr_assert_eq(bq__kernel_for(&d, &t90, &a), BQ_SUCCESS);
  cr_assert_eq(bq__kernel_for(&d, &t80, &b), BQ_SUCCESS);
  cr_assert_eq(bq__kernel_for(&d, &p90, &c), BQ_SUCCESS);
  bq__str ka, kb, kc;
  memset(&ka, 0, sizeof ka);
  memset(&kb, 0, sizeof kb);
  memset(&kc, 0, sizeof kc);
  cr_assert_eq(bq__full_key(&a, &ka), BQ_SUCCESS);
  cr_assert_eq(bq__full_key(&b, &kb), BQ_SUCCESS);
  cr_assert_eq(bq__full_key(&c, &kc), BQ_SUCCESS);
  cr_assert(strstr(ka.p, a.source.p), "the key holds the whole specialized source");
  cr_assert(strstr(ka.p, "nvrtc 1"), "the key names the NVRTC version: %.300s", ka.p);
  cr_assert(strstr(ka.p, "--fmad=false"), "the key holds the options");
  cr_assert(strstr(ka.p, "sm_90 cubin") && strstr(kb.p, "sm_80 cubin") && strstr(kc.p, "compute_90 ptx"));
  char fmt[64];
  snprintf(fmt, sizeof fmt, "cache format %u", BQ__CACHE_FORMAT);
  cr_assert(strstr(ka.p, fmt));
  free(ka.p), free(kb.p), free(kc.p), free(a.source.p), free(b.source.p), free(c.source.p);
}

Test(cache, nvrtc_identity_memo_is_revalidated) {
  fresh_dir();
  bq_desc d = desc_();
  warm_ok(&d); /* writes the memo */
  cr_assert_eq(count_files(dir_, "nvrtc-"), 1);
  char memo[512];
  DIR *dd = opendir(dir_);
  struct dirent *e;
  while ((e = readdir(dd)))
    if (!strncmp(e->d_name, "nvrtc-", 6)) snprintf(memo, sizeof memo, "%s/%s", dir_, e->d_name);
  closedir(dd);
  bq__nvrtc_id id;
  cr_assert_eq(bq__nvrtc_identity(&id), BQ_SUCCESS);
  cr_assert(strstr(id.identity, "libnvrtc"), "%s", id.identity);
  /* a memo whose library no longer matches (size changed) is not trusted */
  write_all(memo, "identity nvrtc 13.0 file /nonexistent/libnvrtc.so size 1 mtime 1\narchs 90\n", 73);
  cr_assert_eq(bq__nvrtc_id_fresh("nvrtc 13.0 file /nonexistent/libnvrtc.so size 1 mtime 1"), 0);
  cr_assert_eq(bq__nvrtc_id_fresh(id.identity), 1);
}

Test(cache, two_processes_race_on_a_cold_cache) {
  fresh_dir();
  bq_desc d = desc_();
  d.op = BQ_FAKE_QUANTIZE;
  enum { N = 4 };
  pid_t kids[N];
  for (int i = 0; i < N; i++) {
    kids[i] = fork();
    cr_assert_neq(kids[i], -1);
    if (kids[i] == 0) _exit(bq_cache_warm(&d, 90) == BQ_SUCCESS ? 0 : 1);
  }
  for (int i = 0; i < N; i++) {
    int status = 0;
    waitpid(kids[i], &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d failed", i);
  }
  /* fake quantize backward per tensor: two modules, bq_affine's and bq_affine_mask's */
  cr_assert_eq(count_files(dir_, ".bqk"), 2, "one entry a module, however many writers");
  cr_assert_eq(count_files(dir_, ".tmp."), 0, "no temporary file left behind");
  warm_ok(&d);
  bq_cache_stats s = stats_();
  cr_assert_eq(s.disk_hits, 2, "the raced entries are valid");
  cr_assert_eq(s.compiles, 0);
}

/* ---- targets: one choice for select, warm and bq_sku ---------------------------------- */
static int nvrtc_newest(void) {
  bq__nvrtc_id id;
  cr_assert_eq(bq__nvrtc_identity(&id), BQ_SUCCESS, "%s", bq_last_error());
  int newest = 0;
  for (int i = 0; i < id.num_archs; i++) newest = id.archs[i] > newest ? id.archs[i] : newest;
  return newest;
}
static int nvrtc_oldest(void) {
  bq__nvrtc_id id;
  cr_assert_eq(bq__nvrtc_identity(&id), BQ_SUCCESS, "%s", bq_last_error());
  int oldest = 1000;
  for (int i = 0; i < id.num_archs; i++) oldest = id.archs[i] < oldest ? id.archs[i] : oldest;
  return oldest;
}

static bq_desc linear_desc_(void) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZED_LINEAR;
  d.granularity = BQ_PER_TOKEN;
  d.float_type = BQ_F16;
  d.out_type = BQ_F16;
  d.scale_type = BQ_F32;
  return d;
}

/* the SKU line of the full key inside each entry in dir_, sorted */
static int entry_skus(char skus[][256], int cap) {
  DIR *d = opendir(dir_);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".bqk")) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir_, e->d_name);
    size_t sz = 0;
    unsigned char *buf = read_all(path, &sz);
    cr_assert(sz > BQ__CACHE_HEADER);
    const char *s = strstr((const char *)buf + BQ__CACHE_HEADER, "\nsku ");
    cr_assert_not_null(s, "%s: no sku line in its key", path);
    cr_assert(n < cap);
    size_t k = strcspn(s + 5, "\n");
    cr_assert(k < 256);
    memcpy(skus[n], s + 5, k);
    skus[n][k] = 0;
    n++;
    free(buf);
  }
  closedir(d);
  qsort(skus, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
  return n;
}

/* the module SKUs ("<SKU>@<entry point>") of desc on sm, as select names them, appended to
   out; returns how many */
static int module_skus(const bq_desc *desc, int sm, char out[][256]) {
  bq_desc d;
  char name[96];
  cr_assert_eq(bq__normalize(desc, &d, name, sizeof name), BQ_SUCCESS);
  bq__target t;
  cr_assert_eq(bq__target_for(&d, sm, &t), BQ_SUCCESS, "%s", bq_last_error());
  const char *names[BQ__MAX_KERNELS];
  bq__kernels_of(&d, &t, names);
  int n = 0;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) {
    if (!names[e]) continue;
    bq__kernel_src k;
    memset(&k, 0, sizeof k);
    t.module = e + 1;
    bq__sku_of(&d, &t, &k);
    cr_assert(strstr(k.sku, "@"), "%s", k.sku);
    memcpy(out[n++], k.sku, sizeof k.sku);
  }
  return n;
}

/* the SKU select would load: its target chosen by bq__target_for, as bq_plan_select does */
static void select_sku(const bq_desc *desc, int sm, char *out) {
  bq_desc d;
  char name[96];
  cr_assert_eq(bq__normalize(desc, &d, name, sizeof name), BQ_SUCCESS);
  bq__target t;
  cr_assert_eq(bq__target_for(&d, sm, &t), BQ_SUCCESS, "%s", bq_last_error());
  bq__kernel_src k;
  memset(&k, 0, sizeof k);
  bq__sku_of(&d, &t, &k);
  memcpy(out, k.sku, sizeof k.sku);
}

Test(target, own_arch_gets_a_cubin) {
  bq_desc d = desc_();
  bq__target t;
  cr_assert_eq(bq__target_for(&d, 90, &t), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(!t.ptx && t.arch == 90 && !t.arch_a);
  d = linear_desc_(); /* the GEMM: sm_90a, the warpgroup-MMA tiles */
  cr_assert_eq(bq__target_for(&d, 90, &t), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(!t.ptx && t.arch == 90 && t.arch_a);
  cr_assert_eq(bq__target_for(&d, 80, &t), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(!t.ptx && t.arch == 80 && !t.arch_a);
  setenv("BARACUDA_QUANT_WGMMA", "0", 1);
  cr_assert_eq(bq__target_for(&d, 90, &t), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(!t.ptx && t.arch == 90 && !t.arch_a);
}

Test(target, newer_device_than_nvrtc_gets_ptx_for_the_newest_arch) {
  bq_desc d = desc_();
  bq__target t;
  cr_assert_eq(bq__target_for(&d, 990, &t), BQ_SUCCESS, "%s", bq_last_error());
  int newest = nvrtc_newest();
  cr_assert(t.ptx && t.arch == newest, "ptx %d arch %d newest %d", t.ptx, t.arch, newest);
}

Test(target, force_ptx_environment_variable) {
  setenv("BARACUDA_QUANT_FORCE_PTX", "1", 1);
  bq_desc d = desc_();
  bq__target t;
  cr_assert_eq(bq__target_for(&d, 90, &t), BQ_SUCCESS);
  cr_assert(t.ptx && t.arch == 90 && !t.arch_a);
  bq_desc l = linear_desc_();
  cr_assert_eq(bq__target_for(&l, 90, &t), BQ_SUCCESS);
  cr_assert(t.ptx && t.arch == 90 && !t.arch_a, "PTX is never arch-specific");
  /* and the PTX compiles */
  fresh_dir();
  bq__kernel_src k;
  cr_assert_eq(bq__kernel_for(&d, &t, &k), BQ_SUCCESS);
  void *bin = NULL;
  size_t len = 0;
  int from_disk = 0;
  cr_assert_eq(bq__obtain_binary(&k, 1, &bin, &len, &from_disk), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr((const char *)bin, ".target sm_90"), "PTX for compute_90");
  cr_assert_eq(((const char *)bin)[len - 1], 0, "PTX is stored with its NUL");
  free(bin);
  free(k.source.p);
}

Test(target, device_older_than_nvrtc_supports) {
  int old = nvrtc_oldest() - 1; /* a compute capability NVRTC no longer builds for */
  if (old < 50) {
    cr_log_info("NVRTC supports sm_50: no older valid arch to try");
    return;
  }
  bq_desc d = desc_();
  bq__target t;
  char want[32], buf[256];
  snprintf(want, sizeof want, "sm (%d)", old);
  cr_assert_eq(bq__target_for(&d, old, &t), BQ_ERROR_NOT_SUPPORTED);
  cr_assert(strstr(bq_last_error(), want), "%s", bq_last_error());
  cr_assert_eq(bq_sku(&d, old, buf, sizeof buf), BQ_ERROR_NOT_SUPPORTED);
  cr_assert(strstr(bq_last_error(), "bq_sku: ") && strstr(bq_last_error(), want), "%s", bq_last_error());
  fresh_dir();
  cr_assert_eq(bq_cache_warm(&d, old), BQ_ERROR_NOT_SUPPORTED);
  cr_assert(strstr(bq_last_error(), "bq_cache_warm: ") && strstr(bq_last_error(), want), "%s", bq_last_error());
  cr_assert_eq(stats_().compiles, 0);
  cr_assert_eq(count_files(dir_, ".bqk"), 0);
}

/* sm values that are no compute capability (BQ_ERROR_INVALID_ARGUMENT), and real ones older
   than sm_80 (BQ_ERROR_NOT_SUPPORTED, naming the oldest supported): rejected by bq_sku and
   bq_cache_warm, naming sm and its value, before NVRTC is even loaded */
Test(target, invalid_sm_rejected_without_nvrtc) {
  fresh_dir();
  static const int bad[] = {-5, -1, 0, 9, 1000, 100000, 10, 35, 49, 75, 79};
  bq_desc descs[2] = {desc_(), linear_desc_()};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    for (int j = 0; j < 2; j++) {
      const int old = bad[i] >= 10 && bad[i] < 80;
      const bq_status want_st = old ? BQ_ERROR_NOT_SUPPORTED : BQ_ERROR_INVALID_ARGUMENT;
      char want[32], buf[256] = "untouched";
      snprintf(want, sizeof want, "sm (%d)", bad[i]);
      cr_assert_eq(bq_sku(&descs[j], bad[i], buf, sizeof buf), want_st, "bq_sku sm %d", bad[i]);
      cr_assert(strstr(bq_last_error(), "bq_sku: ") && strstr(bq_last_error(), want), "%s", bq_last_error());
      cr_assert(!old || strstr(bq_last_error(), "older than 8.0, the oldest this library supports"), "%s",
                bq_last_error());
      cr_assert_str_eq(buf, "untouched");
      cr_assert_eq(bq_cache_warm(&descs[j], bad[i]), want_st, "warm sm %d", bad[i]);
      cr_assert(strstr(bq_last_error(), "bq_cache_warm: ") && strstr(bq_last_error(), want), "%s", bq_last_error());
    }
  cr_assert_eq(bq__nv.num_archs, 0, "NVRTC was loaded");
  bq_cache_stats s = stats_();
  cr_assert_eq(s.compiles + s.misses + s.disk_hits, 0);
  cr_assert_eq(count_files(dir_, ".bqk") + count_files(dir_, "nvrtc-"), 0);
}

/* bq_sku names, and bq_cache_warm writes, what bq_plan_select loads: a QuantizedLinear
   plan on sm_90 is the sm_90a GEMM plus its activations' kernel */
Test(target, sku_warm_and_select_agree_for_linear_on_sm_90, .timeout = 300) {
  fresh_dir();
  bq_desc d = linear_desc_();
  char sku[256], sel[256], act_sku[256], act_sel[256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  select_sku(&d, 90, sel);
  cr_assert_str_eq(sku, sel);
  cr_assert_str_eq(sku, "linear_gemm.a_s8.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32+wgmma_m64n256k32.sm_90a");
  bq_desc q, qn;
  char name[96];
  bq__normalize(&d, &qn, name, sizeof name);
  bq__linear_activation_desc(&qn, &q);
  cr_assert_eq(bq_sku(&q, 90, act_sku, sizeof act_sku), BQ_SUCCESS);
  select_sku(&q, 90, act_sel);
  cr_assert_str_eq(act_sku, act_sel);
  warm_ok(&d);
  /* the GEMM's modules (sm_90a: the warpgroup-MMA tiles and the GEMVs) and the activations' */
  char got[16][256], want[16][256];
  int nw = module_skus(&d, 90, want);
  cr_assert_eq(nw, 4, "bq_gemm_wgmma and the three GEMVs");
  nw += module_skus(&q, 90, want + nw);
  qsort(want, (size_t)nw, 256, (int (*)(const void *, const void *))strcmp);
  cr_assert_eq(entry_skus(got, 16), nw, "the GEMM's and the activations' modules");
  for (int i = 0; i < nw; i++) {
    cr_assert_str_eq(got[i], want[i]);
    cr_assert(!strncmp(got[i], sku, strlen(sku)) || !strncmp(got[i], act_sku, strlen(act_sku)), "%s", got[i]);
  }
  /* and a warmed entry is what a select-time lookup reads: same file name, same key */
  bq_desc dn;
  bq__normalize(&d, &dn, name, sizeof name);
  bq__target t;
  cr_assert_eq(bq__target_for(&dn, 90, &t), BQ_SUCCESS);
  bq_cache_stats before = stats_();
  cr_assert_eq(bq__warm_one(&dn, &t, NULL), BQ_SUCCESS);
  cr_assert_eq(stats_().disk_hits, before.disk_hits + 4);
  cr_assert_eq(stats_().compiles, before.compiles);
}

/* BARACUDA_QUANT_FORCE_PTX changes bq_sku and bq_cache_warm alike */
Test(target, force_ptx_changes_sku_and_warm_together) {
  fresh_dir();
  setenv("BARACUDA_QUANT_FORCE_PTX", "1", 1);
  bq_desc d = desc_(), l = linear_desc_();
  char sku[256], lsku[256], got[2][256];
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(sku, ".compute_90") && sku[strlen(sku) - 1] == '0', "%s", sku);
  cr_assert_eq(bq_sku(&l, 90, lsku, sizeof lsku), BQ_SUCCESS);
  cr_assert_str_eq(lsku, "linear_gemm.a_s8.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32.compute_90");
  warm_ok(&d); /* (desc_ has one module, bq_affine's) */
  cr_assert_eq(entry_skus(got, 2), 1);
  strcat(sku, "@bq_affine");
  cr_assert_str_eq(got[0], sku);
  unsetenv("BARACUDA_QUANT_FORCE_PTX");
  cr_assert_eq(bq_sku(&d, 90, sku, sizeof sku), BQ_SUCCESS);
  cr_assert(strstr(sku, ".sm_90") && !strstr(sku, "compute"), "%s", sku);
  warm_ok(&d);
  cr_assert_eq(entry_skus(got, 2), 2, "the cubin is another entry");
  strcat(sku, "@bq_affine");
  cr_assert(!strcmp(got[0], sku) || !strcmp(got[1], sku));
}

/* a device newer than NVRTC's newest arch: bq_sku and bq_cache_warm both take the PTX
   select would load */
Test(target, newer_than_nvrtc_warms_the_ptx) {
  fresh_dir();
  int newest = nvrtc_newest(), sm = (newest / 10 + 1) * 10; /* the next major */
  bq_desc d = desc_();
  char sku[256], want[32], got[1][256];
  snprintf(want, sizeof want, ".compute_%d", newest);
  cr_assert_eq(bq_sku(&d, sm, sku, sizeof sku), BQ_SUCCESS, "%s", bq_last_error());
  size_t n = strlen(sku), w = strlen(want);
  cr_assert(n > w && !strcmp(sku + n - w, want), "sm %d: %s, want ...%s", sm, sku, want);
  cr_assert_eq(bq_cache_warm(&d, sm), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(entry_skus(got, 1), 1);
  strcat(sku, "@bq_affine"); /* (desc_'s one module) */
  cr_assert_str_eq(got[0], sku);
  cr_log_info("sm_%d (NVRTC's newest sm_%d): %s", sm, newest, sku);
}

/* ---- the loader's failure modes --------------------------------------------------------- */
static void expect_select(bq_status want, const char *needle) {
  bq_desc d = desc_();
  bq_plan *p = (bq_plan *)0x1;
  bq_status st = bq_plan_select(&d, &p);
  cr_assert_eq(st, want, "got %s: %s", bq_status_name(st), bq_last_error());
  cr_assert_null(p);
  cr_assert(strstr(bq_last_error(), needle), "message \"%s\" lacks \"%s\"", bq_last_error(), needle);
  void *mem = (void *)0x1;
  cr_assert_eq(bq_malloc(&mem, 16), want);
}

Test(loader, no_driver) {
  setenv("BARACUDA_QUANT_DRIVER", "/nonexistent/libcuda.so.1", 1);
  expect_select(BQ_ERROR_NO_DRIVER, "/nonexistent/libcuda.so.1");
}
Test(loader, driver_too_old) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "old", 1);
  expect_select(BQ_ERROR_DRIVER_TOO_OLD, "CUDA 11.8");
}
Test(loader, driver_without_get_proc_address) {
  setenv("BARACUDA_QUANT_DRIVER", "libm.so.6", 1); /* a library, but no driver */
  expect_select(BQ_ERROR_DRIVER_TOO_OLD, "cuGetProcAddress_v2");
}
Test(loader, entry_point_missing) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "missing", 1);
  expect_select(BQ_ERROR_DRIVER_TOO_OLD, "cuModuleLoadData");
}
Test(loader, entry_point_null) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "nullptr", 1);
  expect_select(BQ_ERROR_DRIVER_TOO_OLD, "cuLaunchKernel");
}
Test(loader, no_device) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_MODE", "nodevice", 1);
  expect_select(BQ_ERROR_NO_DEVICE, "cuInit");
}
/* a real GPU older than the kernels need: select says so by name, before NVRTC is touched */
Test(loader, pre_ampere_device_not_supported) {
  setenv("BARACUDA_QUANT_DRIVER", fake_driver(), 1);
  setenv("FAKE_CUDA_SM", "35", 1);
  setenv("BARACUDA_QUANT_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
  bq_desc d = desc_();
  bq_plan *p = (bq_plan *)0x1;
  bq_status st = bq_plan_select(&d, &p);
  cr_assert_eq(st, BQ_ERROR_NOT_SUPPORTED, "got %s: %s", bq_status_name(st), bq_last_error());
  cr_assert_null(p);
  cr_assert(strstr(bq_last_error(), "sm (35): compute capability 3.5 is older than 8.0"), "%s", bq_last_error());
}
Test(loader, no_nvrtc) {
  setenv("BARACUDA_QUANT_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  bq_desc d = desc_();
  cr_assert_eq(bq_cache_warm(&d, 90), BQ_ERROR_NO_NVRTC);
  cr_assert(strstr(bq_last_error(), "/nonexistent/libnvrtc.so.13"), "%s", bq_last_error());
  cr_assert(strstr(bq_last_error(), "BARACUDA_QUANT_NVRTC"), "%s", bq_last_error());
}
Test(loader, nvrtc_from_environment_path) {
  setenv("BARACUDA_QUANT_NVRTC", "libnvrtc.so.13", 1);
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  bq_desc d = desc_();
  cr_assert_eq(bq_cache_warm(&d, 90), BQ_SUCCESS, "%s", bq_last_error());
}

/* BARACUDA_QUANT_STATS=1: one line of counters on stderr at exit, from the process that
   warmed or selected (each forked child prints its own) */
static void stats_line_of_child(int on, char *line, size_t n, pid_t *pid) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  *pid = fork();
  cr_assert_neq(*pid, -1);
  if (*pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    if (on) setenv("BARACUDA_QUANT_STATS", "1", 1);
    else unsetenv("BARACUDA_QUANT_STATS");
    bq_desc d = desc_();
    exit(bq_cache_warm(&d, 90) == BQ_SUCCESS && bq_cache_warm(&d, 90) == BQ_SUCCESS ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < n && (r = read(fds[0], line + got, n - 1 - got)) > 0) got += (size_t)r;
  line[got] = 0;
  close(fds[0]);
  /* a sanitizer runtime may add its own lines ("==pid==...") at exit: not the library's */
  char *w = line;
  for (char *p = line; *p;) {
    char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
    if (strncmp(p, "==", 2) != 0) {
      memmove(w, p, len);
      w += len;
    }
    p += len;
  }
  *w = 0;
  int status = 0;
  waitpid(*pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(cache, stats_printed_at_exit) {
  fresh_dir();
  char line[1024], want[256];
  pid_t pid;
  stats_line_of_child(1, line, sizeof line, &pid);
  snprintf(want, sizeof want,
           "baracuda_quant: cache: 0 memory hits, 1 disk hits, 1 misses, 1 compiles, 0 corrupt, 0 write failures "
           "(pid %ld)\n", (long)pid);
  cr_assert_str_eq(line, want);
  stats_line_of_child(0, line, sizeof line, &pid);
  cr_assert_str_eq(line, "", "printed without BARACUDA_QUANT_STATS: %s", line);
}

/* bq_cache_warm_many: every module of every descriptor, on threads; the first failure in the
   list is reported by its index, and the others are warmed all the same */
Test(cache, warm_many_on_threads) {
  fresh_dir();
  bq_desc d[3] = {desc_(), desc_(), desc_()};
  d[1].op = BQ_DYNAMIC_QUANTIZE; /* per token: bq_dynamic and bq_dynamic_long */
  d[1].direction = BQ_FORWARD;
  d[1].granularity = BQ_PER_TOKEN;
  d[2].op = BQ_FAKE_QUANTIZE; /* backward per tensor: bq_affine and bq_affine_mask */
  cr_assert_eq(bq_cache_warm_many(d, 3, 90, 2), BQ_SUCCESS, "%s", bq_last_error());
  bq_cache_stats s = stats_();
  cr_assert_eq(s.compiles, 5, "%llu compiles", (unsigned long long)s.compiles);
  cr_assert_eq(count_files(dir_, ".bqk"), 5);
  cr_assert_eq(bq_cache_warm_many(d, 3, 90, 0), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_eq(stats_().compiles, 5, "the second warm compiled");
  cr_assert_eq(stats_().disk_hits, 5);
  fresh_dir();
  d[1].op = (bq_op)99;
  cr_assert_eq(bq_cache_warm_many(d, 3, 90, 3), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert(strstr(bq_last_error(), "descs[1]"), "%s", bq_last_error());
  cr_assert_eq(count_files(dir_, ".bqk"), 3, "the valid descriptors were not warmed");
  cr_assert_eq(bq_cache_warm_many(NULL, 2, 90, 1), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(bq_cache_warm_many(d, 1, 90, -1), BQ_ERROR_INVALID_ARGUMENT);
  cr_assert_eq(bq_cache_warm_many(d, 0, 90, 1), BQ_SUCCESS);
}

/* ==== the tune's entries (tune-<hash>.txt beside the kernels) ================================== */

/* One entry written and read back, then each way a file there can be wrong: every one is
   ignored with one warning (no choice taken from it), and a rewrite makes it good again. */
#define TUNE_KEY "NVIDIA_H200 sms 132 mem 3201000 driver 13000 sku quantize.fwd.per_token.bf16.s8 tune affine_lean class 26"
static int tune_read_(int n_cand, int *choice) {
  return bq__tune_read(dir_, TUNE_KEY, bq__fnv1a(TUNE_KEY, strlen(TUNE_KEY), BQ__FNV_SEED), n_cand, choice);
}
static void tune_path_(char *path, size_t n) {
  bq__tune_path(dir_, bq__fnv1a(TUNE_KEY, strlen(TUNE_KEY), BQ__FNV_SEED), path, n);
}
/* the entry's text, NUL-terminated; its length */
static size_t tune_text_(char *text, size_t cap) {
  char path[1024];
  tune_path_(path, sizeof path);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  size_t n = fread(text, 1, cap - 1, f);
  fclose(f);
  text[n] = 0;
  return n;
}
static void tune_write_(int choice) {
  const double us[2] = {101.25, 96.5};
  bq__tune_write(dir_, TUNE_KEY, bq__fnv1a(TUNE_KEY, strlen(TUNE_KEY), BQ__FNV_SEED), choice, 2, us);
}

Test(cache, tune_entry_round_trip) {
  fresh_dir();
  count_warnings();
  int choice = -1;
  cr_assert_not(tune_read_(2, &choice), "an entry where none was written");
  expect_warnings(0, NULL);
  tune_write_(1);
  cr_assert(tune_read_(2, &choice));
  cr_assert_eq(choice, 1);
  tune_write_(0); /* a rewrite replaces it */
  cr_assert(tune_read_(2, &choice));
  cr_assert_eq(choice, 0);
  char text[2048];
  tune_text_(text, sizeof text);
  char want[1024];
  snprintf(want, sizeof want, "baracuda_quant tune 1\nkey %s\nchoice 0 of 2\nus 101.25 96.50\nchecksum ", TUNE_KEY);
  cr_assert(!strncmp(text, want, strlen(want)), "the entry reads\n%s", text);
  cr_assert_not(tune_read_(3, &choice), "an entry for two candidates taken for three");
  expect_warnings(1, "choice out of range");
}

/* each damage: the text of a good entry changed by fn, then read */
static void tune_damaged(void (*fn)(char *text, size_t *n), const char *why) {
  fresh_dir();
  count_warnings();
  tune_write_(1);
  char path[1024], text[4096];
  size_t n = tune_text_(text, sizeof text);
  fn(text, &n);
  tune_path_(path, sizeof path);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, n, f), n);
  fclose(f);
  int choice = -1;
  cr_assert_not(tune_read_(2, &choice), "a damaged entry was taken (%s)", why);
  cr_assert_eq(choice, -1);
  expect_warnings(1, why);
  tune_write_(1);
  cr_assert(tune_read_(2, &choice), "the rewritten entry");
  cr_assert_eq(choice, 1);
}
static void t_flip(char *t, size_t *n) { (void)n; t[40] ^= 1; }                       /* in the key */
static void t_choice(char *t, size_t *n) { (void)n; *strstr(t, "choice 1") = 'C'; }     /* its line */
static void t_truncate(char *t, size_t *n) { *n /= 2; t[*n] = 0; }
static void t_empty(char *t, size_t *n) { *n = 0; t[0] = 0; }
static void t_nul(char *t, size_t *n) { (void)n; t[30] = 0; }
static void t_magic(char *t, size_t *n) { (void)n; t[0] = 'B'; }
static void t_trailing(char *t, size_t *n) { strcat(t, "more\n"); *n += 5; }
static void t_other_key(char *t, size_t *n) { /* a valid entry for another class */
  (void)n;
  const char *k = TUNE_KEY " 7";
  char s[2048];
  int len = snprintf(s, sizeof s, "baracuda_quant tune 1\nkey %s\nchoice 1 of 2\nus 1 2\n", k);
  snprintf(t, 4096, "%schecksum %016llx\n", s, (unsigned long long)bq__fnv1a(s, (size_t)len, BQ__FNV_SEED));
  *n = strlen(t);
}
static void t_bad_times(char *t, size_t *n) { /* "us" holding a letter, checksum made good */
  char *u = strstr(t, "\nus ") + 4;
  *u = 'x';
  char *c = strstr(t, "\nchecksum ") + 1;
  snprintf(c, 40, "checksum %016llx\n", (unsigned long long)bq__fnv1a(t, (size_t)(c - t), BQ__FNV_SEED));
  *n = strlen(t);
}
Test(cache, tune_entry_flipped_key_byte) { tune_damaged(t_flip, "checksum mismatch"); }
Test(cache, tune_entry_damaged_choice) { tune_damaged(t_choice, "checksum mismatch"); }
Test(cache, tune_entry_truncated) { tune_damaged(t_truncate, "checksum"); }
Test(cache, tune_entry_empty) { tune_damaged(t_empty, "bad magic"); }
Test(cache, tune_entry_nul_byte) { tune_damaged(t_nul, "NUL byte"); }
Test(cache, tune_entry_bad_magic) { tune_damaged(t_magic, "bad magic"); }
Test(cache, tune_entry_trailing_bytes) { tune_damaged(t_trailing, "checksum mismatch"); }
Test(cache, tune_entry_of_another_key) { tune_damaged(t_other_key, "another key"); }
Test(cache, tune_entry_times_not_numbers) { tune_damaged(t_bad_times, "times not numbers"); }

/* what stands at an entry's name and is not a regular file of ours is never read */
Test(cache, tune_entry_not_a_regular_file) {
  fresh_dir();
  count_warnings();
  char path[1024];
  tune_path_(path, sizeof path);
  cr_assert_eq(symlink("/etc/passwd", path), 0);
  int choice = -1;
  cr_assert_not(tune_read_(2, &choice));
  expect_warnings(1, "symbolic link");
  tune_write_(1); /* the rename replaces the link itself */
  cr_assert(tune_read_(2, &choice));
  cr_assert_eq(choice, 1);
  unlink(path);
  cr_assert_eq(mkfifo(path, 0600), 0);
  cr_assert_not(tune_read_(2, &choice)); /* (refused before anything could wait on it) */
}

/* BARACUDA_QUANT_TUNE=0 (or off): the rule's candidate, nothing timed, read or written */
Test(cache, tune_disabled_takes_the_rule) {
  fresh_dir();
  setenv("BARACUDA_QUANT_TUNE", "0", 1);
  cr_assert_not(bq__tune_enabled());
  bq_plan p;
  memset(&p, 0, sizeof p);
  bq__tune_req r = {"affine_lean", 26, 2, 0, {16, 16}, bq__affine_tune_point};
  const uint64_t before = bq__tune_count;
  cr_assert_eq(bq__tune_choice(&p, NULL, NULL, &r), 0);
  cr_assert_eq(bq__tune_count, before);
  cr_assert_eq(count_files(dir_, "tune-"), 0);
  setenv("BARACUDA_QUANT_TUNE", "off", 1);
  cr_assert_not(bq__tune_enabled());
  setenv("BARACUDA_QUANT_TUNE", "1", 1);
  cr_assert(bq__tune_enabled());
  unsetenv("BARACUDA_QUANT_TUNE");
  cr_assert(bq__tune_enabled());
}
