// affine.cu - quantize / dequantize / fake quantize, forward and backward (STE), for
// every granularity: per tensor, per channel, per token, per group and per block.
// Prelude defines (besides common.cuh's), in the names of the public enums: BQ_OP
// (BQ_OP_QUANTIZE, BQ_OP_DEQUANTIZE, BQ_OP_FAKE_QUANTIZE), BQ_DIR (BQ_DIR_FORWARD,
// BQ_DIR_BACKWARD), BQ_GRAN (BQ_GRAN_TENSOR, _CHANNEL, _TOKEN, _GROUP, _BLOCK); BQ_U, BQ_GA, BQ_FR
// and BQ_NA, the row kernels', bq_affine_blocks', bq_affine_flat's and bq_affine_narrow's
// accesses per lane.
//
// The data is [rows, cols] with a row stride per stream (per tensor and per channel are
// one dense row; per channel with the channel axis innermost has its own kernel, at the
// end). The stream with the widest element (the lead) is read or written in 16-byte
// accesses of BQ_P elements after a scalar prologue that aligns it; the other
// streams move the same BQ_P elements with the widest access their alignment allows.
// Consecutive lanes take consecutive accesses, so every warp instruction touches one
// contiguous span of every stream. A warp takes a tile of 32 * BQ_U accesses of one row
// at a time and issues all its loads before it computes; a warp's item is p.tpw consecutive
// tiles of one row, whose per-row set-up (pointers, prologue, per-token scale) it pays once.
// Per channel and per group, the scale and zero point change along the row. Where no access
// straddles two parameter blocks, quantize and fake quantize forward (and f64 fake quantize
// backward; per token, f64 quantize and fake quantize backward) take bq_affine_blocks: a
// lane prepares its block's parameters once for several accesses of it (see there).
// Otherwise the slot kernels (BQ_SLOTS) prepare each parameter block a tile touches once, in
// shared memory (f64 quantize: each block of an item once, BQ_ITEM_SLOTS); the other ops
// look each access's parameters up. Where accesses can straddle two blocks, bq_affine_odd
// computes those in registers with both blocks' parameters; bq_affine redoes them element by
// element. Per group (and per token, a group a row) over contiguous data with straddling
// accesses, bq_affine_flat treats the tensor as one flat array and gives each element its
// group's parameters by a select. f64 quantize takes bq_affine_narrow, bq_affine_blocks'
// layout over accesses of one element, where the host says so.

#define BQ_BWD (BQ_DIR == BQ_DIR_BACKWARD) // the straight-through gradient

#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
typedef bq_t bq_in0;
typedef bq_i bq_out;
#define BQ_HAS_IN1 0
#elif BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD
typedef bq_i bq_in0;
typedef bq_t bq_out;
#define BQ_HAS_IN1 0
#elif !BQ_BWD
typedef bq_t bq_in0;
typedef bq_t bq_out;
#define BQ_HAS_IN1 0
#else
typedef bq_t bq_in0; // dy
typedef bq_t bq_out; // dx
#define BQ_HAS_IN1 (BQ_OP != BQ_OP_DEQUANTIZE) // x, for the mask
#endif
typedef bq_t bq_in1;

#define BQ_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define BQ_LEAD_SIZE BQ_MAX2(sizeof(bq_in0), sizeof(bq_out))
#define BQ_P ((int)(16 / BQ_LEAD_SIZE)) // elements per access
// BQ_U, accesses per lane per tile, comes from the host's prelude (it sizes the grid)
#define BQ_TILE (32 * BQ_U)             // accesses per warp tile
#define BQ_OUT_LEADS (BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD) // dequantize forward writes the wide stream
// From the host's dispatch table (bq__affine_table, whose columns say where and why): BQ_SLOTS,
// per channel and per group the row kernels prepare each parameter block's scale once, in
// shared memory, rather than look it up for each access; BQ_ITEM_SLOTS, once an item rather
// than once a tile; BQ_ITEMS, a row kernel's item is several tiles (else one); BQ_LB_ROW,
// _ODD, _BLOCKS, _FLAT, _NARROW, _COLS, each entry point's launch bounds.
#define BQ_RL (BQ_SLOTS ? BQ_P : 1) // elements the redo loop loads together

#include "affine_abi.h" // the entry points and parameter blocks, which the host compiles too

// One element. `fix` is non-null in the vector loops: there an op may take a fast form and
// raise *fix where that form does not apply (f64 quantize backward divides through the
// prepared reciprocal, bq_div_by; per channel and per group, quantize takes the integer
// form, the tile having checked z.iok). The caller then redoes the access element by
// element with fix == nullptr: the general formulas.

static __device__ __forceinline__ bq_out bq_apply(bq_in0 a, bq_in1 b, const bq_scale &s, const bq_zp &z,
                                                  bool *fix) {
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
  if (fix) return (bq_out)bq_quantize_int(bq_to_c(a), s, z); // the tile checked z.iok
#endif
  return (bq_out)bq_quantize(bq_to_c(a), s, z);
#elif BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD
  return bq_from_c(bq_dequantize((int)a, s.s, z));
#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD
  return bq_from_c(bq_fake_quantize(bq_to_c(a), s, z));
#elif BQ_OP == BQ_OP_QUANTIZE
  if (!bq_in_range(bq_to_c(b), s, z)) return (bq_out)0;
  if (fix) {
    bool ok;
    const bq_c v = bq_div_by(bq_to_c(a), s, ok);
    *fix |= !ok;
    return bq_from_c(v);
  }
  return bq_from_c(bq_div(bq_to_c(a), s.s));
#elif BQ_OP == BQ_OP_DEQUANTIZE
  return bq_from_c(bq_mul(bq_to_c(a), s.s));
#else
  return bq_in_range(bq_to_c(b), s, z) ? a : (bq_out)0;
#endif
}

// The parameter row of data row r: r itself, per block r / B (B = p.group)
static __device__ __forceinline__ bq_i64 bq_prow(const bq_affine_params &p, bq_i64 r) {
#if BQ_GRAN == BQ_GRAN_BLOCK
  return p.fast32 ? (bq_i64)bq_div_u32((bq_u32)r, p.fd_group) : bq_div64(r, p.group);
#else
  (void)p;
  return r;
#endif
}

// Where an element's scale and zero point come from: per tensor, the parameters; per
// token, the row; per channel and per group, an index that walks along the row. `at`
// positions the walker on element k of row r (one division per access, none per
// element), `next` steps it by one element.
struct bq_qparams {
  bq_i64 base, g, rem;
  bq_scale s;
  int zp;
  bq_zp z;
  bq_mask_iv m; // BQ_MASK_IV: the STE mask as an interval
};
// Quantize backward from 16-bit data, per tensor and per token, where a scale serves many
// accesses: the STE mask prepared as an interval (bq_mask_iv_of). (Fake quantize backward,
// whose elements cost less, is no faster with it, and its small tensors are slower.)
#define BQ_MASK_IV (BQ_BWD && BQ_OP == BQ_OP_QUANTIZE && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16) && \
                    (BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_TOKEN))
static __device__ __forceinline__ void bq_qp_load(bq_qparams &q, const bq_affine_params &p) {
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
  bq_i64 i = bq_pat(q.base, q.g, p.grs);
  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + i)));
  q.zp = p.zps ? __ldg((const int *)p.zps + i) : 0;
  q.z = bq_zp_of(q.zp);
#endif
}
static __device__ __forceinline__ void bq_qp_at(bq_qparams &q, const bq_affine_params &p, bq_i64 r,
                                                bq_i64 k) {
#if BQ_GRAN == BQ_GRAN_TENSOR
  q.s = bq_scale_of((bq_c)p.scale);
  q.zp = p.zp;
  q.z = bq_zp_of(q.zp);
#elif BQ_GRAN == BQ_GRAN_TOKEN
  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + r)));
  q.zp = p.zps ? __ldg((const int *)p.zps + r) : 0;
  q.z = bq_zp_of(q.zp);
#endif
  q.m = bq_mask_none();
#if BQ_GRAN != BQ_GRAN_TENSOR && BQ_GRAN != BQ_GRAN_TOKEN
  bq_i64 g = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)k, p.fd_group) : bq_div64(k, p.group);
  q.rem = k - g * p.group;
#if BQ_GRAN == BQ_GRAN_CHANNEL
  const bq_i64 m = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)g, p.fd_gmod) : bq_div64(g, p.gmod);
  g -= m * p.gmod;
  q.base = 0;
#else
  q.base = bq_pbase(bq_prow(p, r), p.grs);
#endif
  q.g = g;
  bq_qp_load(q, p);
#endif
}
// The tensor's or a token's parameters for the row kernel's vector loop, with the STE
// mask's interval where quantize backward takes it (BQ_MASK_IV)
static __device__ __forceinline__ void bq_qp_row(bq_qparams &q, const bq_affine_params &p, bq_i64 r) {
  bq_qp_at(q, p, r, 0);
#if BQ_MASK_IV
  q.m = bq_mask_iv_of(q.s, q.z);
#endif
}
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
// The next parameter block's scale and zero point (per channel, the channel after the last
// is the first)
static __device__ __forceinline__ void bq_qp_next_block(bq_qparams &q, const bq_affine_params &p) {
  ++q.g;
#if BQ_GRAN == BQ_GRAN_CHANNEL
  if (q.g == p.gmod) q.g = 0;
#endif
  bq_qp_load(q, p);
}
#endif
static __device__ __forceinline__ void bq_qp_next(bq_qparams &q, const bq_affine_params &p) {
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
  if (++q.rem == p.group) {
    q.rem = 0;
    bq_qp_next_block(q, p);
  }
#endif
}

// One element, for prologues and tails: out of line, so its code exists once. (Its
// arguments are plain values: a reference to the parameter block would copy it to
// local memory in every thread.)
static __device__ __noinline__ void bq_one(bq_i64 k, bq_c sc, int zp, const bq_in0 *in0,
                                           const bq_in1 *in1, bq_out *out) {
  const bq_zp z = bq_zp_of(zp);
  const bq_scale s = bq_scale_of(sc);
#if BQ_HAS_IN1
  out[k] = bq_apply(in0[k], in1[k], s, z, nullptr);
#else
  out[k] = bq_apply(in0[k], (bq_in1)0, s, z, nullptr);
#endif
}

// An access: P elements (BQ_P, 16 bytes of the widest stream; bq_affine_narrow's 1)
template <typename E, int P = BQ_P> struct alignas(sizeof(E) * P) bq_piece {
  E e[P];
};

