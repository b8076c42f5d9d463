/* ---- device memory helpers ----------------------------------------------------------- */
/* They work in the current context, else device 0's primary context (made current), as
   the CUDA runtime does. */
BQ__DEF bq_status bq_malloc(void **ptr, size_t bytes) {
  if (!ptr) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_malloc: ptr is NULL");
  *ptr = NULL;
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUdeviceptr p = 0;
  bq__CUresult r = bq__drv.cuMemAlloc(&p, bytes ? bytes : 1);
  if (r) return bq__cu_fail(r, "cuMemAlloc");
  *ptr = (void *)(uintptr_t)p;
  return BQ_SUCCESS;
}
BQ__DEF bq_status bq_free(void *ptr) {
  if (!ptr) return BQ_SUCCESS;
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUresult r = bq__drv.cuMemFree((bq__CUdeviceptr)(uintptr_t)ptr);
  return r ? bq__cu_fail(r, "cuMemFree") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memcpy_to_device(void *dst, const void *src, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemcpyHtoD((bq__CUdeviceptr)(uintptr_t)dst, src, bytes);
  return r ? bq__cu_fail(r, "cuMemcpyHtoD") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memcpy_to_host(void *dst, const void *src, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemcpyDtoH(dst, (bq__CUdeviceptr)(uintptr_t)src, bytes);
  return r ? bq__cu_fail(r, "cuMemcpyDtoH") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_memset(void *dst, unsigned char value, size_t bytes) {
  bq_status st = bq__context(0, NULL);
  if (st || !bytes) return st;
  bq__CUresult r = bq__drv.cuMemsetD8((bq__CUdeviceptr)(uintptr_t)dst, value, bytes);
  return r ? bq__cu_fail(r, "cuMemsetD8") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_synchronize(void *stream) {
  bq_status st = bq__context(0, NULL);
  if (st) return st;
  bq__CUresult r = bq__drv.cuStreamSynchronize((bq__CUstream)stream);
  return r ? bq__cu_fail(r, "cuStreamSynchronize") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_device_name(char *buf, size_t n) {
  bq__CUcontext c;
  bq_status st = bq__context(0, &c);
  if (st) return st;
  bq__CUdevice dev;
  bq__CUresult r = bq__drv.cuCtxGetDevice(&dev);
  if (!r) r = bq__drv.cuDeviceGetName(buf, (int)n, dev);
  return r ? bq__cu_fail(r, "cuDeviceGetName") : BQ_SUCCESS;
}
BQ__DEF bq_status bq_set_device(int ordinal) {
  if (ordinal < 0) return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "bq_set_device: ordinal (%d) is negative", ordinal);
  bq__CUcontext c;
  bq_status st = bq__primary(ordinal, &c);
  if (st) return st;
  bq__CUresult r = bq__drv.cuCtxSetCurrent(c);
  return r ? bq__cu_fail(r, "cuCtxSetCurrent") : BQ_SUCCESS;
}
