/* kernels_src/mx_abi.h - the microscaling formats' host/kernel interface, valid as C and as
   CUDA C++: its entry points and its parameter block. mx.cu and the host (src/family_mx.h)
   both include it. */
#ifndef BQ_MX_ABI_H
#define BQ_MX_ABI_H
#include "abi.h"

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name.
   bq_mx_lanes: a thread takes 16 bytes of floats and a group the 2^k lanes its floats span;
   the others: a thread takes a group, of 16 or 32 elements held in registers (the formats'
   sizes), or of any other size read twice (dynamic) from L1. */
enum {
  BQ__MX_G16,    /* bq_mx16: groups of 16 */
  BQ__MX_G32,    /* bq_mx32: groups of 32 */
  BQ__MX_ANY,    /* bq_mx_any: any group size */
  BQ__MX_AMAX,   /* bq_mx_amax: NVFP4 dynamic quantize's first passes, the tensor's amax */
  BQ__MX_LANES   /* bq_mx_lanes: groups of 2^k 16-byte accesses (k <= 5), all on the 16-byte grid */
};
#define BQ_FN_MX16 bq_mx16
#define BQ_FN_MX32 bq_mx32
#define BQ_FN_MX_ANY bq_mx_any
#define BQ_FN_MX_AMAX bq_mx_amax
#define BQ_FN_MX_LANES bq_mx_lanes

typedef struct bq_mx_params {
  bq_u64 x, y, scales;      /* y: E2M1 codes two a byte, else a byte an element */
  bq_u64 dy, dx;            /* backward: dy (y's strides) read, dx (x's strides) written */
  bq_u64 tensor_scale;      /* NVFP4: the f32 tensor scale g read (0: none) */
  bq_u64 out_tensor_scale;  /* NVFP4 dynamic: where g is written */
  bq_u64 amax;              /* NVFP4 dynamic: the workspace, a partial amax (f32) a block */
  bq_u64 enc;               /* NVFP4_TE with the tensor scale computed: its encode factor (f32,
                               in the workspace after the partials); 0: 1 / g */
  bq_i64 rows, cols, xs, ys; /* element strides between rows of x and y */
  bq_i64 group, ngroups, grs; /* G, groups a row, the scales' leading dimension (rows, MN) */
  bq_i64 items;             /* groups walked: rows x groups, or the blocked layout's padded
                               tiles (whose padding entries dynamic quantize writes 0) */
  bq_i64 pgroups;           /* blocked: groups a padded row (ngroups rounded up to 4) */
  double bound;             /* args.amax_bound (0: none) */
  int finish, nparts;       /* bq_mx_amax: 0 the partials' pass, 1 the pass that reduces nparts
                               partials and writes g */
  /* bq_mx_lanes: items are a lane's 2^lacc pieces (16 bytes of floats each), ppr pieces a
     row; a group takes 2^lshift pieces. fast: rows x ppr < 2^31, rows by fd (ppr's
     divider). prows: dynamic quantize into the blocked layout, the padded rows (whose scales
     it writes 0). avec: bq_mx_amax reads x by pieces too (x's rows on the 16-byte grid).
     lacc 1 (quantize forward without the rotation): two pieces a lane */
  bq_i64 ppr, prows;
  bq_fastdiv fd;
  int lshift, fast, avec, lacc;
  /* stochastic rounding (BQ_SR): the draws' key and the index of element (0, 0); the same
     key draws the fused rotation's signs */
  bq_u32 seed_lo, seed_hi;
  bq_u64 offset;
  /* the fused rotation (BQ_MX_ROT, bq_mx_lanes): blocks of 2^rlog2; rsigns: the random signs */
  int rlog2, rsigns;
} bq_mx_params;
#endif
