#ifdef BARACUDA_QUANT_IMPLEMENTATION
#ifndef BARACUDA_QUANT_IMPLEMENTATION_DONE
#define BARACUDA_QUANT_IMPLEMENTATION_DONE
/* ============================================================================
   IMPLEMENTATION
   ========================================================================== */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Only what strict C11 plus POSIX.1 headers declare is used, so the implementation
   compiles wherever it is included, whatever feature macros the program set. */
#define BQ__PATH_MAX 4096
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#ifndef BQ_MALLOC
#define BQ_MALLOC(n) malloc(n)
#define BQ_REALLOC(p, n) realloc(p, n)
#define BQ_FREE(p) free(p)
#endif

#if defined(__GNUC__)
#define BQ__UNUSED __attribute__((unused))
#define BQ__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define BQ__UNUSED
#define BQ__PRINTF(a, b)
#endif

#ifdef BARACUDA_QUANT_STATIC
#define BQ__DEF static BQ__UNUSED /* a program need not call every function */
#else
#define BQ__DEF
#endif
#define BQ__FN static

/* ---- minimal CUDA driver and NVRTC types (no CUDA headers needed) ----------- */
typedef int bq__CUresult;
typedef int bq__CUdevice;
typedef void *bq__CUcontext;
typedef void *bq__CUmodule;
typedef void *bq__CUfunction;
typedef void *bq__CUstream;
typedef void *bq__CUevent;
typedef void *bq__CUgraph;
typedef void *bq__CUgraphExec;
typedef unsigned long long bq__CUdeviceptr;
/* cuLaunchKernelEx's CUlaunchAttribute (an id, then a 64-byte value at offset 8) and
   CUlaunchConfig */
typedef struct bq__CUlaunchAttribute {
  int id, pad_;
  union { int i; char bytes[64]; } value;
} bq__CUlaunchAttribute;
typedef struct bq__CUlaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, smem;
  bq__CUstream stream;
  bq__CUlaunchAttribute *attrs;
  unsigned num_attrs;
} bq__CUlaunchConfig;
typedef int bq__nvrtcResult;
typedef void *bq__nvrtcProgram;

#define BQ__CU_DRIVER_ABI 12000 /* the driver ABI version entry points are resolved at */
enum {
  BQ__CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
  BQ__CU_ATTR_MULTIPROCESSOR_COUNT = 16,
  BQ__CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
  BQ__CU_ATTR_CC_MAJOR = 75,
  BQ__CU_ATTR_CC_MINOR = 76,
  BQ__CU_ATTR_MEMORY_CLOCK_RATE = 36, /* kHz */
  BQ__CU_ATTR_L2_CACHE_SIZE = 38,
  BQ__CU_ATTR_MAX_THREADS_PER_SM = 39,
  BQ__CU_FUNC_ATTR_MAX_DYNAMIC_SHARED = 8,
  BQ__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION = 6,
  BQ__CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  BQ__CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  BQ__CU_EVENT_DEFAULT = 0,
  BQ__CU_ERROR_DEINITIALIZED = 4,
  BQ__CU_ERROR_NO_DEVICE = 100,
  BQ__CU_ERROR_OUT_OF_MEMORY = 2
};

/* Every driver entry point the library and its tools use, resolved once with
   cuGetProcAddress at BQ__CU_DRIVER_ABI. X(name, return, params). */