#if BQ_HAS_IN1
#define BQ_B(u) b[u]
#else
#define BQ_B(u) bq_piece<bq_in1, (int)(sizeof(a[u].e) / sizeof(a[u].e[0]))>() // a[u]'s P
#endif

// P values in C rounded to the output type: two at a time where it has 16 bits (one packed
// conversion, the same rounding as two)
template <int P> static __device__ __forceinline__ void bq_round_piece(const float (&v)[P], bq_out (&y)[P]) {
#if !defined(BQ_EMULATED) && (BQ_FT == BQ_TYPE_BF16 || BQ_FT == BQ_TYPE_F16)
  if (P % 2 == 0) {
#pragma unroll
    for (int j = 0; j + 1 < P; j += 2) {
      bq_u32 w; // the first source goes to the upper half
#if BQ_FT == BQ_TYPE_BF16
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(v[j + 1]), "f"(v[j]));
#else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(v[j + 1]), "f"(v[j]));
#endif
      y[j] = (bq_out)(w & 0xffffu);
      y[j + 1] = (bq_out)(w >> 16);
    }
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < P; j++) y[j] = bq_from_c(v[j]);
}

// One access's BQ_P elements through bq_apply's fast forms; *fix is raised where an element
// needs the general formulas. NEAR: quantize forward may take bq_quantize_near where the
// scale and zero point allow (the usual case). That form pays per tensor, per token and in
// the 16-bit slot kernels; the f32 slot kernels and the odd-shape one keep bq_apply, where
// its registers cost more than it saves (the odd-shape kernel would spill). Quantize
// backward, NEAR, divides from the prepared scale; IV (BQ_MASK_IV's kernels): its mask is
// the interval m, else (a scale that is not plain, m.ok false) the general formulas.
template <bool NEAR, int P = BQ_P, bool IV = false>
static __device__ __forceinline__ void bq_apply_piece(const bq_piece<bq_in0, P> &a, const bq_piece<bq_in1, P> &b,
                                                      const bq_scale &s, const bq_zp &z, bq_piece<bq_out, P> &y,
                                                      bool *fix, const bq_mask_iv &m = bq_mask_none()) {
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64
  if (NEAR && s.plain && z.near) {
    bq_quantize_near<true>(a.e, s, z.zp, y.e);
    return;
  }
#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64
  if (NEAR && s.plain && (!IV || m.ok)) { // quantize backward: the mask and the division from the
    bool ok = true;                          // prepared scale
    if (IV) { // the mask an interval; masked quotients selected, then rounded
      float v[P];
#pragma unroll
      for (int j = 0; j < P; j++) {
        const float q = bq_div_near(bq_to_c(a.e[j]), s, ok), x = bq_to_c(b.e[j]);
        v[j] = (x >= m.lo) & (x <= m.hi) ? q : 0.0f; // (0 rounds to the +0 of (bq_out)0)
      }
      bq_round_piece(v, y.e);
    } else {
#pragma unroll
      for (int j = 0; j < P; j++) {
        const bq_c v = bq_div_near(bq_to_c(a.e[j]), s, ok);
        y.e[j] = bq_in_range_near(bq_to_c(b.e[j]), s, z) ? bq_from_c(v) : (bq_out)0;
      }
    }
    if (ok) return; // else the general formulas below
  }
#else
  (void)m;
#endif
#pragma unroll
  for (int j = 0; j < P; j++) y.e[j] = bq_apply(a.e[j], b.e[j], s, z, fix);
}

#if BQ_GRAN != BQ_GRAN_TENSOR
// The parameter block of element k of a row (of the flat tensor, in bq_affine_flat): its
// group (per group), its run of p.group elements of one channel (per channel; the
// channel is the block modulo p.gmod), or its row (per token in bq_affine_flat, where the
// host sets p.group to the row length).
static __device__ __forceinline__ bq_i64 bq_blk(const bq_affine_params &p, bq_i64 k) {
  return p.fast32 ? (bq_i64)bq_div_u32((bq_u32)k, p.fd_group) : bq_div64(k, p.group);
}
#endif
#if BQ_GRAN != BQ_GRAN_TENSOR
// A block's scale and zero point, prepared: what a warp shares through shared memory. (Per
// token, bq_affine_blocks' one block a row.)
struct bq_prep {
  bq_scale s;
  bq_zp z;
};
static __device__ __forceinline__ bq_prep bq_prep_of(const bq_affine_params &p, bq_i64 r, bq_i64 b) {
#if BQ_GRAN == BQ_GRAN_CHANNEL
  const bq_i64 i = b - (p.fast32 ? (bq_i64)bq_div_u32((bq_u32)b, p.fd_gmod) : bq_div64(b, p.gmod)) * p.gmod;
#elif BQ_GRAN == BQ_GRAN_TOKEN
  const bq_i64 i = r + b; // b == 0
#else
  const bq_i64 i = bq_pat(bq_pbase(bq_prow(p, r), p.grs), b, p.grs);
#endif
  bq_prep q;
  q.s = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + i)));
  q.z = bq_zp_of(p.zps ? __ldg((const int *)p.zps + i) : 0);
  return q;
}
#endif

// The lead stream's prologue over n elements (its elements before the 16-byte grid) and
// each stream's access width after it. (The row kernels' rows; bq_affine_flat's tensor.)
static __device__ __forceinline__ void bq_stream_widths(const bq_in0 *in0, const bq_in1 *in1, bq_out *out,
                                                        bq_i64 n, bq_i64 &pro, int &w_in0, int &w_in1,
                                                        int &w_out) {
#if BQ_OUT_LEADS
  pro = bq_prologue(out, n);
  w_in0 = bq_width(in0 + pro), w_out = 16;
#else
  pro = bq_prologue(in0, n);
  w_in0 = 16, w_out = bq_width(out + pro);
#endif
#if BQ_HAS_IN1
  w_in1 = bq_width(in1 + pro);
#else
  (void)in1;
  w_in1 = 16;
#endif
}

// ---- the row kernels, bq_affine and bq_affine_odd, piece by piece ---------------------------
// A warp takes items (bq_item_of), loads a tile's accesses (bq_tile_load), computes and
// stores them with their parameters looked up (bq_lookup_prep, bq_lookup_tile) or prepared in
// shared memory (the slot kernels: bq_item_slots, bq_slot_tile), redoes the accesses those
// marked (bq_tile_redo) and, once a row, its prologue and tail (bq_row_ends).

// The accesses marked in redo, element by element with the general formulas. Rare, and out
// of the vector loop so that it costs no registers there: accesses over blocks shorter than
// an access (each element takes its own scale), dequantize's accesses that straddle a block
// boundary, per-channel or per-group quantize with a zero point that leaves no int32 room,
// and, in f64 quantize backward, accesses with a quotient outside the fast division's range.
// The slot kernels load an access's elements together (BQ_RL), so that it waits for memory
// once; the others one by one, which keeps the registers of their vector loop (and their
// occupancy) as they are.
static __device__ __forceinline__ void bq_tile_redo(const bq_affine_params &p, bq_i64 r, const bq_in0 *in0,
                                                    const bq_in1 *in1, bq_out *out, bq_i64 pro, bq_i64 a0,
                                                    unsigned redo) {
#pragma unroll 1
  for (int u = 0; u < BQ_U; u++) {
    if (!(redo >> u & 1)) continue;
    const bq_i64 k0 = pro + (a0 + u * 32) * BQ_P;
    bq_qparams q;
    bq_qp_at(q, p, r, k0);
#pragma unroll 1
    for (int j0 = 0; j0 < BQ_P; j0 += BQ_RL) {
      bq_in0 x0[BQ_RL];
      bq_in1 x1[BQ_RL];
#pragma unroll
      for (int j = 0; j < BQ_RL; j++) {
        x0[j] = in0[k0 + j0 + j];
        x1[j] = BQ_HAS_IN1 ? in1[k0 + j0 + j] : (bq_in1)0;
      }
#pragma unroll
      for (int j = 0; j < BQ_RL; j++) {
        out[k0 + j0 + j] = bq_apply(x0[j], x1[j], q.s, q.z, nullptr);
        if (j0 + j + 1 < BQ_P) bq_qp_next(q, p);
      }
    }
  }
}

// A row's prologue and tail: fewer than 16 + BQ_P <= 32 elements, one a lane
static __device__ __forceinline__ void bq_row_ends(const bq_affine_params &p, bq_i64 r, const bq_in0 *in0,
                                                   const bq_in1 *in1, bq_out *out, bq_i64 cols, bq_i64 pro,
                                                   bq_i64 nacc, int lane) {
  const bq_i64 tail0 = pro + nacc * BQ_P;
  const bq_i64 k = lane < pro ? lane : tail0 + (lane - pro);
  if (k < cols) {
    bq_qparams q;
    bq_qp_at(q, p, r, k);
    bq_one(k, q.s.s, q.zp, in0, in1, out);
  }
}

#if !BQ_SLOTS
// Per channel and per group, the lookup kernels' parameters of each access of a tile; an
// access that straddles a block boundary is marked in redo unless bq_affine_odd (TWO)
// computes it with both blocks' parameters (blocks at least an access long).
template <bool TWO>
static __device__ __forceinline__ void bq_lookup_prep(const bq_affine_params &p, bq_i64 r, bq_i64 pro, bq_i64 nacc,
                                                      bq_i64 a0, bq_qparams (&qs)[BQ_U], unsigned &redo) {
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
#pragma unroll
  for (int u = 0; u < BQ_U; u++) {
    if (a0 + u * 32 >= nacc) continue;
    bq_qp_at(qs[u], p, r, pro + (a0 + u * 32) * BQ_P);
    if (qs[u].rem + BQ_P > p.group && (!TWO || p.group < BQ_P)) redo |= 1u << u;
  }
#endif
}

