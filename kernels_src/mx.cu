// mx.cu - the microscaling formats: groups of G elements along a row, each group with a
// one-byte scale: UE8M0 (MXFP8: E4M3 or E5M2 elements; MXFP4: E2M1 elements), or E4M3
// times an f32 tensor scale g (NVFP4: E2M1 elements). Quantize, dequantize and fake
// quantize (static scales; forward and backward) and dynamic quantize (scales from the
// data). docs/numerics.md, "Microscaling".
// Prelude defines (besides common.cuh's, where BQ_IT may be BQ_TYPE_E2M1 and BQ_ST
// BQ_TYPE_UE8M0 or BQ_TYPE_E4M3): BQ_OP and BQ_DIR (quantize, dequantize and fake quantize
// in either direction, dynamic quantize forward); BQ_MX_LAYOUT 0 row-major, 1 MN-major, 2
// blocked (the 128 x 4 tiles of block-scaled GEMMs); BQ_MX_RULE, dynamic quantize's scale
// rule (bq_scale_rule's values: UE8M0 1-5, NVFP4 6-7).
//
// bq_mx_lanes, where a group is 2^k 16-byte accesses of floats (k <= 5) and every row starts
// on the 16-byte grid: a thread takes one access's elements, the lanes of a group reduce its
// amax by shuffles. Otherwise a thread takes a group, consecutive threads consecutive groups
// of a row, so a warp's loads cover a contiguous span. bq_mx16 and bq_mx32 hold their group
// in registers (16-byte accesses where every group starts aligned, else element by element);
// bq_mx_any takes any G, reading a dynamic group twice (the second read from L1). E2M1 codes
// go two a byte, the lower index in the low nibble. In the blocked layout dynamic quantize
// writes the padding's scale bytes 0 (the group walks take the padded tiles as items;
// bq_mx_lanes, as its walk says).

#include "mx_abi.h"
// (the formats' conversions, scale rules and layouts are common.cuh's, which fused.cu shares)

// ---- the walk --------------------------------------------------------------------------------
// Item's row and group (items walk rows of pgroups groups: the groups a row has, or in dynamic
// quantize's blocked layout its padded tiles' rows and groups too) and its scale's index;
// false in the padding
static __device__ __forceinline__ bool bq_mx_at(const bq_mx_params &p, bq_i64 item, bq_i64 &r, bq_i64 &g, bq_i64 &si) {
  r = item / p.pgroups;
  g = item - r * p.pgroups;
  si = bq_mx_sidx(r, g, p.ngroups, p.grs);
  return r < p.rows && g < p.ngroups;
}

static __device__ __forceinline__ void bq_mx_put_scale(const bq_mx_params &p, bq_i64 si, int code) {
  ((bq_u8 *)p.scales)[si] = (bq_u8)code;
}
static __device__ __forceinline__ float bq_mx_g(const bq_mx_params &p) {
#if BQ_MX_NV
  return *(const float *)p.tensor_scale;
#else
  (void)p;
  return 1.0f;
#endif
}
// Transformer Engine's encode factor: the amax pass's, or 1 / g of a given tensor scale
static __device__ __forceinline__ float bq_mx_enc(const bq_mx_params &p, float g) {
#if BQ_MX_NV && BQ_MX_RULE == 7
  return p.enc ? *(const float *)p.enc : __fdiv_rn(1.0f, g);
#else
  (void)p, (void)g;
  return 1.0f;
#endif
}

#if BQ_SR
// The draws of a run-time group's elements, taken in order: a generator call per set of 8
struct bq_mx_draws {
  bq_u64 i0, b;
  bq_u32 k0, k1, c[4];
  __device__ __forceinline__ bq_mx_draws(const bq_mx_params &p, bq_i64 ei)
      : i0(p.offset + (bq_u64)ei), b(~0ull), k0(p.seed_lo), k1(p.seed_hi) {}
  __device__ __forceinline__ bq_u32 at(bq_i64 j) {
    const bq_u64 i = i0 + (bq_u64)j;
    if (i >> 3 != b) b = i >> 3, bq_sr_block(b, k0, k1, c);
    return bq_sr_pick(c, i);
  }
};
#endif

