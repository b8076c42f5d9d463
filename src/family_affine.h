/* ---- the affine family: quantize, dequantize, fake quantize ------------------------------ */
#include "../kernels_src/affine_abi.h" /* its entry points and parameter blocks, as affine.cu compiles them */

/* n / d == (umulhi(n, magic) + n) >> shift for all n < 2^32, 1 <= d <= 2^31
   (Granlund-Montgomery with a 33-bit multiplier). */
BQ__FN bq_fastdiv bq__make_fastdiv(uint32_t d) {
  bq_fastdiv f;
  uint32_t l = 0;
  while (l < 31 && (1u << l) < d) l++;
  uint64_t m = (((uint64_t)1 << (32 + l)) + d - 1) / d; /* ceil(2^(32+l) / d) */
  f.d = d;
  f.magic = (uint32_t)(m - ((uint64_t)1 << 32));
  f.shift = l;
  return f;
}

/* The entry points each granularity has (per channel, per token, per group; per tensor all
   three 0): kernels[] of the family, by the enum */
#define BQ__AFFINE_NAMES(ch, tok, grp)                                                                          \
  {BQ_ENTRY_NAME(BQ_FN_AFFINE), (ch) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_COLS) : NULL,                               \
   (ch) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_ODD) : NULL,                                                    \
   (ch) || (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_BLOCKS) : NULL,                                        \
   (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_FLAT) : NULL,                                                  \
   (ch) || (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_NARROW) : NULL,                                        \
   (tok) || (grp) ? NULL : BQ_ENTRY_NAME(BQ_FN_AFFINE_MASK), (ch) ? NULL : BQ_ENTRY_NAME(BQ_FN_AFFINE_LEAN), \
   (tok) || (grp) ? BQ_ENTRY_NAME(BQ_FN_AFFINE_PAIR) : NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_SR)}

/* The affine dispatch table: a row per op, direction, granularity and float type (the int
   type and q-range change no choice), in that order, each the fastest setting measured on
   the H100 at 256 MiB. Changing a tuning decision is changing its row. Where a column
   sizes a launch it holds what the kernel needs (registers a thread, waves of an SM's
   warps, a share of an SM), and the launch rules below turn it into counts for the device
   in use; on the H100 and the H200 they give the counts measured (tests/test_launch.c
   checks it). Columns:
   - u: accesses per lane per tile in the row kernels (affine.cu's BQ_U; it names the SKU's
     variant). f64 4, but 2 per token backward (its two f64 inputs); per tensor 2 (its
     kernel is the leanest); per channel and per group, 4 in the slot kernels (affine.cu's
     BQ_SLOTS: quantize and fake quantize forward, f64 backward) and 2 without (each
     access's parameters take registers); per token 4 (64 bytes of the lead stream in
     flight a lane), but 2 where a 16-bit type is read twice (quantize and fake quantize
     backward read dy and x: 4 would cost a quarter of the warps an SM holds).
   - ga: accesses a lane takes of its parameter block in bq_affine_blocks (affine.cu's
     BQ_GA), 0 where that kernel is never taken: the ops where it is faster than the row
     kernel. Quantize forward 4; quantize backward 2 for f64, f16 and bf16 (with 4, f64
     holds so many registers that an SM takes half the blocks), 4 for f32; fake quantize
     forward 4, f64 fake quantize backward 4; per token (a row one block), f16 and bf16
     quantize forward 4 (the row kernel's registers leave an SM 3 blocks; 16 M elements run
     faster, 256 MiB as fast or faster), f64 quantize and fake quantize backward, 2 and 4.
     Dequantize, and fake quantize backward of f32, f16 and
     bf16, keep the row kernel: their per-access lookups cost little (no reciprocal) and its
     lane-contiguous accesses are faster for them.
   - fr: accesses a lane takes in bq_affine_flat (affine.cu's BQ_FR), 0 where never taken;
     each the fastest for its ops on groups whose accesses straddle (against bq_affine_odd):
     forward 4 (8 is slower); backward 2, f64 1, dequantize 4; f64 quantize forward keeps
     bq_affine_odd, faster for it. Per token (contiguous rows off the 16-byte grid, against
     the row kernel) the same, except forward f16, bf16 and f64 quantize and fake quantize,
     which keep the row kernel, faster for them.
   - na: elements a lane takes in bq_affine_narrow (affine.cu's BQ_NA), f64 quantize only,
     0 elsewhere: forward 8, backward per token 2, else 4.
   - waves: the row kernel's items an SM, in SM-fulls of resident warps (bq__wave_warps;
     64 warps on the H100): more, shorter items balance the SMs' last wave better, fewer pay
     the row's set-up less often. Per token 4, per group 2, and 1 for f64 backward per
     token (its reciprocal is dearer) and f64 per group.
   - odd: 1 where straddling accesses take bq_affine_odd rather than the row kernel's
     element-by-element redo; not f64 dequantize forward, whose two elements an access
     straddle seldom (the odd kernel's registers cost more than redoing them).
   - slots: how the row kernels of per channel and per group give an access its parameters
     (affine.cu's BQ_SLOTS, BQ_ITEM_SLOTS). 1: each parameter block a tile touches is prepared
     once, a block a lane, in shared memory (quantize and fake quantize forward, f64
     backward); 2: the same, once an item for all its tiles (f64 quantize: per group, and
     per channel forward; in the other slot kernels that is slower, their spills grow); 0:
     each access looks its parameters up, faster for dequantize (no reciprocal to prepare)
     and for backward with 16- and 32-bit types (with slots they run out of registers).
   - items: the row kernel's item. 0: a tile (per tensor and per channel, one dense row;
     dequantize, more warps in flight); 1: several tiles of a row where there are several
     rows, so that a row's set-up (its scale's reciprocal) is paid once (per token and per
     group); 2: several tiles always (the per-channel rows with slots 2).
   - bcap: the share of an SM's threads bq_affine_blocks and bq_affine_narrow take at most,
     as 1/bcap (2: half, 4 blocks of 256 on the H100), each warp striding over the items
     (f64: fewer blocks than the SM could hold are faster); 0: one item a warp.
   - cwave: bq_affine_cols' grid. 1: one wave of blocks (as many as its launch bounds let
     an SM hold, bq__lb_blocks) striding down the rows (f16 and bf16 quantize and fake
     quantize forward, slower with more); 0: a block for every affine.cu BQ_R rows.
   - lean: where bq_affine_lean (an access a thread, its parameters prepared in registers)
     replaces the kernels above for dense data (bq__affine_lean): -1 at any size, else up to
     that many waves of the float stream (a wave: a 16-byte access for every thread the
     SMs hold, 4.1 MiB on the H100; bq__affine_lean_rule), 0 never. Its few registers let
     an SM hold many warps, which pays on tensors of a few waves; per token and per group it
     loses on the H100 from 64 MiB on (the row and blocks kernels prepare a scale once for
     many accesses), so only 16-bit quantize, measured faster at 32 MiB, takes it there (8
     waves: 33 MiB). Per tensor it is as fast or faster at every size measured, except f64
     (quantize at 256 MiB, dequantize at 8 MiB). Beyond L2, where the rule says no, the
     first-use tune decides (bq__affine_tuned).
     Where it is taken, 16-bit quantize without zero points over rows and groups of whole
     pairs of accesses runs bq_affine_pair, its form with two accesses a thread.
   - lu: accesses a thread of bq_affine_lean (affine.cu's BQ_LEAN_U), a block's width apart
     and all loaded before any is converted: 2 where that keeps more bytes in flight than
     its registers cost (quantize forward per tensor of f32 and f64, quantize and dequantize
     forward per token, dequantize forward per group: on the H100 2-9% faster than 1 at
     256 MiB), else 1 (per tensor 16-bit is 1% slower with 2; 4 was never faster than 2).
   - regs: each entry point's register budget a thread, which its launch bounds ask ptxas
     to meet as the least blocks of 256 an SM must hold (bq__lb_blocks: 80 registers are 3
     blocks, 64 are 4; 0: none named, which differs from a budget: that lets ptxas spend
     more registers). Row kernel: 80 for the forward slot kernels (left alone, ptxas gives
     some of them more registers and fewer blocks; backward ones would spill); 48 for
     per-tensor quantize backward of f16 and bf16 (left alone, its mask interval's registers
     cost it a block an SM, which is slower for integer codes).
     bq_affine_odd: as the row kernel, but 64 for dequantize of f32, f16 and bf16 (one more
     block than its registers would otherwise allow, which is faster; f64 spills so).
     bq_affine_blocks: 64 for per-group f64 quantize forward (its registers, a few over,
     would allow one block fewer). bq_affine_flat: 64 for forward quantize and fake
     quantize with f32 compute (one more block than their registers allow; dequantize is
     slower so, and f64 gains nothing). bq_affine_narrow: 64. bq_affine_cols: 80 (f16 and
     bf16 forward take one wave of them), but 64 for per-channel quantize forward of f32 and
     f64 and fake quantize forward of f16 and bf16 (a block more an SM: on the H200 6-8%
     faster, the others level or slower). bq_affine_mask: 64 for per-channel fake quantize
     forward (f32 takes 72 registers, 3 blocks, otherwise; 64 is faster though f32 then
     keeps 24 bytes on the stack).
     bq_affine_lean and bq_affine_pair: 0 (the rows leave them out). 0 also where the
     granularity has no such kernel. */