// A tile of the row kernels without slots: each access takes its scale and zero point from
// qt (per tensor, per token) or looks them up (per channel and per group: dequantize, and
// backward but f64). An access that straddles a block boundary is marked in redo, or, in
// bq_affine_odd (TWO) where blocks are at least an access long, computed with both blocks'
// parameters.
template <bool TWO>
static __device__ __forceinline__ void bq_lookup_tile(const bq_affine_params &p, bq_i64 r,
                                                      const bq_piece<bq_in0> (&a)[BQ_U],
                                                      const bq_piece<bq_in1> (&b)[BQ_U], bq_out *out, bq_i64 pro,
                                                      bq_i64 nacc, int w_out, bq_i64 a0, const bq_qparams &qt,
                                                      const bq_qparams (&qs)[BQ_U], unsigned &redo) {
#pragma unroll
  for (int u = 0; u < BQ_U; u++) {
    const bq_i64 acc = a0 + u * 32;
    if (acc < nacc && !(redo >> u & 1)) {
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
      const bq_qparams &q = qs[u];
#else
      const bq_qparams &q = qt;
#endif
      bq_piece<bq_out> y;
      bool fix = false;
      bq_apply_piece<true, BQ_P, BQ_MASK_IV>(a[u], BQ_B(u), q.s, q.z, y, &fix, q.m);
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
      if (TWO && q.rem + BQ_P > p.group) { // from element cut on, the next block's parameters
        bq_qparams q2 = q;
        bq_qp_next_block(q2, p);
        bq_piece<bq_out> y2;
        bq_apply_piece<true>(a[u], BQ_B(u), q2.s, q2.z, y2, &fix);
        const int cut = (int)(p.group - q.rem);
#pragma unroll
        for (int j = 1; j < BQ_P; j++)
          if (j >= cut) y.e[j] = y2.e[j];
      }
#endif
      bq_store(out + pro + acc * BQ_P, y, w_out);
      if (fix) redo |= 1u << u;
    }
  }
}
#endif

#if BQ_SLOTS
// Access u (a, b) of a tile of the slot kernels with its block's prepared parameters, q[0]
// (and, where it straddles in bq_affine_odd, the next block's, q[1], for its elements from
// cut on), stored at yp; an access these forms do not cover is marked in redo instead.
template <bool TWO>
static __device__ __forceinline__ void bq_slot_access(const bq_piece<bq_in0> &a, const bq_piece<bq_in1> &b,
                                                      const bq_prep *q, int cut, bq_out *yp, int w_out, int u,
                                                      unsigned &redo) {
  const bq_prep &qa = q[0];
  const bool two = cut < BQ_P;
  if (!TWO && two) {
    redo |= 1u << u;
    return;
  }
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
  if (!qa.z.iok || (two && !q[1].z.iok)) { // a zero point within the q-range's width of an
    redo |= 1u << u;                       // int32 limit
    return;
  }
#endif
  bq_piece<bq_out> y;
  bool fix = false;
  bq_apply_piece<!TWO && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)>(a, b, qa.s, qa.z, y, &fix);
  if (TWO && two) {
    const bq_prep &qb = q[1];
    bq_piece<bq_out> y2;
    bq_apply_piece<false>(a, b, qb.s, qb.z, y2, &fix);
#pragma unroll
    for (int j = 1; j < BQ_P; j++)
      if (j >= cut) y.e[j] = y2.e[j];
  }
  bq_store(yp, y, w_out);
  if (fix) redo |= 1u << u;
}

// An item whose tiles touch at most 32 parameter blocks prepares them once, into the warp's
// slots, and its tiles skip their rounds: they no longer wait for their scales' loads
// (BQ_ITEM_SLOTS). Returns how many (the blocks iblk0 onwards), or 0: each tile prepares
// its own.
static __device__ __forceinline__ int bq_item_slots(const bq_affine_params &p, bq_i64 r, bq_i64 pro, bq_i64 nacc,
                                                    bq_i64 t0, bq_i64 t1, int lane, bq_prep *slots, bq_i64 &iblk0) {
  int inblk = 0;
#if BQ_ITEM_SLOTS
  __syncwarp(); // the previous item is done with the slots
  if (p.group >= BQ_P) {
    const bq_i64 e0 = pro + t0 * BQ_TILE * BQ_P, ne = (t1 * BQ_TILE < nacc ? t1 * BQ_TILE : nacc) - t0 * BQ_TILE;
    if (ne > 0) {
      iblk0 = bq_blk(p, e0);
      const bq_i64 n = bq_blk(p, e0 + ne * BQ_P - 1) - iblk0 + 1;
      if (n <= 32) {
        inblk = (int)n;
        if (lane < inblk) slots[lane] = bq_prep_of(p, r, iblk0 + lane);
        __syncwarp();
      }
    }
  }
#endif
  return inblk;
}

// The parameter blocks tile t touches (groups; per channel, runs of p.group elements of one
// channel) are consecutive: nblk of them (returned), blk0 onwards. For each access, slot[u]
// is its first block (from blk0) and cut[u] its elements before the next block (fewer than
// BQ_P: the access straddles). Blocks shorter than an access: every access is marked in redo.
static __device__ __forceinline__ bq_i64 bq_slot_span(const bq_affine_params &p, bq_i64 t, bq_i64 a0, bq_i64 iblk0,
                                                      int inblk, bq_i64 pro, bq_i64 nacc, bq_i64 &blk0,
                                                      int (&slot)[BQ_U], int (&cut)[BQ_U], unsigned &redo) {
  bq_i64 nblk = 0;
  blk0 = 0;
  if (inblk) {
    blk0 = iblk0;
    nblk = inblk;
  } else if (p.group >= BQ_P) {
    const bq_i64 e0 = pro + t * BQ_TILE * BQ_P, nt = nacc - t * BQ_TILE;
    blk0 = bq_blk(p, e0);
    nblk = bq_blk(p, e0 + (nt < BQ_TILE ? nt : BQ_TILE) * BQ_P - 1) - blk0 + 1;
#if BQ_GRAN == BQ_GRAN_BLOCK
    if (nt <= 0) nblk = 0; // a row shorter than an access from an aligned start (B may exceed the row)
#endif
  } else {
#pragma unroll
    for (int u = 0; u < BQ_U; u++)
      if (a0 + u * 32 < nacc) redo |= 1u << u;
  }
#pragma unroll
  for (int u = 0; u < BQ_U; u++) {
    const bq_i64 k0 = pro + (a0 + u * 32) * BQ_P, b = bq_blk(p, k0);
    slot[u] = (int)(b - blk0);
    cut[u] = (int)(p.group - (k0 - b * p.group));
  }
  return nblk;
}

// A tile of the slot kernels. Its blocks' scales and zero points are prepared once each, a
// block a lane, into the warp's 32 slots in shared memory, a round at a time (one round where
// the item prepared them); each access then reads its block's slot, and one that straddles
// two blocks the next one too. Rounds step by 31 blocks, so that the block after a
// straddling access is in the same round.
template <bool TWO>
static __device__ __forceinline__ void bq_slot_tile(const bq_affine_params &p, bq_i64 r, bq_i64 t, bq_i64 a0,
                                                    int lane, const bq_piece<bq_in0> (&a)[BQ_U],
                                                    const bq_piece<bq_in1> (&b)[BQ_U], bq_prep *slots,
                                                    bq_i64 iblk0, int inblk, bq_out *out, bq_i64 pro, bq_i64 nacc,
                                                    int w_out, unsigned &redo) {
  int slot[BQ_U], cut[BQ_U];
  bq_i64 blk0;
  const bq_i64 nblk = bq_slot_span(p, t, a0, iblk0, inblk, pro, nacc, blk0, slot, cut, redo);
  for (bq_i64 s0 = 0; s0 < nblk; s0 += inblk ? 32 : 31) { // uniform across the warp
    if (!inblk) {
      if (s0 + lane < nblk) slots[lane] = bq_prep_of(p, r, blk0 + s0 + lane);
      __syncwarp();
    }
    const int last = s0 + 32 >= nblk; // no access of this round's last block straddles
#pragma unroll
    for (int u = 0; u < BQ_U; u++) {
      const bq_i64 acc = a0 + u * 32;
      const int d = slot[u] - (int)s0;
      if (acc < nacc && !(redo >> u & 1) && d >= 0 && (d < 31 || (d == 31 && last)))
        bq_slot_access<TWO>(a[u], BQ_B(u), slots + d, cut[u], out + pro + acc * BQ_P, w_out, u, redo);
    }
    if (!inblk) __syncwarp(); // every lane has read the slots before the next round writes them
  }
}

#endif

// A lane's accesses a0, a0 + 32, ... of a tile of a row, each stream's loaded before any
// is computed
static __device__ __forceinline__ void bq_tile_load(const bq_in0 *in0, const bq_in1 *in1, bq_i64 pro, bq_i64 nacc,
                                                    int w_in0, int w_in1, bq_i64 a0, bq_piece<bq_in0> (&a)[BQ_U],
                                                    bq_piece<bq_in1> (&b)[BQ_U]) {
#pragma unroll
  for (int u = 0; u < BQ_U; u++) {
    const bq_i64 acc = a0 + u * 32;
    if (acc < nacc) {
      bq_load(a[u], in0 + pro + acc * BQ_P, w_in0);
#if BQ_HAS_IN1
      bq_load(b[u], in1 + pro + acc * BQ_P, w_in1);
#else
      (void)in1, (void)w_in1, (void)b;
#endif
    }
  }
}

// A warp's item w: tiles [t0, t1) of row r, p.chunks items a row (per tensor and per
// channel, one dense row), of p.tpw tiles each (BQ_ITEMS) or of one.
static __device__ __forceinline__ void bq_item_of(const bq_affine_params &p, bq_i64 w, bq_i64 &r, bq_i64 &t0,
                                                  bq_i64 &t1) {
  bq_i64 c; // the item's place in its row
#if BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_CHANNEL
  r = 0, c = w; // one dense row
#else
  if (p.chunks == 1) {
    r = w;
    c = 0;
  } else {
    r = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)w, p.fd_chunks) : bq_div64(w, p.chunks);
    c = w - r * p.chunks;
  }
#endif
#if BQ_ITEMS
  t0 = c * p.tpw, t1 = t0 + p.tpw < p.tiles ? t0 + p.tpw : p.tiles;
#else
  t0 = c, t1 = c + 1; // (p.tpw == 1)
#endif
}