// The fused rotation (bq_mx_lanes with p.rlog2 > 0): a lane's elements and the lanes of its
// block (n / E of them, aligned in the warp: every row holds whole blocks and the walk's items
// are whole warps), its signs and the factor, fixed for the thread (its elements' place in
// their block, (item E) % n, does not change along the walk)
struct bq_mx_rot {
  int lane, log2n;
  bq_u32 neg, mask;
  bq_c cn;
};
template <int E> static __device__ __forceinline__ bq_mx_rot bq_mx_rot_of(const bq_mx_params &p, bq_i64 t0) {
  bq_mx_rot r;
  const int n = 1 << p.rlog2, L = n > E ? n / E : 1;
  r.lane = (int)(threadIdx.x & 31);
  r.log2n = p.rlog2;
  r.mask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (r.lane & -L);
  r.cn = bq_rot_c(p.rlog2);
  // (one Philox call: E divides 128)
  r.neg = p.rsigns ? bq_rot_signs<E>((int)((t0 * E) % n), n, p.seed_lo, p.seed_hi) : 0u;
  return r;
}
// x's elements rotated (forward) and rounded to T, or dequantize's outputs rotated back
template <int N>
static __device__ __forceinline__ void bq_mx_rotate(bq_chunk<bq_t, N> &v, const bq_mx_rot &r, bool backward) {
  bq_c c[N];
#pragma unroll
  for (int k = 0; k < N; k++) c[k] = bq_to_c(v.e[k]);
  bq_rot_apply<N>(c, r.lane, r.log2n, r.neg, r.cn, backward, r.mask);
#pragma unroll
  for (int k = 0; k < N; k++) v.e[k] = bq_from_c(c[k]);
}

#if !(BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD)
// A group's scale: dynamic quantize's from its amax (capped at the bound), stored at si;
// else the one stored there
// (put: this thread stores it, the first of the lanes a group spans)
static __device__ __forceinline__ int bq_mx_group_code(const bq_mx_params &p, bq_c amax, bq_i64 si, float g, bool put) {
#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE
  if (p.bound > 0 && !(amax <= (bq_c)p.bound)) amax = (bq_c)p.bound;
  const int code = bq_mx_rule(amax, g, bq_mx_enc(p, g));
  if (put) bq_mx_put_scale(p, si, code);
  return code;
#else
  (void)amax, (void)put, (void)g;
  return ((const bq_u8 *)p.scales)[si];
#endif
}
static __device__ __forceinline__ bq_mx_scale bq_mx_group_scale(const bq_mx_params &p, bq_c amax, bq_i64 si, float g,
                                                                bool put) {
  return bq_mx_scale_of(bq_mx_group_code(p, amax, si, g, put), g);
}

#if BQ_OP == BQ_OP_DEQUANTIZE && BQ_IT == BQ_TYPE_E2M1 && BQ_FT != BQ_TYPE_F64
// The f32 values of four E2M1 codes (c: element j in bits 4j to 4j + 3), exact: the
// magnitudes' bf16 bits (0, 0.5, 1, 1.5, 2, 3, 4, 6: 0000 3f00 3f80 3fc0 4000 4040 4080
// 40c0) from a table of their high bytes and one of their low bytes, four lookups a prmt (a
// selector nibble picks one of 8 bytes), paired up by a third, then each code's sign bit
static __device__ __forceinline__ void bq_e2m1_f32x4(bq_u32 c, float (&v)[4]) {
  const bq_u32 m = c & 0x7777u;
  const bq_u32 hi = bq_prmt(0x3f3f3f00u, 0x40404040u, m), lo = bq_prmt(0xc0800000u, 0xc0804000u, m);
#pragma unroll
  for (int j = 0; j < 4; j += 2) { // b: [lo j, hi j, lo j + 1, hi j + 1], bf16 bits of j and j + 1
    const bq_u32 b = bq_prmt(lo, hi, (bq_u32)(j | (j + 4) << 4 | (j + 1) << 8 | (j + 5) << 12));
    v[j] = __uint_as_float(b << 16 | (c << (28 - 4 * j) & 0x80000000u));
    v[j + 1] = __uint_as_float((b & 0xffff0000u) | (c << (24 - 4 * j) & 0x80000000u));
  }
}
#endif

