/* tests/gpu_util.h - what every GPU suite needs: a fresh seed per run (replayable with
   BQ_TEST_SEED=<n>, and printed in every failure message), splitmix64 random numbers, the
   skip-without-a-GPU rule and a small cache of plans (one select per descriptor per test
   process). Include after baracuda_quant.h (with its implementation) and criterion.h. */
#ifndef BQ_TESTS_GPU_UTIL_H
#define BQ_TESTS_GPU_UTIL_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t g_seed, g_rng;

static void seed_init(void)
{
  const char *e = getenv("BQ_TEST_SEED");
  if (e && *e) {
    g_seed = strtoull(e, NULL, 0);
  } else { /* tests run in parallel processes: the pid keeps their seeds apart */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
  }
  g_rng = g_seed;
}

static uint64_t rnd(void) /* splitmix64 */
{
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; } /* [0, 1) */
static int64_t rnd_range(int64_t lo, int64_t hi) /* inclusive */
{
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

#define PICK(arr) ((arr)[rnd() % (sizeof(arr) / sizeof((arr)[0]))])

/* Every test calls this first: skip (never pass) without a driver and a device. */
static void gpu_begin(void)
{
  if (!bq__driver_get()) cr_skip_test("no usable CUDA driver/device: %s", bq_last_error());
  seed_init();
}

#ifndef PLAN_CACHE_MAX
#define PLAN_CACHE_MAX 64
#endif
static struct { bq_desc d; bq_plan *p; } g_plans[PLAN_CACHE_MAX];
static int g_nplans;

static bq_plan *plan_get(const bq_desc *d, const char *what)
{
  int i;
  bq_plan *p = NULL;
  bq_status st;
  for (i = 0; i < g_nplans; i++)
    if (!memcmp(&g_plans[i].d, d, sizeof *d)) return g_plans[i].p;
  if (g_nplans == PLAN_CACHE_MAX) {
    for (i = 0; i < g_nplans; i++) bq_plan_destroy(g_plans[i].p);
    g_nplans = 0;
  }
  st = bq_plan_select(d, &p);
  cr_assert_eq(st, BQ_SUCCESS, "bq_plan_select -> %s: %s | %s", bq_status_name(st), bq_last_error(), what);
  cr_assert(p != NULL);
  g_plans[g_nplans].d = *d;
  g_plans[g_nplans].p = p;
  g_nplans++;
  return p;
}

#endif