// The row kernel's body. TWO: accesses that straddle two parameter blocks are computed in
// registers with both blocks' parameters; otherwise they are redone element by element.
// The host takes the TWO form (bq_affine_odd) where accesses can straddle (a block length
// that is not a multiple of BQ_P, or rows that start unaligned), since its extra registers
// cost the aligned shapes a quarter of their warps.
template <bool TWO> static __device__ __forceinline__ void bq_affine_body(const bq_affine_params &p) {
  const int lane = threadIdx.x & 31;
#if BQ_SLOTS
  __shared__ bq_prep bq_slots[8][32]; // a warp's prepared parameter blocks
#endif
#if BQ_GRAN == BQ_GRAN_TENSOR
  bq_qparams qt; // per tensor: prepared once per thread, not per tile
  bq_qp_row(qt, p, 0);
#endif
  const bq_i64 work = p.rows * p.chunks;
  for (bq_i64 w = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < work;
       w += ((bq_i64)gridDim.x * blockDim.x) >> 5) {
    bq_i64 r, t0, t1;
    bq_item_of(p, w, r, t0, t1);
    const bq_in0 *in0 = (const bq_in0 *)p.in0 + r * p.in0_stride;
    const bq_in1 *in1 = (const bq_in1 *)p.in1 + r * p.in1_stride;
    bq_out *out = (bq_out *)p.out + r * p.out_stride;
    const bq_i64 cols = p.cols;
    bq_i64 pro;
    int w_in0, w_in1, w_out;
    bq_stream_widths(in0, in1, out, cols, pro, w_in0, w_in1, w_out);
    const bq_i64 nacc = (cols - pro) / BQ_P;
#if BQ_GRAN == BQ_GRAN_TOKEN
    bq_qparams qt; // per token: once per item, loaded after its first tile's data
#endif
#if BQ_SLOTS
    bq_prep *slots = bq_slots[threadIdx.x >> 5];
    bq_i64 iblk0 = 0;
    const int inblk = bq_item_slots(p, r, pro, nacc, t0, t1, lane, slots, iblk0);
#endif
#pragma unroll 1
    for (bq_i64 t = t0; t < t1; t++) {
      const bq_i64 a0 = t * BQ_TILE + lane;
      bq_piece<bq_in0> a[BQ_U];
      bq_piece<bq_in1> b[BQ_U]; // (unused where BQ_HAS_IN1 is 0)
      bq_tile_load(in0, in1, pro, nacc, w_in0, w_in1, a0, a, b);
      unsigned redo = 0; // bit u: access u is redone element by element below
#if BQ_GRAN == BQ_GRAN_TOKEN
      if (t == t0) bq_qp_row(qt, p, r);
#endif
#if BQ_SLOTS
      bq_slot_tile<TWO>(p, r, t, a0, lane, a, b, slots, iblk0, inblk, out, pro, nacc, w_out, redo);
#else
      bq_qparams qs[BQ_U]; // per channel and per group: each access's parameters
      bq_lookup_prep<TWO>(p, r, pro, nacc, a0, qs, redo);
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
      const bq_qparams &qt = qs[0]; // (unread: each access has its own)
#endif
      bq_lookup_tile<TWO>(p, r, a, b, out, pro, nacc, w_out, a0, qt, qs, redo);
#endif
      if (redo) bq_tile_redo(p, r, in0, in1, out, pro, a0, redo);
    }
    if (t0 == 0) bq_row_ends(p, r, in0, in1, out, cols, pro, nacc, lane);
  }
}

#if BQ_E_AFFINE
extern "C" __global__ void BQ_LB_ROW BQ_FN_AFFINE(const bq_affine_params p) { bq_affine_body<false>(p); }
#endif
#if BQ_GRAN == BQ_GRAN_CHANNEL || BQ_GROUPED
#if BQ_E_AFFINE_ODD
extern "C" __global__ void BQ_LB_ODD BQ_FN_AFFINE_ODD(const bq_affine_params p) { bq_affine_body<true>(p); }
#endif
#endif

#if BQ_GRAN != BQ_GRAN_TENSOR
// Per channel and per group (and per token, a block a row) where no access straddles two
// parameter blocks: blocks of p.group elements (a group; per channel, a run of one channel)
// that are a whole number of accesses, with in0 (which leads: x, or dy) 16-byte aligned at
// every row's start (the host checks; p.fast32 holds). A warp's item is 32 / p.gl
// whole blocks of one row, p.gl consecutive lanes a block (p.parts == 1), or, for blocks
// longer than 32 BQ_GA accesses, one of the p.parts parts of one block (p.gl == 32). Lane
// `sub` of a block takes its accesses sub, sub + gl, ... (up to BQ_GA of them), so a warp's
// load instruction reads gl contiguous accesses of each of its blocks, and the lane prepares
// the block's scale and zero point once, in registers, for all of them: no shared memory, no
// barrier, no index arithmetic per access. (The layout of dynamic.cu's bq_groups_fast.)
// BQ_GA comes from the host's prelude: 0 for the ops the host runs on bq_affine instead
// (bq__affine_table's ga says which, and why), where this kernel is empty and never launched.
// Per group, f64 quantize forward is held to 4 blocks an SM: its registers, a few over the
// bound, would otherwise allow one block fewer.
// The body, for accesses of P elements (BQ_P here; bq_affine_narrow's 1), GA a lane.
template <int P, int GA> static __device__ __forceinline__ void bq_blocks_body(const bq_affine_params &p) {
  const int lane = threadIdx.x & 31, gl = p.gl, sub = lane & (gl - 1);
  const bq_u32 bpi = (bq_u32)(32 / gl), lb = (bq_u32)(lane / gl); // blocks an item, the lane's among them
  const bq_u32 gc = (bq_u32)(p.group / P), chunks = (bq_u32)p.chunks; // accesses a block; items a row
  const bq_u32 work = (bq_u32)(p.rows * p.chunks), nw = (gridDim.x * blockDim.x) >> 5;
  for (bq_u32 w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < work; w += nw) {
    const bq_u32 r = chunks == 1 ? w : bq_div_u32(w, p.fd_chunks), j = w - r * chunks;
    bq_u32 blk, a0; // the lane's block in the row, and its first access there
    if (p.parts == 1) {
      blk = j * bpi + lb;
      a0 = (bq_u32)sub;
    } else {
      blk = bq_div_u32(j, p.fd_parts);
      a0 = (j - blk * (bq_u32)p.parts) * (32 * GA) + (bq_u32)lane;
    }
    if (blk >= p.nblk) continue; // the row's last item may hold fewer blocks
    const bq_i64 e0 = (bq_i64)blk * p.group;
    const bq_in0 *in0 = (const bq_in0 *)p.in0 + r * p.in0_stride + e0;
    const bq_in1 *in1 = (const bq_in1 *)p.in1 + r * p.in1_stride + e0;
    bq_out *out = (bq_out *)p.out + r * p.out_stride + e0;
    const int w_in0 = 16, w_out = bq_width(out); // in0 leads (x, or dy)
    bq_piece<bq_in0, P> a[GA];
#if BQ_HAS_IN1
    const int w_in1 = bq_width(in1);
    bq_piece<bq_in1, P> b[GA];
#endif
#pragma unroll
    for (int u = 0; u < GA; u++) {
      const bq_u32 acc = a0 + (bq_u32)(u * gl);
      if (acc < gc) {
        bq_load(a[u], in0 + acc * P, w_in0);
#if BQ_HAS_IN1
        bq_load(b[u], in1 + acc * P, w_in1);
#endif
      }
    }
    const bq_prep q = bq_prep_of(p, r, blk);
    unsigned redo = 0; // bit u: access u takes the general formulas, element by element
#pragma unroll
    for (int u = 0; u < GA; u++) {
      const bq_u32 acc = a0 + (bq_u32)(u * gl);
      if (acc >= gc) continue;
      bool fix = false;
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
      fix = !q.z.iok; // a zero point within the q-range's width of an int32 limit
#endif
      bq_piece<bq_out, P> y;
      if (!fix) bq_apply_piece<true, P>(a[u], BQ_B(u), q.s, q.z, y, &fix);
      if (fix) redo |= 1u << u;
      else bq_store(out + acc * P, y, w_out);
    }
    if (redo) { // rare, and out of the vector loop
#pragma unroll 1
      for (int u = 0; u < GA; u++)
        if (redo >> u & 1)
#pragma unroll 1
          for (int e = 0; e < P; e++)
            bq_one((bq_i64)(a0 + (bq_u32)(u * gl)) * P + e, q.s.s, q.z.zp, in0, in1, out);
    }
  }
}
#if BQ_E_AFFINE_BLOCKS
extern "C" __global__ void BQ_LB_BLOCKS BQ_FN_AFFINE_BLOCKS(const bq_affine_params p) {
#if BQ_GA
  bq_blocks_body<BQ_P, BQ_GA>(p);
#endif
}
#endif

// f64 quantize, per channel, per group and per token (a block a row): bq_affine_blocks'
// layout with accesses of one element (8 bytes), BQ_NA a lane (the host's prelude: 0 in
// the specializations where the host never launches it, and the kernel is empty). An
// access never straddles two blocks, whatever G or the row length, and a warp's load
// instruction still reads gl contiguous elements of each of its blocks (a whole 32-byte
// sector for every 4 lanes); each lane prepares its block's reciprocal once for all of its
// elements. The host (bq__affine_narrow) says where it replaced which kernel, and why.
#if BQ_E_AFFINE_NARROW
extern "C" __global__ void BQ_LB_NARROW BQ_FN_AFFINE_NARROW(const bq_affine_params p) {
#if BQ_NA
  bq_blocks_body<1, BQ_NA>(p);
#endif
}
#endif
#endif

#if BQ_GRAN == BQ_GRAN_TOKEN || BQ_GRAN == BQ_GRAN_GROUP
// Per group over contiguous data: every row stride the row length and the parameter rows
// dense, so the tensor is one flat array whose element e belongs to group e / G and the row
// boundaries (and their prologues) disappear. Per token the same with G the row length, on
// contiguous rows off the 16-byte grid (rows of 4095). The host takes it where accesses straddle
// groups (G not a whole number of accesses, or rows off the 16-byte grid: G = 105 on rows
// of 4095), and for dequantize and fake quantize backward also where none does. A warp's
// tile is 32 x BQ_FR accesses, coalesced as in the row kernels (lane + 32 u); the host
// bounds G from below so that a tile touches at most 32 groups. Each lane prepares one of
// them into the warp's shared-memory slots, and every element takes its access's first
// group's parameters before `cut` and the next group's from there, by a select: no access
// is computed twice (bq_affine_odd computes a straddling access with both groups), and a
// group's reciprocal is prepared once a tile. Where a group of the tile rules out the fast
// forms, the tile takes bq_apply's (bq_flat_near), and where it rules out those too, its
// elements are redone one by one (bq_flat_ok). BQ_FR comes from the
// host's prelude: 0 for the ops it never launches this kernel for (bq__affine_table's fr says which,
// and why).

