// dynamic.cu - dynamic quantization: scales (and zero points) computed on the device
// from the data, then the data quantized with exactly the stored scale.
// Prelude defines (besides common.cuh's): BQ_ASYM 0 symmetric (max |x|), 1 asymmetric
// (min/max with a zero point); BQ_GRAN BQ_GRAN_TENSOR, BQ_GRAN_TOKEN, BQ_GRAN_GROUP or
// BQ_GRAN_BLOCK;
// BQ_CPT, BQ_BLOCK, BQ_LONG_CPT and BQ_LONG_TEAM, the teams' sizes (below).
//
// Input moves in 16-byte accesses of BQ_P elements (after a scalar prologue that aligns
// it, and in bq_dynamic the output's lines too where it can: bq_segment_prologue),
// consecutive lanes taking consecutive accesses; the int8 output moves the same BQ_P
// elements with the widest access its alignment allows.
// Per token: a team per row. When the row fits (up to BQ_CPT accesses per thread, or
// BQ_LONG_CPT in bq_dynamic_long) it is read once into registers, reduced, then quantized
// from registers: one read of DRAM. Longer rows are read twice. Per group: when a group
// is a power-of-two number of accesses (up to 128) and rows start 16-byte aligned, the
// lanes holding a group reduce it with shuffles: one read. Other group shapes run each
// group as a row of its own. Per block: a thread block a B x B tile (bq_dynamic_tiles).
// Per tensor: bq_dynamic_reduce writes one partial per block to the workspace;
// bq_dynamic_apply reduces the partials in a fixed order (deterministic) and quantizes.
// The reduction, the scale it gives and the quantize of a chunk are common.cuh's ("dynamic
// scales"), shared with fused.cu.

// Accesses per thread kept on chip, BQ_CPT in bq_dynamic, whose teams have up to BQ_BLOCK
// threads (also the per-tensor kernels' block), and BQ_LONG_CPT in bq_dynamic_long (per
// token), whose teams have up to BQ_LONG_TEAM: the prelude's, from the host's dispatch table
// (bq__dynamic_table), which says why.
#define BQ_DU 4 // accesses in flight per thread in the streaming loops
// BQ_WRITE_Y 0 (stochastic rounding's plans): the kernels write the scales (and zero points)
// alone; the affine family's bq_affine_sr quantizes with them after (family_dynamic.h)
#ifndef BQ_WRITE_Y
#define BQ_WRITE_Y 1
#endif
// BQ_DYN_ROT 1 (per token, desc.rotation): each row rotated first (bq_dyn_rot below)
#ifndef BQ_DYN_ROT
#define BQ_DYN_ROT 0
#endif

#include "dynamic_abi.h" // the entry points and parameter block, which the host compiles too

static __device__ __forceinline__ void bq_write_params(const bq_dynamic_params &p, bq_i64 i, bq_qp q) {
  ((bq_s *)p.scales)[i] = q.stored;
#if BQ_ASYM
  ((int *)p.zps)[i] = q.zp;
#endif
}
// Group g's parameters at index i (bq_pat's, in the scales' layout); packed scales also get
// the bytes after a row's last group, to its word's end (the bytes after i), written 0.
static __device__ __forceinline__ void bq_write_group(const bq_dynamic_params &p, bq_i64 i, bq_i64 g, bq_qp q) {
  bq_write_params(p, i, q);
#if BQ_SL == BQ_SL_MN_X4 || BQ_SL == BQ_SL_ROWS_X4
  if (g == p.ngroups - 1)
    for (bq_i64 j = 1; j <= 3 - (g & 3); j++) ((bq_u8 *)p.scales)[i + j] = 0;
#else
  (void)g;
#endif
}

#if BQ_LEAN
// FP8: quantizes and stores the chunks a[i] at accesses c0 + i step of y (those below nch),
// in the form LEAN (bq_quantize_chunk_as), with w the output's access width. (The integer
// types keep their own loops, whose machine code this form would change.)
template <bool LEAN, int N>
static __device__ __forceinline__ void bq_quantize_batch_as(const bq_xchunk (&a)[N], bq_i *y, bq_i64 c0, bq_i64 step,
                                                            bq_i64 nch, const bq_qp &q, int w) {
#pragma unroll
  for (int i = 0; i < N; i++) {
    const bq_i64 c = c0 + (bq_i64)i * step;
    if (c < nch) {
      bq_qchunk o;
      bq_quantize_chunk_as<LEAN>(a[i], o, q);
      bq_store(y + c * BQ_VEC, o, w);
    }
  }
}
// The form picked once for the batch (HOIST), or chunk by chunk: once is faster where the
// registers allow it (f32 per token: 62 against 81 us on [8192, 4096]); bq_dynamic_long,
// held to 64 registers, spills so and stays chunk by chunk.
template <bool HOIST, int N>
static __device__ __forceinline__ void bq_quantize_batch(const bq_xchunk (&a)[N], bq_i *y, bq_i64 c0, bq_i64 step,
                                                         bq_i64 nch, const bq_qp &q, int w) {
  if (!HOIST) {
#pragma unroll
    for (int i = 0; i < N; i++) {
      const bq_i64 c = c0 + (bq_i64)i * step;
      if (c < nch) {
        bq_qchunk o;
        bq_quantize_chunk_any(a[i], o, q);
        bq_store(y + c * BQ_VEC, o, w);
      }
    }
  } else if (bq_is_lean(q)) {
    bq_quantize_batch_as<true>(a, y, c0, step, nch, q, w);
  } else {
    bq_quantize_batch_as<false>(a, y, c0, step, nch, q, w);
  }
}
#endif

#if BQ_DYN_ROT
// The fused rotation (docs/numerics.md, "Rotation"), per token: rows 16-byte aligned and whole
// accesses (the host's check), blocks of n = 2^p.rlog2 elements, at most a warp's accesses.
// Access c of a row is held by the lane c % tpr of its team (tpr a multiple of 32), so a
// block's n / BQ_VEC accesses sit in consecutive lanes of one warp (bq_rot_apply's shuffles
// among them), and a lane's place in its blocks, hence its signs, is the same for every access
// it holds: computed once a thread.
struct bq_dyn_rot {
  int lane, log2n;
  bq_u32 neg, mask;
  bq_c cn;
};
static __device__ __forceinline__ bq_dyn_rot bq_dyn_rot_of(const bq_dynamic_params &p, int lane) {
  bq_dyn_rot r;
  const int n = 1 << p.rlog2, L = n > BQ_VEC ? n / BQ_VEC : 1;
  r.lane = (int)(threadIdx.x & 31);
  r.log2n = p.rlog2;
  r.mask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (r.lane & -L);
  r.cn = bq_rot_c(p.rlog2);
  r.neg = p.rsigns ? bq_rot_signs<BQ_VEC>((lane * BQ_VEC) & (n - 1), n, p.seed_lo, p.seed_hi) : 0u;
  return r;
}
// a batch's accesses c0 + i tpr below nch rotated and rounded to T (a block's lanes are all
// below nch or all past it: n divides the row)
template <int CPT>
static __device__ __forceinline__ void bq_rotate_batch(bq_xchunk (&a)[CPT], bq_i64 c0, bq_i64 nch, int tpr,
                                                       const bq_dyn_rot &r) {
#pragma unroll
  for (int i = 0; i < CPT; i++)
    if (c0 + (bq_i64)i * tpr < nch) {
      bq_c c[BQ_VEC];
#pragma unroll
      for (int k = 0; k < BQ_VEC; k++) c[k] = bq_to_c(a[i].e[k]);
      bq_rot_apply<BQ_VEC>(c, r.lane, r.log2n, r.neg, r.cn, false, r.mask);
#pragma unroll
      for (int k = 0; k < BQ_VEC; k++) a[i].e[k] = bq_from_c(c[k]);
    }
}
#define BQ_ROTATE_BATCH(CPT, a, c0, nch, tpr, rot) bq_rotate_batch<CPT>(a, c0, nch, tpr, *(rot))
#else
struct bq_dyn_rot;
#define BQ_ROTATE_BATCH(CPT, a, c0, nch, tpr, rot) (void)0
#endif