// (E2M1 two elements a step from bf16 and f16, bq_e2m1_pairs and bq_nv_pairs: common.cuh,
// which the fused producers share)

// One group of N elements (N = G, or 0: p.group at run time) at x + x0, y + y0 (elements),
// scale index si, the first element's row-major index ei (stochastic rounding's draws).
// Fixed N: the group in registers, moved in accesses as wide as its alignment allows. Or N
// elements of a group that 2^lsh lanes of a warp take together (bq_mx_lanes): dynamic
// quantize's amax is then the lanes' (max is exact in any order), and the first of them
// stores the scale; with the fused rotation (rot: bq_mx_lanes' walk), x's elements are
// rotated and rounded to T before anything else, and dequantize's outputs rotated back.
template <int N, bool ROT = false>
static __device__ __forceinline__ void bq_mx_one(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, bq_i64 ei,
                                                 float g, int lsh = 0, bool al = false, const bq_mx_rot *rot = 0) {
  (void)ei, (void)rot;
#if BQ_OP == BQ_OP_DEQUANTIZE
  const bq_mx_scale s = bq_mx_scale_of(((const bq_u8 *)p.scales)[si], g);
  const bq_u8 *q = (const bq_u8 *)p.x + BQ_MX_YB(x0); // codes in, floats out
  bq_t *out = (bq_t *)p.y + y0;
  if (N) {
    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;
    bq_load(c, q, al ? 16 : bq_width(q));
    bq_chunk<bq_t, (N > 0 ? N : 1)> o;
#if BQ_IT == BQ_TYPE_E2M1 && BQ_FT != BQ_TYPE_F64
    if (N % 4 == 0) { // (the same values as bq_mx_elem_to_c's, four codes a step)
#pragma unroll
      for (int u = 0; u < N / 4; u++) {
        float v[4];
        bq_e2m1_f32x4((bq_u32)c.e[2 * u] | (bq_u32)c.e[2 * u + 1] << 8, v);
#pragma unroll
        for (int k = 0; k < 4; k++) o.e[4 * u + k] = bq_from_c(bq_mul(v[k], s.sc));
      }
    } else
#endif
#pragma unroll
    for (int j = 0; j < N; j++) {
#if BQ_IT == BQ_TYPE_E2M1
      const int code = (c.e[j >> 1] >> ((j & 1) * 4)) & 15;
#else
      const int code = c.e[j];
#endif
      o.e[j] = bq_from_c(bq_mul(bq_mx_elem_to_c(code), s.sc));
    }
    if (ROT) bq_mx_rotate<(N > 0 ? N : 1)>(o, *rot, true);
    bq_store(out, o, al ? 16 : bq_width(out));
  } else {
    for (bq_i64 j = 0; j < p.group; j++) {
#if BQ_IT == BQ_TYPE_E2M1
      const int code = (q[j >> 1] >> ((j & 1) * 4)) & 15;
#else
      const int code = q[j];
#endif
      out[j] = bq_from_c(bq_mul(bq_mx_elem_to_c(code), s.sc));
    }
  }
#else // quantize, dynamic quantize: x -> codes
  const bq_t *x = (const bq_t *)p.x + x0;
  bq_u8 *y = (bq_u8 *)p.y + BQ_MX_YB(y0);
  if (N) {
    bq_chunk<bq_t, (N > 0 ? N : 1)> v;
    bq_load(v, x, al ? 16 : bq_width(x));
    if (ROT) bq_mx_rotate<(N > 0 ? N : 1)>(v, *rot, false);
    bq_c amax = 0;
    const int lane = (int)(threadIdx.x & 31);
    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE) {
#if BQ_MX_NV_PAIRS
      // max |x| on the packed pairs (bq_hmax2_xabs, from +0: NaN operands dropped), the two
      // halves widened at the end: exact, as the halves' maximum is one of the elements
      bq_u32 m = 0;
#pragma unroll
      for (int j = 0; j < N / 2; j++) m = bq_hmax2_xabs(m, ((const bq_u32 *)v.e)[j]);
      m &= 0x7fff7fffu;
      amax = bq_max(bq_to_c((bq_t)(m & 0xffffu)), bq_to_c((bq_t)(m >> 16)));
#else
#pragma unroll
      for (int j = 0; j < N; j++) amax = bq_max(amax, bq_abs(bq_to_c(v.e[j]))); // (fmax drops NaN)
#endif
      const int n = 1 << lsh;
      const bq_u32 mask = n == 32 ? 0xffffffffu : ((1u << n) - 1u) << (lane & -n);
      for (int off = 1; off < n; off <<= 1) amax = bq_max(amax, __shfl_xor_sync(mask, amax, off));
    }
    const int code = bq_mx_group_code(p, amax, si, g, (lane & ((1 << lsh) - 1)) == 0);
    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;
#if BQ_MX_NV_PAIRS
    { // (the short form's range tested on the scale alone: no reciprocal for these groups)
      const float sc = __fmul_rn(g, bq_e4m3_f32(code));
      if (N % 8 == 0 && sc > 0.0f && bq_scale_is_plain(sc)) {
        bq_nv_pairs<(N > 0 ? N : 8)>(v, sc, c);
        bq_store(y, c, al ? 16 : bq_width(y));
        return;
      }
    }
#endif
    const bq_mx_scale s = bq_mx_scale_of(code, g);
#if BQ_SR
    bq_u32 u[N > 0 ? N : 1];
    bq_sr_draws(p.offset + (bq_u64)ei, p.seed_lo, p.seed_hi, u);
#endif
#if BQ_MX_HALF_PAIRS
    if (N % 8 == 0 && !(s.rcp < BQ_H2_MIN) && !(s.rcp > BQ_H2_MAX)) { // (rcp a normal half, or NaN)
      bq_e2m1_pairs<(N > 0 ? N : 8)>(v, s.rcp, c);
      bq_store(y, c, al ? 16 : bq_width(y));
      return;
    }
#endif
#if BQ_MX_NV_FAST && !BQ_SR
    // (NVFP4: the quotient's form chosen once for the N elements)
    constexpr int NN = N > 0 ? N : 1;
    int qv[NN];
    bq_c cv[NN];
#pragma unroll
    for (int j = 0; j < NN; j++) cv[j] = bq_to_c(v.e[j]);
    bq_mx_quantize_n<NN>(cv, s, qv);
#endif
#pragma unroll
    for (int j = 0; j < N; j++) {
#if BQ_MX_NV_FAST && !BQ_SR
      const int q = qv[j];
#elif BQ_SR
      const int q = bq_mx_quantize_sr(bq_to_c(v.e[j]), s, u[j]);
#else
      const int q = bq_mx_quantize(bq_to_c(v.e[j]), s);
#endif
#if BQ_IT == BQ_TYPE_E2M1
      if (j & 1) c.e[j >> 1] = (bq_u8)(c.e[j >> 1] | (q << 4));
      else c.e[j >> 1] = (bq_u8)q;
#else
      c.e[j] = (bq_u8)q;
#endif
    }
    bq_store(y, c, al ? 16 : bq_width(y));
  } else {
    bq_c amax = 0;
    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE)
      for (bq_i64 j = 0; j < p.group; j++) amax = bq_max(amax, bq_abs(bq_to_c(x[j])));
    const bq_mx_scale s = bq_mx_group_scale(p, amax, si, g, true);