// A prepared scale and zero point taken from a or b, field by field, so that both stay in
// registers (the compiler keeps only the fields the element's formula reads).
static __device__ __forceinline__ bq_scale bq_scale_sel(bool first, const bq_scale &a, const bq_scale &b) {
  bq_scale q;
  q.s = first ? a.s : b.s;
  q.ss = first ? a.ss : b.ss;
  q.rcp = first ? a.rcp : b.rcp;
  q.m = first ? a.m : b.m;
  q.corr = first ? a.corr : b.corr;
  q.plain = first ? a.plain : b.plain;
#if BQ_FT != BQ_TYPE_F64
  q.dlo = first ? a.dlo : b.dlo;
  q.dhi = first ? a.dhi : b.dhi;
#endif
  return q;
}
static __device__ __forceinline__ bq_zp bq_zp_sel(bool first, const bq_zp &a, const bq_zp &b) {
  bq_zp z;
  z.lo = first ? a.lo : b.lo;
  z.hi = first ? a.hi : b.hi;
  z.a = first ? a.a : b.a;
  z.b = first ? a.b : b.b;
  z.zp_hi = first ? a.zp_hi : b.zp_hi;
  z.base = first ? a.base : b.base;
  z.zp_lo = first ? a.zp_lo : b.zp_lo;
  z.ia = first ? a.ia : b.ia;
  z.ib = first ? a.ib : b.ib;
  z.zp = first ? a.zp : b.zp;
  z.iok = first ? a.iok : b.iok;
  z.near = first ? a.near : b.near;
  return z;
}

// The same for the fast forms, whose scales are plain (m == 1): there ss == s, so one select
// serves both
static __device__ __forceinline__ bq_scale bq_scale_sel_plain(bool first, const bq_scale &a, const bq_scale &b) {
  bq_scale q = bq_scale_sel(first, a, b);
  q.ss = q.s;
  return q;
}

// One access: its elements before `cut` take A's parameters, the others B's. NEAR: the fast
// forms (quantize with f32 compute, as bq_apply_piece's; fake quantize forward), which the
// caller has checked apply to both groups; *fix rises where an element needs the general
// formulas.
template <bool NEAR>
static __device__ __forceinline__ void bq_flat_piece(const bq_piece<bq_in0> &a, const bq_piece<bq_in1> &b,
                                                     const bq_prep &A, const bq_prep &B, int cut,
                                                     bq_piece<bq_out> &y, bool *fix) {
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64
  if constexpr (NEAR) {
    int t[BQ_P];
#pragma unroll
    for (int j = 0; j < BQ_P; j++) {
      const bool f = j < cut;
      t[j] = bq_near_elem<true>(bq_to_c(a.e[j]), bq_scale_sel_plain(f, A.s, B.s), f ? A.z.zp : B.z.zp);
    }
#pragma unroll
    for (int j = 0; j < BQ_P; j += 4) *(bq_u32 *)&y.e[j] = bq_pack4(t[j], t[j + 1], t[j + 2], t[j + 3]);
  } else
#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64
  if constexpr (NEAR) {
    // bq_div_near's window for both groups: their intersection (an element outside it takes
    // the general formulas, exact either way; only |dy| beyond |s| 2^+-96 leaves it)
    const float dlo = fmaxf(A.s.dlo, B.s.dlo), dhi = fminf(A.s.dhi, B.s.dhi);
    bool ok = true;
#pragma unroll
    for (int j = 0; j < BQ_P; j++) {
      const bool f = j < cut;
      bq_scale s = bq_scale_sel_plain(f, A.s, B.s);
      s.dlo = dlo;
      s.dhi = dhi;
      const bq_c v = bq_div_near(bq_to_c(a.e[j]), s, ok);
      y.e[j] = bq_in_range_near(bq_to_c(b.e[j]), s, bq_zp_sel(f, A.z, B.z)) ? bq_from_c(v) : (bq_out)0;
    }
    *fix |= !ok;
  } else
#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD
  if constexpr (NEAR) {
#pragma unroll
    for (int j = 0; j < BQ_P; j++) {
      const bool f = j < cut;
      y.e[j] = bq_from_c(bq_fake_quantize_near(bq_to_c(a.e[j]), bq_scale_sel_plain(f, A.s, B.s), bq_zp_sel(f, A.z, B.z)));
    }
  } else
#endif
#pragma unroll
    for (int j = 0; j < BQ_P; j++) {
      const bool f = j < cut;
      y.e[j] = bq_apply(a.e[j], b.e[j], bq_scale_sel(f, A.s, B.s), bq_zp_sel(f, A.z, B.z), fix);
    }
}

// Whether a group's parameters allow bq_flat_piece's fast forms (NEAR): bq_quantize_near's
// condition for quantize forward, a plain scale for quantize backward (both f32 compute),
// bq_fake_quantize_near's for fake quantize forward (f64 quantize backward is slower with a
// fast form, so it has none);
static __device__ __forceinline__ bool bq_flat_near(const bq_prep &q) {
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD && BQ_FT != BQ_TYPE_F64
  return q.s.plain && q.z.near;
#elif BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64
  return q.s.plain;
#elif BQ_OP == BQ_OP_FAKE_QUANTIZE && !BQ_BWD
  return q.s.plain && q.z.lo == q.z.a && q.z.hi == q.z.b;
#else
  return false;
#endif
}
// and whether they allow bq_apply's forms at all (quantize's integer form needs z.iok).
static __device__ __forceinline__ bool bq_flat_ok(const bq_prep &q) {
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
  return q.z.iok;
#else
  return true;
#endif
}

#if BQ_FR
// bq_affine_flat's accesses marked in redo (rare), with the general formulas, element by
// element; the tile's groups are in the slots, g0 onwards
static __device__ __forceinline__ void bq_flat_redo(const bq_affine_params &p, const bq_prep *slots, bq_i64 g0,
                                                    const bq_in0 *in0, const bq_in1 *in1, bq_out *out, bq_i64 pro,
                                                    bq_i64 nacc, bq_i64 a0, unsigned redo) {
#pragma unroll 1
  for (int u = 0; u < BQ_FR; u++)
    if ((redo >> u & 1) && a0 + u * 32 < nacc)
#pragma unroll 1
      for (int j = 0; j < BQ_P; j++) {
        const bq_i64 k = pro + (a0 + u * 32) * BQ_P + j;
        const bq_prep q = slots[bq_blk(p, k) - g0];
        bq_one(k, q.s.s, q.z.zp, in0, in1, out);
      }
}

// bq_affine_flat's prologue and tail: fewer than 2 BQ_P elements, one a thread
static __device__ __forceinline__ void bq_flat_ends(const bq_affine_params &p, const bq_in0 *in0, const bq_in1 *in1,
                                                    bq_out *out, bq_i64 n, bq_i64 pro, bq_i64 nacc) {
  const bq_i64 tid = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x, tail0 = pro + nacc * BQ_P;
  if (tid < pro + (n - tail0)) {
    const bq_i64 k = tid < pro ? tid : tail0 + (tid - pro);
    const bq_prep q = bq_prep_of(p, 0, bq_blk(p, k));
    bq_one(k, q.s.s, q.z.zp, in0, in1, out);
  }
}
#endif

#define BQ_FL (BQ_FR ? BQ_FR : 1) // (an array length where the kernel is empty)
#if BQ_E_AFFINE_FLAT
extern "C" __global__ void BQ_LB_FLAT BQ_FN_AFFINE_FLAT(const bq_affine_params p) {
#if BQ_FR
  __shared__ bq_prep bq_fslots[8][32]; // a warp's prepared groups
  bq_prep *slots = bq_fslots[threadIdx.x >> 5];
  const int lane = threadIdx.x & 31;
  const bq_i64 n = p.rows * p.cols, G = p.group;
  const bq_in0 *in0 = (const bq_in0 *)p.in0;
  const bq_in1 *in1 = (const bq_in1 *)p.in1;
  bq_out *out = (bq_out *)p.out;
  bq_i64 pro;
  int w_in0, w_in1, w_out;
  bq_stream_widths(in0, in1, out, n, pro, w_in0, w_in1, w_out);
  const bq_i64 nacc = (n - pro) / BQ_P, tiles = (nacc + 32 * BQ_FR - 1) / (32 * BQ_FR);
  for (bq_i64 t = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < tiles;
       t += ((bq_i64)gridDim.x * blockDim.x) >> 5) {
    const bq_i64 a0 = t * 32 * BQ_FR + lane;
    bq_piece<bq_in0> a[BQ_FL];
#if BQ_HAS_IN1
    bq_piece<bq_in1> b[BQ_FL];
#endif
#pragma unroll
    for (int u = 0; u < BQ_FR; u++) {
      if (a0 + u * 32 < nacc) {
        bq_load(a[u], in0 + pro + (a0 + u * 32) * BQ_P, w_in0);
#if BQ_HAS_IN1
        bq_load(b[u], in1 + pro + (a0 + u * 32) * BQ_P, w_in1);
#endif
      }
    }
    // The tile's groups g0 .. g1 (at most 32: the host bounds G from below), a lane each
    const bq_i64 e0 = pro + t * 32 * BQ_FR * BQ_P, na = nacc - t * 32 * BQ_FR;
    const bq_i64 g0 = bq_blk(p, e0), g1 = bq_blk(p, e0 + (na < 32 * BQ_FR ? na : 32 * BQ_FR) * BQ_P - 1);
    const bq_prep mine = bq_prep_of(p, 0, g0 + lane <= g1 ? g0 + lane : g1);
    __syncwarp(); // the previous tile is done with the slots
    slots[lane] = mine;
    const bool near = __all_sync(0xffffffffu, bq_flat_near(mine)), ok = __all_sync(0xffffffffu, bq_flat_ok(mine));
    __syncwarp();
    unsigned redo = ok ? 0u : ~0u; // bit u: access u again, element by element
#pragma unroll
    for (int u = 0; u < BQ_FR; u++) {
      const bq_i64 acc = a0 + u * 32;
      if (acc >= nacc || (redo >> u & 1)) continue;
      const bq_i64 e = pro + acc * BQ_P, g = bq_blk(p, e);
      const int d = (int)(g - g0), cut = (int)((g + 1) * G - e);
      const bq_prep A = slots[d], B = slots[d < 31 ? d + 1 : 31];
      bq_piece<bq_out> y;
      bool fix = false;
      if (near) bq_flat_piece<true>(a[u], BQ_B(u), A, B, cut, y, &fix);
      else bq_flat_piece<false>(a[u], BQ_B(u), A, B, cut, y, &fix);
      bq_store(out + e, y, w_out);
      if (fix) redo |= 1u << u;
    }
    if (redo) bq_flat_redo(p, slots, g0, in0, in1, out, pro, nacc, a0, redo);
  }
  bq_flat_ends(p, in0, in1, out, n, pro, nacc);
#endif
}
#endif
#endif