// One segment (a row, or a group run as a row) of n elements: reduce, store the scale,
// quantize. The team holds batches of up to BQ_CPT accesses per lane in registers; a
// segment of one batch is read once, a longer one is read again for the quantize pass.
template <int CPT>
static __device__ __forceinline__ void bq_load_batch(bq_xchunk (&a)[CPT], const bq_t *x, bq_i64 c0, bq_i64 nch,
                                                     int tpr) {
#pragma unroll
  for (int i = 0; i < CPT; i++) {
    const bq_i64 c = c0 + (bq_i64)i * tpr;
    if (c < nch) bq_load(a[i], x + c * BQ_VEC, 16);
  }
}

// Elements before a segment's vector loop, one a lane at most: x must reach a 16-byte
// boundary. Where y starts off a sector and the count that brings y to a line (or to the
// team's width if smaller) keeps x 16-byte aligned, take that count instead (odd-length
// rows from aligned bases, say), so that the warps' stores write whole lines rather than
// partial ones. Sector-aligned rows keep x's count (strided rows would otherwise take a
// line's worth of elements one by one), and where the host sees that every segment's y is
// sector-aligned (p.align_y == 0) the test is skipped, which saves its cost. bq_dynamic
// only: in bq_dynamic_long the test costs registers that its large teams cannot spare.
static __device__ __forceinline__ int bq_segment_prologue(const bq_t *x, const bq_i *y, bq_i64 n, int tpr) {
  const bq_u32 ya = (bq_u32)(bq_u64)y, xa = (bq_u32)(bq_u64)x, a = tpr < 128 ? (bq_u32)tpr : 128u;
  const bq_u32 py = (0u - ya) & (a - 1); // y has one byte an element
  const bq_u32 px = ((0u - xa) & 15u) / (bq_u32)sizeof(bq_t); // bq_prologue's count, in 32 bits (its
                                                               // 64-bit form changed the whole kernel's code)
  const int k = (int)((ya & 31u) != 0 && ((xa + py * (bq_u32)sizeof(bq_t)) & 15u) == 0 ? py : px);
  return (bq_i64)k < n ? k : (int)n;
}

template <int CPT>
static __device__ __forceinline__ void bq_segment(const bq_dynamic_params &p, const bq_t *x, bq_i *y,
                                                  bq_i64 n, bq_i64 pidx, bq_i64 g, int lane, int tpr, bq_red *red_smem,
                                                  const bq_dyn_rot *rot = 0) {
  (void)rot;
  // (the rotation's rows start on the 16-byte grid: no prologue, whatever y's alignment)
  const int pro = BQ_DYN_ROT ? 0 : CPT == BQ_CPT && p.align_y ? bq_segment_prologue(x, y, n, tpr) : (int)bq_prologue(x, n);
  const int w_out = bq_width(y + pro);
  const bq_i64 nch = (n - pro) / BQ_VEC, tail0 = pro + nch * BQ_VEC;
  const bq_i64 batch = (bq_i64)tpr * CPT;
  const bq_t *xb = x + pro;
  bq_i *yb = y + pro;
  bq_red r = bq_red_init();
  // prologue and tail elements, at most one of each a lane, loaded with the first batch
  // (not after the reduction: that would cost the row a second round trip to memory)
  const bq_i64 kp = lane, kt = tail0 + lane;
  const bool has_p = kp < pro, has_t = kt < n;
  const bq_t xp = has_p ? x[kp] : (bq_t)0, xt = has_t ? x[kt] : (bq_t)0;
  bq_xchunk a[CPT];
  // integer codes in bq_dynamic reduce on packed pairs (bq_reduce_chunks): up to 10% faster
  // there; FP8 codes and bq_dynamic_long's long rows ran slower so and keep the element form
  const bool pairs = BQ_HMAX2 && !BQ_FP8 && CPT == BQ_CPT;
#if BQ_HMAX2
  bq_u32 m2 = 0;
#endif
  for (bq_i64 b = 0; b < nch; b += batch) {
    bq_load_batch<CPT>(a, xb, b + lane, nch, tpr);
    BQ_ROTATE_BATCH(CPT, a, b + lane, nch, tpr, rot);
#pragma unroll
    for (int i = 0; i < CPT; i++)
      if (b + lane + (bq_i64)i * tpr < nch) {
#if BQ_HMAX2
        if (pairs) m2 = bq_hmax2_chunk(m2, a[i]);
        else
#endif
          bq_reduce_chunk(a[i], r);
      }
  }
#if BQ_HMAX2
  if (pairs) bq_hmax2_fold(r, m2);
#endif
  const bq_c ep = bq_to_c(xp), et = bq_to_c(xt);
  if (has_p) bq_red_add(r, ep);
  if (has_t) bq_red_add(r, et);
  r = bq_red_team(r, tpr, red_smem);
  const bq_qp q = bq_params_of(r, (bq_c)p.bound);
#if BQ_GRAN == BQ_GRAN_GROUP
  if (lane == 0) bq_write_group(p, pidx, g, q);
#else
  if (lane == 0) bq_write_params(p, pidx, q);
#endif
  if (!BQ_WRITE_Y) return;
  if (has_p) y[kp] = (bq_i)bq_quantize_int(ep, q.s, q.z);
  if (has_t) y[kt] = (bq_i)bq_quantize_int(et, q.s, q.z);
  for (bq_i64 b = 0; b < nch; b += batch) {
    if (nch > batch) { // the one-batch segment is still in a
      bq_load_batch<CPT>(a, xb, b + lane, nch, tpr);
      BQ_ROTATE_BATCH(CPT, a, b + lane, nch, tpr, rot);
    }
#if BQ_LEAN
    bq_quantize_batch<CPT == BQ_CPT>(a, yb, b + lane, tpr, nch, q, w_out);
#else
#pragma unroll
    for (int i = 0; i < CPT; i++) {
      const bq_i64 c = b + lane + (bq_i64)i * tpr;
      if (c < nch) {
        bq_qchunk o;
        bq_quantize_chunk(a[i], o, q);
        bq_store(yb + c * BQ_VEC, o, w_out);
      }
    }
#endif
  }
}