#if BQ_SR
    bq_mx_draws w(p, ei);
#define BQ_MX_Q(j) bq_mx_quantize_sr(bq_to_c(x[j]), s, w.at(j))
#else
#define BQ_MX_Q(j) bq_mx_quantize(bq_to_c(x[j]), s)
#endif
#if BQ_IT == BQ_TYPE_E2M1
    for (bq_i64 j = 0; j < p.group; j += 2) y[j >> 1] = (bq_u8)(BQ_MX_Q(j) | (BQ_MX_Q(j + 1) << 4));
#else
    for (bq_i64 j = 0; j < p.group; j++) y[j] = (bq_u8)BQ_MX_Q(j);
#endif
#undef BQ_MX_Q
  }
#endif
}

#endif

#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD
// Fake quantize forward (y = T(value(q) sc)) and the backward passes, elements of T in and
// out: quantize dx = m ? T(dy / sc) : +0, dequantize dx = T(dy sc), fake quantize
// dx = m ? dy : +0, with m = (|x / sc| <= max) read on the quotient (NaN: 0).
static __device__ __forceinline__ bq_c bq_mx_quotient(bq_c x, const bq_mx_scale &s) {
#if BQ_MX_NV
  return bq_div(x, s.sc);
#else
  return bq_mul(x, s.rcp);
#endif
}
static __device__ __forceinline__ bq_t bq_mx_elem_out(bq_t x, bq_t dy, const bq_mx_scale &s, bq_u32 u) {
  (void)u;
#if BQ_DIR == BQ_DIR_FORWARD // fake quantize
  (void)dy;
#if BQ_SR
  return bq_from_c(bq_mul(bq_mx_elem_to_c(bq_mx_quantize_sr(bq_to_c(x), s, u)), s.sc));
#else
  return bq_from_c(bq_mul(bq_mx_elem_to_c(bq_mx_quantize(bq_to_c(x), s)), s.sc));
#endif
#elif BQ_OP == BQ_OP_DEQUANTIZE
  (void)x;
  return bq_from_c(bq_mul(bq_to_c(dy), s.sc));
#else
  const bool m = bq_abs(bq_mx_quotient(bq_to_c(x), s)) <= (bq_c)BQ_MX_MAX;
#if BQ_OP == BQ_OP_QUANTIZE
  return m ? bq_from_c(bq_mx_quotient(bq_to_c(dy), s)) : bq_from_c((bq_c)0);
#else
  return m ? dy : bq_from_c((bq_c)0);
#endif
#endif
}
// One group: x at x0 (and dx there), y / dy at y0, elements of T, the first element's
// row-major index ei; fixed N in registers
template <int N>
static __device__ __forceinline__ void bq_mx_one_t(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, bq_i64 ei,
                                                   float g, bool al = false) {
  (void)ei;
  const bq_mx_scale s = bq_mx_scale_of(((const bq_u8 *)p.scales)[si], g);
#if BQ_DIR == BQ_DIR_FORWARD
  const bq_t *in = (const bq_t *)p.x + x0, *din = in; // (din unused)
  bq_t *out = (bq_t *)p.y + y0;
#else
  const bq_t *in = (const bq_t *)p.x + x0, *din = (const bq_t *)p.dy + y0;
  bq_t *out = (bq_t *)p.dx + x0;
#endif
  const bool need_x = BQ_DIR == BQ_DIR_FORWARD || BQ_OP != BQ_OP_DEQUANTIZE;
  const bool need_dy = BQ_DIR == BQ_DIR_BACKWARD;
  if (N) {
    bq_chunk<bq_t, (N > 0 ? N : 1)> a, b, o;
    if (need_x) bq_load(a, in, al ? 16 : bq_width(in));
    if (need_dy) bq_load(b, din, al ? 16 : bq_width(din));
    bq_u32 u[N > 0 ? N : 1] = {0};
#if BQ_SR
    bq_sr_draws(p.offset + (bq_u64)ei, p.seed_lo, p.seed_hi, u);
#endif
#pragma unroll
    for (int j = 0; j < N; j++) o.e[j] = bq_mx_elem_out(need_x ? a.e[j] : b.e[j], need_dy ? b.e[j] : a.e[j], s, u[j]);
    bq_store(out, o, al ? 16 : bq_width(out));
  } else {
#if BQ_SR
    bq_mx_draws w(p, ei);
#define BQ_MX_U(j) w.at(j)
#else
#define BQ_MX_U(j) 0u
#endif
    for (bq_i64 j = 0; j < p.group; j++)
      out[j] = bq_mx_elem_out(need_x ? in[j] : din[j], need_dy ? din[j] : in[j], s, BQ_MX_U(j));
#undef BQ_MX_U
  }
}
#endif

