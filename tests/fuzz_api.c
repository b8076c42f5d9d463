/* fuzz_api.c - the public plan API under arbitrary descriptors and arguments, against the
   fake driver (tests/fake_driver.c), which aborts on any launch outside the launch limits.

   Built two ways: with libFuzzer (clang -fsanitize=fuzzer,address,undefined
   -DBQ_LIBFUZZER), and as a plain program (any C compiler) whose main() replays the files
   and directories it is given, so that the committed corpus runs in every build.

   The input decodes (missing bytes read as 0) as:
     u8 kind % 4   0: a descriptor of the prebuilt table (u8 index), then u8 count edits of
                      (u8 field, i32 value); 1: eleven raw i32 fields; 2: a NULL desc;
                      3: calls with a NULL plan
     u8 base       odd: arguments start from a valid call of the plan's kind, else zeros
     u8 workspace  0 NULL, 1 what the plan asks, 2 one byte less, 3 misaligned, 4 huge
     u8 stream     0 NULL, else a fake stream
     then (u8 field, value) edits of bq_args until the input ends: pointers, sizes
     (interesting values or raw 64-bit), ints and doubles.
   A descriptor that validates is selected only where its normalized form equals one of the
   prebuilt table's (each compiles once, into BARACUDA_QUANT_CACHE_DIR, a temporary
   directory by default), so the fuzzer never waits on NVRTC; the others still go through
   every validation rule.

   What fails the run (abort):
   - a launch outside the launch limits (the fake driver aborts);
   - a rejection whose status is not BQ_ERROR_INVALID_ARGUMENT, BQ_ERROR_NOT_SUPPORTED or
     BQ_ERROR_INSUFFICIENT_WORKSPACE, or whose message names no field: it must contain
     "desc." or "args." or "workspace (", or be one of the NULL-argument messages of the
     function called ("bq_plan_select: desc is NULL", "<plan>: args is NULL", "...: plan
     is NULL");
   - bq_plan_run disagreeing with bq_plan_can_implement: when the arguments are rejected,
     run must return the same status and message; when they are accepted, run may fail only
     for its workspace (BQ_ERROR_INSUFFICIENT_WORKSPACE or a misaligned one);
   - bq_plan_select and bq_sku disagreeing on a descriptor's status;
   - a crash, or what AddressSanitizer and UndefinedBehaviorSanitizer report. */
#define _GNU_SOURCE
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../baracuda_quant.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void die(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_api: %s: %s\n", what, detail);
  abort();
}

/* ---- the input ------------------------------------------------------------------------- */
typedef struct reader { const uint8_t *p; size_t n; } reader;
static uint8_t u8(reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}
static uint64_t u64(reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i);
  return v;
}
static int32_t i32(reader *r) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)u8(r) << (8 * i);
  return (int32_t)v;
}

static const int64_t INTERESTING[] = {
  0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 257, 1000, 4095, 4096, 65535, 65536,
  ((int64_t)1 << 24) - 1, (int64_t)1 << 24, ((int64_t)1 << 24) + 1, ((int64_t)1 << 27) + 3,
  0x7fffffffLL, 0x80000000LL, 0xffffffffLL, (int64_t)1 << 32, ((int64_t)1 << 39) - 1, (int64_t)1 << 39,
  ((int64_t)1 << 39) + 1, (int64_t)1 << 41, ((int64_t)1 << 56) - 1, (int64_t)1 << 56, ((int64_t)1 << 56) + 1,
  (int64_t)1 << 62, INT64_MAX, -1, -2, -4096, INT64_MIN};
