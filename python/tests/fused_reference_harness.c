/* fused_reference_harness.c - tests/reference_fused.h on raw files, for
   test_fused_reference_torch.py (which checks the torch-written contract of
   test_gpu_fused.py against the C reference, with no GPU).
     harness rms T rows D eps x.bin w.bin [r.bin] n.bin [h.bin]
     harness silu|gelu T rows D x.bin a.bin
     harness rmsq T rows D eps G asym qmin qmax s8|u8 scale zp x.bin w.bin q.bin s.bin z.bin
       (G 0: dynamic per token; > 0: dynamic per group; -1: static per tensor with scale, zp)
   T: f32, f64, f16, bf16. Build with -ffp-contract=off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_fused.h"

static void *slurp(const char *p, size_t n) {
  FILE *f = fopen(p, "rb");
  void *b = malloc(n ? n : 1);
  if (!f || !b || fread(b, 1, n, f) != n) {
    fprintf(stderr, "harness: cannot read %zu bytes of %s\n", n, p);
    exit(2);
  }
  fclose(f);
  return b;
}

static void spit(const char *p, const void *b, size_t n) {
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "harness: cannot write %s\n", p);
    exit(2);
  }
}

int main(int argc, char **argv) {
  if (argc < 7) return 64;
  bq_dtype T = !strcmp(argv[2], "f32") ? BQ_F32 : !strcmp(argv[2], "f64") ? BQ_F64
             : !strcmp(argv[2], "f16") ? BQ_F16 : BQ_BF16;
  long rows = atol(argv[3]), D = atol(argv[4]);
  size_t es = ref_dtype_size(T), n = (size_t)(rows * D) * es;
  if (!strcmp(argv[1], "rms")) {
    int has_r = argc == 11;
    char *x = slurp(argv[6], n), *w = slurp(argv[7], (size_t)D * es);
    char *r = has_r ? slurp(argv[8], n) : NULL, *out = malloc(n ? n : 1);
    for (long i = 0; i < rows; i++)
      reff_rmsnorm_row(T, x + (size_t)(i * D) * es, r ? r + (size_t)(i * D) * es : NULL, w, D, atof(argv[5]),
                       out + (size_t)(i * D) * es);
    spit(argv[has_r ? 9 : 8], out, n);
    if (has_r) spit(argv[10], r, n);
    return 0;
  }
  if (!strcmp(argv[1], "silu") || !strcmp(argv[1], "gelu")) {
    char *x = slurp(argv[5], 2 * n), *a = malloc(n ? n : 1);
    for (long i = 0; i < rows; i++)
      reff_gated_row(T, !strcmp(argv[1], "silu") ? REFF_SILU_MUL : REFF_GELU_TANH_MUL, x + (size_t)(2 * i * D) * es,
                     D, a + (size_t)(i * D) * es);
    spit(argv[6], a, n);
    return 0;
  }
  if (!strcmp(argv[1], "rmsq") && argc == 18) {
    long G = atol(argv[6]);
    char *x = slurp(argv[13], n), *w = slurp(argv[14], (size_t)D * es);
    reff_producer p;
    memset(&p, 0, sizeof p);
    p.kind = REFF_RMSNORM;
    p.T = T;
    p.rows = rows;
    p.cols = D;
    p.x = x;
    p.weight = w;
    p.eps = atof(argv[5]);
    long ns = G > 0 ? rows * (D / G) : rows;
    unsigned char *q = malloc((size_t)(rows * D) + 1);
    float *s = calloc((size_t)ns + 1, 4);
    int32_t *z = calloc((size_t)ns + 1, 4);
    bq_desc qd;
    bq_args qa;
    memset(&qd, 0, sizeof qd);
    memset(&qa, 0, sizeof qa);
    qd.float_type = T;
    qd.int_type = !strcmp(argv[10], "u8") ? BQ_U8 : BQ_S8;
    qd.qmin = atoi(argv[8]);
    qd.qmax = atoi(argv[9]);
    qa.y = q;
    if (G < 0) {
      qd.op = BQ_QUANTIZE;
      qd.granularity = BQ_PER_TENSOR;
      qa.scale = atof(argv[11]);
      qa.zero_point = atoi(argv[12]);
    } else {
      qd.op = BQ_DYNAMIC_QUANTIZE;
      qd.granularity = G ? BQ_PER_GROUP : BQ_PER_TOKEN;
      qd.asymmetric = atoi(argv[7]);
      qd.scale_type = BQ_F32;
      qa.group_size = G > 0 ? G : 0;
      qa.out_scales = s;
      qa.out_zero_points = qd.asymmetric ? z : NULL;
    }
    if (reff_fused_quantize(&p, &qd, &qa)) {
      fprintf(stderr, "harness: reff_fused_quantize refused the problem\n");
      return 1;
    }
    spit(argv[15], q, (size_t)(rows * D));
    spit(argv[16], s, (size_t)ns * 4);
    spit(argv[17], z, (size_t)ns * 4);
    return 0;
  }
  return 64;
}
