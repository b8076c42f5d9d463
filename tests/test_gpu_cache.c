/* test_gpu_cache.c - the kernel cache and plans end to end on a GPU: a corrupt disk entry
   still gives the right answer, the forced-PTX path runs, concurrent selects compile
   once, and a hit never waits for another key's compile. Skips without a driver. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <time.h>

static void need_gpu(void) {
  if (!bq__driver_get()) cr_skip_test("no CUDA driver: %s", bq_last_error());
  bq__CUcontext c;
  if (bq__context(0, &c) != BQ_SUCCESS) cr_skip_test("no CUDA device: %s", bq_last_error());
}

static char dir_[256];
static void fresh_dir(void) {
  snprintf(dir_, sizeof dir_, "/tmp/bq_gpu_cache_XXXXXX");
  cr_assert_not_null(mkdtemp(dir_));
  setenv("BARACUDA_QUANT_CACHE_DIR", dir_, 1);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* quantize f32 -> s8 per tensor with the plan and check against the contract; x starts
   `off` elements into its buffer (1: off the 16-byte grid); with `capture`, the run is
   captured on a stream (global mode) and the graph launched */
static void run_quantize(bq_plan *p, int qmin, int qmax, int off, int capture) {
  enum { N = 4099 };
  static float x[N + 1];
  static signed char q[N];
  const float s = 0.25f;
  const int zp = 3;
  for (int i = 0; i < N; i++) x[off + i] = (float)((i * 37) % 1001 - 500) * 0.0625f;
  x[off] = NAN, x[off + 1] = INFINITY, x[off + 2] = -INFINITY, x[off + 3] = 0.125f; /* a tie: 0.5 -> 0 */
  void *dx, *dq;
  cr_assert_eq(bq_malloc(&dx, sizeof x), BQ_SUCCESS);
  cr_assert_eq(bq_malloc(&dq, sizeof q), BQ_SUCCESS);
  bq_memcpy_to_device(dx, x, sizeof x);
  bq_memset(dq, 0xA5, sizeof q);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.x = (const float *)dx + off, a.y = dq, a.numel = N, a.scale = s, a.zero_point = zp;
  if (capture) {
    const bq__driver_api *drv = bq__driver_get();
    bq__CUstream st;
    bq__CUgraph g;
    bq__CUgraphExec ex;
    cr_assert_eq(drv->cuStreamCreate(&st, 0), 0);
    cr_assert_eq(drv->cuStreamBeginCapture(st, BQ__CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
    bq_status rs = bq_plan_run(p, &a, NULL, 0, st);
    bq__CUresult r = drv->cuStreamEndCapture(st, &g);
    cr_assert_eq(rs, BQ_SUCCESS, "run under capture: %s", bq_last_error());
    cr_assert_eq(r, 0, "cuStreamEndCapture -> %d", r);
    cr_assert_eq(drv->cuGraphInstantiateWithFlags(&ex, g, 0), 0);
    cr_assert_eq(drv->cuGraphLaunch(ex, st), 0);
    cr_assert_eq(drv->cuStreamSynchronize(st), 0);
    drv->cuGraphExecDestroy(ex);
    drv->cuGraphDestroy(g);
    drv->cuStreamDestroy(st);
  } else {
    cr_assert_eq(bq_plan_run(p, &a, NULL, 0, NULL), BQ_SUCCESS, "%s", bq_last_error());
    cr_assert_eq(bq_synchronize(NULL), BQ_SUCCESS, "%s", bq_last_error());
  }
  bq_memcpy_to_host(q, dq, sizeof q);
  for (int i = 0; i < N; i++) {
    float v = x[off + i] / s;
    double r = v != v ? 0 : nearbyint(v);
    r = r > 1e6 ? 1e6 : r < -1e6 ? -1e6 : r;
    int want = (int)r + zp;
    want = want < qmin ? qmin : want > qmax ? qmax : want;
    cr_assert_eq(q[i], want, "element %d: x %g got %d want %d", i, x[off + i], q[i], want);
  }
  bq_free(dx);
  bq_free(dq);
}
static void check_quantize(bq_plan *p, int qmin, int qmax) { run_quantize(p, qmin, qmax, 0, 0); }

static bq_desc desc_(int k) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_F32;
  d.qmin = -k;
  d.qmax = k;
  return d;
}

TestSuite(gpu_cache, .timeout = 300);

Test(gpu_cache, corrupt_disk_entry_still_gives_the_right_answer) {
  need_gpu();
  fresh_dir();
  bq_desc d = desc_(100);
  bq_plan *p;
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  check_quantize(p, -100, 100);
  bq_plan_destroy(p);
  bq_cache_clear_memory();
  /* flip a byte in the middle of every entry's payload */
  DIR *dd = opendir(dir_);
  struct dirent *e;
  int flipped = 0;
  while ((e = readdir(dd))) {
    if (!strstr(e->d_name, ".bqk")) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir_, e->d_name);
    FILE *f = fopen(path, "r+b");
    fseek(f, -200, SEEK_END);
    int c = fgetc(f);
    fseek(f, -200, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
    flipped++;
  }
  closedir(dd);
  cr_assert_eq(flipped, 1);
  bq_cache_stats before, after;
  bq_cache_get_stats(&before);
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  bq_cache_get_stats(&after);
  cr_assert_eq(after.corrupt, before.corrupt + 1);
  cr_assert_eq(after.compiles, before.compiles + 1);
  check_quantize(p, -100, 100);
  bq_plan_destroy(p);
  /* and from the rewritten entry */
  bq_cache_clear_memory();
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  bq_cache_get_stats(&before);
  cr_assert_eq(before.disk_hits, after.disk_hits + 1);
  check_quantize(p, -100, 100);
  bq_plan_destroy(p);
}

Test(gpu_cache, forced_ptx_path_runs) {
  need_gpu();
  fresh_dir();
  setenv("BARACUDA_QUANT_FORCE_PTX", "1", 1);
  bq_desc d = desc_(90);
  bq_plan *p;
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(bq_plan_sku(p), ".compute_"), "SKU %s is not the PTX one", bq_plan_sku(p));
  check_quantize(p, -90, 90);
  bq_plan_destroy(p);
  unsetenv("BARACUDA_QUANT_FORCE_PTX");
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert(strstr(bq_plan_sku(p), ".sm_"), "SKU %s is not the cubin one", bq_plan_sku(p));
  check_quantize(p, -90, 90);
  bq_plan_destroy(p);
}

