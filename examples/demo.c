/* demo.c - quantize a few floats to int8 on the GPU, dequantize them back, print both.
   Build: cc -std=c11 -I.. demo.c -ldl -lpthread -lm   (no CUDA toolkit needed to build) */
#define BARACUDA_QUANT_IMPLEMENTATION
#include "baracuda_quant.h"
#include <stdio.h>

int main(void) {
  float x[8] = {-1.0f, -0.5f, 0.0f, 0.26f, 0.5f, 1.0f, 3.0f, 1e30f}, back[8];
  signed char q[8];
  void *dx, *dq;
  if (bq_malloc(&dx, sizeof x) != BQ_SUCCESS) {
    fprintf(stderr, "demo: no GPU available: %s\n", bq_last_error());
    return 1;
  }
  bq_malloc(&dq, sizeof q);
  bq_memcpy_to_device(dx, x, sizeof x);

  bq_desc desc = {.op = BQ_QUANTIZE, .float_type = BQ_F32, .int_type = BQ_S8};
  bq_plan *quant, *dequant;
  if (bq_plan_select(&desc, &quant) != BQ_SUCCESS) {
    fprintf(stderr, "demo: %s\n", bq_last_error());
    return 1;
  }
  desc.op = BQ_DEQUANTIZE;
  if (bq_plan_select(&desc, &dequant) != BQ_SUCCESS) {
    fprintf(stderr, "demo: %s\n", bq_last_error());
    return 1;
  }
  bq_args args = {.x = dx, .y = dq, .numel = 8, .scale = 1.0 / 64, .zero_point = 3};
  bq_status st = bq_plan_run(quant, &args, NULL, 0, NULL); /* x -> q */
  args.x = dq;
  args.y = dx;
  if (st == BQ_SUCCESS) st = bq_plan_run(dequant, &args, NULL, 0, NULL); /* q -> x */
  if (st == BQ_SUCCESS) st = bq_synchronize(NULL);
  if (st != BQ_SUCCESS) {
    fprintf(stderr, "demo: %s\n", bq_last_error());
    return 1;
  }
  bq_memcpy_to_host(q, dq, sizeof q);
  bq_memcpy_to_host(back, dx, sizeof back);
  printf("kernel: %s\n", bq_plan_sku(quant));
  printf("scale 1/64, zero point 3, q-range [-128, 127]\n");
  for (int i = 0; i < 8; i++) printf("  x = %-8g -> q = %4d -> %g\n", x[i], q[i], back[i]);
  bq_plan_destroy(quant);
  bq_plan_destroy(dequant);
  bq_free(dx);
  bq_free(dq);
  return 0;
}