#define BQ__DRIVER_FUNCS(X)                                                                    \
  X(cuInit, (unsigned flags))                                                                  \
  X(cuDriverGetVersion, (int *v))                                                              \
  X(cuGetErrorString, (bq__CUresult e, const char **s))                                        \
  X(cuDeviceGet, (bq__CUdevice * d, int ordinal))                                              \
  X(cuDeviceGetCount, (int *n))                                                                \
  X(cuDeviceGetName, (char *name, int len, bq__CUdevice d))                                    \
  X(cuDeviceGetAttribute, (int *v, int attr, bq__CUdevice d))                                  \
  X(cuDevicePrimaryCtxRetain, (bq__CUcontext * c, bq__CUdevice d))                             \
  X(cuCtxGetCurrent, (bq__CUcontext * c))                                                      \
  X(cuCtxSetCurrent, (bq__CUcontext c))                                                        \
  X(cuCtxGetDevice, (bq__CUdevice * d))                                                        \
  X(cuCtxSynchronize, (void))                                                                  \
  X(cuCtxPushCurrent, (bq__CUcontext c))                                                       \
  X(cuCtxPopCurrent, (bq__CUcontext * c))                                                      \
  X(cuModuleLoadData, (bq__CUmodule * m, const void *image))                                   \
  X(cuModuleUnload, (bq__CUmodule m))                                                          \
  X(cuModuleGetFunction, (bq__CUfunction * f, bq__CUmodule m, const char *name))               \
  X(cuFuncSetAttribute, (bq__CUfunction f, int attr, int value))                               \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, (int *n, bq__CUfunction f, int block, size_t smem)) \
  X(cuLaunchKernel, (bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,     \
                     unsigned by, unsigned bz, unsigned smem, bq__CUstream s, void **params,   \
                     void **extra))                                                            \
  X(cuLaunchKernelEx, (const bq__CUlaunchConfig *c, bq__CUfunction f, void **params, void **extra)) \
  X(cuThreadExchangeStreamCaptureMode, (int *mode))                                            \
  X(cuMemAlloc, (bq__CUdeviceptr * p, size_t n))                                               \
  X(cuMemFree, (bq__CUdeviceptr p))                                                            \
  X(cuMemcpyHtoD, (bq__CUdeviceptr dst, const void *src, size_t n))                            \
  X(cuMemcpyDtoH, (void *dst, bq__CUdeviceptr src, size_t n))                                  \
  X(cuMemcpyDtoDAsync, (bq__CUdeviceptr dst, bq__CUdeviceptr src, size_t n, bq__CUstream s))   \
  X(cuMemsetD8, (bq__CUdeviceptr dst, unsigned char v, size_t n))                              \
  X(cuMemsetD8Async, (bq__CUdeviceptr dst, unsigned char v, size_t n, bq__CUstream s))         \
  X(cuStreamCreate, (bq__CUstream * s, unsigned flags))                                        \
  X(cuStreamDestroy, (bq__CUstream s))                                                         \
  X(cuStreamSynchronize, (bq__CUstream s))                                                     \
  X(cuStreamBeginCapture, (bq__CUstream s, int mode))                                          \
  X(cuStreamEndCapture, (bq__CUstream s, bq__CUgraph * g))                                     \
  X(cuGraphInstantiateWithFlags, (bq__CUgraphExec * e, bq__CUgraph g, unsigned long long flags)) \
  X(cuGraphLaunch, (bq__CUgraphExec e, bq__CUstream s))                                        \
  X(cuGraphExecDestroy, (bq__CUgraphExec e))                                                   \
  X(cuGraphDestroy, (bq__CUgraph g))                                                           \
  X(cuGraphGetNodes, (bq__CUgraph g, void **nodes, size_t *n))                                 \
  X(cuEventCreate, (bq__CUevent * e, unsigned flags))                                          \
  X(cuEventDestroy, (bq__CUevent e))                                                           \
  X(cuEventRecord, (bq__CUevent e, bq__CUstream s))                                            \
  X(cuEventSynchronize, (bq__CUevent e))                                                       \
  X(cuEventElapsedTime, (float *ms, bq__CUevent a, bq__CUevent b))                           \
  X(cuStreamIsCapturing, (bq__CUstream s, int *status))                                     \
  X(cuTensorMapEncodeTiled, (void *map, int type, unsigned rank, void *base, const unsigned long long *dims, \
                             const unsigned long long *strides, const unsigned *box, const unsigned *estrides, \
                             int interleave, int swizzle, int l2, int fill))

