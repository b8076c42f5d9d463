/* fake_driver.c - a stand-in libcuda for the host tests, selected with
   BARACUDA_QUANT_DRIVER=<path to this library>. FAKE_CUDA_MODE picks its behaviour:
     (unset)   a working driver of one device that runs nothing: contexts, modules and
               functions are handles, memory calls succeed without touching memory, and
               every launch is checked against the launch limits below
     old       cuDriverGetVersion reports CUDA 11.8
     nodevice  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
     nullptr   cuGetProcAddress_v2 succeeds but hands back a NULL pointer for cuLaunchKernel
     missing   cuGetProcAddress_v2 reports cuModuleLoadData as not found
     gpu       as unset, but cuModuleLoadData accepts only an ELF cubin or PTX text, and
               refuses the first FAKE_CUDA_REFUSE loads of the process (CUDA_ERROR_INVALID_IMAGE)
     twodev    two devices, each with a primary context; a launch of a plan built without a
               module (no function) is recorded, not checked, with the device whose context
               was current (fake_launches, fake_launch_device)
   FAKE_CUDA_SM sets the device's compute capability (10 * major + minor, default 90).
   FAKE_CUDA_OCCUPANCY=n (n >= 1): cuOccupancyMaxActiveBlocksPerMultiprocessor answers n
   blocks an SM (0 where the dynamic shared memory asked exceeds the opt-in bound) and the
   device reports 227 KiB of opt-in shared memory a block; unset, the query fails (999) and
   the device reports none, as before.

   Launch limits (an sm_90 device's): grid x 1 .. 2^31 - 1, grid y and z 1 .. 65535, block
   x and y 1 .. 1024, z 1 .. 64, at most 1024 threads a block, dynamic shared memory at most
   48 KiB unless cuFuncSetAttribute raised the function's bound (at most 227 KiB). A launch
   outside them prints what it asked for and aborts: the library must never ask. Every
   launch is recorded for the tests (fake_cuda_launches, fake_cuda_last_launch), and then
   handed to the hook a test may set (fake_cuda_set_launch_hook: tests/fuzz_api.c checks
   there what the kernel's parameters tell it to read and write). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static const char *mode(void) {
  const char *m = getenv("FAKE_CUDA_MODE");
  return m ? m : "";
}
static CUresult fake_init(unsigned flags) {
  (void)flags;
  return strcmp(mode(), "nodevice") == 0 ? 100 : 0;
}
static CUresult fake_version(int *v) {
  *v = strcmp(mode(), "old") == 0 ? 11080 : 13000;
  return 0;
}
static CUresult fake_error_string(int e, const char **s) {
  (void)e;
  *s = "fake error";
  return 0;
}
static CUresult fake_other(void) { return 999; }

/* ---- devices, their primary contexts, a per-thread context stack ---------------------- */
#define INVALID_VALUE 1
#define INVALID_DEVICE 101
#define SMEM_DEFAULT (48 * 1024)
#define SMEM_OPTIN (227 * 1024)
#define MAX_DEVICES 2
static char primary_ctx[MAX_DEVICES]; /* a context is the address of its device's slot */
static __thread void *ctx_stack[16];
static __thread int ctx_depth;
int fake_launches;      /* twodev: read by the tests through dlsym */
int fake_launch_device; /* twodev: the current context's device at the last launch, -1 for none */

static int devices(void) { return strcmp(mode(), "twodev") == 0 ? 2 : 1; }
static int ctx_device(const void *c) {
  for (int i = 0; i < devices(); i++)
    if (c == &primary_ctx[i]) return i;
  return -1;
}
static void *current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