#if BQ_GRAN == BQ_GRAN_CHANNEL
// Per channel with the channel axis innermost: the data is [rows, C] (p.rows, p.cols, dense)
// with a scale and zero point per column. The host takes this kernel when C % BQ_CP == 0 and
// every stream is aligned to its chunk. Each lane owns BQ_CP columns, prepares their scales
// and zero points once, and walks down the rows with BQ_R rows in flight, so no element pays
// for a parameter. Grid: x, strips of blockDim.x chunks (a warp's lanes take consecutive
// chunks, the block's warps consecutive strips of 32; the host launches up to 8 warps, no
// more than C needs); y, rows.
#define BQ_CP (BQ_P < 4 ? BQ_P : 4) // columns per lane: 16-byte f32/f64, 8-byte f16/bf16 accesses
// Rows in flight per lane: 64 bytes of the lead stream (32 for fake quantize, whose columns
// keep more parameters in registers). (Dequantize forward, whose lead is the output, is no
// faster with more rows of its int8 input in flight.)
#define BQ_R ((int)((BQ_OP == BQ_OP_FAKE_QUANTIZE ? 32 : 64) / (BQ_CP * BQ_LEAD_SIZE)))
// A block's rows in flight: consecutive rows (f64, dequantize forward), or rows gridDim.y
// apart (the others), whichever reads faster for that kernel.
#define BQ_CONSEC (BQ_FT == BQ_TYPE_F64 || (BQ_OP == BQ_OP_DEQUANTIZE && !BQ_BWD))

// The column kernel's rows, for the lane's columns c0 .. c0 + BQ_CP - 1 with their prepared
// scales and zero points. NEAR (quantize backward, every column's scale plain): the fast
// forms only, so that the general formulas' values need no registers in the loop.
template <bool NEAR, int R>
static __device__ __forceinline__ void bq_cols_rows(const bq_affine_params &p, const bq_scale (&s)[BQ_CP],
                                                    const bq_zp (&z)[BQ_CP], bool slow, bq_i64 c0) {
  const bq_i64 C = p.cols;
  const bq_in0 *in0 = (const bq_in0 *)p.in0;
  const bq_in1 *in1 = (const bq_in1 *)p.in1;
  bq_out *out = (bq_out *)p.out;
  const bq_i64 step = BQ_CONSEC ? 1 : (bq_i64)gridDim.y; // between a lane's rows in flight
  for (bq_i64 r = (bq_i64)blockIdx.y * (BQ_CONSEC ? R : 1); r < p.rows; r += (bq_i64)gridDim.y * R) {
    bq_chunk<bq_in0, BQ_CP> a[R];
#if BQ_HAS_IN1
    bq_chunk<bq_in1, BQ_CP> b[R];
#endif
#pragma unroll
    for (int i = 0; i < R; i++) {
      const bq_i64 k = (r + i * step) * C + c0;
      if (r + i * step < p.rows) {
        bq_load(a[i], in0 + k, 16);
#if BQ_HAS_IN1
        bq_load(b[i], in1 + k, 16);
#endif
      }
    }
    bool fix = slow;
#pragma unroll
    for (int i = 0; i < R; i++) {
      if (r + i * step < p.rows) {
        bq_chunk<bq_out, BQ_CP> y;
#if BQ_OP == BQ_OP_QUANTIZE && BQ_BWD && BQ_FT != BQ_TYPE_F64
        if (NEAR) { // quantize backward as bq_apply_piece's fast form: no division in the loop
          bool ok = true;
#pragma unroll
          for (int j = 0; j < BQ_CP; j++) {
            const bq_c v = bq_div_near(bq_to_c(a[i].e[j]), s[j], ok);
            y.e[j] = bq_in_range_near(bq_to_c(b[i].e[j]), s[j], z[j]) ? bq_from_c(v) : (bq_out)0;
          }
          fix |= !ok;
        } else
#endif
#pragma unroll
        for (int j = 0; j < BQ_CP; j++)
#if BQ_HAS_IN1
          y.e[j] = bq_apply(a[i].e[j], b[i].e[j], s[j], z[j], &fix);
#else
          y.e[j] = bq_apply(a[i].e[j], (bq_in1)0, s[j], z[j], &fix);
#endif
        bq_store(out + (r + i * step) * C + c0, y, 16);
      }
    }
    if (fix) { // rare: these rows again, element by element with the general formulas
#pragma unroll 1
      for (int i = 0; i < R; i++)
#pragma unroll // (s[j] and z[j] must stay registers: no dynamic index)
        for (int j = 0; j < BQ_CP; j++)
          if (r + i * step < p.rows) bq_one((r + i * step) * C + c0 + j, s[j].s, z[j].zp, in0, in1, out);
    }
  }
}

// (the host gives the ops the table's cwave names one wave of blocks, the others a block for
// every BQ_R rows)
#if BQ_E_AFFINE_COLS
extern "C" __global__ void BQ_LB_COLS BQ_FN_AFFINE_COLS(const bq_affine_params p) {
  const bq_i64 C = p.cols, c0 = ((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) * BQ_CP;
  if (c0 >= C) return;
  bq_scale s[BQ_CP];
  bq_zp z[BQ_CP];
  bool slow = false; // a column whose zero point leaves no int32 room (quantize)
  bool plain = true;  // every column's scale needs no power-of-two bracket (bq_div_near)
#pragma unroll
  for (int j = 0; j < BQ_CP; j++) {
    s[j] = bq_scale_of(bq_scale_to_c(__ldg((const bq_s *)p.scales + c0 + j)));
    z[j] = bq_zp_of(p.zps ? __ldg((const int *)p.zps + c0 + j) : 0);
#if BQ_OP == BQ_OP_QUANTIZE && !BQ_BWD
    slow |= !z[j].iok;
#endif
    plain &= s[j].plain;
  }
#if BQ_OP == BQ_OP_QUANTIZE && BQ_BWD && BQ_FT != BQ_TYPE_F64
  if (plain) bq_cols_rows<true, BQ_R / 2>(p, s, z, slow, c0);
  else
#endif
    bq_cols_rows<false, BQ_R>(p, s, z, slow, c0);
}
#endif
#endif


// ---- dense data: one flat array of p.cols elements ----------------------------------------
// The scale and zero point of element e of dense data (p.group: per channel the inner size,
// per token the row length, per group G), prepared
static __device__ __forceinline__ void bq_dense_params(const bq_affine_params &p, bq_i64 e, bq_scale &s, bq_zp &z) {
#if BQ_GRAN == BQ_GRAN_TENSOR
  (void)e;
  s = bq_scale_of((bq_c)p.scale);
  z = bq_zp_of(p.zp);
#elif BQ_GRAN == BQ_GRAN_BLOCK
  (void)p, (void)e, (void)s, (void)z; // (no dense kernel)
#else
  const bq_i64 b = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)e, p.fd_group) : bq_div64(e, p.group);
#if BQ_GRAN == BQ_GRAN_TOKEN
  const bq_prep q = bq_prep_of(p, b, 0); // b: the row
#else
  const bq_prep q = bq_prep_of(p, 0, b); // the channel's run (bq_prep_of takes it modulo p.gmod) or the group
#endif
  s = q.s;
  z = q.z;
#endif
}

#if !BQ_BWD && BQ_OP != BQ_OP_FAKE_QUANTIZE && BQ_GRAN != BQ_GRAN_CHANNEL
// ---- bq_affine_lean ---------------------------------------------------------------------------
// Quantize and dequantize forward, per tensor, per token, per group and per block, over dense
// data whose streams start on their accesses' grid (the lead stream on the 16-byte one), rows,
// groups and blocks a whole number of accesses (the host checks; per group, row-major scales
// with a row of groups a row; per block, row-major scales): each access's parameters looked
// up and prepared in registers after its load, nothing else. The kernel holds few registers,
// so an SM holds many warps, which tensors of a few waves need (the row kernels pay a row's
// set-up per warp). A thread takes BQ_LEAN_U accesses a block's width apart, all loaded
// before any is converted, which keeps more bytes in flight per register where the device
// needs it (the host's table column lu). The thread whose access would be the one past the
// last whole access takes the elements after it. Dequantize stores its output with the
// default cache policy, as its consumer reads it next: streaming the output measured slower
// on the H100.
// Without zero points (per tensor: a zero point of 0) the body runs in a form with the zero
// point folded away, chosen once for the launch; there quantize takes a scale that needs no
// power-of-two bracket straight to bq_quantize_near. Its indices are 32-bit: the host gives
// it tensors of fewer than 2^31 elements. Quantize from 16-bit data without zero points
// takes bq_affine_pair instead where the host allows.
// A vector access of the input (narrower than 8 bytes: bq_load), at the default cache
// policy: on the H100 as fast as or faster than an L2 evict-last policy (which needs each
// line handed back to normal priority after its accesses), than streaming it (ld.cs) or
// than the non-coherent path (ld.nc). Volatile, so that a thread's loads stay ahead of its
// arithmetic.
template <typename C> static __device__ __forceinline__ void bq_lean_load(C &x, const void *src) {
#if !defined(BQ_EMULATED)
  if (sizeof(C) == 16 || sizeof(C) == 8) {
    bq_u32 *v = (bq_u32 *)&x;
    if (sizeof(C) == 16)
      asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(src));
    else
      asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "l"(src));
    return;
  }
