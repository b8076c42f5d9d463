/* kernels_src/dynamic_abi.h - dynamic quantization's host/kernel interface, valid as C and
   as CUDA C++: its entry points and its parameter block. dynamic.cu and the host
   (src/family_dynamic.h) both include it. */
#ifndef BQ_DYNAMIC_ABI_H
#define BQ_DYNAMIC_ABI_H
#include "abi.h"

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function. Per block's tiles take the first two indices. */
enum {
  BQ__DYN_ROW,    /* bq_dynamic: a team a segment (a row, or a group); per block bq_dynamic_tiles */
  BQ__DYN_LONG,   /* bq_dynamic_long: per token, long rows; per block bq_dynamic_tiles_rows; per
                     group bq_dynamic_groups (integer codes' fast groups) */
  BQ__DYN_REDUCE, /* bq_dynamic_reduce, then bq_dynamic_apply: per tensor */
  BQ__DYN_APPLY,
  BQ__DYN_STAGED  /* bq_dynamic_staged: per token, 16-bit rows staged in shared memory; per
                     group bq_dynamic_sets (fast groups of 2 or 4 accesses, two a lane) */
};
#define BQ__DYN_SETS BQ__DYN_STAGED
#define BQ_FN_DYNAMIC bq_dynamic
#define BQ_FN_DYNAMIC_LONG bq_dynamic_long
#define BQ_FN_DYNAMIC_STAGED bq_dynamic_staged
#define BQ_FN_DYNAMIC_GROUPS bq_dynamic_groups           /* per group, groups reduced across lanes */
#define BQ_FN_DYNAMIC_SETS bq_dynamic_sets               /* per group, the same, two groups a lane */
#define BQ_FN_DYNAMIC_REDUCE bq_dynamic_reduce
#define BQ_FN_DYNAMIC_APPLY bq_dynamic_apply
#define BQ_FN_DYNAMIC_TILES bq_dynamic_tiles           /* per block, rows 16-byte aligned, whole accesses */
#define BQ_FN_DYNAMIC_TILES_ROWS bq_dynamic_tiles_rows /* per block, any rows */

typedef struct bq_dynamic_params {
  bq_u64 x, y, scales, zps, partial;
  bq_i64 rows, cols, xs, ys;
  bq_i64 group, ngroups, grs;             /* per group (per block: B, blocks a row); grs as bq_pbase's ld */
  int tpr, fast_groups, nblocks, align_y; /* align_y: some segment's y starts off a 32-byte sector */
  int staged, pad;                        /* per block: tiles staged in shared memory (bq_tiles_staged);
                                             per token: bq_dynamic_staged's launch */
  double bound;                           /* args.amax_bound (0: none) */
  /* per block, the tiles' walk (bq_twalk): trows rows of tiles, tcols columns walked (the
     staged kernel's last column apart where it is not whole accesses), the grid's
     gridDim.x = tdq tcols + tdr */
  bq_i64 trows, tcols, tdq, tdr;
  /* per token, the fused rotation (BQ_DYN_ROT): blocks of 2^rlog2, rsigns the random signs
     keyed by the seed's words */
  int rlog2, rsigns;
  bq_u32 seed_lo, seed_hi;
} bq_dynamic_params;
#endif