static int64_t size_value(reader *r) {
  uint8_t s = u8(r);
  if (s < NELEM(INTERESTING)) return INTERESTING[s];
  if (s < 200) return (int64_t)(s - NELEM(INTERESTING)) * 4;
  return (int64_t)u64(r);
}
/* fake device addresses, 256-byte aligned, never dereferenced */
static const void *ptr_value(reader *r) {
  uint8_t s = u8(r);
  if (s == 0) return NULL;
  if (s < 128) return (const void *)(uintptr_t)(0x100000000ull + (uint64_t)s * 0x1000000ull);
  if (s < 240) return (const void *)(uintptr_t)(0x100000000ull + (uint64_t)(s & 15) * 0x1000000ull + (s >> 4 & 7) + 1);
  return (const void *)(uintptr_t)u64(r);
}
static double double_value(reader *r) {
  static const double D[] = {0.25, 1.0, 0.0, -1.0, 1e-30, 1e-45, 1e-300, 3.5e38, 1e300, 1.0 / 0.0, -1.0 / 0.0,
                             0.0 / 0.0, 2.0, 0.1};
  uint8_t s = u8(r);
  if (s < NELEM(D)) return D[s];
  uint64_t bits = u64(r);
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* ---- the prebuilt plans ------------------------------------------------------------------ */
typedef struct tdesc { bq_op op; bq_direction dir; bq_granularity g; bq_dtype ft; int asym; bq_dtype out; } tdesc;
static const tdesc TABLE[] = {
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32, 0, 0},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32, 0, 0},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64, 0, 0},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, 0, 0},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16, 0, 0},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32, 0, 0},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64, 0, 0},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16, 0, 0},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16, 0, 0},
  {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32, 0, 0},
  {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, 0, 0},
  {BQ_DYNAMIC_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16, 1, 0},
  {BQ_LINEAR_WEIGHT_SUMS, BQ_FORWARD, 0, 0, 0, 0},
  {BQ_SMOOTHQUANT_LINEAR, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16, 0, 0},
  {BQ_SMOOTHQUANT_LINEAR, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16, 1, 0},
  {BQ_QUANTIZED_LINEAR, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32, 0, BQ_F16},
};
static bq_desc table_desc[NELEM(TABLE)], table_norm[NELEM(TABLE)];
static bq_plan *table_plan[NELEM(TABLE)];

static const char *driver_path(const char *argv0) {
  static char path[4096];
  const char *env = getenv("BQ_FAKE_DRIVER");
  if (env && *env) return env;
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) n = 0;
  exe[n] = 0;
  (void)argv0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  snprintf(path, sizeof path, "%s/libbq_fake_driver.so", exe);
  return path;
}

static int initialized;
static void setup(const char *argv0) {
  if (initialized) return;
  initialized = 1;
  setenv("BARACUDA_QUANT_DRIVER", driver_path(argv0), 1);
  unsetenv("FAKE_CUDA_MODE");
  setenv("BARACUDA_QUANT_QUIET", "1", 1);
  if (!getenv("BARACUDA_QUANT_CACHE_DIR")) {
    static char dir[] = "/tmp/bq_fuzz_cache_XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp", dir);
    setenv("BARACUDA_QUANT_CACHE_DIR", dir, 1);
  }
  for (size_t i = 0; i < NELEM(TABLE); i++) {
    bq_desc d;
    memset(&d, 0, sizeof d);
    d.op = TABLE[i].op;
    d.direction = TABLE[i].dir;
    d.granularity = TABLE[i].g;
    d.float_type = TABLE[i].ft;
    d.asymmetric = TABLE[i].asym;
    d.out_type = TABLE[i].out;
    table_desc[i] = d;
    char name[96];
    if (bq__normalize(&d, &table_norm[i], name, sizeof name)) die("table desc invalid", bq_last_error());
    bq_status st = bq_plan_select(&d, &table_plan[i]);
    if (st) die("prebuilding a plan", bq_last_error());
  }
}

/* ---- the rules ----------------------------------------------------------------------------- */
static void check_rejection(bq_status st, const char *where) {
  char buf[1200];
  const char *m = bq_last_error();
  snprintf(buf, sizeof buf, "%s -> %s: \"%s\"", where, bq_status_name(st), m);
  if (st != BQ_ERROR_INVALID_ARGUMENT && st != BQ_ERROR_NOT_SUPPORTED && st != BQ_ERROR_INSUFFICIENT_WORKSPACE)
    die("a rejection with an unexpected status", buf);
  if (strstr(m, "desc.") || strstr(m, "args.") || strstr(m, "workspace (")) return;
  static const char *const NULLS[] = {"bq_plan_select: desc is NULL", "bq_plan_select: plan is NULL",
                                      ": args is NULL", "bq_plan_can_implement: plan is NULL",
                                      "bq_plan_run: plan is NULL", "bq_plan_workspace_size: plan is NULL"};
  for (size_t i = 0; i < NELEM(NULLS); i++)
    if (strstr(m, NULLS[i])) return;
  die("a rejection that names no field", buf);
}