#endif
  bq_load<true>(x, src, 16);
}
// The kernels' parameter blocks: per block with the row's geometry after them
#if BQ_GRAN == BQ_GRAN_BLOCK
typedef bq_lean_block_params bq_lean_kp;
typedef bq_pair_block_params bq_pair_kp;
#define BQ_LEAN_P(p) (p).l
#else
typedef bq_lean_params bq_lean_kp;
typedef bq_pair_params bq_pair_kp;
#define BQ_LEAN_P(p) (p)
#endif
// Element e's parameter block: per token its row, per group its group, per block the block of
// its row and column
template <typename P> static __device__ __forceinline__ bq_u32 bq_lean_block(const P &p, bq_u32 e) {
#if BQ_GRAN == BQ_GRAN_BLOCK
  const bq_u32 r = bq_div_u31(e, p.fd_cols), c = e - r * p.fd_cols.d;
  return bq_div_u31(r, p.l.fd_group) * p.grs + bq_div_u31(c, p.l.fd_group);
#else
  return bq_div_u31(e, p.fd_group);
#endif
}
// Element e's scale, as a C value, and its zero point (Z0: none)
template <bool Z0> static __device__ __forceinline__ bq_c bq_lean_param(const bq_lean_kp &kp, bq_u32 e, bq_zp &z) {
  const bq_lean_params &p = BQ_LEAN_P(kp);
#if BQ_GRAN == BQ_GRAN_TENSOR
  (void)e;
  z = bq_zp_of(Z0 ? 0 : p.zp);
  return (bq_c)p.scale;
#else
  const bq_u32 b = bq_lean_block(kp, e);
  const bq_c sv = bq_scale_to_c(__ldg((const bq_s *)p.scales + b));
  z = bq_zp_of(!Z0 && p.zps ? __ldg((const int *)p.zps + b) : 0);
  return sv;
#endif
}
// Access a, loaded into x: its scale and zero point, its conversion and its store
template <bool Z0> static __device__ __forceinline__ void bq_lean_one(const bq_lean_kp &kp, bq_u32 a,
                                                                   const bq_piece<bq_in0> &x) {
  const bq_lean_params &p = BQ_LEAN_P(kp);
  const bq_in0 *in0 = (const bq_in0 *)p.in0;
  bq_out *out = (bq_out *)p.out;
  const bq_u32 e = a * BQ_P;
  bq_zp z;
  const bq_c sv = bq_lean_param<Z0>(kp, e, z);
  bq_piece<bq_out> y;
#if BQ_OP == BQ_OP_QUANTIZE && BQ_FT != BQ_TYPE_F64
  if (Z0 && bq_scale_is_plain(sv)) {
    bq_quantize_near<true, true>(x.e, bq_scale_plain_of(sv), 0, y.e);
    bq_store<true>(out + e, y, 16);
    return;
  }
#endif
  const bq_scale s = bq_scale_of(sv);
  bool fix = false;
#if BQ_OP == BQ_OP_QUANTIZE
  fix = !z.iok; // a zero point within the q-range's width of an int32 limit
#endif
  if (!fix) bq_apply_piece<true>(x, bq_piece<bq_in1>(), s, z, y, &fix);
  if (!fix) {
    bq_store<true>(out + e, y, 16);
    return;
  }
#pragma unroll 1
  for (int j = 0; j < BQ_P; j++) bq_one(e + j, s.s, z.zp, in0, (const bq_in1 *)nullptr, out);
}
template <bool Z0> static __device__ __forceinline__ void bq_lean(const bq_lean_kp &kp) {
  const bq_lean_params &p = BQ_LEAN_P(kp);
  const bq_u32 a0 = blockIdx.x * (blockDim.x * BQ_LEAN_U) + threadIdx.x, na = p.accesses;
  const bq_in0 *in0 = (const bq_in0 *)p.in0;
  bq_piece<bq_in0> x[BQ_LEAN_U];
#pragma unroll
  for (int j = 0; j < BQ_LEAN_U; j++)
    if (a0 + j * blockDim.x < na) bq_lean_load(x[j], in0 + (a0 + j * blockDim.x) * BQ_P);
#pragma unroll
  for (int j = 0; j < BQ_LEAN_U; j++) {
    const bq_u32 a = a0 + j * blockDim.x;
    if (a < na) {
      bq_lean_one<Z0>(kp, a, x[j]);
    } else if (a == na) {
      bq_out *out = (bq_out *)p.out;
      bq_zp z;
#pragma unroll 1
      for (bq_u32 e = na * BQ_P; e < p.n; e++) {
        const bq_scale s = bq_scale_of(bq_lean_param<false>(kp, e, z));
        bq_one(e, s.s, z.zp, in0, (const bq_in1 *)nullptr, out);
      }
    }
  }
}
#if BQ_E_AFFINE_LEAN
extern "C" __global__ void BQ_LB_LEAN BQ_FN_AFFINE_LEAN(const bq_lean_kp p) {
#if BQ_GRAN == BQ_GRAN_TENSOR
  if (p.zp == 0) bq_lean<true>(p);
#else
  if (!BQ_LEAN_P(p).zps) bq_lean<true>(p);
#endif
  else bq_lean<false>(p);
}
#endif
#elif BQ_GRAN != BQ_GRAN_CHANNEL
#if BQ_E_AFFINE_LEAN
extern "C" __global__ void BQ_LB_LEAN BQ_FN_AFFINE_LEAN(const bq_lean_params p) { (void)p; } // never launched
#endif
#endif

#if BQ_GRAN == BQ_GRAN_TOKEN || BQ_GRAN == BQ_GRAN_GROUP || BQ_GRAN == BQ_GRAN_BLOCK
#if !BQ_BWD && BQ_OP == BQ_OP_QUANTIZE && (BQ_FT == BQ_TYPE_F16 || BQ_FT == BQ_TYPE_BF16)
// ---- bq_affine_pair --------------------------------------------------------------------------
// bq_affine_lean's path for quantize from 16-bit data without zero points, per token, per
// group and per block, where rows, groups and blocks are whole pairs of accesses and the
// output is 16-byte aligned (the host checks, bq__affine_lean): thread a takes accesses 2a
// and 2a + 1, which share one scale, and stores their 16 codes at once. An entry point of
// its own, so that nothing is tested before the loads: a thread past the last pair loads
// the last pair again and returns before it stores. The loads are used on both sides of the
// plain-scale test, which keeps them issued ahead of it. There are p.pairs pairs and no
// elements past them.
#if BQ_E_AFFINE_PAIR
extern "C" __global__ void BQ_LB_PAIR BQ_FN_AFFINE_PAIR(const bq_pair_kp kp) {
  const bq_pair_params &p = BQ_LEAN_P(kp);
  const bq_u32 t = blockIdx.x * blockDim.x + threadIdx.x, np = p.pairs;
  const bq_u32 a = min(t, np - 1);
  const bq_in0 *in0 = (const bq_in0 *)p.in0;
  bq_out *out = (bq_out *)p.out;
  const bq_u32 e = a * (2 * BQ_P);
  bq_piece<bq_in0> x0, x1;
  bq_lean_load(x0, in0 + e);
  bq_lean_load(x1, in0 + e + BQ_P);
  const bq_c sv = bq_scale_to_c(__ldg((const bq_s *)p.scales + bq_lean_block(kp, e)));
  bq_piece<bq_out, 2 * BQ_P> y;
  bq_piece<bq_out> &y0 = *reinterpret_cast<bq_piece<bq_out> *>(&y.e[0]);
  bq_piece<bq_out> &y1 = *reinterpret_cast<bq_piece<bq_out> *>(&y.e[BQ_P]);
  bool fix = false;
  bq_scale s;
  if (bq_scale_is_plain(sv)) {
    s = bq_scale_plain_of(sv);
    bq_quantize_near<true, true>(x0.e, s, 0, y0.e);
    bq_quantize_near<true, true>(x1.e, s, 0, y1.e);
  } else {
    s = bq_scale_of(sv);
    const bq_zp z = bq_zp_of(0); // (z.iok: a zero point of 0 leaves int32 room)
    bq_apply_piece<true>(x0, bq_piece<bq_in1>(), s, z, y0, &fix);
    bq_apply_piece<true>(x1, bq_piece<bq_in1>(), s, z, y1, &fix);
  }
  if (t >= np) return;
  if (!fix) bq_store<true>(out + e, y, 16);
  if (fix) {
#pragma unroll 1
    for (int j = 0; j < 2 * BQ_P; j++) bq_one(e + j, s.s, 0, in0, (const bq_in1 *)nullptr, out);
  }
}
#endif
#else
#if BQ_E_AFFINE_PAIR
extern "C" __global__ void BQ_LB_PAIR BQ_FN_AFFINE_PAIR(const bq_pair_params p) { (void)p; } // never launched
#endif
#endif
#endif

#if BQ_GRAN == BQ_GRAN_TENSOR || BQ_GRAN == BQ_GRAN_CHANNEL
// ---- fake quantize with a saved mask: bq_affine_mask ----------------------------------------
// Per tensor and per channel, over one dense array of n = p.cols elements. The forward pass
// writes y and the straight-through mask, a bit an element: bit e % 32 of word e / 32 is 1
// where element e is in range (bq_in_range), and the last word's bits past n are 0. The
// backward pass reads dy and that mask instead of x: dx = dy where the bit is 1, else 0,
// an eighth of a byte an element where x cost its whole width. A warp takes BQ_MU chunks a
// step, each 32 accesses of BQ_P elements (BQ_P words of the mask), and loads them all
// before it computes. A lane's BQ_P bits are shifted into place and OR-ed over the
// 32 / BQ_P lanes that share a word (shuffles), and the first of them stores it. A partial
// chunk, or streams off the 16-byte grid, go element by element: lane l takes elements
// l, l + 32, ... of the chunk, and a ballot gives each word. The other ops' modules get an
// empty kernel of the name, never launched.
#if BQ_OP == BQ_OP_FAKE_QUANTIZE
#define BQ_MU 2            // chunks a warp loads before it computes
#define BQ_LPW (32 / BQ_P) // lanes whose elements share a mask word

// Chunk c of the forward pass (x -> y and the mask) or of the backward pass (dy and the mask
// -> dx), element by element
static __device__ __forceinline__ void bq_mask_chunk_scalar(const bq_affine_params &p, bq_i64 c, int lane) {
  const bq_t *in = (const bq_t *)p.in0;
  bq_t *out = (bq_t *)p.out;
  bq_u32 *mask = (bq_u32 *)p.mask;
#pragma unroll 1
  for (int j = 0; j < BQ_P; j++) {
    const bq_i64 w = c * BQ_P + j, e = w * 32 + lane; // the word, and this lane's element
    const bool ok = e < p.cols;
#if !BQ_BWD
    bool in_range = false;
    if (ok) {
      bq_scale s;
      bq_zp z;
      bq_dense_params(p, e, s, z);
      const bq_c v = bq_to_c(in[e]);
      out[e] = bq_from_c(bq_fake_quantize(v, s, z));
      in_range = bq_in_range(v, s, z);
    }
    const bq_u32 word = __ballot_sync(0xffffffffu, in_range);
    if (lane == 0 && w * 32 < p.cols) mask[w] = word;
#else
    if (ok) out[e] = (__ldg(mask + w) >> lane & 1) ? in[e] : (bq_t)0;
#endif
  }
}

