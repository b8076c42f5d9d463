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
                                                  bq_i64 n, bq_i64 pidx, bq_i64 g, int lane, int tpr, bq_red *red_smem) {
  const int pro = CPT == BQ_CPT && p.align_y ? bq_segment_prologue(x, y, n, tpr) : (int)bq_prologue(x, n);
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
  for (bq_i64 b = 0; b < nch; b += batch) {
    bq_load_batch<CPT>(a, xb, b + lane, nch, tpr);
#pragma unroll
    for (int i = 0; i < CPT; i++)
      if (b + lane + (bq_i64)i * tpr < nch) bq_reduce_chunk(a[i], r);
  }
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
  if (has_p) y[kp] = (bq_i)bq_quantize_int(ep, q.s, q.z);
  if (has_t) y[kt] = (bq_i)bq_quantize_int(et, q.s, q.z);
  for (bq_i64 b = 0; b < nch; b += batch) {
    if (nch > batch) bq_load_batch<CPT>(a, xb, b + lane, nch, tpr); // the one-batch segment is still in a
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
// group is held by gl = gc / ga consecutive lanes, ga = min(gc, BQ_DU) accesses each
// (access u of lane j is the group's u gl + j: a load instruction reads gl contiguous
// accesses of each group). The lanes reduce with log2(gl) shuffles, and one set of scale
// instructions serves 32 / gl groups a warp.
static __device__ __forceinline__ void bq_groups_fast(const bq_dynamic_params &p, const bq_t *x, bq_i *y,
                                                      bq_i64 r, int lane, int tpr) {
  const int gc = (int)(p.group / BQ_VEC), ga = gc < BQ_DU ? gc : BQ_DU, gl = gc / ga;
  const int w_out = bq_width(y);
  const int sub = lane & (gl - 1);
  const bq_i64 per = tpr / gl; // groups a team takes at once
  for (bq_i64 g0 = 0; g0 < p.ngroups; g0 += per) { // uniform trip count: shuffles need all lanes
    const bq_i64 g = g0 + lane / gl;
    const bool ok = g < p.ngroups;
    const bq_i64 c0 = g * gc + sub;
    bq_xchunk a[BQ_DU];
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (ok && u < ga) bq_load(a[u], x + (c0 + (bq_i64)u * gl) * BQ_VEC, 16);
    bq_red red = bq_red_init();
#pragma unroll
    for (int u = 0; u < BQ_DU; u++)
      if (ok && u < ga) bq_reduce_chunk(a[u], red);
    red = bq_red_lanes(red, gl);
    if (ok) {
      const bq_qp q = bq_params_of(red, (bq_c)p.bound);
      if (sub == 0) bq_write_group(p, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, q);
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
#endif

#if BQ_GRAN == BQ_GRAN_BLOCK
// Per block: a thread block of BQ_TILE_THREADS a B x B tile (p.group; fewer rows or columns
// at the matrix's edges; the host bounds B so that a tile's indices fit 32 bits), striding
// over the tiles. Where every row starts 16-byte aligned and B is a whole number of accesses
// (p.fast_groups), a tile of whole accesses is spread over the threads, BQ_TILE_CPT at a
// time each in registers: a tile that fits is read from DRAM once, a larger one again (from
// L2) for the quantize pass. Tiles whose rows are off the grid, and right edge tiles that
// are not whole accesses, are spread the same way as the 16-byte lines that hold their
// rows (bq_tile_window).
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
// a tile's accesses i0 + k BQ_TILE_THREADS (those below n), rows of apr accesses; the form
// chunk by chunk (picked once for the batch it was slower, 85.6 against 79.1 us on bf16
// [8192, 8192])
static __device__ __forceinline__ void bq_tile_quantize(const bq_xchunk (&a)[BQ_TILE_CPT], bq_i *y, bq_u32 i0, bq_u32 n,
                                                        bq_u32 apr, bq_i64 ys, const bq_qp &q) {
  const bq_tdiv d = bq_tdiv_of(apr, n);
#pragma unroll
  for (int k = 0; k < BQ_TILE_CPT; k++) {
    const bq_u32 i = i0 + k * BQ_TILE_THREADS, rr = bq_tdiv_q(i, d);
    if (i < n) {
      bq_qchunk o;
      bq_quantize_chunk_any(a[k], o, q);
      bq_i *yp = y + rr * ys + (i - rr * apr) * BQ_VEC;
      bq_store(yp, o, bq_width(yp));
    }
  }
}
// loads the same accesses into a (x: the tile's first element, rows xs elements apart)
static __device__ __forceinline__ void bq_tile_load(bq_xchunk (&a)[BQ_TILE_CPT], const bq_t *x, bq_u32 i0, bq_u32 n,
                                                    bq_u32 apr, bq_i64 xs) {
  const bq_tdiv d = bq_tdiv_of(apr, n);
#pragma unroll
  for (int k = 0; k < BQ_TILE_CPT; k++) {
    const bq_u32 i = i0 + k * BQ_TILE_THREADS, rr = bq_tdiv_q(i, d);
    if (i < n) bq_load(a[k], x + rr * xs + (i - rr * apr) * BQ_VEC, 16);
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
#define BQ_TILE_STAGED (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)
#if BQ_E_DYNAMIC_TILES && BQ_TILE_STAGED
// Staged tiles (p.staged: 16-bit data, rows 16-byte aligned, B whole accesses and a tile
// of at most BQ_TILE_CPT accesses a thread): a persistent block takes tiles blockIdx.x,
// + gridDim.x, ..., and while it reduces and quantizes one from registers, cp.async brings
// its next into shared memory (one slot, BQ_TILE_THREADS * BQ_TILE_CPT accesses), so that
// loads stay in flight through the arithmetic. Thread t copies exactly the accesses it
// later reads, so its own cp.async.wait_group is all the synchronization the slot needs,
// and it copies the next tile only after its reduction has consumed this one's. A right
// edge tile that is not whole accesses is not staged: it runs as windows, a few slots a
// thread at a time (BQ_TILE_EDGE_CPT: more spill the tile loops' registers here).
struct bq_tile_at {
  bq_i64 tr, tc;
  bq_u32 nr, nc;
};
static __device__ __forceinline__ bq_tile_at bq_tile_of(const bq_dynamic_params &p, bq_i64 tile) {
  bq_tile_at t;
  t.tr = tile / p.ngroups;
  t.tc = tile - t.tr * p.ngroups;
  const bq_i64 r0 = t.tr * p.group, c0 = t.tc * p.group;
  t.nr = (bq_u32)(p.rows - r0 < p.group ? p.rows - r0 : p.group);
  t.nc = (bq_u32)(p.cols - c0 < p.group ? p.cols - c0 : p.group);
  return t;
}
static __device__ __forceinline__ void bq_tile_stage(const bq_dynamic_params &p, const bq_tile_at &t, bq_u32 slot) {
  const bq_t *x = (const bq_t *)p.x + t.tr * p.group * p.xs + t.tc * p.group;
  const bq_u32 apr = t.nc / BQ_VEC, n = t.nr * apr, i0 = threadIdx.x;
  const bq_tdiv d = bq_tdiv_of(apr, n);
#pragma unroll
  for (int k = 0; k < BQ_TILE_CPT; k++) {
    const bq_u32 i = i0 + k * BQ_TILE_THREADS, rr = bq_tdiv_q(i, d);
    if (i < n) bq_cp_async16(slot + i * 16u, x + rr * p.xs + (i - rr * apr) * BQ_VEC, 16);
  }
}
static __device__ __forceinline__ void bq_tiles_staged(const bq_dynamic_params &p, bq_red *red_smem) {
  BQ_DYNAMIC_SMEM(bq_tile_slot);
  const bq_u32 slot = bq_smem_addr(bq_tile_slot), tid = threadIdx.x;
  const bq_xchunk *S = (const bq_xchunk *)bq_tile_slot;
  const bq_i64 ntiles = (p.rows + p.group - 1) / p.group * p.ngroups;
  bq_i64 tile = blockIdx.x;
  if (tile < ntiles) {
    const bq_tile_at t = bq_tile_of(p, tile);
    if (t.nc % BQ_VEC == 0) bq_tile_stage(p, t, slot);
  }
  bq_cp_commit();
  for (; tile < ntiles; tile += gridDim.x) {
    const bq_tile_at t = bq_tile_of(p, tile), tn = bq_tile_of(p, tile + gridDim.x);
    const bool next = tile + gridDim.x < ntiles && tn.nc % BQ_VEC == 0;
    const bq_t *x = (const bq_t *)p.x + t.tr * p.group * p.xs + t.tc * p.group;
    bq_i *y = (bq_i *)p.y + t.tr * p.group * p.ys + t.tc * p.group;
    if (t.nc % BQ_VEC != 0) { // not staged
      if (next) bq_tile_stage(p, tn, slot);
      bq_cp_commit();
      bq_tile_window<BQ_TILE_EDGE_CPT>(p, t.tr * p.grs + t.tc, x, y, t.nr, t.nc, true, red_smem);
      continue;
    }
    const bq_u32 apr = t.nc / BQ_VEC, n = t.nr * apr;
    bq_cp_wait<0>();
    bq_xchunk a[BQ_TILE_CPT];
    bq_red red = bq_red_init();
#pragma unroll
    for (int k = 0; k < BQ_TILE_CPT; k++)
      if (tid + k * BQ_TILE_THREADS < n) {
        a[k] = S[tid + k * BQ_TILE_THREADS];
        bq_reduce_chunk(a[k], red);
      }
    if (next) bq_tile_stage(p, tn, slot); // this thread's accesses of the slot are in a, and reduced
    bq_cp_commit();
    red = bq_red_team(red, BQ_TILE_THREADS, red_smem);
    const bq_qp q = bq_params_of(red, (bq_c)p.bound);
    if (tid == 0) bq_write_params(p, t.tr * p.grs + t.tc, q);
    bq_tile_quantize(a, y, tid, n, apr, p.ys, q);
  }
  bq_cp_wait<0>();
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
  const bq_i64 B = p.group, ntc = p.ngroups, ntiles = (p.rows + B - 1) / B * ntc;
  const bq_u32 tid = threadIdx.x, batch = BQ_TILE_THREADS * BQ_TILE_CPT;
  for (bq_i64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const bq_i64 tr = tile / ntc, tc = tile - tr * ntc, r0 = tr * B, c0 = tc * B;
    const bq_u32 nr = (bq_u32)(p.rows - r0 < B ? p.rows - r0 : B), nc = (bq_u32)(p.cols - c0 < B ? p.cols - c0 : B);
    const bq_t *x = (const bq_t *)p.x + r0 * p.xs + c0;
    bq_i *y = (bq_i *)p.y + r0 * p.ys + c0;
    bq_red red = bq_red_init();
    if (p.fast_groups && nc % BQ_VEC == 0) {
      const bq_u32 apr = nc / BQ_VEC, n = nr * apr; // accesses a row, and the tile's
      bq_xchunk a[BQ_TILE_CPT];
      for (bq_u32 b0 = 0; b0 < n; b0 += batch) {
        bq_tile_load(a, x, b0 + tid, n, apr, p.xs);
#pragma unroll
        for (int k = 0; k < BQ_TILE_CPT; k++)
          if (b0 + tid + k * BQ_TILE_THREADS < n) bq_reduce_chunk(a[k], red);
      }
      red = bq_red_team(red, BQ_TILE_THREADS, red_smem);
      const bq_qp q = bq_params_of(red, (bq_c)p.bound);
      if (tid == 0) bq_write_params(p, tr * p.grs + tc, q);
      for (bq_u32 b0 = 0; b0 < n; b0 += batch) {
        if (n > batch) bq_tile_load(a, x, b0 + tid, n, apr, p.xs); // else still in a
        bq_tile_quantize(a, y, b0 + tid, n, apr, p.ys, q);
      }
    } else { // a right edge tile that is not whole accesses
      bq_tile_window<BQ_TILE_EDGE_CPT>(p, tr * p.grs + tc, x, y, nr, nc, true, red_smem);
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
  const bq_i64 B = p.group, ntc = p.ngroups, ntiles = (p.rows + B - 1) / B * ntc;
  for (bq_i64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const bq_i64 tr = tile / ntc, tc = tile - tr * ntc, r0 = tr * B, c0 = tc * B;
    const bq_u32 nr = (bq_u32)(p.rows - r0 < B ? p.rows - r0 : B), nc = (bq_u32)(p.cols - c0 < B ? p.cols - c0 : B);
    bq_tile_window<BQ_TILE_CPT + 1>(p, tr * p.grs + tc, (const bq_t *)p.x + r0 * p.xs + c0, (bq_i *)p.y + r0 * p.ys + c0,
                                    nr, nc, false, red_smem);
  }
}
#endif
#elif BQ_GRAN != BQ_GRAN_TENSOR
// Teams of tpr threads (p.tpr), a row or group each; a block holds one team or, for warp
// teams, eight.
template <int CPT> static __device__ __forceinline__ void bq_dynamic_body(const bq_dynamic_params &p, bq_red *red_smem) {
  const int tpr = p.tpr, teams = blockDim.x / tpr, team = threadIdx.x / tpr;
  const int lane = threadIdx.x & (tpr - 1);
#if BQ_GRAN == BQ_GRAN_TOKEN
  for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)
    bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, p.cols, r, 0, lane, tpr, red_smem);
#else
  if (p.fast_groups) {
    for (bq_i64 r = (bq_i64)blockIdx.x * teams + team; r < p.rows; r += (bq_i64)gridDim.x * teams)
      bq_groups_fast(p, (const bq_t *)p.x + r * p.xs, (bq_i *)p.y + r * p.ys, r, lane, tpr);
  } else {
    const bq_i64 segs = p.rows * p.ngroups;
    for (bq_i64 w = (bq_i64)blockIdx.x * teams + team; w < segs; w += (bq_i64)gridDim.x * teams) {
      const bq_i64 r = bq_div64(w, p.ngroups), g = w - r * p.ngroups;
      bq_segment<CPT>(p, (const bq_t *)p.x + r * p.xs + g * p.group, (bq_i *)p.y + r * p.ys + g * p.group,
                      p.group, bq_pat(bq_pbase(r, p.grs), g, p.grs), g, lane, tpr, red_smem);
    }
  }
#endif
}
// Per token, QuantizedLinear's weight streaming may start as soon as every block of this
// grid is running (bq_launch_dependents): it streams weights until this grid is done.
#if BQ_E_DYNAMIC
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
#if BQ_GRAN == BQ_GRAN_TOKEN
  bq_launch_dependents();
#endif
  bq_dynamic_body<BQ_CPT>(p, red_smem);
}
#endif
#if BQ_GRAN == BQ_GRAN_TOKEN
// Symmetric: at most 64 registers, two 512-thread blocks an SM, as the code without a bound
// (args.amax_bound) fits; the bound's branch would otherwise cost one block an SM.
#if BQ_ASYM
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
// Per tensor, pass 1: one partial reduction per block into the workspace.
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
      if (c0 + u * nth < nch) bq_load(a[u], x + pro + (c0 + u * nth) * BQ_VEC, 16);
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
// the scale, and all quantize.
#if BQ_E_DYNAMIC_APPLY
extern "C" __global__ void __launch_bounds__(BQ_BLOCK) BQ_FN_DYNAMIC_APPLY(const bq_dynamic_params p) {
  __shared__ bq_red red_smem[BQ_BLOCK / 32];
  bq_red r = bq_red_init();
  for (int i = threadIdx.x; i < p.nblocks; i += blockDim.x) r = bq_red_merge(r, ((const bq_red *)p.partial)[i]);
  r = bq_red_team(r, blockDim.x, red_smem);
  const bq_qp q = bq_params_of(r, (bq_c)p.bound);
  if (blockIdx.x == 0 && threadIdx.x == 0) bq_write_params(p, 0, q);
  const bq_t *x = (const bq_t *)p.x;
  bq_i *y = (bq_i *)p.y;
  const bq_i64 n = p.cols, pro = bq_prologue(x, n), nch = (n - pro) / BQ_VEC;
  const int w_out = bq_width(y + pro);
  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, nth = (bq_i64)gridDim.x * blockDim.x;
  for (bq_i64 c0 = tid; c0 < nch; c0 += nth * BQ_DU) {
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