static int same_norm(const bq_desc *a, const bq_desc *b) {
  return a->op == b->op && a->direction == b->direction && a->granularity == b->granularity &&
         a->float_type == b->float_type && a->int_type == b->int_type && a->qmin == b->qmin && a->qmax == b->qmax &&
         a->scale_type == b->scale_type && a->asymmetric == b->asymmetric && a->out_type == b->out_type;
}

/* a valid, small call of the plan's kind, every pointer set and aligned */
static void base_args(const bq_desc *n, bq_args *a) {
  a->x = (const void *)(uintptr_t)0x100000000ull;
  a->y = (void *)(uintptr_t)0x200000000ull;
  a->dy = (const void *)(uintptr_t)0x300000000ull;
  a->dx = (void *)(uintptr_t)0x400000000ull;
  a->scales = (const void *)(uintptr_t)0x500000000ull;
  a->out_scales = (void *)(uintptr_t)0x600000000ull;
  a->out_zero_points = (int32_t *)(uintptr_t)0x700000000ull;
  a->w = (const void *)(uintptr_t)0x800000000ull;
  a->w_scales = (const void *)(uintptr_t)0x900000000ull;
  a->scale = 0.25;
  if (bq__is_linear(n->op)) {
    a->rows = 33;
    a->cols = 256;
    a->n = 65;
    if (n->asymmetric) {
      a->w_sums = (const int32_t *)(uintptr_t)0xa00000000ull;
      a->zero_points = (const int32_t *)(uintptr_t)0xb00000000ull;
      a->zero_point = 3;
    }
    return;
  }
  a->zero_points = (const int32_t *)(uintptr_t)0xb00000000ull;
  switch (n->granularity) {
  case BQ_PER_TENSOR: a->numel = 1000; break;
  case BQ_PER_CHANNEL: a->rank = 3; a->shape[0] = 2; a->shape[1] = 3; a->shape[2] = 64; a->axis = 2; break;
  case BQ_PER_TOKEN: a->rows = 4; a->cols = 64; break;
  default: a->rows = 4; a->cols = 64; a->group_size = 16; break;
  }
}

static void edit_args(reader *r, bq_args *a) {
  while (r->n) {
    uint8_t f = u8(r) % 27;
    switch (f) {
    case 0: a->x = ptr_value(r); break;
    case 1: a->y = (void *)ptr_value(r); break;
    case 2: a->dy = ptr_value(r); break;
    case 3: a->dx = (void *)ptr_value(r); break;
    case 4: a->numel = size_value(r); break;
    case 5: a->rank = i32(r); break;
    case 6: { uint8_t k = u8(r) % BQ_MAX_RANK; a->shape[k] = size_value(r); break; }
    case 7: a->axis = i32(r); break;
    case 8: a->rows = size_value(r); break;
    case 9: a->cols = size_value(r); break;
    case 10: a->x_row_stride = size_value(r); break;
    case 11: a->y_row_stride = size_value(r); break;
    case 12: a->group_size = size_value(r); break;
    case 13: a->group_row_stride = size_value(r); break;
    case 14: a->scale = double_value(r); break;
    case 15: a->zero_point = i32(r); break;
    case 16: a->scales = ptr_value(r); break;
    case 17: a->zero_points = (const int32_t *)ptr_value(r); break;
    case 18: a->out_scales = (void *)ptr_value(r); break;
    case 19: a->out_zero_points = (int32_t *)ptr_value(r); break;
    case 20: a->n = size_value(r); break;
    case 21: a->w = ptr_value(r); break;
    case 22: a->w_scales = ptr_value(r); break;
    case 23: a->bias = ptr_value(r); break;
    case 24: a->w_sums = (const int32_t *)ptr_value(r); break;
    case 25: a->mask = (void *)ptr_value(r); break;
    default: { /* a rank-8 shape at once */
      for (int k = 0; k < BQ_MAX_RANK; k++) a->shape[k] = size_value(r);
      break;
    }
    }
  }
}

