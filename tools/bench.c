/* bench.c - throughput and JIT benchmark for baracuda_quant.

   Build:  gcc -std=c11 -O2 -Wall -Wextra -Werror tools/bench.c -o bench -ldl -lpthread -lm
   Run:    ./bench [--quick] [--filter SUBSTRING] [--json PATH] [--reps N] [--warmup N]
                   [--commit SHA] [--header-sha256 HEX]

   What it measures (see tools/bench_README.md for the method):
   - a device-to-device copy (cuMemcpyDtoDAsync) at every data size class it uses, as the
     reference: bandwidth = 2 * bytes / time;
   - every case of k_cases (expanded over ops x directions x float types): median device
     time over --reps runs (driver events), effective bandwidth = (bytes read once + bytes
     written once) / time, and its ratio to the copy of the same size class;
   - the fused producers (rows named fused/...: RMSNorm and gated activations quantized in
     one pass, each next to the dynamic quantize of the same shape; --filter fused);
   - JIT figures: cold compile per SKU, select served from the disk cache in a fresh
     process, select served from memory, host cost of bq_plan_run.
   The JSON's "provenance" object says what was measured where: library version, date,
   host, GPU, driver, NVRTC, the command line, and the commit and header digest given by
   --commit / --header-sha256 (or BQ_BENCH_COMMIT / BQ_BENCH_HEADER_SHA256).
   Exit status: 0 all good, 1 some driver or library call failed (each is printed),
   2 no CUDA driver or device, 64 bad command line. */
#define _GNU_SOURCE 1
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define SIZE_256MIB (-1) /* shape[0]: as many as make the float tensor 256 MiB */
#define ROTATE_BYTES (256 * MIB) /* rotated buffer sets span at least this (L2 is 50 MB) */
#define SCRATCH_BYTES (64 * MIB) /* memset before each timed batch: keeps the GPU busy */
#define SET_ALIGN 256

/* ---- options and global state ---------------------------------------------------- */
static struct {
  const bq__driver_api *d;
  bq__CUstream stream;
  bq__CUevent *ev; /* 2 * reps events, reused by every measurement */
  void *scratch;
  int quick, reps, warmup;
  int jit_cold_n, jit_children, jit_memory_n, jit_run_n;
  const char *filter;
  const char *json_path;
  const char *commit, *header_sha256; /* provenance given by the caller, or NULL */
  int argc;
  char **argv;
  char date_utc[32]; /* when the run started, ISO 8601 */
  char cache_dir[64];
  char device[256];
  int failures;
  uint64_t seed;
} G;

static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench: FAILED: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  G.failures++;
  return -1;
}

/* Every driver call goes through DRV, every library call through BQ: both print the
   call's text and return -1 on failure. */
static int drv_check(int rc, const char *what, int line) {
  if (rc == 0) return 0;
  return fail("driver call %s returned CUresult %d (bench.c:%d)", what, rc, line);
}
#define DRV(call) drv_check((call), #call, __LINE__)

static int bq_check(bq_status s, const char *what, int line) {
  if (s == BQ_SUCCESS) return 0;
  const char *msg = bq_last_error();
  return fail("%s returned %s: %s (bench.c:%d)", what, bq_status_name(s), msg ? msg : "",
              line);
}
#define BQ(call) bq_check((call), #call, __LINE__)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* Sorts v in place. */
static double median(double *v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static double mean(const double *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return n > 0 ? s / n : NAN;
}

/* Copies src into dst[n], truncating (snprintf("%s") trips -Wformat-truncation). */
static void copy_str(char *dst, size_t n, const char *src) {
  size_t i = 0;
  for (; src && src[i] && i + 1 < n; i++) dst[i] = src[i];
  if (n) dst[i] = 0;
}

/* --filter: comma-separated substrings; a row runs when its name contains any of them. A
   comma between a '[' and the ']' that closes a run of digits and commas is part of a shape
   ("[8192,4096]"), not a separator ("[8192,per_token" is two parts). */
static int shape_comma(const char *f, size_t at) {
  size_t k = at;
  while (k > 0 && (isdigit((unsigned char)f[k - 1]) || f[k - 1] == ',')) k--;
  if (k == 0 || f[k - 1] != '[') return 0;
  for (k = at + 1; isdigit((unsigned char)f[k]) || f[k] == ','; k++) {}
  return f[k] == ']';
}
static size_t filter_part(const char *f) {
  size_t n = 0;
  while (f[n] && (f[n] != ',' || shape_comma(f, n))) n++;
  return n;
}
static int matches(const char *name) {
  if (!G.filter) return 1;
  for (const char *f = G.filter; *f;) {
    size_t n = filter_part(f);
    char part[256];
    copy_str(part, n + 1 < sizeof part ? n + 1 : sizeof part, f);
    if (n && strstr(name, part)) return 1;
    f += n + (f[n] == ',');
  }
  return 0;
}

/* ---- random data ------------------------------------------------------------------ */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Round to nearest even; tiny values flush to signed zero (our data never gets there
   except by chance, and the exact value does not matter for timing). */
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int32_t e = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
  if (e <= 0) return (uint16_t)sign;
  if (e >= 31) return (uint16_t)(sign | 0x7bffu);
  uint32_t h = sign | ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)h;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* One thread's share of a host chunk: elements [begin, end) of type t, from its own
   splitmix64 stream. */
typedef struct fill_job {
  unsigned char *host;
  size_t begin, end;
  bq_dtype t;
  double lo, hi;
  uint64_t seed;
} fill_job;

static void *fill_part(void *p) {
  const fill_job *j = p;
  uint64_t s = j->seed;
  switch (j->t) {
  case BQ_UE8M0: case BQ_UE8M0X4: { /* scales: powers of two whose span covers [lo, hi] (every
                                      byte of a packed word) */
    int elo = (int)floor(log2(j->lo)), ehi = (int)ceil(log2(j->hi));
    size_t w = j->t == BQ_UE8M0X4 ? 4 : 1;
    for (size_t i = j->begin * w; i < j->end * w; i++)
      j->host[i] = (unsigned char)(127 + elo + (int)(splitmix64(&s) % (uint64_t)(ehi - elo + 1)));
    break;
  }
  case BQ_S8: case BQ_U8: case BQ_E4M3: case BQ_E5M2: /* int8, FP8: random codes; BQ_U8 bytes in [lo, hi] */
    if (j->t == BQ_U8 && j->lo >= 0 && j->hi <= 255 && j->hi > j->lo && (j->lo > 0 || j->hi < 255)) {
      for (size_t i = j->begin; i < j->end; i++)
        j->host[i] = (unsigned char)(j->lo + (double)(splitmix64(&s) % (uint64_t)(j->hi - j->lo + 1)));
      break;
    }
    for (size_t i = j->begin; i < j->end; i += 8) {
      uint64_t r = splitmix64(&s);
      memcpy(j->host + i, &r, j->end - i < 8 ? j->end - i : 8);
    }
    break;
  case BQ_S32: {
    int32_t *q = (int32_t *)j->host;
    uint64_t span = (uint64_t)(j->hi - j->lo) + 1;
    for (size_t i = j->begin; i < j->end; i++)
      q[i] = (int32_t)(j->lo + (double)(splitmix64(&s) % span));
    break;
  }
  case BQ_F64: {
    double *q = (double *)j->host;
    for (size_t i = j->begin; i < j->end; i++)
      q[i] = j->lo + (j->hi - j->lo) * (double)(splitmix64(&s) >> 11) * 0x1p-53;
    break;
  }
  default: { /* f32, f16, bf16: two 24-bit uniforms per draw */
    float flo = (float)j->lo, fw = (float)(j->hi - j->lo);
    for (size_t i = j->begin; i < j->end; i += 2) {
      uint64_t r = splitmix64(&s);
      float v[2] = {flo + fw * (float)(r >> 40) * 0x1p-24f,
                    flo + fw * (float)(r & 0xffffffu) * 0x1p-24f};
      for (size_t k = 0; k < 2 && i + k < j->end; k++) {
        if (j->t == BQ_F32) ((float *)j->host)[i + k] = v[k];
        else if (j->t == BQ_F16) ((uint16_t *)j->host)[i + k] = f32_to_f16(v[k]);
        else ((uint16_t *)j->host)[i + k] = f32_to_bf16(v[k]);
      }
    }
  }
  }
  return NULL;
}

/* Fills bytes of device memory at dst with fresh random elements of type t: floats
   uniform in [lo, hi), s32 uniform integers in [lo, hi], s8/u8 random bytes. The host
   generates each chunk on up to FILL_THREADS threads (the fill dominates a full run's
   time otherwise), each with its own stream, then copies it over. */
#define FILL_THREADS 16
static int fill_random(void *dst, size_t bytes, bq_dtype t, double lo, double hi) {
  enum { CHUNK = 16 << 20 };
  static unsigned char *host;
  static int nthreads;
  if (!host && !(host = malloc(CHUNK))) return fail("out of host memory");
  if (!nthreads) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = n < 1 ? 1 : n > FILL_THREADS ? FILL_THREADS : (int)n;
  }
  uint64_t seed = ++G.seed * 0x2545F4914F6CDD1Dull;
  size_t es = (size_t)bq__dtype_size(t);
  const size_t unit = 8; /* a job's elements: a multiple of 8 (whole draws for every type) */
  for (size_t off = 0; off < bytes; off += CHUNK) {
    size_t n = bytes - off < CHUNK ? bytes - off : CHUNK, ne = n / es;
    fill_job jobs[FILL_THREADS];
    pthread_t tid[FILL_THREADS];
    int started[FILL_THREADS] = {0};
    size_t per = (ne + (size_t)nthreads - 1) / (size_t)nthreads;
    per = (per + unit - 1) / unit * unit;
    int nj = 0;
    for (size_t b = 0; b < ne && nj < FILL_THREADS; b += per, nj++)
      jobs[nj] = (fill_job){.host = host, .begin = b, .end = b + per < ne ? b + per : ne, .t = t,
                            .lo = lo, .hi = hi, .seed = splitmix64(&seed)};
    if (es == 1) /* bytes: the last job also takes a tail under 8 */
      if (nj) jobs[nj - 1].end = n;
    for (int k = 1; k < nj; k++)
      started[k] = pthread_create(&tid[k], NULL, fill_part, &jobs[k]) == 0;
    if (nj) fill_part(&jobs[0]);
    for (int k = 1; k < nj; k++) {
      if (started[k]) pthread_join(tid[k], NULL);
      else fill_part(&jobs[k]); /* no thread: this one does it */
    }
    if (BQ(bq_memcpy_to_device((char *)dst + off, host, n))) return -1;
  }
  return 0;
}

/* ---- device timing ------------------------------------------------------------------ */
typedef int (*launch_fn)(void *ctx, long set); /* enqueues one run on G.stream */
typedef struct timing { double median_us, min_us; } timing;

/* Number of buffer sets to rotate over: enough that the timed runs never reuse a set
   (together with the scratch memset, which evicts L2, every timed run starts cold), but
   no more than it takes to span ROTATE_BYTES (then a set is long evicted when reused). */
static long pick_nsets(size_t set_bytes) {
  long need = G.warmup + G.reps;
  long span = set_bytes ? (long)((ROTATE_BYTES + set_bytes - 1) / set_bytes) : 1;
  long n = span < need ? span : need;
  return n < 1 ? 1 : n;
}

static int time_runs(launch_fn fn, void *ctx, long nsets, timing *out) {
  const bq__driver_api *d = G.d;
  long set = 0;
  for (int i = 0; i < G.warmup; i++)
    if (fn(ctx, set++ % nsets)) return -1;
  /* Queue some GPU work first (64 MiB memsets, about 25 us each on an H100) so the host
     runs ahead of the device: a start event must not be stamped while the GPU waits for
     the host to submit the kernel. The memsets also flush L2. */
  for (int i = 0; i < G.reps; i++)
    if (DRV(d->cuMemsetD8Async((bq__CUdeviceptr)(uintptr_t)G.scratch, 0x5a, SCRATCH_BYTES,
                               G.stream)))
      return -1;
  for (int i = 0; i < G.reps; i++) {
    if (DRV(d->cuEventRecord(G.ev[2 * i], G.stream))) return -1;
    if (fn(ctx, set++ % nsets)) return -1;
    if (DRV(d->cuEventRecord(G.ev[2 * i + 1], G.stream))) return -1;
  }
  if (DRV(d->cuEventSynchronize(G.ev[2 * G.reps - 1]))) return -1;
  double *t = malloc(sizeof *t * (size_t)G.reps);
  if (!t) return fail("out of host memory");
  for (int i = 0; i < G.reps; i++) {
    float ms = 0;
    if (DRV(d->cuEventElapsedTime(&ms, G.ev[2 * i], G.ev[2 * i + 1]))) {
      free(t);
      return -1;
    }
    t[i] = 1e3 * ms;
  }
  out->median_us = median(t, G.reps);
  out->min_us = t[0];
  free(t);
  return 0;
}

/* ---- the copy reference -------------------------------------------------------------- */
typedef struct copy_result {
  size_t bytes;
  timing t;
  double gbps;
  int ok;
} copy_result;
static copy_result *g_copies;
static int g_ncopies;

typedef struct copy_ctx { char *src, *dst; size_t bytes, stride; } copy_ctx;
static int launch_copy(void *p, long set) {
  copy_ctx *c = p;
  size_t off = (size_t)set * c->stride;
  return DRV(G.d->cuMemcpyDtoDAsync((bq__CUdeviceptr)(uintptr_t)(c->dst + off),
                                    (bq__CUdeviceptr)(uintptr_t)(c->src + off), c->bytes,
                                    G.stream));
}