Test(gpu_cache, memory_hit_counts_and_shares_the_module) {
  need_gpu();
  fresh_dir();
  bq_desc d = desc_(80);
  bq_plan *a, *b;
  cr_assert_eq(bq_plan_select(&d, &a), BQ_SUCCESS, "%s", bq_last_error());
  bq_cache_stats s0, s1;
  bq_cache_get_stats(&s0);
  cr_assert_eq(bq_plan_select(&d, &b), BQ_SUCCESS, "%s", bq_last_error());
  bq_cache_get_stats(&s1);
  cr_assert_eq(s1.memory_hits, s0.memory_hits + 1);
  cr_assert_eq(s1.compiles, s0.compiles);
  cr_assert_str_eq(bq_plan_sku(a), bq_plan_sku(b));
  bq_plan_destroy(a);
  check_quantize(b, -80, 80); /* the module outlives the first plan */
  bq_cache_clear_memory();
  check_quantize(b, -80, 80); /* and a clear of the memory cache */
  bq_plan_destroy(b);
}

typedef struct {
  bq_desc d;
  bq_status st;
  bq_plan *p;
  double max_ms;
  int loops;
} job;

static void *select_once(void *arg) {
  job *j = (job *)arg;
  j->st = bq_plan_select(&j->d, &j->p);
  return NULL;
}

