/* host_util.h - helpers shared by the host-side (no GPU) Criterion tests: a fresh cache
   directory, the fake driver's path, a warning counter, the cache counters, whole-file
   reads and writes, and the validation suites' workspace check. Include it after
   baracuda_quant.h and criterion.h. Everything is static and marked unused, so a test
   includes it whole and uses what it needs.

   fresh_dir() makes dir_ from BQ_TEST_DIR_TEMPLATE (a mkdtemp template); a test may define
   it, and dir_'s size BQ_TEST_DIR_SIZE, before the include. Every directory made through
   fresh_dir() or made_dir() is removed, with what is in it, when the process exits. */
#ifndef BQ_TESTS_HOST_UTIL_H
#define BQ_TESTS_HOST_UTIL_H

#include <dirent.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BQ_TEST_UNUSED __attribute__((unused))

#ifndef BQ_TEST_DIR_TEMPLATE
#define BQ_TEST_DIR_TEMPLATE "/tmp/bq_test_XXXXXX"
#endif
#ifndef BQ_TEST_DIR_SIZE
#define BQ_TEST_DIR_SIZE 256
#endif

/* ---- the cache directory ----------------------------------------------------------------- */
BQ_TEST_UNUSED static char dir_[BQ_TEST_DIR_SIZE];

/* the directories this process made, removed at exit (a test may have left one unreadable) */
BQ_TEST_UNUSED static char *made_[64];
BQ_TEST_UNUSED static int made_count_;
/* path and all below it, each directory opened up first (a test may leave one unreadable) */
BQ_TEST_UNUSED static void remove_tree_(const char *path, int depth) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode) && depth < 32) {
    chmod(path, 0700);
    DIR *d = opendir(path);
    struct dirent *e;
    char sub[4096];
    while (d && (e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
          snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
        remove_tree_(sub, depth + 1);
    if (d) closedir(d);
  }
  remove(path);
}
BQ_TEST_UNUSED static void remove_made_(void) {
  for (int i = 0; i < made_count_; i++) remove_tree_(made_[i], 0), free(made_[i]);
  made_count_ = 0;
}
/* path (a directory this test made) goes when the process exits */
BQ_TEST_UNUSED static void made_dir(const char *path) {
  if (made_count_ == 0) atexit(remove_made_);
  if (made_count_ < (int)(sizeof made_ / sizeof made_[0])) made_[made_count_++] = strdup(path);
}

/* a new empty directory in dir_, made the cache's, with the cache enabled */
BQ_TEST_UNUSED static void fresh_dir(void) {
  snprintf(dir_, sizeof dir_, "%s", BQ_TEST_DIR_TEMPLATE);
  cr_assert_not_null(mkdtemp(dir_));
  made_dir(dir_);
  setenv("BARACUDA_QUANT_CACHE_DIR", dir_, 1);
  unsetenv("BARACUDA_QUANT_DISABLE_CACHE");
}

/* how many files in dir have part in their name */
BQ_TEST_UNUSED static int count_files(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, part)) n++;
  if (d) closedir(d);
  return n;
}

/* ---- the fake driver (tests/fake_driver.c) ------------------------------------------------ */
/* $BQ_FAKE_DRIVER, else libbq_fake_driver.so beside the test's executable */
BQ_TEST_UNUSED static const char *fake_driver(void) {
  static char path[1024];
  const char *env = getenv("BQ_FAKE_DRIVER");
  if (env && *env) return env;
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert(n > 0);
  exe[n] = 0;
  snprintf(path, sizeof path, "%s/libbq_fake_driver.so", dirname(exe));
  return path;
}

/* ---- warnings (through bq_set_warning_handler), counters -------------------------------- */
BQ_TEST_UNUSED static pthread_mutex_t warn_lock_ = PTHREAD_MUTEX_INITIALIZER;
BQ_TEST_UNUSED static int warnings_;
BQ_TEST_UNUSED static char warning_[8][1024]; /* the first eight */
BQ_TEST_UNUSED static void count_warning(const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&warn_lock_);
  if (warnings_ < 8) snprintf(warning_[warnings_], sizeof warning_[0], "%s", msg);
  warnings_++;
  pthread_mutex_unlock(&warn_lock_);
}
BQ_TEST_UNUSED static void count_warnings(void) { bq_set_warning_handler(count_warning, NULL); }

/* exactly n warnings so far, the first containing needle (unless NULL) */
BQ_TEST_UNUSED static void expect_warnings(int n, const char *needle) {
  cr_assert_eq(warnings_, n, "expected %d warning(s), got %d; first: %s", n, warnings_, warning_[0]);
  if (needle) cr_assert(strstr(warning_[0], needle), "warning \"%s\" lacks \"%s\"", warning_[0], needle);
}

BQ_TEST_UNUSED static bq_cache_stats stats_(void) {
  bq_cache_stats s;
  bq_cache_get_stats(&s);
  return s;
}

/* ---- whole files ------------------------------------------------------------------------ */
/* the bytes of path (NUL-terminated past *n), malloc'd */
BQ_TEST_UNUSED static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)len + 1);
  cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = 0;
  fclose(f);
  *n = (size_t)len;
  return buf;
}

BQ_TEST_UNUSED static void write_all(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "create %s", path);
  cr_assert_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* ---- validation ---------------------------------------------------------------------------- */
/* bq_plan_workspace_size runs the shape rules, the first of check's: it accepts a call, or
   refuses it with can_implement's very status and message */
BQ_TEST_UNUSED static void expect_workspace_agrees(const bq_plan *p, const bq_args *a, bq_status want,
                                                   const char *msg, const char *ctx) {
  size_t b = 12345;
  bq_status w = bq_plan_workspace_size(p, a, &b);
  if (w == BQ_SUCCESS) return;
  cr_assert_eq(w, want, "%s: workspace_size %s (%s), can_implement %s (%s)", ctx, bq_status_name(w), bq_last_error(),
               bq_status_name(want), msg);
  cr_assert_str_eq(bq_last_error(), msg, "%s: workspace_size says \"%s\", can_implement said \"%s\"", ctx,
                   bq_last_error(), msg);
  cr_assert_eq(b, 0, "%s: a refused workspace size is 0", ctx);
}

#endif
