// affine.cu - quantize / dequantize / fake quantize, forward and backward (STE), for
// every granularity: per tensor, per channel, per token and per group.
// Prelude defines (besides common.cuh's): BQ_OP 1 quantize, 2 dequantize, 3 fake
// quantize; BQ_BWD 0 forward, 1 backward; BQ_GRAN 0 tensor, 1 channel, 2 token, 3 group.
//
// One kernel shape serves all of them: the data is [rows, cols] with a row stride per
// stream (per tensor and per channel are a single dense row). A team of TPR threads
// (a power of two, 32..256, chosen by the host from cols) takes one segment of one row
// at a time; each thread moves one chunk of VEC elements with 16-byte loads and stores.
// Every row gets a scalar prologue up to the first 16-byte boundary of its input and a
// scalar tail; a row whose streams cannot be aligned together goes element by element.

#if BQ_OP == 1 && !BQ_BWD
typedef bq_t bq_in0;
typedef bq_i bq_out;
#define BQ_HAS_IN1 0
#elif BQ_OP == 2 && !BQ_BWD
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
#define BQ_HAS_IN1 (BQ_OP != 2) // x, for the mask
#endif
typedef bq_t bq_in1;

#define BQ_MIN2(a, b) ((a) < (b) ? (a) : (b))
#if BQ_HAS_IN1
#define BQ_MINSIZE BQ_MIN2(BQ_MIN2(sizeof(bq_in0), sizeof(bq_in1)), sizeof(bq_out))
#else
#define BQ_MINSIZE BQ_MIN2(sizeof(bq_in0), sizeof(bq_out))
#endif
#define BQ_VEC ((int)(16 / BQ_MINSIZE)) // elements per chunk: >= 16 bytes of each stream

struct bq_affine_params {
  bq_u64 in0, in1, out;                 // device pointers
  bq_i64 rows, cols;                    // [rows, cols]
  bq_i64 in0_stride, in1_stride, out_stride;
  bq_i64 segs;                          // segments per row
  bq_i64 group;                         // channel: inner size; group: G
  bq_i64 gmod;                          // channel: number of channels
  bq_i64 grs;                           // group: row stride of scales / zero points
  bq_u64 scales, zps;                   // device arrays (zps may be 0: all zero)
  double scale;                         // per tensor: the scale, already a C value
  bq_fastdiv fd_group, fd_gmod;         // 32-bit dividers, valid when fast32 != 0
  int zp;                               // per tensor
  int fast32;                           // indices fit in 32 bits
  int tpr;                              // threads per team (row segment)
  int pad_;
};

template <int N> struct __align__(16) bq_chunk_in0 { bq_in0 e[N]; };
template <int N> struct __align__(16) bq_chunk_in1 { bq_in1 e[N]; };
template <int N> struct __align__(16) bq_chunk_out { bq_out e[N]; };

template <typename C> static __device__ __forceinline__ void bq_load16(C &dst, const void *src) {
  const uint4 *s = (const uint4 *)src;
  uint4 *d = (uint4 *)&dst;
#pragma unroll
  for (int i = 0; i < (int)(sizeof(C) / 16); i++) d[i] = __ldcs(s + i);
}
template <typename C> static __device__ __forceinline__ void bq_store16(void *dst, const C &src) {
  uint4 *d = (uint4 *)dst;
  const uint4 *s = (const uint4 *)&src;
#pragma unroll
  for (int i = 0; i < (int)(sizeof(C) / 16); i++) __stcs(d + i, s[i]);
}

static __device__ __forceinline__ bq_out bq_apply(bq_in0 a, bq_in1 b, bq_c s, int zp) {
#if BQ_OP == 1 && !BQ_BWD
  return (bq_out)bq_quantize(bq_to_c(a), s, zp);
#elif BQ_OP == 2 && !BQ_BWD
  return bq_from_c(bq_dequantize((int)a, s, zp));
#elif BQ_OP == 3 && !BQ_BWD
  return bq_from_c(bq_dequantize(bq_quantize(bq_to_c(a), s, zp), s, zp));
#elif BQ_OP == 1
  return bq_in_range(bq_to_c(b), s, zp) ? bq_from_c(bq_div(bq_to_c(a), s)) : (bq_out)0;
#elif BQ_OP == 2
  return bq_from_c(bq_mul(bq_to_c(a), s));
#else
  return bq_in_range(bq_to_c(b), s, zp) ? a : (bq_out)0;
#endif
}