static CUresult fake_device_get(int *d, int ordinal) {
  if (ordinal < 0 || ordinal >= devices()) return INVALID_DEVICE;
  *d = ordinal;
  return 0;
}
static CUresult fake_device_count(int *n) {
  *n = devices();
  return 0;
}
static CUresult fake_device_name(char *name, int len, int d) {
  (void)d;
  if (len > 0) snprintf(name, (size_t)len, "fake device");
  return 0;
}
static CUresult fake_device_attribute(int *v, int attr, int d) {
  const char *e = getenv("FAKE_CUDA_SM");
  int sm = e && *e ? atoi(e) : 90;
  if (d < 0 || d >= devices()) return INVALID_DEVICE;
  switch (attr) {
  case 1: *v = 1024; break;    /* max threads per block */
  case 16: *v = 132; break;    /* multiprocessors */
  case 75: *v = sm / 10; break; /* compute capability */
  case 76: *v = sm % 10; break;
  case 97: *v = getenv("FAKE_CUDA_OCCUPANCY") ? SMEM_OPTIN : 0; break; /* opt-in shared memory a block */
  default: *v = 0; break;
  }
  return 0;
}
static CUresult fake_primary_retain(void **c, int d) {
  if (d < 0 || d >= devices()) return INVALID_DEVICE;
  *c = &primary_ctx[d];
  return 0;
}
static CUresult fake_ctx_get(void **c) {
  *c = current();
  return 0;
}
static CUresult fake_ctx_set(void *c) { /* replaces the top; NULL pops it */
  if (!c) {
    if (ctx_depth) ctx_depth--;
  } else if (ctx_depth) {
    ctx_stack[ctx_depth - 1] = c;
  } else {
    ctx_stack[ctx_depth++] = c;
  }
  return 0;
}
static CUresult fake_ctx_push(void *c) {
  if (ctx_device(c) < 0) return 201;
  if (ctx_depth == 16) return 999;
  ctx_stack[ctx_depth++] = c;
  return 0;
}
static CUresult fake_ctx_pop(void **c) {
  if (!ctx_depth) return 201;
  void *top = ctx_stack[--ctx_depth];
  if (c) *c = top;
  return 0;
}
static CUresult fake_ctx_device(int *d) {
  if (!current()) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
  *d = ctx_device(current());
  return 0;
}
static CUresult fake_ok(void) { return 0; }

/* ---- modules and functions --------------------------------------------------------------- */
typedef struct fake_fn {
  struct fake_fn *next;
  char name[128];
  int max_dynamic_smem;
} fake_fn;
typedef struct fake_module { fake_fn *fns; } fake_module;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult fake_module_load(void **m, const void *image) {
  static int loads;
  if (!image) return INVALID_VALUE;
  if (!strcmp(mode(), "gpu")) {
    const char *e = getenv("FAKE_CUDA_REFUSE"), *p = (const char *)image;
    int n = __atomic_fetch_add(&loads, 1, __ATOMIC_SEQ_CST);
    if ((e && n < atoi(e)) || !(memcmp(p, "\177ELF", 4) == 0 || strstr(p, ".version"))) return 200;
  }
  fake_module *mod = calloc(1, sizeof *mod);
  if (!mod) return 2;
  *m = mod;
  return 0;
}
static CUresult fake_module_unload(void *m) {
  fake_module *mod = m;
  if (!mod) return INVALID_VALUE;
  pthread_mutex_lock(&lock);
  for (fake_fn *f = mod->fns, *n; f; f = n) {
    n = f->next;
    free(f);
  }
  pthread_mutex_unlock(&lock);
  free(mod);
  return 0;
}
static CUresult fake_module_function(void **f, void *m, const char *name) {
  fake_module *mod = m;
  if (!mod || !name) return INVALID_VALUE;
  fake_fn *fn = calloc(1, sizeof *fn);
  if (!fn) return 2;
  snprintf(fn->name, sizeof fn->name, "%s", name);
  fn->max_dynamic_smem = SMEM_DEFAULT;
  pthread_mutex_lock(&lock);
  fn->next = mod->fns;
  mod->fns = fn;
  pthread_mutex_unlock(&lock);
  *f = fn;
  return 0;
}
static CUresult fake_func_attribute(void *f, int attr, int value) {
  fake_fn *fn = f;
  if (!fn) return INVALID_VALUE;
  if (attr == 8) { /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    if (value < 0 || value > SMEM_OPTIN) return INVALID_VALUE;
    fn->max_dynamic_smem = value > SMEM_DEFAULT ? value : SMEM_DEFAULT;
  }
  return 0;
}

static CUresult fake_occupancy(int *n, void *f, int block, size_t smem) {
  const char *e = getenv("FAKE_CUDA_OCCUPANCY");
  fake_fn *fn = f;
  if (!e || atoi(e) < 1) return 999;
  if (!fn || !n || block < 1 || block > 1024) return INVALID_VALUE;
  *n = smem > (size_t)fn->max_dynamic_smem ? 0 : atoi(e);
  return 0;
}