template <int N>
static __device__ __forceinline__ void bq_mx_walk(const bq_mx_params &p) {
  const float g = bq_mx_g(p);
  const bq_i64 n = N ? N : p.group;
  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;
  for (bq_i64 item = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; item < p.items; item += step) {
    bq_i64 r, gi, si;
    if (!bq_mx_at(p, item, r, gi, si)) { // the blocked layout's padding (dynamic quantize walks it)
      bq_mx_put_scale(p, si, 0);
      continue;
    }
#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD
    bq_mx_one_t<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, r * p.cols + gi * n, g);
#else
    bq_mx_one<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, r * p.cols + gi * n, g);
#endif
  }
}

// bq_mx_lanes: item i is the i-th piece of BQ_MX_E elements (16 bytes of floats) in row
// order, or with p.lacc the i-th pair of them, so a warp's accesses cover a contiguous span
// of each stream; a group's 2^lshift pieces sit in consecutive lanes of one warp (the grid
// and the block are whole warps and every row holds whole groups). In dynamic quantize's
// blocked layout the thread that puts a row's last scale writes that row's padding groups 0,
// and the grid the padded rows'.
#define BQ_MX_E (16 / (int)sizeof(bq_t))
// Piece i's row (pieces of BQ_MX_E elements, p.ppr a row): bq_mx_lanes' walk and bq_mx_amax's
static __device__ __forceinline__ bq_i64 bq_mx_piece_row(const bq_mx_params &p, bq_i64 i) {
  return p.fast ? (bq_i64)bq_div_u31((bq_u32)i, p.fd) : bq_div64(i, p.ppr);
}
#if BQ_E_MX_LANES
// (quantize forward without the rotation may give a lane two pieces: A = 2)
#define BQ_MX_TWO_PIECES (BQ_OP == BQ_OP_QUANTIZE && BQ_DIR != BQ_DIR_BACKWARD && !BQ_MX_ROT)
template <int A> static __device__ __forceinline__ void bq_mx_lanes_loop(const bq_mx_params &p) {
  const float g = bq_mx_g(p);
  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x, t0 = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x;
#if BQ_MX_ROT && !(BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD)
  const bq_mx_rot rot = bq_mx_rot_of<BQ_MX_E>(p, t0);
#endif
  for (bq_i64 i = t0; i < p.items; i += step) {
    const bq_i64 r = bq_mx_piece_row(p, i * A); // (a lane's pieces lie in one group)
    const bq_i64 c = i * A - r * p.ppr, gi = c >> p.lshift, e0 = c * BQ_MX_E;
    const bq_i64 si = bq_mx_sidx(r, gi, p.ngroups, p.grs);
#if BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD
    bq_mx_one_t<BQ_MX_E>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, true);
#else
#if BQ_MX_ROT
    bq_mx_one<BQ_MX_E, true>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, p.lshift, true, &rot);