static __device__ __forceinline__ void bq_mask_body(const bq_affine_params &p) {
  const int lane = threadIdx.x & 31;
  const bq_i64 chunk = 32 * BQ_P, chunks = (p.cols + chunk - 1) / chunk;
  const bool vec = ((p.in0 | p.out) & 15) == 0; // both streams on the 16-byte grid
  const bq_t *in = (const bq_t *)p.in0;
  bq_t *out = (bq_t *)p.out;
  bq_u32 *mask = (bq_u32 *)p.mask;
  const int sub = lane % BQ_LPW; // this lane's place among those sharing its word
#if !BQ_BWD && BQ_GRAN == BQ_GRAN_TENSOR
  bq_scale st;
  bq_zp zt;
  bq_dense_params(p, 0, st, zt);
#elif !BQ_BWD
  const bool one = (p.group & (BQ_P - 1)) == 0; // an access never straddles two channels
  bq_scale sc;                                   // the parameters of run rc, kept for the next
  bq_zp zc;                                      // access of the same run
  bq_i64 rc = -1;
#endif
  const bq_i64 step = ((bq_i64)gridDim.x * blockDim.x >> 5) * BQ_MU;
  for (bq_i64 c0 = (((bq_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * BQ_MU; c0 < chunks; c0 += step) {
    if (!vec || (c0 + BQ_MU) * chunk > p.cols) {
#pragma unroll 1
      for (int u = 0; u < BQ_MU && c0 + u < chunks; u++) bq_mask_chunk_scalar(p, c0 + u, lane);
      continue;
    }
    bq_piece<bq_t> a[BQ_MU];
#if BQ_BWD
    bq_u32 m[BQ_MU];
#endif
#pragma unroll
    for (int u = 0; u < BQ_MU; u++) {
      const bq_i64 e = (c0 + u) * chunk + lane * BQ_P;
      bq_load(a[u], in + e, 16);
#if BQ_BWD
      m[u] = __ldg(mask + e / 32) >> (sub * BQ_P);
#endif
    }
#pragma unroll
    for (int u = 0; u < BQ_MU; u++) {
      const bq_i64 e = (c0 + u) * chunk + lane * BQ_P;
      bq_piece<bq_t> y;
#if BQ_BWD
#pragma unroll
      for (int j = 0; j < BQ_P; j++) y.e[j] = (m[u] >> j & 1) ? a[u].e[j] : (bq_t)0;
#else
#if BQ_GRAN == BQ_GRAN_TENSOR
      const bq_scale &s = st;
      const bq_zp &z = zt;
#else
      bq_scale &s = sc;
      bq_zp &z = zc;
      if (one) { // a run's parameters prepared once for all of this lane's accesses of it
        const bq_i64 r = p.fast32 ? (bq_i64)bq_div_u32((bq_u32)e, p.fd_group) : bq_div64(e, p.group);
        if (r != rc) bq_dense_params(p, e, s, z), rc = r;
      }
#endif
      bq_u32 bits = 0;
      // bq_fake_quantize_near's and bq_in_range_near's condition, for the access's one run
#if BQ_GRAN == BQ_GRAN_CHANNEL
      const bool near = one && s.plain && z.lo == z.a && z.hi == z.b;
#else
      const bool near = s.plain && z.lo == z.a && z.hi == z.b;
#endif
      if (near) {
#pragma unroll
        for (int j = 0; j < BQ_P; j++) {
          const bq_c v = bq_to_c(a[u].e[j]);
          y.e[j] = bq_from_c(bq_fake_quantize_near(v, s, z));
          bits |= (bq_u32)bq_in_range_near(v, s, z) << j;
        }
      } else {
#pragma unroll
        for (int j = 0; j < BQ_P; j++) {
#if BQ_GRAN == BQ_GRAN_CHANNEL
          if (!one) bq_dense_params(p, e + j, s, z);
#endif
          const bq_c v = bq_to_c(a[u].e[j]);
          y.e[j] = bq_from_c(bq_fake_quantize(v, s, z));
          bits |= (bq_u32)bq_in_range(v, s, z) << j;
        }
      }
      bits <<= sub * BQ_P;
#pragma unroll
      for (int o = 1; o < BQ_LPW; o <<= 1) bits |= (bq_u32)__shfl_xor_sync(0xffffffffu, (int)bits, o);
      if (sub == 0) mask[e / 32] = bits;
#endif
      bq_store(out + e, y, 16);
    }
  }
}
#endif

#if BQ_E_AFFINE_MASK
extern "C" __global__ void BQ_LB_MASK BQ_FN_AFFINE_MASK(const bq_affine_params p) {
#if BQ_OP == BQ_OP_FAKE_QUANTIZE
  bq_mask_body(p);
#else
  (void)p;
#endif
}
#endif
#endif

#ifndef BQ_AFF_ROT
#define BQ_AFF_ROT 0
#endif
#if BQ_SR || BQ_AFF_ROT
// ---- bq_affine_sr: quantize and fake quantize forward with stochastic rounding, and the ------
// fused rotation (BQ_AFF_ROT: quantize forward rotates x first, dequantize rotates its output
// back, fake quantize does both; its backward pass rotates dy and x, masks, rotates back)
// A thread takes BQ_SR_N consecutive elements of a row (16 of 16-bit data, two generator
// calls' draws whose chains interleave; else 8, one call's): element (r, c) draws at index
// offset + r * cols + c (bq_sr_draws), so the bits depend on neither the grid nor the kernel.
// It moves them with the widest accesses their alignment allows. Each element's parameters
// come from bq_qparams' walker, positioned once for the chunk (per tensor: once a thread).
// The rotation's blocks of n (a power of two dividing the row, at most 32 threads' elements)
// are a thread's own (n <= BQ_SR_N) or n / BQ_SR_N consecutive lanes' (common.cuh's
// bq_rot_apply): the rows hold whole blocks and a warp's threads start at a multiple of 32,
// so those lanes take one row's consecutive chunks, and the place of a lane's chunk in its
// block is the same at every step (its signs drawn once).
#define BQ_SR_N (sizeof(bq_in0) <= 2 ? 16 : 8)
#if BQ_AFF_ROT
// a chunk's N values of T rotated (forward, or backward) by common.cuh's steps, each rounded to T
template <int N, class CH>
static __device__ __forceinline__ void bq_rot_chunk(CH &v, int lane, int log2n, bq_u32 neg, bq_c cn, bool backward,
                                                    bq_u32 mask) {
  bq_c c[N];
#pragma unroll
  for (int k = 0; k < N; k++) c[k] = bq_to_c(v.e[k]);
  bq_rot_apply<N>(c, lane, log2n, neg, cn, backward, mask);
#pragma unroll
  for (int k = 0; k < N; k++) v.e[k] = bq_from_c(c[k]);
}
#endif
#if BQ_E_AFFINE_SR
extern "C" __global__ void BQ_LB_SR BQ_FN_AFFINE_SR(const bq_affine_sr_params sp) {
#if (!BQ_BWD && (BQ_OP == BQ_OP_QUANTIZE || BQ_OP == BQ_OP_FAKE_QUANTIZE || (BQ_AFF_ROT && BQ_OP == BQ_OP_DEQUANTIZE))) || \
    (BQ_AFF_ROT && BQ_BWD && BQ_OP == BQ_OP_FAKE_QUANTIZE)
  constexpr int N = BQ_SR_N;
  const bq_affine_params &p = sp.a;
  const bq_i64 per = (p.cols + N - 1) / N, n = p.rows * per;
  const bq_i64 step = (bq_i64)gridDim.x * blockDim.x;
#if BQ_GRAN == BQ_GRAN_TENSOR
  bq_qparams q;
  bq_qp_at(q, p, 0, 0);
#endif
#if BQ_AFF_ROT
  const int rn = 1 << sp.rlog2, L = rn > N ? rn / N : 1, lane = (int)(threadIdx.x & 31);
  const bq_u32 rmask = L >= 32 ? 0xffffffffu : ((1u << L) - 1u) << (lane & -L);
  const bq_c rc = bq_rot_c(sp.rlog2);
  const bq_u32 rneg = sp.rsigns ? bq_rot_signs<N>((lane * N) & (rn - 1), rn, sp.seed_lo, sp.seed_hi) : 0u;
#endif
  for (bq_i64 t = (bq_i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) {
    const bq_i64 r = p.rows == 1 ? 0 : t / per, c0 = (t - r * per) * N;
#if BQ_SR && !BQ_BWD
    bq_u32 u[N];
    bq_sr_draws<N>(sp.offset + (bq_u64)(r * p.cols + c0), sp.seed_lo, sp.seed_hi, u);
#endif
#if BQ_GRAN != BQ_GRAN_TENSOR
    bq_qparams q;
    bq_qp_at(q, p, r, c0);
#endif
    const bq_in0 *x = (const bq_in0 *)p.in0 + r * p.in0_stride + c0;
    bq_out *y = (bq_out *)p.out + r * p.out_stride + c0;
    bq_chunk<bq_in0, N> a;
    bq_chunk<bq_out, N> b;
    const bool whole = c0 + N <= p.cols;
    if (whole) {
      bq_load(a, x, bq_width(x));
    } else {
#pragma unroll
      for (int k = 0; k < N; k++) a.e[k] = c0 + k < p.cols ? x[k] : (bq_in0)0;
    }
#if BQ_AFF_ROT && BQ_OP != BQ_OP_DEQUANTIZE
    bq_rot_chunk<N>(a, lane, sp.rlog2, rneg, rc, false, rmask); // (past a row's end: whole blocks of zeros)
#endif
#if BQ_BWD // fake quantize backward, rotating: the mask of the rotated x on the rotated dy
    const bq_in1 *xi = (const bq_in1 *)p.in1 + r * p.in1_stride + c0;
    bq_chunk<bq_in1, N> xr;
    if (whole) {
      bq_load(xr, xi, bq_width(xi));
    } else {
#pragma unroll
      for (int k = 0; k < N; k++) xr.e[k] = c0 + k < p.cols ? xi[k] : (bq_in1)0;
    }
    bq_rot_chunk<N>(xr, lane, sp.rlog2, rneg, rc, false, rmask);
#endif
#pragma unroll
    for (int k = 0; k < N; k++) {
#if BQ_BWD
      b.e[k] = bq_apply(a.e[k], xr.e[k], q.s, q.z, nullptr);
#elif BQ_SR && BQ_OP == BQ_OP_QUANTIZE
      b.e[k] = (bq_out)bq_quantize_sr(bq_to_c(a.e[k]), q.s, q.z, u[k]);
#elif BQ_SR
      b.e[k] = bq_from_c(bq_fake_quantize_sr(bq_to_c(a.e[k]), q.s, q.z, u[k]));
#else
      b.e[k] = bq_apply(a.e[k], (bq_in1)0, q.s, q.z, nullptr);
#endif
#if BQ_GRAN != BQ_GRAN_TENSOR
      if (k < N - 1 && c0 + k + 1 < p.cols) bq_qp_next(q, p); // (never a block past the row's last)
#endif
    }
#if BQ_AFF_ROT && BQ_OP != BQ_OP_QUANTIZE
    bq_rot_chunk<N>(b, lane, sp.rlog2, rneg, rc, true, rmask); // the values of T (or dx) rotated back
#endif
    if (whole) {
      bq_store(y, b, bq_width(y));
    } else {
#pragma unroll
      for (int k = 0; k < N; k++)
        if (c0 + k < p.cols) y[k] = b.e[k];
    }
  }
#else
  (void)sp;
#endif
}
#endif
#endif