#if BQ_GRAN == BQ_GRAN_GROUP
// Per group, fast shape: the group is gc = G / BQ_VEC accesses (a power of two up to
// 32 BQ_DU) and the row starts 16-byte aligned, so accesses never straddle groups. A
// group is held by gl = gc / ga consecutive lanes, ga = min(gc, BQ_DU) accesses each, but
// 2 where gc is BQ_DU (access u of lane j is the group's u gl + j: a load instruction reads
// gl contiguous accesses of each group; a lane alone with four accesses 64 bytes apart made
// every load instruction half-sectors, 26% slower on bf16 groups of 32). The lanes reduce
// with log2(gl) shuffles, and one set of scale instructions serves 32 / gl groups a warp.
// Where ga is BQ_DU / 2 (gc of BQ_DU or BQ_DU / 2), bq_dynamic_sets takes two groups a lane.
static __device__ __forceinline__ void bq_groups_fast(const bq_dynamic_params &p, const bq_t *x, bq_i *y,
                                                      bq_i64 r, int lane, int tpr) {
  // gc, ga and gl are powers of two: integer codes (bq_dynamic_groups) index by shifts,
  // which ran up to 4% faster there; FP8 codes (in bq_dynamic) divide, as the shifts ran
  // slower there
  const bool sh = !BQ_FP8;
  const int gc = (int)(p.group / BQ_VEC), ga = gc < BQ_DU ? gc : gc == BQ_DU ? BQ_DU / 2 : BQ_DU;
  const int lgc = __ffs(gc) - 1, lgl = lgc - (__ffs(ga) - 1), gl = sh ? 1 << lgl : gc / ga;
  const int w_out = bq_width(y);
  const int sub = lane & (gl - 1);
  const bq_i64 per = sh ? tpr >> lgl : tpr / gl; // groups a team takes at once
  for (bq_i64 g0 = 0; g0 < p.ngroups; g0 += per) { // uniform trip count: shuffles need all lanes
    const bq_i64 g = g0 + (sh ? lane >> lgl : lane / gl);
    const bool ok = g < p.ngroups;
    const bq_i64 c0 = (sh ? g << lgc : g * gc) + sub;
    bq_xchunk a[BQ_DU];
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (ok && u < ga) bq_load(a[u], x + (c0 + (bq_i64)u * gl) * BQ_VEC, 16);
    bq_red red = bq_red_init();
    bq_reduce_chunks(a, ok, ga, red);
    red = bq_red_lanes(red, gl);
    if (ok) {
      const bq_qp q = bq_params_of(red, (bq_c)p.bound);
      if (sub == 0) bq_write_group(p, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, q);
      if (!BQ_WRITE_Y) continue;
#if BQ_LEAN
      bq_quantize_batch<true>(a, y, c0, gl, c0 + (bq_i64)ga * gl, q, w_out); // access u < ga: u gl + sub < gc
#else
#pragma unroll
      for (int u = 0; u < BQ_DU; u++) {
        if (u < ga) {
          bq_qchunk o;
          bq_quantize_chunk(a[u], o, q);
          bq_store(y + (c0 + (bq_i64)u * gl) * BQ_VEC, o, w_out);
        }
      }
#endif
    }
  }
}
// Per group, fast shape, ga = BQ_DU / NS accesses a lane: a lane holds NS groups at once,
// `per` groups apart (a team's groups at a time, as in bq_groups_fast), so that it keeps
// BQ_DU accesses in flight, as the larger groups do. (With one group of two accesses a lane,
// bf16 groups of 32 ran a quarter slower than groups of 128.) The groups' reductions are
// the same maxima in another order: the same bits.
template <int NS> static __device__ __forceinline__ void bq_groups_sets(const bq_dynamic_params &p, const bq_t *x,
                                                                       bq_i *y, int lane, int tpr, bq_i64 r) {
  constexpr int GA = BQ_DU / NS;
  const bool sh = !BQ_FP8;
  const int gc = (int)(p.group / BQ_VEC), lgc = __ffs(gc) - 1, lgl = lgc - (__ffs(GA) - 1);
  const int gl = sh ? 1 << lgl : gc / GA, sub = lane & (gl - 1), w_out = bq_width(y);
  const bq_i64 per = sh ? tpr >> lgl : tpr / gl;
  for (bq_i64 g0 = 0; g0 < p.ngroups; g0 += NS * per) { // uniform trip count: shuffles need all lanes
    const bq_i64 gb = g0 + (sh ? lane >> lgl : lane / gl);
    bq_xchunk a[NS][GA];
#pragma unroll
    for (int s = 0; s < NS; s++) {
      const bq_i64 g = gb + s * per, c0 = (sh ? g << lgc : g * gc) + sub;
#pragma unroll
      for (int u = 0; u < GA; u++)
        if (g < p.ngroups) bq_load(a[s][u], x + (c0 + (bq_i64)u * gl) * BQ_VEC, 16);
    }
    bq_red red[NS];
#pragma unroll
    for (int s = 0; s < NS; s++) {
      red[s] = bq_red_init();
      bq_reduce_chunks(a[s], gb + s * per < p.ngroups, GA, red[s]);
    }
    bq_red_lanes_n<NS>(red, gl);
#pragma unroll
    for (int s = 0; s < NS; s++) {
      const bq_i64 g = gb + s * per, c0 = (sh ? g << lgc : g * gc) + sub;
      if (g >= p.ngroups) continue;
      const bq_qp q = bq_params_of(red[s], (bq_c)p.bound);
      if (sub == 0) bq_write_group(p, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, q);
      if (!BQ_WRITE_Y) continue;
#if BQ_LEAN
      bq_quantize_batch<true>(a[s], y, c0, gl, c0 + (bq_i64)GA * gl, q, w_out);
#else
#pragma unroll
      for (int u = 0; u < GA; u++) {
        bq_qchunk o;
        bq_quantize_chunk(a[s][u], o, q);
        bq_store(y + (c0 + (bq_i64)u * gl) * BQ_VEC, o, w_out);
      }
#endif
    }
  }
}
// every fast-groups row of a team's share of the grid (bq_dynamic for FP8 codes,
// bq_dynamic_groups for integer codes)
static __device__ __forceinline__ void bq_groups_rows(const bq_dynamic_params &p, int lane, int tpr, int teams,
                                                      int team) {
  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)
    bq_groups_fast(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, r, lane, tpr);
}
#endif

