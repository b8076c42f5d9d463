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
// A thread takes a group, consecutive threads consecutive groups of a row, so a warp's
// loads cover a contiguous span. bq_mx16 and bq_mx32 hold their group in registers (16-byte
// accesses where every group starts aligned, else element by element); bq_mx_any takes any
// G, reading a dynamic group twice (the second read from L1). E2M1 codes go two a byte, the
// lower index in the low nibble. In the blocked layout dynamic quantize walks the padded
// tiles, and a thread whose group lies in the padding writes its scale byte as 0.

#include "mx_abi.h"

#define BQ_MX_NV (BQ_ST == BQ_TYPE_E4M3) // NVFP4: E4M3 group scales times the tensor scale
#if BQ_IT == BQ_TYPE_E2M1
#define BQ_MX_MAX 6.0f
#define BQ_MX_EMAX 2
#define BQ_MX_MBITS 1
#elif BQ_IT == BQ_TYPE_E4M3
#define BQ_MX_MAX 448.0f
#define BQ_MX_EMAX 8
#define BQ_MX_MBITS 3
#else
#define BQ_MX_MAX 57344.0f
#define BQ_MX_EMAX 15
#define BQ_MX_MBITS 2
#endif

// ---- elements --------------------------------------------------------------------------------
#if BQ_IT == BQ_TYPE_E2M1
// C -> E2M1 code: one round to nearest even onto +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturating
// (6 and past it, inf), NaN -> 0x7, -0 -> 0x8. Each comparison is a midpoint between two
// magnitudes, strict where the tie goes to the lower (even) code and not where it goes up.
static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) {
  const bq_c a = bq_abs(v);
  if (!(a == a)) return 7;
  const int c = (a > (bq_c)0.25) + (a >= (bq_c)0.75) + (a > (bq_c)1.25) + (a >= (bq_c)1.75) + (a > (bq_c)2.5) +
                (a >= (bq_c)3.5) + (a > (bq_c)5.0);
#if BQ_FT == BQ_TYPE_F64
  return c | (__double_as_longlong(v) < 0 ? 8 : 0);
#else
  return c | (int)((__float_as_uint(v) >> 28) & 8u);
#endif
}
// E2M1 code -> C, exact: 0.5 m below 2, else (2 + m % 2) 2^(m / 2 - 2)
static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) {
  const int m = c & 7;
  const float mag = m < 2 ? 0.5f * (float)m : (float)(2 + (m & 1)) * (float)(1 << (m >> 1)) * 0.25f;
  return (bq_c)((c & 8) ? -mag : mag);
}
#else
static __device__ __forceinline__ int bq_mx_elem_of(bq_c v) { return bq_f8_of_c(v); }
static __device__ __forceinline__ bq_c bq_mx_elem_to_c(int c) { return bq_f8_to_c(c); }
#endif

// ---- scales ----------------------------------------------------------------------------------
// UE8M0 byte e -> 2^(e - 127) in f32 (e = 0 is the subnormal 2^-127), 255: NaN
static __device__ __forceinline__ float bq_ue8m0_f32(int e) {
  return __uint_as_float(e == 255 ? 0x7fc00000u : e == 0 ? 0x00400000u : (bq_u32)e << 23);
}
// E4M3 code -> f32, exact (0x7F and 0xFF: NaN)
static __device__ __forceinline__ float bq_e4m3_f32(int c) {
  const bq_u32 mag = (bq_u32)c & 0x7fu;
  float v = __fmul_rn(__uint_as_float(mag << 20), 0x1p120f);
  v = mag == 0x7fu ? __uint_as_float(0x7fffffffu) : v;
  return __uint_as_float(__float_as_uint(v) | (((bq_u32)c & 0x80u) << 24));
}
// f32 -> E4M3 code, round to nearest even, saturating to 448 (NaN: 0x7F)
static __device__ __forceinline__ int bq_e4m3_of(float v) {
  const bq_u32 b = __float_as_uint(v);
  const int sign = (int)((b >> 24) & 0x80u);
  const bq_u32 a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7F;
  if (__uint_as_float(a) >= 448.0f) return sign | 0x7E;
  const int e = (int)(a >> 23) - 127, emin = -6;
  if (e < emin - 4) return sign;
  const bq_u32 m = (a & 0x7fffffu) | 0x800000u;
  const int shift = 20 + (e < emin ? emin - e : 0);
  const bq_u32 keep = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  const bq_u32 up = (rem > half) | ((rem == half) & keep);
  return sign | (int)(((bq_u32)((e < emin ? emin : e) + 6) << 3) + keep + up);
}