static void print_copy(const copy_result *c) {
  static int header;
  if (!header++) printf("\n== copy reference: cuMemcpyDtoDAsync, GB/s = 2 * bytes / time ==\n");
  if (c->ok)
    printf("copy  %14zu B  %11.2f us  %9.1f GB/s\n", c->bytes, c->t.median_us, c->gbps);
  else
    printf("copy  %14zu B  FAILED\n", c->bytes);
  fflush(stdout);
}

/* The copy of `bytes`, measured on first use (then printed) and remembered. */
static const copy_result *get_copy(size_t bytes) {
  for (int i = 0; i < g_ncopies; i++)
    if (g_copies[i].bytes == bytes) return &g_copies[i];
  copy_result *grown = realloc(g_copies, sizeof *g_copies * (size_t)(g_ncopies + 1));
  if (!grown) {
    fail("out of host memory");
    return NULL;
  }
  g_copies = grown;
  copy_result *r = &g_copies[g_ncopies++];
  memset(r, 0, sizeof *r);
  r->bytes = bytes;
  copy_ctx c = {0};
  c.bytes = bytes;
  c.stride = (bytes + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
  long nsets = pick_nsets(2 * c.stride);
  void *src = NULL, *dst = NULL;
  if (!BQ(bq_malloc(&src, c.stride * (size_t)nsets)) &&
      !BQ(bq_malloc(&dst, c.stride * (size_t)nsets)) &&
      !fill_random(src, c.stride * (size_t)nsets, BQ_U8, 0, 0)) {
    c.src = src;
    c.dst = dst;
    if (!time_runs(launch_copy, &c, nsets, &r->t)) {
      r->gbps = 2.0 * (double)bytes / (r->t.median_us * 1e3);
      r->ok = 1;
    }
  }
  if (src) BQ(bq_free(src));
  if (dst) BQ(bq_free(dst));
  print_copy(r);
  return r;
}

/* ---- cases ------------------------------------------------------------------------------ */
typedef struct row_result {
  char name[192];
  char sku[160];
  double bytes;      /* read once + written once */
  size_t copy_bytes; /* the size class: the copy this row is compared with */
  timing t;
  double gbps, copy_gbps, copy_us, ratio;
  double tops; /* for rows that count operations (GEMM); 0 otherwise */
  double ref_us;      /* fused rows: the dynamic quantize of the same shape (0: none) */
  char ref_name[192]; /* ... and its row's name */
  int ok;
} row_result;

typedef struct bench_case bench_case;
typedef int (*case_runner)(const bench_case *c, row_result *r);

#define OPM(op) (1u << (op))
#define DIRM(dir) (1u << (dir))
#define TYM(t) (1u << (t))
#define OPS_ALL (OPM(BQ_QUANTIZE) | OPM(BQ_DEQUANTIZE) | OPM(BQ_FAKE_QUANTIZE))
#define OPS_QDQ (OPM(BQ_QUANTIZE) | OPM(BQ_DEQUANTIZE))
#define DIRS_ALL (DIRM(BQ_FORWARD) | DIRM(BQ_BACKWARD))
#define FWD DIRM(BQ_FORWARD)
#define TYPES_ALL (TYM(BQ_F32) | TYM(BQ_F64) | TYM(BQ_F16) | TYM(BQ_BF16))
#define TYPES_F32_BF16 (TYM(BQ_F32) | TYM(BQ_BF16))

/* One line of k_cases expands to a row per op x direction x float type in its masks. */
struct bench_case {
  bq_granularity gran;
  int rank;
  int64_t shape[BQ_MAX_RANK]; /* per tensor: {numel}; per token/group: {rows, cols}; shape[0] may
                                 be SIZE_256MIB */
  int axis;                   /* per channel */
  int64_t x_pad, y_pad;       /* per token/group: row stride = cols + pad (x and dx; y and dy) */
  int64_t group_size;         /* per group: G; per block: B */
  bq_scale_layout scale_layout; /* per group: row-major (0) or MN-major */
  unsigned ops, dirs, types;  /* masks: OPM(bq_op), DIRM(bq_direction), TYM(bq_dtype) */
  bq_dtype int_type;          /* 0: s8 */
  bq_dtype scale_type;        /* 0: the float type */
  int qmin, qmax;             /* both 0: the full range */
  int quick;                  /* also run under --quick */
  int asymmetric;             /* dynamic quantize: min/max with a zero point */
  int mask;                   /* fake quantize: the forward pass saves the straight-through mask
                                 (args.mask), the backward pass reads it instead of x */
  int sr;                     /* quantize, fake quantize, dynamic quantize: stochastic rounding (seed 7, offset 0) */
  int rot;                    /* dynamic quantize per token: the fused rotation's block (random signs, seed 7) */
  case_runner runner;         /* NULL: run_quant_case */
  /* set by the expansion */
  bq_op op;
  bq_direction dir;
  bq_dtype float_type;
};

/* The benchmark's cases. Add a line here to add rows; a new kind of workload (dynamic
   quantization, int8 GEMM) gets its own runner and sets .runner. */
static const bench_case k_cases[] = {
    /* per tensor, every op, both directions, every float type */
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {4096}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {65536}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {1 << 20}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL},
    /* per channel, per token and per group at 256 MiB, every op, both directions, every
       float type: the channel axis outermost, innermost and in the middle; rows aligned,
       odd, long and strided; groups of 128 and of 105 (odd rows) */
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {SIZE_256MIB, 4096}, .axis = 0, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {SIZE_256MIB, 4096}, .axis = 1, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 3, .shape = {SIZE_256MIB, 4096, 128}, .axis = 1, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4095}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 14336}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .x_pad = 64, .y_pad = 64, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 14336}, .group_size = 128, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4095}, .group_size = 105, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .quick = 1},
    /* the rows of the headline table (tools/bench_table.py picks them by name), each the
       counterpart of what tools/compare_torch.py times in PyTorch; scale arrays in f32 */
    {.gran = BQ_PER_TENSOR, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYM(BQ_F32), .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {8192, 4096}, .axis = 0, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYM(BQ_F32), .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {8192, 4096}, .axis = 0, .ops = OPM(BQ_FAKE_QUANTIZE), .dirs = DIRS_ALL, .types = TYM(BQ_F32), .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {8192, 4096}, .axis = 0, .ops = OPM(BQ_FAKE_QUANTIZE), .dirs = DIRS_ALL, .types = TYM(BQ_F32), .mask = 1, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DEQUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    /* dynamic quantization: per token (aligned, long and odd rows, small batches), per
       group, per tensor at 256 MiB */
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_ALL, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .asymmetric = 1, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4095}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .x_pad = 64, .y_pad = 64, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {1, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {16, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {64, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {256, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .quick = 1},
    /* DeepSeek-style 1x128 FP8 activations at decode and small prefill batches */
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {1, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {16, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {64, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {256, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {32768, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .quick = 1},
    /* FP8 per group of 32 with UE8M0 scales (MXFP8 as the dynamic family serves it): the
       reference of the microscaling dynamic rows */
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 32, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 14336}, .group_size = 32, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    /* the activations of the QuantizedLinear rows (f32 scales, as that plan makes them) */
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {2048, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {4096, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {2048, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .quick = 1},
    /* FP8 storage: every static op, both directions, every float type at 256 MiB, per
       tensor, token and group; dynamic quantization on the int8 rows' shapes */
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_ALL, .int_type = BQ_E5M2, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_ALL, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E5M2, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4095}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .x_pad = 64, .y_pad = 64, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {32768, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {4096, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .quick = 1}, /* python/bench.py's */
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPS_QDQ, .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    /* DeepSeek-style activations: 1x128 groups, power-of-two scales stored as UE8M0 bytes */
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {32768, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    /* the scale layouts TMA-fed FP8 GEMMs read: MN-major f32, and UE8M0 packed four to an
       int32, MN-major */
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .scale_layout = BQ_SCALES_MN_MAJOR, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .scale_layout = BQ_SCALES_MN_MAJOR, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0X4, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .scale_layout = BQ_SCALES_MN_MAJOR, .ops = OPS_QDQ, .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .scale_layout = BQ_SCALES_MN_MAJOR, .ops = OPS_QDQ, .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0X4, .quick = 1},
    /* per block: 128 x 128 tiles (DeepSeek-style weights), static at 256 MiB and dynamic,
       FP8 and int8 */
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPS_ALL, .dirs = DIRS_ALL, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPS_QDQ, .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8192}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8192}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_UE8M0, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8192}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8191}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    /* off the 16-byte grid: rows of an odd length (each starts anywhere in its line), and
       aligned rows whose right edge tile is not whole accesses */
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8191}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .scale_type = BQ_F32, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8191}, .group_size = 128, .x_pad = 1, .y_pad = 1, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .quick = 1},
    /* stochastic rounding (bq_affine_sr), each beside its round-to-nearest row above */
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPM(BQ_QUANTIZE) | OPM(BQ_FAKE_QUANTIZE), .dirs = FWD, .types = TYPES_ALL, .sr = 1, .quick = 1},
    {.gran = BQ_PER_CHANNEL, .rank = 2, .shape = {SIZE_256MIB, 4096}, .axis = 1, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .sr = 1, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPM(BQ_QUANTIZE) | OPM(BQ_FAKE_QUANTIZE), .dirs = FWD, .types = TYPES_F32_BF16, .sr = 1, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {SIZE_256MIB, 4096}, .group_size = 128, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .sr = 1, .quick = 1},
    /* dynamic quantize with stochastic rounding (the scales' kernels, then bq_affine_sr) */
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .sr = 1, .quick = 1},
    {.gran = BQ_PER_GROUP, .rank = 2, .shape = {8192, 4096}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .sr = 1, .quick = 1},
    {.gran = BQ_PER_BLOCK, .rank = 2, .shape = {8192, 8192}, .group_size = 128, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .scale_type = BQ_F32, .sr = 1, .quick = 1},
    {.gran = BQ_PER_TENSOR, .rank = 1, .shape = {SIZE_256MIB}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .sr = 1, .quick = 1},
    /* dynamic quantize per token with the fused rotation (random signs), each against its row without it */
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 16, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 32, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 64, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 128, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 256, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 16, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 128, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 14336}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .scale_type = BQ_F32, .rot = 256, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {8192, 4096}, .ops = OPM(BQ_DYNAMIC_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .int_type = BQ_E4M3, .rot = 128, .quick = 1},
    /* quantize and dequantize with static scales and the fused rotation (bq_affine_sr), each
       against its row without it */
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .rot = 16, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPM(BQ_QUANTIZE) | OPM(BQ_DEQUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .rot = 128, .quick = 1},
    {.gran = BQ_PER_TOKEN, .rank = 2, .shape = {SIZE_256MIB, 4096}, .ops = OPM(BQ_QUANTIZE), .dirs = FWD, .types = TYM(BQ_BF16), .sr = 1, .rot = 128, .quick = 1},
};

/* Extent i of the shape; a SIZE_256MIB leading extent is what makes the float tensor 256 MiB. */
static int64_t case_dim(const bench_case *c, int i) {
  if (i > 0 || c->shape[0] != SIZE_256MIB) return c->shape[i];
  int64_t inner = 1;
  for (int j = 1; j < c->rank; j++) inner *= c->shape[j];
  return (int64_t)(256 * MIB / (size_t)bq__dtype_size(c->float_type)) / inner;
}
static int64_t case_numel(const bench_case *c) {
  int64_t n = 1;
  for (int i = 0; i < c->rank; i++) n *= case_dim(c, i);
  return n;
}
static bq_dtype case_int_type(const bench_case *c) { return c->int_type ? c->int_type : BQ_S8; }
static bq_dtype case_scale_type(const bench_case *c) {
  return c->scale_type ? c->scale_type : c->float_type;
}
/* Size class: the bytes of the logical float tensor. */
static size_t case_copy_bytes(const bench_case *c) {
  return (size_t)case_numel(c) * (size_t)bq__dtype_size(c->float_type);
}

static void case_name(const bench_case *c, char *buf, size_t n) {
  char shape[96];
  int k = snprintf(shape, sizeof shape, "[");
  for (int i = 0; i < c->rank && k < (int)sizeof shape; i++)
    k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", i ? "," : "",
                  (long long)case_dim(c, i));
  if (k < (int)sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
  char extra[96] = "";
  if (c->gran == BQ_PER_CHANNEL) snprintf(extra, sizeof extra, "/axis=%d", c->axis);
  if (c->x_pad || c->y_pad)
    snprintf(extra, sizeof extra, "/stride=cols+%lld,cols+%lld", (long long)c->x_pad,
             (long long)c->y_pad);
  if (c->gran == BQ_PER_GROUP)
    snprintf(extra, sizeof extra, "/g=%lld%s", (long long)c->group_size, c->scale_layout ? "/mn" : "");
  if (c->gran == BQ_PER_BLOCK) { /* the block size, then the strides as above */
    char strides[96];
    memcpy(strides, extra, sizeof strides);
    snprintf(extra, sizeof extra, "/b=%lld%.60s", (long long)c->group_size, strides);
  }
  char q[32] = "";
  if (c->qmin || c->qmax) snprintf(q, sizeof q, "/q=%d..%d", c->qmin, c->qmax);
  if (c->asymmetric) snprintf(q, sizeof q, "/asym");
  if (c->mask) snprintf(q, sizeof q, "/mask");
  if (c->sr) snprintf(q, sizeof q, "/sr");
  if (c->rot) snprintf(q, sizeof q, "%s/rot%d", c->sr ? "/sr" : "", c->rot);
  char st[32] = ""; /* scale arrays of another type than the float type */
  if (case_scale_type(c) != c->float_type)
    snprintf(st, sizeof st, "/scale=%s", bq__dtype_name(case_scale_type(c)));
  snprintf(buf, n, "%s/%s/%s/%s/%s/%s%s%s%s", bq__gran_name(c->gran), bq__op_name(c->op),
           c->dir == BQ_BACKWARD ? "bwd" : "fwd", bq__dtype_name(c->float_type),
           bq__dtype_name(case_int_type(c)), shape, extra, q, st);
}