#if BQ_GRAN == BQ_GRAN_BLOCK
// Per block: a thread block of BQ_TILE_THREADS a B x B tile (p.group; fewer rows or columns
// at the matrix's edges; the host bounds B so that a tile's indices fit 32 bits), striding
// over the tiles. Where every row starts 16-byte aligned and B is a whole number of accesses
// (p.fast_groups), a tile of whole accesses is spread over the threads on a grid
// (bq_tgrid), BQ_TILE_CPT accesses at a time each in registers: a tile that fits is read
// from DRAM once, a larger one again (from L2) for the quantize pass. Tiles whose rows are
// off the grid, and right edge tiles that are not whole accesses, are spread as the 16-byte
// lines that hold their rows (bq_tile_window).
#define BQ_TILE_THREADS (2048 / BQ_VEC) // 256 threads for 16-bit types: a 128 x 128 tile in one batch
#define BQ_TILE_CPT 8
#define BQ_TILE_EDGE_CPT 2 // the aligned kernels' right edge tiles that are not whole accesses (bq_tile_window)
// Division by a tile's row length w (accesses or slots, uniform across the block) for
// indices below n: a multiply by ceil(2^32 / w), exact while n w < 2^32, else a division.
// (A division an access was a tenth of the tile kernels' instructions.)
struct bq_tdiv {
  bq_u32 w, m; // m = 0: divide
};
static __device__ __forceinline__ bq_tdiv bq_tdiv_of(bq_u32 w, bq_u32 n) {
  bq_tdiv d;
  d.w = w > 0 ? w : 1;
  d.m = d.w > 1 && (bq_u64)n * d.w < ((bq_u64)1 << 32) ? 0xFFFFFFFFu / d.w + 1 : 0;
  return d;
}
static __device__ __forceinline__ bq_u32 bq_tdiv_q(bq_u32 i, const bq_tdiv &d) { return d.m ? __umulhi(i, d.m) : i / d.w; }
// The grid of an aligned tile whose rows are apr whole accesses (apr <= BQ_TILE_THREADS):
// thread t takes access t % apr of rows t / apr + k R, R = BQ_TILE_THREADS / apr rows a
// step (threads from R apr on take none), so that a thread divides once a tile shape and
// steps a pointer an access. (Dividing each access's index cost a fifth of the instructions.)
struct bq_tgrid {
  bq_u32 apr, R, row, col; // apr 0: not yet set
};
static __device__ __forceinline__ void bq_tgrid_at(bq_tgrid &g, bq_u32 apr) {
  if (apr != g.apr) { // uniform; a run of tiles of one shape keeps the grid
    g.apr = apr;
    g.R = BQ_TILE_THREADS / apr;
    g.row = threadIdx.x / apr;
    g.col = threadIdx.x - g.row * apr;
  }
}
// the rows below which this thread holds accesses of a tile of nr rows
static __device__ __forceinline__ bq_u32 bq_tgrid_lim(const bq_tgrid &g, bq_u32 nr) { return g.row < g.R ? nr : 0; }
// how many of the CPT steps from row b (a multiple of R) this thread holds: steps k < the
// count, one register where the rows' bounds would take three
template <int CPT> static __device__ __forceinline__ int bq_tgrid_steps(const bq_tgrid &g, bq_u32 b, bq_u32 lim) {
  int n = 0;
#pragma unroll
  for (int k = 0; k < CPT; k++) n += g.row + b + k * g.R < lim;
  return n;
}
// Quantizes and stores the chunks a[k], k < nk, y the access of k = 0 and ystep elements
// between k and k + 1. The form is picked chunk by chunk (once for the batch it was slower,
// 85.6 against 79.1 us on bf16 [8192, 8192]).
template <int CPT>
static __device__ __forceinline__ void bq_tile_put(const bq_xchunk (&a)[CPT], bq_i *y, bq_i64 ystep, int nk,
                                                   const bq_qp &q) {
  if (!BQ_WRITE_Y) return;
  const int w0 = bq_width(y);
  const bool same = (((bq_u32)ystep * (bq_u32)sizeof(bq_i)) & 15u) == 0; // every access aligned as the first
#pragma unroll
  for (int k = 0; k < CPT; k++) {
    if (k < nk) {
      bq_qchunk o;
      bq_quantize_chunk_any(a[k], o, q);
      bq_i *yp = y + k * ystep;
      bq_store(yp, o, same ? w0 : bq_width(yp));
    }
  }
}
// A tile read as windows (bq_dynamic_tiles_rows, and the right edge tiles of the others
// that are not whole accesses): row rr's nc elements lie in the 16-byte lines from the one
// holding its first element, w lines a row at most (every row gets w slots; slots past its
// row's end hold nothing). The tile's slots are spread over the threads as bq_dynamic_tiles
// spreads accesses, CPT at a time each: a tile that fits is read from DRAM once, with one
// 16-byte load a line. A line's elements outside the row are read as 0, which moves no
// reduction (both forms include 0), and are not stored. A line that reaches outside x's
// span (before its first element or past its last) is read element by element.
// The threads take every row's inner slots first (lines 1 to w - 2, whole but for the last
// of a row that ends short of it) and the two edge lines of each row after them, so that a
// warp meets the masked forms in one or two batches of its CPT, not in all of them.
struct bq_wgeo {
  bq_u32 w, ni, nin, n; // slots a row, inner slots a row, inner slots, all slots
  bq_tdiv d;            // division by ni
};
static __device__ __forceinline__ bq_wgeo bq_wgeo_of(bq_u32 nr, bq_u32 nc, bool aligned) {
  bq_wgeo g;
  g.w = (nc + (aligned ? BQ_VEC - 1 : 2 * BQ_VEC - 2)) / BQ_VEC;
  g.ni = g.w > 2 ? g.w - 2 : 0;
  g.nin = nr * g.ni;
  g.n = nr * g.w;
  g.d = bq_tdiv_of(g.ni, g.nin); // (ni 0: no slot below nin)
  return g;
}
struct bq_win {
  bq_u32 rr;       // the row
  int s;           // the slot's first element, from the row's first (negative: the line starts before the row)
  bool any, whole; // the slot holds an element of the row; it holds elements of the row only
};
static __device__ __forceinline__ bq_win bq_win_of(const bq_t *x, bq_i64 xs, bq_u32 i, const bq_wgeo &g, bq_u32 nc) {
  bq_win v;
  bq_u32 k;
  if (i < g.nin) {
    v.rr = bq_tdiv_q(i, g.d);
    k = 1 + (i - v.rr * g.ni);
  } else { // edge slots: (line 0, line w - 1) of each row, or line 0 alone where w is 1
    const bq_u32 j = i - g.nin;
    v.rr = g.w > 1 ? j >> 1 : j;
    k = g.w > 1 && (j & 1) ? g.w - 1 : 0;
  }
  v.s = (int)(k * BQ_VEC) - (int)(((bq_u32)(bq_u64)(x + v.rr * xs) & 15u) / sizeof(bq_t));
  v.any = v.s < (int)nc;
  v.whole = v.s >= 0 && v.s + BQ_VEC <= (int)nc;
  return v;
}
static __device__ __forceinline__ void bq_win_load(bq_xchunk &a, const bq_win &v, const bq_t *xr, bq_u32 nc,
                                                   const bq_t *lo, const bq_t *hi) {
  const bq_t *l = xr + v.s;
  if (v.whole) {
    bq_load(a, l, 16);
  } else if (l >= lo && l + BQ_VEC <= hi) {
    bq_load(a, l, 16);
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++)
      if ((bq_u32)(v.s + j) >= nc) a.e[j] = bq_t(0);
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) a.e[j] = (bq_u32)(v.s + j) < nc ? xr[v.s + j] : bq_t(0);
  }
}
static __device__ __forceinline__ void bq_win_store(const bq_qchunk &o, const bq_win &v, bq_i *yr, bq_u32 nc) {
  if (v.whole) {
    bq_i *yp = yr + v.s;
    bq_store(yp, o, bq_width(yp));
  } else if (BQ_VEC == 8) { // the row's run of the line, [j, e), in the widest pieces its
    // alignment allows: lanes here hold different rows, so each store is a memory request
    // of its own (narrower lines keep the byte stores, which ran faster for them)
    bq_u64 bits = 0;
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++) bits |= (bq_u64)(bq_u8)o.e[j] << (8 * j);
    bq_u8 *d = (bq_u8 *)(yr + v.s);
    const int e = (int)nc - v.s < BQ_VEC ? (int)nc - v.s : BQ_VEC;
    for (int j = v.s < 0 ? -v.s : 0; j < e;) {
      const bq_u32 a = (bq_u32)(bq_u64)(d + j);
      const int n = e - j;
      const bq_u64 b = bits >> (8 * j);
      if ((a & 7u) == 0 && n >= 8) {
        BQ_EMU_ALIGNED(d + j, 8);
        *(bq_u64 *)(d + j) = b;
        j += 8;
      } else if ((a & 3u) == 0 && n >= 4) {
        BQ_EMU_ALIGNED(d + j, 4);
        *(bq_u32 *)(d + j) = (bq_u32)b;
        j += 4;
      } else if ((a & 1u) == 0 && n >= 2) {
        BQ_EMU_ALIGNED(d + j, 2);
        *(bq_u16 *)(d + j) = (bq_u16)b;
        j += 2;
      } else {
        d[j] = (bq_u8)b;
        j += 1;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < BQ_VEC; j++)
      if ((bq_u32)(v.s + j) < nc) yr[v.s + j] = o.e[j];
  }
}
// One tile (its first element x, y; nr x nc; aligned: its rows start on a line): reduce,
// store its scale at pidx, quantize.
template <int CPT>
static __device__ __forceinline__ void bq_tile_window(const bq_dynamic_params &p, bq_i64 pidx, const bq_t *x, bq_i *y,
                                                      bq_u32 nr, bq_u32 nc, bool aligned, bq_red *red_smem) {
  const bq_u32 tid = threadIdx.x, batch = BQ_TILE_THREADS * CPT;
  const bq_wgeo g = bq_wgeo_of(nr, nc, aligned);
  const bq_t *lo = (const bq_t *)p.x, *hi = lo + (p.rows - 1) * p.xs + p.cols;
  bq_xchunk a[CPT];
  bq_red red = bq_red_init();
  for (bq_u32 b0 = 0; b0 < g.n; b0 += batch) {
#pragma unroll
    for (int k = 0; k < CPT; k++) {
      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;
      const bq_win v = bq_win_of(x, p.xs, i, g, nc);
      if (i < g.n && v.any) bq_win_load(a[k], v, x + v.rr * p.xs, nc, lo, hi);
    }
#pragma unroll
    for (int k = 0; k < CPT; k++) {
      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;
      if (i < g.n && bq_win_of(x, p.xs, i, g, nc).any) bq_reduce_chunk(a[k], red);
    }
  }
  red = bq_red_team(red, BQ_TILE_THREADS, red_smem);
  const bq_qp q = bq_params_of(red, (bq_c)p.bound);
  if (tid == 0) bq_write_params(p, pidx, q);
  if (!BQ_WRITE_Y) return;
  for (bq_u32 b0 = 0; b0 < g.n; b0 += batch) {
#pragma unroll
    for (int k = 0; k < CPT; k++) {
      const bq_u32 i = b0 + tid + k * BQ_TILE_THREADS;
      const bq_win v = bq_win_of(x, p.xs, i, g, nc);
      if (i < g.n && v.any) {
        if (g.n > batch) bq_win_load(a[k], v, x + v.rr * p.xs, nc, lo, hi); // else still in a
        bq_qchunk o;
        bq_quantize_chunk_any(a[k], o, q);
        bq_win_store(o, v, y + v.rr * p.ys, nc);
      }
    }
  }
}
// A block's tiles: blockIdx.x, + gridDim.x, ... of the host's walk (p.trows x p.tcols
// tiles), as (row, column) stepped without a division a tile, the walk's constants in the
// parameter block rather than registers. (Dividing each tile's 64-bit index cost as much as
// staging its accesses.)
struct bq_twalk {
  bq_i64 tr, tc;
};
static __device__ __forceinline__ bq_twalk bq_twalk_of(const bq_dynamic_params &p) {
  bq_twalk w;
  w.tr = p.tcols > 0 ? (bq_i64)blockIdx.x / p.tcols : p.trows; // (no columns: no tiles)
  w.tc = (bq_i64)blockIdx.x - w.tr * p.tcols;
  return w;
}
static __device__ __forceinline__ void bq_twalk_step(const bq_dynamic_params &p, bq_twalk &w) {
  w.tr += p.tdq;
  w.tc += p.tdr;
  if (w.tc >= p.tcols) {
    w.tc -= p.tcols;
    w.tr++;
  }
}
// tile (tr, tc)'s rows and columns (fewer at the matrix's edges)
static __device__ __forceinline__ bq_u32 bq_tile_len(bq_i64 n, bq_i64 t, bq_i64 B) {
  const bq_i64 r = n - t * B;
  return (bq_u32)(r < B ? r : B);
}
#define BQ_TILE_STAGED (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)
#if BQ_E_DYNAMIC_TILES && BQ_TILE_STAGED
// Staged tiles (p.staged: 16-bit data, rows 16-byte aligned, B whole accesses and a tile
// of at most BQ_TILE_CPT accesses a thread, which bounds B to 128: apr <= 16 accesses a row,
// so a tile's nr <= B = 8 apr rows take at most BQ_TILE_CPT steps of its grid). A
// persistent block takes the tiles of whole accesses blockIdx.x, + gridDim.x, ..., and while
// it reduces and quantizes one from registers, cp.async brings its next into shared memory
// (one slot, BQ_TILE_THREADS * BQ_TILE_CPT accesses), so that loads stay in flight through
// the arithmetic. Thread t copies exactly the accesses it later reads (its grid's, to slot
// positions t + k BQ_TILE_THREADS), so its own cp.async.wait_group is all the
// synchronization the slot needs, and it copies the next tile only after its reduction has
// consumed this one's. A right edge column of tiles that are not whole accesses runs after
// them (the round robin going on), as windows, a few slots a thread at a time
// (BQ_TILE_EDGE_CPT): inside the loop its registers would spill the loop's.
static __device__ __forceinline__ void bq_tile_stage(const bq_dynamic_params &p, bq_i64 tr, bq_i64 tc, bq_u32 nr,
                                                     const bq_tgrid &g, bq_u32 slot) {
  const bq_u32 lim = bq_tgrid_lim(g, nr), r0 = lim ? g.row : 0;
  const bq_t *x = (const bq_t *)p.x + (tr * p.group + r0) * p.xs + tc * p.group + g.col * BQ_VEC;
  const bq_i64 step = (bq_i64)g.R * p.xs;
  const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, 0, lim);
