/* kernels_src/linear_abi.h - the linear layers' host/kernel interface (the int8 GEMM with
   its dequantizing epilogue, and the weight sums), valid as C and as CUDA C++: their entry
   points, their parameter block and its flags. linear.cu and the host (src/family_linear.h)
   both include it. */
#ifndef BQ_LINEAR_ABI_H
#define BQ_LINEAR_ABI_H
#include "abi.h"

/* The GEMM's entry points: each one's index in a plan's module (bq__family.kernels, and
   the rows of the host's bq__linear_table) and its name, the kernel's extern "C" function;
   the weight sums' module has its one entry point at index 0. */
enum { BQ__GEMM_LARGE = 0, BQ__GEMV = 1, BQ__GEMV32 = 2, BQ__GEMV64 = 3, BQ__GEMM_WGMMA = 4, BQ__GEMM_CONFIGS };
#define BQ_FN_GEMM_LARGE bq_gemm_large /* 128 x 256 tiles on mma.sync */
#define BQ_FN_GEMV bq_gemv             /* weight streaming, passes of 16 activation rows */
#define BQ_FN_GEMV32 bq_gemv32         /* of 32 */
#define BQ_FN_GEMV64 bq_gemv64         /* of 64 */
#define BQ_FN_GEMM_WGMMA bq_gemm_wgmma /* 128 x 256 tiles on wgmma (an sm_90a module) */
#define BQ_FN_WEIGHT_SUMS bq_weight_sums
/* The FP8 layers' module: the mma.sync tiles elsewhere, or the wgmma tiles and weight
   streaming in an sm_90a module (the others trap) */
enum { BQ__FP8_GEMM = 0, BQ__FP8_WGMMA = 1, BQ__FP8_GEMV = 2, BQ__FP8_WGMMA_BLK = 3, BQ__FP8_GEMV_BLK = 4,
       BQ__FP8_TMA = 5, BQ__FP8_TMA_BLK = 6 };
#define BQ_FN_FP8_GEMM bq_fp8_gemm   /* 128 x 128 tiles on mma.sync (sm_89, sm_90) */
#define BQ_FN_FP8_WGMMA bq_fp8_wgmma /* 128 x 128 tiles on wgmma (an sm_90a module) */
#define BQ_FN_FP8_GEMV bq_fp8_gemv   /* M <= 64: 64 weight rows x 16 rows of x on wgmma (sm_90a) */
#define BQ_FN_FP8_WGMMA_BLK bq_fp8_wgmma_blk /* ... the two with blockwise scales */
#define BQ_FN_FP8_GEMV_BLK bq_fp8_gemv_blk
#define BQ_FN_FP8_TMA bq_fp8_tma         /* the wgmma tiles fed by the tensor memory accelerator */
#define BQ_FN_FP8_TMA_BLK bq_fp8_tma_blk /* ... with blockwise scales */

/* (FP8 layers have no weight sums: blockwise, w_sums holds the activation scales' leading
   dimension instead, so that the int8 kernels' parameter block stays as it was) */
typedef struct bq_linear_params {
  bq_u64 a, w, y, a_scales, a_zps, w_scales, w_sums, bias;
  bq_i64 m, n, k, lda, ldy;
  double a_scale; /* per-tensor activation scale, already rounded to C */
  int a_zp;       /* per-tensor activation zero point */
  int flags;      /* BQ_LF_* */
  int tiles_m, tiles_n;
} bq_linear_params;
#define BQ_LF_SA_ROW 1 /* per-token activation scales a_scales[m]; else a_scale (FP8: a_scales[0]) */
#define BQ_LF_ZP 2     /* asymmetric activations: subtract zp * wsum[n] */
#define BQ_LF_ZP_ROW 4 /* per-token zero points a_zps[m]; else a_zp */
#define BQ_LF_BIAS 8   /* add bias[n] */
#define BQ_LF_A16 16   /* a and lda allow 16-byte accesses */
#define BQ_LF_W16 32   /* w and k allow 16-byte accesses */
#define BQ_LF_Y2 64    /* y and ldy allow two-element stores */
#define BQ_LF_K0 128   /* K == 0: y = bias (or 0) */
#define BQ_LF_Y8 256   /* y and ldy allow eight-element stores */
#define BQ_LF_PDL 512  /* weight streaming launched while the activations' kernel runs */
#define BQ_LF_SW_ROW 1024 /* FP8: per-channel weight scales w_scales[n]; else w_scales[0] */
/* FP8 blockwise: a_scales[m][b] (m * lds + b, lds = w_sums) of 1 x 128 groups, w_scales[n / 128][b] of
   128 x 128 blocks (b < ceil(K / 128)), applied to each K block's partial sum */
#define BQ_LF_BLOCK 2048
#define BQ_LF_SA_MN 4096 /* ... the activation scales MN-major: a_scales[b][m] (b * lds + m) */

/* bq_fp8_tma's one parameter: the tensor maps (CUtensorMap, 128 bytes, 64-byte aligned,
   written by cuTensorMapEncodeTiled) of the activations [M, K] and the weights [N, K], both
   in boxes of 128 x 128 bytes in the 128-byte swizzle, then the usual parameter block */
#ifdef __cplusplus
#define BQ_ABI_ALIGN64 alignas(64)
#else
#define BQ_ABI_ALIGN64 _Alignas(64)
#endif
typedef struct bq_fp8_tma_params {
  BQ_ABI_ALIGN64 bq_u64 tmap_a[16];
  BQ_ABI_ALIGN64 bq_u64 tmap_w[16];
  bq_linear_params p;
} bq_fp8_tma_params;
#endif