/* ---- the quantization runner ------------------------------------------------------------ */
enum { R_X, R_Y, R_DY, R_DX, R_SCALES, R_ZP, R_MASK, R_COUNT };
typedef struct role {
  bq_dtype type; /* 0: unused */
  size_t elems;  /* per set */
  int input;     /* filled with random data; else an output, poisoned */
  double lo, hi; /* value range of the random data */
  int counted;   /* counts in bytes moved */
  size_t stride; /* bytes per set, aligned */
  char *base;
} role;

typedef struct quant_ctx {
  const bq_plan *plan;
  bq_args args; /* set 0 */
  role roles[R_COUNT];
  void *workspace;
  size_t workspace_bytes;
  int pass_x; /* dequantize backward: pass x only if the plan asks for it */
  int dynamic; /* scales and zero points are outputs */
} quant_ctx;

static void quant_args(const quant_ctx *q, long set, bq_args *a) {
  *a = q->args;
  const role *r = q->roles;
#define AT(i) (r[i].base ? (void *)(r[i].base + (size_t)set * r[i].stride) : NULL)
  a->x = q->pass_x ? AT(R_X) : NULL;
  a->y = AT(R_Y);
  a->dy = AT(R_DY);
  a->dx = AT(R_DX);
  a->mask = AT(R_MASK);
  if (q->dynamic) {
    a->out_scales = AT(R_SCALES);
    a->out_zero_points = AT(R_ZP);
  } else {
    if (r[R_SCALES].base) a->scales = AT(R_SCALES);
    if (r[R_ZP].base) a->zero_points = AT(R_ZP);
  }
#undef AT
}

static int launch_quant(void *p, long set) {
  quant_ctx *q = p;
  bq_args a;
  quant_args(q, set, &a);
  return BQ(bq_plan_run(q->plan, &a, q->workspace, q->workspace_bytes, (void *)G.stream));
}

/* The device workspace a run of plan with args needs, in *bytes (0: none). Every call of
   bq_plan_workspace_size goes through here: from 0.2.0 on it returns a status and writes
   the size through its last argument. */
static int workspace_size(const bq_plan *plan, const bq_args *args, size_t *bytes) {
#if BQ_VERSION_MAJOR == 0 && BQ_VERSION_MINOR < 2
  *bytes = bq_plan_workspace_size(plan, args);
  return 0;
#else
  *bytes = 0;
  return BQ(bq_plan_workspace_size(plan, args, bytes));
#endif
}

static int run_quant_case(const bench_case *c, row_result *r) {
  int rc = -1;
  bq_dtype T = c->float_type, I = case_int_type(c), S = case_scale_type(c);
  bq_desc desc = {0};
  desc.op = c->op;
  desc.direction = c->dir;
  desc.granularity = c->gran;
  desc.float_type = T;
  desc.int_type = I;
  desc.qmin = c->qmin;
  desc.qmax = c->qmax;
  desc.asymmetric = c->asymmetric;
  desc.scale_layout = c->scale_layout;
  desc.rounding = c->sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  desc.rotation = c->rot != 0;
  desc.random_signs = c->rot != 0;
  if (c->gran != BQ_PER_TENSOR || c->op == BQ_DYNAMIC_QUANTIZE) desc.scale_type = S;
  int qlo = c->qmin || c->qmax ? c->qmin : (I == BQ_U8 ? 0 : -128);
  int qhi = c->qmin || c->qmax ? c->qmax : (I == BQ_U8 ? 255 : 127);
  const int fp8 = I == BQ_E4M3 || I == BQ_E5M2; /* symmetric: no zero points */

  quant_ctx q;
  memset(&q, 0, sizeof q);
  bq_plan *plan = NULL;
  if (BQ(bq_plan_select(&desc, &plan))) return -1; /* the JIT compile stays out of the timing */
  q.plan = plan;
  const char *sku = bq_plan_sku(plan);
  copy_str(r->sku, sizeof r->sku, sku);

  /* Shapes and the buffers each op reads and writes. */
  int64_t numel = case_numel(c), rows = 1, cols = numel, xs = 0, ys = 0, nscales = 0;
  bq_args *a = &q.args;
  if (c->sr || c->rot) a->seed = 7;
  a->rotation_block = c->rot;
  q.dynamic = c->op == BQ_DYNAMIC_QUANTIZE;
  if (c->gran == BQ_PER_TENSOR) {
    a->numel = numel;
    if (q.dynamic) nscales = 1;
    uint64_t s = ++G.seed;
    a->scale = 0.01 + 0.04 * (double)(splitmix64(&s) >> 11) * 0x1p-53;
    a->zero_point = fp8 ? 0 : qlo + (int32_t)(splitmix64(&s) % (uint64_t)(qhi - qlo + 1));
  } else if (c->gran == BQ_PER_CHANNEL) {
    a->rank = c->rank;
    for (int i = 0; i < c->rank; i++) a->shape[i] = case_dim(c, i);
    a->axis = c->axis;
    nscales = case_dim(c, c->axis);
  } else {
    rows = case_dim(c, 0);
    cols = case_dim(c, 1);
    a->rows = rows;
    a->cols = cols;
    if (c->x_pad) a->x_row_stride = cols + c->x_pad;
    if (c->y_pad) a->y_row_stride = cols + c->y_pad;
    if (c->gran == BQ_PER_GROUP) {
      /* scales of the layout's default leading dimension (packed UE8M0: int32 words) */
      int64_t ng = cols / c->group_size, x4 = S == BQ_UE8M0X4, lead = x4 ? (ng + 3) / 4 : ng;
      a->group_size = c->group_size;
      nscales = c->scale_layout ? lead * ((rows + 3) / 4 * 4) : rows * lead;
    } else if (c->gran == BQ_PER_BLOCK) {
      int64_t b = c->group_size;
      a->group_size = b;
      nscales = ((rows + b - 1) / b) * ((cols + b - 1) / b);
    } else {
      nscales = rows;
    }
  }
  xs = cols + c->x_pad; /* elements per row as stored */
  ys = cols + c->y_pad;
  size_t x_elems = (size_t)(rows * xs), y_elems = (size_t)(rows * ys);
  role *ro = q.roles;
  int fwd = c->dir == BQ_FORWARD;
  bq_dtype x_type = c->op == BQ_DEQUANTIZE ? I : T;
  if (fwd) {
    ro[R_X] = (role){.type = x_type, .elems = x_elems, .input = 1, .lo = -3, .hi = 3, .counted = 1};
    ro[R_Y] = (role){.type = c->op == BQ_QUANTIZE || q.dynamic ? I : T, .elems = y_elems, .counted = 1};
  } else {
    ro[R_DY] = (role){.type = T, .elems = y_elems, .input = 1, .lo = -1, .hi = 1, .counted = 1};
    ro[R_DX] = (role){.type = T, .elems = x_elems, .counted = 1};
    /* quantize and fake quantize read x for the clamp mask; dequantize has none */
    ro[R_X] = (role){.type = x_type, .elems = x_elems, .input = 1, .lo = -3, .hi = 3,
                     .counted = c->op != BQ_DEQUANTIZE};
  }
  if (c->mask) { /* a bit an element, in 32-bit words; the backward pass reads it, not x */
    ro[R_MASK] = (role){.type = BQ_U8, .elems = (size_t)((rows * cols + 31) / 32 * 4), .input = !fwd, .counted = 1};
    if (!fwd) ro[R_X] = (role){0};
  }
  q.pass_x = ro[R_X].counted || fwd;
  if (nscales && q.dynamic) { /* written by the op */
    ro[R_SCALES] = (role){.type = S, .elems = (size_t)nscales, .counted = 1};
    if (c->asymmetric) ro[R_ZP] = (role){.type = BQ_S32, .elems = (size_t)nscales, .counted = 1};
  } else if (nscales) {
    ro[R_SCALES] = (role){.type = S, .elems = (size_t)nscales, .input = 1, .lo = 0.01, .hi = 0.05, .counted = 1};
    if (!fp8) ro[R_ZP] = (role){.type = BQ_S32, .elems = (size_t)nscales, .input = 1, .lo = qlo, .hi = qhi, .counted = 1};
  }

  size_t set_bytes = 0;
  double moved = 0;
  for (int i = 0; i < R_COUNT; i++) {
    if (!ro[i].type) continue;
    size_t b = ro[i].elems * (size_t)bq__dtype_size(ro[i].type);
    ro[i].stride = (b + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
    set_bytes += ro[i].stride;
    /* only the logical elements move: the padding of strided rows is not read */
    if (ro[i].counted)
      moved += (double)bq__dtype_size(ro[i].type) *
               (double)(i == R_SCALES || i == R_ZP || i == R_MASK ? (int64_t)ro[i].elems : rows * cols);
  }
  r->bytes = moved;
  long nsets = pick_nsets(set_bytes);
  for (int i = 0; i < R_COUNT; i++) {
    if (!ro[i].type) continue;
    size_t b = ro[i].stride * (size_t)nsets;
    void *p = NULL;
    if (BQ(bq_malloc(&p, b))) goto done;
    ro[i].base = p;
    if (ro[i].input ? fill_random(p, b, ro[i].type, ro[i].lo, ro[i].hi)
                    : BQ(bq_memset(p, 0xff, b)))
      goto done;
  }
  if (BQ(bq_synchronize(NULL))) goto done;

  bq_args a0;
  quant_args(&q, 0, &a0);
  bq_status s = bq_plan_can_implement(plan, &a0);
  if (s != BQ_SUCCESS && !q.pass_x && ro[R_X].base) { /* the plan wants x after all */
    q.pass_x = 1;
    quant_args(&q, 0, &a0);
    s = bq_plan_can_implement(plan, &a0);
  }
  if (bq_check(s, "bq_plan_can_implement", __LINE__)) goto done;
  if (workspace_size(plan, &a0, &q.workspace_bytes)) goto done;
  if (q.workspace_bytes && BQ(bq_malloc(&q.workspace, q.workspace_bytes))) goto done;

  if (time_runs(launch_quant, &q, nsets, &r->t)) goto done;
  r->gbps = r->bytes / (r->t.median_us * 1e3);
  rc = 0;

done:
  if (BQ(bq_synchronize((void *)G.stream))) rc = -1;
  for (int i = 0; i < R_COUNT; i++)
    if (ro[i].base) BQ(bq_free(ro[i].base));
  if (q.workspace) BQ(bq_free(q.workspace));
  bq_plan_destroy(plan);
  return rc;
}

/* ---- rows ------------------------------------------------------------------------------ */
static row_result *g_rows;
static int g_nrows;

/* A new zeroed row at the end of g_rows, named and sized; NULL (after fail()) when out of memory. */
/* a measured row against the copy of its size class: ok, the copy's figures and the ratio */
static void row_vs_copy(row_result *r, const copy_result *cp) {
  r->ok = 1;
  r->copy_gbps = cp && cp->ok ? cp->gbps : NAN;
  r->copy_us = cp && cp->ok ? cp->t.median_us : NAN;
  r->ratio = r->gbps / r->copy_gbps;
}
/* the line of a row that has those columns alone (time, GB/s, the copy's, the ratio), or FAILED */
static void print_row_vs_copy(const row_result *r) {
  if (r->ok) printf("%-64s %11.2f %9.1f %9.1f %6.3f\n", r->name, r->t.median_us, r->gbps, r->copy_gbps, r->ratio);
  else printf("%-64s FAILED\n", r->name);
  fflush(stdout);
}
static row_result *new_row(const char *name, size_t copy_bytes) {
  row_result *grown = realloc(g_rows, sizeof *g_rows * (size_t)(g_nrows + 1));
  if (!grown) {
    fail("out of host memory");
    return NULL;
  }
  g_rows = grown;
  row_result *r = &g_rows[g_nrows++];
  memset(r, 0, sizeof *r);
  copy_str(r->name, sizeof r->name, name);
  r->copy_bytes = copy_bytes;
  return r;
}

static bench_case *expand_cases(int *count) {
  bench_case *out = NULL;
  int n = 0, cap = 0;
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
    const bench_case *t = &k_cases[i];
    if (G.quick && !t->quick) continue;
    for (int op = BQ_QUANTIZE; op <= BQ_DYNAMIC_QUANTIZE; op++) {
      if (!(t->ops & OPM(op))) continue;
      for (int dir = BQ_FORWARD; dir <= BQ_BACKWARD; dir++) {
        if (!(t->dirs & DIRM(dir))) continue;
        for (int ty = BQ_F32; ty <= BQ_BF16; ty++) {
          if (!(t->types & TYM(ty))) continue;
          if (n == cap) {
            cap = cap ? 2 * cap : 64;
            bench_case *g = realloc(out, sizeof *out * (size_t)cap);
            if (!g) {
              free(out);
              *count = 0;
              return NULL;
            }
            out = g;
          }
          out[n] = *t;
          out[n].op = (bq_op)op;
          out[n].dir = (bq_direction)dir;
          out[n].float_type = (bq_dtype)ty;
          n++;
        }
      }
    }
  }
  *count = n;
  return out;
}

static void print_row(const row_result *r) {
  if (r->ok)
    printf("%-72s %11.2f %9.1f %9.1f %6.3f\n", r->name, r->t.median_us, r->gbps, r->copy_gbps,
           r->ratio);
  else
    printf("%-72s FAILED\n", r->name);
  fflush(stdout);
}