typedef struct bq__driver_api {
#define BQ__DRV_MEMBER(name, params) bq__CUresult (*name) params;
  BQ__DRIVER_FUNCS(BQ__DRV_MEMBER)
#undef BQ__DRV_MEMBER
  int version; /* cuDriverGetVersion */
} bq__driver_api;

#define BQ__NVRTC_FUNCS(X)                                                                     \
  X(nvrtcVersion, (int *major, int *minor))                                                    \
  X(nvrtcGetNumSupportedArchs, (int *n))                                                       \
  X(nvrtcGetSupportedArchs, (int *archs))                                                      \
  X(nvrtcCreateProgram, (bq__nvrtcProgram * p, const char *src, const char *name, int nh,      \
                         const char *const *headers, const char *const *include_names))        \
  X(nvrtcDestroyProgram, (bq__nvrtcProgram * p))                                               \
  X(nvrtcCompileProgram, (bq__nvrtcProgram p, int nopt, const char *const *opts))              \
  X(nvrtcGetProgramLogSize, (bq__nvrtcProgram p, size_t *n))                                   \
  X(nvrtcGetProgramLog, (bq__nvrtcProgram p, char *log))                                       \
  X(nvrtcGetCUBINSize, (bq__nvrtcProgram p, size_t *n))                                        \
  X(nvrtcGetCUBIN, (bq__nvrtcProgram p, char *cubin))                                          \
  X(nvrtcGetPTXSize, (bq__nvrtcProgram p, size_t *n))                                          \
  X(nvrtcGetPTX, (bq__nvrtcProgram p, char *ptx))

typedef struct bq__nvrtc_api {
#define BQ__NVRTC_MEMBER(name, params) bq__nvrtcResult (*name) params;
  BQ__NVRTC_FUNCS(BQ__NVRTC_MEMBER)
#undef BQ__NVRTC_MEMBER
  int major, minor;
  int archs[64];
  int num_archs;
  char identity[512]; /* version plus the library file's path, size and mtime */
} bq__nvrtc_api;

/* ---- errors and warnings ---------------------------------------------------- */
static __thread char bq__err_buf[1024];
static pthread_mutex_t bq__warn_lock = PTHREAD_MUTEX_INITIALIZER;
static bq_warning_fn bq__warn_fn;
static void *bq__warn_user;

BQ__FN bq_status bq__fail(bq_status st, const char *fmt, ...) BQ__PRINTF(2, 3);
BQ__FN bq_status bq__fail(bq_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(bq__err_buf, sizeof bq__err_buf, fmt, ap);
  va_end(ap);
  return st;
}

BQ__FN void bq__warn(const char *fmt, ...) BQ__PRINTF(1, 2);
BQ__FN int bq__env_flag(const char *name);
BQ__FN void bq__warn(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The handler runs outside the lock, so that it may call the library (even
     bq_set_warning_handler); the default writes each message in one call under the lock. */
  pthread_mutex_lock(&bq__warn_lock);
  bq_warning_fn fn = bq__warn_fn;
  void *user = bq__warn_user;
  pthread_mutex_unlock(&bq__warn_lock);
  if (fn) {
    fn(msg, user);
    return;
  }
  if (bq__env_flag("BARACUDA_QUANT_QUIET")) return;
  char line[1100];
  int n = snprintf(line, sizeof line, "baracuda_quant: warning: %s\n", msg);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  pthread_mutex_lock(&bq__warn_lock);
  fwrite(line, 1, (size_t)n, stderr);
  fflush(stderr);
  pthread_mutex_unlock(&bq__warn_lock);
}

BQ__DEF void bq_set_warning_handler(bq_warning_fn fn, void *user) {
  pthread_mutex_lock(&bq__warn_lock);
  bq__warn_fn = fn;
  bq__warn_user = user;
  pthread_mutex_unlock(&bq__warn_lock);
}

