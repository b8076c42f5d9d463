/* kernels_src/affine_abi.h - the affine family's host/kernel interface (quantize, dequantize,
   fake quantize), valid as C and as CUDA C++: its entry points and its parameter blocks.
   affine.cu and the host (src/family_affine.h) both include it. */
#ifndef BQ_AFFINE_ABI_H
#define BQ_AFFINE_ABI_H
#include "abi.h"

/* The entry points: each one's index in a plan's module (bq__family.kernels) and its name,
   the kernel's extern "C" function (each compiled where the prelude defines BQ_E_<NAME>) */
enum {
  BQ__AFFINE_ROW,    /* the row kernel, every granularity */
  BQ__AFFINE_COLS,   /* per channel, the channel axis innermost */
  BQ__AFFINE_ODD,    /* per channel and per group, straddling accesses in registers */
  BQ__AFFINE_BLOCKS, /* whole parameter blocks a lane */
  BQ__AFFINE_FLAT,   /* per group and per token over one flat array */
  BQ__AFFINE_NARROW, /* f64 quantize, blocks' layout over one-element accesses */
  BQ__AFFINE_MASK,   /* fake quantize per tensor and per channel with args.mask */
  BQ__AFFINE_LEAN,   /* forward quantize and dequantize over small dense tensors */
  BQ__AFFINE_PAIR,   /* bq_affine_lean's two accesses a thread (16-bit quantize) */
  BQ__AFFINE_SR,     /* stochastic rounding (quantize and fake quantize forward), alone in its SKUs */
  BQ__AFFINE_ENTRIES
};
#define BQ_FN_AFFINE bq_affine
#define BQ_FN_AFFINE_COLS bq_affine_cols
#define BQ_FN_AFFINE_ODD bq_affine_odd
#define BQ_FN_AFFINE_BLOCKS bq_affine_blocks
#define BQ_FN_AFFINE_FLAT bq_affine_flat
#define BQ_FN_AFFINE_NARROW bq_affine_narrow
#define BQ_FN_AFFINE_MASK bq_affine_mask
#define BQ_FN_AFFINE_LEAN bq_affine_lean
#define BQ_FN_AFFINE_PAIR bq_affine_pair
#define BQ_FN_AFFINE_SR bq_affine_sr

/* Every entry point but bq_affine_lean's and bq_affine_pair's */
typedef struct bq_affine_params {
  bq_u64 in0, in1, out;                    /* device pointers */
  bq_i64 rows, cols;                       /* [rows, cols] */
  bq_i64 in0_stride, in1_stride, out_stride;
  bq_i64 tiles, tpw, chunks;               /* warp tiles per row; per item; items per row */
  bq_i64 group;                            /* channel: inner size; group: G */
  bq_i64 gmod;                             /* channel: number of channels */
  bq_i64 grs;                              /* group, block: the scales' leading dimension (bq_pbase) */
  bq_u64 scales, zps;                      /* device arrays (zps may be 0: all zero) */
  double scale;                            /* per tensor: the scale, already a C value */
  bq_fastdiv fd_group, fd_gmod, fd_chunks; /* 32-bit dividers, valid when fast32 != 0 */
  int zp;                                  /* per tensor */
  int fast32;                              /* indices fit in 32 bits */
  /* bq_affine_blocks only: blocks a row, lanes a block (a power of two), parts a block */
  bq_i64 nblk;
  bq_fastdiv fd_parts;
  int gl, parts;
  bq_u64 mask; /* bq_affine_mask: the mask's 32-bit words */
} bq_affine_params;
/* bq_affine_sr's: the problem, the draws' key and first index (args.seed, args.offset), and
   the fused rotation's block log2 (args.rotation_block) and whether its signs are random
   (desc.random_signs, keyed by the seed too) */
typedef struct bq_affine_sr_params {
  bq_affine_params a;
  bq_u64 offset;
  bq_u32 seed_lo, seed_hi;
  int rlog2, rsigns;
} bq_affine_sr_params;
/* bq_affine_lean's and bq_affine_pair's own parameter blocks: only what each reads (a launch
   carries its kernel's parameters, and the pair kernel ran slower taking all of
   bq_affine_params) */
typedef struct bq_lean_params {
  bq_u64 in0, out, scales, zps; /* device pointers (zps may be 0: all zero) */
  double scale;                 /* per tensor: the scale, already a C value */
  bq_u32 accesses, n;           /* whole accesses; elements (fewer than 2^31) */
  bq_fastdiv fd_group;          /* per token the row length, per group G, per block B */
  int zp;                       /* per tensor */
} bq_lean_params;
typedef struct bq_pair_params {
  bq_u64 in0, out, scales; /* device pointers: the 16-bit input, its codes, the scales */
  bq_u32 pairs;            /* the threads with work: elements / (2 * BQ_P) */
  bq_fastdiv fd_group;     /* per token the row length, per group G, per block B */
} bq_pair_params;
/* Per block, the two kernels' blocks with the row's geometry after them: an element's block
   is (r / B) * grs + c / B for its row r and column c */
typedef struct bq_lean_block_params {
  bq_lean_params l;
  bq_fastdiv fd_cols; /* the row length */
  bq_u32 grs;         /* the scales' leading dimension, in scales */
} bq_lean_block_params;
typedef struct bq_pair_block_params {
  bq_pair_params l;
  bq_fastdiv fd_cols;
  bq_u32 grs;
} bq_pair_block_params;
#endif