static void set_desc_field(bq_desc *d, uint8_t f, int32_t v) {
  switch (f % 11) {
  case 0: d->op = (bq_op)v; break;
  case 1: d->direction = (bq_direction)v; break;
  case 2: d->granularity = (bq_granularity)v; break;
  case 3: d->float_type = (bq_dtype)v; break;
  case 4: d->int_type = (bq_dtype)v; break;
  case 5: d->qmin = v; break;
  case 6: d->qmax = v; break;
  case 7: d->scale_type = (bq_dtype)v; break;
  case 8: d->device = v; break;
  case 9: d->asymmetric = v; break;
  default: d->out_type = (bq_dtype)v; break;
  }
}

/* can_implement, workspace_size and run on one plan and one call */
static void exercise(const bq_plan *p, const bq_args *a, uint8_t ws_mode, uint8_t stream_mode) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "plan %s", p ? p->name : "NULL");
  bq_status ok = bq_plan_can_implement(p, a);
  char msg[sizeof bq__err_buf];
  snprintf(msg, sizeof msg, "%s", bq_last_error());
  if (ok) check_rejection(ok, ctx);
  size_t need = 0;
  bq_status wst = bq_plan_workspace_size(p, a, &need);
  if (wst) check_rejection(wst, "workspace size");
  /* the workspace needs only the shape: a call whose shape it refuses is refused whole */
  if (wst && !ok) die("workspace_size refused what can_implement accepted", ctx);
  void *ws = NULL;
  size_t ws_bytes = 0;
  switch (ws_mode % 5) {
  case 0: break;
  case 1: ws = (void *)(uintptr_t)0xc00000000ull; ws_bytes = need; break;
  case 2: ws = (void *)(uintptr_t)0xc00000000ull; ws_bytes = need ? need - 1 : 0; break;
  case 3: ws = (void *)(uintptr_t)0xc00000004ull; ws_bytes = need; break;
  default: ws = (void *)(uintptr_t)0xc00000000ull; ws_bytes = SIZE_MAX; break;
  }
  void *stream = stream_mode ? (void *)(uintptr_t)0xd00000000ull : NULL;
  bq_status st = bq_plan_run(p, a, ws, ws_bytes, stream);
  char buf[2600];
  if (!p) {
    if (!st) die("bq_plan_run accepted a NULL plan", ctx);
    check_rejection(st, ctx);
    return;
  }
  if (ok) {
    snprintf(buf, sizeof buf, "%s: can_implement %s \"%s\", run %s \"%s\"", ctx, bq_status_name(ok), msg,
             bq_status_name(st), bq_last_error());
    if (st != ok || strcmp(bq_last_error(), msg)) die("run and can_implement disagree", buf);
    return;
  }
  if (st) {
    check_rejection(st, ctx);
    int ws_fail = st == BQ_ERROR_INSUFFICIENT_WORKSPACE || strstr(bq_last_error(), "workspace (");
    snprintf(buf, sizeof buf, "%s: can_implement accepted, run %s \"%s\"", ctx, bq_status_name(st), bq_last_error());
    if (!ws_fail) die("run rejected what can_implement accepted", buf);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  setup(argc && *argc > 0 ? (*argv)[0] : "");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup("");
  reader r = {data, size};
  uint8_t kind = u8(&r) % 4;
  bq_desc d;
  memset(&d, 0, sizeof d);
  const bq_plan *plan = NULL;
  int null_desc = 0;
  if (kind == 0) {
    d = table_desc[u8(&r) % NELEM(TABLE)];
    uint8_t edits = u8(&r) % 8;
    for (uint8_t i = 0; i < edits; i++) {
      uint8_t f = u8(&r);
      set_desc_field(&d, f, i32(&r));
    }
  } else if (kind == 1) {
    for (uint8_t f = 0; f < 11; f++) set_desc_field(&d, f, i32(&r));
  } else if (kind == 2) {
    null_desc = 1;
  }
  if (kind != 3) {
    /* bq_sku and bq_plan_select validate alike; select runs only where no compile is needed */
    char sku[512];
    bq_status s1 = bq_sku(null_desc ? NULL : &d, 90, sku, sizeof sku);
    if (s1) check_rejection(s1, "bq_sku");
    bq_desc norm;
    char name[96];
    bq_status sn = bq__normalize(null_desc ? NULL : &d, &norm, name, sizeof name);
    if ((sn != BQ_SUCCESS) != (s1 != BQ_SUCCESS)) die("bq_sku and validation disagree", bq_last_error());
    int known = -1;
    for (size_t i = 0; !sn && i < NELEM(TABLE); i++)
      if (same_norm(&norm, &table_norm[i])) known = (int)i;
    if (sn || known >= 0) {
      bq_plan *p = NULL;
      bq_status s2 = bq_plan_select(null_desc ? NULL : &d, &p);
      /* BQ_DEVICE(n) past the fake driver's one device is valid, and absent when selected */
      int absent = !sn && norm.device > BQ_DEVICE(0) && s2 == BQ_ERROR_NO_DEVICE && strstr(bq_last_error(), "does not exist");
      if (!absent && ((s2 != BQ_SUCCESS) != (sn != BQ_SUCCESS) || (sn && s2 != sn))) {
        char buf[1200];
        snprintf(buf, sizeof buf, "validation %s, bq_plan_select %s: %s", bq_status_name(sn), bq_status_name(s2),
                 bq_last_error());
        die("bq_plan_select and validation disagree", buf);
      }
      if (s2 && !absent) check_rejection(s2, "bq_plan_select");
      bq_plan_destroy(p); /* the prebuilt plan of the same SKU keeps the module */
    }
    if (known < 0) {
      /* arguments still go through a plan: the nearest prebuilt one */
      known = (int)(size % NELEM(TABLE));
    }
    plan = table_plan[known];
  }
  bq_args a;
  memset(&a, 0, sizeof a);
  uint8_t base = u8(&r), ws_mode = u8(&r), stream_mode = u8(&r);
  if (plan && (base & 1)) base_args(&plan->desc, &a);
  edit_args(&r, &a);
  exercise(plan, (base & 2) ? NULL : &a, ws_mode, stream_mode);
  return 0;
}