#pragma unroll
  for (int k = 0; k < BQ_TILE_CPT; k++)
    if (k < nk) bq_cp_async16(slot + (threadIdx.x + k * BQ_TILE_THREADS) * 16u, x + k * step, 16);
}
static __device__ __forceinline__ void bq_tiles_staged(const bq_dynamic_params &p, bq_red *red_smem) {
  BQ_DYNAMIC_SMEM(bq_tile_slot);
  const bq_u32 slot = bq_smem_addr(bq_tile_slot), tid = threadIdx.x;
  const bq_xchunk *S = (const bq_xchunk *)bq_tile_slot;
  const bq_i64 B = p.group;
  bq_tgrid g; // the current tile's grid
  g.apr = 0;
  bq_twalk w = bq_twalk_of(p);
  if (w.tr < p.trows) {
    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B);
    bq_tgrid_at(g, bq_tile_len(p.cols, w.tc, B) / BQ_VEC);
    bq_tile_stage(p, w.tr, w.tc, nr, g, slot);
  }
  bq_cp_commit();
  for (; w.tr < p.trows; bq_twalk_step(p, w)) {
    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B);
    const bq_u32 lim = bq_tgrid_lim(g, nr);
    const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, 0, lim);
    bq_cp_wait<0>();
    bq_xchunk a[BQ_TILE_CPT];
    bq_red red = bq_red_init();
#pragma unroll
    for (int k = 0; k < BQ_TILE_CPT; k++)
      if (k < nk) {
        a[k] = S[tid + k * BQ_TILE_THREADS];
        bq_reduce_chunk(a[k], red);
      }
    bq_twalk n = w; // the next tile: staged now (this thread's accesses of the slot are in a, and reduced)
    bq_twalk_step(p, n);
    bq_u32 napr = 0;
    if (n.tr < p.trows) {
      bq_tgrid gn = g;
      napr = bq_tile_len(p.cols, n.tc, B) / BQ_VEC;
      bq_tgrid_at(gn, napr);
      bq_tile_stage(p, n.tr, n.tc, bq_tile_len(p.rows, n.tr, B), gn, slot);
    }
    bq_cp_commit();
    red = bq_red_team(red, BQ_TILE_THREADS, red_smem);
    const bq_qp q = bq_params_of(red, (bq_c)p.bound);
    if (tid == 0) bq_write_params(p, w.tr * p.grs + w.tc, q);
    bq_i *y = (bq_i *)p.y + (w.tr * B + (lim ? g.row : 0)) * p.ys + w.tc * B + g.col * BQ_VEC;
    bq_tile_put<BQ_TILE_CPT>(a, y, (bq_i64)g.R * p.ys, nk, q);
    if (napr) bq_tgrid_at(g, napr); // (the same as gn)
  }
  bq_cp_wait<0>();
  if (p.tcols < p.ngroups) { // the last column's tiles, the round robin going on from where the staged tiles left it
    const bq_i64 G = gridDim.x, tc = p.ngroups - 1;
    for (bq_i64 tr = ((bq_i64)blockIdx.x - p.trows * p.tcols % G + G) % G; tr < p.trows; tr += G)
      bq_tile_window<BQ_TILE_EDGE_CPT>(p, tr * p.grs + tc, (const bq_t *)p.x + tr * B * p.xs + tc * B,
                                       (bq_i *)p.y + tr * B * p.ys + tc * B, bq_tile_len(p.rows, tr, B),
                                       bq_tile_len(p.cols, tc, B), true, red_smem);
  }
}
#endif
// (64 registers: four 256-thread blocks an SM, whose tiles' loads in flight keep it busy)
#if BQ_E_DYNAMIC_TILES
extern "C" __global__ void __launch_bounds__(BQ_TILE_THREADS, 1024 / BQ_TILE_THREADS) BQ_FN_DYNAMIC_TILES(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_TILE_THREADS / 32];
#if BQ_TILE_STAGED
  if (p.staged) {
    bq_tiles_staged(p, red_smem);
    return;
  }
