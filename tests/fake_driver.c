/* fake_driver.c - a stand-in libcuda for the loader tests, selected with
   BARACUDA_QUANT_DRIVER=<path to this library>. FAKE_CUDA_MODE picks its behaviour:
     old       cuDriverGetVersion reports CUDA 11.8
     nodevice  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
     nullptr   cuGetProcAddress_v2 succeeds but hands back a NULL pointer for cuLaunchKernel
     missing   cuGetProcAddress_v2 reports cuModuleLoadData as not found
     twodev    two devices, each with a primary context, and a per-thread context stack;
               cuLaunchKernel succeeds without running anything and records the device
               whose context was current (fake_launches, fake_launch_device) */
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

/* twodev */
#define FAKE_DEVICES 2
#define FAKE_INVALID_CONTEXT 201
#define FAKE_INVALID_DEVICE 101
static int fake_ctx[FAKE_DEVICES]; /* a context is the address of its device's slot */
static _Thread_local void *fake_stack[16];
static _Thread_local int fake_depth;
int fake_launches;      /* read by the tests through dlsym */
int fake_launch_device; /* the current context's device at the last launch, -1 for none */
static int ctx_device(void *c) {
  for (int i = 0; i < FAKE_DEVICES; i++)
    if (c == (void *)&fake_ctx[i]) return i;
  return -1;
}
static CUresult fake_device_count(int *n) { *n = FAKE_DEVICES; return 0; }
static CUresult fake_device_get(int *d, int ordinal) {
  if (ordinal < 0 || ordinal >= FAKE_DEVICES) return FAKE_INVALID_DEVICE;
  *d = ordinal;
  return 0;
}
static CUresult fake_primary_retain(void **c, int dev) {
  if (dev < 0 || dev >= FAKE_DEVICES) return FAKE_INVALID_DEVICE;
  *c = &fake_ctx[dev];
  return 0;
}
static CUresult fake_get_current(void **c) {
  *c = fake_depth ? fake_stack[fake_depth - 1] : NULL;
  return 0;
}
static CUresult fake_set_current(void *c) { /* replaces the top; NULL pops it */
  if (!c) { if (fake_depth) fake_depth--; return 0; }
  if (fake_depth) fake_stack[fake_depth - 1] = c;
  else fake_stack[fake_depth++] = c;
  return 0;
}
static CUresult fake_push(void *c) {
  if (ctx_device(c) < 0) return FAKE_INVALID_CONTEXT;
  if (fake_depth == 16) return 999;
  fake_stack[fake_depth++] = c;
  return 0;
}
static CUresult fake_pop(void **c) {
  if (!fake_depth) return FAKE_INVALID_CONTEXT;
  void *top = fake_stack[--fake_depth];
  if (c) *c = top;
  return 0;
}
static CUresult fake_ctx_device(int *d) {
  if (!fake_depth) return FAKE_INVALID_CONTEXT;
  *d = ctx_device(fake_stack[fake_depth - 1]);
  return 0;
}
static CUresult fake_attribute(int *v, int attr, int dev) {
  (void)dev;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : 1024; /* sm_90, 132 SMs */
  return 0;
}
static CUresult fake_launch(void) {
  fake_launches++;
  fake_launch_device = fake_depth ? ctx_device(fake_stack[fake_depth - 1]) : -1;
  return 0;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status) {
  (void)version;
  (void)flags;
  void *f = (void *)fake_other;
  if (!strcmp(symbol, "cuInit")) f = (void *)fake_init;
  if (!strcmp(symbol, "cuDriverGetVersion")) f = (void *)fake_version;
  if (!strcmp(symbol, "cuGetErrorString")) f = (void *)fake_error_string;
  if (!strcmp(mode(), "nullptr") && !strcmp(symbol, "cuLaunchKernel")) f = NULL;
  if (!strcmp(mode(), "twodev")) {
    static const struct { const char *name; void *fn; } two[] = {
      {"cuDeviceGetCount", (void *)fake_device_count}, {"cuDeviceGet", (void *)fake_device_get},
      {"cuDevicePrimaryCtxRetain", (void *)fake_primary_retain}, {"cuCtxGetCurrent", (void *)fake_get_current},
      {"cuCtxSetCurrent", (void *)fake_set_current}, {"cuCtxPushCurrent", (void *)fake_push},
      {"cuCtxPopCurrent", (void *)fake_pop}, {"cuCtxGetDevice", (void *)fake_ctx_device},
      {"cuDeviceGetAttribute", (void *)fake_attribute}, {"cuLaunchKernel", (void *)fake_launch}};
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
      if (!strcmp(symbol, two[i].name)) f = two[i].fn;
  }
  if (!strcmp(mode(), "missing") && !strcmp(symbol, "cuModuleLoadData")) {
    *pfn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return 500;              /* CUDA_ERROR_NOT_FOUND */
  }
  *pfn = f;
  if (status) *status = 0;
  return 0;
}
