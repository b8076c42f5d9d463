/* tests/test_rotate_emulated.cpp - kernels_src/rotate.cu (the Hadamard rotation) run on the
   CPU by tests/emulator/cuda_emulator.h through the header's own run path, against the CPU
   reference (tests/reference_rotate.h) bit for bit, NaN payloads aside. Built once per
   specialization (tests/meson.build). Each case draws [rows, cols] in blocks of n (every
   power of two 2 to 256), row strides with padding, bases off the 16-byte grid (the element
   path of a lane's accesses), seeds, rows shorter than a warp's segment (idle lanes), and
   data with zeros, NaN, inf and wide magnitudes; each entry point is also forced where it
   can take the block. Outputs are poisoned and compared whole, guards included. */
#include <emu_prefix.h> /* the header, references, emulator and Criterion: precompiled */
#include "reference_rotate.h"

#include "emulator/cuda_emulator.h"

#include EMU_SPEC
namespace emu_rotate {
#define EMU_SECTION 1
#include EMU_SPEC
#undef EMU_SECTION
#include "../kernels_src/common.cuh"
#include "../kernels_src/rotate.cu"
#include "emulator/kernel_undefs.h"
} // namespace emu_rotate

#include <criterion/criterion.h>

#include "emulator/emu_test.h"

#include <vector>

typedef bq_rotate_params rparams;
static void k2(const void *p) { emu_rotate::bq_rotate2(*(const rparams *)p); }
static void k4(const void *p) { emu_rotate::bq_rotate4(*(const rparams *)p); }
static void k8(const void *p) { emu_rotate::bq_rotate8(*(const rparams *)p); }
static emu_kernel g_last;
static void note_kernel(emu_kernel k, unsigned gx, unsigned gy, unsigned bx, unsigned smem) {
  (void)gx, (void)gy, (void)bx, (void)smem;
  g_last = k;
}
static void init(void) {
  emu_test_init();
  emu_launch_check = note_kernel;
}
TestSuite(emulated_rotate, .init = init);

static const bq_dtype T = (bq_dtype)EMU_T;

static double value(int kind) {
  switch (kind) {
  case 0: return 0.0;
  case 1: return rnd() % 9 == 0 ? NAN : rnd() % 7 == 0 ? ((rnd() & 1) ? INFINITY : -INFINITY) : rnd_unit() - 0.5;
  case 2: return (rnd_unit() - 0.5) * ldexp(1.0, (int)rnd_range(-30, 30));
  default: return (rnd_unit() - 0.5) * 8;
  }
}

static void one_case(int n, int force, int rep) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_HADAMARD;
  d.direction = EMU_BWD ? BQ_BACKWARD : BQ_FORWARD;
  d.float_type = T;
  d.random_signs = EMU_SIGNS;
  bq_plan plan;
  cr_assert_eq(bq__plan_init(&d, &plan), BQ_SUCCESS, "%s", bq_last_error());
  bq__entry entry;
  memset(&entry, 0, sizeof entry);
  entry.fn[BQ__ROTATE_E2] = (bq__CUfunction)k2;
  entry.fn[BQ__ROTATE_E4] = (bq__CUfunction)k4;
  entry.fn[BQ__ROTATE_E8] = (bq__CUfunction)k8;
  for (int e = 0; e < BQ__MAX_KERNELS; e++) plan.mod[e] = &entry;
  plan.num_sms = rep % 3 ? 132 : 1;

  const size_t ts = ref_dtype_size(T);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = rnd_range(rep % 5 == 0 ? 0 : 1, 9);
  a.cols = (int64_t)n * rnd_range(rep % 7 == 0 ? 0 : 1, n >= 128 ? 4 : 24);
  a.group_size = n;
  a.x_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
  a.y_row_stride = rnd() & 1 ? 0 : a.cols + rnd_range(0, 9);
  a.seed = EMU_SIGNS ? ((uint64_t)rnd() << 1) | (rnd() & 1) : 0;
  const int64_t xs = a.x_row_stride ? a.x_row_stride : a.cols, ys = a.y_row_stride ? a.y_row_stride : a.cols;
  const int64_t guard = 40;
  const int offx = rnd() % 3 ? 0 : (int)rnd_range(1, 7), offy = rnd() % 3 ? 0 : (int)rnd_range(1, 7);
  std::vector<unsigned char> xb((size_t)(a.rows * xs + 2 * guard + 16) * ts), yb((size_t)(a.rows * ys + 2 * guard + 16) * ts);
  unsigned char *x = xb.data() + (guard + offx) * ts, *y = yb.data() + (guard + offy) * ts;
  for (size_t i = 0; i < xb.size(); i++) xb[i] = (unsigned char)rnd();
  const int kind = (int)(rnd() % 4);
  for (int64_t r = 0; r < a.rows; r++)
    for (int64_t c = 0; c < a.cols; c++) store_any(T, x, r * xs + c, value(kind));
  memset(yb.data(), 0xA5, yb.size());
  std::vector<unsigned char> exb = xb, eyb = yb;
  a.x = x, a.y = y;
  char what[300];
  snprintf(what, sizeof what, "seed=0x%llx %s | [%lld,%lld] n %d strides %lld/%lld offs %d/%d force %d sms %d seed %llx",
           (unsigned long long)g_seed, EMU_SPEC, (long long)a.rows, (long long)a.cols, n, (long long)xs, (long long)ys,
           offx, offy, force, plan.num_sms, (unsigned long long)a.seed);
  g_last = NULL;
  bq__rotate_force_entry = force;
  const bq_status st = bq_plan_run(&plan, &a, NULL, 0, NULL);
  bq__rotate_force_entry = -1;
  cr_assert_eq(st, BQ_SUCCESS, "%s | %s", bq_last_error(), what);
  if (a.rows && a.cols) {
    const int v = 16 / (int)ts, need = n > 32 * v ? n / 32 : v, E = force >= 0 && (2 << force) >= need ? 2 << force : need;
    const emu_kernel want = E == 2 ? (emu_kernel)k2 : E == 4 ? (emu_kernel)k4 : (emu_kernel)k8;
    cr_assert(g_last == want, "took another entry than E = %d | %s", E, what);
  }
  ref_rotate(T, EMU_BWD, EMU_SIGNS, a.seed, n, a.rows, a.cols, exb.data() + (guard + offx) * ts, xs,
             eyb.data() + (guard + offy) * ts, ys);
  char msg[2048];
  const size_t bad = ref_compare(T, eyb.data(), yb.data(), (int64_t)(yb.size() / ts), msg, sizeof msg);
  cr_assert_eq(bad, 0, "y: %zu differ (from the buffer's start; data at %lld):\n%s| %s", bad, (long long)(guard + offy),
               msg, what);
  cr_assert(xb == exb, "x was written | %s", what);
}

Test(emulated_rotate, every_block_size, .timeout = 600) {
  for (int rep = 0; rep < 12; rep++)
    for (int n = 2; n <= 256; n *= 2) one_case(n, -1, rep);
}

Test(emulated_rotate, every_entry_by_name, .timeout = 600) {
  for (int force = 0; force < 3; force++)
    for (int n = 2; n <= 256; n *= 2)
      for (int rep = 0; rep < 3; rep++) one_case(n, force, rep + 1);
}