static void run_cases(void) {
  int n = 0;
  bench_case *cases = expand_cases(&n);
  char name[192];
  char *want = calloc((size_t)(n ? n : 1), 1);
  if (!want) {
    fail("out of host memory");
    free(cases);
    return;
  }
  int any = 0;
  for (int i = 0; i < n; i++) {
    case_name(&cases[i], name, sizeof name);
    want[i] = (char)matches(name);
    any |= want[i];
  }

  /* The copies first: 256 MiB always (when anything runs), then each size class in use. */
  char cname[64];
  snprintf(cname, sizeof cname, "copy/%zu", 256 * MIB);
  if (any || matches(cname)) get_copy(256 * MIB);
  for (int i = 0; i < n; i++) {
    snprintf(cname, sizeof cname, "copy/%zu", case_copy_bytes(&cases[i]));
    if (want[i] || matches(cname)) get_copy(case_copy_bytes(&cases[i]));
  }

  if (any) {
    printf("\n== ops: median of %d runs after %d warm-up; GB/s = (bytes read once + bytes "
           "written once) / time; ratio = GB/s / copy GB/s at the float tensor's size ==\n",
           G.reps, G.warmup);
    printf("%-72s %11s %9s %9s %6s\n", "case (granularity/op/dir/float/int/shape)", "time_us",
           "GB/s", "copy_GB/s", "ratio");
  }
  for (int i = 0; i < n; i++) {
    if (!want[i]) continue;
    case_name(&cases[i], name, sizeof name);
    row_result *r = new_row(name, case_copy_bytes(&cases[i]));
    if (!r) break;
    const copy_result *cp = get_copy(r->copy_bytes);
    case_runner run = cases[i].runner ? cases[i].runner : run_quant_case;
    if (run(&cases[i], r) == 0) {
      r->ok = 1;
      if (cp && cp->ok) {
        r->copy_gbps = cp->gbps;
        r->copy_us = cp->t.median_us;
        r->ratio = r->gbps / cp->gbps;
      } else {
        r->copy_gbps = r->copy_us = r->ratio = NAN;
      }
    }
    print_row(r);
  }
  free(want);
  free(cases);
}

/* ---- W8A8 linear layers ------------------------------------------------------------------ */
/* Rows: GEMM (SmoothQuantLinear: int8 activations, per-token scales, f16 output with
   weight scales and bias) at the shapes of the headline table, in TOPS = 2 M N K / time; decode
   (M <= 16) as weight bytes / time against the copy of the weight's size; QuantizedLinear
   end to end (bf16 activations quantized on the device + GEMM) next to the GEMM alone.
   On an sm_90 device the plans are sm_90a modules whose tiles are wgmma's, and the row
   names end in /wgmma; BARACUDA_QUANT_WGMMA=0 measures the mma.sync tiles instead. */
typedef struct linear_case {
  bq_op op;
  bq_granularity gran;
  int64_t m, n, k;
  bq_dtype out;
  int quick;
} linear_case;
static const linear_case k_linear[] = {
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TENSOR, 4096, 4096, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 8192, 8192, 8192, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 2048, 4096, 14336, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 512, 11008, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_BF16, 0},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_F32, 0},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 1, 4096, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 2, 4096, 4096, BQ_F16, 0},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 4, 4096, 4096, BQ_F16, 0},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 8, 4096, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 16, 4096, 4096, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 1, 8192, 8192, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 8, 8192, 8192, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 16, 8192, 8192, BQ_F16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 64, 4096, 4096, BQ_F16, 0},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 2048, 4096, 4096, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 2048, 4096, 4096, BQ_BF16, 1},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 1, 4096, 4096, BQ_BF16, 1},
    /* decode through QuantizedLinear (the activations' kernel, then weight streaming) */
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 16, 4096, 4096, BQ_BF16, 1},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 1, 8192, 8192, BQ_BF16, 1},
    {BQ_QUANTIZED_LINEAR, BQ_PER_TOKEN, 16, 8192, 8192, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 1, 4096, 4096, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 16, 4096, 4096, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 1, 8192, 8192, BQ_BF16, 1},
    {BQ_SMOOTHQUANT_LINEAR, BQ_PER_TOKEN, 16, 8192, 8192, BQ_BF16, 1},
    /* FP8 linear layers: e4m3 activations and weights, tensorwise and rowwise scales */
    {BQ_FP8_LINEAR, BQ_PER_TENSOR, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TENSOR, 8192, 8192, 8192, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 8192, 8192, 8192, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TENSOR, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 1, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 16, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_TOKEN, 16, 8192, 8192, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 8192, 8192, 8192, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 1, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 16, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_LINEAR, BQ_PER_BLOCK, 16, 8192, 8192, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_TOKEN, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_TOKEN, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_TOKEN, 16, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_BLOCK, 4096, 4096, 4096, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_BLOCK, 2048, 4096, 14336, BQ_BF16, 1},
    {BQ_FP8_QUANTIZED_LINEAR, BQ_PER_BLOCK, 16, 4096, 4096, BQ_BF16, 1},
};

typedef struct linear_ctx {
  bq_plan *plan;
  bq_args a;
  char *x, *w;
  size_t x_stride, w_stride;
  void *ws;
  size_t ws_bytes;
} linear_ctx;
static int launch_linear(void *p, long set) {
  linear_ctx *c = p;
  bq_args a = c->a;
  a.x = c->x + (size_t)set * c->x_stride;
  a.w = c->w + (size_t)set * c->w_stride;
  return BQ(bq_plan_run(c->plan, &a, c->ws, c->ws_bytes, G.stream));
}

static void linear_name(const linear_case *c, char *buf, size_t n) {
  if (c->op == BQ_FP8_QUANTIZED_LINEAR) {
    snprintf(buf, n, "linear/fp8_quantized_linear_%s/bf16_in/out_%s/[%lld,%lld,%lld]",
             c->gran == BQ_PER_BLOCK ? "blockwise" : "rowwise", bq__dtype_name(c->out), (long long)c->m,
             (long long)c->n, (long long)c->k);
    return;
  }
  if (c->op == BQ_FP8_LINEAR) {
    snprintf(buf, n, "linear/fp8_%s/e4m3_in/out_%s/[%lld,%lld,%lld]",
             c->gran == BQ_PER_TOKEN ? "rowwise" : c->gran == BQ_PER_BLOCK ? "blockwise" : "tensorwise",
             bq__dtype_name(c->out), (long long)c->m,
             (long long)c->n, (long long)c->k);
    return;
  }
  snprintf(buf, n, "linear/%s%s/%s/out_%s/[%lld,%lld,%lld]",
           c->op == BQ_QUANTIZED_LINEAR ? "quantized_linear" : "smoothquant",
           c->op == BQ_QUANTIZED_LINEAR ? "" : c->gran == BQ_PER_TOKEN ? "_per_token" : "_per_tensor",
           c->op == BQ_QUANTIZED_LINEAR ? "bf16_in" : "s8_in", bq__dtype_name(c->out), (long long)c->m,
           (long long)c->n, (long long)c->k);
}

