/* fake_driver.c - a stand-in libcuda for the loader tests, selected with
   BARACUDA_QUANT_DRIVER=<path to this library>. FAKE_CUDA_MODE picks its behaviour:
     old       cuDriverGetVersion reports CUDA 11.8
     nodevice  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
     nullptr   cuGetProcAddress_v2 succeeds but hands back a NULL pointer for cuLaunchKernel
     missing   cuGetProcAddress_v2 reports cuModuleLoadData as not found
     gpu       one device of compute capability FAKE_CUDA_SM (default 90) with a primary
               context; cuModuleLoadData accepts an ELF cubin or PTX text, after refusing
               the first FAKE_CUDA_REFUSE loads of the process (CUDA_ERROR_INVALID_IMAGE) */
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

static void *current;
static int ctx_storage, module_storage, function_storage;
static CUresult gpu_count(int *n) { *n = 1; return 0; }
static CUresult gpu_get(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
static CUresult gpu_retain(void **c, int d) { (void)d; *c = &ctx_storage; return 0; }
static CUresult gpu_get_current(void **c) { *c = current; return 0; }
static CUresult gpu_set_current(void *c) { current = c; return 0; }
static CUresult gpu_ctx_device(int *d) { *d = 0; return current ? 0 : 201; }
static CUresult gpu_attribute(int *v, int attr, int d) {
  const char *e = getenv("FAKE_CUDA_SM");
  int sm = e ? atoi(e) : 90;
  (void)d;
  *v = attr == 75 ? sm / 10 : attr == 76 ? sm % 10 : attr == 16 ? 132 : 1024;
  return 0;
}
static CUresult gpu_load(void **m, const void *image) {
  static int loads;
  const char *e = getenv("FAKE_CUDA_REFUSE");
  int n = __atomic_fetch_add(&loads, 1, __ATOMIC_SEQ_CST);
  const char *p = (const char *)image;
  if ((e && n < atoi(e)) || !(memcmp(p, "\177ELF", 4) == 0 || strstr(p, ".version"))) return 200;
  *m = &module_storage;
  return 0;
}
static CUresult gpu_function(void **f, void *m, const char *name) {
  (void)m, (void)name;
  *f = &function_storage;
  return 0;
}
static CUresult gpu_ok(void) { return 0; }

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status) {
  (void)version;
  (void)flags;
  void *f = (void *)fake_other;
  if (!strcmp(symbol, "cuInit")) f = (void *)fake_init;
  if (!strcmp(symbol, "cuDriverGetVersion")) f = (void *)fake_version;
  if (!strcmp(symbol, "cuGetErrorString")) f = (void *)fake_error_string;
  if (!strcmp(mode(), "nullptr") && !strcmp(symbol, "cuLaunchKernel")) f = NULL;
  if (!strcmp(mode(), "gpu")) {
    if (!strcmp(symbol, "cuDeviceGetCount")) f = (void *)gpu_count;
    if (!strcmp(symbol, "cuDeviceGet")) f = (void *)gpu_get;
    if (!strcmp(symbol, "cuDevicePrimaryCtxRetain")) f = (void *)gpu_retain;
    if (!strcmp(symbol, "cuCtxGetCurrent")) f = (void *)gpu_get_current;
    if (!strcmp(symbol, "cuCtxSetCurrent")) f = (void *)gpu_set_current;
    if (!strcmp(symbol, "cuCtxGetDevice")) f = (void *)gpu_ctx_device;
    if (!strcmp(symbol, "cuDeviceGetAttribute")) f = (void *)gpu_attribute;
    if (!strcmp(symbol, "cuModuleLoadData")) f = (void *)gpu_load;
    if (!strcmp(symbol, "cuModuleGetFunction")) f = (void *)gpu_function;
    if (!strcmp(symbol, "cuModuleUnload") || !strcmp(symbol, "cuFuncSetAttribute")) f = (void *)gpu_ok;
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
