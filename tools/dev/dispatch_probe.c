/* tools/dev/dispatch_probe.c - which entry point, grid and block a call takes, without a GPU:
   the plan is selected and run on tests/fake_driver.c (a libcuda that launches nothing), and
   each launch is printed with its entry's name. The kernels compile with NVRTC as usual.
   The device is the fake one (132 SMs, no L2 size, so the first-use tune is passed over and
   the rules' choice shows). For the quantizers and dynamic quantize; fused and linear plans
   take arguments this tool does not fill.
     cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L tools/dev/dispatch_probe.c -o probe -ldl -lpthread -lm
     BARACUDA_QUANT_DRIVER=build/tests/libbq_fake_driver.so ./probe quantize fwd per_token bf16 s8 32776 4095
   Words after the shape: g=N (group size), axis=N (per channel), xs=N and ys=N (row strides),
   st=TYPE (the scales' type, e.g. st=ue8m0). */
#define _POSIX_C_SOURCE 200809L
#define BARACUDA_QUANT_IMPLEMENTATION
#include "../../baracuda_quant.h"
#include <stdio.h>
#include <stdlib.h>

static bq_plan *g_plan;
static bq__CUresult (*g_real)(bq__CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              bq__CUstream, void **, void **);

/* the launched function's entry name, in the plan or in the per-token plan it hands rows to */
static const char *entry_name(bq__CUfunction f) {
  const bq_plan *ps[2] = {g_plan, g_plan ? g_plan->rows : NULL};
  for (int k = 0; k < 2; k++)
    for (int e = 0; ps[k] && e < BQ__MAX_KERNELS; e++) {
      const bq__entry *m = ps[k]->mod[e];
      if (m && m->fn[e] == f && ps[k]->kernels[e]) return ps[k]->kernels[e];
    }
  return "?";
}
static bq__CUresult note(bq__CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned smem, bq__CUstream s, void **params, void **extra) {
  printf("  %-22s grid %u x %u x %u, block %u, dynamic smem %u\n", entry_name(f), gx, gy, gz, bx, smem);
  return g_real(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

static int pick(const char *w, int lo, int hi, const char *(*name)(int)) {
  for (int i = lo; i <= hi; i++)
    if (name(i) && !strcmp(w, name(i))) return i;
  fprintf(stderr, "dispatch_probe: unknown word %s\n", w);
  exit(64);
}
static const char *op_name(int i) { return bq__op_name((bq_op)i); }
static const char *gran_name(int i) { return bq__gran_name((bq_granularity)i); }
static const char *type_name(int i) { return bq__dtype_name((bq_dtype)i); }
static const char *dir_name(int i) { return i ? "bwd" : "fwd"; }

int main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: %s OP fwd|bwd GRAN FLOAT INT ROWS COLS [g=N] [axis=N] [xs=N] [ys=N]\n", argv[0]);
    return 64;
  }
  bq_desc d;
  memset(&d, 0, sizeof d);
  d.op = (bq_op)pick(argv[1], BQ_QUANTIZE, BQ_DYNAMIC_QUANTIZE, op_name);
  d.direction = (bq_direction)pick(argv[2], 0, 1, dir_name);
  d.granularity = (bq_granularity)pick(argv[3], BQ_PER_TENSOR, BQ_PER_BLOCK, gran_name);
  d.float_type = (bq_dtype)pick(argv[4], BQ_F32, BQ_UE8M0, type_name);
  d.int_type = (bq_dtype)pick(argv[5], BQ_F32, BQ_UE8M0, type_name);
  bq_args a;
  memset(&a, 0, sizeof a);
  a.rows = atoll(argv[6]);
  a.cols = atoll(argv[7]);
  a.numel = a.rows * a.cols;
  a.rank = 2;
  a.shape[0] = a.rows;
  a.shape[1] = a.cols;
  a.scale = 1.0;
  for (int i = 8; i < argc; i++) {
    if (!strncmp(argv[i], "g=", 2)) a.group_size = atoll(argv[i] + 2);
    else if (!strncmp(argv[i], "axis=", 5)) a.axis = atoi(argv[i] + 5);
    else if (!strncmp(argv[i], "xs=", 3)) a.x_row_stride = atoll(argv[i] + 3);
    else if (!strncmp(argv[i], "ys=", 3)) a.y_row_stride = atoll(argv[i] + 3);
    else if (!strncmp(argv[i], "st=", 3)) d.scale_type = (bq_dtype)pick(argv[i] + 3, BQ_F32, BQ_UE8M0, type_name);
    else {
      fprintf(stderr, "dispatch_probe: unknown word %s\n", argv[i]);
      return 64;
    }
  }
  bq_status st = bq_plan_select(&d, &g_plan);
  if (st) {
    fprintf(stderr, "select: %s\n", bq_last_error());
    return 1;
  }
  g_real = bq__drv.cuLaunchKernel;
  bq__drv.cuLaunchKernel = note;
  void *buf = NULL;
  if ((st = bq_malloc(&buf, 1 << 20))) return 1; /* (the fake driver's memory is never touched) */
  a.x = buf;
  a.y = buf;
  a.dy = buf;
  a.dx = buf;
  a.scales = a.out_scales = buf;
  a.out_zero_points = d.asymmetric ? (int32_t *)buf : NULL;
  printf("%s\n", g_plan->name);
  size_t ws = 0;
  if ((st = bq_plan_workspace_size(g_plan, &a, &ws)) == BQ_SUCCESS)
    st = bq_plan_run(g_plan, &a, ws ? buf : NULL, ws, NULL);
  if (st) fprintf(stderr, "run: %s\n", bq_last_error());
  bq_plan_destroy(g_plan);
  return st ? 1 : 0;
}