static int run_linear_case(const linear_case *c, row_result *r) {
  bq_desc d = {0};
  d.op = c->op;
  d.granularity = c->gran; /* QuantizedLinear: per token, its only granularity */
  const int fql = c->op == BQ_FP8_QUANTIZED_LINEAR; /* bf16 x quantized by the layer */
  d.float_type = c->op == BQ_QUANTIZED_LINEAR || fql ? BQ_BF16 : c->out;
  d.out_type = c->out;
  d.scale_type = BQ_F32;
  const int fp8 = c->op == BQ_FP8_LINEAR || fql;
  if (fp8) d.int_type = BQ_E4M3;
  /* FP8 blockwise: activation scales MN-major [ceil(K / 128)][M rounded up to 4] (the
     quantizers' default), the weight's [ceil(N / 128)][ceil(K / 128)] */
  const int blk = fp8 && c->gran == BQ_PER_BLOCK;
  if (blk && !fql) d.scale_layout = BQ_SCALES_MN_MAJOR;
  const int64_t kb = (c->k + 127) / 128, na = blk ? kb * ((c->m + 3) / 4 * 4) : c->m,
                nw = blk ? (c->n + 127) / 128 * kb : c->n;
  linear_ctx x = {0};
  int rc = -1;
  size_t xs = c->op == BQ_QUANTIZED_LINEAR || fql ? 2 : 1, os = (size_t)bq__dtype_size(c->out);
  void *scales = NULL, *bias = NULL, *a_scales = NULL, *y = NULL;
  if (BQ(bq_plan_select(&d, &x.plan))) return -1;
  copy_str(r->sku, sizeof r->sku, bq_plan_sku(x.plan));
  x.x_stride = ((size_t)(c->m * c->k) * xs + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
  x.w_stride = ((size_t)(c->n * c->k) + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
  long nsets = pick_nsets(x.x_stride + x.w_stride);
  if (BQ(bq_malloc((void **)&x.x, x.x_stride * (size_t)nsets)) || BQ(bq_malloc((void **)&x.w, x.w_stride * (size_t)nsets)) ||
      BQ(bq_malloc(&scales, (size_t)nw * 4)) || BQ(bq_malloc(&bias, (size_t)c->n * os)) ||
      BQ(bq_malloc(&a_scales, (size_t)na * 4)) || BQ(bq_malloc(&y, (size_t)(c->m * c->n) * os)))
    goto done;
  if (fill_random(x.x, x.x_stride * (size_t)nsets, xs == 2 ? BQ_BF16 : fp8 ? BQ_E4M3 : BQ_S8, -4, 4) ||
      fill_random(x.w, x.w_stride * (size_t)nsets, fp8 ? BQ_E4M3 : BQ_S8, 0, 0) || fill_random(scales, (size_t)nw * 4, BQ_F32, 1e-3, 2e-3) ||
      fill_random(bias, (size_t)c->n * os, c->out, -1, 1) || fill_random(a_scales, (size_t)na * 4, BQ_F32, 1e-3, 2e-3))
    goto done;
  x.a.rows = c->m;
  x.a.cols = c->k;
  x.a.n = c->n;
  x.a.y = y;
  x.a.w_scales = scales;
  x.a.bias = bias;
  x.a.scales = a_scales;
  x.a.scale = fp8 ? 0 : 1.5e-3; /* (FP8: scales on the device) */
  if (workspace_size(x.plan, &x.a, &x.ws_bytes)) goto done;
  if (x.ws_bytes && BQ(bq_malloc(&x.ws, x.ws_bytes))) goto done;
  if (time_runs(launch_linear, &x, nsets, &r->t)) goto done;
  r->bytes = (double)(c->m * c->k) * (double)xs + (double)(c->n * c->k) + (double)(c->m * c->n) * (double)os;
  r->tops = 2.0 * (double)c->m * (double)c->n * (double)c->k / (r->t.median_us * 1e6);
  r->gbps = (double)(c->n * c->k) / (r->t.median_us * 1e3); /* weight bytes / time */
  rc = 0;
done:
  if (x.x) BQ(bq_free(x.x));
  if (x.w) BQ(bq_free(x.w));
  if (scales) BQ(bq_free(scales));
  if (bias) BQ(bq_free(bias));
  if (a_scales) BQ(bq_free(a_scales));
  if (y) BQ(bq_free(y));
  if (x.ws) BQ(bq_free(x.ws));
  bq_plan_destroy(x.plan);
  return rc;
}

static void run_linear(void) {
  int header = 0;
  for (size_t i = 0; i < sizeof k_linear / sizeof k_linear[0]; i++) {
    const linear_case *c = &k_linear[i];
    char name[192];
    linear_name(c, name, sizeof name);
    if ((G.quick && !c->quick) || !matches(name)) continue;
    size_t wbytes = (size_t)(c->n * c->k);
    const copy_result *cp = get_copy(wbytes);
    if (!header++) {
      printf("\n== W8A8 and FP8 linear: median of %d runs; TOPS = 2 M N K / time; weight GB/s = N K / time; "
             "ratio = weight GB/s / copy GB/s at the weight's size ==\n", G.reps);
      printf("%-64s %11s %8s %9s %9s %6s\n", "case", "time_us", "TOPS", "wGB/s", "copy_GB/s", "ratio");
    }
    row_result *r = new_row(name, wbytes);
    if (!r) return;
    int rc = run_linear_case(c, r);
    if (strstr(r->sku, "+wgmma")) { /* an sm_90 device, unless BARACUDA_QUANT_WGMMA=0 */
      size_t l = strlen(r->name);
      snprintf(r->name + l, sizeof r->name - l, "/wgmma");
    }
    if (rc == 0) {
      row_vs_copy(r, cp);
      printf("%-64s %11.2f %8.1f %9.1f %9.1f %6.3f\n", r->name, r->t.median_us, r->tops, r->gbps, r->copy_gbps,
             r->ratio);
    } else {
      printf("%-64s FAILED\n", r->name);
    }
    fflush(stdout);
  }
}

/* ---- fused producers ------------------------------------------------------------------------ */
/* Rows: BQ_RMSNORM_QUANTIZE ((residual add +) RMSNorm, then quantize) and BQ_GATED_QUANTIZE
   (act(gate) * up, then quantize) in one pass, bf16 in, s8 out, f32 scales, each next to
   BQ_DYNAMIC_QUANTIZE of the same [rows, D] (the quantize half of the unfused pair; its
   time, and the difference, are printed on the fused row and written to the JSON as
   "ref_us" and "ref_name"). Bytes counted once each: x read (gated: [rows, 2 D]), the
   residual read and written (h goes back to it), the weight [D] read once, y written, the
   scales written. The copy of the same size class is the copy of x's bytes (the float
   input), as for the other rows. Every name starts with "fused/": --filter fused runs
   these rows alone. Rows with stochastic rounding (/sr, seed 7) or the fused rotation
   (/rot<n>, random signs, seed 7) run without the values (args.out), in the workspace the
   plan asks for, and their ref is the same row rounding to nearest unrotated. */
enum { FUSED_DYNQ = 0, FUSED_RMSNORM, FUSED_SILU_MUL, FUSED_GELU_MUL };
enum { FMT_S8 = 0, FMT_MXFP8, FMT_MXFP4, FMT_NVFP4 }; /* the output's format (microscaling: per group) */
typedef struct fused_case {
  int kind;           /* FUSED_*: FUSED_DYNQ is the dynamic quantize of the next fused row */
  int64_t rows, d;    /* the output [rows, D]; x is [rows, D] or (gated) [rows, 2 D] */
  int residual;       /* RMSNorm: with a residual (read, then h written back) */
  int64_t group_size; /* 0: per token */
  int quick;
  int fmt;            /* FMT_*: s8 with f32 scales, or a microscaling format (UE8M0 or E4M3
                         scales a byte, NVFP4's tensor scale given) */
  int sr;             /* stochastic rounding */
  int rot;            /* the fused rotation's block (0: none) */
} fused_case;
static const fused_case k_fused[] = {
    /* the issue's large shapes: one DRAM pass against the copy, each after its quantize */
    {FUSED_DYNQ, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 1, 0, 1, FMT_S8, 0, 0},
    {FUSED_SILU_MUL, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_GELU_MUL, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0}, /* GELU-tanh: more arithmetic an element */
    {FUSED_DYNQ, 8192, 14336, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 14336, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 14336, 1, 0, 1, FMT_S8, 0, 0},
    {FUSED_SILU_MUL, 8192, 14336, 0, 0, 1, FMT_S8, 0, 0},
    /* per group of 128, one shape */
    {FUSED_DYNQ, 8192, 4096, 0, 128, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 128, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 1, 128, 1, FMT_S8, 0, 0},
    /* small batches: latency, within 1 us of the dynamic quantize alone */
    {FUSED_DYNQ, 1, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 1, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_DYNQ, 16, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 16, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_DYNQ, 64, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 64, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_DYNQ, 256, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 256, 4096, 0, 0, 1, FMT_S8, 0, 0},
    /* microscaling output, each after the microscaling dynamic quantize of the same shape */
    {FUSED_DYNQ, 8192, 4096, 0, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 1, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_SILU_MUL, 8192, 4096, 0, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_DYNQ, 8192, 4096, 0, 32, 1, FMT_MXFP4, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 32, 1, FMT_MXFP4, 0, 0},
    {FUSED_DYNQ, 8192, 4096, 0, 32, 1, FMT_MXFP8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 32, 1, FMT_MXFP8, 0, 0},
    {FUSED_SILU_MUL, 8192, 4096, 0, 32, 1, FMT_MXFP8, 0, 0},
    {FUSED_DYNQ, 8192, 14336, 0, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_RMSNORM, 8192, 14336, 0, 16, 1, FMT_NVFP4, 0, 0},
    /* stochastic rounding and the fused rotation, each against its row above */
    {FUSED_RMSNORM, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 0, 1, FMT_S8, .sr = 1},
    {FUSED_RMSNORM, 8192, 4096, 0, 0, 1, FMT_S8, .rot = 128},
    {FUSED_SILU_MUL, 8192, 4096, 0, 0, 1, FMT_S8, 0, 0},
    {FUSED_SILU_MUL, 8192, 4096, 0, 0, 1, FMT_S8, .sr = 1},
    {FUSED_RMSNORM, 8192, 4096, 0, 16, 1, FMT_NVFP4, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 16, 1, FMT_NVFP4, .sr = 1},
    {FUSED_RMSNORM, 8192, 4096, 0, 16, 1, FMT_NVFP4, .rot = 16},
    {FUSED_RMSNORM, 8192, 4096, 0, 32, 1, FMT_MXFP8, 0, 0},
    {FUSED_RMSNORM, 8192, 4096, 0, 32, 1, FMT_MXFP8, .sr = 1},
    {FUSED_RMSNORM, 8192, 4096, 0, 32, 1, FMT_MXFP8, .rot = 128},
};
static const char *const k_fmt_names[] = {"s8", "e4m3", "e2m1", "nvfp4"};

static const char *fused_kind_name(int kind) {
  switch (kind) {
  case FUSED_RMSNORM: return "rmsnorm_quantize";
  case FUSED_SILU_MUL: return "silu_mul_quantize";
  case FUSED_GELU_MUL: return "gelu_tanh_mul_quantize";
  default: return "dynamic_quantize";
  }
}

/* fused/<op>/fwd/bf16/<s8 | e4m3 | e2m1 | nvfp4>/[rows,D]/<per_token | per_group/g=G>[/residual]
   [/sr][/rot<n>]; gated rows name the output's shape [rows, D] (x is [rows, 2 D]); e4m3 and
   e2m1 are MXFP8 and MXFP4 (UE8M0 scales) */
static void fused_name(const fused_case *c, char *buf, size_t n) {
  char gran[32], opt[24] = "";
  if (c->group_size) snprintf(gran, sizeof gran, "per_group/g=%lld", (long long)c->group_size);
  else snprintf(gran, sizeof gran, "per_token");
  if (c->sr) snprintf(opt, sizeof opt, "/sr");
  else if (c->rot) snprintf(opt, sizeof opt, "/rot%d", c->rot);
  snprintf(buf, n, "fused/%s/fwd/bf16/%s/[%lld,%lld]/%s%s%s", fused_kind_name(c->kind), k_fmt_names[c->fmt],
           (long long)c->rows, (long long)c->d, gran, c->residual ? "/residual" : "", opt);
}

/* The float input's bytes: the size class of the copy the row is compared with. */
static size_t fused_copy_bytes(const fused_case *c) {
  int gated = c->kind == FUSED_SILU_MUL || c->kind == FUSED_GELU_MUL;
  return (size_t)(c->rows * c->d) * 2u * (gated ? 2u : 1u);
}

enum { F_X, F_RES, F_W, F_Y, F_S, F_G, F_COUNT }; /* (F_G: NVFP4's tensor scale) */
typedef struct fused_ctx {
  bq_plan *plan;
  bq_args a;
  char *base[F_COUNT];
  size_t stride[F_COUNT]; /* bytes per set */
  void *ws;               /* stochastic rounding's or the rotation's workspace (one for every set) */
  size_t ws_bytes;
} fused_ctx;

static int launch_fused(void *p, long set) {
  fused_ctx *c = p;
  bq_args a = c->a;
#define FAT(i) (c->base[i] ? (void *)(c->base[i] + (size_t)set * c->stride[i]) : NULL)
  a.x = FAT(F_X);
  a.residual = FAT(F_RES);
  a.norm_weight = FAT(F_W);
  a.y = FAT(F_Y);
  a.out_scales = FAT(F_S);
  a.tensor_scale = FAT(F_G);
#undef FAT
  return BQ(bq_plan_run(c->plan, &a, c->ws, c->ws_bytes, (void *)G.stream));
}

static int run_fused_case(const fused_case *c, row_result *r) {
  int rc = -1, gated = c->kind == FUSED_SILU_MUL || c->kind == FUSED_GELU_MUL;
  bq_desc d = {0};
  d.op = c->kind == FUSED_DYNQ ? BQ_DYNAMIC_QUANTIZE : gated ? BQ_GATED_QUANTIZE : BQ_RMSNORM_QUANTIZE;
  d.granularity = c->group_size ? BQ_PER_GROUP : BQ_PER_TOKEN;
  d.float_type = BQ_BF16;
  d.int_type = BQ_S8;
  d.scale_type = BQ_F32;
  if (gated) d.activation = c->kind == FUSED_GELU_MUL ? BQ_GELU_TANH : BQ_SILU;
#ifdef BQ__FAMILY_OPS
  if (c->fmt != FMT_S8) {
    d.int_type = c->fmt == FMT_MXFP8 ? BQ_E4M3 : BQ_E2M1;
    d.scale_type = c->fmt == FMT_NVFP4 ? BQ_E4M3 : BQ_UE8M0;
  }
  if (c->sr) d.rounding = BQ_ROUND_STOCHASTIC;
  if (c->rot) d.rotation = 1, d.random_signs = 1;
#else
  if (c->fmt != FMT_S8 || c->sr || c->rot)
    return fail("%s: this header has no microscaling formats, stochastic rounding or rotation", r->name), -1;
#endif
  fused_ctx x;
  memset(&x, 0, sizeof x);
  if (BQ(bq_plan_select(&d, &x.plan))) return -1; /* the JIT compile stays out of the timing */
  copy_str(r->sku, sizeof r->sku, bq_plan_sku(x.plan));

  int64_t rows = c->rows, D = c->d, xcols = gated ? 2 * D : D;
  int64_t nscales = c->group_size ? rows * (D / c->group_size) : rows;
  size_t bytes[F_COUNT] = {0};
  bytes[F_X] = (size_t)(rows * xcols) * 2u;
  if (c->kind == FUSED_RMSNORM) {
    bytes[F_W] = (size_t)D * 2u;
    if (c->residual) bytes[F_RES] = (size_t)(rows * D) * 2u;
  }
  bytes[F_Y] = (size_t)(rows * D) / (c->fmt == FMT_MXFP4 || c->fmt == FMT_NVFP4 ? 2u : 1u);
  bytes[F_S] = (size_t)nscales * (c->fmt == FMT_S8 ? 4u : 1u);
  if (c->fmt == FMT_NVFP4) bytes[F_G] = 4;
  /* read once + written once: x; residual read and written; weight; y; scales */
  r->bytes = (double)bytes[F_X] + 2.0 * (double)bytes[F_RES] + (double)bytes[F_W] + (double)bytes[F_Y] +
             (double)bytes[F_S];
  size_t set_bytes = 0;
  for (int i = 0; i < F_COUNT; i++) {
    x.stride[i] = (bytes[i] + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
    set_bytes += x.stride[i];
  }
  long nsets = pick_nsets(set_bytes);
  for (int i = 0; i < F_COUNT; i++) {
    if (!bytes[i]) continue;
    size_t b = x.stride[i] * (size_t)nsets;
    void *p = NULL;
    if (BQ(bq_malloc(&p, b))) goto done;
    x.base[i] = p;
    int bad;
    if (i == F_X || i == F_RES) bad = fill_random(p, b, BQ_BF16, -3, 3);
    else if (i == F_W) bad = fill_random(p, b, BQ_BF16, 0.5, 1.5);
    else if (i == F_G) bad = fill_random(p, b, BQ_F32, 0.5, 1.5); /* (NVFP4's tensor scale: given) */
    else bad = BQ(bq_memset(p, 0xff, b)); /* outputs: poisoned */
    if (bad) goto done;
  }
  if (BQ(bq_synchronize(NULL))) goto done;

  x.a.rows = rows;
  x.a.cols = D;
  if (c->group_size) x.a.group_size = c->group_size;
  if (c->kind == FUSED_RMSNORM) x.a.eps = 1e-6;
#ifdef BQ__FAMILY_OPS
  if (c->sr || c->rot) x.a.seed = 7;
  x.a.rotation_block = c->rot;
#endif
  bq_args a0 = x.a;
  a0.x = x.base[F_X];
  a0.residual = x.base[F_RES];
  a0.norm_weight = x.base[F_W];
  a0.y = x.base[F_Y];
  a0.out_scales = x.base[F_S];
  a0.tensor_scale = x.base[F_G];
  if (bq_check(bq_plan_can_implement(x.plan, &a0), "bq_plan_can_implement", __LINE__)) goto done;
  size_t ws = 0;
  if (workspace_size(x.plan, &a0, &ws)) goto done;
  if (ws && !c->sr && !c->rot) {
    fail("%s: the plan asks for a %zu-byte workspace (given the tensor scale, none is needed)", r->name, ws);
    goto done;
  }
  if (ws && BQ(bq_malloc(&x.ws, ws))) goto done;
  x.ws_bytes = ws;
  if (time_runs(launch_fused, &x, nsets, &r->t)) goto done;
  r->gbps = r->bytes / (r->t.median_us * 1e3);
  rc = 0;
done:
  if (BQ(bq_synchronize((void *)G.stream))) rc = -1;
  for (int i = 0; i < F_COUNT; i++)
    if (x.base[i]) BQ(bq_free(x.base[i]));
  if (x.ws) BQ(bq_free(x.ws));
  bq_plan_destroy(x.plan);
  return rc;
}

static void run_fused(void) {
  int header = 0;
  int ref = -1; /* g_rows index of the dynamic quantize row just before, same [rows, D] */
  for (size_t i = 0; i < sizeof k_fused / sizeof k_fused[0]; i++) {
    const fused_case *c = &k_fused[i];
    char name[192];
    fused_name(c, name, sizeof name);
    if ((G.quick && !c->quick) || !matches(name)) {
      if (c->kind == FUSED_DYNQ) ref = -1;
      continue;
    }
    size_t cb = fused_copy_bytes(c);
    const copy_result *cp = get_copy(cb);
    if (!header++) {
      printf("\n== fused producers: median of %d runs; GB/s = (x read + residual read and written + weight + "
             "y + scales) / time; ratio = GB/s / copy GB/s at x's size; ref = dynamic quantize of the same "
             "[rows, D] (the row above) ==\n", G.reps);
      printf("%-64s %11s %9s %9s %6s %10s %10s\n", "case", "time_us", "GB/s", "copy_GB/s", "ratio", "ref_us",
             "-ref_us");
    }
    row_result *r = new_row(name, cb);
    if (!r) return;
    int ok = run_fused_case(c, r) == 0;
    if (ok) {
      row_vs_copy(r, cp);
      const row_result *q = c->kind != FUSED_DYNQ && ref >= 0 && g_rows[ref].ok ? &g_rows[ref] : NULL;
      if (c->sr || c->rot) { /* the same row rounding to nearest, unrotated: the last one so named */
        char plain[192];
        fused_case pc = *c;
        pc.sr = pc.rot = 0;
        fused_name(&pc, plain, sizeof plain);
        q = NULL;
        for (int k = (int)(r - g_rows) - 1; k >= 0 && !q; k--)
          if (g_rows[k].ok && !strcmp(g_rows[k].name, plain)) q = &g_rows[k];
      }
      if (q) {
        r->ref_us = q->t.median_us;
        copy_str(r->ref_name, sizeof r->ref_name, q->name);
        printf("%-64s %11.2f %9.1f %9.1f %6.3f %10.2f %+10.2f\n", r->name, r->t.median_us, r->gbps, r->copy_gbps,
               r->ratio, r->ref_us, r->t.median_us - r->ref_us);
      } else {
        printf("%-64s %11.2f %9.1f %9.1f %6.3f\n", r->name, r->t.median_us, r->gbps, r->copy_gbps, r->ratio);
      }
    } else {
      printf("%-64s FAILED\n", r->name);
    }
    if (c->kind == FUSED_DYNQ) ref = (int)(r - g_rows);
    fflush(stdout);
  }
}

/* ---- microscaling: MXFP8, MXFP4, NVFP4 ------------------------------------------------- */
#ifdef BQ__FAMILY_OPS /* (headers with the microscaling family) */
enum { MX_FP8, MX_FP4, MX_NV };
typedef struct mx_case {
  bq_op op;
  int fmt;              /* MX_FP8 (e4m3, UE8M0, groups of 32), MX_FP4 (e2m1, UE8M0, 32), MX_NV (e2m1, E4M3, 16) */
  bq_dtype ft;
  int64_t rows, cols;   /* rows SIZE_256MIB: as many as make the float tensor 256 MiB */
  bq_scale_layout layout;
  int computed;         /* NVFP4 dynamic quantize: the tensor scale computed (two passes) */
  int quick;
  int sr;               /* stochastic rounding (seed 7, offset 0) */
  int rot;              /* the fused rotation's block (0: none) */
} mx_case;
#define MX_ALL_FT(op, fmt, lay)                                                                  \
  {op, fmt, BQ_F32, SIZE_256MIB, 4096, lay, 0, 1, 0, 0}, {op, fmt, BQ_F64, SIZE_256MIB, 4096, lay, 0, 1, 0, 0}, \
  {op, fmt, BQ_F16, SIZE_256MIB, 4096, lay, 0, 1, 0, 0}, {op, fmt, BQ_BF16, SIZE_256MIB, 4096, lay, 0, 1, 0, 0}
static const mx_case k_mx[] = {
    /* quantize and dequantize in each format at 256 MiB of floats, every float type */
    MX_ALL_FT(BQ_QUANTIZE, MX_FP8, BQ_SCALES_BLOCKED), MX_ALL_FT(BQ_QUANTIZE, MX_FP4, BQ_SCALES_BLOCKED),
    MX_ALL_FT(BQ_QUANTIZE, MX_NV, BQ_SCALES_BLOCKED), MX_ALL_FT(BQ_DEQUANTIZE, MX_FP8, BQ_SCALES_BLOCKED),
    MX_ALL_FT(BQ_DEQUANTIZE, MX_FP4, BQ_SCALES_BLOCKED), MX_ALL_FT(BQ_DEQUANTIZE, MX_NV, BQ_SCALES_BLOCKED),
    /* dynamic: the activations' shapes, against the FP8 per-group row of groups of 32 */
    {BQ_DYNAMIC_QUANTIZE, MX_FP8, BQ_BF16, 8192, 4096, BQ_SCALES_ROW_MAJOR, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP8, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP8, BQ_BF16, 8192, 14336, BQ_SCALES_BLOCKED, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 14336, BQ_SCALES_BLOCKED, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 1, 1, 0, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 14336, BQ_SCALES_BLOCKED, 1, 1, 0, 0},
    /* stochastic rounding: each against its round-to-nearest row above */
    {BQ_DYNAMIC_QUANTIZE, MX_FP8, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 14336, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    {BQ_QUANTIZE, MX_NV, BQ_BF16, SIZE_256MIB, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    {BQ_QUANTIZE, MX_FP4, BQ_F32, SIZE_256MIB, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 0},
    /* the fused rotation: each against its row without it */
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 16},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 128},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 256},
    {BQ_DYNAMIC_QUANTIZE, MX_FP4, BQ_BF16, 8192, 14336, BQ_SCALES_BLOCKED, 0, 1, 0, 128},
    {BQ_DYNAMIC_QUANTIZE, MX_FP8, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 128},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 0, 16},
    {BQ_DYNAMIC_QUANTIZE, MX_NV, BQ_BF16, 8192, 4096, BQ_SCALES_BLOCKED, 0, 1, 1, 16},
};
static const char *const mx_fmt_names[] = {"mxfp8", "mxfp4", "nvfp4"};
static int64_t mx_rows(const mx_case *c) {
  return c->rows != SIZE_256MIB ? c->rows : (int64_t)(256 * MIB / (size_t)bq__dtype_size(c->ft)) / c->cols;
}
/* mx/<op>/fwd/<float>/<format>/[rows,cols]/<rows|blocked>[/g computed][/sr][/rot<n>] */
static void mx_name(const mx_case *c, char *buf, size_t n) {
  char rot[16] = "";
  if (c->rot) snprintf(rot, sizeof rot, "/rot%d", c->rot);
  snprintf(buf, n, "mx/%s/fwd/%s/%s/[%lld,%lld]/%s%s%s%s", c->op == BQ_QUANTIZE ? "quantize" : c->op == BQ_DEQUANTIZE ?
           "dequantize" : "dynamic_quantize", bq__dtype_name(c->ft), mx_fmt_names[c->fmt], (long long)mx_rows(c),
           (long long)c->cols, c->layout == BQ_SCALES_BLOCKED ? "blocked" : "rows", c->computed ? "/g_computed" : "",
           c->sr ? "/sr" : "", rot);
}
enum { M_F, M_Q, M_S, M_G, M_COUNT };
typedef struct mx_ctx {
  bq_plan *plan;
  bq_args a;
  char *base[M_COUNT];
  size_t stride[M_COUNT];
  void *ws;
  size_t ws_bytes;
} mx_ctx;
static int launch_mx(void *p, long set) {
  mx_ctx *c = p;
  bq_args a = c->a;
#define MAT(i) (c->base[i] ? (void *)(c->base[i] + (size_t)set * c->stride[i]) : NULL)
  if (a.out_scales) a.out_scales = MAT(M_S);
  else a.scales = MAT(M_S);
  if (c->plan->desc.op == BQ_DEQUANTIZE) a.x = MAT(M_Q), a.y = MAT(M_F);
  else a.x = MAT(M_F), a.y = MAT(M_Q);
  if (a.tensor_scale) a.tensor_scale = MAT(M_G);
  if (a.out_tensor_scale) a.out_tensor_scale = MAT(M_G);
#undef MAT
  return BQ(bq_plan_run(c->plan, &a, c->ws, c->ws_bytes, (void *)G.stream));
}
static int run_mx_case(const mx_case *c, row_result *r) {
  int rc = -1;
  bq_desc d = {0};
  d.op = c->op;
  d.granularity = BQ_PER_GROUP;
  d.float_type = c->ft;
  d.int_type = c->fmt == MX_FP8 ? BQ_E4M3 : BQ_E2M1;
  d.scale_type = c->fmt == MX_NV ? BQ_E4M3 : BQ_UE8M0;
  d.scale_layout = c->layout;
  d.rounding = c->sr ? BQ_ROUND_STOCHASTIC : BQ_ROUND_NEAREST_EVEN;
  d.rotation = c->rot != 0;
  mx_ctx x;
  memset(&x, 0, sizeof x);
  if (BQ(bq_plan_select(&d, &x.plan))) return -1; /* the JIT compile stays out of the timing */
  copy_str(r->sku, sizeof r->sku, bq_plan_sku(x.plan));
  const int64_t rows = mx_rows(c), cols = c->cols, G0 = c->fmt == MX_NV ? 16 : 32, ng = cols / G0;
  const int e2 = d.int_type == BQ_E2M1, dyn = c->op == BQ_DYNAMIC_QUANTIZE;
  size_t bytes[M_COUNT] = {0};
  bytes[M_F] = (size_t)(rows * cols) * (size_t)bq__dtype_size(c->ft);
  bytes[M_Q] = (size_t)(rows * cols) / (e2 ? 2u : 1u);
  bytes[M_S] = c->layout == BQ_SCALES_BLOCKED ? (size_t)((rows + 127) / 128 * 128 * ((ng + 3) / 4 * 4)) : (size_t)(rows * ng);
  if (c->fmt == MX_NV) bytes[M_G] = 4;
  /* one pass: the floats, the codes and the scales (the computed tensor scale reads x twice:
     its two-read bound is the ratio's reference) */
  r->bytes = (double)bytes[M_F] * (c->computed ? 2.0 : 1.0) + (double)bytes[M_Q] + (double)bytes[M_S];
  size_t set_bytes = 0;
  for (int i = 0; i < M_COUNT; i++) {
    x.stride[i] = (bytes[i] + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
    set_bytes += x.stride[i];
  }
  long nsets = pick_nsets(set_bytes);
  for (int i = 0; i < M_COUNT; i++) {
    if (!bytes[i]) continue;
    size_t b = x.stride[i] * (size_t)nsets;
    void *p = NULL;
    if (BQ(bq_malloc(&p, b))) goto done;
    x.base[i] = p;
    int bad;
    if (i == M_F && c->op != BQ_DEQUANTIZE) bad = fill_random(p, b, c->ft, -3, 3);
    else if (i == M_Q && c->op == BQ_DEQUANTIZE) bad = fill_random(p, b, BQ_U8, 0, 255);
    else if (i == M_S && !dyn) /* E4M3 codes 40 to 60 (0.25 to 1.5), UE8M0 120 to 130 (2^-7 to 2^3) */
      bad = fill_random(p, b, BQ_U8, c->fmt == MX_NV ? 40 : 120, c->fmt == MX_NV ? 60 : 130);
    else if (i == M_G) bad = fill_random(p, b, BQ_F32, 0.01, 0.02);
    else bad = BQ(bq_memset(p, 0xff, b)); /* outputs: poisoned */
    if (bad) goto done;
  }
  if (BQ(bq_synchronize(NULL))) goto done;
  x.a.rows = rows;
  x.a.cols = cols;
  x.a.group_size = G0;
  if (c->sr) x.a.seed = 7;
  x.a.rotation_block = c->rot;
  bq_args a0 = x.a;
  if (dyn) a0.out_scales = x.base[M_S];
  else a0.scales = x.base[M_S];
  if (c->op == BQ_DEQUANTIZE) a0.x = x.base[M_Q], a0.y = x.base[M_F];
  else a0.x = x.base[M_F], a0.y = x.base[M_Q];
  if (c->fmt == MX_NV && c->computed) a0.out_tensor_scale = x.base[M_G];
  else if (c->fmt == MX_NV) a0.tensor_scale = x.base[M_G];
  x.a = a0; /* (launch_mx replaces the pointers by set) */
  if (bq_check(bq_plan_can_implement(x.plan, &a0), "bq_plan_can_implement", __LINE__)) goto done;
  if (workspace_size(x.plan, &a0, &x.ws_bytes)) goto done;
  if (x.ws_bytes && BQ(bq_malloc(&x.ws, x.ws_bytes))) goto done;
  if (time_runs(launch_mx, &x, nsets, &r->t)) goto done;
  r->gbps = r->bytes / (r->t.median_us * 1e3);
  rc = 0;
done:
  if (BQ(bq_synchronize((void *)G.stream))) rc = -1;
  for (int i = 0; i < M_COUNT; i++)
    if (x.base[i]) BQ(bq_free(x.base[i]));
  if (x.ws) BQ(bq_free(x.ws));
  bq_plan_destroy(x.plan);
  return rc;
}
static void run_mx(void) {
  int header = 0;
  for (size_t i = 0; i < sizeof k_mx / sizeof k_mx[0]; i++) {
    const mx_case *c = &k_mx[i];
    char name[192];
    mx_name(c, name, sizeof name);
    if ((G.quick && !c->quick) || !matches(name)) continue;
    const size_t cb = (size_t)(mx_rows(c) * c->cols) * (size_t)bq__dtype_size(c->ft);
    const copy_result *cp = get_copy(cb);
    if (!header++) {
      printf("\n== microscaling: median of %d runs; GB/s = (floats + codes + scales) / time (a computed tensor "
             "scale reads the floats twice); ratio = GB/s / copy GB/s at the floats' size ==\n", G.reps);
      printf("%-64s %11s %9s %9s %6s\n", "case", "time_us", "GB/s", "copy_GB/s", "ratio");
    }
    row_result *r = new_row(name, cb);
    if (!r) return;
    if (run_mx_case(c, r) == 0) row_vs_copy(r, cp);
    print_row_vs_copy(r);
  }
}
#else
static void run_mx(void) {}
#endif

/* ---- the Hadamard rotation ---------------------------------------------------------------- */
/* rotate/hadamard/fwd/<float>/[rows,cols]/n=<block>[/signs]: x read, y written, against the
   copy of x's bytes (the ratio 1 is the copy's speed); bf16 activations' shapes, every block */
#ifdef BQ_FN_ROTATE2 /* (headers with the rotation) */
typedef struct rot_case {
  int64_t rows, cols;
  int n, signs;
} rot_case;
static const rot_case k_rot[] = {{8192, 4096, 16, 1},  {8192, 4096, 32, 1},   {8192, 4096, 64, 1}, {8192, 4096, 128, 1},
                                 {8192, 4096, 256, 1}, {8192, 4096, 128, 0},  {8192, 14336, 128, 1},
                                 {8192, 14336, 256, 1}};
typedef struct rot_ctx {
  bq_plan *plan;
  bq_args a;
  char *x, *y;
  size_t stride;
} rot_ctx;
static int launch_rot(void *p, long set) {
  rot_ctx *c = p;
  bq_args a = c->a;
  a.x = c->x + (size_t)set * c->stride;
  a.y = c->y + (size_t)set * c->stride;
  return BQ(bq_plan_run(c->plan, &a, NULL, 0, (void *)G.stream));
}
static int run_rot_case(const rot_case *c, row_result *r) {
  int rc = -1;
  bq_desc d = {0};
  d.op = BQ_HADAMARD;
  d.float_type = BQ_BF16;
  d.random_signs = c->signs;
  rot_ctx x;
  memset(&x, 0, sizeof x);
  if (BQ(bq_plan_select(&d, &x.plan))) return -1; /* the JIT compile stays out of the timing */
  copy_str(r->sku, sizeof r->sku, bq_plan_sku(x.plan));
  const size_t bytes = (size_t)(c->rows * c->cols) * 2u;
  r->bytes = 2.0 * (double)bytes; /* x read, y written */
  x.stride = (bytes + SET_ALIGN - 1) / SET_ALIGN * SET_ALIGN;
  const long nsets = pick_nsets(2 * x.stride);
  void *px = NULL, *py = NULL;
  if (BQ(bq_malloc(&px, x.stride * (size_t)nsets)) || BQ(bq_malloc(&py, x.stride * (size_t)nsets))) goto done;
  x.x = px, x.y = py;
  if (fill_random(px, x.stride * (size_t)nsets, BQ_BF16, -3, 3) || BQ(bq_memset(py, 0xff, x.stride * (size_t)nsets)) ||
      BQ(bq_synchronize(NULL)))
    goto done;
  x.a.rows = c->rows, x.a.cols = c->cols, x.a.group_size = c->n, x.a.seed = c->signs ? 0x5eed : 0;
  x.a.x = px, x.a.y = py;
  if (bq_check(bq_plan_can_implement(x.plan, &x.a), "bq_plan_can_implement", __LINE__)) goto done;
  if (time_runs(launch_rot, &x, nsets, &r->t)) goto done;
  r->gbps = r->bytes / (r->t.median_us * 1e3);
  rc = 0;
done:
  if (BQ(bq_synchronize((void *)G.stream))) rc = -1;
  if (px) BQ(bq_free(px));
  if (py) BQ(bq_free(py));
  bq_plan_destroy(x.plan);
  return rc;
}
static void run_rot(void) {
  int header = 0;
  for (size_t i = 0; i < sizeof k_rot / sizeof k_rot[0]; i++) {
    const rot_case *c = &k_rot[i];
    char name[192];
    snprintf(name, sizeof name, "rotate/hadamard/fwd/bf16/[%lld,%lld]/n=%d%s", (long long)c->rows, (long long)c->cols,
             c->n, c->signs ? "/signs" : "");
    if (!matches(name)) continue;
    const size_t cb = (size_t)(c->rows * c->cols) * 2u;
    const copy_result *cp = get_copy(cb);
    if (!header++) {
      printf("\n== rotation: median of %d runs; GB/s = (x read + y written) / time; ratio = GB/s / copy GB/s at "
             "x's size ==\n", G.reps);
      printf("%-64s %11s %9s %9s %6s\n", "case", "time_us", "GB/s", "copy_GB/s", "ratio");
    }
    row_result *r = new_row(name, cb);
    if (!r) return;
    if (run_rot_case(c, r) == 0) row_vs_copy(r, cp);
    print_row_vs_copy(r);
  }
}
#else
static void run_rot(void) {}
#endif

/* ---- JIT figures ------------------------------------------------------------------------ */
/* Distinct SKUs that differ only in their q range: each one is a cold compile. */
static bq_desc jit_desc(int k) {
  bq_desc d = {0};
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_F32;
  d.int_type = BQ_S8;
  d.qmin = -k;
  d.qmax = k;
  return d;
}
#define JIT_WARM_K 100

typedef struct stat5 { double median, mean, min, max; int n; } stat5;
static stat5 summarize(double *v, int n) {
  stat5 s = {NAN, NAN, NAN, NAN, n};
  if (n <= 0) return s;
  s.mean = mean(v, n);
  s.median = median(v, n); /* sorts */
  s.min = v[0];
  s.max = v[n - 1];
  return s;
}

static struct {
  int ran;
  char cache_dir[512];
  double first_select_ms;
  stat5 cold_ms, nvrtc_ms;
  unsigned long long cold_compiles;
  stat5 disk_first_ms, disk_second_ms;
  unsigned long long disk_hits, disk_compiles;
  int children_ok;
  stat5 mem_us;
  unsigned long long mem_hits;
  double run_us, run_sync_us;
  int run_n;
} J;

/* The child: one fresh process, the driver already up, two selects of SKUs that are on
   disk. Prints one line for the parent. */
static int child_disk_select(const char *dir) {
  setenv("BARACUDA_QUANT_CACHE_DIR", dir, 1);
  if (!bq__driver_get()) {
    fprintf(stderr, "bench child: no CUDA driver or device\n");
    return 2;
  }
  void *p = NULL; /* context creation stays out of the timing */
  if (BQ(bq_malloc(&p, 1)) || BQ(bq_free(p))) return 1;
  bq_desc a = jit_desc(1), b = jit_desc(2);
  bq_plan *pa = NULL, *pb = NULL;
  double t0 = now_us();
  if (BQ(bq_plan_select(&a, &pa))) return 1;
  double t1 = now_us();
  if (BQ(bq_plan_select(&b, &pb))) return 1;
  double t2 = now_us();
  bq_cache_stats st;
  bq_cache_get_stats(&st);
  bq_plan_destroy(pa);
  bq_plan_destroy(pb);
  printf("disk_select first_us=%.3f second_us=%.3f disk_hits=%llu compiles=%llu\n", t1 - t0,
         t2 - t1, (unsigned long long)st.disk_hits, (unsigned long long)st.compiles);
  return 0;
}

static int spawn_child(const char *dir, double *first_us, double *second_us,
                       unsigned long long *hits, unsigned long long *compiles) {
  int fds[2];
  if (pipe(fds)) return fail("pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return fail("fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(127);
    close(fds[1]);
    char arg0[] = "bench", arg1[] = "--child-disk-select";
    char *argv[] = {arg0, arg1, (char *)dir, NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fds[1]);
  char buf[512];
  size_t len = 0;
  for (;;) {
    ssize_t k = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    len += (size_t)k;
    if (len == sizeof buf - 1) break;
  }
  buf[len] = 0;
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return fail("disk-select child exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  if (sscanf(buf, "disk_select first_us=%lf second_us=%lf disk_hits=%llu compiles=%llu",
             first_us, second_us, hits, compiles) != 4)
    return fail("disk-select child printed '%s'", buf);
  return 0;
}

static void run_jit(void) {
  J.ran = 1;
  const char *cd = bq_cache_directory();
  copy_str(J.cache_dir, sizeof J.cache_dir, cd ? cd : "(disk cache off)");
  printf("\n== JIT (cache directory %s) ==\n", J.cache_dir);
  if (!cd || strcmp(cd, G.cache_dir) != 0)
    fprintf(stderr, "bench: warning: the library does not use the fresh cache directory %s\n",
            G.cache_dir);

  /* (a) cold compiles: the first select pays NVRTC's start-up, then N distinct SKUs. */
  bq_cache_stats s0, s1;
  bq_desc w = jit_desc(JIT_WARM_K);
  bq_plan *p = NULL;
  double t0 = now_us();
  if (BQ(bq_plan_select(&w, &p))) return;
  J.first_select_ms = (now_us() - t0) * 1e-3;
  bq_plan_destroy(p);
  int n = G.jit_cold_n;
  double *v = malloc(sizeof *v * (size_t)(n > G.jit_memory_n ? n : G.jit_memory_n));
  double *v2 = malloc(sizeof *v2 * (size_t)G.jit_children);
  if (!v || !v2) {
    free(v);
    free(v2);
    fail("out of host memory");
    return;
  }
  bq_cache_get_stats(&s0);
  int ok = 1;
  for (int k = 1; k <= n && ok; k++) {
    bq_desc d = jit_desc(k);
    p = NULL;
    t0 = now_us();
    ok = !BQ(bq_plan_select(&d, &p));
    v[k - 1] = (now_us() - t0) * 1e-3;
    if (ok) bq_plan_destroy(p);
  }
  bq_cache_get_stats(&s1);
  J.cold_compiles = (unsigned long long)(s1.compiles - s0.compiles);
  if (ok) J.cold_ms = summarize(v, n);
  printf("first select (NVRTC start-up + compile + load): %.2f ms\n", J.first_select_ms);
  printf("cold select (compile + module load), %d SKUs:  median %.2f ms, mean %.2f, min %.2f, "
         "max %.2f (%llu compiles)\n",
         n, J.cold_ms.median, J.cold_ms.mean, J.cold_ms.min, J.cold_ms.max, J.cold_compiles);
  if (ok && J.cold_compiles != (unsigned long long)n)
    fprintf(stderr, "bench: warning: %d cold selects ran %llu compiles\n", n, J.cold_compiles);

  /* (a') the compile alone: NVRTC into the disk cache (bq_cache_warm), no module load, on
     N more distinct SKUs */
  bq__CUcontext ctx = NULL;
  bq__device_info info;
  memset(&info, 0, sizeof info);
  J.nvrtc_ms = summarize(v, 0);
  if (ok && !bq__current_device(0, &ctx, &info) && info.sm > 0) {
    int m = 0;
    for (int k = n + 1; k <= 2 * n; k++) {
      bq_desc d = jit_desc(k);
      t0 = now_us();
      if (BQ(bq_cache_warm(&d, info.sm))) break;
      v[m++] = (now_us() - t0) * 1e-3;
    }
    J.nvrtc_ms = summarize(v, m);
    printf("cold compile alone (NVRTC, bq_cache_warm), %d SKUs: median %.2f ms, mean %.2f, min %.2f, "
           "max %.2f\n", m, J.nvrtc_ms.median, J.nvrtc_ms.mean, J.nvrtc_ms.min, J.nvrtc_ms.max);
  }

  /* (b) disk hits in fresh processes */
  if (ok) {
    int m = 0;
    for (int i = 0; i < G.jit_children; i++) {
      double f = 0, s = 0;
      unsigned long long h = 0, c = 0;
      if (spawn_child(G.cache_dir, &f, &s, &h, &c)) continue;
      v[m] = f * 1e-3;
      v2[m] = s * 1e-3;
      m++;
      J.disk_hits += h;
      J.disk_compiles += c;
    }
    J.children_ok = m;
    J.disk_first_ms = summarize(v, m);
    J.disk_second_ms = summarize(v2, m);
    printf("disk select, fresh process (%d runs): first select median %.3f ms (min %.3f, max "
           "%.3f), second select median %.3f ms; disk hits %llu, compiles %llu\n",
           m, J.disk_first_ms.median, J.disk_first_ms.min, J.disk_first_ms.max,
           J.disk_second_ms.median, J.disk_hits, J.disk_compiles);
    if (m && J.disk_compiles)
      fprintf(stderr, "bench: warning: the disk-select children compiled %llu kernels\n",
              J.disk_compiles);
  }

  /* (c) select served from memory */
  if (ok) {
    bq_desc d = jit_desc(1);
    bq_cache_get_stats(&s0);
    for (int i = 0; i < G.jit_memory_n && ok; i++) {
      p = NULL;
      t0 = now_us();
      ok = !BQ(bq_plan_select(&d, &p));
      v[i] = now_us() - t0;
      if (ok) bq_plan_destroy(p);
    }
    bq_cache_get_stats(&s1);
    J.mem_hits = (unsigned long long)(s1.memory_hits - s0.memory_hits);
    if (ok) J.mem_us = summarize(v, G.jit_memory_n);
    printf("memory select (%d calls): median %.3f us, mean %.3f us, max %.1f us (%llu memory "
           "hits)\n",
           G.jit_memory_n, J.mem_us.median, J.mem_us.mean, J.mem_us.max, J.mem_hits);
  }
  free(v);
  free(v2);

  /* (d) host cost of bq_plan_run on a tiny problem */
  bq_desc d = {0};
  d.op = BQ_QUANTIZE;
  d.float_type = BQ_F32;
  void *x = NULL, *y = NULL;
  p = NULL;
  if (BQ(bq_plan_select(&d, &p))) return;
  if (!BQ(bq_malloc(&x, 256 * 4)) && !BQ(bq_malloc(&y, 256)) &&
      !fill_random(x, 256 * 4, BQ_F32, -3, 3) && !BQ(bq_synchronize(NULL))) {
    bq_args a = {0};
    a.x = x;
    a.y = y;
    a.numel = 256;
    a.scale = 0.02;
    a.zero_point = 3;
    int bad = 0;
    for (int i = 0; i < 100 && !bad; i++)
      bad = BQ(bq_plan_run(p, &a, NULL, 0, (void *)G.stream));
    if (!bad) bad = BQ(bq_synchronize((void *)G.stream));
    t0 = now_us();
    for (int i = 0; i < G.jit_run_n && !bad; i++)
      bad = BQ(bq_plan_run(p, &a, NULL, 0, (void *)G.stream));
    double t1 = now_us();
    if (!bad) bad = BQ(bq_synchronize((void *)G.stream));
    double t2 = now_us();
    if (!bad) {
      J.run_n = G.jit_run_n;
      J.run_us = (t1 - t0) / G.jit_run_n;
      J.run_sync_us = (t2 - t0) / G.jit_run_n;
      printf("bq_plan_run host time, numel 256 (%d calls): %.3f us per call (%.3f us with the "
             "final synchronize)\n",
             J.run_n, J.run_us, J.run_sync_us);
    }
  }
  if (x) BQ(bq_free(x));
  if (y) BQ(bq_free(y));
  bq_plan_destroy(p);
  fflush(stdout);
}

/* ---- JSON ----------------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}
static void json_num(FILE *f, double x) {
  if (isfinite(x)) fprintf(f, "%.6g", x);
  else fputs("null", f);
}
static void json_stat(FILE *f, const char *key, stat5 s) {
  fprintf(f, "\"%s\": {\"n\": %d, \"median\": ", key, s.n);
  json_num(f, s.median);
  fputs(", \"mean\": ", f);
  json_num(f, s.mean);
  fputs(", \"min\": ", f);
  json_num(f, s.min);
  fputs(", \"max\": ", f);
  json_num(f, s.max);
  fputs("}", f);
}

static void json_str_or_null(FILE *f, const char *s) {
  if (s && *s) json_str(f, s);
  else fputs("null", f);
}

/* What was measured, where and with what: its own object, so that no other field (filter,
   device) ever has to carry it. Called after the measurements, so that loading NVRTC here
   (a no-op by then) never lands in a JIT figure. */
static void write_provenance(FILE *f) {
  const bq__driver_api *d = G.d;
  fputs("  \"provenance\": {\n    \"library_version\": ", f);
  json_str(f, bq_version_string());
  fputs(",\n    \"date_utc\": ", f);
  json_str_or_null(f, G.date_utc);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1)) host[0] = 0;
  host[sizeof host - 1] = 0;
  fputs(",\n    \"hostname\": ", f);
  json_str_or_null(f, host);
  fputs(",\n    \"gpu\": ", f);
  json_str_or_null(f, G.device);
  /* compute capability of the context's device, straight from the driver table */
  bq__CUdevice dev;
  int major = 0, minor = 0;
  if (d && d->cuCtxGetDevice(&dev) == 0 &&
      d->cuDeviceGetAttribute(&major, BQ__CU_ATTR_CC_MAJOR, dev) == 0 &&
      d->cuDeviceGetAttribute(&minor, BQ__CU_ATTR_CC_MINOR, dev) == 0)
    fprintf(f, ",\n    \"compute_capability\": \"%d.%d\"", major, minor);
  else
    fputs(",\n    \"compute_capability\": null", f);
  /* cuDriverGetVersion: the CUDA version the driver supports (13000 = 13.0) */
  int dv = d ? d->version : 0;
  if (dv > 0)
    fprintf(f, ",\n    \"driver_version\": \"%d.%d\",\n    \"driver_version_int\": %d", dv / 1000,
            dv % 1000 / 10, dv);
  else
    fputs(",\n    \"driver_version\": null,\n    \"driver_version_int\": null", f);
  /* the kernel module's own version line, where the system shows it */
  char line[256] = "";
  FILE *v = fopen("/proc/driver/nvidia/version", "r");
  if (v) {
    if (!fgets(line, sizeof line, v)) line[0] = 0;
    fclose(v);
  }
  line[strcspn(line, "\r\n")] = 0;
  fputs(",\n    \"kernel_driver\": ", f);
  json_str_or_null(f, line);
  /* the NVRTC the library loaded: version and the library file's identity */
  const bq__nvrtc_api *nv = bq__nvrtc_get();
  if (nv) {
    fprintf(f, ",\n    \"nvrtc_version\": \"%d.%d\",\n    \"nvrtc_identity\": ", nv->major,
            nv->minor);
    json_str(f, nv->identity);
  } else {
    fputs(",\n    \"nvrtc_version\": null,\n    \"nvrtc_identity\": null", f);
  }
  fputs(",\n    \"argv\": [", f);
  for (int i = 0; i < G.argc; i++) {
    if (i) fputs(", ", f);
    json_str(f, G.argv[i]);
  }
  fputs("],\n    \"commit\": ", f);
  json_str_or_null(f, G.commit);
  fputs(",\n    \"header_sha256\": ", f);
  json_str_or_null(f, G.header_sha256);
  fputs("\n  },\n", f);
}