BQ__DEF const char *bq_last_error(void) { return bq__err_buf; }

BQ__DEF const char *bq_status_name(bq_status s) {
  switch (s) {
#define BQ__STATUS_NAME(name, text) case name: return #name;
    BQ__STATUS_LIST(BQ__STATUS_NAME)
#undef BQ__STATUS_NAME
  default: return "BQ_STATUS_UNKNOWN";
  }
}

BQ__DEF const char *bq_status_description(bq_status s) {
  switch (s) {
#define BQ__STATUS_TEXT(name, text) case name: return text;
    BQ__STATUS_LIST(BQ__STATUS_TEXT)
#undef BQ__STATUS_TEXT
  default: return "unknown status";
  }
}

BQ__DEF unsigned bq_version(void) {
  return (BQ_VERSION_MAJOR << 16) | (BQ_VERSION_MINOR << 8) | BQ_VERSION_PATCH;
}
BQ__DEF const char *bq_version_string(void) { return BQ_VERSION_STRING; }

/* ---- small helpers ------------------------------------------------------------- */
/* 64-bit FNV-1a: file names and payload checksums (any single changed byte changes it). */
BQ__FN uint64_t bq__fnv1a(const void *data, size_t n, uint64_t h) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
#define BQ__FNV_SEED 0xcbf29ce484222325ULL

typedef struct bq__str { char *p; size_t n, cap; int oom; } bq__str;
BQ__FN void bq__str_put(bq__str *s, const char *t, size_t n) {
  if (s->oom) return;
  if (s->n + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + n + 1) cap *= 2;
    char *p = (char *)BQ_REALLOC(s->p, cap);
    if (!p) { s->oom = 1; return; }
    s->p = p;
    s->cap = cap;
  }
  memcpy(s->p + s->n, t, n);
  s->n += n;
  s->p[s->n] = 0;
}
BQ__FN void bq__str_cat(bq__str *s, const char *t) { bq__str_put(s, t, strlen(t)); }
BQ__FN void bq__str_fmt(bq__str *s, const char *fmt, ...) BQ__PRINTF(2, 3);
BQ__FN void bq__str_fmt(bq__str *s, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) bq__str_put(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* strlcpy: copies what fits, always terminates */
BQ__FN void bq__copy(char *dst, size_t n, const char *src) {
  size_t k = strlen(src);
  if (k >= n) k = n - 1;
  memcpy(dst, src, k);
  dst[k] = 0;
}

/* Boolean environment variables, all parsed alike: 0/false/no/off (any case) off,
   1/true/yes/on on, unset or empty the default; anything else is the default plus one
   warning for each variable and value. */
static pthread_mutex_t bq__env_lock = PTHREAD_MUTEX_INITIALIZER;
static char bq__env_warned[8][2][72]; /* variable, value: the last invalid value warned of */

BQ__FN int bq__env_word(const char *v, const char *w) {
  for (; *v && *w; v++, w++) {
    char c = *v >= 'A' && *v <= 'Z' ? (char)(*v - 'A' + 'a') : *v;
    if (c != *w) return 0;
  }
  return !*v && !*w;
}

BQ__FN int bq__env_bool(const char *name, int def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  if (bq__env_word(v, "0") || bq__env_word(v, "false") || bq__env_word(v, "no") || bq__env_word(v, "off")) return 0;
  if (bq__env_word(v, "1") || bq__env_word(v, "true") || bq__env_word(v, "yes") || bq__env_word(v, "on")) return 1;
  /* once per variable and value: marked before warning, since the warning itself reads
     BARACUDA_QUANT_QUIET */
  int warn = 1;
  pthread_mutex_lock(&bq__env_lock);
  size_t i = 0, n = sizeof bq__env_warned / sizeof bq__env_warned[0];
  for (; i < n && bq__env_warned[i][0][0] && strcmp(bq__env_warned[i][0], name); i++) {}
  if (i < n) {
    if (!strncmp(bq__env_warned[i][1], v, sizeof bq__env_warned[i][1] - 1)) warn = 0;
    bq__copy(bq__env_warned[i][0], sizeof bq__env_warned[i][0], name);
    bq__copy(bq__env_warned[i][1], sizeof bq__env_warned[i][1], v);
  }
  pthread_mutex_unlock(&bq__env_lock);
  if (warn)
    bq__warn("%s (\"%.64s\") is not a boolean: 0/false/no/off or 1/true/yes/on; using the default (%s)", name, v,
             def ? "on" : "off");
  return def;
}
BQ__FN int bq__env_flag(const char *name) { return bq__env_bool(name, 0); }

/* ---- run-time loading: the driver ------------------------------------------------- */
static pthread_once_t bq__drv_once = PTHREAD_ONCE_INIT;
static bq__driver_api bq__drv;
static bq_status bq__drv_status;
static char bq__drv_msg[768];

typedef bq__CUresult (*bq__getproc_v2_fn)(const char *, void **, int, unsigned long long, int *);

BQ__FN void bq__driver_load(void) {
  const char *env = getenv("BARACUDA_QUANT_DRIVER");
  const char *name = env && *env ? env : "libcuda.so.1";
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    bq__drv_status = BQ_ERROR_NO_DRIVER;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "no NVIDIA driver: dlopen(\"%s\") through the dynamic loader's search path "
             "(LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib; BARACUDA_QUANT_DRIVER overrides) "
             "failed: %s", name, dlerror());
    return;
  }
  bq__getproc_v2_fn getproc = (bq__getproc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (!getproc) {
    bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "the NVIDIA driver in %s has no cuGetProcAddress_v2: CUDA 12.0 or newer "
             "driver required", name);
    return;
  }