#else
    bq_mx_one<A * BQ_MX_E>(p, r * p.xs + e0, r * p.ys + e0, si, r * p.cols + e0, g, p.lshift - (A == 2), true);
#endif
#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE && BQ_MX_LAYOUT == 2
    if (c == p.ppr - (1 << p.lshift)) // the row's last group's first lane
      for (bq_i64 k = p.ngroups; k < p.pgroups; k++) bq_mx_put_scale(p, bq_mx_sidx(r, k, p.ngroups, p.grs), 0);
#endif
#endif
  }
#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE && BQ_MX_LAYOUT == 2
  for (bq_i64 t = t0; t < (p.prows - p.rows) * p.pgroups; t += step) {
    const bq_i64 r = p.rows + t / p.pgroups;
    bq_mx_put_scale(p, bq_mx_sidx(r, t - (r - p.rows) * p.pgroups, p.ngroups, p.grs), 0);
  }
#endif
}
static __device__ __forceinline__ void bq_mx_lanes_walk(const bq_mx_params &p) {
#if BQ_MX_TWO_PIECES
  if (p.lacc) {
    bq_mx_lanes_loop<2>(p);
    return;
  }
#endif
  bq_mx_lanes_loop<1>(p);
}
extern "C" __global__ void __launch_bounds__(256) BQ_FN_MX_LANES(const bq_mx_params p) { bq_mx_lanes_walk(p); }
#endif