/* ---- launches ----------------------------------------------------------------------------- */
typedef struct fake_launch {
  unsigned gx, gy, gz, bx, by, bz, smem;
  char name[128];
} fake_launch;
static unsigned long long launches;
static fake_launch last;
/* the test's hook: the kernel's name, its grid, block and shared memory (as
   fake_cuda_last_launch's dims) and cuLaunchKernel's params (one parameter block: params[0]) */
typedef void (*fake_cuda_launch_hook)(const char *name, const unsigned dims[7], void **params, void *user);
static fake_cuda_launch_hook hook;
static void *hook_user;
void fake_cuda_set_launch_hook(fake_cuda_launch_hook fn, void *user) {
  pthread_mutex_lock(&lock);
  hook = fn;
  hook_user = user;
  pthread_mutex_unlock(&lock);
}

static void check_launch(fake_fn *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned smem, const char *how, void **params) {
  const char *bad = NULL;
  if (!fn && !strcmp(mode(), "twodev")) {
    pthread_mutex_lock(&lock);
    fake_launches++;
    fake_launch_device = ctx_device(current());
    pthread_mutex_unlock(&lock);
    return;
  }
  if (!fn) bad = "no function";
  else if (gx < 1 || gx > 0x7fffffffu) bad = "grid x outside 1 .. 2^31 - 1";
  else if (gy < 1 || gy > 65535 || gz < 1 || gz > 65535) bad = "grid y or z outside 1 .. 65535";
  else if (bx < 1 || bx > 1024 || by < 1 || by > 1024 || bz < 1 || bz > 64) bad = "a block dimension out of range";
  else if ((unsigned long long)bx * by * bz > 1024) bad = "more than 1024 threads a block";
  else if (smem > (unsigned)fn->max_dynamic_smem) bad = "dynamic shared memory above the function's bound";
  if (bad) {
    fprintf(stderr, "fake driver: %s rejects %s: grid (%u, %u, %u), block (%u, %u, %u), %u bytes of shared memory "
            "(bound %d): %s\n", how, fn ? fn->name : "(null)", gx, gy, gz, bx, by, bz, smem,
            fn ? fn->max_dynamic_smem : 0, bad);
    abort();
  }
  pthread_mutex_lock(&lock);
  launches++;
  last = (fake_launch){gx, gy, gz, bx, by, bz, smem, ""};
  snprintf(last.name, sizeof last.name, "%s", fn->name);
  fake_cuda_launch_hook h = hook;
  void *u = hook_user;
  pthread_mutex_unlock(&lock);
  if (h) {
    const unsigned dims[7] = {gx, gy, gz, bx, by, bz, smem};
    h(fn->name, dims, params, u);
  }
}
static CUresult fake_launch_kernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
  (void)stream;
  (void)extra;
  if (!params) return INVALID_VALUE;
  check_launch(f, gx, gy, gz, bx, by, bz, smem, "cuLaunchKernel", params);
  return 0;
}
typedef struct fake_config {
  unsigned gx, gy, gz, bx, by, bz, smem;
  void *stream;
  void *attrs;
  unsigned num_attrs;
} fake_config;
static CUresult fake_launch_kernel_ex(const fake_config *c, void *f, void **params, void **extra) {
  (void)extra;
  if (!c || !params) return INVALID_VALUE;
  check_launch(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, "cuLaunchKernelEx", params);
  return 0;
}

/* cuTensorMapEncodeTiled: the driver's checks of what the library asks for (2-D bytes, base
   and stride on the 16-byte grid, 128-byte boxes in the 128-byte swizzle, a 64-byte aligned
   map), then a map the fuzzer can read back: a tag, the base, K bytes, rows, the stride */
