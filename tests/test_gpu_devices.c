/* test_gpu_devices.c - plans and CUDA contexts on real devices: a plan selected for
   BQ_DEVICE(1) refuses to run while device 0's context is current (by name, not with the
   driver's "invalid resource handle"), runs correctly with its own device current, plans
   on two devices each give correct results, and a BQ_DEVICE(0) plan runs with no context
   current (its context pushed for the launch, popped after). Results are compared bit for
   bit with the CPU reference. Skips without a driver; the two-device test skips with
   fewer than two devices. */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "header_o0.h" /* the header, its host code at -O0 */

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#define OK(call) \
  do { \
    bq_status st_ = (call); \
    cr_assert_eq(st_, BQ_SUCCESS, "%s -> %s: %s", #call, bq_status_name(st_), bq_last_error()); \
  } while (0)

#define ROWS 37
#define COLS 1000

static int device_count(void) {
  if (!bq__driver_get()) cr_skip_test("no usable CUDA driver: %s", bq_last_error());
  int n = 0;
  if (bq__drv.cuDeviceGetCount(&n) || n < 1) cr_skip_test("no CUDA device");
  return n;
}

static bq__CUcontext current(void) {
  bq__CUcontext c = NULL;
  cr_assert_eq(bq__drv.cuCtxGetCurrent(&c), 0);
  return c;
}

/* per-token quantize, f32 -> s8, f32 scales (the default scale type) */
static bq_desc the_desc(int device) {
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = BQ_QUANTIZE;
  d.granularity = BQ_PER_TOKEN;
  d.float_type = BQ_F32;
  d.device = device;
  return d;
}

/* One problem's host data and its device buffers, allocated in the current context. */
typedef struct problem {
  float x[ROWS * COLS], s[ROWS];
  int32_t zp[ROWS];
  int8_t want[ROWS * COLS], got[ROWS * COLS];
  void *dx, *dy, *ds, *dzp;
  bq_args a;
} problem;

static void problem_make(problem *P, unsigned seed) {
  memset(P, 0, sizeof *P);
  uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < ROWS; i++) {
    P->s[i] = ldexpf(1.0f + (float)(i % 7) / 8.0f, -(int)(i % 5) - 2);
    P->zp[i] = (int32_t)(i % 11) - 5;
  }
  for (int i = 0; i < ROWS * COLS; i++) {
    r ^= r << 13; r ^= r >> 7; r ^= r << 17;
    P->x[i] = ((float)(r >> 40) / (float)(1 << 24) - 0.5f) * 80.0f * P->s[i / COLS];
    P->want[i] = (int8_t)ref_quantize_f(P->x[i], P->s[i / COLS], P->zp[i / COLS], -128, 127);
  }
  OK(bq_malloc(&P->dx, sizeof P->x));
  OK(bq_malloc(&P->dy, sizeof P->got));
  OK(bq_malloc(&P->ds, sizeof P->s));
  OK(bq_malloc(&P->dzp, sizeof P->zp));
  OK(bq_memcpy_to_device(P->dx, P->x, sizeof P->x));
  OK(bq_memcpy_to_device(P->ds, P->s, sizeof P->s));
  OK(bq_memcpy_to_device(P->dzp, P->zp, sizeof P->zp));
  OK(bq_memset(P->dy, 0xA5, sizeof P->got));
  P->a.x = P->dx;
  P->a.y = P->dy;
  P->a.scales = P->ds;
  P->a.zero_points = (const int32_t *)P->dzp;
  P->a.rows = ROWS;
  P->a.cols = COLS;
}