// A group's scale as the elements use it: sc = C(scale) (UE8M0's power of two, or NVFP4's
// g times the E4M3 scale, one f32 product), and for UE8M0 its reciprocal, exact (the
// reciprocal of 2^k for k in [-127, 127] is a power of two of f32 too): x * rcp is then
// x / sc rounded once, the same bits as the division.
// NVFP4 under a peer's rule quantizes by the peer's multiplier instead (rcp): torchao's
// (1 / g) / s8, Transformer Engine's min(1 / (s8 g), FLT_MAX), f32 steps as they take them.
struct bq_mx_scale {
  bq_c sc, rcp;
};
static __device__ __forceinline__ bq_mx_scale bq_mx_scale_of(int code, float g) {
  bq_mx_scale s;
#if BQ_MX_NV
  const float s8 = bq_e4m3_f32(code);
  s.sc = (bq_c)__fmul_rn(g, s8);
#if BQ_MX_RULE == 6
  s.rcp = (bq_c)__fdiv_rn(__fdiv_rn(1.0f, g), s8);
#elif BQ_MX_RULE == 7
  s.rcp = (bq_c)fminf(__fdiv_rn(1.0f, __fmul_rn(s8, g)), 0x1.fffffep127f);
#else
  s.rcp = 0;
#endif
#else
  (void)g;
  s.sc = (bq_c)bq_ue8m0_f32(code);
  s.rcp = (bq_c)bq_ue8m0_f32(code == 255 ? 255 : 254 - code);
#endif
  return s;
}
static __device__ __forceinline__ int bq_mx_quantize(bq_c x, const bq_mx_scale &s) {
#if BQ_MX_NV && BQ_MX_RULE == 0
  return bq_mx_elem_of(bq_div(x, s.sc));
#else
  return bq_mx_elem_of(bq_mul(x, s.rcp));
#endif
}

// Dynamic quantize: a group's scale code from its amax (C, >= 0 or inf; NaN elements were
// skipped), by the plan's rule. UE8M0 rules other than the library's are the peers' f32
// rules: amax is taken to f32 first (f64 data, one RNE conversion).
static __device__ __forceinline__ int bq_mx_rule(bq_c amax, float g, float enc) {
#if BQ_MX_NV && BQ_MX_RULE == 6
  // torchao: (amax * f32(1 / 6)) / g, clamped to [2^-6, 448] (NaN kept), to E4M3
  (void)enc;
  const float b = __fdiv_rn(__fmul_rn((float)amax, 0x1.555556p-3f), g);
  return bq_e4m3_of(b < 0x1p-6f ? 0x1p-6f : (b > 448.0f ? 448.0f : b));
#elif BQ_MX_NV && BQ_MX_RULE == 7
  // Transformer Engine: min(amax * (enc * f32(1 / 6)), FLT_MAX), to E4M3 (saturating)
  (void)g;
  return bq_e4m3_of(fminf(__fmul_rn((float)amax, __fmul_rn(enc, 0x1.555556p-3f)), 0x1.fffffep127f));
#elif BQ_MX_NV
  // NVFP4: the group's scale (amax / 6) / g, to E4M3 (RNE, saturating), kept at least
  // E4M3's smallest subnormal so that a group of zeros divides by a nonzero scale
  (void)enc;
  const float a = (float)amax;
  const float b = __fdiv_rn(__fdiv_rn(a, 6.0f), g);
  return bq_e4m3_of(b < 0x1p-9f ? 0x1p-9f : b);
#elif BQ_MX_RULE == 0
  (void)g, (void)enc;
  bq_c s = amax == (bq_c)0 ? (bq_c)1 : bq_div(amax, (bq_c)BQ_MX_MAX);
  return (int)bq_scale_from_c(bq_pow2_up(s));
#else
  (void)g, (void)enc;
  const float a = (float)amax;
#if BQ_MX_RULE == 4 || BQ_MX_RULE == 5 // RCEIL (cuBLAS), RCEIL_SAT (Transformer Engine)
  const float d = __fmul_rn(a, 1.0f / BQ_MX_MAX);
  const bq_u32 u = __float_as_uint(d), e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
  if (e == 0xffu) return BQ_MX_RULE == 5 ? 254 : 255; // (inf: amax is never NaN here)
  const bq_u32 s = e + (e == 0 ? (m > 0x400000u) : (m != 0));
  return (int)(s > 254 ? (BQ_MX_RULE == 5 ? 254u : 255u) : s);
#else // FLOOR (OCP, torchao), CEIL, EVEN
  bq_u32 u = __float_as_uint(a);
  if ((u & 0x7f800000u) == 0x7f800000u) return 255;
#if BQ_MX_RULE == 3
  u = (u + (1u << (22 - BQ_MX_MBITS))) & 0xff800000u;
#endif
  int p = (int)((u >> 23) & 0xffu) - 127;
#if BQ_MX_RULE == 2
  p += (u & 0x7fffffu) != 0;
#endif
  int e = p - BQ_MX_EMAX;
  e = e < -127 ? -127 : (e > 128 ? 128 : e);
  return e + 127;
#endif
#endif
}

