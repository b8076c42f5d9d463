/* tests/emulator/emu_test.h - what the emulated suites share: a fresh seed per run
   (BQ_TEST_SEED=<n> replays one; every failure message prints g_seed), splitmix64 random
   numbers, float type codes, and the driver hook that makes the header's cuLaunchKernel
   run the emulator. Include after criterion.h and cuda_emulator.h; call emu_test_init()
   in the suite's init. A suite may set emu_launch_check to look at each launch. */
#ifndef BQ_EMU_TEST_H
#define BQ_EMU_TEST_H
#include <time.h>
#include <unistd.h>

static uint64_t g_seed, g_rng;
static uint64_t rnd(void) {
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int64_t rnd_range(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* type codes of the preludes (BQ_FT and friends): 0 f32, 1 f64, 2 f16, 3 bf16 */
static bq_dtype type_of(int code) { return code == 1 ? BQ_F64 : code == 2 ? BQ_F16 : code == 3 ? BQ_BF16 : BQ_F32; }
static void store_any(bq_dtype t, void *buf, int64_t i, double v) {
  if (t == BQ_F64) ref_store_d(buf, i, v);
  else ref_store_f(t, buf, i, (float)v);
}

/* A [rows, cols] case (per token or per group) once its row strides are set: the elements
   the x and y layouts span, and the case's name for failure messages. */
static void emu_rows_case(const bq_args *a, int64_t *xtot, int64_t *ytot, char *shape, size_t n) {
  *xtot = a->rows * (a->x_row_stride ? a->x_row_stride : a->cols);
  *ytot = a->rows * (a->y_row_stride ? a->y_row_stride : a->cols);
  snprintf(shape, n, "[%lld,%lld] strides %lld/%lld g %lld grs %lld", (long long)a->rows, (long long)a->cols,
           (long long)a->x_row_stride, (long long)a->y_row_stride, (long long)a->group_size,
           (long long)a->group_row_stride);
}

/* Per group and per block: a leading dimension for the scales of d (group_size set): 0 (the
   layout's default), the least valid one plus 0 to 3 (MN-major: the parameter rows, not
   rounded up) or the default plus 1 to 5, a third of the time each */
static int64_t emu_pick_ld(const bq_desc *d, const bq_args *a) {
  ref_scales S;
  const int k = (int)(rnd() % 3);
  if (k == 0 || ref_scales_init(&S, d, a->rows, a->cols, a->group_size, 0)) return 0;
  return k == 1 ? (S.mn ? S.prows : S.ld) + rnd_range(0, 3) : S.ld + rnd_range(1, 5);
}

typedef void (*emu_kernel)(const void *);
static int g_launches;
static void (*emu_launch_check)(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem);
static bq__CUresult emu_cuLaunchKernel(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                       unsigned by, unsigned bz, unsigned smem, bq__CUstream s, void **params,
                                       void **extra) {
  (void)s;
  cr_assert(gz == 1 && by == 1 && bz == 1 && extra == NULL);
  cr_assert(smem <= EMU_SMEM_BYTES);
  if (emu_launch_check) emu_launch_check((emu_kernel)f, gx, gy, bx, smem);
  g_launches++;
  emu_launch((emu_kernel)f, params[0], gx, gy, bx, smem);
  return 0;
}

/* cuLaunchKernelEx, as the library uses it: one attribute, programmatic stream
   serialization (QuantizedLinear's weight streaming); the emulator runs grids in order */
static int g_overlapped; /* launches with that attribute */
static bq__CUresult emu_cuLaunchKernelEx(const bq__CUlaunchConfig *c, bq__CUfunction f, void **params, void **extra) {
  cr_assert(c->num_attrs == 1 && c->attrs[0].id == BQ__CU_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION &&
            c->attrs[0].value.i == 1);
  g_overlapped++;
  return emu_cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params, extra);
}

static void emu_test_init(void) {
  const char *e = getenv("BQ_TEST_SEED");
  g_seed = e && *e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  g_rng = g_seed;
  bq__drv.cuLaunchKernel = emu_cuLaunchKernel;
  bq__drv.cuLaunchKernelEx = emu_cuLaunchKernelEx;
  bq__drv.cuTensorMapEncodeTiled = emu_tensor_map;
}

#endif