#endif
  const bq_i64 B = p.group;
  bq_tgrid g;
  g.apr = 0;
  for (bq_twalk w = bq_twalk_of(p); w.tr < p.trows; bq_twalk_step(p, w)) {
    const bq_u32 nr = bq_tile_len(p.rows, w.tr, B), nc = bq_tile_len(p.cols, w.tc, B);
    const bq_t *x = (const bq_t *)p.x + w.tr * B * p.xs + w.tc * B;
    bq_i *y = (bq_i *)p.y + w.tr * B * p.ys + w.tc * B;
    if (p.fast_groups && nc % BQ_VEC == 0 && nc / BQ_VEC <= BQ_TILE_THREADS) {
      bq_tgrid_at(g, nc / BQ_VEC);
      const bq_u32 lim = bq_tgrid_lim(g, nr), rt = lim ? g.row : 0, span = BQ_TILE_CPT * g.R; // rows a batch
      const bq_i64 xstep = (bq_i64)g.R * p.xs, ystep = (bq_i64)g.R * p.ys;
      const bq_t *xt = x + rt * p.xs + g.col * BQ_VEC;
      bq_i *yt = y + rt * p.ys + g.col * BQ_VEC;
      bq_xchunk a[BQ_TILE_CPT];
      bq_red red = bq_red_init();
      for (bq_u32 b = 0, kb = 0; b < nr; b += span, kb += BQ_TILE_CPT) {
        const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, b, lim);
#pragma unroll
        for (int k = 0; k < BQ_TILE_CPT; k++)
          if (k < nk) bq_load(a[k], xt + (kb + k) * xstep, 16);
#pragma unroll
        for (int k = 0; k < BQ_TILE_CPT; k++)
          if (k < nk) bq_reduce_chunk(a[k], red);
      }
      red = bq_red_team(red, BQ_TILE_THREADS, red_smem);
      const bq_qp q = bq_params_of(red, (bq_c)p.bound);
      if (threadIdx.x == 0) bq_write_params(p, w.tr * p.grs + w.tc, q);
      for (bq_u32 b = 0, kb = 0; b < nr; b += span, kb += BQ_TILE_CPT) {
        const int nk = bq_tgrid_steps<BQ_TILE_CPT>(g, b, lim);
        if (BQ_WRITE_Y && nr > span) { // else still in a
#pragma unroll
          for (int k = 0; k < BQ_TILE_CPT; k++)
            if (k < nk) bq_load(a[k], xt + (kb + k) * xstep, 16);
        }
        bq_tile_put<BQ_TILE_CPT>(a, yt + kb * ystep, ystep, nk, q);
      }
    } else { // a right edge tile that is not whole accesses (or rows longer than the block's accesses)
      bq_tile_window<BQ_TILE_EDGE_CPT>(p, w.tr * p.grs + w.tc, x, y, nr, nc, true, red_smem);
    }
  }
}
#endif
// Every tile off the 16-byte grid (rows whose stride is not a multiple of 16 bytes, or x
// itself off it: the host's choice) as windows, at bq_dynamic_tiles' bound: a row of B
// elements takes one line more than its accesses, so a thread holds one slot more.
#if BQ_E_DYNAMIC_TILES_ROWS
extern "C" __global__ void __launch_bounds__(BQ_TILE_THREADS, 1024 / BQ_TILE_THREADS) BQ_FN_DYNAMIC_TILES_ROWS(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_TILE_THREADS / 32];
  const bq_i64 B = p.group;
  for (bq_twalk w = bq_twalk_of(p); w.tr < p.trows; bq_twalk_step(p, w))
    bq_tile_window<BQ_TILE_CPT + 1>(p, w.tr * p.grs + w.tc, (const bq_t *)p.x + w.tr * B * p.xs + w.tc * B,
                                    (bq_i *)p.y + w.tr * B * p.ys + w.tc * B, bq_tile_len(p.rows, w.tr, B),
                                    bq_tile_len(p.cols, w.tc, B), false, red_smem);
}
#endif
#elif BQ_GRAN != BQ_GRAN_TENSOR
// Teams of tpr threads (p.tpr), a row or group each; a block holds one team or, for warp
// teams, eight.
template <int CPT> static __device__ __forceinline__ void bq_dynamic_body(const bq_dynamic_params &p, bq_red *red_smem) {
  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr;
  const int lane = threadIdx.x & (tpr - 1);
#if BQ_GRAN == BQ_GRAN_TOKEN
#if BQ_DYN_ROT
  const bq_dyn_rot rot = bq_dyn_rot_of(p, lane);
  const bq_dyn_rot *rp = &rot;
#else
  const bq_dyn_rot *rp = 0;
#endif
  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)
    bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, p.cols, r, 0, lane, tpr, red_smem, rp);
#else
#if BQ_FP8 // FP8 codes run their fast groups here too (integer codes take bq_dynamic_groups)
  if (p.fast_groups) {
    bq_groups_rows(p, lane, tpr, teams, team);
    return;
  }
#endif
  const bq_i64 segs = p.rows * p.ngroups; // every group a segment of its own
  for (bq_i64 w = (bq_i64)blockIdx.x * teams + team; w < segs; w += (bq_i64)gridDim.x * teams) {
    const bq_i64 r = bq_div64(w, p.ngroups), g = w - r * p.ngroups;
    bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs + g * p.group, (bq_i *)p.y + r * p.ys + g * p.group,
                    p.group, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, lane, tpr, red_smem);
  }
