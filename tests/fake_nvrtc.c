/* fake_nvrtc.c - a stand-in NVRTC for the host tests, selected with
   BARACUDA_QUANT_NVRTC=<path to this library>: every program "compiles" in microseconds into
   a small image that names its program, so that a test (tests/fuzz_api.c) can select a
   plan of every kernel SKU without waiting on the real compiler. Paired with the fake
   driver (tests/fake_driver.c), whose cuModuleLoadData takes any image (and in its "gpu"
   mode one that starts with an ELF magic or holds ".version": these images do both).

   It reports NVRTC 13.0, supporting sm_75, 80, 86, 89, 90, 100 and 120. A cubin image is
   "\177ELF fake baracuda_quant cubin <program name>\0" and a PTX image
   ".version 9.0 // fake baracuda_quant ptx <program name>\0". Nothing of the source is
   checked but its length (> 0): the image has no code, and the fake driver's functions
   are names alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;
typedef struct fake_program {
  char name[320];
  size_t source_len;
  int compiled;
} fake_program;

static const int archs[] = {75, 80, 86, 89, 90, 100, 120};

nvrtcResult nvrtcVersion(int *major, int *minor) {
  *major = 13;
  *minor = 0;
  return 0;
}
nvrtcResult nvrtcGetNumSupportedArchs(int *n) {
  *n = (int)(sizeof archs / sizeof archs[0]);
  return 0;
}
nvrtcResult nvrtcGetSupportedArchs(int *out) {
  memcpy(out, archs, sizeof archs);
  return 0;
}
nvrtcResult nvrtcCreateProgram(void **prog, const char *src, const char *name, int nh, const char *const *headers,
                               const char *const *include_names) {
  (void)nh, (void)headers, (void)include_names;
  if (!prog || !src) return 3; /* NVRTC_ERROR_INVALID_INPUT */
  fake_program *p = calloc(1, sizeof *p);
  if (!p) return 1; /* NVRTC_ERROR_OUT_OF_MEMORY */
  p->source_len = strlen(src);
  snprintf(p->name, sizeof p->name, "%s", name ? name : "(unnamed)");
  *prog = p;
  return 0;
}
nvrtcResult nvrtcDestroyProgram(void **prog) {
  if (!prog) return 3;
  free(*prog);
  *prog = NULL;
  return 0;
}
nvrtcResult nvrtcCompileProgram(void *prog, int nopt, const char *const *opts) {
  fake_program *p = prog;
  if (!p || nopt < 0 || (nopt && !opts)) return 3;
  if (!p->source_len) return 6; /* NVRTC_ERROR_COMPILATION */
  p->compiled = 1;
  return 0;
}
nvrtcResult nvrtcGetProgramLogSize(void *prog, size_t *n) {
  (void)prog;
  *n = 1;
  return 0;
}
nvrtcResult nvrtcGetProgramLog(void *prog, char *log) {
  (void)prog;
  log[0] = 0;
  return 0;
}
static size_t image(const fake_program *p, int ptx, char *out) {
  char buf[400];
  int n = snprintf(buf, sizeof buf, ptx ? ".version 9.0 // fake baracuda_quant ptx %s" : "\177ELF fake baracuda_quant cubin %s",
                   p->name);
  if (out) memcpy(out, buf, (size_t)n + 1);
  return (size_t)n + 1;
}
nvrtcResult nvrtcGetCUBINSize(void *prog, size_t *n) {
  fake_program *p = prog;
  if (!p || !p->compiled) return 3;
  *n = image(p, 0, NULL);
  return 0;
}
nvrtcResult nvrtcGetCUBIN(void *prog, char *out) {
  fake_program *p = prog;
  if (!p || !p->compiled) return 3;
  image(p, 0, out);
  return 0;
}
nvrtcResult nvrtcGetPTXSize(void *prog, size_t *n) {
  fake_program *p = prog;
  if (!p || !p->compiled) return 3;
  *n = image(p, 1, NULL);
  return 0;
}
nvrtcResult nvrtcGetPTX(void *prog, char *out) {
  fake_program *p = prog;
  if (!p || !p->compiled) return 3;
  image(p, 1, out);
  return 0;
}
