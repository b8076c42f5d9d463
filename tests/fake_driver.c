/* fake_driver.c - a stand-in libcuda for the loader tests, selected with
   BARACUDA_QUANT_DRIVER=<path to this library>. FAKE_CUDA_MODE picks its behaviour:
     old       cuDriverGetVersion reports CUDA 11.8
     nodevice  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
     nullptr   cuGetProcAddress_v2 succeeds but hands back a NULL pointer for cuLaunchKernel
     missing   cuGetProcAddress_v2 reports cuModuleLoadData as not found */
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

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                             int *status) {
  (void)version;
  (void)flags;
  void *f = (void *)fake_other;
  if (!strcmp(symbol, "cuInit")) f = (void *)fake_init;
  if (!strcmp(symbol, "cuDriverGetVersion")) f = (void *)fake_version;
  if (!strcmp(symbol, "cuGetErrorString")) f = (void *)fake_error_string;
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