static int write_json(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return fail("cannot write %s: %s", path, strerror(errno));
  fputs("{\n  \"tool\": \"baracuda_quant bench\",\n", f);
  write_provenance(f);
  fputs("  \"library_version\": ", f);
  json_str(f, bq_version_string());
  fputs(",\n  \"device\": ", f);
  json_str(f, G.device);
  fprintf(f, ",\n  \"quick\": %s,\n  \"reps\": %d,\n  \"warmup\": %d,\n  \"filter\": ",
          G.quick ? "true" : "false", G.reps, G.warmup);
  if (G.filter) json_str(f, G.filter);
  else fputs("null", f);
  fputs(",\n  \"copy\": [", f);
  for (int i = 0; i < g_ncopies; i++) {
    const copy_result *c = &g_copies[i];
    fprintf(f, "%s\n    {\"bytes\": %zu, \"ok\": %s, \"median_us\": ", i ? "," : "", c->bytes,
            c->ok ? "true" : "false");
    json_num(f, c->ok ? c->t.median_us : NAN);
    fputs(", \"min_us\": ", f);
    json_num(f, c->ok ? c->t.min_us : NAN);
    fputs(", \"gbps\": ", f);
    json_num(f, c->ok ? c->gbps : NAN);
    fputs("}", f);
  }
  fputs("\n  ],\n  \"rows\": [", f);
  for (int i = 0; i < g_nrows; i++) {
    const row_result *r = &g_rows[i];
    fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
    json_str(f, r->name);
    fputs(", \"sku\": ", f);
    json_str(f, r->sku);
    fprintf(f, ", \"ok\": %s, \"bytes\": ", r->ok ? "true" : "false");
    json_num(f, r->bytes);
    fprintf(f, ", \"copy_bytes\": %zu, \"median_us\": ", r->copy_bytes);
    json_num(f, r->ok ? r->t.median_us : NAN);
    fputs(", \"min_us\": ", f);
    json_num(f, r->ok ? r->t.min_us : NAN);
    fputs(", \"gbps\": ", f);
    json_num(f, r->ok ? r->gbps : NAN);
    fputs(", \"copy_gbps\": ", f);
    json_num(f, r->ok ? r->copy_gbps : NAN);
    fputs(", \"copy_us\": ", f);
    json_num(f, r->ok ? r->copy_us : NAN);
    fputs(", \"ratio\": ", f);
    json_num(f, r->ok ? r->ratio : NAN);
    if (r->tops > 0) {
      fputs(", \"tops\": ", f);
      json_num(f, r->tops);
    }
    if (r->ok && r->ref_us > 0) {
      fputs(", \"ref_name\": ", f);
      json_str(f, r->ref_name);
      fputs(", \"ref_us\": ", f);
      json_num(f, r->ref_us);
      fputs(", \"minus_ref_us\": ", f);
      json_num(f, r->t.median_us - r->ref_us);
    }
    fputs("}", f);
  }
  fputs("\n  ],\n  \"jit\": ", f);
  if (J.ran) {
    fputs("{\n    \"cache_dir\": ", f);
    json_str(f, J.cache_dir);
    fputs(",\n    \"first_select_ms\": ", f);
    json_num(f, J.first_select_ms);
    fputs(",\n    ", f);
    json_stat(f, "cold_select_ms", J.cold_ms);
    fprintf(f, ",\n    ");
    json_stat(f, "cold_compile_nvrtc_ms", J.nvrtc_ms);
    fprintf(f, ",\n    \"cold_compiles\": %llu,\n    ", J.cold_compiles);
    json_stat(f, "disk_first_select_ms", J.disk_first_ms);
    fputs(",\n    ", f);
    json_stat(f, "disk_second_select_ms", J.disk_second_ms);
    fprintf(f, ",\n    \"disk_hits\": %llu,\n    \"disk_child_compiles\": %llu,\n    ",
            J.disk_hits, J.disk_compiles);
    json_stat(f, "memory_select_us", J.mem_us);
    fprintf(f, ",\n    \"memory_hits\": %llu,\n    \"run_calls\": %d,\n    \"run_host_us\": ",
            J.mem_hits, J.run_n);
    json_num(f, J.run_n ? J.run_us : NAN);
    fputs(",\n    \"run_host_us_with_sync\": ", f);
    json_num(f, J.run_n ? J.run_sync_us : NAN);
    fputs("\n  }", f);
  } else {
    fputs("null", f);
  }
  fprintf(f, ",\n  \"failures\": %d\n}\n", G.failures);
  if (fclose(f)) return fail("cannot write %s: %s", path, strerror(errno));
  return 0;
}

