/* kernels_src/abi.h - what the host and every kernel file share, valid as C and as CUDA C++:
   the integer types both sides write the parameter blocks in, and the divider the host
   prepares for the kernels. Each family's <family>_abi.h builds on it. The kernel files
   include it; tools/amalgamate.py inlines it into the header's host code and into the
   embedded kernel text, so both sides compile the one definition. */
#ifndef BQ_ABI_H
#define BQ_ABI_H
typedef unsigned char bq_u8;
typedef unsigned short bq_u16;
typedef unsigned int bq_u32;
typedef long long bq_i64;
typedef unsigned long long bq_u64;

/* n / d == (umulhi(n, magic) + n) >> shift for every n < 2^32 (the host's bq__make_fastdiv,
   the kernels' bq_div_u32) */
typedef struct bq_fastdiv {
  bq_u32 d, magic, shift;
} bq_fastdiv;

/* An entry point's name as the host looks it up: BQ_ENTRY_NAME(BQ_FN_AFFINE_COLS) is
   "bq_affine_cols" */
#define BQ_ENTRY_NAME_(fn) #fn
#define BQ_ENTRY_NAME(fn) BQ_ENTRY_NAME_(fn)
#endif
