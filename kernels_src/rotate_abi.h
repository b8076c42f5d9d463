/* kernels_src/rotate_abi.h - the Hadamard rotation's host/kernel interface, valid as C and as
   CUDA C++: its entry points and its parameter block. rotate.cu and the host
   (src/family_rotate.h) both include it. */
#ifndef BQ_ROTATE_ABI_H
#define BQ_ROTATE_ABI_H
#include "abi.h"

/* The entry points: a lane holds E = 2, 4 or 8 consecutive elements of a row (the host picks
   the larger of 16 bytes of T and n / 32), a warp 32 E of them, whole blocks of n */
enum { BQ__ROTATE_E2, BQ__ROTATE_E4, BQ__ROTATE_E8 };
#define BQ_FN_ROTATE2 bq_rotate2
#define BQ_FN_ROTATE4 bq_rotate4
#define BQ_FN_ROTATE8 bq_rotate8

typedef struct bq_rotate_params {
  bq_u64 x, y;
  bq_i64 rows, cols, xs, ys; /* element strides between rows */
  bq_i64 segs;               /* warps' segments a row: cols / (32 E) rounded up */
  bq_u32 seed_lo, seed_hi;   /* the sign vector's key (random_signs) */
  int log2n;                 /* the block: n = 2^log2n */
  int signs;                 /* 1: the random sign vector, 0: all +1 */
} bq_rotate_params;
#endif