Test(gpu_cache, concurrent_misses_on_one_key_compile_once) {
  need_gpu();
  fresh_dir();
  enum { T = 8 };
  pthread_t th[T];
  job jobs[T];
  bq_cache_stats s0, s1;
  bq_cache_get_stats(&s0);
  for (int i = 0; i < T; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].d = desc_(70);
    pthread_create(&th[i], NULL, select_once, &jobs[i]);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  bq_cache_get_stats(&s1);
  for (int i = 0; i < T; i++) cr_assert_eq(jobs[i].st, BQ_SUCCESS);
  cr_assert_eq(s1.compiles, s0.compiles + 1, "%llu compiles for one key",
               (unsigned long long)(s1.compiles - s0.compiles));
  cr_assert_eq(s1.memory_hits, s0.memory_hits + T - 1);
  check_quantize(jobs[T - 1].p, -70, 70);
  for (int i = 0; i < T; i++) bq_plan_destroy(jobs[i].p);
}

static volatile int compiling_done;
static void *hit_loop(void *arg) {
  job *j = (job *)arg;
  while (!compiling_done) {
    bq_plan *p;
    double t0 = now_ms();
    j->st |= bq_plan_select(&j->d, &p);
    double dt = now_ms() - t0;
    if (dt > j->max_ms) j->max_ms = dt;
    bq_plan_destroy(p);
    j->loops++;
  }
  return NULL;
}

Test(gpu_cache, a_hit_never_waits_for_another_keys_compile) {
  need_gpu();
  fresh_dir();
  job hitter;
  memset(&hitter, 0, sizeof hitter);
  hitter.d = desc_(60);
  bq_plan *warm;
  cr_assert_eq(bq_plan_select(&hitter.d, &warm), BQ_SUCCESS, "%s", bq_last_error());
  pthread_t th;
  pthread_create(&th, NULL, hit_loop, &hitter);
  double t0 = now_ms();
  int compiled = 0;
  for (int k = 1; k <= 4; k++) { /* cold compiles of other keys, about 100 ms each */
    bq_desc d = desc_(k);
    d.op = BQ_FAKE_QUANTIZE;
    bq_plan *p;
    cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
    bq_plan_destroy(p);
    compiled++;
  }
  double compile_ms = now_ms() - t0;
  compiling_done = 1;
  pthread_join(th, NULL);
  cr_assert_eq(hitter.st, BQ_SUCCESS);
  cr_assert_gt(hitter.loops, 100);
  cr_assert_lt(hitter.max_ms, compile_ms / compiled / 4,
               "a memory hit took %.2f ms while compiles took %.1f ms each", hitter.max_ms,
               compile_ms / compiled);
  bq_plan_destroy(warm);
}

/* An entry point that no run has taken loads its module when a run first takes it, and
   under stream capture (global mode) too: the load enqueues nothing, the capture stays
   valid and its graph computes the contract. Per tensor quantize's select loads
   bq_affine_lean (what a dense, aligned tensor takes); x off the 16-byte grid takes the
   row kernel, compiled here during the capture. */
Test(gpu_cache, a_module_loads_on_first_use_even_under_stream_capture) {
  need_gpu();
  fresh_dir();
  bq_desc d = desc_(50);
  bq_plan *p;
  cr_assert_eq(bq_plan_select(&d, &p), BQ_SUCCESS, "%s", bq_last_error());
  cr_assert_not_null(p->mod[BQ__AFFINE_LEAN], "select did not load bq_affine_lean");
  cr_assert_null(p->mod[BQ__AFFINE_ROW], "select loaded bq_affine, which a typical tensor never takes");
  bq_cache_stats s0, s1;
  bq_cache_get_stats(&s0);
  run_quantize(p, -50, 50, 1, 1);
  bq_cache_get_stats(&s1);
  cr_assert_eq(s1.compiles, s0.compiles + 1, "the row kernel's module was not compiled by the run");
  cr_assert_not_null(p->mod[BQ__AFFINE_ROW]);
  bq_plan_destroy(p);
}