/* ---- main --------------------------------------------------------------------------------- */
static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench [--quick] [--filter SUBSTRING] [--json PATH] [--reps N] [--warmup N]\n"
          "             [--commit SHA] [--header-sha256 HEX]\n"
          "  --quick      fewer repetitions; 256 MiB and one small size only\n"
          "  --filter S   only rows whose name contains S, or any of S's comma-separated parts\n"
          "               (a comma inside [...] belongs to the shape)\n"
          "               (names: per_tensor/quantize/fwd/f32/\n"
          "               s8/[67108864], copy/268435456, fused/ (the fused producers and\n"
          "               their dynamic quantize rows), jit/cold_compile, jit/disk_select,\n"
          "               jit/memory_select, jit/run_overhead)\n"
          "  --json PATH  where the JSON goes (default bench.json)\n"
          "  --reps N     timed runs per row (default 100, --quick 20)\n"
          "  --warmup N   untimed runs before them (default 10, --quick 3)\n"
          "  --commit SHA          the commit measured, for the JSON's provenance\n"
          "                        (default: $BQ_BENCH_COMMIT)\n"
          "  --header-sha256 HEX   sha256 of the baracuda_quant.h this was built from\n"
          "                        (default: $BQ_BENCH_HEADER_SHA256)\n");
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--child-disk-select")) return child_disk_select(argv[2]);

  G.json_path = "bench.json";
  int reps = -1, warmup = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--quick")) G.quick = 1;
    else if (!strcmp(a, "--filter") && i + 1 < argc) G.filter = argv[++i];
    else if (!strcmp(a, "--json") && i + 1 < argc) G.json_path = argv[++i];
    else if (!strcmp(a, "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(a, "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
    else if (!strcmp(a, "--commit") && i + 1 < argc) G.commit = argv[++i];
    else if (!strcmp(a, "--header-sha256") && i + 1 < argc) G.header_sha256 = argv[++i];
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "bench: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 64;
    }
  }
  if (!G.commit) G.commit = getenv("BQ_BENCH_COMMIT");
  if (!G.header_sha256) G.header_sha256 = getenv("BQ_BENCH_HEADER_SHA256");
  G.argc = argc;
  G.argv = argv;
  time_t start = time(NULL);
  struct tm utc;
  if (!gmtime_r(&start, &utc) ||
      !strftime(G.date_utc, sizeof G.date_utc, "%Y-%m-%dT%H:%M:%SZ", &utc))
    G.date_utc[0] = 0;
  G.reps = reps > 0 ? reps : (G.quick ? 20 : 100);
  G.warmup = warmup >= 0 ? warmup : (G.quick ? 3 : 10);
  G.jit_cold_n = G.quick ? 10 : 16;
  G.jit_children = G.quick ? 3 : 10;
  G.jit_memory_n = 10000;
  G.jit_run_n = 10000;

  /* A fresh, empty kernel cache, set before the library reads the variable: every
     compile in this run is cold and the user's cache is left alone. */
  snprintf(G.cache_dir, sizeof G.cache_dir, "/tmp/bq_bench_cache_XXXXXX");
  if (!mkdtemp(G.cache_dir)) {
    fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  setenv("BARACUDA_QUANT_CACHE_DIR", G.cache_dir, 1);

  G.d = bq__driver_get();
  if (!G.d) {
    const char *e = bq_last_error();
    char msg[256];
    copy_str(msg, sizeof msg, e);
    msg[strcspn(msg, "\r\n")] = 0;
    fprintf(stderr, "bench: no CUDA driver or GPU available, nothing measured%s%s\n",
            msg[0] ? ": " : "", msg);
    rmdir(G.cache_dir);
    return 2;
  }
  const bq__driver_api *d = G.d;
  void *one = NULL; /* makes the library's context current on this thread */
  if (BQ(bq_malloc(&one, 1)) || BQ(bq_free(one))) goto out;
  if (BQ(bq_device_name(G.device, sizeof G.device))) goto out;
  printf("baracuda_quant %s bench on %s%s\n", bq_version_string(), G.device,
         G.quick ? " (--quick)" : "");
  if (DRV(d->cuStreamCreate(&G.stream, 0))) goto out;
  G.ev = calloc((size_t)(2 * G.reps), sizeof *G.ev);
  if (!G.ev) {
    fail("out of host memory");
    goto out;
  }
  for (int i = 0; i < 2 * G.reps; i++)
    if (DRV(d->cuEventCreate(&G.ev[i], 0))) goto out;
  if (BQ(bq_malloc(&G.scratch, SCRATCH_BYTES))) goto out;

  if (matches("jit/cold_compile") || matches("jit/disk_select") ||
      matches("jit/memory_select") || matches("jit/run_overhead"))
    run_jit();
  run_cases();
  run_linear();
  run_fused();
  run_mx();
  run_rot();

  printf("\n");
  if (write_json(G.json_path) == 0) printf("JSON written to %s\n", G.json_path);

out:
  if (G.scratch) BQ(bq_free(G.scratch));
  if (G.ev)
    for (int i = 0; i < 2 * G.reps; i++)
      if (G.ev[i]) DRV(d->cuEventDestroy(G.ev[i]));
  free(G.ev);
  if (G.stream) DRV(d->cuStreamDestroy(G.stream));
  free(g_rows);
  free(g_copies);
  nftw(G.cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (G.failures) fprintf(stderr, "bench: %d call(s) failed\n", G.failures);
  return G.failures ? 1 : 0;
}