#if BQ_E_MX16
extern "C" __global__ void __launch_bounds__(256) BQ_FN_MX16(const bq_mx_params p) { bq_mx_walk<16>(p); }
#endif
#if BQ_E_MX32
extern "C" __global__ void __launch_bounds__(256) BQ_FN_MX32(const bq_mx_params p) { bq_mx_walk<32>(p); }
#endif
#if BQ_E_MX_ANY
extern "C" __global__ void __launch_bounds__(256) BQ_FN_MX_ANY(const bq_mx_params p) { bq_mx_walk<0>(p); }
#endif

#if BQ_E_MX_AMAX
// NVFP4 dynamic quantize's tensor scale, in two launches of a grid-stride max (NaN elements
// skipped: fmaxf drops them): blocks write their partial amax to the workspace, then one
// block reduces the partials and writes g = amax / (448 * 6) to out_tensor_scale (1 where
// amax is 0 or infinite).
extern "C" __global__ void __launch_bounds__(256) BQ_FN_MX_AMAX(const bq_mx_params p) {
  __shared__ float part[8];
  float *ws = (float *)p.amax;
  float a = 0.0f;
  if (p.finish) {
    for (int i = (int)threadIdx.x; i < p.nparts; i += (int)blockDim.x) a = fmaxf(a, ws[i]);
  } else if (p.avec) { // rows of whole 16-byte accesses on the grid: an access a thread
    const bq_i64 step = (bq_i64)gridDim.x * blockDim.x, n = p.rows * p.ppr;
#if BQ_MX_ROT
    // the amax of the rotated values, which bq_mx_lanes then quantizes (the same walk); the
    // loop is warp-uniform, lanes past the end rotating zeros (their blocks' lanes are all
    // past it), so that every lane of a warp takes the same shuffles
    const bq_mx_rot rot = bq_mx_rot_of<BQ_MX_E>(p, (bq_i64)blockIdx.x * blockDim.x + threadIdx.x);
    const bq_i64 lane = threadIdx.x & 31;
    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i - lane < n; i += step) {
      bq_chunk<bq_t, BQ_MX_E> v;
      if (i < n) {
        const bq_i64 r = bq_mx_piece_row(p, i);
        bq_load(v, (const bq_t *)p.x + r * p.xs + (i - r * p.ppr) * BQ_MX_E, 16);
      } else {
#pragma unroll
        for (int k = 0; k < BQ_MX_E; k++) v.e[k] = bq_from_c((bq_c)0);
      }
      bq_mx_rotate<BQ_MX_E>(v, rot, false);
#else
    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
      const bq_i64 r = bq_mx_piece_row(p, i);
      bq_chunk<bq_t, BQ_MX_E> v;
      bq_load(v, (const bq_t *)p.x + r * p.xs + (i - r * p.ppr) * BQ_MX_E, 16);
#endif
#pragma unroll
      for (int k = 0; k < BQ_MX_E; k++) a = fmaxf(a, (float)bq_abs(bq_to_c(v.e[k])));
    }
  } else {
    const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;
    for (bq_i64 i = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.rows * p.cols; i += step) {
      const bq_i64 r = i / p.cols;
      a = fmaxf(a, (float)bq_abs(bq_to_c(((const bq_t *)p.x)[r * p.xs + (i - r * p.cols)])));
    }
  }
  for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) a = fmaxf(a, part[w]);
    if (!p.finish) {
      ws[blockIdx.x] = a;
    } else {
      float enc;
      const float g = bq_mx_tensor_scale(a, enc);
#if BQ_MX_RULE == 7
      ws[p.nparts] = enc; // (Transformer Engine's rule reads it)
#else
      (void)enc;
#endif
      *(float *)p.out_tensor_scale = g;
    }
  }
}
#endif
