/* test_env.c - the on/off environment variables and the warning handler, on a machine
   with no GPU.

   Every BARACUDA_QUANT_* on/off variable reads 0/false/no/off (any case) as off, 1/true/
   yes/on as on, unset or empty as its default, and anything else as its default with one
   warning naming the variable and the value. Each variable is checked through what it
   changes: DISABLE_CACHE through bq_cache_directory, FORCE_PTX through the target chosen
   for an sm_90 device (NVRTC must be present, as for test_cache), QUIET through stderr,
   WGMMA and PDL through the private predicates the plan selection asks.

   A warning handler runs outside the library's lock, so it may call the library, even to
   uninstall itself; alarm() turns a deadlock into a failed test. Criterion runs every test
   in its own process, so each starts with empty in-process state. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- warnings, captured ---------------------------------------------------------------- */
static char seen[16][1024];
static int nseen;
static void capture(const char *msg, void *user) {
  (void)user;
  if (nseen < (int)NELEM(seen)) snprintf(seen[nseen], sizeof seen[0], "%s", msg);
  nseen++;
}
static void start_capture(void) {
  nseen = 0;
  bq_set_warning_handler(capture, NULL);
}
/* how many captured warnings contain both needles */
static int count_seen(const char *a, const char *b) {
  int n = 0;
  for (int i = 0; i < nseen && i < (int)NELEM(seen); i++)
    if (strstr(seen[i], a) && (!b || strstr(seen[i], b))) n++;
  return n;
}

/* stderr while fn runs */
static void stderr_of(void (*fn)(void), char *out, size_t n) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  cr_assert_not_null(tmp);
  int saved = dup(2);
  cr_assert(saved >= 0);
  cr_assert(dup2(fileno(tmp), 2) >= 0);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t got = fread(out, 1, n - 1, tmp);
  out[got] = 0;
  fclose(tmp);
}

/* ---- the value classes ------------------------------------------------------------------- */
static const char *const OFF[] = {"0", "false", "FALSE", "No", "off", "OfF"};
static const char *const ON[] = {"1", "true", "True", "YES", "on", "ON"};
static const char *const GARBAGE[] = {"2", "garbage", "truex", "o", "-1", " 1", "yes please"};

/* Checks one variable: get() reads what it controls (0 or 1), def is its default. */
static void check_variable(const char *name, int def, int (*get)(void)) {
  for (size_t i = 0; i < NELEM(OFF); i++) {
    setenv(name, OFF[i], 1);
    start_capture();
    cr_assert_eq(get(), 0, "%s=%s must be off", name, OFF[i]);
    cr_assert_eq(nseen, 0, "%s=%s: no warning expected, got \"%s\"", name, OFF[i], seen[0]);
  }
  for (size_t i = 0; i < NELEM(ON); i++) {
    setenv(name, ON[i], 1);
    start_capture();
    cr_assert_eq(get(), 1, "%s=%s must be on", name, ON[i]);
    cr_assert_eq(nseen, 0, "%s=%s: no warning expected, got \"%s\"", name, ON[i], seen[0]);
  }
  unsetenv(name);
  start_capture();
  cr_assert_eq(get(), def, "%s unset: the default (%d)", name, def);
  setenv(name, "", 1);
  cr_assert_eq(get(), def, "%s empty: the default (%d)", name, def);
  cr_assert_eq(nseen, 0, "%s unset or empty: no warning expected, got \"%s\"", name, seen[0]);
  for (size_t i = 0; i < NELEM(GARBAGE); i++) {
    setenv(name, GARBAGE[i], 1);
    start_capture();
    cr_assert_eq(get(), def, "%s=\"%s\": the default (%d)", name, GARBAGE[i], def);
    cr_assert_eq(get(), def, "%s=\"%s\" again: the default (%d)", name, GARBAGE[i], def);
    char value[64];
    snprintf(value, sizeof value, "(\"%s\")", GARBAGE[i]);
    cr_assert_eq(count_seen(name, value), 1, "%s=\"%s\": one warning naming both, got %d (first: \"%s\")", name,
                 GARBAGE[i], nseen, seen[0]);
    cr_assert_eq(nseen, 1, "%s=\"%s\": one warning in all, got %d", name, GARBAGE[i], nseen);
  }
  unsetenv(name);
  bq_set_warning_handler(NULL, NULL);
}

TestSuite(env, .timeout = 120);

static int cache_on(void) { return bq_cache_directory() != NULL ? 0 : 1; } /* 1: disabled */
Test(env, disable_cache) {
  char dir[] = "/tmp/bq_env_test_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  setenv("BARACUDA_QUANT_CACHE_DIR", dir, 1);
  check_variable("BARACUDA_QUANT_DISABLE_CACHE", 0, cache_on);
  unsetenv("BARACUDA_QUANT_DISABLE_CACHE");
  cr_assert_str_eq(bq_cache_directory(), dir);
  rmdir(dir);
}

