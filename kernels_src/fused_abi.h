/* kernels_src/fused_abi.h - the fused producers' host/kernel interface (RMSNorm, gated
   activation, then quantize), valid as C and as CUDA C++: their entry points and their
   parameter block. fused.cu and the host (src/family_fused.h) both include it. */
#ifndef BQ_FUSED_ABI_H
#define BQ_FUSED_ABI_H
#include "abi.h"

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function. bq_fused_c1 .. bq_fused_c8 hold a row of up to 256 * k
   accesses in registers (k = 1, 2, 4, 8), bq_fused_long takes any row in batches, and
   bq_fused_staged stages 16-byte aligned rows in shared memory, the next row's copy in
   flight while a row is worked on. bq_fused_m4, bq_fused_m8 and bq_fused_m16 hold a row of
   up to 512, 1024 or 2048 accesses in registers with 128 threads (4, 8 or 16 accesses each):
   a row's fixed work (its reductions, rstd and scale) is done by half as many warps.
   bq_fused_m4f and bq_fused_m8f are the same for rows of exactly 512 or 1024 accesses, whose
   accesses need no check against the row's end. bq_fused_c2d and bq_fused_c8d are
   bq_fused_c2 and bq_fused_c8 for dense rows (every stream 16-byte aligned, D whole
   accesses), a residual allowed: no element path. bq_fused_amax is NVFP4's first launch
   where the tensor scale is computed: the producer's amax over the tensor, nothing written. */
enum {
  BQ__FUSED_C1, BQ__FUSED_C2, BQ__FUSED_C4, BQ__FUSED_C8, BQ__FUSED_LONG, BQ__FUSED_STAGED,
  BQ__FUSED_M4, BQ__FUSED_M8, BQ__FUSED_M4F, BQ__FUSED_M8F, BQ__FUSED_M16, BQ__FUSED_C2D, BQ__FUSED_C8D,
  BQ__FUSED_AMAX, BQ__FUSED_ENTRIES
};
#define BQ_FN_FUSED_C1 bq_fused_c1
#define BQ_FN_FUSED_C2 bq_fused_c2
#define BQ_FN_FUSED_C4 bq_fused_c4
#define BQ_FN_FUSED_C8 bq_fused_c8
#define BQ_FN_FUSED_LONG bq_fused_long
#define BQ_FN_FUSED_STAGED bq_fused_staged
#define BQ_FN_FUSED_M4 bq_fused_m4
#define BQ_FN_FUSED_M8 bq_fused_m8
#define BQ_FN_FUSED_M4F bq_fused_m4f
#define BQ_FN_FUSED_M8F bq_fused_m8f
#define BQ_FN_FUSED_M16 bq_fused_m16
#define BQ_FN_FUSED_C2D bq_fused_c2d
#define BQ_FN_FUSED_C8D bq_fused_c8d
#define BQ_FN_FUSED_AMAX bq_fused_amax

typedef struct bq_fused_params {
  bq_u64 x, res, w, out, y, scales, zps;
  bq_i64 rows, cols, xs, rs, os, ys, group, grs; /* strides in elements; grs: per group */
  double scale, eps;                             /* per tensor's static scale; RMSNorm's eps */
  int zp, aligned, fast_groups;
  int slot, wstage; /* bq_fused_staged: a slot's bytes; the weight staged */
  /* microscaling output, NVFP4: the f32 tensor scale g read (0: computed), where a computed
     one is written, and the workspace's amax (f32): bq_fused_amax writes a partial a block,
     then (nparts > 0) one block reduces nparts partials into amax[nparts], which the
     producer's launch reads */
  bq_u64 tensor_scale, out_tensor_scale, amax;
  int nparts;
} bq_fused_params;
#endif