#endif
}
// Per token, QuantizedLinear's weight streaming may start as soon as every block of this
// grid is running (bq_launch_dependents): it streams weights until this grid is done.
#define BQ_ROWS_STAGED (BQ_GRAN == BQ_GRAN_TOKEN && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16))
#if BQ_E_DYNAMIC_STAGED && BQ_ROWS_STAGED
// Staged rows (bq_dynamic_staged: per token, 16-bit data, rows 16-byte aligned and whole
// accesses, a row of at most p.tpr BQ_CPT accesses and the team a block, more rows than
// the grid's blocks): persistent blocks take rows
// blockIdx.x, + gridDim.x, ..., and while a block reduces and quantizes one row from
// registers, cp.async brings its next into shared memory (one slot of a row), each thread
// copying exactly the accesses it reads later, so that its own wait is all the
// synchronization the slot needs, and copying only after its reduction has consumed them.
// A team's loads so stay in flight through its reduction and stores. (With the rotation,
// two slots: below.)
#if BQ_DYN_ROT
// With the rotation the row's accesses are dealt otherwise: access i of a lane holds chunk
// (access) 8 (lane / 2) + 2 (i % 4) + lane % 2 of the span of 4 tpr chunks that i / 4 picks.
// A lane pair so holds 8 consecutive chunks, and a block of nb chunks (n / BQ_VEC, at most a
// warp's 32) is nb / 8 lane pairs: the butterfly's stages between a block's chunks take one
// shuffle (lane ^ 1), two register stages (accesses m ^ 1, m ^ 2), then log2(nb / 8) shuffles:
// one fewer than bq_dyn_rot's map where nb is 4, two fewer from 8 up. A load or store moves
// whole 32-byte sectors (a lane pair's). The slot keeps a chunk at its place in the row but
// for 16-byte units 1-2 of each 128-byte line, xored with the chunk's bits 3-4, so that a
// quarter warp's reads fall in distinct banks; the slot is so a whole number of lines
// (bq_staged_slot).
static __device__ __forceinline__ bq_i64 bq_staged_chunk(int lane, int i, int tpr) {
  return (bq_i64)(i >> 2) * 4 * tpr + 8 * (lane >> 1) + 2 * (i & 3) + (lane & 1);
}
static __device__ __forceinline__ bq_u32 bq_staged_pos(bq_i64 c) { return (bq_u32)c ^ (((bq_u32)c >> 2) & 6u); }
static __device__ __forceinline__ bq_u32 bq_staged_slot(bq_i64 nch) { return (bq_u32)((nch + 7) & ~7ll) * 16u; }
#else
static __device__ __forceinline__ bq_i64 bq_staged_chunk(int lane, int i, int tpr) { return lane + (bq_i64)i * tpr; }
static __device__ __forceinline__ bq_u32 bq_staged_pos(bq_i64 c) { return (bq_u32)c; }
#endif
static __device__ __forceinline__ void bq_row_stage(const bq_dynamic_params &p, bq_i64 r, int lane, int tpr,
                                                    bq_i64 nch, bq_u32 slot) {
  const bq_t *x = (const bq_t *)p.x + r * p.xs;
#pragma unroll
  for (int i = 0; i < BQ_CPT; i++) {
    const bq_i64 c = bq_staged_chunk(lane, i, tpr);
    if (c < nch) bq_cp_async16(slot + bq_staged_pos(c) * 16u, x + c * BQ_VEC, 16);
  }
}
#if BQ_DYN_ROT
// The rotation in the staged map: the lane's signs for each of its accesses m of a span
// (the same in every span: a span is whole blocks), computed once a thread, BQ_VEC bits an
// access in one word (four words spilled at 64 registers)
struct bq_staged_rot {
  int log2n;
  bq_u32 neg;
  bq_c cn;
};
static __device__ __forceinline__ bq_staged_rot bq_staged_rot_of(const bq_dynamic_params &p, int lane) {
  bq_staged_rot r;
  const int n = 1 << p.rlog2;
  r.log2n = p.rlog2;
  r.cn = bq_rot_c(p.rlog2);
  r.neg = 0;
  static_assert(4 * BQ_VEC <= 32, "a lane's signs in one word");
  if (p.rsigns)
#pragma unroll
    for (int m = 0; m < 4; m++)
      r.neg |= bq_rot_signs<BQ_VEC>((int)(bq_staged_chunk(lane, m, 0) * BQ_VEC) & (n - 1), n, p.seed_lo, p.seed_hi)
               << (BQ_VEC * m);
  return r;
}
// one butterfly stage between lanes lane and lane ^ lh, for every element of the four accesses
static __device__ __forceinline__ void bq_rc_stage(bq_c (&c)[4][BQ_VEC], int lane, int lh) {
  const bq_c sg = lane & lh ? (bq_c)-1 : (bq_c)1; // (as bq_rot_apply's: one fma by +-1)
#pragma unroll
  for (int m = 0; m < 4; m++)
#pragma unroll
    for (int k = 0; k < BQ_VEC; k++) c[m][k] = bq_fma(c[m][k], sg, __shfl_xor_sync(0xffffffffu, c[m][k], lh));
}
// one between the lane's accesses m and m ^ hm
static __device__ __forceinline__ void bq_rc_regs(bq_c (&c)[4][BQ_VEC], int hm) {
#pragma unroll
  for (int m = 0; m < 4; m++)
    if (!(m & hm))
#pragma unroll
      for (int k = 0; k < BQ_VEC; k++) {
        const bq_c u = c[m][k], v = c[m + hm][k];
        c[m][k] = bq_add(u, v);
        c[m + hm][k] = bq_sub(u, v);
      }
}
// Rotates a row's accesses in place (rounded to T), the contract's stages in their order:
// within an access, lane ^ 1, accesses m ^ 1 and m ^ 2, lanes ^ 2, ^ 4. A warp whose chunks
// all lie past the row skips (warp-uniform: it holds 128 consecutive chunks of each span);
// the rest run every stage on all 32 lanes, on zeros past the row.
static __device__ __forceinline__ void bq_rotate_staged(bq_xchunk (&a)[BQ_CPT], bq_i64 nch, int lane, int tpr,
                                                        const bq_staged_rot &r) {
  static_assert(BQ_CPT % 4 == 0, "the staged map deals accesses in fours");
  const int n = 1 << r.log2n;
#pragma unroll
  for (int s = 0; s < BQ_CPT / 4; s++) {
    if ((bq_i64)s * 4 * tpr + 128 * (lane >> 5) >= nch) continue;
    bq_c c[4][BQ_VEC];
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
      for (int k = 0; k < BQ_VEC; k++) {
        const bq_c v = bq_to_c(a[4 * s + m].e[k]);
        c[m][k] = (r.neg >> (BQ_VEC * m + k)) & 1u ? -v : v;
      }
#pragma unroll
    for (int h = 1; h < BQ_VEC; h <<= 1) {
      if (h >= n) break;
#pragma unroll
      for (int m = 0; m < 4; m++)
#pragma unroll
        for (int k = 0; k < BQ_VEC; k++)
          if (!(k & h)) {
            const bq_c u = c[m][k], v = c[m][k + h];
            c[m][k] = bq_add(u, v);
            c[m][k + h] = bq_sub(u, v);
          }
    }
    if (n > BQ_VEC) bq_rc_stage(c, lane, 1);
    if (n > 2 * BQ_VEC) bq_rc_regs(c, 1);
    if (n > 4 * BQ_VEC) bq_rc_regs(c, 2);
    for (int lh = 2; 4 * lh * BQ_VEC < n; lh <<= 1) bq_rc_stage(c, lane, lh);
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
      for (int k = 0; k < BQ_VEC; k++) a[4 * s + m].e[k] = bq_from_c(bq_mul(c[m][k], r.cn));
  }
}
#endif
static __device__ __forceinline__ void bq_rows_staged(const bq_dynamic_params &p, bq_red *red_smem) {
  BQ_DYNAMIC_SMEM(bq_row_slot);
  const bq_u32 slot = bq_smem_addr(bq_row_slot);
  const bq_xchunk *S = (const bq_xchunk *)bq_row_slot;
  (void)S;
  const int tpr = p.tpr, lane = threadIdx.x;
  const bq_i64 nch = p.cols / BQ_VEC;
  bq_i64 r = blockIdx.x;
  if (r < p.rows) bq_row_stage(p, r, lane, tpr, nch, slot);
  bq_cp_commit();
  const bool pairs = BQ_HMAX2 && !BQ_FP8; // as bq_segment's
#if BQ_DYN_ROT
  // With the rotation, two slots: the next row is requested into the other one before this
  // one is read, so its loads stay in flight through the rotation's shuffles too (which
  // would otherwise stand between a row's arrival and its successor's request). A thread
  // again copies only what it reads, and the other slot's accesses were consumed by the
  // previous row's quantize.
  const bq_staged_rot rot = bq_staged_rot_of(p, lane);
  const bq_u32 bytes = bq_staged_slot(nch);
  int k = 0;
#endif
  for (; r < p.rows; r += gridDim.x) {
    bq_xchunk a[BQ_CPT];
    bq_red red = bq_red_init();
#if BQ_HMAX2
    bq_u32 m2 = 0;
#endif
#if BQ_DYN_ROT
    if (r + gridDim.x < p.rows) bq_row_stage(p, r + gridDim.x, lane, tpr, nch, slot + (bq_u32)(k ^ 1) * bytes);
    bq_cp_commit();
    bq_cp_wait<1>();
    const bq_xchunk *Sk = (const bq_xchunk *)(bq_row_slot + (bq_u32)k * bytes);
    k ^= 1;
#pragma unroll
    for (int i = 0; i < BQ_CPT; i++) {
      const bq_i64 c = bq_staged_chunk(lane, i, tpr);
      if (c < nch) a[i] = Sk[bq_staged_pos(c)];
      else a[i] = bq_xchunk{};
    }
    bq_rotate_staged(a, nch, lane, tpr, rot);
#else
    bq_cp_wait<0>();
#endif
#pragma unroll
    for (int i = 0; i < BQ_CPT; i++) {
      const bq_i64 c = bq_staged_chunk(lane, i, tpr);
      if (c < nch) {
#if !BQ_DYN_ROT
        a[i] = S[c];
#endif
#if BQ_HMAX2
        if (pairs) m2 = bq_hmax2_chunk(m2, a[i]);
        else
#endif
          bq_reduce_chunk(a[i], red);
      }
    }
#if BQ_HMAX2
    if (pairs) bq_hmax2_fold(red, m2);
#endif
#if !BQ_DYN_ROT
    if (r + gridDim.x < p.rows) bq_row_stage(p, r + gridDim.x, lane, tpr, nch, slot); // its accesses are in a[] now
    bq_cp_commit();
#endif
    red = bq_red_team(red, tpr, red_smem);
    const bq_qp q = bq_params_of(red, (bq_c)p.bound);
    if (lane == 0) bq_write_params(p, r, q);
    if (!BQ_WRITE_Y) continue;
    bq_i *y = (bq_i *)p.y + r * p.ys;
    const int w_out = bq_width(y);
#if BQ_DYN_ROT
#if BQ_LEAN
    const bool lean = bq_is_lean(q);
#endif
#pragma unroll
    for (int i = 0; i < BQ_CPT; i++) {
      const bq_i64 c = bq_staged_chunk(lane, i, tpr);
      if (c < nch) {
        bq_qchunk o;
#if BQ_LEAN
        if (lean) bq_quantize_chunk_as<true>(a[i], o, q);
        else bq_quantize_chunk_as<false>(a[i], o, q);
#else
        bq_quantize_chunk(a[i], o, q);
#endif
        bq_store(y + c * BQ_VEC, o, w_out);
      }
    }
#elif BQ_LEAN
    bq_quantize_batch<true>(a, y, lane, tpr, nch, q, w_out);
#else
#pragma unroll
    for (int i = 0; i < BQ_CPT; i++) {
      const bq_i64 c = lane + (bq_i64)i * tpr;
      if (c < nch) {
        bq_qchunk o;
        bq_quantize_chunk(a[i], o, q);
        bq_store(y + c * BQ_VEC, o, w_out);
      }
    }
#endif
  }
  bq_cp_wait<0>();
}
#endif
#if BQ_E_DYNAMIC
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
#if BQ_GRAN == BQ_GRAN_TOKEN
  bq_launch_dependents();
