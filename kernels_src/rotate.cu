// rotate.cu - the block-diagonal Walsh-Hadamard rotation along each row (docs/numerics.md,
// "Rotation"): blocks of n = 2^log2n elements; forward y = T((H (s x)) c), inverse
// x = T(s ((H y) c)), c = C(1 / sqrt(n)), s a sign vector (+1, or random from Philox4x32-10
// keyed by the seed), H applied as the fixed butterfly h = 1, 2, ..., n / 2.
// Prelude defines (besides common.cuh's): BQ_DIR (forward: rotate; backward: the inverse).
//
// A warp takes a segment of 32 E consecutive elements of a row (E per lane: the entry
// point's), which holds whole blocks (32 E >= n, both powers of two); the butterfly's stages
// with h < E run in a lane's registers, the others between lanes (lane ^ h / E) by shuffles.
// Each stage computes every pair of the contract's stage, so the bits do not depend on E,
// the grid or which lane holds what. The sign vector is the same for every block: a lane's
// E signs are drawn once.

#include "rotate_abi.h"

// One warp item's E elements a lane: r's segment, loaded (zeros past the row's end) ...
template <int E> struct bq_rot_item {
  bq_c c[E];
  bq_i64 r, e0;
};
template <int E>
static __device__ __forceinline__ void bq_rot_load(const bq_rotate_params &p, bq_i64 item, int lane, bq_rot_item<E> &it) {
  it.r = item / p.segs;
  it.e0 = (item - it.r * p.segs) * 32 * E + (bq_i64)lane * E;
  const bq_t *x = (const bq_t *)p.x + it.r * p.xs + it.e0;
  if (it.e0 + E <= p.cols) {
    bq_chunk<bq_t, E> v;
    bq_load(v, x, bq_width(x));
#pragma unroll
    for (int k = 0; k < E; k++) it.c[k] = bq_to_c(v.e[k]);
  } else {
#pragma unroll
    for (int k = 0; k < E; k++) it.c[k] = it.e0 + k < p.cols ? bq_to_c(x[k]) : (bq_c)0;
  }
}
// ... rotated (common.cuh's bq_rot_apply: every lane of the warp takes part) and stored
template <int E>
static __device__ __forceinline__ void bq_rot_finish(const bq_rotate_params &p, int lane, bq_u32 neg, bq_c cn,
                                                     bq_rot_item<E> &it) {
  bq_c *c = it.c;
  bq_rot_apply<E>(it.c, lane, p.log2n, neg, cn, BQ_DIR == BQ_DIR_BACKWARD, 0xffffffffu);
  bq_t *y = (bq_t *)p.y + it.r * p.ys + it.e0;
  if (it.e0 + E <= p.cols) {
    bq_chunk<bq_t, E> o;
#pragma unroll
    for (int k = 0; k < E; k++) o.e[k] = bq_from_c(c[k]);
    bq_store(y, o, bq_width(y));
  } else {
#pragma unroll
    for (int k = 0; k < E; k++)
      if (it.e0 + k < p.cols) y[k] = bq_from_c(c[k]);
  }
}

// A warp takes two items a pass, both loaded before either is rotated: twice the bytes in
// flight (the loop is warp-uniform, so every lane shuffles)
template <int E>
static __device__ __forceinline__ void bq_rotate_walk(const bq_rotate_params &p) {
  const int lane = threadIdx.x & 31, n = 1 << p.log2n;
  // the signs of this lane's elements j = (lane E + k) % n (one Philox word set: E divides 128)
  const bq_u32 neg = p.signs ? bq_rot_signs<E>(lane * E, n, p.seed_lo, p.seed_hi) : 0u;
  const bq_c cn = bq_rot_c(p.log2n);
  const bq_i64 items = p.rows * p.segs;
  const bq_i64 warp = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = ((bq_i64)gridDim.x * blockDim.x) >> 5;
  for (bq_i64 item = warp; item < items; item += 2 * nwarps) {
    bq_rot_item<E> a, b;
    const bool two = item + nwarps < items;
    bq_rot_load<E>(p, item, lane, a);
    if (two) bq_rot_load<E>(p, item + nwarps, lane, b);
    bq_rot_finish<E>(p, lane, neg, cn, a);
    if (two) bq_rot_finish<E>(p, lane, neg, cn, b);
  }
}

#if BQ_E_ROTATE2
extern "C" __global__ void __launch_bounds__(256) BQ_FN_ROTATE2(const bq_rotate_params p) { bq_rotate_walk<2>(p); }
#endif
#if BQ_E_ROTATE4
extern "C" __global__ void __launch_bounds__(256) BQ_FN_ROTATE4(const bq_rotate_params p) { bq_rotate_walk<4>(p); }
#endif
#if BQ_E_ROTATE8
extern "C" __global__ void __launch_bounds__(256) BQ_FN_ROTATE8(const bq_rotate_params p) { bq_rotate_walk<8>(p); }
#endif