// ---- the walk --------------------------------------------------------------------------------
// Item's row and group (items walk rows of pgroups groups: the groups a row has, or in dynamic
// quantize's blocked layout its padded tiles' rows and groups too) and its scale's index;
// false in the padding
static __device__ __forceinline__ bool bq_mx_at(const bq_mx_params &p, bq_i64 item, bq_i64 &r, bq_i64 &g, bq_i64 &si) {
  r = item / p.pgroups;
  g = item - r * p.pgroups;
#if BQ_MX_LAYOUT == 2
  si = ((r >> 7) * ((p.ngroups + 3) >> 2) + (g >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (g & 3);
#elif BQ_MX_LAYOUT == 1
  si = g * p.grs + r;
#else
  si = r * p.grs + g;
#endif
  return r < p.rows && g < p.ngroups;
}

// Bytes of y before element e of a row (E2M1: two codes a byte; the host keeps row strides
// and groups even)
#if BQ_IT == BQ_TYPE_E2M1
#define BQ_MX_YB(e) ((e) >> 1)
#else
#define BQ_MX_YB(e) (e)
#endif
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

#if !(BQ_OP == BQ_OP_FAKE_QUANTIZE || BQ_DIR == BQ_DIR_BACKWARD)
// A group's scale: dynamic quantize's from its amax (capped at the bound), stored at si;
// else the one stored there
static __device__ __forceinline__ bq_mx_scale bq_mx_group_scale(const bq_mx_params &p, bq_c amax, bq_i64 si, float g) {
#if BQ_OP == BQ_OP_DYNAMIC_QUANTIZE
  if (p.bound > 0 && !(amax <= (bq_c)p.bound)) amax = (bq_c)p.bound;
  const int code = bq_mx_rule(amax, g, bq_mx_enc(p, g));
  bq_mx_put_scale(p, si, code);
#else
  (void)amax;
  const int code = ((const bq_u8 *)p.scales)[si];
#endif
  return bq_mx_scale_of(code, g);
}

// One group of N elements (N = G, or 0: p.group at run time) at x + x0, y + y0 (elements),
// scale index si. Fixed N: the group in registers, moved in accesses as wide as its
// alignment allows.
template <int N>
static __device__ __forceinline__ void bq_mx_one(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, float g) {
#if BQ_OP == BQ_OP_DEQUANTIZE
  const bq_mx_scale s = bq_mx_scale_of(((const bq_u8 *)p.scales)[si], g);
  const bq_u8 *q = (const bq_u8 *)p.x + BQ_MX_YB(x0); // codes in, floats out
  bq_t *out = (bq_t *)p.y + y0;
  if (N) {
    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;
    bq_load(c, q, bq_width(q));
    bq_chunk<bq_t, (N > 0 ? N : 1)> o;
#pragma unroll
    for (int j = 0; j < N; j++) {
#if BQ_IT == BQ_TYPE_E2M1
      const int code = (c.e[j >> 1] >> ((j & 1) * 4)) & 15;
#else
      const int code = c.e[j];
#endif
      o.e[j] = bq_from_c(bq_mul(bq_mx_elem_to_c(code), s.sc));
    }
    bq_store(out, o, bq_width(out));
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
    bq_load(v, x, bq_width(x));
    bq_c amax = 0;
    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE)
#pragma unroll
      for (int j = 0; j < N; j++) amax = bq_max(amax, bq_abs(bq_to_c(v.e[j]))); // (fmax drops NaN)
    const bq_mx_scale s = bq_mx_group_scale(p, amax, si, g);
    bq_chunk<bq_u8, BQ_MX_YB(N > 0 ? N : 2)> c;
#pragma unroll
    for (int j = 0; j < N; j++) {
      const int q = bq_mx_quantize(bq_to_c(v.e[j]), s);
#if BQ_IT == BQ_TYPE_E2M1
      if (j & 1) c.e[j >> 1] = (bq_u8)(c.e[j >> 1] | (q << 4));
      else c.e[j >> 1] = (bq_u8)q;
#else
      c.e[j] = (bq_u8)q;
#endif
    }
    bq_store(y, c, bq_width(y));
  } else {
    bq_c amax = 0;
    if (BQ_OP == BQ_OP_DYNAMIC_QUANTIZE)
      for (bq_i64 j = 0; j < p.group; j++) amax = bq_max(amax, bq_abs(bq_to_c(x[j])));
    const bq_mx_scale s = bq_mx_group_scale(p, amax, si, g);
#if BQ_IT == BQ_TYPE_E2M1
    for (bq_i64 j = 0; j < p.group; j += 2)
      y[j >> 1] = (bq_u8)(bq_mx_quantize(bq_to_c(x[j]), s) | (bq_mx_quantize(bq_to_c(x[j + 1]), s) << 4));
#else
    for (bq_i64 j = 0; j < p.group; j++) y[j] = (bq_u8)bq_mx_quantize(bq_to_c(x[j]), s);
#endif
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
static __device__ __forceinline__ bq_t bq_mx_elem_out(bq_t x, bq_t dy, const bq_mx_scale &s) {
#if BQ_DIR == BQ_DIR_FORWARD // fake quantize
  (void)dy;
  return bq_from_c(bq_mul(bq_mx_elem_to_c(bq_mx_quantize(bq_to_c(x), s)), s.sc));
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
// One group: x at x0 (and dx there), y / dy at y0, elements of T; fixed N in registers
template <int N>
static __device__ __forceinline__ void bq_mx_one_t(const bq_mx_params &p, bq_i64 x0, bq_i64 y0, bq_i64 si, float g) {
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
    if (need_x) bq_load(a, in, bq_width(in));
    if (need_dy) bq_load(b, din, bq_width(din));
#pragma unroll
    for (int j = 0; j < N; j++) o.e[j] = bq_mx_elem_out(need_x ? a.e[j] : b.e[j], need_dy ? b.e[j] : a.e[j], s);
    bq_store(out, o, bq_width(out));
  } else {
    for (bq_i64 j = 0; j < p.group; j++)
      out[j] = bq_mx_elem_out(need_x ? in[j] : din[j], need_dy ? din[j] : in[j], s);
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
    bq_mx_one_t<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, g);
#else
    bq_mx_one<N>(p, r * p.xs + gi * n, r * p.ys + gi * n, si, g);
#endif
  }
}

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
#if BQ_MX_RULE == 6 // torchao: amax * f32(1 / 2688), no guard
      *(float *)p.out_tensor_scale = __fmul_rn(a, 0x1.861862p-12f);
#elif BQ_MX_RULE == 7 // Transformer Engine: the encode factor, 1 where amax is 0 or infinite
      float enc = fminf(__fdiv_rn(2688.0f, a), 0x1.fffffep127f);
      enc = a == 0.0f || enc == 0.0f ? 1.0f : enc;
      ws[p.nparts] = enc;
      *(float *)p.out_tensor_scale = __fdiv_rn(1.0f, enc);
#else
      *(float *)p.out_tensor_scale = a == 0.0f || !(a <= 0x1.fffffep127f) ? 1.0f : __fdiv_rn(a, 2688.0f);
#endif
    }
  }
}
#endif