#endif
  bq_dynamic_body<BQ_CPT>(p, red_smem);
}
#endif
#if BQ_E_DYNAMIC_STAGED
// (empty but for 16-bit rows: the host launches it for no other)
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_STAGED(const bq_dynamic_params p) {
#if BQ_ROWS_STAGED
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
  bq_launch_dependents();
  bq_rows_staged(p, red_smem);
#endif
}
#endif
#if BQ_GRAN == BQ_GRAN_GROUP && BQ_E_DYNAMIC_GROUPS
// Per group into integer codes, the fast groups alone (p.fast_groups; teams of at most 64
// threads, 8 rows of warp teams a block where a team is a warp): a module of their own,
// which compiles in half the time of one with bq_segment's batches beside them. From f32
// and 16-bit data they fit 48 registers, from f64 64. (FP8 codes keep theirs in
// bq_dynamic, where they ran faster; the host never launches this entry for them.)
#if BQ_FT == BQ_TYPE_F64
#define BQ_GROUPS_MIN_BLOCKS 4
#else
#define BQ_GROUPS_MIN_BLOCKS 5
#endif
extern "C" __global__ void __launch_bounds__(256, BQ_GROUPS_MIN_BLOCKS) BQ_FN_DYNAMIC_GROUPS(const bq_dynamic_params p) {
  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr;
  bq_groups_rows(p, threadIdx.x & (tpr - 1), tpr, teams, team);
}
#endif
#if BQ_GRAN == BQ_GRAN_GROUP && BQ_E_DYNAMIC_SETS
// Per group, the fast groups of BQ_DU or BQ_DU / 2 accesses, two a lane (bq_groups_sets), for
// every code type: an entry of its own, as the other kernels' registers and code stay as they
// were (inside them this path cost the groups of 128 up to 4%).
extern "C" __global__ void __launch_bounds__(256) BQ_FN_DYNAMIC_SETS(const bq_dynamic_params p) {
  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr, lane = threadIdx.x & (tpr - 1);
  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)
    bq_groups_sets<2>(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, lane, tpr, r);
}
#endif
#if BQ_GRAN == BQ_GRAN_TOKEN
// Symmetric: at most 64 registers, two 512-thread blocks an SM, as the code without a bound
// (args.amax_bound) fits; the bound's branch would otherwise cost one block an SM.
#if BQ_ASYM || BQ_DYN_ROT // (the rotation's registers: spills at 64)
#define BQ_LONG_MIN_BLOCKS 1
#else
#define BQ_LONG_MIN_BLOCKS (65536 / (64 * BQ_LONG_TEAM))
#endif
#if BQ_E_DYNAMIC_LONG
extern "C" __global__ void __launch_bounds__(BQ_LONG_TEAM, BQ_LONG_MIN_BLOCKS) BQ_FN_DYNAMIC_LONG(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_LONG_TEAM / 32];
  bq_launch_dependents();
  bq_dynamic_body<BQ_LONG_CPT>(p, red_smem);
}
#endif
#endif
#else
// Per tensor, pass 1: one partial reduction per block into the workspace. Its loads take
// L2's default policy, not the streaming one, so that the tail it reads last is still in L2
// when pass 2, walking the tensor from its end, reads it again.
#if BQ_E_DYNAMIC_REDUCE
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_REDUCE(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
  const bq_t *x = (const bq_t *)p.x;
  const bq_i64 n = p.cols, pro = bq_prologue(x, n), nch = (n - pro) / BQ_VEC;
  bq_red r = bq_red_init();
  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, nth = (bq_i64)gridDim.x * blockDim.x;
  for (bq_i64 c0 = tid; c0 < nch; c0 += nth * BQ_DU) {
    bq_xchunk a[BQ_DU];
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (c0 + u * nth < nch) {
        const bq_xchunk *s = (const bq_xchunk *)(x + pro + (c0 + u * nth) * BQ_VEC);
        BQ_EMU_ALIGNED(s, sizeof(bq_xchunk)); // (the emulator's check; nothing on a GPU)
        a[u] = *s;
      }
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (c0 + u * nth < nch) bq_reduce_chunk(a[u], r);
  }
  if (tid < pro) bq_red_add(r, bq_to_c(x[tid]));
  if (pro + nch * BQ_VEC + tid < n) bq_red_add(r, bq_to_c(x[pro + nch * BQ_VEC + tid]));
  r = bq_red_team(r, blockDim.x, red_smem);
  if (threadIdx.x == 0) ((bq_red *)p.partial)[blockIdx.x] = r;
}
#endif

// Per tensor, pass 2: every block reduces the partials in the same order, block 0 stores
// the scale, and all quantize. Pass 1's strides (nth BQ_DU accesses each) are taken last
// first: the tail pass 1 left in L2 is read again from there.
#if BQ_E_DYNAMIC_APPLY
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_APPLY(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
  bq_red r = bq_red_init();
  for (int i = threadIdx.x; i < p.nblocks; i += blockDim.x) r = bq_red_merge(r, ((const bq_red *)p.partial)[i]);
  r = bq_red_team(r, blockDim.x, red_smem);
  const bq_qp q = bq_params_of(r, (bq_c)p.bound);
  if (blockIdx.x == 0 && threadIdx.x == 0) bq_write_params(p, 0, q);
  if (!BQ_WRITE_Y) return;
  const bq_t *x = (const bq_t *)p.x;
  bq_i *y = (bq_i *)p.y;
  const bq_i64 n = p.cols, pro = bq_prologue(x, n), nch = (n - pro) / BQ_VEC;
  const int w_out = bq_width(y + pro);
  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, nth = (bq_i64)gridDim.x * blockDim.x;
  const bq_i64 stride = nth * BQ_DU;
  for (bq_i64 c0 = tid + (nch > 0 ? (nch - 1) / stride : -1) * stride; c0 >= 0; c0 -= stride) {
    bq_xchunk a[BQ_DU];
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (c0 + u * nth < nch) bq_load(a[u], x + pro + (c0 + u * nth) * BQ_VEC, 16);
#if BQ_LEAN
    bq_quantize_batch<true>(a, y + pro, c0, nth, nch, q, w_out);
#else
#pragma unroll
    for (int u = 0; u < BQ_DU; u++) {
      if (c0 + u * nth < nch) {
        bq_qchunk o;
        bq_quantize_chunk(a[u], o, q);
        bq_store(y + pro + (c0 + u * nth) * BQ_VEC, o, w_out);
      }
    }
#endif
  }
  if (tid < pro) y[tid] = (bq_i)bq_quantize_int(bq_to_c(x[tid]), q.s, q.z);
  const bq_i64 kt = pro + nch * BQ_VEC + tid;
  if (kt < n) y[kt] = (bq_i)bq_quantize_int(bq_to_c(x[kt]), q.s, q.z);
}
#endif
#endif
