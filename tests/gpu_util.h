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

/* A library call that must succeed; the rest is the failure message's format and values
   (suites with a message argument of their own define BQ_OK first) */
#ifndef BQ_OK
#define BQ_OK(call, ...)                                                               \
  do {                                                                                 \
    bq_status st_ = (call);                                                            \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s | " __VA_ARGS__, #call,               \
                 bq_status_name(st_), bq_last_error());                                \
  } while (0)
#endif

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

/* Entry point e's function in the plan, or NULL while no run has loaded its module */
static inline bq__CUfunction plan_fn(const bq_plan *p, int e)
{
  bq__entry *m = __atomic_load_n(&((bq_plan *)p)->mod[e], __ATOMIC_ACQUIRE);
  return m ? m->fn[e] : NULL;
}

#ifdef GPU_UTIL_LAUNCHES
/* The last kernel launched and, while g_note_bytes is set (to the size of the parameter
   block the next runs' kernels take), that block's bytes: suites that check which entry
   point ran define GPU_UTIL_LAUNCHES, call launch_note_begin after gpu_begin, then read
   g_last_fn and g_last_params after a run */
static bq__CUfunction g_last_fn;
static unsigned char g_last_params[256];
static bq__CUresult (*g_real_launch)(bq__CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, bq__CUstream, void **, void **);
static size_t g_note_bytes; /* how many of the parameter block's bytes to keep */
static bq__CUresult launch_note(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, bq__CUstream s, void **params, void **extra)
{
  g_last_fn = f;
  if (g_note_bytes && params && params[0]) memcpy(g_last_params, params[0], g_note_bytes);
  return g_real_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}
static void launch_note_begin(void)
{
  if (bq__drv.cuLaunchKernel != launch_note) {
    g_real_launch = bq__drv.cuLaunchKernel;
    bq__drv.cuLaunchKernel = launch_note;
  }
}
#endif

/* Device buffers with guards (suites that define GPU_UTIL_BUFFERS before including this):
   a host image of the whole allocation, GPU_GUARD bytes of poison or garbage either side
   of the data, which starts `off` elements past the front guard (misaligned streams). */
#ifdef GPU_UTIL_BUFFERS
#define GPU_GUARD 256
typedef struct dbuf {
  unsigned char *h;   /* host image of the whole allocation */
  unsigned char *dev; /* device allocation (256-byte aligned) */
  size_t total, pre;  /* bytes; the data starts at pre */
} dbuf;

static void dbuf_make(dbuf *b, size_t es, int64_t count, int off)
{
  void *p = NULL;
  bq_status st;
  b->pre = GPU_GUARD + (size_t)off * es;
  b->total = b->pre + (size_t)count * es + GPU_GUARD;
  b->h = (unsigned char *)malloc(b->total);
  cr_assert(b->h != NULL, "host malloc(%zu)", b->total);
  st = bq_malloc(&p, b->total);
  cr_assert_eq(st, BQ_SUCCESS, "bq_malloc(%zu) -> %s: %s", b->total, bq_status_name(st), bq_last_error());
  cr_assert_eq((uintptr_t)p % 256, 0, "bq_malloc returned %p: not 256-byte aligned", p);
  b->dev = (unsigned char *)p;
}

static void dbuf_free(dbuf *b)
{
  if (b->dev) bq_free(b->dev);
  free(b->h);
  memset(b, 0, sizeof *b);
}

static void fill_garbage(unsigned char *p, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { uint64_t r = rnd(); memcpy(p + i, &r, 8); }
  for (; i < n; i++) p[i] = (unsigned char)rnd();
}

/* an input's device allocation still equals its host image */
static inline void check_unchanged(const dbuf *b, const char *name, const char *what)
{
  unsigned char *tmp;
  size_t i;
  bq_status st;
  if (!b->dev) return;
  tmp = (unsigned char *)malloc(b->total);
  cr_assert(tmp != NULL);
  st = bq_memcpy_to_host(tmp, b->dev, b->total);
  cr_assert_eq(st, BQ_SUCCESS, "bq_memcpy_to_host -> %s: %s | %s", bq_status_name(st), bq_last_error(), what);
  for (i = 0; i < b->total && tmp[i] == b->h[i]; i++) {}
  free(tmp);
  cr_assert(i == b->total, "%s\n  input %s was modified at byte %zu of its allocation (data starts at %zu)",
            what, name, i, b->pre);
}
#endif

#endif