#ifndef BQ_LIBFUZZER
/* Replays every file given, and every file of every directory given; prints a count. */
static size_t replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  int c;
  while ((c = fgetc(f)) != EOF) {
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      buf = realloc(buf, cap);
      if (!buf) die("out of memory", path);
    }
    buf[n++] = (uint8_t)c;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 1;
}
int main(int argc, char **argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  size_t runs = 0;
  int dirs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) die("cannot stat", argv[i]);
    dirs += S_ISDIR(st.st_mode) != 0;
    if (!S_ISDIR(st.st_mode)) {
      runs += replay_file(argv[i]);
      continue;
    }
    DIR *dir = opendir(argv[i]);
    if (!dir) die("cannot open", argv[i]);
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (!stat(path, &st) && S_ISREG(st.st_mode)) runs += replay_file(path);
    }
    closedir(dir);
  }
  for (size_t i = 0; i < NELEM(TABLE); i++) bq_plan_destroy(table_plan[i]);
  /* the fake driver the library loaded, for its launch count: a corpus (a directory)
     that never launches would test none of the launch limits */
  void *drv = dlopen(getenv("BARACUDA_QUANT_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
  unsigned long long (*count)(void) = NULL;
  if (drv) *(void **)&count = dlsym(drv, "fake_cuda_launches");
  if (!count) die("the fake driver's launch count", getenv("BARACUDA_QUANT_DRIVER"));
  unsigned long long launches = count();
  printf("fuzz_api: %zu inputs replayed, %llu launches, every rule held\n", runs, launches);
  if (dirs && runs && !launches) die("no input of the corpus launched a kernel", "it misses every accepted call");
  return 0;
}
#endif