// Where an element's scale and zero point come from: per tensor, the parameters; per
// token, the row; per channel and per group, an index that walks along the row. `at`
// positions the walker on element k of row r (one division per chunk, none per element),
// `next` steps it by one element.
struct bq_qparams {
  bq_i64 base, g, rem;
  bq_c s;
  int zp;
};
static __device__ __forceinline__ void bq_qp_load(bq_qparams &q, const bq_affine_params &p) {
#if BQ_GRAN == 1 || BQ_GRAN == 3
  bq_i64 i = q.base + q.g;
  q.s = bq_scale_to_c(((const bq_s *)p.scales)[i]);
  q.zp = p.zps ? ((const int *)p.zps)[i] : 0;
#endif
}
static __device__ __forceinline__ void bq_qp_at(bq_qparams &q, const bq_affine_params &p, bq_i64 r,
                                                bq_i64 k) {
#if BQ_GRAN == 0
  q.s = (bq_c)p.scale;
  q.zp = p.zp;
#elif BQ_GRAN == 2
  q.s = bq_scale_to_c(((const bq_s *)p.scales)[r]);
  q.zp = p.zps ? ((const int *)p.zps)[r] : 0;
#else
  bq_i64 g;
  if (p.fast32) {
    g = bq_div_u32((bq_u32)k, p.fd_group);
  } else {
    g = bq_div64(k, p.group);
  }
  q.rem = k - g * p.group;
#if BQ_GRAN == 1
  bq_i64 m;
  if (p.fast32) {
    m = bq_div_u32((bq_u32)g, p.fd_gmod);
  } else {
    m = bq_div64(g, p.gmod);
  }
  g -= m * p.gmod;
  q.base = 0;
#else
  q.base = r * p.grs;
#endif
  q.g = g;
  bq_qp_load(q, p);
#endif
}
static __device__ __forceinline__ void bq_qp_next(bq_qparams &q, const bq_affine_params &p) {
#if BQ_GRAN == 1 || BQ_GRAN == 3
  if (++q.rem == p.group) {
    q.rem = 0;
    ++q.g;
#if BQ_GRAN == 1
    if (q.g == p.gmod) q.g = 0;
#endif
    bq_qp_load(q, p);
  }
#endif
}

// One element, for prologues, tails and rows that cannot use vectors: out of line, so
// its code exists once.
static __device__ __noinline__ void bq_one(const bq_affine_params &p, bq_i64 r, bq_i64 k,
                                              const bq_in0 *in0, const bq_in1 *in1, bq_out *out) {
  bq_qparams q;
  bq_qp_at(q, p, r, k);
#if BQ_HAS_IN1
  out[k] = bq_apply(in0[k], in1[k], q.s, q.zp);
#else
  out[k] = bq_apply(in0[k], (bq_in1)0, q.s, q.zp);
#endif
}

extern "C" __global__ void __launch_bounds__(256) bq_affine(const bq_affine_params p) {
  const int tpr = p.tpr;
  const int teams = blockDim.x / tpr;
  const int lane = threadIdx.x & (tpr - 1);
  const bq_i64 work = p.rows * p.segs;
  for (bq_i64 w = (bq_i64)blockIdx.x * teams + threadIdx.x / tpr; w < work;
       w += (bq_i64)gridDim.x * teams) {
    bq_i64 r, sg;
#if BQ_GRAN <= 1
    r = 0; // per tensor and per channel: one dense row
    sg = w;
#else
    if (p.segs == 1) {
      r = w;
      sg = 0;
    } else {
      r = bq_div64(w, p.segs);
      sg = w - r * p.segs;
    }
#endif
    const bq_in0 *in0 = (const bq_in0 *)p.in0 + r * p.in0_stride;
    const bq_in1 *in1 = (const bq_in1 *)p.in1 + r * p.in1_stride;
    bq_out *out = (bq_out *)p.out + r * p.out_stride;
    const bq_i64 cols = p.cols;

    // Prologue length: elements until in0 reaches a 16-byte boundary. The row can use
    // vectors only if every stream is 16-byte aligned at that same element.
    bq_i64 pro = (bq_i64)(((16 - ((bq_u64)in0 & 15)) & 15) / sizeof(bq_in0));
    if (pro > cols) pro = cols;
    bool vec_ok = (((bq_u64)(out + pro)) & 15) == 0;
#if BQ_HAS_IN1
    vec_ok = vec_ok && (((bq_u64)(in1 + pro)) & 15) == 0;
#endif
    if (vec_ok) {
      const bq_i64 nch = (cols - pro) / BQ_VEC;
      const bq_i64 c = sg * tpr + lane;
      if (c < nch) {
        const bq_i64 k0 = pro + c * BQ_VEC;
        bq_chunk_in0<BQ_VEC> a;
        bq_chunk_out<BQ_VEC> y;
        bq_load16(a, in0 + k0);
#if BQ_HAS_IN1
        bq_chunk_in1<BQ_VEC> b;
        bq_load16(b, in1 + k0);
#endif
        bq_qparams q;
        bq_qp_at(q, p, r, k0);
#pragma unroll
        for (int j = 0; j < BQ_VEC; j++) {
#if BQ_HAS_IN1
          y.e[j] = bq_apply(a.e[j], b.e[j], q.s, q.zp);
#else
          y.e[j] = bq_apply(a.e[j], (bq_in1)0, q.s, q.zp);
#endif
          if (j + 1 < BQ_VEC) bq_qp_next(q, p);
        }
        bq_store16(out + k0, y);
      }
      if (sg == 0) {
        // prologue and tail: fewer than 2 * BQ_VEC <= 32 elements, one per lane
        const bq_i64 tail0 = pro + nch * BQ_VEC;
        if (lane < pro) bq_one(p, r, lane, in0, in1, out);
        else if (lane - pro < cols - tail0) bq_one(p, r, tail0 + (lane - pro), in0, in1, out);
      }
    } else {
      const bq_i64 k_end = (sg + 1) * tpr * BQ_VEC < cols ? (sg + 1) * tpr * BQ_VEC : cols;
      for (bq_i64 k = sg * tpr * BQ_VEC + lane; k < k_end; k += tpr) bq_one(p, r, k, in0, in1, out);
    }
  }
}