typedef struct bq__affine_row {
  bq_op op;
  bq_direction dir;
  bq_granularity gran;
  bq_dtype ft;
  int u, ga, fr, na, waves, odd, slots, items, bcap, cwave, lean, lu;
  int regs[BQ__AFFINE_ENTRIES]; /* by entry point: the registers a thread it is compiled for (bq__lb_blocks) */
} bq__affine_row;
static const bq__affine_row bq__affine_table[] = {
  /* op, direction, granularity, float type                 u ga fr na waves odd slots items bcap cwave lean lu  regs: row cols odd blocks flat narrow mask */
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,          2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  2, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,          4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    8,  2, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,          2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,         4, 4, 0, 0,   1, 1,   1,    0,   0,    0,    0,  1, {80, 64, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,         4, 4, 0, 8,   1, 1,   2,    2,   2,    0,    0,  1, {80, 64, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,         4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 80, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,        4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 80, 80, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,           4, 0, 4, 0,   4, 0,   0,    1,   0,    0,    0,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,           4, 0, 0, 8,   4, 0,   0,    1,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,           4, 4, 0, 0,   4, 0,   0,    1,   0,    0,    8,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,          4, 4, 0, 0,   4, 0,   0,    1,   0,    0,    8,  2, {0, 0, 0, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,           4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,           4, 4, 0, 8,   1, 1,   2,    1,   2,    0,    0,  1, {80, 0, 80, 64, 0, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,           4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    8,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,          4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    8,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,         4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,         2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {48, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {48, 0, 0, 0, 0, 0}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,        2, 4, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,        4, 2, 0, 4,   1, 1,   1,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,        2, 2, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,       2, 2, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,          4, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,          2, 2, 1, 2,   1, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,          2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,         2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,          2, 4, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,          4, 2, 1, 4,   1, 1,   2,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,          2, 2, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,         2, 2, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,        4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,        2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,   -1,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,       2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,       4, 0, 0, 0,   1, 0,   0,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,       2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,         4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,         4, 0, 4, 0,   4, 0,   0,    0,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,         4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,         2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,         4, 0, 4, 0,   1, 0,   0,    0,   2,    0,    0,  2, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,         2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  2, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,       4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,       2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,      2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,      4, 0, 0, 0,   1, 1,   0,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,      2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,     2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,        2, 0, 4, 0,   1, 0,   0,    0,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,        4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,       4, 0, 4, 0,   4, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,        4, 0, 4, 0,   1, 1,   0,    0,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,        2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_DEQUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,       2, 0, 4, 0,   2, 1,   0,    0,   0,    0,    0,  1, {0, 0, 64, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F32,     2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F64,     4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_F16,     2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TENSOR, BQ_BF16,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F32,    4, 4, 0, 0,   1, 1,   1,    0,   0,    0,    0,  1, {80, 80, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F64,    4, 4, 0, 0,   1, 1,   1,    0,   2,    0,    0,  1, {80, 80, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_F16,    4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 64, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_CHANNEL, BQ_BF16,   4, 4, 0, 0,   1, 1,   1,    0,   0,    1,    0,  1, {80, 64, 80, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F32,      4, 0, 4, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F64,      4, 0, 0, 0,   4, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_F16,      4, 0, 0, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_TOKEN, BQ_BF16,     4, 0, 0, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F32,      4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F64,      4, 4, 4, 0,   1, 1,   1,    1,   2,    0,    0,  1, {80, 0, 80, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_F16,      4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_FORWARD, BQ_PER_GROUP, BQ_BF16,     4, 4, 4, 0,   2, 1,   1,    1,   0,    0,    0,  1, {80, 0, 80, 0, 64, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F32,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F64,    4, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_F16,    2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TENSOR, BQ_BF16,   2, 0, 0, 0,   1, 0,   0,    0,   0,    0,    0,  1, {0, 0, 0, 0, 0, 0}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F32,   2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F64,   4, 4, 0, 0,   1, 1,   1,    0,   2,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_F16,   2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_CHANNEL, BQ_BF16,  2, 0, 0, 0,   1, 1,   0,    0,   0,    0,    0,  1, {0, 80, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F32,     4, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F64,     2, 4, 1, 0,   1, 0,   0,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_F16,     2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_TOKEN, BQ_BF16,    2, 0, 2, 0,   4, 0,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F32,     2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F64,     4, 4, 1, 0,   1, 1,   1,    1,   2,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_F16,     2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
  {BQ_FAKE_QUANTIZE, BQ_BACKWARD, BQ_PER_GROUP, BQ_BF16,    2, 0, 2, 0,   2, 1,   0,    1,   0,    0,    0,  1, {0, 0, 0, 0, 0, 64}},
};
#define BQ__AFFINE_ROWS ((int)(sizeof bq__affine_table / sizeof bq__affine_table[0]))
/* a normalized affine desc's row (the table's order is its key's) */
BQ__FN const bq__affine_row *bq__affine_row_of(const bq_desc *d) {
  int t = d->float_type == BQ_F64 ? 1 : d->float_type == BQ_F16 ? 2 : d->float_type == BQ_BF16 ? 3 : 0;
  /* per block is per group along a row (the block's row of scales aside): per group's row */
  int g = bq__gran_code(d->granularity == BQ_PER_BLOCK ? BQ_PER_GROUP : d->granularity);
  int i = ((((int)d->op - BQ_QUANTIZE) * 2 + (d->direction == BQ_BACKWARD)) * 4 + g) * 4 + t;
  return &bq__affine_table[i];
}
/* elements per 16-byte access of the widest stream, always the float one: affine.cu's BQ_P */
BQ__FN int bq__affine_vec(const bq_desc *d) { return 16 / bq__dtype_size(d->float_type); }
BQ__FN int bq__affine_u(const bq_desc *d) { return bq__affine_row_of(d)->u; }
BQ__FN int bq__affine_ga(const bq_desc *d) { return bq__affine_row_of(d)->ga; }
BQ__FN int bq__affine_fr(const bq_desc *d) { return bq__affine_row_of(d)->fr; }
BQ__FN int bq__affine_na(const bq_desc *d) { return bq__affine_row_of(d)->na; }

/* A kernel's launch bounds as the prelude macro BQ_LB_<name>: 256 threads a block and, where
   min_blocks is not 0, at least that many blocks an SM (0 names none, which differs from 1) */
BQ__FN void bq__launch_bounds_define(bq__str *s, const char *name, int min_blocks) {
  if (min_blocks) bq__str_fmt(s, "#define BQ_LB_%s __launch_bounds__(256, %d)\n", name, min_blocks);
  else bq__str_fmt(s, "#define BQ_LB_%s __launch_bounds__(256)\n", name);
}

BQ__FN void bq__affine_prelude(const bq_desc *d, const bq__target *t, bq__str *s) {
  (void)t;
  bq__prelude_types(d, s);
  static const char *const lb_names[BQ__AFFINE_ENTRIES] = {"ROW", "COLS", "ODD", "BLOCKS", "FLAT", "NARROW", "MASK", "LEAN",
                                                                  "PAIR", "SR"};
  const bq__affine_row *r = bq__affine_row_of(d);
  bq__str_fmt(s, "#define BQ_OP %s\n#define BQ_DIR %s\n#define BQ_GRAN %s\n#define BQ_U %d\n#define BQ_GA %d\n"
              "#define BQ_FR %d\n#define BQ_NA %d\n#define BQ_SLOTS %d\n#define BQ_ITEM_SLOTS %d\n#define BQ_ITEMS %d\n",
              bq__spec("OP", d->op), bq__spec("DIR", d->direction), bq__spec("GRAN", d->granularity), r->u, r->ga,
              r->fr, r->na, r->slots > 0, r->slots == 2, r->items > 0);
  bq__str_fmt(s, "#define BQ_LEAN_U %d\n#define BQ_SR %d\n", r->lu, d->rounding == BQ_ROUND_STOCHASTIC);
  if (d->rotation) bq__str_fmt(s, "#define BQ_AFF_ROT 1\n");
  for (int e = 0; e < BQ__AFFINE_ENTRIES; e++) bq__launch_bounds_define(s, lb_names[e], bq__lb_blocks(r->regs[e], 256));
}

/* FP8 storage is symmetric: a static per-tensor zero point (quantize's and the fused
   producers' args.zero_point) must be 0 */
BQ__FN bq_status bq__fp8_zero_point(const bq_plan *p, int32_t zp) {
  if (!bq__is_fp8(p->desc.int_type) || zp == 0) return BQ_SUCCESS;
  return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_point (%d) must be 0: %s storage is symmetric", p->name,
                  (int)zp, bq__dtype_name(p->desc.int_type));
}

BQ__FN bq_status bq__affine_shape(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__view_of(p, a, &v);
}
/* the whole validation, giving the problem's view (check's, and run's first step) */
BQ__FN bq_status bq__affine_validate(const bq_plan *p, const bq_args *a, bq__view *vp) {
  bq__view v;
  bq_status st = bq__view_of(p, a, &v);
  if (st) return st;
  *vp = v;
  const bq_desc *d = &p->desc;
  if (d->granularity == BQ_PER_TENSOR) {
    if (!(isfinite(a->scale) && a->scale > 0))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) must be finite and > 0", p->name, a->scale);
    if (d->float_type != BQ_F64 && !((float)a->scale > 0 && isfinite((float)a->scale)))
      return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.scale (%g) is not a finite positive f32", p->name,
                      a->scale);
  }
  if (d->scale_type == BQ_UE8M0X4 && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: packed scales (ue8m0x4) carry "
                    "no zero points", p->name, (const void *)a->zero_points);
  if (d->granularity == BQ_PER_TENSOR && (st = bq__fp8_zero_point(p, a->zero_point))) return st;
  if (bq__is_fp8(d->int_type) && d->granularity != BQ_PER_TENSOR && a->zero_points)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: args.zero_points (%p) must be NULL: %s storage is symmetric",
                    p->name, (const void *)a->zero_points, bq__dtype_name(d->int_type));
  if (d->rotation) { /* blocks along the last dimension (per tensor: of the flat array) */
    const int64_t last = d->granularity == BQ_PER_TENSOR ? v.numel
                         : d->granularity == BQ_PER_CHANNEL ? (a->rank > 0 ? a->shape[a->rank - 1] : 1) : v.cols;
    if ((st = bq__rotation_block_check(p->name, a->rotation_block, last))) return st;
  }
  if (v.numel == 0) return BQ_SUCCESS;
  int t = bq__dtype_size(d->float_type);
  if (a->mask && (st = bq__check_ptr(p, "args.mask", a->mask, 4))) return st;
  if (d->direction == BQ_FORWARD) {
    if ((st = bq__check_ptr(p, "args.x", a->x, d->op == BQ_DEQUANTIZE ? 1 : t))) return st;
    if ((st = bq__check_ptr(p, "args.y", a->y, d->op == BQ_QUANTIZE ? 1 : t))) return st;
  } else {
    if ((st = bq__check_ptr(p, "args.dy", a->dy, t))) return st;
    if ((st = bq__check_ptr(p, "args.dx", a->dx, t))) return st;
    /* x, for the mask, unless the forward pass saved it in args.mask */
    if (d->op != BQ_DEQUANTIZE && !a->mask && (st = bq__check_ptr(p, "args.x", a->x, t))) return st;
  }
  if (d->granularity != BQ_PER_TENSOR) {
    if ((st = bq__check_ptr(p, "args.scales", a->scales, bq__dtype_size(d->scale_type)))) return st;
    if (a->zero_points && (st = bq__check_ptr(p, "args.zero_points", a->zero_points, 4))) return st;
  }
  return BQ_SUCCESS;
}
BQ__FN bq_status bq__affine_check(const bq_plan *p, const bq_args *a) {
  bq__view v;
  return bq__affine_validate(p, a, &v);
}

BQ__FN size_t bq__no_workspace(const bq_plan *p, const bq_args *a) {
  (void)p;
  (void)a;
  return 0;
}

/* Per channel takes bq_affine_cols when the channel axis is innermost (inner size 1), C is a
   multiple of the cp columns a lane owns (affine.cu's BQ_CP) with at least 8 lanes' worth of
   them, and every stream the kernel reads or writes is aligned to a chunk of cp elements.
   Returns cp, or 0 where the kernel does not apply. */
BQ__FN int64_t bq__affine_cols_cp(const bq_plan *p, const bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t cp = p->vec < 4 ? p->vec : 4;
  if (d->granularity != BQ_PER_CHANNEL || v->group != 1 || v->gmod % cp || v->gmod / cp < 8) return 0;
  int t = bq__dtype_size(d->float_type), fwd = d->direction == BQ_FORWARD;
  uint64_t in0 = (uint64_t)cp * (fwd && d->op == BQ_DEQUANTIZE ? 1 : t);
  uint64_t out = (uint64_t)cp * (fwd && d->op == BQ_QUANTIZE ? 1 : t);
  int has_in1 = !fwd && d->op != BQ_DEQUANTIZE; /* x, for the backward mask */
  if (k->in0 % in0 || k->out % out || (has_in1 && k->in1 % ((uint64_t)cp * t))) return 0;
  return cp;
}

/* Whether an access can straddle two parameter blocks of `group` elements: the block is not
   a whole number of accesses, or a row of the stream that leads the accesses (y for
   dequantize forward, else x or dy) starts off its 16-byte grid. */
BQ__FN int bq__affine_straddles(const bq_plan *p, const bq_affine_params *k, const bq__view *v, int64_t group) {
  const bq_desc *d = &p->desc;
  int64_t t = bq__dtype_size(d->float_type);
  int out_leads = d->direction == BQ_FORWARD && d->op == BQ_DEQUANTIZE;
  uint64_t lead = out_leads ? k->out : k->in0;
  int64_t lead_stride = out_leads ? k->out_stride : k->in0_stride;
  return group % p->vec != 0 || lead % 16 != 0 || (v->rows > 1 && (lead_stride * t) % 16 != 0);
}

/* Per channel, per group and per token (a block a row) take bq_affine_blocks for the ops
   bq__affine_ga names, where no access straddles two parameter blocks and its 32-bit
   work-item arithmetic holds. Fills in k's fields for that kernel and returns 1, or returns
   0. */
/* The parameter block of bq_affine_blocks, bq_affine_narrow and bq_affine_flat: a group, a
   channel's run (both k->group), or per token a row. */
BQ__FN int64_t bq__affine_block_len(const bq_desc *d, const bq_affine_params *k, const bq__view *v) {
  return d->granularity == BQ_PER_TOKEN ? v->cols : k->group;
}

/* (bq_affine_blocks' and bq_affine_narrow's layout: blocks of g elements, gc accesses of
   them, up to ga a lane) */
BQ__FN int bq__affine_blocks_fill(bq_affine_params *k, const bq__view *v, int64_t g, int64_t gc, int64_t ga) {
  int64_t nblk = v->cols / g, lim = (int64_t)1 << 31;
  int64_t gl = 1, parts = 1, ipr;
  while (gl < 32 && gl * ga < gc) gl *= 2;
  if (gl * ga < gc) parts = (gc + 32 * ga - 1) / (32 * ga);
  ipr = parts > 1 ? nblk * parts : (nblk + 32 / gl - 1) / (32 / gl);
  if (gc >= lim || nblk >= lim || k->gmod >= lim || ipr >= lim || v->rows * ipr >= lim) return 0;
  k->group = g;
  k->nblk = nblk;
  k->gl = (int32_t)gl;
  k->parts = (int32_t)parts;
  k->chunks = ipr;
  k->fast32 = 1;
  k->fd_chunks = bq__make_fastdiv((uint32_t)ipr);
  /* per block: a row's row of blocks (affine.cu's bq_prow; the callers bound its B); elsewhere unused */
  k->fd_group = bq__make_fastdiv((uint32_t)(g < lim ? g : 1));
  k->fd_parts = bq__make_fastdiv((uint32_t)parts);
  k->fd_gmod = bq__make_fastdiv((uint32_t)k->gmod);
  return 1;
}
BQ__FN int bq__affine_blocks(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t ga = bq__affine_ga(d), g = bq__affine_block_len(d, k, v);
  if (!ga || bq__affine_straddles(p, k, v, g) || v->cols % g) return 0; /* (per block: a partial last block) */
  if (d->granularity == BQ_PER_BLOCK && g >= ((int64_t)1 << 31)) return 0; /* bq_prow divides in 32 bits */
  return bq__affine_blocks_fill(k, v, g, g / p->vec, ga);
}

/* f64 quantize takes bq_affine_narrow (bq_affine_blocks' layout over accesses of one element)
   for parameter blocks of at least 64 elements (a group; a row per token; a channel's run
   per channel): forward and per-token backward always, per-group and per-channel backward
   where 16-byte accesses straddle blocks (aligned blocks keep bq_affine_blocks). Per
   channel with the axis innermost keeps bq_affine_cols, which is taken first. Fills in k's
   fields and returns 1, or returns 0. It is faster than the row, odd-shape, flat and blocks
   kernels on those shapes, with the fastest count a lane for each (bq__affine_na): forward
   8, backward per token 2, backward per group 4. Backward on aligned blocks is slower here,
   so those keep bq_affine_blocks; per channel with straddling runs follows per group's
   rule. */
BQ__FN int bq__affine_narrow(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int64_t na = bq__affine_na(d), g = bq__affine_block_len(d, k, v);
  if (!na || g < 64 || v->cols % g) return 0; /* (per block: a partial last block) */
  if (d->granularity == BQ_PER_BLOCK && g >= ((int64_t)1 << 31)) return 0; /* bq_prow divides in 32 bits */
  if (d->direction == BQ_BACKWARD && d->granularity != BQ_PER_TOKEN && !bq__affine_straddles(p, k, v, g)) return 0;
  return bq__affine_blocks_fill(k, v, g, g, na);
}

/* Per group (and per token, with G the row length) takes bq_affine_flat for the ops
   bq__affine_fr names where the data is one flat array (every row stride the row length
   and the parameter rows dense, or a single row), a
   warp's tile of 32 fr accesses touches at most 32 groups, and either an access can
   straddle two groups (as for bq_affine_odd below) or the op is not one bq_affine_blocks
   takes. Fills in k's fields for that kernel and returns the warps to launch (a tile each),
   or returns 0. */
BQ__FN int64_t bq__affine_flat(const bq_plan *p, bq_affine_params *k, const bq__view *v) {
  const bq_desc *d = &p->desc;
  int tok = d->granularity == BQ_PER_TOKEN; /* per token: a group a row */
  int64_t fr = bq__affine_fr(d), g = bq__affine_block_len(d, k, v), n = v->rows * v->cols;
  if (!fr || g >= ((int64_t)1 << 31) || 32 * fr * p->vec > 30 * g) return 0; /* (g bounded first: 30 g fits) */
  /* parameters at flat index e / G: row-major per-group scales (packed ones are their bytes) */
  if (d->granularity == BQ_PER_BLOCK || d->scale_layout == BQ_SCALES_MN_MAJOR) return 0;
  int fwd = d->direction == BQ_FORWARD, has_in1 = !fwd && d->op != BQ_DEQUANTIZE;
  if (v->rows > 1 && (k->in0_stride != v->cols || k->out_stride != v->cols ||
                      (has_in1 && k->in1_stride != v->cols) || (!tok && k->grs != v->cols / g)))
    return 0;
  /* where nothing straddles, the ops that take bq_affine_blocks keep it (it is faster
     there); the others take this kernel too. Per token, rows on the 16-byte grid keep the
     row kernels. */
  if ((tok || bq__affine_ga(d)) && !bq__affine_straddles(p, k, v, g)) return 0;
  k->group = g;
  k->fast32 = n <= ((int64_t)1 << 31);
  k->fd_group = bq__make_fastdiv((uint32_t)g);
  return n / (32 * fr * p->vec) + 1;
}

/* bq_affine_mask's and bq_affine_lean's view (affine.cu's bq_dense_params): the tensor as one
   dense array of n elements, parameter runs of k->group (k->gmod channels) */
BQ__FN void bq__affine_dense(bq_affine_params *k, int64_t n) {
  k->rows = 1;
  k->cols = n;
  k->fast32 = n <= ((int64_t)1 << 31);
  if (k->fast32) {
    k->fd_group = bq__make_fastdiv((uint32_t)k->group);
    k->fd_gmod = bq__make_fastdiv((uint32_t)k->gmod);
  }
}

/* Forward quantize and dequantize per tensor, per token, per group and per block take
   bq_affine_lean where the table's `lean` allows (-1: any size; else the tensor's float
   stream is at most that many MiB; 0: never), the tensor has fewer than 2^31 elements, the
   data is dense (every row stride the row length), the lead stream 16-byte aligned and the
   other on its accesses' grid, rows (per token and per block), groups and blocks whole
   accesses, per group the scales row-major and dense (not packed), and per block row-major
   and not packed (the run adds the row's geometry, bq_lean_block_params). Fills
   in k's fields the kernels' own blocks take (k->cols the element count, k->tiles the whole
   accesses, k->fd_group), sets
   *which to the entry point (BQ__AFFINE_LEAN, or BQ__AFFINE_PAIR where it applies) and
   returns the threads to launch, or returns 0. Forced (tests), the table is not asked. */
BQ__FN int64_t bq__affine_lean(const bq_plan *p, bq_affine_params *k, const bq__view *v, int *which) {
  const bq_desc *d = &p->desc;
  int64_t n = v->rows * v->cols, t = bq__dtype_size(d->float_type);
  int out_leads = d->op == BQ_DEQUANTIZE, tok = d->granularity == BQ_PER_TOKEN, blk = d->granularity == BQ_PER_BLOCK;
  if (d->direction != BQ_FORWARD || n >= ((int64_t)1 << 31)) return 0;
  if ((out_leads ? k->out : k->in0) % 16) return 0;
  /* the narrow stream's accesses (p->vec int elements) aligned too: no width check a thread */
  if ((out_leads ? k->in0 : k->out) % (uint64_t)(p->vec * bq__dtype_size(d->int_type))) return 0;
  if (v->rows > 1 && (k->in0_stride != v->cols || k->out_stride != v->cols)) return 0;
  if (d->granularity == BQ_PER_GROUP &&
      (k->group % p->vec || d->scale_layout == BQ_SCALES_MN_MAJOR || d->scale_type == BQ_UE8M0X4 ||
       (v->rows > 1 && k->grs != v->cols / k->group)))
    return 0;
  if (tok && v->cols % p->vec) return 0;
  if (blk && (k->group >= ((int64_t)1 << 31) || k->group % p->vec || v->cols % p->vec ||
              d->scale_layout == BQ_SCALES_MN_MAJOR || d->scale_type == BQ_UE8M0X4 ||
              (v->rows + k->group - 1) / k->group * k->grs >= ((int64_t)1 << 31)))
    return 0; /* (B and the kernels' block index are 32-bit) */
  k->group = tok ? v->cols : d->granularity == BQ_PER_GROUP || blk ? k->group : 1;
  bq__affine_dense(k, n);
  k->tiles = n / p->vec;
  /* quantize from 16-bit data without zero points, rows and groups whole pairs of accesses,
     the output 16-byte aligned: bq_affine_pair, a thread for two accesses under one scale
     (n is then whole pairs) */
  int pair = d->op == BQ_QUANTIZE && d->granularity != BQ_PER_TENSOR && t == 2 && !k->zps &&
             k->group % (2 * p->vec) == 0 && (!blk || v->cols % (2 * p->vec) == 0) && k->out % 16 == 0 &&
             p->kernels[BQ__AFFINE_PAIR];
  *which = pair ? BQ__AFFINE_PAIR : BQ__AFFINE_LEAN;
  return pair ? k->tiles / 2 : k->tiles + (n % p->vec != 0);
}

/* The table's lean column for n elements of the float type's t bytes on a device of limits
   l: the rule takes the lean route */
BQ__FN int bq__affine_lean_rule(const bq__affine_row *row, int64_t n, int64_t t, const bq__limits *l) {
  return row->lean < 0 || (row->lean > 0 && n * t <= bq__wave_bytes(l, row->lean));
}
/* the tune's scratch for bq__affine_tuned: x and y in buffers of their own */
BQ__FN void bq__affine_tune_point(bq_args *s, const bq_args *a, void *const buf[2]) {
  *s = *a;
  s->x = buf[0];
  s->y = buf[1];
}
/* Where the rule takes the row kernels but the lean route could serve a tensor larger than
   L2, which is faster depends on the GPU: on the H100 the row kernels, which prepare a scale
   once for many accesses, and on the H200 lean for per-group dequantize and most 16-bit and
   FP8 quantize, the row kernels for f32 and f64 per token. The tune decides: candidate 0 the
   rule's kernels, 1 the lean route. */
BQ__FN int bq__affine_tuned(const bq_plan *p, const bq_args *a, const bq__view *v, void *stream) {
  const bq_desc *d = &p->desc;
  const int64_t n = v->numel, tf = bq__dtype_size(d->float_type), ti = bq__dtype_size(d->int_type);
  if (p->l2_bytes <= 0 || n * tf < p->l2_bytes) return 0;
  int cls = 0;
  while (cls < 62 && ((int64_t)1 << (cls + 1)) <= n) cls++; /* floor(log2 n) */
  const int q = d->op == BQ_QUANTIZE;
  bq__tune_req r = {"affine_lean", cls, 2, 0, {(size_t)(n * (q ? tf : ti)), (size_t)(n * (q ? ti : tf))},
                    bq__affine_tune_point};
  return bq__tune_choice(p, a, stream, &r) == 1;
}

/* Tests: a BQ__AFFINE_* entry point the next runs take wherever its own rules let it (the
   other special kernels are then passed over); bq_affine_odd and bq_affine serve every shape
   of their granularities. -1: the host's choice. */
static int bq__affine_force_entry = -1;
/* Per channel with the channel axis outermost (every axis before it of size 1), forward
   quantize or dequantize, no mask: the tensor is [channels, inner] with a parameter block a
   row, which is per token over those rows (one contract, docs/numerics.md), and the
   per-token kernels run that layout faster than the per-channel ones (they prepare a row's
   scale once; the per-channel row kernel prepares parameter blocks in shared memory a tile
   at a time). Rows of at least BQ__ROWS_MIN_COLS elements take it, as the Python package's
   per-channel ops have. The per-token plan is selected on first use (under stream capture
   too: its modules load as a run's do) and kept. 1 with *q filled and *rp set where it
   applies; 0 where not; -1 with the status in *st where the plan could not be selected. */
#define BQ__ROWS_MIN_COLS 1024
BQ__FN int bq__affine_rows(const bq_plan *p, const bq_args *a, const bq__view *v, bq_args *q, const bq_plan **rp,
                           bq_status *st) {
  const bq_desc *d = &p->desc;
  if (d->granularity != BQ_PER_CHANNEL || d->direction != BQ_FORWARD || a->mask ||
      (d->op != BQ_QUANTIZE && d->op != BQ_DEQUANTIZE) || bq__affine_force_entry >= 0 || bq__dry.plan || !p->ctx)
    return 0; /* (select's dry run primes the plan's own kernels; the per-token plan comes on first use) */
  if (v->group < BQ__ROWS_MIN_COLS || v->group * v->gmod != v->numel) return 0; /* not outermost, or short rows */
  bq_plan *r = __atomic_load_n(&((bq_plan *)p)->rows, __ATOMIC_ACQUIRE);
  if (!r) {
    bq_desc t = *d;
    t.granularity = BQ_PER_TOKEN;
    if ((*st = bq_plan_select(&t, &r))) return -1;
    bq_plan *none = NULL;
    if (!__atomic_compare_exchange_n(&((bq_plan *)p)->rows, &none, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      bq_plan_destroy(r); /* another thread published one first */
      r = none;
    }
  }
  memset(q, 0, sizeof *q);
  q->x = a->x, q->y = a->y;
  q->rows = v->gmod, q->cols = v->group;
  q->scales = a->scales, q->zero_points = a->zero_points;
  *rp = r;
  return 1;
}

/* the parameter block every affine kernel but the lean ones reads: streams, shape, strides,
   parameters (the tiling and the dividers are the caller's) */
BQ__FN bq_affine_params bq__affine_params_of(const bq_plan *p, const bq_args *a, const bq__view *v) {
  bq_affine_params k;
  memset(&k, 0, sizeof k);
  const int fwd = p->desc.direction == BQ_FORWARD;
  k.in0 = (uint64_t)(uintptr_t)(fwd ? a->x : a->dy);
  k.in1 = (uint64_t)(uintptr_t)(fwd ? NULL : a->x);
  k.out = (uint64_t)(uintptr_t)(fwd ? a->y : a->dx);
  k.rows = v->rows;
  k.cols = v->cols;
  k.in0_stride = fwd ? v->xs : v->ys; /* dy is shaped like y */
  k.in1_stride = v->xs;
  k.out_stride = fwd ? v->ys : v->xs; /* dx is shaped like x */
  k.group = v->group ? v->group : 1;
  k.gmod = v->gmod ? v->gmod : 1;
  k.grs = v->grs;
  k.scales = (uint64_t)(uintptr_t)a->scales;
  k.zps = (uint64_t)(uintptr_t)a->zero_points;
  k.scale = p->desc.float_type == BQ_F64 ? a->scale : (double)(float)a->scale;
  k.zp = a->zero_point;
  return k;
}
/* Stochastic rounding and the fused rotation: bq_affine_sr, 16 elements a thread of 16-bit
   data, else 8 (affine.cu's BQ_SR_N), over [rows, cols] (per tensor and per channel one dense
   row), a grid of at most two SM-fulls of threads striding over them */
BQ__FN bq_status bq__affine_sr_run(const bq_plan *p, const bq_args *a, const bq__view *v, void *stream) {
  bq_affine_sr_params k;
  memset(&k, 0, sizeof k);
  k.a = bq__affine_params_of(p, a, v);
  k.offset = a->offset;
  k.seed_lo = (uint32_t)a->seed, k.seed_hi = (uint32_t)(a->seed >> 32);
  if (p->desc.rotation) { /* (validated: a power of two) */
    k.rlog2 = bq__hadamard_log2(a->rotation_block);
    k.rsigns = p->desc.random_signs;
  }
  const bq__limits lim = bq__limits_of(p);
  const int64_t per = bq__dtype_size(p->desc.float_type) <= 2 ? 16 : 8;
  const int64_t threads = v->rows * ((v->cols + per - 1) / per), cap = 2 * lim.sms * (lim.threads_sm / 256);
  const int64_t blocks = bq__grid(threads, 256);
  return bq__launch(p, BQ__AFFINE_SR, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
}

BQ__FN bq_status bq__affine_run(const bq_plan *p, const bq_args *a, void *ws, size_t ws_bytes, void *stream) {
  (void)ws;
  (void)ws_bytes;
  bq__view v;
  bq_status st = bq__affine_validate(p, a, &v);
  if (st || v.numel == 0) return st;
  const bq_desc *d = &p->desc;
  if (d->rounding == BQ_ROUND_STOCHASTIC || d->rotation) return bq__affine_sr_run(p, a, &v, stream);
  bq_args rq;
  const bq_plan *rp = NULL;
  const int rows = bq__affine_rows(p, a, &v, &rq, &rp, &st);
  if (rows < 0) return st;
  if (rows) return rp->fam->run(rp, &rq, NULL, 0, stream); /* (its context is this plan's, current) */
  bq_affine_params k = bq__affine_params_of(p, a, &v);
  const int f = bq__affine_force_entry;
  const bq__affine_row *row = bq__affine_row_of(d);
  if (a->mask) {
    /* fake quantize with a saved mask (bq_affine_mask): the tensor as one dense array of
       chunks of 32 accesses, two chunks a warp (affine.cu's BQ_MU), each warp striding */
    int64_t n = v.numel, chunks = (n + 32 * p->vec - 1) / (32 * p->vec);
    k.mask = (uint64_t)(uintptr_t)a->mask;
    bq__affine_dense(&k, n);
    return bq__launch(p, BQ__AFFINE_MASK, bq__grid((chunks + 1) / 2, 8), 1, 256, 0, &k, stream);
  }
  /* forcing BQ__AFFINE_LEAN forces the lean route: bq_affine_lean or bq_affine_pair; else
     the table's lean column takes it, or the tune where it is undecided */
  int lw = BQ__AFFINE_LEAN;
  bq_affine_params lk = k;
  int64_t lean = (f < 0 || f == BQ__AFFINE_LEAN) && p->kernels[BQ__AFFINE_LEAN] ? bq__affine_lean(p, &lk, &v, &lw) : 0;
  const bq__limits lim = bq__limits_of(p);
  if (lean && f < 0 && !bq__affine_lean_rule(row, v.numel, bq__dtype_size(d->float_type), &lim) &&
      !bq__affine_tuned(p, a, &v, stream))
    lean = 0;
  if (lean) k = lk;
  /* per block the kernels' blocks carry the row's geometry after them (the others' blocks
     are the first part, all their kernels read) */
  const bq_fastdiv fd_cols = lean && d->granularity == BQ_PER_BLOCK ? bq__make_fastdiv((uint32_t)v.cols) : k.fd_group;
  if (lean && lw == BQ__AFFINE_PAIR) { /* a pair a thread */
    bq_pair_block_params pp = {{k.in0, k.out, k.scales, (uint32_t)lean, k.fd_group}, fd_cols, (uint32_t)k.grs};
    return bq__launch(p, lw, bq__grid(lean, 256), 1, 256, 0, &pp, stream);
  }
  if (lean) { /* lu accesses a thread (the one past the last whole access takes the rest) */
    bq_lean_block_params lp = {{k.in0, k.out, k.scales, k.zps, k.scale, (uint32_t)k.tiles, (uint32_t)k.cols, k.fd_group,
                                k.zp},
                               fd_cols, (uint32_t)k.grs};
    return bq__launch(p, lw, bq__grid((lean + row->lu - 1) / row->lu, 256), 1, 256, 0, &lp, stream);
  }
  int64_t cp = f < 0 || f == BQ__AFFINE_COLS ? bq__affine_cols_cp(p, &k, &v) : 0;
  if (cp) {
    /* the channel axis innermost: [numel / C, C] with a scale per column (bq_affine_cols) */
    int64_t chunks = v.gmod / cp, rows = v.numel / v.gmod;
    /* x: strips of a chunk a thread, up to 8 warps a block (no more than C needs); y: a
       block for every affine.cu BQ_R rows (its rows in flight), up to 65535 (the blocks
       then stride), or where the table's cwave says so one wave of blocks (as many as the
       kernel's launch bounds let an SM hold) striding down the rows. */
    int64_t t = bq__dtype_size(d->float_type);
    int64_t wpb = (chunks + 31) / 32 < 8 ? (chunks + 31) / 32 : 8;
    int64_t gx = (chunks + 32 * wpb - 1) / (32 * wpb);
    int64_t r = (d->op == BQ_FAKE_QUANTIZE ? 32 : 64) / (cp * t), gy = (rows + r - 1) / r;
    if (row->cwave) {
      int64_t wave = lim.sms * bq__lb_blocks(row->regs[BQ__AFFINE_COLS], 256) * 8 / wpb / gx;
      if (gy > wave) gy = wave > 0 ? wave : 1;
    }
    if (gy > 65535) gy = 65535;
    k.rows = rows;
    k.cols = k.in0_stride = k.in1_stride = k.out_stride = v.gmod;
    return bq__launch(p, BQ__AFFINE_COLS, gx, gy, (unsigned)(32 * wpb), 0, &k, stream);
  }
  int narrow = (f < 0 || f == BQ__AFFINE_NARROW) && bq__affine_narrow(p, &k, &v);
  if (narrow || ((f < 0 || f == BQ__AFFINE_BLOCKS) && bq__affine_blocks(p, &k, &v))) {
    /* whole blocks a lane (bq_affine_narrow, f64 only, and bq_affine_blocks): an item a
       warp, or the table's bcap blocks an SM at most, each warp striding over the items */
    int64_t items = k.rows * k.chunks;
    int64_t blocks = bq__grid(items, 8), cap = row->bcap ? lim.sms * (lim.threads_sm / row->bcap / 256) : blocks;
    /* the kernel's 32-bit lane index (blockIdx.x * blockDim.x) must not wrap: fewer than
       2^24 blocks of 256, each warp striding over the items */
    if (cap > BQ__BLOCKS_MAX_GRID) cap = BQ__BLOCKS_MAX_GRID;
    return bq__launch(p, narrow ? BQ__AFFINE_NARROW : BQ__AFFINE_BLOCKS, blocks < cap ? blocks : cap, 1, 256, 0, &k, stream);
  }
  int64_t flat = f < 0 || f == BQ__AFFINE_FLAT ? bq__affine_flat(p, &k, &v) : 0;
  if (flat) return bq__launch(p, BQ__AFFINE_FLAT, bq__grid(flat, 8), 1, 256, 0, &k, stream);
  int64_t accesses = (v.cols + p->vec - 1) / p->vec, tile = 32 * bq__affine_u(d); /* affine.cu's BQ_TILE */
  k.tiles = accesses > tile ? (accesses + tile - 1) / tile : 1;
  /* the table's items: an item takes several tiles of a row, which pays the row's scale (its
     reciprocal) once, while the grid keeps the table's `warps` items an SM */
  k.tpw = 1;
  int64_t warps = bq__wave_warps(&lim, row->waves);
  if (row->items == 2 || (row->items == 1 && v.rows > 1)) {
    int64_t per = v.rows * k.tiles / (lim.sms * warps);
    if (per > 1) k.tpw = per < k.tiles ? per : k.tiles;
  }
  k.chunks = (k.tiles + k.tpw - 1) / k.tpw;
  k.tpw = (k.tiles + k.chunks - 1) / k.chunks; /* the same count of tiles in every item */
  /* 32-bit index arithmetic when every index fits */
  const int64_t i31 = (int64_t)1 << 31;
  k.fast32 = v.cols <= i31 && k.group <= i31 && k.gmod <= i31 && v.rows * k.tiles <= i31;
  if (k.fast32) {
    k.fd_group = bq__make_fastdiv((uint32_t)k.group);
    k.fd_gmod = bq__make_fastdiv((uint32_t)k.gmod);
    k.fd_chunks = bq__make_fastdiv((uint32_t)k.chunks);
  }
  /* bq_affine_odd where the table says so and an access can straddle two parameter blocks
     (bq__affine_straddles) */
  int which = row->odd && bq__affine_straddles(p, &k, &v, k.group) ? BQ__AFFINE_ODD : BQ__AFFINE_ROW;
  if (f == BQ__AFFINE_ROW || (f == BQ__AFFINE_ODD && p->kernels[BQ__AFFINE_ODD])) which = f;
  return bq__launch(p, which, bq__grid(v.rows * k.chunks, 8), 1, 256, 0, &k, stream); /* a warp per item */
}

/* The entry points with code for d: the rest of affine.cu's are empty there (the table's
   ga, fr and na say where bq_affine_blocks, bq_affine_flat and bq_affine_narrow have a
   body; bq_affine_lean and bq_affine_pair exist for the forward ops named). */
BQ__FN int bq__affine_has(const bq_desc *d, const bq__target *t, int e) {
  (void)t;
  const int fwd = d->direction == BQ_FORWARD, g = d->granularity;
  const int half = d->float_type == BQ_F16 || d->float_type == BQ_BF16;
  if (d->rounding == BQ_ROUND_STOCHASTIC || d->rotation) return e == BQ__AFFINE_SR; /* (alone in its SKUs) */
  switch (e) {
  case BQ__AFFINE_BLOCKS: return bq__affine_ga(d) > 0;
  case BQ__AFFINE_FLAT: return bq__affine_fr(d) > 0;
  case BQ__AFFINE_NARROW: return bq__affine_na(d) > 0;
  case BQ__AFFINE_MASK: return d->op == BQ_FAKE_QUANTIZE;
  case BQ__AFFINE_LEAN: return fwd && d->op != BQ_FAKE_QUANTIZE;
  case BQ__AFFINE_PAIR:
    return fwd && d->op == BQ_QUANTIZE && half && (g == BQ_PER_TOKEN || g == BQ_PER_GROUP || g == BQ_PER_BLOCK);
  case BQ__AFFINE_SR: return 0;
  default: return 1;
  }
}

/* Quantize, dequantize and fake quantize: static scales (and zero points), any granularity,
   either direction, integer or FP8 storage */
BQ__FN bq_status bq__affine_normalize(const bq_desc *in, bq_desc *d, char *name, size_t name_size) {
  bq_status st;
  if ((st = bq__rule_no_activation(d)) || (st = bq__rule_no_pow2(d)) || (st = bq__rule_enums(d, 1))) return st;
  if (d->granularity == BQ_GRANULARITY_DEFAULT) d->granularity = BQ_PER_TENSOR;
  bq__plan_name_std(d, 0, name, name_size);
  if ((st = bq__rule_types(d, name, 1)) || (st = bq__rule_no_out_type(d, name)) || (st = bq__scale_rules(d, in, name, 0)))
    return st;
  if (d->asymmetric)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT,
                    "%s: desc.asymmetric (%d) applies to dynamic quantize only", name, d->asymmetric);
  if (d->rounding != BQ_ROUND_NEAREST_EVEN && d->rounding != BQ_ROUND_STOCHASTIC)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (%d) is not a bq_rounding", name, (int)d->rounding);
  if (d->rounding == BQ_ROUND_STOCHASTIC && (d->op == BQ_DEQUANTIZE || d->direction == BQ_BACKWARD))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rounding (stochastic) applies where floats are rounded into "
                    "the storage type: quantize and fake quantize, forward", name);
  if (d->rotation != 0 && d->rotation != 1)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (%d) must be 0 or 1", name, d->rotation);
  if (d->rotation && d->op != BQ_FAKE_QUANTIZE && d->direction == BQ_BACKWARD)
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.rotation (1) applies to quantize and dequantize forward, "
                    "and to fake quantize either way", name);
  if (d->random_signs != 0 && (d->random_signs != 1 || !d->rotation))
    return bq__fail(BQ_ERROR_INVALID_ARGUMENT, "%s: desc.random_signs (%d) must be 0, or 1 with desc.rotation", name,
                    d->random_signs);
  /* per tensor: the host scalar is in the compute type */
  if (d->granularity == BQ_PER_TENSOR) d->scale_type = d->float_type == BQ_F64 ? BQ_F64 : BQ_F32;
  return BQ_SUCCESS;
}
/* the variant: elements per access, and accesses a lane (the table's u) */
BQ__FN void bq__affine_sku(const bq_desc *d, const bq__target *t, const char *tn, char *buf, size_t n) {
  (void)t;
  char variant[32] = "sr"; /* stochastic rounding: bq_affine_sr alone; with the rotation too ("rows" rounding
                             to nearest), then ".rot" */
  if (d->rounding != BQ_ROUND_STOCHASTIC && d->rotation) bq__copy(variant, sizeof variant, "rows");
  else if (d->rounding != BQ_ROUND_STOCHASTIC)
    snprintf(variant, sizeof variant, "vec%dx%d", bq__affine_vec(d), bq__affine_u(d));
  if (d->rotation) bq__copy(variant + strlen(variant), sizeof variant - strlen(variant), ".rot");
  bq__sku_std(d, variant, tn, buf, n);
}
/* args.mask: fake quantize's per tensor and per channel (rounding to nearest, unrotated: a
   mask of x); args.seed and args.offset: stochastic rounding's */
BQ__FN unsigned bq__affine_owns(const bq_desc *d) {
  return (d->op == BQ_FAKE_QUANTIZE && (d->granularity == BQ_PER_TENSOR || d->granularity == BQ_PER_CHANNEL) &&
                  d->rounding != BQ_ROUND_STOCHASTIC && !d->rotation
              ? BQ__OWNS_MASK
              : 0) |
         (d->rounding == BQ_ROUND_STOCHASTIC ? BQ__OWNS_SEED | BQ__OWNS_OFFSET : 0) |
         (d->rotation ? BQ__OWNS_ROTATION : 0) | (d->random_signs ? BQ__OWNS_SEED : 0);
}
/* the enumeration's variants: quantize and fake quantize round to nearest or stochastically;
   quantize and dequantize (forward) and fake quantize with the fused rotation or without
   (normalize refuses the rest) */
BQ__FN void bq__affine_axes(bq_op op, int *outer, int *inner) {
  *outer = 1;
  *inner = op == BQ_DEQUANTIZE ? 2 : 4;
}
BQ__FN void bq__affine_vary(bq_desc *in, int outer, int inner) {
  (void)outer;
  const int rounds = in->op == BQ_DEQUANTIZE ? 1 : 2;
  in->rounding = (bq_rounding)(inner % rounds);
  in->rotation = inner / rounds;
}

/* The affine plan a plan holds to quantize, rounding stochastically, values another kernel
   made or read with the scales it wrote (dynamic quantize's and the fused producers' stochastic
   rounding): quantize forward at granularity g, with d's types, q-range, scale type and layout */
BQ__FN void bq__affine_sr_of(const bq_desc *d, bq_granularity g, bq_desc *q) {
  memset(q, 0, sizeof *q);
  q->op = BQ_QUANTIZE;
  q->direction = BQ_FORWARD;
  q->granularity = g;
  q->float_type = d->float_type;
  q->int_type = d->int_type;
  q->qmin = d->qmin;
  q->qmax = d->qmax;
  q->scale_type = d->scale_type;
  q->scale_layout = d->scale_layout;
  q->rounding = BQ_ROUND_STOCHASTIC;
}
/* the typical problem's rotation blocks: 32 */
BQ__FN void bq__affine_typical(const bq_desc *d, bq_args *a, void *ptr) {
  (void)ptr;
  if (d->rotation) a->rotation_block = 32;
}

static const bq__family bq__affine_family = {
  {BQ_QUANTIZE, BQ_DEQUANTIZE, BQ_FAKE_QUANTIZE}, {"quantize", "dequantize", "fake_quantize"}, "affine",
  bq__affine_normalize, NULL, bq__affine_sku, NULL, bq__affine_axes, bq__affine_vary, bq__affine_owns, NULL,
  "affine.cu", bq__text_affine_cu, bq__affine_prelude, bq__affine_vec, 0, bq__affine_shape, bq__affine_check,
  bq__no_workspace, bq__affine_run, bq__affine_has, NULL,
  {BQ__AFFINE_NAMES(0, 0, 0), BQ__AFFINE_NAMES(1, 0, 0), BQ__AFFINE_NAMES(0, 1, 0), BQ__AFFINE_NAMES(0, 0, 1),
   {BQ_ENTRY_NAME(BQ_FN_AFFINE), NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_ODD), BQ_ENTRY_NAME(BQ_FN_AFFINE_BLOCKS), NULL,
    BQ_ENTRY_NAME(BQ_FN_AFFINE_NARROW), NULL, BQ_ENTRY_NAME(BQ_FN_AFFINE_LEAN), BQ_ENTRY_NAME(BQ_FN_AFFINE_PAIR),
    BQ_ENTRY_NAME(BQ_FN_AFFINE_SR)}},
  NULL, NULL, bq__affine_typical, 0};