/* Waits for the current context's legacy stream and compares y with the reference. */
static void problem_check(problem *P, const char *what) {
  OK(bq_synchronize(NULL));
  OK(bq_memcpy_to_host(P->got, P->dy, sizeof P->got));
  for (int i = 0; i < ROWS * COLS; i++)
    cr_assert_eq(P->got[i], P->want[i], "%s: y[%d] = %d, want %d (x %.9g, s %.9g, zp %d)", what, i, P->got[i],
                 P->want[i], (double)P->x[i], (double)P->s[i / COLS], P->zp[i / COLS]);
  OK(bq_memset(P->dy, 0xA5, sizeof P->got));
}

static void problem_free(problem *P) {
  bq_free(P->dx);
  bq_free(P->dy);
  bq_free(P->ds);
  bq_free(P->dzp);
}

static problem P0, P1;

Test(gpu_devices, plan_of_device_1_with_device_0_current) {
  if (device_count() < 2) cr_skip_test("fewer than two CUDA devices");
  OK(bq_set_device(1));
  problem_make(&P1, 1);
  OK(bq_set_device(0));
  problem_make(&P0, 2);

  bq_desc d1 = the_desc(BQ_DEVICE(1));
  bq_plan *p1 = NULL;
  bq__CUcontext dev0 = current();
  OK(bq_plan_select(&d1, &p1));
  cr_assert_eq(current(), dev0, "selecting for BQ_DEVICE(1) changed the current context");

  /* device 0's context current: refused by name, nothing launched */
  bq_status st = bq_plan_run(p1, &P1.a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s: %s", bq_status_name(st), bq_last_error());
  cr_assert(strstr(bq_last_error(), "plan selected on device 1, current context is device 0's"), "%s",
            bq_last_error());

  /* device 1 current: the right result */
  OK(bq_set_device(1));
  OK(bq_plan_run(p1, &P1.a, NULL, 0, NULL));
  problem_check(&P1, "BQ_DEVICE(1) plan, device 1 current");

  /* a plan on each device, each run with its own device current */
  bq_desc d0 = the_desc(BQ_DEVICE(0));
  bq_plan *p0 = NULL;
  OK(bq_plan_select(&d0, &p0));
  cr_assert(current() != dev0, "selecting for BQ_DEVICE(0) made device 0 current");
  OK(bq_set_device(0));
  OK(bq_plan_run(p0, &P0.a, NULL, 0, NULL));
  problem_check(&P0, "BQ_DEVICE(0) plan, device 0 current");
  OK(bq_set_device(1));
  OK(bq_plan_run(p1, &P1.a, NULL, 0, NULL));
  problem_check(&P1, "BQ_DEVICE(1) plan, device 1 current (again)");
  /* and the device 0 plan refuses device 1's context */
  st = bq_plan_run(p0, &P0.a, NULL, 0, NULL);
  cr_assert_eq(st, BQ_ERROR_INVALID_ARGUMENT, "%s: %s", bq_status_name(st), bq_last_error());
  cr_assert(strstr(bq_last_error(), "plan selected on device 0, current context is device 1's"), "%s",
            bq_last_error());

  bq_plan_destroy(p0);
  bq_plan_destroy(p1);
  problem_free(&P1);
  OK(bq_set_device(0));
  problem_free(&P0);
}

Test(gpu_devices, device_0_plan_with_no_context_current) {
  device_count();
  OK(bq_set_device(0));
  bq__CUcontext dev0 = current();
  problem_make(&P0, 3);
  cr_assert_eq(bq__drv.cuCtxSetCurrent(NULL), 0);
  cr_assert_null(current());

  bq_desc d = the_desc(BQ_DEVICE(0));
  bq_plan *p = NULL;
  OK(bq_plan_select(&d, &p));
  cr_assert_null(current(), "select left a context current");
  OK(bq_plan_run(p, &P0.a, NULL, 0, NULL));
  cr_assert_null(current(), "run left the plan's context current");

  cr_assert_eq(bq__drv.cuCtxSetCurrent(dev0), 0);
  problem_check(&P0, "BQ_DEVICE(0) plan run with no context current");
  bq_plan_destroy(p);
  problem_free(&P0);
}