#define BQ__DRV_RESOLVE(fname, params)                                                      \
  {                                                                                         \
    void *pfn = NULL;                                                                       \
    int found = -1;                                                                         \
    bq__CUresult r = getproc(#fname, &pfn, BQ__CU_DRIVER_ABI, 0, &found);                   \
    if (r != 0 || !pfn || found != 0) {                                                     \
      bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;                                             \
      snprintf(bq__drv_msg, sizeof bq__drv_msg,                                             \
               "the NVIDIA driver in %s does not provide %s at ABI %d (CUresult %d, "       \
               "symbol status %d)", name, #fname, BQ__CU_DRIVER_ABI, r, found);             \
      return;                                                                               \
    }                                                                                       \
    memcpy(&bq__drv.fname, &pfn, sizeof pfn);                                               \
  }
  BQ__DRIVER_FUNCS(BQ__DRV_RESOLVE)
#undef BQ__DRV_RESOLVE
  bq__CUresult r = bq__drv.cuInit(0);
  if (r != 0) {
    bq__drv_status = r == BQ__CU_ERROR_NO_DEVICE ? BQ_ERROR_NO_DEVICE : BQ_ERROR_CUDA;
    const char *s = NULL;
    bq__drv.cuGetErrorString(r, &s);
    snprintf(bq__drv_msg, sizeof bq__drv_msg, "cuInit failed in %s: CUresult %d (%s)", name,
             r, s ? s : "?");
    return;
  }
  bq__drv.cuDriverGetVersion(&bq__drv.version);
  if (bq__drv.version < BQ__CU_DRIVER_ABI) {
    bq__drv_status = BQ_ERROR_DRIVER_TOO_OLD;
    snprintf(bq__drv_msg, sizeof bq__drv_msg,
             "the NVIDIA driver in %s supports CUDA %d.%d; CUDA 12.0 or newer is required",
             name, bq__drv.version / 1000, bq__drv.version % 1000 / 10);
    return;
  }
  bq__drv_status = BQ_SUCCESS;
}

/* The driver table, or NULL with the error set (no driver, too old, no device). */
BQ__FN BQ__UNUSED const bq__driver_api *bq__driver_get(void) {
  pthread_once(&bq__drv_once, bq__driver_load);
  if (bq__drv_status != BQ_SUCCESS) {
    bq__fail(bq__drv_status, "%s", bq__drv_msg);
    return NULL;
  }
  return &bq__drv;
}

BQ__FN bq_status bq__cu_fail(bq__CUresult r, const char *what) {
  const char *s = NULL;
  if (bq__drv.cuGetErrorString) bq__drv.cuGetErrorString(r, &s);
  return bq__fail(r == BQ__CU_ERROR_OUT_OF_MEMORY ? BQ_ERROR_OUT_OF_MEMORY : BQ_ERROR_CUDA,
                  "%s failed: CUresult %d (%s)", what, r, s ? s : "unknown");
}

/* The primary context of device `ordinal` (the one the CUDA runtime uses, so the two
   interoperate), retained once per process and never released: plans and cached modules
   of that context stay valid for the program's life. */
#define BQ__MAX_PRIMARY 64
static bq__CUcontext bq__primary_ctx[BQ__MAX_PRIMARY];
static pthread_mutex_t bq__primary_lock = PTHREAD_MUTEX_INITIALIZER;
BQ__FN bq_status bq__primary(int ordinal, bq__CUcontext *out) {
  const bq__driver_api *d = bq__driver_get();
  if (!d) return bq__drv_status;
  int n = 0;
  d->cuDeviceGetCount(&n);
  if (ordinal < 0 || ordinal >= n || ordinal >= BQ__MAX_PRIMARY)
    return bq__fail(BQ_ERROR_NO_DEVICE, "device %d does not exist (%d CUDA devices)", ordinal, n);
  pthread_mutex_lock(&bq__primary_lock);
  bq__CUcontext c = bq__primary_ctx[ordinal];
  bq__CUresult r = 0;
  bq__CUdevice dev;
  if (!c && !(r = d->cuDeviceGet(&dev, ordinal)) && !(r = d->cuDevicePrimaryCtxRetain(&c, dev)))
    bq__primary_ctx[ordinal] = c;
  pthread_mutex_unlock(&bq__primary_lock);
  if (r) return bq__cu_fail(r, "cuDevicePrimaryCtxRetain");
  *out = c;
  return BQ_SUCCESS;
}

/* Make sure a context is current: the caller's if there is one, else the primary
   context of `device`, made current on this thread. */
BQ__FN bq_status bq__context(int device, bq__CUcontext *out) {
  const bq__driver_api *d = bq__driver_get();
  if (!d) return bq__drv_status;
  bq__CUcontext c = NULL;
  bq__CUresult r = d->cuCtxGetCurrent(&c);
  if (r != 0) return bq__cu_fail(r, "cuCtxGetCurrent");
  if (!c) {
    bq_status st = bq__primary(device, &c);
    if (st) return st;
    if ((r = d->cuCtxSetCurrent(c)) != 0) return bq__cu_fail(r, "cuCtxSetCurrent");
  }
  if (out) *out = c;
  return BQ_SUCCESS;
}

/* The device ordinal of a context (-1 if the driver cannot tell): made current for the
   query when it is not. */
BQ__FN int bq__context_device(bq__CUcontext c) {
  bq__CUcontext cur = NULL;
  bq__CUdevice dev = -1;
  if (bq__drv.cuCtxGetCurrent(&cur)) return -1;
  if (cur == c) return bq__drv.cuCtxGetDevice(&dev) ? -1 : dev;
  if (bq__drv.cuCtxPushCurrent(c)) return -1;
  if (bq__drv.cuCtxGetDevice(&dev)) dev = -1;
  bq__drv.cuCtxPopCurrent(&cur);
  return dev;
}

/* ---- run-time loading: NVRTC ------------------------------------------------------- */
static pthread_once_t bq__nvrtc_once = PTHREAD_ONCE_INIT;
static bq__nvrtc_api bq__nv;
static bq_status bq__nv_status;
static char bq__nv_msg[1024];

BQ__FN void bq__nvrtc_load(void) {
  const char *env = getenv("BARACUDA_QUANT_NVRTC");
  const char *names[3] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
  void *lib = NULL;
  const char *tried = env && *env ? env : "libnvrtc.so.13, libnvrtc.so.12";
  if (env && *env) {
    lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
  } else {
    for (int i = 0; names[i] && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) {
    bq__nv_status = BQ_ERROR_NO_NVRTC;
    snprintf(bq__nv_msg, sizeof bq__nv_msg,
             "NVRTC not found: tried %s through the dynamic loader's search path "
             "(set BARACUDA_QUANT_NVRTC to the library's path): %s", tried, dlerror());
    return;
  }
#define BQ__NV_RESOLVE(fname, params)                                                      \
  {                                                                                        \
    void *pfn = dlsym(lib, #fname);                                                        \
    if (!pfn) {                                                                            \
      bq__nv_status = BQ_ERROR_NO_NVRTC;                                                   \
      snprintf(bq__nv_msg, sizeof bq__nv_msg, "NVRTC (%s) lacks %s", tried, #fname);       \
      return;                                                                              \
    }                                                                                      \
    memcpy(&bq__nv.fname, &pfn, sizeof pfn);                                               \
  }
  BQ__NVRTC_FUNCS(BQ__NV_RESOLVE)
#undef BQ__NV_RESOLVE
  bq__nv.nvrtcVersion(&bq__nv.major, &bq__nv.minor);
  int n = 0;
  bq__nv.nvrtcGetNumSupportedArchs(&n);
  if (n < 1 || n > 64) {
    bq__nv_status = BQ_ERROR_NO_NVRTC;
    snprintf(bq__nv_msg, sizeof bq__nv_msg, "NVRTC %d.%d reports %d supported archs",
             bq__nv.major, bq__nv.minor, n);
    return;
  }
  bq__nv.nvrtcGetSupportedArchs(bq__nv.archs);
  bq__nv.num_archs = n;
  /* nvrtcVersion has no build number: the library file's identity stands in for it. */
  /* dladdr is a GNU extension: fetched at run time so no feature macro is needed */
  struct { const char *fname; void *fbase; const char *sname; void *saddr; } info;
  struct stat st;
  memset(&info, 0, sizeof info);
  memset(&st, 0, sizeof st);
  void *sym, *self = dlopen(NULL, RTLD_LAZY), *dladdr_sym = self ? dlsym(self, "dladdr") : NULL;
  int (*dladdr_fn)(const void *, void *) = NULL;
  memcpy(&sym, &bq__nv.nvrtcVersion, sizeof sym);
  if (dladdr_sym) memcpy(&dladdr_fn, &dladdr_sym, sizeof dladdr_fn);
  if (dladdr_fn && dladdr_fn(sym, &info) && info.fname) stat(info.fname, &st);
  snprintf(bq__nv.identity, sizeof bq__nv.identity, "nvrtc %d.%d file %s size %lld mtime %lld",
           bq__nv.major, bq__nv.minor, info.fname ? info.fname : "?",
           (long long)st.st_size, (long long)st.st_mtime);
  bq__nv_status = BQ_SUCCESS;
}

BQ__FN const bq__nvrtc_api *bq__nvrtc_get(void) {
  pthread_once(&bq__nvrtc_once, bq__nvrtc_load);
  if (bq__nv_status != BQ_SUCCESS) {
    bq__fail(bq__nv_status, "%s", bq__nv_msg);
    return NULL;
  }
  return &bq__nv;
}