/* the target bq_plan_select, bq_cache_warm and bq_sku take for op in float_type on sm_90 */
static bq__target target_90(bq_op op, bq_dtype float_type) {
  bq_desc desc, d;
  memset(&desc, 0, sizeof desc);
  desc.op = op;
  desc.float_type = float_type;
  char name[96];
  cr_assert_eq(bq__normalize(&desc, &d, name, sizeof name), BQ_SUCCESS, "%s", bq_last_error());
  bq__target t;
  bq_status st = bq__target_for(&d, 90, &t);
  cr_assert_eq(st, BQ_SUCCESS, "bq__target_for: %s", bq_last_error());
  return t;
}
static int force_ptx(void) { return target_90(BQ_QUANTIZE, BQ_F32).ptx; }
Test(env, force_ptx) {
  setenv("BARACUDA_QUANT_DISABLE_CACHE", "1", 1);
  check_variable("BARACUDA_QUANT_FORCE_PTX", 0, force_ptx);
}

static int wgmma(void) { return target_90(BQ_SMOOTHQUANT_LINEAR, BQ_F16).arch_a; }
Test(env, wgmma) { check_variable("BARACUDA_QUANT_WGMMA", 1, wgmma); }

static int pdl(void) {
  bq__target t = {90, 0, 1, 0};
  return bq__pdl_wanted(&t);
}
Test(env, pdl) {
  bq__drv.version = 13000; /* a driver with programmatic edges in graphs; none is loaded */
  check_variable("BARACUDA_QUANT_PDL", 1, pdl);
}

static int lazy(void) { return bq__lazy(); }
Test(env, lazy) { check_variable("BARACUDA_QUANT_LAZY", 1, lazy); }

/* QUIET silences stderr only: a warning reaches the handler whatever it says. */
static void warn_probe(void) { bq__warn("probe %d", 7); }
static int quiet(void) {
  char out[4096];
  bq_warning_fn fn = bq__warn_fn; /* the default path, then the capture back */
  void *user = bq__warn_user;
  bq_set_warning_handler(NULL, NULL);
  stderr_of(warn_probe, out, sizeof out);
  bq_set_warning_handler(fn, user);
  /* a warning about QUIET itself reaches stderr too: replay it into the capture */
  const char *w = strstr(out, "BARACUDA_QUANT_QUIET (");
  if (w && fn) {
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(w, "\n"), w);
    fn(line, user);
  }
  int printed = strstr(out, "baracuda_quant: warning: probe 7\n") != NULL;
  return !printed;
}
Test(env, quiet) {
  check_variable("BARACUDA_QUANT_QUIET", 0, quiet);
  /* with a handler installed, QUIET=1 changes nothing: the handler gets the message */
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  start_capture();
  bq__warn("to the handler");
  cr_assert_eq(count_seen("to the handler", NULL), 1);
}

/* Each message is one write: whole lines, never interleaved mid-line. */
Test(env, stderr_lines_are_whole) {
  unsetenv("BARACUDA_QUANT_QUIET");
  char out[4096];
  stderr_of(warn_probe, out, sizeof out);
  cr_assert_str_eq(out, "baracuda_quant: warning: probe 7\n");
}

/* ---- a handler that calls the library ------------------------------------------------------ */
static int reentered;
static void uninstalling(const char *msg, void *user) {
  (void)msg;
  (void)user;
  reentered++;
  bq_set_warning_handler(NULL, NULL); /* takes the warning lock */
  char buf[256];
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_F32;
  cr_assert_eq(bq_sku(&d, 90, buf, sizeof buf), BQ_SUCCESS); /* another library call */
  setenv("BARACUDA_QUANT_PDL", "maybe", 1);
  bq__target t = {90, 0, 0, 0};
  bq__pdl_wanted(&t); /* and one that warns, now to stderr */
}
static void rewarn(void) { bq__warn("first"); }
Test(env, handler_may_call_the_library, .timeout = 30) {
  alarm(10); /* a deadlock ends in SIGALRM: a crash, not a hang */
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  bq_set_warning_handler(uninstalling, NULL);
  char out[1024];
  stderr_of(rewarn, out, sizeof out);
  cr_assert_eq(reentered, 1);
  cr_assert_eq(bq__warn_fn, NULL, "the handler uninstalled itself");
  bq__warn("second"); /* the default path now */
  cr_assert_eq(reentered, 1);
  alarm(0);
}

static void *warn_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) bq__warn("from a thread %d", i);
  return NULL;
}
static int calls;
static void counting(const char *msg, void *user) {
  (void)msg;
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  bq_set_warning_handler(counting, user); /* reinstalls itself while others warn */
}
Test(env, handler_reinstalling_itself_under_threads, .timeout = 30) {
  alarm(20);
  bq_set_warning_handler(counting, NULL);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(pthread_create(&th[i], NULL, warn_thread, NULL), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  cr_assert_eq(calls, 800);
  alarm(0);
}