#define FAKE_TMAP_TAG 0x50414d54454b4146ull /* "FAKETMAP" */
static CUresult fake_tensor_map(void *map, int type, unsigned rank, void *base, const unsigned long long *dims,
                                const unsigned long long *strides, const unsigned *box, const unsigned *estrides,
                                int interleave, int swizzle, int l2, int fill) {
  (void)l2;
  if (!map || ((uintptr_t)map % 64) || type != 0 || rank != 2 || !base || ((uintptr_t)base % 16) || !dims || !strides ||
      !box || !estrides || strides[0] % 16 || strides[0] < dims[0] || strides[0] >= (1ull << 40) || box[0] != 128 ||
      box[1] < 1 || box[1] > 256 || estrides[0] != 1 || estrides[1] != 1 || interleave != 0 || swizzle != 3 ||
      fill != 0 || dims[0] < 1 || dims[1] < 1 || dims[0] > (1ull << 32) || dims[1] > (1ull << 32))
    return INVALID_VALUE;
  unsigned long long *m = (unsigned long long *)map;
  memset(m, 0, 128);
  m[0] = FAKE_TMAP_TAG, m[1] = (uintptr_t)base, m[2] = dims[0], m[3] = dims[1], m[4] = strides[0];
  return 0;
}

/* for the tests: launches so far, and the last one's grid, block, shared memory and kernel */
unsigned long long fake_cuda_launches(void) {
  pthread_mutex_lock(&lock);
  unsigned long long n = launches;
  pthread_mutex_unlock(&lock);
  return n;
}
void fake_cuda_last_launch(unsigned dims[7], char *name, size_t name_size) {
  pthread_mutex_lock(&lock);
  unsigned d[7] = {last.gx, last.gy, last.gz, last.bx, last.by, last.bz, last.smem};
  memcpy(dims, d, sizeof d);
  if (name && name_size) snprintf(name, name_size, "%s", last.name);
  pthread_mutex_unlock(&lock);
}

/* ---- memory: addresses handed out, never backed ------------------------------------------ */
static unsigned long long next_address = 0x7f0000000000ull;
static CUresult fake_mem_alloc(unsigned long long *p, size_t n) {
  pthread_mutex_lock(&lock);
  *p = next_address;
  next_address += (n + 255) & ~(size_t)255;
  pthread_mutex_unlock(&lock);
  return 0;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status) {
  (void)version;
  (void)flags;
  static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)fake_init},
    {"cuDriverGetVersion", (void *)fake_version},
    {"cuGetErrorString", (void *)fake_error_string},
    {"cuDeviceGet", (void *)fake_device_get},
    {"cuDeviceGetCount", (void *)fake_device_count},
    {"cuDeviceGetName", (void *)fake_device_name},
    {"cuDeviceGetAttribute", (void *)fake_device_attribute},
    {"cuDevicePrimaryCtxRetain", (void *)fake_primary_retain},
    {"cuCtxGetCurrent", (void *)fake_ctx_get},
    {"cuCtxSetCurrent", (void *)fake_ctx_set},
    {"cuCtxPushCurrent", (void *)fake_ctx_push},
    {"cuCtxPopCurrent", (void *)fake_ctx_pop},
    {"cuCtxGetDevice", (void *)fake_ctx_device},
    {"cuCtxSynchronize", (void *)fake_ok},
    {"cuModuleLoadData", (void *)fake_module_load},
    {"cuModuleUnload", (void *)fake_module_unload},
    {"cuModuleGetFunction", (void *)fake_module_function},
    {"cuFuncSetAttribute", (void *)fake_func_attribute},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", (void *)fake_occupancy},
    {"cuLaunchKernel", (void *)fake_launch_kernel},
    {"cuLaunchKernelEx", (void *)fake_launch_kernel_ex},
    {"cuTensorMapEncodeTiled", (void *)fake_tensor_map},
    {"cuMemAlloc", (void *)fake_mem_alloc},
    {"cuMemFree", (void *)fake_ok},
    {"cuMemcpyHtoD", (void *)fake_ok},
    {"cuMemcpyDtoH", (void *)fake_ok},
    {"cuMemcpyDtoDAsync", (void *)fake_ok},
    {"cuMemsetD8", (void *)fake_ok},
    {"cuMemsetD8Async", (void *)fake_ok},
    {"cuStreamSynchronize", (void *)fake_ok},
  };
  void *f = (void *)fake_other;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(symbol, table[i].name)) f = table[i].fn;
  if (!strcmp(mode(), "nullptr") && !strcmp(symbol, "cuLaunchKernel")) f = NULL;
  if (!strcmp(mode(), "missing") && !strcmp(symbol, "cuModuleLoadData")) {
    *pfn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;              /* CUDA_ERROR_NOT_FOUND */
  }
  *pfn = f;
  if (status) *status = 0;
  return 0;
}
